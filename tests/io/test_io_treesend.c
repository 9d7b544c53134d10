/* The sender's side of pipelined mode: walked entries turned into the
 * engine's aftp_entry_info (kind, path, metadata, source_id that changes
 * with the source, a CHECKSUM digest only when asked), and its storage
 * over entries: a source read at its first view only (a small one into a
 * buffer, a larger one mapped), released at close; more entries than it
 * may hold open, the least recently viewed closed and opened again when
 * viewed, which must find the version first read. Sparse sources: holes
 * found when a file is added, and the receiver's storage counting them
 * held. */
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

#include "aftp_treesend.h"
#include "aftp_treestore.h"
#include "io_testutil.h"

enum { BS = 1000 };

static void make_file(int root, const char *name, size_t len, uint32_t seed)
{
    uint8_t buf[4096];
    io_test_pattern(buf, len, seed);
    int fd = openat(root, name, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/* The walk's entries of the scratch directory's "src/", in order, into
 * out[0..n) (strings copied into paths). */
static size_t walk(void **state, aftp_entry_info *out, char (*paths)[64], unsigned flags)
{
    char src[600];
    snprintf(src, sizeof src, "%s/src/", io_test_scratch_path(state));
    const char *srcs[] = {src};
    aftp_tree t;
    aftp_tree_entry e;
    size_t n = 0;
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    for (; aftp_tree_next(&t, &e) == 1; n++) {
        assert_int_equal(aftp_treesend_entry_info(&e, (uint32_t)n + 1, BS, flags, &out[n]),
                         AFTP_OK);
        snprintf(paths[n], 64, "%s", e.path);
        out[n].file.path = paths[n];
        out[n].target = NULL; /* the walk's buffer: compared through paths */
    }
    aftp_tree_fini(&t);
    return n;
}

static void test_entries_from_a_walk(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_entry_info e[4], again[4];
    char paths[4][64];
    assert_int_equal(mkdirat(root, "src", 0755), 0);
    assert_int_equal(mkdirat(root, "src/d", 0750), 0);
    make_file(root, "src/d/f", 2500, 1);
    assert_int_equal(symlinkat("d/f", root, "src/ln"), 0);
    assert_int_equal(walk(state, e, paths, AFTP_ENTRY_SYNC | AFTP_ENTRY_CHECKSUM), 3);
    assert_int_equal(e[0].kind, AFTP_ENTRY_DIR);
    assert_int_equal(e[0].file.size, 0);
    assert_int_equal(e[0].file.block_size, 0);
    assert_int_equal(e[0].flags, 0);
    assert_int_equal(e[0].file.mode, 0750);
    assert_int_equal(e[1].kind, AFTP_ENTRY_FILE);
    assert_string_equal(paths[1], "d/f");
    assert_int_equal(e[1].file.size, 2500);
    assert_int_equal(e[1].file.block_size, BS);
    assert_int_equal(e[1].file.file_id, 2);
    uint8_t want[AFTP_DIGEST_LEN];
    int fd = openat(root, "src/d/f", O_RDONLY);
    assert_int_equal(aftp_treestore_digest(fd, 2500, want), AFTP_OK);
    close(fd);
    assert_memory_equal(e[1].digest, want, AFTP_DIGEST_LEN);
    assert_int_equal(e[2].kind, AFTP_ENTRY_SYMLINK);
    /* Without CHECKSUM no digest is computed; touching the file changes
     * its source_id (ctime), nothing else about it. */
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    assert_int_equal(utimensat(root, "src/d/f", times, 0), 0);
    walk(state, again, paths, AFTP_ENTRY_RESUME);
    static const uint8_t zeros[AFTP_DIGEST_LEN];
    assert_memory_equal(again[1].digest, zeros, AFTP_DIGEST_LEN);
    assert_int_equal(again[1].flags, AFTP_ENTRY_RESUME);
    assert_true(again[1].source_id != e[1].source_id);
    assert_int_equal(again[0].source_id, e[0].source_id);
}

/* The FILE entry the walk would give `local` (its identity included). */
static aftp_entry_info file_info(uint32_t id, const char *local)
{
    struct stat sb;
    assert_int_equal(stat(local, &sb), 0);
    aftp_tree_entry te = {.kind = AFTP_TREE_FILE, .path = "x", .local = local,
                          .size = (uint64_t)sb.st_size,
                          .mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec,
                          .mode = sb.st_mode & 07777, .dev = (uint64_t)sb.st_dev,
                          .ino = (uint64_t)sb.st_ino,
                          .ctime_ns = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec};
    aftp_entry_info e;
    assert_int_equal(aftp_treesend_entry_info(&te, id, BS, 0, &e), AFTP_OK);
    return e;
}

/* Files root/<prefix><i> of `size` bytes (pattern seed i), i < n, added
 * to t as entries first_id + i; their local paths in local[i]. */
static void add_files(void **state, aftp_treesend *t, const char *prefix, uint32_t n,
                      size_t size, uint32_t first_id, char (*local)[700])
{
    int root = io_test_scratch_fd(state);
    uint8_t *buf = malloc(size);
    assert_non_null(buf);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%u", prefix, i);
        io_test_pattern(buf, size, i);
        int fd = openat(root, name, O_WRONLY | O_CREAT | O_TRUNC, 0640);
        assert_int_equal(write(fd, buf, size), (ssize_t)size);
        close(fd);
        snprintf(local[i], sizeof local[i], "%s/%s", io_test_scratch_path(state), name);
        aftp_entry_info e = file_info(first_id + i, local[i]);
        assert_int_equal(aftp_treesend_add(t, &e, local[i]), AFTP_OK);
    }
    free(buf);
}

/* Views `len` bytes at `off` of entry id, expecting pattern `seed`. */
static void expect_view(aftp_treesend *t, uint32_t id, uint64_t off, size_t len, uint32_t seed)
{
    static uint8_t want[AFTP_TREESEND_SMALL_MAX + 2];
    const uint8_t *p;
    assert_true(off + len <= sizeof want);
    assert_int_equal(aftp_treesend_ops.view(t, id, off, len, &p), AFTP_OK);
    io_test_pattern(want, (size_t)(off + len), seed);
    assert_memory_equal(p, want + off, len);
}

static void test_sources_opened_at_view_released_at_close(void **state)
{
    enum { N = 8 };
    static char local[N][700];
    aftp_treesend t;
    const uint8_t *p;
    aftp_treesend_init(&t);
    add_files(state, &t, "f", N, 100, 1, local);
    assert_int_equal(t.open, 0); /* nothing read before it is viewed */
    assert_int_equal(t.buffered, 0);
    const aftp_storage_ops *ops = &aftp_treesend_ops;
    expect_view(&t, 5, 10, 50, 4);
    assert_int_equal(t.buffered, 100); /* a small file: read whole, no descriptor kept */
    assert_int_equal(t.open, 0);
    assert_int_equal(ops->close(&t, 5, 1), AFTP_OK);
    assert_int_equal(ops->view(&t, 5, 0, 1, &p), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->close(&t, 5, 1), AFTP_ERR_INVALID_STATE);
    aftp_treesend_settle(&t);
    assert_int_equal(t.buffered, 0);
    /* Changed since offered: refused at its first view, naming it. */
    make_file(io_test_scratch_fd(state), "f6", 90, 6);
    assert_int_equal(ops->view(&t, 7, 0, 1, &p), AFTP_ERR_SOURCE_CHANGED);
    assert_non_null(strstr(t.message, "changed since it was offered"));
    assert_non_null(strstr(t.message, local[6]));
    ops->close(&t, 7, 1);
    aftp_treesend_fini(&t);
    assert_int_equal(t.count, 0);
}

/* More entries in flight than AFTP_TREESEND_MAX_OPEN, as a large window
 * has: every first view and every later one (a repair, after the others
 * were read) succeeds byte-exact, with the descriptors bounded. Small
 * files are buffered up to the budget; the rest are mapped, the least
 * recently viewed closed for the next and opened again when viewed. */
static void test_open_sources_bounded_for_any_window(void **state)
{
    enum {
        BUFFERED = (int)(AFTP_TREESEND_BUFFER_BUDGET / AFTP_TREESEND_SMALL_MAX),
        N = BUFFERED + 2 * (int)AFTP_TREESEND_MAX_OPEN + 5
    };
    static char local[N][700];
    aftp_treesend t;
    aftp_treesend_init(&t);
    add_files(state, &t, "w", N, AFTP_TREESEND_SMALL_MAX, 1, local);
    int before = io_test_count_open_fds(), most = before;
    for (int round = 0; round < 2; round++)
        for (uint32_t i = 0; i < N; i++) {
            uint64_t off = round == 0 ? 0 : AFTP_TREESEND_SMALL_MAX - BS;
            expect_view(&t, i + 1, off, BS, i);
            int fds = io_test_count_open_fds();
            most = fds > most ? fds : most;
            assert_true(t.open <= AFTP_TREESEND_MAX_OPEN);
            assert_true(t.buffered <= AFTP_TREESEND_BUFFER_BUDGET);
            if (i % 64 == 0)
                aftp_treesend_settle(&t); /* as the driver does after each batch */
        }
    print_message("%d entries viewed twice: at most %d descriptors, %zu sources open, "
                  "%llu bytes buffered, %llu reopened\n", N, most - before, t.open,
                  (unsigned long long)t.buffered, (unsigned long long)t.reopened);
    assert_true(most - before <= (int)AFTP_TREESEND_MAX_OPEN);
    assert_int_equal(t.open, AFTP_TREESEND_MAX_OPEN);
    assert_int_equal(t.buffered, BUFFERED * AFTP_TREESEND_SMALL_MAX);
    assert_int_equal(t.reopened, N - BUFFERED); /* every mapped one, in the second round */
    aftp_treesend_fini(&t);
    assert_int_equal(io_test_count_open_fds(), before);
    assert_int_equal(t.buffered, 0);
}

/* A source closed for others and then viewed again must be the version
 * first read: one replaced (another inode, same size and mtime) and one
 * written in place with its mtime put back (its ctime moved) fail that
 * view with SOURCE_CHANGED naming the file; the other entries go on. */
static void test_changed_source_fails_its_reopen(void **state)
{
    enum { N = AFTP_TREESEND_MAX_OPEN + 2, SIZE = AFTP_TREESEND_SMALL_MAX + 1 };
    static char local[N][700];
    char tmp[760];
    const uint8_t *p;
    aftp_treesend t;
    struct stat sb;
    aftp_treesend_init(&t);
    add_files(state, &t, "r", N, SIZE, 1, local);
    expect_view(&t, 1, 0, BS, 0);
    expect_view(&t, 2, 0, BS, 1);
    for (uint32_t i = 2; i < N; i++) /* entries 1 and 2 are closed for these */
        expect_view(&t, i + 1, 0, BS, i);
    aftp_treesend_settle(&t);
    /* entry 1: replaced by a copy with the same bytes, size and times */
    assert_int_equal(stat(local[0], &sb), 0);
    snprintf(tmp, sizeof tmp, "%s.new", local[0]);
    uint8_t *buf = malloc(SIZE);
    io_test_pattern(buf, SIZE, 0);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_int_equal(write(fd, buf, SIZE), SIZE);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    assert_int_equal(futimens(fd, times), 0);
    close(fd);
    assert_int_equal(rename(tmp, local[0]), 0);
    /* entry 2: other bytes written in place, its mtime put back */
    assert_int_equal(stat(local[1], &sb), 0);
    fd = open(local[1], O_WRONLY);
    assert_int_equal(pwrite(fd, buf, 100, 0), 100);
    times[1] = sb.st_mtim;
    assert_int_equal(futimens(fd, times), 0);
    close(fd);
    free(buf);

    assert_int_equal(aftp_treesend_ops.view(&t, 1, 0, BS, &p), AFTP_ERR_SOURCE_CHANGED);
    assert_non_null(strstr(t.message, local[0]));
    assert_non_null(strstr(t.message, "changed since it was first read"));
    assert_int_equal(aftp_treesend_ops.view(&t, 2, 0, BS, &p), AFTP_ERR_SOURCE_CHANGED);
    assert_non_null(strstr(t.message, local[1]));
    assert_int_equal(aftp_treesend_ops.close(&t, 1, 0), AFTP_OK);
    assert_int_equal(aftp_treesend_ops.close(&t, 2, 0), AFTP_OK);
    expect_view(&t, 3, BS, BS, 2); /* the others go on */
    expect_view(&t, N, 2 * BS, BS, N - 1);
    aftp_treesend_fini(&t);
}

/* A small file is read once, whole: written over or cut short after
 * that, its entry's views still give the version read (never a mix),
 * and the check of open sources has nothing to say about it. Its next
 * send offers the new version. */
static void test_small_file_is_read_once(void **state)
{
    char local[1][700];
    aftp_treesend t;
    aftp_treesend_init(&t);
    add_files(state, &t, "s", 1, 3000, 1, local);
    expect_view(&t, 1, 0, BS, 0);
    uint8_t other[3000];
    io_test_pattern(other, sizeof other, 77);
    int fd = open(local[0], O_WRONLY);
    assert_int_equal(pwrite(fd, other, sizeof other, 0), (ssize_t)sizeof other);
    close(fd);
    expect_view(&t, 1, BS, 2 * BS, 0);
    assert_int_equal(truncate(local[0], 10), 0);
    expect_view(&t, 1, 2 * BS, BS, 0);
    assert_int_equal(aftp_treesend_check(&t), AFTP_OK);
    assert_int_equal(t.open, 0);
    aftp_treesend_fini(&t);
}

/* A FILE's holes come from SEEK_DATA / SEEK_HOLE when it is added: the
 * gaps between its data, the trailing one too; a dense file and a small
 * one get none. */
static void test_holes_found_when_added(void **state)
{
    int root = io_test_scratch_fd(state);
    char local[3][700];
    const char *names[] = {"sparse", "dense", "small"};
    for (int i = 0; i < 3; i++)
        snprintf(local[i], sizeof local[i], "%s/%s", io_test_scratch_path(state), names[i]);
    uint8_t page[4096];
    memset(page, 0x5a, sizeof page);
    int fd = openat(root, "sparse", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(ftruncate(fd, 1 << 20), 0);
    assert_int_equal(pwrite(fd, page, sizeof page, 256 << 10), (ssize_t)sizeof page);
    assert_int_equal(pwrite(fd, page, sizeof page, 768 << 10), (ssize_t)sizeof page);
    close(fd);
    struct stat sb;
    assert_int_equal(stat(local[0], &sb), 0);
    if ((uint64_t)sb.st_blocks * 512 >= (1u << 19))
        skip(); /* a file system without holes here */
    fd = openat(root, "dense", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < 64; i++)
        assert_int_equal(write(fd, page, sizeof page), (ssize_t)sizeof page);
    close(fd);
    make_file(root, "small", 100, 1);

    aftp_treesend t;
    aftp_treesend_init(&t);
    aftp_entry_info e[3];
    for (uint32_t i = 0; i < 3; i++) {
        e[i] = file_info(i + 1, local[i]);
        assert_int_equal(aftp_treesend_add(&t, &e[i], local[i]), AFTP_OK);
    }
    const aftp_byte_range want[] = {{0, 256 << 10},
                                    {(256 << 10) + 4096, (512 << 10) - 4096},
                                    {(768 << 10) + 4096, (256 << 10) - 4096}};
    assert_int_equal(e[0].hole_count, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(e[0].holes[i].off, want[i].off);
        assert_int_equal(e[0].holes[i].len, want[i].len);
    }
    assert_int_equal(e[1].hole_count, 0);
    assert_null(e[1].holes);
    assert_int_equal(e[2].hole_count, 0);
    aftp_treesend_fini(&t);
}

/* ---- the receiver's storage of a sparse entry (aftp_treestore) ---- */

/* The store tests' block: 10 of them beyond AFTP_TREESTORE_WHOLE_MAX, so the file is journalled. */
enum { SBS = 8000 };
/* A 10-block file whose blocks 0-2 and 6-7 are holes (spec 6.13). */
static const aftp_byte_range store_holes[] = {{0, 3 * SBS}, {6 * SBS, 2 * SBS}};

static aftp_entry_info store_entry(uint32_t id, int with_holes)
{
    aftp_entry_info e = {.kind = AFTP_ENTRY_FILE, .flags = AFTP_ENTRY_RESUME, .source_id = 9};
    e.file = (aftp_file_info){.file_id = id, .size = 10 * SBS, .mtime_ns = 5, .mode = 0644,
                              .block_size = SBS, .path = "disk.img"};
    if (with_holes) {
        e.holes = store_holes;
        e.hole_count = 2;
    }
    return e;
}

static int store_verdict(aftp_treestore *ts, const aftp_entry_info *e, aftp_entry_verdict *v)
{
    assert_int_equal(aftp_treestore_ops.entry(ts, e, v), AFTP_OK);
    return v->verdict;
}

/* Writes blocks [first, end) of entry id: the pattern, zeros in holes. */
static void store_blocks(aftp_treestore *ts, uint32_t id, uint64_t first, uint64_t end)
{
    uint8_t data[10 * SBS];
    io_test_pattern(data, sizeof data, 11);
    memset(data, 0, 3 * SBS);
    memset(data + 6 * SBS, 0, 2 * SBS);
    for (uint64_t b = first; b < end; b++)
        assert_int_equal(aftp_treestore_ops.write(ts, id, b * SBS, data + b * SBS, SBS), AFTP_OK);
    assert_int_equal(aftp_treestore_sync(ts), AFTP_OK);
}

/* The holes count as held from the verdict on: the file is "all arrived"
 * (its state dropped when discarded, a failed verification) once its data
 * is, and a resumed copy whose blocks overlap the holes counts those once:
 * one data block short, it is still unfinished and kept. */
static void test_store_counts_holes_held(void **state)
{
    int root = io_test_scratch_fd(state);
    aftp_treestore ts;
    aftp_place_options opt;
    aftp_entry_verdict v;
    char why[256];
    aftp_place_defaults(&opt);
    assert_int_equal(aftp_treestore_init(&ts, root, &opt, why, sizeof why), AFTP_OK);
    /* A sender that did not know the holes wrote blocks 0-5, then stopped. */
    aftp_entry_info e = store_entry(1, 0);
    assert_int_equal(store_verdict(&ts, &e, &v), AFTP_VERDICT_SEND);
    store_blocks(&ts, 1, 0, 6);
    assert_int_equal(aftp_treestore_ops.close(&ts, 1, AFTP_CLOSE_DISCARD), AFTP_OK);
    /* Resumed with the holes: 0-5 held, 6-7 holes; block 8 arrives, not 9. */
    e = store_entry(2, 1);
    assert_int_equal(store_verdict(&ts, &e, &v), AFTP_VERDICT_RESUME);
    store_blocks(&ts, 2, 8, 9);
    assert_int_equal(aftp_treestore_ops.close(&ts, 2, AFTP_CLOSE_DISCARD), AFTP_OK);
    /* Kept: block 9 is still missing. Now it arrives: all there. */
    e = store_entry(3, 1);
    assert_int_equal(store_verdict(&ts, &e, &v), AFTP_VERDICT_RESUME);
    store_blocks(&ts, 3, 9, 10);
    assert_int_equal(aftp_treestore_ops.close(&ts, 3, AFTP_CLOSE_DISCARD), AFTP_OK);
    /* Discarded whole (a failed verification): not resumed again. */
    e = store_entry(4, 1);
    assert_int_equal(store_verdict(&ts, &e, &v), AFTP_VERDICT_SEND);
    aftp_treestore_ops.close(&ts, 4, AFTP_CLOSE_DISCARD);
    aftp_treestore_fini(&ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_entries_from_a_walk),
        IO_TEST_SCRATCH(test_sources_opened_at_view_released_at_close),
        IO_TEST_SCRATCH(test_open_sources_bounded_for_any_window),
        IO_TEST_SCRATCH(test_changed_source_fails_its_reopen),
        IO_TEST_SCRATCH(test_small_file_is_read_once),
        IO_TEST_SCRATCH(test_holes_found_when_added),
        IO_TEST_SCRATCH(test_store_counts_holes_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
