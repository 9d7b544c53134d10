/*
 * Pipelined mode through the real drivers (spec 9.14): a tree pushed by
 * aftp_push_run to aftp_serve_run (in another thread) over loopback UDP,
 * the sender's sources from aftp_treesend, the receiver's storage
 * aftp_treestore. A second push of the same tree with SYNC skips every
 * file: no DATA at all.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp/aftp_global.h"
#include "aftp_push.h"
#include "aftp_serve.h"
#include "aftp_treesend.h"
#include "io_testutil.h"

#define WINDOW 64u
#define SMALL_FILES 200u
#define BIG_FILE (UINT64_C(5) << 20)
/* top, a, a/b, a/b/c, empty, many: directories; the files beneath. */
#define TREE_DIRS 6u
#define TREE_FILES (SMALL_FILES + 1u)

typedef struct test_server {
    int dirfd;
    struct sockaddr_in addr; /* where it listens, once it does */
    int listening;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    atomic_int stop; /* a push that failed before its HELLO leaves the server waiting */
    unsigned window;
    aftp_io_result res;
    unsigned entries_ended, skipped;
} test_server;

static void on_listening(void *app, const struct sockaddr *local)
{
    test_server *s = app;
    pthread_mutex_lock(&s->lock);
    memcpy(&s->addr, local, sizeof s->addr);
    s->listening = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void on_server_event(void *app, const aftp_event *ev, const aftp_stats *st)
{
    test_server *s = app;
    (void)st;
    if (ev->type != AFTP_EV_ENTRY_END)
        return;
    s->entries_ended++;
    s->skipped += ev->verdict == AFTP_VERDICT_SKIP;
}

static void *serve_thread(void *arg)
{
    test_server *s = arg;
    struct sockaddr_in any = io_test_loopback(0);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&any, .listen_len = sizeof any,
                         .dirfd = s->dirfd, .once = 1, .pipeline_window = s->window,
                         .security = {.cipher = AFTP_CIPHER_NONE},
                         .hooks = {.app = s, .interrupt = &s->stop}, .on_listening = on_listening,
                         .on_session_event = on_server_event};
    aftp_serve_run(&o, &s->res);
    return NULL;
}

static void server_start(test_server *s, int dirfd, unsigned window)
{
    memset(s, 0, sizeof *s);
    s->dirfd = dirfd;
    s->window = window;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, serve_thread, s), 0);
    pthread_mutex_lock(&s->lock);
    while (!s->listening)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void write_file(int dirfd, const char *name, size_t size, uint32_t seed, mode_t mode,
                       int64_t mtime_s)
{
    io_test_write_file(dirfd, name, size, seed, mode, mtime_s * 1000000000 + 123456789);
}

/* top/{a/b/c/deep, empty/, many/f000..f199, big} beneath dirfd. */
static void make_tree(int dirfd)
{
    const char *dirs[] = {"top", "top/a", "top/a/b", "top/a/b/c", "top/empty", "top/many"};
    char name[64];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        assert_int_equal(mkdirat(dirfd, dirs[i], 0755), 0);
    for (unsigned i = 0; i + 1 < SMALL_FILES; i++) {
        snprintf(name, sizeof name, "top/many/f%03u", i);
        write_file(dirfd, name, 100 + i * 37, i, i % 2 ? 0640 : 0755, 1600000000 + i);
    }
    write_file(dirfd, "top/a/b/c/deep", 4321, 999, 0600, 1500000000);
    write_file(dirfd, "top/big", BIG_FILE, 7, 0644, 1700000000);
}

typedef struct push_count {
    unsigned entries_ended;
    const char *shrink; /* optional: truncated to 0 once DATA has gone out */
    unsigned window;    /* the pipeline window; 0: WINDOW */
    const char *src;    /* optional: count the descriptors open beneath it */
    int src_fds_most;
    const char *rewrite_path, *rewrite_local; /* optional: rewritten when accepted */
    int truncate;       /* with rewrite_*: truncated to half instead */
    unsigned failed;    /* entries that ended with an error */
    char failed_path[64], failed_message[512]; /* the first of them */
} push_count;

/* The source shrinks mid-transfer: the sender's next reads of its mapping
 * fault (SIGBUS), or its size check sees it. */
static void on_push_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    push_count *c = app;
    (void)now_ns;
    if (c->shrink != NULL && st->payload_bytes_sent > 0) {
        assert_int_equal(truncate(c->shrink, 0), 0);
        c->shrink = NULL;
    }
}

/* Descriptors of this process open on files beneath `dir`. */
static int count_fds_beneath(const char *dir)
{
    char link[300], target[600];
    size_t len = strlen(dir);
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
        ssize_t got = readlink(link, target, sizeof target - 1);
        n += got > (ssize_t)len && strncmp(target, dir, len) == 0 && target[len] == '/';
    }
    closedir(d);
    return n;
}

/* Other bytes written over `local`, its size and mtime put back: only
 * its ctime tells. */
static void rewrite_in_place(const char *local)
{
    struct stat sb;
    uint8_t other[100];
    memset(other, 0xa5, sizeof other);
    assert_int_equal(stat(local, &sb), 0);
    int fd = open(local, O_WRONLY);
    assert_int_equal(pwrite(fd, other, sizeof other, 0), (ssize_t)sizeof other);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    assert_int_equal(futimens(fd, times), 0);
    close(fd);
}

static void on_push_event(void *app, const aftp_event *ev)
{
    push_count *c = app;
    c->entries_ended += ev->type == AFTP_EV_ENTRY_END;
    if (c->rewrite_path != NULL && ev->type == AFTP_EV_FILE_START &&
        strcmp(ev->info->path, c->rewrite_path) == 0) {
        if (c->truncate)
            assert_int_equal(truncate(c->rewrite_local, 2048), 0);
        else
            rewrite_in_place(c->rewrite_local);
        c->rewrite_path = NULL;
    }
    if (c->src != NULL && ev->type == AFTP_EV_ENTRY_END && c->entries_ended % 16 == 0) {
        int fds = count_fds_beneath(c->src);
        c->src_fds_most = fds > c->src_fds_most ? fds : c->src_fds_most;
    }
}

static void on_push_entry(void *app, const aftp_push_entry *e)
{
    push_count *c = app;
    if (!e->ended || e->error == AFTP_OK || c->failed++ > 0)
        return;
    snprintf(c->failed_path, sizeof c->failed_path, "%s", e->path);
    snprintf(c->failed_message, sizeof c->failed_message, "%s", e->message);
}

/* Pushes SRC `src` to a fresh pipelined server writing into dst. */
static int push_tree_at(const char *src, int dst, unsigned flags, uint64_t rate_bps,
                        test_server *s, aftp_push_result *res, push_count *count)
{
    unsigned window = count->window ? count->window : WINDOW;
    server_start(s, dst, window);
    const char *files[] = {src};
    aftp_push_opts o = {.files = files, .file_count = 1, .pipeline_window = window,
                        .entry_flags = flags, .on_entry = on_push_entry,
                        .peer = (struct sockaddr *)&s->addr,
                        .peer_len = sizeof s->addr, .rate_bps = rate_bps,
                        .policy = AFTP_CC_FIXED, .security = {.cipher = AFTP_CIPHER_NONE},
                        .hooks = {.on_event = on_push_event, .on_tick = on_push_tick,
                                  .app = count}};
    int rc = aftp_push_run(&o, res);
    if (rc != AFTP_OK)
        atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    return rc;
}

/* Pushes at 1 Gbit/s, expecting success (count's options kept). */
static void push_tree(const char *src, int dst, unsigned flags, test_server *s,
                      aftp_push_result *res, push_count *count)
{
    count->entries_ended = 0;
    count->shrink = NULL;
    int rc = push_tree_at(src, dst, flags, UINT64_C(1000000000), s, res, count);
    if (rc != AFTP_OK || s->res.error != AFTP_OK)
        print_message("push: %s; serve: %s\n", res->io.message, s->res.message);
    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(s->res.error, AFTP_OK);
}

static void test_tree_then_sync(void **state)
{
    int srcfd, dst = io_test_scratch_fd(state);
    char *srcdir = io_test_mkdtemp(&srcfd), src[512];
    make_tree(srcfd);
    snprintf(src, sizeof src, "%s/top", srcdir);
    test_server s;
    aftp_push_result res;
    push_count count = {0};

    push_tree(src, dst, 0, &s, &res, &count);
    assert_int_equal(io_test_expect_tree_copies(src, dst), TREE_DIRS + TREE_FILES);
    assert_int_equal(count.entries_ended, TREE_DIRS + TREE_FILES);
    assert_int_equal(s.entries_ended, TREE_DIRS + TREE_FILES);
    assert_int_equal(res.io.stats.payload_bytes_sent - res.io.stats.payload_bytes_retransmitted,
                     BIG_FILE + 4321 + (SMALL_FILES - 1) * 100 +
                         37 * (uint64_t)(SMALL_FILES - 1) * (SMALL_FILES - 2) / 2);
    print_message("first push: receiver sent %llu datagrams for %u entries\n",
                  (unsigned long long)s.res.stats.packets_sent, s.entries_ended);

    push_tree(src, dst, AFTP_ENTRY_SYNC, &s, &res, &count);
    assert_int_equal(s.skipped, TREE_FILES);
    assert_int_equal(res.io.stats.payload_bytes_sent, 0);
    /* Every round trip takes a datagram of the receiver's: the whole
     * session, handshake and close included, took a handful, where
     * one-file mode answers each file on its own. */
    assert_true(s.res.stats.packets_sent * 10 < TREE_FILES);
    print_message("sync push: receiver sent %llu datagrams for %u entries\n",
                  (unsigned long long)s.res.stats.packets_sent, s.entries_ended);
    io_test_rmtree(srcdir);
    free(srcdir);
    close(srcfd);
}

/* A source truncated while its entry is in flight: the session fails
 * with SOURCE_CHANGED, saying so, and the process lives (the guard over
 * every mapped source caught the faulting reads). */
static void test_source_shrinks_mid_tree(void **state)
{
    int srcfd, dst = io_test_scratch_fd(state);
    char *srcdir = io_test_mkdtemp(&srcfd), src[512], big[600];
    assert_int_equal(mkdirat(srcfd, "top", 0755), 0);
    write_file(srcfd, "top/big", BIG_FILE, 7, 0644, 1700000000);
    snprintf(src, sizeof src, "%s/top", srcdir);
    snprintf(big, sizeof big, "%s/big", src);
    test_server s;
    aftp_push_result res;
    push_count count = {.shrink = big};
    /* ~1 s for the file: ticks come every 250 ms */
    int rc = push_tree_at(src, dst, 0, UINT64_C(40000000), &s, &res, &count);
    assert_null(count.shrink);
    print_message("shrunk source: %s\n", res.io.message);
    assert_int_equal(rc, AFTP_ERR_SOURCE_CHANGED);
    assert_false(io_test_exists(dst, "top/big"));
    io_test_rmtree(srcdir);
    free(srcdir);
    close(srcfd);
}

/* A file of a tree changed by another program between its offer and its
 * first read, rewritten in place (same size and mtime: its ctime moved)
 * or truncated, is another version than the entry offered: that entry
 * alone fails (spec 9.14.3, ABANDON), saying which file; no copy of it is
 * placed; the session ends OK and the rest of the tree arrives. */
static void changed_before_first_read(void **state, int truncated)
{
    int srcfd, dst = io_test_scratch_fd(state);
    char *srcdir = io_test_mkdtemp(&srcfd), src[512], local[600];
    assert_int_equal(mkdirat(srcfd, "top", 0755), 0);
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "top/a%d", i);
        write_file(srcfd, name, 4096, (uint32_t)i, 0644, 1600000000);
    }
    snprintf(src, sizeof src, "%s/top", srcdir);
    snprintf(local, sizeof local, "%s/a5", src);
    test_server s;
    aftp_push_result res;
    push_count count = {.rewrite_path = "top/a5", .rewrite_local = local,
                        .truncate = truncated};
    int rc = push_tree_at(src, dst, 0, UINT64_C(1000000000), &s, &res, &count);
    print_message("changed source: %s: %s\n", count.failed_path, count.failed_message);
    assert_null(count.rewrite_path);
    /* Each side's first failed entry: the receiver heard the sender's
     * error; both ended every entry, the session went on after it. */
    assert_int_equal(rc, AFTP_ERR_SOURCE_CHANGED);
    assert_int_equal(s.res.error, AFTP_ERR_SOURCE_CHANGED);
    assert_int_equal(s.res.files_ok, 9);
    assert_int_equal(s.entries_ended, 1 + 10);
    assert_int_equal(count.entries_ended, 1 + 10);
    assert_int_equal(count.failed, 1);
    assert_string_equal(count.failed_path, "top/a5");
    assert_non_null(strstr(count.failed_message, local));
    assert_false(io_test_exists(dst, "top/a5"));
    /* The rest byte-exact, with their metadata: compared without a5
     * (top's mtime put back after the unlink). */
    struct stat top;
    assert_int_equal(stat(src, &top), 0);
    assert_int_equal(unlink(local), 0);
    struct timespec times[2] = {top.st_atim, top.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, src, times, 0), 0);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 1 + 9);
    io_test_rmtree(srcdir);
    free(srcdir);
    close(srcfd);
}

static void test_source_changed_before_its_first_read(void **state)
{
    changed_before_first_read(state, 0);
}

static void test_source_truncated_mid_tree(void **state)
{
    changed_before_first_read(state, 1);
}

/* ---- a window above the sender's open-file cap ---- */

#define LARGE_SIZE (AFTP_TREESEND_SMALL_MAX + 16000u) /* mapped, not buffered */
/* argv[1..3] when given, for a run to measure */
static unsigned many_small = 3000, many_large = AFTP_TREESEND_MAX_OPEN + 44u, big_window = 4096;

/* top/many/dNN/fNNNN (4 KiB each, 100 per directory) and top/large/lNNN
 * beneath dirfd; returns the entries, top included. */
static size_t make_many(int dirfd)
{
    char name[64];
    size_t dirs = 3;
    assert_int_equal(mkdirat(dirfd, "top", 0755), 0);
    assert_int_equal(mkdirat(dirfd, "top/many", 0755), 0);
    assert_int_equal(mkdirat(dirfd, "top/large", 0755), 0);
    for (unsigned i = 0; i < many_small; i++) {
        if (i % 100 == 0) {
            snprintf(name, sizeof name, "top/many/d%03u", i / 100);
            assert_int_equal(mkdirat(dirfd, name, 0755), 0);
            dirs++;
        }
        snprintf(name, sizeof name, "top/many/d%03u/f%05u", i / 100, i);
        write_file(dirfd, name, 4096, i, 0644, 1600000000 + i);
    }
    for (unsigned i = 0; i < many_large; i++) {
        snprintf(name, sizeof name, "top/large/l%03u", i);
        write_file(dirfd, name, LARGE_SIZE, 50000 + i, 0644, 1600000000 + i);
    }
    return dirs + many_small + many_large;
}

static double seconds_of(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* A window of 4096 over thousands of small files and more large ones than
 * the sender may hold open: every entry arrives byte-exact, and the
 * descriptors open on the sources never exceed the sender's cap (one more
 * for the moment of a small file's read). Prints the sender's CPU time
 * and the wall time. */
static void test_window_above_open_cap(void **state)
{
    int srcfd, dst = io_test_scratch_fd(state);
    char *srcdir = io_test_mkdtemp(&srcfd), src[512];
    size_t entries = make_many(srcfd);
    snprintf(src, sizeof src, "%s/top", srcdir);
    test_server s;
    aftp_push_result res;
    push_count count = {.window = big_window, .src = src};
    struct rusage before, after;
    struct timespec t0, t1;
    getrusage(RUSAGE_THREAD, &before);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    push_tree(src, dst, 0, &s, &res, &count);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_THREAD, &after);
    print_message("%zu entries (%u x 4 KiB, %u x %u bytes), window %u: sender CPU %.3f s user "
                  "+ %.3f s system, wall %.3f s; at most %d descriptors on the sources\n",
                  entries, many_small, many_large, (unsigned)LARGE_SIZE, big_window,
                  seconds_of(after.ru_utime) - seconds_of(before.ru_utime),
                  seconds_of(after.ru_stime) - seconds_of(before.ru_stime),
                  (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
                  count.src_fds_most);
    assert_int_equal(count.entries_ended, entries);
    assert_int_equal(s.entries_ended, entries);
    assert_int_equal(io_test_expect_tree_copies(src, dst), entries);
    assert_true(count.src_fds_most <= (int)AFTP_TREESEND_MAX_OPEN + 1);
    io_test_rmtree(srcdir);
    free(srcdir);
    close(srcfd);
}

/* ---- sparse files (spec 6.13, flag HOLES) ---- */

#define SPARSE_SIZE (UINT64_C(64) << 20)
/* 1 MiB of data in three places, the middle one off page boundaries. */
static const struct {
    uint64_t off, len;
} sparse_data[] = {{UINT64_C(1) << 20, 512u << 10},
                   {(UINT64_C(30) << 20) + 1000, 256u << 10},
                   {SPARSE_SIZE - (256u << 10), 256u << 10}};

/* dirfd/name: SPARSE_SIZE bytes, holes but for sparse_data. Returns the
 * bytes of data it holds. */
static uint64_t write_sparse(int dirfd, const char *name)
{
    uint64_t data = 0;
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)SPARSE_SIZE), 0);
    for (size_t i = 0; i < sizeof sparse_data / sizeof sparse_data[0]; i++) {
        uint8_t *buf = malloc(sparse_data[i].len);
        assert_non_null(buf);
        io_test_pattern(buf, sparse_data[i].len, (uint32_t)i + 1);
        assert_int_equal(pwrite(fd, buf, sparse_data[i].len, (off_t)sparse_data[i].off),
                         (ssize_t)sparse_data[i].len);
        data += sparse_data[i].len;
        free(buf);
    }
    close(fd);
    return data;
}

static uint64_t allocated(int dirfd, const char *name)
{
    struct stat sb;
    assert_int_equal(fstatat(dirfd, name, &sb, 0), 0);
    return (uint64_t)sb.st_blocks * 512;
}

/* A 64 MiB file holding 1 MiB of data: only about the data crosses the
 * network, and it arrives byte-exact and as sparse as it left. */
static void test_sparse_file_arrives_sparse(void **state)
{
    int srcfd, dst = io_test_scratch_fd(state);
    char *srcdir = io_test_mkdtemp(&srcfd), src[512];
    assert_int_equal(mkdirat(srcfd, "vm", 0755), 0);
    uint64_t data = write_sparse(srcfd, "vm/disk.img");
    if (allocated(srcfd, "vm/disk.img") >= SPARSE_SIZE / 2) {
        io_test_rmtree(srcdir);
        free(srcdir);
        close(srcfd);
        skip(); /* a file system without holes here */
    }
    snprintf(src, sizeof src, "%s/vm", srcdir);
    test_server s;
    aftp_push_result res;
    push_count count = {0};
    push_tree(src, dst, 0, &s, &res, &count);
    uint64_t sent = res.io.stats.payload_bytes_sent - res.io.stats.payload_bytes_retransmitted;
    uint64_t stored = allocated(dst, "vm/disk.img");
    print_message("sparse file of %llu bytes with %llu of data: %llu DATA payload bytes sent, "
                  "%llu bytes allocated at the source, %llu at the destination\n",
                  (unsigned long long)SPARSE_SIZE, (unsigned long long)data,
                  (unsigned long long)sent, (unsigned long long)allocated(srcfd, "vm/disk.img"),
                  (unsigned long long)stored);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 2);
    /* The data, plus the blocks a data extent's page rounding reaches. */
    assert_true(sent >= data && sent <= data + (64u << 10));
    assert_true(stored >= data && stored <= data + (1u << 20));
    io_test_rmtree(srcdir);
    free(srcdir);
    close(srcfd);
}

int main(int argc, char **argv)
{
    unsigned *figures[] = {&many_small, &many_large, &big_window};
    for (int i = 1; i < argc && i <= 3; i++)
        *figures[i - 1] = (unsigned)strtoul(argv[i], NULL, 10);
    /* The embedder's permission for the SIGBUS guard, as the CLI gives it. */
    if (aftp_global_init(AFTP_INIT_GUARD_SOURCE) != AFTP_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_tree_then_sync),
        IO_TEST_SCRATCH(test_source_shrinks_mid_tree),
        IO_TEST_SCRATCH(test_source_changed_before_its_first_read),
        IO_TEST_SCRATCH(test_source_truncated_mid_tree),
        IO_TEST_SCRATCH(test_window_above_open_cap),
        IO_TEST_SCRATCH(test_sparse_file_arrives_sparse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
