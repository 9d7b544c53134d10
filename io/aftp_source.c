#include "aftp_source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aftp_faux.h"

/* Keep this much behind the furthest read resident: repairs of recent
 * losses hit memory; older ones fault their page back in. */
#define SOURCE_KEEP (UINT64_C(8) << 20)

static int64_t mtime_of(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
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

int aftp_source_open(aftp_source *src, const char *path, uint32_t file_id, aftp_file_info *info)
{
    struct stat sb;
    memset(src, 0, sizeof *src);
    src->fd = -1;
    if (aftp_faux_is(path))
        return open_faux(src, path, file_id, info);
    src->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (src->fd < 0) {
        int e = errno;
        int err = e == ENOENT || e == ENOTDIR ? AFTP_ERR_NOT_FOUND
                  : e == EACCES || e == EPERM ? AFTP_ERR_PERMISSION
                                              : AFTP_ERR_IO;
        return open_error(src, err, path, strerror(e));
    }
    if (fstat(src->fd, &sb) != 0)
        return open_error(src, AFTP_ERR_IO, path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return open_error(src, AFTP_ERR_INVALID_ARGUMENT, path, "is a directory");
    if (!S_ISREG(sb.st_mode))
        return open_error(src, AFTP_ERR_INVALID_ARGUMENT, path, "not a regular file");
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
    if (!stat_ok)
        snprintf(src->message, sizeof src->message,
                 "%s: source changed during transfer (%s)", src->name, strerror(errno));
    else
        snprintf(src->message, sizeof src->message,
                 "%s: source changed during transfer (%llu bytes when opened, %llu now)",
                 src->name, (unsigned long long)src->size, (unsigned long long)sb.st_size);
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
