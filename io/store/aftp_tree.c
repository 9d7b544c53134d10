#include "aftp_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "aftp_source.h"

/* One directory on the current path: its descriptor and its sorted names. */
struct aftp_tree_level {
    int fd;
    char *names;        /* NUL-terminated names, end to end */
    size_t *offsets;    /* of each name in `names`, sorted bytewise */
    size_t count, next;
    size_t path_len;    /* t->path and t->local begin with this directory's */
    size_t local_len;   /* prefix, this long, the '/' after it excluded */
    const char *pseudo; /* a kernel file system: its files are skipped */
};

static int64_t ns_of(struct timespec ts)
{
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int errno_to_error(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: return AFTP_ERR_NOT_FOUND;
    case EACCES: case EPERM: return AFTP_ERR_PERMISSION;
    case ELOOP: case EXDEV: return AFTP_ERR_PATH_REJECTED;
    case ENOMEM: return AFTP_ERR_NO_MEMORY;
    default: return AFTP_ERR_IO;
    }
}

static void notice(aftp_tree *t, int err, const char *why)
{
    if (t->notice != NULL)
        t->notice(t->user, t->local, err, why);
}

static void notice_errno(aftp_tree *t, const char *what, int e)
{
    char why[256];
    snprintf(why, sizeof why, "%s: %s", what, strerror(e));
    notice(t, errno_to_error(e), why);
}

int aftp_tree_init(aftp_tree *t, const char *const *srcs, size_t n, aftp_tree_notice_fn fn,
                   void *user)
{
    memset(t, 0, sizeof *t);
    t->levels = calloc(AFTP_TREE_MAX_DEPTH + 1, sizeof *t->levels);
    if (t->levels == NULL)
        return AFTP_ERR_NO_MEMORY;
    t->srcs = srcs;
    t->nsrcs = n;
    t->notice = fn;
    t->user = user;
    t->at = AT_FDCWD;
    return AFTP_OK;
}

int aftp_tree_init_beneath(aftp_tree *t, int root_fd, const char *const *srcs, size_t n,
                           aftp_tree_notice_fn fn, void *user)
{
    int rc = aftp_tree_init(t, srcs, n, fn, user);
    t->at = root_fd;
    return rc;
}

static void pop_level(aftp_tree *t)
{
    aftp_tree_level *lv = &t->levels[--t->depth];
    close(lv->fd);
    free(lv->names);
    free(lv->offsets);
    memset(lv, 0, sizeof *lv);
}

void aftp_tree_fini(aftp_tree *t)
{
    while (t->depth > 0)
        pop_level(t);
    free(t->levels);
    t->levels = NULL;
}

static int by_name(const void *a, const void *b, void *names)
{
    return strcmp((const char *)names + *(const size_t *)a,
                  (const char *)names + *(const size_t *)b);
}

/* Appends name to lv's list, growing it; 0 or an errno. */
static int add_name(aftp_tree_level *lv, const char *name, size_t *used, size_t *cap,
                    size_t *slots)
{
    size_t len = strlen(name) + 1;
    if (*used + len > AFTP_TREE_MAX_DIR_BYTES)
        return EFBIG;
    if (*used + len > *cap) {
        size_t grown = *cap ? *cap * 2 : 4096;
        char *p = realloc(lv->names, grown);
        if (p == NULL)
            return ENOMEM;
        lv->names = p;
        *cap = grown;
    }
    if (lv->count == *slots) {
        size_t grown = *slots ? *slots * 2 : 64;
        size_t *p = realloc(lv->offsets, grown * sizeof *p);
        if (p == NULL)
            return ENOMEM;
        lv->offsets = p;
        *slots = grown;
    }
    memcpy(lv->names + *used, name, len);
    lv->offsets[lv->count++] = *used;
    *used += len;
    return 0;
}

/* Reads and sorts the names of lv->fd; 0 or an errno. */
static int read_names(aftp_tree_level *lv)
{
    size_t used = 0, cap = 0, slots = 0;
    int dup = fcntl(lv->fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (d == NULL) {
        int e = errno;
        if (dup >= 0)
            close(dup);
        return e;
    }
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            rc = add_name(lv, de->d_name, &used, &cap, &slots);
    if (rc == 0)
        rc = errno;
    closedir(d);
    if (rc == 0 && lv->count > 1)
        qsort_r(lv->offsets, lv->count, sizeof *lv->offsets, by_name, lv->names);
    return rc;
}

/* Enters the directory fd (taken), whose prefixes are t->path and
 * t->local as they are now: 1, or 0 when it cannot be read (noticed). */
static int push_level(aftp_tree *t, int fd)
{
    aftp_tree_level *lv = &t->levels[t->depth];
    memset(lv, 0, sizeof *lv);
    lv->fd = fd;
    t->depth++;
    int e = read_names(lv);
    if (e != 0) {
        notice_errno(t, e == EFBIG ? "a directory with more names than the walk holds "
                                     "(64 MiB of names)" : "cannot read the directory", e);
        pop_level(t);
        return 0;
    }
    lv->pseudo = aftp_source_pseudo_fs(fd);
    lv->path_len = strlen(t->path);
    lv->local_len = strlen(t->local);
    return 1;
}

static void fill_stat(aftp_tree_entry *e, aftp_tree_kind kind, const struct stat *sb)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->size = kind == AFTP_TREE_DIR ? 0 : (uint64_t)sb->st_size;
    e->mtime_ns = ns_of(sb->st_mtim);
    e->ctime_ns = ns_of(sb->st_ctim);
    e->mode = sb->st_mode & 07777;
    e->dev = sb->st_dev;
    e->ino = sb->st_ino;
}

static int emit(aftp_tree *t, aftp_tree_entry *e, aftp_tree_kind kind, const struct stat *sb)
{
    fill_stat(e, kind, sb);
    e->path = t->path;
    e->local = t->local;
    e->at = t->at;
    e->target = kind == AFTP_TREE_SYMLINK ? t->target : NULL;
    return 1;
}

/* Why a name cannot be sent, or NULL. */
static const char *bad_name(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "its name has a control character (a newline, tab or escape), "
                   "which receivers refuse and which would forge lines in logs: rename it";
    return NULL;
}

/* Appends "/name" (no '/' after an empty prefix or one ending in '/')
 * to buf[0..len): 0 when it does not fit in cap bytes. */
static int join(char *buf, size_t len, size_t cap, const char *name)
{
    size_t sep = len > 0 && buf[len - 1] != '/';
    size_t n = strlen(name);
    if (len + sep + n + 1 > cap)
        return 0;
    buf[len] = '/';
    memcpy(buf + len + sep, name, n + 1);
    return 1;
}

/* Sets t->path and t->local to the child `name` of level lv: 0 when it
 * cannot be sent (noticed). */
static int name_child(aftp_tree *t, const aftp_tree_level *lv, const char *name)
{
    if (!join(t->local, lv->local_len, sizeof t->local, name) ||
        !join(t->path, lv->path_len, sizeof t->path, name)) {
        t->local[lv->local_len] = '\0'; /* named by its directory */
        char why[160];
        snprintf(why, sizeof why, "its path is longer than %u bytes, the most a "
                 "receiver accepts", AFTP_WIRE_MAX_PATH);
        notice(t, AFTP_ERR_LIMIT, why);
        return 0;
    }
    const char *why = bad_name(name);
    if (why != NULL)
        notice(t, AFTP_ERR_PATH_REJECTED, why);
    return why == NULL;
}

/* Opens directory `name` beneath `at` and stats it: the fd, or -1
 * (noticed). */
static int open_dir(aftp_tree *t, int at, const char *name, int flags, struct stat *sb)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
    if (fd >= 0 && fstat(fd, sb) == 0)
        return fd;
    notice_errno(t, "cannot open the directory", errno);
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A directory met inside a tree: entered (1, entry filled) or noticed. */
static int enter_dir(aftp_tree *t, aftp_tree_entry *e, int at, const char *name)
{
    char why[160];
    struct stat sb;
    if (t->depth > AFTP_TREE_MAX_DEPTH) {
        snprintf(why, sizeof why, "more than %u levels of directories beneath its "
                 "source argument: send it as a source of its own", AFTP_TREE_MAX_DEPTH);
        notice(t, AFTP_ERR_LIMIT, why);
        return 0;
    }
    int fd = open_dir(t, at, name, O_NOFOLLOW, &sb);
    return fd >= 0 && push_level(t, fd) && emit(t, e, AFTP_TREE_DIR, &sb);
}

static const char *special_kind(mode_t mode)
{
    return S_ISFIFO(mode)   ? "a FIFO (named pipe); aftp sends regular files"
           : S_ISSOCK(mode) ? "a socket; aftp sends regular files"
           : S_ISCHR(mode)  ? "a character device; aftp sends regular files"
           : S_ISBLK(mode)  ? "a block device; aftp sends regular files"
                            : "not a regular file; aftp sends regular files";
}

/* A regular file: emitted unless its file system does not know its size. */
static int emit_file(aftp_tree *t, aftp_tree_entry *e, const char *pseudo,
                     const struct stat *sb)
{
    if (pseudo == NULL)
        return emit(t, e, AFTP_TREE_FILE, sb);
    char why[200];
    snprintf(why, sizeof why, "it is on %s, a kernel file system whose files have no "
             "true size: copy it to a regular file first", pseudo);
    notice(t, AFTP_ERR_INVALID_ARGUMENT, why);
    return 0;
}

/* The next name of the top level: 1 with an entry, 0 when it was skipped. */
static int visit_child(aftp_tree *t, aftp_tree_entry *e)
{
    aftp_tree_level *lv = &t->levels[t->depth - 1];
    const char *name = lv->names + lv->offsets[lv->next++];
    struct stat sb;
    if (!name_child(t, lv, name))
        return 0;
    if (fstatat(lv->fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        notice_errno(t, "cannot read it", errno);
        return 0;
    }
    if (S_ISDIR(sb.st_mode))
        return enter_dir(t, e, lv->fd, name);
    if (S_ISREG(sb.st_mode))
        return emit_file(t, e, lv->pseudo, &sb);
    if (!S_ISLNK(sb.st_mode)) {
        notice(t, AFTP_ERR_INVALID_ARGUMENT, special_kind(sb.st_mode));
        return 0;
    }
    ssize_t n = readlinkat(lv->fd, name, t->target, sizeof t->target);
    if (n < 0 || (size_t)n >= sizeof t->target) {
        notice_errno(t, "cannot read the link", n < 0 ? errno : ENAMETOOLONG);
        return 0;
    }
    t->target[n] = '\0';
    return emit(t, e, AFTP_TREE_SYMLINK, &sb);
}

/* Whether SRC names its contents rather than itself: it ends in '/', or
 * in a component "." or "..", which has no name of its own to send. */
static int names_contents(const char *src, const char **base)
{
    size_t len = strlen(src);
    if (len == 0 || src[len - 1] == '/')
        return 1;
    const char *slash = strrchr(src, '/');
    *base = slash ? slash + 1 : src;
    return strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0;
}

/* Why a SRC could not be opened: beneath a root, a link on its path. */
static void notice_src_errno(aftp_tree *t, int e)
{
    const char *why;
    int err = aftp_source_errno_error(e, &why);
    if (t->at != AT_FDCWD && err == AFTP_ERR_PATH_REJECTED)
        notice(t, err, why);
    else
        notice_errno(t, "cannot open it", e);
}

/* A file SRC: emitted unless it is not a regular file of known size, or
 * cannot be read. */
static int visit_src_file(aftp_tree *t, aftp_tree_entry *e, const struct stat *sb)
{
    if (!S_ISREG(sb->st_mode)) {
        notice(t, AFTP_ERR_INVALID_ARGUMENT, special_kind(sb->st_mode));
        return 0;
    }
    /* regular, so opening it cannot block (O_NONBLOCK: unless it was
     * swapped for a FIFO meanwhile; its entry's identity then fails) */
    int fd = aftp_source_openat(t->at, t->local, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        notice_src_errno(t, errno);
        return 0;
    }
    const char *pseudo = aftp_source_pseudo_fs(fd);
    close(fd);
    return emit_file(t, e, pseudo, sb);
}

/* SRC opened O_PATH (no device's open runs, nothing blocks) as
 * aftp_source_openat resolves it, stated through the descriptor: the fd,
 * or -1 (noticed). */
static int open_src(aftp_tree *t, const char *src, struct stat *sb)
{
    int fd = aftp_source_openat(t->at, src, O_PATH);
    if (fd >= 0 && fstat(fd, sb) == 0)
        return fd;
    notice_src_errno(t, errno);
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A SRC argument (links followed unless beneath a root): 1 with its first
 * entry, 0 when it gave none (skipped, or a directory named for its
 * contents). */
static int visit_src(aftp_tree *t, aftp_tree_entry *e, const char *src)
{
    const char *base = NULL;
    int contents = names_contents(src, &base);
    struct stat sb;
    t->path[0] = '\0';
    if (strlen(src) >= sizeof t->local) {
        snprintf(t->local, sizeof t->local, "%.64s...", src);
        notice_errno(t, "cannot open it", ENAMETOOLONG);
        return 0;
    }
    snprintf(t->local, sizeof t->local, "%s", src);
    int fd = open_src(t, src, &sb);
    if (fd < 0)
        return 0;
    const char *why = contents && !S_ISDIR(sb.st_mode)
                          ? "it names a directory's contents (a trailing '/'), but it is not a "
                            "directory"
                          : contents ? NULL : bad_name(base);
    if (why != NULL) {
        notice(t, contents ? AFTP_ERR_INVALID_ARGUMENT : AFTP_ERR_PATH_REJECTED, why);
        close(fd);
        return 0;
    }
    if (!contents)
        snprintf(t->path, sizeof t->path, "%s", base);
    if (!S_ISDIR(sb.st_mode)) {
        close(fd);
        return visit_src_file(t, e, &sb);
    }
    int dir = open_dir(t, fd, ".", 0, &sb); /* the very directory opened, now readable */
    close(fd);
    return dir >= 0 && push_level(t, dir) && !contents && emit(t, e, AFTP_TREE_DIR, &sb);
}

int aftp_tree_next(aftp_tree *t, aftp_tree_entry *e)
{
    for (;;) {
        if (t->depth == 0) {
            if (t->next_src == t->nsrcs)
                return 0;
            if (visit_src(t, e, t->srcs[t->next_src++]))
                return 1;
            continue;
        }
        aftp_tree_level *lv = &t->levels[t->depth - 1];
        if (lv->next == lv->count) {
            pop_level(t);
            continue;
        }
        if (visit_child(t, e))
            return 1;
    }
}

int aftp_tree_data_extent(int fd, uint64_t size, uint64_t from, uint64_t *start, uint64_t *end)
{
    if (from >= size)
        return 0;
    off_t data = lseek(fd, (off_t)from, SEEK_DATA);
    if (data < 0 && errno == ENXIO)
        return 0;
    if (data < 0 && errno != EINVAL)
        return AFTP_ERR_IO;
    if (data < 0) { /* no SEEK_DATA here: all of it is data */
        *start = from;
        *end = size;
        return 1;
    }
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0)
        return AFTP_ERR_IO;
    *start = (uint64_t)data;
    *end = (uint64_t)hole < size ? (uint64_t)hole : size;
    return *start < *end;
}
