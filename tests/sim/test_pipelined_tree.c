/* Pipelined mode at scale (label sim): a tree shaped like Go 1.19's source
 * (8,176 files of 0 to 1 MiB, median a few KiB, in directories of a dozen
 * files; about 100 MB) sent by the real engines over a 1 Gbit/s, 150 ms
 * path, window 4096, as the client sends a tree (flags RESUME | SYNC, the
 * rate controller's default policy). The tree is larger than the entry
 * window: entries are added as the sender makes room (ENTRY_END).
 *
 * Asserted: the session finishes, every file arrives byte-exact and
 * committed, every directory placed; the loss the controller believes in,
 * sampled every quarter second as a progress display does, stays within
 * the injected loss plus a margin; its pacing rate stays within reach of
 * the path; no entry waits longer than a bound from its adding to its
 * end. Printed: virtual time, goodput, the controller's loss, the
 * retransmitted share. Never asserted: speed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"

#define GO_FILES 8176
#define FILES_PER_DIR 12
#define MAX_FILE (UINT64_C(1) << 20)
#define WINDOW 4096u        /* the client's default */
#define SMALL_WINDOW 256u   /* 16 ENTRIES: within the controller's initial window */
#define LINK_BPS (UINT64_C(1000) * 1000 * 1000)
#define ONE_WAY_NS (75 * SIM_MS)
#define SAMPLE_NS (250 * SIM_MS)
#define RTT_NS (2 * ONE_WAY_NS)

/* Bounds from the controller's design (common/aftp_cc.c), not from what a
 * run measured:
 * - its loss estimate learns the path's random loss over LOSS_WINDOW_PACKETS
 *   (20,000; at 1% a standard deviation of 0.07 points); loss more than
 *   LOSS_MARGIN (2 points) above it is what it calls congestion, so an
 *   estimate at the end beyond the injected loss plus that margin is loss
 *   it made up. Early on it is the loss of a few packets (one in 21 reads
 *   4.8%), so the samples on the way are only held below its ceiling,
 *   LOSS_MAX_BASE (50%), where a broken count of packets sent ends up;
 * - it paces at most STARTUP_FLAT_GAIN (5) x its delivery estimate, which
 *   is at most twice the link's rate (what passed the bottleneck is the
 *   receive rate over 1 - base loss, the base loss at most 50%). */
#define LOSS_MARGIN_PPM 20000u
#define LOSS_CEILING_PPM 500000u
#define PACING_BOUND_BPS (UINT64_C(2) * 5 * LINK_BPS)

/* What is sent, and how. */
typedef struct tree_case {
    uint32_t files;
    double median, sigma;    /* file sizes: log-normal, bytes */
    uint32_t window;         /* both sides' pipeline_window */
    double loss;             /* each way */
    uint64_t initial_rtt_ns; /* the sender's guess before a sample; 0: default */
} tree_case;

typedef struct tree_run {
    const tree_case *tc;
    uint32_t entries;        /* the tree's: files and a directory per FILES_PER_DIR */
    uint32_t added;          /* entries added so far */
    uint64_t bytes;          /* FILE bytes of the tree */
    int files;
    /* The controller as a progress display samples it. */
    uint64_t next_sample;
    int samples;
    uint64_t max_loss_ppm, max_recent_loss_ppm, max_pacing_bps;
} tree_run;

/* Entry id's size: log-normal, a few empty files, none above 1 MiB. */
static uint64_t tree_file_size(const tree_case *tc, uint32_t id)
{
    uint64_t state = UINT64_C(0x60119) * 1000003 + id, *rng = &state;
    if (sim_rand(rng) % 100 == 0)
        return 0;
    double u1 = sim_rand_unit(rng), u2 = sim_rand_unit(rng);
    double normal = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-12)) * cos(2 * M_PI * u2);
    double size = tc->median * exp(tc->sigma * normal);
    return size > (double)MAX_FILE ? MAX_FILE : (uint64_t)size;
}

/* Entry `id`: a directory before every FILES_PER_DIR files, else a file
 * in the latest directory. */
static int add_next(tree_run *t, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    uint32_t id = t->added + 1;
    int dir = (id - 1) % (FILES_PER_DIR + 1) == 0;
    char path[48];
    uint32_t dir_no = (id - 1) / (FILES_PER_DIR + 1);
    if (dir)
        snprintf(path, sizeof path, "go/src/pkg%u", dir_no);
    else
        snprintf(path, sizeof path, "go/src/pkg%u/f%u.go", dir_no, id);
    uint64_t size = dir ? 0 : tree_file_size(t->tc, id);
    aftp_entry_info e = {.file = {.file_id = id, .size = size, .mode = dir ? 0755 : 0644,
                                  .mtime_ns = 1700000000 * SIM_S, .path = path},
                         .kind = dir ? AFTP_ENTRY_DIR : AFTP_ENTRY_FILE,
                         .flags = dir ? 0 : AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC};
    int rc = aftp_sender_add_entry(snd, &e);
    if (rc == AFTP_ERR_LIMIT)
        return 0; /* the window is full: again once an entry has ended */
    assert_int_equal(rc, AFTP_OK);
    /* The storage's record; the receiver's open sets the block size the
     * sender picked (the entry said 0: the largest a datagram carries). */
    sim_file *f = sim_storage_add_entry(st, e.kind, path, size,
                                        dir ? 0 : 1452 - AFTP_WIRE_DATA_OVERHEAD, NULL);
    f->added_at = now;
    t->added = id;
    t->bytes += size;
    t->files += !dir;
    return 1;
}

/* What a progress display would show every quarter second. */
static void sample_controller(tree_run *t, aftp_sender *snd, uint64_t now)
{
    if (now < t->next_sample)
        return;
    t->next_sample = now + SAMPLE_NS;
    aftp_stats s;
    aftp_sender_get_stats(snd, &s);
    t->samples++;
    if (s.loss_ppm > t->max_loss_ppm)
        t->max_loss_ppm = s.loss_ppm;
    if (s.recent_loss_ppm > t->max_recent_loss_ppm)
        t->max_recent_loss_ppm = s.recent_loss_ppm;
    if (s.pacing_rate_bps > t->max_pacing_bps)
        t->max_pacing_bps = s.pacing_rate_bps;
}

static int refill(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    tree_run *t = ctx;
    sample_controller(t, snd, now);
    sim_storage_reserve(st, (int)t->entries); /* before the first entry */
    while (t->added < t->entries && add_next(t, st, snd, now))
        ;
    return t->added == t->entries;
}

static void set_windows(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const tree_run *t = ctx;
    s->pipeline_window = t->tc->window;
    r->pipeline_window = t->tc->window;
    if (t->tc->initial_rtt_ns != 0)
        s->initial_rtt_ns = t->tc->initial_rtt_ns;
}

/* The longest any entry took from its adding to its end on both sides. */
static uint64_t longest_wait(sim_storage *st)
{
    uint64_t longest = 0;
    for (uint32_t id = 1; id <= (uint32_t)st->nfiles; id++) {
        const sim_file *f = sim_storage_file(st, id);
        uint64_t wait = f->ended_at - f->added_at;
        if (wait > longest)
            longest = wait;
    }
    return longest;
}

/* When the last entry ended: every file durable and confirmed; the
 * session closes a round trip later (spec 9.11). */
static uint64_t last_end(sim_storage *st)
{
    uint64_t last = 0;
    for (uint32_t id = 1; id <= (uint32_t)st->nfiles; id++)
        if (sim_storage_file(st, id)->ended_at > last)
            last = sim_storage_file(st, id)->ended_at;
    return last;
}

static void report(const char *name, const tree_run *t, const sim_result *r, uint64_t wait,
                   uint64_t last)
{
    double secs = (double)r->snd_side.ev.closed_at / 1e9;
    double bytes_s = (double)t->bytes * 8 / (double)LINK_BPS;
    printf("[sim] %s: %d files + %d dirs, %.1f MB: done in %.3f s virtual (last entry ended at "
           "%.3f s; the bytes alone "
           "%.3f s at the link rate), goodput %.0f Mbit/s; controller loss %.4f%% (max sampled "
           "%.4f%%, recent max %.4f%%), max pacing %.3g bit/s, retransmitted %.4f%% of sent "
           "(the link lost %.4f%%); longest entry wait %.3f s; %d samples\n",
           name, t->files, (int)t->added - t->files, (double)t->bytes / 1e6, secs,
           (double)last / 1e9, bytes_s,
           secs > 0 ? (double)t->bytes * 8 / secs / 1e6 : 0.0, (double)r->snd.loss_ppm / 1e4,
           (double)t->max_loss_ppm / 1e4, (double)t->max_recent_loss_ppm / 1e4,
           (double)t->max_pacing_bps,
           r->snd.payload_bytes_sent
               ? 100.0 * (double)r->snd.payload_bytes_retransmitted / (double)r->snd.payload_bytes_sent
               : 0.0,
           r->snd.payload_bytes_sent
               ? 100.0 * (double)r->fwd_data_lost / (double)r->snd.payload_bytes_sent
               : 0.0,
           (double)wait / 1e9, t->samples);
}

/* Every entry ended on both sides, every file byte-exact and committed,
 * every directory placed. */
static void expect_tree_arrived(const tree_run *t, sim_result *r)
{
    sim_expect_clean_end(r);
    assert_int_equal(t->added, t->entries);
    assert_int_equal(r->snd_side.ev.entry_end, t->entries);
    assert_int_equal(r->rcv_side.ev.entry_end, t->entries);
    for (uint32_t id = 1; id <= t->entries; id++) {
        const sim_file *f = sim_storage_file(&r->st, id);
        if (f->kind == AFTP_ENTRY_DIR)
            assert_true(f->placed);
        else
            assert_true(sim_file_intact(&r->st, id));
    }
}

/* No entry waits longer than twice the tree's bytes at the link rate (the
 * startup's first rounds and the repairs take more than the bytes alone)
 * plus 20 round trips (verdicts, FILE_DONE and FILE_RESULT, group commits,
 * the controller's startup), far below the idle timeout a stalled entry
 * runs into. */
static uint64_t wait_bound_ns(const tree_run *t)
{
    return 2 * t->bytes * 8 * SIM_S / LINK_BPS + 20 * RTT_NS;
}

static void send_tree(const char *name, const tree_case *tc)
{
    tree_run t = {.tc = tc, .entries = tc->files + (tc->files + FILES_PER_DIR - 1) / FILES_PER_DIR};
    double loss = tc->loss;
    sim_cfg c;
    sim_cfg_default(&c);
    c.nfiles = 0;
    c.policy = AFTP_CC_FAIR;
    c.rate_bps = LINK_BPS;
    c.fwd = (sim_link_cfg){.rate_bps = LINK_BPS, .delay_ns = ONE_WAY_NS,
                           .queue_bytes = LINK_BPS / 8 * 2 * ONE_WAY_NS / SIM_S, .loss = loss};
    c.rev = c.fwd;
    c.idle_timeout_ns = 30 * SIM_S;
    c.time_limit_ns = 300 * SIM_S;
    c.tune = set_windows;
    c.tune_ctx = &t;
    c.refill = refill;
    c.feed_ctx = &t;
    sim_result r;
    sim_run(&c, &r);
    uint64_t wait = longest_wait(&r.st);
    report(name, &t, &r, wait, last_end(&r.st));
    expect_tree_arrived(&t, &r);
    assert_true(r.snd.loss_ppm <= (uint64_t)(loss * 1e6) + LOSS_MARGIN_PPM);
    assert_true(t.max_loss_ppm < LOSS_CEILING_PPM);
    assert_true(t.max_pacing_bps <= PACING_BOUND_BPS);
    assert_true(wait <= wait_bound_ns(&t));
    sim_result_free(&r);
}

/* Go 1.19's source tree in shape: sizes log-normal around 4 KiB (sigma
 * 1.6: a mean near 14 KB), about 120 MB in all. */
#define GO_TREE(w, l) {.files = GO_FILES, .median = 4096, .sigma = 1.6, .window = (w), .loss = (l)}

static void test_tree_no_loss(void **state)
{
    (void)state;
    static const tree_case tc = GO_TREE(WINDOW, 0);
    send_tree("Go-shaped tree, 1 Gbit/s 150 ms, 0% loss", &tc);
}

static void test_tree_1pct(void **state)
{
    (void)state;
    static const tree_case tc = GO_TREE(WINDOW, 0.01);
    send_tree("Go-shaped tree, 1 Gbit/s 150 ms, 1% loss", &tc);
}

/* A window whose ENTRIES do not fill the controller's initial window: the
 * session ran before the controller counted only DATA, but over 64 control
 * packets (a FILE_DONE per file) between two FEEDBACKs its DATA count went
 * wrong, read as loss up to 100% and rate samples of 1e15 bit/s. */
static void test_tree_small_window(void **state)
{
    (void)state;
    static const tree_case tc = GO_TREE(SMALL_WINDOW, 0);
    send_tree("Go-shaped tree, window 256, 0% loss", &tc);
}

/* A few hundred small files, window 256, the sender's first RTT guess
 * (10 ms) below the path's: the control timer sends the ENTRIES again
 * before their verdicts can come. Those 32 control packets once filled
 * the controller's initial window, no DATA left, no FEEDBACK came back:
 * both sides sat at the idle timeout with the files open, none placed. */
static void test_small_files_entries_resent(void **state)
{
    (void)state;
    static const tree_case tc = {.files = 400, .median = 1500, .sigma = 0.3,
                                 .window = SMALL_WINDOW, .initial_rtt_ns = 10 * SIM_MS};
    send_tree("400 small files, ENTRIES resent early", &tc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_no_loss),
        cmocka_unit_test(test_tree_1pct),
        cmocka_unit_test(test_tree_small_window),
        cmocka_unit_test(test_small_files_entries_resent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
