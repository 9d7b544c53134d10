/*
 * Packet protection (spec section 5.7): one AEAD context seals or opens the
 * datagrams of one direction under one key generation.
 *
 * A protected datagram is  ad || ciphertext || tag(16), where ad, the
 * associated data, is the 16-byte header (AFTP_AEAD_AD_HEADER) or, for
 * DATA, the header and the file id and block (AFTP_AEAD_AD_DATA). It stays
 * in clear, so type, flags, connection id and packet number (and the
 * block a DATA packet carries) are authenticated yet readable before
 * decryption. The
 * 96-bit nonce is the per-direction IV XOR (0x00000000 || pn, big-endian),
 * with pn read from the header itself, so the nonce can never disagree with
 * the authenticated packet number and a never-reused pn means a never-reused
 * nonce (as QUIC and TLS 1.3 do).
 *
 * Ciphers: NONE (no protection: header flags PROTECTED and KEY_PHASE clear,
 * body copied), AES-256-GCM (only where the CPU accelerates it, see
 * aftp_aead_available) and ChaCha20-Poly1305 (IETF). Values are the wire's
 * AFTP_WIRE_CIPHER_*.
 *
 * Memory: a context lives in sodium_malloc'd memory (guard pages, never
 * swapped where mlock works), read-only once keyed, and is wiped by
 * aftp_aead_del; the cipher's key schedule lives in OpenSSL's context,
 * which OpenSSL allocates in sodium_malloc'd memory too when the embedder
 * asked for it (aftp_global_init with AFTP_INIT_GUARD_KEYS, before the
 * process's first use of OpenSSL: aftp_keymem.h) and aftp_aead_del wipes and
 * frees. Sealing and opening reuse that context's per-packet state: a
 * context serves one thread at a time.
 *
 * Opening into scratch (receiver design rule): an AEAD writes the output
 * before it knows whether the tag verifies (OpenSSL leaves unauthenticated
 * plaintext there, libsodium zeroes it). A receiver must therefore never
 * open a packet into bytes it already holds: it opens into a per-datagram
 * scratch buffer and copies the plaintext to storage only after success,
 * or opens directly into the destination only when its bitmap says that
 * block is still missing (a forged packet then spoils bytes nobody has
 * written yet), and drops DATA for blocks it already holds before
 * decrypting anything. The last two need the block in clear: hence
 * AFTP_AEAD_AD_DATA.
 */
#ifndef AFTP_AEAD_H
#define AFTP_AEAD_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

#define AFTP_AEAD_KEY_LEN 32u
#define AFTP_AEAD_IV_LEN 12u
#define AFTP_AEAD_TAG_LEN AFTP_WIRE_TAG_LEN
/* Associated data: the header, or for DATA the header, file id and block. */
#define AFTP_AEAD_AD_HEADER AFTP_WIRE_HEADER_LEN
#define AFTP_AEAD_AD_DATA (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED)

typedef struct aftp_aead aftp_aead;

/* Non-zero when `cipher` can be used here: NONE and ChaCha20-Poly1305
 * always, AES-256-GCM only with AES-NI and PCLMUL (software AES is slower
 * than ChaCha20 and, table-driven, not constant-time). */
int aftp_aead_available(uint8_t cipher);

/* The cipher this host prefers among the protected ones: AES-256-GCM where
 * accelerated (about twice as fast here), ChaCha20-Poly1305 otherwise. */
uint8_t aftp_aead_preferred(void);

/* A context for `cipher` with a 32-byte key and a 12-byte IV (both copied;
 * ignored for NONE, may be NULL then). key_phase (0 or 1) is the KEY_PHASE
 * bit this generation writes and accepts. AFTP_ERR_INVALID_ARGUMENT for an
 * unknown or unavailable cipher, AFTP_ERR_NO_MEMORY. */
int aftp_aead_new(aftp_aead **out, uint8_t cipher, const uint8_t *key, const uint8_t *iv,
                  unsigned key_phase);
/* Wipes and frees; NULL-safe. */
void aftp_aead_del(aftp_aead *a);

uint8_t aftp_aead_cipher(const aftp_aead *a);
unsigned aftp_aead_key_phase(const aftp_aead *a);
/* Bytes sealing adds to a body: AFTP_AEAD_TAG_LEN, or 0 for NONE. */
size_t aftp_aead_overhead(const aftp_aead *a);

/* Seals one body. `ad` is the datagram's first ad_len bytes (ad_len is
 * AFTP_AEAD_AD_HEADER or AFTP_AEAD_AD_DATA, else AFTP_ERR_INVALID_ARGUMENT),
 * starting with the header: the header's flags are rewritten first (PROTECTED and
 * this generation's KEY_PHASE; both clear for NONE), then all ad_len bytes
 * are the associated data. body_len bytes at `body` are encrypted into
 * `out`, followed by the tag: out holds body_len + overhead. out == body
 * seals in place (the sender encrypts straight from its source mapping
 * into the outgoing buffer with out != body); any other overlap is not
 * allowed. */
int aftp_aead_seal(const aftp_aead *a, uint8_t *ad, size_t ad_len, const uint8_t *body,
                   size_t body_len, uint8_t *out);
/* In place on a whole datagram: dg holds ad and body (len bytes) and has
 * room for cap >= len + overhead; *sealed_len gets the new length. */
int aftp_aead_seal_datagram(const aftp_aead *a, uint8_t *dg, size_t len, size_t ad_len,
                            size_t cap, size_t *sealed_len);

/* Opens one body: `in` holds ciphertext || tag (in_len bytes), `ad` the
 * datagram's first ad_len bytes. The plaintext (in_len - overhead bytes)
 * goes to `out`; out == in opens in place. AFTP_ERR_AUTH when the header's
 * PROTECTED or KEY_PHASE flag does not match this context or the tag does
 * not verify - then out holds unauthenticated or zeroed bytes (see
 * "opening into scratch" above); AFTP_ERR_TRUNCATED when in_len is shorter than the tag. */
int aftp_aead_open(const aftp_aead *a, const uint8_t *ad, size_t ad_len, const uint8_t *in,
                   size_t in_len, uint8_t *out);
/* In place on a whole datagram of len bytes; *plain_len gets the length of
 * ad + plaintext. */
int aftp_aead_open_datagram(const aftp_aead *a, uint8_t *dg, size_t len, size_t ad_len,
                            size_t *plain_len);

#endif /* AFTP_AEAD_H */
