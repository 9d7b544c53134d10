/* Pull (spec 9.15) between whole engines on the virtual clock (label sim):
 * the receiver is the client (it sends the HELLO and the PULL_REQUEST),
 * the sender is the server (its storage learns each requested path and
 * adds the entries beneath the served ones). A tree arrives byte-exact and
 * verified through loss and reordering; a refused path fails alone, with
 * its own error; a lost PULL_REPLY is resent; either side may cancel; a
 * partial copy resumes; a packet of the wrong role, once the handshake is
 * done, is a protocol violation. */
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
#define MAX_PATHS 4
#define BIG_FILE 300000u
#define HELD_BLOCKS 150u

/* One pull: what the client asks, what the server's storage says. */
typedef struct pull_case {
    const char *paths[MAX_PATHS];
    uint32_t count;
    int verdicts[MAX_PATHS]; /* the server storage's answer per path */
    unsigned flags;          /* the request's */
    uint64_t max_rate_bps;   /* the request's */
    uint64_t big_size;       /* tree/a.bin */
    int held;                /* the client holds HELD_BLOCKS of tree/a.bin */
} pull_case;

/* What the run saw (one run at a time). */
static struct pull_state {
    const pull_case *pc;
    aftp_storage_ops server_ops;
    int asked;               /* pull_path calls, in order */
    char asked_paths[MAX_PATHS][32];
    unsigned asked_flags;
    int served;              /* a path was served: the tree is added */
    int events;              /* AFTP_EV_PULL_PATH on the client */
    int event_errors[MAX_PATHS];
    char event_paths[MAX_PATHS][32];
    uint32_t event_ids[MAX_PATHS];
    uint64_t resumed_bytes;  /* the client's ENTRY_END of a RESUME */
    int replies_dropped;     /* PULL_REPLYs the forward filter dropped */
    int drop_replies;        /* how many to drop */
} ps;

static int pull_path(void *user, uint32_t index, const char *path, unsigned flags)
{
    (void)user;
    assert_int_equal(index, (uint32_t)ps.asked);
    snprintf(ps.asked_paths[ps.asked], sizeof ps.asked_paths[0], "%s", path);
    ps.asked_flags = flags;
    int rc = ps.pc->verdicts[ps.asked++];
    ps.served |= rc == AFTP_OK;
    return rc;
}

static void pull_event(void *user, const aftp_event *ev)
{
    if (ev->type == AFTP_EV_PULL_PATH) {
        assert_true(ps.events < MAX_PATHS);
        ps.event_errors[ps.events] = ev->error;
        ps.event_ids[ps.events] = ev->info->file_id;
        snprintf(ps.event_paths[ps.events], sizeof ps.event_paths[0], "%s", ev->info->path);
        ps.events++;
    }
    if (ev->type == AFTP_EV_ENTRY_END && ev->verdict == AFTP_VERDICT_RESUME)
        ps.resumed_bytes = ev->held_bytes;
    sim_on_event(user, ev);
}

/* The sender is the server of a pull, the receiver its client: roles,
 * keys (the client's are the receiver's now) and the request. */
static void tune_pull(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const pull_case *pc = ctx;
    aftp_pull_request q = {.paths = pc->paths, .path_count = pc->count, .flags = pc->flags,
                           .max_rate_bps = pc->max_rate_bps};
    sim_tune_pull(s, r, &ps.server_ops, pull_path, WINDOW, &q);
    r->on_event = pull_event;
}

/* The same, the client declining to send its request in message 1. */
static void tune_pull_declined(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    tune_pull(ctx, s, r);
    r->no_early_request = 1;
}

static void add(sim_storage *st, aftp_sender *snd, int kind, const char *path, uint64_t size)
{
    uint32_t id = (uint32_t)st->nfiles + 1;
    unsigned flags = kind == AFTP_ENTRY_FILE ? ps.asked_flags & ~AFTP_ENTRY_OVERWRITE : 0;
    aftp_entry_info e = {.file = {.file_id = id, .size = size,
                                  .mode = kind == AFTP_ENTRY_DIR ? 0755 : 0644,
                                  .mtime_ns = 1700000000 * SIM_S, .path = path},
                         .kind = kind, .flags = flags, .source_id = 7};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
    sim_file *f = sim_storage_add_entry(st, kind, path, size,
                                        kind == AFTP_ENTRY_FILE ? BLOCK : 0, NULL);
    if (ps.pc->held && strcmp(path, "tree/a.bin") == 0) {
        f->held[0] = (aftp_block_range){0, HELD_BLOCKS};
        f->held_count = 1;
    }
}

/* The server's walk: nothing before the request; once every path is
 * decided, the tree beneath the served one, then finish. */
static int walk(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    (void)ctx;
    (void)now;
    if (ps.asked < (int)ps.pc->count)
        return 0;
    if (ps.served && st->nfiles == 0) {
        add(st, snd, AFTP_ENTRY_DIR, "tree", 0);
        add(st, snd, AFTP_ENTRY_FILE, "tree/a.bin", ps.pc->big_size);
        add(st, snd, AFTP_ENTRY_DIR, "tree/sub", 0);
        add(st, snd, AFTP_ENTRY_FILE, "tree/sub/b.bin", 70001);
        add(st, snd, AFTP_ENTRY_FILE, "tree/empty", 0);
    }
    return 1;
}

/* Drops the first ps.drop_replies PULL_REPLYs the server sends (the type
 * is in the clear header). */
static int drop_reply(void *ctx, const aftp_datagram *dg)
{
    (void)ctx;
    if (dg->head[1] != AFTP_WIRE_PULL_REPLY || ps.replies_dropped >= ps.drop_replies)
        return 1;
    ps.replies_dropped++;
    return 0;
}

static void pull_cfg(sim_cfg *c, const pull_case *pc)
{
    memset(&ps, 0, sizeof ps);
    ps.pc = pc;
    sim_cfg_default(c);
    c->nfiles = 0;
    c->tune = tune_pull;
    c->tune_ctx = (void *)pc;
    c->refill = walk;
    c->fwd_filter = drop_reply;
}

static void expect_tree_intact(sim_result *r)
{
    assert_int_equal(r->st.nfiles, 5);
    for (uint32_t id = 1; id <= 5; id++) {
        sim_file *f = sim_storage_file(&r->st, id);
        if (f->kind == AFTP_ENTRY_DIR)
            assert_true(f->placed);
        else
            assert_true(sim_file_intact(&r->st, id));
    }
}

/* A tree through 2% loss each way and reordering: byte-exact, verified;
 * the two refused paths fail alone, each with its own error. */
static void test_pull_tree_through_loss(void **state)
{
    (void)state;
    static const pull_case pc = {
        .paths = {"tree", "missing", "../etc"},
        .count = 3,
        .verdicts = {AFTP_OK, AFTP_ERR_NOT_FOUND, AFTP_ERR_PATH_REJECTED},
        .big_size = BIG_FILE};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    c.fwd.loss = c.rev.loss = 0.02;
    c.fwd.reorder = 0.05;
    c.fwd.reorder_ns = 3 * SIM_MS;
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    assert_int_equal(r.snd_side.ev.connected, 1);
    assert_int_equal(r.rcv_side.ev.connected, 1);
    assert_int_equal(ps.asked, 3);
    assert_string_equal(ps.asked_paths[0], "tree");
    assert_string_equal(ps.asked_paths[2], "../etc");
    assert_int_equal(ps.events, 3);
    assert_int_equal(ps.event_errors[0], AFTP_OK);
    assert_int_equal(ps.event_errors[1], AFTP_ERR_NOT_FOUND);
    assert_int_equal(ps.event_errors[2], AFTP_ERR_PATH_REJECTED);
    assert_string_equal(ps.event_paths[1], "missing");
    assert_int_equal(ps.event_ids[2], 3);
    assert_true(r.fwd_data_lost > 0);
    expect_tree_intact(&r);
    sim_result_free(&r);
}

/* Keys updated every 64 packets in each direction (spec 14.6.3): the
 * server's DATA and the client's FEEDBACK cross generations, byte-exact. */
static void test_pull_through_key_updates(void **state)
{
    (void)state;
    static const pull_case pc = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK},
                                 .big_size = BIG_FILE};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    c.key_update_packets = 64;
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    assert_true(r.snd.key_updates >= 2);
    assert_true(r.rcv.key_updates >= 2);
    expect_tree_intact(&r);
    sim_result_free(&r);
}

/* Every path refused and the first two PULL_REPLYs lost: the reply is
 * resent until it arrives, each path is reported, and the session ends
 * cleanly without an entry. */
static void test_pull_refused_paths_and_lost_reply(void **state)
{
    (void)state;
    static const pull_case pc = {.paths = {"nope", "/etc/passwd"},
                                 .count = 2,
                                 .verdicts = {AFTP_ERR_NOT_FOUND, AFTP_ERR_PATH_REJECTED}};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    ps.drop_replies = 2;
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    assert_int_equal(ps.replies_dropped, 2);
    assert_int_equal(ps.asked, 2); /* asked once, however often the request came */
    assert_int_equal(ps.events, 2);
    assert_int_equal(ps.event_errors[0], AFTP_ERR_NOT_FOUND);
    assert_int_equal(ps.event_errors[1], AFTP_ERR_PATH_REJECTED);
    assert_int_equal(r.st.nfiles, 0);
    assert_int_equal(r.rcv_side.ev.entry_end, 0);
    sim_result_free(&r);
}

/* The client holds part of tree/a.bin from an interrupted pull: it
 * answers RESUME with what it holds, as a push receiver does, and only
 * the rest flows; the file is whole and verified. */
static void test_pull_resumes_a_partial_file(void **state)
{
    (void)state;
    static const pull_case pc = {.paths = {"tree"},
                                 .count = 1,
                                 .verdicts = {AFTP_OK},
                                 .flags = AFTP_ENTRY_RESUME,
                                 .big_size = BIG_FILE,
                                 .held = 1};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    assert_int_equal(ps.asked_flags, AFTP_ENTRY_RESUME);
    assert_int_equal(ps.resumed_bytes, (uint64_t)HELD_BLOCKS * BLOCK);
    expect_tree_intact(&r);
    /* No loss: every byte sent once, none of the held ones. */
    assert_int_equal(r.snd.payload_bytes_sent, BIG_FILE - (uint64_t)HELD_BLOCKS * BLOCK + 70001);
    sim_result_free(&r);
}

static int no_pull(void *user, const uint8_t *client_key, int role)
{
    (void)user;
    assert_non_null(client_key); /* asked once the key is authenticated */
    return role == AFTP_ROLE_PULL ? AFTP_ERR_PERMISSION : AFTP_OK;
}

static void tune_write_only(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    tune_pull(ctx, s, r);
    s->security.peers.role_allowed = no_pull;
}

/* A key its server's policy keeps from pulling (a write-only key) is
 * refused at the HELLO with CLOSE(PERMISSION), and told why. */
static void test_pull_refused_to_a_write_only_key(void **state)
{
    (void)state;
    static const pull_case pc = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK}};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    c.tune = tune_write_only;
    sim_run(&c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.rcv_error, AFTP_ERR_PERMISSION);
    assert_string_equal(r.rcv_side.ev.message, "this client key may only push to this server: pulling is not allowed for it");
    assert_int_equal(r.rcv_side.ev.connected, 0);
    assert_int_equal(ps.asked, 0);
    sim_result_free(&r);
}

static uint64_t cap_of_20m(void *user, const uint8_t *client_key)
{
    (void)user;
    (void)client_key;
    return 20u * 1000 * 1000;
}

static void tune_capped(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    tune_pull(ctx, s, r);
    s->policy = AFTP_CC_FAIR;
    s->security.peers.rate_cap = cap_of_20m;
}

/* The server's share of its total rate, 15 Mbit/s, given to the pull's
 * sender 0.1 s in (aftp_sender_set_rate_cap, spec 9.15.4). */
static void give_share(void *ctx, aftp_sender *snd, aftp_receiver *rcv, uint64_t now)
{
    int *given = ctx;
    (void)rcv;
    if (*given || now < 100 * SIM_MS)
        return;
    assert_int_equal(aftp_sender_set_rate_cap(snd, 15000000, now), AFTP_OK);
    *given = 1;
}

/* A pull of the tree under the policy's cap for the key (20 Mbit/s),
 * the client asking for at most 10 Mbit/s, then for 50, the server's
 * share given or not: the sender's cap and pace are the want's. */
static void expect_pull_caps(int share, const uint64_t want[2])
{
    static const pull_case slower = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK},
                                     .big_size = BIG_FILE, .max_rate_bps = 10000000};
    static const pull_case faster = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK},
                                     .big_size = BIG_FILE, .max_rate_bps = 50000000};
    const pull_case *cases[] = {&slower, &faster};
    for (int i = 0; i < 2; i++) {
        sim_cfg c;
        sim_result r;
        int given = 0;
        pull_cfg(&c, cases[i]);
        c.tune = tune_capped;
        if (share) {
            c.step = give_share;
            c.step_ctx = &given;
        }
        sim_run(&c, &r);
        sim_expect_clean_end(&r);
        assert_int_equal(given, share);
        assert_int_equal(r.snd.rate_cap_bps, want[i]);
        assert_true(r.snd.pacing_rate_bps <= want[i]);
        expect_tree_intact(&r);
        sim_result_free(&r);
    }
}

/* The server's sender runs its own controller under the lowest of its
 * policy's cap for the key (20 Mbit/s) and the client's max rate: the
 * client can lower it (to 10 Mbit/s), never raise it (to 50). */
static void test_pull_rate_is_the_servers_under_the_clients_max(void **state)
{
    (void)state;
    static const uint64_t want[] = {10000000, 20000000};
    expect_pull_caps(0, want);
}

/* The share replaces the policy's cap (20 Mbit/s) and still stays under
 * the client's max rate: 10 Mbit/s asked stays 10, 50 asked gets the 15. */
static void test_pull_share_under_the_clients_max(void **state)
{
    (void)state;
    static const uint64_t want[] = {10000000, 15000000};
    expect_pull_caps(1, want);
}

/* The longest run of DATA the server wrote at one instant. */
static struct burst_watch {
    uint64_t last_ns;
    int run, longest;
} bw;

static void watch_bursts(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    (void)ctx;
    if (dg->head[1] != AFTP_WIRE_DATA)
        return;
    bw.run = bw.run > 0 && now == bw.last_ns ? bw.run + 1 : 1;
    bw.last_ns = now;
    if (bw.run > bw.longest)
        bw.longest = bw.run;
}

/* A client on a 1500-byte path asking a server whose own datagrams may be
 * a jumbo frame's: the session's are the client's. */
static void tune_pull_jumbo_server(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    tune_pull(ctx, s, r);
    s->max_datagram = 9168;
    r->max_datagram = 1452;
}

/* Spec 13.1: the bucket holds 4 of the session's datagrams at 10 Mbit/s
 * (1 ms of data is less), so at most 5 DATA leave at one instant (the 4
 * and the one that empties it), not 4 of the server's own 9168 bytes (26
 * of 1452: a burst the first rate samples would read as the path's). */
static void test_pull_server_paces_in_the_sessions_datagrams(void **state)
{
    (void)state;
    static const pull_case pc = {
        .paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK}, .big_size = BIG_FILE};
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &pc);
    c.max_datagram = 9168; /* the run's buffers: the server's own size */
    c.tune = tune_pull_jumbo_server;
    c.rate_bps = 10 * 1000 * 1000;
    c.fwd_tap = watch_bursts;
    memset(&bw, 0, sizeof bw);
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    expect_tree_intact(&r);
    assert_true(bw.longest >= 2); /* the run saw DATA batched */
    assert_true(bw.longest <= 5);
    sim_result_free(&r);
}

static const pull_case big_pull = {.paths = {"tree"},
                                   .count = 1,
                                   .verdicts = {AFTP_OK},
                                   .big_size = 20u * 1000 * 1000};

/* One side cancels 0.5 s into a 20 MB pull: both end CANCELLED, the
 * other told that its peer (named by its role) cancelled; the big file
 * is never committed. */
static void run_cancel(int server_cancels)
{
    sim_cfg c;
    sim_result r;
    pull_cfg(&c, &big_pull);
    if (server_cancels)
        c.sender_cancels_at = 500 * SIM_MS;
    else
        c.receiver_cancels_at = 500 * SIM_MS;
    sim_run(&c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_ERR_CANCELLED);
    assert_int_equal(r.rcv_error, AFTP_ERR_CANCELLED);
    if (server_cancels)
        assert_string_equal(r.rcv_side.ev.message, "the sender cancelled the transfer");
    else
        assert_string_equal(r.snd_side.ev.message, "the receiver cancelled the transfer");
    assert_false(sim_file_intact(&r.st, 2));
    sim_result_free(&r);
}

static void test_pull_server_cancels(void **state)
{
    (void)state;
    run_cancel(1);
}

static void test_pull_client_cancels(void **state)
{
    (void)state;
    run_cancel(0);
}

/* ---- the wrong role (spec 9.15.3): engines driven by hand ---- */

typedef struct pair {
    sim_storage st;
    sim_side snd_side, rcv_side;
    uint64_t clock;
    aftp_sender *snd;
    aftp_receiver *rcv;
    uint8_t buf[2048];
} pair;

static const pull_case wrong_role_pull = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK}};

/* An unprotected pull (the rule is the same sealed), engines made. */
static void pair_start(pair *p)
{
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    memset(p, 0, sizeof *p);
    memset(&ps, 0, sizeof ps);
    ps.pc = &wrong_role_pull;
    sim_storage_init(&p->st, 0, 0, 1);
    p->snd_side = (sim_side){.st = &p->st, .clock = &p->clock};
    p->rcv_side = (sim_side){.st = &p->st, .clock = &p->clock};
    sim_engine_settings(&ss, &p->snd_side, &rs, &p->rcv_side);
    ss.security.cipher = rs.security.cipher = AFTP_CIPHER_NONE;
    tune_pull((void *)&wrong_role_pull, &ss, &rs);
    assert_int_equal(aftp_sender_new(&ss, 0, &p->snd), AFTP_OK);
    assert_int_equal(aftp_receiver_new(&rs, 0, &p->rcv), AFTP_OK);
}

static void pair_free(pair *p)
{
    aftp_sender_del(p->snd);
    aftp_receiver_del(p->rcv);
    sim_storage_free(&p->st);
}

/* A millisecond at a time for a tenth of a second, every datagram either
 * side has goes straight to the other (a lossless link without delay;
 * the sender paces). */
static void pair_exchange(pair *p)
{
    aftp_datagram dg;
    for (int ms = 0; ms < 100; ms++, p->clock += SIM_MS) {
        while (aftp_receiver_write(p->rcv, p->clock, p->buf, sizeof p->buf, &dg) == 1)
            aftp_sender_read(p->snd, p->clock, dg.head, dg.head_len);
        while (aftp_sender_write(p->snd, p->clock, p->buf, sizeof p->buf, &dg) == 1) {
            assert_int_equal(dg.payload_len, 0); /* no entry is added here */
            aftp_receiver_read(p->rcv, p->clock, dg.head, dg.head_len);
        }
    }
}

/* A packet of `type` (DATA or FEEDBACK: a plain body) to conn_id. */
static size_t forge(uint8_t type, uint32_t conn_id, uint8_t *out, size_t cap)
{
    static const uint8_t payload[10] = {1, 2, 3};
    aftp_wire_packet p;
    size_t len = 0;
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = type, .conn_id = conn_id,
                               .pn = 1000};
    if (type == AFTP_WIRE_DATA)
        p.u.data = (aftp_wire_data){.file_id = 1, .payload_len = sizeof payload,
                                    .payload = payload};
    if (type == AFTP_WIRE_RATE_UPDATE)
        p.u.rate_update = (aftp_wire_rate_update){.seq = 1, .cap_bps = 10000000};
    assert_int_equal(aftp_wire_encode(&p, out, cap, &len), AFTP_OK);
    return len;
}

/* The CLOSE an engine sends next: its wire error. */
static uint16_t next_close(pair *p, int from_sender)
{
    aftp_datagram dg;
    aftp_wire_packet pkt;
    int rc = from_sender ? aftp_sender_write(p->snd, p->clock, p->buf, sizeof p->buf, &dg)
                         : aftp_receiver_write(p->rcv, p->clock, p->buf, sizeof p->buf, &dg);
    assert_int_equal(rc, 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &pkt), AFTP_OK);
    assert_int_equal(pkt.hdr.type, AFTP_WIRE_CLOSE);
    return pkt.u.close.error;
}

/* Before the handshake a DATA at the server is dropped (it may be forged
 * or reflected); after it, the client's DATA breaks the protocol: the
 * server closes with CLOSE(PROTOCOL). */
static void test_pull_server_gets_wrong_role(void **state)
{
    (void)state;
    pair p;
    uint8_t pkt[128];
    aftp_stats st;
    pair_start(&p);
    size_t len = forge(AFTP_WIRE_DATA, 0x11111111, pkt, sizeof pkt);
    assert_int_equal(aftp_sender_read(p.snd, 0, pkt, len), AFTP_OK);
    aftp_sender_get_stats(p.snd, &st);
    assert_int_equal(st.packets_dropped, 1);
    assert_int_equal(aftp_sender_state(p.snd), AFTP_STATE_HANDSHAKE);
    pair_exchange(&p);
    assert_int_equal(ps.events, 1); /* the reply came: the handshake is long done */
    assert_int_equal(aftp_sender_state(p.snd), AFTP_STATE_TRANSFER);
    assert_int_equal(aftp_sender_read(p.snd, p.clock, pkt, len), AFTP_ERR_MALFORMED);
    assert_int_equal(aftp_sender_state(p.snd), AFTP_STATE_CLOSING);
    assert_int_equal(next_close(&p, 1), AFTP_WIRE_ERR_PROTOCOL);
    pair_free(&p);
}

/* A packet of `type`, which a pull's server never sends, at the client
 * once its handshake is done: CLOSE(PROTOCOL). */
static void client_gets_wrong_role(uint8_t type)
{
    pair p;
    uint8_t pkt[256];
    pair_start(&p);
    size_t len = forge(type, 0x22222222, pkt, sizeof pkt);
    assert_int_equal(aftp_receiver_read(p.rcv, 0, pkt, len), AFTP_OK);
    assert_int_equal(aftp_receiver_state(p.rcv), AFTP_STATE_HANDSHAKE);
    pair_exchange(&p);
    assert_int_equal(ps.events, 1);
    assert_int_equal(aftp_receiver_state(p.rcv), AFTP_STATE_TRANSFER);
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, pkt, len), AFTP_ERR_MALFORMED);
    assert_int_equal(next_close(&p, 0), AFTP_WIRE_ERR_PROTOCOL);
    pair_free(&p);
}

/* The server's FEEDBACK (only a receiver sends one). */
static void test_pull_client_gets_wrong_role(void **state)
{
    (void)state;
    client_gets_wrong_role(AFTP_WIRE_FEEDBACK);
}

/* A RATE_UPDATE: a pull's client announced no RATE_CAP (spec 6.18). */
static void test_pull_client_gets_rate_update(void **state)
{
    (void)state;
    client_gets_wrong_role(AFTP_WIRE_RATE_UPDATE);
}

/* One datagram from `from_sender`'s engine to the other, at the clock. */
static void pair_pass(pair *p, int from_sender)
{
    aftp_datagram dg;
    if (from_sender) {
        assert_int_equal(aftp_sender_write(p->snd, p->clock, p->buf, sizeof p->buf, &dg), 1);
        aftp_receiver_read(p->rcv, p->clock, dg.head, dg.head_len);
    } else {
        assert_int_equal(aftp_receiver_write(p->rcv, p->clock, p->buf, sizeof p->buf, &dg), 1);
        aftp_sender_read(p->snd, p->clock, dg.head, dg.head_len);
    }
}

/* Before its PULL_REPLY the client takes no entry (9.15.2): an ENTRIES
 * then is dropped, storage is not asked and no VERDICTS leaves, so what
 * the client sends later proves to the server that the reply arrived. */
static void test_pull_client_takes_nothing_before_the_reply(void **state)
{
    (void)state;
    pair p;
    uint8_t pkt[256];
    aftp_datagram dg;
    aftp_wire_packet in, out;
    aftp_stats before, after;
    pair_start(&p);
    pair_pass(&p, 0); /* HELLO */
    pair_pass(&p, 1); /* HELLO_ACK */
    assert_int_equal(aftp_receiver_state(p.rcv), AFTP_STATE_TRANSFER);
    aftp_wire_entry e = {.entry_id = 1, .kind = AFTP_WIRE_KIND_DIR, .mode = 0755,
                         .path_len = 1, .path = (const uint8_t *)"x"};
    memset(&in, 0, sizeof in);
    in.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_ENTRIES,
                                .conn_id = 0x22222222, .pn = 50};
    in.u.entries = (aftp_wire_entries){.count = 1, .entries = &e};
    size_t len = 0;
    assert_int_equal(aftp_wire_encode(&in, pkt, sizeof pkt, &len), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &before);
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, pkt, len), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &after);
    assert_int_equal(after.packets_dropped, before.packets_dropped + 1);
    assert_int_equal(p.st.last_decided, 0);
    assert_int_equal(aftp_receiver_write(p.rcv, p.clock, p.buf, sizeof p.buf, &dg), 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &out), AFTP_OK);
    assert_int_equal(out.hdr.type, AFTP_WIRE_PULL_REQUEST);
    assert_int_equal(aftp_receiver_write(p.rcv, p.clock, p.buf, sizeof p.buf, &dg), 0);
    pair_free(&p);
}

/* Until the client's PULL_REQUEST proves its address, the server sends
 * its HELLO_ACK and nothing else, whatever its storage has queued. */
static void test_pull_server_sends_nothing_before_the_request(void **state)
{
    (void)state;
    pair p;
    aftp_datagram dg;
    aftp_wire_packet out;
    uint8_t ack[2048];
    pair_start(&p);
    pair_pass(&p, 0); /* HELLO */
    assert_int_equal(aftp_sender_write(p.snd, p.clock, ack, sizeof ack, &dg), 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &out), AFTP_OK);
    assert_int_equal(out.hdr.type, AFTP_WIRE_HELLO_ACK);
    size_t ack_len = dg.head_len;
    aftp_entry_info e = {.file = {.file_id = 1, .mode = 0755, .path = "early"},
                         .kind = AFTP_ENTRY_DIR};
    assert_int_equal(aftp_sender_add_entry(p.snd, &e), AFTP_OK);
    for (int ms = 0; ms < 500; ms++, p.clock += SIM_MS) {
        if (p.clock >= aftp_sender_expiry(p.snd))
            aftp_sender_handle_expiry(p.snd, p.clock);
        assert_int_equal(aftp_sender_write(p.snd, p.clock, p.buf, sizeof p.buf, &dg), 0);
    }
    aftp_receiver_read(p.rcv, p.clock, ack, ack_len);
    pair_pass(&p, 0); /* PULL_REQUEST */
    assert_int_equal(aftp_sender_write(p.snd, p.clock, p.buf, sizeof p.buf, &dg), 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &out), AFTP_OK);
    assert_int_equal(out.hdr.type, AFTP_WIRE_PULL_REPLY);
    pair_free(&p);
}

/* ---- the request in the HELLO's message 1 (spec 12.3.4) ---- */

#define ONE_WAY_NS (75 * SIM_MS) /* a 150 ms round trip */
#define RTT_NS (2 * ONE_WAY_NS)

/* When the client's first HELLO reached the server and its first DATA
 * left, and what the HELLO carried. */
static struct early_pull {
    int strip;        /* the HELLO's EARLY_ENTRIES becomes a type no server knows */
    int announced;    /* the HELLO carried EARLY_ENTRIES */
    int requests;     /* PULL_REQUEST datagrams that reached the server */
    sim_first first;  /* hello_at: the HELLO's arrival at the server */
} ep;

/* An old server sees the announcement as an unknown type (0xF007): the
 * HELLO is not sealed and the prologue does not cover extensions, so
 * message 1 still opens and its payload is ignored. */
static int see_hello(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    (void)ctx;
    size_t at = sim_hello_ext_at(pkt, len, AFTP_WIRE_EXT_EARLY_ENTRIES);
    if (at != 0) {
        ep.announced = 1;
        if (ep.strip)
            ((uint8_t *)(uintptr_t)pkt)[at] = 0xF0; /* the link's own copy */
    }
    if (len >= 2 && pkt[1] == AFTP_WIRE_HELLO && !ep.first.has_hello) {
        ep.first.has_hello = 1;
        ep.first.hello_at = now;
    }
    ep.requests += len >= 2 && pkt[1] == AFTP_WIRE_PULL_REQUEST;
    return 1;
}

/* A pull of a 1 MB tree over 150 ms. */
static void wan_pull_cfg(sim_cfg *c)
{
    static const pull_case pc = {.paths = {"tree"}, .count = 1, .verdicts = {AFTP_OK},
                                 .big_size = 1000000};
    pull_cfg(c, &pc);
    c->fwd.delay_ns = c->rev.delay_ns = ONE_WAY_NS;
}

/* The tree whole, the first DATA's delay after the HELLO reached the
 * server. */
static uint64_t run_early_pull(int strip, int decline)
{
    sim_cfg c;
    sim_result r;
    wan_pull_cfg(&c);
    memset(&ep, 0, sizeof ep);
    ep.strip = strip;
    c.rev_tap = see_hello;
    c.fwd_tap = sim_first_record;
    c.fwd_tap_ctx = &ep.first;
    if (decline)
        c.tune = tune_pull_declined;
    sim_run(&c, &r);
    sim_report(strip ? "pull, early request, old server" : "pull, early request", &c, &r);
    sim_expect_clean_end(&r);
    expect_tree_intact(&r);
    assert_int_equal(ps.asked, 1);
    assert_true(ep.first.has_hello && ep.first.has_data);
    sim_result_free(&r);
    printf("[sim] first DATA %.0f ms after the HELLO reached the server\n",
           (double)(ep.first.data_at - ep.first.hello_at) / (double)SIM_MS);
    return ep.first.data_at - ep.first.hello_at;
}

/* The server's datagram number `lose` (from 0) is lost; its type. */
static struct handshake_loss {
    int lose, seen, lost_type;
} hl;

static int lose_nth_of_server(void *ctx, const aftp_datagram *dg)
{
    (void)ctx;
    if (hl.seen++ != hl.lose)
        return 1;
    hl.lost_type = dg->head[1];
    return 0;
}

/* The server's datagram `lose` lost (-1: none): when the client ended. */
static uint64_t pull_losing(int lose)
{
    sim_cfg c;
    sim_result r;
    wan_pull_cfg(&c);
    memset(&hl, 0, sizeof hl);
    hl.lose = lose;
    c.fwd_filter = lose_nth_of_server;
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    expect_tree_intact(&r);
    uint64_t end = r.rcv_side.ev.file_end_at;
    sim_result_free(&r);
    return end;
}

/* Spec 9.15.3, 9.3: the server's first flight (HELLO_ACK, PULL_REPLY,
 * ENTRIES of the early request) with its HELLO_ACK or its PULL_REPLY
 * lost costs the client's timer (its HELLO's 200 ms, or its first PTO,
 * 0.53 s) and a round trip, not seconds. HELLO_ACK lost: the client could
 * open nothing behind it, and its repeated HELLO gets the reply and the
 * entries again at once. PULL_REPLY lost: the client's PULL_REQUEST is a
 * resend on its timer, no RTT sample, so the server's PTO that resends
 * the ENTRIES the client dropped stays a round trip's. Before, each
 * ended the pull 2 s late (a backed-off PTO; an RTT of 0.6 s). */
static void test_pull_first_flight_losses_cost_a_timer(void **state)
{
    (void)state;
    static const struct {
        uint8_t type;
        uint64_t most_ns;
    } lost[] = {{AFTP_WIRE_HELLO_ACK, 2 * RTT_NS}, {AFTP_WIRE_PULL_REPLY, 5 * RTT_NS}};
    uint64_t base = pull_losing(-1);
    for (int lose = 0; lose < 2; lose++) {
        uint64_t end = pull_losing(lose);
        assert_int_equal(hl.lost_type, lost[lose].type);
        printf("[sim] first flight's datagram %d (type 0x%02x) lost: the pull ends %.0f ms later\n",
               lose, hl.lost_type, (double)(end - base) / (double)SIM_MS);
        assert_true(end - base <= lost[lose].most_ns);
    }
}

/* The request rides in message 1: the server decides it and sends its
 * PULL_REPLY and first ENTRIES right behind its HELLO_ACK; the client's
 * FEEDBACK and VERDICTS come back together and the first DATA leaves one
 * round trip after the HELLO reached the server (two without: the
 * PULL_REQUEST's round trip first). No PULL_REQUEST is needed. */
static void test_pull_request_rides_in_the_hello(void **state)
{
    (void)state;
    uint64_t delay = run_early_pull(0, 0);
    assert_true(ep.announced);
    assert_int_equal(ep.requests, 0);
    /* Its first VERDICTS wait for no feedback interval (spec 9.14.3). */
    assert_true(delay <= RTT_NS + SIM_MS);
}

/* A server without the extension ignores it: the request goes in a
 * PULL_REQUEST after the handshake and the pull is the one of before. */
static void test_old_server_ignores_the_early_request(void **state)
{
    (void)state;
    uint64_t delay = run_early_pull(1, 0);
    assert_true(ep.announced);
    assert_true(ep.requests >= 1);
    assert_true(delay >= 2 * RTT_NS);
}

/* A client that declines sends no request in message 1, and no
 * announcement: its PULL_REQUEST follows the handshake. */
static void test_declined_early_request(void **state)
{
    (void)state;
    uint64_t delay = run_early_pull(0, 1);
    assert_false(ep.announced);
    assert_true(ep.requests >= 1);
    assert_true(delay >= 2 * RTT_NS);
}

/* An unprotected HELLO_ACK to `client_id` with these extensions. */
static size_t forge_ack(uint32_t client_id, const uint8_t *ext, uint16_t ext_len, uint8_t *out,
                        size_t cap)
{
    aftp_wire_packet a;
    size_t len = 0;
    memset(&a, 0, sizeof a);
    a.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_HELLO_ACK,
                               .conn_id = client_id};
    a.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = 0x11111111,
                                          .cipher = AFTP_WIRE_CIPHER_NONE, .max_datagram = 1452,
                                          .ext_len = ext_len, .ext = ext};
    assert_int_equal(aftp_wire_encode(&a, out, cap, &len), AFTP_OK);
    return len;
}

/* Spec 9.15.1: a pull's HELLO_ACK needs PULL and PIPELINE and carries no
 * RATE_CAP; the client closes with CLOSE(PROTOCOL) otherwise. */
static void test_pull_client_checks_the_hello_ack(void **state)
{
    (void)state;
    static const uint8_t no_pull[] = {0, 5, 0, 4, 0, 0, 0, 64};
    static const uint8_t with_cap[] = {0, 5, 0, 4, 0, 0, 0, 64, 0, 6, 0, 0,
                                       0, 4, 0, 8, 0, 0, 0, 0, 0, 0, 0x10, 0};
    static const uint8_t good[] = {0, 5, 0, 4, 0, 0, 0, 64, 0, 6, 0, 0};
    const struct {
        const uint8_t *ext;
        uint16_t len;
        int state;
    } cases[] = {{no_pull, sizeof no_pull, AFTP_STATE_CLOSING},
                 {with_cap, sizeof with_cap, AFTP_STATE_CLOSING},
                 {good, sizeof good, AFTP_STATE_TRANSFER}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pair p;
        uint8_t pkt[256];
        pair_start(&p);
        pair_pass(&p, 0); /* HELLO, answered by hand below */
        size_t len = forge_ack(0x22222222, cases[i].ext, cases[i].len, pkt, sizeof pkt);
        aftp_receiver_read(p.rcv, p.clock, pkt, len);
        assert_int_equal(aftp_receiver_state(p.rcv), cases[i].state);
        if (cases[i].state == AFTP_STATE_CLOSING) {
            assert_int_equal(aftp_receiver_error(p.rcv), AFTP_ERR_MALFORMED);
            assert_int_equal(next_close(&p, 0), AFTP_WIRE_ERR_PROTOCOL);
        }
        pair_free(&p);
    }
}

/* A push's client did not announce PULL: a HELLO_ACK carrying it is a
 * protocol violation (spec 12.3.3). */
static void test_push_client_refuses_an_unannounced_pull(void **state)
{
    (void)state;
    static const uint8_t pull[] = {0, 6, 0, 0};
    sim_storage st;
    sim_side snd_side, rcv_side;
    uint64_t clock = 0;
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    aftp_sender *snd;
    aftp_datagram dg;
    uint8_t buf[2048], pkt[256];
    sim_storage_init(&st, 0, 0, 1);
    snd_side = (sim_side){.st = &st, .clock = &clock};
    rcv_side = snd_side;
    sim_engine_settings(&ss, &snd_side, &rs, &rcv_side);
    ss.security.cipher = AFTP_CIPHER_NONE;
    assert_int_equal(aftp_sender_new(&ss, 0, &snd), AFTP_OK);
    assert_int_equal(aftp_sender_write(snd, 0, buf, sizeof buf, &dg), 1); /* HELLO */
    size_t len = forge_ack(0x11111111, pull, sizeof pull, pkt, sizeof pkt);
    aftp_sender_read(snd, 0, pkt, len);
    assert_int_equal(aftp_sender_state(snd), AFTP_STATE_CLOSING);
    assert_int_equal(aftp_sender_error(snd), AFTP_ERR_MALFORMED);
    aftp_sender_del(snd);
    sim_storage_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_tree_through_loss),
        cmocka_unit_test(test_pull_request_rides_in_the_hello),
        cmocka_unit_test(test_old_server_ignores_the_early_request),
        cmocka_unit_test(test_declined_early_request),
        cmocka_unit_test(test_pull_refused_paths_and_lost_reply),
        cmocka_unit_test(test_pull_through_key_updates),
        cmocka_unit_test(test_pull_resumes_a_partial_file),
        cmocka_unit_test(test_pull_server_cancels),
        cmocka_unit_test(test_pull_client_cancels),
        cmocka_unit_test(test_pull_server_gets_wrong_role),
        cmocka_unit_test(test_pull_client_gets_wrong_role),
        cmocka_unit_test(test_pull_client_gets_rate_update),
        cmocka_unit_test(test_pull_share_under_the_clients_max),
        cmocka_unit_test(test_pull_client_takes_nothing_before_the_reply),
        cmocka_unit_test(test_pull_refused_to_a_write_only_key),
        cmocka_unit_test(test_pull_client_checks_the_hello_ack),
        cmocka_unit_test(test_push_client_refuses_an_unannounced_pull),
        cmocka_unit_test(test_pull_rate_is_the_servers_under_the_clients_max),
        cmocka_unit_test(test_pull_server_sends_nothing_before_the_request),
        cmocka_unit_test(test_pull_server_paces_in_the_sessions_datagrams),
        cmocka_unit_test(test_pull_first_flight_losses_cost_a_timer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
