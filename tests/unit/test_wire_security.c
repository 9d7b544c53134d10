/* Unit tests: the wire pieces of the secure handshake (spec sections 6.11,
 * 6.12, 12.3, 14.2.2): the RETRY and SERVER_KEY packets, extension TLV
 * lookup and writing, and the HELLO prologue both sides mix into the Noise
 * transcript. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

static uint8_t buf[WIRE_TEST_BUF];

enum { RETRY_TOKEN_LEN = AFTP_WIRE_HEADER_LEN, RETRY_TOKEN = AFTP_WIRE_HEADER_LEN + 2 };

static void retry_packet(aftp_wire_packet *p, const uint8_t *token, uint16_t token_len)
{
    wire_fixture(AFTP_WIRE_RETRY, p);
    p->u.retry.token = token;
    p->u.retry.token_len = token_len;
}

static void test_retry_layout(void **state)
{
    (void)state;
    static const uint8_t token[] = {0xde, 0xad, 0xbe};
    static const uint8_t want[] = {0x01, 0x0a, 0x00, 0x00, 0xa1, 0xb2, 0xc3, 0xd4, 0x01, 0x02,
                                   0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x03, 0xde, 0xad,
                                   0xbe};
    aftp_wire_packet p;
    retry_packet(&p, token, sizeof token);
    assert_int_equal(wire_encode_ok(&p, buf, sizeof buf), sizeof want);
    assert_memory_equal(buf, want, sizeof want);
}

static void test_retry_round_trip_token_sizes(void **state)
{
    (void)state;
    uint8_t token[AFTP_WIRE_MAX_TOKEN];
    for (size_t i = 0; i < sizeof token; i++)
        token[i] = (uint8_t)(0x80 + i);
    static const uint16_t sizes[] = {1, 20, AFTP_WIRE_MAX_TOKEN};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        aftp_wire_packet want, got;
        retry_packet(&want, token, sizes[i]);
        size_t len = wire_encode_ok(&want, buf, sizeof buf);
        assert_int_equal(len, RETRY_TOKEN + sizes[i]);
        wire_decode_ok(buf, len, &got);
        wire_expect_packets_equal(&want, &got);
        /* The token is borrowed from the datagram, not copied. */
        assert_ptr_equal(got.u.retry.token, buf + RETRY_TOKEN);
        for (size_t cut = 0; cut < len; cut++)
            assert_int_not_equal(wire_decode_untouched(buf, cut), AFTP_OK);
        buf[len] = 0;
        wire_expect_decode_error(buf, len + 1, AFTP_ERR_MALFORMED);
    }
}

static void test_retry_token_len_bounds(void **state)
{
    (void)state;
    uint8_t token[AFTP_WIRE_MAX_TOKEN + 1];
    memset(token, 0x33, sizeof token);
    aftp_wire_packet p;
    retry_packet(&p, token, AFTP_WIRE_MAX_TOKEN);
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    /* One more token byte, length field 65: rejected though every byte is there. */
    buf[len] = 0x33;
    wire_put_be(buf + RETRY_TOKEN_LEN, 2, AFTP_WIRE_MAX_TOKEN + 1);
    wire_expect_decode_error(buf, len + 1, AFTP_ERR_MALFORMED);
    /* An empty token is no cookie at all. */
    wire_put_be(buf + RETRY_TOKEN_LEN, 2, 0);
    wire_expect_decode_error(buf, RETRY_TOKEN, AFTP_ERR_MALFORMED);
    retry_packet(&p, token, 0);
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    retry_packet(&p, token, AFTP_WIRE_MAX_TOKEN + 1);
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
}

static void server_key_packet(aftp_wire_packet *p, uint32_t conn_id)
{
    memset(p, 0, sizeof *p);
    p->hdr.version = AFTP_WIRE_VERSION;
    p->hdr.type = AFTP_WIRE_SERVER_KEY;
    p->hdr.conn_id = conn_id;
    for (size_t i = 0; i < AFTP_WIRE_SERVER_KEY_LEN; i++)
        p->u.server_key.key[i] = (uint8_t)(0xc0 ^ i);
}

/* Header (client's id, pn 0) then the 32 key bytes, nothing else. */
static void test_server_key_layout(void **state)
{
    (void)state;
    aftp_wire_packet p;
    server_key_packet(&p, 0x01020304u);
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_SERVER_KEY_LEN);
    static const uint8_t head[] = {0x01, 0x0b, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_memory_equal(buf, head, sizeof head);
    assert_memory_equal(buf + AFTP_WIRE_HEADER_LEN, p.u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
}

/* Round trip; every shorter datagram is TRUNCATED (or, below the header,
 * not even a header) and leaves the output alone; any byte more is
 * MALFORMED. */
static void test_server_key_round_trip_and_cuts(void **state)
{
    (void)state;
    aftp_wire_packet want, got;
    server_key_packet(&want, 0xfedcba98u);
    size_t len = wire_encode_ok(&want, buf, sizeof buf);
    wire_decode_ok(buf, len, &got);
    wire_expect_packets_equal(&want, &got);
    for (size_t cut = 0; cut < len; cut++)
        wire_expect_decode_error(buf, cut, AFTP_ERR_TRUNCATED);
    for (size_t extra = 1; extra <= 3; extra++) {
        buf[len + extra - 1] = (uint8_t)extra;
        wire_expect_decode_error(buf, len + extra, AFTP_ERR_MALFORMED);
    }
    /* The key is copied out: the decoded packet outlives the datagram. */
    memset(buf, 0, len);
    assert_memory_equal(got.u.server_key.key, want.u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
}

/* TLVs: HANDSHAKE "abc", COOKIE empty, HANDSHAKE "xy" (a duplicate). */
static const uint8_t ext_block[] = {0x00, 0x01, 0x00, 0x03, 'a', 'b', 'c', 0x00, 0x02, 0x00,
                                    0x00, 0x00, 0x01, 0x00, 0x02, 'x', 'y'};

/* ext_find of `type` in ext_block must give the value at `offset`, `len` bytes. */
static void expect_found(uint16_t type, size_t offset, uint16_t len)
{
    const uint8_t *value = NULL;
    uint16_t value_len = 0xffff;
    assert_int_equal(aftp_wire_ext_find(ext_block, sizeof ext_block, type, &value, &value_len),
                     1);
    assert_ptr_equal(value, ext_block + offset);
    assert_int_equal(value_len, len);
}

static void test_ext_find_first_of_duplicates(void **state)
{
    (void)state;
    expect_found(AFTP_WIRE_EXT_HANDSHAKE, 4, 3);
}

static void test_ext_find_zero_length_value(void **state)
{
    (void)state;
    expect_found(AFTP_WIRE_EXT_COOKIE, 11, 0);
}

static void test_ext_find_absent_leaves_outputs(void **state)
{
    (void)state;
    const uint8_t *value = ext_block;
    uint16_t value_len = 77;
    assert_int_equal(aftp_wire_ext_find(ext_block, sizeof ext_block, 0x0003, &value, &value_len),
                     0);
    assert_int_equal(aftp_wire_ext_find(NULL, 0, AFTP_WIRE_EXT_HANDSHAKE, &value, &value_len), 0);
    /* A TLV whose value would run past the block is not returned. */
    assert_int_equal(aftp_wire_ext_find(ext_block, 6, AFTP_WIRE_EXT_HANDSHAKE, &value, &value_len),
                     0);
    assert_ptr_equal(value, ext_block);
    assert_int_equal(value_len, 77);
}

static void test_ext_put_builds_a_block_decoders_accept(void **state)
{
    (void)state;
    uint8_t ext[32];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, (const uint8_t *)"abc", 3),
                     AFTP_OK);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, NULL, 0), AFTP_OK);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, (const uint8_t *)"xy", 2),
                     AFTP_OK);
    assert_int_equal(w.pos, sizeof ext_block);
    assert_memory_equal(ext, ext_block, sizeof ext_block);
    /* Carried in a HELLO, the block survives encode and decode. */
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_HELLO, &p);
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    wire_decode_ok(buf, wire_encode_ok(&p, buf, sizeof buf), &got);
    const uint8_t *value;
    uint16_t value_len;
    assert_int_equal(aftp_wire_ext_find(got.u.hello.ext, got.u.hello.ext_len,
                                        AFTP_WIRE_EXT_HANDSHAKE, &value, &value_len),
                     1);
    assert_int_equal(value_len, 3);
    assert_memory_equal(value, "abc", 3);
}

static void test_ext_put_too_small_leaves_writer(void **state)
{
    (void)state;
    static const uint8_t value[5] = {1, 2, 3, 4, 5};
    uint8_t out[16];
    for (size_t cap = 2; cap < 2 + 4 + sizeof value; cap++) {
        aftp_wire_writer w;
        memset(out, 0xee, sizeof out);
        aftp_wire_writer_init(&w, out, cap);
        w.pos = 2;
        assert_int_equal(aftp_wire_ext_put(&w, 0x1234, value, sizeof value),
                         AFTP_ERR_BUFFER_TOO_SMALL);
        assert_int_equal(w.pos, 2);
        for (size_t i = 0; i < sizeof out; i++)
            assert_int_equal(out[i], 0xee);
    }
}

static void prologue_hello(aftp_wire_hello *h)
{
    memset(h, 0, sizeof *h);
    h->role = AFTP_WIRE_ROLE_PUSH;
    h->cipher_count = 2;
    h->ciphers[0] = AFTP_WIRE_CIPHER_AES256GCM;
    h->ciphers[1] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    h->max_datagram = 1452;
}

static const uint8_t prologue_want[] = {'a',  'f',  't',  'p',  0x01, 0x01, 0x02, 0x01,
                                        0x02, 0x05, 0xac, 0x11, 0x22, 0x33, 0x44};

/* The prologue of h for client id 0x11223344 must be prologue_want. */
static void expect_standard_prologue(const aftp_wire_hello *h)
{
    uint8_t out[AFTP_WIRE_PROLOGUE_MAX];
    size_t len = 0;
    assert_int_equal(aftp_wire_hello_prologue(h, 0x11223344u, out, sizeof out, &len), AFTP_OK);
    assert_int_equal(len, sizeof prologue_want);
    assert_memory_equal(out, prologue_want, sizeof prologue_want);
}

static void test_prologue_exact_bytes(void **state)
{
    (void)state;
    aftp_wire_hello h;
    prologue_hello(&h);
    expect_standard_prologue(&h);
    /* Extensions are not part of it: a HELLO resent with a cookie keeps
     * the same handshake message. */
    h.ext = ext_block;
    h.ext_len = sizeof ext_block;
    expect_standard_prologue(&h);
}

static void test_prologue_covers_every_offer_field(void **state)
{
    (void)state;
    uint8_t out[AFTP_WIRE_PROLOGUE_MAX];
    size_t len;
    for (int field = 0; field < 5; field++) {
        aftp_wire_hello h;
        uint32_t id = 0x11223344u;
        prologue_hello(&h);
        switch (field) {
        case 0: h.role = AFTP_WIRE_ROLE_PULL; break;
        case 1: h.ciphers[1] = AFTP_WIRE_CIPHER_NONE; break;
        case 2: h.cipher_count = 1; break; /* a cipher removed from the offer */
        case 3: h.max_datagram = 1453; break;
        default: id ^= 1; break;
        }
        assert_int_equal(aftp_wire_hello_prologue(&h, id, out, sizeof out, &len), AFTP_OK);
        assert_false(len == sizeof prologue_want && memcmp(out, prologue_want, len) == 0);
    }
}

static void test_prologue_limits(void **state)
{
    (void)state;
    aftp_wire_hello h;
    uint8_t out[AFTP_WIRE_PROLOGUE_MAX];
    size_t len = 0x5a5a;
    prologue_hello(&h);
    for (size_t cap = 0; cap < sizeof prologue_want; cap++)
        assert_int_equal(aftp_wire_hello_prologue(&h, 1, out, cap, &len),
                         AFTP_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, 0x5a5a);
    h.cipher_count = 0;
    assert_int_equal(aftp_wire_hello_prologue(&h, 1, out, sizeof out, &len),
                     AFTP_ERR_INVALID_ARGUMENT);
    h.cipher_count = AFTP_WIRE_MAX_CIPHERS + 1;
    assert_int_equal(aftp_wire_hello_prologue(&h, 1, out, sizeof out, &len),
                     AFTP_ERR_INVALID_ARGUMENT);
    /* The largest offer fits the advertised bound. */
    h.cipher_count = AFTP_WIRE_MAX_CIPHERS;
    assert_int_equal(aftp_wire_hello_prologue(&h, 1, out, sizeof out, &len), AFTP_OK);
    assert_true(len <= AFTP_WIRE_PROLOGUE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_layout),
        cmocka_unit_test(test_retry_round_trip_token_sizes),
        cmocka_unit_test(test_retry_token_len_bounds),
        cmocka_unit_test(test_server_key_layout),
        cmocka_unit_test(test_server_key_round_trip_and_cuts),
        cmocka_unit_test(test_ext_find_first_of_duplicates),
        cmocka_unit_test(test_ext_find_zero_length_value),
        cmocka_unit_test(test_ext_find_absent_leaves_outputs),
        cmocka_unit_test(test_ext_put_builds_a_block_decoders_accept),
        cmocka_unit_test(test_ext_put_too_small_leaves_writer),
        cmocka_unit_test(test_prologue_exact_bytes),
        cmocka_unit_test(test_prologue_covers_every_offer_field),
        cmocka_unit_test(test_prologue_limits),
    };
    return cmocka_run_group_tests_name("wire_security", tests, NULL, NULL);
}
