/* aftp_rtt: RFC 9002 section 5 arithmetic, ack-delay handling, PTO. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/aftp_rtt.h"

#define MS UINT64_C(1000000)

static void test_before_first_sample(void **state)
{
    (void)state;
    aftp_rtt r;
    aftp_rtt_init(&r, 100 * MS);
    assert_false(r.has_sample);
    assert_int_equal(aftp_rtt_pto(&r), 200 * MS);
    assert_int_equal(aftp_rtt_loss_delay(&r), 100 * MS + 100 * MS / 8);
}

static void test_first_and_second_sample(void **state)
{
    (void)state;
    aftp_rtt r;
    aftp_rtt_init(&r, 333 * MS);
    aftp_rtt_sample(&r, 100 * MS, 50 * MS); /* first: ack delay not used */
    assert_int_equal(r.min, 100 * MS);
    assert_int_equal(r.smoothed, 100 * MS);
    assert_int_equal(r.var, 50 * MS);
    assert_int_equal(aftp_rtt_pto(&r), 100 * MS + 4 * 50 * MS);
    /* 120 ms with 10 ms ack delay: adjusted 110 ms. */
    aftp_rtt_sample(&r, 120 * MS, 10 * MS);
    assert_int_equal(r.var, (3 * 50 * MS + 10 * MS) / 4);
    assert_int_equal(r.smoothed, (7 * 100 * MS + 110 * MS) / 8);
    assert_int_equal(r.latest, 120 * MS);
    assert_int_equal(r.min, 100 * MS);
    assert_int_equal(aftp_rtt_loss_delay(&r), 120 * MS + 120 * MS / 8);
}

/* An ack delay that would push the sample below min_rtt is ignored. */
static void test_ack_delay_bounded_by_min(void **state)
{
    (void)state;
    aftp_rtt r;
    aftp_rtt_init(&r, 100 * MS);
    aftp_rtt_sample(&r, 100 * MS, 0);
    aftp_rtt_sample(&r, 105 * MS, 10 * MS);
    assert_int_equal(r.smoothed, (7 * 100 * MS + 105 * MS) / 8);
    aftp_rtt_sample(&r, 90 * MS, 0);
    assert_int_equal(r.min, 90 * MS);
}

static void test_granularity_floor(void **state)
{
    (void)state;
    aftp_rtt r;
    aftp_rtt_init(&r, 100 * MS);
    for (int i = 0; i < 50; i++)
        aftp_rtt_sample(&r, 10000, 0); /* 10 us, no variation */
    assert_int_equal(aftp_rtt_pto(&r), r.smoothed + AFTP_RTT_GRANULARITY_NS);
    assert_int_equal(aftp_rtt_loss_delay(&r), AFTP_RTT_GRANULARITY_NS);
}

static void test_backoff(void **state)
{
    (void)state;
    aftp_rtt r;
    aftp_rtt_init(&r, 100 * MS);
    assert_int_equal(aftp_rtt_pto_backoff(&r, 0), 200 * MS);
    assert_int_equal(aftp_rtt_pto_backoff(&r, 2), 800 * MS);
    assert_int_equal(aftp_rtt_pto_backoff(&r, 4), AFTP_RTT_MAX_BACKOFF_NS);
    assert_int_equal(aftp_rtt_pto_backoff(&r, 200), AFTP_RTT_MAX_BACKOFF_NS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_first_sample),
        cmocka_unit_test(test_first_and_second_sample),
        cmocka_unit_test(test_ack_delay_bounded_by_min),
        cmocka_unit_test(test_granularity_floor),
        cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
