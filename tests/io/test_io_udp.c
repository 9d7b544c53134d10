/* The real socket path over 127.0.0.1: batches (with and without GSO/GRO)
 * arrive whole and in order, the loss shim drops what it says, ICMP
 * unreachable surfaces as AFTP_ERR_NETWORK, buffers are sized and read back,
 * datagrams carry the kernel's arrival stamps onto the engine's clock. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_drive.h"
#include "aftp_udp.h"
#include "io_testutil.h"

#define NDG 200

static void open_loopback(aftp_udp *u)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(aftp_udp_open(u, (struct sockaddr *)&sin, sizeof sin, 1452, 0), AFTP_OK);
}

static void connect_pair(aftp_udp *a, aftp_udp *b)
{
    struct sockaddr_storage sa, sb;
    assert_int_equal(aftp_udp_local_addr(a, &sa), AFTP_OK);
    assert_int_equal(aftp_udp_local_addr(b, &sb), AFTP_OK);
    assert_int_equal(aftp_udp_connect(a, (struct sockaddr *)&sb, sizeof(struct sockaddr_in)),
                     AFTP_OK);
    assert_int_equal(aftp_udp_connect(b, (struct sockaddr *)&sa, sizeof(struct sockaddr_in)),
                     AFTP_OK);
}

/* Two loopback sockets connected to each other; without offload, neither
 * uses GSO nor GRO. */
static void open_pair(aftp_udp *a, aftp_udp *b, int offload)
{
    if (!offload) {
        io_test_needs_hooks(); /* AFTP_IO_OFFLOAD */
        setenv("AFTP_IO_OFFLOAD", "0", 1);
    }
    open_loopback(a);
    open_loopback(b);
    unsetenv("AFTP_IO_OFFLOAD");
    if (!offload)
        assert_false(a->gso || b->gro);
    connect_pair(a, b);
}

/* NDG datagrams: mostly 28 + 1424 bytes (GSO runs), every 50th a short
 * control-like one; byte 0..3 of the head carry the index. */
static void make_batch(uint8_t *heads, uint8_t *payload, aftp_datagram *dgs)
{
    io_test_pattern(payload, NDG * 1424, 9);
    for (size_t i = 0; i < NDG; i++) {
        uint8_t *h = heads + i * 64;
        memset(h, 0, 64);
        memcpy(h, &(uint32_t){(uint32_t)i}, 4);
        int control = i % 50 == 49;
        dgs[i] = (aftp_datagram){h, control ? 60 : 28, control ? NULL : payload + i * 1424,
                                 control ? 0 : 1424};
    }
}

/* Receives until `expect` datagrams came or 2 s passed; checks each. */
static size_t receive_and_check(aftp_udp *b, const aftp_datagram *dgs, size_t expect,
                                int in_order)
{
    size_t got = 0, next = 0;
    for (int rounds = 0; got < expect && rounds < 200; rounds++) {
        size_t count;
        aftp_udp_wait(b, 10000000);
        assert_int_equal(aftp_udp_recv(b, &count), AFTP_OK);
        aftp_udp_iter it = {0};
        const uint8_t *pkt;
        size_t len;
        const struct sockaddr *from;
        while (aftp_udp_next(b, &it, &pkt, &len, &from)) {
            uint32_t idx;
            memcpy(&idx, pkt, 4);
            assert_true(idx < NDG);
            if (in_order)
                assert_int_equal(idx, next);
            next = idx + 1;
            assert_int_equal(len, dgs[idx].head_len + dgs[idx].payload_len);
            assert_memory_equal(pkt, dgs[idx].head, dgs[idx].head_len);
            if (dgs[idx].payload_len)
                assert_memory_equal(pkt + dgs[idx].head_len, dgs[idx].payload,
                                    dgs[idx].payload_len);
            got++;
        }
    }
    return got;
}

static void round_trip(int offload)
{
    aftp_udp a, b;
    static uint8_t heads[NDG * 64], payload[NDG * 1424];
    aftp_datagram dgs[NDG];
    open_pair(&a, &b, offload);
    aftp_udp_buffers bufs = {.want_snd = 4 << 20, .want_rcv = 4 << 20};
    assert_int_equal(aftp_udp_set_buffers(&b, &bufs), AFTP_OK);
    make_batch(heads, payload, dgs);
    assert_int_equal(aftp_udp_send(&a, dgs, NDG), AFTP_OK);
    assert_int_equal(receive_and_check(&b, dgs, NDG, 1), NDG);
    aftp_udp_close(&a);
    aftp_udp_close(&b);
}

static void test_batch_round_trip_with_offload(void **state)
{
    (void)state;
    round_trip(1);
}

static void test_batch_round_trip_plain(void **state)
{
    (void)state;
    round_trip(0);
}

static void test_drop_shim_drops_outgoing(void **state)
{
    (void)state;
    aftp_udp a, b;
    static uint8_t heads[NDG * 64], payload[NDG * 1424];
    aftp_datagram dgs[NDG];
    io_test_needs_hooks();
    setenv(AFTP_DROP_ENV, "0.25,5", 1);
    open_loopback(&a);
    unsetenv(AFTP_DROP_ENV);
    open_loopback(&b);
    connect_pair(&a, &b);
    aftp_udp_buffers bufs = {.want_snd = 4 << 20, .want_rcv = 4 << 20};
    assert_int_equal(aftp_udp_set_buffers(&b, &bufs), AFTP_OK);
    make_batch(heads, payload, dgs);
    assert_int_equal(aftp_udp_send(&a, dgs, NDG), AFTP_OK);
    assert_true(a.drop.dropped > 25 && a.drop.dropped < 75);
    assert_int_equal(receive_and_check(&b, dgs, NDG - a.drop.dropped, 0),
                     NDG - a.drop.dropped);
    aftp_udp_close(&a);
    aftp_udp_close(&b);
}

static void test_unreachable_peer_reported(void **state)
{
    (void)state;
    aftp_udp a, b;
    open_loopback(&a);
    open_loopback(&b);
    connect_pair(&a, &b);
    aftp_udp_close(&b); /* nobody listens there any more */
    uint8_t head[32] = {0};
    aftp_datagram d = {head, sizeof head, NULL, 0};
    int rc = aftp_udp_send(&a, &d, 1);
    size_t count = 0;
    for (int i = 0; rc == AFTP_OK && i < 100; i++) {
        aftp_udp_wait(&a, 10000000);
        rc = aftp_udp_recv(&a, &count);
    }
    assert_int_equal(rc, AFTP_ERR_NETWORK);
    aftp_udp_close(&a);
}

static void test_buffer_sizing(void **state)
{
    (void)state;
    assert_int_equal(aftp_udp_buffer_for(1000000000u, 4000000u), AFTP_UDP_MIN_BUFFER);
    assert_int_equal(aftp_udp_buffer_for(10000000000u, 20000000u), 25000000u);
    assert_int_equal(aftp_udp_buffer_for(2000000000u, 100000000u), 25000000u);
    assert_int_equal(aftp_udp_buffer_for(1000000000000u, 1000000000u), AFTP_UDP_MAX_BUFFER);

    aftp_udp a;
    open_loopback(&a);
    aftp_udp_buffers small = {.want_snd = 1 << 16, .want_rcv = 1 << 16};
    char advice[256];
    assert_int_equal(aftp_udp_set_buffers(&a, &small), AFTP_OK);
    assert_true(small.got_snd >= small.want_snd && small.got_rcv >= small.want_rcv);
    aftp_udp_buffers_advice(&small, advice, sizeof advice);
    assert_string_equal(advice, "");

    aftp_udp_buffers big = {.want_snd = 1 << 16, .want_rcv = 200u << 20};
    assert_int_equal(aftp_udp_set_buffers(&a, &big), AFTP_OK);
    aftp_udp_buffers_advice(&big, advice, sizeof advice);
    if (big.got_rcv >= big.want_rcv) { /* privileged: SO_RCVBUFFORCE went past rmem_max */
        assert_string_equal(advice, "");
    } else {
        assert_non_null(strstr(advice, "net.core.rmem_max=419430400"));
    }
    aftp_udp_close(&a);
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Datagrams read after they arrived carry their arrival time, not the
 * time they were read, in order, with and without GRO: each stamp lies
 * between the send and the start of the read that returns it (the 30 ms
 * pause only lets a loaded machine deliver them all first; no stamp is
 * compared with a duration). */
static void arrival_stamps(int offload)
{
    aftp_udp a, b;
    static uint8_t heads[NDG * 64], payload[NDG * 1424];
    aftp_datagram dgs[NDG];
    open_pair(&a, &b, offload);
    make_batch(heads, payload, dgs);
    uint64_t before = wall_ns();
    assert_int_equal(aftp_udp_send(&a, dgs, 20), AFTP_OK);
    usleep(30000);
    size_t count, got = 0;
    uint64_t read_at = wall_ns(), prev = 0;
    assert_int_equal(aftp_udp_recv(&b, &count), AFTP_OK);
    aftp_udp_iter it = {0};
    const uint8_t *pkt;
    size_t len;
    const struct sockaddr *from;
    while (aftp_udp_next(&b, &it, &pkt, &len, &from)) {
        uint64_t at = it.arrival_ns;
        assert_true(at >= before && at >= prev);
        assert_true(at < read_at);
        prev = at;
        got++;
    }
    assert_int_equal(got, 20);
    aftp_udp_close(&a);
    aftp_udp_close(&b);
}

static void test_arrival_stamps_with_offload(void **state)
{
    (void)state;
    arrival_stamps(1);
}

static void test_arrival_stamps_plain(void **state)
{
    (void)state;
    arrival_stamps(0);
}

/* A stamp moves onto the engine's clock by its age; never before the
 * previous turn (the engine's clock does not go back), and a missing or
 * future stamp (the wall clock was set back) is the read time. */
static void test_arrival_on_engine_clock(void **state)
{
    (void)state;
    const uint64_t ms = 1000000, real = 1700000000000000000u, mono = 5000 * ms;
    assert_int_equal(aftp_drive_arrival_ns(real - 30 * ms, real, mono, 0), mono - 30 * ms);
    assert_int_equal(aftp_drive_arrival_ns(real - 30 * ms, real, mono, mono - 10 * ms),
                     mono - 10 * ms);
    assert_int_equal(aftp_drive_arrival_ns(0, real, mono, 0), mono);
    assert_int_equal(aftp_drive_arrival_ns(real + ms, real, mono, 0), mono);
    assert_int_equal(aftp_drive_arrival_ns(real - 2 * mono, real, mono, 0), 0);
}

/* A server's listener holds its port alone: a second server (or any
 * other socket) cannot bind it, whether it asks to share or not, and says
 * why (EADDRINUSE); the server's own session sockets join the port. */
static void test_listener_port_not_shared_with_others(void **state)
{
    (void)state;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_storage bound;
    aftp_udp listener, session, other;
    assert_int_equal(aftp_udp_open(&listener, (struct sockaddr *)&sin, sizeof sin, 1452,
                                   AFTP_UDP_PORT_SERVE),
                     AFTP_OK);
    assert_int_equal(aftp_udp_local_addr(&listener, &bound), AFTP_OK);
    assert_int_equal(aftp_udp_open(&session, (struct sockaddr *)&bound, sizeof sin, 1452,
                                   AFTP_UDP_PORT_SESSION),
                     AFTP_OK);
    int ports[] = {AFTP_UDP_PORT_SERVE, AFTP_UDP_PORT_OWN};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(aftp_udp_open(&other, (struct sockaddr *)&bound, sizeof sin, 1452,
                                       ports[i]),
                         AFTP_ERR_NETWORK);
        assert_int_equal(other.sys_errno, EADDRINUSE);
        assert_int_equal(other.fd, -1);
    }
    aftp_udp_close(&session);
    aftp_udp_close(&listener);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_round_trip_with_offload),
        cmocka_unit_test(test_batch_round_trip_plain),
        cmocka_unit_test(test_arrival_stamps_with_offload),
        cmocka_unit_test(test_arrival_stamps_plain),
        cmocka_unit_test(test_arrival_on_engine_clock),
        cmocka_unit_test(test_drop_shim_drops_outgoing),
        cmocka_unit_test(test_unreachable_peer_reported),
        cmocka_unit_test(test_buffer_sizing),
        cmocka_unit_test(test_listener_port_not_shared_with_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
