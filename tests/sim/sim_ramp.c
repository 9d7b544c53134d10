/* Whole transfers for the start-up figures and tests (sim_ramp.h). */
#include "sim_ramp.h"

#include "sim_run.h"

static void recall(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const sim_ramp_memory *m = ctx;
    (void)r;
    s->resume_rate_bps = m->rate_bps;
    s->resume_rtt_ns = m->rtt_ns;
}

double sim_ramp_transfer(uint64_t bytes, uint64_t rtt_ms, double loss, const sim_ramp_memory *m,
                         aftp_stats *out)
{
    return sim_ramp_transfer_on(SIM_RAMP_LINK_BPS, bytes, rtt_ms, loss, m, out);
}

double sim_ramp_transfer_on(uint64_t link_bps, uint64_t bytes, uint64_t rtt_ms, double loss,
                            const sim_ramp_memory *m, aftp_stats *out)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_wan(&c, link_bps, rtt_ms, loss);
    c.file_size = bytes;
    c.cipher = AFTP_CIPHER_NONE;
    c.tune = recall;
    c.tune_ctx = (void *)m;
    sim_run(&c, &r);
    *out = r.snd;
    double s = r.snd_error == AFTP_OK && !r.stuck ? (double)r.end_ns / 1e9 : -1.0;
    sim_result_free(&r);
    return s;
}
