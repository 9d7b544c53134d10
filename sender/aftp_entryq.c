/* The sender's ring of pipelined entries (aftp_entryq.h). */
#include "sender/aftp_entryq.h"

#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

int aftp_entryq_init(aftp_entryq *q, uint32_t cap)
{
    memset(q, 0, sizeof *q);
    q->slots = calloc(cap, sizeof *q->slots);
    if (q->slots == NULL)
        return AFTP_ERR_NO_MEMORY;
    q->cap = cap;
    q->oldest = 1;
    return AFTP_OK;
}

static void release(aftp_entryq_item *e)
{
    free(e->path);
    free(e->target);
    free(e->held);
    memset(e, 0, sizeof *e);
}

void aftp_entryq_free(aftp_entryq *q)
{
    for (uint32_t i = 0; q->slots != NULL && i < q->cap; i++)
        release(&q->slots[i]);
    free(q->slots);
    memset(q, 0, sizeof *q);
}

aftp_entryq_item *aftp_entryq_find(aftp_entryq *q, uint32_t id)
{
    if (q->slots == NULL || id < q->oldest || id > q->newest)
        return NULL;
    return &q->slots[id % q->cap];
}

int aftp_entryq_add(aftp_entryq *q, const aftp_entry_info *info)
{
    uint32_t id = q->newest + 1;
    if ((uint64_t)id >= (uint64_t)q->oldest + q->cap)
        return AFTP_ERR_LIMIT;
    aftp_entryq_item *e = &q->slots[id % q->cap];
    e->path = strdup(info->file.path);
    e->target = info->target != NULL ? strdup(info->target) : NULL;
    if (e->path == NULL || (info->target != NULL && e->target == NULL)) {
        release(e);
        return AFTP_ERR_NO_MEMORY;
    }
    e->info = *info;
    e->info.file.path = e->path;
    e->info.target = e->target;
    e->state = AFTP_ENTRYQ_QUEUED;
    q->newest = id;
    return AFTP_OK;
}

int aftp_entryq_hold(aftp_entryq_item *e, const aftp_wire_verdict *v)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    e->held = calloc(v->range_count ? v->range_count : 1, sizeof *e->held);
    if (e->held == NULL)
        return AFTP_ERR_NO_MEMORY;
    aftp_wire_verdict_ranges_init(&it, v);
    while (e->held_count < v->range_count && aftp_wire_ranges_next(&it, &rg)) {
        e->held[e->held_count++] = rg;
        e->held_blocks += rg.len;
    }
    return AFTP_OK;
}

int aftp_entryq_is_held(const aftp_entryq_item *e, uint64_t file_block)
{
    size_t lo = 0, hi = e->held_count;
    while (lo < hi) { /* ranges ascend: binary search */
        size_t mid = lo + (hi - lo) / 2;
        const aftp_wire_range *r = &e->held[mid];
        if (file_block < r->start)
            hi = mid;
        else if (file_block - r->start >= r->len)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

void aftp_entryq_end(aftp_entryq *q, uint32_t id)
{
    aftp_entryq_item *e = aftp_entryq_find(q, id);
    if (e == NULL)
        return;
    e->state = AFTP_ENTRYQ_ENDED;
    while ((e = aftp_entryq_find(q, q->oldest)) != NULL && e->state == AFTP_ENTRYQ_ENDED) {
        release(e);
        q->oldest++;
    }
}

void aftp_entryq_record(const aftp_entryq_item *e, aftp_wire_entry *out)
{
    const aftp_file_info *f = &e->info.file;
    memset(out, 0, sizeof *out);
    out->entry_id = f->file_id;
    out->kind = (uint8_t)e->info.kind;
    out->flags = (uint16_t)((e->info.flags & (AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC |
                                              AFTP_ENTRY_CHECKSUM)) |
                            (f->overwrite ? AFTP_WIRE_ENTRY_OVERWRITE : 0));
    out->size = f->size;
    out->mtime_ns = f->mtime_ns;
    out->mode = f->mode;
    out->base_block = e->base;
    out->block_size = f->block_size;
    out->source_id = e->info.source_id;
    if (e->info.flags & AFTP_ENTRY_CHECKSUM)
        memcpy(out->digest, e->info.digest, AFTP_DIGEST_LEN);
    out->path_len = (uint16_t)strlen(e->path);
    out->path = (const uint8_t *)e->path;
    out->target_len = e->target != NULL ? (uint16_t)strlen(e->target) : 0;
    out->target = (const uint8_t *)e->target;
}
