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

/* Source files open (descriptor and read-only mapping) at once. The
 * engine views only the files it has in flight, at most its pipeline
 * window W of them, and closes each when its entry ends, so this cap is
 * reached only by a window above it: the view then fails with
 * AFTP_ERR_LIMIT, naming both figures. */
#define AFTP_TREESEND_MAX_OPEN 256u

/* Holes of a sparse source (spec 6.13, flag HOLES), found with
 * SEEK_DATA / SEEK_HOLE when a FILE is added: at most
 * AFTP_TREESEND_HOLE_SCAN data extents are looked at (the rest of the
 * file counts as data), and the AFTP_TREESEND_MAX_HOLES largest holes
 * are kept (a smaller one is sent as data, zeros). A file below
 * AFTP_TREESEND_HOLE_MIN_SIZE, or whose allocated blocks cover its size,
 * is not scanned: an ordinary file costs one open and fstat more, no
 * seek, and gets no hole list. */
#define AFTP_TREESEND_MAX_HOLES 256u
#define AFTP_TREESEND_HOLE_SCAN 4096u
#define AFTP_TREESEND_HOLE_MIN_SIZE (UINT64_C(64) << 10)

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e);

/* Fills *out for entry `id` from e (its strings borrowed from the walk
 * until its next entry): kind, path, size, mtime_ns, mode, source_id, a
 * link's target, `flags`, a file's block_size (0: the engine picks) and,
 * with AFTP_ENTRY_CHECKSUM, a file's XXH3-128 read from e->local.
 * AFTP_OK, or the error of that read. */
int aftp_treesend_entry_info(const aftp_tree_entry *e, uint32_t id, uint32_t block_size,
                             unsigned flags, aftp_entry_info *out);

/* The sender's storage over its entries: each FILE entry added with the
 * local path it came from; its source (aftp_source: mapped, guarded,
 * residency bounded) is opened at its first view, checked against the
 * size and mtime the entry announced, and closed by `close`. */
typedef struct aftp_treesend_file aftp_treesend_file;

typedef struct aftp_treesend {
    aftp_treesend_file **files; /* added, not yet closed, ascending id */
    size_t count, cap;
    size_t open;       /* sources open */
    char message[512]; /* the last failure, with its figures */
} aftp_treesend;

void aftp_treesend_init(aftp_treesend *t);
void aftp_treesend_fini(aftp_treesend *t);
/* Notes FILE entry `info` (id, size, mtime) as read from `local`, and
 * sets info->holes / hole_count to the holes found in it (above; owned
 * by t until the entry's close, none when the file has no hole or
 * cannot be scanned). AFTP_ERR_INVALID_ARGUMENT for another kind,
 * AFTP_ERR_NO_MEMORY. */
int aftp_treesend_add(aftp_treesend *t, aftp_entry_info *info, const char *local);
int aftp_treesend_view(aftp_treesend *t, uint32_t id, uint64_t off, size_t len,
                       const uint8_t **out);
/* The entry ended: its source released (a second close is INVALID_STATE). */
int aftp_treesend_close(aftp_treesend *t, uint32_t id);
/* aftp_source_check of every open source: AFTP_OK, or the first
 * AFTP_ERR_SOURCE_CHANGED with the message. */
int aftp_treesend_check(aftp_treesend *t);

/* Storage callbacks for the sender engine; `user` must be the aftp_treesend. */
extern const aftp_storage_ops aftp_treesend_ops;

#endif /* AFTP_TREESEND_H */
