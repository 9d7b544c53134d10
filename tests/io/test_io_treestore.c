/* The receiver's storage for pipelined mode, driven through its ops with
 * entries made by the sender's side (aftp_treesend) from a walked tree:
 * a tree placed exactly; SKIP of an identical file by mtime or content;
 * RESUME after a kill with exactly the synced blocks; a changed source or
 * a damaged journal sent from scratch; hostile paths refused; a full disk
 * refused, then accepted once space is freed; no final name before the
 * group commit; descriptors bounded over 10,000 open entries. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_store.h"
#include "aftp_treesend.h"
#include "aftp_treestore.h"
#include "io_testutil.h"

#define T1 INT64_C(1500000000111111111)
#define T2 INT64_C(1600000000222222222)
enum { BS = 8000 }; /* RSIZE and src/big beyond AFTP_TREESTORE_WHOLE_MAX: journalled */

static const aftp_storage_ops *ops = &aftp_treestore_ops;

static void store_init(aftp_treestore *ts, int root, int links, int overwrite)
{
    aftp_place_options opt;
    char why[256];
    aftp_place_defaults(&opt);
    opt.links = links;
    opt.overwrite = overwrite;
    assert_int_equal(aftp_treestore_init(ts, root, &opt, why, sizeof why), AFTP_OK);
}

static void write_file(int dirfd, const char *path, size_t len, uint32_t seed, int64_t mtime_ns)
{
    uint8_t *buf = malloc(len + 1);
    io_test_pattern(buf, len, seed);
    int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    const struct timespec times[2] = {{0, UTIME_OMIT},
                                      {mtime_ns / 1000000000, mtime_ns % 1000000000}};
    assert_int_equal(futimens(fd, times), 0);
    close(fd);
    free(buf);
}

/* A FILE entry of `len` pattern bytes (seed), as a sender offers it. */
static aftp_entry_info file_entry(uint32_t id, const char *path, uint64_t len, int64_t mtime_ns,
                                  uint64_t source_id, unsigned flags)
{
    aftp_entry_info e = {.kind = AFTP_ENTRY_FILE, .flags = flags, .source_id = source_id};
    e.file = (aftp_file_info){.file_id = id, .size = len, .mtime_ns = mtime_ns, .mode = 0640,
                              .block_size = BS, .path = path};
    return e;
}

static int verdict_of(aftp_treestore *ts, const aftp_entry_info *e, aftp_entry_verdict *v)
{
    assert_int_equal(ops->entry(ts, e, v), AFTP_OK);
    return v->verdict == AFTP_VERDICT_REFUSED ? v->error : v->verdict;
}

static int held(const aftp_entry_verdict *v, uint64_t block)
{
    for (size_t i = 0; i < v->held_count; i++)
        if (block >= v->held[i].start && block - v->held[i].start < v->held[i].len)
            return 1;
    return 0;
}

/* Writes blocks [first, end) of `data`, except those v holds. */
static void write_blocks(aftp_treestore *ts, const aftp_entry_info *e, const aftp_entry_verdict *v,
                         const uint8_t *data, uint64_t first, uint64_t end)
{
    for (uint64_t b = first; b < end && b * BS < e->file.size; b++) {
        uint64_t n = e->file.size - b * BS < BS ? e->file.size - b * BS : BS;
        if (!held(v, b))
            assert_int_equal(ops->write(ts, e->file.file_id, b * BS, data + b * BS, (size_t)n),
                             AFTP_OK);
    }
}

/* The stored bytes read back through `view`, as the engine verifies. */
static void expect_view(aftp_treestore *ts, const aftp_entry_info *e, const uint8_t *data)
{
    const uint8_t *got;
    assert_int_equal(ops->view(ts, e->file.file_id, 0, (size_t)e->file.size, &got), AFTP_OK);
    assert_memory_equal(got, data, (size_t)e->file.size);
}


static uint8_t *read_local_at(int dirfd, const char *path, uint64_t size)
{
    uint8_t *buf = malloc(size + 1);
    int fd = openat(dirfd, path, O_RDONLY);
    assert_int_equal(pread(fd, buf, size + 1, 0), (ssize_t)size);
    close(fd);
    return buf;
}

static uint8_t *read_local(const char *local, uint64_t size)
{
    return read_local_at(AT_FDCWD, local, size);
}

/* ---- a tree placed through the ops ---- */

static void make_source(int root)
{
    assert_int_equal(mkdirat(root, "src", 0755), 0);
    assert_int_equal(mkdirat(root, "src/d1", 0750), 0);
    assert_int_equal(mkdirat(root, "src/ro", 0555), 0);
    write_file(root, "src/big", 9 * BS + 17, 1, T1);
    write_file(root, "src/d1/f", 2500, 2, T2);
    write_file(root, "src/empty", 0, 3, T1);
    write_file(root, "src/ro/g", 10, 4, T2);
    assert_int_equal(symlinkat("d1/f", root, "src/ln"), 0);
    const struct timespec times[2] = {{0, UTIME_OMIT}, {1400000000, 5}};
    assert_int_equal(utimensat(root, "src/d1", times, 0), 0);
    assert_int_equal(utimensat(root, "src/ro", times, 0), 0);
}

/* One walked entry through the ops; a file is written, verified and
 * closed DEFER, its id noted in ids[*n]. */
static void send_entry(aftp_treestore *ts, const aftp_tree_entry *t, uint32_t id, uint32_t *ids,
                       size_t *n)
{
    aftp_entry_info e;
    aftp_entry_verdict v;
    assert_int_equal(aftp_treesend_entry_info(t, id, BS, 0, &e), AFTP_OK);
    assert_int_equal(verdict_of(ts, &e, &v), AFTP_VERDICT_SEND);
    if (t->kind != AFTP_TREE_FILE)
        return;
    uint8_t *data = read_local(t->local, t->size);
    write_blocks(ts, &e, &v, data, 0, UINT64_MAX);
    expect_view(ts, &e, data);
    assert_int_equal(ops->close(ts, id, AFTP_CLOSE_DEFER), AFTP_OK);
    ids[(*n)++] = id;
    free(data);
}

static void commit_all(aftp_treestore *ts, uint32_t *ids, size_t *n)
{
    int results[8];
    assert_int_equal(ops->commit_group(ts, ids, *n, results), AFTP_OK);
    for (size_t i = 0; i < *n; i++)
        assert_int_equal(results[i], AFTP_OK);
    *n = 0;
}

/* Files are committed three at a time, so d1/f waits for its group after
 * the walk has left d1: d1's mtime must still come out as the source's. */
static void test_tree_placed_through_ops(void **state)
{
    int root = io_test_scratch_fd(state);
    char src[600];
    make_source(root);
    assert_int_equal(mkdirat(root, "dst", 0755), 0);
    int dst = openat(root, "dst", O_RDONLY | O_DIRECTORY);
    snprintf(src, sizeof src, "%s/src/", io_test_scratch_path(state));
    const char *srcs[] = {src};
    aftp_treestore ts;
    aftp_tree t;
    aftp_tree_entry e;
    uint32_t ids[8], id = 0;
    size_t n = 0;
    store_init(&ts, dst, 1, 0);
    assert_int_equal(aftp_tree_init(&t, srcs, 1, NULL, NULL), AFTP_OK);
    while (aftp_tree_next(&t, &e) == 1) {
        send_entry(&ts, &e, id++, ids, &n);
        if (n == 3)
            commit_all(&ts, ids, &n);
    }
    aftp_tree_fini(&t);
    commit_all(&ts, ids, &n);
    assert_int_equal(aftp_treestore_finish(&ts), AFTP_OK);
    aftp_treestore_fini(&ts);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 7); /* big, d1, d1/f, empty, ln, ro, ro/g */
    assert_int_equal(io_test_count_entries(dst), 5); /* no resume directory left behind */
    close(dst);
}

/* ---- SKIP, SEND ---- */

static void test_skip_identical_by_mtime_or_content(void **state)
{
    int root = io_test_scratch_fd(state);
    uint8_t data[2500];
    aftp_treestore ts;
    aftp_entry_verdict v;
    io_test_pattern(data, sizeof data, 7);
    write_file(root, "same", sizeof data, 7, T1);
    store_init(&ts, root, 0, 1);
    aftp_entry_info e = file_entry(1, "same", sizeof data, T1, 9, AFTP_ENTRY_SYNC);
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SKIP);
    e = file_entry(2, "same", sizeof data, T2, 9, AFTP_ENTRY_SYNC | AFTP_ENTRY_CHECKSUM);
    int fd = openat(root, "same", O_RDONLY);
    assert_int_equal(aftp_treestore_digest(fd, sizeof data, e.digest), AFTP_OK);
    close(fd);
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SKIP); /* content, not mtime */
    e.digest[0] ^= 1; /* same size and mtime elsewhere, other content */
    e.file.file_id = 3;
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
    e = file_entry(4, "same", sizeof data, T2, 9, AFTP_ENTRY_SYNC); /* another mtime */
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
    e = file_entry(5, "same", sizeof data, T1, 9, 0); /* identical, SYNC not asked */
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&ts);
}

/* ---- RESUME ---- */

enum { RBLOCKS = 10, RSIZE = RBLOCKS * BS - 300 };

/* What the resume and commit tests share: the scratch directory, the
 * source's bytes (RSIZE pattern bytes of a seed), a store, a verdict. */
typedef struct rig {
    int root;
    uint8_t data[RSIZE];
    aftp_treestore ts;
    aftp_entry_verdict v;
} rig;

static rig *rig_start(void **state, uint32_t seed)
{
    static rig r;
    memset(&r, 0, sizeof r);
    r.root = io_test_scratch_fd(state);
    io_test_pattern(r.data, RSIZE, seed);
    return &r;
}

/* A kill -9 of a receiver: the store's work runs in a child (pid 0 from
 * fork_to_kill) that kill9 ends as the signal would, with nothing
 * released, so the test goes on in the parent with what is on disk. (A
 * store released with aftp_treestore_fini syncs its files, as a session
 * that ends does.) */
static pid_t fork_to_kill(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    return pid;
}

static void kill9(pid_t pid)
{
    int status;
    if (pid == 0)
        raise(SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* A partial copy of "f": blocks [0, synced) made durable by a group
 * commit (of no file of its own), then [synced, written) written, then the
 * receiver killed. */
static void partial_copy(int root, const uint8_t *data, uint64_t synced, uint64_t written)
{
    aftp_treestore ts;
    aftp_entry_verdict v;
    pid_t pid = fork_to_kill();
    if (pid == 0) {
        store_init(&ts, root, 0, 0);
        aftp_entry_info e = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
        assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
        write_blocks(&ts, &e, &v, data, 0, synced);
        assert_int_equal(ops->commit_group(&ts, NULL, 0, NULL), AFTP_OK);
        write_blocks(&ts, &e, &v, data, synced, written);
    }
    kill9(pid);
}

static void test_resume_holds_exactly_the_synced_blocks(void **state)
{
    int results[1];
    rig *r = rig_start(state, 5);
    partial_copy(r->root, r->data, 4, 7);
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info e = file_entry(2, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_RESUME);
    assert_int_equal(r->v.held_count, 1);
    assert_int_equal(r->v.held[0].start, 0);
    assert_int_equal(r->v.held[0].len, 4);
    write_blocks(&r->ts, &e, &r->v, r->data, 0, UINT64_MAX);
    expect_view(&r->ts, &e, r->data);
    assert_int_equal(ops->close(&r->ts, 2, AFTP_CLOSE_DEFER), AFTP_OK);
    assert_int_equal(ops->commit_group(&r->ts, (const uint32_t[]){2}, 1, results), AFTP_OK);
    assert_int_equal(results[0], AFTP_OK);
    aftp_treestore_fini(&r->ts);
    uint8_t got[RSIZE + 1];
    int fd = openat(r->root, "f", O_RDONLY);
    assert_int_equal(read(fd, got, sizeof got), RSIZE);
    assert_memory_equal(got, r->data, RSIZE);
    close(fd);
}

static void test_changed_source_or_no_resume_flag_sends(void **state)
{
    rig *r = rig_start(state, 5);
    partial_copy(r->root, r->data, 4, 4);
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info e = file_entry(2, "f", RSIZE, T1, 78, AFTP_ENTRY_RESUME); /* other source */
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&r->ts);
    partial_copy(r->root, r->data, 4, 4);
    store_init(&r->ts, r->root, 0, 0);
    e = file_entry(3, "f", RSIZE, T1, 77, 0); /* RESUME not allowed */
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&r->ts);
    store_init(&r->ts, r->root, 0, 0); /* ...and the partial copy was dropped */
    e = file_entry(4, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&r->ts);
}

static void test_damaged_journal_sends(void **state)
{
    rig *r = rig_start(state, 5);
    partial_copy(r->root, r->data, 4, 4);
    int pd = openat(r->root, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    DIR *d = fdopendir(pd);
    struct dirent *de;
    int damaged = 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 5, ".jrnl") != 0)
            continue;
        int fd = openat(pd, de->d_name, O_RDWR);
        uint8_t byte;
        assert_int_equal(pread(fd, &byte, 1, 40), 1);
        byte ^= 0x10;
        assert_int_equal(pwrite(fd, &byte, 1, 40), 1);
        close(fd);
        damaged++;
    }
    closedir(d);
    assert_int_equal(damaged, 1);
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info e = file_entry(2, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&r->ts);
}

/* Without any group commit, a file's journal is synced every
 * AFTP_TREESTORE_SYNC_BYTES: a kill loses at most that much of it. */
static void test_periodic_sync_bounds_loss(void **state)
{
    enum { MIB = 1 << 20, WRITTEN = AFTP_TREESTORE_SYNC_BYTES / MIB + 3 };
    int root = io_test_scratch_fd(state);
    uint8_t *block = malloc(MIB);
    aftp_treestore ts;
    aftp_entry_verdict v;
    io_test_pattern(block, MIB, 3);
    aftp_entry_info e = file_entry(1, "big", 2 * AFTP_TREESTORE_SYNC_BYTES, T1, 5,
                                   AFTP_ENTRY_RESUME);
    e.file.block_size = MIB;
    pid_t pid = fork_to_kill();
    if (pid == 0) {
        store_init(&ts, root, 0, 0);
        assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
        for (uint64_t b = 0; b < WRITTEN; b++)
            assert_int_equal(ops->write(&ts, 1, b * MIB, block, MIB), AFTP_OK);
    }
    kill9(pid);
    store_init(&ts, root, 0, 0);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_RESUME);
    assert_int_equal(v.held_count, 1);
    assert_int_equal(v.held[0].start, 0);
    assert_int_equal(v.held[0].len, AFTP_TREESTORE_SYNC_BYTES / MIB);
    aftp_treestore_fini(&ts);
    free(block);
}

/* The time bound: a tick that comes AFTP_TREESTORE_SYNC_NS after one
 * first saw unsynced blocks syncs them (the clock is the caller's), so a
 * file between group commits keeps no blocks unsynced for long. */
static void test_tick_syncs_blocks_a_second_old(void **state)
{
    enum { T0 = 1000000000 };
    rig *r = rig_start(state, 6);
    aftp_entry_info e = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    pid_t pid = fork_to_kill();
    if (pid == 0) {
        store_init(&r->ts, r->root, 0, 0);
        assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
        write_blocks(&r->ts, &e, &r->v, r->data, 0, 3);
        assert_int_equal(aftp_treestore_tick(&r->ts, T0), AFTP_OK); /* first seen */
        write_blocks(&r->ts, &e, &r->v, r->data, 3, 5);
        assert_int_equal(aftp_treestore_tick(&r->ts, T0 + AFTP_TREESTORE_SYNC_NS - 1), AFTP_OK);
        write_blocks(&r->ts, &e, &r->v, r->data, 5, 6);
        assert_int_equal(aftp_treestore_tick(&r->ts, T0 + AFTP_TREESTORE_SYNC_NS), AFTP_OK);
        write_blocks(&r->ts, &e, &r->v, r->data, 6, 8); /* unsynced at the kill */
    }
    kill9(pid);
    store_init(&r->ts, r->root, 0, 0);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_RESUME);
    assert_int_equal(r->v.held_count, 1);
    assert_int_equal(r->v.held[0].start, 0);
    assert_int_equal(r->v.held[0].len, 6);
    aftp_treestore_fini(&r->ts);
}

/* A session that ends with a file unfinished (its sender vanished, the
 * operator stopped the server) keeps every block that arrived. */
static void test_session_end_keeps_all_received(void **state)
{
    rig *r = rig_start(state, 7);
    aftp_entry_info e = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    store_init(&r->ts, r->root, 0, 0);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &e, &r->v, r->data, 0, 7);
    aftp_treestore_fini(&r->ts);
    store_init(&r->ts, r->root, 0, 0);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_RESUME);
    assert_int_equal(r->v.held_count, 1);
    assert_int_equal(r->v.held[0].len, 7);
    aftp_treestore_fini(&r->ts);
}

/* Two stores of one root sharing a table of claims (two sessions of a
 * server): a file the first writes waits in the second (AFTP_STORAGE_WAIT,
 * through `entry` and one-file `open`), another file does not; once the
 * first store's file ended (here: its session, keeping what arrived), the
 * second resumes from every block the first received. A refused entry
 * keeps no claim. */
static void test_shared_root_one_writer_per_file(void **state)
{
    rig *r = rig_start(state, 9);
    aftp_treestore second;
    aftp_entry_verdict v2;
    struct stat sb;
    aftp_filelocks *locks = aftp_filelocks_new();
    assert_non_null(locks);
    assert_int_equal(fstat(r->root, &sb), 0);
    store_init(&r->ts, r->root, 0, 0);
    store_init(&second, r->root, 0, 0);
    aftp_treestore_share(&r->ts, locks, sb.st_dev, sb.st_ino);
    aftp_treestore_share(&second, locks, sb.st_dev, sb.st_ino);
    aftp_entry_info e = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &e, &r->v, r->data, 0, 6);

    aftp_entry_info same = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(ops->entry(&second, &same, &v2), AFTP_STORAGE_WAIT);
    assert_int_equal(ops->open(&second, &same.file), AFTP_STORAGE_WAIT);
    aftp_entry_info other = file_entry(2, "g", RSIZE, T1, 78, 0);
    assert_int_equal(verdict_of(&second, &other, &v2), AFTP_VERDICT_SEND);
    aftp_entry_info bad = file_entry(3, "f/..", RSIZE, T1, 79, 0); /* refused, never claimed */
    assert_int_equal(verdict_of(&second, &bad, &v2), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_filelocks_count(locks), 2); /* f (first), g (second) */

    aftp_treestore_fini(&r->ts); /* the first session ends: f is released, its blocks kept */
    assert_int_equal(aftp_filelocks_count(locks), 1);
    same.file.file_id = 4;
    assert_int_equal(verdict_of(&second, &same, &v2), AFTP_VERDICT_RESUME);
    assert_int_equal(v2.held_count, 1);
    assert_int_equal(v2.held[0].len, 6);
    aftp_treestore_fini(&second);
    assert_int_equal(aftp_filelocks_count(locks), 0);
    aftp_filelocks_del(locks);
}

/* A file discarded after all its bytes arrived failed verification: its
 * blocks are not offered again. */
static void test_discarded_whole_file_not_resumed(void **state)
{
    rig *r = rig_start(state, 5);
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info e = file_entry(1, "f", RSIZE, T1, 77, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &e, &r->v, r->data, 0, UINT64_MAX);
    assert_int_equal(aftp_treestore_sync(&r->ts), AFTP_OK);
    assert_int_equal(ops->close(&r->ts, 1, AFTP_CLOSE_DISCARD), AFTP_OK);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &e, &r->v, r->data, 0, 3); /* interrupted: kept */
    assert_int_equal(ops->close(&r->ts, 2, AFTP_CLOSE_DISCARD), AFTP_OK);
    e.file.file_id = 3;
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_RESUME);
    assert_int_equal(r->v.held_count, 1);
    assert_int_equal(r->v.held[0].len, 3);
    assert_false(io_test_exists(r->root, "f"));
    aftp_treestore_fini(&r->ts);
}

/* ---- hostile paths ---- */

static void test_hostile_paths_refused(void **state)
{
    int root = io_test_scratch_fd(state);
    static const char *paths[] = {"../x", "/abs", "a/../x", "ln/x", AFTP_JOURNAL_DIR,
                                  AFTP_JOURNAL_DIR "/x", "ln"};
    aftp_treestore ts;
    aftp_entry_verdict v;
    assert_int_equal(mkdirat(root, "elsewhere", 0755), 0);
    assert_int_equal(symlinkat("elsewhere", root, "ln"), 0);
    store_init(&ts, root, 1, 0);
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        aftp_entry_info e = file_entry((uint32_t)i * 3, paths[i], 10, T1, 1, 0);
        if (strcmp(paths[i], "ln") != 0) /* a file may replace a link, with overwrite */
            assert_int_equal(verdict_of(&ts, &e, &v), AFTP_ERR_PATH_REJECTED);
        e.kind = AFTP_ENTRY_DIR;
        e.file.size = e.file.block_size = 0;
        e.file.file_id++;
        assert_int_equal(verdict_of(&ts, &e, &v), AFTP_ERR_PATH_REJECTED);
        e.kind = AFTP_ENTRY_SYMLINK;
        e.target = "/etc";
        e.file.file_id++;
        if (strcmp(paths[i], "ln") != 0) /* a link replaces a link only with overwrite */
            assert_int_equal(verdict_of(&ts, &e, &v), AFTP_ERR_PATH_REJECTED);
    }
    assert_int_equal(io_test_count_entries(root), 2); /* elsewhere, ln: no file, no resume dir */
    assert_int_equal(io_test_count_entries(openat(root, "elsewhere", O_RDONLY)), 0);
    aftp_treestore_fini(&ts);
    /* Links not allowed: refused with PATH_REJECTED, never skipped silently. */
    store_init(&ts, root, 0, 0);
    aftp_entry_info e = {.kind = AFTP_ENTRY_SYMLINK, .target = "x",
                         .file = {.file_id = 1, .path = "newlink", .mtime_ns = T1}};
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_ERR_PATH_REJECTED);
    assert_false(io_test_exists(root, "newlink"));
    aftp_treestore_fini(&ts);
    /* One-file mode's store refuses the private directory too. */
    aftp_store st;
    aftp_store_init(&st, root, 1);
    aftp_file_info fi = {.file_id = 1, .size = 10, .block_size = BS,
                         .path = AFTP_JOURNAL_DIR "/0123456789abcdef0123456789abcdef.part"};
    assert_int_equal(aftp_store_open(&st, &fi), AFTP_ERR_PATH_REJECTED);
    aftp_store_fini(&st);
}

/* ---- full disk ---- */

static void test_no_space_then_freed(void **state)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/small", io_test_scratch_path(state));
    assert_int_equal(mkdir(dir, 0755), 0);
    if (!io_test_mount_private_tmpfs(dir, "1m"))
        skip(); /* needs root: a private mount namespace */
    int root = open(dir, O_RDONLY | O_DIRECTORY);
    aftp_treestore ts;
    aftp_entry_verdict v;
    store_init(&ts, root, 0, 0);
    write_file(root, "filler", 700 * 1024, 1, T1);
    aftp_entry_info e = file_entry(1, "a", 600 * 1024, T1, 1, 0);
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_ERR_NO_SPACE);
    assert_non_null(strstr(ts.report.message, "bytes needed"));
    assert_int_equal(unlinkat(root, "filler", 0), 0);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
    aftp_treestore_fini(&ts);
    close(root);
}

/* ---- group commit, bounds ---- */

static void test_no_final_name_before_commit_group(void **state)
{
    int results[2];
    rig *r = rig_start(state, 9);
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info a = file_entry(1, "d/a", RSIZE, T1, 1, 0);
    aftp_entry_info b = file_entry(2, "b", RSIZE, T2, 2, 0);
    assert_int_equal(verdict_of(&r->ts, &a, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &a, &r->v, r->data, 0, UINT64_MAX);
    assert_int_equal(verdict_of(&r->ts, &b, &r->v), AFTP_VERDICT_SEND);
    write_blocks(&r->ts, &b, &r->v, r->data, 0, UINT64_MAX);
    assert_int_equal(ops->close(&r->ts, 1, AFTP_CLOSE_DEFER), AFTP_OK);
    assert_int_equal(ops->close(&r->ts, 2, AFTP_CLOSE_DEFER), AFTP_OK);
    assert_false(io_test_exists(r->root, "d/a"));
    assert_false(io_test_exists(r->root, "b"));
    assert_int_equal(ops->commit_group(&r->ts, (const uint32_t[]){1, 2}, 2, results), AFTP_OK);
    assert_int_equal(results[0], AFTP_OK);
    assert_int_equal(results[1], AFTP_OK);
    assert_true(io_test_exists(r->root, "d/a"));
    assert_true(io_test_exists(r->root, "b"));
    aftp_treestore_fini(&r->ts);
}

/* ---- files too small for a journal ---- */

/* The names in the resume directory: how many, and whether any is a journal. */
static int partial_names(int root, int *journals)
{
    int pd = openat(root, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    int count = 0;
    *journals = 0;
    if (pd < 0)
        return 0;
    DIR *d = fdopendir(pd);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        count++;
        *journals += strstr(de->d_name, ".jrnl") != NULL;
    }
    closedir(d);
    return count;
}

/* A file of at most AFTP_TREESTORE_WHOLE_MAX bytes keeps no journal even
 * for a sender that resumes, synced or not: a kill leaves its partial data
 * alone, the next session sends it whole (SEND, never RESUME) and its
 * partial file is replaced, and nothing is left once it is committed. */
static void test_small_file_keeps_no_journal(void **state)
{
    enum { SMALL = 3 * BS + 5 };
    static uint8_t data[SMALL];
    int results[1];
    int journals;
    aftp_treestore ts;
    aftp_entry_verdict v;
    int root = io_test_scratch_fd(state);
    io_test_pattern(data, SMALL, 11);
    aftp_entry_info e = file_entry(1, "small", SMALL, T1, 9, AFTP_ENTRY_RESUME);
    pid_t pid = fork_to_kill();
    if (pid == 0) {
        store_init(&ts, root, 0, 0);
        assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
        write_blocks(&ts, &e, &v, data, 0, 2);
        assert_int_equal(aftp_treestore_sync(&ts), AFTP_OK);
        assert_int_equal(aftp_treestore_tick(&ts, 1), AFTP_OK);
        assert_int_equal(aftp_treestore_tick(&ts, 1 + AFTP_TREESTORE_SYNC_NS), AFTP_OK);
    }
    kill9(pid);
    assert_int_equal(partial_names(root, &journals), 1); /* its partial data only */
    assert_int_equal(journals, 0);
    store_init(&ts, root, 0, 0);
    e.file.file_id = 2;
    assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
    write_blocks(&ts, &e, &v, data, 0, UINT64_MAX);
    expect_view(&ts, &e, data);
    assert_int_equal(ops->close(&ts, 2, AFTP_CLOSE_DEFER), AFTP_OK);
    assert_int_equal(ops->commit_group(&ts, (const uint32_t[]){2}, 1, results), AFTP_OK);
    assert_int_equal(results[0], AFTP_OK);
    aftp_treestore_fini(&ts);
    uint8_t *got = read_local_at(root, "small", SMALL);
    assert_memory_equal(got, data, SMALL);
    free(got);
    assert_false(io_test_exists(root, AFTP_JOURNAL_DIR));
}

/* ---- the group commit's order and failures (test builds: fault hook) ---- */

#ifdef AFTP_TEST_HOOKS
/* What the hook saw, and the one step it fails. */
typedef struct steps {
    int root;
    int fail_step;         /* -1: none */
    const char *fail_path; /* the path whose step fails */
    char order[32];        /* S, R, D in the order they came */
} steps;

static const char *group_paths[] = {"d/a", "b", "d/c"};

static int on_step(void *user, int step, const char *path)
{
    steps *s = user;
    size_t n = strlen(s->order);
    if (n + 1 < sizeof s->order)
        s->order[n] = "SRD"[step];
    if (step == AFTP_TREESTORE_STEP_SYNC) { /* no final name before the data is durable */
        for (size_t i = 0; i < 3; i++)
            assert_false(io_test_exists(s->root, group_paths[i]));
    }
    return step == s->fail_step && strcmp(path, s->fail_path) == 0 ? EIO : 0;
}

/* d/a (journalled, RESUME), b and d/c (whole) received and verified, then
 * committed as one group under the hook, whose results are `expected`. */
static rig *commit_three(void **state, uint32_t seed, steps *s, const int expected[3])
{
    int results[3];
    rig *r = rig_start(state, seed);
    uint32_t ids[3] = {1, 2, 3};
    uint64_t sizes[3] = {RSIZE, 2 * BS, BS + 7};
    assert_int_equal(mkdirat(r->root, "d", 0755), 0);
    store_init(&r->ts, r->root, 0, 0);
    for (size_t i = 0; i < 3; i++) {
        aftp_entry_info e = file_entry(ids[i], group_paths[i], sizes[i], T1, 40 + i,
                                       AFTP_ENTRY_RESUME);
        assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_SEND);
        write_blocks(&r->ts, &e, &r->v, r->data, 0, UINT64_MAX);
        expect_view(&r->ts, &e, r->data);
        assert_int_equal(ops->close(&r->ts, ids[i], AFTP_CLOSE_DEFER), AFTP_OK);
    }
    s->root = r->root;
    r->ts.fault = on_step;
    r->ts.fault_user = s;
    assert_int_equal(ops->commit_group(&r->ts, ids, 3, results), AFTP_OK);
    aftp_treestore_fini(&r->ts);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(results[i], expected[i]);
        assert_int_equal(io_test_exists(r->root, group_paths[i]),
                         expected[i] == AFTP_OK || /* renamed, not vouched for */
                             s->fail_step == AFTP_TREESTORE_STEP_DIRSYNC);
    }
    return r;
}

/* One data sync for the whole group, before any rename; then the renames;
 * then one sync per distinct directory (d and the root); all succeed. */
static void test_group_syncs_data_once_before_any_rename(void **state)
{
    steps s = {.fail_step = -1, .fail_path = ""};
    rig *r = commit_three(state, 12, &s, (const int[]){AFTP_OK, AFTP_OK, AFTP_OK});
    assert_string_equal(s.order, "SRRRDD");
    assert_false(io_test_exists(r->root, AFTP_JOURNAL_DIR));
}

/* A rename that fails fails its file only; a journalled file keeps its
 * state, every block held, for the next session. */
static void test_failed_rename_fails_only_its_file(void **state)
{
    steps s = {.fail_step = AFTP_TREESTORE_STEP_RENAME, .fail_path = "d/a"};
    rig *r = commit_three(state, 13, &s, (const int[]){AFTP_ERR_IO, AFTP_OK, AFTP_OK});
    assert_false(io_test_exists(r->root, "d/a"));
    store_init(&r->ts, r->root, 0, 0);
    aftp_entry_info e = file_entry(4, "d/a", RSIZE, T1, 40, AFTP_ENTRY_RESUME);
    assert_int_equal(verdict_of(&r->ts, &e, &r->v), AFTP_VERDICT_RESUME);
    assert_int_equal(r->v.held_count, 1);
    assert_int_equal(r->v.held[0].len, RBLOCKS);
    aftp_treestore_fini(&r->ts);
}

/* The group's data sync failing fails every file of it, none renamed. */
static void test_failed_data_sync_fails_the_group(void **state)
{
    steps s = {.fail_step = AFTP_TREESTORE_STEP_SYNC, .fail_path = ""};
    commit_three(state, 14, &s, (const int[]){AFTP_ERR_IO, AFTP_ERR_IO, AFTP_ERR_IO});
    assert_string_equal(s.order, "S");
}

/* A directory's sync failing fails the files renamed into it, only those. */
static void test_failed_dir_sync_fails_its_files(void **state)
{
    steps s = {.fail_step = AFTP_TREESTORE_STEP_DIRSYNC, .fail_path = "d"};
    commit_three(state, 15, &s, (const int[]){AFTP_ERR_IO, AFTP_OK, AFTP_ERR_IO});
    assert_string_equal(s.order, "SRRRDD");
}
#else
#define HOOKS_ONLY(name)                                                                      \
    static void name(void **state)                                                           \
    {                                                                                        \
        (void)state;                                                                         \
        io_test_needs_hooks();                                                               \
    }
HOOKS_ONLY(test_group_syncs_data_once_before_any_rename)
HOOKS_ONLY(test_failed_rename_fails_only_its_file)
HOOKS_ONLY(test_failed_data_sync_fails_the_group)
HOOKS_ONLY(test_failed_dir_sync_fails_its_files)
#endif

enum { MANY = 10000 };

static void test_descriptors_bounded_for_many_entries(void **state)
{
    int root = io_test_scratch_fd(state);
    static char paths[MANY][16];
    static uint32_t ids[MANY];
    static int results[MANY];
    const uint8_t byte = 'x';
    aftp_treestore ts;
    aftp_entry_verdict v;
    store_init(&ts, root, 0, 0);
    int before = io_test_count_open_fds();
    for (uint32_t i = 0; i < MANY; i++) {
        snprintf(paths[i], sizeof paths[i], "f%05u", i);
        aftp_entry_info e = file_entry(i, paths[i], 1, T1, i, 0);
        assert_int_equal(verdict_of(&ts, &e, &v), AFTP_VERDICT_SEND);
        ids[i] = i;
    }
    for (uint32_t i = 0; i < MANY; i++) { /* each file reopened for its write */
        assert_int_equal(ops->write(&ts, i, 0, &byte, 1), AFTP_OK);
        assert_int_equal(ops->close(&ts, i, AFTP_CLOSE_DEFER), AFTP_OK);
    }
    /* the partial files, and the resume directory made by the first */
    assert_true(io_test_count_open_fds() - before <= (int)AFTP_TREESTORE_MAX_OPEN + 1);
    assert_int_equal(ops->commit_group(&ts, ids, 100, results), AFTP_OK);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(results[i], AFTP_OK);
    assert_true(io_test_exists(root, paths[99]));
    assert_false(io_test_exists(root, paths[100]));
    aftp_treestore_fini(&ts);
    assert_int_equal(io_test_count_open_fds(), before); /* the resume directory closed too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_tree_placed_through_ops),
        IO_TEST_SCRATCH(test_skip_identical_by_mtime_or_content),
        IO_TEST_SCRATCH(test_resume_holds_exactly_the_synced_blocks),
        IO_TEST_SCRATCH(test_changed_source_or_no_resume_flag_sends),
        IO_TEST_SCRATCH(test_damaged_journal_sends),
        IO_TEST_SCRATCH(test_periodic_sync_bounds_loss),
        IO_TEST_SCRATCH(test_tick_syncs_blocks_a_second_old),
        IO_TEST_SCRATCH(test_session_end_keeps_all_received),
        IO_TEST_SCRATCH(test_shared_root_one_writer_per_file),
        IO_TEST_SCRATCH(test_discarded_whole_file_not_resumed),
        IO_TEST_SCRATCH(test_hostile_paths_refused),
        IO_TEST_SCRATCH(test_no_space_then_freed),
        IO_TEST_SCRATCH(test_no_final_name_before_commit_group),
        IO_TEST_SCRATCH(test_descriptors_bounded_for_many_entries),
        IO_TEST_SCRATCH(test_small_file_keeps_no_journal),
        IO_TEST_SCRATCH(test_group_syncs_data_once_before_any_rename),
        IO_TEST_SCRATCH(test_failed_rename_fails_only_its_file),
        IO_TEST_SCRATCH(test_failed_data_sync_fails_the_group),
        IO_TEST_SCRATCH(test_failed_dir_sync_fails_its_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
