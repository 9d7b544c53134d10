/* The server's admission by key (door/aftp_admit.h): authorized keys, the
 * pre-shared key, and the per-client handshake timestamps that reject
 * replayed HELLOs, with a bounded table, on a virtual wall clock the tests
 * set (the policy asks it once per timestamp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "door/aftp_admit.h"
#include "common/aftp_handshake.h"

/* Two authorized keys (0x01.., 0x02..), one stranger (0x03..). */
static uint8_t keys[2][AFTP_KEY_LEN];
static uint8_t stranger[AFTP_KEY_LEN];
static aftp_keyfile_list list = {keys, 2, NULL, NULL};

#define SECOND UINT64_C(1000000000)
#define T0 (UINT64_C(1700000000) * SECOND) /* the server's clock, unless a test moves it */

/* The server's wall clock, as the policy asks it: set by the tests. */
static uint64_t wall_ns;

static uint64_t virtual_clock(void *user)
{
    (void)user;
    return wall_ns;
}

/* An admit on the virtual clock, set to T0. */
static aftp_peer_policy start(aftp_admit *a, const uint8_t *psk)
{
    wall_ns = T0;
    aftp_admit_init(a, &list, psk, (aftp_admit_clock){.now_ns = virtual_clock});
    return aftp_admit_policy(a);
}

static int setup(void **state)
{
    (void)state;
    memset(keys[0], 1, AFTP_KEY_LEN);
    memset(keys[1], 2, AFTP_KEY_LEN);
    memset(stranger, 3, AFTP_KEY_LEN);
    return 0;
}

static void stamp(uint64_t seconds, uint8_t *ts)
{
    aftp_hs_timestamp(seconds * 1000000000u, ts);
}

static void test_lookup(void **state)
{
    (void)state;
    aftp_admit a;
    uint8_t psk[AFTP_KEY_LEN], zero[AFTP_KEY_LEN] = {0}, shared[AFTP_KEY_LEN];
    aftp_peer_policy p = start(&a, NULL);
    memset(psk, 0xee, sizeof psk);
    assert_int_equal(p.lookup(p.user, keys[1], psk), AFTP_OK);
    assert_memory_equal(psk, zero, AFTP_KEY_LEN); /* no psk: zeros */
    assert_false(a.have_rejected);
    assert_int_equal(p.lookup(p.user, stranger, psk), AFTP_ERR_UNKNOWN_PEER);
    assert_true(a.have_rejected);
    assert_memory_equal(a.rejected, stranger, AFTP_KEY_LEN);
    aftp_admit_fini(&a);

    memset(shared, 0x5a, sizeof shared);
    p = start(&a, shared);
    assert_int_equal(p.lookup(p.user, keys[0], psk), AFTP_OK);
    assert_memory_equal(psk, shared, AFTP_KEY_LEN);
    aftp_admit_fini(&a);
}

static void test_timestamps_per_client(void **state)
{
    (void)state;
    aftp_admit a;
    uint8_t t1[AFTP_HS_TIMESTAMP_LEN], t2[AFTP_HS_TIMESTAMP_LEN];
    stamp(100, t1);
    stamp(200, t2);
    aftp_peer_policy p = start(&a, NULL);
    assert_int_equal(p.check_timestamp(p.user, keys[0], t1), AFTP_OK);
    assert_int_equal(p.check_timestamp(p.user, keys[0], t1), AFTP_ERR_REPLAY); /* same */
    assert_int_equal(p.check_timestamp(p.user, keys[1], t1), AFTP_OK);        /* other client */
    assert_int_equal(p.check_timestamp(p.user, keys[0], t2), AFTP_OK);        /* newer */
    assert_int_equal(p.check_timestamp(p.user, keys[0], t1), AFTP_ERR_REPLAY); /* older */
    assert_int_equal(p.check_timestamp(p.user, keys[1], t2), AFTP_OK);
    aftp_admit_fini(&a);
}

static void stamp_ns(uint64_t ns, uint8_t *ts)
{
    aftp_hs_timestamp(ns, ts);
}

/* What the server's log says of the latest timestamp refused. */
static const char *explained(const aftp_admit *a)
{
    static char why[256];
    aftp_admit_explain(a, why, sizeof why);
    return why;
}

/* ... and of the latest key refused, authorized keys being in path. */
static const char *explained_unknown(const aftp_admit *a, const char *path)
{
    static char why[256];
    aftp_admit_explain_unknown(a, path, why, sizeof why);
    return why;
}

/* The policy's verdict on a HELLO from key stamped ts_ns. */
static int check_at(const aftp_peer_policy *p, const uint8_t *key, uint64_t ts_ns)
{
    uint8_t ts[AFTP_HS_TIMESTAMP_LEN];
    stamp_ns(ts_ns, ts);
    return p->check_timestamp(p->user, key, ts);
}

/* Sessions one key opens close together or in parallel: any order within
 * the window is fine, an exact repeat never is, and a HELLO older than the
 * window (or than what the bounded list forgot) is refused. */
static void test_timestamps_reordered_within_window(void **state)
{
    (void)state;
    const uint64_t t0 = T0 - 100 * SECOND;
    aftp_admit a;
    aftp_peer_policy p = start(&a, NULL);
    assert_int_equal(check_at(&p, keys[0], t0 + 5), AFTP_OK);
    /* started earlier, arrived later */
    assert_int_equal(check_at(&p, keys[0], t0 + 1), AFTP_OK);
    assert_int_equal(check_at(&p, keys[0], t0 + 1), AFTP_ERR_REPLAY);
    assert_int_equal(check_at(&p, keys[0], t0 + 5), AFTP_ERR_REPLAY);
    /* back-to-back sends: 1 ns apart is enough */
    assert_int_equal(check_at(&p, keys[0], t0 + 2), AFTP_OK);
    /* The client moves on by more than the window: the old ones are out. */
    assert_int_equal(check_at(&p, keys[0], t0 + AFTP_ADMIT_WINDOW_NS + 10), AFTP_OK);
    assert_int_equal(check_at(&p, keys[0], t0 + 3), AFTP_ERR_REPLAY);
    aftp_admit_fini(&a);
}

/* The per-client list is bounded: once it forgets a timestamp, nothing up
 * to that one is accepted again, even inside the window. */
static void test_timestamps_forgotten_raise_the_floor(void **state)
{
    (void)state;
    const uint64_t t0 = T0 - 100 * SECOND;
    aftp_admit a;
    aftp_peer_policy p = start(&a, NULL);
    for (uint64_t i = 1; i <= AFTP_ADMIT_RECENT + 1; i++)
        assert_int_equal(check_at(&p, keys[1], t0 + 10 * i), AFTP_OK);
    /* the forgotten first one, one below the floor, one above it never seen */
    assert_int_equal(check_at(&p, keys[1], t0 + 10), AFTP_ERR_REPLAY);
    assert_int_equal(check_at(&p, keys[1], t0 + 5), AFTP_ERR_REPLAY);
    assert_int_equal(check_at(&p, keys[1], t0 + 15), AFTP_OK);
    aftp_admit_fini(&a);
}

/* Past AFTP_ADMIT_MAX_CLIENTS keys the least recently seen one is
 * forgotten, the others are still remembered. */
static void test_table_bounded(void **state)
{
    (void)state;
    aftp_admit a;
    uint8_t key[AFTP_KEY_LEN], ts[AFTP_HS_TIMESTAMP_LEN];
    aftp_peer_policy p = start(&a, NULL);
    stamp(100, ts);
    memset(key, 0, sizeof key);
    for (uint32_t i = 0; i < AFTP_ADMIT_MAX_CLIENTS; i++) {
        memcpy(key, &i, sizeof i);
        assert_int_equal(p.check_timestamp(p.user, key, ts), AFTP_OK);
    }
    assert_int_equal(a.seen_count, AFTP_ADMIT_MAX_CLIENTS);
    /* client 0 comes back (newest now); client 1 is the oldest */
    uint32_t i = 0;
    uint8_t later[AFTP_HS_TIMESTAMP_LEN];
    stamp(150, later);
    memcpy(key, &i, sizeof i);
    assert_int_equal(p.check_timestamp(p.user, key, later), AFTP_OK);
    uint32_t newcomer = AFTP_ADMIT_MAX_CLIENTS;
    memcpy(key, &newcomer, sizeof newcomer);
    assert_int_equal(p.check_timestamp(p.user, key, ts), AFTP_OK);
    assert_int_equal(a.seen_count, AFTP_ADMIT_MAX_CLIENTS);
    /* client 1 was evicted: its old timestamp passes again; 0 and 2 are kept */
    i = 1;
    memcpy(key, &i, sizeof i);
    assert_int_equal(p.check_timestamp(p.user, key, ts), AFTP_OK);
    i = 0;
    memcpy(key, &i, sizeof i);
    assert_int_equal(p.check_timestamp(p.user, key, later), AFTP_ERR_REPLAY);
    i = 3;
    memcpy(key, &i, sizeof i);
    assert_int_equal(p.check_timestamp(p.user, key, ts), AFTP_ERR_REPLAY);
    aftp_admit_fini(&a);
}

/* A timestamp further ahead of the server's clock than the bound is
 * refused, and the refusal says by how much; one exactly at the bound is
 * accepted, one nanosecond past it is not. */
static void test_timestamp_far_ahead_refused(void **state)
{
    (void)state;
    aftp_admit a;
    aftp_peer_policy p = start(&a, NULL);
    assert_int_equal(check_at(&p, keys[0], T0 + 3600 * SECOND), AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_AHEAD);
    assert_memory_equal(a.refusal.key, keys[0], AFTP_KEY_LEN);
    assert_true(a.refusal.now_ns == T0);
    assert_string_equal(explained(&a), "its handshake timestamp is 3600.0 s ahead of this server's clock, "
                             "more than the 60 s accepted: one of the two clocks is wrong (set "
                             "both by NTP)");
    assert_int_equal(check_at(&p, keys[0], T0 + AFTP_ADMIT_MAX_AHEAD_NS + 1), AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_AHEAD);
    assert_int_equal(check_at(&p, keys[0], T0 + AFTP_ADMIT_MAX_AHEAD_NS), AFTP_OK);
    aftp_admit_fini(&a);
}

/* A client whose clock ran ahead (within the bound) for a handshake and
 * was then set right is admitted at once: the future timestamp counted
 * only up to the server's clock. A repeat of that future HELLO is still
 * refused, and so is a HELLO older than the window, with its figures. */
static void test_clock_ahead_once_then_right(void **state)
{
    (void)state;
    aftp_admit a;
    uint8_t ahead[AFTP_HS_TIMESTAMP_LEN];
    aftp_peer_policy p = start(&a, NULL);
    stamp_ns(T0 + 50 * SECOND, ahead); /* 50 s ahead: far beyond the 10 s window */
    assert_int_equal(p.check_timestamp(p.user, keys[1], ahead), AFTP_OK);
    assert_true(a.seen[0].latest_ns == T0); /* counted up to the server's clock */
    wall_ns = T0 + SECOND;
    assert_int_equal(check_at(&p, keys[1], T0 + SECOND), AFTP_OK); /* its clock set right */
    assert_int_equal(p.check_timestamp(p.user, keys[1], ahead), AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_REPEATED);
    /* 5 s older than the window (which starts at T0 + 1 s - 10 s) */
    assert_int_equal(check_at(&p, keys[1], T0 - AFTP_ADMIT_WINDOW_NS - 4 * SECOND),
                     AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_OLD);
    assert_string_equal(explained(&a), "its handshake timestamp is 5.0 s behind the earliest this key may "
                             "use now: a replayed HELLO, or the client's clock went back (it is "
                             "admitted again once its clock passes that point)");
    aftp_admit_fini(&a);
}

/* The server's own clock is set back an hour, then right again: a client
 * with the right time is refused as an hour ahead meanwhile, the refusal
 * naming the figure, and admitted with that very HELLO's timestamp once
 * the server's clock is right (a refused timestamp is not remembered). */
static void test_server_clock_set_back_then_forward(void **state)
{
    (void)state;
    aftp_admit a;
    aftp_peer_policy p = start(&a, NULL);
    wall_ns = T0 - 3600 * SECOND;
    assert_int_equal(check_at(&p, keys[0], T0), AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_AHEAD);
    assert_non_null(strstr(explained(&a), "its handshake timestamp is 3600.0 s ahead of this server's"));
    wall_ns = T0; /* set right */
    assert_int_equal(check_at(&p, keys[0], T0), AFTP_OK);
    assert_int_equal(check_at(&p, keys[0], T0), AFTP_ERR_REPLAY);
    assert_int_equal(a.refusal.kind, AFTP_ADMIT_REPEATED);
    aftp_admit_fini(&a);
}

/* What the server's log says of a key that is not authorized. */
static void test_unknown_key_explained(void **state)
{
    (void)state;
    aftp_admit a;
    uint8_t psk[AFTP_KEY_LEN];
    aftp_peer_policy p = start(&a, NULL);
    assert_int_equal(p.lookup(p.user, stranger, psk), AFTP_ERR_UNKNOWN_PEER);
    assert_string_equal(explained_unknown(&a, "/etc/aftp/authorized"), "its key is not authorized (add the line 'aftp-x25519 "
                             "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=' to "
                             "/etc/aftp/authorized to admit it)");
    aftp_admit_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_timestamps_per_client),
        cmocka_unit_test(test_timestamps_reordered_within_window),
        cmocka_unit_test(test_timestamps_forgotten_raise_the_floor),
        cmocka_unit_test(test_table_bounded),
        cmocka_unit_test(test_timestamp_far_ahead_refused),
        cmocka_unit_test(test_clock_ahead_once_then_right),
        cmocka_unit_test(test_server_clock_set_back_then_forward),
        cmocka_unit_test(test_unknown_key_explained),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
