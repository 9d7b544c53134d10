#include "aftp_place.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "aftp_store.h"

/* A directory placed: its metadata waits until nothing beneath it changes. */
struct aftp_place_dirrec {
    int fd;
    uint32_t mode;
    int64_t mtime_ns;
    size_t pending;         /* files and directory records beneath it, not yet done */
    int left;               /* the walk has left it */
    aftp_place_dirrec *parent; /* the nearest placed ancestor, or NULL */
    char *path;
};

/* Records "<what> <path>: <why>" and returns err. */
static int fail(aftp_place *p, int err, const char *what, const char *path, const char *why)
{
    char printable[256];
    aftp_path_printable(path, printable, sizeof printable);
    snprintf(p->message, sizeof p->message, "%s %s: %s", what, printable, why);
    return err;
}

static int fail_errno(aftp_place *p, const char *what, const char *path)
{
    int e = errno;
    return fail(p, aftp_store_errno_error(e), what, path, strerror(e));
}

void aftp_place_defaults(aftp_place_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->mode_mask = AFTP_PLACE_MODE_DEFAULT;
}

void aftp_place_init(aftp_place *p, int root, const aftp_place_options *opt)
{
    memset(p, 0, sizeof *p);
    p->root = root;
    if (opt != NULL)
        p->opt = *opt;
    else
        aftp_place_defaults(&p->opt);
}

static struct timespec timespec_of(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    if (ts.tv_nsec < 0) {
        ts.tv_sec -= 1;
        ts.tv_nsec += 1000000000;
    }
    return ts;
}

/* Mode (masked by policy) and mtime of an open file or directory. */
int aftp_place_apply_meta(aftp_place *p, int fd, uint32_t mode, int64_t mtime_ns)
{
    struct timespec times[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, timespec_of(mtime_ns)};
    if (fchmod(fd, (mode_t)(mode & p->opt.mode_mask & 07777)) != 0 || futimens(fd, times) != 0)
        return aftp_store_errno_error(errno);
    return AFTP_OK;
}

int aftp_place_apply_meta_at(aftp_place *p, int dirfd, const char *name, uint32_t mode,
                             int64_t mtime_ns)
{
    struct timespec times[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, timespec_of(mtime_ns)};
    if (fchmodat(dirfd, name, (mode_t)(mode & p->opt.mode_mask & 07777), 0) != 0 ||
        utimensat(dirfd, name, times, AT_SYMLINK_NOFOLLOW) != 0)
        return aftp_store_errno_error(errno);
    return AFTP_OK;
}

/* A directory's metadata, once the walk left it and nothing beneath it is
 * pending; then its parent's turn may have come. A failure is kept for
 * aftp_place_finish: it belongs to no entry the caller is placing now. */
static void settle_dir(aftp_place *p, aftp_place_dirrec *d)
{
    while (d != NULL && d->left && d->pending == 0) {
        if (aftp_place_apply_meta(p, d->fd, d->mode, d->mtime_ns) != AFTP_OK &&
            p->dir_error == AFTP_OK)
            p->dir_error = fail_errno(p, "cannot set the mode or time of directory", d->path);
        aftp_place_dirrec *parent = d->parent;
        close(d->fd);
        free(d->path);
        free(d);
        if (parent != NULL)
            parent->pending--;
        d = parent;
    }
}

/* Whether `path` lies beneath directory `dir`. */
static int beneath(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* The walk is at `path`: directories it has left are done. Returns the
 * nearest placed ancestor of path, or NULL. */
static aftp_place_dirrec *walk_to(aftp_place *p, const char *path)
{
    while (p->depth > 0 && !beneath(path, p->path[p->depth - 1]->path)) {
        aftp_place_dirrec *d = p->path[--p->depth];
        d->left = 1;
        settle_dir(p, d);
    }
    return p->depth > 0 ? p->path[p->depth - 1] : NULL;
}

int aftp_place_finish(aftp_place *p)
{
    walk_to(p, ""); /* beneath no directory: the walk has left them all */
    return p->dir_error;
}

/* Opens the parent of a checked `path` beneath the root. */
static int open_parent(aftp_place *p, const char *what, const char *path, int *parent,
                       const char **leaf)
{
    if (aftp_path_check(path) != AFTP_OK)
        return fail(p, AFTP_ERR_PATH_REJECTED, what, path,
                    "unsafe path (absolute, '..', empty or control characters)");
    int rc = aftp_path_open_parent(p->root, path, parent, leaf);
    if (rc != AFTP_OK)
        return fail(p, rc, what, path, rc == AFTP_ERR_PATH_REJECTED
                                           ? "a file or symbolic link is in the way"
                                           : aftp_strerror(rc));
    return AFTP_OK;
}

/* mkdir, or the directory already there; never through a link. */
static int make_dir(aftp_place *p, int parent, const char *leaf, const char *path)
{
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    if (mkdirat(parent, leaf, 0700) != 0 && errno != EEXIST)
        return fail_errno(p, "cannot create directory", path);
    int fd = openat(parent, leaf, flags);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
        return fail(p, AFTP_ERR_PATH_REJECTED, "cannot create directory", path,
                    "a file or symbolic link is in the way");
    return fd < 0 ? fail_errno(p, "cannot open directory", path) : fd;
}

static int push_dir(aftp_place *p, aftp_place_dirrec *parent, int fd, const char *path,
                    uint32_t mode, int64_t mtime_ns)
{
    char why[96];
    aftp_place_dirrec *d = p->depth < AFTP_PLACE_MAX_DEPTH ? calloc(1, sizeof *d) : NULL;
    char *copy = d != NULL ? strdup(path) : NULL;
    if (copy == NULL) {
        free(d);
        close(fd);
        snprintf(why, sizeof why, "more than %u levels of directories, or out of memory",
                 AFTP_PLACE_MAX_DEPTH);
        return fail(p, p->depth < AFTP_PLACE_MAX_DEPTH ? AFTP_ERR_NO_MEMORY : AFTP_ERR_LIMIT,
                    "cannot place directory", path, why);
    }
    *d = (aftp_place_dirrec){.fd = fd, .mode = mode, .mtime_ns = mtime_ns, .parent = parent,
                          .path = copy};
    if (parent != NULL)
        parent->pending++;
    p->path[p->depth++] = d;
    return AFTP_OK;
}

int aftp_place_dir(aftp_place *p, const char *path, uint32_t mode, int64_t mtime_ns)
{
    int parent;
    const char *leaf;
    aftp_place_dirrec *up = walk_to(p, path);
    int rc = open_parent(p, "cannot create directory", path, &parent, &leaf);
    if (rc != AFTP_OK)
        return rc;
    int fd = make_dir(p, parent, leaf, path);
    close(parent);
    return fd < 0 ? fd : push_dir(p, up, fd, path, mode, mtime_ns);
}

/* A link at a temporary name, renamed over what is there. */
static int replace_with_link(aftp_place *p, int parent, const char *leaf, const char *target,
                             const char *path)
{
    char tmp[AFTP_PATH_MAX_COMPONENT + 32];
    struct stat sb;
    if (fstatat(parent, leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
        return fail(p, AFTP_ERR_PATH_REJECTED, "cannot create link", path,
                    "a directory is there, and only files and links are replaced");
    int fd = aftp_store_create_tmp(parent, leaf, tmp, sizeof tmp); /* reserves a free name */
    if (fd < 0)
        return fail_errno(p, "cannot create link", path);
    close(fd);
    if (unlinkat(parent, tmp, 0) != 0 || symlinkat(target, parent, tmp) != 0)
        return fail_errno(p, "cannot create link", path);
    if (renameat(parent, tmp, parent, leaf) != 0) {
        int rc = fail_errno(p, "cannot create link", path);
        unlinkat(parent, tmp, 0);
        return rc;
    }
    return AFTP_OK;
}

static int make_link(aftp_place *p, int parent, const char *leaf, const char *target,
                     const char *path)
{
    if (symlinkat(target, parent, leaf) == 0)
        return AFTP_OK;
    if (errno != EEXIST)
        return fail_errno(p, "cannot create link", path);
    if (!p->opt.overwrite)
        return fail(p, AFTP_ERR_FILE_EXISTS, "refusing to replace", path, "use --overwrite");
    return replace_with_link(p, parent, leaf, target, path);
}

int aftp_place_symlink(aftp_place *p, const char *path, const char *target, int64_t mtime_ns)
{
    int parent;
    const char *leaf;
    walk_to(p, path);
    if (!p->opt.links)
        return fail(p, AFTP_ERR_PATH_REJECTED, "refusing symbolic link", path,
                    "links are recreated only when asked");
    int rc = open_parent(p, "cannot create link", path, &parent, &leaf);
    if (rc != AFTP_OK)
        return rc;
    rc = make_link(p, parent, leaf, target, path);
    struct timespec times[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, timespec_of(mtime_ns)};
    if (rc == AFTP_OK && utimensat(parent, leaf, times, AT_SYMLINK_NOFOLLOW) != 0)
        rc = fail_errno(p, "cannot set the time of link", path);
    close(parent);
    return rc;
}

/* What is at the final name may be replaced by a file. */
static int check_existing(aftp_place *p, const aftp_place_file *f, const char *path)
{
    struct stat sb;
    if (fstatat(f->parent_fd, f->leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? AFTP_OK : fail_errno(p, "cannot check", path);
    if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return fail(p, AFTP_ERR_PATH_REJECTED, "cannot store", path,
                    "something other than a file is there, and only files are replaced");
    if (!p->opt.overwrite)
        return fail(p, AFTP_ERR_FILE_EXISTS, "refusing to replace existing file", path,
                    "use --overwrite");
    return AFTP_OK;
}

static int create_sized(aftp_place *p, aftp_place_file *f, const char *path)
{
    struct stat sb;
    if (fstat(f->parent_fd, &sb) != 0)
        return fail_errno(p, "cannot check the directory of", path);
    f->parent_dev = sb.st_dev;
    f->parent_ino = sb.st_ino;
    f->fd = aftp_store_create_tmp(f->parent_fd, f->leaf, f->tmp, sizeof f->tmp);
    if (f->fd < 0)
        return fail_errno(p, "cannot create a temporary file for", path);
    if (ftruncate(f->fd, (off_t)f->size) != 0)
        return fail_errno(p, "cannot size", path);
    return AFTP_OK;
}

/* Closes what f holds; with `unlink_tmp` its temporary name goes too. */
static void release(aftp_place *p, aftp_place_file *f, int unlink_tmp)
{
    if (unlink_tmp && f->parent_fd >= 0 && f->fd >= 0)
        unlinkat(f->parent_fd, f->tmp, 0);
    if (f->fd >= 0)
        close(f->fd);
    if (f->parent_fd >= 0)
        close(f->parent_fd);
    f->fd = f->parent_fd = -1;
    if (f->dir != NULL) {
        f->dir->pending--;
        settle_dir(p, f->dir);
        f->dir = NULL;
    }
}

int aftp_place_file_open(aftp_place *p, const char *path, uint64_t size, uint32_t mode,
                         int64_t mtime_ns, aftp_place_file *f)
{
    const char *leaf;
    memset(f, 0, sizeof *f);
    f->fd = f->parent_fd = -1;
    aftp_place_dirrec *up = walk_to(p, path);
    int rc = open_parent(p, "cannot store", path, &f->parent_fd, &leaf);
    if (rc != AFTP_OK)
        return rc;
    snprintf(f->leaf, sizeof f->leaf, "%s", leaf);
    f->size = size;
    f->mode = mode;
    f->mtime_ns = mtime_ns;
    if ((rc = check_existing(p, f, path)) != AFTP_OK ||
        (rc = create_sized(p, f, path)) != AFTP_OK) {
        release(p, f, 1);
        return rc;
    }
    f->dir = up;
    if (up != NULL)
        up->pending++;
    return AFTP_OK;
}

aftp_place_dirrec *aftp_place_hold(aftp_place *p, const char *path)
{
    aftp_place_dirrec *up = walk_to(p, path);
    if (up != NULL)
        up->pending++;
    return up;
}

void aftp_place_unhold(aftp_place *p, aftp_place_dirrec *d)
{
    if (d == NULL)
        return;
    d->pending--;
    settle_dir(p, d);
}

static int is_zero(const uint8_t *b, size_t n)
{
    return n == 0 || (b[0] == 0 && memcmp(b, b + 1, n - 1) == 0);
}

/* Writes data[0..n) at off in full. */
static int write_all(int fd, uint64_t off, const uint8_t *data, size_t n)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, data, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        data += w;
        off += (uint64_t)w;
        n -= (size_t)w;
    }
    return 0;
}

int aftp_place_file_write(aftp_place *p, aftp_place_file *f, uint64_t off, const uint8_t *data,
                          size_t len)
{
    if (f->fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (off > f->size || len > f->size - off)
        return AFTP_ERR_INVALID_ARGUMENT;
    size_t run = 0; /* bytes of non-zero grains before `at`, not yet written */
    for (size_t at = 0; at < len;) {
        size_t grain = AFTP_PLACE_ZERO_GRAIN - (size_t)((off + at) % AFTP_PLACE_ZERO_GRAIN);
        size_t n = len - at < grain ? len - at : grain;
        int zero = is_zero(data + at, n);
        int e = zero && run > 0 ? write_all(f->fd, off + at - run, data + at - run, run) : 0;
        if (e != 0)
            return fail(p, aftp_store_errno_error(e), "cannot write", f->leaf,
                        strerror(e));
        run = zero ? 0 : run + n;
        at += n;
    }
    int e = write_all(f->fd, off + len - run, data + len - run, run);
    return e == 0 ? AFTP_OK
                  : fail(p, aftp_store_errno_error(e), "cannot write", f->leaf, strerror(e));
}

void aftp_place_file_abort(aftp_place *p, aftp_place_file *f)
{
    release(p, f, 1);
}

int aftp_place_batch_add(aftp_place_batch *b, aftp_place_file *f)
{
    if (b->stage != AFTP_PLACE_COLLECTING || f->fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (b->count == AFTP_PLACE_BATCH_MAX)
        return AFTP_ERR_LIMIT;
    f->error = AFTP_OK;
    b->files[b->count++] = f;
    return AFTP_OK;
}

/* Records a file's first failure; returns it. */
static int file_fail(aftp_place *p, aftp_place_file *f, const char *what)
{
    int rc = fail_errno(p, what, f->leaf);
    if (f->error == AFTP_OK)
        f->error = rc;
    return rc;
}

int aftp_place_batch_sync(aftp_place *p, aftp_place_batch *b)
{
    int rc = AFTP_OK;
    if (b->stage != AFTP_PLACE_COLLECTING)
        return AFTP_ERR_INVALID_STATE;
    for (size_t i = 0; i < b->count; i++) {
        aftp_place_file *f = b->files[i];
        if (aftp_place_apply_meta(p, f->fd, f->mode, f->mtime_ns) != AFTP_OK)
            rc = file_fail(p, f, "cannot set the mode or time of");
        else
            sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
    /* fsync, not fdatasync: the mode and mtime just set are part of what
     * the final name promises, and fdatasync may leave an mtime behind. */
    for (size_t i = 0; i < b->count; i++) {
        aftp_place_file *f = b->files[i];
        if (f->error == AFTP_OK && !p->opt.sync_fs && fsync(f->fd) != 0)
            rc = file_fail(p, f, "cannot sync");
    }
    /* syncfs reports a write-back error of any file since the last sync:
     * the whole batch fails rather than one file vouched for wrongly. */
    if (p->opt.sync_fs && b->count > 0 && syncfs(b->files[0]->fd) != 0)
        for (size_t i = 0; i < b->count; i++)
            rc = file_fail(p, b->files[i], "cannot sync");
    b->stage = AFTP_PLACE_SYNCED;
    return rc;
}

int aftp_place_batch_rename(aftp_place *p, aftp_place_batch *b)
{
    int rc = AFTP_OK;
    if (b->stage != AFTP_PLACE_SYNCED)
        return AFTP_ERR_INVALID_STATE; /* never a final name before its data is durable */
    for (size_t i = 0; i < b->count; i++) {
        aftp_place_file *f = b->files[i];
        if (f->error != AFTP_OK) { /* its sync failed: it never takes its name */
            unlinkat(f->parent_fd, f->tmp, 0);
            f->tmp[0] = '\0';
            continue;
        }
        int r = aftp_store_rename(f->parent_fd, f->tmp, f->parent_fd, f->leaf, p->opt.overwrite);
        const char *why = r == AFTP_ERR_FILE_EXISTS ? "a file appeared there meanwhile"
                                                    : strerror(errno);
        if (r != AFTP_OK) {
            f->error = rc = fail(p, r, "cannot rename into", f->leaf, why);
            unlinkat(f->parent_fd, f->tmp, 0);
        }
        f->tmp[0] = '\0'; /* renamed or removed: nothing left to unlink */
    }
    b->stage = AFTP_PLACE_RENAMED;
    return rc;
}

/* Whether an earlier file of the batch has the same parent directory. */
static int parent_seen(const aftp_place_batch *b, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (b->files[j]->parent_dev == b->files[i]->parent_dev &&
            b->files[j]->parent_ino == b->files[i]->parent_ino)
            return 1;
    return 0;
}

int aftp_place_batch_finish(aftp_place *p, aftp_place_batch *b)
{
    int rc = AFTP_OK;
    if (b->stage != AFTP_PLACE_RENAMED)
        return AFTP_ERR_INVALID_STATE;
    for (size_t i = 0; i < b->count; i++) {
        aftp_place_file *f = b->files[i];
        if (!parent_seen(b, i) && fsync(f->parent_fd) != 0)
            rc = file_fail(p, f, "cannot sync the directory of");
    }
    for (size_t i = 0; i < b->count; i++) {
        if (b->files[i]->error != AFTP_OK && rc == AFTP_OK)
            rc = b->files[i]->error;
        release(p, b->files[i], 0);
    }
    b->count = 0;
    b->stage = AFTP_PLACE_COLLECTING;
    return rc;
}

int aftp_place_batch_commit(aftp_place *p, aftp_place_batch *b)
{
    int rc = aftp_place_batch_sync(p, b);
    int r = aftp_place_batch_rename(p, b);
    rc = rc == AFTP_OK ? r : rc;
    r = aftp_place_batch_finish(p, b);
    return rc == AFTP_OK ? r : rc;
}

void aftp_place_batch_abort(aftp_place *p, aftp_place_batch *b)
{
    for (size_t i = 0; i < b->count; i++)
        release(p, b->files[i], b->files[i]->tmp[0] != '\0');
    b->count = 0;
    b->stage = AFTP_PLACE_COLLECTING;
}
