#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aftp_admit.h"
#include "aftp_cli.h"
#include "aftp_explain.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "aftp_serve.h"
#include "aftp_store.h"
#include "common/aftp_keyfile.h"

typedef struct recv_args {
    const char *listen_text;
    const char *dir;
    int once;
    int overwrite;
    aftp_cli_common common;
    aftp_cli_security sec;
    struct sockaddr_storage listen;
    socklen_t listen_len;
} recv_args;

enum { OPT_ONCE = 256, OPT_OVERWRITE };

static int parse_recv_options(int argc, char **argv, recv_args *a)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'}, {"dir", required_argument, NULL, 'd'},
        {"once", no_argument, NULL, OPT_ONCE}, {"overwrite", no_argument, NULL, OPT_OVERWRITE},
        {"authorized-keys", required_argument, NULL, AFTP_CLI_OPT_AUTHORIZED_KEYS},
        AFTP_CLI_SECURITY_LONG, AFTP_CLI_COMMON_LONG};
    int c, rc;
    a->common.idle_timeout_ns = AFTP_CLI_DEFAULT_IDLE_NS;
    while ((c = getopt_long(argc, argv, "l:d:" AFTP_CLI_COMMON_SHORT, opts, NULL)) != -1) {
        if (c == 'l')
            a->listen_text = optarg;
        else if (c == 'd')
            a->dir = optarg;
        else if (c == OPT_ONCE)
            a->once = 1;
        else if (c == OPT_OVERWRITE)
            a->overwrite = 1;
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
        aftp_cli_error("recv needs --listen [ADDR:]PORT and --dir DIR (aftp --help)");
        return AFTP_EXIT_USAGE;
    }
    if (aftp_faux_is(a->dir) && strcmp(a->dir, AFTP_FAUX_PREFIX) != 0) {
        aftp_cli_error("a faux:// destination takes no path: --dir faux://");
        return AFTP_EXIT_USAGE;
    }
    if (aftp_parse_addr(a->listen_text, 1, &a->listen, &a->listen_len) != AFTP_OK) {
        aftp_cli_error("bad listen address '%s' ([ADDR:]PORT, port 0-65535)", a->listen_text);
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

/* The server's keys: its identity, the clients it admits, the policy. */
typedef struct recv_keys {
    aftp_cli_secrets *secrets;
    char authorized_path[4096];
    aftp_keyfile_list authorized;
    aftp_admit admit;
} recv_keys;

typedef struct recv_app {
    aftp_cli_report report;   /* first: the io hooks' `app` is the report */
    double idle_s;
    recv_keys *keys;
} recv_app;

static void on_listening(void *app, const struct sockaddr *local)
{
    char where[64];
    aftp_format_addr(local, where, sizeof where);
    aftp_cli_notice(app, "listening on %s", where);
}

/* "from ADDR key aftp-x25519 <base64> "comment"": who a client is. */
static void describe_key(const recv_app *ra, const struct sockaddr *peer, const uint8_t *client_key,
                         char *out, size_t cap)
{
    aftp_serve_describe_client(peer, client_key,
                               aftp_keyfile_list_comment(&ra->keys->authorized, client_key), out,
                               cap);
}

/* Who a session was with. */
static void describe_client(const recv_app *ra, const aftp_io_result *res,
                            const struct sockaddr *peer, char *out, size_t cap)
{
    char who[64];
    if (res->have_peer_key) {
        describe_key(ra, peer, res->peer_key, out, cap);
        return;
    }
    aftp_format_addr(peer, who, sizeof who);
    snprintf(out, cap, "from %s%s", who, res->connected ? " (unauthenticated)" : "");
}

/* A HELLO that started nothing: the client was told nothing (spec 14.2.5),
 * its operator is, at most AFTP_SERVE_DROP_REPORTS times a minute. */
static void on_hello_dropped(void *app, const struct sockaddr *from, int why,
                             const uint8_t *client_key, uint64_t unreported)
{
    recv_app *ra = app;
    char client[512] = "", line[1200];
    if (client_key != NULL)
        describe_key(ra, from, client_key, client, sizeof client);
    aftp_serve_explain_drop(from, why, client, "--psk-file differs", &ra->keys->admit, unreported,
                            line, sizeof line);
    aftp_cli_error("%s", line);
}

static void on_session_end(void *app, const aftp_io_result *res, const struct sockaddr *peer)
{
    recv_app *ra = app;
    char client[512], refusal[4400], line[5200];
    describe_client(ra, res, peer, client, sizeof client);
    if (res->error == AFTP_OK) {
        if (res->files_ok > 0)
            aftp_cli_print_summary(&ra->report, &res->stats, client);
        return;
    }
    aftp_admit_explain_unknown(&ra->keys->admit, ra->keys->authorized_path, refusal,
                               sizeof refusal);
    aftp_serve_explain_failure(res, client, ra->keys->admit.have_rejected ? refusal : NULL,
                               ra->idle_s, "--idle-timeout", line, sizeof line);
    aftp_cli_error("%s", line);
}

/* The authorized keys; a server that admits nobody is a mistake. */
static int load_authorized(const recv_args *a, recv_keys *k)
{
    char err[512];
    const char *path = aftp_cli_key_path(a->sec.authorized_keys, AFTP_CLI_AUTHORIZED_NAME,
                                         k->authorized_path, sizeof k->authorized_path);
    if (path == NULL) {
        aftp_cli_error("HOME is not set: give the clients' keys with --authorized-keys FILE");
        return AFTP_EXIT_USAGE;
    }
    if (path != k->authorized_path)
        snprintf(k->authorized_path, sizeof k->authorized_path, "%s", path);
    int rc = aftp_keyfile_authorized_load(k->authorized_path, &k->authorized, err, sizeof err);
    if (rc == AFTP_OK && k->authorized.count > 0)
        return AFTP_EXIT_OK;
    aftp_cli_error("authorized keys: %s (put each client's public key line, its "
                   "~/.aftp/id_x25519.pub, in that file)",
                   rc == AFTP_OK ? "no key in the file: it admits nobody" : err);
    return AFTP_EXIT_AUTH;
}

/* Identity, pre-shared key and admitted clients into k and *sec. */
static int load_recv_keys(const recv_args *a, const aftp_cli_report *r, recv_keys *k,
                          aftp_security_settings *sec)
{
    char line[128], fingerprint[AFTP_KEYFILE_FINGERPRINT_MAX];
    int rc;
    memset(sec, 0, sizeof *sec);
    sec->cipher = a->sec.cipher;
    if (a->sec.cipher == AFTP_CIPHER_NONE) {
        aftp_cli_notice(r, "warning: --cipher none: transfers are neither encrypted nor "
                           "authenticated");
        return AFTP_EXIT_OK;
    }
    if ((rc = aftp_cli_load_identity(&a->sec, k->secrets)) != AFTP_EXIT_OK ||
        (rc = aftp_cli_load_psk(&a->sec, k->secrets)) != AFTP_EXIT_OK ||
        (rc = load_authorized(a, k)) != AFTP_EXIT_OK)
        return rc;
    aftp_admit_init(&k->admit, &k->authorized, k->secrets->have_psk ? k->secrets->psk : NULL);
    sec->identity = k->secrets->identity;
    sec->peers = aftp_admit_policy(&k->admit);
    aftp_keyfile_key_text(k->secrets->public_key, line, sizeof line);
    aftp_keyfile_fingerprint(k->secrets->public_key, fingerprint, sizeof fingerprint);
    aftp_cli_notice(r, "server key %s", line);
    /* What a client's user compares before trusting this server (14.9). */
    aftp_cli_notice(r, "server fingerprint %s", fingerprint);
    return AFTP_EXIT_OK;
}

static int serve(const recv_args *a, recv_app *app, int dirfd)
{
    aftp_io_result res;
    aftp_serve_opts o = {.listen = (struct sockaddr *)&a->listen, .listen_len = a->listen_len,
                         .dirfd = dirfd, .faux = dirfd < 0, .overwrite = a->overwrite,
                         .once = a->once,
                         .idle_timeout_ns = a->common.idle_timeout_ns,
                         /* Accept what a jumbo-frame path carries: the sender's
                          * --mtu decides (the smaller of the two is used). */
                         .max_datagram = aftp_cli_max_datagram(&a->common, AFTP_IO_MAX_MTU),
                         .hooks = aftp_cli_report_hooks(&app->report),
                         .on_listening = on_listening, .on_session_end = on_session_end,
                         .on_hello_dropped = on_hello_dropped};
    int rc = load_recv_keys(a, &app->report, app->keys, &o.security);
    if (rc != AFTP_EXIT_OK)
        return rc;
    rc = aftp_serve_run(&o, &res);
    if (res.phase == AFTP_IO_PHASE_LOCAL) {
        aftp_cli_error("%s", res.message[0] ? res.message : aftp_strerror(rc));
        return AFTP_EXIT_NETWORK;
    }
    return aftp_cli_exit_code(rc);
}

/* The destination directory, open, once it is known that files can be
 * created in it: a server that cannot store anything says so when it
 * starts, not at its first client. */
static int open_destination(const char *dir, int *dirfd)
{
    char why[4400];
    if (aftp_store_open_dir(dir, "--dir", dirfd, why, sizeof why) == AFTP_OK)
        return AFTP_EXIT_OK;
    aftp_cli_error("%s", why);
    return AFTP_EXIT_LOCAL_FILE;
}

static int run_recv(const recv_args *args)
{
    const recv_args a = *args;
    recv_app app;
    recv_keys keys;
    /* --dir faux:// keeps nothing (aftp_faux.h) */
    int dirfd = -1;
    if (strcmp(a.dir, AFTP_FAUX_PREFIX) != 0) {
        int rc = open_destination(a.dir, &dirfd);
        if (rc != AFTP_EXIT_OK)
            return rc;
    }
    memset(&keys, 0, sizeof keys);
    aftp_cli_report_init(&app.report, 0, a.common.quiet);
    app.idle_s = aftp_cli_idle_seconds(&a.common);
    app.keys = &keys;
    aftp_cli_catch_signals(&app.report);
    keys.secrets = aftp_cli_secrets_new();
    int rc = keys.secrets ? serve(&a, &app, dirfd) : AFTP_EXIT_FAILED;
    if (dirfd >= 0)
        close(dirfd);
    aftp_admit_fini(&keys.admit);
    aftp_keyfile_list_free(&keys.authorized);
    aftp_cli_secrets_free(keys.secrets);
    return rc;
}

int aftp_cli_recv(int argc, char **argv)
{
    recv_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_recv_args(argc, argv, &a);
    return rc == AFTP_EXIT_OK ? run_recv(&a) : rc < 0 ? AFTP_EXIT_OK : rc;
}
