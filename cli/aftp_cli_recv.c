/* aftp recv (and aftp serve, recv without --once): a server on the public
 * server API (aftp/aftp_server.h), the CLI as libaftp's first embedder.
 * The operator's lines are the log callback's, named in the CLI's terms
 * (--dir, --idle-timeout, --psk-file), and begin with the time when it
 * serves until stopped; the summary line of each file is its receipt's.
 * With --json, stdout carries the same callbacks as NDJSON (cli/JSON.md). */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"
#include "aftp_cli_base.h"

typedef struct recv_args {
    const char *command; /* "recv" or "serve" */
    const char *listen_text;
    const char *dir;
    int once;
    int overwrite;
    int json; /* --json: NDJSON objects on stdout */
    int no_links;
    const char *mode_mask;       /* --mode-mask OCTAL, or NULL */
    const char *partial_max_age; /* --partial-max-age DURATION, or NULL */
    uint64_t rate_bps;           /* --rate: the server's total rate cap, 0: none */
    aftp_cli_common common;
    aftp_cli_security sec;
} recv_args;

enum { OPT_ONCE = 256, OPT_OVERWRITE, OPT_JSON, OPT_NO_LINKS, OPT_MODE_MASK, OPT_PARTIAL_AGE };

static int parse_recv_options(int argc, char **argv, recv_args *a)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'}, {"dir", required_argument, NULL, 'd'},
        {"once", no_argument, NULL, OPT_ONCE}, {"overwrite", no_argument, NULL, OPT_OVERWRITE},
        {"json", no_argument, NULL, OPT_JSON}, {"no-links", no_argument, NULL, OPT_NO_LINKS},
        {"mode-mask", required_argument, NULL, OPT_MODE_MASK},
        {"partial-max-age", required_argument, NULL, OPT_PARTIAL_AGE},
        {"rate", required_argument, NULL, 'r'},
        {"authorized-keys", required_argument, NULL, AFTP_CLI_OPT_AUTHORIZED_KEYS},
        AFTP_CLI_SECURITY_LONG, AFTP_CLI_COMMON_LONG};
    int c, rc;
    a->common.idle_timeout_ns = AFTP_CLI_DEFAULT_IDLE_NS;
    while ((c = getopt_long(argc, argv, "l:d:r:" AFTP_CLI_COMMON_SHORT, opts, NULL)) != -1) {
        if (c == 'r') {
            if (aftp_client_parse_rate(optarg, &a->rate_bps) != AFTP_OK) {
                aftp_cli_error("bad --rate '%s': the server's total rate in bits/s, shared "
                               "between its sessions (e.g. 400M, 1G, 2.5g)", optarg);
                return AFTP_EXIT_USAGE;
            }
        } else if (c == 'l')
            a->listen_text = optarg;
        else if (c == 'd')
            a->dir = optarg;
        else if (c == OPT_ONCE)
            a->once = 1;
        else if (c == OPT_OVERWRITE)
            a->overwrite = 1;
        else if (c == OPT_JSON)
            a->json = 1;
        else if (c == OPT_NO_LINKS)
            a->no_links = 1;
        else if (c == OPT_MODE_MASK)
            a->mode_mask = optarg;
        else if (c == OPT_PARTIAL_AGE)
            a->partial_max_age = optarg;
        else if ((rc = aftp_cli_security_option(c, optarg, &a->sec, &a->common)) !=
                 AFTP_EXIT_OK)
            return rc;
    }
    return AFTP_EXIT_OK;
}

static int parse_recv_args(int argc, char **argv, recv_args *a)
{
    int rc = parse_recv_options(argc, argv, a);
    if (rc != AFTP_EXIT_OK)
        return rc;
    if (optind != argc || a->listen_text == NULL || a->dir == NULL) {
        aftp_cli_error("%s needs --listen [ADDR:]PORT and --dir DIR (aftp --help)", a->command);
        return AFTP_EXIT_USAGE;
    }
    if (a->once && strcmp(a->command, "serve") == 0) {
        aftp_cli_error("serve runs until it is stopped: for one transfer, use aftp recv --once");
        return AFTP_EXIT_USAGE;
    }
    if (strncmp(a->dir, AFTP_SERVER_FAUX_DIR, strlen(AFTP_SERVER_FAUX_DIR)) == 0 &&
        strcmp(a->dir, AFTP_SERVER_FAUX_DIR) != 0) {
        aftp_cli_error("a faux:// destination takes no path: --dir faux://");
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

/* What the server's callbacks need, and what the run did. */
typedef struct recv_app {
    aftp_cli_output out; /* out.delivered: the files received (receipts) */
    int listening;
    const aftp_server *server;
    int have_key;        /* a protected server: its key is shown */
    uint8_t public_key[AFTP_KEY_LEN];
} recv_app;

static void notice(const recv_app *ra, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(const recv_app *ra, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    aftp_cli_vnotice(ra->out.quiet, fmt, ap);
    va_end(ap);
}

/* The server's key as a client's user pins it, and its fingerprint, which
 * that user compares before trusting this server (spec 14.9): shown once
 * the port is bound, so that a busy port is the one thing said. */
static void show_server_key(const recv_app *ra, const char *listening)
{
    char line[AFTP_CLIENT_KEY_TEXT_MAX], fingerprint[AFTP_CLIENT_FINGERPRINT_MAX];
    const char *prefix = "listening on ";
    aftp_client_format_key(ra->public_key, line, sizeof line);
    aftp_client_format_fingerprint(ra->public_key, fingerprint, sizeof fingerprint);
    if (ra->have_key) {
        notice(ra, "server key %s", line);
        notice(ra, "server fingerprint %s", fingerprint);
    }
    if (ra->out.json == NULL)
        return;
    if (strncmp(listening, prefix, strlen(prefix)) == 0)
        listening += strlen(prefix);
    aftp_cli_json_recv_start(ra->out.json, listening, ra->have_key ? line : NULL,
                             ra->have_key ? fingerprint : NULL);
}

/* The --json notice kind of a server's log line that is not a failure. */
static const char *notice_kind(int kind)
{
    switch (kind) {
    case AFTP_LOG_WARNING: return "warning";
    case AFTP_LOG_HELLO_DROPPED: return "hello_dropped";
    case AFTP_LOG_RATE_CAP: return "rate_cap";
    case AFTP_LOG_PARTIAL_SWEPT: return "partial_swept";
    case AFTP_LOG_RELOADED: return "reloaded";
    case AFTP_LOG_SESSION_STARTED: return "session_started";
    case AFTP_LOG_SESSION_ENDED: return "session_ended";
    case AFTP_LOG_DRAINING: return "draining";
    default: return "notice";
    }
}

static void on_log(void *user, int kind, const char *line)
{
    recv_app *ra = user;
    aftp_cli_output_clear(&ra->out);
    if (kind == AFTP_LOG_LISTENING) {
        ra->listening = 1;
        show_server_key(ra, line);
        notice(ra, "%s", line);
        return;
    }
    int failure = kind == AFTP_LOG_SESSION_FAILED || kind == AFTP_LOG_HELLO_DROPPED;
    if (failure)
        aftp_cli_error("%s", line);
    else if (kind == AFTP_LOG_WARNING)
        notice(ra, "warning: %s", line);
    else
        notice(ra, "%s", line);
    if (ra->out.json == NULL)
        return;
    if (kind == AFTP_LOG_SESSION_FAILED)
        aftp_cli_json_session_error(ra->out.json, aftp_server_session_error(ra->server), line);
    else
        aftp_cli_json_notice(ra->out.json, notice_kind(kind), line);
}

static void on_progress(void *user, const aftp_progress *p)
{
    recv_app *ra = user;
    if (p->size == 0)
        return;
    if (ra->out.json != NULL)
        aftp_cli_json_progress(ra->out.json, ra->out.delivered, p);
    aftp_cli_output_progress(&ra->out, p);
}

/* "ADDR:PORT" of a client (brackets around IPv6). */
static void client_address(const aftp_peer *peer, char *out, size_t cap)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getnameinfo(peer->addr, peer->addr_len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    int v6 = peer->addr->sa_family == AF_INET6;
    snprintf(out, cap, "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* The "done" object of a receipt, or (receipt 0) the "entry" object of
 * an entry report. */
static void json_report(const recv_app *ra, const aftp_receipt *r, int receipt)
{
    char address[NI_MAXHOST + NI_MAXSERV + 4], key[AFTP_CLIENT_KEY_TEXT_MAX];
    client_address(r->client, address, sizeof address);
    if (r->client->key != NULL)
        aftp_client_format_key(r->client->key, key, sizeof key);
    aftp_cli_json_recv_file json = {
        .index = ra->out.delivered, .receipt = r, .client_address = address,
        .client_key = r->client->key != NULL ? key : NULL,
        .duplicate = aftp_cli_duplicate_pct(r->duplicate_packets, r->packets_received) / 100};
    if (receipt)
        aftp_cli_json_receipt(ra->out.json, &json);
    else
        aftp_cli_json_recv_entry(ra->out.json, &json);
}

/* A resumed file's line after its "received" line. */
static void print_resumed(const aftp_receipt *r)
{
    printf("resumed %s (%llu bytes already there)\n", r->printable_path,
           (unsigned long long)r->held_bytes);
    fflush(stdout);
}

/* "received NAME: ... from ADDR key aftp-x25519 <base64> "comment"" ("sent
 * NAME: ... retransmitted" for a file a client pulled). */
static void on_receipt(void *user, const aftp_receipt *r)
{
    char name[160], peer[AFTP_SERVER_PEER_TEXT_MAX + 32];
    recv_app *ra = user;
    aftp_cli_output_clear(&ra->out);
    if (ra->out.json != NULL) /* the line's figures are the "done" object's */
        json_report(ra, r, 1);
    ra->out.delivered++;
    ra->out.bytes += r->size;
    if (ra->out.json != NULL)
        return;
    snprintf(name, sizeof name, "%s", r->printable_path);
    aftp_server_format_peer(r->client, peer, sizeof peer);
    if (r->client->key == NULL) /* a session without keys: anyone could be it */
        snprintf(peer + strlen(peer), sizeof peer - strlen(peer), " (unauthenticated)");
    aftp_cli_summary s = {
        .sender = r->pulled, .name = name, .size = r->size,
        .seconds = r->end_unix_ns > r->connected_unix_ns
                       ? (double)(r->end_unix_ns - r->connected_unix_ns) / 1e9
                       : 0,
        .repeated_pct = r->pulled ? 100.0 * r->retransmitted
                                  : aftp_cli_duplicate_pct(r->duplicate_packets,
                                                           r->packets_received),
        .digest = r->digest, .cipher = r->cipher, .peer = peer, .rate_cap_bps = r->rate_cap_bps};
    aftp_cli_summary_print(&s);
    if (r->outcome == AFTP_OUTCOME_RESUMED)
        print_resumed(r);
}

/* A file skipped as identical: a line; a directory or link placed: only
 * its JSON object (a tree's directories would drown the files). */
static void on_entry(void *user, const aftp_receipt *r)
{
    recv_app *ra = user;
    aftp_cli_output_clear(&ra->out);
    if (ra->out.json != NULL) {
        json_report(ra, r, 0);
        return;
    }
    if (r->outcome == AFTP_OUTCOME_SKIPPED) {
        printf("skipped %s (identical)\n", r->printable_path);
        fflush(stdout);
    }
}

/* SIGTERM, the service manager's stop of a server: a drain (no new
 * session, those running finish, up to the drain timeout); a second
 * SIGTERM stops at once, as Ctrl-C does. A --once receiver is a command,
 * not a service: SIGTERM stops it as any command (signal_drains 0). */
static volatile sig_atomic_t signal_drains;

static void on_sigterm(aftp_server *s)
{
    if (signal_drains)
        aftp_server_drain(s);
    else
        aftp_server_stop(s);
    signal_drains = 0;
}

/* The operator's signals: SIGHUP reads the authorized keys again
 * (aftp_server_reload), SIGTERM as above, Ctrl-C (SIGINT) stops the
 * server. Each call is async-signal-safe. */
static aftp_server *signal_server;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        aftp_server_reload(signal_server);
    else if (sig == SIGTERM)
        on_sigterm(signal_server);
    else
        aftp_server_stop(signal_server);
}

static void handle_signals(aftp_server *s, int once)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    signal_server = s;
    signal_drains = !once;
    sa.sa_handler = on_signal; /* no SA_RESTART: the wait wakes up at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The clients' keys; a server that admits nobody is a mistake. */
static int load_authorized(const recv_args *a, aftp_server *s)
{
    char buf[4096];
    const char *path =
        aftp_cli_key_path(a->sec.authorized_keys, AFTP_CLI_AUTHORIZED_NAME, buf, sizeof buf);
    if (path == NULL) {
        aftp_cli_error("HOME is not set: give the clients' keys with --authorized-keys FILE");
        return AFTP_EXIT_USAGE;
    }
    if (aftp_server_set_authorized_keys_file(s, path) == AFTP_OK)
        return AFTP_EXIT_OK;
    aftp_cli_error("%s (put each client's public key line, its ~/.aftp/id_x25519.pub, in that "
                   "file)", aftp_server_errmsg(s));
    return AFTP_EXIT_AUTH;
}


/* The identity's public key, which clients pin, read through the client
 * API (the server reads the file again: this reading said what was wrong). */
static int read_identity(const recv_args *a, char *buf, size_t cap, const char **path,
                         uint8_t *public_key)
{
    aftp_client *reader = NULL;
    if (aftp_client_new(&reader) != AFTP_OK)
        return AFTP_EXIT_FAILED;
    int rc = aftp_cli_load_identity(&a->sec, reader, buf, cap, path);
    if (rc == AFTP_EXIT_OK)
        aftp_client_public_key(reader, public_key);
    aftp_client_del(reader); /* wipes the key */
    return rc;
}

/* A key file the server refused: its message; AFTP_EXIT_AUTH. */
static int server_key_problem(const aftp_server *s)
{
    aftp_cli_error("%s", aftp_server_errmsg(s));
    return AFTP_EXIT_AUTH;
}

/* Identity, pre-shared key and admitted clients into the server. */
static int load_recv_keys(const recv_args *a, recv_app *ra, aftp_server *s)
{
    char buf[4096];
    const char *path;
    int rc;
    if (a->sec.cipher == AFTP_CIPHER_NONE) {
        notice(ra, "warning: --cipher none: transfers are neither encrypted nor authenticated");
        return AFTP_EXIT_OK;
    }
    if ((rc = read_identity(a, buf, sizeof buf, &path, ra->public_key)) != AFTP_EXIT_OK)
        return rc;
    if (aftp_server_set_identity_file(s, path) != AFTP_OK ||
        (a->sec.psk_file != NULL && aftp_server_set_psk_file(s, a->sec.psk_file) != AFTP_OK))
        return server_key_problem(s);
    if ((rc = load_authorized(a, s)) != AFTP_EXIT_OK)
        return rc;
    ra->have_key = 1;
    return AFTP_EXIT_OK;
}

/* --mode-mask OCTAL: 1 and *mask when text is octal digits only. */
static int parse_octal(const char *text, uint32_t *mask)
{
    if (text[0] == '\0' || strspn(text, "01234567") != strlen(text) || strlen(text) > 6)
        return 0;
    *mask = (uint32_t)strtoul(text, NULL, 8);
    return 1;
}

/* --partial-max-age DURATION: a whole number with an optional unit, s
 * (the default), m, h or d; 1 and *seconds when it is one. */
static int parse_duration(const char *text, uint64_t *seconds)
{
    static const char units[] = "smhd";
    static const uint64_t unit_s[] = {1, 60, 3600, 86400};
    char *end;
    if (text[0] < '0' || text[0] > '9')
        return 0;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    const char *unit = end[0] != '\0' ? strchr(units, end[0]) : units;
    if (errno != 0 || unit == NULL || (end[0] != '\0' && end[1] != '\0'))
        return 0;
    uint64_t scale = unit_s[unit - units];
    if (n > UINT64_MAX / scale)
        return 0;
    *seconds = n * scale;
    return 1;
}

/* --no-links, --mode-mask, --partial-max-age into the server. */
static int configure_tree(const recv_args *a, aftp_server *s)
{
    uint32_t mask;
    uint64_t age;
    aftp_server_set_links(s, !a->no_links);
    if (a->mode_mask != NULL &&
        (!parse_octal(a->mode_mask, &mask) || aftp_server_set_mode_mask(s, mask) != AFTP_OK)) {
        aftp_cli_error("--mode-mask '%s': give the permission bits kept in octal, 0 to 7777 "
                       "(e.g. 755; the default 777 drops setuid, setgid and sticky)",
                       a->mode_mask);
        return AFTP_EXIT_USAGE;
    }
    if (a->partial_max_age != NULL &&
        (!parse_duration(a->partial_max_age, &age) ||
         aftp_server_set_partial_max_age_s(s, age) != AFTP_OK)) {
        aftp_cli_error("--partial-max-age '%s': give a duration of 1 s to 100 years, a whole "
                       "number with s, m, h or d (e.g. 7d, 12h, 30m; the default is 7d)",
                       a->partial_max_age);
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

/* The settings of the command line; the destination is checked now: a
 * server that cannot store anything says so when it starts. */
static int configure(const recv_args *a, recv_app *ra, aftp_server *s)
{
    static const aftp_server_terms terms = {.size = sizeof terms, .dir_setting = "--dir",
                                            .idle_setting = "--idle-timeout",
                                            .psk_differs = "--psk-file differs"};
    if (aftp_server_set_listen(s, a->listen_text) != AFTP_OK) {
        aftp_cli_error("bad listen address '%s' ([ADDR:]PORT, port 0-65535)", a->listen_text);
        return AFTP_EXIT_USAGE;
    }
    aftp_server_set_terms(s, &terms);
    if (aftp_server_set_dir(s, a->dir) != AFTP_OK) {
        aftp_cli_error("%s", aftp_server_errmsg(s));
        return AFTP_EXIT_LOCAL_FILE;
    }
    aftp_server_set_overwrite(s, a->overwrite);
    aftp_server_set_once(s, a->once);
    aftp_server_set_cipher(s, a->sec.cipher);
    aftp_server_set_idle_timeout_ms(s, aftp_cli_idle_ms(&a->common));
    aftp_server_set_rate_cap(s, a->rate_bps);
    if (a->common.mtu != 0)
        aftp_server_set_mtu(s, a->common.mtu);
    aftp_server_set_log_cb(s, on_log, ra);
    aftp_server_set_receipt_cb(s, on_receipt, ra);
    aftp_server_set_entry_cb(s, on_entry, ra);
    aftp_server_set_progress_cb(s, on_progress, ra);
    int rc = configure_tree(a, s);
    return rc != AFTP_EXIT_OK ? rc : load_recv_keys(a, ra, s);
}

/* The run; ra->out.error: the library's aftp_error of a failure. */
static int serve(const recv_args *a, recv_app *ra, aftp_server *s)
{
    handle_signals(s, a->once);
    /* A server's lines are a log read later (a --once run's are read
     * as they come, like aftp send's) */
    aftp_cli_stamp_lines(!a->once);
    int rc = configure(a, ra, s);
    if (rc != AFTP_EXIT_OK)
        return rc;
    rc = aftp_server_run(s);
    aftp_cli_output_clear(&ra->out);
    ra->out.error = rc;
    if (!ra->listening) { /* it could not start: the port, most likely */
        aftp_cli_error("%s", aftp_server_errmsg(s));
        return AFTP_EXIT_NETWORK;
    }
    return aftp_cli_exit_code(rc);
}

static int recv_parsed(const recv_args *a, recv_app *ra)
{
    aftp_server *s = NULL;
    if (aftp_server_new(&s) != AFTP_OK) {
        aftp_cli_error("cannot allocate memory for the server");
        return AFTP_EXIT_FAILED;
    }
    ra->server = s;
    int rc = serve(a, ra, s);
    signal_server = NULL;
    aftp_server_del(s);
    return rc;
}

/* aftp recv or (command "serve") aftp serve. */
static int recv_command(const char *command, int argc, char **argv)
{
    recv_args a;
    recv_app ra = {.listening = 0};
    memset(&a, 0, sizeof a);
    a.command = command;
    aftp_cli_output_begin(&ra.out, argc, argv);
    int rc = parse_recv_args(argc, argv, &a);
    if (rc < 0)
        return AFTP_EXIT_OK; /* --help */
    aftp_cli_output_options(&ra.out, &a.common, a.json);
    if (rc == AFTP_EXIT_OK)
        rc = recv_parsed(&a, &ra);
    aftp_cli_output_end(&ra.out, rc, ra.out.delivered);
    return rc;
}

int aftp_cli_recv(int argc, char **argv)
{
    return recv_command("recv", argc, argv);
}

int aftp_cli_serve(int argc, char **argv)
{
    return recv_command("serve", argc, argv);
}
