/*
 * Rate-control simulations: one or two sender/receiver pairs whose DATA
 * shares one bottleneck (sim_link: rate, tail-drop queue, delay, loss),
 * each with its own return path, on a virtual clock. A flow is an aftp
 * session (sender and receiver engines) or a TCP-like flow (sim_tcp.h). Files are long
 * patterns (content checked elsewhere), so runs of many seconds at high
 * rates need no memory for their bytes. The run records, per time bucket
 * and flow, the distinct payload delivered and the wire bytes sent, and a
 * histogram of the queueing delay each DATA packet met at the bottleneck.
 */
#ifndef SIM_FLOWS_H
#define SIM_FLOWS_H

#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "sim_link.h"
#include "sim_storage.h"

#define SIM_FLOWS_MAX 2
#define SIM_QDELAY_BIN_NS UINT64_C(100000)  /* queueing delay histogram: 0.1 ms bins */
#define SIM_QDELAY_BINS 20000               /* up to 2 s */

/* What a flow is. */
enum sim_flow_kind { SIM_FLOW_AFTP = 0, SIM_FLOW_RENO, SIM_FLOW_CUBIC };

typedef struct sim_flow_cfg {
    int kind;                  /* enum sim_flow_kind */
    int policy;                /* enum aftp_cc_policy (aftp flows) */
    uint64_t rate_bps;         /* FIXED rate / starting hint */
    uint64_t max_rate_bps, min_rate_bps;
    uint64_t file_size;        /* TCP: bytes to deliver, 0 = endless */
    uint64_t start_ns;         /* the flow begins (late joiners) */
    uint64_t held_rate_bps;    /* aftp: max rate until held_until_ns (a running */
    uint64_t held_until_ns;    /* session's limits change), max_rate_bps after */
} sim_flow_cfg;

typedef struct sim_flows_cfg {
    int nflows;
    sim_flow_cfg flow[SIM_FLOWS_MAX];
    sim_link_cfg fwd;          /* the shared bottleneck */
    sim_link_cfg rev;          /* each flow's own return path */
    uint64_t seed;
    uint64_t bucket_ns;        /* resolution of the time series */
    uint64_t stop_ns;          /* the run ends here at the latest */
    uint64_t qdelay_from_ns;   /* the delay histogram counts packets sent after this */
} sim_flows_cfg;

typedef struct sim_flow_result {
    sim_side snd_side, rcv_side;
    int snd_error, rcv_error;
    int snd_state;
    aftp_stats snd, rcv;
    uint64_t *delivered;       /* per bucket: distinct payload bytes stored */
    uint64_t *wire_sent;       /* per bucket: sender wire bytes */
    aftp_stats *series;        /* per bucket: the sender's stats at its end (aftp) */
} sim_flow_result;

typedef struct sim_flows_result {
    sim_flow_result flow[SIM_FLOWS_MAX];
    uint64_t nbuckets;
    uint64_t end_ns;
    uint64_t qdelay_hist[SIM_QDELAY_BINS];
    uint64_t queue_drops, channel_losses;
    uint64_t clock;
} sim_flows_result;

/* 100 Mbit/s bottleneck, 40 ms RTT, one-BDP queue, no loss; one FAIR flow
 * of 50 MB; 100 ms buckets; 60 s limit. */
void sim_flows_default(sim_flows_cfg *c);
void sim_flows_run(const sim_flows_cfg *cfg, sim_flows_result *out);
void sim_flows_free(sim_flows_result *r);

/* Bytes a flow delivered (distinct payload) in buckets [from, to). */
uint64_t sim_flow_delivered(const sim_flows_result *r, int flow, uint64_t from, uint64_t to);
/* Mean delivered rate over [from_ns, to_ns), bits/s. */
double sim_flow_rate(const sim_flows_result *r, const sim_flows_cfg *c, int flow, uint64_t from_ns,
                     uint64_t to_ns);
/* Payload rate the bottleneck can deliver: its rate x payload share of a
 * full DATA datagram x (1 - random loss). */
double sim_flows_capacity(const sim_flows_cfg *c);
/* Queueing delay (ns) below which `fraction` of DATA packets stayed. */
uint64_t sim_flows_qdelay_quantile(const sim_flows_result *r, double fraction);
/* First time (ns after the flow's start) one bucket delivered at least
 * `share` of rate_bps; UINT64_MAX: never. */
uint64_t sim_flow_ramp_ns(const sim_flows_result *r, const sim_flows_cfg *c, int flow,
                          double rate_bps);
/* Most wire bits a flow sent in any window of `window_ns` (whole buckets). */
double sim_flow_peak_rate(const sim_flows_result *r, const sim_flows_cfg *c, int flow,
                          uint64_t window_ns);
/* Jain's fairness index of the flows' deliveries over [from_ns, to_ns). */
double sim_flows_jain(const sim_flows_result *r, const sim_flows_cfg *c, uint64_t from_ns,
                      uint64_t to_ns);

#endif /* SIM_FLOWS_H */
