/* The server's total rate cap (aftp_server_set_rate_cap, spec 12.3.1 and
 * 6.18): a server runs in a thread of this process (server_fixture.h), two
 * clients push to it over 127.0.0.1 from threads of their own
 * (aftp_client_send).
 *
 *   shared   a total of 40 Mbit/s: client 0 starts alone and is admitted
 *            with the whole total; client 1 joins, and client 0's cap is
 *            lowered mid-session (RATE_UPDATE); once client 0 is done,
 *            client 1's cap rises to the whole total again. Neither client
 *            ever paces above the total, and their bytes over the time both
 *            took stay within it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "server_fixture.h"

#define TOTAL_BPS UINT64_C(40000000)
enum { KEYS = 2 };

typedef struct fixture {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    char server_dir[512], authorized[512];
    sfx_key server, client[KEYS];
} fixture;

static int setup(void **state)
{
    fixture *f = sfx_setup(sizeof *f);
    char comment[32];
    sfx_mkdir(f->server_dir, sizeof f->server_dir, f->srv.top, "incoming");
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    sfx_key_new(&f->server);
    for (int i = 0; i < KEYS; i++) {
        sfx_key_new(&f->client[i]);
        snprintf(comment, sizeof comment, "client%d", i);
        sfx_authorize(out, NULL, f->client[i].public_key, comment);
    }
    fclose(out);
    *state = f;
    return 0;
}

/* Under the total cap, with the default idle timeout. */
static unsigned start_server(fixture *f)
{
    sfx_configure(&f->srv, f->server_dir, f->server.secret, f->authorized, 0);
    assert_int_equal(aftp_server_set_rate_cap(f->srv.s, TOTAL_BPS), AFTP_OK);
    return sfx_start(&f->srv, 30);
}

/* ---- clients ---- */

typedef struct client_job {
    fixture *f;
    unsigned port;
    int key;
    const char *file;
    aftp_client *c;
    pthread_mutex_t lock;
    int sending;            /* a progress call saw bytes delivered */
    uint64_t max_pacing_bps; /* the fastest pacing rate its progress showed */
    uint64_t final_cap_bps; /* the cap its FINISHED event says the send obeyed */
    uint64_t bytes;
    struct timespec started, ended;
    int rc;
} client_job;

static void on_progress(void *user, const aftp_progress *p)
{
    client_job *j = user;
    pthread_mutex_lock(&j->lock);
    j->sending |= p->bytes_done > 0;
    if (p->rate_bps > j->max_pacing_bps)
        j->max_pacing_bps = p->rate_bps;
    pthread_mutex_unlock(&j->lock);
}

static void on_file(void *user, const aftp_file_event *ev)
{
    client_job *j = user;
    if (ev->type != AFTP_FILE_FINISHED)
        return;
    j->final_cap_bps = ev->rate_cap_bps;
    j->bytes = ev->bytes;
}

static void *client_thread(void *arg)
{
    client_job *j = arg;
    char host[64];
    sfx_client_host(host, sizeof host, j->port);
    clock_gettime(CLOCK_MONOTONIC, &j->started);
    j->rc = aftp_client_send(j->c, host, &j->file, 1);
    clock_gettime(CLOCK_MONOTONIC, &j->ended);
    aftp_client_del(j->c);
    return NULL;
}

static int is_sending(client_job *j)
{
    pthread_mutex_lock(&j->lock);
    int sending = j->sending;
    pthread_mutex_unlock(&j->lock);
    return sending;
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Client 0 (6 MB) alone, then client 1 (24 MB) beside it: the total is
 * shared, and given back to client 1 once client 0 is done. */
static void test_two_pushes_share_the_total(void **state)
{
    fixture *f = *state;
    char src[2][600];
    client_job jobs[KEYS];
    pthread_t threads[KEYS];
    static const size_t sizes[KEYS] = {6u << 20, 24u << 20};
    unsigned port = start_server(f);
    for (int i = 0; i < KEYS; i++) {
        snprintf(src[i], sizeof src[i], "%s/src%d.bin", f->srv.top, i);
        sfx_make_file(src[i], sizes[i], 70u + (uint32_t)i);
        jobs[i] = (client_job){.f = f, .port = port, .key = i, .file = src[i],
                               .c = sfx_client_new(f->client[i].secret, f->server.public_key)};
        pthread_mutex_init(&jobs[i].lock, NULL);
        aftp_client_set_progress_cb(jobs[i].c, on_progress, &jobs[i]);
        aftp_client_set_file_cb(jobs[i].c, on_file, &jobs[i]);
    }
    assert_int_equal(pthread_create(&threads[0], NULL, client_thread, &jobs[0]), 0);
    while (!is_sending(&jobs[0]))
        usleep(10000);
    assert_int_equal(pthread_create(&threads[1], NULL, client_thread, &jobs[1]), 0);
    for (int i = 0; i < KEYS; i++)
        pthread_join(threads[i], NULL);
    sfx_stop(&f->srv, 10);

    for (int i = 0; i < KEYS; i++) {
        assert_int_equal(jobs[i].rc, AFTP_OK);
        assert_int_equal(jobs[i].bytes, sizes[i]);
        /* The cap binds the pacing itself (spec 13.2). */
        assert_true(jobs[i].max_pacing_bps > 0 && jobs[i].max_pacing_bps <= TOTAL_BPS);
        pthread_mutex_destroy(&jobs[i].lock);
    }
    assert_int_equal(sfx_lines_with(&f->srv, AFTP_LOG_RATE_CAP, "total rate cap 40000000 bit/s"),
                     1);
    /* Alone, client 0 was admitted with the whole total... */
    assert_int_equal(sfx_lines_with(&f->srv, AFTP_LOG_RATE_CAP,
                                    "\"client0\" is served with a rate cap of 40000000 bit/s"),
                     1);
    /* ...and finished under a lower cap: client 1's share came out of it. */
    assert_true(jobs[0].final_cap_bps >= 1 && jobs[0].final_cap_bps < TOTAL_BPS);
    /* Alone again, client 1 got the whole total back. */
    assert_int_equal(jobs[1].final_cap_bps, TOTAL_BPS);
    /* Both sessions' bytes over the span they took stay within the total
     * (the cap counts whole datagrams: the files' bytes are less). */
    double span = seconds_between(&jobs[0].started, &jobs[1].ended);
    assert_true((double)(sizes[0] + sizes[1]) * 8.0 / span <= (double)TOTAL_BPS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_pushes_share_the_total, setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
