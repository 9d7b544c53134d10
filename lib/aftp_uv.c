/* aftp on libuv (include/aftp/aftp_uv.h): a send or a server run is the
 * blocking tier's on a thread of its own (pacing needs microseconds; libuv's
 * timers count milliseconds), bridged to the embedder's loop. The thread's
 * callbacks copy what they are given into events queued under a mutex and
 * wake the loop through a uv_async_t; the loop thread hands the events to
 * the embedder's callbacks, in order. The one question the datapath must
 * have answered, admission, waits on a condition variable for the loop.
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

/* How often a cancelled send's cancel is repeated until its thread ends:
 * aftp_client_cancel() is a no-op until aftp_client_send() has begun, and
 * a cancel must not be lost in that window. */
#define CANCEL_REPEAT_MS 50

enum event_kind { EVENT_PROGRESS, EVENT_FILE, EVENT_NOTICE, EVENT_RECEIPT, EVENT_LOG };

/* One callback's arguments, copied on the datapath thread (its strings in
 * `strings`) and delivered on the loop thread. */
typedef struct bridge_event {
    struct bridge_event *next;
    enum event_kind kind;
    int log_kind;     /* EVENT_LOG */
    const char *text; /* EVENT_NOTICE, EVENT_LOG */
    union {
        aftp_progress progress;
        aftp_file_event file;
        aftp_receipt receipt;
    } u;
    aftp_peer peer; /* EVENT_RECEIPT's client, pointing into addr and key */
    struct sockaddr_storage addr;
    uint8_t key[AFTP_KEY_LEN];
    char strings[];
} bridge_event;

/* An admission question from the datapath, on that thread's stack until
 * it is answered or given up on. */
enum admit_state { ADMIT_PENDING, ADMIT_TAKEN, ADMIT_ANSWERED };
typedef struct admit_request {
    const aftp_peer *peer;
    aftp_admission *decision;
    enum admit_state state;
    int result;
} admit_request;

/* What a send and a server share: the thread, the queue to the loop, and
 * the embedder's callbacks. */
typedef struct uv_bridge {
    uv_async_t wake;
    uv_thread_t thread;
    /* lock guards the queue, the admission question (and its state), and
     * the end: finished, status, errmsg. */
    uv_mutex_t lock;
    uv_cond_t answered;
    bridge_event *head, **tail;
    admit_request *admit; /* the blocking server asks one question at a time */
    int finished;
    int status;
    char *errmsg;
    int open_handles; /* on the loop thread only */
    /* The tier's own part of the end, on the loop after the thread ended:
     * the handle's callbacks back to none, its own uv handles closed. */
    void (*finish)(struct uv_bridge *b);
    /* Frees the send or server around the bridge. */
    void (*release)(struct uv_bridge *b);
    aftp_progress_cb progress;
    aftp_file_cb file;
    aftp_notice_cb notice;
    aftp_receipt_cb receipt;
    aftp_log_cb log;
    aftp_admit_cb admit_cb;
    uint64_t admit_wait_ns;
    aftp_uv_done_cb done; /* NULL while a start that failed unwinds */
    void *user;
} uv_bridge;

struct aftp_uv_send {
    uv_bridge b; /* first: the bridge's pointer is the send's */
    uv_timer_t cancel_repeat;
    aftp_client *client;
    char *host_port;
    char **files;
    size_t count;
    int cancelled;
};

struct aftp_uv_server {
    uv_bridge b; /* first, as in aftp_uv_send */
    aftp_server *server;
    int stopping;
};

/* ---- events: the datapath thread's side ---- */

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

/* Queues ev for the loop and wakes it. An event that could not be
 * allocated is lost: the transfer itself goes on regardless, and its end
 * (status and message) never needs memory here. */
static void bridge_post(uv_bridge *b, bridge_event *ev)
{
    if (ev == NULL)
        return;
    uv_mutex_lock(&b->lock);
    *b->tail = ev;
    b->tail = &ev->next;
    uv_mutex_unlock(&b->lock);
    uv_async_send(&b->wake);
}

static void progress_on_thread(void *user, const aftp_progress *p)
{
    const char *name;
    bridge_event *ev = event_new(EVENT_PROGRESS, &p->name, &name, 1);
    if (ev != NULL) {
        ev->u.progress = *p;
        ev->u.progress.name = name;
    }
    bridge_post(user, ev);
}

static void file_on_thread(void *user, const aftp_file_event *f)
{
    const char *in[] = {f->source, f->name, f->message}, *out[3];
    bridge_event *ev = event_new(EVENT_FILE, in, out, 3);
    if (ev != NULL) {
        ev->u.file = *f;
        ev->u.file.source = out[0];
        ev->u.file.name = out[1];
        ev->u.file.message = out[2];
    }
    bridge_post(user, ev);
}

static bridge_event *text_event(enum event_kind kind, const char *text)
{
    bridge_event *ev = event_new(kind, &text, &text, 1);
    if (ev != NULL)
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
    if (ev != NULL)
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

static void receipt_on_thread(void *user, const aftp_receipt *r)
{
    const char *in[] = {r->path, r->root, r->printable_path, r->client->comment}, *out[4];
    bridge_event *ev = event_new(EVENT_RECEIPT, in, out, 4);
    if (ev != NULL) {
        ev->u.receipt = *r;
        ev->u.receipt.path = out[0];
        ev->u.receipt.root = out[1];
        ev->u.receipt.printable_path = out[2];
        copy_peer(ev, r->client, out[3]);
        ev->u.receipt.client = &ev->peer;
    }
    bridge_post(user, ev);
}

/* The datapath's run ended with status: recorded for the loop, which
 * joins the thread and calls the done callback. */
static void bridge_finish_thread(uv_bridge *b, int status, const char *errmsg)
{
    char *copy = strdup(errmsg != NULL ? errmsg : "");
    uv_mutex_lock(&b->lock);
    b->status = status;
    b->errmsg = copy;
    b->finished = 1;
    uv_mutex_unlock(&b->lock);
    uv_async_send(&b->wake);
}

/* ---- admission: the datapath asks, the loop answers ---- */

/* Waits until the loop answered req, or gave up: a question the loop has
 * not taken within the bound is withdrawn (refused); one it has taken is
 * waited for, since the embedder's callback holds its pointers. */
static void admission_wait(uv_bridge *b, admit_request *req)
{
    uint64_t deadline = uv_hrtime() + b->admit_wait_ns;
    while (req->state != ADMIT_ANSWERED) {
        uint64_t now = uv_hrtime();
        if (req->state == ADMIT_TAKEN) {
            uv_cond_wait(&b->answered, &b->lock);
        } else if (now >= deadline) {
            b->admit = NULL;
            return;
        } else {
            (void)uv_cond_timedwait(&b->answered, &b->lock, deadline - now);
        }
    }
}

/* The warning for a client refused because the loop did not take its
 * admission in time: who, how long, what to do. */
static void admission_timeout_log(uv_bridge *b, const aftp_peer *peer)
{
    char who[AFTP_SERVER_PEER_TEXT_MAX], line[AFTP_SERVER_PEER_TEXT_MAX + 200];
    if (aftp_server_format_peer(peer, who, sizeof who) != AFTP_OK)
        who[0] = '\0';
    snprintf(line, sizeof line,
             "client %s refused: its admission waited %llu ms for the event loop, which did not "
             "take it (keep the loop's callbacks short, or raise admit_wait_ms)",
             who, (unsigned long long)(b->admit_wait_ns / 1000000u));
    log_on_thread(b, AFTP_LOG_WARNING, line);
}

static int admit_on_thread(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    uv_bridge *b = user;
    admit_request req = {.peer = peer, .decision = decision, .state = ADMIT_PENDING,
                         .result = AFTP_ERR_IDLE_TIMEOUT};
    uv_mutex_lock(&b->lock);
    b->admit = &req;
    uv_mutex_unlock(&b->lock);
    uv_async_send(&b->wake);
    uv_mutex_lock(&b->lock);
    admission_wait(b, &req);
    uv_mutex_unlock(&b->lock);
    if (req.state != ADMIT_ANSWERED && b->log != NULL)
        admission_timeout_log(b, peer);
    return req.result;
}

/* On the loop: the pending admission question, if any, to the embedder. */
static void admission_answer(uv_bridge *b)
{
    uv_mutex_lock(&b->lock);
    admit_request *req = b->admit;
    b->admit = NULL;
    if (req != NULL)
        req->state = ADMIT_TAKEN;
    uv_mutex_unlock(&b->lock);
    if (req == NULL)
        return;
    int result = b->admit_cb(b->user, req->peer, req->decision);
    uv_mutex_lock(&b->lock);
    req->result = result;
    req->state = ADMIT_ANSWERED;
    uv_cond_signal(&b->answered);
    uv_mutex_unlock(&b->lock);
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
    case EVENT_LOG:
        b->log(b->user, ev->log_kind, ev->text);
        break;
    }
}

static void bridge_free(uv_bridge *b)
{
    while (b->head != NULL) {
        bridge_event *next = b->head->next;
        free(b->head);
        b->head = next;
    }
    uv_cond_destroy(&b->answered);
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

/* The thread has ended (or was never started): the tier's handles close,
 * and the done callback follows once they have. */
static void bridge_close(uv_bridge *b)
{
    b->finish(b);
    uv_close((uv_handle_t *)&b->wake, handle_closed);
}

static void bridge_wake(uv_async_t *h)
{
    uv_bridge *b = h->data;
    uv_mutex_lock(&b->lock);
    bridge_event *ev = b->head;
    b->head = NULL;
    b->tail = &b->head;
    int finished = b->finished; /* set after the thread's last event */
    uv_mutex_unlock(&b->lock);
    while (ev != NULL) {
        bridge_event *next = ev->next;
        event_deliver(b, ev);
        free(ev);
        ev = next;
    }
    if (b->admit_cb != NULL)
        admission_answer(b);
    if (finished) {
        uv_thread_join(&b->thread);
        bridge_close(b);
    }
}

/* The bridge's lock, condition and wake-up handle on loop; AFTP_OK or
 * AFTP_ERR_INTERNAL (then nothing is left to undo). */
static int bridge_init(uv_bridge *b, uv_loop_t *loop)
{
    b->tail = &b->head;
    if (uv_mutex_init(&b->lock) != 0)
        return AFTP_ERR_INTERNAL;
    if (uv_cond_init(&b->answered) != 0) {
        uv_mutex_destroy(&b->lock);
        return AFTP_ERR_INTERNAL;
    }
    if (uv_async_init(loop, &b->wake, bridge_wake) != 0) {
        uv_cond_destroy(&b->answered);
        uv_mutex_destroy(&b->lock);
        return AFTP_ERR_INTERNAL;
    }
    b->wake.data = b;
    b->open_handles = 1;
    return AFTP_OK;
}

/* Starts the datapath thread; when it cannot start, the handles close
 * without a done callback and the bridge is freed: AFTP_ERR_INTERNAL. */
static int bridge_start(uv_bridge *b, uv_thread_cb entry)
{
    if (uv_thread_create(&b->thread, entry, b) == 0)
        return AFTP_OK;
    b->done = NULL;
    bridge_close(b);
    return AFTP_ERR_INTERNAL;
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
    bridge_finish_thread(&r->b, rc, aftp_client_errmsg(r->client));
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

/* The tier's callbacks on the client, for those the embedder wants. */
static void send_hook_client(aftp_uv_send *r)
{
    if (r->b.progress != NULL)
        aftp_client_set_progress_cb(r->client, progress_on_thread, &r->b);
    if (r->b.file != NULL)
        aftp_client_set_file_cb(r->client, file_on_thread, &r->b);
    if (r->b.notice != NULL)
        aftp_client_set_notice_cb(r->client, notice_on_thread, &r->b);
}

/* The bridge and the cancel timer of r on loop (uv_timer_init cannot fail:
 * it only links the handle into the loop). */
static int send_init_handles(aftp_uv_send *r, uv_loop_t *loop)
{
    int rc = bridge_init(&r->b, loop);
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
    if ((rc = bridge_start(&r->b, send_thread)) != AFTP_OK)
        return rc;
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

static void server_thread(void *arg)
{
    aftp_uv_server *u = arg;
    int rc = aftp_server_run(u->server);
    bridge_finish_thread(&u->b, rc, aftp_server_errmsg(u->server));
}

static void server_finish(uv_bridge *b)
{
    aftp_server *s = ((aftp_uv_server *)b)->server;
    aftp_server_set_admit_cb(s, NULL, NULL);
    aftp_server_set_receipt_cb(s, NULL, NULL);
    aftp_server_set_progress_cb(s, NULL, NULL);
    aftp_server_set_log_cb(s, NULL, NULL);
}

static void server_release(uv_bridge *b)
{
    free(b);
}

/* The tier's callbacks on the server, for those the embedder wants. */
static void server_hook(aftp_uv_server *u)
{
    if (u->b.admit_cb != NULL)
        aftp_server_set_admit_cb(u->server, admit_on_thread, &u->b);
    if (u->b.receipt != NULL)
        aftp_server_set_receipt_cb(u->server, receipt_on_thread, &u->b);
    if (u->b.progress != NULL)
        aftp_server_set_progress_cb(u->server, progress_on_thread, &u->b);
    if (u->b.log != NULL)
        aftp_server_set_log_cb(u->server, log_on_thread, &u->b);
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
    u->b.admit_cb = own.admit;
    u->b.receipt = own.receipt;
    u->b.progress = own.progress;
    u->b.log = own.log;
    u->b.done = own.stopped;
    u->b.user = own.user;
    u->b.admit_wait_ns = (own.admit_wait_ms != 0 ? own.admit_wait_ms : AFTP_UV_ADMIT_WAIT_MS) *
                         UINT64_C(1000000);
    u->b.finish = server_finish;
    u->b.release = server_release;
    int rc = bridge_init(&u->b, loop);
    if (rc != AFTP_OK) {
        free(u);
        return rc;
    }
    server_hook(u);
    if ((rc = bridge_start(&u->b, server_thread)) != AFTP_OK)
        return rc;
    if (out != NULL)
        *out = u;
    return AFTP_OK;
}

void aftp_uv_server_stop(aftp_uv_server *u)
{
    if (u == NULL || u->stopping)
        return;
    u->stopping = 1;
    /* A stop given to a handle whose run has returned would stop its next
     * run at once (aftp_server_stop() before a run): only a run that has
     * not reported its end is stopped. */
    uv_mutex_lock(&u->b.lock);
    if (!u->b.finished)
        aftp_server_stop(u->server);
    uv_mutex_unlock(&u->b.lock);
}
