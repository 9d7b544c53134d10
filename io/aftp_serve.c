#include "aftp_serve.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "aftp_drive.h"
#include "aftp_parse.h"
#include "aftp_store.h"
#include "aftp_udp.h"
#include "proto/aftp_wire.h"

/* The receive buffer absorbs what arrives while the loop is busy (page
 * faults, writeback): 50 ms at 10 Gbit/s. The rate is the sender's choice,
 * unknown here, so the server sizes for the fastest link we target. */
#define SERVE_RCV_RATE_BPS UINT64_C(10000000000)
#define SERVE_RCV_WINDOW_NS 50000000u
#define SERVE_ACCEPT_POLL_NS 1000000000u


static socklen_t addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int same_addr(const struct sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->sa_family != b->ss_family)
        return 0;
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

static int new_receiver(const aftp_serve_opts *o, aftp_io_ctx *ctx, aftp_receiver **out)
{
    aftp_receiver_settings set;
    aftp_receiver_settings_default(&set);
    set.conn_id = aftp_io_random_conn_id();
    set.max_datagram = AFTP_IO_DATAGRAM;
    if (o->idle_timeout_ns)
        set.idle_timeout_ns = o->idle_timeout_ns;
    set.storage = &aftp_store_ops;
    set.on_event = aftp_io_on_event;
    set.user = &ctx->storage.store;
    return aftp_receiver_new(&set, aftp_drive_now_ns(), out);
}

/* The client a session is for: its address and its connection id (the
 * HELLO header carries the client's own id). */
typedef struct serve_client {
    struct sockaddr_storage addr;
    uint32_t conn_id;
} serve_client;

/* A session starts only with a full-size HELLO of our version, and not
 * with a late copy of the HELLO of the session just served. */
static int is_new_hello(const uint8_t *pkt, size_t len, const struct sockaddr *from,
                        const serve_client *last)
{
    aftp_wire_header h;
    if (len < AFTP_WIRE_HELLO_MIN_LEN || aftp_wire_header_decode(pkt, len, &h) != AFTP_OK ||
        h.version != AFTP_WIRE_VERSION || h.type != AFTP_WIRE_HELLO)
        return 0;
    return !(h.conn_id == last->conn_id && same_addr(from, &last->addr));
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
                           AFTP_IO_DATAGRAM, 1);
    if (rc == AFTP_OK)
        rc = aftp_udp_connect(sess, (const struct sockaddr *)&client->addr,
                              addr_len((const struct sockaddr *)&client->addr));
    if (rc != AFTP_OK)
        return rc;
    aftp_udp_buffers b = {.want_snd = AFTP_UDP_MIN_BUFFER,
                          .want_rcv = aftp_udp_buffer_for(SERVE_RCV_RATE_BPS, SERVE_RCV_WINDOW_NS)};
    char advice[256];
    rc = aftp_udp_set_buffers(sess, &b);
    aftp_udp_buffers_advice(&b, advice, sizeof advice);
    aftp_io_warn(&o->hooks, advice);
    return rc;
}

/* Spec section 12.2: a long datagram in a version we do not speak gets a
 * VERSION_NEG, without any session or state. */
static void answer_unknown_version(aftp_udp *listener, const uint8_t *pkt, size_t len,
                                   const struct sockaddr *from)
{
    uint8_t reply[AFTP_WIRE_VERSION_NEG_REPLY_LEN];
    size_t n;
    if (aftp_wire_version_neg_reply(pkt, len, reply, sizeof reply, &n) == 1)
        aftp_udp_send_to(listener, reply, n, from);
}

/* Feeds one batch of the listener: the first new HELLO opens a session
 * with its sender, whose following datagrams in the batch are fed too;
 * unknown versions are answered. */
static int feed_listener_batch(const aftp_serve_opts *o, aftp_io_ctx *ctx, aftp_udp *listener,
                               aftp_drive *d, serve_client *client)
{
    aftp_udp_iter it = {0, 0};
    const uint8_t *pkt;
    size_t len;
    const struct sockaddr *from;
    while (aftp_udp_next(listener, &it, &pkt, &len, &from)) {
        if (d->receiver == NULL && is_new_hello(pkt, len, from, client)) {
            aftp_wire_header h;
            aftp_wire_header_decode(pkt, len, &h);
            int rc = new_receiver(o, ctx, &d->receiver);
            if (rc != AFTP_OK)
                return rc;
            memcpy(&client->addr, from, addr_len(from));
            client->conn_id = h.conn_id;
        }
        if (d->receiver != NULL && same_addr(from, &client->addr))
            aftp_drive_feed(d, aftp_drive_now_ns(), pkt, len);
        else
            answer_unknown_version(listener, pkt, len, from);
    }
    return AFTP_OK;
}

/* Waits for a new client's HELLO on the listener and starts its session
 * (engine fed, session socket open). */
static int accept_session(const aftp_serve_opts *o, aftp_io_ctx *ctx, aftp_udp *listener,
                          aftp_drive *d, serve_client *client)
{
    while (d->receiver == NULL) {
        if (o->hooks.interrupt && *o->hooks.interrupt)
            return AFTP_ERR_CANCELLED;
        size_t count = 0;
        aftp_udp_wait(listener, SERVE_ACCEPT_POLL_NS);
        int rc = aftp_udp_recv(listener, &count);
        if (rc == AFTP_OK)
            rc = feed_listener_batch(o, ctx, listener, d, client);
        if (rc != AFTP_OK)
            return rc;
    }
    return open_session_socket(o, listener, d->udp, client);
}

/* The session's outcome: the storage's own failure (it has the detail),
 * else a file's failure, else the session's. A client that leaves once it
 * has every FILE_RESULT (its CLOSE lost, or ICMP unreachable after it
 * exited) does not make a delivered transfer fail. */
static void settle_result(aftp_io_ctx *ctx, int session_rc)
{
    aftp_io_result *res = ctx->res;
    if (ctx->storage.store.last_error != AFTP_OK) {
        res->error = ctx->storage.store.last_error;
        snprintf(res->message, sizeof res->message, "%s", ctx->storage.store.message);
        return;
    }
    if (res->error != AFTP_OK)
        return;
    int peer_gone = session_rc == AFTP_ERR_IDLE_TIMEOUT || session_rc == AFTP_ERR_NETWORK;
    res->error = res->files_ok > 0 && peer_gone ? AFTP_OK : session_rc;
}

static int serve_one(const aftp_serve_opts *o, aftp_udp *listener, serve_client *client,
                     aftp_io_result *res)
{
    aftp_io_ctx ctx = {.res = res, .hooks = &o->hooks};
    aftp_udp sess = {.fd = -1};
    aftp_drive d = {.udp = &sess, .max_datagram = AFTP_IO_DATAGRAM,
                    .interrupt = o->hooks.interrupt, .on_tick = o->hooks.on_tick,
                    .app = o->hooks.app};
    memset(res, 0, sizeof *res);
    res->phase = AFTP_IO_PHASE_SESSION;
    aftp_store_init(&ctx.storage.store, o->dirfd, o->overwrite);
    int rc = accept_session(o, &ctx, listener, &d, client);
    if (rc == AFTP_OK) {
        rc = aftp_drive_run(&d);
        aftp_drive_stats(&d, &res->stats);
        settle_result(&ctx, rc);
        if (o->on_session_end)
            o->on_session_end(o->hooks.app, res, (struct sockaddr *)&client->addr);
    } else {
        res->error = rc;
    }
    aftp_receiver_del(d.receiver);
    aftp_store_fini(&ctx.storage.store);
    aftp_udp_close(&sess);
    return res->error;
}

static int open_listener(const aftp_serve_opts *o, aftp_udp *udp, aftp_io_result *res)
{
    int rc = aftp_udp_open(udp, o->listen, o->listen_len, AFTP_IO_DATAGRAM, 1);
    if (rc != AFTP_OK) {
        char where[64];
        aftp_format_addr(o->listen, where, sizeof where);
        snprintf(res->message, sizeof res->message, "cannot listen on %s", where);
        return rc;
    }
    if (udp->drop.threshold)
        aftp_io_warn(&o->hooks, "test loss shim active (" AFTP_DROP_ENV ")");
    struct sockaddr_storage local;
    if (o->on_listening && aftp_udp_local_addr(udp, &local) == AFTP_OK)
        o->on_listening(o->hooks.app, (struct sockaddr *)&local);
    return AFTP_OK;
}

int aftp_serve_run(const aftp_serve_opts *o, aftp_io_result *res)
{
    aftp_udp listener;
    serve_client client;
    memset(res, 0, sizeof *res);
    memset(&client, 0, sizeof client);
    res->phase = AFTP_IO_PHASE_LOCAL;
    int rc = open_listener(o, &listener, res);
    if (rc != AFTP_OK) {
        aftp_udp_close(&listener);
        return res->error = rc;
    }
    do {
        rc = serve_one(o, &listener, &client, res);
    } while (!o->once && rc != AFTP_ERR_CANCELLED && !(o->hooks.interrupt && *o->hooks.interrupt));
    aftp_udp_close(&listener);
    return res->error;
}
