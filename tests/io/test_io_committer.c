/* The receiver's group commit on a worker thread (io/run/aftp_committer):
 * while the worker is inside the group's data sync, the caller's thread
 * goes on storing and committing other files through the same treestore,
 * no final name of the group exists, and no outcome is handed out; once
 * the worker is let go, wake_fd turns readable and the outcome is the
 * group's, its files under their final names. */
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_committer.h"
#include "aftp_treestore.h"
#include "io_testutil.h"

enum { BS = 4096, SIZE = 3 * BS + 11 };

static const aftp_storage_ops *ops = &aftp_treestore_ops;

#ifdef AFTP_TEST_HOOKS
/* The worker's data sync, held until the test lets it go (the treestore's
 * fault hook: test builds only). */
typedef struct gate {
    sem_t entered, release;
} gate;

static int hold_sync(void *user, int step, const char *path)
{
    gate *g = user;
    (void)path;
    if (step == AFTP_TREESTORE_STEP_SYNC) {
        sem_post(&g->entered);
        sem_wait(&g->release);
    }
    return 0;
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
    aftp_committer c;
} rig;

static rig *rig_start(void **state)
{
    static rig r;
    aftp_place_options opt;
    char why[256];
    r.root = io_test_scratch_fd(state);
    io_test_pattern(r.data, SIZE, 7);
    aftp_place_defaults(&opt);
    assert_int_equal(aftp_treestore_init(&r.ts, r.root, &opt, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_committer_init(&r.c, &r.ts, 8), AFTP_OK);
    receive(&r.ts, 1, "a", r.data);
    return &r;
}

static void test_group_runs_beside_the_caller(void **state)
{
    rig *r = rig_start(state);
    aftp_committer *c = &r->c;
    receive(&r->ts, 2, "b", r->data);
    int rc = -1;
    const int *results = NULL;
#ifdef AFTP_TEST_HOOKS
    gate g;
    sem_init(&g.entered, 0, 0);
    sem_init(&g.release, 0, 0);
    r->ts.fault = hold_sync;
    r->ts.fault_user = &g;
#endif
    assert_int_equal(aftp_committer_start(c, (const uint32_t[]){1, 2}, 2), AFTP_OK);
    assert_true(aftp_committer_busy(c));
#ifdef AFTP_TEST_HOOKS
    sem_wait(&g.entered); /* the worker is inside the group's data sync */
    assert_int_equal(aftp_committer_collect(c, 0, &rc, &results), 0);
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
    assert_int_equal(aftp_committer_collect(c, 0, &rc, &results), 1);
    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(results[0], AFTP_OK);
    assert_int_equal(results[1], AFTP_OK);
    assert_true(io_test_exists(r->root, "a") && io_test_exists(r->root, "b"));
    assert_false(aftp_committer_busy(c));
    /* The next group, on the same worker. */
    assert_int_equal(aftp_committer_start(c, (const uint32_t[]){3}, 1), AFTP_OK);
    assert_int_equal(aftp_committer_collect(c, 1, &rc, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    assert_true(io_test_exists(r->root, "c"));
    aftp_committer_fini(c);
    aftp_treestore_fini(&r->ts);
#ifdef AFTP_TEST_HOOKS
    sem_destroy(&g.entered);
    sem_destroy(&g.release);
#endif
}

/* The session's end: a group still in flight runs to its end in fini. */
static void test_fini_ends_the_group_in_flight(void **state)
{
    rig *r = rig_start(state);
    assert_int_equal(aftp_committer_start(&r->c, (const uint32_t[]){1}, 1), AFTP_OK);
    aftp_committer_fini(&r->c);
    assert_true(io_test_exists(r->root, "a"));
    aftp_treestore_fini(&r->ts);
}

#ifdef AFTP_TEST_HOOKS
/* The worker held just before it renames a file of the group. */
static int hold_rename(void *user, int step, const char *path)
{
    gate *g = user;
    (void)path;
    if (step == AFTP_TREESTORE_STEP_RENAME) {
        sem_post(&g->entered);
        sem_wait(&g->release);
    }
    return 0;
}

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
    gate g;
    int rc = -1;
    const int *results = NULL;
    uint8_t back[SIZE + 1];
    sem_init(&g.entered, 0, 0);
    sem_init(&g.release, 0, 0);
    r->ts.fault = hold_rename;
    r->ts.fault_user = &g;
    assert_int_equal(aftp_committer_start(&r->c, (const uint32_t[]){1}, 1), AFTP_OK);
    sem_wait(&g.entered); /* about to rename "a" into the root */
    enter_new_directories(&r->ts, r->root);
    r->ts.fault = NULL; /* read by the worker only in its steps, after the release */
    sem_post(&g.release);
    assert_int_equal(aftp_committer_collect(&r->c, 1, &rc, &results), 1);
    assert_int_equal(rc, AFTP_OK);
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
    aftp_committer_fini(&r->c);
    aftp_treestore_fini(&r->ts);
    sem_destroy(&g.entered);
    sem_destroy(&g.release);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_TEST_SCRATCH(test_group_runs_beside_the_caller),
        IO_TEST_SCRATCH(test_fini_ends_the_group_in_flight),
        IO_TEST_SCRATCH(test_caller_directories_leave_the_group_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
