/*
 * A fixed-size bit set over block indices: the receiver's "blocks held" map
 * and the sender's "queued for repair" map.
 *
 * One bit per block plus a summary bit per 64-bit word ("word full"), so a
 * 4 GiB file in 1412-byte blocks costs ~390 KiB and the search for the next
 * clear bit skips 4096 held blocks per summary word. The first clear bit is
 * kept up to date incrementally (amortised O(1) per set).
 */
#ifndef AFTP_BITMAP_H
#define AFTP_BITMAP_H

#include <stdint.h>

typedef struct aftp_bitmap {
    uint64_t *words;      /* bit set = present; bits past nbits are kept set */
    uint64_t *full;       /* bit w set when words[w] is all ones */
    uint64_t nbits;
    uint64_t nwords;
    uint64_t count;       /* bits set below nbits */
    uint64_t first_clear; /* lowest clear index, nbits when none */
} aftp_bitmap;

/* Allocates a map of nbits clear bits. AFTP_OK or AFTP_ERR_NO_MEMORY. */
int aftp_bitmap_init(aftp_bitmap *b, uint64_t nbits);
void aftp_bitmap_free(aftp_bitmap *b); /* safe on a zeroed or freed map */

/* 1 when bit i is set; 0 when clear or out of range. */
int aftp_bitmap_test(const aftp_bitmap *b, uint64_t i);
/* Sets bit i; returns 1 when it was clear, 0 when already set or out of range. */
int aftp_bitmap_set(aftp_bitmap *b, uint64_t i);
/* Clears bit i (no effect out of range). */
void aftp_bitmap_clear(aftp_bitmap *b, uint64_t i);
/* Clears the bits in [from, limit), a word at a time; limit is clamped to
 * nbits. */
void aftp_bitmap_clear_range(aftp_bitmap *b, uint64_t from, uint64_t limit);

uint64_t aftp_bitmap_count(const aftp_bitmap *b);
/* Bytes the map allocated (bits and summary). */
uint64_t aftp_bitmap_bytes(const aftp_bitmap *b);
uint64_t aftp_bitmap_first_clear(const aftp_bitmap *b);
/* Lowest clear (resp. set) index in [from, limit), or limit when none;
 * limit is clamped to nbits. */
uint64_t aftp_bitmap_next_clear(const aftp_bitmap *b, uint64_t from, uint64_t limit);
uint64_t aftp_bitmap_next_set(const aftp_bitmap *b, uint64_t from, uint64_t limit);

#endif /* AFTP_BITMAP_H */
