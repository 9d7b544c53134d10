/*
 * The client side of the key request (spec section 14.9), sans-I/O: the
 * request (a HELLO carrying KEY_REQUEST), which datagram answers it, and
 * when to send it again. The caller owns the socket and the clock
 * (io/run/aftp_keyfetch.h drives it). The answer is not authenticated:
 * the caller shows its fingerprint to a user, who decides whether to
 * trust it, or only compares it with the key it pins.
 */
#ifndef AFTP_KEYREQ_H
#define AFTP_KEYREQ_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

/* The request of conn_id: a HELLO padded to AFTP_WIRE_HELLO_MIN_LEN bytes
 * (so a server may answer it), with KEY_REQUEST, no HANDSHAKE, and the
 * fields of an ordinary offer (max_datagram: the client's), into
 * buf[0..cap); *len its length. */
int aftp_keyreq_encode(uint32_t conn_id, uint16_t max_datagram, uint8_t *buf, size_t cap,
                       size_t *len);

/* 1 and key (AFTP_WIRE_SERVER_KEY_LEN bytes) when pkt is a SERVER_KEY for
 * conn_id; 0 (key untouched) for anything else. */
int aftp_keyreq_answer(uint32_t conn_id, const uint8_t *pkt, size_t len, uint8_t *key);

/* One request, sent up to `attempts` times interval_ns apart. */
typedef struct aftp_keyreq {
    uint32_t conn_id;
    uint8_t req[AFTP_WIRE_HELLO_MIN_LEN];
    size_t req_len;
    unsigned attempts, sent;
    uint64_t interval_ns;
    uint64_t next_send_ns; /* when the next (re)send is due */
} aftp_keyreq;

/* Builds the request (nothing is due before the first aftp_keyreq_due). */
int aftp_keyreq_init(aftp_keyreq *k, uint32_t conn_id, uint16_t max_datagram, unsigned attempts,
                     uint64_t interval_ns);
/* At now_ns: 1 when k->req is to be sent now (counted as sent); 0 while
 * the next send is not due (at k->next_send_ns); AFTP_ERR_IDLE_TIMEOUT once
 * the last of the attempts went unanswered for interval_ns. */
int aftp_keyreq_due(aftp_keyreq *k, uint64_t now_ns);

#endif /* AFTP_KEYREQ_H */
