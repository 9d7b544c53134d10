#include "aftp_keyfetch.h"

#include <netinet/in.h>
#include <string.h>

#include "aftp_drive.h"
#include "aftp_io.h"
#include "aftp_udp.h"

/* A socket of the peer's family on any port, connected to the peer: the
 * kernel then delivers only the peer's datagrams and reports ICMP errors. */
static int open_socket(const aftp_keyfetch_opts *o, aftp_udp *udp)
{
    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    local.ss_family = o->peer->sa_family;
    socklen_t len = local.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);
    int rc = aftp_udp_open(udp, (struct sockaddr *)&local, len, AFTP_IO_DATAGRAM, 0);
    return rc == AFTP_OK ? aftp_udp_connect(udp, o->peer, o->peer_len) : rc;
}

/* Reads what is queued: 1 when the answer was among it, 0 when not, or an
 * error (the peer unreachable). */
static int read_answer(aftp_udp *udp, uint32_t conn_id, uint8_t *key)
{
    size_t count;
    aftp_udp_iter it = {0};
    const uint8_t *pkt;
    size_t len;
    const struct sockaddr *from;
    int rc = aftp_udp_recv(udp, &count);
    while (rc == AFTP_OK && aftp_udp_next(udp, &it, &pkt, &len, &from))
        if (aftp_keyreq_answer(conn_id, pkt, len, key))
            return 1;
    return rc;
}

int aftp_keyprobe_open(aftp_keyprobe *p, const aftp_keyfetch_opts *o)
{
    memset(p, 0, sizeof *p);
    p->udp.fd = -1;
    /* Its own id: an answer can never be taken for a session's. */
    int rc = aftp_keyreq_init(&p->req, aftp_io_random_conn_id(), AFTP_IO_DATAGRAM,
                              o->attempts ? o->attempts : AFTP_KEYFETCH_ATTEMPTS,
                              o->interval_ns ? o->interval_ns : AFTP_KEYFETCH_INTERVAL_NS);
    return rc == AFTP_OK ? open_socket(o, &p->udp) : rc;
}

int aftp_keyprobe_step(aftp_keyprobe *p, uint64_t now_ns, uint8_t *key)
{
    int rc = read_answer(&p->udp, p->req.conn_id, key);
    if (rc != AFTP_OK)
        return rc;
    rc = aftp_keyreq_due(&p->req, now_ns);
    if (rc != 1)
        return rc;
    aftp_datagram dg = {.head = p->req.req, .head_len = p->req.req_len};
    return aftp_udp_send(&p->udp, &dg, 1);
}

void aftp_keyprobe_close(aftp_keyprobe *p)
{
    aftp_udp_close(&p->udp);
}

int aftp_keyfetch_run(const aftp_keyfetch_opts *o, uint8_t *key)
{
    aftp_keyprobe p;
    int rc = aftp_keyprobe_open(&p, o);
    while (rc == AFTP_OK) {
        uint64_t now = aftp_drive_now_ns();
        if (o->interrupt != NULL && *o->interrupt) {
            rc = AFTP_ERR_CANCELLED;
            break;
        }
        int got = aftp_keyprobe_step(&p, now, key);
        if (got == 1)
            break;
        rc = got;
        if (rc == AFTP_OK) /* the next send is due later than now */
            aftp_udp_wait(&p.udp, p.req.next_send_ns - now);
    }
    aftp_keyprobe_close(&p);
    return rc;
}
