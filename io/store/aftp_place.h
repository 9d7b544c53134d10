/*
 * The receiver's placement of a tree beneath its destination root:
 * directories, symbolic links, files written sparsely into temporary
 * names, their metadata, and the group commit that makes a batch of
 * completed files durable before any of them appears under its final name.
 *
 * Paths: every path passes aftp_path_check (no "..", not absolute, no
 * control characters: spec 14.4) and is opened beneath the root one
 * component at a time with O_NOFOLLOW (aftp_path_open_parent): a link in
 * any component is refused (AFTP_ERR_PATH_REJECTED), never followed, even
 * a link this placement created itself.
 *
 * Order: entries come as aftp_tree gives them (parents before children,
 * depth first). A directory is created private (0700) when met; its mode
 * and mtime are applied once the walk has left it and every file placed
 * beneath it was committed or aborted, so its contents no longer change
 * its mtime (nor does a read-only mode stop them being written).
 *
 * Metadata defaults (aftp_place_defaults): the sender's permission bits
 * are kept, setuid, setgid and sticky are not (mode_mask 0777, as rsync -a
 * without root's extras; 07777 keeps them, 0 gives 0 -- callers wanting
 * scp's plain behaviour mask with ~umask); mtime is always applied, to
 * files, directories and links. Links are recreated only when asked
 * (links = 1), their targets literal and never followed.
 *
 * Sparse: a file gets its size at open (ftruncate: a hole); zero blocks
 * written to it are skipped, so holes stay holes. The temporary file is
 * fresh, so skipping is exact.
 *
 * Group commit (aftp_place_batch_*): (1) sync: metadata of each file, then
 * its data made durable (fsync each, or one syncfs of the root's file
 * system); (2) rename: each file to its final name (never replacing one
 * without overwrite); (3) finish: fsync each touched directory once. A
 * crash before (2) completes leaves only temporary names; no final name
 * ever points at data not yet durable. (2) refuses to run before (1).
 *
 * Bounds: open descriptors: one per directory on the current path or
 * holding an uncommitted file (their records, freed when applied), plus
 * two per open file (file, parent); memory likewise: never the tree.
 */
#ifndef AFTP_PLACE_H
#define AFTP_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aftp_path.h"

#define AFTP_PLACE_MODE_DEFAULT 0777u /* permission bits, without setuid/setgid/sticky */
#define AFTP_PLACE_BATCH_MAX 256u     /* files per group commit */
#define AFTP_PLACE_MAX_DEPTH 256u     /* directories on the current path */
#define AFTP_PLACE_ZERO_GRAIN 4096u   /* zero runs this long, aligned, are not written */

typedef struct aftp_place_options {
    uint32_t mode_mask; /* bits of the sender's mode kept */
    int links;          /* recreate symbolic links (else they are refused) */
    int overwrite;      /* replace existing files and links */
    int sync_fs;        /* a group commit syncs the file system once, not each file */
} aftp_place_options;

typedef struct aftp_place_dirrec aftp_place_dirrec;

typedef struct aftp_place {
    int root; /* borrowed */
    aftp_place_options opt;
    aftp_place_dirrec *path[AFTP_PLACE_MAX_DEPTH]; /* directories on the current path */
    size_t depth;
    int dir_error;     /* the first failure to apply a directory's metadata */
    char message[512]; /* the last failure: "<what> <path>: <why>", path printable */
} aftp_place;

/* A file being received: its temporary name, then its final one. */
typedef struct aftp_place_file {
    int fd, parent_fd;
    dev_t parent_dev;
    ino_t parent_ino;
    uint64_t size;
    uint32_t mode;
    int64_t mtime_ns;
    int error; /* of its commit, AFTP_OK while none */
    aftp_place_dirrec *dir;
    char leaf[AFTP_PATH_MAX_COMPONENT + 1];
    char tmp[AFTP_PATH_MAX_COMPONENT + 32];
} aftp_place_file;

typedef enum aftp_place_stage {
    AFTP_PLACE_COLLECTING = 0,
    AFTP_PLACE_SYNCED,
    AFTP_PLACE_RENAMED,
} aftp_place_stage;

typedef struct aftp_place_batch {
    aftp_place_file *files[AFTP_PLACE_BATCH_MAX]; /* borrowed until finished */
    size_t count;
    aftp_place_stage stage;
} aftp_place_batch;

void aftp_place_defaults(aftp_place_options *opt);
void aftp_place_init(aftp_place *p, int root, const aftp_place_options *opt);
/* Applies the metadata of every directory still held (files still open
 * beneath them are the caller's to commit or abort first). AFTP_OK, or
 * the first failure to apply a directory's metadata since init. */
int aftp_place_finish(aftp_place *p);

/* Creates directory `path` (an existing one is fine; a file or link in
 * its way is AFTP_ERR_PATH_REJECTED); mode and mtime come later. */
int aftp_place_dir(aftp_place *p, const char *path, uint32_t mode, int64_t mtime_ns);
/* Creates link `path` -> target (literal), its mtime set. Refused
 * (AFTP_ERR_PATH_REJECTED) unless links were asked for. */
int aftp_place_symlink(aftp_place *p, const char *path, const char *target, int64_t mtime_ns);

/* A file placed beneath `path`'s directories by other means (the resume
 * journal's partial file, renamed in later): the nearest placed directory
 * above `path` keeps its mode and mtime back until aftp_place_unhold, as
 * for a file of aftp_place_file_open. Returns that directory (NULL: none). */
aftp_place_dirrec *aftp_place_hold(aftp_place *p, const char *path);
void aftp_place_unhold(aftp_place *p, aftp_place_dirrec *d); /* NULL-safe */
/* The sender's mode (masked by policy) and mtime applied to an open file. */
int aftp_place_apply_meta(aftp_place *p, int fd, uint32_t mode, int64_t mtime_ns);
/* The same for regular file `name` in dirfd, by name: no descriptor of
 * the file needed. The name must be private to the caller (a directory
 * no one else writes to): fchmodat follows a link there. */
int aftp_place_apply_meta_at(aftp_place *p, int dirfd, const char *name, uint32_t mode,
                             int64_t mtime_ns);

/* Opens a temporary file for `path`, `size` bytes of holes. */
int aftp_place_file_open(aftp_place *p, const char *path, uint64_t size, uint32_t mode,
                         int64_t mtime_ns, aftp_place_file *f);
/* Writes [off, off+len), skipping zero grains (they are holes already). */
int aftp_place_file_write(aftp_place *p, aftp_place_file *f, uint64_t off, const uint8_t *data,
                          size_t len);
/* Discards the file: its temporary name removed, nothing placed. */
void aftp_place_file_abort(aftp_place *p, aftp_place_file *f);

/* Adds a completed file (AFTP_ERR_LIMIT when full, AFTP_ERR_INVALID_STATE
 * once the batch has synced). */
int aftp_place_batch_add(aftp_place_batch *b, aftp_place_file *f);
/* Step 1: metadata, then data durable. */
int aftp_place_batch_sync(aftp_place *p, aftp_place_batch *b);
/* Step 2: final names; AFTP_ERR_INVALID_STATE before step 1. */
int aftp_place_batch_rename(aftp_place *p, aftp_place_batch *b);
/* Step 3: each touched directory synced once; the files released (each
 * file's own result in f->error) and the batch emptied. */
int aftp_place_batch_finish(aftp_place *p, aftp_place_batch *b);
/* Steps 1 to 3. AFTP_OK, or the first file's error. */
int aftp_place_batch_commit(aftp_place *p, aftp_place_batch *b);
/* Discards the batch: files not yet renamed lose their temporary names. */
void aftp_place_batch_abort(aftp_place *p, aftp_place_batch *b);

#endif /* AFTP_PLACE_H */
