/* The blocking client (include/aftp/aftp_client.h) over the push driver. */
#include "aftp/aftp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aftp_explain.h"
#include "aftp_handle.h"
#include "aftp_meter.h"
#include "aftp_drive.h"
#include "aftp_faux.h"
#include "aftp_keyfetch.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "aftp_pull.h"
#include "aftp_push.h"
#include "common/aftp_aead.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"

#define CLIENT_MAX_IDLE_MS UINT64_C(86400000)
#define CLIENT_TERMS 8 /* the strings of aftp_client_terms */

/* The public wait is the key request's schedule. */
_Static_assert(AFTP_CLIENT_FETCH_KEY_WAIT_MS * 1000000u ==
                   AFTP_KEYFETCH_ATTEMPTS * (uint64_t)AFTP_KEYFETCH_INTERVAL_NS,
               "AFTP_CLIENT_FETCH_KEY_WAIT_MS is the key request's schedule");
_Static_assert(AFTP_CLIENT_FINGERPRINT_MAX <= AFTP_KEYFILE_FINGERPRINT_MAX,
               "a fingerprint buffer of the public size fits the library's");
_Static_assert(AFTP_CLIENT_MIN_MTU == AFTP_IO_MIN_MTU && AFTP_CLIENT_MAX_MTU == AFTP_IO_MAX_MTU,
               "the public MTU bounds are the datapath's");
_Static_assert(AFTP_CLIENT_KEY_LINE_MAX == AFTP_KEYFILE_MAX_LINE + 2,
               "a public key line buffer holds the longest line, its newline and NUL");

/* aftp_client_cancel is async-signal-safe only with lock-free atomics. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "aftp_client_cancel needs lock-free atomic_int");

/* The handle's keys, in guarded, locked pages wiped when freed. */
typedef struct client_keys {
    uint8_t identity[AFTP_KEY_LEN];
    uint8_t peer_key[AFTP_KEY_LEN];
    uint8_t psk[AFTP_KEY_LEN];
} client_keys;

/* What a send tracks of the file under way, for events and progress. */
typedef struct client_file {
    int active;                  /* between STARTED and its verdict */
    aftp_meter meter;            /* its progress, from the session's counters */
    uint64_t base_sent_once;     /* session counters when it began */
    uint64_t base_retransmitted;
    char name[AFTP_WIRE_MAX_PATH + 1];
    char printable[4 * AFTP_WIRE_MAX_PATH + 1]; /* name, for people (aftp_path_printable) */
    uint64_t size;
    uint32_t block_size;         /* as offered (known at the verdict) */
} client_file;

struct aftp_client {
    client_keys *keys;
    int have_identity, have_peer_key, have_psk;
    char *known_hosts;
    char *path_memory;   /* aftp_client_set_path_memory_file; NULL: none */
    int no_early_entries; /* aftp_client_set_early_entries(c, 0) */
    char *peer_key_file; /* where the pinned server key came from; NULL: given directly */
    int cipher, policy;
    uint64_t rate_bps, max_rate_bps, min_rate_bps, idle_timeout_ns;
    unsigned mtu;
    aftp_progress_cb progress_cb;
    void *progress_user;
    aftp_file_cb file_cb;
    void *file_user;
    aftp_notice_cb notice_cb;
    void *notice_user;
    char *terms[CLIENT_TERMS]; /* aftp_client_set_terms, in its fields' order; NULL: default */
    int sync, resume, links;   /* enum aftp_client_sync, on/off, enum aftp_client_links */
    int overwrite;             /* a get replaces differing local files */
    aftp_client_summary summary; /* of the last send */
    /* Set by aftp_client_cancel (any thread, a signal handler); the
     * datapath loop polls it every turn. */
    atomic_int interrupt;
    atomic_int running;
    /* During a send: */
    const char *const *files;
    const char *host_port;
    int pipelined;          /* the send runs pipelined mode (every source a real one) */
    int first_error;        /* pipelined: the first failed entry's error, its place and */
    int first_place;        /* message; AFTP_OK while none failed */
    char first_message[1024];
    client_file cur;
    aftp_file_event failed; /* the FAILED event, sent once errmsg is known */
    int have_failed;
    uint64_t connected_ns;  /* the handshake's end; 0 before it */
    int failure_place;      /* enum aftp_client_failure_place of the last send */
    char errmsg[1024];
};

static int fail(aftp_client *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the reason of a failure; returns rc. */
static int fail(aftp_client *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
    return rc;
}

static int ok(aftp_client *c)
{
    c->errmsg[0] = '\0';
    return AFTP_OK;
}

/* How the library names what its failure messages point to, unless the
 * application chose its own terms. */
static const char *const default_terms[CLIENT_TERMS] = {
    "an aftp server", "the idle timeout", "aftp_client_set_peer_key", "pre-shared key",
    "no protection (cipher none)", "its overwrite setting", "MTU",
    "aftp_client_set_overwrite"};

static const char *term(const aftp_client *c, int i)
{
    return c->terms[i] != NULL ? c->terms[i] : default_terms[i];
}

int aftp_client_new(aftp_client **out)
{
    if (out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    void *handle, *secrets;
    int rc = aftp_handle_alloc(sizeof(aftp_client), &handle, sizeof(client_keys), &secrets);
    *out = NULL;
    if (rc != AFTP_OK)
        return rc;
    aftp_client *c = handle;
    c->keys = secrets;
    c->cipher = AFTP_CIPHER_AUTO;
    c->policy = AFTP_CC_FAIR;
    c->rate_bps = AFTP_CLIENT_DEFAULT_RATE;
    c->idle_timeout_ns = AFTP_CLIENT_DEFAULT_IDLE_MS * 1000000u;
    c->sync = AFTP_CLIENT_SYNC_MTIME;
    c->resume = 1;
    c->links = AFTP_CLIENT_LINKS_SKIP;
    *out = c;
    return AFTP_OK;
}

static void free_terms(char **terms)
{
    for (int i = 0; i < CLIENT_TERMS; i++) {
        free(terms[i]);
        terms[i] = NULL;
    }
}

void aftp_client_del(aftp_client *c)
{
    if (c == NULL)
        return;
    free_terms(c->terms);
    sodium_free(c->keys); /* wipes them */
    free(c->known_hosts);
    free(c->path_memory);
    free(c->peer_key_file);
    free(c);
}

/* ---- keys ---- */

/* Reads a key file (private: identity or psk; else public) into dst,
 * which keeps its value when the file cannot be used. */
static int read_key_file(aftp_client *c, const char *what, const char *path, int private_key,
                         uint8_t *dst)
{
    uint8_t key[AFTP_KEY_LEN];
    char err[512] = "";
    if (c == NULL || path == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = private_key ? aftp_keyfile_read_private(path, key, err, sizeof err)
                         : aftp_keyfile_read_public(path, key, err, sizeof err);
    if (rc == AFTP_OK) {
        memcpy(dst, key, AFTP_KEY_LEN);
        sodium_memzero(key, sizeof key);
        return ok(c);
    }
    sodium_memzero(key, sizeof key);
    return fail(c, rc, "%s: %s", what, err[0] ? err : aftp_strerror(rc));
}

int aftp_client_set_identity_file(aftp_client *c, const char *path)
{
    int rc = read_key_file(c, "identity key", path, 1, c ? c->keys->identity : NULL);
    if (rc == AFTP_OK)
        c->have_identity = 1;
    return rc;
}

int aftp_client_set_identity(aftp_client *c, const uint8_t secret[AFTP_KEY_LEN])
{
    if (c == NULL || secret == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    memcpy(c->keys->identity, secret, AFTP_KEY_LEN);
    c->have_identity = 1;
    return ok(c);
}

int aftp_client_set_peer_key(aftp_client *c, const uint8_t key[AFTP_KEY_LEN])
{
    if (c == NULL || key == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    memcpy(c->keys->peer_key, key, AFTP_KEY_LEN);
    c->have_peer_key = 1;
    free(c->peer_key_file);
    c->peer_key_file = NULL;
    return ok(c);
}

int aftp_client_set_peer_key_file(aftp_client *c, const char *path)
{
    char *copy = path != NULL ? strdup(path) : NULL;
    if (c != NULL && path != NULL && copy == NULL)
        return fail(c, AFTP_ERR_NO_MEMORY, "cannot allocate memory for a path");
    char what[160];
    if (c != NULL) /* named as the application sets it: "server key (--peer-key)" */
        snprintf(what, sizeof what, "server key (%s)", term(c, 2));
    int rc = read_key_file(c, what, path, 0, c ? c->keys->peer_key : NULL);
    if (rc != AFTP_OK) {
        free(copy);
        return rc;
    }
    c->have_peer_key = 1;
    free(c->peer_key_file); /* messages name the file a wrong key came from */
    c->peer_key_file = copy;
    return rc;
}

int aftp_client_set_known_hosts_file(aftp_client *c, const char *path)
{
    if (c == NULL || path == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    char *copy = strdup(path);
    if (copy == NULL)
        return fail(c, AFTP_ERR_NO_MEMORY, "cannot allocate memory for a path");
    free(c->known_hosts);
    c->known_hosts = copy;
    return ok(c);
}

int aftp_client_set_psk_file(aftp_client *c, const char *path)
{
    int rc = read_key_file(c, "pre-shared key", path, 1, c ? c->keys->psk : NULL);
    if (rc == AFTP_OK)
        c->have_psk = 1;
    return rc;
}

int aftp_client_set_cipher(aftp_client *c, int cipher)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cipher < AFTP_CIPHER_AUTO || cipher > AFTP_CIPHER_NONE)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "unknown cipher choice %d", cipher);
    if (cipher == AFTP_CIPHER_AES256GCM && !aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM))
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "AES-256-GCM needs a CPU with AES instructions: choose ChaCha20-Poly1305 "
                    "or AFTP_CIPHER_AUTO");
    c->cipher = cipher;
    return ok(c);
}

/* ---- rate and path ---- */

int aftp_client_set_policy(aftp_client *c, int policy)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (policy < AFTP_CC_FAIR || policy > AFTP_CC_LOW)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "unknown rate policy %d", policy);
    c->policy = policy;
    return ok(c);
}

int aftp_client_set_rate(aftp_client *c, uint64_t bits_per_s)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (bits_per_s == 0)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "a rate of 0 bits/s sends nothing");
    c->rate_bps = bits_per_s;
    return ok(c);
}

int aftp_client_set_max_rate(aftp_client *c, uint64_t bits_per_s)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->max_rate_bps = bits_per_s;
    return ok(c);
}

int aftp_client_set_min_rate(aftp_client *c, uint64_t bits_per_s)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->min_rate_bps = bits_per_s;
    return ok(c);
}

int aftp_client_set_mtu(aftp_client *c, unsigned mtu)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (mtu < AFTP_IO_MIN_MTU || mtu > AFTP_IO_MAX_MTU)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "MTU %u is out of range (bytes of an IP packet on the path, %u to %u)", mtu,
                    AFTP_IO_MIN_MTU, AFTP_IO_MAX_MTU);
    c->mtu = mtu;
    return ok(c);
}

int aftp_client_set_idle_timeout_ms(aftp_client *c, uint64_t ms)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (ms == 0 || ms > CLIENT_MAX_IDLE_MS)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "idle timeout of %llu ms is out of range (1 ms to one day)",
                    (unsigned long long)ms);
    c->idle_timeout_ns = ms * 1000000u;
    return ok(c);
}

int aftp_client_set_path_memory_file(aftp_client *c, const char *path)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    char *copy = path != NULL ? strdup(path) : NULL;
    if (path != NULL && copy == NULL)
        return fail(c, AFTP_ERR_NO_MEMORY, "cannot allocate memory for a path");
    free(c->path_memory);
    c->path_memory = copy;
    return ok(c);
}

int aftp_client_set_early_entries(aftp_client *c, int allow)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->no_early_entries = !allow;
    return ok(c);
}

/* ---- trees: sync, resume, links ---- */

int aftp_client_set_sync(aftp_client *c, int sync)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (sync < AFTP_CLIENT_SYNC_OFF || sync > AFTP_CLIENT_SYNC_CHECKSUM)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "unknown sync mode %d", sync);
    c->sync = sync;
    return ok(c);
}

int aftp_client_set_resume(aftp_client *c, int on)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->resume = on != 0;
    return ok(c);
}

int aftp_client_set_links(aftp_client *c, int links)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (links < AFTP_CLIENT_LINKS_SKIP || links > AFTP_CLIENT_LINKS_RECREATE)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "unknown links choice %d", links);
    c->links = links;
    return ok(c);
}

int aftp_client_set_overwrite(aftp_client *c, int on)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->overwrite = on != 0;
    return ok(c);
}

/* The entry flags of the handle's settings (spec 9.14.4). */
static unsigned entry_flags(const aftp_client *c)
{
    unsigned flags = c->resume ? AFTP_ENTRY_RESUME : 0;
    if (c->sync == AFTP_CLIENT_SYNC_MTIME)
        flags |= AFTP_ENTRY_SYNC;
    else if (c->sync == AFTP_CLIENT_SYNC_CHECKSUM)
        flags |= AFTP_ENTRY_SYNC | AFTP_ENTRY_CHECKSUM;
    return flags;
}

int aftp_client_get_summary(const aftp_client *c, aftp_client_summary *out)
{
    if (c == NULL || out == NULL || out->size < sizeof out->size)
        return AFTP_ERR_INVALID_ARGUMENT;
    size_t size = out->size < sizeof *out ? out->size : sizeof *out;
    memcpy((char *)out + sizeof out->size, (const char *)&c->summary + sizeof out->size,
           size - sizeof out->size);
    return AFTP_OK;
}

/* An entry's end counted into the send's summary. */
static void tally(aftp_client_summary *s, const aftp_file_event *fe)
{
    if (fe->type == AFTP_FILE_STARTED)
        return;
    s->entries++;
    if (fe->type == AFTP_FILE_FAILED) {
        s->failed++;
    } else if (fe->type == AFTP_FILE_SKIPPED) {
        s->files_skipped++;
        s->file_bytes += fe->size;
        s->bytes_skipped += fe->size;
    } else if (fe->kind == AFTP_ENTRY_DIR) {
        s->dirs++;
    } else if (fe->kind == AFTP_ENTRY_SYMLINK) {
        s->links++;
    } else {
        *(fe->resumed_bytes ? &s->files_resumed : &s->files_sent) += 1;
        s->file_bytes += fe->size;
        s->bytes_resumed += fe->resumed_bytes;
    }
}

/* Every event goes out through here: counted, then to the application. */
static void emit(aftp_client *c, const aftp_file_event *fe)
{
    tally(&c->summary, fe);
    if (c->file_cb != NULL)
        c->file_cb(c->file_user, fe);
}

/* ---- callbacks ---- */

int aftp_client_set_progress_cb(aftp_client *c, aftp_progress_cb cb, void *user)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->progress_cb = cb;
    c->progress_user = user;
    return ok(c);
}

int aftp_client_set_file_cb(aftp_client *c, aftp_file_cb cb, void *user)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->file_cb = cb;
    c->file_user = user;
    return ok(c);
}

int aftp_client_set_notice_cb(aftp_client *c, aftp_notice_cb cb, void *user)
{
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    c->notice_cb = cb;
    c->notice_user = user;
    return ok(c);
}

static void notice(aftp_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(aftp_client *c, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    if (c->notice_cb == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->notice_cb(c->notice_user, text);
}

static void on_warning(void *app, const char *text)
{
    notice(app, "%s", text);
}

/* The receiver takes the smaller of the two datagram sizes (spec 4.1): say
 * when it held a chosen MTU back, so its operator can raise the receiver's. */
static void tell_datagram_cap(aftp_client *c, const aftp_io_result *res)
{
    if (c->mtu != 0 && res->connected && res->stats.max_datagram < res->datagram_asked)
        notice(c, "the receiver took datagrams of at most %u bytes, not %u (%s %u): give it "
               "%s %u too", (unsigned)res->stats.max_datagram, (unsigned)res->datagram_asked,
               term(c, 6), c->mtu, term(c, 6), c->mtu);
}

static void on_engine_event(void *app, const aftp_event *ev)
{
    aftp_client *c = app;
    if (ev->type == AFTP_EV_CONNECTED)
        c->connected_ns = aftp_drive_now_ns();
    if (ev->type != AFTP_EV_FILE_START || c->pipelined) /* pipelined: on_entry */
        return;
    client_file *f = &c->cur;
    f->active = 1;
    f->size = ev->info->size;
    aftp_meter_start(&f->meter, f->size, f->base_sent_once, aftp_drive_now_ns());
    snprintf(f->name, sizeof f->name, "%s", ev->info->path);
    aftp_path_printable(f->name, f->printable, sizeof f->printable);
    size_t index = ev->info->file_id - 1; /* ids are 1, 2, 3 ... in files order */
    aftp_file_event fe = {.type = AFTP_FILE_STARTED, .index = index, .source = c->files[index],
                          .name = f->name, .size = f->size, .message = "",
                          .printable_name = f->printable, .kind = AFTP_ENTRY_FILE,
                          .path = f->name};
    emit(c, &fe);
}

static void on_file_end(void *app, const aftp_push_file_end *end)
{
    aftp_client *c = app;
    client_file *f = &c->cur;
    const aftp_stats *st = end->stats;
    uint64_t retransmitted = st->payload_bytes_retransmitted - f->base_retransmitted;
    uint64_t now = aftp_drive_now_ns();
    aftp_file_event fe = {.type = end->error == AFTP_OK ? AFTP_FILE_FINISHED : AFTP_FILE_FAILED,
                          .index = end->index, .source = c->files[end->index],
                          .name = end->name, .size = end->size,
                          .seconds = end->started ? (double)(now - f->meter.start_ns) / 1e9
                                                  : 0,
                          .retransmitted = end->size ? (double)retransmitted / (double)end->size
                                                     : 0,
                          .cipher = aftp_session_cipher_choice(st->cipher), .error = end->error,
                          .message = end->error == AFTP_OK ? "" : end->message,
                          .rate_cap_bps = st->rate_cap_bps,
                          .session_seconds = c->connected_ns
                                                 ? (double)(now - c->connected_ns) / 1e9
                                                 : 0,
                          .kind = AFTP_ENTRY_FILE};
    if (end->error == AFTP_OK)
        fe.bytes = end->size;
    else if (end->started) /* else its meter is not running: nothing was sent */
        fe.bytes = aftp_meter_done(&f->meter, aftp_meter_sent_once(st));
    if (end->digest != NULL)
        memcpy(fe.digest, end->digest, AFTP_DIGEST_LEN);
    f->active = 0;
    snprintf(f->name, sizeof f->name, "%s", end->name);
    aftp_path_printable(f->name, f->printable, sizeof f->printable);
    fe.printable_name = f->printable;
    fe.path = f->name;
    f->size = end->size;
    f->block_size = end->block_size;
    f->base_sent_once = aftp_meter_sent_once(st);
    f->base_retransmitted = st->payload_bytes_retransmitted;
    if (fe.type == AFTP_FILE_FAILED) {
        /* The send ends here: the event waits for the explanation, which
         * becomes its message (the run's detail is in the push result). */
        fe.name = f->name;
        c->failed = fe;
        c->have_failed = 1;
        return;
    }
    emit(c, &fe);
}

/* ---- pipelined mode: the entries' events ---- */

/* The session-wide progress meter takes in a file the receiver accepted:
 * its bytes still to send, and its name as the one at the stream's front. */
static void meter_accept(aftp_client *c, uint64_t to_come, uint64_t count, const char *printable)
{
    client_file *f = &c->cur;
    if (!f->active) {
        aftp_meter_start(&f->meter, 0, count, aftp_drive_now_ns());
        f->active = 1;
    }
    f->meter.size += to_come;
    f->size = f->meter.size;
    snprintf(f->printable, sizeof f->printable, "%s", printable);
}

/* A failed entry's message, in the application's terms, as a one-file
 * send's failure would read. */
static void entry_message(aftp_client *c, const aftp_push_entry *pe, const char *printable,
                          char *out, size_t cap)
{
    aftp_push_result pr;
    memset(&pr, 0, sizeof pr);
    pr.io.error = pe->error;
    pr.io.connected = 1;
    pr.io.phase = AFTP_IO_PHASE_SESSION;
    pr.io.stats.payload_bytes_sent = pe->accepted_ns != 0; /* past the offer, or at it */
    pr.io.stats.max_datagram = pe->stats->max_datagram;
    snprintf(pr.io.message, sizeof pr.io.message, "%s", pe->message);
    aftp_explain_words words = {.server_program = term(c, 0), .idle_setting = term(c, 1),
                                .peer_key_setting = term(c, 2), .psk_setting = term(c, 3),
                                .cipher_none = term(c, 4), .overwrite_setting = term(c, 5)};
    aftp_explain_ctx x = {.words = &words, .peer = c->host_port, .file = printable,
                          .size = pe->size, .idle_s = (double)c->idle_timeout_ns / 1e9,
                          .cipher = c->cipher, .cancelled_here = c->interrupt != 0};
    aftp_explain_send_failure(&x, &pr, out, cap);
}

/* A source of ours that could not be read: by the walk, or once the
 * receiver took it. */
static int local_failure(const aftp_push_entry *pe)
{
    return pe->local || (pe->accepted_ns != 0 && (pe->error == AFTP_ERR_SOURCE_CHANGED ||
                                                  pe->error == AFTP_ERR_NOT_FOUND ||
                                                  pe->error == AFTP_ERR_PERMISSION));
}

static void explain(aftp_client *c, const char *host_port, const aftp_push_result *pr);

static void entry_failed(aftp_client *c, const aftp_push_entry *pe, aftp_file_event *fe,
                         char *message, size_t cap)
{
    fe->type = AFTP_FILE_FAILED;
    fe->error = pe->error;
    if (pe->local) {
        snprintf(message, cap, "%s", pe->message);
    } else if (local_failure(pe)) { /* our source, once the receiver took it */
        snprintf(message, cap, "%.400s: %.500s", fe->printable_name,
                 pe->message[0] ? pe->message : aftp_strerror(pe->error));
    } else if (pe->session != NULL) { /* the send's own failure: its message */
        aftp_push_result pr = *pe->session;
        pr.io.error = pr.session_error;
        explain(c, c->host_port, &pr);
        snprintf(message, cap, "%s", c->errmsg);
    } else {
        entry_message(c, pe, fe->printable_name, message, cap);
    }
    fe->message = message;
    if (c->first_error != AFTP_OK)
        return;
    c->first_error = pe->error;
    c->first_place = local_failure(pe) ? AFTP_CLIENT_FAILED_LOCALLY : AFTP_CLIENT_FAILED_IN_SESSION;
    snprintf(c->first_message, sizeof c->first_message, "%s", message);
}

static void on_entry(void *app, const aftp_push_entry *pe)
{
    aftp_client *c = app;
    char printable[4 * AFTP_WIRE_MAX_PATH + 1], message[1024];
    const aftp_stats *st = pe->stats;
    uint64_t now = aftp_drive_now_ns(), sent = aftp_meter_sent_once(st);
    aftp_path_printable(pe->path, printable, sizeof printable);
    aftp_file_event fe = {.type = AFTP_FILE_STARTED, .index = pe->index,
                          .source = c->files[pe->index], .name = pe->path, .size = pe->size,
                          .cipher = aftp_session_cipher_choice(st->cipher), .message = "",
                          .rate_cap_bps = st->rate_cap_bps, .printable_name = printable,
                          .kind = pe->kind, .path = pe->path,
                          .resumed_bytes = pe->verdict == AFTP_VERDICT_RESUME ? pe->held_bytes
                                                                              : 0};
    if (!pe->ended) {
        meter_accept(c, pe->size - pe->held_bytes, aftp_meter_sent_once(st), printable);
        emit(c, &fe);
        return;
    }
    fe.seconds = pe->accepted_ns ? (double)(now - pe->accepted_ns) / 1e9 : 0;
    fe.session_seconds = c->connected_ns ? (double)(now - c->connected_ns) / 1e9 : 0;
    fe.retransmitted = sent ? (double)st->payload_bytes_retransmitted / (double)sent : 0;
    if (pe->error != AFTP_OK) {
        entry_failed(c, pe, &fe, message, sizeof message);
    } else if (pe->kind == AFTP_ENTRY_FILE && pe->verdict == AFTP_VERDICT_SKIP) {
        fe.type = AFTP_FILE_SKIPPED;
    } else {
        fe.type = AFTP_FILE_FINISHED;
        fe.bytes = pe->size; /* delivered; resumed_bytes of them were there already */
        if (pe->digest != NULL)
            memcpy(fe.digest, pe->digest, AFTP_DIGEST_LEN);
    }
    emit(c, &fe);
}

/* The figures of the CLI's progress line (aftp_meter.h), the session
 * having moved `count` bytes (sent once, or received). */
static void tell_progress(aftp_client *c, uint64_t count, const aftp_stats *st, uint64_t now_ns)
{
    client_file *f = &c->cur;
    aftp_meter_reading m;
    if (c->progress_cb == NULL || !f->active || !aftp_meter_read(&f->meter, count, now_ns, &m))
        return;
    aftp_progress p;
    aftp_meter_progress(&f->meter, &m, st, f->printable, &p);
    c->progress_cb(c->progress_user, &p);
}

static void on_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    tell_progress(app, aftp_meter_sent_once(st), st, now_ns);
}

/* ---- perform ---- */

/* A pinned key must agree with the known hosts, when they list host: a
 * different entry means the server's key changed, or the pin is wrong. */
static int check_pinned_key(aftp_client *c, const char *host)
{
    char err[512] = "";
    if (c->known_hosts == NULL ||
        aftp_keyfile_known_hosts_check_file(c->known_hosts, host, c->keys->peer_key, err,
                                            sizeof err) != AFTP_ERR_AUTH)
        return AFTP_OK;
    return fail(c, AFTP_ERR_AUTH, "WARNING: the key given with %s is not the one pinned for %s: %s",
                term(c, 2), host, err);
}

/* The server's key for host: pinned, else its known-hosts entry. */
static int resolve_peer_key(aftp_client *c, const char *host)
{
    char err[512] = "";
    if (c->have_peer_key)
        return check_pinned_key(c, host);
    if (c->known_hosts == NULL)
        return fail(c, AFTP_ERR_BAD_KEY,
                    "no key for the server at %s: pin it (aftp_client_set_peer_key) or name a "
                    "known-hosts file that lists it", host);
    int rc = aftp_keyfile_known_hosts_lookup_file(c->known_hosts, host, c->keys->peer_key, err,
                                                  sizeof err);
    if (rc == AFTP_ERR_UNKNOWN_PEER)
        return fail(c, rc, "the key of %s is unknown (not in %s): add the line "
                    "'%s aftp-x25519 <base64>' with the key the server prints when it starts",
                    host, c->known_hosts, host);
    if (rc == AFTP_ERR_AUTH) /* listed with different keys: one is stale */
        return fail(c, rc, "WARNING: %s", err);
    if (rc != AFTP_OK && err[0]) /* the reason names the file */
        return fail(c, rc, "known hosts: %s", err);
    if (rc != AFTP_OK)
        return fail(c, rc, "known hosts %s: %s", c->known_hosts, aftp_strerror(rc));
    return AFTP_OK;
}

/* The security settings of a send (pointers into c->keys). */
static int security_for(aftp_client *c, const char *host, aftp_security_settings *sec)
{
    memset(sec, 0, sizeof *sec);
    sec->cipher = c->cipher;
    if (c->cipher == AFTP_CIPHER_NONE)
        return AFTP_OK;
    if (!c->have_identity)
        return fail(c, AFTP_ERR_BAD_KEY,
                    "no identity key: a protected send needs one (aftp_client_set_identity_file)"
                    ", or choose AFTP_CIPHER_NONE on both sides");
    int rc = resolve_peer_key(c, host);
    if (rc != AFTP_OK)
        return rc;
    sec->identity = c->keys->identity;
    sec->peer_key = c->keys->peer_key;
    sec->psk = c->have_psk ? c->keys->psk : NULL;
    return AFTP_OK;
}

/* A faux:// source names itself and its size right, or the send refuses it. */
static int check_faux(aftp_client *c, const char *file)
{
    char name[AFTP_PATH_MAX_COMPONENT + 1], why[512];
    uint64_t size;
    if (!aftp_faux_is(file) || aftp_faux_parse(file, name, &size, why, sizeof why) == AFTP_OK)
        return AFTP_OK;
    return fail(c, AFTP_ERR_INVALID_ARGUMENT, "%s", why);
}

static int check_send_args(aftp_client *c, const char *host_port, const char *const *files,
                           size_t count)
{
    if (host_port == NULL || files == NULL || count == 0)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "nothing to send: give a HOST:PORT and files");
    for (size_t i = 0; i < count; i++) {
        if (files[i] == NULL)
            return fail(c, AFTP_ERR_INVALID_ARGUMENT, "file %zu of %zu is NULL", i + 1, count);
        if (check_faux(c, files[i]) != AFTP_OK)
            return AFTP_ERR_INVALID_ARGUMENT;
        if (aftp_faux_is(files[i]) != aftp_faux_is(files[0]))
            return fail(c, AFTP_ERR_INVALID_ARGUMENT, "%s and %s cannot go in one send: "
                        "faux:// sources go one file after another, real files and "
                        "directories as a tree (send them apart)",
                        aftp_faux_is(files[0]) ? files[0] : files[i],
                        aftp_faux_is(files[0]) ? files[i] : files[0]);
    }
    if (c->max_rate_bps && c->min_rate_bps > c->max_rate_bps)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "the minimum rate (%llu bits/s) is above the maximum (%llu bits/s)",
                    (unsigned long long)c->min_rate_bps, (unsigned long long)c->max_rate_bps);
    return AFTP_OK;
}

/* A field of the caller's terms, NULL when its struct is too old to have it. */
#define TERM_GIVEN(t, f)                                                                       \
    ((t) != NULL && (t)->size >= offsetof(aftp_client_terms, f) + sizeof(t)->f ? (t)->f : NULL)

int aftp_client_set_terms(aftp_client *c, const aftp_client_terms *terms)
{
    char *copy[CLIENT_TERMS] = {NULL};
    if (c == NULL || (terms != NULL && terms->size < sizeof terms->size))
        return AFTP_ERR_INVALID_ARGUMENT;
    const char *given[CLIENT_TERMS] = {
        TERM_GIVEN(terms, server_program), TERM_GIVEN(terms, idle_setting),
        TERM_GIVEN(terms, peer_key_setting), TERM_GIVEN(terms, psk_setting),
        TERM_GIVEN(terms, cipher_none), TERM_GIVEN(terms, overwrite_setting),
        TERM_GIVEN(terms, mtu_setting), TERM_GIVEN(terms, get_overwrite_setting)};
    for (int i = 0; i < CLIENT_TERMS; i++) {
        if (given[i] != NULL && (copy[i] = strdup(given[i])) == NULL) {
            free_terms(copy);
            return fail(c, AFTP_ERR_NO_MEMORY, "cannot allocate memory for the terms");
        }
    }
    free_terms(c->terms);
    memcpy(c->terms, copy, sizeof copy);
    return ok(c);
}

/* aftp_client_errmsg() for a failed push. */
static void explain(aftp_client *c, const char *host_port, const aftp_push_result *pr)
{
    int protected = c->cipher != AFTP_CIPHER_NONE;
    uint8_t own[AFTP_KEY_LEN];
    if (protected && aftp_hs_public_key(c->keys->identity, own) != AFTP_OK)
        protected = 0;
    aftp_explain_words words = {.server_program = term(c, 0), .idle_setting = term(c, 1),
                                .peer_key_setting = term(c, 2), .psk_setting = term(c, 3),
                                .cipher_none = term(c, 4), .overwrite_setting = term(c, 5)};
    aftp_explain_ctx x = {.words = &words, .peer = host_port, .file = c->cur.printable,
                          .size = c->cur.size, .block_size = c->cur.block_size,
                          .idle_s = (double)c->idle_timeout_ns / 1e9,
                          .cipher = c->cipher, .cancelled_here = c->interrupt != 0,
                          .own_key = protected ? own : NULL,
                          .pinned_key = protected ? c->keys->peer_key : NULL,
                          .pinned_where = c->peer_key_file   ? c->peer_key_file
                                          : c->have_peer_key ? "this client's settings"
                                                             : c->known_hosts};
    aftp_explain_send_failure(&x, pr, c->errmsg, sizeof c->errmsg);
}

/* A pipelined send whose session ended cleanly: AFTP_OK, or the first
 * failed entry's error, with how many failed. */
static int entries_result(aftp_client *c)
{
    if (c->first_error == AFTP_OK)
        return ok(c);
    c->failure_place = c->first_place;
    if (c->summary.entries == 1) /* "1 of 1" would add nothing */
        return fail(c, c->first_error, "%s", c->first_message);
    return fail(c, c->first_error, "%llu of %llu entries failed; the first: %s",
                (unsigned long long)c->summary.failed, (unsigned long long)c->summary.entries,
                c->first_message);
}

/* The send's figures from the session's counters. */
static void summarize(aftp_client *c, const aftp_push_result *pr)
{
    uint64_t sent = aftp_meter_sent_once(&pr->io.stats);
    c->summary.skipped_locally = pr->skipped_locally;
    c->summary.bytes_sent = sent;
    c->summary.retransmitted =
        sent ? (double)pr->io.stats.payload_bytes_retransmitted / (double)sent : 0;
}

static int push(aftp_client *c, const char *host_port, const struct sockaddr_storage *peer,
                socklen_t peer_len, const aftp_security_settings *sec, size_t count)
{
    aftp_push_result pr;
    aftp_push_opts o = {.files = c->files, .file_count = count,
                        .pipeline_window = c->pipelined ? AFTP_CLIENT_PIPELINE_WINDOW : 0,
                        .entry_flags = entry_flags(c),
                        .send_links = c->links == AFTP_CLIENT_LINKS_RECREATE,
                        .on_entry = on_entry,
                        .peer = (const struct sockaddr *)peer, .peer_len = peer_len,
                        .rate_bps = c->rate_bps, .policy = c->policy,
                        .max_rate_bps = c->max_rate_bps, .min_rate_bps = c->min_rate_bps,
                        .idle_timeout_ns = c->idle_timeout_ns,
                        .max_datagram = (uint16_t)(c->mtu ? AFTP_IO_DATAGRAM_FOR(c->mtu) : 0),
                        .security = *sec, .path_memory_file = c->path_memory,
                        .no_early_entries = c->no_early_entries,
                        .on_file_end = on_file_end,
                        .hooks = {.on_event = on_engine_event, .on_tick = on_tick,
                                  .on_warning = on_warning, .app = c,
                                  .interrupt = &c->interrupt}};
    int rc = aftp_push_run(&o, &pr);
    summarize(c, &pr);
    tell_datagram_cap(c, &pr.io);
    if (c->pipelined && pr.session_error == AFTP_OK)
        return entries_result(c);
    if (c->pipelined && pr.session_error == AFTP_ERR_SOURCE_CHANGED && !pr.changed_named &&
        c->first_error == AFTP_ERR_SOURCE_CHANGED) { /* the entry's message names the file */
        c->failure_place = AFTP_CLIENT_FAILED_IN_SESSION;
        return fail(c, AFTP_ERR_SOURCE_CHANGED, "%s", c->first_message);
    }
    if (c->pipelined) /* the session failed: its error, not an entry's */
        rc = pr.io.error = pr.session_error;
    if (rc == AFTP_OK)
        return ok(c);
    c->failure_place = pr.io.phase == AFTP_IO_PHASE_LOCAL ? AFTP_CLIENT_FAILED_LOCALLY
                                                          : AFTP_CLIENT_FAILED_IN_SESSION;
    /* A cancel before the first datagram (a slow open of the source, say)
     * is a cancel, whatever the local step it broke made of it. */
    if (c->failure_place == AFTP_CLIENT_FAILED_LOCALLY && c->interrupt)
        return fail(c, AFTP_ERR_CANCELLED, "cancelled before the transfer started: nothing "
                    "was sent");
    explain(c, host_port, &pr);
    if (c->have_failed) {
        c->failed.message = c->errmsg;
        emit(c, &c->failed);
    }
    return rc;
}

/* The arguments, and the peer's address from host_port. */
static int check_target(aftp_client *c, const char *host_port, const char *const *files,
                        size_t count, struct sockaddr_storage *peer, socklen_t *peer_len)
{
    int rc = check_send_args(c, host_port, files, count);
    if (rc != AFTP_OK)
        return rc;
    if (aftp_parse_addr(host_port, 0, peer, peer_len) != AFTP_OK)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "bad address '%s' (HOST:PORT or [IPV6]:PORT, port 1-65535)", host_port);
    return ok(c);
}

int aftp_client_check_send(aftp_client *c, const char *host_port, const char *const *files,
                           size_t count)
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    return check_target(c, host_port, files, count, &peer, &peer_len);
}

int aftp_client_failure_place(const aftp_client *c)
{
    return c != NULL ? c->failure_place : 0;
}

/* The send once its arguments and keys are settled. */
static int send_checked(aftp_client *c, const char *host_port, const char *const *files,
                        size_t count, const struct sockaddr_storage *peer, socklen_t peer_len,
                        const aftp_security_settings *sec)
{
    memset(&c->cur, 0, sizeof c->cur);
    c->have_failed = 0;
    c->connected_ns = 0;
    c->files = files;
    c->host_port = host_port;
    c->pipelined = !aftp_faux_is(files[0]); /* faux:// sources: one-file mode */
    c->first_error = AFTP_OK;
    c->interrupt = 0;
    c->running = 1;
    int rc = push(c, host_port, peer, peer_len, sec, count);
    if (rc == AFTP_OK)
        c->failure_place = 0;
    c->running = 0;
    c->files = NULL;
    c->host_port = NULL;
    return rc;
}

int aftp_client_send(aftp_client *c, const char *host_port, const char *const *files,
                     size_t count)
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    aftp_security_settings sec;
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (c->running)
        return fail(c, AFTP_ERR_INVALID_STATE, "a send is already running on this handle");
    uint64_t t0 = aftp_drive_now_ns();
    memset(&c->summary, 0, sizeof c->summary);
    c->summary.size = sizeof c->summary;
    c->failure_place = AFTP_CLIENT_FAILED_LOCALLY; /* until the push says otherwise */
    int rc = check_target(c, host_port, files, count, &peer, &peer_len);
    if (rc == AFTP_OK && (rc = security_for(c, host_port, &sec)) != AFTP_OK)
        c->failure_place = AFTP_CLIENT_FAILED_KEYS;
    else if (rc == AFTP_OK)
        rc = send_checked(c, host_port, files, count, &peer, peer_len, &sec);
    c->summary.seconds = (double)(aftp_drive_now_ns() - t0) / 1e9;
    return rc;
}

/* ---- pull ---- */

/* Which requested path the entries come from (spec 9.15.2): the server
 * walks the served paths in the order requested, each path's entries
 * together, a directory's names sorted (strcmp) at every level. A path
 * named "x/d" gives "d" first, then only "d/..."; a path "x/d/" gives
 * its contents, whose first components never go down. An entry that does
 * not fit the current path belongs to the first later served path it
 * fits; an entry "d" that fits both a contents path and a later path
 * named ".../d" is taken as the latter's (the other reading needs two
 * entries of one name, which collide here anyway). */
typedef struct get_origin {
    size_t current, count;
    int refused[AFTP_PULL_MAX_PATHS];
    int seen;                          /* the current path gave an entry */
    char last_top[AFTP_PATH_MAX_COMPONENT + 1]; /* its latest entry's first component */
} get_origin;

/* A get under way: the kind and origin of each entry the server offered,
 * by id modulo the window (no two in flight share a slot). */
typedef struct client_get {
    aftp_client *c;
    const char *const *paths;
    get_origin origin;
    uint8_t kinds[AFTP_PULL_DEFAULT_WINDOW];
    uint8_t origins[AFTP_PULL_DEFAULT_WINDOW]; /* index in paths */
    uint64_t accepted_ns[AFTP_PULL_DEFAULT_WINDOW];
    uint8_t digests[AFTP_PULL_DEFAULT_WINDOW][AFTP_DIGEST_LEN]; /* verified files' */
} client_get;

static int names_contents(const char *path)
{
    size_t len = strlen(path);
    return len > 1 && path[len - 1] == '/';
}

/* Whether an entry whose first component is top[0..len) (has_more: more
 * components follow) may come from requested path `path` next. */
static int origin_fits(const get_origin *o, const char *path, const char *top, size_t len,
                       int has_more, int seen)
{
    size_t plen = strlen(path) - (size_t)names_contents(path);
    if (names_contents(path)) {
        int order = strncmp(top, o->last_top, len);
        if (order == 0 && o->last_top[len] != '\0')
            order = -1;
        return !seen || order > 0 || (order == 0 && has_more);
    }
    const char *base = path + plen;
    while (base > path && base[-1] != '/')
        base--;
    return (size_t)(path + plen - base) == len && memcmp(base, top, len) == 0 &&
           (has_more || !seen);
}

/* The first served path after the current one that entry top[0..len)
 * fits, or count. */
static size_t origin_next(const get_origin *o, const char *const *paths, const char *top,
                          size_t len, int has_more)
{
    for (size_t n = o->current + 1; n < o->count; n++)
        if (!o->refused[n] && origin_fits(o, paths[n], top, len, has_more, 0))
            return n;
    return o->count;
}

/* The requested path entry `entry_path` comes from (get_origin). */
static size_t origin_of(client_get *g, const char *entry_path)
{
    get_origin *o = &g->origin;
    size_t len = strcspn(entry_path, "/");
    int has_more = entry_path[len] == '/';
    if (len > AFTP_PATH_MAX_COMPONENT)
        return o->current; /* refused at this side anyway */
    const char *here = g->paths[o->current];
    int stays = !o->refused[o->current] &&
                origin_fits(o, here, entry_path, len, has_more, o->seen);
    size_t next = origin_next(o, g->paths, entry_path, len, has_more);
    if (next < o->count &&
        (!stays || (names_contents(here) && !has_more && !names_contents(g->paths[next])))) {
        o->current = next;
        o->seen = 0;
    }
    o->seen = 1;
    memcpy(o->last_top, entry_path, len);
    o->last_top[len] = '\0';
    return o->current;
}

static void get_failed(aftp_client *c, aftp_file_event *fe, const char *message)
{
    fe->type = AFTP_FILE_FAILED;
    fe->message = message;
    if (c->first_error != AFTP_OK)
        return;
    c->first_error = fe->error;
    c->first_place = AFTP_CLIENT_FAILED_IN_SESSION;
    snprintf(c->first_message, sizeof c->first_message, "%s", message);
}

/* Entries are decided in the order offered: their origin is told here. */
static void get_on_entry(void *app, const aftp_entry_info *info, const aftp_entry_verdict *v)
{
    client_get *g = app;
    uint32_t slot = info->file.file_id % AFTP_PULL_DEFAULT_WINDOW;
    (void)v;
    g->kinds[slot] = (uint8_t)info->kind;
    g->origins[slot] = (uint8_t)origin_of(g, info->file.path);
}

/* What the server's code for a refused path means (spec 14.10): its
 * reply carries no text. */
static const char *pull_refusal_why(int error)
{
    switch (error) {
    case AFTP_ERR_PATH_REJECTED:
        return "not a plain path beneath this key's root there (absolute, '..', '.', an "
               "empty component, a backslash or a control character), or a symbolic link on "
               "it (a pull follows none), or a FIFO, socket or device";
    case AFTP_ERR_NOT_FOUND:
        return "nothing of that name beneath this key's root on the server (or a file named "
               "as a directory, with a trailing '/')";
    case AFTP_ERR_PERMISSION:
        return "the server may not read it";
    default:
        return aftp_strerror(error);
    }
}

/* A path the server refused: a FAILED event with the server's reason. */
static void get_path_refused(client_get *g, const aftp_event *ev, aftp_file_event *fe,
                             char *message, size_t cap)
{
    fe->index = ev->info->file_id - 1;
    fe->source = g->paths[fe->index];
    g->origin.refused[fe->index] = 1;
    snprintf(message, cap, "the server refused %.400s: %s", fe->printable_name,
             ev->message ? ev->message : pull_refusal_why(ev->error));
    get_failed(g->c, fe, message);
}

/* An entry's end: FINISHED, SKIPPED or FAILED. */
static void get_entry_end(client_get *g, const aftp_event *ev, aftp_file_event *fe,
                          char *message, size_t cap)
{
    uint32_t slot = ev->info->file_id % AFTP_PULL_DEFAULT_WINDOW;
    uint64_t now = aftp_drive_now_ns();
    fe->kind = g->kinds[slot];
    fe->seconds = g->accepted_ns[slot] ? (double)(now - g->accepted_ns[slot]) / 1e9 : 0;
    fe->session_seconds = g->c->connected_ns ? (double)(now - g->c->connected_ns) / 1e9 : 0;
    fe->resumed_bytes = ev->verdict == AFTP_VERDICT_RESUME ? ev->held_bytes : 0;
    if (ev->error == AFTP_ERR_FILE_EXISTS) {
        snprintf(message, cap, "%.400s is already here and differs from the server's (%s): "
                 "not replaced (%s replaces it)", fe->printable_name,
                 g->c->sync == AFTP_CLIENT_SYNC_OFF ? "files are compared only with sync on"
                 : g->c->sync == AFTP_CLIENT_SYNC_CHECKSUM ? "its content"
                                                           : "its size or modification time",
                 term(g->c, 7));
        get_failed(g->c, fe, message);
    } else if (ev->error != AFTP_OK) {
        snprintf(message, cap, "%.400s: %s", fe->printable_name,
                 ev->message ? ev->message : aftp_strerror(ev->error));
        get_failed(g->c, fe, message);
    } else if (ev->verdict == AFTP_VERDICT_SKIP) {
        fe->type = AFTP_FILE_SKIPPED;
    } else {
        fe->type = AFTP_FILE_FINISHED;
        fe->bytes = fe->kind == AFTP_ENTRY_FILE ? fe->size : 0;
        if (fe->kind == AFTP_ENTRY_FILE)
            memcpy(fe->digest, g->digests[slot], AFTP_DIGEST_LEN);
    }
}

/* The receiving engine's events as the handle's file events. */
static void get_on_event(void *app, const aftp_event *ev, const aftp_stats *st)
{
    client_get *g = app;
    char printable[4 * AFTP_WIRE_MAX_PATH + 1], message[1024];
    on_engine_event(g->c, ev);
    if (ev->type == AFTP_EV_FILE_END && ev->error == AFTP_OK && ev->digest != NULL)
        memcpy(g->digests[ev->info->file_id % AFTP_PULL_DEFAULT_WINDOW], ev->digest,
               AFTP_DIGEST_LEN);
    int wanted = ev->type == AFTP_EV_FILE_START || ev->type == AFTP_EV_ENTRY_END ||
                 (ev->type == AFTP_EV_PULL_PATH && ev->error != AFTP_OK);
    if (!wanted)
        return;
    aftp_path_printable(ev->info->path, printable, sizeof printable);
    size_t index = g->origins[ev->info->file_id % AFTP_PULL_DEFAULT_WINDOW];
    aftp_file_event fe = {.type = AFTP_FILE_STARTED, .index = index, .source = g->paths[index],
                          .name = ev->info->path, .size = ev->info->size, .error = ev->error,
                          .message = "", .printable_name = printable, .kind = AFTP_ENTRY_FILE,
                          .path = ev->info->path,
                          .cipher = aftp_session_cipher_choice(st->cipher)};
    if (ev->type == AFTP_EV_PULL_PATH)
        get_path_refused(g, ev, &fe, message, sizeof message);
    else if (ev->type == AFTP_EV_ENTRY_END)
        get_entry_end(g, ev, &fe, message, sizeof message);
    else {
        g->accepted_ns[ev->info->file_id % AFTP_PULL_DEFAULT_WINDOW] = aftp_drive_now_ns();
        meter_accept(g->c, ev->info->size - ev->held_bytes, st->payload_bytes_received,
                     printable);
    }
    emit(g->c, &fe);
}

/* The progress of a get: bytes received, against the files accepted. */
static void get_on_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    tell_progress(((client_get *)app)->c, st->payload_bytes_received, st, now_ns);
}

static void get_on_warning(void *app, const char *text)
{
    on_warning(((client_get *)app)->c, text);
}

/* DEST: an existing directory, opened. */
static int open_dest(aftp_client *c, const char *dest_dir, int *fd)
{
    *fd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd >= 0)
        return AFTP_OK;
    if (errno == ENOTDIR)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "%s is not a directory: a get stores what it fetches beneath a "
                    "directory (create one, or name another)", dest_dir);
    if (errno == ENOENT)
        return fail(c, AFTP_ERR_NOT_FOUND,
                    "%s does not exist: a get stores what it fetches beneath an existing "
                    "directory (create it first)", dest_dir);
    return fail(c, AFTP_ERR_PERMISSION, "cannot open the directory %s: %s", dest_dir,
                strerror(errno));
}

static int check_get_args(aftp_client *c, const char *host_port, const char *const *paths,
                          size_t n, const char *dest_dir)
{
    if (host_port == NULL || paths == NULL || n == 0 || dest_dir == NULL)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "nothing to get: give a HOST:PORT, remote paths and a directory");
    if (n > AFTP_PULL_MAX_PATHS)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "%zu remote paths: one get asks for at most %u (get the rest in another)",
                    n, AFTP_PULL_MAX_PATHS);
    for (size_t i = 0; i < n; i++)
        if (paths[i] == NULL || paths[i][0] == '\0' || strlen(paths[i]) > AFTP_WIRE_MAX_PATH)
            return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                        "remote path %zu of %zu is empty or longer than %u bytes", i + 1, n,
                        AFTP_WIRE_MAX_PATH);
    return AFTP_OK;
}

static int pull(aftp_client *c, const char *host_port, const struct sockaddr_storage *peer,
                socklen_t peer_len, const aftp_security_settings *sec, const char *const *paths,
                size_t n, int dest_fd)
{
    client_get g = {.c = c, .paths = paths, .origin = {.count = n}};
    aftp_push_result pr;
    memset(&pr, 0, sizeof pr);
    aftp_pull_opts o = {.paths = paths, .path_count = (uint32_t)n, .dest_fd = dest_fd,
                        .flags = entry_flags(c) | (c->overwrite ? AFTP_ENTRY_OVERWRITE : 0),
                        .pipeline_window = AFTP_PULL_DEFAULT_WINDOW,
                        .peer = (const struct sockaddr *)peer, .peer_len = peer_len,
                        .max_rate_bps = c->max_rate_bps, .idle_timeout_ns = c->idle_timeout_ns,
                        .max_datagram = (uint16_t)(c->mtu ? AFTP_IO_DATAGRAM_FOR(c->mtu) : 0),
                        .no_early_request = c->no_early_entries,
                        .security = *sec, .on_entry = get_on_entry,
                        .on_session_event = get_on_event,
                        .hooks = {.on_warning = get_on_warning, .on_tick = get_on_tick,
                                  .app = &g,
                                  .interrupt = &c->interrupt}};
    int rc = aftp_pull_run(&o, &pr.io);
    summarize(c, &pr);
    c->summary.bytes_sent = pr.io.stats.payload_bytes_received; /* what the server sent */
    if (pr.io.connected && (rc == AFTP_OK || c->first_error != AFTP_OK))
        return entries_result(c);
    c->failure_place = pr.io.phase == AFTP_IO_PHASE_LOCAL ? AFTP_CLIENT_FAILED_LOCALLY
                                                          : AFTP_CLIENT_FAILED_IN_SESSION;
    explain(c, host_port, &pr);
    return rc;
}

int aftp_client_get(aftp_client *c, const char *host_port, const char *const *remote_paths,
                    size_t n, const char *dest_dir)
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    aftp_security_settings sec;
    int dest_fd = -1;
    if (c == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (c->running)
        return fail(c, AFTP_ERR_INVALID_STATE, "a transfer is already running on this handle");
    uint64_t t0 = aftp_drive_now_ns();
    memset(&c->summary, 0, sizeof c->summary);
    memset(&c->cur, 0, sizeof c->cur);
    c->summary.size = sizeof c->summary;
    c->failure_place = AFTP_CLIENT_FAILED_LOCALLY;
    c->first_error = AFTP_OK;
    c->connected_ns = 0;
    int rc = check_get_args(c, host_port, remote_paths, n, dest_dir);
    if (rc == AFTP_OK && aftp_parse_addr(host_port, 0, &peer, &peer_len) != AFTP_OK)
        rc = fail(c, AFTP_ERR_INVALID_ARGUMENT,
                  "bad address '%s' (HOST:PORT or [IPV6]:PORT, port 1-65535)", host_port);
    if (rc == AFTP_OK)
        rc = open_dest(c, dest_dir, &dest_fd);
    if (rc == AFTP_OK && (rc = security_for(c, host_port, &sec)) != AFTP_OK)
        c->failure_place = AFTP_CLIENT_FAILED_KEYS;
    else if (rc == AFTP_OK) {
        c->interrupt = 0;
        c->running = 1;
        c->pipelined = 1; /* entries' events come from get_on_event */
        c->host_port = host_port;
        rc = pull(c, host_port, &peer, peer_len, &sec, remote_paths, n, dest_fd);
        if (rc == AFTP_OK)
            c->failure_place = 0;
        c->running = 0;
        c->host_port = NULL;
    }
    if (dest_fd >= 0)
        close(dest_fd);
    c->summary.seconds = (double)(aftp_drive_now_ns() - t0) / 1e9;
    return rc;
}

/* ---- learning a server's key ---- */

/* The key fetch failed: why, in the library's terms. */
static int fetch_failure(aftp_client *c, const char *host_port, int rc)
{
    switch (rc) {
    case AFTP_ERR_IDLE_TIMEOUT:
        return fail(c, rc, "no answer from %s within %.1f s when asking for its key (is an aftp "
                    "server running there? is UDP blocked? a server without protection has no "
                    "key to give)", host_port, (double)AFTP_CLIENT_FETCH_KEY_WAIT_MS / 1e3);
    case AFTP_ERR_NETWORK:
        return fail(c, rc, "%s is unreachable: connection refused (is an aftp server listening "
                    "there?)", host_port);
    case AFTP_ERR_CANCELLED:
        return fail(c, rc, "asking %s for its key was cancelled", host_port);
    default:
        return fail(c, rc, "cannot ask %s for its key: %s", host_port, aftp_strerror(rc));
    }
}

int aftp_client_fetch_server_key(aftp_client *c, const char *host_port,
                                 uint8_t key_out[AFTP_KEY_LEN])
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    if (c == NULL || host_port == NULL || key_out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (c->running)
        return fail(c, AFTP_ERR_INVALID_STATE, "a send is already running on this handle");
    if (aftp_parse_addr(host_port, 0, &peer, &peer_len) != AFTP_OK)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT,
                    "bad address '%s' (HOST:PORT or [IPV6]:PORT, port 1-65535)", host_port);
    aftp_keyfetch_opts o = {.peer = (const struct sockaddr *)&peer, .peer_len = peer_len,
                            .interrupt = &c->interrupt};
    c->interrupt = 0;
    c->running = 1;
    int rc = aftp_keyfetch_run(&o, key);
    c->running = 0;
    if (rc != AFTP_OK)
        return fetch_failure(c, host_port, rc);
    memcpy(key_out, key, AFTP_KEY_LEN);
    return ok(c);
}

/* The known-hosts file exists (created 0600: it says whom the user talks
 * to) and ends with a newline, so an appended line stays a line of its own. */
static int prepare_known_hosts(aftp_client *c)
{
    int fd = open(c->known_hosts, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(c, errno == ENOENT ? AFTP_ERR_NOT_FOUND
                       : errno == EACCES || errno == EPERM ? AFTP_ERR_PERMISSION
                                                           : AFTP_ERR_IO,
                    "cannot write %s: %s", c->known_hosts, strerror(errno));
    char last = '\n';
    off_t end = lseek(fd, 0, SEEK_END);
    int rc = AFTP_OK;
    if (end > 0 && pread(fd, &last, 1, end - 1) != 1)
        rc = AFTP_ERR_IO;
    if (rc == AFTP_OK && last != '\n' && write(fd, "\n", 1) != 1)
        rc = AFTP_ERR_IO;
    if (rc != AFTP_OK)
        fail(c, rc, "cannot write %s: %s", c->known_hosts, strerror(errno));
    if (close(fd) != 0 && rc == AFTP_OK)
        rc = fail(c, AFTP_ERR_IO, "cannot write %s: %s", c->known_hosts, strerror(errno));
    return rc;
}

int aftp_client_add_known_host(aftp_client *c, const char *host_port,
                               const uint8_t key[AFTP_KEY_LEN])
{
    char err[512] = "";
    if (c == NULL || host_port == NULL || key == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (c->known_hosts == NULL)
        return fail(c, AFTP_ERR_INVALID_STATE,
                    "no known-hosts file to pin %s in (aftp_client_set_known_hosts_file)",
                    host_port);
    int rc = prepare_known_hosts(c);
    if (rc != AFTP_OK)
        return rc;
    rc = aftp_keyfile_known_hosts_append(c->known_hosts, host_port, key, err, sizeof err);
    if (rc != AFTP_OK)
        return fail(c, rc, "cannot pin the key of %s in %s: %s", host_port, c->known_hosts,
                    err[0] ? err : aftp_strerror(rc));
    return ok(c);
}

/* Writes a key's text with `format` when cap holds the longest. */
static int format_into(void (*format)(const uint8_t *, char *, size_t), size_t max,
                       const uint8_t *key, char *out, size_t cap)
{
    if (key == NULL || out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cap < max) {
        if (cap > 0)
            out[0] = '\0';
        return AFTP_ERR_BUFFER_TOO_SMALL;
    }
    format(key, out, cap);
    return AFTP_OK;
}

int aftp_client_format_key(const uint8_t key[AFTP_KEY_LEN], char *out, size_t cap)
{
    return format_into(aftp_keyfile_key_text, AFTP_CLIENT_KEY_TEXT_MAX, key, out, cap);
}

int aftp_client_format_fingerprint(const uint8_t key[AFTP_KEY_LEN], char *out, size_t cap)
{
    return format_into(aftp_keyfile_fingerprint, AFTP_CLIENT_FINGERPRINT_MAX, key, out,
                       cap);
}

void aftp_client_cancel(aftp_client *c)
{
    if (c != NULL && c->running)
        c->interrupt = 1;
}

const char *aftp_client_errmsg(const aftp_client *c)
{
    return c != NULL ? c->errmsg : "";
}

/* ---- making keys and reading figures ---- */

/* The private key file, then the public one; neither stays when the
 * second fails. */
static int write_key_pair(aftp_client *c, const char *path, const char *pub_path,
                          const uint8_t *secret, const uint8_t *public_key, const char *comment)
{
    char err[512] = "";
    int rc = aftp_keyfile_write_private(path, secret, err, sizeof err);
    if (rc == AFTP_OK &&
        (rc = aftp_keyfile_write_public(pub_path, public_key, comment, err, sizeof err)) !=
            AFTP_OK)
        unlink(path);
    if (rc != AFTP_OK)
        return fail(c, rc, "%s", err[0] ? err : aftp_strerror(rc));
    return AFTP_OK;
}

/* The public key line of a key file with comment, in line (cap bytes). */
static int key_line(aftp_client *c, const uint8_t *public_key, const char *comment, char *line,
                    size_t cap)
{
    char text[AFTP_CLIENT_KEY_LINE_MAX + 1]; /* room to tell a line one byte too long */
    if (aftp_keyfile_format_public(public_key, comment, text, sizeof text) != AFTP_OK)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "the comment must be one line of printable "
                    "text (the key line holds at most %u bytes)", AFTP_KEYFILE_MAX_LINE);
    if (strlen(text) >= cap)
        return fail(c, AFTP_ERR_BUFFER_TOO_SMALL, "a buffer of %zu bytes is too small for the "
                    "public key line of %zu bytes", cap, strlen(text) + 1);
    memcpy(line, text, strlen(text) + 1);
    return AFTP_OK;
}

int aftp_client_keygen(aftp_client *c, const char *path, const char *comment, char *line_out,
                       size_t cap)
{
    char pub_path[4096];
    uint8_t public_key[AFTP_KEY_LEN];
    if (c == NULL || path == NULL || line_out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    int n = snprintf(pub_path, sizeof pub_path, "%s.pub", path);
    if (n < 0 || (size_t)n >= sizeof pub_path)
        return fail(c, AFTP_ERR_INVALID_ARGUMENT, "key file name of %zu bytes is too long "
                    "(at most %zu)", strlen(path), sizeof pub_path - 5);
    /* in locked memory of its own: the handle's identity stays as it is */
    uint8_t *secret = sodium_malloc(AFTP_KEY_LEN);
    if (secret == NULL)
        return fail(c, AFTP_ERR_NO_MEMORY, "cannot allocate locked memory for a key");
    int rc = aftp_hs_keypair(secret, public_key);
    if (rc != AFTP_OK)
        fail(c, rc, "cannot make a key pair: %s", aftp_strerror(rc));
    else if ((rc = key_line(c, public_key, comment, line_out, cap)) == AFTP_OK)
        rc = write_key_pair(c, path, pub_path, secret, public_key, comment);
    sodium_free(secret); /* wipes it */
    if (rc != AFTP_OK && cap > 0)
        line_out[0] = '\0';
    return rc == AFTP_OK ? ok(c) : rc;
}

int aftp_client_public_key(const aftp_client *c, uint8_t out[AFTP_KEY_LEN])
{
    if (c == NULL || out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (!c->have_identity)
        return AFTP_ERR_BAD_KEY;
    return aftp_hs_public_key(c->keys->identity, out);
}

int aftp_client_parse_rate(const char *text, uint64_t *bits_per_s)
{
    if (text == NULL || bits_per_s == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    return aftp_parse_rate(text, bits_per_s);
}
