/* Receiver storage in a scratch directory: the final name appears only on
 * commit (also when payloads were opened straight into lent bytes),
 * discards leave nothing, existing files and planted symlinks are
 * respected, a full disk fails at open, space is reserved as data arrives
 * and a disk filled during the transfer fails with an error. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_store.h"
#include "io_testutil.h"

typedef struct fixture {
    char *dir;
    int dfd;
    aftp_store st;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = io_test_mkdtemp(&f->dfd);
    aftp_store_init(&f->st, f->dfd, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    aftp_store_fini(&f->st);
    io_test_rmtree(f->dir);
    close(f->dfd);
    free(f->dir);
    free(f);
    return 0;
}

static aftp_file_info file_info(const char *path, uint64_t size)
{
    aftp_file_info info = {.file_id = 7, .size = size, .mtime_ns = INT64_C(1600000000123456789),
                           .mode = 0640, .block_size = 1000, .path = path};
    return info;
}

/* Writes `data` in blocks of 1000 bytes, last block first, like a repair. */
static void write_blocks(aftp_store *st, const uint8_t *data, size_t len)
{
    size_t nblocks = (len + 999) / 1000;
    for (size_t k = nblocks; k-- > 0;) {
        size_t off = k * 1000, n = len - off < 1000 ? len - off : 1000;
        assert_int_equal(aftp_store_write(st, 7, off, data + off, n), AFTP_OK);
    }
}

static void read_whole(int dfd, const char *name, uint8_t *buf, size_t len)
{
    int fd = openat(dfd, name, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, len + 1), (ssize_t)len);
    close(fd);
}

static void test_commit_makes_final_name_appear(void **state)
{
    fixture *f = *state;
    enum { LEN = 25001 };
    uint8_t *data = malloc(LEN), *back = malloc(LEN + 1);
    io_test_pattern(data, LEN, 1);
    aftp_file_info info = file_info("out.bin", LEN);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    write_blocks(&f->st, data, LEN);
    assert_false(io_test_exists(f->dfd, "out.bin"));
    assert_int_equal(io_test_count_entries(f->dfd), 1); /* the temporary only */

    const uint8_t *view;
    assert_int_equal(aftp_store_view(&f->st, 7, 0, LEN, &view), AFTP_OK);
    assert_memory_equal(view, data, LEN);
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);

    assert_int_equal(io_test_count_entries(f->dfd), 1);
    read_whole(f->dfd, "out.bin", back, LEN);
    assert_memory_equal(back, data, LEN);
    struct stat sb;
    assert_int_equal(fstatat(f->dfd, "out.bin", &sb, 0), 0);
    assert_int_equal(sb.st_mode & 0777, 0640 & ~f->st.umask);
    assert_int_equal(sb.st_mtim.tv_sec, 1600000000);
    assert_int_equal(sb.st_mtim.tv_nsec, 123456789);
    free(data);
    free(back);
}

/* Payloads opened straight into lent bytes (aftp_store_place), then
 * recorded by a write of that very pointer, commit like copied ones. */
static void test_placed_bytes_commit(void **state)
{
    fixture *f = *state;
    enum { LEN = 25001 };
    uint8_t *data = malloc(LEN), *back = malloc(LEN + 1), *place;
    io_test_pattern(data, LEN, 2);
    aftp_file_info info = file_info("placed.bin", LEN);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    for (size_t off = 0; off < LEN; off += 1000) {
        size_t n = LEN - off < 1000 ? LEN - off : 1000;
        assert_int_equal(aftp_store_place(&f->st, 7, off, n, &place), AFTP_OK);
        memcpy(place, data + off, n);
        assert_int_equal(aftp_store_write(&f->st, 7, off, place, n), AFTP_OK);
    }
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);
    read_whole(f->dfd, "placed.bin", back, LEN);
    assert_memory_equal(back, data, LEN);
    free(data);
    free(back);
}

static void test_discard_leaves_nothing(void **state)
{
    fixture *f = *state;
    uint8_t data[3000];
    io_test_pattern(data, sizeof data, 2);
    aftp_file_info info = file_info("gone.bin", sizeof data);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    write_blocks(&f->st, data, 2000);
    assert_int_equal(aftp_store_close(&f->st, 7, 0), AFTP_OK);
    assert_int_equal(io_test_count_entries(f->dfd), 0);
}

static void test_fini_discards_open_file(void **state)
{
    fixture *f = *state;
    aftp_file_info info = file_info("half.bin", 5000);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    aftp_store_fini(&f->st);
    assert_int_equal(io_test_count_entries(f->dfd), 0);
}

static void test_existing_file_refused_without_overwrite(void **state)
{
    fixture *f = *state;
    int fd = openat(f->dfd, "there", O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, "old", 3), 3);
    close(fd);
    aftp_file_info info = file_info("there", 10);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_FILE_EXISTS);
    assert_int_equal(f->st.report.last_error, AFTP_ERR_FILE_EXISTS);
    assert_non_null(strstr(f->st.report.message, "--overwrite"));
    assert_int_equal(io_test_count_entries(f->dfd), 1);

    aftp_store_init(&f->st, f->dfd, 1);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    write_blocks(&f->st, (const uint8_t *)"0123456789", 10);
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);
    uint8_t back[11];
    read_whole(f->dfd, "there", back, 10);
    assert_memory_equal(back, "0123456789", 10);
}

/* A directory or a FIFO at the final name is never replaced, with or
 * without overwrite, and the refusal is PATH_REJECTED with the reason,
 * not FILE_EXISTS (which tells the sender "use --overwrite"). */
static void test_non_file_at_final_name_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->dfd, "adir", 0755), 0);
    assert_int_equal(mkfifoat(f->dfd, "afifo", 0644), 0);
    const char *names[] = {"adir", "afifo"};
    const char *reasons[] = {"cannot store adir: a directory is there",
                             "cannot store afifo: a special file"};
    for (int overwrite = 0; overwrite < 2; overwrite++) {
        for (size_t i = 0; i < 2; i++) {
            aftp_file_info info = file_info(names[i], 10);
            aftp_store_init(&f->st, f->dfd, overwrite);
            assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_PATH_REJECTED);
            assert_non_null(strstr(f->st.report.message, reasons[i]));
            assert_null(strstr(f->st.report.message, "--overwrite"));
        }
    }
    struct stat sb;
    assert_int_equal(fstatat(f->dfd, "adir", &sb, 0), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(io_test_count_entries(f->dfd), 2); /* no temporary left */
}

static void test_planted_symlink_not_followed(void **state)
{
    fixture *f = *state;
    int ofd;
    char *outside = io_test_mkdtemp(&ofd);
    char target[600];
    snprintf(target, sizeof target, "%s/victim", outside);
    int fd = openat(ofd, "victim", O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, "keep", 4), 4);
    close(fd);
    assert_int_equal(symlinkat(target, f->dfd, "dest"), 0);

    aftp_file_info info = file_info("dest", 4);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_FILE_EXISTS);

    /* With overwrite the link itself is replaced; its target is untouched. */
    aftp_store_init(&f->st, f->dfd, 1);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    write_blocks(&f->st, (const uint8_t *)"new!", 4);
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);
    struct stat sb;
    assert_int_equal(fstatat(f->dfd, "dest", &sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(sb.st_mode));
    uint8_t back[5];
    read_whole(ofd, "victim", back, 4);
    assert_memory_equal(back, "keep", 4);
    io_test_rmtree(outside);
    close(ofd);
    free(outside);
}

static void test_unsafe_path_rejected_before_any_file(void **state)
{
    fixture *f = *state;
    aftp_file_info info = file_info("../escape", 4);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_PATH_REJECTED);
    info.path = "/etc/passwd";
    aftp_store_init(&f->st, f->dfd, 0);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(io_test_count_entries(f->dfd), 0);
}

static void test_no_space_fails_at_open_leaving_nothing(void **state)
{
    fixture *f = *state;
    /* Far beyond any test machine's disk: fallocate must refuse. */
    aftp_file_info info = file_info("huge", UINT64_C(1) << 52);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_NO_SPACE);
    assert_non_null(strstr(f->st.report.message, "space"));
    assert_int_equal(io_test_count_entries(f->dfd), 0);
}

static void test_bounds_and_ids_checked(void **state)
{
    fixture *f = *state;
    aftp_file_info info = file_info("b", 100);
    uint8_t data[101] = {0};
    const uint8_t *view;
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_store_write(&f->st, 7, 0, data, 101), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_store_write(&f->st, 7, 100, data, 1), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_store_write(&f->st, 8, 0, data, 1), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_store_view(&f->st, 7, 50, 51, &view), AFTP_ERR_INVALID_ARGUMENT);
    uint8_t *place;
    assert_int_equal(aftp_store_place(&f->st, 7, 50, 51, &place), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_store_place(&f->st, 7, 100, 0, &place), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_store_place(&f->st, 8, 0, 1, &place), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_store_close(&f->st, 8, 1), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_store_close(&f->st, 7, 0), AFTP_OK);
}

static void test_empty_file_commits(void **state)
{
    fixture *f = *state;
    aftp_file_info info = file_info("sub/empty", 0);
    const uint8_t *view;
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    assert_int_equal(aftp_store_view(&f->st, 7, 0, 0, &view), AFTP_OK);
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);
    struct stat sb;
    assert_int_equal(fstatat(f->dfd, "sub/empty", &sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(sb.st_size, 0);
}

static void test_large_file_released_chunks_keep_data(void **state)
{
    /* 20 MiB + 1 crosses chunk boundaries: chunks unmapped after they are
     * complete must still hold their bytes (page cache), and read back. */
    fixture *f = *state;
    const size_t len = (20u << 20) + 1;
    uint8_t *data = malloc(len), *back = malloc(len + 1);
    io_test_pattern(data, len, 3);
    aftp_file_info info = file_info("big", len);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    for (size_t off = 0; off < len; off += 1400) {
        size_t n = len - off < 1400 ? len - off : 1400;
        assert_int_equal(aftp_store_write(&f->st, 7, off, data + off, n), AFTP_OK);
    }
    for (size_t off = 0; off < len; off += 1 << 20) {
        const uint8_t *view;
        size_t n = len - off < (1u << 20) ? len - off : (1u << 20);
        assert_int_equal(aftp_store_view(&f->st, 7, off, n, &view), AFTP_OK);
        assert_memory_equal(view, data + off, n);
    }
    assert_int_equal(aftp_store_close(&f->st, 7, 1), AFTP_OK);
    read_whole(f->dfd, "big", back, len);
    assert_memory_equal(back, data, len);
    free(data);
    free(back);
}

#define MIB (UINT64_C(1) << 20)

/* Bytes of the open temporary file that have space allocated. */
static uint64_t allocated(const aftp_store *st)
{
    struct stat sb;
    assert_int_equal(fstat(st->fd, &sb), 0);
    return (uint64_t)sb.st_blocks * 512;
}

static void write_at(aftp_store *st, uint64_t off, int expect)
{
    uint8_t block[1400];
    io_test_pattern(block, sizeof block, (uint32_t)off);
    assert_int_equal(aftp_store_write(st, 7, off, block, sizeof block), expect);
}

static void test_space_reserved_as_data_arrives(void **state)
{
    /* Reserving a whole file at the offer costs 0.25 s per GiB on tmpfs
     * (every page is zeroed) before any data may flow. */
    fixture *f = *state;
    aftp_file_info info = file_info("big", 64 * MIB);
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    assert_true(allocated(&f->st) < 32 * MIB);
    write_at(&f->st, 40 * MIB, AFTP_OK);
    assert_true(allocated(&f->st) >= 40 * MIB + 1400);
    uint8_t *place; /* bytes lent for a payload are reserved before it lands */
    assert_int_equal(aftp_store_place(&f->st, 7, 56 * MIB, 1400, &place), AFTP_OK);
    assert_true(allocated(&f->st) >= 56 * MIB + 1400);
    write_at(&f->st, 64 * MIB - 1400, AFTP_OK);
    assert_true(allocated(&f->st) >= 64 * MIB);
    assert_int_equal(aftp_store_close(&f->st, 7, 0), AFTP_OK);
}

static void test_disk_filled_during_transfer_fails_cleanly(void **state)
{
    /* The offer fits; then another writer takes the space the file has not
     * reserved yet. The write that needs it fails (no SIGBUS from a page
     * fault), and the discarded file leaves only the other writer's. */
    fixture *f = *state;
    if (!io_test_mount_private_tmpfs(f->dir, "32m"))
        skip(); /* needs root for a mount namespace */
    int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    aftp_store st;
    aftp_store_init(&st, dfd, 0);
    aftp_file_info info = file_info("big", 24 * MIB);
    assert_int_equal(aftp_store_open(&st, &info), AFTP_OK);
    int other = openat(dfd, "other", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_int_equal(fallocate(other, 0, 0, (off_t)(12 * MIB)), 0);
    close(other);
    write_at(&st, 0, AFTP_OK);
    write_at(&st, 24 * MIB - 1400, AFTP_ERR_NO_SPACE);
    assert_non_null(strstr(st.report.message, "space"));
    assert_int_equal(aftp_store_close(&st, 7, 0), AFTP_OK);
    assert_int_equal(io_test_count_entries(dfd), 1);
    aftp_store_fini(&st);
    close(dfd);
    assert_int_equal(umount2(f->dir, MNT_DETACH), 0);
}

/* The store learns the process's umask without changing it, and applies
 * it to the committed file's mode. */
static void test_umask_read_and_applied(void **state)
{
    fixture *f = *state;
    mode_t before = umask(027);
    aftp_store_fini(&f->st);
    aftp_store_init(&f->st, f->dfd, 0);
    assert_int_equal(f->st.umask, 027);
    assert_int_equal(umask(027), 027); /* left as it was */
    aftp_file_info info = file_info("masked.bin", 10);
    uint8_t data[10] = {0};
    assert_int_equal(aftp_store_open(&f->st, &info), AFTP_OK);
    write_blocks(&f->st, data, sizeof data);
    assert_int_equal(aftp_store_close(&f->st, info.file_id, 1), AFTP_OK);
    struct stat sb;
    assert_int_equal(fstatat(f->dfd, "masked.bin", &sb, 0), 0);
    assert_int_equal(sb.st_mode & 0777, 0640 & ~027);
    umask(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_makes_final_name_appear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_umask_read_and_applied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_placed_bytes_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discard_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fini_discards_open_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_file_at_final_name_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_file_refused_without_overwrite, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_planted_symlink_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsafe_path_rejected_before_any_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_space_fails_at_open_leaving_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bounds_and_ids_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_file_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_file_released_chunks_keep_data, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_space_reserved_as_data_arrives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_filled_during_transfer_fails_cleanly, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
