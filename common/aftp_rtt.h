/*
 * Round-trip time estimator (RFC 9002 section 5): latest, minimum and
 * smoothed RTT with its variation, and the timeouts derived from them.
 * All times in nanoseconds.
 */
#ifndef AFTP_RTT_H
#define AFTP_RTT_H

#include <stdint.h>

#define AFTP_RTT_GRANULARITY_NS UINT64_C(1000000) /* 1 ms timer granularity */
#define AFTP_RTT_MAX_BACKOFF_NS UINT64_C(2000000000) /* backed-off timers stop growing at 2 s */

typedef struct aftp_rtt {
    uint64_t initial;
    uint64_t latest;
    uint64_t min;
    uint64_t smoothed;
    uint64_t var;
    int has_sample;
} aftp_rtt;

void aftp_rtt_init(aftp_rtt *r, uint64_t initial_ns);
/* One sample: time from sending a packet to receiving its acknowledgement,
 * and the delay the peer reports between receiving it and acknowledging. */
void aftp_rtt_sample(aftp_rtt *r, uint64_t rtt_ns, uint64_t ack_delay_ns);

/* Probe timeout: srtt + max(4 * rttvar, granularity); 2 * initial before
 * the first sample. */
uint64_t aftp_rtt_pto(const aftp_rtt *r);
/* The PTO doubled `backoff` times (consecutive expiries without an
 * answer), capped at AFTP_RTT_MAX_BACKOFF_NS. */
uint64_t aftp_rtt_pto_backoff(const aftp_rtt *r, unsigned backoff);
/* Time after which an unacknowledged packet counts as lost:
 * 9/8 * max(srtt, latest_rtt), at least the granularity. */
uint64_t aftp_rtt_loss_delay(const aftp_rtt *r);

#endif /* AFTP_RTT_H */
