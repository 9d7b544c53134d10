#include "aftp_drive.h"
#include "aftp_wallclock.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

uint64_t aftp_drive_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t aftp_drive_arrival_ns(uint64_t stamp_real_ns, uint64_t now_real_ns, uint64_t now_ns,
                               uint64_t floor_ns)
{
    if (stamp_real_ns == 0 || stamp_real_ns > now_real_ns)
        return now_ns;
    uint64_t age = now_real_ns - stamp_real_ns;
    uint64_t at = age < now_ns ? now_ns - age : 0;
    return at > floor_ns ? at : floor_ns;
}

/* One role-neutral face over the two engines. */
int aftp_drive_feed(const aftp_drive *d, uint64_t now_ns, const uint8_t *pkt, size_t len)
{
    return d->sender ? aftp_sender_read(d->sender, now_ns, pkt, len)
                     : aftp_receiver_read(d->receiver, now_ns, pkt, len);
}

static int engine_write(const aftp_drive *d, uint64_t now, uint8_t *buf, aftp_datagram *dg)
{
    return d->sender ? aftp_sender_write(d->sender, now, buf, d->max_datagram, dg)
                     : aftp_receiver_write(d->receiver, now, buf, d->max_datagram, dg);
}

static uint64_t engine_expiry(const aftp_drive *d)
{
    return d->sender ? aftp_sender_expiry(d->sender) : aftp_receiver_expiry(d->receiver);
}

static void engine_handle_expiry(const aftp_drive *d, uint64_t now)
{
    /* A failure here closes the session: seen through the state below. */
    if (d->sender)
        aftp_sender_handle_expiry(d->sender, now);
    else
        aftp_receiver_handle_expiry(d->receiver, now);
}

int aftp_drive_state(const aftp_drive *d)
{
    return d->sender ? aftp_sender_state(d->sender) : aftp_receiver_state(d->receiver);
}

int aftp_drive_error(const aftp_drive *d)
{
    return d->sender ? aftp_sender_error(d->sender) : aftp_receiver_error(d->receiver);
}

static void engine_cancel(const aftp_drive *d, uint64_t now)
{
    if (d->sender)
        aftp_sender_cancel(d->sender, now);
    else
        aftp_receiver_cancel(d->receiver, now);
}

void aftp_drive_stats(const aftp_drive *d, aftp_stats *st)
{
    if (d->sender)
        aftp_sender_get_stats(d->sender, st);
    else
        aftp_receiver_get_stats(d->receiver, st);
}

/* Feeds what is queued on the socket, each datagram at its arrival time
 * (aftp_drive_arrival_ns) from `floor`, the time of the previous turn: the
 * engine has already been told that time, and its clock never goes back.
 * At most about AFTP_DRIVE_TURN_INPUT datagrams, so a flooded socket costs
 * one turn a bounded time; *more is set when more may be queued. */
static int pump_input(aftp_drive *d, aftp_udp_bufs *io, uint64_t now, uint64_t floor, int *more)
{
    uint64_t now_real = aftp_wallclock_now_ns();
    size_t count, fed = 0;
    do {
        int rc = aftp_udp_recv_with(d->udp, io, &count);
        if (rc != AFTP_OK)
            return rc;
        aftp_udp_iter it = {0};
        const uint8_t *pkt;
        size_t len;
        const struct sockaddr *from;
        while (aftp_udp_next(d->udp, &it, &pkt, &len, &from)) {
            uint64_t at = aftp_drive_arrival_ns(it.arrival_ns, now_real, now, floor);
            aftp_drive_feed(d, at, pkt, len);
            floor = at;
            fed++;
        }
        *more = count == d->udp->rx_slots && aftp_drive_state(d) != AFTP_STATE_CLOSED;
    } while (*more && fed < AFTP_DRIVE_TURN_INPUT);
    return AFTP_OK;
}

/* What the engine releases now, up to one batch. */
static size_t collect(const aftp_drive *d, uint64_t now, uint8_t *bufs, aftp_datagram *dgs)
{
    size_t n = 0;
    while (n < AFTP_UDP_TX_MAX && engine_write(d, now, bufs + n * d->max_datagram, &dgs[n]) == 1)
        n++;
    return n;
}

/* collect() with the sender's reads of its source under the guard: a read
 * past the end of a source that shrank meanwhile trips the guard and
 * abandons the batch (nothing is sent) instead of killing the process. */
static size_t collect_guarded(const aftp_drive *d, uint64_t now, uint8_t *bufs,
                              aftp_datagram *dgs)
{
    if (d->source_guard == NULL)
        return collect(d, now, bufs, dgs);
    if (sigsetjmp(d->source_guard->env, 1) != 0)
        return 0;
    aftp_mapguard_enter(d->source_guard);
    size_t n = collect(d, now, bufs, dgs);
    aftp_mapguard_leave(d->source_guard);
    return n;
}

/* The source changed under the sender (a size/mtime check or a faulting
 * read tripped its guard): the file fails and the peer is told. */
static void check_source(const aftp_drive *d, uint64_t now)
{
    if (d->source_guard != NULL && aftp_mapguard_tripped(d->source_guard))
        aftp_sender_abort(d->sender, now, AFTP_ERR_SOURCE_CHANGED,
                          "source changed during transfer");
}

/* The path MTU fell below the sender's datagrams (an ICMP "fragmentation
 * needed" lowered it): repairs would be refused alike, so the transfer
 * ends now, saying why, instead of going silent until the idle timeout. */
static void check_path_mtu(const aftp_drive *d, uint64_t now)
{
    if (d->sender == NULL || d->udp->too_big == 0)
        return;
    char reason[128];
    aftp_udp_explain_too_big(d->udp, d->max_datagram, reason, sizeof reason);
    aftp_sender_abort(d->sender, now, AFTP_ERR_NETWORK, reason);
}

struct aftp_drive_scratch {
    size_t max_datagram;
    uint8_t *bufs;       /* AFTP_UDP_TX_MAX datagrams of max_datagram bytes */
    aftp_datagram *dgs;
    aftp_udp_bufs *io;   /* lent to each session's socket for its reads and sends */
};

size_t aftp_drive_scratch_datagram(const aftp_drive *d)
{
    return d->udp->max_datagram > d->max_datagram ? d->udp->max_datagram : d->max_datagram;
}

int aftp_drive_scratch_new(aftp_drive_scratch **out, size_t max_datagram)
{
    aftp_drive_scratch *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s == NULL)
        return AFTP_ERR_NO_MEMORY;
    s->max_datagram = max_datagram;
    s->bufs = malloc(AFTP_UDP_TX_MAX * max_datagram);
    s->dgs = calloc(AFTP_UDP_TX_MAX, sizeof *s->dgs);
    int rc = aftp_udp_bufs_new(&s->io, max_datagram);
    if (s->bufs == NULL || s->dgs == NULL || rc != AFTP_OK) {
        aftp_drive_scratch_del(s);
        return AFTP_ERR_NO_MEMORY;
    }
    *out = s;
    return AFTP_OK;
}

void aftp_drive_scratch_del(aftp_drive_scratch *s)
{
    if (s == NULL)
        return;
    free(s->bufs);
    free(s->dgs);
    aftp_udp_bufs_del(s->io);
    free(s);
}

/* Collects what the engine releases now and sends it as one batch.
 * *full is set when the batch hit its size limit (more may be due). */
static int pump_output(aftp_drive *d, uint64_t now, aftp_drive_scratch *sc, int *full)
{
    /* Each datagram at max_datagram strides: the batch fits any scratch
     * made for at least this session's size. */
    size_t n = collect_guarded(d, now, sc->bufs, sc->dgs);
    *full = n == AFTP_UDP_TX_MAX;
    if (n == 0)
        return AFTP_OK;
    int rc = aftp_udp_send_with(d->udp, sc->io, sc->dgs, n);
    if (d->after_send)
        d->after_send(d->after_send_ctx);
    return rc;
}

void aftp_drive_cancel(const aftp_drive *d, uint64_t now_ns)
{
    engine_cancel(d, now_ns);
}

/* The ~4 Hz progress callback. */
static void tick(aftp_drive *d, uint64_t now)
{
    if (d->next_tick_ns == 0)
        d->next_tick_ns = now + AFTP_DRIVE_TICK_NS; /* the first turn: a tick period from now */
    if (now < d->next_tick_ns)
        return;
    /* advanced without a callback too: the tick bounds the next wake */
    d->next_tick_ns = now + AFTP_DRIVE_TICK_NS;
    if (d->on_tick == NULL)
        return;
    aftp_stats st;
    aftp_drive_stats(d, &st);
    d->on_tick(d->app, &st, now);
}

/* When the session next needs a turn, after one at `now` that left it
 * open: at once when work is due (a full batch, more input, an expiry
 * passed), else at its expiry, but not before the batch gap nor after
 * the next tick. */
static uint64_t next_wake(const aftp_drive *d, uint64_t now, int busy)
{
    uint64_t wake = engine_expiry(d);
    if (busy || wake <= now)
        return now;
    if (wake < now + AFTP_DRIVE_BATCH_GAP_NS)
        wake = now + AFTP_DRIVE_BATCH_GAP_NS;
    return wake < d->next_tick_ns ? wake : d->next_tick_ns;
}

/* The turn's steps, in the order the engine needs them; returns the
 * socket's error, if any. */
static int turn_steps(aftp_drive *d, aftp_drive_scratch *sc, uint64_t now, int *busy)
{
    int more = 0, full = 0;
    int rc = pump_input(d, sc->io, now, d->last_turn_ns, &more);
    d->last_turn_ns = now;
    if (d->on_wake)
        d->on_wake(d->on_wake_ctx, now);
    if (rc == AFTP_OK && now >= engine_expiry(d))
        engine_handle_expiry(d, now);
    if (rc == AFTP_OK)
        rc = pump_output(d, now, sc, &full);
    check_source(d, now);
    check_path_mtu(d, now);
    if (d->on_turn)
        d->on_turn(d->on_turn_ctx, now);
    *busy = more || full;
    return rc;
}

int aftp_drive_turn(aftp_drive *d, aftp_drive_scratch *sc, uint64_t now_ns, uint64_t *wake_ns,
                    int *closed)
{
    *wake_ns = now_ns;
    *closed = 1;
    if (aftp_drive_scratch_datagram(d) > sc->max_datagram)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (aftp_drive_state(d) == AFTP_STATE_CLOSED)
        return aftp_drive_error(d);
    int busy;
    int rc = turn_steps(d, sc, now_ns, &busy);
    /* Once our CLOSE is out the peer may already be gone, and the
     * kernel's ICMP refusal of a repeated CLOSE only confirms the end. */
    if (rc == AFTP_ERR_NETWORK && aftp_drive_state(d) == AFTP_STATE_CLOSING)
        return aftp_drive_error(d);
    if (rc != AFTP_OK)
        return rc;
    tick(d, now_ns);
    if (aftp_drive_state(d) == AFTP_STATE_CLOSED)
        return aftp_drive_error(d);
    *closed = 0;
    *wake_ns = next_wake(d, now_ns, busy);
    return AFTP_OK;
}

/* Until `wake`, a datagram, or the wake_fd's signal. */
static void sleep_until(aftp_drive *d, uint64_t wake, uint64_t now)
{
    if (wake <= now)
        return;
    if (d->wake_fd <= 0) {
        aftp_udp_wait(d->udp, wake - now);
        return;
    }
    struct pollfd p[2] = {{.fd = d->udp->fd, .events = POLLIN}, {.fd = d->wake_fd, .events = POLLIN}};
    struct timespec ts = {.tv_sec = (time_t)((wake - now) / 1000000000u),
                          .tv_nsec = (long)((wake - now) % 1000000000u)};
    (void)ppoll(p, 2, &ts, NULL);
}

static int run_loop(aftp_drive *d, aftp_drive_scratch *sc)
{
    int cancelled = 0;
    while (aftp_drive_state(d) != AFTP_STATE_CLOSED) {
        uint64_t now = aftp_drive_now_ns(), wake;
        int closed;
        if (d->interrupt && *d->interrupt && cancelled < *d->interrupt) {
            if (cancelled++ > 0)
                return AFTP_ERR_CANCELLED; /* second interrupt: do not wait for the peer */
            engine_cancel(d, now);
        }
        int rc = aftp_drive_turn(d, sc, now, &wake, &closed);
        if (closed)
            return rc;
        sleep_until(d, wake, aftp_drive_now_ns());
    }
    return aftp_drive_error(d);
}

int aftp_drive_run(aftp_drive *d)
{
    /* Sub-millisecond pacing needs precise wake-ups: 1 us of timer slack
     * instead of the default 50 us, on this thread for this run only (the
     * thread is the caller's). */
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    aftp_drive_scratch *sc;
    int rc = aftp_drive_scratch_new(&sc, aftp_drive_scratch_datagram(d));
    if (rc == AFTP_OK)
        rc = run_loop(d, sc);
    aftp_drive_scratch_del(sc);
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    return rc;
}
