/* Bounded FIFO of blocks to retransmit, without duplicates (aftp_repairq.h). */
#include "sender/aftp_repairq.h"

#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

int aftp_repairq_init(aftp_repairq *q, uint64_t capacity)
{
    memset(q, 0, sizeof *q);
    if (capacity > AFTP_REPAIRQ_MAX_CAPACITY)
        return AFTP_ERR_INVALID_ARGUMENT;
    q->cap = 1;
    while (q->cap < capacity)
        q->cap <<= 1;
    q->fifo = malloc((size_t)q->cap * sizeof *q->fifo);
    q->index = calloc((size_t)q->cap, sizeof *q->index);
    if (q->fifo == NULL || q->index == NULL) {
        aftp_repairq_free(q);
        return AFTP_ERR_NO_MEMORY;
    }
    return AFTP_OK;
}

void aftp_repairq_free(aftp_repairq *q)
{
    free(q->fifo);
    free(q->index);
    q->fifo = NULL;
    q->index = NULL;
}

void aftp_repairq_reset(aftp_repairq *q, uint64_t block_count)
{
    memset(q->index, 0, (size_t)q->cap * sizeof *q->index);
    q->head = q->tail = 0;
    q->block_count = block_count;
}

static uint32_t *index_of(const aftp_repairq *q, uint64_t block)
{
    return &q->index[block & (q->cap - 1)];
}

int aftp_repairq_contains(const aftp_repairq *q, uint64_t block)
{
    uint32_t entry = *index_of(q, block);
    return entry != 0 && q->fifo[entry - 1] == block;
}

uint64_t aftp_repairq_len(const aftp_repairq *q)
{
    return q->tail - q->head;
}

int aftp_repairq_push(aftp_repairq *q, uint64_t block)
{
    uint32_t *entry = index_of(q, block);
    if (block >= q->block_count || aftp_repairq_len(q) == q->cap || *entry != 0)
        return 0;
    uint64_t slot = q->tail++ & (q->cap - 1);
    q->fifo[slot] = block;
    *entry = (uint32_t)slot + 1;
    return 1;
}

int aftp_repairq_pop(aftp_repairq *q, uint64_t *block)
{
    if (q->head == q->tail)
        return 0;
    *block = q->fifo[q->head++ & (q->cap - 1)];
    *index_of(q, *block) = 0;
    return 1;
}

int aftp_repairq_peek(const aftp_repairq *q, uint64_t *block)
{
    if (q->head == q->tail)
        return 0;
    *block = q->fifo[q->head & (q->cap - 1)];
    return 1;
}
