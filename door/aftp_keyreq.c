/* The client side of the key request (aftp_keyreq.h). */
#include "door/aftp_keyreq.h"

#include <string.h>

#include "aftp/aftp_error.h"

int aftp_keyreq_encode(uint32_t conn_id, uint16_t max_datagram, uint8_t *buf, size_t cap,
                       size_t *len)
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
    p.u.hello.max_datagram = max_datagram;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    return aftp_wire_encode(&p, buf, cap, len);
}

int aftp_keyreq_answer(uint32_t conn_id, const uint8_t *pkt, size_t len, uint8_t *key)
{
    aftp_wire_packet p;
    if (aftp_wire_decode(pkt, len, &p) != AFTP_OK || p.hdr.type != AFTP_WIRE_SERVER_KEY ||
        p.hdr.conn_id != conn_id)
        return 0;
    memcpy(key, p.u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
    return 1;
}

int aftp_keyreq_init(aftp_keyreq *k, uint32_t conn_id, uint16_t max_datagram, unsigned attempts,
                     uint64_t interval_ns)
{
    memset(k, 0, sizeof *k);
    k->conn_id = conn_id;
    k->attempts = attempts;
    k->interval_ns = interval_ns;
    return aftp_keyreq_encode(conn_id, max_datagram, k->req, sizeof k->req, &k->req_len);
}

int aftp_keyreq_due(aftp_keyreq *k, uint64_t now_ns)
{
    if (k->sent > 0 && now_ns < k->next_send_ns)
        return 0;
    if (k->sent == k->attempts)
        return AFTP_ERR_IDLE_TIMEOUT;
    /* an unanswered request is sent again: it or its answer was lost */
    k->sent++;
    k->next_send_ns = now_ns + k->interval_ns;
    return 1;
}
