/* A first contact's startup over a one-BDP buffer with no loss, through
 * the whole engines on the simulated 1 Gbit/s, 150 ms path: what it
 * retransmits is what its overshoot overflowed, and the rule
 * allows at most loss + 1 point of the file. Also when the receiving host
 * reads its packets in bunches (it stops reading for a while, then reads
 * what waited faster than the link brought it, stamping each packet when
 * it reads it, as a TUN device or a VM that loses the CPU delivers): such
 * receive-rate samples run above the link, and on the emulated WAN
 * startup took them for bandwidth and overflowed the buffer by up to a
 * BDP (0-17% of 128 MiB retransmitted; the same here before the fix). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim_ramp.h"
#include "sim_run.h"

#define RTT_MS 150
#define BYTES (128 * (UINT64_C(1) << 20))
#define SEEDS 8
#define ALLOWED_SHARE 0.01 /* loss (none) + 1 point */

/* The share of the file retransmitted by a first contact; the receiving
 * host reads at host_bps (0: as the link brings packets) and pauses for
 * up to pause_max_ns every pause_every_ns on average. */
static double first_contact_share(uint64_t seed, uint64_t host_bps, uint64_t pause_every_ns,
                                  uint64_t pause_max_ns)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_wan(&c, SIM_RAMP_LINK_BPS, RTT_MS, 0.0);
    c.file_size = BYTES;
    c.cipher = AFTP_CIPHER_NONE;
    c.seed = seed;
    c.fwd.host_bps = host_bps;
    c.fwd.host_pause_every_ns = pause_every_ns;
    c.fwd.host_pause_max_ns = pause_max_ns;
    sim_run(&c, &r);
    sim_expect_clean_end(&r);
    double share = (double)r.snd.payload_bytes_retransmitted / (double)BYTES;
    print_message("seed %llu: retransmitted %.2f%% of the file\n", (unsigned long long)seed,
                  100.0 * share);
    sim_result_free(&r);
    return share;
}

/* The round that overshoots the link queues at most what the buffer
 * holds (it lost 1.7% with 2 BDP plus a feedback interval in flight). */
static void test_startup_fits_a_one_bdp_buffer(void **state)
{
    (void)state;
    assert_true(first_contact_share(1, 0, 0, 0) <= ALLOWED_SHARE);
}

/* The receiving host pauses up to 30 ms about every 200 ms and then reads
 * at 2.5 Gbit/s: each seed puts the pauses elsewhere in the ramp. */
static void test_startup_ignores_bunched_arrivals(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= SEEDS; seed++)
        assert_true(first_contact_share(seed, 2500 * UINT64_C(1000000), 200 * SIM_MS,
                                        30 * SIM_MS) <= ALLOWED_SHARE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_startup_fits_a_one_bdp_buffer),
        cmocka_unit_test(test_startup_ignores_bunched_arrivals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
