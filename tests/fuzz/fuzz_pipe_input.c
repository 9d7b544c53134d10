/*
 * Fuzz harness for the engines' pipelined input path (spec 9.14): the real
 * sender and receiver negotiate PIPELINE (unprotected, so the fuzzer reaches
 * what lies behind decryption, as fuzz_engine_input) and exchange a small
 * tree (a DIR, three FILEs, the last sparse: its blocks 0-1 a hole, spec
 * 6.13; a SYMLINK) over a link the fuzzer runs: it
 * delivers, drops, corrupts each datagram in flight, injects datagrams of its
 * own, and moves the clock. So ENTRIES, DATA and FILE_DONE reach the
 * receiver, and VERDICTS, FEEDBACK and FILE_RESULT reach the sender, valid
 * or hostile, in any order.
 *
 * Input: [verdicts u8] then records [op u8][...].
 * verdicts: 2 bits per FILE (ids 2, 3, 4): 0 SEND, 1 RESUME (block 0 held),
 * 2 SKIP (an identical copy there), 3 REFUSED; bits 6-7, n > 0: the source
 * of FILE id n + 1 fails past its first block (the sender abandons it,
 * spec 9.14.3).
 * op bits 0-1: 0 deliver the next datagram, 1 drop it, 2 deliver it with
 * byte [u8] xored with [u8], 3 inject [length u8][bytes] (its connection id
 * overwritten with the one the target expects); bit 2: towards the sender
 * (else the receiver); bits 3-7: milliseconds the clock advances first.
 * When the input ends, the link delivers everything faithfully and the
 * clock runs to each next expiry until both engines have closed.
 *
 * Properties: nothing crashes; the receiver's storage is asked about each
 * entry once, in ascending id order; the receiver writes only inside an
 * open FILE (as the ENTRIES it decoded describe it) and never writes a
 * block twice nor a block RESUME held nor a hole block it was told of;
 * every committed file (alone or in a group) holds all its blocks (hole
 * blocks as the zeros they read as) and, unless a corrupted or injected datagram
 * reached the receiver, is the sender's file byte for byte; every datagram
 * fits max_datagram; expiry always advances (an engine handled at its
 * expiry has a later one within a bounded number of steps). Untampered
 * (the link only lost datagrams), both sessions end, and cleanly unless at
 * the idle timeout. Tampered, the two sides may disagree for good on what
 * the receiver holds and trade FILE_DONE and FEEDBACK on a backed-off
 * timer without ending; only the spinning is checked then.
 *
 * Built with PIPE_PULL 1 (fuzz_pull_input.c), the same tree is pulled
 * (spec 9.15): the receiver is the client, asks for "d" and "l", and the
 * sender, the server, adds the tree once its storage was asked about
 * both paths (each once). The properties are the same.
 */
#include <string.h>

#include "aftp/aftp_engine.h"
#include "fuzz_harness.h"
#include "proto/aftp_wire.h"

#ifndef PIPE_PULL
#define PIPE_PULL 0
#endif

#define SENDER_ID 0x0A0A0A0Au
#define RECEIVER_ID 0x0B0B0B0Bu
#define MAX_DGRAM 1452u
#define RATE_BPS 10000000u
#define BLOCK 1000u
#define WINDOW 8u
#define IDS 5u          /* entries 1..5: DIR d, FILEs d/a d/b d/c, SYMLINK l */
#define FIRST_FILE 2u
#define FILES 3u
#define FILE_CAP 3000u
#define QUEUE 32u       /* datagrams in flight each way; more are lost */
#define MS 1000000u
#define EXPIRY_ROUNDS 256
#define FINAL_STEPS 20000

/* The sender's true sizes, by entry id (0: not a FILE). */
static const uint64_t true_size[IDS + 1] = {0, 0, 2500, 1000, 3000, 0};

typedef struct link_queue {
    uint8_t dg[QUEUE][MAX_DGRAM];
    size_t len[QUEUE];
    unsigned head, count;
} link_queue;

/* One entry id: the sender's source and the receiver's copy, as the
 * receiver's storage was told it (size, block size: a tampered ENTRIES
 * may say anything). */
typedef struct pipe_file {
    uint8_t src[FILE_CAP];
    uint8_t dst[FILE_CAP];
    uint8_t written[FILE_CAP]; /* by block: written */
    uint8_t held;              /* RESUME: block 0 is there, never written */
    uint8_t hole[FILE_CAP];    /* by block: a hole the entry announced, never written */
    int verdict;               /* what storage answers a true FILE */
    uint64_t size;
    uint32_t block;
    int open;
    int committed;
} pipe_file;

typedef struct harness {
    pipe_file file[IDS + 1];
    aftp_block_range held_range;
    uint32_t last_decided;
    int tampered_rcv; /* a corrupted or injected datagram reached the receiver */
    int tampered;     /* ... or the sender */
    uint32_t failing; /* the FILE whose source fails past its first block; 0: none */
    int asked;        /* pull: paths the server's storage was asked about */
    int fed;          /* the tree is queued at the sender */
    uint64_t now;
    aftp_sender *snd;
    aftp_receiver *rcv;
    link_queue to_rcv, to_snd;
    uint8_t buf[MAX_DGRAM];
} harness;

static harness h;

static int true_file(uint32_t id)
{
    return id >= FIRST_FILE && id < FIRST_FILE + FILES;
}

/* The receiver's storage is asked only about entries it opened. */
static pipe_file *opened(uint32_t id)
{
    FUZZ_CHECK(id >= 1 && id <= IDS && h.file[id].open);
    return &h.file[id];
}

static int view_src(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    (void)user;
    FUZZ_CHECK(true_file(id) && off <= true_size[id] && len <= true_size[id] - off);
    if (id == h.failing && off >= BLOCK)
        return AFTP_ERR_SOURCE_CHANGED;
    *out = h.file[id].src + off;
    return AFTP_OK;
}

static int view_dst(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    (void)user;
    pipe_file *f = opened(id);
    FUZZ_CHECK(off <= f->size && len <= f->size - off);
    *out = f->dst + off;
    return AFTP_OK;
}

static int write_block(void *user, uint32_t id, uint64_t off, const uint8_t *data, size_t len)
{
    (void)user;
    pipe_file *f = opened(id);
    FUZZ_CHECK(off % f->block == 0 && off < f->size);
    FUZZ_CHECK(len == (f->size - off < f->block ? f->size - off : f->block));
    uint64_t b = off / f->block;
    FUZZ_CHECK(!f->written[b] && !(b == 0 && f->held) && !f->hole[b]);
    f->written[b] = 1;
    memcpy(f->dst + off, data, len);
    return AFTP_OK;
}

/* A committed file holds every block it was told of; unless the receiver
 * saw tampered datagrams, it is the sender's file, byte for byte. */
static void check_committed(uint32_t id)
{
    pipe_file *f = &h.file[id];
    for (uint64_t b = 0; b * f->block < f->size; b++)
        FUZZ_CHECK(f->written[b] || (b == 0 && f->held) || f->hole[b]);
    if (!h.tampered_rcv)
        FUZZ_CHECK(true_file(id) && f->size == true_size[id] &&
                   memcmp(f->dst, f->src, f->size) == 0);
    f->committed = 1;
}

static int close_dst(void *user, uint32_t id, int commit)
{
    (void)user;
    pipe_file *f = opened(id);
    if (commit == AFTP_CLOSE_COMMIT || commit == AFTP_CLOSE_DEFER)
        check_committed(id);
    f->open = commit == AFTP_CLOSE_DEFER;
    return AFTP_OK;
}

static int close_src(void *user, uint32_t id, int commit)
{
    (void)user;
    (void)id;
    (void)commit;
    return AFTP_OK;
}

static int commit_group(void *user, const uint32_t *ids, size_t count, int *results)
{
    (void)user;
    for (size_t i = 0; i < count; i++) {
        FUZZ_CHECK(opened(ids[i])->committed);
        h.file[ids[i]].open = 0;
        results[i] = AFTP_OK;
    }
    return AFTP_OK;
}

/* SKIP and RESUME only for the copy of this very source version. */
static int same_version(const aftp_entry_info *info)
{
    uint32_t id = info->file.file_id;
    return true_file(id) && info->file.size == true_size[id] && info->file.block_size == BLOCK &&
           info->source_id == id;
}

/* The receiver's storage, asked once per entry in ascending id order: DIR
 * and SYMLINK placed; a FILE it has no room for refused; a true FILE as
 * the input's first byte chose; SKIP or RESUME of another version sent. */
static int decide_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    (void)user;
    uint32_t id = info->file.file_id;
    FUZZ_CHECK(id > h.last_decided);
    h.last_decided = id;
    memset(out, 0, sizeof *out);
    if (info->kind != AFTP_ENTRY_FILE)
        return AFTP_OK;
    if (id > IDS || info->file.size > FILE_CAP || info->file.block_size == 0) {
        out->verdict = AFTP_VERDICT_REFUSED;
        out->error = AFTP_ERR_NO_SPACE;
        return AFTP_OK;
    }
    pipe_file *f = &h.file[id];
    out->verdict = true_file(id) ? f->verdict : AFTP_VERDICT_SEND;
    if ((out->verdict == AFTP_VERDICT_SKIP || out->verdict == AFTP_VERDICT_RESUME) &&
        !same_version(info))
        out->verdict = AFTP_VERDICT_SEND;
    if (out->verdict == AFTP_VERDICT_REFUSED)
        out->error = AFTP_ERR_FILE_EXISTS;
    if (out->verdict == AFTP_VERDICT_RESUME) {
        memcpy(f->dst, f->src, BLOCK);
        f->held = 1;
        out->held = &h.held_range;
        out->held_count = 1;
    }
    f->size = info->file.size;
    f->block = info->file.block_size;
    for (size_t i = 0; i < info->hole_count; i++) /* block-aligned, inside the file */
        for (uint64_t b = info->holes[i].off / f->block;
             b * f->block < info->holes[i].off + info->holes[i].len; b++)
            f->hole[b] = 1;
    f->open = out->verdict == AFTP_VERDICT_SEND || out->verdict == AFTP_VERDICT_RESUME;
    return AFTP_OK;
}

/* One-file mode's offer: this storage takes entries only. */
static int refuse_offer(void *user, const aftp_file_info *info)
{
    (void)user;
    (void)info;
    return AFTP_ERR_PERMISSION;
}

/* Pull: the server's storage serves both requested paths, asked about
 * each once in order; a datagram the fuzzer corrupted or injected on its
 * way to the server may be a request for other paths, which the server
 * rightly asks about (the session is unprotected). */
static int serve_path(void *user, uint32_t index, const char *path, unsigned flags)
{
    (void)user;
    (void)flags;
    FUZZ_CHECK(index == (uint32_t)h.asked);
    FUZZ_CHECK(h.tampered || (index < 2 && strcmp(path, index == 0 ? "d" : "l") == 0));
    h.asked++;
    return AFTP_OK;
}

static const aftp_storage_ops sender_ops = {.view = view_src, .close = close_src,
                                            .pull_path = serve_path};
static const aftp_storage_ops receiver_ops = {.view = view_dst,
                                              .open = refuse_offer,
                                              .write = write_block,
                                              .close = close_dst,
                                              .entry = decide_entry,
                                              .commit_group = commit_group};

static void queue_push(link_queue *q, const aftp_datagram *dg)
{
    FUZZ_CHECK(dg->head_len + dg->payload_len <= MAX_DGRAM);
    if (q->count == QUEUE)
        return; /* the link is full: lost */
    unsigned slot = (q->head + q->count++) % QUEUE;
    memcpy(q->dg[slot], dg->head, dg->head_len);
    if (dg->payload_len > 0)
        memcpy(q->dg[slot] + dg->head_len, dg->payload, dg->payload_len);
    q->len[slot] = dg->head_len + dg->payload_len;
}

static void feed_tree(void);

static int engine_due(void)
{
    return h.now >= aftp_sender_expiry(h.snd) || h.now >= aftp_receiver_expiry(h.rcv);
}

/* Timers and output until neither engine is due at `now`: a bounded
 * number of rounds, or an engine spins with its expiry stuck. */
static void drain(void)
{
    aftp_datagram dg;
    int rounds = 0;
    do {
        FUZZ_CHECK(rounds++ < EXPIRY_ROUNDS);
        if (h.now >= aftp_sender_expiry(h.snd))
            aftp_sender_handle_expiry(h.snd, h.now);
        if (h.now >= aftp_receiver_expiry(h.rcv))
            aftp_receiver_handle_expiry(h.rcv, h.now);
        for (int i = 0; i < 64 && aftp_sender_write(h.snd, h.now, h.buf, MAX_DGRAM, &dg) == 1; i++)
            queue_push(&h.to_rcv, &dg);
        for (int i = 0; i < 64 && aftp_receiver_write(h.rcv, h.now, h.buf, MAX_DGRAM, &dg) == 1;
             i++)
            queue_push(&h.to_snd, &dg);
        if (!h.fed && h.asked == 2)
            feed_tree(); /* pull: the server's walk, once the request is decided */
    } while (engine_due());
}

static void deliver(int to_sender, uint8_t *d, size_t len)
{
    int rc = to_sender ? aftp_sender_read(h.snd, h.now, d, len)
                       : aftp_receiver_read(h.rcv, h.now, d, len);
    int state = to_sender ? aftp_sender_state(h.snd) : aftp_receiver_state(h.rcv);
    FUZZ_CHECK(rc == AFTP_OK || state == AFTP_STATE_CLOSING || state == AFTP_STATE_CLOSED);
    drain();
}

/* Takes the next datagram towards one side into d; its length, 0: none. */
static size_t queue_pop(link_queue *q, uint8_t *d)
{
    if (q->count == 0)
        return 0;
    size_t len = q->len[q->head];
    memcpy(d, q->dg[q->head], len);
    q->head = (q->head + 1) % QUEUE;
    q->count--;
    return len;
}

/* Puts back the datagram queue_pop just took (its bytes are still in
 * its slot). */
static void queue_unpop(link_queue *q)
{
    q->head = (q->head + QUEUE - 1) % QUEUE;
    q->count++;
}

/* Entry 4's hole: blocks 0-1, overlapping RESUME's held block 0. */
static const aftp_byte_range hole_of_4 = {0, 2 * BLOCK};

static void add_entry(uint32_t id, int kind, const char *path, uint64_t size, const char *target)
{
    aftp_entry_info e = {.kind = kind, .target = target, .source_id = id};
    if (id == 4) {
        e.holes = &hole_of_4;
        e.hole_count = 1;
    }
    e.file = (aftp_file_info){.file_id = id, .size = size, .mode = 0644, .path = path};
    if (kind == AFTP_ENTRY_FILE) {
        e.file.block_size = BLOCK;
        e.flags = AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC;
    }
    FUZZ_CHECK(aftp_sender_add_entry(h.snd, &e) == AFTP_OK);
}

static void feed_tree(void)
{
    add_entry(1, AFTP_ENTRY_DIR, "d", 0, NULL);
    add_entry(2, AFTP_ENTRY_FILE, "d/a", true_size[2], NULL);
    add_entry(3, AFTP_ENTRY_FILE, "d/b", true_size[3], NULL);
    add_entry(4, AFTP_ENTRY_FILE, "d/c", true_size[4], NULL);
    add_entry(5, AFTP_ENTRY_SYMLINK, "l", 0, "d/a");
    aftp_sender_finish(h.snd);
    h.fed = 1;
}

/* Sources, the receiver's copies as each verdict finds them, and both
 * engines with the tree queued (pull: once requested) and the client's
 * HELLO on the link. */
static void setup(uint8_t verdicts)
{
    static const int verdict_of[4] = {AFTP_VERDICT_SEND, AFTP_VERDICT_RESUME,
                                      AFTP_VERDICT_SKIP, AFTP_VERDICT_REFUSED};
    memset(&h, 0, sizeof h);
    h.held_range = (aftp_block_range){.start = 0, .len = 1};
    h.failing = verdicts >> 6 ? FIRST_FILE + (verdicts >> 6) - 1 : 0;
    for (uint32_t id = 1; id <= IDS; id++) {
        for (size_t j = 0; j < FILE_CAP; j++)
            h.file[id].src[j] = id == 4 && j < hole_of_4.len ? 0 : (uint8_t)(j * 7 + id * 31);
        if (true_file(id))
            h.file[id].verdict = verdict_of[(verdicts >> (2 * (id - FIRST_FILE))) & 3];
    }
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    aftp_sender_settings_default(&ss);
    aftp_receiver_settings_default(&rs);
    ss.conn_id = SENDER_ID;
    ss.policy = AFTP_CC_FIXED; /* a small sent log: each input sets up fast */
    ss.rate_bps = RATE_BPS;
    ss.storage = &sender_ops;
    ss.pipeline_window = WINDOW;
    ss.security.cipher = AFTP_CIPHER_NONE;
    rs.conn_id = RECEIVER_ID;
    rs.storage = &receiver_ops;
    rs.pipeline_window = WINDOW;
    rs.security.cipher = AFTP_CIPHER_NONE;
    static const char *const pull_paths[] = {"d", "l"};
    if (PIPE_PULL) {
        ss.role = rs.role = AFTP_ROLE_PULL;
        rs.pull = (aftp_pull_request){.paths = pull_paths, .path_count = 2};
    }
    FUZZ_CHECK(aftp_sender_new(&ss, 0, &h.snd) == AFTP_OK);
    FUZZ_CHECK(aftp_receiver_new(&rs, 0, &h.rcv) == AFTP_OK);
    if (!PIPE_PULL)
        feed_tree();
    drain();
}

/* An injected datagram: [length u8][bytes] from data[pos] into d, its
 * connection id the target's; returns the position after it. */
static size_t take_injected(const uint8_t *data, size_t size, size_t pos, int to_sender,
                            uint8_t *d, size_t *len)
{
    *len = pos < size ? data[pos++] : 0;
    if (*len > size - pos)
        *len = size - pos;
    memcpy(d, data + pos, *len);
    if (*len >= AFTP_WIRE_HEADER_LEN) {
        uint32_t id = to_sender ? SENDER_ID : RECEIVER_ID;
        for (int i = 0; i < 4; i++)
            d[4 + i] = (uint8_t)(id >> (24 - 8 * i));
    }
    return pos + *len;
}

/* One record of the input from data[pos]; returns the position after it. */
static size_t run_record(const uint8_t *data, size_t size, size_t pos)
{
    static uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    uint8_t op = data[pos++];
    int to_sender = (op >> 2) & 1, tampered = 0;
    link_queue *q = to_sender ? &h.to_snd : &h.to_rcv;
    h.now += (uint64_t)(op >> 3) * MS;
    drain();
    size_t len = queue_pop(q, d);
    if ((op & 3) == 1)
        return pos; /* dropped */
    if ((op & 3) == 2) {
        if (size - pos >= 2 && len > 0) {
            d[data[pos] % len] ^= data[pos + 1];
            tampered = data[pos + 1] != 0;
        }
        pos = size - pos >= 2 ? pos + 2 : size;
    } else if ((op & 3) == 3) {
        /* The link's next datagram stays queued. */
        if (len > 0)
            queue_unpop(q);
        pos = take_injected(data, size, pos, to_sender, d, &len);
        tampered = len > 0;
    }
    h.tampered |= tampered;
    h.tampered_rcv |= tampered && !to_sender;
    if (len > 0)
        deliver(to_sender, d, len);
    return pos;
}

static uint64_t next_expiry(void)
{
    uint64_t s = aftp_sender_expiry(h.snd), r = aftp_receiver_expiry(h.rcv);
    return s < r ? s : r;
}

/* Untampered, the link only lost datagrams: unless one side gave up
 * waiting (the idle timeout), both end cleanly, every file sent or
 * resumed committed but one whose source failed, none still open. */
static void check_clean_end(void)
{
    int snd = aftp_sender_error(h.snd), rcv = aftp_receiver_error(h.rcv);
    if (h.tampered || snd == AFTP_ERR_IDLE_TIMEOUT || rcv == AFTP_ERR_IDLE_TIMEOUT)
        return;
    FUZZ_CHECK(snd == AFTP_OK && rcv == AFTP_OK);
    for (uint32_t id = FIRST_FILE; id < FIRST_FILE + FILES; id++) {
        int sent = (h.file[id].verdict == AFTP_VERDICT_SEND ||
                    h.file[id].verdict == AFTP_VERDICT_RESUME) &&
                   !(id == h.failing && true_size[id] > BLOCK);
        FUZZ_CHECK(!h.file[id].open && h.file[id].committed == sent);
    }
}

/* A faithful link and a clock that runs to each next expiry, for at most
 * FINAL_STEPS expiries: both sessions end (done, or an error, or the idle
 * timeout), unless the input tampered with datagrams. */
static void finish(void)
{
    static uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    for (int step = 0; step < FINAL_STEPS; step++) {
        size_t len;
        while (h.to_rcv.count + h.to_snd.count > 0) {
            if ((len = queue_pop(&h.to_rcv, d)) > 0)
                deliver(0, d, len);
            if ((len = queue_pop(&h.to_snd, d)) > 0)
                deliver(1, d, len);
        }
        if (aftp_sender_state(h.snd) == AFTP_STATE_CLOSED &&
            aftp_receiver_state(h.rcv) == AFTP_STATE_CLOSED) {
            check_clean_end();
            return;
        }
        uint64_t at = next_expiry();
        FUZZ_CHECK(at > h.now && at != UINT64_MAX);
        h.now = at;
        drain();
    }
    /* Tampered, the two sides may disagree for good on what the receiver
     * holds (a forged VERDICTS or FEEDBACK): they may then go on trading
     * FILE_DONE and FEEDBACK at the sender's backed-off timer, neither
     * spinning (checked above) nor ending. Untampered, they must end. */
    FUZZ_CHECK(h.tampered);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup(size > 0 ? data[0] : 0);
    for (size_t pos = 1; pos < size;)
        pos = run_record(data, size, pos);
    finish();
    aftp_sender_del(h.snd);
    aftp_receiver_del(h.rcv);
    return 0;
}
