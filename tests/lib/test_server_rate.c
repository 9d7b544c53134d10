/* The server's total rate cap (aftp_server_set_rate_cap, spec 12.3.1 and
 * 6.18): a server runs in a thread of this process, two clients push to it
 * over 127.0.0.1 from threads of their own (aftp_client_send).
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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_keyfile.h"
#include "common/aftp_handshake.h"
#include "io_testutil.h"

#define TOTAL_BPS UINT64_C(40000000)
enum { KEYS = 2, MAX_LINES = 64 };

typedef struct test_key {
    uint8_t secret[AFTP_KEY_LEN], public_key[AFTP_KEY_LEN];
} test_key;

typedef struct fixture {
    char *top;
    char server_dir[512], authorized[512];
    test_key server, client[KEYS];
    aftp_server *s;
    pthread_t thread;
    pthread_mutex_t lock; /* the callbacks come from the server's threads */
    pthread_cond_t changed;
    int kinds[MAX_LINES];
    char lines[MAX_LINES][640];
    int line_count;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    int fd;
    char line[256], comment[32];
    assert_non_null(f);
    assert_true(sodium_init() >= 0);
    f->top = io_test_mkdtemp(&fd);
    close(fd);
    snprintf(f->server_dir, sizeof f->server_dir, "%s/incoming", f->top);
    assert_int_equal(mkdir(f->server_dir, 0700), 0);
    snprintf(f->authorized, sizeof f->authorized, "%s/authorized_keys", f->top);
    FILE *out = fopen(f->authorized, "w");
    assert_non_null(out);
    for (int i = -1; i < KEYS; i++) {
        test_key *k = i < 0 ? &f->server : &f->client[i];
        randombytes_buf(k->secret, sizeof k->secret);
        assert_int_equal(aftp_hs_public_key(k->secret, k->public_key), AFTP_OK);
        if (i < 0)
            continue;
        snprintf(comment, sizeof comment, "client%d", i);
        assert_int_equal(aftp_keyfile_format_public(k->public_key, comment, line, sizeof line),
                         AFTP_OK);
        fputs(line, out);
    }
    fclose(out);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->changed, NULL);
    assert_int_equal(aftp_server_new(&f->s), AFTP_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    aftp_server_del(f->s);
    io_test_rmtree(f->top);
    free(f->top);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->changed);
    free(f);
    return 0;
}

static void on_log(void *user, int kind, const char *line)
{
    fixture *f = user;
    pthread_mutex_lock(&f->lock);
    if (f->line_count < MAX_LINES) {
        f->kinds[f->line_count] = kind;
        snprintf(f->lines[f->line_count++], sizeof f->lines[0], "%s", line);
    }
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->lock);
}

static int lines_with(fixture *f, int kind, const char *text)
{
    int n = 0;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < f->line_count; i++)
        n += f->kinds[i] == kind && strstr(f->lines[i], text) != NULL;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* The log's first line of `kind` (a guard of 30 s). */
static void wait_line(fixture *f, int kind)
{
    struct timespec guard;
    clock_gettime(CLOCK_REALTIME, &guard);
    guard.tv_sec += 30;
    pthread_mutex_lock(&f->lock);
    for (int seen = 0; !seen;) {
        for (int i = 0; i < f->line_count; i++)
            seen |= f->kinds[i] == kind;
        if (!seen && pthread_cond_timedwait(&f->changed, &f->lock, &guard) != 0)
            break;
    }
    pthread_mutex_unlock(&f->lock);
}

static void *run_server(void *arg)
{
    fixture *f = arg;
    aftp_server_run(f->s);
    return NULL;
}

static unsigned start_server(fixture *f)
{
    assert_int_equal(aftp_server_set_listen(f->s, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(f->s, f->server_dir), AFTP_OK);
    assert_int_equal(aftp_server_set_identity(f->s, f->server.secret), AFTP_OK);
    assert_int_equal(aftp_server_set_authorized_keys_file(f->s, f->authorized), AFTP_OK);
    assert_int_equal(aftp_server_set_rate_cap(f->s, TOTAL_BPS), AFTP_OK);
    assert_int_equal(aftp_server_set_log_cb(f->s, on_log, f), AFTP_OK);
    assert_int_equal(pthread_create(&f->thread, NULL, run_server, f), 0);
    wait_line(f, AFTP_LOG_LISTENING);
    unsigned port = aftp_server_port(f->s);
    assert_int_not_equal(port, 0);
    return port;
}

static void make_file(const char *path, size_t len, uint32_t seed)
{
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    io_test_pattern(buf, len, seed);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    assert_int_equal(fwrite(buf, 1, len, out), len);
    fclose(out);
    free(buf);
}

/* ---- clients ---- */

typedef struct client_job {
    fixture *f;
    unsigned port;
    int key;
    const char *file;
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
    aftp_client *c;
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%u", j->port);
    aftp_client_new(&c);
    aftp_client_set_identity(c, j->f->client[j->key].secret);
    aftp_client_set_peer_key(c, j->f->server.public_key);
    aftp_client_set_progress_cb(c, on_progress, j);
    aftp_client_set_file_cb(c, on_file, j);
    clock_gettime(CLOCK_MONOTONIC, &j->started);
    j->rc = aftp_client_send(c, host, &j->file, 1);
    clock_gettime(CLOCK_MONOTONIC, &j->ended);
    aftp_client_del(c);
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
        snprintf(src[i], sizeof src[i], "%s/src%d.bin", f->top, i);
        make_file(src[i], sizes[i], 70u + (uint32_t)i);
        jobs[i] = (client_job){.f = f, .port = port, .key = i, .file = src[i]};
        pthread_mutex_init(&jobs[i].lock, NULL);
    }
    assert_int_equal(pthread_create(&threads[0], NULL, client_thread, &jobs[0]), 0);
    while (!is_sending(&jobs[0]))
        usleep(10000);
    assert_int_equal(pthread_create(&threads[1], NULL, client_thread, &jobs[1]), 0);
    for (int i = 0; i < KEYS; i++)
        pthread_join(threads[i], NULL);
    aftp_server_stop(f->s);
    pthread_join(f->thread, NULL);

    for (int i = 0; i < KEYS; i++) {
        assert_int_equal(jobs[i].rc, AFTP_OK);
        assert_int_equal(jobs[i].bytes, sizes[i]);
        /* The cap binds the pacing itself (spec 13.2). */
        assert_true(jobs[i].max_pacing_bps > 0 && jobs[i].max_pacing_bps <= TOTAL_BPS);
        pthread_mutex_destroy(&jobs[i].lock);
    }
    assert_int_equal(lines_with(f, AFTP_LOG_RATE_CAP, "total rate cap 40000000 bit/s"), 1);
    /* Alone, client 0 was admitted with the whole total... */
    assert_int_equal(lines_with(f, AFTP_LOG_RATE_CAP, "\"client0\" is served with a rate cap "
                                                      "of 40000000 bit/s"),
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
        cmocka_unit_test_setup_teardown(test_two_pushes_share_the_total, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
