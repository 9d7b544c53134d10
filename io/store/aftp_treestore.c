/* The receiver's storage for pipelined mode (aftp_treestore.h). */
#include "aftp_treestore.h"

#include <errno.h>
#include <fcntl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/aftp_digest.h"
#include "aftp_store.h"

#define DIGEST_CHUNK (1u << 20) /* bytes read at a time for a CHECKSUM comparison */

/* One FILE entry answered SEND or RESUME, until its close or commit. */
struct aftp_treestore_file {
    uint32_t id;
    uint64_t size;
    uint32_t mode;
    int64_t mtime_ns;
    uint64_t stored;   /* bytes held: resumed, then written */
    uint64_t unsynced; /* bytes written since the journal's last sync */
    uint64_t unsynced_seen_ns; /* the first tick that saw them, 0: none yet */
    int deferred;      /* verified, awaiting commit_group */
    int committing;    /* in a group between its begin and its end: its
                        * run may be on another thread, so nothing else
                        * touches it */
    int resumable;     /* its sender can resume (flag RESUME): an unfinished
                        * file keeps its state for that, else it is removed */
    uint8_t *map;      /* read-only view of the partial file, or NULL */
    aftp_place_dirrec *dir; /* the placed directory held back for it */
    aftp_block_range *held; /* RESUME's verdict, owned */
    char *claim;       /* its path, claimed in ts->locks (owned); NULL: no locks */
    aftp_journal j;
};

static int fail(aftp_treestore *ts, int err, const char *what, const char *detail)
{
    return aftp_path_report_fail(&ts->report, err, what, detail);
}

/* AFTP_JOURNAL_DIR beneath the root, made when missing. */
static int open_partial_dir(aftp_treestore *ts, char *why, size_t cap)
{
    if (ts->partial_dir >= 0)
        return AFTP_OK;
    int rc = aftp_journal_dir_open(ts->root, &ts->partial_dir, why, cap);
    if (rc == AFTP_OK)
        aftp_journal_sweep_init(&ts->sweep, ts->partial_dir, ts->sweep.max_age_s);
    return rc;
}

static void dirs_init(aftp_treestore_dirs *dirs)
{
    *dirs = (aftp_treestore_dirs){0};
    for (size_t i = 0; i < AFTP_TREESTORE_DIR_CACHE; i++)
        dirs->slot[i].fd = -1;
}

int aftp_treestore_init(aftp_treestore *ts, int root, const aftp_place_options *opt, char *why,
                        size_t cap)
{
    memset(ts, 0, sizeof *ts);
    ts->root = root;
    ts->partial_dir = -1;
    dirs_init(&ts->dirs);
    aftp_place_init(&ts->place, root, opt);
    aftp_journal_sweep_init(&ts->sweep, -1, AFTP_JOURNAL_DEFAULT_MAX_AGE_S);
    /* An existing resume directory is opened now, so that a bad one (a
     * link, another user's) is reported before any entry; a missing one
     * is made only when a file needs it, so that a session that receives
     * no file leaves the destination as it was. */
    if (faccessat(root, AFTP_JOURNAL_DIR, F_OK, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT)
        return AFTP_OK;
    return open_partial_dir(ts, why, cap);
}

/* ---- records of open files, ascending id ---- */

/* Index of id, or of where it would go. */
static size_t position(const aftp_treestore *ts, uint32_t id)
{
    size_t lo = 0, hi = ts->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts->files[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static aftp_treestore_file *find(const aftp_treestore *ts, uint32_t id)
{
    size_t i = position(ts, id);
    return i < ts->count && ts->files[i]->id == id ? ts->files[i] : NULL;
}

static int insert(aftp_treestore *ts, aftp_treestore_file *f)
{
    if (ts->count == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 64;
        aftp_treestore_file **grown = realloc(ts->files, cap * sizeof *grown);
        if (grown == NULL)
            return AFTP_ERR_NO_MEMORY;
        ts->files = grown;
        ts->cap = cap;
    }
    size_t i = position(ts, f->id);
    memmove(ts->files + i + 1, ts->files + i, (ts->count - i) * sizeof *ts->files);
    ts->files[i] = f;
    ts->count++;
    return AFTP_OK;
}

/* ---- claims of files shared with other stores of the root ---- */

void aftp_treestore_share(aftp_treestore *ts, aftp_filelocks *locks, dev_t dev, ino_t ino)
{
    ts->locks = locks;
    ts->lock_root = (aftp_filelock_key){.dev = dev, .ino = ino};
}

/* AFTP_OK when the file at `path` is this store's to decide (or no other
 * store shares the root), AFTP_STORAGE_WAIT while another holds it. */
static int claim_path(aftp_treestore *ts, const char *path)
{
    if (ts->locks == NULL)
        return AFTP_OK;
    aftp_filelock_key k = ts->lock_root;
    k.path = path;
    int rc = aftp_filelocks_claim(ts->locks, &k, ts);
    return rc < 0 ? rc : rc == 1 ? AFTP_OK : AFTP_STORAGE_WAIT;
}

static void release_claim(aftp_treestore *ts, const char *path)
{
    if (ts->locks == NULL || path == NULL)
        return;
    aftp_filelock_key k = ts->lock_root;
    k.path = path;
    aftp_filelocks_release(ts->locks, &k, ts);
}

/* Takes f out of the table and frees it; its journal must be closed. */
static void drop(aftp_treestore *ts, aftp_treestore_file *f)
{
    size_t i = position(ts, f->id);
    memmove(ts->files + i, ts->files + i + 1, (ts->count - i - 1) * sizeof *ts->files);
    ts->count--;
    if (f->map != NULL)
        munmap(f->map, f->size);
    aftp_place_unhold(&ts->place, f->dir);
    release_claim(ts, f->claim); /* its state is closed: the next writer may take it */
    free(f->claim);
    free(f->held);
    free(f);
}

/* How the journal ends: closed keeping its state, with it removed, or
 * committed (its data renamed away, its journal removed). */
enum { KEEP_STATE, DISCARD_STATE, COMMITTED };

static void end_file(aftp_treestore *ts, aftp_treestore_file *f, int how)
{
    if (f->j.data_fd >= 0)
        ts->open_fds--;
    if (how == DISCARD_STATE)
        aftp_journal_discard(&f->j);
    else if (how == COMMITTED)
        aftp_journal_forget(&f->j);
    else
        aftp_journal_close(&f->j);
    drop(ts, f);
}

/* What an unfinished file leaves: its state for a sender that resumes,
 * unless it is sent again whole anyway (no journal). */
static int unfinished_state(const aftp_treestore_file *f)
{
    return f->resumable && !f->j.whole ? KEEP_STATE : DISCARD_STATE;
}

/* ---- descriptors, bounded ---- */

/* Closes one other file's descriptor, the search going round the table
 * so that each is closed in turn rather than the same one again. */
static void release_fd(aftp_treestore *ts, aftp_treestore_file *f)
{
    if (f->j.data_fd < 0)
        return;
    aftp_journal_release_data(&f->j);
    ts->open_fds--;
}

static void release_one(aftp_treestore *ts, const aftp_treestore_file *keep)
{
    for (size_t n = 0; n < ts->count; n++) {
        aftp_treestore_file *f = ts->files[ts->hand++ % ts->count];
        if (f != keep && f->j.data_fd >= 0 && !f->committing) {
            release_fd(ts, f);
            return;
        }
    }
}

static void make_room(aftp_treestore *ts, const aftp_treestore_file *keep)
{
    while (ts->open_fds >= AFTP_TREESTORE_MAX_OPEN)
        release_one(ts, keep);
}

static int ensure_open(aftp_treestore *ts, aftp_treestore_file *f)
{
    if (f->j.data_fd >= 0)
        return AFTP_OK;
    make_room(ts, f);
    int rc = aftp_journal_reopen_data(&f->j);
    if (rc == AFTP_OK)
        ts->open_fds++;
    return rc;
}

/* ---- destination directories, a few kept open ---- */

/* A dirty directory synced: the renames into it made durable. A failure
 * fails the files of group g renamed into it, and only those. */
static void dir_settle(aftp_treestore *ts, aftp_treestore_group *g, aftp_treestore_dir *d);

static void dir_close(aftp_treestore *ts, aftp_treestore_group *g, aftp_treestore_dir *d)
{
    dir_settle(ts, g, d);
    if (d->path != NULL)
        close(d->fd);
    free(d->path);
    d->path = NULL;
    d->fd = -1;
}

/* The directory `path` lies in, from `dirs` (the caller's, or group g's),
 * opened beneath the root on a miss (no link followed) into the next slot
 * round the cache; *leaf is path's last component. AFTP_OK or the error
 * of aftp_path_open_parent. */
static int dir_of(aftp_treestore *ts, aftp_treestore_dirs *dirs, aftp_treestore_group *g,
                  const char *path, aftp_treestore_dir **out, const char **leaf)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash != NULL ? (size_t)(slash - path) : 0;
    for (size_t i = 0; i < AFTP_TREESTORE_DIR_CACHE; i++) {
        aftp_treestore_dir *d = &dirs->slot[i];
        if (d->path != NULL && strlen(d->path) == len && memcmp(d->path, path, len) == 0) {
            *out = d;
            *leaf = slash != NULL ? slash + 1 : path;
            return AFTP_OK;
        }
    }
    int fd;
    int rc = aftp_path_open_parent(ts->root, path, &fd, leaf);
    char *copy = rc == AFTP_OK ? strndup(path, len) : NULL;
    if (rc == AFTP_OK && copy == NULL) {
        close(fd);
        rc = AFTP_ERR_NO_MEMORY;
    }
    if (rc != AFTP_OK)
        return rc;
    aftp_treestore_dir *d = &dirs->slot[dirs->victim++ % AFTP_TREESTORE_DIR_CACHE];
    dir_close(ts, g, d);
    *d = (aftp_treestore_dir){.path = copy, .fd = fd, .ticket = ++dirs->tickets};
    *out = d;
    return AFTP_OK;
}

/* Every directory of `dirs` synced if dirty (g's failures) and closed. */
static void dirs_close(aftp_treestore *ts, aftp_treestore_dirs *dirs, aftp_treestore_group *g)
{
    for (size_t i = 0; i < AFTP_TREESTORE_DIR_CACHE; i++)
        dir_close(ts, g, &dirs->slot[i]);
}

/* ---- verdicts ---- */

static void refuse(aftp_entry_verdict *out, int err)
{
    *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_REFUSED, .error = err};
}

/* Path rules of every kind: aftp_path_check, and never the private directory. */
static int check_path(aftp_treestore *ts, const char *path)
{
    int rc = aftp_path_report_start(&ts->report, path);
    if (rc == AFTP_OK && aftp_journal_path_reserved(path))
        rc = fail(ts, AFTP_ERR_PATH_REJECTED, "refused path",
                  AFTP_JOURNAL_DIR " holds the receiver's resume state");
    return rc;
}

static int place_failed(aftp_treestore *ts, int rc)
{
    return fail(ts, rc, "cannot place", ts->place.message);
}

int aftp_treestore_digest(int fd, uint64_t size, uint8_t out[AFTP_DIGEST_LEN])
{
    aftp_digest *d;
    uint8_t *buf = malloc(DIGEST_CHUNK);
    int rc = buf != NULL ? aftp_digest_new(&d) : AFTP_ERR_NO_MEMORY;
    for (uint64_t off = 0; rc == AFTP_OK && off < size;) {
        size_t want = size - off < DIGEST_CHUNK ? (size_t)(size - off) : DIGEST_CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n <= 0)
            rc = n < 0 ? aftp_store_errno_error(errno) : AFTP_ERR_IO; /* shrank meanwhile */
        else
            aftp_digest_update(d, buf, (size_t)n);
        off += n > 0 ? (uint64_t)n : 0;
    }
    if (buf != NULL && rc == AFTP_OK)
        aftp_digest_final(d, out);
    if (buf != NULL)
        aftp_digest_del(d);
    free(buf);
    return rc;
}

/* SYNC: whether the regular file leaf (stat sb) is the entry's content. */
static int identical(int parent, const char *leaf, const struct stat *sb,
                     const aftp_entry_info *info)
{
    if ((uint64_t)sb->st_size != info->file.size)
        return 0;
    if (!(info->flags & AFTP_ENTRY_CHECKSUM))
        return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec ==
               info->file.mtime_ns;
    uint8_t digest[AFTP_DIGEST_LEN];
    int fd = openat(parent, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int same = fd >= 0 && aftp_treestore_digest(fd, info->file.size, digest) == AFTP_OK &&
               memcmp(digest, info->digest, AFTP_DIGEST_LEN) == 0;
    if (fd >= 0)
        close(fd);
    return same;
}

/* What is at the final name: nothing, a file to replace, or a SKIP. */
static int check_existing(aftp_treestore *ts, const aftp_entry_info *info, int *skip)
{
    aftp_treestore_dir *dir = NULL;
    const char *leaf;
    struct stat sb;
    int rc = dir_of(ts, &ts->dirs, NULL, info->file.path, &dir, &leaf);
    int parent = rc == AFTP_OK ? dir->fd : -1;
    if (rc != AFTP_OK)
        return fail(ts, rc, "cannot open the directory of",
                    rc == AFTP_ERR_PATH_REJECTED ? "a file or symbolic link is in the way"
                                                 : aftp_strerror(rc));
    if (fstatat(parent, leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        rc = errno == ENOENT ? AFTP_OK
                             : fail(ts, aftp_store_errno_error(errno), "cannot check",
                                    strerror(errno));
    else if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        rc = fail(ts, AFTP_ERR_PATH_REJECTED, "cannot store",
                  S_ISDIR(sb.st_mode) ? "a directory is there, and only files are replaced"
                                      : "a special file (device, FIFO, socket) is there, and "
                                        "only files are replaced");
    else if ((info->flags & AFTP_ENTRY_SYNC) && S_ISREG(sb.st_mode) &&
             identical(parent, leaf, &sb, info))
        *skip = 1;
    else if (!ts->place.opt.overwrite)
        rc = fail(ts, AFTP_ERR_FILE_EXISTS, "refusing to replace existing file",
                  "use --overwrite");
    return rc;
}

/* The bytes free beneath the root for us (root: all of them); 0 when the
 * file system does not count blocks. */
static int free_space(const aftp_treestore *ts, uint64_t *bytes)
{
    struct statvfs vfs;
    if (fstatvfs(ts->root, &vfs) != 0 || vfs.f_blocks == 0)
        return 0;
    uint64_t unit = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
    *bytes = (geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * unit;
    return unit != 0;
}

/* Free space for the whole file, checked at the offer so that a full disk
 * refuses the entry before any data flows. */
static int check_space(aftp_treestore *ts, uint64_t size)
{
    uint64_t free_bytes;
    if (!free_space(ts, &free_bytes) || free_bytes > size)
        return AFTP_OK; /* or no block counts: writes will tell */
    char detail[96];
    snprintf(detail, sizeof detail, "%" PRIu64 " bytes needed, %" PRIu64 " free", size,
             free_bytes);
    return fail(ts, AFTP_ERR_NO_SPACE, "not enough space to receive", detail);
}

static uint64_t block_bytes(const aftp_treestore_file *f, uint64_t first, uint64_t count)
{
    uint64_t bs = f->j.src.block_size;
    uint64_t end = (first + count) * bs;
    return (end < f->size ? end : f->size) - first * bs;
}

/* Bytes of the entry's holes (spec 6.13): never written, held from the
 * verdict on. */
static uint64_t hole_bytes(const aftp_entry_info *info)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < info->hole_count; i++)
        bytes += info->holes[i].len;
    return bytes;
}

/* Of the hole bytes, those RESUME's held blocks (f->held, `count` of
 * them) do not cover already: what f holds from its verdict on beyond
 * its resumed bytes, so that f->stored reaches the size exactly when
 * every block is there. */
static uint64_t holes_not_held(const aftp_treestore_file *f, const aftp_entry_info *info,
                               size_t count)
{
    uint64_t bytes = hole_bytes(info), bs = f->j.src.block_size;
    for (size_t i = 0; i < info->hole_count; i++) {
        uint64_t lo = info->holes[i].off, hi = lo + info->holes[i].len;
        for (size_t k = 0; k < count; k++) {
            uint64_t a = f->held[k].start * bs, b = a + block_bytes(f, f->held[k].start,
                                                                   f->held[k].len);
            if (a < hi && b > lo)
                bytes -= (b < hi ? b : hi) - (a > lo ? a : lo);
        }
    }
    return bytes;
}

/* RESUME's held ranges from the journal's durable blocks. */
static int resume_verdict(aftp_treestore_file *f, aftp_entry_verdict *out)
{
    const aftp_journal_set *s = &f->j.durable;
    f->held = calloc(s->count, sizeof *f->held);
    if (f->held == NULL)
        return AFTP_ERR_NO_MEMORY;
    for (uint32_t i = 0; i < s->count; i++) {
        f->held[i] = (aftp_block_range){.start = s->ranges[i].first, .len = s->ranges[i].count};
        f->stored += block_bytes(f, s->ranges[i].first, s->ranges[i].count);
    }
    *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_RESUME, .held = f->held,
                                .held_count = s->count};
    return AFTP_OK;
}

/* The file's journal: resumed when allowed and it holds blocks, else fresh. */
static int open_journal(aftp_treestore *ts, aftp_treestore_file *f, const aftp_entry_info *info)
{
    aftp_journal_source src = {.size = info->file.size, .mtime_ns = info->file.mtime_ns,
                               .identity = info->source_id,
                               .block_size = info->file.block_size ? info->file.block_size : 1};
    char why[sizeof f->j.why];
    int rc = open_partial_dir(ts, why, sizeof why);
    if (rc != AFTP_OK)
        return fail(ts, rc, "cannot keep resume state for", why);
    make_room(ts, NULL);
    if (info->file.size <= AFTP_TREESTORE_WHOLE_MAX) { /* sent again whole after a crash */
        rc = aftp_journal_open_whole(&f->j, ts->partial_dir, info->file.path, &src);
        return rc != AFTP_OK ? fail(ts, rc, "cannot create the partial file for", f->j.why)
                             : AFTP_OK;
    }
    rc = aftp_journal_open(&f->j, ts->partial_dir, info->file.path, &src);
    int resumable = f->j.outcome == AFTP_JOURNAL_RESUMED && f->j.durable.count > 0 &&
                    (info->flags & AFTP_ENTRY_RESUME);
    if (rc == AFTP_OK && f->j.outcome == AFTP_JOURNAL_RESUMED && !resumable) {
        aftp_journal_discard(&f->j); /* not to be resumed: start over */
        rc = aftp_journal_open(&f->j, ts->partial_dir, info->file.path, &src);
    }
    if (f->j.data_fd >= 0)
        ts->open_fds++;
    return rc != AFTP_OK ? fail(ts, rc, "cannot keep resume state for", f->j.why) : AFTP_OK;
}

static int decide_file(aftp_treestore *ts, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    int skip = 0;
    int rc = check_existing(ts, info, &skip);
    if (rc == AFTP_OK && skip) {
        *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_SKIP};
        return AFTP_OK;
    }
    if (rc == AFTP_OK) /* holes are never written: they need no space */
        rc = check_space(ts, info->file.size - hole_bytes(info));
    aftp_treestore_file *f = rc == AFTP_OK ? calloc(1, sizeof *f) : NULL;
    if (rc == AFTP_OK && f == NULL)
        return AFTP_ERR_NO_MEMORY; /* the storage itself failed: ends the session */
    if (rc != AFTP_OK) {
        refuse(out, rc);
        return AFTP_OK;
    }
    *f = (aftp_treestore_file){.id = info->file.file_id, .size = info->file.size,
                               .mode = info->file.mode, .mtime_ns = info->file.mtime_ns,
                               .resumable = (info->flags & AFTP_ENTRY_RESUME) != 0};
    rc = open_journal(ts, f, info);
    if (rc == AFTP_OK && ts->locks != NULL && (f->claim = strdup(info->file.path)) == NULL)
        rc = AFTP_ERR_NO_MEMORY;
    int listed = rc == AFTP_OK ? insert(ts, f) : rc;
    if (listed != AFTP_OK) {
        if (f->j.data_fd >= 0)
            ts->open_fds--;
        aftp_journal_close(&f->j); /* whatever state it found stays */
        free(f->claim);
        free(f);
    }
    if (rc != AFTP_OK)
        refuse(out, rc);
    if (listed != AFTP_OK)
        return rc != AFTP_OK ? AFTP_OK : listed; /* a refusal, or out of memory */
    f->dir = aftp_place_hold(&ts->place, info->file.path);
    *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_SEND};
    rc = f->j.outcome == AFTP_JOURNAL_RESUMED ? resume_verdict(f, out) : AFTP_OK;
    if (rc == AFTP_OK)
        f->stored += holes_not_held(f, info, out->held_count);
    return rc;
}

/* A FILE: claimed, then decided; the claim stays with the file's record
 * (SEND, RESUME) and goes with any other answer. */
static int entry_file(aftp_treestore *ts, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    int rc = claim_path(ts, info->file.path);
    if (rc != AFTP_OK)
        return rc;
    rc = decide_file(ts, info, out);
    if (find(ts, info->file.file_id) == NULL)
        release_claim(ts, info->file.path);
    return rc;
}

int aftp_treestore_entry(aftp_treestore *ts, const aftp_entry_info *info,
                         aftp_entry_verdict *out)
{
    int rc = check_path(ts, info->file.path);
    if (rc == AFTP_OK && info->kind == AFTP_ENTRY_FILE)
        return entry_file(ts, info, out);
    if (rc == AFTP_OK && info->kind == AFTP_ENTRY_DIR)
        rc = aftp_place_dir(&ts->place, info->file.path, info->file.mode, info->file.mtime_ns);
    else if (rc == AFTP_OK && info->kind == AFTP_ENTRY_SYMLINK)
        rc = info->target != NULL
                 ? aftp_place_symlink(&ts->place, info->file.path, info->target,
                                      info->file.mtime_ns)
                 : AFTP_ERR_INVALID_ARGUMENT;
    else if (rc == AFTP_OK)
        rc = AFTP_ERR_INVALID_ARGUMENT; /* a kind the engine should not pass */
    if (rc != AFTP_OK && ts->report.last_error == AFTP_OK)
        place_failed(ts, rc);
    if (rc != AFTP_OK)
        refuse(out, rc);
    else
        *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_SEND};
    return AFTP_OK;
}

/* ---- data ---- */

/* File id, open for data: not one waiting for its commit or in a group's
 * run (the run may be on another thread). */
static aftp_treestore_file *open_file(const aftp_treestore *ts, uint32_t id, uint64_t off,
                                      size_t len, int *rc)
{
    aftp_treestore_file *f = find(ts, id);
    *rc = f == NULL || f->deferred || f->committing ? AFTP_ERR_INVALID_STATE
          : off > f->size || len > f->size - off ? AFTP_ERR_INVALID_ARGUMENT
                                                 : AFTP_OK;
    return *rc == AFTP_OK ? f : NULL;
}

static int write_all(int fd, uint64_t off, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, data, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return aftp_store_errno_error(errno);
        off += (uint64_t)n;
        data += n;
        len -= (size_t)n;
    }
    return AFTP_OK;
}

/* Writes data at off but for its leading and trailing zero bytes, which
 * the partial file reads as zeros already: it is made by ftruncate (a
 * hole), and a byte written by an earlier session of this same source
 * (the journal resumes nothing else) was the same byte. So the block a
 * sparse source's data begins or ends in, partly hole, allocates no page
 * of the hole, and a block of zeros is no write at all. */
static int write_trimmed(int fd, uint64_t off, const uint8_t *data, size_t len)
{
    size_t lead = 0;
    while (lead < len && data[lead] == 0)
        lead++;
    while (len > lead && data[len - 1] == 0)
        len--;
    return write_all(fd, off + lead, data + lead, len - lead);
}

/* The blocks [off, off+len) covers whole (the last block ends at size). */
static int note_blocks(aftp_treestore_file *f, uint64_t off, size_t len)
{
    uint64_t bs = f->j.src.block_size;
    uint64_t first = (off + bs - 1) / bs;
    uint64_t end = off + len == f->size ? f->j.block_count : (off + len) / bs;
    return end > first ? aftp_journal_written(&f->j, first, end - first) : AFTP_OK;
}

/* Counts bytes written since the journal's last sync, and starts the
 * file's write-back each AFTP_TREESTORE_WRITEBACK_BYTES of them. Why: the
 * journal's sync (fdatasync) runs on the caller's thread, the one that
 * reads DATA and sends FEEDBACK; left to itself it writes back all
 * AFTP_TREESTORE_SYNC_BYTES at once and holds that thread 13-60 ms on a
 * disk of ~700 MB/s, seven times a second at 1 Gbit/s. With write-back
 * begun as the data lands it waits only for the last few MiB. */
static void note_unsynced(aftp_treestore_file *f, size_t len)
{
    uint64_t before = f->unsynced / AFTP_TREESTORE_WRITEBACK_BYTES;
    f->unsynced += len;
    if (f->unsynced / AFTP_TREESTORE_WRITEBACK_BYTES != before)
        (void)sync_file_range(f->j.data_fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: the sync checks */
}

static int sync_file(aftp_treestore *ts, aftp_treestore_file *f)
{
    int rc = ensure_open(ts, f);
    if (rc == AFTP_OK && (rc = aftp_journal_sync(&f->j)) == AFTP_OK) {
        f->unsynced = 0;
        f->unsynced_seen_ns = 0;
    }
    return rc;
}

/* Names the file a write failed for, with the figures a full disk needs. */
static int write_failed(aftp_treestore *ts, aftp_treestore_file *f, int rc)
{
    char detail[224];
    uint64_t free_bytes = 0;
    if (aftp_path_report_start(&ts->report, f->j.path) != AFTP_OK)
        return rc;
    if (rc == AFTP_ERR_NO_SPACE) {
        (void)free_space(ts, &free_bytes);
        /* What arrived stays as resume state (for a sender that resumes). */
        snprintf(detail, sizeof detail, "%" PRIu64 " bytes needed, %" PRIu64 " held: %s (%" PRIu64
                 " free on the receiver's disk); free space there and send again to resume",
                 f->size, f->stored, strerror(ENOSPC), free_bytes);
        return fail(ts, rc, "not enough space to receive", detail);
    }
    return fail(ts, rc, "cannot write", f->j.why[0] ? f->j.why : aftp_strerror(rc));
}

int aftp_treestore_write(aftp_treestore *ts, uint32_t id, uint64_t off, const uint8_t *data,
                         size_t len)
{
    int rc;
    aftp_treestore_file *f = open_file(ts, id, off, len, &rc);
    if (f == NULL || len == 0)
        return rc;
    if ((rc = ensure_open(ts, f)) != AFTP_OK || (rc = write_trimmed(f->j.data_fd, off, data, len)) !=
        AFTP_OK || (!f->j.whole && (rc = note_blocks(f, off, len)) != AFTP_OK))
        return write_failed(ts, f, rc);
    f->stored += len;
    if (!f->j.whole) /* nothing to journal: the group commit syncs its data */
        note_unsynced(f, len);
    return f->unsynced >= AFTP_TREESTORE_SYNC_BYTES ? sync_file(ts, f) : AFTP_OK;
}

/* A small file's bytes read into the store's one buffer (valid until the
 * next view): a pread, where a mapping would cost mmap and munmap. */
static int view_whole(aftp_treestore *ts, aftp_treestore_file *f, uint64_t off, size_t len,
                      const uint8_t **out)
{
    int rc = ensure_open(ts, f);
    if (rc == AFTP_OK && ts->readback == NULL &&
        (ts->readback = malloc(AFTP_TREESTORE_WHOLE_MAX)) == NULL)
        rc = AFTP_ERR_NO_MEMORY;
    for (size_t got = 0; rc == AFTP_OK && got < len;) {
        ssize_t n = pread(f->j.data_fd, ts->readback + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = n < 0 ? aftp_store_errno_error(errno) : AFTP_ERR_IO; /* shrank: not ours */
        got += n > 0 ? (size_t)n : 0;
    }
    *out = ts->readback;
    return rc;
}

int aftp_treestore_view(aftp_treestore *ts, uint32_t id, uint64_t off, size_t len,
                        const uint8_t **out)
{
    static const uint8_t empty[1];
    int rc;
    aftp_treestore_file *f = open_file(ts, id, off, len, &rc);
    if (f == NULL)
        return rc;
    if (f->size == 0) {
        *out = empty;
        return AFTP_OK;
    }
    if (f->j.whole)
        return view_whole(ts, f, off, len, out);
    if (f->map == NULL && (rc = ensure_open(ts, f)) != AFTP_OK)
        return rc;
    if (f->map == NULL) {
        void *m = f->size <= SIZE_MAX ? mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED,
                                             f->j.data_fd, 0)
                                      : MAP_FAILED;
        if (m == MAP_FAILED)
            return aftp_store_errno_error(errno);
        f->map = m; /* stays valid after its descriptor is closed */
    }
    *out = f->map + off;
    return AFTP_OK;
}

/* ---- close and commit ---- */

/* A failure met by a group's run, reported by its end: the run may be
 * on another thread, and the report belongs to the caller's. detail NULL:
 * strerror(sys_errno). */
typedef struct group_fail {
    const char *what;
    const char *detail;
    int sys_errno;
} group_fail;

/* The files of one group commit, from its begin to its end. */
struct aftp_treestore_group {
    size_t count;
    int *results;
    int fsync_each;              /* one file's fsync rather than a syncfs */
    aftp_treestore_file **files; /* NULL: not a file awaiting commit */
    uint64_t *tickets;           /* the directory opening renamed into, 0: not renamed */
    group_fail *fails;
    aftp_treestore_dirs dirs;    /* the run's own, open while it runs */
};

static int fail_file(aftp_treestore *ts, const aftp_treestore_file *f, int err, const char *what,
                     const char *detail)
{
    (void)aftp_path_report_start(&ts->report, f->j.path);
    return fail(ts, err, what, detail);
}

static int note_fail(aftp_treestore_group *g, size_t i, int err, const char *what,
                     const char *detail)
{
    g->fails[i] = (group_fail){.what = what, .detail = detail, .sys_errno = errno};
    return err;
}

/* Runs a durability step (a syscall returning 0 or -1 with errno), unless
 * a test build's fault hook fails it first. */
#ifdef AFTP_TEST_HOOKS
#define STEP(ts, step, path, call)                                                           \
    ((ts)->fault != NULL && (errno = (ts)->fault((ts)->fault_user, (step), (path))) != 0      \
         ? -1                                                                                \
         : (call))
#else
#define STEP(ts, step, path, call) ((void)(ts), (call))
#endif

static void dir_settle(aftp_treestore *ts, aftp_treestore_group *g, aftp_treestore_dir *d)
{
    if (!d->dirty)
        return;
    d->dirty = 0;
    if (STEP(ts, AFTP_TREESTORE_STEP_DIRSYNC, d->path, fsync(d->fd)) == 0)
        return;
    int e = errno;
    for (size_t i = 0; g != NULL && i < g->count; i++)
        if (g->tickets[i] == d->ticket && g->results[i] == AFTP_OK)
            g->results[i] = note_fail(g, i, aftp_store_errno_error(e),
                                      "cannot make durable the name of", NULL);
}

/* Before step 1, by the caller's thread: the descriptor a file needs for
 * its commit (its own fsync; an empty file is made now), the only use of
 * the shared descriptor budget. */
static int open_for_commit(aftp_treestore *ts, aftp_treestore_group *g, size_t i)
{
    aftp_treestore_file *f = g->files[i];
    int rc = g->fsync_each || (f->j.whole && !f->j.created) ? ensure_open(ts, f) : AFTP_OK;
    if (rc != AFTP_OK)
        return fail_file(ts, f, rc, "cannot commit", f->j.why);
    if (!g->fsync_each)
        release_fd(ts, f); /* made: the commit needs it no more */
    return AFTP_OK;
}

/* Step 1 for one file: its mode and mtime, by name; fsync of its own when
 * the group does not sync the file system. */
static int prepare_file(aftp_treestore *ts, aftp_treestore_group *g, size_t i)
{
    char name[AFTP_JOURNAL_STATE_NAME_CAP];
    aftp_treestore_file *f = g->files[i];
    aftp_journal_data_name(&f->j, name);
    int rc = aftp_place_apply_meta_at(&ts->place, ts->partial_dir, name, f->mode, f->mtime_ns);
    if (rc != AFTP_OK)
        return note_fail(g, i, rc, "cannot set the mode or time of", NULL);
    if (g->fsync_each && STEP(ts, AFTP_TREESTORE_STEP_SYNC, "", fsync(f->j.data_fd)) != 0)
        return note_fail(g, i, aftp_store_errno_error(errno), "cannot flush", NULL);
    return AFTP_OK;
}

/* Step 3 for one file: renamed into its directory (kept open). */
static int place_file(aftp_treestore *ts, aftp_treestore_group *g, size_t i)
{
    aftp_treestore_file *f = g->files[i];
    aftp_treestore_dir *d;
    const char *leaf;
    int rc = dir_of(ts, &g->dirs, g, f->j.path, &d, &leaf);
    if (rc != AFTP_OK)
        return note_fail(g, i, rc, "cannot open the directory of",
                         rc == AFTP_ERR_PATH_REJECTED ? "a file or symbolic link is in the way"
                                                      : aftp_strerror(rc));
    if (STEP(ts, AFTP_TREESTORE_STEP_RENAME, f->j.path, 0) != 0)
        return note_fail(g, i, aftp_store_errno_error(errno), "cannot commit", NULL);
    if ((rc = aftp_journal_place(&f->j, d->fd, leaf, ts->place.opt.overwrite)) != AFTP_OK)
        return note_fail(g, i, rc, "cannot commit", f->j.why);
    d->dirty = 1;
    g->tickets[i] = d->ticket;
    return AFTP_OK;
}

/* The group's files awaiting commit, each claimed once (a repeated id
 * finds it claimed); returns how many. */
static size_t claim_group(aftp_treestore *ts, const uint32_t *ids, aftp_treestore_group *g)
{
    size_t ready = 0;
    for (size_t i = 0; i < g->count; i++) {
        aftp_treestore_file *f = find(ts, ids[i]);
        g->files[i] = f != NULL && f->deferred ? f : NULL;
        g->results[i] = g->files[i] != NULL ? AFTP_OK : AFTP_ERR_INVALID_STATE;
        if (g->files[i] != NULL)
            f->committing = 1;
        if (f != NULL)
            f->deferred = 0;
        ready += g->files[i] != NULL;
    }
    return ready;
}

/* Steps 1 and 2: every file's metadata, then its data durable. */
static void sync_group_data(aftp_treestore *ts, aftp_treestore_group *g)
{
    for (size_t i = 0; i < g->count; i++)
        if (g->files[i] != NULL && g->results[i] == AFTP_OK)
            g->results[i] = prepare_file(ts, g, i);
    /* syncfs reports a write-back error of any file since the last sync:
     * the group's files all fail rather than one vouched for wrongly. */
    if (g->fsync_each || STEP(ts, AFTP_TREESTORE_STEP_SYNC, "", syncfs(ts->partial_dir)) == 0)
        return;
    int e = aftp_store_errno_error(errno);
    for (size_t i = 0; i < g->count; i++)
        if (g->files[i] != NULL && g->results[i] == AFTP_OK)
            g->results[i] = note_fail(g, i, e, "cannot make durable", NULL);
}

/* A file renamed is done (its journal removed, whatever its directory's
 * sync said); one not renamed keeps its state: all its blocks, its data
 * durable or not, written to its journal for the next session. */
static void end_committed(aftp_treestore *ts, aftp_treestore_file *f, int renamed)
{
    if (renamed) {
        end_file(ts, f, COMMITTED);
        return;
    }
    if (unfinished_state(f) == KEEP_STATE)
        (void)sync_file(ts, f); /* a failure keeps the last journal: still correct */
    end_file(ts, f, unfinished_state(f));
}

static void free_group(aftp_treestore_group *g)
{
    if (g == NULL)
        return;
    free(g->files);
    free(g->tickets);
    free(g->fails);
    free(g);
}

int aftp_treestore_commit_begin(aftp_treestore *ts, const uint32_t *ids, size_t count,
                                int *results, aftp_treestore_group **out)
{
    aftp_treestore_group *g = calloc(1, sizeof *g);
    *out = NULL;
    if (g == NULL)
        return AFTP_ERR_NO_MEMORY;
    *g = (aftp_treestore_group){.count = count, .results = results,
                                .files = calloc(count + 1, sizeof *g->files),
                                .tickets = calloc(count + 1, sizeof *g->tickets),
                                .fails = calloc(count + 1, sizeof *g->fails)};
    if (g->files == NULL || g->tickets == NULL || g->fails == NULL) {
        free_group(g);
        return AFTP_ERR_NO_MEMORY;
    }
    dirs_init(&g->dirs);
    g->fsync_each = claim_group(ts, ids, g) <= 1 && !ts->place.opt.sync_fs;
    for (size_t i = 0; i < count; i++)
        if (g->files[i] != NULL)
            results[i] = open_for_commit(ts, g, i);
    *out = g;
    return AFTP_OK;
}

void aftp_treestore_commit_run(aftp_treestore *ts, aftp_treestore_group *g)
{
    sync_group_data(ts, g);
    for (size_t i = 0; i < g->count; i++)
        if (g->files[i] != NULL && g->results[i] == AFTP_OK)
            g->results[i] = place_file(ts, g, i);
    dirs_close(ts, &g->dirs, g);
}

void aftp_treestore_commit_end(aftp_treestore *ts, aftp_treestore_group *g)
{
    for (size_t i = 0; i < g->count; i++) {
        aftp_treestore_file *f = g->files[i];
        const group_fail *why = &g->fails[i];
        if (f == NULL)
            continue;
        if (why->what != NULL)
            (void)fail_file(ts, f, g->results[i], why->what,
                            why->detail != NULL ? why->detail : strerror(why->sys_errno));
        f->committing = 0;
        end_committed(ts, f, g->tickets[i] != 0);
    }
    free_group(g);
    /* The group commit is also when files still arriving make their
     * blocks durable, bounding what a kill loses to one group's worth. A
     * file whose journal cannot be recorded now (a full disk) keeps its
     * previous one, still true, and tries again at its next sync: its
     * failure, not the group's, whose files are durable. */
    (void)aftp_treestore_sync(ts);
}

int aftp_treestore_close(aftp_treestore *ts, uint32_t id, int commit)
{
    aftp_treestore_file *f = find(ts, id);
    if (f == NULL || f->committing) /* a group's run may be using it */
        return AFTP_ERR_INVALID_STATE;
    if (commit == AFTP_CLOSE_DEFER) {
        f->deferred = 1;
        release_fd(ts, f); /* the commit needs it no more (metadata by name) */
        return AFTP_OK;
    }
    if (commit == AFTP_CLOSE_COMMIT) { /* one-file mode: a group of one */
        int result;
        f->deferred = 1;
        int rc = aftp_treestore_commit_group(ts, &id, 1, &result);
        return result != AFTP_OK ? result : rc;
    }
    /* Discarded whole: it failed its verification, so its blocks are not
     * to be resumed. Discarded unfinished: keep what arrived, for a
     * sender that can resume. */
    if (f->stored >= f->size || unfinished_state(f) == DISCARD_STATE) {
        end_file(ts, f, DISCARD_STATE);
        return AFTP_OK;
    }
    int rc = f->unsynced > 0 ? sync_file(ts, f) : AFTP_OK;
    end_file(ts, f, KEEP_STATE);
    return rc;
}

int aftp_treestore_sync(aftp_treestore *ts)
{
    int first = AFTP_OK;
    for (size_t i = 0; i < ts->count; i++) {
        aftp_treestore_file *f = ts->files[i];
        int rc = f->unsynced > 0 && !f->deferred && !f->committing ? sync_file(ts, f) : AFTP_OK;
        first = first == AFTP_OK ? rc : first;
    }
    return first;
}

int aftp_treestore_tick(aftp_treestore *ts, uint64_t now_ns)
{
    int first = AFTP_OK;
    for (size_t i = 0; i < ts->count; i++) {
        aftp_treestore_file *f = ts->files[i];
        int rc = AFTP_OK;
        if (f->unsynced == 0 || f->deferred || f->committing)
            continue;
        if (f->unsynced_seen_ns == 0)
            f->unsynced_seen_ns = now_ns ? now_ns : 1;
        else if (now_ns - f->unsynced_seen_ns >= AFTP_TREESTORE_SYNC_NS)
            rc = sync_file(ts, f);
        first = first == AFTP_OK ? rc : first;
    }
    return first;
}

int aftp_treestore_commit_group(aftp_treestore *ts, const uint32_t *ids, size_t count,
                                int *results)
{
    aftp_treestore_group *g;
    int rc = aftp_treestore_commit_begin(ts, ids, count, results, &g);
    if (rc != AFTP_OK)
        return rc;
    aftp_treestore_commit_run(ts, g);
    aftp_treestore_commit_end(ts, g);
    return AFTP_OK;
}

int aftp_treestore_finish(aftp_treestore *ts)
{
    return aftp_place_finish(&ts->place);
}

void aftp_treestore_fini(aftp_treestore *ts)
{
    while (ts->count > 0) {
        aftp_treestore_file *f = ts->files[ts->count - 1];
        /* A session that ends with files unfinished (its sender vanished,
         * the idle timeout): what arrived is made durable for the resume,
         * a verified file awaiting its commit included. */
        if (f->resumable && f->unsynced > 0)
            (void)sync_file(ts, f); /* a failure keeps the last journal: still correct */
        end_file(ts, f, unfinished_state(f));
    }
    dirs_close(ts, &ts->dirs, NULL);
    free(ts->readback);
    ts->readback = NULL;
    aftp_place_finish(&ts->place);
    aftp_journal_sweep_fini(&ts->sweep);
    free(ts->files);
    if (ts->partial_dir >= 0) {
        close(ts->partial_dir);
        /* Nothing left to resume: leave no empty resume directory behind
         * (one that still holds state stays, ENOTEMPTY), unless another
         * user of the root (a concurrent session) may be creating in it. */
        if (!ts->keep_partial_dir)
            (void)unlinkat(ts->root, AFTP_JOURNAL_DIR, AT_REMOVEDIR);
    }
    ts->files = NULL;
    ts->partial_dir = -1;
}

int aftp_treestore_sweep_step(aftp_treestore *ts, unsigned budget)
{
    if (ts->partial_dir < 0)
        return 0; /* no resume directory: nothing to sweep */
    return aftp_journal_sweep_step(&ts->sweep, budget);
}

/* ---- storage ops ---- */

static int ops_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    return aftp_treestore_entry(user, info, out);
}

static int ops_open(void *user, const aftp_file_info *info)
{
    aftp_entry_info entry = {.file = *info, .kind = AFTP_ENTRY_FILE};
    aftp_entry_verdict v;
    int rc = aftp_treestore_entry(user, &entry, &v);
    return rc != AFTP_OK ? rc : v.verdict == AFTP_VERDICT_REFUSED ? v.error : AFTP_OK; /* or WAIT */
}

static int ops_write(void *user, uint32_t id, uint64_t off, const uint8_t *data, size_t len)
{
    return aftp_treestore_write(user, id, off, data, len);
}

static int ops_view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    return aftp_treestore_view(user, id, off, len, out);
}

static int ops_close(void *user, uint32_t id, int commit)
{
    return aftp_treestore_close(user, id, commit);
}

static int ops_commit_group(void *user, const uint32_t *ids, size_t count, int *results)
{
    return aftp_treestore_commit_group(user, ids, count, results);
}

const aftp_storage_ops aftp_treestore_ops = {.view = ops_view,
                                             .open = ops_open,
                                             .write = ops_write,
                                             .close = ops_close,
                                             .entry = ops_entry,
                                             .commit_group = ops_commit_group};
