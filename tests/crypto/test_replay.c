/* Anti-replay window (common/aftp_replay.h): a table-driven run in the
 * manner of WireGuard's counter self-test, then sweeps over the edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "common/aftp_replay.h"

#define W ((uint64_t)AFTP_REPLAY_WINDOW)
#define MAX UINT64_MAX

/* One step: offer pn; `ok` says whether it must be accepted. The window
 * holds the W packet numbers ending at the highest accepted one. */
typedef struct step {
    uint64_t pn;
    int ok;
} step;

static const step table[] = {
    {0, 1}, {1, 1}, {1, 0}, {9, 1}, {8, 1}, {7, 1}, {7, 0},    /* duplicates, reordering */
    {W, 1}, {W - 1, 1}, {W - 1, 0}, {W - 2, 1},                /* a jump, then behind it */
    {2, 1}, {2, 0},                                            /* oldest still inside */
    {W + 16, 1}, {3, 0}, {W + 16, 0},                          /* 3 fell out */
    {W * 4, 1}, {W * 4 - (W - 1), 1}, {10, 0},                 /* first inside after a jump */
    {W * 4 - W, 0}, {W * 4 - (W + 1), 0},                      /* just outside */
    {W * 4 - (W - 2), 1}, {W * 4 + 1 - W, 0}, {0, 0},          /* seen, ancient */
    {MAX, 0},                                                  /* never sent */
    {MAX - 1, 1}, {W * 4, 0}, {MAX - 1, 0},                    /* top of the space */
    {MAX - W, 1}, {MAX - W - 1, 0},
};

static void test_table(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int want = table[i].ok ? AFTP_OK : AFTP_ERR_REPLAY;
        if (aftp_replay_check(&w, table[i].pn) != want ||
            aftp_replay_accept(&w, table[i].pn) != want)
            fail_msg("step %zu: pn %llu should be %s", i, (unsigned long long)table[i].pn,
                     table[i].ok ? "accepted" : "rejected");
    }
}

/* check is a pure question; only accept records. */
static void test_check_changes_nothing(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    assert_int_equal(aftp_replay_check(&w, 5), AFTP_OK);
    assert_int_equal(aftp_replay_check(&w, 5), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 5), AFTP_OK);
    assert_int_equal(aftp_replay_check(&w, 5), AFTP_ERR_REPLAY);
    assert_int_equal(aftp_replay_check(&w, 4), AFTP_OK);
}

/* A full window in order, then everything again: all duplicates; one
 * below the window is too old. */
static void test_full_window(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    for (uint64_t pn = 1; pn <= W; pn++)
        assert_int_equal(aftp_replay_accept(&w, pn), AFTP_OK);
    for (uint64_t pn = 1; pn <= W; pn++)
        assert_int_equal(aftp_replay_accept(&w, pn), AFTP_ERR_REPLAY);
    assert_int_equal(aftp_replay_accept(&w, 0), AFTP_ERR_REPLAY);
}

/* The highest first, then the rest of the window backwards. */
static void test_reverse_order(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    assert_int_equal(aftp_replay_accept(&w, W), AFTP_OK);
    for (uint64_t pn = W - 1; pn >= 1; pn--)
        assert_int_equal(aftp_replay_accept(&w, pn), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 0), AFTP_ERR_REPLAY);
}

/* Ring slots are recycled as the window slides: a new packet number that
 * shares a slot with an old, recorded one is still accepted (once), and
 * a slide that does not pass a recorded number keeps it recorded. */
static void test_ring_recycling(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    assert_int_equal(aftp_replay_accept(&w, 100), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 100 + 64 * 5), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 100), AFTP_ERR_REPLAY);
    assert_int_equal(aftp_replay_accept(&w, 100 + AFTP_REPLAY_BITS), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 100 + AFTP_REPLAY_BITS - 1), AFTP_OK);
    assert_int_equal(aftp_replay_accept(&w, 100 + AFTP_REPLAY_BITS), AFTP_ERR_REPLAY);
    assert_int_equal(aftp_replay_accept(&w, 100 + 64 * 5), AFTP_ERR_REPLAY);
}

/* Sliding one by one over many ring turns with every second number late:
 * each is accepted once, and the one that just left the window is refused. */
static void test_sliding(void **state)
{
    (void)state;
    aftp_replay w;
    aftp_replay_init(&w);
    for (uint64_t pn = 1; pn < 10 * AFTP_REPLAY_BITS; pn += 2) {
        assert_int_equal(aftp_replay_accept(&w, pn), AFTP_OK);
        assert_int_equal(aftp_replay_accept(&w, pn - 1), AFTP_OK);
        assert_int_equal(aftp_replay_accept(&w, pn - 1), AFTP_ERR_REPLAY);
        if (pn > W)
            assert_int_equal(aftp_replay_check(&w, pn - W), AFTP_ERR_REPLAY);
        if (pn + 1 >= W)
            assert_int_equal(aftp_replay_check(&w, pn + 1 - W), AFTP_ERR_REPLAY);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_check_changes_nothing),
        cmocka_unit_test(test_full_window),
        cmocka_unit_test(test_reverse_order),
        cmocka_unit_test(test_ring_recycling),
        cmocka_unit_test(test_sliding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
