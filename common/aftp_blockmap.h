/*
 * The receiver's map of the blocks it holds, in memory that does not grow
 * with the file: a sliding window (spec sections 9.5 and 14.7).
 *
 * Every block below `base`, the first missing block, is held. The window
 * is the W blocks (a multiple of 64) of [window_start, window_start + W),
 * where window_start is base rounded down to a multiple of 64; a ring of
 * R <= W bits records its first R blocks, block i at ring bit i mod R (the
 * window's blocks beyond are all missing until the ring grows). A block at
 * or beyond the window's end cannot be recorded: the receiver drops its
 * DATA, the sender sees it as lost and repairs it once base has moved on.
 * A file of fewer than W blocks gets a ring of its own size, so the window
 * covers it whole.
 *
 * Memory for a file: the ring starts at AFTP_BLOCKMAP_FIRST_RING bits (or
 * the file's size when smaller) and doubles when a block is marked beyond
 * what it records, up to min(block count, W) bits: at most that / 8 bytes
 * plus a 1/64 summary (aftp_bitmap), whatever the file's size. The
 * receiver's default W of 2^27 blocks reaches 176 GiB ahead of the first
 * missing block at the default 1408-byte block and would take 16 MiB +
 * 256 KiB at once; grown on demand, a session whose blocks arrive in order
 * holds 4 KiB + 64 bytes, and only a sender running that far ahead of a
 * hole makes it grow.
 */
#ifndef AFTP_BLOCKMAP_H
#define AFTP_BLOCKMAP_H

#include <stdint.h>

#include "common/aftp_bitmap.h"

/* The ring's first size, in bits (4 KiB: 46 MB of 1408-byte blocks). */
#define AFTP_BLOCKMAP_FIRST_RING (UINT64_C(1) << 15)

typedef struct aftp_blockmap {
    aftp_bitmap ring;   /* bit (i mod ring.nbits) for block i of [window_start, + ring.nbits) */
    uint64_t window;    /* W, rounded: the most ring.nbits grows to */
    uint64_t blocks;    /* the file's block count */
    uint64_t base;      /* first missing block (blocks when all are held) */
    uint64_t held;      /* blocks held in all */
} aftp_blockmap;

/* A map of `blocks` missing blocks whose window is `window` blocks
 * (rounded up to a multiple of 64, at least 64). AFTP_OK,
 * AFTP_ERR_INVALID_ARGUMENT (window 0) or AFTP_ERR_NO_MEMORY. */
int aftp_blockmap_init(aftp_blockmap *m, uint64_t blocks, uint64_t window);
void aftp_blockmap_free(aftp_blockmap *m); /* safe on a zeroed or freed map */

/* 1 when block i is held; 0 when missing, beyond the window or out of range. */
int aftp_blockmap_test(const aftp_blockmap *m, uint64_t i);
/* The first block the window cannot record (at most the block count). */
uint64_t aftp_blockmap_window_end(const aftp_blockmap *m);
/* Marks block i held; 1 when it was missing and within the window, else 0. */
int aftp_blockmap_set(aftp_blockmap *m, uint64_t i);
/* Marks held every block of [from, to) (to clamped to the block count)
 * that the map can record, in one call however long the range: what a
 * verdict makes held in pipelined mode (a skipped file, a resumed file's
 * held ranges; spec section 9.14.2). When the range reaches down to the
 * first missing block, base passes the whole range, beyond the window
 * too; otherwise the blocks at or beyond the window's end stay missing,
 * and the caller marks them again once the window has moved there.
 * Returns the number of blocks newly held. */
uint64_t aftp_blockmap_set_range(aftp_blockmap *m, uint64_t from, uint64_t to);

uint64_t aftp_blockmap_count(const aftp_blockmap *m);
uint64_t aftp_blockmap_first_clear(const aftp_blockmap *m);
/* Lowest missing (resp. held) block in [from, limit), or limit when none;
 * limit is clamped to the block count. Blocks beyond the window are
 * missing. */
uint64_t aftp_blockmap_next_clear(const aftp_blockmap *m, uint64_t from, uint64_t limit);
uint64_t aftp_blockmap_next_set(const aftp_blockmap *m, uint64_t from, uint64_t limit);
/* Bytes the map holds now (its ring grows as blocks reach further). */
uint64_t aftp_blockmap_bytes(const aftp_blockmap *m);

#endif /* AFTP_BLOCKMAP_H */
