#include "aftp_serve.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "door/aftp_admit.h"
#include "aftp_committer.h"
#include "aftp_drive.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "aftp_serve_pull.h"
#include "aftp_store.h"
#include "aftp_udp.h"
#include "common/aftp_handshake.h"
#include "door/aftp_door.h"
#include "proto/aftp_wire.h"

/* The receive buffer absorbs what arrives while the loop is busy (page
 * faults, writeback): 50 ms at 10 Gbit/s. The rate is the sender's choice,
 * unknown here, so the server sizes for the fastest link we target. */
#define SERVE_RCV_RATE_BPS UINT64_C(10000000000)
#define SERVE_RCV_WINDOW_NS 50000000u
/* An idle server looks at its stop flag this often: a stop from another
 * thread, unlike a signal, does not interrupt the wait. */
#define SERVE_ACCEPT_POLL_NS 100000000u
/* How often a busy server answers other clients waiting on its listener. */
#define SERVE_BUSY_POLL_NS 5000000u


static socklen_t addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* The client a session is for: its address and its connection id (the
 * HELLO header carries the client's own id). */
typedef struct serve_client {
    struct sockaddr_storage addr;
    uint32_t conn_id;
} serve_client;

/* How far the HELLO being started got with the admission policy, so a
 * HELLO that started nothing can be explained (enum aftp_serve_drop). */
typedef struct serve_probe {
    const struct sockaddr *from; /* the HELLO's sender */
    int looked_up;  /* message 1 opened as far as the client's key */
    int ts_refused; /* the policy refused its timestamp */
    int refused;    /* unprotected: the admission refused the session */
    int admitted;   /* unprotected: the admission ran */
    uint8_t key[AFTP_KEY_LEN];
} serve_probe;

/* What the server keeps across sessions, and the current session's parts. */
typedef struct serve_state {
    const aftp_serve_opts *o;
    aftp_udp listener;
    aftp_door door;
    serve_client client;  /* of the current session, else of the last one */
    aftp_io_ctx *ctx;     /* the current session's */
    aftp_drive *d;
    int pull;              /* the current session is a pull: d->sender serves it */
    int session_root;      /* the current session's root, chosen by o->admit; -1: none */
    uint64_t session_rate_cap; /* its sender's cap, chosen by o->admit; 0: none */
    uint64_t next_poll_ns; /* when a session next looks at the listener */
    serve_probe probe;
    aftp_storage_ops tree_ops; /* aftp_treestore_ops, its decisions reported (on_entry) */
    aftp_committer committer;  /* the session's group commits, beside its packets */
    int swept_at_start;        /* the server's dir had its full sweep */
    uint64_t next_sweep_ns;    /* an idle server's next sweep step */
} serve_state;

/* The admission policy, as the receiver calls it, noting what it saw. */
static int probe_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    serve_state *st = user;
    const aftp_peer_policy *policy = &st->o->security.peers;
    st->probe.looked_up = 1;
    memcpy(st->probe.key, client_key, AFTP_KEY_LEN);
    return policy->lookup(policy->user, client_key, psk);
}

static int pipelined(const aftp_serve_opts *o)
{
    return o->pipeline_window > 0 && !o->faux;
}

/* The session's storage, empty, writing beneath `dirfd`. */
static int storage_open(serve_state *st, int dirfd)
{
    const aftp_serve_opts *o = st->o;
    aftp_io_ctx *ctx = st->ctx;
    if (o->faux) {
        memset(&ctx->storage.sink, 0, sizeof ctx->storage.sink);
        return AFTP_OK;
    }
    if (!pipelined(o)) {
        aftp_store_init(&ctx->storage.store, dirfd, o->overwrite);
        return AFTP_OK;
    }
    aftp_place_options opt;
    if (o->place != NULL)
        opt = *o->place;
    else
        aftp_place_defaults(&opt);
    opt.overwrite = o->overwrite;
    char why[256];
    int rc = aftp_treestore_init(&ctx->storage.tree_dst, dirfd, &opt, why, sizeof why);
    if (rc != AFTP_OK)
        snprintf(ctx->res->message, sizeof ctx->res->message, "%s", why);
    else if (o->partial_max_age_s != 0)
        ctx->storage.tree_dst.sweep.max_age_s = o->partial_max_age_s;
    return rc;
}

static void storage_close(serve_state *st)
{
    if (st->o->faux)
        return;
    if (st->pull) {
        aftp_pullsrc_fini(&st->ctx->storage.pull_src);
        return;
    }
    if (pipelined(st->o))
        aftp_treestore_fini(&st->ctx->storage.tree_dst);
    else
        aftp_store_fini(&st->ctx->storage.store);
}

/* The storage writes beneath `dirfd` from now on. */
static int storage_move(serve_state *st, int dirfd)
{
    if (st->o->faux)
        return AFTP_OK;
    if (st->pull) { /* nothing resolved yet */
        st->ctx->storage.pull_src.root_fd = dirfd;
        return AFTP_OK;
    }
    if (!pipelined(st->o)) {
        st->ctx->storage.store.dirfd = dirfd;
        return AFTP_OK;
    }
    storage_close(st); /* nothing received yet: only the partial directory */
    return storage_open(st, dirfd);
}

/* Removes resume state no sender came back for beneath the storage's
 * root, looking at up to `budget` entries (UINT_MAX: the rest of a pass);
 * best effort: a sweep that fails is tried again at the next step. */
static void sweep_partial(serve_state *st, unsigned budget)
{
    const aftp_serve_opts *o = st->o;
    if (!pipelined(o) || st->pull)
        return;
    int removed = aftp_treestore_sweep_step(&st->ctx->storage.tree_dst, budget);
    if (removed > 0 && o->on_swept != NULL)
        o->on_swept(o->hooks.app, removed, st->session_root >= 0);
}

static void close_session_root(serve_state *st)
{
    if (st->session_root >= 0)
        close(st->session_root);
    st->session_root = -1;
}

/* The root of a HELLO that started nothing goes with it; the storage
 * writes beneath the server's directory again. */
static void drop_session_root(serve_state *st)
{
    if (st->session_root < 0)
        return;
    storage_move(st, st->o->dirfd);
    close_session_root(st);
}

/* The server's own admission (o->admit): refuse, or admit into a root. */
static int admit_session(serve_state *st, const uint8_t *client_key)
{
    const aftp_serve_opts *o = st->o;
    int rootfd = -1;
    st->session_rate_cap = 0;
    if (o->admit == NULL)
        return AFTP_OK;
    drop_session_root(st);
    int rc = o->admit(o->hooks.app, st->probe.from, client_key, &rootfd, &st->session_rate_cap);
    if (rc != AFTP_OK || rootfd < 0)
        return rc;
    st->session_root = rootfd;
    rc = storage_move(st, rootfd);
    if (rc == AFTP_OK) /* bounded: the handshake waits for it */
        sweep_partial(st, AFTP_SERVE_SWEEP_BUDGET);
    return rc;
}

/* Message 1 opened in full (the client proved its key) once the timestamp
 * is there to check: the policy's replay rule, then the admission. */
static int probe_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    serve_state *st = user;
    const aftp_peer_policy *policy = &st->o->security.peers;
    int rc = policy->check_timestamp != NULL
                 ? policy->check_timestamp(policy->user, client_key, ts)
                 : AFTP_OK;
    st->probe.ts_refused = rc != AFTP_OK;
    return rc == AFTP_OK ? admit_session(st, client_key) : rc;
}

/* An unprotected session has no key to admit earlier: its admission runs
 * when the engine, having accepted the HELLO, first asks about the client
 * (its role, its cap), before the HELLO_ACK is built. */
static void admit_unprotected(serve_state *st)
{
    if (!st->probe.admitted)
        st->probe.refused = admit_session(st, NULL) != AFTP_OK;
    st->probe.admitted = 1;
}

/* The engine accepted the HELLO and asks for its sender's cap. */
static uint64_t probe_rate_cap(void *user, const uint8_t *client_key)
{
    serve_state *st = user;
    if (client_key == NULL)
        admit_unprotected(st);
    return st->probe.refused ? 0 : st->session_rate_cap;
}

/* After the admission (an unprotected session's runs here): may the
 * admitted client push, or pull (o->role_allowed)? */
static int probe_role_allowed(void *user, const uint8_t *client_key, int role)
{
    serve_state *st = user;
    if (client_key == NULL)
        admit_unprotected(st);
    if (st->probe.refused || st->o->role_allowed == NULL)
        return AFTP_OK;
    return st->o->role_allowed(st->o->hooks.app, role);
}

/* What the session's engine gets as `user`: the run's context, and the
 * server it serves (for on_session_event). */
typedef struct serve_ctx {
    aftp_io_ctx io; /* first: aftp_io_on_event finds it from &io.storage */
    serve_state *st;
} serve_ctx;

/* The context of the engine's `user` (&io.storage). */
static serve_ctx *serve_ctx_of(void *user)
{
    return (serve_ctx *)((char *)user - offsetof(aftp_io_ctx, storage));
}

static void serve_on_event(void *user, const aftp_event *ev)
{
    serve_ctx *sc = serve_ctx_of(user);
    const aftp_serve_opts *o = sc->st->o;
    aftp_stats stats;
    aftp_io_on_event(user, ev);
    if (o->on_session_event == NULL)
        return;
    aftp_drive_stats(sc->st->d, &stats);
    o->on_session_event(o->hooks.app, ev, &stats);
}

/* The pipelined storage's decision, reported to the server (on_entry). */
static int serve_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    serve_ctx *sc = serve_ctx_of(user);
    const aftp_serve_opts *o = sc->st->o;
    aftp_stats stats;
    int rc = aftp_treestore_ops.entry(user, info, out);
    if (rc != AFTP_OK || o->on_entry == NULL)
        return rc;
    aftp_receiver_get_stats(sc->st->d->receiver, &stats);
    o->on_entry(o->hooks.app, info, out, &stats);
    return rc;
}

/* The group commit beside the packet loop (aftp_committer.h): begun now,
 * its outcome handed to the engine by commit_check. */
static int serve_commit_start(void *user, const uint32_t *ids, size_t count)
{
    return aftp_committer_start(&serve_ctx_of(user)->st->committer, ids, count);
}

/* The engine's synchronous commit (its last group, at the session's end)
 * waits for the group in flight: one group at a time in the treestore. */
static int serve_commit_group(void *user, const uint32_t *ids, size_t count, int *results)
{
    aftp_committer_settle(&serve_ctx_of(user)->st->committer);
    return aftp_treestore_ops.commit_group(user, ids, count, results);
}

/* The drive loop's turn (on_wake), and once after it with `wait`: a group
 * the worker made durable gets its FILE_RESULTs. */
static void commit_check(serve_state *st, uint64_t now_ns, int wait)
{
    const int *results;
    if (aftp_committer_busy(&st->committer) &&
        aftp_committer_collect(&st->committer, wait, &results))
        (void)aftp_receiver_commit_done(st->d->receiver, now_ns, AFTP_OK, results);
}

static void commit_check_now(void *ctx, uint64_t now_ns)
{
    commit_check(ctx, now_ns, 0);
}

/* The admission as the engine of either role asks it (the probes). */
static aftp_peer_policy probe_policy(serve_state *st)
{
    aftp_peer_policy probe = {.rate_cap = probe_rate_cap, .role_allowed = probe_role_allowed,
                              .user = st};
    if (st->o->security.peers.lookup != NULL) {
        probe.lookup = probe_lookup;
        probe.check_timestamp = probe_check_timestamp;
    }
    return probe;
}

/* A HELLO with role PULL, on a server with a tree storage: the sender
 * engine of a pull over aftp_pullsrc beneath the server's directory (the
 * admission may move it to the client's root). */
static int new_pull_sender(serve_state *st, aftp_sender **out)
{
    const aftp_serve_opts *o = st->o;
    storage_close(st);
    st->pull = 1;
    aftp_pullsrc_init(&st->ctx->storage.pull_src, o->dirfd, aftp_serve_pull_notice,
                      (void *)&o->hooks);
    aftp_serve_pull_opts po = {.max_datagram = aftp_io_max_datagram(o->max_datagram),
                               .idle_timeout_ns = o->idle_timeout_ns,
                               .pipeline_window = o->pipeline_window,
                               .security = &o->security, .peers = probe_policy(st),
                               .on_event = serve_on_event, .user = &st->ctx->storage};
    return aftp_serve_pull_sender(&po, out);
}

static int new_receiver(serve_state *st, aftp_receiver **out)
{
    const aftp_serve_opts *o = st->o;
    aftp_io_ctx *ctx = st->ctx;
    aftp_receiver_settings set;
    aftp_receiver_settings_default(&set);
    set.conn_id = aftp_io_random_conn_id();
    set.max_datagram = aftp_io_max_datagram(o->max_datagram);
    if (o->idle_timeout_ns)
        set.idle_timeout_ns = o->idle_timeout_ns;
    st->tree_ops = aftp_treestore_ops;
    st->tree_ops.entry = serve_entry;
    if (st->committer.results != NULL) {
        st->tree_ops.commit_start = serve_commit_start;
        st->tree_ops.commit_group = serve_commit_group;
    }
    set.storage = o->faux        ? &aftp_faux_sink_ops
                  : pipelined(o) ? &st->tree_ops
                                 : &aftp_store_ops;
    set.pipeline_window = pipelined(o) ? o->pipeline_window : 0;
    set.on_event = serve_on_event;
    set.user = &ctx->storage;
    set.security = o->security;
    set.security.peers = probe_policy(st);
    return aftp_receiver_new(&set, aftp_drive_now_ns(), out);
}

/* The session's own socket: bound to the listening address, connected to
 * the client, sized for bulk data. */
static int open_session_socket(const aftp_serve_opts *o, aftp_udp *listener, aftp_udp *sess,
                               const serve_client *client)
{
    struct sockaddr_storage local;
    int rc = aftp_udp_local_addr(listener, &local);
    if (rc == AFTP_OK)
        rc = aftp_udp_open(sess, (struct sockaddr *)&local, addr_len((struct sockaddr *)&local),
                           aftp_io_max_datagram(o->max_datagram), AFTP_UDP_PORT_SESSION);
    if (rc == AFTP_OK)
        rc = aftp_udp_connect(sess, (const struct sockaddr *)&client->addr,
                              addr_len((const struct sockaddr *)&client->addr));
    if (rc != AFTP_OK)
        return rc;
    return aftp_io_size_buffers(&o->hooks, sess, AFTP_UDP_MIN_BUFFER,
                                aftp_udp_buffer_for(SERVE_RCV_RATE_BPS, SERVE_RCV_WINDOW_NS));
}

/* Tells the operator why a HELLO from `from` started nothing, when the
 * door's report limit lets it. */
static void report_dropped_hello(serve_state *st, const struct sockaddr *from, uint32_t conn_id,
                                 uint64_t now)
{
    const aftp_serve_opts *o = st->o;
    uint64_t unreported;
    if (o->on_hello_dropped == NULL ||
        !aftp_door_report_drop(&st->door, from, conn_id, now, &unreported))
        return;
    int why = st->probe.ts_refused  ? AFTP_SERVE_DROP_TIMESTAMP
              : st->probe.looked_up ? AFTP_SERVE_DROP_PSK
                                    : AFTP_SERVE_DROP_UNOPENED;
    o->on_hello_dropped(o->hooks.app, from, why,
                        why == AFTP_SERVE_DROP_UNOPENED ? NULL : st->probe.key, unreported);
}

/* The session's engine goes; a pull's storage gives way to the push's
 * again. */
static void end_engine(serve_state *st)
{
    aftp_receiver_del(st->d->receiver);
    aftp_sender_del(st->d->sender);
    st->d->receiver = NULL;
    st->d->sender = NULL;
    if (!st->pull)
        return;
    storage_close(st);
    st->pull = 0;
    storage_open(st, st->o->dirfd);
}

/* A new engine for this HELLO: a receiver, or a pull's sender (role PULL,
 * with a tree storage). The engine drops, in silence, a HELLO it
 * does not accept (a handshake that does not authenticate, a replay): the
 * receiver is then discarded at once, so such a datagram never holds the
 * server for an idle timeout, and the operator is told why. */
static int start_session(serve_state *st, const aftp_door_verdict *v, const uint8_t *pkt,
                         size_t len, const struct sockaddr *from)
{
    aftp_stats stats;
    uint32_t conn_id = v->hello.hdr.conn_id;
    int pull = v->hello.u.hello.role == AFTP_WIRE_ROLE_PULL && pipelined(st->o);
    int rc = pull ? new_pull_sender(st, &st->d->sender) : new_receiver(st, &st->d->receiver);
    if (rc != AFTP_OK)
        return rc;
    uint64_t now = aftp_drive_now_ns();
    memset(&st->probe, 0, sizeof st->probe);
    st->probe.from = from;
    aftp_drive_feed(st->d, now, pkt, len);
    aftp_drive_stats(st->d, &stats);
    if (stats.packets_dropped > 0) {
        end_engine(st);
        drop_session_root(st);
        report_dropped_hello(st, from, conn_id, now);
        return AFTP_OK;
    }
    memcpy(&st->client.addr, from, addr_len(from));
    st->client.conn_id = conn_id;
    aftp_door_session_started(&st->door, from, conn_id);
    /* No key to decide on: the session itself was admitted or is
     * cancelled (admit_unprotected). */
    if (st->probe.refused && pull)
        aftp_sender_cancel(st->d->sender, now);
    else if (st->probe.refused)
        aftp_receiver_cancel(st->d->receiver, now);
    return AFTP_OK;
}

/* The control thread's tick (o->on_control_tick), if any. */
static void control_tick(const serve_state *st, uint64_t now_ns)
{
    if (st->o->on_control_tick != NULL)
        st->o->on_control_tick(st->o->hooks.app, now_ns);
}

/* One datagram that reached the listener: the session's client's (queued
 * before its socket was connected) goes to the session; the door decides
 * on the others. */
static int on_listener_datagram(serve_state *st, const uint8_t *pkt, size_t len,
                                const struct sockaddr *from, uint64_t now)
{
    aftp_door_verdict v;
    int busy = st->d->receiver != NULL || st->d->sender != NULL;
    if (busy && aftp_door_same_addr(from, (const struct sockaddr *)&st->client.addr)) {
        aftp_drive_feed(st->d, now, pkt, len);
        return AFTP_OK;
    }
    switch (aftp_door_input(&st->door, pkt, len, from, busy, now, &v)) {
    case AFTP_DOOR_START:
        control_tick(st, now);
        return start_session(st, &v, pkt, len, from);
    case AFTP_DOOR_REPLY: aftp_udp_send_to(&st->listener, v.reply, v.reply_len, from); break;
    default: break;
    }
    return AFTP_OK;
}

/* Everything queued on the listener, without waiting. */
static int pump_listener(serve_state *st)
{
    size_t count = 0;
    int rc = aftp_udp_recv(&st->listener, &count);
    aftp_udp_iter it = {0};
    const uint8_t *pkt;
    size_t len;
    const struct sockaddr *from;
    uint64_t now = aftp_drive_now_ns();
    while (rc == AFTP_OK && aftp_udp_next(&st->listener, &it, &pkt, &len, &from))
        rc = on_listener_datagram(st, pkt, len, from, now);
    return rc;
}

/* During a session (the drive loop's turn hook): other clients' HELLOs are
 * answered every SERVE_BUSY_POLL_NS, so they learn to wait (RETRY). */
static void poll_listener_while_busy(void *ctx, uint64_t now_ns)
{
    serve_state *st = ctx;
    if (st->pull)
        aftp_serve_pull_turn(&st->ctx->storage.pull_src, st->d->sender, now_ns);
    if (now_ns < st->next_poll_ns)
        return;
    st->next_poll_ns = now_ns + SERVE_BUSY_POLL_NS;
    control_tick(st, now_ns);
    if (pipelined(st->o) && !st->pull) /* the time bound on unsynced blocks (aftp_treestore.h) */
        (void)aftp_treestore_tick(&st->ctx->storage.tree_dst, now_ns);
    pump_listener(st);
}

/* The server's own stop: its operator's interrupt (a signal), as opposed
 * to a client that cancelled or failed, which ends that session only. */
static int stopped_locally(const aftp_serve_opts *o)
{
    return o->hooks.interrupt != NULL && *o->hooks.interrupt;
}

/* An idle server's step of its sweep, at most once per SERVE_ACCEPT_POLL_NS
 * however many datagrams wake it. */
static void idle_sweep(serve_state *st)
{
    uint64_t now = aftp_drive_now_ns();
    if (now < st->next_sweep_ns)
        return;
    st->next_sweep_ns = now + SERVE_ACCEPT_POLL_NS;
    sweep_partial(st, AFTP_SERVE_SWEEP_BUDGET);
}

/* Waits for a new client's HELLO on the listener and starts its session
 * (engine fed, session socket open). */
static int accept_session(serve_state *st)
{
    const aftp_serve_opts *o = st->o;
    while (st->d->receiver == NULL && st->d->sender == NULL) {
        if (stopped_locally(o))
            return AFTP_ERR_CANCELLED;
        idle_sweep(st);
        control_tick(st, aftp_drive_now_ns());
        aftp_udp_wait(&st->listener, SERVE_ACCEPT_POLL_NS);
        int rc = pump_listener(st);
        if (rc != AFTP_OK)
            return rc;
    }
    return open_session_socket(o, &st->listener, st->d->udp, &st->client);
}

/* The session's outcome: the storage's own failure (it has the detail),
 * else a file's failure, else the session's. A client that leaves once it
 * has every FILE_RESULT (its CLOSE lost, or ICMP unreachable after it
 * exited) does not make a delivered transfer fail. */
static void settle_result(const aftp_serve_opts *o, aftp_io_ctx *ctx, int pull, int session_rc)
{
    aftp_io_result *res = ctx->res;
    const aftp_path_report *storage = o->faux         ? &ctx->storage.sink.report
                                      : pipelined(o) ? &ctx->storage.tree_dst.report
                                                     : &ctx->storage.store.report;
    if (!pull && storage->last_error != AFTP_OK) { /* a pull's server stores nothing */
        res->error = storage->last_error;
        snprintf(res->message, sizeof res->message, "%s", storage->message);
        return;
    }
    if (res->error != AFTP_OK)
        return;
    int peer_gone = session_rc == AFTP_ERR_IDLE_TIMEOUT || session_rc == AFTP_ERR_NETWORK;
    res->error = res->files_ok > 0 && peer_gone ? AFTP_OK : session_rc;
}

/* A client refused at the handshake (its key not admitted, or admitted
 * for pulls only; a replayed HELLO): reported, but not the transfer
 * `once` waits for. */
static int handshake_refused(const aftp_io_result *res)
{
    return !res->connected &&
           (res->error == AFTP_ERR_UNKNOWN_PEER || res->error == AFTP_ERR_PERMISSION ||
            res->error == AFTP_ERR_AUTH || res->error == AFTP_ERR_REPLAY);
}

/* Pipelined mode: the directories placed get their metadata once their
 * files are committed (aftp_treestore_finish); a failure there fails a
 * session that had not failed. */
static void finish_tree(serve_state *st)
{
    aftp_io_result *res = st->ctx->res;
    if (!pipelined(st->o) || st->pull)
        return;
    int rc = aftp_treestore_finish(&st->ctx->storage.tree_dst);
    if (rc == AFTP_OK || res->error != AFTP_OK)
        return;
    res->error = rc;
    snprintf(res->message, sizeof res->message, "%s", st->ctx->storage.tree_dst.place.message);
}

static void serve_one(serve_state *st, aftp_io_result *res)
{
    const aftp_serve_opts *o = st->o;
    serve_ctx sc = {.io = {.res = res, .hooks = &o->hooks}, .st = st};
    aftp_io_ctx *ctx = &sc.io;
    aftp_udp sess = {.fd = -1};
    aftp_drive d = {.udp = &sess, .max_datagram = aftp_io_max_datagram(o->max_datagram),
                    .interrupt = o->hooks.interrupt, .on_tick = o->hooks.on_tick,
                    .app = o->hooks.app, .on_turn = poll_listener_while_busy, .on_turn_ctx = st};
    memset(res, 0, sizeof *res);
    res->phase = AFTP_IO_PHASE_SESSION;
    st->ctx = ctx;
    st->d = &d;
    int rc = storage_open(st, o->dirfd);
    if (rc == AFTP_OK && pipelined(o) && !o->faux &&
        aftp_committer_init(&st->committer, &ctx->storage.tree_dst, o->pipeline_window) == AFTP_OK) {
        d.wake_fd = st->committer.wake_fd; /* else the commits run in the loop */
        d.on_wake = commit_check_now;
        d.on_wake_ctx = st;
    }
    if (rc == AFTP_OK && !st->swept_at_start) { /* before any client: a full pass */
        sweep_partial(st, UINT_MAX);
        st->swept_at_start = 1;
    }
    if (rc == AFTP_OK)
        rc = accept_session(st);
    if (rc == AFTP_OK && st->pull) {
        d.after_send = aftp_serve_pull_after_send;
        d.after_send_ctx = &ctx->storage.pull_src;
    }
    if (rc == AFTP_OK) {
        rc = aftp_drive_run(&d);
        commit_check(st, aftp_drive_now_ns(), 1); /* the group still in flight */
        aftp_drive_stats(&d, &res->stats);
        settle_result(o, ctx, st->pull, rc);
        finish_tree(st);
        if (st->session_root >= 0) /* the rest of the pass its opening began */
            sweep_partial(st, UINT_MAX);
        if (o->on_session_end)
            o->on_session_end(o->hooks.app, res, (struct sockaddr *)&st->client.addr);
    } else {
        res->error = rc;
    }
    aftp_committer_fini(&st->committer); /* a session that ended early: its group ends */
    end_engine(st); /* the listener is not polled for this session any more */
    storage_close(st); /* beneath the session's root, which goes after it */
    close_session_root(st);
    aftp_udp_close(&sess);
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

static int open_listener(const aftp_serve_opts *o, aftp_udp *udp, aftp_io_result *res)
{
    /* It reads only HELLOs (1200 bytes) and key requests: a session's
     * datagrams go to that session's own socket. */
    int rc = aftp_udp_open(udp, o->listen, o->listen_len, AFTP_IO_DATAGRAM, AFTP_UDP_PORT_SERVE);
    if (rc != AFTP_OK) {
        char where[64];
        aftp_format_addr(o->listen, where, sizeof where);
        snprintf(res->message, sizeof res->message, "cannot listen on %s: %s", where,
                 listen_failure(udp->sys_errno, rc));
        return rc;
    }
    aftp_io_warn(&o->hooks, aftp_drop_warning(&udp->drop));
    struct sockaddr_storage local;
    if (o->on_listening && aftp_udp_local_addr(udp, &local) == AFTP_OK)
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
    return aftp_door_init(door, &set, aftp_drive_now_ns());
}

int aftp_serve_run(const aftp_serve_opts *o, aftp_io_result *res)
{
    serve_state st;
    memset(res, 0, sizeof *res);
    memset(&st, 0, sizeof st);
    st.o = o;
    st.session_root = -1;
    res->phase = AFTP_IO_PHASE_LOCAL;
    int rc = open_door(o, &st.door);
    if (rc == AFTP_OK)
        rc = open_listener(o, &st.listener, res);
    if (rc != AFTP_OK) {
        aftp_udp_close(&st.listener);
        return res->error = rc;
    }
    /* Whatever a session ended with (its client cancelled, vanished or
     * failed verification), only the local stop ends the server. */
    do {
        serve_one(&st, res);
    } while ((!o->once || handshake_refused(res)) && !stopped_locally(o));
    aftp_door_fini(&st.door);
    aftp_udp_close(&st.listener);
    return o->once ? res->error : AFTP_OK;
}

void aftp_serve_describe_client(const struct sockaddr *from, const uint8_t *key,
                                const char *comment, char *out, size_t cap)
{
    char who[64], text[128], escaped[256] = "";
    aftp_format_addr(from, who, sizeof who);
    if (key == NULL) {
        snprintf(out, cap, "from %s", who);
        return;
    }
    aftp_keyfile_key_text(key, text, sizeof text);
    if (comment != NULL)
        aftp_path_printable(comment, escaped, sizeof escaped);
    snprintf(out, cap, "from %s key %s%s%s%s", who, text, escaped[0] ? " \"" : "", escaped,
             escaped[0] ? "\"" : "");
}

void aftp_serve_explain_failure(const aftp_io_result *res, const char *client,
                                const char *refusal, double idle_s, const char *idle_setting,
                                char *out, size_t cap)
{
    if ((res->error == AFTP_ERR_UNKNOWN_PEER || res->error == AFTP_ERR_PERMISSION) &&
        refusal != NULL)
        snprintf(out, cap, "refused client %s: %s", client, refusal);
    else if (res->error == AFTP_ERR_IDLE_TIMEOUT)
        snprintf(out, cap, "sender %s went silent for %.1f s (%s)", client, idle_s, idle_setting);
    else
        snprintf(out, cap, "transfer %s failed: %s", client,
                 res->message[0] ? res->message : aftp_strerror(res->error));
}

void aftp_serve_explain_drop(const struct sockaddr *from, int why, const char *client,
                             const char *psk_advice, const struct aftp_admit *admit,
                             uint64_t unreported, char *out, size_t cap)
{
    char who[64], reason[320], more[96] = "";
    if (unreported > 0)
        snprintf(more, sizeof more, " (and %llu more dropped handshakes not reported)",
                 (unsigned long long)unreported);
    if (why == AFTP_SERVE_DROP_UNOPENED) {
        aftp_format_addr(from, who, sizeof who);
        snprintf(out, cap, "a client at %s sent a handshake this server cannot open (it may have "
                           "pinned another server key)%s", who, more);
        return;
    }
    if (why == AFTP_SERVE_DROP_TIMESTAMP)
        aftp_admit_explain(admit, reason, sizeof reason);
    else
        snprintf(reason, sizeof reason, "the rest of its handshake does not open with this "
                                        "server's pre-shared key (%s)", psk_advice);
    snprintf(out, cap, "ignored a handshake %s: %s%s", client, reason, more);
}
