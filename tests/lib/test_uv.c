/* The libuv tier (include/aftp/aftp_uv.h): a server and a client on one uv
 * loop in one process, over loopback. A file arrives byte-exact; every
 * callback (admission, log, progress, file events, receipts, the ends)
 * runs on the loop's thread; cancel from the loop ends a send with
 * AFTP_ERR_CANCELLED within a second and leaves nothing under the final
 * name, also when it comes before the datapath began; a server stopped while
 * idle leaves no handle behind (uv_loop_close() succeeds).
 * The server's control plane runs on the test's loop: its listener is a
 * handle there, the admission refuses one key and admits another on the
 * loop thread, a timer of the test's own fires while a file arrives, a
 * loop kept busy delays a handshake instead of refusing it, a stop or a
 * drain during a transfer ends the run (a drain only once the file is
 * in), a port taken comes back through the stopped callback, and two
 * sessions' progress of files alike in name and size both reach the loop. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
    uv_thread_t loop_thread;
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
    /* a client of another key sends first; the admission refuses its key */
    aftp_client *refused_client;
    uint8_t refused_secret[AFTP_KEY_LEN], refused_public[AFTP_KEY_LEN];
    int refused_sending, refused_status, refused_admissions;
    /* the test's own timer, ticking while the loop runs */
    uv_timer_t ticker;
    int use_ticker, transfer_running, ticks_in_transfer;
    int poll_handles_at_admit; /* uv_poll handles on the loop during the admission */
    int stop_at_server_progress, drain_at_server_progress;
    int keep_server_at_done; /* the send's end does not stop the server */
    char stopped_errmsg[512];
    int open_at_stopped; /* listener handles still open when the stopped callback came */
    int receipts_at_session_end; /* receipts before the first session's end line (-1: none) */
    int entries, dir_entries;
    /* the loop's turns, counted by a check handle, and the most server
     * progress calls one turn delivered */
    uv_check_t turns;
    int count_turns, turn, progress_turn, progress_in_turn, most_progress_in_turn;
    /* the loop sleeps this long at the server's first progress once
     * block_after_sessions sessions reported progress (0: the first
     * progress): each is then moving, and reports more while the loop
     * sleeps (a session only admitted may not have begun its file on its
     * worker yet on a loaded machine); the turn after it, and the sessions
     * whose progress came in that turn */
    int block_at_server_progress_ms, block_after_sessions, held_turn;
    uint64_t sessions_progressing[4];
    int sessions_progressing_count;
    uint64_t sessions_after_hold[4];
    int sessions_after_hold_count;
    /* twin_sends: a second send of the same file beside the first, by a
     * client of the same key (twin), landing in a root of its own (twin_dir) */
    int twin_sends;
    aftp_client *twin;
    aftp_uv_send *twin_send;
    char *twin_dir;
    int twin_fd, twin_status, twin_done;
    int sessions_started;
    /* a receipt callback set on the server before the start, none in cbs */
    int receipt_set_before, stray_receipts;
    char link_target[64]; /* the PLACED link's, from its entry */
    /* what came */
    int listening, failed_sessions, admissions, receipts, progress_calls, file_events;
    int server_progress_calls, notices;
    int send_status, send_done, server_status, server_stopped;
    aftp_receipt receipt;
    char receipt_path[256];
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
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &e->loop_thread))
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

/* The env's file arrived byte-exact as name in the destination. */
static void assert_arrived(const uv_env *e, const char *name)
{
    char dst[512];
    snprintf(dst, sizeof dst, "%s/%s", e->dst_dir, name);
    assert_true(same_content(e->file, dst));
}

/* ---- the client's callbacks ---- */

static void client_progress(void *user, const aftp_progress *p)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(p->name);
    assert_int_equal(p->session, 0); /* a client's progress is of no server session */
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

static void start_send(uv_env *e);

/* Every send the test started has ended. */
static int sends_over(const uv_env *e)
{
    return e->send_done > 0 && (e->twin == NULL || e->twin_done);
}

static void client_done(void *user, int status, const char *errmsg)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(errmsg);
    e->send = NULL;
    if (e->refused_sending) { /* the refused key's send: now the admitted one */
        e->refused_sending = 0;
        e->refused_status = status;
        start_send(e);
        return;
    }
    e->done_ns = now_ns();
    e->send_status = status;
    e->send_done++;
    if (!e->keep_server_at_done && sends_over(e))
        aftp_uv_server_stop(e->run);
}

static void twin_done(void *user, int status, const char *errmsg)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(errmsg);
    e->twin_send = NULL;
    e->twin_status = status;
    e->twin_done = 1;
    if (sends_over(e))
        aftp_uv_server_stop(e->run);
}

/* The twin's send of the env's file, beside the first. */
static void start_twin(uv_env *e)
{
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%u", aftp_server_port(e->server));
    aftp_uv_send_cbs cbs = {.size = sizeof cbs, .done = twin_done, .user = e};
    const char *files[] = {e->file};
    assert_int_equal(aftp_uv_client_send(&e->loop, e->twin, hp, files, 1, &cbs, &e->twin_send),
                     AFTP_OK);
}

static void start_send(uv_env *e)
{
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%u", aftp_server_port(e->server));
    aftp_uv_send_cbs cbs = {.size = sizeof cbs, .progress = client_progress,
                            .file = client_file, .notice = client_notice,
                            .done = client_done, .user = e};
    const char *files[] = {e->file};
    aftp_client *c = e->refused_sending ? e->refused_client : e->client;
    assert_int_equal(aftp_uv_client_send(&e->loop, c, hp, files, 1, &cbs, &e->send), AFTP_OK);
    if (e->cancel_at_once) {
        e->cancel_ns = now_ns();
        aftp_uv_send_cancel(e->send);
    }
    if (e->block_loop_ms > 0)
        usleep((useconds_t)e->block_loop_ms * 1000u);
}

/* ---- the server's callbacks ---- */

static void count_poll(uv_handle_t *h, void *arg)
{
    if (h->type == UV_POLL)
        (*(int *)arg)++;
}

static int server_admit(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(peer->key);
    uv_walk(&e->loop, count_poll, &e->poll_handles_at_admit);
    if (e->refused_client != NULL && memcmp(peer->key, e->refused_public, AFTP_KEY_LEN) == 0) {
        e->refused_admissions++;
        return AFTP_ERR_PERMISSION;
    }
    e->admissions++;
    assert_memory_equal(peer->key, e->client_public, AFTP_KEY_LEN);
    e->transfer_running = 1;
    /* two sessions of one file name in one root would take turns
     * (aftp_filelock.h): the second one admitted gets a root of its own */
    int second = e->twin != NULL && e->admissions == 2;
    return aftp_admission_set_root(decision, second ? e->twin_dir : e->dst_dir);
}

static void server_receipt(void *user, const aftp_receipt *r)
{
    uv_env *e = user;
    on_loop(e);
    e->transfer_running = 0;
    e->receipts++;
    e->receipt = *r;
    snprintf(e->receipt_path, sizeof e->receipt_path, "%s", r->path);
    assert_true(strcmp(r->root, e->dst_dir) == 0 ||
                (e->twin_dir != NULL && strcmp(r->root, e->twin_dir) == 0));
    assert_non_null(r->client->key);
    assert_memory_equal(r->client->key, e->client_public, AFTP_KEY_LEN);
}

static void server_entry(void *user, const aftp_receipt *r)
{
    uv_env *e = user;
    on_loop(e);
    e->entries++;
    assert_int_equal(r->outcome, AFTP_OUTCOME_PLACED);
    assert_string_equal(r->root, e->dst_dir);
    assert_memory_equal(r->client->key, e->client_public, AFTP_KEY_LEN);
    if (r->kind == AFTP_ENTRY_DIR)
        e->dir_entries++;
    if (r->kind == AFTP_ENTRY_SYMLINK)
        snprintf(e->link_target, sizeof e->link_target, "%s", r->target);
    else
        assert_null(r->target);
}

/* A callback the tier's run must not call (it is not in its cbs). */
static void stray_receipt(void *user, const aftp_receipt *r)
{
    uv_env *e = user;
    (void)r;
    __atomic_add_fetch(&e->stray_receipts, 1, __ATOMIC_RELAXED); /* maybe off the loop */
}

/* A session of a progress call, counted once in a set of at most 4. */
static void note_session(uint64_t *set, int *count, uint64_t session)
{
    for (int i = 0; i < *count; i++)
        if (set[i] == session)
            return;
    if (*count < 4)
        set[(*count)++] = session;
}

static void server_progress(void *user, const aftp_progress *p)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(p->name);
    assert_int_not_equal(p->session, 0);
    e->progress_in_turn = e->progress_turn == e->turn ? e->progress_in_turn + 1 : 1;
    e->progress_turn = e->turn;
    if (e->progress_in_turn > e->most_progress_in_turn)
        e->most_progress_in_turn = e->progress_in_turn;
    note_session(e->sessions_progressing, &e->sessions_progressing_count, p->session);
    if (e->held_turn > 0 && e->turn == e->held_turn + 1) /* the loop's next turn */
        note_session(e->sessions_after_hold, &e->sessions_after_hold_count, p->session);
    if (e->block_at_server_progress_ms > 0 && e->held_turn == 0 &&
        e->sessions_progressing_count >= e->block_after_sessions) {
        /* the workers' progress piles up meanwhile */
        usleep((useconds_t)e->block_at_server_progress_ms * 1000u);
        e->held_turn = ++e->turn; /* what piled up comes in the loop's next turn */
    }
    if (e->server_progress_calls++ > 0)
        return;
    if (e->stop_at_server_progress)
        aftp_uv_server_stop(e->run);
    if (e->drain_at_server_progress)
        aftp_server_drain(e->server);
}

static void server_log(void *user, int kind, const char *line)
{
    uv_env *e = user;
    on_loop(e);
    assert_non_null(line);
    if (kind == AFTP_LOG_SESSION_FAILED)
        e->failed_sessions++;
    if (kind == AFTP_LOG_SESSION_STARTED)
        e->sessions_started++;
    if (kind == AFTP_LOG_SESSION_ENDED && e->receipts_at_session_end < 0)
        e->receipts_at_session_end = e->receipts;
    if (kind != AFTP_LOG_LISTENING)
        return;
    e->listening++;
    e->refused_sending = e->refused_client != NULL;
    if (e->twin != NULL)
        start_twin(e);
    if (e->file != NULL)
        start_send(e);
    else
        aftp_uv_server_stop(e->run);
}

/* A uv_poll handle of the loop still open: the server's listener (a
 * client's send, which may still run, has none). */
static void count_open_poll(uv_handle_t *h, void *arg)
{
    if (h->type == UV_POLL && !uv_is_closing(h))
        (*(int *)arg)++;
}

static void server_stopped(void *user, int status, const char *errmsg)
{
    uv_env *e = user;
    on_loop(e);
    uv_walk(&e->loop, count_open_poll, &e->open_at_stopped); /* the run closed its handles */
    assert_non_null(errmsg);
    e->server_status = status;
    e->server_stopped++;
    e->run = NULL;
    snprintf(e->stopped_errmsg, sizeof e->stopped_errmsg, "%s", errmsg);
    if (e->use_ticker)
        uv_close((uv_handle_t *)&e->ticker, NULL);
    if (e->count_turns)
        uv_close((uv_handle_t *)&e->turns, NULL);
}

static void on_turn(uv_check_t *c)
{
    ((uv_env *)c->data)->turn++;
}

static void on_tick(uv_timer_t *t)
{
    uv_env *e = t->data;
    on_loop(e);
    if (e->transfer_running)
        e->ticks_in_transfer++;
}

/* ---- set-up ---- */

/* A client of the identity, pinning the env's server key. */
static aftp_client *env_client(const uv_env *e, const uint8_t *secret)
{
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, secret), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key(c, e->server_public), AFTP_OK);
    return c;
}

static void env_init(uv_env *e)
{
    memset(e, 0, sizeof *e);
    e->receipts_at_session_end = -1;
    int fd;
    e->src_dir = io_test_mkdtemp(&fd);
    close(fd);
    e->dst_dir = io_test_mkdtemp(&e->dst_fd);
    assert_int_equal(aftp_hs_keypair(e->server_secret, e->server_public), AFTP_OK);
    assert_int_equal(aftp_hs_keypair(e->client_secret, e->client_public), AFTP_OK);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->loop_thread = uv_thread_self();
    assert_int_equal(aftp_server_new(&e->server), AFTP_OK);
    assert_int_equal(aftp_server_set_listen(e->server, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_identity(e->server, e->server_secret), AFTP_OK);
    e->client = env_client(e, e->client_secret);
}

/* Serves on the loop (with an admission callback) and runs the loop until
 * nothing is left on it; then the loop must close. */
static void env_run(uv_env *e)
{
    if (e->twin_sends && e->twin == NULL) {
        e->twin = env_client(e, e->client_secret);
        e->twin_dir = io_test_mkdtemp(&e->twin_fd);
    }
    aftp_client *const paced[] = {e->client, e->twin, e->refused_client};
    for (size_t i = 0; i < 3 && e->rate != 0; i++) {
        if (paced[i] == NULL)
            continue;
        assert_int_equal(aftp_client_set_policy(paced[i], AFTP_CC_FIXED), AFTP_OK);
        assert_int_equal(aftp_client_set_rate(paced[i], e->rate), AFTP_OK);
    }
    int stopped_before = e->server_stopped;
    if (e->count_turns) {
        assert_int_equal(uv_check_init(&e->loop, &e->turns), 0);
        e->turns.data = e;
        assert_int_equal(uv_check_start(&e->turns, on_turn), 0);
    }
    if (e->use_ticker) { /* every 5 ms: the file takes hundreds of them */
        assert_int_equal(uv_timer_init(&e->loop, &e->ticker), 0);
        e->ticker.data = e;
        assert_int_equal(uv_timer_start(&e->ticker, on_tick, 5, 5), 0);
    }
    if (e->receipt_set_before)
        assert_int_equal(aftp_server_set_receipt_cb(e->server, stray_receipt, e), AFTP_OK);
    aftp_uv_server_cbs cbs = {.size = sizeof cbs, .admit = server_admit,
                              .receipt = e->receipt_set_before ? NULL : server_receipt,
                              .progress = server_progress,
                              .log = server_log,
                              .stopped = server_stopped, .user = e,
                              .admit_wait_ms = e->admit_wait_ms, .entry = server_entry};
    assert_int_equal(aftp_uv_server_start(&e->loop, e->server, &cbs, &e->run), AFTP_OK);
    assert_int_equal(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    assert_int_equal(e->server_stopped, stopped_before + 1);
    assert_int_equal(e->open_at_stopped, 0);
    assert_int_equal(e->off_loop_calls, 0);
}

/* A second client, of a key the admission refuses, sends first. */
static void env_add_refused_client(uv_env *e)
{
    assert_int_equal(aftp_hs_keypair(e->refused_secret, e->refused_public), AFTP_OK);
    e->refused_client = env_client(e, e->refused_secret);
}

static void env_end(uv_env *e)
{
    if (e->twin != NULL) {
        aftp_client_del(e->twin);
        close(e->twin_fd);
        io_test_rmtree(e->twin_dir);
        free(e->twin_dir);
    }
    aftp_client_del(e->refused_client);
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
    /* the worker's receipt comes before the loop's line of the session's end */
    assert_int_equal(e.receipts_at_session_end, 1);
    assert_arrived(&e, "data.bin");
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

/* A loop kept busy (1.5 s) while a client's handshake comes delays the
 * handshake and does not refuse it: the admission is asked on the loop
 * thread once the loop is free, and the file arrives. admit_wait_ms is no
 * longer used (a bridged admission would refuse after 50 ms here). */
static void test_busy_loop_delays_admission(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "small.bin", 4096);
    e.admit_wait_ms = 50;
    e.block_loop_ms = 1500; /* the client's HELLO comes meanwhile */
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.admissions, 1);
    assert_int_equal(e.receipts, 1);
    assert_int_equal(e.failed_sessions, 0);
    assert_arrived(&e, "small.bin");
    env_end(&e);
}

/* The server's control plane is the test loop's: its listener is a
 * uv_poll handle there during the admission, which runs on the loop
 * thread (on_loop), refuses one key (its client hears it is not
 * admitted) and admits another, whose file arrives byte-exact with its
 * receipt on the loop thread; meanwhile the test's own 5 ms timer keeps
 * firing (the loop is never held by the transfer); the loop closes. */
static void test_server_on_test_loop(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    env_add_refused_client(&e);
    e.file = make_file(&e, "data.bin", 4u << 20);
    e.rate = 40000000; /* 0.8 s */
    e.use_ticker = 1;
    env_run(&e);
    assert_int_equal(e.refused_status, AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(e.refused_admissions, 1);
    assert_int_equal(e.failed_sessions, 1); /* the refusal's line, on the loop thread */
    assert_int_equal(e.admissions, 1);
    assert_true(e.poll_handles_at_admit > 0);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.receipts, 1);
    assert_true(e.ticks_in_transfer > 0);
    assert_int_equal(e.server_status, AFTP_OK);
    assert_arrived(&e, "data.bin");
    env_end(&e);
}

/* A tree pushed to a server of the tier: its file gets a receipt, its
 * directories and its link an entry each (PLACED, the link's target
 * copied across), on the loop thread. */
static void test_server_entries_on_loop(void **state)
{
    (void)state;
    uv_env e;
    char top[512], path[600];
    env_init(&e);
    snprintf(top, sizeof top, "%s/top", e.src_dir);
    assert_int_equal(mkdir(top, 0755), 0);
    snprintf(path, sizeof path, "%s/sub", top);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/link", top);
    assert_int_equal(symlink("../nowhere", path), 0);
    make_file(&e, "top/sub/a.bin", 4096);
    e.file = top;
    assert_int_equal(aftp_client_set_links(e.client, AFTP_CLIENT_LINKS_RECREATE), AFTP_OK);
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.receipts, 1);
    assert_string_equal(e.receipt_path, "top/sub/a.bin");
    assert_int_equal(e.entries, 3); /* top, top/sub, top/link */
    assert_int_equal(e.dir_entries, 2);
    assert_string_equal(e.link_target, "../nowhere");
    env_end(&e);
}

/* A 2 s transfer (4 MiB at 16 Mbit/s) of a file `name`, the loop's turns
 * counted, the loop to be held for a second at the server's progress. */
static void env_init_held(uv_env *e, const char *name)
{
    env_init(e);
    e->file = make_file(e, name, 4u << 20);
    e->rate = 16000000;
    e->count_turns = 1;
    e->block_at_server_progress_ms = 1000;
}

/* The loop held for a second at the server's first progress of a 2 s
 * transfer: the progress the worker reported meanwhile (about 4 a second)
 * comes as one call, the file's latest figures, not as a burst. A receipt
 * callback set on the server before the start, and not given in cbs, is
 * not called (it would be, on a worker thread). */
static void test_server_progress_coalesced(void **state)
{
    (void)state;
    uv_env e;
    env_init_held(&e, "ticks.bin");
    e.receipt_set_before = 1;
    env_run(&e);
    assert_int_equal(e.stray_receipts, 0);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_true(e.server_progress_calls >= 2);
    assert_int_equal(e.most_progress_in_turn, 1);
    assert_arrived(&e, "ticks.bin");
    env_end(&e);
}

/* Two sessions of one key send a file of the same name and size at once,
 * each into a root of its own (4 MiB at 16 Mbit/s: 2 s). The loop is held
 * for a second at the server's first progress once both sessions started:
 * what both workers reported meanwhile comes as one call per session, each
 * session's latest figures, not as one of them standing for both. */
static void test_server_progress_per_session(void **state)
{
    (void)state;
    uv_env e;
    env_init_held(&e, "same.bin");
    e.twin_sends = 1;
    e.block_after_sessions = 2;
    env_run(&e);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.twin_status, AFTP_OK);
    assert_int_equal(e.sessions_started, 2);
    assert_true(e.held_turn > 0);
    assert_int_equal(e.sessions_after_hold_count, 2);
    assert_int_equal(e.receipts, 2);
    assert_arrived(&e, "same.bin");
    char twin_copy[512];
    snprintf(twin_copy, sizeof twin_copy, "%s/same.bin", e.twin_dir);
    assert_true(same_content(e.file, twin_copy));
    env_end(&e);
}

/* A server stopped at its first progress of an 8 s transfer: the session
 * is cancelled (the client hears of it), no receipt, nothing under the
 * final name, the stopped callback says AFTP_OK, the loop closes. */
static void test_server_stop_during_transfer(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "big.bin", 8u << 20);
    e.rate = 8000000;
    e.stop_at_server_progress = 1;
    e.keep_server_at_done = 1;
    env_run(&e);
    assert_true(e.server_progress_calls > 0);
    assert_int_equal(e.server_status, AFTP_OK);
    assert_int_equal(e.send_done, 1);
    assert_int_not_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.receipts, 0);
    assert_false(io_test_exists(e.dst_fd, "big.bin"));
    env_end(&e);
}

/* aftp_server_drain() on a server of the tier, at its first progress: the
 * file under way still arrives (its receipt comes), then the run ends by
 * itself with AFTP_OK (nothing else stops it here). */
static void test_server_drain_during_transfer(void **state)
{
    (void)state;
    uv_env e;
    env_init(&e);
    e.file = make_file(&e, "drained.bin", 2u << 20);
    e.rate = 20000000; /* 0.8 s */
    e.drain_at_server_progress = 1;
    e.keep_server_at_done = 1;
    env_run(&e);
    assert_true(e.server_progress_calls > 0);
    assert_int_equal(e.send_status, AFTP_OK);
    assert_int_equal(e.receipts, 1);
    assert_int_equal(e.server_status, AFTP_OK);
    assert_arrived(&e, "drained.bin");
    env_end(&e);
}

/* A port another socket holds: the start returns AFTP_OK and the stopped
 * callback brings the error and why; nothing is left on the loop. */
static void test_server_port_taken(void **state)
{
    (void)state;
    uv_env e;
    char taken[32];
    env_init(&e);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = io_test_loopback(0);
    socklen_t len = sizeof addr;
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    snprintf(taken, sizeof taken, "127.0.0.1:%u", (unsigned)ntohs(addr.sin_port));
    assert_int_equal(aftp_server_set_listen(e.server, taken), AFTP_OK);
    env_run(&e);
    close(fd);
    assert_int_equal(e.server_status, AFTP_ERR_NETWORK);
    assert_non_null(strstr(e.stopped_errmsg, "address in use"));
    assert_non_null(strstr(e.stopped_errmsg, taken));
    assert_int_equal(e.listening, 0);
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
        cmocka_unit_test(test_busy_loop_delays_admission),
        cmocka_unit_test(test_server_on_test_loop),
        cmocka_unit_test(test_server_entries_on_loop),
        cmocka_unit_test(test_server_progress_coalesced),
        cmocka_unit_test(test_server_progress_per_session),
        cmocka_unit_test(test_server_stop_during_transfer),
        cmocka_unit_test(test_server_drain_during_transfer),
        cmocka_unit_test(test_server_port_taken),
        cmocka_unit_test(test_server_stop_idle),
        cmocka_unit_test(test_server_cannot_start),
        cmocka_unit_test(test_stop_after_end_not_sticky),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
