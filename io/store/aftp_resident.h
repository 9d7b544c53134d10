/*
 * Bounded residency of a large file mapping. Bytes are touched mostly in
 * ascending order (first transmissions, arriving data, the digest pass);
 * what lies more than `keep` bytes behind the furthest touch is released
 * with MADV_DONTNEED, and so are stray touches below that point (repairs)
 * once they may have mapped `keep` bytes (a fault maps a whole page-cache
 * folio, up to 2 MiB). The mapping stays valid: a released page of a file
 * mapping is simply faulted in again from the page cache (dirty shared
 * pages are handed to the page cache, never lost).
 *
 * Ahead of the furthest touch, the next AFTP_RESIDENT_AHEAD bytes are
 * prefaulted in one call (MADV_POPULATE_READ/WRITE), which costs far less
 * than a page fault per 4 KiB page.
 */
#ifndef AFTP_RESIDENT_H
#define AFTP_RESIDENT_H

#include <stdint.h>

#define AFTP_RESIDENT_AHEAD (UINT64_C(2) << 20)
/* No prefault reaches further than this past the furthest touch. */
#define AFTP_RESIDENT_REACH (3 * AFTP_RESIDENT_AHEAD)

typedef struct aftp_resident {
    uint8_t *base;
    uint64_t size;
    uint64_t keep;        /* bytes kept behind the furthest touch */
    uint64_t high;        /* furthest byte touched */
    uint64_t released;    /* [0, released) released, except strays */
    uint64_t stray_lo, stray_hi, stray_bytes; /* touched below `released` since */
    uint64_t release_calls; /* madvise calls made, for tests */
    int populate_advice;  /* MADV_POPULATE_READ / _WRITE, 0: none */
    uint64_t populated;   /* [.., populated) has been prefaulted */
} aftp_resident;

/* populate_advice: MADV_POPULATE_READ for a mapping that is read,
 * MADV_POPULATE_WRITE for one that is written, 0 for no prefaulting. */
void aftp_resident_init(aftp_resident *r, uint8_t *base, uint64_t size, uint64_t keep,
                        int populate_advice);
/* Notes that [off, off+len) is being read or written. */
void aftp_resident_touch(aftp_resident *r, uint64_t off, uint64_t len);
/* Releases what is due. Call it once the touched bytes have really been
 * accessed: a page released before its first access would be faulted in
 * afterwards and stay. */
void aftp_resident_settle(aftp_resident *r);

#endif /* AFTP_RESIDENT_H */
