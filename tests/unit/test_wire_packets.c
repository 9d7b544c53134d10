/* Unit tests: whole packets of every type through aftp_wire_encode/decode,
 * the header helpers, and the rules every type shares (truncation, trailing
 * bytes, versions, types, flags, buffer sizes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

static uint8_t buf[WIRE_TEST_BUF];
static uint8_t buf2[WIRE_TEST_BUF];

static void test_round_trip_every_type(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        aftp_wire_packet want, got;
        wire_fixture((uint8_t)t, &want);
        size_t len = wire_encode_ok(&want, buf, sizeof buf);
        wire_decode_ok(buf, len, &got);
        wire_expect_packets_equal(&want, &got);
        /* Re-encoding what was decoded gives the same bytes. */
        assert_int_equal(wire_encode_ok(&got, buf2, sizeof buf2), len);
        assert_memory_equal(buf, buf2, len);
    }
}

static size_t entries_records_len(const aftp_wire_entries *b)
{
    size_t n = 0;
    for (uint16_t i = 0; i < b->count; i++) {
        const aftp_wire_entry *e = &b->entries[i];
        n += AFTP_WIRE_ENTRY_FIXED + e->path_len + e->target_len;
        if (e->flags & AFTP_WIRE_ENTRY_HOLES) /* hole_count, then the ranges from 0 */
            n += 2 + aftp_wire_ranges_encoded_len(0, e->holes, e->hole_count);
    }
    return n;
}

static size_t verdicts_records_len(const aftp_wire_verdicts *b)
{
    size_t n = 0;
    for (uint16_t i = 0; i < b->count; i++) {
        const aftp_wire_verdict *v = &b->verdicts[i];
        n += AFTP_WIRE_VERDICT_FIXED + aftp_wire_ranges_encoded_len(0, v->ranges, v->range_count);
    }
    return n;
}

/* A PULL_REQUEST's paths: a u16 length and the bytes each. */
static size_t pull_paths_len(const aftp_wire_pull_request *q)
{
    size_t n = 0;
    for (uint16_t i = 0; i < q->path_count; i++)
        n += 2u + q->paths[i].len;
    return n;
}

/* Encoded size from the layout: header + fixed body + variable parts. */
static size_t layout_len(const aftp_wire_packet *p)
{
    const size_t h = AFTP_WIRE_HEADER_LEN;
    switch (p->hdr.type) {
    case AFTP_WIRE_VERSION_NEG: return h + 1 + p->u.version_neg.count;
    case AFTP_WIRE_HELLO: return AFTP_WIRE_HELLO_MIN_LEN;
    case AFTP_WIRE_HELLO_ACK: return h + 4 + 1 + 2 + 2 + p->u.hello_ack.ext_len;
    case AFTP_WIRE_FILE_OFFER: return h + AFTP_WIRE_FILE_OFFER_FIXED + p->u.file_offer.path_len;
    case AFTP_WIRE_FILE_REPLY: return h + AFTP_WIRE_FILE_REPLY_LEN;
    case AFTP_WIRE_ABANDON: return h + AFTP_WIRE_ABANDON_LEN;
    case AFTP_WIRE_DATA: return h + AFTP_WIRE_DATA_FIXED + p->u.data.payload_len;
    case AFTP_WIRE_FEEDBACK:
        return h + AFTP_WIRE_FEEDBACK_FIXED +
               aftp_wire_ranges_encoded_len(p->u.feedback.scan_start, p->u.feedback.ranges,
                                            p->u.feedback.range_count);
    case AFTP_WIRE_FILE_DONE: return h + AFTP_WIRE_FILE_DONE_LEN;
    case AFTP_WIRE_FILE_RESULT: return h + AFTP_WIRE_FILE_RESULT_LEN;
    case AFTP_WIRE_CLOSE: return h + AFTP_WIRE_CLOSE_FIXED + p->u.close.reason_len;
    case AFTP_WIRE_RETRY: return h + 2 + p->u.retry.token_len;
    case AFTP_WIRE_SERVER_KEY: return h + AFTP_WIRE_SERVER_KEY_LEN;
    case AFTP_WIRE_ENTRIES: return h + 2 + entries_records_len(&p->u.entries);
    case AFTP_WIRE_VERDICTS: return h + 2 + verdicts_records_len(&p->u.verdicts);
    case AFTP_WIRE_PULL_REQUEST: return h + AFTP_WIRE_PULL_REQUEST_FIXED + pull_paths_len(&p->u.pull_request);
    case AFTP_WIRE_PULL_REPLY:
        return h + AFTP_WIRE_PULL_REPLY_FIXED + 2u * p->u.pull_reply.count;
    case AFTP_WIRE_RATE_UPDATE: return h + AFTP_WIRE_RATE_UPDATE_LEN;
    case AFTP_WIRE_PULL_END: return h + AFTP_WIRE_PULL_END_LEN;
    default: fail_msg("no layout for type %u", p->hdr.type); return 0;
    }
}

static void test_encoded_length_matches_layout(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        aftp_wire_packet p;
        wire_fixture((uint8_t)t, &p);
        assert_int_equal(wire_encode_ok(&p, buf, sizeof buf), layout_len(&p));
    }
    /* Fixture FEEDBACK ranges {700,5},{710,1},{1000,100} from scan_start 700:
     * (gap 0, len-1 4) (gap 0, len-1 0) (gap 289, len-1 99) = 1+1+1+1+2+2. */
    aftp_wire_packet fb;
    wire_fixture(AFTP_WIRE_FEEDBACK, &fb);
    assert_int_equal(layout_len(&fb), AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED + 8);
}

static void test_header_layout(void **state)
{
    (void)state;
    static const uint8_t want[AFTP_WIRE_HEADER_LEN] = {
        0x01, 0x04, 0x00, 0x00, 0xa1, 0xb2, 0xc3, 0xd4,
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    size_t len = wire_fixture_encode(AFTP_WIRE_FILE_REPLY, buf, sizeof buf);
    assert_true(len > AFTP_WIRE_HEADER_LEN);
    assert_memory_equal(buf, want, sizeof want);
}

/* Lengths below which a prefix of a valid encoding can never decode. DATA
 * is the one type whose last field takes the rest of the datagram, so any
 * prefix with a non-empty payload is itself a valid, shorter DATA. */
static size_t must_fail_below(uint8_t type, size_t len)
{
    return type == AFTP_WIRE_DATA ? AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED + 1 : len;
}

static void test_truncation_at_every_length_fails_untouched(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        size_t len = wire_fixture_encode((uint8_t)t, buf, sizeof buf);
        size_t limit = must_fail_below((uint8_t)t, len);
        for (size_t cut = 0; cut < limit; cut++)
            assert_int_not_equal(wire_decode_untouched(buf, cut), AFTP_OK);
    }
}

static void test_truncated_data_payload_is_shorter_data(void **state)
{
    (void)state;
    aftp_wire_packet want, got;
    wire_fixture(AFTP_WIRE_DATA, &want);
    size_t len = wire_encode_ok(&want, buf, sizeof buf);
    wire_decode_ok(buf, len - 1, &got);
    assert_int_equal(got.u.data.payload_len, want.u.data.payload_len - 1);
    wire_expect_decode_error(buf, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED,
                             AFTP_ERR_TRUNCATED);
}

static void test_trailing_bytes_rejected(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        /* A DATA payload and HELLO padding both take the rest of the datagram. */
        if (t == AFTP_WIRE_DATA || t == AFTP_WIRE_HELLO)
            continue;
        size_t len = wire_fixture_encode((uint8_t)t, buf, sizeof buf);
        buf[len] = 0;
        wire_expect_decode_error(buf, len + 1, AFTP_ERR_MALFORMED);
    }
}

static void test_hello_padding_zero_only(void **state)
{
    (void)state;
    aftp_wire_packet got;
    size_t len = wire_fixture_encode(AFTP_WIRE_HELLO, buf, sizeof buf);
    /* Body: role, count, 3 ciphers, max_datagram, ext_len, 7 bytes of ext. */
    size_t body_end = AFTP_WIRE_HEADER_LEN + 1 + 1 + 3 + 2 + 2 + 7;
    for (size_t i = body_end; i < len; i++)
        assert_int_equal(buf[i], 0);
    /* Longer zero padding is accepted (a client may probe a larger MTU). */
    memset(buf + len, 0, 300);
    wire_decode_ok(buf, len + 300, &got);
    assert_int_equal(got.u.hello.ext_len, 7);
    /* A non-zero byte anywhere in the padding is rejected. */
    static const size_t spots[] = {0, 1, 500};
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        buf[body_end + spots[i]] = 0x01;
        wire_expect_decode_error(buf, len, AFTP_ERR_MALFORMED);
        buf[body_end + spots[i]] = 0;
    }
    buf[len - 1] = 0x80;
    wire_expect_decode_error(buf, len, AFTP_ERR_MALFORMED);
}

static void test_datagram_longer_than_max_rejected(void **state)
{
    (void)state;
    aftp_wire_packet got;
    size_t len = wire_fixture_encode(AFTP_WIRE_HELLO, buf, sizeof buf);
    memset(buf + len, 0, sizeof buf - len);
    wire_decode_ok(buf, AFTP_WIRE_MAX_DATAGRAM, &got);
    wire_expect_decode_error(buf, AFTP_WIRE_MAX_DATAGRAM + 1, AFTP_ERR_LIMIT);
}

static void test_unknown_types_rejected(void **state)
{
    (void)state;
    size_t len = wire_fixture_encode(AFTP_WIRE_FILE_REPLY, buf, sizeof buf);
    for (unsigned t = AFTP_WIRE_TYPE_MAX + 1; t <= 0xff; t++) {
        buf[1] = (uint8_t)t;
        wire_expect_decode_error(buf, len, AFTP_ERR_UNKNOWN_TYPE);
    }
}

static void test_unknown_versions_rejected(void **state)
{
    (void)state;
    size_t len = wire_fixture_encode(AFTP_WIRE_FILE_REPLY, buf, sizeof buf);
    /* The version is judged before the type, so any type gets AFTP_ERR_VERSION
     * and a server can answer VERSION_NEG. */
    static const uint8_t types[] = {AFTP_WIRE_VERSION_NEG, AFTP_WIRE_FILE_REPLY, 0xff};
    for (unsigned v = AFTP_WIRE_VERSION + 1; v <= 0xff; v++) {
        buf[0] = (uint8_t)v;
        for (size_t i = 0; i < sizeof types; i++) {
            buf[1] = types[i];
            wire_expect_decode_error(buf, len, AFTP_ERR_VERSION);
        }
    }
}

static void test_version_zero_only_for_version_neg(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        size_t len = wire_fixture_encode((uint8_t)t, buf, sizeof buf);
        if (t == AFTP_WIRE_VERSION_NEG) {
            buf[0] = AFTP_WIRE_VERSION; /* VERSION_NEG under a real version */
        } else {
            buf[0] = AFTP_WIRE_VERSION_NEGOTIATION;
        }
        wire_expect_decode_error(buf, len, AFTP_ERR_MALFORMED);
    }
    size_t len = wire_fixture_encode(AFTP_WIRE_VERSION_NEG, buf, sizeof buf);
    for (unsigned t = AFTP_WIRE_TYPE_MAX + 1; t <= 0xff; t++) {
        buf[1] = (uint8_t)t;
        wire_expect_decode_error(buf, len, AFTP_ERR_MALFORMED);
    }
}

static void test_reserved_flag_bits_ignored(void **state)
{
    (void)state;
    const uint16_t reserved = (uint16_t)~AFTP_WIRE_FLAGS_DEFINED;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        aftp_wire_packet want, got;
        wire_fixture((uint8_t)t, &want);
        size_t len = wire_encode_ok(&want, buf, sizeof buf);
        wire_put_be(buf + 2, 2, reserved);
        wire_decode_ok(buf, len, &got);
        want.hdr.flags = reserved;
        wire_expect_packets_equal(&want, &got);
    }
}

static void test_encode_buffer_too_small_at_every_size(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++) {
        aftp_wire_packet p;
        wire_fixture((uint8_t)t, &p);
        size_t len = wire_encode_ok(&p, buf, sizeof buf);
        for (size_t cap = 0; cap < len; cap++) {
            size_t written = 0x5a5a;
            assert_int_equal(aftp_wire_encode(&p, buf2, cap, &written), AFTP_ERR_BUFFER_TOO_SMALL);
            assert_int_equal(written, 0x5a5a);
        }
        size_t written = 0;
        assert_int_equal(aftp_wire_encode(&p, buf2, len, &written), AFTP_OK);
        assert_int_equal(written, len);
    }
}

static void test_encode_rejects_inconsistent_header(void **state)
{
    (void)state;
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_FILE_REPLY, &p);
    p.hdr.version = AFTP_WIRE_VERSION + 1;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    p.hdr.version = AFTP_WIRE_VERSION_NEGOTIATION;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    p.hdr.version = AFTP_WIRE_VERSION;
    p.hdr.type = AFTP_WIRE_TYPE_MAX + 1;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
    wire_fixture(AFTP_WIRE_VERSION_NEG, &p);
    p.hdr.version = AFTP_WIRE_VERSION;
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
}

static void test_header_encode_decode(void **state)
{
    (void)state;
    /* The peek helpers judge nothing: any version and type pass through. */
    const aftp_wire_header h = {7, 0xee, 0xfffe, 0xffffffffu, UINT64_MAX};
    aftp_wire_header got, sentinel;
    static const uint8_t want[AFTP_WIRE_HEADER_LEN] = {
        0x07, 0xee, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(aftp_wire_header_encode(&h, buf, AFTP_WIRE_HEADER_LEN - 1),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(aftp_wire_header_encode(&h, buf, AFTP_WIRE_HEADER_LEN), AFTP_OK);
    assert_memory_equal(buf, want, sizeof want);
    assert_int_equal(aftp_wire_header_decode(buf, AFTP_WIRE_HEADER_LEN, &got), AFTP_OK);
    assert_memory_equal(&got, &h, sizeof got);
    for (size_t cut = 0; cut < AFTP_WIRE_HEADER_LEN; cut++) {
        memset(&sentinel, 0xa5, sizeof sentinel);
        got = sentinel;
        assert_int_equal(aftp_wire_header_decode(buf, cut, &got), AFTP_ERR_TRUNCATED);
        assert_memory_equal(&got, &sentinel, sizeof got);
    }
}

static void test_data_header_matches_full_encoding(void **state)
{
    (void)state;
    aftp_wire_packet p;
    const size_t head = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED;
    wire_fixture(AFTP_WIRE_DATA, &p);
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, head + p.u.data.payload_len);
    assert_int_equal(aftp_wire_data_header_encode(&p.hdr, p.u.data.file_id, p.u.data.block, buf2,
                                                  head),
                     AFTP_OK);
    assert_memory_equal(buf, buf2, head);
    assert_int_equal(aftp_wire_data_header_encode(&p.hdr, 1, 2, buf2, head - 1),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    p.hdr.type = AFTP_WIRE_FILE_DONE;
    assert_int_equal(aftp_wire_data_header_encode(&p.hdr, 1, 2, buf2, head),
                     AFTP_ERR_INVALID_ARGUMENT);
}

/* Spec section 12.2: a server answers an unknown version in a datagram of
 * at least 1200 bytes with VERSION_NEG [1], conn_id and pn echoed, and
 * never answers anything else. */
static void test_version_neg_reply(void **state)
{
    (void)state;
    uint8_t in[AFTP_WIRE_HELLO_MIN_LEN + 1], out[64];
    size_t out_len = 0;
    memset(in, 0xEE, sizeof in);
    static const uint8_t head[16] = {7, 1, 0, 0, 0xAB, 0xCD, 0x00, 0x01,
                                     0, 0, 0, 0, 0, 0, 0x01, 0x2A};
    memcpy(in, head, sizeof head);
    static const uint8_t want[AFTP_WIRE_VERSION_NEG_REPLY_LEN] = {
        0, 0, 0, 0, 0xAB, 0xCD, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x2A, 1, 1};
    for (size_t len = AFTP_WIRE_HELLO_MIN_LEN; len <= sizeof in; len++) {
        assert_int_equal(aftp_wire_version_neg_reply(in, len, out, sizeof out, &out_len), 1);
        assert_int_equal(out_len, sizeof want);
        assert_memory_equal(out, want, sizeof want);
    }
    /* The answer decodes as the packet it claims to be. */
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(out, out_len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_VERSION_NEG);
    assert_int_equal(p.u.version_neg.count, 1);
    assert_int_equal(p.u.version_neg.versions[0], AFTP_WIRE_VERSION);
    /* Every version but 0 and ours is answered, whatever the type byte. */
    for (unsigned v = 0; v < 256; v++) {
        in[0] = (uint8_t)v;
        in[1] = (uint8_t)(v * 13);
        int want_reply = v != AFTP_WIRE_VERSION && v != AFTP_WIRE_VERSION_NEGOTIATION;
        assert_int_equal(aftp_wire_version_neg_reply(in, sizeof in, out, sizeof out, &out_len),
                         want_reply);
    }
    in[0] = 7;
    /* Shorter datagrams never are (amplification), nor empty input. */
    out_len = 99;
    for (size_t len = 0; len < AFTP_WIRE_HELLO_MIN_LEN; len += 7)
        assert_int_equal(aftp_wire_version_neg_reply(in, len, out, sizeof out, &out_len), 0);
    assert_int_equal(aftp_wire_version_neg_reply(in, AFTP_WIRE_HELLO_MIN_LEN - 1, out,
                                                 sizeof out, &out_len), 0);
    assert_int_equal(out_len, 99);
    /* An answer that does not fit is an error, not a truncated packet. */
    assert_int_equal(aftp_wire_version_neg_reply(in, sizeof in, out, sizeof want - 1, &out_len),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(out_len, 99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_encoded_length_matches_layout),
        cmocka_unit_test(test_header_layout),
        cmocka_unit_test(test_truncation_at_every_length_fails_untouched),
        cmocka_unit_test(test_truncated_data_payload_is_shorter_data),
        cmocka_unit_test(test_trailing_bytes_rejected),
        cmocka_unit_test(test_hello_padding_zero_only),
        cmocka_unit_test(test_datagram_longer_than_max_rejected),
        cmocka_unit_test(test_unknown_types_rejected),
        cmocka_unit_test(test_unknown_versions_rejected),
        cmocka_unit_test(test_version_zero_only_for_version_neg),
        cmocka_unit_test(test_reserved_flag_bits_ignored),
        cmocka_unit_test(test_encode_buffer_too_small_at_every_size),
        cmocka_unit_test(test_encode_rejects_inconsistent_header),
        cmocka_unit_test(test_header_encode_decode),
        cmocka_unit_test(test_data_header_matches_full_encoding),
        cmocka_unit_test(test_version_neg_reply),
    };
    return cmocka_run_group_tests_name("wire_packets", tests, NULL, NULL);
}
