/*
 * aftp-linkemu: a user-space WAN emulator for hosts without the kernel's
 * netem qdisc. It creates one TUN device in each of two network namespaces
 * (sender side, receiver side) and moves IP packets between them through the
 * link model of linkemu_model.c, two threads per direction: ingest reads
 * packets and files them in a preallocated FIFO ring (the delay line),
 * dispatch writes them out of it when due (linkemu_ring.h: lock-free between
 * the two). The datapath never allocates.
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
#include <sys/syscall.h>
#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "linkemu_model.h"
#include "linkemu_ring.h"

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

enum { INGEST, DISPATCH, NTHREADS }; /* the two threads of a direction */

struct dir_stats {
    counter_t rx_packets, rx_bytes;         /* read from the input device */
    counter_t tx_packets, tx_bytes;         /* written to the output device */
    counter_t loss_drops, queue_drops;      /* the model's intended drops */
    counter_t duplicated, reordered;
    counter_t late_packets, max_late_ns;    /* overload: delivered too late */
    counter_t ring_full_drops, write_errors; /* overload: could not be served */
    counter_t undeliverable;                /* the output device refused (down) */
    counter_t cpu_ns_at_exit[NTHREADS];     /* each thread's CPU time when it ended */
};

/* Each direction runs two threads, so that reading the input never waits for
 * the writes (each write runs the receiving host's network stack for that
 * packet) and the writes never wait for a batch of reads: ingest reads, runs
 * the model and files packets into the rings; dispatch writes them out when
 * due. Every field below has one writer: the rings' own halves as described
 * in linkemu_ring.h, the rest as marked. */
struct direction {
    const char *name;
    int in_fd, out_fd;
    unsigned mtu;
    uint64_t late_tolerance_ns, tick_ns;
    int rt_prio;
    atomic_int realtime[NTHREADS];
    struct linkemu_model model;       /* ingest */
    struct linkemu_ring delayed;      /* FIFO by due time */
    struct linkemu_ring express;      /* reordered packets: also FIFO among themselves */
    uint8_t *stage;                   /* ingest: one batch as read, before the model */
    uint32_t stage_len[INGEST_BATCH]; /* ingest */
    uint64_t drained_at_ns, ingest_woke_ns; /* ingest */
    uint64_t dispatch_woke_ns;        /* dispatch */
    /* dispatch: the due time it sleeps until (0 while awake); ingest wakes it
     * through wake_seq (a futex) when it files a packet due earlier */
    _Atomic uint64_t dispatch_sleeps_until;
    _Atomic uint32_t wake_seq;
    struct dir_stats stats;
    pthread_t thread[NTHREADS];
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

static struct timespec to_timespec(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

/* Datapath memory, populated up front: a page fault there is a late packet. */
static void *alloc_populated(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int ring_alloc(struct linkemu_ring *r, size_t size)
{
    size &= ~(size_t)(LINKEMU_RING_ALIGN - 1);
    uint8_t *buf = size ? alloc_populated(size) : NULL;
    if (size && !buf)
        return AFTP_ERR_NO_MEMORY;
    linkemu_ring_init(r, buf, size);
    return AFTP_OK;
}

static void ring_free(struct linkemu_ring *r)
{
    if (r->buf)
        munmap(r->buf, r->size);
    r->buf = NULL;
}

/* ---- dispatch thread ------------------------------------------------------ */

/* The ring whose head is due first, or NULL when both are empty. */
static struct linkemu_ring *earliest(struct direction *d)
{
    struct linkemu_record *a = linkemu_ring_peek(&d->delayed);
    struct linkemu_record *b = linkemu_ring_peek(&d->express);
    if (!a)
        return b ? &d->express : NULL;
    if (!b)
        return &d->delayed;
    return b->due_ns < a->due_ns ? &d->express : &d->delayed;
}

static void deliver(struct direction *d, const struct linkemu_record *rec, uint64_t now)
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
        struct linkemu_ring *r = earliest(d);
        if (!r)
            return;
        struct linkemu_record *rec = linkemu_ring_peek(r);
        uint64_t now = now_ns();
        if (rec->due_ns > now)
            return;
        deliver(d, rec, now);
        linkemu_ring_pop(r);
    }
}

static uint64_t earliest_due(struct direction *d, uint64_t none)
{
    struct linkemu_ring *r = earliest(d);
    return r ? linkemu_ring_peek(r)->due_ns : none;
}

/* Sleeps until the first packet is due, but wakes at most once per tick
 * under load: one wake-up per packet costs more than the packet (a NIC
 * coalesces interrupts for the same reason). Ingest ends the sleep early
 * when it files a packet due before it. */
static void wait_until_due(struct direction *d)
{
    uint32_t seq = atomic_load(&d->wake_seq);
    uint64_t now = now_ns();
    uint64_t first = earliest_due(d, now + MAX_IDLE_WAIT_NS);
    uint64_t wake = first > d->dispatch_woke_ns + d->tick_ns ? first
                                                            : d->dispatch_woke_ns + d->tick_ns;
    atomic_store(&d->dispatch_sleeps_until, wake);
    /* Either this second look at the rings sees a packet ingest filed in
     * between, or ingest sees the deadline stored above and bumps wake_seq
     * (both seq_cst). */
    if (wake > now && earliest_due(d, UINT64_MAX) >= first) {
        struct timespec ts = to_timespec(wake);
        syscall(SYS_futex, &d->wake_seq, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seq, &ts,
                NULL, FUTEX_BITSET_MATCH_ANY);
    }
    atomic_store(&d->dispatch_sleeps_until, 0);
    d->dispatch_woke_ns = now_ns();
}

/* Called by ingest after filing packets, the first of them due at `due`. */
static void wake_dispatch_before(struct direction *d, uint64_t due)
{
    if (due < atomic_load(&d->dispatch_sleeps_until)) {
        atomic_fetch_add(&d->wake_seq, 1);
        syscall(SYS_futex, &d->wake_seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
    }
}

/* ---- ingest thread --------------------------------------------------------- */

/* Applies the model to one packet that arrived at `t`; a delivered packet is
 * filed in the delay line, or in the express ring when it skips the delay.
 * Returns its due time, or UINT64_MAX when it was not filed. */
static uint64_t admit_packet(struct direction *d, const uint8_t *data, uint32_t len, uint64_t t)
{
    count_add(&d->stats.rx_packets, 1);
    count_add(&d->stats.rx_bytes, len);
    struct linkemu_fate f = linkemu_model_admit(&d->model, t, len);
    if (f.verdict == LINKEMU_DROP_LOSS) {
        count_add(&d->stats.loss_drops, 1);
        return UINT64_MAX;
    }
    if (f.verdict == LINKEMU_DROP_QUEUE) {
        count_add(&d->stats.queue_drops, 1);
        return UINT64_MAX;
    }
    if (f.copies > 1)
        count_add(&d->stats.duplicated, 1);
    if (f.reordered)
        count_add(&d->stats.reordered, 1);
    struct linkemu_ring *r = f.reordered ? &d->express : &d->delayed;
    struct linkemu_record *rec = linkemu_ring_reserve(r, len);
    if (!rec) {
        count_add(&d->stats.ring_full_drops, 1);
        return UINT64_MAX;
    }
    rec->due_ns = f.due_ns;
    rec->len = len;
    rec->copies = f.copies;
    memcpy(rec->data, data, len);
    linkemu_ring_commit(r, rec);
    return f.due_ns;
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
    uint64_t first_due = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t t = from + (now - from) * (uint64_t)(i + 1) / (uint64_t)n;
        uint64_t due = admit_packet(d, d->stage + (size_t)i * d->mtu, d->stage_len[i], t);
        first_due = due < first_due ? due : first_due;
    }
    d->drained_at_ns = now;
    if (first_due != UINT64_MAX)
        wake_dispatch_before(d, first_due);
    return n;
}

/* Waits for input. While packets flow the thread reads at most once per
 * tick, a batch at a time (the TUN queue holds them meanwhile); idle, it
 * sleeps until the first packet arrives. */
static void wait_for_input(struct direction *d, int got_packets)
{
    if (got_packets) {
        struct timespec ts = to_timespec(d->ingest_woke_ns + d->tick_ns);
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        d->ingest_woke_ns = now_ns();
        return;
    }
    struct pollfd pfd = {.fd = d->in_fd, .events = POLLIN};
    struct timespec idle = to_timespec(MAX_IDLE_WAIT_NS);
    ppoll(&pfd, 1, &idle, NULL);
    d->drained_at_ns = d->ingest_woke_ns = now_ns();
}

/* ---- threads --------------------------------------------------------------- */

/* The emulator is the network: endpoints busy on every core must not delay
 * it, so it asks for a real-time priority (root only; a user namespace gets
 * the normal scheduler, and overload shows up in the report). */
static int raise_priority(int rt_prio)
{
    struct sched_param sp = {.sched_priority = rt_prio};
    return rt_prio > 0 && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
}

static void thread_start(struct direction *d, int which)
{
    prctl(PR_SET_TIMERSLACK, 1UL); /* nanosecond timers, not 50 us slack */
    atomic_store(&d->realtime[which], raise_priority(d->rt_prio));
}

static void thread_end(struct direction *d, int which)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    count_add(&d->stats.cpu_ns_at_exit[which],
              (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
}

static int stopping(void)
{
    return atomic_load_explicit(&stop_requested, memory_order_relaxed);
}

static void *ingest_main(void *arg)
{
    struct direction *d = arg;
    thread_start(d, INGEST);
    while (!stopping())
        wait_for_input(d, ingest(d) > 0);
    thread_end(d, INGEST);
    return NULL;
}

static void *dispatch_main(void *arg)
{
    struct direction *d = arg;
    thread_start(d, DISPATCH);
    while (!stopping()) {
        dispatch_due(d);
        wait_until_due(d);
    }
    thread_end(d, DISPATCH);
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
                   64.0 * (double)linkemu_record_size(mtu);
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
    int rc = ring_alloc(&d->delayed, delay_line_bytes(p, d->mtu));
    if (rc == AFTP_OK && p->reorder > 0)
        rc = ring_alloc(&d->express, 2 * p->queue_bytes + RING_SLACK_BYTES +
                                        64 * linkemu_record_size(d->mtu));
    if (rc == AFTP_OK)
        rc = link_tx_dropped(d->nl_fd, d->in_ifindex, &d->tun_dropped_base);
    return rc;
}

/* ---- reports ------------------------------------------------------------ */

struct dir_report {
    uint64_t tun_dropped, overload_drops;
    double cpu_s;
};

static double thread_cpu_seconds(struct direction *d, int which)
{
    uint64_t at_exit = count_get(&d->stats.cpu_ns_at_exit[which]);
    if (at_exit)
        return (double)at_exit / 1e9; /* joined: its clock is gone */
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(d->thread[which], &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Both threads of the direction, or -1 when either clock cannot be read. */
static double direction_cpu_seconds(struct direction *d)
{
    double ingest = thread_cpu_seconds(d, INGEST), dispatch = thread_cpu_seconds(d, DISPATCH);
    return ingest < 0 || dispatch < 0 ? -1 : ingest + dispatch;
}

static struct dir_report measure_direction(struct direction *d)
{
    struct dir_report r = {0};
    uint64_t dropped = d->tun_dropped_base;
    if (link_tx_dropped(d->nl_fd, d->in_ifindex, &dropped) == AFTP_OK)
        r.tun_dropped = dropped - d->tun_dropped_base;
    r.overload_drops = r.tun_dropped + count_get(&d->stats.ring_full_drops) +
                       count_get(&d->stats.write_errors);
    r.cpu_s = direction_cpu_seconds(d);
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

/* Whether every datapath thread got its real-time priority. */
static int all_realtime(struct emulator *emu)
{
    int all = 1;
    for (int k = 0; k < LINKEMU_NDIRS; k++)
        for (int t = 0; t < NTHREADS; t++)
            all &= atomic_load(&emu->dir[k].realtime[t]);
    return all;
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
            all_realtime(emu) ? "true" : "false");
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
    void *(*const thread_main[NTHREADS])(void *) = {ingest_main, dispatch_main};
    for (int k = 0; k < LINKEMU_NDIRS; k++) {
        for (int t = 0; t < NTHREADS; t++) {
            if (pthread_create(&emu->dir[k].thread[t], NULL, thread_main[t], &emu->dir[k]) != 0) {
                fprintf(stderr, "aftp-linkemu: cannot start the %s threads\n", emu->dir[k].name);
                return 2; /* exiting ends the other threads too */
            }
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
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(emu->dir[k].thread[t], NULL);
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
