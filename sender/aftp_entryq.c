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
    free(e->hole_bytes);
    free(e->holes);
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
    e->hole_bytes = info->hole_count > 0 ? calloc(info->hole_count, sizeof *e->hole_bytes) : NULL;
    if (e->hole_bytes != NULL)
        memcpy(e->hole_bytes, info->holes, info->hole_count * sizeof *e->hole_bytes);
    if (e->path == NULL || (info->target != NULL && e->target == NULL) ||
        (info->hole_count > 0 && e->hole_bytes == NULL)) {
        release(e);
        return AFTP_ERR_NO_MEMORY;
    }
    e->info = *info;
    e->info.file.path = e->path;
    e->info.target = e->target;
    e->info.holes = e->hole_bytes;
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

static int ranges_contain(const aftp_wire_range *ranges, size_t count, uint64_t block)
{
    size_t lo = 0, hi = count;
    while (lo < hi) { /* ranges ascend: binary search */
        size_t mid = lo + (hi - lo) / 2;
        const aftp_wire_range *r = &ranges[mid];
        if (block < r->start)
            hi = mid;
        else if (block - r->start >= r->len)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

int aftp_entryq_resumed(const aftp_entryq_item *e, uint64_t file_block)
{
    return ranges_contain(e->held, e->held_count, file_block);
}

int aftp_entryq_in_hole(const aftp_entryq_item *e, uint64_t file_block)
{
    return ranges_contain(e->holes, e->hole_count, file_block);
}

int aftp_entryq_is_held(const aftp_entryq_item *e, uint64_t file_block)
{
    return aftp_entryq_resumed(e, file_block) || aftp_entryq_in_hole(e, file_block);
}

/* The blocks wholly inside byte extent h of the file: [*first, *end). A
 * block partly data is not among them; the last block ends at the size. */
static void blocks_within(const aftp_file_info *f, const aftp_byte_range *h, uint64_t *first,
                          uint64_t *end)
{
    uint64_t bs = f->block_size, stop = h->off + h->len;
    *first = h->off / bs + (h->off % bs != 0);
    *end = stop >= f->size ? aftp_wire_block_count(f->size, f->block_size) : stop / bs;
}

/* The hole list from the byte extents (adjacent blocks joined). */
static void holes_from_bytes(aftp_entryq_item *e)
{
    e->holes = calloc(e->info.hole_count, sizeof *e->holes);
    if (e->holes == NULL)
        return;
    for (size_t i = 0; i < e->info.hole_count; i++) {
        uint64_t first, end;
        blocks_within(&e->info.file, &e->hole_bytes[i], &first, &end);
        aftp_wire_range *last = e->hole_count ? &e->holes[e->hole_count - 1] : NULL;
        if (end <= first)
            continue;
        if (last != NULL && last->start + last->len >= first) /* joins, or overlaps */
            last->len = end - last->start;
        else
            e->holes[e->hole_count++] = (aftp_wire_range){first, end - first};
    }
}

/* Sends the smallest hole as data: out of the list. */
static void drop_smallest_hole(aftp_entryq_item *e)
{
    size_t min = 0;
    for (size_t i = 1; i < e->hole_count; i++)
        if (e->holes[i].len < e->holes[min].len)
            min = i;
    memmove(e->holes + min, e->holes + min + 1, (e->hole_count - min - 1) * sizeof *e->holes);
    e->hole_count--;
}

void aftp_entryq_place_holes(aftp_entryq_item *e, size_t room)
{
    if (e->hole_bytes == NULL || e->info.kind != AFTP_ENTRY_FILE)
        return;
    holes_from_bytes(e);
    free(e->hole_bytes);
    e->hole_bytes = NULL;
    e->info.holes = NULL;
    e->info.hole_count = 0;
    aftp_wire_entry rec;
    for (;;) {
        aftp_entryq_record(e, &rec);
        if (e->hole_count == 0 ||
            (e->hole_count <= AFTP_WIRE_MAX_HOLES && aftp_wire_entry_len(&rec) <= room))
            return;
        drop_smallest_hole(e);
    }
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
                            (f->overwrite ? AFTP_WIRE_ENTRY_OVERWRITE : 0) |
                            (e->hole_count > 0 ? AFTP_WIRE_ENTRY_HOLES : 0));
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
    out->hole_count = (uint16_t)e->hole_count;
    out->holes = e->holes;
}
