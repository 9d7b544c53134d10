/* Unit tests: the wire pieces of pipelined mode (spec sections 6.13, 6.14,
 * 12.3.2): the PIPELINE extension, ENTRIES and VERDICTS batches, their
 * iterators and the rules the encoders and decoders enforce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

static uint8_t buf[WIRE_TEST_BUF];

/* ---- PIPELINE ---- */

static size_t put_pipeline_raw(uint8_t *ext, size_t cap, const uint8_t *value, uint16_t len)
{
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, cap);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_PIPELINE, value, len), AFTP_OK);
    return w.pos;
}

static void test_pipeline_round_trip_and_bounds(void **state)
{
    (void)state;
    uint8_t ext[32];
    uint32_t window = 0;
    aftp_wire_writer w;
    static const uint32_t good[] = {1, 1024, AFTP_WIRE_MAX_WINDOW};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        aftp_wire_writer_init(&w, ext, sizeof ext);
        assert_int_equal(aftp_wire_ext_put_pipeline(&w, good[i]), AFTP_OK);
        assert_int_equal(w.pos, 4 + AFTP_WIRE_PIPELINE_LEN);
        assert_int_equal(aftp_wire_ext_pipeline(ext, w.pos, &window), 1);
        assert_int_equal(window, good[i]);
    }
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put_pipeline(&w, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_wire_ext_put_pipeline(&w, AFTP_WIRE_MAX_WINDOW + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(w.pos, 0);
    /* None there: 0, whatever else the block holds. */
    assert_int_equal(aftp_wire_ext_put_rate_cap(&w, 0), AFTP_OK);
    assert_int_equal(aftp_wire_ext_pipeline(ext, w.pos, &window), 0);
}

static void test_pipeline_malformed_values(void **state)
{
    (void)state;
    uint8_t ext[32];
    uint32_t window;
    static const uint8_t zero[4] = {0, 0, 0, 0};
    static const uint8_t above[4] = {0, 1, 0, 1}; /* 65537 */
    static const uint8_t short_value[3] = {0, 0, 4};
    static const uint8_t long_value[5] = {0, 0, 4, 0, 0};
    assert_int_equal(aftp_wire_ext_pipeline(ext, put_pipeline_raw(ext, sizeof ext, zero, 4),
                                            &window), -1);
    assert_int_equal(aftp_wire_ext_pipeline(ext, put_pipeline_raw(ext, sizeof ext, above, 4),
                                            &window), -1);
    assert_int_equal(aftp_wire_ext_pipeline(
                         ext, put_pipeline_raw(ext, sizeof ext, short_value, 3), &window), -1);
    assert_int_equal(aftp_wire_ext_pipeline(
                         ext, put_pipeline_raw(ext, sizeof ext, long_value, 5), &window), -1);
    assert_int_equal(aftp_wire_ext_pipeline(ext, put_pipeline_raw(ext, sizeof ext, NULL, 0),
                                            &window), -1);
}

/* ---- ENTRIES ---- */

static const uint8_t path_a[] = "a";

/* A FILE entry of `size` bytes in 1000-byte blocks. */
static aftp_wire_entry file_entry(uint32_t id, uint64_t base, uint64_t size)
{
    return (aftp_wire_entry){.entry_id = id, .kind = AFTP_WIRE_KIND_FILE, .size = size,
                             .mode = 0644, .base_block = base, .block_size = 1000,
                             .path_len = 1, .path = path_a};
}

static void expect_entries_encode_error(const aftp_wire_entry *list, uint16_t count)
{
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_ENTRIES, &p);
    p.u.entries = (aftp_wire_entries){count, list, NULL, 0};
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
}

static void test_entry_blocks_and_len(void **state)
{
    (void)state;
    aftp_wire_entry e = file_entry(1, 0, 2001);
    assert_int_equal(aftp_wire_entry_blocks(&e), 3);
    assert_int_equal(aftp_wire_entry_len(&e), AFTP_WIRE_ENTRY_FIXED + 1);
    e.size = 0;
    assert_int_equal(aftp_wire_entry_blocks(&e), 0);
    e.kind = AFTP_WIRE_KIND_DIR;
    e.size = 5000; /* invalid for a DIR, but it still holds no block */
    assert_int_equal(aftp_wire_entry_blocks(&e), 0);
}

static void test_entries_encoder_rejects_what_decoder_would(void **state)
{
    (void)state;
    aftp_wire_entry two[2] = {file_entry(5, 10, 1500), file_entry(6, 12, 1)};
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_ENTRIES, &p);
    p.u.entries = (aftp_wire_entries){2, two, NULL, 0};
    wire_decode_ok(buf, wire_encode_ok(&p, buf, sizeof buf), &got);
    assert_int_equal(got.u.entries.count, 2);

    expect_entries_encode_error(two, 0);
    two[1].base_block = 11; /* inside entry 5 (blocks 10, 11) */
    expect_entries_encode_error(two, 2);
    two[1].base_block = 13; /* leaves block 12 to nobody */
    expect_entries_encode_error(two, 2);
    two[1] = file_entry(7, 12, 1); /* id 6 skipped */
    expect_entries_encode_error(two, 2);
    two[1] = file_entry(6, 12, 1);
    two[1].kind = AFTP_WIRE_KIND_DIR; /* a DIR with a size and block size */
    expect_entries_encode_error(two, 2);
    two[1].size = 0;
    two[1].block_size = 0;
    aftp_wire_packet ok = p;
    wire_encode_ok(&ok, buf, sizeof buf);
    two[1].kind = AFTP_WIRE_KIND_SYMLINK; /* a link needs a target */
    expect_entries_encode_error(two, 2);
    two[1].target = path_a;
    two[1].target_len = 1;
    wire_encode_ok(&ok, buf, sizeof buf);
    two[0].entry_id = 0;
    expect_entries_encode_error(two, 1);
}

/* ---- the hole list of flag HOLES (spec 6.13) ---- */

/* A 5-block FILE whose blocks 1-2 lie in a hole. */
static const aftp_wire_range holes_1_2[] = {{1, 2}};

static aftp_wire_entry sparse_entry(void)
{
    aftp_wire_entry e = file_entry(1, 0, 5000);
    e.flags = AFTP_WIRE_ENTRY_HOLES;
    e.hole_count = 1;
    e.holes = holes_1_2;
    return e;
}

static void test_entry_holes_encode_rules(void **state)
{
    (void)state;
    aftp_wire_entry e = sparse_entry(), got;
    aftp_wire_packet p, d;
    aftp_wire_record_iter it;
    aftp_wire_range_iter ri;
    aftp_wire_range rg;
    /* count u16, then (gap 1, len - 1 = 1) */
    assert_int_equal(aftp_wire_entry_len(&e), AFTP_WIRE_ENTRY_FIXED + 1 + 2 + 2);
    wire_fixture(AFTP_WIRE_ENTRIES, &p);
    p.u.entries = (aftp_wire_entries){1, &e, NULL, 0};
    size_t n = wire_encode_ok(&p, buf, sizeof buf);
    assert_memory_equal(buf + n - 4, "\x00\x01\x01\x01", 4);
    wire_decode_ok(buf, n, &d);
    aftp_wire_entries_iter_init(&it, &d.u.entries);
    assert_int_equal(aftp_wire_entries_next(&it, &got), 1);
    assert_int_equal(got.hole_count, 1);
    assert_int_equal(aftp_wire_entry_len(&got), aftp_wire_entry_len(&e));
    aftp_wire_entry_holes_init(&ri, &got);
    assert_int_equal(aftp_wire_ranges_next(&ri, &rg), 1);
    assert_int_equal(rg.start, 1);
    assert_int_equal(rg.len, 2);
    assert_int_equal(aftp_wire_ranges_next(&ri, &rg), 0);

    e.hole_count = 0; /* the flag without a list */
    expect_entries_encode_error(&e, 1);
    e = sparse_entry();
    e.flags = 0; /* a list without the flag */
    expect_entries_encode_error(&e, 1);
    e = sparse_entry();
    e.size = 2000; /* 2 blocks: the hole ends at block 3, past the file */
    expect_entries_encode_error(&e, 1);
    e = sparse_entry();
    e.hole_count = AFTP_WIRE_MAX_HOLES + 1;
    expect_entries_encode_error(&e, 1);
    e = file_entry(1, 0, 0);
    e.kind = AFTP_WIRE_KIND_DIR;
    e.block_size = 0;
    e.flags = AFTP_WIRE_ENTRY_HOLES; /* FILE only */
    e.hole_count = 1;
    e.holes = holes_1_2;
    expect_entries_encode_error(&e, 1);
}

/* The encoded sparse_entry() batch in buf; its length. The hole list is
 * the last 4 bytes: count (2), gap, len - 1. */
static size_t encoded_sparse(void)
{
    aftp_wire_entry e = sparse_entry();
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_ENTRIES, &p);
    p.u.entries = (aftp_wire_entries){1, &e, NULL, 0};
    return wire_encode_ok(&p, buf, sizeof buf);
}

static void test_entry_holes_decode_rules(void **state)
{
    (void)state;
    size_t n = encoded_sparse();
    buf[n - 3] = 0; /* hole_count 0 */
    wire_expect_decode_error(buf, n, AFTP_ERR_MALFORMED);
    n = encoded_sparse();
    buf[n - 4] = 0x04; /* hole_count 1025 */
    buf[n - 3] = 0x01;
    wire_expect_decode_error(buf, n, AFTP_ERR_LIMIT);
    n = encoded_sparse();
    buf[n - 3] = 2; /* a second range that is not there */
    wire_expect_decode_error(buf, n, AFTP_ERR_TRUNCATED);
    n = encoded_sparse();
    buf[n - 2] = 4; /* blocks 4-5 of a 5-block file */
    wire_expect_decode_error(buf, n, AFTP_ERR_MALFORMED);
    n = encoded_sparse();
    wire_expect_decode_error(buf, n - 4, AFTP_ERR_TRUNCATED); /* flag, no list */
    n = encoded_sparse();
    buf[AFTP_WIRE_HEADER_LEN + 2 + 4] = AFTP_WIRE_KIND_DIR; /* a DIR of 5000 bytes */
    wire_expect_decode_error(buf, n, AFTP_ERR_MALFORMED);
}

/* An ENTRIES whose ids would wrap past 2^32 - 1 is malformed: the next id
 * after UINT32_MAX is not 0 (0 is no id at all). */
static void test_entries_ids_do_not_wrap(void **state)
{
    (void)state;
    aftp_wire_entry two[2] = {file_entry(UINT32_MAX, 0, 1), file_entry(0, 1, 1)};
    expect_entries_encode_error(two, 2);
    wire_encode_ok(&(aftp_wire_packet){.hdr = {AFTP_WIRE_VERSION, AFTP_WIRE_ENTRIES, 0, 1, 1},
                                        .u.entries = {1, two, NULL, 0}},
                   buf, sizeof buf);
}

/* The most records a datagram can carry decode, and the iterator yields
 * every one with its fields, in order, then stops. */
static void test_entries_iterator_walks_a_full_batch(void **state)
{
    (void)state;
    static aftp_wire_entry list[AFTP_WIRE_MAX_ENTRIES];
    const size_t room = AFTP_WIRE_MAX_DATAGRAM - AFTP_WIRE_HEADER_LEN - AFTP_WIRE_BATCH_FIXED;
    const uint16_t n = (uint16_t)(room / (AFTP_WIRE_ENTRY_FIXED + 1));
    for (uint16_t i = 0; i < n; i++)
        list[i] = file_entry(100u + i, 7u * i, 7000);
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_ENTRIES, &p);
    p.u.entries = (aftp_wire_entries){n, list, NULL, 0};
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_true(len <= AFTP_WIRE_MAX_DATAGRAM);
    wire_decode_ok(buf, len, &got);
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    aftp_wire_entries_iter_init(&it, &got.u.entries);
    for (uint16_t i = 0; i < n; i++) {
        assert_int_equal(aftp_wire_entries_next(&it, &e), 1);
        assert_int_equal(e.entry_id, 100u + i);
        assert_int_equal(e.base_block, 7u * i);
        assert_int_equal(aftp_wire_entry_blocks(&e), 7);
    }
    assert_int_equal(aftp_wire_entries_next(&it, &e), 0);
    /* One more record does not fit the largest datagram: LIMIT, not a
     * silently truncated batch. */
    list[n] = file_entry(100u + n, 7u * n, 7000);
    p.u.entries.count = (uint16_t)(n + 1);
    wire_expect_encode_error(&p, AFTP_ERR_LIMIT);
}

/* ---- VERDICTS ---- */

static void expect_verdicts_encode_error(const aftp_wire_verdict *list, uint16_t count)
{
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_VERDICTS, &p);
    p.u.verdicts = (aftp_wire_verdicts){count, list, NULL, 0};
    wire_expect_encode_error(&p, AFTP_ERR_INVALID_ARGUMENT);
}

static void test_verdicts_encoder_rules(void **state)
{
    (void)state;
    static const aftp_wire_range held[] = {{0, 1}};
    aftp_wire_verdict v[2] = {{4, AFTP_WIRE_VERDICT_SEND, 0, 0, NULL, NULL, 0},
                              {4, AFTP_WIRE_VERDICT_SKIP, 0, 0, NULL, NULL, 0}};
    expect_verdicts_encode_error(v, 2); /* ids must ascend */
    expect_verdicts_encode_error(v, 0);
    v[1].entry_id = 5;
    v[1].verdict = AFTP_WIRE_VERDICT_REFUSED; /* without an error */
    expect_verdicts_encode_error(v, 2);
    v[1].verdict = AFTP_WIRE_VERDICT_RESUME; /* without held ranges */
    expect_verdicts_encode_error(v, 2);
    v[1].verdict = AFTP_WIRE_VERDICT_MAX + 1;
    expect_verdicts_encode_error(v, 2);
    v[1].verdict = AFTP_WIRE_VERDICT_SEND;
    v[1].range_count = 1; /* ranges on a SEND */
    v[1].ranges = held;
    expect_verdicts_encode_error(v, 2);
    v[1].verdict = AFTP_WIRE_VERDICT_RESUME;
    aftp_wire_packet p;
    wire_fixture(AFTP_WIRE_VERDICTS, &p);
    p.u.verdicts = (aftp_wire_verdicts){2, v, NULL, 0};
    wire_encode_ok(&p, buf, sizeof buf);
}

/* The 8192 held ranges a VERDICTS may carry are counted over the packet,
 * not per record. */
static void test_verdicts_range_total_is_per_packet(void **state)
{
    (void)state;
    static aftp_wire_range held[AFTP_WIRE_MAX_RANGES];
    for (size_t i = 0; i < AFTP_WIRE_MAX_RANGES; i++)
        held[i] = (aftp_wire_range){2 * i, 1};
    const uint16_t half = AFTP_WIRE_MAX_RANGES / 2;
    aftp_wire_verdict v[3] = {{1, AFTP_WIRE_VERDICT_RESUME, 0, half, held, NULL, 0},
                              {2, AFTP_WIRE_VERDICT_RESUME, 0, half, held, NULL, 0},
                              {3, AFTP_WIRE_VERDICT_RESUME, 0, 1, held, NULL, 0}};
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_VERDICTS, &p);
    p.u.verdicts = (aftp_wire_verdicts){2, v, NULL, 0};
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    wire_decode_ok(buf, len, &got);
    expect_verdicts_encode_error(v, 3);
    /* The same on decode: append the third record by hand, fix the count. */
    static const uint8_t third[] = {0, 0, 0, 3, 1, 0, 0, 0, 1, 0x00, 0x00};
    memcpy(buf + len, third, sizeof third);
    wire_put_be(buf + AFTP_WIRE_HEADER_LEN, 2, 3);
    wire_expect_decode_error(buf, len + sizeof third, AFTP_ERR_LIMIT);
}

/* Each RESUME's held ranges are walked from the file's block 0, whatever
 * came before them in the packet. */
static void test_verdict_ranges_restart_per_record(void **state)
{
    (void)state;
    static const aftp_wire_range a[] = {{5, 2}, {9, 1}};
    static const aftp_wire_range b[] = {{0, 1}};
    const aftp_wire_verdict v[2] = {{1, AFTP_WIRE_VERDICT_RESUME, 0, 2, a, NULL, 0},
                                    {2, AFTP_WIRE_VERDICT_RESUME, 0, 1, b, NULL, 0}};
    aftp_wire_packet p, got;
    wire_fixture(AFTP_WIRE_VERDICTS, &p);
    p.u.verdicts = (aftp_wire_verdicts){2, v, NULL, 0};
    wire_decode_ok(buf, wire_encode_ok(&p, buf, sizeof buf), &got);
    aftp_wire_record_iter it;
    aftp_wire_verdict d;
    aftp_wire_range_iter ri;
    aftp_wire_range rg;
    aftp_wire_verdicts_iter_init(&it, &got.u.verdicts);
    assert_int_equal(aftp_wire_verdicts_next(&it, &d), 1);
    assert_int_equal(aftp_wire_verdicts_next(&it, &d), 1);
    assert_int_equal(d.entry_id, 2);
    aftp_wire_verdict_ranges_init(&ri, &d);
    assert_int_equal(aftp_wire_ranges_next(&ri, &rg), 1);
    assert_int_equal(rg.start, 0);
    assert_int_equal(rg.len, 1);
    assert_int_equal(aftp_wire_ranges_next(&ri, &rg), 0);
    assert_int_equal(aftp_wire_verdicts_next(&it, &d), 0);
}

/* ---- ABANDON ---- */

/* An ABANDON always carries an error (6.15): NONE is refused by the
 * encoder and MALFORMED at the decoder; the fixed body only. */
static void test_abandon_needs_an_error(void **state)
{
    (void)state;
    aftp_wire_packet p, got;
    size_t written;
    wire_fixture(AFTP_WIRE_ABANDON, &p);
    size_t len = wire_encode_ok(&p, buf, sizeof buf);
    assert_int_equal(len, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_ABANDON_LEN);
    wire_decode_ok(buf, len, &got);
    assert_int_equal(got.u.abandon.error, AFTP_WIRE_ERR_SOURCE_CHANGED);
    buf[len - 1] = 0; /* error NONE */
    buf[len - 2] = 0;
    assert_int_equal(aftp_wire_decode(buf, len, &got), AFTP_ERR_MALFORMED);
    p.u.abandon.error = AFTP_WIRE_ERR_NONE;
    assert_int_equal(aftp_wire_encode(&p, buf, sizeof buf, &written), AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipeline_round_trip_and_bounds),
        cmocka_unit_test(test_pipeline_malformed_values),
        cmocka_unit_test(test_entry_blocks_and_len),
        cmocka_unit_test(test_entries_encoder_rejects_what_decoder_would),
        cmocka_unit_test(test_entries_ids_do_not_wrap),
        cmocka_unit_test(test_entry_holes_encode_rules),
        cmocka_unit_test(test_entry_holes_decode_rules),
        cmocka_unit_test(test_entries_iterator_walks_a_full_batch),
        cmocka_unit_test(test_verdicts_encoder_rules),
        cmocka_unit_test(test_verdicts_range_total_is_per_packet),
        cmocka_unit_test(test_verdict_ranges_restart_per_record),
        cmocka_unit_test(test_abandon_needs_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
