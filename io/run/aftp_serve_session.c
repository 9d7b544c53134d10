/* One session of the server (aftp_serve_session.h). */
#include "aftp_serve_session.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aftp_serve_pull.h"
#include "aftp_store.h"

/* The receive buffer absorbs what arrives while the worker is busy (page
 * faults, writeback, other sessions): 50 ms at 10 Gbit/s. The rate is the
 * sender's choice, unknown here, so the server sizes for the fastest link
 * we target. */
#define SERVE_RCV_RATE_BPS UINT64_C(10000000000)
#define SERVE_RCV_WINDOW_NS 50000000u
/* How often a session's unsynced blocks are looked at (aftp_treestore_tick). */
#define SERVE_TREE_TICK_NS 5000000u
/* How often, with a total rate cap, a session publishes its bytes and
 * looks for a new share (the hub's tick). */
#define SERVE_SHARE_TURN_NS 50000000u

static socklen_t addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int pipelined(const aftp_serve_opts *o)
{
    return o->pipeline_window > 0 && !o->faux;
}

static void warn(aftp_serve_shared *sh, const char *text)
{
    AFTP_SERVE_CALLBACK(sh, aftp_io_warn(&sh->o->hooks, text));
}

/* What a pulled tree's walk skipped, for the operator (under the lock:
 * the walk runs on the session's worker). */
static void pull_notice(void *user, const char *local, int err, const char *why)
{
    aftp_serve_session *ss = user;
    AFTP_SERVE_CALLBACK(ss->sh,
                        aftp_serve_pull_notice((void *)&ss->sh->o->hooks, local, err, why));
}

void aftp_serve_root_of(int dirfd, aftp_serve_root *out)
{
    struct stat sb;
    memset(out, 0, sizeof *out);
    if (dirfd >= 0 && fstat(dirfd, &sb) == 0) {
        out->dev = sb.st_dev;
        out->ino = sb.st_ino;
    }
}

/* The session's storage, empty, writing beneath `dirfd`. */
static int storage_open(aftp_serve_session *ss, int dirfd)
{
    const aftp_serve_opts *o = ss->sh->o;
    aftp_serve_root_of(dirfd, &ss->root);
    if (ss->pull) {
        aftp_pullsrc_init(&ss->io.storage.pull_src, dirfd, pull_notice, ss);
        return AFTP_OK;
    }
    if (o->faux) {
        memset(&ss->io.storage.sink, 0, sizeof ss->io.storage.sink);
        return AFTP_OK;
    }
    if (!pipelined(o)) {
        aftp_store_init(&ss->io.storage.store, dirfd, o->overwrite);
        return AFTP_OK;
    }
    aftp_place_options opt;
    if (o->place != NULL)
        opt = *o->place;
    else
        aftp_place_defaults(&opt);
    opt.overwrite = o->overwrite;
    char why[256];
    int rc = aftp_treestore_init(&ss->io.storage.tree_dst, dirfd, &opt, why, sizeof why);
    if (rc != AFTP_OK) {
        snprintf(ss->res.message, sizeof ss->res.message, "%s", why);
        return rc;
    }
    if (o->partial_max_age_s != 0)
        ss->io.storage.tree_dst.sweep.max_age_s = o->partial_max_age_s;
    /* Other pushes, of this client or another, may write beneath the same
     * root at once: one writer per file. */
    if (ss->sh->files != NULL)
        aftp_treestore_share(&ss->io.storage.tree_dst, ss->sh->files, ss->root.dev, ss->root.ino);
    return AFTP_OK;
}

static void storage_close(aftp_serve_session *ss, int root_shared)
{
    const aftp_serve_opts *o = ss->sh->o;
    if (ss->pull)
        aftp_pullsrc_fini(&ss->io.storage.pull_src);
    else if (o->faux)
        return;
    else if (pipelined(o)) {
        ss->io.storage.tree_dst.keep_partial_dir = root_shared;
        aftp_treestore_fini(&ss->io.storage.tree_dst);
    }
    else
        aftp_store_fini(&ss->io.storage.store);
}

/* The storage writes beneath `dirfd` from now on (nothing received yet:
 * only the partial directory moves; the one it leaves is the server dir's,
 * which the hub's sweeps hold). */
static int storage_move(aftp_serve_session *ss, int dirfd)
{
    storage_close(ss, 1);
    int rc = storage_open(ss, dirfd);
    ss->committer.dev = ss->root.dev; /* its groups go to the new root's disk */
    return rc;
}

void aftp_serve_session_sweep(aftp_serve_session *ss, unsigned budget)
{
    const aftp_serve_opts *o = ss->sh->o;
    if (!pipelined(o) || ss->pull)
        return;
    int removed = aftp_treestore_sweep_step(&ss->io.storage.tree_dst, budget);
    if (removed > 0 && o->on_swept != NULL)
        AFTP_SERVE_CALLBACK(ss->sh, o->on_swept(ss->app, removed, ss->rootfd >= 0));
}

/* The server's own admission (o->admit): refuse, or admit into a root. */
static int admit_session(aftp_serve_session *ss, const uint8_t *client_key)
{
    const aftp_serve_opts *o = ss->sh->o;
    int rootfd = -1, rc;
    ss->rate_cap = 0;
    if (o->admit == NULL)
        return AFTP_OK;
    AFTP_SERVE_CALLBACK(ss->sh, rc = o->admit(ss->app, (const struct sockaddr *)&ss->addr,
                                              client_key, &rootfd, &ss->rate_cap));
    if (rc != AFTP_OK || rootfd < 0)
        return rc;
    ss->rootfd = rootfd;
    return storage_move(ss, rootfd);
}

/* The admission policy, as the receiver calls it, noting what it saw. */
static int probe_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    aftp_serve_session *ss = user;
    const aftp_peer_policy *policy = &ss->sh->o->security.peers;
    ss->probe.looked_up = 1;
    memcpy(ss->probe.key, client_key, AFTP_KEY_LEN);
    return policy->lookup(policy->user, client_key, psk);
}

/* Message 1 opened in full (the client proved its key) once the timestamp
 * is there to check: the policy's replay rule, then the admission. */
static int probe_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    aftp_serve_session *ss = user;
    const aftp_peer_policy *policy = &ss->sh->o->security.peers;
    int rc = policy->check_timestamp != NULL
                 ? policy->check_timestamp(policy->user, client_key, ts)
                 : AFTP_OK;
    ss->probe.ts_refused = rc != AFTP_OK;
    return rc == AFTP_OK ? admit_session(ss, client_key) : rc;
}

/* The engine accepted the HELLO and asks for its sender's cap. An
 * unprotected session has no key to admit earlier: its admission runs
 * now, before the HELLO_ACK is built. */
static void admit_unprotected(aftp_serve_session *ss)
{
    if (!ss->probe.admitted)
        ss->probe.refused = admit_session(ss, NULL) != AFTP_OK;
    ss->probe.admitted = 1;
}

/* The admission's cap for the client, or with a total rate cap its share
 * at entry (within that cap): so every client is capped, and one that
 * cannot honour a cap is refused (spec 12.3.1). */
static uint64_t probe_rate_cap(void *user, const uint8_t *client_key)
{
    aftp_serve_session *ss = user;
    if (client_key == NULL)
        admit_unprotected(ss);
    if (ss->probe.refused)
        return 0;
    if (ss->sh->o->total_rate_bps == 0)
        return ss->rate_cap;
    ss->share.cap_bps = ss->rate_cap;
    ss->share_applied = ss->sh->entry_share(ss->sh, ss->rate_cap);
    return ss->share_applied;
}

/* After the admission (an unprotected session's runs at whichever probe
 * the engine asks first): may the admitted client push, or pull
 * (o->role_allowed)? */
static int probe_role_allowed(void *user, const uint8_t *client_key, int role)
{
    aftp_serve_session *ss = user;
    const aftp_serve_opts *o = ss->sh->o;
    int rc = AFTP_OK;
    if (client_key == NULL)
        admit_unprotected(ss);
    if (ss->probe.refused || o->role_allowed == NULL)
        return AFTP_OK;
    AFTP_SERVE_CALLBACK(ss->sh, rc = o->role_allowed(ss->app, role));
    return rc;
}

/* The admission as the engine of either role asks it (the probes). */
static aftp_peer_policy probe_policy(aftp_serve_session *ss)
{
    aftp_peer_policy probe = {.rate_cap = probe_rate_cap, .role_allowed = probe_role_allowed,
                              .user = ss};
    if (ss->sh->o->security.peers.lookup != NULL) {
        probe.lookup = probe_lookup;
        probe.check_timestamp = probe_check_timestamp;
    }
    return probe;
}

/* The session of the engine's `user` (&io.storage). */
static aftp_serve_session *session_of(void *user)
{
    return (aftp_serve_session *)((char *)user - offsetof(aftp_io_ctx, storage) -
                                  offsetof(aftp_serve_session, io));
}

static void serve_on_event(void *user, const aftp_event *ev)
{
    aftp_serve_session *ss = session_of(user);
    const aftp_serve_opts *o = ss->sh->o;
    aftp_stats stats;
    if (ev->type == AFTP_EV_CONNECTED)
        __atomic_store_n(&ss->handshaking, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&ss->sh->cb_lock);
    aftp_io_on_event(user, ev);
    if (o->on_session_event != NULL) {
        aftp_drive_stats(&ss->d, &stats);
        o->on_session_event(ss->app, ev, &stats);
    }
    pthread_mutex_unlock(&ss->sh->cb_lock);
}

/* The pipelined storage's decision, reported to the server (on_entry). */
static int serve_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    aftp_serve_session *ss = session_of(user);
    const aftp_serve_opts *o = ss->sh->o;
    aftp_stats stats;
    /* A session refused at the limit decides no entry: the early entries
     * of its HELLO (spec 12.3.4) wait, and the session closes with
     * CLOSE(LIMIT) once the client confirms; nothing is opened for it. */
    if (ss->refusal[0] != '\0')
        return AFTP_STORAGE_WAIT;
    int rc = aftp_treestore_ops.entry(user, info, out);
    if (rc != AFTP_OK || o->on_entry == NULL)
        return rc;
    aftp_receiver_get_stats(ss->d.receiver, &stats);
    AFTP_SERVE_CALLBACK(ss->sh, o->on_entry(ss->app, info, out, &stats));
    return rc;
}

/* The group commit beside the packet loop (aftp_committer.h): begun now,
 * its outcome handed to the engine by commit_check. */
static int serve_commit_start(void *user, const uint32_t *ids, size_t count)
{
    return aftp_committer_start(&session_of(user)->committer, ids, count);
}

/* The engine's synchronous commit (its last group, at the session's end)
 * waits for the group in flight: one group at a time in the treestore. */
static int serve_commit_group(void *user, const uint32_t *ids, size_t count, int *results)
{
    aftp_committer_settle(&session_of(user)->committer);
    return aftp_treestore_ops.commit_group(user, ids, count, results);
}

/* Each turn (on_wake), and once at the end with `wait`: a group the
 * committer made durable gets its FILE_RESULTs. */
static void commit_check(aftp_serve_session *ss, uint64_t now_ns, int wait)
{
    const int *results;
    if (aftp_committer_busy(&ss->committer) &&
        aftp_committer_collect(&ss->committer, wait, &results))
        (void)aftp_receiver_commit_done(ss->d.receiver, now_ns, AFTP_OK, results);
}

static void commit_check_now(void *ctx, uint64_t now_ns)
{
    commit_check(ctx, now_ns, 0);
}

void aftp_serve_session_measure(aftp_serve_session *ss, uint64_t now_ns)
{
    uint64_t bytes = __atomic_load_n(&ss->wire_bytes, __ATOMIC_RELAXED);
    if (ss->sampled_ns != 0) {
        ss->share.used_bps = aftp_share_rate(bytes - ss->sampled_bytes, now_ns - ss->sampled_ns);
        ss->share.measured = 1;
    }
    ss->sampled_bytes = bytes;
    ss->sampled_ns = now_ns;
}

/* With a total rate cap, on the session's worker: its bytes for the
 * hub's measure, and the share the hub set, given to the engine (a push's
 * receiver tells its client by RATE_UPDATE, a pull's sender obeys it). */
static void share_turn(aftp_serve_session *ss, uint64_t now_ns)
{
    aftp_stats st;
    if (ss->sh->o->total_rate_bps == 0 || now_ns < ss->next_publish_ns)
        return;
    ss->next_publish_ns = now_ns + SERVE_SHARE_TURN_NS;
    aftp_drive_stats(&ss->d, &st);
    __atomic_store_n(&ss->wire_bytes, st.wire_bytes_sent + st.wire_bytes_received,
                     __ATOMIC_RELAXED);
    uint64_t share = __atomic_load_n(&ss->share_bps, __ATOMIC_RELAXED);
    if (share == 0 || share == ss->share_applied)
        return;
    ss->share_applied = share;
    if (ss->pull)
        (void)aftp_sender_set_rate_cap(ss->d.sender, share, now_ns);
    else
        (void)aftp_receiver_set_rate_cap(ss->d.receiver, share, now_ns);
}

/* Each turn of the session, on its worker: the time bound on unsynced
 * blocks (aftp_treestore.h), and a refusal due once the client confirmed
 * the handshake (it can then read the CLOSE's reason: it has the keys). */
static void session_turn(void *ctx, uint64_t now_ns)
{
    aftp_serve_session *ss = ctx;
    if (ss->refusal[0] != '\0' && aftp_drive_state(&ss->d) == AFTP_STATE_TRANSFER) {
        if (ss->pull)
            aftp_sender_abort(ss->d.sender, now_ns, AFTP_ERR_LIMIT, ss->refusal);
        else
            aftp_receiver_abort(ss->d.receiver, now_ns, AFTP_ERR_LIMIT, ss->refusal);
        ss->refusal[0] = '\0';
    }
    share_turn(ss, now_ns);
    if (ss->pull) {
        aftp_serve_pull_turn(&ss->io.storage.pull_src, ss->d.sender, now_ns);
        return;
    }
    if (!pipelined(ss->sh->o) || now_ns < ss->next_tree_tick_ns)
        return;
    ss->next_tree_tick_ns = now_ns + SERVE_TREE_TICK_NS;
    (void)aftp_treestore_tick(&ss->io.storage.tree_dst, now_ns);
}

/* The session's progress (hooks.on_tick), under the run's lock. */
static void session_tick(void *ctx, const aftp_stats *st, uint64_t now_ns)
{
    aftp_serve_session *ss = ctx;
    AFTP_SERVE_CALLBACK(ss->sh, ss->sh->o->hooks.on_tick(ss->app, st, now_ns));
}

static int new_receiver(aftp_serve_session *ss)
{
    const aftp_serve_opts *o = ss->sh->o;
    aftp_receiver_settings set;
    aftp_io_receiver_settings(&set, o->max_datagram, o->idle_timeout_ns);
    ss->tree_ops = aftp_treestore_ops;
    ss->tree_ops.entry = serve_entry;
    if (ss->committer.results != NULL) {
        ss->tree_ops.commit_start = serve_commit_start;
        ss->tree_ops.commit_group = serve_commit_group;
    }
    set.storage = o->faux        ? &aftp_faux_sink_ops
                  : pipelined(o) ? &ss->tree_ops
                                 : &aftp_store_ops;
    set.pipeline_window = pipelined(o) ? o->pipeline_window : 0;
    set.on_event = serve_on_event;
    set.user = &ss->io.storage;
    set.security = o->security;
    set.security.peers = probe_policy(ss);
    return aftp_receiver_new(&set, aftp_drive_now_ns(), &ss->d.receiver);
}

/* A pull's engine: a sender in role PULL over the session's aftp_pullsrc
 * (beneath the server's dir until the admission moves it). */
static int new_pull_sender(aftp_serve_session *ss)
{
    const aftp_serve_opts *o = ss->sh->o;
    aftp_serve_pull_opts po = {.max_datagram = aftp_io_max_datagram(o->max_datagram),
                               .idle_timeout_ns = o->idle_timeout_ns,
                               .pipeline_window = o->pipeline_window,
                               .security = &o->security, .peers = probe_policy(ss),
                               .on_event = serve_on_event, .user = &ss->io.storage};
    return aftp_serve_pull_sender(&po, &ss->d.sender);
}

/* The session's own socket: bound to the listening address, connected to
 * the client, sized for bulk data. */
static int open_socket(aftp_serve_session *ss, const aftp_udp *listener)
{
    const aftp_serve_opts *o = ss->sh->o;
    const struct sockaddr *peer = (const struct sockaddr *)&ss->addr;
    struct sockaddr_storage local;
    int rc = aftp_udp_local_addr(listener, &local);
    if (rc == AFTP_OK)
        rc = aftp_udp_open(&ss->udp, (struct sockaddr *)&local,
                           addr_len((struct sockaddr *)&local),
                           aftp_io_max_datagram(o->max_datagram), AFTP_UDP_PORT_SESSION);
    if (rc == AFTP_OK)
        rc = aftp_udp_connect(&ss->udp, peer, addr_len(peer));
    if (rc != AFTP_OK)
        return rc;
    aftp_udp_buffers b = {.want_snd = AFTP_UDP_MIN_BUFFER,
                          .want_rcv = aftp_udp_buffer_for(SERVE_RCV_RATE_BPS, SERVE_RCV_WINDOW_NS)};
    char advice[256] = "";
    rc = aftp_udp_set_buffers(&ss->udp, &b);
    aftp_udp_buffers_advice(&b, advice, sizeof advice);
    if (advice[0] != '\0')
        warn(ss->sh, advice);
    return rc;
}

/* The datapath of the session, as its worker runs it. */
static void init_drive(aftp_serve_session *ss)
{
    const aftp_serve_opts *o = ss->sh->o;
    ss->d = (aftp_drive){.udp = &ss->udp, .max_datagram = aftp_io_max_datagram(o->max_datagram),
                         .on_tick = o->hooks.on_tick != NULL ? session_tick : NULL, .app = ss,
                         .on_turn = session_turn, .on_turn_ctx = ss, .wake_fd = -1};
    if (ss->pull) {
        ss->d.after_send = aftp_serve_pull_after_send;
        ss->d.after_send_ctx = &ss->io.storage.pull_src;
        return;
    }
    if (pipelined(o) && ss->sh->commits != NULL &&
        aftp_committer_init(&ss->committer, &ss->io.storage.tree_dst, ss->root.dev,
                            o->pipeline_window, ss->sh->commits) == AFTP_OK) {
        ss->d.wake_fd = ss->committer.wake_fd; /* else the commits run in the turn */
        ss->d.on_wake = commit_check_now;
        ss->d.on_wake_ctx = ss;
    }
}

/* The app of the session's callbacks (session_open's, else hooks.app);
 * AFTP_ERR_NO_MEMORY when session_open gave none. */
static int open_app(aftp_serve_session *ss)
{
    const aftp_serve_opts *o = ss->sh->o;
    if (o->session_open == NULL) {
        ss->app = o->hooks.app;
        return AFTP_OK;
    }
    AFTP_SERVE_CALLBACK(ss->sh, ss->app = o->session_open(o->hooks.app));
    return ss->app != NULL ? AFTP_OK : AFTP_ERR_NO_MEMORY;
}

aftp_serve_session *aftp_serve_session_new(aftp_serve_shared *sh, const aftp_udp *listener,
                                           const struct sockaddr *from, uint32_t conn_id,
                                           int pull, char *why, size_t cap)
{
    aftp_serve_session *ss = calloc(1, sizeof *ss);
    if (ss == NULL) {
        snprintf(why, cap, "no memory for a session");
        return NULL;
    }
    ss->sh = sh;
    ss->rootfd = -1;
    ss->udp.fd = -1;
    ss->handshaking = 1;
    ss->io = (aftp_io_ctx){.res = &ss->res, .hooks = &sh->o->hooks};
    ss->res.phase = AFTP_IO_PHASE_SESSION;
    memcpy(&ss->addr, from, addr_len(from));
    ss->conn_id = conn_id;
    ss->pull = pull && pipelined(sh->o);
    int rc = storage_open(ss, sh->o->dirfd);
    if (rc == AFTP_OK) {
        init_drive(ss);
        rc = open_socket(ss, listener);
    }
    if (rc == AFTP_OK)
        rc = ss->pull ? new_pull_sender(ss) : new_receiver(ss);
    if (rc == AFTP_OK)
        rc = open_app(ss);
    if (rc != AFTP_OK) {
        snprintf(why, cap, "cannot start a session: %s",
                 ss->res.message[0] ? ss->res.message : aftp_strerror(rc));
        aftp_serve_session_del(ss, 1);
        return NULL;
    }
    return ss;
}

int aftp_serve_session_hello(aftp_serve_session *ss, const uint8_t *pkt, size_t len,
                             uint64_t now_ns)
{
    aftp_stats stats;
    aftp_drive_feed(&ss->d, now_ns, pkt, len);
    aftp_drive_stats(&ss->d, &stats);
    if (stats.packets_dropped > 0)
        return 0;
    /* No key to decide on: the session itself was admitted or is
     * cancelled (admit_unprotected). */
    if (ss->probe.refused)
        aftp_drive_cancel(&ss->d, now_ns);
    return 1;
}

int aftp_serve_session_admitted(const aftp_serve_session *ss)
{
    int state = aftp_drive_state(&ss->d);
    return state != AFTP_STATE_CLOSING && state != AFTP_STATE_CLOSED;
}

void aftp_serve_session_refuse(aftp_serve_session *ss, const char *reason)
{
    snprintf(ss->refusal, sizeof ss->refusal, "%s", reason);
}

/* The session's outcome: the storage's own failure (it has the detail),
 * else a file's failure, else the session's. A client that leaves once it
 * has every FILE_RESULT (its CLOSE lost, or ICMP unreachable after it
 * exited) does not make a delivered transfer fail. */
static void settle_result(aftp_serve_session *ss, int session_rc)
{
    const aftp_serve_opts *o = ss->sh->o;
    aftp_io_result *res = &ss->res;
    const aftp_path_report *storage = o->faux         ? &ss->io.storage.sink.report
                                      : pipelined(o) ? &ss->io.storage.tree_dst.report
                                                     : &ss->io.storage.store.report;
    if (!ss->pull && storage->last_error != AFTP_OK) { /* a pull's server stores nothing */
        res->error = storage->last_error;
        snprintf(res->message, sizeof res->message, "%s", storage->message);
        return;
    }
    if (res->error != AFTP_OK)
        return;
    int peer_gone = session_rc == AFTP_ERR_IDLE_TIMEOUT || session_rc == AFTP_ERR_NETWORK;
    res->error = res->files_ok > 0 && peer_gone ? AFTP_OK : session_rc;
}

/* Pipelined mode: the directories placed get their metadata once their
 * files are committed (aftp_treestore_finish); a failure there fails a
 * session that had not failed. */
static void finish_tree(aftp_serve_session *ss)
{
    aftp_io_result *res = &ss->res;
    if (!pipelined(ss->sh->o) || ss->pull)
        return;
    int rc = aftp_treestore_finish(&ss->io.storage.tree_dst);
    if (rc == AFTP_OK || res->error != AFTP_OK)
        return;
    res->error = rc;
    snprintf(res->message, sizeof res->message, "%s", ss->io.storage.tree_dst.place.message);
}

void aftp_serve_session_end(aftp_serve_session *ss, int rc)
{
    /* A stop that cut a closing session short (no wait for its client):
     * the session had ended already, with its own outcome. */
    int closing_rc = aftp_drive_error(&ss->d);
    if (rc == AFTP_ERR_CANCELLED && closing_rc != AFTP_OK)
        rc = closing_rc;
    ss->end_rc = rc;
    commit_check(ss, aftp_drive_now_ns(), 1); /* the group still in flight */
    aftp_drive_stats(&ss->d, &ss->res.stats);
    settle_result(ss, rc);
    finish_tree(ss);
}

void aftp_serve_session_report(aftp_serve_session *ss)
{
    const aftp_serve_opts *o = ss->sh->o;
    if (o->on_session_end != NULL)
        AFTP_SERVE_CALLBACK(ss->sh, o->on_session_end(ss->app, &ss->res,
                                                      (const struct sockaddr *)&ss->addr));
}

int aftp_serve_session_refused(const aftp_serve_session *ss)
{
    const aftp_io_result *res = &ss->res;
    return !res->connected &&
           (res->error == AFTP_ERR_UNKNOWN_PEER || res->error == AFTP_ERR_PERMISSION ||
            res->error == AFTP_ERR_AUTH || res->error == AFTP_ERR_REPLAY);
}

void aftp_serve_session_del(aftp_serve_session *ss, int root_shared)
{
    if (ss == NULL)
        return;
    const aftp_serve_opts *o = ss->sh->o;
    aftp_committer_fini(&ss->committer); /* a session that ended early: its group ends */
    aftp_receiver_del(ss->d.receiver);
    aftp_sender_del(ss->d.sender);
    storage_close(ss, root_shared); /* beneath the session's root, which goes after it */
    if (ss->rootfd >= 0)
        close(ss->rootfd);
    aftp_udp_close(&ss->udp);
    if (ss->app != NULL && o->session_open != NULL && o->session_close != NULL)
        AFTP_SERVE_CALLBACK(ss->sh, o->session_close(o->hooks.app, ss->app));
    free(ss);
}
