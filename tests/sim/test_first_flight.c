/* Early entries (label sim, spec 12.3.4): the first entries ride in the
 * HELLO's message 1, the server's verdicts follow its HELLO_ACK, and the
 * first DATA leaves one round trip after the first HELLO instead of two;
 * a server that does not know the extension ignores it and the entries go
 * in ENTRIES as before; a replayed HELLO takes no entry a second time. */
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
#define ONE_WAY_NS (75 * SIM_MS) /* a 150 ms round trip */
#define RTT_NS (2 * ONE_WAY_NS)
#define MAX_DGRAM 1452u

static void pipelined(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = WINDOW;
    r->pipeline_window = WINDOW;
}

/* When the first HELLO and DATA left, and what the filter saw. */
typedef struct first_flight {
    sim_first first;
    int announced;     /* the HELLO carried EARLY_ENTRIES */
    int strip;         /* the filter turns EARLY_ENTRIES into a type no server knows */
    int entries_sent;  /* ENTRIES datagrams the sender wrote */
    int drop_verdicts; /* the first VERDICTS the receiver sends is lost */
    int verdicts_dropped;
} first_flight;

static void note_flight(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    first_flight *f = ctx;
    sim_first_record(&f->first, now, dg);
    f->entries_sent += dg->head[1] == AFTP_WIRE_ENTRIES;
}

/* Loses the first VERDICTS on its way to the sender when asked to. */
static int lose_first_verdicts(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    first_flight *f = ctx;
    (void)now;
    if (!f->drop_verdicts || f->verdicts_dropped || len < 2 || pkt[1] != AFTP_WIRE_VERDICTS)
        return 1;
    f->verdicts_dropped = 1;
    return 0;
}

/* The offset of the EARLY_ENTRIES TLV in a HELLO, 0 when there is none. */
static size_t early_tlv_at(const aftp_datagram *dg)
{
    return sim_hello_ext_at(dg->head, dg->head_len, AFTP_WIRE_EXT_EARLY_ENTRIES);
}

/* An old server: it sees the HELLO's EARLY_ENTRIES as a type it does not
 * know (0xF007, private), which is what a server written before the
 * extension sees. The HELLO is not sealed and the prologue does not cover
 * extensions, so message 1 still opens. */
static int strip_early(void *ctx, const aftp_datagram *dg)
{
    first_flight *f = ctx;
    size_t at = early_tlv_at(dg);
    if (at != 0) {
        f->announced = 1;
        if (f->strip) {
            uint8_t *head = (uint8_t *)(uintptr_t)dg->head; /* the sim's own send buffer */
            head[at] = 0xF0;
        }
    }
    return 1;
}

/* Two files over 150 ms; the first DATA's delay after the first HELLO. */
static void run_two_files(first_flight *f, sim_result *r)
{
    sim_cfg c;
    sim_cfg_default(&c);
    c.nfiles = 2;
    c.file_size = 1 << 20;
    c.fwd.delay_ns = ONE_WAY_NS;
    c.rev.delay_ns = ONE_WAY_NS;
    c.tune = pipelined;
    c.fwd_tap = note_flight;
    c.fwd_tap_ctx = f;
    c.rev_tap = lose_first_verdicts;
    c.rev_tap_ctx = f;
    c.fwd_filter = strip_early;
    c.fwd_filter_ctx = f;
    sim_run(&c, r);
    sim_report(f->strip ? "early entries, old server" : "early entries", &c, r);
    sim_expect_clean_end(r);
    for (uint32_t id = 1; id <= 2; id++) {
        assert_true(sim_file_intact(&r->st, id));
        assert_true(sim_storage_file(&r->st, id)->committed);
    }
    assert_int_equal(r->snd_side.ev.entry_end, 2);
    assert_true(f->first.has_hello && f->first.has_data);
}

/* One round trip from the first HELLO to the first DATA: the HELLO_ACK
 * and the verdicts arrive together (two without early entries). */
static void test_first_data_one_rtt_after_hello(void **state)
{
    (void)state;
    first_flight f = {0};
    sim_result r;
    run_two_files(&f, &r);
    assert_true(f.first.data_at - f.first.hello_at < RTT_NS + RTT_NS / 2);
    assert_true(f.announced);
    assert_int_equal(f.entries_sent, 0); /* both rode in message 1 */
    sim_result_free(&r);
}

/* The early entries' VERDICTS lost: the sender resends the entries in an
 * ENTRIES on its control timer, as it would any ENTRIES without verdicts,
 * gets their verdicts again, and the transfer completes. */
static void test_lost_early_verdicts_resent(void **state)
{
    (void)state;
    first_flight f = {.drop_verdicts = 1};
    sim_result r;
    run_two_files(&f, &r);
    assert_true(f.announced);
    assert_true(f.verdicts_dropped);
    assert_true(f.entries_sent >= 1);
    assert_true(f.first.data_at - f.first.hello_at >= 2 * RTT_NS);
    sim_result_free(&r);
}

/* A server without the extension ignores the announcement and message
 * 1's payload: the entries go in the first ENTRIES and the transfer is the
 * one of before, its first DATA two round trips after the HELLO. */
static void test_old_server_ignores_early_entries(void **state)
{
    (void)state;
    first_flight f = {.strip = 1};
    sim_result r;
    run_two_files(&f, &r);
    assert_true(f.announced); /* the HELLO offered them: an old server saw them */
    assert_true(f.first.data_at - f.first.hello_at >= 2 * RTT_NS);
    sim_result_free(&r);
}

/* ---- a replayed HELLO, datagram by datagram ---- */

/* Every datagram r has to send at `now`, after its timers: how many, and
 * how many of them are VERDICTS. */
static int drain(aftp_receiver *r, uint64_t now, int *verdicts)
{
    uint8_t out[MAX_DGRAM];
    aftp_datagram dg;
    int n = 0;
    if (now >= aftp_receiver_expiry(r))
        aftp_receiver_handle_expiry(r, now);
    while (aftp_receiver_write(r, now, out, sizeof out, &dg) == 1) {
        n++;
        *verdicts += dg.head[1] == AFTP_WIRE_VERDICTS;
    }
    return n;
}

/* The first receiver answers the HELLO with HELLO_ACK and, from its
 * timer, the early verdicts (storage asked once). The same HELLO again:
 * the same HELLO_ACK, no entry decided again. The HELLO replayed to a
 * fresh receiver of the same server: silence (14.2.4), storage never
 * asked. */
static void test_replayed_hello_takes_no_entry(void **state)
{
    (void)state;
    sim_storage st;
    uint64_t clock = 0;
    sim_side side;
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    aftp_sender *s;
    aftp_receiver *first, *fresh;
    uint8_t hello[MAX_DGRAM];
    aftp_datagram dg;
    sim_ts_memory memory = {0};
    int verdicts = 0;
    sim_storage_init(&st, 1, 100000, 3);
    side = (sim_side){.st = &st, .clock = &clock};
    sim_engine_settings(&ss, &side, &rs, &side);
    pipelined(NULL, &ss, &rs);
    rs.security.peers.check_timestamp = sim_remember_timestamp;
    rs.security.peers.user = &memory;
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_OK);
    aftp_file_info info = {.file_id = 1, .size = 100000, .mode = 0644, .path = "early.bin"};
    assert_int_equal(aftp_sender_add_file(s, &info), AFTP_OK);
    aftp_sender_finish(s);
    assert_int_equal(aftp_sender_write(s, 0, hello, sizeof hello, &dg), 1);
    size_t hello_len = dg.head_len;
    assert_int_not_equal(early_tlv_at(&dg), 0);

    assert_int_equal(aftp_receiver_new(&rs, 0, &first), AFTP_OK);
    assert_int_equal(aftp_receiver_read(first, 1, hello, hello_len), AFTP_OK);
    assert_int_equal(st.last_decided, 0);            /* not where the HELLO was read */
    assert_int_equal(drain(first, 1, &verdicts), 2); /* HELLO_ACK, VERDICTS */
    assert_int_equal(verdicts, 1);
    assert_int_equal(st.last_decided, 1);

    st.last_decided = 0;
    verdicts = 0;
    assert_int_equal(aftp_receiver_read(first, 2, hello, hello_len), AFTP_OK);
    assert_int_equal(drain(first, 2, &verdicts), 1); /* the HELLO_ACK again */
    assert_int_equal(verdicts, 0);

    assert_int_equal(aftp_receiver_new(&rs, 0, &fresh), AFTP_OK);
    assert_int_equal(aftp_receiver_read(fresh, 3, hello, hello_len), AFTP_OK);
    assert_int_equal(drain(fresh, 3, &verdicts), 0);
    assert_int_equal(aftp_receiver_state(fresh), AFTP_STATE_HANDSHAKE);
    assert_int_equal(st.last_decided, 0);
    aftp_receiver_del(fresh);
    aftp_receiver_del(first);
    aftp_sender_del(s);
    sim_storage_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_data_one_rtt_after_hello),
        cmocka_unit_test(test_old_server_ignores_early_entries),
        cmocka_unit_test(test_lost_early_verdicts_resent),
        cmocka_unit_test(test_replayed_hello_takes_no_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
