/* The client's key request over a socket (io/run/aftp_keyfetch.h): whole
 * exchanges over loopback with a server that answers through the real
 * front door (door/aftp_door.h), loses a request, stays silent, or is not
 * there. The request's form and the answers it takes are the sans-I/O
 * part's (tests/door/test_door_keyreq.c). */
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

#include "door/aftp_door.h"
#include "aftp_keyfetch.h"
#include "io_testutil.h"

static const uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN] = {
    0x8f, 0x40, 0xc5, 0xad, 0xb6, 0x8f, 0x25, 0x62, 0x4a, 0xe5, 0xb2, 0x14, 0xea, 0x76, 0x7a, 0x6e,
    0xc9, 0x4d, 0x82, 0x9d, 0x3d, 0x7b, 0x5e, 0x1a, 0xd1, 0xba, 0x6f, 0x3e, 0x21, 0x38, 0x28, 0x5f};

/* A loopback server: counts requests, ignores the first `lose` of them,
 * answers the others through a door (or never, when silent). */
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
    aftp_door d;
    aftp_door_verdict v;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    aftp_door_settings set = {.server_key = server_key};
    if (aftp_door_init(&d, &set, 0) != AFTP_OK)
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
        if (aftp_door_input(&d, buf, (size_t)n, (struct sockaddr *)&from, 1, 0, &v) ==
            AFTP_DOOR_REPLY)
            sendto(s->fd, v.reply, v.reply_len, 0, (struct sockaddr *)&from, flen);
    }
    aftp_door_fini(&d);
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
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN], req[AFTP_WIRE_MAX_DATAGRAM];
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
    aftp_door d;
    aftp_door_verdict v;
    aftp_door_settings set = {.server_key = server_key};
    assert_int_equal(aftp_door_init(&d, &set, 0), AFTP_OK);
    assert_int_equal(aftp_keyprobe_open(&p, &o), AFTP_OK);
    assert_int_equal(aftp_keyprobe_step(&p, 0, key), AFTP_OK);
    flen = sizeof from;
    ssize_t n = recvfrom(s.fd, req, sizeof req, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    assert_true(n > 0);
    assert_int_equal(aftp_door_input(&d, req, (size_t)n, (struct sockaddr *)&from, 1, 0, &v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(v.reply_type, AFTP_WIRE_SERVER_KEY);
    assert_int_equal(sendto(s.fd, v.reply, v.reply_len, 0, (struct sockaddr *)&from, flen),
                     (ssize_t)v.reply_len);
    assert_int_equal(aftp_keyprobe_step(&p, 0, key), 1);
    assert_memory_equal(key, server_key, sizeof key);
    aftp_keyprobe_close(&p);
    aftp_door_fini(&d);
    close(s.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_after_a_lost_request),
        cmocka_unit_test(test_fetch_silence),
        cmocka_unit_test(test_fetch_unreachable),
        cmocka_unit_test(test_fetch_interrupted),
        cmocka_unit_test(test_probe_steps_on_the_callers_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
