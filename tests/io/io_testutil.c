#define _GNU_SOURCE
#include "io_testutil.h"

#include "aftp_place.h"
#include "aftp_tree.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

char *io_test_mkdtemp(int *fd)
{
    const char *base = getenv("TMPDIR");
    char *path = malloc(512);
    snprintf(path, 512, "%s/aftp-io-test-XXXXXX", base ? base : "/tmp");
    if (mkdtemp(path) == NULL)
        abort();
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0)
        abort();
    return path;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void io_test_rmtree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

typedef struct io_test_scratch {
    int fd;
    char *path;
} io_test_scratch;

int io_test_scratch_setup(void **state)
{
    io_test_scratch *s = malloc(sizeof *s);
    if (s == NULL)
        return -1;
    s->path = io_test_mkdtemp(&s->fd);
    *state = s;
    return 0;
}

int io_test_scratch_teardown(void **state)
{
    io_test_scratch *s = *state;
    io_test_rmtree(s->path);
    close(s->fd);
    free(s->path);
    free(s);
    return 0;
}

int io_test_scratch_fd(void **state)
{
    return ((io_test_scratch *)*state)->fd;
}

const char *io_test_scratch_path(void **state)
{
    return ((io_test_scratch *)*state)->path;
}

void io_test_pattern(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
}

int io_test_exists(int dirfd, const char *name)
{
    struct stat sb;
    return fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

int io_test_count_entries(int dirfd)
{
    int dup = openat(dirfd, ".", O_RDONLY | O_DIRECTORY);
    DIR *d = fdopendir(dup);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

struct sockaddr_in io_test_loopback(uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

void io_test_needs_hooks(void)
{
#ifndef AFTP_TEST_HOOKS
    print_message("SKIP: built without AFTP_TEST_HOOKS\n");
    skip();
#endif
}

int io_test_guarded_read(aftp_mapguard *g, const volatile uint8_t *p, uint8_t *out)
{
    if (sigsetjmp(g->env, 1) != 0)
        return 1;
    aftp_mapguard_enter(g);
    *out = *p;
    aftp_mapguard_leave(g);
    return 0;
}

void io_test_write_file(int dirfd, const char *name, uint64_t size, uint32_t seed,
                        unsigned mode, int64_t mtime_ns)
{
    uint8_t *buf = malloc(size ? size : 1);
    assert_non_null(buf);
    io_test_pattern(buf, size, seed);
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    assert_int_equal(fchmod(fd, mode), 0);
    struct timespec t[2] = {{mtime_ns / 1000000000, mtime_ns % 1000000000},
                            {mtime_ns / 1000000000, mtime_ns % 1000000000}};
    assert_int_equal(futimens(fd, t), 0);
    close(fd);
    free(buf);
}

int io_test_mount_private_tmpfs(const char *dir, const char *size)
{
    char opts[32];
    snprintf(opts, sizeof opts, "size=%s", size);
    return unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
           mount("tmpfs", dir, "tmpfs", 0, opts) == 0;
}

int io_test_count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void expect_tree_copy(int dst, const aftp_tree_entry *e)
{
    struct stat sb;
    assert_int_equal(fstatat(dst, e->path, &sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal((int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec, e->mtime_ns);
    if (e->kind == AFTP_TREE_SYMLINK) {
        char target[256];
        ssize_t n = readlinkat(dst, e->path, target, sizeof target - 1);
        assert_true(S_ISLNK(sb.st_mode) && n >= 0);
        target[n] = '\0';
        assert_string_equal(target, e->target);
        return;
    }
    assert_int_equal(sb.st_mode & 07777, e->mode & AFTP_PLACE_MODE_DEFAULT);
    assert_true(e->kind == AFTP_TREE_DIR ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
    if (e->kind == AFTP_TREE_DIR)
        return;
    uint8_t *want = malloc(e->size + 1), *got = malloc(e->size + 1);
    int a = open(e->local, O_RDONLY), b = openat(dst, e->path, O_RDONLY | O_NOFOLLOW);
    assert_int_equal(pread(a, want, e->size + 1, 0), (ssize_t)e->size);
    assert_int_equal(pread(b, got, e->size + 1, 0), (ssize_t)e->size);
    assert_memory_equal(want, got, e->size);
    struct stat source;
    assert_int_equal(stat(e->local, &source), 0);
    assert_true(sb.st_blocks <= source.st_blocks + 16); /* holes kept, give or take 8 KiB */
    close(a);
    close(b);
    free(want);
    free(got);
}

size_t io_test_expect_tree_copies(const char *src, int dst)
{
    const char *srcs[] = {src};
    aftp_tree t;
    aftp_tree_entry e;
    size_t n = 0;
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    for (; aftp_tree_next(&t, &e) == 1; n++)
        expect_tree_copy(dst, &e);
    aftp_tree_fini(&t);
    return n;
}

/* Reads the whole of path into a new buffer (*len bytes), or NULL. */
static uint8_t *read_whole(const char *path, size_t *len)
{
    FILE *in = fopen(path, "rb");
    uint8_t *buf = NULL;
    long size = -1;
    if (in != NULL && fseek(in, 0, SEEK_END) == 0 && (size = ftell(in)) >= 0 &&
        fseek(in, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)) != NULL &&
        fread(buf, 1, (size_t)size, in) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    if (in != NULL)
        fclose(in);
    *len = size > 0 ? (size_t)size : 0;
    return buf;
}

int io_test_same_file(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *x = read_whole(a, &la), *y = read_whole(b, &lb);
    int same = x != NULL && y != NULL && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}
