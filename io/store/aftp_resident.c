#include "aftp_resident.h"

#include <stddef.h>
#include <sys/mman.h>

#define PAGE UINT64_C(4096)
/* What one stray touch may map: a fault maps the whole page-cache folio
 * it hits, and folios reach 2 MiB (PMD size) on current kernels. */
#define STRAY_COST (UINT64_C(2) << 20)

void aftp_resident_init(aftp_resident *r, uint8_t *base, uint64_t size, uint64_t keep,
                        int populate_advice)
{
    *r = (aftp_resident){.base = base, .size = size, .keep = keep,
                         .populate_advice = populate_advice};
}

/* Prefaults the next stretch once the furthest touch gets within one
 * stretch of the end of what is prefaulted: it starts below
 * high + AHEAD and is 2 x AHEAD long, within AFTP_RESIDENT_REACH. */
static void populate_ahead(aftp_resident *r)
{
    if (r->populate_advice == 0 || r->high + AFTP_RESIDENT_AHEAD <= r->populated ||
        r->populated >= r->size)
        return;
    uint64_t from = r->populated > (r->high & ~(PAGE - 1)) ? r->populated : r->high & ~(PAGE - 1);
    uint64_t len = r->size - from < 2 * AFTP_RESIDENT_AHEAD ? r->size - from
                                                             : 2 * AFTP_RESIDENT_AHEAD;
    /* Kernels before 5.14 do not know the advice: stop asking. */
    if (madvise(r->base + from, len, r->populate_advice) != 0)
        r->populate_advice = 0;
    r->populated = from + len;
}

/* Releases the whole pages inside [lo, hi). */
static void release(aftp_resident *r, uint64_t lo, uint64_t hi)
{
    lo = (lo + PAGE - 1) & ~(PAGE - 1);
    hi &= ~(PAGE - 1);
    if (hi <= lo)
        return;
    madvise(r->base + lo, hi - lo, MADV_DONTNEED);
    r->release_calls++;
}

static void release_strays(aftp_resident *r)
{
    /* Whole folios went in: widen to their (largest) alignment. */
    uint64_t lo = r->stray_lo & ~(STRAY_COST - 1);
    uint64_t hi = (r->stray_hi + STRAY_COST - 1) & ~(STRAY_COST - 1);
    release(r, lo, hi < r->released ? hi : r->released);
    r->stray_lo = r->stray_hi = r->stray_bytes = 0;
}

void aftp_resident_touch(aftp_resident *r, uint64_t off, uint64_t len)
{
    if (r->base == NULL || len == 0)
        return;
    if (off < r->released) {
        if (r->stray_bytes == 0 || off < r->stray_lo)
            r->stray_lo = off;
        if (off + len > r->stray_hi)
            r->stray_hi = off + len;
        r->stray_bytes += len > STRAY_COST ? len : STRAY_COST;
    }
    if (off + len > r->high)
        r->high = off + len;
}

void aftp_resident_settle(aftp_resident *r)
{
    if (r->base == NULL)
        return;
    if (r->stray_bytes >= r->keep)
        release_strays(r);
    /* Release in steps of `keep`, so madvise runs once per `keep` bytes. */
    if (r->high >= r->released + 2 * r->keep) {
        uint64_t upto = (r->high - r->keep) & ~(PAGE - 1);
        release(r, r->released, upto);
        r->released = upto;
    }
    populate_ahead(r);
}
