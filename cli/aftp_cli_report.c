#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aftp_cli.h"
#include "aftp_drive.h"
#include "aftp_path.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"

/* The latest error line, which aftp send --json repeats in its error object. */
static char last_error[2048];

void aftp_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    fprintf(stderr, "aftp: error: %s\n", last_error);
}

const char *aftp_cli_last_error(void)
{
    return last_error;
}

void aftp_cli_vnotice(int quiet, const char *fmt, va_list ap)
{
    if (quiet)
        return;
    fputs("aftp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void aftp_cli_notice(const aftp_cli_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    aftp_cli_vnotice(r->quiet, fmt, ap);
    va_end(ap);
}

void aftp_cli_report_init(aftp_cli_report *r, int sender, int quiet)
{
    memset(r, 0, sizeof *r);
    r->sender = sender;
    r->quiet = quiet;
    r->progress = !quiet && isatty(STDERR_FILENO);
    r->t_start = aftp_drive_now_ns();
}

/* Tab-separated, one line per tick, for scripts and benchmarks: what the
 * progress line shows, in plain units. */
#define PROGRESS_LOG_HEADER                                                                    \
    "# seconds\tbytes_done\tgoodput_bps\tpacing_bps\tloss_ppm\tmin_rtt_us\tqueue_us\n"

int aftp_cli_report_log_to(aftp_cli_report *r, const char *path)
{
    r->log = fopen(path, "we"); /* a FIFO waits here for its reader */
    if (r->log == NULL && r->interrupt)
        return aftp_cli_interrupted_early();
    if (r->log == NULL) {
        aftp_cli_error("cannot write the progress log %s: %s", path, strerror(errno));
        return AFTP_EXIT_LOCAL_FILE;
    }
    setvbuf(r->log, NULL, _IOLBF, 0); /* whole lines for a reader that follows it */
    fputs(PROGRESS_LOG_HEADER, r->log);
    return AFTP_EXIT_OK;
}

void aftp_cli_report_close(aftp_cli_report *r)
{
    if (r->log != NULL)
        fclose(r->log);
    r->log = NULL;
}

void aftp_cli_progress_clear(void)
{
    fputs("\r\033[K", stderr);
}

static void clear_progress(const aftp_cli_report *r)
{
    if (r->progress)
        aftp_cli_progress_clear();
}

static void on_warning(void *app, const char *text)
{
    const aftp_cli_report *r = app;
    clear_progress(r);
    aftp_cli_notice(r, "warning: %s", text);
}

/* The client API's events, as aftp send --json renders them. */
static void json_file_started(const aftp_cli_report *r)
{
    aftp_file_event fe = {.type = AFTP_FILE_STARTED, .source = r->source, .name = r->name,
                          .size = r->size, .message = ""};
    if (r->json != NULL)
        aftp_cli_json_file(r->json, &fe);
}

static void json_file_done(const aftp_cli_report *r, const aftp_stats *st)
{
    aftp_file_event fe = {.type = AFTP_FILE_FINISHED, .source = r->source, .name = r->name,
                          .size = r->size, .bytes = r->size,
                          .seconds = (double)(r->t_end - r->meter.start_ns) / 1e9,
                          .retransmitted = r->size ? (double)st->payload_bytes_retransmitted /
                                                         (double)r->size
                                                   : 0,
                          .cipher = aftp_session_cipher_choice(st->cipher), .message = ""};
    memcpy(fe.digest, r->digest, AFTP_DIGEST_LEN);
    aftp_cli_json_file(r->json, &fe);
}

static void json_progress(const aftp_cli_report *r, const aftp_stats *st,
                          const aftp_meter_reading *m)
{
    aftp_progress p;
    aftp_meter_progress(&r->meter, m, st, r->name, &p);
    aftp_cli_json_progress(r->json, 0, &p);
}

static void on_event(void *app, const aftp_event *ev)
{
    aftp_cli_report *r = app;
    uint64_t now = aftp_drive_now_ns();
    switch (ev->type) {
    case AFTP_EV_CONNECTED:
        r->t_connected = now;
        break;
    case AFTP_EV_FILE_START:
        aftp_path_printable(ev->info->path, r->name, sizeof r->name);
        r->size = ev->info->size;
        r->have_digest = 0;
        aftp_meter_start(&r->meter, r->size, 0, now);
        json_file_started(r);
        break;
    case AFTP_EV_FILE_END:
        clear_progress(r);
        r->t_end = now;
        /* also for a file refused at its offer, which had no FILE_START */
        r->size = ev->info->size;
        r->block_size = ev->info->block_size;
        if (ev->error == AFTP_OK && ev->digest) {
            memcpy(r->digest, ev->digest, AFTP_DIGEST_LEN);
            r->have_digest = 1;
        }
        break;
    default:
        break;
    }
}

/* What counts as done: bytes gone out once (sender) or come in (receiver). */
static uint64_t done_count(const aftp_cli_report *r, const aftp_stats *st)
{
    return r->sender ? aftp_meter_sent_once(st) : st->payload_bytes_received;
}

/* What the rate controller sees: its pacing rate, the path's loss and
 * round-trip time, and the queue it is building. */
static void print_path_state(const aftp_stats *st)
{
    fprintf(stderr, "  rate %.1f Mbit/s  loss %.2f%%  RTT %.1f ms (+%.1f queue)",
            (double)st->pacing_rate_bps / 1e6, (double)st->recent_loss_ppm / 1e4,
            (double)st->path_min_rtt_ns / 1e6, (double)st->queue_delay_ns / 1e6);
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

static void print_progress(const aftp_cli_report *r, const aftp_stats *st,
                           const aftp_meter_reading *m)
{
    aftp_progress p;
    aftp_meter_progress(&r->meter, m, st, r->name, &p);
    aftp_cli_progress_print(&p);
    if (r->sender)
        print_path_state(st);
}

static void log_progress(const aftp_cli_report *r, const aftp_stats *st,
                         const aftp_meter_reading *m, uint64_t now_ns)
{
    fprintf(r->log, "%.3f\t%llu\t%.0f\t%llu\t%llu\t%llu\t%llu\n",
            (double)(now_ns - r->t_start) / 1e9, (unsigned long long)m->done, m->rate_bps,
            (unsigned long long)st->pacing_rate_bps, (unsigned long long)st->recent_loss_ppm,
            (unsigned long long)(st->path_min_rtt_ns / 1000),
            (unsigned long long)(st->queue_delay_ns / 1000));
}

static void on_tick(void *app, const aftp_stats *st, uint64_t now_ns)
{
    aftp_cli_report *r = app;
    aftp_meter_reading m;
    if ((!r->progress && r->log == NULL && r->json == NULL) || r->size == 0 ||
        !aftp_meter_read(&r->meter, done_count(r, st), now_ns, &m))
        return;
    if (r->progress)
        print_progress(r, st, &m);
    if (r->log != NULL)
        log_progress(r, st, &m, now_ns);
    if (r->json != NULL)
        json_progress(r, st, &m);
}

aftp_io_hooks aftp_cli_report_hooks(aftp_cli_report *r)
{
    aftp_io_hooks h = {.on_event = on_event, .on_tick = on_tick, .on_warning = on_warning,
                       .app = r, .interrupt = &r->interrupt};
    return h;
}

void aftp_cli_print_summary(const aftp_cli_report *r, const aftp_stats *st, const char *peer)
{
    if (r->json != NULL) { /* the line's figures are the "done" object's */
        json_file_done(r, st);
        return;
    }
    /* The sender knows what it repeated; the receiver only sees duplicates. */
    aftp_cli_summary s = {
        .sender = r->sender, .name = r->name, .size = r->size,
        .seconds = r->t_end > r->t_connected ? (double)(r->t_end - r->t_connected) / 1e9 : 0,
        .repeated_pct = r->sender ? 100.0 * (double)st->payload_bytes_retransmitted /
                                        (double)(r->size ? r->size : 1)
                                  : aftp_cli_duplicate_pct(st->duplicate_packets,
                                                           st->packets_received),
        .digest = r->digest, .cipher = aftp_session_cipher_choice(st->cipher), .peer = peer};
    aftp_cli_summary_print(&s);
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
    printf("%s %s: %llu bytes in %.3f s, %.1f Mbit/s goodput, %.2f%% %s, xxh3-128 %s, %s%s%s\n",
           s->sender ? "sent" : "received", s->name, (unsigned long long)s->size, s->seconds,
           mbit, s->repeated_pct, s->sender ? "retransmitted" : "duplicate", hex,
           aftp_cli_cipher_name(s->cipher), s->peer ? ", " : "", s->peer ? s->peer : "");
    fflush(stdout);
}

int aftp_cli_interrupted_early(void)
{
    aftp_cli_error("interrupted before the transfer started");
    return AFTP_EXIT_CANCELLED;
}

static aftp_cli_report *signal_report;
/* Lock-free, so the handler may read it whenever the signal comes. */
static _Atomic(aftp_client *) signal_client;
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "the signal handler reads signal_client");

static void on_signal(int sig)
{
    (void)sig;
    signal_report->interrupt++;
    aftp_client_cancel(signal_client); /* async-signal-safe; NULL-safe */
}

void aftp_cli_cancel_on_signal(aftp_client *c)
{
    signal_client = c;
}

void aftp_cli_catch_signals(aftp_cli_report *r)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    signal_report = r;
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
    if (end == text || *end != '\0' || errno != 0 || v < AFTP_IO_MIN_MTU || v > AFTP_IO_MAX_MTU)
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
                           "9000 for jumbo frames)", arg, AFTP_IO_MIN_MTU, AFTP_IO_MAX_MTU);
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

double aftp_cli_idle_seconds(const aftp_cli_common *co)
{
    return (double)co->idle_timeout_ns / 1e9;
}

uint16_t aftp_cli_max_datagram(const aftp_cli_common *co, unsigned default_mtu)
{
    return (uint16_t)AFTP_IO_DATAGRAM_FOR(co->mtu ? co->mtu : default_mtu);
}
