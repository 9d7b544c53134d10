/* Ring of recent packets with a block index (aftp_sentlog.h). */
#include "common/aftp_sentlog.h"

#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

static uint64_t pow2_at_least(uint64_t n)
{
    uint64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

int aftp_sentlog_init(aftp_sentlog *l, uint64_t packets)
{
    memset(l, 0, sizeof *l);
    uint64_t slots = pow2_at_least(packets);
    if (slots < AFTP_SENTLOG_MIN_SLOTS)
        slots = AFTP_SENTLOG_MIN_SLOTS;
    if (slots > AFTP_SENTLOG_MAX_SLOTS)
        slots = AFTP_SENTLOG_MAX_SLOTS;
    l->ring = calloc((size_t)slots, sizeof *l->ring);
    l->index = calloc((size_t)slots * 2, sizeof *l->index);
    if (l->ring == NULL || l->index == NULL) {
        aftp_sentlog_free(l);
        return AFTP_ERR_NO_MEMORY;
    }
    l->mask = slots - 1;
    l->index_mask = slots * 2 - 1;
    return AFTP_OK;
}

void aftp_sentlog_free(aftp_sentlog *l)
{
    free(l->ring);
    free(l->index);
    memset(l, 0, sizeof *l);
}

size_t aftp_sentlog_slots(const aftp_sentlog *l)
{
    return (size_t)(l->mask + 1);
}

/* Blocks in flight are a sliding window of mostly consecutive numbers, so
 * a direct-mapped index (block modulo its size) places them without
 * collisions and is touched sequentially, cache line after cache line. Two
 * live blocks collide only when a whole index size apart; the newer one
 * then takes the entry and the older counts as "record gone". */
static uint32_t *entry_of(const aftp_sentlog *l, uint64_t block)
{
    return &l->index[block & l->index_mask];
}

/* The ring slot of block's latest transmission, or -1. */
static int64_t slot_of(const aftp_sentlog *l, uint64_t block)
{
    uint32_t e = *entry_of(l, block);
    if (e == 0 || l->ring[e - 1].block != block)
        return -1;
    return (int64_t)e - 1;
}

/* Drops the record of the oldest packet, and its index entry. */
static void drop_tail(aftp_sentlog *l)
{
    uint64_t slot = l->tail_pn & l->mask;
    aftp_sentlog_rec *rec = &l->ring[slot];
    if (rec->block != AFTP_SENTLOG_NO_BLOCK && slot_of(l, rec->block) == (int64_t)slot)
        *entry_of(l, rec->block) = 0;
    rec->block = AFTP_SENTLOG_NO_BLOCK;
    l->tail_pn++;
}

void aftp_sentlog_forget_block(aftp_sentlog *l, uint64_t block)
{
    int64_t slot = slot_of(l, block);
    if (slot < 0)
        return;
    l->ring[slot].block = AFTP_SENTLOG_NO_BLOCK;
    *entry_of(l, block) = 0;
}

void aftp_sentlog_add(aftp_sentlog *l, uint64_t sent_ns, uint64_t block)
{
    if (l->head_pn - l->tail_pn > l->mask)
        drop_tail(l);
    uint64_t slot = l->head_pn & l->mask;
    l->ring[slot].sent_ns = sent_ns;
    l->ring[slot].block = AFTP_SENTLOG_NO_BLOCK;
    l->head_pn++;
    l->data_count += block != AFTP_SENTLOG_NO_BLOCK;
    l->ring[slot].data_upto = l->data_count;
    if (block == AFTP_SENTLOG_NO_BLOCK)
        return;
    aftp_sentlog_forget_block(l, block);
    l->ring[slot].block = block;
    *entry_of(l, block) = (uint32_t)(slot + 1);
}

int aftp_sentlog_sent_time(const aftp_sentlog *l, uint64_t pn, uint64_t *sent_ns)
{
    if (pn >= l->head_pn || l->head_pn - pn > l->mask + 1)
        return 0; /* not sent, or its slot holds a newer packet */
    *sent_ns = l->ring[pn & l->mask].sent_ns;
    return 1;
}

int aftp_sentlog_data_upto(const aftp_sentlog *l, uint64_t pn, uint64_t *count)
{
    if (pn >= l->head_pn || l->head_pn - pn > l->mask + 1)
        return 0; /* not sent, or its slot holds a newer packet */
    *count = l->ring[pn & l->mask].data_upto;
    return 1;
}

int aftp_sentlog_find_block(const aftp_sentlog *l, uint64_t block, uint64_t *pn,
                            uint64_t *sent_ns)
{
    int64_t found = slot_of(l, block);
    if (found < 0)
        return 0;
    uint64_t slot = (uint64_t)found;
    /* The one packet number in [tail, head) that maps to this slot. */
    *pn = l->tail_pn + ((slot - l->tail_pn) & l->mask);
    *sent_ns = l->ring[slot].sent_ns;
    return 1;
}

void aftp_sentlog_retire(aftp_sentlog *l, uint64_t acked_below)
{
    while (l->tail_pn < l->head_pn) {
        uint64_t block = l->ring[l->tail_pn & l->mask].block;
        if (block != AFTP_SENTLOG_NO_BLOCK && block >= acked_below)
            break;
        drop_tail(l);
    }
}
