/* A server's new cap mid-session (spec 6.18, RATE_UPDATE) on the virtual
 * clock: the receiver changes the cap its policy granted at the handshake
 * (aftp_receiver_set_rate_cap) and the sender, pacing far below its own
 * rate, follows: a lower cap holds from its arrival on, a higher one lets
 * the controller grow to it; a lost update comes again with the repeat; an
 * update overtaken by a newer one changes nothing when it arrives late; a
 * cap of 0 is a protocol violation. */
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

#define MBIT UINT64_C(1000000)
#define GRANT_BPS (100 * MBIT)            /* the policy's cap, at the handshake */
#define OWN_BPS (1000 * MBIT)             /* the sender's own rate */
#define WINDOW_NS (50 * SIM_MS)           /* the span the emitted rate is measured over */
#define MAX_CHANGES 3
#define MAX_SAMPLES 4

static uint64_t grant_cap(void *user, const uint8_t *client_key)
{
    (void)user;
    (void)client_key;
    return GRANT_BPS;
}

/* What a run does to the engines and what it saw of them. */
typedef struct plan {
    int policy;
    /* the receiver's new caps, at these times */
    uint64_t change_at[MAX_CHANGES], change_bps[MAX_CHANGES];
    size_t changes, changed;
    int hold_first;            /* the first RATE_UPDATE is kept back (lost, or late) */
    int deliver_late;          /* ...and delivered once the sender obeys the last change */
    uint8_t held[128];
    size_t held_len;
    aftp_stats after_late;     /* the sender's, right after the late copy */
    uint64_t first_update_ns;  /* when the first RATE_UPDATE reached the sender */
    uint64_t sample_at[MAX_SAMPLES]; /* sender's stats at these times */
    aftp_stats sample[MAX_SAMPLES];
    size_t samples, sampled;
    sim_emitted e;
} plan;

static int seen_by_sender(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    plan *p = ctx;
    if (pkt[1] != AFTP_WIRE_RATE_UPDATE)
        return 1;
    if (p->hold_first && p->held_len == 0 && p->first_update_ns == 0) {
        assert_true(len <= sizeof p->held);
        memcpy(p->held, pkt, len);
        p->held_len = len;
        p->first_update_ns = now;
        return 0;
    }
    if (p->first_update_ns == 0)
        p->first_update_ns = now;
    return 1;
}

/* The late copy goes in once the sender obeys the newest cap. */
static void deliver_late(plan *p, aftp_sender *snd, uint64_t now)
{
    aftp_stats st;
    aftp_sender_get_stats(snd, &st);
    if (!p->deliver_late || p->held_len == 0 || p->changed < p->changes ||
        st.rate_cap_bps != p->change_bps[p->changes - 1])
        return;
    assert_int_equal(aftp_sender_read(snd, now, p->held, p->held_len), AFTP_OK);
    aftp_sender_get_stats(snd, &p->after_late);
    p->held_len = 0;
}

static void step(void *ctx, aftp_sender *snd, aftp_receiver *rcv, uint64_t now)
{
    plan *p = ctx;
    while (p->changed < p->changes && now >= p->change_at[p->changed]) {
        assert_int_equal(aftp_receiver_set_rate_cap(rcv, p->change_bps[p->changed], now),
                         AFTP_OK);
        p->changed++;
    }
    deliver_late(p, snd, now);
    while (p->sampled < p->samples && now >= p->sample_at[p->sampled])
        aftp_sender_get_stats(snd, &p->sample[p->sampled++]);
}

static void tune(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const plan *p = ctx;
    s->policy = p->policy;
    s->max_rate_bps = OWN_BPS;
    r->security.peers.rate_cap = grant_cap;
}

/* A 10 Gbit/s path, so that only the caps hold the sender back. */
static void run_plan(const char *name, plan *p, uint64_t file_size, sim_result *r)
{
    sim_cfg c;
    sim_cfg_default(&c);
    c.file_size = file_size;
    c.policy = p->policy;
    c.rate_bps = OWN_BPS;
    c.fwd.rate_bps = c.rev.rate_bps = 10 * OWN_BPS;
    c.tune = tune;
    c.tune_ctx = p;
    c.step = step;
    c.step_ctx = p;
    c.rev_tap = seen_by_sender;
    c.rev_tap_ctx = p;
    c.fwd_tap = sim_emitted_record;
    c.fwd_tap_ctx = &p->e;
    sim_run(&c, r);
    sim_report(name, &c, r);
    assert_false(r->stuck);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
    assert_true(sim_file_intact(&r->st, 1));
    assert_int_equal(p->sampled, p->samples);
}

/* Spec 13.1: over any span, the cap's bytes plus the bucket's depth (and
 * one datagram: the reference pacer lets a datagram leave once its
 * bucket is out of debt). */
static uint64_t allowed(uint64_t cap_bps)
{
    return cap_bps / 8 * WINDOW_NS / SIM_S + 5u * 1452u;
}

static void plan_free(plan *p, sim_result *r)
{
    sim_emitted_free(&p->e);
    sim_result_free(r);
}

/* 100 -> 20 -> 60 Mbit/s under the fair controller: from the update's
 * arrival no 50 ms carries more than 20 Mbit/s allows; after the raise
 * the controller paces above 20 Mbit/s, never above 60. */
static void test_lowers_then_raises(void **state)
{
    (void)state;
    plan p = {.policy = AFTP_CC_FAIR, .changes = 2, .change_at = {SIM_S, 2 * SIM_S},
              .change_bps = {20 * MBIT, 60 * MBIT}, .samples = 2,
              .sample_at = {SIM_S + 500 * SIM_MS, 3 * SIM_S}};
    sim_result r;
    run_plan("rate update fair 100/20/60", &p, 30u << 20, &r);
    assert_true(p.first_update_ns > SIM_S);
    assert_int_equal(p.sample[0].rate_cap_bps, 20 * MBIT);
    assert_true(p.sample[0].pacing_rate_bps <= 20 * MBIT);
    uint64_t most = sim_emitted_busiest(&p.e, WINDOW_NS, p.first_update_ns, 2 * SIM_S);
    printf("[sim] busiest 50 ms under 20 Mbit/s: %llu bytes, allowed %llu\n",
           (unsigned long long)most, (unsigned long long)allowed(20 * MBIT));
    assert_true(most <= allowed(20 * MBIT));
    assert_int_equal(p.sample[1].rate_cap_bps, 60 * MBIT);
    assert_true(p.sample[1].pacing_rate_bps > 20 * MBIT);
    assert_true(p.sample[1].pacing_rate_bps <= 60 * MBIT);
    assert_true(sim_emitted_busiest(&p.e, WINDOW_NS, 2 * SIM_S, UINT64_MAX) <= allowed(60 * MBIT));
    assert_int_equal(r.snd.rate_cap_bps, 60 * MBIT);
    assert_int_equal(r.rcv.rate_cap_bps, 60 * MBIT);
    plan_free(&p, &r);
}

/* The first RATE_UPDATE is lost: the sender keeps the old cap until the
 * repeat, about a second later, brings the new one. */
static void test_lost_update_comes_again(void **state)
{
    (void)state;
    plan p = {.policy = AFTP_CC_FIXED, .changes = 1, .change_at = {SIM_S},
              .change_bps = {20 * MBIT}, .hold_first = 1, .samples = 2,
              .sample_at = {SIM_S + 500 * SIM_MS, 2 * SIM_S + 500 * SIM_MS}};
    sim_result r;
    run_plan("rate update lost", &p, 30u << 20, &r);
    assert_int_equal(p.sample[0].rate_cap_bps, GRANT_BPS);
    assert_int_equal(p.sample[1].rate_cap_bps, 20 * MBIT);
    assert_true(p.sample[1].pacing_rate_bps <= 20 * MBIT);
    assert_int_equal(r.snd.rate_cap_bps, 20 * MBIT);
    plan_free(&p, &r);
}

/* 100 -> 20 -> 60: the 20's only copy is held back and arrives after the
 * 60's: an older sequence, dropped; the cap stays 60. */
static void test_stale_update_ignored(void **state)
{
    (void)state;
    plan p = {.policy = AFTP_CC_FIXED, .changes = 2,
              .change_at = {SIM_S, SIM_S + 300 * SIM_MS}, .change_bps = {20 * MBIT, 60 * MBIT},
              .hold_first = 1, .deliver_late = 1, .samples = 1,
              .sample_at = {SIM_S + 800 * SIM_MS}};
    sim_result r;
    run_plan("rate update stale", &p, 30u << 20, &r);
    assert_int_equal(p.held_len, 0); /* it was delivered */
    assert_int_equal(p.after_late.rate_cap_bps, 60 * MBIT);
    assert_true(p.after_late.pacing_rate_bps > 20 * MBIT);
    assert_int_equal(p.sample[0].rate_cap_bps, 60 * MBIT);
    assert_int_equal(r.snd.rate_cap_bps, 60 * MBIT);
    plan_free(&p, &r);
}

/* An unprotected session (where a RATE_UPDATE can be written here): one
 * with a cap of 0 ends the session with CLOSE(PROTOCOL). */
typedef struct zero_cap {
    int sent;
} zero_cap;

static void send_zero_cap(void *ctx, aftp_sender *snd, aftp_receiver *rcv, uint64_t now)
{
    zero_cap *z = ctx;
    uint8_t buf[64];
    size_t len = 0;
    (void)rcv;
    if (z->sent || now < SIM_S)
        return;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_RATE_UPDATE,
                               .conn_id = 0x11111111, .pn = UINT64_C(1) << 40};
    p.u.rate_update = (aftp_wire_rate_update){.seq = 1, .cap_bps = 0};
    assert_int_equal(aftp_wire_encode(&p, buf, sizeof buf, &len), AFTP_OK);
    assert_int_equal(aftp_sender_read(snd, now, buf, len), AFTP_ERR_MALFORMED);
    z->sent = 1;
}

static void test_zero_cap_is_a_violation(void **state)
{
    (void)state;
    zero_cap z = {0};
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.cipher = AFTP_CIPHER_NONE;
    c.file_size = 30u << 20;
    c.step = send_zero_cap;
    c.step_ctx = &z;
    sim_run(&c, &r);
    assert_true(z.sent);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_ERR_MALFORMED);
    assert_int_not_equal(r.rcv_error, AFTP_OK); /* it was told: CLOSE(PROTOCOL) */
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowers_then_raises),
        cmocka_unit_test(test_lost_update_comes_again),
        cmocka_unit_test(test_stale_update_ignored),
        cmocka_unit_test(test_zero_cap_is_a_violation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
