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
 *
 * A session that negotiated PIPELINE (spec 12.3.2) runs pipelined mode,
 * in aftp_receiver_pipe.c, over the same session, handshake, block map,
 * FEEDBACK and output machinery. As the client of a pull (spec 9.15,
 * settings.role AFTP_ROLE_PULL) the receiver sends the HELLO and its
 * request (aftp_receiver_pull.c) and is then that pipelined receiver.
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
#include "common/aftp_hello_server.h"
#include "common/aftp_rtt.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"
#include "receiver/aftp_receiver_internal.h"

#define DEFAULT_IDLE_NS (UINT64_C(30000) * NS_PER_MS)
#define DEFAULT_FEEDBACK_NS (10 * NS_PER_MS)
#define DEFAULT_INITIAL_RTT_NS (100 * NS_PER_MS)
#define FEEDBACK_HEAD (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED)

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
           (s->role == AFTP_ROLE_PUSH ||
            (s->role == AFTP_ROLE_PULL && s->pipeline_window > 0 && s->storage != NULL &&
             s->storage->entry != NULL)) &&
           s->storage != NULL && s->storage->view != NULL && s->storage->open != NULL &&
           s->storage->write != NULL && s->storage->close != NULL;
}

int aftp_receiver_new(const aftp_receiver_settings *settings, uint64_t now_ns,
                      aftp_receiver **out)
{
    if (!settings_valid(settings) || out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = aftp_session_check_security(&settings->security, settings->role == AFTP_ROLE_PULL);
    if (rc != AFTP_OK)
        return rc;
    aftp_receiver *r = calloc(1, sizeof *r);
    if (r == NULL)
        return AFTP_ERR_NO_MEMORY;
    r->set = *settings;
    rc = aftp_session_init(&r->ss, settings->conn_id, settings->max_datagram,
                           settings->idle_timeout_ns, settings->on_event, settings->user, now_ns);
    r->ss.peer_role = "sender";
    r->client = settings->role == AFTP_ROLE_PULL;
    if (rc == AFTP_OK && r->client)
        rc = aftp_rpull_init(r);
    else if (rc == AFTP_OK)
        rc = aftp_hello_server_init(&r->srv, &r->set.security, AFTP_WIRE_ROLE_PUSH,
                                    settings->storage->entry != NULL ? settings->pipeline_window
                                                                     : 0);
    aftp_rtt_init(&r->rtt, settings->initial_rtt_ns);
    r->resend_deadline = AFTP_NO_EXPIRY;
    r->cap_deadline = AFTP_NO_EXPIRY;
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
    aftp_rpipe_free(r);
    aftp_blockmap_free(&r->held);
    aftp_digest_del(r->hash);
    free(r->ranges);
    free(r->path);
    aftp_hello_server_free(&r->srv);
    aftp_rpull_free(r);
    aftp_session_free(&r->ss);
    free(r);
}

/* ---- timers ---- */

static uint64_t drain_time(const aftp_receiver *r)
{
    return 3 * aftp_rtt_pto(&r->rtt);
}

/* ~RTT/4 once the handshake measured the RTT, within [1 ms, setting]. */
uint64_t aftp_recv_feedback_interval(const aftp_receiver *r)
{
    uint64_t t = r->rtt.has_sample ? r->rtt.smoothed / 4 : r->set.feedback_interval_ns;
    t = min_u64(t, r->set.feedback_interval_ns);
    return t < MIN_FEEDBACK_NS ? MIN_FEEDBACK_NS : t;
}

/* FEEDBACK no earlier than `earliest` after the previous one; the first
 * of a file leaves at once (the sender's first RTT sample). */
void aftp_recv_schedule_feedback(aftp_receiver *r, uint64_t earliest)
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
    if (aftp_blockmap_bytes(&r->held) > r->ss.stats.map_bytes) /* as far as it grew */
        r->ss.stats.map_bytes = aftp_blockmap_bytes(&r->held);
    aftp_blockmap_free(&r->held);
    aftp_session_event(&r->ss, AFTP_EV_FILE_END, error, &r->info, digest);
}

/* Session over: an open file is discarded (sections 9.11-9.13). */
void aftp_recv_close_now(aftp_receiver *r, int error)
{
    if (r->phase == FILE_OPEN)
        end_file(r, error, NULL);
    aftp_rpipe_close_all(r, error);
    r->result_due = 0;
    r->resend_deadline = AFTP_NO_EXPIRY;
    aftp_session_set_closed(&r->ss, error);
}

void aftp_recv_start_closing(aftp_receiver *r, int error, uint16_t wire_error)
{
    if (r->phase == FILE_OPEN)
        end_file(r, error, NULL);
    aftp_rpipe_close_all(r, error);
    r->result_due = 0;
    r->resend_deadline = AFTP_NO_EXPIRY;
    aftp_session_start_closing(&r->ss, error, wire_error, drain_time(r));
}

/* The peer broke the protocol (a HELLO refused, section 9.3, or an offer
 * against the rules of 9.6): CLOSE(PROTOCOL, reason). */
void aftp_recv_close_protocol(aftp_receiver *r, const char *reason)
{
    aftp_session_set_text(&r->ss, reason);
    aftp_recv_start_closing(r, AFTP_ERR_MALFORMED, AFTP_WIRE_ERR_PROTOCOL);
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

int aftp_recv_hash_stored(aftp_receiver *r, uint32_t file_id, aftp_digest *d, uint64_t *done,
                          uint64_t end)
{
    while (*done < end) {
        const uint8_t *p = NULL;
        size_t len = (size_t)min_u64(VERIFY_CHUNK, end - *done);
        int rc = r->set.storage->view(r->set.user, file_id, *done, len, &p);
        if (rc != AFTP_OK)
            return rc;
        aftp_digest_update(d, p, len);
        *done += len;
    }
    return AFTP_OK;
}

static void verify_step(aftp_receiver *r)
{
    uint64_t end = min_u64(held_prefix_bytes(r), r->verified + AFTP_RECEIVER_VERIFY_STEP);
    int rc = aftp_recv_hash_stored(r, r->info.file_id, r->hash, &r->verified, end);
    if (rc != AFTP_OK) {
        end_file(r, rc, NULL);
        return;
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
int aftp_recv_check_block_size(aftp_receiver *r, uint32_t block_size)
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
    int rc = aftp_recv_check_block_size(r, o->block_size);
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
    uint32_t prev_id = r->info.file_id;
    int prev_phase = r->phase, prev_result_sent = r->result_sent;
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
    if (rc == AFTP_STORAGE_WAIT) { /* another writer holds the file: asked again at the resent
                                    * offer, as if this one had not come */
        r->info.file_id = prev_id;
        r->phase = prev_phase;
        r->result_sent = prev_result_sent;
        aftp_session_drop(&r->ss);
        return;
    }
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
        aftp_recv_close_protocol(r, "the sender offered file id 0, which is reserved");
    else if (o->file_id < last_id || (o->file_id == last_id && r->result_sent))
        aftp_session_drop(&r->ss);
    else if (o->file_id == last_id)
        r->reply_due = 1; /* no reopening */
    else if (r->phase == FILE_OPEN)
        aftp_recv_close_protocol(r, "the sender offered a new file before the open one ended");
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
    aftp_recv_schedule_feedback(r, aftp_recv_feedback_interval(r));
    return 0;
}

/* Section 9.5: a wanted block is written at file_offset and held from
 * now on. 1 when stored, 0 when not wanted (a duplicate, beyond the
 * window), or storage's error. */
int aftp_recv_store_block(aftp_receiver *r, const aftp_wire_data *d, uint64_t file_offset)
{
    if (!block_wanted(r, d->block))
        return 0;
    aftp_recv_schedule_feedback(r, aftp_recv_feedback_interval(r));
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
    int rc = aftp_recv_store_block(r, d, d->block * r->info.block_size);
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
        aftp_recv_schedule_feedback(r, MIN_FEEDBACK_NS);
        return;
    }
    memcpy(r->expected, d->digest, AFTP_DIGEST_LEN);
    r->done_received = 1;
    if (d->block_count != r->block_count)
        end_file(r, AFTP_ERR_DIGEST_MISMATCH, NULL);
    else if (all_blocks_held(r))
        start_verification(r);
    else
        aftp_recv_schedule_feedback(r, MIN_FEEDBACK_NS); /* section 9.8: report the tail at once */
}

int aftp_recv_peer_close_error(aftp_receiver *r, const aftp_wire_close *c)
{
    return aftp_session_peer_close(&r->ss, c, r->phase == FILE_OPEN || aftp_rpipe_in_progress(r));
}

static void on_close(aftp_receiver *r, const aftp_wire_close *c)
{
    aftp_recv_close_now(r, aftp_recv_peer_close_error(r, c));
    aftp_session_answer_close(&r->ss);
}

/* Sections 9.3, 14.2: the client's HELLO; an admitted client gets the
 * session's pipelined state (or a one-file session when there is no
 * memory for it) and its HELLO_ACK. */
static void on_hello(aftp_receiver *r, const aftp_wire_packet *p)
{
    if (aftp_hello_server_hello(&r->srv, &r->ss, p, drain_time(r)) != AFTP_HELLO_ADMITTED)
        return;
    r->window = r->srv.window;
    if (r->window != 0 && aftp_rpipe_init(r) != AFTP_OK)
        r->window = r->srv.window = 0;
    aftp_wire_entries early;
    r->srv.early_taken = aftp_hello_server_early(&r->srv, &early) == AFTP_OK;
    if (aftp_hello_server_answer(&r->srv, &r->ss) == AFTP_OK && r->srv.early_taken)
        aftp_rpipe_on_early_entries(r, &early);
}

/* Section 9.14: a pipelined session's input; FILE_OFFER has no place in it. */
static void dispatch_pipelined(aftp_receiver *r, const aftp_wire_packet *p)
{
    switch (p->hdr.type) {
    case AFTP_WIRE_ENTRIES: aftp_rpipe_on_entries(r, &p->u.entries); break;
    case AFTP_WIRE_DATA: aftp_rpipe_on_data(r, &p->u.data); break;
    case AFTP_WIRE_FILE_DONE: aftp_rpipe_on_file_done(r, &p->u.file_done); break;
    case AFTP_WIRE_ABANDON: aftp_rpipe_on_abandon(r, &p->u.abandon); break;
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
    if (type == AFTP_WIRE_ENTRIES || type == AFTP_WIRE_ABANDON)
        return r->window != 0; /* section 12.4: only in a pipelined session */
    return type == AFTP_WIRE_HELLO || type == AFTP_WIRE_FILE_OFFER || type == AFTP_WIRE_DATA ||
           type == AFTP_WIRE_FILE_DONE || type == AFTP_WIRE_CLOSE;
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
        return aftp_rpipe_data_entry(r, file_id, block, payload_len) != NULL;
    return r->phase == FILE_OPEN && file_id == r->info.file_id && block < r->block_count &&
           payload_len == aftp_wire_block_len(r->info.size, r->info.block_size, block);
}

/* Section 9.2 step 7. A sealed DATA for a held block is a copy the path
 * duplicated when its packet number was already accepted: counted and
 * dropped before decryption. Under a fresh number it is the sender's
 * retransmission of a block whose original arrived after all (a reordered
 * packet taken for lost): it is opened (into scratch, never into the held
 * bytes) and accepted, so its packet number is acknowledged and it counts
 * as delivered. Dropped unopened, it would stay in the sender's flight for
 * good: a flight of nothing but such repairs fills the sender's inflight
 * cap, and with every block held no probe is due, so the session would go
 * silent until the idle timeout. */
static int sealed_data_wanted(aftp_receiver *r, const uint8_t *pkt, size_t len,
                              const aftp_wire_header *hdr, uint32_t *file_id_out,
                              uint64_t *block_out)
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
    *file_id_out = file_id;
    *block_out = block;
    /* A block beyond the window is not held: opened, then on_data's, as a
     * held block under a fresh packet number is. */
    if (aftp_blockmap_test(&r->held, block) &&
        aftp_protect_check(&r->ss.prot, hdr->pn) != AFTP_OK)
        return block_wanted(r, block);
    return 1;
}

/* Where the payload of a wanted sealed DATA for `block` can be opened in
 * place: the bytes storage lends for it, or NULL (then it opens into
 * scratch and goes through storage.write; a block beyond the window, to
 * be discarded, always does, and so does a retransmission of a held
 * block, whose bytes are never written over). */
static uint8_t *payload_place(aftp_receiver *r, uint32_t file_id, uint64_t block)
{
    uint8_t *place = NULL;
    const aftp_file_info *f = &r->info;
    uint64_t file_block = block;
    if (r->window != 0) {
        const pipe_entry *p = aftp_rpipe_slot(r, file_id); /* admitted by sealed_data_wanted */
        f = &p->info.file;
        file_block = block - p->base;
    }
    if (r->set.storage->place == NULL || block >= aftp_blockmap_window_end(&r->held) ||
        aftp_blockmap_test(&r->held, block) ||
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
static int admit(aftp_receiver *r, const uint8_t *pkt, size_t len, aftp_wire_packet *p,
                 int *wrong_role)
{
    aftp_wire_header hdr;
    uint32_t file_id = 0;
    uint64_t block = 0;
    int sealed_data = 0;
    if (aftp_session_peek(&r->ss, pkt, len, &hdr) != AFTP_OK)
        return 0;
    /* The client of a pull opens, once its handshake is complete, a type
     * the server never sends: once it is the server's, it is a protocol
     * violation (spec 9.15.3). */
    *wrong_role = r->client && !aftp_rpull_receives(r, hdr.type);
    int wanted = r->client ? (!*wrong_role || r->ss.state != AFTP_STATE_HANDSHAKE) &&
                                 hdr.conn_id == r->ss.local_id
                           : server_receives(r, hdr.type) &&
                                 aftp_hello_server_addressed(&r->srv, &r->ss, &hdr);
    if (!wanted) {
        aftp_session_drop(&r->ss);
        return 0;
    }
    /* Before the replay check, so a DATA the path duplicated counts as a
     * duplicate like any other copy of a held block. */
    if (hdr.type == AFTP_WIRE_DATA && aftp_session_protected(&r->ss) &&
        (hdr.flags & AFTP_WIRE_FLAG_PROTECTED)) {
        if (!sealed_data_wanted(r, pkt, len, &hdr, &file_id, &block))
            return 0;
        sealed_data = 1;
    }
    if (aftp_session_precheck(&r->ss, &hdr) != AFTP_OK)
        return 0;
    uint8_t *place = sealed_data ? payload_place(r, file_id, block) : NULL;
    if (place != NULL)
        return aftp_session_open_data(&r->ss, pkt, len, &hdr, place, p) == AFTP_OK;
    return aftp_session_open(&r->ss, pkt, len, &hdr, p) == AFTP_OK;
}

int aftp_receiver_read(aftp_receiver *r, uint64_t now_ns, const uint8_t *pkt, size_t len)
{
    aftp_wire_packet p;
    int wrong_role = 0;
    char why[128];
    if (r == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&r->ss, now_ns);
    if (r->ss.state == AFTP_STATE_CLOSED)
        return AFTP_OK;
    if (!admit(r, pkt, len, &p, &wrong_role))
        return AFTP_OK;
    aftp_session_heard(&r->ss, r->ss.now_ns, len);
    if (!r->has_largest || p.hdr.pn > r->largest_pn) {
        r->has_largest = 1;
        r->largest_pn = p.hdr.pn;
        r->largest_pn_ns = r->ss.now_ns;
    }
    if (r->ss.state == AFTP_STATE_CLOSING) {
        if (p.hdr.type == AFTP_WIRE_CLOSE)
            aftp_recv_close_now(r, r->ss.error);
        else
            r->ss.close_due = 1;
        return AFTP_OK;
    }
    if (wrong_role && r->ss.state == AFTP_STATE_TRANSFER) {
        snprintf(why, sizeof why, "the server sent a %s, which a pull's server never sends "
                 "(spec 9.15.3)", aftp_wire_type_name(p.hdr.type));
        aftp_recv_close_protocol(r, why);
    } else if (r->client) {
        if (!aftp_rpull_on_packet(r, &p))
            dispatch(r, &p);
    } else if (p.hdr.type == AFTP_WIRE_HELLO)
        on_hello(r, &p);
    else {
        aftp_hello_server_confirm(&r->srv, &r->ss, &r->rtt);
        dispatch(r, &p);
    }
    return aftp_session_failure(&r->ss);
}

/* ---- output ---- */

static int encode_reply(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_FILE_REPLY, &p);
    p.u.file_reply.file_id = r->info.file_id;
    p.u.file_reply.error = r->reply_error;
    r->reply_due = 0;
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

int aftp_recv_encode_file_result(aftp_receiver *r, uint32_t file_id, uint16_t wire_error,
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
    return aftp_recv_encode_file_result(r, r->info.file_id, r->result_error, r->result_digest, buf, cap,
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

/* Section 9.8: once a FILE_DONE told the end, and no block beyond it
 * arrived (pipelined: no block of a later entry, which the sender sends
 * after the FILE_DONE of the entries before), the tail is reported again
 * every feedback interval while blocks below the end are missing and the
 * sender was heard within a PTO. The sender may call a tail block lost
 * only a loss delay (9/8 of its RTT) after it left, and with no DATA
 * coming after the last block nothing else draws a FEEDBACK: the one
 * report at FILE_DONE reached it a round trip after the block left, too
 * early, and the loss waited for the sender's control timer. */
static void keep_reporting_tail(aftp_receiver *r, uint64_t cum_block)
{
    uint64_t end = r->window != 0 ? r->done_end : r->done_received ? r->block_count : 0;
    if (cum_block < end && r->scan_hi <= end &&
        r->ss.now_ns - r->largest_pn_ns < aftp_rtt_pto(&r->rtt))
        aftp_recv_schedule_feedback(r, aftp_recv_feedback_interval(r));
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
    keep_reporting_tail(r, f->cum_block);
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

/* Section 6.18: the current cap, repeated until the session ends. */
static int encode_rate_update(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_RATE_UPDATE, &p);
    p.u.rate_update = (aftp_wire_rate_update){.seq = r->cap_seq, .cap_bps = r->cap_bps};
    r->cap_due = 0;
    r->cap_deadline = r->ss.now_ns + RATE_UPDATE_REPEAT_NS;
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

enum output_kind {
    OUT_NONE, OUT_CLOSE, OUT_HELLO_ACK, OUT_REPLY, OUT_RESULT, OUT_VERDICTS, OUT_PIPE_RESULT,
    OUT_FEEDBACK, OUT_PULL, OUT_RATE_UPDATE, OUT_CLOSE_RESULT
};

static int next_output(const aftp_receiver *r)
{
    if (r->ss.state == AFTP_STATE_CLOSED)
        return r->ss.close_due ? OUT_CLOSE : OUT_NONE; /* answering the peer's CLOSE */
    if (!r->client && !aftp_hello_server_may_send(&r->srv, &r->ss))
        return OUT_NONE;
    if (r->ss.close_due && r->close_result_next < r->close_result_count)
        return OUT_CLOSE_RESULT; /* a pull client's quick close (9.11) */
    if (r->ss.close_due)
        return OUT_CLOSE;
    if (r->ss.state == AFTP_STATE_CLOSING)
        return OUT_NONE;
    if (r->srv.ack_due)
        return OUT_HELLO_ACK;
    /* Once the client confirmed the handshake: before, it could not open it. */
    if (r->cap_due && r->ss.state == AFTP_STATE_TRANSFER)
        return OUT_RATE_UPDATE;
    if (r->client && aftp_rpull_due(r) != 0)
        return OUT_PULL;
    if (r->reply_due)
        return OUT_REPLY;
    if (r->result_due)
        return OUT_RESULT;
    if (r->window != 0 && aftp_rpipe_verdicts_due(r))
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
    case OUT_CLOSE:
        r->close_result_next = 0; /* the next copy goes with them again */
        return aftp_session_encode_close(&r->ss, buf, cap, dg);
    case OUT_CLOSE_RESULT: return aftp_rpipe_encode_close_result(r, buf, cap, dg);
    case OUT_HELLO_ACK: return aftp_hello_server_encode(&r->srv, &r->ss, buf, cap, dg);
    case OUT_REPLY: return encode_reply(r, buf, cap, dg);
    case OUT_RESULT: return encode_result(r, buf, cap, dg);
    case OUT_VERDICTS: return aftp_rpipe_encode_verdicts(r, buf, cap, dg);
    case OUT_PIPE_RESULT: return aftp_rpipe_encode_result(r, buf, cap, dg);
    case OUT_PULL: return aftp_rpull_encode(r, aftp_rpull_due(r), buf, cap, dg);
    case OUT_RATE_UPDATE: return encode_rate_update(r, buf, cap, dg);
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
        aftp_rpipe_prune(r);
    if (r->client)
        aftp_rpull_check_end(r);
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
    if (r->client)
        t = aftp_rpull_expiry(r, t);
    t = min_u64(t, r->cap_deadline);
    return min_u64(aftp_rpipe_expiry(r, t), r->resend_deadline);
}

int aftp_receiver_handle_expiry(aftp_receiver *r, uint64_t now_ns)
{
    if (r == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&r->ss, now_ns);
    aftp_rpipe_hold_idle(r);
    switch (aftp_session_timer_due(&r->ss, r->ss.now_ns)) {
    case AFTP_SESSION_TIMER_DRAINED:
        aftp_recv_close_now(r, r->ss.error);
        return r->ss.error;
    case AFTP_SESSION_TIMER_IDLE:
        aftp_session_set_text(&r->ss, r->ss.state == AFTP_STATE_HANDSHAKE && r->client
                                          ? "no answer from the server"
                                          : "the sender stopped answering");
        aftp_recv_close_now(r, AFTP_ERR_IDLE_TIMEOUT); /* section 9.12: no CLOSE */
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
    if (r->ss.now_ns >= r->cap_deadline) {
        r->cap_deadline = AFTP_NO_EXPIRY;
        r->cap_due = 1;
    }
    if (verify_due(r))
        verify_step(r);
    aftp_rpipe_handle_expiry(r);
    if (r->client)
        aftp_rpull_handle_expiry(r);
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
    out->rate_cap_bps = r->cap_bps != 0 ? r->cap_bps : r->srv.rate_cap_bps;
    if (aftp_blockmap_bytes(&r->held) > out->map_bytes) /* the open map grows */
        out->map_bytes = aftp_blockmap_bytes(&r->held);
}

int aftp_receiver_commit_done(aftp_receiver *r, uint64_t now_ns, int rc, const int *results)
{
    if (r == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&r->ss, now_ns);
    return aftp_rpipe_commit_done(r, rc, results);
}

int aftp_receiver_set_rate_cap(aftp_receiver *r, uint64_t cap_bps, uint64_t now_ns)
{
    if (r == NULL || cap_bps == 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    /* Section 12.3.1: only a client that announced RATE_CAP was capped. */
    if (r->client || r->srv.rate_cap_bps == 0)
        return AFTP_ERR_INVALID_STATE;
    uint64_t in_force = r->cap_bps != 0 ? r->cap_bps : r->srv.rate_cap_bps;
    if (cap_bps == in_force)
        return AFTP_OK;
    aftp_session_tick(&r->ss, now_ns);
    r->cap_bps = cap_bps;
    r->cap_seq++;
    r->cap_due = 1;
    r->cap_deadline = AFTP_NO_EXPIRY;
    return AFTP_OK;
}

int aftp_receiver_abort(aftp_receiver *r, uint64_t now_ns, int error, const char *reason)
{
    if (r == NULL || error >= AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (r->ss.state == AFTP_STATE_CLOSING || r->ss.state == AFTP_STATE_CLOSED)
        return AFTP_OK;
    aftp_session_tick(&r->ss, now_ns);
    if (reason != NULL)
        aftp_session_set_text(&r->ss, reason);
    if (r->client && r->ss.state == AFTP_STATE_HANDSHAKE)
        aftp_recv_close_now(r, error); /* section 9.13: no server id to tell */
    else
        aftp_recv_start_closing(r, error, aftp_errmap_to_wire(error));
    return AFTP_OK;
}

void aftp_receiver_cancel(aftp_receiver *r, uint64_t now_ns)
{
    aftp_receiver_abort(r, now_ns, AFTP_ERR_CANCELLED, NULL); /* section 9.13 */
}
