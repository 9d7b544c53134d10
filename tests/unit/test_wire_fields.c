/* Unit tests: per-type field limits on decode and encode, FEEDBACK missing
 * ranges (validation, iterator, sizing). Offsets follow the layouts in
 * proto/aftp_wire.h: every body starts after the 16-byte header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

enum {
    H = AFTP_WIRE_HEADER_LEN,
    VNEG_COUNT = H,
    HELLO_ROLE = H,
    HELLO_CIPHER_COUNT = H + 1,
    HELLO_MAX_DGRAM = H + 2 + 3, /* after the fixture's 3 ciphers */
    HELLO_EXT_LEN = HELLO_MAX_DGRAM + 2,
    ACK_CIPHER = H + 4,
    ACK_MAX_DGRAM = H + 5,
    ACK_EXT_LEN = H + 7,
    OFFER_SIZE = H + 4,
    OFFER_MTIME = H + 12,
    OFFER_MODE = H + 20,
    OFFER_BLOCK = H + 24,
    OFFER_FLAGS = H + 28,
    OFFER_PATH_LEN = H + 30,
    OFFER_PATH = H + 32,
    DATA_BLOCK = H + 4,
    FB_BLOCKS_RECEIVED = H + 32,
    FB_CUM_BLOCK = H + 40,
    FB_SCAN_START = H + 48,
    FB_SCAN_END = H + 56,
    FB_RANGE_COUNT = H + 64,
    FB_RANGES = H + 66,
    DONE_BLOCK_COUNT = H + 4,
    CLOSE_REASON_LEN = H + 2
};

static uint8_t buf[WIRE_TEST_BUF];
static uint8_t buf2[WIRE_TEST_BUF];
static uint8_t big[AFTP_WIRE_MAX_DATAGRAM];

/* Encodes the fixture of `type` with one field overwritten, then decodes. */
static int decode_patched(uint8_t type, size_t offset, size_t width, uint64_t value, size_t *len)
{
    aftp_wire_packet out;
    *len = wire_fixture_encode(type, buf, sizeof buf);
    wire_put_be(buf + offset, width, value);
    return aftp_wire_decode(buf, *len, &out);
}

static void expect_patch_rejected(uint8_t type, size_t offset, size_t width, uint64_t value,
                                  int want)
{
    size_t len;
    decode_patched(type, offset, width, value, &len);
    wire_expect_decode_error(buf, len, want);
}

static void expect_patch_accepted(uint8_t type, size_t offset, size_t width, uint64_t value)
{
    size_t len;
    assert_int_equal(decode_patched(type, offset, width, value, &len), AFTP_OK);
}

/* The fixture of `type` with one field changed must not encode. */
#define EXPECT_ENCODE_REJECTS(type, field, value)                                                  \
    do {                                                                                           \
        aftp_wire_packet bad_;                                                                     \
        wire_fixture(type, &bad_);                                                                 \
        bad_.field = (value);                                                                      \
        wire_expect_encode_error(&bad_, AFTP_ERR_INVALID_ARGUMENT);                                \
    } while (0)

/* Encode, decode, compare, re-encode byte-exact. */
static void expect_round_trip(const aftp_wire_packet *p)
{
    aftp_wire_packet got;
    size_t len = wire_encode_ok(p, buf, sizeof buf);
    wire_decode_ok(buf, len, &got);
    wire_expect_packets_equal(p, &got);
    assert_int_equal(wire_encode_ok(&got, buf2, sizeof buf2), len);
    assert_memory_equal(buf, buf2, len);
}

static void test_version_neg_counts(void **state)
{
    (void)state;
    aftp_wire_packet p;
    expect_patch_rejected(AFTP_WIRE_VERSION_NEG, VNEG_COUNT, 1, 0, AFTP_ERR_LIMIT);
    expect_patch_rejected(AFTP_WIRE_VERSION_NEG, VNEG_COUNT, 1, AFTP_WIRE_MAX_VERSIONS + 1,
                          AFTP_ERR_LIMIT);
    expect_patch_rejected(AFTP_WIRE_VERSION_NEG, VNEG_COUNT, 1, 4, AFTP_ERR_TRUNCATED);
    expect_patch_rejected(AFTP_WIRE_VERSION_NEG, VNEG_COUNT, 1, 2, AFTP_ERR_MALFORMED);
    wire_fixture(AFTP_WIRE_VERSION_NEG, &p);
    p.u.version_neg.count = AFTP_WIRE_MAX_VERSIONS;
    for (unsigned i = 0; i < AFTP_WIRE_MAX_VERSIONS; i++)
        p.u.version_neg.versions[i] = (uint8_t)(i + 1);
    expect_round_trip(&p);
    EXPECT_ENCODE_REJECTS(AFTP_WIRE_VERSION_NEG, u.version_neg.count, 0);
    EXPECT_ENCODE_REJECTS(AFTP_WIRE_VERSION_NEG, u.version_neg.count, AFTP_WIRE_MAX_VERSIONS + 1);
}

static void test_hello_fields(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_HELLO;
    expect_patch_rejected(t, HELLO_CIPHER_COUNT, 1, 0, AFTP_ERR_LIMIT);
    expect_patch_rejected(t, HELLO_CIPHER_COUNT, 1, AFTP_WIRE_MAX_CIPHERS + 1, AFTP_ERR_LIMIT);
    expect_patch_rejected(t, HELLO_ROLE, 1, 0, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, HELLO_ROLE, 1, 3, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, HELLO_ROLE, 1, AFTP_WIRE_ROLE_PULL);
    expect_patch_rejected(t, HELLO_MAX_DGRAM, 2, AFTP_WIRE_MIN_DATAGRAM - 1, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, HELLO_MAX_DGRAM, 2, AFTP_WIRE_MAX_DATAGRAM + 1, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, HELLO_MAX_DGRAM, 2, AFTP_WIRE_MIN_DATAGRAM);
    expect_patch_accepted(t, HELLO_MAX_DGRAM, 2, AFTP_WIRE_MAX_DATAGRAM);
    /* ext_len 3 cuts the 7-byte TLV; 11 swallows 4 bytes of zero padding,
     * which read as a second TLV of type 0 and length 0: well formed. */
    expect_patch_rejected(t, HELLO_EXT_LEN, 2, 3, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, HELLO_EXT_LEN, 2, 11);
    /* A TLV whose length runs past the extension block. */
    expect_patch_rejected(t, HELLO_EXT_LEN + 4, 2, 4, AFTP_ERR_MALFORMED);

    aftp_wire_packet p;
    wire_fixture(t, &p);
    p.u.hello.cipher_count = AFTP_WIRE_MAX_CIPHERS;
    expect_round_trip(&p);
    static const uint8_t bad_ext[] = {0x00, 0x01, 0x00, 0x09, 'x'};
    p.u.hello.ext = bad_ext;
    p.u.hello.ext_len = sizeof bad_ext;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    EXPECT_ENCODE_REJECTS(t, u.hello.role, 0);
    EXPECT_ENCODE_REJECTS(t, u.hello.cipher_count, 0);
    EXPECT_ENCODE_REJECTS(t, u.hello.cipher_count, AFTP_WIRE_MAX_CIPHERS + 1);
    EXPECT_ENCODE_REJECTS(t, u.hello.max_datagram, AFTP_WIRE_MIN_DATAGRAM - 1);
}

static void test_hello_larger_than_padding_target(void **state)
{
    (void)state;
    /* One TLV of 1300 bytes: the body passes 1200 bytes, no padding added. */
    aftp_wire_packet p;
    memset(big, 0x5c, 1304);
    wire_put_be(big, 2, 0x7f00);
    wire_put_be(big + 2, 2, 1300);
    wire_fixture(AFTP_WIRE_HELLO, &p);
    p.u.hello.ext = big;
    p.u.hello.ext_len = 1304;
    expect_round_trip(&p);
    assert_int_equal(wire_encode_ok(&p, buf, sizeof buf), (size_t)HELLO_EXT_LEN + 2 + 1304);
}

static void test_hello_ack_fields(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_HELLO_ACK;
    expect_patch_rejected(t, ACK_CIPHER, 1, AFTP_WIRE_CIPHER_MAX + 1, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, ACK_CIPHER, 1, AFTP_WIRE_CIPHER_NONE);
    expect_patch_rejected(t, ACK_MAX_DGRAM, 2, AFTP_WIRE_MIN_DATAGRAM - 1, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, ACK_MAX_DGRAM, 2, AFTP_WIRE_MAX_DATAGRAM + 1, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, ACK_EXT_LEN, 2, 8, AFTP_ERR_TRUNCATED);
    expect_patch_rejected(t, ACK_EXT_LEN, 2, 6, AFTP_ERR_MALFORMED);
    aftp_wire_packet p;
    wire_fixture(t, &p);
    p.u.hello_ack.ext_len = 0;
    p.u.hello_ack.ext = NULL;
    expect_round_trip(&p);
    EXPECT_ENCODE_REJECTS(t, u.hello_ack.cipher, AFTP_WIRE_CIPHER_MAX + 1);
    EXPECT_ENCODE_REJECTS(t, u.hello_ack.max_datagram, 0);
}

static void test_file_offer_fields(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_FILE_OFFER;
    expect_patch_accepted(t, OFFER_SIZE, 8, AFTP_WIRE_MAX_FILE_SIZE);
    expect_patch_rejected(t, OFFER_SIZE, 8, AFTP_WIRE_MAX_FILE_SIZE + 1, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, OFFER_MODE, 4, 07777);
    expect_patch_rejected(t, OFFER_MODE, 4, 010000, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, OFFER_BLOCK, 4, AFTP_WIRE_MIN_BLOCK);
    expect_patch_accepted(t, OFFER_BLOCK, 4, AFTP_WIRE_MAX_BLOCK);
    expect_patch_rejected(t, OFFER_BLOCK, 4, AFTP_WIRE_MIN_BLOCK - 1, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, OFFER_BLOCK, 4, AFTP_WIRE_MAX_BLOCK + 1, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, OFFER_PATH, 1, 0, AFTP_ERR_MALFORMED);      /* NUL first */
    expect_patch_rejected(t, OFFER_PATH + 5, 1, 0, AFTP_ERR_MALFORMED);  /* NUL inside */
    expect_patch_rejected(t, OFFER_PATH_LEN, 2, 13, AFTP_ERR_TRUNCATED);
    expect_patch_accepted(t, OFFER_FLAGS, 2, 0xffff); /* undefined bits ignored */

    aftp_wire_packet p;
    wire_fixture(t, &p);
    const aftp_wire_packet good = p;
    p.u.file_offer.mtime_ns = INT64_MIN;
    expect_round_trip(&p);
    p.u.file_offer.mtime_ns = INT64_MAX;
    expect_round_trip(&p);
    memset(big, 'p', AFTP_WIRE_MAX_PATH + 1);
    p.u.file_offer.path = big;
    p.u.file_offer.path_len = AFTP_WIRE_MAX_PATH;
    expect_round_trip(&p);
    p.u.file_offer.path_len = AFTP_WIRE_MAX_PATH + 1;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    /* The same oversize path on the wire (encoded by hand). */
    size_t len = wire_encode_ok(&good, buf, sizeof buf) - good.u.file_offer.path_len;
    wire_put_be(buf + OFFER_PATH_LEN, 2, AFTP_WIRE_MAX_PATH + 1);
    memcpy(buf + len, big, AFTP_WIRE_MAX_PATH + 1);
    wire_expect_decode_error(buf, len + AFTP_WIRE_MAX_PATH + 1, AFTP_ERR_MALFORMED);
    wire_put_be(buf + OFFER_PATH_LEN, 2, 0);
    wire_expect_decode_error(buf, len, AFTP_ERR_MALFORMED);
    p = good;
    p.u.file_offer.path = (const uint8_t *)"a\0b";
    p.u.file_offer.path_len = 3;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    EXPECT_ENCODE_REJECTS(t, u.file_offer.path_len, 0);
    EXPECT_ENCODE_REJECTS(t, u.file_offer.size, AFTP_WIRE_MAX_FILE_SIZE + 1);
    EXPECT_ENCODE_REJECTS(t, u.file_offer.mode, 010000);
    EXPECT_ENCODE_REJECTS(t, u.file_offer.block_size, AFTP_WIRE_MIN_BLOCK - 1);
    EXPECT_ENCODE_REJECTS(t, u.file_offer.block_size, AFTP_WIRE_MAX_BLOCK + 1);
}

static void test_error_codes_pass_through(void **state)
{
    (void)state;
    /* Codes this version does not know still decode: the receiver maps
     * them to a generic peer error. */
    static const uint8_t types[] = {AFTP_WIRE_FILE_REPLY, AFTP_WIRE_FILE_RESULT, AFTP_WIRE_CLOSE};
    for (size_t i = 0; i < sizeof types; i++) {
        aftp_wire_packet p;
        wire_fixture(types[i], &p);
        p.u.file_reply.error = 0xffff;
        p.u.file_result.error = 0xffff;
        p.u.close.error = 0xffff;
        expect_round_trip(&p);
    }
}

static void test_data_fields(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_DATA;
    expect_patch_accepted(t, DATA_BLOCK, 8, AFTP_WIRE_MAX_BLOCKS - 1);
    expect_patch_rejected(t, DATA_BLOCK, 8, AFTP_WIRE_MAX_BLOCKS, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, DATA_BLOCK, 8, UINT64_MAX, AFTP_ERR_MALFORMED);

    aftp_wire_packet p;
    wire_fixture(t, &p);
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i ^ (i >> 8));
    p.u.data.payload = big;
    p.u.data.payload_len = AFTP_WIRE_MAX_BLOCK;
    expect_round_trip(&p);
    p.u.data.payload_len = 1;
    expect_round_trip(&p);
    EXPECT_ENCODE_REJECTS(t, u.data.payload_len, 0);
    EXPECT_ENCODE_REJECTS(t, u.data.block, AFTP_WIRE_MAX_BLOCKS);
    p.u.data.payload_len = AFTP_WIRE_MAX_BLOCK + 1;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    /* One byte more than the largest block, on the wire. */
    p.u.data.payload_len = AFTP_WIRE_MAX_BLOCK;
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    buf[len] = 0x01;
    wire_expect_decode_error(buf, len + 1, AFTP_ERR_LIMIT);
}

static void test_file_done_block_count(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_FILE_DONE;
    expect_patch_accepted(t, DONE_BLOCK_COUNT, 8, 0);
    expect_patch_accepted(t, DONE_BLOCK_COUNT, 8, AFTP_WIRE_MAX_BLOCKS);
    expect_patch_rejected(t, DONE_BLOCK_COUNT, 8, AFTP_WIRE_MAX_BLOCKS + 1, AFTP_ERR_MALFORMED);
    EXPECT_ENCODE_REJECTS(t, u.file_done.block_count, AFTP_WIRE_MAX_BLOCKS + 1);
}

static void test_close_reason(void **state)
{
    (void)state;
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_CLOSE, &p);
    memset(big, 'r', AFTP_WIRE_MAX_REASON + 1);
    p.u.close.reason = big;
    p.u.close.reason_len = AFTP_WIRE_MAX_REASON;
    expect_round_trip(&p);
    p.u.close.reason_len = 0;
    p.u.close.reason = NULL;
    expect_round_trip(&p);
    p.u.close.reason = big;
    p.u.close.reason_len = AFTP_WIRE_MAX_REASON + 1;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    p.u.close.reason_len = AFTP_WIRE_MAX_REASON;
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    wire_put_be(buf + CLOSE_REASON_LEN, 2, AFTP_WIRE_MAX_REASON + 1);
    buf[len] = 'r';
    wire_expect_decode_error(buf, len + 1, AFTP_ERR_LIMIT);
}

/* ---- FEEDBACK ---- */

/* A fixture FEEDBACK with the window [scan_start, scan_end) and a
 * hand-written range list appended. */
static size_t feedback_with_raw_ranges(uint64_t cum, uint64_t scan_start, uint64_t scan_end,
                                       uint16_t count, const uint8_t *raw, size_t raw_len)
{
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_FEEDBACK, &p);
    p.u.feedback.cum_block = cum;
    p.u.feedback.blocks_received = cum;
    p.u.feedback.scan_start = scan_start;
    p.u.feedback.scan_end = scan_end;
    p.u.feedback.range_count = 0;
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, FB_RANGES);
    wire_put_be(buf + FB_RANGE_COUNT, 2, count);
    if (raw_len > 0)
        memcpy(buf + len, raw, raw_len);
    return len + raw_len;
}

static void expect_raw_ranges(uint64_t cum, uint64_t scan_start, uint64_t scan_end, uint16_t count,
                              const uint8_t *raw, size_t raw_len, int want)
{
    size_t len = feedback_with_raw_ranges(cum, scan_start, scan_end, count, raw, raw_len);
    if (want == AFTP_OK) {
        aftp_wire_packet got;
        wire_decode_ok(buf, len, &got);
    } else {
        wire_expect_decode_error(buf, len, want);
    }
}

static void test_feedback_bounds(void **state)
{
    (void)state;
    const uint8_t t = AFTP_WIRE_FEEDBACK;
    expect_patch_rejected(t, FB_RANGE_COUNT, 2, AFTP_WIRE_MAX_RANGES + 1, AFTP_ERR_LIMIT);
    expect_patch_rejected(t, FB_SCAN_END, 8, 699, AFTP_ERR_MALFORMED);      /* < scan_start */
    expect_patch_rejected(t, FB_BLOCKS_RECEIVED, 8, 649, AFTP_ERR_MALFORMED); /* < cum_block */
    expect_patch_rejected(t, FB_SCAN_END, 8, AFTP_WIRE_MAX_BLOCKS + 1, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, FB_SCAN_END, 8, AFTP_WIRE_MAX_BLOCKS);
    expect_patch_accepted(t, FB_BLOCKS_RECEIVED, 8, 650);
    /* cum_block <= scan_start <= scan_end (fixture: 650, 700, 2000). */
    expect_patch_rejected(t, FB_SCAN_START, 8, 649, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, FB_CUM_BLOCK, 8, 701, AFTP_ERR_MALFORMED);
    expect_patch_rejected(t, FB_SCAN_START, 8, 2001, AFTP_ERR_MALFORMED);
    expect_patch_accepted(t, FB_CUM_BLOCK, 8, 0);
    expect_patch_accepted(t, FB_CUM_BLOCK, 8, 700);
    /* Ranges are coded from scan_start, so moving it moves them all: the
     * last one, [1000,1100) from 700, ends past scan_end from 1601. */
    expect_patch_accepted(t, FB_SCAN_START, 8, 800);
    expect_patch_rejected(t, FB_SCAN_START, 8, 1601, AFTP_ERR_MALFORMED);

    EXPECT_ENCODE_REJECTS(t, u.feedback.scan_start, 649);
    EXPECT_ENCODE_REJECTS(t, u.feedback.scan_start, 2001);
    EXPECT_ENCODE_REJECTS(t, u.feedback.cum_block, 701);
    EXPECT_ENCODE_REJECTS(t, u.feedback.scan_end, 699);
    EXPECT_ENCODE_REJECTS(t, u.feedback.blocks_received, 649);
    EXPECT_ENCODE_REJECTS(t, u.feedback.scan_end, AFTP_WIRE_MAX_BLOCKS + 1);
    EXPECT_ENCODE_REJECTS(t, u.feedback.range_count, AFTP_WIRE_MAX_RANGES + 1);
}

static void test_feedback_count_and_bytes_must_agree(void **state)
{
    (void)state;
    static const uint8_t one[] = {0x00, 0x00};
    static const uint8_t two[] = {0x00, 0x00, 0x00, 0x00};
    expect_raw_ranges(0, 0, 10, 1, one, 0, AFTP_ERR_TRUNCATED);
    expect_raw_ranges(0, 0, 10, 0, one, 2, AFTP_ERR_MALFORMED);
    expect_raw_ranges(0, 0, 10, 1, two, 4, AFTP_ERR_MALFORMED);
    expect_raw_ranges(0, 0, 10, 2, one, 2, AFTP_ERR_TRUNCATED);
    expect_raw_ranges(0, 0, 10, 1, one, 1, AFTP_ERR_TRUNCATED);
    expect_raw_ranges(0, 0, 10, 2, two, 4, AFTP_OK);
}

static void test_feedback_ranges_inside_scan_window(void **state)
{
    (void)state;
    /* Window [5, 15). Each range: varint gap, varint len-1. */
    static const uint8_t to_end[] = {0x00, 0x09};        /* [5,15) */
    static const uint8_t past_end[] = {0x00, 0x0a};      /* [5,16) */
    static const uint8_t gap_past[] = {0x0a, 0x00};      /* [15,16) */
    static const uint8_t last_fits[] = {0x00, 0x07, 0x00, 0x00}; /* [5,13) [14,15) */
    static const uint8_t last_past[] = {0x00, 0x07, 0x00, 0x01}; /* [5,13) [14,16) */
    static const uint8_t after_end[] = {0x00, 0x09, 0x00, 0x00}; /* [5,15) then from 16 */
    static const uint8_t big_gap[] = {0xbf, 0xff, 0xff, 0xff, 0x00};
    static const uint8_t big_len[] = {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t huge_gap[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
    static const uint8_t non_minimal[] = {0x40, 0x00, 0x00};
    expect_raw_ranges(5, 5, 15, 1, to_end, sizeof to_end, AFTP_OK);
    expect_raw_ranges(5, 5, 15, 1, past_end, sizeof past_end, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 1, gap_past, sizeof gap_past, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 2, last_fits, sizeof last_fits, AFTP_OK);
    expect_raw_ranges(5, 5, 15, 2, last_past, sizeof last_past, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 2, after_end, sizeof after_end, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 1, big_gap, sizeof big_gap, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 1, big_len, sizeof big_len, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, AFTP_WIRE_MAX_BLOCKS, 1, huge_gap, sizeof huge_gap, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 15, 1, non_minimal, sizeof non_minimal, AFTP_ERR_MALFORMED);
    /* An empty window holds no range. */
    expect_raw_ranges(5, 5, 5, 1, to_end, sizeof to_end, AFTP_ERR_MALFORMED);
    expect_raw_ranges(5, 5, 5, 0, NULL, 0, AFTP_OK);
}

/* The list is coded from scan_start, wherever the window starts in
 * [cum_block, scan_end]; nothing is listed below it. */
static void test_feedback_ranges_coded_from_scan_start(void **state)
{
    (void)state;
    static const uint8_t five[] = {0x00, 0x04}; /* gap 0, len 5 */
    static const uint8_t six[] = {0x00, 0x05};  /* gap 0, len 6 */
    aftp_wire_packet got;
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    /* cum_block 5, window [10, 15): the range is [10, 15). */
    size_t len = feedback_with_raw_ranges(5, 10, 15, 1, five, sizeof five);
    wire_decode_ok(buf, len, &got);
    assert_int_equal(got.u.feedback.cum_block, 5);
    assert_int_equal(got.u.feedback.scan_start, 10);
    aftp_wire_range_iter_init(&it, &got.u.feedback);
    assert_int_equal(aftp_wire_ranges_next(&it, &rg), 1);
    assert_int_equal(rg.start, 10);
    assert_int_equal(rg.len, 5);
    assert_int_equal(aftp_wire_ranges_next(&it, &rg), 0);
    /* [10, 16) passes scan_end (from cum_block it would have been [5, 11)). */
    expect_raw_ranges(5, 10, 15, 1, six, sizeof six, AFTP_ERR_MALFORMED);
    /* scan_start = scan_end: an empty window lists nothing. */
    expect_raw_ranges(5, 15, 15, 0, NULL, 0, AFTP_OK);
    expect_raw_ranges(5, 15, 15, 1, five, sizeof five, AFTP_ERR_MALFORMED);
    /* scan_start = cum_block, the window reaching the largest block count. */
    expect_raw_ranges(AFTP_WIRE_MAX_BLOCKS - 5, AFTP_WIRE_MAX_BLOCKS - 5, AFTP_WIRE_MAX_BLOCKS, 1,
                      five, sizeof five, AFTP_OK);
    expect_raw_ranges(AFTP_WIRE_MAX_BLOCKS - 5, AFTP_WIRE_MAX_BLOCKS - 4, AFTP_WIRE_MAX_BLOCKS, 1,
                      five, sizeof five, AFTP_ERR_MALFORMED);
}

/* The encoder refuses the list; the sizing helper gives `sized` for it
 * (0: invalid anywhere; else the list is only outside this window). */
static void expect_bad_ranges_on_encode(const aftp_wire_range *ranges, uint16_t count,
                                        size_t sized)
{
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_FEEDBACK, &p);
    p.u.feedback.ranges = ranges;
    p.u.feedback.range_count = count;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_wire_ranges_encoded_len(p.u.feedback.scan_start, ranges, count), sized);
}

static void test_feedback_encoder_rejects_bad_ranges(void **state)
{
    (void)state;
    /* Fixture window [700, 2000), cum_block 650: `before` lies between
     * cum_block and scan_start, outside the window. */
    static const aftp_wire_range empty[] = {{700, 0}};
    static const aftp_wire_range before[] = {{660, 1}};
    static const aftp_wire_range past[] = {{1990, 11}};
    static const aftp_wire_range adjacent[] = {{700, 2}, {702, 1}};
    static const aftp_wire_range overlap[] = {{700, 5}, {703, 1}};
    static const aftp_wire_range backwards[] = {{800, 1}, {700, 1}};
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_FEEDBACK, &p);
    p.u.feedback.ranges = NULL;
    p.u.feedback.range_bytes = NULL;
    p.u.feedback.range_bytes_len = 0;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    expect_bad_ranges_on_encode(empty, 1, 0);
    expect_bad_ranges_on_encode(before, 1, 0);
    /* Past scan_end only: gap 1290 (2 bytes), len-1 10 (1 byte). */
    expect_bad_ranges_on_encode(past, 1, 3);
    expect_bad_ranges_on_encode(adjacent, 2, 0);
    expect_bad_ranges_on_encode(overlap, 2, 0);
    expect_bad_ranges_on_encode(backwards, 2, 0);
}

/* Ranges whose gaps and lengths sit on every varint length boundary. */
static size_t boundary_ranges(aftp_wire_range *out, uint64_t cum)
{
    static const uint64_t values[] = {0,     1,     63,         64,        16383,
                                      16384, 1u << 20, (1u << 30) - 1, 1u << 30};
    const size_t n = sizeof values / sizeof values[0];
    uint64_t next_min = cum;
    for (size_t i = 0; i < n; i++) {
        out[i].start = next_min + values[i];
        out[i].len = values[n - 1 - i] + 1;
        next_min = out[i].start + out[i].len + 1;
    }
    return n;
}

static void test_range_iterator_yields_encoded_ranges(void **state)
{
    (void)state;
    aftp_wire_range ranges[16];
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_FEEDBACK, &p);
    size_t n = boundary_ranges(ranges, p.u.feedback.scan_start);
    p.u.feedback.ranges = ranges;
    p.u.feedback.range_count = (uint16_t)n;
    p.u.feedback.scan_end = ranges[n - 1].start + ranges[n - 1].len + 3;
    size_t list_len = aftp_wire_ranges_encoded_len(p.u.feedback.scan_start, ranges, n);
    /* Sum of varint sizes: gaps 1+1+1+2+2+4+4+4+8, lengths-1 8+4+4+4+2+2+1+1+1. */
    assert_int_equal(list_len, 27 + 27);
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, FB_RANGES + list_len);
    wire_decode_ok(buf, len, &got);
    assert_int_equal(got.u.feedback.range_bytes_len, list_len);
    wire_expect_packets_equal(&p, &got); /* walks the iterator */
    /* An iterator over an empty list ends at once. */
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    p.u.feedback.range_count = 0;
    len = wire_encode_ok(&p, buf, sizeof buf);
    wire_decode_ok(buf, len, &got);
    aftp_wire_range_iter_init(&it, &got.u.feedback);
    assert_int_equal(aftp_wire_ranges_next(&it, &rg), 0);
}

static void test_ranges_encoded_len_overflow_guard(void **state)
{
    (void)state;
    /* A list whose end would wrap past 2^64 and restart at 0. */
    static const aftp_wire_range wrap[] = {
        {(UINT64_C(1) << 62) - 1, UINT64_C(1) << 62},
        {(UINT64_C(1) << 63) + (UINT64_C(1) << 62) - 1, UINT64_C(1) << 62},
        {0, 1}};
    static const aftp_wire_range at_limit[] = {{AFTP_WIRE_MAX_BLOCKS - 1, 1}};
    static const aftp_wire_range past_limit[] = {{AFTP_WIRE_MAX_BLOCKS - 1, 2}};
    assert_int_equal(aftp_wire_ranges_encoded_len(0, wrap, 3), 0);
    assert_int_equal(aftp_wire_ranges_encoded_len(0, at_limit, 1), 8 + 1);
    assert_int_equal(aftp_wire_ranges_encoded_len(0, past_limit, 1), 0);
    assert_int_equal(aftp_wire_ranges_encoded_len(0, NULL, 0), 0);
}

static void test_feedback_range_count_limits(void **state)
{
    (void)state;
    static aftp_wire_range ranges[AFTP_WIRE_MAX_RANGES];
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_FEEDBACK, &p);
    /* The most ranges allowed, every other block missing: 2 bytes each. */
    for (uint64_t i = 0; i < AFTP_WIRE_MAX_RANGES; i++)
        ranges[i] = (aftp_wire_range){700 + 2 * i, 1};
    p.u.feedback.ranges = ranges;
    p.u.feedback.range_count = AFTP_WIRE_MAX_RANGES;
    p.u.feedback.scan_end = 700 + 2 * AFTP_WIRE_MAX_RANGES;
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, FB_RANGES + 2 * AFTP_WIRE_MAX_RANGES);
    wire_decode_ok(buf, len, &got);
    wire_expect_packets_equal(&p, &got);
    /* Gaps of 2^30 + 1 take 8+1 bytes a range: the datagram would pass the limit. */
    for (uint64_t i = 0; i < AFTP_WIRE_MAX_RANGES; i++)
        ranges[i] = (aftp_wire_range){700 + (i + 1) * ((UINT64_C(1) << 30) + 3), 1};
    p.u.feedback.scan_end = ranges[AFTP_WIRE_MAX_RANGES - 1].start + 1;
    wire_expect_encode_error(&p, AFTP_ERR_LIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_neg_counts),
        cmocka_unit_test(test_hello_fields),
        cmocka_unit_test(test_hello_larger_than_padding_target),
        cmocka_unit_test(test_hello_ack_fields),
        cmocka_unit_test(test_file_offer_fields),
        cmocka_unit_test(test_error_codes_pass_through),
        cmocka_unit_test(test_data_fields),
        cmocka_unit_test(test_file_done_block_count),
        cmocka_unit_test(test_close_reason),
        cmocka_unit_test(test_feedback_bounds),
        cmocka_unit_test(test_feedback_count_and_bytes_must_agree),
        cmocka_unit_test(test_feedback_ranges_inside_scan_window),
        cmocka_unit_test(test_feedback_ranges_coded_from_scan_start),
        cmocka_unit_test(test_feedback_encoder_rejects_bad_ranges),
        cmocka_unit_test(test_range_iterator_yields_encoded_ranges),
        cmocka_unit_test(test_ranges_encoded_len_overflow_guard),
        cmocka_unit_test(test_feedback_range_count_limits),
    };
    return cmocka_run_group_tests_name("wire_fields", tests, NULL, NULL);
}
