/* The end of a whole transfer, measured (sim_tail.h). */
#include "sim_tail.h"

#include <stdlib.h>
#include <string.h>

#include "proto/aftp_wire.h"

uint64_t sim_tail_data_block(const aftp_datagram *dg)
{
    const uint8_t *p = dg->head + AFTP_WIRE_HEADER_LEN + 4; /* after the file id */
    uint64_t b = 0;
    for (int i = 0; i < 8; i++)
        b = b << 8 | p[i];
    return b;
}

int sim_tail_drop_first_sends(void *ctx, const aftp_datagram *dg)
{
    sim_tail_drop *d = ctx;
    if (dg->head[1] != AFTP_WIRE_DATA || sim_tail_data_block(dg) != d->block)
        return 1;
    return ++d->seen > d->drops;
}

void sim_tail_record_data(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    sim_tail *t = ctx;
    if (dg->head[1] != AFTP_WIRE_DATA)
        return;
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->at = realloc(t->at, t->cap * sizeof *t->at);
        t->block = realloc(t->block, t->cap * sizeof *t->block);
        if (t->at == NULL || t->block == NULL)
            abort();
    }
    t->at[t->count] = now;
    t->block[t->count++] = sim_tail_data_block(dg);
}

int sim_tail_record_result(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    sim_tail *t = ctx;
    if (len > 1 && pkt[1] == AFTP_WIRE_FILE_RESULT)
        t->result_at = now;
    return 1;
}

void sim_tail_free(sim_tail *t)
{
    free(t->at);
    free(t->block);
    memset(t, 0, sizeof *t);
}

/* How often each block went out: counts[b], blocks up to the largest. */
static unsigned *send_counts(const sim_tail *t, uint64_t *nblocks)
{
    uint64_t n = 0;
    for (size_t i = 0; i < t->count; i++)
        if (t->block[i] + 1 > n)
            n = t->block[i] + 1;
    unsigned *counts = calloc(n ? n : 1, sizeof *counts);
    if (counts == NULL)
        abort();
    for (size_t i = 0; i < t->count; i++)
        counts[t->block[i]]++;
    *nblocks = n;
    return counts;
}

void sim_tail_split_of(const sim_tail *t, uint64_t closed_at, sim_tail_split *out)
{
    memset(out, 0, sizeof *out);
    out->closed_at = closed_at;
    out->result_at = t->result_at;
    size_t last_new = 0;
    uint64_t top = 0;
    for (size_t i = 0; i < t->count; i++) {
        if (i == 0 || t->block[i] > top) {
            top = t->block[i];
            last_new = i;
        }
    }
    if (t->count == 0)
        return;
    out->last_new_at = t->at[last_new];
    out->last_data_at = t->at[t->count - 1];
    out->tail_resends = t->count - 1 - last_new;
    if (last_new + 1 < t->count)
        out->first_resend_at = t->at[last_new + 1];
    uint64_t nblocks;
    unsigned *counts = send_counts(t, &nblocks);
    for (uint64_t b = 0; b < nblocks; b++)
        if (counts[b] > out->most_sends)
            out->most_sends = counts[b];
    free(counts);
}

void sim_tail_attach(sim_cfg *c, sim_tail *t)
{
    c->fwd_tap = sim_tail_record_data;
    c->fwd_tap_ctx = t;
    c->rev_tap = sim_tail_record_result;
    c->rev_tap_ctx = t;
}
