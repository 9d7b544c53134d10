/*
 * One whole FAIR transfer through the engines on a 1 Gbit/s path with one
 * BDP of queue (no cipher: the virtual clock does not see CPU), started
 * from nothing or from a path memory (Careful Resume): for the start-up
 * figures (sim_bench_ramp) and the tests of a repeat transfer.
 */
#ifndef SIM_RAMP_H
#define SIM_RAMP_H

#include <stdint.h>

#include "aftp/aftp_engine.h"

#define SIM_RAMP_LINK_BPS UINT64_C(1000000000)

typedef struct sim_ramp_memory {
    uint64_t rate_bps, rtt_ns; /* 0: a first transfer */
} sim_ramp_memory;

/* Virtual seconds from the first datagram until both sides closed, or -1
 * when the transfer failed; the sender's final stats in *out (what a path
 * memory keeps: delivery_rate_bps, path_min_rtt_ns). */
double sim_ramp_transfer(uint64_t bytes, uint64_t rtt_ms, double loss, const sim_ramp_memory *m,
                         aftp_stats *out);
/* The same on a link of link_bps (one BDP of queue). */
double sim_ramp_transfer_on(uint64_t link_bps, uint64_t bytes, uint64_t rtt_ms, double loss,
                            const sim_ramp_memory *m, aftp_stats *out);

#endif /* SIM_RAMP_H */
