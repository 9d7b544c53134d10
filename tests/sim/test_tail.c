/* The end of a transfer: after FILE_DONE the receiver reports the tail
 * every feedback interval while blocks are missing (spec 9.8), and a
 * repair sent once every block went out gets a second copy while
 * capacity is idle (9.9.1), so a lost tail block costs one detection
 * round and a lost tail repair no second one. Over the simulated
 * 1 Gbit/s, 150 ms path of issue 21's profiles, from the last block sent
 * for the first time (T) on, in round trips of virtual time:
 * - the file's last block lost (a chosen loss): its repair leaves within
 *   one detection round of T (a loss delay, 9/8 of the largest recent
 *   RTT, and a FEEDBACK: 1.5), where the one FEEDBACK at FILE_DONE came
 *   too early and the repair waited for the control timer (3.1 RTT
 *   one-file, 2.1 pipelined);
 * - the last block and its first repair lost: the same bound, where a
 *   second detection round took it past 2.9;
 * - 1% random loss, the median of five seeds: the sender closes within
 *   2.5 round trips of T (one detection round, the last repair's flight,
 *   the FILE_RESULT's way back, the quick close), where lost tail repairs
 *   made it 3.2; every run byte-exact, and the retransmitted share at
 *   most the share the link lost plus 1 point (copies: at most 1/128 of
 *   the blocks). One-file and pipelined sessions alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_tail.h"

#define LINK_BPS UINT64_C(1000000000)
#define RTT_NS (150 * SIM_MS)
#define SEEDS 5

static void pipelined(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = 64;
    r->pipeline_window = 64;
}

static void one_file(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = 0;
    r->pipeline_window = 0;
}

static void wan(sim_cfg *c, uint64_t bytes, double loss, int pipeline, sim_tail *t)
{
    sim_cfg_wan(c, LINK_BPS, RTT_NS / SIM_MS, loss);
    c->file_size = bytes;
    c->cipher = AFTP_CIPHER_NONE;
    c->tune = pipeline ? pipelined : one_file;
    sim_tail_attach(c, t);
}

/* Byte-exact, clean end, the retransmitted share within the share the
 * link lost plus 1 point, and the copies within their bound (1/128 of the
 * blocks; a block is less than 1500 bytes here). */
static void expect_exact(const sim_cfg *c, const sim_result *r)
{
    sim_expect_clean_end(r);
    assert_true(sim_file_intact((sim_storage *)&r->st, 1));
    assert_true(r->snd.payload_bytes_retransmitted <= r->fwd_data_lost + c->file_size / 100);
    assert_true(r->snd.payload_bytes_copied <= c->file_size / 128 + 1500);
}

/* The file's last block lost `drops` times: the last DATA leaves within
 * one detection round of the last new block (1.5 round trips). */
static void lost_tail(int pipeline, int drops)
{
    sim_cfg c;
    sim_result r;
    sim_tail t = {0};
    sim_tail_split sp;
    wan(&c, UINT64_C(128) << 20, 0, pipeline, &t);
    c.block_size = 1024;
    sim_tail_drop d = {.block = c.file_size / c.block_size - 1, .drops = drops};
    c.fwd_filter = sim_tail_drop_first_sends;
    c.fwd_filter_ctx = &d;
    sim_run(&c, &r);
    sim_tail_split_of(&t, r.snd_side.ev.closed_at, &sp);
    double repairs = (double)(sp.last_data_at - sp.last_new_at) / (double)RTT_NS;
    printf("[sim] %s, last block lost %d times: last DATA %.2f RTT after the last new block, "
           "%d sends of it, sender closed %.2f RTT after\n",
           pipeline ? "pipelined" : "one-file", drops, repairs, d.seen,
           (double)(sp.closed_at - sp.last_new_at) / (double)RTT_NS);
    expect_exact(&c, &r);
    assert_true(d.seen > drops);
    assert_true(repairs < 1.5);
    sim_tail_free(&t);
    sim_result_free(&r);
}

static void test_lost_last_block_one_file(void **state)
{
    (void)state;
    lost_tail(0, 1);
}

static void test_lost_last_block_pipelined(void **state)
{
    (void)state;
    lost_tail(1, 1);
}

static void test_lost_tail_repair_one_file(void **state)
{
    (void)state;
    lost_tail(0, 2);
}

static void test_lost_tail_repair_pipelined(void **state)
{
    (void)state;
    lost_tail(1, 2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void tail_at_one_percent(int pipeline)
{
    double tail[SEEDS];
    for (int seed = 1; seed <= SEEDS; seed++) {
        sim_cfg c;
        sim_result r;
        sim_tail t = {0};
        sim_tail_split sp;
        wan(&c, UINT64_C(256) << 20, 0.01, pipeline, &t);
        c.seed = (uint64_t)seed;
        sim_run(&c, &r);
        sim_tail_split_of(&t, r.snd_side.ev.closed_at, &sp);
        tail[seed - 1] = (double)(sp.closed_at - sp.last_new_at) / (double)RTT_NS;
        printf("[sim] %s, 1%% loss, seed %d: sender closed %.2f RTT after the last new block; "
               "retransmitted %llu bytes, the link lost %llu\n",
               pipeline ? "pipelined" : "one-file", seed, tail[seed - 1],
               (unsigned long long)r.snd.payload_bytes_retransmitted,
               (unsigned long long)r.fwd_data_lost);
        expect_exact(&c, &r);
        sim_tail_free(&t);
        sim_result_free(&r);
    }
    qsort(tail, SEEDS, sizeof tail[0], cmp_double);
    assert_true(tail[SEEDS / 2] <= 2.5);
}

static void test_tail_at_one_percent_one_file(void **state)
{
    (void)state;
    tail_at_one_percent(0);
}

static void test_tail_at_one_percent_pipelined(void **state)
{
    (void)state;
    tail_at_one_percent(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lost_last_block_one_file),
        cmocka_unit_test(test_lost_last_block_pipelined),
        cmocka_unit_test(test_lost_tail_repair_one_file),
        cmocka_unit_test(test_lost_tail_repair_pipelined),
        cmocka_unit_test(test_tail_at_one_percent_one_file),
        cmocka_unit_test(test_tail_at_one_percent_pipelined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
