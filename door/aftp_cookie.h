/*
 * The server's stateless address-validation cookie (spec section 14.3,
 * RETRY), made and checked by the front door (aftp_door.h).
 *
 * A server under load answers a HELLO without a valid cookie with a RETRY
 * carrying a token; the client repeats its HELLO with the token in a
 * COOKIE TLV. The token proves the client receives datagrams at the
 * address it claims, without the server keeping any state per client:
 *
 *   token = time (4 bytes, big-endian, coarse seconds of the server's clock)
 *        || MAC  (16 bytes: keyed BLAKE2b over address, port, client conn id, time)
 *
 * The MAC key is a per-process random secret, so tokens die with the
 * process. A token is valid for AFTP_COOKIE_MAX_AGE_S seconds.
 *
 * Sans-I/O: the caller supplies the secret, the address bytes and the
 * clock (any clock of whole seconds, the same for make and verify).
 */
#ifndef AFTP_COOKIE_H
#define AFTP_COOKIE_H

#include <stddef.h>
#include <stdint.h>

#define AFTP_COOKIE_SECRET_LEN 32u
#define AFTP_COOKIE_MAC_LEN 16u
#define AFTP_COOKIE_LEN (4u + AFTP_COOKIE_MAC_LEN)
#define AFTP_COOKIE_MAX_AGE_S 10u
#define AFTP_COOKIE_MAX_ADDR 16u /* an IPv6 address */

/* Who a token is for: the client's address bytes (4 for IPv4, 16 for
 * IPv6), its UDP port and the connection id of its HELLO. */
typedef struct aftp_cookie_peer {
    const uint8_t *addr;
    size_t addr_len; /* 1..AFTP_COOKIE_MAX_ADDR */
    uint16_t port;
    uint32_t conn_id;
} aftp_cookie_peer;

/* Writes AFTP_COOKIE_LEN bytes of token for peer at time now_s. Returns
 * AFTP_OK, or AFTP_ERR_INVALID_ARGUMENT for a bad address length. */
int aftp_cookie_make(const uint8_t *secret, const aftp_cookie_peer *peer, uint32_t now_s,
                     uint8_t *token);

/* AFTP_OK when token (len bytes) was made with this secret for this peer
 * no more than AFTP_COOKIE_MAX_AGE_S seconds before now_s (and not after
 * it); AFTP_ERR_AUTH otherwise. The MAC is compared in constant time. */
int aftp_cookie_verify(const uint8_t *secret, const aftp_cookie_peer *peer, uint32_t now_s,
                       const uint8_t *token, size_t len);

#endif /* AFTP_COOKIE_H */
