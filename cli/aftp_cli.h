/*
 * The aftp command-line tool: aftp send's per-run reporting, still on the
 * library's internal session hooks until it runs on the client API's
 * callbacks, over the public-only aftp_cli_base.h (aftp recv runs on the
 * server API and needs only that).
 */
#ifndef AFTP_CLI_H
#define AFTP_CLI_H

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>

#include "aftp_cli_base.h"
#include "aftp_meter.h"
#include "aftp_io.h"

/* Per-run reporting: progress on a terminal, the summary line, errors. */
typedef struct aftp_cli_report {
    int quiet;
    int progress;             /* stderr is a terminal and not quiet */
    int sender;               /* 1: aftp send, 0: aftp recv */
    char name[160];           /* printable file name */
    uint64_t size;
    uint32_t block_size;      /* as offered (known at the file's end) */
    uint64_t t_connected;     /* clock at the handshake */
    uint64_t t_end;           /* clock at the file's end */
    uint8_t digest[AFTP_DIGEST_LEN];
    int have_digest;
    aftp_meter meter;         /* the current file's progress figures */
    uint64_t t_start;         /* clock at aftp_cli_report_init */
    FILE *log;                /* --progress-log, or NULL */
    FILE *json;               /* aftp send --json: its objects go here (stdout), or NULL */
    const char *source;       /* the file as given on the command line */
    atomic_int interrupt;
} aftp_cli_report;

void aftp_cli_report_init(aftp_cli_report *r, int sender, int quiet);
/* Every progress tick also appends a line to the file at `path` (made or
 * truncated): AFTP_EXIT_OK, or AFTP_EXIT_LOCAL_FILE with the error said
 * (AFTP_EXIT_CANCELLED when a signal broke the open, as of a FIFO). */
int aftp_cli_report_log_to(aftp_cli_report *r, const char *path);
/* Closes the progress log, if any. */
void aftp_cli_report_close(aftp_cli_report *r);
/* aftp_io_hooks pointing at the report's callbacks. */
aftp_io_hooks aftp_cli_report_hooks(aftp_cli_report *r);
/* The one-line summary on stdout of a verified file; `peer` (may be NULL)
 * is appended: who sent it. */
void aftp_cli_print_summary(const aftp_cli_report *r, const aftp_stats *st, const char *peer);
void aftp_cli_notice(const aftp_cli_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* SIGINT/SIGTERM increment r->interrupt (the transfer is cancelled). */
void aftp_cli_catch_signals(aftp_cli_report *r);

#endif /* AFTP_CLI_H */
