/*
 * The aftp command-line tool: shared pieces of its subcommands.
 */
#ifndef AFTP_CLI_H
#define AFTP_CLI_H

#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aftp/aftp_engine.h"
#include "aftp_session.h"

#define AFTP_CLI_DEFAULT_RATE UINT64_C(1000000000) /* 1 Gbit/s */

/* Exit statuses (cli/EXIT_CODES.md). */
enum aftp_cli_exit {
    AFTP_EXIT_OK = 0,
    AFTP_EXIT_FAILED = 1,
    AFTP_EXIT_USAGE = 2,
    AFTP_EXIT_LOCAL_FILE = 3,
    AFTP_EXIT_NETWORK = 4,
    AFTP_EXIT_REFUSED = 5,
    AFTP_EXIT_VERIFY = 6,
    AFTP_EXIT_CANCELLED = 7
};

/* The exit status for a transfer that ended with `error` (the one table). */
int aftp_cli_exit_code(int error);

/* Per-run reporting: progress on a terminal, the summary line, errors. */
typedef struct aftp_cli_report {
    int quiet;
    int progress;             /* stderr is a terminal and not quiet */
    int sender;               /* 1: aftp send, 0: aftp recv */
    char name[160];           /* printable file name */
    uint64_t size;
    uint64_t t_connected;     /* clock at the handshake */
    uint64_t t_end;           /* clock at the file's end */
    uint8_t digest[AFTP_DIGEST_LEN];
    int have_digest;
    uint64_t last_tick_ns, last_tick_bytes;
    volatile sig_atomic_t interrupt;
} aftp_cli_report;

void aftp_cli_report_init(aftp_cli_report *r, int sender, int quiet);
/* aftp_io_hooks pointing at the report's callbacks. */
aftp_io_hooks aftp_cli_report_hooks(aftp_cli_report *r);
/* The one-line summary on stdout of a verified file. */
void aftp_cli_print_summary(const aftp_cli_report *r, const aftp_stats *st);
/* "aftp: error: ..." on stderr. */
void aftp_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void aftp_cli_notice(const aftp_cli_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* SIGINT/SIGTERM increment r->interrupt (the transfer is cancelled). */
void aftp_cli_catch_signals(aftp_cli_report *r);
/* Options both subcommands take: -t/--idle-timeout, -q/--quiet, -h/--help. */
typedef struct aftp_cli_common {
    uint64_t idle_timeout_ns;
    int quiet;
} aftp_cli_common;
#define AFTP_CLI_COMMON_SHORT "t:qh"
#define AFTP_CLI_COMMON_LONG                                                                   \
    {"idle-timeout", required_argument, NULL, 't'}, {"quiet", no_argument, NULL, 'q'},         \
        {"help", no_argument, NULL, 'h'}, { NULL, 0, NULL, 0 }
#define AFTP_CLI_DEFAULT_IDLE_NS UINT64_C(30000000000)
/* Handles getopt's answer `c` for a common option: AFTP_EXIT_OK when taken,
 * AFTP_EXIT_USAGE for a bad or unknown option, -1 after --help. */
int aftp_cli_common_option(int c, const char *arg, aftp_cli_common *co);
/* The idle timeout in force, in seconds, for messages. */
double aftp_cli_idle_seconds(const aftp_cli_common *co);

int aftp_cli_send(int argc, char **argv);
int aftp_cli_recv(int argc, char **argv);
void aftp_cli_usage(FILE *to);

#endif /* AFTP_CLI_H */
