/* Stateless RETRY cookies (aftp_cookie.h). */
#include "door/aftp_cookie.h"

#include <sodium.h>
#include <string.h>

#include "aftp/aftp_error.h"

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* MAC over (address length, address, port, conn id, time). The length
 * comes first so that no IPv4 input can equal an IPv6 one. */
static int cookie_mac(const uint8_t *secret, const aftp_cookie_peer *peer, uint32_t t,
                      uint8_t *mac)
{
    if (peer->addr_len == 0 || peer->addr_len > AFTP_COOKIE_MAX_ADDR)
        return AFTP_ERR_INVALID_ARGUMENT;
    uint8_t in[1 + AFTP_COOKIE_MAX_ADDR + 2 + 4 + 4];
    size_t n = 0;
    in[n++] = (uint8_t)peer->addr_len;
    memcpy(in + n, peer->addr, peer->addr_len);
    n += peer->addr_len;
    in[n++] = (uint8_t)(peer->port >> 8);
    in[n++] = (uint8_t)peer->port;
    put_be32(in + n, peer->conn_id);
    put_be32(in + n + 4, t);
    n += 8;
    crypto_generichash(mac, AFTP_COOKIE_MAC_LEN, in, n, secret, AFTP_COOKIE_SECRET_LEN);
    return AFTP_OK;
}

int aftp_cookie_make(const uint8_t *secret, const aftp_cookie_peer *peer, uint32_t now_s,
                     uint8_t *token)
{
    put_be32(token, now_s);
    return cookie_mac(secret, peer, now_s, token + 4);
}

int aftp_cookie_verify(const uint8_t *secret, const aftp_cookie_peer *peer, uint32_t now_s,
                       const uint8_t *token, size_t len)
{
    uint8_t mac[AFTP_COOKIE_MAC_LEN];
    if (len != AFTP_COOKIE_LEN)
        return AFTP_ERR_AUTH;
    uint32_t t = get_be32(token);
    if (t > now_s || now_s - t > AFTP_COOKIE_MAX_AGE_S)
        return AFTP_ERR_AUTH;
    if (cookie_mac(secret, peer, t, mac) != AFTP_OK)
        return AFTP_ERR_AUTH;
    return sodium_memcmp(mac, token + 4, AFTP_COOKIE_MAC_LEN) == 0 ? AFTP_OK : AFTP_ERR_AUTH;
}
