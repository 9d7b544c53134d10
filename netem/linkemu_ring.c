#include "linkemu_ring.h"

size_t linkemu_record_size(uint32_t len)
{
    return (sizeof(struct linkemu_record) + len + LINKEMU_RING_ALIGN - 1) &
           ~(size_t)(LINKEMU_RING_ALIGN - 1);
}

void linkemu_ring_init(struct linkemu_ring *r, uint8_t *buf, size_t size)
{
    r->buf = buf;
    r->size = size & ~(size_t)(LINKEMU_RING_ALIGN - 1);
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->consumer_pos = r->reserved_pos = 0;
}

struct linkemu_record *linkemu_ring_reserve(struct linkemu_ring *r, uint32_t len)
{
    size_t need = linkemu_record_size(len);
    size_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (r->size == 0)
        return NULL;
    size_t off = pos % r->size, to_end = r->size - off;
    size_t skip = to_end < need ? to_end : 0; /* the record starts at offset 0 */
    if (r->size - (pos - head) < skip + need)
        return NULL;
    if (skip) {
        /* Published with the record by the commit's release store. */
        ((struct linkemu_record *)(r->buf + off))->len = LINKEMU_RING_WRAP;
    }
    r->reserved_pos = pos + skip;
    return (struct linkemu_record *)(r->buf + r->reserved_pos % r->size);
}

void linkemu_ring_commit(struct linkemu_ring *r, const struct linkemu_record *rec)
{
    atomic_store_explicit(&r->tail, r->reserved_pos + linkemu_record_size(rec->len),
                          memory_order_release);
}

struct linkemu_record *linkemu_ring_peek(struct linkemu_ring *r)
{
    size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (r->consumer_pos == tail)
        return NULL;
    size_t off = r->consumer_pos % r->size;
    struct linkemu_record *rec = (struct linkemu_record *)(r->buf + off);
    if (rec->len != LINKEMU_RING_WRAP)
        return rec;
    /* A marker is always followed by the record it moved, published with it. */
    r->consumer_pos += r->size - off;
    return (struct linkemu_record *)r->buf;
}

void linkemu_ring_pop(struct linkemu_ring *r)
{
    struct linkemu_record *rec = linkemu_ring_peek(r);
    r->consumer_pos += linkemu_record_size(rec->len);
    atomic_store_explicit(&r->head, r->consumer_pos, memory_order_release);
}
