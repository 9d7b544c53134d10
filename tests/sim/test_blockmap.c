/* aftp_blockmap: the receiver's sliding-window block map, checked against
 * a plain byte-per-block model of the same rules under random operations,
 * and its memory for a 16 TiB file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "common/aftp_blockmap.h"
#include "sim_link.h"

/* The rules, plainly: held blocks, base = first missing, a window of w
 * blocks from base rounded down to 64. */
typedef struct model {
    uint8_t *held;
    uint64_t blocks, window, base, count;
} model;

static uint64_t model_window_end(const model *md)
{
    uint64_t end = (md->base & ~UINT64_C(63)) + md->window;
    return end < md->blocks ? end : md->blocks;
}

static int model_set(model *md, uint64_t i)
{
    if (i >= md->blocks || i < md->base || i >= model_window_end(md) || md->held[i])
        return 0;
    md->held[i] = 1;
    md->count++;
    while (md->base < md->blocks && md->held[md->base])
        md->base++;
    return 1;
}

/* A range: what the window can record, and all of it when it reaches
 * down to base (then base passes it, beyond the window too). */
static uint64_t model_set_range(model *md, uint64_t from, uint64_t to)
{
    uint64_t newly = 0, end = model_window_end(md);
    int from_base = from <= md->base && to > md->base;
    if (to > md->blocks)
        to = md->blocks;
    for (uint64_t i = from < md->base ? md->base : from; i < to; i++)
        if (!md->held[i] && (from_base || i < end)) {
            md->held[i] = 1;
            newly++;
        }
    md->count += newly;
    while (md->base < md->blocks && md->held[md->base])
        md->base++;
    return newly;
}

static uint64_t model_next(const model *md, uint64_t from, uint64_t limit, int want_held)
{
    if (limit > md->blocks)
        limit = md->blocks;
    for (uint64_t i = from; i < limit; i++)
        if (md->held[i] == want_held)
            return i;
    return limit;
}

static void check_queries(const aftp_blockmap *m, const model *md, uint64_t *rng)
{
    assert_int_equal(aftp_blockmap_count(m), md->count);
    assert_int_equal(aftp_blockmap_first_clear(m), md->base);
    assert_int_equal(aftp_blockmap_window_end(m), model_window_end(md));
    for (int q = 0; q < 8; q++) {
        uint64_t from = sim_rand(rng) % (md->blocks + 10);
        uint64_t limit = from + sim_rand(rng) % (2 * md->window + 10);
        assert_int_equal(aftp_blockmap_test(m, from), from < md->blocks && md->held[from]);
        assert_int_equal(aftp_blockmap_next_clear(m, from, limit), model_next(md, from, limit, 0));
        assert_int_equal(aftp_blockmap_next_set(m, from, limit), model_next(md, from, limit, 1));
    }
}

/* A map and its model, both empty, of `blocks` blocks and window `window`. */
static model model_open(aftp_blockmap *m, uint64_t blocks, uint64_t window)
{
    model md = {.held = calloc(blocks + 1, 1), .blocks = blocks,
                .window = (window + 63) & ~UINT64_C(63)};
    assert_non_null(md.held);
    assert_int_equal(aftp_blockmap_init(m, blocks, window), AFTP_OK);
    return md;
}

/* Random sets around the window (some beyond it, some below base) until
 * every block is held; the map agrees with the model after each. */
static void run_against_model(uint64_t blocks, uint64_t window, uint64_t seed)
{
    aftp_blockmap m;
    model md = model_open(&m, blocks, window);
    uint64_t bytes = aftp_blockmap_bytes(&m);
    uint64_t rng = seed;
    while (md.base < blocks) {
        uint64_t reach = md.base + sim_rand(&rng) % (md.window + md.window / 2 + 1);
        uint64_t i = sim_rand(&rng) % 8 == 0 ? md.base : reach - (reach >= 70 ? 70 : 0);
        assert_int_equal(aftp_blockmap_set(&m, i), model_set(&md, i));
        check_queries(&m, &md, &rng);
    }
    assert_int_equal(aftp_blockmap_count(&m), blocks);
    /* the ring grows only while the window is larger than it */
    if (md.window <= AFTP_BLOCKMAP_FIRST_RING)
        assert_int_equal(aftp_blockmap_bytes(&m), bytes);
    aftp_blockmap_free(&m);
    free(md.held);
}

/* The same with ranges among the single blocks: some from base, some
 * above it, some past the window's end, some over held blocks. */
static void run_ranges_against_model(uint64_t blocks, uint64_t window, uint64_t seed)
{
    aftp_blockmap m;
    model md = model_open(&m, blocks, window);
    uint64_t rng = seed;
    while (md.base < blocks) {
        uint64_t from = md.base + sim_rand(&rng) % (md.window + md.window / 2 + 1);
        if (sim_rand(&rng) % 4 == 0)
            from = md.base - (md.base > 0 && sim_rand(&rng) % 2 ? 1 : 0);
        uint64_t to = from + sim_rand(&rng) % (md.window / 2 + 3);
        if (sim_rand(&rng) % 3 == 0)
            assert_int_equal(aftp_blockmap_set(&m, from), model_set(&md, from));
        else
            assert_int_equal(aftp_blockmap_set_range(&m, from, to), model_set_range(&md, from, to));
        check_queries(&m, &md, &rng);
    }
    assert_int_equal(aftp_blockmap_count(&m), blocks);
    aftp_blockmap_free(&m);
    free(md.held);
}

static void test_ranges_match_model(void **state)
{
    (void)state;
    run_ranges_against_model(5000, 128, 11);
    run_ranges_against_model(3001, 200, 12);
    run_ranges_against_model(300, 1 << 20, 13);
}

/* A skipped 16 TiB file between two small ones, in one stream: marking it
 * held from base costs its window's words, not its 12.5 billion blocks,
 * and base lands on the next file's first block. A range above base that
 * runs past the window keeps its far part missing. */
static void test_range_from_base_passes_the_window(void **state)
{
    (void)state;
    const uint64_t big = ((UINT64_C(16) << 40) + 1407) / 1408;
    const uint64_t blocks = 10 + big + 10;
    aftp_blockmap m;
    assert_int_equal(aftp_blockmap_init(&m, blocks, 1 << 12), AFTP_OK);
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(aftp_blockmap_set(&m, i), 1);
    uint64_t end = aftp_blockmap_window_end(&m);
    assert_int_equal(aftp_blockmap_set_range(&m, 12, big), end - 12);
    assert_int_equal(aftp_blockmap_test(&m, end), 0);
    assert_int_equal(aftp_blockmap_first_clear(&m), 10);
    /* Blocks 10 and 11, then the rest of the big file, from base. */
    assert_int_equal(aftp_blockmap_set_range(&m, 10, 10 + big), 2 + (10 + big - end));
    assert_int_equal(aftp_blockmap_first_clear(&m), 10 + big);
    assert_int_equal(aftp_blockmap_count(&m), 10 + big);
    assert_int_equal(aftp_blockmap_set(&m, 10 + big), 1);
    assert_int_equal(aftp_blockmap_set_range(&m, 0, blocks), 9);
    assert_int_equal(aftp_blockmap_first_clear(&m), blocks);
    aftp_blockmap_free(&m);
}

static void test_matches_model_small_window(void **state)
{
    (void)state;
    run_against_model(5000, 128, 1);
    run_against_model(5003, 100, 2); /* window rounded up to 128 */
    run_against_model(777, 64, 3);
}

static void test_matches_model_window_covers_file(void **state)
{
    (void)state;
    run_against_model(300, 1 << 20, 4);
    run_against_model(1, 64, 5);
}

/* A window larger than the ring's first size: the ring grows (its held
 * bits moved to their new places) as the marks reach further. */
static void test_matches_model_ring_grows(void **state)
{
    (void)state;
    run_against_model(AFTP_BLOCKMAP_FIRST_RING * 5 / 4, AFTP_BLOCKMAP_FIRST_RING * 2, 6);
    run_ranges_against_model(AFTP_BLOCKMAP_FIRST_RING * 5 / 4, AFTP_BLOCKMAP_FIRST_RING + 64, 14);
}

static void test_empty_and_bad_arguments(void **state)
{
    (void)state;
    aftp_blockmap m;
    assert_int_equal(aftp_blockmap_init(&m, 10, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_blockmap_init(&m, 0, 64), AFTP_OK);
    assert_int_equal(aftp_blockmap_set(&m, 0), 0);
    assert_int_equal(aftp_blockmap_test(&m, 0), 0);
    assert_int_equal(aftp_blockmap_first_clear(&m), 0);
    assert_int_equal(aftp_blockmap_next_clear(&m, 0, 10), 0);
    assert_int_equal(aftp_blockmap_next_set(&m, 0, 10), 0);
    aftp_blockmap_free(&m);
    aftp_blockmap_free(&m); /* freeing twice is harmless */
}

/* A 16 TiB file in 1408-byte blocks (12.5 billion blocks): the map takes
 * its first 4 KiB while the blocks come in order, at most the window's
 * 16 MiB + 256 KiB once a mark reaches the window's end, never the 1.5 GiB
 * a bit per block would; the last block is beyond the window, so missing,
 * and reported so. */
static void test_huge_file_memory(void **state)
{
    (void)state;
    const uint64_t blocks = ((UINT64_C(16) << 40) + 1407) / 1408;
    const uint64_t window = UINT64_C(1) << 27;
    aftp_blockmap m;
    assert_int_equal(aftp_blockmap_init(&m, blocks, window), AFTP_OK);
    const uint64_t first = AFTP_BLOCKMAP_FIRST_RING / 8 + AFTP_BLOCKMAP_FIRST_RING / 64 / 8;
    assert_int_equal(aftp_blockmap_bytes(&m), first);
    for (uint64_t i = 0; i < 10000; i++)
        assert_int_equal(aftp_blockmap_set(&m, i), 1);
    assert_int_equal(aftp_blockmap_bytes(&m), first);
    assert_int_equal(aftp_blockmap_set(&m, blocks - 1), 0);
    assert_int_equal(aftp_blockmap_test(&m, blocks - 1), 0);
    assert_int_equal(aftp_blockmap_first_clear(&m), 10000);
    uint64_t end = aftp_blockmap_window_end(&m);
    assert_int_equal(end, (10000 & ~63) + window);
    assert_int_equal(aftp_blockmap_next_clear(&m, end - 5, blocks), end - 5);
    assert_int_equal(aftp_blockmap_next_clear(&m, blocks - 1, blocks), blocks - 1);
    assert_int_equal(aftp_blockmap_next_set(&m, 10000, blocks), blocks);
    /* The window's last block can be held, the next one cannot. */
    assert_int_equal(aftp_blockmap_set(&m, end - 1), 1);
    assert_int_equal(aftp_blockmap_bytes(&m), window / 8 + window / 64 / 8);
    assert_int_equal(aftp_blockmap_test(&m, 9999), 1);
    assert_int_equal(aftp_blockmap_test(&m, end - 1), 1);
    assert_int_equal(aftp_blockmap_set(&m, end), 0);
    assert_int_equal(aftp_blockmap_next_set(&m, 10000, blocks), end - 1);
    aftp_blockmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_model_small_window),
        cmocka_unit_test(test_matches_model_window_covers_file),
        cmocka_unit_test(test_matches_model_ring_grows),
        cmocka_unit_test(test_empty_and_bad_arguments),
        cmocka_unit_test(test_huge_file_memory),
        cmocka_unit_test(test_ranges_match_model),
        cmocka_unit_test(test_range_from_base_passes_the_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
