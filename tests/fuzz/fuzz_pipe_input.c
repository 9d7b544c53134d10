/*
 * Fuzz harness for the engines' pipelined input path (spec 9.14): the real
 * sender and receiver negotiate PIPELINE (unprotected, so the fuzzer reaches
 * what lies behind decryption, as fuzz_engine_input) and exchange a small
 * tree (a DIR, three FILEs, a SYMLINK) over a link the fuzzer runs: it
 * delivers, drops, corrupts each datagram in flight, injects datagrams of its
 * own, and moves the clock. So ENTRIES, DATA and FILE_DONE reach the
 * receiver, and VERDICTS, FEEDBACK and FILE_RESULT reach the sender, valid
 * or hostile, in any order.
 *
 * Input: [verdicts u8] then records [op u8][...].
 * verdicts: 2 bits per FILE (ids 2, 3, 4): 0 SEND, 1 RESUME (block 0 held),
 * 2 SKIP (an identical copy there), 3 REFUSED.
 * op bits 0-1: 0 deliver the next datagram, 1 drop it, 2 deliver it with
 * byte [u8] xored with [u8], 3 inject [length u8][bytes] (its connection id
 * overwritten with the one the target expects); bit 2: towards the sender
 * (else the receiver); bits 3-7: milliseconds the clock advances first.
 * When the input ends, the link delivers everything faithfully and the
 * clock runs to each next expiry until both engines have closed.
 *
 * Properties: nothing crashes; the receiver writes only inside an open
 * FILE and never writes a block twice nor a block RESUME held; every file
 * committed (alone or in a group) is byte-exact; every datagram fits
 * max_datagram; expiry always advances (an engine handled at its expiry
 * has a later one within a bounded number of steps); both sessions end.
 */
#include <string.h>

#include "aftp/aftp_engine.h"
#include "fuzz_harness.h"
#include "proto/aftp_wire.h"

#define SENDER_ID 0x0A0A0A0Au
#define RECEIVER_ID 0x0B0B0B0Bu
#define MAX_DGRAM 1452u
#define RATE_BPS 10000000u
#define BLOCK 1000u
#define WINDOW 8u
#define ENTRIES 5u      /* ids 1..5: DIR d, FILEs d/a d/b d/c, SYMLINK l */
#define FIRST_FILE 2u
#define FILES 3u
#define FILE_CAP 3000u
#define FILE_BLOCKS 3u
#define QUEUE 32u       /* datagrams in flight each way; more are lost */
#define MS 1000000u
#define EXPIRY_ROUNDS 256
#define FINAL_STEPS 20000

static const uint64_t file_size[FILES] = {2500, 1000, 3000};

typedef struct link_queue {
    uint8_t dg[QUEUE][MAX_DGRAM];
    size_t len[QUEUE];
    unsigned head, count;
} link_queue;

typedef struct pipe_file {
    uint8_t src[FILE_CAP];
    uint8_t dst[FILE_CAP];
    uint8_t written[FILE_BLOCKS]; /* held or written, by block */
    uint8_t held[FILE_BLOCKS];    /* RESUME's held blocks: never written */
    int verdict;                  /* what the receiver's storage answers */
    int open;
    int committed;
} pipe_file;

typedef struct harness {
    pipe_file file[FILES];
    aftp_block_range held_range;
    uint64_t now;
    aftp_sender *snd;
    aftp_receiver *rcv;
    link_queue to_rcv, to_snd;
    uint8_t buf[MAX_DGRAM];
} harness;

static harness h;

static pipe_file *file_of(uint32_t id)
{
    FUZZ_CHECK(id >= FIRST_FILE && id < FIRST_FILE + FILES);
    return &h.file[id - FIRST_FILE];
}

static int view_src(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    (void)user;
    uint64_t size = file_size[id - FIRST_FILE];
    FUZZ_CHECK(off <= size && len <= size - off);
    *out = file_of(id)->src + off;
    return AFTP_OK;
}

static int view_dst(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    (void)user;
    uint64_t size = file_size[id - FIRST_FILE];
    FUZZ_CHECK(file_of(id)->open && off <= size && len <= size - off);
    *out = file_of(id)->dst + off;
    return AFTP_OK;
}

static int write_block(void *user, uint32_t id, uint64_t off, const uint8_t *data, size_t len)
{
    (void)user;
    pipe_file *f = file_of(id);
    uint64_t size = file_size[id - FIRST_FILE];
    FUZZ_CHECK(f->open && off % BLOCK == 0 && off < size && len <= size - off);
    FUZZ_CHECK(len == (size - off < BLOCK ? size - off : BLOCK));
    FUZZ_CHECK(!f->written[off / BLOCK] && !f->held[off / BLOCK]);
    f->written[off / BLOCK] = 1;
    memcpy(f->dst + off, data, len);
    return AFTP_OK;
}

/* A committed file holds every block, each the source's bytes. */
static void check_committed(uint32_t id)
{
    pipe_file *f = file_of(id);
    uint64_t size = file_size[id - FIRST_FILE];
    for (uint64_t b = 0; b * BLOCK < size; b++)
        FUZZ_CHECK(f->written[b] || f->held[b]);
    FUZZ_CHECK(memcmp(f->dst, f->src, size) == 0);
    f->committed = 1;
}

static int close_dst(void *user, uint32_t id, int commit)
{
    (void)user;
    pipe_file *f = file_of(id);
    FUZZ_CHECK(f->open);
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
        check_committed(ids[i]);
        file_of(ids[i])->open = 0;
        results[i] = AFTP_OK;
    }
    return AFTP_OK;
}

/* The receiver's storage: DIR and SYMLINK placed, each FILE as the
 * input's first byte chose (its copy on "disk" prepared in setup). */
static int decide_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    (void)user;
    memset(out, 0, sizeof *out);
    if (info->kind != AFTP_ENTRY_FILE) {
        FUZZ_CHECK(info->file.file_id < FIRST_FILE || info->file.file_id >= FIRST_FILE + FILES);
        return AFTP_OK;
    }
    pipe_file *f = file_of(info->file.file_id);
    FUZZ_CHECK(info->file.size == file_size[info->file.file_id - FIRST_FILE]);
    out->verdict = f->verdict;
    if (f->verdict == AFTP_VERDICT_REFUSED)
        out->error = AFTP_ERR_FILE_EXISTS;
    if (f->verdict == AFTP_VERDICT_RESUME) {
        out->held = &h.held_range;
        out->held_count = 1;
    }
    f->open = f->verdict == AFTP_VERDICT_SEND || f->verdict == AFTP_VERDICT_RESUME;
    return AFTP_OK;
}

/* One-file mode's offer: this storage takes entries only. */
static int refuse_offer(void *user, const aftp_file_info *info)
{
    (void)user;
    (void)info;
    return AFTP_ERR_PERMISSION;
}

static const aftp_storage_ops sender_ops = {.view = view_src, .close = close_src};
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

static void add_entry(uint32_t id, int kind, const char *path, uint64_t size, const char *target)
{
    aftp_entry_info e = {.kind = kind, .target = target, .source_id = id};
    e.file = (aftp_file_info){.file_id = id, .size = size, .mode = 0644, .path = path};
    if (kind == AFTP_ENTRY_FILE) {
        e.file.block_size = BLOCK;
        e.flags = AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC;
    }
    FUZZ_CHECK(aftp_sender_add_entry(h.snd, &e) == AFTP_OK);
}

/* Sources, the receiver's copies as each verdict finds them, and both
 * engines with the tree queued and the sender's HELLO on the link. */
static void setup(uint8_t verdicts)
{
    static const int verdict_of[4] = {AFTP_VERDICT_SEND, AFTP_VERDICT_RESUME,
                                      AFTP_VERDICT_SKIP, AFTP_VERDICT_REFUSED};
    memset(&h, 0, sizeof h);
    h.held_range = (aftp_block_range){.start = 0, .len = 1};
    for (unsigned i = 0; i < FILES; i++) {
        pipe_file *f = &h.file[i];
        for (size_t j = 0; j < FILE_CAP; j++)
            f->src[j] = (uint8_t)(j * 7 + i * 31);
        f->verdict = verdict_of[(verdicts >> (2 * i)) & 3];
        if (f->verdict == AFTP_VERDICT_SKIP)
            memcpy(f->dst, f->src, file_size[i]);
        if (f->verdict == AFTP_VERDICT_RESUME) {
            memcpy(f->dst, f->src, BLOCK);
            f->held[0] = 1;
        }
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
    FUZZ_CHECK(aftp_sender_new(&ss, 0, &h.snd) == AFTP_OK);
    FUZZ_CHECK(aftp_receiver_new(&rs, 0, &h.rcv) == AFTP_OK);
    add_entry(1, AFTP_ENTRY_DIR, "d", 0, NULL);
    add_entry(2, AFTP_ENTRY_FILE, "d/a", file_size[0], NULL);
    add_entry(3, AFTP_ENTRY_FILE, "d/b", file_size[1], NULL);
    add_entry(4, AFTP_ENTRY_FILE, "d/c", file_size[2], NULL);
    add_entry(5, AFTP_ENTRY_SYMLINK, "l", 0, "d/a");
    aftp_sender_finish(h.snd);
    drain();
}

/* One record of the input from data[pos]; returns the position after it. */
static size_t run_record(const uint8_t *data, size_t size, size_t pos)
{
    static uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    uint8_t op = data[pos++];
    int to_sender = (op >> 2) & 1;
    link_queue *q = to_sender ? &h.to_snd : &h.to_rcv;
    h.now += (uint64_t)(op >> 3) * MS;
    drain();
    size_t len = 0;
    switch (op & 3) {
    case 0:
        len = queue_pop(q, d);
        break;
    case 1:
        queue_pop(q, d);
        return pos;
    case 2:
        len = queue_pop(q, d);
        if (size - pos >= 2 && len > 0)
            d[data[pos] % len] ^= data[pos + 1];
        pos = size - pos >= 2 ? pos + 2 : size;
        break;
    default:
        len = pos < size ? data[pos++] : 0;
        if (len > size - pos)
            len = size - pos;
        memcpy(d, data + pos, len);
        pos += len;
        if (len >= AFTP_WIRE_HEADER_LEN) {
            uint32_t id = to_sender ? SENDER_ID : RECEIVER_ID;
            for (int i = 0; i < 4; i++)
                d[4 + i] = (uint8_t)(id >> (24 - 8 * i));
        }
        break;
    }
    if (len > 0)
        deliver(to_sender, d, len);
    return pos;
}

static uint64_t next_expiry(void)
{
    uint64_t s = aftp_sender_expiry(h.snd), r = aftp_receiver_expiry(h.rcv);
    return s < r ? s : r;
}

/* Both sides say the session ended cleanly: every file sent or resumed
 * is committed, none still open. */
static void check_clean_end(void)
{
    if (aftp_sender_error(h.snd) != AFTP_OK || aftp_receiver_error(h.rcv) != AFTP_OK)
        return;
    for (unsigned i = 0; i < FILES; i++) {
        int sent = h.file[i].verdict == AFTP_VERDICT_SEND ||
                   h.file[i].verdict == AFTP_VERDICT_RESUME;
        FUZZ_CHECK(!h.file[i].open && h.file[i].committed == sent);
    }
}

/* A faithful link and a clock that runs to each next expiry: both
 * sessions end (done, or an error, or the idle timeout). */
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
    FUZZ_CHECK(!"both sessions end");
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
