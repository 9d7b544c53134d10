/*
 * A single-producer single-consumer FIFO of variable-size records (a packet
 * and when to deliver it) in one caller-provided area, shared by two threads
 * without locks: the ingest thread files packets, the dispatch thread takes
 * them out when due.
 *
 * head and tail are byte positions that only grow (their offset in the area
 * is the position modulo its size); each has one writer, which publishes it
 * with a release store, and the other side reads it with an acquire load, so
 * a record's bytes are visible before its position is. A record that would
 * cross the end of the area is placed at offset 0 and a wrap marker is left
 * where it would have started.
 */
#ifndef LINKEMU_RING_H
#define LINKEMU_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Records and positions are multiples of this, so a wrap marker (a header
 * alone) always fits in the room left before the end of the area. */
#define LINKEMU_RING_ALIGN 16u
#define LINKEMU_RING_WRAP UINT32_MAX /* a record's len: the rest of the area is unused */

struct linkemu_record {
    uint64_t due_ns;
    uint32_t len;    /* packet bytes in data[]; LINKEMU_RING_WRAP marks a wrap */
    uint32_t copies;
    uint8_t data[];
};

struct linkemu_ring {
    uint8_t *buf;
    size_t size;
    /* each on its own cache line: the two threads write one each */
    _Alignas(64) _Atomic size_t head; /* written by the consumer */
    size_t consumer_pos;               /* consumer's copy of head, past a wrap */
    _Alignas(64) _Atomic size_t tail; /* written by the producer */
    size_t reserved_pos;               /* producer: where the reserved record starts */
};

/* Bytes a record of `len` packet bytes occupies. */
size_t linkemu_record_size(uint32_t len);

/* Uses `size` bytes at `buf` (16-byte aligned; the size is rounded down to a
 * multiple of 16). A ring of size 0 is always full and always empty. */
void linkemu_ring_init(struct linkemu_ring *r, uint8_t *buf, size_t size);

/* Producer: room for a record of `len` packet bytes, or NULL when full. The
 * record becomes visible to the consumer at linkemu_ring_commit(). */
struct linkemu_record *linkemu_ring_reserve(struct linkemu_ring *r, uint32_t len);
void linkemu_ring_commit(struct linkemu_ring *r, const struct linkemu_record *rec);

/* Consumer: the oldest record, or NULL when empty; pop releases it. */
struct linkemu_record *linkemu_ring_peek(struct linkemu_ring *r);
void linkemu_ring_pop(struct linkemu_ring *r);

#endif /* LINKEMU_RING_H */
