/*
 * The authenticated key exchange: Noise_IKpsk1_25519_ChaChaPoly_BLAKE2b
 * (noiseprotocol.org, revision 34), built from libsodium primitives, and
 * the traffic key schedule that follows it.
 *
 *   <- s                          the client knows (pins) the server's key
 *   ...
 *   -> e, es, s, ss, psk          message 1 (initiator = client)
 *   <- e, ee, se                  message 2 (responder = server)
 *
 * Why this pattern:
 *  - IK is one round trip and authenticates both sides; the client's
 *    static key travels encrypted to the server's static key, so observers
 *    never learn who connects; ephemeral-ephemeral DH gives forward secrecy.
 *  - psk1 mixes an optional pre-shared key into message 1 (32 zero bytes
 *    when none is configured, as WireGuard does), so a server can admit
 *    clients by a shared secret instead of, or on top of, their public key,
 *    and checks it before it answers. The psk comes after the `s` token, so
 *    the server may pick it per client.
 *  - ChaChaPoly for the two handshake messages: it runs everywhere
 *    (libsodium's AES-256-GCM needs AES-NI), the handshake must work before
 *    any cipher is negotiated, and two short messages make speed
 *    irrelevant. The data cipher is negotiated separately (aftp_aead).
 *  - BLAKE2b for hashing and HKDF (HMAC-BLAKE2b, as Noise defines it):
 *    libsodium's crypto_generichash, fast and 64 bytes of transcript hash.
 *
 * Message 1's payload starts with a 12-byte TAI64N timestamp: the server
 * remembers the recent ones per client key and rejects a repeat or one
 * older than its window (spec section 14.2.4), so a recorded message 1
 * cannot be replayed to make the server redo the handshake.
 *
 * After the handshake each direction has a 32-byte traffic secret. Its
 * AEAD key and IV derive from it (aftp_hs_traffic_keys); a key update
 * replaces it by aftp_hs_next_secret(secret) and flips KEY_PHASE. Keys are
 * updated before AFTP_HS_KEY_MAX_PACKETS packets (RFC 9001 section 6.6,
 * the AES-GCM confidentiality limit, applied to both ciphers for one rule).
 *
 * Sans-I/O: no clock (the initiator is given the wall-clock time), no
 * sockets; randomness comes through a callback, so a run is deterministic
 * given its random bytes (test vectors). The only allocation is the state
 * itself, in sodium_malloc'd memory, wiped by aftp_handshake_del.
 */
#ifndef AFTP_HANDSHAKE_H
#define AFTP_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "common/aftp_aead.h"

#define AFTP_HS_PROTOCOL_NAME "Noise_IKpsk1_25519_ChaChaPoly_BLAKE2b"
#define AFTP_HS_KEY_LEN 32u         /* X25519 keys, psk, traffic secrets */
#define AFTP_HS_HASH_LEN 64u        /* BLAKE2b: transcript hash */
#define AFTP_HS_TIMESTAMP_LEN 12u   /* TAI64N */
#define AFTP_HS_MAX_PAYLOAD 256u    /* application bytes per message */
/* e, encrypted s, timestamp, tag */
#define AFTP_HS_INIT_OVERHEAD (2u * AFTP_HS_KEY_LEN + 2u * AFTP_AEAD_TAG_LEN + AFTP_HS_TIMESTAMP_LEN)
/* e, tag */
#define AFTP_HS_RESPONSE_OVERHEAD (AFTP_HS_KEY_LEN + AFTP_AEAD_TAG_LEN)
#define AFTP_HS_MAX_INIT (AFTP_HS_INIT_OVERHEAD + AFTP_HS_MAX_PAYLOAD)
#define AFTP_HS_MAX_RESPONSE (AFTP_HS_RESPONSE_OVERHEAD + AFTP_HS_MAX_PAYLOAD)

/* Packets one traffic key may seal (RFC 9001 section 6.6); an endpoint
 * starts a key update at AFTP_HS_KEY_UPDATE_PACKETS so the update is done
 * well before the hard limit. */
#define AFTP_HS_KEY_MAX_PACKETS (UINT64_C(1) << 23)
#define AFTP_HS_KEY_UPDATE_PACKETS (UINT64_C(1) << 22)

enum aftp_hs_role { AFTP_HS_INITIATOR = 1, AFTP_HS_RESPONDER = 2 };
enum aftp_hs_direction { AFTP_HS_SEND = 0, AFTP_HS_RECV = 1 };

/* Fills buf with len random bytes. NULL in the config: randombytes_buf. */
typedef void (*aftp_hs_random_fn)(void *user, uint8_t *buf, size_t len);

/* The responder's admission policy (server side). */
typedef struct aftp_hs_peers {
    /* Is this client key admitted? AFTP_OK and psk filled (32 zero bytes
     * when no pre-shared key applies), or AFTP_ERR_UNKNOWN_PEER. */
    int (*lookup)(void *user, const uint8_t *client_key, uint8_t *psk);
    /* Message 1 authenticated: AFTP_OK and remember ts for this client
     * when the replay rule of spec section 14.2.4 accepts it,
     * AFTP_ERR_REPLAY otherwise. */
    int (*check_timestamp)(void *user, const uint8_t *client_key, const uint8_t *ts);
    void *user;
} aftp_hs_peers;

typedef struct aftp_hs_config {
    int role;                      /* enum aftp_hs_role */
    const uint8_t *static_secret;  /* own X25519 private key, 32 bytes (copied) */
    const uint8_t *server_key;     /* initiator: the pinned server public key */
    const uint8_t *psk;            /* initiator: 32 bytes, or NULL for none */
    const aftp_hs_peers *peers;    /* responder: admission policy (copied) */
    /* Bytes both sides must agree on, bound into the transcript (the
     * HELLO's version, role, cipher list and limits): a change by an
     * attacker makes the handshake fail. Copied into the hash at once. */
    const uint8_t *prologue;
    size_t prologue_len;
    aftp_hs_random_fn random;
    void *random_user;
} aftp_hs_config;

typedef struct aftp_handshake aftp_handshake;

/* The public key of an X25519 private key. */
int aftp_hs_public_key(const uint8_t *secret, uint8_t *public_key);
/* A fresh static key pair from the system's random source. */
int aftp_hs_keypair(uint8_t *secret, uint8_t *public_key);

/* TAI64N of a Unix time in ns, at full precision. Unlike WireGuard we do
 * not round the nanoseconds: the value travels encrypted to the server
 * only, and sessions one client key starts close together (a script
 * sending file after file, an application opening sessions in parallel)
 * must carry different timestamps or the later one looks like a replay
 * (spec section 14.2.4). */
void aftp_hs_timestamp(uint64_t unix_ns, uint8_t *ts);
/* The Unix time in ns of a TAI64N timestamp (0 for times before 1970,
 * UINT64_MAX for times beyond what 64-bit ns can hold). */
uint64_t aftp_hs_timestamp_ns(const uint8_t *ts);
/* Non-zero when ts is strictly later than last. */
int aftp_hs_timestamp_after(const uint8_t *ts, const uint8_t *last);

int aftp_handshake_new(aftp_handshake **out, const aftp_hs_config *cfg);
void aftp_handshake_del(aftp_handshake *hs); /* wipes; NULL-safe */

/* Initiator: writes message 1 (AFTP_HS_INIT_OVERHEAD + payload_len bytes)
 * carrying the timestamp of unix_ns and payload_len <= AFTP_HS_MAX_PAYLOAD
 * application bytes. */
int aftp_handshake_write_init(aftp_handshake *hs, uint64_t unix_ns, const uint8_t *payload,
                              size_t payload_len, uint8_t *out, size_t cap, size_t *out_len);
/* Responder: reads message 1, admitting the client through the peers
 * policy; its application payload goes to payload (cap bytes). Errors:
 * AFTP_ERR_MALFORMED (length), AFTP_ERR_AUTH (does not decrypt: wrong
 * server key, corrupted), AFTP_ERR_UNKNOWN_PEER, AFTP_ERR_REPLAY. */
int aftp_handshake_read_init(aftp_handshake *hs, const uint8_t *msg, size_t len, uint8_t *payload,
                             size_t cap, size_t *payload_len);
/* Responder, after read_init: writes message 2; the handshake is done. */
int aftp_handshake_write_response(aftp_handshake *hs, const uint8_t *payload, size_t payload_len,
                                  uint8_t *out, size_t cap, size_t *out_len);
/* Initiator: reads message 2; the handshake is done. AFTP_ERR_AUTH when it
 * does not decrypt. */
int aftp_handshake_read_response(aftp_handshake *hs, const uint8_t *msg, size_t len,
                                 uint8_t *payload, size_t cap, size_t *payload_len);

/* Any failure leaves the handshake unusable (AFTP_ERR_INVALID_STATE from
 * then on): discard it. Non-zero once both messages went through. */
int aftp_handshake_done(const aftp_handshake *hs);

/* The peer's static public key: the server's (initiator) or the client's
 * (responder, known after read_init). */
int aftp_handshake_peer_key(const aftp_handshake *hs, uint8_t *key);
/* The final transcript hash (channel binding), once done. */
int aftp_handshake_hash(const aftp_handshake *hs, uint8_t *hash);

/* ---- traffic keys, once done ---- */

/* The current traffic secret of one direction and its generation (0 after
 * the handshake, +1 per update; KEY_PHASE is generation & 1). */
int aftp_handshake_secret(const aftp_handshake *hs, int dir, uint8_t *secret,
                          uint64_t *generation);
/* An AEAD context for the current generation of `dir` (the caller frees it
 * with aftp_aead_del). */
int aftp_handshake_aead(const aftp_handshake *hs, int dir, uint8_t cipher, aftp_aead **out);
/* Key update of one direction: its secret becomes the next generation's.
 * The sender updates SEND when it rotates; the receiver updates RECV to
 * prepare the key for the flipped KEY_PHASE. */
int aftp_handshake_update(aftp_handshake *hs, int dir);

/* The schedule, as pure functions (test vectors): AEAD key and IV of a
 * traffic secret for `cipher`, and the next generation's secret. */
void aftp_hs_traffic_keys(const uint8_t *secret, uint8_t cipher, uint8_t *key, uint8_t *iv);
void aftp_hs_next_secret(const uint8_t *secret, uint8_t *next);

#endif /* AFTP_HANDSHAKE_H */
