/* Packet protection (aftp_aead.h): a small vtable over the three ciphers.
 *
 * The bulk AEAD runs on OpenSSL's libcrypto: the same AES-256-GCM and
 * ChaCha20-Poly1305 as libsodium's (byte for byte, spec/vectors), but with
 * stitched AES-NI/VAES and AVX code that Debian 12's libsodium 1.0.18 lacks:
 * sealing 1408-byte payloads, each under its own nonce, runs here at 3.5
 * GB/s (AES) and 1.5 GB/s (ChaCha), against libsodium's 1.4 and 0.65.
 * libsodium keeps the handshake, the traffic secrets and keys, and the
 * protected memory. Each key generation's expanded key lives in OpenSSL's
 * cipher context, which OpenSSL allocates while aftp_keymem routes its
 * allocations to sodium_malloc'd memory when the embedder let aftp install
 * that allocator (aftp_keymem.h, aftp_global_init). */
#include "common/aftp_aead.h"

#include "common/aftp_keymem.h"

#include <openssl/evp.h>
#include <sodium.h>
#include <string.h>

/* Encrypts or decrypts len bytes of `in` into `out` (combined mode: the tag
 * follows the ciphertext) with ad_len bytes of associated data. */
typedef int (*aead_fn)(const aftp_aead *a, uint8_t *out, const uint8_t *in, size_t len,
                       const uint8_t *ad, size_t ad_len, const uint8_t *nonce);

typedef struct aead_ops {
    uint8_t cipher;
    size_t overhead;
    const char *evp_name; /* OpenSSL's name of the cipher; NULL for NONE */
    aead_fn seal;
    aead_fn open;
} aead_ops;

struct aftp_aead {
    /* The keyed cipher (see the top). Sealing and opening rewrite its
     * per-packet state: one thread at a time per aftp_aead. */
    EVP_CIPHER_CTX *evp;
    uint8_t iv[AFTP_AEAD_IV_LEN];
    const aead_ops *ops;
    unsigned key_phase;
};

/* ---- the three ciphers ---- */

static int none_copy(const aftp_aead *a, uint8_t *out, const uint8_t *in, size_t len,
                     const uint8_t *ad, size_t ad_len, const uint8_t *nonce)
{
    (void)a, (void)ad, (void)ad_len, (void)nonce;
    if (out != in)
        memmove(out, in, len);
    return AFTP_OK;
}

/* One pass of the keyed cipher under `nonce`: the associated data, then
 * len bytes from in to out (in == out works in place), and the tag: read
 * into `tag` when sealing, checked against it when opening. 1 on success;
 * 0 when OpenSSL fails or, opening, the tag does not verify. */
static int evp_pass(EVP_CIPHER_CTX *evp, int seal, const uint8_t *nonce, const uint8_t *ad,
                    size_t ad_len, const uint8_t *in, size_t len, uint8_t *out, uint8_t *tag)
{
    int n;
    if (EVP_CipherInit_ex(evp, NULL, NULL, NULL, nonce, seal) != 1 ||
        (!seal && EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_AEAD_SET_TAG, AFTP_AEAD_TAG_LEN, tag) != 1) ||
        EVP_CipherUpdate(evp, NULL, &n, ad, (int)ad_len) != 1 ||
        EVP_CipherUpdate(evp, out, &n, in, (int)len) != 1 ||
        EVP_CipherFinal_ex(evp, out + len, &n) != 1)
        return 0;
    return !seal || EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_AEAD_GET_TAG, AFTP_AEAD_TAG_LEN, tag) == 1;
}

static int evp_seal(const aftp_aead *a, uint8_t *out, const uint8_t *in, size_t len,
                    const uint8_t *ad, size_t ad_len, const uint8_t *nonce)
{
    return evp_pass(a->evp, 1, nonce, ad, ad_len, in, len, out, out + len) ? AFTP_OK
                                                                          : AFTP_ERR_INTERNAL;
}

/* The plaintext is written before the tag is checked: on AFTP_ERR_AUTH,
 * `out` holds unauthenticated bytes (aftp_aead.h, "opening into scratch"). */
static int evp_open(const aftp_aead *a, uint8_t *out, const uint8_t *in, size_t len,
                    const uint8_t *ad, size_t ad_len, const uint8_t *nonce)
{
    size_t body = len - AFTP_AEAD_TAG_LEN; /* len >= the tag: checked by aftp_aead_open */
    uint8_t tag[AFTP_AEAD_TAG_LEN];
    memcpy(tag, in + body, sizeof tag);
    return evp_pass(a->evp, 0, nonce, ad, ad_len, in, body, out, tag) ? AFTP_OK : AFTP_ERR_AUTH;
}

static const aead_ops cipher_ops[] = {
    {AFTP_WIRE_CIPHER_NONE, 0, NULL, none_copy, none_copy},
    {AFTP_WIRE_CIPHER_AES256GCM, AFTP_AEAD_TAG_LEN, "AES-256-GCM", evp_seal, evp_open},
    {AFTP_WIRE_CIPHER_CHACHA20POLY1305, AFTP_AEAD_TAG_LEN, "ChaCha20-Poly1305", evp_seal,
     evp_open},
};

/* A cipher context keyed with `key`; NULL when OpenSSL runs out of memory
 * (aftp_aead_available checked the cipher). The nonce comes with every
 * packet. The context and the key schedule inside it are allocated in
 * guarded memory; the cipher is fetched before, as it is a long-lived
 * object OpenSSL shares and caches. */
static EVP_CIPHER_CTX *evp_keyed(const char *name, const uint8_t *key)
{
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, name, NULL);
    aftp_keymem_begin();
    EVP_CIPHER_CTX *evp = cipher ? EVP_CIPHER_CTX_new() : NULL;
    if (evp != NULL && EVP_CipherInit_ex(evp, cipher, NULL, key, NULL, 1) != 1) {
        EVP_CIPHER_CTX_free(evp);
        evp = NULL;
    }
    aftp_keymem_end();
    EVP_CIPHER_free(cipher); /* the context holds its own reference */
    return evp;
}

/* ---- context ---- */

/* Whether this libcrypto offers the cipher (a FIPS-only configuration,
 * for one, has no ChaCha20-Poly1305). */
static int evp_has(const char *name)
{
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, name, NULL);
    EVP_CIPHER_free(cipher);
    return cipher != NULL;
}

int aftp_aead_available(uint8_t cipher)
{
    if (sodium_init() < 0 || cipher >= sizeof cipher_ops / sizeof cipher_ops[0])
        return 0;
    if (cipher == AFTP_WIRE_CIPHER_AES256GCM && !crypto_aead_aes256gcm_is_available())
        return 0; /* libsodium's CPU check: AES-NI and PCLMUL */
    return cipher == AFTP_WIRE_CIPHER_NONE || evp_has(cipher_ops[cipher].evp_name);
}

uint8_t aftp_aead_preferred(void)
{
    return aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM) ? AFTP_WIRE_CIPHER_AES256GCM
                                                           : AFTP_WIRE_CIPHER_CHACHA20POLY1305;
}

int aftp_aead_new(aftp_aead **out, uint8_t cipher, const uint8_t *key, const uint8_t *iv,
                  unsigned key_phase)
{
    *out = NULL;
    if (!aftp_aead_available(cipher) || key_phase > 1)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cipher != AFTP_WIRE_CIPHER_NONE && (key == NULL || iv == NULL))
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_aead *a = sodium_malloc(sizeof *a);
    if (a == NULL)
        return AFTP_ERR_NO_MEMORY;
    sodium_memzero(a, sizeof *a);
    a->ops = &cipher_ops[cipher];
    a->key_phase = key_phase;
    if (cipher != AFTP_WIRE_CIPHER_NONE) {
        memcpy(a->iv, iv, AFTP_AEAD_IV_LEN);
        if ((a->evp = evp_keyed(a->ops->evp_name, key)) == NULL) {
            sodium_free(a);
            return AFTP_ERR_NO_MEMORY;
        }
    }
    /* Keys never change after this: a stray write faults instead of
     * silently corrupting every later packet. */
    sodium_mprotect_readonly(a);
    *out = a;
    return AFTP_OK;
}

void aftp_aead_del(aftp_aead *a)
{
    if (a != NULL)
        EVP_CIPHER_CTX_free(a->evp); /* wipes the key schedule, frees guarded memory */
    sodium_free(a); /* NULL-safe; makes the pages writable, wipes, unmaps */
}

uint8_t aftp_aead_cipher(const aftp_aead *a)
{
    return a->ops->cipher;
}

unsigned aftp_aead_key_phase(const aftp_aead *a)
{
    return a->key_phase;
}

size_t aftp_aead_overhead(const aftp_aead *a)
{
    return a->ops->overhead;
}

/* ---- header and nonce ---- */

enum { FLAGS_OFFSET = 2, PN_OFFSET = 8, PN_LEN = 8 };

static uint16_t header_flags(const uint8_t *header)
{
    return (uint16_t)(header[FLAGS_OFFSET] << 8 | header[FLAGS_OFFSET + 1]);
}

/* The flags this context writes: PROTECTED and KEY_PHASE describe the
 * sealing, so they are set from the context, never trusted from the caller. */
static uint16_t sealed_flags(const aftp_aead *a, uint16_t flags)
{
    flags &= (uint16_t)~AFTP_WIRE_FLAGS_DEFINED;
    if (a->ops->overhead == 0)
        return flags;
    flags |= AFTP_WIRE_FLAG_PROTECTED;
    if (a->key_phase)
        flags |= AFTP_WIRE_FLAG_KEY_PHASE;
    return flags;
}

/* IV XOR (0^32 || pn): the packet number sits in the IV's last 8 bytes,
 * big-endian exactly as in the header, so the XOR works byte by byte. */
static void packet_nonce(const aftp_aead *a, const uint8_t *header, uint8_t *nonce)
{
    memcpy(nonce, a->iv, AFTP_AEAD_IV_LEN);
    for (size_t i = 0; i < PN_LEN; i++)
        nonce[AFTP_AEAD_IV_LEN - PN_LEN + i] ^= header[PN_OFFSET + i];
}

/* ---- seal and open ---- */

/* The two layouts of aftp_aead.h; any other length is a caller's mistake. */
static int ad_len_valid(size_t ad_len)
{
    return ad_len == AFTP_AEAD_AD_HEADER || ad_len == AFTP_AEAD_AD_DATA;
}

int aftp_aead_seal(const aftp_aead *a, uint8_t *ad, size_t ad_len, const uint8_t *body,
                   size_t body_len, uint8_t *out)
{
    if (!ad_len_valid(ad_len))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (body_len > AFTP_WIRE_MAX_DATAGRAM)
        return AFTP_ERR_LIMIT;
    uint16_t flags = sealed_flags(a, header_flags(ad));
    ad[FLAGS_OFFSET] = (uint8_t)(flags >> 8);
    ad[FLAGS_OFFSET + 1] = (uint8_t)flags;
    uint8_t nonce[AFTP_AEAD_IV_LEN];
    packet_nonce(a, ad, nonce);
    return a->ops->seal(a, out, body, body_len, ad, ad_len, nonce);
}

int aftp_aead_seal_datagram(const aftp_aead *a, uint8_t *dg, size_t len, size_t ad_len,
                            size_t cap, size_t *sealed_len)
{
    if (len < ad_len)
        return AFTP_ERR_TRUNCATED;
    if (cap < len || cap - len < a->ops->overhead)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    uint8_t *body = dg + ad_len;
    int rc = aftp_aead_seal(a, dg, ad_len, body, len - ad_len, body);
    if (rc == AFTP_OK)
        *sealed_len = len + a->ops->overhead;
    return rc;
}

/* A packet sealed by this context carries exactly the flags it would
 * write; anything else (an unprotected packet in a protected session, the
 * other key generation) cannot be opened here. */
static int flags_match(const aftp_aead *a, const uint8_t *header)
{
    uint16_t flags = header_flags(header);
    return (flags & AFTP_WIRE_FLAGS_DEFINED) == (sealed_flags(a, flags) & AFTP_WIRE_FLAGS_DEFINED);
}

int aftp_aead_open(const aftp_aead *a, const uint8_t *ad, size_t ad_len, const uint8_t *in,
                   size_t in_len, uint8_t *out)
{
    if (!ad_len_valid(ad_len))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (in_len < a->ops->overhead)
        return AFTP_ERR_TRUNCATED;
    if (in_len > AFTP_WIRE_MAX_DATAGRAM)
        return AFTP_ERR_LIMIT;
    if (!flags_match(a, ad))
        return AFTP_ERR_AUTH;
    uint8_t nonce[AFTP_AEAD_IV_LEN];
    packet_nonce(a, ad, nonce);
    return a->ops->open(a, out, in, in_len, ad, ad_len, nonce);
}

int aftp_aead_open_datagram(const aftp_aead *a, uint8_t *dg, size_t len, size_t ad_len,
                            size_t *plain_len)
{
    if (len < ad_len)
        return AFTP_ERR_TRUNCATED;
    uint8_t *body = dg + ad_len;
    int rc = aftp_aead_open(a, dg, ad_len, body, len - ad_len, body);
    if (rc == AFTP_OK)
        *plain_len = len - a->ops->overhead;
    return rc;
}
