/* The sender's pipelined mode (spec sections 9.14, 12.3.2) against a
 * scripted pipelined receiver (label sim), on a virtual clock over a link
 * with a fixed delay and random loss both ways. The receiver is written
 * from proto's encoders only: it answers HELLO with PIPELINE(W), each
 * ENTRIES with the verdicts its script gives, keeps a stream block map,
 * sends FEEDBACK (file_id 0) over the stream, verifies each file against
 * its FILE_DONE and the source, and answers FILE_RESULT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_digest.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define DGRAM 1452u
#define RCV_ID 0x44444444u
#define SND_ID 0x11111111u
#define MAX_IDS 1200u
#define MAX_STREAM (1u << 16)
#define QUEUE_LEN 8192u
#define ONE_WAY_NS (10 * SIM_MS) /* RTT 20 ms */
#define RATE_BPS (100u * 1000u * 1000u)

typedef struct packet {
    uint64_t at;
    size_t len;
    uint8_t data[DGRAM];
} packet;

typedef struct pipe_link { /* one direction: constant delay, so FIFO */
    packet *q;
    size_t head, tail;
} pipe_link;

/* What the script answers for an entry. */
typedef struct script_verdict {
    uint8_t verdict;
    uint16_t error;
    aftp_wire_range held; /* RESUME: one held range */
} script_verdict;

typedef struct rcv_entry {
    int known, decided, done_seen, result_sent;
    uint8_t kind;
    uint64_t base, blocks, size;
    uint32_t block_size;
    uint8_t done_digest[AFTP_DIGEST_LEN];
} rcv_entry;

typedef struct world {
    /* The sender's files: entry i's bytes at src + off[i]. */
    uint8_t *src, *dst;
    uint64_t off[MAX_IDS + 1], size[MAX_IDS + 1];
    int kind[MAX_IDS + 1];
    uint32_t nentries;
    uint32_t next_add;      /* the next entry to add, 0 once all are */
    aftp_sender *s;
    uint64_t clock;
    uint64_t rng;
    unsigned loss_pct;
    pipe_link to_rcv, to_snd;
    /* The scripted receiver. */
    uint32_t ack_window;    /* PIPELINE in HELLO_ACK; 0: none */
    uint32_t hello_window;  /* PIPELINE the sender's HELLO announced; 0: none */
    script_verdict script[MAX_IDS + 1];
    int script_contradict;  /* after a SEND for entry 1, a SKIP for it */
    int script_unknown;     /* a verdict for an entry never offered */
    rcv_entry e[MAX_IDS + 1];
    uint8_t *held;          /* per stream block */
    uint64_t last_data_ns, last_end_ns;
    uint64_t views_this_call, most_views_in_a_call;
    uint64_t highest, data_packets, largest_pn, rcv_pn;
    uint64_t feedback_at;   /* 0: none scheduled */
    uint64_t data_bytes;    /* DATA payload bytes that reached the receiver */
    uint64_t results_ok, digests_wrong, entries_seen, offers_seen;
    uint16_t close_error;
    int closes;
    /* The sender's events. */
    uint64_t file_end_ok, entry_end, entry_end_ok, held_bytes;
    int entry_end_error[MAX_IDS + 1];
    int entry_end_verdict[MAX_IDS + 1];
    int closed_error;
} world;

static uint64_t next_rand(world *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static void on_event(void *user, const aftp_event *ev)
{
    world *w = user;
    if (ev->type == AFTP_EV_FILE_END && ev->error == AFTP_OK)
        w->file_end_ok++;
    if (ev->type == AFTP_EV_ENTRY_END) {
        w->entry_end++;
        w->entry_end_ok += ev->error == AFTP_OK;
        w->held_bytes += ev->held_bytes;
        w->entry_end_error[ev->info->file_id] = ev->error;
        w->entry_end_verdict[ev->info->file_id] = ev->verdict;
        w->last_end_ns = w->clock;
    }
    if (ev->type == AFTP_EV_CLOSED)
        w->closed_error = ev->error;
}

static int view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    world *w = user;
    assert_true(id >= 1 && id <= w->nentries && off + len <= w->size[id]);
    *out = w->src + w->off[id] + off;
    w->views_this_call++;
    return AFTP_OK;
}

static int close_file(void *user, uint32_t id, int ok)
{
    (void)user, (void)id, (void)ok;
    return AFTP_OK;
}

static const aftp_storage_ops storage = {.view = view, .close = close_file};

/* `n` entries; sizes from `size_of` (0..), all SEND unless scripted. */
static void world_open(world *w, uint32_t n, uint32_t window, unsigned loss_pct,
                       uint64_t (*size_of)(uint32_t id))
{
    memset(w, 0, sizeof *w);
    w->rng = 0x9e3779b97f4a7c15u;
    w->loss_pct = loss_pct;
    w->ack_window = window;
    w->nentries = n;
    uint64_t total = 0;
    for (uint32_t id = 1; id <= n; id++) {
        w->off[id] = total;
        w->size[id] = size_of(id);
        w->kind[id] = AFTP_ENTRY_FILE;
        total += w->size[id];
    }
    w->src = malloc(total + 1);
    w->dst = calloc(total + 1, 1);
    w->held = calloc(MAX_STREAM, 1);
    w->to_rcv.q = malloc(QUEUE_LEN * sizeof(packet));
    w->to_snd.q = malloc(QUEUE_LEN * sizeof(packet));
    for (uint64_t i = 0; i < total; i++)
        w->src[i] = (uint8_t)next_rand(w);
    aftp_sender_settings ss;
    aftp_sender_settings_default(&ss);
    ss.conn_id = SND_ID;
    ss.storage = &storage;
    ss.on_event = on_event;
    ss.user = w;
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = RATE_BPS;
    ss.initial_rtt_ns = 2 * ONE_WAY_NS;
    ss.security.cipher = AFTP_CIPHER_NONE;
    ss.pipeline_window = window ? window : 64;
    assert_int_equal(aftp_sender_new(&ss, 0, &w->s), AFTP_OK);
}

/* The application's side: entries are added while the sender takes them
 * (AFTP_ERR_LIMIT once pipeline_window are held), the rest after ENTRY_END
 * events made room; finish once all are in. */
static void feed(world *w)
{
    for (uint32_t id = w->next_add; id != 0 && id <= w->nentries; id = ++w->next_add) {
        char path[32];
        snprintf(path, sizeof path, "f%u", id);
        aftp_entry_info info = {.file = {.file_id = id, .size = w->size[id], .mode = 0644,
                                         .path = path},
                                .kind = w->kind[id], .flags = AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC};
        if (w->kind[id] == AFTP_ENTRY_SYMLINK)
            info.target = "../elsewhere";
        if (w->kind[id] != AFTP_ENTRY_FILE)
            info.flags = 0;
        int rc = aftp_sender_add_entry(w->s, &info);
        if (rc == AFTP_ERR_LIMIT)
            return;
        assert_int_equal(rc, AFTP_OK);
    }
    if (w->next_add > w->nentries) {
        aftp_sender_finish(w->s);
        w->next_add = 0;
    }
}

static world *world_new(uint32_t n, uint32_t window, unsigned loss_pct,
                        uint64_t (*size_of)(uint32_t id))
{
    world *w = malloc(sizeof *w);
    assert_non_null(w);
    world_open(w, n, window, loss_pct, size_of);
    w->next_add = 1;
    return w;
}

static void world_free(world *w)
{
    aftp_sender_del(w->s);
    free(w->src);
    free(w->dst);
    free(w->held);
    free(w->to_rcv.q);
    free(w->to_snd.q);
    free(w);
}

static void link_put(world *w, pipe_link *l, const uint8_t *data, size_t len)
{
    if (next_rand(w) % 100 < w->loss_pct)
        return;
    assert_true(l->tail - l->head < QUEUE_LEN);
    packet *p = &l->q[l->tail++ % QUEUE_LEN];
    p->at = w->clock + ONE_WAY_NS;
    p->len = len;
    memcpy(p->data, data, len);
}

/* ---- the scripted receiver ---- */

static void send_packet(world *w, aftp_wire_packet *p, uint8_t type)
{
    uint8_t buf[DGRAM];
    size_t len;
    p->hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = type, .conn_id = SND_ID,
                                .pn = w->rcv_pn++};
    assert_int_equal(aftp_wire_encode(p, buf, sizeof buf, &len), AFTP_OK);
    link_put(w, &w->to_snd, buf, len);
}

static void on_hello(world *w, const aftp_wire_hello *h)
{
    if (aftp_wire_ext_pipeline(h->ext, h->ext_len, &w->hello_window) <= 0)
        w->hello_window = 0;
    uint8_t ext[16];
    aftp_wire_writer wr;
    aftp_wire_packet a;
    memset(&a, 0, sizeof a);
    aftp_wire_writer_init(&wr, ext, sizeof ext);
    if (w->ack_window)
        assert_int_equal(aftp_wire_ext_put_pipeline(&wr, w->ack_window), AFTP_OK);
    a.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = RCV_ID,
                                          .cipher = AFTP_WIRE_CIPHER_NONE,
                                          .max_datagram = DGRAM, .ext = ext,
                                          .ext_len = (uint16_t)wr.pos};
    send_packet(w, &a, AFTP_WIRE_HELLO_ACK);
}

static void mark_held(world *w, uint64_t from, uint64_t len)
{
    for (uint64_t b = from; b < from + len; b++)
        w->held[b] = 1;
}

/* The script's verdict for a new entry; its held blocks are marked, and a
 * RESUME's held bytes are there already. */
static void decide(world *w, const aftp_wire_entry *in, aftp_wire_verdict *v)
{
    rcv_entry *e = &w->e[in->entry_id];
    const script_verdict *sv = &w->script[in->entry_id];
    *e = (rcv_entry){.known = 1, .decided = 1, .kind = in->kind, .base = in->base_block,
                     .blocks = aftp_wire_entry_blocks(in), .size = in->size,
                     .block_size = in->block_size};
    *v = (aftp_wire_verdict){.entry_id = in->entry_id, .verdict = sv->verdict,
                             .error = sv->error};
    if (sv->verdict == AFTP_WIRE_VERDICT_SKIP || sv->verdict == AFTP_WIRE_VERDICT_REFUSED)
        mark_held(w, e->base, e->blocks);
    if (sv->verdict == AFTP_WIRE_VERDICT_RESUME) {
        v->range_count = 1;
        v->ranges = &sv->held;
        if (sv->held.start + sv->held.len <= e->blocks) {
            mark_held(w, e->base + sv->held.start, sv->held.len);
            uint64_t off = sv->held.start * e->block_size;
            uint64_t end = (sv->held.start + sv->held.len) * e->block_size;
            end = end < e->size ? end : e->size;
            memcpy(w->dst + w->off[in->entry_id] + off, w->src + w->off[in->entry_id] + off,
                   end - off);
        }
    }
}

/* Every ENTRIES is answered with the verdicts of all its entries. */
static void on_entries(world *w, const aftp_wire_entries *in)
{
    static aftp_wire_verdict out[AFTP_WIRE_MAX_ENTRIES];
    aftp_wire_record_iter it;
    aftp_wire_entry rec;
    uint16_t n = 0;
    w->entries_seen++;
    aftp_wire_entries_iter_init(&it, in);
    while (aftp_wire_entries_next(&it, &rec)) {
        assert_true(rec.entry_id <= w->nentries);
        if (!w->e[rec.entry_id].decided)
            decide(w, &rec, &out[n]);
        else
            out[n] = (aftp_wire_verdict){.entry_id = rec.entry_id,
                                         .verdict = w->script[rec.entry_id].verdict,
                                         .error = w->script[rec.entry_id].error,
                                         .range_count = w->script[rec.entry_id].verdict ==
                                                                AFTP_WIRE_VERDICT_RESUME,
                                         .ranges = &w->script[rec.entry_id].held};
        n++;
    }
    if (w->script_unknown)
        out[0].entry_id = w->nentries + 7, n = 1;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.verdicts = (aftp_wire_verdicts){.count = n, .verdicts = out};
    send_packet(w, &p, AFTP_WIRE_VERDICTS);
    if (w->script_contradict) { /* entry 1 has SEND and is still being sent */
        out[0] = (aftp_wire_verdict){.entry_id = 1, .verdict = AFTP_WIRE_VERDICT_SKIP};
        p.u.verdicts.count = 1;
        send_packet(w, &p, AFTP_WIRE_VERDICTS);
    }
}

static void digest_of(const uint8_t *bytes, uint64_t len, uint8_t *out)
{
    aftp_digest *d;
    assert_int_equal(aftp_digest_new(&d), AFTP_OK);
    aftp_digest_update(d, bytes, len);
    aftp_digest_final(d, out);
    aftp_digest_del(d);
}

static int all_held(const world *w, const rcv_entry *e)
{
    for (uint64_t b = e->base; b < e->base + e->blocks; b++)
        if (!w->held[b])
            return 0;
    return 1;
}

/* Section 9.10 at the receiver: verify what was stored against FILE_DONE
 * and, for the test, against the source too. */
static void maybe_result(world *w, uint32_t id)
{
    rcv_entry *e = &w->e[id];
    uint8_t got[AFTP_DIGEST_LEN], truth[AFTP_DIGEST_LEN];
    if (!e->done_seen || !all_held(w, e))
        return;
    digest_of(w->dst + w->off[id], e->size, got);
    digest_of(w->src + w->off[id], e->size, truth);
    if (!e->result_sent) {
        w->results_ok += memcmp(got, e->done_digest, sizeof got) == 0;
        w->digests_wrong += memcmp(truth, e->done_digest, sizeof got) != 0;
    }
    e->result_sent = 1;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_result.file_id = id;
    p.u.file_result.error = memcmp(got, e->done_digest, sizeof got) == 0
                                ? AFTP_WIRE_ERR_NONE
                                : AFTP_WIRE_ERR_DIGEST_MISMATCH;
    memcpy(p.u.file_result.digest, got, sizeof got);
    send_packet(w, &p, AFTP_WIRE_FILE_RESULT);
}

static void on_data(world *w, const aftp_wire_packet *p)
{
    const aftp_wire_data *d = &p->u.data;
    rcv_entry *e = &w->e[d->file_id];
    assert_true(e->decided && d->block >= e->base && d->block < e->base + e->blocks);
    w->data_packets++;
    w->last_data_ns = w->clock;
    w->data_bytes += d->payload_len;
    if (d->block + 1 > w->highest)
        w->highest = d->block + 1;
    if (!w->held[d->block]) {
        memcpy(w->dst + w->off[d->file_id] + (d->block - e->base) * e->block_size, d->payload,
               d->payload_len);
        w->held[d->block] = 1;
    }
    if (w->feedback_at == 0)
        w->feedback_at = w->clock + SIM_MS;
    maybe_result(w, d->file_id);
}

static void send_feedback(world *w)
{
    aftp_wire_range ranges[32];
    uint16_t n = 0;
    uint64_t cum = 0, held = 0, end = w->highest;
    for (uint32_t id = 1; id <= w->nentries; id++)
        if (w->e[id].done_seen && w->e[id].base + w->e[id].blocks > end)
            end = w->e[id].base + w->e[id].blocks;
    while (cum < end && w->held[cum])
        cum++;
    for (uint64_t b = 0; b < end; b++)
        held += w->held[b];
    for (uint64_t b = cum; b < end && n < 32;) {
        if (w->held[b]) {
            b++;
            continue;
        }
        uint64_t start = b;
        while (b < end && !w->held[b])
            b++;
        ranges[n++] = (aftp_wire_range){start, b - start};
    }
    uint64_t scan_end = n == 32 ? ranges[31].start + ranges[31].len : end;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.feedback = (aftp_wire_feedback){.file_id = 0, .largest_pn = w->largest_pn,
                                        .recv_time_us = w->clock / 1000,
                                        .packets_received = w->data_packets,
                                        .blocks_received = held, .cum_block = cum,
                                        .scan_start = cum, .scan_end = scan_end,
                                        .range_count = n, .ranges = ranges};
    send_packet(w, &p, AFTP_WIRE_FEEDBACK);
    w->feedback_at = 0;
}

/* One-file mode, for a HELLO_ACK without PIPELINE: accept, then verify. */
static void on_offer(world *w, const aftp_wire_file_offer *o)
{
    w->offers_seen++;
    w->e[o->file_id] = (rcv_entry){.known = 1, .decided = 1, .kind = AFTP_WIRE_KIND_FILE,
                                   .blocks = aftp_wire_block_count(o->size, o->block_size),
                                   .size = o->size, .block_size = o->block_size};
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_reply.file_id = o->file_id;
    send_packet(w, &p, AFTP_WIRE_FILE_REPLY);
    /* Each file's blocks from 0 again (base 0): the map starts over. */
    memset(w->held, 0, MAX_STREAM);
    w->highest = 0;
}

static void receiver_read(world *w, const uint8_t *buf, size_t len)
{
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(buf, len, &p), AFTP_OK);
    if (p.hdr.pn > w->largest_pn) /* any type (6.7), a repeated FILE_DONE too */
        w->largest_pn = p.hdr.pn;
    switch (p.hdr.type) {
    case AFTP_WIRE_HELLO: on_hello(w, &p.u.hello); break;
    case AFTP_WIRE_ENTRIES: on_entries(w, &p.u.entries); break;
    case AFTP_WIRE_FILE_OFFER: on_offer(w, &p.u.file_offer); break;
    case AFTP_WIRE_DATA: on_data(w, &p); break;
    case AFTP_WIRE_FILE_DONE:
        w->e[p.u.file_done.file_id].done_seen = 1;
        memcpy(w->e[p.u.file_done.file_id].done_digest, p.u.file_done.digest, AFTP_DIGEST_LEN);
        if (!all_held(w, &w->e[p.u.file_done.file_id]))
            send_feedback(w);
        maybe_result(w, p.u.file_done.file_id);
        break;
    case AFTP_WIRE_CLOSE:
        w->closes++;
        w->close_error = p.u.close.error;
        break;
    default: break;
    }
}

/* ---- the clock ---- */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void run(world *w, uint64_t limit_ns)
{
    uint8_t buf[DGRAM], pkt[DGRAM];
    aftp_datagram dg;
    while (aftp_sender_state(w->s) != AFTP_STATE_CLOSED && w->clock < limit_ns) {
        feed(w);
        for (;;) {
            w->views_this_call = 0;
            int wrote = aftp_sender_write(w->s, w->clock, buf, sizeof buf, &dg);
            if (w->views_this_call > w->most_views_in_a_call)
                w->most_views_in_a_call = w->views_this_call;
            if (wrote != 1)
                break;
            memcpy(pkt, dg.head, dg.head_len);
            if (dg.payload_len > 0)
                memcpy(pkt + dg.head_len, dg.payload, dg.payload_len);
            link_put(w, &w->to_rcv, pkt, dg.head_len + dg.payload_len);
        }
        uint64_t next = aftp_sender_expiry(w->s);
        if (w->to_rcv.head < w->to_rcv.tail)
            next = min_u64(next, w->to_rcv.q[w->to_rcv.head % QUEUE_LEN].at);
        if (w->to_snd.head < w->to_snd.tail)
            next = min_u64(next, w->to_snd.q[w->to_snd.head % QUEUE_LEN].at);
        if (w->feedback_at)
            next = min_u64(next, w->feedback_at);
        w->clock = next > w->clock ? next : w->clock + 1000;
        while (w->to_rcv.head < w->to_rcv.tail && w->to_rcv.q[w->to_rcv.head % QUEUE_LEN].at <= w->clock) {
            packet *p = &w->to_rcv.q[w->to_rcv.head++ % QUEUE_LEN];
            receiver_read(w, p->data, p->len);
        }
        if (w->feedback_at && w->feedback_at <= w->clock)
            send_feedback(w);
        while (w->to_snd.head < w->to_snd.tail && w->to_snd.q[w->to_snd.head % QUEUE_LEN].at <= w->clock) {
            packet *p = &w->to_snd.q[w->to_snd.head++ % QUEUE_LEN];
            aftp_sender_read(w->s, w->clock, p->data, p->len);
        }
        if (w->clock >= aftp_sender_expiry(w->s))
            aftp_sender_handle_expiry(w->s, w->clock);
    }
}

static uint64_t small_size(uint32_t id)
{
    return 100 + (id * 2654435761u) % 6000; /* 1 to 5 blocks */
}

static uint64_t total_bytes(const world *w)
{
    uint64_t t = 0;
    for (uint32_t id = 1; id <= w->nentries; id++)
        t += w->size[id];
    return t;
}

/* 1,000 small files through `loss_pct` loss: every file verified with the
 * right digest, in a virtual time near bytes / rate, not per-file RTTs. */
static void many_files(unsigned loss_pct)
{
    world *w = world_new(1000, 1024, loss_pct, small_size);
    run(w, 120 * SIM_S);
    assert_int_equal(aftp_sender_state(w->s), AFTP_STATE_CLOSED);
    assert_int_equal(w->closed_error, AFTP_OK);
    assert_int_equal(w->hello_window, 1024);
    assert_int_equal(w->entries_seen > 0, 1);
    assert_int_equal(w->results_ok, 1000);
    assert_int_equal(w->digests_wrong, 0);
    assert_int_equal(w->file_end_ok, 1000);
    assert_int_equal(w->entry_end_ok, 1000);
    assert_memory_equal(w->dst, w->src, total_bytes(w));
    /* Bytes at the rate, inflated by the loss and the headers, plus a few
     * round trips: 1,000 per-file round trips would be 20 s. */
    uint64_t wire_ns = total_bytes(w) * 8 * 1000 / (RATE_BPS / 1000000) * 100 / (100 - loss_pct) *
                       12 / 10;
    uint64_t bound = wire_ns + 10 * 2 * ONE_WAY_NS;
    aftp_stats st;
    aftp_sender_get_stats(w->s, &st);
    printf("# %u%% loss: %llu bytes, every entry ended at %.3f s virtual (bound %.3f s), %llu bytes resent, last data at %.3f s\n", loss_pct,
           (unsigned long long)total_bytes(w), (double)w->last_end_ns / SIM_S, (double)bound / SIM_S,
           (unsigned long long)st.payload_bytes_retransmitted, (double)w->last_data_ns / SIM_S);
    assert_true(w->last_end_ns <= bound);
    world_free(w);
}

static void test_thousand_files_0pct(void **state)
{
    (void)state;
    many_files(0);
}

static void test_thousand_files_1pct(void **state)
{
    (void)state;
    many_files(1);
}

static void test_thousand_files_5pct(void **state)
{
    (void)state;
    many_files(5);
}

/* The contrast: with a window of one entry, each file waits for the end
 * of the one before, about a round trip per file. */
static void test_window_of_one_costs_a_round_trip_per_file(void **state)
{
    (void)state;
    world *w = world_new(100, 1, 0, small_size);
    run(w, 120 * SIM_S);
    assert_int_equal(w->closed_error, AFTP_OK);
    assert_int_equal(w->results_ok, 100);
    printf("# W=1, 100 files: %.3f s virtual\n", (double)w->clock / SIM_S);
    assert_true(w->clock >= 100 * 2 * ONE_WAY_NS);
    world_free(w);
}

static uint64_t ten_blocks(uint32_t id)
{
    (void)id;
    return 10 * (DGRAM - AFTP_WIRE_DATA_OVERHEAD) - 100;
}

/* SKIP sends nothing of its file, RESUME only the blocks not held; the
 * resumed file's digest still covers the whole file. */
static void test_skip_and_resume_send_only_missing_blocks(void **state)
{
    (void)state;
    world *w = world_new(3, 16, 0, ten_blocks);
    w->script[1].verdict = AFTP_WIRE_VERDICT_SKIP;
    w->script[2].verdict = AFTP_WIRE_VERDICT_RESUME;
    w->script[2].held = (aftp_wire_range){2, 8}; /* blocks 2..9, the short last one too */
    run(w, 10 * SIM_S);
    assert_int_equal(w->closed_error, AFTP_OK);
    uint32_t bs = DGRAM - AFTP_WIRE_DATA_OVERHEAD;
    aftp_stats st;
    aftp_sender_get_stats(w->s, &st);
    assert_int_equal(st.payload_bytes_sent, 2 * bs + w->size[3]);
    assert_int_equal(w->data_bytes, 2 * bs + w->size[3]);
    assert_int_equal(w->results_ok, 2);
    assert_int_equal(w->digests_wrong, 0);
    assert_int_equal(w->held_bytes, w->size[2] - 2 * bs);
    assert_int_equal(w->entry_end_verdict[1], AFTP_VERDICT_SKIP);
    assert_int_equal(w->entry_end_verdict[2], AFTP_VERDICT_RESUME);
    assert_int_equal(w->entry_end_verdict[3], AFTP_VERDICT_SEND);
    assert_int_equal(w->entry_end_ok, 3);
    world_free(w);
}

static uint64_t no_bytes(uint32_t id)
{
    (void)id;
    return 0;
}

/* Directories and links are placed by their verdict: no DATA, no FILE_DONE. */
static void test_dirs_and_links_send_no_data(void **state)
{
    (void)state;
    world *w = world_new(4, 16, 0, no_bytes);
    w->kind[1] = w->kind[3] = AFTP_ENTRY_DIR;
    w->kind[2] = w->kind[4] = AFTP_ENTRY_SYMLINK;
    run(w, 10 * SIM_S);
    assert_int_equal(w->closed_error, AFTP_OK);
    assert_int_equal(w->data_packets, 0);
    assert_int_equal(w->entry_end_ok, 4);
    assert_int_equal(w->file_end_ok, 0);
    world_free(w);
}

/* A receiver that breaks 9.14.3 gets CLOSE(PROTOCOL); every entry ends. */
static void broken_verdicts(world *w)
{
    run(w, 10 * SIM_S);
    assert_int_equal(aftp_sender_state(w->s), AFTP_STATE_CLOSED);
    assert_int_equal(w->close_error, AFTP_WIRE_ERR_PROTOCOL);
    assert_int_equal(w->closed_error, AFTP_ERR_MALFORMED);
    assert_int_equal(w->entry_end, w->nentries);
    assert_int_equal(w->entry_end_ok, 0);
}

static void test_verdict_for_unknown_entry_is_protocol(void **state)
{
    (void)state;
    world *w = world_new(3, 16, 0, ten_blocks);
    w->script_unknown = 1;
    broken_verdicts(w);
    world_free(w);
}

static void test_held_range_beyond_file_is_protocol(void **state)
{
    (void)state;
    world *w = world_new(3, 16, 0, ten_blocks);
    w->script[2].verdict = AFTP_WIRE_VERDICT_RESUME;
    w->script[2].held = (aftp_wire_range){5, 6}; /* blocks 5..10 of a 10-block file */
    broken_verdicts(w);
    world_free(w);
}

static void test_contradicting_verdict_is_protocol(void **state)
{
    (void)state;
    world *w = world_new(3, 16, 0, ten_blocks);
    w->script_contradict = 1; /* SEND for entry 1, then SKIP for it */
    broken_verdicts(w);
    world_free(w);
}

/* A HELLO_ACK without PIPELINE: one-file mode, FILE_OFFER per file (no
 * ENTRIES), and a directory entry ends refused without reaching the wire. */
static void test_ack_without_pipeline_is_one_file_mode(void **state)
{
    (void)state;
    world *w = world_new(3, 0, 0, ten_blocks);
    w->kind[2] = AFTP_ENTRY_DIR;
    w->size[2] = 0;
    run(w, 10 * SIM_S);
    assert_int_equal(w->closed_error, AFTP_OK);
    assert_int_equal(w->entries_seen, 0);
    assert_int_equal(w->offers_seen, 2);
    assert_int_equal(w->results_ok, 2);
    assert_int_equal(w->file_end_ok, 2);
    assert_int_equal(w->entry_end_error[2], AFTP_ERR_PEER_REFUSED);
    assert_int_equal(w->entry_end_verdict[2], AFTP_VERDICT_REFUSED);
    world_free(w);
}

/* Section 12.3.2: a HELLO_ACK window above the one proposed breaks the
 * negotiation: CLOSE(PROTOCOL), no ENTRIES, and the queued entries end. */
static void test_ack_window_above_proposal_is_protocol(void **state)
{
    (void)state;
    world *w = world_new(3, 16, 0, ten_blocks);
    w->ack_window = 17;
    run(w, 10 * SIM_S);
    assert_int_equal(w->hello_window, 16);
    assert_int_equal(aftp_sender_state(w->s), AFTP_STATE_CLOSED);
    assert_int_equal(w->close_error, AFTP_WIRE_ERR_PROTOCOL);
    assert_int_equal(w->entries_seen, 0);
    assert_int_equal(w->entry_end, 3);
    world_free(w);
}

static uint64_t three_thousand_blocks(uint32_t id)
{
    (void)id;
    return 3000 * (DGRAM - AFTP_WIRE_DATA_OVERHEAD);
}

/* A file resumed after most of its blocks: the held blocks are read for
 * the digest (which still comes out right) a bounded step per call, not
 * all in the call that sends the first missing block. */
static void test_resumed_file_hashed_in_steps(void **state)
{
    (void)state;
    world *w = world_new(1, 4, 0, three_thousand_blocks);
    w->script[1].verdict = AFTP_WIRE_VERDICT_RESUME;
    w->script[1].held = (aftp_wire_range){0, 2990};
    run(w, 10 * SIM_S);
    assert_int_equal(w->closed_error, AFTP_OK);
    assert_int_equal(w->results_ok, 1);
    assert_int_equal(w->digests_wrong, 0);
    assert_int_equal(w->data_packets, 10);
    assert_true(w->most_views_in_a_call <= 1025);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thousand_files_0pct),
        cmocka_unit_test(test_thousand_files_1pct),
        cmocka_unit_test(test_thousand_files_5pct),
        cmocka_unit_test(test_window_of_one_costs_a_round_trip_per_file),
        cmocka_unit_test(test_skip_and_resume_send_only_missing_blocks),
        cmocka_unit_test(test_dirs_and_links_send_no_data),
        cmocka_unit_test(test_verdict_for_unknown_entry_is_protocol),
        cmocka_unit_test(test_held_range_beyond_file_is_protocol),
        cmocka_unit_test(test_contradicting_verdict_is_protocol),
        cmocka_unit_test(test_ack_without_pipeline_is_one_file_mode),
        cmocka_unit_test(test_ack_window_above_proposal_is_protocol),
        cmocka_unit_test(test_resumed_file_hashed_in_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
