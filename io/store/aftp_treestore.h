/*
 * The receiver's storage for pipelined mode (spec 9.14): the storage ops
 * `entry`, `write`, `view`, `close` and `commit_group` over a destination
 * root, composed of aftp_place (directories, links, directory metadata)
 * and aftp_journal (each file's data and resume state).
 *
 * Why a module of its own rather than more of aftp_store: aftp_store
 * holds one file, mapped beside its final name; here many files are open
 * at once (entries run up to W ahead of the data, verified files wait for
 * their group commit), and each file's data goes into its journal's
 * partial file beneath AFTP_JOURNAL_DIR, so that a transfer interrupted in
 * any way leaves durable, journalled blocks to resume from.
 *
 * Verdicts (spec 9.14.4), each entry in id order:
 * - every kind: a path aftp_path_check refuses, or one beneath
 *   AFTP_JOURNAL_DIR, is REFUSED(PATH_REJECTED); so is any path through a
 *   link (nothing is followed).
 * - DIR: placed (aftp_place_dir; mode and mtime once nothing beneath it
 *   changes any more), SEND; a file or link in its way: REFUSED.
 * - SYMLINK: placed with its target verbatim, SEND, when the options allow
 *   links; otherwise REFUSED(PATH_REJECTED), never a silent skip.
 * - FILE: a directory or special file at the path: REFUSED(PATH_REJECTED);
 *   with SYNC, an existing regular file of equal size and equal mtime_ns
 *   (with CHECKSUM: equal XXH3-128 of its content, read here): SKIP;
 *   another existing file without `overwrite`: REFUSED(FILE_EXISTS); less
 *   free space than its size: REFUSED(NO_SPACE); a journal of the same
 *   path, size, mtime_ns, block size and source_id holding durable blocks,
 *   with flag RESUME: RESUME with those blocks; otherwise SEND. A file of
 *   at most AFTP_TREESTORE_WHOLE_MAX bytes is never RESUMEd (below).
 *
 * Small files (at most AFTP_TREESTORE_WHOLE_MAX, 64 KiB) keep no journal
 * (aftp_journal_open_whole): their data goes straight into a partial file
 * made at their first write (or commit, when empty), truncating whatever
 * partial data an earlier session left there; they are never synced
 * before their group commit; and after a crash they are simply sent again
 * whole. Why 64 KiB: sending it again costs at most 64 KiB (0.5 ms at
 * 1 Gbit/s, ~45 packets) per file open at the kill, while a journal costs
 * every file, crash or not, a probe, two more files and a journal write
 * with fdatasync and a directory fsync at each sync: for the small files
 * that make up most trees that is more work than their data. The bound a
 * kill costs them: every small file open then, at most W x 64 KiB. Their
 * read-back for the digest is a pread into one buffer of the store
 * (AFTP_TREESTORE_WHOLE_MAX bytes), not a mapping (mmap and munmap per
 * file); larger files are mapped.
 *
 * Holes (spec 6.13, flag HOLES): the entry's hole blocks are never
 * written nor reserved: the partial file is sized by ftruncate, so they
 * stay holes and read as zeros; the space check at the offer counts the
 * size less the holes; they count as stored from the verdict on (so a
 * file is "all arrived" when its data is), and are not journalled (a
 * later session of the same source announces them again). Nothing here
 * preallocates (fallocate) a partial file; whoever adds it must do so
 * over the data ranges only, never the holes.
 *
 * Data: written with pwrite into the partial file, its leading and
 * trailing zero bytes left out (they read as zeros already), so a block
 * that is partly hole allocates no page of the hole; a block counts as
 * written only when the write covers all of it. Durability: a file's
 * journal is synced (data flushed, then journal saved) at each group
 * commit; whenever AFTP_TREESTORE_SYNC_BYTES have been written to it since
 * its last sync; at the first aftp_treestore_tick that comes
 * AFTP_TREESTORE_SYNC_NS or more after a tick first saw it holding unsynced
 * bytes; when it is closed unfinished; and when the store is released
 * (aftp_treestore_fini: a session that ended with its sender gone). The
 * serve driver ticks every few milliseconds, so no written block stays
 * unsynced much longer than AFTP_TREESTORE_SYNC_NS. Bound: a kill -9 of
 * the receiver makes the sender send again at most, for each open file,
 * the lesser of AFTP_TREESTORE_SYNC_BYTES and what arrived for it in the
 * last AFTP_TREESTORE_SYNC_NS plus one tick; all files together at most
 * what arrived in that time (the link's rate x ~1 s), plus what was in
 * flight. A kill -9 of the sender loses nothing the receiver got (the
 * session ends at its idle timeout and syncs every file). The cost: one
 * fdatasync and one small journal write per open file for each
 * AFTP_TREESTORE_SYNC_BYTES it receives (seven a second at 1 Gbit/s), or
 * once a second when slower, beyond the group commits; write-back is
 * started every AFTP_TREESTORE_WRITEBACK_BYTES, so each fdatasync waits
 * for little. A file closed DISCARD after all its
 * bytes arrived failed its verification: its state is removed, never
 * resumed; one closed earlier keeps its state for a later session.
 *
 * Commit: close(DEFER) keeps a verified file (its descriptor closed);
 * commit_group commits the group's files together, in this order:
 * (1) each file's mode and mtime, set by name in the private directory;
 * (2) the data and metadata of all of them durable: one syncfs of the
 *     file system of AFTP_JOURNAL_DIR when the group holds two files or
 *     more (or the place option sync_fs), else one fsync of the file;
 * (3) each partial file renamed to its final name (replacing a file only
 *     with `overwrite`) in its directory, kept open (below);
 * (4) each distinct directory renamed into fsynced once;
 * (5) only then the results, and the committed files' journals removed.
 * Why crash-safe: before (2) completes no final name exists; a rename
 * (3) only ever moves data made durable by (2), so whatever a crash
 * leaves under a final name is complete, verified and durable; a rename
 * not yet durable at the crash is simply not there (the partial file is,
 * with its journal: resumed or sent again). The results follow (4), so a
 * FILE_RESULT never vouches for a name that a crash could still take
 * back (spec 9.14). A journal removed after a crash that kept the rename
 * finds no partial file: discarded, never resumed into the wrong file.
 * Failures fail exactly the files they concern: (1) or a per-file (2)
 * that file; a syncfs (2) every file of the group (syncfs cannot say
 * whose write-back failed); (3) that file; (4) the files renamed into
 * that directory (already under their final name, but not vouched for).
 * A file not renamed keeps its state: a journalled one with every block
 * recorded (its data was flushed), a small one discarded (sent again).
 * Cost per group: one syncfs plus one fsync per distinct directory, in
 * place of an fsync per file and per file's directory. syncfs also
 * writes back other dirty files of that file system, bounded by what the
 * sync policy above leaves unsynced (AFTP_TREESTORE_SYNC_BYTES per open
 * file, a second's arrivals).
 *
 * Bounds: at most AFTP_TREESTORE_MAX_OPEN partial files hold a descriptor
 * at once; others are closed (aftp_journal_release_data) and reopened on
 * their next write, view or commit. Destination directories: at most
 * AFTP_TREESTORE_DIR_CACHE held open for the entry checks, and as many by
 * a group commit while it runs (files entered or renamed in one directory
 * reuse its descriptor; a miss opens it beneath the root without
 * following links and replaces the next slot round the cache, syncing it
 * first if the group renamed into it). The group's set is its own, opened
 * and closed by its run: the run may be on another thread than the entry
 * checks, and a descriptor closed under it, its number reused, would
 * rename into another directory. Memory: one
 * record per open entry (at most W plus the files awaiting their group
 * commit) and its journal, the read-back buffer, and per group commit
 * two pointers' worth per file and its directory set.
 */
#ifndef AFTP_TREESTORE_H
#define AFTP_TREESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp_filelock.h"
#include "aftp_journal.h"
#include "aftp_path.h"
#include "aftp_place.h"

#define AFTP_TREESTORE_MAX_OPEN 64u                      /* partial files with a descriptor */
#define AFTP_TREESTORE_SYNC_BYTES (UINT64_C(16) << 20)   /* written between journal syncs */
#define AFTP_TREESTORE_WRITEBACK_BYTES (UINT64_C(2) << 20) /* written between write-back starts */
#define AFTP_TREESTORE_SYNC_NS UINT64_C(1000000000)     /* unsynced age that a tick syncs */
#define AFTP_TREESTORE_WHOLE_MAX (UINT64_C(64) << 10)    /* files this small keep no journal */
#define AFTP_TREESTORE_DIR_CACHE 16u                     /* destination directories kept open */

typedef struct aftp_treestore_file aftp_treestore_file;
typedef struct aftp_treestore_group aftp_treestore_group;

/* A destination directory kept open: files entered and committed in it
 * open it once, not once each. */
typedef struct aftp_treestore_dir {
    char *path;      /* relative to the root, "" the root itself; NULL: unused */
    int fd;
    int dirty;       /* renamed into during the group commit, not yet synced */
    uint64_t ticket; /* which opening of it (the group's files name it) */
} aftp_treestore_dir;

/* Directories kept open, one set per thread that uses them: the caller's
 * (entry checks) and each group commit's (its renames, on whatever thread
 * runs it): a slot the caller reuses is never one a group renames into. */
typedef struct aftp_treestore_dirs {
    aftp_treestore_dir slot[AFTP_TREESTORE_DIR_CACHE];
    size_t victim;    /* the slot a miss takes next, round the cache */
    uint64_t tickets;
} aftp_treestore_dirs;

typedef struct aftp_treestore {
    int root;        /* the destination root (borrowed) */
    int partial_dir; /* AFTP_JOURNAL_DIR beneath it (owned) */
    int keep_partial_dir; /* set by the owner: another user of the root may hold the
                           * directory, fini leaves it even when it is empty */
    aftp_place place;
    aftp_treestore_file **files; /* open entries, ascending id */
    size_t count, cap;
    size_t open_fds; /* partial files holding a descriptor */
    size_t hand;     /* where the search for a descriptor to close resumes */
    aftp_journal_sweep sweep;
    aftp_path_report report; /* the last entry's refusal or failure */
    aftp_treestore_dirs dirs; /* the caller's: entry checks */
    uint8_t *readback;       /* AFTP_TREESTORE_WHOLE_MAX bytes: a whole file's view */
    /* Files being written by other users of the root (aftp_treestore_share);
     * NULL: this store is the root's only writer. */
    aftp_filelocks *locks;
    aftp_filelock_key lock_root; /* this root, as the table names it (path unused) */
#ifdef AFTP_TEST_HOOKS
    /* Test builds only: called before each durability step of a group
     * commit, AFTP_TREESTORE_STEP_* with the file's or directory's path
     * ("" for the group's data sync); a nonzero return is an errno the step
     * fails with instead of running. */
    int (*fault)(void *user, int step, const char *path);
    void *fault_user;
#endif
} aftp_treestore;

#ifdef AFTP_TEST_HOOKS
enum { AFTP_TREESTORE_STEP_SYNC, AFTP_TREESTORE_STEP_RENAME, AFTP_TREESTORE_STEP_DIRSYNC };
#endif

/* Opens the private directory beneath root (aftp_journal_dir_open).
 * AFTP_OK, or the error with the reason in `why`. */
int aftp_treestore_init(aftp_treestore *ts, int root, const aftp_place_options *opt, char *why,
                        size_t cap);
/* The root is shared with other stores (a server's concurrent sessions):
 * from now on each FILE entry is claimed in `locks` under the root's
 * device and inode and its path before its verdict, and released when it
 * ends (committed, failed, discarded, or at fini, its state made durable
 * first). A file another store holds gets AFTP_STORAGE_WAIT from `entry`
 * and `open`: decided once that store released it, resuming from what it
 * made durable. Why per file: a file's partial data and journal are one
 * writer's (two would mix blocks; a sender restarted after a crash would
 * race its own lingering session), while distinct files never conflict. */
void aftp_treestore_share(aftp_treestore *ts, aftp_filelocks *locks, dev_t dev, ino_t ino);
/* Applies the metadata of directories placed (their files committed or
 * discarded first). AFTP_OK or the first failure. */
int aftp_treestore_finish(aftp_treestore *ts);
/* Releases everything. Files still open whose sender can resume are
 * synced first (their state keeps every block that arrived: the session
 * ended with its sender gone, or stopped); the others' state is removed. */
void aftp_treestore_fini(aftp_treestore *ts);

int aftp_treestore_entry(aftp_treestore *ts, const aftp_entry_info *info,
                         aftp_entry_verdict *out);
int aftp_treestore_write(aftp_treestore *ts, uint32_t id, uint64_t off, const uint8_t *data,
                         size_t len);
int aftp_treestore_view(aftp_treestore *ts, uint32_t id, uint64_t off, size_t len,
                        const uint8_t **out);
int aftp_treestore_close(aftp_treestore *ts, uint32_t id, int commit);
int aftp_treestore_commit_group(aftp_treestore *ts, const uint32_t *ids, size_t count,
                                int *results);
/* commit_group in three steps, for a caller that runs the slow one (the
 * syncs and renames) beside its packet handling. begin, on the caller's
 * thread: claims the files closed with AFTP_CLOSE_DEFER among ids (the
 * others' results[i] AFTP_ERR_INVALID_STATE). run, on any one thread:
 * steps (1) to (4), touching only the group's files and the destination
 * directories (no other call may run steps (1) to (4) meanwhile: one group
 * at a time). end, on the caller's thread after run: the results final,
 * failures reported, the files ended; then aftp_treestore_sync, whose
 * failure belongs to the files still arriving, not to the group. Between
 * begin and end every other call stays usable and leaves the group's files
 * alone (a write, view or close of one is refused, AFTP_ERR_INVALID_STATE);
 * `ids` and `results` must live until end. */
int aftp_treestore_commit_begin(aftp_treestore *ts, const uint32_t *ids, size_t count,
                                int *results, aftp_treestore_group **out);
void aftp_treestore_commit_run(aftp_treestore *ts, aftp_treestore_group *g);
void aftp_treestore_commit_end(aftp_treestore *ts, aftp_treestore_group *g);
/* Syncs the journal of every open file with blocks written since its last
 * sync (the group commit does it too). AFTP_OK or the first error. */
int aftp_treestore_sync(aftp_treestore *ts);
/* The time bound on durability, called every few milliseconds by the
 * serve driver with a monotonic clock: syncs each file whose unsynced
 * blocks a tick first saw AFTP_TREESTORE_SYNC_NS or more ago. Without it
 * a large file between group commits would keep up to
 * AFTP_TREESTORE_SYNC_BYTES unsynced for as long as it took to arrive.
 * AFTP_OK or the first error. */
int aftp_treestore_tick(aftp_treestore *ts, uint64_t now_ns);
/* The server's periodic cleanup of resume state untouched for
 * ts->sweep.max_age_s (AFTP_JOURNAL_DEFAULT_MAX_AGE_S unless changed):
 * aftp_journal_sweep_step, up to `budget` entries; states removed, or an
 * error. */
int aftp_treestore_sweep_step(aftp_treestore *ts, unsigned budget);

/* XXH3-128 of the first `size` bytes of fd, as FILE_DONE carries it (a
 * file shorter than that: AFTP_ERR_IO). Both ends compare content with it. */
int aftp_treestore_digest(int fd, uint64_t size, uint8_t out[AFTP_DIGEST_LEN]);

/* Storage callbacks; `user` must be the aftp_treestore. `open` (one-file
 * mode) decides the file as an entry without flags: SEND or its error. */
extern const aftp_storage_ops aftp_treestore_ops;

#endif /* AFTP_TREESTORE_H */
