/* Token-bucket pacing as a cursor in time (aftp_pacer.h). */
#include "common/aftp_pacer.h"

#define NS_PER_S UINT64_C(1000000000)

uint64_t aftp_pacer_tx_time(const aftp_pacer *p, uint64_t bytes)
{
    /* 128-bit intermediate: bytes * 8e9 overflows 64 bits past ~2 GB. */
    return (uint64_t)((unsigned __int128)bytes * 8 * NS_PER_S / p->rate_bps);
}

void aftp_pacer_set_rate(aftp_pacer *p, uint64_t rate_bps)
{
    p->rate_bps = rate_bps == 0 ? 1 : rate_bps;
    uint64_t burst = aftp_pacer_tx_time(p, p->burst_bytes);
    p->depth_ns = burst > AFTP_PACER_MIN_DEPTH_NS ? burst : AFTP_PACER_MIN_DEPTH_NS;
}

void aftp_pacer_set_burst(aftp_pacer *p, uint32_t burst_bytes)
{
    p->burst_bytes = burst_bytes;
    aftp_pacer_set_rate(p, p->rate_bps);
}

void aftp_pacer_init(aftp_pacer *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now_ns)
{
    p->burst_bytes = burst_bytes;
    aftp_pacer_set_rate(p, rate_bps);
    p->cursor_ns = now_ns > p->depth_ns ? now_ns - p->depth_ns : 0;
}

uint64_t aftp_pacer_rate(const aftp_pacer *p)
{
    return p->rate_bps;
}

int aftp_pacer_ready(const aftp_pacer *p, uint64_t now_ns)
{
    return p->cursor_ns <= now_ns;
}

uint64_t aftp_pacer_next_send(const aftp_pacer *p)
{
    return p->cursor_ns;
}

void aftp_pacer_on_send(aftp_pacer *p, uint64_t now_ns, uint64_t bytes)
{
    /* Unused credit older than the bucket depth is forfeited. */
    uint64_t floor = now_ns > p->depth_ns ? now_ns - p->depth_ns : 0;
    if (p->cursor_ns < floor)
        p->cursor_ns = floor;
    p->cursor_ns += aftp_pacer_tx_time(p, bytes);
}
