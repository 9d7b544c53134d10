/* aftp send SRC... HOST:PORT, and its mirror aftp get HOST:PORT:PATH...
 * DEST (a pull, aftp_client_get): a client of the public client API
 * (aftp/aftp_client.h), the CLI as libaftp's first embedder. Its lines are
 * the client's callbacks (a line per file sent, resumed, skipped or failed
 * from the file events, the progress line and log from the progress
 * callback), the transfer's summary line from the client's summary, and
 * its failure messages the client's, named in the CLI's terms
 * (--idle-timeout, --peer-key, ...). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_client.h"
#include "aftp_cli_base.h"

typedef struct send_args {
    uint64_t rate_bps;
    int rate_given;
    int policy; /* enum aftp_cc_policy */
    uint64_t max_rate_bps, min_rate_bps;
    const char *progress_log; /* --progress-log FILE, or NULL */
    int json;                 /* --json: NDJSON objects on stdout */
    aftp_cli_common common;
    aftp_cli_security sec;
    int sync;   /* enum aftp_client_sync */
    int resume; /* --no-resume: 0 */
    int links;  /* enum aftp_client_links */
    int overwrite;   /* get --overwrite: replace local files that differ */
    int path_memory; /* --no-path-memory: 0 */
    int early;       /* --no-early-entries: 0 */
    const char *const *files; /* SRC..., or get's remote PATHs */
    size_t count;
    const char *peer_text;
    int get;                  /* aftp get: files are remote, dest local */
    const char *dest;
    const char *remote[AFTP_PULL_MAX_PATHS];
    char host_port[300];
} send_args;

enum send_opt {
    OPT_CHECKSUM = 500,
    OPT_IGNORE_TIMES,
    OPT_NO_RESUME,
    OPT_LINKS,
    OPT_OVERWRITE,
    OPT_NO_PATH_MEMORY,
    OPT_NO_EARLY_ENTRIES
};

/* What the client's callbacks need, and how the run ended. */
typedef struct send_run {
    aftp_cli_output out;
    FILE *log; /* --progress-log, or NULL */
    aftp_client_summary summary; /* of the send, once it ran */
    int get;                     /* the files come here (aftp get) */
    uint64_t differ_here;        /* get: files refused, a different one being here */
} send_run;

static const char *const policy_names[] = {
    [AFTP_CC_FAIR] = "fair", [AFTP_CC_FIXED] = "fixed", [AFTP_CC_HIGH] = "high", [AFTP_CC_LOW] = "low"};

static int parse_policy(const char *text, int *policy)
{
    for (int p = 0; p < (int)(sizeof policy_names / sizeof policy_names[0]); p++) {
        if (strcmp(text, policy_names[p]) == 0) {
            *policy = p;
            return AFTP_OK;
        }
    }
    return AFTP_ERR_INVALID_ARGUMENT;
}

static int parse_rate_option(const char *name, const char *text, uint64_t *out)
{
    if (aftp_client_parse_rate(text, out) == AFTP_OK)
        return AFTP_EXIT_OK;
    aftp_cli_error("bad %s '%s' (bits/s, e.g. 500M, 1G, 2.5g)", name, text);
    return AFTP_EXIT_USAGE;
}

/* One send-specific option; AFTP_EXIT_OK, or the exit code of a bad value. */
static int send_option(int c, const char *arg, send_args *a)
{
    switch (c) {
    case 'r':
        a->rate_given = 1;
        return parse_rate_option("rate", arg, &a->rate_bps);
    case 'P':
        if (parse_policy(arg, &a->policy) == AFTP_OK)
            return AFTP_EXIT_OK;
        aftp_cli_error("bad policy '%s' (fixed, fair, high or low)", arg);
        return AFTP_EXIT_USAGE;
    case 'M':
        return parse_rate_option("max-rate", arg, &a->max_rate_bps);
    case 'm':
        return parse_rate_option("min-rate", arg, &a->min_rate_bps);
    case 'L':
        a->progress_log = arg;
        return AFTP_EXIT_OK;
    case 'J':
        a->json = 1;
        return AFTP_EXIT_OK;
    case OPT_CHECKSUM:
        a->sync = AFTP_CLIENT_SYNC_CHECKSUM;
        return AFTP_EXIT_OK;
    case OPT_IGNORE_TIMES:
        a->sync = AFTP_CLIENT_SYNC_OFF;
        return AFTP_EXIT_OK;
    case OPT_NO_RESUME:
        a->resume = 0;
        return AFTP_EXIT_OK;
    case OPT_LINKS:
        a->links = AFTP_CLIENT_LINKS_RECREATE;
        return AFTP_EXIT_OK;
    case OPT_OVERWRITE:
        if (a->get) {
            a->overwrite = 1;
            return AFTP_EXIT_OK;
        }
        aftp_cli_error("--overwrite is for aftp get (and aftp recv): what a send may replace "
                       "is its receiver's choice");
        return AFTP_EXIT_USAGE;
    case OPT_NO_PATH_MEMORY:
        a->path_memory = 0;
        return AFTP_EXIT_OK;
    case OPT_NO_EARLY_ENTRIES:
        a->early = 0;
        return AFTP_EXIT_OK;
    default:
        return aftp_cli_security_option(c, arg, &a->sec, &a->common);
    }
}

/* --rate is the target rate (Aspera's meaning): under an adaptive policy
 * it is also the ceiling unless --max-rate says otherwise. */
static int settle_rates(send_args *a)
{
    if (a->policy != AFTP_CC_FIXED && a->rate_given && a->max_rate_bps == 0)
        a->max_rate_bps = a->rate_bps;
    if (a->max_rate_bps && a->min_rate_bps > a->max_rate_bps) {
        aftp_cli_error("--min-rate is above --max-rate");
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

/* SRC... and HOST:PORT as the client would refuse them (a faux:// source
 * that does not parse, a bad address): a usage error, before any key or
 * socket. */
static int check_target(const send_args *a)
{
    aftp_client *c = NULL;
    if (aftp_client_new(&c) != AFTP_OK) {
        aftp_cli_error("cannot allocate memory for the client");
        return AFTP_EXIT_FAILED;
    }
    int rc = aftp_client_check_send(c, a->peer_text, a->files, a->count);
    if (rc != AFTP_OK)
        aftp_cli_error("%s", aftp_client_errmsg(c));
    aftp_client_del(c);
    return rc == AFTP_OK ? AFTP_EXIT_OK : AFTP_EXIT_USAGE;
}

/* get's HOST:PORT:PATH arguments: one server for all ("[v6]:PORT:PATH"
 * too), the paths after the port's colon taken as they are. */
static int parse_get_targets(char *const *args, size_t n, send_args *a)
{
    if (n > AFTP_PULL_MAX_PATHS) {
        aftp_cli_error("%zu remote paths: one get asks for at most %u", n, AFTP_PULL_MAX_PATHS);
        return AFTP_EXIT_USAGE;
    }
    for (size_t i = 0; i < n; i++) {
        const char *arg = args[i];
        const char *host_end = arg[0] == '[' ? strchr(arg, ']') : arg;
        const char *port = host_end ? strchr(host_end, ':') : NULL;
        const char *path = port ? strchr(port + 1, ':') : NULL;
        size_t len = path ? (size_t)(path - arg) : 0;
        if (path == NULL || path[1] == '\0' || len >= sizeof a->host_port) {
            aftp_cli_error("bad remote '%s' (HOST:PORT:PATH)", arg);
            return AFTP_EXIT_USAGE;
        }
        if (i > 0 && (strncmp(a->host_port, arg, len) != 0 || a->host_port[len] != '\0')) {
            aftp_cli_error("'%s' names another server than '%s': one get fetches from one "
                           "server (run one get per server)", arg, args[0]);
            return AFTP_EXIT_USAGE;
        }
        memcpy(a->host_port, arg, len);
        a->host_port[len] = '\0';
        a->remote[i] = path + 1;
    }
    a->files = a->remote;
    a->count = n;
    a->peer_text = a->host_port;
    return AFTP_EXIT_OK;
}

static int parse_send_args(int argc, char **argv, send_args *a)
{
    static const struct option opts[] = {{"rate", required_argument, NULL, 'r'},
                                         {"policy", required_argument, NULL, 'P'},
                                         {"max-rate", required_argument, NULL, 'M'},
                                         {"min-rate", required_argument, NULL, 'm'},
                                         {"progress-log", required_argument, NULL, 'L'},
                                         {"json", no_argument, NULL, 'J'},
                                         {"checksum", no_argument, NULL, OPT_CHECKSUM},
                                         {"ignore-times", no_argument, NULL, OPT_IGNORE_TIMES},
                                         {"no-resume", no_argument, NULL, OPT_NO_RESUME},
                                         {"links", no_argument, NULL, OPT_LINKS},
                                         {"overwrite", no_argument, NULL, OPT_OVERWRITE},
                                         {"no-path-memory", no_argument, NULL,
                                          OPT_NO_PATH_MEMORY},
                                         {"no-early-entries", no_argument, NULL,
                                          OPT_NO_EARLY_ENTRIES},
                                         {"peer-key", required_argument, NULL,
                                          AFTP_CLI_OPT_PEER_KEY},
                                         {"known-hosts", required_argument, NULL,
                                          AFTP_CLI_OPT_KNOWN_HOSTS},
                                         AFTP_CLI_SECURITY_LONG,
                                         AFTP_CLI_COMMON_LONG};
    int c, rc;
    a->rate_bps = AFTP_CLI_DEFAULT_RATE;
    a->policy = AFTP_CC_FAIR;
    a->common.idle_timeout_ns = AFTP_CLI_DEFAULT_IDLE_NS;
    a->sync = AFTP_CLIENT_SYNC_MTIME;
    a->resume = 1;
    a->links = AFTP_CLIENT_LINKS_SKIP;
    a->path_memory = 1;
    a->early = 1;
    while ((c = getopt_long(argc, argv, "r:" AFTP_CLI_COMMON_SHORT, opts, NULL)) != -1)
        if ((rc = send_option(c, optarg, a)) != AFTP_EXIT_OK)
            return rc;
    if (argc - optind < 2) {
        aftp_cli_error(a->get ? "get needs HOST:PORT:PATH... and DEST (aftp --help)"
                              : "send needs SRC... and HOST:PORT (aftp --help)");
        return AFTP_EXIT_USAGE;
    }
    if (a->get) {
        a->dest = argv[argc - 1];
        rc = parse_get_targets(&argv[optind], (size_t)(argc - optind - 1), a);
        return rc == AFTP_EXIT_OK ? settle_rates(a) : rc;
    }
    a->files = (const char *const *)&argv[optind];
    a->count = (size_t)(argc - optind - 1);
    a->peer_text = argv[argc - 1];
    if ((rc = check_target(a)) != AFTP_EXIT_OK)
        return rc;
    return settle_rates(a);
}

/* The errors that end a whole send: its error line says them, not a
 * line per entry. */
static int session_error(int error)
{
    return error == AFTP_ERR_NETWORK || error == AFTP_ERR_IDLE_TIMEOUT ||
           error == AFTP_ERR_CANCELLED || error == AFTP_ERR_AUTH ||
           error == AFTP_ERR_UNKNOWN_PEER || error == AFTP_ERR_BAD_KEY;
}

/* The line of an entry that did not get a summary line: skipped, or
 * failed (directories and links only when they fail). The first failure
 * gets none: the error line that ends the run names it. */
static void print_entry_line(aftp_cli_output *out, const aftp_file_event *ev, int get)
{
    if (ev->type == AFTP_FILE_SKIPPED)
        printf("skipped %s: identical %s (%llu bytes)\n", ev->printable_name,
               get ? "here already" : "at the receiver", (unsigned long long)ev->size);
    else if (ev->type == AFTP_FILE_FAILED && !session_error(ev->error) && out->failed++ > 0)
        aftp_cli_notice(out->quiet, "failed %s: %s", ev->printable_name, ev->message);
}

/* The summary line of a delivered file (or its "done" object). */
static void print_delivered(const aftp_file_event *ev, int get)
{
    if (ev->resumed_bytes) {
        printf("resumed %s: %llu bytes already there, %llu sent\n", ev->printable_name,
               (unsigned long long)ev->resumed_bytes,
               (unsigned long long)(ev->size - ev->resumed_bytes));
        return;
    }
    aftp_cli_summary s = {.sender = !get, .name = ev->printable_name, .size = ev->size,
                          .seconds = ev->session_seconds,
                          .repeated_pct = get ? 0 : 100.0 * ev->retransmitted,
                          .digest = ev->digest,
                          .cipher = ev->cipher, .rate_cap_bps = ev->rate_cap_bps};
    aftp_cli_summary_print(&s);
}

static void on_file(void *user, const aftp_file_event *ev)
{
    send_run *run = user;
    aftp_cli_output *out = &run->out;
    int delivered = ev->type == AFTP_FILE_FINISHED && ev->kind == AFTP_ENTRY_FILE;
    if (out->json != NULL) {
        if (ev->type == AFTP_FILE_STARTED || delivered) /* the error object ends a failure */
            aftp_cli_json_file(out->json, ev);
        aftp_cli_json_entry(out->json, ev);
    }
    if (delivered) {
        out->delivered++;
        out->bytes += ev->size;
    }
    run->differ_here += run->get && ev->type == AFTP_FILE_FAILED &&
                        ev->error == AFTP_ERR_FILE_EXISTS;
    if (ev->type == AFTP_FILE_STARTED || (ev->type == AFTP_FILE_FINISHED && !delivered))
        return; /* quiet about directories and links placed */
    aftp_cli_output_clear(out);
    if (out->json != NULL) /* the line's figures are the objects' */
        return;
    if (delivered)
        print_delivered(ev, run->get);
    else
        print_entry_line(out, ev, run->get);
}

/* The transfer's line: files and their fates, bytes, time and rate; a
 * get's files refused because a different one is here are named apart. */
static void print_transfer(const aftp_client_summary *s, uint64_t differ_here)
{
    char differ[128] = "";
    double mbit = s->seconds > 0 ? (double)s->bytes_sent * 8 / s->seconds / 1e6 : 0;
    if (differ_here > 0)
        snprintf(differ, sizeof differ, " (%llu of them already here and different: "
                 "--overwrite replaces them)", (unsigned long long)differ_here);
    printf("transfer: %llu files (%llu sent, %llu resumed, %llu skipped), %llu failed%s, "
           "%llu directories, %llu bytes sent of %llu in %.3f s, %.1f Mbit/s\n",
           (unsigned long long)(s->files_sent + s->files_resumed + s->files_skipped),
           (unsigned long long)s->files_sent, (unsigned long long)s->files_resumed,
           (unsigned long long)s->files_skipped, (unsigned long long)s->failed, differ,
           (unsigned long long)s->dirs, (unsigned long long)s->bytes_sent,
           (unsigned long long)s->file_bytes, s->seconds, mbit);
}

/* Tab-separated, one line per tick, for scripts and benchmarks: what the
 * progress line shows, in plain units. */
#define PROGRESS_LOG_HEADER                                                                    \
    "# seconds\tbytes_done\tgoodput_bps\tpacing_bps\tloss_ppm\tmin_rtt_us\tqueue_us\n"

static void log_progress(const send_run *run, const aftp_progress *p)
{
    fprintf(run->log, "%.3f\t%llu\t%.0f\t%llu\t%.0f\t%.0f\t%.0f\n", aftp_cli_seconds_since(&run->out.t0),
            (unsigned long long)p->bytes_done, p->goodput_bps, (unsigned long long)p->rate_bps,
            p->loss * 1e6, p->min_rtt_ms * 1e3, p->queue_ms * 1e3);
}

/* What the rate controller sees: its pacing rate, the path's loss and
 * round-trip time, and the queue it is building. */
static void print_path_state(const aftp_progress *p)
{
    fprintf(stderr, "  rate %.1f Mbit/s  loss %.2f%%  RTT %.1f ms (+%.1f queue)",
            (double)p->rate_bps / 1e6, p->loss * 100, p->min_rtt_ms, p->queue_ms);
}

static void on_progress(void *user, const aftp_progress *p)
{
    send_run *run = user;
    if (p->size == 0)
        return;
    aftp_cli_output_progress(&run->out, p);
    if (run->out.progress && !run->get) /* a get's rate control runs at the server */
        print_path_state(p);
    if (run->log != NULL)
        log_progress(run, p);
    if (run->out.json != NULL)
        aftp_cli_json_progress(run->out.json, 0, p);
}

static void on_notice(void *user, const char *text)
{
    send_run *run = user;
    aftp_cli_output_clear(&run->out);
    aftp_cli_notice(run->out.quiet, "warning: %s", text);
}

/* Every progress tick also appends a line to the --progress-log file
 * (made or truncated). */
static int open_progress_log(send_run *run, const char *path)
{
    run->log = fopen(path, "we"); /* a FIFO waits here for its reader */
    if (run->log == NULL && aftp_cli_interrupted())
        return aftp_cli_interrupted_early();
    if (run->log == NULL) {
        aftp_cli_error("cannot write the progress log %s: %s", path, strerror(errno));
        return AFTP_EXIT_LOCAL_FILE;
    }
    setvbuf(run->log, NULL, _IOLBF, 0); /* whole lines for a reader that follows it */
    fputs(PROGRESS_LOG_HEADER, run->log);
    return AFTP_EXIT_OK;
}

/* How aftp send names what the client's messages point to. */
static const aftp_client_terms cli_terms = {
    .size = sizeof cli_terms, .server_program = "'aftp recv'",
    .idle_setting = "--idle-timeout", .peer_key_setting = "--peer-key",
    .psk_setting = "--psk-file", .cipher_none = "--cipher none",
    .overwrite_setting = "'aftp recv --overwrite'", .mtu_setting = "--mtu",
    .get_overwrite_setting = "--overwrite"};

/* The path memory's default place: $XDG_CACHE_HOME/aftp/paths, else
 * ~/.cache/aftp/paths; NULL when neither variable names a directory (a
 * send then starts afresh, as with --no-path-memory). */
static const char *path_memory_file(char *buf, size_t cap)
{
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (cache != NULL && cache[0] == '/')
        n = snprintf(buf, cap, "%s/aftp/paths", cache);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(buf, cap, "%s/.cache/aftp/paths", home);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

/* The command line's settings, terms and callbacks into c (values the
 * parser checked). */
static int configure(const send_args *a, send_run *run, aftp_client *c)
{
    if (aftp_client_set_terms(c, &cli_terms) != AFTP_OK ||
        aftp_client_set_policy(c, a->policy) != AFTP_OK ||
        aftp_client_set_rate(c, a->rate_bps) != AFTP_OK ||
        aftp_client_set_max_rate(c, a->max_rate_bps) != AFTP_OK ||
        aftp_client_set_min_rate(c, a->min_rate_bps) != AFTP_OK ||
        aftp_client_set_idle_timeout_ms(c, aftp_cli_idle_ms(&a->common)) != AFTP_OK ||
        (a->common.mtu != 0 && aftp_client_set_mtu(c, a->common.mtu) != AFTP_OK) ||
        aftp_client_set_cipher(c, a->sec.cipher) != AFTP_OK ||
        aftp_client_set_sync(c, a->sync) != AFTP_OK ||
        aftp_client_set_resume(c, a->resume) != AFTP_OK ||
        aftp_client_set_links(c, a->links) != AFTP_OK ||
        aftp_client_set_overwrite(c, a->overwrite) != AFTP_OK ||
        aftp_client_set_early_entries(c, a->early) != AFTP_OK) {
        aftp_cli_error("%s", aftp_client_errmsg(c));
        return AFTP_EXIT_USAGE;
    }
    char buf[4096];
    const char *memory = a->path_memory ? path_memory_file(buf, sizeof buf) : NULL;
    if (memory != NULL && aftp_client_set_path_memory_file(c, memory) != AFTP_OK) {
        aftp_cli_error("%s", aftp_client_errmsg(c));
        return AFTP_EXIT_FAILED;
    }
    aftp_client_set_file_cb(c, on_file, run);
    aftp_client_set_progress_cb(c, on_progress, run);
    aftp_client_set_notice_cb(c, on_notice, run);
    return AFTP_EXIT_OK;
}

/* The keys of a protected run into c (none for --cipher none). */
static int load_send_keys(const send_args *a, aftp_client *c)
{
    char buf[4096];
    const char *path;
    int rc;
    if (a->sec.cipher == AFTP_CIPHER_NONE)
        return AFTP_EXIT_OK;
    if ((rc = aftp_cli_load_identity(&a->sec, c, buf, sizeof buf, &path)) != AFTP_EXIT_OK ||
        (rc = aftp_cli_load_psk(&a->sec, c)) != AFTP_EXIT_OK)
        return rc;
    return aftp_cli_load_peer_key(&a->sec, c);
}

/* A failure at the keys (the known hosts too) is exit 8, whatever its
 * code, as for the key files. Before the session, a failure of the local
 * file is exit 3, whatever its code (a source we may not read is ours, not
 * the receiver's refusal; the socket's is the network's); in it,
 * AFTP_ERR_IO is the receiver's storage (a failing read of ours ends as
 * AFTP_ERR_SOURCE_CHANGED): the receiver refused the file. */
static int send_exit_code(const aftp_client *c, int error, int get)
{
    int place = aftp_client_failure_place(c);
    /* get: the server's refusal of a path (its own files), not ours */
    if (get && place == AFTP_CLIENT_FAILED_IN_SESSION &&
        (error == AFTP_ERR_NOT_FOUND || error == AFTP_ERR_PERMISSION))
        return AFTP_EXIT_REFUSED;
    if (place == AFTP_CLIENT_FAILED_KEYS)
        return AFTP_EXIT_AUTH;
    if (place == AFTP_CLIENT_FAILED_LOCALLY && error != AFTP_ERR_NETWORK)
        return AFTP_EXIT_LOCAL_FILE;
    if (place == AFTP_CLIENT_FAILED_IN_SESSION && error == AFTP_ERR_IO)
        return AFTP_EXIT_REFUSED;
    return aftp_cli_exit_code(error);
}

/* The server's key is unknown: learnt from the server with its user's
 * consent when a person is there to give it (then AFTP_EXIT_OK: send
 * again), else explained. */
static int unknown_host(const send_args *a, aftp_client *c)
{
    char buf[4096];
    if (!aftp_cli_interactive())
        return aftp_cli_explain_unknown_host(
            a->peer_text, aftp_cli_known_hosts_path(&a->sec, buf, sizeof buf));
    int rc = aftp_cli_learn_peer_key(&a->sec, a->peer_text);
    aftp_cli_cancel_on_signal(c); /* the key request had Ctrl-C cancel it */
    return rc;
}

static int send_or_get(const send_args *a, aftp_client *c)
{
    return a->get ? aftp_client_get(c, a->peer_text, a->files, a->count, a->dest)
                  : aftp_client_send(c, a->peer_text, a->files, a->count);
}

/* The send itself, once more after the user trusted an unknown server. */
static int transfer(const send_args *a, send_run *run, aftp_client *c)
{
    int rc = send_or_get(a, c);
    if (rc == AFTP_ERR_UNKNOWN_PEER && aftp_client_failure_place(c) == AFTP_CLIENT_FAILED_KEYS) {
        int learnt = unknown_host(a, c);
        if (learnt != AFTP_EXIT_OK)
            return learnt;
        rc = send_or_get(a, c);
    }
    aftp_client_get_summary(c, &run->summary);
    run->out.send_summary = &run->summary;
    if (run->out.json == NULL && run->summary.entries > 0)
        print_transfer(&run->summary, run->differ_here);
    if (rc == AFTP_OK)
        return AFTP_EXIT_OK;
    if (rc == AFTP_ERR_CANCELLED &&
        aftp_client_failure_place(c) == AFTP_CLIENT_FAILED_LOCALLY) /* Ctrl-C before any datagram */
        return aftp_cli_interrupted_early();
    run->out.error = rc;
    aftp_cli_error("%s", aftp_client_errmsg(c));
    return send_exit_code(c, rc, a->get);
}

static int run_send(const send_args *a, send_run *run, aftp_client *c)
{
    if (run->out.json != NULL)
        aftp_cli_json_start(run->out.json, a->get ? "aftp get" : "aftp send", a->files, a->count,
                            a->peer_text);
    /* From here on SIGINT/SIGTERM cancel (exit 7), whatever step they break. */
    aftp_cli_catch_signals();
    aftp_cli_cancel_on_signal(c);
    int rc = a->progress_log != NULL ? open_progress_log(run, a->progress_log) : AFTP_EXIT_OK;
    if (rc == AFTP_EXIT_OK && (rc = configure(a, run, c)) == AFTP_EXIT_OK &&
        (rc = load_send_keys(a, c)) == AFTP_EXIT_OK)
        rc = transfer(a, run, c);
    aftp_cli_output_clear(&run->out);
    aftp_cli_cancel_on_signal(NULL);
    if (run->log != NULL)
        fclose(run->log);
    return rc;
}

static int send_parsed(const send_args *a, send_run *run)
{
    aftp_client *c = NULL;
    if (aftp_client_new(&c) != AFTP_OK) {
        aftp_cli_error("cannot allocate memory for the client");
        return AFTP_EXIT_FAILED;
    }
    int rc = run_send(a, run, c);
    aftp_client_del(c); /* wipes its keys */
    return rc;
}

static int send_command(int argc, char **argv, int get)
{
    send_args a;
    send_run run = {.log = NULL, .summary = {.size = sizeof run.summary}, .get = get};
    memset(&a, 0, sizeof a);
    a.get = get;
    aftp_cli_output_begin(&run.out, argc, argv);
    int rc = parse_send_args(argc, argv, &a);
    if (rc < 0)
        return AFTP_EXIT_OK; /* --help */
    aftp_cli_output_options(&run.out, &a.common, a.json);
    if (rc == AFTP_EXIT_OK)
        rc = send_parsed(&a, &run);
    aftp_cli_output_end(&run.out, rc, a.count ? a.count : 1);
    return rc;
}

int aftp_cli_send(int argc, char **argv)
{
    return send_command(argc, argv, 0);
}

int aftp_cli_get(int argc, char **argv)
{
    return send_command(argc, argv, 1);
}
