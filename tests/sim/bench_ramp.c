/*
 * Whole transfers from their first datagram to both sides closed, not a
 * test: the sender and receiver engines on a simulated 1 Gbit/s path (one
 * BDP of queue), for the start of a transfer with nothing known of the
 * path and for a repeat transfer that starts from what the first measured
 * (Careful Resume: the rate and minimum RTT of the first's final stats, as
 * io/store/aftp_pathmem.h keeps them). One line per profile: virtual
 * seconds, and the share of the bytes' time at the link's payload rate;
 * then the same on a 100 Mbit/s, 600 ms path.
 *   sim_bench_ramp [bytes (default: 113 MB and 1 GiB)]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim_ramp.h"

#define GBIT SIM_RAMP_LINK_BPS
#define MBIT100 (GBIT / 10)

static void profile(uint64_t link_bps, uint64_t bytes, uint64_t rtt_ms, double loss)
{
    sim_ramp_memory none = {0, 0};
    aftp_stats first_stats, repeat_stats;
    double first = sim_ramp_transfer_on(link_bps, bytes, rtt_ms, loss, &none, &first_stats);
    sim_ramp_memory saved = {first_stats.delivery_rate_bps, first_stats.path_min_rtt_ns};
    double repeat = sim_ramp_transfer_on(link_bps, bytes, rtt_ms, loss, &saved, &repeat_stats);
    /* the bytes at the payload rate of 1452-byte datagrams (1400 payload) */
    double ideal = (double)bytes * 8 / (double)link_bps / (1400.0 / 1452.0) / (1.0 - loss);
    printf("%5llu Mbit/s %10.1f MB %4llu ms %4.1f%%  first %7.3f s (%5.1f%%)  repeat %7.3f s (%5.1f%%)  "
           "saved %.0f Mbit/s %.1f ms\n",
           (unsigned long long)(link_bps / 1000000), (double)bytes / 1e6,
           (unsigned long long)rtt_ms, loss * 100, first,
           100 * ideal / first, repeat, 100 * ideal / repeat, (double)saved.rate_bps / 1e6,
           (double)saved.rtt_ns / 1e6);
}

int main(int argc, char **argv)
{
    uint64_t sizes[] = {113 * UINT64_C(1000000), UINT64_C(1) << 30};
    size_t n = 2;
    if (argc > 1) {
        sizes[0] = strtoull(argv[1], NULL, 10);
        n = 1;
    }
    for (size_t i = 0; i < n; i++) {
        profile(GBIT, sizes[i], 150, 0.0);
        profile(GBIT, sizes[i], 150, 0.01);
    }
    profile(MBIT100, sizes[0], 600, 0.0);
    profile(MBIT100, sizes[0], 600, 0.005);
    return 0;
}
