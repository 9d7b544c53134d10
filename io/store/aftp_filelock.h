/*
 * The destination files being written, for one server process (one hub):
 * a table of claims, each a file named by its root (device and inode of
 * the root directory) and its path beneath that root, held by one owner
 * (a session's storage). Shared by the sessions of every worker thread,
 * under its own mutex.
 *
 * Why: a file's partial data and resume state (aftp_journal) belong to
 * the session writing it. Two sessions writing one file at once would
 * mix their blocks in one partial file and race for one journal; a sender
 * restarted after a crash would race its own lingering session. A session
 * claims a file before it decides the file's verdict and releases it when
 * the file's entry ends (or the session does); a file claimed elsewhere
 * waits for that release, so the later session resumes from what the
 * earlier one made durable. Distinct files, of one client or not, never
 * wait for each other.
 *
 * Deadlock cannot arise from the table alone: an owner holds a claim only
 * for a file it is writing (its verdict given), whose data keeps flowing
 * and whose entry ends by itself (committed, failed, abandoned, or the
 * session's end), never waiting on another claim.
 *
 * Memory: one node per claim held (a path of at most AFTP_WIRE_MAX_PATH
 * bytes), at most the server's sessions times their entry window.
 */
#ifndef AFTP_FILELOCK_H
#define AFTP_FILELOCK_H

#include <sys/types.h>

typedef struct aftp_filelocks aftp_filelocks;

/* The file a claim names: its root and its path beneath it (as checked
 * by aftp_path_check: no empty, "." or ".." component, so equal paths
 * are equal strings). */
typedef struct aftp_filelock_key {
    dev_t dev;
    ino_t ino;
    const char *path;
} aftp_filelock_key;

/* A table, empty; NULL when out of memory. */
aftp_filelocks *aftp_filelocks_new(void);
/* Frees it with whatever claims remain. */
void aftp_filelocks_del(aftp_filelocks *t);

/* Claims the file for `owner`: 1 when it is now owner's (an owner may
 * claim a file it holds again: each claim is released once), 0 when
 * another owner holds it (try again once it may have ended),
 * AFTP_ERR_NO_MEMORY. Any thread. */
int aftp_filelocks_claim(aftp_filelocks *t, const aftp_filelock_key *key, const void *owner);
/* Releases one of owner's claims of the file; the file is free once all
 * are (none held: nothing). Any thread. */
void aftp_filelocks_release(aftp_filelocks *t, const aftp_filelock_key *key, const void *owner);
/* Files claimed, for tests and bounds. */
size_t aftp_filelocks_count(aftp_filelocks *t);

#endif /* AFTP_FILELOCK_H */
