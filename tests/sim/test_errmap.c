/* aftp_errmap: the wire <-> local table of spec section 11, and
 * aftp_digest: streaming XXH3-128 in canonical form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "aftp/aftp_error.h"
#include "common/aftp_digest.h"
#include "common/aftp_errmap.h"
#include "proto/aftp_wire.h"
#include "sim_link.h"

static const struct {
    uint16_t wire;
    int local;
} pairs[] = {
    {AFTP_WIRE_ERR_NONE, AFTP_OK},
    {AFTP_WIRE_ERR_FILE_EXISTS, AFTP_ERR_FILE_EXISTS},
    {AFTP_WIRE_ERR_NO_SPACE, AFTP_ERR_NO_SPACE},
    {AFTP_WIRE_ERR_IO, AFTP_ERR_IO},
    {AFTP_WIRE_ERR_DIGEST_MISMATCH, AFTP_ERR_DIGEST_MISMATCH},
    {AFTP_WIRE_ERR_PATH_REJECTED, AFTP_ERR_PATH_REJECTED},
    {AFTP_WIRE_ERR_PERMISSION, AFTP_ERR_PERMISSION},
    {AFTP_WIRE_ERR_IDLE_TIMEOUT, AFTP_ERR_IDLE_TIMEOUT},
    {AFTP_WIRE_ERR_SOURCE_CHANGED, AFTP_ERR_SOURCE_CHANGED},
    {AFTP_WIRE_ERR_LIMIT, AFTP_ERR_LIMIT},
    {AFTP_WIRE_ERR_VERSION, AFTP_ERR_VERSION},
    {AFTP_WIRE_ERR_CANCELLED, AFTP_ERR_CANCELLED},
    {AFTP_WIRE_ERR_UNAUTHORIZED, AFTP_ERR_UNKNOWN_PEER},
};

static void test_pairs_both_ways(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        assert_int_equal(aftp_errmap_to_local(pairs[i].wire), pairs[i].local);
        assert_int_equal(aftp_errmap_to_wire(pairs[i].local), pairs[i].wire);
    }
}

static void test_others(void **state)
{
    (void)state;
    assert_int_equal(aftp_errmap_to_local(AFTP_WIRE_ERR_PROTOCOL), AFTP_ERR_PEER_CLOSED);
    assert_int_equal(aftp_errmap_to_local(AFTP_WIRE_ERR_INTERNAL), AFTP_ERR_PEER_CLOSED);
    assert_int_equal(aftp_errmap_to_local(999), AFTP_ERR_PEER_CLOSED);
    assert_int_equal(aftp_errmap_to_wire(AFTP_ERR_MALFORMED), AFTP_WIRE_ERR_PROTOCOL);
    assert_int_equal(aftp_errmap_to_wire(AFTP_ERR_NO_MEMORY), AFTP_WIRE_ERR_NO_SPACE);
    assert_int_equal(aftp_errmap_to_wire(AFTP_ERR_INTERNAL), AFTP_WIRE_ERR_INTERNAL);
    assert_int_equal(aftp_errmap_to_wire(-12345), AFTP_WIRE_ERR_INTERNAL);
}

static void test_digest_streaming(void **state)
{
    (void)state;
    enum { LEN = 100000 };
    static uint8_t data[LEN];
    uint64_t rng = 3;
    for (size_t i = 0; i < LEN; i++)
        data[i] = (uint8_t)sim_rand(&rng);
    aftp_digest *d;
    uint8_t out[AFTP_DIGEST_BYTES];
    assert_int_equal(aftp_digest_new(&d), AFTP_OK);
    for (size_t off = 0; off < LEN;) {
        size_t n = 1 + sim_rand(&rng) % 3000;
        if (n > LEN - off)
            n = LEN - off;
        aftp_digest_update(d, data + off, n);
        off += n;
    }
    aftp_digest_final(d, out);
    XXH128_hash_t h = XXH3_128bits(data, LEN);
    for (int i = 0; i < 8; i++) { /* canonical: high half first, big-endian */
        assert_int_equal(out[i], (uint8_t)(h.high64 >> (56 - 8 * i)));
        assert_int_equal(out[8 + i], (uint8_t)(h.low64 >> (56 - 8 * i)));
    }
    aftp_digest_reset(d);
    aftp_digest_final(d, out);
    h = XXH3_128bits(NULL, 0);
    assert_int_equal(out[0], (uint8_t)(h.high64 >> 56));
    assert_int_equal(out[15], (uint8_t)h.low64);
    aftp_digest_del(d);
    aftp_digest_del(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs_both_ways),
        cmocka_unit_test(test_others),
        cmocka_unit_test(test_digest_streaming),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
