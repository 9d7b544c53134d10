/* GSO grouping of a batch, and the test loss shim's determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp_batch.h"
#include "aftp_drop.h"

static aftp_datagram dg(size_t head, size_t payload)
{
    static const uint8_t bytes[1];
    aftp_datagram d = {bytes, head, payload ? bytes : NULL, payload};
    return d;
}

static void expect_group(const aftp_batch_group *g, size_t first, size_t count, size_t seg)
{
    assert_int_equal(g->first, first);
    assert_int_equal(g->count, count);
    assert_int_equal(g->seg_size, seg);
}

static void test_equal_sizes_group_up_to_byte_limit(void **state)
{
    (void)state;
    aftp_datagram dgs[100];
    aftp_batch_group g[100];
    for (size_t i = 0; i < 100; i++)
        dgs[i] = dg(28, 1424); /* 1452 bytes: 45 fit in 65507 */
    size_t n = aftp_batch_plan(dgs, 100, 1, g);
    assert_int_equal(n, 3);
    expect_group(&g[0], 0, 45, 1452);
    expect_group(&g[1], 45, 45, 1452);
    expect_group(&g[2], 90, 10, 1452);
}

static void test_small_datagrams_group_up_to_segment_limit(void **state)
{
    (void)state;
    aftp_datagram dgs[130];
    aftp_batch_group g[130];
    for (size_t i = 0; i < 130; i++)
        dgs[i] = dg(100, 0);
    size_t n = aftp_batch_plan(dgs, 130, 1, g);
    assert_int_equal(n, 3);
    expect_group(&g[0], 0, AFTP_BATCH_MAX_SEGMENTS, 100);
    expect_group(&g[1], AFTP_BATCH_MAX_SEGMENTS, AFTP_BATCH_MAX_SEGMENTS, 100);
    expect_group(&g[2], 2 * AFTP_BATCH_MAX_SEGMENTS, 2, 100);
}

static void test_size_changes_split_groups(void **state)
{
    (void)state;
    /* 3 x 1000, a shorter 500 closes the group; 80 alone before a longer 1000;
     * then 2 x 1000 */
    aftp_datagram dgs[] = {dg(28, 972), dg(28, 972), dg(1000, 0), dg(28, 472),
                           dg(80, 0),   dg(28, 972), dg(28, 972)};
    aftp_batch_group g[7];
    size_t n = aftp_batch_plan(dgs, 7, 1, g);
    assert_int_equal(n, 3);
    expect_group(&g[0], 0, 4, 1000);
    expect_group(&g[1], 4, 1, 80);
    expect_group(&g[2], 5, 2, 1000);
}

static void test_without_gso_every_datagram_alone(void **state)
{
    (void)state;
    aftp_datagram dgs[5];
    aftp_batch_group g[5];
    for (size_t i = 0; i < 5; i++)
        dgs[i] = dg(28, 1424);
    assert_int_equal(aftp_batch_plan(dgs, 5, 0, g), 5);
    for (size_t i = 0; i < 5; i++)
        expect_group(&g[i], i, 1, 1452);
    assert_int_equal(aftp_batch_plan(dgs, 0, 1, g), 0);
}

static void test_drop_spec_parsing(void **state)
{
    (void)state;
    aftp_drop d;
    assert_int_equal(aftp_drop_parse("0.1", &d), AFTP_OK);
    assert_int_equal(d.state, 1);
    assert_int_equal(aftp_drop_parse("10%,42", &d), AFTP_OK);
    assert_int_equal(d.state, 42);
    assert_true(d.threshold > 429496729u - 2 && d.threshold < 429496729u + 2);
    const char *bad[] = {"", "x", "1.5", "-0.1", "0.1,", "0.1,x", "5%%", "0.1;3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(aftp_drop_parse(bad[i], &d), AFTP_ERR_INVALID_ARGUMENT);
}

static void test_drop_rate_and_determinism(void **state)
{
    (void)state;
    aftp_drop a, b, c;
    aftp_drop_parse("0.01,7", &a);
    aftp_drop_parse("0.01,7", &b);
    aftp_drop_parse("0.01,8", &c);
    int differ = 0;
    for (int i = 0; i < 200000; i++) {
        int da = aftp_drop_next(&a);
        assert_int_equal(da, aftp_drop_next(&b));
        differ |= da != aftp_drop_next(&c);
    }
    assert_true(differ);
    assert_true(a.dropped > 1700 && a.dropped < 2300); /* 2000 expected */

    aftp_drop off;
    aftp_drop_parse("0", &off);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(aftp_drop_next(&off), 0);
    aftp_drop all;
    aftp_drop_parse("100%", &all);
    assert_int_equal(aftp_drop_next(&all), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_sizes_group_up_to_byte_limit),
        cmocka_unit_test(test_small_datagrams_group_up_to_segment_limit),
        cmocka_unit_test(test_size_changes_split_groups),
        cmocka_unit_test(test_without_gso_every_datagram_alone),
        cmocka_unit_test(test_drop_spec_parsing),
        cmocka_unit_test(test_drop_rate_and_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
