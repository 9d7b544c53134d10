/* The server's storage for a pull (spec 14.10): each requested path
 * resolved beneath the root or refused with its own error (hostile text,
 * a link on the path, out of the root or not, nothing there, a FIFO, a
 * device, a file named as a directory), and the served paths walked into
 * a sender's entries, a trailing '/' serving a directory's contents. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_pullsrc.h"
#include "io_testutil.h"

/* root/ holds top.bin and d/{in.bin,sub/}, and beside root a secret. */
static int make_root(void **state)
{
    int scratch = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(scratch, "root", 0755), 0);
    io_test_write_file(scratch, "secret", 100, 9, 0600, 0);
    int root = openat(scratch, "root", O_RDONLY | O_DIRECTORY);
    assert_true(root >= 0);
    io_test_write_file(root, "top.bin", 5000, 1, 0644, 0);
    assert_int_equal(mkdirat(root, "d", 0755), 0);
    io_test_write_file(root, "d/in.bin", 3000, 2, 0640, 0);
    assert_int_equal(mkdirat(root, "d/sub", 0700), 0);
    return root;
}

static int verdict(int root, const char *path)
{
    aftp_pullsrc p;
    aftp_pullsrc_init(&p, root, NULL, NULL);
    int rc = aftp_pullsrc_path(&p, 0, path, 0);
    if (rc != AFTP_OK)
        assert_non_null(strstr(p.message, "refused"));
    aftp_pullsrc_fini(&p);
    return rc;
}

static void test_hostile_text_is_rejected(void **state)
{
    int root = make_root(state);
    static const char *const hostile[] = {"", "/", "..", "../secret", "d/../../secret",
                                          "/etc/passwd", "./top.bin", "d//in.bin", "d/./in.bin",
                                          "d\\in.bin", "d/in\n.bin", "d//"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++)
        assert_int_equal(verdict(root, hostile[i]), AFTP_ERR_PATH_REJECTED);
    close(root);
}

static void test_links_on_the_path_are_rejected(void **state)
{
    int root = make_root(state);
    assert_int_equal(symlinkat("../secret", root, "out"), 0);
    assert_int_equal(symlinkat("/etc", root, "etc"), 0);
    assert_int_equal(symlinkat("d", root, "inside"), 0);
    assert_int_equal(verdict(root, "out"), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(verdict(root, "etc/passwd"), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(verdict(root, "etc/"), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(verdict(root, "inside/in.bin"), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(verdict(root, "inside"), AFTP_ERR_PATH_REJECTED);
    close(root);
}

static void test_missing_and_odd_files(void **state)
{
    int root = make_root(state);
    assert_int_equal(mkfifoat(root, "fifo", 0600), 0);
    assert_int_equal(verdict(root, "nothing"), AFTP_ERR_NOT_FOUND);
    assert_int_equal(verdict(root, "d/nothing/x"), AFTP_ERR_NOT_FOUND);
    assert_int_equal(verdict(root, "top.bin/"), AFTP_ERR_NOT_FOUND); /* a file named as a dir */
    assert_int_equal(verdict(root, "top.bin/x"), AFTP_ERR_NOT_FOUND);
    assert_int_equal(verdict(root, "fifo"), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(verdict(root, "top.bin"), AFTP_OK);
    assert_int_equal(verdict(root, "d"), AFTP_OK);
    assert_int_equal(verdict(root, "d/"), AFTP_OK);
    if (mknodat(root, "null", S_IFCHR | 0600, makedev(1, 3)) == 0)
        assert_int_equal(verdict(root, "null"), AFTP_ERR_PATH_REJECTED);
    close(root);
}

/* A sender to add entries to: nothing is sent in this test. */
static aftp_sender *new_sender(aftp_pullsrc *p)
{
    aftp_sender_settings set;
    aftp_sender_settings_default(&set);
    set.conn_id = 7;
    set.max_datagram = 1452;
    set.storage = &aftp_pullsrc_ops;
    set.user = p;
    set.pipeline_window = 64;
    set.security.cipher = AFTP_CIPHER_NONE;
    aftp_sender *s = NULL;
    assert_int_equal(aftp_sender_new(&set, 1, &s), AFTP_OK);
    return s;
}

static void expect_bytes(aftp_pullsrc *p, uint32_t id, size_t len, uint32_t seed)
{
    uint8_t want[5000];
    const uint8_t *got;
    io_test_pattern(want, len, seed);
    assert_int_equal(aftp_treesend_view(&p->tree, id, 0, len, &got), AFTP_OK);
    assert_memory_equal(got, want, len);
}

static char noticed[256];
static int noticed_error;

static void on_notice(void *user, const char *local, int err, const char *why)
{
    (void)user, (void)why;
    assert_true(err < 0);
    snprintf(noticed, sizeof noticed, "%s", local);
    noticed_error = err;
}

/* "d" gives d, d/in.bin, d/sub; "d/sub/" and "d/" their contents; "top.bin" one file;
 * entries numbered in walk order, refused paths adding none; a FIFO
 * inside is skipped, its notice naming it beneath the root whichever
 * walk finds it. */
static void test_served_paths_are_walked(void **state)
{
    int root = make_root(state);
    aftp_pullsrc p;
    assert_int_equal(mkfifoat(root, "d/sub/fifo", 0600), 0);
    aftp_pullsrc_init(&p, root, on_notice, NULL);
    aftp_sender *s = new_sender(&p);
    assert_int_equal(aftp_pullsrc_feed(&p, s), AFTP_OK);
    assert_int_equal(p.next_id, 1); /* nothing before the request */
    assert_int_equal(aftp_pullsrc_path(&p, 0, "d", AFTP_ENTRY_OVERWRITE), AFTP_OK);
    assert_int_equal(aftp_pullsrc_path(&p, 1, "../secret", AFTP_ENTRY_OVERWRITE),
                     AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_pullsrc_path(&p, 2, "top.bin", AFTP_ENTRY_OVERWRITE), AFTP_OK);
    assert_int_equal(aftp_pullsrc_path(&p, 3, "d/sub/", AFTP_ENTRY_OVERWRITE), AFTP_OK);
    assert_int_equal(aftp_pullsrc_path(&p, 4, "d/", AFTP_ENTRY_OVERWRITE), AFTP_OK);
    assert_int_equal(aftp_pullsrc_feed(&p, s), AFTP_OK);
    assert_true(p.done);
    assert_int_equal(p.next_id, 1 + 3 + 1 + 2); /* d/sub/ holds nothing but the FIFO */
    expect_bytes(&p, 2, 3000, 2); /* d/in.bin */
    expect_bytes(&p, 4, 5000, 1); /* top.bin */
    expect_bytes(&p, 5, 3000, 2); /* in.bin, from "d/" */
    assert_string_equal(noticed, "d/sub/fifo"); /* beneath the root, not a descriptor */
    aftp_sender_del(s);
    aftp_pullsrc_fini(&p);
    close(root);
}


/* scratch/outside/ beside the root, holding in.bin (3000 bytes, as
 * root/d/in.bin) and watched: the inotify descriptor reports any open or
 * read of it or in it. */
static int watch_outside(void **state)
{
    int scratch = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(scratch, "outside", 0755), 0);
    io_test_write_file(scratch, "outside/in.bin", 3000, 7, 0644, 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/outside", io_test_scratch_path(state));
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(in >= 0);
    assert_true(inotify_add_watch(in, path, IN_OPEN | IN_ACCESS) >= 0);
    return in;
}

static void expect_outside_untouched(int in)
{
    char buf[4096];
    errno = 0;
    assert_int_equal(read(in, buf, sizeof buf), -1); /* no event: nothing opened there */
    assert_int_equal(errno, EAGAIN);
    close(in);
}

/* name beneath the root becomes a link to ../outside (or to target). */
static void swap_for_link(int root, const char *name, const char *target)
{
    char moved[64];
    snprintf(moved, sizeof moved, "%s.moved", name);
    assert_int_equal(renameat(root, name, root, moved), 0);
    assert_int_equal(symlinkat(target, root, name), 0);
}

/* Served paths checked, then swapped for links out of the root before the
 * walk starts: the walk offers nothing, notices each as PATH_REJECTED and
 * opens nothing outside. */
static void test_served_path_swapped_before_the_walk(void **state)
{
    int root = make_root(state);
    int in = watch_outside(state);
    aftp_pullsrc p;
    aftp_pullsrc_init(&p, root, on_notice, NULL);
    aftp_sender *s = new_sender(&p);
    assert_int_equal(aftp_pullsrc_path(&p, 0, "d", 0), AFTP_OK);
    assert_int_equal(aftp_pullsrc_path(&p, 1, "top.bin", 0), AFTP_OK);
    swap_for_link(root, "d", "../outside");
    swap_for_link(root, "top.bin", "../outside/in.bin");
    noticed_error = AFTP_OK;
    assert_int_equal(aftp_pullsrc_feed(&p, s), AFTP_OK);
    assert_true(p.done);
    assert_int_equal(p.next_id, 1); /* no entry offered */
    assert_int_equal(noticed_error, AFTP_ERR_PATH_REJECTED);
    assert_string_equal(noticed, "top.bin");
    expect_outside_untouched(in);
    aftp_sender_del(s);
    aftp_pullsrc_fini(&p);
    close(root);
}

/* A directory of a served tree swapped for a link out of the root after
 * the walk offered its file, before the file is read: the read fails
 * PATH_REJECTED (its entry is abandoned) and opens nothing outside. */
static void test_directory_swapped_before_the_read(void **state)
{
    int root = make_root(state);
    int in = watch_outside(state);
    aftp_pullsrc p;
    const uint8_t *got;
    aftp_pullsrc_init(&p, root, NULL, NULL);
    aftp_sender *s = new_sender(&p);
    assert_int_equal(aftp_pullsrc_path(&p, 0, "d", 0), AFTP_OK);
    assert_int_equal(aftp_pullsrc_feed(&p, s), AFTP_OK);
    assert_int_equal(p.next_id, 4); /* d, d/in.bin, d/sub */
    swap_for_link(root, "d", "../outside");
    assert_int_equal(aftp_treesend_view(&p.tree, 2, 0, 3000, &got), AFTP_ERR_PATH_REJECTED);
    assert_non_null(strstr(p.tree.message, "d/in.bin"));
    expect_outside_untouched(in);
    aftp_sender_del(s);
    aftp_pullsrc_fini(&p);
    close(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_hostile_text_is_rejected),
        IO_TEST_SCRATCH(test_links_on_the_path_are_rejected),
        IO_TEST_SCRATCH(test_missing_and_odd_files),
        IO_TEST_SCRATCH(test_served_paths_are_walked),
        IO_TEST_SCRATCH(test_served_path_swapped_before_the_walk),
        IO_TEST_SCRATCH(test_directory_swapped_before_the_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
