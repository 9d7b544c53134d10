/* The server's front door (door/aftp_door.h) on a virtual clock: which
 * datagram starts a session, gets a RETRY, a SERVER_KEY or a VERSION_NEG,
 * or is dropped; cookies and the rotation of their secret; the reply
 * budget and the 3x anti-amplification bound; the report limit of dropped
 * HELLOs; and, with the receiver engine a started HELLO goes to, the
 * refusals at HELLO (CLOSE(UNAUTHORIZED), CLOSE(PROTOCOL)). No socket, no
 * real time. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "door/aftp_door.h"
#include "door/aftp_keyreq.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define S UINT64_C(1000000000)

/* The static public key the doors of these tests hand out. */
static const uint8_t door_key[AFTP_WIRE_SERVER_KEY_LEN] = {
    0x35, 0x80, 0x72, 0xd6, 0x36, 0x58, 0x80, 0xd1, 0xae, 0xea, 0x32, 0x9a, 0xdf, 0x91, 0x21, 0x38,
    0x38, 0x51, 0xed, 0x21, 0xa2, 0x8e, 0x3b, 0x75, 0xe9, 0x65, 0xd0, 0xd2, 0xcd, 0x16, 0x62, 0x54};

/* 192.0.2.1:port */
static struct sockaddr_in addr4(uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(0xc0000201u);
    return a;
}

/* A full-size HELLO of conn_id, with a COOKIE extension when token, and a
 * KEY_REQUEST extension when key_request: the key request
 * (door/aftp_keyreq.h) with its extensions replaced. */
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
    assert_int_equal(aftp_keyreq_encode(conn_id, 1452, buf, AFTP_WIRE_MAX_DATAGRAM, &n), AFTP_OK);
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

/* Secrets the test can predict: the n-th draw is 32 bytes of value n. */
static void counting_random(void *user, uint8_t *buf, size_t len)
{
    unsigned *draws = user;
    memset(buf, (int)++*draws, len);
}

/* One door and the datagram it is shown. */
typedef struct fixture {
    aftp_door d;
    unsigned draws;
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    aftp_door_verdict v;
} fixture;

/* A fresh door (at time 0; every HELLO retried when force; secrets drawn
 * by counting_random) and a HELLO of conn_id without a cookie. */
static void start_with(fixture *f, int force, const uint8_t *key, uint32_t conn_id)
{
    memset(f, 0, sizeof *f);
    aftp_door_settings set = {.server_key = key, .force_retry = force,
                              .random = counting_random, .random_user = &f->draws};
    assert_int_equal(aftp_door_init(&f->d, &set, 0), AFTP_OK);
    f->len = make_hello(conn_id, NULL, 0, f->hello);
}

static void start(fixture *f, int force, uint32_t conn_id)
{
    start_with(f, force, door_key, conn_id);
}

static void finish(fixture *f)
{
    aftp_door_fini(&f->d);
}

/* The door's verdict on f's datagram from 192.0.2.1:port at now_s. */
static int verdict(fixture *f, uint16_t port, int busy, uint64_t now_s)
{
    struct sockaddr_in from = addr4(port);
    return aftp_door_input(&f->d, f->hello, f->len, (struct sockaddr *)&from, busy, now_s * S,
                           &f->v);
}

/* The reply is a RETRY for conn_id: its token into token. */
static void retry_token(const fixture *f, uint32_t conn_id, uint8_t *token)
{
    aftp_wire_packet r;
    assert_int_equal(f->v.action, AFTP_DOOR_REPLY);
    assert_int_equal(f->v.reply_type, AFTP_WIRE_RETRY);
    assert_int_equal(aftp_wire_decode(f->v.reply, f->v.reply_len, &r), AFTP_OK);
    assert_int_equal(r.hdr.type, AFTP_WIRE_RETRY);
    assert_int_equal(r.hdr.conn_id, conn_id);
    assert_int_equal(r.hdr.pn, 0);
    assert_int_equal(r.u.retry.token_len, AFTP_COOKIE_LEN);
    memcpy(token, r.u.retry.token, AFTP_COOKIE_LEN);
}

/* The HELLO becomes that HELLO again with the RETRY's token echoed. */
static void answer_retry(fixture *f, uint32_t conn_id)
{
    uint8_t token[AFTP_COOKIE_LEN];
    retry_token(f, conn_id, token);
    f->len = make_hello(conn_id, token, sizeof token, f->hello);
}

/* An idle door starts a HELLO without a cookie, handing it over decoded. */
static void test_idle_server_starts(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 0, 100), AFTP_DOOR_START);
    assert_int_equal(f.v.hello.hdr.type, AFTP_WIRE_HELLO);
    assert_int_equal(f.v.hello.hdr.conn_id, 0xabc);
    assert_int_equal(f.v.hello.u.hello.role, AFTP_WIRE_ROLE_PUSH);
    assert_int_equal(f.v.validated, 0);
    assert_int_equal(f.v.reply_len, 0);
    finish(&f);
}

/* Under load a cookie is required: a RETRY far smaller than the HELLO;
 * the HELLO with its token echoed is validated and started, under load or
 * not (the server decides whether it serves it now). */
static void test_cookie_required_under_load_then_accepted(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_REPLY);
    assert_true(f.v.reply_len < f.len);
    answer_retry(&f, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 101), AFTP_DOOR_START);
    assert_int_equal(f.v.validated, 1);
    assert_int_equal(verdict(&f, 5000, 0, 102), AFTP_DOOR_START);
    assert_int_equal(f.v.validated, 1);
    assert_int_equal(f.d.retries_sent, 1);
    finish(&f);
}

/* A cookie proves one address, port and connection id: shown from another
 * port, another address or under another id it counts as absent (RETRY
 * while busy). */
static void test_wrong_address_cookie(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_REPLY);
    answer_retry(&f, 0xabc);
    assert_int_equal(verdict(&f, 5001, 1, 100), AFTP_DOOR_REPLY); /* another port */
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    struct sockaddr_in other = addr4(5000);
    other.sin_addr.s_addr = htonl(0xc0000202u); /* another address */
    assert_int_equal(aftp_door_input(&f.d, f.hello, f.len, (struct sockaddr *)&other, 1, 100 * S,
                                     &f.v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    struct sockaddr_in6 v6;
    memset(&v6, 0, sizeof v6);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(5000);
    v6.sin6_addr.s6_addr[15] = 1;
    assert_int_equal(aftp_door_input(&f.d, f.hello, f.len, (struct sockaddr *)&v6, 1, 100 * S,
                                     &f.v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    /* the token under another connection id */
    uint8_t token[AFTP_COOKIE_LEN];
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_START); /* still valid here */
    f.len = make_hello(0xabc, NULL, 0, f.hello);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_REPLY);
    retry_token(&f, 0xabc, token);
    f.len = make_hello(0xabd, token, sizeof token, f.hello);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    finish(&f);
}

/* A token lives AFTP_COOKIE_MAX_AGE_S seconds: older it counts as absent
 * (RETRY while busy; processed as unvalidated when idle). */
static void test_cookie_expires(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 100), AFTP_DOOR_REPLY);
    answer_retry(&f, 0xabc);
    assert_int_equal(verdict(&f, 5000, 1, 100 + AFTP_COOKIE_MAX_AGE_S), AFTP_DOOR_START);
    assert_int_equal(verdict(&f, 5000, 1, 101 + AFTP_COOKIE_MAX_AGE_S), AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    assert_int_equal(verdict(&f, 5000, 0, 101 + AFTP_COOKIE_MAX_AGE_S), AFTP_DOOR_START);
    assert_int_equal(f.v.validated, 0);
    finish(&f);
}

/* The cookie secret changes every AFTP_DOOR_SECRET_PERIOD_S on the
 * caller's clock. A token made just before a change still verifies after
 * it; a token minted with a secret two changes old does not, however fresh
 * its time (here one forged with the first secret, as someone who learnt
 * it would). */
static void test_secret_rotation(void **state)
{
    (void)state;
    fixture f;
    uint8_t first[AFTP_COOKIE_SECRET_LEN], token[AFTP_COOKIE_LEN];
    start(&f, 0, 0x42);
    memcpy(first, f.d.secret, sizeof first);
    assert_int_equal(f.draws, 2); /* previous, then current */
    struct sockaddr_in from = addr4(5000);
    aftp_cookie_peer peer = {.addr = (const uint8_t *)&from.sin_addr.s_addr, .addr_len = 4,
                             .port = 5000, .conn_id = 0x42};
    const uint32_t period = AFTP_DOOR_SECRET_PERIOD_S;
    /* made at period - 1 under the first secret, shown after the change */
    assert_int_equal(verdict(&f, 5000, 1, period - 1), AFTP_DOOR_REPLY);
    answer_retry(&f, 0x42);
    assert_int_equal(verdict(&f, 5000, 1, period + 1), AFTP_DOOR_START); /* valid */
    assert_int_equal(f.draws, 3);
    assert_memory_not_equal(f.d.secret, first, sizeof first);
    /* forged with the first secret at a fresh time: good for one change */
    assert_int_equal(aftp_cookie_make(first, &peer, period + 2, token), AFTP_OK);
    f.len = make_hello(0x42, token, sizeof token, f.hello);
    assert_int_equal(verdict(&f, 5000, 1, period + 2), AFTP_DOOR_START);
    assert_int_equal(aftp_cookie_make(first, &peer, 2 * period + 1, token), AFTP_OK);
    f.len = make_hello(0x42, token, sizeof token, f.hello);
    assert_int_equal(verdict(&f, 5000, 1, 2 * period + 1), AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    assert_int_equal(f.draws, 4);
    /* the RETRY's own token is made with the current secret and verifies */
    answer_retry(&f, 0x42);
    assert_int_equal(verdict(&f, 5000, 1, 2 * period + 2), AFTP_DOOR_START);
    finish(&f);
}

/* More than AFTP_DOOR_MAX_UNVALIDATED HELLOs without a cookie in one second
 * put an idle server under load until the next second. */
static void test_hello_flood(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 1);
    for (unsigned i = 0; i < AFTP_DOOR_MAX_UNVALIDATED; i++)
        assert_int_equal(verdict(&f, (uint16_t)(6000 + i), 0, 50), AFTP_DOOR_START);
    assert_int_equal(verdict(&f, 7000, 0, 50), AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    assert_int_equal(verdict(&f, 7001, 0, 51), AFTP_DOOR_START);
    finish(&f);
}

/* Stateless replies are limited per second: the excess is dropped. */
static void test_retry_rate_limited(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0, 1);
    for (unsigned i = 0; i < AFTP_DOOR_MAX_REPLIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_DOOR_REPLY);
    assert_int_equal(verdict(&f, 9000, 1, 70), AFTP_DOOR_DROP);
    assert_int_equal(f.v.reply_len, 0);
    assert_int_equal(verdict(&f, 9000, 1, 71), AFTP_DOOR_REPLY);
    assert_int_equal(f.d.retries_sent, AFTP_DOOR_MAX_REPLIES + 1);
    finish(&f);
}

/* The reply is SERVER_KEY for conn_id: 48 bytes, version 1, no flags, pn
 * 0, the door's key. */
static void expect_server_key(const fixture *f, uint32_t conn_id)
{
    aftp_wire_packet r;
    assert_int_equal(f->v.action, AFTP_DOOR_REPLY);
    assert_int_equal(f->v.reply_type, AFTP_WIRE_SERVER_KEY);
    assert_int_equal(f->v.reply_len, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_SERVER_KEY_LEN);
    assert_int_equal(aftp_wire_decode(f->v.reply, f->v.reply_len, &r), AFTP_OK);
    assert_int_equal(r.hdr.version, AFTP_WIRE_VERSION);
    assert_int_equal(r.hdr.type, AFTP_WIRE_SERVER_KEY);
    assert_int_equal(r.hdr.flags, 0);
    assert_int_equal(r.hdr.conn_id, conn_id);
    assert_int_equal(r.hdr.pn, 0);
    assert_memory_equal(r.u.server_key.key, door_key, sizeof door_key);
}

/* A KEY_REQUEST is answered whether the server is idle, busy or forcing
 * RETRY, never starts a session, and leaves the unvalidated budget whole;
 * the client's reader takes the answer. */
static void test_key_request_answered(void **state)
{
    (void)state;
    fixture f;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    for (int force = 0; force <= 1; force++) {
        start(&f, force, 0x5150);
        f.len = make_hello_ext(0x5150, NULL, 0, 1, f.hello);
        for (unsigned i = 0; i < 2 * AFTP_DOOR_MAX_UNVALIDATED; i++) {
            assert_int_equal(verdict(&f, 5000, (int)(i & 1), 30), AFTP_DOOR_REPLY);
            expect_server_key(&f, 0x5150);
        }
        assert_int_equal(aftp_keyreq_answer(0x5150, f.v.reply, f.v.reply_len, key), 1);
        assert_memory_equal(key, door_key, sizeof key);
        assert_int_equal(f.d.keys_sent, 2 * AFTP_DOOR_MAX_UNVALIDATED);
        assert_int_equal(f.d.started_count, 0);
        f.len = make_hello(0x5151, NULL, 0, f.hello);
        assert_int_equal(verdict(&f, 5001, 0, 30), force ? AFTP_DOOR_REPLY : AFTP_DOOR_START);
        finish(&f);
    }
}

/* Even with a valid cookie, a HELLO that asks for the key starts nothing;
 * a server without a static key (unprotected) has nothing to give. */
static void test_key_request_never_starts(void **state)
{
    (void)state;
    fixture f;
    uint8_t token[AFTP_COOKIE_LEN];
    start(&f, 0, 0x77);
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_DOOR_REPLY);
    retry_token(&f, 0x77, token);
    f.len = make_hello_ext(0x77, token, sizeof token, 1, f.hello);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_REPLY);
    expect_server_key(&f, 0x77);
    finish(&f);
    start_with(&f, 0, NULL, 9);
    f.len = make_hello_ext(9, NULL, 0, 1, f.hello);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_DROP);
    assert_int_equal(f.v.reply_len, 0);
    assert_int_equal(f.d.keys_sent, 0);
    finish(&f);
}

/* SERVER_KEY, RETRY and VERSION_NEG share one per-second budget. */
static void test_replies_share_one_budget(void **state)
{
    (void)state;
    fixture f;
    uint8_t unknown[1200] = {7, 1, 0, 0, 0xab, 0xcd, 0, 1}; /* version 7, HELLO */
    struct sockaddr_in from = addr4(9000);
    start(&f, 0, 3);
    for (unsigned i = 0; i < AFTP_DOOR_MAX_REPLIES / 2; i++)
        assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_DOOR_REPLY);
    f.len = make_hello_ext(3, NULL, 0, 1, f.hello);
    for (unsigned i = AFTP_DOOR_MAX_REPLIES / 2; i < AFTP_DOOR_MAX_REPLIES; i++)
        assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_DOOR_REPLY);
    assert_int_equal(verdict(&f, 9000, 0, 80), AFTP_DOOR_DROP);
    assert_int_equal(aftp_door_input(&f.d, unknown, sizeof unknown, (struct sockaddr *)&from, 0,
                                     80 * S, &f.v),
                     AFTP_DOOR_DROP);
    f.len = make_hello(3, NULL, 0, f.hello);
    assert_int_equal(verdict(&f, 9000, 1, 80), AFTP_DOOR_DROP);
    /* the next second brings a new budget */
    assert_int_equal(aftp_door_input(&f.d, unknown, sizeof unknown, (struct sockaddr *)&from, 0,
                                     81 * S, &f.v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(f.d.keys_sent, AFTP_DOOR_MAX_REPLIES / 2);
    assert_int_equal(f.d.version_negs_sent, 1);
    assert_int_equal(f.d.dropped, 3);
    finish(&f);
}

/* A datagram in a version we do not speak gets VERSION_NEG (our version,
 * its id and pn echoed) when it is at least 1200 bytes long, nothing when
 * shorter; a version-0 datagram (a VERSION_NEG) gets nothing. */
static void test_version_neg_for_unknown_version(void **state)
{
    (void)state;
    fixture f;
    uint8_t unknown[1300] = {7, 1, 0, 0, 0xab, 0xcd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9};
    struct sockaddr_in from = addr4(4000);
    aftp_wire_packet p;
    start(&f, 0, 1);
    assert_int_equal(aftp_door_input(&f.d, unknown, 1199, (struct sockaddr *)&from, 0, S, &f.v),
                     AFTP_DOOR_DROP);
    assert_int_equal(aftp_door_input(&f.d, unknown, 1200, (struct sockaddr *)&from, 0, S, &f.v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_VERSION_NEG);
    assert_int_equal(f.v.reply_len, AFTP_WIRE_VERSION_NEG_REPLY_LEN);
    assert_int_equal(aftp_wire_decode(f.v.reply, f.v.reply_len, &p), AFTP_OK);
    assert_int_equal(p.hdr.version, 0);
    assert_int_equal(p.hdr.type, AFTP_WIRE_VERSION_NEG);
    assert_int_equal(p.hdr.conn_id, 0xabcd0001u);
    assert_int_equal(p.hdr.pn, 9);
    assert_int_equal(p.u.version_neg.count, 1);
    assert_int_equal(p.u.version_neg.versions[0], AFTP_WIRE_VERSION);
    unknown[0] = 0;
    unknown[1] = AFTP_WIRE_VERSION_NEG;
    assert_int_equal(aftp_door_input(&f.d, unknown, 1300, (struct sockaddr *)&from, 0, S, &f.v),
                     AFTP_DOOR_DROP);
    assert_int_equal(f.d.version_negs_sent, 1);
    assert_int_equal(f.d.started_count, 0);
    finish(&f);
}

/* With the RETRY forced (the serve driver's test hook), an idle door asks
 * every HELLO for a cookie, and takes the echo. */
static void test_forced_retry(void **state)
{
    (void)state;
    fixture f;
    start(&f, 1, 0x77);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_REPLY);
    answer_retry(&f, 0x77);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_START);
    finish(&f);
}

/* Cookies die with the door: another door's secret does not verify. */
static void test_secret_per_door(void **state)
{
    (void)state;
    fixture f1, f2;
    aftp_door_settings set = {.server_key = door_key};
    start(&f1, 0, 0x99);
    memset(&f2, 0, sizeof f2);
    assert_int_equal(aftp_door_init(&f2.d, &set, 0), AFTP_OK); /* libsodium's secrets */
    assert_int_equal(verdict(&f1, 5000, 1, 10), AFTP_DOOR_REPLY);
    answer_retry(&f1, 0x99);
    memcpy(f2.hello, f1.hello, f1.len);
    f2.len = f1.len;
    assert_int_equal(verdict(&f1, 5000, 1, 10), AFTP_DOOR_START); /* validated */
    assert_int_equal(verdict(&f2, 5000, 1, 10), AFTP_DOOR_REPLY);
    assert_int_equal(f2.v.reply_type, AFTP_WIRE_RETRY);
    finish(&f1);
    finish(&f2);
}

/* A HELLO that does not decode (cut short, short of 1200 bytes, a body
 * that is garbage, another type) gets nothing, even when every HELLO is
 * to be retried. */
static void test_malformed_hello_dropped(void **state)
{
    (void)state;
    fixture f;
    start(&f, 1, 1);
    size_t full = f.len;
    f.len = 40;
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_DOOR_DROP);
    f.len = AFTP_WIRE_HELLO_MIN_LEN - 1;
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_DOOR_DROP);
    f.len = full;
    memset(f.hello + AFTP_WIRE_HEADER_LEN, 0xff, 8); /* role, cipher count, ... */
    assert_int_equal(verdict(&f, 5000, 1, 10), AFTP_DOOR_DROP);
    f.len = make_hello(1, NULL, 0, f.hello);
    f.hello[1] = AFTP_WIRE_FILE_OFFER;
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_DROP);
    assert_int_equal(f.d.retries_sent, 0);
    assert_int_equal(f.d.dropped, 4);
    finish(&f);
}

/* The late copies of the HELLO a session was started with are dropped;
 * the same id from another source, or another id, is a new HELLO. */
static void test_started_hello_copies_dropped(void **state)
{
    (void)state;
    fixture f;
    struct sockaddr_in from = addr4(5000);
    start(&f, 0, 0x31);
    assert_int_equal(verdict(&f, 5000, 0, 10), AFTP_DOOR_START);
    aftp_door_session_started(&f.d, (struct sockaddr *)&from, 0x31);
    assert_int_equal(verdict(&f, 5000, 0, 11), AFTP_DOOR_DROP);
    assert_int_equal(verdict(&f, 5002, 0, 11), AFTP_DOOR_START);
    f.len = make_hello(0x32, NULL, 0, f.hello);
    assert_int_equal(verdict(&f, 5000, 0, 11), AFTP_DOOR_START);
    finish(&f);
}

/* Spec 14.3: no reply exceeds three times the datagram it answers, and no
 * datagram shorter than 1200 bytes gets one: swept over lengths, for each
 * kind of datagram that can get a reply (unknown version, key request,
 * HELLO of a busy server). */
static void test_anti_amplification(void **state)
{
    (void)state;
    fixture f;
    uint8_t kinds[3][AFTP_WIRE_MAX_DATAGRAM];
    size_t full[3];
    memset(kinds[0], 0, sizeof kinds[0]);
    kinds[0][0] = 9; /* version 9 */
    kinds[0][1] = AFTP_WIRE_HELLO;
    full[0] = sizeof kinds[0];
    full[1] = make_hello_ext(5, NULL, 0, 1, kinds[1]);
    full[2] = make_hello(6, NULL, 0, kinds[2]);
    struct sockaddr_in from = addr4(1234);
    start(&f, 0, 1);
    unsigned replies = 0;
    for (int k = 0; k < 3; k++)
        for (size_t len = 0; len <= full[k]; len += len < 1300 ? 1 : 97) {
            int action = aftp_door_input(&f.d, kinds[k], len, (struct sockaddr *)&from, 1,
                                         (uint64_t)(k * 10000 + len) * S, &f.v);
            if (action != AFTP_DOOR_REPLY)
                continue;
            replies++;
            assert_true(len >= AFTP_WIRE_HELLO_MIN_LEN);
            assert_true(f.v.reply_len <= 3 * len);
            assert_true(f.v.reply_len <= AFTP_DOOR_REPLY_MAX);
        }
    assert_true(replies >= 3);
    assert_int_equal(f.d.version_negs_sent + f.d.keys_sent + f.d.retries_sent, replies);
    finish(&f);
}

/* Dropped HELLOs reported to the operator: once per client attempt (the
 * copies it resends are one), AFTP_DOOR_DROP_REPORTS per period, the rest
 * counted and given with the next report. */
static void test_drop_reports_limited(void **state)
{
    (void)state;
    fixture f;
    uint64_t unreported = 99;
    start(&f, 0, 1);
    struct sockaddr_in from = addr4(7000);
    assert_int_equal(aftp_door_report_drop(&f.d, (struct sockaddr *)&from, 1, S, &unreported), 1);
    assert_int_equal(unreported, 0);
    assert_int_equal(aftp_door_report_drop(&f.d, (struct sockaddr *)&from, 1, S, &unreported), 0);
    for (uint32_t id = 2; id <= AFTP_DOOR_DROP_REPORTS; id++)
        assert_int_equal(
            aftp_door_report_drop(&f.d, (struct sockaddr *)&from, id, S, &unreported), 1);
    for (uint32_t id = 100; id < 103; id++)
        assert_int_equal(
            aftp_door_report_drop(&f.d, (struct sockaddr *)&from, id, 2 * S, &unreported), 0);
    assert_int_equal(aftp_door_report_drop(&f.d, (struct sockaddr *)&from, 200,
                                           S + AFTP_DOOR_DROP_PERIOD_NS, &unreported),
                     1);
    assert_int_equal(unreported, 3);
    finish(&f);
}

/* ---- with the receiver engine a started HELLO goes to ---- */

/* A client and a server engine, as the sims make them (their events go
 * to the two sides). */
typedef struct engines {
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    sim_side snd_side, rcv_side;
} engines;

static void engines_settings(engines *e, int client_cipher)
{
    memset(e, 0, sizeof *e);
    sim_engine_settings(&e->ss, &e->snd_side, &e->rs, &e->rcv_side);
    e->ss.security.cipher = client_cipher;
}

/* The datagram an engine wrote (dg) as one run of bytes in out; its length. */
static size_t flat(const aftp_datagram *dg, uint8_t *out)
{
    memmove(out, dg->head, dg->head_len);
    if (dg->payload_len > 0)
        memcpy(out + dg->head_len, dg->payload, dg->payload_len);
    return dg->head_len + dg->payload_len;
}

/* The client's next datagram at now into buf: its length. */
static size_t client_next(aftp_sender *s, uint64_t now, uint8_t *buf)
{
    aftp_datagram dg;
    assert_int_equal(aftp_sender_write(s, now, buf, AFTP_WIRE_MAX_DATAGRAM, &dg), 1);
    return flat(&dg, buf);
}

/* The sim client's first datagram: its protected HELLO (or, with cipher
 * NONE, its unprotected one). */
static size_t client_hello(int cipher, uint8_t *buf)
{
    engines e;
    aftp_sender *s;
    engines_settings(&e, cipher);
    assert_int_equal(aftp_sender_new(&e.ss, 0, &s), AFTP_OK);
    aftp_sender_finish(s);
    size_t len = client_next(s, 0, buf);
    aftp_sender_del(s);
    return len;
}

static int refuse_everyone(void *user, const uint8_t *client_key, uint8_t *psk)
{
    (void)user;
    (void)client_key;
    (void)psk;
    return AFTP_ERR_UNKNOWN_PEER;
}

/* The door starts the HELLO; the receiver engine (policy `lookup`) refuses
 * it with the local error `refusal` and the CLOSE it sends, decoded into
 * *close, within 3x the HELLO. */
typedef int (*lookup_fn)(void *user, const uint8_t *client_key, uint8_t *psk);

static void refused_at_hello(int client_cipher, lookup_fn lookup, int refusal,
                             aftp_wire_packet *close, uint8_t *buf)
{
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t len = client_hello(client_cipher, hello);
    fixture f;
    start(&f, 0, 1);
    struct sockaddr_in from = addr4(6000);
    assert_int_equal(aftp_door_input(&f.d, hello, len, (struct sockaddr *)&from, 0, 5 * S, &f.v),
                     AFTP_DOOR_START);
    engines e;
    aftp_receiver *r;
    aftp_datagram dg;
    engines_settings(&e, client_cipher);
    if (lookup != NULL)
        e.rs.security.peers.lookup = lookup;
    assert_int_equal(aftp_receiver_new(&e.rs, 5 * S, &r), AFTP_OK);
    assert_int_equal(aftp_receiver_read(r, 5 * S, hello, len), refusal);
    assert_int_equal(aftp_receiver_write(r, 5 * S, buf, AFTP_WIRE_MAX_DATAGRAM, &dg), 1);
    size_t out_len = flat(&dg, buf);
    assert_true(out_len <= 3 * len);
    assert_int_equal(aftp_wire_decode(buf, out_len, close), AFTP_OK);
    assert_int_equal(close->hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(close->hdr.conn_id, e.ss.conn_id);
    assert_int_equal(close->hdr.pn, 0);
    aftp_receiver_del(r);
    finish(&f);
}

/* Message 1 opens but the client's key is not admitted: CLOSE(UNAUTHORIZED)
 * in clear, "client key not authorized". */
static void test_unauthorized_key_refused(void **state)
{
    (void)state;
    aftp_wire_packet close;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    refused_at_hello(AFTP_CIPHER_AUTO, refuse_everyone, AFTP_ERR_UNKNOWN_PEER, &close, buf);
    assert_int_equal(close.u.close.error, AFTP_WIRE_ERR_UNAUTHORIZED);
    assert_int_equal(close.u.close.reason_len, strlen("client key not authorized"));
    assert_memory_equal(close.u.close.reason, "client key not authorized",
                        close.u.close.reason_len);
}

/* An unprotected offer at a protected server: CLOSE(PROTOCOL). */
static void test_unprotected_offer_refused(void **state)
{
    (void)state;
    aftp_wire_packet close;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    refused_at_hello(AFTP_CIPHER_NONE, NULL, AFTP_ERR_MALFORMED, &close, buf);
    assert_int_equal(close.u.close.error, AFTP_WIRE_ERR_PROTOCOL);
}

/* The whole RETRY exchange with the engines on a virtual clock: a loaded
 * server's door answers the client's HELLO with a RETRY; the client
 * resends it at once with the cookie, which the door takes (validated,
 * started though still under load); the receiver's HELLO_ACK then
 * connects the client (the handshake ran on the echoed copy). */
static void test_retry_exchange_with_the_engines(void **state)
{
    (void)state;
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM], ack[AFTP_WIRE_MAX_DATAGRAM];
    engines e;
    aftp_sender *s;
    aftp_receiver *r;
    aftp_datagram dg;
    fixture f;
    const uint8_t *cookie;
    uint16_t cookie_len;
    struct sockaddr_in from = addr4(6000);
    start(&f, 0, 1);
    engines_settings(&e, AFTP_CIPHER_AUTO);
    assert_int_equal(aftp_sender_new(&e.ss, S, &s), AFTP_OK);
    aftp_sender_finish(s);
    size_t len = client_next(s, S, hello);
    assert_int_equal(aftp_door_input(&f.d, hello, len, (struct sockaddr *)&from, 1, S, &f.v),
                     AFTP_DOOR_REPLY);
    assert_int_equal(f.v.reply_type, AFTP_WIRE_RETRY);
    assert_int_equal(aftp_sender_read(s, S, f.v.reply, f.v.reply_len), AFTP_OK);
    len = client_next(s, S, hello);
    assert_int_equal(aftp_door_input(&f.d, hello, len, (struct sockaddr *)&from, 1, 2 * S, &f.v),
                     AFTP_DOOR_START);
    assert_int_equal(f.v.validated, 1);
    assert_true(aftp_wire_ext_find(f.v.hello.u.hello.ext, f.v.hello.u.hello.ext_len,
                                   AFTP_WIRE_EXT_COOKIE, &cookie, &cookie_len));
    assert_int_equal(aftp_receiver_new(&e.rs, 2 * S, &r), AFTP_OK);
    assert_int_equal(aftp_receiver_read(r, 2 * S, hello, len), AFTP_OK);
    assert_int_equal(aftp_receiver_write(r, 2 * S, ack, sizeof ack, &dg), 1);
    size_t ack_len = flat(&dg, ack);
    assert_int_equal(aftp_sender_read(s, 2 * S, ack, ack_len), AFTP_OK);
    assert_int_equal(e.snd_side.ev.connected, 1); /* (no files: it then closes) */
    aftp_receiver_del(r);
    aftp_sender_del(s);
    finish(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_server_starts),
        cmocka_unit_test(test_cookie_required_under_load_then_accepted),
        cmocka_unit_test(test_wrong_address_cookie),
        cmocka_unit_test(test_cookie_expires),
        cmocka_unit_test(test_secret_rotation),
        cmocka_unit_test(test_hello_flood),
        cmocka_unit_test(test_retry_rate_limited),
        cmocka_unit_test(test_key_request_answered),
        cmocka_unit_test(test_key_request_never_starts),
        cmocka_unit_test(test_replies_share_one_budget),
        cmocka_unit_test(test_version_neg_for_unknown_version),
        cmocka_unit_test(test_forced_retry),
        cmocka_unit_test(test_secret_per_door),
        cmocka_unit_test(test_malformed_hello_dropped),
        cmocka_unit_test(test_started_hello_copies_dropped),
        cmocka_unit_test(test_anti_amplification),
        cmocka_unit_test(test_drop_reports_limited),
        cmocka_unit_test(test_unauthorized_key_refused),
        cmocka_unit_test(test_unprotected_offer_refused),
        cmocka_unit_test(test_retry_exchange_with_the_engines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
