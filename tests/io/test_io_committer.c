/* The receiver's group commit on a worker thread (io/run/aftp_committer):
 * while the worker is inside the group's data sync, the caller's thread
 * goes on storing and committing other files through the same treestore,
 * no final name of the group exists, and no outcome is handed out; once
 * the worker is let go, wake_fd turns readable and the outcome is the
 * group's, its files under their final names. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* The gate on ts's fault hook too (one gate may hold many stores). */
static void gate_attach(gate *g, aftp_treestore *ts)
{
    ts->fault = hold_at_step;
    ts->fault_user = g;
}

/* The gate set on ts's fault hook (g->step chosen by the caller). */
static void gate_set(gate *g, aftp_treestore *ts)
{
    sem_init(&g->entered, 0, 0);
    sem_init(&g->release, 0, 0);
    gate_attach(g, ts);
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
    assert_int_equal(aftp_committer_init(&r.c, &r.ts, 0, 8, r.pool), AFTP_OK);
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

#ifdef AFTP_TEST_HOOKS
/* One session of a server, as the pool sees it: its own root (a directory
 * of the scratch), store and committer, on filesystem `dev` as the pool
 * counts them (the scratch's own is one for all: the tests name others). On the heap, as a server's
 * session is: freed at its end, so a pool thread still at its group
 * would be caught (ASan). */
typedef struct lane {
    int root;
    aftp_treestore ts;
    aftp_committer c;
} lane;

static lane *lane_new(void **state, unsigned n, dev_t dev, aftp_commit_pool *pool)
{
    lane *l = calloc(1, sizeof *l);
    aftp_place_options opt;
    char name[16], why[256];
    assert_non_null(l);
    snprintf(name, sizeof name, "s%u", n);
    assert_int_equal(mkdirat(io_test_scratch_fd(state), name, 0755), 0);
    l->root = openat(io_test_scratch_fd(state), name, O_RDONLY | O_DIRECTORY);
    assert_true(l->root >= 0);
    aftp_place_defaults(&opt);
    assert_int_equal(aftp_treestore_init(&l->ts, l->root, &opt, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_committer_init(&l->c, &l->ts, dev, 8, pool), AFTP_OK);
    return l;
}

/* File `id` ("f<id>") received and its group started. */
static void lane_commit(lane *l, uint32_t id, const uint8_t *data)
{
    char name[16];
    snprintf(name, sizeof name, "f%u", (unsigned)id);
    receive(&l->ts, id, name, data);
    assert_int_equal(aftp_committer_start(&l->c, &id, 1), AFTP_OK);
}

/* The lane's group ended once a pool thread ran it (its wake_fd, as a
 * server's worker polls it), file `id` committed. */
static void lane_collect(lane *l, uint32_t id)
{
    const int *results = NULL;
    char name[16];
    struct pollfd ran = {.fd = l->c.wake_fd, .events = POLLIN};
    snprintf(name, sizeof name, "f%u", (unsigned)id);
    assert_int_equal(poll(&ran, 1, -1), 1);
    assert_int_equal(aftp_committer_collect(&l->c, 0, &results), 1);
    assert_int_equal(results[0], AFTP_OK);
    assert_true(io_test_exists(l->root, name));
}

/* The session's end, as the server's: its committer (waiting for its
 * group), its store, its memory. */
static void lane_del(lane *l)
{
    aftp_committer_fini(&l->c);
    aftp_treestore_fini(&l->ts);
    close(l->root);
    free(l);
}

/* Threads of this process (entries of /proc/self/task). */
static int count_threads(void)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    int n = io_test_count_entries(fd);
    close(fd);
    return n;
}

static void gate_init(gate *g, int step)
{
    g->step = step;
    sem_init(&g->entered, 0, 0);
    sem_init(&g->release, 0, 0);
}
#endif

/* Six sessions commit at once on a pool of two: two threads run two
 * groups, the process has no other thread for them, and the four other
 * groups wait their turn, then run. */
static void test_pool_runs_many_sessions_on_its_threads(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    enum { LANES = 6 };
    static uint8_t data[SIZE];
    aftp_commit_pool *pool;
    lane *l[LANES];
    gate g;
    const int *results;
    io_test_pattern(data, SIZE, 3);
    gate_init(&g, AFTP_TREESTORE_STEP_SYNC);
    assert_int_equal(aftp_commit_pool_new(&pool, 2), AFTP_OK);
    int before = count_threads();
    for (unsigned i = 0; i < LANES; i++) {
        l[i] = lane_new(state, i, 1 + i, pool);
        gate_attach(&g, &l[i]->ts);
        lane_commit(l[i], 1, data);
    }
    sem_wait(&g.entered);
    sem_wait(&g.entered); /* two groups inside their data sync */
    assert_int_equal(aftp_commit_pool_threads(pool), 2);
    assert_int_equal(count_threads(), before + 2);
    unsigned ended = 0;
    for (unsigned i = 0; i < LANES; i++)
        ended += (unsigned)aftp_committer_collect(&l[i]->c, 0, &results);
    assert_int_equal(ended, 0);
    for (unsigned i = 0; i < LANES; i++)
        sem_post(&g.release);
    for (unsigned i = 0; i < LANES; i++) {
        lane_collect(l[i], 1);
        lane_del(l[i]);
    }
    assert_int_equal(aftp_commit_pool_threads(pool), 2);
    aftp_commit_pool_del(pool);
    gate_free(&g);
#endif
}

/* Sessions' groups interleaved on a pool of two, round after round, each
 * collected in another order than started: every group of every session
 * ends, and a session's next group starts only once its last was
 * collected (one in flight: its groups stay in its order). */
static void test_pool_interleaves_sessions_in_their_order(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    enum { ROUNDS = 3, SESSIONS = 4 };
    static uint8_t data[SIZE];
    aftp_commit_pool *pool;
    lane *l[SESSIONS];
    io_test_pattern(data, SIZE, 4);
    assert_int_equal(aftp_commit_pool_new(&pool, 2), AFTP_OK);
    for (unsigned i = 0; i < SESSIONS; i++)
        l[i] = lane_new(state, i, 1 + i, pool);
    for (uint32_t round = 1; round <= ROUNDS; round++) {
        for (unsigned i = 0; i < SESSIONS; i++) {
            lane_commit(l[i], round, data);
            assert_int_equal(aftp_committer_start(&l[i]->c, &round, 1), AFTP_ERR_INVALID_STATE);
        }
        for (unsigned i = SESSIONS; i-- > 0;)
            lane_collect(l[i], round);
    }
    for (unsigned i = 0; i < SESSIONS; i++)
        lane_del(l[i]);
    aftp_commit_pool_del(pool);
#endif
}

#ifdef AFTP_TEST_HOOKS
/* Two sessions on a pool: "stalled", whose group is held inside its data
 * sync (its fsync does not return until the gate lets it go), and "next",
 * with nothing in flight. */
typedef struct stall {
    uint8_t data[SIZE];
    aftp_commit_pool *pool;
    gate g;
    lane *stalled, *next;
} stall;

static void stall_start(void **state, stall *s, unsigned threads)
{
    io_test_pattern(s->data, SIZE, 5);
    gate_init(&s->g, AFTP_TREESTORE_STEP_SYNC);
    assert_int_equal(aftp_commit_pool_new(&s->pool, threads), AFTP_OK);
    s->stalled = lane_new(state, 0, 1, s->pool);
    s->next = lane_new(state, 1, 2, s->pool); /* another disk */
    gate_attach(&s->g, &s->stalled->ts);
    lane_commit(s->stalled, 1, s->data);
    sem_wait(&s->g.entered);
}

/* Once the gate let it go: the stalled group ends, the rest is freed. */
static void stall_stop(stall *s)
{
    lane_collect(s->stalled, 1);
    lane_del(s->stalled);
    aftp_commit_pool_del(s->pool);
    gate_free(&s->g);
}

static void *end_lane(void *arg)
{
    lane_del(arg);
    return NULL;
}
#endif

/* A session whose disk stalls in its data sync holds one thread of a pool
 * of two: another session's group runs to its end meanwhile (on a pool of
 * one it would wait behind the stall: this test would hang). */
static void test_pool_stalled_session_leaves_the_others(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    static stall s;
    stall_start(state, &s, 2);
    lane_commit(s.next, 1, s.data);
    lane_collect(s.next, 1);
    assert_false(io_test_exists(s.stalled->root, "f1"));
    sem_post(&s.g.release);
    lane_del(s.next);
    stall_stop(&s);
#endif
}

/* A session ended (cancelled) while its group waits in the queue behind a
 * stalled one, on a pool of one: its end runs its group and ends it, then
 * frees it; the pool thread never touches it afterwards. */
static void test_pool_session_ended_while_its_group_waits(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    static stall s;
    pthread_t ender;
    stall_start(state, &s, 1);
    int ending_root = dup(s.next->root);
    lane_commit(s.next, 1, s.data); /* queued behind the stall */
    assert_int_equal(pthread_create(&ender, NULL, end_lane, s.next), 0);
    sem_post(&s.g.release);
    assert_int_equal(pthread_join(ender, NULL), 0);
    assert_true(io_test_exists(ending_root, "f1"));
    close(ending_root);
    stall_stop(&s);
#endif
}

#ifdef AFTP_TEST_HOOKS
/* A gate that also tells, on an eventfd, each time a group enters its
 * step (for a poll beside a committer's wake_fd). */
typedef struct told_gate {
    gate g;
    int entered_fd;
} told_gate;

static int hold_and_tell(void *user, int step, const char *path)
{
    told_gate *t = user;
    uint64_t one = 1;
    if (step == t->g.step)
        assert_int_equal(write(t->entered_fd, &one, sizeof one), sizeof one);
    return hold_at_step(&t->g, step, path);
}

static void told_gate_init(told_gate *t)
{
    gate_init(&t->g, AFTP_TREESTORE_STEP_SYNC);
    t->entered_fd = eventfd(0, EFD_CLOEXEC);
    assert_true(t->entered_fd >= 0);
}

static void told_gate_attach(told_gate *t, lane *l)
{
    l->ts.fault = hold_and_tell;
    l->ts.fault_user = t;
}

/* Blocks until a group entered the gate since the last call. */
static void told_gate_entered(told_gate *t)
{
    uint64_t count;
    assert_int_equal(read(t->entered_fd, &count, sizeof count), sizeof count);
}

static void told_gate_free(told_gate *t)
{
    close(t->entered_fd);
    gate_free(&t->g);
}
#endif

/* Two sessions of filesystem A stall in their data sync on a pool of
 * two: A's second group waits in the queue (A may hold one thread, the
 * pool's size less one), and a session of filesystem B commits on the
 * other thread. Without the cap A's second group took that thread and
 * entered its sync: B's group never ran. */
static void test_pool_stalled_filesystem_leaves_a_thread(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    enum { DEV_A = 1, DEV_B = 2 };
    static uint8_t data[SIZE];
    static told_gate t;
    aftp_commit_pool *pool;
    const int *results;
    io_test_pattern(data, SIZE, 6);
    told_gate_init(&t);
    assert_int_equal(aftp_commit_pool_new(&pool, 2), AFTP_OK);
    lane *a1 = lane_new(state, 0, DEV_A, pool), *a2 = lane_new(state, 1, DEV_A, pool);
    lane *b = lane_new(state, 2, DEV_B, pool);
    told_gate_attach(&t, a1);
    told_gate_attach(&t, a2);
    lane_commit(a1, 1, data);
    told_gate_entered(&t); /* a1 holds a thread in its sync */
    lane_commit(a2, 1, data);
    lane_commit(b, 1, data);
    struct pollfd ready[2] = {{.fd = b->c.wake_fd, .events = POLLIN},
                              {.fd = t.entered_fd, .events = POLLIN}};
    assert_true(poll(ready, 2, -1) >= 1);
    assert_true(ready[0].revents & POLLIN);  /* B's group ran */
    assert_false(ready[1].revents & POLLIN); /* A's second did not start */
    lane_collect(b, 1);
    assert_int_equal(aftp_committer_collect(&a1->c, 0, &results), 0);
    assert_int_equal(aftp_committer_collect(&a2->c, 0, &results), 0);
    sem_post(&t.g.release);
    sem_post(&t.g.release);
    lane_collect(a1, 1);
    lane_collect(a2, 1);
    lane_del(a1);
    lane_del(a2);
    lane_del(b);
    aftp_commit_pool_del(pool);
    told_gate_free(&t);
#endif
}

/* A session ends while its group waits in the queue behind two stalled
 * ones (two filesystems, every thread of a pool of two held): its end
 * runs its own group on its own thread and returns while both stalls
 * still hold, its file committed. Without that it waited for a pool
 * thread, so for a stall to end: this test hung. */
static void test_pool_session_ended_behind_stalls_runs_its_group(void **state)
{
#ifndef AFTP_TEST_HOOKS
    (void)state;
    io_test_needs_hooks();
#else
    static uint8_t data[SIZE];
    static gate g;
    aftp_commit_pool *pool;
    const int *results;
    pthread_t ender;
    io_test_pattern(data, SIZE, 9);
    gate_init(&g, AFTP_TREESTORE_STEP_SYNC);
    assert_int_equal(aftp_commit_pool_new(&pool, 2), AFTP_OK);
    lane *a = lane_new(state, 0, 1, pool), *b = lane_new(state, 1, 2, pool);
    lane *ending = lane_new(state, 2, 3, pool);
    gate_attach(&g, &a->ts);
    gate_attach(&g, &b->ts);
    lane_commit(a, 1, data);
    lane_commit(b, 1, data);
    sem_wait(&g.entered);
    sem_wait(&g.entered); /* both threads stalled in a sync */
    int ending_root = dup(ending->root);
    lane_commit(ending, 1, data); /* queued: no thread free */
    assert_int_equal(pthread_create(&ender, NULL, end_lane, ending), 0);
    assert_int_equal(pthread_join(ender, NULL), 0);
    assert_true(io_test_exists(ending_root, "f1"));
    assert_int_equal(aftp_committer_collect(&a->c, 0, &results), 0);
    assert_int_equal(aftp_committer_collect(&b->c, 0, &results), 0);
    close(ending_root);
    sem_post(&g.release);
    sem_post(&g.release);
    lane_collect(a, 1);
    lane_collect(b, 1);
    lane_del(a);
    lane_del(b);
    aftp_commit_pool_del(pool);
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
    assert_int_equal(aftp_committer_init(&r.c, &r.ts, 0, 8, r.pool), AFTP_OK);
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
        IO_TEST_SCRATCH(test_pool_runs_many_sessions_on_its_threads),
        IO_TEST_SCRATCH(test_pool_interleaves_sessions_in_their_order),
        IO_TEST_SCRATCH(test_pool_stalled_session_leaves_the_others),
        IO_TEST_SCRATCH(test_pool_session_ended_while_its_group_waits),
        IO_TEST_SCRATCH(test_pool_stalled_filesystem_leaves_a_thread),
        IO_TEST_SCRATCH(test_pool_session_ended_behind_stalls_runs_its_group),
        /* last: it leaves this process in a mount namespace of its own */
        IO_TEST_SCRATCH(test_full_disk_after_the_group_fails_not_the_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
