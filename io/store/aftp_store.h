/*
 * Destination storage of the receiver: one file at a time, written through
 * a shared mapping of a temporary file beside the target, made visible
 * under its final name only when verified (aftp_store_close with commit).
 *
 * Lifecycle of a file: open (path checked, free space checked) ->
 * (place?, write)* (space reserved a step ahead of the furthest write) ->
 * view* (read back to verify) -> close(commit=1: fsync, mode, mtime,
 * rename, fsync dir | commit=0: unlink). Residency is bounded
 * (aftp_resident.h), and each chunk written in full is handed to writeback
 * at once, so the final fsync has little left to do.
 */
#ifndef AFTP_STORE_H
#define AFTP_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aftp/aftp_engine.h"
#include "aftp_path.h"
#include "aftp_resident.h"

typedef struct aftp_store {
    int dirfd;              /* destination directory (borrowed) */
    int allow_overwrite;    /* the local user allowed replacing files */
    mode_t umask;
    /* the open file; fd < 0 when none */
    int fd;
    int parent_fd;
    uint32_t file_id;
    uint64_t size;
    uint64_t reserved;      /* [0, reserved) has its space allocated */
    uint32_t mode;
    int64_t mtime_ns;
    int overwrite;
    uint8_t *map;
    char leaf[AFTP_PATH_MAX_COMPONENT + 1];
    char tmp_name[AFTP_PATH_MAX_COMPONENT + 32];
    /* bytes written per chunk: a full chunk is handed to writeback */
    uint64_t chunk_size;
    uint64_t *chunk_filled;
    aftp_resident resident;
    aftp_path_report report; /* first failure of the current file */
} aftp_store;

/* Whether files can be received into the directory dirfd, checked when a
 * server starts rather than at its first transfer: a probe file is
 * created there as a transfer's temporary file is (O_EXCL | O_NOFOLLOW,
 * mode 0600) and removed at once. AFTP_OK, or the error with the
 * system's reason in `why`. A full disk passes: space is checked per
 * offer, and may be freed by then. */
int aftp_store_check_dir(int dirfd, char *why, size_t cap);
/* Opens the directory at path to receive into (*dirfd, O_DIRECTORY) and
 * checks it (aftp_store_check_dir): AFTP_OK, or the error with *dirfd -1
 * and "cannot use destination directory PATH: why" in `why`; `setting`
 * names where the path came from ("--dir") in the advice. */
int aftp_store_open_dir(const char *path, const char *setting, int *dirfd, char *why, size_t cap);

/* The aftp error for a system error of the destination (errno e). */
int aftp_store_errno_error(int e);
/* Creates ".<leaf>.aftp-<random>" in dirfd, exclusively (O_EXCL |
 * O_NOFOLLOW, mode 0600), its name in name[0..cap): the fd, or -1 with
 * errno. */
int aftp_store_create_tmp(int dirfd, const char *leaf, char *name, size_t cap);
/* Renames from_dir/from to to_dir/to; without `overwrite` an existing
 * `to` is never replaced (AFTP_ERR_FILE_EXISTS). AFTP_OK or the error,
 * errno set. */
int aftp_store_rename(int from_dir, const char *from, int to_dir, const char *to, int overwrite);

void aftp_store_init(aftp_store *st, int dirfd, int allow_overwrite);
/* Discards a file still open. */
void aftp_store_fini(aftp_store *st);

int aftp_store_open(aftp_store *st, const aftp_file_info *info);
int aftp_store_write(aftp_store *st, uint32_t file_id, uint64_t off, const uint8_t *data,
                     size_t len);
/* The mapped bytes [off, off+len) of the open file, writable, their space
 * reserved: the receiver opens a DATA payload straight into them, then
 * calls aftp_store_write with that pointer, which records the write
 * without copying. */
int aftp_store_place(aftp_store *st, uint32_t file_id, uint64_t off, size_t len, uint8_t **out);
int aftp_store_view(aftp_store *st, uint32_t file_id, uint64_t off, size_t len,
                    const uint8_t **out);
int aftp_store_close(aftp_store *st, uint32_t file_id, int commit);

/* Storage callbacks for the receiver engine; `user` must be the aftp_store. */
extern const aftp_storage_ops aftp_store_ops;

#endif /* AFTP_STORE_H */
