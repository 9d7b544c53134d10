/* A repeat transfer over a path the client remembers (Careful Resume,
 * aftp_sender_settings.resume_*), through the whole engines on the
 * simulated 1 Gbit/s, 150 ms path: it starts from the rate and minimum
 * RTT the first transfer measured, judged by the handshake's RTT, and so
 * ends more than two round trips sooner (the ramp from the initial
 * window takes about four), on the virtual clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim_ramp.h"

#define RTT_MS 150
#define BYTES (113 * UINT64_C(1000000))

static void repeat_after(double loss)
{
    sim_ramp_memory none = {0, 0};
    aftp_stats first_stats, repeat_stats;
    double first = sim_ramp_transfer(BYTES, RTT_MS, loss, &none, &first_stats);
    assert_true(first > 0);
    /* the first measured the link in steady state */
    assert_int_equal(first_stats.cc_mode, 3);
    assert_true(first_stats.delivery_rate_bps >= 0.95 * SIM_RAMP_LINK_BPS * (1 - loss));
    sim_ramp_memory saved = {first_stats.delivery_rate_bps, first_stats.path_min_rtt_ns};
    double repeat = sim_ramp_transfer(BYTES, RTT_MS, loss, &saved, &repeat_stats);
    assert_true(repeat > 0);
    assert_true(repeat < first - 2 * RTT_MS / 1000.0);
    /* no more repair than the first needed, beyond the loss itself */
    assert_true(repeat_stats.payload_bytes_retransmitted <=
                first_stats.payload_bytes_retransmitted + BYTES / 1000);
}

static void test_repeat_is_sooner(void **state)
{
    (void)state;
    repeat_after(0.0);
}

static void test_repeat_is_sooner_at_1pct_loss(void **state)
{
    (void)state;
    repeat_after(0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeat_is_sooner),
        cmocka_unit_test(test_repeat_is_sooner_at_1pct_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
