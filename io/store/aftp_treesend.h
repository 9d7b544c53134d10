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
#include "aftp_tree.h"

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e);

/* Fills *out for entry `id` from e (its strings borrowed from the walk
 * until its next entry): kind, path, size, mtime_ns, mode, source_id, a
 * link's target, `flags`, a file's block_size (0: the engine picks) and,
 * with AFTP_ENTRY_CHECKSUM, a file's XXH3-128 read from e->local.
 * AFTP_OK, or the error of that read. */
int aftp_treesend_entry_info(const aftp_tree_entry *e, uint32_t id, uint32_t block_size,
                             unsigned flags, aftp_entry_info *out);

#endif /* AFTP_TREESEND_H */
