/* The server API (include/aftp/aftp_server.h) over the serve driver
 * (io/aftp_serve.h): settings, keys, admission per client key, receipts
 * and the operator's log lines. */
#include "aftp/aftp_server.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "door/aftp_admit.h"
#include "aftp_drive.h"
#include "aftp_handle.h"
#include "aftp_hub.h"
#include "aftp_journal.h"
#include "aftp_meter.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "aftp_serve.h"
#include "aftp_server_run.h"
#include "aftp_store.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"
#include "common/aftp_addrmatch.h"
#include "aftp_wallclock.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"

#define SERVER_DEFAULT_IDLE_NS UINT64_C(30000000000)
#define SERVER_ERRMSG_MAX 512u
#define SERVER_PATH_MAX 4096u
#define SERVER_TERMS 3 /* the strings of aftp_server_terms */

/* How the library names what its messages point to, unless the
 * application chose its own terms. */
enum { TERM_DIR, TERM_IDLE, TERM_PSK_DIFFERS };
static const char *const default_terms[SERVER_TERMS] = {
    "the server's directory", "the idle timeout", "the pre-shared keys differ"};

/* Secrets live in guarded, locked memory (never swapped, wiped when freed). */
typedef struct server_secrets {
    uint8_t identity[AFTP_KEY_LEN];
    uint8_t psk[AFTP_KEY_LEN];
    int have_identity, have_psk;
} server_secrets;

/* The client of a session being served. */
typedef struct server_client {
    struct sockaddr_storage addr;
    uint8_t key[AFTP_KEY_LEN];
    int have_key;
    /* its authorized keys line's comment, or "": a copy, since a reload
     * frees the list while its session goes on */
    char comment[AFTP_KEYFILE_MAX_LINE + 1];
    char root[SERVER_PATH_MAX];     /* its files land beneath */
    unsigned access;                /* AFTP_ACCESS_* it was admitted with: a push
                                     * needed WRITE (check_push); the pull side checks
                                     * READ here once the server serves pulls */
    char refusal[SERVER_ERRMSG_MAX]; /* why this server refused it, or "" */
    int64_t connected_ns;           /* the handshake completed */
    char file[SERVER_PATH_MAX * 4]; /* the file under way, printable */
    int receiving;                  /* a file is under way: its meter runs */
    int pulled;                     /* the session is a pull: the client fetches */
    aftp_meter meter;
} server_client;

/* What the run keeps of each session (aftp_serve_opts.session_open): the
 * `app` of its callbacks. */
typedef struct server_session {
    aftp_server *s;
    server_client client;
    /* When each file under way had its offer accepted (wall clock), by
     * entry id modulo the window: the entries in flight span at most the
     * window, so no two share a slot. One slot in one-file mode. */
    int64_t *file_starts;
    uint32_t file_slots;
    uint64_t number; /* aftp_progress.session */
} server_session;

struct aftp_admission {
    char root[SERVER_PATH_MAX];
    int have_root;
    uint64_t rate_cap_bps; /* 0: none */
    unsigned access;       /* AFTP_ACCESS_* bits */
    int root_from_key;     /* the root is the key's root= (the callback kept it) */
};

/* The authorized keys' access bits are the API's. */
_Static_assert(AFTP_ACCESS_READ == AFTP_KEYFILE_ACCESS_READ &&
                   AFTP_ACCESS_WRITE == AFTP_KEYFILE_ACCESS_WRITE,
               "one meaning for the access bits");

struct aftp_server {
    struct sockaddr_storage listen;
    socklen_t listen_len;
    char dir[SERVER_PATH_MAX];
    int overwrite;
    int once;
    int cipher;
    unsigned mtu;
    uint64_t idle_timeout_ns;
    aftp_place_options place;   /* links, mode mask */
    uint64_t partial_max_age_s;
    uint32_t pipeline_window;
    server_secrets *secrets;
    char authorized_path[SERVER_PATH_MAX];
    aftp_keyfile_list authorized;
    aftp_admit_cb admit_cb;
    void *admit_user;
    aftp_receipt_cb receipt_cb;
    void *receipt_user;
    aftp_receipt_cb entry_cb;
    void *entry_user;
    aftp_progress_cb progress_cb;
    void *progress_user;
    aftp_log_cb log_cb;
    void *log_user;
    char terms[SERVER_TERMS][AFTP_SERVER_TERM_MAX]; /* aftp_server_set_terms, in its
                                                     * fields' order */
    unsigned max_sessions;
    uint64_t total_rate_bps;    /* aftp_server_set_rate_cap, 0: none */
    unsigned workers;           /* 0: one per online CPU */
    uint64_t drain_timeout_ms;
    atomic_int stop;            /* any thread, signal handlers (lock-free) */
    atomic_int reload;          /* aftp_server_reload: the control tick reads the keys again */
    atomic_int drain;           /* likewise */
    unsigned port;              /* atomically: aftp_server_port from any thread */
    aftp_admit admit;           /* the run's policy */
    int session_error;          /* the failed session's aftp_error, for its log line */
    uint64_t sessions_opened;   /* the latest session's number (session_open, on the loop) */
    char errmsg[SERVER_ERRMSG_MAX];
};

__attribute__((format(printf, 3, 4))) static int fail(aftp_server *s, int rc, const char *fmt,
                                                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    return rc;
}

static int succeed(aftp_server *s)
{
    s->errmsg[0] = '\0';
    return AFTP_OK;
}

static void say(const aftp_server *s, int kind, const char *line)
{
    if (s->log_cb != NULL)
        s->log_cb(s->log_user, kind, line);
}

int aftp_server_new(aftp_server **out)
{
    if (out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    void *handle, *secrets;
    int rc = aftp_handle_alloc(sizeof(aftp_server), &handle, sizeof(server_secrets), &secrets);
    *out = NULL;
    if (rc != AFTP_OK)
        return rc;
    aftp_server *s = handle;
    s->secrets = secrets;
    s->cipher = AFTP_CIPHER_AUTO;
    s->mtu = AFTP_IO_MAX_MTU;
    s->idle_timeout_ns = SERVER_DEFAULT_IDLE_NS;
    aftp_place_defaults(&s->place);
    s->place.links = 1; /* a client sends links only when its user asked */
    s->place.mode_mask = AFTP_SERVER_MODE_MASK_DEFAULT;
    s->partial_max_age_s = AFTP_SERVER_PARTIAL_MAX_AGE_DEFAULT_S;
    s->pipeline_window = AFTP_SERVER_PIPELINE_WINDOW;
    s->max_sessions = AFTP_SERVER_MAX_SESSIONS_DEFAULT;
    s->drain_timeout_ms = AFTP_SERVER_DRAIN_TIMEOUT_DEFAULT_MS;
    snprintf(s->dir, sizeof s->dir, ".");
    aftp_server_set_terms(s, NULL);
    *out = s;
    return AFTP_OK;
}

void aftp_server_del(aftp_server *s)
{
    if (s == NULL)
        return;
    sodium_free(s->secrets);
    aftp_keyfile_list_free(&s->authorized);
    free(s);
}

int aftp_server_set_listen(aftp_server *s, const char *addr_port)
{
    if (addr_port == NULL || aftp_parse_addr(addr_port, 1, &s->listen, &s->listen_len) != AFTP_OK)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "bad listen address '%s' ([ADDR:]PORT or [V6ADDR]:PORT, port 0-65535)",
                    addr_port != NULL ? addr_port : "(null)");
    return succeed(s);
}

/* A path setting, copied when it fits. */
static int copy_path(aftp_server *s, const char *what, const char *path, char *to, size_t cap)
{
    if (path == NULL || path[0] == '\0' || strlen(path) >= cap)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "%s: a path of 1 to %zu bytes is needed", what,
                    cap - 1);
    memcpy(to, path, strlen(path) + 1);
    return succeed(s);
}

/* A directory files can be created in, else why not, with the path, the
 * reason and the setting that names it. */
static int check_dir(aftp_server *s, const char *path)
{
    char why[SERVER_ERRMSG_MAX];
    int dirfd = -1;
    if (strcmp(path, AFTP_SERVER_FAUX_DIR) == 0)
        return succeed(s);
    int rc = aftp_store_open_dir(path, s->terms[TERM_DIR], &dirfd, why, sizeof why);
    if (dirfd >= 0)
        close(dirfd);
    return rc == AFTP_OK ? succeed(s) : fail(s, rc, "%s", why);
}

int aftp_server_set_dir(aftp_server *s, const char *path)
{
    char copy[SERVER_PATH_MAX];
    int rc = copy_path(s, "directory", path, copy, sizeof copy);
    if (rc == AFTP_OK && (rc = check_dir(s, copy)) == AFTP_OK)
        memcpy(s->dir, copy, sizeof copy);
    return rc;
}

int aftp_server_set_overwrite(aftp_server *s, int allow)
{
    s->overwrite = allow != 0;
    return succeed(s);
}

int aftp_server_set_once(aftp_server *s, int once)
{
    s->once = once != 0;
    return succeed(s);
}

/* The dir keeps nothing (AFTP_SERVER_FAUX_DIR). */
static int keeps_nothing(const aftp_server *s)
{
    return strcmp(s->dir, AFTP_SERVER_FAUX_DIR) == 0;
}

int aftp_server_set_identity_file(aftp_server *s, const char *path)
{
    char err[SERVER_ERRMSG_MAX - 32];
    uint8_t secret[AFTP_KEY_LEN];
    if (path == NULL)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "identity key: no file given");
    int rc = aftp_keyfile_read_private(path, secret, err, sizeof err);
    if (rc == AFTP_OK)
        rc = aftp_server_set_identity(s, secret);
    else
        fail(s, rc, "identity key: %s", err);
    sodium_memzero(secret, sizeof secret);
    return rc;
}

int aftp_server_set_identity(aftp_server *s, const uint8_t secret[AFTP_KEY_LEN])
{
    uint8_t public_key[AFTP_KEY_LEN];
    if (secret == NULL || aftp_hs_public_key(secret, public_key) != AFTP_OK)
        return fail(s, AFTP_ERR_BAD_KEY, "identity key: not a valid X25519 private key");
    memcpy(s->secrets->identity, secret, AFTP_KEY_LEN);
    s->secrets->have_identity = 1;
    return succeed(s);
}

/* The authorized keys of path into *list, at least one; else why not
 * into why (a file that admits nobody is a mistake, never a policy). */
static int load_authorized(const char *path, aftp_keyfile_list *list, char *why, size_t cap)
{
    int rc = aftp_keyfile_authorized_load(path, list, why, cap);
    if (rc != AFTP_OK)
        return rc;
    if (list->count > 0)
        return AFTP_OK;
    aftp_keyfile_list_free(list);
    snprintf(why, cap, "no key in the file: it admits nobody");
    return AFTP_ERR_BAD_KEY;
}

int aftp_server_set_authorized_keys_file(aftp_server *s, const char *path)
{
    char err[SERVER_ERRMSG_MAX - 32];
    aftp_keyfile_list list;
    int rc = copy_path(s, "authorized keys", path, s->authorized_path, sizeof s->authorized_path);
    if (rc != AFTP_OK)
        return rc;
    rc = load_authorized(path, &list, err, sizeof err);
    if (rc != AFTP_OK)
        return fail(s, rc, "authorized keys: %s", err);
    aftp_keyfile_list_free(&s->authorized);
    s->authorized = list;
    return succeed(s);
}

int aftp_server_set_psk_file(aftp_server *s, const char *path)
{
    char err[SERVER_ERRMSG_MAX - 32];
    if (path == NULL)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "pre-shared key: no file given");
    int rc = aftp_keyfile_read_private(path, s->secrets->psk, err, sizeof err);
    if (rc != AFTP_OK) {
        s->secrets->have_psk = 0;
        sodium_memzero(s->secrets->psk, sizeof s->secrets->psk);
        return fail(s, rc, "pre-shared key: %s", err);
    }
    s->secrets->have_psk = 1;
    return succeed(s);
}

int aftp_server_set_cipher(aftp_server *s, int cipher)
{
    if (cipher < AFTP_CIPHER_AUTO || cipher > AFTP_CIPHER_NONE)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "cipher %d is none of enum aftp_cipher_choice",
                    cipher);
    s->cipher = cipher;
    return succeed(s);
}

int aftp_server_set_mtu(aftp_server *s, unsigned mtu)
{
    if (mtu < AFTP_IO_MIN_MTU || mtu > AFTP_IO_MAX_MTU)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "MTU %u is outside %u to %u bytes", mtu,
                    AFTP_IO_MIN_MTU, AFTP_IO_MAX_MTU);
    s->mtu = mtu;
    return succeed(s);
}

int aftp_server_set_idle_timeout_ms(aftp_server *s, uint64_t ms)
{
    if (ms > UINT64_MAX / 1000000u)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "idle timeout %llu ms is too long",
                    (unsigned long long)ms);
    s->idle_timeout_ns = ms ? ms * 1000000u : SERVER_DEFAULT_IDLE_NS;
    return succeed(s);
}

int aftp_server_set_links(aftp_server *s, int allow)
{
    s->place.links = allow != 0;
    return succeed(s);
}

int aftp_server_set_mode_mask(aftp_server *s, uint32_t mask)
{
    if (mask > 07777u)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "mode mask %#o has bits beyond the permission bits (0 to 07777)", mask);
    s->place.mode_mask = mask;
    return succeed(s);
}

int aftp_server_set_partial_max_age_s(aftp_server *s, uint64_t seconds)
{
    if (seconds == 0 || seconds > AFTP_SERVER_PARTIAL_MAX_AGE_MAX_S)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "resume state age %" PRIu64 " s is outside 1 to %" PRIu64 " s (100 years)",
                    seconds, AFTP_SERVER_PARTIAL_MAX_AGE_MAX_S);
    s->partial_max_age_s = seconds;
    return succeed(s);
}

int aftp_server_set_pipeline_window(aftp_server *s, uint32_t window)
{
    if (window > AFTP_SERVER_PIPELINE_WINDOW_MAX)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "pipeline window %" PRIu32 " entries is above the most, %u (0 turns "
                    "pipelined mode off)", window, AFTP_SERVER_PIPELINE_WINDOW_MAX);
    s->pipeline_window = window;
    return succeed(s);
}

int aftp_server_set_admit_cb(aftp_server *s, aftp_admit_cb cb, void *user)
{
    s->admit_cb = cb;
    s->admit_user = user;
    return succeed(s);
}

int aftp_server_set_receipt_cb(aftp_server *s, aftp_receipt_cb cb, void *user)
{
    s->receipt_cb = cb;
    s->receipt_user = user;
    return succeed(s);
}

int aftp_server_set_entry_cb(aftp_server *s, aftp_receipt_cb cb, void *user)
{
    s->entry_cb = cb;
    s->entry_user = user;
    return succeed(s);
}

int aftp_server_set_progress_cb(aftp_server *s, aftp_progress_cb cb, void *user)
{
    s->progress_cb = cb;
    s->progress_user = user;
    return succeed(s);
}

int aftp_server_set_log_cb(aftp_server *s, aftp_log_cb cb, void *user)
{
    s->log_cb = cb;
    s->log_user = user;
    return succeed(s);
}

/* A field of the caller's terms, else the default: a struct too old to
 * have the field has not set it. */
static const char *term_given(const aftp_server_terms *t, size_t end, const char *field, int i)
{
    return t != NULL && t->size >= end && field != NULL ? field : default_terms[i];
}
#define TERM_END(f) (offsetof(aftp_server_terms, f) + sizeof(const char *))

int aftp_server_set_terms(aftp_server *s, const aftp_server_terms *terms)
{
    if (terms != NULL && terms->size < sizeof terms->size)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "terms: size %zu is below that of its first "
                    "field", terms->size);
    const char *given[SERVER_TERMS] = {
        term_given(terms, TERM_END(dir_setting), terms ? terms->dir_setting : NULL, TERM_DIR),
        term_given(terms, TERM_END(idle_setting), terms ? terms->idle_setting : NULL, TERM_IDLE),
        term_given(terms, TERM_END(psk_differs), terms ? terms->psk_differs : NULL,
                   TERM_PSK_DIFFERS)};
    for (int i = 0; i < SERVER_TERMS; i++)
        if (strlen(given[i]) >= AFTP_SERVER_TERM_MAX)
            return fail(s, AFTP_ERR_INVALID_ARGUMENT, "terms: '%s' is longer than %u bytes",
                        given[i], AFTP_SERVER_TERM_MAX - 1);
    for (int i = 0; i < SERVER_TERMS; i++)
        memcpy(s->terms[i], given[i], strlen(given[i]) + 1);
    return succeed(s);
}

unsigned aftp_server_port(const aftp_server *s)
{
    return __atomic_load_n(&s->port, __ATOMIC_ACQUIRE);
}

void aftp_server_stop(aftp_server *s)
{
    /* A lock-free store: safe from another thread and in a signal handler. */
    atomic_store(&s->stop, 1);
}

void aftp_server_reload(aftp_server *s)
{
    /* As aftp_server_stop: a lock-free store, which the run's control
     * tick takes up (on_control_tick). */
    atomic_store(&s->reload, 1);
}

void aftp_server_drain(aftp_server *s)
{
    atomic_store(&s->drain, 1); /* as aftp_server_stop */
}

int aftp_server_set_max_sessions(aftp_server *s, unsigned n)
{
    if (n < 1 || n > AFTP_SERVER_MAX_SESSIONS_MAX)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "max sessions: %u is outside 1 to %u", n, AFTP_SERVER_MAX_SESSIONS_MAX);
    s->max_sessions = n;
    return succeed(s);
}

int aftp_server_set_rate_cap(aftp_server *s, uint64_t bits_per_s)
{
    s->total_rate_bps = bits_per_s;
    return succeed(s);
}

int aftp_server_set_workers(aftp_server *s, unsigned n)
{
    if (n > AFTP_SERVER_WORKERS_MAX)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "workers: %u is more than %u", n,
                    AFTP_SERVER_WORKERS_MAX);
    s->workers = n;
    return succeed(s);
}

int aftp_server_set_drain_timeout_ms(aftp_server *s, uint64_t ms)
{
    if (ms > AFTP_SERVER_DRAIN_TIMEOUT_MAX_MS)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "drain timeout: %" PRIu64 " ms is more than %" PRIu64 " ms", ms,
                    (uint64_t)AFTP_SERVER_DRAIN_TIMEOUT_MAX_MS);
    s->drain_timeout_ms = ms;
    return succeed(s);
}

const char *aftp_server_errmsg(const aftp_server *s)
{
    return s->errmsg;
}

int aftp_server_session_error(const aftp_server *s)
{
    return s != NULL ? s->session_error : AFTP_OK;
}

int aftp_server_format_peer(const aftp_peer *peer, char *out, size_t cap)
{
    if (peer == NULL || peer->addr == NULL || out == NULL || cap == 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_serve_describe_client(peer->addr, peer->key, peer->comment, out, cap);
    return AFTP_OK;
}

int aftp_admission_set_root(aftp_admission *a, const char *root)
{
    if (root == NULL || root[0] == '\0' || strlen(root) >= sizeof a->root)
        return AFTP_ERR_INVALID_ARGUMENT;
    memcpy(a->root, root, strlen(root) + 1);
    a->have_root = 1;
    a->root_from_key = 0;
    return AFTP_OK;
}

int aftp_admission_set_rate_cap(aftp_admission *a, uint64_t bits_per_s)
{
    if (a == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    a->rate_cap_bps = bits_per_s;
    return AFTP_OK;
}

int aftp_admission_set_access(aftp_admission *a, unsigned access)
{
    if (a == NULL || access == 0 || (access & ~(AFTP_ACCESS_READ | AFTP_ACCESS_WRITE)) != 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    a->access = access;
    return AFTP_OK;
}

const char *aftp_admission_root(const aftp_admission *a)
{
    return a != NULL && a->have_root ? a->root : NULL;
}

uint64_t aftp_admission_rate_cap(const aftp_admission *a)
{
    return a != NULL ? a->rate_cap_bps : 0;
}

unsigned aftp_admission_access(const aftp_admission *a)
{
    return a != NULL ? a->access : 0;
}

/* ---- the run ---- */

static socklen_t sockaddr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static aftp_peer client_peer(const server_client *c)
{
    aftp_peer p = {.addr = (const struct sockaddr *)&c->addr,
                   .addr_len = sockaddr_len((const struct sockaddr *)&c->addr),
                   .key = c->have_key ? c->key : NULL, .comment = c->comment};
    return p;
}

/* A new session's client, into the server's dir until admitted elsewhere. */
static void begin_client(server_session *ss, const struct sockaddr *from, const uint8_t *key)
{
    const aftp_server *s = ss->s;
    server_client *c = &ss->client;
    const char *comment = key != NULL ? aftp_keyfile_list_comment(&s->authorized, key) : NULL;
    memset(c, 0, sizeof *c);
    memcpy(&c->addr, from, sockaddr_len(from));
    c->have_key = key != NULL;
    if (key != NULL)
        memcpy(c->key, key, AFTP_KEY_LEN);
    snprintf(c->comment, sizeof c->comment, "%s", comment != NULL ? comment : "");
    snprintf(c->root, sizeof c->root, "%s", s->dir);
}

/* Refuses the client being admitted with code; why (printf) goes to its
 * log line. */
__attribute__((format(printf, 3, 4))) static int refuse_client(server_session *ss, int code,
                                                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ss->client.refusal, sizeof ss->client.refusal, fmt, ap);
    va_end(ap);
    return code;
}

/* Where the key's authorized-keys line is, for the log: "FILE:LINE", or
 * "OPTION in FILE:LINE" (option not ""). */
static void key_line(const aftp_server *s, const aftp_keyfile_options *opts, const char *option,
                     char *out, size_t cap)
{
    snprintf(out, cap, "%s%s%s:%u", option, option[0] ? " in " : "", s->authorized_path,
             opts->line);
}

/* The decision as the key's authorized-keys options make it (opts NULL:
 * the defaults): a relative root= lies beneath the server's dir. */
static int prefill_decision(server_session *ss, const aftp_keyfile_options *opts,
                            aftp_admission *d)
{
    const aftp_server *s = ss->s;
    char where[SERVER_PATH_MAX + 16];
    *d = (aftp_admission){.access = AFTP_ACCESS_READ | AFTP_ACCESS_WRITE};
    if (opts == NULL)
        return AFTP_OK;
    d->rate_cap_bps = opts->rate_bps;
    d->access = opts->access;
    if (opts->root == NULL)
        return AFTP_OK;
    int relative = opts->root[0] != '/' && !keeps_nothing(s);
    int n = snprintf(d->root, sizeof d->root, "%s%s%s", relative ? s->dir : "",
                     relative ? "/" : "", opts->root);
    d->have_root = d->root_from_key = 1;
    if (n >= 0 && (size_t)n < sizeof d->root)
        return AFTP_OK;
    key_line(s, opts, "root=", where, sizeof where);
    return refuse_client(ss, AFTP_ERR_UNKNOWN_PEER,
                         "its root (%s) beneath the server's dir is %d bytes, more "
                         "than the %u a path may have", where, n, SERVER_PATH_MAX - 1);
}

/* from=: the client's address must lie in one of the key's prefixes. */
static int check_from(server_session *ss, const aftp_keyfile_options *opts,
                      const struct sockaddr *from)
{
    const aftp_server *s = ss->s;
    char fingerprint[AFTP_KEYFILE_FINGERPRINT_MAX], addr[64], where[SERVER_PATH_MAX + 16];
    if (opts == NULL || opts->from_count == 0 ||
        aftp_addrmatch_any(opts->from, opts->from_count, from))
        return AFTP_OK;
    aftp_keyfile_fingerprint(ss->client.key, fingerprint, sizeof fingerprint);
    aftp_format_addr(from, addr, sizeof addr);
    key_line(s, opts, "", where, sizeof where);
    return refuse_client(ss, AFTP_ERR_UNKNOWN_PEER,
                         "key %s is limited to from=\"%s\" (%s); client came from %s",
                         fingerprint, opts->from_text, where, addr);
}

/* The application's callback, which may change the pre-filled decision. */
static int ask_callback(server_session *ss, aftp_admission *d)
{
    const aftp_server *s = ss->s;
    if (s->admit_cb == NULL)
        return AFTP_OK;
    aftp_peer peer = client_peer(&ss->client);
    int rc = s->admit_cb(s->admit_user, &peer, d);
    return rc == AFTP_OK ? AFTP_OK
                         : refuse_client(ss, AFTP_ERR_UNKNOWN_PEER,
                                         "the admission callback refused it (%s)",
                                         aftp_strerror(rc));
}

/* The serve driver's role hook, after admit_client: a push needs
 * AFTP_ACCESS_WRITE, a pull AFTP_ACCESS_READ; a refusal is
 * AFTP_ERR_PERMISSION (its client is told so), naming what decided. */
static int check_role(void *app, int role)
{
    server_session *ss = app;
    const aftp_server *s = ss->s;
    int pull = role == AFTP_ROLE_PULL;
    ss->client.pulled = pull;
    unsigned needed = pull ? AFTP_ACCESS_READ : AFTP_ACCESS_WRITE;
    if (ss->client.access & needed)
        return AFTP_OK;
    const aftp_keyfile_options *opts =
        ss->client.have_key ? aftp_keyfile_list_options(&s->authorized, ss->client.key) : NULL;
    char where[SERVER_PATH_MAX + 32] = "the admission callback's decision";
    if (opts != NULL && opts->access == ss->client.access)
        key_line(s, opts, pull ? "write-only" : "read-only", where, sizeof where);
    return refuse_client(ss, AFTP_ERR_PERMISSION,
                         "its key may only %s (%s) and it asked to %s: it was told so",
                         pull ? "push" : "pull", where, pull ? "pull" : "push");
}

/* The decision's root, opened for the session (none: the server's dir);
 * one that cannot be used names what chose it. */
static int open_root(server_session *ss, const aftp_keyfile_options *opts, const aftp_admission *d,
                     int *rootfd)
{
    const aftp_server *s = ss->s;
    char why[SERVER_ERRMSG_MAX], setting[SERVER_PATH_MAX + 32] = "the admission's root";
    if (!d->have_root)
        return AFTP_OK;
    if (d->root_from_key)
        key_line(s, opts, "root=", setting, sizeof setting);
    if (aftp_store_open_dir(d->root, setting, rootfd, why, sizeof why) != AFTP_OK)
        return refuse_client(ss, AFTP_ERR_UNKNOWN_PEER, "%s", why);
    if (!keeps_nothing(s)) /* the receipt names where the file really is */
        snprintf(ss->client.root, sizeof ss->client.root, "%s", d->root);
    return AFTP_OK;
}

/* The serve driver's admission hook: the key's options pre-fill the
 * decision, from= is checked, the application's callback decides, and
 * the root is opened for the session (check_role then looks at the
 * access). A refusal is AFTP_ERR_UNKNOWN_PEER (the client is told it is
 * not authorized). */
static int admit_client(void *app, const struct sockaddr *from, const uint8_t *key, int *rootfd,
                        uint64_t *rate_cap_bps)
{
    server_session *ss = app;
    aftp_server *s = ss->s;
    const aftp_keyfile_options *opts =
        key != NULL ? aftp_keyfile_list_options(&s->authorized, key) : NULL;
    aftp_admission decision;
    begin_client(ss, from, key);
    int rc = prefill_decision(ss, opts, &decision);
    if (rc == AFTP_OK)
        rc = check_from(ss, opts, from);
    if (rc == AFTP_OK)
        rc = ask_callback(ss, &decision);
    if (rc == AFTP_OK)
        rc = open_root(ss, opts, &decision, rootfd);
    if (rc != AFTP_OK)
        return rc;
    *rate_cap_bps = decision.rate_cap_bps;
    ss->client.access = decision.access;
    return AFTP_OK;
}

/* The receipt's slot of the wall-clock time entry `id` was accepted. */
static int64_t *file_start(const server_session *ss, uint32_t id)
{
    return &ss->file_starts[id % ss->file_slots];
}

/* What a receipt or an entry report says of an entry; r's other fields
 * (outcome, kind, digest, start, held bytes, target) are the caller's. */
static void hand_report(const server_session *ss, aftp_receipt *r, const aftp_file_info *info,
                        const aftp_stats *st, aftp_receipt_cb cb, void *user)
{
    aftp_peer peer = client_peer(&ss->client);
    char printable[SERVER_PATH_MAX * 4];
    aftp_path_printable(info->path, printable, sizeof printable);
    r->path = info->path;
    r->printable_path = printable;
    r->root = ss->client.root;
    r->client = &peer;
    r->end_unix_ns = (int64_t)aftp_wallclock_now_ns();
    r->cipher = aftp_session_cipher_choice(st->cipher);
    r->connected_unix_ns = ss->client.connected_ns;
    r->packets_received = st->packets_received;
    r->duplicate_packets = st->duplicate_packets;
    r->rate_cap_bps = st->rate_cap_bps;
    r->pulled = ss->client.pulled;
    r->retransmitted = ss->client.pulled && st->payload_bytes_sent
                           ? (double)st->payload_bytes_retransmitted / (double)st->payload_bytes_sent
                           : 0;
    cb(user, r);
}

/* A file committed: sent whole, or resumed from the blocks it held. */
static void hand_receipt(const server_session *ss, const aftp_event *ev, const aftp_stats *st)
{
    const aftp_server *s = ss->s;
    int resumed = ev->verdict == AFTP_VERDICT_RESUME;
    aftp_receipt r = {.size = ev->info->size, .kind = AFTP_ENTRY_FILE,
                      .start_unix_ns = *file_start(ss, ev->info->file_id),
                      .outcome = resumed ? AFTP_OUTCOME_RESUMED : AFTP_OUTCOME_SENT,
                      .held_bytes = resumed ? ev->held_bytes : 0};
    memcpy(r.digest, ev->digest, AFTP_DIGEST_LEN);
    hand_report(ss, &r, ev->info, st, s->receipt_cb, s->receipt_user);
}

/* The serve driver's report of a decided entry: a skipped file, a placed
 * directory or link go to the entry callback (a file sent or resumed
 * gets its receipt once committed; a refused entry is its client's). */
static void on_entry(void *app, const aftp_entry_info *info, const aftp_entry_verdict *v,
                     const aftp_stats *st)
{
    const server_session *ss = app;
    const aftp_server *s = ss->s;
    int skipped = info->kind == AFTP_ENTRY_FILE && v->verdict == AFTP_VERDICT_SKIP;
    int placed = info->kind != AFTP_ENTRY_FILE && v->verdict == AFTP_VERDICT_SEND;
    if (s->entry_cb == NULL || (!skipped && !placed))
        return;
    aftp_receipt r = {.size = info->file.size, .kind = info->kind,
                      .start_unix_ns = (int64_t)aftp_wallclock_now_ns(),
                      .outcome = skipped ? AFTP_OUTCOME_SKIPPED : AFTP_OUTCOME_PLACED,
                      .target = info->target};
    hand_report(ss, &r, &info->file, st, s->entry_cb, s->entry_user);
}

static void start_file(server_session *ss, const aftp_event *ev, const aftp_stats *st)
{
    server_client *c = &ss->client;
    *file_start(ss, ev->info->file_id) = (int64_t)aftp_wallclock_now_ns();
    aftp_path_printable(ev->info->path, c->file, sizeof c->file);
    aftp_meter_start(&c->meter, ev->info->size, st->payload_bytes_received, aftp_drive_now_ns());
    c->receiving = 1;
}

/* The operator sees which client is served under a cap, and which. */
static void say_rate_cap(const server_session *ss, uint64_t rate_cap_bps)
{
    char client[AFTP_SERVER_PEER_TEXT_MAX], line[AFTP_SERVER_PEER_TEXT_MAX + 128];
    aftp_peer peer = client_peer(&ss->client);
    aftp_serve_describe_client(peer.addr, peer.key, peer.comment, client, sizeof client);
    snprintf(line, sizeof line,
             "client %s is served with a rate cap of %" PRIu64 " bit/s (%.1f Mbit/s): its "
             "sender paces under it",
             client, rate_cap_bps, (double)rate_cap_bps / 1e6);
    say(ss->s, AFTP_LOG_RATE_CAP, line);
}

/* Who a session's client is, as the log lines name it. */
static void describe(const server_session *ss, const struct sockaddr *addr, const uint8_t *key,
                     char *out, size_t cap)
{
    const char *comment = key != NULL ? aftp_keyfile_list_comment(&ss->s->authorized, key) : NULL;
    aftp_serve_describe_client(addr, key, comment, out, cap);
}

static void session_started(server_session *ss)
{
    char client[AFTP_SERVER_PEER_TEXT_MAX], line[AFTP_SERVER_PEER_TEXT_MAX + SERVER_PATH_MAX + 256];
    const server_client *c = &ss->client;
    ss->client.connected_ns = (int64_t)aftp_wallclock_now_ns();
    describe(ss, (const struct sockaddr *)&c->addr, c->have_key ? c->key : NULL, client,
             sizeof client);
    snprintf(line, sizeof line, "session started: client %s, root %s", client,
             c->root[0] ? c->root : ss->s->dir);
    say(ss->s, AFTP_LOG_SESSION_STARTED, line);
}

static void on_session_event(void *app, const aftp_event *ev, const aftp_stats *st)
{
    server_session *ss = app;
    const aftp_server *s = ss->s;
    if (ev->type == AFTP_EV_CONNECTED && st->rate_cap_bps != 0)
        say_rate_cap(ss, st->rate_cap_bps);
    if (ev->type == AFTP_EV_CONNECTED)
        session_started(ss);
    else if (ev->type == AFTP_EV_FILE_START)
        start_file(ss, ev, st);
    else if (ev->type == AFTP_EV_FILE_END)
        ss->client.receiving = 0;
    if (ev->type == AFTP_EV_FILE_END && ev->error == AFTP_OK && ev->digest != NULL &&
        s->receipt_cb != NULL)
        hand_receipt(ss, ev, st);
}

/* The progress figures of the file under way (aftp_meter.h). */
static void on_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    server_session *ss = app;
    const aftp_server *s = ss->s;
    aftp_meter_reading m;
    aftp_progress p;
    if (s->progress_cb == NULL || !ss->client.receiving ||
        !aftp_meter_read(&ss->client.meter, st->payload_bytes_received, now_ns, &m))
        return;
    aftp_meter_progress(&ss->client.meter, &m, st, ss->client.file, &p);
    p.session = ss->number;
    s->progress_cb(s->progress_user, &p);
}

/* The operator sees the total cap in force, and how it is shared. */
static void say_total_rate_cap(aftp_server *s)
{
    char line[256];
    if (s->total_rate_bps == 0)
        return;
    snprintf(line, sizeof line,
             "total rate cap %" PRIu64 " bit/s (%.1f Mbit/s), shared fairly between the "
             "sessions: each push client paces under its share",
             s->total_rate_bps, (double)s->total_rate_bps / 1e6);
    say(s, AFTP_LOG_RATE_CAP, line);
}

static void on_listening(void *app, const struct sockaddr *local)
{
    aftp_server *s = app;
    char where[64], line[96];
    const struct sockaddr_in *v4 = (const void *)local;
    const struct sockaddr_in6 *v6 = (const void *)local;
    unsigned port = ntohs(local->sa_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
    __atomic_store_n(&s->port, port, __ATOMIC_RELEASE);
    aftp_format_addr(local, where, sizeof where);
    snprintf(line, sizeof line, "listening on %s", where);
    say(s, AFTP_LOG_LISTENING, line);
    say_total_rate_cap(s);
}

static void on_warning(void *app, const char *text)
{
    say(app, AFTP_LOG_WARNING, text);
}

/* Why a client's key was refused: this server's own reason (the admission
 * callback, a root that cannot be used), else the authorized keys'. */
static void refusal_reason(const server_session *ss, char *out, size_t cap)
{
    const aftp_server *s = ss->s;
    if (ss->client.refusal[0] != '\0')
        snprintf(out, cap, "%s", ss->client.refusal);
    else
        aftp_admit_explain_unknown(&s->admit, s->authorized_path, out, cap);
}

/* The comment of a client's key: the session's copy for its own client
 * (a reload may have removed its line since), else the list's. */
static const char *key_comment(const server_session *ss, const uint8_t *key)
{
    if (ss->client.have_key && memcmp(key, ss->client.key, AFTP_KEY_LEN) == 0)
        return ss->client.comment;
    return aftp_keyfile_list_comment(&ss->s->authorized, key);
}

/* The key a session's client proved, or NULL (a key the authorized keys
 * refused is named in the reason instead). */
static const uint8_t *session_key(const server_session *ss, const aftp_io_result *res)
{
    if (res->have_peer_key)
        return res->peer_key;
    return ss->client.have_key ? ss->client.key : NULL;
}

/* The operator's line for a session that failed. */
static void explain_failure(const server_session *ss, const aftp_io_result *res,
                            const struct sockaddr *peer, char *line, size_t cap)
{
    const aftp_server *s = ss->s;
    char client[512], reason[SERVER_PATH_MAX + 256];
    const uint8_t *key = session_key(ss, res);
    aftp_serve_describe_client(peer, key, key != NULL ? key_comment(ss, key) : NULL, client,
                               sizeof client);
    if (key == NULL && res->connected) /* a session without keys: anyone could be it */
        snprintf(client + strlen(client), sizeof client - strlen(client), " (unauthenticated)");
    refusal_reason(ss, reason, sizeof reason);
    aftp_serve_explain_failure(res, client, res->connected ? NULL : reason,
                               (double)s->idle_timeout_ns / 1e9, s->terms[TERM_IDLE], line, cap);
}

/* One line per session that got past its handshake: who, where, what
 * arrived, how long, how it ended. */
static void session_ended(const server_session *ss, const aftp_io_result *res,
                          const struct sockaddr *peer)
{
    char client[AFTP_SERVER_PEER_TEXT_MAX], line[AFTP_SERVER_PEER_TEXT_MAX + SERVER_PATH_MAX + 256];
    const server_client *c = &ss->client;
    int64_t took = (int64_t)aftp_wallclock_now_ns() - c->connected_ns;
    describe(ss, peer, session_key(ss, res), client, sizeof client);
    snprintf(line, sizeof line,
             "session ended: client %s, root %s, %d file%s, %" PRIu64 " bytes in %.1f s: %s",
             client, c->root[0] ? c->root : ss->s->dir, res->files_ok,
             res->files_ok == 1 ? "" : "s", res->stats.payload_bytes_received,
             c->connected_ns > 0 ? (double)took / 1e9 : 0.0,
             res->error == AFTP_OK ? "ok" : aftp_strerror(res->error));
    say(ss->s, AFTP_LOG_SESSION_ENDED, line);
}

static void on_session_end(void *app, const aftp_io_result *res, const struct sockaddr *peer)
{
    server_session *ss = app;
    aftp_server *s = ss->s;
    char line[SERVER_PATH_MAX + 1024];
    if (res->connected)
        session_ended(ss, res, peer);
    if (res->error != AFTP_OK) {
        explain_failure(ss, res, peer, line, sizeof line);
        s->session_error = res->error;
        say(s, AFTP_LOG_SESSION_FAILED, line);
    }
}

static void on_hello_dropped(void *app, const struct sockaddr *from, int why,
                             const uint8_t *client_key, uint64_t unreported)
{
    aftp_server *s = app;
    char client[512] = "", line[1200];
    if (client_key != NULL)
        aftp_serve_describe_client(from, client_key,
                                   aftp_keyfile_list_comment(&s->authorized, client_key), client,
                                   sizeof client);
    aftp_serve_explain_drop(from, why, client, s->terms[TERM_PSK_DIFFERS], &s->admit,
                            unreported, line, sizeof line);
    say(s, AFTP_LOG_HELLO_DROPPED, line);
}

/* aftp_server_reload's work, on the run's control thread: the authorized
 * keys file read again and its list swapped in place. The admission
 * policy borrows &s->authorized, so the next handshake sees the new keys;
 * its replay table stays; a session under way keeps its client's copy of
 * what it needs (server_client). A file that fails to load keeps the old
 * list: a typo must not lock every client out, nor let one in. */
static void reload_authorized(aftp_server *s)
{
    char why[SERVER_ERRMSG_MAX], line[SERVER_PATH_MAX + SERVER_ERRMSG_MAX + 128];
    aftp_keyfile_list list;
    size_t kept = s->authorized.count;
    if (s->authorized_path[0] == '\0') {
        say(s, AFTP_LOG_WARNING, "reload asked for, but this server has no authorized keys "
                                 "file to read again: nothing changed");
        return;
    }
    if (load_authorized(s->authorized_path, &list, why, sizeof why) != AFTP_OK) {
        snprintf(line, sizeof line,
                 "reload failed, keeping the %zu key%s loaded before: authorized keys: %s "
                 "(fix the file and reload again)", kept, kept == 1 ? "" : "s", why);
        say(s, AFTP_LOG_WARNING, line);
        return;
    }
    aftp_keyfile_list_free(&s->authorized);
    s->authorized = list;
    snprintf(line, sizeof line, "reloaded %zu key%s from %s", list.count,
             list.count == 1 ? "" : "s", s->authorized_path);
    say(s, AFTP_LOG_RELOADED, line);
}

/* The serve driver's control tick: a reload asked for since the last. */
static void on_control_tick(void *app, uint64_t now_ns)
{
    aftp_server *s = app;
    (void)now_ns;
    if (atomic_exchange(&s->reload, 0))
        reload_authorized(s);
}

/* Keys and admission of a protected server into sec. */
static int prepare_security(aftp_server *s, aftp_security_settings *sec)
{
    memset(sec, 0, sizeof *sec);
    sec->cipher = s->cipher;
    if (s->cipher == AFTP_CIPHER_NONE)
        return AFTP_OK;
    if (!s->secrets->have_identity)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "no identity key: a protected server needs one "
                    "(aftp_server_set_identity_file), or choose AFTP_CIPHER_NONE");
    if (s->authorized.count == 0 && s->admit_cb == NULL)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT,
                    "this server admits nobody: give authorized keys with at least one key "
                    "(aftp_server_set_authorized_keys_file) or an admission callback");
    aftp_admit_init(&s->admit, s->authorized_path[0] ? &s->authorized : NULL,
                    s->secrets->have_psk ? s->secrets->psk : NULL, aftp_wallclock());
    sec->identity = s->secrets->identity;
    sec->peers = aftp_admit_policy(&s->admit);
    return AFTP_OK;
}

/* The public defaults are the storage's own. */
_Static_assert(AFTP_SERVER_PIPELINE_WINDOW_MAX == AFTP_WIRE_MAX_WINDOW, "the wire's largest W");
_Static_assert(AFTP_SERVER_PARTIAL_MAX_AGE_DEFAULT_S == AFTP_JOURNAL_DEFAULT_MAX_AGE_S,
               "the journal's default age");
_Static_assert(AFTP_SERVER_MODE_MASK_DEFAULT == AFTP_PLACE_MODE_DEFAULT, "the placement's mask");

/* The operator learns what the sweep removed, where, and the age. */
static void on_swept(void *app, int removed, int session_root)
{
    const server_session *ss = session_root ? app : NULL; /* aftp_serve_opts.on_swept */
    aftp_server *s = ss != NULL ? ss->s : app;
    char line[SERVER_PATH_MAX + 256];
    snprintf(line, sizeof line,
             "removed %d unfinished file%s no sender came back for in %" PRIu64
             " s (%.1f days) from %s/" AFTP_JOURNAL_DIR,
             removed, removed == 1 ? "" : "s", s->partial_max_age_s,
             (double)s->partial_max_age_s / 86400.0, session_root ? ss->client.root : s->dir);
    say(s, AFTP_LOG_PARTIAL_SWEPT, line);
}

/* A session's own state, with its receipts' start times: one slot per
 * entry the window holds. NULL without memory (its HELLO is dropped). */
static void *session_open(void *app)
{
    aftp_server *s = app;
    server_session *ss = calloc(1, sizeof *ss);
    if (ss == NULL)
        return NULL;
    ss->s = s;
    ss->number = ++s->sessions_opened;
    ss->file_slots = s->pipeline_window > 0 ? s->pipeline_window : 1;
    ss->file_starts = calloc(ss->file_slots, sizeof *ss->file_starts);
    if (ss->file_starts == NULL) {
        free(ss);
        return NULL;
    }
    return ss;
}

static void session_close(void *app, void *session_app)
{
    server_session *ss = session_app;
    (void)app;
    free(ss->file_starts);
    free(ss);
}

/* The operator sees the drain begin, and what it waits for. */
static void on_draining(void *app, unsigned running, uint64_t timeout_ns)
{
    char line[256];
    snprintf(line, sizeof line,
             "draining: no new sessions; waiting up to %.1f s for the %u running, then "
             "cancelling the rest",
             (double)timeout_ns / 1e9, running);
    say(app, AFTP_LOG_DRAINING, line);
}

/* The drain's deadline as the serve driver takes it (0 there: its default). */
static uint64_t drain_timeout_ns(const aftp_server *s)
{
    return s->drain_timeout_ms > 0 ? s->drain_timeout_ms * 1000000u : 1u;
}

/* One run of the server, blocking or on a loop: the options the serve
 * driver reads while it runs (they borrow the handle and the open dir),
 * and what it reports. */
struct aftp_server_loop_run {
    aftp_server *s;
    aftp_serve_opts o;
    aftp_io_result res;
    int dirfd;
    aftp_hub *hub; /* on a loop */
};

/* The serve options of s over the open dir (-1: none). */
static void build_opts(aftp_server *s, int dirfd, aftp_serve_opts *o)
{
    *o = (aftp_serve_opts){
        .listen = (const struct sockaddr *)&s->listen, .listen_len = s->listen_len,
        .dirfd = dirfd, .faux = keeps_nothing(s), .overwrite = s->overwrite, .once = s->once,
        .pipeline_window = s->pipeline_window, .place = &s->place,
        .partial_max_age_s = s->partial_max_age_s, .idle_timeout_ns = s->idle_timeout_ns,
        .max_datagram = (uint16_t)AFTP_IO_DATAGRAM_FOR(s->mtu),
        .hooks = {.on_warning = on_warning, .on_tick = on_tick, .app = s,
                  .interrupt = &s->stop},
        .on_listening = on_listening, .admit = admit_client, .on_session_event = on_session_event,
        .on_entry = on_entry, .on_swept = on_swept, .on_session_end = on_session_end,
        .on_hello_dropped = on_hello_dropped, .on_control_tick = on_control_tick,
        .role_allowed = check_role, .session_open = session_open,
        .session_close = session_close, .on_draining = on_draining,
        .max_sessions = s->max_sessions, .total_rate_bps = s->total_rate_bps,
        .workers = s->workers, .drain = &s->drain,
        .drain_timeout_ns = drain_timeout_ns(s)};
}

/* What every run needs before the serve driver starts: the listen
 * address, the dir open, the options, the keys and admission. AFTP_OK, or
 * the error in s's message (r then holds nothing to undo but the dir,
 * which run_end closes). */
static int run_begin(aftp_server *s, aftp_server_loop_run *r)
{
    char why[SERVER_ERRMSG_MAX];
    int rc;
    memset(r, 0, sizeof *r);
    r->s = s;
    r->dirfd = -1;
    if (s->listen_len == 0)
        return fail(s, AFTP_ERR_INVALID_ARGUMENT, "no listen address (aftp_server_set_listen)");
    if (!keeps_nothing(s) && (rc = aftp_store_open_dir(s->dir, s->terms[TERM_DIR], &r->dirfd,
                                                       why, sizeof why)) != AFTP_OK)
        return fail(s, rc, "%s", why);
    build_opts(s, r->dirfd, &r->o);
    return prepare_security(s, &r->o.security);
}

/* Every run's end, whether it began (began: the serve driver ran and
 * returned rc, with r->res; else s's message says why it did not): the
 * message, the dir, the admission, and the handle made ready for its next
 * run (no port; a stop or drain asked for this run does not carry over).
 * Returns rc. */
static int run_end(aftp_server_loop_run *r, int began, int rc)
{
    aftp_server *s = r->s;
    if (began && rc != AFTP_OK)
        fail(s, rc, "%s", r->res.message[0] ? r->res.message : aftp_strerror(rc));
    else if (began)
        succeed(s);
    aftp_admit_fini(&s->admit);
    if (r->dirfd >= 0)
        close(r->dirfd);
    r->dirfd = -1;
    __atomic_store_n(&s->port, 0u, __ATOMIC_RELEASE);
    atomic_store(&s->stop, 0);
    atomic_store(&s->drain, 0);
    return rc;
}

int aftp_server_run(aftp_server *s)
{
    aftp_server_loop_run r;
    int rc = run_begin(s, &r);
    if (rc != AFTP_OK)
        return run_end(&r, 0, rc);
    return run_end(&r, 1, aftp_serve_run(&r.o, &r.res));
}

int aftp_server_loop_start(aftp_server *s, struct uv_loop_s *loop, void (*on_done)(void *ctx),
                           void *ctx, aftp_server_loop_run **out)
{
    aftp_server_loop_run *r = calloc(1, sizeof *r);
    *out = NULL;
    if (r == NULL)
        return fail(s, AFTP_ERR_NO_MEMORY, "no memory for the server's run");
    int rc = run_begin(s, r);
    if (rc == AFTP_OK) {
        (void)aftp_hub_start(&r->hub, loop, &r->o, &r->res, on_done, ctx);
        rc = r->hub != NULL ? AFTP_OK : fail(s, AFTP_ERR_NO_MEMORY, "no memory for the server");
    }
    if (rc != AFTP_OK) {
        run_end(r, 0, rc);
        free(r);
        return rc;
    }
    *out = r;
    return AFTP_OK;
}

void aftp_server_loop_stop(aftp_server_loop_run *r)
{
    aftp_server_stop(r->s);
    aftp_hub_look_now(r->hub);
}

int aftp_server_loop_finish(aftp_server_loop_run *r)
{
    int rc = aftp_hub_result(r->hub);
    aftp_hub_del(r->hub); /* before the dir closes: its sweeps hold it */
    rc = run_end(r, 1, rc);
    free(r);
    return rc;
}
