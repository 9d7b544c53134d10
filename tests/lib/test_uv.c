/* The libuv tier (include/aftp/aftp_uv.h): a server and a client on one uv
 * loop in one process, over loopback. A file arrives byte-exact; every
 * callback (admission, log, progress, file events, receipts, the ends)
 * runs on the loop's thread; cancel from the loop ends a send with
 * AFTP_ERR_CANCELLED within a second and leaves nothing under the final
 * name, also when it comes before the datapath began; an admission the
 * loop does not take in time refuses the client; a server stopped while
 * idle leaves no handle behind (uv_loop_close() succeeds). */
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
#include <uv.h>

#include <cmocka.h>

#include "aftp/aftp_uv.h"
#include "common/aftp_handshake.h"
#include "io_testutil.h"

/* One loop, a server on it, at most one client send at a time. */
typedef struct uv_env {
    uv_loop_t loop;
    pthread_t loop_thread;
    int off_loop_calls; /* callbacks that ran on another thread */
    uint8_t server_secret[AFTP_KEY_LEN], server_public[AFTP_KEY_LEN];
    uint8_t client_secret[AFTP_KEY_LEN], client_public[AFTP_KEY_LEN];
    char *src_dir, *dst_dir;
    int dst_fd;
    aftp_server *server;
    aftp_uv_server *run;
    aftp_client *client;
    aftp_uv_send *send;
    /* the client's send, started when the server listens */
    const char *file;
    uint64_t rate; /* 0: the default policy */
    int cancel_at_once, cancel_at_progress;
    int block_loop_ms; /* the loop sleeps this long once the send started */
    uint64_t admit_wait_ms;
    /* what came */
    int listening, warnings, admissions, receipts, progress_calls, file_events;
    int server_progress_calls, notices;
    int send_status, send_done, server_status, server_stopped;
    aftp_receipt receipt;
    char receipt_path[256];
    char warning[1024];
    uint64_t cancel_ns, done_ns;
} uv_env;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_loop(uv_env *e)
{
    if (!pthread_equal(pthread_self(), e->loop_thread))
        e->off_loop_calls++;
}

/* A file of size bytes of a pattern under the source dir; its path. */
static const char *make_file(uv_env *e, const char *name, size_t size)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", e->src_dir, name);
    uint8_t *buf = malloc(size);
    assert_non_null(buf);
    io_test_pattern(buf, size, 7);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, size, f), size);
    fclose(f);
    free(buf);
    return path;
}

/* Whether the files at a and b hold the same bytes. */
static int same_content(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa != NULL && fb != NULL;
    int ca = 0, cb = 0;
    while (same && ca != EOF) {
        ca = fgetc(fa);
        cb = fgetc(fb);
        same = ca == cb;
    }
    if (fa != NULL)
        fclose(fa);
    if (fb != NULL)
        fclose(fb);
    return same;
}

/* ---- the client's callbacks ---- */

static void client_progress(void *user, const aftp_progress *p)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(p->name);
    if (e->cancel_at_progress && e->progress_calls == 0) {
        e->cancel_ns = now_ns();
        aftp_uv_send_cancel(e->send);
    }
    e->progress_calls++;
}

static void client_file(void *user, const aftp_file_event *ev)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(ev->name);
    e->file_events++;
}

static void client_notice(void *user, const char *text)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(text);
    e->notices++;
}

static void client_done(void *user, int status, const char *errmsg)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(errmsg);
    e->done_ns = now_ns();
    e->send_status = status;
    e->send_done++;
    e->send = NULL;
    aftp_uv_server_stop(e->run);
}

static void start_send(uv_env *e)
{
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%u", aftp_server_port(e->server));
    aftp_uv_send_cbs cbs = {.size = sizeof cbs, .progress = client_progress,
                            .file = client_file, .notice = client_notice,
                            .done = client_done, .user = e};
    const char *files[] = {e->file};
    assert_int_equal(aftp_uv_client_send(&e->loop, e->client, hp, files, 1, &cbs, &e->send),
                     AFTP_OK);
    if (e->cancel_at_once) {
        e->cancel_ns = now_ns();
        aftp_uv_send_cancel(e->send);
    }
    if (e->block_loop_ms > 0)
        usleep((useconds_t)e->block_loop_ms * 1000u);
}

/* ---- the server's callbacks ---- */

static int server_admit(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    uv_env *e = user;
    on_loop(e);
    e->admissions++;
    assert_non_null(peer->key);
    assert_memory_equal(peer->key, e->client_public, AFTP_KEY_LEN);
    return aftp_admission_set_root(decision, e->dst_dir);
}

static void server_receipt(void *user, const aftp_receipt *r)
{
    uv_env *e = user;
    on_loop(e);
    e->receipts++;
    e->receipt = *r;
    snprintf(e->receipt_path, sizeof e->receipt_path, "%s", r->path);
    assert_string_equal(r->root, e->dst_dir);
    assert_non_null(r->client->key);
    assert_memory_equal(r->client->key, e->client_public, AFTP_KEY_LEN);
}

static void server_progress(void *user, const aftp_progress *p)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(p->name);
    e->server_progress_calls++;
}

static void server_log(void *user, int kind, const char *line)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(line);
    if (kind == AFTP_LOG_WARNING && strstr(line, "admission waited") != NULL) {
        e->warnings++;
        snprintf(e->warning, sizeof e->warning, "%s", line);
    }
    if (kind != AFTP_LOG_LISTENING)
        return;
    e->listening++;
    if (e->file != NULL)
        start_send(e);
    else
        aftp_uv_server_stop(e->run);
}

static void server_stopped(void *user, int status, const char *errmsg)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(errmsg);
    e->server_status = status;
    e->server_stopped++;
    e->run = NULL;
}

/* ---- set-up ---- */

static void env_init(uv_env *e)
{
    memset(e, 0, sizeof *e);
    int fd;
    e->src_dir = io_test_mkdtemp(&fd);
    close(fd);
    e->dst_dir = io_test_mkdtemp(&e->dst_fd);
    assert_int_equal(aftp_hs_keypair(e->server_secret, e->server_public), AFTP_OK);
    assert_int_equal(aftp_hs_keypair(e->client_secret, e->client_public), AFTP_OK);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->loop_thread = pthread_self();
    assert_int_equal(aftp_server_new(&e->server), AFTP_OK);
    assert_int_equal(aftp_server_set_listen(e->server, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_identity(e->server, e->server_secret), AFTP_OK);
    assert_int_equal(aftp_client_new(&e->client), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(e->client, e->client_secret), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key(e->client, e->server_public), AFTP_OK);
}

/* Serves on the loop (with an admission callback) and runs the loop until
 * nothing is left on it; then the loop must close. */
static void env_run(uv_env *e)
{
    if (e->rate != 0) {
        assert_int_equal(aftp_client_set_policy(e->client, AFTP_CC_FIXED), AFTP_OK);
        assert_int_equal(aftp_client_set_rate(e->client, e->rate), AFTP_OK);
    }
    int stopped_before = e->server_stopped;
    aftp_uv_server_cbs cbs = {.size = sizeof cbs, .admit = server_admit,
                              .receipt = server_receipt, .progress = server_progress,
                              .log = server_log,
                              .stopped = server_stopped, .user = e,
                              .admit_wait_ms = e->admit_wait_ms};
    assert_int_equal(aftp_uv_server_start(&e->loop, e->server, &cbs, &e->run), AFTP_OK);
    assert_int_equal(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    assert_int_equal(e->server_stopped, stopped_before + 1);
    assert_int_equal(e->off_loop_calls, 0);
}

static void env_end(uv_env *e)
{
    aftp_client_del(e->client);
    aftp_server_del(e->server);
    close(e->dst_fd);
    io_test_rmtree(e->src_dir);
    io_test_rmtree(e->dst_dir);
    free(e->src_dir);
    free(e->dst_dir);
}

/* ---- tests ---- */

/* A file moves byte-exact between a server and a client on one loop; every
 * callback ran on the loop's thread, each of them at least once (4 MiB at
 * 40 Mbit/s take 0.8 s: progress comes every quarter second). */
static void test_transfer_on_one_loop(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "data.bin", 4u << 20);
    e.rate = 40000000;
    /* a server that takes smaller datagrams than the client asks for: a notice */
    assert_int_equal(aftp_server_set_mtu(e.server, 1500), AFTP_OK);
    assert_int_equal(aftp_client_set_mtu(e.client, 9000), AFTP_OK);
    env_run(&e);
    assert_true(e.progress_calls > 0);
    assert_true(e.server_progress_calls > 0);
    assert_true(e.notices > 0);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.send_done, 1);
    assert_int_equal(e.server_status, AFTP_OK);
    assert_int_equal(e.listening, 1);
    assert_int_equal(e.admissions, 1);
    assert_int_equal(e.receipts, 1);
    assert_string_equal(e.receipt_path, "data.bin");
    assert_int_equal(e.file_events, 2); /* STARTED, FINISHED */
    char dst[512];
    snprintf(dst, sizeof dst, "%s/data.bin", e.dst_dir);
    assert_true(same_content(e.file, dst));
    env_end(&e);
}

/* A send of 8 MiB at 8 Mbit/s (8 s) cancelled on the loop, at the first
 * progress or right after the start: AFTP_ERR_CANCELLED within a second,
 * no receipt, nothing under the final name (nor anywhere in the
 * destination but the resume state), and the loop closes. */
static void run_cancelled(int at_progress)
{
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "big.bin", 8u << 20);
    e.rate = 8000000;
    e.cancel_at_progress = at_progress;
    e.cancel_at_once = !at_progress;
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_ERR_CANCELLED);
    assert_true(e.done_ns - e.cancel_ns < UINT64_C(1000000000));
    assert_int_equal(e.receipts, 0);
    assert_false(io_test_exists(e.dst_fd, "big.bin"));
    /* a resuming send (the client's default) has the receiver keep the
     * partial copy in its resume state, .aftp-partial, and nothing else */
    assert_int_equal(io_test_count_entries(e.dst_fd),
                     io_test_exists(e.dst_fd, ".aftp-partial") ? 1 : 0);
    env_end(&e);
}

static void test_cancel_on_loop(void **state)
{
    (void)state;
    run_cancelled(1);
}

/* Before the datapath thread is inside its send the cancel is not lost. */
static void test_cancel_before_datapath(void **state)
{
    (void)state;
    run_cancelled(0);
}

/* A loop that does not take the admission question within admit_wait_ms
 * refuses the client (it hears it is not admitted), says so in a warning,
 * and never calls the admission callback for it. */
static void test_admission_bounded(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "small.bin", 4096);
    e.admit_wait_ms = 50;
    e.block_loop_ms = 1500; /* the handshake's question comes meanwhile */
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(e.admissions, 0);
    assert_int_equal(e.warnings, 1);
    assert_non_null(strstr(e.warning, "client from 127.0.0.1:"));
    assert_non_null(strstr(e.warning, "waited 50 ms"));
    assert_false(io_test_exists(e.dst_fd, "small.bin"));
    env_end(&e);
}

/* A server stopped while idle: its stopped callback, then nothing on the
 * loop (uv_run returns and uv_loop_close succeeds, in env_run). */
static void test_server_stop_idle(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    env_run(&e);
    assert_int_equal(e.listening, 1);
    assert_int_equal(e.server_status, AFTP_OK);
    assert_int_equal(e.send_done, 0);
    env_end(&e);
}

/* A server that cannot start says why through its stopped callback. */
static void test_server_cannot_start(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    aftp_server_del(e.server);
    assert_int_equal(aftp_server_new(&e.server), AFTP_OK); /* no listen address */
    env_run(&e);
    assert_int_equal(e.server_status, AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(e.listening, 0);
    env_end(&e);
}

/* A stop that comes after the run ended by itself (here: it could not
 * start) but before its stopped callback does not carry over: the next
 * run of the handle serves a client instead of returning at once. */
static void test_stop_after_end_not_sticky(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    aftp_server_del(e.server);
    assert_int_equal(aftp_server_new(&e.server), AFTP_OK); /* no listen address yet */
    assert_int_equal(aftp_server_set_identity(e.server, e.server_secret), AFTP_OK);
    aftp_uv_server_cbs cbs = {.size = sizeof cbs, .admit = server_admit, .log = server_log,
                              .stopped = server_stopped, .user = &e};
    assert_int_equal(aftp_uv_server_start(&e.loop, e.server, &cbs, &e.run), AFTP_OK);
    usleep(200000); /* the run fails meanwhile, before the loop hears of it */
    aftp_uv_server_stop(e.run);
    assert_int_equal(uv_run(&e.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(e.server_status, AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_server_set_listen(e.server, "127.0.0.1:0"), AFTP_OK);
    e.file = make_file(&e, "after.bin", 4096);
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.receipts, 1);
    assert_int_equal(e.server_stopped, 2);
    env_end(&e);
}

static void done_unused(void *user, int status, const char *errmsg)
{
    (void)user;
    (void)status;
    (void)errmsg;
    fail_msg("a start that failed must not call its done callback");
}

/* Arguments refused before anything starts; nothing is left on the loop. */
static void test_bad_arguments(void **state)
{
    (void)state;
    uv_loop_t loop;
    aftp_client *c;
    aftp_server *s;
    aftp_uv_send *req = (aftp_uv_send *)&loop;
    aftp_uv_server *run = (aftp_uv_server *)&loop;
    const char *files[] = {"/nonexistent"};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_server_new(&s), AFTP_OK);
    aftp_uv_send_cbs no_done = {.size = sizeof no_done};
    aftp_uv_send_cbs short_cbs = {.size = sizeof(size_t), .done = done_unused};
    aftp_uv_server_cbs no_stopped = {.size = sizeof no_stopped};
    assert_int_equal(aftp_uv_client_send(&loop, c, "127.0.0.1:1", files, 1, &no_done, &req),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_null(req);
    assert_int_equal(aftp_uv_client_send(&loop, c, "127.0.0.1:1", files, 1, &short_cbs, NULL),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_uv_client_send(&loop, c, "127.0.0.1:1", files, 0, &short_cbs, NULL),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_uv_server_start(&loop, s, &no_stopped, &run),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_null(run);
    aftp_uv_send_cancel(NULL);
    aftp_uv_server_stop(NULL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    aftp_client_del(c);
    aftp_server_del(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transfer_on_one_loop),
        cmocka_unit_test(test_cancel_on_loop),
        cmocka_unit_test(test_cancel_before_datapath),
        cmocka_unit_test(test_admission_bounded),
        cmocka_unit_test(test_server_stop_idle),
        cmocka_unit_test(test_server_cannot_start),
        cmocka_unit_test(test_stop_after_end_not_sticky),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
