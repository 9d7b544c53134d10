/* The sender's entries from a walked tree (aftp_treesend.h). */
#include "aftp_treesend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "aftp_path.h"
#include "aftp_store.h"
#include "aftp_treestore.h"

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* What tells one version of a source from another (aftp_treesend.h). */
typedef struct identity {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} identity;

static uint64_t identity_hash(const identity *id)
{
    uint8_t buf[40];
    put_le64(buf, id->dev);
    put_le64(buf + 8, id->ino);
    put_le64(buf + 16, id->size);
    put_le64(buf + 24, (uint64_t)id->mtime_ns);
    put_le64(buf + 32, (uint64_t)id->ctime_ns);
    return XXH3_64bits(buf, sizeof buf);
}

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e)
{
    identity id = {e->dev, e->ino, e->size, e->mtime_ns, e->ctime_ns};
    return identity_hash(&id);
}

static int file_digest(int at, const char *local, uint64_t size, uint8_t out[AFTP_DIGEST_LEN])
{
    const char *why;
    int fd = aftp_source_openat(at, local, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return aftp_source_errno_error(errno, &why);
    int rc = aftp_treestore_digest(fd, size, out);
    close(fd);
    return rc;
}

int aftp_treesend_entry_info(const aftp_tree_entry *e, uint32_t id, uint32_t block_size,
                             unsigned flags, aftp_entry_info *out)
{
    static const int kinds[] = {[AFTP_TREE_FILE] = AFTP_ENTRY_FILE,
                                [AFTP_TREE_DIR] = AFTP_ENTRY_DIR,
                                [AFTP_TREE_SYMLINK] = AFTP_ENTRY_SYMLINK};
    int file = e->kind == AFTP_TREE_FILE;
    memset(out, 0, sizeof *out);
    out->file = (aftp_file_info){.file_id = id, .size = file ? e->size : 0,
                                 .mtime_ns = e->mtime_ns, .mode = e->mode,
                                 .block_size = file ? block_size : 0, .path = e->path};
    out->kind = kinds[e->kind];
    out->flags = file ? flags : 0;
    out->source_id = aftp_treesend_source_id(e);
    out->target = e->kind == AFTP_TREE_SYMLINK ? e->target : NULL;
    return file && (flags & AFTP_ENTRY_CHECKSUM) ? file_digest(e->at, e->local, e->size,
                                                               out->digest)
                                                 : AFTP_OK;
}

/* ---- the sender's storage over entries ---- */

enum file_state {
    FILE_UNREAD,   /* never read: its identity is the entry's source_id */
    FILE_BUFFERED, /* a small file, read whole into `bytes` */
    FILE_MAPPED,   /* open: `map`, on the recency list */
    FILE_SHUT      /* was open, closed for another: opened again at need */
};

/* An open source, in its own allocation so that closing it needs none:
 * its mapping waits on the retired list for the settle. */
struct aftp_treesend_map {
    aftp_source src;
    aftp_treesend_map *next_retired;
};

struct aftp_treesend_file {
    uint32_t id;
    uint64_t size;
    int64_t mtime_ns;
    uint64_t source_id;
    enum file_state state;
    identity seen; /* at its first read, once not FILE_UNREAD */
    char *local;
    aftp_byte_range *holes; /* AFTP_TREESEND_MAX_HOLES of room once one is found */
    size_t hole_count;
    uint8_t *bytes;         /* FILE_BUFFERED */
    aftp_treesend_map *map; /* FILE_MAPPED */
    aftp_treesend_file *newer, *older; /* FILE_MAPPED: the recency list; retired: older */
};

void aftp_treesend_init(aftp_treesend *t)
{
    memset(t, 0, sizeof *t);
    t->at = AT_FDCWD;
}

static void unlink_open(aftp_treesend *t, aftp_treesend_file *f)
{
    if (f->newer != NULL)
        f->newer->older = f->older;
    else
        t->newest = f->older;
    if (f->older != NULL)
        f->older->newer = f->newer;
    else
        t->oldest = f->newer;
    f->newer = f->older = NULL;
}

static void link_newest(aftp_treesend *t, aftp_treesend_file *f)
{
    f->older = t->newest;
    f->newer = NULL;
    if (t->newest != NULL)
        t->newest->newer = f;
    else
        t->oldest = f;
    t->newest = f;
}

/* Closes f's open source: its descriptor now, its mapping at the settle
 * (a datagram not yet sent may borrow its bytes). */
static void shut(aftp_treesend *t, aftp_treesend_file *f)
{
    aftp_treesend_map *m = f->map;
    unlink_open(t, f);
    close(m->src.fd);
    m->src.fd = -1;
    m->next_retired = t->retired_maps;
    t->retired_maps = m;
    f->map = NULL;
    f->state = FILE_SHUT;
    t->open--;
}

static void free_file(aftp_treesend *t, aftp_treesend_file *f)
{
    if (f->bytes != NULL)
        t->buffered -= f->size;
    free(f->bytes);
    free(f->local);
    free(f->holes);
    free(f);
}

void aftp_treesend_settle(aftp_treesend *t)
{
    while (t->retired_maps != NULL) {
        aftp_treesend_map *m = t->retired_maps;
        t->retired_maps = m->next_retired;
        aftp_source_fini(&m->src);
        free(m);
    }
    while (t->retired_files != NULL) {
        aftp_treesend_file *f = t->retired_files;
        t->retired_files = f->older;
        free_file(t, f);
    }
    for (aftp_treesend_file *f = t->newest; f != NULL; f = f->older)
        aftp_source_settle(&f->map->src);
}

/* Entry i ends: out of the list of entries, its source closed, the rest
 * of it released at the settle. */
static void release(aftp_treesend *t, size_t i)
{
    aftp_treesend_file *f = t->files[i];
    if (f->state == FILE_MAPPED)
        shut(t, f);
    memmove(t->files + i, t->files + i + 1, (t->count - i - 1) * sizeof *t->files);
    t->count--;
    f->older = t->retired_files;
    t->retired_files = f;
}

void aftp_treesend_fini(aftp_treesend *t)
{
    while (t->count > 0)
        release(t, t->count - 1);
    aftp_treesend_settle(t);
    free(t->files);
    t->files = NULL;
}

/* Notes hole [off, off + len), keeping the largest ones: a full list
 * gives up its smallest for a larger one (holes come in ascending
 * order, so the list stays ascending). */
static void keep_hole(aftp_treesend_file *f, uint64_t off, uint64_t len)
{
    if (f->holes == NULL && (f->holes = calloc(AFTP_TREESEND_MAX_HOLES, sizeof *f->holes)) == NULL)
        return; /* no memory: the holes go as data */
    if (f->hole_count == AFTP_TREESEND_MAX_HOLES) {
        size_t min = 0;
        for (size_t i = 1; i < f->hole_count; i++)
            if (f->holes[i].len < f->holes[min].len)
                min = i;
        if (f->holes[min].len >= len)
            return;
        memmove(f->holes + min, f->holes + min + 1, (f->hole_count - min - 1) * sizeof *f->holes);
        f->hole_count--;
    }
    f->holes[f->hole_count++] = (aftp_byte_range){off, len};
}

/* The holes of an opened source of f->size bytes: the gaps between its
 * data extents, AFTP_TREESEND_HOLE_SCAN extents at most. A failure
 * leaves no hole: the file goes as data. */
static void scan_holes(aftp_treesend_file *f, int fd)
{
    uint64_t at = 0, start, end;
    for (unsigned n = 0; n < AFTP_TREESEND_HOLE_SCAN; n++) {
        int rc = aftp_tree_data_extent(fd, f->size, at, &start, &end);
        if (rc < 0) {
            f->hole_count = 0;
            return;
        }
        uint64_t data = rc == 1 ? start : f->size;
        if (data > at)
            keep_hole(f, at, data - at);
        if (rc != 1)
            return;
        at = end;
    }
}

/* Holes of f's source, when it may have any (above): a stat tells, so
 * only a file to scan is opened (O_NONBLOCK: should a FIFO take its place
 * meanwhile, the open must not hang; its first view then fails). */
static void find_holes(const aftp_treesend *t, aftp_treesend_file *f)
{
    struct stat sb;
    if (f->size < AFTP_TREESEND_HOLE_MIN_SIZE || aftp_source_statat(t->at, f->local, &sb) != 0 ||
        !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size ||
        (uint64_t)sb.st_blocks * 512 >= f->size)
        return; /* the source's open reports a failure, with its reason */
    int fd = aftp_source_openat(t->at, f->local, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return;
    scan_holes(f, fd);
    close(fd);
}

int aftp_treesend_add(aftp_treesend *t, aftp_entry_info *info, const char *local)
{
    if (info->kind != AFTP_ENTRY_FILE ||
        (t->count > 0 && info->file.file_id <= t->files[t->count - 1]->id))
        return AFTP_ERR_INVALID_ARGUMENT; /* files only, in id order */
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        aftp_treesend_file **grown = realloc(t->files, cap * sizeof *grown);
        if (grown == NULL)
            return AFTP_ERR_NO_MEMORY;
        t->files = grown;
        t->cap = cap;
    }
    aftp_treesend_file *f = calloc(1, sizeof *f);
    char *copy = f != NULL ? strdup(local) : NULL;
    if (copy == NULL) {
        free(f);
        return AFTP_ERR_NO_MEMORY;
    }
    *f = (aftp_treesend_file){.id = info->file.file_id, .size = info->file.size,
                              .mtime_ns = info->file.mtime_ns,
                              .source_id = info->source_id, .local = copy};
    t->files[t->count++] = f;
    find_holes(t, f);
    info->holes = f->hole_count > 0 ? f->holes : NULL;
    info->hole_count = f->hole_count;
    return AFTP_OK;
}

/* Index of entry id, or count: a binary search (files ascend by id), as
 * each DATA's view comes here and the file being sent sits behind the
 * window's files still waiting for their results. */
static size_t index_of(const aftp_treesend *t, uint32_t id)
{
    size_t lo = 0, hi = t->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->files[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->count && t->files[lo]->id == id ? lo : t->count;
}

static identity identity_of(const struct stat *sb)
{
    return (identity){(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, (uint64_t)sb->st_size,
                      (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
                      (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec};
}

static int same_identity(const identity *a, const identity *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* What f's source is now against what its entry offered (first read) or
 * what its first read found (a source read again): AFTP_OK when it is
 * the same version; else SOURCE_CHANGED, the message naming the file
 * and what differs. */
static int check_version(aftp_treesend *t, aftp_treesend_file *f, const identity *now)
{
    char shown[256];
    int first = f->state == FILE_UNREAD;
    if (first ? identity_hash(now) == f->source_id : same_identity(now, &f->seen)) {
        f->seen = *now;
        return AFTP_OK;
    }
    aftp_path_printable(f->local, shown, sizeof shown);
    const identity *was = first ? NULL : &f->seen;
    const char *what = now->size != f->size ? "its size differs"
                       : now->mtime_ns != f->mtime_ns ? "it was written to"
                       : was != NULL && (now->ino != was->ino || now->dev != was->dev)
                           ? "another file took its place"
                           : "its inode or ctime differs: replaced, written to with its mtime "
                             "put back, or its status changed";
    snprintf(t->message, sizeof t->message,
             "%s changed since it was %s (%s): %" PRIu64 " bytes, mtime %" PRId64
             " ns, inode %" PRIu64 " now; offered as %" PRIu64 " bytes, mtime %" PRId64
             " ns. Send it again once it is stable", shown, first ? "offered" : "first read",
             what, now->size, now->mtime_ns, now->ino, f->size, f->mtime_ns);
    return AFTP_ERR_SOURCE_CHANGED;
}

static int cannot_read(aftp_treesend *t, const aftp_treesend_file *f, int err)
{
    char shown[256];
    const char *why;
    int rc = aftp_source_errno_error(err, &why);
    aftp_path_printable(f->local, shown, sizeof shown);
    snprintf(t->message, sizeof t->message, "cannot send %s: %s", shown, why);
    return rc;
}

/* f's source as fd sees it now, against the version its entry has. */
static int check_fd_version(aftp_treesend *t, aftp_treesend_file *f, int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return cannot_read(t, f, errno);
    identity now = identity_of(&sb);
    return check_version(t, f, &now);
}

/* A file that ends before its size: changed meanwhile, or on a file
 * system whose sizes are not true. */
static int read_short(aftp_treesend *t, aftp_treesend_file *f, int fd, uint64_t got)
{
    char shown[256];
    int rc = check_fd_version(t, f, fd);
    if (rc != AFTP_OK)
        return rc;
    aftp_path_printable(f->local, shown, sizeof shown);
    snprintf(t->message, sizeof t->message, "cannot send %s: it ends after %" PRIu64
             " of its %" PRIu64 " bytes (its file system does not tell its true size: copy "
             "it to a regular file first)", shown, got, f->size);
    return AFTP_ERR_INVALID_ARGUMENT;
}

/* pread of f's size bytes from fd into *out. */
static int read_whole(aftp_treesend *t, aftp_treesend_file *f, int fd, uint8_t **out)
{
    uint8_t *bytes = malloc(f->size > 0 ? f->size : 1);
    if (bytes == NULL)
        return AFTP_ERR_NO_MEMORY;
    for (uint64_t got = 0; got < f->size;) {
        ssize_t n = pread(fd, bytes + got, f->size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(bytes);
            return n < 0 ? cannot_read(t, f, errno) : read_short(t, f, fd, got);
        }
        got += (uint64_t)n;
    }
    *out = bytes;
    return AFTP_OK;
}

/* A small file read whole, its identity the entry's before and after the
 * read, so the buffer holds that one version. O_NONBLOCK: a FIFO put in
 * its place must not hang the open (its identity then differs). */
static int read_small(aftp_treesend *t, aftp_treesend_file *f)
{
    uint8_t *bytes = NULL;
    int fd = aftp_source_openat(t->at, f->local, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return cannot_read(t, f, errno);
    int rc = check_fd_version(t, f, fd);
    if (rc == AFTP_OK)
        rc = read_whole(t, f, fd, &bytes);
    if (rc == AFTP_OK)
        rc = check_fd_version(t, f, fd); /* not written to while read */
    close(fd);
    if (rc != AFTP_OK) {
        free(bytes);
        return rc;
    }
    f->bytes = bytes;
    f->state = FILE_BUFFERED;
    t->buffered += f->size;
    return AFTP_OK;
}

/* A larger file opened as an aftp_source, the least recently viewed open
 * one closed first when AFTP_TREESEND_MAX_OPEN are. */
static int open_mapped(aftp_treesend *t, aftp_treesend_file *f)
{
    aftp_file_info fi;
    aftp_treesend_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return AFTP_ERR_NO_MEMORY;
    if (t->open >= AFTP_TREESEND_MAX_OPEN)
        shut(t, t->oldest);
    int rc = aftp_source_open_at(&m->src, t->at, f->local, f->id, &fi);
    if (rc != AFTP_OK)
        snprintf(t->message, sizeof t->message, "%s", m->src.message);
    identity now = {m->src.dev, m->src.ino, m->src.size, m->src.mtime_ns, m->src.ctime_ns};
    if (rc == AFTP_OK)
        rc = check_version(t, f, &now);
    if (rc != AFTP_OK) {
        aftp_source_fini(&m->src);
        free(m);
        return rc;
    }
    f->map = m;
    f->state = FILE_MAPPED;
    link_newest(t, f);
    t->open++;
    return AFTP_OK;
}

/* f's source read or opened; a small one is buffered while the budget
 * has room. */
static int load(aftp_treesend *t, aftp_treesend_file *f)
{
    int again = f->state == FILE_SHUT;
    int rc = f->size <= AFTP_TREESEND_SMALL_MAX &&
                     t->buffered + f->size <= AFTP_TREESEND_BUFFER_BUDGET
                 ? read_small(t, f)
                 : open_mapped(t, f);
    t->reopened += again && rc == AFTP_OK;
    if (rc != AFTP_OK)
        t->message_id = f->id;
    return rc;
}

int aftp_treesend_view(aftp_treesend *t, uint32_t id, uint64_t off, size_t len,
                       const uint8_t **out)
{
    size_t i = index_of(t, id);
    if (i == t->count)
        return AFTP_ERR_INVALID_STATE;
    aftp_treesend_file *f = t->files[i];
    if (f->state == FILE_MAPPED) {
        unlink_open(t, f);
        link_newest(t, f);
    } else if (f->state != FILE_BUFFERED) {
        int rc = load(t, f);
        if (rc != AFTP_OK)
            return rc;
    }
    if (f->state == FILE_MAPPED)
        return aftp_source_view(&f->map->src, id, off, len, out);
    if (off > f->size || len > f->size - off)
        return AFTP_ERR_INVALID_ARGUMENT;
    *out = f->bytes + off;
    return AFTP_OK;
}

int aftp_treesend_close(aftp_treesend *t, uint32_t id)
{
    size_t i = index_of(t, id);
    if (i == t->count)
        return AFTP_ERR_INVALID_STATE;
    release(t, i);
    return AFTP_OK;
}

uint32_t aftp_treesend_changed(aftp_treesend *t)
{
    for (aftp_treesend_file *f = t->newest; f != NULL; f = f->older)
        if (aftp_source_check(&f->map->src) != AFTP_OK) {
            snprintf(t->message, sizeof t->message, "%s", f->map->src.message);
            t->message_id = f->id;
            return f->id;
        }
    return 0;
}

int aftp_treesend_check(aftp_treesend *t)
{
    return aftp_treesend_changed(t) != 0 ? AFTP_ERR_SOURCE_CHANGED : AFTP_OK;
}

static int ops_view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    return aftp_treesend_view(user, id, off, len, out);
}

static int ops_close(void *user, uint32_t id, int commit)
{
    (void)commit; /* the sender only releases */
    return aftp_treesend_close(user, id);
}

const aftp_storage_ops aftp_treesend_ops = {.view = ops_view, .close = ops_close};
