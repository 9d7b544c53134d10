/*
 * The allocator of the server's total rate cap (io/run/aftp_share.h):
 * max-min fair shares with sessions' own caps, measured demands, sessions
 * coming and going, idle sessions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "aftp_share.h"

#define MBIT UINT64_C(1000000)

static uint64_t sum_of(const aftp_share_session *s, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i].share_bps;
    return sum;
}

/* Sessions that want everything get equal parts, which add up to the total. */
static void test_equal_parts(void **state)
{
    (void)state;
    aftp_share_session s[4] = {{0}};
    aftp_share_split(400 * MBIT, s, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(s[i].share_bps, 100 * MBIT);
}

/* A key's cap below the equal part: that session gets its cap, the rest is
 * split between the others (max-min fairness). */
static void test_capped_session_leaves_the_rest(void **state)
{
    (void)state;
    aftp_share_session s[3] = {{.cap_bps = 40 * MBIT}, {0}, {0}};
    aftp_share_split(300 * MBIT, s, 3);
    assert_int_equal(s[0].share_bps, 40 * MBIT);
    assert_int_equal(s[1].share_bps, 130 * MBIT);
    assert_int_equal(s[2].share_bps, 130 * MBIT);
}

/* Caps above the equal part change nothing; caps that all fit leave the
 * total partly unused (nobody may exceed its own cap). */
static void test_caps_above_and_all_below(void **state)
{
    (void)state;
    aftp_share_session a[2] = {{.cap_bps = 500 * MBIT}, {.cap_bps = 900 * MBIT}};
    aftp_share_split(200 * MBIT, a, 2);
    assert_int_equal(a[0].share_bps, 100 * MBIT);
    assert_int_equal(a[1].share_bps, 100 * MBIT);
    aftp_share_session b[2] = {{.cap_bps = 10 * MBIT}, {.cap_bps = 20 * MBIT}};
    aftp_share_split(200 * MBIT, b, 2);
    assert_int_equal(b[0].share_bps, 10 * MBIT);
    assert_int_equal(b[1].share_bps, 20 * MBIT);
}

/* A trickling session measured at 1 Mbit/s asks for twice that: it gets
 * it, and the busy ones share what it leaves. */
static void test_trickling_session_measured(void **state)
{
    (void)state;
    aftp_share_session s[3] = {
        {.used_bps = 1 * MBIT, .measured = 1},
        {.used_bps = 150 * MBIT, .measured = 1},
        {.used_bps = 150 * MBIT, .measured = 1},
    };
    aftp_share_split(300 * MBIT, s, 3);
    assert_int_equal(s[0].share_bps, 2 * MBIT);
    assert_int_equal(s[1].share_bps, 149 * MBIT);
    assert_int_equal(s[2].share_bps, 149 * MBIT);
    assert_int_equal(sum_of(s, 3), 300 * MBIT);
}

/* Every session idle: the total is still divided (the sessions may need
 * it next round, and the sum stays the total). An idle session's demand is
 * the floor, never 0. */
static void test_idle_sessions_share_what_is_unused(void **state)
{
    (void)state;
    aftp_share_session s[2] = {{.measured = 1}, {.measured = 1}};
    assert_int_equal(aftp_share_demand(&s[0]), AFTP_SHARE_FLOOR_BPS);
    aftp_share_split(100 * MBIT, s, 2);
    assert_int_equal(s[0].share_bps, 50 * MBIT);
    assert_int_equal(s[1].share_bps, 50 * MBIT);
}

/* A session limited by its share (it used all of it) keeps asking for
 * more than the equal part, so it keeps that part. */
static void test_session_at_its_share_keeps_it(void **state)
{
    (void)state;
    aftp_share_session s[2] = {{.used_bps = 50 * MBIT, .measured = 1}, {0}};
    aftp_share_split(100 * MBIT, s, 2);
    assert_int_equal(s[0].share_bps, 50 * MBIT);
    assert_int_equal(s[1].share_bps, 50 * MBIT);
}

/* A measured demand never exceeds the key's cap. */
static void test_demand_within_the_cap(void **state)
{
    (void)state;
    aftp_share_session s = {.cap_bps = 30 * MBIT, .used_bps = 29 * MBIT, .measured = 1};
    assert_int_equal(aftp_share_demand(&s), 30 * MBIT);
    s.measured = 0;
    assert_int_equal(aftp_share_demand(&s), 30 * MBIT);
    s.cap_bps = 0;
    assert_int_equal(aftp_share_demand(&s), 0);
}

/* Sessions come and go: a newcomer gets an equal part beside the running
 * ones (which the next split lowers), and when one ends the others grow. */
static void test_sessions_come_and_go(void **state)
{
    (void)state;
    aftp_share_session s[4] = {{0}};
    aftp_share_split(300 * MBIT, s, 1);
    assert_int_equal(s[0].share_bps, 300 * MBIT);
    assert_int_equal(aftp_share_entry(300 * MBIT, s, 1, 0), 150 * MBIT);
    assert_int_equal(s[0].share_bps, 150 * MBIT);
    assert_int_equal(aftp_share_entry(300 * MBIT, s, 2, 20 * MBIT), 20 * MBIT);
    assert_int_equal(s[0].share_bps, 140 * MBIT);
    assert_int_equal(s[1].share_bps, 140 * MBIT);
    s[0] = s[2]; /* the first ends: the capped one and the second remain */
    aftp_share_split(300 * MBIT, s, 2);
    assert_int_equal(s[0].share_bps, 20 * MBIT);
    assert_int_equal(s[1].share_bps, 280 * MBIT);
}

/* Many sessions with mixed limits: no share above its own limit, the
 * sum never above the total, and every unlimited session gets the same. */
static void test_many_sessions_bounds(void **state)
{
    (void)state;
    aftp_share_session s[64];
    for (size_t i = 0; i < 64; i++)
        s[i] = (aftp_share_session){.cap_bps = i % 3 == 0 ? (i + 1) * MBIT : 0,
                                    .used_bps = i % 5 == 0 ? i * MBIT / 4 : 0,
                                    .measured = i % 5 == 0};
    aftp_share_split(1000 * MBIT, s, 64);
    assert_true(sum_of(s, 64) <= 1000 * MBIT);
    uint64_t unlimited = 0;
    for (size_t i = 0; i < 64; i++) {
        uint64_t demand = aftp_share_demand(&s[i]);
        assert_true(s[i].share_bps >= 1);
        if (s[i].cap_bps != 0)
            assert_true(s[i].share_bps <= s[i].cap_bps);
        if (demand == 0 && unlimited == 0)
            unlimited = s[i].share_bps;
        else if (demand == 0)
            assert_int_equal(s[i].share_bps, unlimited);
    }
    assert_true(unlimited > 0);
}

/* A total below one bit per session still gives every session a cap. */
static void test_tiny_total_never_zero(void **state)
{
    (void)state;
    aftp_share_session s[3] = {{0}};
    aftp_share_split(2, s, 3);
    for (size_t i = 0; i < 3; i++)
        assert_true(s[i].share_bps >= 1);
}

static void test_rate(void **state)
{
    (void)state;
    assert_int_equal(aftp_share_rate(12500000, 1000000000), 100 * MBIT);
    assert_int_equal(aftp_share_rate(1, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_parts),
        cmocka_unit_test(test_capped_session_leaves_the_rest),
        cmocka_unit_test(test_caps_above_and_all_below),
        cmocka_unit_test(test_trickling_session_measured),
        cmocka_unit_test(test_idle_sessions_share_what_is_unused),
        cmocka_unit_test(test_session_at_its_share_keeps_it),
        cmocka_unit_test(test_demand_within_the_cap),
        cmocka_unit_test(test_sessions_come_and_go),
        cmocka_unit_test(test_many_sessions_bounds),
        cmocka_unit_test(test_tiny_total_never_zero),
        cmocka_unit_test(test_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
