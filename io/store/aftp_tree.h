/*
 * The sender's walk of SRC... arguments into tree entries, one at a time.
 *
 * Order: each SRC in the order given; beneath a directory, parents before
 * children (pre-order, depth first) and each directory's names sorted
 * bytewise (strcmp), so a receiver creates every directory before it meets
 * anything inside it, and two walks of the same tree agree.
 *
 * Names (rsync's trailing-slash rule): SRC "dir" sends "dir" itself and
 * its contents as "dir/..."; SRC "dir/" (or one whose last component is
 * "." or "..") sends the contents only, named relative to it. A file SRC
 * is named by its last component.
 *
 * Links: a SRC that is a symbolic link is followed (as scp and rsync do);
 * links inside a tree are never followed: they are reported as
 * AFTP_TREE_SYMLINK entries with their target, and the caller decides
 * whether to send them.
 *
 * Descriptors: every SRC is opened (O_PATH) and what fstat says of the
 * opened descriptor decides its kind; every directory inside is opened
 * by name beneath its parent's descriptor with O_NOFOLLOW, the opened
 * descriptor's fstat deciding again, so a directory swapped for a link
 * between the listing and the open is never entered. A walk made with
 * aftp_tree_init_beneath (a pull's server) resolves its SRCs beneath a
 * root (aftp_source_openat: no link anywhere on the path, nothing out of
 * the root), and its entries' `local` are paths beneath that root, to be
 * opened only through aftp_source_openat(e->at, ...).
 *
 * Skipped, each with a notice (path and why), the walk going on: FIFOs,
 * sockets, devices; regular files on kernel file systems whose sizes are
 * not their content (proc, sysfs...: aftp_source_pseudo_fs); names with a
 * control character (a newline, tab, escape...: the receiver refuses them
 * (spec 14.4), and they would forge lines in logs and terminals) -- a
 * directory so named is skipped with everything in it; paths longer than
 * the wire allows (AFTP_WIRE_MAX_PATH); directories deeper than
 * AFTP_TREE_MAX_DEPTH; anything that cannot be read (EACCES), loops
 * (ELOOP), or vanishes during the walk (ENOENT). Other bytes are kept as
 * they are (UTF-8 or not).
 *
 * Bounds: one open directory per level of the current path (at most
 * AFTP_TREE_MAX_DEPTH + 1 descriptors), and in memory the names of the
 * directories on the current path only (each directory's names are read
 * in full when it is entered, to sort them, at most
 * AFTP_TREE_MAX_DIR_BYTES of names per directory), never the tree.
 */
#ifndef AFTP_TREE_H
#define AFTP_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

/* Levels of directories beneath a SRC: bounds the walk's descriptors. */
#define AFTP_TREE_MAX_DEPTH 128u
/* Bytes of names (with a NUL each) of one directory: 64 MiB is about
 * three million names of 20 bytes. */
#define AFTP_TREE_MAX_DIR_BYTES (UINT64_C(64) << 20)
/* A local path: a SRC argument and a relative path beneath it. */
#define AFTP_TREE_LOCAL_MAX (AFTP_WIRE_MAX_PATH * 2u)

typedef enum aftp_tree_kind {
    AFTP_TREE_FILE = 1,
    AFTP_TREE_DIR = 2,
    AFTP_TREE_SYMLINK = 3,
} aftp_tree_kind;

/* One entry; its strings live in the walk until the next call. */
typedef struct aftp_tree_entry {
    aftp_tree_kind kind;
    const char *path;   /* destination path, relative, '/'-separated */
    const char *local;  /* where to open it here: the SRC joined with the rest */
    int at;             /* what `local` is relative to (aftp_source_openat): AT_FDCWD,
                         * or the root of a walk beneath one */
    const char *target; /* a symlink's target, literal; NULL otherwise */
    uint64_t size;      /* bytes of a file; 0 for a directory, the target's length for a link */
    int64_t mtime_ns;
    uint32_t mode;      /* permission bits with setuid/setgid/sticky (07777) */
    /* the source's identity: a file changed since it was seen differs here */
    uint64_t dev, ino;
    int64_t ctime_ns;
} aftp_tree_entry;

/* Called for each thing skipped: `local` is its path here (raw bytes:
 * print it through aftp_path_printable), err the aftp error it would give,
 * why a sentence saying what and what to do. */
typedef void (*aftp_tree_notice_fn)(void *user, const char *local, int err, const char *why);

typedef struct aftp_tree_level aftp_tree_level;

typedef struct aftp_tree {
    const char *const *srcs;
    size_t nsrcs, next_src;
    aftp_tree_level *levels; /* AFTP_TREE_MAX_DEPTH + 1 of them */
    size_t depth;            /* levels in use */
    aftp_tree_notice_fn notice;
    void *user;
    int at; /* AT_FDCWD, or the root of aftp_tree_init_beneath (borrowed) */
    char path[AFTP_WIRE_MAX_PATH + 1];
    char local[AFTP_TREE_LOCAL_MAX + 1];
    char target[AFTP_WIRE_MAX_PATH + 1];
} aftp_tree;

/* Prepares a walk of srcs[0..n) (borrowed until aftp_tree_fini); nothing
 * is opened yet. AFTP_ERR_NO_MEMORY, or AFTP_OK. */
int aftp_tree_init(aftp_tree *t, const char *const *srcs, size_t n, aftp_tree_notice_fn notice,
                   void *user);
/* aftp_tree_init of srcs relative to root_fd (borrowed until
 * aftp_tree_fini), each resolved beneath it, no link followed on its
 * path, the named one included (above: a link there is noticed as
 * AFTP_ERR_PATH_REJECTED, as a pull refuses it). */
int aftp_tree_init_beneath(aftp_tree *t, int root_fd, const char *const *srcs, size_t n,
                           aftp_tree_notice_fn notice, void *user);
/* The next entry: 1 with *e filled, 0 when the walk is over. Errors of an
 * entry are notices, never the end of the walk. */
int aftp_tree_next(aftp_tree *t, aftp_tree_entry *e);
/* Closes what the walk holds open; safe after any call. */
void aftp_tree_fini(aftp_tree *t);

/* The next data extent of the file fd (of `size` bytes) at or after
 * `from`: 1 with [*start, *end) holding data, 0 when only a hole (or
 * nothing) remains. Holes (SEEK_DATA / SEEK_HOLE) need not be sent; where
 * the file system cannot tell, the rest of the file is one extent. Moves
 * fd's file offset. AFTP_ERR_IO on failure. */
int aftp_tree_data_extent(int fd, uint64_t size, uint64_t from, uint64_t *start, uint64_t *end);

#endif /* AFTP_TREE_H */
