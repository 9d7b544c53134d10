/*
 * The sender's queue of blocks to retransmit: FIFO order, each block at
 * most once (a bit per block says "queued"), bounded so memory never
 * depends on how much is lost. A block that does not fit is simply not
 * queued: the peer keeps listing it missing and it is queued later.
 */
#ifndef AFTP_REPAIRQ_H
#define AFTP_REPAIRQ_H

#include <stdint.h>

#include "common/aftp_bitmap.h"

typedef struct aftp_repairq {
    aftp_bitmap queued;
    uint64_t *fifo;
    uint64_t cap;   /* power of two */
    uint64_t head;  /* next to pop */
    uint64_t tail;  /* next free */
} aftp_repairq;

/* capacity: most blocks queued at once (rounded up to a power of two). */
int aftp_repairq_init(aftp_repairq *q, uint64_t capacity);
void aftp_repairq_free(aftp_repairq *q);
/* Start a file of block_count blocks (the queue empties). */
int aftp_repairq_reset(aftp_repairq *q, uint64_t block_count);

int aftp_repairq_contains(const aftp_repairq *q, uint64_t block);
/* Queues block; 1 when queued, 0 when already queued, full or out of range. */
int aftp_repairq_push(aftp_repairq *q, uint64_t block);
/* 1 and the oldest queued block, or 0 when empty. */
int aftp_repairq_pop(aftp_repairq *q, uint64_t *block);
uint64_t aftp_repairq_len(const aftp_repairq *q);

#endif /* AFTP_REPAIRQ_H */
