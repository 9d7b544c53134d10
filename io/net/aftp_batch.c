#include "aftp_batch.h"

size_t aftp_batch_plan(const aftp_datagram *dgs, size_t n, int gso, aftp_batch_group *out)
{
    size_t groups = 0;
    size_t i = 0;
    while (i < n) {
        aftp_batch_group g = {.first = i, .count = 1, .seg_size = aftp_batch_len(&dgs[i])};
        size_t bytes = g.seg_size;
        i++;
        while (gso && i < n && g.count < AFTP_BATCH_MAX_SEGMENTS) {
            size_t len = aftp_batch_len(&dgs[i]);
            if (len > g.seg_size || bytes + len > AFTP_BATCH_MAX_BYTES)
                break;
            g.count++;
            bytes += len;
            i++;
            if (len < g.seg_size)
                break; /* a shorter datagram can only close a group */
        }
        out[groups++] = g;
    }
    return groups;
}
