/*
 * Shared by the crypto tests and the handshake fuzz harness: injected
 * randomness, an in-memory admission policy for the responder, and
 * datagram helpers.
 */
#ifndef AFTP_CRYPTO_FIXTURES_H
#define AFTP_CRYPTO_FIXTURES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "aftp/aftp_error.h"
#include "common/aftp_handshake.h"
#include "proto/aftp_wire.h"

/* Randomness from a script: the bytes of `script` in order, then `fill`
 * forever. Makes a handshake run byte-for-byte repeatable. */
typedef struct fixed_random {
    const uint8_t *script;
    size_t len;
    size_t used;
    uint8_t fill;
} fixed_random;

static inline void fixed_random_fn(void *user, uint8_t *buf, size_t len)
{
    fixed_random *r = user;
    for (size_t i = 0; i < len; i++)
        buf[i] = r->used < r->len ? r->script[r->used++] : r->fill++;
}

/* The responder's policy: admitted client keys, each with its psk and the
 * latest timestamp seen (as a server keeps them). */
enum { POLICY_MAX = 4 };

typedef struct policy_entry {
    uint8_t key[AFTP_HS_KEY_LEN];
    uint8_t psk[AFTP_HS_KEY_LEN];
    uint8_t last_ts[AFTP_HS_TIMESTAMP_LEN]; /* zero: none seen */
} policy_entry;

typedef struct policy {
    policy_entry entries[POLICY_MAX];
    size_t count;
} policy;

static inline policy_entry *policy_find(policy *p, const uint8_t *key)
{
    for (size_t i = 0; i < p->count; i++)
        if (memcmp(p->entries[i].key, key, AFTP_HS_KEY_LEN) == 0)
            return &p->entries[i];
    return NULL;
}

/* Admits key with psk (NULL: none). */
static inline void policy_admit(policy *p, const uint8_t *key, const uint8_t *psk)
{
    policy_entry *e = &p->entries[p->count++];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, AFTP_HS_KEY_LEN);
    if (psk != NULL)
        memcpy(e->psk, psk, AFTP_HS_KEY_LEN);
}

static inline int policy_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    policy_entry *e = policy_find(user, client_key);
    if (e == NULL)
        return AFTP_ERR_UNKNOWN_PEER;
    memcpy(psk, e->psk, AFTP_HS_KEY_LEN);
    return AFTP_OK;
}

static inline int policy_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    policy_entry *e = policy_find(user, client_key);
    if (e == NULL || !aftp_hs_timestamp_after(ts, e->last_ts))
        return AFTP_ERR_REPLAY;
    memcpy(e->last_ts, ts, AFTP_HS_TIMESTAMP_LEN);
    return AFTP_OK;
}

static inline aftp_hs_peers policy_peers(policy *p)
{
    return (aftp_hs_peers){policy_lookup, policy_check_timestamp, p};
}

/* A version-1 header of `type` with flags 0 into out[16]. */
static inline void fixture_header(uint8_t type, uint32_t conn_id, uint64_t pn, uint8_t *out)
{
    aftp_wire_header h = {AFTP_WIRE_VERSION, type, 0, conn_id, pn};
    aftp_wire_header_encode(&h, out, AFTP_WIRE_HEADER_LEN);
}

#endif /* AFTP_CRYPTO_FIXTURES_H */
