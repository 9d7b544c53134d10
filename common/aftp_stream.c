/* The entry table of pipelined mode (aftp_stream.h). */
#include "common/aftp_stream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

int aftp_stream_init(aftp_stream *s, uint32_t window)
{
    memset(s, 0, sizeof *s);
    if (window == 0 || window > AFTP_WIRE_MAX_WINDOW)
        return AFTP_ERR_INVALID_ARGUMENT;
    s->slots = calloc(window, sizeof *s->slots);
    if (s->slots == NULL)
        return AFTP_ERR_NO_MEMORY;
    s->window = window;
    s->oldest = 1;
    return AFTP_OK;
}

void aftp_stream_free(aftp_stream *s)
{
    free(s->slots);
    memset(s, 0, sizeof *s);
}

static aftp_stream_entry *slot(const aftp_stream *s, uint32_t id)
{
    return &s->slots[id % s->window];
}

/* Ids at or beyond this are outside the entry window. */
static uint64_t window_end(const aftp_stream *s)
{
    return (uint64_t)s->oldest + s->window;
}

aftp_stream_entry *aftp_stream_find(aftp_stream *s, uint32_t id)
{
    if (s->slots == NULL || id < s->oldest || id >= window_end(s))
        return NULL;
    aftp_stream_entry *e = slot(s, id);
    return e->state != AFTP_STREAM_EMPTY && e->id == id ? e : NULL;
}

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t cap, const char *fmt,
                                                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why != NULL && cap > 0)
        vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return AFTP_ERR_MALFORMED;
}

/* Where the entry before `id` ends, when that is known: 1 and *end. */
static int end_before(aftp_stream *s, uint32_t id, uint64_t *end)
{
    if (id == s->oldest) {
        *end = s->oldest_base;
        return 1;
    }
    const aftp_stream_entry *prev = aftp_stream_find(s, id - 1);
    if (prev == NULL)
        return 0;
    *end = prev->base + prev->blocks;
    return 1;
}

int aftp_stream_add(aftp_stream *s, const aftp_wire_entry *e, char *why, size_t why_cap)
{
    uint64_t blocks = aftp_wire_entry_blocks(e), prev_end;
    if (e->entry_id < s->oldest || aftp_stream_find(s, e->entry_id) != NULL)
        return 0;
    if (e->entry_id >= window_end(s))
        return refuse(why, why_cap,
                      "entry %u is beyond the window of %u entries from entry %u, the oldest "
                      "unfinished one",
                      e->entry_id, s->window, s->oldest);
    if (end_before(s, e->entry_id, &prev_end) && e->base_block != prev_end)
        return refuse(why, why_cap,
                      "entry %u begins at stream block %llu, but the entries before it end "
                      "at block %llu",
                      e->entry_id, (unsigned long long)e->base_block,
                      (unsigned long long)prev_end);
    const aftp_stream_entry *next = aftp_stream_find(s, e->entry_id + 1);
    if (next != NULL && e->base_block + blocks != next->base)
        return refuse(why, why_cap,
                      "entry %u ends at stream block %llu, but entry %u begins at block %llu",
                      e->entry_id, (unsigned long long)(e->base_block + blocks),
                      e->entry_id + 1, (unsigned long long)next->base);
    *slot(s, e->entry_id) = (aftp_stream_entry){e->entry_id, e->kind, AFTP_STREAM_OFFERED, 0,
                                                e->flags, 0, e->base_block, blocks};
    if (e->entry_id > s->newest)
        s->newest = e->entry_id;
    return 1;
}

static const char *verdict_name(uint8_t v)
{
    static const char *const names[] = {"SEND", "RESUME", "SKIP", "REFUSED"};
    return v <= AFTP_WIRE_VERDICT_MAX ? names[v] : "unknown";
}

/* RESUME and SKIP only where the entry allowed them (spec 6.14). */
static int verdict_fits(const aftp_stream_entry *e, uint8_t verdict)
{
    if (verdict == AFTP_WIRE_VERDICT_RESUME)
        return e->kind == AFTP_WIRE_KIND_FILE && (e->flags & AFTP_WIRE_ENTRY_RESUME);
    if (verdict == AFTP_WIRE_VERDICT_SKIP)
        return e->kind == AFTP_WIRE_KIND_FILE && (e->flags & AFTP_WIRE_ENTRY_SYNC);
    return 1;
}

/* The end of the last held range (ranges ascend), 0 when there is none. */
static uint64_t held_end(const aftp_wire_verdict *v)
{
    aftp_wire_range rg = {0, 0};
    if (v->range_count == 0)
        return 0;
    if (v->ranges != NULL) {
        rg = v->ranges[v->range_count - 1];
    } else {
        aftp_wire_range_iter it;
        aftp_wire_verdict_ranges_init(&it, v);
        while (aftp_wire_ranges_next(&it, &rg))
            ;
    }
    return rg.start + rg.len;
}

int aftp_stream_verdict(aftp_stream *s, const aftp_wire_verdict *v, aftp_stream_entry *out,
                        char *why, size_t why_cap)
{
    aftp_stream_entry *e = aftp_stream_find(s, v->entry_id);
    if (e == NULL && v->entry_id < s->oldest)
        return 0;
    if (e == NULL)
        return refuse(why, why_cap, "a verdict %s for entry %u, which was never offered",
                      verdict_name(v->verdict), v->entry_id);
    if (e->state != AFTP_STREAM_OFFERED) {
        if (e->verdict == v->verdict)
            return 0;
        return refuse(why, why_cap, "entry %u has the verdict %s, and now %s", e->id,
                      verdict_name(e->verdict), verdict_name(v->verdict));
    }
    if (!verdict_fits(e, v->verdict))
        return refuse(why, why_cap, "a verdict %s for entry %u, which did not allow it",
                      verdict_name(v->verdict), e->id);
    if (held_end(v) > e->blocks)
        return refuse(why, why_cap,
                      "entry %u has %llu blocks, but its verdict says block %llu is held", e->id,
                      (unsigned long long)e->blocks, (unsigned long long)(held_end(v) - 1));
    e->verdict = v->verdict;
    e->error = v->error;
    int accepted = e->kind == AFTP_WIRE_KIND_FILE && (v->verdict == AFTP_WIRE_VERDICT_SEND ||
                                                      v->verdict == AFTP_WIRE_VERDICT_RESUME);
    e->state = accepted ? AFTP_STREAM_ACCEPTED : AFTP_STREAM_ENDED;
    *out = *e;
    if (!accepted)
        aftp_stream_end(s, e->id, e->error);
    return 1;
}

void aftp_stream_end(aftp_stream *s, uint32_t id, uint16_t error)
{
    aftp_stream_entry *e = aftp_stream_find(s, id);
    if (e == NULL)
        return;
    e->state = AFTP_STREAM_ENDED;
    e->error = error;
    /* Ended entries in a row from the oldest are forgotten; their slots
     * take the ids W further on. */
    while ((e = aftp_stream_find(s, s->oldest)) != NULL && e->state == AFTP_STREAM_ENDED) {
        s->oldest_base = e->base + e->blocks;
        e->state = AFTP_STREAM_EMPTY;
        s->oldest++;
    }
}

aftp_stream_entry *aftp_stream_locate(aftp_stream *s, uint64_t block)
{
    uint64_t lo = s->oldest, hi = s->newest;
    while (lo <= hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        aftp_stream_entry *e = aftp_stream_find(s, (uint32_t)mid);
        if (e == NULL)
            return NULL;
        if (block < e->base)
            hi = mid - 1;
        else if (block - e->base >= e->blocks)
            lo = mid + 1;
        else
            return e;
    }
    return NULL;
}
