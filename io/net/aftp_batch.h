/*
 * Grouping of outgoing datagrams for UDP GSO: consecutive datagrams of one
 * size travel as one "super-datagram" that the kernel splits every
 * `seg_size` bytes (UDP_SEGMENT). A group ends at a size change, at
 * AFTP_BATCH_MAX_SEGMENTS datagrams or AFTP_BATCH_MAX_BYTES bytes; its last
 * datagram may be shorter than the others (the kernel allows that), never
 * longer. Pure logic, no socket.
 */
#ifndef AFTP_BATCH_H
#define AFTP_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"

#define AFTP_BATCH_MAX_SEGMENTS 64u  /* UDP_MAX_SEGMENTS of older kernels */
#define AFTP_BATCH_MAX_BYTES 65507u  /* one IPv4 datagram's payload limit */

typedef struct aftp_batch_group {
    size_t first;     /* index of the group's first datagram */
    size_t count;     /* datagrams in the group (1: no GSO needed) */
    size_t seg_size;  /* size of every datagram but maybe the last */
} aftp_batch_group;

static inline size_t aftp_batch_len(const aftp_datagram *dg)
{
    return dg->head_len + dg->payload_len;
}

/* Splits dgs[0..n) into groups written to out (room for n groups) and
 * returns how many. With `gso` 0 every datagram is its own group. */
size_t aftp_batch_plan(const aftp_datagram *dgs, size_t n, int gso, aftp_batch_group *out);

#endif /* AFTP_BATCH_H */
