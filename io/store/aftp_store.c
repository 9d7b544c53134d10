#include "aftp_store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "aftp_journal.h"

#define STORE_MIN_CHUNK (UINT64_C(8) << 20) /* residency is managed in chunks of >= 8 MiB */
#define STORE_MAX_CHUNKS UINT64_C(4096)
#define STORE_KEEP (UINT64_C(8) << 20) /* resident bytes behind the furthest write */
/* Space is reserved this far ahead of the furthest write. Reserving a whole
 * file at once costs 0.25 s per GiB on tmpfs (it zeroes every page) before
 * any data may flow; a step costs a few ms, spread over the transfer. It
 * must exceed AFTP_RESIDENT_REACH, which prefaults may touch. */
#define STORE_RESERVE_STEP (UINT64_C(16) << 20)
_Static_assert(STORE_RESERVE_STEP > AFTP_RESIDENT_REACH, "a reservation step must cover prefaults");

static int errno_to_error(int e)
{
    switch (e) {
    case ENOSPC: case EDQUOT: case EFBIG: return AFTP_ERR_NO_SPACE;
    case EACCES: case EPERM: case EROFS: return AFTP_ERR_PERMISSION;
    case EEXIST: return AFTP_ERR_FILE_EXISTS;
    case ELOOP: case ENOTDIR: case ENAMETOOLONG: return AFTP_ERR_PATH_REJECTED;
    case ENOMEM: return AFTP_ERR_NO_MEMORY;
    default: return AFTP_ERR_IO;
    }
}

int aftp_store_errno_error(int e)
{
    return errno_to_error(e);
}

/* Records the first failure of the current file: "<what> <name>[: detail]". */
static int fail(aftp_store *st, int err, const char *what, const char *detail)
{
    return aftp_path_report_fail(&st->report, err, what, detail);
}

/* The process's umask, read without changing it: umask() can only be read
 * by setting it, which would change it for every thread of an embedding
 * program meanwhile. Where /proc does not tell (before Linux 4.7, or not
 * mounted), the most restrictive mask: files are then kept to their owner. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    unsigned mask = 077;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Umask: %o", &mask) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return (mode_t)(mask & 0777);
}

void aftp_store_init(aftp_store *st, int dirfd, int allow_overwrite)
{
    memset(st, 0, sizeof *st);
    st->dirfd = dirfd;
    st->allow_overwrite = allow_overwrite;
    st->fd = -1;
    st->parent_fd = -1;
    st->umask = current_umask();
}

/* Releases everything of the open file; with `unlink_tmp` the temporary
 * file goes too. */
static void release_file(aftp_store *st, int unlink_tmp)
{
    if (st->map != NULL)
        munmap(st->map, st->size);
    if (st->fd >= 0)
        close(st->fd);
    if (unlink_tmp && st->parent_fd >= 0)
        unlinkat(st->parent_fd, st->tmp_name, 0);
    if (st->parent_fd >= 0)
        close(st->parent_fd);
    free(st->chunk_filled);
    st->map = NULL;
    st->fd = -1;
    st->parent_fd = -1;
    st->chunk_filled = NULL;
}

void aftp_store_fini(aftp_store *st)
{
    release_file(st, 1);
}

int aftp_store_create_tmp(int dirfd, const char *leaf, char *name, size_t cap)
{
    int fd = -1;
    for (int attempt = 0; attempt < 16; attempt++) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (uint32_t)getpid() + (uint32_t)attempt;
        snprintf(name, cap, ".%.200s.aftp-%08x", leaf, r);
        fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    return fd;
}

int aftp_store_check_dir(int dirfd, char *why, size_t cap)
{
    char name[64];
    int fd = aftp_store_create_tmp(dirfd, "probe", name, sizeof name);
    if (fd < 0) {
        int e = errno;
        snprintf(why, cap, "cannot create a file in it: %s", strerror(e));
        return e == ENOSPC || e == EDQUOT ? AFTP_OK : errno_to_error(e);
    }
    close(fd);
    unlinkat(dirfd, name, 0);
    return AFTP_OK;
}

int aftp_store_open_dir(const char *path, const char *setting, int *dirfd, char *why, size_t cap)
{
    char reason[160];
    *dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0) {
        int e = errno;
        snprintf(why, cap, "cannot use destination directory %s: %s (%s must name an existing "
                 "directory)", path, strerror(e), setting);
        return errno_to_error(e);
    }
    int rc = aftp_store_check_dir(*dirfd, reason, sizeof reason);
    if (rc == AFTP_OK)
        return AFTP_OK;
    snprintf(why, cap, "cannot use destination directory %s: %s", path, reason);
    close(*dirfd);
    *dirfd = -1;
    return rc;
}

static int create_tmp(aftp_store *st)
{
    st->fd = aftp_store_create_tmp(st->parent_fd, st->leaf, st->tmp_name, sizeof st->tmp_name);
    if (st->fd < 0)
        return fail(st, errno_to_error(errno), "cannot create a temporary file for",
                    strerror(errno));
    return AFTP_OK;
}

/* Free space for the whole file, checked at the offer so that a full disk
 * fails before any data is sent. The space itself is reserved as data
 * arrives (reserve_ahead); a file system that reports no block counts is
 * left to that. */
static int check_space(aftp_store *st)
{
    struct statvfs vfs;
    if (fstatvfs(st->fd, &vfs) != 0 || vfs.f_blocks == 0)
        return AFTP_OK;
    /* root may use the blocks kept back for it */
    uint64_t free_blocks = geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail;
    uint64_t unit = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
    if (unit == 0 || free_blocks >= st->size / unit + 1)
        return AFTP_OK;
    uint64_t free_bytes = free_blocks * unit;
    char detail[96];
    snprintf(detail, sizeof detail, "%llu bytes needed, %llu free",
             (unsigned long long)st->size, (unsigned long long)free_bytes);
    return fail(st, AFTP_ERR_NO_SPACE, "not enough space to receive", detail);
}

/* Reserves [st->reserved, end): once reserved, a page fault of the mapping
 * can never hit ENOSPC (which would be SIGBUS); a disk that another writer
 * filled during the transfer fails here, as an error. */
static int reserve_upto(aftp_store *st, uint64_t end)
{
    uint64_t len = end - st->reserved;
    int rc = fallocate(st->fd, 0, (off_t)st->reserved, (off_t)len) == 0 ? 0 : errno;
    if (rc == EOPNOTSUPP)
        rc = posix_fallocate(st->fd, (off_t)st->reserved, (off_t)len);
    if (rc != 0) {
        char detail[96];
        snprintf(detail, sizeof detail, "%llu bytes needed: %s", (unsigned long long)st->size,
                 strerror(rc));
        return fail(st, errno_to_error(rc), "not enough space to receive", detail);
    }
    st->reserved = end;
    return AFTP_OK;
}

/* Makes sure [0, upto) and what prefaults may touch beyond it are
 * reserved, a step at a time. */
static int reserve_ahead(aftp_store *st, uint64_t upto)
{
    if (upto + AFTP_RESIDENT_REACH <= st->reserved || st->reserved == st->size)
        return AFTP_OK;
    uint64_t end = st->size - upto > STORE_RESERVE_STEP ? upto + STORE_RESERVE_STEP : st->size;
    return reserve_upto(st, end);
}

/* The file gets its full size at once (the mapping needs it); its space
 * is reserved step by step. */
static int size_file(aftp_store *st)
{
    if (st->size == 0)
        return AFTP_OK;
    if (ftruncate(st->fd, (off_t)st->size) != 0)
        return fail(st, errno_to_error(errno), "cannot size", strerror(errno));
    return reserve_ahead(st, 0);
}

static int map_file(aftp_store *st)
{
    if (st->size == 0)
        return AFTP_OK;
    void *m = st->size <= SIZE_MAX
                  ? mmap(NULL, st->size, PROT_READ | PROT_WRITE, MAP_SHARED, st->fd, 0)
                  : MAP_FAILED;
    /* The whole file is mapped at once: its size is bounded by the
     * process's address space (128 TiB on x86-64), which the message names. */
    if (m == MAP_FAILED && (st->size > SIZE_MAX || errno == ENOMEM)) {
        char why[128];
        snprintf(why, sizeof why, "%" PRIu64 " bytes are more than this process can map (its "
                 "address space, 128 TiB on x86-64)", st->size);
        return fail(st, AFTP_ERR_LIMIT, "cannot map", why);
    }
    if (m == MAP_FAILED)
        return fail(st, errno_to_error(errno), "cannot map", strerror(errno));
    st->map = m;
    st->chunk_size = STORE_MIN_CHUNK;
    while (st->size / st->chunk_size >= STORE_MAX_CHUNKS)
        st->chunk_size *= 2;
    st->chunk_filled = calloc(st->size / st->chunk_size + 1, sizeof *st->chunk_filled);
    if (st->chunk_filled == NULL)
        return fail(st, AFTP_ERR_NO_MEMORY, "out of memory for", NULL);
    aftp_resident_init(&st->resident, st->map, st->size, STORE_KEEP, MADV_POPULATE_WRITE);
    return AFTP_OK;
}

static int refuse_existing(aftp_store *st)
{
    struct stat sb;
    char detail[96];
    if (fstatat(st->parent_fd, st->leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? AFTP_OK
                               : fail(st, errno_to_error(errno), "cannot check",
                                      strerror(errno));
    if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
        snprintf(detail, sizeof detail, "%s is there, and only files are replaced",
                 S_ISDIR(sb.st_mode) ? "a directory" : "a special file (device, FIFO, socket)");
        return fail(st, AFTP_ERR_PATH_REJECTED, "cannot store", detail);
    }
    if (!st->overwrite)
        return fail(st, AFTP_ERR_FILE_EXISTS, "refusing to replace existing file",
                    "use --overwrite");
    return AFTP_OK;
}

int aftp_store_open(aftp_store *st, const aftp_file_info *info)
{
    if (st->fd >= 0)
        return AFTP_ERR_INVALID_STATE; /* one file at a time */
    int rc = aftp_path_report_start(&st->report, info->path);
    if (rc != AFTP_OK)
        return rc;
    if (aftp_journal_path_reserved(info->path))
        return fail(st, AFTP_ERR_PATH_REJECTED, "refused path",
                    AFTP_JOURNAL_DIR " holds the receiver's resume state");
    const char *leaf;
    rc = aftp_path_open_parent(st->dirfd, info->path, &st->parent_fd, &leaf);
    if (rc != AFTP_OK)
        return fail(st, rc, "cannot open the directory of", aftp_strerror(rc));
    snprintf(st->leaf, sizeof st->leaf, "%s", leaf);
    snprintf(st->report.name, sizeof st->report.name, "%s", leaf);
    st->file_id = info->file_id;
    st->size = info->size;
    st->mode = info->mode;
    st->mtime_ns = info->mtime_ns;
    st->overwrite = st->allow_overwrite;
    st->reserved = 0;
    if ((rc = refuse_existing(st)) != AFTP_OK || (rc = create_tmp(st)) != AFTP_OK ||
        (rc = check_space(st)) != AFTP_OK || (rc = size_file(st)) != AFTP_OK ||
        (rc = map_file(st)) != AFTP_OK) {
        release_file(st, 1);
        return rc;
    }
    return AFTP_OK;
}

static int check_range(const aftp_store *st, uint32_t file_id, uint64_t off, size_t len)
{
    if (st->fd < 0 || file_id != st->file_id)
        return AFTP_ERR_INVALID_STATE;
    if (off > st->size || len > st->size - off)
        return AFTP_ERR_INVALID_ARGUMENT;
    return AFTP_OK;
}

/* A chunk written in full: start its writeback now, so the final fsync
 * is short and dirty pages do not pile up. */
static void chunk_complete(aftp_store *st, uint64_t chunk)
{
    uint64_t start = chunk * st->chunk_size;
    uint64_t len = st->size - start < st->chunk_size ? st->size - start : st->chunk_size;
    sync_file_range(st->fd, (off_t)start, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

static void account_written(aftp_store *st, uint64_t off, size_t len)
{
    while (len > 0) {
        uint64_t chunk = off / st->chunk_size;
        uint64_t chunk_end = (chunk + 1) * st->chunk_size;
        uint64_t in_chunk = chunk_end - off < len ? chunk_end - off : len;
        uint64_t chunk_len = chunk_end > st->size ? st->size - chunk * st->chunk_size
                                                  : st->chunk_size;
        st->chunk_filled[chunk] += in_chunk;
        if (st->chunk_filled[chunk] == chunk_len)
            chunk_complete(st, chunk);
        off += in_chunk;
        len -= in_chunk;
    }
}

int aftp_store_write(aftp_store *st, uint32_t file_id, uint64_t off, const uint8_t *data,
                     size_t len)
{
    int rc = check_range(st, file_id, off, len);
    if (rc != AFTP_OK || len == 0)
        return rc;
    if ((rc = reserve_ahead(st, off + len)) != AFTP_OK)
        return rc;
    if (data != st->map + off) /* else opened in place (aftp_store_place) */
        memcpy(st->map + off, data, len);
    account_written(st, off, len);
    aftp_resident_touch(&st->resident, off, len);
    aftp_resident_settle(&st->resident);
    return AFTP_OK;
}

int aftp_store_place(aftp_store *st, uint32_t file_id, uint64_t off, size_t len, uint8_t **out)
{
    int rc = check_range(st, file_id, off, len);
    if (rc == AFTP_OK && len == 0)
        rc = AFTP_ERR_INVALID_ARGUMENT; /* no mapping behind an empty file */
    /* The lent bytes are written once this returns: their space first. */
    if (rc == AFTP_OK && (rc = reserve_ahead(st, off + len)) == AFTP_OK)
        *out = st->map + off;
    return rc;
}

int aftp_store_view(aftp_store *st, uint32_t file_id, uint64_t off, size_t len,
                    const uint8_t **out)
{
    static const uint8_t empty[1];
    int rc = check_range(st, file_id, off, len);
    if (rc != AFTP_OK)
        return rc;
    if (st->map == NULL) {
        *out = empty;
        return AFTP_OK;
    }
    /* The caller reads this view after we return: release what earlier
     * views brought in first, then note this one. */
    aftp_resident_settle(&st->resident);
    aftp_resident_touch(&st->resident, off, len);
    *out = st->map + off;
    return AFTP_OK;
}

int aftp_store_rename(int from_dir, const char *from, int to_dir, const char *to, int overwrite)
{
    if (!overwrite) {
        if (renameat2(from_dir, from, to_dir, to, RENAME_NOREPLACE) == 0)
            return AFTP_OK;
        if (errno != EINVAL && errno != ENOSYS)
            return errno_to_error(errno);
        /* No RENAME_NOREPLACE on this file system: link() refuses to replace too. */
        if (linkat(from_dir, from, to_dir, to, 0) != 0)
            return errno_to_error(errno);
        unlinkat(from_dir, from, 0);
        return AFTP_OK;
    }
    return renameat(from_dir, from, to_dir, to) == 0 ? AFTP_OK : errno_to_error(errno);
}

/* fsync covers bytes written through the shared mapping too (Linux keeps
 * one page cache), so no separate msync pass is needed. */
static int commit(aftp_store *st)
{
    struct timespec times[2] = {
        {.tv_sec = 0, .tv_nsec = UTIME_OMIT},
        {.tv_sec = st->mtime_ns / 1000000000, .tv_nsec = st->mtime_ns % 1000000000},
    };
    if (times[1].tv_nsec < 0) {
        times[1].tv_sec -= 1;
        times[1].tv_nsec += 1000000000;
    }
    if (fchmod(st->fd, (mode_t)(st->mode & 0777) & ~st->umask) != 0 ||
        futimens(st->fd, times) != 0 || fsync(st->fd) != 0)
        return fail(st, errno_to_error(errno), "cannot finish", strerror(errno));
    int rc = aftp_store_rename(st->parent_fd, st->tmp_name, st->parent_fd, st->leaf,
                               st->overwrite);
    if (rc == AFTP_ERR_FILE_EXISTS)
        return fail(st, rc, "refusing to replace file created during the transfer", NULL);
    if (rc != AFTP_OK)
        return fail(st, rc, "cannot rename into", strerror(errno));
    if (fsync(st->parent_fd) != 0)
        return fail(st, errno_to_error(errno), "cannot sync the directory of",
                    strerror(errno));
    return AFTP_OK;
}

int aftp_store_close(aftp_store *st, uint32_t file_id, int do_commit)
{
    if (st->fd < 0 || file_id != st->file_id)
        return AFTP_ERR_INVALID_STATE;
    int rc = do_commit ? commit(st) : AFTP_OK;
    /* After a successful rename the temporary name is gone already. */
    release_file(st, !(do_commit && rc == AFTP_OK));
    return rc;
}

static int ops_view(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out)
{
    return aftp_store_view(user, file_id, off, len, out);
}

static int ops_open(void *user, const aftp_file_info *info)
{
    return aftp_store_open(user, info);
}

static int ops_write(void *user, uint32_t file_id, uint64_t off, const uint8_t *data, size_t len)
{
    return aftp_store_write(user, file_id, off, data, len);
}

static int ops_close(void *user, uint32_t file_id, int commit_file)
{
    return aftp_store_close(user, file_id, commit_file);
}

static int ops_place(void *user, uint32_t file_id, uint64_t off, size_t len, uint8_t **out)
{
    return aftp_store_place(user, file_id, off, len, out);
}

const aftp_storage_ops aftp_store_ops = {.view = ops_view,
                                         .open = ops_open,
                                         .write = ops_write,
                                         .close = ops_close,
                                         .place = ops_place};
