/* The pipelined receiver's read-back ahead, whole engines (label sim,
 * spec 9.10, 9.14.3): a big file's held prefix is hashed while its blocks
 * arrive, so when its last DATA lands only a step or two is left to read
 * back, and every byte is read back once, none before it was written.
 * Observed through the sim storage's view counts (the virtual clock does
 * not see the read-back's CPU): bytes read back while blocks were still
 * missing, against the file's size. Over a clean path, with a block in
 * the middle lost several times (the prefix waits at the hole, then goes
 * on), and with a byte corrupted on its way to storage (the digest of
 * what was stored still differs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim_run.h"
#include "sim_tail.h"

#define STEP AFTP_RECEIVER_VERIFY_STEP
#define BIG (5 * STEP + 12345) /* several steps, below SIM_SYNTHETIC_ABOVE: bytes kept */
#define BS 1024u
#define WINDOW 64u

static void set_windows(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = WINDOW;
    r->pipeline_window = WINDOW;
}

/* One BIG file pipelined at 500 Mbit/s over a 1 Gbit/s, 20 ms path. */
static void big_push(sim_cfg *c, double loss)
{
    sim_cfg_default(c);
    c->file_size = BIG;
    c->block_size = BS;
    c->rate_bps = UINT64_C(500000000);
    c->fwd = (sim_link_cfg){.rate_bps = UINT64_C(1000000000), .delay_ns = 20 * SIM_MS,
                            .queue_bytes = 4 * 1000 * 1000, .loss = loss};
    c->tune = set_windows;
}

/* What the storage saw of file 1's read-back, printed. */
static void report_read_back(const char *name, const sim_result *r)
{
    sim_file *f = sim_storage_file((sim_storage *)&r->st, 1);
    printf("[sim] %s: %llu of %llu bytes read back before the last block landed, %llu after "
           "(%.2f steps)\n",
           name, (unsigned long long)f->viewed_early, (unsigned long long)f->size,
           (unsigned long long)(f->viewed - f->viewed_early),
           (double)(f->viewed - f->viewed_early) / (double)STEP);
}

/* Runs c: committed byte-exact; read back once, never ahead of the
 * writes, in bounded steps, and at most two steps of it once the last
 * block landed. */
static void run_read_ahead(const char *name, const sim_cfg *c, sim_result *r)
{
    sim_run(c, r);
    sim_report(name, c, r);
    report_read_back(name, r);
    sim_expect_clean_end(r);
    assert_int_equal(r->rcv_side.ev.last_file_error, AFTP_OK);
    assert_true(sim_file_intact((sim_storage *)&r->st, 1));
    sim_file *f = sim_storage_file((sim_storage *)&r->st, 1);
    assert_true(f->committed);
    assert_int_equal(f->viewed, f->size);
    assert_int_equal(f->viewed_unwritten, 0);
    assert_true(r->rcv_view_max <= STEP);
    assert_true(f->size - f->viewed_early <= 2 * STEP);
}

static void test_prefix_read_while_blocks_arrive(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    big_push(&c, 0);
    run_read_ahead("pipelined big file, clean", &c, &r);
    sim_result_free(&r);
}

/* A block in the middle lost three times, over 1% random loss: the
 * prefix stops at the hole (nothing unwritten is ever read) and goes on
 * after the repair, so the end still finds at most two steps to read. */
static void test_prefix_waits_for_a_repair(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    big_push(&c, 0.01);
    sim_tail_drop d = {.block = (2 * STEP + STEP / 2) / BS, .drops = 3};
    c.fwd_filter = sim_tail_drop_first_sends;
    c.fwd_filter_ctx = &d;
    run_read_ahead("pipelined big file, a hole repaired", &c, &r);
    assert_true(d.seen > d.drops);
    sim_result_free(&r);
}

/* A byte corrupted on its way to storage, early in the file: the prefix
 * hashes what was stored, corruption included, so the digest still
 * differs and the file fails, never committed; the session goes on. */
static void test_corruption_in_the_prefix_fails_the_file(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    big_push(&c, 0);
    c.corrupt_offset = STEP + 100;
    sim_run(&c, &r);
    report_read_back("pipelined big file, a byte corrupted", &r);
    assert_false(r.stuck);
    sim_file *f = sim_storage_file(&r.st, 1);
    /* the corrupted byte was read back ahead, before the last block landed */
    assert_true(f->viewed_early > (uint64_t)c.corrupt_offset);
    assert_int_equal(f->viewed, f->size);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_memory_not_equal(r.snd_side.ev.digest, r.rcv_side.ev.digest, AFTP_DIGEST_LEN);
    assert_false(f->committed);
    assert_int_equal(f->receiver_closed, 1);
    assert_int_equal(r.snd_error, AFTP_OK);
    assert_int_equal(r.rcv_error, AFTP_OK);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_read_while_blocks_arrive),
        cmocka_unit_test(test_prefix_waits_for_a_repair),
        cmocka_unit_test(test_corruption_in_the_prefix_fails_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
