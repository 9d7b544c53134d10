/* Peer path validation and the no-symlink walk beneath the destination. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_path.h"
#include "io_testutil.h"
#include "proto/aftp_wire.h"

static void test_accepts_plain_relative_paths(void **state)
{
    (void)state;
    const char *ok[] = {"a", "file.bin", "dir/file", "a/b/c/d.txt", "..a", "a..", ".hidden",
                        "a/.b", "sp ace", "caf\xc3\xa9", "x...y", "-dash"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(aftp_path_check(ok[i]), AFTP_OK);
}

static void test_rejects_unsafe_paths(void **state)
{
    (void)state;
    const char *bad[] = {"", "/abs", "/", "..", ".", "../x", "a/../b", "a/..", "a//b", "a/",
                         "./a", "a/./b", "tab\there", "nl\nx", "esc\x1b[2J", "del\x7f",
                         "dir/\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(aftp_path_check(bad[i]), AFTP_ERR_PATH_REJECTED);
}

static void test_rejects_overlong(void **state)
{
    (void)state;
    char comp[AFTP_PATH_MAX_COMPONENT + 2];
    memset(comp, 'x', sizeof comp - 1);
    comp[sizeof comp - 1] = '\0';
    assert_int_equal(aftp_path_check(comp), AFTP_ERR_PATH_REJECTED);
    comp[AFTP_PATH_MAX_COMPONENT] = '\0';
    assert_int_equal(aftp_path_check(comp), AFTP_OK);

    char *whole = malloc(AFTP_WIRE_MAX_PATH + 2);
    for (size_t i = 0; i < AFTP_WIRE_MAX_PATH + 1; i++)
        whole[i] = i % 2 ? '/' : 'a';
    whole[AFTP_WIRE_MAX_PATH + 1] = '\0';
    whole[AFTP_WIRE_MAX_PATH] = 'a'; /* ends in a name, but one byte too long */
    assert_int_equal(aftp_path_check(whole), AFTP_ERR_PATH_REJECTED);
    whole[AFTP_WIRE_MAX_PATH - 1] = '\0'; /* 4095 bytes: "a/a/.../a" */
    assert_int_equal(aftp_path_check(whole), AFTP_OK);
    free(whole);
}

static void test_open_parent_creates_and_walks(void **state)
{
    (void)state;
    int dfd;
    char *dir = io_test_mkdtemp(&dfd);
    int parent = -1;
    const char *leaf = NULL;
    assert_int_equal(aftp_path_open_parent(dfd, "x/y/file", &parent, &leaf), AFTP_OK);
    assert_string_equal(leaf, "file");
    struct stat sb;
    assert_int_equal(fstatat(dfd, "x/y", &sb, 0), 0);
    assert_true(S_ISDIR(sb.st_mode));
    int probe = openat(parent, "probe", O_CREAT | O_WRONLY, 0600);
    assert_true(probe >= 0);
    close(probe);
    assert_true(io_test_exists(dfd, "x/y/probe"));
    close(parent);

    assert_int_equal(aftp_path_open_parent(dfd, "top", &parent, &leaf), AFTP_OK);
    assert_string_equal(leaf, "top");
    close(parent);
    io_test_rmtree(dir);
    close(dfd);
    free(dir);
}

static void test_open_parent_refuses_symlinked_directory(void **state)
{
    (void)state;
    int dfd, ofd;
    char *dir = io_test_mkdtemp(&dfd);
    char *outside = io_test_mkdtemp(&ofd);
    assert_int_equal(symlinkat(outside, dfd, "link"), 0);
    int parent = -1;
    const char *leaf = NULL;
    assert_int_equal(aftp_path_open_parent(dfd, "link/file", &parent, &leaf),
                     AFTP_ERR_PATH_REJECTED);
    assert_int_equal(parent, -1);
    assert_int_equal(io_test_count_entries(ofd), 0);
    io_test_rmtree(dir);
    io_test_rmtree(outside);
    close(dfd);
    close(ofd);
    free(dir);
    free(outside);
}

static void test_printable_escapes_controls(void **state)
{
    (void)state;
    char buf[64];
    aftp_path_printable("a\x1b[2Jb\\c\n", buf, sizeof buf);
    assert_string_equal(buf, "a\\x1b[2Jb\\x5cc\\x0a");
    aftp_path_printable("abcdef", buf, 4);
    assert_string_equal(buf, "abc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_plain_relative_paths),
        cmocka_unit_test(test_rejects_unsafe_paths),
        cmocka_unit_test(test_rejects_overlong),
        cmocka_unit_test(test_open_parent_creates_and_walks),
        cmocka_unit_test(test_open_parent_refuses_symlinked_directory),
        cmocka_unit_test(test_printable_escapes_controls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
