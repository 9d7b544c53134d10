/* The receiver engine in pipelined mode (spec sections 9.14, 12.3.2),
 * driven by a scripted sender (sim_script) that builds ENTRIES, DATA and
 * FILE_DONE with proto's encoders, against sim_storage's `entry` and
 * `commit_group`: negotiation, many small files, empty files, directories
 * and links byte-exact, FEEDBACK over the stream, SKIP and RESUME, the
 * group commit, a verdict storage holds back (a busy file), and hostile
 * senders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_handshake.h"
#include "common/aftp_rtt.h"
#include "common/aftp_session.h"
#include "sim_link.h"
#include "sim_run.h"
#include "sim_script.h"

#include "../test_heap.h"

#define BS 1024u
#define MAX_ID (SIM_MAX_FILES + 2)

/* What the receiver sent, decoded. */
typedef struct seen {
    int verdicts_packets;
    int verdicts[MAX_ID];        /* verdict records per entry id */
    int verdict[MAX_ID];         /* the latest one's kind */
    uint16_t verdict_error[MAX_ID];
    aftp_wire_range resume[MAX_ID][4]; /* a RESUME's held ranges */
    int resume_count[MAX_ID];
    int results[MAX_ID];         /* FILE_RESULTs per file id */
    uint16_t result_error[MAX_ID];
    int results_total;
    int feedbacks;
    aftp_wire_feedback fb;       /* the latest FEEDBACK (ranges copied below) */
    aftp_wire_range fb_ranges[64];
    size_t fb_count;
    int closes;
    uint16_t close_error;
} seen;

static void note_verdicts(seen *s, const aftp_wire_verdicts *vs)
{
    aftp_wire_record_iter it;
    aftp_wire_verdict v;
    s->verdicts_packets++;
    aftp_wire_verdicts_iter_init(&it, vs);
    while (aftp_wire_verdicts_next(&it, &v)) {
        assert_true(v.entry_id < MAX_ID);
        s->verdicts[v.entry_id]++;
        s->verdict[v.entry_id] = v.verdict;
        s->verdict_error[v.entry_id] = v.error;
        aftp_wire_range_iter rit;
        aftp_wire_range rg;
        s->resume_count[v.entry_id] = 0;
        aftp_wire_verdict_ranges_init(&rit, &v);
        while (v.range_count > 0 && aftp_wire_ranges_next(&rit, &rg) &&
               s->resume_count[v.entry_id] < 4)
            s->resume[v.entry_id][s->resume_count[v.entry_id]++] = rg;
    }
}

static void note_feedback(seen *s, const aftp_wire_feedback *f)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    s->feedbacks++;
    s->fb = *f;
    s->fb_count = 0;
    aftp_wire_range_iter_init(&it, f);
    while (aftp_wire_ranges_next(&it, &rg) && s->fb_count < 64)
        s->fb_ranges[s->fb_count++] = rg;
}

static void collect(sim_script *g, seen *s)
{
    while (sim_script_next(g)) {
        const aftp_wire_packet *p = &g->out;
        switch (p->hdr.type) {
        case AFTP_WIRE_VERDICTS: note_verdicts(s, &p->u.verdicts); break;
        case AFTP_WIRE_FILE_RESULT:
            assert_true(p->u.file_result.file_id < MAX_ID);
            s->results[p->u.file_result.file_id]++;
            s->result_error[p->u.file_result.file_id] = p->u.file_result.error;
            s->results_total++;
            break;
        case AFTP_WIRE_FEEDBACK: note_feedback(s, &p->u.feedback); break;
        case AFTP_WIRE_CLOSE:
            s->closes++;
            s->close_error = p->u.close.error;
            break;
        default: break;
        }
    }
}

/* Runs the engine's timers for `ms` virtual milliseconds, collecting. */
static void settle(sim_script *g, seen *s, int ms)
{
    for (int i = 0; i < ms; i++) {
        for (int k = 0; k < 4; k++) {
            sim_script_tick(g);
            collect(g, s);
        }
        g->clock += UINT64_C(1000000);
    }
}

/* The timers due at this very instant, run until nothing more is due. */
static void run_now(sim_script *g, seen *s)
{
    for (int k = 0; k < 10; k++) {
        sim_script_tick(g);
        collect(g, s);
    }
}

static void send_file(sim_script *g, uint32_t id)
{
    for (uint64_t b = 0; b < g->st.files[id - 1].blocks; b++)
        assert_int_equal(sim_script_stream_data(g, id, b), AFTP_OK);
    assert_int_equal(sim_script_file_done(g, id), AFTP_OK);
}

static uint32_t connect_pipelined(sim_script *g, uint32_t window)
{
    uint32_t granted = sim_script_hello_pipeline(g, window);
    assert_int_equal(aftp_receiver_state(g->r), AFTP_STATE_HANDSHAKE);
    return granted;
}

/* A session of window W offering `count` files of `size` bytes in one
 * ENTRIES, their verdicts in. */
static void offer_files(sim_script *g, seen *s, uint32_t window,
                        void (*tune)(aftp_receiver_settings *), uint16_t count, uint64_t size)
{
    sim_script_start_pipelined(g, window, tune);
    for (uint16_t i = 0; i < count; i++)
        sim_storage_add_entry(&g->st, AFTP_ENTRY_FILE, "f", size, BS, NULL);
    assert_int_equal(connect_pipelined(g, window), window);
    assert_int_equal(sim_script_entries(g, 1, count, 0), AFTP_OK);
    settle(g, s, 20);
}

/* A session's entry table follows the entries it has, not its window: a
 * session of the wire's largest W (65536) offered 4 files holds under
 * 4 MiB of heap, storage and script included (its table at W slots alone
 * took 16 MiB). A bound on memory, not on time. */
static void test_memory_follows_entries_not_window(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    size_t before = test_heap_in_use();
    offer_files(&g, &s, AFTP_WIRE_MAX_WINDOW, NULL, 4, 3 * BS);
    size_t held = test_heap_in_use() - before;
    print_message("a session of W = %u with 4 entries holds %zu KiB of heap\n",
                  AFTP_WIRE_MAX_WINDOW, held >> 10);
    assert_true(held < ((size_t)4 << 20));
    sim_script_free(&g);
}

/* ---- negotiation (spec 12.3.2) ---- */

static aftp_storage_ops ops_without_entry;
static void no_entry_op(aftp_receiver_settings *s)
{
    ops_without_entry = sim_receiver_storage;
    ops_without_entry.entry = NULL;
    s->storage = &ops_without_entry;
}

static void window_16(aftp_receiver_settings *s)
{
    s->pipeline_window = 16;
}

static void test_negotiation(void **state)
{
    (void)state;
    sim_script g;
    const struct { uint32_t own, asked, granted; void (*tune)(aftp_receiver_settings *); } cases[] = {
        {16, 64, 16, NULL}, {16, 8, 8, NULL}, {16, 16, 16, NULL}, {0, 8, 0, NULL},
        {16, 0, 0, NULL}, {16, 8, 0, no_entry_op},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_script_start_pipelined(&g, cases[i].own, cases[i].tune);
        assert_int_equal(connect_pipelined(&g, cases[i].asked), cases[i].granted);
        sim_script_free(&g);
    }
}

/* ---- a protected pipelined session, packet by packet ---- */

static void protect_receiver(aftp_receiver_settings *s)
{
    s->security.cipher = AFTP_CIPHER_AUTO; /* keys as sim_engine_settings set them */
}

/* The client's side of the handshake, by hand: HELLO with message 1 and
 * PIPELINE(window); the HELLO_ACK's message 2 must authenticate exactly
 * what aftp_session_ack_payload takes of it, PIPELINE included. Then cs
 * seals and opens as the client. Returns the granted window. */
static uint32_t protected_hello(sim_script *g, aftp_session *cs, uint32_t window)
{
    aftp_wire_packet p;
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX], msg1[AFTP_HS_MAX_INIT], ext[512];
    size_t prologue_len, msg1_len;
    aftp_handshake *hs = NULL;
    aftp_wire_writer w;
    memset(&p, 0, sizeof p);
    p.u.hello = (aftp_wire_hello){.role = AFTP_WIRE_ROLE_PUSH, .cipher_count = 2,
                                  .ciphers = {AFTP_WIRE_CIPHER_AES256GCM,
                                              AFTP_WIRE_CIPHER_CHACHA20POLY1305},
                                  .max_datagram = 1452};
    assert_int_equal(aftp_wire_hello_prologue(&p.u.hello, SIM_SCRIPT_CLIENT_ID, prologue,
                                              sizeof prologue, &prologue_len), AFTP_OK);
    aftp_hs_config cfg = {.role = AFTP_HS_INITIATOR, .static_secret = sim_client_secret,
                          .server_key = sim_server_public(), .prologue = prologue,
                          .prologue_len = prologue_len, .random = sim_random};
    assert_int_equal(aftp_handshake_new(&hs, &cfg), AFTP_OK);
    assert_int_equal(aftp_handshake_write_init(hs, UINT64_C(1700000000) * SIM_S, NULL, 0, msg1,
                                               sizeof msg1, &msg1_len), AFTP_OK);
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg1, (uint16_t)msg1_len),
                     AFTP_OK);
    assert_int_equal(aftp_wire_ext_put_pipeline(&w, window), AFTP_OK);
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_HELLO), AFTP_OK);
    assert_true(sim_script_next(g));
    const aftp_wire_hello_ack *a = &g->out.u.hello_ack;
    const uint8_t *msg2;
    uint16_t msg2_len;
    uint8_t got[AFTP_HS_MAX_PAYLOAD], expect[AFTP_HS_MAX_PAYLOAD];
    size_t got_len, expect_len;
    uint32_t granted = 0;
    assert_true(aftp_wire_ext_find(a->ext, a->ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg2, &msg2_len));
    assert_int_equal(aftp_handshake_read_response(hs, msg2, msg2_len, got, sizeof got, &got_len),
                     AFTP_OK);
    assert_int_equal(aftp_session_ack_payload(a, expect, sizeof expect, &expect_len), AFTP_OK);
    assert_int_equal(got_len, expect_len);
    assert_memory_equal(got, expect, got_len);
    assert_int_equal(aftp_wire_ext_pipeline(a->ext, a->ext_len, &granted), 1);
    assert_int_equal(aftp_session_init(cs, SIM_SCRIPT_CLIENT_ID, 1452, 30 * SIM_S, NULL, NULL, 0),
                     AFTP_OK);
    cs->peer_id = SIM_SCRIPT_SERVER_ID;
    cs->next_pn = g->pn;
    assert_int_equal(aftp_session_protect(cs, hs, a->cipher, 0), AFTP_OK);
    aftp_handshake_del(hs);
    return granted;
}

/* A sealed packet of `type` from the client; DATA sealed as a sender
 * seals it (file id and block in the clear, authenticated). */
static int sealed_send(sim_script *g, aftp_session *cs, aftp_wire_packet *p, uint8_t type)
{
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    aftp_datagram dg;
    aftp_session_header(cs, type, &p->hdr);
    if (type != AFTP_WIRE_DATA) {
        assert_int_equal(aftp_session_encode(cs, p, buf, sizeof buf, &dg), AFTP_OK);
    } else {
        size_t len, head = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED;
        p->hdr.flags |= AFTP_WIRE_FLAG_PROTECTED;
        assert_int_equal(aftp_wire_encode(p, buf, sizeof buf, &len), AFTP_OK);
        assert_int_equal(aftp_protect_seal(&cs->prot, buf, AFTP_AEAD_AD_DATA, p->u.data.payload,
                                           p->u.data.payload_len, buf + head), AFTP_OK);
        dg = (aftp_datagram){.head = buf,
                             .head_len = head + p->u.data.payload_len + aftp_session_overhead(cs)};
        aftp_session_sent(cs, &dg);
    }
    return aftp_receiver_read(g->r, g->clock, dg.head, dg.head_len);
}

/* The receiver's sealed datagrams, opened as the client. */
static void sealed_collect(sim_script *g, aftp_session *cs, seen *s)
{
    aftp_datagram dg;
    while (aftp_receiver_write(g->r, g->clock, g->buf, sizeof g->buf, &dg) == 1) {
        aftp_wire_header hdr;
        assert_int_equal(aftp_session_peek(cs, dg.head, dg.head_len, &hdr), AFTP_OK);
        assert_int_equal(aftp_session_precheck(cs, &hdr), AFTP_OK);
        assert_int_equal(aftp_session_open(cs, dg.head, dg.head_len, &hdr, &g->out), AFTP_OK);
        if (g->out.hdr.type == AFTP_WIRE_VERDICTS)
            note_verdicts(s, &g->out.u.verdicts);
        if (g->out.hdr.type == AFTP_WIRE_FILE_RESULT) {
            s->results[g->out.u.file_result.file_id]++;
            s->result_error[g->out.u.file_result.file_id] = g->out.u.file_result.error;
        }
    }
}

static void sealed_settle(sim_script *g, aftp_session *cs, seen *s, int ms)
{
    for (int i = 0; i < ms; i++, g->clock += UINT64_C(1000000))
        for (int k = 0; k < 4; k++) {
            sim_script_tick(g);
            sealed_collect(g, cs, s);
        }
}

/* Sealed ENTRIES, DATA and FILE_DONE: each DATA payload opens straight
 * into the bytes storage lends at its file offset (stream block - base). */
static void test_protected_pipelined_session(void **state)
{
    (void)state;
    sim_script g;
    aftp_session cs;
    seen s = {0};
    sim_script_start_pipelined(&g, 8, protect_receiver);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "a", 5000, BS, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_DIR, "d", 0, 0, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "d/b", 3000, BS, NULL);
    assert_int_equal(protected_hello(&g, &cs, 16), 8);
    aftp_wire_entry list[3] = {sim_script_entry(&g, 1, 0), sim_script_entry(&g, 2, 0),
                               sim_script_entry(&g, 3, 0)};
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.entries = (aftp_wire_entries){.count = 3, .entries = list};
    assert_int_equal(sealed_send(&g, &cs, &p, AFTP_WIRE_ENTRIES), AFTP_OK);
    sealed_settle(&g, &cs, &s, 20);
    assert_int_equal(s.verdicts[3], 1);
    for (uint32_t id = 1; id <= 3; id += 2) {
        const sim_file *f = &g.st.files[id - 1];
        for (uint64_t b = 0; b < f->blocks; b++) {
            memset(&p, 0, sizeof p);
            p.u.data = (aftp_wire_data){
                .file_id = id, .block = f->base + b,
                .payload_len = (uint16_t)aftp_wire_block_len(f->size, BS, b),
                .payload = f->src + b * BS};
            assert_int_equal(sealed_send(&g, &cs, &p, AFTP_WIRE_DATA), AFTP_OK);
        }
        memset(&p, 0, sizeof p);
        p.u.file_done = (aftp_wire_file_done){.file_id = id, .block_count = f->blocks};
        sim_file_digest(f, p.u.file_done.digest);
        assert_int_equal(sealed_send(&g, &cs, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
    }
    sealed_settle(&g, &cs, &s, 30);
    for (uint32_t id = 1; id <= 3; id += 2) {
        assert_int_equal(s.results[id], 1);
        assert_int_equal(s.result_error[id], AFTP_WIRE_ERR_NONE);
        assert_true(sim_file_intact(&g.st, id));
        assert_int_equal(g.st.files[id - 1].placed_writes, g.st.files[id - 1].blocks);
    }
    assert_true(g.st.files[1].placed);
    aftp_session_free(&cs);
    sim_script_free(&g);
}

/* A client without PIPELINE gets today's session from a receiver that
 * offers pipelined mode: FILE_OFFER works, ENTRIES is dropped. */
static void test_client_without_pipeline_gets_one_file_session(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start(&g, 3000, window_16);
    assert_int_equal(sim_script_connect_and_offer(&g, BS), AFTP_WIRE_ERR_NONE);
    aftp_stats before, after;
    aftp_receiver_get_stats(g.r, &before);
    aftp_wire_entry e = {.entry_id = 2, .kind = AFTP_WIRE_KIND_DIR, .path_len = 1,
                         .path = (const uint8_t *)"d"};
    assert_int_equal(sim_script_send_entries(&g, &e, 1), AFTP_OK);
    aftp_receiver_get_stats(g.r, &after);
    assert_int_equal(after.packets_dropped, before.packets_dropped + 1);
    for (uint64_t b = 0; b < 3; b++)
        assert_int_equal(sim_script_data(&g, b, BS), AFTP_OK);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done.file_id = 1;
    p.u.file_done.block_count = 3;
    sim_file_digest(&g.st.files[0], p.u.file_done.digest);
    assert_int_equal(sim_script_send(&g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
    settle(&g, &s, 30);
    assert_int_equal(s.verdicts_packets, 0);
    assert_true(s.results[1] >= 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 1));
    sim_script_free(&g);
}

/* ---- a tree of entries ---- */

static const uint64_t small_sizes[] = {0, 1, 100, 1023, 1024, 1025, 5000, 0, 3000, 2048,
                                       7, 4097, 0, 999, 65};

/* d/, d/f* files of small_sizes, d/link -> ../x/y, d/sub/, d/sub/g. */
static uint32_t add_tree(sim_storage *st)
{
    char path[48];
    sim_storage_add_entry(st, AFTP_ENTRY_DIR, "d", 0, 0, NULL);
    for (size_t i = 0; i < sizeof small_sizes / sizeof small_sizes[0]; i++) {
        snprintf(path, sizeof path, "d/f%zu", i);
        sim_storage_add_entry(st, AFTP_ENTRY_FILE, path, small_sizes[i], BS, NULL);
    }
    sim_storage_add_entry(st, AFTP_ENTRY_SYMLINK, "d/link", 0, 0, "../x/y");
    sim_storage_add_entry(st, AFTP_ENTRY_DIR, "d/sub", 0, 0, NULL);
    sim_storage_add_entry(st, AFTP_ENTRY_FILE, "d/sub/g", 6000, BS, NULL);
    return (uint32_t)st->nfiles;
}

static void test_tree_arrives_byte_exact(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 64, NULL);
    uint32_t n = add_tree(&g.st);
    assert_int_equal(connect_pipelined(&g, 64), 64);
    assert_int_equal(sim_script_entries(&g, 1, (uint16_t)n, 0), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdicts_packets, 1); /* batched */
    for (uint32_t id = 1; id <= n; id++) {
        assert_int_equal(s.verdicts[id], 1);
        assert_int_equal(s.verdict[id], AFTP_WIRE_VERDICT_SEND);
    }
    for (uint32_t id = 1; id <= n; id++)
        if (g.st.files[id - 1].kind == AFTP_ENTRY_FILE)
            send_file(&g, id);
    settle(&g, &s, 50);
    for (uint32_t id = 1; id <= n; id++) {
        const sim_file *f = &g.st.files[id - 1];
        if (f->kind == AFTP_ENTRY_FILE) {
            assert_int_equal(s.results[id], 1);
            assert_int_equal(s.result_error[id], AFTP_WIRE_ERR_NONE);
            assert_true(sim_file_intact(&g.st, id));
        } else {
            assert_int_equal(s.results[id], 0);
            assert_true(f->placed);
        }
    }
    assert_string_equal(g.st.files[n - 3].placed_target, "../x/y");
    assert_false(g.st.out_of_order);
    assert_int_equal(g.side.ev.entry_end, (int)n);
    assert_int_equal(s.closes, 0);
    assert_int_equal(s.fb.file_id, 0);
    assert_int_equal(s.fb.cum_block, g.st.stream_end);
    sim_script_free(&g);
}

/* FEEDBACK reports the stream: exactly the stream blocks not received. */
static void test_feedback_lists_missing_stream_blocks(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 16, NULL, 5, 3000);
    const uint64_t skip[] = {1, 7, 8, 14}; /* stream blocks left out */
    for (uint32_t id = 1; id <= 5; id++) {
        for (uint64_t b = 0; b < 3; b++) {
            uint64_t sb = g.st.files[id - 1].base + b;
            if (sb != skip[0] && sb != skip[1] && sb != skip[2] && sb != skip[3])
                assert_int_equal(sim_script_stream_data(&g, id, b), AFTP_OK);
        }
        assert_int_equal(sim_script_file_done(&g, id), AFTP_OK);
    }
    settle(&g, &s, 30);
    assert_int_equal(s.fb.file_id, 0);
    assert_int_equal(s.fb.cum_block, 1);
    assert_int_equal(s.fb.blocks_received, 11);
    assert_int_equal(s.fb.scan_end, 15);
    assert_int_equal(s.fb_count, 3);
    assert_int_equal(s.fb_ranges[0].start, 1);
    assert_int_equal(s.fb_ranges[0].len, 1);
    assert_int_equal(s.fb_ranges[1].start, 7);
    assert_int_equal(s.fb_ranges[1].len, 2);
    assert_int_equal(s.fb_ranges[2].start, 14);
    assert_int_equal(s.fb_ranges[2].len, 1);
    /* Only the files whose blocks all came are done. */
    assert_int_equal(s.results_total, 2);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.results[4], 1);
    for (int i = 0; i < 4; i++) {
        uint32_t id = (uint32_t)(skip[i] / 3) + 1;
        assert_int_equal(sim_script_stream_data(&g, id, skip[i] - g.st.files[id - 1].base),
                         AFTP_OK);
    }
    settle(&g, &s, 30);
    assert_int_equal(s.results_total, 5);
    for (uint32_t id = 1; id <= 5; id++)
        assert_true(sim_file_intact(&g.st, id));
    sim_script_free(&g);
}

/* ---- group commit (spec 9.14.3) ---- */

static void test_group_commit_before_results(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 16, NULL, 3, 2000);
    g.st.results_seen = &s.results_total;
    for (uint32_t id = 1; id <= 3; id++)
        send_file(&g, id);
    run_now(&g, &s); /* verified at once: deferred, no result yet */
    for (uint32_t id = 1; id <= 3; id++) {
        assert_true(g.st.files[id - 1].deferred);
        assert_false(g.st.files[id - 1].committed);
    }
    assert_int_equal(s.results_total, 0);
    assert_int_equal(g.st.group_commits, 0);
    /* A late copy of a block of a file waiting for its commit: a
     * duplicate (counted, never written), as in one-file mode. */
    aftp_stats before, after;
    aftp_receiver_get_stats(g.r, &before);
    assert_int_equal(sim_script_stream_data(&g, 1, 0), AFTP_OK);
    aftp_receiver_get_stats(g.r, &after);
    assert_int_equal(after.duplicate_packets, before.duplicate_packets + 1);
    settle(&g, &s, 30); /* within a feedback interval: one group commit */
    assert_int_equal(g.st.group_commits, 1);
    assert_int_equal(g.st.results_at_commit, 0);
    assert_int_equal(s.results_total, 3);
    for (uint32_t id = 1; id <= 3; id++)
        assert_true(sim_file_intact(&g.st, id));
    sim_script_free(&g);
}

/* Half the window waiting commits at once, without waiting for the timer. */
static void test_group_commit_at_half_window(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 4, NULL, 2, 100);
    send_file(&g, 1);
    send_file(&g, 2);
    run_now(&g, &s);
    assert_int_equal(g.st.group_commits, 1);
    assert_int_equal(s.results_total, 2);
    sim_script_free(&g);
}

static aftp_storage_ops ops_without_group;
static void no_group_op(aftp_receiver_settings *s)
{
    ops_without_group = sim_receiver_storage;
    ops_without_group.commit_group = NULL;
    s->storage = &ops_without_group;
}

static void test_commit_alone_without_group_op(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 16, no_group_op, 1, 2000);
    send_file(&g, 1);
    run_now(&g, &s);
    assert_int_equal(s.results[1], 1);
    assert_false(g.st.files[0].deferred);
    assert_true(sim_file_intact(&g.st, 1));
    sim_script_free(&g);
}

/* A storage whose group commit runs in the background (commit_start):
 * it only notes the group; the test finishes it, later in virtual time,
 * with the storage's own commit_group and aftp_receiver_commit_done. */
static struct {
    void *user;
    const uint32_t *ids;
    size_t count;
    int starts;
} later;
static aftp_storage_ops ops_commit_later;

static int note_commit_start(void *user, const uint32_t *ids, size_t count)
{
    later.user = user;
    later.ids = ids;
    later.count = count;
    later.starts++;
    return AFTP_OK;
}

static void commit_later_op(aftp_receiver_settings *s)
{
    ops_commit_later = sim_receiver_storage;
    ops_commit_later.commit_start = note_commit_start;
    s->storage = &ops_commit_later;
}

static void finish_commit(sim_script *g, seen *s)
{
    int results[MAX_ID];
    size_t n = later.count;
    later.count = 0;
    assert_int_equal(sim_receiver_storage.commit_group(later.user, later.ids, n, results), AFTP_OK);
    assert_int_equal(aftp_receiver_commit_done(g->r, g->clock, AFTP_OK, results), AFTP_OK);
    run_now(g, s);
}

/* Files 1 and 2 of `count` sent whole, their group started (commit_start). */
static void start_first_group(sim_script *g, seen *s, uint32_t window,
                              void (*tune)(aftp_receiver_settings *), uint16_t count)
{
    memset(&later, 0, sizeof later);
    offer_files(g, s, window, tune, count, 2000);
    send_file(g, 1);
    send_file(g, 2);
    settle(g, s, 30);
    assert_int_equal(later.starts, 1);
}

/* The group commit started with commit_start keeps the engine going:
 * while it runs, DATA is stored and FEEDBACK leaves, and the next file
 * verified waits for the next group (one group in flight). FILE_RESULTs
 * leave only once aftp_receiver_commit_done says the group is durable. */
static void test_group_commit_in_background(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    start_first_group(&g, &s, 16, commit_later_op, 4);
    assert_int_equal(later.count, 2);
    assert_false(g.st.files[0].committed);
    assert_int_equal(s.results_total, 0);
    int feedbacks = s.feedbacks;
    send_file(&g, 3); /* data flows while the group is in flight */
    settle(&g, &s, 30);
    assert_true(s.feedbacks > feedbacks);
    assert_true(g.st.files[2].deferred);
    assert_int_equal(later.starts, 1); /* file 3 waits for the next group */
    assert_int_equal(s.results_total, 0);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    finish_commit(&g, &s);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.results[3], 0);
    assert_int_equal(later.starts, 2); /* file 3's group was due: it starts at once */
    assert_int_equal(later.count, 1);
    finish_commit(&g, &s);
    assert_int_equal(s.results[3], 1);
    assert_int_equal(aftp_receiver_commit_done(g.r, g.clock, AFTP_OK, NULL),
                     AFTP_ERR_INVALID_STATE);
    for (uint32_t id = 1; id <= 3; id++)
        assert_true(sim_file_intact(&g.st, id) && g.st.files[id - 1].committed);
    sim_script_free(&g);
}

/* A short idle timeout, as a server may set, with the commit of
 * commit_later_op. */
#define SHORT_IDLE_MS 700

static void short_idle(aftp_receiver_settings *s)
{
    s->idle_timeout_ns = SHORT_IDLE_MS * SIM_MS;
}

static void commit_later_short_idle(aftp_receiver_settings *s)
{
    commit_later_op(s);
    short_idle(s);
}

/* A group commit that outlasts the idle timeout does not end the session:
 * the sender is silent because it waits for the group's FILE_RESULTs (its
 * control timer backing off), not gone. From the group's end the timer
 * runs again, with room for that backed-off timer (2 s after so long a
 * silence of ours): then a silent sender ends the session. */
static void test_group_in_flight_holds_the_idle_timer(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    start_first_group(&g, &s, 4, commit_later_short_idle, 2);
    settle(&g, &s, 4 * SHORT_IDLE_MS); /* the disk is slow; the sender waits in silence */
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    assert_int_equal(s.results_total, 0);
    finish_commit(&g, &s);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.results[2], 1);
    int backoff_ms = (int)(AFTP_RTT_MAX_BACKOFF_NS / SIM_MS);
    settle(&g, &s, SHORT_IDLE_MS + backoff_ms - 10); /* the results lost: the sender asks late */
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    settle(&g, &s, 20);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSED);
    assert_int_equal(aftp_receiver_error(g.r), AFTP_ERR_IDLE_TIMEOUT);
    sim_script_free(&g);
}

/* The read-back of a file the sender finished holds the idle timer as the
 * commit does: a receiver slow to get to it (a slow disk, a loaded
 * machine) does not take the sender's silence, its wait for the
 * FILE_RESULT, for its absence. */
static void test_read_back_holds_the_idle_timer(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 4, short_idle, 1, 2000);
    send_file(&g, 1); /* whole: waiting to be read back */
    g.clock += 4 * SHORT_IDLE_MS * SIM_MS; /* before the receiver gets to it */
    settle(&g, &s, 30);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    sim_script_free(&g);
}

/* FILE_DONE of entry id with its block count and a digest of zeros. */
static int file_done_wrong_digest(sim_script *g, uint32_t id)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done = (aftp_wire_file_done){.file_id = id, .block_count = g->st.files[id - 1].blocks};
    return sim_script_send(g, &p, AFTP_WIRE_FILE_DONE);
}

/* A file whose digest does not match ends alone with FILE_RESULT
 * (DIGEST_MISMATCH), discarded; the session goes on. Each repeated
 * FILE_DONE gets the same FILE_RESULT again (it is not resent on a timer
 * in pipelined mode). */
static void test_failed_file_ends_alone_and_results_repeat(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 8, NULL, 2, 3000);
    for (uint64_t b = 0; b < 3; b++)
        assert_int_equal(sim_script_stream_data(&g, 1, b), AFTP_OK);
    assert_int_equal(file_done_wrong_digest(&g, 1), AFTP_OK);
    send_file(&g, 2);
    settle(&g, &s, 30);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_DIGEST_MISMATCH);
    assert_false(g.st.files[0].committed);
    assert_int_equal(g.st.files[0].receiver_closed, 1);
    assert_int_equal(s.results[2], 1);
    assert_true(sim_file_intact(&g.st, 2));
    settle(&g, &s, 200); /* no timer resends them */
    assert_int_equal(s.results_total, 2);
    for (uint32_t id = 1; id <= 2; id++) {
        assert_int_equal(sim_script_file_done(&g, id), AFTP_OK);
        collect(&g, &s);
        assert_int_equal(s.results[id], 2);
    }
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_DIGEST_MISMATCH);
    assert_int_equal(s.result_error[2], AFTP_WIRE_ERR_NONE);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    sim_script_free(&g);
}

/* ---- SKIP and RESUME (spec 9.14.4) ---- */

static void test_skip_and_resume(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 16, NULL);
    sim_file *a = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "same", 4000, BS, NULL);
    sim_file *b = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "part", 8000, BS, NULL);
    a->identical = 1;
    b->held[0] = (aftp_block_range){0, 2};
    b->held[1] = (aftp_block_range){5, 1};
    b->held_count = 2;
    connect_pipelined(&g, 16);
    aftp_wire_entry list[2] = {sim_script_entry(&g, 1, AFTP_WIRE_ENTRY_SYNC),
                               sim_script_entry(&g, 2, AFTP_WIRE_ENTRY_RESUME)};
    assert_int_equal(sim_script_send_entries(&g, list, 2), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[1], AFTP_WIRE_VERDICT_SKIP);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_RESUME);
    assert_int_equal(s.resume_count[2], 2);
    assert_int_equal(s.resume[2][0].start, 0);
    assert_int_equal(s.resume[2][0].len, 2);
    assert_int_equal(s.resume[2][1].start, 5);
    assert_int_equal(s.resume[2][1].len, 1);
    assert_false(a->opened);
    /* A held block is never written again, even when sent. */
    assert_int_equal(sim_script_stream_data(&g, 2, 0), AFTP_OK);
    for (uint64_t blk = 2; blk < 8; blk++)
        if (blk != 3 && blk != 5)
            assert_int_equal(sim_script_stream_data(&g, 2, blk), AFTP_OK);
    assert_int_equal(sim_script_file_done(&g, 2), AFTP_OK);
    settle(&g, &s, 30);
    /* The skipped file and the held blocks count as held: only 3 is missing. */
    assert_int_equal(s.fb.cum_block, b->base + 3);
    assert_int_equal(s.fb_count, 1);
    assert_int_equal(s.fb_ranges[0].start, b->base + 3);
    assert_int_equal(s.fb_ranges[0].len, 1);
    assert_int_equal(s.results_total, 0);
    assert_int_equal(sim_script_stream_data(&g, 2, 3), AFTP_OK);
    settle(&g, &s, 30);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.result_error[2], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 2));
    assert_int_equal(s.fb.cum_block, g.st.stream_end);
    sim_script_free(&g);
}

/* Held marks beyond the block map's window are applied as the window
 * reaches them: a skipped file and a resumed file's held blocks behind a
 * file larger than the window, then a file after them. */
static void small_map(aftp_receiver_settings *s)
{
    s->map_window_blocks = 64;
}

static void test_held_marks_follow_the_window(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 16, small_map);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "big", 100 * BS, BS, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "same", 10 * BS, BS, NULL)->identical = 1;
    sim_file *part = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "part", 10 * BS, BS, NULL);
    part->held[0] = (aftp_block_range){2, 3};
    part->held_count = 1;
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "last", 2 * BS, BS, NULL);
    connect_pipelined(&g, 16);
    aftp_wire_entry list[4] = {sim_script_entry(&g, 1, 0),
                               sim_script_entry(&g, 2, AFTP_WIRE_ENTRY_SYNC),
                               sim_script_entry(&g, 3, AFTP_WIRE_ENTRY_RESUME),
                               sim_script_entry(&g, 4, 0)};
    assert_int_equal(sim_script_send_entries(&g, list, 4), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SKIP);
    assert_int_equal(s.verdict[3], AFTP_WIRE_VERDICT_RESUME);
    send_file(&g, 1);
    for (uint64_t b = 0; b < 10; b++) /* the held ones too: never written */
        assert_int_equal(sim_script_stream_data(&g, 3, b), AFTP_OK);
    assert_int_equal(sim_script_file_done(&g, 3), AFTP_OK);
    send_file(&g, 4);
    settle(&g, &s, 30);
    for (uint32_t id = 1; id <= 4; id++)
        if (id != 2)
            assert_true(sim_file_intact(&g.st, id));
    assert_int_equal(s.results_total, 3);
    assert_int_equal(s.fb.cum_block, g.st.stream_end);
    assert_int_equal(s.fb_count, 0);
    sim_script_free(&g);
}

/* A resumed file closed for the group commit: storage's held list is
 * gone, so a repeated ENTRIES gets no answer for it (the sender had the
 * verdict, it sent FILE_DONE), never one read from the freed list. */
static void test_resumed_file_waiting_for_commit_not_repeated(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 16, NULL);
    sim_file *f = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "part", 4000, BS, NULL);
    f->held[0] = (aftp_block_range){1, 2};
    f->held_count = 1;
    connect_pipelined(&g, 16);
    assert_int_equal(sim_script_entries(&g, 1, 1, AFTP_WIRE_ENTRY_RESUME), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[1], AFTP_WIRE_VERDICT_RESUME);
    assert_int_equal(sim_script_stream_data(&g, 1, 0), AFTP_OK);
    assert_int_equal(sim_script_stream_data(&g, 1, 3), AFTP_OK);
    assert_int_equal(sim_script_file_done(&g, 1), AFTP_OK);
    run_now(&g, &s);
    assert_true(f->deferred);
    assert_int_equal(sim_script_entries(&g, 1, 1, AFTP_WIRE_ENTRY_RESUME), AFTP_OK);
    collect(&g, &s); /* fails if the engine cannot build its answer */
    assert_int_equal(s.verdicts[1], 1);
    settle(&g, &s, 30);
    assert_int_equal(s.results[1], 1);
    assert_true(sim_file_intact(&g.st, 1));
    sim_script_free(&g);
}

/* Storage itself failing to decide (not a refusal): the session ends,
 * its CLOSE carrying the error, the CLOSED event naming the entry. */
static void test_storage_failure_ends_session(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 8, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "f", 100, BS, NULL);
    g.st.entry_error = AFTP_ERR_IO;
    connect_pipelined(&g, 8);
    assert_int_equal(sim_script_entries(&g, 1, 1, 0), AFTP_ERR_IO);
    settle(&g, &s, 2);
    assert_int_equal(s.closes, 1);
    assert_int_equal(s.close_error, AFTP_WIRE_ERR_IO);
    assert_int_equal(s.verdicts_packets, 0);
    g.clock += 10 * SIM_S; /* drained */
    sim_script_tick(&g);
    assert_int_equal(g.side.ev.closed_error, AFTP_ERR_IO);
    assert_non_null(strstr(g.side.ev.message, "entry 1 (f)"));
    sim_script_free(&g);
}

/* ---- hostile senders ---- */

static void expect_protocol_close(sim_script *g, seen *s)
{
    settle(g, s, 2);
    assert_int_equal(aftp_receiver_state(g->r), AFTP_STATE_CLOSING);
    assert_int_equal(s->closes, 1);
    assert_int_equal(s->close_error, AFTP_WIRE_ERR_PROTOCOL);
}

static void test_entry_beyond_window_closes(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 4, NULL);
    for (int i = 0; i < 5; i++)
        sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "f", 100, BS, NULL);
    connect_pipelined(&g, 4);
    assert_int_equal(sim_script_entries(&g, 1, 4, 0), AFTP_OK); /* the window is full */
    assert_int_equal(sim_script_entries(&g, 5, 1, 0), AFTP_ERR_MALFORMED);
    expect_protocol_close(&g, &s);
    assert_int_equal(g.st.last_decided, 4);
    sim_script_free(&g);
}

/* Entry 2 against entry 1 across two batches: a gap, an overlap, a base
 * going backwards. */
static void test_bases_that_break_the_stream_close(void **state)
{
    (void)state;
    const int64_t shift[] = {+1, -1, -3};
    for (size_t i = 0; i < 3; i++) {
        sim_script g;
        seen s = {0};
        sim_script_start_pipelined(&g, 8, NULL);
        sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "a", 3000, BS, NULL);
        sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "b", 3000, BS, NULL);
        connect_pipelined(&g, 8);
        assert_int_equal(sim_script_entries(&g, 1, 1, 0), AFTP_OK);
        aftp_wire_entry e = sim_script_entry(&g, 2, 0);
        e.base_block = (uint64_t)((int64_t)e.base_block + shift[i]);
        assert_int_equal(sim_script_send_entries(&g, &e, 1), AFTP_ERR_MALFORMED);
        expect_protocol_close(&g, &s);
        assert_false(g.st.files[1].opened);
        sim_script_free(&g);
    }
}

static int data_raw(sim_script *g, uint32_t file_id, uint64_t block, const sim_file *f,
                    uint64_t file_block)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.data = (aftp_wire_data){
        .file_id = file_id, .block = block,
        .payload_len = (uint16_t)aftp_wire_block_len(f->size, f->block_size, file_block),
        .payload = f->src + file_block * f->block_size};
    return sim_script_send(g, &p, AFTP_WIRE_DATA);
}

/* DATA for an entry that has no verdict yet (its predecessor is unknown,
 * verdicts go in id order), or outside its entry's blocks: dropped. */
static void test_data_without_verdict_or_outside_dropped(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 8, NULL);
    for (int i = 0; i < 3; i++)
        sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "f", 3000, BS, NULL);
    connect_pipelined(&g, 8);
    assert_int_equal(sim_script_entries(&g, 1, 1, 0), AFTP_OK);
    assert_int_equal(sim_script_entries(&g, 3, 1, 0), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdicts[1], 1);
    assert_int_equal(s.verdicts[3], 0); /* waits for entry 2 */
    aftp_stats before, after;
    aftp_receiver_get_stats(g.r, &before);
    assert_int_equal(sim_script_stream_data(&g, 3, 0), AFTP_OK);
    /* Entry 1's id with a stream block of entry 2 or 3, or past the stream. */
    assert_int_equal(data_raw(&g, 1, 3, &g.st.files[0], 0), AFTP_OK);
    assert_int_equal(data_raw(&g, 1, 6, &g.st.files[0], 0), AFTP_OK);
    aftp_receiver_get_stats(g.r, &after);
    assert_int_equal(after.packets_dropped, before.packets_dropped + 3);
    assert_int_equal(g.st.files[0].writes_total, 0);
    assert_false(g.st.files[2].opened);
    assert_int_equal(sim_script_entries(&g, 2, 1, 0), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SEND);
    assert_int_equal(s.verdict[3], AFTP_WIRE_VERDICT_SEND);
    assert_false(g.st.out_of_order);
    for (uint32_t id = 1; id <= 3; id++)
        send_file(&g, id);
    settle(&g, &s, 30);
    for (uint32_t id = 1; id <= 3; id++)
        assert_true(sim_file_intact(&g.st, id));
    sim_script_free(&g);
}

/* A path with '..' is REFUSED (PATH_REJECTED) and the session goes on; a
 * repeated ENTRIES gets the same verdicts, storage is not asked again. */
static void test_refused_path_and_repeated_entries(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 8, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "a/../../etc/passwd", 3000, BS, NULL);
    sim_file *same = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "same", 2000, BS, NULL);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "ok", 2000, BS, NULL);
    same->identical = 1;
    connect_pipelined(&g, 8);
    aftp_wire_entry list[3] = {sim_script_entry(&g, 1, 0),
                               sim_script_entry(&g, 2, AFTP_WIRE_ENTRY_SYNC),
                               sim_script_entry(&g, 3, 0)};
    assert_int_equal(sim_script_send_entries(&g, list, 3), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[1], AFTP_WIRE_VERDICT_REFUSED);
    assert_int_equal(s.verdict_error[1], AFTP_WIRE_ERR_PATH_REJECTED);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SKIP);
    assert_int_equal(s.verdict[3], AFTP_WIRE_VERDICT_SEND);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    assert_false(g.st.files[0].opened);
    int packets = s.verdicts_packets;
    assert_int_equal(sim_script_send_entries(&g, list, 3), AFTP_OK);
    collect(&g, &s); /* answered at once, not on a timer */
    assert_int_equal(s.verdicts_packets, packets + 1);
    for (uint32_t id = 1; id <= 3; id++)
        assert_int_equal(s.verdicts[id], 2);
    assert_int_equal(s.verdict[1], AFTP_WIRE_VERDICT_REFUSED);
    assert_int_equal(s.verdict_error[1], AFTP_WIRE_ERR_PATH_REJECTED);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SKIP);
    assert_int_equal(s.verdict[3], AFTP_WIRE_VERDICT_SEND);
    assert_false(g.st.out_of_order); /* each decided once */
    send_file(&g, 3);
    settle(&g, &s, 30);
    assert_int_equal(s.results[3], 1);
    assert_int_equal(s.result_error[3], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 3));
    /* The refused and skipped files' blocks are held: the stream is whole. */
    assert_int_equal(s.fb.cum_block, g.st.stream_end);
    sim_script_free(&g);
}

/* A storage that holds back the verdict of entry busy.id (its file written
 * by another session of the server: AFTP_STORAGE_WAIT) while it is set. */
static struct {
    uint32_t id;
    int asked;
} busy;
static aftp_storage_ops ops_busy;

static int busy_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    if (info->file.file_id != busy.id)
        return sim_receiver_storage.entry(user, info, out);
    busy.asked++;
    return AFTP_STORAGE_WAIT;
}

static void busy_op(aftp_receiver_settings *s)
{
    ops_busy = sim_receiver_storage;
    ops_busy.entry = busy_entry;
    s->storage = &ops_busy;
}

/* Spec 9.14.4, busy file: entry 2's verdict waits, and entry 3's behind
 * it, while entry 1's data, verification and result go on; storage is
 * asked again on the engine's timer (every AFTP_STORAGE_WAIT_RETRY_NS, not
 * in a loop); a repeated ENTRIES is answered with FEEDBACK; once storage
 * decides, the verdicts leave and the files arrive. */
static void test_busy_file_verdict_waits(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    busy.id = 2;
    busy.asked = 0;
    offer_files(&g, &s, 16, busy_op, 3, 3000);
    assert_int_equal(s.verdicts[1], 1);
    assert_int_equal(s.verdicts[2], 0);
    assert_int_equal(s.verdicts[3], 0);
    int asked = busy.asked;
    settle(&g, &s, 100); /* virtual time */
    assert_int_equal(busy.asked - asked, 100 / (AFTP_STORAGE_WAIT_RETRY_NS / 1000000));
    send_file(&g, 1);
    settle(&g, &s, 30);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    int feedbacks = s.feedbacks;
    assert_int_equal(sim_script_entries(&g, 2, 2, 0), AFTP_OK); /* the sender's resend */
    settle(&g, &s, 2);
    assert_int_equal(s.feedbacks, feedbacks + 1);
    assert_int_equal(s.verdicts[2], 0);
    busy.id = 0; /* the other session's file ended */
    settle(&g, &s, 20);
    assert_int_equal(s.verdicts[2], 1);
    assert_int_equal(s.verdicts[3], 1);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SEND);
    send_file(&g, 2);
    send_file(&g, 3);
    settle(&g, &s, 30);
    for (uint32_t id = 1; id <= 3; id++) {
        assert_int_equal(s.results[id], 1);
        assert_true(sim_file_intact(&g.st, id));
    }
    assert_false(g.st.out_of_order);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_TRANSFER);
    sim_script_free(&g);
}

/* The receiver's `oldest` counts the ends it has sent (spec 9.14.1): an
 * entry that comes while the end W ids before it is decided but not sent
 * yet (a verdict queued, a FILE_RESULT not yet out) is beyond the
 * window. W = 1, so every entry needs the previous one's end. */
static void test_entry_before_the_end_was_sent_closes(void **state)
{
    (void)state;
    for (int file = 0; file < 2; file++) {
        sim_script g;
        seen s = {0};
        sim_script_start_pipelined(&g, 1, NULL);
        if (file)
            sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "a", 2000, BS, NULL);
        else
            sim_storage_add_entry(&g.st, AFTP_ENTRY_DIR, "a", 0, 0, NULL);
        sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "b", 2000, BS, NULL);
        assert_int_equal(connect_pipelined(&g, 1), 1);
        assert_int_equal(sim_script_entries(&g, 1, 1, 0), AFTP_OK);
        if (file) {
            settle(&g, &s, 20);
            send_file(&g, 1);
            for (int k = 0; k < 4; k++)
                sim_script_tick(&g); /* verified and committed: its result queued, not sent */
            assert_true(g.st.files[0].committed);
        }
        assert_int_equal(sim_script_entries(&g, 2, 1, 0), AFTP_ERR_MALFORMED);
        expect_protocol_close(&g, &s);
        assert_false(g.st.files[1].opened);
        sim_script_free(&g);
    }
}

/* Once the end left, the next entry takes the slot. */
static void test_entry_after_the_end_was_sent(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 1, NULL, 1, 2000);
    sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "b", 2000, BS, NULL);
    send_file(&g, 1);
    settle(&g, &s, 20);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(sim_script_entries(&g, 2, 1, 0), AFTP_OK);
    settle(&g, &s, 20);
    send_file(&g, 2);
    settle(&g, &s, 20);
    assert_int_equal(s.results[2], 1);
    assert_true(sim_file_intact(&g.st, 2));
    /* A late FILE_DONE of entry 1, whose slot entry 2 holds: no answer. */
    assert_int_equal(sim_script_file_done(&g, 1), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.results[1], 1);
    sim_script_free(&g);
}

/* ---- a random sender ---- */


/* The lowest entry the receiver has not ended, as far as its answers
 * show (an honest sender's `oldest`). */
static uint32_t oldest_seen(const sim_script *g, const seen *s)
{
    uint32_t id = 1;
    for (; id <= (uint32_t)g->st.nfiles; id++) {
        int kind = g->st.files[id - 1].kind;
        int ended = s->results[id] > 0 ||
                    (s->verdicts[id] > 0 && (s->verdict[id] >= AFTP_WIRE_VERDICT_SKIP ||
                                             kind != AFTP_ENTRY_FILE));
        if (!ended)
            break;
    }
    return id;
}

/* One random step of a sender that mixes everything: ENTRIES of a
 * consecutive run inside its window (rarely beyond it, or a lone one
 * with its base off by one), DATA for any entry and block, FILE_DONE
 * (now and then with a wrong digest), DATA with a stream block outside
 * its entry, time. */
static void random_step(sim_script *g, const seen *s, uint32_t window, uint64_t *rng)
{
    uint32_t n = (uint32_t)g->st.nfiles, lo = oldest_seen(g, s);
    uint32_t id = 1 + (uint32_t)(sim_rand(rng) % n);
    const sim_file *f = &g->st.files[id - 1];
    int rc = AFTP_OK;
    switch (sim_rand(rng) % 4) {
    case 0: {
        uint32_t hi = lo + window - 1 < n ? lo + window - 1 : n; /* the window's last id */
        if (lo > n)
            break;
        id = lo + (uint32_t)(sim_rand(rng) % (hi - lo + 1));
        if (sim_rand(rng) % 200 == 0)
            hi = n; /* beyond the window, now and then */
        uint32_t count = 1 + (uint32_t)(sim_rand(rng) % (hi - id + 1));
        aftp_wire_entry list[SIM_MAX_FILES];
        for (uint32_t i = 0; i < count; i++)
            list[i] = sim_script_entry(g, id + i, AFTP_WIRE_ENTRY_SYNC | AFTP_WIRE_ENTRY_RESUME);
        if (count == 1 && sim_rand(rng) % 200 == 0)
            list[0].base_block++; /* a lone record: the encoder checks batches */
        rc = sim_script_send_entries(g, list, (uint16_t)count);
        break;
    }
    case 1:
        if (f->blocks > 0)
            rc = sim_script_stream_data(g, id, sim_rand(rng) % f->blocks);
        break;
    case 2:
        if (f->blocks > 0 && sim_rand(rng) % 8 == 0)
            rc = data_raw(g, id, sim_rand(rng) % (g->st.stream_end + 2), f, 0);
        else if (f->kind == AFTP_ENTRY_FILE && sim_rand(rng) % 6 == 0)
            rc = file_done_wrong_digest(g, id);
        else if (f->kind == AFTP_ENTRY_FILE)
            rc = sim_script_file_done(g, id);
        break;
    default: g->clock += sim_rand(rng) % 4000000; break;
    }
    int state = aftp_receiver_state(g->r);
    assert_true(rc == AFTP_OK || state == AFTP_STATE_CLOSING || state == AFTP_STATE_CLOSED);
}

/* After the random walk, an honest sender: the rest offered window by
 * window, every accepted file sent whole with its true digest. Whatever
 * state the walk left, every entry must end (no file stuck waiting). */
static void finish_honestly(sim_script *g, seen *s, uint32_t window)
{
    uint32_t n = (uint32_t)g->st.nfiles;
    for (int round = 0; round < 4 * (int)n && aftp_receiver_state(g->r) == AFTP_STATE_TRANSFER;
         round++) {
        uint32_t lo = oldest_seen(g, s);
        if (lo > n)
            return;
        uint32_t hi = lo + window - 1 < n ? lo + window - 1 : n;
        assert_int_equal(sim_script_entries(g, lo, (uint16_t)(hi - lo + 1),
                                            AFTP_WIRE_ENTRY_SYNC | AFTP_WIRE_ENTRY_RESUME),
                         AFTP_OK);
        settle(g, s, 20);
        for (uint32_t id = lo; id <= hi; id++)
            if (g->st.files[id - 1].kind == AFTP_ENTRY_FILE && s->verdicts[id] > 0 &&
                s->verdict[id] <= AFTP_WIRE_VERDICT_RESUME && s->results[id] == 0)
                send_file(g, id);
        settle(g, s, 30);
    }
    assert_true(aftp_receiver_state(g->r) != AFTP_STATE_TRANSFER || oldest_seen(g, s) > n);
}

/* Whatever the order: no block written twice or outside its file, the
 * files committed are the sender's bytes, storage asked in id order. */
static void check_storage(const sim_storage *st)
{
    assert_false(st->out_of_order);
    for (int i = 0; i < st->nfiles; i++) {
        const sim_file *f = &st->files[i];
        assert_int_equal(f->bad_writes, 0);
        for (uint64_t b = 0; f->writes != NULL && b < f->blocks; b++)
            assert_true(f->writes[b] <= 1);
        if (f->committed)
            assert_memory_equal(f->src, f->dst, f->size);
    }
}

static void test_random_sender(void **state)
{
    (void)state;
    int committed = 0;
    for (uint64_t seed = 1; seed <= 80; seed++) { /* windows 1 to 8 */
        sim_script g;
        seen s = {0};
        uint64_t rng = seed;
        uint32_t window = 1 + (uint32_t)(seed % 8);
        sim_script_start_pipelined(&g, window, NULL);
        uint32_t n = add_tree(&g.st);
        g.st.files[3].identical = 1;
        g.st.files[7].held[0] = (aftp_block_range){1, 2};
        g.st.files[7].held_count = 1;
        connect_pipelined(&g, window);
        for (int step = 0; step < 1500 && aftp_receiver_state(g.r) != AFTP_STATE_CLOSED; step++) {
            random_step(&g, &s, window, &rng);
            sim_script_tick(&g);
            collect(&g, &s);
        }
        finish_honestly(&g, &s, window);
        check_storage(&g.st);
        for (uint32_t id = 1; id <= n; id++)
            committed += g.st.files[id - 1].committed;
        sim_script_free(&g);
    }
    assert_true(committed > 200); /* the walks reached whole files, many of them */
}

/* ---- ABANDON (spec 6.15, 9.14.3) ---- */

static int send_abandon(sim_script *g, uint32_t id, uint16_t error)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.abandon = (aftp_wire_abandon){id, error};
    return sim_script_send(g, &p, AFTP_WIRE_ABANDON);
}

/* A file the sender gives up half-way is discarded and answered with its
 * error, every time it is asked; an ABANDON for an entry never offered is
 * dropped; the other files go on and commit. */
static void test_abandon_discards_one_file(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    offer_files(&g, &s, 16, NULL, 3, 4 * BS);
    assert_int_equal(s.verdict[2], AFTP_WIRE_VERDICT_SEND);
    for (uint64_t b = 0; b < 2; b++)
        assert_int_equal(sim_script_stream_data(&g, 2, b), AFTP_OK);
    assert_int_equal(send_abandon(&g, 9, AFTP_WIRE_ERR_SOURCE_CHANGED), AFTP_OK);
    assert_int_equal(send_abandon(&g, 2, AFTP_WIRE_ERR_SOURCE_CHANGED), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.results[9], 0);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.result_error[2], AFTP_WIRE_ERR_SOURCE_CHANGED);
    assert_false(g.st.files[1].committed);
    assert_int_equal(g.st.files[1].receiver_closed, 1);
    /* its answer lost: the repeated ABANDON gets it again */
    assert_int_equal(send_abandon(&g, 2, AFTP_WIRE_ERR_SOURCE_CHANGED), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.results[2], 2);
    send_file(&g, 1);
    send_file(&g, 3);
    settle(&g, &s, 200);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    assert_int_equal(s.result_error[3], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 1));
    assert_true(sim_file_intact(&g.st, 3));
    assert_int_equal(s.closes, 0);
    sim_script_free(&g);
}

/* ---- the read-back ahead (spec 9.10, 9.14.3) ---- */

#define STEP AFTP_RECEIVER_VERIFY_STEP

/* A session of window 16 offering files of these sizes, verdicts in. */
static void offer_sizes(sim_script *g, seen *s, const uint64_t *sizes, uint16_t count)
{
    sim_script_start_pipelined(g, 16, NULL);
    for (uint16_t i = 0; i < count; i++)
        sim_storage_add_entry(&g->st, AFTP_ENTRY_FILE, "f", sizes[i], BS, NULL);
    assert_int_equal(connect_pipelined(g, 16), 16);
    assert_int_equal(sim_script_entries(g, 1, count, 0), AFTP_OK);
    settle(g, s, 20);
}

static void send_blocks(sim_script *g, uint32_t id, uint64_t from, uint64_t to)
{
    for (uint64_t b = from; b < to; b++)
        assert_int_equal(sim_script_stream_data(g, id, b), AFTP_OK);
}

/* Small files that become READY while a big file's held prefix waits to
 * be hashed (4 steps of it held, none hashed yet) are read back first,
 * one step each, before any step of the prefix: their commits never wait
 * behind it. Then the prefix goes on, one step per timer, and the big
 * file's read-back at READY reads only its last bytes, continuing the
 * prefix's digest. */
static void test_ready_files_go_before_the_prefix(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    const uint64_t sizes[] = {3 * BS, 4 * STEP + 500, 2 * BS};
    offer_sizes(&g, &s, sizes, 3);
    sim_file *small1 = &g.st.files[0], *big = &g.st.files[1], *small3 = &g.st.files[2];
    send_blocks(&g, 1, 0, 2);
    send_blocks(&g, 2, 0, big->blocks - 1);
    send_blocks(&g, 1, 2, 3);
    assert_int_equal(sim_script_file_done(&g, 1), AFTP_OK);
    send_file(&g, 3);
    sim_script_tick(&g);
    assert_int_equal(small1->viewed, small1->size);
    assert_int_equal(big->viewed, 0);
    sim_script_tick(&g);
    assert_int_equal(small3->viewed, small3->size);
    assert_int_equal(big->viewed, 0);
    for (uint64_t step = 1; step <= 4; step++) {
        sim_script_tick(&g);
        assert_int_equal(big->viewed, step * STEP);
    }
    settle(&g, &s, 30);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.results[3], 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    assert_int_equal(s.result_error[3], AFTP_WIRE_ERR_NONE);
    assert_int_equal(s.results[2], 0);
    assert_int_equal(big->viewed, 4 * STEP); /* its last block is missing: the prefix stops */
    send_blocks(&g, 2, big->blocks - 1, big->blocks);
    assert_int_equal(sim_script_file_done(&g, 2), AFTP_OK);
    settle(&g, &s, 30);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.result_error[2], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 2));
    assert_int_equal(big->viewed, big->size); /* every byte once */
    assert_int_equal(big->viewed_unwritten, 0);
    sim_script_free(&g);
}

/* A file abandoned while its prefix is being hashed: its state is let
 * go, and the next big file's prefix is hashed from its own first byte
 * with a fresh digest (a digest carried over would fail it). */
static void test_abandoned_mid_prefix_next_file_proceeds(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    const uint64_t sizes[] = {3 * STEP + 100, 3 * STEP + 100};
    offer_sizes(&g, &s, sizes, 2);
    sim_file *first = &g.st.files[0], *next = &g.st.files[1];
    send_blocks(&g, 1, 0, 2 * STEP / BS);
    run_now(&g, &s);
    assert_int_equal(first->viewed, 2 * STEP);
    assert_int_equal(send_abandon(&g, 1, AFTP_WIRE_ERR_SOURCE_CHANGED), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_SOURCE_CHANGED);
    assert_false(first->committed);
    send_blocks(&g, 2, 0, 2 * STEP / BS);
    run_now(&g, &s);
    assert_int_equal(next->viewed, 2 * STEP);
    assert_int_equal(first->viewed, 2 * STEP);
    send_blocks(&g, 2, 2 * STEP / BS, next->blocks);
    assert_int_equal(sim_script_file_done(&g, 2), AFTP_OK);
    settle(&g, &s, 30);
    assert_int_equal(s.results[2], 1);
    assert_int_equal(s.result_error[2], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 2));
    assert_int_equal(next->viewed, next->size);
    sim_script_free(&g);
}

/* A RESUME verdict's held blocks count as held: the read-back ahead
 * hashes them before any DATA came, and stops where the first missing
 * block is, going on as DATA fills it. */
static void test_prefix_reads_resumed_held_blocks(void **state)
{
    (void)state;
    sim_script g;
    seen s = {0};
    sim_script_start_pipelined(&g, 16, NULL);
    sim_file *f = sim_storage_add_entry(&g.st, AFTP_ENTRY_FILE, "part", 3 * STEP + 100, BS, NULL);
    const uint64_t held = 2 * STEP / BS;
    f->held[0] = (aftp_block_range){0, held};
    f->held_count = 1;
    connect_pipelined(&g, 16);
    aftp_wire_entry e = sim_script_entry(&g, 1, AFTP_WIRE_ENTRY_RESUME);
    assert_int_equal(sim_script_send_entries(&g, &e, 1), AFTP_OK);
    settle(&g, &s, 20);
    assert_int_equal(s.verdict[1], AFTP_WIRE_VERDICT_RESUME);
    assert_int_equal(f->viewed, 2 * STEP);
    send_blocks(&g, 1, held + 1, f->blocks); /* all but the first block after the held ones */
    assert_int_equal(sim_script_file_done(&g, 1), AFTP_OK);
    run_now(&g, &s);
    assert_int_equal(f->viewed, 2 * STEP);
    send_blocks(&g, 1, held, held + 1);
    settle(&g, &s, 30);
    assert_int_equal(s.results[1], 1);
    assert_int_equal(s.result_error[1], AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 1));
    assert_int_equal(f->viewed, f->size);
    sim_script_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_follows_entries_not_window),
        cmocka_unit_test(test_negotiation),
        cmocka_unit_test(test_protected_pipelined_session),
        cmocka_unit_test(test_client_without_pipeline_gets_one_file_session),
        cmocka_unit_test(test_tree_arrives_byte_exact),
        cmocka_unit_test(test_feedback_lists_missing_stream_blocks),
        cmocka_unit_test(test_group_commit_before_results),
        cmocka_unit_test(test_group_commit_at_half_window),
        cmocka_unit_test(test_commit_alone_without_group_op),
        cmocka_unit_test(test_group_commit_in_background),
        cmocka_unit_test(test_group_in_flight_holds_the_idle_timer),
        cmocka_unit_test(test_read_back_holds_the_idle_timer),
        cmocka_unit_test(test_failed_file_ends_alone_and_results_repeat),
        cmocka_unit_test(test_skip_and_resume),
        cmocka_unit_test(test_held_marks_follow_the_window),
        cmocka_unit_test(test_resumed_file_waiting_for_commit_not_repeated),
        cmocka_unit_test(test_storage_failure_ends_session),
        cmocka_unit_test(test_entry_beyond_window_closes),
        cmocka_unit_test(test_bases_that_break_the_stream_close),
        cmocka_unit_test(test_data_without_verdict_or_outside_dropped),
        cmocka_unit_test(test_refused_path_and_repeated_entries),
        cmocka_unit_test(test_busy_file_verdict_waits),
        cmocka_unit_test(test_entry_before_the_end_was_sent_closes),
        cmocka_unit_test(test_entry_after_the_end_was_sent),
        cmocka_unit_test(test_random_sender),
        cmocka_unit_test(test_abandon_discards_one_file),
        cmocka_unit_test(test_ready_files_go_before_the_prefix),
        cmocka_unit_test(test_abandoned_mid_prefix_next_file_proceeds),
        cmocka_unit_test(test_prefix_reads_resumed_held_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
