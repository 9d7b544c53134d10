/* The blocking client (include/aftp/aftp_client.h) against a real server
 * (io/aftp_serve_run) in another thread of the same process, over
 * loopback: what arrives, the events and their figures, progress, several
 * files in one session, cancel from another thread, two clients at once,
 * failures and their messages, and silence on stdout and stderr. */
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>
#include <xxhash.h>

#include <cmocka.h>

#include "aftp/aftp_client.h"
#include "door/aftp_admit.h"
#include "aftp_serve.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"
#include "aftp_wallclock.h"
#include "io_testutil.h"

/* A protected server in a thread: its keys, directory, port. */
typedef struct test_server {
    uint8_t secret[AFTP_KEY_LEN], public_key[AFTP_KEY_LEN];
    uint8_t client_key[AFTP_KEY_LEN]; /* the one client key it admits */
    aftp_keyfile_list authorized;
    aftp_admit admit;
    char *dir;
    int dirfd;
    int once;
    atomic_int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint16_t port; /* 0 until listening */
    aftp_io_result res;
    int rc;
    pthread_t thread;
    uint16_t max_datagram; /* the largest it takes; 0: the default */
    uint32_t pipeline_window; /* 0: a one-file server, as before pipelined mode */
} test_server;

/* A client's keys and the events and progress it saw. */
#define MAX_EVENTS 32
#define MAX_NOTICES 8
typedef struct test_client {
    uint8_t secret[AFTP_KEY_LEN], public_key[AFTP_KEY_LEN];
    aftp_file_event events[MAX_EVENTS];
    uint8_t names[MAX_EVENTS][64];
    char printable_names[MAX_EVENTS][256];
    char messages[MAX_EVENTS][1024];
    size_t event_count;
    char notices[MAX_NOTICES][512];
    size_t notice_count;
    int progress_calls;
    uint64_t last_bytes_done;
    double last_min_rtt_ms, last_queue_ms; /* the path's state at the last call */
    pthread_mutex_t lock;
    pthread_cond_t cond;
} test_client;

static void on_listening(void *app, const struct sockaddr *local)
{
    test_server *s = app;
    pthread_mutex_lock(&s->lock);
    s->port = ntohs(((const struct sockaddr_in *)local)->sin_port);
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void *serve_thread(void *arg)
{
    test_server *s = arg;
    struct sockaddr_in any = io_test_loopback(0);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&any, .listen_len = sizeof any,
                         .dirfd = s->dirfd, .once = s->once,
                         .max_datagram = s->max_datagram,
                         .pipeline_window = s->pipeline_window,
                         .security = {.cipher = AFTP_CIPHER_AUTO, .identity = s->secret,
                                      .peers = aftp_admit_policy(&s->admit)},
                         .hooks = {.app = s, .interrupt = &s->stop},
                         .on_listening = on_listening};
    s->rc = aftp_serve_run(&o, &s->res);
    return NULL;
}

/* Starts a server admitting client_key that takes datagrams of up to
 * max_datagram bytes (0: the default); returns once it listens. */
static void server_start_full(test_server *s, const uint8_t *client_key, int once,
                              uint16_t max_datagram, uint32_t pipeline_window)
{
    memset(s, 0, sizeof *s);
    s->max_datagram = max_datagram;
    s->pipeline_window = pipeline_window;
    assert_int_equal(aftp_hs_keypair(s->secret, s->public_key), AFTP_OK);
    memcpy(s->client_key, client_key, AFTP_KEY_LEN);
    s->authorized.keys = (uint8_t(*)[AFTP_KEYFILE_KEY_LEN])s->client_key;
    s->authorized.count = 1;
    aftp_admit_init(&s->admit, &s->authorized, NULL, aftp_wallclock());
    s->dir = io_test_mkdtemp(&s->dirfd);
    s->once = once;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, serve_thread, s), 0);
    pthread_mutex_lock(&s->lock);
    while (s->port == 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void server_start_capped(test_server *s, const uint8_t *client_key, int once,
                                uint16_t max_datagram)
{
    server_start_full(s, client_key, once, max_datagram, 0);
}

static void server_start(test_server *s, const uint8_t *client_key, int once)
{
    server_start_capped(s, client_key, once, 0);
}

static void server_join(test_server *s)
{
    pthread_join(s->thread, NULL);
}

static void server_stop(test_server *s)
{
    s->stop = 1;
    server_join(s);
}

static void server_free(test_server *s)
{
    aftp_admit_fini(&s->admit);
    close(s->dirfd);
    io_test_rmtree(s->dir);
    free(s->dir);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
}

static void host_port(const test_server *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "127.0.0.1:%u", (unsigned)s->port);
}

static void on_file(void *user, const aftp_file_event *ev)
{
    test_client *t = user;
    pthread_mutex_lock(&t->lock);
    if (t->event_count < MAX_EVENTS) {
        t->events[t->event_count] = *ev;
        snprintf((char *)t->names[t->event_count], sizeof t->names[0], "%s", ev->name);
        t->events[t->event_count].name = (const char *)t->names[t->event_count];
        snprintf(t->messages[t->event_count], sizeof t->messages[0], "%s", ev->message);
        t->events[t->event_count].message = t->messages[t->event_count];
        t->events[t->event_count].source = NULL;
        snprintf(t->printable_names[t->event_count], sizeof t->printable_names[0], "%s",
                 ev->printable_name);
        t->events[t->event_count].printable_name = t->printable_names[t->event_count];
        t->event_count++;
    }
    pthread_mutex_unlock(&t->lock);
}

static void on_client_notice(void *user, const char *text)
{
    test_client *t = user;
    if (t->notice_count < MAX_NOTICES)
        snprintf(t->notices[t->notice_count++], sizeof t->notices[0], "%s", text);
}

static void on_progress(void *user, const aftp_progress *p)
{
    test_client *t = user;
    pthread_mutex_lock(&t->lock);
    t->progress_calls++;
    t->last_bytes_done = p->bytes_done;
    t->last_min_rtt_ms = p->min_rtt_ms;
    t->last_queue_ms = p->queue_ms;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

/* A client handle pinned to server s, with callbacks into t. */
static aftp_client *client_for(test_client *t, const test_server *s)
{
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, t->secret), AFTP_OK);
    if (s != NULL)
        assert_int_equal(aftp_client_set_peer_key(c, s->public_key), AFTP_OK);
    assert_int_equal(aftp_client_set_file_cb(c, on_file, t), AFTP_OK);
    assert_int_equal(aftp_client_set_progress_cb(c, on_progress, t), AFTP_OK);
    assert_int_equal(aftp_client_set_notice_cb(c, on_client_notice, t), AFTP_OK);
    return c;
}

static void client_keys(test_client *t)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(aftp_hs_keypair(t->secret, t->public_key), AFTP_OK);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
}

static void client_free(test_client *t)
{
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
}

/* What most tests start from: a client's keys, a protected server that
 * admits them (unless without_server), a directory for the files to send. */
typedef struct test_env {
    test_server s;
    test_client t;
    int has_server;
    char *src_dir;
    int src_fd;
    char hp[64]; /* the server's HOST:PORT */
} test_env;

static void env_start(test_env *e, int has_server)
{
    memset(e, 0, sizeof *e);
    client_keys(&e->t);
    e->has_server = has_server;
    if (has_server) {
        server_start(&e->s, e->t.public_key, 1);
        host_port(&e->s, e->hp, sizeof e->hp);
    }
    e->src_dir = io_test_mkdtemp(&e->src_fd);
}

static void env_end(test_env *e, aftp_client *c)
{
    aftp_client_del(c);
    if (e->has_server)
        server_free(&e->s);
    client_free(&e->t);
    close(e->src_fd);
    io_test_rmtree(e->src_dir);
    free(e->src_dir);
}

/* A client of e's server at a fixed rate: a transfer that takes a while. */
static aftp_client *paced_client_for(test_env *e, uint64_t rate_bps)
{
    aftp_client *c = client_for(&e->t, &e->s);
    assert_int_equal(aftp_client_set_policy(c, AFTP_CC_FIXED), AFTP_OK);
    assert_int_equal(aftp_client_set_rate(c, rate_bps), AFTP_OK);
    return c;
}

/* A client that pins a fresh key, which no server holds. */
static aftp_client *client_pinned_elsewhere(test_env *e)
{
    uint8_t secret[AFTP_KEY_LEN], public_key[AFTP_KEY_LEN];
    assert_int_equal(aftp_hs_keypair(secret, public_key), AFTP_OK);
    aftp_client *c = client_for(&e->t, NULL);
    assert_int_equal(aftp_client_set_peer_key(c, public_key), AFTP_OK);
    return c;
}

/* A file of len pattern bytes at dir/name; its path in a static slot. */
static const char *make_file(const char *dir, const char *name, size_t len, uint32_t seed)
{
    static char paths[4][512];
    static int slot;
    char *path = paths[slot++ % 4];
    snprintf(path, sizeof paths[0], "%s/%s", dir, name);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    io_test_pattern(buf, len, seed);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    return path;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return NULL;
    uint8_t *buf = malloc((size_t)sb.st_size + 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    *len = fread(buf, 1, (size_t)sb.st_size, f);
    fclose(f);
    return buf;
}

/* The file at the server is byte for byte the one sent. */
static void assert_same_file(const char *sent, const char *server_dir, const char *name)
{
    char path[512];
    size_t a_len = 0, b_len = 0;
    snprintf(path, sizeof path, "%s/%s", server_dir, name);
    uint8_t *a = read_all(sent, &a_len), *b = read_all(path, &b_len);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a);
    free(b);
}

static void xxh3_128_of(const char *path, uint8_t digest[AFTP_DIGEST_LEN])
{
    size_t len = 0;
    uint8_t *buf = read_all(path, &len);
    assert_non_null(buf);
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(buf, len));
    memcpy(digest, canon.digest, AFTP_DIGEST_LEN);
    free(buf);
}

/* STARTED then FINISHED for file `index` at events[at], with its figures. */
static void assert_delivered(const test_client *t, size_t at, size_t index, const char *path,
                             const char *name, uint64_t size)
{
    uint8_t digest[AFTP_DIGEST_LEN];
    const aftp_file_event *s = &t->events[at], *f = &t->events[at + 1];
    assert_true(t->event_count >= at + 2);
    assert_int_equal(s->type, AFTP_FILE_STARTED);
    assert_int_equal(s->index, index);
    assert_string_equal(s->name, name);
    assert_int_equal(s->size, size);
    assert_int_equal(f->type, AFTP_FILE_FINISHED);
    assert_int_equal(f->index, index);
    assert_string_equal(f->name, name);
    assert_int_equal(f->error, AFTP_OK);
    assert_int_equal(f->size, size);
    assert_int_equal(f->bytes, size);
    xxh3_128_of(path, digest);
    assert_memory_equal(f->digest, digest, AFTP_DIGEST_LEN);
    assert_true(f->cipher == AFTP_CIPHER_AES256GCM || f->cipher == AFTP_CIPHER_CHACHA20POLY1305);
    assert_true(f->retransmitted >= 0 && f->retransmitted < 1);
    /* the session began with the handshake, before the file's offer */
    assert_true(f->session_seconds > 0 && f->session_seconds >= f->seconds);
    assert_string_equal(f->printable_name, name);
}

/* One file, protected, at a fixed rate slow enough for progress calls
 * (1 MiB at 16 Mbit/s: over half a second, progress comes every 250 ms). */
static void test_send_one_file(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "one.bin", 1 << 20, 7);
    aftp_client *c = paced_client_for(&e, 16000000);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    assert_string_equal(aftp_client_errmsg(c), "");
    server_join(&e.s);
    assert_int_equal(e.s.rc, AFTP_OK);
    assert_int_equal(e.t.event_count, 2);
    assert_delivered(&e.t, 0, 0, path, "one.bin", 1 << 20);
    assert_same_file(path, e.s.dir, "one.bin");
    assert_true(e.t.progress_calls >= 1);
    assert_true(e.t.last_bytes_done <= 1 << 20);
    /* the path's state the CLI's progress line shows: sampled by then */
    assert_true(e.t.last_min_rtt_ms > 0);
    assert_true(e.t.last_queue_ms >= 0);
    env_end(&e, c);
}

/* The path memory's text holds the path to e's server (its key, the
 * loopback addresses) with a rate and a min RTT. */
static int remembers_path(const test_env *e, const char *text, size_t len)
{
    char line[256];
    int n = snprintf(line, sizeof line, "aftp-path-memory 1\n");
    for (size_t i = 0; i < AFTP_KEY_LEN; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%02x", e->s.public_key[i]);
    snprintf(line + n, sizeof line - (size_t)n, "/127.0.0.1/%s ", e->hp);
    unsigned long long rate = 0, rtt = 0;
    return text != NULL && len > strlen(line) && memcmp(text, line, strlen(line)) == 0 &&
           sscanf(text + strlen(line), "%llu %llu", &rate, &rtt) == 2 && rate > 0 && rtt > 0;
}

/* Path memory (Careful Resume): a send that reached steady state leaves
 * what it measured, named by the server's key and the two addresses, for
 * the next send; a malformed memory is ignored with a notice and
 * replaced. A send on a loaded host may end before its controller left
 * startup, and saves nothing then: up to three sends of 32 MiB. */
static void test_path_memory(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 0);
    server_start(&e.s, e.t.public_key, 0);
    e.has_server = 1;
    host_port(&e.s, e.hp, sizeof e.hp);
    char memory[640], dir[600];
    snprintf(dir, sizeof dir, "%s/cache", e.src_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(memory, sizeof memory, "%s/paths", dir);
    FILE *f = fopen(memory, "w");
    assert_non_null(f);
    fputs("not a path memory\n", f);
    fclose(f);
    aftp_client *c = client_for(&e.t, &e.s);
    assert_int_equal(aftp_client_set_path_memory_file(c, NULL), AFTP_OK);
    assert_int_equal(aftp_client_set_path_memory_file(c, memory), AFTP_OK);
    size_t len = 0;
    char *text = NULL;
    for (int i = 0; i < 3 && !remembers_path(&e, text, len); i++) {
        char name[32];
        snprintf(name, sizeof name, "big%d.bin", i);
        const char *files[] = {make_file(e.src_dir, name, 32 << 20, 9)};
        assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
        free(text);
        text = (char *)read_all(memory, &len);
    }
    assert_true(remembers_path(&e, text, len));
    assert_true(e.t.notice_count >= 1);
    assert_non_null(strstr(e.t.notices[0], "is not in its format"));
    free(text);
    server_stop(&e.s);
    env_end(&e, c);
}

/* Two files in one send: one session, ids in order, both delivered. */
static void test_send_two_files(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 1);
    const char *a = make_file(e.src_dir, "a.bin", 300000, 1);
    const char *b = make_file(e.src_dir, "b.bin", 123457, 2);
    aftp_client *c = client_for(&e.t, &e.s);
    const char *files[] = {a, b};
    assert_int_equal(aftp_client_send(c, e.hp, files, 2), AFTP_OK);
    server_join(&e.s); /* `once`: both files came in the one session */
    assert_int_equal(e.s.rc, AFTP_OK);
    assert_int_equal(e.s.res.files_ok, 2);
    assert_int_equal(e.t.event_count, 4);
    assert_delivered(&e.t, 0, 0, a, "a.bin", 300000);
    assert_delivered(&e.t, 2, 1, b, "b.bin", 123457);
    assert_same_file(a, e.s.dir, "a.bin");
    assert_same_file(b, e.s.dir, "b.bin");
    env_end(&e, c);
}

/* The event of type `type` for SRC `index`, or NULL. */
static const aftp_file_event *event_of(const test_client *t, int type, size_t index)
{
    for (size_t i = 0; i < t->event_count; i++)
        if (t->events[i].type == type && t->events[i].index == index)
            return &t->events[i];
    return NULL;
}

/* A SRC that cannot be opened fails that entry alone, with its local
 * error: the files before and after it are delivered, and the send then
 * returns the failed entry's error, saying how many failed. */
static void test_later_file_missing(void **state)
{
    (void)state;
    test_env e;
    char missing[600];
    env_start(&e, 1);
    const char *a = make_file(e.src_dir, "first.bin", 70000, 21);
    const char *third = make_file(e.src_dir, "third.bin", 1000, 22);
    snprintf(missing, sizeof missing, "%s/missing.bin", e.src_dir);
    aftp_client *c = client_for(&e.t, &e.s);
    const char *files[] = {a, missing, third};
    assert_int_equal(aftp_client_send(c, e.hp, files, 3), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(aftp_client_errmsg(c), missing));
    assert_non_null(strstr(aftp_client_errmsg(c), "1 of 3 entries failed; the first: "));
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_LOCALLY);
    server_join(&e.s);
    assert_int_equal(e.t.event_count, 5);
    const aftp_file_event *failed = event_of(&e.t, AFTP_FILE_FAILED, 1);
    assert_non_null(failed);
    assert_int_equal(failed->error, AFTP_ERR_NOT_FOUND);
    assert_string_equal(failed->name, "missing.bin");
    assert_non_null(event_of(&e.t, AFTP_FILE_FINISHED, 0));
    assert_non_null(event_of(&e.t, AFTP_FILE_FINISHED, 2));
    assert_same_file(a, e.s.dir, "first.bin");
    assert_same_file(third, e.s.dir, "third.bin");
    env_end(&e, c);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Returns once t's progress callback has been called: the transfer is
 * under way. */
static void wait_for_progress(test_client *t)
{
    pthread_mutex_lock(&t->lock);
    while (t->progress_calls == 0)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

typedef struct canceller {
    aftp_client *c;
    test_client *t;
    uint64_t at_ns;
} canceller;

/* Cancels once the transfer is under way (the first progress call). */
static void *cancel_thread(void *arg)
{
    canceller *k = arg;
    wait_for_progress(k->t);
    k->at_ns = now_ns();
    aftp_client_cancel(k->c);
    return NULL;
}

/* Cancel from another thread: the send ends with AFTP_ERR_CANCELLED
 * within a second, the file FAILED with it, and the server keeps nothing
 * (8 MiB at 8 Mbit/s would take 8 s). */
static void test_cancel_from_thread(void **state)
{
    (void)state;
    test_env e;
    pthread_t th;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "big.bin", 8 << 20, 3);
    aftp_client *c = paced_client_for(&e, 8000000);
    const char *files[] = {path, path};
    canceller k = {.c = c, .t = &e.t};
    assert_int_equal(pthread_create(&th, NULL, cancel_thread, &k), 0);
    int rc = aftp_client_send(c, e.hp, files, 2);
    uint64_t returned = now_ns();
    pthread_join(th, NULL);
    assert_int_equal(rc, AFTP_ERR_CANCELLED);
    assert_true(returned - k.at_ns < UINT64_C(1000000000));
    assert_non_null(strstr(aftp_client_errmsg(c), "cancelled here"));
    /* the first file STARTED, then FAILED with the cancel, as does the
     * second, offered behind it and never sent */
    assert_int_equal(e.t.event_count, 3);
    assert_int_equal(e.t.events[0].type, AFTP_FILE_STARTED);
    for (size_t i = 1; i < 3; i++) {
        assert_int_equal(e.t.events[i].type, AFTP_FILE_FAILED);
        assert_int_equal(e.t.events[i].error, AFTP_ERR_CANCELLED);
        assert_true(e.t.events[i].bytes < (8u << 20));
    }
    server_join(&e.s);
    assert_false(io_test_exists(e.s.dirfd, "big.bin"));
    assert_int_equal(io_test_count_entries(e.s.dirfd), 0);
    env_end(&e, c);
}

static aftp_client *signalled_client;

static void on_sigusr1(int sig)
{
    (void)sig;
    aftp_client_cancel(signalled_client); /* async-signal-safe */
}

typedef struct signaller {
    test_client *t;
    pthread_t target;
} signaller;

/* Signals the sending thread once the transfer is under way. */
static void *signal_thread(void *arg)
{
    signaller *k = arg;
    wait_for_progress(k->t);
    pthread_kill(k->target, SIGUSR1);
    return NULL;
}

/* Cancel from a signal handler of the application (the library installs
 * none): the send ends with AFTP_ERR_CANCELLED, the server keeps nothing. */
static void test_cancel_from_signal_handler(void **state)
{
    (void)state;
    test_env e;
    pthread_t th;
    struct sigaction sa, old;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "signalled.bin", 8 << 20, 4);
    aftp_client *c = paced_client_for(&e, 8000000);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    signalled_client = c;
    signaller k = {.t = &e.t, .target = pthread_self()};
    assert_int_equal(pthread_create(&th, NULL, signal_thread, &k), 0);
    const char *files[] = {path};
    int rc = aftp_client_send(c, e.hp, files, 1);
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    assert_int_equal(rc, AFTP_ERR_CANCELLED);
    assert_int_equal(e.t.events[e.t.event_count - 1].error, AFTP_ERR_CANCELLED);
    server_join(&e.s);
    assert_int_equal(io_test_count_entries(e.s.dirfd), 0);
    env_end(&e, c);
}

typedef struct sender_job {
    test_client t;
    test_server *s;
    const char *path;
    int rc;
} sender_job;

static void *send_thread(void *arg)
{
    sender_job *j = arg;
    char hp[64];
    aftp_client *c = client_for(&j->t, j->s);
    host_port(j->s, hp, sizeof hp);
    const char *files[] = {j->path};
    j->rc = aftp_client_send(c, hp, files, 1);
    aftp_client_del(c);
    return NULL;
}

/* Two handles in two threads send at once, each to its own server. */
static void test_two_clients_in_threads(void **state)
{
    (void)state;
    test_server s[2];
    sender_job j[2];
    pthread_t th[2];
    int fd;
    char *src_dir = io_test_mkdtemp(&fd);
    const char *paths[2] = {make_file(src_dir, "x.bin", 2000000, 11),
                            make_file(src_dir, "y.bin", 1500000, 12)};
    for (int i = 0; i < 2; i++) {
        memset(&j[i], 0, sizeof j[i]);
        client_keys(&j[i].t);
        server_start(&s[i], j[i].t.public_key, 1);
        j[i].s = &s[i];
        j[i].path = paths[i];
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, send_thread, &j[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        server_join(&s[i]);
        assert_int_equal(j[i].rc, AFTP_OK);
        assert_int_equal(j[i].t.event_count, 2);
        assert_delivered(&j[i].t, 0, 0, paths[i], i ? "y.bin" : "x.bin", i ? 1500000 : 2000000);
        assert_same_file(paths[i], s[i].dir, i ? "y.bin" : "x.bin");
        server_free(&s[i]);
        client_free(&j[i].t);
    }
    close(fd);
    io_test_rmtree(src_dir);
    free(src_dir);
}

/* A port nothing listens on: bound, then closed. */
static uint16_t unused_port(void)
{
    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = io_test_loopback(0);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(sock, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(sock, (struct sockaddr *)&sa, &len), 0);
    close(sock);
    return ntohs(sa.sin_port);
}

/* Nobody listening: the ICMP refusal ends the send with
 * AFTP_ERR_NETWORK, the message says so, and the file FAILED alone. */
static void test_fails_when_refused(void **state)
{
    (void)state;
    test_env e;
    char hp[64];
    env_start(&e, 0);
    const char *path = make_file(e.src_dir, "lost.bin", 5000, 5);
    aftp_client *c = client_pinned_elsewhere(&e);
    snprintf(hp, sizeof hp, "127.0.0.1:%u", (unsigned)unused_port());
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, hp, files, 1), AFTP_ERR_NETWORK);
    assert_non_null(strstr(aftp_client_errmsg(c), "unreachable: connection refused"));
    assert_non_null(strstr(aftp_client_errmsg(c), hp));
    assert_int_equal(e.t.event_count, 1);
    assert_int_equal(e.t.events[0].type, AFTP_FILE_FAILED);
    assert_int_equal(e.t.events[0].error, AFTP_ERR_NETWORK);
    assert_int_equal(e.t.events[0].index, 0);
    assert_string_equal(e.t.events[0].name, "lost.bin");
    assert_string_equal(e.t.events[0].message, aftp_client_errmsg(c));
    env_end(&e, c);
}

/* A server holding another key than the pinned one ignores the HELLO; the
 * client's key request learns the other key: AFTP_ERR_AUTH, said with
 * both fingerprints, long before the idle timeout. */
static void test_fails_on_wrong_pinned_key(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "pinned.bin", 5000, 6);
    aftp_client *c = client_pinned_elsewhere(&e);
    assert_int_equal(aftp_client_set_idle_timeout_ms(c, 10000), AFTP_OK);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_AUTH);
    assert_non_null(strstr(aftp_client_errmsg(c), "answers with key SHA256:"));
    assert_non_null(strstr(aftp_client_errmsg(c), "this client's settings"));
    /* pinned from a key file: the message names the file */
    uint8_t secret[AFTP_KEY_LEN], other[AFTP_KEY_LEN];
    char pub_path[600], err[256];
    assert_int_equal(aftp_hs_keypair(secret, other), AFTP_OK);
    snprintf(pub_path, sizeof pub_path, "%s/other.pub", e.src_dir);
    assert_int_equal(aftp_keyfile_write_public(pub_path, other, NULL, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key_file(c, pub_path), AFTP_OK);
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_AUTH);
    assert_non_null(strstr(aftp_client_errmsg(c), pub_path));
    /* given directly again: the file is no longer where it came from */
    assert_int_equal(aftp_client_set_peer_key(c, other), AFTP_OK);
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_AUTH);
    assert_non_null(strstr(aftp_client_errmsg(c), "this client's settings"));
    server_stop(&e.s);
    assert_int_equal(io_test_count_entries(e.s.dirfd), 0);
    env_end(&e, c);
}

/* Keys from files: the identity and a known-hosts entry under HOST:PORT
 * exactly as given to the send (no pinned key). A key file that others
 * may read is refused, naming it, and the setting stays as it was. */
static void test_key_files_and_known_hosts(void **state)
{
    (void)state;
    test_env e;
    char id_path[600], kh_path[600], pub_path[600], line[256], err[256];
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "keyed.bin", 50000, 31);
    snprintf(id_path, sizeof id_path, "%s/id", e.src_dir);
    snprintf(kh_path, sizeof kh_path, "%s/known_hosts", e.src_dir);
    snprintf(pub_path, sizeof pub_path, "%s/server.pub", e.src_dir);
    assert_int_equal(aftp_keyfile_write_private(id_path, e.t.secret, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_write_public(pub_path, e.s.public_key, NULL, err, sizeof err),
                     AFTP_OK);
    assert_int_equal(aftp_keyfile_format_public(e.s.public_key, NULL, line, sizeof line),
                     AFTP_OK);
    FILE *kh = fopen(kh_path, "w");
    assert_non_null(kh);
    fprintf(kh, "%s %s", e.hp, line);
    fclose(kh);
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity_file(c, id_path), AFTP_OK);
    assert_int_equal(chmod(id_path, 0644), 0);
    assert_int_equal(aftp_client_set_identity_file(c, id_path), AFTP_ERR_PERMISSION);
    assert_non_null(strstr(aftp_client_errmsg(c), "identity key"));
    assert_non_null(strstr(aftp_client_errmsg(c), id_path));
    assert_int_equal(aftp_client_set_peer_key_file(c, "/nonexistent/server.pub"),
                     AFTP_ERR_NOT_FOUND);
    assert_int_equal(aftp_client_set_known_hosts_file(c, kh_path), AFTP_OK);
    assert_int_equal(aftp_client_set_file_cb(c, on_file, &e.t), AFTP_OK);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    server_join(&e.s);
    assert_delivered(&e.t, 0, 0, path, "keyed.bin", 50000);
    assert_same_file(path, e.s.dir, "keyed.bin");
    /* the same server under another spelling is not in the known hosts */
    char other[64];
    snprintf(other, sizeof other, "localhost:%u", (unsigned)e.s.port);
    assert_int_equal(aftp_client_send(c, other, files, 1), AFTP_ERR_UNKNOWN_PEER);
    assert_non_null(strstr(aftp_client_errmsg(c), "the key of localhost:"));
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_KEYS);
    /* known hosts that cannot be read: at the keys, the reason names the file once */
    assert_int_equal(aftp_client_set_known_hosts_file(c, e.src_dir), AFTP_OK);
    int rc = aftp_client_send(c, e.hp, files, 1);
    assert_true(rc != AFTP_OK && rc != AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_KEYS);
    assert_int_equal(strncmp(aftp_client_errmsg(c), "known hosts: ", 13), 0);
    assert_non_null(strstr(aftp_client_errmsg(c), e.src_dir));
    /* a server key file is read at once */
    assert_int_equal(aftp_client_set_peer_key_file(c, pub_path), AFTP_OK);
    assert_int_equal(aftp_client_set_cipher(c, 99), AFTP_ERR_INVALID_ARGUMENT);
    env_end(&e, c);
}

/* Errors before the network: the code, and a message naming the figures. */
static void test_fails_before_network(void **state)
{
    (void)state;
    test_client t;
    aftp_client *c = NULL;
    client_keys(&t);
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    const char *files[] = {"/nonexistent/aftp-lib-test"};
    /* protected without keys */
    assert_int_equal(aftp_client_send(c, "127.0.0.1:9", files, 1), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(aftp_client_errmsg(c), "no identity key"));
    assert_int_equal(aftp_client_set_identity(c, t.secret), AFTP_OK);
    assert_int_equal(aftp_client_set_known_hosts_file(c, "/nonexistent/known_hosts"), AFTP_OK);
    assert_int_not_equal(aftp_client_send(c, "127.0.0.1:9", files, 1), AFTP_OK);
    assert_non_null(strstr(aftp_client_errmsg(c), "/nonexistent/known_hosts"));
    assert_int_equal(aftp_client_set_peer_key(c, t.public_key), AFTP_OK);
    assert_int_equal(aftp_client_send(c, "nowhere", files, 1), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "bad address 'nowhere'"));
    assert_int_equal(aftp_client_send(c, "127.0.0.1:9", files, 1), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(aftp_client_errmsg(c), "/nonexistent/aftp-lib-test"));
    assert_int_equal(aftp_client_set_mtu(c, 100), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "MTU 100"));
    assert_int_equal(aftp_client_set_min_rate(c, 2000), AFTP_OK);
    assert_int_equal(aftp_client_set_max_rate(c, 1000), AFTP_OK);
    assert_int_equal(aftp_client_send(c, "127.0.0.1:9", files, 1), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "(2000 bits/s) is above the maximum (1000"));
    aftp_client_cancel(NULL);
    aftp_client_cancel(c); /* no send: no effect on the next */
    aftp_client_del(c);
    aftp_client_del(NULL);
    client_free(&t);
}

/* Redirects fd to a fresh temporary file; returns the saved fd. */
static int capture_fd(int target, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/aftp-lib-fd%d-XXXXXX", target);
    int tmp = mkstemp(path);
    assert_true(tmp >= 0);
    int saved = dup(target);
    assert_true(saved >= 0);
    assert_int_equal(dup2(tmp, target), target);
    close(tmp);
    return saved;
}

static off_t release_fd(int target, int saved, const char *path)
{
    struct stat sb;
    fflush(stdout);
    fflush(stderr);
    assert_int_equal(dup2(saved, target), target);
    close(saved);
    assert_int_equal(stat(path, &sb), 0);
    unlink(path);
    return sb.st_size;
}

/* A whole transfer, and a failing one, write nothing to fds 1 and 2. */
static void test_silent_on_stdout_stderr(void **state)
{
    (void)state;
    test_env e;
    char out_path[64], err_path[64];
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "quiet.bin", 400000, 9);
    aftp_client *c = client_for(&e.t, &e.s);
    const char *files[] = {path};
    fflush(stdout);
    fflush(stderr);
    int saved_out = capture_fd(STDOUT_FILENO, out_path, sizeof out_path);
    int saved_err = capture_fd(STDERR_FILENO, err_path, sizeof err_path);
    int rc = aftp_client_send(c, e.hp, files, 1);
    server_join(&e.s);
    int refused = aftp_client_send(c, e.hp, files, 1); /* the server is gone */
    off_t out_bytes = release_fd(STDOUT_FILENO, saved_out, out_path);
    off_t err_bytes = release_fd(STDERR_FILENO, saved_err, err_path);
    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(refused, AFTP_ERR_NETWORK);
    assert_int_equal(out_bytes, 0);
    assert_int_equal(err_bytes, 0);
    assert_same_file(path, e.s.dir, "quiet.bin");
    env_end(&e, c);
}

/* Trust on first use through the public API (spec 14.9): the server's key
 * fetched, shown as its line and fingerprint, pinned in the known hosts
 * (created 0600), and a send that finds it there; the failures said. */
static void test_trust_on_first_use(void **state)
{
    (void)state;
    test_env e;
    char kh_path[600], line[256], err[256], text[AFTP_CLIENT_KEY_TEXT_MAX];
    char fingerprint[AFTP_CLIENT_FINGERPRINT_MAX], want_fp[AFTP_CLIENT_FINGERPRINT_MAX];
    uint8_t key[AFTP_KEY_LEN], hash[crypto_hash_sha256_BYTES];
    struct stat st;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "tofu.bin", 30000, 41);
    snprintf(kh_path, sizeof kh_path, "%s/known_hosts", e.src_dir);
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, e.t.secret), AFTP_OK);
    assert_int_equal(aftp_client_add_known_host(c, e.hp, e.s.public_key), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_client_set_known_hosts_file(c, kh_path), AFTP_OK);
    assert_int_equal(aftp_client_fetch_server_key(c, "nowhere", key), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_client_fetch_server_key(c, e.hp, key), AFTP_OK);
    assert_memory_equal(key, e.s.public_key, AFTP_KEY_LEN);
    /* the texts a person compares */
    assert_int_equal(aftp_client_format_key(key, text, sizeof text), AFTP_OK);
    assert_int_equal(aftp_keyfile_format_public(key, NULL, line, sizeof line), AFTP_OK);
    line[strcspn(line, "\n")] = '\0';
    assert_string_equal(text, line);
    assert_int_equal(aftp_client_format_fingerprint(key, fingerprint, sizeof fingerprint), AFTP_OK);
    crypto_hash_sha256(hash, key, AFTP_KEY_LEN);
    memcpy(want_fp, "SHA256:", 7);
    sodium_bin2base64(want_fp + 7, sizeof want_fp - 7, hash, sizeof hash,
                      sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
    assert_string_equal(fingerprint, want_fp);
    assert_int_equal(aftp_client_format_fingerprint(key, fingerprint, sizeof fingerprint - 1),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    assert_string_equal(fingerprint, "");
    /* pinned: a file of its own, private, and the send finds the key there */
    assert_int_equal(aftp_client_add_known_host(c, e.hp, key), AFTP_OK);
    assert_int_equal(stat(kh_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    uint8_t listed[AFTP_KEY_LEN];
    assert_int_equal(aftp_keyfile_known_hosts_lookup_file(kh_path, e.hp, listed, err, sizeof err),
                     AFTP_OK);
    assert_memory_equal(listed, e.s.public_key, AFTP_KEY_LEN);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    server_join(&e.s);
    assert_same_file(path, e.s.dir, "tofu.bin");
    /* nothing listens any more: refused, said */
    assert_int_equal(aftp_client_fetch_server_key(c, e.hp, key), AFTP_ERR_NETWORK);
    assert_non_null(strstr(aftp_client_errmsg(c), "is unreachable"));
    /* a known-hosts file in a missing directory */
    assert_int_equal(aftp_client_set_known_hosts_file(c, "/nonexistent/dir/known_hosts"), AFTP_OK);
    assert_int_equal(aftp_client_add_known_host(c, e.hp, key), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(aftp_client_errmsg(c), "/nonexistent/dir/known_hosts"));
    env_end(&e, c);
}

/* What the library says instead of printing, collected. */
typedef struct test_notices {
    int count;
    char text[4][512];
} test_notices;

static void on_notice(void *user, const char *text)
{
    test_notices *n = user;
    if (n->count < 4)
        snprintf(n->text[n->count], sizeof n->text[0], "%s", text);
    n->count++;
}

/* A receiver that takes smaller datagrams than the client's MTU asks for:
 * the send goes on at the smaller size, and the notice callback says so
 * with both figures and the MTU to give the receiver. */
static void test_notice_of_datagram_cap(void **state)
{
    (void)state;
    test_env e;
    test_notices n = {0};
    memset(&e, 0, sizeof e);
    client_keys(&e.t);
    e.has_server = 1;
    server_start_capped(&e.s, e.t.public_key, 1, 1452);
    host_port(&e.s, e.hp, sizeof e.hp);
    e.src_dir = io_test_mkdtemp(&e.src_fd);
    const char *path = make_file(e.src_dir, "jumbo.bin", 100000, 51);
    aftp_client *c = client_for(&e.t, &e.s);
    assert_int_equal(aftp_client_set_mtu(c, 9000), AFTP_OK);
    assert_int_equal(aftp_client_set_notice_cb(NULL, on_notice, &n), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_client_set_notice_cb(c, on_notice, &n), AFTP_OK);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    server_join(&e.s);
    assert_same_file(path, e.s.dir, "jumbo.bin");
    int found = 0;
    for (int i = 0; i < n.count && i < 4; i++)
        found |= strstr(n.text[i], "the receiver took datagrams of at most 1452 bytes, not "
                                   "8952 (MTU 9000): give it MTU 9000 too") != NULL;
    assert_true(found);
    env_end(&e, c);
}

/* A send of name refused because the file exists at e's server: the message. */
static const char *refused_message(test_env *e, aftp_client *c, const char *path)
{
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e->hp, files, 1), AFTP_ERR_FILE_EXISTS);
    return aftp_client_errmsg(c);
}

/* The advice of a failure names the application's settings when it chose
 * its terms; fields beyond the caller's struct size are not read. */
static void test_terms_of_messages(void **state)
{
    (void)state;
    test_env e;
    memset(&e, 0, sizeof e);
    client_keys(&e.t);
    e.has_server = 1;
    server_start(&e.s, e.t.public_key, 0); /* serves until stopped */
    host_port(&e.s, e.hp, sizeof e.hp);
    e.src_dir = io_test_mkdtemp(&e.src_fd);
    const char *path = make_file(e.src_dir, "there.bin", 1000, 61);
    make_file(e.s.dir, "there.bin", 10, 62);
    aftp_client *c = client_for(&e.t, &e.s);
    assert_non_null(strstr(refused_message(&e, c, path), "its overwrite setting"));
    aftp_client_terms terms = {.size = sizeof terms,
                               .overwrite_setting = "'aftp recv --overwrite'"};
    assert_int_equal(aftp_client_set_terms(c, &terms), AFTP_OK);
    assert_non_null(strstr(refused_message(&e, c, path),
                           "replacing it with 'aftp recv --overwrite'"));
    /* a caller that knows only the first field */
    terms.size = offsetof(aftp_client_terms, idle_setting);
    terms.server_program = "the MFT gateway";
    assert_int_equal(aftp_client_set_terms(c, &terms), AFTP_OK);
    assert_non_null(strstr(refused_message(&e, c, path), "its overwrite setting"));
    assert_int_equal(aftp_client_set_terms(c, NULL), AFTP_OK);
    terms.size = 1;
    assert_int_equal(aftp_client_set_terms(c, &terms), AFTP_ERR_INVALID_ARGUMENT);
    server_stop(&e.s);
    env_end(&e, c);
}

/* The stable names a client logs and aftp send --json reports: the
 * enumerator's spelling for every code, NULL for one the library lacks. */
static void test_error_names(void **state)
{
    (void)state;
    assert_string_equal(aftp_error_name(AFTP_OK), "AFTP_OK");
    assert_string_equal(aftp_error_name(AFTP_ERR_CANCELLED), "AFTP_ERR_CANCELLED");
    assert_string_equal(aftp_error_name(-106), "AFTP_ERR_CANCELLED");
    assert_string_equal(aftp_error_name(AFTP_ERR_DIGEST_MISMATCH), "AFTP_ERR_DIGEST_MISMATCH");
    assert_string_equal(aftp_error_name(AFTP_ERR_INTERNAL), "AFTP_ERR_INTERNAL");
    for (int code = -499; code <= 0; code++) { /* a name exactly for the codes with a text */
        const char *name = aftp_error_name(code);
        if (name != NULL)
            assert_true(strncmp(name, "AFTP_", 5) == 0);
    }
    assert_null(aftp_error_name(-199));
    assert_null(aftp_error_name(1));
}

/* A pinned key that the known hosts contradict for the server fails the
 * send before any datagram (the key changed, or the pin is wrong), as
 * does a known-hosts file that lists the server with two keys; the place
 * of the failure is this side. */
static void test_pinned_key_checked_against_known_hosts(void **state)
{
    (void)state;
    test_env e;
    char kh_path[600], line[256], err[256];
    uint8_t secret[AFTP_KEY_LEN], other[AFTP_KEY_LEN];
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "checked.bin", 5000, 41);
    snprintf(kh_path, sizeof kh_path, "%s/known_hosts", e.src_dir);
    assert_int_equal(aftp_hs_keypair(secret, other), AFTP_OK);
    assert_int_equal(aftp_keyfile_format_public(other, NULL, line, sizeof line), AFTP_OK);
    FILE *kh = fopen(kh_path, "w");
    assert_non_null(kh);
    fprintf(kh, "%s %s", e.hp, line);
    fclose(kh);
    aftp_client *c = client_for(&e.t, &e.s); /* pins the server's real key */
    assert_int_equal(aftp_client_set_known_hosts_file(c, kh_path), AFTP_OK);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_AUTH);
    assert_int_equal(strncmp(aftp_client_errmsg(c), "WARNING: the key given with "
                             "aftp_client_set_peer_key is not the one pinned for ", 75), 0);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_KEYS);
    assert_int_equal(e.t.event_count, 0); /* no file was offered */
    /* the server's key listed too: two keys for one server */
    assert_int_equal(aftp_keyfile_known_hosts_append(kh_path, e.hp, e.s.public_key, err,
                                                     sizeof err), AFTP_OK);
    aftp_client *unpinned = client_for(&e.t, NULL);
    assert_int_equal(aftp_client_set_known_hosts_file(unpinned, kh_path), AFTP_OK);
    assert_int_equal(aftp_client_send(unpinned, e.hp, files, 1), AFTP_ERR_AUTH);
    assert_int_equal(strncmp(aftp_client_errmsg(unpinned), "WARNING: ", 9), 0);
    aftp_client_del(unpinned);
    /* listed with the pinned key alone: the send goes */
    kh = fopen(kh_path, "w");
    assert_non_null(kh);
    assert_int_equal(aftp_keyfile_format_public(e.s.public_key, NULL, line, sizeof line),
                     AFTP_OK);
    fprintf(kh, "%s %s", e.hp, line);
    fclose(kh);
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    assert_int_equal(aftp_client_failure_place(c), 0);
    server_join(&e.s);
    assert_delivered(&e.t, 0, 0, path, "checked.bin", 5000);
    env_end(&e, c);
}

/* What a send would refuse at once is found without sending; where a
 * send failed: this side (a missing source) or the session (the receiver
 * refused the file). */
static void test_check_send_and_failure_place(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 1);
    aftp_client *c = client_for(&e.t, &e.s);
    const char *bad_faux[] = {"faux:///x?1Q"}, *faux[] = {"faux:///zeros?1M"};
    assert_int_equal(aftp_client_check_send(c, e.hp, bad_faux, 1), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "bad faux source 'faux:///x?1Q'"));
    assert_int_equal(aftp_client_check_send(c, "127.0.0.1:99999", faux, 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "bad address '127.0.0.1:99999'"));
    assert_int_equal(aftp_client_check_send(c, e.hp, faux, 1), AFTP_OK);
    assert_string_equal(aftp_client_errmsg(c), "");
    assert_int_equal(aftp_client_failure_place(c), 0); /* no send ran */
    const char *missing[] = {"/nonexistent/aftp-lib-test"};
    assert_int_equal(aftp_client_send(c, e.hp, missing, 1), AFTP_ERR_NOT_FOUND);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_LOCALLY);
    /* a file that exists at the server: refused in the session */
    const char *path = make_file(e.src_dir, "there.bin", 3000, 43);
    int fd = openat(e.s.dirfd, "there.bin", O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    const char *files[] = {path};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_FILE_EXISTS);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_IN_SESSION);
    server_join(&e.s);
    env_end(&e, c);
}

/* A name that is not printable (which the server refuses) is reported
 * printable to people: in the event and the message. */
static void test_printable_name(void **state)
{
    (void)state;
    test_env e;
    env_start(&e, 1);
    const char *path = make_file(e.src_dir, "a\tb.bin", 2000, 44);
    aftp_client *c = client_for(&e.t, &e.s);
    const char *files[] = {path};
    /* refused here (the receiver would refuse it, spec 14.4): no session */
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_PATH_REJECTED);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_LOCALLY);
    assert_int_equal(e.t.event_count, 1);
    assert_int_equal(e.t.events[0].type, AFTP_FILE_FAILED);
    assert_string_equal(e.t.events[0].name, "a\tb.bin");
    assert_string_equal(e.t.events[0].printable_name, "a\\x09b.bin");
    assert_non_null(strstr(aftp_client_errmsg(c), "a\\x09b.bin"));
    server_stop(&e.s);
    env_end(&e, c);
}

/* A key pair as key files: the private one 0600, the public line with its
 * comment (also returned), which is the identity's public key; never over
 * an existing file; a comment of two lines is refused, writing nothing. */
static void test_keygen(void **state)
{
    (void)state;
    int dirfd;
    char *dir = io_test_mkdtemp(&dirfd);
    char path[600], pub_path[610], line[AFTP_CLIENT_KEY_LINE_MAX], text[AFTP_CLIENT_KEY_TEXT_MAX];
    uint8_t public_key[AFTP_KEY_LEN];
    struct stat sb;
    snprintf(path, sizeof path, "%s/id", dir);
    snprintf(pub_path, sizeof pub_path, "%s/id.pub", dir);
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_public_key(c, public_key), AFTP_ERR_BAD_KEY);
    assert_int_equal(aftp_client_keygen(c, path, "two\nlines", line, sizeof line),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "comment"));
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(aftp_client_keygen(c, path, "alice@example", line, 10),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(aftp_client_keygen(c, path, "alice@example", line, sizeof line), AFTP_OK);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    size_t len = 0;
    uint8_t *pub = read_all(pub_path, &len);
    assert_non_null(pub);
    pub[len] = '\0';
    assert_string_equal((char *)pub, line);
    free(pub);
    assert_int_equal(aftp_client_set_identity_file(c, path), AFTP_OK);
    assert_int_equal(aftp_client_public_key(c, public_key), AFTP_OK);
    assert_int_equal(aftp_client_format_key(public_key, text, sizeof text), AFTP_OK);
    assert_int_equal(strncmp(line, text, strlen(text)), 0);
    assert_string_equal(line + strlen(text), " alice@example\n");
    assert_int_equal(aftp_client_keygen(c, path, NULL, line, sizeof line), AFTP_ERR_FILE_EXISTS);
    assert_string_equal(line, "");
    aftp_client_del(c);
    close(dirfd);
    io_test_rmtree(dir);
    free(dir);
}

/* Rates as people write them. */
static void test_parse_rate(void **state)
{
    (void)state;
    uint64_t bps = 7;
    assert_int_equal(aftp_client_parse_rate("2.5g", &bps), AFTP_OK);
    assert_int_equal(bps, 2500000000u);
    assert_int_equal(aftp_client_parse_rate("500M", &bps), AFTP_OK);
    assert_int_equal(bps, 500000000u);
    assert_int_equal(aftp_client_parse_rate("12X", &bps), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(bps, 500000000u);
    assert_int_equal(aftp_client_parse_rate(NULL, &bps), AFTP_ERR_INVALID_ARGUMENT);
}

/* ---- trees ---- */

/* src/top: a (1000 bytes), empty/, sub/b (70000 bytes). */
#define TREE_A 1000u
#define TREE_B 70000u
static void make_tree(test_env *e, char *top, size_t cap)
{
    char dir[600];
    snprintf(top, cap, "%s/top", e->src_dir);
    assert_int_equal(mkdir(top, 0755), 0);
    snprintf(dir, sizeof dir, "%s/empty", top);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof dir, "%s/sub", top);
    assert_int_equal(mkdir(dir, 0750), 0);
    make_file(top, "a", TREE_A, 31);
    make_file(dir, "b", TREE_B, 32);
}

/* A pipelined server (the library server's default window) admitting
 * e's client, serving sessions until stopped. */
static void env_start_tree(test_env *e)
{
    env_start(e, 0);
    server_start_full(&e->s, e->t.public_key, 0, 0, AFTP_CLIENT_PIPELINE_WINDOW);
    e->has_server = 1;
    host_port(&e->s, e->hp, sizeof e->hp);
}

/* The tree at e's source directory, its path in top, and a client of e's
 * pipelined server. */
static aftp_client *tree_client(test_env *e, char *top, size_t cap)
{
    env_start_tree(e);
    make_tree(e, top, cap);
    return client_for(&e->t, &e->s);
}

static const aftp_file_event *event_at(const test_client *t, int type, const char *path)
{
    for (size_t i = 0; i < t->event_count; i++)
        if (t->events[i].type == type && strcmp(t->events[i].name, path) == 0)
            return &t->events[i];
    return NULL;
}

static aftp_client_summary summary_of(const aftp_client *c)
{
    aftp_client_summary sum = {.size = sizeof sum};
    assert_int_equal(aftp_client_get_summary(c, &sum), AFTP_OK);
    return sum;
}

/* A directory SRC: every entry gets its events, with kind and path at the
 * receiver, and the summary counts them; sent again, every file is
 * SKIPPED and no file byte goes out. */
static void test_tree_events_then_skipped(void **state)
{
    (void)state;
    test_env e;
    char top[600];
    aftp_client *c = tree_client(&e, top, sizeof top);
    const char *files[] = {top};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    assert_int_equal(e.t.event_count, 7); /* 3 dirs; 2 files STARTED and FINISHED */
    const char *dirs[] = {"top", "top/empty", "top/sub"};
    for (size_t i = 0; i < 3; i++) {
        const aftp_file_event *d = event_at(&e.t, AFTP_FILE_FINISHED, dirs[i]);
        assert_non_null(d);
        assert_int_equal(d->kind, AFTP_ENTRY_DIR);
        assert_int_equal(d->index, 0);
    }
    const aftp_file_event *b = event_at(&e.t, AFTP_FILE_FINISHED, "top/sub/b");
    assert_non_null(b);
    assert_non_null(event_at(&e.t, AFTP_FILE_STARTED, "top/sub/b"));
    assert_int_equal(b->kind, AFTP_ENTRY_FILE);
    assert_int_equal(b->size, TREE_B);
    assert_int_equal(b->bytes, TREE_B);
    assert_int_equal(b->resumed_bytes, 0);
    char sent[700];
    snprintf(sent, sizeof sent, "%s/sub/b", top);
    assert_same_file(sent, e.s.dir, "top/sub/b");
    aftp_client_summary sum = summary_of(c);
    assert_int_equal(sum.entries, 5);
    assert_int_equal(sum.files_sent, 2);
    assert_int_equal(sum.dirs, 3);
    assert_int_equal(sum.failed, 0);
    assert_int_equal(sum.file_bytes, TREE_A + TREE_B);
    assert_int_equal(sum.bytes_sent, TREE_A + TREE_B);
    assert_true(sum.seconds > 0);

    e.t.event_count = 0;
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    assert_int_equal(e.t.event_count, 5); /* dirs FINISHED, files SKIPPED alone */
    const aftp_file_event *skipped = event_at(&e.t, AFTP_FILE_SKIPPED, "top/sub/b");
    assert_non_null(skipped);
    assert_int_equal(skipped->size, TREE_B);
    assert_non_null(event_at(&e.t, AFTP_FILE_SKIPPED, "top/a"));
    sum = summary_of(c);
    assert_int_equal(sum.files_skipped, 2);
    assert_int_equal(sum.files_sent, 0);
    assert_int_equal(sum.bytes_sent, 0);
    assert_int_equal(sum.bytes_skipped, TREE_A + TREE_B);
    server_stop(&e.s);
    env_end(&e, c);
}

/* A file the receiver refuses (another file of that name is there) fails
 * alone: the session goes on and delivers the rest. */
static void test_tree_refused_entry_goes_on(void **state)
{
    (void)state;
    test_env e;
    char top[600];
    aftp_client *c = tree_client(&e, top, sizeof top);
    assert_int_equal(mkdirat(e.s.dirfd, "top", 0755), 0);
    int fd = openat(e.s.dirfd, "top/a", O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "other", 5), 5);
    close(fd);
    const char *files[] = {top};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_FILE_EXISTS);
    assert_int_equal(aftp_client_failure_place(c), AFTP_CLIENT_FAILED_IN_SESSION);
    assert_non_null(strstr(aftp_client_errmsg(c), "1 of 5 entries failed; the first: "));
    assert_non_null(strstr(aftp_client_errmsg(c), "top/a"));
    const aftp_file_event *a = event_at(&e.t, AFTP_FILE_FAILED, "top/a");
    assert_non_null(a);
    assert_int_equal(a->error, AFTP_ERR_FILE_EXISTS);
    assert_non_null(event_at(&e.t, AFTP_FILE_FINISHED, "top/sub/b"));
    char sent[700];
    snprintf(sent, sizeof sent, "%s/sub/b", top);
    assert_same_file(sent, e.s.dir, "top/sub/b");
    aftp_client_summary sum = summary_of(c);
    assert_int_equal(sum.failed, 1);
    assert_int_equal(sum.files_sent, 1);
    server_stop(&e.s);
    env_end(&e, c);
}

static int noticed(const test_client *t, const char *a, const char *b)
{
    for (size_t i = 0; i < t->notice_count; i++)
        if (strstr(t->notices[i], a) != NULL && strstr(t->notices[i], b) != NULL)
            return 1;
    return 0;
}

/* A FIFO and a link inside the tree: each skipped with a notice naming
 * it; with links recreated, the link is offered as a link (a receiver
 * whose policy recreates no links, as this one, refuses it by name:
 * spec 14.4, never a silent skip). */
static void test_tree_notices_and_links(void **state)
{
    (void)state;
    test_env e;
    char top[600], path[700];
    aftp_client *c = tree_client(&e, top, sizeof top);
    snprintf(path, sizeof path, "%s/pipe", top);
    assert_int_equal(mkfifo(path, 0644), 0);
    snprintf(path, sizeof path, "%s/link", top);
    assert_int_equal(symlink("../outside", path), 0);
    const char *files[] = {top};
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_OK);
    assert_true(noticed(&e.t, "top/pipe", "FIFO"));
    assert_true(noticed(&e.t, "top/link", "symbolic link"));
    assert_int_equal(summary_of(c).skipped_locally, 2);
    assert_null(event_at(&e.t, AFTP_FILE_FAILED, "top/link"));
    assert_false(io_test_exists(e.s.dirfd, "top/link"));
    assert_false(io_test_exists(e.s.dirfd, "top/pipe"));

    assert_int_equal(aftp_client_set_links(c, AFTP_CLIENT_LINKS_RECREATE), AFTP_OK);
    e.t.notice_count = 0;
    e.t.event_count = 0;
    assert_int_equal(aftp_client_send(c, e.hp, files, 1), AFTP_ERR_PATH_REJECTED);
    assert_false(noticed(&e.t, "top/link", "symbolic link"));
    const aftp_file_event *link = event_at(&e.t, AFTP_FILE_FAILED, "top/link");
    assert_non_null(link);
    assert_int_equal(link->kind, AFTP_ENTRY_SYMLINK);
    aftp_client_summary sum = summary_of(c);
    assert_int_equal(sum.failed, 1);
    assert_int_equal(sum.skipped_locally, 1);
    assert_int_equal(sum.files_skipped, 2);
    server_stop(&e.s);
    env_end(&e, c);
}

/* The tree settings refuse values out of range and keep the previous;
 * the summary is read within the caller's size. */
static void test_tree_settings(void **state)
{
    (void)state;
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_sync(c, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_client_set_sync(c, AFTP_CLIENT_SYNC_CHECKSUM + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_client_set_sync(c, AFTP_CLIENT_SYNC_OFF), AFTP_OK);
    assert_int_equal(aftp_client_set_links(c, 3), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_client_set_resume(c, 0), AFTP_OK);
    assert_int_equal(aftp_client_set_resume(NULL, 0), AFTP_ERR_INVALID_ARGUMENT);
    aftp_client_summary sum = {.size = 1};
    assert_int_equal(aftp_client_get_summary(c, &sum), AFTP_ERR_INVALID_ARGUMENT);
    sum.size = offsetof(aftp_client_summary, files_sent); /* an older caller's struct */
    sum.files_sent = 77;
    assert_int_equal(aftp_client_get_summary(c, &sum), AFTP_OK);
    assert_int_equal(sum.files_sent, 77);
    const char *mixed[] = {"faux:///z?1k", "/etc/hostname"};
    assert_int_equal(aftp_client_check_send(c, "127.0.0.1:9", mixed, 2),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_client_errmsg(c), "cannot go in one send"));
    aftp_client_del(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send_one_file),
        cmocka_unit_test(test_send_two_files),
        cmocka_unit_test(test_later_file_missing),
        cmocka_unit_test(test_cancel_from_thread),
        cmocka_unit_test(test_cancel_from_signal_handler),
        cmocka_unit_test(test_two_clients_in_threads),
        cmocka_unit_test(test_fails_when_refused),
        cmocka_unit_test(test_fails_on_wrong_pinned_key),
        cmocka_unit_test(test_key_files_and_known_hosts),
        cmocka_unit_test(test_fails_before_network),
        cmocka_unit_test(test_silent_on_stdout_stderr),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_trust_on_first_use),
        cmocka_unit_test(test_notice_of_datagram_cap),
        cmocka_unit_test(test_terms_of_messages),
        cmocka_unit_test(test_pinned_key_checked_against_known_hosts),
        cmocka_unit_test(test_check_send_and_failure_place),
        cmocka_unit_test(test_printable_name),
        cmocka_unit_test(test_tree_events_then_skipped),
        cmocka_unit_test(test_tree_refused_entry_goes_on),
        cmocka_unit_test(test_tree_notices_and_links),
        cmocka_unit_test(test_tree_settings),
        cmocka_unit_test(test_keygen),
        cmocka_unit_test(test_path_memory),
        cmocka_unit_test(test_parse_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
