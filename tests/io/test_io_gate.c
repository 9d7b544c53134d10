/* The server's HELLO gate (io/aftp_gate.h): when a HELLO starts a session,
 * gets a RETRY or is dropped; the RETRY's form and its cookie. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aftp_gate.h"
#include "proto/aftp_wire.h"

static struct sockaddr_in client(uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

/* A full-size HELLO of conn_id, with a COOKIE extension when token. */
static size_t make_hello(uint32_t conn_id, const uint8_t *token, uint16_t token_len,
                         uint8_t *buf)
{
    uint8_t ext[64];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (token != NULL)
        assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, token, token_len), AFTP_OK);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.hdr.version = AFTP_WIRE_VERSION;
    p.hdr.type = AFTP_WIRE_HELLO;
    p.hdr.conn_id = conn_id;
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = 1452;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    size_t n = 0;
    assert_int_equal(aftp_wire_encode(&p, buf, AFTP_WIRE_MAX_DATAGRAM, &n), AFTP_OK);
    return n;
}

/* One gate and the HELLO it is shown. */
typedef struct fixture {
    aftp_gate g;
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    uint8_t reply[AFTP_GATE_REPLY_MAX];
    size_t reply_len;
} fixture;

/* A fresh gate (every HELLO retried when force) and a HELLO of conn_id
 * without a cookie. */
static void start(fixture *f, int force, uint32_t conn_id)
{
    memset(f, 0, sizeof *f);
    if (force)
        setenv(AFTP_GATE_RETRY_ENV, "1", 1);
    else
        unsetenv(AFTP_GATE_RETRY_ENV);
    assert_int_equal(aftp_gate_init(&f->g), AFTP_OK);
    assert_int_equal(f->g.force_retry, force);
    f->len = make_hello(conn_id, NULL, 0, f->hello);
}

static void finish(fixture *f)
{
    aftp_gate_fini(&f->g);
    unsetenv(AFTP_GATE_RETRY_ENV);
}

/* The gate's verdict on f's HELLO from 127.0.0.1:port. */
static int verdict(fixture *f, uint16_t port, int busy, uint32_t now)
{
    struct sockaddr_in from = client(port);
    return aftp_gate_hello(&f->g, f->hello, f->len, (struct sockaddr *)&from, busy, now,
                           f->reply, &f->reply_len);
}

/* The reply is a RETRY for conn_id: the HELLO becomes that HELLO again
 * with the RETRY's token echoed. */
static void answer_retry(fixture *f, uint32_t conn_id)
{
    aftp_wire_packet r;
    assert_int_equal(aftp_wire_decode(f->reply, f->reply_len, &r), AFTP_OK);
    assert_int_equal(r.hdr.type, AFTP_WIRE_RETRY);
    assert_int_equal(r.hdr.conn_id, conn_id);
    assert_int_equal(r.hdr.pn, 0);
    assert_int_equal(r.u.retry.token_len, AFTP_COOKIE_LEN);
    uint8_t token[AFTP_COOKIE_LEN];
    memcpy(token, r.u.retry.token, sizeof token);
    f->len = make_hello(conn_id, token, sizeof token, f->hello);
}

static void test_idle_server_starts(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 0, 100), AFTP_GATE_START);
    finish(&f);
}

/* Busy: a RETRY far smaller than the HELLO; the HELLO with its token is
 * validated: dropped while busy, started once idle, for that source and
 * id only, for AFTP_COOKIE_MAX_AGE_S seconds. */
static void test_busy_retry_then_cookie(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_GATE_RETRY);
    assert_true(f.reply_len < f.len);
    answer_retry(&f, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 101), AFTP_GATE_DROP);
    assert_int_equal(verdict(&f, 5000, 0, 102), AFTP_GATE_START);
    assert_int_equal(verdict(&f, 5001, 1, 102), AFTP_GATE_RETRY); /* another port */
    assert_int_equal(verdict(&f, 5000, 1, 100 + AFTP_COOKIE_MAX_AGE_S + 1), AFTP_GATE_RETRY);
    /* the token under another connection id */
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_wire_packet r;
    assert_int_equal(verdict(&f, 5000, 1, 200), AFTP_GATE_RETRY);
    assert_int_equal(aftp_wire_decode(f.reply, f.reply_len, &r), AFTP_OK);
    memcpy(token, r.u.retry.token, sizeof token);
    f.len = make_hello(0xabd, token, sizeof token, f.hello);
    assert_int_equal(verdict(&f, 5000, 1, 200), AFTP_GATE_RETRY);
    finish(&f);
}

/* More than AFTP_GATE_MAX_UNVALIDATED HELLOs without a cookie in one second
 * put an idle server under load until the next second. */
static void test_hello_flood(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 1);
    for (unsigned i = 0; i < AFTP_GATE_MAX_UNVALIDATED; i++)
        assert_int_equal(verdict(&f, (uint16_t)(6000 + i), 0, 50), AFTP_GATE_START);
    assert_int_equal(verdict(&f, 7000, 0, 50), AFTP_GATE_RETRY);
    assert_int_equal(verdict(&f, 7001, 0, 51), AFTP_GATE_START);
    finish(&f);
}

/* RETRYs are limited per second: the excess is dropped. */
static void test_retry_rate_limited(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 1);
    for (unsigned i = 0; i < AFTP_GATE_MAX_RETRIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_GATE_RETRY);
    assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_GATE_DROP);
    assert_int_equal(verdict(&f, 9000, 1, 71), AFTP_GATE_RETRY);
    assert_int_equal(f.g.retries_sent, AFTP_GATE_MAX_RETRIES + 1);
    finish(&f);
}

static void test_forced_retry(void **state)
{
    (void)state;
    fixture f;
    start(&f, 1, 0x77);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_GATE_RETRY);
    answer_retry(&f, 0x77);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_GATE_START);
    finish(&f);
}

/* Cookies die with the process: another gate's secret does not verify. */
static void test_secret_per_gate(void **state)
{
    (void)state;
    fixture f1, f2;
    start(&f1, 0, 0x99);
    start(&f2, 0, 0x99);
    assert_int_equal(verdict(&f1, 5000, 1, 10), AFTP_GATE_RETRY);
    answer_retry(&f1, 0x99);
    memcpy(f2.hello, f1.hello, f1.len);
    f2.len = f1.len;
    assert_int_equal(verdict(&f1, 5000, 1, 10), AFTP_GATE_DROP); /* validated, busy */
    assert_int_equal(verdict(&f2, 5000, 1, 10), AFTP_GATE_RETRY);
    finish(&f1);
    finish(&f2);
}

/* A HELLO that does not decode (here: cut short) gets nothing, even when
 * every HELLO is to be retried. */
static void test_malformed_dropped(void **state)
{
    (void)state;
    fixture f;
    start(&f, 1, 1);
    f.len = 40;
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_GATE_DROP);
    assert_int_equal(f.g.retries_sent, 0);
    finish(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_server_starts),
        cmocka_unit_test(test_busy_retry_then_cookie),
        cmocka_unit_test(test_hello_flood),
        cmocka_unit_test(test_retry_rate_limited),
        cmocka_unit_test(test_forced_retry),
        cmocka_unit_test(test_secret_per_gate),
        cmocka_unit_test(test_malformed_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
