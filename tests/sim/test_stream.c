/* aftp_stream: the entry table of pipelined mode (spec 9.14) — entries laid
 * end to end in the stream, the entry window, verdicts and their rules, and
 * what a hostile peer's entries and verdicts get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "common/aftp_stream.h"

static const uint8_t path_x[] = "x";
static char why[256];

/* A FILE of `blocks` 1000-byte blocks at `base`, flags RESUME and SYNC. */
static aftp_wire_entry file_at(uint32_t id, uint64_t base, uint64_t blocks)
{
    return (aftp_wire_entry){.entry_id = id, .kind = AFTP_WIRE_KIND_FILE,
                             .flags = AFTP_WIRE_ENTRY_RESUME | AFTP_WIRE_ENTRY_SYNC,
                             .size = blocks * 1000, .base_block = base, .block_size = 1000,
                             .path_len = 1, .path = path_x};
}

static aftp_wire_entry dir_at(uint32_t id, uint64_t base)
{
    return (aftp_wire_entry){.entry_id = id, .kind = AFTP_WIRE_KIND_DIR, .base_block = base,
                             .path_len = 1, .path = path_x};
}

static int add(aftp_stream *s, aftp_wire_entry e)
{
    why[0] = 0;
    return aftp_stream_add(s, &e, why, sizeof why);
}

static int verdict(aftp_stream *s, uint32_t id, uint8_t v, uint16_t error,
                   const aftp_wire_range *held, uint16_t nheld, aftp_stream_entry *out)
{
    aftp_wire_verdict vd = {id, v, error, nheld, held, NULL, 0};
    why[0] = 0;
    return aftp_stream_verdict(s, &vd, out, why, sizeof why);
}

static void expect_why(const char *part)
{
    if (strstr(why, part) == NULL)
        fail_msg("'%s' does not say '%s'", why, part);
}

static void test_init_bounds(void **state)
{
    (void)state;
    aftp_stream s;
    assert_int_equal(aftp_stream_init(&s, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_stream_init(&s, AFTP_WIRE_MAX_WINDOW + 1), AFTP_ERR_INVALID_ARGUMENT);
    assert_null(aftp_stream_find(&s, 1));
    assert_int_equal(aftp_stream_init(&s, AFTP_WIRE_MAX_WINDOW), AFTP_OK);
    aftp_stream_free(&s);
    aftp_stream_free(&s);
}

/* A sender's table: files and a directory end to end; every block found in
 * its entry, the directory in none; a repeated entry changes nothing. */
static void test_entries_in_order_and_locate(void **state)
{
    (void)state;
    aftp_stream s;
    assert_int_equal(aftp_stream_init(&s, 8), AFTP_OK);
    assert_int_equal(add(&s, file_at(1, 0, 3)), 1);
    assert_int_equal(add(&s, dir_at(2, 3)), 1);
    assert_int_equal(add(&s, file_at(3, 3, 1)), 1);
    assert_int_equal(add(&s, file_at(4, 4, 0)), 1); /* an empty file */
    assert_int_equal(add(&s, file_at(5, 4, 5)), 1);
    assert_int_equal(add(&s, file_at(3, 99, 99)), 0); /* repeated: not compared */
    assert_int_equal(aftp_stream_find(&s, 3)->base, 3);
    static const uint32_t owner[] = {1, 1, 1, 3, 5, 5, 5, 5, 5};
    for (uint64_t b = 0; b < 9; b++)
        assert_int_equal(aftp_stream_locate(&s, b)->id, owner[b]);
    assert_null(aftp_stream_locate(&s, 9));
    aftp_stream_free(&s);
}

/* A receiver that gets a later batch first places it, and checks the
 * bases once both neighbours are known. */
static void test_out_of_order_batches_checked_when_neighbours_meet(void **state)
{
    (void)state;
    aftp_stream s;
    assert_int_equal(aftp_stream_init(&s, 8), AFTP_OK);
    assert_int_equal(add(&s, file_at(3, 10, 2)), 1);
    assert_int_equal(add(&s, file_at(1, 0, 4)), 1);
    /* Entry 2 must run from 4 to 10. */
    assert_int_equal(add(&s, file_at(2, 4, 5)), AFTP_ERR_MALFORMED);
    expect_why("entry 2 ends at stream block 9, but entry 3 begins at block 10");
    assert_int_equal(add(&s, file_at(2, 5, 5)), AFTP_ERR_MALFORMED);
    expect_why("entry 2 begins at stream block 5, but the entries before it end at block 4");
    assert_int_equal(add(&s, file_at(2, 4, 6)), 1);
    aftp_stream_free(&s);
}

/* Bases that overlap, leave a gap or go backwards, against the entry
 * before, the first entry's base, and the end of entries already ended. */
static void test_bases_must_be_laid_end_to_end(void **state)
{
    (void)state;
    aftp_stream s;
    aftp_stream_entry out;
    assert_int_equal(aftp_stream_init(&s, 4), AFTP_OK);
    assert_int_equal(add(&s, file_at(1, 1, 2)), AFTP_ERR_MALFORMED);
    expect_why("entry 1 begins at stream block 1, but the entries before it end at block 0");
    assert_int_equal(add(&s, file_at(1, 0, 2)), 1);
    assert_int_equal(add(&s, file_at(2, 1, 2)), AFTP_ERR_MALFORMED); /* overlaps */
    assert_int_equal(add(&s, file_at(2, 3, 2)), AFTP_ERR_MALFORMED); /* a gap */
    assert_int_equal(add(&s, file_at(2, 2, 2)), 1);
    /* Entries 1 and 2 end: the next must still begin at block 4. */
    assert_int_equal(verdict(&s, 1, AFTP_WIRE_VERDICT_SKIP, 0, NULL, 0, &out), 1);
    assert_int_equal(verdict(&s, 2, AFTP_WIRE_VERDICT_SKIP, 0, NULL, 0, &out), 1);
    assert_int_equal(s.oldest, 3);
    assert_int_equal(add(&s, file_at(3, 0, 1)), AFTP_ERR_MALFORMED); /* backwards */
    expect_why("the entries before it end at block 4");
    assert_int_equal(add(&s, file_at(3, 4, 1)), 1);
    aftp_stream_free(&s);
}

/* At most W entries from the oldest unfinished one; an end frees a place;
 * an ended entry offered again is ignored. */
static void test_entry_window(void **state)
{
    (void)state;
    aftp_stream s;
    assert_int_equal(aftp_stream_init(&s, 3), AFTP_OK);
    for (uint32_t id = 1; id <= 3; id++)
        assert_int_equal(add(&s, file_at(id, id - 1, 1)), 1);
    assert_int_equal(add(&s, file_at(4, 3, 1)), AFTP_ERR_MALFORMED);
    expect_why("entry 4 is beyond the window of 3 entries from entry 1");
    aftp_stream_end(&s, 2, 0); /* not the oldest: the window stays */
    assert_int_equal(add(&s, file_at(4, 3, 1)), AFTP_ERR_MALFORMED);
    aftp_stream_end(&s, 1, 0); /* 1 and 2 leave: room for 4 and 5 */
    assert_int_equal(s.oldest, 3);
    assert_int_equal(add(&s, file_at(4, 3, 1)), 1);
    assert_int_equal(add(&s, file_at(5, 4, 1)), 1);
    assert_int_equal(add(&s, file_at(6, 5, 1)), AFTP_ERR_MALFORMED);
    assert_int_equal(add(&s, file_at(1, 0, 1)), 0); /* a late repeat */
    assert_null(aftp_stream_find(&s, 1));
    assert_int_equal(aftp_stream_find(&s, 4)->id, 4); /* in slot 1's place */
    aftp_stream_free(&s);
}

/* What each verdict does, and what a hostile receiver's verdicts get. */
static void test_verdict_rules(void **state)
{
    (void)state;
    static const aftp_wire_range held_ok[] = {{0, 1}, {2, 1}};
    static const aftp_wire_range held_past[] = {{1, 3}};
    aftp_stream s;
    aftp_stream_entry out;
    assert_int_equal(aftp_stream_init(&s, 16), AFTP_OK);
    assert_int_equal(add(&s, file_at(1, 0, 3)), 1);
    assert_int_equal(add(&s, dir_at(2, 3)), 1);
    aftp_wire_entry plain = file_at(3, 3, 2);
    plain.flags = 0; /* neither RESUME nor SYNC */
    assert_int_equal(add(&s, plain), 1);
    assert_int_equal(add(&s, file_at(4, 5, 1)), 1);

    assert_int_equal(verdict(&s, 9, AFTP_WIRE_VERDICT_SEND, 0, NULL, 0, &out),
                     AFTP_ERR_MALFORMED);
    expect_why("a verdict SEND for entry 9, which was never offered");
    assert_int_equal(verdict(&s, 1, AFTP_WIRE_VERDICT_RESUME, 0, held_past, 1, &out),
                     AFTP_ERR_MALFORMED);
    expect_why("entry 1 has 3 blocks, but its verdict says block 3 is held");
    assert_int_equal(verdict(&s, 2, AFTP_WIRE_VERDICT_RESUME, 0, held_ok, 2, &out),
                     AFTP_ERR_MALFORMED);
    assert_int_equal(verdict(&s, 3, AFTP_WIRE_VERDICT_SKIP, 0, NULL, 0, &out),
                     AFTP_ERR_MALFORMED);
    expect_why("a verdict SKIP for entry 3, which did not allow it");
    assert_int_equal(verdict(&s, 3, AFTP_WIRE_VERDICT_RESUME, 0, held_ok, 2, &out),
                     AFTP_ERR_MALFORMED);

    assert_int_equal(verdict(&s, 1, AFTP_WIRE_VERDICT_RESUME, 0, held_ok, 2, &out), 1);
    assert_int_equal(out.state, AFTP_STREAM_ACCEPTED);
    assert_int_equal(verdict(&s, 1, AFTP_WIRE_VERDICT_RESUME, 0, held_ok, 2, &out), 0);
    assert_int_equal(verdict(&s, 1, AFTP_WIRE_VERDICT_SKIP, 0, NULL, 0, &out),
                     AFTP_ERR_MALFORMED);
    expect_why("entry 1 has the verdict RESUME, and now SKIP");

    /* A placed directory ends at its verdict; the oldest is still file 1. */
    assert_int_equal(verdict(&s, 2, AFTP_WIRE_VERDICT_SEND, 0, NULL, 0, &out), 1);
    assert_int_equal(out.state, AFTP_STREAM_ENDED);
    assert_int_equal(s.oldest, 1);
    assert_int_equal(verdict(&s, 3, AFTP_WIRE_VERDICT_REFUSED, AFTP_WIRE_ERR_FILE_EXISTS, NULL,
                             0, &out), 1);
    assert_int_equal(out.error, AFTP_WIRE_ERR_FILE_EXISTS);
    assert_int_equal(out.base, 3);
    assert_int_equal(out.blocks, 2);
    /* File 1's result ends it, and with it the run of ended entries. */
    aftp_stream_end(&s, 1, 0);
    assert_int_equal(s.oldest, 4);
    assert_int_equal(s.oldest_base, 5);
    assert_int_equal(verdict(&s, 2, AFTP_WIRE_VERDICT_SEND, 0, NULL, 0, &out), 0); /* late */
    aftp_stream_free(&s);
}

/* A decoded RESUME's held ranges are read from their encoded bytes. */
static void test_verdict_ranges_from_the_wire(void **state)
{
    (void)state;
    static const aftp_wire_range held[] = {{0, 2}, {5, 1}};
    uint8_t buf[128];
    size_t len;
    aftp_wire_verdict v = {1, AFTP_WIRE_VERDICT_RESUME, 0, 2, held, NULL, 0};
    aftp_wire_packet p = {.hdr = {AFTP_WIRE_VERSION, AFTP_WIRE_VERDICTS, 0, 1, 1},
                          .u.verdicts = {1, &v, NULL, 0}};
    assert_int_equal(aftp_wire_encode(&p, buf, sizeof buf, &len), AFTP_OK);
    aftp_wire_packet got;
    assert_int_equal(aftp_wire_decode(buf, len, &got), AFTP_OK);
    aftp_wire_record_iter it;
    aftp_wire_verdict d;
    aftp_wire_verdicts_iter_init(&it, &got.u.verdicts);
    assert_int_equal(aftp_wire_verdicts_next(&it, &d), 1);

    aftp_stream s;
    aftp_stream_entry out;
    assert_int_equal(aftp_stream_init(&s, 4), AFTP_OK);
    assert_int_equal(add(&s, file_at(1, 0, 5)), 1); /* block 5 is past its end */
    assert_int_equal(aftp_stream_verdict(&s, &d, &out, why, sizeof why), AFTP_ERR_MALFORMED);
    expect_why("entry 1 has 5 blocks, but its verdict says block 5 is held");
    aftp_stream_free(&s);
    assert_int_equal(aftp_stream_init(&s, 4), AFTP_OK);
    assert_int_equal(add(&s, file_at(1, 0, 6)), 1);
    assert_int_equal(aftp_stream_verdict(&s, &d, &out, why, sizeof why), 1);
    aftp_stream_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_bounds),
        cmocka_unit_test(test_entries_in_order_and_locate),
        cmocka_unit_test(test_out_of_order_batches_checked_when_neighbours_meet),
        cmocka_unit_test(test_bases_must_be_laid_end_to_end),
        cmocka_unit_test(test_entry_window),
        cmocka_unit_test(test_verdict_rules),
        cmocka_unit_test(test_verdict_ranges_from_the_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
