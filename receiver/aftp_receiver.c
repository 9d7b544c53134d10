/*
 * The receiver (server, push) state machine: answers the handshake, accepts
 * one file at a time into storage, keeps the block map, sends FEEDBACK on
 * a timer, verifies the whole-file digest by reading the stored file back
 * in bounded steps (the session is served between them), and reports
 * FILE_RESULT. Behaviour: spec/aftp-protocol.md sections 4.1,
 * 9.3, 9.5, 9.6, 9.8, 9.10-9.13, 12.2 and 14.
 *
 * Files of any size the wire allows are accepted: the block map is a
 * sliding window (common/aftp_blockmap.h, spec 9.5) of
 * settings.map_window_blocks blocks, by default 2^27, so a file's map
 * takes at most 16 MiB + 256 KiB however large the file; DATA beyond the
 * window is authenticated, then discarded: it looks lost to the sender,
 * which repairs it once the window has moved.
 *
 * Protected sessions: the first HELLO carries message 1 of the handshake;
 * the answer (HELLO_ACK with message 2) is built once and its very bytes
 * resent for a repeated HELLO. Anything that does not authenticate gets
 * no answer at all. DATA for a block already held, or outside the open
 * file, is dropped on its clear header before any decryption. Packets open
 * into the session's scratch buffer, except the payload of a DATA for a
 * missing block, which opens straight into the bytes storage lends for it
 * (storage.place): a forgery can spoil only bytes that were never
 * written, and leaves its block missing.
 */
#include "aftp/aftp_engine.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aftp_blockmap.h"
#include "common/aftp_digest.h"
#include "common/aftp_errmap.h"
#include "common/aftp_handshake.h"
#include "common/aftp_rtt.h"
#include "common/aftp_session.h"
#include "common/aftp_stream.h"
#include "proto/aftp_wire.h"

#define NS_PER_MS UINT64_C(1000000)
#define DEFAULT_IDLE_NS (UINT64_C(30000) * NS_PER_MS)
#define DEFAULT_FEEDBACK_NS (10 * NS_PER_MS)
#define MIN_FEEDBACK_NS NS_PER_MS           /* section 9.8: never more often */
#define DEFAULT_INITIAL_RTT_NS (100 * NS_PER_MS)
#define AMPLIFICATION_FACTOR 3              /* section 14.3 */
#define VERIFY_CHUNK (UINT64_C(1) << 20)    /* one storage view while verifying */
#define FEEDBACK_HEAD (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED)
/* Largest datagram sent before the handshake completes (a CLOSE with the
 * longest reason); HELLO_ACK is smaller. */
#define PRECONFIRM_MAX_LEN (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_CLOSE_FIXED + AFTP_WIRE_MAX_REASON)
/* A HELLO_ACK's extensions: RATE_CAP, PIPELINE, then HANDSHAKE. */
#define HELLO_ACK_EXT_MAX \
    (4u + AFTP_WIRE_RATE_CAP_LEN + 4u + AFTP_WIRE_PIPELINE_LEN + 4u + AFTP_HS_MAX_RESPONSE)
/* A HELLO_ACK: header, fixed fields, extension length, its TLVs. */
#define HELLO_ACK_MAX (AFTP_WIRE_HEADER_LEN + 9u + HELLO_ACK_EXT_MAX)

enum file_phase {
    FILE_NONE,  /* no file offered yet */
    FILE_OPEN,  /* accepted, receiving blocks */
    FILE_ENDED  /* refused, verified or failed: the answer is kept for repeats */
};

/* What the engine keeps of one entry of a pipelined session (the entry
 * table, common/aftp_stream.h, keeps its place in the stream). */
enum pipe_phase {
    PIPE_OFFERED,   /* known, its verdict not decided yet */
    PIPE_RECEIVING, /* a FILE accepted (SEND, RESUME): blocks arrive */
    PIPE_READY,     /* FILE_DONE in, every block held: to be read back */
    PIPE_DEFERRED,  /* verified, closed with AFTP_CLOSE_DEFER: in the group commit */
    PIPE_ENDED      /* its verdict or FILE_RESULT sent: kept for repeats */
};

typedef struct pipe_entry {
    uint32_t id;            /* 0: slot unused */
    uint8_t phase;          /* enum pipe_phase */
    uint8_t verdict;        /* wire verdict, once decided */
    uint16_t wire_error;    /* REFUSED's error, then the FILE_RESULT's */
    int done;               /* FILE_DONE arrived */
    int has_result;         /* ended with a FILE_RESULT (repeated FILE_DONEs get it) */
    int closed;             /* storage closed the file: its held list is gone */
    int end_sent;           /* the verdict or FILE_RESULT that ended it left */
    int unmarked;           /* holds blocks beyond the map's window, not marked yet */
    char *path;             /* path, NUL, target, NUL: what info points at */
    aftp_entry_info info;
    uint64_t base, blocks;  /* its stream blocks [base, base + blocks) */
    uint64_t missing;       /* blocks neither received nor held by the verdict */
    const aftp_block_range *held; /* RESUME: storage's list, usable part */
    size_t held_count;
    uint64_t held_blocks;
    uint8_t expected[AFTP_DIGEST_LEN];
    uint8_t digest[AFTP_DIGEST_LEN];
} pipe_entry;

struct aftp_receiver {
    aftp_session ss;
    aftp_receiver_settings set;
    aftp_rtt rtt;           /* one sample: HELLO_ACK to the next packet */
    aftp_digest *hash;

    int hello_seen;
    int confirmed;          /* the client spoke after HELLO_ACK (section 14.3) */
    uint64_t hello_ack_sent_ns;
    int hello_ack_due;

    /* Handshake (section 14). */
    uint8_t *identity;      /* own private key (sodium_malloc) until the handshake */
    uint8_t msg1[AFTP_HS_MAX_INIT]; /* the client's message 1, to know its resends */
    size_t msg1_len;
    uint8_t hello_ack[HELLO_ACK_MAX]; /* protected: the answer, resent as is */
    size_t hello_ack_len;
    uint64_t rate_cap_bps;  /* the cap granted to the client (RATE_CAP), 0: none */
    uint32_t window;        /* the session's entry window W (PIPELINE), 0: one-file mode */

    /* The current (latest offered) file. */
    int phase;
    aftp_file_info info;    /* info.path points at path */
    char *path;
    uint64_t block_count;
    aftp_blockmap held;     /* sliding window: memory fixed by settings (14.7) */
    uint64_t scan_hi;       /* highest block received + 1 */
    int done_received;
    uint8_t expected[AFTP_DIGEST_LEN];
    int verifying;          /* every block held and FILE_DONE in: finishing the read-back */
    uint64_t verified;      /* bytes of the stored file read back and hashed so far */
    int reply_due;
    uint16_t reply_error;
    char refusal[224];      /* why the offer was refused, when the engine refused it */
    int result_due;
    int result_sent;        /* a FILE_RESULT went out for this file (section 9.6) */
    uint16_t result_error;
    uint8_t result_digest[AFTP_DIGEST_LEN];
    uint64_t resend_deadline; /* FILE_RESULT retransmission (section 9.10) */
    unsigned backoff;

    /* FEEDBACK (section 9.8). */
    int has_largest;
    uint64_t largest_pn;
    uint64_t largest_pn_ns;
    uint64_t data_packets;
    int feedback_armed;
    int feedback_due;
    uint64_t feedback_deadline;
    int feedback_sent;      /* for the current file */
    uint64_t last_feedback_ns;
    uint64_t scan_cursor;   /* where the next FEEDBACK's list starts */
    aftp_wire_range *ranges;
    size_t max_ranges;

    /* Pipelined mode (section 9.14), when window != 0; `held` then maps
     * the stream. */
    aftp_stream stream;
    pipe_entry *pe;           /* W slots: entry id i in slot i mod W */
    uint32_t decide_next;     /* the next id storage decides (verdicts in id order) */
    uint32_t verdicts_from;   /* verdicts of ids [verdicts_from, decide_next) wait to leave */
    uint64_t verdicts_deadline;
    uint32_t repeat_lo, repeat_hi; /* a repeated ENTRIES' ids to answer (lo > hi: none) */
    uint64_t done_end;        /* end of the highest entry whose FILE_DONE arrived */
    uint32_t *results;        /* ring of W ids whose FILE_RESULT is due */
    uint32_t results_head, results_len;
    uint32_t *group;          /* W ids verified and waiting for the group commit */
    int *group_results;
    uint32_t group_len;
    uint64_t group_deadline;
    uint32_t verify_id;       /* the file being read back, 0: none */
    uint32_t ready_count;     /* files waiting to be read back */
    uint32_t mark_lo;         /* lowest entry flagged unmarked, 0: none */
    uint64_t marked_end;      /* the map's window end when marks were last applied */
    aftp_wire_verdict *vrecs; /* one VERDICTS' records and held ranges */
    size_t max_vrecs;
    aftp_wire_range *vranges;
    size_t max_vranges;
};

static void pipe_close_all(aftp_receiver *r, int error);
static int pipe_init(aftp_receiver *r);
static void pipe_free(aftp_receiver *r);

/* ---- settings and lifetime ---- */

void aftp_receiver_settings_default(aftp_receiver_settings *s)
{
    memset(s, 0, sizeof *s);
    s->max_datagram = 1452;
    s->idle_timeout_ns = DEFAULT_IDLE_NS;
    s->feedback_interval_ns = DEFAULT_FEEDBACK_NS;
    s->initial_rtt_ns = DEFAULT_INITIAL_RTT_NS;
    s->map_window_blocks = AFTP_RECEIVER_MAP_WINDOW;
}

static int settings_valid(const aftp_receiver_settings *s)
{
    return s != NULL && s->conn_id != 0 && s->max_datagram >= AFTP_WIRE_MIN_DATAGRAM &&
           s->max_datagram <= AFTP_WIRE_MAX_DATAGRAM && s->idle_timeout_ns > 0 &&
           s->feedback_interval_ns >= MIN_FEEDBACK_NS && s->initial_rtt_ns > 0 &&
           s->map_window_blocks > 0 && s->pipeline_window <= AFTP_WIRE_MAX_WINDOW &&
           s->storage != NULL && s->storage->view != NULL && s->storage->open != NULL &&
           s->storage->write != NULL && s->storage->close != NULL;
}

/* The private key is needed when the HELLO comes: kept in guarded memory,
 * the settings' pointer forgotten. */
static int keep_identity(aftp_receiver *r)
{
    aftp_security_settings *sec = &r->set.security;
    if (sec->cipher == AFTP_CIPHER_NONE) {
        sec->identity = NULL;
        return AFTP_OK;
    }
    r->identity = sodium_malloc(AFTP_HS_KEY_LEN);
    if (r->identity == NULL)
        return AFTP_ERR_NO_MEMORY;
    memcpy(r->identity, sec->identity, AFTP_HS_KEY_LEN);
    sec->identity = NULL;
    return AFTP_OK;
}

static void wipe_identity(aftp_receiver *r)
{
    if (r->identity != NULL)
        sodium_free(r->identity);
    r->identity = NULL;
}

int aftp_receiver_new(const aftp_receiver_settings *settings, uint64_t now_ns,
                      aftp_receiver **out)
{
    if (!settings_valid(settings) || out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = aftp_session_check_security(&settings->security, 0);
    if (rc != AFTP_OK)
        return rc;
    aftp_receiver *r = calloc(1, sizeof *r);
    if (r == NULL)
        return AFTP_ERR_NO_MEMORY;
    r->set = *settings;
    rc = aftp_session_init(&r->ss, settings->conn_id, settings->max_datagram,
                           settings->idle_timeout_ns, settings->on_event, settings->user, now_ns);
    if (rc == AFTP_OK)
        rc = keep_identity(r);
    aftp_rtt_init(&r->rtt, settings->initial_rtt_ns);
    r->resend_deadline = AFTP_NO_EXPIRY;
    /* Each range takes at least two bytes on the wire. */
    r->max_ranges = (settings->max_datagram - FEEDBACK_HEAD) / 2;
    if (r->max_ranges > AFTP_WIRE_MAX_RANGES)
        r->max_ranges = AFTP_WIRE_MAX_RANGES;
    r->ranges = malloc(r->max_ranges * sizeof *r->ranges);
    if (rc == AFTP_OK)
        rc = r->ranges ? aftp_digest_new(&r->hash) : AFTP_ERR_NO_MEMORY;
    if (rc != AFTP_OK) {
        aftp_receiver_del(r);
        return rc;
    }
    *out = r;
    return AFTP_OK;
}

void aftp_receiver_del(aftp_receiver *r)
{
    if (r == NULL)
        return;
    pipe_free(r);
    aftp_blockmap_free(&r->held);
    aftp_digest_del(r->hash);
    free(r->ranges);
    free(r->path);
    wipe_identity(r);
    aftp_session_free(&r->ss);
    free(r);
}

/* ---- timers ---- */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t drain_time(const aftp_receiver *r)
{
    return 3 * aftp_rtt_pto(&r->rtt);
}

/* ~RTT/4 once the handshake measured the RTT, within [1 ms, setting]. */
static uint64_t feedback_interval(const aftp_receiver *r)
{
    uint64_t t = r->rtt.has_sample ? r->rtt.smoothed / 4 : r->set.feedback_interval_ns;
    t = min_u64(t, r->set.feedback_interval_ns);
    return t < MIN_FEEDBACK_NS ? MIN_FEEDBACK_NS : t;
}

/* FEEDBACK no earlier than `earliest` after the previous one; the first
 * of a file leaves at once (the sender's first RTT sample). */
static void schedule_feedback(aftp_receiver *r, uint64_t earliest)
{
    uint64_t t = r->feedback_sent ? r->last_feedback_ns + earliest : r->ss.now_ns;
    if (t < r->ss.now_ns)
        t = r->ss.now_ns;
    if (!r->feedback_armed || t < r->feedback_deadline)
        r->feedback_deadline = t;
    r->feedback_armed = 1;
}

static void stop_feedback(aftp_receiver *r)
{
    r->feedback_armed = 0;
    r->feedback_due = 0;
}

/* ---- files ---- */

/* The open file ends: storage closed (committed only when verified),
 * FILE_END, and FILE_RESULT(error) due. */
static void end_file(aftp_receiver *r, int error, const uint8_t *digest)
{
    int rc = r->set.storage->close(r->set.user, r->info.file_id, error == AFTP_OK);
    if (error == AFTP_OK && rc != AFTP_OK)
        error = rc; /* the commit itself failed (fsync, rename) */
    r->phase = FILE_ENDED;
    r->verifying = 0;
    r->result_error = aftp_errmap_to_wire(error);
    memset(r->result_digest, 0, AFTP_DIGEST_LEN);
    if (digest != NULL)
        memcpy(r->result_digest, digest, AFTP_DIGEST_LEN);
    r->result_due = 1;
    r->backoff = 0;
    stop_feedback(r);
    aftp_blockmap_free(&r->held);
    aftp_session_event(&r->ss, AFTP_EV_FILE_END, error, &r->info, digest);
}

/* Session over: an open file is discarded (sections 9.11-9.13). */
static void close_now(aftp_receiver *r, int error)
{
    if (r->phase == FILE_OPEN)
        end_file(r, error, NULL);
    pipe_close_all(r, error);
    r->result_due = 0;
    r->resend_deadline = AFTP_NO_EXPIRY;
    aftp_session_set_closed(&r->ss, error);
}

static void start_closing(aftp_receiver *r, int error, uint16_t wire_error)
{
    if (r->phase == FILE_OPEN)
        end_file(r, error, NULL);
    pipe_close_all(r, error);
    r->result_due = 0;
    r->resend_deadline = AFTP_NO_EXPIRY;
    aftp_session_start_closing(&r->ss, error, wire_error, drain_time(r));
}

/* The peer broke the protocol (a HELLO refused, section 9.3, or an offer
 * against the rules of 9.6): CLOSE(PROTOCOL, reason). */
static void close_protocol(aftp_receiver *r, const char *reason)
{
    aftp_session_set_text(&r->ss, reason);
    start_closing(r, AFTP_ERR_MALFORMED, AFTP_WIRE_ERR_PROTOCOL);
}

/* Section 9.10: the stored file is read back through storage.view and its
 * XXH3-128 compared with the sender's; commit only on a match. Held blocks
 * never change (duplicates and forgeries are dropped before any write), so
 * the read-back follows the contiguous held prefix while data still
 * arrives, one step at a time: at the end only the last steps are left,
 * not a re-read of the whole file (seconds for a multi-GiB file, minutes
 * from a disk). Every step is one expiry, so the session answers its peer
 * in between. */
static void start_verification(aftp_receiver *r)
{
    r->verifying = 1;
}

/* Bytes at the start of the file whose blocks are all held. */
static uint64_t held_prefix_bytes(const aftp_receiver *r)
{
    return min_u64(r->info.size, aftp_blockmap_first_clear(&r->held) * r->info.block_size);
}

/* A read-back step is due: the final ones, or a whole step of the prefix. */
static int verify_due(const aftp_receiver *r)
{
    if (r->verifying)
        return 1;
    return r->phase == FILE_OPEN &&
           held_prefix_bytes(r) >= r->verified + AFTP_RECEIVER_VERIFY_STEP;
}

static void verify_step(aftp_receiver *r)
{
    uint64_t end = min_u64(held_prefix_bytes(r), r->verified + AFTP_RECEIVER_VERIFY_STEP);
    while (r->verified < end) {
        const uint8_t *p = NULL;
        size_t len = (size_t)min_u64(VERIFY_CHUNK, end - r->verified);
        int rc = r->set.storage->view(r->set.user, r->info.file_id, r->verified, len, &p);
        if (rc != AFTP_OK) {
            end_file(r, rc, NULL);
            return;
        }
        aftp_digest_update(r->hash, p, len);
        r->verified += len;
    }
    if (!r->verifying || r->verified < r->info.size)
        return;
    uint8_t digest[AFTP_DIGEST_LEN];
    aftp_digest_final(r->hash, digest);
    int match = memcmp(digest, r->expected, AFTP_DIGEST_LEN) == 0;
    end_file(r, match ? AFTP_OK : AFTP_ERR_DIGEST_MISMATCH, digest);
}

static int all_blocks_held(const aftp_receiver *r)
{
    return aftp_blockmap_count(&r->held) == r->block_count;
}

/* Section 9.6: a block must fit one DATA datagram of this session. The
 * only limit the engine itself sets on an offer (the block map's memory
 * does not depend on the file's size, section 14.7); its refusal names
 * both figures. */
static int check_block_size(aftp_receiver *r, uint32_t block_size)
{
    uint32_t needed = block_size + AFTP_WIRE_DATA_OVERHEAD;
    if (needed <= r->ss.max_datagram)
        return AFTP_OK;
    snprintf(r->refusal, sizeof r->refusal,
             "offer refused: blocks of %u bytes need %u-byte datagrams, above this session's "
             "limit of %u bytes (the smaller max_datagram of the two sides); send smaller "
             "blocks", (unsigned)block_size, (unsigned)needed, (unsigned)r->ss.max_datagram);
    return AFTP_ERR_LIMIT;
}

/* Opens the offered file in storage; the answer is kept for repeats. */
static int accept_offer(aftp_receiver *r, const aftp_wire_file_offer *o)
{
    r->block_count = aftp_wire_block_count(o->size, o->block_size);
    int rc = check_block_size(r, o->block_size);
    if (rc == AFTP_OK)
        rc = r->set.storage->open(r->set.user, &r->info);
    if (rc != AFTP_OK)
        return rc;
    aftp_blockmap_free(&r->held);
    rc = aftp_blockmap_init(&r->held, r->block_count, r->set.map_window_blocks);
    if (aftp_blockmap_bytes(&r->held) > r->ss.stats.map_bytes)
        r->ss.stats.map_bytes = aftp_blockmap_bytes(&r->held);
    r->verified = 0;
    aftp_digest_reset(r->hash);
    if (rc != AFTP_OK)
        r->set.storage->close(r->set.user, r->info.file_id, 0);
    return rc;
}

/* FILE_END for a refused offer, with the engine's reason when it gave one
 * (the session's events carry text only for CLOSED). */
static void report_refusal(aftp_receiver *r, int rc)
{
    aftp_event ev = {.type = AFTP_EV_FILE_END, .error = rc, .info = &r->info,
                     .message = r->refusal[0] != '\0' ? r->refusal : NULL};
    if (r->set.on_event != NULL)
        r->set.on_event(r->set.user, &ev);
}

static int set_path(aftp_receiver *r, const uint8_t *path, uint16_t len)
{
    char *copy = malloc((size_t)len + 1);
    if (copy == NULL)
        return AFTP_ERR_NO_MEMORY;
    memcpy(copy, path, len);
    copy[len] = '\0';
    free(r->path);
    r->path = copy;
    return AFTP_OK;
}

static void on_new_offer(aftp_receiver *r, const aftp_wire_file_offer *o)
{
    if (set_path(r, o->path, o->path_len) != AFTP_OK) {
        aftp_session_drop(&r->ss); /* the sender will offer again */
        return;
    }
    r->info = (aftp_file_info){
        .file_id = o->file_id,
        .size = o->size,
        .mtime_ns = o->mtime_ns,
        .mode = o->mode,
        .block_size = o->block_size,
        .overwrite = (o->flags & AFTP_WIRE_OFFER_OVERWRITE) != 0,
        .path = r->path,
    };
    r->scan_hi = 0;
    r->scan_cursor = 0;
    r->done_received = 0;
    r->result_due = 0;
    r->result_sent = 0;
    r->refusal[0] = '\0';
    r->resend_deadline = AFTP_NO_EXPIRY;
    r->feedback_sent = 0;
    int rc = accept_offer(r, o);
    r->reply_error = aftp_errmap_to_wire(rc);
    r->reply_due = 1;
    if (rc == AFTP_OK) {
        r->phase = FILE_OPEN;
        aftp_session_event(&r->ss, AFTP_EV_FILE_START, AFTP_OK, &r->info, NULL);
    } else {
        r->phase = FILE_ENDED;
        r->result_error = r->reply_error;
        report_refusal(r, rc);
    }
}

/* Section 9.6, by the offer's id against the last one answered: one file
 * at a time, ids growing. Repeats of the last offer get the same reply
 * until its FILE_RESULT went out; after that, and for older ids, they are
 * late duplicates. */
static void on_file_offer(aftp_receiver *r, const aftp_wire_file_offer *o)
{
    uint32_t last_id = r->phase == FILE_NONE ? 0 : r->info.file_id;
    if (o->file_id == 0)
        close_protocol(r, "the sender offered file id 0, which is reserved");
    else if (o->file_id < last_id || (o->file_id == last_id && r->result_sent))
        aftp_session_drop(&r->ss);
    else if (o->file_id == last_id)
        r->reply_due = 1; /* no reopening */
    else if (r->phase == FILE_OPEN)
        close_protocol(r, "the sender offered a new file before the open one ended");
    else
        on_new_offer(r, o);
}

/* Section 9.5: DATA for a block already held is a duplicate (a sealed one
 * is dropped before decryption), and DATA beyond the block map's window
 * is discarded as if lost, before any copy (the sender repairs it once the
 * window has moved on; it arrived, so it counts in packets_received: the
 * sender's rate controller measures the path, and a full window is no
 * congestion). Either still draws a FEEDBACK, as any DATA does, so a
 * sender probing with its last block learns where the transfer stands
 * (the FEEDBACK says only what the receiver knows; its rate is bounded by
 * the feedback interval). 1 when the block is wanted. */
static int block_wanted(aftp_receiver *r, uint64_t block)
{
    if (aftp_blockmap_test(&r->held, block))
        r->ss.stats.duplicate_packets++;
    else if (block >= aftp_blockmap_window_end(&r->held))
        r->ss.stats.beyond_window_packets++;
    else
        return 1;
    schedule_feedback(r, feedback_interval(r));
    return 0;
}

/* Section 9.5: a wanted block is written at file_offset and held from
 * now on. 1 when stored, 0 when not wanted (a duplicate, beyond the
 * window), or storage's error. */
static int store_block(aftp_receiver *r, const aftp_wire_data *d, uint64_t file_offset)
{
    if (!block_wanted(r, d->block))
        return 0;
    schedule_feedback(r, feedback_interval(r));
    if (d->block + 1 > r->scan_hi)
        r->scan_hi = d->block + 1;
    int rc = r->set.storage->write(r->set.user, d->file_id, file_offset, d->payload,
                                   d->payload_len);
    if (rc != AFTP_OK)
        return rc;
    aftp_blockmap_set(&r->held, d->block);
    r->ss.stats.payload_bytes_received += d->payload_len;
    return 1;
}

static void on_data(aftp_receiver *r, const aftp_wire_data *d)
{
    r->data_packets++;
    if (r->phase != FILE_OPEN || d->file_id != r->info.file_id ||
        d->payload_len != aftp_wire_block_len(r->info.size, r->info.block_size, d->block)) {
        aftp_session_drop(&r->ss); /* sections 6.6, 9.5 */
        return;
    }
    int rc = store_block(r, d, d->block * r->info.block_size);
    if (rc < 0)
        end_file(r, rc, NULL);
    else if (rc == 1 && r->done_received && all_blocks_held(r))
        start_verification(r);
}

static void on_file_done(aftp_receiver *r, const aftp_wire_file_done *d)
{
    if (r->phase == FILE_NONE || d->file_id != r->info.file_id) {
        aftp_session_drop(&r->ss);
        return;
    }
    if (r->phase == FILE_ENDED) {
        r->result_due = 1; /* section 9.10: a repeated FILE_DONE gets the same answer */
        return;
    }
    if (r->verifying) {
        /* Section 9.10: a FEEDBACK showing every block held keeps the
         * sender waiting for the result rather than timing out. */
        schedule_feedback(r, MIN_FEEDBACK_NS);
        return;
    }
    memcpy(r->expected, d->digest, AFTP_DIGEST_LEN);
    r->done_received = 1;
    if (d->block_count != r->block_count)
        end_file(r, AFTP_ERR_DIGEST_MISMATCH, NULL);
    else if (all_blocks_held(r))
        start_verification(r);
    else
        schedule_feedback(r, MIN_FEEDBACK_NS); /* section 9.8: report the tail at once */
}

static void on_close(aftp_receiver *r, const aftp_wire_close *c)
{
    close_now(r, aftp_session_peer_close(&r->ss, c));
    aftp_session_answer_close(&r->ss);
}

/* The session belongs to this client from now on. */
static void take_hello(aftp_receiver *r, const aftp_wire_packet *p)
{
    r->hello_seen = 1;
    r->ss.peer_id = p->hdr.conn_id;
    if (p->u.hello.max_datagram < r->ss.max_datagram)
        r->ss.max_datagram = p->u.hello.max_datagram;
}

/* Section 14.2: the first of the client's ciphers this server allows. */
static uint8_t pick_cipher(const aftp_receiver *r, const aftp_wire_hello *h)
{
    for (uint8_t i = 0; i < h->cipher_count; i++)
        if (aftp_session_cipher_allowed(r->set.security.cipher, h->ciphers[i]))
            return h->ciphers[i];
    return AFTP_WIRE_CIPHER_NONE;
}

/* The admission policy, as the handshake calls it (user: the receiver). */
static int policy_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    const aftp_peer_policy *pol = &((aftp_receiver *)user)->set.security.peers;
    return pol->lookup(pol->user, client_key, psk);
}

static int policy_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    const aftp_peer_policy *pol = &((aftp_receiver *)user)->set.security.peers;
    return pol->check_timestamp != NULL ? pol->check_timestamp(pol->user, client_key, ts)
                                        : AFTP_OK;
}

/* Reads message 1 with the HELLO's prologue: AFTP_OK and *out, or why not
 * (AUTH, REPLAY, UNKNOWN_PEER, MALFORMED, NO_MEMORY). */
static int read_message1(aftp_receiver *r, const aftp_wire_packet *p, const uint8_t *msg,
                         uint16_t msg_len, aftp_handshake **out)
{
    const aftp_security_settings *sec = &r->set.security;
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX], payload[AFTP_HS_MAX_PAYLOAD];
    size_t prologue_len, payload_len;
    int rc = aftp_wire_hello_prologue(&p->u.hello, p->hdr.conn_id, prologue, sizeof prologue,
                                      &prologue_len);
    aftp_hs_peers peers = {.lookup = policy_lookup, .check_timestamp = policy_check_timestamp,
                           .user = r};
    aftp_hs_config cfg = {.role = AFTP_HS_RESPONDER, .static_secret = r->identity,
                          .peers = &peers, .prologue = prologue, .prologue_len = prologue_len,
                          .random = sec->random, .random_user = sec->random_user};
    *out = NULL;
    if (rc == AFTP_OK)
        rc = aftp_handshake_new(out, &cfg);
    if (rc == AFTP_OK)
        rc = aftp_handshake_read_init(*out, msg, msg_len, payload, sizeof payload, &payload_len);
    return rc;
}

/* Section 12.3: the policy's cap for this client (client_key NULL in an
 * unprotected session). A client that cannot honour a cap (its HELLO has
 * no RATE_CAP) is refused with CLOSE(LIMIT) rather than served faster
 * than its server allows: AFTP_ERR_LIMIT, the session closing. */
static int decide_rate_cap(aftp_receiver *r, const aftp_wire_hello *h, const uint8_t *client_key)
{
    const aftp_peer_policy *pol = &r->set.security.peers;
    const uint8_t *value;
    uint16_t value_len;
    char why[256];
    r->rate_cap_bps = pol->rate_cap != NULL ? pol->rate_cap(pol->user, client_key) : 0;
    if (r->rate_cap_bps == 0 ||
        aftp_wire_ext_find(h->ext, h->ext_len, AFTP_WIRE_EXT_RATE_CAP, &value, &value_len))
        return AFTP_OK;
    snprintf(why, sizeof why,
             "this server serves this client only with a rate cap of %" PRIu64 " bit/s, and "
             "the client cannot honour a cap (its HELLO has no RATE_CAP): use a client that "
             "supports RATE_CAP",
             r->rate_cap_bps);
    aftp_session_set_text(&r->ss, why);
    aftp_session_start_closing(&r->ss, AFTP_ERR_LIMIT, AFTP_WIRE_ERR_LIMIT, drain_time(r));
    return AFTP_ERR_LIMIT;
}

/* Section 12.3.2: pipelined mode when this receiver offers it (a window
 * and storage that decides entries) and the HELLO announced a valid
 * PIPELINE; the session's W is the smaller of the two windows. */
static void decide_window(aftp_receiver *r, const aftp_wire_hello *h)
{
    uint32_t asked = 0;
    r->window = 0;
    if (r->set.pipeline_window == 0 || r->set.storage->entry == NULL ||
        aftp_wire_ext_pipeline(h->ext, h->ext_len, &asked) != 1)
        return;
    r->window = asked < r->set.pipeline_window ? asked : r->set.pipeline_window;
    if (pipe_init(r) != AFTP_OK)
        r->window = 0; /* no memory for its state: a one-file session */
}

/* The HELLO_ACK's extensions before message 2: the cap granted, if any,
 * and the entry window of a pipelined session. */
static int put_ack_extensions(const aftp_receiver *r, aftp_wire_writer *w)
{
    int rc = r->rate_cap_bps != 0 ? aftp_wire_ext_put_rate_cap(w, r->rate_cap_bps) : AFTP_OK;
    if (rc == AFTP_OK && r->window != 0)
        rc = aftp_wire_ext_put_pipeline(w, r->window);
    return rc;
}

/* Message 2 authenticates the HELLO_ACK's fields and its other extensions
 * (section 14.2.3), so it is added last; the whole datagram is built now
 * (its packet number taken) and kept for repeated HELLOs. */
static int build_hello_ack(aftp_receiver *r, aftp_handshake *hs, uint8_t cipher)
{
    aftp_wire_packet p;
    uint8_t payload[AFTP_HS_MAX_PAYLOAD], msg2[AFTP_HS_MAX_RESPONSE], ext[HELLO_ACK_EXT_MAX];
    size_t payload_len, msg2_len;
    aftp_wire_writer w;
    aftp_session_packet(&r->ss, AFTP_WIRE_HELLO_ACK, &p);
    p.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = r->ss.local_id, .cipher = cipher,
                                          .max_datagram = r->ss.max_datagram, .ext = ext};
    aftp_wire_writer_init(&w, ext, sizeof ext);
    int rc = put_ack_extensions(r, &w);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    if (rc == AFTP_OK)
        rc = aftp_session_ack_payload(&p.u.hello_ack, payload, sizeof payload, &payload_len);
    if (rc == AFTP_OK)
        rc = aftp_handshake_write_response(hs, payload, payload_len, msg2, sizeof msg2,
                                           &msg2_len);
    if (rc == AFTP_OK)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg2, (uint16_t)msg2_len);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    if (rc == AFTP_OK)
        rc = aftp_wire_encode(&p, r->hello_ack, sizeof r->hello_ack, &r->hello_ack_len);
    if (rc == AFTP_OK)
        r->ss.next_pn++;
    return rc;
}

/* A client admitted by its key: its cap decided, then the HELLO_ACK and
 * the traffic keys. */
static void on_admitted_hello(aftp_receiver *r, const aftp_wire_packet *p, aftp_handshake *hs,
                              uint8_t cipher)
{
    uint8_t client_key[AFTP_HS_KEY_LEN];
    int rc = aftp_handshake_peer_key(hs, client_key);
    if (rc == AFTP_OK && decide_rate_cap(r, &p->u.hello, client_key) != AFTP_OK) {
        wipe_identity(r);
        return;
    }
    decide_window(r, &p->u.hello);
    if (rc == AFTP_OK)
        rc = build_hello_ack(r, hs, cipher);
    if (rc == AFTP_OK)
        rc = aftp_session_protect(&r->ss, hs, cipher, r->set.security.key_update_packets);
    wipe_identity(r);
    if (rc == AFTP_OK)
        r->hello_ack_due = 1;
    else
        aftp_session_set_closed(&r->ss, rc);
}

/* Section 14.3: a protected offer. Message 1 that does not authenticate
 * (wrong server key, changed offer, replayed) gets silence; an unknown
 * client key CLOSE(UNAUTHORIZED); success the HELLO_ACK, and the keys. */
static void on_protected_hello(aftp_receiver *r, const aftp_wire_packet *p, uint8_t cipher)
{
    const uint8_t *msg;
    uint16_t msg_len;
    aftp_handshake *hs = NULL;
    int rc = AFTP_ERR_MALFORMED;
    if (aftp_wire_ext_find(p->u.hello.ext, p->u.hello.ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg,
                           &msg_len) && msg_len <= sizeof r->msg1)
        rc = read_message1(r, p, msg, msg_len, &hs);
    if (rc == AFTP_ERR_UNKNOWN_PEER) {
        take_hello(r, p);
        aftp_session_set_text(&r->ss, "client key not authorized");
        aftp_session_start_closing(&r->ss, rc, AFTP_WIRE_ERR_UNAUTHORIZED, drain_time(r));
    } else if (rc == AFTP_OK) {
        take_hello(r, p);
        memcpy(r->msg1, msg, msg_len);
        r->msg1_len = msg_len;
        on_admitted_hello(r, p, hs, cipher);
    } else {
        aftp_session_drop(&r->ss);
    }
    aftp_handshake_del(hs);
}

/* A HELLO again: the same answer, when it is the same client's resend
 * (protected: the same message 1, before the client spoke under keys). */
static void on_repeated_hello(aftp_receiver *r, const aftp_wire_hello *h)
{
    const uint8_t *msg;
    uint16_t msg_len;
    int same = !aftp_session_protected(&r->ss) ||
               (!r->confirmed &&
                aftp_wire_ext_find(h->ext, h->ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg, &msg_len) &&
                msg_len == r->msg1_len && memcmp(msg, r->msg1, msg_len) == 0);
    if (same)
        r->hello_ack_due = 1;
    else
        aftp_session_drop(&r->ss);
}

/* Sections 9.3, 14.2: PUSH only; NONE only when both sides chose it. */
static void on_hello(aftp_receiver *r, const aftp_wire_packet *p)
{
    const aftp_wire_hello *h = &p->u.hello;
    if (r->hello_seen) {
        on_repeated_hello(r, h);
        return;
    }
    int none_offered = memchr(h->ciphers, AFTP_WIRE_CIPHER_NONE, h->cipher_count) != NULL;
    int server_none = r->set.security.cipher == AFTP_CIPHER_NONE;
    /* Sections 6.2.1, 14.2.5: a list with NONE in it is an unprotected
     * offer, whatever else it lists. */
    uint8_t cipher = server_none || none_offered ? AFTP_WIRE_CIPHER_NONE : pick_cipher(r, h);
    if (h->role == AFTP_WIRE_ROLE_PUSH && cipher != AFTP_WIRE_CIPHER_NONE) {
        on_protected_hello(r, p, cipher);
        return;
    }
    take_hello(r, p);
    if (h->role != AFTP_WIRE_ROLE_PUSH)
        close_protocol(r, "only push is supported");
    else if (server_none && !none_offered)
        close_protocol(r, "server runs without encryption (--cipher none); the client must opt "
                        "in too");
    else if (!server_none && none_offered)
        close_protocol(r, "unprotected transfers are not enabled on this server");
    else if (!server_none)
        close_protocol(r, "no common cipher");
    else if (decide_rate_cap(r, h, NULL) == AFTP_OK) {
        decide_window(r, h);
        r->hello_ack_due = 1;
    }
}

/* The first packet after HELLO_ACK proves the client's address and gives
 * the one RTT sample the receiver gets. */
static void confirm(aftp_receiver *r)
{
    r->confirmed = 1;
    r->ss.state = AFTP_STATE_TRANSFER;
    if (r->ss.now_ns > r->hello_ack_sent_ns)
        aftp_rtt_sample(&r->rtt, r->ss.now_ns - r->hello_ack_sent_ns, 0);
    aftp_session_event(&r->ss, AFTP_EV_CONNECTED, AFTP_OK, NULL, NULL);
}

static int encode_file_result(aftp_receiver *r, uint32_t file_id, uint16_t wire_error,
                              const uint8_t *digest, uint8_t *buf, size_t cap, aftp_datagram *dg);

/* ---- pipelined mode (spec section 9.14) ----
 *
 * Many entries at once over one session stream. What the engine keeps per
 * entry lives in a ring of W slots parallel to the entry table (entry id i
 * in slot i mod W): a slot keeps an ended entry's verdict or FILE_RESULT
 * for repeats until entry i + W takes it, which can only happen once the
 * sender's window moved past i (spec 9.14.3). Bounded state: W slots (a
 * path and a link target each, at most 4096 + 4096 bytes), W queued
 * FILE_RESULTs, W files waiting for the group commit, one block map over
 * the stream (its memory fixed by map_window_blocks), and one file read
 * back at a time. */

static pipe_entry *pipe_slot(const aftp_receiver *r, uint32_t id)
{
    pipe_entry *p = &r->pe[id % r->window];
    return id != 0 && p->id == id ? p : NULL;
}

static void pipe_free(aftp_receiver *r)
{
    for (uint32_t i = 0; r->pe != NULL && i < r->window; i++)
        free(r->pe[i].path);
    free(r->pe);
    free(r->results);
    free(r->group);
    free(r->group_results);
    free(r->vrecs);
    free(r->vranges);
    aftp_stream_free(&r->stream);
    r->pe = NULL;
}

/* Room for one VERDICTS: as many records and held ranges as a datagram
 * can carry. */
static size_t verdict_budget(const aftp_receiver *r)
{
    return r->ss.max_datagram - AFTP_WIRE_HEADER_LEN - 2 - aftp_session_overhead(&r->ss);
}

static int pipe_init(aftp_receiver *r)
{
    uint32_t w = r->window;
    r->max_vrecs = r->ss.max_datagram / AFTP_WIRE_VERDICT_FIXED;
    if (r->max_vrecs > AFTP_WIRE_MAX_VERDICTS)
        r->max_vrecs = AFTP_WIRE_MAX_VERDICTS;
    r->max_vranges = r->ss.max_datagram / 2u;
    int rc = aftp_stream_init(&r->stream, w);
    r->pe = calloc(w, sizeof *r->pe);
    r->results = calloc(w, sizeof *r->results);
    r->group = calloc(w, sizeof *r->group);
    r->group_results = calloc(w, sizeof *r->group_results);
    r->vrecs = calloc(r->max_vrecs, sizeof *r->vrecs);
    r->vranges = calloc(r->max_vranges, sizeof *r->vranges);
    if (rc == AFTP_OK && (r->pe == NULL || r->results == NULL || r->group == NULL ||
                          r->group_results == NULL || r->vrecs == NULL || r->vranges == NULL))
        rc = AFTP_ERR_NO_MEMORY;
    if (rc == AFTP_OK)
        rc = aftp_blockmap_init(&r->held, AFTP_WIRE_MAX_BLOCKS, r->set.map_window_blocks);
    if (rc == AFTP_OK && aftp_blockmap_bytes(&r->held) > r->ss.stats.map_bytes)
        r->ss.stats.map_bytes = aftp_blockmap_bytes(&r->held);
    r->decide_next = r->verdicts_from = 1;
    r->repeat_lo = 1;
    r->repeat_hi = 0;
    if (rc != AFTP_OK)
        pipe_free(r);
    return rc;
}

/* An entry event (ENTRY_END, FILE_START, FILE_END) with its verdict and
 * what RESUME found held. */
static void pipe_event(aftp_receiver *r, int type, const pipe_entry *p, int error,
                       const uint8_t *digest, const char *message)
{
    uint64_t held = p->held_blocks * p->info.file.block_size;
    aftp_event ev = {.type = type, .error = error, .info = &p->info.file, .digest = digest,
                     .message = message, .verdict = p->verdict,
                     .held_bytes = held < p->info.file.size ? held : p->info.file.size};
    if (r->set.on_event != NULL)
        r->set.on_event(r->set.user, &ev);
}

/* Keeps what the engine needs of a new entry in its slot (the slot's
 * previous entry, W ids older, is forgotten). */
static int pipe_keep(aftp_receiver *r, const aftp_wire_entry *e)
{
    pipe_entry *p = &r->pe[e->entry_id % r->window];
    char *text = malloc((size_t)e->path_len + e->target_len + 2);
    if (text == NULL)
        return AFTP_ERR_NO_MEMORY;
    free(p->path);
    memset(p, 0, sizeof *p);
    memcpy(text, e->path, e->path_len);
    text[e->path_len] = '\0';
    memcpy(text + e->path_len + 1, e->target, e->target_len);
    text[e->path_len + 1 + e->target_len] = '\0';
    p->id = e->entry_id;
    p->path = text;
    p->phase = PIPE_OFFERED;
    p->base = e->base_block;
    p->blocks = aftp_wire_entry_blocks(e);
    p->info = (aftp_entry_info){
        .file = {.file_id = e->entry_id, .size = e->size, .mtime_ns = e->mtime_ns,
                 .mode = e->mode, .block_size = e->block_size,
                 .overwrite = (e->flags & AFTP_WIRE_ENTRY_OVERWRITE) != 0, .path = text},
        .kind = e->kind,
        .flags = e->flags & (AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC | AFTP_ENTRY_CHECKSUM),
        .source_id = e->source_id,
        .target = e->kind == AFTP_WIRE_KIND_SYMLINK ? text + e->path_len + 1 : NULL};
    memcpy(p->info.digest, e->digest, AFTP_DIGEST_LEN);
    return AFTP_OK;
}

/* A repeated entry's verdict can be answered while it is remembered; a
 * RESUME's ranges only while its file is open (storage's list is gone
 * after close, and a file that reached FILE_RESULT had its verdict with
 * the sender already: the repeat is a late copy). */
static int pipe_repeatable(const pipe_entry *p)
{
    return p != NULL && !(p->verdict == AFTP_WIRE_VERDICT_RESUME && p->closed);
}

/* A repeated ENTRIES: its entries that have a verdict already get it
 * again, in one VERDICTS (a batch is consecutive ids, so one range). */
static void pipe_note_repeat(aftp_receiver *r, uint32_t id)
{
    if (id >= r->verdicts_from || !pipe_repeatable(pipe_slot(r, id)))
        return; /* no verdict yet, or one still queued: it leaves anyway */
    if (r->repeat_lo > r->repeat_hi)
        r->repeat_lo = r->repeat_hi = id;
    else if (id < r->repeat_lo)
        r->repeat_lo = id;
    else if (id > r->repeat_hi)
        r->repeat_hi = id;
}

/* The file's held ranges a RESUME verdict sends: storage's list, cut
 * where it stops ascending, leaves the file, or no longer fits one
 * VERDICTS (spec 9.14.4: fewer than held is allowed, never more).
 * Returns how many; *blocks the blocks they hold. */
static size_t pipe_usable_held(const aftp_receiver *r, const pipe_entry *p, uint64_t *blocks)
{
    size_t budget = verdict_budget(r) - AFTP_WIRE_VERDICT_FIXED, n = 0;
    uint64_t next_min = 0;
    *blocks = 0;
    for (; n < p->held_count && n < r->max_vranges; n++) {
        const aftp_block_range *h = &p->held[n];
        if (h->len == 0 || h->start < next_min || h->start > p->blocks ||
            h->len > p->blocks - h->start)
            break;
        size_t cost = aftp_wire_varint_len(h->start - next_min) + aftp_wire_varint_len(h->len - 1);
        if (cost > budget)
            break;
        budget -= cost;
        next_min = h->start + h->len + 1;
        *blocks += h->len;
    }
    return n;
}

/* The wire form of an entry's verdict; a RESUME's ranges go to `ranges`,
 * which must have room for p->held_count. */
static aftp_wire_verdict pipe_wire_verdict(const pipe_entry *p, aftp_wire_range *ranges)
{
    aftp_wire_verdict v = {.entry_id = p->id, .verdict = p->verdict};
    if (p->verdict == AFTP_WIRE_VERDICT_REFUSED)
        v.error = p->wire_error;
    if (p->verdict == AFTP_WIRE_VERDICT_RESUME) {
        for (size_t i = 0; i < p->held_count; i++)
            ranges[i] = (aftp_wire_range){.start = p->held[i].start, .len = p->held[i].len};
        v.range_count = (uint16_t)p->held_count;
        v.ranges = ranges;
    }
    return v;
}

/* Storage's answer checked and trimmed: RESUME with its usable held
 * ranges (none usable: SEND), SKIP and RESUME only where the entry
 * allows them (else the file is discarded and REFUSED(INTERNAL): a fault
 * of storage, not of the peer). */
static void pipe_take_verdict(aftp_receiver *r, pipe_entry *p, const aftp_entry_verdict *v)
{
    int file = p->info.kind == AFTP_ENTRY_FILE;
    p->verdict = (uint8_t)v->verdict;
    p->wire_error = v->verdict == AFTP_VERDICT_REFUSED ? aftp_errmap_to_wire(v->error) : 0;
    p->held = v->held;
    p->held_count = v->held_count;
    if (v->verdict == AFTP_VERDICT_RESUME) {
        p->held_count = p->held != NULL ? pipe_usable_held(r, p, &p->held_blocks) : 0;
        if (p->held_count == 0)
            p->verdict = AFTP_WIRE_VERDICT_SEND;
    }
    int allowed = v->verdict == AFTP_VERDICT_SEND || v->verdict == AFTP_VERDICT_REFUSED ||
                  (file && v->verdict == AFTP_VERDICT_SKIP && (p->info.flags & AFTP_ENTRY_SYNC)) ||
                  (file && v->verdict == AFTP_VERDICT_RESUME &&
                   (p->info.flags & AFTP_ENTRY_RESUME));
    if (allowed && (p->verdict != AFTP_WIRE_VERDICT_REFUSED || p->wire_error != 0))
        return;
    if (file && (v->verdict == AFTP_VERDICT_SEND || v->verdict == AFTP_VERDICT_RESUME))
        r->set.storage->close(r->set.user, p->id, AFTP_CLOSE_DISCARD);
    p->verdict = AFTP_WIRE_VERDICT_REFUSED;
    p->wire_error = aftp_errmap_to_wire(AFTP_ERR_INTERNAL);
    p->held_blocks = 0;
}

/* Marks held what the verdict holds: a RESUME's ranges, all of a
 * skipped or refused file (spec 9.14.2). */
/* What the entry holds without its DATA: the blocks a RESUME verdict
 * lists while the file is open, every block of an entry skipped,
 * refused or failed (spec 9.14.2). The map records them up to its
 * window's end only; where they reach beyond it the entry is flagged
 * `unmarked` and marked again as the window moves (pipe_remark). */
static void pipe_apply_marks(aftp_receiver *r, pipe_entry *p)
{
    int whole = p->verdict == AFTP_WIRE_VERDICT_SKIP || p->verdict == AFTP_WIRE_VERDICT_REFUSED ||
                (p->has_result && p->wire_error != AFTP_WIRE_ERR_NONE);
    uint64_t end = p->base;
    if (whole) {
        end = p->base + p->blocks;
        aftp_blockmap_set_range(&r->held, p->base, end);
    } else if (p->verdict == AFTP_WIRE_VERDICT_RESUME && !p->closed) {
        for (size_t i = 0; i < p->held_count; i++) {
            end = p->base + p->held[i].start + p->held[i].len;
            aftp_blockmap_set_range(&r->held, p->base + p->held[i].start, end);
        }
    }
    p->unmarked = end > aftp_blockmap_window_end(&r->held);
}

/* The window moved: entries flagged unmarked, lowest id first, get
 * their marks again; the lowest one still reaching beyond stops the walk
 * (the window cannot pass it before its blocks are marked). */
static void pipe_remark(aftp_receiver *r)
{
    uint64_t window_end = aftp_blockmap_window_end(&r->held);
    if (window_end == r->marked_end)
        return;
    r->marked_end = window_end;
    for (; r->mark_lo != 0 && r->mark_lo <= r->stream.newest; r->mark_lo++) {
        pipe_entry *p = pipe_slot(r, r->mark_lo);
        if (p == NULL || !p->unmarked)
            continue;
        pipe_apply_marks(r, p);
        if (p->unmarked)
            return;
    }
    r->mark_lo = 0;
}

static void pipe_mark(aftp_receiver *r, pipe_entry *p)
{
    pipe_apply_marks(r, p);
    if (p->unmarked && (r->mark_lo == 0 || p->id < r->mark_lo))
        r->mark_lo = p->id;
    pipe_remark(r);
}

/* Queues the verdict of `p` (to leave within one feedback interval, or
 * at once when the queue fills a datagram: section 9.14.3). */
static void pipe_queue_verdict(aftp_receiver *r)
{
    if (r->verdicts_from + 1 == r->decide_next)
        r->verdicts_deadline = r->ss.now_ns + feedback_interval(r);
    if ((size_t)(r->decide_next - r->verdicts_from) * AFTP_WIRE_VERDICT_FIXED >=
        verdict_budget(r))
        r->verdicts_deadline = r->ss.now_ns;
}

/* Storage decides entry p, the next in id order. */
static void pipe_decide(aftp_receiver *r, pipe_entry *p)
{
    aftp_entry_verdict v = {.verdict = AFTP_VERDICT_REFUSED};
    aftp_stream_entry copy;
    r->refusal[0] = '\0';
    v.error = p->info.kind == AFTP_ENTRY_FILE ? check_block_size(r, p->info.file.block_size)
                                              : AFTP_OK;
    if (v.error == AFTP_OK) {
        int rc = r->set.storage->entry(r->set.user, &p->info, &v);
        if (rc != AFTP_OK) {
            aftp_session_set_text(&r->ss, "storage failed while deciding an entry");
            start_closing(r, rc, aftp_errmap_to_wire(rc));
            return;
        }
    }
    pipe_take_verdict(r, p, &v);
    aftp_wire_verdict wv = pipe_wire_verdict(p, r->vranges);
    aftp_stream_verdict(&r->stream, &wv, &copy, NULL, 0); /* valid by construction */
    r->decide_next++;
    pipe_queue_verdict(r);
    pipe_mark(r, p);
    if (copy.state == AFTP_STREAM_ACCEPTED) {
        p->phase = PIPE_RECEIVING;
        p->missing = p->blocks - p->held_blocks;
        pipe_event(r, AFTP_EV_FILE_START, p, AFTP_OK, NULL, NULL);
        return;
    }
    p->phase = PIPE_ENDED;
    int error = p->verdict == AFTP_WIRE_VERDICT_REFUSED ? aftp_errmap_to_local(p->wire_error)
                                                        : AFTP_OK;
    pipe_event(r, AFTP_EV_ENTRY_END, p, error, NULL, r->refusal[0] ? r->refusal : NULL);
}

/* Verdicts in id order: each entry waits for its predecessors. */
static void pipe_decide_ready(aftp_receiver *r)
{
    pipe_entry *p;
    while (r->ss.state == AFTP_STATE_TRANSFER && (p = pipe_slot(r, r->decide_next)) != NULL &&
           p->phase == PIPE_OFFERED)
        pipe_decide(r, p);
}

/* Section 9.14.1: the receiver's `oldest` counts the ends it has sent.
 * The entry table moves on when an end is decided, so a new entry whose
 * slot still holds an entry W ids older whose end has not left yet is
 * beyond the sender's window. 1 when the slot is free for `id`. */
static int pipe_slot_free(const aftp_receiver *r, uint32_t id, char *why, size_t cap)
{
    const pipe_entry *old = &r->pe[id % r->window];
    if (old->id == 0 || (old->end_sent && old->id < r->verdicts_from))
        return 1; /* (a hostile sender can draw a FILE_RESULT before the verdict left) */
    snprintf(why, cap,
             "entry %u is beyond the window of %u entries: the verdict or end of entry %u "
             "was not sent yet",
             id, r->window, old->id);
    return 0;
}

static void on_entries(aftp_receiver *r, const aftp_wire_entries *en)
{
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    char why[200];
    aftp_wire_entries_iter_init(&it, en);
    while (aftp_wire_entries_next(&it, &e)) {
        int rc = aftp_stream_add(&r->stream, &e, why, sizeof why);
        if (rc < 0) {
            close_protocol(r, why);
            return;
        }
        if (rc == 0) {
            pipe_note_repeat(r, e.entry_id);
        } else if (!pipe_slot_free(r, e.entry_id, why, sizeof why)) {
            close_protocol(r, why);
            return;
        } else if (pipe_keep(r, &e) != AFTP_OK) {
            aftp_session_set_text(&r->ss, "out of memory for the sender's entries");
            start_closing(r, AFTP_ERR_NO_MEMORY, aftp_errmap_to_wire(AFTP_ERR_NO_MEMORY));
            return;
        }
    }
    pipe_decide_ready(r);
}

/* FILE_RESULT due for p (dropped when W results wait already: the
 * sender's next FILE_DONE asks again). */
static void pipe_queue_result(aftp_receiver *r, const pipe_entry *p)
{
    if (r->results_len < r->window)
        r->results[(r->results_head + r->results_len++) % r->window] = p->id;
}

/* The file ended (storage closed it): FILE_RESULT due, its missing
 * blocks held (spec 9.14.2), FILE_END and ENTRY_END. */
static void pipe_end_file(aftp_receiver *r, pipe_entry *p, int error, const uint8_t *digest)
{
    p->phase = PIPE_ENDED;
    p->has_result = 1;
    p->closed = 1;
    p->held = NULL;
    p->wire_error = aftp_errmap_to_wire(error);
    memset(p->digest, 0, AFTP_DIGEST_LEN);
    if (digest != NULL)
        memcpy(p->digest, digest, AFTP_DIGEST_LEN);
    if (error != AFTP_OK)
        pipe_mark(r, p);
    aftp_stream_end(&r->stream, p->id, p->wire_error);
    pipe_queue_result(r, p);
    pipe_event(r, AFTP_EV_FILE_END, p, error, digest, NULL);
    pipe_event(r, AFTP_EV_ENTRY_END, p, error, digest, NULL);
}

static void pipe_fail(aftp_receiver *r, pipe_entry *p, int error)
{
    if (p->phase == PIPE_READY)
        r->ready_count--;
    if (r->verify_id == p->id)
        r->verify_id = 0;
    r->set.storage->close(r->set.user, p->id, AFTP_CLOSE_DISCARD);
    pipe_end_file(r, p, error, NULL);
}

/* The files waiting for the group commit are made durable together;
 * each gets its FILE_RESULT only now (spec 9.14.3). */
static void pipe_commit_group(aftp_receiver *r)
{
    uint32_t n = r->group_len;
    if (n == 0)
        return;
    int rc = r->set.storage->commit_group(r->set.user, r->group, n, r->group_results);
    r->group_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        pipe_entry *p = pipe_slot(r, r->group[i]);
        if (p != NULL && p->phase == PIPE_DEFERRED)
            pipe_end_file(r, p, rc != AFTP_OK ? rc : r->group_results[i], p->digest);
    }
}

/* A verified file: committed alone, or deferred to the group commit,
 * which runs within one feedback interval of the first file waiting or
 * at once when half the window waits. */
static void pipe_verified(aftp_receiver *r, pipe_entry *p, const uint8_t *digest)
{
    if (r->set.storage->commit_group == NULL) {
        int rc = r->set.storage->close(r->set.user, p->id, AFTP_CLOSE_COMMIT);
        pipe_end_file(r, p, rc, digest);
        return;
    }
    int rc = r->set.storage->close(r->set.user, p->id, AFTP_CLOSE_DEFER);
    if (rc != AFTP_OK) {
        pipe_end_file(r, p, rc, NULL);
        return;
    }
    p->phase = PIPE_DEFERRED;
    memcpy(p->digest, digest, AFTP_DIGEST_LEN);
    if (r->group_len == 0)
        r->group_deadline = r->ss.now_ns + feedback_interval(r);
    r->group[r->group_len++] = p->id;
    if (r->group_len >= (r->window + 1) / 2)
        pipe_commit_group(r);
}

/* The lowest entry waiting to be read back, now the one being read. */
static pipe_entry *pipe_next_to_verify(aftp_receiver *r)
{
    for (uint32_t id = r->stream.oldest; id <= r->stream.newest; id++) {
        pipe_entry *p = pipe_slot(r, id);
        if (p != NULL && p->phase == PIPE_READY) {
            r->ready_count--;
            r->verify_id = id;
            r->verified = 0;
            aftp_digest_reset(r->hash);
            return p;
        }
    }
    return NULL;
}

/* One read-back step of section 9.10 over the file being verified. */
static void pipe_verify_step(aftp_receiver *r)
{
    pipe_entry *p = r->verify_id ? pipe_slot(r, r->verify_id) : pipe_next_to_verify(r);
    if (p == NULL)
        return;
    uint64_t end = min_u64(p->info.file.size, r->verified + AFTP_RECEIVER_VERIFY_STEP);
    while (r->verified < end) {
        const uint8_t *bytes = NULL;
        size_t len = (size_t)min_u64(VERIFY_CHUNK, end - r->verified);
        int rc = r->set.storage->view(r->set.user, p->id, r->verified, len, &bytes);
        if (rc != AFTP_OK) {
            pipe_fail(r, p, rc);
            return;
        }
        aftp_digest_update(r->hash, bytes, len);
        r->verified += len;
    }
    if (r->verified < p->info.file.size)
        return;
    uint8_t digest[AFTP_DIGEST_LEN];
    aftp_digest_final(r->hash, digest);
    r->verify_id = 0;
    if (memcmp(digest, p->expected, AFTP_DIGEST_LEN) == 0)
        pipe_verified(r, p, digest);
    else
        pipe_fail(r, p, AFTP_ERR_DIGEST_MISMATCH);
}

static void pipe_maybe_ready(aftp_receiver *r, pipe_entry *p)
{
    if (p->done && p->missing == 0 && p->phase == PIPE_RECEIVING) {
        p->phase = PIPE_READY;
        r->ready_count++;
    }
}

/* The accepted, unended file of DATA(file_id, stream block) with
 * payload_len bytes, or NULL when the packet has no place (spec 9.14.2).
 * A file read back or waiting for its commit holds every block: its DATA
 * is a duplicate, counted and answered as in 9.5. */
static pipe_entry *pipe_data_entry(const aftp_receiver *r, uint32_t file_id, uint64_t block,
                                   size_t payload_len)
{
    pipe_entry *p = pipe_slot(r, file_id);
    if (p == NULL || p->phase == PIPE_OFFERED || p->phase == PIPE_ENDED || block < p->base ||
        block - p->base >= p->blocks ||
        payload_len != aftp_wire_block_len(p->info.file.size, p->info.file.block_size,
                                           block - p->base))
        return NULL;
    return p;
}

static void on_pipe_data(aftp_receiver *r, const aftp_wire_data *d)
{
    r->data_packets++;
    pipe_entry *p = pipe_data_entry(r, d->file_id, d->block, d->payload_len);
    if (p == NULL) {
        aftp_session_drop(&r->ss);
        return;
    }
    int rc = store_block(r, d, (d->block - p->base) * p->info.file.block_size);
    if (rc < 0) {
        pipe_fail(r, p, rc);
    } else if (rc == 1) {
        pipe_remark(r);
        p->missing--;
        pipe_maybe_ready(r, p);
    }
}

static void on_pipe_file_done(aftp_receiver *r, const aftp_wire_file_done *d)
{
    pipe_entry *p = pipe_slot(r, d->file_id);
    if (p == NULL || p->info.kind != AFTP_ENTRY_FILE || p->phase == PIPE_OFFERED ||
        (p->phase == PIPE_ENDED && !p->has_result)) {
        aftp_session_drop(&r->ss);
        return;
    }
    if (p->phase == PIPE_ENDED) {
        pipe_queue_result(r, p); /* the same answer again */
        return;
    }
    if (p->done) {
        schedule_feedback(r, MIN_FEEDBACK_NS); /* verifying, committing: keep it waiting */
        return;
    }
    p->done = 1;
    memcpy(p->expected, d->digest, AFTP_DIGEST_LEN);
    if (p->base + p->blocks > r->done_end)
        r->done_end = p->base + p->blocks;
    if (d->block_count != p->blocks)
        pipe_fail(r, p, AFTP_ERR_DIGEST_MISMATCH);
    else
        pipe_maybe_ready(r, p);
    if (p->phase == PIPE_RECEIVING)
        schedule_feedback(r, MIN_FEEDBACK_NS); /* section 9.8: report the tail at once */
}

/* Session over: files still open are discarded, verified ones waiting
 * for the group commit are committed (they are whole and checked). */
static void pipe_close_all(aftp_receiver *r, int error)
{
    if (r->window == 0 || r->pe == NULL)
        return;
    pipe_commit_group(r);
    for (uint32_t id = r->stream.oldest; id != 0 && id <= r->stream.newest; id++) {
        pipe_entry *p = pipe_slot(r, id);
        if (p != NULL && (p->phase == PIPE_RECEIVING || p->phase == PIPE_READY))
            pipe_fail(r, p, error != AFTP_OK ? error : AFTP_ERR_PEER_CLOSED);
    }
    r->results_len = 0;
}

/* Answers whose entry is gone meanwhile are passed over, so whatever is
 * due has something to say: a repeat of a RESUME whose file closed, a
 * repeated FILE_RESULT whose slot a newer entry took (the sender had the
 * first one and moved on). */
static void pipe_prune(aftp_receiver *r)
{
    while (r->repeat_lo <= r->repeat_hi &&
           (r->repeat_lo >= r->verdicts_from || !pipe_repeatable(pipe_slot(r, r->repeat_lo))))
        r->repeat_lo++;
    while (r->results_len > 0 && pipe_slot(r, r->results[r->results_head]) == NULL) {
        r->results_head = (r->results_head + 1) % r->window;
        r->results_len--;
    }
}

static int pipe_verdicts_due(const aftp_receiver *r)
{
    return r->repeat_lo <= r->repeat_hi ||
           (r->verdicts_from < r->decide_next && r->ss.now_ns >= r->verdicts_deadline);
}

/* Adds p's verdict to the VERDICTS being built when it fits: 1, else 0. */
static int pipe_add_record(aftp_receiver *r, aftp_wire_verdicts *vs, const pipe_entry *p,
                           size_t *used_ranges, size_t *budget)
{
    if (vs->count == r->max_vrecs || *used_ranges + p->held_count > r->max_vranges)
        return 0;
    aftp_wire_verdict v = pipe_wire_verdict(p, r->vranges + *used_ranges);
    size_t cost = AFTP_WIRE_VERDICT_FIXED +
                  (v.range_count ? aftp_wire_ranges_encoded_len(0, v.ranges, v.range_count) : 0);
    if (cost > *budget)
        return 0;
    *budget -= cost;
    *used_ranges += v.range_count;
    r->vrecs[vs->count++] = v;
    return 1;
}

/* One VERDICTS: the repeats asked for, then the queued verdicts in id
 * order, as many as fit; the rest leave in the next one. */
static int encode_verdicts(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet pkt;
    size_t used = 0, budget = verdict_budget(r);
    aftp_session_packet(&r->ss, AFTP_WIRE_VERDICTS, &pkt);
    aftp_wire_verdicts *vs = &pkt.u.verdicts;
    for (; r->repeat_lo <= r->repeat_hi; r->repeat_lo++) {
        const pipe_entry *p = pipe_slot(r, r->repeat_lo);
        if (r->repeat_lo >= r->verdicts_from || !pipe_repeatable(p))
            continue;
        if (!pipe_add_record(r, vs, p, &used, &budget))
            break;
    }
    for (; r->verdicts_from < r->decide_next; r->verdicts_from++) {
        pipe_entry *p = pipe_slot(r, r->verdicts_from);
        if (!pipe_add_record(r, vs, p, &used, &budget))
            break;
        p->end_sent = p->phase == PIPE_ENDED && !p->has_result;
    }
    if (r->verdicts_from < r->decide_next)
        r->verdicts_deadline = r->ss.now_ns; /* a full datagram left: the rest at once */
    vs->verdicts = r->vrecs;
    return aftp_session_encode(&r->ss, &pkt, buf, cap, dg);
}

static int encode_pipe_result(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    uint32_t id = r->results[r->results_head];
    r->results_head = (r->results_head + 1) % r->window;
    r->results_len--;
    pipe_entry *p = pipe_slot(r, id);
    p->end_sent = 1;
    return encode_file_result(r, id, p->wire_error, p->digest, buf, cap, dg);
}

/* The pipelined timers: queued verdicts, the group commit, read-back. */
static uint64_t pipe_expiry(const aftp_receiver *r, uint64_t t)
{
    if (r->window == 0)
        return t;
    if (r->verdicts_from < r->decide_next)
        t = min_u64(t, r->verdicts_deadline);
    if (r->group_len > 0)
        t = min_u64(t, r->group_deadline);
    if (r->verify_id != 0 || r->ready_count > 0)
        t = min_u64(t, r->ss.now_ns);
    return t;
}

static void pipe_handle_expiry(aftp_receiver *r)
{
    if (r->window == 0 || r->ss.state != AFTP_STATE_TRANSFER)
        return;
    if (r->group_len > 0 && r->ss.now_ns >= r->group_deadline)
        pipe_commit_group(r);
    if (r->verify_id != 0 || r->ready_count > 0)
        pipe_verify_step(r);
}

/* Section 9.14: a pipelined session's input; FILE_OFFER has no place in it. */
static void dispatch_pipelined(aftp_receiver *r, const aftp_wire_packet *p)
{
    switch (p->hdr.type) {
    case AFTP_WIRE_ENTRIES: on_entries(r, &p->u.entries); break;
    case AFTP_WIRE_DATA: on_pipe_data(r, &p->u.data); break;
    case AFTP_WIRE_FILE_DONE: on_pipe_file_done(r, &p->u.file_done); break;
    case AFTP_WIRE_CLOSE: on_close(r, &p->u.close); break;
    default: aftp_session_drop(&r->ss); break;
    }
}

static void dispatch(aftp_receiver *r, const aftp_wire_packet *p)
{
    if (r->window != 0) {
        dispatch_pipelined(r, p);
        return;
    }
    switch (p->hdr.type) {
    case AFTP_WIRE_FILE_OFFER: on_file_offer(r, &p->u.file_offer); break;
    case AFTP_WIRE_DATA: on_data(r, &p->u.data); break;
    case AFTP_WIRE_FILE_DONE: on_file_done(r, &p->u.file_done); break;
    case AFTP_WIRE_CLOSE: on_close(r, &p->u.close); break;
    default: aftp_session_drop(&r->ss); break;
    }
}

/* Section 9.2 step 3: the types a server receives; the others only a
 * server sends, so they are no input for it, and dropped before they can
 * count as the client's (idle timer, address validation). */
static int server_receives(const aftp_receiver *r, uint8_t type)
{
    if (type == AFTP_WIRE_ENTRIES)
        return r->window != 0; /* section 12.4: only in a pipelined session */
    return type == AFTP_WIRE_HELLO || type == AFTP_WIRE_FILE_OFFER || type == AFTP_WIRE_DATA ||
           type == AFTP_WIRE_FILE_DONE || type == AFTP_WIRE_CLOSE;
}

/* HELLO carries the client's id, everything after it ours. */
static int addressed_to_us(const aftp_receiver *r, const aftp_wire_header *hdr)
{
    if (hdr->type == AFTP_WIRE_HELLO)
        return !r->hello_seen || hdr->conn_id == r->ss.peer_id;
    return r->hello_seen && hdr->conn_id == r->ss.local_id;
}

/* Section 14.5: a sealed DATA is judged on its clear file id and block
 * before any decryption. Outside the open file, or the wrong length:
 * dropped. A block already held (a duplicate, or a forgery aimed at
 * stored bytes): dropped and counted by block_wanted. A block beyond the
 * window is opened all the same (into scratch) and discarded by on_data:
 * so its authenticated packet number is acknowledged and restarts the
 * idle timer, and the sender's loss detection, which counts on newer
 * packets being acknowledged, keeps working while the window is full (a
 * lost repair of the block holding it back would otherwise never be
 * detected). Returns 1 when the datagram is worth opening, with its block
 * in *block. */
/* DATA(file_id, block) of payload_len bytes belongs to a file being
 * received (sections 6.6, 9.14.2). */
static int data_has_place(const aftp_receiver *r, uint32_t file_id, uint64_t block,
                          size_t payload_len)
{
    if (r->window != 0)
        return pipe_data_entry(r, file_id, block, payload_len) != NULL;
    return r->phase == FILE_OPEN && file_id == r->info.file_id && block < r->block_count &&
           payload_len == aftp_wire_block_len(r->info.size, r->info.block_size, block);
}

static int sealed_data_wanted(aftp_receiver *r, const uint8_t *pkt, size_t len, uint64_t *block_out)
{
    aftp_wire_reader rd;
    uint32_t file_id = 0;
    uint64_t block = 0;
    size_t overhead = AFTP_AEAD_AD_DATA + aftp_session_overhead(&r->ss);
    aftp_wire_reader_init(&rd, pkt + AFTP_WIRE_HEADER_LEN, len - AFTP_WIRE_HEADER_LEN);
    int ok = aftp_wire_read_u32(&rd, &file_id) == AFTP_OK &&
             aftp_wire_read_u64(&rd, &block) == AFTP_OK && len >= overhead &&
             data_has_place(r, file_id, block, len - overhead);
    if (!ok) {
        aftp_session_drop(&r->ss);
        return 0;
    }
    *block_out = block;
    /* A block beyond the window is not held: opened, then on_data's. */
    return aftp_blockmap_test(&r->held, block) ? block_wanted(r, block) : 1;
}

/* The clear file id of a DATA whose length was checked. */
static uint32_t data_file_id(const uint8_t *pkt)
{
    aftp_wire_reader rd;
    uint32_t file_id = 0;
    aftp_wire_reader_init(&rd, pkt + AFTP_WIRE_HEADER_LEN, 4);
    aftp_wire_read_u32(&rd, &file_id);
    return file_id;
}

/* Where the payload of a wanted sealed DATA for `block` can be opened in
 * place: the bytes storage lends for it, or NULL (then it opens into
 * scratch and goes through storage.write; a block beyond the window, to
 * be discarded, always does). */
static uint8_t *payload_place(aftp_receiver *r, uint32_t file_id, uint64_t block)
{
    uint8_t *place = NULL;
    const aftp_file_info *f = &r->info;
    uint64_t file_block = block;
    if (r->window != 0) {
        const pipe_entry *p = pipe_slot(r, file_id); /* admitted by sealed_data_wanted */
        f = &p->info.file;
        file_block = block - p->base;
    }
    if (r->set.storage->place == NULL || block >= aftp_blockmap_window_end(&r->held) ||
        r->set.storage->place(r->set.user, file_id, file_block * f->block_size,
                              aftp_wire_block_len(f->size, f->block_size, file_block),
                              &place) != AFTP_OK)
        return NULL;
    return place;
}

/* The receive steps (aftp_session.h): clear header, the DATA check above,
 * replay and flag checks, then decryption: a wanted DATA payload straight
 * into its place in storage where storage lends it, anything else into
 * scratch. */
static int admit(aftp_receiver *r, const uint8_t *pkt, size_t len, aftp_wire_packet *p)
{
    aftp_wire_header hdr;
    uint64_t block = 0;
    int sealed_data = 0;
    if (aftp_session_peek(&r->ss, pkt, len, &hdr) != AFTP_OK)
        return 0;
    if (!server_receives(r, hdr.type) || !addressed_to_us(r, &hdr)) {
        aftp_session_drop(&r->ss);
        return 0;
    }
    /* Before the replay check, so a DATA the path duplicated counts as a
     * duplicate like any other copy of a held block. */
    if (hdr.type == AFTP_WIRE_DATA && aftp_session_protected(&r->ss) &&
        (hdr.flags & AFTP_WIRE_FLAG_PROTECTED)) {
        if (!sealed_data_wanted(r, pkt, len, &block))
            return 0;
        sealed_data = 1;
    }
    if (aftp_session_precheck(&r->ss, &hdr) != AFTP_OK)
        return 0;
    uint8_t *place = sealed_data ? payload_place(r, data_file_id(pkt), block) : NULL;
    if (place != NULL)
        return aftp_session_open_data(&r->ss, pkt, len, &hdr, place, p) == AFTP_OK;
    return aftp_session_open(&r->ss, pkt, len, &hdr, p) == AFTP_OK;
}

int aftp_receiver_read(aftp_receiver *r, uint64_t now_ns, const uint8_t *pkt, size_t len)
{
    aftp_wire_packet p;
    if (r == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&r->ss, now_ns);
    if (r->ss.state == AFTP_STATE_CLOSED)
        return AFTP_OK;
    if (!admit(r, pkt, len, &p))
        return AFTP_OK;
    aftp_session_heard(&r->ss, r->ss.now_ns, len);
    if (!r->has_largest || p.hdr.pn > r->largest_pn) {
        r->has_largest = 1;
        r->largest_pn = p.hdr.pn;
        r->largest_pn_ns = r->ss.now_ns;
    }
    if (r->ss.state == AFTP_STATE_CLOSING) {
        if (p.hdr.type == AFTP_WIRE_CLOSE)
            close_now(r, r->ss.error);
        else
            r->ss.close_due = 1;
        return AFTP_OK;
    }
    if (p.hdr.type == AFTP_WIRE_HELLO)
        on_hello(r, &p);
    else {
        if (!r->confirmed)
            confirm(r);
        dispatch(r, &p);
    }
    return aftp_session_failure(&r->ss);
}

/* ---- output ---- */

static int encode_hello_ack(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    if (r->hello_ack_len > 0) {
        /* Protected: the stored answer, byte for byte (no new DH). */
        memcpy(buf, r->hello_ack, r->hello_ack_len);
        *dg = (aftp_datagram){.head = buf, .head_len = r->hello_ack_len};
        aftp_session_resent(&r->ss, dg);
        r->hello_ack_due = 0;
        r->hello_ack_sent_ns = r->ss.now_ns;
        return AFTP_OK;
    }
    aftp_wire_packet p;
    uint8_t ext[HELLO_ACK_EXT_MAX];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    int rc = put_ack_extensions(r, &w); /* unprotected: unauthenticated, as all else */
    if (rc != AFTP_OK)
        return rc;
    aftp_session_packet(&r->ss, AFTP_WIRE_HELLO_ACK, &p);
    p.u.hello_ack.server_conn_id = r->ss.local_id;
    p.u.hello_ack.cipher = AFTP_WIRE_CIPHER_NONE;
    p.u.hello_ack.max_datagram = r->ss.max_datagram;
    p.u.hello_ack.ext = ext;
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    r->hello_ack_due = 0;
    r->hello_ack_sent_ns = r->ss.now_ns;
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

static int encode_reply(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_FILE_REPLY, &p);
    p.u.file_reply.file_id = r->info.file_id;
    p.u.file_reply.error = r->reply_error;
    r->reply_due = 0;
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

static int encode_file_result(aftp_receiver *r, uint32_t file_id, uint16_t wire_error,
                              const uint8_t *digest, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_FILE_RESULT, &p);
    p.u.file_result.file_id = file_id;
    p.u.file_result.error = wire_error;
    memcpy(p.u.file_result.digest, digest, AFTP_DIGEST_LEN);
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

/* One-file mode: resent on the control timer until the next offer. */
static int encode_result(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    r->result_due = 0;
    r->result_sent = 1;
    r->resend_deadline = r->ss.now_ns + aftp_rtt_pto_backoff(&r->rtt, r->backoff);
    return encode_file_result(r, r->info.file_id, r->result_error, r->result_digest, buf, cap,
                              dg);
}

/* Fills r->ranges with the missing ranges of [scan_start, *scan_end) that
 * fit in one datagram; cuts *scan_end at the first range left out (spec
 * section 6.7.3). */
static uint16_t collect_ranges(aftp_receiver *r, uint64_t scan_start, uint64_t *scan_end)
{
    size_t budget = r->ss.max_datagram - FEEDBACK_HEAD - aftp_session_overhead(&r->ss);
    size_t n = 0;
    uint64_t next_min = scan_start, pos = scan_start;
    for (;;) {
        uint64_t start = aftp_blockmap_next_clear(&r->held, pos, *scan_end);
        if (start >= *scan_end)
            break;
        uint64_t end = aftp_blockmap_next_set(&r->held, start, *scan_end);
        size_t cost = aftp_wire_varint_len(start - next_min) + aftp_wire_varint_len(end - start - 1);
        if (n == r->max_ranges || cost > budget) {
            *scan_end = start;
            break;
        }
        r->ranges[n++] = (aftp_wire_range){.start = start, .len = end - start};
        budget -= cost;
        next_min = end + 1;
        pos = end;
    }
    return (uint16_t)n;
}

/* Spec section 9.8: each FEEDBACK lists what fits from the scan cursor on
 * and the next one continues where it was cut, so successive FEEDBACKs
 * sweep the whole outstanding area instead of repeating its head (whose
 * repairs are usually in flight already); a sweep that reached the end of
 * the area starts again from cum_block. Sets scan_start, scan_end and the
 * ranges of f (cum_block already set). */
static void fill_scan_window(aftp_receiver *r, aftp_wire_feedback *f)
{
    /* After FILE_DONE the receiver knows the end: the tail is reported
     * too (pipelined: the end of the highest entry whose FILE_DONE came). */
    uint64_t area_end = r->done_received ? r->block_count : r->scan_hi;
    if (r->window != 0)
        area_end = r->done_end > r->scan_hi ? r->done_end : r->scan_hi;
    if (area_end < f->cum_block)
        area_end = f->cum_block;
    f->scan_start = r->scan_cursor;
    if (f->scan_start < f->cum_block || f->scan_start >= area_end)
        f->scan_start = f->cum_block;
    f->scan_end = area_end;
    f->range_count = collect_ranges(r, f->scan_start, &f->scan_end);
    f->ranges = r->ranges;
    r->scan_cursor = f->scan_end < area_end ? f->scan_end : f->cum_block;
}

static int encode_feedback(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_FEEDBACK, &p);
    aftp_wire_feedback *f = &p.u.feedback;
    f->file_id = r->window != 0 ? 0 : r->info.file_id; /* 9.14.2: 0, the stream */
    f->largest_pn = r->largest_pn;
    f->ack_delay_us = (uint32_t)min_u64((r->ss.now_ns - r->largest_pn_ns) / 1000, UINT32_MAX);
    f->recv_time_us = r->ss.now_ns / 1000;
    f->packets_received = r->data_packets;
    f->blocks_received = aftp_blockmap_count(&r->held);
    f->cum_block = aftp_blockmap_first_clear(&r->held);
    fill_scan_window(r, f);
    stop_feedback(r);
    r->feedback_sent = 1;
    r->last_feedback_ns = r->ss.now_ns;
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

enum output_kind {
    OUT_NONE, OUT_CLOSE, OUT_HELLO_ACK, OUT_REPLY, OUT_RESULT, OUT_VERDICTS, OUT_PIPE_RESULT,
    OUT_FEEDBACK
};

/* Section 14.3: before the client proved its address, at most 3x its bytes. */
static int within_amplification_limit(const aftp_receiver *r)
{
    return r->confirmed || r->ss.stats.wire_bytes_sent + PRECONFIRM_MAX_LEN <=
                               AMPLIFICATION_FACTOR * r->ss.stats.wire_bytes_received;
}

static int next_output(const aftp_receiver *r)
{
    if (r->ss.state == AFTP_STATE_CLOSED)
        return r->ss.close_due ? OUT_CLOSE : OUT_NONE; /* answering the peer's CLOSE */
    if (!within_amplification_limit(r))
        return OUT_NONE;
    if (r->ss.close_due)
        return OUT_CLOSE;
    if (r->ss.state == AFTP_STATE_CLOSING)
        return OUT_NONE;
    if (r->hello_ack_due)
        return OUT_HELLO_ACK;
    if (r->reply_due)
        return OUT_REPLY;
    if (r->result_due)
        return OUT_RESULT;
    if (r->window != 0 && pipe_verdicts_due(r))
        return OUT_VERDICTS;
    if (r->window != 0 && r->results_len > 0)
        return OUT_PIPE_RESULT;
    if (r->feedback_due && (r->phase == FILE_OPEN || r->window != 0))
        return OUT_FEEDBACK;
    return OUT_NONE;
}

static int emit(aftp_receiver *r, int kind, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    switch (kind) {
    case OUT_CLOSE: return aftp_session_encode_close(&r->ss, buf, cap, dg);
    case OUT_HELLO_ACK: return encode_hello_ack(r, buf, cap, dg);
    case OUT_REPLY: return encode_reply(r, buf, cap, dg);
    case OUT_RESULT: return encode_result(r, buf, cap, dg);
    case OUT_VERDICTS: return encode_verdicts(r, buf, cap, dg);
    case OUT_PIPE_RESULT: return encode_pipe_result(r, buf, cap, dg);
    default: return encode_feedback(r, buf, cap, dg);
    }
}

int aftp_receiver_write(aftp_receiver *r, uint64_t now_ns, uint8_t *buf, size_t cap,
                        aftp_datagram *dg)
{
    if (r == NULL || buf == NULL || dg == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cap < r->ss.own_max_datagram)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    aftp_session_tick(&r->ss, now_ns);
    if (r->window != 0)
        pipe_prune(r);
    int kind = next_output(r);
    if (kind == OUT_NONE)
        return 0;
    int rc = emit(r, kind, buf, cap, dg);
    return rc == AFTP_OK ? 1 : rc;
}

/* ---- timers ---- */

uint64_t aftp_receiver_expiry(const aftp_receiver *r)
{
    if (r == NULL || r->ss.state == AFTP_STATE_CLOSED)
        return AFTP_NO_EXPIRY;
    uint64_t t = aftp_session_expiry(&r->ss);
    if (r->feedback_armed)
        t = min_u64(t, r->feedback_deadline);
    if (verify_due(r))
        t = min_u64(t, r->ss.now_ns); /* the next read-back step is due */
    return min_u64(pipe_expiry(r, t), r->resend_deadline);
}

int aftp_receiver_handle_expiry(aftp_receiver *r, uint64_t now_ns)
{
    if (r == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&r->ss, now_ns);
    switch (aftp_session_timer_due(&r->ss, r->ss.now_ns)) {
    case AFTP_SESSION_TIMER_DRAINED:
        close_now(r, r->ss.error);
        return r->ss.error;
    case AFTP_SESSION_TIMER_IDLE:
        aftp_session_set_text(&r->ss, "the sender stopped answering");
        close_now(r, AFTP_ERR_IDLE_TIMEOUT); /* section 9.12: no CLOSE */
        return AFTP_ERR_IDLE_TIMEOUT;
    default: break;
    }
    if (r->feedback_armed && r->ss.now_ns >= r->feedback_deadline) {
        r->feedback_armed = 0;
        r->feedback_due = 1;
    }
    if (r->ss.now_ns >= r->resend_deadline) {
        r->backoff++;
        r->resend_deadline = AFTP_NO_EXPIRY;
        r->result_due = r->ss.state == AFTP_STATE_TRANSFER && r->phase == FILE_ENDED;
    }
    if (verify_due(r))
        verify_step(r);
    pipe_handle_expiry(r);
    return AFTP_OK;
}

/* ---- queries ---- */

int aftp_receiver_state(const aftp_receiver *r)
{
    return r ? r->ss.state : AFTP_STATE_CLOSED;
}

int aftp_receiver_error(const aftp_receiver *r)
{
    return r ? r->ss.error : AFTP_ERR_INVALID_ARGUMENT;
}

void aftp_receiver_get_stats(const aftp_receiver *r, aftp_stats *out)
{
    if (r == NULL || out == NULL)
        return;
    aftp_session_stats(&r->ss, &r->rtt, out);
    out->rate_cap_bps = r->rate_cap_bps;
}

void aftp_receiver_cancel(aftp_receiver *r, uint64_t now_ns)
{
    if (r == NULL || r->ss.state == AFTP_STATE_CLOSING || r->ss.state == AFTP_STATE_CLOSED)
        return;
    aftp_session_tick(&r->ss, now_ns);
    start_closing(r, AFTP_ERR_CANCELLED, AFTP_WIRE_ERR_CANCELLED); /* section 9.13 */
}
