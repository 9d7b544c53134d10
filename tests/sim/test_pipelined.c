/* Pipelined mode end to end (label sim): the real sender and receiver
 * engines negotiate PIPELINE in a protected session and move many small
 * files over a lossy path with no round trip per file (spec 9.14); either
 * side without it falls back to one file at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim_run.h"

#define SMALL_FILE 4096u
#define WINDOW 64u

typedef struct windows {
    uint32_t sender, receiver;
} windows;

static void set_windows(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const windows *w = ctx;
    s->pipeline_window = w->sender;
    r->pipeline_window = w->receiver;
}

/* SIM_MAX_FILES small files, both windows as given, `loss` each way. */
static void run_small_files(const char *name, windows *w, double loss, sim_result *r)
{
    sim_cfg c;
    sim_cfg_default(&c);
    c.nfiles = SIM_MAX_FILES;
    c.file_size = SMALL_FILE;
    c.fwd.loss = loss;
    c.rev.loss = loss;
    c.tune = set_windows;
    c.tune_ctx = w;
    sim_run(&c, r);
    sim_report(name, &c, r);
    sim_expect_clean_end(r);
    assert_int_equal(r->snd_side.ev.file_end, SIM_MAX_FILES);
    assert_int_equal(r->rcv_side.ev.file_end, SIM_MAX_FILES);
    assert_int_equal(r->snd_side.ev.last_file_error, AFTP_OK);
    for (uint32_t id = 1; id <= SIM_MAX_FILES; id++) {
        assert_true(sim_file_intact(&r->st, id));
        assert_true(sim_storage_file(&r->st, id)->committed);
    }
}

/* The bytes at the paced rate plus a few round trips: no round trip per
 * file (one-file mode needs one per file, SIM_MAX_FILES of them). */
static uint64_t pipelined_bound_ns(void)
{
    sim_cfg c;
    sim_cfg_default(&c);
    uint64_t bytes = (uint64_t)SIM_MAX_FILES * SMALL_FILE;
    uint64_t rtt = 2 * c.fwd.delay_ns;
    return bytes * 8 * SIM_S / c.rate_bps + 12 * rtt;
}

static void pipelined_at_loss(const char *name, double loss)
{
    windows w = {WINDOW, WINDOW};
    sim_result r;
    run_small_files(name, &w, loss, &r);
    /* Pipelined: every entry ended by ENTRY_END on both sides. */
    assert_int_equal(r.snd_side.ev.entry_end, SIM_MAX_FILES);
    assert_int_equal(r.rcv_side.ev.entry_end, SIM_MAX_FILES);
    assert_true(r.snd_side.ev.file_end_at <= pipelined_bound_ns());
    sim_result_free(&r);
}

static void test_protected_no_loss(void **state)
{
    (void)state;
    pipelined_at_loss("pipelined 64 x 4 KiB, 0% loss", 0);
}

static void test_protected_1pct(void **state)
{
    (void)state;
    pipelined_at_loss("pipelined 64 x 4 KiB, 1% loss", 0.01);
}

static void test_protected_5pct(void **state)
{
    (void)state;
    pipelined_at_loss("pipelined 64 x 4 KiB, 5% loss", 0.05);
}

/* A receiver that does not offer PIPELINE: the same files one at a time,
 * a round trip or more each. */
static void test_receiver_without_pipeline(void **state)
{
    (void)state;
    windows w = {WINDOW, 0};
    sim_result r;
    run_small_files("sender pipelined, receiver one-file", &w, 0, &r);
    assert_int_equal(r.rcv_side.ev.entry_end, 0);
    sim_cfg c;
    sim_cfg_default(&c);
    assert_true(r.snd_side.ev.file_end_at >= SIM_MAX_FILES * 2 * c.fwd.delay_ns);
    sim_result_free(&r);
}

/* A sender that does not ask for it, at a receiver that offers it. */
static void test_sender_without_pipeline(void **state)
{
    (void)state;
    windows w = {0, WINDOW};
    sim_result r;
    run_small_files("sender one-file, receiver pipelined", &w, 0, &r);
    assert_int_equal(r.snd_side.ev.entry_end, 0);
    assert_int_equal(r.rcv_side.ev.entry_end, 0);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protected_no_loss),
        cmocka_unit_test(test_protected_1pct),
        cmocka_unit_test(test_protected_5pct),
        cmocka_unit_test(test_receiver_without_pipeline),
        cmocka_unit_test(test_sender_without_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
