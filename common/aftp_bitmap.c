/* Block bit set with a "word full" summary level (aftp_bitmap.h). */
#include "common/aftp_bitmap.h"

#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

#define ALL_ONES (~UINT64_C(0))

static uint64_t div64_up(uint64_t n)
{
    return n / 64 + (n % 64 != 0);
}

static uint64_t summary_words(const aftp_bitmap *b)
{
    return div64_up(b->nwords);
}

/* Ones from bit `from` (0..63) upward. */
static uint64_t mask_from(uint64_t from)
{
    return ALL_ONES << (from & 63);
}

static void mark_word_full(aftp_bitmap *b, uint64_t w)
{
    b->full[w >> 6] |= UINT64_C(1) << (w & 63);
}

int aftp_bitmap_init(aftp_bitmap *b, uint64_t nbits)
{
    memset(b, 0, sizeof *b);
    b->nbits = nbits;
    /* At least one word, so searches never special-case an empty map. */
    b->nwords = nbits == 0 ? 1 : div64_up(nbits);
    if (b->nwords > SIZE_MAX / sizeof(uint64_t))
        return AFTP_ERR_NO_MEMORY;
    b->words = calloc((size_t)b->nwords, sizeof(uint64_t));
    b->full = calloc((size_t)summary_words(b), sizeof(uint64_t));
    if (b->words == NULL || b->full == NULL) {
        aftp_bitmap_free(b);
        return AFTP_ERR_NO_MEMORY;
    }
    /* Bits past nbits (and words past nwords) count as present so the
     * searches stop by themselves at the end of the map. */
    if (nbits % 64 != 0 || nbits == 0)
        b->words[b->nwords - 1] = nbits == 0 ? ALL_ONES : mask_from(nbits);
    if (b->words[b->nwords - 1] == ALL_ONES)
        mark_word_full(b, b->nwords - 1);
    if (b->nwords % 64 != 0)
        b->full[summary_words(b) - 1] |= mask_from(b->nwords);
    return AFTP_OK;
}

void aftp_bitmap_free(aftp_bitmap *b)
{
    free(b->words);
    free(b->full);
    b->words = NULL;
    b->full = NULL;
    b->nbits = b->nwords = b->count = b->first_clear = 0;
}

int aftp_bitmap_test(const aftp_bitmap *b, uint64_t i)
{
    if (i >= b->nbits)
        return 0;
    return (int)((b->words[i >> 6] >> (i & 63)) & 1);
}

/* First word index >= w that is not full, never beyond word_limit. */
static uint64_t next_open_word(const aftp_bitmap *b, uint64_t w, uint64_t word_limit)
{
    if (w >= word_limit)
        return word_limit;
    uint64_t s = w >> 6;
    uint64_t open = ~b->full[s] & mask_from(w);
    while (open == 0) {
        s++;
        if ((s << 6) >= word_limit)
            return word_limit;
        open = ~b->full[s];
    }
    uint64_t found = (s << 6) + (uint64_t)__builtin_ctzll(open);
    return found < word_limit ? found : word_limit;
}

/* Lowest index in [from, limit) whose bit, XORed with `flip`, is set:
 * flip all ones looks for clear bits (skipping full words through the
 * summary), flip zero for set bits. */
static uint64_t find_bit(const aftp_bitmap *b, uint64_t from, uint64_t limit, uint64_t flip)
{
    if (limit > b->nbits)
        limit = b->nbits;
    if (from >= limit)
        return limit;
    uint64_t word_limit = div64_up(limit);
    uint64_t w = from >> 6;
    uint64_t hits = (b->words[w] ^ flip) & mask_from(from);
    while (hits == 0) {
        w = flip ? next_open_word(b, w + 1, word_limit) : w + 1;
        if (w >= word_limit)
            return limit;
        hits = b->words[w] ^ flip;
    }
    uint64_t i = (w << 6) + (uint64_t)__builtin_ctzll(hits);
    return i < limit ? i : limit;
}

uint64_t aftp_bitmap_next_clear(const aftp_bitmap *b, uint64_t from, uint64_t limit)
{
    return find_bit(b, from, limit, ALL_ONES);
}

uint64_t aftp_bitmap_next_set(const aftp_bitmap *b, uint64_t from, uint64_t limit)
{
    return find_bit(b, from, limit, 0);
}

int aftp_bitmap_set(aftp_bitmap *b, uint64_t i)
{
    if (i >= b->nbits)
        return 0;
    uint64_t *word = &b->words[i >> 6];
    uint64_t bit = UINT64_C(1) << (i & 63);
    if (*word & bit)
        return 0;
    *word |= bit;
    b->count++;
    if (*word == ALL_ONES)
        mark_word_full(b, i >> 6);
    if (i == b->first_clear)
        b->first_clear = aftp_bitmap_next_clear(b, i + 1, b->nbits);
    return 1;
}

void aftp_bitmap_clear(aftp_bitmap *b, uint64_t i)
{
    if (!aftp_bitmap_test(b, i))
        return;
    uint64_t w = i >> 6;
    b->words[w] &= ~(UINT64_C(1) << (i & 63));
    b->full[w >> 6] &= ~(UINT64_C(1) << (w & 63));
    b->count--;
    if (i < b->first_clear)
        b->first_clear = i;
}

void aftp_bitmap_clear_range(aftp_bitmap *b, uint64_t from, uint64_t limit)
{
    if (limit > b->nbits)
        limit = b->nbits;
    if (from >= limit)
        return;
    /* Every bit below first_clear is set, so clearing `from` lowers it. */
    if (from < b->first_clear)
        b->first_clear = from;
    for (uint64_t w = from >> 6; w <= (limit - 1) >> 6; w++) {
        uint64_t mask = w == from >> 6 ? mask_from(from) : ALL_ONES;
        if (w == (limit - 1) >> 6 && (limit & 63) != 0)
            mask &= ~mask_from(limit);
        b->count -= (uint64_t)__builtin_popcountll(b->words[w] & mask);
        b->words[w] &= ~mask;
        b->full[w >> 6] &= ~(UINT64_C(1) << (w & 63));
    }
}

uint64_t aftp_bitmap_bytes(const aftp_bitmap *b)
{
    return (b->nwords + summary_words(b)) * sizeof(uint64_t);
}

uint64_t aftp_bitmap_count(const aftp_bitmap *b)
{
    return b->count;
}

uint64_t aftp_bitmap_first_clear(const aftp_bitmap *b)
{
    return b->first_clear;
}
