/* Concurrent pushes of one client key (io/store/aftp_filelock.h): one
 * writer per destination file, not one session per key. A server runs in
 * a thread of this process (server_fixture.h); every push uses the SAME
 * client key. A push is paused by blocking its progress tick (its driver
 * then neither sends nor reads: a stalled or killed sender, as the server
 * sees it), so what overlaps is decided by the test, not by timing.
 *
 *   distinct    A is paused part way through its file; B pushes another
 *               file meanwhile and completes (its receipt comes first),
 *               then A completes: both byte-exact;
 *   same file   A is paused part way through a file; B pushes another
 *               source to the same name (pipelined, then one-file mode):
 *               B's verdict waits until A's file is committed, then B
 *               replaces it: the file is B's source exactly, the receipts
 *               come A then B;
 *   held flows  C is paused holding y; A pushes x then y: A's x arrives
 *               while C is still paused (a held entry's data flows while
 *               a later entry waits, so two sessions waiting on each
 *               other's files cannot deadlock); released, C's y and then
 *               A's y land;
 *   crossed     A pushes x then y while B pushes y then x, at once: both
 *               complete, each file is one of its two sources whole;
 *   restart     A, with RESUME, is stalled part way (its sender "killed");
 *               B pushes the same file again: it waits for A's session to
 *               end at the server's idle timeout (7 s, longer than B's own
 *               5 s: the server's FEEDBACK to B's resent ENTRIES keeps B
 *               alive), then resumes from the blocks A made durable
 *               (receipt RESUMED, bytes held).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "aftp/aftp_server.h"
#include "io_testutil.h"
#include "server_fixture.h"

enum { WINDOW = 64 };
#define BIG (UINT64_C(8) << 20)         /* 1.6 s at the paced rate: paused part way */
#define PACED_BPS UINT64_C(40000000)    /* the pushes that get paused */
#define FAST_BPS UINT64_C(400000000)
#define PAUSE_AFTER (UINT64_C(1) << 20) /* payload sent before a pause */

typedef sfx_one fixture; /* one client key for every push */

/* ---- the server ---- */

static unsigned start_server(fixture *f, uint64_t idle_ms)
{
    aftp_server *s = f->srv.s;
    sfx_configure(&f->srv, f->dir, f->server.secret, f->authorized, idle_ms);
    assert_int_equal(aftp_server_set_overwrite(s, 1), AFTP_OK);
    assert_int_equal(aftp_server_set_workers(s, 2), AFTP_OK);
    assert_int_equal(aftp_server_set_receipt_cb(s, sfx_on_receipt, &f->srv), AFTP_OK);
    return sfx_start(&f->srv, 10);
}

/* ---- pushes, each on its thread, pausable ---- */

/* Holds a push at its first progress tick after PAUSE_AFTER payload bytes
 * went out, until opened. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int pausing; /* pause at all */
    int paused;  /* the push reached the pause */
    int open;
} gate;

typedef struct push_job {
    fixture *f;
    unsigned port;
    const char *files[2];
    size_t count;
    uint32_t window;   /* 0: one-file mode */
    unsigned flags;    /* entry flags (RESUME) */
    uint64_t rate_bps;
    gate g;
    pthread_t thread;
    int rc;
    aftp_push_result res;
} push_job;

static void gate_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    gate *g = app;
    (void)now_ns;
    if (!g->pausing || st->payload_bytes_sent < PAUSE_AFTER)
        return;
    pthread_mutex_lock(&g->lock);
    g->paused = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* The push reached its pause (a guard of 30 s); 1 when it did. */
static int gate_wait_paused(gate *g)
{
    struct timespec guard;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &guard);
    guard.tv_sec += 30;
    pthread_mutex_lock(&g->lock);
    while (!g->paused && rc == 0)
        rc = pthread_cond_timedwait(&g->cond, &g->lock, &guard);
    int paused = g->paused;
    pthread_mutex_unlock(&g->lock);
    return paused;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void *push_thread(void *arg)
{
    push_job *j = arg;
    sfx_push p;
    sfx_push_init(&p, j->port, j->files, j->count, j->rate_bps);
    sfx_push_keys(&p, j->f->client.secret, j->f->server.public_key);
    p.o.pipeline_window = j->window;
    p.o.entry_flags = j->flags;
    p.o.hooks = (aftp_io_hooks){.on_tick = gate_tick, .app = &j->g};
    j->rc = sfx_push_run(&p, &j->res);
    gate_open(&j->g); /* a push that ended early never waits at it */
    return NULL;
}

/* A push of files (one or two) as the client key, pipelined, not yet
 * started (its window and flags may change before push_go); `pausing`: it
 * stops part way until gate_open. */
static void push_prepare(push_job *j, fixture *f, unsigned port, const char *a, const char *b,
                         int pausing)
{
    *j = (push_job){.f = f, .port = port, .files = {a, b}, .count = b != NULL ? 2 : 1,
                    .window = WINDOW, .rate_bps = pausing ? PACED_BPS : FAST_BPS};
    pthread_mutex_init(&j->g.lock, NULL);
    pthread_cond_init(&j->g.cond, NULL);
    j->g.pausing = pausing;
}

static void push_go(push_job *j)
{
    assert_int_equal(pthread_create(&j->thread, NULL, push_thread, j), 0);
}

static void push_start(push_job *j, fixture *f, unsigned port, const char *a, const char *b,
                       int pausing)
{
    push_prepare(j, f, port, a, b, pausing);
    push_go(j);
}

static int push_join(push_job *j)
{
    pthread_join(j->thread, NULL);
    pthread_mutex_destroy(&j->g.lock);
    pthread_cond_destroy(&j->g.cond);
    if (j->rc != AFTP_OK)
        print_message("push: %s\n", j->res.io.message);
    return j->rc;
}

static void make_source(fixture *f, const char *sub, const char *name, uint64_t len,
                        uint32_t seed, char *path, size_t cap)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", f->srv.top, sub);
    (void)mkdir(dir, 0700);
    snprintf(path, cap, "%s/%s", dir, name);
    sfx_make_file(path, len, seed);
}

/* ---- tests ---- */

/* Two pushes of one key, distinct files, at once: B completes while A is
 * held part way (on the old one-session-per-key rule B's handshake waited
 * for A and timed out). */
static void test_distinct_files_overlap(void **state)
{
    fixture *f = *state;
    char a[800], b[800];
    push_job ja, jb;
    make_source(f, "src-a", "a.bin", BIG, 1, a, sizeof a);
    make_source(f, "src-b", "b.bin", 300000, 2, b, sizeof b);
    unsigned port = start_server(f, 30000);
    push_start(&ja, f, port, a, NULL, 1);
    assert_true(gate_wait_paused(&ja.g));
    push_start(&jb, f, port, b, NULL, 0);
    int rc_b = push_join(&jb);
    int a_done_then = sfx_receipt_index(&f->srv, "a.bin", 0);
    gate_open(&ja.g);
    int rc_a = push_join(&ja);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_b, AFTP_OK);
    assert_int_equal(a_done_then, -1); /* A was still under way when B ended */
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(sfx_receipt_index(&f->srv, "b.bin", 0), 0);
    assert_int_equal(sfx_receipt_index(&f->srv, "a.bin", 0), 1);
    assert_true(sfx_same_file(f->dir, "a.bin", a));
    assert_true(sfx_same_file(f->dir, "b.bin", b));
}

/* Two pushes of one key to the same name: B's session runs at once but
 * its file waits for A's to be committed, then replaces it whole. */
static void same_file_waits(fixture *f, uint32_t b_window)
{
    char a[800], b[800];
    push_job ja, jb;
    make_source(f, "src-a", "same.bin", BIG, 3, a, sizeof a);
    make_source(f, "src-b", "same.bin", BIG / 2, 4, b, sizeof b);
    unsigned port = start_server(f, 30000);
    push_start(&ja, f, port, a, NULL, 1);
    assert_true(gate_wait_paused(&ja.g));
    push_prepare(&jb, f, port, b, NULL, 0);
    jb.window = b_window;
    push_go(&jb);
    int started = sfx_wait_lines(&f->srv, AFTP_LOG_SESSION_STARTED, "", 2, 8);
    gate_open(&ja.g);
    int rc_a = push_join(&ja), rc_b = push_join(&jb);
    sfx_stop(&f->srv, 2);

    assert_int_equal(started, 2); /* B was served while A ran */
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(rc_b, AFTP_OK);
    assert_int_equal(sfx_receipt_index(&f->srv, "same.bin", 0), 0);
    assert_int_equal(sfx_receipt_index(&f->srv, "same.bin", 1), 1);
    assert_true(sfx_same_file(f->dir, "same.bin", b)); /* B's, whole: committed last */
}

static void test_same_file_waits(void **state)
{
    same_file_waits(*state, WINDOW);
}

/* The same, B in one-file mode: its offer goes unanswered until A's file
 * is committed, and B's resent offer is then taken. */
static void test_same_file_waits_one_file_mode(void **state)
{
    same_file_waits(*state, 0);
}

/* A held entry's data flows while a later entry of its session waits for
 * another session's file: A's x lands while C, holding y, is paused. */
static void test_held_entry_flows(void **state)
{
    fixture *f = *state;
    char cy[800], ax[800], ay[800];
    push_job jc, ja;
    make_source(f, "src-c", "y.bin", BIG, 5, cy, sizeof cy);
    make_source(f, "src-a", "x.bin", 300000, 6, ax, sizeof ax);
    make_source(f, "src-a", "y.bin", 300000, 7, ay, sizeof ay);
    unsigned port = start_server(f, 30000);
    push_start(&jc, f, port, cy, NULL, 1);
    assert_true(gate_wait_paused(&jc.g));
    push_start(&ja, f, port, ax, ay, 0);
    int x_at = sfx_wait_receipt(&f->srv, "x.bin", 30);
    int y_then = sfx_receipt_index(&f->srv, "y.bin", 0);
    gate_open(&jc.g);
    int rc_c = push_join(&jc), rc_a = push_join(&ja);
    sfx_stop(&f->srv, 2);

    assert_int_equal(x_at, 0);    /* A's x while C held y... */
    assert_int_equal(y_then, -1); /* ...and A's y waited */
    assert_int_equal(rc_c, AFTP_OK);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(sfx_receipt_index(&f->srv, "y.bin", 0), 1); /* C's */
    assert_int_equal(sfx_receipt_index(&f->srv, "y.bin", 1), 2); /* A's, after it */
    assert_true(sfx_same_file(f->dir, "x.bin", ax));
    assert_true(sfx_same_file(f->dir, "y.bin", ay));
}

/* x then y against y then x, at once: no deadlock, each file whole. */
static void test_crossed_files(void **state)
{
    fixture *f = *state;
    char x1[800], y1[800], x2[800], y2[800];
    push_job ja, jb;
    make_source(f, "src-a", "x.bin", 2000000, 8, x1, sizeof x1);
    make_source(f, "src-a", "y.bin", 2000000, 9, y1, sizeof y1);
    make_source(f, "src-b", "x.bin", 2000000, 10, x2, sizeof x2);
    make_source(f, "src-b", "y.bin", 2000000, 11, y2, sizeof y2);
    unsigned port = start_server(f, 30000);
    push_start(&ja, f, port, x1, y1, 0);
    push_start(&jb, f, port, y2, x2, 0);
    int rc_a = push_join(&ja), rc_b = push_join(&jb);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(rc_b, AFTP_OK);
    assert_int_equal(f->srv.receipt_count, 4);
    assert_true(sfx_same_file(f->dir, "x.bin", x1) || sfx_same_file(f->dir, "x.bin", x2));
    assert_true(sfx_same_file(f->dir, "y.bin", y1) || sfx_same_file(f->dir, "y.bin", y2));
}

/* A sender stalled part way (killed, as the server sees it), then the
 * same file pushed again with RESUME: it resumes from what the stalled
 * session made durable once that session ended (its idle timeout). */
static void test_restart_resumes_after_lingering_session(void **state)
{
    fixture *f = *state;
    char big[800];
    push_job ja, jb;
    make_source(f, "src", "big.bin", BIG, 12, big, sizeof big);
    unsigned port = start_server(f, 7000); /* beyond the pushes' 5 s idle timeout */
    push_prepare(&ja, f, port, big, NULL, 1);
    ja.flags = AFTP_ENTRY_RESUME;
    push_go(&ja);
    assert_true(gate_wait_paused(&ja.g));
    push_prepare(&jb, f, port, big, NULL, 0);
    jb.flags = AFTP_ENTRY_RESUME;
    push_go(&jb);
    int rc_b = push_join(&jb);
    gate_open(&ja.g); /* its session is gone: it fails, as a killed sender would have */
    (void)push_join(&ja);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_b, AFTP_OK);
    assert_int_equal(f->srv.receipt_count, 1);
    assert_int_equal(f->srv.receipts[0].outcome, AFTP_OUTCOME_RESUMED);
    assert_true(f->srv.receipts[0].held_bytes >= PAUSE_AFTER / 2);
    assert_true(f->srv.receipts[0].held_bytes < BIG);
    assert_true(sfx_same_file(f->dir, "big.bin", big));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_distinct_files_overlap, sfx_one_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_same_file_waits, sfx_one_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_same_file_waits_one_file_mode, sfx_one_setup,
                                        sfx_teardown),
        cmocka_unit_test_setup_teardown(test_held_entry_flows, sfx_one_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_crossed_files, sfx_one_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_restart_resumes_after_lingering_session,
                                        sfx_one_setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
