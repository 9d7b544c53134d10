/* The fixture of the server tests (server_fixture.h). */
#include "server_fixture.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "aftp_keyfile.h"
#include "common/aftp_handshake.h"
#include "io_testutil.h"

void sfx_init(sfx_server *sv)
{
    memset(sv, 0, sizeof *sv);
    pthread_mutex_init(&sv->lock, NULL);
    pthread_cond_init(&sv->changed, NULL);
    assert_int_equal(aftp_server_new(&sv->s), AFTP_OK);
}

void sfx_fini(sfx_server *sv)
{
    aftp_server_del(sv->s);
    sv->s = NULL;
    pthread_mutex_destroy(&sv->lock);
    pthread_cond_destroy(&sv->changed);
}

void sfx_log(void *user, int kind, const char *line)
{
    sfx_server *sv = user;
    pthread_mutex_lock(&sv->lock);
    if (sv->line_count < SFX_MAX_LINES) {
        sv->lines[sv->line_count].kind = kind;
        snprintf(sv->lines[sv->line_count++].text, SFX_LINE_MAX, "%s", line);
    }
    sv->is_listening |= kind == AFTP_LOG_LISTENING;
    pthread_cond_broadcast(&sv->changed);
    pthread_mutex_unlock(&sv->lock);
}

static void *run_server(void *arg)
{
    sfx_server *sv = arg;
    sv->run_rc = aftp_server_run(sv->s);
    /* A run that could not start never said it listens: wake the test. */
    sfx_log(sv, AFTP_LOG_LISTENING, "(run returned)");
    return NULL;
}

static int count_locked(const sfx_server *sv, int kind, const char *text)
{
    int n = 0;
    for (int i = 0; i < sv->line_count; i++)
        n += (kind < 0 || sv->lines[i].kind == kind) && strstr(sv->lines[i].text, text) != NULL;
    return n;
}

int sfx_lines_with(sfx_server *sv, int kind, const char *text)
{
    pthread_mutex_lock(&sv->lock);
    int n = count_locked(sv, kind, text);
    pthread_mutex_unlock(&sv->lock);
    return n;
}

int sfx_wait_lines(sfx_server *sv, int kind, const char *text, int count, int guard_s)
{
    struct timespec guard;
    int n, rc = 0;
    clock_gettime(CLOCK_REALTIME, &guard);
    guard.tv_sec += guard_s;
    pthread_mutex_lock(&sv->lock);
    while ((n = count_locked(sv, kind, text)) < count && rc == 0)
        rc = pthread_cond_timedwait(&sv->changed, &sv->lock, &guard);
    pthread_mutex_unlock(&sv->lock);
    return n;
}

const char *sfx_line_of(sfx_server *sv, int kind, int n)
{
    for (int i = 0; i < sv->line_count; i++)
        if (sv->lines[i].kind == kind && n-- == 0)
            return sv->lines[i].text;
    return NULL;
}

void sfx_on_receipt(void *user, const aftp_receipt *r)
{
    sfx_server *sv = user;
    pthread_mutex_lock(&sv->lock);
    if (sv->receipt_count < SFX_MAX_RECEIPTS) {
        sfx_receipt *e = &sv->receipts[sv->receipt_count++];
        *e = (sfx_receipt){.outcome = r->outcome, .pulled = r->pulled,
                           .held_bytes = r->held_bytes,
                           .connected_ns = r->connected_unix_ns, .end_ns = r->end_unix_ns};
        snprintf(e->path, sizeof e->path, "%s", r->path);
    }
    pthread_cond_broadcast(&sv->changed);
    pthread_mutex_unlock(&sv->lock);
}

static int receipt_locked(const sfx_server *sv, const char *path, int n)
{
    for (int i = 0; i < sv->receipt_count; i++)
        if (strcmp(sv->receipts[i].path, path) == 0 && n-- == 0)
            return i;
    return -1;
}

int sfx_receipt_index(sfx_server *sv, const char *path, int n)
{
    pthread_mutex_lock(&sv->lock);
    int at = receipt_locked(sv, path, n);
    pthread_mutex_unlock(&sv->lock);
    return at;
}

int sfx_receipts_for(sfx_server *sv, const char *path)
{
    int n = 0;
    while (sfx_receipt_index(sv, path, n) >= 0)
        n++;
    return n;
}

int sfx_wait_receipt(sfx_server *sv, const char *path, int guard_s)
{
    struct timespec guard;
    int at, rc = 0;
    clock_gettime(CLOCK_REALTIME, &guard);
    guard.tv_sec += guard_s;
    pthread_mutex_lock(&sv->lock);
    while ((at = receipt_locked(sv, path, 0)) < 0 && rc == 0)
        rc = pthread_cond_timedwait(&sv->changed, &sv->lock, &guard);
    pthread_mutex_unlock(&sv->lock);
    return at;
}

unsigned sfx_start(sfx_server *sv, int guard_s)
{
    struct timespec guard;
    int rc = 0;
    sv->is_listening = 0;
    assert_int_equal(pthread_create(&sv->thread, NULL, run_server, sv), 0);
    clock_gettime(CLOCK_REALTIME, &guard);
    guard.tv_sec += guard_s;
    pthread_mutex_lock(&sv->lock);
    while (!sv->is_listening && rc == 0)
        rc = pthread_cond_timedwait(&sv->changed, &sv->lock, &guard);
    pthread_mutex_unlock(&sv->lock);
    assert_int_equal(rc, 0);
    unsigned port = aftp_server_port(sv->s);
    assert_int_not_equal(port, 0);
    return port;
}

void sfx_join(sfx_server *sv, int guard_s)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += guard_s;
    assert_int_equal(pthread_timedjoin_np(sv->thread, NULL, &deadline), 0);
}

void sfx_stop(sfx_server *sv, int guard_s)
{
    aftp_server_stop(sv->s);
    sfx_join(sv, guard_s);
}

void *sfx_setup(size_t size)
{
    int fd;
    sfx_server *sv = calloc(1, size);
    assert_non_null(sv);
    assert_true(sodium_init() >= 0);
    sfx_init(sv);
    sv->top = io_test_mkdtemp(&fd);
    close(fd);
    return sv;
}

int sfx_teardown(void **state)
{
    sfx_server *sv = *state;
    sfx_fini(sv);
    io_test_rmtree(sv->top);
    free(sv->top);
    free(sv);
    return 0;
}

int sfx_one_setup(void **state)
{
    sfx_one *f = sfx_setup(sizeof *f);
    sfx_mkdir(f->dir, sizeof f->dir, f->srv.top, "incoming");
    sfx_key_new(&f->server);
    sfx_key_new(&f->client);
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    sfx_authorize(out, NULL, f->client.public_key, "partner");
    fclose(out);
    *state = f;
    return 0;
}

void sfx_configure(sfx_server *sv, const char *dir, const uint8_t *identity,
                   const char *authorized, uint64_t idle_ms)
{
    aftp_server *s = sv->s;
    assert_int_equal(aftp_server_set_listen(s, "127.0.0.1:0"), AFTP_OK);
    assert_int_equal(aftp_server_set_dir(s, dir), AFTP_OK);
    assert_int_equal(aftp_server_set_identity(s, identity), AFTP_OK);
    assert_int_equal(aftp_server_set_authorized_keys_file(s, authorized), AFTP_OK);
    assert_int_equal(aftp_server_set_idle_timeout_ms(s, idle_ms), AFTP_OK);
    assert_int_equal(aftp_server_set_log_cb(s, sfx_log, sv), AFTP_OK);
}

FILE *sfx_authorized_open(char *path, size_t cap, const char *dir)
{
    snprintf(path, cap, "%s/authorized_keys", dir);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    return out;
}

void sfx_authorize(FILE *out, const char *options, const uint8_t *public_key,
                   const char *comment)
{
    char line[256];
    assert_int_equal(aftp_keyfile_format_public(public_key, comment, line, sizeof line), AFTP_OK);
    fprintf(out, "%s%s%s", options != NULL ? options : "", options != NULL ? " " : "", line);
}

void sfx_key_new(sfx_key *k)
{
    assert_int_equal(aftp_hs_keypair(k->secret, k->public_key), AFTP_OK);
}

void sfx_mkdir(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

void sfx_make_file(const char *path, size_t len, uint32_t seed)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    io_test_write_file(AT_FDCWD, path, len, seed, 0644,
                       (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
}

int sfx_same_file(const char *dir, const char *rel, const char *source)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return io_test_same_file(path, source);
}

aftp_client *sfx_client_new(const uint8_t *identity, const uint8_t *server_public)
{
    aftp_client *c = NULL;
    assert_int_equal(aftp_client_new(&c), AFTP_OK);
    assert_int_equal(aftp_client_set_identity(c, identity), AFTP_OK);
    assert_int_equal(aftp_client_set_peer_key(c, server_public), AFTP_OK);
    return c;
}

void sfx_client_host(char *out, size_t cap, unsigned port)
{
    snprintf(out, cap, "127.0.0.1:%u", port);
}

void sfx_push_init(sfx_push *p, unsigned port, const char *const *files, size_t count,
                   uint64_t rate_bps)
{
    memset(p, 0, sizeof *p);
    p->to = io_test_loopback((uint16_t)port);
    p->o = (aftp_push_opts){.files = files, .file_count = count,
                            .peer = (struct sockaddr *)&p->to, .peer_len = sizeof p->to,
                            .rate_bps = rate_bps, .policy = AFTP_CC_FIXED,
                            .idle_timeout_ns = UINT64_C(5000000000),
                            .security = {.cipher = AFTP_CIPHER_NONE}};
}

void sfx_push_keys(sfx_push *p, const uint8_t *identity, const uint8_t *server_public)
{
    p->o.security.cipher = AFTP_CIPHER_AUTO;
    p->o.security.identity = identity;
    p->o.security.peer_key = server_public;
}

int sfx_push_run(sfx_push *p, aftp_push_result *res)
{
    p->o.peer = (struct sockaddr *)&p->to; /* the struct may have moved since init */
    return aftp_push_run(&p->o, res);
}
