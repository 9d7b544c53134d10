/* The server API (include/aftp/aftp_server.h): a server runs in a thread
 * of this process; clients push to it over 127.0.0.1 through the internal
 * push driver (io/aftp_push.h), each with its own key.
 *
 *   admission   a callback maps each of two client keys to its own
 *               partner directory (files land there, byte-exact) and
 *               refuses a third key (its client is told it is not
 *               authorized; nothing lands); one receipt per committed
 *               file; the log has the listening line and the refusal;
 *               a stop from another thread ends the run with AFTP_OK;
 *               nothing is written to fds 1 and 2 during the run;
 *   no callback the authorized keys decide, into the server's dir;
 *   unprotected a session without keys reaches the callback with no key;
 *   no start    a run that cannot start says why; failed setters keep
 *               what was set; a dir that cannot be used and a key file
 *               without a key are refused when set;
 *   busy port   a second server on a bound port fails with "address in use";
 *   once        a refused handshake does not count; the first admitted
 *               session ends the run with its result; a stop before any
 *               session gives AFTP_ERR_CANCELLED;
 *   receipts    carry the session's figures (handshake time, packets, duplicates)
 *               and aftp_server_format_peer names the client as the log does;
 *   faux://     zeros verified, nothing kept, a receipt; another byte fails
 *               the file and the --once run with AFTP_ERR_IO;
 *   terms       the operator's names of the dir and pre-shared key settings
 *               appear in the advice; a term too long is refused;
 *   progress    a slow file's progress calls name it, its size, and bytes
 *               that only grow. */
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
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>
#include <xxhash.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_push.h"
#include "aftp_source.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"
#include "io_testutil.h"
#include "server_fixture.h"
#include "proto/aftp_wire.h"

enum { CLIENTS = 3, MAX_RECEIPTS = 8, FILE_LEN = 300000 + 17 };

typedef struct test_key {
    sfx_key k;
    char comment[32];
} test_key;

typedef struct seen_receipt {
    char path[256], printable[256], root[512], comment[64], peer_text[AFTP_SERVER_PEER_TEXT_MAX];
    uint64_t size, packets_received, duplicate_packets;
    uint8_t digest[AFTP_DIGEST_LEN], key[AFTP_KEY_LEN];
    int64_t connected_ns, start_ns, end_ns;
    int cipher;
    uint64_t rate_cap_bps;
} seen_receipt;

/* What the server's callbacks saw; the test thread reads it once the run
 * has ended (pthread_join orders the two). */
typedef struct fixture {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    char server_dir[512], partner[2][512], authorized[512];
    test_key server, client[CLIENTS];
    seen_receipt receipts[MAX_RECEIPTS];
    int receipt_count;
    int admissions;
    int progress_calls, progress_wrong; /* progress seen; calls with figures off */
    uint64_t progress_last;             /* bytes_done of the latest call */
} fixture;

static void make_key(test_key *k, const char *comment)
{
    sfx_key_new(&k->k);
    snprintf(k->comment, sizeof k->comment, "%s", comment);
}

/* Every client's key on its line, with its comment. */
static void write_authorized(fixture *f)
{
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    for (int i = 0; i < CLIENTS; i++)
        sfx_authorize(out, NULL, f->client[i].k.public_key, f->client[i].comment);
    fclose(out);
}

static int setup(void **state)
{
    fixture *f = sfx_setup(sizeof *f);
    sfx_mkdir(f->server_dir, sizeof f->server_dir, f->srv.top, "incoming");
    sfx_mkdir(f->partner[0], sizeof f->partner[0], f->srv.top, "partner-a");
    sfx_mkdir(f->partner[1], sizeof f->partner[1], f->srv.top, "partner-b");
    make_key(&f->server, "server");
    make_key(&f->client[0], "alpha corp");
    make_key(&f->client[1], "beta ltd");
    make_key(&f->client[2], "gamma stranger");
    write_authorized(f);
    *state = f;
    return 0;
}

/* ---- the server's callbacks ---- */

static void on_receipt(void *user, const aftp_receipt *r)
{
    fixture *f = user;
    /* No cmocka assertion on the server's thread: what it saw is checked
     * once the run has ended. */
    if (f->receipt_count == MAX_RECEIPTS)
        return;
    seen_receipt *e = &f->receipts[f->receipt_count++];
    snprintf(e->path, sizeof e->path, "%s", r->path);
    snprintf(e->root, sizeof e->root, "%s", r->root);
    snprintf(e->printable, sizeof e->printable, "%s", r->printable_path);
    snprintf(e->comment, sizeof e->comment, "%s", r->client->comment);
    e->size = r->size;
    memcpy(e->digest, r->digest, sizeof e->digest);
    if (r->client->key != NULL)
        memcpy(e->key, r->client->key, AFTP_KEY_LEN);
    e->start_ns = r->start_unix_ns;
    e->end_ns = r->end_unix_ns;
    e->cipher = r->cipher;
    e->connected_ns = r->connected_unix_ns;
    e->packets_received = r->packets_received;
    e->duplicate_packets = r->duplicate_packets;
    e->rate_cap_bps = r->rate_cap_bps;
    aftp_server_format_peer(r->client, e->peer_text, sizeof e->peer_text);
}

/* Every call names the file under way with its size, and bytes_done only
 * grows, within the size. */
static void on_progress(void *user, const aftp_progress *p)
{
    fixture *f = user;
    if (strcmp(p->name, "slow.bin") != 0 || p->size != FILE_LEN || p->bytes_done > p->size ||
        p->bytes_done < f->progress_last || p->seconds < 0)
        f->progress_wrong++;
    f->progress_last = p->bytes_done;
    f->progress_calls++;
}

/* Client 0 into partner a, client 1 into partner b, anyone else refused. */
static int admit_partners(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    fixture *f = user;
    f->admissions++;
    for (int i = 0; i < 2; i++)
        if (memcmp(peer->key, f->client[i].k.public_key, AFTP_KEY_LEN) == 0 &&
            strcmp(peer->comment, f->client[i].comment) == 0)
            return aftp_admission_set_root(decision, f->partner[i]);
    return AFTP_ERR_UNKNOWN_PEER;
}

/* ---- running it ---- */

static void configure(fixture *f)
{
    sfx_configure(&f->srv, f->server_dir, f->server.k.secret, f->authorized, 5000);
    assert_int_equal(aftp_server_set_receipt_cb(f->srv.s, on_receipt, f), AFTP_OK);
}

/* A file of FILE_LEN bytes of the pattern `seed`, named name, in the tree. */
static void make_file(const fixture *f, const char *name, uint32_t seed, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", f->srv.top, name);
    sfx_make_file(path, FILE_LEN, seed);
}

#define CAPPED_BPS UINT64_C(8000000)     /* the partner's cap: 8 Mbit/s */
#define OWN_RATE_BPS UINT64_C(400000000) /* the client's own fixed rate, 50 times that */

/* Pushes file as `client` (-1: an unprotected session, AFTP_CIPHER_NONE)
 * at 400 Mbit/s fixed; what the sender reported into *res. */
static int push_reporting(const fixture *f, unsigned port, int client, const char *file,
                          aftp_push_result *res)
{
    sfx_push p;
    sfx_push_init(&p, port, &file, 1, OWN_RATE_BPS);
    if (client >= 0)
        sfx_push_keys(&p, f->client[client].k.secret, f->server.k.public_key);
    return sfx_push_run(&p, res);
}

static int push(const fixture *f, unsigned port, int client, const char *file)
{
    aftp_push_result res;
    return push_reporting(f, port, client, file, &res);
}

/* Pushes file as client 0 at rate_bps, silent for idle_s at most, with a
 * pre-shared key (NULL: none). */
static int push_paced(const fixture *f, unsigned port, const char *file, uint64_t rate_bps,
                      unsigned idle_s, const uint8_t *psk)
{
    sfx_push p;
    aftp_push_result res;
    sfx_push_init(&p, port, &file, 1, rate_bps);
    sfx_push_keys(&p, f->client[0].k.secret, f->server.k.public_key);
    p.o.idle_timeout_ns = idle_s * UINT64_C(1000000000);
    p.o.security.psk = psk;
    return sfx_push_run(&p, &res);
}

static uint8_t *read_whole(const char *path, size_t *len)
{
    FILE *in = fopen(path, "r");
    if (in == NULL)
        return NULL;
    uint8_t *buf = malloc(FILE_LEN + 1);
    assert_non_null(buf);
    *len = fread(buf, 1, FILE_LEN + 1, in);
    fclose(in);
    return buf;
}

/* The file at dir/name holds exactly what `source` holds; its XXH3-128
 * (canonical, big-endian) into digest. */
static void assert_same_file(const char *dir, const char *name, const char *source,
                             uint8_t digest[AFTP_DIGEST_LEN])
{
    char path[1024];
    size_t got_len = 0, want_len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *got = read_whole(path, &got_len), *want = read_whole(source, &want_len);
    assert_non_null(got);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(want, want_len));
    memcpy(digest, c.digest, AFTP_DIGEST_LEN);
    free(got);
    free(want);
}

static int entries_in(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    int n = io_test_count_entries(fd);
    close(fd);
    return n;
}

static const seen_receipt *receipt_for(const fixture *f, const char *path)
{
    for (int i = 0; i < f->receipt_count; i++)
        if (strcmp(f->receipts[i].path, path) == 0)
            return &f->receipts[i];
    fail_msg("no receipt for %s", path);
    return NULL;
}

static void assert_receipt(const fixture *f, const char *name, int client, const char *root,
                           const uint8_t *digest)
{
    const seen_receipt *r = receipt_for(f, name);
    assert_string_equal(r->root, root);
    assert_string_equal(r->printable, name);
    assert_int_equal(r->size, FILE_LEN);
    assert_memory_equal(r->digest, digest, AFTP_DIGEST_LEN);
    assert_memory_equal(r->key, f->client[client].k.public_key, AFTP_KEY_LEN);
    assert_string_equal(r->comment, f->client[client].comment);
    char key_text[128], peer_end[256];
    assert_true(r->connected_ns > 0);
    assert_true(r->connected_ns <= r->start_ns);
    assert_true(r->start_ns <= r->end_ns);
    /* at least one data packet per 1452-byte payload of the file */
    assert_true(r->packets_received >= FILE_LEN / 1452);
    assert_true(r->duplicate_packets < r->packets_received);
    aftp_keyfile_key_text(f->client[client].k.public_key, key_text, sizeof key_text);
    snprintf(peer_end, sizeof peer_end, " key %s \"%s\"", key_text, f->client[client].comment);
    assert_true(strncmp(r->peer_text, "from 127.0.0.1:", 15) == 0);
    assert_string_equal(r->peer_text + strlen(r->peer_text) - strlen(peer_end), peer_end);
    assert_true(r->cipher == AFTP_CIPHER_AES256GCM || r->cipher == AFTP_CIPHER_CHACHA20POLY1305);
}

/* fds 1 and 2 go to a file for the run, so that anything the library
 * writes there is caught. */
typedef struct captured {
    int saved[2];
    char path[600];
} captured;

static void capture_std(const fixture *f, captured *c)
{
    snprintf(c->path, sizeof c->path, "%s/stdio", f->srv.top);
    fflush(stdout);
    fflush(stderr);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    for (int i = 0; i < 2; i++) {
        c->saved[i] = dup(i + 1);
        assert_true(dup2(fd, i + 1) >= 0);
    }
    close(fd);
}

/* Gives fds 1 and 2 back; the bytes written to them meanwhile. */
static long release_std(captured *c)
{
    struct stat st;
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < 2; i++) {
        dup2(c->saved[i], i + 1);
        close(c->saved[i]);
    }
    assert_int_equal(stat(c->path, &st), 0);
    return (long)st.st_size;
}

static void test_admission_roots_and_receipts(void **state)
{
    fixture *f = *state;
    char a[600], b[600], c[600], listening[64];
    uint8_t digest_a[AFTP_DIGEST_LEN], digest_b[AFTP_DIGEST_LEN];
    captured std;
    make_file(f, "a.bin", 1, a, sizeof a);
    make_file(f, "b.bin", 2, b, sizeof b);
    make_file(f, "c.bin", 3, c, sizeof c);
    configure(f);
    assert_int_equal(aftp_server_set_admit_cb(f->srv.s, admit_partners, f), AFTP_OK);
    capture_std(f, &std);
    unsigned port = sfx_start(&f->srv, 10);
    int rc_a = push(f, port, 0, a), rc_b = push(f, port, 1, b), rc_c = push(f, port, 2, c);
    sfx_stop(&f->srv, 1);
    long written = release_std(&std);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(written, 0);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(rc_b, AFTP_OK);
    assert_int_equal(rc_c, AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(f->admissions, 3);
    assert_same_file(f->partner[0], "a.bin", a, digest_a);
    assert_same_file(f->partner[1], "b.bin", b, digest_b);
    assert_int_equal(entries_in(f->partner[0]), 1);
    assert_int_equal(entries_in(f->partner[1]), 1);
    assert_int_equal(entries_in(f->server_dir), 0);
    assert_int_equal(f->receipt_count, 2);
    assert_receipt(f, "a.bin", 0, f->partner[0], digest_a);
    assert_receipt(f, "b.bin", 1, f->partner[1], digest_b);
    snprintf(listening, sizeof listening, "listening on 127.0.0.1:%u", port);
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_LISTENING, listening));
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_SESSION_FAILED, "refused client"));
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_SESSION_FAILED, "\"gamma stranger\""));
    assert_int_equal(aftp_server_port(f->srv.s), 0);
}

/* Without a callback the authorized keys decide, into the server's dir. */
static void test_authorized_keys_decide(void **state)
{
    fixture *f = *state;
    char a[600], unlisted[600];
    uint8_t digest_a[AFTP_DIGEST_LEN];
    make_file(f, "a.bin", 4, a, sizeof a);
    /* Only client 0 listed; client 1 is not. */
    snprintf(unlisted, sizeof unlisted, "%s/one_key", f->srv.top);
    FILE *out = fopen(unlisted, "w");
    assert_non_null(out);
    sfx_authorize(out, NULL, f->client[0].k.public_key, f->client[0].comment);
    fclose(out);
    configure(f);
    assert_int_equal(aftp_server_set_authorized_keys_file(f->srv.s, unlisted), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 10);
    int rc_a = push(f, port, 0, a), rc_b = push(f, port, 1, a);
    sfx_stop(&f->srv, 1);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(rc_b, AFTP_ERR_UNKNOWN_PEER);
    assert_same_file(f->server_dir, "a.bin", a, digest_a);
    assert_int_equal(f->receipt_count, 1);
    assert_receipt(f, "a.bin", 0, f->server_dir, digest_a);
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_SESSION_FAILED, "its key is not authorized"));
}

/* An unprotected session has no key: the callback still places it. */
static int admit_keyless(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    fixture *f = user;
    f->admissions++;
    return peer->key == NULL ? aftp_admission_set_root(decision, f->partner[1])
                             : AFTP_ERR_UNKNOWN_PEER;
}

/* An unprotected server (AFTP_CIPHER_NONE) whose callback admits. */
static void configure_unprotected(fixture *f, aftp_admit_cb admit)
{
    assert_int_equal(aftp_server_set_listen(f->srv.s, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(f->srv.s, f->server_dir), AFTP_OK);
    assert_int_equal(aftp_server_set_cipher(f->srv.s, AFTP_CIPHER_NONE), AFTP_OK);
    assert_int_equal(aftp_server_set_log_cb(f->srv.s, sfx_log, &f->srv), AFTP_OK);
    assert_int_equal(aftp_server_set_receipt_cb(f->srv.s, on_receipt, f), AFTP_OK);
    assert_int_equal(aftp_server_set_admit_cb(f->srv.s, admit, f), AFTP_OK);
}

static void test_unprotected_session(void **state)
{
    fixture *f = *state;
    char a[600];
    uint8_t digest_a[AFTP_DIGEST_LEN], no_key[AFTP_KEY_LEN] = {0};
    make_file(f, "a.bin", 5, a, sizeof a);
    configure_unprotected(f, admit_keyless);
    unsigned port = sfx_start(&f->srv, 10);
    int rc = push(f, port, -1, a);
    sfx_stop(&f->srv, 1);

    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(f->admissions, 1);
    assert_same_file(f->partner[1], "a.bin", a, digest_a);
    assert_int_equal(f->receipt_count, 1);
    assert_memory_equal(f->receipts[0].key, no_key, AFTP_KEY_LEN);
    assert_int_equal(f->receipts[0].cipher, AFTP_CIPHER_NONE);
    assert_string_equal(f->receipts[0].root, f->partner[1]);
    assert_true(strncmp(f->receipts[0].peer_text, "from 127.0.0.1:", 15) == 0);
    assert_null(strstr(f->receipts[0].peer_text, " key "));
}

/* ---- a rate cap per client ---- */


/* Client 0 into partner a under CAPPED_BPS, an unprotected client into
 * partner b under the same cap, anyone else refused. */
static int admit_capped(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    fixture *f = user;
    f->admissions++;
    if (peer->key != NULL && memcmp(peer->key, f->client[0].k.public_key, AFTP_KEY_LEN) != 0)
        return AFTP_ERR_UNKNOWN_PEER;
    int rc = aftp_admission_set_rate_cap(decision, CAPPED_BPS);
    return rc == AFTP_OK ? aftp_admission_set_root(decision, f->partner[peer->key == NULL])
                         : rc;
}

/* What the sending side reported: the cap its files obeyed, and the
 * fastest pacing rate any progress call showed. */
typedef struct capped_send {
    uint64_t cap_seen, max_rate_seen;
    int finished;
} capped_send;

static void on_capped_file(void *user, const aftp_file_event *ev)
{
    capped_send *cs = user;
    if (ev->type == AFTP_FILE_FINISHED) {
        cs->finished++;
        cs->cap_seen = ev->rate_cap_bps;
    }
}

static void on_capped_progress(void *user, const aftp_progress *p)
{
    capped_send *cs = user;
    if (p->rate_bps > cs->max_rate_seen)
        cs->max_rate_seen = p->rate_bps;
}

/* Sends file through the public client API at OWN_RATE_BPS, fixed, as
 * client `client` (-1: unprotected). */
static int send_capped(const fixture *f, unsigned port, int client, const char *file,
                       capped_send *cs)
{
    aftp_client *c = NULL;
    char to[32];
    snprintf(to, sizeof to, "127.0.0.1:%u", port);
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    if (client >= 0) {
        assert_int_equal(aftp_client_set_identity(c, f->client[client].k.secret), AFTP_OK);
        assert_int_equal(aftp_client_set_peer_key(c, f->server.k.public_key), AFTP_OK);
    } else {
        assert_int_equal(aftp_client_set_cipher(c, AFTP_CIPHER_NONE), AFTP_OK);
    }
    assert_int_equal(aftp_client_set_policy(c, AFTP_CC_FIXED), AFTP_OK);
    assert_int_equal(aftp_client_set_rate(c, OWN_RATE_BPS), AFTP_OK);
    assert_int_equal(aftp_client_set_idle_timeout_ms(c, 5000), AFTP_OK);
    assert_int_equal(aftp_client_set_file_cb(c, on_capped_file, cs), AFTP_OK);
    assert_int_equal(aftp_client_set_progress_cb(c, on_capped_progress, cs), AFTP_OK);
    int rc = aftp_client_send(c, to, &file, 1);
    aftp_client_del(c);
    return rc;
}

/* The cap the admission chose reaches the client's sender, which reports
 * it and paces under it although its own fixed rate is 50 times higher
 * (the engine's pacing rate, the public client's file event and progress
 * say so); the server names the cap in its log and in the receipt. */
static void test_admission_rate_cap(void **state)
{
    fixture *f = *state;
    char a[600], b[600], expect[96];
    uint8_t digest[AFTP_DIGEST_LEN];
    capped_send cs = {0};
    aftp_push_result res;
    make_file(f, "a.bin", 11, a, sizeof a);
    make_file(f, "b.bin", 13, b, sizeof b);
    configure(f);
    assert_int_equal(aftp_server_set_admit_cb(f->srv.s, admit_capped, f), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 10);
    int rc = send_capped(f, port, 0, a, &cs);
    int rc_push = push_reporting(f, port, 0, b, &res);
    sfx_stop(&f->srv, 1);

    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(rc_push, AFTP_OK);
    assert_int_equal(res.io.stats.rate_cap_bps, CAPPED_BPS);
    assert_int_equal(res.io.stats.pacing_rate_bps, CAPPED_BPS);
    assert_same_file(f->partner[0], "a.bin", a, digest);
    assert_same_file(f->partner[0], "b.bin", b, digest);
    assert_int_equal(cs.finished, 1);
    assert_int_equal(cs.cap_seen, CAPPED_BPS);
    assert_true(cs.max_rate_seen <= CAPPED_BPS);
    assert_int_equal(receipt_for(f, "a.bin")->rate_cap_bps, CAPPED_BPS);
    snprintf(expect, sizeof expect, "rate cap of %" PRIu64 " bit/s", CAPPED_BPS);
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_RATE_CAP, expect));
    assert_int_equal(aftp_admission_set_rate_cap(NULL, 1), AFTP_ERR_INVALID_ARGUMENT);
}

/* Unprotected, the cap travels too (unauthenticated, as everything
 * there), and the admission still places the client. */
static void test_admission_rate_cap_unprotected(void **state)
{
    fixture *f = *state;
    char a[600];
    uint8_t digest[AFTP_DIGEST_LEN];
    aftp_push_result res;
    make_file(f, "a.bin", 12, a, sizeof a);
    configure_unprotected(f, admit_capped);
    int rc = push_reporting(f, sfx_start(&f->srv, 10), -1, a, &res);
    sfx_stop(&f->srv, 1);

    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(f->admissions, 1);
    assert_same_file(f->partner[1], "a.bin", a, digest);
    assert_int_equal(res.io.stats.rate_cap_bps, CAPPED_BPS);
    assert_int_equal(res.io.stats.pacing_rate_bps, CAPPED_BPS);
    assert_int_equal(f->receipts[0].rate_cap_bps, CAPPED_BPS);
}

/* The HELLO of a client written before RATE_CAP, as client 0: the engine's
 * own HELLO without its RATE_CAP announcement (message 1 does not cover
 * extensions, so it still opens). */
static size_t hello_without_rate_cap(const fixture *f, uint8_t *out, size_t cap)
{
    aftp_sender_settings ss;
    aftp_sender *snd = NULL;
    aftp_datagram dg;
    aftp_wire_packet p;
    static uint8_t hello[AFTP_WIRE_MAX_DATAGRAM];
    uint8_t ext[AFTP_WIRE_HELLO_MIN_LEN];
    aftp_wire_writer w;
    struct timespec now;
    size_t len = 0;
    aftp_source unused_source = {0}; /* no file is added: storage is never read */
    clock_gettime(CLOCK_REALTIME, &now);
    aftp_sender_settings_default(&ss);
    ss.conn_id = 0x5eed0001u;
    ss.storage = &aftp_source_ops;
    ss.user = &unused_source;
    ss.security.cipher = AFTP_CIPHER_AUTO;
    ss.security.identity = f->client[0].k.secret;
    ss.security.peer_key = f->server.k.public_key;
    ss.security.unix_time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    assert_int_equal(aftp_sender_new(&ss, 0, &snd), AFTP_OK);
    assert_int_equal(aftp_sender_write(snd, 0, hello, sizeof hello, &dg), 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &p), AFTP_OK);
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put_except(&w, p.u.hello.ext, p.u.hello.ext_len,
                                              AFTP_WIRE_EXT_RATE_CAP),
                     AFTP_OK);
    assert_true(w.pos < p.u.hello.ext_len); /* the announcement was there */
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    assert_int_equal(aftp_wire_encode(&p, out, cap, &len), AFTP_OK);
    aftp_sender_del(snd);
    return len;
}

/* A client that cannot honour the cap its admission sets is refused with
 * CLOSE(LIMIT) in clear, naming the cap; the operator's log says why, and
 * nothing of it lands. */
static void test_rate_cap_refused_to_old_client(void **state)
{
    fixture *f = *state;
    uint8_t hello[AFTP_WIRE_HELLO_MIN_LEN], reply[AFTP_WIRE_MAX_DATAGRAM];
    char reason[AFTP_WIRE_MAX_REASON + 1], expect[64];
    aftp_wire_packet p;
    size_t len = hello_without_rate_cap(f, hello, sizeof hello);
    configure(f);
    assert_int_equal(aftp_server_set_admit_cb(f->srv.s, admit_capped, f), AFTP_OK);
    struct sockaddr_in to = io_test_loopback((uint16_t)sfx_start(&f->srv, 10));
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct timeval guard = {.tv_sec = 10};
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard), 0);
    assert_int_equal(sendto(fd, hello, len, 0, (struct sockaddr *)&to, sizeof to), (ssize_t)len);
    ssize_t got = recv(fd, reply, sizeof reply, 0);
    close(fd);
    snprintf(expect, sizeof expect, "rate cap of %" PRIu64 " bit/s", CAPPED_BPS);
    int logged = 0 < sfx_wait_lines(&f->srv, AFTP_LOG_SESSION_FAILED, expect, 1, 10);
    sfx_stop(&f->srv, 1);

    assert_true(got > 0);
    assert_int_equal(aftp_wire_decode(reply, (size_t)got, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(p.u.close.error, AFTP_WIRE_ERR_LIMIT);
    memcpy(reason, p.u.close.reason, p.u.close.reason_len);
    reason[p.u.close.reason_len] = '\0';
    assert_non_null(strstr(reason, expect));
    assert_true(logged);
    assert_int_equal(f->admissions, 1);
    assert_int_equal(f->receipt_count, 0);
    assert_int_equal(entries_in(f->partner[0]), 0);
}

/* A run that cannot start says why, and a failed setter keeps what was set. */
static void test_refuses_to_start(void **state)
{
    fixture *f = *state;
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope", f->srv.top);
    assert_int_equal(aftp_server_run(f->srv.s), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "no listen address"));
    assert_int_equal(aftp_server_set_listen(f->srv.s, "127.0.0.1:99999"),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "'127.0.0.1:99999'"));
    assert_int_equal(aftp_server_set_listen(f->srv.s, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(f->srv.s, f->server_dir), AFTP_OK);
    assert_int_equal(aftp_server_run(f->srv.s), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "no identity key"));
    assert_int_equal(aftp_server_set_identity(f->srv.s, f->server.k.secret), AFTP_OK);
    assert_int_equal(aftp_server_run(f->srv.s), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "admits nobody"));
    assert_int_equal(aftp_server_set_authorized_keys_file(f->srv.s, f->authorized), AFTP_OK);
    assert_int_equal(aftp_server_set_authorized_keys_file(f->srv.s, missing), AFTP_ERR_NOT_FOUND);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), missing));
    assert_true(aftp_server_set_dir(f->srv.s, missing) < 0);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "cannot use destination directory"));
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), missing));
    /* A key file without a key admits nobody: refused when set. */
    FILE *empty = fopen(missing, "w");
    assert_non_null(empty);
    fclose(empty);
    assert_int_equal(aftp_server_set_authorized_keys_file(f->srv.s, missing), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "no key in the file: it admits nobody"));
    /* The authorized keys and the dir set first still hold: it runs. */
    assert_int_equal(aftp_server_set_log_cb(f->srv.s, sfx_log, &f->srv), AFTP_OK);
    sfx_start(&f->srv, 10);
    sfx_stop(&f->srv, 1);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
}

static void test_busy_port(void **state)
{
    fixture *f = *state;
    char taken[32];
    aftp_server *second = NULL;
    configure(f);
    unsigned port = sfx_start(&f->srv, 10);
    snprintf(taken, sizeof taken, "127.0.0.1:%u", port);
    assert_int_equal(aftp_server_new(&second), AFTP_OK);
    assert_int_equal(aftp_server_set_listen(second, taken), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(second, f->server_dir), AFTP_OK);
    assert_int_equal(aftp_server_set_identity(second, f->server.k.secret), AFTP_OK);
    assert_int_equal(aftp_server_set_authorized_keys_file(second, f->authorized), AFTP_OK);
    int rc = aftp_server_run(second);
    assert_int_equal(rc, AFTP_ERR_NETWORK);
    assert_non_null(strstr(aftp_server_errmsg(second), "address in use"));
    aftp_server_del(second);
    sfx_stop(&f->srv, 1);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
}

/* --once: a refused handshake does not count; the first session admitted
 * ends the run with its result. */
static void test_once_serves_one_session(void **state)
{
    fixture *f = *state;
    char a[600];
    uint8_t digest_a[AFTP_DIGEST_LEN];
    make_file(f, "a.bin", 6, a, sizeof a);
    configure(f);
    assert_int_equal(aftp_server_set_admit_cb(f->srv.s, admit_partners, f), AFTP_OK);
    assert_int_equal(aftp_server_set_once(f->srv.s, 1), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 10);
    int rc_refused = push(f, port, 2, a), rc_a = push(f, port, 0, a);
    sfx_join(&f->srv, 10) /* it ends by itself */;

    assert_int_equal(rc_refused, AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(rc_a, AFTP_OK);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_string_equal(aftp_server_errmsg(f->srv.s), "");
    assert_same_file(f->partner[0], "a.bin", a, digest_a);
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_SESSION_FAILED, "\"gamma stranger\""));
    assert_int_equal(aftp_server_port(f->srv.s), 0);

    /* Stopped before any session: the session it waited for was cancelled. */
    sfx_start(&f->srv, 10);
    sfx_stop(&f->srv, 1);
    assert_int_equal(f->srv.run_rc, AFTP_ERR_CANCELLED);
    assert_true(aftp_server_errmsg(f->srv.s)[0] != '\0');
}

/* A file of FILE_LEN zero bytes, named name, in the tree. */
static void make_zeros(const fixture *f, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", f->srv.top, name);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    for (int i = 0; i < FILE_LEN; i++)
        fputc(0, out);
    fclose(out);
}

/* faux://: zeros are verified and kept nowhere; another byte fails the
 * file, and a --once run returns that failure. */
static void test_faux_dir_keeps_nothing(void **state)
{
    fixture *f = *state;
    char zeros[600], pattern[600];
    uint8_t digest[AFTP_DIGEST_LEN];
    make_zeros(f, "zeros.bin", zeros, sizeof zeros);
    make_file(f, "pattern.bin", 7, pattern, sizeof pattern);
    configure(f);
    assert_int_equal(aftp_server_set_dir(f->srv.s, AFTP_SERVER_FAUX_DIR), AFTP_OK);
    assert_int_equal(aftp_server_set_once(f->srv.s, 1), AFTP_OK);
    int rc = push(f, sfx_start(&f->srv, 10), 0, zeros);
    sfx_join(&f->srv, 10) /* it ends by itself */;
    assert_int_equal(rc, AFTP_OK);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_int_equal(f->receipt_count, 1);
    assert_same_file(f->srv.top, "zeros.bin", zeros, digest);
    assert_receipt(f, "zeros.bin", 0, AFTP_SERVER_FAUX_DIR, digest);

    rc = push(f, sfx_start(&f->srv, 10), 0, pattern);
    sfx_join(&f->srv, 10) /* it ends by itself */;
    assert_int_not_equal(rc, AFTP_OK);
    assert_int_equal(f->srv.run_rc, AFTP_ERR_IO);
    assert_non_null(strstr(aftp_server_errmsg(f->srv.s), "bytes other than zeros"));
    assert_int_equal(f->receipt_count, 1);
    assert_int_equal(entries_in(f->server_dir), 0);
}

/* The operator's terms name the settings to act on: the dir that cannot
 * be used, the pre-shared key that differs (a handshake dropped). */
static void test_terms_name_the_settings(void **state)
{
    fixture *f = *state;
    char a[600], psk_path[600], missing[600], err[256];
    uint8_t psk[AFTP_KEY_LEN], other_psk[AFTP_KEY_LEN];
    char too_long[AFTP_SERVER_TERM_MAX + 1];
    aftp_server_terms terms = {.size = sizeof terms, .dir_setting = "--dir",
                               .idle_setting = "--idle-timeout",
                               .psk_differs = "--psk-file differs"};
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    aftp_server_terms bad = {.size = sizeof bad, .dir_setting = too_long};
    make_file(f, "a.bin", 8, a, sizeof a);
    randombytes_buf(psk, sizeof psk);
    randombytes_buf(other_psk, sizeof other_psk);
    snprintf(psk_path, sizeof psk_path, "%s/psk", f->srv.top);
    assert_int_equal(aftp_keyfile_write_private(psk_path, psk, err, sizeof err), AFTP_OK);
    snprintf(missing, sizeof missing, "%s/nope", f->srv.top);
    configure(f);
    assert_int_equal(aftp_server_set_psk_file(f->srv.s, psk_path), AFTP_OK);
    assert_int_equal(aftp_server_set_terms(f->srv.s, &terms), AFTP_OK);
    assert_int_equal(aftp_server_set_terms(f->srv.s, &bad), AFTP_ERR_INVALID_ARGUMENT);
    assert_true(aftp_server_set_dir(f->srv.s, missing) < 0);
    assert_non_null(
        strstr(aftp_server_errmsg(f->srv.s), "(--dir must name an existing directory)"));

    int rc = push_paced(f, sfx_start(&f->srv, 10), a, UINT64_C(400000000), 1, other_psk);
    sfx_stop(&f->srv, 1);
    assert_int_not_equal(rc, AFTP_OK);
    assert_true(sfx_lines_with(&f->srv, AFTP_LOG_HELLO_DROPPED, "(--psk-file differs)"));
    assert_int_equal(entries_in(f->server_dir), 0);
}

/* Progress while a file comes in: a push paced at 1 Mbit/s takes about
 * 2.4 s, long enough for the ~4 calls a second. */
static void test_progress_while_receiving(void **state)
{
    fixture *f = *state;
    char slow[600];
    uint8_t digest[AFTP_DIGEST_LEN];
    make_file(f, "slow.bin", 9, slow, sizeof slow);
    configure(f);
    assert_int_equal(aftp_server_set_progress_cb(f->srv.s, on_progress, f), AFTP_OK);
    int rc = push_paced(f, sfx_start(&f->srv, 10), slow, UINT64_C(1000000), 5, NULL);
    sfx_stop(&f->srv, 1);
    assert_int_equal(rc, AFTP_OK);
    assert_same_file(f->server_dir, "slow.bin", slow, digest);
    assert_true(f->progress_calls > 0);
    assert_int_equal(f->progress_wrong, 0);
    assert_true(f->progress_last > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admission_roots_and_receipts, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_authorized_keys_decide, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_unprotected_session, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_admission_rate_cap, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_admission_rate_cap_unprotected, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_rate_cap_refused_to_old_client, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_to_start, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_busy_port, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_once_serves_one_session, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_faux_dir_keeps_nothing, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_terms_name_the_settings, setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_progress_while_receiving, setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
