#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aftp_cli.h"
#include "aftp_explain.h"
#include "aftp_faux.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "aftp_push.h"
#include "proto/aftp_wire.h"

typedef struct send_args {
    uint64_t rate_bps;
    int rate_given;
    int policy; /* enum aftp_cc_policy */
    uint64_t max_rate_bps, min_rate_bps;
    const char *progress_log; /* --progress-log FILE, or NULL */
    int json;                 /* --json: NDJSON objects on stdout */
    aftp_cli_common common;
    aftp_cli_security sec;
    const char *file;
    char faux_name[AFTP_PATH_MAX_COMPONENT + 1]; /* FILE is faux:///NAME?SIZE: NAME */
    const char *peer_text;
    struct sockaddr_storage peer;
    socklen_t peer_len;
} send_args;

/* How a run ended, for --json's last objects. */
typedef struct send_outcome {
    int error;          /* the library's aftp_error; AFTP_OK when none was reported */
    size_t delivered;   /* files delivered and verified */
    uint64_t bytes;     /* their bytes */
} send_outcome;

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
    if (aftp_parse_rate(text, out) == AFTP_OK)
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

static int parse_send_args(int argc, char **argv, send_args *a)
{
    static const struct option opts[] = {{"rate", required_argument, NULL, 'r'},
                                         {"policy", required_argument, NULL, 'P'},
                                         {"max-rate", required_argument, NULL, 'M'},
                                         {"min-rate", required_argument, NULL, 'm'},
                                         {"progress-log", required_argument, NULL, 'L'},
                                         {"json", no_argument, NULL, 'J'},
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
    while ((c = getopt_long(argc, argv, "r:" AFTP_CLI_COMMON_SHORT, opts, NULL)) != -1)
        if ((rc = send_option(c, optarg, a)) != AFTP_EXIT_OK)
            return rc;
    if (argc - optind != 2) {
        aftp_cli_error("send needs FILE and HOST:PORT (aftp --help)");
        return AFTP_EXIT_USAGE;
    }
    a->file = argv[optind];
    a->peer_text = argv[optind + 1];
    if (aftp_faux_is(a->file)) { /* checked here, before any socket: a usage error */
        char why[512];
        uint64_t size;
        if (aftp_faux_parse(a->file, a->faux_name, &size, why, sizeof why) != AFTP_OK) {
            aftp_cli_error("%s", why);
            return AFTP_EXIT_USAGE;
        }
    }
    if (aftp_parse_addr(a->peer_text, 0, &a->peer, &a->peer_len) != AFTP_OK) {
        aftp_cli_error("bad address '%s' (HOST:PORT or [IPV6]:PORT, port 1-65535)",
                       a->peer_text);
        return AFTP_EXIT_USAGE;
    }
    return settle_rates(a);
}

/* The server's key: pinned, else (unknown host) learnt from the server
 * with its user's consent when a person is there to give it. */
static int load_server_key(const send_args *a, aftp_cli_secrets *keys,
                           atomic_int *interrupt)
{
    char buf[4096];
    int unknown;
    int rc = aftp_cli_load_peer_key(&a->sec, a->peer_text, keys, &unknown);
    if (!unknown)
        return rc;
    if (aftp_cli_interactive())
        return aftp_cli_learn_peer_key(&a->sec, a->peer_text, interrupt, keys);
    return aftp_cli_explain_unknown_host(a->peer_text,
                                         aftp_cli_known_hosts_path(&a->sec, buf, sizeof buf));
}

/* The keys of a protected run into keys and *sec (none for --cipher none);
 * an exit status. */
static int load_send_keys(const send_args *a, aftp_cli_secrets *keys,
                          aftp_security_settings *sec, atomic_int *interrupt)
{
    int rc = AFTP_EXIT_OK;
    memset(sec, 0, sizeof *sec);
    sec->cipher = a->sec.cipher;
    if (a->sec.cipher == AFTP_CIPHER_NONE)
        return AFTP_EXIT_OK;
    if ((rc = aftp_cli_load_identity(&a->sec, keys)) != AFTP_EXIT_OK ||
        (rc = aftp_cli_load_psk(&a->sec, keys)) != AFTP_EXIT_OK ||
        (rc = load_server_key(a, keys, interrupt)) != AFTP_EXIT_OK)
        return rc;
    sec->identity = keys->identity;
    sec->peer_key = keys->peer_key;
    sec->psk = keys->have_psk ? keys->psk : NULL;
    return AFTP_EXIT_OK;
}

/* The receiver takes the smaller of the two datagram sizes (spec 4.1): say
 * when it held an --mtu back, so the operator can raise the receiver's. */
static void tell_datagram_cap(const aftp_cli_report *r, const aftp_io_result *res, unsigned mtu)
{
    if (mtu != 0 && res->connected && res->stats.max_datagram < res->datagram_asked)
        aftp_cli_notice(r, "the receiver took datagrams of at most %u bytes, not %u (--mtu %u): "
                        "give it --mtu %u too", (unsigned)res->stats.max_datagram,
                        (unsigned)res->datagram_asked, mtu, mtu);
}

/* How aftp send names what its failure messages point to. */
static const aftp_explain_words cli_words = {
    .server_program = "'aftp recv'", .idle_setting = "--idle-timeout",
    .peer_key_setting = "--peer-key", .psk_setting = "--psk-file",
    .cipher_none = "--cipher none", .overwrite_setting = "'aftp recv --overwrite'"};

/* One line that says what went wrong, in the user's terms. */
static void explain_failure(const send_args *a, const aftp_cli_report *r,
                            const aftp_push_result *pr, const aftp_cli_secrets *keys)
{
    char buf[4096], msg[2048];
    aftp_explain_ctx x = {.words = &cli_words, .peer = a->peer_text, .file = r->name,
                          .size = r->size, .block_size = r->block_size,
                          .idle_s = aftp_cli_idle_seconds(&a->common), .cipher = a->sec.cipher,
                          .cancelled_here = r->interrupt != 0, .own_key = keys->public_key,
                          .pinned_key = keys->peer_key,
                          .pinned_where = a->sec.peer_key
                                              ? a->sec.peer_key
                                              : aftp_cli_known_hosts_path(&a->sec, buf,
                                                                          sizeof buf)};
    aftp_explain_send_failure(&x, pr, msg, sizeof msg);
    aftp_cli_error("%s", msg);
}

/* Before the session every failure but the socket's is the local file's;
 * in it, AFTP_ERR_IO is the receiver's storage (a failing read of ours
 * ends as AFTP_ERR_SOURCE_CHANGED): the receiver refused the file. */
static int send_exit_code(const aftp_io_result *res)
{
    if (res->phase == AFTP_IO_PHASE_LOCAL && res->error != AFTP_ERR_NETWORK)
        return AFTP_EXIT_LOCAL_FILE;
    if (res->phase == AFTP_IO_PHASE_SESSION && res->error == AFTP_ERR_IO)
        return AFTP_EXIT_REFUSED;
    return aftp_cli_exit_code(res->error);
}

/* The transfer itself, reporting through r. */
static int transfer(const send_args *args, aftp_cli_secrets *keys, aftp_cli_report *r,
                    send_outcome *out)
{
    const send_args a = *args;
    aftp_push_result pr;
    const aftp_io_result *res = &pr.io;
    const char *slash = strrchr(a.file, '/');
    aftp_path_printable(a.faux_name[0] ? a.faux_name : slash ? slash + 1 : a.file, r->name,
                        sizeof r->name);
    aftp_push_opts o = {.files = &a.file, .file_count = 1,
                        .peer = (struct sockaddr *)&a.peer, .peer_len = a.peer_len,
                        .rate_bps = a.rate_bps,
                        .policy = a.policy, .max_rate_bps = a.max_rate_bps,
                        .min_rate_bps = a.min_rate_bps,
                        .idle_timeout_ns = a.common.idle_timeout_ns,
                        .max_datagram = aftp_cli_max_datagram(&a.common, AFTP_IO_MTU),
                        .hooks = aftp_cli_report_hooks(r)};
    int rc = load_send_keys(&a, keys, &o.security, &r->interrupt);
    if (rc != AFTP_EXIT_OK)
        return rc;
    int pushed = aftp_push_run(&o, &pr);
    tell_datagram_cap(r, res, a.common.mtu);
    if (pushed == AFTP_OK) {
        aftp_cli_print_summary(r, &res->stats, NULL);
        out->delivered = 1;
        out->bytes = r->size;
        return AFTP_EXIT_OK;
    }
    out->error = res->error;
    /* Ctrl-C before any datagram (a slow open of the source, say) is a
     * cancel, whatever the local step it broke made of it. */
    if (res->phase == AFTP_IO_PHASE_LOCAL && r->interrupt)
        return aftp_cli_interrupted_early();
    explain_failure(&a, r, &pr, keys);
    return send_exit_code(res);
}

static int run_send(const send_args *a, aftp_cli_secrets *keys, send_outcome *out)
{
    aftp_cli_report r;
    aftp_cli_report_init(&r, 1, a->common.quiet);
    r.source = a->file;
    if (a->json) {
        r.json = stdout;
        aftp_cli_json_start(r.json, &a->file, 1, a->peer_text);
    }
    /* From here on SIGINT/SIGTERM cancel (exit 7), whatever step they break. */
    aftp_cli_catch_signals(&r);
    int rc = a->progress_log != NULL ? aftp_cli_report_log_to(&r, a->progress_log) : AFTP_EXIT_OK;
    if (rc != AFTP_EXIT_OK)
        return rc;
    rc = transfer(a, keys, &r, out);
    aftp_cli_report_close(&r);
    return rc;
}

/* --json anywhere before "--": known before the options are parsed, so
 * that a usage error is reported as an object too. */
static int wants_json(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    return 0;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* --json's last objects: the error (its line on stderr has been said),
 * then the summary. */
static void json_end(const send_outcome *out, int rc, const struct timespec *t0)
{
    if (rc != AFTP_EXIT_OK) {
        int error = out->error != AFTP_OK ? out->error : aftp_cli_error_of_exit(rc);
        const char *message = aftp_cli_last_error();
        aftp_cli_json_error(stdout, error, message[0] ? message : aftp_strerror(error), rc);
    }
    aftp_cli_json_summary(stdout, rc, 1, out->delivered, out->bytes, seconds_since(t0));
}

static int send_parsed(const send_args *a, send_outcome *out)
{
    aftp_cli_secrets *keys = aftp_cli_secrets_new();
    if (keys == NULL) {
        aftp_cli_error("cannot allocate memory for keys");
        return AFTP_EXIT_FAILED;
    }
    int rc = run_send(a, keys, out);
    aftp_cli_secrets_free(keys); /* wiped: the engine made its own copies */
    return rc;
}

int aftp_cli_send(int argc, char **argv)
{
    send_args a;
    send_outcome out = {.error = AFTP_OK};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(&a, 0, sizeof a);
    a.json = wants_json(argc, argv);
    int rc = parse_send_args(argc, argv, &a);
    if (rc < 0)
        return AFTP_EXIT_OK; /* --help */
    if (rc == AFTP_EXIT_OK)
        rc = send_parsed(&a, &out);
    if (a.json)
        json_end(&out, rc, &t0);
    return rc;
}
