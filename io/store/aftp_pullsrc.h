/*
 * The server's storage for a pull (spec 9.15, 14.10): the paths a client
 * asks for, resolved beneath the root its key may read, walked as trees
 * and sent through the sender's storage (aftp_treesend).
 *
 * Resolution (storage op pull_path), in this order, each failure refusing
 * that path alone:
 * - the text: empty, absolute, an empty, "." or ".." component, a
 *   backslash or a control character: AFTP_ERR_PATH_REJECTED, before the
 *   file system is consulted (the reply never depends on what lies
 *   outside the root). One trailing '/' is allowed: rsync's rule, as for
 *   `aftp send`: "dir/" serves the directory's contents, "dir" the
 *   directory itself named "dir".
 * - the file system: openat2 beneath the root with RESOLVE_BENEATH and
 *   RESOLVE_NO_SYMLINKS: a symbolic link anywhere on the requested path
 *   (pointing in or out of the root) gets AFTP_ERR_PATH_REJECTED, so no
 *   link can lead a client out of its root; nothing there (or a file
 *   where a directory is named): AFTP_ERR_NOT_FOUND; unreadable:
 *   AFTP_ERR_PERMISSION; a FIFO, socket or device: AFTP_ERR_PATH_REJECTED.
 * - served: a file or a directory. The walk opens it again beneath the
 *   root the same way, then each directory inside by name beneath its
 *   parent's descriptor (O_NOFOLLOW), and every read of a file opens its
 *   path beneath the root again (aftp_source_openat, aftp_treesend.at):
 *   no pathname is ever resolved from "/" or the working directory, and
 *   a directory on the path swapped for a link at any moment makes that
 *   open fail (PATH_REJECTED: the entry is abandoned, or the served path
 *   skipped with a notice) instead of reading outside the root. What is
 *   read is also the version the entry offered (aftp_treesend.h).
 *
 * Inside a served tree the walk's rules apply (aftp_tree.h): links are
 * offered as links (their target, never followed), FIFOs, sockets and
 * devices are skipped with a notice.
 */
#ifndef AFTP_PULLSRC_H
#define AFTP_PULLSRC_H

#include "aftp/aftp_engine.h"
#include "aftp_tree.h"
#include "aftp_treesend.h"

typedef struct aftp_pullsrc {
    aftp_treesend tree;   /* the entries' sources; first: view and close go to it */
    int root_fd;          /* borrowed */
    char *served[AFTP_PULL_MAX_PATHS]; /* the served paths, as requested: the walk's SRCs */
    size_t served_count;
    int decided;          /* pull_path was called: the request is decided */
    unsigned flags;       /* the request's */
    aftp_tree walk;
    int walking, done, pending;
    uint32_t next_id;
    aftp_tree_entry e;
    aftp_entry_info info; /* the entry the window had no room for (pending) */
    aftp_tree_notice_fn notice; /* optional: what the walk skipped */
    void *notice_user;
    char message[512];    /* why the last path was refused */
} aftp_pullsrc;

/* Serves beneath root_fd (borrowed: it must outlive the pullsrc). notice,
 * optional, hears what the walks skip (aftp_tree_notice_fn), `local`
 * being the thing's path beneath the root ("pub/top/fifo"). */
void aftp_pullsrc_init(aftp_pullsrc *p, int root_fd, aftp_tree_notice_fn notice, void *user);
void aftp_pullsrc_fini(aftp_pullsrc *p);
/* The storage op pull_path (above); p->message says why a path was
 * refused, with the path. */
int aftp_pullsrc_path(aftp_pullsrc *p, uint32_t index, const char *path, unsigned flags);
/* Each turn of the session's loop: once the request is decided, adds the
 * served paths' entries to s as its window frees, and aftp_sender_finish
 * once the walk is over (at once when nothing was served). AFTP_OK, or
 * the error of an entry that cannot be described (the caller aborts). */
int aftp_pullsrc_feed(aftp_pullsrc *p, aftp_sender *s);

/* Storage callbacks for the sender engine of a pull's server; `user`
 * must be the aftp_pullsrc. */
extern const aftp_storage_ops aftp_pullsrc_ops;

#endif /* AFTP_PULLSRC_H */
