/* The server's control plane on a libuv loop (aftp_hub.h). */
#include "aftp_hub.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "aftp_journal.h"
#include "aftp_parse.h"
#include "aftp_serve_session.h"
#include "aftp_worker.h"
#include "common/aftp_handshake.h"
#include "door/aftp_door.h"

struct aftp_hub {
    aftp_serve_shared sh;   /* first: a session's sh leads back to its hub */
    const aftp_serve_opts *o;
    uv_loop_t *loop;
    uv_poll_t listen_poll;
    uv_timer_t timer;
    uv_async_t async;
    int handles_open;       /* closed one by one when the hub ends */
    aftp_udp listener;
    aftp_door door;
    aftp_worker **workers;
    unsigned worker_count;
    aftp_serve_session *sessions; /* every session handed to a worker */
    unsigned served;        /* of them, those holding a slot of max_sessions */
    unsigned refusing;      /* of them, those being refused (limit, drain) */
    unsigned max_sessions;
    pthread_mutex_t ended_lock; /* the workers hand back ended sessions: */
    aftp_serve_session *ended;
    aftp_treestore dir_sweep; /* the server's dir, for its sweeps */
    int have_dir_sweep;
    aftp_serve_root dir_root;
    uint64_t next_sweep_ns;
    int stopping, cancels;  /* the stop: cancels sent (2: forced) */
    uint64_t force_at_ns;
    int draining;
    uint64_t drain_deadline_ns;
    aftp_share_session *shares; /* o->total_rate_bps: max_sessions + 1 of them */
    uint64_t next_share_ns; /* the next round that measures the sessions */
    int shares_stale;       /* a session started or ended since the last split */
    int done;               /* ending: no new session, handles closing */
    int have_result;        /* `once`: the session that counts ended */
    aftp_io_result *res;
    int rc;
    void (*on_done)(void *ctx);
    void *ctx;
};

static aftp_hub *hub_of(aftp_serve_shared *sh)
{
    return (aftp_hub *)((char *)sh - offsetof(aftp_hub, sh));
}

static uint64_t now_ns(void)
{
    return aftp_drive_now_ns();
}

static void warn(aftp_hub *h, const char *text)
{
    AFTP_SERVE_CALLBACK(&h->sh, aftp_io_warn(&h->o->hooks, text));
}

/* ---- the table ---- */

static void table_insert(aftp_hub *h, aftp_serve_session *ss)
{
    ss->prev = NULL;
    ss->next = h->sessions;
    if (h->sessions != NULL)
        h->sessions->prev = ss;
    h->sessions = ss;
}

static void table_remove(aftp_hub *h, aftp_serve_session *ss)
{
    if (ss->prev != NULL)
        ss->prev->next = ss->next;
    else
        h->sessions = ss->next;
    if (ss->next != NULL)
        ss->next->prev = ss->prev;
    h->served -= ss->counts;
    h->refusing -= ss->refusing;
}

static aftp_serve_session *session_from(const aftp_hub *h, const struct sockaddr *from)
{
    for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        if (aftp_door_same_addr(from, (const struct sockaddr *)&ss->addr))
            return ss;
    return NULL;
}

static int same_root(const aftp_serve_root *a, const aftp_serve_root *b)
{
    return a->dev == b->dev && a->ino == b->ino;
}

/* Whether a session other than `except` runs beneath `root`. */
static int root_in_use(const aftp_hub *h, const aftp_serve_root *root,
                       const aftp_serve_session *except)
{
    for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        if (ss != except && same_root(&ss->root, root))
            return 1;
    return 0;
}

/* A session's storage closes: its root's empty resume directory stays
 * while another session of that root runs. */
static void release(const aftp_hub *h, aftp_serve_session *ss)
{
    aftp_serve_session_del(ss, root_in_use(h, &ss->root, ss));
}

/* Sessions whose client has not confirmed the handshake yet. */
static unsigned handshaking(const aftp_hub *h)
{
    unsigned n = 0;
    for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        n += (unsigned)__atomic_load_n(&ss->handshaking, __ATOMIC_RELAXED);
    return n;
}

static int under_load(const aftp_hub *h)
{
    return h->o->once ? h->sessions != NULL
                      : (h->served + h->refusing) * 4 >= h->max_sessions * 3 ||
                            handshaking(h) >= AFTP_HUB_HANDSHAKING_LOAD;
}

/* ---- sessions ending (workers -> loop) ---- */

/* A worker's on_end: the session ended on that worker; its storage's last
 * steps run there, then the loop takes it. */
static void session_ended(void *app, aftp_worker_session *ws, int rc)
{
    aftp_serve_session *ss = app;
    aftp_hub *h = hub_of(ss->sh);
    (void)ws;
    aftp_serve_session_end(ss, rc);
    pthread_mutex_lock(&h->ended_lock);
    ss->ended = 1;
    ss->ended_next = h->ended;
    h->ended = ss;
    pthread_mutex_unlock(&h->ended_lock);
    uv_async_send(&h->async);
}

static void finish(aftp_hub *h);

/* `once`: the first session not refused at its handshake ends the run
 * with its result. */
static void once_check(aftp_hub *h, const aftp_serve_session *ss)
{
    if (!h->o->once || !ss->counts || aftp_serve_session_refused(ss))
        return;
    *h->res = ss->res;
    h->rc = ss->res.error;
    h->have_result = 1;
    h->draining = 1; /* nothing new; the run ends when the table is empty */
    h->drain_deadline_ns = UINT64_MAX;
}

/* The loop's side of an end: out of the table, reported, the rest of the
 * sweep its root's opening began, freed. */
static void retire(aftp_hub *h, aftp_serve_session *ss)
{
    table_remove(h, ss);
    h->shares_stale = 1;
    aftp_serve_session_report(ss);
    once_check(h, ss);
    if (ss->rootfd >= 0 && !root_in_use(h, &ss->root, NULL))
        aftp_serve_session_sweep(ss, UINT_MAX);
    release(h, ss);
}

static void take_ended(aftp_hub *h)
{
    for (;;) {
        pthread_mutex_lock(&h->ended_lock);
        aftp_serve_session *ss = h->ended;
        if (ss != NULL)
            h->ended = ss->ended_next;
        pthread_mutex_unlock(&h->ended_lock);
        if (ss == NULL)
            return;
        retire(h, ss);
    }
}

static void on_async(uv_async_t *a)
{
    aftp_hub *h = a->data;
    take_ended(h);
    if ((h->stopping || h->draining) && h->sessions == NULL)
        finish(h);
}

/* ---- the total rate cap (aftp_share.h) ---- */

/* The sessions the total is shared between (not those being refused),
 * as the allocator sees them, in table order; returns how many. */
static size_t gather_shares(const aftp_hub *h)
{
    size_t n = 0;
    for (const aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        if (ss->counts)
            h->shares[n++] = ss->share;
    return n;
}

static uint64_t entry_share(const aftp_serve_shared *sh, uint64_t cap_bps)
{
    aftp_hub *h = hub_of((aftp_serve_shared *)sh);
    return aftp_share_entry(h->o->total_rate_bps, h->shares, gather_shares(h), cap_bps);
}

/* Each tick: once a round the sessions' rates are measured; then, or when
 * a session started or ended, the total is split again and each session
 * gets its share (its worker applies it). */
static void share_round(aftp_hub *h, uint64_t now)
{
    int measure = now >= h->next_share_ns;
    if (h->o->total_rate_bps == 0 || (!measure && !h->shares_stale))
        return;
    if (measure) {
        h->next_share_ns = now + AFTP_SHARE_ROUND_NS;
        for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
            aftp_serve_session_measure(ss, now);
    }
    size_t n = gather_shares(h);
    aftp_share_split(h->o->total_rate_bps, h->shares, n);
    n = 0;
    for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        if (ss->counts)
            __atomic_store_n(&ss->share_bps, h->shares[n++].share_bps, __ATOMIC_RELAXED);
    h->shares_stale = 0;
}

/* ---- new sessions ---- */

static aftp_worker *least_loaded(const aftp_hub *h)
{
    aftp_worker *best = h->workers[0];
    for (unsigned i = 1; i < h->worker_count; i++)
        if (aftp_worker_sessions(h->workers[i]) < aftp_worker_sessions(best))
            best = h->workers[i];
    return best;
}

/* The session goes to the least loaded worker, which runs it from now on. */
static void hand_over(aftp_hub *h, aftp_serve_session *ss)
{
    aftp_worker_job job = {.drive = &ss->d, .on_end = session_ended, .app = ss};
    aftp_worker_session *ws = NULL;
    ss->worker = least_loaded(h);
    table_insert(h, ss);
    h->shares_stale = 1;
    int rc = aftp_worker_add(ss->worker, &job, &ws);
    if (rc != AFTP_OK) { /* no worker takes it: it ends now */
        aftp_serve_session_end(ss, rc);
        retire(h, ss);
        return;
    }
    ss->worker_session = ws;
}

/* Tells the operator why a HELLO started nothing, when the door's report
 * limit lets it. */
static void report_dropped(aftp_hub *h, const aftp_serve_session *ss, uint64_t now)
{
    const aftp_serve_opts *o = h->o;
    const struct sockaddr *from = (const struct sockaddr *)&ss->addr;
    uint64_t unreported;
    if (o->on_hello_dropped == NULL ||
        !aftp_door_report_drop(&h->door, from, ss->conn_id, now, &unreported))
        return;
    int why = ss->probe.ts_refused  ? AFTP_SERVE_DROP_TIMESTAMP
              : ss->probe.looked_up ? AFTP_SERVE_DROP_PSK
                                    : AFTP_SERVE_DROP_UNOPENED;
    AFTP_SERVE_CALLBACK(&h->sh, o->on_hello_dropped(o->hooks.app, from, why,
                                                    why == AFTP_SERVE_DROP_UNOPENED
                                                        ? NULL
                                                        : ss->probe.key,
                                                    unreported));
}

static void control_tick(aftp_hub *h, uint64_t now)
{
    const aftp_serve_opts *o = h->o;
    if (o->on_control_tick != NULL)
        AFTP_SERVE_CALLBACK(&h->sh, o->on_control_tick(o->hooks.app, now));
}

/* Why a client the server will not serve now is refused, or NULL when it
 * is served. */
static const char *refusal_of(const aftp_hub *h, char *buf, size_t cap)
{
    if (h->draining) {
        snprintf(buf, cap, "the server is shutting down and takes no new session, try again "
                           "later");
        return buf;
    }
    if (h->served < h->max_sessions)
        return NULL;
    snprintf(buf, cap, "the server is serving its maximum of %u sessions, try again later",
             h->max_sessions);
    return buf;
}

/* The session the engine took: served in a slot, or refused (at once: its
 * CLOSE is due; or once its handshake completes). 0: dropped instead, as
 * too many refusals run already (their state stays bounded). */
static int place(aftp_hub *h, aftp_serve_session *ss, const char *refusal)
{
    if (!aftp_serve_session_admitted(ss) || refusal != NULL) {
        if (h->refusing >= AFTP_HUB_REFUSING_MAX)
            return 0;
        if (refusal != NULL && aftp_serve_session_admitted(ss))
            aftp_serve_session_refuse(ss, refusal);
        ss->refusing = 1;
        h->refusing++;
        return 1;
    }
    ss->counts = 1;
    h->served++;
    if (ss->rootfd >= 0 && !root_in_use(h, &ss->root, NULL)) /* bounded: the handshake waits */
        aftp_serve_session_sweep(ss, AFTP_SERVE_SWEEP_BUDGET);
    return 1;
}

/* A HELLO the door started: a session, its handshake run now. */
static void start_session(aftp_hub *h, const uint8_t *pkt, size_t len,
                          const struct sockaddr *from, const aftp_wire_packet *hello, uint64_t now)
{
    char why[256], text[160];
    control_tick(h, now);
    const char *refusal = refusal_of(h, text, sizeof text);
    if (refusal != NULL && (h->o->once || h->refusing >= AFTP_HUB_REFUSING_MAX))
        return; /* silence: the client resends, and is served or refused later */
    int pull = hello->u.hello.role == AFTP_WIRE_ROLE_PULL;
    uint32_t conn_id = hello->hdr.conn_id;
    aftp_serve_session *ss =
        aftp_serve_session_new(&h->sh, &h->listener, from, conn_id, pull, why, sizeof why);
    if (ss == NULL) {
        warn(h, why);
        return;
    }
    if (!aftp_serve_session_hello(ss, pkt, len, now)) {
        report_dropped(h, ss, now);
        release(h, ss);
        return;
    }
    aftp_door_session_started(&h->door, from, conn_id);
    if (place(h, ss, refusal))
        hand_over(h, ss);
    else
        release(h, ss);
}

/* One datagram that reached the listener. */
static void on_datagram(aftp_hub *h, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                        uint64_t now)
{
    aftp_door_verdict v;
    if (h->done || h->stopping || session_from(h, from) != NULL)
        return;
    switch (aftp_door_input(&h->door, pkt, len, from, under_load(h), now, &v)) {
    case AFTP_DOOR_START: start_session(h, pkt, len, from, &v.hello, now); break;
    case AFTP_DOOR_REPLY: aftp_udp_send_to(&h->listener, v.reply, v.reply_len, from); break;
    default: break;
    }
}

static void on_listener(uv_poll_t *p, int status, int events)
{
    aftp_hub *h = p->data;
    size_t count = 0;
    (void)events;
    if (status < 0 || aftp_udp_recv(&h->listener, &count) != AFTP_OK)
        return;
    aftp_udp_iter it = {0};
    const uint8_t *pkt;
    size_t len;
    const struct sockaddr *from;
    uint64_t now = now_ns();
    while (aftp_udp_next(&h->listener, &it, &pkt, &len, &from))
        on_datagram(h, pkt, len, from, now);
}

/* ---- the timer: stop, drain, sweeps ---- */

static int flag(const atomic_int *f)
{
    return f != NULL && atomic_load(f) != 0;
}

/* Every session is cancelled; the second time, without waiting for its
 * client. Under the lock the workers hand sessions back by: one whose
 * on_end got that far is left alone, as its worker session may be gone
 * (the worker never holds its own lock while it calls on_end). */
static void cancel_all(aftp_hub *h)
{
    pthread_mutex_lock(&h->ended_lock);
    for (aftp_serve_session *ss = h->sessions; ss != NULL; ss = ss->next)
        if (!ss->ended)
            aftp_worker_cancel(ss->worker, ss->worker_session);
    pthread_mutex_unlock(&h->ended_lock);
}

static void stop_step(aftp_hub *h, uint64_t now)
{
    if (h->cancels == 0 || (h->cancels == 1 && now >= h->force_at_ns)) {
        cancel_all(h);
        h->cancels++;
        h->force_at_ns = now + AFTP_HUB_FORCE_NS;
    }
}

static void begin_drain(aftp_hub *h, uint64_t now)
{
    const aftp_serve_opts *o = h->o;
    uint64_t timeout = o->drain_timeout_ns ? o->drain_timeout_ns
                                           : AFTP_SERVE_DRAIN_TIMEOUT_DEFAULT_NS;
    h->draining = 1;
    h->drain_deadline_ns = now + timeout;
    if (o->on_draining != NULL)
        AFTP_SERVE_CALLBACK(&h->sh, o->on_draining(o->hooks.app, h->served, timeout));
}

/* The server's dir, for its sweeps (AFTP_OK or why not, in the result). */
static int dir_sweep_init(aftp_hub *h)
{
    const aftp_serve_opts *o = h->o;
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    int rc = aftp_treestore_init(&h->dir_sweep, o->dirfd, &opt, h->res->message,
                                 sizeof h->res->message);
    if (rc == AFTP_OK && o->partial_max_age_s != 0)
        h->dir_sweep.sweep.max_age_s = o->partial_max_age_s;
    return rc;
}

/* The resume directory the sweeps hold is the one the server's dir has
 * now: a session that ended may have removed it (empty), and a later one
 * made another. */
static void refresh_dir_sweep(aftp_hub *h)
{
    struct stat held, now;
    int on_disk = fstatat(h->o->dirfd, AFTP_JOURNAL_DIR, &now, AT_SYMLINK_NOFOLLOW) == 0;
    int holding = h->dir_sweep.partial_dir >= 0 && fstat(h->dir_sweep.partial_dir, &held) == 0;
    if (on_disk == holding &&
        (!on_disk || (held.st_dev == now.st_dev && held.st_ino == now.st_ino)))
        return;
    h->dir_sweep.keep_partial_dir = 1; /* the one on disk is not ours to remove */
    aftp_treestore_fini(&h->dir_sweep);
    (void)dir_sweep_init(h); /* a bad one: the next look tries again */
}

/* The server's dir: a sweep step while no session of it runs. */
static void idle_sweep(aftp_hub *h, uint64_t now)
{
    const aftp_serve_opts *o = h->o;
    if (!h->have_dir_sweep || now < h->next_sweep_ns || root_in_use(h, &h->dir_root, NULL))
        return;
    h->next_sweep_ns = now + AFTP_HUB_SWEEP_NS;
    refresh_dir_sweep(h);
    int removed = aftp_treestore_sweep_step(&h->dir_sweep, AFTP_SERVE_SWEEP_BUDGET);
    if (removed > 0 && o->on_swept != NULL)
        AFTP_SERVE_CALLBACK(&h->sh, o->on_swept(o->hooks.app, removed, 0));
}

static void on_timer(uv_timer_t *t)
{
    aftp_hub *h = t->data;
    const aftp_serve_opts *o = h->o;
    uint64_t now = now_ns();
    if (h->done)
        return;
    control_tick(h, now);
    take_ended(h);
    if (!h->stopping && flag(o->hooks.interrupt))
        h->stopping = 1;
    if (!h->draining && flag(o->drain))
        begin_drain(h, now);
    if (h->draining && now >= h->drain_deadline_ns)
        h->stopping = 1;
    if (h->stopping)
        stop_step(h, now);
    idle_sweep(h, now);
    share_round(h, now);
    if ((h->stopping || h->draining) && h->sessions == NULL)
        finish(h);
}

/* ---- start and end ---- */

static void on_closed(uv_handle_t *handle)
{
    aftp_hub *h = handle->data;
    if (--h->handles_open == 0 && h->on_done != NULL)
        h->on_done(h->ctx); /* may free h: nothing touches it after */
}

/* The handles opened so far close (in the order they open: the timer,
 * the listener's poll, the async); on_done follows the last. */
static void close_handles(aftp_hub *h)
{
    uv_handle_t *handles[] = {(uv_handle_t *)&h->timer, (uv_handle_t *)&h->listen_poll,
                              (uv_handle_t *)&h->async};
    int open = h->handles_open;
    h->done = 1;
    for (int i = 0; i < open; i++)
        uv_close(handles[i], on_closed);
}

/* The table is empty: the handles close, then on_done. */
static void finish(aftp_hub *h)
{
    if (h->done)
        return;
    if (h->o->once && !h->have_result) /* stopped before the session ended */
        h->rc = h->res->error = AFTP_ERR_CANCELLED;
    close_handles(h);
}

/* Why the listener could not be opened, and what to do. */
static const char *listen_failure(int sys_errno, int rc)
{
    switch (sys_errno) {
    case 0: return aftp_strerror(rc);
    case EADDRINUSE:
        return "address in use (another program holds this port, perhaps another 'aftp recv'; "
               "stop it or choose another port)";
    case EACCES: return "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)";
    case EADDRNOTAVAIL: return "no interface of this host has that address";
    default: return strerror(sys_errno);
    }
}

static int open_listener(aftp_hub *h)
{
    const aftp_serve_opts *o = h->o;
    /* It reads only HELLOs (1200 bytes) and key requests: a session's
     * datagrams go to that session's own socket. */
    int rc = aftp_udp_open(&h->listener, o->listen, o->listen_len, AFTP_IO_DATAGRAM,
                           AFTP_UDP_PORT_SERVE);
    if (rc != AFTP_OK) {
        char where[64];
        aftp_format_addr(o->listen, where, sizeof where);
        snprintf(h->res->message, sizeof h->res->message, "cannot listen on %s: %s", where,
                 listen_failure(h->listener.sys_errno, rc));
        return rc;
    }
    aftp_io_warn(&o->hooks, aftp_drop_warning(&h->listener.drop));
    struct sockaddr_storage local;
    if (o->on_listening && aftp_udp_local_addr(&h->listener, &local) == AFTP_OK)
        o->on_listening(o->hooks.app, (struct sockaddr *)&local);
    return AFTP_OK;
}

#ifdef AFTP_TEST_HOOKS
/* TEST-ONLY (builds with the test hooks, never a release):
 * AFTP_SERVE_RETRY_ENV=1 makes every HELLO without a valid cookie get a
 * RETRY, so tests exercise the exchange; the operator is warned. */
static int retry_forced(const aftp_io_hooks *hooks)
{
    const char *force = getenv(AFTP_SERVE_RETRY_ENV);
    int forced = force != NULL && strcmp(force, "1") == 0;
    if (forced)
        aftp_io_warn(hooks, "test RETRY shim active (" AFTP_SERVE_RETRY_ENV ")");
    return forced;
}
#else
static int retry_forced(const aftp_io_hooks *hooks)
{
    (void)hooks; /* a release build has no code that reads the variable */
    return 0;
}
#endif

/* The door, with the public key that answers key requests (a protected
 * server's; an unprotected one has none to give). */
static int open_door(const aftp_serve_opts *o, aftp_door *door)
{
    uint8_t public_key[AFTP_KEY_LEN];
    aftp_door_settings set = {.force_retry = retry_forced(&o->hooks)};
    int protected = o->security.cipher != AFTP_CIPHER_NONE && o->security.identity != NULL;
    int rc = protected ? aftp_hs_public_key(o->security.identity, public_key) : AFTP_OK;
    if (rc != AFTP_OK)
        return rc;
    set.server_key = protected ? public_key : NULL;
    return aftp_door_init(door, &set, now_ns());
}

/* The workers: as many as asked, else one per online CPU. */
static int open_workers(aftp_hub *h)
{
    char err[256];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = h->o->workers ? h->o->workers : cpus > 0 ? (unsigned)cpus : 1u;
    h->workers = calloc(n, sizeof *h->workers);
    if (h->workers == NULL)
        return AFTP_ERR_NO_MEMORY;
    for (; h->worker_count < n; h->worker_count++) {
        int rc = aftp_worker_new(&h->workers[h->worker_count], h->worker_count, err, sizeof err);
        if (rc != AFTP_OK) {
            snprintf(h->res->message, sizeof h->res->message, "%s", err);
            return rc;
        }
    }
    return AFTP_OK;
}

/* The sessions' group commits share a pool of one thread more than the
 * workers, and of three at least: one filesystem holds all its threads but
 * one (aftp_committer.h), so the commits on one filesystem still run as
 * parallel as the datapaths, and a filesystem that stalls its fsyncs never
 * holds the commits on another. A server that keeps nothing (faux)
 * commits nothing. */
static int open_commit_pool(aftp_hub *h)
{
    if (h->o->faux || h->o->pipeline_window == 0)
        return AFTP_OK;
    int rc = aftp_commit_pool_new(&h->sh.commits,
                                  h->worker_count + 1 > 3 ? h->worker_count + 1 : 3);
    if (rc != AFTP_OK)
        snprintf(h->res->message, sizeof h->res->message, "no memory for the commit threads");
    return rc;
}

/* The server's dir, for its sweeps: in full now, before any client. */
static int open_dir_sweep(aftp_hub *h)
{
    const aftp_serve_opts *o = h->o;
    if (o->pipeline_window == 0 || o->faux)
        return AFTP_OK;
    int rc = dir_sweep_init(h);
    if (rc != AFTP_OK)
        return rc;
    h->have_dir_sweep = 1;
    aftp_serve_root_of(o->dirfd, &h->dir_root);
    int removed = aftp_treestore_sweep_step(&h->dir_sweep, UINT_MAX);
    if (removed > 0 && o->on_swept != NULL)
        o->on_swept(o->hooks.app, removed, 0);
    return AFTP_OK;
}

/* The listener's poll, the timer's ticks and the async (the timer handle
 * itself is the hub's first, opened with it). */
static int open_handles(aftp_hub *h)
{
    int rc = uv_poll_init(h->loop, &h->listen_poll, h->listener.fd);
    if (rc == 0) {
        h->listen_poll.data = h;
        h->handles_open++;
        rc = uv_poll_start(&h->listen_poll, UV_READABLE, on_listener);
    }
    if (rc == 0)
        rc = uv_timer_start(&h->timer, on_timer, AFTP_HUB_TICK_NS / 1000000u,
                            AFTP_HUB_TICK_NS / 1000000u);
    if (rc == 0 && (rc = uv_async_init(h->loop, &h->async, on_async)) == 0) {
        h->async.data = h;
        h->handles_open++;
    }
    if (rc != 0)
        snprintf(h->res->message, sizeof h->res->message, "cannot start the event loop: %s",
                 uv_strerror(rc));
    return rc == 0 ? AFTP_OK : AFTP_ERR_INTERNAL;
}

/* The table of files the pushes write (one writer per file); a server
 * that keeps nothing (faux) has no files to share. */
static int open_file_locks(aftp_hub *h)
{
    if (h->o->faux)
        return AFTP_OK;
    h->sh.files = aftp_filelocks_new();
    if (h->sh.files != NULL)
        return AFTP_OK;
    snprintf(h->res->message, sizeof h->res->message, "no memory for the table of files");
    return AFTP_ERR_NO_MEMORY;
}

/* What every start needs before the loop runs. */
static int open_all(aftp_hub *h)
{
    int rc = open_file_locks(h);
    if (rc == AFTP_OK)
        rc = open_door(h->o, &h->door);
    if (rc == AFTP_OK)
        rc = open_listener(h);
    if (rc == AFTP_OK)
        rc = open_dir_sweep(h);
    if (rc == AFTP_OK)
        rc = open_workers(h);
    if (rc == AFTP_OK)
        rc = open_commit_pool(h);
    if (rc == AFTP_OK)
        rc = open_handles(h);
    return rc;
}

int aftp_hub_start(aftp_hub **out, struct uv_loop_s *loop, const aftp_serve_opts *o,
                   aftp_io_result *res, void (*on_done)(void *ctx), void *ctx)
{
    aftp_hub *h = calloc(1, sizeof *h);
    *out = NULL;
    memset(res, 0, sizeof *res);
    res->phase = AFTP_IO_PHASE_LOCAL;
    if (h == NULL)
        return res->error = AFTP_ERR_NO_MEMORY;
    h->sh.o = h->o = o;
    h->sh.entry_share = entry_share;
    h->loop = loop;
    h->res = res;
    h->listener.fd = -1;
    h->on_done = on_done;
    h->ctx = ctx;
    h->max_sessions = o->once ? 1u : o->max_sessions ? o->max_sessions
                                                       : AFTP_SERVE_MAX_SESSIONS_DEFAULT;
    pthread_mutex_init(&h->sh.cb_lock, NULL);
    pthread_mutex_init(&h->ended_lock, NULL);
    (void)uv_timer_init(loop, &h->timer); /* cannot fail: it only links the handle in */
    h->timer.data = h;
    h->handles_open = 1; /* so a start that fails still ends by a close: on_done later */
    *out = h;
    if (o->total_rate_bps != 0)
        h->shares = calloc(h->max_sessions + 1u, sizeof *h->shares);
    int rc = o->total_rate_bps != 0 && h->shares == NULL ? AFTP_ERR_NO_MEMORY : open_all(h);
    if (rc != AFTP_OK) {
        h->rc = res->error = rc;
        close_handles(h);
        return rc;
    }
    res->phase = AFTP_IO_PHASE_SESSION;
    return AFTP_OK;
}

void aftp_hub_look_now(aftp_hub *h)
{
    if (!h->done) /* the tick runs on the loop's next turn, then every period as before */
        (void)uv_timer_start(&h->timer, on_timer, 0, AFTP_HUB_TICK_NS / 1000000u);
}

/* h->rc: the start's error; with `once`, the session's result; else AFTP_OK. */
int aftp_hub_result(const aftp_hub *h)
{
    return h->rc;
}

void aftp_hub_del(aftp_hub *h)
{
    if (h == NULL)
        return;
    for (unsigned i = 0; i < h->worker_count; i++)
        aftp_worker_del(h->workers[i]); /* the table is empty: no on_end comes */
    free(h->workers);
    aftp_commit_pool_del(h->sh.commits); /* after the sessions: no group in flight */
    if (h->have_dir_sweep)
        aftp_treestore_fini(&h->dir_sweep);
    aftp_door_fini(&h->door);
    aftp_udp_close(&h->listener);
    aftp_filelocks_del(h->sh.files); /* after the sessions and the sweep: none holds a file */
    pthread_mutex_destroy(&h->ended_lock);
    pthread_mutex_destroy(&h->sh.cb_lock);
    free(h->shares);
    free(h);
}
