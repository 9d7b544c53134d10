/* Noise_IKpsk1_25519_ChaChaPoly_BLAKE2b and the key schedule
 * (aftp_handshake.h). Section numbers below are the Noise specification's. */
#include "common/aftp_handshake.h"

#include <sodium.h>
#include <string.h>

enum hs_state { HS_START, HS_WAIT_RESPONSE, HS_REPLY_DUE, HS_DONE, HS_FAILED };

enum {
    KEY = AFTP_HS_KEY_LEN,
    HASH = AFTP_HS_HASH_LEN,
    TAG = AFTP_AEAD_TAG_LEN,
    STAMP = AFTP_HS_TIMESTAMP_LEN,
    BLAKE2B_BLOCK = 128,
    NOISE_NONCE = 12
};

struct aftp_handshake {
    int role;
    int state;
    /* SymmetricState (5.2) and its CipherState (5.1) */
    uint8_t h[HASH];
    uint8_t ck[HASH];
    uint8_t k[KEY];
    uint64_t n;
    /* HandshakeState (5.3) */
    uint8_t s[KEY], s_pub[KEY];
    uint8_t e[KEY], e_pub[KEY];
    uint8_t rs[KEY], re[KEY];
    uint8_t psk[KEY];
    /* after Split: per-direction traffic secrets */
    uint8_t secret[2][KEY];
    uint64_t generation[2];
    aftp_hs_peers peers;
    aftp_hs_random_fn random;
    void *random_user;
};

/* ---- hash and key derivation (4.3, 5.2) ---- */

/* HMAC-BLAKE2b over a || b (RFC 2104 with a 128-byte block). */
static void hmac(uint8_t *out, const uint8_t *key, const uint8_t *a, size_t a_len,
                 const uint8_t *b, size_t b_len)
{
    uint8_t pad[BLAKE2B_BLOCK], inner[HASH];
    crypto_generichash_state st;
    memset(pad, 0x36, sizeof pad);
    for (size_t i = 0; i < HASH; i++)
        pad[i] ^= key[i];
    crypto_generichash_init(&st, NULL, 0, HASH);
    crypto_generichash_update(&st, pad, sizeof pad);
    crypto_generichash_update(&st, a, a_len);
    crypto_generichash_update(&st, b, b_len);
    crypto_generichash_final(&st, inner, HASH);
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] ^= 0x36 ^ 0x5c;
    crypto_generichash_init(&st, NULL, 0, HASH);
    crypto_generichash_update(&st, pad, sizeof pad);
    crypto_generichash_update(&st, inner, sizeof inner);
    crypto_generichash_final(&st, out, HASH);
    sodium_memzero(pad, sizeof pad);
    sodium_memzero(inner, sizeof inner);
    sodium_memzero(&st, sizeof st);
}

/* HKDF(ck, ikm) with two or three outputs (out3 may be NULL). */
static void hkdf(const uint8_t *ck, const uint8_t *ikm, size_t ikm_len, uint8_t *out1,
                 uint8_t *out2, uint8_t *out3)
{
    static const uint8_t one = 1, two = 2, three = 3;
    uint8_t temp[HASH];
    hmac(temp, ck, ikm, ikm_len, NULL, 0);
    hmac(out1, temp, &one, 1, NULL, 0);
    hmac(out2, temp, out1, HASH, &two, 1);
    if (out3 != NULL)
        hmac(out3, temp, out2, HASH, &three, 1);
    sodium_memzero(temp, sizeof temp);
}

static void mix_hash(aftp_handshake *hs, const uint8_t *data, size_t len)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, HASH);
    crypto_generichash_update(&st, hs->h, HASH);
    crypto_generichash_update(&st, data, len);
    crypto_generichash_final(&st, hs->h, HASH);
}

static void set_cipher_key(aftp_handshake *hs, const uint8_t *temp_k)
{
    memcpy(hs->k, temp_k, KEY); /* HASHLEN 64: truncated to 32 bytes */
    hs->n = 0;
}

static void mix_key(aftp_handshake *hs, const uint8_t *ikm, size_t len)
{
    uint8_t ck[HASH], temp_k[HASH];
    hkdf(hs->ck, ikm, len, ck, temp_k, NULL);
    memcpy(hs->ck, ck, HASH);
    set_cipher_key(hs, temp_k);
    sodium_memzero(ck, sizeof ck);
    sodium_memzero(temp_k, sizeof temp_k);
}

static void mix_key_and_hash(aftp_handshake *hs, const uint8_t *ikm, size_t len)
{
    uint8_t ck[HASH], temp_h[HASH], temp_k[HASH];
    hkdf(hs->ck, ikm, len, ck, temp_h, temp_k);
    memcpy(hs->ck, ck, HASH);
    mix_hash(hs, temp_h, HASH);
    set_cipher_key(hs, temp_k);
    sodium_memzero(ck, sizeof ck);
    sodium_memzero(temp_k, sizeof temp_k);
}

/* ChaChaPoly nonce (12.3): 32 zero bits, then n little-endian. */
static void noise_nonce(uint64_t n, uint8_t *nonce)
{
    memset(nonce, 0, NOISE_NONCE);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] = (uint8_t)(n >> (8 * i));
}

/* out receives len + TAG bytes. Every call here has a key: in this pattern
 * the first encryption follows es. */
static void encrypt_and_hash(aftp_handshake *hs, uint8_t *out, const uint8_t *in, size_t len)
{
    uint8_t nonce[NOISE_NONCE];
    noise_nonce(hs->n++, nonce);
    crypto_aead_chacha20poly1305_ietf_encrypt(out, NULL, in, len, hs->h, HASH, NULL, nonce, hs->k);
    mix_hash(hs, out, len + TAG);
}

/* in holds len bytes (ciphertext and tag); out (not in) receives len - TAG. */
static int decrypt_and_hash(aftp_handshake *hs, uint8_t *out, const uint8_t *in, size_t len)
{
    uint8_t nonce[NOISE_NONCE];
    noise_nonce(hs->n++, nonce);
    if (crypto_aead_chacha20poly1305_ietf_decrypt(out, NULL, NULL, in, len, hs->h, HASH, nonce,
                                                  hs->k) != 0)
        return AFTP_ERR_AUTH;
    mix_hash(hs, in, len);
    return AFTP_OK;
}

/* DH and MixKey of the result. A low-order peer key gives an all-zero
 * secret, which libsodium refuses: the handshake fails. */
static int mix_dh(aftp_handshake *hs, const uint8_t *priv, const uint8_t *pub)
{
    uint8_t shared[KEY];
    if (crypto_scalarmult_curve25519(shared, priv, pub) != 0)
        return AFTP_ERR_AUTH;
    mix_key(hs, shared, sizeof shared);
    sodium_memzero(shared, sizeof shared);
    return AFTP_OK;
}

/* Token "e" with the psk rule (9.2): MixHash, then MixKey of the key. */
static void mix_ephemeral(aftp_handshake *hs, const uint8_t *pub)
{
    mix_hash(hs, pub, KEY);
    mix_key(hs, pub, KEY);
}

static int write_ephemeral(aftp_handshake *hs, uint8_t *out)
{
    hs->random(hs->random_user, hs->e, KEY);
    if (crypto_scalarmult_curve25519_base(hs->e_pub, hs->e) != 0)
        return AFTP_ERR_INTERNAL;
    memcpy(out, hs->e_pub, KEY);
    mix_ephemeral(hs, hs->e_pub);
    return AFTP_OK;
}

static void read_ephemeral(aftp_handshake *hs, const uint8_t *in)
{
    memcpy(hs->re, in, KEY);
    mix_ephemeral(hs, hs->re);
}

/* Split (5.2): the initiator sends with the first key. Handshake-only
 * secrets are wiped; h stays for channel binding. */
static void split(aftp_handshake *hs)
{
    uint8_t k1[HASH], k2[HASH];
    hkdf(hs->ck, NULL, 0, k1, k2, NULL);
    int initiator = hs->role == AFTP_HS_INITIATOR;
    memcpy(hs->secret[initiator ? AFTP_HS_SEND : AFTP_HS_RECV], k1, KEY);
    memcpy(hs->secret[initiator ? AFTP_HS_RECV : AFTP_HS_SEND], k2, KEY);
    sodium_memzero(k1, sizeof k1);
    sodium_memzero(k2, sizeof k2);
    sodium_memzero(hs->ck, sizeof hs->ck);
    sodium_memzero(hs->k, sizeof hs->k);
    sodium_memzero(hs->e, sizeof hs->e);
    sodium_memzero(hs->psk, sizeof hs->psk);
    hs->state = HS_DONE;
}

/* ---- keys and timestamps ---- */

int aftp_hs_public_key(const uint8_t *secret, uint8_t *public_key)
{
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    return crypto_scalarmult_curve25519_base(public_key, secret) == 0 ? AFTP_OK : AFTP_ERR_BAD_KEY;
}

int aftp_hs_keypair(uint8_t *secret, uint8_t *public_key)
{
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    randombytes_buf(secret, KEY);
    return aftp_hs_public_key(secret, public_key);
}

void aftp_hs_timestamp(uint64_t unix_ns, uint8_t *ts)
{
    uint64_t label = (UINT64_C(1) << 62) + unix_ns / 1000000000u;
    uint32_t nanos = (uint32_t)(unix_ns % 1000000000u);
    for (int i = 0; i < 8; i++)
        ts[i] = (uint8_t)(label >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        ts[8 + i] = (uint8_t)(nanos >> (24 - 8 * i));
}

uint64_t aftp_hs_timestamp_ns(const uint8_t *ts)
{
    uint64_t label = 0;
    uint32_t nanos = 0;
    for (int i = 0; i < 8; i++)
        label = label << 8 | ts[i];
    for (int i = 8; i < 12; i++)
        nanos = nanos << 8 | ts[i];
    const uint64_t epoch = UINT64_C(1) << 62;
    if (label < epoch)
        return 0;
    uint64_t seconds = label - epoch;
    if (seconds > (UINT64_MAX - nanos) / 1000000000u)
        return UINT64_MAX;
    return seconds * 1000000000u + nanos;
}

int aftp_hs_timestamp_after(const uint8_t *ts, const uint8_t *last)
{
    return memcmp(ts, last, STAMP) > 0; /* big-endian fields compare as bytes */
}

/* ---- the handshake object ---- */

static void system_random(void *user, uint8_t *buf, size_t len)
{
    (void)user;
    randombytes_buf(buf, len);
}

static int config_valid(const aftp_hs_config *cfg)
{
    if (cfg->static_secret == NULL || (cfg->prologue == NULL && cfg->prologue_len > 0))
        return 0;
    if (cfg->role == AFTP_HS_INITIATOR)
        return cfg->server_key != NULL;
    return cfg->role == AFTP_HS_RESPONDER && cfg->peers != NULL && cfg->peers->lookup != NULL &&
           cfg->peers->check_timestamp != NULL;
}

/* InitializeSymmetric (5.2), the prologue, and IK's pre-message "<- s". */
static void initialize(aftp_handshake *hs, const aftp_hs_config *cfg)
{
    const char *name = AFTP_HS_PROTOCOL_NAME; /* shorter than HASHLEN: zero-padded */
    memcpy(hs->h, name, strlen(name));
    memcpy(hs->ck, hs->h, HASH);
    mix_hash(hs, cfg->prologue, cfg->prologue_len);
    mix_hash(hs, hs->role == AFTP_HS_INITIATOR ? hs->rs : hs->s_pub, KEY);
}

int aftp_handshake_new(aftp_handshake **out, const aftp_hs_config *cfg)
{
    *out = NULL;
    if (!config_valid(cfg))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    aftp_handshake *hs = sodium_malloc(sizeof *hs);
    if (hs == NULL)
        return AFTP_ERR_NO_MEMORY;
    sodium_memzero(hs, sizeof *hs);
    hs->role = cfg->role;
    hs->state = HS_START;
    hs->random = cfg->random != NULL ? cfg->random : system_random;
    hs->random_user = cfg->random_user;
    memcpy(hs->s, cfg->static_secret, KEY);
    int rc = aftp_hs_public_key(hs->s, hs->s_pub);
    if (hs->role == AFTP_HS_INITIATOR) {
        memcpy(hs->rs, cfg->server_key, KEY);
        if (cfg->psk != NULL)
            memcpy(hs->psk, cfg->psk, KEY);
    } else {
        hs->peers = *cfg->peers;
    }
    if (rc != AFTP_OK) {
        aftp_handshake_del(hs);
        return rc;
    }
    initialize(hs, cfg);
    *out = hs;
    return AFTP_OK;
}

void aftp_handshake_del(aftp_handshake *hs)
{
    sodium_free(hs); /* NULL-safe, wipes */
}

/* A failed step leaves the Noise state half-mixed: nothing may continue. */
static int settle(aftp_handshake *hs, int rc)
{
    if (rc != AFTP_OK)
        hs->state = HS_FAILED;
    return rc;
}

/* Before writing a message: this side's turn, payload and buffer sizes. */
static int can_write(const aftp_handshake *hs, int role, int state, size_t payload_len,
                     size_t overhead, size_t cap)
{
    if (hs->role != role || hs->state != state)
        return AFTP_ERR_INVALID_STATE;
    if (payload_len > AFTP_HS_MAX_PAYLOAD)
        return AFTP_ERR_LIMIT;
    return cap < overhead + payload_len ? AFTP_ERR_BUFFER_TOO_SMALL : AFTP_OK;
}

/* Before reading a message: this side's turn, a length the message can
 * have (else the handshake fails: it came from the network), room for its
 * payload. */
static int can_read(aftp_handshake *hs, int role, int state, size_t len, size_t overhead,
                    size_t cap)
{
    if (hs->role != role || hs->state != state)
        return AFTP_ERR_INVALID_STATE;
    if (len < overhead || len > overhead + AFTP_HS_MAX_PAYLOAD)
        return settle(hs, AFTP_ERR_MALFORMED);
    return cap < len - overhead ? AFTP_ERR_BUFFER_TOO_SMALL : AFTP_OK;
}

/* ---- message 1: -> e, es, s, ss, psk, payload ---- */

static int init_tokens(aftp_handshake *hs, uint64_t unix_ns, const uint8_t *payload,
                       size_t payload_len, uint8_t *out)
{
    int rc = write_ephemeral(hs, out);
    if (rc == AFTP_OK)
        rc = mix_dh(hs, hs->e, hs->rs);
    if (rc != AFTP_OK)
        return rc;
    encrypt_and_hash(hs, out + KEY, hs->s_pub, KEY);
    rc = mix_dh(hs, hs->s, hs->rs);
    if (rc != AFTP_OK)
        return rc;
    mix_key_and_hash(hs, hs->psk, KEY);
    uint8_t plain[STAMP + AFTP_HS_MAX_PAYLOAD];
    aftp_hs_timestamp(unix_ns, plain);
    if (payload_len > 0)
        memcpy(plain + STAMP, payload, payload_len);
    encrypt_and_hash(hs, out + 2 * KEY + TAG, plain, STAMP + payload_len);
    sodium_memzero(plain, sizeof plain);
    return AFTP_OK;
}

int aftp_handshake_write_init(aftp_handshake *hs, uint64_t unix_ns, const uint8_t *payload,
                              size_t payload_len, uint8_t *out, size_t cap, size_t *out_len)
{
    int rc = can_write(hs, AFTP_HS_INITIATOR, HS_START, payload_len, AFTP_HS_INIT_OVERHEAD, cap);
    if (rc != AFTP_OK)
        return rc;
    rc = settle(hs, init_tokens(hs, unix_ns, payload, payload_len, out));
    if (rc == AFTP_OK) {
        hs->state = HS_WAIT_RESPONSE;
        *out_len = AFTP_HS_INIT_OVERHEAD + payload_len;
    }
    return rc;
}

/* The client's key decrypted (token s) and proved by ss: ask the policy
 * whether it is admitted, and with which psk. */
static int read_init_identity(aftp_handshake *hs, const uint8_t *msg)
{
    read_ephemeral(hs, msg);
    int rc = mix_dh(hs, hs->s, hs->re);
    if (rc == AFTP_OK)
        rc = decrypt_and_hash(hs, hs->rs, msg + KEY, KEY + TAG);
    if (rc == AFTP_OK)
        rc = mix_dh(hs, hs->s, hs->rs);
    if (rc == AFTP_OK)
        rc = hs->peers.lookup(hs->peers.user, hs->rs, hs->psk);
    return rc;
}

static int read_init_payload(aftp_handshake *hs, const uint8_t *msg, size_t len, uint8_t *payload)
{
    uint8_t plain[STAMP + AFTP_HS_MAX_PAYLOAD];
    size_t body = len - (2 * KEY + TAG);
    mix_key_and_hash(hs, hs->psk, KEY);
    int rc = decrypt_and_hash(hs, plain, msg + 2 * KEY + TAG, body);
    if (rc == AFTP_OK)
        rc = hs->peers.check_timestamp(hs->peers.user, hs->rs, plain);
    if (rc == AFTP_OK && body > TAG + STAMP)
        memcpy(payload, plain + STAMP, body - TAG - STAMP);
    sodium_memzero(plain, sizeof plain);
    return rc;
}

int aftp_handshake_read_init(aftp_handshake *hs, const uint8_t *msg, size_t len, uint8_t *payload,
                             size_t cap, size_t *payload_len)
{
    int rc = can_read(hs, AFTP_HS_RESPONDER, HS_START, len, AFTP_HS_INIT_OVERHEAD, cap);
    if (rc != AFTP_OK)
        return rc;
    rc = read_init_identity(hs, msg);
    if (rc == AFTP_OK)
        rc = read_init_payload(hs, msg, len, payload);
    if (settle(hs, rc) == AFTP_OK) {
        hs->state = HS_REPLY_DUE;
        *payload_len = len - AFTP_HS_INIT_OVERHEAD;
    }
    return rc;
}

/* ---- message 2: <- e, ee, se, payload ---- */

int aftp_handshake_write_response(aftp_handshake *hs, const uint8_t *payload, size_t payload_len,
                                  uint8_t *out, size_t cap, size_t *out_len)
{
    int rc = can_write(hs, AFTP_HS_RESPONDER, HS_REPLY_DUE, payload_len,
                       AFTP_HS_RESPONSE_OVERHEAD, cap);
    if (rc != AFTP_OK)
        return rc;
    rc = write_ephemeral(hs, out);
    if (rc == AFTP_OK)
        rc = mix_dh(hs, hs->e, hs->re);
    if (rc == AFTP_OK)
        rc = mix_dh(hs, hs->e, hs->rs);
    if (settle(hs, rc) != AFTP_OK)
        return rc;
    encrypt_and_hash(hs, out + KEY, payload_len > 0 ? payload : out, payload_len);
    split(hs);
    *out_len = AFTP_HS_RESPONSE_OVERHEAD + payload_len;
    return AFTP_OK;
}

int aftp_handshake_read_response(aftp_handshake *hs, const uint8_t *msg, size_t len,
                                 uint8_t *payload, size_t cap, size_t *payload_len)
{
    int rc = can_read(hs, AFTP_HS_INITIATOR, HS_WAIT_RESPONSE, len, AFTP_HS_RESPONSE_OVERHEAD,
                      cap);
    if (rc != AFTP_OK)
        return rc;
    uint8_t plain[AFTP_HS_MAX_PAYLOAD];
    read_ephemeral(hs, msg);
    rc = mix_dh(hs, hs->e, hs->re);
    if (rc == AFTP_OK)
        rc = mix_dh(hs, hs->s, hs->re);
    if (rc == AFTP_OK)
        rc = decrypt_and_hash(hs, plain, msg + KEY, len - KEY);
    if (settle(hs, rc) != AFTP_OK)
        return rc;
    *payload_len = len - AFTP_HS_RESPONSE_OVERHEAD;
    if (*payload_len > 0)
        memcpy(payload, plain, *payload_len);
    sodium_memzero(plain, sizeof plain);
    split(hs);
    return AFTP_OK;
}

/* ---- results ---- */

int aftp_handshake_done(const aftp_handshake *hs)
{
    return hs->state == HS_DONE;
}

int aftp_handshake_peer_key(const aftp_handshake *hs, uint8_t *key)
{
    int known = hs->role == AFTP_HS_INITIATOR || hs->state == HS_REPLY_DUE || hs->state == HS_DONE;
    if (!known)
        return AFTP_ERR_INVALID_STATE;
    memcpy(key, hs->rs, KEY);
    return AFTP_OK;
}

int aftp_handshake_hash(const aftp_handshake *hs, uint8_t *hash)
{
    if (hs->state != HS_DONE)
        return AFTP_ERR_INVALID_STATE;
    memcpy(hash, hs->h, HASH);
    return AFTP_OK;
}

/* ---- key schedule ---- */

/* BLAKE2b-256 keyed with the secret over label || extra, truncated to
 * out_len. Distinct labels keep key, IV and next secret independent; the
 * cipher is part of the label so no key ever serves two ciphers. */
static void derive(const uint8_t *secret, const char *label, const uint8_t *extra,
                   size_t extra_len, uint8_t *out, size_t out_len)
{
    uint8_t full[KEY];
    crypto_generichash_state st;
    crypto_generichash_init(&st, secret, KEY, sizeof full);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    crypto_generichash_update(&st, extra, extra_len);
    crypto_generichash_final(&st, full, sizeof full);
    memcpy(out, full, out_len);
    sodium_memzero(full, sizeof full);
    sodium_memzero(&st, sizeof st);
}

void aftp_hs_traffic_keys(const uint8_t *secret, uint8_t cipher, uint8_t *key, uint8_t *iv)
{
    derive(secret, "aftp v1 key", &cipher, 1, key, AFTP_AEAD_KEY_LEN);
    derive(secret, "aftp v1 iv", &cipher, 1, iv, AFTP_AEAD_IV_LEN);
}

void aftp_hs_next_secret(const uint8_t *secret, uint8_t *next)
{
    derive(secret, "aftp v1 next", NULL, 0, next, KEY);
}

static int direction_ready(const aftp_handshake *hs, int dir)
{
    return hs->state == HS_DONE && (dir == AFTP_HS_SEND || dir == AFTP_HS_RECV);
}

int aftp_handshake_secret(const aftp_handshake *hs, int dir, uint8_t *secret,
                          uint64_t *generation)
{
    if (!direction_ready(hs, dir))
        return AFTP_ERR_INVALID_STATE;
    memcpy(secret, hs->secret[dir], KEY);
    *generation = hs->generation[dir];
    return AFTP_OK;
}

int aftp_handshake_aead(const aftp_handshake *hs, int dir, uint8_t cipher, aftp_aead **out)
{
    *out = NULL;
    if (!direction_ready(hs, dir))
        return AFTP_ERR_INVALID_STATE;
    uint8_t key[AFTP_AEAD_KEY_LEN], iv[AFTP_AEAD_IV_LEN];
    aftp_hs_traffic_keys(hs->secret[dir], cipher, key, iv);
    int rc = aftp_aead_new(out, cipher, key, iv, (unsigned)(hs->generation[dir] & 1u));
    sodium_memzero(key, sizeof key);
    sodium_memzero(iv, sizeof iv);
    return rc;
}

int aftp_handshake_update(aftp_handshake *hs, int dir)
{
    if (!direction_ready(hs, dir))
        return AFTP_ERR_INVALID_STATE;
    aftp_hs_next_secret(hs->secret[dir], hs->secret[dir]);
    hs->generation[dir]++;
    return AFTP_OK;
}
