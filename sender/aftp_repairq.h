/*
 * The sender's queue of blocks to retransmit: FIFO order, each block at
 * most once, bounded so memory never depends on how much is lost nor on
 * the file's size (a file may have 2^56 blocks).
 *
 * A direct-mapped index (block modulo the capacity) gives the FIFO slot of
 * a queued block, so "is it queued?" is O(1) without a bit per block:
 * 12 bytes per slot of capacity in all. A block that does not fit (the
 * queue is full, or its index entry is held by another queued block a
 * multiple of the capacity away) is simply not queued: the peer keeps
 * listing it missing and it is queued once there is room.
 */
#ifndef AFTP_REPAIRQ_H
#define AFTP_REPAIRQ_H

#include <stdint.h>

#define AFTP_REPAIRQ_MAX_CAPACITY (UINT64_C(1) << 31)

typedef struct aftp_repairq {
    uint64_t *fifo;
    uint32_t *index;      /* block % cap -> FIFO slot + 1; 0 = none */
    uint64_t cap;         /* power of two */
    uint64_t head;        /* next to pop */
    uint64_t tail;        /* next free */
    uint64_t block_count; /* of the current file: blocks at or above are refused */
} aftp_repairq;

/* capacity: most blocks queued at once (rounded up to a power of two, at
 * most AFTP_REPAIRQ_MAX_CAPACITY). AFTP_OK, AFTP_ERR_INVALID_ARGUMENT or
 * AFTP_ERR_NO_MEMORY. */
int aftp_repairq_init(aftp_repairq *q, uint64_t capacity);
void aftp_repairq_free(aftp_repairq *q);
/* Start a file of block_count blocks (the queue empties; no allocation). */
void aftp_repairq_reset(aftp_repairq *q, uint64_t block_count);

int aftp_repairq_contains(const aftp_repairq *q, uint64_t block);
/* Queues block; 1 when queued, 0 when already queued, no room or out of range. */
int aftp_repairq_push(aftp_repairq *q, uint64_t block);
/* 1 and the oldest queued block, or 0 when empty. */
int aftp_repairq_pop(aftp_repairq *q, uint64_t *block);
/* The same without removing it. */
int aftp_repairq_peek(const aftp_repairq *q, uint64_t *block);
uint64_t aftp_repairq_len(const aftp_repairq *q);

#endif /* AFTP_REPAIRQ_H */
