/*
 * The receiver's resume state: for each destination path a partial data
 * file and a journal of the blocks of it that are durable, kept in a
 * private directory beneath the receiver's root, so that a transfer
 * interrupted in any way resumes with only the missing blocks.
 *
 * Place. AFTP_JOURNAL_DIR (".aftp-partial") directly beneath the root,
 * mode 0700, opened without following links. Every file in it is named by
 * the XXH3-128 of the destination path in hex ("<32 hex>.part" the data,
 * "<32 hex>.jrnl" the journal, "<32 hex>.jrnl.new" a journal being
 * written), so a hostile name never reaches the file system here; the
 * journal holds the path itself, and a hash collision reads as another
 * file's state (discarded). Transfers never name the directory: a path
 * whose first component is AFTP_JOURNAL_DIR is refused
 * (aftp_journal_path_reserved).
 *
 * Journal. Written whole each time: a new copy "<h>.jrnl.new", fdatasync,
 * renameat over "<h>.jrnl", fsync of the directory. Whole copies rather
 * than appended records because the journal is small and bounded (below),
 * so a rewrite costs one small write, a crash at any point leaves the old
 * or the new copy intact, and reading needs no replay or compaction. Its
 * bytes (little-endian):
 *   magic "AFTPJRNL" (8) | version u32 (1) | flags u32 (0)
 *   | size u64 | mtime_ns i64 | identity u64 | block_size u32
 *   | path_len u32 | block_count u64 | range_count u32 | reserved u32 (0)
 *   | path (path_len bytes) | range_count x (first u64, count u64)
 *   | XXH3-64 of all bytes before it, u64
 * Ranges are sorted, disjoint, non-adjacent and within block_count; the
 * file is exactly as long as its header says. Anything else (bad magic,
 * checksum, length, version, ranges) is a damaged journal.
 *
 * Never ahead of the data. Blocks written into the partial file are
 * noted (aftp_journal_written); aftp_journal_flush_data fdatasyncs the
 * partial file and only then counts them durable; aftp_journal_save
 * records the durable blocks. The order is thus data flush -> journal
 * write -> journal fsync -> rename, and a crash between any two steps
 * leaves a journal that claims only flushed blocks.
 *
 * Resume (aftp_journal_open). A journal whose destination path, source
 * identity (size, mtime, the sender's identity hash) and geometry (block
 * size) match is resumed: its durable blocks are held, and its partial
 * file's mtime set to now, which marks the state in use for the cleanup. Any mismatch (the
 * source changed), a damaged journal, or a partial file shorter than the
 * source, discards both files and starts over: versions are never mixed.
 * No per-block digests are kept, so a damaged journal's data is dropped,
 * not re-checked: damage means the storage failed us (a journal is never
 * torn by a crash), and a file resumed or not is verified end to end by
 * its XXH3-128 all the same.
 *
 * Finish. aftp_journal_finish renames the partial file itself to its
 * final name (no second copy) and removes the journal; a refused or failed
 * file is closed (aftp_journal_close) and both stay for a later resume. A
 * caller committing many files at once syncs them together and uses the
 * finish's steps (aftp_journal_place, aftp_journal_forget) instead.
 *
 * Whole files. aftp_journal_open_whole keeps a partial file without any
 * journal, for files cheap enough to send again whole.
 *
 * Cleanup. State untouched for longer than a given age (default
 * AFTP_JOURNAL_DEFAULT_MAX_AGE_S, 7 days) is removed by
 * aftp_journal_sweep_step, which the server calls at start and
 * periodically; each call looks at a bounded number of entries.
 *
 * Bounds. A journal holds at most AFTP_JOURNAL_MAX_RANGES ranges of held
 * blocks; past that it keeps the lowest ones (a prefix of the held set)
 * and the rest are sent again. Memory per open journal: the struct plus
 * at most 2 x AFTP_JOURNAL_MAX_RANGES x 16 bytes (written and durable
 * ranges), 32 KiB, whatever the file's size, and for the length of an
 * open or a save a buffer of one journal's maximum size. Files: two per destination
 * path on disk (three while a journal is being written), one descriptor
 * open (the partial file) plus the caller's directory. Disk overhead
 * beyond the data: one journal of at most 64 + AFTP_WIRE_MAX_PATH +
 * 16 x AFTP_JOURNAL_MAX_RANGES + 8 bytes (20,552 bytes). A full disk during a
 * journal write fails with AFTP_ERR_NO_SPACE and leaves the old journal.
 */
#ifndef AFTP_JOURNAL_H
#define AFTP_JOURNAL_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_error.h"

#define AFTP_JOURNAL_DIR ".aftp-partial"
#define AFTP_JOURNAL_VERSION 1u
#define AFTP_JOURNAL_MAX_RANGES 1024u
#define AFTP_JOURNAL_DEFAULT_MAX_AGE_S (7u * 24u * 3600u)
#define AFTP_JOURNAL_NAME_BYTES 32u /* hex digits of a state's name */
#define AFTP_JOURNAL_STATE_NAME_CAP (AFTP_JOURNAL_NAME_BYTES + 16) /* a state file's name */

/* What decides "the same source as the partial copy", and its geometry. */
typedef struct aftp_journal_source {
    uint64_t size;
    int64_t mtime_ns;
    uint64_t identity; /* the sender's hash of size, mtime, inode, ctime */
    uint32_t block_size;
} aftp_journal_source;

/* Blocks [first, first + count). */
typedef struct aftp_journal_range {
    uint64_t first;
    uint64_t count;
} aftp_journal_range;

/* Sorted, disjoint, non-adjacent ranges, at most AFTP_JOURNAL_MAX_RANGES. */
typedef struct aftp_journal_set {
    aftp_journal_range *ranges;
    uint32_t count;
    uint32_t cap;
} aftp_journal_set;

/* How aftp_journal_open found the state of a path. */
typedef enum aftp_journal_outcome {
    AFTP_JOURNAL_FRESH,   /* no state: a new partial file */
    AFTP_JOURNAL_RESUMED, /* the journal matched: its blocks are held */
    AFTP_JOURNAL_CHANGED, /* the source or geometry changed: started over */
    AFTP_JOURNAL_DAMAGED  /* journal or partial file damaged: started over */
} aftp_journal_outcome;

typedef struct aftp_journal {
    int dirfd;   /* the private directory (borrowed) */
    int data_fd; /* the partial file, sized to the source; -1 when closed */
    char name[AFTP_JOURNAL_NAME_BYTES + 1];
    char *path;  /* the destination path (owned) */
    aftp_journal_source src;
    uint64_t block_count;
    aftp_journal_set written; /* written, not yet flushed */
    aftp_journal_set durable; /* flushed: what the next save records */
    aftp_journal_outcome outcome;
    int whole;     /* no journal (aftp_journal_open_whole) */
    int created;   /* whole: its partial file made */
    char why[320]; /* the last failure or discard, with its figures */
} aftp_journal;

/* 1 when `path` names the private directory or something in it: such
 * entries are refused, so a transfer can neither read nor replace resume
 * state. */
int aftp_journal_path_reserved(const char *path);

/* Opens (creating it, mode 0700, when missing) the private directory
 * beneath rootfd into *dirfd. A symbolic link or other non-directory in
 * its place, or a directory owned by another user, is refused; a
 * directory of ours open to others is set back to 0700. AFTP_OK, or the
 * error with the reason in `why`. */
int aftp_journal_dir_open(int rootfd, int *dirfd, char *why, size_t cap);

/* Opens the resume state of destination `path` (at most
 * AFTP_WIRE_MAX_PATH bytes, not reserved) for a source `src`: resumed when
 * it matches, otherwise a fresh partial file sized to src->size
 * (j->outcome says which; j->why why state was discarded). The held blocks
 * are j->durable. AFTP_OK, or the error with j->why; j needs
 * aftp_journal_close either way. */
int aftp_journal_open(aftp_journal *j, int dirfd, const char *path,
                      const aftp_journal_source *src);

/* A file small enough to be sent again whole after any interruption: its
 * partial file only, created or truncated (an earlier session's partial
 * data of the path replaced) by the first aftp_journal_reopen_data (none
 * is open after this call), never a journal: no probe for one, no unlink
 * first, aftp_journal_save does nothing, aftp_journal_discard
 * removes the partial file alone. A journal left by an earlier, larger
 * version of the path is never resumed against this partial file: its
 * size differs, so aftp_journal_open would find the data damaged. */
int aftp_journal_open_whole(aftp_journal *j, int dirfd, const char *path,
                            const aftp_journal_source *src);
/* The partial file's name in the private directory. */
void aftp_journal_data_name(const aftp_journal *j, char out[AFTP_JOURNAL_STATE_NAME_CAP]);

/* Descriptors: a receiver with many files open closes the partial file's
 * descriptor (aftp_journal_release_data: nothing is flushed or lost, the
 * written blocks stay noted, and a later fdatasync of the file covers
 * them) and reopens it before its next write or flush. AFTP_OK, or the
 * error with j->why. */
void aftp_journal_release_data(aftp_journal *j);
int aftp_journal_reopen_data(aftp_journal *j);

/* Notes blocks [first, first + count) as written into the partial file,
 * not yet durable. AFTP_ERR_INVALID_ARGUMENT beyond the block count. */
int aftp_journal_written(aftp_journal *j, uint64_t first, uint64_t count);
/* fdatasync of the partial file, which covers bytes written through a
 * shared mapping of it; then the written blocks count as durable. */
int aftp_journal_flush_data(aftp_journal *j);
/* Writes the journal of the durable blocks (atomically, see above). */
int aftp_journal_save(aftp_journal *j);
/* flush_data then save: the one call a receiver needs per group commit. */
int aftp_journal_sync(aftp_journal *j);

/* The file is complete and verified, its mode and times set by the caller
 * through j->data_fd: fsync it, rename it to `leaf` in parent_fd
 * (replacing a file there only with `replace`), fsync parent_fd, remove
 * the journal, close. AFTP_OK, or the error with j->why (state kept). */
int aftp_journal_finish(aftp_journal *j, int parent_fd, const char *leaf, int replace);
/* The steps of a group's finish, whose caller syncs for the whole group:
 * aftp_journal_place renames the partial file (its data made durable by
 * the caller before) to `leaf` in parent_fd, replacing only with
 * `replace` (AFTP_OK, or the error with j->why, state kept);
 * aftp_journal_forget then removes the journal and closes. */
int aftp_journal_place(aftp_journal *j, int parent_fd, const char *leaf, int replace);
void aftp_journal_forget(aftp_journal *j);
/* Closes, keeping the state on disk for a later resume. */
void aftp_journal_close(aftp_journal *j);
/* Closes and removes the state. */
void aftp_journal_discard(aftp_journal *j);

/* Removal of state no sender came back for, a bounded step at a time. */
typedef struct aftp_journal_sweep {
    int dirfd;       /* borrowed */
    DIR *dir;        /* the walk's position between steps */
    uint64_t max_age_s;
} aftp_journal_sweep;

void aftp_journal_sweep_init(aftp_journal_sweep *s, int dirfd, uint64_t max_age_s);
/* Looks at up to `budget` entries of the private directory, resuming the
 * walk where the last step stopped (from the start after its end), and
 * removes each state (data, journal, journal being written) none of whose
 * files was modified in the last max_age_s seconds. Files not named as
 * state are left alone. Returns the number of states removed, or an error. */
int aftp_journal_sweep_step(aftp_journal_sweep *s, unsigned budget);
void aftp_journal_sweep_fini(aftp_journal_sweep *s);

#endif /* AFTP_JOURNAL_H */
