#include "aftp_worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Readable fds one wait reports; the others (level-triggered) the next. */
#define WORKER_EVENTS 256
/* Sub-millisecond pacing of every session needs precise wake-ups. */
#define WORKER_TIMER_SLACK_NS 1000UL
#define NO_WAKE UINT64_MAX

struct aftp_worker_session {
    aftp_worker_job job;
    aftp_worker_session *next_pending; /* in the worker's pending list */
    uint64_t wake_ns;                  /* its next turn when nothing is readable; 0: at once */
    int ready;                         /* its socket or wake_fd was readable */
    atomic_int cancels_asked;          /* aftp_worker_cancel calls */
    int cancels_done;                  /* of which the worker acted on */
    size_t slot;                       /* its index in the worker's running[] */
};

struct aftp_worker {
    unsigned index;
    int epfd;
    int evfd;          /* other threads' adds, cancels, quit */
    pthread_t thread;
    pthread_mutex_t lock;
    /* under the lock */
    aftp_worker_session *pending_head, *pending_tail; /* added, not yet taken */
    int quit;
    /* The worker thread's, changed under the lock too: a cancel from
     * another thread looks its session up there. */
    aftp_worker_session **running;
    size_t nrunning, cap_running;
    atomic_uint count; /* added, their on_end not yet returned */
    aftp_drive_scratch *scratch; /* the turns' batch buffers */
    size_t scratch_datagram;     /* their datagram size: the largest of a session taken yet */
};

/* Wakes the worker thread. */
static void kick(aftp_worker *w)
{
    uint64_t one = 1;
    (void)!write(w->evfd, &one, sizeof one);
}

/* Whether ws is one the worker has and has not begun to end: a cancel
 * may then touch it. Under the lock. */
static int holds(const aftp_worker *w, const aftp_worker_session *ws)
{
    for (const aftp_worker_session *p = w->pending_head; p != NULL; p = p->next_pending)
        if (p == ws)
            return 1;
    for (size_t i = 0; i < w->nrunning; i++)
        if (w->running[i] == ws)
            return 1;
    return 0;
}

/* The fds a session's turn waits for: its socket and its wake_fd. */
static int watch_session(aftp_worker *w, aftp_worker_session *ws)
{
    const aftp_drive *d = ws->job.drive;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ws};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, d->udp->fd, &ev) != 0)
        return 0;
    if (d->wake_fd > 0 && epoll_ctl(w->epfd, EPOLL_CTL_ADD, d->wake_fd, &ev) != 0) {
        (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, d->udp->fd, NULL);
        return 0;
    }
    return 1;
}

static void unwatch_session(aftp_worker *w, aftp_worker_session *ws)
{
    const aftp_drive *d = ws->job.drive;
    (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, d->udp->fd, NULL);
    if (d->wake_fd > 0)
        (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, d->wake_fd, NULL);
}

/* The session's end: out of the worker (a cancel no longer finds it),
 * then its owner is told. */
static void end_session(aftp_worker *w, aftp_worker_session *ws, int rc)
{
    unwatch_session(w, ws);
    pthread_mutex_lock(&w->lock);
    w->running[ws->slot] = w->running[--w->nrunning];
    w->running[ws->slot]->slot = ws->slot;
    pthread_mutex_unlock(&w->lock);
    ws->job.on_end(ws->job.app, ws, rc);
    free(ws);
    atomic_fetch_sub(&w->count, 1);
}

/* One turn of the session at `now`; 0 when it ended in it. */
static int turn_session(aftp_worker *w, aftp_worker_session *ws, uint64_t now)
{
    int closed;
    ws->ready = 0;
    int rc = aftp_drive_turn(ws->job.drive, w->scratch, now, &ws->wake_ns, &closed);
    if (closed)
        end_session(w, ws, rc);
    return !closed;
}

/* Ends the session without waiting for its peer: the engine cancels and
 * one more turn sends its CLOSE, so the peer is told. */
static void end_cancelled(aftp_worker *w, aftp_worker_session *ws)
{
    uint64_t now = aftp_drive_now_ns();
    aftp_drive_cancel(ws->job.drive, now);
    if (turn_session(w, ws, now))
        end_session(w, ws, AFTP_ERR_CANCELLED);
}

/* The batch buffers fit the session's datagrams. */
static int fit_scratch(aftp_worker *w, size_t max_datagram)
{
    aftp_drive_scratch *bigger;
    if (w->scratch != NULL && max_datagram <= w->scratch_datagram)
        return AFTP_OK;
    int rc = aftp_drive_scratch_new(&bigger, max_datagram);
    if (rc != AFTP_OK)
        return rc;
    aftp_drive_scratch_del(w->scratch);
    w->scratch = bigger;
    w->scratch_datagram = max_datagram;
    return AFTP_OK;
}

/* Moves the sessions added since the last look into running[], in one
 * hold of the lock (a cancel always finds them). */
static int take_pending(aftp_worker *w, aftp_worker_session **taken)
{
    pthread_mutex_lock(&w->lock);
    size_t want = w->nrunning;
    for (aftp_worker_session *p = w->pending_head; p != NULL; p = p->next_pending)
        want++;
    if (want > w->cap_running) {
        size_t cap = want > 2 * w->cap_running ? want : 2 * w->cap_running;
        aftp_worker_session **grown = realloc(w->running, cap * sizeof *grown);
        if (grown == NULL) { /* they stay pending: tried again at the next kick */
            pthread_mutex_unlock(&w->lock);
            kick(w);
            return w->quit;
        }
        w->running = grown;
        w->cap_running = cap;
    }
    *taken = w->pending_head;
    for (aftp_worker_session *p = w->pending_head; p != NULL; p = p->next_pending) {
        p->slot = w->nrunning;
        w->running[w->nrunning++] = p;
    }
    w->pending_head = w->pending_tail = NULL;
    int quit = w->quit;
    pthread_mutex_unlock(&w->lock);
    return quit;
}

/* The sessions just taken start: watched, due at once (wake_ns 0). */
static void start_taken(aftp_worker *w, aftp_worker_session *taken)
{
    while (taken != NULL) {
        aftp_worker_session *ws = taken;
        taken = ws->next_pending;
        int rc = fit_scratch(w, ws->job.drive->max_datagram);
        if (rc == AFTP_OK && !watch_session(w, ws))
            rc = AFTP_ERR_NO_MEMORY; /* epoll's only failure for a valid fd */
        if (rc != AFTP_OK)
            end_session(w, ws, rc);
    }
}

/* Acts on the cancels asked since the last look: the first cancels the
 * engine (its next turn, at once, tells the peer), the second ends it. */
static void apply_cancels(aftp_worker *w)
{
    size_t i = 0;
    while (i < w->nrunning) {
        aftp_worker_session *ws = w->running[i];
        int asked = atomic_load(&ws->cancels_asked);
        if (asked > 0 && ws->cancels_done == 0) {
            aftp_drive_cancel(ws->job.drive, aftp_drive_now_ns());
            ws->cancels_done = 1;
            ws->wake_ns = 0;
        }
        if (asked > ws->cancels_done) {
            end_cancelled(w, ws);
            continue; /* slot i holds another session now */
        }
        i++;
    }
}

/* What other threads asked: sessions to take, cancels, quit (returned). */
static int take_control(aftp_worker *w)
{
    uint64_t count;
    aftp_worker_session *taken = NULL;
    (void)!read(w->evfd, &count, sizeof count);
    int quit = take_pending(w, &taken);
    start_taken(w, taken);
    apply_cancels(w);
    return quit;
}

/* One round: every session ready or due gets one turn. Returns the
 * earliest wake of those left. */
static uint64_t run_round(aftp_worker *w)
{
    uint64_t earliest = NO_WAKE;
    size_t i = 0;
    while (i < w->nrunning) {
        aftp_worker_session *ws = w->running[i];
        uint64_t now = aftp_drive_now_ns();
        if ((ws->ready || ws->wake_ns <= now) && !turn_session(w, ws, now))
            continue; /* it ended: slot i holds another session now */
        if (ws->wake_ns < earliest)
            earliest = ws->wake_ns;
        i++;
    }
    return earliest;
}

static int wait_fds(aftp_worker *w, struct epoll_event *evs, uint64_t wake)
{
    uint64_t now = aftp_drive_now_ns();
    if (wake == NO_WAKE)
        return epoll_wait(w->epfd, evs, WORKER_EVENTS, -1);
    uint64_t left = wake > now ? wake - now : 0;
    struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                          .tv_nsec = (long)(left % 1000000000u)};
    int n = epoll_pwait2(w->epfd, evs, WORKER_EVENTS, &ts, NULL);
    if (n < 0 && errno == ENOSYS) /* a kernel before 5.11: whole milliseconds */
        n = epoll_wait(w->epfd, evs, WORKER_EVENTS, (int)((left + 999999u) / 1000000u));
    return n;
}

/* Sleeps until `wake` or a readable fd, and marks the sessions whose fds
 * are readable. Returns whether other threads asked something. */
static int sleep_until(aftp_worker *w, uint64_t wake)
{
    struct epoll_event evs[WORKER_EVENTS];
    int n = wait_fds(w, evs, wake);
    int control = 0;
    for (int i = 0; i < n; i++) {
        aftp_worker_session *ws = evs[i].data.ptr;
        if (ws == NULL)
            control = 1;
        else
            ws->ready = 1;
    }
    return control;
}

static void *worker_main(void *arg)
{
    aftp_worker *w = arg;
    prctl(PR_SET_TIMERSLACK, WORKER_TIMER_SLACK_NS, 0, 0, 0);
    for (;;) {
        uint64_t wake = run_round(w);
        if (sleep_until(w, wake) && take_control(w))
            break; /* aftp_worker_del */
    }
    while (w->nrunning > 0)
        end_cancelled(w, w->running[w->nrunning - 1]);
    return NULL;
}

/* The thread takes no asynchronous signal: those are the application's
 * (a SIGINT handler runs on its threads). Faults stay deliverable: the
 * source guard catches SIGBUS on the thread that reads the mapping. */
static int start_thread(aftp_worker *w)
{
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&w->thread, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return e;
    char name[16];
    snprintf(name, sizeof name, "aftp-w%u", w->index);
    pthread_setname_np(w->thread, name);
    return 0;
}

/* Closes what aftp_worker_new opened; the thread is not running. */
static void free_worker(aftp_worker *w)
{
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->evfd >= 0)
        close(w->evfd);
    aftp_drive_scratch_del(w->scratch);
    free(w->running);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* The epoll set with the control eventfd in it; errno's reason else. */
static int open_fds(aftp_worker *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) != 0)
        return errno;
    return 0;
}

int aftp_worker_new(aftp_worker **out, unsigned index, char *err, size_t err_cap)
{
    *out = NULL;
    aftp_worker *w = calloc(1, sizeof *w);
    if (w == NULL) {
        snprintf(err, err_cap, "cannot start datapath worker %u: out of memory", index);
        return AFTP_ERR_NO_MEMORY;
    }
    w->index = index;
    w->epfd = w->evfd = -1;
    pthread_mutex_init(&w->lock, NULL);
    int e = open_fds(w);
    const char *what = "its epoll set and eventfd";
    if (e == 0) {
        e = start_thread(w);
        what = "its thread";
    }
    if (e != 0) {
        snprintf(err, err_cap, "cannot start datapath worker %u: %s: %s", index, what,
                 strerror(e));
        free_worker(w);
        return e == ENOMEM || e == EAGAIN ? AFTP_ERR_NO_MEMORY : AFTP_ERR_IO;
    }
    *out = w;
    return AFTP_OK;
}

int aftp_worker_add(aftp_worker *w, const aftp_worker_job *job, aftp_worker_session **out)
{
    if (w == NULL || job == NULL || job->drive == NULL || job->drive->udp == NULL ||
        job->on_end == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_worker_session *ws = calloc(1, sizeof *ws);
    if (ws == NULL)
        return AFTP_ERR_NO_MEMORY;
    ws->job = *job;
    pthread_mutex_lock(&w->lock);
    if (w->quit) {
        pthread_mutex_unlock(&w->lock);
        free(ws);
        return AFTP_ERR_INVALID_STATE;
    }
    if (out != NULL)
        *out = ws; /* before the worker can see it, so before any on_end */
    if (w->pending_tail != NULL)
        w->pending_tail->next_pending = ws;
    else
        w->pending_head = ws;
    w->pending_tail = ws;
    atomic_fetch_add(&w->count, 1);
    pthread_mutex_unlock(&w->lock);
    kick(w);
    return AFTP_OK;
}

void aftp_worker_cancel(aftp_worker *w, aftp_worker_session *ws)
{
    if (w == NULL || ws == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    int held = holds(w, ws);
    if (held)
        atomic_fetch_add(&ws->cancels_asked, 1);
    pthread_mutex_unlock(&w->lock);
    if (held)
        kick(w);
}

unsigned aftp_worker_sessions(const aftp_worker *w)
{
    return w == NULL ? 0 : atomic_load(&w->count);
}

void aftp_worker_del(aftp_worker *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->quit = 1;
    pthread_mutex_unlock(&w->lock);
    kick(w);
    pthread_join(w->thread, NULL);
    free_worker(w);
}
