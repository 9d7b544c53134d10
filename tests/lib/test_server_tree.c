/* The server API's tree options, resume-state sweep and per-entry reports
 * (include/aftp/aftp_server.h): a server runs in a thread of this
 * process, unprotected (AFTP_CIPHER_NONE), and trees reach it through the
 * push driver's pipelined mode (io/aftp_push.h) over 127.0.0.1.
 *
 *   options     each setter refuses what is out of range, with errmsg;
 *   mode mask   the permission bits kept are the mask's (setgid only when
 *               the mask has it);
 *   links       recreated with their literal target by default (PLACED
 *               with the target), refused with links off (nothing there,
 *               the rest of the tree arrives);
 *   sweep       at the start of a run, resume state older than the age is
 *               removed and younger state kept, and the log says so;
 *               state that ages past it while the server idles goes at
 *               a later step; an admitted root's old state goes with its
 *               session;
 *   outcomes    a tree's files get receipts SENT, its directories and
 *               links PLACED; again with SYNC every file is SKIPPED and
 *               no receipt comes; a push interrupted half way then sent
 *               again with RESUME gets RESUMED with the bytes it held. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "aftp_journal.h"
#include "aftp_push.h"
#include "io_testutil.h"
#include "server_fixture.h"

#define WINDOW 64u
#define MAX_REPORTS 64
#define BIG_FILE (UINT64_C(8) << 20)
#define DAY_S 86400

typedef struct report {
    char path[256], target[256], root[512];
    int kind, outcome;
    uint64_t size, held_bytes;
} report;

/* What the server's callbacks saw; read once the run has ended. */
typedef struct server_run {
    sfx_server srv;
    report receipts[MAX_REPORTS], entries[MAX_REPORTS];
    int receipt_count, entry_count;
    char root[512]; /* the admission's root, or "" */
} server_run;

static void keep(report *to, int *count, const aftp_receipt *r)
{
    assert_true(*count < MAX_REPORTS);
    report *o = &to[(*count)++];
    snprintf(o->path, sizeof o->path, "%s", r->path);
    snprintf(o->target, sizeof o->target, "%s", r->target != NULL ? r->target : "");
    snprintf(o->root, sizeof o->root, "%s", r->root);
    o->kind = r->kind;
    o->outcome = r->outcome;
    o->size = r->size;
    o->held_bytes = r->held_bytes;
}

static void on_receipt(void *user, const aftp_receipt *r)
{
    server_run *run = user;
    keep(run->receipts, &run->receipt_count, r);
}

static void on_entry(void *user, const aftp_receipt *r)
{
    server_run *run = user;
    keep(run->entries, &run->entry_count, r);
}

/* The n-th sweep the log reported (from 0), or NULL. */
static const char *swept(server_run *run, int n)
{
    return sfx_line_of(&run->srv, AFTP_LOG_PARTIAL_SWEPT, n);
}

static int swept_count(server_run *run)
{
    int n = 0;
    while (swept(run, n) != NULL)
        n++;
    return n;
}

static int admit_into_root(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    server_run *run = user;
    (void)peer;
    return aftp_admission_set_root(decision, run->root);
}

/* A --once server into dir, unprotected, its callbacks into run. */
static void server_new(server_run *run, const char *dir)
{
    memset(run, 0, sizeof *run);
    sfx_init(&run->srv);
    aftp_server *s = run->srv.s;
    assert_int_equal(aftp_server_set_listen(s, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(s, dir), AFTP_OK);
    assert_int_equal(aftp_server_set_cipher(s, AFTP_CIPHER_NONE), AFTP_OK);
    assert_int_equal(aftp_server_set_once(s, 1), AFTP_OK);
    aftp_server_set_receipt_cb(s, on_receipt, run);
    aftp_server_set_entry_cb(s, on_entry, run);
    aftp_server_set_log_cb(s, sfx_log, &run->srv);
}

static void server_start(server_run *run)
{
    sfx_start(&run->srv, 10);
}

/* The run ended (by itself, or stopped); the server freed, what its
 * callbacks saw kept. */
static void server_end(server_run *run)
{
    sfx_join(&run->srv, 30);
    sfx_fini(&run->srv);
}

/* Interrupts the push once `after` payload bytes have gone out (0: never). */
typedef struct push_stop {
    atomic_int stop;
    uint64_t after;
} push_stop;

static void on_push_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    push_stop *p = app;
    (void)now_ns;
    if (p->after != 0 && st->payload_bytes_sent >= p->after)
        atomic_store(&p->stop, 1);
}

/* Pushes SRC src in pipelined mode to the running server; its result. */
static int push(server_run *run, const char *src, unsigned flags, uint64_t rate_bps,
                uint64_t stop_after)
{
    const char *files[] = {src};
    push_stop stop = {.after = stop_after};
    aftp_push_result res;
    sfx_push p;
    sfx_push_init(&p, aftp_server_port(run->srv.s), files, 1, rate_bps);
    p.o.pipeline_window = WINDOW;
    p.o.entry_flags = flags;
    p.o.send_links = 1;
    p.o.idle_timeout_ns = 0; /* the engine's default */
    p.o.hooks = (aftp_io_hooks){.on_tick = on_push_tick, .app = &stop, .interrupt = &stop.stop};
    int rc = sfx_push_run(&p, &res);
    if (rc != AFTP_OK && stop_after == 0)
        print_message("push: %s\n", res.io.message);
    return rc;
}

/* Serves one push of src into dir with the server as `configure` set it. */
static void serve_push(server_run *run, const char *src, unsigned flags)
{
    server_start(run);
    assert_int_equal(push(run, src, flags, UINT64_C(1000000000), 0), AFTP_OK);
    server_end(run);
    assert_int_equal(run->srv.run_rc, AFTP_OK);
}

static void write_file(int dirfd, const char *name, size_t size, mode_t mode)
{
    uint8_t *buf = malloc(size ? size : 1);
    assert_non_null(buf);
    io_test_pattern(buf, size, (uint32_t)size);
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    free(buf);
}

static mode_t mode_of(int dirfd, const char *name)
{
    struct stat sb;
    assert_int_equal(fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW), 0);
    return sb.st_mode;
}

/* A scratch directory for the destination: its path, its fd. */
typedef struct scratch {
    char *path;
    int fd;
} scratch;

static void scratch_new(scratch *d)
{
    d->path = io_test_mkdtemp(&d->fd);
}

static void scratch_del(scratch *d)
{
    close(d->fd);
    io_test_rmtree(d->path);
    free(d->path);
}

/* src/top: {sub/x (0640), sub/sgid (06755), empty/, link -> ../nowhere}. */
static void make_tree(scratch *src, char *top, size_t cap)
{
    scratch_new(src);
    assert_int_equal(mkdirat(src->fd, "top", 0755), 0);
    assert_int_equal(mkdirat(src->fd, "top/sub", 0750), 0);
    assert_int_equal(mkdirat(src->fd, "top/empty", 0700), 0);
    write_file(src->fd, "top/sub/x", 1000, 0640);
    write_file(src->fd, "top/sub/sgid", 3000, 06755);
    assert_int_equal(symlinkat("../nowhere", src->fd, "top/link"), 0);
    snprintf(top, cap, "%s/top", src->path);
}

/* The tree in src, an empty destination dst, a server into it. */
typedef struct tree_case {
    scratch src, dst;
    char top[512];
    server_run run;
} tree_case;

static void tree_case_new(tree_case *t)
{
    make_tree(&t->src, t->top, sizeof t->top);
    scratch_new(&t->dst);
    server_new(&t->run, t->dst.path);
}

static void tree_case_del(tree_case *t)
{
    scratch_del(&t->dst);
    scratch_del(&t->src);
}

static void test_options_validated(void **state)
{
    aftp_server *s = NULL;
    (void)state;
    assert_int_equal(aftp_server_new(&s), AFTP_OK);
    assert_int_equal(aftp_server_set_mode_mask(s, 010000), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(s), "010000"));
    assert_int_equal(aftp_server_set_mode_mask(s, 07777), AFTP_OK);
    assert_string_equal(aftp_server_errmsg(s), "");
    assert_int_equal(aftp_server_set_partial_max_age_s(s, 0), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(s), "age 0 s"));
    assert_int_equal(aftp_server_set_partial_max_age_s(s, AFTP_SERVER_PARTIAL_MAX_AGE_MAX_S + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_server_set_partial_max_age_s(s, 12 * 3600), AFTP_OK);
    assert_int_equal(aftp_server_set_pipeline_window(s, AFTP_SERVER_PIPELINE_WINDOW_MAX + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(s), "65537"));
    assert_int_equal(aftp_server_set_pipeline_window(s, 0), AFTP_OK);
    assert_int_equal(aftp_server_set_pipeline_window(s, AFTP_SERVER_PIPELINE_WINDOW_MAX),
                     AFTP_OK);
    assert_int_equal(aftp_server_set_links(s, 0), AFTP_OK);
    aftp_server_del(s);
}

static int find(const report *r, int count, const char *path)
{
    for (int i = 0; i < count; i++)
        if (strcmp(r[i].path, path) == 0)
            return i;
    return -1;
}

/* Default options: links recreated; mask 02750: setgid kept, setuid and
 * the others' bits not; receipts SENT, directories and the link PLACED;
 * then SYNC: every file SKIPPED, no receipt. */
static void test_tree_outcomes_mask_links(void **state)
{
    char target[64];
    tree_case t;
    (void)state;
    tree_case_new(&t);
    assert_int_equal(aftp_server_set_mode_mask(t.run.srv.s, 02750), AFTP_OK);
    serve_push(&t.run, t.top, 0);

    assert_int_equal(mode_of(t.dst.fd, "top/sub/x") & 07777, 0640);
    assert_int_equal(mode_of(t.dst.fd, "top/sub/sgid") & 07777, 02750);
    assert_int_equal(mode_of(t.dst.fd, "top/sub") & 07777, 0750);
    ssize_t n = readlinkat(t.dst.fd, "top/link", target, sizeof target);
    assert_int_equal(n, 10);
    assert_memory_equal(target, "../nowhere", 10);

    assert_int_equal(t.run.receipt_count, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(t.run.receipts[i].kind, AFTP_ENTRY_FILE);
        assert_int_equal(t.run.receipts[i].outcome, AFTP_OUTCOME_SENT);
        assert_int_equal(t.run.receipts[i].held_bytes, 0);
    }
    assert_int_equal(t.run.entry_count, 4); /* top, top/sub, top/empty, top/link */
    int link = find(t.run.entries, t.run.entry_count, "top/link");
    int sub = find(t.run.entries, t.run.entry_count, "top/sub");
    assert_true(link >= 0 && sub >= 0);
    assert_int_equal(t.run.entries[link].kind, AFTP_ENTRY_SYMLINK);
    assert_int_equal(t.run.entries[link].outcome, AFTP_OUTCOME_PLACED);
    assert_string_equal(t.run.entries[link].target, "../nowhere");
    assert_int_equal(t.run.entries[sub].kind, AFTP_ENTRY_DIR);
    assert_int_equal(t.run.entries[sub].outcome, AFTP_OUTCOME_PLACED);
    assert_string_equal(t.run.entries[sub].root, t.dst.path);

    /* (a link already there is replaced only with overwrite) */
    assert_int_equal(unlinkat(t.src.fd, "top/link", 0), 0);
    server_new(&t.run, t.dst.path);
    serve_push(&t.run, t.top, AFTP_ENTRY_SYNC);
    assert_int_equal(t.run.receipt_count, 0);
    int x = find(t.run.entries, t.run.entry_count, "top/sub/x");
    int sgid = find(t.run.entries, t.run.entry_count, "top/sub/sgid");
    assert_true(x >= 0 && sgid >= 0);
    assert_int_equal(t.run.entries[x].outcome, AFTP_OUTCOME_SKIPPED);
    assert_int_equal(t.run.entries[x].kind, AFTP_ENTRY_FILE);
    assert_int_equal(t.run.entries[x].size, 1000);
    assert_int_equal(t.run.entries[sgid].outcome, AFTP_OUTCOME_SKIPPED);
    tree_case_del(&t);
}

/* Links off: the link is refused, nothing is at its name, the files and
 * directories arrive and the session succeeds for them. */
static void test_links_refused_when_off(void **state)
{
    tree_case t;
    (void)state;
    tree_case_new(&t);
    assert_int_equal(aftp_server_set_links(t.run.srv.s, 0), AFTP_OK);
    server_start(&t.run);
    assert_int_equal(push(&t.run, t.top, 0, UINT64_C(1000000000), 0), AFTP_ERR_PATH_REJECTED);
    server_end(&t.run);
    struct stat sb;
    assert_int_equal(fstatat(t.dst.fd, "top/link", &sb, AT_SYMLINK_NOFOLLOW), -1);
    assert_true(io_test_exists(t.dst.fd, "top/sub/x"));
    assert_int_equal(t.run.receipt_count, 2);
    assert_int_equal(find(t.run.entries, t.run.entry_count, "top/link"), -1);
    assert_int_equal(t.run.entry_count, 3);
    tree_case_del(&t);
}

/* A state (data and journal) in the resume directory, age_s old (made
 * when missing, else only aged). */
static void make_state(int partial, char digit, int64_t age_s)
{
    char name[64];
    for (int w = 0; w < 2; w++) {
        memset(name, digit, AFTP_JOURNAL_NAME_BYTES);
        snprintf(name + AFTP_JOURNAL_NAME_BYTES, sizeof name - AFTP_JOURNAL_NAME_BYTES, "%s",
                 w ? ".jrnl" : ".part");
        int fd = openat(partial, name, O_WRONLY | O_CREAT | O_APPEND, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "state", 5), 5);
        struct timespec t[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
        assert_int_equal(futimens(fd, t), 0);
        close(fd);
    }
}

static int has_state(int dirfd, char digit)
{
    char name[64];
    memset(name, digit, AFTP_JOURNAL_NAME_BYTES);
    snprintf(name + AFTP_JOURNAL_NAME_BYTES, sizeof name - AFTP_JOURNAL_NAME_BYTES, ".part");
    int partial = openat(dirfd, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    if (partial < 0)
        return 0;
    int there = io_test_exists(partial, name);
    close(partial);
    return there;
}

/* Old state 'a' (5 days) and young state 'b' (1 day) beneath dirfd. */
static void make_states(int dirfd)
{
    assert_int_equal(mkdirat(dirfd, AFTP_JOURNAL_DIR, 0700), 0);
    int partial = openat(dirfd, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    assert_true(partial >= 0);
    make_state(partial, 'a', 5 * DAY_S);
    make_state(partial, 'b', 1 * DAY_S);
    close(partial);
}

/* Age 3 days: the run's start removes the 5-day-old state, keeps the
 * 1-day-old one, and says so once; the default age (7 days) keeps both. */
static void test_sweep_at_start(void **state)
{
    tree_case t;
    (void)state;
    tree_case_new(&t);
    make_states(t.dst.fd);
    serve_push(&t.run, t.top, 0);
    assert_true(has_state(t.dst.fd, 'a'));
    assert_true(has_state(t.dst.fd, 'b'));
    assert_int_equal(swept_count(&t.run), 0);

    assert_int_equal(unlinkat(t.src.fd, "top/link", 0), 0);
    server_new(&t.run, t.dst.path);
    assert_int_equal(aftp_server_set_partial_max_age_s(t.run.srv.s, 3 * DAY_S), AFTP_OK);
    serve_push(&t.run, t.top, AFTP_ENTRY_SYNC);
    assert_false(has_state(t.dst.fd, 'a'));
    assert_true(has_state(t.dst.fd, 'b'));
    assert_int_equal(swept_count(&t.run), 1);
    assert_non_null(strstr(swept(&t.run, 0), "removed 1 unfinished file "));
    assert_non_null(strstr(swept(&t.run, 0), t.dst.path));
    tree_case_del(&t);
}

/* Waits until the server has logged `count` sweeps; 0 when it has not
 * after 10 s (a step comes every 100 ms while idle). */
static int sweeps_reach(server_run *run, int count)
{
    return sfx_wait_lines(&run->srv, AFTP_LOG_PARTIAL_SWEPT, "", count, 10) >= count;
}

/* While no session runs, state that ages past the age is removed by the
 * server's periodic steps, and each removal is logged. */
static void test_sweep_while_idle(void **state)
{
    scratch dst;
    server_run run;
    (void)state;
    scratch_new(&dst);
    make_states(dst.fd);
    server_new(&run, dst.path);
    assert_int_equal(aftp_server_set_once(run.srv.s, 0), AFTP_OK);
    assert_int_equal(aftp_server_set_partial_max_age_s(run.srv.s, 3 * DAY_S), AFTP_OK);
    server_start(&run);
    assert_true(sweeps_reach(&run, 1)); /* the start's pass: 'a' */
    int partial = openat(dst.fd, AFTP_JOURNAL_DIR, O_RDONLY | O_DIRECTORY);
    assert_true(partial >= 0);
    make_state(partial, 'b', 4 * DAY_S); /* 'b' ages past the age */
    close(partial);
    int seen = sweeps_reach(&run, 2);
    aftp_server_stop(run.srv.s);
    server_end(&run);
    assert_true(seen);
    assert_int_equal(run.srv.run_rc, AFTP_OK);
    assert_false(has_state(dst.fd, 'a'));
    assert_false(has_state(dst.fd, 'b'));
    assert_non_null(strstr(swept(&run, 1), "removed 1 unfinished file "));
    scratch_del(&dst);
}

/* A root the admission chose: its old state goes with its session, the
 * log names that root. */
static void test_sweep_admitted_root(void **state)
{
    scratch src, dst, root;
    char top[512];
    server_run run;
    (void)state;
    make_tree(&src, top, sizeof top);
    scratch_new(&dst);
    scratch_new(&root);
    make_states(root.fd);
    server_new(&run, dst.path);
    snprintf(run.root, sizeof run.root, "%s", root.path);
    aftp_server_set_admit_cb(run.srv.s, admit_into_root, &run);
    assert_int_equal(aftp_server_set_partial_max_age_s(run.srv.s, 3 * DAY_S), AFTP_OK);
    serve_push(&run, top, 0);
    assert_true(io_test_exists(root.fd, "top/sub/x"));
    assert_false(has_state(root.fd, 'a'));
    assert_true(has_state(root.fd, 'b'));
    assert_int_equal(swept_count(&run), 1);
    assert_non_null(strstr(swept(&run, 0), root.path));
    scratch_del(&root);
    scratch_del(&dst);
    scratch_del(&src);
}

/* A push stopped part way through a big file leaves resume state; sent
 * again with RESUME, the file's receipt is RESUMED with the bytes held. */
static void test_resumed_receipt(void **state)
{
    scratch src, dst;
    char top[512];
    server_run run;
    (void)state;
    scratch_new(&src);
    scratch_new(&dst);
    assert_int_equal(mkdirat(src.fd, "top", 0755), 0);
    write_file(src.fd, "top/big", BIG_FILE, 0644);
    snprintf(top, sizeof top, "%s/top", src.path);

    server_new(&run, dst.path);
    server_start(&run);
    assert_int_equal(push(&run, top, AFTP_ENTRY_RESUME, UINT64_C(40000000), BIG_FILE / 4),
                     AFTP_ERR_CANCELLED);
    server_end(&run);
    assert_int_equal(run.receipt_count, 0);

    server_new(&run, dst.path);
    serve_push(&run, top, AFTP_ENTRY_RESUME);
    assert_int_equal(run.receipt_count, 1);
    assert_int_equal(run.receipts[0].outcome, AFTP_OUTCOME_RESUMED);
    assert_true(run.receipts[0].held_bytes > 0);
    assert_true(run.receipts[0].held_bytes < BIG_FILE);
    assert_int_equal(run.receipts[0].size, BIG_FILE);
    print_message("resumed with %" PRIu64 " of %" PRIu64 " bytes held\n",
                  run.receipts[0].held_bytes, BIG_FILE);
    assert_int_equal(io_test_expect_tree_copies(top, dst.fd), 2);
    scratch_del(&dst);
    scratch_del(&src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_validated),
        cmocka_unit_test(test_tree_outcomes_mask_links),
        cmocka_unit_test(test_links_refused_when_off),
        cmocka_unit_test(test_sweep_at_start),
        cmocka_unit_test(test_sweep_while_idle),
        cmocka_unit_test(test_sweep_admitted_root),
        cmocka_unit_test(test_resumed_receipt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
