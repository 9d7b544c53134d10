/*
 * The sender's side of pipelined mode (spec 9.14): aftp_tree's entries
 * turned into the engine's aftp_entry_info.
 *
 * source_id: XXH3-64 of the source's device, inode, size, mtime and ctime
 * (little-endian u64 each), so a file rewritten, replaced or merely
 * touched since a partial copy was taken gives another value, and the
 * receiver starts over instead of resuming (spec 9.14.4). The digest of
 * CHECKSUM mode is computed only when that flag is asked for, reading the
 * whole file once at the offer: its cost is a read of the file, paid only
 * by a sender that wants content comparison.
 */
#ifndef AFTP_TREESEND_H
#define AFTP_TREESEND_H

#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp_source.h"
#include "aftp_tree.h"

/* Bounds of the sender's storage, for any window W and tree size:
 *
 * - Descriptors: at most AFTP_TREESEND_MAX_OPEN sources are held open
 *   (descriptor and read-only mapping); a view that needs another closes
 *   the one viewed least recently (its entry stays: a later view, a
 *   repair, opens it again). One more descriptor lives for the moment of
 *   a small file's read, a hole scan or a CHECKSUM digest.
 * - Mappings: the open sources' and, until aftp_treesend_settle, those
 *   closed since (their bytes may sit in datagrams not yet sent): at most
 *   AFTP_TREESEND_MAX_OPEN plus the views made since the last settle.
 * - Small files (at most AFTP_TREESEND_SMALL_MAX bytes) are read whole
 *   with pread at their first view into a buffer of their entry: no
 *   mapping, no descriptor kept. Buffers hold at most
 *   AFTP_TREESEND_BUFFER_BUDGET bytes in all (released ones awaiting the
 *   settle included); a small file beyond that is mapped like a large one.
 *   64 KiB: below it a mapping costs more than the copy (mmap, munmap and
 *   the page faults of a few pages against one pread), and it is the size
 *   below which the hole scan never opens a file, so such a file is opened
 *   once in all. 32 MiB: a window of 4096 files of 8 KiB fits whole.
 * - Memory per entry in flight: its record (about 150 bytes) and local
 *   path; with holes, AFTP_TREESEND_MAX_HOLES ranges (4 KiB); while open,
 *   an aftp_source (about 1.2 KiB). Buffers count against the budget.
 *
 * Every read of a source must find the version its entry offered: at the
 * first, its device, inode, size, mtime and ctime must hash to the
 * entry's source_id; at a later open (a repair after it was closed for
 * others) they must equal the first read's. A difference fails the view
 * with AFTP_ERR_SOURCE_CHANGED naming the file and what differs: no entry
 * ever mixes versions. A small file is read once, its identity the same
 * before and after the read: its entry's bytes are that version's, and
 * what the file holds afterwards does not concern the entry (a later
 * send offers it as the new version it is). */
#define AFTP_TREESEND_MAX_OPEN 256u
#define AFTP_TREESEND_SMALL_MAX (UINT64_C(64) << 10)
#define AFTP_TREESEND_BUFFER_BUDGET (UINT64_C(32) << 20)

/* Holes of a sparse source (spec 6.13, flag HOLES), found with
 * SEEK_DATA / SEEK_HOLE when a FILE is added: at most
 * AFTP_TREESEND_HOLE_SCAN data extents are looked at (the rest of the
 * file counts as data), and the AFTP_TREESEND_MAX_HOLES largest holes
 * are kept (a smaller one is sent as data, zeros). A file below
 * AFTP_TREESEND_HOLE_MIN_SIZE, or whose allocated blocks cover its size,
 * is not scanned: an ordinary file of that size costs one stat more (no
 * open, no seek) and gets no hole list; a smaller one costs nothing. */
#define AFTP_TREESEND_MAX_HOLES 256u
#define AFTP_TREESEND_HOLE_SCAN 4096u
#define AFTP_TREESEND_HOLE_MIN_SIZE (UINT64_C(64) << 10)

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e);

/* Fills *out for entry `id` from e (its strings borrowed from the walk
 * until its next entry): kind, path, size, mtime_ns, mode, source_id, a
 * link's target, `flags`, a file's block_size (0: the engine picks) and,
 * with AFTP_ENTRY_CHECKSUM, a file's XXH3-128 read from e->local (opened
 * relative to e->at).
 * AFTP_OK, or the error of that read. */
int aftp_treesend_entry_info(const aftp_tree_entry *e, uint32_t id, uint32_t block_size,
                             unsigned flags, aftp_entry_info *out);

/* The sender's storage over its entries: each FILE entry added with the
 * local path it came from; its source is read at its first view (a small
 * file into a buffer, a larger one opened as an aftp_source: mapped,
 * guarded, residency bounded), checked against the identity the entry
 * announced, and released by `close` (above: the bounds). */
typedef struct aftp_treesend_file aftp_treesend_file;
typedef struct aftp_treesend_map aftp_treesend_map;

typedef struct aftp_treesend {
    int at; /* what the files' local paths are relative to (aftp_source_openat):
             * AT_FDCWD from aftp_treesend_init; a pull's server sets its root */
    aftp_treesend_file **files; /* added, not yet closed, ascending id */
    size_t count, cap;
    size_t open;       /* sources open (descriptor and mapping) */
    char message[512]; /* the last failure, with its figures */
    uint32_t message_id; /* the entry `message` is about */
    aftp_treesend_file *newest, *oldest; /* the open sources, by their last view */
    uint64_t buffered;        /* bytes in small files' buffers */
    uint64_t reopened;        /* sources read again after being closed */
    aftp_treesend_map *retired_maps;    /* closed, unmapped at the settle */
    aftp_treesend_file *retired_files;  /* ended, released at the settle */
} aftp_treesend;

void aftp_treesend_init(aftp_treesend *t);
void aftp_treesend_fini(aftp_treesend *t);
/* Notes FILE entry `info` (id, size, mtime) as read from `local`, and
 * sets info->holes / hole_count to the holes found in it (above; owned
 * by t until the entry's close, none when the file has no hole or
 * cannot be scanned). AFTP_ERR_INVALID_ARGUMENT for another kind,
 * AFTP_ERR_NO_MEMORY. */
int aftp_treesend_add(aftp_treesend *t, aftp_entry_info *info, const char *local);
/* Entry id's bytes [off, off + len): read or opened at need (above).
 * The bytes stay valid at least until the next aftp_treesend_settle. */
int aftp_treesend_view(aftp_treesend *t, uint32_t id, uint64_t off, size_t len,
                       const uint8_t **out);
/* The entry ended: its source released (a second close is INVALID_STATE);
 * its descriptor is closed at once, its bytes at the next settle. */
int aftp_treesend_close(aftp_treesend *t, uint32_t id);
/* Call once the datagrams of a batch have been sent (the kernel has read
 * the bytes they borrowed): unmaps and frees what was closed since, and
 * releases the open sources' residency that is due (aftp_resident.h). */
void aftp_treesend_settle(aftp_treesend *t);
/* aftp_source_check of every open source: the id of the first whose
 * size or mtime moved (the message says how), or 0. A view that fails
 * reports itself (the engine abandons that entry alone, spec 9.14.3). */
uint32_t aftp_treesend_changed(aftp_treesend *t);
/* aftp_treesend_changed as an error: AFTP_OK or AFTP_ERR_SOURCE_CHANGED. */
int aftp_treesend_check(aftp_treesend *t);

/* Storage callbacks for the sender engine; `user` must be the aftp_treesend. */
extern const aftp_storage_ops aftp_treesend_ops;

#endif /* AFTP_TREESEND_H */
