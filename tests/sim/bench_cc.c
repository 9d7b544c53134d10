/*
 * Rate-control figures on the simulated path, not a test: for each WAN
 * profile (reduced durations), utilisation of the loss-adjusted capacity,
 * retransmitted share, p95 queueing delay at the bottleneck, ramp-up time
 * to 90%, and for two flows Jain's index and the late joiner's
 * convergence. One line per profile.
 *   sim_bench_cc [seconds per run (default 30) [profile name part: run it
 *                 alone and print its time series]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_flows.h"

#define MS UINT64_C(1000000)
#define S (1000 * MS)
#define MBIT UINT64_C(1000000)
#define GBIT (1000 * MBIT)

static uint64_t seconds = 30;
static const char *only; /* run only profiles whose name contains it, traced */

static void print_trace(const sim_flows_result *r, const sim_flows_cfg *c)
{
    for (uint64_t b = 0; only != NULL && b < r->nbuckets; b++)
        for (int i = 0; i < c->nflows; i++) {
            const aftp_stats *s = &r->flow[i].series[b];
            printf("  t=%5.1f f%d got= %7.1f rate= %7.1f bw= %7.1f q= %6.2f minrtt=%6.1f "
                   "loss=%.4f/%.4f mode=%d cong=%llu infl=%llu/%llu\n",
                   (double)(b + 1) * (double)c->bucket_ns / 1e9, i,
                   (double)r->flow[i].delivered[b] * 8e9 / (double)c->bucket_ns / 1e6,
                   (double)s->pacing_rate_bps / 1e6, (double)s->delivery_rate_bps / 1e6,
                   (double)s->queue_delay_ns / 1e6, (double)s->path_min_rtt_ns / 1e6,
                   (double)s->loss_ppm / 1e6, (double)s->recent_loss_ppm / 1e6, s->cc_mode,
                   (unsigned long long)s->congestion_events,
                   (unsigned long long)s->inflight_packets,
                   (unsigned long long)s->inflight_cap_packets);
        }
}

/* A profile: bottleneck rate, RTT, random loss, bursts; queue of one BDP. */
static void path(sim_flows_cfg *c, uint64_t rate, uint64_t rtt_ms, double loss)
{
    sim_flows_default(c);
    c->fwd.rate_bps = rate;
    c->fwd.delay_ns = rtt_ms * MS / 2;
    c->rev.delay_ns = rtt_ms * MS / 2;
    c->fwd.queue_bytes = rate / 8 * rtt_ms / 1000;
    c->fwd.loss = loss;
    c->stop_ns = seconds * S;
    /* Steady state: startup (~10 RTTs) and its queue are over by then. */
    c->qdelay_from_ns = 2 * S + 10 * rtt_ms * MS;
    c->flow[0].file_size = rate / 8 * seconds * 2; /* never ends within the run */
}

static double retx_share(const aftp_stats *s)
{
    return s->payload_bytes_sent ? (double)s->payload_bytes_retransmitted /
                                       (double)s->payload_bytes_sent
                                 : 0.0;
}

/* Share of the DATA sent that the bottleneck queue dropped. */
static double drop_share(const sim_flows_result *r)
{
    uint64_t sent = r->flow[0].snd.packets_sent + r->flow[1].snd.packets_sent;
    return sent ? (double)r->queue_drops / (double)sent : 0.0;
}

static void header(void)
{
    printf("%-28s %7s %7s %7s %7s %8s %8s %7s %7s\n", "profile", "util%", "retx%", "loss%",
           "qdrop%", "p95q_ms", "ramp_s", "jain", "join_s");
}

static void one_flow(const char *name, sim_flows_cfg *c)
{
    sim_flows_result r;
    if (only != NULL && strstr(name, only) == NULL)
        return;
    sim_flows_run(c, &r);
    print_trace(&r, c);
    double cap = sim_flows_capacity(c);
    double util = sim_flow_rate(&r, c, 0, 2 * S, c->stop_ns) / cap;
    uint64_t ramp = sim_flow_ramp_ns(&r, c, 0, 0.9 * cap);
    printf("%-28s %7.1f %7.2f %7.2f %7.2f %8.2f %8.2f %7s %7s\n", name, 100 * util,
           100 * retx_share(&r.flow[0].snd), 100.0 * (double)r.flow[0].snd.loss_ppm / 1e6,
           100 * drop_share(&r),
           (double)sim_flows_qdelay_quantile(&r, 0.95) / 1e6,
           ramp == UINT64_MAX ? -1.0 : (double)ramp / 1e9, "-", "-");
    sim_flows_free(&r);
}

/* Two FAIR flows, the second joining after `join_s`: Jain's index over the
 * time both run, and how long the joiner took to reach 80% of its share.
 * `hold_ns`: the joiner is held to a tenth of the link that long, then let
 * go (the steady state's pull towards equal shares, timed from then). */
static void two_flows(const char *name, sim_flows_cfg *c, uint64_t join_ns, uint64_t hold_ns)
{
    sim_flows_result r;
    if (only != NULL && strstr(name, only) == NULL)
        return;
    c->nflows = 2;
    c->flow[1] = c->flow[0];
    c->flow[1].start_ns = join_ns;
    c->flow[1].held_rate_bps = c->fwd.rate_bps / 10;
    c->flow[1].held_until_ns = hold_ns ? join_ns + hold_ns : 0;
    sim_flows_run(c, &r);
    print_trace(&r, c);
    double cap = sim_flows_capacity(c);
    double util = (sim_flow_rate(&r, c, 0, join_ns + 2 * S, c->stop_ns) +
                   sim_flow_rate(&r, c, 1, join_ns + 2 * S, c->stop_ns)) / cap;
    double jain = sim_flows_jain(&r, c, join_ns + 5 * S, c->stop_ns);
    uint64_t conv = sim_flow_ramp_ns(&r, c, 1, 0.8 * cap / 2);
    conv = conv == UINT64_MAX || conv < hold_ns ? conv : conv - hold_ns;
    double retx = (retx_share(&r.flow[0].snd) + retx_share(&r.flow[1].snd)) / 2;
    printf("%-28s %7.1f %7.2f %7s %7.2f %8.2f %8s %7.3f %7.2f\n", name, 100 * util, 100 * retx,
           "-", 100 * drop_share(&r),
           (double)sim_flows_qdelay_quantile(&r, 0.95) / 1e6, "-", jain,
           conv == UINT64_MAX ? -1.0 : (double)conv / 1e9);
    sim_flows_free(&r);
}

/* One aftp flow of `policy` and one TCP-like flow of `kind`, started
 * together: each one's rate from 10 s on and TCP's share. */
static void versus_tcp(const char *name, sim_flows_cfg *c, int policy, int kind)
{
    sim_flows_result r;
    if (only != NULL && strstr(name, only) == NULL)
        return;
    c->nflows = 2;
    c->flow[0].policy = policy;
    c->flow[1] = (sim_flow_cfg){.kind = kind};
    sim_flows_run(c, &r);
    print_trace(&r, c);
    double a = sim_flow_rate(&r, c, 0, 10 * S, c->stop_ns);
    double t = sim_flow_rate(&r, c, 1, 10 * S, c->stop_ns);
    printf("%-28s aftp %7.1f Mbit/s  tcp %7.1f Mbit/s  tcp share %5.1f%%  aftp/tcp %5.2f  "
           "util %5.1f%%  p95q %6.2f ms\n",
           name, a / 1e6, t / 1e6, 100 * t / (a + t), t > 0 ? a / t : 0.0,
           100 * (a + t) / sim_flows_capacity(c),
           (double)sim_flows_qdelay_quantile(&r, 0.95) / 1e6);
    sim_flows_free(&r);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = strtoull(argv[1], NULL, 10);
    only = argc > 2 ? argv[2] : NULL;
    sim_flows_cfg c;
    header();
    path(&c, GBIT, 150, 0.0);
    one_flow("1G 150ms 0%", &c);
    path(&c, GBIT, 150, 0.01);
    one_flow("1G 150ms 1%", &c);
    path(&c, GBIT, 300, 0.02);
    one_flow("1G 300ms 2%", &c);
    path(&c, GBIT, 150, 0.0);
    c.fwd.ge_enter_bad = 0.005;
    c.fwd.ge_leave_bad = 0.3;
    c.fwd.ge_loss_bad = 0.5;
    one_flow("1G 150ms GE bursty", &c);
    path(&c, 100 * MBIT, 600, 0.005);
    one_flow("100M 600ms 0.5%", &c);
    path(&c, GBIT, 150, 0.10);
    one_flow("1G 150ms 10%", &c);
    /* netem's reorder: a share of the packets skips the one-way delay,
     * each overtaking some 6,000 at full rate. Not congestion. */
    path(&c, GBIT, 150, 0.0);
    c.fwd.reorder = 0.01;
    c.fwd.reorder_ns = c.fwd.delay_ns;
    c.fwd.reorder_early = 1;
    one_flow("1G 150ms reorder 1%", &c);
    c.fwd.reorder = 0.001;
    one_flow("1G 150ms reorder 0.1%", &c);
    /* A loopback-like path whose bottleneck (a receiver) keeps almost no
     * queue: loss well above the baseline is the only signal. */
    path(&c, GBIT, 1, 0.0);
    c.fwd.delay_ns = c.rev.delay_ns = 50 * 1000;
    c.fwd.queue_bytes = 32 * 1024;
    one_flow("1G 0.1ms 32KB queue", &c);
    path(&c, GBIT, 150, 0.01);
    c.flow[0].policy = AFTP_CC_FIXED;
    c.flow[0].rate_bps = 500 * MBIT;
    one_flow("fixed 500M on 1G 1%", &c);
    path(&c, GBIT, 150, 0.0);
    c.flow[0].max_rate_bps = 300 * MBIT;
    one_flow("max-rate 300M on 1G", &c);
    path(&c, 100 * MBIT, 50, 0.0);
    c.stop_ns = 3 * seconds * S;
    two_flows("2x fair 100M 50ms", &c, 5 * S, 0);
    path(&c, GBIT, 150, 0.0);
    c.stop_ns = 2 * seconds * S;
    two_flows("2x fair 1G 150ms", &c, 5 * S, 0);
    path(&c, GBIT, 150, 0.0);
    c.stop_ns = 2 * seconds * S;
    two_flows("2x fair 1G 150ms held 5s", &c, 5 * S, 5 * S);
    /* The emulated WAN's host stalls: queues of up to 40 ms that no flow
     * built, about twice a second. */
    path(&c, GBIT, 150, 0.0);
    sim_link_wan_stalls(&c.fwd);
    one_flow("1G 150ms stalls", &c);
    c.stop_ns = 2 * seconds * S;
    two_flows("2x fair 1G 150ms stalls", &c, 5 * S, 0);
    path(&c, GBIT, 150, 0.0);
    sim_link_wan_stalls(&c.fwd);
    c.stop_ns = 2 * seconds * S;
    two_flows("2x fair 1G 150ms stalls held", &c, 5 * S, 5 * S);
    static const struct { const char *name; int policy, kind; } vs[] = {
        {"fair vs cubic", AFTP_CC_FAIR, SIM_FLOW_CUBIC}, {"high vs cubic", AFTP_CC_HIGH, SIM_FLOW_CUBIC},
        {"low vs cubic", AFTP_CC_LOW, SIM_FLOW_CUBIC},   {"fair vs reno", AFTP_CC_FAIR, SIM_FLOW_RENO},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s 100M 40ms", vs[i].name);
        path(&c, 100 * MBIT, 40, 0.0);
        c.stop_ns = 2 * seconds * S;
        versus_tcp(name, &c, vs[i].policy, vs[i].kind);
        snprintf(name, sizeof name, "%s 1G 150ms", vs[i].name);
        path(&c, GBIT, 150, 0.0);
        c.stop_ns = 2 * seconds * S;
        versus_tcp(name, &c, vs[i].policy, vs[i].kind);
    }
    return 0;
}
