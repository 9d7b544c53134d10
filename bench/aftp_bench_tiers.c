/* One file sent through one tier of libaftp's client API, for
 * bench/tiers.sh: the blocking tier (aftp_client_send) or the libuv tier
 * (aftp_uv_client_send on a loop of its own), with the settings of
 * `aftp send`'s defaults unless told otherwise. Built against the public
 * headers and libaftp alone (tiers.sh compiles it with -I include only).
 * A progress callback counts calls in both tiers, as an embedder's would:
 * in the uv tier each call crosses to the loop thread.
 *
 * usage: aftp_bench_tiers --tier blocking|uv --identity KEY --peer-key PUB
 *                         [--rate RATE] [--policy fair|fixed|high|low]
 *                         FILE HOST:PORT
 * Prints one line: tier, bytes, seconds (the send, inside the process),
 * goodput in Mbit/s, progress calls. Exit status 0 when the file was
 * delivered and verified, 1 when the send failed (its error on stderr),
 * 2 for a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>
#include <aftp/aftp.h>
#include <aftp/aftp_uv.h>

typedef struct bench {
    const char *tier, *identity, *peer_key, *file, *host_port;
    uint64_t rate;
    int policy;
    long progress_calls;
    uint64_t bytes;
    int status;
    char errmsg[1024];
} bench;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(const char *why)
{
    fprintf(stderr, "aftp_bench_tiers: %s\n"
                    "usage: aftp_bench_tiers --tier blocking|uv --identity KEY --peer-key PUB\n"
                    "                        [--rate RATE] [--policy fair|fixed|high|low]\n"
                    "                        FILE HOST:PORT\n", why);
    return 2;
}

static int policy_from(const char *name)
{
    static const char *const names[] = {"fair", "fixed", "high", "low"};
    static const int policies[] = {AFTP_CC_FAIR, AFTP_CC_FIXED, AFTP_CC_HIGH, AFTP_CC_LOW};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return policies[i];
    return -1;
}

/* "500M", "2.5G", "800000": bits per second (as aftp send --rate); 0 for
 * anything else. */
static uint64_t rate_from(const char *text)
{
    char *end;
    double v = strtod(text, &end);
    const char *suffixes = "kMGT";
    const char *at = *end != '\0' && end[1] == '\0' ? strchr(suffixes, *end) : NULL;
    if (at != NULL)
        for (const char *p = suffixes; p <= at; p++)
            v *= 1000;
    else if (*end != '\0')
        return 0;
    return v >= 1 && v < 1e15 ? (uint64_t)v : 0;
}

/* The options into b; 0, or the usage error's exit status. */
static int parse(bench *b, int argc, char **argv)
{
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1];
        if (strcmp(opt, "--tier") == 0)
            b->tier = val;
        else if (strcmp(opt, "--identity") == 0)
            b->identity = val;
        else if (strcmp(opt, "--peer-key") == 0)
            b->peer_key = val;
        else if (strcmp(opt, "--rate") == 0) {
            if ((b->rate = rate_from(val)) == 0)
                return usage("--rate: bits per second, > 0, suffixes k M G (e.g. 500M)");
        } else if (strcmp(opt, "--policy") == 0) {
            if ((b->policy = policy_from(val)) < 0)
                return usage("--policy: fair, fixed, high or low");
        } else {
            return usage("unknown option");
        }
    }
    if (argc - i != 2 || b->tier == NULL || b->identity == NULL || b->peer_key == NULL)
        return usage("--tier, --identity, --peer-key, FILE and HOST:PORT are needed");
    if (strcmp(b->tier, "blocking") != 0 && strcmp(b->tier, "uv") != 0)
        return usage("--tier: blocking or uv");
    b->file = argv[i];
    b->host_port = argv[i + 1];
    return 0;
}

/* A client with b's keys and rate settings; NULL after saying why. */
static aftp_client *client_for(bench *b)
{
    aftp_client *c = NULL;
    if (aftp_client_new(&c) != AFTP_OK ||
        aftp_client_set_identity_file(c, b->identity) != AFTP_OK ||
        aftp_client_set_peer_key_file(c, b->peer_key) != AFTP_OK ||
        aftp_client_set_policy(c, b->policy) != AFTP_OK ||
        (b->rate != 0 && aftp_client_set_rate(c, b->rate) != AFTP_OK)) {
        fprintf(stderr, "aftp_bench_tiers: %s\n", c != NULL ? aftp_client_errmsg(c) : "no memory");
        aftp_client_del(c);
        return NULL;
    }
    return c;
}

static void on_progress(void *user, const aftp_progress *p)
{
    bench *b = user;
    b->progress_calls++;
    b->bytes = p->bytes_done;
}

static void on_file(void *user, const aftp_file_event *ev)
{
    bench *b = user;
    if (ev->type == AFTP_FILE_FINISHED)
        b->bytes = ev->bytes;
}

static void on_done(void *user, int status, const char *errmsg)
{
    bench *b = user;
    b->status = status;
    snprintf(b->errmsg, sizeof b->errmsg, "%s", errmsg);
}

static int send_blocking(bench *b, aftp_client *c)
{
    const char *files[] = {b->file};
    aftp_client_set_progress_cb(c, on_progress, b);
    aftp_client_set_file_cb(c, on_file, b);
    b->status = aftp_client_send(c, b->host_port, files, 1);
    snprintf(b->errmsg, sizeof b->errmsg, "%s", aftp_client_errmsg(c));
    return b->status;
}

static int send_uv(bench *b, aftp_client *c)
{
    uv_loop_t loop;
    const char *files[] = {b->file};
    aftp_uv_send_cbs cbs = {.size = sizeof cbs, .progress = on_progress, .file = on_file,
                            .done = on_done, .user = b};
    if (uv_loop_init(&loop) != 0)
        return AFTP_ERR_INTERNAL;
    int rc = aftp_uv_client_send(&loop, c, b->host_port, files, 1, &cbs, NULL);
    if (rc == AFTP_OK) {
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = b->status;
    } else {
        snprintf(b->errmsg, sizeof b->errmsg, "aftp_uv_client_send refused to start");
    }
    if (uv_loop_close(&loop) != 0 && rc == AFTP_OK)
        rc = AFTP_ERR_INTERNAL; /* a handle left on the loop: the tier's bug */
    return rc;
}

int main(int argc, char **argv)
{
    bench b = {.policy = AFTP_CC_FAIR};
    int bad = parse(&b, argc, argv);
    if (bad != 0)
        return bad;
    aftp_client *c = client_for(&b);
    if (c == NULL)
        return 1;
    double start = now_s();
    int rc = strcmp(b.tier, "uv") == 0 ? send_uv(&b, c) : send_blocking(&b, c);
    double seconds = now_s() - start;
    aftp_client_del(c);
    if (rc != AFTP_OK) {
        fprintf(stderr, "aftp_bench_tiers: %s tier: %s: %s\n", b.tier, aftp_error_name(rc),
                b.errmsg);
        return 1;
    }
    printf("tier %s bytes %llu seconds %.3f goodput_mbps %.1f progress_calls %ld\n", b.tier,
           (unsigned long long)b.bytes, seconds, (double)b.bytes * 8 / seconds / 1e6,
           b.progress_calls);
    return 0;
}
