/* Flows sharing one simulated bottleneck (sim_flows.h). */
#include "sim_flows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"
#include "sim_tcp.h"

#define SIM_FLOWS_MS UINT64_C(1000000)
#define SIM_FLOWS_S (1000 * SIM_FLOWS_MS)
#define PATTERN_PERIOD 65536u
#define SENDER_ID UINT32_C(0x11111100)   /* + flow index: ids route datagrams */
#define RECEIVER_ID UINT32_C(0x22222200)
#define DATAGRAM 1452u

/* ---- pattern storage: every offset views the same seeded bytes ---- */

/* Views start anywhere in the period and reach this far past it: a
 * datagram's payload (sender) or a read-back chunk (receiver). */
#define PATTERN_VIEW_MAX (UINT64_C(1) << 20)
static uint8_t pattern[PATTERN_PERIOD + PATTERN_VIEW_MAX];

static void pattern_fill(void)
{
    uint64_t rng = 7;
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (uint8_t)sim_rand(&rng);
}

static int pattern_view(void *user, uint32_t file_id, uint64_t off, size_t len,
                        const uint8_t **out)
{
    (void)user;
    (void)file_id;
    if (len > PATTERN_VIEW_MAX)
        return AFTP_ERR_INVALID_ARGUMENT;
    *out = pattern + off % PATTERN_PERIOD;
    return AFTP_OK;
}

static int pattern_open(void *user, const aftp_file_info *info)
{
    (void)user;
    (void)info;
    return AFTP_OK;
}

static int pattern_write(void *user, uint32_t file_id, uint64_t off, const uint8_t *data,
                         size_t len)
{
    (void)user;
    (void)file_id;
    (void)off;
    (void)data;
    (void)len;
    return AFTP_OK;
}

static int pattern_close(void *user, uint32_t file_id, int commit)
{
    (void)user;
    (void)file_id;
    (void)commit;
    return AFTP_OK;
}

static const aftp_storage_ops pattern_storage = {
    .view = pattern_view, .open = pattern_open, .write = pattern_write, .close = pattern_close};

/* ---- configuration ---- */

void sim_flows_default(sim_flows_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->nflows = 1;
    c->flow[0] = (sim_flow_cfg){.policy = AFTP_CC_FAIR, .rate_bps = UINT64_C(1000000000),
                                .file_size = 50 * 1000 * 1000};
    /* One BDP of queue: 100 Mbit/s x 40 ms = 500 kB. */
    c->fwd = (sim_link_cfg){.rate_bps = 100 * 1000 * 1000, .delay_ns = 20 * SIM_FLOWS_MS,
                            .queue_bytes = 500 * 1000};
    c->rev = (sim_link_cfg){.delay_ns = 20 * SIM_FLOWS_MS};
    c->seed = 1;
    c->bucket_ns = 100 * SIM_FLOWS_MS;
    c->stop_ns = 60 * SIM_FLOWS_S;
}

/* ---- the run ---- */

typedef struct flow_run {
    int started;
    aftp_sender *snd;          /* aftp flows */
    aftp_receiver *rcv;
    sim_tcp *tcp;              /* TCP flows */
    sim_link rev;
    uint64_t last_delivered, last_wire;
    int held;                  /* paced at most held_rate_bps until held_until_ns */
} flow_run;

typedef struct flows_world {
    const sim_flows_cfg *cfg;
    sim_flows_result *res;
    flow_run run[SIM_FLOWS_MAX];
    sim_link fwd;
    uint64_t bucket;           /* buckets recorded so far */
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
} flows_world;

static void start_aftp(flows_world *w, int i, uint64_t now)
{
    const sim_flow_cfg *fc = &w->cfg->flow[i];
    sim_flow_result *fr = &w->res->flow[i];
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    sim_engine_settings(&ss, &fr->snd_side, &rs, &fr->rcv_side);
    ss.conn_id = SENDER_ID + (uint32_t)i;
    rs.conn_id = RECEIVER_ID + (uint32_t)i;
    ss.storage = rs.storage = &pattern_storage;
    ss.policy = fc->policy;
    ss.rate_bps = fc->rate_bps;
    ss.max_rate_bps = fc->max_rate_bps;
    ss.min_rate_bps = fc->min_rate_bps;
    ss.idle_timeout_ns = rs.idle_timeout_ns = 30 * SIM_FLOWS_S;
    flow_run *fl = &w->run[i];
    if (aftp_sender_new(&ss, now, &fl->snd) != AFTP_OK ||
        aftp_receiver_new(&rs, now, &fl->rcv) != AFTP_OK)
        abort();
    aftp_file_info info = {.file_id = 1, .size = fc->file_size, .mode = 0644, .path = "flow.bin"};
    if (aftp_sender_add_file(fl->snd, &info) != AFTP_OK)
        abort();
    aftp_sender_finish(fl->snd);
    fl->held = fc->held_until_ns > now;
    if (fl->held &&
        aftp_sender_set_rate_limits(fl->snd, fc->min_rate_bps, fc->held_rate_bps) != AFTP_OK)
        abort();
}

static void start_flow(flows_world *w, int i, uint64_t now)
{
    const sim_flow_cfg *fc = &w->cfg->flow[i];
    flow_run *fl = &w->run[i];
    if (fc->kind == SIM_FLOW_AFTP) {
        start_aftp(w, i, now);
    } else {
        fl->tcp = malloc(sizeof *fl->tcp);
        if (fl->tcp == NULL)
            abort();
        sim_tcp_init(fl->tcp, fc->kind == SIM_FLOW_RENO ? SIM_TCP_RENO : SIM_TCP_CUBIC,
                     (uint8_t)i, fc->file_size, now);
    }
    sim_link_init(&fl->rev, &w->cfg->rev, w->cfg->seed * 16 + (uint64_t)i + 2);
    fl->started = 1;
}

/* The flow a datagram belongs to: TCP packets say it, aftp's carry it in
 * the low byte of their connection id. */
static int flow_of(const sim_pkt *p)
{
    int tcp = sim_tcp_flow_of(p->data, p->len);
    if (tcp >= 0)
        return tcp;
    aftp_wire_header hdr;
    if (aftp_wire_header_decode(p->data, p->len, &hdr) != AFTP_OK)
        return -1;
    return (int)(hdr.conn_id & 0xff);
}

/* A TCP receiver answers each data packet at once. */
static void tcp_receive(flows_world *w, flow_run *fl, uint64_t now, const sim_pkt *p)
{
    aftp_datagram ack;
    sim_tcp_receive(fl->tcp, p->data, p->len, w->buf, sizeof w->buf, &ack);
    if (ack.head_len)
        sim_link_send(&fl->rev, now, &ack);
}

static void deliver(flows_world *w, uint64_t now)
{
    while (sim_link_next(&w->fwd) <= now) {
        sim_pkt p = sim_link_pop(&w->fwd);
        int i = flow_of(&p);
        flow_run *fl = i >= 0 && i < w->cfg->nflows && w->run[i].started ? &w->run[i] : NULL;
        if (fl != NULL && fl->tcp != NULL)
            tcp_receive(w, fl, now, &p);
        else if (fl != NULL)
            aftp_receiver_read(fl->rcv, now, p.data, p.len);
        free(p.data);
    }
    for (int i = 0; i < w->cfg->nflows; i++) {
        flow_run *fl = &w->run[i];
        while (fl->started && sim_link_next(&fl->rev) <= now) {
            sim_pkt p = sim_link_pop(&fl->rev);
            if (fl->tcp != NULL)
                sim_tcp_on_ack(fl->tcp, now, p.data, p.len);
            else
                aftp_sender_read(fl->snd, now, p.data, p.len);
            free(p.data);
        }
    }
}

/* Data (aftp DATA or a TCP data packet) enters the bottleneck: note the
 * queueing delay it will meet. */
static void send_forward(flows_world *w, uint64_t now, const aftp_datagram *dg)
{
    uint64_t wait = w->fwd.busy_until > now ? w->fwd.busy_until - now : 0;
    uint64_t drops = w->fwd.queue_drops;
    sim_link_send(&w->fwd, now, dg);
    int tcp = sim_tcp_flow_of(dg->head, dg->head_len) >= 0;
    int is_data = tcp || (dg->head_len > 1 && dg->head[1] == AFTP_WIRE_DATA);
    if (is_data && w->fwd.queue_drops == drops && now >= w->cfg->qdelay_from_ns) {
        uint64_t bin = wait / SIM_QDELAY_BIN_NS;
        w->res->qdelay_hist[bin < SIM_QDELAY_BINS ? bin : SIM_QDELAY_BINS - 1]++;
    }
}

static void run_flow(flows_world *w, flow_run *fl, uint64_t now)
{
    aftp_datagram dg;
    if (fl->tcp != NULL) {
        sim_tcp_handle_expiry(fl->tcp, now);
        while (sim_tcp_write(fl->tcp, now, w->buf, sizeof w->buf, &dg) == 1)
            send_forward(w, now, &dg);
        return;
    }
    if (now >= aftp_sender_expiry(fl->snd))
        aftp_sender_handle_expiry(fl->snd, now);
    while (aftp_sender_write(fl->snd, now, w->buf, sizeof w->buf, &dg) == 1)
        send_forward(w, now, &dg);
    if (now >= aftp_receiver_expiry(fl->rcv))
        aftp_receiver_handle_expiry(fl->rcv, now);
    while (aftp_receiver_write(fl->rcv, now, w->buf, sizeof w->buf, &dg) == 1)
        sim_link_send(&fl->rev, now, &dg);
}

/* A flow's sender stats and the distinct payload its receiver has;
 * TCP flows fill what they have: bytes, the window as a pacing rate, and
 * repairs. */
static void flow_stats(const flow_run *fl, aftp_stats *s, uint64_t *delivered)
{
    memset(s, 0, sizeof *s);
    if (fl->tcp == NULL) {
        aftp_stats r;
        aftp_sender_get_stats(fl->snd, s);
        aftp_receiver_get_stats(fl->rcv, &r);
        *delivered = r.payload_bytes_received;
        return;
    }
    const sim_tcp *t = fl->tcp;
    *delivered = t->delivered * SIM_TCP_PAYLOAD;
    s->wire_bytes_sent = t->wire_bytes_sent;
    s->payload_bytes_sent = t->next_tx * SIM_TCP_PAYLOAD;
    s->payload_bytes_retransmitted = t->retransmits * SIM_TCP_PAYLOAD;
    s->path_min_rtt_ns = t->min_rtt_ns;
    s->inflight_packets = t->inflight;
    s->inflight_cap_packets = (uint64_t)t->cwnd;
    s->congestion_events = t->loss_events;
    if (t->srtt_ns)
        s->pacing_rate_bps = (uint64_t)(t->cwnd * SIM_TCP_PACKET * 8 * 1e9 / (double)t->srtt_ns);
}

/* Closes every bucket that ended by `now` with the counters' growth. */
static void record(flows_world *w, uint64_t now)
{
    while (w->bucket < w->res->nbuckets && now >= (w->bucket + 1) * w->cfg->bucket_ns) {
        for (int i = 0; i < w->cfg->nflows; i++) {
            flow_run *fl = &w->run[i];
            if (!fl->started)
                continue;
            aftp_stats s;
            uint64_t delivered;
            flow_stats(fl, &s, &delivered);
            w->res->flow[i].delivered[w->bucket] = delivered - fl->last_delivered;
            w->res->flow[i].wire_sent[w->bucket] = s.wire_bytes_sent - fl->last_wire;
            w->res->flow[i].series[w->bucket] = s;
            fl->last_delivered = delivered;
            fl->last_wire = s.wire_bytes_sent;
        }
        w->bucket++;
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t next_event(flows_world *w)
{
    uint64_t t = sim_link_next(&w->fwd);
    for (int i = 0; i < w->cfg->nflows; i++) {
        flow_run *fl = &w->run[i];
        if (!fl->started) {
            t = min_u64(t, w->cfg->flow[i].start_ns);
            continue;
        }
        t = min_u64(t, sim_link_next(&fl->rev));
        if (fl->tcp != NULL) {
            t = min_u64(t, sim_tcp_expiry(fl->tcp));
            continue;
        }
        if (fl->held)
            t = min_u64(t, w->cfg->flow[i].held_until_ns);
        t = min_u64(t, aftp_sender_expiry(fl->snd));
        t = min_u64(t, aftp_receiver_expiry(fl->rcv));
    }
    return t;
}

static int all_closed(flows_world *w)
{
    for (int i = 0; i < w->cfg->nflows; i++) {
        flow_run *fl = &w->run[i];
        if (!fl->started)
            return 0;
        if (fl->tcp != NULL ? !sim_tcp_done(fl->tcp)
                            : aftp_sender_state(fl->snd) != AFTP_STATE_CLOSED ||
                                  aftp_receiver_state(fl->rcv) != AFTP_STATE_CLOSED)
            return 0;
    }
    return 1;
}

/* A held flow's limits are lifted to its configured ones. */
static void release(flows_world *w, int i, uint64_t now)
{
    const sim_flow_cfg *fc = &w->cfg->flow[i];
    flow_run *fl = &w->run[i];
    if (!fl->held || now < fc->held_until_ns)
        return;
    fl->held = 0;
    if (aftp_sender_set_rate_limits(fl->snd, fc->min_rate_bps, fc->max_rate_bps) != AFTP_OK)
        abort();
}

static void step(flows_world *w, uint64_t now)
{
    for (int i = 0; i < w->cfg->nflows; i++) {
        if (!w->run[i].started && now >= w->cfg->flow[i].start_ns)
            start_flow(w, i, now);
        release(w, i, now);
    }
    deliver(w, now);
    record(w, now);
    for (int i = 0; i < w->cfg->nflows; i++)
        if (w->run[i].started)
            run_flow(w, &w->run[i], now);
}

static void finish(flows_world *w, uint64_t now)
{
    record(w, now);
    w->res->end_ns = now;
    w->res->queue_drops = w->fwd.queue_drops;
    w->res->channel_losses = w->fwd.lost;
    for (int i = 0; i < w->cfg->nflows; i++) {
        flow_run *fl = &w->run[i];
        sim_flow_result *fr = &w->res->flow[i];
        if (!fl->started)
            continue;
        sim_link_free(&fl->rev);
        if (fl->tcp != NULL) {
            uint64_t delivered;
            flow_stats(fl, &fr->snd, &delivered);
            sim_tcp_free(fl->tcp);
            free(fl->tcp);
            continue;
        }
        fr->snd_state = aftp_sender_state(fl->snd);
        fr->snd_error = aftp_sender_error(fl->snd);
        fr->rcv_error = aftp_receiver_error(fl->rcv);
        aftp_sender_get_stats(fl->snd, &fr->snd);
        aftp_receiver_get_stats(fl->rcv, &fr->rcv);
        aftp_sender_del(fl->snd);
        aftp_receiver_del(fl->rcv);
    }
    sim_link_free(&w->fwd);
}

void sim_flows_run(const sim_flows_cfg *cfg, sim_flows_result *out)
{
    static int pattern_ready;
    if (!pattern_ready) {
        pattern_fill();
        pattern_ready = 1;
    }
    memset(out, 0, sizeof *out);
    out->nbuckets = cfg->stop_ns / cfg->bucket_ns + 1;
    for (int i = 0; i < cfg->nflows; i++) {
        sim_flow_result *fr = &out->flow[i];
        fr->delivered = calloc(out->nbuckets, sizeof *fr->delivered);
        fr->wire_sent = calloc(out->nbuckets, sizeof *fr->wire_sent);
        fr->series = calloc(out->nbuckets, sizeof *fr->series);
        if (fr->delivered == NULL || fr->wire_sent == NULL || fr->series == NULL)
            abort();
        fr->snd_side = (sim_side){.clock = &out->clock};
        fr->rcv_side = (sim_side){.clock = &out->clock};
    }
    flows_world w = {.cfg = cfg, .res = out};
    sim_link_init(&w.fwd, &cfg->fwd, cfg->seed * 16 + 1);
    uint64_t now = 0;
    for (;;) {
        out->clock = now;
        step(&w, now);
        if (all_closed(&w))
            break;
        uint64_t next = next_event(&w);
        if (next > cfg->stop_ns)
            break;
        now = next > now ? next : now;
    }
    finish(&w, now);
}

void sim_flows_free(sim_flows_result *r)
{
    for (int i = 0; i < SIM_FLOWS_MAX; i++) {
        free(r->flow[i].delivered);
        free(r->flow[i].wire_sent);
        free(r->flow[i].series);
    }
}

/* ---- figures ---- */

uint64_t sim_flow_delivered(const sim_flows_result *r, int flow, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (uint64_t b = from; b < to && b < r->nbuckets; b++)
        sum += r->flow[flow].delivered[b];
    return sum;
}

double sim_flow_rate(const sim_flows_result *r, const sim_flows_cfg *c, int flow, uint64_t from_ns,
                     uint64_t to_ns)
{
    uint64_t from = from_ns / c->bucket_ns, to = to_ns / c->bucket_ns;
    if (to <= from)
        return 0.0;
    double secs = (double)((to - from) * c->bucket_ns) / 1e9;
    return (double)sim_flow_delivered(r, flow, from, to) * 8.0 / secs;
}

double sim_flows_capacity(const sim_flows_cfg *c)
{
    double block = (double)(DATAGRAM - AFTP_WIRE_DATA_OVERHEAD);
    double wire = block + AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED;
    double ge = c->fwd.ge_enter_bad > 0
                    ? c->fwd.ge_enter_bad / (c->fwd.ge_enter_bad + c->fwd.ge_leave_bad) *
                          c->fwd.ge_loss_bad
                    : 0.0;
    return (double)c->fwd.rate_bps * block / wire * (1.0 - c->fwd.loss) * (1.0 - ge);
}

uint64_t sim_flows_qdelay_quantile(const sim_flows_result *r, double fraction)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < SIM_QDELAY_BINS; i++)
        total += r->qdelay_hist[i];
    for (int i = 0; i < SIM_QDELAY_BINS; i++) {
        seen += r->qdelay_hist[i];
        if ((double)seen >= fraction * (double)total)
            return (uint64_t)(i + 1) * SIM_QDELAY_BIN_NS;
    }
    return SIM_QDELAY_BINS * SIM_QDELAY_BIN_NS;
}

uint64_t sim_flow_ramp_ns(const sim_flows_result *r, const sim_flows_cfg *c, int flow,
                          double rate_bps)
{
    uint64_t first = c->flow[flow].start_ns / c->bucket_ns;
    double need = rate_bps * (double)c->bucket_ns / 8e9;
    for (uint64_t b = first; b < r->nbuckets; b++)
        if ((double)r->flow[flow].delivered[b] >= need)
            return (b + 1) * c->bucket_ns - c->flow[flow].start_ns;
    return UINT64_MAX;
}

double sim_flow_peak_rate(const sim_flows_result *r, const sim_flows_cfg *c, int flow,
                          uint64_t window_ns)
{
    uint64_t n = window_ns / c->bucket_ns;
    double peak = 0.0;
    for (uint64_t b = 0; b + n <= r->nbuckets; b++) {
        uint64_t sum = 0;
        for (uint64_t k = b; k < b + n; k++)
            sum += r->flow[flow].wire_sent[k];
        double bps = (double)sum * 8.0 / ((double)window_ns / 1e9);
        peak = bps > peak ? bps : peak;
    }
    return peak;
}

double sim_flows_jain(const sim_flows_result *r, const sim_flows_cfg *c, uint64_t from_ns,
                      uint64_t to_ns)
{
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < c->nflows; i++) {
        double x = sim_flow_rate(r, c, i, from_ns, to_ns);
        sum += x;
        sq += x * x;
    }
    return sq > 0.0 ? sum * sum / ((double)c->nflows * sq) : 0.0;
}
