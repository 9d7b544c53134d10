/* Packet protection (common/aftp_aead.h): round trips for every cipher,
 * rejection of any tampered byte, wrong keys, flags and NONE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/aftp_aead.h"
#include "crypto_fixtures.h"

enum { BODY = 100, DG = AFTP_WIRE_HEADER_LEN + BODY, HDR = AFTP_AEAD_AD_HEADER };

static const uint8_t key_a[AFTP_AEAD_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const uint8_t key_b[AFTP_AEAD_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11};
static const uint8_t iv_a[AFTP_AEAD_IV_LEN] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5,
                                               0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab};
static const uint8_t iv_b[AFTP_AEAD_IV_LEN] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5,
                                               0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xac};

static const uint8_t protected_ciphers[] = {AFTP_WIRE_CIPHER_AES256GCM,
                                            AFTP_WIRE_CIPHER_CHACHA20POLY1305};

/* A DATA-typed datagram (header + BODY counting bytes) in dg[DG + tag room]. */
static void make_datagram(uint64_t pn, uint8_t *dg)
{
    fixture_header(AFTP_WIRE_DATA, 0x01020304, pn, dg);
    for (size_t i = 0; i < BODY; i++)
        dg[AFTP_WIRE_HEADER_LEN + i] = (uint8_t)(i * 7);
}

static aftp_aead *new_aead(uint8_t cipher, const uint8_t *key, const uint8_t *iv, unsigned phase)
{
    aftp_aead *a = NULL;
    assert_int_equal(aftp_aead_new(&a, cipher, key, iv, phase), AFTP_OK);
    return a;
}

static int skip_unavailable(uint8_t cipher)
{
    if (aftp_aead_available(cipher))
        return 0;
    print_message("cipher %u not accelerated on this CPU: not tested here\n", cipher);
    return 1;
}

/* Out of place, as the sender seals from its source mapping. */
static void round_trip_out_of_place(uint8_t cipher)
{
    uint8_t dg[DG], sealed[DG + AFTP_AEAD_TAG_LEN], plain[BODY];
    make_datagram(7, dg);
    memcpy(sealed, dg, AFTP_WIRE_HEADER_LEN);
    aftp_aead *a = new_aead(cipher, key_a, iv_a, 0);
    assert_int_equal(aftp_aead_overhead(a), AFTP_AEAD_TAG_LEN);
    assert_int_equal(aftp_aead_seal(a, sealed, HDR, dg + AFTP_WIRE_HEADER_LEN,
                                    BODY, sealed + AFTP_WIRE_HEADER_LEN), AFTP_OK);
    assert_int_equal(sealed[3], AFTP_WIRE_FLAG_PROTECTED);
    assert_memory_not_equal(sealed + AFTP_WIRE_HEADER_LEN, dg + AFTP_WIRE_HEADER_LEN, BODY);
    assert_int_equal(aftp_aead_open(a, sealed, HDR, sealed + AFTP_WIRE_HEADER_LEN,
                                    BODY + AFTP_AEAD_TAG_LEN, plain), AFTP_OK);
    assert_memory_equal(plain, dg + AFTP_WIRE_HEADER_LEN, BODY);
    aftp_aead_del(a);
}

/* In place on whole datagrams, with either associated-data layout. */
static void round_trip_in_place(uint8_t cipher, size_t ad)
{
    uint8_t dg[DG + AFTP_AEAD_TAG_LEN], orig[DG];
    size_t len;
    make_datagram(8, dg);
    memcpy(orig, dg, DG);
    aftp_aead *a = new_aead(cipher, key_a, iv_a, 1);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, DG, ad, DG, &len), AFTP_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, DG, ad, sizeof dg, &len), AFTP_OK);
    assert_int_equal(len, DG + AFTP_AEAD_TAG_LEN);
    assert_int_equal(dg[3], AFTP_WIRE_FLAG_PROTECTED | AFTP_WIRE_FLAG_KEY_PHASE);
    /* the associated data stays readable: a receiver sees the block first */
    assert_memory_equal(dg + 4, orig + 4, ad - 4);
    assert_memory_not_equal(dg + ad, orig + ad, DG - ad);
    assert_int_equal(aftp_aead_open_datagram(a, dg, len, ad, &len), AFTP_OK);
    assert_int_equal(len, DG);
    assert_memory_equal(dg + ad, orig + ad, DG - ad);
    aftp_aead_del(a);
}

static const size_t ad_layouts[] = {HDR, AFTP_AEAD_AD_DATA};

static void test_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof protected_ciphers; i++) {
        if (skip_unavailable(protected_ciphers[i]))
            continue;
        round_trip_out_of_place(protected_ciphers[i]);
        for (size_t j = 0; j < 2; j++)
            round_trip_in_place(protected_ciphers[i], ad_layouts[j]);
    }
}

/* Every single-bit change anywhere in a sealed datagram (associated data,
 * ciphertext or tag) makes it fail to open; so does another AD layout. */
static void every_byte_authenticated(uint8_t cipher, size_t ad)
{
    uint8_t sealed[DG + AFTP_AEAD_TAG_LEN], copy[sizeof sealed];
    size_t len, plain_len;
    make_datagram(9, sealed);
    aftp_aead *a = new_aead(cipher, key_a, iv_a, 0);
    assert_int_equal(aftp_aead_seal_datagram(a, sealed, DG, ad, sizeof sealed, &len), AFTP_OK);
    for (size_t i = 0; i < len; i++) {
        for (unsigned bit = 0; bit < 8; bit += 3) {
            memcpy(copy, sealed, len);
            copy[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(aftp_aead_open_datagram(a, copy, len, ad, &plain_len), AFTP_ERR_AUTH);
        }
    }
    size_t other = ad == AFTP_AEAD_AD_DATA ? HDR : AFTP_AEAD_AD_DATA;
    memcpy(copy, sealed, len);
    assert_int_equal(aftp_aead_open_datagram(a, copy, len, other, &plain_len), AFTP_ERR_AUTH);
    memcpy(copy, sealed, len);
    assert_int_equal(aftp_aead_open_datagram(a, copy, len - 1, ad, &plain_len), AFTP_ERR_AUTH);
    /* the failed opens (in place) may have wiped copy: start from sealed */
    assert_int_equal(aftp_aead_open_datagram(a, sealed, len, ad, &plain_len), AFTP_OK);
    aftp_aead_del(a);
}

static void test_tampering_rejected(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof protected_ciphers; i++)
        for (size_t j = 0; j < 2 && !skip_unavailable(protected_ciphers[i]); j++)
            every_byte_authenticated(protected_ciphers[i], ad_layouts[j]);
}

/* Opening with ctx fails: wrong key, wrong IV, other key generation. */
static void expect_open_fails(uint8_t cipher, aftp_aead *ctx)
{
    uint8_t dg[DG + AFTP_AEAD_TAG_LEN];
    size_t len;
    make_datagram(10, dg);
    aftp_aead *a = new_aead(cipher, key_a, iv_a, 0);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, DG, HDR, sizeof dg, &len), AFTP_OK);
    assert_int_equal(aftp_aead_open_datagram(ctx, dg, len, HDR, &len), AFTP_ERR_AUTH);
    aftp_aead_del(a);
    aftp_aead_del(ctx);
}

static void test_wrong_keys_rejected(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof protected_ciphers; i++) {
        uint8_t c = protected_ciphers[i];
        if (skip_unavailable(c))
            continue;
        expect_open_fails(c, new_aead(c, key_b, iv_a, 0));
        expect_open_fails(c, new_aead(c, key_a, iv_b, 0));
        expect_open_fails(c, new_aead(c, key_a, iv_a, 1));
    }
    uint8_t other = protected_ciphers[1];
    if (!skip_unavailable(protected_ciphers[0]))
        expect_open_fails(protected_ciphers[0], new_aead(other, key_a, iv_a, 0));
}

/* The packet number is the nonce: the same body under two packet numbers
 * gives unrelated ciphertexts, and a header carrying another pn fails. */
static void test_packet_number_is_nonce(void **state)
{
    (void)state;
    uint8_t c = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    uint8_t one[DG + AFTP_AEAD_TAG_LEN], two[DG + AFTP_AEAD_TAG_LEN];
    size_t len;
    aftp_aead *a = new_aead(c, key_a, iv_a, 0);
    make_datagram(1, one);
    make_datagram(2, two);
    assert_int_equal(aftp_aead_seal_datagram(a, one, DG, HDR, sizeof one, &len), AFTP_OK);
    assert_int_equal(aftp_aead_seal_datagram(a, two, DG, HDR, sizeof two, &len), AFTP_OK);
    assert_memory_not_equal(one + AFTP_WIRE_HEADER_LEN, two + AFTP_WIRE_HEADER_LEN, BODY);
    memcpy(one + 8, two + 8, 8); /* pn 2 over the body sealed under pn 1 */
    assert_int_equal(aftp_aead_open_datagram(a, one, len, HDR, &len), AFTP_ERR_AUTH);
    aftp_aead_del(a);
}

/* NONE copies the body, clears PROTECTED/KEY_PHASE, adds nothing, and
 * refuses to "open" a packet that claims protection. */
static void test_none_cipher(void **state)
{
    (void)state;
    uint8_t dg[DG], orig[DG];
    size_t len;
    make_datagram(3, dg);
    dg[3] = AFTP_WIRE_FLAG_PROTECTED | AFTP_WIRE_FLAG_KEY_PHASE | 0x80; /* 0x80: reserved bit */
    memcpy(orig, dg, DG);
    aftp_aead *a = new_aead(AFTP_WIRE_CIPHER_NONE, NULL, NULL, 0);
    assert_int_equal(aftp_aead_overhead(a), 0);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, DG, HDR, DG, &len), AFTP_OK);
    assert_int_equal(len, DG);
    assert_int_equal(dg[3], 0x80);
    assert_memory_equal(dg + AFTP_WIRE_HEADER_LEN, orig + AFTP_WIRE_HEADER_LEN, BODY);
    assert_int_equal(aftp_aead_open_datagram(a, dg, DG, HDR, &len), AFTP_OK);
    dg[3] |= AFTP_WIRE_FLAG_PROTECTED;
    assert_int_equal(aftp_aead_open_datagram(a, dg, DG, HDR, &len), AFTP_ERR_AUTH);
    aftp_aead_del(a);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    aftp_aead *a = (aftp_aead *)&a;
    assert_int_equal(aftp_aead_new(&a, AFTP_WIRE_CIPHER_MAX + 1, key_a, iv_a, 0),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_null(a);
    assert_int_equal(aftp_aead_new(&a, AFTP_WIRE_CIPHER_CHACHA20POLY1305, key_a, iv_a, 2),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_aead_new(&a, AFTP_WIRE_CIPHER_CHACHA20POLY1305, NULL, iv_a, 0),
                     AFTP_ERR_INVALID_ARGUMENT);
    a = new_aead(AFTP_WIRE_CIPHER_CHACHA20POLY1305, key_a, iv_a, 0);
    uint8_t dg[DG];
    size_t len;
    make_datagram(4, dg);
    dg[3] = AFTP_WIRE_FLAG_PROTECTED;
    assert_int_equal(aftp_aead_open_datagram(a, dg, AFTP_WIRE_HEADER_LEN + AFTP_AEAD_TAG_LEN - 1,
                                             AFTP_AEAD_AD_HEADER, &len), AFTP_ERR_TRUNCATED);
    assert_int_equal(aftp_aead_open_datagram(a, dg, AFTP_WIRE_HEADER_LEN - 1, HDR,
                                             &len), AFTP_ERR_TRUNCATED);
    assert_int_equal(aftp_aead_open_datagram(a, dg, DG, HDR + 1, &len),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_aead_seal(a, dg, HDR + 4, dg + HDR + 4, 8, dg + HDR + 4),
                     AFTP_ERR_INVALID_ARGUMENT);
    aftp_aead_del(a);
    aftp_aead_del(NULL);
    uint8_t pref = aftp_aead_preferred();
    assert_true(pref == AFTP_WIRE_CIPHER_AES256GCM || pref == AFTP_WIRE_CIPHER_CHACHA20POLY1305);
    assert_int_equal(pref == AFTP_WIRE_CIPHER_AES256GCM,
                     aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_tampering_rejected),
        cmocka_unit_test(test_wrong_keys_rejected),
        cmocka_unit_test(test_packet_number_is_nonce),
        cmocka_unit_test(test_none_cipher),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
