/* The client's key request (io/aftp_keyfetch.h): the request's form, which
 * answers it takes, and whole exchanges over loopback with a server that
 * answers through the real gate (io/aftp_gate.h), loses a request, stays
 * silent, or is not there. */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_gate.h"
#include "aftp_keyfetch.h"
#include "io_testutil.h"

static const uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN] = {
    0x8f, 0x40, 0xc5, 0xad, 0xb6, 0x8f, 0x25, 0x62, 0x4a, 0xe5, 0xb2, 0x14, 0xea, 0x76, 0x7a, 0x6e,
    0xc9, 0x4d, 0x82, 0x9d, 0x3d, 0x7b, 0x5e, 0x1a, 0xd1, 0xba, 0x6f, 0x3e, 0x21, 0x38, 0x28, 0x5f};

/* The request is a full-size HELLO with an empty KEY_REQUEST and no
 * HANDSHAKE: nothing a server could start a session with. */
static void test_request_form(void **state)
{
    (void)state;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    size_t len = 0;
    assert_int_equal(aftp_keyfetch_request(0x1234abcdu, buf, sizeof buf, &len), AFTP_OK);
    assert_int_equal(len, AFTP_WIRE_HELLO_MIN_LEN);
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(buf, len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_HELLO);
    assert_int_equal(p.hdr.conn_id, 0x1234abcdu);
    const uint8_t *value;
    uint16_t value_len = 99;
    assert_int_equal(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len,
                                        AFTP_WIRE_EXT_KEY_REQUEST, &value, &value_len),
                     1);
    assert_int_equal(value_len, 0);
    assert_int_equal(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len, AFTP_WIRE_EXT_HANDSHAKE,
                                        &value, &value_len),
                     0);
    /* a buffer one byte short is refused */
    assert_int_not_equal(aftp_keyfetch_request(1, buf, AFTP_WIRE_HELLO_MIN_LEN - 1, &len),
                         AFTP_OK);
}

/* The gate's answer to our request is taken, for our id only; other
 * packets are not answers. */
static void test_answer_matching(void **state)
{
    (void)state;
    uint8_t req[AFTP_WIRE_HELLO_MIN_LEN], reply[AFTP_GATE_REPLY_MAX], key[AFTP_WIRE_SERVER_KEY_LEN];
    size_t req_len, reply_len;
    aftp_gate g;
    struct sockaddr_in from = io_test_loopback(4000);
    assert_int_equal(aftp_gate_init(&g, server_key), AFTP_OK);
    assert_int_equal(aftp_keyfetch_request(77, req, sizeof req, &req_len), AFTP_OK);
    assert_int_equal(aftp_gate_hello(&g, req, req_len, (struct sockaddr *)&from, 0, 1, reply,
                                     &reply_len),
                     AFTP_GATE_SERVER_KEY);
    memset(key, 0xee, sizeof key);
    assert_int_equal(aftp_keyfetch_answer(78, reply, reply_len, key), 0);
    assert_int_equal(aftp_keyfetch_answer(77, reply, reply_len - 1, key), 0);
    assert_int_equal(aftp_keyfetch_answer(77, req, req_len, key), 0); /* a HELLO */
    for (size_t i = 0; i < sizeof key; i++)
        assert_int_equal(key[i], 0xee);
    assert_int_equal(aftp_keyfetch_answer(77, reply, reply_len, key), 1);
    assert_memory_equal(key, server_key, sizeof key);
    /* a RETRY for our id is no key */
    aftp_wire_packet retry;
    memset(&retry, 0, sizeof retry);
    retry.hdr = (aftp_wire_header){AFTP_WIRE_VERSION, AFTP_WIRE_RETRY, 0, 77, 0};
    retry.u.retry = (aftp_wire_retry){1, key};
    assert_int_equal(aftp_wire_encode(&retry, reply, sizeof reply, &reply_len), AFTP_OK);
    assert_int_equal(aftp_keyfetch_answer(77, reply, reply_len, key), 0);
    aftp_gate_fini(&g);
}

/* A loopback server: counts requests, ignores the first `lose` of them,
 * answers the others through a gate (or never, when silent). */
typedef struct server {
    int fd;
    uint16_t port;
    unsigned lose;
    int silent;
    unsigned requests;
    uint32_t first_id, last_id;
    pthread_t thread;
} server;

static void server_start(server *s, unsigned lose, int silent)
{
    memset(s, 0, sizeof *s);
    s->lose = lose;
    s->silent = silent;
    s->fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_in a = io_test_loopback(0);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &alen), 0);
    s->port = ntohs(a.sin_port);
    struct timeval tv = {0, 200000}; /* the thread's loop ends 0.2 s after the last datagram */
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static void *server_loop(void *arg)
{
    server *s = arg;
    aftp_gate g;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM], reply[AFTP_GATE_REPLY_MAX];
    size_t reply_len;
    if (aftp_gate_init(&g, server_key) != AFTP_OK)
        return NULL;
    for (;;) {
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(s->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        if (n < 0)
            break;
        aftp_wire_header h;
        if (aftp_wire_header_decode(buf, (size_t)n, &h) == AFTP_OK) {
            s->first_id = s->requests == 0 ? h.conn_id : s->first_id;
            s->last_id = h.conn_id;
        }
        if (++s->requests <= s->lose || s->silent)
            continue;
        if (aftp_gate_hello(&g, buf, (size_t)n, (struct sockaddr *)&from, 1, 1, reply,
                            &reply_len) == AFTP_GATE_SERVER_KEY)
            sendto(s->fd, reply, reply_len, 0, (struct sockaddr *)&from, flen);
    }
    aftp_gate_fini(&g);
    return NULL;
}

static void server_finish(server *s)
{
    pthread_join(s->thread, NULL);
    close(s->fd);
}

static int fetch(uint16_t port, unsigned attempts, atomic_int *interrupt, uint8_t *key)
{
    struct sockaddr_in peer = io_test_loopback(port);
    aftp_keyfetch_opts o = {.peer = (struct sockaddr *)&peer, .peer_len = sizeof peer,
                            .attempts = attempts, .interval_ns = 100000000u,
                            .interrupt = interrupt};
    return aftp_keyfetch_run(&o, key);
}

/* A fetch from a server that loses `lose` requests or stays silent: its
 * result; s tells what the server saw. */
static int fetch_from(server *s, unsigned lose, int silent, uint8_t *key)
{
    server_start(s, lose, silent);
    assert_int_equal(pthread_create(&s->thread, NULL, server_loop, s), 0);
    int rc = fetch(s->port, 3, NULL, key);
    server_finish(s);
    return rc;
}

/* The first request is lost: the resend, with the same id, is answered. */
static void test_fetch_after_a_lost_request(void **state)
{
    (void)state;
    server s;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    assert_int_equal(fetch_from(&s, 1, 0, key), AFTP_OK);
    assert_memory_equal(key, server_key, sizeof key);
    assert_int_equal(s.requests, 2);
    assert_int_equal(s.first_id, s.last_id);
    assert_int_not_equal(s.first_id, 0);
}

/* A silent peer gets exactly `attempts` requests, then the fetch gives up. */
static void test_fetch_silence(void **state)
{
    (void)state;
    server s;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    assert_int_equal(fetch_from(&s, 0, 1, key), AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(s.requests, 3);
}

/* Nobody on the port: the kernel's ICMP error ends the fetch. */
static void test_fetch_unreachable(void **state)
{
    (void)state;
    server s;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    server_start(&s, 0, 1);
    close(s.fd); /* the port is free again */
    assert_int_equal(fetch(s.port, 3, NULL, key), AFTP_ERR_NETWORK);
}

static void test_fetch_interrupted(void **state)
{
    (void)state;
    server s;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    atomic_int stop = 1;
    server_start(&s, 0, 1);
    assert_int_equal(fetch(s.port, 3, &stop, key), AFTP_ERR_CANCELLED);
    close(s.fd);
}

/* Datagrams queued at the server's socket, without waiting (loopback
 * delivers at send time); the last one's sender in *from. */
static unsigned queued_requests(int fd, struct sockaddr_storage *from, socklen_t *flen)
{
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    unsigned n = 0;
    for (;;) {
        *flen = sizeof *from;
        if (recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)from, flen) < 0)
            return n;
        n++;
    }
}

/* The probe runs on the caller's clock and never blocks: a request when
 * due, `attempts` of them `interval_ns` apart, the answer taken when it
 * is queued, the end once the last request went unanswered. */
static void test_probe_steps_on_the_callers_clock(void **state)
{
    (void)state;
    const uint64_t sec = 1000000000u;
    server s;
    struct sockaddr_storage from;
    socklen_t flen;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN], reply[AFTP_GATE_REPLY_MAX], req[AFTP_WIRE_MAX_DATAGRAM];
    size_t reply_len;
    server_start(&s, 0, 1);
    struct sockaddr_in peer = io_test_loopback(s.port);
    aftp_keyfetch_opts o = {.peer = (struct sockaddr *)&peer, .peer_len = sizeof peer,
                            .attempts = 2, .interval_ns = sec};
    aftp_keyprobe p;
    assert_int_equal(aftp_keyprobe_open(&p, &o), AFTP_OK);
    assert_int_equal(aftp_keyprobe_step(&p, 0, key), AFTP_OK);
    assert_int_equal(queued_requests(s.fd, &from, &flen), 1);
    assert_int_equal(aftp_keyprobe_step(&p, sec / 2, key), AFTP_OK);
    assert_int_equal(queued_requests(s.fd, &from, &flen), 0);
    assert_int_equal(aftp_keyprobe_step(&p, sec, key), AFTP_OK);
    assert_int_equal(queued_requests(s.fd, &from, &flen), 1);
    assert_int_equal(aftp_keyprobe_step(&p, 2 * sec, key), AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(queued_requests(s.fd, &from, &flen), 0);
    aftp_keyprobe_close(&p);

    /* answered: the key, at once */
    aftp_gate g;
    assert_int_equal(aftp_gate_init(&g, server_key), AFTP_OK);
    assert_int_equal(aftp_keyprobe_open(&p, &o), AFTP_OK);
    assert_int_equal(aftp_keyprobe_step(&p, 0, key), AFTP_OK);
    flen = sizeof from;
    ssize_t n = recvfrom(s.fd, req, sizeof req, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    assert_true(n > 0);
    assert_int_equal(aftp_gate_hello(&g, req, (size_t)n, (struct sockaddr *)&from, 1, 1, reply,
                                     &reply_len),
                     AFTP_GATE_SERVER_KEY);
    assert_int_equal(sendto(s.fd, reply, reply_len, 0, (struct sockaddr *)&from, flen),
                     (ssize_t)reply_len);
    assert_int_equal(aftp_keyprobe_step(&p, 0, key), 1);
    assert_memory_equal(key, server_key, sizeof key);
    aftp_keyprobe_close(&p);
    aftp_gate_fini(&g);
    close(s.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_form),
        cmocka_unit_test(test_answer_matching),
        cmocka_unit_test(test_fetch_after_a_lost_request),
        cmocka_unit_test(test_fetch_silence),
        cmocka_unit_test(test_fetch_unreachable),
        cmocka_unit_test(test_fetch_interrupted),
        cmocka_unit_test(test_probe_steps_on_the_callers_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
