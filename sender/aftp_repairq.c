/* Bounded FIFO of blocks to retransmit, without duplicates (aftp_repairq.h). */
#include "sender/aftp_repairq.h"

#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

int aftp_repairq_init(aftp_repairq *q, uint64_t capacity)
{
    memset(q, 0, sizeof *q);
    q->cap = 1;
    while (q->cap < capacity)
        q->cap <<= 1;
    q->fifo = malloc((size_t)q->cap * sizeof *q->fifo);
    if (q->fifo == NULL)
        return AFTP_ERR_NO_MEMORY;
    return aftp_bitmap_init(&q->queued, 0);
}

void aftp_repairq_free(aftp_repairq *q)
{
    aftp_bitmap_free(&q->queued);
    free(q->fifo);
    q->fifo = NULL;
}

int aftp_repairq_reset(aftp_repairq *q, uint64_t block_count)
{
    aftp_bitmap_free(&q->queued);
    q->head = q->tail = 0;
    return aftp_bitmap_init(&q->queued, block_count);
}

int aftp_repairq_contains(const aftp_repairq *q, uint64_t block)
{
    return aftp_bitmap_test(&q->queued, block);
}

uint64_t aftp_repairq_len(const aftp_repairq *q)
{
    return q->tail - q->head;
}

int aftp_repairq_push(aftp_repairq *q, uint64_t block)
{
    if (aftp_repairq_len(q) == q->cap || !aftp_bitmap_set(&q->queued, block))
        return 0;
    q->fifo[q->tail++ & (q->cap - 1)] = block;
    return 1;
}

int aftp_repairq_pop(aftp_repairq *q, uint64_t *block)
{
    if (q->head == q->tail)
        return 0;
    *block = q->fifo[q->head++ & (q->cap - 1)];
    aftp_bitmap_clear(&q->queued, *block);
    return 1;
}
