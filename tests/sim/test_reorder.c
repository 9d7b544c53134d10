/* Reordering on the data path is not loss (spec 9.2 step 7, 9.9, 10.3,
 * 14.5.4), over the simulated 1 Gbit/s, 150 ms path of issue 21's
 * profiles. No packet is lost on the way but what the bottleneck's queue
 * drops while the fair sender ramps up; the reordered packets either skip
 * the whole 75 ms one-way delay (netem's reorder: each overtakes some
 * 6,000 packets at full rate) or are held back a few ms (as jitter does).
 *
 * Held back: the repairs are at most what the path lost plus 0.2% of the
 * file (a packet threshold repaired each late packet: 0.45% of the file
 * beyond the loss here). Skipping the
 * delay: the transfer completes byte-exact with no idle timeout (before,
 * a flight of repairs the receiver dropped unopened filled the sender's
 * inflight cap and the session went silent), and repairs are at most what
 * the path lost plus 0.5% of the file (before: 27% of the file at 1% and
 * 0.1%, 43% at 0.1% on the emulated link: the overtaking packets are the
 * largest_pn of nearly every FEEDBACK at a high rate, and their RTT
 * samples, the one-way delay plus the queue, made the loss threshold
 * shorter than the round trip of the packets they overtook; spec 10.1 now
 * samples the settled packet instead), in about the time the same path
 * takes in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim_run.h"

#define LINK_BPS UINT64_C(1000000000)
#define ONE_WAY_NS (75 * SIM_MS)
#define FILE_BYTES (UINT64_C(64) << 20)

/* The path: 1 Gbit/s, 75 ms each way, a queue of one bandwidth-delay
 * product; a fair sender that may use all of it. */
static void wan_path(sim_cfg *c)
{
    sim_cfg_default(c);
    c->file_size = FILE_BYTES;
    c->policy = AFTP_CC_FAIR;
    c->rate_bps = LINK_BPS;
    c->fwd = (sim_link_cfg){.rate_bps = LINK_BPS, .delay_ns = ONE_WAY_NS,
                            .queue_bytes = LINK_BPS / 8 * 2 * ONE_WAY_NS / SIM_S};
    c->rev = c->fwd;
    c->idle_timeout_ns = 30 * SIM_S;
    c->time_limit_ns = 120 * SIM_S;
}

/* Byte-exact, both ends closed with no error (no idle timeout). */
static void run_reordered(const char *name, sim_cfg *c, sim_result *r)
{
    sim_run(c, r);
    sim_report(name, c, r);
    sim_expect_clean_end(r);
    assert_true(sim_file_intact(&r->st, 1));
    assert_int_equal(r->rcv.payload_bytes_received, c->file_size);
    printf("[sim] %s: retransmitted %llu bytes, the path lost %llu\n", name,
           (unsigned long long)r->snd.payload_bytes_retransmitted,
           (unsigned long long)r->fwd_data_lost);
}

/* A share of the DATA skips the delay: byte-exact, no idle timeout,
 * repairs within what the path lost plus 0.5% of the file. */
static void early_case(const char *name, double share, uint64_t seed)
{
    sim_cfg c;
    sim_result r;
    wan_path(&c);
    c.fwd.reorder = share;
    c.fwd.reorder_ns = ONE_WAY_NS;
    c.fwd.reorder_early = 1;
    c.seed = seed;
    run_reordered(name, &c, &r);
    assert_true(r.snd.payload_bytes_retransmitted - r.snd.payload_bytes_copied <=
                r.fwd_data_lost + c.file_size / 200);
    sim_result_free(&r);
}

/* 1%. Before, each early packet got the ones it overtook declared lost;
 * their repairs arrived after the originals, were dropped unopened, and
 * once a whole flight was such repairs the sender's inflight cap stayed
 * full with every block held: the session went silent until the idle
 * timeout (5.4 MB of 128 MiB on the emulated link). */
static void test_early_1pct(void **state)
{
    (void)state;
    early_case("early 1%", 0.01, 71);
}

/* 0.1%: the same end, by the same way, on the reference before. */
static void test_early_01pct(void **state)
{
    (void)state;
    early_case("early 0.1%", 0.001, 72);
}

/* 1% of the DATA and of the FEEDBACK held back 5 ms (hundreds of packets
 * at the rate): not loss either. */
static void test_late_1pct_both_ways(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    wan_path(&c);
    c.fwd.reorder = c.rev.reorder = 0.01;
    c.fwd.reorder_ns = c.rev.reorder_ns = 5 * SIM_MS;
    c.seed = 73;
    run_reordered("late 1%", &c, &r);
    /* Tail copies (spec 9.9.1) are redundancy the sender chose: not repairs. */
    assert_true(r.snd.payload_bytes_retransmitted - r.snd.payload_bytes_copied <=
                r.fwd_data_lost + c.file_size / 500);
    sim_result_free(&r);
}

/* A repeat contact: the path's rate and RTT remembered (Careful Resume,
 * spec 13.4), as an earlier transfer on it measured them. */
static void remember_path(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    (void)r;
    s->resume_rate_bps = LINK_BPS / 100 * 98;
    s->resume_rtt_ns = 2 * ONE_WAY_NS;
}

/* How a timed run's path is reordered and its sender starts. */
typedef struct timed_case {
    double share;      /* of the packets that skip the one-way delay; 0: in order */
    int both_ways;     /* the FEEDBACKs too, as the emulated profile's are */
    int repeat;        /* a repeat contact (remember_path), else a first one */
} timed_case;

static void reorder_early(sim_link_cfg *l, double share)
{
    l->reorder = share;
    l->reorder_ns = ONE_WAY_NS;
    l->reorder_early = 1;
}

/* Completion time of the file on the path as `tc` says, with `share` of
 * its packets reordered; *retx gets the retransmitted bytes beyond what
 * the path lost (the start's overshoot; tail copies, spec 9.9.1, are
 * redundancy the sender chose, not repairs), *cuts the controller's
 * congestion events. */
static uint64_t timed_run(const timed_case *tc, double share, uint64_t seed, uint64_t *retx,
                          uint64_t *cuts)
{
    sim_cfg c;
    sim_result r;
    wan_path(&c);
    c.file_size = 2 * FILE_BYTES;
    if (tc->repeat)
        c.tune = remember_path;
    reorder_early(&c.fwd, share);
    if (tc->both_ways)
        reorder_early(&c.rev, share);
    c.seed = seed;
    run_reordered(share > 0 ? "early, timed" : "in order, timed", &c, &r);
    uint64_t done = r.snd_side.ev.file_end_at;
    uint64_t repaired = r.snd.payload_bytes_retransmitted - r.snd.payload_bytes_copied;
    *retx = repaired > r.fwd_data_lost ? repaired - r.fwd_data_lost : 0;
    *cuts = r.snd.congestion_events;
    sim_result_free(&r);
    return done;
}

/* Reordering is not congestion (spec 10.1, 13.4): with a share of the
 * packets skipping the one-way delay, the file takes at most 10% longer
 * than on the same path in order, no more than 0.5% of it is sent twice
 * beyond what the path lost, and the controller cuts no more often than in order.
 * Before, every FEEDBACK's largest_pn was an early packet: min RTT fell to
 * the one-way delay, the whole path looked like queue, the overtaken
 * packets counted as lost, and the rate fell to 2-8% of the link. */
static void reorder_costs_little(const timed_case *tc, uint64_t seed)
{
    uint64_t retx, cuts, retx0, cuts0;
    uint64_t base = timed_run(tc, 0.0, seed, &retx0, &cuts0);
    uint64_t reordered = timed_run(tc, tc->share, seed, &retx, &cuts);
    printf("[sim] early %.1f%%%s%s: %.3f s against %.3f s in order (x%.3f), %llu cuts against "
           "%llu\n", 100 * tc->share, tc->both_ways ? " both ways" : "",
           tc->repeat ? ", repeat contact" : "", (double)reordered / 1e9, (double)base / 1e9,
           (double)reordered / (double)base, (unsigned long long)cuts, (unsigned long long)cuts0);
    assert_true(base > 0 && reordered > 0);
    assert_true((double)reordered <= 1.10 * (double)base);
    assert_true(retx <= 2 * FILE_BYTES / 200);
    /* Startup leaves later, on settled samples, and its overshoot drops
     * more at the bottleneck (11.5 MB against 3.8 MB at 1%): at most two
     * cuts follow those real drops; reordering itself causes none (before:
     * a cut per round at 0.1%). */
    assert_true(cuts <= cuts0 + 2);
}

static void test_early_1pct_costs_little(void **state)
{
    (void)state;
    reorder_costs_little(&(timed_case){.share = 0.01}, 74);
}

static void test_early_01pct_costs_little(void **state)
{
    (void)state;
    reorder_costs_little(&(timed_case){.share = 0.001}, 75);
}

/* Both ways, as the emulated profile reorders: an early FEEDBACK's round
 * trip is short by the delay it skipped. */
static void test_early_1pct_both_ways_costs_little(void **state)
{
    (void)state;
    reorder_costs_little(&(timed_case){.share = 0.01, .both_ways = 1}, 76);
}

/* A repeat contact, whose start jumps to half the remembered rate and is
 * judged by what the jump's packets deliver against its min RTT, both
 * ways reordered. */
static void test_early_1pct_repeat_costs_little(void **state)
{
    (void)state;
    reorder_costs_little(&(timed_case){.share = 0.01, .both_ways = 1, .repeat = 1}, 77);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_early_1pct),
        cmocka_unit_test(test_early_01pct),
        cmocka_unit_test(test_late_1pct_both_ways),
        cmocka_unit_test(test_early_1pct_costs_little),
        cmocka_unit_test(test_early_01pct_costs_little),
        cmocka_unit_test(test_early_1pct_both_ways_costs_little),
        cmocka_unit_test(test_early_1pct_repeat_costs_little),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
