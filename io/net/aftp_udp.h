/*
 * The UDP socket of a datapath: batched sends (sendmmsg, UDP GSO when the
 * kernel has it, with a fallback when it refuses), batched receives
 * (recvmmsg, UDP GRO split back into datagrams), socket buffer sizing and
 * the test-only loss shim (aftp_drop.h). One thread uses a socket.
 */
#ifndef AFTP_UDP_H
#define AFTP_UDP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aftp/aftp_engine.h"
#include "aftp_batch.h"
#include "aftp_drop.h"

#define AFTP_UDP_TX_MAX 1024u /* datagrams per aftp_udp_send call */

/* The arrays of batched sends and receives: about 2.2 MiB (2 MiB of
 * receive buffers, a datagram slot per message or a 64 KiB slot per
 * GRO-coalesced one, and AFTP_UDP_TX_MAX message headers). They belong to
 * the thread that reads and writes, not to a socket: a thread that runs
 * many sessions (a server's worker, aftp_drive_scratch) lends one set to
 * each socket for the call (aftp_udp_recv_with, aftp_udp_send_with), so a
 * session costs its socket's struct alone. */
typedef struct aftp_udp_bufs aftp_udp_bufs;
/* For datagrams of up to max_datagram bytes. */
int aftp_udp_bufs_new(aftp_udp_bufs **out, size_t max_datagram);
void aftp_udp_bufs_del(aftp_udp_bufs *b);

/* A socket: a few hundred bytes of its own. The batch arrays it reads and
 * writes with are lent per call, or its own, made at its first
 * aftp_udp_recv / aftp_udp_send (a client's or a listener's socket). */
typedef struct aftp_udp {
    int fd;
    int gso;            /* UDP_SEGMENT in use */
    int gro;            /* UDP_GRO in use */
    aftp_drop drop;
    size_t max_datagram; /* the largest datagram received whole */
    aftp_udp_bufs *own;  /* made by the first call without lent arrays */
    /* the last receive: the arrays it filled (aftp_udp_next walks them) */
    const aftp_udp_bufs *rx;
    size_t rx_slot;     /* bytes per receive buffer */
    size_t rx_slots;    /* buffers offered to the kernel */
    size_t rx_count;    /* messages held */
    uint64_t send_errors; /* datagrams the kernel refused (ENOBUFS...) */
    uint64_t too_big;     /* ...of which larger than the path MTU (EMSGSIZE) */
    int sys_errno;        /* why aftp_udp_open failed, 0: not a system error */
} aftp_udp;

/* How a socket holds its port. A server binds its session sockets to its
 * listening port (once connected, a session socket receives its client's
 * datagrams before the listener does), so the listener shares its port
 * with them (SO_REUSEADDR), but only after it bound the port alone: a
 * second server on a port in use fails with EADDRINUSE instead of
 * silently taking new clients. */
enum aftp_udp_port {
    AFTP_UDP_PORT_OWN = 0, /* the port is this socket's alone */
    AFTP_UDP_PORT_SERVE,   /* a listener: bound alone, then open to its sessions */
    AFTP_UDP_PORT_SESSION  /* a session socket: joins its listener's port */
};

/* Opens a socket bound to `local` (the wildcard of the peer's family for a
 * client, the listen address for a server), enables GSO/GRO where the
 * kernel has them (in a build with the test hooks, AFTP_IO_OFFLOAD=0 in the
 * environment turns both off, to measure them, and AFTP_TEST_DROP is read).
 * `max_datagram` bounds what is received; `port` is an enum aftp_udp_port. On failure u->sys_errno
 * holds the system's reason (0 when it was not a system call's). */
int aftp_udp_open(aftp_udp *u, const struct sockaddr *local, socklen_t local_len,
                  size_t max_datagram, int port);
void aftp_udp_close(aftp_udp *u);
/* Connected sockets report ICMP port unreachable as AFTP_ERR_NETWORK and
 * receive only from the peer. */
int aftp_udp_connect(aftp_udp *u, const struct sockaddr *peer, socklen_t len);
/* On a connected socket: the don't-fragment behaviour of spec 4.1. A
 * datagram larger than the path MTU the kernel knows (the route's, or less
 * once an ICMP "fragmentation needed" came back) is refused (counted in
 * too_big), never split into IP fragments, which would multiply loss. */
void aftp_udp_forbid_fragments(aftp_udp *u);
/* On a connected socket: the largest UDP payload the path MTU the kernel
 * knows carries (MTU - 28 over IPv4, - 48 over IPv6), and that MTU in
 * *mtu; 0 when the kernel does not say. */
size_t aftp_udp_path_datagram(const aftp_udp *u, unsigned *mtu);
/* Why datagrams of `datagram` bytes were refused (too_big): a line for
 * the user naming the path MTU now. */
void aftp_udp_explain_too_big(const aftp_udp *u, size_t datagram, char *buf, size_t cap);
int aftp_udp_local_addr(const aftp_udp *u, struct sockaddr_storage *out);

/* Sends dgs[0..n) (n <= AFTP_UDP_TX_MAX) to the connected peer. Datagrams
 * the kernel drops for lack of buffers are counted, not errors (the
 * protocol repairs loss). AFTP_ERR_NETWORK when the peer is unreachable. */
int aftp_udp_send(aftp_udp *u, const aftp_datagram *dgs, size_t n);
/* aftp_udp_send with the caller's arrays. */
int aftp_udp_send_with(aftp_udp *u, aftp_udp_bufs *b, const aftp_datagram *dgs, size_t n);

/* Sends one datagram to `to` (an unconnected socket's reply, e.g. a
 * server's stateless VERSION_NEG). A datagram the kernel refuses is lost
 * like any other: AFTP_ERR_NETWORK only when `to` is unreachable. */
int aftp_udp_send_to(aftp_udp *u, const uint8_t *buf, size_t len, const struct sockaddr *to);

/* Receives what is queued without blocking; *count datagram buffers (each
 * possibly GRO-coalesced) are then walked with aftp_udp_next. */
int aftp_udp_recv(aftp_udp *u, size_t *count);
/* aftp_udp_recv into the caller's arrays (made for at least this socket's
 * max_datagram, else AFTP_ERR_INVALID_ARGUMENT): what it received is
 * walked until the arrays' next use. */
int aftp_udp_recv_with(aftp_udp *u, aftp_udp_bufs *b, size_t *count);

typedef struct aftp_udp_iter {
    size_t msg;
    size_t off;
    /* Of the message being walked: its GRO segment size (0: not coalesced)
     * and when the kernel received it, in CLOCK_REALTIME nanoseconds (0:
     * the kernel gave no stamp). Every datagram of a message shares them. */
    size_t seg;
    uint64_t arrival_ns;
} aftp_udp_iter;

/* Next received datagram: returns 1 and sets *pkt, *len, *from (and the
 * iterator's arrival_ns); 0 at the end. */
int aftp_udp_next(aftp_udp *u, aftp_udp_iter *it, const uint8_t **pkt, size_t *len,
                  const struct sockaddr **from);

/* Waits until the socket is readable or timeout_ns passes (a signal ends
 * the wait early). Returns 1 when readable, 0 otherwise. */
int aftp_udp_wait(aftp_udp *u, uint64_t timeout_ns);

/* Socket buffers: the bytes `rate_bps` delivers in `window_ns`, at least
 * AFTP_UDP_MIN_BUFFER, at most AFTP_UDP_MAX_BUFFER. */
#define AFTP_UDP_MIN_BUFFER ((size_t)1 << 20)
#define AFTP_UDP_MAX_BUFFER ((size_t)256 << 20)
size_t aftp_udp_buffer_for(uint64_t rate_bps, uint64_t window_ns);

typedef struct aftp_udp_buffers {
    size_t want_snd, got_snd;
    size_t want_rcv, got_rcv;
} aftp_udp_buffers;

/* Requests the sizes in *b (SO_*BUFFORCE when privileged, else SO_*BUF)
 * and reads back what the kernel granted. */
int aftp_udp_set_buffers(aftp_udp *u, aftp_udp_buffers *b);

/* A warning line naming the sysctl to raise when a buffer was capped
 * below what was asked; empty when nothing was capped. */
void aftp_udp_buffers_advice(const aftp_udp_buffers *b, char *buf, size_t cap);

#endif /* AFTP_UDP_H */
