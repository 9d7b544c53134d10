/* Unit tests: wire cursors, varints, block model, error and name tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

static const uint8_t counting[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                   0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};

static void test_read_widths_big_endian(void **state)
{
    (void)state;
    aftp_wire_reader r;
    uint8_t a;
    uint16_t b;
    uint32_t c;
    uint64_t d;
    aftp_wire_reader_init(&r, counting, sizeof counting);
    assert_int_equal(aftp_wire_read_u8(&r, &a), AFTP_OK);
    assert_int_equal(aftp_wire_read_u16(&r, &b), AFTP_OK);
    assert_int_equal(aftp_wire_read_u32(&r, &c), AFTP_OK);
    assert_int_equal(aftp_wire_read_u64(&r, &d), AFTP_OK);
    assert_int_equal(a, 0x01);
    assert_int_equal(b, 0x0203);
    assert_int_equal(c, 0x04050607u);
    assert_int_equal(d, UINT64_C(0x08090a0b0c0d0e0f));
    assert_int_equal(r.pos, sizeof counting);
}

/* Reads `width` bytes with the matching reader into a 64-bit value. */
static int read_width(aftp_wire_reader *r, size_t width, uint64_t *v)
{
    uint8_t a = 0xee;
    uint16_t b = 0xeeee;
    uint32_t c = 0xeeeeeeeeu;
    int rc;
    switch (width) {
    case 1: rc = aftp_wire_read_u8(r, &a); *v = a; return rc;
    case 2: rc = aftp_wire_read_u16(r, &b); *v = b; return rc;
    case 4: rc = aftp_wire_read_u32(r, &c); *v = c; return rc;
    default: return aftp_wire_read_u64(r, v);
    }
}

static void test_read_truncated_keeps_position_and_value(void **state)
{
    (void)state;
    static const size_t widths[] = {1, 2, 4, 8};
    static const uint64_t untouched[] = {0xee, 0xeeee, 0xeeeeeeeeu, UINT64_C(0xeeeeeeeeeeeeeeee)};
    for (size_t w = 0; w < 4; w++) {
        /* One byte already consumed, then fewer than `width` bytes left. */
        for (size_t left = 0; left < widths[w]; left++) {
            aftp_wire_reader r;
            uint64_t v = untouched[w];
            aftp_wire_reader_init(&r, counting, 1 + left);
            r.pos = 1;
            assert_int_equal(read_width(&r, widths[w], &v), AFTP_ERR_TRUNCATED);
            assert_int_equal(r.pos, 1);
            assert_int_equal(v, untouched[w]);
        }
    }
}

static void test_read_bytes_borrows_and_bounds(void **state)
{
    (void)state;
    aftp_wire_reader r;
    const uint8_t *p = NULL;
    aftp_wire_reader_init(&r, counting, 5);
    assert_int_equal(aftp_wire_read_bytes(&r, 3, &p), AFTP_OK);
    assert_ptr_equal(p, counting);
    assert_int_equal(aftp_wire_read_bytes(&r, 3, &p), AFTP_ERR_TRUNCATED);
    assert_ptr_equal(p, counting);
    assert_int_equal(r.pos, 3);
    assert_int_equal(aftp_wire_read_bytes(&r, 2, &p), AFTP_OK);
    assert_ptr_equal(p, counting + 3);
    assert_int_equal(aftp_wire_read_bytes(&r, 0, &p), AFTP_OK);
    assert_int_equal(r.pos, 5);
}

static void test_write_widths_big_endian(void **state)
{
    (void)state;
    uint8_t buf[sizeof counting + 2] = {0};
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, buf, sizeof counting);
    assert_int_equal(aftp_wire_write_u8(&w, 0x01), AFTP_OK);
    assert_int_equal(aftp_wire_write_u16(&w, 0x0203), AFTP_OK);
    assert_int_equal(aftp_wire_write_u32(&w, 0x04050607u), AFTP_OK);
    assert_int_equal(aftp_wire_write_u64(&w, UINT64_C(0x08090a0b0c0d0e0f)), AFTP_OK);
    assert_int_equal(w.pos, sizeof counting);
    assert_memory_equal(buf, counting, sizeof counting);
    assert_int_equal(buf[sizeof counting], 0);
}

static int write_width(aftp_wire_writer *w, size_t width)
{
    switch (width) {
    case 1: return aftp_wire_write_u8(w, 0x11);
    case 2: return aftp_wire_write_u16(w, 0x1111);
    case 4: return aftp_wire_write_u32(w, 0x11111111u);
    case 8: return aftp_wire_write_u64(w, UINT64_C(0x1111111111111111));
    default: return aftp_wire_write_bytes(w, counting, width);
    }
}

static void test_write_overflow_is_buffer_too_small(void **state)
{
    (void)state;
    static const size_t widths[] = {1, 2, 4, 8, 3};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        for (size_t room = 0; room < widths[i]; room++) {
            uint8_t buf[16];
            aftp_wire_writer w;
            memset(buf, 0xcc, sizeof buf);
            aftp_wire_writer_init(&w, buf, 1 + room);
            w.pos = 1;
            assert_int_equal(write_width(&w, widths[i]), AFTP_ERR_BUFFER_TOO_SMALL);
            assert_int_equal(w.pos, 1);
            for (size_t k = 0; k < sizeof buf; k++)
                assert_int_equal(buf[k], 0xcc);
        }
    }
}

typedef struct varint_case {
    uint64_t value;
    size_t len;
    uint8_t bytes[8];
} varint_case;

/* RFC 9000 section 16 encodings at every length boundary. */
static const varint_case varint_boundaries[] = {
    {0, 1, {0x00}},
    {63, 1, {0x3f}},
    {64, 2, {0x40, 0x40}},
    {16383, 2, {0x7f, 0xff}},
    {16384, 4, {0x80, 0x00, 0x40, 0x00}},
    {(UINT64_C(1) << 30) - 1, 4, {0xbf, 0xff, 0xff, 0xff}},
    {UINT64_C(1) << 30, 8, {0xc0, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00}},
    {(UINT64_C(1) << 62) - 1, 8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
};

static void test_varint_boundaries(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof varint_boundaries / sizeof varint_boundaries[0]; i++) {
        const varint_case *c = &varint_boundaries[i];
        uint8_t buf[8];
        aftp_wire_writer w;
        aftp_wire_reader r;
        uint64_t v = 0;
        assert_int_equal(aftp_wire_varint_len(c->value), c->len);
        aftp_wire_writer_init(&w, buf, sizeof buf);
        assert_int_equal(aftp_wire_write_varint(&w, c->value), AFTP_OK);
        assert_int_equal(w.pos, c->len);
        assert_memory_equal(buf, c->bytes, c->len);
        aftp_wire_reader_init(&r, c->bytes, c->len);
        assert_int_equal(aftp_wire_read_varint(&r, &v), AFTP_OK);
        assert_int_equal(v, c->value);
        assert_int_equal(r.pos, c->len);
        for (size_t cut = 0; cut < c->len; cut++) {
            v = 0x77;
            aftp_wire_reader_init(&r, c->bytes, cut);
            assert_int_equal(aftp_wire_read_varint(&r, &v), AFTP_ERR_TRUNCATED);
            assert_int_equal(r.pos, 0);
            assert_int_equal(v, 0x77);
        }
        /* Too little room to write it. */
        aftp_wire_writer_init(&w, buf, c->len - 1);
        assert_int_equal(aftp_wire_write_varint(&w, c->value), AFTP_ERR_BUFFER_TOO_SMALL);
        assert_int_equal(w.pos, 0);
    }
}

static void test_varint_above_max_rejected(void **state)
{
    (void)state;
    static const uint64_t too_big[] = {UINT64_C(1) << 62, UINT64_MAX};
    for (size_t i = 0; i < 2; i++) {
        uint8_t buf[8];
        aftp_wire_writer w;
        aftp_wire_writer_init(&w, buf, sizeof buf);
        assert_int_equal(aftp_wire_varint_len(too_big[i]), 0);
        assert_int_equal(aftp_wire_write_varint(&w, too_big[i]), AFTP_ERR_INVALID_ARGUMENT);
        assert_int_equal(w.pos, 0);
    }
}

static void test_varint_non_minimal_rejected(void **state)
{
    (void)state;
    /* Each value is the largest that fits the next shorter length, or 0. */
    static const varint_case longer_than_needed[] = {
        {0, 2, {0x40, 0x00}},
        {63, 2, {0x40, 0x3f}},
        {0, 4, {0x80, 0x00, 0x00, 0x00}},
        {16383, 4, {0x80, 0x00, 0x3f, 0xff}},
        {0, 8, {0xc0, 0, 0, 0, 0, 0, 0, 0}},
        {(UINT64_C(1) << 30) - 1, 8, {0xc0, 0x00, 0x00, 0x00, 0x3f, 0xff, 0xff, 0xff}},
    };
    for (size_t i = 0; i < sizeof longer_than_needed / sizeof longer_than_needed[0]; i++) {
        const varint_case *c = &longer_than_needed[i];
        uint8_t buf[9] = {0xaa};
        aftp_wire_reader r;
        uint64_t v = 0x77;
        memcpy(buf + 1, c->bytes, c->len);
        aftp_wire_reader_init(&r, buf, 1 + c->len);
        r.pos = 1;
        assert_int_equal(aftp_wire_read_varint(&r, &v), AFTP_ERR_MALFORMED);
        assert_int_equal(r.pos, 1);
        assert_int_equal(v, 0x77);
    }
}

static void expect_blocks(uint64_t size, uint32_t block, uint64_t count, uint32_t last_len)
{
    assert_int_equal(aftp_wire_block_count(size, block), count);
    if (count == 0) {
        assert_int_equal(aftp_wire_block_len(size, block, 0), 0);
        return;
    }
    assert_int_equal(aftp_wire_block_len(size, block, 0), count == 1 ? last_len : block);
    if (count > 2)
        assert_int_equal(aftp_wire_block_len(size, block, count - 2), block);
    assert_int_equal(aftp_wire_block_len(size, block, count - 1), last_len);
    assert_int_equal(aftp_wire_block_len(size, block, count), 0);
    assert_int_equal(aftp_wire_block_len(size, block, UINT64_MAX), 0);
}

static void test_block_model(void **state)
{
    (void)state;
    const uint32_t b = AFTP_WIRE_DEFAULT_BLOCK;
    expect_blocks(0, b, 0, 0);
    expect_blocks(1, b, 1, 1);
    expect_blocks(b - 1, b, 1, b - 1);
    expect_blocks(b, b, 1, b);
    expect_blocks(b + 1, b, 2, 1);
    expect_blocks(7 * (uint64_t)b, b, 7, b);
    expect_blocks(7 * (uint64_t)b + 5, b, 8, 5);
    /* The largest file: exactly AFTP_WIRE_MAX_BLOCKS blocks of the smallest size. */
    expect_blocks(AFTP_WIRE_MAX_FILE_SIZE, AFTP_WIRE_MIN_BLOCK, AFTP_WIRE_MAX_BLOCKS,
                  AFTP_WIRE_MIN_BLOCK);
    expect_blocks(AFTP_WIRE_MAX_FILE_SIZE, 1000, AFTP_WIRE_MAX_FILE_SIZE / 1000 + 1,
                  (uint32_t)(AFTP_WIRE_MAX_FILE_SIZE % 1000));
    expect_blocks(UINT64_MAX, AFTP_WIRE_MAX_BLOCK, UINT64_MAX / AFTP_WIRE_MAX_BLOCK + 1,
                  (uint32_t)(UINT64_MAX % AFTP_WIRE_MAX_BLOCK));
    /* A zero block size describes no file. */
    expect_blocks(100, 0, 0, 0);
}

/* Every code of include/aftp/aftp_error.h. */
static const int all_errors[] = {
    AFTP_OK, AFTP_ERR_INVALID_ARGUMENT, AFTP_ERR_BUFFER_TOO_SMALL, AFTP_ERR_INVALID_STATE,
    AFTP_ERR_FILE_EXISTS, AFTP_ERR_NOT_FOUND, AFTP_ERR_PATH_REJECTED, AFTP_ERR_CANCELLED,
    AFTP_ERR_TRUNCATED, AFTP_ERR_MALFORMED, AFTP_ERR_UNKNOWN_TYPE, AFTP_ERR_VERSION,
    AFTP_ERR_LIMIT, AFTP_ERR_PEER_CLOSED, AFTP_ERR_IDLE_TIMEOUT, AFTP_ERR_DIGEST_MISMATCH,
    AFTP_ERR_PEER_REFUSED, AFTP_ERR_IO, AFTP_ERR_NO_SPACE, AFTP_ERR_NO_MEMORY,
    AFTP_ERR_PERMISSION, AFTP_ERR_NETWORK, AFTP_ERR_SOURCE_CHANGED, AFTP_ERR_INTERNAL,
};
#define ERROR_COUNT (sizeof all_errors / sizeof all_errors[0])

static void test_strerror_specific_for_every_code(void **state)
{
    (void)state;
    /* The texts given to codes nobody defined, one per band. */
    const char *generic[] = {aftp_strerror(-199), aftp_strerror(-299), aftp_strerror(-399),
                             aftp_strerror(-499), aftp_strerror(1)};
    assert_string_equal(generic[0], "usage error");
    assert_string_equal(generic[1], "protocol error");
    assert_string_equal(generic[2], "I/O or system error");
    assert_string_equal(generic[3], "unknown error");
    assert_string_equal(generic[4], "unknown error");
    for (size_t i = 0; i < ERROR_COUNT; i++) {
        const char *text = aftp_strerror(all_errors[i]);
        assert_non_null(text);
        assert_true(strlen(text) > 0);
        for (size_t g = 0; g < sizeof generic / sizeof generic[0]; g++)
            assert_string_not_equal(text, generic[g]);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(text, aftp_strerror(all_errors[j]));
    }
}

static void test_retryable_classification(void **state)
{
    (void)state;
    static const int retryable[] = {AFTP_ERR_IDLE_TIMEOUT, AFTP_ERR_PEER_CLOSED, AFTP_ERR_NETWORK,
                                    AFTP_ERR_NO_MEMORY, AFTP_ERR_IO};
    for (size_t i = 0; i < ERROR_COUNT; i++) {
        int want = 0;
        for (size_t k = 0; k < sizeof retryable / sizeof retryable[0]; k++)
            want |= retryable[k] == all_errors[i];
        assert_int_equal(aftp_err_is_retryable(all_errors[i]) != 0, want);
    }
}

static void test_type_names(void **state)
{
    (void)state;
    static const char *const names[] = {"VERSION_NEG", "HELLO",    "HELLO_ACK", "FILE_OFFER",
                                        "FILE_REPLY",  "DATA",     "FEEDBACK",  "FILE_DONE",
                                        "FILE_RESULT", "CLOSE",    "RETRY",     "SERVER_KEY",
                                        "ENTRIES",     "VERDICTS", "ABANDON",   "PULL_REQUEST",
                                        "PULL_REPLY",  "RATE_UPDATE", "PULL_END"};
    assert_int_equal(sizeof names / sizeof names[0], AFTP_WIRE_TYPE_MAX + 1);
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++)
        assert_string_equal(aftp_wire_type_name((uint8_t)t), names[t]);
    for (unsigned t = AFTP_WIRE_TYPE_MAX + 1; t <= 0xff; t++)
        assert_string_equal(aftp_wire_type_name((uint8_t)t), "UNKNOWN");
}

static void test_wire_error_names(void **state)
{
    (void)state;
    static const char *const names[] = {
        "NONE",      "PROTOCOL",        "VERSION",       "FILE_EXISTS", "NO_SPACE",
        "IO",        "DIGEST_MISMATCH", "PATH_REJECTED", "IDLE_TIMEOUT", "CANCELLED",
        "INTERNAL",  "SOURCE_CHANGED",  "PERMISSION",    "LIMIT",        "UNAUTHORIZED",
        "NOT_FOUND"};
    const unsigned count = sizeof names / sizeof names[0];
    assert_int_equal(count - 1, AFTP_WIRE_ERR_NOT_FOUND);
    for (unsigned e = 0; e < count; e++)
        assert_string_equal(aftp_wire_error_name((uint16_t)e), names[e]);
    for (unsigned e = count; e <= 0xffff; e++)
        assert_string_equal(aftp_wire_error_name((uint16_t)e), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_widths_big_endian),
        cmocka_unit_test(test_read_truncated_keeps_position_and_value),
        cmocka_unit_test(test_read_bytes_borrows_and_bounds),
        cmocka_unit_test(test_write_widths_big_endian),
        cmocka_unit_test(test_write_overflow_is_buffer_too_small),
        cmocka_unit_test(test_varint_boundaries),
        cmocka_unit_test(test_varint_above_max_rejected),
        cmocka_unit_test(test_varint_non_minimal_rejected),
        cmocka_unit_test(test_block_model),
        cmocka_unit_test(test_strerror_specific_for_every_code),
        cmocka_unit_test(test_retryable_classification),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_wire_error_names),
    };
    return cmocka_run_group_tests_name("wire_cursor", tests, NULL, NULL);
}
