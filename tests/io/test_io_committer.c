/* The receiver's group commit on a worker thread (io/run/aftp_committer):
 * while the worker is inside the group's data sync, the caller's thread
 * goes on storing and committing other files through the same treestore,
 * no final name of the group exists, and no outcome is handed out; once
 * the worker is let go, wake_fd turns readable and the outcome is the
 * group's, its files under their final names. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
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

#include "aftp_committer.h"
#include "aftp_treestore.h"
#include "io_testutil.h"

enum { BS = 4096, SIZE = 3 * BS + 11 };

static const aftp_storage_ops *ops = &aftp_treestore_ops;

#ifdef AFTP_TEST_HOOKS
/* The worker held at one step of its group (AFTP_TREESTORE_STEP_*) until
 * the test lets it go (the treestore's fault hook: test builds only). */
typedef struct gate {
    sem_t entered, release;
    int step;
} gate;

static int hold_at_step(void *user, int step, const char *path)
{
    gate *g = user;
    (void)path;
    if (step == g->step) {
        sem_post(&g->entered);
        sem_wait(&g->release);
    }
    return 0;
}

/* The gate set on ts's fault hook (g->step chosen by the caller). */
static void gate_set(gate *g, aftp_treestore *ts)
{
    sem_init(&g->entered, 0, 0);
    sem_init(&g->release, 0, 0);
    ts->fault = hold_at_step;
    ts->fault_user = g;
}

static void gate_free(gate *g)
{
    sem_destroy(&g->entered);
    sem_destroy(&g->release);
}
#endif

/* File `id` at `path` received whole and verified: closed DEFER. */
static void receive(aftp_treestore *ts, uint32_t id, const char *path, const uint8_t *data)
{
    aftp_entry_info e = {.kind = AFTP_ENTRY_FILE};
    e.file = (aftp_file_info){.file_id = id, .size = SIZE, .mode = 0640, .block_size = BS,
                              .path = path};
    aftp_entry_verdict v;
    assert_int_equal(ops->entry(ts, &e, &v), AFTP_OK);
    assert_int_equal(v.verdict, AFTP_VERDICT_SEND);
    for (uint64_t off = 0; off < SIZE; off += BS)
        assert_int_equal(ops->write(ts, id, off, data + off, SIZE - off < BS ? SIZE - off : BS),
                         AFTP_OK);
    assert_int_equal(ops->close(ts, id, AFTP_CLOSE_DEFER), AFTP_OK);
}

/* A treestore in the scratch directory with its committer, file 1 "a"
 * received and waiting for its commit. */
typedef struct rig {
    int root;
    uint8_t data[SIZE];
    aftp_treestore ts;
    aftp_commit_pool *pool; /* of one thread */
    aftp_committer c;
} rig;

/* The rig's committer ended, then its store, then its pool. */
static void rig_stop(rig *r)
{
    aftp_committer_fini(&r->c);
    aftp_treestore_fini(&r->ts);
    aftp_commit_pool_del(r->pool);
}

static rig *rig_start(void **state)
{
    static rig r;
    aftp_place_options opt;
    char why[256];
    r.root = io_test_scratch_fd(state);
    io_test_pattern(r.data, SIZE, 7);
    aftp_place_defaults(&opt);
    assert_int_equal(aftp_treestore_init(&r.ts, r.root, &opt, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_commit_pool_new(&r.pool, 1), AFTP_OK);
    assert_int_equal(aftp_committer_init(&r.c, &r.ts, 8, r.pool), AFTP_OK);
    receive(&r.ts, 1, "a", r.data);
    return &r;
}

static void test_group_runs_beside_the_caller(void **state)
{
    rig *r = rig_start(state);
    aftp_committer *c = &r->c;
    receive(&r->ts, 2, "b", r->data);
    const int *results = NULL;
#ifdef AFTP_TEST_HOOKS
    gate g = {.step = AFTP_TREESTORE_STEP_SYNC};
    gate_set(&g, &r->ts);
#endif
    assert_int_equal(aftp_committer_start(c, (const uint32_t[]){1, 2}, 2), AFTP_OK);
    assert_true(aftp_committer_busy(c));
#ifdef AFTP_TEST_HOOKS
    sem_wait(&g.entered); /* the worker is inside the group's data sync */
    assert_int_equal(aftp_committer_collect(c, 0, &results), 0);
    assert_false(io_test_exists(r->root, "a"));
#endif
    /* Meanwhile the caller's thread stores another file (the files of the
     * group are not its to touch). */
    receive(&r->ts, 3, "c", r->data);
    assert_int_equal(aftp_committer_start(c, (const uint32_t[]){3}, 1), AFTP_ERR_INVALID_STATE);
#ifdef AFTP_TEST_HOOKS
    r->ts.fault = NULL; /* read by the worker only in its steps, which wait on release */
    sem_post(&g.release);
#endif
    struct pollfd p = {.fd = c->wake_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, -1), 1);
    assert_int_equal(aftp_committer_collect(c, 0, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    assert_int_equal(results[1], AFTP_OK);
    assert_true(io_test_exists(r->root, "a") && io_test_exists(r->root, "b"));
    assert_false(aftp_committer_busy(c));
    /* The next group, on the same worker. */
    assert_int_equal(aftp_committer_start(c, (const uint32_t[]){3}, 1), AFTP_OK);
    assert_int_equal(aftp_committer_collect(c, 1, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    assert_true(io_test_exists(r->root, "c"));
    rig_stop(r);
#ifdef AFTP_TEST_HOOKS
    gate_free(&g);
#endif
}

/* A file of the group in flight is the worker's alone: a write, a view or
 * a close of it by the caller's thread is refused, not run beside the
 * worker's sync and rename (a close that discarded it would free what the
 * worker is using). */
static void test_group_files_refused_to_the_caller(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    rig *r = rig_start(state);
    gate g = {.step = AFTP_TREESTORE_STEP_SYNC};
    const uint8_t *view;
    const int *results = NULL;
    gate_set(&g, &r->ts);
    assert_int_equal(aftp_committer_start(&r->c, (const uint32_t[]){1}, 1), AFTP_OK);
    sem_wait(&g.entered);
    assert_int_equal(ops->write(&r->ts, 1, 0, r->data, BS), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->view(&r->ts, 1, 0, BS, &view), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->close(&r->ts, 1, AFTP_CLOSE_DISCARD), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->close(&r->ts, 1, AFTP_CLOSE_DEFER), AFTP_ERR_INVALID_STATE);
    r->ts.fault = NULL;
    sem_post(&g.release);
    assert_int_equal(aftp_committer_collect(&r->c, 1, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    assert_true(io_test_exists(r->root, "a"));
    rig_stop(r);
    gate_free(&g);
#endif
}

/* The session's end: a group still in flight runs to its end in fini. */
static void test_fini_ends_the_group_in_flight(void **state)
{
    rig *r = rig_start(state);
    assert_int_equal(aftp_committer_start(&r->c, (const uint32_t[]){1}, 1), AFTP_OK);
    aftp_committer_fini(&r->c);
    assert_true(io_test_exists(r->root, "a"));
    rig_stop(r);
}

#ifdef AFTP_TEST_HOOKS
/* Entries checked in every slot's worth of new directories: the caller's
 * directory cache turns over completely. */
static void enter_new_directories(aftp_treestore *ts, int root)
{
    for (unsigned i = 0; i < AFTP_TREESTORE_DIR_CACHE; i++) {
        char dir[16], path[32];
        snprintf(dir, sizeof dir, "d%02u", i);
        snprintf(path, sizeof path, "%s/f", dir);
        assert_int_equal(mkdirat(root, dir, 0755), 0);
        aftp_entry_info e = {.kind = AFTP_ENTRY_FILE};
        e.file = (aftp_file_info){.file_id = 10 + i, .size = SIZE, .mode = 0640,
                                  .block_size = BS, .path = path};
        aftp_entry_verdict v;
        assert_int_equal(ops->entry(ts, &e, &v), AFTP_OK);
        assert_int_equal(v.verdict, AFTP_VERDICT_SEND);
    }
}
#endif

/* While the worker renames the group's files, the caller's thread checks
 * new entries in other directories: the directories a group renames into
 * are its own, so the caller's turning over its directory cache neither
 * closes one under the worker nor moves a file of the group into another
 * directory. */
static void test_caller_directories_leave_the_group_alone(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    rig *r = rig_start(state);
    gate g = {.step = AFTP_TREESTORE_STEP_RENAME}; /* just before it renames "a" */
    const int *results = NULL;
    uint8_t back[SIZE + 1];
    gate_set(&g, &r->ts);
    assert_int_equal(aftp_committer_start(&r->c, (const uint32_t[]){1}, 1), AFTP_OK);
    sem_wait(&g.entered); /* about to rename "a" into the root */
    enter_new_directories(&r->ts, r->root);
    r->ts.fault = NULL; /* read by the worker only in its steps, after the release */
    sem_post(&g.release);
    assert_int_equal(aftp_committer_collect(&r->c, 1, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    int fd = openat(r->root, "a", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, back, sizeof back), SIZE);
    assert_memory_equal(back, r->data, SIZE);
    close(fd);
    for (unsigned i = 0; i < AFTP_TREESTORE_DIR_CACHE; i++) {
        char moved[16];
        snprintf(moved, sizeof moved, "d%02u/a", i);
        assert_false(io_test_exists(r->root, moved));
    }
    rig_stop(r);
    gate_free(&g);
#endif
}

/* Writes to `name` beneath root until the disk is full. */
static void fill_disk(int root, const char *name)
{
    static const uint8_t chunk[1 << 16];
    int fd = openat(root, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    while (write(fd, chunk, sizeof chunk) > 0)
        continue;
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

/* A full disk at the group's end: the group's file is durable under its
 * name, and only the resume journal of a file still arriving cannot be
 * recorded (the sync after every group). That failure is the arriving
 * file's (its previous journal stays, still true), never the group's:
 * its files succeed, by the committer and by commit_group alike. The
 * last test: it leaves this process in a mount namespace of its own. */
static void test_full_disk_after_the_group_fails_not_the_group(void **state)
{
    enum { BIG = 32 * BS }; /* journalled: beyond AFTP_TREESTORE_WHOLE_MAX */
    static uint8_t big[BIG];
    char dir[700];
    snprintf(dir, sizeof dir, "%s/small", io_test_scratch_path(state));
    assert_int_equal(mkdir(dir, 0755), 0);
    if (!io_test_mount_private_tmpfs(dir, "1m"))
        skip();
    rig r;
    aftp_place_options opt;
    char why[256];
    r.root = open(dir, O_RDONLY | O_DIRECTORY);
    io_test_pattern(r.data, SIZE, 7);
    io_test_pattern(big, BIG, 8);
    aftp_place_defaults(&opt);
    assert_int_equal(aftp_treestore_init(&r.ts, r.root, &opt, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_commit_pool_new(&r.pool, 1), AFTP_OK);
    assert_int_equal(aftp_committer_init(&r.c, &r.ts, 8, r.pool), AFTP_OK);
    receive(&r.ts, 1, "a", r.data);
    receive(&r.ts, 2, "b", r.data);
    aftp_entry_info e = {.kind = AFTP_ENTRY_FILE};
    e.file = (aftp_file_info){.file_id = 3, .size = BIG, .mode = 0640, .block_size = BS,
                              .path = "arriving"};
    aftp_entry_verdict v;
    assert_int_equal(ops->entry(&r.ts, &e, &v), AFTP_OK);
    assert_int_equal(v.verdict, AFTP_VERDICT_SEND);
    assert_int_equal(ops->write(&r.ts, 3, 0, big, BS), AFTP_OK);
    fill_disk(r.root, "filler");
    int results[1] = {-1};
    const int *collected = NULL;
    assert_int_equal(aftp_committer_start(&r.c, (const uint32_t[]){1}, 1), AFTP_OK);
    assert_int_equal(aftp_committer_collect(&r.c, 1, &collected), 1);
    assert_int_equal(collected[0], AFTP_OK);
    assert_int_equal(ops->commit_group(&r.ts, (const uint32_t[]){2}, 1, results), AFTP_OK);
    assert_int_equal(results[0], AFTP_OK);
    assert_true(io_test_exists(r.root, "a") && io_test_exists(r.root, "b"));
    rig_stop(&r);
    close(r.root);
    assert_int_equal(umount2(dir, MNT_DETACH), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_group_runs_beside_the_caller),
        IO_TEST_SCRATCH(test_fini_ends_the_group_in_flight),
        IO_TEST_SCRATCH(test_caller_directories_leave_the_group_alone),
        IO_TEST_SCRATCH(test_group_files_refused_to_the_caller),
        /* last: it leaves this process in a mount namespace of its own */
        IO_TEST_SCRATCH(test_full_disk_after_the_group_fails_not_the_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
