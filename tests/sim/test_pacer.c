/* aftp_pacer: transmission times, bucket depth, long-run rate, no credit
 * hoarding while idle, rate changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/aftp_pacer.h"

#define MS UINT64_C(1000000)
#define S (1000 * MS)

static void test_tx_time(void **state)
{
    (void)state;
    aftp_pacer p;
    aftp_pacer_init(&p, 12000000, 4 * 1500, 0);
    assert_int_equal(aftp_pacer_tx_time(&p, 1500), 1 * MS); /* 12000 bits at 12 Mbit/s */
    aftp_pacer_set_rate(&p, UINT64_C(400000000000));         /* 400 Gbit/s: no overflow */
    assert_int_equal(aftp_pacer_tx_time(&p, UINT64_C(50000000000)), 1 * S);
}

/* Sends as soon as allowed from `start` for `span`; returns bytes sent. */
static uint64_t greedy(aftp_pacer *p, uint64_t start, uint64_t span, uint32_t size, int *burst)
{
    uint64_t now = start, bytes = 0;
    *burst = 0;
    while (now < start + span) {
        if (aftp_pacer_ready(p, now)) {
            aftp_pacer_on_send(p, now, size);
            bytes += size;
            if (now == start)
                (*burst)++;
        } else {
            now = aftp_pacer_next_send(p);
        }
    }
    return bytes;
}

static void test_burst_then_rate(void **state)
{
    (void)state;
    aftp_pacer p;
    int burst;
    const uint64_t rate = 100000000; /* 100 Mbit/s: 1 ms = 12500 bytes > 4 datagrams */
    aftp_pacer_init(&p, rate, 4 * 1452, 5 * S);
    assert_int_equal(p.depth_ns, AFTP_PACER_MIN_DEPTH_NS);
    uint64_t bytes = greedy(&p, 5 * S, 1 * S, 1452, &burst);
    /* At the start, a full bucket: 1 ms of data (plus the packet that
     * empties it). */
    uint64_t per_packet = aftp_pacer_tx_time(&p, 1452);
    assert_int_equal((uint64_t)burst, AFTP_PACER_MIN_DEPTH_NS / per_packet + 1);
    /* Over a second: the rate plus the one bucket, within a packet. */
    uint64_t expect = rate / 8 + 12500;
    assert_true(bytes + 1452 >= expect && bytes <= expect + 1452);
}

static void test_idle_does_not_hoard(void **state)
{
    (void)state;
    aftp_pacer p;
    int burst;
    aftp_pacer_init(&p, 100000000, 4 * 1452, 0);
    greedy(&p, 0, 10 * MS, 1452, &burst);
    /* Ten idle seconds later the burst is still one bucket. */
    greedy(&p, 10 * S, 1 * MS, 1452, &burst);
    assert_int_equal((uint64_t)burst, AFTP_PACER_MIN_DEPTH_NS / aftp_pacer_tx_time(&p, 1452) + 1);
}

/* At low rates the bucket still holds 4 datagrams. */
static void test_depth_floor_in_datagrams(void **state)
{
    (void)state;
    aftp_pacer p;
    aftp_pacer_init(&p, 1000000, 4 * 1452, 0);
    assert_int_equal(p.depth_ns, aftp_pacer_tx_time(&p, 4 * 1452));
    aftp_pacer_set_rate(&p, 1000000000);
    assert_int_equal(p.depth_ns, AFTP_PACER_MIN_DEPTH_NS);
    assert_int_equal(aftp_pacer_rate(&p), 1000000000);
}

/* A smaller datagram known later (a session's, after its handshake):
 * the bucket shrinks to 4 of them, and a full one holds no more. */
static void test_burst_follows_the_datagram(void **state)
{
    (void)state;
    aftp_pacer p;
    int burst;
    aftp_pacer_init(&p, 10000000, 4 * 9168, 0);
    aftp_pacer_set_burst(&p, 4 * 1452);
    assert_int_equal(p.depth_ns, aftp_pacer_tx_time(&p, 4 * 1452));
    greedy(&p, 1 * S, 1 * MS, 1452, &burst);
    assert_int_equal(burst, 5); /* the 4 it holds and the one that empties it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tx_time),
        cmocka_unit_test(test_burst_then_rate),
        cmocka_unit_test(test_idle_does_not_hoard),
        cmocka_unit_test(test_depth_floor_in_datagrams),
        cmocka_unit_test(test_burst_follows_the_datagram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
