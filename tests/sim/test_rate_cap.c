/* The receiver's rate cap (spec section 12.3, RATE_CAP) on the virtual
 * clock: a receiver policy grants a cap, the sender obeys it in every rate
 * policy, measured on what it emits at 0% loss with its own rates far
 * above the cap; an unprotected session carries it too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"

#define CAP_BPS UINT64_C(20000000)        /* 20 Mbit/s */
#define OWN_BPS UINT64_C(1000000000)      /* the sender's own rate: 50 times the cap */
#define WINDOW_NS (50 * SIM_MS)           /* the span the emitted rate is measured over */

static uint64_t grant_cap(void *user, const uint8_t *client_key)
{
    (void)user;
    (void)client_key;
    return CAP_BPS;
}

typedef struct cap_case {
    int policy;
    uint64_t min_rate_bps, max_rate_bps; /* the sender's own limits */
} cap_case;

static void tune_cap(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const cap_case *k = ctx;
    s->min_rate_bps = k->min_rate_bps;
    s->max_rate_bps = k->max_rate_bps;
    r->security.peers.rate_cap = grant_cap;
}

/* A 1 Gbit/s path, so that only the cap can hold the sender back. */
static void capped_run(const char *name, cap_case *k, int cipher)
{
    sim_cfg c;
    sim_result r;
    sim_emitted e = {0};
    sim_cfg_default(&c);
    c.policy = k->policy;
    c.rate_bps = OWN_BPS;
    c.cipher = cipher;
    c.fwd.rate_bps = c.rev.rate_bps = 10 * OWN_BPS;
    c.tune = tune_cap;
    c.tune_ctx = k;
    c.fwd_tap = sim_emitted_record;
    c.fwd_tap_ctx = &e;
    sim_run(&c, &r);
    sim_report(name, &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_OK);
    assert_int_equal(r.rcv_error, AFTP_OK);
    assert_true(sim_file_intact(&r.st, 1));
    assert_int_equal(r.snd.rate_cap_bps, CAP_BPS);
    assert_int_equal(r.rcv.rate_cap_bps, CAP_BPS);
    /* Spec 13.1: over any span, at most the bucket's depth above the
     * rate, and one datagram more: the reference pacer lets a datagram
     * leave once its bucket is out of debt (aftp_pacer.h). */
    uint64_t depth = 4 * (uint64_t)c.max_datagram + c.max_datagram;
    uint64_t most = sim_emitted_busiest(&e, WINDOW_NS, 0, UINT64_MAX), allowed = CAP_BPS / 8 * WINDOW_NS / SIM_S + depth;
    printf("[sim] %s: busiest %llu ms: %llu bytes, cap allows %llu\n", name,
           (unsigned long long)(WINDOW_NS / SIM_MS), (unsigned long long)most,
           (unsigned long long)allowed);
    assert_true(most <= allowed);
    sim_emitted_free(&e);
    sim_result_free(&r);
}

static void test_fixed_obeys_cap(void **state)
{
    (void)state;
    cap_case k = {.policy = AFTP_CC_FIXED};
    capped_run("cap fixed", &k, AFTP_CIPHER_AUTO);
}

static void test_fair_obeys_cap(void **state)
{
    (void)state;
    cap_case k = {.policy = AFTP_CC_FAIR, .max_rate_bps = OWN_BPS};
    capped_run("cap fair", &k, AFTP_CIPHER_AUTO);
}

static void test_high_obeys_cap(void **state)
{
    (void)state;
    cap_case k = {.policy = AFTP_CC_HIGH};
    capped_run("cap high", &k, AFTP_CIPHER_AUTO);
}

/* A minimum rate of its own above the cap does not lift the sender over it. */
static void test_low_with_min_rate_obeys_cap(void **state)
{
    (void)state;
    cap_case k = {.policy = AFTP_CC_LOW, .min_rate_bps = 5 * CAP_BPS};
    capped_run("cap low min-rate", &k, AFTP_CIPHER_AUTO);
}

/* Unprotected: the cap travels (unauthenticated) and is obeyed alike. */
static void test_unprotected_obeys_cap(void **state)
{
    (void)state;
    cap_case k = {.policy = AFTP_CC_FIXED};
    capped_run("cap fixed unprotected", &k, AFTP_CIPHER_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_obeys_cap),
        cmocka_unit_test(test_fair_obeys_cap),
        cmocka_unit_test(test_high_obeys_cap),
        cmocka_unit_test(test_low_with_min_rate_obeys_cap),
        cmocka_unit_test(test_unprotected_obeys_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
