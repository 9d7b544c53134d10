/* The end of a pull (spec 9.15.5, 12.3.5) between whole engines on the
 * virtual clock (label sim): the server tells its client PULL_END once its
 * walk is over, and the client, once every entry ended on its side, closes
 * as a push's client does (9.11's quick close) instead of waiting one
 * round trip for the server's CLOSE. A lost PULL_END is sent again; lost
 * CLOSEs or FILE_RESULTs leave the client's files whole and the server
 * ends all the same; without the extension on either side (an old client
 * or an old server) the pull ends by the server's CLOSE as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"

#define WINDOW 64u
#define BLOCK (1452u - AFTP_WIRE_DATA_OVERHEAD)
#define ONE_WAY_NS (75 * SIM_MS) /* a 150 ms round trip */
#define RTT_NS (2 * ONE_WAY_NS)
#define QUICK_NS (20 * SIM_MS)   /* 16 CLOSE copies 1 ms apart fit well inside */

static const char *const request[] = {"d"};

/* What one run does to the datagrams (set by the test), and what it saw. */
typedef struct end_run {
    int cipher;            /* both sides': AFTP_CIPHER_AUTO (0, protected) or NONE */
    aftp_storage_ops server_ops;
    int strip;             /* the HELLO's PULL_END becomes a type no server knows */
    int drop_pull_ends;    /* PULL_ENDs of the server to lose */
    int drop_closes;       /* lose every CLOSE of the client */
    int drop_results;      /* lose every FILE_RESULT of the client */
    int announced;         /* a HELLO carried PULL_END */
    int pull_ends;         /* PULL_ENDs the server sent */
    int closes;            /* CLOSEs of the client that reached the link */
    int results_after_close; /* FILE_RESULTs of the client after its first CLOSE */
    int server_lost_result;  /* the server's ENTRY_END with PEER_CLOSED */
    int asked;             /* the request's path was decided */
    int forge_count;       /* unprotected runs: PULL_END says this many entries instead */
    int no_data;           /* the tree is a directory and an empty file: no DATA at all */
} end_run;

static end_run er;

static int pull_path(void *user, uint32_t index, const char *path, unsigned flags)
{
    (void)user;
    (void)index;
    (void)flags;
    er.asked = 1;
    return strcmp(path, "d") == 0 ? AFTP_OK : AFTP_ERR_NOT_FOUND;
}

static void server_event(void *user, const aftp_event *ev)
{
    if (ev->type == AFTP_EV_ENTRY_END && ev->error == AFTP_ERR_PEER_CLOSED)
        er.server_lost_result++;
    sim_on_event(user, ev);
}

static void tune(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    aftp_pull_request q = {.paths = request, .path_count = 1};
    sim_tune_pull(s, r, &er.server_ops, pull_path, WINDOW, &q);
    s->on_event = server_event;
}

static void add(sim_storage *st, aftp_sender *snd, int kind, const char *path, uint64_t size)
{
    uint32_t id = (uint32_t)st->nfiles + 1;
    aftp_entry_info e = {.file = {.file_id = id, .size = size,
                                  .mode = kind == AFTP_ENTRY_DIR ? 0755 : 0644,
                                  .mtime_ns = 1700000000 * SIM_S, .path = path},
                         .kind = kind, .flags = 0, .source_id = 7};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
    sim_storage_add_entry(st, kind, path, size, kind == AFTP_ENTRY_FILE ? BLOCK : 0, NULL);
}

/* The server's walk, once the request is decided: a directory, a large
 * file and a small one, then finish. */
static int walk(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    (void)ctx;
    (void)now;
    if (!er.asked) /* storage decides the request first (in message 1, 12.3.4) */
        return 0;
    if (st->nfiles == 0) {
        add(st, snd, AFTP_ENTRY_DIR, "d", 0);
        add(st, snd, AFTP_ENTRY_FILE, "d/a.bin", er.no_data ? 0 : 1000000);
        if (!er.no_data)
            add(st, snd, AFTP_ENTRY_FILE, "d/b.bin", 70001);
    }
    return 1;
}

/* The client's datagrams on their way to the server (type in the clear
 * header): the HELLO's announcement seen (and hidden), CLOSEs and
 * FILE_RESULTs counted and lost as the run asks. */
static int client_to_server(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    (void)ctx;
    (void)now;
    size_t at = sim_hello_ext_at(pkt, len, AFTP_WIRE_EXT_PULL_END);
    if (at != 0) {
        er.announced = 1;
        if (er.strip)
            ((uint8_t *)(uintptr_t)pkt)[at] = 0xF0; /* the link's own copy */
    }
    if (pkt[1] == AFTP_WIRE_CLOSE) {
        er.closes++;
        return !er.drop_closes;
    }
    if (pkt[1] == AFTP_WIRE_FILE_RESULT) {
        er.results_after_close += er.closes > 0;
        return !er.drop_results;
    }
    return 1;
}

static void wire_put_u32(uint8_t *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* When the server's last FILE_DONE left: the client has every block one
 * way later (no loss in these runs) and verifies at once. */
static uint64_t last_done_ns;

static void see_server(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    (void)ctx;
    if (dg->head[1] == AFTP_WIRE_FILE_DONE)
        last_done_ns = now;
}

static int server_to_client(void *ctx, const aftp_datagram *dg)
{
    (void)ctx;
    if (dg->head[1] != AFTP_WIRE_PULL_END)
        return 1;
    er.pull_ends++;
    if (er.forge_count != 0) /* the sender's buffer, read by the link after this */
        wire_put_u32((uint8_t *)(uintptr_t)dg->head + AFTP_WIRE_HEADER_LEN,
                     (uint32_t)er.forge_count);
    return er.pull_ends > er.drop_pull_ends;
}

/* One pull as `setup` says, the client's files checked whole. */
static void run(sim_result *r, end_run setup)
{
    sim_cfg c;
    er = setup;
    sim_cfg_default(&c);
    c.cipher = er.cipher;
    c.nfiles = 0;
    c.tune = tune;
    c.refill = walk;
    c.fwd.delay_ns = c.rev.delay_ns = ONE_WAY_NS;
    c.rev_tap = client_to_server;
    c.fwd_filter = server_to_client;
    c.fwd_tap = see_server;
    last_done_ns = 0;
    sim_run(&c, r);
    assert_false(r->stuck);
    assert_int_equal(r->rcv_side.ev.closed, 1);
    if (er.forge_count != 0)
        return;
    for (uint32_t id = 2; id <= (er.no_data ? 2u : 3u); id++)
        assert_true(sim_file_intact(&r->st, id));
    printf("[sim] client closed %.1f ms after its last file ended, %.1f ms after the last "
           "FILE_DONE reached it; server closed %.1f ms after the client\n",
           (double)(r->rcv_side.ev.closed_at - r->rcv_side.ev.file_end_at) / (double)SIM_MS,
           ((double)r->rcv_side.ev.closed_at - (double)(last_done_ns + ONE_WAY_NS)) /
               (double)SIM_MS,
           ((double)r->snd_side.ev.closed_at - (double)r->rcv_side.ev.closed_at) /
               (double)SIM_MS);
}

static uint64_t client_lag(const sim_result *r)
{
    return r->rcv_side.ev.closed_at - r->rcv_side.ev.file_end_at;
}

/* The client closes within a few ms of committing its last file, not one
 * round trip later, and commits it at once (no file can join its group
 * after PULL_END, so the group does not wait its 10 ms or more); the
 * server has every result and ends cleanly too. */
static void test_client_ends_after_its_last_file(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.cipher = AFTP_CIPHER_AUTO});
    sim_expect_clean_end(&r);
    assert_true(er.announced);
    assert_true(er.pull_ends >= 1);
    assert_true(er.closes >= 1); /* the server is gone after the first */
    assert_true(client_lag(&r) < QUICK_NS);
    assert_true(r.rcv_side.ev.closed_at < last_done_ns + ONE_WAY_NS + 5 * SIM_MS);
    assert_int_equal(er.server_lost_result, 0);
    sim_result_free(&r);
}

/* Every CLOSE of the client lost: the client's files are whole and it
 * ended at once all the same; the server, which had every FILE_RESULT,
 * ends with its own CLOSE and closing period. */
static void test_lost_closes(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.drop_closes = 1});
    sim_expect_clean_end(&r);
    assert_true(er.closes >= 3);
    assert_true(client_lag(&r) < QUICK_NS);
    assert_int_equal(er.server_lost_result, 0);
    sim_result_free(&r);
}

/* Every FILE_RESULT lost, their copies with the CLOSEs too. The client
 * ended at once with its files whole; the server ends AFTP_OK on the
 * client's CLOSE and reports the files whose result it never had as
 * PEER_CLOSED. */
static void test_lost_results(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.drop_results = 1});
    sim_expect_clean_end(&r);
    assert_true(client_lag(&r) < QUICK_NS);
    assert_int_equal(er.server_lost_result, 2);
    sim_result_free(&r);
}

/* Every CLOSE and every FILE_RESULT lost: nothing tells the server; it
 * ends at its idle timeout, the client's files whole and its end clean.
 * Each CLOSE copy after the first went behind copies of the latest
 * FILE_RESULTs (both files ended within a PTO of the close). */
static void test_lost_closes_and_results(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.drop_closes = 1, .drop_results = 1});
    assert_int_equal(r.rcv_error, AFTP_OK);
    assert_true(client_lag(&r) < QUICK_NS);
    assert_int_equal(r.snd_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_true(er.closes >= 3);
    assert_true(er.results_after_close >= 2 * (er.closes - 1));
    sim_result_free(&r);
}

/* The first PULL_END lost: the server sends it again behind the last
 * FILE_DONE, and the client still closes at once. */
static void expect_lost_pull_end_repeated(int no_data)
{
    sim_result r;
    run(&r, (end_run){.drop_pull_ends = 1, .no_data = no_data});
    sim_expect_clean_end(&r);
    assert_true(er.pull_ends >= 2);
    assert_true(client_lag(&r) < QUICK_NS);
    sim_result_free(&r);
}

static void test_lost_pull_end_is_repeated(void **state)
{
    (void)state;
    expect_lost_pull_end_repeated(0);
}

/* The same in a session without DATA (a directory and an empty file):
 * the empty file's FILE_DONE brings PULL_END again. */
static void test_lost_pull_end_without_data(void **state)
{
    (void)state;
    expect_lost_pull_end_repeated(1);
}

/* The HELLO's PULL_END hidden from the server: to the server an old
 * client, to which it never sends PULL_END; to the client an old server
 * (its HELLO_ACK has no PULL_END). The pull ends as before: by the
 * server's CLOSE, one round trip after the client's last result left. */
static void test_without_the_extension(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.strip = 1});
    sim_expect_clean_end(&r);
    assert_true(er.announced);
    assert_int_equal(er.pull_ends, 0);
    assert_true(client_lag(&r) >= RTT_NS);
    assert_int_equal(er.closes, 1); /* the answer to the server's CLOSE */
    sim_result_free(&r);
}

/* A PULL_END below an entry already offered (an unprotected session, the
 * count rewritten on the way): the client closes with a protocol error
 * naming both figures. */
static void test_pull_end_below_an_offered_entry(void **state)
{
    (void)state;
    sim_result r;
    run(&r, (end_run){.forge_count = 1, .cipher = AFTP_CIPHER_NONE});
    assert_int_equal(r.rcv_error, AFTP_ERR_MALFORMED);
    assert_non_null(strstr(r.rcv_side.ev.message, "PULL_END says 1 entries, but it offered "
                                                  "entry 3"));
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_ends_after_its_last_file),
        cmocka_unit_test(test_lost_closes),
        cmocka_unit_test(test_lost_results),
        cmocka_unit_test(test_lost_closes_and_results),
        cmocka_unit_test(test_lost_pull_end_is_repeated),
        cmocka_unit_test(test_lost_pull_end_without_data),
        cmocka_unit_test(test_without_the_extension),
        cmocka_unit_test(test_pull_end_below_an_offered_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
