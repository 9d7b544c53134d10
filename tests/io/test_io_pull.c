/*
 * Pull through the real drivers (spec 9.15): aftp_pull_run fetches from
 * aftp_serve_run (in another thread) over loopback UDP; the server's
 * storage is aftp_pullsrc beneath its directory, the client's
 * aftp_treestore beneath DEST. A tree and a file arrive byte-exact with
 * their metadata; hostile paths are refused one by one, each with its
 * error, and nothing outside the root is read; a directory in DEST where
 * the server offers a file is left alone and the entry fails.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_pull.h"
#include "aftp_serve.h"
#include "io_testutil.h"

#define WINDOW 64u

typedef struct pull_server {
    int dirfd;
    struct sockaddr_in addr;
    int listening;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    atomic_int stop;
    aftp_io_result res;
} pull_server;

static void on_listening(void *app, const struct sockaddr *local)
{
    pull_server *s = app;
    pthread_mutex_lock(&s->lock);
    memcpy(&s->addr, local, sizeof s->addr);
    s->listening = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void *serve_thread(void *arg)
{
    pull_server *s = arg;
    struct sockaddr_in any = io_test_loopback(0);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&any, .listen_len = sizeof any,
                         .dirfd = s->dirfd, .once = 1, .pipeline_window = WINDOW,
                         .security = {.cipher = AFTP_CIPHER_NONE},
                         .hooks = {.app = s, .interrupt = &s->stop},
                         .on_listening = on_listening};
    aftp_serve_run(&o, &s->res);
    return NULL;
}

static void server_start(pull_server *s, int dirfd)
{
    memset(s, 0, sizeof *s);
    s->dirfd = dirfd;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, serve_thread, s), 0);
    pthread_mutex_lock(&s->lock);
    while (!s->listening)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void server_join(pull_server *s)
{
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
}

typedef struct verdicts {
    int count;
    int errors[8];
} verdicts;

static void on_path(void *app, const aftp_pull_path *p)
{
    verdicts *v = app;
    assert_true(p->index < 8);
    v->errors[p->index] = p->error;
    v->count++;
}

static int pull(pull_server *s, const char *const *paths, uint32_t n, int dest, verdicts *v,
                aftp_io_result *res)
{
    aftp_pull_opts o = {.paths = paths, .path_count = n, .dest_fd = dest,
                        .flags = AFTP_ENTRY_RESUME, .pipeline_window = WINDOW,
                        .peer = (struct sockaddr *)&s->addr, .peer_len = sizeof s->addr,
                        .security = {.cipher = AFTP_CIPHER_NONE}, .hooks = {.app = v},
                        .on_path = on_path};
    int rc = aftp_pull_run(&o, res);
    server_join(s);
    return rc;
}

/* scratch/srv/{top/{a.bin,sub/b.bin,empty/},one.bin}, scratch/secret,
 * scratch/dst. */
static void make_server_tree(void **state, int *srv, int *dst)
{
    int scratch = io_test_scratch_fd(state);
    assert_int_equal(mkdirat(scratch, "srv", 0755), 0);
    assert_int_equal(mkdirat(scratch, "dst", 0755), 0);
    io_test_write_file(scratch, "secret", 1000, 5, 0600, 0);
    *srv = openat(scratch, "srv", O_RDONLY | O_DIRECTORY);
    *dst = openat(scratch, "dst", O_RDONLY | O_DIRECTORY);
    assert_true(*srv >= 0 && *dst >= 0);
    assert_int_equal(mkdirat(*srv, "top", 0750), 0);
    assert_int_equal(mkdirat(*srv, "top/sub", 0755), 0);
    assert_int_equal(mkdirat(*srv, "top/empty", 0700), 0);
    io_test_write_file(*srv, "top/a.bin", 3000000, 1, 0640, 1600000000123456789);
    io_test_write_file(*srv, "top/sub/b.bin", 70001, 2, 0600, 1500000000000000007);
    io_test_write_file(*srv, "one.bin", 12345, 3, 0644, 1700000000000000000);
}

static void test_pull_tree_and_file(void **state)
{
    int srv, dst;
    pull_server s;
    verdicts v = {0};
    aftp_io_result res;
    make_server_tree(state, &srv, &dst);
    server_start(&s, srv);
    const char *paths[] = {"top", "one.bin"};
    assert_int_equal(pull(&s, paths, 2, dst, &v, &res), AFTP_OK);
    assert_int_equal(s.res.error, AFTP_OK);
    assert_int_equal(v.count, 2);
    assert_int_equal(v.errors[0], AFTP_OK);
    char src[700];
    snprintf(src, sizeof src, "%s/srv/top", io_test_scratch_path(state));
    assert_int_equal(io_test_expect_tree_copies(src, dst), 5);
    snprintf(src, sizeof src, "%s/srv/one.bin", io_test_scratch_path(state));
    assert_int_equal(io_test_expect_tree_copies(src, dst), 1);
    close(srv);
    close(dst);
}

/* Each hostile path refused with its own error; the good one served. */
static void test_pull_hostile_paths(void **state)
{
    int srv, dst;
    pull_server s;
    verdicts v = {0};
    aftp_io_result res;
    make_server_tree(state, &srv, &dst);
    assert_int_equal(symlinkat("../secret", srv, "out"), 0);
    assert_int_equal(mkfifoat(srv, "fifo", 0600), 0);
    server_start(&s, srv);
    const char *paths[] = {"../secret", "/etc/passwd", "out", "fifo", "nothing", "one.bin"};
    assert_int_equal(pull(&s, paths, 6, dst, &v, &res), AFTP_ERR_PATH_REJECTED);
    assert_non_null(strstr(res.message, "../secret"));
    assert_int_equal(v.count, 6);
    for (int i = 0; i < 4; i++)
        assert_int_equal(v.errors[i], AFTP_ERR_PATH_REJECTED);
    assert_int_equal(v.errors[4], AFTP_ERR_NOT_FOUND);
    assert_int_equal(v.errors[5], AFTP_OK);
    assert_int_equal(io_test_count_entries(dst), 1); /* one.bin alone */
    assert_true(io_test_exists(dst, "one.bin"));
    close(srv);
    close(dst);
}

/* DEST holds a directory where the server offers a file: it stays, the
 * entry fails. */
static void test_pull_file_onto_a_directory(void **state)
{
    int srv, dst;
    pull_server s;
    verdicts v = {0};
    aftp_io_result res;
    make_server_tree(state, &srv, &dst);
    assert_int_equal(mkdirat(dst, "one.bin", 0755), 0);
    server_start(&s, srv);
    const char *paths[] = {"one.bin"};
    assert_int_not_equal(pull(&s, paths, 1, dst, &v, &res), AFTP_OK);
    assert_int_equal(v.count, 1);
    assert_int_equal(v.errors[0], AFTP_OK); /* served: the client's storage refused it */
    struct stat sb;
    assert_int_equal(fstatat(dst, "one.bin", &sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(sb.st_mode));
    close(srv);
    close(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_pull_tree_and_file),
        IO_TEST_SCRATCH(test_pull_hostile_paths),
        IO_TEST_SCRATCH(test_pull_file_onto_a_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
