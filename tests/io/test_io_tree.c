/* The sender's tree walk: order, names, links, skipped entries, bounds,
 * and the data extents of sparse files. */
#include <dirent.h>
#include <malloc.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "aftp_tree.h"
#include "io_testutil.h"

/* What a walk gave: "kind path[ -> target]" lines, and the notices. */
typedef struct walk_log {
    char entries[64][256];
    size_t n, total;
    char notices[16][256];
    int notice_err[16];
    size_t nnotices;
} walk_log;

static void on_notice(void *user, const char *local, int err, const char *why)
{
    walk_log *log = user;
    (void)why;
    if (log->nnotices < 16) {
        const char *base = strrchr(local, '/');
        snprintf(log->notices[log->nnotices], 256, "%s", base ? base + 1 : local);
        log->notice_err[log->nnotices++] = err;
    }
}

static void record(walk_log *log, const aftp_tree_entry *e)
{
    static const char kinds[] = "?fdl";
    log->total++;
    if (log->n < 64)
        snprintf(log->entries[log->n++], 256, "%c %s%s%s", kinds[e->kind], e->path,
                 e->target ? " -> " : "", e->target ? e->target : "");
}

static void walk(const char *const *srcs, size_t n, walk_log *log)
{
    aftp_tree t;
    aftp_tree_entry e;
    memset(log, 0, sizeof *log);
    assert_int_equal(aftp_tree_init(&t, srcs, n, on_notice, log), AFTP_OK);
    while (aftp_tree_next(&t, &e) == 1)
        record(log, &e);
    aftp_tree_fini(&t);
}

/* Walks the SRC `rel` beneath the test's scratch directory. */
static void walk_scratch(void **state, const char *rel, walk_log *log)
{
    char src[600];
    snprintf(src, sizeof src, "%s/%s", io_test_scratch_path(state), rel);
    const char *srcs[] = {src};
    walk(srcs, 1, log);
}

static void expect(const walk_log *log, const char *const *want, size_t n)
{
    for (size_t i = 0; i < log->n && i < n; i++)
        assert_string_equal(log->entries[i], want[i]);
    assert_int_equal(log->n, n);
}

static void put_file(int dirfd, const char *name, size_t len)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    uint8_t buf[256];
    io_test_pattern(buf, sizeof buf, (uint32_t)len);
    for (size_t done = 0; done < len;) {
        size_t n = len - done < sizeof buf ? len - done : sizeof buf;
        assert_int_equal(write(fd, buf, n), (ssize_t)n);
        done += n;
    }
    close(fd);
}

/* a/{b/c/f1, empty/, f2, "sp ace", "café"} */
static void make_nested(int fd)
{
    assert_int_equal(mkdirat(fd, "a", 0755), 0);
    assert_int_equal(mkdirat(fd, "a/b", 0750), 0);
    assert_int_equal(mkdirat(fd, "a/b/c", 0755), 0);
    assert_int_equal(mkdirat(fd, "a/empty", 0700), 0);
    put_file(fd, "a/b/c/f1", 1000);
    put_file(fd, "a/f2", 5);
    put_file(fd, "a/sp ace", 7);
    put_file(fd, "a/caf\xc3\xa9", 9);
}

static void test_nested_and_empty_dirs_in_order(void **state)
{
    int fd = io_test_scratch_fd(state);
    make_nested(fd);
    walk_log log;
    walk_scratch(state, "a", &log);
    /* sorted bytewise: ' ' < 'b' < 'c' < 'e' < 'f', 'é' (0xc3) last of "caf" */
    const char *want[] = {"d a", "d a/b", "d a/b/c", "f a/b/c/f1", "f a/caf\xc3\xa9",
                          "d a/empty", "f a/f2", "f a/sp ace"};
    expect(&log, want, 8);
    assert_int_equal(log.nnotices, 0);
}

static void test_trailing_slash_sends_contents(void **state)
{
    int fd = io_test_scratch_fd(state);
    make_nested(fd);
    walk_log log;
    walk_scratch(state, "a/", &log);
    const char *want[] = {"d b", "d b/c", "f b/c/f1", "f caf\xc3\xa9", "d empty", "f f2",
                          "f sp ace"};
    expect(&log, want, 7);
    walk_scratch(state, "a/.", &log); /* "." has no name of its own */
    expect(&log, want, 7);
}

static void test_entry_metadata_and_local_path(void **state)
{
    int fd = io_test_scratch_fd(state);
    const char *root = io_test_scratch_path(state);
    make_nested(fd);
    char src[600], local[700];
    snprintf(src, sizeof src, "%s/a", root);
    const struct timespec times[2] = {{0, UTIME_OMIT}, {1600000000, 123456789}};
    assert_int_equal(utimensat(fd, "a/b/c/f1", times, 0), 0);
    assert_int_equal(fchmodat(fd, "a/b/c/f1", 04751, 0), 0);
    const char *srcs[] = {src};
    aftp_tree t;
    aftp_tree_entry e;
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(aftp_tree_next(&t, &e), 1);
    struct stat sb;
    assert_int_equal(fstatat(fd, "a/b/c/f1", &sb, 0), 0);
    snprintf(local, sizeof local, "%s/a/b/c/f1", root);
    assert_string_equal(e.local, local);
    assert_int_equal(e.kind, AFTP_TREE_FILE);
    assert_int_equal(e.size, 1000);
    assert_int_equal(e.mtime_ns, INT64_C(1600000000123456789));
    assert_int_equal(e.mode, 04751);
    assert_int_equal(e.ino, sb.st_ino);
    assert_int_equal(e.dev, sb.st_dev);
    assert_int_equal(e.ctime_ns, (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec);
    aftp_tree_fini(&t);
}

/* 100 directories of 100 files: the walk holds one directory per level
 * open, whatever the number of files. */
static size_t heap_in_use(void)
{
    return mallinfo2().uordblks;
}

static void test_ten_thousand_files_bounded_fds(void **state)
{
    int fd = io_test_scratch_fd(state);
    const char *root = io_test_scratch_path(state);
    char name[64];
    assert_int_equal(mkdirat(fd, "t", 0755), 0);
    for (int d = 0; d < 100; d++) {
        snprintf(name, sizeof name, "t/d%02d", d);
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        for (int f = 0; f < 100; f++) {
            snprintf(name, sizeof name, "t/d%02d/f%02d", d, f);
            int ffd = openat(fd, name, O_WRONLY | O_CREAT, 0644);
            assert_true(ffd >= 0);
            close(ffd);
        }
    }
    char src[600];
    snprintf(src, sizeof src, "%s/t", root);
    const char *srcs[] = {src};
    aftp_tree t;
    aftp_tree_entry e;
    int before = io_test_count_open_fds(), most = 0;
    size_t files = 0, dirs = 0, heap_before = heap_in_use(), heap_most = 0;
    char last[64] = "";
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    while (aftp_tree_next(&t, &e) == 1) {
        int now = io_test_count_open_fds() - before;
        most = now > most ? now : most;
        size_t heap = heap_in_use() - heap_before;
        heap_most = heap > heap_most ? heap : heap_most;
        files += e.kind == AFTP_TREE_FILE;
        dirs += e.kind == AFTP_TREE_DIR;
        assert_true(strcmp(last, e.path) < 0); /* this layout sorts in full */
        snprintf(last, sizeof last, "%s", e.path);
    }
    aftp_tree_fini(&t);
    assert_int_equal(files, 10000);
    assert_int_equal(dirs, 101);
    assert_true(most <= 2); /* t and one d.. */
    assert_int_equal(io_test_count_open_fds(), before);
    /* the names of t and of one d.., never the 10,000 (0 under a sanitizer's malloc) */
    assert_true(heap_most < 64 * 1024);
    print_message("10,000 files: at most %d directories open and %zu bytes of heap held "
                  "during the walk\n", most, heap_most);
}

static void test_control_names_fifo_skipped_with_notice(void **state)
{
    int fd = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(fd, "s", 0755), 0);
    put_file(fd, "s/bad\nname", 3);
    assert_int_equal(mkdirat(fd, "s/tab\tdir", 0755), 0);
    put_file(fd, "s/tab\tdir/inside", 3);
    assert_int_equal(mkfifoat(fd, "s/fifo", 0644), 0);
    put_file(fd, "s/ok", 3);
    walk_log log;
    walk_scratch(state, "s/", &log);
    const char *want[] = {"f ok"};
    expect(&log, want, 1);
    assert_int_equal(log.nnotices, 3);
    /* sorted: "bad\nname" < "fifo" < "tab\tdir" */
    assert_string_equal(log.notices[0], "bad\nname");
    assert_int_equal(log.notice_err[0], AFTP_ERR_PATH_REJECTED);
    assert_string_equal(log.notices[1], "fifo");
    assert_int_equal(log.notice_err[1], AFTP_ERR_INVALID_ARGUMENT);
    assert_string_equal(log.notices[2], "tab\tdir");
}

static void test_links_inside_reported_not_followed(void **state)
{
    int fd = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(fd, "real", 0755), 0);
    put_file(fd, "real/f", 4);
    assert_int_equal(mkdirat(fd, "l", 0755), 0);
    assert_int_equal(symlinkat("../real", fd, "l/dirlink"), 0);
    assert_int_equal(symlinkat("/etc", fd, "l/out"), 0);
    assert_int_equal(symlinkat("../real/f", fd, "l/filelink"), 0);
    walk_log log;
    walk_scratch(state, "l", &log);
    const char *want[] = {"d l", "l l/dirlink -> ../real", "l l/filelink -> ../real/f",
                          "l l/out -> /etc"};
    expect(&log, want, 4);
}

static void test_link_named_as_src_is_followed(void **state)
{
    int fd = io_test_scratch_fd(state);
    const char *root = io_test_scratch_path(state);
    assert_int_equal(mkdirat(fd, "real", 0755), 0);
    put_file(fd, "real/f", 4);
    assert_int_equal(symlinkat("real", fd, "via"), 0);
    assert_int_equal(symlinkat("real/f", fd, "flink"), 0);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/via", root);
    snprintf(b, sizeof b, "%s/flink", root);
    const char *srcs[] = {a, b};
    walk_log log;
    walk(srcs, 2, &log);
    const char *want[] = {"d via", "f via/f", "f flink"};
    expect(&log, want, 3);
}

/* A SRC that loops or is missing is a notice; the next SRC is walked. */
static void test_bad_src_is_a_notice(void **state)
{
    int fd = io_test_scratch_fd(state);
    char loop[600], missing[600], good[600];
    assert_int_equal(symlinkat("loop", fd, "loop"), 0);
    put_file(fd, "good", 1);
    snprintf(loop, sizeof loop, "%s/loop", io_test_scratch_path(state));
    snprintf(missing, sizeof missing, "%s/missing/", io_test_scratch_path(state));
    snprintf(good, sizeof good, "%s/good", io_test_scratch_path(state));
    const char *srcs[] = {loop, missing, good};
    walk_log log;
    walk(srcs, 3, &log);
    const char *want[] = {"f good"};
    expect(&log, want, 1);
    assert_int_equal(log.nnotices, 2);
    assert_int_equal(log.notice_err[0], AFTP_ERR_PATH_REJECTED); /* ELOOP */
    assert_int_equal(log.notice_err[1], AFTP_ERR_NOT_FOUND);
}

/* Entries vanish after their directory was read: each is a notice, and
 * the walk goes on to the next. */
static void test_directory_removed_mid_walk(void **state)
{
    int fd = io_test_scratch_fd(state);
    const char *root = io_test_scratch_path(state);
    char path[700];
    assert_int_equal(mkdirat(fd, "w", 0755), 0);
    assert_int_equal(mkdirat(fd, "w/a", 0755), 0);
    put_file(fd, "w/a/x", 1);
    assert_int_equal(mkdirat(fd, "w/b", 0755), 0);
    put_file(fd, "w/b/y", 1);
    put_file(fd, "w/c", 1);
    snprintf(path, sizeof path, "%s/w", root);
    const char *srcs[] = {path};
    walk_log log;
    memset(&log, 0, sizeof log);
    aftp_tree t;
    aftp_tree_entry e;
    assert_int_equal(aftp_tree_init(&t, srcs, 1, on_notice, &log), AFTP_OK);
    assert_int_equal(aftp_tree_next(&t, &e), 1);
    assert_int_equal(aftp_tree_next(&t, &e), 1);
    assert_string_equal(e.path, "w/a"); /* its names are read now */
    snprintf(path, sizeof path, "%s/w/a", root);
    io_test_rmtree(path);
    snprintf(path, sizeof path, "%s/w/b", root);
    io_test_rmtree(path);
    while (aftp_tree_next(&t, &e) == 1)
        record(&log, &e);
    aftp_tree_fini(&t);
    const char *want[] = {"f w/c"};
    expect(&log, want, 1);
    assert_int_equal(log.nnotices, 2); /* w/a/x, then w/b */
    assert_string_equal(log.notices[0], "x");
    assert_int_equal(log.notice_err[0], AFTP_ERR_NOT_FOUND);
    assert_string_equal(log.notices[1], "b");
}

static void test_depth_limit_skips_deeper(void **state)
{
    int fd = io_test_scratch_fd(state);
    char rel[2048] = "z";
    assert_int_equal(mkdirat(fd, rel, 0755), 0);
    for (unsigned i = 0; i < AFTP_TREE_MAX_DEPTH + 1; i++) {
        strcat(rel, "/z");
        assert_int_equal(mkdirat(fd, rel, 0755), 0);
    }
    walk_log log;
    walk_scratch(state, "z", &log);
    assert_int_equal(log.total, AFTP_TREE_MAX_DEPTH + 1); /* z, and 128 levels beneath */
    assert_int_equal(log.nnotices, 1);
    assert_int_equal(log.notice_err[0], AFTP_ERR_LIMIT);
}

/* Files of a kernel file system have no true size: skipped, each named. */
static void test_pseudo_fs_files_skipped(void **state)
{
    (void)state;
    const char *srcs[] = {"/proc/sys/kernel/random/"};
    walk_log log;
    struct stat sb;
    if (stat(srcs[0], &sb) != 0)
        skip();
    walk(srcs, 1, &log);
    assert_int_equal(log.total, 0);
    assert_true(log.nnotices >= 2);
    assert_string_equal(log.notices[0], "boot_id");
    assert_int_equal(log.notice_err[0], AFTP_ERR_INVALID_ARGUMENT);
}

/* Data at [0, 4 KiB) and [1 MiB, 1 MiB + 4 KiB) of a 4 MiB file. */
static void test_sparse_file_extents(void **state)
{
    int fd = openat(io_test_scratch_fd(state), "sparse", O_RDWR | O_CREAT, 0644);
    uint8_t block[4096];
    memset(block, 0xab, sizeof block);
    const uint64_t size = UINT64_C(4) << 20, second = UINT64_C(1) << 20;
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    assert_int_equal(pwrite(fd, block, sizeof block, 0), (ssize_t)sizeof block);
    assert_int_equal(pwrite(fd, block, sizeof block, (off_t)second), (ssize_t)sizeof block);
    assert_int_equal(fsync(fd), 0);
    uint64_t at = 0, start, end, total = 0;
    int n = 0, rc;
    while ((rc = aftp_tree_data_extent(fd, size, at, &start, &end)) == 1) {
        assert_true(start >= at && end > start && end <= size);
        total += end - start;
        n++;
        at = end;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(aftp_tree_data_extent(fd, size, 0, &start, &end), 1);
    assert_int_equal(start, 0);
    assert_true(end >= sizeof block && end <= second);
    assert_int_equal(aftp_tree_data_extent(fd, size, end, &start, &end), 1);
    assert_true(start <= second && end >= second + sizeof block && end < size);
    assert_int_equal(n, 2);
    assert_true(total < size / 2);
    print_message("sparse 4 MiB file: %d extents, %llu bytes of data\n", n,
                  (unsigned long long)total);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_nested_and_empty_dirs_in_order),
        IO_TEST_SCRATCH(test_trailing_slash_sends_contents),
        IO_TEST_SCRATCH(test_entry_metadata_and_local_path),
        IO_TEST_SCRATCH(test_ten_thousand_files_bounded_fds),
        IO_TEST_SCRATCH(test_control_names_fifo_skipped_with_notice),
        IO_TEST_SCRATCH(test_links_inside_reported_not_followed),
        IO_TEST_SCRATCH(test_link_named_as_src_is_followed),
        IO_TEST_SCRATCH(test_bad_src_is_a_notice),
        IO_TEST_SCRATCH(test_directory_removed_mid_walk),
        IO_TEST_SCRATCH(test_depth_limit_skips_deeper),
        cmocka_unit_test(test_pseudo_fs_files_skipped),
        IO_TEST_SCRATCH(test_sparse_file_extents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
