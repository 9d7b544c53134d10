/* Delay-aware, loss-tolerant rate controller (aftp_cc.h). */
#include "common/aftp_cc.h"

#include <math.h>
#include <string.h>

#define NS_PER_MS UINT64_C(1000000)
#define NS_PER_S UINT64_C(1000000000)

/* Startup paces at 2/ln 2 of the bandwidth estimate (BBR's gain: the
 * rate about doubles per round even though each round's samples show the
 * previous round's rate), smoothly (a burst would build a queue before the
 * path is full). A slower start costs whole seconds on a long path, and a
 * flow joining a busy path wins its share in startup: at 2.0 a late joiner
 * on 1 Gbit/s, 150 ms took 18 s to reach its share in the simulation, at
 * 2.89 5 s. The 2 BDP inflight cap bounds the queue of the round that
 * overshoots to one BDP, what a one-BDP buffer holds. */
#define STARTUP_GAIN 2.89
#define STARTUP_CAP_GAIN 2.0
/* While the latest sample shows no queue (under half the policy's target),
 * startup paces at 5 x bw: the rate grows about 5-fold per round, so a
 * first contact with a 1 Gbit/s, 150 ms path reaches 90% of it in 4 rounds
 * instead of 6 (sim). Safety is the inflight cap's, not the gain's: at
 * most 2 BDP of the estimate is in flight whatever the gain, so the round
 * that overshoots still queues at most one BDP; the higher gain only sends
 * each round's data in a shorter burst, and startup ends on the first
 * sign of a full buffer (see startup_judge). A queue seen means the path
 * is near full or shared: startup's usual gain then. 6 x was faster still
 * but left FAIR a smaller share against CUBIC in the first 30 s. */
#define STARTUP_FLAT_GAIN 5.0
#define STARTUP_GROWTH 1.25      /* less than this per round is a plateau... */
#define STARTUP_FLAT_ROUNDS 3    /* ...for this many rounds */
#define STARTUP_QUEUE_GROWTH 1.1 /* growth that keeps startup going over a queue */
/* A queue that ends startup (unless the flow is still winning share, see
 * deep_queue_ends_startup): 4 x the policy's target, and never deeper than
 * 4 x FAIR's. HIGH tolerates a queue of up to an RTT once it
 * cruises, but a startup that waited for one would fill a one-BDP buffer,
 * and arrivals bunched by a busy receiver would carry its estimate above
 * the path (seen on the emulated WAN: pacing at 13 Gbit/s on 1 Gbit/s). */
#define FAIR_TARGET_NS (5 * NS_PER_MS) /* FAIR's queue target */
#define STARTUP_DEEP_QUEUE 4
#define STARTUP_DEEP_QUEUE_MAX_NS (STARTUP_DEEP_QUEUE * FAIR_TARGET_NS)
/* DRAIN empties startup's queue (up to one BDP) in about 1.5 rounds. */
#define DRAIN_GAIN 0.35
#define DRAIN_MAX_ROUNDS 4
#define UP_GAIN 1.25
#define DOWN_GAIN 0.75
#define CAP_GAIN 2.0             /* inflight cap: 2 BDP */
/* PROBE_BW cycle: 5-7 rounds, varied per flow, but no longer than about
 * half a second once 2 rounds have passed (long paths must find freed
 * bandwidth within seconds, not tens of rounds). */
#define CYCLE_MIN_ROUNDS 5
#define CYCLE_SPREAD 3
#define CYCLE_SHORT_ROUNDS 2
#define CYCLE_MAX_NS (500 * NS_PER_MS)
#define PROBE_RTT_GAIN 0.5
#define PROBE_RTT_MIN_NS (100 * NS_PER_MS)
#define MIN_RTT_WINDOW_NS (10 * NS_PER_S)
/* A sample this close to min RTT shows the queue was empty: the minimum
 * is still true and needs no PROBE_RTT. */
#define MIN_RTT_NEAR_NS NS_PER_MS
#define SPAN_MAX_NS (8 * NS_PER_MS)   /* rate samples: min(min RTT / 4, 8 ms) */
#define SPAN_MIN_NS NS_PER_MS
#define QUEUE_DRAIN_ROUNDS 2     /* a standing queue is drained over this many rounds */
#define FUTILE_SHRINK 0.9        /* a cut after which the queue kept 90%... */
#define FUTILE_CUTS 3            /* ...this many times running: the queue is not ours */
#define STANDING_MIN_NS (50 * NS_PER_MS) /* a queue standing this long is congestion */
#define FEEDBACK_GAP_DEFAULT_NS (10 * NS_PER_MS) /* spec 10.5: default interval */
#define FEEDBACK_GAP_MAX_NS (25 * NS_PER_MS)     /* spec 10.5: max_feedback_delay */
#define RATE_FLOOR_BPS UINT64_C(64000)
/* Loss baseline: an average over about this many packets. */
#define LOSS_WINDOW_PACKETS 20000.0
#define LOSS_MIN_PACKETS 50      /* fewer packets say nothing about loss */
#define LOSS_MAX_BASE 0.5        /* never pace beyond 2x the delivery rate */
#define LOSS_MARGIN 0.02         /* loss this far above the baseline is congestion... */
#define LOSS_SIGMAS 4.0          /* ...and beyond this many standard deviations */
/* Sharing with loss-based traffic (TCP) that holds the queue: a queue we
 * cannot shrink is not a signal; overflow loss is, as TCP takes it. The
 * flow probes gently: TCP grows by one packet per round, a probe of 25%
 * would take back at once what a cut gave it. */
#define COMPETE_UP_GAIN 1.1
/* A second PROBE_RTT for a queue that does not shrink within this time:
 * the queue is held by traffic that does not yield to delay. */
#define COMPETE_AFTER_NS (10 * NS_PER_S)
/* Loss-based traffic that held the queue for long, and recently, is still
 * there when a queue stands again: its backoff after a loss drained the
 * queue, its window fills it again. Compete at once, rather than giving
 * up to delay cuts and a PROBE_RTT what it took to find out before. */
#define COMPETE_LONG_NS (5 * NS_PER_S)
#define COMPETE_MEMORY_NS (30 * NS_PER_S)

/* Careful Resume (the IETF's draft-ietf-tsvwg-careful-resume, RFC 9959).
 * The saved state is for this path only while the first RTT lies within
 * [1/2, 10] x the saved one (the draft's bounds: another route or another
 * bottleneck is likely beyond them). The jump is to half the saved rate,
 * as the draft's jump to half the saved window: a path that now carries
 * half of what it did still takes it without a queue. A jump is confirmed
 * by samples of its own packets delivered at 85% or more of the rate they
 * left at (below that the bottleneck is slower than the jump: the rest
 * queues), two in a row, as one sample's noise must not decide; a queue
 * beyond startup's deep bound or loss beyond chance refutes it at once.
 * Unresolved after this many rounds from the jump (no sample could be
 * taken), the bandwidth estimate decides. */
#define RESUME_RTT_MIN_FRACTION 0.5
#define RESUME_RTT_MAX_FACTOR 10
#define RESUME_JUMP_FRACTION 0.5
#define RESUME_CONFIRM_SHARE 0.85
#define RESUME_SAMPLES 2
#define RESUME_MAX_ROUNDS 3

/* FAIR, competing, grows back after a loss cut as a CUBIC window over the
 * same RTT would (RFC 9438: W(t) = C (t - K)^3 + W_max, K = cbrt(W_max
 * (1 - beta) / C)), and cuts as CUBIC does (compete_cut = 1 - beta): its
 * share then converges with TCP's as two CUBIC flows' do. A fixed probe
 * gain grows faster than TCP between shared losses (on a 100 Mbit/s, 40 ms
 * path it left Reno 15% of the link). */
#define CUBIC_C 0.4    /* packets / s^3 */
#define CUBIC_BETA 0.7

/* How each policy reacts to congestion. */
typedef struct policy_params {
    uint64_t target_ns;   /* queueing delay tolerated */
    double min_cut;       /* smallest multiplicative cut per congestion event */
    double max_cut;       /* largest */
    double compete_cut;   /* cut on overflow loss while competing; 0: never competes */
} policy_params;

static policy_params params_of(const aftp_cc *cc)
{
    switch (cc->cfg.policy) {
    case AFTP_CC_HIGH: {
        /* Holds its rate against queues up to one RTT deep: a loss-based
         * flow filling a one-BDP buffer does not push it back (it never
         * needs to compete). */
        uint64_t t = cc->min_rtt_ns > 20 * NS_PER_MS ? cc->min_rtt_ns : 20 * NS_PER_MS;
        return (policy_params){t, 0.02, 0.15, 0.2};
    }
    case AFTP_CC_LOW: return (policy_params){2 * NS_PER_MS, 0.15, 0.5, 0.0};
    /* Against TCP, FAIR backs off on overflow loss as much as CUBIC does. */
    default: return (policy_params){FAIR_TARGET_NS, 0.02, 0.15, 0.3};
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static double clamp_d(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t next_rand(aftp_cc *cc)
{
    cc->rng = cc->rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    return cc->rng >> 33;
}

/* ---- estimates ---- */

static uint64_t rtt_estimate(const aftp_cc *cc)
{
    return cc->min_rtt_ns ? cc->min_rtt_ns : cc->cfg.initial_rtt_ns;
}

/* Bytes of a full DATA datagram: the largest sent, or a minimum-size
 * datagram before the first. */
static uint64_t datagram_size(const aftp_cc *cc)
{
    return cc->datagram_bytes ? cc->datagram_bytes : AFTP_CC_DEFAULT_DATAGRAM;
}

/* What a window of packets over the initial RTT would deliver: the rate
 * startup begins from. */
static uint64_t initial_rate(const aftp_cc *cc)
{
    double bits = (double)AFTP_CC_INITIAL_WINDOW * (double)datagram_size(cc) * 8.0;
    return (uint64_t)(bits * (double)NS_PER_S / (double)rtt_estimate(cc));
}

/* Packets `span_ns` at `bps` carry. */
static uint64_t packets_at(const aftp_cc *cc, uint64_t bps, uint64_t span_ns)
{
    double bits = (double)bps * (double)span_ns / (double)NS_PER_S;
    return (uint64_t)(bits / 8.0 / (double)datagram_size(cc));
}

/* Packets `span_ns` of the path rate carry. */
static uint64_t packets_in(const aftp_cc *cc, uint64_t span_ns)
{
    return packets_at(cc, cc->bw_bps, span_ns);
}

/* One BDP in packets, plus the data that arrived but is not reported yet
 * (one feedback interval). */
static uint64_t bdp_packets(const aftp_cc *cc)
{
    return packets_in(cc, rtt_estimate(cc) + cc->feedback_gap_ns);
}

static uint64_t bw_max(const aftp_cc *cc)
{
    uint64_t m = 0;
    for (int i = 0; i < AFTP_CC_BW_ROUNDS; i++)
        m = max_u64(m, cc->bw_slot[i]);
    return m;
}

/* The median of the latest three receive-rate samples (their minimum
 * while fewer than three followed the last cut). A rate that lasts, such
 * as a probe's (UP spans two samples or more), passes; one sample's spike
 * does not: packets that a busy host or a bursty link held back and then
 * delivered in a bunch. Taken by the max filter, such spikes kept the
 * estimate 2-9% above the path alone, and 20-40% above a flow's share
 * when two flows shared it: each flow then cruised on its inflated
 * estimate, and the two kept whatever ratio they had. */
static uint64_t bw_steady_sample(aftp_cc *cc, uint64_t bps)
{
    uint64_t *h = cc->bw_recent;
    h[0] = h[1];
    h[1] = h[2];
    h[2] = bps;
    if (cc->bw_recent_count < 3)
        cc->bw_recent_count++;
    if (cc->bw_recent_count == 1)
        return h[2];
    if (cc->bw_recent_count == 2)
        return min_u64(h[1], h[2]);
    return max_u64(min_u64(h[0], h[1]), min_u64(max_u64(h[0], h[1]), h[2]));
}

static uint64_t compete_ceiling(const aftp_cc *cc);

static void bw_add_sample(aftp_cc *cc, uint64_t bps)
{
    uint64_t *slot = &cc->bw_slot[cc->bw_index];
    uint64_t steady = min_u64(bw_steady_sample(cc, bps), compete_ceiling(cc));
    /* Startup takes each sample as it comes: its rate must show growth
     * every round, and a joiner that waits a sample more wins less. */
    *slot = max_u64(*slot, cc->mode == AFTP_CC_MODE_STARTUP ? bps : steady);
    cc->bw_bps = bw_max(cc);
}

/* A new round: the oldest round's maximum leaves the window. Rounds
 * without a sample (shorter than a sample span) do not count. */
static void bw_new_round(aftp_cc *cc)
{
    if (cc->bw_slot[cc->bw_index] == 0)
        return;
    cc->bw_index = (cc->bw_index + 1) % AFTP_CC_BW_ROUNDS;
    cc->bw_slot[cc->bw_index] = 0;
    cc->bw_bps = bw_max(cc);
}

/* Every remembered round is lowered to bps: the path has less room than
 * the old maxima say. */
static void bw_lower(aftp_cc *cc, uint64_t bps)
{
    cc->bw_recent_count = 0; /* samples from before the cut must not undo it */
    for (int i = 0; i < AFTP_CC_BW_ROUNDS; i++)
        cc->bw_slot[i] = min_u64(cc->bw_slot[i], bps);
    cc->bw_slot[cc->bw_index] = bps;
    cc->bw_bps = bps;
}

/* A new minimum needs two samples in a row below the old one, and is the
 * higher of the two. A lone low sample is an artefact of a busy endpoint
 * (the receiver stamps a packet's arrival, or the sender a FEEDBACK's,
 * later than it happened: its ack delay then looks longer than it was);
 * taken as the minimum, it would turn the whole path into "queue" and cut
 * the rate for as long as the minimum lasts. */
static uint64_t min_rtt_candidate(const aftp_cc *cc, uint64_t rtt, uint64_t floor)
{
    if (floor == 0 || floor == UINT64_MAX)
        return rtt;
    if (rtt >= floor || cc->prev_rtt_ns >= floor)
        return floor;
    return max_u64(rtt, cc->prev_rtt_ns);
}

/* A settled packet's sample (largest_pn overtook it) measures the queue
 * but never lowers the minimum, nor counts towards two in a row: the
 * early packets the receiver counted move the settled packet forward, by
 * a send pause's length when the sender sent in bursts. As the first
 * minimum it is taken no lower than the handshake's round trip: in the
 * first round trips the few packets received are early ones in a large
 * share (a repeat contact's jump sends fast from the start), and the
 * settled packet they move forward was sent barely one one-way delay
 * before the FEEDBACK came. */
static void update_min_rtt(aftp_cc *cc, uint64_t rtt, uint64_t now, int settled)
{
    if (settled && cc->min_rtt_ns == 0)
        rtt = max_u64(rtt, cc->handshake_rtt_ns);
    if (!settled || cc->min_rtt_ns == 0) {
        if (cc->mode == AFTP_CC_MODE_PROBE_RTT)
            cc->probe_rtt_min_ns = min_rtt_candidate(cc, rtt, cc->probe_rtt_min_ns);
        cc->min_rtt_ns = min_rtt_candidate(cc, rtt, cc->min_rtt_ns);
        cc->prev_rtt_ns = rtt;
    }
    if (rtt <= cc->min_rtt_ns + MIN_RTT_NEAR_NS)
        cc->min_rtt_seen_ns = now;
    cc->qdelay_ns = rtt > cc->min_rtt_ns ? rtt - cc->min_rtt_ns : 0;
}

/* ---- rate and cap ---- */

/* "No queue" is judged against FAIR's target at most: HIGH's target
 * (up to an RTT) would let it take the faster gain over another flow's
 * queue. LOW, there to yield, never takes it (as it never jumps). */
static double startup_gain(const aftp_cc *cc)
{
    uint64_t target_ns = min_u64(params_of(cc).target_ns, FAIR_TARGET_NS);
    int flat = cc->sample_qdelay_ns <= target_ns / 2;
    return flat && cc->cfg.policy != AFTP_CC_LOW ? STARTUP_FLAT_GAIN : STARTUP_GAIN;
}

static double gain_now(const aftp_cc *cc)
{
    switch (cc->mode) {
    case AFTP_CC_MODE_STARTUP: return startup_gain(cc);
    case AFTP_CC_MODE_DRAIN: return DRAIN_GAIN;
    case AFTP_CC_MODE_PROBE_RTT: return PROBE_RTT_GAIN;
    default: break;
    }
    switch (cc->phase) {
    case AFTP_CC_PHASE_UP: return cc->competing ? COMPETE_UP_GAIN : UP_GAIN;
    case AFTP_CC_PHASE_DOWN: return DOWN_GAIN;
    case AFTP_CC_PHASE_DIP: return PROBE_RTT_GAIN;
    default: return 1.0;
    }
}

static uint64_t clamp_rate(const aftp_cc *cc, uint64_t bps)
{
    bps = max_u64(bps, max_u64(cc->cfg.min_rate_bps, RATE_FLOOR_BPS));
    if (cc->cfg.max_rate_bps)
        bps = min_u64(bps, cc->cfg.max_rate_bps);
    return bps;
}

/* Unvalidated or Validating: the jump rate holds until judged. */
static int jumping(const aftp_cc *cc)
{
    return cc->resume == AFTP_CC_RESUME_UNVALIDATED || cc->resume == AFTP_CC_RESUME_VALIDATING;
}

static void update_rate(aftp_cc *cc)
{
    if (cc->mode == AFTP_CC_MODE_FIXED) {
        cc->rate_bps = clamp_rate(cc, cc->cfg.rate_bps);
        return;
    }
    if (jumping(cc)) { /* limits set since the jump still bind it */
        cc->rate_bps = clamp_rate(cc, cc->jump_rate_bps);
        return;
    }
    uint64_t bw = cc->bw_bps;
    if (cc->mode == AFTP_CC_MODE_STARTUP)
        bw = max_u64(bw, min_u64(initial_rate(cc), cc->cfg.rate_bps));
    cc->rate_bps = clamp_rate(cc, (uint64_t)(gain_now(cc) * (double)bw));
}

void aftp_cc_set_limits(aftp_cc *cc, uint64_t min_rate_bps, uint64_t max_rate_bps)
{
    cc->cfg.min_rate_bps = min_rate_bps;
    cc->cfg.max_rate_bps = max_rate_bps;
    update_rate(cc);
}

uint64_t aftp_cc_rate(const aftp_cc *cc)
{
    return cc->rate_bps;
}

/* While cruising, what is in flight is one BDP plus half the policy's
 * queue target: a bandwidth estimate a little above the path's (a max
 * filter over noisy samples is) then builds a queue of about half the
 * target, which keeps the link busy, rather than one that grows until it
 * stands above the target and gets cut. Probes, and a flow competing with
 * a queue it cannot shrink, have the usual 2 BDP. */
static uint64_t cruise_cap(const aftp_cc *cc)
{
    /* --min-rate holds whatever the path does: the cap never undercuts it. */
    uint64_t bps = max_u64(cc->bw_bps, cc->cfg.min_rate_bps);
    uint64_t span = rtt_estimate(cc) + cc->feedback_gap_ns + params_of(cc).target_ns / 2;
    return packets_at(cc, bps, span);
}

uint64_t aftp_cc_inflight_cap(const aftp_cc *cc)
{
    if (cc->mode == AFTP_CC_MODE_FIXED)
        return UINT64_MAX;
    double gain = cc->mode == AFTP_CC_MODE_STARTUP ? STARTUP_CAP_GAIN : CAP_GAIN;
    uint64_t cap = (uint64_t)(gain * (double)bdp_packets(cc));
    if (cc->mode == AFTP_CC_MODE_PROBE_BW && cc->phase == AFTP_CC_PHASE_CRUISE && !cc->competing)
        cap = cruise_cap(cc);
    /* A jump puts at most one saved RTT of its rate in flight (the draft's
     * jump window, half the saved one): what a wrong jump can cost is
     * bounded by it. */
    if (jumping(cc))
        cap = packets_at(cc, cc->jump_rate_bps, cc->cfg.resume_rtt_ns + cc->feedback_gap_ns);
    cap = max_u64(cap, AFTP_CC_INITIAL_WINDOW);
    if (cc->cfg.max_inflight)
        cap = min_u64(cap, cc->cfg.max_inflight);
    return cap;
}

uint64_t aftp_cc_inflight(const aftp_cc *cc)
{
    return cc->data_count > cc->data_reported ? cc->data_count - cc->data_reported : 0;
}

int aftp_cc_may_send(const aftp_cc *cc)
{
    return aftp_cc_inflight(cc) < aftp_cc_inflight_cap(cc);
}

/* ---- state machine ---- */

/* A cycle's length varies between flows so that their probes spread out. */
static void new_cycle(aftp_cc *cc, uint64_t now)
{
    uint64_t r = next_rand(cc);
    cc->cycle_start_round = cc->round;
    cc->cycle_start_ns = now;
    cc->cycle_rounds = CYCLE_MIN_ROUNDS + (unsigned)(r % CYCLE_SPREAD);
    cc->cycle_max_ns = CYCLE_MAX_NS / 2 + (r >> 8) % (CYCLE_MAX_NS / 2);
}

static void start_cycle(aftp_cc *cc, uint64_t now)
{
    cc->mode = AFTP_CC_MODE_PROBE_BW;
    cc->phase = AFTP_CC_PHASE_CRUISE;
    cc->phase_start_ns = now;
    new_cycle(cc, now);
}

/* Into CRUISE; the packets sent from now on follow a DIP, if one ran. */
static void cruise(aftp_cc *cc, uint64_t now)
{
    if (cc->phase == AFTP_CC_PHASE_DIP)
        cc->dip_end_pn = cc->next_pn;
    cc->phase = AFTP_CC_PHASE_CRUISE;
    cc->phase_start_ns = now;
}

/* How long UP (and DOWN after it) lasts: long enough to be measured over
 * a few feedback intervals, short enough that the queue it builds when the
 * path has no room (UP_GAIN - 1 of it) stays small; never over one RTT. */
static uint64_t up_duration(const aftp_cc *cc)
{
    uint64_t d = max_u64(4 * params_of(cc).target_ns, 3 * cc->feedback_gap_ns);
    return min_u64(d, rtt_estimate(cc));
}

static int cycle_over(const aftp_cc *cc, uint64_t now)
{
    uint64_t rounds = cc->round - cc->cycle_start_round;
    return rounds >= cc->cycle_rounds ||
           (rounds >= CYCLE_SHORT_ROUNDS && now - cc->cycle_start_ns >= cc->cycle_max_ns);
}

/* PROBE_BW phases: UP at the start of a cycle, DOWN as long after, then
 * CRUISE until the cycle's rounds are over. */
static void advance_phase(aftp_cc *cc, uint64_t now)
{
    if (cc->mode != AFTP_CC_MODE_PROBE_BW)
        return;
    uint64_t d = up_duration(cc);
    switch (cc->phase) {
    case AFTP_CC_PHASE_UP:
        if (now - cc->phase_start_ns >= d) {
            cc->phase = AFTP_CC_PHASE_DOWN;
            cc->phase_start_ns = now;
        }
        break;
    case AFTP_CC_PHASE_DOWN:
        if (now - cc->phase_start_ns >= d)
            cruise(cc, now);
        break;
    case AFTP_CC_PHASE_DIP:
        if (now - cc->phase_start_ns >= cc->dip_ns)
            cruise(cc, now);
        break;
    default:
        if (cycle_over(cc, now)) {
            cc->phase = AFTP_CC_PHASE_UP;
            cc->phase_start_ns = now;
            new_cycle(cc, now);
        }
        break;
    }
    update_rate(cc);
}

static void enter_probe_rtt(aftp_cc *cc, uint64_t now)
{
    cc->mode = AFTP_CC_MODE_PROBE_RTT;
    cc->phase_start_ns = now;
    cc->probe_rtt_round = cc->round;
    cc->probe_rtt_min_ns = UINT64_MAX;
}

/* A DIP at PROBE_RTT_GAIN drains a queue of our own in twice its depth,
 * then lasts two feedback intervals more, so that two FEEDBACKs report
 * packets sent on the empty queue (a new minimum takes two samples). */
static void start_dip(aftp_cc *cc, uint64_t now)
{
    uint64_t drain = (uint64_t)((double)cc->qdelay_ns / (1.0 - PROBE_RTT_GAIN));
    cc->dip_ns = drain + 2 * cc->feedback_gap_ns;
    cc->phase = AFTP_CC_PHASE_DIP;
    cc->phase_start_ns = now;
    cc->dip_end_pn = UINT64_MAX;
}

/* The minimum RTT was not seen for MIN_RTT_WINDOW_NS: a DIP first, and
 * PROBE_RTT only when the DIP's packets, all reported, did not show it.
 * A queue above the target, or one we compete for, is not the cruising
 * queue a dip drains: PROBE_RTT at once. */
static void check_min_rtt_fresh(aftp_cc *cc, uint64_t now)
{
    if (now - cc->min_rtt_seen_ns <= MIN_RTT_WINDOW_NS) {
        if (cc->phase != AFTP_CC_PHASE_DIP)
            cc->dip_end_pn = 0;
        return;
    }
    int own_queue = !cc->competing && cc->qdelay_ns <= params_of(cc).target_ns;
    if (cc->dip_end_pn == 0 && own_queue) {
        start_dip(cc, now);
        return;
    }
    /* with no DIP tried, dip_end_pn is 0 */
    if (cc->phase != AFTP_CC_PHASE_DIP && cc->largest_pn >= cc->dip_end_pn) {
        cc->dip_end_pn = 0;
        enter_probe_rtt(cc, now);
    }
}

/* PROBE_RTT is over after its minimum time and two rounds (one to drain,
 * one to measure): its lowest sample is the new minimum. */
static void check_probe_rtt_done(aftp_cc *cc, uint64_t now)
{
    if (now - cc->phase_start_ns < max_u64(PROBE_RTT_MIN_NS, 2 * rtt_estimate(cc)) ||
        cc->round < cc->probe_rtt_round + 2)
        return;
    if (cc->probe_rtt_min_ns != UINT64_MAX)
        cc->min_rtt_ns = cc->probe_rtt_min_ns;
    cc->min_rtt_seen_ns = now;
    start_cycle(cc, now);
}

static void exit_startup(aftp_cc *cc)
{
    cc->mode = AFTP_CC_MODE_DRAIN;
    cc->drain_round = cc->round;
}

/* A queue is congestion when it stands: above the target for longer than
 * the spike of a probe (ours or another flow's, UP then DOWN) lasts. The
 * idea of CoDel, at the sender. */
static uint64_t standing_window(const aftp_cc *cc)
{
    return max_u64(3 * up_duration(cc), STANDING_MIN_NS);
}

static void track_queue(aftp_cc *cc, uint64_t now)
{
    if (cc->qdelay_ns <= params_of(cc).target_ns) {
        cc->queue_above = 0;
    } else if (!cc->queue_above) {
        cc->queue_above = 1;
        cc->queue_since_ns = now;
        cc->queue_bw_bps = cc->bw_bps;
    }
}

static int queue_stands(const aftp_cc *cc)
{
    return cc->queue_above && cc->now_ns - cc->queue_since_ns >= standing_window(cc);
}

/* A deep queue ends startup unless the delivery rate still grew by
 * STARTUP_GROWTH over the last round and the queue is below half the min
 * RTT (at most 4 x the deep threshold): a flow joining a busy path, or one
 * that a host stall queued behind, goes on while it wins share. (Joiners
 * left at an eighth of their share on the emulated WAN; multiplicative
 * probes and cuts then kept the ratio for 20 s.) LOW always stops: it is
 * there to yield to the traffic that holds the queue. */
static uint64_t startup_deep_queue(const aftp_cc *cc)
{
    return min_u64(STARTUP_DEEP_QUEUE * params_of(cc).target_ns, STARTUP_DEEP_QUEUE_MAX_NS);
}

static int deep_queue_ends_startup(const aftp_cc *cc)
{
    uint64_t deep_ns = startup_deep_queue(cc);
    if (cc->sample_qdelay_ns <= deep_ns)
        return 0;
    uint64_t ceiling_ns =
        max_u64(deep_ns, min_u64(rtt_estimate(cc) / 2, STARTUP_DEEP_QUEUE * deep_ns));
    int winning = cc->full_bw_rounds == 0 && cc->cfg.policy != AFTP_CC_LOW;
    return !winning || cc->sample_qdelay_ns > ceiling_ns;
}

/* ---- Careful Resume ---- */

static double loss_excess(const aftp_cc *cc, uint64_t sent, uint64_t lost);

/* Reconnaissance ends with the first RTT sample: a jump when it says the
 * path is the saved one and the jump is faster than startup is now. The
 * handshake's sample may be long by the server's work on it: too long,
 * it leaves the judgement to the first FEEDBACK's. */
static void resume_check_rtt(aftp_cc *cc, uint64_t rtt_ns, int handshake)
{
    double saved = (double)cc->cfg.resume_rtt_ns, rtt = (double)rtt_ns;
    if (cc->resume != AFTP_CC_RESUME_RECON || (handshake && rtt > RESUME_RTT_MAX_FACTOR * saved))
        return;
    cc->resume = AFTP_CC_RESUME_OFF;
    if (rtt < RESUME_RTT_MIN_FRACTION * saved || rtt > RESUME_RTT_MAX_FACTOR * saved)
        return;
    uint64_t jump = clamp_rate(cc, (uint64_t)(RESUME_JUMP_FRACTION * (double)cc->cfg.resume_rate_bps));
    if (jump <= cc->rate_bps)
        return;
    cc->resume = AFTP_CC_RESUME_UNVALIDATED;
    cc->jump_rate_bps = jump;
    cc->jump_first_pn = cc->next_pn;
    cc->jump_data_sent = cc->data_count;
    cc->jump_round = cc->round;
}

void aftp_cc_on_handshake_rtt(aftp_cc *cc, uint64_t rtt_ns)
{
    cc->handshake_rtt_ns = rtt_ns;
    resume_check_rtt(cc, rtt_ns, 1);
    update_rate(cc);
}

/* Confirmed: startup goes on from what the jump delivered. */
static void resume_confirm(aftp_cc *cc)
{
    cc->resume = AFTP_CC_RESUME_OFF;
    cc->full_bw_bps = cc->bw_bps;
    cc->full_bw_rounds = 0;
}

/* Safe Retreat: the path takes no more than the jump delivered; DRAIN
 * empties the queue the jump built, then PROBE_BW as usual. */
static void resume_retreat(aftp_cc *cc, uint64_t delivered_bps)
{
    cc->resume = AFTP_CC_RESUME_OFF;
    bw_lower(cc, min_u64(delivered_bps, cc->jump_rate_bps));
    exit_startup(cc);
}

/* A sample of the jump's own packets (all sent at the jump rate) judges
 * it: delivered at the rate they left at, on no deep queue, without loss
 * beyond chance. */
static void resume_judge(aftp_cc *cc, uint64_t bps, double sent_bps, uint64_t sent, uint64_t lost)
{
    if (cc->resume != AFTP_CC_RESUME_VALIDATING || cc->mark.data_sent < cc->jump_data_sent)
        return;
    if (cc->sample_qdelay_ns > startup_deep_queue(cc) || loss_excess(cc, sent, lost) > 0.0) {
        resume_retreat(cc, bps);
        return;
    }
    int delivered = sent_bps <= 0.0 || (double)bps >= RESUME_CONFIRM_SHARE * sent_bps;
    cc->jump_good = delivered ? cc->jump_good + 1 : 0;
    cc->jump_bad = delivered ? 0 : cc->jump_bad + 1;
    if (cc->jump_good >= RESUME_SAMPLES)
        resume_confirm(cc);
    else if (cc->jump_bad >= RESUME_SAMPLES)
        resume_retreat(cc, bps);
}

/* STARTUP's view of a sample: a Careful Resume jump is judged by it, and
 * loss beyond chance on a queue that has begun to grow is the bottleneck's
 * buffer overflowing (one shallower than the deep-queue bound): startup is
 * over. Loss on an empty queue is the path's random loss and never ends
 * it. */
static void startup_judge(aftp_cc *cc, uint64_t bps, double sent_bps, uint64_t sent, uint64_t lost)
{
    if (cc->mode != AFTP_CC_MODE_STARTUP)
        return;
    if (jumping(cc)) {
        resume_judge(cc, bps, sent_bps, sent, lost);
        return;
    }
    if (cc->sample_qdelay_ns > params_of(cc).target_ns / 2 && loss_excess(cc, sent, lost) > 0.0)
        cc->startup_overflow = 1;
}

/* Unvalidated until the jump's first packet is reported; a jump that no
 * sample could judge is judged by the bandwidth estimate. */
static void check_jump_resolved(aftp_cc *cc, int new_round)
{
    if (cc->resume == AFTP_CC_RESUME_UNVALIDATED && cc->largest_pn >= cc->jump_first_pn)
        cc->resume = AFTP_CC_RESUME_VALIDATING;
    if (!new_round || cc->round < cc->jump_round + RESUME_MAX_ROUNDS)
        return;
    if ((double)cc->bw_bps >= RESUME_CONFIRM_SHARE * (double)cc->jump_rate_bps)
        resume_confirm(cc);
    else
        resume_retreat(cc, cc->bw_bps);
}

/* Startup ends on a plateau (checked once per round), on a deep queue
 * (alone on the path, a doubling rate fills the buffer a round later), or
 * on a standing queue unless the delivery rate still grew while it stood.
 * Random loss never ends it. */
static void check_startup_done(aftp_cc *cc, int new_round, int sampled)
{
    int deep = sampled && deep_queue_ends_startup(cc);
    int standing =
        queue_stands(cc) && (double)cc->bw_bps < STARTUP_QUEUE_GROWTH * (double)cc->queue_bw_bps;
    if (deep || standing || cc->startup_overflow) {
        exit_startup(cc);
        return;
    }
    if (!new_round || cc->bw_bps == 0)
        return;
    if ((double)cc->bw_bps >= STARTUP_GROWTH * (double)cc->full_bw_bps) {
        cc->full_bw_bps = cc->bw_bps;
        cc->full_bw_rounds = 0;
    } else if (++cc->full_bw_rounds >= STARTUP_FLAT_ROUNDS) {
        exit_startup(cc);
    }
}

/* Startup's queue is gone when what is unreported is no more than one
 * RTT of sending plus half a feedback interval. */
static void check_drain_done(aftp_cc *cc, uint64_t now)
{
    uint64_t empty = packets_in(cc, rtt_estimate(cc) + cc->feedback_gap_ns / 2);
    if (aftp_cc_inflight(cc) > empty && cc->round < cc->drain_round + DRAIN_MAX_ROUNDS)
        return;
    /* Samples still in flight saw startup's queue: judge only later ones. */
    cc->hold_until_pn = cc->next_pn;
    cc->queue_above = 0;
    start_cycle(cc, now);
}

/* Loss clearly above the baseline: beyond a margin and beyond chance. */
static double loss_excess(const aftp_cc *cc, uint64_t sent, uint64_t lost)
{
    if (sent < LOSS_MIN_PACKETS)
        return 0.0;
    double n = (double)sent;
    double base = cc->base_loss;
    double p = base > 0.005 ? base : 0.005;
    double limit = n * (base + (base > LOSS_MARGIN ? base : LOSS_MARGIN)) +
                   LOSS_SIGMAS * sqrt(n * p * (1.0 - p));
    if (cc->competing) /* as TCP: any loss the baseline does not explain */
        limit = n * base + 2.0 * sqrt(n * base * (1.0 - base)) + 1.0;
    return (double)lost > limit ? ((double)lost - n * base) / n : 0.0;
}

/* Learn the random loss from samples taken while the queue was empty:
 * loss then cannot come from our own queue overflowing. */
static void learn_base_loss(aftp_cc *cc, uint64_t sent, uint64_t lost)
{
    cc->base_packets += sent;
    double w = (double)sent / fmin((double)cc->base_packets, LOSS_WINDOW_PACKETS);
    double loss = (double)lost / (double)sent;
    cc->base_loss = clamp_d(cc->base_loss + w * (loss - cc->base_loss), 0.0, LOSS_MAX_BASE);
}

/* The CUBIC window's K (seconds to grow back to W_max) for a rate over an
 * RTT of rtt_s: the window is rtt_s seconds of packets at that rate. */
static double cubic_k(const aftp_cc *cc, uint64_t wmax_bps, double rtt_s)
{
    double wmax_packets = (double)wmax_bps * rtt_s / (8.0 * (double)datagram_size(cc));
    return cbrt(wmax_packets * (1.0 - CUBIC_BETA) / CUBIC_C);
}

static double current_rtt_s(const aftp_cc *cc)
{
    return (double)(rtt_estimate(cc) + cc->qdelay_ns) / (double)NS_PER_S;
}

/* FAIR while competing: the rate a CUBIC window would have reached by now
 * since the latest loss cut; otherwise no limit (HIGH is meant to take
 * more than TCP). */
static uint64_t compete_ceiling(const aftp_cc *cc)
{
    if (!cc->competing || cc->cfg.policy != AFTP_CC_FAIR)
        return UINT64_MAX;
    double rtt_s = current_rtt_s(cc);
    double t = (double)(cc->now_ns - cc->compete_epoch_ns) / (double)NS_PER_S;
    double dt = t - cubic_k(cc, cc->compete_wmax_bps, rtt_s);
    double grown_bps = CUBIC_C * dt * dt * dt * 8.0 * (double)datagram_size(cc) / rtt_s;
    double ceiling = (double)cc->compete_wmax_bps + grown_bps;
    return ceiling < (double)RATE_FLOOR_BPS ? RATE_FLOOR_BPS : (uint64_t)fmin(ceiling, 1e18);
}

/* Competing from now on, as a CUBIC window that has just grown back to
 * its W_max at the current rate: it probes beyond, slowly at first. */
static void start_competing(aftp_cc *cc)
{
    double k_ns = cubic_k(cc, cc->bw_bps, current_rtt_s(cc)) * (double)NS_PER_S;
    cc->competing = 1;
    cc->compete_start_ns = cc->now_ns;
    cc->compete_wmax_bps = cc->bw_bps;
    cc->compete_epoch_ns = cc->now_ns - (uint64_t)fmin(k_ns, (double)cc->now_ns);
}

/* Congestion: back off in proportion to the excess (the share of the rate
 * that drains the queue within QUEUE_DRAIN_ROUNDS, or the share of packets
 * lost beyond the baseline) plus the policy's minimum cut, within its
 * maximum. */
static void back_off(aftp_cc *cc, double excess)
{
    policy_params pp = params_of(cc);
    double cut = clamp_d(excess + pp.min_cut, pp.min_cut, pp.max_cut);
    if (cc->competing) {
        cut = fmax(cut, pp.compete_cut);
        cc->compete_wmax_bps = cc->bw_bps;
        cc->compete_epoch_ns = cc->now_ns;
    }
    bw_lower(cc, (uint64_t)((double)cc->bw_bps * (1.0 - cut)));
    /* Packets sent until the queue seen now has drained (at the cut's
     * pace, within a round) still meet it: they must not cause another
     * cut, nor their receive rate undo this one. */
    uint64_t drain_ns = (uint64_t)((double)cc->sample_qdelay_ns / cut);
    cc->hold_until_pn = UINT64_MAX;
    cc->hold_release_ns = cc->now_ns + min_u64(drain_ns, rtt_estimate(cc));
    cc->congestion_events++;
    cc->queue_above = 0;
    if (cc->mode == AFTP_CC_MODE_PROBE_BW && cc->phase != AFTP_CC_PHASE_CRUISE)
        cruise(cc, cc->now_ns);
}

/* Cuts that leave the queue as deep as before: it is not ours (the route
 * got longer, or traffic that does not back off on delay holds it).
 * Measure the minimum RTT again rather than backing off to nothing; when
 * that happens again soon after, the queue belongs to loss-based traffic
 * (TCP): compete, judging only loss until the queue is gone. LOW does
 * neither: it is there to yield to such traffic. */
static void note_queue_cut(aftp_cc *cc)
{
    int futile = (double)cc->sample_qdelay_ns >= FUTILE_SHRINK * (double)cc->last_cut_qdelay_ns;
    cc->futile_cuts = futile ? cc->futile_cuts + 1 : 0;
    cc->last_cut_qdelay_ns = cc->sample_qdelay_ns;
    if (cc->futile_cuts < FUTILE_CUTS || params_of(cc).compete_cut == 0.0)
        return;
    cc->futile_cuts = 0;
    if (cc->futile_probe_ns != 0 && cc->now_ns - cc->futile_probe_ns < COMPETE_AFTER_NS) {
        start_competing(cc);
        return;
    }
    cc->futile_probe_ns = cc->now_ns;
    enter_probe_rtt(cc, cc->now_ns);
}

/* Loss is judged over whole rounds (a few packets say little about a
 * rate of a few percent); the queue on every sample. */
static void check_congestion(aftp_cc *cc, uint64_t sent, uint64_t lost)
{
    policy_params pp = params_of(cc);
    if (cc->competing && cc->sample_qdelay_ns <= pp.target_ns / 2) {
        cc->competing = 0; /* the queue is gone: delay is a signal again */
        if (cc->now_ns - cc->compete_start_ns >= COMPETE_LONG_NS)
            cc->compete_end_ns = cc->now_ns;
    }
    cc->window_sent += sent;
    cc->window_lost += lost;
    double lx = 0.0;
    if (cc->round != cc->window_round && cc->window_sent >= LOSS_MIN_PACKETS) {
        lx = loss_excess(cc, cc->window_sent, cc->window_lost);
        cc->window_sent = cc->window_lost = 0;
        cc->window_round = cc->round;
    }
    if (lx > 0.0) {
        back_off(cc, lx);
    } else if (queue_stands(cc) && !cc->competing) {
        if (cc->compete_end_ns != 0 && cc->now_ns - cc->compete_end_ns < COMPETE_MEMORY_NS) {
            cc->competing = 1; /* growing on from its latest loss cut */
            cc->compete_start_ns = cc->now_ns;
            return;
        }
        double excess_ns = (double)(cc->sample_qdelay_ns - pp.target_ns / 2);
        note_queue_cut(cc);
        back_off(cc, excess_ns / (double)(QUEUE_DRAIN_ROUNDS * rtt_estimate(cc)));
    }
}

/* Packets of a sample that went through the bottleneck: all those sent in
 * it (between the two largest_pn) when the loss is the path's random loss,
 * which strikes after the bottleneck. That is the receive rate / (1 -
 * loss) without the loss's own noise. Packets beyond what the baseline
 * explains (plus chance) were dropped at the bottleneck queue: then only
 * got / (1 - baseline) passed it. */
static uint64_t passed_bottleneck(const aftp_cc *cc, uint64_t sent, uint64_t got)
{
    double p = cc->base_loss;
    double explained = (double)got / (1.0 - p) + 2.0 * sqrt((double)sent * p * (1.0 - p)) + 1.0;
    return (double)sent <= explained ? sent : (uint64_t)explained;
}

/* The rate a sample's packets went out at, on our own clock; 0: unknown.
 * A path delivers no faster than that: a higher receive rate comes from
 * arrivals the receiver stamped late and then in a bunch (a busy host,
 * a bursty link), as BBR's delivery rate is capped by its send rate. */
static double send_rate(const aftp_cc *cc, const aftp_cc_mark *now_mark, uint64_t sent)
{
    if (cc->mark.sent_ns == 0 || now_mark->sent_ns <= cc->mark.sent_ns)
        return 0.0;
    return (double)sent * (double)datagram_size(cc) * 8.0 * 1e9 /
           (double)(now_mark->sent_ns - cc->mark.sent_ns);
}

/* One receive-rate sample between the mark and this FEEDBACK: the rate,
 * the loss, and what they say about congestion. */
static void take_sample(aftp_cc *cc, const aftp_cc_mark *now_mark)
{
    uint64_t dt_us = now_mark->recv_time_us - cc->mark.recv_time_us;
    uint64_t got = now_mark->packets_received - cc->mark.packets_received;
    uint64_t sent = now_mark->data_sent - cc->mark.data_sent;
    uint64_t lost = sent > got ? sent - got : 0;
    double bps = (double)passed_bottleneck(cc, sent, got) * (double)datagram_size(cc) * 8.0 *
                 1e6 / (double)dt_us;
    double sent_bps = send_rate(cc, now_mark, sent);
    if (sent_bps > 0.0 && sent_bps < bps)
        bps = sent_bps;
    bw_add_sample(cc, (uint64_t)bps);
    startup_judge(cc, (uint64_t)bps, sent_bps, sent, lost);
    cc->recent_loss = sent ? (double)lost / (double)sent : 0.0;
    uint64_t events = cc->congestion_events;
    if (cc->mode == AFTP_CC_MODE_PROBE_BW)
        check_congestion(cc, sent, lost);
    /* With the queue empty, loss cannot be our own overflow: it is the
     * path's random loss. */
    int queue_empty = cc->sample_qdelay_ns <= params_of(cc).target_ns / 2;
    if (queue_empty && events == cc->congestion_events && sent > 0)
        learn_base_loss(cc, sent, lost);
}

static uint64_t sample_span(const aftp_cc *cc)
{
    uint64_t span = min_u64(rtt_estimate(cc) / 4, SPAN_MAX_NS);
    return max_u64(span, SPAN_MIN_NS);
}

/* Spacing of FEEDBACKs on the receiver's clock (gaps between files
 * excluded): data that arrived but is not yet reported. */
static void note_feedback_gap(aftp_cc *cc, uint64_t recv_time_us)
{
    if (cc->last_recv_time_us != 0 && recv_time_us > cc->last_recv_time_us) {
        uint64_t gap = min_u64((recv_time_us - cc->last_recv_time_us) * 1000, FEEDBACK_GAP_MAX_NS);
        cc->feedback_gap_ns = (7 * cc->feedback_gap_ns + gap) / 8;
    }
    cc->last_recv_time_us = recv_time_us;
}

static void restart_span(aftp_cc *cc, const aftp_cc_mark *m)
{
    cc->mark = *m;
    cc->span_min_qdelay_ns = UINT64_MAX;
}

/* A FEEDBACK is in order while largest_pn left no more after the settled
 * packet than losses not yet declared explain: twice the baseline loss of
 * a round trip (those a loss threshold holds count as settled already),
 * plus a margin for a loss rate not yet learnt (15%: a start on a 10%
 * path leaves 11% of a round trip unsettled) and for jitter, which holds
 * single packets back and leaves few unsettled. An early packet that
 * skipped the one-way delay left half a round trip after the settled
 * packet. Judged in packets and in time, either one enough: the count
 * catches an early packet while the sender sends in bursts (start-up:
 * what it overtook left close together), the time one while the rate
 * changed within the round trip (a jump held by its inflight bound, then
 * released, sent few packets in the span an early packet overtook). A
 * handful of unsettled packets is no reordering worth measuring around:
 * on a lossy path's slow tail it is an earlier burst's losses whose
 * FEEDBACKs were lost. */
#define REORDER_LOSS_MARGIN 0.15
#define REORDER_MIN_PACKETS AFTP_CC_INITIAL_WINDOW

int aftp_cc_overtaken(const aftp_cc *cc, uint64_t unsettled, uint64_t sent_in_rtt,
                      uint64_t lead_ns)
{
    double share = 2.0 * cc->base_loss + REORDER_LOSS_MARGIN;
    return unsettled > REORDER_MIN_PACKETS &&
           ((double)unsettled > share * (double)sent_in_rtt ||
            (double)lead_ns > share * (double)aftp_cc_rtt(cc));
}

uint64_t aftp_cc_rtt(const aftp_cc *cc)
{
    return rtt_estimate(cc) + cc->feedback_gap_ns;
}

/* Receive-rate bookkeeping; 1 when a sample was taken. */
static int measure(aftp_cc *cc, const aftp_cc_feedback *fb)
{
    /* When largest_pn arrived, on the receiver's clock. */
    uint64_t delay_us = fb->ack_delay_ns / 1000;
    uint64_t arrived_us = fb->recv_time_us > delay_us ? fb->recv_time_us - delay_us : 0;
    uint64_t sent_ns = fb->rtt_ns > 0 && fb->rtt_ns < fb->now_ns ? fb->now_ns - fb->rtt_ns : 0;
    uint64_t data_sent = fb->rtt_settled && fb->data_sent != AFTP_CC_UNKNOWN ? fb->data_settled
                                                                             : fb->data_sent;
    aftp_cc_mark m = {arrived_us, fb->packets_received, data_sent, sent_ns};
    note_feedback_gap(cc, fb->recv_time_us);
    cc->span_min_qdelay_ns = min_u64(cc->span_min_qdelay_ns, cc->qdelay_ns);
    if (fb->data_sent == AFTP_CC_UNKNOWN) {
        cc->has_mark = 0; /* nothing to measure from */
        return 0;
    }
    /* Packets sent before a back-off still show the old rate: measure
     * afresh once they are reported. */
    if (!cc->has_mark || fb->largest_pn < cc->hold_until_pn ||
        m.recv_time_us < cc->mark.recv_time_us || m.packets_received < cc->mark.packets_received ||
        m.data_sent < cc->mark.data_sent) {
        cc->has_mark = fb->largest_pn >= cc->hold_until_pn;
        restart_span(cc, &m);
        return 0;
    }
    if ((m.recv_time_us - cc->mark.recv_time_us) * 1000 < sample_span(cc))
        return 0;
    cc->sample_qdelay_ns = cc->span_min_qdelay_ns;
    take_sample(cc, &m);
    restart_span(cc, &m);
    return 1;
}

static int next_round(aftp_cc *cc)
{
    if (cc->largest_pn < cc->round_end_pn)
        return 0;
    cc->round++;
    cc->round_end_pn = cc->next_pn;
    bw_new_round(cc);
    return 1;
}

static void step_mode(aftp_cc *cc, uint64_t now, int new_round, int sampled)
{
    switch (cc->mode) {
    case AFTP_CC_MODE_STARTUP:
        if (jumping(cc))
            check_jump_resolved(cc, new_round);
        else
            check_startup_done(cc, new_round, sampled);
        break;
    case AFTP_CC_MODE_DRAIN: check_drain_done(cc, now); break;
    case AFTP_CC_MODE_PROBE_RTT: check_probe_rtt_done(cc, now); break;
    case AFTP_CC_MODE_PROBE_BW: check_min_rtt_fresh(cc, now); break;
    default: break;
    }
}

void aftp_cc_on_feedback(aftp_cc *cc, const aftp_cc_feedback *fb)
{
    if (cc->has_largest && fb->largest_pn <= cc->largest_pn)
        return;
    cc->now_ns = fb->now_ns;
    cc->has_largest = 1;
    cc->largest_pn = fb->largest_pn;
    if (fb->data_sent != AFTP_CC_UNKNOWN && fb->data_sent > cc->data_reported)
        cc->data_reported = min_u64(fb->data_sent, cc->data_count);
    if (fb->rtt_ns > 0) {
        uint64_t rtt = fb->rtt_ns > fb->ack_delay_ns ? fb->rtt_ns - fb->ack_delay_ns : fb->rtt_ns;
        update_min_rtt(cc, rtt, fb->now_ns, fb->rtt_settled);
        track_queue(cc, fb->now_ns);
        resume_check_rtt(cc, cc->min_rtt_ns, 0);
    }
    int new_round = next_round(cc);
    int sampled = measure(cc, fb);
    step_mode(cc, fb->now_ns, new_round, sampled);
    advance_phase(cc, fb->now_ns);
    update_rate(cc);
}

void aftp_cc_on_sent(aftp_cc *cc, uint64_t now_ns, uint64_t pn, uint64_t bytes, int is_data)
{
    cc->next_pn = pn + 1;
    cc->now_ns = now_ns;
    if (cc->hold_until_pn == UINT64_MAX && now_ns >= cc->hold_release_ns)
        cc->hold_until_pn = pn;
    if (is_data) {
        cc->datagram_bytes = max_u64(cc->datagram_bytes, bytes);
        cc->data_count++;
    }
    advance_phase(cc, now_ns);
}

void aftp_cc_init(aftp_cc *cc, const aftp_cc_config *cfg, uint64_t now_ns)
{
    memset(cc, 0, sizeof *cc);
    cc->cfg = *cfg;
    cc->rng = cfg->seed;
    cc->feedback_gap_ns = FEEDBACK_GAP_DEFAULT_NS;
    cc->min_rtt_seen_ns = now_ns;
    cc->mode = cfg->policy == AFTP_CC_FIXED ? AFTP_CC_MODE_FIXED : AFTP_CC_MODE_STARTUP;
    /* LOW yields to whatever holds the path: it does not jump. */
    if (cfg->resume_rate_bps != 0 && cfg->resume_rtt_ns != 0 &&
        cc->mode == AFTP_CC_MODE_STARTUP && cfg->policy != AFTP_CC_LOW)
        cc->resume = AFTP_CC_RESUME_RECON;
    update_rate(cc);
}

void aftp_cc_stats(const aftp_cc *cc, aftp_stats *out)
{
    out->pacing_rate_bps = cc->rate_bps;
    out->delivery_rate_bps = (uint64_t)((double)cc->bw_bps * (1.0 - cc->base_loss));
    out->loss_ppm = (uint64_t)(cc->base_loss * 1e6);
    out->recent_loss_ppm = (uint64_t)(cc->recent_loss * 1e6);
    out->queue_delay_ns = cc->qdelay_ns;
    out->path_min_rtt_ns = cc->min_rtt_ns;
    out->inflight_packets = aftp_cc_inflight(cc);
    out->inflight_cap_packets = aftp_cc_inflight_cap(cc);
    out->congestion_events = cc->congestion_events;
    out->cc_mode = cc->mode;
}
