#include "aftp_keyfetch.h"

#include <netinet/in.h>
#include <string.h>

#include "aftp_drive.h"
#include "aftp_session.h"
#include "aftp_udp.h"

int aftp_keyfetch_request(uint32_t conn_id, uint8_t *buf, size_t cap, size_t *len)
{
    uint8_t ext[4];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    int rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_KEY_REQUEST, NULL, 0);
    if (rc != AFTP_OK)
        return rc;
    /* The offer is an ordinary one; the server looks only at KEY_REQUEST. */
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.hdr.version = AFTP_WIRE_VERSION;
    p.hdr.type = AFTP_WIRE_HELLO;
    p.hdr.conn_id = conn_id;
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = AFTP_IO_DATAGRAM;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    return aftp_wire_encode(&p, buf, cap, len);
}

int aftp_keyfetch_answer(uint32_t conn_id, const uint8_t *pkt, size_t len, uint8_t *key)
{
    aftp_wire_packet p;
    if (aftp_wire_decode(pkt, len, &p) != AFTP_OK || p.hdr.type != AFTP_WIRE_SERVER_KEY ||
        p.hdr.conn_id != conn_id)
        return 0;
    memcpy(key, p.u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
    return 1;
}

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
        if (aftp_keyfetch_answer(conn_id, pkt, len, key))
            return 1;
    return rc;
}

int aftp_keyprobe_open(aftp_keyprobe *p, const aftp_keyfetch_opts *o)
{
    memset(p, 0, sizeof *p);
    p->udp.fd = -1;
    /* Its own id: an answer can never be taken for a session's. */
    p->conn_id = aftp_io_random_conn_id();
    p->attempts = o->attempts ? o->attempts : AFTP_KEYFETCH_ATTEMPTS;
    p->interval_ns = o->interval_ns ? o->interval_ns : AFTP_KEYFETCH_INTERVAL_NS;
    int rc = aftp_keyfetch_request(p->conn_id, p->req, sizeof p->req, &p->req_len);
    return rc == AFTP_OK ? open_socket(o, &p->udp) : rc;
}

int aftp_keyprobe_step(aftp_keyprobe *p, uint64_t now_ns, uint8_t *key)
{
    int rc = read_answer(&p->udp, p->conn_id, key);
    if (rc != AFTP_OK || now_ns < p->next_send_ns)
        return rc;
    if (p->sent == p->attempts)
        return AFTP_ERR_IDLE_TIMEOUT;
    /* an unanswered request is sent again: it or its answer was lost */
    aftp_datagram dg = {.head = p->req, .head_len = p->req_len};
    rc = aftp_udp_send(&p->udp, &dg, 1);
    p->sent++;
    p->next_send_ns = now_ns + p->interval_ns;
    return rc;
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
            aftp_udp_wait(&p.udp, p.next_send_ns - now);
    }
    aftp_keyprobe_close(&p);
    return rc;
}
