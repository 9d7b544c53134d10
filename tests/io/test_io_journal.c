/* The receiver's resume journal in a scratch directory: recorded blocks
 * come back on reopen; a changed source, a damaged journal (bit flipped,
 * truncated, empty, another version) or a short partial file start over;
 * the journal never claims blocks that were not flushed, whatever step a
 * crash interrupts; hostile destination names never reach the file
 * system; the private directory refuses links; finishing renames the
 * partial file itself; cleanup removes only old state, a bounded step at a
 * time; a full disk keeps the previous journal (a private tmpfs when run
 * as root, else a file size limit). */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "aftp_journal.h"
#include "io_testutil.h"

enum { BLOCK = 1000, BLOCKS = 20, SIZE = BLOCKS * BLOCK - 123 };

typedef struct fixture {
    char *dir;
    int rootfd;
    int pfd; /* the private directory */
    aftp_journal j;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char why[256];
    f->dir = io_test_mkdtemp(&f->rootfd);
    f->j.data_fd = -1;
    assert_int_equal(aftp_journal_dir_open(f->rootfd, &f->pfd, why, sizeof why), AFTP_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    aftp_journal_close(&f->j);
    close(f->pfd);
    close(f->rootfd);
    io_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static aftp_journal_source source(uint64_t identity)
{
    aftp_journal_source s = {.size = SIZE, .mtime_ns = INT64_C(1700000000123456789),
                             .identity = identity, .block_size = BLOCK};
    return s;
}

static void open_as(fixture *f, const char *path, aftp_journal_source s,
                    aftp_journal_outcome expect)
{
    assert_int_equal(aftp_journal_open(&f->j, f->pfd, path, &s), AFTP_OK);
    assert_int_equal(f->j.outcome, expect);
}

/* Writes blocks [first, first + count) of the source pattern into the
 * partial file and notes them written. */
static void write_blocks(fixture *f, uint64_t first, uint64_t count)
{
    static uint8_t data[SIZE];
    io_test_pattern(data, SIZE, 5);
    uint64_t off = first * BLOCK, end = (first + count) * BLOCK;
    end = end > SIZE ? SIZE : end;
    assert_int_equal(pwrite(f->j.data_fd, data + off, end - off, (off_t)off), (ssize_t)(end - off));
    assert_int_equal(aftp_journal_written(&f->j, first, count), AFTP_OK);
}

/* The held set is exactly the given (first, count) pairs. */
static void assert_held(const aftp_journal *j, size_t n, const uint64_t *pairs)
{
    assert_int_equal(j->durable.count, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(j->durable.ranges[i].first, pairs[2 * i]);
        assert_int_equal(j->durable.ranges[i].count, pairs[2 * i + 1]);
    }
}

static void reopen(fixture *f, const char *path, aftp_journal_source s,
                   aftp_journal_outcome expect)
{
    aftp_journal_close(&f->j);
    open_as(f, path, s, expect);
}

/* The journal's file name of the state open in f, with `suffix`. */
static void state_file(const fixture *f, const char *suffix, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", f->j.name, suffix);
}

static void test_recorded_blocks_held_after_reopen(void **state)
{
    fixture *f = *state;
    open_as(f, "dir/file.bin", source(42), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 3);
    write_blocks(f, 5, 2);
    write_blocks(f, 3, 1);
    write_blocks(f, 19, 1);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    reopen(f, "dir/file.bin", source(42), AFTP_JOURNAL_RESUMED);
    const uint64_t held[] = {0, 4, 5, 2, 19, 1};
    assert_held(&f->j, 3, held);
    uint8_t data[SIZE], back[SIZE];
    io_test_pattern(data, SIZE, 5);
    assert_int_equal(pread(f->j.data_fd, back, SIZE, 0), SIZE);
    assert_memory_equal(back, data, 4 * BLOCK);
    assert_memory_equal(back + 19 * BLOCK, data + 19 * BLOCK, SIZE - 19 * BLOCK);
}

static void test_changed_source_starts_over(void **state)
{
    fixture *f = *state;
    aftp_journal_source changed[3] = {source(42), source(42), source(43)};
    changed[0].mtime_ns += 1;
    changed[1].block_size = 500;
    for (int i = 0; i < 3; i++) {
        open_as(f, "f", source(42), AFTP_JOURNAL_FRESH); /* the changed one saved nothing */
        write_blocks(f, 0, 4);
        assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
        reopen(f, "f", changed[i], AFTP_JOURNAL_CHANGED);
        assert_int_equal(f->j.durable.count, 0);
        assert_non_null(strstr(f->j.why, "source changed"));
        uint8_t first[BLOCK], zero[BLOCK] = {0}; /* none of the old version's bytes remain */
        assert_int_equal(pread(f->j.data_fd, first, BLOCK, 0), BLOCK);
        assert_memory_equal(first, zero, BLOCK);
        aftp_journal_close(&f->j);
    }
}

typedef void (*damage_fn)(int fd);

/* A bit of the source's mtime: only the checksum tells it from a changed
 * source. */
static void flip_a_bit(int fd)
{
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 24), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, 24), 1);
}

/* A torn tail: the checksum and part of the last range cut off. */
static void cut_the_tail(int fd)
{
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(ftruncate(fd, sb.st_size - 12), 0);
}

static void make_empty(int fd)
{
    assert_int_equal(ftruncate(fd, 0), 0);
}

/* Another version, with a checksum that is right for it: only the version
 * tells. */
static void bump_version(int fd)
{
    uint8_t buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    assert_true(n > 72);
    buf[8] = 2;
    uint64_t sum = XXH3_64bits(buf, (size_t)n - 8);
    for (int i = 0; i < 8; i++)
        buf[n - 8 + i] = (uint8_t)(sum >> (8 * i));
    assert_int_equal(pwrite(fd, buf, (size_t)n, 0), n);
}

static void damaged_journal_discarded(fixture *f, damage_fn damage)
{
    char name[64];
    open_as(f, "d", source(1), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 6);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    state_file(f, ".jrnl", name, sizeof name);
    int fd = openat(f->pfd, name, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    damage(fd);
    close(fd);
    reopen(f, "d", source(1), AFTP_JOURNAL_DAMAGED);
    assert_int_equal(f->j.durable.count, 0);
    assert_non_null(strstr(f->j.why, "discarded"));
    assert_false(io_test_exists(f->pfd, name)); /* gone until the next save */
    struct stat sb;
    assert_int_equal(fstat(f->j.data_fd, &sb), 0);
    assert_int_equal(sb.st_size, SIZE);
}

static void test_bit_flipped_journal_discarded(void **state)
{
    damaged_journal_discarded(*state, flip_a_bit);
}

static void test_truncated_journal_discarded(void **state)
{
    damaged_journal_discarded(*state, cut_the_tail);
}

static void test_empty_journal_discarded(void **state)
{
    damaged_journal_discarded(*state, make_empty);
}

static void test_other_version_discarded(void **state)
{
    damaged_journal_discarded(*state, bump_version);
}

static void test_short_partial_file_not_trusted(void **state)
{
    fixture *f = *state;
    open_as(f, "short", source(9), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, BLOCKS);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    assert_int_equal(ftruncate(f->j.data_fd, 10 * BLOCK), 0);
    reopen(f, "short", source(9), AFTP_JOURNAL_DAMAGED);
    assert_int_equal(f->j.durable.count, 0);
    assert_non_null(strstr(f->j.why, "10000 bytes"));
}

/* Crash after the data flush, before the journal write: nothing is
 * claimed. Blocks written after the flush are not recorded by the next
 * save, though their journal is written: a crash then claims only what
 * was flushed. */
static void test_journal_never_ahead_of_data(void **state)
{
    fixture *f = *state;
    open_as(f, "o", source(3), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 2);
    assert_int_equal(aftp_journal_flush_data(&f->j), AFTP_OK);
    reopen(f, "o", source(3), AFTP_JOURNAL_FRESH); /* crash: no journal was written */
    assert_int_equal(f->j.durable.count, 0);
    write_blocks(f, 0, 2);
    assert_int_equal(aftp_journal_flush_data(&f->j), AFTP_OK);
    write_blocks(f, 2, 5); /* not flushed */
    assert_int_equal(aftp_journal_save(&f->j), AFTP_OK);
    reopen(f, "o", source(3), AFTP_JOURNAL_RESUMED);
    const uint64_t held[] = {0, 2};
    assert_held(&f->j, 1, held);
}

/* Crash after the new journal was written, before its rename: the old
 * journal holds, whatever the new copy says. */
static void test_unrenamed_journal_ignored(void **state)
{
    fixture *f = *state;
    char name[64], new_name[64];
    open_as(f, "r", source(4), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 2);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    state_file(f, ".jrnl", name, sizeof name);
    state_file(f, ".jrnl.new", new_name, sizeof new_name);
    assert_int_equal(linkat(f->pfd, name, f->pfd, "old", 0), 0);
    write_blocks(f, 2, 8);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    assert_int_equal(renameat(f->pfd, name, f->pfd, new_name), 0);
    assert_int_equal(renameat(f->pfd, "old", f->pfd, name), 0);
    reopen(f, "r", source(4), AFTP_JOURNAL_RESUMED);
    const uint64_t held[] = {0, 2};
    assert_held(&f->j, 1, held);
}

/* Every entry of the private directory is a hashed state name. */
static void assert_only_state_names(int pfd)
{
    DIR *d = fdopendir(openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const struct dirent *e;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        assert_int_equal(strspn(e->d_name, "0123456789abcdef"), 32);
        assert_true(strcmp(e->d_name + 32, ".part") == 0 || strcmp(e->d_name + 32, ".jrnl") == 0);
    }
    closedir(d);
}

static void test_hostile_names_map_to_safe_names(void **state)
{
    fixture *f = *state;
    static char longest[4097], too_long[4098];
    memset(longest, 'a', 4096);
    memset(too_long, 'b', 4097);
    const char *names[] = {"../../etc/passwd", "a\nb", "/abs/path", "..", longest};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        open_as(f, names[i], source(i), AFTP_JOURNAL_FRESH);
        write_blocks(f, 0, 1);
        assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
        assert_null(strchr(f->j.why, '\n'));
        aftp_journal_close(&f->j);
    }
    reopen(f, "a\nb", source(1), AFTP_JOURNAL_RESUMED); /* each kept apart */
    assert_only_state_names(f->pfd);
    assert_int_equal(io_test_count_entries(f->pfd), 10);
    assert_int_equal(io_test_count_entries(f->rootfd), 1);
    aftp_journal_source s = source(1);
    aftp_journal_close(&f->j);
    assert_int_equal(aftp_journal_open(&f->j, f->pfd, too_long, &s), AFTP_ERR_PATH_REJECTED);
    assert_non_null(strstr(f->j.why, "4097 bytes"));
    aftp_journal_close(&f->j);
    assert_int_equal(aftp_journal_open(&f->j, f->pfd, ".aftp-partial/x", &s),
                     AFTP_ERR_PATH_REJECTED);
    assert_string_equal(f->j.why, "no resume state for .aftp-partial/x: a path of 15 bytes (1 to "
                                  "4096, not beneath .aftp-partial)");
    aftp_journal_close(&f->j);
    assert_true(aftp_journal_path_reserved(".aftp-partial"));
    assert_true(aftp_journal_path_reserved(".aftp-partial/a/b"));
    assert_false(aftp_journal_path_reserved(".aftp-partial2"));
    assert_false(aftp_journal_path_reserved("x/.aftp-partial"));
}

static void test_private_dir_refuses_links_and_is_kept_private(void **state)
{
    fixture *f = *state;
    int other = -1, pfd = -1;
    char why[256];
    char *elsewhere = io_test_mkdtemp(&other);
    int root2 = -1;
    char *dir2 = io_test_mkdtemp(&root2);
    assert_int_equal(symlinkat(elsewhere, root2, AFTP_JOURNAL_DIR), 0);
    assert_int_equal(aftp_journal_dir_open(root2, &pfd, why, sizeof why), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(pfd, -1);
    assert_non_null(strstr(why, "not a link"));
    assert_int_equal(io_test_count_entries(other), 0);
    assert_int_equal(fchmod(f->pfd, 0755), 0);
    assert_int_equal(aftp_journal_dir_open(f->rootfd, &pfd, why, sizeof why), AFTP_OK);
    struct stat sb;
    assert_int_equal(fstat(pfd, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    close(pfd);
    close(other);
    close(root2);
    io_test_rmtree(elsewhere);
    io_test_rmtree(dir2);
    free(elsewhere);
    free(dir2);
}

static void test_finish_renames_the_partial_file(void **state)
{
    fixture *f = *state;
    struct stat part, final;
    open_as(f, "done.bin", source(8), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, BLOCKS);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    assert_int_equal(fstat(f->j.data_fd, &part), 0);
    int taken = openat(f->rootfd, "done.bin", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    close(taken);
    /* refused: the state stays for a later attempt */
    assert_int_equal(aftp_journal_finish(&f->j, f->rootfd, "done.bin", 0), AFTP_ERR_FILE_EXISTS);
    assert_non_null(strstr(f->j.why, "File exists"));
    assert_int_equal(io_test_count_entries(f->pfd), 2);
    assert_int_equal(aftp_journal_finish(&f->j, f->rootfd, "done.bin", 1), AFTP_OK);
    assert_int_equal(fstatat(f->rootfd, "done.bin", &final, 0), 0);
    assert_int_equal(final.st_ino, part.st_ino); /* no second copy */
    assert_int_equal(final.st_size, SIZE);
    assert_int_equal(io_test_count_entries(f->pfd), 0);
}

/* Sets every file of the directory whose name starts with `stem` to an
 * mtime `age_s` seconds ago. */
static void age_state(int pfd, const char *stem, long age_s)
{
    DIR *d = fdopendir(openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const struct dirent *e;
    struct timespec t[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, stem, strlen(stem)) == 0)
            assert_int_equal(utimensat(pfd, e->d_name, t, AT_SYMLINK_NOFOLLOW), 0);
    closedir(d);
}

/* A state of destination `path`, saved, its stem in stem. */
static void make_state(fixture *f, const char *path, char stem[AFTP_JOURNAL_NAME_BYTES + 1])
{
    open_as(f, path, source(1), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 1);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    memcpy(stem, f->j.name, AFTP_JOURNAL_NAME_BYTES + 1);
    aftp_journal_close(&f->j);
}

static void test_cleanup_removes_only_old_state(void **state)
{
    fixture *f = *state;
    char stem[AFTP_JOURNAL_NAME_BYTES + 1], recent_part[64];
    const long day = 24 * 3600;
    const char *old[] = {"old0", "old1", "old2"};
    for (int i = 0; i < 3; i++) {
        make_state(f, old[i], stem);
        age_state(f->pfd, stem, 8 * day);
    }
    /* "recent" is 8 days old in its data file only: its journal is new */
    make_state(f, "recent", stem);
    snprintf(recent_part, sizeof recent_part, "%s.part", stem);
    struct timespec t[2] = {{.tv_sec = time(NULL) - 8 * day}, {.tv_sec = time(NULL) - 8 * day}};
    assert_int_equal(utimensat(f->pfd, recent_part, t, 0), 0);
    int foreign = openat(f->pfd, "notes.txt", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    close(foreign);
    age_state(f->pfd, "notes", 30 * day);
    /* old, but a sender came back for it */
    make_state(f, "resumed", stem);
    age_state(f->pfd, stem, 8 * day);
    open_as(f, "resumed", source(1), AFTP_JOURNAL_RESUMED);
    aftp_journal_close(&f->j);

    aftp_journal_sweep s;
    aftp_journal_sweep_init(&s, f->pfd, AFTP_JOURNAL_DEFAULT_MAX_AGE_S);
    int removed = 0;
    for (int steps = 0; steps < 24; steps++) { /* a step looks at one entry only */
        int n = aftp_journal_sweep_step(&s, 1);
        assert_true(n == 0 || n == 1);
        removed += n;
    }
    aftp_journal_sweep_fini(&s);
    assert_int_equal(removed, 3);
    /* recent's and resumed's two files each, and notes.txt */
    assert_int_equal(io_test_count_entries(f->pfd), 5);
    assert_true(io_test_exists(f->pfd, "notes.txt"));
    assert_true(io_test_exists(f->pfd, recent_part));
    open_as(f, "old1", source(1), AFTP_JOURNAL_FRESH);
}

/* More gaps than the cap: the lowest ranges are kept, the set never claims
 * a block it was not given. */
static void test_held_ranges_capped_to_a_prefix(void **state)
{
    fixture *f = *state;
    aftp_journal_source s = source(6);
    s.size = (uint64_t)BLOCK * 4 * AFTP_JOURNAL_MAX_RANGES;
    assert_int_equal(aftp_journal_open(&f->j, f->pfd, "gaps", &s), AFTP_OK);
    for (uint64_t b = 4 * AFTP_JOURNAL_MAX_RANGES; b >= 2; b -= 2)
        assert_int_equal(aftp_journal_written(&f->j, b - 2, 1), AFTP_OK);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    aftp_journal_close(&f->j);
    assert_int_equal(aftp_journal_open(&f->j, f->pfd, "gaps", &s), AFTP_OK);
    assert_int_equal(f->j.outcome, AFTP_JOURNAL_RESUMED);
    assert_int_equal(f->j.durable.count, AFTP_JOURNAL_MAX_RANGES);
    for (uint32_t i = 0; i < AFTP_JOURNAL_MAX_RANGES; i++) {
        assert_int_equal(f->j.durable.ranges[i].first, 2 * i);
        assert_int_equal(f->j.durable.ranges[i].count, 1);
    }
    /* filling a gap merges its neighbours and frees a place */
    assert_int_equal(aftp_journal_written(&f->j, 1, 1), AFTP_OK);
    assert_int_equal(aftp_journal_flush_data(&f->j), AFTP_OK);
    assert_int_equal(f->j.durable.count, AFTP_JOURNAL_MAX_RANGES - 1);
    assert_int_equal(f->j.durable.ranges[0].count, 3);
    assert_int_equal(aftp_journal_written(&f->j, 4 * AFTP_JOURNAL_MAX_RANGES, 1),
                     AFTP_ERR_INVALID_ARGUMENT);
}

/* A full disk for the next journal write: a private tmpfs filled to the
 * last byte where this process may mount one (root), else a file size
 * limit (RLIMIT_FSIZE) below the journal's size, so that its new copy is
 * written short as on a full disk. */
typedef struct full_disk {
    int mounted;
    int root; /* the scratch directory, on the tmpfs when mounted */
    struct rlimit saved;
} full_disk;

/* Puts f's private directory where the disk can be filled. */
static void full_disk_begin(fixture *f, full_disk *d)
{
    char why[256];
    d->mounted = io_test_mount_private_tmpfs(f->dir, "1m");
    d->root = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(f->pfd);
    assert_int_equal(aftp_journal_dir_open(d->root, &f->pfd, why, sizeof why), AFTP_OK);
}

static void full_disk_fill(fixture *f, full_disk *d)
{
    static const uint8_t chunk[4096];
    char name[64];
    struct stat sb;
    if (!d->mounted) {
        state_file(f, ".jrnl", name, sizeof name);
        assert_int_equal(fstatat(f->pfd, name, &sb, 0), 0);
        struct rlimit below = {.rlim_cur = (rlim_t)sb.st_size - 1, .rlim_max = RLIM_INFINITY};
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &d->saved), 0);
        below.rlim_max = d->saved.rlim_max;
        signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &below), 0);
        return;
    }
    int fd = openat(f->pfd, "filler", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    while (write(fd, chunk, sizeof chunk) > 0)
        ;
    close(fd);
}

static void full_disk_free(fixture *f, full_disk *d)
{
    if (d->mounted)
        assert_int_equal(unlinkat(f->pfd, "filler", 0), 0);
    else
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &d->saved), 0);
}

static void full_disk_end(fixture *f, full_disk *d)
{
    aftp_journal_close(&f->j);
    close(f->pfd);
    f->pfd = -1;
    close(d->root);
    if (d->mounted)
        assert_int_equal(umount2(f->dir, MNT_DETACH), 0);
}

static void test_full_disk_keeps_previous_journal(void **state)
{
    fixture *f = *state;
    full_disk d;
    char new_name[64];
    full_disk_begin(f, &d);
    open_as(f, "full", source(2), AFTP_JOURNAL_FRESH);
    write_blocks(f, 0, 3);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_OK);
    write_blocks(f, 3, 3); /* written before the disk fills */
    full_disk_fill(f, &d);
    assert_int_equal(aftp_journal_sync(&f->j), AFTP_ERR_NO_SPACE);
    full_disk_free(f, &d);
    assert_non_null(strstr(f->j.why, "No space left"));
    assert_non_null(strstr(f->j.why, "bytes to write"));
    state_file(f, ".jrnl.new", new_name, sizeof new_name);
    assert_false(io_test_exists(f->pfd, new_name));
    reopen(f, "full", source(2), AFTP_JOURNAL_RESUMED);
    const uint64_t held[] = {0, 3};
    assert_held(&f->j, 1, held);
    full_disk_end(f, &d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_recorded_blocks_held_after_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_source_starts_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bit_flipped_journal_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_journal_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_journal_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_version_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_partial_file_not_trusted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_never_ahead_of_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unrenamed_journal_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_names_map_to_safe_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_dir_refuses_links_and_is_kept_private,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_finish_renames_the_partial_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleanup_removes_only_old_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_ranges_capped_to_a_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_keeps_previous_journal, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
