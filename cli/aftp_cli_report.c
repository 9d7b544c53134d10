/* What aftp send and aftp recv share: their lines on stderr and stdout,
 * the progress line, the run's output, signals and the common options. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aftp_cli_base.h"

/* The latest error line, which aftp send --json repeats in its error object. */
static char last_error[2048];

/* aftp_cli_stamp_lines: stderr's lines begin with the time. */
static int stamp_lines;

void aftp_cli_stamp_lines(int on)
{
    stamp_lines = on;
}

void aftp_cli_format_time(char *out, size_t cap)
{
    struct timespec now;
    struct tm utc;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &utc);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &utc);
    int ms = (int)(now.tv_nsec / 1000000) % 1000;
    if (n > 0 && n < cap)
        snprintf(out + n, cap - n, ".%03dZ", ms);
}

/* A line on stderr: "[TIME ]aftp: TEXT", written at once (one call, so
 * that lines from two threads do not mix). */
static void put_line(const char *text)
{
    char stamp[AFTP_CLI_TIME_MAX] = "";
    if (stamp_lines)
        aftp_cli_format_time(stamp, sizeof stamp);
    fprintf(stderr, "%s%saftp: %s\n", stamp, stamp_lines ? " " : "", text);
}

void aftp_cli_error(const char *fmt, ...)
{
    char line[sizeof last_error + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "error: %s", last_error);
    put_line(line);
}

const char *aftp_cli_last_error(void)
{
    return last_error;
}

void aftp_cli_vnotice(int quiet, const char *fmt, va_list ap)
{
    char line[sizeof last_error];
    if (quiet)
        return;
    vsnprintf(line, sizeof line, fmt, ap);
    put_line(line);
}

void aftp_cli_notice(int quiet, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    aftp_cli_vnotice(quiet, fmt, ap);
    va_end(ap);
}

void aftp_cli_progress_clear(void)
{
    fputs("\r\033[K", stderr);
}

void aftp_cli_progress_print(const aftp_progress *p)
{
    char eta[32] = "--:--";
    if (p->eta_seconds >= 0) {
        unsigned long left = (unsigned long)p->eta_seconds;
        snprintf(eta, sizeof eta, "%lu:%02lu", left / 60, left % 60);
    }
    fprintf(stderr, "\r\033[K%s %5.1f%%  %.1f/%.1f MiB  %.1f Mbit/s  ETA %s", p->name,
            100.0 * (double)p->bytes_done / (double)p->size, (double)p->bytes_done / 1048576.0,
            (double)p->size / 1048576.0, p->goodput_bps / 1e6, eta);
}

void aftp_cli_output_begin(aftp_cli_output *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    clock_gettime(CLOCK_MONOTONIC, &o->t0);
    o->error = AFTP_OK;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            o->json = stdout;
}

void aftp_cli_output_options(aftp_cli_output *o, const aftp_cli_common *co, int json)
{
    o->quiet = co->quiet;
    o->progress = !co->quiet && isatty(STDERR_FILENO);
    if (json)
        o->json = stdout;
}

void aftp_cli_output_clear(aftp_cli_output *o)
{
    if (o->drawn)
        aftp_cli_progress_clear();
    o->drawn = 0;
}

void aftp_cli_output_progress(aftp_cli_output *o, const aftp_progress *p)
{
    if (!o->progress)
        return;
    aftp_cli_progress_print(p);
    o->drawn = 1;
}

void aftp_cli_output_end(const aftp_cli_output *o, int exit_status, size_t files)
{
    if (o->json == NULL)
        return;
    if (exit_status != AFTP_EXIT_OK) {
        int error = o->error != AFTP_OK ? o->error : aftp_cli_error_of_exit(exit_status);
        const char *message = aftp_cli_last_error();
        aftp_cli_json_error(o->json, error, message[0] ? message : aftp_strerror(error),
                            exit_status);
    }
    aftp_cli_json_summary(o->json, exit_status, files, o->delivered, o->bytes,
                          aftp_cli_seconds_since(&o->t0), o->send_summary);
}

double aftp_cli_duplicate_pct(uint64_t duplicates, uint64_t received)
{
    return 100.0 * (double)duplicates / (double)(received ? received : 1);
}

void aftp_cli_summary_print(const aftp_cli_summary *s)
{
    double mbit = s->seconds > 0 ? (double)s->size * 8 / s->seconds / 1e6 : 0;
    char hex[2 * AFTP_DIGEST_LEN + 1];
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", s->digest[i]);
    char cap[48] = "";
    if (s->rate_cap_bps)
        snprintf(cap, sizeof cap, ", rate cap %.1f Mbit/s", (double)s->rate_cap_bps / 1e6);
    printf("%s %s: %llu bytes in %.3f s, %.1f Mbit/s goodput, %.2f%% %s, xxh3-128 %s, %s%s%s%s\n",
           s->sender ? "sent" : "received", s->name, (unsigned long long)s->size, s->seconds,
           mbit, s->repeated_pct, s->sender ? "retransmitted" : "duplicate", hex,
           aftp_cli_cipher_name(s->cipher), s->peer ? ", " : "", s->peer ? s->peer : "", cap);
    fflush(stdout);
}

int aftp_cli_interrupted_early(void)
{
    aftp_cli_error("interrupted before the transfer started");
    return AFTP_EXIT_CANCELLED;
}

static atomic_int signal_count;
/* Lock-free, so the handler may read it whenever the signal comes. */
static _Atomic(aftp_client *) signal_client;
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "the signal handler reads signal_client");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler counts in signal_count");

static void on_signal(int sig)
{
    (void)sig;
    signal_count++;
    aftp_client_cancel(signal_client); /* async-signal-safe; NULL-safe */
}

void aftp_cli_cancel_on_signal(aftp_client *c)
{
    signal_client = c;
}

int aftp_cli_interrupted(void)
{
    return signal_count;
}

double aftp_cli_seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

void aftp_cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: ppoll wakes up at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Seconds (decimal) to nanoseconds, in (0, 1 day]. */
static int parse_seconds(const char *text, uint64_t *ns)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !(v > 0 && v <= 86400))
        return AFTP_ERR_INVALID_ARGUMENT;
    *ns = (uint64_t)(v * 1e9);
    return AFTP_OK;
}

static int parse_mtu(const char *text, unsigned *mtu)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < AFTP_CLIENT_MIN_MTU || v > AFTP_CLIENT_MAX_MTU)
        return AFTP_ERR_INVALID_ARGUMENT;
    *mtu = (unsigned)v;
    return AFTP_OK;
}

int aftp_cli_common_option(int c, const char *arg, aftp_cli_common *co)
{
    switch (c) {
    case AFTP_CLI_OPT_MTU:
        if (parse_mtu(arg, &co->mtu) != AFTP_OK) {
            aftp_cli_error("bad MTU '%s' (bytes of an IP packet on the path, %u to %u, e.g. "
                           "9000 for jumbo frames)", arg, AFTP_CLIENT_MIN_MTU, AFTP_CLIENT_MAX_MTU);
            return AFTP_EXIT_USAGE;
        }
        return AFTP_EXIT_OK;
    case 't':
        if (parse_seconds(arg, &co->idle_timeout_ns) != AFTP_OK) {
            aftp_cli_error("bad idle timeout '%s' (seconds, e.g. 30 or 0.5)", arg);
            return AFTP_EXIT_USAGE;
        }
        return AFTP_EXIT_OK;
    case 'q':
        co->quiet = 1;
        return AFTP_EXIT_OK;
    case 'h':
        aftp_cli_usage(stdout);
        return -1;
    default:
        return AFTP_EXIT_USAGE; /* getopt has said what was wrong */
    }
}

uint64_t aftp_cli_idle_ms(const aftp_cli_common *co)
{
    return (co->idle_timeout_ns + 999999) / 1000000;
}
