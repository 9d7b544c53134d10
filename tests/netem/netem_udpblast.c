/*
 * netem_udpblast: a paced UDP source and a counting sink, to measure what an
 * emulated link delivers (rate, loss, duplicates, reordering).
 *
 *   netem_udpblast sink --port P [--seconds MAX] [--idle-ms N] [--ready-file F]
 *   netem_udpblast send --to ADDR --port P --rate BITS_PER_S --size PAYLOAD --seconds S
 *
 * --rate counts IP bytes (payload + 28), like the link profiles. Each datagram
 * carries its sequence number; the sink prints one JSON line with what it saw,
 * the sender one JSON line with what it sent. Addresses must be loopback or the
 * emulated WAN's own (198.18.0.0/15): this tool never sends anywhere else.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 32
#define SEND_BATCH 8 /* datagrams per sendmmsg: small bursts, smooth pacing */
#define MAX_PAYLOAD 65507
#define SEQ_BITMAP_BITS (1u << 27) /* 134M datagrams: far beyond any test */
#define IP_UDP_HEADERS 28

struct options {
    const char *to, *ready_file;
    unsigned port, size;
    double rate_bps, seconds, idle_ms;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
                          .tv_nsec = (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Loopback or 198.18.0.0/15 only: the test must never reach a real network. */
static int allowed_destination(struct in_addr a)
{
    uint32_t h = ntohl(a.s_addr);
    return (h >> 24) == 127 || (h >> 17) == (0xC612u >> 1);
}

static void big_buffers(int fd)
{
    int size = 64 << 20;
    /* FORCE passes net.core.[rw]mem_max when privileged; plain otherwise. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

static int run_send(const struct options *o)
{
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (!o->to || inet_pton(AF_INET, o->to, &dst.sin_addr) != 1 ||
        !allowed_destination(dst.sin_addr) || o->size < 8 || o->size > MAX_PAYLOAD ||
        o->rate_bps <= 0) {
        fprintf(stderr, "send: need --to (127/8 or 198.18/15), --rate > 0, --size 8..%d\n",
                MAX_PAYLOAD);
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
        perror("send: socket");
        return 1;
    }
    big_buffers(fd);
    static uint8_t bufs[BATCH][MAX_PAYLOAD];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = o->size};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    double ns_per_packet = (o->size + IP_UDP_HEADERS) * 8.0 * 1e9 / o->rate_bps;
    uint64_t start = now_ns(), end = start + (uint64_t)(o->seconds * 1e9);
    uint64_t seq = 0, errors = 0, paced_from = 0, t;
    while ((t = now_ns()) < end) {
        uint64_t due = start + (uint64_t)((double)(seq - paced_from) * ns_per_packet);
        if (t > due + 1000000) {
            /* Fell behind (no CPU): restart the schedule from here instead of
             * catching up with a burst the link would have to drop. */
            start = t;
            paced_from = seq;
        } else {
            sleep_until(due);
        }
        for (int i = 0; i < SEND_BATCH; i++) {
            uint64_t s = seq + (uint64_t)i;
            memcpy(bufs[i], &s, sizeof s);
        }
        int n = sendmmsg(fd, msgs, SEND_BATCH, 0);
        if (n < 0) {
            errors++; /* ENOBUFS: the batch is lost at the source */
            n = SEND_BATCH;
        }
        seq += (uint64_t)n;
    }
    start = end - (uint64_t)(o->seconds * 1e9);
    double secs = o->seconds;
    printf("{\"sent\":%" PRIu64 ",\"send_errors\":%" PRIu64 ",\"seconds\":%.6f,"
           "\"ip_rate_bps\":%.0f}\n",
           seq, errors, secs, (double)seq * (o->size + IP_UDP_HEADERS) * 8.0 / secs);
    close(fd);
    return 0;
}

struct sink_counts {
    uint64_t packets, unique, duplicates, reordered, payload_bytes, ip_bytes;
    uint64_t first_ns, last_ns, first_bytes, max_seq_plus1;
};

static void count_datagram(struct sink_counts *c, uint8_t *seen, const uint8_t *data,
                           size_t len, uint64_t t)
{
    uint64_t seq;
    if (len < sizeof seq)
        return;
    memcpy(&seq, data, sizeof seq);
    if (c->packets++ == 0) {
        c->first_ns = t;
        c->first_bytes = len;
    }
    c->last_ns = t;
    c->payload_bytes += len;
    c->ip_bytes += len + IP_UDP_HEADERS;
    if (seq >= SEQ_BITMAP_BITS)
        return;
    if (seen[seq / 8] & (1u << (seq % 8))) {
        c->duplicates++;
        return;
    }
    seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
    c->unique++;
    if (seq + 1 < c->max_seq_plus1)
        c->reordered++;
    else
        c->max_seq_plus1 = seq + 1;
}

static void print_sink(const struct sink_counts *c)
{
    double span = (double)(c->last_ns - c->first_ns) / 1e9;
    /* The rate over first..last arrival leaves out the first datagram,
     * whose bytes arrived before the span starts. */
    double payload_rate = span > 0 ? (double)(c->payload_bytes - c->first_bytes) * 8 / span : 0;
    double ip_rate = span > 0 ? (double)(c->ip_bytes - c->first_bytes - IP_UDP_HEADERS) * 8 / span
                              : 0;
    printf("{\"packets\":%" PRIu64 ",\"unique\":%" PRIu64 ",\"duplicates\":%" PRIu64
           ",\"reordered\":%" PRIu64 ",\"max_seq_plus1\":%" PRIu64 ",\"payload_bytes\":%" PRIu64
           ",\"span_s\":%.6f,\"payload_rate_bps\":%.0f,\"ip_rate_bps\":%.0f}\n",
           c->packets, c->unique, c->duplicates, c->reordered, c->max_seq_plus1,
           c->payload_bytes, span, payload_rate, ip_rate);
}

static int run_sink(const struct options *o)
{
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&any, sizeof any) != 0) {
        perror("sink: bind");
        return 1;
    }
    big_buffers(fd);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 50000}; /* to check the deadlines */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t *seen = calloc(SEQ_BITMAP_BITS / 8, 1);
    static uint8_t bufs[BATCH][MAX_PAYLOAD];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = MAX_PAYLOAD};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    if (!seen)
        return 1;
    if (o->ready_file) {
        FILE *f = fopen(o->ready_file, "w");
        if (f)
            fclose(f);
    }
    struct sink_counts c = {0};
    uint64_t deadline = now_ns() + (uint64_t)(o->seconds * 1e9);
    uint64_t idle_ns = (uint64_t)(o->idle_ms * 1e6);
    for (;;) {
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        uint64_t t = now_ns();
        for (int i = 0; i < n; i++)
            count_datagram(&c, seen, bufs[i], msgs[i].msg_len, t);
        if (t > deadline || (c.packets > 0 && t - c.last_ns > idle_ns))
            break;
    }
    print_sink(&c);
    free(seen);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {.port = 9000, .size = 1472, .seconds = 3, .idle_ms = 1000};
    if (argc < 2) {
        fprintf(stderr, "usage: netem_udpblast send|sink [--to A] [--port P] [--rate BPS] "
                        "[--size N] [--seconds S] [--idle-ms N] [--ready-file F]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--to") == 0)
            o.to = v;
        else if (strcmp(k, "--port") == 0)
            o.port = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--rate") == 0)
            o.rate_bps = strtod(v, NULL);
        else if (strcmp(k, "--size") == 0)
            o.size = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--seconds") == 0)
            o.seconds = strtod(v, NULL);
        else if (strcmp(k, "--idle-ms") == 0)
            o.idle_ms = strtod(v, NULL);
        else if (strcmp(k, "--ready-file") == 0)
            o.ready_file = v;
        else {
            fprintf(stderr, "unknown option %s\n", k);
            return 2;
        }
    }
    if (strcmp(argv[1], "send") == 0)
        return run_send(&o);
    if (strcmp(argv[1], "sink") == 0)
        return run_sink(&o);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
