/*
 * Paths chosen by the peer, made safe before they touch the file system.
 * The receiver decides where files land: a peer path is relative, checked
 * component by component, and opened beneath the destination directory
 * without following any symbolic link.
 */
#ifndef AFTP_PATH_H
#define AFTP_PATH_H

#include <stddef.h>

#include "aftp/aftp_error.h"

#define AFTP_PATH_MAX_COMPONENT 255u /* NAME_MAX of Linux file systems */

/* AFTP_OK when `path` is a non-empty relative path of at most
 * AFTP_WIRE_MAX_PATH bytes whose '/'-separated components are each
 * non-empty, not "." or "..", at most AFTP_PATH_MAX_COMPONENT bytes and free
 * of control characters (bytes below 0x20 and 0x7f); otherwise
 * AFTP_ERR_PATH_REJECTED. */
int aftp_path_check(const char *path);

/* Opens the directory that will hold `path` beneath `dirfd`: each
 * intermediate component is opened with O_NOFOLLOW|O_DIRECTORY (created
 * mode 0755 when missing), so no symbolic link is ever followed.
 * On success *parent_fd is the directory (caller closes) and *leaf points
 * to the last component inside `path`. `path` must pass aftp_path_check. */
int aftp_path_open_parent(int dirfd, const char *path, int *parent_fd, const char **leaf);

/* Copies `text` into buf with control characters and non-ASCII bytes
 * escaped as \xHH, so a peer's path never writes raw bytes to a terminal. */
void aftp_path_printable(const char *text, char *buf, size_t cap);

/* A storage's account of its current file, for reports: its first failure. */
typedef struct aftp_path_report {
    char name[AFTP_PATH_MAX_COMPONENT + 1]; /* the file as messages name it */
    int last_error;    /* first failure of the current file, AFTP_OK while none */
    char message[512]; /* "<what> <name>[: detail]", name printable */
} aftp_path_report;

/* A new file, offered as `path`: the report cleared and named after it;
 * AFTP_ERR_PATH_REJECTED, reported, when aftp_path_check refuses it. */
int aftp_path_report_start(aftp_path_report *r, const char *path);
/* Records err unless a failure is recorded already; returns err. */
int aftp_path_report_fail(aftp_path_report *r, int err, const char *what, const char *detail);

#endif /* AFTP_PATH_H */
