/* aftp_bitmap: set/clear/test, first clear, next clear/set searches,
 * checked against a plain byte-per-bit model under random operations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "common/aftp_bitmap.h"
#include "sim_link.h"

static void test_empty_map(void **state)
{
    (void)state;
    aftp_bitmap b;
    assert_int_equal(aftp_bitmap_init(&b, 0), AFTP_OK);
    assert_int_equal(aftp_bitmap_count(&b), 0);
    assert_int_equal(aftp_bitmap_first_clear(&b), 0);
    assert_int_equal(aftp_bitmap_next_clear(&b, 0, 100), 0);
    assert_int_equal(aftp_bitmap_next_set(&b, 0, 100), 0);
    assert_int_equal(aftp_bitmap_set(&b, 0), 0);
    assert_int_equal(aftp_bitmap_test(&b, 0), 0);
    aftp_bitmap_free(&b);
    aftp_bitmap_free(&b); /* freeing twice is harmless */
}

static void test_set_clear_and_bounds(void **state)
{
    (void)state;
    aftp_bitmap b;
    assert_int_equal(aftp_bitmap_init(&b, 65), AFTP_OK);
    assert_int_equal(aftp_bitmap_set(&b, 64), 1);
    assert_int_equal(aftp_bitmap_set(&b, 64), 0);
    assert_int_equal(aftp_bitmap_set(&b, 65), 0); /* out of range */
    assert_int_equal(aftp_bitmap_test(&b, 65), 0);
    assert_int_equal(aftp_bitmap_count(&b), 1);
    assert_int_equal(aftp_bitmap_first_clear(&b), 0);
    for (uint64_t i = 0; i < 64; i++)
        aftp_bitmap_set(&b, i);
    assert_int_equal(aftp_bitmap_first_clear(&b), 65); /* full: nbits */
    assert_int_equal(aftp_bitmap_next_clear(&b, 0, 1000), 65);
    aftp_bitmap_clear(&b, 10);
    aftp_bitmap_clear(&b, 10);
    assert_int_equal(aftp_bitmap_count(&b), 64);
    assert_int_equal(aftp_bitmap_first_clear(&b), 10);
    assert_int_equal(aftp_bitmap_next_clear(&b, 11, 65), 65);
    assert_int_equal(aftp_bitmap_next_set(&b, 10, 65), 11);
    aftp_bitmap_free(&b);
}

/* A large full map with one hole at the very end: the summary level must
 * find it (and the search must stop at `limit` before it). */
static void test_far_hole(void **state)
{
    (void)state;
    aftp_bitmap b;
    uint64_t n = (UINT64_C(1) << 20) + 3;
    assert_int_equal(aftp_bitmap_init(&b, n), AFTP_OK);
    for (uint64_t i = 0; i < n - 1; i++)
        aftp_bitmap_set(&b, i);
    assert_int_equal(aftp_bitmap_first_clear(&b), n - 1);
    assert_int_equal(aftp_bitmap_next_clear(&b, 5, n), n - 1);
    assert_int_equal(aftp_bitmap_next_clear(&b, 5, n - 1), n - 1);
    assert_int_equal(aftp_bitmap_next_clear(&b, 5, 4096), 4096);
    aftp_bitmap_set(&b, n - 1);
    assert_int_equal(aftp_bitmap_first_clear(&b), n);
    assert_int_equal(aftp_bitmap_count(&b), n);
    aftp_bitmap_free(&b);
}

static uint64_t model_next(const uint8_t *m, uint64_t n, uint64_t from, uint64_t limit, int want)
{
    if (limit > n)
        limit = n;
    for (uint64_t i = from; i < limit; i++)
        if (m[i] == want)
            return i;
    return limit;
}

static void random_ops(uint64_t n, uint64_t seed)
{
    aftp_bitmap b;
    uint8_t *m = calloc(n ? n : 1, 1);
    uint64_t rng = seed, count = 0;
    assert_int_equal(aftp_bitmap_init(&b, n), AFTP_OK);
    for (int op = 0; op < 20000; op++) {
        uint64_t i = sim_rand(&rng) % (n + 2); /* sometimes out of range */
        if (sim_rand(&rng) % 4 != 0) {
            int was_clear = i < n && !m[i];
            assert_int_equal(aftp_bitmap_set(&b, i), was_clear);
            if (was_clear) {
                m[i] = 1;
                count++;
            }
        } else {
            aftp_bitmap_clear(&b, i);
            if (i < n && m[i]) {
                m[i] = 0;
                count--;
            }
        }
        uint64_t from = sim_rand(&rng) % (n + 1);
        uint64_t limit = from + sim_rand(&rng) % (n + 70);
        assert_int_equal(aftp_bitmap_count(&b), count);
        assert_int_equal(aftp_bitmap_first_clear(&b), model_next(m, n, 0, n, 0));
        assert_int_equal(aftp_bitmap_next_clear(&b, from, limit), model_next(m, n, from, limit, 0));
        assert_int_equal(aftp_bitmap_next_set(&b, from, limit), model_next(m, n, from, limit, 1));
        assert_int_equal(aftp_bitmap_test(&b, i), i < n && m[i]);
    }
    aftp_bitmap_free(&b);
    free(m);
}

static void test_random_against_model(void **state)
{
    (void)state;
    const uint64_t sizes[] = {1, 63, 64, 65, 130, 4095, 4097, 9000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        random_ops(sizes[k], 100 + k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_map),
        cmocka_unit_test(test_set_clear_and_bounds),
        cmocka_unit_test(test_far_hole),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
