/* The serve driver's control plane (io/run/aftp_serve.h, aftp_hub.h):
 *
 *   control tick   on_control_tick comes again and again while the server
 *                  waits, on the thread that called aftp_serve_run (the
 *                  control thread), with a clock that never goes back; a
 *                  stop set in it ends the run with AFTP_OK;
 *   drain, idle    a drain with no session running ends the run at once,
 *                  AFTP_OK, after on_draining said 0 sessions. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "aftp_serve.h"
#include "io_testutil.h"

typedef struct watch {
    pthread_t control;
    atomic_int stop, drain;
    int ticks, wrong_thread, backwards, drained_with;
    uint64_t last_ns;
} watch;

static void on_control_tick(void *app, uint64_t now_ns)
{
    watch *w = app;
    w->wrong_thread += !pthread_equal(pthread_self(), w->control);
    w->backwards += now_ns < w->last_ns;
    w->last_ns = now_ns;
    if (++w->ticks == 5)
        atomic_store(&w->stop, 1);
}

static void on_draining(void *app, unsigned running, uint64_t timeout_ns)
{
    watch *w = app;
    (void)timeout_ns;
    w->drained_with = (int)running;
}

static int serve(watch *w)
{
    struct sockaddr_in at = io_test_loopback(0);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&at, .listen_len = sizeof at,
                         .faux = 1, .workers = 1, .drain = &w->drain,
                         .security = {.cipher = AFTP_CIPHER_NONE},
                         .hooks = {.app = w, .interrupt = &w->stop},
                         .on_control_tick = on_control_tick, .on_draining = on_draining};
    aftp_io_result res;
    w->control = pthread_self();
    return aftp_serve_run(&o, &res);
}

/* A guard: a run whose ticks never stop it is stopped after 10 s, so a
 * missing tick fails the test instead of hanging it. */
static void *guard(void *arg)
{
    watch *w = arg;
    for (int i = 0; i < 1000 && !atomic_load(&w->stop); i++)
        usleep(10000);
    atomic_store(&w->stop, 1);
    return NULL;
}

static void test_control_tick(void **state)
{
    (void)state;
    watch w = {.drained_with = -1};
    pthread_t g;
    assert_int_equal(pthread_create(&g, NULL, guard, &w), 0);
    assert_int_equal(serve(&w), AFTP_OK);
    pthread_join(g, NULL);
    assert_int_equal(w.ticks, 5);
    assert_int_equal(w.wrong_thread, 0);
    assert_int_equal(w.backwards, 0);
    assert_int_equal(w.drained_with, -1);
}

static void test_drain_when_idle(void **state)
{
    (void)state;
    watch w = {.drained_with = -1};
    atomic_store(&w.drain, 1);
    assert_int_equal(serve(&w), AFTP_OK);
    assert_int_equal(w.drained_with, 0);
    assert_true(w.ticks < 5); /* it ended before the tick that stops it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_tick),
        cmocka_unit_test(test_drain_when_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
