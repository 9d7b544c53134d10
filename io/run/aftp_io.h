/*
 * What client and server runs share: their callbacks, their result, and
 * the bookkeeping of engine events into that result.
 */
#ifndef AFTP_IO_H
#define AFTP_IO_H

#include <stdatomic.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp_faux.h"
#include "aftp_pullsrc.h"
#include "aftp_source.h"
#include "aftp_store.h"
#include "aftp_treesend.h"
#include "aftp_treestore.h"
#include "aftp_udp.h"

/* Datagram sizes follow from the path MTU (spec section 4.1): an IP packet
 * of `mtu` bytes carries mtu - 48 bytes of UDP payload over IPv6 (40 + 8
 * bytes of headers), which fits IPv4 (20 + 8) as well. */
#define AFTP_IO_IP_UDP_HEADERS 48u
#define AFTP_IO_MTU 1500u     /* the default path: Ethernet */
#define AFTP_IO_MIN_MTU 1248u /* datagrams of AFTP_WIRE_MIN_DATAGRAM */
#define AFTP_IO_MAX_MTU 9216u /* the largest jumbo frames */
#define AFTP_IO_DATAGRAM_FOR(mtu) ((mtu) - AFTP_IO_IP_UDP_HEADERS)
/* Largest datagram by default: a 1500-byte path's UDP payload. */
#define AFTP_IO_DATAGRAM AFTP_IO_DATAGRAM_FOR(AFTP_IO_MTU)

/* A run's largest datagram: as configured, 0 meaning the default. */
static inline uint16_t aftp_io_max_datagram(uint16_t configured)
{
    return configured ? configured : AFTP_IO_DATAGRAM;
}

/* Where a failure happened: before the session (local file or socket), or in it. */
enum aftp_io_phase { AFTP_IO_PHASE_LOCAL = 1, AFTP_IO_PHASE_SESSION };

/* Callbacks shared by client and server runs; all optional, all get `app`. */
typedef struct aftp_io_hooks {
    aftp_event_cb on_event; /* the engine's events, as they happen */
    void (*on_tick)(void *app, const aftp_stats *st, uint64_t now_ns); /* ~4 per second */
    void (*on_warning)(void *app, const char *text);
    void *app;
    /* non-zero: cancel. Set by a signal handler or another thread: an
     * atomic (lock-free, so async-signal-safe) for both. */
    atomic_int *interrupt;
} aftp_io_hooks;

typedef struct aftp_io_result {
    int error;          /* AFTP_OK when every file was delivered and verified */
    int phase;          /* enum aftp_io_phase of the error */
    int connected;      /* the handshake completed */
    int files_ok;       /* files verified */
    char message[512];  /* detail: local error text or the peer's reason; may be empty */
    uint16_t datagram_asked; /* client: the datagram size it asked for (the route's cap applied) */
    int have_peer_key;  /* the handshake authenticated the peer's key: */
    uint8_t peer_key[AFTP_KEY_LEN];
    aftp_stats stats;   /* engine counters at the end */
} aftp_io_result;

uint32_t aftp_io_random_conn_id(void);
/* A receiver's settings as every run starts them: the defaults, a random
 * connection id, the run's largest datagram (0: AFTP_IO_DATAGRAM) and its
 * idle timeout (0: the engine's default). */
void aftp_io_receiver_settings(aftp_receiver_settings *set, uint16_t max_datagram,
                               uint64_t idle_timeout_ns);
void aftp_io_warn(const aftp_io_hooks *h, const char *text);

/* A client's socket: any local port on the wildcard address of the peer's
 * family, connected to the peer. AFTP_OK or the socket's error. */
int aftp_io_open_client_socket(aftp_udp *udp, const struct sockaddr *peer,
                               socklen_t peer_len, uint16_t max_datagram);
/* Asks for send and receive buffers of these sizes; what the kernel did
 * not grant is told to hooks->on_warning with the advice to raise it. */
int aftp_io_size_buffers(const aftp_io_hooks *hooks, aftp_udp *udp, size_t want_snd,
                         size_t want_rcv);
/* What a run hands the engine as `user`: its storage (which the storage
 * callbacks receive) inside the context that events need. */
typedef struct aftp_io_ctx {
    union {
        aftp_source src; /* client */
        aftp_store store; /* server */
        aftp_faux_sink sink; /* server into faux:// */
        aftp_treesend tree_src;    /* client, pipelined mode: the entries' sources */
        aftp_treestore tree_dst;   /* server, pipelined mode: the destination tree */
        aftp_pullsrc pull_src;     /* server of a pull: the served paths */
    } storage;
    aftp_io_result *res;
    const aftp_io_hooks *hooks;
} aftp_io_ctx;

/* The engine's event callback for `user` = &ctx->storage: records the
 * event in ctx->res (connection, file results, peer reason) and passes it
 * on to hooks->on_event. */
void aftp_io_on_event(void *user, const aftp_event *ev);

#endif /* AFTP_IO_H */
