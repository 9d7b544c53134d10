/* The receiver's FEEDBACK sweep (spec sections 6.7.3, 9.8) where it
 * matters: at a high bandwidth x delay x loss product far more blocks go
 * missing per RTT than one FEEDBACK can list. Successive FEEDBACKs must
 * sweep the whole outstanding area (scan_start moving on) instead of
 * repeating its head, whose repairs are already in flight, so the sender
 * learns of every loss within about an RTT and the transfer ends close to
 * size / rate / (1 - loss). A tap on the reverse link counts the distinct
 * blocks reported missing per RTT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_bitmap.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define BLOCK AFTP_WIRE_DEFAULT_BLOCK

typedef struct sweep_tap {
    uint64_t block_count;
    uint64_t window_ns;       /* one RTT */
    uint64_t window_start;
    aftp_bitmap reported;     /* blocks listed missing in the current window */
    uint64_t window_distinct; /* ... how many */
    uint64_t max_distinct;    /* the most in any window */
    uint64_t max_listed;      /* the most blocks one FEEDBACK listed */
    uint64_t feedbacks;
    uint64_t past_head;       /* FEEDBACKs whose list starts above cum_block */
} sweep_tap;

static void tap_new_window(sweep_tap *t, uint64_t now)
{
    aftp_bitmap_free(&t->reported);
    assert_int_equal(aftp_bitmap_init(&t->reported, t->block_count), AFTP_OK);
    t->window_start = now;
    t->window_distinct = 0;
}

static uint64_t tap_max_distinct(const sweep_tap *t)
{
    return t->window_distinct > t->max_distinct ? t->window_distinct : t->max_distinct;
}

/* Records, never drops. */
static int tap_feedback(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    sweep_tap *t = ctx;
    aftp_wire_packet p;
    if (aftp_wire_decode(pkt, len, &p) != AFTP_OK || p.hdr.type != AFTP_WIRE_FEEDBACK)
        return 1;
    if (now >= t->window_start + t->window_ns) {
        t->max_distinct = tap_max_distinct(t);
        tap_new_window(t, now);
    }
    const aftp_wire_feedback *fb = &p.u.feedback;
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    uint64_t listed = 0;
    aftp_wire_range_iter_init(&it, fb);
    while (aftp_wire_ranges_next(&it, &rg)) {
        for (uint64_t b = rg.start; b < rg.start + rg.len; b++)
            t->window_distinct += (uint64_t)aftp_bitmap_set(&t->reported, b);
        listed += rg.len;
    }
    if (listed > t->max_listed)
        t->max_listed = listed;
    t->feedbacks++;
    t->past_head += fb->scan_start > fb->cum_block;
    return 1;
}

/* One file over a path of `rtt_ms` with `loss` on DATA (FEEDBACK clean),
 * the bottleneck twice the pacing rate so only random loss costs time. */
static void run_lossy_bdp(uint64_t size, uint64_t rate_bps, uint64_t rtt_ms, double loss,
                          sweep_tap *t, sim_cfg *c, sim_result *r)
{
    sim_cfg_default(c);
    c->file_size = size;
    c->rate_bps = rate_bps;
    c->fwd = (sim_link_cfg){.rate_bps = 2 * rate_bps, .delay_ns = rtt_ms * SIM_MS / 2,
                            .loss = loss};
    c->rev = (sim_link_cfg){.rate_bps = 2 * rate_bps, .delay_ns = rtt_ms * SIM_MS / 2};
    c->idle_timeout_ns = 30 * SIM_S;
    c->seed = 71;
    memset(t, 0, sizeof *t);
    t->block_count = aftp_wire_block_count(size, BLOCK);
    t->window_ns = rtt_ms * SIM_MS;
    tap_new_window(t, 0);
    c->rev_tap = tap_feedback;
    c->rev_tap_ctx = t;
    c->cipher = AFTP_CIPHER_NONE; /* the tap reads FEEDBACK in clear */
    sim_run(c, r);
    sim_report("sweep", c, r);
    printf("[sim] sweep: %llu FEEDBACKs, %llu past the head, at most %llu blocks in one, "
           "at most %llu distinct missing blocks reported per RTT\n",
           (unsigned long long)t->feedbacks, (unsigned long long)t->past_head,
           (unsigned long long)t->max_listed, (unsigned long long)tap_max_distinct(t));
    aftp_bitmap_free(&t->reported);
}

/* 300 MB at 5 Gbit/s over 300 ms with 10% DATA loss: ~13 000 blocks are
 * lost per RTT, a FEEDBACK lists ~760. Measured: 3.1 s with the sweep,
 * 11.8 s when every FEEDBACK restarted at cum_block (about 1 400 distinct
 * blocks reported per RTT, so the sender learnt of a tenth of the losses
 * an RTT). The bound: handshake (2 RTTs), the first pass at the rate, and
 * 10 RTTs of repair rounds (each round loses 10% of the last: ~5 rounds). */
static void test_sweep_reports_every_loss_within_an_rtt(void **state)
{
    (void)state;
    const uint64_t size = UINT64_C(300000000), rate = UINT64_C(5000000000), rtt_ms = 300;
    const double loss = 0.10;
    sweep_tap t;
    sim_cfg c;
    sim_result r;
    run_lossy_bdp(size, rate, rtt_ms, loss, &t, &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_OK);
    assert_int_equal(r.rcv_error, AFTP_OK);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_OK);
    assert_true(sim_file_intact(&r.st, 1));

    /* The sweep ran: lists started past the head, and one RTT saw many
     * FEEDBACKs' worth of distinct missing blocks, at least half of the
     * blocks the link loses in an RTT. */
    double lost_per_rtt = loss * (double)rate * (double)rtt_ms / 1000.0 / 8.0 /
                          (double)(AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED + BLOCK);
    assert_true(t.past_head > 0);
    assert_true(tap_max_distinct(&t) > 4 * t.max_listed);
    assert_true((double)tap_max_distinct(&t) >= lost_per_rtt / 2);
    /* Sweeping never makes the sender resend a block in flight (tail
     * copies, spec 9.9.1, are redundancy it chose: not repairs). */
    assert_true(r.snd.payload_bytes_retransmitted - r.snd.payload_bytes_copied <=
                r.fwd_data_lost + r.fwd_data_lost / 20);

    uint64_t rtt_ns = rtt_ms * SIM_MS;
    double bound = (double)(2 * rtt_ns) + (double)size * 8e9 / (double)rate / (1.0 - loss) +
                   (double)(10 * rtt_ns);
    assert_true((double)r.snd_side.ev.file_end_at < bound);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_reports_every_loss_within_an_rtt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
