#include "aftp_journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "aftp_path.h"
#include "proto/aftp_wire.h"

#define JOURNAL_MAGIC "AFTPJRNL"
#define JOURNAL_HEADER_BYTES 64u
#define JOURNAL_TRAILER_BYTES 8u
#define JOURNAL_MAX_BYTES                                                                   \
    (JOURNAL_HEADER_BYTES + AFTP_WIRE_MAX_PATH + 16u * AFTP_JOURNAL_MAX_RANGES +             \
     JOURNAL_TRAILER_BYTES)

/* The suffixes of a state's files; the name of each is <32 hex><suffix>. */
static const char *const state_suffixes[] = {".part", ".jrnl", ".jrnl.new"};
enum { STATE_DATA, STATE_JOURNAL, STATE_JOURNAL_NEW, STATE_FILES };
#define STATE_NAME_CAP AFTP_JOURNAL_STATE_NAME_CAP

static int errno_to_error(int e)
{
    switch (e) {
    case ENOSPC: case EDQUOT: case EFBIG: return AFTP_ERR_NO_SPACE;
    case EACCES: case EPERM: case EROFS: return AFTP_ERR_PERMISSION;
    case EEXIST: return AFTP_ERR_FILE_EXISTS;
    case ELOOP: case ENOTDIR: return AFTP_ERR_PATH_REJECTED;
    case ENOMEM: return AFTP_ERR_NO_MEMORY;
    default: return AFTP_ERR_IO;
    }
}

/* Records "<what> <path>: <detail>" in j->why, the path printable: a
 * failure, or why state was discarded (err AFTP_OK). Returns err. */
__attribute__((format(printf, 4, 5))) static int explain(aftp_journal *j, int err,
                                                        const char *what, const char *fmt, ...)
{
    char printable[128], detail[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    aftp_path_printable(j->path != NULL ? j->path : "", printable, sizeof printable);
    snprintf(j->why, sizeof j->why, "%s %s: %s", what, printable, detail);
    return err;
}

/* ---- sets of block ranges ---- */

static void set_free(aftp_journal_set *s)
{
    free(s->ranges);
    memset(s, 0, sizeof *s);
}

static int set_reserve(aftp_journal_set *s, uint32_t need)
{
    if (need <= s->cap)
        return AFTP_OK;
    uint32_t cap = s->cap ? s->cap : 16;
    while (cap < need)
        cap *= 2;
    aftp_journal_range *r = realloc(s->ranges, cap * sizeof *r);
    if (r == NULL)
        return AFTP_ERR_NO_MEMORY;
    s->ranges = r;
    s->cap = cap;
    return AFTP_OK;
}

static uint64_t range_end(const aftp_journal_range *r)
{
    return r->first + r->count;
}

/* Adds [first, first + count), merging what it touches. At the cap the
 * highest range goes (the new one, when it is the highest): the set only
 * ever claims less than was given, never more. */
static int set_add(aftp_journal_set *s, uint64_t first, uint64_t count)
{
    uint64_t end = first + count;
    uint32_t i = 0, k;
    if (count == 0)
        return AFTP_OK;
    while (i < s->count && range_end(&s->ranges[i]) < first)
        i++;
    for (k = i; k < s->count && s->ranges[k].first <= end; k++)
        ;
    if (k > i) { /* merge ranges [i, k) and the new one into ranges[i] */
        uint64_t lo = s->ranges[i].first < first ? s->ranges[i].first : first;
        uint64_t hi = range_end(&s->ranges[k - 1]) > end ? range_end(&s->ranges[k - 1]) : end;
        s->ranges[i] = (aftp_journal_range){lo, hi - lo};
        memmove(&s->ranges[i + 1], &s->ranges[k], (s->count - k) * sizeof *s->ranges);
        s->count -= k - i - 1;
        return AFTP_OK;
    }
    if (s->count == AFTP_JOURNAL_MAX_RANGES) {
        if (i == s->count)
            return AFTP_OK;
        s->count--;
    }
    int rc = set_reserve(s, s->count + 1);
    if (rc != AFTP_OK)
        return rc;
    memmove(&s->ranges[i + 1], &s->ranges[i], (s->count - i) * sizeof *s->ranges);
    s->ranges[i] = (aftp_journal_range){first, count};
    s->count++;
    return AFTP_OK;
}

/* ---- names ---- */

int aftp_journal_path_reserved(const char *path)
{
    size_t n = strlen(AFTP_JOURNAL_DIR);
    return strncmp(path, AFTP_JOURNAL_DIR, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static void state_name(const char *stem, int which, char out[STATE_NAME_CAP])
{
    snprintf(out, STATE_NAME_CAP, "%s%s", stem, state_suffixes[which]);
}

static void name_of_path(const char *path, char out[AFTP_JOURNAL_NAME_BYTES + 1])
{
    XXH128_hash_t h = XXH3_128bits(path, strlen(path));
    snprintf(out, AFTP_JOURNAL_NAME_BYTES + 1, "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64,
             (uint64_t)h.low64);
}

/* 1 when the file was there and is gone. */
static int unlink_state(int dirfd, const char *stem, int which)
{
    char name[STATE_NAME_CAP];
    state_name(stem, which, name);
    return unlinkat(dirfd, name, 0) == 0;
}

/* The number of files removed. */
static int unlink_all_state(int dirfd, const char *stem)
{
    int removed = 0;
    for (int w = 0; w < STATE_FILES; w++)
        removed += unlink_state(dirfd, stem, w);
    return removed;
}

/* ---- the private directory ---- */

/* The directory fd is ours alone: owned by us, set to 0700. 0 or errno. */
static int make_private(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return errno;
    if (sb.st_uid != geteuid())
        return EPERM;
    if ((sb.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0)
        return errno;
    return 0;
}

int aftp_journal_dir_open(int rootfd, int *dirfd, char *why, size_t cap)
{
    int e = 0;
    *dirfd = -1;
    if (mkdirat(rootfd, AFTP_JOURNAL_DIR, 0700) != 0 && errno != EEXIST)
        e = errno;
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = e ? -1 : openat(rootfd, AFTP_JOURNAL_DIR, flags);
    if (fd < 0 && e == 0)
        e = errno;
    if (fd >= 0 && (e = make_private(fd)) != 0)
        close(fd);
    if (e == 0) {
        *dirfd = fd;
        return AFTP_OK;
    }
    snprintf(why, cap, "cannot use the resume directory " AFTP_JOURNAL_DIR " beneath the "
             "destination: %s (it must be a directory of this user, not a link)", strerror(e));
    return errno_to_error(e);
}

/* ---- the journal's bytes ---- */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* The journal of j's durable blocks, in buf (JOURNAL_MAX_BYTES); its length. */
static size_t encode(const aftp_journal *j, uint8_t *buf)
{
    size_t path_len = strlen(j->path);
    memcpy(buf, JOURNAL_MAGIC, 8);
    put_le(buf + 8, AFTP_JOURNAL_VERSION, 4);
    put_le(buf + 12, 0, 4);
    put_le(buf + 16, j->src.size, 8);
    put_le(buf + 24, (uint64_t)j->src.mtime_ns, 8);
    put_le(buf + 32, j->src.identity, 8);
    put_le(buf + 40, j->src.block_size, 4);
    put_le(buf + 44, path_len, 4);
    put_le(buf + 48, j->block_count, 8);
    put_le(buf + 56, j->durable.count, 4);
    put_le(buf + 60, 0, 4);
    uint8_t *p = buf + JOURNAL_HEADER_BYTES;
    memcpy(p, j->path, path_len);
    p += path_len;
    for (uint32_t i = 0; i < j->durable.count; i++, p += 16) {
        put_le(p, j->durable.ranges[i].first, 8);
        put_le(p + 8, j->durable.ranges[i].count, 8);
    }
    put_le(p, XXH3_64bits(buf, (size_t)(p - buf)), 8);
    return (size_t)(p - buf) + JOURNAL_TRAILER_BYTES;
}

/* The ranges of a checked journal: sorted, disjoint, non-adjacent, within
 * the block count. */
static int ranges_valid(const uint8_t *p, uint32_t count, uint64_t blocks)
{
    uint64_t next_min = 0;
    for (uint32_t i = 0; i < count; i++, p += 16) {
        uint64_t first = get_le(p, 8), n = get_le(p + 8, 8);
        if (n == 0 || first < next_min || first > blocks || n > blocks - first)
            return 0;
        next_min = first + n + 1;
    }
    return 1;
}

/* Checks buf[0..len) as a journal: NULL, or what is wrong with it. */
static const char *journal_damage(const uint8_t *buf, size_t len)
{
    if (len < JOURNAL_HEADER_BYTES + JOURNAL_TRAILER_BYTES || memcmp(buf, JOURNAL_MAGIC, 8) != 0)
        return "too short or not a journal";
    if (get_le(buf + 8, 4) != AFTP_JOURNAL_VERSION)
        return "unknown version";
    uint64_t path_len = get_le(buf + 44, 4), ranges = get_le(buf + 56, 4);
    if (path_len > AFTP_WIRE_MAX_PATH || ranges > AFTP_JOURNAL_MAX_RANGES ||
        len != JOURNAL_HEADER_BYTES + path_len + 16 * ranges + JOURNAL_TRAILER_BYTES)
        return "length does not match its header";
    if (XXH3_64bits(buf, len - JOURNAL_TRAILER_BYTES) != get_le(buf + len - 8, 8))
        return "checksum mismatch";
    if (!ranges_valid(buf + JOURNAL_HEADER_BYTES + path_len, (uint32_t)ranges,
                      get_le(buf + 48, 8)))
        return "held ranges out of order or beyond the file";
    return NULL;
}

/* Whether a checked journal is of j's path, source and geometry. */
static int journal_matches(const aftp_journal *j, const uint8_t *buf)
{
    size_t path_len = strlen(j->path);
    return get_le(buf + 16, 8) == j->src.size &&
           (int64_t)get_le(buf + 24, 8) == j->src.mtime_ns &&
           get_le(buf + 32, 8) == j->src.identity &&
           get_le(buf + 40, 4) == j->src.block_size && get_le(buf + 44, 4) == path_len &&
           get_le(buf + 48, 8) == j->block_count &&
           memcmp(buf + JOURNAL_HEADER_BYTES, j->path, path_len) == 0;
}

static int adopt_ranges(aftp_journal *j, const uint8_t *buf)
{
    const uint8_t *p = buf + JOURNAL_HEADER_BYTES + strlen(j->path);
    uint32_t count = (uint32_t)get_le(buf + 56, 4);
    for (uint32_t i = 0; i < count; i++, p += 16) {
        int rc = set_add(&j->durable, get_le(p, 8), get_le(p + 8, 8));
        if (rc != AFTP_OK)
            return explain(j, rc, "cannot resume", "out of memory for %u held ranges", count);
    }
    return AFTP_OK;
}

/* Reads the journal into buf: its length, 0 when there is none (ENOENT),
 * or -1 when it cannot be read as a journal. */
static ssize_t read_journal(aftp_journal *j, uint8_t *buf)
{
    char name[STATE_NAME_CAP];
    struct stat sb;
    state_name(j->name, STATE_JOURNAL, name);
    int fd = openat(j->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    /* An empty journal is a damaged one, not a missing one. */
    ssize_t n = -1;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        sb.st_size <= (off_t)JOURNAL_MAX_BYTES &&
        pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size)
        n = sb.st_size;
    close(fd);
    return n;
}

/* ---- open, resume ---- */

/* Loads the journal of j's path: sets j->outcome and, when resumed, the
 * held blocks. */
static int load(aftp_journal *j)
{
    uint8_t *buf = malloc(JOURNAL_MAX_BYTES);
    if (buf == NULL)
        return explain(j, AFTP_ERR_NO_MEMORY, "cannot resume", "out of memory for the journal");
    ssize_t n = read_journal(j, buf);
    const char *damage = n < 0 ? "cannot be read" : n > 0 ? journal_damage(buf, (size_t)n) : NULL;
    int rc = AFTP_OK;
    if (n == 0) {
        j->outcome = AFTP_JOURNAL_FRESH;
    } else if (damage != NULL) {
        j->outcome = AFTP_JOURNAL_DAMAGED;
        explain(j, AFTP_OK, "discarded the resume journal of", "%s", damage);
    } else if (!journal_matches(j, buf)) {
        j->outcome = AFTP_JOURNAL_CHANGED;
        explain(j, AFTP_OK, "started over",
                "the source changed since the partial copy (now %" PRIu64 " bytes, mtime %" PRId64
                ")", j->src.size, j->src.mtime_ns);
    } else {
        j->outcome = AFTP_JOURNAL_RESUMED;
        rc = adopt_ranges(j, buf);
    }
    free(buf);
    return rc;
}

/* The resumed partial file: opened, and damaged unless it has the
 * source's full size (it is created so, and flushed before any journal
 * names it). */
static int open_data(aftp_journal *j)
{
    char name[STATE_NAME_CAP];
    struct stat sb;
    state_name(j->name, STATE_DATA, name);
    j->data_fd = openat(j->dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (j->data_fd < 0 || fstat(j->data_fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        explain(j, AFTP_OK, "discarded the partial file of", "it cannot be opened: %s",
                strerror(errno));
    } else if ((uint64_t)sb.st_size != j->src.size) {
        explain(j, AFTP_OK, "discarded the partial file of", "it has %" PRIu64 " bytes, the "
                "journal is of %" PRIu64, (uint64_t)sb.st_size, j->src.size);
    } else {
        /* Resumed state is in use: the cleanup must not take it as left over. */
        futimens(j->data_fd, NULL);
        return AFTP_OK;
    }
    if (j->data_fd >= 0)
        close(j->data_fd);
    j->data_fd = -1;
    j->outcome = AFTP_JOURNAL_DAMAGED;
    set_free(&j->durable);
    return AFTP_OK;
}

static int create_data(aftp_journal *j)
{
    char name[STATE_NAME_CAP];
    unlink_all_state(j->dirfd, j->name);
    state_name(j->name, STATE_DATA, name);
    j->data_fd = openat(j->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (j->data_fd < 0 || ftruncate(j->data_fd, (off_t)j->src.size) != 0)
        return explain(j, errno_to_error(errno), "cannot create the partial file of",
                       "%s (%" PRIu64 " bytes)", strerror(errno), j->src.size);
    return AFTP_OK;
}

/* What every open does first: the path checked, the state's name. */
static int open_common(aftp_journal *j, int dirfd, const char *path,
                       const aftp_journal_source *src)
{
    memset(j, 0, sizeof *j);
    j->dirfd = dirfd;
    j->data_fd = -1;
    j->src = *src;
    if ((j->path = strdup(path)) == NULL)
        return explain(j, AFTP_ERR_NO_MEMORY, "no resume state for", "out of memory");
    size_t path_len = strlen(path);
    if (path_len == 0 || path_len > AFTP_WIRE_MAX_PATH || aftp_journal_path_reserved(path))
        return explain(j, AFTP_ERR_PATH_REJECTED, "no resume state for", "a path of %zu bytes "
                       "(1 to %u, not beneath " AFTP_JOURNAL_DIR ")", path_len, AFTP_WIRE_MAX_PATH);
    if (src->block_size == 0)
        return explain(j, AFTP_ERR_INVALID_ARGUMENT, "no resume state for", "block size 0");
    name_of_path(path, j->name);
    j->block_count = src->size / src->block_size + (src->size % src->block_size != 0);
    return AFTP_OK;
}

int aftp_journal_open(aftp_journal *j, int dirfd, const char *path,
                      const aftp_journal_source *src)
{
    int rc = open_common(j, dirfd, path, src);
    if (rc != AFTP_OK)
        return rc;
    rc = load(j);
    if (rc == AFTP_OK && j->outcome == AFTP_JOURNAL_RESUMED)
        rc = open_data(j);
    if (rc == AFTP_OK && j->outcome != AFTP_JOURNAL_RESUMED)
        rc = create_data(j);
    return rc;
}

int aftp_journal_open_whole(aftp_journal *j, int dirfd, const char *path,
                            const aftp_journal_source *src)
{
    int rc = open_common(j, dirfd, path, src);
    j->whole = 1;
    j->outcome = AFTP_JOURNAL_FRESH;
    return rc; /* the partial file comes with aftp_journal_reopen_data */
}

/* A whole file's partial file, made at its first use. O_TRUNC: an
 * earlier session's partial data of the path is replaced in place,
 * without a probe or an unlink first. */
static int create_whole(aftp_journal *j, const char *name)
{
    j->data_fd = openat(j->dirfd, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (j->data_fd < 0 || ftruncate(j->data_fd, (off_t)j->src.size) != 0)
        return explain(j, errno_to_error(errno), "cannot create the partial file of",
                       "%s (%" PRIu64 " bytes)", strerror(errno), j->src.size);
    j->created = 1;
    return AFTP_OK;
}

void aftp_journal_data_name(const aftp_journal *j, char out[AFTP_JOURNAL_STATE_NAME_CAP])
{
    state_name(j->name, STATE_DATA, out);
}

/* ---- recording ---- */

void aftp_journal_release_data(aftp_journal *j)
{
    if (j->data_fd >= 0)
        close(j->data_fd);
    j->data_fd = -1;
}

int aftp_journal_reopen_data(aftp_journal *j)
{
    char name[STATE_NAME_CAP];
    if (j->data_fd >= 0)
        return AFTP_OK;
    state_name(j->name, STATE_DATA, name);
    if (j->whole && !j->created)
        return create_whole(j, name);
    j->data_fd = openat(j->dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (j->data_fd < 0)
        return explain(j, errno_to_error(errno), "cannot reopen the partial file of", "%s",
                       strerror(errno));
    return AFTP_OK;
}

int aftp_journal_written(aftp_journal *j, uint64_t first, uint64_t count)
{
    if (j->data_fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (first > j->block_count || count > j->block_count - first)
        return AFTP_ERR_INVALID_ARGUMENT;
    return set_add(&j->written, first, count);
}

int aftp_journal_flush_data(aftp_journal *j)
{
    if (j->data_fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (fdatasync(j->data_fd) != 0)
        return explain(j, errno_to_error(errno), "cannot flush the partial file of", "%s",
                       strerror(errno));
    for (uint32_t i = 0; i < j->written.count; i++) {
        int rc = set_add(&j->durable, j->written.ranges[i].first, j->written.ranges[i].count);
        if (rc != AFTP_OK)
            return explain(j, rc, "cannot record", "out of memory for held ranges");
    }
    j->written.count = 0;
    return AFTP_OK;
}

/* Writes the new copy and syncs it: 0, or -1 with errno. */
static int write_new_copy(int dirfd, const char *name, const uint8_t *buf, size_t len)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, buf, len);
    if (n >= 0 && (size_t)n < len)
        errno = ENOSPC; /* a regular file is written short only when its disk is full */
    int rc = (size_t)n == len && fdatasync(fd) == 0 ? 0 : -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0)
        return -1;
    errno = e;
    return rc;
}

int aftp_journal_save(aftp_journal *j)
{
    char new_name[STATE_NAME_CAP], name[STATE_NAME_CAP];
    if (j->data_fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (j->whole)
        return AFTP_OK; /* no journal: the file is sent again whole */
    uint8_t *buf = malloc(JOURNAL_MAX_BYTES);
    if (buf == NULL)
        return explain(j, AFTP_ERR_NO_MEMORY, "cannot record the resume journal of",
                       "out of memory");
    size_t len = encode(j, buf);
    state_name(j->name, STATE_JOURNAL_NEW, new_name);
    state_name(j->name, STATE_JOURNAL, name);
    int ok = write_new_copy(j->dirfd, new_name, buf, len) == 0 &&
             renameat(j->dirfd, new_name, j->dirfd, name) == 0 && fsync(j->dirfd) == 0;
    int e = errno;
    free(buf);
    if (ok)
        return AFTP_OK;
    unlinkat(j->dirfd, new_name, 0);
    return explain(j, errno_to_error(e), "cannot record the resume journal of",
                   "%s (%zu bytes to write; the previous journal is kept)", strerror(e), len);
}

int aftp_journal_sync(aftp_journal *j)
{
    int rc = aftp_journal_flush_data(j);
    return rc == AFTP_OK ? aftp_journal_save(j) : rc;
}

/* ---- finish, close ---- */

static int rename_data(aftp_journal *j, int parent_fd, const char *leaf, int replace)
{
    char name[STATE_NAME_CAP];
    state_name(j->name, STATE_DATA, name);
    if (replace)
        return renameat(j->dirfd, name, parent_fd, leaf);
    /* Refusing to replace needs RENAME_NOREPLACE, or link(), which refuses too. */
    if (renameat2(j->dirfd, name, parent_fd, leaf, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (linkat(j->dirfd, name, parent_fd, leaf, 0) != 0)
        return -1;
    return unlinkat(j->dirfd, name, 0);
}

static int move_failed(aftp_journal *j)
{
    int e = errno;
    return explain(j, errno_to_error(e), "cannot move into place", "%s%s", strerror(e),
                   e == EXDEV ? " (the destination is on another file system than "
                                AFTP_JOURNAL_DIR ")"
                              : "");
}

int aftp_journal_place(aftp_journal *j, int parent_fd, const char *leaf, int replace)
{
    return rename_data(j, parent_fd, leaf, replace) == 0 ? AFTP_OK : move_failed(j);
}

void aftp_journal_forget(aftp_journal *j)
{
    if (!j->whole)
        unlink_state(j->dirfd, j->name, STATE_JOURNAL);
    aftp_journal_close(j);
}

int aftp_journal_finish(aftp_journal *j, int parent_fd, const char *leaf, int replace)
{
    if (j->data_fd < 0)
        return AFTP_ERR_INVALID_STATE;
    if (fsync(j->data_fd) != 0)
        return move_failed(j);
    int rc = aftp_journal_place(j, parent_fd, leaf, replace);
    if (rc == AFTP_OK && fsync(parent_fd) != 0)
        rc = move_failed(j);
    if (rc == AFTP_OK)
        aftp_journal_forget(j);
    return rc;
}

void aftp_journal_close(aftp_journal *j)
{
    if (j->data_fd >= 0)
        close(j->data_fd);
    j->data_fd = -1;
    set_free(&j->written);
    set_free(&j->durable);
    free(j->path);
    j->path = NULL;
}

void aftp_journal_discard(aftp_journal *j)
{
    if (j->path != NULL && !j->whole)
        unlink_all_state(j->dirfd, j->name);
    else if (j->path != NULL && j->created) /* a whole file has no more, if made at all */
        unlink_state(j->dirfd, j->name, STATE_DATA);
    aftp_journal_close(j);
}

/* ---- cleanup ---- */

void aftp_journal_sweep_init(aftp_journal_sweep *s, int dirfd, uint64_t max_age_s)
{
    s->dirfd = dirfd;
    s->dir = NULL;
    s->max_age_s = max_age_s;
}

void aftp_journal_sweep_fini(aftp_journal_sweep *s)
{
    if (s->dir != NULL)
        closedir(s->dir);
    s->dir = NULL;
}

/* The stem of a state file's name into stem; 0 when `name` is not one. */
static int stem_of(const char *name, char stem[AFTP_JOURNAL_NAME_BYTES + 1])
{
    if (strspn(name, "0123456789abcdef") != AFTP_JOURNAL_NAME_BYTES)
        return 0;
    for (int w = 0; w < STATE_FILES; w++)
        if (strcmp(name + AFTP_JOURNAL_NAME_BYTES, state_suffixes[w]) == 0) {
            memcpy(stem, name, AFTP_JOURNAL_NAME_BYTES);
            stem[AFTP_JOURNAL_NAME_BYTES] = '\0';
            return 1;
        }
    return 0;
}

/* Whether any file of the state was modified at or after `cutoff`. */
static int state_recent(int dirfd, const char *stem, time_t cutoff)
{
    for (int w = 0; w < STATE_FILES; w++) {
        char name[STATE_NAME_CAP];
        struct stat sb;
        state_name(stem, w, name);
        if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && sb.st_mtim.tv_sec >= cutoff)
            return 1;
    }
    return 0;
}

int aftp_journal_sweep_step(aftp_journal_sweep *s, unsigned budget)
{
    if (s->dir == NULL) {
        /* A descriptor of its own: a dup would share the caller's offset. */
        int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || (s->dir = fdopendir(fd)) == NULL) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return errno_to_error(e);
        }
    }
    time_t cutoff = time(NULL) - (time_t)s->max_age_s;
    int removed = 0;
    for (unsigned seen = 0; seen < budget; seen++) {
        char stem[AFTP_JOURNAL_NAME_BYTES + 1];
        const struct dirent *d = readdir(s->dir);
        if (d == NULL) {
            rewinddir(s->dir); /* the next step walks again from the start */
            break;
        }
        /* The walk may still list files of a state removed before. */
        if (stem_of(d->d_name, stem) && !state_recent(s->dirfd, stem, cutoff))
            removed += unlink_all_state(s->dirfd, stem) > 0;
    }
    return removed;
}
