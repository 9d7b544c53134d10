/* The server's HELLO gate (io/aftp_gate.h): when a HELLO starts a session,
 * gets a RETRY, gets the server's key (KEY_REQUEST) or is dropped; the
 * form of RETRY and SERVER_KEY, and the cookie. */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aftp_gate.h"
#include "aftp_keyfetch.h"
#include "io_testutil.h"
#include "proto/aftp_wire.h"

/* The static public key the gates of these tests hand out. */
static const uint8_t gate_key[AFTP_WIRE_SERVER_KEY_LEN] = {
    0x35, 0x80, 0x72, 0xd6, 0x36, 0x58, 0x80, 0xd1, 0xae, 0xea, 0x32, 0x9a, 0xdf, 0x91, 0x21, 0x38,
    0x38, 0x51, 0xed, 0x21, 0xa2, 0x8e, 0x3b, 0x75, 0xe9, 0x65, 0xd0, 0xd2, 0xcd, 0x16, 0x62, 0x54};

/* A full-size HELLO of conn_id, with a COOKIE extension when token, and a
 * KEY_REQUEST extension when key_request: the client's key request
 * (io/aftp_keyfetch.h) with its extensions replaced. */
static size_t make_hello_ext(uint32_t conn_id, const uint8_t *token, uint16_t token_len,
                             int key_request, uint8_t *buf)
{
    uint8_t ext[64];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (token != NULL)
        assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, token, token_len), AFTP_OK);
    if (key_request)
        assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_KEY_REQUEST, NULL, 0), AFTP_OK);
    aftp_wire_packet p;
    size_t n = 0;
    assert_int_equal(aftp_keyfetch_request(conn_id, buf, AFTP_WIRE_MAX_DATAGRAM, &n), AFTP_OK);
    assert_int_equal(aftp_wire_decode(buf, n, &p), AFTP_OK);
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    assert_int_equal(aftp_wire_encode(&p, buf, AFTP_WIRE_MAX_DATAGRAM, &n), AFTP_OK);
    return n;
}

static size_t make_hello(uint32_t conn_id, const uint8_t *token, uint16_t token_len,
                         uint8_t *buf)
{
    return make_hello_ext(conn_id, token, token_len, 0, buf);
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
    if (force) {
        io_test_needs_hooks();
        setenv(AFTP_GATE_RETRY_ENV, "1", 1);
    } else {
        unsetenv(AFTP_GATE_RETRY_ENV);
    }
    assert_int_equal(aftp_gate_init(&f->g, gate_key), AFTP_OK);
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
    struct sockaddr_in from = io_test_loopback(port);
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
    for (unsigned i = 0; i < AFTP_GATE_MAX_REPLIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_GATE_RETRY);
    assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_GATE_DROP);
    assert_int_equal(verdict(&f, 9000, 1, 71), AFTP_GATE_RETRY);
    assert_int_equal(f.g.retries_sent, AFTP_GATE_MAX_REPLIES + 1);
    finish(&f);
}

/* The reply is SERVER_KEY for conn_id: 48 bytes (far below the HELLO),
 * version 1, no flags, pn 0, the gate's key. */
static void expect_server_key(const fixture *f, uint32_t conn_id)
{
    aftp_wire_packet r;
    assert_int_equal(f->reply_len, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_SERVER_KEY_LEN);
    assert_true(f->reply_len * 3 <= f->len);
    assert_int_equal(aftp_wire_decode(f->reply, f->reply_len, &r), AFTP_OK);
    assert_int_equal(r.hdr.version, AFTP_WIRE_VERSION);
    assert_int_equal(r.hdr.type, AFTP_WIRE_SERVER_KEY);
    assert_int_equal(r.hdr.flags, 0);
    assert_int_equal(r.hdr.conn_id, conn_id);
    assert_int_equal(r.hdr.pn, 0);
    assert_memory_equal(r.u.server_key.key, gate_key, sizeof gate_key);
}

/* A key request gets the key whether the server is idle, busy or forcing
 * RETRY, and never starts a session nor uses up the unvalidated budget. */
static void test_key_request_answered_never_started(void **state)
{
    (void)state;
    fixture f;
    for (int force = 0; force <= 1; force++) {
        start(&f, force, 0x5150);
        f.len = make_hello_ext(0x5150, NULL, 0, 1, f.hello);
        for (unsigned i = 0; i < 2 * AFTP_GATE_MAX_UNVALIDATED; i++) {
            memset(f.reply, 0, sizeof f.reply);
            assert_int_equal(verdict(&f, 5000, (int)(i & 1), 30), AFTP_GATE_SERVER_KEY);
            expect_server_key(&f, 0x5150);
        }
        assert_int_equal(f.g.keys_sent, 2 * AFTP_GATE_MAX_UNVALIDATED);
        assert_int_equal(f.g.retries_sent, 0);
        /* the unvalidated budget is intact: an ordinary HELLO still starts */
        f.len = make_hello(0x5151, NULL, 0, f.hello);
        assert_int_equal(verdict(&f, 5001, 0, 30), force ? AFTP_GATE_RETRY : AFTP_GATE_START);
        finish(&f);
    }
}

/* Even with a valid cookie, a HELLO that asks for the key starts nothing. */
static void test_key_request_with_cookie_not_started(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0x77);
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_GATE_RETRY);
    aftp_wire_packet r;
    assert_int_equal(aftp_wire_decode(f.reply, f.reply_len, &r), AFTP_OK);
    uint8_t token[AFTP_COOKIE_LEN];
    memcpy(token, r.u.retry.token, sizeof token);
    f.len = make_hello_ext(0x77, token, sizeof token, 1, f.hello);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_GATE_SERVER_KEY);
    expect_server_key(&f, 0x77);
    finish(&f);
}

/* A server without a static key (unprotected) has nothing to give. */
static void test_key_request_without_key_dropped(void **state)
{
    (void)state;
    fixture f;
    unsetenv(AFTP_GATE_RETRY_ENV);
    memset(&f, 0, sizeof f);
    assert_int_equal(aftp_gate_init(&f.g, NULL), AFTP_OK);
    f.len = make_hello_ext(9, NULL, 0, 1, f.hello);
    f.reply_len = 0;
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_GATE_DROP);
    assert_int_equal(f.reply_len, 0);
    assert_int_equal(f.g.keys_sent, 0);
    finish(&f);
}

/* SERVER_KEY and RETRY share one per-second budget of stateless replies. */
static void test_key_replies_share_retry_budget(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 3);
    for (unsigned i = 0; i < AFTP_GATE_MAX_REPLIES / 2; i++)
        assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_GATE_RETRY);
    f.len = make_hello_ext(3, NULL, 0, 1, f.hello);
    for (unsigned i = AFTP_GATE_MAX_REPLIES / 2; i < AFTP_GATE_MAX_REPLIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_GATE_SERVER_KEY);
    assert_int_equal(verdict(&f, 9000, 0, 80), AFTP_GATE_DROP);
    f.len = make_hello(3, NULL, 0, f.hello);
    assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_GATE_DROP);
    /* the next second brings a new budget */
    f.len = make_hello_ext(3, NULL, 0, 1, f.hello);
    assert_int_equal(verdict(&f, 9000, 1, 81), AFTP_GATE_SERVER_KEY);
    assert_int_equal(f.g.keys_sent, AFTP_GATE_MAX_REPLIES / 2 + 1);
    assert_int_equal(f.g.dropped, 2);
    finish(&f);
}

/* VERSION_NEG draws on the same budget: once RETRYs spent it, a datagram
 * in an unknown version gets nothing until the next second; a datagram
 * that deserves no VERSION_NEG (too short) spends nothing. */
static void test_version_neg_shares_reply_budget(void **state)
{
    (void)state;
    fixture f;
    uint8_t unknown[1200] = {7, 1, 0, 0, 0xab, 0xcd, 0, 1}; /* version 7, HELLO, id 0xabcd0001 */
    start(&f, 0, 3);
    assert_int_equal(aftp_gate_version_neg(&f.g, unknown, 1199, 80, f.reply, &f.reply_len), 0);
    assert_int_equal(aftp_gate_version_neg(&f.g, unknown, 1200, 80, f.reply, &f.reply_len), 1);
    assert_int_equal(f.reply_len, AFTP_WIRE_VERSION_NEG_REPLY_LEN);
    for (unsigned i = 1; i < AFTP_GATE_MAX_REPLIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_GATE_RETRY);
    assert_int_equal(aftp_gate_version_neg(&f.g, unknown, 1200, 80, f.reply, &f.reply_len), 0);
    assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_GATE_DROP);
    assert_int_equal(aftp_gate_version_neg(&f.g, unknown, 1200, 81, f.reply, &f.reply_len), 1);
    assert_int_equal(f.g.version_negs_sent, 2);
    assert_int_equal(f.g.dropped, 2);
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
        cmocka_unit_test(test_key_request_answered_never_started),
        cmocka_unit_test(test_key_request_with_cookie_not_started),
        cmocka_unit_test(test_key_request_without_key_dropped),
        cmocka_unit_test(test_key_replies_share_retry_budget),
        cmocka_unit_test(test_version_neg_shares_reply_budget),
        cmocka_unit_test(test_forced_retry),
        cmocka_unit_test(test_secret_per_gate),
        cmocka_unit_test(test_malformed_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
