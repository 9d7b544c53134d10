/* The server API serving many sessions at once (aftp_server.h, io/run/aftp_hub.h):
 * a server runs in a thread of this process, clients push to it over
 * 127.0.0.1 from threads of their own (aftp_client_send), and raw peers
 * misbehave beside them.
 *
 *   concurrent   32 clients push at once, distinct files and a few trees,
 *                while 8 more pull (aftp_client_get) distinct files and a
 *                tree from the server's root: all byte-exact both ways, one
 *                receipt per file, and the sessions really overlap (two of
 *                them were connected at the same time, a pull among them);
 *   misbehaving  while a real client transfers: a half-open peer (HELLO,
 *                then silence), a trickling authorized peer, a client that
 *                cancels and a flood of HELLOs: the real client's files
 *                arrive, the server serves a client after them, and the
 *                half-open session ends on its own (its idle timeout);
 *   limit        with max_sessions 2 held by half-open peers, a third
 *                client is refused with AFTP_ERR_LIMIT and a message that
 *                names the limit;
 *   drain        running sessions complete, a new client is refused
 *                ("shutting down"), the run returns AFTP_OK; a drain
 *                timeout cancels a session that would hold it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
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
#include <cmocka.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_push.h"
#include "aftp_source.h"
#include "aftp_wallclock.h"
#include "io_testutil.h"
#include "server_fixture.h"
#include "proto/aftp_wire.h"

enum { KEYS = 32, PULLERS = 8, TREE_FILES = 3 };

typedef struct fixture {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    char server_dir[512], authorized[512];
    sfx_key server, client[KEYS + PULLERS]; /* the pushers', then the pullers' */
} fixture;

static int setup(void **state)
{
    fixture *f = sfx_setup(sizeof *f);
    sfx_mkdir(f->server_dir, sizeof f->server_dir, f->srv.top, "incoming");
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    sfx_key_new(&f->server);
    for (int i = 0; i < KEYS + PULLERS; i++) {
        sfx_key_new(&f->client[i]);
        sfx_authorize(out, NULL, f->client[i].public_key, i < KEYS ? "client" : "puller");
    }
    fclose(out);
    *state = f;
    return 0;
}

/* ---- the server ---- */

static void configure(fixture *f, uint64_t idle_ms)
{
    sfx_configure(&f->srv, f->server_dir, f->server.secret, f->authorized, idle_ms);
    assert_int_equal(aftp_server_set_workers(f->srv.s, 2), AFTP_OK);
    assert_int_equal(aftp_server_set_receipt_cb(f->srv.s, sfx_on_receipt, &f->srv), AFTP_OK);
}

/* ---- clients ---- */

typedef struct client_job {
    fixture *f;
    unsigned port;
    int key;
    const char *files[4];
    size_t count;
    const char *dest; /* non-NULL: a pull of files (the server's paths) into it */
    uint64_t max_rate_bps;
    int cancel_on_progress; /* cancel once the server received bytes */
    aftp_client *c;
    int rc;
    char errmsg[512];
} client_job;

static void cancel_on_progress(void *user, const aftp_progress *p)
{
    client_job *j = user;
    if (p->bytes_done > 0)
        aftp_client_cancel(j->c);
}

/* The job's client, made on the test's thread. */
static void client_prepare(client_job *j)
{
    j->c = sfx_client_new(j->f->client[j->key].secret, j->f->server.public_key);
    aftp_client_set_idle_timeout_ms(j->c, 10000);
    if (j->max_rate_bps != 0)
        aftp_client_set_max_rate(j->c, j->max_rate_bps);
    if (j->cancel_on_progress)
        aftp_client_set_progress_cb(j->c, cancel_on_progress, j);
}

static void *client_thread(void *arg)
{
    client_job *j = arg;
    char host[64];
    sfx_client_host(host, sizeof host, j->port);
    j->rc = j->dest != NULL ? aftp_client_get(j->c, host, j->files, j->count, j->dest)
                            : aftp_client_send(j->c, host, j->files, j->count);
    snprintf(j->errmsg, sizeof j->errmsg, "%s", aftp_client_errmsg(j->c));
    aftp_client_del(j->c);
    return NULL;
}

static void start_client(pthread_t *t, client_job *j)
{
    client_prepare(j);
    assert_int_equal(pthread_create(t, NULL, client_thread, j), 0);
}

static int run_client(client_job *j)
{
    client_prepare(j);
    client_thread(j);
    return j->rc;
}

/* ---- raw peers ---- */

/* A HELLO of client key `key` (a real handshake, message 1 and all) from
 * a socket of its own, and nothing after it: a half-open peer. Returns
 * the socket (closed by the caller); the HELLO's bytes into hello. */
static int half_open(const fixture *f, unsigned port, int key, uint8_t *hello, size_t *len)
{
    aftp_sender_settings set;
    aftp_sender *s;
    aftp_datagram dg;
    aftp_sender_settings_default(&set);
    set.conn_id = 0x5000u + (uint32_t)key;
    set.storage = &aftp_source_ops;
    set.security.cipher = AFTP_CIPHER_AUTO;
    set.security.identity = f->client[key].secret;
    set.security.peer_key = f->server.public_key;
    set.security.unix_time_ns = aftp_wallclock_now_ns();
    assert_int_equal(aftp_sender_new(&set, 1, &s), AFTP_OK);
    assert_int_equal(aftp_sender_write(s, 1, hello, AFTP_WIRE_MAX_DATAGRAM, &dg), 1);
    memmove(hello, dg.head, dg.head_len);
    if (dg.payload_len > 0) /* a HELLO is all head */
        memcpy(hello + dg.head_len, dg.payload, dg.payload_len);
    *len = dg.head_len + dg.payload_len;
    aftp_sender_del(s);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = io_test_loopback((uint16_t)port);
    assert_true(fd >= 0);
    assert_int_equal(sendto(fd, hello, *len, 0, (struct sockaddr *)&to, sizeof to), (ssize_t)*len);
    return fd;
}

/* `count` copies of a real HELLO, each under another connection id (so
 * each is a new handshake whose message 1 does not open), from one socket. */
static void hello_flood(unsigned port, const uint8_t *hello, size_t len, int count)
{
    uint8_t copy[AFTP_WIRE_MAX_DATAGRAM];
    struct sockaddr_in to = io_test_loopback((uint16_t)port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    memcpy(copy, hello, len);
    for (int i = 0; i < count; i++) {
        copy[7] = (uint8_t)i; /* the header's conn_id, bytes 4-7 (spec 5.1) */
        copy[6] = (uint8_t)(i >> 8);
        (void)sendto(fd, copy, len, 0, (struct sockaddr *)&to, sizeof to);
    }
    close(fd);
}

/* An authorized peer that trickles: a push at a fixed 40 kbit/s that runs
 * until `stop`. */
typedef struct trickler {
    const fixture *f;
    unsigned port;
    const char *file;
    atomic_int stop;
    atomic_int connected;
    int rc;
} trickler;

static void trickle_event(void *app, const aftp_event *ev)
{
    trickler *t = app;
    if (ev->type == AFTP_EV_CONNECTED)
        atomic_store(&t->connected, 1);
}

static void *trickle_thread(void *arg)
{
    trickler *t = arg;
    struct sockaddr_in to = io_test_loopback((uint16_t)t->port);
    aftp_push_result res;
    aftp_push_opts o = {.files = &t->file, .file_count = 1, .peer = (struct sockaddr *)&to,
                        .peer_len = sizeof to, .rate_bps = 40000, .policy = AFTP_CC_FIXED,
                        .idle_timeout_ns = UINT64_C(30000000000),
                        .hooks = {.on_event = trickle_event, .app = t, .interrupt = &t->stop}};
    o.security.cipher = AFTP_CIPHER_AUTO;
    o.security.identity = t->f->client[KEYS - 1].secret;
    o.security.peer_key = t->f->server.public_key;
    t->rc = aftp_push_run(&o, &res);
    return NULL;
}

/* ---- tests ---- */

/* The most sessions connected at once, from the receipts: each session's
 * span runs from its handshake to its last receipt. */
static int peak_overlap(const fixture *f)
{
    int peak = 0;
    for (int i = 0; i < f->srv.receipt_count; i++) {
        int at_once = 0;
        int64_t t = f->srv.receipts[i].connected_ns;
        for (int k = 0; k < f->srv.receipt_count; k++) {
            int64_t last = 0;
            for (int m = 0; m < f->srv.receipt_count; m++)
                if (f->srv.receipts[m].connected_ns == f->srv.receipts[k].connected_ns &&
                    f->srv.receipts[m].end_ns > last)
                    last = f->srv.receipts[m].end_ns;
            int first_of_session = 1;
            for (int m = 0; m < k; m++)
                first_of_session &= f->srv.receipts[m].connected_ns !=
                                    f->srv.receipts[k].connected_ns;
            at_once += first_of_session && f->srv.receipts[k].connected_ns <= t && t <= last;
        }
        if (at_once > peak)
            peak = at_once;
    }
    return peak;
}

/* Whether a pull's session and a push's were connected at the same time. */
static int pull_beside_push(const fixture *f)
{
    const sfx_receipt *r = f->srv.receipts;
    for (int i = 0; i < f->srv.receipt_count; i++)
        for (int k = 0; k < f->srv.receipt_count; k++)
            if (r[i].pulled && !r[k].pulled && r[i].connected_ns <= r[k].end_ns &&
                r[k].connected_ns <= r[i].end_ns)
                return 1;
    return 0;
}

/* The sources of the 32 pushers: each its file cNN.bin, every 8th also
 * a tree tNN/sub/fK (paths[i][k]). */
typedef struct push_sources {
    char paths[KEYS][TREE_FILES + 1][600], dirs[KEYS][500];
} push_sources;

static void make_pusher(fixture *f, push_sources *src, int i, client_job *j)
{
    char(*paths)[600] = src->paths[i];
    snprintf(paths[0], sizeof paths[0], "%s/c%02d.bin", f->srv.top, i);
    sfx_make_file(paths[0], 200000 + (size_t)i * 997, (uint32_t)i);
    j->files[j->count++] = paths[0];
    if (i % 8 != 3)
        return;
    char *dir = src->dirs[i];
    snprintf(dir, sizeof src->dirs[i], "%s/t%02d", f->srv.top, i); /* a tree: t/sub/fK */
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(paths[1], sizeof paths[1], "%.500s/sub", dir);
    assert_int_equal(mkdir(paths[1], 0700), 0);
    for (int k = 1; k <= TREE_FILES; k++) {
        snprintf(paths[k], sizeof paths[k], "%.500s/sub/f%d", dir, k);
        sfx_make_file(paths[k], 50000 + (size_t)k * 311, (uint32_t)(i * 10 + k));
    }
    j->files[j->count++] = dir;
}

/* Pusher i's files landed byte-exact, one receipt each; how many. */
static int assert_pushed(fixture *f, const push_sources *src, int i)
{
    char rel[64];
    int files = 1;
    snprintf(rel, sizeof rel, "c%02d.bin", i);
    assert_true(sfx_same_file(f->server_dir, rel, src->paths[i][0]));
    assert_int_equal(sfx_receipts_for(&f->srv, rel), 1);
    for (int k = 1; i % 8 == 3 && k <= TREE_FILES; k++, files++) {
        snprintf(rel, sizeof rel, "t%02d/sub/f%d", i, k);
        assert_true(sfx_same_file(f->server_dir, rel, src->paths[i][k]));
        assert_int_equal(sfx_receipts_for(&f->srv, rel), 1);
    }
    return files;
}

/* What the pullers fetch, beneath the server's root: pull/pNN.bin, one
 * each, and the tree pull/tree (top.bin, sub/fK) that each fetches too. */
static void make_pull_sources(const fixture *f)
{
    char path[700];
    snprintf(path, sizeof path, "%s/pull", f->server_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    for (int p = 0; p < PULLERS; p++) {
        snprintf(path, sizeof path, "%s/pull/p%02d.bin", f->server_dir, p);
        sfx_make_file(path, 300000 + (size_t)p * 1009, 500u + (uint32_t)p);
    }
    snprintf(path, sizeof path, "%s/pull/tree", f->server_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/pull/tree/sub", f->server_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/pull/tree/top.bin", f->server_dir);
    sfx_make_file(path, 120000, 600);
    for (int k = 1; k <= TREE_FILES; k++) {
        snprintf(path, sizeof path, "%s/pull/tree/sub/f%d", f->server_dir, k);
        sfx_make_file(path, 40000 + (size_t)k * 733, 600u + (uint32_t)k);
    }
}

/* Puller p (key KEYS + p): its file and the tree, into dest. */
static void make_puller(fixture *f, int p, char *dest, size_t cap, char *file, size_t file_cap,
                        client_job *j)
{
    snprintf(dest, cap, "%s/got%02d", f->srv.top, p);
    assert_int_equal(mkdir(dest, 0700), 0);
    snprintf(file, file_cap, "pull/p%02d.bin", p);
    j->key = KEYS + p;
    j->files[0] = file;
    j->files[1] = "pull/tree";
    j->count = 2;
    j->dest = dest;
}

/* Puller p's file and tree arrived byte-exact (contents and metadata). */
static void assert_pulled(const fixture *f, int p, const char *dest)
{
    char rel[32], src[700];
    snprintf(rel, sizeof rel, "p%02d.bin", p);
    snprintf(src, sizeof src, "%s/pull/%s", f->server_dir, rel);
    assert_true(sfx_same_file(dest, rel, src));
    int dst = open(dest, O_RDONLY | O_DIRECTORY);
    assert_true(dst >= 0);
    snprintf(src, sizeof src, "%s/pull/tree", f->server_dir);
    assert_int_equal(io_test_expect_tree_copies(src, dst), TREE_FILES + 3); /* tree, top, sub */
    close(dst);
}

static void test_32_clients_at_once(void **state)
{
    fixture *f = *state;
    static client_job jobs[KEYS + PULLERS];
    static push_sources src;
    pthread_t threads[KEYS + PULLERS];
    char dests[PULLERS][600], files[PULLERS][32];
    make_pull_sources(f);
    configure(f, 10000);
    unsigned port = sfx_start(&f->srv, 30);
    for (int i = 0; i < KEYS + PULLERS; i++) {
        client_job *j = &jobs[i];
        *j = (client_job){.f = f, .port = port, .key = i, .max_rate_bps = 100000000};
        if (i < KEYS)
            make_pusher(f, &src, i, j);
        else
            make_puller(f, i - KEYS, dests[i - KEYS], sizeof dests[0], files[i - KEYS],
                        sizeof files[0], j);
    }
    /* the pulls start among the pushes: one after every 4th push */
    for (int i = 0; i < KEYS; i++) {
        start_client(&threads[i], &jobs[i]);
        if (i % 4 == 0)
            start_client(&threads[KEYS + i / 4], &jobs[KEYS + i / 4]);
    }
    for (int i = 0; i < KEYS + PULLERS; i++)
        pthread_join(threads[i], NULL);
    sfx_stop(&f->srv, 2);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    int pushed = 0, pulled = 0;
    for (int i = 0; i < KEYS + PULLERS; i++)
        assert_int_equal(jobs[i].rc, AFTP_OK);
    for (int i = 0; i < KEYS; i++)
        pushed += assert_pushed(f, &src, i);
    for (int p = 0; p < PULLERS; p++)
        assert_pulled(f, p, dests[p]);
    for (int i = 0; i < f->srv.receipt_count; i++)
        pulled += f->srv.receipts[i].pulled;
    assert_int_equal(f->srv.receipt_count - pulled, pushed);
    assert_int_equal(pulled, PULLERS * (1 + 1 + TREE_FILES)); /* p, top.bin, sub/fK */
    assert_true(peak_overlap(f) >= 2);
    assert_true(pull_beside_push(f));
}

static void test_misbehaving_peers(void **state)
{
    fixture *f = *state;
    char big[600], small[600], slow[600], again[600], cancelled[600];
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t hello_len;
    pthread_t cancel_thread, trickle;
    snprintf(big, sizeof big, "%s/big.bin", f->srv.top);
    snprintf(small, sizeof small, "%s/small.bin", f->srv.top);
    snprintf(slow, sizeof slow, "%s/slow.bin", f->srv.top);
    snprintf(again, sizeof again, "%s/again.bin", f->srv.top);
    snprintf(cancelled, sizeof cancelled, "%s/cancelled.bin", f->srv.top);
    sfx_make_file(big, 4000000, 1);
    sfx_make_file(small, 300000, 2);
    sfx_make_file(slow, 2000000, 3);
    sfx_make_file(again, 100000, 4);
    sfx_make_file(cancelled, 2000000, 5); /* its own: the trickler's file waits for the trickler */
    configure(f, 2000); /* a silent peer's session ends 2 s after it went quiet */
    unsigned port = sfx_start(&f->srv, 30);

    /* the trickler holds a session that is never idle */
    trickler t = {.f = f, .port = port, .file = slow};
    assert_int_equal(pthread_create(&trickle, NULL, trickle_thread, &t), 0);
    while (!atomic_load(&t.connected))
        usleep(1000);
    /* a half-open peer, a client that cancels, a flood */
    int silent = half_open(f, port, 0, hello, &hello_len);
    client_job canceller = {.f = f, .port = port, .key = 1, .files = {cancelled}, .count = 1,
                            .max_rate_bps = 8000000, .cancel_on_progress = 1};
    start_client(&cancel_thread, &canceller);
    hello_flood(port, hello, hello_len, 1000);
    client_job real = {.f = f, .port = port, .key = 2, .files = {big, small}, .count = 2,
                       .max_rate_bps = 200000000};
    int rc_real = run_client(&real);
    pthread_join(cancel_thread, NULL);
    client_job later = {.f = f, .port = port, .key = 3, .files = {again}, .count = 1};
    int rc_later = run_client(&later);
    /* the half-open session ends on its own, the trickler's once it stops */
    int silent_ended = sfx_wait_lines(&f->srv, AFTP_LOG_SESSION_FAILED, "went silent", 1, 30);
    atomic_store(&t.stop, 1);
    pthread_join(trickle, NULL);
    close(silent);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_real, AFTP_OK);
    assert_true(sfx_same_file(f->server_dir, "big.bin", big));
    assert_true(sfx_same_file(f->server_dir, "small.bin", small));
    assert_int_equal(canceller.rc, AFTP_ERR_CANCELLED);
    assert_int_equal(rc_later, AFTP_OK);
    assert_true(sfx_same_file(f->server_dir, "again.bin", again));
    assert_int_equal(silent_ended, 1);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
}

static void test_limit_refusal(void **state)
{
    fixture *f = *state;
    char file[600];
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    snprintf(file, sizeof file, "%s/late.bin", f->srv.top);
    sfx_make_file(file, 100000, 9);
    configure(f, 30000);
    assert_int_equal(aftp_server_set_max_sessions(f->srv.s, 2), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 30);
    int a = half_open(f, port, 0, hello, &len), b = half_open(f, port, 1, hello, &len);
    client_job third = {.f = f, .port = port, .key = 2, .files = {file}, .count = 1};
    int rc = run_client(&third);
    sfx_stop(&f->srv, 2);
    close(a);
    close(b);

    assert_int_equal(rc, AFTP_ERR_LIMIT);
    assert_non_null(strstr(third.errmsg, "maximum of 2 sessions"));
    assert_int_equal(f->srv.run_rc, AFTP_OK);
    /* the bounds of the setting */
    assert_int_equal(aftp_server_set_max_sessions(f->srv.s, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_server_set_max_sessions(f->srv.s, AFTP_SERVER_MAX_SESSIONS_MAX + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "65536"));
}

static void test_drain(void **state)
{
    fixture *f = *state;
    char one[600], two[600], late[600];
    pthread_t threads[2];
    snprintf(one, sizeof one, "%s/one.bin", f->srv.top);
    snprintf(two, sizeof two, "%s/two.bin", f->srv.top);
    snprintf(late, sizeof late, "%s/late.bin", f->srv.top);
    sfx_make_file(one, 6000000, 11); /* 3 s each at 16 Mbit/s: they outlast the newcomer */
    sfx_make_file(two, 6000000, 12);
    sfx_make_file(late, 100000, 13);
    configure(f, 30000);
    unsigned port = sfx_start(&f->srv, 30);
    client_job jobs[2] = {
        {.f = f, .port = port, .key = 0, .files = {one}, .count = 1, .max_rate_bps = 16000000},
        {.f = f, .port = port, .key = 1, .files = {two}, .count = 1, .max_rate_bps = 16000000}};
    for (int i = 0; i < 2; i++)
        start_client(&threads[i], &jobs[i]);
    assert_int_equal(sfx_wait_lines(&f->srv, AFTP_LOG_SESSION_STARTED, "", 2, 30), 2);
    aftp_server_drain(f->srv.s);
    assert_int_equal(sfx_wait_lines(&f->srv, AFTP_LOG_DRAINING, "", 1, 30), 1);
    client_job newcomer = {.f = f, .port = port, .key = 2, .files = {late}, .count = 1};
    int rc_new = run_client(&newcomer);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    sfx_join(&f->srv, 10);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(jobs[0].rc, AFTP_OK);
    assert_int_equal(jobs[1].rc, AFTP_OK);
    assert_true(sfx_same_file(f->server_dir, "one.bin", one));
    assert_true(sfx_same_file(f->server_dir, "two.bin", two));
    assert_int_equal(rc_new, AFTP_ERR_LIMIT);
    assert_non_null(strstr(newcomer.errmsg, "shutting down"));
    assert_int_equal(sfx_lines_with(&f->srv, AFTP_LOG_SESSION_ENDED, ": ok"), 2);
}

/* A session that would hold the drain (a half-open peer, a 30 s idle
 * timeout) is cancelled at the drain timeout; the run returns AFTP_OK
 * long before the idle timeout. */
static void test_drain_timeout(void **state)
{
    fixture *f = *state;
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    configure(f, 30000);
    assert_int_equal(aftp_server_set_drain_timeout_ms(f->srv.s, 300), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 30);
    int fd = half_open(f, port, 0, hello, &len);
    /* its HELLO_ACK back: the session exists */
    uint8_t ack[AFTP_WIRE_MAX_DATAGRAM];
    assert_true(recv(fd, ack, sizeof ack, 0) > 0);
    aftp_server_drain(f->srv.s);
    sfx_join(&f->srv, 10);
    close(fd);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(sfx_lines_with(&f->srv, AFTP_LOG_DRAINING, "0.3 s"), 1);
    aftp_server *s = f->srv.s;
    assert_int_equal(aftp_server_set_drain_timeout_ms(s, AFTP_SERVER_DRAIN_TIMEOUT_MAX_MS + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_32_clients_at_once, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_misbehaving_peers, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_limit_refusal, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_drain_timeout, setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
