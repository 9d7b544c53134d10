#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aftp_cli.h"
#include "aftp_parse.h"
#include "aftp_serve.h"

typedef struct recv_args {
    const char *listen_text;
    const char *dir;
    int once;
    int overwrite;
    aftp_cli_common common;
    struct sockaddr_storage listen;
    socklen_t listen_len;
} recv_args;

enum { OPT_ONCE = 256, OPT_OVERWRITE };

static int parse_recv_options(int argc, char **argv, recv_args *a)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'}, {"dir", required_argument, NULL, 'd'},
        {"once", no_argument, NULL, OPT_ONCE}, {"overwrite", no_argument, NULL, OPT_OVERWRITE},
        AFTP_CLI_COMMON_LONG};
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
        else if ((rc = aftp_cli_common_option(c, optarg, &a->common)) != AFTP_EXIT_OK)
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
    if (aftp_parse_addr(a->listen_text, 1, &a->listen, &a->listen_len) != AFTP_OK) {
        aftp_cli_error("bad listen address '%s' ([ADDR:]PORT, port 0-65535)", a->listen_text);
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

typedef struct recv_app {
    aftp_cli_report report;   /* first: the io hooks' `app` is the report */
    double idle_s;
} recv_app;

static void on_listening(void *app, const struct sockaddr *local)
{
    char where[64];
    aftp_format_addr(local, where, sizeof where);
    aftp_cli_notice(app, "listening on %s", where);
}

static void on_session_end(void *app, const aftp_io_result *res, const struct sockaddr *peer)
{
    recv_app *ra = app;
    char who[64];
    aftp_format_addr(peer, who, sizeof who);
    if (res->error == AFTP_OK) {
        if (res->files_ok > 0)
            aftp_cli_print_summary(&ra->report, &res->stats);
        return;
    }
    if (res->error == AFTP_ERR_IDLE_TIMEOUT)
        aftp_cli_error("sender %s went silent for %.1f s (--idle-timeout)", who, ra->idle_s);
    else if (res->message[0])
        aftp_cli_error("transfer from %s failed: %s", who, res->message);
    else
        aftp_cli_error("transfer from %s failed: %s", who, aftp_strerror(res->error));
}

static int run_recv(const recv_args *args)
{
    const recv_args a = *args;
    recv_app app;
    aftp_io_result res;
    int rc;
    int dirfd = open(a.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        aftp_cli_error("cannot use destination directory %s: %s", a.dir, strerror(errno));
        return AFTP_EXIT_LOCAL_FILE;
    }
    aftp_cli_report_init(&app.report, 0, a.common.quiet);
    app.idle_s = aftp_cli_idle_seconds(&a.common);
    aftp_cli_catch_signals(&app.report);
    aftp_serve_opts o = {.listen = (struct sockaddr *)&a.listen, .listen_len = a.listen_len,
                         .dirfd = dirfd, .overwrite = a.overwrite, .once = a.once,
                         .idle_timeout_ns = a.common.idle_timeout_ns,
                         .hooks = aftp_cli_report_hooks(&app.report),
                         .on_listening = on_listening, .on_session_end = on_session_end};
    rc = aftp_serve_run(&o, &res);
    close(dirfd);
    if (res.phase == AFTP_IO_PHASE_LOCAL) {
        aftp_cli_error("%s", res.message[0] ? res.message : aftp_strerror(rc));
        return AFTP_EXIT_NETWORK;
    }
    return aftp_cli_exit_code(rc);
}

int aftp_cli_recv(int argc, char **argv)
{
    recv_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_recv_args(argc, argv, &a);
    return rc == AFTP_EXIT_OK ? run_recv(&a) : rc < 0 ? AFTP_EXIT_OK : rc;
}
