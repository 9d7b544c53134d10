/*
 * The aftp command-line tool: shared pieces of its subcommands, on the
 * public API alone (include/aftp/). The CLI is libaftp's first embedder:
 * it compiles with include/ as its only include path and links the
 * library alone (tests/lib/cli_public_headers.sh checks its includes).
 */
#ifndef AFTP_CLI_BASE_H
#define AFTP_CLI_BASE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include <time.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_engine.h"
#include "aftp/aftp_server.h"

#define AFTP_CLI_DEFAULT_RATE AFTP_CLIENT_DEFAULT_RATE

/* Exit statuses (cli/EXIT_CODES.md). */
enum aftp_cli_exit {
    AFTP_EXIT_OK = 0,
    AFTP_EXIT_FAILED = 1,
    AFTP_EXIT_USAGE = 2,
    AFTP_EXIT_LOCAL_FILE = 3,
    AFTP_EXIT_NETWORK = 4,
    AFTP_EXIT_REFUSED = 5,
    AFTP_EXIT_VERIFY = 6,
    AFTP_EXIT_CANCELLED = 7,
    AFTP_EXIT_AUTH = 8
};

/* The exit status for a transfer that ended with `error` (the one table). */
int aftp_cli_exit_code(int error);

/* "aftp: error: ..." on stderr. */
void aftp_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "aftp: ..." on stderr, unless quiet. */
void aftp_cli_vnotice(int quiet, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* From now on (on 1) the lines of aftp_cli_error and aftp_cli_vnotice
 * begin with the time, "2026-11-26T16:20:01.123Z aftp: ...": a server's
 * log, which outlives the terminal that started it. */
void aftp_cli_stamp_lines(int on);
/* The time now in ISO 8601, UTC, milliseconds: "2026-11-26T16:20:01.123Z"
 * (AFTP_CLI_TIME_MAX bytes hold it with its NUL). */
#define AFTP_CLI_TIME_MAX 32u
void aftp_cli_format_time(char *out, size_t cap);
/* The progress line on a terminal: drawn over the previous one, and
 * cleared before another line is written. */
void aftp_cli_progress_print(const aftp_progress *p);
void aftp_cli_progress_clear(void);
/* The one-line summary on stdout of a verified file. */
typedef struct aftp_cli_summary {
    int sender;          /* 1: "sent ... retransmitted", 0: "received ... duplicate" */
    const char *name;    /* printable */
    uint64_t size;
    double seconds;      /* since the handshake */
    double repeated_pct; /* retransmitted bytes (sender) or duplicate packets (receiver) */
    const uint8_t *digest;
    int cipher;          /* enum aftp_cipher_choice */
    const char *peer;    /* appended after ", ", or NULL */
    uint64_t rate_cap_bps; /* the receiver's rate cap on the session, bits/s; 0: none */
} aftp_cli_summary;
void aftp_cli_summary_print(const aftp_cli_summary *s);
/* The share of duplicate packets among those received, in percent. */
double aftp_cli_duplicate_pct(uint64_t duplicates, uint64_t received);
/* The text of the latest aftp_cli_error line, "" before any. */
const char *aftp_cli_last_error(void);
/* From now on SIGINT/SIGTERM are counted (aftp_cli_interrupted) and
 * cancel the client of aftp_cli_cancel_on_signal: aftp send's Ctrl-C. */
void aftp_cli_catch_signals(void);
/* The signals caught so far. */
int aftp_cli_interrupted(void);
/* Seconds on the monotonic clock since t0. */
double aftp_cli_seconds_since(const struct timespec *t0);
/* SIGINT/SIGTERM also cancel c (aftp_client_cancel) until called with
 * NULL: a blocking call of the client API ends at Ctrl-C. */
void aftp_cli_cancel_on_signal(aftp_client *c);
/* A signal broke a step before the network: says so; AFTP_EXIT_CANCELLED. */
int aftp_cli_interrupted_early(void);
/* Options both subcommands take: -t/--idle-timeout, --mtu, -q/--quiet,
 * -h/--help. */
typedef struct aftp_cli_common {
    uint64_t idle_timeout_ns;
    unsigned mtu; /* --mtu, 0 when not given */
    int quiet;
} aftp_cli_common;
#define AFTP_CLI_OPT_MTU 400
#define AFTP_CLI_COMMON_SHORT "t:qh"
#define AFTP_CLI_COMMON_LONG                                                                   \
    {"idle-timeout", required_argument, NULL, 't'},                                            \
        {"mtu", required_argument, NULL, AFTP_CLI_OPT_MTU}, {"quiet", no_argument, NULL, 'q'}, \
        {"help", no_argument, NULL, 'h'}, { NULL, 0, NULL, 0 }
#define AFTP_CLI_DEFAULT_IDLE_NS (AFTP_CLIENT_DEFAULT_IDLE_MS * 1000000u)
/* Handles getopt's answer `c` for a common option: AFTP_EXIT_OK when taken,
 * AFTP_EXIT_USAGE for a bad or unknown option, -1 after --help. */
int aftp_cli_common_option(int c, const char *arg, aftp_cli_common *co);
/* The idle timeout in force, in milliseconds, rounded up: -t 0.0001 is
 * not the default. */
uint64_t aftp_cli_idle_ms(const aftp_cli_common *co);

/* What a run of aftp send or aftp recv shows, and its tally for the
 * summary: the terminal's progress line, and the --json objects. */
typedef struct aftp_cli_output {
    int quiet;
    int progress;       /* stderr is a terminal and not quiet */
    int drawn;          /* a progress line is on the terminal */
    FILE *json;         /* --json: the objects go here (stdout), or NULL */
    struct timespec t0; /* the start of the run */
    int error;          /* the library's aftp_error of the failure; AFTP_OK when it
                         * reported none */
    size_t delivered;   /* files delivered (send) or received (recv) */
    uint64_t bytes;     /* their bytes */
    size_t failed;      /* aftp send: entries failed so far */
    /* aftp send: the client's summary of the send, added to the summary
     * object once the send ran; NULL before (and for aftp recv). */
    const aftp_client_summary *send_summary;
} aftp_cli_output;
/* Starts the clock; --json anywhere before "--" (known before the options
 * are parsed, so that a usage error is reported as objects too). */
void aftp_cli_output_begin(aftp_cli_output *o, int argc, char **argv);
/* After parsing: -q, --json (as getopt took it), the terminal. */
void aftp_cli_output_options(aftp_cli_output *o, const aftp_cli_common *co, int json);
/* Another line goes to the terminal: the progress line makes way. */
void aftp_cli_output_clear(aftp_cli_output *o);
/* The progress line, on a terminal. */
void aftp_cli_output_progress(aftp_cli_output *o, const aftp_progress *p);
/* With --json, the last objects: the error when the exit status is not 0
 * (its line on stderr has been said: the object repeats it), then the
 * summary of `files` files. */
void aftp_cli_output_end(const aftp_cli_output *o, int exit_status, size_t files);

/* ---- security options and key files (aftp_cli_keys.c) ---- */

/* Key files live in $HOME/AFTP_CLI_KEY_DIR unless options name them. */
#define AFTP_CLI_KEY_DIR ".aftp"
#define AFTP_CLI_IDENTITY_NAME "id_x25519"
#define AFTP_CLI_AUTHORIZED_NAME "authorized_keys"
#define AFTP_CLI_KNOWN_HOSTS_NAME "known_hosts"

enum aftp_cli_security_opt {
    AFTP_CLI_OPT_IDENTITY = 300,
    AFTP_CLI_OPT_PEER_KEY,
    AFTP_CLI_OPT_KNOWN_HOSTS,
    AFTP_CLI_OPT_AUTHORIZED_KEYS,
    AFTP_CLI_OPT_PSK_FILE,
    AFTP_CLI_OPT_CIPHER
};
/* Options both subcommands take (each adds its own key options). */
#define AFTP_CLI_SECURITY_LONG                                                                 \
    {"identity", required_argument, NULL, AFTP_CLI_OPT_IDENTITY},                              \
        {"psk-file", required_argument, NULL, AFTP_CLI_OPT_PSK_FILE},                          \
        {"cipher", required_argument, NULL, AFTP_CLI_OPT_CIPHER}

/* What the security options named: files (NULL: the default) and the
 * cipher choice (enum aftp_cipher_choice). */
typedef struct aftp_cli_security {
    const char *identity, *peer_key, *known_hosts, *authorized_keys, *psk_file;
    int cipher;
} aftp_cli_security;

/* Handles a security option, else a common one (aftp_cli_common_option). */
int aftp_cli_security_option(int c, const char *arg, aftp_cli_security *sec,
                             aftp_cli_common *co);
/* $HOME/.aftp in buf; NULL without HOME. */
const char *aftp_cli_key_dir(char *buf, size_t cap);
/* $HOME/.aftp in buf, created 0700 when missing: AFTP_EXIT_OK,
 * AFTP_EXIT_USAGE without HOME (nothing printed: the caller says what to
 * give instead), AFTP_EXIT_LOCAL_FILE when it cannot be created (said). */
int aftp_cli_make_key_dir(char *buf, size_t cap);
/* `given`, or $HOME/.aftp/name in buf; NULL without HOME. */
const char *aftp_cli_key_path(const char *given, const char *name, char *buf, size_t cap);

/* Each reads key files into the client c (the library keeps them in
 * locked memory) and returns an exit status: AFTP_EXIT_OK, AFTP_EXIT_AUTH
 * for a missing, unreadable, unsafe or malformed key file (after one
 * clear line on stderr), AFTP_EXIT_USAGE when HOME is needed and not set.
 * The identity: --identity, else ~/.aftp/id_x25519 (made in buf); *path
 * names the file read. */
int aftp_cli_load_identity(const aftp_cli_security *sec, aftp_client *c, char *buf, size_t cap,
                           const char **path);
/* --psk-file, when given. */
int aftp_cli_load_psk(const aftp_cli_security *sec, aftp_client *c);
/* The server's key: --peer-key, and the known hosts (--known-hosts, else
 * ~/.aftp/known_hosts), which the send reads: an unknown host is the
 * send's AFTP_ERR_UNKNOWN_PEER, which the caller explains
 * (aftp_cli_explain_unknown_host) or asks its user about
 * (aftp_cli_learn_peer_key). */
int aftp_cli_load_peer_key(const aftp_cli_security *sec, aftp_client *c);
/* The known-hosts file in force: --known-hosts, else ~/.aftp/known_hosts
 * in buf; NULL without HOME. */
const char *aftp_cli_known_hosts_path(const aftp_cli_security *sec, char *buf, size_t cap);
/* How to pin the key of an unknown host (one line on stderr); AFTP_EXIT_AUTH. */
int aftp_cli_explain_unknown_host(const char *host, const char *known_hosts);

/* ---- trust on first use (aftp_cli_tofu.c) ---- */

/* Non-zero when stdin and stderr are terminals: a person can be asked. */
int aftp_cli_interactive(void);
/* For an unknown host ("HOST:PORT" as typed): asks the server for its key
 * (aftp_client_fetch_server_key, spec section 14.9), shows it with its
 * fingerprint on stderr and reads the answer from stdin. Only "yes"
 * appends "host aftp-x25519 <base64>" to the known hosts (creating ~/.aftp
 * 0700 and the file 0600 when missing), where the next send finds it:
 * AFTP_EXIT_OK. Otherwise an exit status after one line on stderr:
 * AFTP_EXIT_AUTH (not accepted), AFTP_EXIT_NETWORK (no answer,
 * unreachable), AFTP_EXIT_CANCELLED (a signal), AFTP_EXIT_LOCAL_FILE (the
 * known hosts cannot be written). */
int aftp_cli_learn_peer_key(const aftp_cli_security *sec, const char *host);

/* "aftp: ..." on stderr, unless quiet. */
void aftp_cli_notice(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- --json (aftp_cli_json.c; the schema is cli/JSON.md) ---- */

/* The "v" of every object: raised only for a change that is not an
 * addition of fields or object types. */
#define AFTP_CLI_JSON_VERSION 1
/* Each writes one object and a newline to out and flushes it. */
/* program: "aftp send" or "aftp get" (whose sources are the remote paths) */
void aftp_cli_json_start(FILE *out, const char *program, const char *const *sources,
                         size_t count, const char *peer);
void aftp_cli_json_progress(FILE *out, size_t index, const aftp_progress *p);
void aftp_cli_json_file(FILE *out, const aftp_file_event *ev);
/* One "file" object per entry that ended (sent, resumed, skipped, failed). */
void aftp_cli_json_entry(FILE *out, const aftp_file_event *ev);
void aftp_cli_json_error(FILE *out, int error, const char *message, int exit_status);
void aftp_cli_json_summary(FILE *out, int exit_status, size_t files, size_t delivered,
                           uint64_t bytes, double seconds, const aftp_client_summary *send);
/* aftp recv's objects: "start" once it listens (the address bound; the
 * key line and fingerprint clients pin, NULL for --cipher none), "done"
 * per receipt, "session_error" per failed session, "notice" per warning
 * or dropped handshake. */
void aftp_cli_json_recv_start(FILE *out, const char *listen, const char *server_key,
                              const char *fingerprint);
typedef struct aftp_cli_json_recv_file {
    size_t index;               /* files received before it in this run */
    const aftp_receipt *receipt;
    const char *client_address; /* "ADDR:PORT" */
    const char *client_key;     /* its key line, NULL in an unprotected session */
    double duplicate;           /* share of the session's packets that were duplicates */
} aftp_cli_json_recv_file;
void aftp_cli_json_receipt(FILE *out, const aftp_cli_json_recv_file *f);
/* "entry" per entry report: a file skipped, a directory or link placed
 * (f->index unused). */
void aftp_cli_json_recv_entry(FILE *out, const aftp_cli_json_recv_file *f);
void aftp_cli_json_session_error(FILE *out, int error, const char *message);
void aftp_cli_json_notice(FILE *out, const char *kind, const char *message);
/* The aftp_error reported for a failure the library did not report (the
 * command line, key files, the progress log): its exit status's class. */
int aftp_cli_error_of_exit(int exit_status);
/* enum aftp_cipher_choice of a session as the summary line and JSON say it. */
const char *aftp_cli_cipher_name(int cipher);

int aftp_cli_keygen(int argc, char **argv);
int aftp_cli_send(int argc, char **argv);
int aftp_cli_get(int argc, char **argv); /* aftp get: a pull */
int aftp_cli_recv(int argc, char **argv);
/* aftp serve: aftp recv without --once, the server run as a daemon. */
int aftp_cli_serve(int argc, char **argv);
void aftp_cli_usage(FILE *to);

#endif /* AFTP_CLI_BASE_H */
