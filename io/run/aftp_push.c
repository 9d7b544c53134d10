#include "aftp_push.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aftp_drive.h"
#include "aftp_keyfetch.h"
#include "aftp_path.h"
#include "aftp_pathmem.h"
#include "aftp_source.h"
#include "aftp_tree.h"
#include "aftp_treesend.h"
#include "aftp_udp.h"
#include "aftp_wallclock.h"
#include "common/aftp_cc.h"

/* Buffers for pacing at `rate`: ~4 ms of data on the send side (batches
 * are 0.5-1 ms), and room for the feedback stream on the receive side. */
#define PUSH_SND_WINDOW_NS 4000000u
#define PUSH_UNCAPPED_RATE_BPS UINT64_C(10000000000)


/* The fastest the sender may pace: what its socket buffer must cover. An
 * uncapped adaptive policy may find a path as fast as the host. */
static uint64_t peak_rate(const aftp_push_opts *o)
{
    if (o->policy == AFTP_CC_FIXED)
        return o->rate_bps;
    return o->max_rate_bps ? o->max_rate_bps : PUSH_UNCAPPED_RATE_BPS;
}

static int open_socket(const aftp_push_opts *o, aftp_udp *udp)
{
    int rc = aftp_io_open_client_socket(udp, o->peer, o->peer_len,
                                        aftp_io_max_datagram(o->max_datagram));
    if (rc != AFTP_OK)
        return rc;
    aftp_udp_forbid_fragments(udp);
    aftp_io_warn(&o->hooks, aftp_drop_warning(&udp->drop));
    return aftp_io_size_buffers(&o->hooks, udp,
                                aftp_udp_buffer_for(peak_rate(o), PUSH_SND_WINDOW_NS),
                                AFTP_UDP_MIN_BUFFER);
}

/* After each batch: release residency, and look for a change of the
 * source (the kernel's reads of a shrunk mapping fail with EFAULT, they do
 * not fault: only size and mtime tell). */
static void after_batch(void *src)
{
    aftp_source_settle(src);
    aftp_source_check(src);
}

/* The datagram size: the configured one, or less when the route to the
 * peer carries smaller IP packets (a tunnel, a VPN), which the user is
 * told. AFTP_ERR_NETWORK when the route cannot carry aftp's smallest. */
static int fit_route(const aftp_push_opts *o, const aftp_udp *udp, uint16_t *max_datagram,
                     aftp_io_result *res)
{
    unsigned mtu;
    size_t route = aftp_udp_path_datagram(udp, &mtu);
    if (route == 0 || route >= *max_datagram)
        return AFTP_OK;
    if (route < AFTP_IO_DATAGRAM_FOR(AFTP_IO_MIN_MTU)) {
        snprintf(res->message, sizeof res->message,
                 "the route to the peer carries IP packets of at most %u bytes: aftp needs %u",
                 mtu, AFTP_IO_MIN_MTU);
        return AFTP_ERR_NETWORK;
    }
    char note[160];
    snprintf(note, sizeof note,
             "the route to the peer carries IP packets of at most %u bytes: datagrams of %zu "
             "bytes, not %u", mtu, route, (unsigned)*max_datagram);
    aftp_io_warn(&o->hooks, note);
    *max_datagram = (uint16_t)route;
    return AFTP_OK;
}

/* The key request of a HELLO left unanswered (AFTP_PUSH_KEY_PROBE_NS). */
typedef struct push_key_probe {
    aftp_keyprobe probe;
    enum { PROBE_WAITING, PROBE_ASKING, PROBE_DONE } state;
    uint64_t start_ns;
    const aftp_push_opts *o;
    aftp_sender *sender;
    aftp_push_result *res;
} push_key_probe;

static void key_probe_init(push_key_probe *kp, const aftp_push_opts *o, aftp_sender *s,
                           aftp_push_result *res)
{
    uint64_t after = AFTP_PUSH_KEY_PROBE_NS;
    if (o->idle_timeout_ns && o->idle_timeout_ns / 2 < after)
        after = o->idle_timeout_ns / 2;
    memset(kp, 0, sizeof *kp);
    kp->state = o->security.cipher != AFTP_CIPHER_NONE && o->security.peer_key != NULL
                    ? PROBE_WAITING
                    : PROBE_DONE;
    kp->start_ns = aftp_drive_now_ns() + after;
    kp->o = o;
    kp->sender = s;
    kp->res = res;
}

static void key_probe_end(push_key_probe *kp)
{
    if (kp->state == PROBE_ASKING)
        aftp_keyprobe_close(&kp->probe);
    kp->state = PROBE_DONE;
}

/* One turn of the datapath loop: ask once the HELLO is overdue; an
 * answer with the pinned key (or none) leaves the handshake to go on. */
static void key_probe_turn(void *ctx, uint64_t now)
{
    push_key_probe *kp = ctx;
    uint8_t key[AFTP_KEY_LEN];
    if (kp->state == PROBE_DONE || (kp->state == PROBE_WAITING && now < kp->start_ns))
        return;
    if (aftp_sender_state(kp->sender) != AFTP_STATE_HANDSHAKE) {
        key_probe_end(kp);
        return;
    }
    if (kp->state == PROBE_WAITING) {
        aftp_keyfetch_opts ko = {.peer = kp->o->peer, .peer_len = kp->o->peer_len};
        if (aftp_keyprobe_open(&kp->probe, &ko) != AFTP_OK) {
            aftp_keyprobe_close(&kp->probe);
            kp->state = PROBE_DONE;
            return;
        }
        kp->state = PROBE_ASKING;
    }
    int got = aftp_keyprobe_step(&kp->probe, now, key);
    if (got == AFTP_OK)
        return;
    if (got == 1 && memcmp(key, kp->o->security.peer_key, AFTP_KEY_LEN) == 0) {
        kp->res->key_answer = AFTP_PUSH_KEY_PINNED;
    } else if (got == 1) {
        kp->res->key_answer = AFTP_PUSH_KEY_OTHER;
        memcpy(kp->res->server_key, key, AFTP_KEY_LEN);
        aftp_sender_abort(kp->sender, now, AFTP_ERR_AUTH,
                          "the server answers a key request with another key than the pinned one");
    }
    key_probe_end(kp);
}

/* The files of a run: which one the engine holds and what its FILE_END
 * said, until on_file_end has been told. */
typedef struct push_queue {
    const aftp_push_opts *o;
    aftp_io_ctx *ctx;
    aftp_io_hooks hooks; /* ctx->hooks: push_on_event first, then o->hooks.on_event */
    aftp_sender *sender;
    size_t current;      /* index in o->files of the file in the engine */
    int started, ended;  /* its FILE_START, FILE_END came (ended: not yet reported) */
    int reported;        /* on_file_end was called for it */
    int error;
    int have_digest;
    uint8_t digest[AFTP_DIGEST_LEN];
    uint64_t size;
    uint32_t block_size;
    char name[AFTP_PATH_MAX_COMPONENT + 1];
    char message[512];
} push_queue;

static void push_on_event(void *app, const aftp_event *ev)
{
    push_queue *q = app;
    if (ev->type == AFTP_EV_FILE_START) {
        q->started = 1;
    } else if (ev->type == AFTP_EV_FILE_END) {
        q->ended = 1;
        q->error = ev->error;
        q->block_size = ev->info->block_size;
        q->have_digest = ev->error == AFTP_OK && ev->digest != NULL;
        if (q->have_digest)
            memcpy(q->digest, ev->digest, AFTP_DIGEST_LEN);
        snprintf(q->message, sizeof q->message, "%s", ev->message ? ev->message : "");
    }
    if (q->o->hooks.on_event)
        q->o->hooks.on_event(q->o->hooks.app, ev);
}

/* Tells on_file_end the verdict of the current file. */
static void report_file(push_queue *q)
{
    aftp_stats st = q->ctx->res->stats; /* the session's end, or none */
    if (q->sender != NULL)
        aftp_sender_get_stats(q->sender, &st);
    q->ended = 0;
    q->reported = 1;
    if (q->o->on_file_end == NULL)
        return;
    aftp_push_file_end fe = {.index = q->current, .name = q->name, .size = q->size,
                             .block_size = q->block_size, .started = q->started, .error = q->error,
                             .digest = q->have_digest ? q->digest : NULL,
                             .message = q->message, .stats = &st};
    q->o->on_file_end(q->o->hooks.app, &fe);
}

/* Opens file `index` as the source (file id index + 1) and describes it
 * in *info. A failure is the file's: reported as its verdict, with the
 * result's phase LOCAL and the source's message. */
static int open_file(push_queue *q, size_t index, aftp_file_info *info)
{
    aftp_source *src = &q->ctx->storage.src;
    aftp_io_result *res = q->ctx->res;
    int rc = aftp_source_open(src, q->o->files[index], (uint32_t)index + 1, info);
    q->current = index;
    q->started = q->have_digest = q->reported = 0;
    q->block_size = 0;
    if (rc == AFTP_OK) {
        q->size = info->size;
        snprintf(q->name, sizeof q->name, "%s", info->path);
        return AFTP_OK;
    }
    const char *slash = strrchr(q->o->files[index], '/');
    snprintf(q->name, sizeof q->name, "%s", slash ? slash + 1 : q->o->files[index]);
    q->size = 0;
    q->error = res->error = rc;
    res->phase = AFTP_IO_PHASE_LOCAL;
    snprintf(res->message, sizeof res->message, "%s", src->message);
    snprintf(q->message, sizeof q->message, "%s", src->message);
    report_file(q);
    return rc;
}

/* Once the engine's file has its verdict: report it and, when it was
 * verified, queue the next file (the last one with aftp_sender_finish). A
 * next file that cannot be opened ends the session with its error. */
static void queue_turn(push_queue *q, uint64_t now)
{
    aftp_file_info info;
    if (!q->ended)
        return;
    int failed = q->error != AFTP_OK;
    report_file(q);
    if (failed || q->current + 1 >= q->o->file_count)
        return;
    aftp_source_fini(&q->ctx->storage.src);
    int rc = open_file(q, q->current + 1, &info);
    if (rc == AFTP_OK)
        rc = aftp_sender_add_file(q->sender, &info);
    if (rc != AFTP_OK) {
        /* The peer learns which file, not the local path or its error. */
        char reason[96];
        snprintf(reason, sizeof reason, "the sender cannot read its file %zu",
                 q->current + 1);
        aftp_sender_abort(q->sender, now, rc, reason);
        return;
    }
    if (q->current + 1 == q->o->file_count)
        aftp_sender_finish(q->sender);
}

/* What the driver remembers of an entry the engine holds: the SRC it came
 * from and its kind, for on_entry. Slot id % W: the engine holds at most
 * W entries from the oldest that has not ended, so live ids never share a
 * slot. */
typedef struct push_slot {
    uint32_t id;
    int kind;
    int live;      /* added, not yet ended */
    size_t index;
    uint64_t accepted_ns;
    uint64_t size;
    char *path;    /* while live: for an end the engine never reports (the session failed) */
} push_slot;

/* Pipelined mode: the walk of o->files feeding the engine its entries as
 * its window frees (an entry refused with AFTP_ERR_LIMIT waits for the
 * next turn, after an ENTRY_END). */
typedef struct push_feed {
    const aftp_push_opts *o;
    aftp_io_ctx *ctx;
    aftp_io_hooks hooks; /* ctx->hooks: feed_on_event first, then o->hooks.on_event */
    aftp_push_result *out;
    aftp_sender *sender;
    aftp_tree walk;
    aftp_tree_entry e;
    aftp_entry_info info; /* the entry waiting for room, its strings the walk's */
    size_t src_index;     /* the SRC of info */
    push_slot *slots;     /* pipeline_window of them */
    size_t live;          /* entries the engine holds that have not ended */
    /* A FILE_END waiting to learn whether an ENTRY_END of the same entry
     * follows (pipelined mode: at once) or not (the receiver runs
     * one-file mode: the FILE_END is the file's end). */
    int end_pending;
    aftp_push_entry end;
    aftp_stats end_stats;
    uint8_t end_digest[AFTP_DIGEST_LEN];
    char end_path[AFTP_WIRE_MAX_PATH + 1];
    char end_message[512];
    uint32_t next_id;
    int pending, done;
    /* One guard for every mapped source: the treesend's sources each have
     * their own, but a SIGBUS handler arms one guard per thread. The
     * engine's writes read nothing file-backed but the sources, so a
     * fault anywhere during them is a source that shrank: the guard spans
     * the whole address space, and aftp_treesend_check tells which. */
    aftp_mapguard guard;
} push_feed;

static void skip_notice(push_feed *f, const char *local, const char *why)
{
    char shown[256], text[1024];
    aftp_path_printable(local, shown, sizeof shown);
    snprintf(text, sizeof text, "skipped %s: %.700s", shown, why);
    aftp_io_warn(&f->o->hooks, text);
    f->out->skipped_locally++;
}

/* What the walk could not read is a failed entry: a SRC itself (the user
 * named it), or anything beneath one that the system would not let us
 * read. What it left out by nature (specials, names the receiver would
 * refuse, a vanished or looping entry) is a notice. */
static int walk_failure(const push_feed *f, int err)
{
    if (f->walk.depth == 0)
        return 1;
    return err == AFTP_ERR_PERMISSION || err == AFTP_ERR_IO || err == AFTP_ERR_NO_MEMORY;
}

static void walk_notice(void *user, const char *local, int err, const char *why)
{
    push_feed *f = user;
    if (!walk_failure(f, err)) {
        skip_notice(f, local, why);
        return;
    }
    char message[1024], shown[256];
    const char *skipped = "skipped: "; /* the walk's words for a notice; this is a failure */
    if (strncmp(why, skipped, strlen(skipped)) == 0)
        why += strlen(skipped);
    aftp_path_printable(local, shown, sizeof shown);
    snprintf(message, sizeof message, "cannot send %s: %.700s", shown, why);
    /* its name at the receiver, had it been sent */
    const char *slash = strrchr(local, '/');
    const char *path = f->walk.depth > 0 ? f->walk.path : slash && slash[1] ? slash + 1 : local;
    aftp_stats st = f->ctx->res->stats;
    if (f->sender != NULL)
        aftp_sender_get_stats(f->sender, &st);
    aftp_push_entry pe = {.ended = 1, .local = 1, .index = f->walk.next_src - 1,
                          .kind = AFTP_ENTRY_FILE, .path = path, .verdict = AFTP_VERDICT_REFUSED,
                          .error = err, .message = message, .stats = &st};
    if (f->o->on_entry != NULL)
        f->o->on_entry(f->o->hooks.app, &pe);
}

static push_slot *feed_slot(push_feed *f, uint32_t id)
{
    push_slot *sl = &f->slots[id % f->o->pipeline_window];
    return sl->id == id ? sl : NULL;
}

/* on_entry learns of an entry; an end frees its place in the window. */
static void feed_report(push_feed *f, const aftp_push_entry *pe)
{
    if (f->o->on_entry != NULL)
        f->o->on_entry(f->o->hooks.app, pe);
    push_slot *sl = pe->ended ? feed_slot(f, pe->id) : NULL;
    if (sl != NULL && sl->live) { /* after the call: pe->path may be sl->path */
        sl->live = 0;
        free(sl->path);
        sl->path = NULL;
        f->live--;
    }
}

/* The FILE_END held back was a one-file session's: the file's end. */
static void feed_flush(push_feed *f)
{
    if (!f->end_pending)
        return;
    f->end_pending = 0;
    feed_report(f, &f->end);
}

/* ev (FILE_START, FILE_END, ENTRY_END) of slot sl as on_entry sees it. */
static void feed_entry(const push_slot *sl, const aftp_event *ev, const aftp_stats *st,
                       aftp_push_entry *pe)
{
    *pe = (aftp_push_entry){.ended = ev->type != AFTP_EV_FILE_START, .index = sl->index,
                            .id = sl->id, .kind = sl->kind, .path = ev->info->path,
                            .size = ev->info->size, .verdict = ev->verdict,
                            .error = ev->error, .held_bytes = ev->held_bytes,
                            .accepted_ns = sl->accepted_ns,
                            .digest = ev->error == AFTP_OK ? ev->digest : NULL,
                            .message = ev->message ? ev->message : "", .stats = st};
}

/* A FILE_END, held until the next event tells which mode it ended in. */
static void feed_hold_end(push_feed *f, const aftp_push_entry *pe)
{
    f->end = *pe;
    f->end_stats = *pe->stats;
    f->end.stats = &f->end_stats;
    snprintf(f->end_path, sizeof f->end_path, "%s", pe->path);
    f->end.path = f->end_path;
    snprintf(f->end_message, sizeof f->end_message, "%s", pe->message);
    f->end.message = f->end_message;
    if (pe->digest != NULL) {
        memcpy(f->end_digest, pe->digest, AFTP_DIGEST_LEN);
        f->end.digest = f->end_digest;
    }
    f->end_pending = 1;
}

/* A FILE accepted or an entry ended: on_entry learns it with its SRC. */
static void feed_on_event(void *app, const aftp_event *ev)
{
    push_feed *f = app;
    int interesting = ev->type == AFTP_EV_FILE_START || ev->type == AFTP_EV_FILE_END ||
                      ev->type == AFTP_EV_ENTRY_END;
    push_slot *sl = interesting && ev->info != NULL ? feed_slot(f, ev->info->file_id) : NULL;
    if (f->end_pending && ev->type == AFTP_EV_ENTRY_END && sl != NULL && sl->id == f->end.id)
        f->end_pending = 0; /* pipelined: the ENTRY_END says it all */
    feed_flush(f);
    if (sl != NULL) {
        aftp_stats st;
        aftp_push_entry pe;
        aftp_sender_get_stats(f->sender, &st);
        if (ev->type == AFTP_EV_FILE_START)
            sl->accepted_ns = aftp_drive_now_ns();
        feed_entry(sl, ev, &st, &pe);
        const aftp_treesend *tree = &f->ctx->storage.tree_src;
        if (ev->message == NULL && ev->error != AFTP_OK && tree->message_id == sl->id) {
            pe.message = tree->message; /* an abandoned entry: what its storage found, */
            pe.local = 1;               /* naming its file */
        }
        if (ev->type == AFTP_EV_FILE_END)
            feed_hold_end(f, &pe);
        else
            feed_report(f, &pe);
    }
    if (f->o->hooks.on_event)
        f->o->hooks.on_event(f->o->hooks.app, ev);
}

/* A link inside a tree goes as a link only when asked for. */
static int feed_wanted(push_feed *f)
{
    if (f->e.kind != AFTP_TREE_SYMLINK || f->o->send_links)
        return 1;
    char why[700], target[256];
    aftp_path_printable(f->e.target, target, sizeof target);
    snprintf(why, sizeof why, "a symbolic link (to %s) inside a tree is not sent unless links "
             "are asked for (then it is recreated as a link)", target);
    skip_notice(f, f->e.local, why);
    return 0;
}

/* The walk's next entry into f->info (a FILE noted with its local path
 * for the storage): 1, 0 when the walk is over, or the error. */
static int feed_load(push_feed *f)
{
    do {
        if (aftp_tree_next(&f->walk, &f->e) != 1)
            return 0;
    } while (!feed_wanted(f));
    f->src_index = f->walk.next_src - 1; /* the SRC being walked */
    int rc = aftp_treesend_entry_info(&f->e, f->next_id, 0, f->o->entry_flags, &f->info);
    if (rc == AFTP_OK && f->e.kind == AFTP_TREE_FILE)
        rc = aftp_treesend_add(&f->ctx->storage.tree_src, &f->info, f->e.local);
    if (rc != AFTP_OK)
        return rc;
    f->next_id++;
    return 1;
}

/* The engine took entry f->info: remember where it came from. */
static int feed_note(push_feed *f)
{
    uint32_t id = f->info.file.file_id;
    char *path = strdup(f->info.file.path);
    if (path == NULL)
        return AFTP_ERR_NO_MEMORY;
    f->slots[id % f->o->pipeline_window] =
        (push_slot){.id = id, .kind = f->info.kind, .live = 1, .index = f->src_index,
                    .size = f->info.file.size, .path = path};
    f->live++;
    return AFTP_OK;
}

/* The session failed with entries the engine never ended (the socket
 * failed under it): each ends with the session's error. */
static void feed_fail_live(push_feed *f, const aftp_push_result *out)
{
    aftp_push_entry pe = {.ended = 1, .verdict = AFTP_VERDICT_REFUSED,
                          .error = out->session_error, .message = out->io.message,
                          .stats = &out->io.stats, .session = out};
    for (size_t i = 0; f->slots != NULL && i < f->o->pipeline_window; i++) {
        push_slot *sl = &f->slots[i];
        if (!sl->live)
            continue;
        pe.index = sl->index;
        pe.id = sl->id;
        pe.kind = sl->kind;
        pe.path = sl->path;
        pe.size = sl->size;
        pe.accepted_ns = sl->accepted_ns;
        feed_report(f, &pe);
    }
}

static void feed_turn(push_feed *f, uint64_t now)
{
    if (f != NULL)
        feed_flush(f);
    /* The engine bounds a pipelined session's entries itself; against a
     * one-file receiver it would take them all: the driver bounds both.
     * (The sender's storage bounds its open sources for any window.) */
    while (f != NULL && !f->done && f->live < f->o->pipeline_window) {
        int rc = f->pending ? 1 : feed_load(f);
        if (rc == 0) {
            aftp_sender_finish(f->sender);
            f->done = 1;
            return;
        }
        f->pending = 1;
        if (rc == 1)
            rc = aftp_sender_add_entry(f->sender, &f->info);
        if (rc == AFTP_ERR_LIMIT)
            return; /* the window is full */
        f->pending = 0;
        if (rc == AFTP_OK)
            rc = feed_note(f);
        if (rc != AFTP_OK) {
            char reason[96];
            snprintf(reason, sizeof reason, "the sender cannot read its entry %u", f->next_id - 1);
            aftp_sender_abort(f->sender, now, rc, reason);
            f->done = 1;
        }
    }
}

/* The walk's first entry, before any socket: a send whose every SRC
 * failed or was skipped makes no session. */
static int feed_first(push_feed *f)
{
    int rc = feed_load(f);
    if (rc < 0)
        return rc;
    f->pending = rc;
    f->done = rc == 0;
    return AFTP_OK;
}

/* After each batch, as after_batch does for one source: a source whose
 * size or mtime changed ends its entry alone (spec 9.14.3); only when
 * the engine cannot abandon it does it trip the session's guard. */
static void after_tree_batch(void *ctx)
{
    push_feed *f = ctx;
    aftp_treesend_settle(&f->ctx->storage.tree_src); /* the batch's borrowed bytes */
    for (uint32_t id; (id = aftp_treesend_changed(&f->ctx->storage.tree_src)) != 0;)
        if (aftp_sender_abandon(f->sender, id, AFTP_ERR_SOURCE_CHANGED) != AFTP_OK) {
            aftp_mapguard_trip(&f->guard);
            return;
        }
}

/* What the datapath loop does each turn besides the engine's work: one
 * of q (one-file mode) and feed (pipelined mode). */
typedef struct push_turn {
    push_key_probe kp;
    push_queue *q;
    push_feed *feed;
} push_turn;

static void on_turn(void *ctx, uint64_t now)
{
    push_turn *t = ctx;
    key_probe_turn(&t->kp, now);
    if (t->q != NULL)
        queue_turn(t->q, now);
    feed_turn(t->feed, now);
}

static void sender_settings(const aftp_push_opts *o, aftp_io_ctx *ctx, int pipelined,
                            uint16_t max_datagram, aftp_sender_settings *set)
{
    aftp_sender_settings_default(set);
    set->conn_id = aftp_io_random_conn_id();
    set->rate_bps = o->rate_bps;
    set->policy = o->policy;
    set->max_rate_bps = o->max_rate_bps;
    set->min_rate_bps = o->min_rate_bps;
    set->max_datagram = max_datagram;
    if (o->idle_timeout_ns)
        set->idle_timeout_ns = o->idle_timeout_ns;
    set->storage = pipelined ? &aftp_treesend_ops : &aftp_source_ops;
    set->pipeline_window = pipelined ? o->pipeline_window : 0;
    set->no_early_entries = o->no_early_entries;
    set->on_event = aftp_io_on_event;
    set->user = &ctx->storage; /* src or tree_src: aftp_io_on_event finds ctx */
    set->security = o->security;
    /* Wall-clock time, not the datapath's monotonic clock: the server
     * refuses a repeat or one older than its replay window (spec 14.2.4),
     * so it must move forward across runs and hosts. */
    set->security.unix_time_ns = aftp_wallclock_now_ns();
}

/* ---- path memory (Careful Resume, io/store/aftp_pathmem.h) ---- */

#define NS_PER_S UINT64_C(1000000000)

/* The path's name in the memory; "" when the run keeps none, or the
 * socket's addresses cannot name it. */
static void path_key(const aftp_push_opts *o, const aftp_udp *udp,
                     char key[AFTP_PATHMEM_KEY_MAX])
{
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (o->path_memory_file == NULL ||
        getsockname(udp->fd, (struct sockaddr *)&local, &len) != 0 ||
        aftp_pathmem_key(o->security.peer_key, (const struct sockaddr *)&local, o->peer, key) !=
            AFTP_OK)
        key[0] = '\0';
}

/* The memory as the file holds it now; NULL without memory. */
static aftp_pathmem *path_memory_load(const aftp_push_opts *o, int tell)
{
    aftp_pathmem *pm = malloc(sizeof *pm);
    char notice[4400];
    if (pm != NULL)
        aftp_pathmem_load(pm, o->path_memory_file, notice, sizeof notice);
    if (pm != NULL && tell && notice[0] != '\0')
        aftp_io_warn(&o->hooks, notice);
    return pm;
}

/* What an earlier session measured on the path, for the sender to start
 * from. */
static void path_recall(const aftp_push_opts *o, const char *key, aftp_sender_settings *set)
{
    aftp_pathmem *pm = key[0] != '\0' ? path_memory_load(o, 1) : NULL;
    const aftp_pathmem_entry *e =
        pm != NULL ? aftp_pathmem_lookup(pm, key, aftp_wallclock_now_ns() / NS_PER_S) : NULL;
    if (e != NULL) {
        set->resume_rate_bps = e->rate_bps;
        set->resume_rtt_ns = e->min_rtt_ns;
    }
    free(pm);
}

/* A session that reached steady state (PROBE_BW, or PROBE_RTT within it:
 * its rate is the path's, not a startup's overshoot) leaves what it
 * measured for the next. The file is read again first: another client may
 * have saved meanwhile. */
static void path_remember(const aftp_push_opts *o, const char *key, const aftp_stats *st)
{
    int steady = st->cc_mode == AFTP_CC_MODE_PROBE_BW || st->cc_mode == AFTP_CC_MODE_PROBE_RTT;
    if (key[0] == '\0' || !steady || st->delivery_rate_bps == 0 || st->path_min_rtt_ns == 0)
        return;
    aftp_pathmem *pm = path_memory_load(o, 0);
    if (pm == NULL)
        return;
    uint64_t now_s = aftp_wallclock_now_ns() / NS_PER_S;
    char why[4200];
    aftp_pathmem_update(pm, key, st->delivery_rate_bps, st->path_min_rtt_ns, now_s);
    if (aftp_pathmem_save(pm, o->path_memory_file, now_s, why, sizeof why) != AFTP_OK)
        aftp_io_warn(&o->hooks, why);
    free(pm);
}

/* The session, in one-file mode (turn->q, its first file `info`) or
 * pipelined mode (turn->feed). */
static int run_session(const aftp_push_opts *o, aftp_io_ctx *ctx, push_turn *turn, aftp_udp *udp,
                       const aftp_file_info *info, uint16_t max_datagram,
                       aftp_push_result *res)
{
    push_queue *q = turn->q;
    push_feed *f = turn->feed;
    aftp_sender_settings set;
    char path[AFTP_PATHMEM_KEY_MAX];
    sender_settings(o, ctx, f != NULL, max_datagram, &set);
    path_key(o, udp, path);
    path_recall(o, path, &set);
    aftp_sender *s = NULL;
    int rc = aftp_sender_new(&set, aftp_drive_now_ns(), &s);
    if (rc == AFTP_OK && q != NULL)
        rc = aftp_sender_add_file(s, info);
    if (rc == AFTP_OK) {
        if (q != NULL)
            q->sender = s;
        else
            f->sender = s;
        key_probe_init(&turn->kp, o, s, res);
        if (q != NULL && o->file_count == 1)
            aftp_sender_finish(s);
        feed_turn(f, aftp_drive_now_ns());
        aftp_drive d = {.sender = s, .udp = udp, .max_datagram = set.max_datagram,
                        .interrupt = o->hooks.interrupt, .on_tick = o->hooks.on_tick,
                        .app = o->hooks.app,
                        .after_send = f != NULL ? after_tree_batch : after_batch,
                        .after_send_ctx = f != NULL ? (void *)f : (void *)&ctx->storage.src,
                        .source_guard = f != NULL ? &f->guard : &ctx->storage.src.guard,
                        .on_turn = on_turn, .on_turn_ctx = turn};
        rc = aftp_drive_run(&d);
        key_probe_end(&turn->kp);
        aftp_drive_stats(&d, &ctx->res->stats);
        path_remember(o, path, &ctx->res->stats);
        if (q != NULL && q->ended) /* the session closed in the turn of the verdict */
            report_file(q);
    }
    if (q != NULL)
        q->sender = NULL;
    aftp_sender_del(s);
    return rc;
}

/* Opens the socket and runs the session; the result's message says why
 * either failed. */
static int connect_and_run(const aftp_push_opts *o, aftp_io_ctx *ctx, push_turn *turn,
                           const aftp_file_info *info, aftp_push_result *out)
{
    aftp_io_result *res = &out->io;
    aftp_udp udp;
    uint16_t max_datagram = aftp_io_max_datagram(o->max_datagram);
    int rc = open_socket(o, &udp);
    if (rc != AFTP_OK)
        snprintf(res->message, sizeof res->message, "cannot open a UDP socket to the peer");
    else
        rc = fit_route(o, &udp, &max_datagram, res);
    if (rc == AFTP_OK) {
        res->phase = AFTP_IO_PHASE_SESSION;
        rc = run_session(o, ctx, turn, &udp, info, max_datagram, out);
    }
    res->datagram_asked = max_datagram;
    /* The session may end before its CLOSE event (the receiver gone once
     * it had our CLOSE): the reason is said here as well. */
    if (udp.too_big && rc != AFTP_OK && res->message[0] == '\0')
        aftp_udp_explain_too_big(&udp, max_datagram, res->message, sizeof res->message);
    aftp_udp_close(&udp);
    return rc;
}

/* A failed run reports the file it was at, if the engine did not (the
 * session failed before the offer, or the socket before the session). */
static void report_failure(push_queue *q)
{
    aftp_io_result *res = q->ctx->res;
    if (q->reported || res->error == AFTP_OK)
        return;
    q->error = res->error;
    snprintf(q->message, sizeof q->message, "%s", res->message);
    report_file(q);
}

/* Pipelined mode: the walk of o->files in one session. */
static int push_tree_run(const aftp_push_opts *o, aftp_push_result *out)
{
    aftp_io_result *res = &out->io;
    aftp_io_ctx ctx = {.res = res};
    push_feed feed = {.o = o, .ctx = &ctx, .out = out, .next_id = 1};
    push_turn turn = {.feed = &feed};
    feed.hooks = o->hooks;
    feed.hooks.on_event = feed_on_event;
    feed.hooks.app = &feed;
    ctx.hooks = &feed.hooks;
    aftp_treesend_init(&ctx.storage.tree_src);
    feed.slots = calloc(o->pipeline_window, sizeof *feed.slots);
    int rc = feed.slots != NULL ? aftp_tree_init(&feed.walk, o->files, o->file_count,
                                                 walk_notice, &feed)
                                : AFTP_ERR_NO_MEMORY;
    if (rc == AFTP_OK)
        rc = aftp_mapguard_init(&feed.guard, NULL, SIZE_MAX);
    if (rc == AFTP_OK)
        rc = feed_first(&feed);
    if (rc == AFTP_OK && feed.pending)
        rc = connect_and_run(o, &ctx, &turn, NULL, out);
    feed_flush(&feed);
    out->session_error = rc;
    if (aftp_mapguard_tripped(&feed.guard)) {
        /* the detail, if the changed source is still open (a faulting
         * read ends its entry before anyone can ask which it was) */
        aftp_treesend_check(&ctx.storage.tree_src);
        rc = out->session_error = res->error = AFTP_ERR_SOURCE_CHANGED;
        const char *why = ctx.storage.tree_src.message;
        out->changed_named = why[0] != '\0';
        snprintf(res->message, sizeof res->message, "%s",
                 why[0] ? why
                        : "a source file shrank while it was sent (another program truncated "
                          "it); send again once it is stable");
    }
    if (rc != AFTP_OK)
        feed_fail_live(&feed, out);
    aftp_tree_fini(&feed.walk);
    aftp_treesend_fini(&ctx.storage.tree_src);
    for (size_t i = 0; feed.slots != NULL && i < o->pipeline_window; i++)
        free(feed.slots[i].path); /* none is left but after a failure of the driver itself */
    free(feed.slots);
    if (res->error == AFTP_OK)
        res->error = rc;
    return res->error;
}

int aftp_push_run(const aftp_push_opts *o, aftp_push_result *out)
{
    aftp_io_result *res = &out->io;
    aftp_io_ctx ctx = {.res = res};
    push_queue q = {.o = o, .ctx = &ctx};
    aftp_file_info info;
    memset(out, 0, sizeof *out);
    q.hooks.on_event = push_on_event;
    q.hooks.app = &q;
    ctx.hooks = &q.hooks;
    res->phase = AFTP_IO_PHASE_LOCAL;
    if (o->file_count == 0) {
        snprintf(res->message, sizeof res->message, "no file to send");
        return res->error = AFTP_ERR_INVALID_ARGUMENT;
    }
    if (o->pipeline_window > 0)
        return push_tree_run(o, out);
    int rc = open_file(&q, 0, &info);
    if (rc != AFTP_OK)
        return res->error = rc;
    if (o->hooks.interrupt != NULL && *o->hooks.interrupt) {
        /* cancelled before any datagram */
        snprintf(res->message, sizeof res->message, "interrupted before the transfer started");
        rc = AFTP_ERR_CANCELLED;
    } else {
        push_turn turn = {.q = &q};
        rc = connect_and_run(o, &ctx, &turn, &info, out);
    }
    /* A transfer that failed because its source changed says what changed;
     * otherwise a file's own failure says more than the session's closing
     * error. */
    if (aftp_mapguard_tripped(&ctx.storage.src.guard) && (res->error != AFTP_OK || rc != AFTP_OK)) {
        aftp_source_check(&ctx.storage.src); /* the detail */
        res->error = AFTP_ERR_SOURCE_CHANGED;
        snprintf(res->message, sizeof res->message, "%s", ctx.storage.src.message);
    }
    aftp_source_fini(&ctx.storage.src);
    if (res->error == AFTP_OK)
        res->error = rc;
    report_failure(&q);
    return res->error;
}
