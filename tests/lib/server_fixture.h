/*
 * The fixture of the server tests (test_server*.c): a server of the public
 * API (aftp_server.h) running in a thread of the test process, its log
 * kept for the test to wait on and search, keys, files, and clients that
 * push to it over 127.0.0.1 through the push driver (io/aftp_push.h).
 *
 * The server's callbacks come from its threads: the log is kept under
 * `lock`. No cmocka assertion runs on the server's threads; the tests
 * check what the callbacks saw from their own thread.
 */
#ifndef SERVER_FIXTURE_H
#define SERVER_FIXTURE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_push.h"

#define SFX_MAX_LINES 256
#define SFX_LINE_MAX 1024
#define SFX_MAX_RECEIPTS 128

typedef struct sfx_key {
    uint8_t secret[AFTP_KEY_LEN], public_key[AFTP_KEY_LEN];
} sfx_key;

typedef struct sfx_line {
    int kind;
    char text[SFX_LINE_MAX];
} sfx_line;

/* What a receipt said, as the tests compare it. */
typedef struct sfx_receipt {
    char path[256];
    int outcome;
    int pulled; /* the client fetched it (a pull) */
    uint64_t held_bytes;
    int64_t connected_ns, end_ns; /* its session's handshake; its commit */
} sfx_receipt;

typedef struct sfx_server {
    char *top;        /* the test's scratch tree (sfx_setup) */
    aftp_server *s;
    pthread_t thread;
    int run_rc;       /* aftp_server_run's result, once joined */
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a log line came */
    int is_listening;       /* the listening line came, or the run returned */
    sfx_line lines[SFX_MAX_LINES]; /* more are not kept; readable after sfx_fini */
    int line_count;
    sfx_receipt receipts[SFX_MAX_RECEIPTS]; /* in order of arrival; more are not kept */
    int receipt_count;
} sfx_server;

/* A new server (aftp_server_new) and an empty log; sfx_fini frees the
 * server (the log stays readable). */
void sfx_init(sfx_server *sv);
void sfx_fini(sfx_server *sv);
/* The log callback (aftp_server_set_log_cb with the sfx_server as user):
 * keeps the line, wakes the waiters. */
void sfx_log(void *user, int kind, const char *line);
/* Runs the server in a thread and waits (a guard of guard_s seconds) for
 * its listening line; the port it listens on (asserted non-zero). The log
 * needs sfx_log. */
unsigned sfx_start(sfx_server *sv, int guard_s);
/* The run ends within guard_s seconds (asserted), after aftp_server_stop
 * with sfx_stop. */
void sfx_join(sfx_server *sv, int guard_s);
void sfx_stop(sfx_server *sv, int guard_s);
/* Lines of `kind` (-1: any) holding `text`. */
int sfx_lines_with(sfx_server *sv, int kind, const char *text);
/* Waits until `count` such lines came (a guard of guard_s seconds keeps a
 * server that never says so from hanging the test); the lines then. */
int sfx_wait_lines(sfx_server *sv, int kind, const char *text, int count, int guard_s);
/* The text of the n-th line of `kind` (from 0), or NULL. Read it once the
 * run ended (the array is stable then). */
const char *sfx_line_of(sfx_server *sv, int kind, int n);

/* A test's fixture of `size` bytes (zeroed) whose first member is its
 * sfx_server: a scratch tree made (sv.top) and the server (sfx_init;
 * libsodium ready). sfx_teardown (a cmocka teardown, *state the fixture)
 * frees the server, the tree and the fixture. */
void *sfx_setup(size_t size);
int sfx_teardown(void **state);
/* The fixture of a test with one client key: the server's dir
 * (top/incoming), its key, and the client's key authorized (comment
 * "partner") in top/authorized_keys. sfx_one_setup is a cmocka setup;
 * sfx_teardown frees it. */
typedef struct sfx_one {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    char dir[512], authorized[600];
    sfx_key server, client;
} sfx_one;
int sfx_one_setup(void **state);

/* A protected server: on 127.0.0.1 (a free port), storing into dir, with
 * the identity, admitting the authorized keys, silent clients ending
 * after idle_ms, its log kept (sfx_log). */
void sfx_configure(sfx_server *sv, const char *dir, const uint8_t *identity,
                   const char *authorized, uint64_t idle_ms);
/* A line of authorized keys into out: options (NULL: none), the key, its
 * comment (NULL: none). */
void sfx_authorize(FILE *out, const char *options, const uint8_t *public_key,
                   const char *comment);

/* The receipt callback (aftp_server_set_receipt_cb with the sfx_server
 * as user): keeps the receipt, wakes the waiters. */
void sfx_on_receipt(void *user, const aftp_receipt *r);
/* The index (in order of arrival) of the n-th receipt for path (from 0),
 * or -1; the receipts for path. */
int sfx_receipt_index(sfx_server *sv, const char *path, int n);
int sfx_receipts_for(sfx_server *sv, const char *path);
/* Waits (a guard of guard_s seconds) for the first receipt of path; its
 * index, or -1. */
int sfx_wait_receipt(sfx_server *sv, const char *path, int guard_s);

/* A new authorized keys file beneath dir (its path into path), open for
 * sfx_authorize. */
FILE *sfx_authorized_open(char *path, size_t cap, const char *dir);

/* A new key pair. */
void sfx_key_new(sfx_key *k);
/* dir/name, made (0700); its path into out. */
void sfx_mkdir(char *out, size_t cap, const char *dir, const char *name);
/* A file of len bytes of the pattern `seed` at path. */
void sfx_make_file(const char *path, size_t len, uint32_t seed);
/* dir/rel holds exactly what `source` holds. */
int sfx_same_file(const char *dir, const char *rel, const char *source);

/* A client of the public API (aftp/aftp_client.h) with the identity,
 * pinning the server's key; aftp_client_del frees it. On the test's
 * thread (it asserts); the client may then run on another. */
aftp_client *sfx_client_new(const uint8_t *identity, const uint8_t *server_public);
/* Its HOST:PORT for a server on 127.0.0.1:port. */
void sfx_client_host(char *out, size_t cap, unsigned port);

/* A push to 127.0.0.1:port: files, at a fixed rate, silent 5 s at most,
 * unprotected until sfx_push_keys; `o` may be changed before the run. */
typedef struct sfx_push {
    struct sockaddr_in to;
    aftp_push_opts o;
} sfx_push;

void sfx_push_init(sfx_push *p, unsigned port, const char *const *files, size_t count,
                   uint64_t rate_bps);
/* Protected by the client's identity against the server's key. */
void sfx_push_keys(sfx_push *p, const uint8_t *identity, const uint8_t *server_public);
/* The push's result; what the sender reported into *res. */
int sfx_push_run(sfx_push *p, aftp_push_result *res);

#endif /* SERVER_FIXTURE_H */
