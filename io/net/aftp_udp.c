#include "aftp_udp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TX_CTRL_SPACE CMSG_SPACE(sizeof(uint16_t))
/* Per received message: its GRO segment size and its kernel arrival stamp. */
#define RX_CTRL_SPACE (CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct timespec)))
#define RX_GRO_SLOT 65536u  /* a GRO-coalesced message is at most 64 KiB */
#define RX_GRO_SLOTS 32u
#define RX_PLAIN_SLOTS 256u

/* GSO and GRO where the kernel has them; a build with the test hooks
 * turns both off with AFTP_IO_OFFLOAD=0, so tests and measurements run
 * the plain path on any kernel. */
#ifdef AFTP_TEST_HOOKS
static int offload_allowed(void)
{
    const char *v = getenv("AFTP_IO_OFFLOAD");
    return v == NULL || strcmp(v, "0") != 0;
}
#else
static int offload_allowed(void)
{
    return 1;
}
#endif

/* Whether the kernel takes UDP_SEGMENT on this socket: set it, then clear
 * it again (the size is given per message). */
static int probe_gso(int fd)
{
    int seg = 1200, off = 0;
    if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg) != 0)
        return 0;
    return setsockopt(fd, SOL_UDP, UDP_SEGMENT, &off, sizeof off) == 0;
}

struct aftp_udp_bufs {
    size_t max_datagram;
    struct mmsghdr *tx_msgs;
    struct iovec *tx_iov;
    uint8_t *tx_ctrl;
    aftp_datagram *tx_kept;
    aftp_batch_group *tx_groups;
    size_t rx_bytes;    /* of rx_buf */
    uint8_t *rx_buf;
    struct mmsghdr *rx_msgs;  /* RX_PLAIN_SLOTS of each */
    struct iovec *rx_iov;
    uint8_t *rx_ctrl;
    struct sockaddr_storage *rx_from;
};

/* Room for either kind of socket's whole batch: RX_GRO_SLOTS coalesced
 * messages, or RX_PLAIN_SLOTS datagrams (+1 byte each tells truncation). */
static size_t rx_bytes_for(size_t max_datagram)
{
    size_t gro = (size_t)RX_GRO_SLOTS * RX_GRO_SLOT;
    size_t plain = (size_t)RX_PLAIN_SLOTS * (max_datagram + 1);
    return gro > plain ? gro : plain;
}

int aftp_udp_bufs_new(aftp_udp_bufs **out, size_t max_datagram)
{
    aftp_udp_bufs *b = calloc(1, sizeof *b);
    *out = NULL;
    if (b == NULL)
        return AFTP_ERR_NO_MEMORY;
    b->max_datagram = max_datagram;
    b->rx_bytes = rx_bytes_for(max_datagram);
    b->tx_msgs = calloc(AFTP_UDP_TX_MAX, sizeof *b->tx_msgs);
    b->tx_iov = calloc(2 * AFTP_UDP_TX_MAX, sizeof *b->tx_iov);
    b->tx_ctrl = calloc(AFTP_UDP_TX_MAX, TX_CTRL_SPACE);
    b->tx_kept = calloc(AFTP_UDP_TX_MAX, sizeof *b->tx_kept);
    b->tx_groups = calloc(AFTP_UDP_TX_MAX, sizeof *b->tx_groups);
    b->rx_buf = malloc(b->rx_bytes);
    b->rx_msgs = calloc(RX_PLAIN_SLOTS, sizeof *b->rx_msgs);
    b->rx_iov = calloc(RX_PLAIN_SLOTS, sizeof *b->rx_iov);
    b->rx_ctrl = calloc(RX_PLAIN_SLOTS, RX_CTRL_SPACE);
    b->rx_from = calloc(RX_PLAIN_SLOTS, sizeof *b->rx_from);
    if (!b->tx_msgs || !b->tx_iov || !b->tx_ctrl || !b->tx_kept || !b->tx_groups || !b->rx_buf ||
        !b->rx_msgs || !b->rx_iov || !b->rx_ctrl || !b->rx_from) {
        aftp_udp_bufs_del(b);
        return AFTP_ERR_NO_MEMORY;
    }
    *out = b;
    return AFTP_OK;
}

void aftp_udp_bufs_del(aftp_udp_bufs *b)
{
    if (b == NULL)
        return;
    free(b->tx_msgs);
    free(b->tx_iov);
    free(b->tx_ctrl);
    free(b->tx_kept);
    free(b->tx_groups);
    free(b->rx_buf);
    free(b->rx_msgs);
    free(b->rx_iov);
    free(b->rx_ctrl);
    free(b->rx_from);
    free(b);
}

/* The socket's own arrays, made at their first use. */
static aftp_udp_bufs *own_bufs(aftp_udp *u)
{
    if (u->own == NULL)
        (void)aftp_udp_bufs_new(&u->own, u->max_datagram);
    return u->own;
}

/* Binds fd to `local` as `port` says (enum aftp_udp_port). The kernel
 * lets a socket bind a port another one holds only when both set
 * SO_REUSEADDR; a listener sets it after its own bind, which therefore
 * fails on a port in use, and its session sockets set it before theirs. */
static int bind_port(int fd, const struct sockaddr *local, socklen_t local_len, int port)
{
    int one = 1;
    if (port == AFTP_UDP_PORT_SESSION &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        return -1;
    if (bind(fd, local, local_len) != 0)
        return -1;
    if (port == AFTP_UDP_PORT_SERVE)
        return setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return 0;
}

int aftp_udp_open(aftp_udp *u, const struct sockaddr *local, socklen_t local_len,
                  size_t max_datagram, int port)
{
    memset(u, 0, sizeof *u);
    u->fd = -1;
    int rc = aftp_drop_from_env(&u->drop);
    if (rc != AFTP_OK)
        return rc;
    u->fd = socket(local->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
    if (u->fd < 0) {
        u->sys_errno = errno;
        return AFTP_ERR_NETWORK;
    }
    int one = 1;
    /* Arrival stamps (aftp_udp_iter.arrival_ns); without them, read times stand in. */
    (void)setsockopt(u->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    if (bind_port(u->fd, local, local_len, port) != 0) {
        u->sys_errno = errno;
        aftp_udp_close(u);
        return u->sys_errno == EACCES ? AFTP_ERR_PERMISSION : AFTP_ERR_NETWORK;
    }
    if (offload_allowed()) {
        u->gso = probe_gso(u->fd);
        u->gro = setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    }
    u->max_datagram = max_datagram;
    return AFTP_OK;
}

void aftp_udp_close(aftp_udp *u)
{
    if (u->fd >= 0)
        close(u->fd);
    u->fd = -1;
    aftp_udp_bufs_del(u->own);
    u->own = NULL;
    u->rx = NULL;
    u->rx_count = 0;
}

int aftp_udp_connect(aftp_udp *u, const struct sockaddr *peer, socklen_t len)
{
    return connect(u->fd, peer, len) == 0 ? AFTP_OK : AFTP_ERR_NETWORK;
}

static int socket_family(const aftp_udp *u)
{
    struct sockaddr_storage local;
    return aftp_udp_local_addr(u, &local) == AFTP_OK ? local.ss_family : AF_UNSPEC;
}

void aftp_udp_forbid_fragments(aftp_udp *u)
{
    int v4 = IP_PMTUDISC_DO, v6 = IPV6_PMTUDISC_DO;
    if (socket_family(u) == AF_INET6)
        (void)setsockopt(u->fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v6, sizeof v6);
    else
        (void)setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &v4, sizeof v4);
}

size_t aftp_udp_path_datagram(const aftp_udp *u, unsigned *mtu)
{
    int v6 = socket_family(u) == AF_INET6;
    int value = 0;
    socklen_t len = sizeof value;
    *mtu = 0;
    if ((v6 ? getsockopt(u->fd, IPPROTO_IPV6, IPV6_MTU, &value, &len)
            : getsockopt(u->fd, IPPROTO_IP, IP_MTU, &value, &len)) != 0)
        return 0;
    size_t headers = v6 ? 40 + 8 : 20 + 8;
    if (value <= (int)headers)
        return 0;
    *mtu = (unsigned)value;
    return (size_t)value - headers;
}

void aftp_udp_explain_too_big(const aftp_udp *u, size_t datagram, char *buf, size_t cap)
{
    unsigned mtu;
    aftp_udp_path_datagram(u, &mtu);
    snprintf(buf, cap,
             "the path MTU fell to %u bytes: datagrams of %zu bytes no longer fit (--mtu)", mtu,
             datagram);
}

int aftp_udp_local_addr(const aftp_udp *u, struct sockaddr_storage *out)
{
    socklen_t len = sizeof *out;
    return getsockname(u->fd, (struct sockaddr *)out, &len) == 0 ? AFTP_OK : AFTP_ERR_NETWORK;
}

/* Fills one mmsghdr per group; the iovecs of datagram j sit at 2j, 2j+1. */
static void build_messages(aftp_udp_bufs *b, const aftp_datagram *dgs, size_t ngroups)
{
    for (size_t g = 0; g < ngroups; g++) {
        const aftp_batch_group *grp = &b->tx_groups[g];
        struct msghdr *m = &b->tx_msgs[g].msg_hdr;
        memset(m, 0, sizeof *m);
        for (size_t j = grp->first; j < grp->first + grp->count; j++) {
            b->tx_iov[2 * j] = (struct iovec){(void *)dgs[j].head, dgs[j].head_len};
            b->tx_iov[2 * j + 1] = (struct iovec){(void *)dgs[j].payload, dgs[j].payload_len};
        }
        m->msg_iov = &b->tx_iov[2 * grp->first];
        m->msg_iovlen = 2 * grp->count;
        if (grp->count > 1) {
            m->msg_control = b->tx_ctrl + g * TX_CTRL_SPACE;
            m->msg_controllen = TX_CTRL_SPACE;
            struct cmsghdr *c = CMSG_FIRSTHDR(m);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)grp->seg_size;
            memcpy(CMSG_DATA(c), &seg, sizeof seg);
        }
    }
}

static int is_unreachable(int e)
{
    return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH || e == EHOSTDOWN ||
           e == ENETDOWN || e == EDESTADDRREQ || e == ENOTCONN;
}

static int send_planned(aftp_udp *u, aftp_udp_bufs *b, const aftp_datagram *dgs, size_t n)
{
    size_t ngroups = aftp_batch_plan(dgs, n, u->gso, b->tx_groups);
    build_messages(b, dgs, ngroups);
    size_t g = 0;
    while (g < ngroups) {
        int r = sendmmsg(u->fd, &b->tx_msgs[g], (unsigned)(ngroups - g), 0);
        if (r > 0) {
            g += (size_t)r;
            continue;
        }
        int e = errno;
        if (e == EINTR)
            continue;
        if ((e == EIO || e == EINVAL) && u->gso && b->tx_groups[g].count > 1) {
            /* The kernel or the device cannot segment: plain datagrams from here on. */
            u->gso = 0;
            size_t first = b->tx_groups[g].first;
            return send_planned(u, b, dgs + first, n - first);
        }
        if (is_unreachable(e))
            return AFTP_ERR_NETWORK;
        /* ENOBUFS, EAGAIN, EMSGSIZE...: these datagrams are lost like any
         * other; the protocol repairs them. EFAULT too (a payload in a
         * source mapping whose file shrank): the sender's check of its
         * source after the batch fails the file. EMSGSIZE is counted apart:
         * the path MTU fell below our datagrams, which repairs cannot mend. */
        u->send_errors += b->tx_groups[g].count;
        if (e == EMSGSIZE)
            u->too_big += b->tx_groups[g].count;
        g++;
    }
    return AFTP_OK;
}

int aftp_udp_send(aftp_udp *u, const aftp_datagram *dgs, size_t n)
{
    aftp_udp_bufs *b = own_bufs(u);
    return b != NULL ? aftp_udp_send_with(u, b, dgs, n) : AFTP_ERR_NO_MEMORY;
}

int aftp_udp_send_with(aftp_udp *u, aftp_udp_bufs *b, const aftp_datagram *dgs, size_t n)
{
    if (n > AFTP_UDP_TX_MAX)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (u->drop.threshold != 0) {
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (!aftp_drop_next(&u->drop))
                b->tx_kept[kept++] = dgs[i];
        dgs = b->tx_kept;
        n = kept;
    }
    return n == 0 ? AFTP_OK : send_planned(u, b, dgs, n);
}

int aftp_udp_send_to(aftp_udp *u, const uint8_t *buf, size_t len, const struct sockaddr *to)
{
    socklen_t to_len = to->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                  : sizeof(struct sockaddr_in);
    if (sendto(u->fd, buf, len, MSG_DONTWAIT, to, to_len) >= 0)
        return AFTP_OK;
    if (is_unreachable(errno))
        return AFTP_ERR_NETWORK;
    u->send_errors++;
    return AFTP_OK;
}

/* Lays out the arrays' receive buffers in slots of this socket's kind. */
static void prepare_receive(aftp_udp *u, aftp_udp_bufs *b)
{
    u->rx = b;
    u->rx_slot = u->gro ? RX_GRO_SLOT : u->max_datagram + 1; /* +1 tells truncation */
    u->rx_slots = b->rx_bytes / u->rx_slot;
    if (u->rx_slots > (u->gro ? RX_GRO_SLOTS : RX_PLAIN_SLOTS))
        u->rx_slots = u->gro ? RX_GRO_SLOTS : RX_PLAIN_SLOTS;
    for (size_t i = 0; i < u->rx_slots; i++) {
        struct msghdr *m = &b->rx_msgs[i].msg_hdr;
        b->rx_iov[i] = (struct iovec){b->rx_buf + i * u->rx_slot, u->rx_slot};
        memset(m, 0, sizeof *m);
        m->msg_name = &b->rx_from[i];
        m->msg_namelen = sizeof b->rx_from[i];
        m->msg_iov = &b->rx_iov[i];
        m->msg_iovlen = 1;
        m->msg_control = b->rx_ctrl + i * RX_CTRL_SPACE;
        m->msg_controllen = RX_CTRL_SPACE;
    }
    u->rx_count = 0;
}

int aftp_udp_recv(aftp_udp *u, size_t *count)
{
    aftp_udp_bufs *b = own_bufs(u);
    *count = 0;
    return b != NULL ? aftp_udp_recv_with(u, b, count) : AFTP_ERR_NO_MEMORY;
}

int aftp_udp_recv_with(aftp_udp *u, aftp_udp_bufs *b, size_t *count)
{
    *count = 0;
    u->rx_count = 0;
    if (b->max_datagram < u->max_datagram)
        return AFTP_ERR_INVALID_ARGUMENT;
    prepare_receive(u, b);
    for (;;) {
        int r = recvmmsg(u->fd, b->rx_msgs, (unsigned)u->rx_slots, MSG_DONTWAIT, NULL);
        if (r >= 0) {
            u->rx_count = (size_t)r;
            *count = (size_t)r;
            return AFTP_OK;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return AFTP_OK;
        return is_unreachable(errno) ? AFTP_ERR_NETWORK : AFTP_ERR_IO;
    }
}

/* What the kernel said of a received message, in one walk of its control
 * messages: its GRO segment size (0: not coalesced) and its arrival stamp
 * (0: none). */
static void read_control(struct msghdr *m, aftp_udp_iter *it)
{
    it->seg = 0;
    it->arrival_ns = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            it->seg = v > 0 ? (size_t)v : 0;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            it->arrival_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
    }
}

int aftp_udp_next(aftp_udp *u, aftp_udp_iter *it, const uint8_t **pkt, size_t *len,
                  const struct sockaddr **from)
{
    while (it->msg < u->rx_count) {
        struct mmsghdr *mm = &u->rx->rx_msgs[it->msg];
        size_t total = mm->msg_len;
        if ((mm->msg_hdr.msg_flags & MSG_TRUNC) || total >= u->rx_slot + (u->gro ? 1 : 0) ||
            it->off >= total) {
            it->msg++; /* truncated (too large for us) or fully walked */
            it->off = 0;
            continue;
        }
        if (it->off == 0)
            read_control(&mm->msg_hdr, it);
        size_t n = it->seg == 0 || it->seg > total - it->off ? total - it->off : it->seg;
        *pkt = u->rx->rx_buf + it->msg * u->rx_slot + it->off;
        *len = n;
        *from = (const struct sockaddr *)&u->rx->rx_from[it->msg];
        it->off += n;
        return 1;
    }
    return 0;
}

int aftp_udp_wait(aftp_udp *u, uint64_t timeout_ns)
{
    struct pollfd p = {.fd = u->fd, .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
                          .tv_nsec = (long)(timeout_ns % 1000000000u)};
    return ppoll(&p, 1, &ts, NULL) > 0;
}

size_t aftp_udp_buffer_for(uint64_t rate_bps, uint64_t window_ns)
{
    /* rate_bps / 8 bytes per second, times window_ns / 1e9, in an order
     * that cannot overflow for rates up to 1 Tbit/s and windows up to 1 s */
    uint64_t bytes = rate_bps / 8 / 1000 * (window_ns / 1000) / 1000;
    if (bytes < AFTP_UDP_MIN_BUFFER)
        return AFTP_UDP_MIN_BUFFER;
    return bytes > AFTP_UDP_MAX_BUFFER ? AFTP_UDP_MAX_BUFFER : (size_t)bytes;
}

/* Linux reports twice the requested size (it counts its bookkeeping); we
 * report the payload share, half of it. */
static size_t set_one(int fd, int force_opt, int opt, size_t want)
{
    int v = want > (size_t)(1 << 30) ? (1 << 30) : (int)want;
    if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) != 0)
        setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
    int got = 0;
    socklen_t len = sizeof got;
    getsockopt(fd, SOL_SOCKET, opt, &got, &len);
    return got > 0 ? (size_t)got / 2 : 0;
}

int aftp_udp_set_buffers(aftp_udp *u, aftp_udp_buffers *b)
{
    b->got_snd = set_one(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, b->want_snd);
    b->got_rcv = set_one(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, b->want_rcv);
    return b->got_snd > 0 && b->got_rcv > 0 ? AFTP_OK : AFTP_ERR_NETWORK;
}

void aftp_udp_buffers_advice(const aftp_udp_buffers *b, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (b->got_rcv < b->want_rcv)
        snprintf(buf, cap,
                 "UDP receive buffer capped at %zu KiB (wanted %zu KiB), which may limit the "
                 "rate; raise it with: sysctl -w net.core.rmem_max=%zu",
                 b->got_rcv >> 10, b->want_rcv >> 10, 2 * b->want_rcv);
    else if (b->got_snd < b->want_snd)
        snprintf(buf, cap,
                 "UDP send buffer capped at %zu KiB (wanted %zu KiB), which may limit the "
                 "rate; raise it with: sysctl -w net.core.wmem_max=%zu",
                 b->got_snd >> 10, b->want_snd >> 10, 2 * b->want_snd);
}
