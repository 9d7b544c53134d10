/* The link model and profile parser of aftp-linkemu, on a virtual clock. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "linkemu_model.h"

#define PKT 1500u

static struct linkemu_dir_params plain_link(void)
{
    struct linkemu_dir_params p = {0};
    p.rate_bps = 1000000000ull;
    p.delay_ns = 10000000ull;
    p.queue_bytes = 1u << 30;
    p.ge_bad_loss = 1.0;
    return p;
}

/* Loss decided by the model over n packets spaced far apart (no queueing). */
static double loss_ratio(const struct linkemu_dir_params *p, unsigned n, uint64_t seed)
{
    struct linkemu_model m;
    linkemu_model_init(&m, p, seed);
    unsigned lost = 0;
    for (unsigned i = 0; i < n; i++)
        lost += linkemu_model_admit(&m, (uint64_t)i * 1000000ull, PKT).verdict ==
                LINKEMU_DROP_LOSS;
    return (double)lost / n;
}

static void random_loss_matches_setting(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.loss = 0.02;
    unsigned n = 400000;
    double hw = 3.29 * sqrt(p.loss * (1 - p.loss) / n); /* 99.9% interval */
    assert_true(fabs(loss_ratio(&p, n, 7) - p.loss) < hw);
    p.loss = 0;
    assert_true(loss_ratio(&p, 10000, 7) == 0.0);
}

static void gilbert_elliott_mean_and_bursts(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.ge_p = 0.0025;
    p.ge_r = 0.25;
    struct linkemu_model m;
    linkemu_model_init(&m, &p, 11);
    unsigned n = 2000000, lost = 0, bursts = 0;
    int prev_lost = 0;
    for (unsigned i = 0; i < n; i++) {
        int l = linkemu_model_admit(&m, (uint64_t)i * 1000000ull, PKT).verdict ==
                LINKEMU_DROP_LOSS;
        lost += (unsigned)l;
        bursts += (unsigned)(l && !prev_lost);
        prev_lost = l;
    }
    double mean = linkemu_profile_mean_loss(&p);
    double vf = linkemu_profile_loss_variance_factor(&p);
    assert_true(vf > 5.0); /* bursts widen the interval a lot */
    assert_true(fabs((double)lost / n - mean) < 3.29 * sqrt(vf * mean * (1 - mean) / n));
    /* with every bad-state packet lost, a burst lasts 1 / ge_r packets on average */
    double burst_len = (double)lost / bursts;
    assert_true(fabs(burst_len - 1.0 / p.ge_r) < 0.3);
}

static void bottleneck_serialises_and_drops_at_queue_limit(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.queue_bytes = 10 * PKT; /* ten packets of backlog */
    struct linkemu_model m;
    linkemu_model_init(&m, &p, 1);
    const uint64_t ser = PKT * 8ull; /* ns at 1 Gbit/s */
    /* A burst arriving all at once: the backlog counts the packet in service. */
    unsigned delivered = 0;
    uint64_t last_due = 0;
    for (unsigned i = 0; i < 20; i++) {
        struct linkemu_fate f = linkemu_model_admit(&m, 0, PKT);
        if (i < 10) {
            assert_int_equal(f.verdict, LINKEMU_DELIVER);
            assert_true(f.due_ns == (i + 1) * ser + p.delay_ns);
            last_due = f.due_ns;
            delivered++;
        } else {
            assert_int_equal(f.verdict, LINKEMU_DROP_QUEUE);
        }
    }
    assert_int_equal(delivered, 10);
    /* Once the queue drained, packets flow again at their arrival time. */
    struct linkemu_fate f = linkemu_model_admit(&m, 1000000, PKT);
    assert_int_equal(f.verdict, LINKEMU_DELIVER);
    assert_true(f.due_ns == 1000000 + ser + p.delay_ns);
    assert_true(f.due_ns > last_due);
}

/* Mean one-way delay of n packets spaced `gap_ns` apart; checks FIFO order
 * and the +-3.47 sigma bound on the way. */
static double mean_jittered_delay(const struct linkemu_dir_params *p, uint64_t gap_ns, unsigned n)
{
    struct linkemu_model m;
    linkemu_model_init(&m, p, 3);
    uint64_t prev = 0;
    double sum = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t t = (uint64_t)i * gap_ns;
        struct linkemu_fate f = linkemu_model_admit(&m, t, PKT);
        assert_true(f.due_ns >= prev); /* a link is a FIFO */
        prev = f.due_ns;
        double d = (double)(f.due_ns - t);
        assert_true(d >= (double)p->delay_ns - 3.47 * (double)p->jitter_ns);
        assert_true(d <= (double)p->delay_ns + 3.47 * (double)p->jitter_ns + (double)gap_ns);
        sum += d;
    }
    return sum / n;
}

static void jitter_keeps_fifo_order(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.jitter_ns = 2000000;
    /* Sparse packets see the unbiased distribution around the delay. */
    double sparse = mean_jittered_delay(&p, 100000000, 20000);
    assert_true(fabs(sparse - (double)p.delay_ns) < 3.29 * 2e6 / sqrt(20000.0));
    /* Dense packets cannot overtake each other, so they queue behind the
     * slowest recent one: the mean delay rises by more than one sigma. */
    double dense = mean_jittered_delay(&p, 20000, 100000);
    assert_true(dense > (double)p.delay_ns + 1.0 * (double)p.jitter_ns);
}

static void reorder_and_duplicate_rates(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.reorder = 0.1;
    p.duplicate = 0.05;
    struct linkemu_model m;
    linkemu_model_init(&m, &p, 5);
    unsigned n = 200000, reordered = 0, dups = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t t = (uint64_t)i * 100000;
        struct linkemu_fate f = linkemu_model_admit(&m, t, PKT);
        if (f.reordered) {
            reordered++;
            assert_true(f.due_ns < t + p.delay_ns); /* skipped the delay */
        }
        dups += f.copies == 2;
    }
    assert_true(fabs((double)reordered / n - 0.1) < 0.005);
    assert_true(fabs((double)dups / n - 0.05) < 0.004);
}

static void same_seed_same_decisions(void **state)
{
    (void)state;
    struct linkemu_dir_params p = plain_link();
    p.loss = 0.3;
    assert_true(loss_ratio(&p, 5000, 42) == loss_ratio(&p, 5000, 42));
    assert_true(loss_ratio(&p, 5000, 42) != loss_ratio(&p, 5000, 43));
}

/* ---- profiles ---- */

static char profile_path[64];

static int write_profile(const char *text)
{
    snprintf(profile_path, sizeof profile_path, "/tmp/linkemu-test-XXXXXX");
    int fd = mkstemp(profile_path);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int load(const char *text, struct linkemu_profile *prof, char *err, size_t errlen)
{
    if (write_profile(text) != 0)
        return AFTP_ERR_IO;
    int rc = linkemu_profile_load(profile_path, prof, err, errlen);
    unlink(profile_path);
    return rc;
}

static void profile_units_overrides_and_default_queue(void **state)
{
    (void)state;
    struct linkemu_profile prof;
    char err[128];
    assert_int_equal(load("# comment\nrate = 1gbit\ndelay=75ms\nrev.rate=10mbit # asym\n"
                          "fwd.loss=1.5%\nrev.delay=25000us\nmtu=9000\n",
                          &prof, err, sizeof err),
                     AFTP_OK);
    assert_int_equal(prof.mtu, 9000);
    assert_true(prof.dir[LINKEMU_FWD].rate_bps == 1000000000ull);
    assert_true(prof.dir[LINKEMU_REV].rate_bps == 10000000ull);
    assert_true(prof.dir[LINKEMU_FWD].delay_ns == 75000000ull);
    assert_true(prof.dir[LINKEMU_REV].delay_ns == 25000000ull);
    assert_true(fabs(prof.dir[LINKEMU_FWD].loss - 0.015) < 1e-12);
    assert_true(prof.dir[LINKEMU_REV].loss == 0.0);
    /* one bandwidth-delay product of the 100 ms round trip */
    assert_true(prof.dir[LINKEMU_FWD].queue_bytes == 12500000ull);
    assert_true(prof.dir[LINKEMU_REV].queue_bytes == LINKEMU_MIN_DEFAULT_QUEUE);
}

static void profile_errors_name_the_line(void **state)
{
    (void)state;
    struct linkemu_profile prof;
    char err[128];
    assert_int_equal(load("rate=1gbit\nspeed=3\n", &prof, err, sizeof err), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(err, "line 2"));
    assert_int_equal(load("delay=5 parsecs\n", &prof, err, sizeof err),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(load("loss=150%\n", &prof, err, sizeof err), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(load("loss=1%\nge_p=1%\nge_r=10%\n", &prof, err, sizeof err),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(load("reorder=1%\n", &prof, err, sizeof err), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(load("mtu=100\n", &prof, err, sizeof err), AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_loss_matches_setting),
        cmocka_unit_test(gilbert_elliott_mean_and_bursts),
        cmocka_unit_test(bottleneck_serialises_and_drops_at_queue_limit),
        cmocka_unit_test(jitter_keeps_fifo_order),
        cmocka_unit_test(reorder_and_duplicate_rates),
        cmocka_unit_test(same_seed_same_decisions),
        cmocka_unit_test(profile_units_overrides_and_default_queue),
        cmocka_unit_test(profile_errors_name_the_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
