/*
 * Source storage of the sender: the file mapped read-only, DATA payloads
 * borrowed straight from the mapping (no staging copy). Residency is
 * bounded (aftp_resident.h): a repair of an old block simply faults its
 * page back in, so the resident set stays small on huge files.
 *
 * A source that changes or shrinks while it is sent fails the transfer
 * with AFTP_ERR_SOURCE_CHANGED rather than the process with SIGBUS: the
 * mapping has a guard (aftp_mapguard.h) under which the driver runs the
 * engine's reads, and aftp_source_check compares size and mtime with what
 * was opened. Once either trips, every view fails.
 *
 * Only files whose size is true are sent: the size goes into the offer
 * and the receiver verifies exactly that many bytes, so a file that reads
 * longer than it says (kernel pseudo files) would arrive cut short as a
 * "verified" copy.
 */
#ifndef AFTP_SOURCE_H
#define AFTP_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "aftp/aftp_engine.h"
#include "aftp_mapguard.h"
#include "aftp_path.h"
#include "aftp_resident.h"

typedef struct aftp_source {
    int fd;
    const uint8_t *map;
    uint64_t size;
    int64_t mtime_ns;
    /* the rest of the file's identity as opened (a tree's entry compares
     * it with what the walk saw: aftp_treesend.h) */
    uint64_t dev, ino;
    int64_t ctime_ns;
    uint32_t file_id;
    aftp_resident resident;
    aftp_mapguard guard;
    const char *name;   /* the path sent to the peer (inside the caller's string or faux_name) */
    int faux;           /* a faux:// source: zeros, no file (aftp_faux.h) */
    char faux_name[AFTP_PATH_MAX_COMPONENT + 1];
    char message[512];  /* detail of a failed open, or of a change */
} aftp_source;

/* Opens `path` (must be a readable regular file, or a faux:// source) as
 * file `file_id` and fills *info (path = the base name). Never blocks on a
 * FIFO or device. Errors: AFTP_ERR_NOT_FOUND, AFTP_ERR_PERMISSION,
 * AFTP_ERR_INVALID_ARGUMENT (not a regular file, or one whose size the
 * file system does not know: on proc, sysfs and the like, or reporting 0
 * bytes while it has content), AFTP_ERR_IO; src->message says what
 * happened. */
int aftp_source_open(aftp_source *src, const char *path, uint32_t file_id, aftp_file_info *info);
/* aftp_source_open of `path` as aftp_source_openat resolves it from `at`
 * (a link or escape beneath a root: AFTP_ERR_PATH_REJECTED). */
int aftp_source_open_at(aftp_source *src, int at, const char *path, uint32_t file_id,
                        aftp_file_info *info);
void aftp_source_fini(aftp_source *src);

int aftp_source_view(aftp_source *src, uint32_t file_id, uint64_t off, size_t len,
                     const uint8_t **out);

/* AFTP_OK while the file is as opened (same size and mtime, no read
 * faulted past its end); otherwise AFTP_ERR_SOURCE_CHANGED, with the guard
 * tripped and src->message saying what changed. */
int aftp_source_check(aftp_source *src);

/* Releases residency that is due; call after the borrowed payloads of a
 * batch have been sent (they are read by the kernel only then). */
void aftp_source_settle(aftp_source *src);

/* The name of the kernel file system (proc, sysfs...) holding fd, whose
 * files' sizes say nothing of their content; NULL for any other. */
const char *aftp_source_pseudo_fs(int fd);

/* Opens a sender's local path (O_CLOEXEC added to flags): at AT_FDCWD as
 * open(2) does, links followed (the push side: a link named on the
 * command line is the user's choice); any other `at` is a root the path
 * stays beneath: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS, so no pathname is resolved from "/" or the
 * working directory, no symbolic link anywhere on the path is followed
 * (ELOOP) and no ".." or rename race leads out of the root (EXDEV), at
 * the moment of each open, whatever changed since an earlier one. The
 * descriptor, or -1 with errno. */
int aftp_source_openat(int at, const char *path, int flags);
/* The aftp error of an errno from those opens, *why the sentence that
 * says it (ELOOP, EXDEV beneath a root: AFTP_ERR_PATH_REJECTED, "a
 * symbolic link on its path"; ENOENT: AFTP_ERR_NOT_FOUND; ...). */
int aftp_source_errno_error(int e, const char **why);
/* stat of that path resolved the same way (beneath a root: through an
 * O_PATH descriptor, fstat deciding). 0, or -1 with errno. */
int aftp_source_statat(int at, const char *path, struct stat *sb);

/* Storage callbacks for the sender engine; `user` must be the aftp_source. */
extern const aftp_storage_ops aftp_source_ops;

#endif /* AFTP_SOURCE_H */
