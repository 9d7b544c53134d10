/*
 * The receiver engine's pipelined mode (spec section 9.14).
 *
 * Many entries at once over one session stream. What the engine keeps per
 * entry lives in a ring of W slots parallel to the entry table (entry id i
 * in slot i mod W): a slot keeps an ended entry's verdict or FILE_RESULT
 * for repeats until entry i + W takes it, which can only happen once the
 * sender's window moved past i (spec 9.14.3). Bounded state: W slots (a
 * path and a link target each, at most 4096 + 4096 bytes), W queued
 * FILE_RESULTs, W files waiting for the group commit, one block map over
 * the stream (its memory fixed by map_window_blocks), and one file read
 * back at a time, plus the held prefix of one file still arriving.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aftp_errmap.h"
#include "receiver/aftp_receiver_internal.h"

/* The slot table's first size: 64 entries (16 KiB). */
#define PIPE_FIRST_SLOTS 64u

pipe_entry *aftp_rpipe_slot(const aftp_receiver *r, uint32_t id)
{
    if (id % r->window >= r->pe_cap)
        return NULL; /* a slot never used */
    pipe_entry *p = &r->pe[id % r->window];
    return id != 0 && p->id == id ? p : NULL;
}

/* The slot table reaches `slot`: doubled (up to W), its new slots empty. */
static int pipe_reach(aftp_receiver *r, uint32_t slot)
{
    if (slot < r->pe_cap)
        return AFTP_OK;
    uint32_t cap = r->pe_cap;
    while (cap <= slot)
        cap *= 2;
    cap = cap < r->window ? cap : r->window;
    pipe_entry *grown = realloc(r->pe, cap * sizeof *grown);
    if (grown == NULL)
        return AFTP_ERR_NO_MEMORY;
    memset(grown + r->pe_cap, 0, (cap - r->pe_cap) * sizeof *grown);
    r->pe = grown;
    r->pe_cap = cap;
    return AFTP_OK;
}

static void pipe_release(pipe_entry *p)
{
    free(p->path);
    free(p->holes);
    free(p->hole_bytes);
}

void aftp_rpipe_free(aftp_receiver *r)
{
    for (uint32_t i = 0; r->pe != NULL && i < r->pe_cap; i++)
        pipe_release(&r->pe[i]);
    free(r->pe);
    free(r->results);
    free(r->group);
    free(r->group_results);
    free(r->flight);
    free(r->vrecs);
    free(r->vranges);
    aftp_digest_del(r->prefix_hash);
    r->prefix_hash = NULL;
    aftp_stream_free(&r->stream);
    r->pe = NULL;
    r->pe_cap = 0;
}

/* Room for one VERDICTS: as many records and held ranges as a datagram
 * can carry. */
static size_t verdict_budget(const aftp_receiver *r)
{
    return r->ss.max_datagram - AFTP_WIRE_HEADER_LEN - 2 - aftp_session_overhead(&r->ss);
}

int aftp_rpipe_init(aftp_receiver *r)
{
    uint32_t w = r->window;
    r->max_vrecs = r->ss.max_datagram / AFTP_WIRE_VERDICT_FIXED;
    if (r->max_vrecs > AFTP_WIRE_MAX_VERDICTS)
        r->max_vrecs = AFTP_WIRE_MAX_VERDICTS;
    r->max_vranges = r->ss.max_datagram / 2u;
    int rc = aftp_stream_init(&r->stream, w);
    r->pe_cap = w < PIPE_FIRST_SLOTS ? w : PIPE_FIRST_SLOTS;
    r->pe = calloc(r->pe_cap, sizeof *r->pe);
    r->results = calloc(w, sizeof *r->results);
    r->group = calloc(w, sizeof *r->group);
    r->group_results = calloc(w, sizeof *r->group_results);
    r->flight = calloc(w, sizeof *r->flight);
    r->vrecs = calloc(r->max_vrecs, sizeof *r->vrecs);
    r->vranges = calloc(r->max_vranges, sizeof *r->vranges);
    if (rc == AFTP_OK)
        rc = aftp_digest_new(&r->prefix_hash);
    if (rc == AFTP_OK && (r->pe == NULL || r->results == NULL || r->group == NULL ||
                          r->flight == NULL || r->group_results == NULL || r->vrecs == NULL || r->vranges == NULL))
        rc = AFTP_ERR_NO_MEMORY;
    if (rc == AFTP_OK)
        rc = aftp_blockmap_init(&r->held, AFTP_WIRE_MAX_BLOCKS, r->set.map_window_blocks);
    if (rc == AFTP_OK && aftp_blockmap_bytes(&r->held) > r->ss.stats.map_bytes)
        r->ss.stats.map_bytes = aftp_blockmap_bytes(&r->held);
    r->decide_next = r->verdicts_from = r->prefix_next = 1;
    r->repeat_lo = 1;
    r->repeat_hi = 0;
    if (rc != AFTP_OK)
        aftp_rpipe_free(r);
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

/* A FILE's hole list (flag HOLES), decoded: blocks for the engine,
 * bytes for storage. At most AFTP_WIRE_MAX_HOLES, as the decoder checked. */
static int pipe_keep_holes(pipe_entry *p, const aftp_wire_entry *e)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    if (e->hole_count == 0)
        return AFTP_OK;
    p->holes = calloc(e->hole_count, sizeof *p->holes);
    p->hole_bytes = calloc(e->hole_count, sizeof *p->hole_bytes);
    if (p->holes == NULL || p->hole_bytes == NULL)
        return AFTP_ERR_NO_MEMORY;
    aftp_wire_entry_holes_init(&it, e);
    while (p->hole_count < e->hole_count && aftp_wire_ranges_next(&it, &rg)) {
        uint64_t off = rg.start * e->block_size, end = (rg.start + rg.len) * e->block_size;
        p->holes[p->hole_count] = (aftp_block_range){rg.start, rg.len};
        p->hole_bytes[p->hole_count++] = (aftp_byte_range){off, min_u64(end, e->size) - off};
    }
    p->info.holes = p->hole_bytes;
    p->info.hole_count = p->hole_count;
    return AFTP_OK;
}

/* Keeps what the engine needs of a new entry in its slot (the slot's
 * previous entry, W ids older, is forgotten). */
static int pipe_keep(aftp_receiver *r, const aftp_wire_entry *e)
{
    if (pipe_reach(r, e->entry_id % r->window) != AFTP_OK)
        return AFTP_ERR_NO_MEMORY;
    pipe_entry *p = &r->pe[e->entry_id % r->window];
    char *text = malloc((size_t)e->path_len + e->target_len + 2);
    if (text == NULL)
        return AFTP_ERR_NO_MEMORY;
    pipe_release(p);
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
    return pipe_keep_holes(p, e);
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
    if (id >= r->decide_next && r->decide_retry_ns != 0)
        aftp_recv_schedule_feedback(r, MIN_FEEDBACK_NS); /* its verdict waits: keep it waiting */
    if (id >= r->verdicts_from || !pipe_repeatable(aftp_rpipe_slot(r, id)))
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

/* Marks p's blocks of `ranges` held; returns the end of the last one
 * (ranges ascend), or `end` when there is none. */
static uint64_t pipe_mark_ranges(aftp_receiver *r, const pipe_entry *p,
                                 const aftp_block_range *ranges, size_t count, uint64_t end)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t stop = p->base + ranges[i].start + ranges[i].len;
        aftp_blockmap_set_range(&r->held, p->base + ranges[i].start, stop);
        end = stop > end ? stop : end;
    }
    return end;
}

/* What the entry holds without its DATA: the blocks a RESUME verdict
 * lists while the file is open, the hole blocks of a file accepted (spec
 * 6.13), every block of an entry skipped, refused or failed (spec
 * 9.14.2). The map records them up to its window's end only; where they
 * reach beyond it the entry is flagged `unmarked` and marked again as the
 * window moves (pipe_remark). */
static void pipe_apply_marks(aftp_receiver *r, pipe_entry *p)
{
    int whole = p->verdict == AFTP_WIRE_VERDICT_SKIP || p->verdict == AFTP_WIRE_VERDICT_REFUSED ||
                (p->has_result && p->wire_error != AFTP_WIRE_ERR_NONE);
    uint64_t end = p->base;
    if (whole) {
        end = p->base + p->blocks;
        aftp_blockmap_set_range(&r->held, p->base, end);
    } else {
        if (p->verdict == AFTP_WIRE_VERDICT_RESUME && !p->closed)
            end = pipe_mark_ranges(r, p, p->held, p->held_count, end);
        end = pipe_mark_ranges(r, p, p->holes, p->hole_count, end);
    }
    p->unmarked = end > aftp_blockmap_window_end(&r->held);
}

/* Blocks in both of two ascending lists of disjoint ranges. */
static uint64_t pipe_overlap(const aftp_block_range *a, size_t na, const aftp_block_range *b,
                             size_t nb)
{
    uint64_t both = 0;
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        uint64_t a_end = a[i].start + a[i].len, b_end = b[j].start + b[j].len;
        uint64_t lo = a[i].start > b[j].start ? a[i].start : b[j].start;
        uint64_t hi = a_end < b_end ? a_end : b_end;
        both += hi > lo ? hi - lo : 0;
        if (a_end <= b_end)
            i++;
        else
            j++;
    }
    return both;
}

/* Blocks a file accepted holds without DATA: RESUME's and the holes,
 * counted once where they overlap (spec 6.13: the union is held). */
static uint64_t pipe_held_without_data(const pipe_entry *p)
{
    uint64_t holes = 0;
    size_t held = p->verdict == AFTP_WIRE_VERDICT_RESUME ? p->held_count : 0;
    for (size_t i = 0; i < p->hole_count; i++)
        holes += p->holes[i].len;
    return p->held_blocks + holes - pipe_overlap(p->holes, p->hole_count, p->held, held);
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
        pipe_entry *p = aftp_rpipe_slot(r, r->mark_lo);
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
 * at once when the queue fills a datagram: section 9.14.3). The session's
 * first verdicts leave at once too: no DATA can flow before them, so the
 * sender is idle while they wait (a pull's client: 10 ms of every pull). */
static void pipe_queue_verdict(aftp_receiver *r)
{
    if (r->verdicts_from + 1 == r->decide_next)
        r->verdicts_deadline = r->ss.now_ns + aftp_recv_feedback_interval(r);
    if (r->verdicts_from == 1) /* none left yet; early ones ride right behind the HELLO_ACK */
        r->verdicts_deadline = r->ss.now_ns;
    if ((size_t)(r->decide_next - r->verdicts_from) * AFTP_WIRE_VERDICT_FIXED >=
        verdict_budget(r))
        r->verdicts_deadline = r->ss.now_ns;
}

/* Storage itself failed deciding p (not a refusal of the entry): the
 * session ends, saying which entry and why. */
static void pipe_storage_failed(aftp_receiver *r, const pipe_entry *p, int rc)
{
    char why[AFTP_WIRE_MAX_REASON + 1];
    snprintf(why, sizeof why,
             "the receiver's storage failed while deciding entry %u (%.200s): %s; check the "
             "destination (space, permissions) and send again",
             p->id, p->info.file.path, aftp_strerror(rc));
    aftp_session_set_text(&r->ss, why);
    aftp_recv_start_closing(r, rc, aftp_errmap_to_wire(rc));
}

/* Storage decides entry p, the next in id order: 1, or 0 when storage
 * holds the verdict back (AFTP_STORAGE_WAIT: another session writes the
 * file), to be asked again at the retry time. */
static int pipe_decide(aftp_receiver *r, pipe_entry *p)
{
    aftp_entry_verdict v = {.verdict = AFTP_VERDICT_REFUSED};
    aftp_stream_entry copy;
    r->refusal[0] = '\0';
    v.error = p->info.kind == AFTP_ENTRY_FILE ? aftp_recv_check_block_size(r, p->info.file.block_size)
                                              : AFTP_OK;
    if (v.error == AFTP_OK) {
        int rc = r->set.storage->entry(r->set.user, &p->info, &v);
        r->decide_retry_ns = 0;
        if (rc == AFTP_STORAGE_WAIT) {
            r->decide_retry_ns = r->ss.now_ns + AFTP_STORAGE_WAIT_RETRY_NS;
            return 0;
        }
        if (rc != AFTP_OK) {
            pipe_storage_failed(r, p, rc);
            return 1;
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
        p->missing = p->blocks - pipe_held_without_data(p);
        pipe_event(r, AFTP_EV_FILE_START, p, AFTP_OK, NULL, NULL);
        return 1;
    }
    p->phase = PIPE_ENDED;
    int error = p->verdict == AFTP_WIRE_VERDICT_REFUSED ? aftp_errmap_to_local(p->wire_error)
                                                        : AFTP_OK;
    pipe_event(r, AFTP_EV_ENTRY_END, p, error, NULL, r->refusal[0] ? r->refusal : NULL);
    return 1;
}

/* Verdicts are decided in TRANSFER and, for message 1's early entries,
 * from the engine's timer once the HELLO_ACK is built (section 12.3.4). */
static int pipe_may_decide(const aftp_receiver *r)
{
    return r->ss.state == AFTP_STATE_TRANSFER ||
           (r->ss.state == AFTP_STATE_HANDSHAKE && r->early_decide);
}

/* Verdicts in id order: each entry waits for its predecessors, and all
 * wait behind one whose verdict storage holds back. */
static void pipe_decide_ready(aftp_receiver *r)
{
    pipe_entry *p;
    while (pipe_may_decide(r) && (p = aftp_rpipe_slot(r, r->decide_next)) != NULL &&
           p->phase == PIPE_OFFERED && pipe_decide(r, p))
        ;
}

/* Section 9.14.1: the receiver's `oldest` counts the ends it has sent.
 * The entry table moves on when an end is decided, so a new entry whose
 * slot still holds an entry W ids older whose end has not left yet is
 * beyond the sender's window. 1 when the slot is free for `id`. */
static int pipe_slot_free(const aftp_receiver *r, uint32_t id, char *why, size_t cap)
{
    const pipe_entry *old = id % r->window < r->pe_cap ? &r->pe[id % r->window] : NULL;
    if (old == NULL || old->id == 0 || (old->end_sent && old->id < r->verdicts_from))
        return 1; /* (a hostile sender can draw a FILE_RESULT before the verdict left) */
    snprintf(why, cap,
             "entry %u is beyond the window of %u entries: the verdict or end of entry %u "
             "was not sent yet",
             id, r->window, old->id);
    return 0;
}

void aftp_rpipe_on_entries(aftp_receiver *r, const aftp_wire_entries *en)
{
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    char why[200];
    aftp_wire_entries_iter_init(&it, en);
    while (aftp_wire_entries_next(&it, &e)) {
        int rc = aftp_stream_add(&r->stream, &e, why, sizeof why);
        if (rc < 0) {
            aftp_recv_close_protocol(r, why);
            return;
        }
        if (rc == 0) {
            pipe_note_repeat(r, e.entry_id);
        } else if (!pipe_slot_free(r, e.entry_id, why, sizeof why)) {
            aftp_recv_close_protocol(r, why);
            return;
        } else if (pipe_keep(r, &e) != AFTP_OK) {
            aftp_session_set_text(&r->ss, "out of memory for the sender's entries");
            aftp_recv_start_closing(r, AFTP_ERR_NO_MEMORY, aftp_errmap_to_wire(AFTP_ERR_NO_MEMORY));
            return;
        }
    }
    pipe_decide_ready(r);
}

/* Section 12.3.4: message 1's entries, kept like an ENTRIES' at the
 * HELLO; their verdicts need storage, which must not run where the
 * handshake does (a server's control thread), so they are decided at the
 * engine's next timer, on the thread that then drives the session. */
void aftp_rpipe_on_early_entries(aftp_receiver *r, const aftp_wire_entries *en)
{
    aftp_rpipe_on_entries(r, en);
    r->early_decide = 1;
    r->decide_retry_ns = r->ss.now_ns > 0 ? r->ss.now_ns : 1;
}

/* FILE_RESULT due for p (dropped when W results wait already: the
 * sender's next FILE_DONE asks again). */
static void pipe_queue_result(aftp_receiver *r, const pipe_entry *p)
{
    if (r->results_len < r->window)
        r->results[(r->results_head + r->results_len++) % r->window] = p->id;
}

/* Storage closed the file (any way, AFTP_CLOSE_DEFER too): the RESUME
 * held list it lent is gone. */
static void pipe_closed(pipe_entry *p)
{
    p->closed = 1;
    p->held = NULL;
}

/* The file ended (storage closed it): FILE_RESULT due, its missing
 * blocks held (spec 9.14.2), FILE_END and ENTRY_END. */
static void pipe_end_file(aftp_receiver *r, pipe_entry *p, int error, const uint8_t *digest)
{
    p->phase = PIPE_ENDED;
    p->has_result = 1;
    pipe_closed(p);
    p->wire_error = aftp_errmap_to_wire(error);
    if (digest == NULL) /* the group commit hands back p->digest itself */
        memset(p->digest, 0, AFTP_DIGEST_LEN);
    else if (digest != p->digest)
        memcpy(p->digest, digest, AFTP_DIGEST_LEN);
    if (error != AFTP_OK)
        pipe_mark(r, p);
    aftp_stream_end(&r->stream, p->id, p->wire_error);
    pipe_queue_result(r, p);
    pipe_event(r, AFTP_EV_FILE_END, p, error, digest, NULL);
    pipe_event(r, AFTP_EV_ENTRY_END, p, error, digest, NULL);
}

/* The read-back ahead lets go of its file (which a read-back took
 * over, or which ended otherwise): the next look starts from its id. */
static void pipe_prefix_drop(aftp_receiver *r)
{
    r->prefix_id = 0;
    r->prefix_blocks = r->prefix_bytes = 0;
}

static void pipe_fail(aftp_receiver *r, pipe_entry *p, int error)
{
    if (p->id == r->prefix_id)
        pipe_prefix_drop(r);
    if (p->phase == PIPE_READY)
        r->ready_count--;
    if (p->phase == PIPE_VERIFYING)
        r->verify_id = 0;
    r->set.storage->close(r->set.user, p->id, AFTP_CLOSE_DISCARD);
    pipe_end_file(r, p, error, NULL);
}

/* A group commit ended: each of its files gets its FILE_RESULT only now
 * (spec 9.14.3). results NULL: rc is every file's outcome. */
static void pipe_group_ended(aftp_receiver *r, const uint32_t *ids, uint32_t n, int rc,
                             const int *results)
{
    for (uint32_t i = 0; i < n; i++) {
        pipe_entry *p = aftp_rpipe_slot(r, ids[i]);
        if (p != NULL && p->phase == PIPE_DEFERRED)
            pipe_end_file(r, p, rc != AFTP_OK || results == NULL ? rc : results[i], p->digest);
    }
}

/* The files waiting for the group commit are made durable together, in
 * this call. */
static void pipe_commit_now(aftp_receiver *r)
{
    uint32_t n = r->group_len;
    if (n == 0)
        return;
    int rc = r->set.storage->commit_group(r->set.user, r->group, n, r->group_results);
    r->group_len = 0;
    pipe_group_ended(r, r->group, n, rc, r->group_results);
}

/* The group commit, started in the background when storage can
 * (commit_start): the files gathered become the group in flight and the
 * next group gathers in the other array. One group at a time: with one
 * in flight, the gathered files wait for aftp_receiver_commit_done. */
static void pipe_commit_group(aftp_receiver *r)
{
    if (r->set.storage->commit_start == NULL) {
        pipe_commit_now(r);
        return;
    }
    if (r->group_len == 0 || r->flight_len != 0)
        return;
    uint32_t *ids = r->group;
    r->group = r->flight;
    r->flight = ids;
    r->flight_len = r->group_len;
    r->group_len = 0;
    int rc = r->set.storage->commit_start(r->set.user, ids, r->flight_len);
    if (rc != AFTP_OK)
        aftp_rpipe_commit_done(r, rc, NULL);
}

/* Whether the receiver is at work on files whose FILE_DONE came: reading
 * them back, or committing them (gathered or in flight). The sender waits
 * for their FILE_RESULTs; the work ends by itself. */
static int pipe_owes_results(const aftp_receiver *r)
{
    return r->verify_id != 0 || r->ready_count > 0 || r->group_len > 0 || r->flight_len > 0;
}

/* In TRANSFER, the idle timer runs at least `room` beyond the idle
 * timeout from now. */
static void pipe_idle_room(aftp_receiver *r, uint64_t room)
{
    uint64_t until = r->ss.now_ns + r->ss.idle_timeout_ns + room;
    if (r->ss.state == AFTP_STATE_TRANSFER && r->ss.idle_deadline < until)
        r->ss.idle_deadline = until;
}

/* Spec 9.14.3: the receiver's own work holds its idle timer, since the
 * sender's silence meanwhile is its wait for that work's FILE_RESULTs,
 * its control timer backing off, not its absence; when the work is done
 * the timer restarts. */
void aftp_rpipe_hold_idle(aftp_receiver *r)
{
    int was_held = r->idle_held;
    r->idle_held = r->ss.state == AFTP_STATE_TRANSFER && pipe_owes_results(r);
    if (r->idle_held || was_held)
        pipe_idle_room(r, 0);
}

/* A VERDICTS or FILE_RESULT leaves. The sender's control timer backs
 * off while nothing answers it, up to 2 s (spec 10.8): after a silence
 * of ours, it asks again for an answer lost now only that much later
 * (the silence, at most 2 s), and the idle timer allows for it. */
static void pipe_answered(aftp_receiver *r)
{
    uint64_t now = r->ss.now_ns;
    uint64_t silence = r->answered ? now - r->answered_ns : 0;
    r->answered_ns = now;
    r->answered = 1;
    pipe_idle_room(r, silence < AFTP_RTT_MAX_BACKOFF_NS ? silence : AFTP_RTT_MAX_BACKOFF_NS);
}

int aftp_rpipe_commit_done(aftp_receiver *r, int rc, const int *results)
{
    uint32_t n = r->flight_len;
    if (r->window == 0 || n == 0)
        return AFTP_ERR_INVALID_STATE;
    r->flight_len = 0;
    pipe_group_ended(r, r->flight, n, rc, results);
    if (r->ss.state != AFTP_STATE_TRANSFER)
        r->results_len = 0; /* the session ended meanwhile: no FILE_RESULT leaves */
    else if (r->group_len >= (r->window + 1) / 2 || r->ss.now_ns >= r->group_deadline)
        pipe_commit_group(r); /* the next group came due while this one ran */
    return AFTP_OK;
}

/* Whether every entry up to `count` (all decided) is `settled`, a state
 * none leaves once in it: *cursor, the lowest id not yet seen settled,
 * only moves up, so the scans of a session cost one pass over its ids.
 * Ids more than W below `count` gave their slots up only once ended with
 * their end sent. */
static int pipe_settled_up_to(const aftp_receiver *r, uint32_t *cursor, uint32_t count,
                              int (*settled)(const pipe_entry *))
{
    uint32_t lo = count > r->window ? count - r->window + 1 : 1;
    if (*cursor < lo)
        *cursor = lo;
    for (; *cursor <= count; (*cursor)++) {
        const pipe_entry *p = aftp_rpipe_slot(r, *cursor);
        if (p != NULL && !settled(p))
            return 0;
    }
    return 1;
}

static int pipe_in_group_or_ended(const pipe_entry *p)
{
    return p->phase == PIPE_ENDED || p->phase == PIPE_DEFERRED;
}

static int pipe_end_left(const pipe_entry *p)
{
    return p->phase == PIPE_ENDED && p->end_sent;
}

/* Section 9.15.5: after PULL_END, once every entry up to its count ended
 * or waits in the group, no file can join the group: waiting longer only
 * delays the client's end. */
static int pipe_group_final(aftp_receiver *r)
{
    return r->end_known && r->decide_next > r->end_count &&
           pipe_settled_up_to(r, &r->grouped_below, r->end_count, pipe_in_group_or_ended);
}

void aftp_rpipe_end_known(aftp_receiver *r)
{
    if (r->group_len > 0 && pipe_group_final(r))
        pipe_commit_group(r);
}

/* A verified file: committed alone, or deferred to the group commit,
 * which runs within one feedback interval of the first file waiting, at
 * once when half the window waits, or when no other file can join. */
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
    pipe_closed(p);
    p->phase = PIPE_DEFERRED;
    memcpy(p->digest, digest, AFTP_DIGEST_LEN);
    if (r->group_len == 0) {
        uint64_t wait = aftp_recv_feedback_interval(r);
        r->group_deadline = r->ss.now_ns + (wait > GROUP_MIN_NS ? wait : GROUP_MIN_NS);
    }
    r->group[r->group_len++] = p->id;
    if (r->group_len >= (r->window + 1) / 2 || pipe_group_final(r))
        pipe_commit_group(r);
}

/* The read-back of p starts: where the read-back ahead stopped when it
 * followed p (its digest state taken over), else at byte 0. */
static void pipe_start_read_back(aftp_receiver *r, const pipe_entry *p)
{
    r->verified = 0;
    aftp_digest_reset(r->hash);
    if (p->id != r->prefix_id)
        return;
    aftp_digest *ahead = r->prefix_hash;
    r->prefix_hash = r->hash;
    r->hash = ahead;
    r->verified = r->prefix_bytes;
    pipe_prefix_drop(r);
}

/* The lowest entry waiting to be read back, now the one being read. */
static pipe_entry *pipe_next_to_verify(aftp_receiver *r)
{
    for (uint32_t id = r->stream.oldest; id <= r->stream.newest; id++) {
        pipe_entry *p = aftp_rpipe_slot(r, id);
        if (p != NULL && p->phase == PIPE_READY) {
            r->ready_count--;
            p->phase = PIPE_VERIFYING;
            r->verify_id = id;
            pipe_start_read_back(r, p);
            return p;
        }
    }
    return NULL;
}

/* One read-back step of section 9.10 over the file being verified. */
static void pipe_verify_step(aftp_receiver *r)
{
    pipe_entry *p = r->verify_id ? aftp_rpipe_slot(r, r->verify_id) : pipe_next_to_verify(r);
    if (p == NULL)
        return;
    uint64_t end = min_u64(p->info.file.size, r->verified + AFTP_RECEIVER_VERIFY_STEP);
    int rc = aftp_recv_hash_stored(r, p->id, r->hash, &r->verified, end);
    if (rc != AFTP_OK) {
        pipe_fail(r, p, rc);
        return;
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

/* Section 9.10, the read-back ahead: the file it follows, chosen when
 * none is: the lowest FILE still RECEIVING larger than one step (a
 * smaller one is read back in one step at READY anyway). The look only
 * moves up, since an entry passed over never becomes such a file later;
 * it waits at the first entry still OFFERED (its verdict may make it
 * one: verdicts come in id order). */
static pipe_entry *pipe_prefix_entry(aftp_receiver *r)
{
    if (r->prefix_id != 0)
        return aftp_rpipe_slot(r, r->prefix_id);
    for (; r->prefix_next <= r->stream.newest; r->prefix_next++) {
        pipe_entry *p = aftp_rpipe_slot(r, r->prefix_next);
        if (p != NULL && p->phase == PIPE_OFFERED)
            return NULL;
        if (p != NULL && p->phase == PIPE_RECEIVING && p->info.kind == AFTP_ENTRY_FILE &&
            p->info.file.size > AFTP_RECEIVER_VERIFY_STEP) {
            r->prefix_id = p->id;
            aftp_digest_reset(r->prefix_hash);
            return p;
        }
    }
    return NULL;
}

/* The followed file's held prefix, grown from where the last look
 * stopped (never rescanned): its blocks from base that the map holds,
 * DATA written, RESUME's held ranges and holes alike (held blocks never
 * change, 9.10). Blocks beyond the map's window are not marked yet: the
 * prefix stops there until the window moves. */
static void pipe_prefix_follow(aftp_receiver *r)
{
    const pipe_entry *p = pipe_prefix_entry(r);
    if (p == NULL || p->phase != PIPE_RECEIVING)
        return;
    uint64_t from = p->base + r->prefix_blocks;
    r->prefix_blocks = aftp_blockmap_next_clear(&r->held, from, p->base + p->blocks) - p->base;
}

/* Bytes of the followed file's held prefix; 0 once it is no longer
 * receiving (its read-back proper takes over). */
static uint64_t pipe_prefix_held(const aftp_receiver *r, pipe_entry **out)
{
    pipe_entry *p = r->prefix_id != 0 ? aftp_rpipe_slot(r, r->prefix_id) : NULL;
    *out = p;
    if (p == NULL || p->phase != PIPE_RECEIVING)
        return 0;
    return min_u64(p->info.file.size, r->prefix_blocks * p->info.file.block_size);
}

/* A step of the read-back ahead is due: a whole step held beyond what it
 * hashed, or the rest of a file held whole (its FILE_DONE still to come). */
static int pipe_prefix_due(const aftp_receiver *r)
{
    pipe_entry *p;
    uint64_t held = pipe_prefix_held(r, &p);
    return held > r->prefix_bytes &&
           held >= min_u64(p->info.file.size, r->prefix_bytes + AFTP_RECEIVER_VERIFY_STEP);
}

/* One step of the read-back ahead: at most AFTP_RECEIVER_VERIFY_STEP
 * bytes of the held prefix. A view that fails fails the file, as its
 * read-back would. */
static void pipe_prefix_step(aftp_receiver *r)
{
    pipe_entry *p;
    uint64_t end = min_u64(pipe_prefix_held(r, &p), r->prefix_bytes + AFTP_RECEIVER_VERIFY_STEP);
    int rc = aftp_recv_hash_stored(r, p->id, r->prefix_hash, &r->prefix_bytes, end);
    if (rc != AFTP_OK)
        pipe_fail(r, p, rc);
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
pipe_entry *aftp_rpipe_data_entry(const aftp_receiver *r, uint32_t file_id, uint64_t block,
                                   size_t payload_len)
{
    pipe_entry *p = aftp_rpipe_slot(r, file_id);
    if (p == NULL || p->phase == PIPE_OFFERED || p->phase == PIPE_ENDED || block < p->base ||
        block - p->base >= p->blocks ||
        payload_len != aftp_wire_block_len(p->info.file.size, p->info.file.block_size,
                                           block - p->base))
        return NULL;
    return p;
}

void aftp_rpipe_on_data(aftp_receiver *r, const aftp_wire_data *d)
{
    r->data_packets++;
    pipe_entry *p = aftp_rpipe_data_entry(r, d->file_id, d->block, d->payload_len);
    if (p == NULL) {
        aftp_session_drop(&r->ss);
        return;
    }
    int rc = aftp_recv_store_block(r, d, (d->block - p->base) * p->info.file.block_size);
    if (rc < 0) {
        pipe_fail(r, p, rc);
    } else if (rc == 1) {
        r->data_new++;
        pipe_remark(r);
        p->missing--;
        pipe_maybe_ready(r, p);
        pipe_prefix_follow(r);
    }
}

/* The FILE a FILE_DONE or ABANDON is about, while it has not ended; NULL
 * when the packet has no place (dropped) or the entry ended (its
 * FILE_RESULT is queued again: the same answer). */
static pipe_entry *pipe_unended_file(aftp_receiver *r, uint32_t file_id)
{
    pipe_entry *p = aftp_rpipe_slot(r, file_id);
    if (p == NULL || p->info.kind != AFTP_ENTRY_FILE || p->phase == PIPE_OFFERED ||
        (p->phase == PIPE_ENDED && !p->has_result)) {
        aftp_session_drop(&r->ss);
        return NULL;
    }
    if (p->phase == PIPE_ENDED) {
        pipe_queue_result(r, p);
        return NULL;
    }
    return p;
}

void aftp_rpipe_on_file_done(aftp_receiver *r, const aftp_wire_file_done *d)
{
    pipe_entry *p = pipe_unended_file(r, d->file_id);
    if (p == NULL)
        return;
    if (p->done) {
        aftp_recv_schedule_feedback(r, MIN_FEEDBACK_NS); /* verifying, committing: keep it waiting */
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
        aftp_recv_schedule_feedback(r, MIN_FEEDBACK_NS); /* section 9.8: report the tail at once */
}

/* Section 9.14.3: the sender gave up a FILE it was sending. Its partial
 * data is discarded (never committed: it may mix versions of the source)
 * and the entry ends with the sender's error, which FILE_RESULT echoes so
 * the sender knows it was heard. An entry that ended already gets its
 * FILE_RESULT again; one verified and waiting for the group commit is
 * whole and matched the digest the sender streamed: its FILE_RESULT comes
 * from the commit, as if the ABANDON had crossed it. */
void aftp_rpipe_on_abandon(aftp_receiver *r, const aftp_wire_abandon *a)
{
    pipe_entry *p = pipe_unended_file(r, a->file_id);
    if (p != NULL && p->phase != PIPE_DEFERRED)
        pipe_fail(r, p, aftp_errmap_to_local(a->error));
}

/* Session over: files still open are discarded, verified ones waiting
 * for the group commit are committed (they are whole and checked), here
 * and now: `commit_group` waits for a group in flight, whose files end
 * with its aftp_receiver_commit_done. */
/* An entry whose file is still arriving, or read back, not yet ended. */
static int pipe_open(const pipe_entry *p)
{
    return p != NULL && (p->phase == PIPE_RECEIVING || p->phase == PIPE_READY ||
                         p->phase == PIPE_VERIFYING);
}

int aftp_rpipe_in_progress(const aftp_receiver *r)
{
    if (r->window == 0 || r->pe == NULL)
        return 0;
    for (uint32_t id = r->stream.oldest; id != 0 && id <= r->stream.newest; id++)
        if (pipe_open(aftp_rpipe_slot(r, id)))
            return 1;
    return 0;
}

void aftp_rpipe_close_all(aftp_receiver *r, int error)
{
    if (r->window == 0 || r->pe == NULL)
        return;
    pipe_commit_now(r);
    for (uint32_t id = r->stream.oldest; id != 0 && id <= r->stream.newest; id++) {
        pipe_entry *p = aftp_rpipe_slot(r, id);
        if (pipe_open(p))
            pipe_fail(r, p, error != AFTP_OK ? error : AFTP_ERR_PEER_CLOSED);
    }
    r->results_len = 0;
}

/* Answers whose entry is gone meanwhile are passed over, so whatever is
 * due has something to say: a repeat of a RESUME whose file closed, a
 * repeated FILE_RESULT whose slot a newer entry took (the sender had the
 * first one and moved on). */
void aftp_rpipe_prune(aftp_receiver *r)
{
    while (r->repeat_lo <= r->repeat_hi &&
           (r->repeat_lo >= r->verdicts_from || !pipe_repeatable(aftp_rpipe_slot(r, r->repeat_lo))))
        r->repeat_lo++;
    while (r->results_len > 0 && aftp_rpipe_slot(r, r->results[r->results_head]) == NULL) {
        r->results_head = (r->results_head + 1) % r->window;
        r->results_len--;
    }
}

int aftp_rpipe_verdicts_due(const aftp_receiver *r)
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
int aftp_rpipe_encode_verdicts(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet pkt;
    size_t used = 0, budget = verdict_budget(r);
    aftp_session_packet(&r->ss, AFTP_WIRE_VERDICTS, &pkt);
    aftp_wire_verdicts *vs = &pkt.u.verdicts;
    for (; r->repeat_lo <= r->repeat_hi; r->repeat_lo++) {
        const pipe_entry *p = aftp_rpipe_slot(r, r->repeat_lo);
        if (r->repeat_lo >= r->verdicts_from || !pipe_repeatable(p))
            continue;
        if (!pipe_add_record(r, vs, p, &used, &budget))
            break;
    }
    for (; r->verdicts_from < r->decide_next; r->verdicts_from++) {
        pipe_entry *p = aftp_rpipe_slot(r, r->verdicts_from);
        if (!pipe_add_record(r, vs, p, &used, &budget))
            break;
        p->end_sent = p->phase == PIPE_ENDED && !p->has_result;
    }
    if (r->verdicts_from < r->decide_next)
        r->verdicts_deadline = r->ss.now_ns; /* a full datagram left: the rest at once */
    vs->verdicts = r->vrecs;
    pipe_answered(r);
    return aftp_session_encode(&r->ss, &pkt, buf, cap, dg);
}

int aftp_rpipe_encode_result(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    uint32_t id = r->results[r->results_head];
    r->results_head = (r->results_head + 1) % r->window;
    r->results_len--;
    pipe_entry *p = aftp_rpipe_slot(r, id);
    p->end_sent = 1;
    p->result_ns = r->ss.now_ns;
    pipe_answered(r);
    return aftp_recv_encode_file_result(r, id, p->wire_error, p->digest, buf, cap, dg);
}

int aftp_rpipe_encode_close_result(aftp_receiver *r, uint8_t *buf, size_t cap,
                                   aftp_datagram *dg)
{
    uint32_t id = r->close_results[r->close_result_next++];
    const pipe_entry *p = aftp_rpipe_slot(r, id);
    return aftp_recv_encode_file_result(r, id, p->wire_error, p->digest, buf, cap, dg);
}

int aftp_rpipe_all_ended(aftp_receiver *r, uint32_t count)
{
    return r->decide_next > count && r->verdicts_from == r->decide_next &&
           r->results_len == 0 && !pipe_owes_results(r) &&
           pipe_settled_up_to(r, &r->ended_below, count, pipe_end_left);
}

/* The pipelined timers: queued verdicts, the group commit, read-back. */
uint64_t aftp_rpipe_expiry(const aftp_receiver *r, uint64_t t)
{
    if (r->window == 0)
        return t;
    if (r->verdicts_from < r->decide_next)
        t = min_u64(t, r->verdicts_deadline);
    if (r->decide_retry_ns != 0 && pipe_may_decide(r))
        t = min_u64(t, r->decide_retry_ns);
    if (r->group_len > 0 && r->flight_len == 0) /* else commit_done starts it */
        t = min_u64(t, r->group_deadline);
    if (r->verify_id != 0 || r->ready_count > 0 || pipe_prefix_due(r))
        t = min_u64(t, r->ss.now_ns);
    if (r->idle_held && !pipe_owes_results(r)) /* the work is done: its hold ends now */
        t = min_u64(t, r->ss.now_ns);
    return t;
}

void aftp_rpipe_handle_expiry(aftp_receiver *r)
{
    if (r->window == 0 || !pipe_may_decide(r))
        return;
    if (r->decide_retry_ns != 0 && r->ss.now_ns >= r->decide_retry_ns) {
        r->decide_retry_ns = 0; /* set again if storage still holds it back */
        pipe_decide_ready(r);
    }
    if (r->group_len > 0 && r->ss.now_ns >= r->group_deadline)
        pipe_commit_group(r);
    pipe_prefix_follow(r);
    if (r->verify_id != 0 || r->ready_count > 0)
        pipe_verify_step(r); /* first: a finished file's commit waits for nothing else */
    else if (pipe_prefix_due(r))
        pipe_prefix_step(r);
}
