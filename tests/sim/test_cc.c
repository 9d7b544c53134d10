/* aftp_cc, the rate controller, alone: driven by a small packet-level path
 * model (a FIFO bottleneck of fixed rate, one-way delay, seeded random
 * loss, an optional foreign queue) with periodic FEEDBACK on a virtual
 * clock. Filters, startup exit, gain cycle, loss baseline, min-RTT refresh,
 * policies, rate clamps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_cc.h"
#include "sim_link.h"

#define MS UINT64_C(1000000)
#define S (1000 * MS)
#define MBIT 1000000.0
#define PKT 1200u                 /* every packet is a 1200-byte DATA datagram */
#define FEEDBACK_NS (10 * MS)
#define STEP_NS (100 * 1000)      /* the model advances 0.1 ms at a time */
#define PENDING 64

typedef struct pending_fb {
    uint64_t at;
    aftp_cc_feedback fb;
} pending_fb;

typedef struct path {
    double rate_bps;
    uint64_t delay_ns;            /* one way */
    double loss;
    uint64_t foreign_ns;          /* extra queueing delay from other traffic */
    uint64_t buffer_ns;           /* bottleneck queue beyond this is dropped; 0: no limit */
    uint64_t rng;
    uint64_t now, busy_until, next_send, next_fb;
    uint64_t *sent_at, *arrive_at; /* per packet number; arrive 0: lost */
    size_t cap, sent, scan;
    uint64_t received, largest;
    int has_largest;
    pending_fb pend[PENDING];
    size_t pend_head, pend_tail;
    /* observations */
    uint64_t startup_exit_bw;     /* bw when STARTUP ended; 0: still in it */
    uint64_t max_rate, min_rate;  /* pacing rate extremes while observing */
    int saw_mode[AFTP_CC_MODE_PROBE_RTT + 1];
    unsigned dips;                /* DIP phases begun */
    int last_phase;
    uint64_t delivered_since;     /* packets received since path_mark() */
    uint64_t dropped;             /* packets the full bottleneck queue dropped */
    uint64_t reach_round;         /* round at which bw first reached 90% of the link; 0: not yet */
    uint64_t reach_ns;
    uint64_t jump_sent;           /* DATA packets sent at a Careful Resume jump's rate */
    int jumped;                   /* the controller jumped */
} path;

static void path_init(path *p, double rate_bps, uint64_t rtt_ns, double loss, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->rate_bps = rate_bps;
    p->delay_ns = rtt_ns / 2;
    p->loss = loss;
    p->rng = seed;
    p->cap = 1u << 20;
    p->sent_at = calloc(p->cap, sizeof *p->sent_at);
    p->arrive_at = calloc(p->cap, sizeof *p->arrive_at);
    assert_non_null(p->sent_at);
    assert_non_null(p->arrive_at);
    p->next_fb = FEEDBACK_NS;
    p->min_rate = UINT64_MAX;
}

static void path_free(path *p)
{
    free(p->sent_at);
    free(p->arrive_at);
}

static void send_one(path *p, aftp_cc *cc)
{
    assert_true(p->sent < p->cap);
    uint64_t pn = p->sent++;
    uint64_t start = p->busy_until > p->now ? p->busy_until : p->now;
    p->sent_at[pn] = p->now;
    if (cc->resume == AFTP_CC_RESUME_UNVALIDATED || cc->resume == AFTP_CC_RESUME_VALIDATING) {
        p->jumped = 1;
        p->jump_sent++;
    }
    if (p->buffer_ns != 0 && start - p->now > p->buffer_ns) {
        p->dropped++;
        p->arrive_at[pn] = 0;
    } else {
        p->busy_until = start + (uint64_t)(PKT * 8.0 * 1e9 / p->rate_bps);
        int lost = sim_rand_unit(&p->rng) < p->loss;
        p->arrive_at[pn] = lost ? 0 : p->busy_until + p->delay_ns + p->foreign_ns;
    }
    aftp_cc_on_sent(cc, p->now, pn, PKT, 1);
    p->next_send += (uint64_t)(PKT * 8.0 * 1e9 / (double)aftp_cc_rate(cc));
}

/* The receiver: packets that arrived by now, then a FEEDBACK on its way. */
static void receive(path *p)
{
    while (p->scan < p->sent && p->sent_at[p->scan] + p->delay_ns <= p->now) {
        uint64_t at = p->arrive_at[p->scan];
        if (at != 0 && at > p->now)
            break;
        if (at != 0) {
            p->received++;
            p->delivered_since++;
            p->largest = p->scan;
            p->has_largest = 1;
        }
        p->scan++;
    }
    if (p->now < p->next_fb || !p->has_largest)
        return;
    p->next_fb = p->now + FEEDBACK_NS;
    pending_fb *f = &p->pend[p->pend_tail++ % PENDING];
    f->at = p->now + p->delay_ns;
    f->fb = (aftp_cc_feedback){.largest_pn = p->largest, .recv_time_us = p->now / 1000,
                               .ack_delay_ns = p->now - p->arrive_at[p->largest],
                               .packets_received = p->received,
                               .data_sent = p->largest + 1};
}

static void deliver_feedback(path *p, aftp_cc *cc)
{
    while (p->pend_head < p->pend_tail && p->pend[p->pend_head % PENDING].at <= p->now) {
        aftp_cc_feedback fb = p->pend[p->pend_head++ % PENDING].fb;
        fb.now_ns = p->now;
        fb.rtt_ns = p->now - p->sent_at[fb.largest_pn];
        aftp_cc_on_feedback(cc, &fb);
    }
}

static void observe(path *p, const aftp_cc *cc)
{
    uint64_t r = aftp_cc_rate(cc);
    p->max_rate = r > p->max_rate ? r : p->max_rate;
    p->min_rate = r < p->min_rate ? r : p->min_rate;
    p->saw_mode[cc->mode] = 1;
    if (cc->phase == AFTP_CC_PHASE_DIP && p->last_phase != AFTP_CC_PHASE_DIP)
        p->dips++;
    p->last_phase = cc->phase;
    if (p->startup_exit_bw == 0 && cc->mode != AFTP_CC_MODE_STARTUP)
        p->startup_exit_bw = cc->bw_bps;
    if (p->reach_round == 0 && (double)cc->bw_bps >= 0.9 * p->rate_bps)
        p->reach_round = cc->round, p->reach_ns = p->now;
}

static void path_run(path *p, aftp_cc *cc, uint64_t until)
{
    for (; p->now < until; p->now += STEP_NS) {
        deliver_feedback(p, cc);
        receive(p);
        if (p->next_send + MS < p->now)
            p->next_send = p->now - MS; /* 1 ms of credit at most, like the pacer */
        while (p->next_send <= p->now && aftp_cc_may_send(cc))
            send_one(p, cc);
        observe(p, cc);
    }
}

/* Starts watching rates and deliveries afresh. */
static void path_mark(path *p)
{
    p->max_rate = 0;
    p->min_rate = UINT64_MAX;
    p->delivered_since = 0;
    p->dips = 0;
    memset(p->saw_mode, 0, sizeof p->saw_mode);
}

static double delivered_bps(const path *p, uint64_t span_ns)
{
    return (double)p->delivered_since * PKT * 8.0 * 1e9 / (double)span_ns;
}

static void cc_start(aftp_cc *cc, int policy, uint64_t max_rate, uint64_t min_rate)
{
    aftp_cc_config cfg = {.policy = policy, .rate_bps = UINT64_C(1000000000),
                          .min_rate_bps = min_rate, .max_rate_bps = max_rate,
                          .initial_rtt_ns = 100 * MS, .seed = 1};
    aftp_cc_init(cc, &cfg, 0);
}

/* A controller of `policy` on the 100 Mbit/s, 40 ms path, run until
 * `until`. */
static void start_on_path(aftp_cc *cc, path *p, int policy, double loss, uint64_t seed,
                          uint64_t until)
{
    cc_start(cc, policy, 0, 0);
    path_init(p, 100 * MBIT, 40 * MS, loss, seed);
    path_run(p, cc, until);
}

static void test_fixed_holds_its_rate(void **state)
{
    (void)state;
    aftp_cc cc;
    aftp_cc_config cfg = {.policy = AFTP_CC_FIXED, .rate_bps = 50 * 1000 * 1000,
                          .max_rate_bps = 40 * 1000 * 1000, .initial_rtt_ns = 100 * MS};
    aftp_cc_init(&cc, &cfg, 0);
    path p;
    path_init(&p, 30 * MBIT, 40 * MS, 0.2, 3);
    path_run(&p, &cc, 3 * S);
    /* max_rate wins over the fixed rate; neither loss nor a full queue
     * moves it, and nothing caps what is in flight. */
    assert_int_equal(p.max_rate, 40 * 1000 * 1000);
    assert_int_equal(p.min_rate, 40 * 1000 * 1000);
    assert_int_equal(aftp_cc_inflight_cap(&cc), UINT64_MAX);
    assert_int_equal(cc.mode, AFTP_CC_MODE_FIXED);
    /* The estimates still run, for progress lines. */
    assert_true(cc.bw_bps > 0.97 * 30 * MBIT && cc.bw_bps < 1.03 * 30 * MBIT);
    path_free(&p);
}

static void test_startup_exits_on_plateau(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, AFTP_CC_FAIR, 0.0, 4, 3 * S);
    assert_int_equal(cc.mode, AFTP_CC_MODE_PROBE_BW);
    /* It left startup having found the bottleneck, not before. */
    assert_true(p.startup_exit_bw >= 0.8 * 100 * MBIT);
    assert_true(cc.bw_bps >= 0.97 * 100 * MBIT && cc.bw_bps <= 1.03 * 100 * MBIT);
    assert_true(cc.min_rtt_ns >= 40 * MS && cc.min_rtt_ns <= 42 * MS);
    assert_true(cc.base_loss == 0.0);
    /* Data in flight is capped near 2 BDP (plus feedback allowance) while
     * probing, and near one BDP plus the 5 ms queue target while cruising. */
    double bdp = 100 * MBIT * 0.040 / 8 / PKT;
    uint64_t cap = aftp_cc_inflight_cap(&cc);
    if (cc.phase == AFTP_CC_PHASE_CRUISE)
        assert_true(cap >= 1.1 * bdp && cap <= 1.5 * bdp);
    else
        assert_true(cap >= 2 * bdp && cap <= 3 * bdp);
    cc.phase = AFTP_CC_PHASE_UP;
    assert_true(aftp_cc_inflight_cap(&cc) >= 2 * bdp);
    path_free(&p);
}

/* 10% random loss: startup still finds the bottleneck, the loss is learnt
 * as baseline, and the rate makes up for it. */
static void test_random_loss_is_not_congestion(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, AFTP_CC_FAIR, 0.10, 5, 4 * S);
    assert_true(p.startup_exit_bw >= 0.8 * 0.9 * 100 * MBIT);
    assert_true(cc.base_loss > 0.08 && cc.base_loss < 0.12);
    path_mark(&p);
    path_run(&p, &cc, 8 * S);
    assert_true(delivered_bps(&p, 4 * S) >= 0.9 * 0.9 * 100 * MBIT);
    assert_int_equal(cc.congestion_events, 0);
    path_free(&p);
}

/* PROBE_BW: UP at 1.25 x, DOWN at 0.75 x, CRUISE at 1 x of the path rate
 * (bw corrected for the baseline loss). */
static void test_gain_cycle(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, AFTP_CC_FAIR, 0.05, 6, 4 * S);
    path_mark(&p);
    path_run(&p, &cc, 6 * S);
    double path_rate = (double)cc.bw_bps;
    assert_true(path_rate > 0.95 * 100 * MBIT && path_rate < 1.05 * 100 * MBIT);
    assert_true((double)p.max_rate > 1.2 * path_rate && (double)p.max_rate < 1.3 * path_rate);
    assert_true((double)p.min_rate > 0.7 * path_rate && (double)p.min_rate < 0.8 * path_rate);
    if (cc.phase == AFTP_CC_PHASE_CRUISE)
        assert_true(aftp_cc_rate(&cc) == (uint64_t)path_rate);
    path_free(&p);
}

/* Alone on the path, the cruising queue keeps the RTT a few ms above its
 * minimum: every 10 s a short DIP drains it and sees the minimum again,
 * and the two rounds at half rate of PROBE_RTT are never needed. */
static void test_min_rtt_kept_by_dip(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, AFTP_CC_FAIR, 0.0, 9, 3 * S);
    path_mark(&p);
    path_run(&p, &cc, 33 * S);
    assert_true(p.dips >= 1);
    assert_false(p.saw_mode[AFTP_CC_MODE_PROBE_RTT]);
    assert_true(cc.min_rtt_ns >= 40 * MS && cc.min_rtt_ns <= 41 * MS);
    assert_true(delivered_bps(&p, 30 * S) >= 0.97 * 100 * MBIT);
    path_free(&p);
}

/* A lasting route change (+30 ms): the old minimum is not seen again, so
 * after 10 s PROBE_RTT adopts the new one and the rate recovers. */
static void test_min_rtt_refresh(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, AFTP_CC_FAIR, 0.0, 7, 3 * S);
    p.foreign_ns = 30 * MS;
    path_mark(&p);
    path_run(&p, &cc, 16 * S);
    assert_true(p.saw_mode[AFTP_CC_MODE_PROBE_RTT]);
    assert_true(cc.min_rtt_ns >= 70 * MS && cc.min_rtt_ns <= 72 * MS);
    path_mark(&p);
    path_run(&p, &cc, 20 * S);
    assert_true(delivered_bps(&p, 4 * S) >= 0.85 * 100 * MBIT);
    path_free(&p);
}

/* Another flow's standing queue (15 ms) appears: within its first half
 * second FAIR backs off, LOW further, HIGH (which tolerates a queue up to
 * one RTT) not at all. (A queue that outlasts several cuts is taken as
 * not ours: test_min_rtt_refresh.) */
static uint64_t rate_under_foreign_queue(int policy)
{
    aftp_cc cc;
    path p;
    start_on_path(&cc, &p, policy, 0.0, 8, 3 * S);
    uint64_t events = cc.congestion_events;
    p.foreign_ns = 15 * MS;
    path_mark(&p);
    path_run(&p, &cc, 3 * S + 500 * MS);
    uint64_t bw = cc.bw_bps;
    events = cc.congestion_events - events;
    if (policy == AFTP_CC_HIGH)
        assert_int_equal(events, 0);
    else
        assert_true(events > 0);
    path_free(&p);
    return bw;
}

static void test_policies(void **state)
{
    (void)state;
    uint64_t high = rate_under_foreign_queue(AFTP_CC_HIGH);
    uint64_t fair = rate_under_foreign_queue(AFTP_CC_FAIR);
    uint64_t low = rate_under_foreign_queue(AFTP_CC_LOW);
    assert_true(high >= 0.95 * 100 * MBIT);
    assert_true(fair < 0.9 * high);
    assert_true(low < 0.75 * fair);
}

static void test_max_rate_clamp(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 30 * 1000 * 1000, 0);
    path p;
    path_init(&p, 100 * MBIT, 40 * MS, 0.0, 9);
    path_run(&p, &cc, 5 * S);
    assert_int_equal(p.max_rate, 30 * 1000 * 1000);
    path_mark(&p);
    path_run(&p, &cc, 7 * S);
    assert_true(delivered_bps(&p, 2 * S) > 0.9 * 30 * MBIT);
    path_free(&p);
}

/* min_rate holds even when the path is slower and congested. */
static void test_min_rate_clamp(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 60 * 1000 * 1000);
    path p;
    path_init(&p, 50 * MBIT, 40 * MS, 0.0, 10);
    path_run(&p, &cc, 5 * S);
    assert_true(p.min_rate >= 60 * 1000 * 1000);
    assert_true(cc.congestion_events > 0);
    path_free(&p);
}

/* FEEDBACK for packet pn (sent at pn ms) arriving at now, with this RTT
 * and ack delay, every packet so far received. */
static void feed(aftp_cc *cc, uint64_t pn, uint64_t now, uint64_t rtt, uint64_t ack_delay)
{
    aftp_cc_feedback fb = {.now_ns = now, .largest_pn = pn, .rtt_ns = rtt,
                           .ack_delay_ns = ack_delay, .recv_time_us = now / 1000,
                           .packets_received = pn + 1, .data_sent = pn + 1};
    aftp_cc_on_feedback(cc, &fb);
}

/* A busy receiver stamps an arrival late: its ack delay looks longer than
 * it was and one RTT sample comes out below the path's. Alone, it does not
 * become the minimum (which would make the whole path look like a queue);
 * two in a row do, at the higher of the two. */
static void test_min_rtt_needs_two_low_samples(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    for (uint64_t pn = 0; pn < 10; pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, PKT, 1);
    feed(&cc, 0, 100 * MS, 100 * MS, 0);
    assert_int_equal(cc.min_rtt_ns, 100 * MS);
    feed(&cc, 1, 101 * MS, 100 * MS, 25 * MS);
    feed(&cc, 2, 102 * MS, 101 * MS, 0);
    assert_int_equal(cc.min_rtt_ns, 100 * MS);
    assert_int_equal(cc.qdelay_ns, 1 * MS);
    feed(&cc, 3, 103 * MS, 100 * MS, 20 * MS);
    feed(&cc, 4, 104 * MS, 100 * MS, 22 * MS);
    assert_int_equal(cc.min_rtt_ns, 80 * MS);
}

/* A settled packet's samples (largest_pn overtook it, spec 10.1) show the
 * queue but never lower min RTT, however many in a row: early packets
 * counted as arrived move the settled packet forward. A settled
 * FEEDBACK's rate sample ends at the settled packet: the overtaken ones
 * are not loss. And a FEEDBACK overtook when what it leaves unsettled is
 * beyond what the loss explains. */
static void test_settled_samples_keep_min_rtt(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    for (uint64_t pn = 0; pn < 30; pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, PKT, 1);
    feed(&cc, 0, 100 * MS, 100 * MS, 0);
    for (uint64_t pn = 1; pn < 20; pn++) {
        aftp_cc_feedback fb = {.now_ns = (100 + pn) * MS, .largest_pn = pn + 4,
                               .rtt_ns = 60 * MS, .rtt_settled = 1,
                               .recv_time_us = (100 + pn) * 1000, .packets_received = pn + 1,
                               .data_sent = pn + 5, .data_settled = pn + 1};
        aftp_cc_on_feedback(&cc, &fb);
    }
    assert_int_equal(cc.min_rtt_ns, 100 * MS);
    assert_int_equal(cc.qdelay_ns, 0);
    assert_true(cc.bw_bps > 0); /* a rate sample was taken... */
    assert_true(cc.recent_loss == 0.0); /* ...without loss */
    /* 15% of the round trip's packets, or of its time (min RTT 100 ms
     * plus a feedback interval), is the bound */
    assert_false(aftp_cc_overtaken(&cc, 40, 1000, 10 * MS));
    assert_true(aftp_cc_overtaken(&cc, 400, 1000, 10 * MS));
    assert_true(aftp_cc_overtaken(&cc, 40, 1000, 50 * MS)); /* a rate that changed */
    assert_false(aftp_cc_overtaken(&cc, 20, 30, 50 * MS)); /* a handful: not reordering */
}

/* Packets the receiver cannot count (control packets) are not loss. */
static void test_control_packets_are_not_loss(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    for (uint64_t pn = 0; pn < 400; pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, pn % 4 == 0 ? 60 : PKT, pn % 4 != 0);
    /* 300 DATA packets sent, all arrived: two FEEDBACKs 200 ms apart;
     * the sender's log counts the DATA among them. */
    aftp_cc_feedback fb = {.now_ns = 240 * MS, .largest_pn = 199, .rtt_ns = 41 * MS,
                           .recv_time_us = 220000, .packets_received = 150, .data_sent = 150};
    aftp_cc_on_feedback(&cc, &fb);
    fb = (aftp_cc_feedback){.now_ns = 440 * MS, .largest_pn = 399, .rtt_ns = 41 * MS,
                            .recv_time_us = 420000, .packets_received = 300, .data_sent = 300};
    aftp_cc_on_feedback(&cc, &fb);
    assert_true(cc.recent_loss == 0.0);
    /* 150 packets of 1200 bytes in 200 ms. */
    assert_int_equal(cc.bw_bps, 150 * PKT * 8 * 5);
    /* A stale FEEDBACK (no higher largest_pn) changes nothing. */
    aftp_cc copy = cc;
    fb.packets_received = 10;
    aftp_cc_on_feedback(&cc, &fb);
    assert_memory_equal(&copy, &cc, sizeof cc);
}

/* Startup of `policy` on a path of `rtt`: three feedbacks (a round each
 * here) on an empty queue, then one with `queue`; the delivery rate grows
 * by half per round when `growing`, else stays flat. Returns the mode. */
static int startup_meets_queue(int policy, uint64_t rtt, uint64_t queue, int growing)
{
    aftp_cc cc;
    cc_start(&cc, policy, 0, 0);
    uint64_t now = S, pn = 0, step = 100;
    for (int i = 0; i < 4; i++) {
        feed(&cc, pn, now, i < 3 ? rtt : rtt + queue, 0);
        now += 10 * MS;
        pn += step;
        step = growing ? step * 3 / 2 : step;
    }
    return cc.mode;
}

/* `got` more DATA packets sent and reported in the next FEEDBACK, 10 ms
 * after the previous one, on a 40 ms path with no queue and no loss. */
static void feed_packets(aftp_cc *cc, uint64_t *pn, uint64_t *now, uint64_t got)
{
    for (uint64_t i = 0; i < got; i++)
        aftp_cc_on_sent(cc, *now, (*pn)++, PKT, 1);
    *now += 10 * MS;
    feed(cc, *pn - 1, *now, 40 * MS, 0);
}

/* Past startup, one receive-rate sample far above the others (arrivals a
 * busy host or a bursty link held back, then delivered in a bunch) does
 * not raise the bandwidth estimate; a higher rate that lasts two samples
 * (a probe that found room) does. */
static void test_lone_rate_spike_is_not_bandwidth(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    uint64_t pn = 0, now = 100 * MS;
    for (int i = 0; i < 20; i++)
        feed_packets(&cc, &pn, &now, 100);
    cc.mode = AFTP_CC_MODE_PROBE_BW;
    for (int i = 0; i < 20; i++)
        feed_packets(&cc, &pn, &now, 100);
    uint64_t bw = cc.bw_bps;
    assert_true(bw > 0.95 * 96 * MBIT && bw < 1.05 * 96 * MBIT);
    feed_packets(&cc, &pn, &now, 150);
    for (int i = 0; i < 3; i++)
        feed_packets(&cc, &pn, &now, 100);
    assert_int_equal(cc.bw_bps, bw);
    feed_packets(&cc, &pn, &now, 125);
    feed_packets(&cc, &pn, &now, 125);
    assert_true(cc.bw_bps >= 1.2 * (double)bw);
}

/* HIGH tolerates a queue of up to an RTT once it cruises, but its startup
 * ends on the same deep queue as FAIR's (20 ms) once the queue is past
 * half the min RTT, even while its rate grows: waiting for an RTT of queue
 * would fill a one-BDP buffer, and on the emulated WAN late-stamped
 * arrivals then carried its pacing to 13 times the link. */
static void test_high_startup_ends_on_deep_queue(void **state)
{
    (void)state;
    assert_int_not_equal(startup_meets_queue(AFTP_CC_HIGH, 40 * MS, 30 * MS, 1),
                         AFTP_CC_MODE_STARTUP);
    assert_int_not_equal(startup_meets_queue(AFTP_CC_HIGH, 150 * MS, 80 * MS, 1),
                         AFTP_CC_MODE_STARTUP);
}

/* A flow that joins a busy path, or that a host stall queued behind, sees
 * a deep queue it did not build: while its delivery rate still grows it
 * is winning share, and startup goes on (up to half the min RTT of queue,
 * at most 80 ms). A rate that stopped growing ends it, as LOW's startup
 * always ends: LOW yields to whatever holds the queue. */
static void test_startup_goes_on_while_winning_share(void **state)
{
    (void)state;
    assert_int_equal(startup_meets_queue(AFTP_CC_FAIR, 150 * MS, 30 * MS, 1),
                     AFTP_CC_MODE_STARTUP);
    assert_int_equal(startup_meets_queue(AFTP_CC_HIGH, 150 * MS, 30 * MS, 1),
                     AFTP_CC_MODE_STARTUP);
    assert_int_not_equal(startup_meets_queue(AFTP_CC_FAIR, 150 * MS, 30 * MS, 0),
                         AFTP_CC_MODE_STARTUP);
    assert_int_not_equal(startup_meets_queue(AFTP_CC_FAIR, 150 * MS, 80 * MS, 1),
                         AFTP_CC_MODE_STARTUP);
    assert_int_not_equal(startup_meets_queue(AFTP_CC_LOW, 150 * MS, 30 * MS, 1),
                         AFTP_CC_MODE_STARTUP);
}

/* A receiver that stamped arrivals late and then in a bunch reports them
 * faster than they were sent: the sample is the send rate, since a path
 * delivers no faster than that. A receive rate below the send rate (the
 * path's own limit) is taken as it is. */
/* A pipelined session's run of control packets (ENTRIES of thousands of
 * entries before any DATA): the receiver answers only DATA with FEEDBACK,
 * so were they in flight, DATA could never leave. They are not. */
static void test_control_packets_do_not_hold_data_back(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    uint64_t pn = 0;
    for (; pn < 4 * AFTP_CC_INITIAL_WINDOW; pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, 1400, 0);
    assert_int_equal(aftp_cc_inflight(&cc), 0);
    assert_true(aftp_cc_may_send(&cc));
    for (uint64_t data = 0; aftp_cc_may_send(&cc); data++, pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, PKT, 1);
    assert_int_equal(aftp_cc_inflight(&cc), aftp_cc_inflight_cap(&cc));
    /* A FEEDBACK reporting the first DATA packet leaves the rest in flight. */
    aftp_cc_feedback fb = {.now_ns = pn * MS, .largest_pn = 4 * AFTP_CC_INITIAL_WINDOW,
                           .rtt_ns = 50 * MS, .recv_time_us = pn * 1000,
                           .packets_received = 1, .data_sent = 1};
    aftp_cc_on_feedback(&cc, &fb);
    assert_int_equal(aftp_cc_inflight(&cc), cc.data_count - 1);
}

static void test_bunched_arrivals_do_not_raise_bw(void **state)
{
    (void)state;
    aftp_cc cc;
    cc_start(&cc, AFTP_CC_FAIR, 0, 0);
    for (uint64_t pn = 0; pn < 400; pn++)
        aftp_cc_on_sent(&cc, pn * MS, pn, PKT, 1);
    /* pn 199..299 left over 100 ms and were stamped 50 ms apart. */
    aftp_cc_feedback fb = {.now_ns = 250 * MS, .largest_pn = 199, .rtt_ns = 51 * MS,
                           .recv_time_us = 240000, .packets_received = 200,
                           .data_sent = 200};
    aftp_cc_on_feedback(&cc, &fb);
    fb = (aftp_cc_feedback){.now_ns = 350 * MS, .largest_pn = 299, .rtt_ns = 51 * MS,
                            .recv_time_us = 290000, .packets_received = 300,
                            .data_sent = 300};
    aftp_cc_on_feedback(&cc, &fb);
    assert_int_equal(cc.bw_bps, 100 * PKT * 8 * 10);
    /* pn 299..399 left over 100 ms and arrived over 200 ms: the path's rate. */
    cc.bw_slot[cc.bw_index] = 0;
    fb = (aftp_cc_feedback){.now_ns = 500 * MS, .largest_pn = 399, .rtt_ns = 101 * MS,
                            .recv_time_us = 490000, .packets_received = 400,
                            .data_sent = 400};
    aftp_cc_on_feedback(&cc, &fb);
    assert_int_equal(cc.bw_slot[cc.bw_index], 100 * PKT * 8 * 5);
}

/* ---- Careful Resume ---- */

#define GBIT (1000 * MBIT)

/* A FAIR controller that remembers `saved_bps` and `saved_rtt` (0: none),
 * on a path of `rate`, `rtt` with a bottleneck buffer of `buffer`, run
 * for `until`; its handshake took `handshake_rtt` (0: not known). */
static void resume_on_path_after(aftp_cc *cc, path *p, int policy, double saved_bps,
                                 uint64_t saved_rtt, uint64_t handshake_rtt, double rate,
                                 uint64_t rtt, uint64_t buffer, uint64_t until)
{
    aftp_cc_config cfg = {.policy = policy, .rate_bps = UINT64_C(1000000000),
                          .initial_rtt_ns = 100 * MS, .seed = 1,
                          .resume_rate_bps = (uint64_t)saved_bps, .resume_rtt_ns = saved_rtt};
    aftp_cc_init(cc, &cfg, 0);
    if (handshake_rtt != 0)
        aftp_cc_on_handshake_rtt(cc, handshake_rtt);
    path_init(p, rate, rtt, 0.0, 21);
    p->buffer_ns = buffer;
    path_run(p, cc, until);
}

static void resume_on_path(aftp_cc *cc, path *p, int policy, double saved_bps, uint64_t saved_rtt,
                           double rate, uint64_t rtt, uint64_t buffer, uint64_t until)
{
    resume_on_path_after(cc, p, policy, saved_bps, saved_rtt, 0, rate, rtt, buffer, until);
}

/* The handshake's RTT is Reconnaissance's sample: the jump starts with
 * the first DATA, and the link is reached a round earlier (2 rounds).
 * A handshake RTT over 10 x the saved one may be the server's work on it:
 * the first FEEDBACK judges (3 rounds); one below half of it is another
 * path: no jump. */
static void test_resume_judged_by_the_handshake(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    resume_on_path_after(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, 152 * MS, GBIT, 150 * MS,
                         150 * MS, 3 * S);
    assert_true(p.jumped);
    assert_true(p.reach_round > 0 && p.reach_round <= 2);
    assert_int_equal(p.dropped, 0);
    path_free(&p);
    resume_on_path_after(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, 1600 * MS, GBIT, 150 * MS,
                         150 * MS, 3 * S);
    assert_true(p.jumped);
    assert_int_equal(p.reach_round, 3);
    path_free(&p);
    resume_on_path_after(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, 70 * MS, GBIT, 150 * MS,
                         150 * MS, 3 * S);
    assert_false(p.jumped);
    path_free(&p);
}

/* 1 Gbit/s, 150 ms: a normal start needs 4 rounds from the initial
 * window to 90% of the link (test_first_contact_reaches_the_link_in_four_rounds);
 * a resume to the same path needs at most 3 (one to see the RTT, one to
 * validate the jump, one at startup's pace from the jump's rate), and
 * nothing is lost on the way. */
static void test_resume_reaches_the_link_in_three_rounds(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    resume_on_path(&cc, &p, AFTP_CC_FAIR, 0, 0, GBIT, 150 * MS, 150 * MS, 3 * S);
    uint64_t normal = p.reach_round;
    assert_false(p.jumped);
    assert_true(normal >= 4);
    path_free(&p);

    resume_on_path(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, GBIT, 150 * MS, 150 * MS, 3 * S);
    assert_true(p.jumped);
    assert_true(p.reach_round > 0 && p.reach_round <= 3);
    assert_int_equal(cc.resume, AFTP_CC_RESUME_OFF);
    assert_int_equal(p.dropped, 0);
    assert_int_equal(cc.mode, AFTP_CC_MODE_PROBE_BW);
    assert_true(cc.bw_bps >= 0.97 * GBIT && cc.bw_bps <= 1.03 * GBIT);
    path_free(&p);
}

/* The path now carries a quarter of what was saved, behind a 20 ms
 * buffer: the jump (half the saved rate, twice the path's) is refuted by
 * its own packets' delivery rate and retreats to what they delivered.
 * What is lost is part of what the jump sent, and once DRAIN has emptied
 * the queue nothing more is lost; the rate then holds the path. */
static void test_resume_retreats_on_a_slower_path(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    resume_on_path(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, GBIT / 4, 150 * MS, 20 * MS, 1 * S);
    assert_true(p.jumped);
    assert_int_equal(cc.resume, AFTP_CC_RESUME_OFF);
    assert_int_not_equal(cc.mode, AFTP_CC_MODE_STARTUP);
    assert_true(p.dropped > 0);
    assert_true(p.dropped <= p.jump_sent / 2);
    uint64_t dropped = p.dropped;
    path_mark(&p);
    path_run(&p, &cc, 5 * S);
    assert_int_equal(p.dropped, dropped);
    assert_true(delivered_bps(&p, 4 * S) >= 0.9 * GBIT / 4);
    assert_true(p.max_rate <= 1.3 * GBIT / 4);
    path_free(&p);
}

/* A first RTT outside [1/2, 10] x the saved one is another path: a normal
 * start, the same to the packet as with nothing saved. LOW never jumps. */
static void test_resume_declined_starts_normally(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    resume_on_path(&cc, &p, AFTP_CC_FAIR, 0, 0, 100 * MBIT, 40 * MS, 0, 1 * S);
    uint64_t normal_sent = p.sent, normal_rate = p.max_rate;
    path_free(&p);
    resume_on_path(&cc, &p, AFTP_CC_FAIR, GBIT, 150 * MS, 100 * MBIT, 40 * MS, 0, 1 * S);
    assert_false(p.jumped);
    assert_int_equal(p.sent, normal_sent);
    assert_int_equal(p.max_rate, normal_rate);
    path_free(&p);
    resume_on_path(&cc, &p, AFTP_CC_FAIR, GBIT, 10 * MS, 100 * MBIT, 150 * MS, 0, 1 * S);
    assert_false(p.jumped);
    path_free(&p);
    resume_on_path(&cc, &p, AFTP_CC_LOW, GBIT, 150 * MS, GBIT, 150 * MS, 0, 1 * S);
    assert_false(p.jumped);
    path_free(&p);
}

/* A jump obeys the limits: a max rate set before it (the user's, the
 * server's cap) lowers it, and so does one set while it runs. */
static void test_resume_obeys_max_rate(void **state)
{
    (void)state;
    aftp_cc cc;
    aftp_cc_config cfg = {.policy = AFTP_CC_FAIR, .rate_bps = UINT64_C(1000000000),
                          .max_rate_bps = 400 * 1000 * 1000, .initial_rtt_ns = 100 * MS,
                          .resume_rate_bps = (uint64_t)GBIT, .resume_rtt_ns = 150 * MS};
    aftp_cc_init(&cc, &cfg, 0);
    aftp_cc_on_handshake_rtt(&cc, 150 * MS);
    assert_int_equal(cc.resume, AFTP_CC_RESUME_UNVALIDATED);
    assert_int_equal(aftp_cc_rate(&cc), 400 * 1000 * 1000);
    aftp_cc_set_limits(&cc, 0, 300 * 1000 * 1000);
    assert_int_equal(aftp_cc_rate(&cc), 300 * 1000 * 1000);
}

/* ---- first contact ---- */

/* Nothing known of the path: while samples show no queue, startup's rate
 * grows about 5-fold per round, so 90% of a 1 Gbit/s, 150 ms link (one
 * BDP of buffer) is reached in 4 rounds (at 2.89 x throughout: 6), and
 * of a 100 Mbit/s, 600 ms one in 3 (4). The round that overshoots may
 * lose a little on a one-BDP buffer (2 BDP in flight, plus a feedback
 * interval's worth): here about 1%. */
static void test_first_contact_reaches_the_link_in_four_rounds(void **state)
{
    (void)state;
    aftp_cc cc;
    path p;
    resume_on_path(&cc, &p, AFTP_CC_FAIR, 0, 0, GBIT, 150 * MS, 150 * MS, 3 * S);
    assert_true(p.reach_round > 0 && p.reach_round <= 4);
    assert_int_equal(cc.mode, AFTP_CC_MODE_PROBE_BW);
    path_free(&p);
    resume_on_path(&cc, &p, AFTP_CC_FAIR, 0, 0, 100 * MBIT, 600 * MS, 600 * MS, 8 * S);
    assert_true(p.reach_round > 0 && p.reach_round <= 3);
    assert_true((double)p.dropped <= 0.02 * (double)p.sent);
    path_free(&p);
}

/* A buffer shallower than startup's deep-queue bound (20 ms) overflows
 * before the queue can end startup: loss beyond chance on a queue that
 * has begun to grow ends it instead, so what the overshoot loses stays
 * under 5% of what was sent (a plateau took 3 more rounds of overflow:
 * 9-14%). On a path of a quarter the rate the faster gain suggests, the
 * same; the rate then holds the path without further loss. */
static void startup_on_shallow_buffer(double rate)
{
    aftp_cc cc;
    path p;
    resume_on_path(&cc, &p, AFTP_CC_FAIR, 0, 0, rate, 150 * MS, 20 * MS, 3 * S);
    assert_int_not_equal(cc.mode, AFTP_CC_MODE_STARTUP);
    assert_true(p.dropped > 0);
    assert_true((double)p.dropped <= 0.05 * (double)p.sent);
    assert_true((double)cc.bw_bps <= 1.05 * rate);
    uint64_t dropped = p.dropped;
    path_mark(&p);
    path_run(&p, &cc, 6 * S);
    assert_true(delivered_bps(&p, 3 * S) >= 0.9 * rate);
    assert_true((double)(p.dropped - dropped) <= 0.001 * (double)p.delivered_since);
    path_free(&p);
}

static void test_startup_ends_when_a_shallow_buffer_overflows(void **state)
{
    (void)state;
    startup_on_shallow_buffer(GBIT);
    startup_on_shallow_buffer(GBIT / 4);
}

/* The faster gain is for an empty queue only, and never for LOW (which
 * yields): before any sample FAIR paces its initial window at 5 x, LOW
 * at startup's usual 2.89 x. */
static void test_low_starts_at_the_usual_gain(void **state)
{
    (void)state;
    aftp_cc fair, low;
    cc_start(&fair, AFTP_CC_FAIR, 0, 0);
    cc_start(&low, AFTP_CC_LOW, 0, 0);
    double ratio = (double)aftp_cc_rate(&fair) / (double)aftp_cc_rate(&low);
    assert_true(ratio > 1.7 && ratio < 1.75);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_contact_reaches_the_link_in_four_rounds),
        cmocka_unit_test(test_startup_ends_when_a_shallow_buffer_overflows),
        cmocka_unit_test(test_low_starts_at_the_usual_gain),
        cmocka_unit_test(test_fixed_holds_its_rate),
        cmocka_unit_test(test_settled_samples_keep_min_rtt),
        cmocka_unit_test(test_startup_exits_on_plateau),
        cmocka_unit_test(test_random_loss_is_not_congestion),
        cmocka_unit_test(test_gain_cycle),
        cmocka_unit_test(test_lone_rate_spike_is_not_bandwidth),
        cmocka_unit_test(test_min_rtt_kept_by_dip),
        cmocka_unit_test(test_min_rtt_refresh),
        cmocka_unit_test(test_policies),
        cmocka_unit_test(test_max_rate_clamp),
        cmocka_unit_test(test_min_rate_clamp),
        cmocka_unit_test(test_control_packets_are_not_loss),
        cmocka_unit_test(test_min_rtt_needs_two_low_samples),
        cmocka_unit_test(test_control_packets_do_not_hold_data_back),
        cmocka_unit_test(test_bunched_arrivals_do_not_raise_bw),
        cmocka_unit_test(test_high_startup_ends_on_deep_queue),
        cmocka_unit_test(test_startup_goes_on_while_winning_share),
        cmocka_unit_test(test_resume_reaches_the_link_in_three_rounds),
        cmocka_unit_test(test_resume_retreats_on_a_slower_path),
        cmocka_unit_test(test_resume_declined_starts_normally),
        cmocka_unit_test(test_resume_judged_by_the_handshake),
        cmocka_unit_test(test_resume_obeys_max_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
