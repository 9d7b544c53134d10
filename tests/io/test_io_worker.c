/* Many sessions on one datapath thread (io/run/aftp_worker): sender and
 * receiver engines in pairs over connected loopback UDP sockets, the
 * senders on one worker and the receivers on another. Every transfer
 * completes and verifies; a session whose peer is silent ends on its own;
 * a cancel ends that session alone and its peer is told; sessions added
 * from another thread while others run complete; deleting a worker ends
 * every session it runs, each with its on_end. The fairness figure (bytes
 * each of N equal sessions moved in a fixed time) is printed, not
 * asserted. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_faux.h"
#include "aftp_io.h"
#include "aftp_store.h"
#include "aftp_worker.h"
#include "io_testutil.h"

#define MAX_PAIRS 64
/* Hang guard only: a session that never ends fails the test after this. */
#define END_GUARD_S 60
#define MIB (UINT64_C(1) << 20)

enum end_state { RUNNING = 0, ENDED };

/* One transfer: a sender and a receiver engine on two connected sockets. */
typedef struct pair {
    struct rig *rig;
    int index;
    union {               /* the receiver's storage (its `user`): first */
        aftp_store store;
        aftp_faux_sink sink;
    } dst;
    uint8_t *data;        /* the source's bytes; NULL: faux zeros */
    uint64_t size;
    char name[32];
    aftp_udp su, ru;
    aftp_sender *snd;
    aftp_receiver *rcv;
    aftp_drive sd, rd;
    aftp_worker_session *sws, *rws;
    int file_end;         /* the sender's FILE_END error; 1 before */
    int s_rc, r_rc;
    int s_end, r_end;     /* enum end_state */
    atomic_int started;   /* the sender's file started (FILE_START) */
    atomic_uint_fast64_t received; /* the receiver's payload bytes, from on_tick */
} pair;

typedef struct rig {
    char *dir;
    int dirfd;
    aftp_worker *senders, *receivers;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ends; /* on_end calls */
    pair pairs[MAX_PAIRS];
    int npairs;
} rig;

static int view(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out)
{
    pair *p = user;
    (void)file_id;
    if (off + len > p->size)
        return AFTP_ERR_IO;
    *out = p->data != NULL ? p->data + off : aftp_faux_zeros(len);
    return *out != NULL ? AFTP_OK : AFTP_ERR_NO_MEMORY;
}

static int close_source(void *user, uint32_t file_id, int commit)
{
    (void)user, (void)file_id, (void)commit;
    return AFTP_OK;
}

static const aftp_storage_ops source_ops = {.view = view, .close = close_source};

static void on_sender_event(void *user, const aftp_event *ev)
{
    pair *p = user;
    if (ev->type == AFTP_EV_FILE_START)
        atomic_store(&p->started, 1);
    if (ev->type == AFTP_EV_FILE_END)
        p->file_end = ev->error;
}

static void on_receiver_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    pair *p = app;
    (void)now_ns;
    atomic_store(&p->received, st->payload_bytes_received);
}

static void note_end(pair *p, int *state, int *rc_out, int rc)
{
    pthread_mutex_lock(&p->rig->lock);
    assert_int_equal(*state, RUNNING); /* on_end once per session */
    *state = ENDED;
    *rc_out = rc;
    p->rig->ends++;
    pthread_cond_broadcast(&p->rig->cond);
    pthread_mutex_unlock(&p->rig->lock);
}

static void on_sender_end(void *app, aftp_worker_session *ws, int rc)
{
    pair *p = app;
    (void)ws;
    note_end(p, &p->s_end, &p->s_rc, rc);
}

static void on_receiver_end(void *app, aftp_worker_session *ws, int rc)
{
    pair *p = app;
    (void)ws;
    note_end(p, &p->r_end, &p->r_rc, rc);
}

static void open_socket(aftp_udp *u)
{
    struct sockaddr_in lo = io_test_loopback(0);
    assert_int_equal(aftp_udp_open(u, (struct sockaddr *)&lo, sizeof lo, AFTP_IO_DATAGRAM,
                                   AFTP_UDP_PORT_OWN),
                     AFTP_OK);
    aftp_udp_buffers b = {.want_snd = 4 * MIB, .want_rcv = 4 * MIB};
    (void)aftp_udp_set_buffers(u, &b);
}

static void connect_sockets(aftp_udp *a, aftp_udp *b)
{
    struct sockaddr_storage la, lb;
    assert_int_equal(aftp_udp_local_addr(a, &la), AFTP_OK);
    assert_int_equal(aftp_udp_local_addr(b, &lb), AFTP_OK);
    assert_int_equal(aftp_udp_connect(a, (struct sockaddr *)&lb, sizeof(struct sockaddr_in)),
                     AFTP_OK);
    assert_int_equal(aftp_udp_connect(b, (struct sockaddr *)&la, sizeof(struct sockaddr_in)),
                     AFTP_OK);
}

typedef struct pair_opts {
    uint64_t size;
    uint64_t rate_bps;        /* the sender's fixed pace */
    uint64_t idle_timeout_ns; /* both ends; 0: the default */
    int faux;                 /* zeros into a sink, no disk */
} pair_opts;

static void new_sender(pair *p, const pair_opts *o)
{
    aftp_sender_settings ss;
    aftp_sender_settings_default(&ss);
    ss.conn_id = 0x10000u + 2u * (uint32_t)p->index + 1u;
    ss.max_datagram = AFTP_IO_DATAGRAM;
    ss.storage = &source_ops;
    ss.on_event = on_sender_event;
    ss.user = p;
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = o->rate_bps;
    ss.security.cipher = AFTP_CIPHER_NONE;
    if (o->idle_timeout_ns)
        ss.idle_timeout_ns = o->idle_timeout_ns;
    assert_int_equal(aftp_sender_new(&ss, aftp_drive_now_ns(), &p->snd), AFTP_OK);
    aftp_file_info info = {.file_id = 1, .size = p->size, .mode = 0644, .path = p->name};
    assert_int_equal(aftp_sender_add_file(p->snd, &info), AFTP_OK);
    aftp_sender_finish(p->snd);
}

static void new_receiver(pair *p, const pair_opts *o)
{
    aftp_receiver_settings rs;
    aftp_receiver_settings_default(&rs);
    rs.conn_id = 0x10000u + 2u * (uint32_t)p->index + 2u;
    rs.max_datagram = AFTP_IO_DATAGRAM;
    rs.storage = o->faux ? &aftp_faux_sink_ops : &aftp_store_ops;
    rs.user = &p->dst;
    rs.security.cipher = AFTP_CIPHER_NONE;
    if (o->idle_timeout_ns)
        rs.idle_timeout_ns = o->idle_timeout_ns;
    if (!o->faux)
        aftp_store_init(&p->dst.store, p->rig->dirfd, 0);
    assert_int_equal(aftp_receiver_new(&rs, aftp_drive_now_ns(), &p->rcv), AFTP_OK);
}

/* A pair ready to run: sockets connected, engines made, drives set. */
static pair *new_pair(rig *r, const pair_opts *o)
{
    assert_true(r->npairs < MAX_PAIRS);
    pair *p = &r->pairs[r->npairs];
    memset(p, 0, sizeof *p);
    p->rig = r;
    p->index = r->npairs++;
    p->size = o->size;
    p->file_end = 1;
    snprintf(p->name, sizeof p->name, "file%02d", p->index);
    if (!o->faux) {
        p->data = malloc(o->size);
        assert_non_null(p->data);
        io_test_pattern(p->data, o->size, (uint32_t)p->index + 1u);
    }
    open_socket(&p->su);
    open_socket(&p->ru);
    connect_sockets(&p->su, &p->ru);
    new_sender(p, o);
    new_receiver(p, o);
    p->sd = (aftp_drive){.sender = p->snd, .udp = &p->su, .max_datagram = AFTP_IO_DATAGRAM};
    p->rd = (aftp_drive){.receiver = p->rcv, .udp = &p->ru, .max_datagram = AFTP_IO_DATAGRAM,
                         .on_tick = on_receiver_tick, .app = p};
    return p;
}

static void add_sender(rig *r, pair *p)
{
    aftp_worker_job job = {.drive = &p->sd, .on_end = on_sender_end, .app = p};
    assert_int_equal(aftp_worker_add(r->senders, &job, &p->sws), AFTP_OK);
}

static void add_receiver_to(aftp_worker *w, pair *p)
{
    aftp_worker_job job = {.drive = &p->rd, .on_end = on_receiver_end, .app = p};
    assert_int_equal(aftp_worker_add(w, &job, &p->rws), AFTP_OK);
}

static void add_receiver(rig *r, pair *p)
{
    add_receiver_to(r->receivers, p);
}

static void add_pair(rig *r, pair *p)
{
    add_receiver(r, p);
    add_sender(r, p);
}

static int setup(void **state)
{
    rig *r = calloc(1, sizeof *r);
    char err[256];
    if (r == NULL)
        return -1;
    r->dir = io_test_mkdtemp(&r->dirfd);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    if (aftp_worker_new(&r->senders, 0, err, sizeof err) != AFTP_OK ||
        aftp_worker_new(&r->receivers, 1, err, sizeof err) != AFTP_OK) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    *state = r;
    return 0;
}

static void free_pair(pair *p)
{
    if (p->data != NULL)
        aftp_store_fini(&p->dst.store);
    aftp_sender_del(p->snd);
    aftp_receiver_del(p->rcv);
    aftp_udp_close(&p->su);
    aftp_udp_close(&p->ru);
    free(p->data);
}

static int teardown(void **state)
{
    rig *r = *state;
    aftp_worker_del(r->senders);
    aftp_worker_del(r->receivers);
    for (int i = 0; i < r->npairs; i++)
        free_pair(&r->pairs[i]);
    close(r->dirfd);
    io_test_rmtree(r->dir);
    free(r->dir);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return 0;
}

/* Waits until `want` on_end calls have come (a hang guard, not a timing
 * assertion). */
static void wait_ends(rig *r, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += END_GUARD_S;
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    while (r->ends < want && rc == 0)
        rc = pthread_cond_timedwait(&r->cond, &r->lock, &until);
    int ends = r->ends;
    pthread_mutex_unlock(&r->lock);
    if (ends < want)
        fail_msg("only %d of %d sessions ended within %d s", ends, want, END_GUARD_S);
}

/* The pair's transfer completed and the stored file holds its bytes. */
static void assert_delivered(rig *r, const pair *p)
{
    assert_int_equal(p->s_rc, AFTP_OK);
    assert_int_equal(p->r_rc, AFTP_OK);
    assert_int_equal(p->file_end, AFTP_OK);
    uint8_t *back = malloc(p->size);
    assert_non_null(back);
    int fd = openat(r->dirfd, p->name, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, back, p->size, 0), (ssize_t)p->size);
    close(fd);
    assert_memory_equal(back, p->data, p->size);
    free(back);
}

static const pair_opts brisk = {.size = 2 * MIB, .rate_bps = UINT64_C(300000000)};

/* Eight pairs at once: every sender on one worker, every receiver on the
 * other; all complete, every file byte-exact. */
static void test_transfers_complete(void **state)
{
    rig *r = *state;
    for (int i = 0; i < 8; i++)
        add_pair(r, new_pair(r, &brisk));
    wait_ends(r, 16);
    for (int i = 0; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
    assert_int_equal(aftp_worker_sessions(r->senders), 0);
    assert_int_equal(aftp_worker_sessions(r->receivers), 0);
}

/* A sender whose receiver never runs (its socket open, nothing read) ends
 * on its own at its idle timeout, while the pairs beside it complete. */
static void test_silent_peer_ends_alone(void **state)
{
    rig *r = *state;
    pair_opts silent = brisk;
    silent.idle_timeout_ns = 300000000u;
    pair *lone = new_pair(r, &silent);
    add_sender(r, lone);
    for (int i = 0; i < 4; i++)
        add_pair(r, new_pair(r, &brisk));
    wait_ends(r, 1 + 8);
    assert_int_equal(lone->s_end, ENDED);
    assert_int_equal(lone->s_rc, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(lone->r_end, RUNNING); /* never added */
    for (int i = 1; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
}

/* A transfer that runs until the test acts on it: 1 TiB of zeros (no
 * disk, no memory) at 50 Mbit/s. */
static const pair_opts slow = {.size = UINT64_C(1) << 40, .rate_bps = UINT64_C(50000000),
                               .idle_timeout_ns = UINT64_C(20000000000), .faux = 1};

/* Waits until the pair's sender has its file under way (a hang guard). */
static void wait_started(const pair *p)
{
    for (int ms = 0; !atomic_load(&p->started); ms++) {
        if (ms > END_GUARD_S * 1000)
            fail_msg("pair %d never started", p->index);
        usleep(1000);
    }
}

/* A cancel ends that session alone, and its peer is told (it ends with
 * CANCELLED, not at its idle timeout); a second cancel at once ends the
 * session without waiting for the peer, which is told all the same. */
static void test_cancel_ends_only_that_session(void **state)
{
    rig *r = *state;
    pair *once = new_pair(r, &slow);
    pair *twice = new_pair(r, &slow);
    add_pair(r, once);
    add_pair(r, twice);
    for (int i = 0; i < 4; i++)
        add_pair(r, new_pair(r, &brisk));
    wait_started(once);
    wait_started(twice);
    aftp_worker_cancel(r->senders, once->sws);
    aftp_worker_cancel(r->receivers, twice->rws);
    aftp_worker_cancel(r->receivers, twice->rws);
    wait_ends(r, 2 * r->npairs);
    assert_int_equal(once->s_rc, AFTP_ERR_CANCELLED);
    assert_int_equal(once->r_rc, AFTP_ERR_CANCELLED);
    assert_int_equal(once->file_end, AFTP_ERR_CANCELLED);
    assert_int_equal(twice->r_rc, AFTP_ERR_CANCELLED);
    assert_int_equal(twice->s_rc, AFTP_ERR_CANCELLED);
    for (int i = 2; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
}

typedef struct adder {
    rig *r;
    int first, count;
} adder;

/* Another thread hands the worker its sessions, one every millisecond. */
static void *add_from_thread(void *arg)
{
    adder *a = arg;
    for (int i = a->first; i < a->first + a->count; i++) {
        pair *p = &a->r->pairs[i];
        aftp_worker_job rj = {.drive = &p->rd, .on_end = on_receiver_end, .app = p};
        aftp_worker_job sj = {.drive = &p->sd, .on_end = on_sender_end, .app = p};
        if (aftp_worker_add(a->r->receivers, &rj, &p->rws) != AFTP_OK ||
            aftp_worker_add(a->r->senders, &sj, &p->sws) != AFTP_OK)
            return "add failed";
        usleep(1000);
    }
    return NULL;
}

/* Sessions added from another thread while others run all complete. */
static void test_add_from_another_thread(void **state)
{
    rig *r = *state;
    for (int i = 0; i < 4; i++)
        add_pair(r, new_pair(r, &brisk));
    adder a = {.r = r, .first = r->npairs, .count = 8};
    for (int i = 0; i < a.count; i++)
        new_pair(r, &brisk);
    pthread_t t;
    void *failed = NULL;
    assert_int_equal(pthread_create(&t, NULL, add_from_thread, &a), 0);
    assert_int_equal(pthread_join(t, &failed), 0);
    assert_null(failed);
    wait_ends(r, 2 * r->npairs);
    for (int i = 0; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
}

/* Deleting a worker with sessions running: every one ends (its on_end
 * called, once, before the delete returns) and every peer is told. */
static void test_del_ends_every_session(void **state)
{
    rig *r = *state;
    for (int i = 0; i < 6; i++)
        add_pair(r, new_pair(r, &slow));
    for (int i = 0; i < r->npairs; i++)
        wait_started(&r->pairs[i]);
    aftp_worker_del(r->senders);
    r->senders = NULL;
    for (int i = 0; i < r->npairs; i++) {
        assert_int_equal(r->pairs[i].s_end, ENDED);
        assert_int_equal(r->pairs[i].s_rc, AFTP_ERR_CANCELLED);
    }
    wait_ends(r, 2 * r->npairs);
    for (int i = 0; i < r->npairs; i++)
        assert_int_equal(r->pairs[i].r_rc, AFTP_ERR_CANCELLED);
}

/* The fairness figure: N equal sessions, paced faster than one thread can
 * serve them all, share it; what each moved in a fixed time is printed
 * with Jain's index (not asserted: the machine's load decides). */
static void test_fairness_figure(void **state)
{
    rig *r = *state;
    enum { N = 4 };
    pair_opts fast = {.size = UINT64_C(1) << 40, .rate_bps = UINT64_C(4000000000), .faux = 1};
    for (int i = 0; i < N; i++)
        add_pair(r, new_pair(r, &fast));
    sleep(2);
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < N; i++) {
        double mib = (double)atomic_load(&r->pairs[i].received) / (double)MIB;
        printf("fairness: session %d moved %.1f MiB in about 2 s\n", i, mib);
        sum += mib;
        sum_sq += mib * mib;
    }
    printf("fairness: %d sessions on one worker, %.1f MiB in all, Jain's index %.3f\n", N, sum,
           sum_sq > 0 ? sum * sum / (N * sum_sq) : 0.0);
    aftp_worker_del(r->senders);
    r->senders = NULL;
    wait_ends(r, 2 * N);
}

/* Junk datagrams sent from `from` to its connected peer: n of them. */
static void send_junk(const aftp_udp *from, int n)
{
    static uint8_t junk[64];
    memset(junk, 0xA5, sizeof junk);
    for (int i = 0; i < n; i++)
        assert_int_equal(send(from->fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
}

static uint64_t dropped(const pair *p)
{
    aftp_stats st;
    aftp_receiver_get_stats(p->rcv, &st);
    return st.packets_dropped;
}

/* A turn feeds a bounded share of what is queued (about one batch) and
 * asks for the next turn at once while more is there, so one flooded
 * socket cannot hold a worker's round; the next turns feed the rest. */
static void test_turn_input_is_bounded(void **state)
{
    rig *r = *state;
    enum { QUEUED = 3 * AFTP_DRIVE_TURN_INPUT };
    pair *p = new_pair(r, &brisk); /* its receiver alone, driven here */
    aftp_drive_scratch *sc;
    assert_int_equal(aftp_drive_scratch_new(&sc, AFTP_IO_DATAGRAM), AFTP_OK);
    send_junk(&p->su, QUEUED);
    uint64_t now = aftp_drive_now_ns(), wake;
    int closed, turns = 0;
    assert_int_equal(aftp_drive_turn(&p->rd, sc, now, &wake, &closed), AFTP_OK);
    assert_false(closed);
    assert_true(dropped(p) >= AFTP_DRIVE_TURN_INPUT);
    assert_true(dropped(p) < QUEUED);
    assert_true(wake <= now);
    while (wake <= now && turns++ < QUEUED) {
        now = aftp_drive_now_ns();
        assert_int_equal(aftp_drive_turn(&p->rd, sc, now, &wake, &closed), AFTP_OK);
    }
    assert_int_equal(dropped(p), QUEUED);
    assert_true(wake > now); /* all fed: nothing due until a timer */
    aftp_drive_scratch_del(sc);
}

/* A hostile peer floods its session's socket with junk from another
 * thread, as fast as it can send. */
typedef struct flood {
    int fd;
    atomic_int stop;
} flood;

static void *flood_main(void *arg)
{
    flood *f = arg;
    enum { BURST = 64 };
    static uint8_t junk[64];
    struct iovec iov = {junk, sizeof junk};
    struct mmsghdr msgs[BURST];
    memset(junk, 0xA5, sizeof junk);
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BURST; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    while (!atomic_load(&f->stop))
        (void)sendmmsg(f->fd, msgs, BURST, 0);
    return NULL;
}

/* A session whose peer floods it costs the others one bounded turn per
 * round: the transfers beside it, on the same worker, complete. */
static void test_flooded_session_delays_no_other(void **state)
{
    rig *r = *state;
    pair_opts junk = brisk;
    junk.idle_timeout_ns = UINT64_C(20000000000);
    pair *hostile = new_pair(r, &junk); /* its sender engine never runs */
    add_receiver(r, hostile);
    flood f = {.fd = hostile->su.fd};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, flood_main, &f), 0);
    for (int i = 0; i < 4; i++)
        add_pair(r, new_pair(r, &brisk));
    wait_ends(r, 8);
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    aftp_stats st;
    aftp_worker_cancel(r->receivers, hostile->rws);
    aftp_worker_cancel(r->receivers, hostile->rws);
    wait_ends(r, 9);
    aftp_receiver_get_stats(hostile->rcv, &st);
    printf("flood: the hostile session's receiver dropped %llu junk datagrams meanwhile\n",
           (unsigned long long)st.packets_dropped);
    for (int i = 1; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
}

/* 64 receiving sessions on two workers (their senders on a third), as a
 * server's would be: every file arrives byte-exact. */
static void test_64_receivers_on_two_workers(void **state)
{
    rig *r = *state;
    aftp_worker *second;
    char err[256];
    assert_int_equal(aftp_worker_new(&second, 2, err, sizeof err), AFTP_OK);
    pair_opts small = {.size = MIB, .rate_bps = UINT64_C(50000000)};
    uint64_t t0 = aftp_drive_now_ns();
    for (int i = 0; i < MAX_PAIRS; i++) {
        pair *p = new_pair(r, &small);
        add_receiver_to(i % 2 ? second : r->receivers, p);
        add_sender(r, p);
    }
    wait_ends(r, 2 * MAX_PAIRS);
    printf("64 sessions of 1 MiB at 50 Mbit/s each, receivers on 2 workers: %.2f s in all\n",
           (double)(aftp_drive_now_ns() - t0) / 1e9);
    aftp_worker_del(second);
    for (int i = 0; i < r->npairs; i++)
        assert_delivered(r, &r->pairs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transfers_complete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_peer_ends_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_ends_only_that_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add_from_another_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_del_ends_every_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fairness_figure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flooded_session_delays_no_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_turn_input_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_64_receivers_on_two_workers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
