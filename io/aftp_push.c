#include "aftp_push.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aftp_drive.h"
#include "aftp_keyfetch.h"
#include "aftp_source.h"
#include "aftp_udp.h"

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
    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    local.ss_family = o->peer->sa_family; /* wildcard address, any port */
    socklen_t len = local.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);
    int rc = aftp_udp_open(udp, (struct sockaddr *)&local, len,
                           aftp_io_max_datagram(o->max_datagram), 0);
    if (rc == AFTP_OK)
        rc = aftp_udp_connect(udp, o->peer, o->peer_len);
    if (rc != AFTP_OK)
        return rc;
    aftp_udp_forbid_fragments(udp);
    aftp_io_warn(&o->hooks, aftp_drop_warning(&udp->drop));
    aftp_udp_buffers b = {.want_snd = aftp_udp_buffer_for(peak_rate(o), PUSH_SND_WINDOW_NS),
                          .want_rcv = AFTP_UDP_MIN_BUFFER};
    char advice[256];
    rc = aftp_udp_set_buffers(udp, &b);
    aftp_udp_buffers_advice(&b, advice, sizeof advice);
    aftp_io_warn(&o->hooks, advice);
    return rc;
}

/* After each batch: release residency, and look for a change of the
 * source (the kernel's reads of a shrunk mapping fail with EFAULT, they do
 * not fault: only size and mtime tell). */
static void after_batch(void *src)
{
    aftp_source_settle(src);
    aftp_source_check(src);
}

/* The handshake's timestamp must move forward across runs and hosts (the
 * server refuses a repeat or one older than its replay window, spec
 * section 14.2.4): wall-clock time, not the monotonic clock of the
 * datapath. */
static uint64_t wall_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

static int run_session(const aftp_push_opts *o, aftp_io_ctx *ctx, aftp_udp *udp,
                       const aftp_file_info *info, uint16_t max_datagram,
                       aftp_push_result *res)
{
    aftp_sender_settings set;
    aftp_sender_settings_default(&set);
    set.conn_id = aftp_io_random_conn_id();
    set.rate_bps = o->rate_bps;
    set.policy = o->policy;
    set.max_rate_bps = o->max_rate_bps;
    set.min_rate_bps = o->min_rate_bps;
    set.max_datagram = max_datagram;
    if (o->idle_timeout_ns)
        set.idle_timeout_ns = o->idle_timeout_ns;
    set.storage = &aftp_source_ops;
    set.on_event = aftp_io_on_event;
    set.user = &ctx->storage.src;
    set.security = o->security;
    set.security.unix_time_ns = wall_clock_ns();
    aftp_sender *s = NULL;
    int rc = aftp_sender_new(&set, aftp_drive_now_ns(), &s);
    if (rc == AFTP_OK)
        rc = aftp_sender_add_file(s, info);
    if (rc == AFTP_OK) {
        push_key_probe kp;
        key_probe_init(&kp, o, s, res);
        aftp_sender_finish(s);
        aftp_drive d = {.sender = s, .udp = udp, .max_datagram = set.max_datagram,
                        .interrupt = o->hooks.interrupt, .on_tick = o->hooks.on_tick,
                        .app = o->hooks.app, .after_send = after_batch,
                        .after_send_ctx = &ctx->storage.src,
                        .source_guard = &ctx->storage.src.guard,
                        .on_turn = key_probe_turn, .on_turn_ctx = &kp};
        rc = aftp_drive_run(&d);
        key_probe_end(&kp);
        aftp_drive_stats(&d, &ctx->res->stats);
    }
    aftp_sender_del(s);
    return rc;
}

int aftp_push_run(const aftp_push_opts *o, aftp_push_result *out)
{
    aftp_io_result *res = &out->io;
    aftp_io_ctx ctx = {.res = res, .hooks = &o->hooks};
    aftp_file_info info;
    aftp_udp udp;
    memset(out, 0, sizeof *out);
    res->phase = AFTP_IO_PHASE_LOCAL;
    int rc = aftp_source_open(&ctx.storage.src, o->file, 1, &info);
    if (rc != AFTP_OK) {
        snprintf(res->message, sizeof res->message, "%s", ctx.storage.src.message);
        return res->error = rc;
    }
    if (o->hooks.interrupt != NULL && *o->hooks.interrupt) {
        aftp_source_fini(&ctx.storage.src); /* cancelled before any datagram */
        snprintf(res->message, sizeof res->message, "interrupted before the transfer started");
        return res->error = AFTP_ERR_CANCELLED;
    }
    uint16_t max_datagram = aftp_io_max_datagram(o->max_datagram);
    rc = open_socket(o, &udp);
    if (rc != AFTP_OK)
        snprintf(res->message, sizeof res->message, "cannot open a UDP socket to the peer");
    else
        rc = fit_route(o, &udp, &max_datagram, res);
    if (rc == AFTP_OK) {
        res->phase = AFTP_IO_PHASE_SESSION;
        rc = run_session(o, &ctx, &udp, &info, max_datagram, out);
    }
    res->datagram_asked = max_datagram;
    /* The session may end before its CLOSE event (the receiver gone once
     * it had our CLOSE): the reason is said here as well. */
    if (udp.too_big && rc != AFTP_OK && res->message[0] == '\0')
        aftp_udp_explain_too_big(&udp, max_datagram, res->message, sizeof res->message);
    aftp_udp_close(&udp);
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
    return res->error;
}
