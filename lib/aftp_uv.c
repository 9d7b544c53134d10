/* aftp on libuv (include/aftp/aftp_uv.h).
 *
 * A send is the blocking tier's on a thread of its own (pacing needs
 * microseconds; libuv's timers count milliseconds). A server's control
 * plane runs on the embedder's loop itself (lib/aftp_server_run.h: the
 * listener, the handshakes, the admission, the timers are handles there),
 * its sessions' datapaths on worker threads.
 *
 * What another thread has to tell the embedder (a send's events, a
 * server's receipts, entries, progress and a worker's log lines) is
 * copied into an event, queued under a mutex, and handed over through a
 * uv_async_t: the loop thread calls the callbacks, in order. What the
 * server's run says on the loop thread itself (its admission question,
 * most log lines) goes to the embedder at once, after the events queued
 * before it. Progress is coalesced: a session's figures of a file that
 * the loop has not taken yet are replaced by newer ones (a server's
 * sessions each keep theirs, though their files share name and size).
 *
 * This is the only file of lib/ (and of the core beneath it) that includes
 * <uv.h>: tests/lib/uv_confined.sh checks. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "aftp/aftp_uv.h"
#include "aftp_server_run.h"

/* How often a cancelled send's cancel is repeated until its thread ends:
 * aftp_client_cancel() is a no-op until aftp_client_send() has begun, and
 * a cancel must not be lost in that window. */
#define CANCEL_REPEAT_MS 50
/* How long a thread whose event finds no memory waits before it tries
 * again (an event other than progress is never dropped). */
#define NO_MEMORY_RETRY_MS 1

enum event_kind { EVENT_PROGRESS, EVENT_FILE, EVENT_NOTICE, EVENT_RECEIPT, EVENT_ENTRY, EVENT_LOG };

/* One callback's arguments, copied on another thread (its strings in
 * `strings`) and delivered on the loop thread. */
typedef struct bridge_event {
    struct bridge_event *next;
    uint64_t seq; /* the queue's count of posts when it was queued */
    struct bridge_event *next_progress; /* EVENT_PROGRESS: the next one queued */
    enum event_kind kind;
    int log_kind;     /* EVENT_LOG */
    const char *text; /* EVENT_NOTICE, EVENT_LOG */
    union {
        aftp_progress progress;
        aftp_file_event file;
        aftp_receipt receipt; /* EVENT_RECEIPT, EVENT_ENTRY */
    } u;
    aftp_peer peer; /* a receipt's client, pointing into addr and key */
    struct sockaddr_storage addr;
    uint8_t key[AFTP_KEY_LEN];
    char strings[];
} bridge_event;

/* What a send and a server share: the queue to the loop, and the
 * embedder's callbacks. */
typedef struct uv_bridge {
    uv_async_t wake;
    /* lock guards the queue (and a send's end: aftp_uv_send.finished) */
    uv_mutex_t lock;
    bridge_event *head, **tail;
    uint64_t posted; /* events ever queued: each event's seq */
    /* the progress events in the queue, in its order: the first is always
     * the first progress event the loop takes */
    bridge_event *progress_head, **progress_tail;
    int open_handles; /* on the loop thread only */
    int status;       /* the end, for the done callback */
    char *errmsg;
    /* The tier's own part of the end, on the loop: the handle's callbacks
     * back to none, its own uv handles closed. */
    void (*finish)(struct uv_bridge *b);
    /* Frees the send or server around the bridge. */
    void (*release)(struct uv_bridge *b);
    aftp_progress_cb progress;
    aftp_file_cb file;
    aftp_notice_cb notice;
    aftp_receipt_cb receipt;
    aftp_receipt_cb entry;
    aftp_log_cb log;
    aftp_uv_done_cb done; /* NULL while a start that failed unwinds */
    void *user;
} uv_bridge;

struct aftp_uv_send {
    uv_bridge b; /* first: the bridge's pointer is the send's */
    uv_thread_t thread;
    uv_timer_t cancel_repeat;
    aftp_client *client;
    char *host_port;
    char **files;
    size_t count;
    int cancelled;
    int finished; /* under b.lock: the thread's send returned (status, errmsg set) */
};

struct aftp_uv_server {
    uv_bridge b; /* first, as in aftp_uv_send */
    aftp_server *server;
    aftp_server_loop_run *run; /* NULL once it ended */
    uv_thread_t loop_thread;
    int started; /* aftp_uv_server_start returned: the loop thread may deliver at once */
    int stopping;
};

/* ---- events: another thread's side ---- */

/* A new event of `kind` holding copies of the n strings `in` (NULL counts
 * as ""), their places in `out`; NULL without memory. */
static bridge_event *event_new(enum event_kind kind, const char *const *in, const char **out,
                               size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(in[i] != NULL ? in[i] : "") + 1;
    bridge_event *ev = calloc(1, sizeof *ev + total);
    if (ev == NULL)
        return NULL;
    ev->kind = kind;
    char *at = ev->strings;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(in[i] != NULL ? in[i] : "") + 1;
        memcpy(at, in[i] != NULL ? in[i] : "", len);
        out[i] = at;
        at += len;
    }
    return ev;
}

/* As event_new, for an event that must not be lost (all but progress): a
 * thread that finds no memory waits for some. It holds up only the
 * transfer that made the event; the loop needs no memory to take the
 * events queued, so what they hold comes back. */
static bridge_event *event_new_surely(enum event_kind kind, const char *const *in,
                                      const char **out, size_t n)
{
    bridge_event *ev;
    while ((ev = event_new(kind, in, out, n)) == NULL)
        uv_sleep(NO_MEMORY_RETRY_MS);
    return ev;
}

/* Queues ev for the loop and wakes it. */
static void bridge_post(uv_bridge *b, bridge_event *ev)
{
    uv_mutex_lock(&b->lock);
    ev->seq = ++b->posted;
    *b->tail = ev;
    b->tail = &ev->next;
    if (ev->kind == EVENT_PROGRESS) {
        *b->progress_tail = ev;
        b->progress_tail = &ev->next_progress;
    }
    uv_mutex_unlock(&b->lock);
    uv_async_send(&b->wake);
}

/* Whether q and p report the same session's same file (a file is its
 * name and size; a send's progress is all of session 0). */
static int progress_same(const aftp_progress *q, const aftp_progress *p)
{
    return q->session == p->session && q->size == p->size &&
           strcmp(q->name, p->name != NULL ? p->name : "") == 0;
}

/* The figures of p into a progress event of the same session and file
 * that the loop has not taken yet: 1, or 0 when there is none. */
static int progress_coalesce(uv_bridge *b, const aftp_progress *p)
{
    int found = 0;
    uv_mutex_lock(&b->lock);
    for (bridge_event *ev = b->progress_head; ev != NULL && !found; ev = ev->next_progress) {
        aftp_progress *q = &ev->u.progress;
        if (progress_same(q, p)) {
            const char *name = q->name;
            *q = *p;
            q->name = name;
            found = 1;
        }
    }
    uv_mutex_unlock(&b->lock);
    return found;
}

static void progress_on_thread(void *user, const aftp_progress *p)
{
    const char *name;
    if (progress_coalesce(user, p))
        return;
    bridge_event *ev = event_new(EVENT_PROGRESS, &p->name, &name, 1);
    if (ev == NULL)
        return; /* the next progress of the file comes soon */
    ev->u.progress = *p;
    ev->u.progress.name = name;
    bridge_post(user, ev);
}

static void file_on_thread(void *user, const aftp_file_event *f)
{
    const char *in[] = {f->source, f->name, f->message}, *out[3];
    bridge_event *ev = event_new_surely(EVENT_FILE, in, out, 3);
    ev->u.file = *f;
    ev->u.file.source = out[0];
    ev->u.file.name = out[1];
    ev->u.file.message = out[2];
    bridge_post(user, ev);
}

static bridge_event *text_event(enum event_kind kind, const char *text)
{
    bridge_event *ev = event_new_surely(kind, &text, &text, 1);
    ev->text = text;
    return ev;
}

static void notice_on_thread(void *user, const char *text)
{
    bridge_post(user, text_event(EVENT_NOTICE, text));
}

static void log_on_thread(void *user, int kind, const char *line)
{
    bridge_event *ev = text_event(EVENT_LOG, line);
    ev->log_kind = kind;
    bridge_post(user, ev);
}

/* The receipt's client into ev->peer, its address and key into ev. */
static void copy_peer(bridge_event *ev, const aftp_peer *peer, const char *comment)
{
    size_t len = (size_t)peer->addr_len < sizeof ev->addr ? (size_t)peer->addr_len : sizeof ev->addr;
    if (peer->addr != NULL)
        memcpy(&ev->addr, peer->addr, len);
    ev->peer.addr = (const struct sockaddr *)&ev->addr;
    ev->peer.addr_len = (socklen_t)len;
    if (peer->key != NULL) {
        memcpy(ev->key, peer->key, AFTP_KEY_LEN);
        ev->peer.key = ev->key;
    }
    ev->peer.comment = comment;
}

/* A receipt or an entry (kind), copied with its strings and its client. */
static void receipt_post(uv_bridge *b, enum event_kind kind, const aftp_receipt *r)
{
    const char *in[] = {r->path, r->root, r->printable_path, r->client->comment, r->target};
    const char *out[5];
    bridge_event *ev = event_new_surely(kind, in, out, 5);
    ev->u.receipt = *r;
    ev->u.receipt.path = out[0];
    ev->u.receipt.root = out[1];
    ev->u.receipt.printable_path = out[2];
    ev->u.receipt.target = r->target != NULL ? out[4] : NULL;
    copy_peer(ev, r->client, out[3]);
    ev->u.receipt.client = &ev->peer;
    bridge_post(b, ev);
}

/* ---- the loop's side ---- */

static void event_deliver(uv_bridge *b, const bridge_event *ev)
{
    switch (ev->kind) {
    case EVENT_PROGRESS:
        b->progress(b->user, &ev->u.progress);
        break;
    case EVENT_FILE:
        b->file(b->user, &ev->u.file);
        break;
    case EVENT_NOTICE:
        b->notice(b->user, ev->text);
        break;
    case EVENT_RECEIPT:
        b->receipt(b->user, &ev->u.receipt);
        break;
    case EVENT_ENTRY:
        b->entry(b->user, &ev->u.receipt);
        break;
    case EVENT_LOG:
        b->log(b->user, ev->log_kind, ev->text);
        break;
    }
}

/* The first queued event if it was queued by the `last`-th post, out of
 * the queue; NULL when none. */
static bridge_event *bridge_take(uv_bridge *b, uint64_t last)
{
    uv_mutex_lock(&b->lock);
    bridge_event *ev = b->head != NULL && b->head->seq <= last ? b->head : NULL;
    if (ev != NULL) {
        b->head = ev->next;
        if (b->head == NULL)
            b->tail = &b->head;
        if (ev->kind == EVENT_PROGRESS) {
            b->progress_head = ev->next_progress;
            if (b->progress_head == NULL)
                b->progress_tail = &b->progress_head;
        }
    }
    uv_mutex_unlock(&b->lock);
    return ev;
}

/* Every event queued so far to the embedder, in order. One at a time: a
 * delivery begun inside a callback keeps its order. What a thread queues
 * meanwhile waits for the loop's next turn (its post woke the loop
 * again): until then a progress event may still take in newer figures of
 * its file, so a turn has at most one of each. */
static void bridge_deliver(uv_bridge *b)
{
    uv_mutex_lock(&b->lock);
    uint64_t last = b->posted;
    uv_mutex_unlock(&b->lock);
    bridge_event *ev;
    while ((ev = bridge_take(b, last)) != NULL) {
        event_deliver(b, ev);
        free(ev);
    }
}

static void bridge_free(uv_bridge *b)
{
    bridge_event *ev;
    while ((ev = bridge_take(b, UINT64_MAX)) != NULL)
        free(ev);
    uv_mutex_destroy(&b->lock);
    free(b->errmsg);
    b->release(b);
}

/* Each of the tier's uv handles closed: the last one ends the send or run. */
static void handle_closed(uv_handle_t *h)
{
    uv_bridge *b = h->data;
    if (--b->open_handles > 0)
        return;
    if (b->done != NULL)
        b->done(b->user, b->status, b->errmsg != NULL ? b->errmsg : "");
    bridge_free(b);
}

/* The send's thread or the server's run has ended (or never started):
 * the end is recorded, the tier's handles close, and the done callback
 * follows once they have. */
static void bridge_close(uv_bridge *b, int status, const char *errmsg)
{
    b->status = status;
    b->errmsg = strdup(errmsg != NULL ? errmsg : ""); /* NULL: "" is said */
    b->finish(b);
    uv_close((uv_handle_t *)&b->wake, handle_closed);
}

/* The bridge's lock and wake-up handle on loop; AFTP_OK or
 * AFTP_ERR_INTERNAL (then nothing is left to undo). */
static int bridge_init(uv_bridge *b, uv_loop_t *loop, uv_async_cb on_wake)
{
    b->tail = &b->head;
    b->progress_tail = &b->progress_head;
    if (uv_mutex_init(&b->lock) != 0)
        return AFTP_ERR_INTERNAL;
    if (uv_async_init(loop, &b->wake, on_wake) != 0) {
        uv_mutex_destroy(&b->lock);
        return AFTP_ERR_INTERNAL;
    }
    b->wake.data = b;
    b->open_handles = 1;
    return AFTP_OK;
}

/* cbs of `size` bytes into the zeroed `into` of into_size bytes, unless
 * size is below v1_size (the fields of the first version). */
static int cbs_copy(void *into, size_t into_size, const void *cbs, size_t size, size_t v1_size)
{
    if (size < v1_size)
        return AFTP_ERR_INVALID_ARGUMENT;
    memcpy(into, cbs, size < into_size ? size : into_size);
    return AFTP_OK;
}

/* ---- client ---- */

static void send_thread(void *arg)
{
    aftp_uv_send *r = arg;
    int rc = aftp_client_send(r->client, r->host_port, (const char *const *)r->files, r->count);
    uv_mutex_lock(&r->b.lock);
    r->b.status = rc; /* the client's message waits in it for the loop */
    r->finished = 1;  /* after the thread's last event */
    uv_mutex_unlock(&r->b.lock);
    uv_async_send(&r->b.wake);
}

/* Wakes for the thread's events and its end: once it ended, the loop
 * joins it and the send's done callback follows. */
static void send_wake(uv_async_t *h)
{
    aftp_uv_send *r = h->data;
    bridge_deliver(&r->b);
    uv_mutex_lock(&r->b.lock);
    int finished = r->finished;
    uv_mutex_unlock(&r->b.lock);
    if (!finished)
        return;
    uv_thread_join(&r->thread);
    bridge_deliver(&r->b); /* what came after the first look */
    bridge_close(&r->b, r->b.status, aftp_client_errmsg(r->client));
}

static void send_finish(uv_bridge *b)
{
    aftp_uv_send *r = (aftp_uv_send *)b;
    aftp_client_set_progress_cb(r->client, NULL, NULL);
    aftp_client_set_file_cb(r->client, NULL, NULL);
    aftp_client_set_notice_cb(r->client, NULL, NULL);
    uv_close((uv_handle_t *)&r->cancel_repeat, handle_closed);
}

static void send_release(uv_bridge *b)
{
    aftp_uv_send *r = (aftp_uv_send *)b;
    for (size_t i = 0; i < r->count; i++)
        free(r->files[i]);
    free(r->files);
    free(r->host_port);
    free(r);
}

/* A send with copies of host_port and the paths; NULL without memory. */
static aftp_uv_send *send_new(const char *host_port, const char *const *files, size_t count)
{
    aftp_uv_send *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->host_port = strdup(host_port);
    r->files = calloc(count, sizeof *r->files);
    int ok = r->host_port != NULL && r->files != NULL;
    for (size_t i = 0; ok && i < count; i++, r->count = i)
        ok = (r->files[i] = strdup(files[i])) != NULL;
    if (!ok) {
        send_release(&r->b);
        return NULL;
    }
    return r;
}

/* The tier's callbacks on the client, for those the embedder wants, and
 * none else (one set on c before would be called on the send's thread). */
static void send_hook_client(aftp_uv_send *r)
{
    aftp_client *c = r->client;
    aftp_client_set_progress_cb(c, r->b.progress != NULL ? progress_on_thread : NULL, &r->b);
    aftp_client_set_file_cb(c, r->b.file != NULL ? file_on_thread : NULL, &r->b);
    aftp_client_set_notice_cb(c, r->b.notice != NULL ? notice_on_thread : NULL, &r->b);
}

/* The bridge and the cancel timer of r on loop (uv_timer_init cannot fail:
 * it only links the handle into the loop). */
static int send_init_handles(aftp_uv_send *r, uv_loop_t *loop)
{
    int rc = bridge_init(&r->b, loop, send_wake);
    if (rc != AFTP_OK)
        return rc;
    (void)uv_timer_init(loop, &r->cancel_repeat);
    r->cancel_repeat.data = &r->b;
    r->b.open_handles++;
    return AFTP_OK;
}

int aftp_uv_client_send(struct uv_loop_s *loop, aftp_client *c, const char *host_port,
                        const char *const *files, size_t count, const aftp_uv_send_cbs *cbs,
                        aftp_uv_send **out)
{
    aftp_uv_send_cbs own = {0};
    if (out != NULL)
        *out = NULL;
    if (loop == NULL || c == NULL || host_port == NULL || files == NULL || count == 0 ||
        cbs == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < count; i++)
        if (files[i] == NULL)
            return AFTP_ERR_INVALID_ARGUMENT;
    if (cbs_copy(&own, sizeof own, cbs, cbs->size,
                 offsetof(aftp_uv_send_cbs, user) + sizeof(void *)) != AFTP_OK ||
        own.done == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_uv_send *r = send_new(host_port, files, count);
    if (r == NULL)
        return AFTP_ERR_NO_MEMORY;
    r->client = c;
    r->b.progress = own.progress;
    r->b.file = own.file;
    r->b.notice = own.notice;
    r->b.done = own.done;
    r->b.user = own.user;
    r->b.finish = send_finish;
    r->b.release = send_release;
    int rc = send_init_handles(r, loop);
    if (rc != AFTP_OK) {
        send_release(&r->b);
        return rc;
    }
    send_hook_client(r);
    if (uv_thread_create(&r->thread, send_thread, r) != 0) {
        r->b.done = NULL; /* the handles close without a done callback */
        bridge_close(&r->b, AFTP_ERR_INTERNAL, NULL);
        return AFTP_ERR_INTERNAL;
    }
    if (out != NULL)
        *out = r;
    return AFTP_OK;
}

static void cancel_repeat(uv_timer_t *t)
{
    aftp_uv_send *r = (aftp_uv_send *)t->data;
    aftp_client_cancel(r->client);
}

void aftp_uv_send_cancel(aftp_uv_send *r)
{
    if (r == NULL || r->cancelled)
        return;
    r->cancelled = 1;
    aftp_client_cancel(r->client);
    uv_timer_start(&r->cancel_repeat, cancel_repeat, CANCEL_REPEAT_MS, CANCEL_REPEAT_MS);
}

/* ---- server ---- */

/* Whether the caller is the loop's thread with the run started: what the
 * run says there goes to the embedder at once, after the events queued
 * before it (so a session's receipts come before its end's log line). */
static int deliver_here(aftp_uv_server *u)
{
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &u->loop_thread) || !u->started)
        return 0;
    bridge_deliver(&u->b);
    return 1;
}

static void server_progress(void *user, const aftp_progress *p)
{
    aftp_uv_server *u = user;
    if (deliver_here(u))
        u->b.progress(u->b.user, p);
    else
        progress_on_thread(&u->b, p);
}

/* A receipt or an entry (kind) to the embedder: at once here, else queued. */
static void server_report(aftp_uv_server *u, enum event_kind kind, const aftp_receipt *r)
{
    aftp_receipt_cb cb = kind == EVENT_RECEIPT ? u->b.receipt : u->b.entry;
    if (deliver_here(u))
        cb(u->b.user, r);
    else
        receipt_post(&u->b, kind, r);
}

static void server_receipt(void *user, const aftp_receipt *r)
{
    server_report(user, EVENT_RECEIPT, r);
}

static void server_entry(void *user, const aftp_receipt *r)
{
    server_report(user, EVENT_ENTRY, r);
}

static void server_log(void *user, int kind, const char *line)
{
    aftp_uv_server *u = user;
    if (deliver_here(u))
        u->b.log(u->b.user, kind, line);
    else
        log_on_thread(&u->b, kind, line);
}

/* The embedder's callbacks on the server, and only those (one set on s
 * before would be called on a worker): the admission as it is (the run
 * asks it on the loop thread), the others through the tier. */
static void server_hook(aftp_uv_server *u, aftp_admit_cb admit)
{
    aftp_server *s = u->server;
    aftp_server_set_admit_cb(s, admit, u->b.user);
    aftp_server_set_receipt_cb(s, u->b.receipt != NULL ? server_receipt : NULL, u);
    aftp_server_set_entry_cb(s, u->b.entry != NULL ? server_entry : NULL, u);
    aftp_server_set_progress_cb(s, u->b.progress != NULL ? server_progress : NULL, u);
    aftp_server_set_log_cb(s, u->b.log != NULL ? server_log : NULL, u);
}

static void server_finish(uv_bridge *b)
{
    aftp_server *s = ((aftp_uv_server *)b)->server;
    aftp_server_set_admit_cb(s, NULL, NULL);
    aftp_server_set_receipt_cb(s, NULL, NULL);
    aftp_server_set_entry_cb(s, NULL, NULL);
    aftp_server_set_progress_cb(s, NULL, NULL);
    aftp_server_set_log_cb(s, NULL, NULL);
}

static void server_release(uv_bridge *b)
{
    free(b);
}

/* Wakes for events from the workers. */
static void server_wake(uv_async_t *h)
{
    bridge_deliver(h->data);
}

/* The run ended and closed its handles (its workers joined: nothing is
 * queued after this). What they queued goes first, then the stopped
 * callback, once the tier's own handle closed. */
static void server_run_done(void *ctx)
{
    aftp_uv_server *u = ctx;
    int status = aftp_server_loop_finish(u->run);
    u->run = NULL;
    bridge_deliver(&u->b);
    bridge_close(&u->b, status, aftp_server_errmsg(u->server));
}

int aftp_uv_server_start(struct uv_loop_s *loop, aftp_server *s, const aftp_uv_server_cbs *cbs,
                         aftp_uv_server **out)
{
    aftp_uv_server_cbs own = {0};
    if (out != NULL)
        *out = NULL;
    if (loop == NULL || s == NULL || cbs == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cbs_copy(&own, sizeof own, cbs, cbs->size,
                 offsetof(aftp_uv_server_cbs, admit_wait_ms) + sizeof(uint64_t)) != AFTP_OK ||
        own.stopped == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_uv_server *u = calloc(1, sizeof *u);
    if (u == NULL)
        return AFTP_ERR_NO_MEMORY;
    u->server = s;
    u->loop_thread = uv_thread_self();
    u->b.receipt = own.receipt;
    u->b.entry = own.entry;
    u->b.progress = own.progress;
    u->b.log = own.log;
    u->b.done = own.stopped;
    u->b.user = own.user;
    u->b.finish = server_finish;
    u->b.release = server_release;
    int rc = bridge_init(&u->b, loop, server_wake);
    if (rc != AFTP_OK) {
        free(u);
        return rc;
    }
    server_hook(u, own.admit);
    /* A run that cannot start says why in the stopped callback, as one
     * that ends does: the tier's handle closes first, so not from here. */
    if ((rc = aftp_server_loop_start(s, loop, server_run_done, u, &u->run)) != AFTP_OK)
        bridge_close(&u->b, rc, aftp_server_errmsg(s));
    u->started = 1;
    if (out != NULL)
        *out = u;
    return AFTP_OK;
}

void aftp_uv_server_stop(aftp_uv_server *u)
{
    if (u == NULL || u->stopping)
        return;
    u->stopping = 1;
    /* A run that ended is not stopped: the stop would carry over to the
     * handle's next run (aftp_server_stop() before a run). */
    if (u->run != NULL)
        aftp_server_loop_stop(u->run);
}
