#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "aftp_cli.h"
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
    aftp_cli_common common;
    aftp_cli_security sec;
    const char *file;
    char faux_name[AFTP_PATH_MAX_COMPONENT + 1]; /* FILE is faux:///NAME?SIZE: NAME */
    const char *peer_text;
    struct sockaddr_storage peer;
    socklen_t peer_len;
} send_args;

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

/* No HELLO_ACK: nobody there, or (protected) a server that cannot open
 * our handshake because it holds another key than the one we pinned: it
 * stays silent by design, so say both. A server that answered our key
 * request with the pinned key is there and holds that key: what else
 * makes it ignore a handshake (spec 14.2.5) is said instead. */
static void explain_no_answer(const send_args *a, double idle, const aftp_push_result *pr)
{
    if (pr->key_answer == AFTP_PUSH_KEY_PINNED)
        aftp_cli_error("%s answers key requests with the key pinned for it, but ignored our "
                       "handshake for %.1f s: do both sides use the same --psk-file (or none)? "
                       "was this host's clock set back since it last connected there? (the "
                       "server refuses handshakes older than the newest it accepted, less 10 s)",
                       a->peer_text, idle);
    else if (a->sec.cipher == AFTP_CIPHER_NONE)
        aftp_cli_error("no answer from %s within %.1f s (is 'aftp recv' running there? "
                       "is UDP blocked?)", a->peer_text, idle);
    else
        aftp_cli_error("no answer from %s within %.1f s (is 'aftp recv' running there? "
                       "is UDP blocked? a server whose key is not the one pinned for it "
                       "(--peer-key or known hosts) ignores us, as does one started with "
                       "--cipher none)", a->peer_text, idle);
}

/* The session ended on a refused socket (ICMP port unreachable), or on a
 * path that no longer carries our datagrams (the message says which). */
static void explain_network(const send_args *a, const aftp_cli_report *r,
                            const aftp_io_result *res)
{
    if (res->message[0]) /* the path, not the peer (its MTU fell) */
        aftp_cli_error("transfer of %s to %s failed: %s", r->name, a->peer_text, res->message);
    else if (res->connected)
        aftp_cli_error("the receiver at %s stopped answering mid-transfer (connection refused: "
                       "its process is gone)", a->peer_text);
    else
        aftp_cli_error("%s is unreachable: connection refused (is 'aftp recv' listening "
                       "there?)", a->peer_text);
}

/* What the sender offered, for a receiver's LIMIT refusal (FILE_REPLY
 * carries no reason, so the figures it judged are all there is to show). */
static void explain_limit(const send_args *a, const aftp_cli_report *r, const aftp_io_result *res)
{
    if (!res->connected) {
        aftp_cli_error("%s refused the session: it is at a limit (%s)", a->peer_text,
                       res->message[0] ? res->message : "too many sessions?");
        return;
    }
    if (res->stats.payload_bytes_sent > 0) { /* past the offer: the repair bound (spec 9.9) */
        aftp_cli_error("transfer of %s to %s failed: %s", r->name, a->peer_text,
                       res->message[0] ? res->message : aftp_strerror(res->error));
        return;
    }
    unsigned long long blocks =
        r->block_size ? (unsigned long long)aftp_wire_block_count(r->size, r->block_size) : 0;
    aftp_cli_error("%s refused %s: the offer exceeds a limit of the receiver (offered %llu bytes "
                   "in %llu blocks of %u bytes, datagrams of %u bytes)", a->peer_text, r->name,
                   (unsigned long long)r->size, blocks, (unsigned)r->block_size,
                   (unsigned)res->stats.max_datagram);
}

/* The receiver's FILE_REPLY (nothing sent yet) or FILE_RESULT refused the
 * file: what each wire code says, and no more. */
static void explain_refusal(const send_args *a, const aftp_cli_report *r,
                            const aftp_io_result *res)
{
    const char *peer = a->peer_text;
    int at_offer = res->stats.payload_bytes_sent == 0;
    switch (res->error) {
    case AFTP_ERR_FILE_EXISTS:
        aftp_cli_error("%s refused %s: it exists at the receiver (its operator can allow "
                       "replacing it with 'aftp recv --overwrite')", peer, r->name);
        break;
    case AFTP_ERR_NO_SPACE:
        if (at_offer)
            aftp_cli_error("%s refused %s: not enough space on the receiver", peer, r->name);
        else
            aftp_cli_error("%s ran out of space for %s during the transfer", peer, r->name);
        break;
    case AFTP_ERR_PATH_REJECTED:
        aftp_cli_error("%s refused %s: the receiver could not place the file there (the name "
                       "breaks its path rules, or something that is not a file is in the way)",
                       peer, r->name);
        break;
    case AFTP_ERR_PERMISSION:
        aftp_cli_error("%s refused %s: the receiver could not place the file there (permission "
                       "denied on its side)", peer, r->name);
        break;
    default: /* AFTP_ERR_IO: the receiver's storage failed (its reason, if it gave one) */
        if (at_offer)
            aftp_cli_error("%s refused %s: the receiver could not place the file there (its "
                           "storage failed; its own log says why)", peer, r->name);
        else
            aftp_cli_error("transfer of %s to %s failed: the receiver could not write it (%s)",
                           r->name, peer,
                           res->message[0] ? res->message
                                           : "its storage failed; its own log says why");
        break;
    }
}

/* One line that says what went wrong, in the user's terms. */
static void explain_failure(const send_args *a, const aftp_cli_report *r,
                            const aftp_push_result *pr, const aftp_cli_secrets *keys)
{
    const aftp_io_result *res = &pr->io;
    const char *peer = a->peer_text;
    double idle = aftp_cli_idle_seconds(&a->common);
    const char *detail = res->message[0] ? res->message : aftp_strerror(res->error);
    char own[128];
    /* local: the message names the file and says what went wrong with it */
    if (res->phase == AFTP_IO_PHASE_LOCAL || res->error == AFTP_ERR_SOURCE_CHANGED) {
        aftp_cli_error("%s", detail);
        return;
    }
    switch (res->error) {
    case AFTP_ERR_NETWORK:
        explain_network(a, r, res);
        break;
    case AFTP_ERR_IDLE_TIMEOUT:
        if (res->connected)
            aftp_cli_error("%s went silent for %.1f s (--idle-timeout)", peer, idle);
        else
            explain_no_answer(a, idle, pr);
        break;
    case AFTP_ERR_AUTH:
        aftp_cli_error("%s failed to authenticate: its key is not the one pinned for it "
                       "(wrong --peer-key or known-hosts entry?)", peer);
        break;
    case AFTP_ERR_UNKNOWN_PEER:
        aftp_cli_format_key(keys->public_key, own, sizeof own);
        aftp_cli_error("%s refused us: this client's key is not authorized there (add the line "
                       "'%s' to its authorized keys)", peer, own);
        break;
    case AFTP_ERR_FILE_EXISTS:
    case AFTP_ERR_NO_SPACE:
    case AFTP_ERR_PATH_REJECTED:
    case AFTP_ERR_PERMISSION:
    case AFTP_ERR_IO:
        explain_refusal(a, r, res);
        break;
    case AFTP_ERR_LIMIT:
        explain_limit(a, r, res);
        break;
    case AFTP_ERR_CANCELLED:
        if (r->interrupt)
            aftp_cli_error("transfer of %s to %s cancelled here", r->name, peer);
        else
            aftp_cli_error("the receiver at %s cancelled the transfer of %s", peer, r->name);
        break;
    case AFTP_ERR_DIGEST_MISMATCH:
        /* The engine's message names both digests when the receiver's
         * verdict disagrees with what was sent: say it, for the audit. */
        aftp_cli_error("verification failed: %s arrived at %s with a different digest%s%s", r->name,
                       peer, res->message[0] ? ": " : "", res->message);
        break;
    default:
        aftp_cli_error("transfer of %s to %s failed: %s", r->name, peer, detail);
        break;
    }
}

/* The server's key: pinned, else (unknown host) learnt from the server
 * with its user's consent when a person is there to give it. */
static int load_server_key(const send_args *a, aftp_cli_secrets *keys,
                           volatile sig_atomic_t *interrupt)
{
    char buf[4096];
    int unknown;
    int rc = aftp_cli_load_peer_key(&a->sec, a->peer_text, keys, &unknown);
    if (!unknown)
        return rc;
    if (aftp_cli_interactive())
        return aftp_cli_learn_peer_key(&a->sec, a->peer_text, (const struct sockaddr *)&a->peer,
                                       a->peer_len, interrupt, keys);
    return aftp_cli_explain_unknown_host(a->peer_text,
                                         aftp_cli_known_hosts_path(&a->sec, buf, sizeof buf));
}

/* The keys of a protected run into keys and *sec (none for --cipher none);
 * an exit status. */
static int load_send_keys(const send_args *a, aftp_cli_secrets *keys,
                          aftp_security_settings *sec, volatile sig_atomic_t *interrupt)
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

/* The server answered our key request with another key than the pinned
 * one (aftp_push.h): say it as ssh says a changed host key, and that the
 * answer proves nothing by itself. */
static void explain_other_key(const send_args *a, const aftp_push_result *pr,
                              const aftp_cli_secrets *keys)
{
    char answered[AFTP_CLI_FINGERPRINT_MAX], pinned[AFTP_CLI_FINGERPRINT_MAX], buf[4096];
    const char *where = a->sec.peer_key ? a->sec.peer_key
                                        : aftp_cli_known_hosts_path(&a->sec, buf, sizeof buf);
    aftp_cli_format_fingerprint(pr->server_key, answered, sizeof answered);
    aftp_cli_format_fingerprint(keys->peer_key, pinned, sizeof pinned);
    aftp_cli_error("the server at %s answers with key %s but %s is pinned for it in %s: the "
                   "server's key changed, or this is not the server you expect (that answer is "
                   "not authenticated: a hint, not proof; check the key with its operator)",
                   a->peer_text, answered, pinned, where ? where : "the known hosts");
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
static int transfer(const send_args *args, aftp_cli_secrets *keys, aftp_cli_report *r)
{
    const send_args a = *args;
    aftp_push_result pr;
    const aftp_io_result *res = &pr.io;
    const char *slash = strrchr(a.file, '/');
    aftp_path_printable(a.faux_name[0] ? a.faux_name : slash ? slash + 1 : a.file, r->name,
                        sizeof r->name);
    aftp_push_opts o = {.file = a.file, .peer = (struct sockaddr *)&a.peer,
                        .peer_len = a.peer_len, .rate_bps = a.rate_bps,
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
        return AFTP_EXIT_OK;
    }
    /* Ctrl-C before any datagram (a slow open of the source, say) is a
     * cancel, whatever the local step it broke made of it. */
    if (res->phase == AFTP_IO_PHASE_LOCAL && r->interrupt)
        return aftp_cli_interrupted_early();
    if (pr.key_answer == AFTP_PUSH_KEY_OTHER)
        explain_other_key(&a, &pr, keys);
    else
        explain_failure(&a, r, &pr, keys);
    return send_exit_code(res);
}

static int run_send(const send_args *a, aftp_cli_secrets *keys)
{
    aftp_cli_report r;
    aftp_cli_report_init(&r, 1, a->common.quiet);
    /* From here on SIGINT/SIGTERM cancel (exit 7), whatever step they break. */
    aftp_cli_catch_signals(&r);
    int rc = a->progress_log != NULL ? aftp_cli_report_log_to(&r, a->progress_log) : AFTP_EXIT_OK;
    if (rc != AFTP_EXIT_OK)
        return rc;
    rc = transfer(a, keys, &r);
    aftp_cli_report_close(&r);
    return rc;
}

int aftp_cli_send(int argc, char **argv)
{
    send_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_send_args(argc, argv, &a);
    if (rc != AFTP_EXIT_OK)
        return rc < 0 ? AFTP_EXIT_OK : rc;
    aftp_cli_secrets *keys = aftp_cli_secrets_new();
    if (keys == NULL) {
        aftp_cli_error("cannot allocate memory for keys");
        return AFTP_EXIT_FAILED;
    }
    rc = run_send(&a, keys);
    aftp_cli_secrets_free(keys); /* wiped: the engine made its own copies */
    return rc;
}
