#include "aftp_meter.h"

#include "aftp/aftp_client.h"

void aftp_meter_progress(const aftp_meter *m, const aftp_meter_reading *r, const aftp_stats *st,
                         const char *name, aftp_progress *out)
{
    aftp_progress p = {.name = name, .size = m->size, .bytes_done = r->done,
                       .seconds = r->seconds, .goodput_bps = r->rate_bps, .eta_seconds = r->eta_s,
                       .rate_bps = st->pacing_rate_bps,
                       .loss = (double)st->recent_loss_ppm / 1e6,
                       .rtt_ms = (double)st->srtt_ns / 1e6,
                       .min_rtt_ms = (double)st->path_min_rtt_ns / 1e6,
                       .queue_ms = (double)st->queue_delay_ns / 1e6};
    *out = p;
}

void aftp_meter_start(aftp_meter *m, uint64_t size, uint64_t base, uint64_t now_ns)
{
    m->size = size;
    m->base = base;
    m->start_ns = m->last_ns = now_ns;
    m->last_done = 0;
}

uint64_t aftp_meter_done(const aftp_meter *m, uint64_t count)
{
    uint64_t done = count > m->base ? count - m->base : 0;
    return done > m->size ? m->size : done;
}

int aftp_meter_read(aftp_meter *m, uint64_t count, uint64_t now_ns, aftp_meter_reading *out)
{
    if (now_ns <= m->last_ns)
        return 0;
    uint64_t done = aftp_meter_done(m, count);
    /* a count can only grow; a file started anew reads from zero */
    uint64_t moved = done > m->last_done ? done - m->last_done : 0;
    out->done = done;
    out->rate_bps = (double)moved * 8 / ((double)(now_ns - m->last_ns) / 1e9);
    out->eta_s = out->rate_bps > 0 ? (double)(m->size - done) * 8 / out->rate_bps : -1;
    out->seconds = (double)(now_ns - m->start_ns) / 1e9;
    m->last_done = done;
    m->last_ns = now_ns;
    return 1;
}
