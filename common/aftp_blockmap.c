/* The receiver's sliding-window block map (aftp_blockmap.h). */
#include "common/aftp_blockmap.h"

#include <string.h>

#include "aftp/aftp_error.h"

static uint64_t round_up64(uint64_t n)
{
    return (n + 63) & ~UINT64_C(63);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

int aftp_blockmap_init(aftp_blockmap *m, uint64_t blocks, uint64_t window)
{
    memset(m, 0, sizeof *m);
    if (window == 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    /* Rounding keeps every 64-block word whole in the ring. */
    m->window = min_u64(round_up64(blocks), round_up64(window));
    m->blocks = blocks;
    return aftp_bitmap_init(&m->ring, min_u64(m->window, AFTP_BLOCKMAP_FIRST_RING));
}

void aftp_blockmap_free(aftp_blockmap *m)
{
    aftp_bitmap_free(&m->ring);
    memset(m, 0, sizeof *m);
}

static uint64_t window_start(const aftp_blockmap *m)
{
    return m->base & ~UINT64_C(63);
}

uint64_t aftp_blockmap_window_end(const aftp_blockmap *m)
{
    return min_u64(window_start(m) + m->window, m->blocks);
}

/* The end of what the ring records now; from there to the window's end
 * every block is missing (none has been marked there yet). */
static uint64_t ring_end(const aftp_blockmap *m)
{
    return min_u64(window_start(m) + m->ring.nbits, m->blocks);
}

int aftp_blockmap_test(const aftp_blockmap *m, uint64_t i)
{
    if (i < m->base)
        return i < m->blocks;
    if (i >= ring_end(m))
        return 0;
    return aftp_bitmap_test(&m->ring, i % m->ring.nbits);
}

/* Lowest block in [from, to) of the window whose bit is clear (want_set
 * 0) or set (1), or `to` when none: the ring's at most two stretches. */
static uint64_t ring_find(const aftp_blockmap *m, uint64_t from, uint64_t to, int want_set)
{
    uint64_t size = m->ring.nbits;
    while (from < to) {
        uint64_t pos = from % size;
        uint64_t stretch = min_u64(to - from, size - pos);
        uint64_t hit = want_set ? aftp_bitmap_next_set(&m->ring, pos, pos + stretch)
                                : aftp_bitmap_next_clear(&m->ring, pos, pos + stretch);
        if (hit < pos + stretch)
            return from + (hit - pos);
        from += stretch;
    }
    return to;
}

uint64_t aftp_blockmap_next_clear(const aftp_blockmap *m, uint64_t from, uint64_t limit)
{
    limit = min_u64(limit, m->blocks);
    if (from < m->base)
        from = m->base;
    if (from >= limit)
        return limit;
    /* Nothing beyond the ring is held: its first block is missing. */
    uint64_t end = min_u64(limit, ring_end(m));
    return from >= end ? from : ring_find(m, from, end, 0);
}

uint64_t aftp_blockmap_next_set(const aftp_blockmap *m, uint64_t from, uint64_t limit)
{
    limit = min_u64(limit, m->blocks);
    if (from >= limit || from < m->base)
        return min_u64(from, limit);
    uint64_t end = min_u64(limit, ring_end(m));
    uint64_t hit = from >= end ? end : ring_find(m, from, end, 1);
    return hit < end ? hit : limit;
}

/* The ring grows (doubling, up to the window) to record blocks up to
 * `last`, its held bits moved to their places in the larger ring. Out of
 * memory, the window shrinks to the ring instead: blocks beyond it are
 * then dropped as the window's are. 1 when `last` can be recorded. */
static int reach(aftp_blockmap *m, uint64_t last)
{
    uint64_t end = ring_end(m);
    if (last < end)
        return 1;
    uint64_t size = m->ring.nbits;
    while (size < last - window_start(m) + 1 && size < m->window)
        size *= 2;
    aftp_bitmap bigger;
    if (aftp_bitmap_init(&bigger, min_u64(size, m->window)) != AFTP_OK) {
        m->window = m->ring.nbits;
        return 0;
    }
    for (uint64_t i = aftp_blockmap_next_set(m, m->base, end); i < end;
         i = aftp_blockmap_next_set(m, i + 1, end))
        aftp_bitmap_set(&bigger, i % bigger.nbits);
    aftp_bitmap_free(&m->ring);
    m->ring = bigger;
    return 1;
}

/* base moved on to new_base: the ring's words of blocks now below the
 * window start are cleared, to record the blocks W further on (which the
 * old window could not hold, so they are all missing). */
static void slide(aftp_blockmap *m, uint64_t new_base)
{
    uint64_t size = m->ring.nbits;
    uint64_t from = window_start(m);
    uint64_t to = min_u64(new_base & ~UINT64_C(63), from + size);
    m->base = new_base;
    while (from < to) {
        uint64_t pos = from % size;
        uint64_t stretch = min_u64(to - from, size - pos);
        aftp_bitmap_clear_range(&m->ring, pos, pos + stretch);
        from += stretch;
    }
}

int aftp_blockmap_set(aftp_blockmap *m, uint64_t i)
{
    if (i < m->base || i >= aftp_blockmap_window_end(m) || !reach(m, i) ||
        !aftp_bitmap_set(&m->ring, i % m->ring.nbits))
        return 0;
    m->held++;
    if (i == m->base)
        slide(m, aftp_blockmap_next_clear(m, i + 1, m->blocks));
    return 1;
}

uint64_t aftp_blockmap_set_range(aftp_blockmap *m, uint64_t from, uint64_t to)
{
    uint64_t newly = 0;
    to = min_u64(to, m->blocks);
    if (from < m->base)
        from = m->base;
    if (from >= to)
        return 0;
    /* The ring's part first, bit by bit over the missing blocks only (the
     * held ones are skipped a summary word at a time); base is moved once
     * at the end rather than at each bit. */
    uint64_t in_window = min_u64(to, aftp_blockmap_window_end(m));
    if (in_window > from && !reach(m, in_window - 1))
        in_window = min_u64(to, aftp_blockmap_window_end(m)); /* the window shrank */
    for (uint64_t i = aftp_blockmap_next_clear(m, from, in_window); i < in_window;
         i = aftp_blockmap_next_clear(m, i + 1, in_window)) {
        aftp_bitmap_set(&m->ring, i % m->ring.nbits);
        newly++;
    }
    if (from == m->base) {
        /* Nothing at or beyond the window's end was held: all of it is new. */
        newly += to - in_window;
        slide(m, aftp_blockmap_next_clear(m, to, m->blocks));
    }
    m->held += newly;
    return newly;
}

uint64_t aftp_blockmap_count(const aftp_blockmap *m)
{
    return m->held;
}

uint64_t aftp_blockmap_first_clear(const aftp_blockmap *m)
{
    return m->base;
}

uint64_t aftp_blockmap_bytes(const aftp_blockmap *m)
{
    return aftp_bitmap_bytes(&m->ring);
}
