/* The receiver's placement: directories, links, metadata, sparse files,
 * hostile paths, and the order of a group commit. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_place.h"
#include "aftp_tree.h"
#include "io_testutil.h"

#define T1 INT64_C(1500000000111111111)
#define T2 INT64_C(1600000000222222222)

static int64_t mtime_at(int dirfd, const char *path)
{
    struct stat sb;
    assert_int_equal(fstatat(dirfd, path, &sb, AT_SYMLINK_NOFOLLOW), 0);
    return (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
}

static mode_t mode_at(int dirfd, const char *path)
{
    struct stat sb;
    assert_int_equal(fstatat(dirfd, path, &sb, AT_SYMLINK_NOFOLLOW), 0);
    return sb.st_mode;
}

/* Places `path` with len bytes of pattern `seed` and commits it alone. */
static void place_file(aftp_place *p, const char *path, size_t len, uint32_t seed)
{
    aftp_place_file f;
    aftp_place_batch b = {0};
    uint8_t *data = malloc(len + 1);
    io_test_pattern(data, len, seed);
    assert_int_equal(aftp_place_file_open(p, path, len, 0644, T1, &f), AFTP_OK);
    assert_int_equal(aftp_place_file_write(p, &f, 0, data, len), AFTP_OK);
    assert_int_equal(aftp_place_batch_add(&b, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_commit(p, &b), AFTP_OK);
    free(data);
}

/* Whether `path` holds exactly len bytes of pattern `seed`. */
static int holds(int dirfd, const char *path, size_t len, uint32_t seed)
{
    uint8_t *want = malloc(len + 1), *got = malloc(len + 1);
    io_test_pattern(want, len, seed);
    int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? pread(fd, got, len + 1, 0) : -1;
    int same = n == (ssize_t)len && memcmp(want, got, len) == 0;
    if (fd >= 0)
        close(fd);
    free(want);
    free(got);
    return same;
}

static void test_nested_and_empty_dirs_with_metadata(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_place p;
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_dir(&p, "a", 0750, T1), AFTP_OK);
    assert_int_equal(aftp_place_dir(&p, "a/b", 0555, T2), AFTP_OK); /* read-only: last */
    place_file(&p, "a/b/f", 100, 1);
    assert_int_equal(aftp_place_dir(&p, "a/empty", 0711, T2), AFTP_OK);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_true(holds(root, "a/b/f", 100, 1));
    assert_int_equal(mode_at(root, "a") & 07777, 0750);
    assert_int_equal(mode_at(root, "a/b") & 07777, 0555);
    assert_int_equal(mode_at(root, "a/empty") & 07777, 0711);
    assert_true(S_ISDIR(mode_at(root, "a/empty")));
    assert_int_equal(mtime_at(root, "a"), T1);
    assert_int_equal(mtime_at(root, "a/b"), T2);
    assert_int_equal(mtime_at(root, "a/empty"), T2);
    /* an existing directory is fine */
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_dir(&p, "a", 0755, T2), AFTP_OK);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(mode_at(root, "a") & 07777, 0755);
}

/* A file is committed in a directory the walk has left already: the
 * directory's mtime is applied after the rename that would change it. */
static void test_dir_mtime_waits_for_its_files(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_place p;
    aftp_place_file f;
    aftp_place_batch b = {0};
    uint8_t data[10] = "0123456789";
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_dir(&p, "d", 0755, T1), AFTP_OK);
    assert_int_equal(aftp_place_file_open(&p, "d/late", sizeof data, 0644, T2, &f), AFTP_OK);
    assert_int_equal(aftp_place_file_write(&p, &f, 0, data, sizeof data), AFTP_OK);
    assert_int_equal(aftp_place_dir(&p, "e", 0755, T1), AFTP_OK); /* the walk left d */
    assert_int_equal(aftp_place_batch_add(&b, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_commit(&p, &b), AFTP_OK);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(mtime_at(root, "d"), T1);
    assert_int_equal(mtime_at(root, "d/late"), T2);
    assert_int_equal(mtime_at(root, "e"), T1);
}

static void test_file_or_link_in_the_way_refused(void **state)
{
    int root = io_test_scratch_fd(state), out;
    char *outside = io_test_mkdtemp(&out);
    aftp_place p;
    aftp_place_file f;
    int fd = openat(root, "file", O_WRONLY | O_CREAT, 0644);
    close(fd);
    assert_int_equal(symlinkat(outside, root, "link"), 0);
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_dir(&p, "file", 0755, T1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_dir(&p, "link", 0755, T1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_dir(&p, "link/sub", 0755, T1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_file_open(&p, "link/x", 1, 0644, T1, &f),
                     AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_file_open(&p, "file/x", 1, 0644, T1, &f),
                     AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(io_test_count_entries(out), 0);
    assert_non_null(strstr(p.message, "in the way"));
    io_test_rmtree(outside);
    close(out);
    free(outside);
}

static void test_unsafe_paths_refused(void **state)
{
    int parent = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(parent, "root", 0755), 0);
    int root = openat(parent, "root", O_RDONLY | O_DIRECTORY);
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    opt.links = 1;
    aftp_place p;
    aftp_place_file f;
    aftp_place_init(&p, root, &opt);
    const char *bad[] = {"../x", "/tmp/aftp-place-abs", "a/../../x", "", "a//b", "nl\nx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(aftp_place_dir(&p, bad[i], 0755, T1), AFTP_ERR_PATH_REJECTED);
        assert_int_equal(aftp_place_file_open(&p, bad[i], 1, 0644, T1, &f),
                         AFTP_ERR_PATH_REJECTED);
        assert_int_equal(aftp_place_symlink(&p, bad[i], "t", T1), AFTP_ERR_PATH_REJECTED);
    }
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(io_test_count_entries(root), 0);
    assert_int_equal(io_test_count_entries(parent), 1);
    assert_false(io_test_exists(AT_FDCWD, "/tmp/aftp-place-abs"));
    close(root);
}

static void test_links_literal_only_when_asked_never_followed(void **state)
{
    int root = io_test_scratch_fd(state), out;
    char *outside = io_test_mkdtemp(&out);
    char target[600];
    aftp_place p;
    aftp_place_file f;
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    aftp_place_init(&p, root, &opt);
    assert_int_equal(aftp_place_symlink(&p, "l", outside, T1), AFTP_ERR_PATH_REJECTED);
    assert_false(io_test_exists(root, "l"));
    opt.links = 1;
    aftp_place_init(&p, root, &opt);
    assert_int_equal(aftp_place_symlink(&p, "l", outside, T1), AFTP_OK);
    assert_int_equal(aftp_place_symlink(&p, "rel", "../../x/./y", T2), AFTP_OK);
    ssize_t n = readlinkat(root, "l", target, sizeof target);
    assert_int_equal(n, (ssize_t)strlen(outside));
    assert_memory_equal(target, outside, (size_t)n);
    n = readlinkat(root, "rel", target, sizeof target);
    assert_int_equal(n, 11);
    assert_memory_equal(target, "../../x/./y", 11);
    assert_int_equal(mtime_at(root, "rel"), T2);
    /* later entries beneath the link pointing out of the root */
    assert_int_equal(aftp_place_file_open(&p, "l/x", 1, 0644, T1, &f), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_dir(&p, "l/d", 0755, T1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_place_symlink(&p, "l/s", "t", T1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(io_test_count_entries(out), 0);
    /* an existing link is replaced only with overwrite */
    assert_int_equal(aftp_place_symlink(&p, "rel", "other", T1), AFTP_ERR_FILE_EXISTS);
    opt.overwrite = 1;
    aftp_place_init(&p, root, &opt);
    assert_int_equal(aftp_place_symlink(&p, "rel", "other", T1), AFTP_OK);
    n = readlinkat(root, "rel", target, sizeof target);
    assert_int_equal(n, 5);
    assert_int_equal(io_test_count_entries(root), 2);
    io_test_rmtree(outside);
    close(out);
    free(outside);
}

static void test_mode_masked_by_policy(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_place p;
    aftp_place_file f;
    aftp_place_batch b = {0};
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    assert_int_equal(opt.mode_mask, 0777);
    aftp_place_init(&p, root, &opt);
    assert_int_equal(aftp_place_file_open(&p, "suid", 0, 04755, T2, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_add(&b, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_commit(&p, &b), AFTP_OK);
    assert_int_equal(mode_at(root, "suid") & 07777, 0755);
    assert_int_equal(mtime_at(root, "suid"), T2);
    opt.mode_mask = 07777;
    aftp_place_init(&p, root, &opt);
    assert_int_equal(aftp_place_file_open(&p, "kept", 0, 04755, T1, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_add(&b, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_commit(&p, &b), AFTP_OK);
    assert_int_equal(mode_at(root, "kept") & 07777, 04755);
}

/* 8 MiB with data in two 4 KiB blocks, written as one buffer. */
static void test_sparse_write_keeps_holes(void **state)
{
    int root = io_test_scratch_fd(state);
    const size_t size = 8u << 20, second = 5u << 20;
    uint8_t *data = calloc(1, size);
    io_test_pattern(data + 4096, 4096, 7);
    io_test_pattern(data + second + 100, 4000, 8); /* inside one grain, unaligned */
    aftp_place p;
    aftp_place_file f;
    aftp_place_batch b = {0};
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_file_open(&p, "sparse", size, 0644, T1, &f), AFTP_OK);
    /* two writes, the second starting mid-grain */
    assert_int_equal(aftp_place_file_write(&p, &f, 0, data, 1000), AFTP_OK);
    assert_int_equal(aftp_place_file_write(&p, &f, 1000, data + 1000, size - 1000), AFTP_OK);
    assert_int_equal(aftp_place_batch_add(&b, &f), AFTP_OK);
    assert_int_equal(aftp_place_batch_commit(&p, &b), AFTP_OK);
    struct stat sb;
    assert_int_equal(fstatat(root, "sparse", &sb, 0), 0);
    assert_int_equal(sb.st_size, (off_t)size);
    assert_true((uint64_t)sb.st_blocks * 512 <= 64 * 1024);
    print_message("8 MiB file with 8 KiB of data: %llu bytes allocated\n",
                  (unsigned long long)sb.st_blocks * 512);
    uint8_t *got = malloc(size);
    int fd = openat(root, "sparse", O_RDONLY);
    assert_int_equal(pread(fd, got, size, 0), (ssize_t)size);
    assert_memory_equal(got, data, size);
    close(fd);
    free(got);
    free(data);
}

/* Three files through the three steps, checked at each crash point. */
static void test_group_commit_order(void **state)
{
    int root = io_test_scratch_fd(state);
    const char *names[3] = {"g/one", "g/two", "three"};
    aftp_place p;
    aftp_place_file f[3];
    aftp_place_batch b = {0};
    uint8_t data[3][5000];
    aftp_place_init(&p, root, NULL);
    assert_int_equal(aftp_place_dir(&p, "g", 0755, T1), AFTP_OK);
    for (int i = 0; i < 3; i++) {
        io_test_pattern(data[i], sizeof data[i], (uint32_t)i + 10);
        assert_int_equal(aftp_place_file_open(&p, names[i], sizeof data[i], 0640, T2, &f[i]),
                         AFTP_OK);
        assert_int_equal(aftp_place_file_write(&p, &f[i], 0, data[i], sizeof data[i]), AFTP_OK);
        assert_int_equal(aftp_place_batch_add(&b, &f[i]), AFTP_OK);
    }
    /* no rename before the data is durable */
    assert_int_equal(aftp_place_batch_rename(&p, &b), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_place_batch_finish(&p, &b), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_place_batch_sync(&p, &b), AFTP_OK);
    /* crash point 1: synced, not renamed: only temporary names */
    for (int i = 0; i < 3; i++) {
        assert_false(io_test_exists(root, names[i]));
        assert_true(holds(f[i].parent_fd, f[i].tmp, sizeof data[i], (uint32_t)i + 10));
    }
    assert_int_equal(aftp_place_batch_add(&b, &f[0]), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_place_batch_rename(&p, &b), AFTP_OK);
    /* crash point 2: renamed: every final name holds all its data */
    for (int i = 0; i < 3; i++)
        assert_true(holds(root, names[i], sizeof data[i], (uint32_t)i + 10));
    assert_int_equal(io_test_count_entries(f[0].parent_fd), 2); /* no temporary left */
    assert_int_equal(aftp_place_batch_finish(&p, &b), AFTP_OK);
    assert_int_equal(b.count, 0);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(mode_at(root, "g/two") & 07777, 0640);
    assert_int_equal(mtime_at(root, "g"), T1);
}

/* A batch abandoned after its sync leaves nothing under a final name,
 * and a file whose name was taken meanwhile fails alone. */
static void test_group_commit_abort_and_one_failure(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_place p;
    aftp_place_file f[2];
    aftp_place_batch b = {0};
    uint8_t data[100] = {1};
    aftp_place_init(&p, root, NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(aftp_place_file_open(&p, i ? "y" : "x", 100, 0644, T1, &f[i]),
                         AFTP_OK);
        assert_int_equal(aftp_place_file_write(&p, &f[i], 0, data, 100), AFTP_OK);
        assert_int_equal(aftp_place_batch_add(&b, &f[i]), AFTP_OK);
    }
    assert_int_equal(aftp_place_batch_sync(&p, &b), AFTP_OK);
    aftp_place_batch_abort(&p, &b);
    assert_int_equal(io_test_count_entries(root), 0);

    for (int i = 0; i < 2; i++) {
        assert_int_equal(aftp_place_file_open(&p, i ? "y" : "x", 100, 0644, T1, &f[i]),
                         AFTP_OK);
        assert_int_equal(aftp_place_batch_add(&b, &f[i]), AFTP_OK);
    }
    int fd = openat(root, "x", O_WRONLY | O_CREAT | O_EXCL, 0644); /* another writer */
    assert_int_equal(write(fd, "theirs", 6), 6);
    close(fd);
    assert_int_equal(aftp_place_batch_commit(&p, &b), AFTP_ERR_FILE_EXISTS);
    assert_int_equal(f[0].error, AFTP_ERR_FILE_EXISTS);
    assert_int_equal(f[1].error, AFTP_OK);
    assert_int_equal(mtime_at(root, "y"), T1);
    assert_int_equal(io_test_count_entries(root), 2); /* theirs kept, y, no temporary */
    fd = openat(root, "x", O_RDONLY);
    char got[8] = {0};
    assert_int_equal(read(fd, got, sizeof got), 6);
    assert_string_equal(got, "theirs");
    close(fd);
}

/* src/: nested, empty, spaced, unicode, sparse, links in and out, and two
 * things a walk skips; directory times set last. */
static void make_source(int root)
{
    static const char *dirs[] = {"src", "src/d1", "src/empty"};
    static const char *files[] = {"src/d1/f", "src/sp ace", "src/caf\xc3\xa9", "src/bad\nname"};
    uint8_t block[3000];
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(mkdirat(root, dirs[i], 0755), 0);
    for (size_t i = 0; i < 4; i++) {
        int fd = openat(root, files[i], O_WRONLY | O_CREAT, 0600 + (mode_t)i * 040);
        io_test_pattern(block, sizeof block, (uint32_t)i);
        assert_int_equal(write(fd, block, sizeof block - i * 1000), sizeof block - i * 1000);
        close(fd);
    }
    int fd = openat(root, "src/sparse", O_WRONLY | O_CREAT, 0644);
    assert_int_equal(ftruncate(fd, 2 << 20), 0);
    assert_int_equal(pwrite(fd, block, sizeof block, 1 << 20), (ssize_t)sizeof block);
    close(fd);
    assert_int_equal(symlinkat("d1/f", root, "src/in"), 0);
    assert_int_equal(symlinkat("/etc", root, "src/out"), 0);
    assert_int_equal(mkfifoat(root, "src/fifo", 0644), 0);
    assert_int_equal(fchmodat(root, "src/empty", 0711, 0), 0);
    const struct timespec times[2] = {{0, UTIME_OMIT}, {1400000000, 5}};
    for (size_t i = 3; i-- > 0;)
        assert_int_equal(utimensat(root, dirs[i], times, 0), 0);
}

/* One entry of the walk placed beneath p's root; files go through
 * `batch`, committed when full. */
static void place_entry(aftp_place *p, aftp_place_batch *batch, aftp_place_file *slots,
                        const aftp_tree_entry *e)
{
    if (e->kind == AFTP_TREE_DIR) {
        assert_int_equal(aftp_place_dir(p, e->path, e->mode, e->mtime_ns), AFTP_OK);
        return;
    }
    if (e->kind == AFTP_TREE_SYMLINK) {
        assert_int_equal(aftp_place_symlink(p, e->path, e->target, e->mtime_ns), AFTP_OK);
        return;
    }
    if (batch->count == 4)
        assert_int_equal(aftp_place_batch_commit(p, batch), AFTP_OK);
    aftp_place_file *f = &slots[batch->count];
    static uint8_t buf[65536];
    uint64_t at = 0, start, end;
    int src = open(e->local, O_RDONLY);
    assert_int_equal(aftp_place_file_open(p, e->path, e->size, e->mode, e->mtime_ns, f), AFTP_OK);
    while (aftp_tree_data_extent(src, e->size, at, &start, &end) == 1) {
        for (at = start; at < end;) {
            size_t n = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
            assert_int_equal(pread(src, buf, n, (off_t)at), (ssize_t)n);
            assert_int_equal(aftp_place_file_write(p, f, at, buf, n), AFTP_OK);
            at += n;
        }
    }
    close(src);
    assert_int_equal(aftp_place_batch_add(batch, f), AFTP_OK);
}

/* A tree walked by aftp_tree and placed by aftp_place, as the two ends
 * of a transfer will: byte-exact, with metadata compared. */
static void test_walked_tree_placed_exactly(void **state)
{
    int root = io_test_scratch_fd(state);
    char src[600];
    make_source(root);
    assert_int_equal(mkdirat(root, "dst", 0755), 0);
    int dst = openat(root, "dst", O_RDONLY | O_DIRECTORY);
    snprintf(src, sizeof src, "%s/src/", io_test_scratch_path(state));
    const char *srcs[] = {src};
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    opt.links = 1;
    aftp_place p;
    aftp_place_batch batch = {0};
    static aftp_place_file slots[4];
    aftp_tree t;
    aftp_tree_entry e;
    aftp_place_init(&p, dst, &opt);
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    while (aftp_tree_next(&t, &e) == 1)
        place_entry(&p, &batch, slots, &e);
    aftp_tree_fini(&t);
    assert_int_equal(aftp_place_batch_commit(&p, &batch), AFTP_OK);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 8); /* d1, d1/f, empty, sp ace, café, sparse, in, out */
    assert_int_equal(io_test_count_entries(dst), 7);
    close(dst);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds to place and commit `n` files of 4 KiB, `per` to a batch. */
static double commit_files(aftp_place *p, const char *dir, int n, int per)
{
    static aftp_place_file files[AFTP_PLACE_BATCH_MAX];
    aftp_place_batch b = {0};
    uint8_t data[4096];
    char name[64];
    io_test_pattern(data, sizeof data, 3);
    double start = now_s();
    assert_int_equal(aftp_place_dir(p, dir, 0755, T1), AFTP_OK);
    for (int i = 0; i < n; i++) {
        aftp_place_file *f = &files[i % per];
        snprintf(name, sizeof name, "%s/f%04d", dir, i);
        assert_int_equal(aftp_place_file_open(p, name, sizeof data, 0644, T1, f), AFTP_OK);
        assert_int_equal(aftp_place_file_write(p, f, 0, data, sizeof data), AFTP_OK);
        assert_int_equal(aftp_place_batch_add(&b, f), AFTP_OK);
        if (b.count == (size_t)per || i == n - 1)
            assert_int_equal(aftp_place_batch_commit(p, &b), AFTP_OK);
    }
    return now_s() - start;
}

/* Figures, not assertions: what a file costs committed alone against in
 * groups, fsync each or syncfs once. */
static void test_group_commit_cost(void **state)
{
    int root = io_test_scratch_fd(state);
    const int n = 256;
    aftp_place p;
    aftp_place_options opt;
    aftp_place_defaults(&opt);
    aftp_place_init(&p, root, &opt);
    double alone = commit_files(&p, "alone", n, 1);
    double group = commit_files(&p, "group", n, 64);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    opt.sync_fs = 1;
    aftp_place_init(&p, root, &opt);
    double fs = commit_files(&p, "syncfs", n, 64);
    assert_int_equal(aftp_place_finish(&p), AFTP_OK);
    print_message("commit of %d files of 4 KiB, per file: alone %.0f us, groups of 64 (fsync "
                  "each) %.0f us, groups of 64 (syncfs) %.0f us\n",
                  n, alone / n * 1e6, group / n * 1e6, fs / n * 1e6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_nested_and_empty_dirs_with_metadata),
        IO_TEST_SCRATCH(test_dir_mtime_waits_for_its_files),
        IO_TEST_SCRATCH(test_file_or_link_in_the_way_refused),
        IO_TEST_SCRATCH(test_unsafe_paths_refused),
        IO_TEST_SCRATCH(test_links_literal_only_when_asked_never_followed),
        IO_TEST_SCRATCH(test_mode_masked_by_policy),
        IO_TEST_SCRATCH(test_sparse_write_keeps_holes),
        IO_TEST_SCRATCH(test_group_commit_order),
        IO_TEST_SCRATCH(test_group_commit_abort_and_one_failure),
        IO_TEST_SCRATCH(test_walked_tree_placed_exactly),
        IO_TEST_SCRATCH(test_group_commit_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
