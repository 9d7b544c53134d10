/*
 * aftp-linkemu: a user-space WAN emulator for hosts without the kernel's
 * netem qdisc. It creates one TUN device in each of two network namespaces
 * (sender side, receiver side) and moves IP packets between them, one thread
 * per direction, through the link model of linkemu_model.c.
 *
 * The datapath never allocates: each direction reads packets straight into a
 * preallocated FIFO ring (the delay line) and writes them out of it when due.
 * What the emulator could not do in time is counted apart from the model's
 * own drops, so an overloaded run is reported INVALID instead of trusted:
 *   - packets the kernel dropped because the emulator read too slowly
 *     (the TUN device's tx_dropped),
 *   - packets that found the ring full, or that a write rejected,
 *   - packets delivered later than --late-us after their due time.
 *
 * Other modes print what the netem backend and the tests need from a profile
 * (--describe, --netem-args, --tbf-args), so the profile has one parser.
 */
#define _GNU_SOURCE /* setns, ppoll */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "linkemu_model.h"

/* Packets read before the next dispatch check: more than a TUN queue holds
 * (wan.sh sets txqueuelen 1000), so one batch empties it and the arrival
 * times spread over the whole wait stay truthful. */
#define INGEST_BATCH 1024
#define MAX_IDLE_WAIT_NS 50000000ull /* bounds the wait so a stop request is seen */
#define RING_SLACK_BYTES (1u << 20)

typedef _Atomic uint64_t counter_t;

/* Counters have a single writer (their direction's thread); the main thread
 * reads them for reports, so a relaxed load + store is enough and cheaper
 * than a locked add. */
static void count_add(counter_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static uint64_t count_get(counter_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static void count_max(counter_t *c, uint64_t v)
{
    if (v > count_get(c))
        atomic_store_explicit(c, v, memory_order_relaxed);
}

struct dir_stats {
    counter_t rx_packets, rx_bytes;         /* read from the input device */
    counter_t tx_packets, tx_bytes;         /* written to the output device */
    counter_t loss_drops, queue_drops;      /* the model's intended drops */
    counter_t duplicated, reordered;
    counter_t late_packets, max_late_ns;    /* overload: delivered too late */
    counter_t ring_full_drops, write_errors; /* overload: could not be served */
    counter_t undeliverable;                /* the output device refused (down) */
    counter_t cpu_ns_at_exit;               /* the thread's CPU time when it ended */
};

/* A FIFO of records (header + packet) in one preallocated area. Data lies in
 * [head, tail), or in [head, wrap_at) then [0, tail) once the writer wrapped. */
struct ring {
    uint8_t *buf;
    size_t size, head, tail, wrap_at, count;
};

struct record {
    uint64_t due_ns;
    uint32_t len;
    uint32_t copies;
    uint8_t data[];
};

struct direction {
    const char *name;
    int in_fd, out_fd;
    unsigned mtu;
    uint64_t late_tolerance_ns, tick_ns;
    int rt_prio;
    atomic_int realtime;
    struct linkemu_model model;
    struct ring delayed; /* FIFO by due time */
    struct ring express; /* reordered packets: also FIFO among themselves */
    uint8_t *stage;      /* one batch of packets as read, before the model */
    uint32_t stage_len[INGEST_BATCH];
    uint64_t drained_at_ns, last_wake_ns;
    struct dir_stats stats;
    pthread_t thread;
    /* the input device, to read how many packets the kernel dropped for us */
    int nl_fd;
    unsigned in_ifindex;
    uint64_t tun_dropped_base;
};

struct emulator {
    struct linkemu_profile prof;
    struct direction dir[LINKEMU_NDIRS];
    const char *stats_path;
    uint64_t seed, started_ns;
};

static atomic_int stop_requested;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t record_size(uint32_t len)
{
    return (sizeof(struct record) + len + 15u) & ~(size_t)15u;
}

/* ---- ring ------------------------------------------------------------- */

/* Datapath memory, populated up front: a page fault there is a late packet. */
static void *alloc_populated(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int ring_init(struct ring *r, size_t size)
{
    memset(r, 0, sizeof *r);
    if (size == 0)
        return AFTP_OK;
    r->buf = alloc_populated(size);
    if (!r->buf)
        return AFTP_ERR_NO_MEMORY;
    r->size = r->wrap_at = size;
    return AFTP_OK;
}

static void ring_free(struct ring *r)
{
    if (r->buf)
        munmap(r->buf, r->size);
    r->buf = NULL;
}

/* Room for a record of up to `need` bytes at the tail, or NULL when full. */
static struct record *ring_reserve(struct ring *r, size_t need)
{
    if (r->count == 0) {
        r->head = r->tail = 0;
        r->wrap_at = r->size;
    }
    int wrapped = r->count > 0 && r->tail <= r->head;
    if (wrapped)
        return r->head - r->tail >= need ? (struct record *)(r->buf + r->tail) : NULL;
    if (r->size - r->tail >= need)
        return (struct record *)(r->buf + r->tail);
    if (r->head < need)
        return NULL;
    r->wrap_at = r->tail;
    r->tail = 0;
    return (struct record *)r->buf;
}

static void ring_commit(struct ring *r, const struct record *rec)
{
    r->tail = (size_t)((const uint8_t *)rec - r->buf) + record_size(rec->len);
    r->count++;
}

static struct record *ring_peek(struct ring *r)
{
    if (r->count == 0)
        return NULL;
    if (r->head == r->wrap_at) {
        r->head = 0;
        r->wrap_at = r->size;
    }
    return (struct record *)(r->buf + r->head);
}

static void ring_pop(struct ring *r)
{
    struct record *rec = ring_peek(r);
    r->head += record_size(rec->len);
    r->count--;
}

/* ---- direction datapath ------------------------------------------------- */

/* The ring whose head is due first, or NULL when both are empty. */
static struct ring *earliest(struct direction *d)
{
    struct record *a = ring_peek(&d->delayed), *b = ring_peek(&d->express);
    if (!a)
        return b ? &d->express : NULL;
    if (!b)
        return &d->delayed;
    return b->due_ns < a->due_ns ? &d->express : &d->delayed;
}

static void deliver(struct direction *d, const struct record *rec, uint64_t now)
{
    for (uint32_t i = 0; i < rec->copies; i++) {
        if (write(d->out_fd, rec->data, rec->len) == (ssize_t)rec->len) {
            count_add(&d->stats.tx_packets, 1);
            count_add(&d->stats.tx_bytes, rec->len);
        } else if (errno == EAGAIN || errno == ENOBUFS || errno == ENOMEM) {
            count_add(&d->stats.write_errors, 1);
        } else {
            count_add(&d->stats.undeliverable, 1); /* e.g. EIO: the device is down */
        }
    }
    uint64_t late = now > rec->due_ns ? now - rec->due_ns : 0;
    if (late > d->late_tolerance_ns)
        count_add(&d->stats.late_packets, 1);
    count_max(&d->stats.max_late_ns, late);
}

static void dispatch_due(struct direction *d)
{
    for (;;) {
        struct ring *r = earliest(d);
        if (!r)
            return;
        struct record *rec = ring_peek(r);
        uint64_t now = now_ns();
        if (rec->due_ns > now)
            return;
        deliver(d, rec, now);
        ring_pop(r);
    }
}

/* Applies the model to one packet that arrived at `t`; a delivered packet is
 * filed in the delay line, or in the express ring when it skips the delay. */
static void admit_packet(struct direction *d, const uint8_t *data, uint32_t len, uint64_t t)
{
    count_add(&d->stats.rx_packets, 1);
    count_add(&d->stats.rx_bytes, len);
    struct linkemu_fate f = linkemu_model_admit(&d->model, t, len);
    if (f.verdict == LINKEMU_DROP_LOSS) {
        count_add(&d->stats.loss_drops, 1);
        return;
    }
    if (f.verdict == LINKEMU_DROP_QUEUE) {
        count_add(&d->stats.queue_drops, 1);
        return;
    }
    if (f.copies > 1)
        count_add(&d->stats.duplicated, 1);
    if (f.reordered)
        count_add(&d->stats.reordered, 1);
    struct ring *r = f.reordered ? &d->express : &d->delayed;
    struct record *rec = ring_reserve(r, record_size(len));
    if (!rec) {
        count_add(&d->stats.ring_full_drops, 1);
        return;
    }
    rec->due_ns = f.due_ns;
    rec->len = len;
    rec->copies = f.copies;
    memcpy(rec->data, data, len);
    ring_commit(r, rec);
}

/* Reads up to a batch of packets; returns how many were read. A TUN device
 * gives no arrival times: the packets arrived since the input was last seen
 * empty, so they are spread evenly over that span. Stamping them all "now"
 * would show the bottleneck a burst that never happened. */
static int ingest(struct direction *d)
{
    int n = 0;
    for (; n < INGEST_BATCH; n++) {
        ssize_t len = read(d->in_fd, d->stage + (size_t)n * d->mtu, d->mtu);
        if (len <= 0)
            break; /* EAGAIN: drained */
        d->stage_len[n] = (uint32_t)len;
    }
    uint64_t now = now_ns();
    uint64_t from = d->drained_at_ns < now ? d->drained_at_ns : now;
    for (int i = 0; i < n; i++) {
        uint64_t t = from + (now - from) * (uint64_t)(i + 1) / (uint64_t)n;
        admit_packet(d, d->stage + (size_t)i * d->mtu, d->stage_len[i], t);
    }
    d->drained_at_ns = now;
    return n;
}

/* Waits for work. While packets are in flight the thread wakes at most once
 * per tick and serves everything due and everything arrived: one wake-up per
 * packet costs more than the packet (a NIC coalesces interrupts for the same
 * reason). Idle, it sleeps until the first packet arrives. */
static void wait_for_work(struct direction *d)
{
    struct ring *r = earliest(d);
    if (!r) {
        struct pollfd pfd = {.fd = d->in_fd, .events = POLLIN};
        struct timespec idle = {.tv_sec = 0, .tv_nsec = (long)MAX_IDLE_WAIT_NS};
        ppoll(&pfd, 1, &idle, NULL);
        d->drained_at_ns = d->last_wake_ns = now_ns();
        return;
    }
    uint64_t now = now_ns();
    uint64_t due = ring_peek(r)->due_ns;
    uint64_t wake = due < now + d->tick_ns ? due : now + d->tick_ns;
    if (wake < d->last_wake_ns + d->tick_ns)
        wake = d->last_wake_ns + d->tick_ns;
    if (wake > now) {
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
                              .tv_nsec = (long)(wake % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    d->last_wake_ns = now_ns();
}

/* The emulator is the network: endpoints busy on every core must not delay
 * it, so it asks for a real-time priority (root only; a user namespace gets
 * the normal scheduler, and overload shows up in the report). */
static int raise_priority(int rt_prio)
{
    struct sched_param sp = {.sched_priority = rt_prio};
    return rt_prio > 0 && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
}

static void *direction_main(void *arg)
{
    struct direction *d = arg;
    prctl(PR_SET_TIMERSLACK, 1UL); /* nanosecond timers, not 50 us slack */
    atomic_store(&d->realtime, raise_priority(d->rt_prio));
    while (!atomic_load_explicit(&stop_requested, memory_order_relaxed)) {
        dispatch_due(d);
        if (ingest(d) == 0)
            wait_for_work(d);
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    count_add(&d->stats.cpu_ns_at_exit, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
    return NULL;
}

/* ---- devices ------------------------------------------------------------ */

struct tun_side {
    int fd, nl_fd;
    unsigned ifindex;
};

/* Creates the TUN device `ifname` inside the network namespace at
 * `netns_path`; also opens a netlink socket there to read its counters. */
static int open_tun_in(const char *netns_path, const char *ifname, int napi,
                       struct tun_side *side)
{
    int rc = AFTP_ERR_PERMISSION;
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(netns_path, O_RDONLY | O_CLOEXEC);
    side->fd = side->nl_fd = -1;
    if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) != 0) {
        fprintf(stderr, "aftp-linkemu: cannot enter %s: %s\n", netns_path, strerror(errno));
        goto out;
    }
    /* The device belongs to the namespace current when /dev/net/tun is opened. */
    side->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    struct ifreq ifr = {0};
    ifr.ifr_flags = (short)(IFF_TUN | IFF_NO_PI | (napi ? IFF_NAPI : 0));
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    if (side->fd < 0 || ioctl(side->fd, TUNSETIFF, &ifr) != 0) {
        fprintf(stderr, "aftp-linkemu: cannot create TUN %s in %s: %s\n", ifname, netns_path,
                strerror(errno));
        goto out;
    }
    side->ifindex = if_nametoindex(ifr.ifr_name);
    side->nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    rc = side->ifindex && side->nl_fd >= 0 ? AFTP_OK : AFTP_ERR_NETWORK;
out:
    if (self >= 0 && setns(self, CLONE_NEWNET) != 0)
        rc = AFTP_ERR_INTERNAL;
    if (self >= 0)
        close(self);
    if (target >= 0)
        close(target);
    return rc;
}

/* The device's tx_dropped: packets the kernel could not queue to the reader. */
static int link_tx_dropped(int nl_fd, unsigned ifindex, uint64_t *out)
{
    struct {
        struct nlmsghdr nh;
        struct ifinfomsg ifi;
    } req = {.nh = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_GETLINK,
                    .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1},
             .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = (int)ifindex}};
    static _Alignas(struct nlmsghdr) uint8_t buf[32768];
    if (send(nl_fd, &req, sizeof req, 0) < 0)
        return AFTP_ERR_NETWORK;
    ssize_t n = recv(nl_fd, buf, sizeof buf, 0);
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    if (n < 0 || !NLMSG_OK(nh, (size_t)n) || nh->nlmsg_type != RTM_NEWLINK)
        return AFTP_ERR_NETWORK;
    struct ifinfomsg *ifi = NLMSG_DATA(nh);
    int attrlen = (int)IFLA_PAYLOAD(nh);
    for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, attrlen); a = RTA_NEXT(a, attrlen)) {
        if (a->rta_type == IFLA_STATS64 &&
            RTA_PAYLOAD(a) >= sizeof(struct rtnl_link_stats64)) {
            struct rtnl_link_stats64 st;
            memcpy(&st, RTA_DATA(a), sizeof st);
            *out = st.tx_dropped;
            return AFTP_OK;
        }
    }
    return AFTP_ERR_NETWORK;
}

/* ---- setup -------------------------------------------------------------- */

static size_t delay_line_bytes(const struct linkemu_dir_params *p, unsigned mtu)
{
    /* An unlimited link is sized as if it ran at 10 Gbit/s. */
    double rate = p->rate_bps ? (double)p->rate_bps : 10e9;
    double in_flight = rate / 8.0 * (double)(p->delay_ns + 4 * p->jitter_ns) / 1e9;
    double bytes = 2.0 * (in_flight + (double)p->queue_bytes) + RING_SLACK_BYTES +
                   64.0 * (double)record_size(mtu);
    return bytes < (double)(2ull << 30) ? (size_t)bytes : (size_t)(2ull << 30);
}

/* Lateness that cannot change what a transport measures on this path: 5% of
 * the round trip, and never below half a millisecond. */
static uint64_t default_late_tolerance(const struct linkemu_profile *prof)
{
    uint64_t rtt = prof->dir[LINKEMU_FWD].delay_ns + prof->dir[LINKEMU_REV].delay_ns;
    return rtt / 20 > 500000 ? rtt / 20 : 500000;
}

/* Wake-up granularity under load: 0.5% of the one-way delay, 50..250 us. */
static uint64_t default_tick(const struct linkemu_dir_params *p)
{
    uint64_t tick = p->delay_ns / 200;
    return tick < 50000 ? 50000 : tick > 250000 ? 250000 : tick;
}

struct run_options {
    const char *snd_netns, *rcv_netns, *ifname, *ready_file;
    uint64_t late_us, tick_us;
    int napi, rt_prio;
};

static int init_direction(struct emulator *emu, enum linkemu_dir k, const struct tun_side *in,
                          const struct tun_side *out, const struct run_options *o)
{
    struct direction *d = &emu->dir[k];
    const struct linkemu_dir_params *p = &emu->prof.dir[k];
    d->name = k == LINKEMU_FWD ? "fwd" : "rev";
    d->in_fd = in->fd;
    d->out_fd = out->fd;
    d->nl_fd = in->nl_fd;
    d->in_ifindex = in->ifindex;
    d->mtu = emu->prof.mtu;
    d->late_tolerance_ns = o->late_us ? o->late_us * 1000 : default_late_tolerance(&emu->prof);
    d->tick_ns = o->tick_us ? o->tick_us * 1000 : default_tick(p);
    d->rt_prio = o->rt_prio;
    /* Distinct, reproducible random streams per direction. */
    linkemu_model_init(&d->model, p, emu->seed * 2 + (uint64_t)k);
    d->stage = alloc_populated((size_t)INGEST_BATCH * d->mtu);
    if (!d->stage)
        return AFTP_ERR_NO_MEMORY;
    int rc = ring_init(&d->delayed, delay_line_bytes(p, d->mtu));
    if (rc == AFTP_OK && p->reorder > 0)
        rc = ring_init(&d->express, 2 * p->queue_bytes + RING_SLACK_BYTES +
                                        64 * record_size(d->mtu));
    if (rc == AFTP_OK)
        rc = link_tx_dropped(d->nl_fd, d->in_ifindex, &d->tun_dropped_base);
    return rc;
}

/* ---- reports ------------------------------------------------------------ */

struct dir_report {
    uint64_t tun_dropped, overload_drops;
    double cpu_s;
};

static double thread_cpu_seconds(struct direction *d)
{
    uint64_t at_exit = count_get(&d->stats.cpu_ns_at_exit);
    if (at_exit)
        return (double)at_exit / 1e9; /* joined: its clock is gone */
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(d->thread, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct dir_report measure_direction(struct direction *d)
{
    struct dir_report r = {0};
    uint64_t dropped = d->tun_dropped_base;
    if (link_tx_dropped(d->nl_fd, d->in_ifindex, &dropped) == AFTP_OK)
        r.tun_dropped = dropped - d->tun_dropped_base;
    r.overload_drops = r.tun_dropped + count_get(&d->stats.ring_full_drops) +
                       count_get(&d->stats.write_errors);
    r.cpu_s = thread_cpu_seconds(d);
    return r;
}

/* Valid when nothing was lost to overload and at most 0.1% came late. */
static int direction_valid(struct direction *d, const struct dir_report *r)
{
    return r->overload_drops == 0 &&
           count_get(&d->stats.late_packets) * 1000 <= count_get(&d->stats.tx_packets);
}

static void write_direction_json(FILE *f, struct direction *d, const struct dir_report *r)
{
    struct dir_stats *s = &d->stats;
    fprintf(f,
            "\"%s\":{\"rx_packets\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
            ",\"tx_packets\":%" PRIu64 ",\"tx_bytes\":%" PRIu64 ",\"loss_drops\":%" PRIu64
            ",\"queue_drops\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"reordered\":%" PRIu64
            ",\"late_packets\":%" PRIu64 ",\"max_late_us\":%.1f,\"tun_overflow_drops\":%" PRIu64
            ",\"ring_full_drops\":%" PRIu64 ",\"write_errors\":%" PRIu64
            ",\"undeliverable\":%" PRIu64 ",\"overload_drops\":%" PRIu64
            ",\"cpu_s\":%.3f,\"valid\":%s}",
            d->name, count_get(&s->rx_packets), count_get(&s->rx_bytes),
            count_get(&s->tx_packets), count_get(&s->tx_bytes), count_get(&s->loss_drops),
            count_get(&s->queue_drops), count_get(&s->duplicated), count_get(&s->reordered),
            count_get(&s->late_packets), (double)count_get(&s->max_late_ns) / 1e3,
            r->tun_dropped, count_get(&s->ring_full_drops), count_get(&s->write_errors),
            count_get(&s->undeliverable), r->overload_drops, r->cpu_s, direction_valid(d, r) ? "true" : "false");
}

static int write_report(struct emulator *emu, FILE *f)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct dir_report r[LINKEMU_NDIRS];
    int valid = 1;
    for (int k = 0; k < LINKEMU_NDIRS; k++) {
        r[k] = measure_direction(&emu->dir[k]);
        valid &= direction_valid(&emu->dir[k], &r[k]);
    }
    fprintf(f,
            "{\"backend\":\"tun\",\"profile\":\"%s\",\"seed\":%" PRIu64
            ",\"elapsed_s\":%.3f,\"late_tolerance_us\":%.1f,\"tick_us\":%.1f,\"cpu_user_s\":%.3f"
            ",\"cpu_sys_s\":%.3f,\"realtime\":%s,",
            emu->prof.name, emu->seed, (double)(now_ns() - emu->started_ns) / 1e9,
            (double)emu->dir[0].late_tolerance_ns / 1e3, (double)emu->dir[0].tick_ns / 1e3,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
            atomic_load(&emu->dir[0].realtime) ? "true" : "false");
    for (int k = 0; k < LINKEMU_NDIRS; k++) {
        write_direction_json(f, &emu->dir[k], &r[k]);
        fputc(',', f);
    }
    fprintf(f, "\"valid\":%s}\n", valid ? "true" : "false");
    return valid;
}

/* Writes the report beside the target and renames it, so a reader never
 * sees half a file. */
static int publish_report(struct emulator *emu)
{
    if (!emu->stats_path)
        return write_report(emu, stdout);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", emu->stats_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "aftp-linkemu: cannot write %s: %s\n", tmp, strerror(errno));
        return 0;
    }
    int valid = write_report(emu, f);
    if (fclose(f) != 0 || rename(tmp, emu->stats_path) != 0)
        fprintf(stderr, "aftp-linkemu: cannot write %s: %s\n", emu->stats_path,
                strerror(errno));
    return valid;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: aftp-linkemu --profile FILE --describe\n"
            "       aftp-linkemu --profile FILE --netem-args fwd|rev\n"
            "       aftp-linkemu --profile FILE --tbf-args fwd|rev\n"
            "       aftp-linkemu --profile FILE --snd-netns PATH --rcv-netns PATH\n"
            "                    [--ifname NAME] [--seed N] [--stats FILE] [--ready-file FILE]\n"
            "                    [--late-us N] [--tick-us N] [--rt-prio N] [--napi]\n"
            "Bridges a TUN device in each namespace through the profile's link model;\n"
            "fwd is sender -> receiver. Stops on SIGTERM/SIGINT, reports on SIGUSR1 and\n"
            "at exit (JSON); exits 0 when valid, 3 when overloaded.\n"
            "  --late-us  lateness counted as overload (default: 5%% of the RTT, >= 500)\n"
            "  --tick-us  wake-up granularity under load (default: 0.5%% of the delay,\n"
            "             50..250)\n"
            "  --rt-prio  SCHED_FIFO priority when permitted (default 10; 0: none)\n"
            "  --napi     IFF_NAPI devices: lets the receiving stack use GRO\n");
}

static int parse_dir(const char *s, enum linkemu_dir *out)
{
    if (strcmp(s, "fwd") == 0)
        *out = LINKEMU_FWD;
    else if (strcmp(s, "rev") == 0)
        *out = LINKEMU_REV;
    else
        return AFTP_ERR_INVALID_ARGUMENT;
    return AFTP_OK;
}

static int run(struct emulator *emu, const struct run_options *o)
{
    struct tun_side snd, rcv;
    if (open_tun_in(o->snd_netns, o->ifname, o->napi, &snd) != AFTP_OK ||
        open_tun_in(o->rcv_netns, o->ifname, o->napi, &rcv) != AFTP_OK)
        return 2;
    if (init_direction(emu, LINKEMU_FWD, &snd, &rcv, o) != AFTP_OK ||
        init_direction(emu, LINKEMU_REV, &rcv, &snd, o) != AFTP_OK) {
        fprintf(stderr, "aftp-linkemu: cannot set up the delay lines\n");
        return 2;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* the threads inherit the mask */
    emu->started_ns = now_ns();
    for (int k = 0; k < LINKEMU_NDIRS; k++) {
        if (pthread_create(&emu->dir[k].thread, NULL, direction_main, &emu->dir[k]) != 0) {
            fprintf(stderr, "aftp-linkemu: cannot start the %s thread\n", emu->dir[k].name);
            return 2; /* exiting ends the other thread too */
        }
    }
    if (o->ready_file) {
        FILE *f = fopen(o->ready_file, "w");
        if (f)
            fclose(f);
    }
    int sig;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGUSR1)
        publish_report(emu);
    atomic_store(&stop_requested, 1);
    for (int k = 0; k < LINKEMU_NDIRS; k++)
        pthread_join(emu->dir[k].thread, NULL);
    int valid = publish_report(emu);
    for (int k = 0; k < LINKEMU_NDIRS; k++) {
        ring_free(&emu->dir[k].delayed);
        ring_free(&emu->dir[k].express);
        munmap(emu->dir[k].stage, (size_t)INGEST_BATCH * emu->dir[k].mtu);
    }
    return valid ? 0 : 3;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"profile", required_argument, NULL, 'p'}, {"describe", no_argument, NULL, 'd'},
        {"netem-args", required_argument, NULL, 'N'}, {"tbf-args", required_argument, NULL, 'T'},
        {"snd-netns", required_argument, NULL, 's'}, {"rcv-netns", required_argument, NULL, 'r'},
        {"ifname", required_argument, NULL, 'i'}, {"seed", required_argument, NULL, 'S'},
        {"stats", required_argument, NULL, 'o'}, {"ready-file", required_argument, NULL, 'R'},
        {"late-us", required_argument, NULL, 'l'}, {"tick-us", required_argument, NULL, 'w'},
        {"napi", no_argument, NULL, 'n'}, {"rt-prio", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static struct emulator emu;
    struct run_options o = {.ifname = "wan0", .late_us = 0, .tick_us = 0, .rt_prio = 10};
    const char *profile = NULL;
    int describe = 0, c;
    enum linkemu_dir netem_dir = LINKEMU_NDIRS, tbf_dir = LINKEMU_NDIRS;
    emu.seed = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'p': profile = optarg; break;
        case 'd': describe = 1; break;
        case 'N': bad = parse_dir(optarg, &netem_dir) != AFTP_OK; break;
        case 'T': bad = parse_dir(optarg, &tbf_dir) != AFTP_OK; break;
        case 's': o.snd_netns = optarg; break;
        case 'r': o.rcv_netns = optarg; break;
        case 'i': o.ifname = optarg; break;
        case 'S': emu.seed = strtoull(optarg, NULL, 0); break;
        case 'o': emu.stats_path = optarg; break;
        case 'R': o.ready_file = optarg; break;
        case 'l': o.late_us = strtoull(optarg, NULL, 0); break;
        case 'w': o.tick_us = strtoull(optarg, NULL, 0); break;
        case 'n': o.napi = 1; break;
        case 'P': o.rt_prio = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: bad = 1;
        }
        if (bad) {
            usage(stderr);
            return 2;
        }
    }
    char err[256];
    if (!profile || linkemu_profile_load(profile, &emu.prof, err, sizeof err) != AFTP_OK) {
        if (profile)
            fprintf(stderr, "aftp-linkemu: %s: %s\n", profile, err);
        else
            usage(stderr);
        return 2;
    }
    if (describe) {
        linkemu_profile_describe(&emu.prof, stdout);
        return 0;
    }
    if (netem_dir != LINKEMU_NDIRS) {
        linkemu_profile_print_netem_args(&emu.prof, netem_dir, stdout);
        return 0;
    }
    if (tbf_dir != LINKEMU_NDIRS) {
        linkemu_profile_print_tbf_args(&emu.prof, tbf_dir, stdout);
        return 0;
    }
    if (!o.snd_netns || !o.rcv_netns) {
        usage(stderr);
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the script that owns the namespaces */
    return run(&emu, &o);
}
