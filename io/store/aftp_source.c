#include "aftp_source.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "aftp_faux.h"

/* Keep this much behind the furthest read resident: repairs of recent
 * losses hit memory; older ones fault their page back in. */
#define SOURCE_KEEP (UINT64_C(8) << 20)

static int64_t ns_of(struct timespec ts)
{
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mtime_of(const struct stat *sb)
{
    return ns_of(sb->st_mtim);
}

static int open_error(aftp_source *src, int err, const char *path, const char *why)
{
    snprintf(src->message, sizeof src->message, "cannot send %s: %s", path, why);
    if (src->fd >= 0)
        close(src->fd);
    src->fd = -1;
    return err;
}

static void describe(aftp_source *src, uint32_t file_id, uint32_t mode, aftp_file_info *info)
{
    src->file_id = file_id;
    memset(info, 0, sizeof *info);
    info->file_id = file_id;
    info->size = src->size;
    info->mtime_ns = src->mtime_ns;
    info->mode = mode;
    info->path = src->name;
}

/* A faux:// source has no file: its bytes are the zero page. */
static int open_faux(aftp_source *src, const char *url, uint32_t file_id, aftp_file_info *info)
{
    struct timespec now;
    if (aftp_faux_parse(url, src->faux_name, &src->size, src->message, sizeof src->message) !=
        AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (aftp_faux_zeros(0) == NULL)
        return open_error(src, AFTP_ERR_NO_MEMORY, url, "cannot map zero pages");
    clock_gettime(CLOCK_REALTIME, &now);
    src->faux = 1;
    src->name = src->faux_name;
    src->mtime_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    describe(src, file_id, 0644, info);
    return AFTP_OK;
}

/* Why a file that is not a regular one cannot be sent, or NULL. */
static const char *not_regular(mode_t mode)
{
    if (S_ISREG(mode))
        return NULL;
    if (S_ISDIR(mode))
        return "is a directory";
    if (S_ISFIFO(mode))
        return "is a FIFO (named pipe): aftp sends regular files only";
    if (S_ISCHR(mode))
        return "is a character device: aftp sends regular files only";
    if (S_ISBLK(mode))
        return "is a block device: aftp sends regular files only";
    if (S_ISSOCK(mode))
        return "is a socket: aftp sends regular files only";
    return "is not a regular file: aftp sends regular files only";
}

/* Kernel file systems whose files' sizes say nothing of their content:
 * proc reports 0 bytes for files that have some, sysfs 4096 for
 * attributes of a few bytes. Their content is made when read, so neither
 * a mapping nor the size in the offer would be true. */
const char *aftp_source_pseudo_fs(int fd)
{
    static const struct {
        unsigned long magic;
        const char *name;
    } pseudo[] = {
        {PROC_SUPER_MAGIC, "proc"},        {SYSFS_MAGIC, "sysfs"},
        {DEBUGFS_MAGIC, "debugfs"},        {TRACEFS_MAGIC, "tracefs"},
        {SECURITYFS_MAGIC, "securityfs"},
        {CGROUP_SUPER_MAGIC, "cgroup"},    {CGROUP2_SUPER_MAGIC, "cgroup2"},
        {BPF_FS_MAGIC, "bpf"},
    };
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof pseudo / sizeof pseudo[0]; i++)
        if ((unsigned long)fs.f_type == pseudo[i].magic)
            return pseudo[i].name;
    return NULL;
}

/* A regular file whose size the file system does not know is refused
 * rather than sent short (spec: the offer carries the size, and a file of
 * 0 bytes would be delivered "verified"). AFTP_OK when the size is true
 * as far as can be told: not on a pseudo file system, and a file of 0
 * bytes has no byte at offset 0. */
static int check_size_known(aftp_source *src, const char *path, const struct stat *sb)
{
    char byte, why[256];
    const char *fs = aftp_source_pseudo_fs(src->fd);
    if (fs != NULL)
        snprintf(why, sizeof why, "it is on %s, a kernel file system whose files have no true "
                 "size (aftp sends regular files of a known size: copy it to a regular file "
                 "first)", fs);
    else if (sb->st_size == 0 && pread(src->fd, &byte, 1, 0) == 1)
        snprintf(why, sizeof why, "its file system reports 0 bytes but it has content (aftp "
                 "sends regular files of a known size: copy it to a regular file first)");
    else
        return AFTP_OK;
    return open_error(src, AFTP_ERR_INVALID_ARGUMENT, path, why);
}

int aftp_source_openat(int at, const char *path, int flags)
{
    if (at == AT_FDCWD)
        return open(path, flags | O_CLOEXEC);
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS};
    long fd;
    do
        fd = syscall(SYS_openat2, at, path, &how, sizeof how);
    while (fd < 0 && errno == EINTR);
    return (int)fd;
}

int aftp_source_statat(int at, const char *path, struct stat *sb)
{
    if (at == AT_FDCWD)
        return stat(path, sb);
    int fd = aftp_source_openat(at, path, O_PATH);
    if (fd < 0)
        return -1;
    int rc = fstat(fd, sb);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int aftp_source_errno_error(int e, const char **why)
{
    *why = e == ELOOP || e == EXDEV
               ? "a symbolic link on its path (none is followed beneath a root)"
               : strerror(e);
    return e == ELOOP || e == EXDEV   ? AFTP_ERR_PATH_REJECTED
           : e == ENOENT || e == ENOTDIR ? AFTP_ERR_NOT_FOUND
           : e == EACCES || e == EPERM   ? AFTP_ERR_PERMISSION
           : e == ENOMEM                 ? AFTP_ERR_NO_MEMORY
                                         : AFTP_ERR_IO;
}

/* Opens without blocking: a FIFO without a writer (or a device) would
 * otherwise hang open() before fstat could refuse it. The descriptor of
 * the regular file that passes is made blocking again. */
static int open_regular(aftp_source *src, int at, const char *path, struct stat *sb)
{
    src->fd = aftp_source_openat(at, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (src->fd < 0) {
        const char *why;
        int err = aftp_source_errno_error(errno, &why);
        return open_error(src, err, path, why);
    }
    if (fstat(src->fd, sb) != 0)
        return open_error(src, AFTP_ERR_IO, path, strerror(errno));
    const char *why = not_regular(sb->st_mode);
    if (why != NULL)
        return open_error(src, AFTP_ERR_INVALID_ARGUMENT, path, why);
    int flags = fcntl(src->fd, F_GETFL);
    if (flags < 0 || fcntl(src->fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        return open_error(src, AFTP_ERR_IO, path, strerror(errno));
    return check_size_known(src, path, sb);
}

int aftp_source_open(aftp_source *src, const char *path, uint32_t file_id, aftp_file_info *info)
{
    return aftp_source_open_at(src, AT_FDCWD, path, file_id, info);
}

int aftp_source_open_at(aftp_source *src, int at, const char *path, uint32_t file_id,
                        aftp_file_info *info)
{
    struct stat sb;
    memset(src, 0, sizeof *src);
    src->fd = -1;
    if (at == AT_FDCWD && aftp_faux_is(path))
        return open_faux(src, path, file_id, info);
    int rc = open_regular(src, at, path, &sb);
    if (rc != AFTP_OK)
        return rc;
    src->size = (uint64_t)sb.st_size;
    if (src->size > 0) {
        void *m = mmap(NULL, src->size, PROT_READ, MAP_SHARED, src->fd, 0);
        if (m == MAP_FAILED)
            return open_error(src, AFTP_ERR_IO, path, strerror(errno));
        if (aftp_mapguard_init(&src->guard, m, src->size) != AFTP_OK) {
            munmap(m, src->size);
            return open_error(src, AFTP_ERR_INTERNAL, path, "cannot install a SIGBUS handler");
        }
        madvise(m, src->size, MADV_SEQUENTIAL);
        src->map = m;
        aftp_resident_init(&src->resident, m, src->size, SOURCE_KEEP, MADV_POPULATE_READ);
    }
    const char *slash = strrchr(path, '/');
    src->name = slash ? slash + 1 : path;
    src->mtime_ns = mtime_of(&sb);
    src->ctime_ns = ns_of(sb.st_ctim);
    src->dev = (uint64_t)sb.st_dev;
    src->ino = (uint64_t)sb.st_ino;
    describe(src, file_id, sb.st_mode & 07777, info);
    return AFTP_OK;
}

void aftp_source_fini(aftp_source *src)
{
    if (src->map != NULL)
        munmap((void *)src->map, src->size);
    if (src->fd >= 0)
        close(src->fd);
    src->map = NULL;
    src->fd = -1;
}

int aftp_source_view(aftp_source *src, uint32_t file_id, uint64_t off, size_t len,
                     const uint8_t **out)
{
    static const uint8_t empty[1];
    if (file_id != src->file_id || (src->fd < 0 && !src->faux))
        return AFTP_ERR_INVALID_STATE;
    if (aftp_mapguard_tripped(&src->guard))
        return AFTP_ERR_SOURCE_CHANGED;
    if (off > src->size || len > src->size - off)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (src->faux) {
        *out = aftp_faux_zeros(len);
        return *out ? AFTP_OK : AFTP_ERR_INVALID_ARGUMENT;
    }
    if (src->map == NULL) {
        *out = empty;
        return AFTP_OK;
    }
    aftp_resident_touch(&src->resident, off, len);
    *out = src->map + off;
    return AFTP_OK;
}

/* What differs from the file as opened; figures only where they differ. */
static void describe_change(aftp_source *src, int stat_ok, const struct stat *sb)
{
    const char *head = "source changed during transfer";
    if (!stat_ok)
        snprintf(src->message, sizeof src->message, "%s: %s (%s)", src->name, head,
                 strerror(errno));
    else if ((uint64_t)sb->st_size != src->size)
        snprintf(src->message, sizeof src->message, "%s: %s (%llu bytes when opened, %llu now)",
                 src->name, head, (unsigned long long)src->size,
                 (unsigned long long)sb->st_size);
    else if (mtime_of(sb) != src->mtime_ns)
        snprintf(src->message, sizeof src->message,
                 "%s: %s (written to while being sent: its modification time changed, its "
                 "size did not)", src->name, head);
    else
        snprintf(src->message, sizeof src->message,
                 "%s: %s (a read of it failed: it was truncated while being sent)", src->name,
                 head);
}

int aftp_source_check(aftp_source *src)
{
    struct stat sb;
    if (src->faux)
        return AFTP_OK; /* zeros do not change */
    if (src->fd < 0)
        return AFTP_ERR_INVALID_STATE;
    int stat_ok = fstat(src->fd, &sb) == 0;
    if (stat_ok && (uint64_t)sb.st_size == src->size && mtime_of(&sb) == src->mtime_ns &&
        !aftp_mapguard_tripped(&src->guard))
        return AFTP_OK;
    aftp_mapguard_trip(&src->guard);
    describe_change(src, stat_ok, &sb);
    return AFTP_ERR_SOURCE_CHANGED;
}

void aftp_source_settle(aftp_source *src)
{
    aftp_resident_settle(&src->resident);
}

static int ops_view(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out)
{
    return aftp_source_view(user, file_id, off, len, out);
}

/* The mapping lives until aftp_source_fini: the driver owns the source. */
static int ops_close(void *user, uint32_t file_id, int commit)
{
    aftp_source *src = user;
    (void)commit;
    return file_id == src->file_id ? AFTP_OK : AFTP_ERR_INVALID_STATE;
}

const aftp_storage_ops aftp_source_ops = {.view = ops_view, .close = ops_close};
