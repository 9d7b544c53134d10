/* Stateless RETRY cookies (door/aftp_cookie.h): a token verifies only
 * for the secret, address, port and connection id it was made for, and
 * only within its lifetime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "door/aftp_cookie.h"

static const uint8_t v4[4] = {192, 0, 2, 7};
static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 7};
static uint8_t secret[AFTP_COOKIE_SECRET_LEN];

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(i * 7 + 3);
    return 0;
}

static aftp_cookie_peer peer4(void)
{
    aftp_cookie_peer p = {v4, sizeof v4, 40000, 0x11223344u};
    return p;
}

static void test_round_trip(void **state)
{
    (void)state;
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_cookie_peer p = peer4();
    assert_int_equal(aftp_cookie_make(secret, &p, 1000, token), AFTP_OK);
    /* the coarse time leads the token, big-endian */
    assert_int_equal(token[0] << 24 | token[1] << 16 | token[2] << 8 | token[3], 1000);
    assert_int_equal(aftp_cookie_verify(secret, &p, 1000, token, sizeof token), AFTP_OK);
    aftp_cookie_peer q = {v6, sizeof v6, 40000, 0x11223344u};
    assert_int_equal(aftp_cookie_make(secret, &q, 5, token), AFTP_OK);
    assert_int_equal(aftp_cookie_verify(secret, &q, 7, token, sizeof token), AFTP_OK);
}

static void test_bound_to_peer_and_secret(void **state)
{
    (void)state;
    uint8_t token[AFTP_COOKIE_LEN], other_secret[AFTP_COOKIE_SECRET_LEN];
    aftp_cookie_peer p = peer4();
    assert_int_equal(aftp_cookie_make(secret, &p, 1000, token), AFTP_OK);
    aftp_cookie_peer port = p, id = p, addr = p;
    port.port++;
    id.conn_id ^= 1;
    uint8_t a2[4] = {192, 0, 2, 8};
    addr.addr = a2;
    assert_int_equal(aftp_cookie_verify(secret, &port, 1000, token, sizeof token), AFTP_ERR_AUTH);
    assert_int_equal(aftp_cookie_verify(secret, &id, 1000, token, sizeof token), AFTP_ERR_AUTH);
    assert_int_equal(aftp_cookie_verify(secret, &addr, 1000, token, sizeof token), AFTP_ERR_AUTH);
    /* the same bytes as the start of an IPv6 address are another address */
    uint8_t v6_prefix[16] = {192, 0, 2, 7};
    aftp_cookie_peer wide = {v6_prefix, sizeof v6_prefix, p.port, p.conn_id};
    assert_int_equal(aftp_cookie_verify(secret, &wide, 1000, token, sizeof token), AFTP_ERR_AUTH);
    memcpy(other_secret, secret, sizeof secret);
    other_secret[0] ^= 0x80;
    assert_int_equal(aftp_cookie_verify(other_secret, &p, 1000, token, sizeof token),
                     AFTP_ERR_AUTH);
}

static void test_tampered_or_truncated(void **state)
{
    (void)state;
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_cookie_peer p = peer4();
    assert_int_equal(aftp_cookie_make(secret, &p, 1000, token), AFTP_OK);
    for (size_t i = 0; i < sizeof token; i++) {
        for (int bit = 0; bit < 8; bit++) {
            token[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(aftp_cookie_verify(secret, &p, 1000, token, sizeof token),
                             AFTP_ERR_AUTH);
            token[i] ^= (uint8_t)(1u << bit);
        }
    }
    assert_int_equal(aftp_cookie_verify(secret, &p, 1000, token, sizeof token - 1),
                     AFTP_ERR_AUTH);
    assert_int_equal(aftp_cookie_verify(secret, &p, 1000, token, 0), AFTP_ERR_AUTH);
}

/* Valid from its own second to AFTP_COOKIE_MAX_AGE_S later, never before. */
static void test_lifetime(void **state)
{
    (void)state;
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_cookie_peer p = peer4();
    assert_int_equal(aftp_cookie_make(secret, &p, 1000, token), AFTP_OK);
    assert_int_equal(aftp_cookie_verify(secret, &p, 1000 + AFTP_COOKIE_MAX_AGE_S, token,
                                        sizeof token), AFTP_OK);
    assert_int_equal(aftp_cookie_verify(secret, &p, 1000 + AFTP_COOKIE_MAX_AGE_S + 1, token,
                                        sizeof token), AFTP_ERR_AUTH);
    assert_int_equal(aftp_cookie_verify(secret, &p, 999, token, sizeof token), AFTP_ERR_AUTH);
    /* a token made at the far end of the clock cannot wrap into validity */
    assert_int_equal(aftp_cookie_make(secret, &p, UINT32_MAX, token), AFTP_OK);
    assert_int_equal(aftp_cookie_verify(secret, &p, 3, token, sizeof token), AFTP_ERR_AUTH);
}

static void test_bad_address_length(void **state)
{
    (void)state;
    uint8_t token[AFTP_COOKIE_LEN], wide[AFTP_COOKIE_MAX_ADDR + 1] = {0};
    aftp_cookie_peer none = {v4, 0, 1, 1}, big = {wide, sizeof wide, 1, 1};
    assert_int_equal(aftp_cookie_make(secret, &none, 1, token), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_cookie_make(secret, &big, 1, token), AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bound_to_peer_and_secret),
        cmocka_unit_test(test_tampered_or_truncated),
        cmocka_unit_test(test_lifetime),
        cmocka_unit_test(test_bad_address_length),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
