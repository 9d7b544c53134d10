/* Per-key policy from the authorized keys' options (spec Appendix B.4)
 * through the server API (include/aftp/aftp_server.h): a server runs in a
 * thread of this process; clients push to it over 127.0.0.1.
 *
 *   roots       key A is confined to root A (relative: beneath the
 *               server's dir), key B to root B (absolute); each one's file
 *               lands beneath its own root only, and A's attempt to write
 *               "../b/x" is refused (PATH_REJECTED) with nothing written;
 *   from=       a loopback client against from="198.18.0.0/15" is refused
 *               as not authorized, the log says which from= and where the
 *               client came from; from="127.0.0.0/8" admits;
 *   rate=       the cap reaches the client (its sender reports it) and the
 *               receipt;
 *   read-only   a push is refused, the client is told this key may only
 *               pull (AFTP_ERR_PERMISSION), the log says which line;
 *   missing     a root= that does not exist refuses the client, the log
 *               names the directory and the line;
 *   callback    sees the pre-filled root, cap and access, and may change
 *               them (a read-only key allowed to push, a cap lifted);
 *   once        a read-only key's refused push is not the session a --once
 *               run waits for: the next client's push ends it;
 *   pull        the read-only key gets a tree and a file byte-exact with
 *               their metadata (aftp_client_get); hostile paths (.., absolute,
 *               a link out of the root, a FIFO, a device when root) are
 *               refused one by one with their errors while the rest comes;
 *               the write-only key is refused (AFTP_ERR_PERMISSION, the log
 *               names the line); a DEST that is a file is refused before
 *               any datagram. */
#include <fcntl.h>
#include <inttypes.h>
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
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_drive.h"
#include "aftp_push.h"
#include "io_testutil.h"
#include "server_fixture.h"

enum { KEY_A, KEY_B, KEY_RO, KEY_FAR, KEY_NEAR, KEY_MISSING, KEYS };
enum { FILE_LEN = 100000 + 7 };
#define RATE_A UINT64_C(8000000) /* rate=8M */

typedef struct fixture {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    char dir[512], root_a[600], root_b[600], authorized[600];
    sfx_key server, key[KEYS];
    uint64_t receipt_cap;   /* the latest receipt's rate_cap_bps */
    char receipt_root[600]; /* ... and its root */
    /* what the admission callback saw of key A's and the read-only key's
     * pre-filled decision */
    char seen_root[600];
    uint64_t seen_cap;
    unsigned seen_access[KEYS];
} fixture;

/* The authorized keys, one line per key with its options. */
static void write_authorized(fixture *f)
{
    char root_b[640];
    snprintf(root_b, sizeof root_b, "root=\"%s\"", f->root_b); /* absolute */
    const char *const options[KEYS] = {
        "root=\"a\",rate=8M,write-only", root_b, "read-only",
        "from=\"198.18.0.0/15,2001:db8::/32\"", "from=\"127.0.0.0/8\",root=\"a\"",
        "root=\"missing\""};
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    for (int i = 0; i < KEYS; i++)
        sfx_authorize(out, options[i], f->key[i].public_key, NULL);
    fclose(out);
}

static int setup(void **state)
{
    fixture *f = sfx_setup(sizeof *f);
    sfx_mkdir(f->dir, sizeof f->dir, f->srv.top, "incoming");
    sfx_mkdir(f->root_a, sizeof f->root_a, f->dir, "a");
    sfx_mkdir(f->root_b, sizeof f->root_b, f->dir, "b");
    sfx_key_new(&f->server);
    for (int i = 0; i < KEYS; i++)
        sfx_key_new(&f->key[i]);
    write_authorized(f);
    *state = f;
    return 0;
}

/* ---- the server ---- */

static void on_receipt(void *user, const aftp_receipt *r)
{
    fixture *f = user;
    f->receipt_cap = r->rate_cap_bps;
    snprintf(f->receipt_root, sizeof f->receipt_root, "%s", r->root);
}

static unsigned start_server(fixture *f, aftp_admit_cb admit)
{
    aftp_server *s = f->srv.s;
    sfx_configure(&f->srv, f->dir, f->server.secret, f->authorized, 5000);
    assert_int_equal(aftp_server_set_receipt_cb(s, on_receipt, f), AFTP_OK);
    assert_int_equal(aftp_server_set_admit_cb(s, admit, f), AFTP_OK);
    return sfx_start(&f->srv, 10);
}

/* A log line of any kind holds text. */
static int log_has(fixture *f, const char *text)
{
    return sfx_lines_with(&f->srv, -1, text) > 0;
}

/* ---- clients ---- */

static void make_file(const fixture *f, const char *name, uint32_t seed, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", f->srv.top, name);
    sfx_make_file(path, FILE_LEN, seed);
}

/* Pushes file as key `k` at rate_bps; what the sender reported into *res. */
static int push_at(const fixture *f, unsigned port, int k, const char *file, uint64_t rate_bps,
                   aftp_push_result *res)
{
    sfx_push p;
    sfx_push_init(&p, port, &file, 1, rate_bps);
    sfx_push_keys(&p, f->key[k].secret, f->server.public_key);
    return sfx_push_run(&p, res);
}

static int push(const fixture *f, unsigned port, int k, const char *file, aftp_push_result *res)
{
    return push_at(f, port, k, file, UINT64_C(400000000), res);
}

static int exists(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* A hostile client of key A: the real sender engine offering `path` as
 * it is (a modified client would), over UDP to the server. Its file's
 * end error. */
static const uint8_t hostile_payload[] = "written where it must not be";

static int hostile_view(void *user, uint32_t file_id, uint64_t off, size_t len,
                        const uint8_t **out)
{
    (void)user, (void)file_id;
    if (off + len > sizeof hostile_payload)
        return AFTP_ERR_IO;
    *out = hostile_payload + off;
    return AFTP_OK;
}

static int hostile_close(void *user, uint32_t file_id, int commit)
{
    (void)user, (void)file_id, (void)commit;
    return AFTP_OK;
}

static void hostile_event(void *user, const aftp_event *ev)
{
    if (ev->type == AFTP_EV_FILE_END)
        *(int *)user = ev->error;
}

static int push_hostile(const fixture *f, unsigned port, int k, const char *path)
{
    static const aftp_storage_ops ops = {.view = hostile_view, .close = hostile_close};
    struct sockaddr_in to = io_test_loopback((uint16_t)port), any = io_test_loopback(0);
    struct timespec now;
    int file_error = 1;
    aftp_sender_settings ss;
    aftp_sender *snd = NULL;
    aftp_udp udp = {.fd = -1};
    clock_gettime(CLOCK_REALTIME, &now);
    aftp_sender_settings_default(&ss);
    ss.conn_id = 0x0badc0deu;
    ss.storage = &ops;
    ss.on_event = hostile_event;
    ss.user = &file_error;
    ss.idle_timeout_ns = UINT64_C(5000000000);
    ss.security.cipher = AFTP_CIPHER_AUTO;
    ss.security.identity = f->key[k].secret;
    ss.security.peer_key = f->server.public_key;
    ss.security.unix_time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    assert_int_equal(aftp_sender_new(&ss, aftp_drive_now_ns(), &snd), AFTP_OK);
    aftp_file_info info = {.file_id = 1, .size = sizeof hostile_payload, .mode = 0644,
                           .path = path};
    assert_int_equal(aftp_sender_add_file(snd, &info), AFTP_OK);
    aftp_sender_finish(snd);
    assert_int_equal(aftp_udp_open(&udp, (struct sockaddr *)&any, sizeof any, AFTP_IO_DATAGRAM,
                                   AFTP_UDP_PORT_OWN), AFTP_OK);
    assert_int_equal(aftp_udp_connect(&udp, (struct sockaddr *)&to, sizeof to), AFTP_OK);
    aftp_drive d = {.sender = snd, .udp = &udp, .max_datagram = AFTP_IO_DATAGRAM};
    aftp_drive_run(&d);
    aftp_sender_del(snd);
    aftp_udp_close(&udp);
    return file_error;
}

/* ---- tests ---- */

static void test_roots(void **state)
{
    fixture *f = *state;
    char a[600], b[600];
    aftp_push_result res;
    make_file(f, "a.bin", 1, a, sizeof a);
    make_file(f, "b.bin", 2, b, sizeof b);
    unsigned port = start_server(f, NULL);
    int rc_a = push(f, port, KEY_A, a, &res), rc_b = push(f, port, KEY_B, b, &res);
    int escape = push_hostile(f, port, KEY_A, "../b/x");
    int escape_abs = push_hostile(f, port, KEY_A, "/tmp/x");
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(rc_b, AFTP_OK);
    assert_true(sfx_same_file(f->root_a, "a.bin", a));
    assert_true(sfx_same_file(f->root_b, "b.bin", b));
    assert_false(exists(f->dir, "a.bin"));
    assert_false(exists(f->dir, "b.bin"));
    assert_false(exists(f->root_b, "a.bin"));
    assert_false(exists(f->root_a, "b.bin"));
    assert_int_equal(escape, AFTP_ERR_PATH_REJECTED);
    assert_int_equal(escape_abs, AFTP_ERR_PATH_REJECTED);
    assert_false(exists(f->root_b, "x"));
    assert_false(exists(f->root_a, "x"));
    assert_string_equal(f->receipt_root, f->root_b);
}

static void test_from(void **state)
{
    fixture *f = *state;
    char a[600], expect[1024];
    aftp_push_result res;
    make_file(f, "near.bin", 3, a, sizeof a);
    unsigned port = start_server(f, NULL);
    int rc_far = push(f, port, KEY_FAR, a, &res);
    int rc_near = push(f, port, KEY_NEAR, a, &res);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_far, AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(rc_near, AFTP_OK);
    assert_true(sfx_same_file(f->root_a, "near.bin", a));
    assert_false(exists(f->dir, "near.bin"));
    snprintf(expect, sizeof expect,
             "is limited to from=\"198.18.0.0/15,2001:db8::/32\" (%s:4); client came from "
             "127.0.0.1:", f->authorized);
    assert_true(log_has(f, expect));
}

static void test_rate_and_read_only(void **state)
{
    fixture *f = *state;
    char a[600], ro[600], expect[700];
    aftp_push_result res_a, res_ro;
    aftp_client *c = NULL;
    make_file(f, "capped.bin", 4, a, sizeof a);
    make_file(f, "ro.bin", 5, ro, sizeof ro);
    unsigned port = start_server(f, NULL);
    int rc_a = push(f, port, KEY_A, a, &res_a);
    int rc_ro = push(f, port, KEY_RO, ro, &res_ro);
    /* the public client says what the server said */
    char to[32];
    snprintf(to, sizeof to, "127.0.0.1:%u", port);
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, f->key[KEY_RO].secret), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key(c, f->server.public_key), AFTP_OK);
    const char *files[] = {ro};
    int rc_client = aftp_client_send(c, to, files, 1);
    snprintf(expect, sizeof expect, "%s", aftp_client_errmsg(c));
    aftp_client_del(c);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(res_a.io.stats.rate_cap_bps, RATE_A);
    assert_int_equal(f->receipt_cap, RATE_A);
    assert_int_equal(rc_ro, AFTP_ERR_PERMISSION);
    assert_non_null(strstr(res_ro.io.message, "this client key may only pull from this server"));
    assert_int_equal(rc_client, AFTP_ERR_PERMISSION);
    assert_non_null(strstr(expect, "refused us: this client key may only pull"));
    assert_false(exists(f->dir, "ro.bin"));
    snprintf(expect, sizeof expect, "its key may only pull (read-only in %s:3) and it asked to "
             "push", f->authorized);
    assert_true(log_has(f, expect));
}

static void test_missing_root(void **state)
{
    fixture *f = *state;
    char a[600], expect[2400];
    aftp_push_result res;
    make_file(f, "lost.bin", 6, a, sizeof a);
    unsigned port = start_server(f, NULL);
    int rc = push(f, port, KEY_MISSING, a, &res);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc, AFTP_ERR_UNKNOWN_PEER);
    snprintf(expect, sizeof expect, "cannot use destination directory %s/missing: No such file "
             "or directory (root= in %s:6 must name an existing directory)", f->dir,
             f->authorized);
    assert_true(log_has(f, expect));
    assert_false(exists(f->dir, "lost.bin"));
}

/* Key A: record its pre-filled decision, lift its cap. The read-only key:
 * allowed to push. */
static int admit_changing(void *user, const aftp_peer *peer, aftp_admission *d)
{
    fixture *f = user;
    for (int k = 0; k < KEYS; k++)
        if (memcmp(peer->key, f->key[k].public_key, AFTP_KEY_LEN) == 0)
            f->seen_access[k] = aftp_admission_access(d);
    if (memcmp(peer->key, f->key[KEY_A].public_key, AFTP_KEY_LEN) == 0) {
        snprintf(f->seen_root, sizeof f->seen_root, "%s", aftp_admission_root(d));
        f->seen_cap = aftp_admission_rate_cap(d);
        return aftp_admission_set_rate_cap(d, 0);
    }
    if (memcmp(peer->key, f->key[KEY_RO].public_key, AFTP_KEY_LEN) == 0)
        return aftp_admission_set_access(d, AFTP_ACCESS_READ | AFTP_ACCESS_WRITE);
    return AFTP_OK;
}

static void test_callback_changes_decision(void **state)
{
    fixture *f = *state;
    char a[600], ro[600], root_a[700];
    aftp_push_result res_a, res_ro;
    make_file(f, "a2.bin", 7, a, sizeof a);
    make_file(f, "ro2.bin", 8, ro, sizeof ro);
    unsigned port = start_server(f, admit_changing);
    int rc_a = push(f, port, KEY_A, a, &res_a);
    int rc_ro = push(f, port, KEY_RO, ro, &res_ro);
    sfx_stop(&f->srv, 2);

    snprintf(root_a, sizeof root_a, "%s/a", f->dir); /* the relative root= "a" */
    assert_string_equal(f->seen_root, root_a);
    assert_int_equal(f->seen_cap, RATE_A);
    assert_int_equal(f->seen_access[KEY_A], AFTP_ACCESS_WRITE);
    assert_int_equal(f->seen_access[KEY_RO], AFTP_ACCESS_READ);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(res_a.io.stats.rate_cap_bps, 0);
    assert_true(sfx_same_file(f->root_a, "a2.bin", a));
    assert_int_equal(rc_ro, AFTP_OK);
    assert_true(sfx_same_file(f->dir, "ro2.bin", ro));
}

static void test_once_waits_past_refused_push(void **state)
{
    fixture *f = *state;
    char ro[600], a[600];
    aftp_push_result res;
    make_file(f, "ro3.bin", 9, ro, sizeof ro);
    make_file(f, "a3.bin", 10, a, sizeof a);
    assert_int_equal(aftp_server_set_once(f->srv.s, 1), AFTP_OK);
    unsigned port = start_server(f, NULL);
    int rc_ro = push(f, port, KEY_RO, ro, &res);
    int rc_a = push(f, port, KEY_A, a, &res);
    sfx_join(&f->srv, 10); /* the run ends by itself after A's session */

    assert_int_equal(rc_ro, AFTP_ERR_PERMISSION);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_true(sfx_same_file(f->root_a, "a3.bin", a));
}

static void test_admission_arguments(void **state)
{
    (void)state;
    assert_int_equal(aftp_admission_set_access(NULL, AFTP_ACCESS_READ), AFTP_ERR_INVALID_ARGUMENT);
    assert_null(aftp_admission_root(NULL));
    assert_int_equal(aftp_admission_rate_cap(NULL), 0);
    assert_int_equal(aftp_admission_access(NULL), 0);
}

/* ---- pull ---- */

typedef struct get_events {
    int failed;
    int errors[8];  /* of the FAILED events, in order */
    char first_message[1024];
} get_events;

static void on_get_event(void *user, const aftp_file_event *ev)
{
    get_events *g = user;
    if (ev->type != AFTP_FILE_FAILED)
        return;
    if (g->failed == 0)
        snprintf(g->first_message, sizeof g->first_message, "%s", ev->message);
    if (g->failed < 8)
        g->errors[g->failed] = ev->error;
    g->failed++;
}

/* aftp_client_get as key k into dest; its error message into msg. */
static int get(const fixture *f, unsigned port, int k, const char *const *paths, size_t n,
               const char *dest, get_events *g, char *msg, size_t cap)
{
    aftp_client *c;
    char to[32];
    snprintf(to, sizeof to, "127.0.0.1:%u", port);
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, f->key[k].secret), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key(c, f->server.public_key), AFTP_OK);
    assert_int_equal(aftp_client_set_idle_timeout_ms(c, 5000), AFTP_OK);
    assert_int_equal(aftp_client_set_file_cb(c, on_get_event, g), AFTP_OK);
    int rc = aftp_client_get(c, to, paths, n, dest);
    snprintf(msg, cap, "%s", aftp_client_errmsg(c));
    aftp_client_del(c);
    return rc;
}

/* The server's dir: pub/{a.bin,sub/b.bin,empty/}, one.bin, out -> the
 * secret beside it, a FIFO; dest/ and a file beside them. */
static int make_pull_tree(fixture *f, char *dest, size_t cap)
{
    int dir = open(f->dir, O_RDONLY | O_DIRECTORY);
    int top = open(f->srv.top, O_RDONLY | O_DIRECTORY);
    assert_true(dir >= 0 && top >= 0);
    assert_int_equal(mkdirat(dir, "pub", 0750), 0);
    assert_int_equal(mkdirat(dir, "pub/sub", 0755), 0);
    assert_int_equal(mkdirat(dir, "pub/empty", 0700), 0);
    io_test_write_file(dir, "pub/a.bin", 2000000, 1, 0640, 1600000000123456789);
    io_test_write_file(dir, "pub/sub/b.bin", 70001, 2, 0600, 1500000000000000007);
    io_test_write_file(dir, "one.bin", FILE_LEN, 3, 0644, 1700000000000000000);
    io_test_write_file(top, "secret", 100, 4, 0600, 0);
    io_test_write_file(top, "a-file", 10, 5, 0600, 0);
    assert_int_equal(symlinkat("../secret", dir, "out"), 0);
    assert_int_equal(mkfifoat(dir, "fifo", 0600), 0);
    assert_int_equal(mkdirat(top, "dest", 0755), 0);
    snprintf(dest, cap, "%s/dest", f->srv.top);
    close(top);
    return dir;
}

static void test_pull(void **state)
{
    fixture *f = *state;
    char dest[700], msg[1200], src[700], expect[1400];
    int dir = make_pull_tree(f, dest, sizeof dest);
    int device = mknodat(dir, "null", S_IFCHR | 0600, makedev(1, 3)) == 0;
    unsigned port = start_server(f, NULL);
    get_events good = {0}, hostile = {0}, wo = {0}, onto_file = {0};
    const char *const paths[] = {"pub", "one.bin"};
    int rc_good = get(f, port, KEY_RO, paths, 2, dest, &good, msg, sizeof msg);
    const char *const bad[] = {"../secret", "/etc/passwd", "out", "fifo", "nothing",
                               device ? "null" : "fifo", "one.bin"};
    int rc_hostile = get(f, port, KEY_RO, bad, 7, dest, &hostile, msg, sizeof msg);
    char hostile_msg[1200];
    snprintf(hostile_msg, sizeof hostile_msg, "%s", msg);
    int rc_wo = get(f, port, KEY_A, paths, 2, dest, &wo, msg, sizeof msg);
    char wo_msg[1200];
    snprintf(wo_msg, sizeof wo_msg, "%s", msg);
    char a_file[700];
    snprintf(a_file, sizeof a_file, "%s/a-file", f->srv.top);
    int rc_onto_file = get(f, port, KEY_RO, paths, 2, a_file, &onto_file, msg, sizeof msg);
    sfx_stop(&f->srv, 2);

    assert_int_equal(rc_good, AFTP_OK);
    assert_int_equal(good.failed, 0);
    int dst = open(dest, O_RDONLY | O_DIRECTORY);
    snprintf(src, sizeof src, "%s/pub", f->dir);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 5);
    snprintf(src, sizeof src, "%s/one.bin", f->dir);
    assert_int_equal(io_test_expect_tree_copies(src, dst), 1);
    close(dst);

    /* one.bin is there already: resume/sync off, so it fails as existing;
     * the refusals come first, one per path */
    assert_int_equal(rc_hostile, AFTP_ERR_PATH_REJECTED);
    assert_true(hostile.failed >= 6);
    for (int i = 0; i < 4; i++)
        assert_int_equal(hostile.errors[i], AFTP_ERR_PATH_REJECTED);
    assert_int_equal(hostile.errors[4], AFTP_ERR_NOT_FOUND);
    assert_int_equal(hostile.errors[5], AFTP_ERR_PATH_REJECTED);
    assert_non_null(strstr(hostile.first_message, "the server refused ../secret"));
    assert_non_null(strstr(hostile_msg, "entries failed"));
    assert_false(exists(dest, "secret"));
    assert_false(exists(dest, "out"));

    assert_int_equal(rc_wo, AFTP_ERR_PERMISSION);
    assert_non_null(strstr(wo_msg, "may only push"));
    snprintf(expect, sizeof expect, "its key may only push (write-only in %s:1) and it asked "
             "to pull", f->authorized);
    assert_true(log_has(f, expect));

    assert_int_equal(rc_onto_file, AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(onto_file.failed, 0);
    close(dir);
}

/* A push of KEY_NEAR paced to last seconds, on a thread of its own. */
typedef struct slow_push {
    const fixture *f;
    unsigned port;
    const char *file;
    int rc;
    int done; /* atomically: the push returned */
} slow_push;

static void *run_slow_push(void *arg)
{
    slow_push *p = arg;
    aftp_push_result res;
    p->rc = push_at(p->f, p->port, KEY_NEAR, p->file, UINT64_C(100000), &res);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A pull and a push of one key run side by side: a pull keeps no resume
 * state on the server, so it neither waits for the key's push (whose
 * 100 kB at 100 kbit/s take 8 s) nor holds it back. */
static void test_pull_beside_push(void **state)
{
    fixture *f = *state;
    char file[700], served[700], dest[700], msg[1200];
    make_file(f, "slow.bin", 11, file, sizeof file);
    snprintf(served, sizeof served, "%s/served.bin", f->root_a);
    make_file(f, "served.bin", 12, dest, sizeof dest);
    assert_int_equal(rename(dest, served), 0);
    snprintf(dest, sizeof dest, "%s/pulled", f->srv.top);
    assert_int_equal(mkdir(dest, 0700), 0);
    unsigned port = start_server(f, NULL);
    slow_push p = {.f = f, .port = port, .file = file};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_slow_push, &p), 0);
    for (int i = 0; i < 500 && !log_has(f, "session started"); i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    get_events g = {0};
    const char *const paths[] = {"served.bin"};
    int rc = get(f, port, KEY_NEAR, paths, 1, dest, &g, msg, sizeof msg);
    int push_done_then = __atomic_load_n(&p.done, __ATOMIC_ACQUIRE);
    pthread_join(thread, NULL);
    sfx_stop(&f->srv, 2);
    assert_int_equal(rc, AFTP_OK);
    assert_false(push_done_then);
    assert_int_equal(p.rc, AFTP_OK);
    assert_true(sfx_same_file(dest, "served.bin", served));
    assert_true(sfx_same_file(f->root_a, "slow.bin", file));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roots, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_from, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_rate_and_read_only, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_root, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_callback_changes_decision, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_once_waits_past_refused_push, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_pull, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_pull_beside_push, setup, sfx_teardown),
        cmocka_unit_test(test_admission_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
