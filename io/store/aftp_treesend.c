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

#include "aftp_store.h"
#include "aftp_treestore.h"

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e)
{
    uint8_t buf[40];
    put_le64(buf, e->dev);
    put_le64(buf + 8, e->ino);
    put_le64(buf + 16, e->size);
    put_le64(buf + 24, (uint64_t)e->mtime_ns);
    put_le64(buf + 32, (uint64_t)e->ctime_ns);
    return XXH3_64bits(buf, sizeof buf);
}

static int file_digest(const char *local, uint64_t size, uint8_t out[AFTP_DIGEST_LEN])
{
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return aftp_store_errno_error(errno);
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
    return file && (flags & AFTP_ENTRY_CHECKSUM) ? file_digest(e->local, e->size, out->digest)
                                                 : AFTP_OK;
}

/* ---- the sender's storage over entries ---- */

struct aftp_treesend_file {
    uint32_t id;
    uint64_t size;
    int64_t mtime_ns;
    int opened;
    char *local;
    aftp_byte_range *holes; /* AFTP_TREESEND_MAX_HOLES of room once one is found */
    size_t hole_count;
    aftp_source src;
};

void aftp_treesend_init(aftp_treesend *t)
{
    memset(t, 0, sizeof *t);
}

static void release(aftp_treesend *t, size_t i)
{
    aftp_treesend_file *f = t->files[i];
    if (f->opened) {
        aftp_source_fini(&f->src);
        t->open--;
    }
    free(f->local);
    free(f->holes);
    free(f);
    memmove(t->files + i, t->files + i + 1, (t->count - i - 1) * sizeof *t->files);
    t->count--;
}

void aftp_treesend_fini(aftp_treesend *t)
{
    while (t->count > 0)
        release(t, t->count - 1);
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

/* Holes of f's source, when it may have any (above). */
static void find_holes(aftp_treesend_file *f)
{
    struct stat sb;
    if (f->size < AFTP_TREESEND_HOLE_MIN_SIZE)
        return;
    int fd = open(f->local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* the source's open reports it, with its reason */
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == f->size &&
        (uint64_t)sb.st_blocks * 512 < f->size)
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
                              .mtime_ns = info->file.mtime_ns, .local = copy};
    t->files[t->count++] = f;
    find_holes(f);
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

/* Opens f's source; it must still be what the entry announced. */
static int open_source(aftp_treesend *t, aftp_treesend_file *f)
{
    aftp_file_info fi;
    if (t->open >= AFTP_TREESEND_MAX_OPEN) {
        snprintf(t->message, sizeof t->message, "cannot open %u sources at once (%zu are open): "
                 "use a pipeline window of at most %u", AFTP_TREESEND_MAX_OPEN + 1, t->open,
                 AFTP_TREESEND_MAX_OPEN);
        return AFTP_ERR_LIMIT;
    }
    int rc = aftp_source_open(&f->src, f->local, f->id, &fi);
    if (rc != AFTP_OK) {
        snprintf(t->message, sizeof t->message, "%s", f->src.message);
        aftp_source_fini(&f->src);
        return rc;
    }
    f->opened = 1;
    t->open++;
    if (fi.size == f->size && fi.mtime_ns == f->mtime_ns)
        return AFTP_OK;
    snprintf(t->message, sizeof t->message, "%s changed since it was offered: %" PRIu64
             " bytes, mtime %" PRId64 " ns, offered as %" PRIu64 " bytes, mtime %" PRId64 " ns",
             f->src.name, fi.size, fi.mtime_ns, f->size, f->mtime_ns);
    return AFTP_ERR_SOURCE_CHANGED;
}

int aftp_treesend_view(aftp_treesend *t, uint32_t id, uint64_t off, size_t len,
                       const uint8_t **out)
{
    size_t i = index_of(t, id);
    if (i == t->count)
        return AFTP_ERR_INVALID_STATE;
    aftp_treesend_file *f = t->files[i];
    int rc = f->opened ? AFTP_OK : open_source(t, f);
    return rc == AFTP_OK ? aftp_source_view(&f->src, id, off, len, out) : rc;
}

int aftp_treesend_close(aftp_treesend *t, uint32_t id)
{
    size_t i = index_of(t, id);
    if (i == t->count)
        return AFTP_ERR_INVALID_STATE;
    release(t, i);
    return AFTP_OK;
}

int aftp_treesend_check(aftp_treesend *t)
{
    for (size_t i = 0; i < t->count; i++) {
        aftp_treesend_file *f = t->files[i];
        if (f->opened && aftp_source_check(&f->src) != AFTP_OK) {
            snprintf(t->message, sizeof t->message, "%s", f->src.message);
            return AFTP_ERR_SOURCE_CHANGED;
        }
    }
    return AFTP_OK;
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
