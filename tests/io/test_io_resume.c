/*
 * Resume after any interruption, through the real drivers in processes of
 * their own: aftp_push_run (pipelined, entry flags RESUME | SYNC) and
 * aftp_serve_run (pipelined) in forked children, over a lossy path (a UDP
 * relay child that drops a seeded 1-2% each way).
 * - kill -9 of the receiver at 100+ random instants, and separately of the
 *   sender at 100+: after every kill each file under its final name is its
 *   source's copy; after the last resume the whole tree is (content, mtime,
 *   mode); the bytes sent across all attempts stay within the bound the
 *   durability policy states (aftp_treestore.h);
 * - a source changed between interruption and resume (same size, new
 *   mtime; same mtime, new content and inode) arrives as the new version;
 * - damaged journals (flipped, cut short, empty, garbage, another path's)
 *   are discarded and the resume still ends byte-exact;
 * - the durability time bound itself (aftp_treestore_tick), with a given
 *   clock and a kill.
 * Seeds are printed; AFTP_RESUME_SEED=<n> in the test's environment
 * replays one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "aftp/aftp_global.h"
#include "aftp_push.h"
#include "aftp_serve.h"
#include "aftp_treestore.h"
#include "io_testutil.h"

#define WINDOW 256u
#define RATE_BPS UINT64_C(80000000)           /* 10 MB/s: a tree takes about a second */
#define RECV_IDLE_NS UINT64_C(700000000)      /* a killed sender's session lingers this long: well
                                               * beyond a slow (sanitized) sender's pauses */
/* The last resume's receiver, a fresh one: beyond the sender's longest
 * backed-off wait (2 s), so that a receiver held up by its disk on a
 * loaded machine, its sender backing off meanwhile (its PTO grown with the
 * delays), never takes that live sender for gone. The receivers that
 * serve the kills keep the short one: their sessions must end soon. */
#define FINAL_RECV_IDLE_NS UINT64_C(2500000000)
#define SEND_IDLE_NS UINT64_C(20000000000)
#define KILLS_PER_PHASE 100u
#define KILLS_PER_ROUND 10u                   /* then a fresh destination */
#define MAX_KILL_DELAY_MS 300u
#define MAX_TREE_FILES 64u
/* What a lossy path adds: repairs of the dropped 1-2% with their own
 * losses, generously: the allowance of the byte bound beyond the tree. */
#define LOSS_ALLOWANCE 0.10
/* What a killed sender had in flight (socket buffers, the relay, the
 * engine's burst): the receiver cannot have stored it. */
#define SENDER_KILL_ALLOWANCE (UINT64_C(1) << 20)

/* Figures the children leave for the parent (a shared mapping). */
typedef struct shared {
    atomic_uint_fast64_t up_bytes;     /* relay: datagram bytes from the sender, before drops */
    atomic_uint_fast64_t payload_sent; /* sender: its payload counter at its last tick */
    atomic_uint_fast64_t payload_first; /* the same, repairs left out */
    atomic_uint recv_port;             /* receiver: the port it listens on (0: not yet) */
    atomic_int in_session;             /* receiver: between a session's first event and its end */
    atomic_int last_error;             /* receiver: the last session's result */
    char last_failure[512];            /* receiver: the last failed session's message */
    atomic_uint_fast64_t held_bytes;   /* sender: RESUME's bytes already there, summed */
    atomic_uint entries_failed;        /* sender: entries that ended with an error */
    char first_entry_failure[512];     /* sender: the first one's error and message */
} shared;

static shared *sh;
static uint32_t seed;
/* Children alive: a failed assertion leaves the test, and the teardown
 * ends them. */
static pid_t children[4];

typedef struct tree_file {
    char path[64]; /* beneath the tree's parent: "top/..." */
    uint64_t size;
} tree_file;

typedef struct tree {
    char *parent; /* directory holding top/ */
    int parent_fd;
    char src[600]; /* SRC argument: <parent>/top */
    tree_file files[MAX_TREE_FILES];
    unsigned count;
    unsigned dirs; /* top/ included */
    uint64_t bytes;
} tree;

typedef struct rig {
    tree t;
    const char *scratch;
    struct sockaddr_in relay; /* where senders send */
    pid_t relay_pid, recv_pid, send_pid;
    uint32_t rng;
} rig;

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* ---- the tree ---- */

static void write_file(int dirfd, const char *name, uint64_t size, uint32_t fseed, mode_t mode,
                       int64_t mtime_s)
{
    io_test_write_file(dirfd, name, size, fseed, mode, mtime_s * 1000000000 + 5);
}

static void add_file(tree *t, const char *path, uint64_t size, uint32_t fseed)
{
    assert_true(t->count < MAX_TREE_FILES);
    tree_file *f = &t->files[t->count++];
    snprintf(f->path, sizeof f->path, "%s", path);
    f->size = size;
    t->bytes += size;
    write_file(t->parent_fd, path, size, fseed, fseed % 3 ? 0640 : 0755,
               1600000000 + (int64_t)fseed);
}

/* top/ with nested and empty directories and files from 0 bytes to 3 MiB:
 * about 10 MiB in all, one second's worth at RATE_BPS. */
static void make_tree_dir(tree *t)
{
    memset(t, 0, sizeof *t);
    t->parent = io_test_mkdtemp(&t->parent_fd);
    snprintf(t->src, sizeof t->src, "%s/top", t->parent);
}

static void make_tree(tree *t, uint32_t s)
{
    const char *dirs[] = {"top", "top/a", "top/a/b", "top/a/b/c", "top/empty", "top/many",
                          "top/e2", "top/e2/nested_empty"};
    char name[64];
    make_tree_dir(t);
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        assert_int_equal(mkdirat(t->parent_fd, dirs[i], 0755), 0);
    t->dirs = sizeof dirs / sizeof dirs[0];
    add_file(t, "top/zero", 0, 1);
    add_file(t, "top/a/b/c/one", 1, 2);
    add_file(t, "top/a/big1", (UINT64_C(3) << 20) - 12345, 3);
    add_file(t, "top/a/b/big2", UINT64_C(2) << 20, 4);
    add_file(t, "top/mid", (UINT64_C(1) << 20) + 7, 5);
    for (unsigned i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "top/many/f%02u", i);
        add_file(t, name, rnd(&s) % (96u << 10), 100 + i);
    }
    for (unsigned i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "top/a/b/m%u", i);
        add_file(t, name, (256u << 10) + rnd(&s) % (512u << 10), 200 + i);
    }
}

/* top/x then top/y, 4 MiB each: an interruption early in the transfer
 * leaves x partial. */
static void make_pair_tree(tree *t)
{
    make_tree_dir(t);
    assert_int_equal(mkdirat(t->parent_fd, "top", 0755), 0);
    t->dirs = 1;
    add_file(t, "top/x", UINT64_C(4) << 20, 11);
    add_file(t, "top/y", UINT64_C(4) << 20, 12);
}

static void free_tree(tree *t)
{
    io_test_rmtree(t->parent);
    free(t->parent);
    close(t->parent_fd);
}

/* ---- checks ---- */

static int same_content(int a, int b)
{
    static uint8_t x[1 << 16], y[1 << 16];
    for (;;) {
        ssize_t n = read(a, x, sizeof x), m = read(b, y, sizeof y);
        if (n != m || n < 0)
            return 0;
        if (n == 0)
            return 1;
        if (memcmp(x, y, (size_t)n) != 0)
            return 0;
    }
}

/* Every file present under its final name is its source's copy; the
 * number of them. */
static unsigned expect_finals_exact(const tree *t, int dst)
{
    unsigned present = 0;
    for (unsigned i = 0; i < t->count; i++) {
        int d = openat(dst, t->files[i].path, O_RDONLY | O_NOFOLLOW);
        if (d < 0) {
            assert_int_equal(errno, ENOENT);
            continue;
        }
        int s = openat(t->parent_fd, t->files[i].path, O_RDONLY);
        assert_true(s >= 0);
        if (!same_content(s, d))
            fail_msg("%s under its final name differs from its source", t->files[i].path);
        present++;
        close(s);
        close(d);
    }
    return present;
}

/* ---- processes ---- */

static void *map_shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static int udp_socket(uint16_t port, struct sockaddr_in *bound)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = io_test_loopback(port);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    if (bound != NULL)
        *bound = a;
    return fd;
}

/* The lossy path: datagrams from senders to A go on to the receiver's
 * port (sh->recv_port, the latest receiver's) from an upstream socket of
 * that sender's own (a restarted sender is a new client), the answers
 * back; each dropped with probability drop_per_mille. Runs until killed. */
static void relay_loop(int a, uint32_t s, unsigned drop_per_mille)
{
    static uint8_t buf[65536];
    struct sockaddr_in client = {0}, from, to;
    int up = -1;
    for (;;) {
        struct pollfd p[2] = {{a, POLLIN, 0}, {up, POLLIN, 0}};
        if (poll(p, up >= 0 ? 2 : 1, -1) < 0)
            continue;
        socklen_t flen = sizeof from;
        ssize_t n = p[0].revents ? recvfrom(a, buf, sizeof buf, MSG_DONTWAIT,
                                            (struct sockaddr *)&from, &flen)
                                 : -1;
        if (n >= 0) {
            if (memcmp(&from, &client, sizeof from) != 0) {
                if (up >= 0)
                    close(up);
                up = udp_socket(0, NULL);
                client = from;
            }
            atomic_fetch_add(&sh->up_bytes, (uint64_t)n);
            to = io_test_loopback((uint16_t)atomic_load(&sh->recv_port));
            if (rnd(&s) % 1000 >= drop_per_mille)
                (void)sendto(up, buf, (size_t)n, 0, (struct sockaddr *)&to, sizeof to);
        }
        n = up >= 0 && p[1].revents ? recv(up, buf, sizeof buf, MSG_DONTWAIT) : -1;
        if (n >= 0 && rnd(&s) % 1000 >= drop_per_mille)
            (void)sendto(a, buf, (size_t)n, 0, (struct sockaddr *)&client, sizeof client);
    }
}

static void forget_child(pid_t pid)
{
    for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
        children[i] = children[i] == pid ? 0 : children[i];
}

/* fork, the child noted (and killed with this process) */
static pid_t fork_child(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        return 0;
    }
    for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
        if (children[i] == 0) {
            children[i] = pid;
            return pid;
        }
    fail_msg("more than %zu children", sizeof children / sizeof children[0]);
    return -1;
}

static void kill_and_reap(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    forget_child(pid);
    assert_int_equal(waitpid(pid, &status, 0), pid);
}

static int teardown(void **state)
{
    for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
        if (children[i] != 0)
            kill_and_reap(children[i]);
    return io_test_scratch_teardown(state);
}

static void on_session_end(void *app, const aftp_io_result *res, const struct sockaddr *peer)
{
    (void)app;
    (void)peer;
    snprintf(sh->last_failure, sizeof sh->last_failure, "%s", res->message);
    atomic_store(&sh->last_error, res->error);
    atomic_store(&sh->in_session, 0);
}

static void on_session_event(void *app, const aftp_event *ev, const aftp_stats *st)
{
    (void)app;
    (void)ev;
    (void)st;
    atomic_store(&sh->in_session, 1);
}

static void on_listening(void *app, const struct sockaddr *local)
{
    (void)app;
    atomic_store(&sh->recv_port, ntohs(((const struct sockaddr_in *)local)->sin_port));
}

/* SIGTERM stops the receiver child in order: its session (if any) is
 * cancelled and ends as any session does, its storage closed and synced. */
static atomic_int serve_stop;

static void on_sigterm(int sig)
{
    (void)sig;
    atomic_fetch_add(&serve_stop, 1);
}

/* Listens on a port of the kernel's choice: a fixed one could be taken by
 * another test between restarts. */
static void serve_child(int dirfd, uint64_t idle_ns)
{
    struct sockaddr_in at = io_test_loopback(0);
    struct sigaction sa = {.sa_handler = on_sigterm};
    sigaction(SIGTERM, &sa, NULL);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&at, .listen_len = sizeof at,
                         .dirfd = dirfd, .pipeline_window = WINDOW,
                         .idle_timeout_ns = idle_ns,
                         .security = {.cipher = AFTP_CIPHER_NONE},
                         .hooks = {.interrupt = &serve_stop},
                         .on_session_end = on_session_end, .on_listening = on_listening,
                         .on_session_event = on_session_event};
    aftp_io_result res;
    _exit(aftp_serve_run(&o, &res) == AFTP_OK ? 0 : 3);
}

static void on_push_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    (void)app;
    (void)now_ns;
    atomic_store(&sh->payload_sent, st->payload_bytes_sent);
    atomic_store(&sh->payload_first, st->payload_bytes_sent - st->payload_bytes_retransmitted);
}

static void on_push_event(void *app, const aftp_event *ev)
{
    (void)app;
    if (ev->type != AFTP_EV_ENTRY_END)
        return;
    atomic_fetch_add(&sh->held_bytes, ev->held_bytes);
    if (ev->error != AFTP_OK && atomic_fetch_add(&sh->entries_failed, 1) == 0)
        snprintf(sh->first_entry_failure, sizeof sh->first_entry_failure, "%s: %s",
                 aftp_strerror(ev->error), ev->message != NULL ? ev->message : "");
}

static void push_child(const rig *r)
{
    const char *files[] = {r->t.src};
    aftp_push_opts o = {.files = files, .file_count = 1, .pipeline_window = WINDOW,
                        .entry_flags = AFTP_ENTRY_RESUME | AFTP_ENTRY_SYNC,
                        .peer = (const struct sockaddr *)&r->relay, .peer_len = sizeof r->relay,
                        .rate_bps = RATE_BPS, .policy = AFTP_CC_FIXED,
                        .idle_timeout_ns = SEND_IDLE_NS,
                        .security = {.cipher = AFTP_CIPHER_NONE},
                        .hooks = {.on_tick = on_push_tick, .on_event = on_push_event}};
    aftp_push_result res;
    int rc = aftp_push_run(&o, &res);
    on_push_tick(NULL, &res.io.stats, 0);
    if (rc != AFTP_OK)
        fprintf(stderr, "push failed: %s\n", res.io.message);
    _exit(rc == AFTP_OK ? 0 : 3);
}

/* The exit status of a child that ended by itself, or -1 when it is
 * still running after ms milliseconds. */
static int wait_ms(pid_t pid, unsigned ms)
{
    for (unsigned t = 0;; t++) {
        int status;
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            forget_child(pid);
        if (got == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        if (t >= ms)
            return -1;
        usleep(1000);
    }
}

/* Once it listens: senders started then reach it. */
static pid_t start_receiver_idle(int dst, uint64_t idle_ns)
{
    atomic_store(&sh->recv_port, 0);
    pid_t pid = fork_child();
    if (pid == 0)
        serve_child(dst, idle_ns);
    while (atomic_load(&sh->recv_port) == 0)
        assert_int_equal(wait_ms(pid, 1), -1);
    return pid;
}

static pid_t start_receiver(int dst)
{
    return start_receiver_idle(dst, RECV_IDLE_NS);
}

/* Stopped in order (SIGTERM): what its last session stored stays. */
static void stop_receiver(pid_t pid)
{
    kill(pid, SIGTERM);
    assert_true(wait_ms(pid, 60000) >= 0);
}

static pid_t start_sender(rig *r)
{
    atomic_store(&sh->payload_sent, 0);
    atomic_store(&sh->payload_first, 0);
    atomic_store(&sh->held_bytes, 0);
    atomic_store(&sh->entries_failed, 0);
    pid_t pid = fork_child();
    if (pid == 0)
        push_child(r);
    return pid;
}


static void rig_start(rig *r, void **state, unsigned drop_per_mille, int pair)
{
    memset(r, 0, sizeof *r);
    r->rng = seed;
    r->scratch = io_test_scratch_path(state);
    if (pair)
        make_pair_tree(&r->t);
    else
        make_tree(&r->t, seed);
    int a = udp_socket(0, &r->relay);
    assert_true(a >= 0);
    memset(sh, 0, sizeof *sh);
    r->relay_pid = fork_child();
    if (r->relay_pid == 0)
        relay_loop(a, seed * 2654435761u + 1, drop_per_mille);
    close(a);
}

static void rig_stop(rig *r)
{
    kill_and_reap(r->relay_pid);
    free_tree(&r->t);
}

static int fresh_dst(rig *r, unsigned n)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/dst%u", r->scratch, n);
    assert_int_equal(mkdir(dir, 0755), 0);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    return fd;
}

/* The last resume: the sender runs to its end, the receiver's session too
 * (directories get their metadata then); the whole tree is there. */
static void finish_round(rig *r, int dst)
{
    r->send_pid = start_sender(r);
    int rc = wait_ms(r->send_pid, 60000);
    if (rc == -1)
        kill_and_reap(r->send_pid);
    assert_int_equal(rc, 0);
    /* Sessions are served one at a time: the sender's ran to its end,
     * so the receiver's is the last, and ends next. */
    for (unsigned t = 0; atomic_load(&sh->in_session) && t < 60000; t++)
        usleep(1000);
    if (atomic_load(&sh->last_error) != AFTP_OK)
        fail_msg("the last session failed: %s", sh->last_failure);
    kill_and_reap(r->recv_pid);
    assert_int_equal(io_test_expect_tree_copies(r->t.src, dst), r->t.dirs + r->t.count);
}

enum victim { RECEIVER, SENDER };

/* Attempts killed at random instants until `kills` kills, a fresh
 * destination every KILLS_PER_ROUND; each round ends with a full resume.
 * The bytes sent: *up the relay's count of datagram bytes from senders
 * (at least their payload), *payload the senders' payload counters (at
 * their last tick when killed). Returns the rounds. */
static unsigned kill_rounds(rig *r, enum victim v, unsigned kills, uint64_t *up,
                            uint64_t *payload)
{
    unsigned done = 0, rounds = 0;
    *payload = 0;
    atomic_store(&sh->up_bytes, 0);
    while (done < kills) {
        int dst = fresh_dst(r, v * 1000 + rounds++);
        if (v == SENDER)
            r->recv_pid = start_receiver(dst);
        for (unsigned k = 0; k < KILLS_PER_ROUND && done < kills; k++) {
            if (v == RECEIVER)
                r->recv_pid = start_receiver(dst);
            r->send_pid = start_sender(r);
            int rc = wait_ms(r->send_pid, 1 + rnd(&r->rng) % MAX_KILL_DELAY_MS);
            if (rc == -1) {
                kill_and_reap(v == RECEIVER ? r->recv_pid : r->send_pid);
                done++;
            }
            *payload += atomic_load(&sh->payload_sent);
            expect_finals_exact(&r->t, dst);
            if (v == RECEIVER && rc == -1)
                kill_and_reap(r->send_pid); /* its peer is gone: no need to wait its idle time */
            else if (v == RECEIVER)
                kill_and_reap(r->recv_pid);
            if (rc == 0)
                break; /* it completed before its kill came */
        }
        if (v == SENDER)
            stop_receiver(r->recv_pid);
        r->recv_pid = start_receiver_idle(dst, FINAL_RECV_IDLE_NS);
        finish_round(r, dst);
        *payload += atomic_load(&sh->payload_sent);
        close(dst);
    }
    *up = atomic_load(&sh->up_bytes);
    return rounds;
}

static void report(const char *what, const rig *r, unsigned rounds, uint64_t up, uint64_t payload,
                   uint64_t allowed)
{
    uint64_t total = r->t.bytes * rounds;
    print_message("%s: %u kills in %u rounds, tree %" PRIu64 " bytes x %u = %" PRIu64
                  "; sent: %" PRIu64 " datagram bytes from senders (%.3f x), payload counters %"
                  PRIu64 " (%.3f x); bound %" PRIu64 " (%.3f x)\n",
                  what, KILLS_PER_PHASE, rounds, r->t.bytes, rounds, total, up,
                  (double)up / (double)total, payload, (double)payload / (double)total, allowed,
                  (double)allowed / (double)total);
}

/* Receiver killed: it re-receives at most what arrived since its last
 * sync, at most AFTP_TREESTORE_SYNC_NS plus a tick's worth at the rate. */
static void test_receiver_killed_100_times(void **state)
{
    rig r;
    uint64_t up, payload;
    rig_start(&r, state, 10 + seed % 11, 0);
    unsigned rounds = kill_rounds(&r, RECEIVER, KILLS_PER_PHASE, &up, &payload);
    uint64_t per_kill = (RATE_BPS / 8) * (AFTP_TREESTORE_SYNC_NS + 250000000) / 1000000000;
    uint64_t allowed = (uint64_t)((double)(r.t.bytes * rounds) * (1 + LOSS_ALLOWANCE)) +
                       KILLS_PER_PHASE * per_kill;
    report("receiver killed", &r, rounds, up, payload, allowed);
    assert_true(up <= allowed);
    rig_stop(&r);
}

/* Sender killed: the receiver keeps all it stored (its session ends at
 * the idle timeout and syncs); only what was in flight is sent again. */
static void test_sender_killed_100_times(void **state)
{
    rig r;
    uint64_t up, payload;
    rig_start(&r, state, 10 + seed % 11, 0);
    unsigned rounds = kill_rounds(&r, SENDER, KILLS_PER_PHASE, &up, &payload);
    uint64_t allowed = (uint64_t)((double)(r.t.bytes * rounds) * (1 + LOSS_ALLOWANCE)) +
                       KILLS_PER_PHASE * SENDER_KILL_ALLOWANCE;
    report("sender killed", &r, rounds, up, payload, allowed);
    assert_true(up <= allowed);
    rig_stop(&r);
}

/* ---- one interruption, then a change, then the resume ---- */

static void wait_session_end(void)
{
    for (unsigned t = 0; atomic_load(&sh->in_session) && t < 60000; t++)
        usleep(1000);
    assert_false(atomic_load(&sh->in_session));
}

/* The sender killed once 1 MiB has gone out (x partly there), the
 * receiver's session ended at its idle timeout: x's state is on disk. */
static void interrupt(rig *r, int dst)
{
    r->recv_pid = start_receiver(dst);
    r->send_pid = start_sender(r);
    for (unsigned t = 0; atomic_load(&sh->payload_sent) < (UINT64_C(1) << 20) && t < 60000; t++)
        usleep(1000);
    kill_and_reap(r->send_pid);
    wait_session_end();
    kill_and_reap(r->recv_pid);
    assert_false(io_test_exists(dst, "top/x"));
}

/* The resume: the whole tree arrives; the payload it sent, repairs left
 * out. */
static uint64_t resume(rig *r, int dst)
{
    r->recv_pid = start_receiver(dst);
    finish_round(r, dst);
    return atomic_load(&sh->payload_first);
}

/* The one journal beneath dst (x's): its name into name. */
static void journal_name(int dst, char *name, size_t cap)
{
    int pd = openat(dst, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    assert_true(pd >= 0);
    DIR *d = fdopendir(pd);
    const struct dirent *de;
    unsigned found = 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".jrnl") == 0) {
            snprintf(name, cap, "%s/%s", AFTP_JOURNAL_DIR, de->d_name);
            found++;
        }
    }
    closedir(d);
    assert_int_equal(found, 1);
}

enum change {
    UNCHANGED,
    NEW_MTIME,        /* same size, new content and mtime */
    NEW_INODE,        /* same size and mtime, new content, a new inode (and ctime) */
    JOURNAL_FLIPPED,  /* one byte of the journal flipped, at several places */
    JOURNAL_CUT,      /* cut to half its length */
    JOURNAL_EMPTY,
    JOURNAL_GARBAGE,  /* as long as it was, random bytes */
    JOURNAL_MOVED     /* x's journal under y's name, x without one */
};

/* Cuts name beneath dst to `len` / 2 bytes (0 stays 0). */
static int truncateat_half(int dst, const char *name, off_t len)
{
    int fd = openat(dst, name, O_WRONLY);
    int rc = fd >= 0 ? ftruncate(fd, len / 2) : -1;
    if (fd >= 0)
        close(fd);
    return rc;
}

static void flip_byte(int dst, const char *name, off_t at)
{
    int fd = openat(dst, name, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* The state name of "top/y", as aftp_journal names it. */
static void state_name_of_y(char *name, size_t cap)
{
    XXH128_hash_t h = XXH3_128bits("top/y", 5);
    snprintf(name, cap, "%s/%016" PRIx64 "%016" PRIx64 ".jrnl", AFTP_JOURNAL_DIR,
             (uint64_t)h.high64, (uint64_t)h.low64);
}

static void apply_change(rig *r, int dst, enum change c, unsigned variant)
{
    char jrnl[128], other[128];
    struct stat sb;
    journal_name(dst, jrnl, sizeof jrnl);
    assert_int_equal(fstatat(dst, jrnl, &sb, 0), 0);
    int fd;
    switch (c) {
    case UNCHANGED: break;
    case NEW_MTIME: write_file(r->t.parent_fd, "top/x", UINT64_C(4) << 20, 21, 0640, 1700000000);
        break;
    case NEW_INODE:
        assert_int_equal(fstatat(r->t.parent_fd, "top/x", &sb, 0), 0);
        write_file(r->t.parent_fd, "top/x.new", UINT64_C(4) << 20, 22, sb.st_mode & 07777,
                   sb.st_mtim.tv_sec);
        assert_int_equal(renameat(r->t.parent_fd, "top/x.new", r->t.parent_fd, "top/x"), 0);
        break;
    case JOURNAL_FLIPPED: /* magic, size, block count, a range, the checksum */
        flip_byte(dst, jrnl, (off_t[]){0, 17, 50, sb.st_size - 12, sb.st_size - 1}[variant]);
        break;
    case JOURNAL_CUT: assert_int_equal(truncateat_half(dst, jrnl, sb.st_size), 0); break;
    case JOURNAL_EMPTY: assert_int_equal(truncateat_half(dst, jrnl, 0), 0); break;
    case JOURNAL_GARBAGE: {
        uint8_t junk[4096];
        assert_true((size_t)sb.st_size <= sizeof junk);
        io_test_pattern(junk, (size_t)sb.st_size, seed);
        fd = openat(dst, jrnl, O_WRONLY);
        assert_int_equal(pwrite(fd, junk, (size_t)sb.st_size, 0), sb.st_size);
        close(fd);
        break;
    }
    case JOURNAL_MOVED:
        state_name_of_y(other, sizeof other);
        assert_int_equal(renameat(dst, jrnl, dst, other), 0);
        break;
    }
}

/* An interruption, the change, the resume: the tree ends as its sources
 * are now; x was sent in full after a change, only its rest otherwise. */
static void interrupt_change_resume(void **state, enum change c, unsigned variant)
{
    static unsigned runs;
    rig r;
    rig_start(&r, state, 10, 1);
    int dst = fresh_dst(&r, runs++);
    interrupt(&r, dst);
    apply_change(&r, dst, c, variant);
    uint64_t sent = resume(&r, dst);
    print_message("change %d.%u: the resume sent %" PRIu64 " payload bytes (repairs left out) "
                  "for a tree of %" PRIu64 "\n", (int)c, variant, sent, r.t.bytes);
    if (c == UNCHANGED)
        assert_true(sent < r.t.bytes); /* x resumed: the other cases had state to drop */
    else
        assert_int_equal(sent, r.t.bytes);
    close(dst);
    rig_stop(&r);
}

static void test_unchanged_source_resumes(void **state)
{
    interrupt_change_resume(state, UNCHANGED, 0);
}

static void test_source_new_mtime_sent_in_full(void **state)
{
    interrupt_change_resume(state, NEW_MTIME, 0);
}

static void test_source_new_inode_same_mtime_sent_in_full(void **state)
{
    interrupt_change_resume(state, NEW_INODE, 0);
}

static void test_journal_flipped_discarded(void **state)
{
    for (unsigned v = 0; v < 5; v++)
        interrupt_change_resume(state, JOURNAL_FLIPPED, v);
}

static void test_journal_cut_empty_garbage_discarded(void **state)
{
    interrupt_change_resume(state, JOURNAL_CUT, 0);
    interrupt_change_resume(state, JOURNAL_EMPTY, 0);
    interrupt_change_resume(state, JOURNAL_GARBAGE, 0);
}

static void test_journal_of_another_path_discarded(void **state)
{
    interrupt_change_resume(state, JOURNAL_MOVED, 0);
}

/* ---- a full disk mid-tree ---- */

#define DISK_FILES 6u
#define DISK_FILE_BYTES (UINT64_C(3) << 19) /* 1.5 MiB: four fit on the small disk */

static void make_disk_tree(tree *t)
{
    char name[32];
    make_tree_dir(t);
    assert_int_equal(mkdirat(t->parent_fd, "top", 0755), 0);
    t->dirs = 1;
    for (unsigned i = 0; i < DISK_FILES; i++) {
        snprintf(name, sizeof name, "top/f%u", i);
        add_file(t, name, DISK_FILE_BYTES, 30 + i);
    }
}

static uint64_t committed_bytes(const tree *t, int dst)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < t->count; i++)
        sum += io_test_exists(dst, t->files[i].path) ? t->files[i].size : 0;
    return sum;
}

/* The receiver's root on a 6 MiB tmpfs, a tree of 9 MiB: the files that
 * do not fit fail NO_SPACE, named, with the figures; the committed ones
 * are exact; once the disk is larger a resume completes the tree sending
 * only what was missing (neither committed nor held). Needs root (a
 * private mount namespace); skipped otherwise. */
static void test_disk_full_mid_tree_then_freed(void **state)
{
    char dir[700];
    rig r;
    snprintf(dir, sizeof dir, "%s/small", io_test_scratch_path(state));
    assert_int_equal(mkdir(dir, 0755), 0);
    if (!io_test_mount_private_tmpfs(dir, "6m"))
        skip();
    rig_start(&r, state, 10, 0);
    free_tree(&r.t);
    make_disk_tree(&r.t);
    int dst = open(dir, O_RDONLY | O_DIRECTORY);
    r.recv_pid = start_receiver(dst);
    r.send_pid = start_sender(&r);
    int rc = wait_ms(r.send_pid, 60000);
    wait_session_end();
    kill_and_reap(r.recv_pid);
    unsigned failed = atomic_load(&sh->entries_failed);
    print_message("full disk: sender exit %d, %u entries failed, the first: %s; receiver: %s\n",
                  rc, failed, sh->first_entry_failure, sh->last_failure);
    assert_int_equal(rc, 3);
    assert_true(failed >= 1);
    assert_non_null(strstr(sh->last_failure, "not enough space"));
    assert_non_null(strstr(sh->last_failure, "top/f"));
    assert_non_null(strstr(sh->last_failure, "bytes needed"));
    assert_non_null(strstr(sh->last_failure, "free on the receiver's disk"));
    unsigned present = expect_finals_exact(&r.t, dst);
    assert_true(present >= 1 && present < DISK_FILES);
    uint64_t committed = committed_bytes(&r.t, dst);

    assert_int_equal(mount(NULL, dir, NULL, MS_REMOUNT, "size=64m"), 0);
    uint64_t sent = resume(&r, dst);
    uint64_t held = atomic_load(&sh->held_bytes);
    print_message("after freeing: %" PRIu64 " bytes committed before, %" PRIu64 " held in partial "
                  "files, %" PRIu64 " sent (repairs left out), tree %" PRIu64 "\n",
                  committed, held, sent, r.t.bytes);
    assert_int_equal(committed + held + sent, r.t.bytes);
    close(dst);
    assert_int_equal(umount2(dir, MNT_DETACH), 0);
    rig_stop(&r);
}

#define RESUME_TEST(test) cmocka_unit_test_setup_teardown(test, io_test_scratch_setup, teardown)

int main(void)
{
    const char *env = getenv("AFTP_RESUME_SEED");
    seed = env != NULL ? (uint32_t)strtoul(env, NULL, 10) : (uint32_t)time(NULL);
    seed = seed ? seed : 1;
    printf("test_io_resume: seed %" PRIu32 " (AFTP_RESUME_SEED=%" PRIu32 " replays it)\n", seed,
           seed);
    fflush(stdout);
    if (aftp_global_init(AFTP_INIT_GUARD_SOURCE) != AFTP_OK)
        return 1;
    sh = map_shared(sizeof *sh);
    if (getenv("AFTP_RESUME_ONLY") != NULL) /* a pattern of test names, while debugging */
        cmocka_set_test_filter(getenv("AFTP_RESUME_ONLY"));
    const struct CMUnitTest tests[] = {
        RESUME_TEST(test_receiver_killed_100_times),
        RESUME_TEST(test_sender_killed_100_times),
        RESUME_TEST(test_unchanged_source_resumes),
        RESUME_TEST(test_source_new_mtime_sent_in_full),
        RESUME_TEST(test_source_new_inode_same_mtime_sent_in_full),
        RESUME_TEST(test_journal_flipped_discarded),
        RESUME_TEST(test_journal_cut_empty_garbage_discarded),
        RESUME_TEST(test_journal_of_another_path_discarded),
        /* last: it leaves this process in a mount namespace of its own */
        RESUME_TEST(test_disk_full_mid_tree_then_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
