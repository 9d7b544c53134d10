/* RFC 9002 section 5 RTT estimation (aftp_rtt.h). */
#include "common/aftp_rtt.h"

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

void aftp_rtt_init(aftp_rtt *r, uint64_t initial_ns)
{
    r->initial = initial_ns;
    r->latest = 0;
    r->min = 0;
    r->smoothed = 0;
    r->var = 0;
    r->has_sample = 0;
}

void aftp_rtt_sample(aftp_rtt *r, uint64_t rtt_ns, uint64_t ack_delay_ns)
{
    r->latest = rtt_ns;
    if (!r->has_sample) {
        r->has_sample = 1;
        r->min = rtt_ns;
        r->smoothed = rtt_ns;
        r->var = rtt_ns / 2;
        return;
    }
    if (rtt_ns < r->min)
        r->min = rtt_ns;
    /* The peer's delay is only subtracted when that cannot push the
     * sample below the minimum: a bogus delay must not shrink the RTT. */
    uint64_t adjusted = rtt_ns;
    if (rtt_ns >= r->min + ack_delay_ns)
        adjusted = rtt_ns - ack_delay_ns;
    uint64_t dev = r->smoothed > adjusted ? r->smoothed - adjusted : adjusted - r->smoothed;
    r->var = (3 * r->var + dev) / 4;
    r->smoothed = (7 * r->smoothed + adjusted) / 8;
}

uint64_t aftp_rtt_pto(const aftp_rtt *r)
{
    if (!r->has_sample)
        return 2 * r->initial;
    return r->smoothed + max_u64(4 * r->var, AFTP_RTT_GRANULARITY_NS);
}

uint64_t aftp_rtt_loss_delay(const aftp_rtt *r)
{
    uint64_t base = r->has_sample ? max_u64(r->smoothed, r->latest) : r->initial;
    return max_u64(base + base / 8, AFTP_RTT_GRANULARITY_NS);
}

uint64_t aftp_rtt_pto_backoff(const aftp_rtt *r, unsigned backoff)
{
    uint64_t span = aftp_rtt_pto(r);
    for (unsigned i = 0; i < backoff && span < AFTP_RTT_MAX_BACKOFF_NS; i++)
        span *= 2;
    return span < AFTP_RTT_MAX_BACKOFF_NS ? span : AFTP_RTT_MAX_BACKOFF_NS;
}
