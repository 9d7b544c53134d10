/* Sender source: what it refuses to send, and views into the mapping. */
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

#include "aftp/aftp_global.h"
#include "aftp_source.h"
#include "io_testutil.h"

static char *scratch;
static int scratch_fd;

static int setup(void **state)
{
    (void)state;
    scratch = io_test_mkdtemp(&scratch_fd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    io_test_rmtree(scratch);
    close(scratch_fd);
    free(scratch);
    return 0;
}

static char *path_of(const char *name)
{
    static char buf[600];
    snprintf(buf, sizeof buf, "%s/%s", scratch, name);
    return buf;
}

static void test_refuses_missing_and_directories(void **state)
{
    (void)state;
    aftp_source src;
    aftp_file_info info;
    assert_int_equal(aftp_source_open(&src, path_of("nope"), 1, &info), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(src.message, "No such file"));
    assert_int_equal(aftp_source_open(&src, scratch, 1, &info), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(src.message, "is a directory"));
    assert_int_equal(aftp_source_open(&src, "/dev/null", 1, &info), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(src.message, "is a character device: aftp sends regular files only"));
}

/* A FIFO nobody writes to: refused at once, not waited on in open().
 * The alarm ends the test (as a failure) if open() blocks. */
static void test_refuses_a_fifo_without_blocking(void **state)
{
    (void)state;
    aftp_source src;
    aftp_file_info info;
    assert_int_equal(mkfifoat(scratch_fd, "fifo", 0600), 0);
    alarm(10);
    int rc = aftp_source_open(&src, path_of("fifo"), 1, &info);
    alarm(0);
    assert_int_equal(rc, AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(src.message, "fifo: is a FIFO (named pipe): aftp sends regular files "
                                        "only"));
    assert_int_equal(src.fd, -1);
}

/* Kernel files whose size is not their content are refused, not sent as
 * a short "verified" copy: proc says 0 bytes, sysfs 4096. */
static void test_refuses_files_of_unknown_size(void **state)
{
    (void)state;
    static const char *const sysfs_files[] = {"/sys/kernel/mm/transparent_hugepage/enabled",
                                              "/sys/kernel/uevent_seqnum", "/sys/power/state"};
    aftp_source src;
    aftp_file_info info;
    if (access("/proc/self/status", R_OK) != 0)
        skip(); /* no proc mounted here */
    assert_int_equal(aftp_source_open(&src, "/proc/self/status", 1, &info),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_string_equal(src.message, "cannot send /proc/self/status: it is on proc, a kernel "
                                     "file system whose files have no true size (aftp sends "
                                     "regular files of a known size: copy it to a regular file "
                                     "first)");
    assert_int_equal(src.fd, -1);
    for (size_t i = 0; i < sizeof sysfs_files / sizeof sysfs_files[0]; i++) {
        if (access(sysfs_files[i], R_OK) != 0)
            continue;
        assert_int_equal(aftp_source_open(&src, sysfs_files[i], 1, &info),
                         AFTP_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(src.message, "it is on sysfs, a kernel file system"));
        return;
    }
    skip(); /* no readable sysfs attribute here */
}

static void test_views_point_into_the_file(void **state)
{
    (void)state;
    enum { LEN = 100000 };
    uint8_t *data = malloc(LEN);
    io_test_pattern(data, LEN, 4);
    int fd = openat(scratch_fd, "src.bin", O_CREAT | O_WRONLY, 0604);
    assert_int_equal(write(fd, data, LEN), LEN);
    close(fd);

    aftp_source src;
    aftp_file_info info;
    assert_int_equal(aftp_source_open(&src, path_of("src.bin"), 3, &info), AFTP_OK);
    assert_int_equal(info.file_id, 3);
    assert_int_equal(info.size, LEN);
    assert_int_equal(info.mode, 0604);
    assert_string_equal(info.path, "src.bin");
    const uint8_t *view;
    assert_int_equal(aftp_source_view(&src, 3, 1000, 5000, &view), AFTP_OK);
    assert_memory_equal(view, data + 1000, 5000);
    assert_int_equal(aftp_source_view(&src, 3, LEN - 1, 1, &view), AFTP_OK);
    assert_int_equal(*view, data[LEN - 1]);
    assert_int_equal(aftp_source_view(&src, 3, LEN - 1, 2, &view), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_source_view(&src, 4, 0, 1, &view), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_source_ops.close(&src, 3, 1), AFTP_OK);
    aftp_source_fini(&src);
    free(data);
}

static void test_released_pages_stay_readable(void **state)
{
    /* 40 MiB read in order: pages far behind are released from residency,
     * and a late view (a repair) still sees the right bytes. */
    (void)state;
    const size_t len = 40u << 20;
    uint8_t *data = malloc(len);
    io_test_pattern(data, len, 5);
    int fd = openat(scratch_fd, "big.bin", O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    aftp_source src;
    aftp_file_info info;
    assert_int_equal(aftp_source_open(&src, path_of("big.bin"), 1, &info), AFTP_OK);
    const uint8_t *view;
    for (size_t off = 0; off < len; off += 1 << 20) {
        assert_int_equal(aftp_source_view(&src, 1, off, 1 << 20, &view), AFTP_OK);
        aftp_source_settle(&src);
    }
    assert_true(src.resident.released >= (8u << 20));
    assert_int_equal(aftp_source_view(&src, 1, 4096, 1400, &view), AFTP_OK);
    assert_memory_equal(view, data + 4096, 1400);
    aftp_source_fini(&src);
    free(data);
}

static void test_empty_file(void **state)
{
    (void)state;
    close(openat(scratch_fd, "empty", O_CREAT | O_WRONLY, 0644));
    aftp_source src;
    aftp_file_info info;
    const uint8_t *view;
    assert_int_equal(aftp_source_open(&src, path_of("empty"), 1, &info), AFTP_OK);
    assert_int_equal(info.size, 0);
    assert_int_equal(aftp_source_view(&src, 1, 0, 0, &view), AFTP_OK);
    aftp_source_fini(&src);
}

/* Writes `len` pattern bytes to `name` and opens it as file 1. */
static void open_new_source(aftp_source *src, const char *name, size_t len, uint32_t seed)
{
    aftp_file_info info;
    uint8_t *data = malloc(len);
    io_test_pattern(data, len, seed);
    int fd = openat(scratch_fd, name, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    free(data);
    assert_int_equal(aftp_source_open(src, path_of(name), 1, &info), AFTP_OK);
}

/* A size change is seen by the check: the guard trips, views fail, and
 * the message says what happened. */
static void test_check_sees_a_shrunk_source(void **state)
{
    (void)state;
    aftp_source src;
    const uint8_t *view;
    open_new_source(&src, "shrinks.bin", 3 * 4096, 6);
    assert_int_equal(aftp_source_check(&src), AFTP_OK);
    assert_int_equal(truncate(path_of("shrinks.bin"), 4096), 0);
    assert_int_equal(aftp_source_check(&src), AFTP_ERR_SOURCE_CHANGED);
    assert_true(aftp_mapguard_tripped(&src.guard));
    assert_string_equal(src.message, "shrinks.bin: source changed during transfer "
                                     "(12288 bytes when opened, 4096 now)");
    assert_int_equal(aftp_source_view(&src, 1, 0, 100, &view), AFTP_ERR_SOURCE_CHANGED);
    aftp_source_fini(&src);
}

/* Same size, new content: the mtime tells. */
static void test_check_sees_a_rewritten_source(void **state)
{
    (void)state;
    aftp_source src;
    open_new_source(&src, "rewritten.bin", 5000, 7);
    struct timespec later[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};
    assert_int_equal(utimensat(scratch_fd, "rewritten.bin", later, 0), 0);
    assert_int_equal(aftp_source_check(&src), AFTP_ERR_SOURCE_CHANGED);
    /* what changed, and no pair of equal sizes */
    assert_string_equal(src.message, "rewritten.bin: source changed during transfer (written to "
                                     "while being sent: its modification time changed, its size "
                                     "did not)");
    aftp_source_fini(&src);
}

/* A read of the mapping past the new end of a truncated file raises
 * SIGBUS; under the guard it comes back as a tripped guard instead of
 * killing the process, and a second fault is caught the same way. */
static void test_guard_catches_a_read_past_the_end(void **state)
{
    (void)state;
    const size_t len = 3 * 4096;
    aftp_source src;
    const uint8_t *view;
    uint8_t byte = 0;
    open_new_source(&src, "cut.bin", len, 8);
    assert_int_equal(aftp_source_view(&src, 1, 0, len, &view), AFTP_OK);
    assert_int_equal(truncate(path_of("cut.bin"), 4096), 0);
    assert_int_equal(io_test_guarded_read(&src.guard, view + 100, &byte), 0); /* still in the file */
    assert_false(aftp_mapguard_tripped(&src.guard));
    assert_int_equal(io_test_guarded_read(&src.guard, view + 2 * 4096, &byte), 1);
    assert_true(aftp_mapguard_tripped(&src.guard));
    assert_int_equal(io_test_guarded_read(&src.guard, view + 4096, &byte), 1);
    assert_int_equal(aftp_source_view(&src, 1, 0, 100, &view), AFTP_ERR_SOURCE_CHANGED);
    aftp_source_fini(&src);
}

int main(void)
{
    /* The embedder's permission for the SIGBUS guard, as the CLI gives it. */
    if (aftp_global_init(AFTP_INIT_GUARD_SOURCE) != AFTP_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_missing_and_directories),
        cmocka_unit_test(test_refuses_a_fifo_without_blocking),
        cmocka_unit_test(test_refuses_files_of_unknown_size),
        cmocka_unit_test(test_views_point_into_the_file),
        cmocka_unit_test(test_released_pages_stay_readable),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_check_sees_a_shrunk_source),
        cmocka_unit_test(test_check_sees_a_rewritten_source),
        cmocka_unit_test(test_guard_catches_a_read_past_the_end),
    };
    return cmocka_run_group_tests_name("io_source", tests, setup, teardown);
}
