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
/* A session ended without waiting for its peer still sends its CLOSE,
 * which may wait for the sender's pacer: at most one datagram's time at
 * its rate (11 ms at 1 Mbit/s). Beyond this it ends unsent. */
#define WORKER_END_GRACE_NS 100000000u

struct aftp_worker_session {
    aftp_worker_job job;
    aftp_worker_session *prev, *next;  /* in the worker's pending or running list */
    uint64_t wake_ns;                  /* its next turn when nothing is readable; 0: at once */
    int ready;                         /* its socket or wake_fd was readable */
    atomic_int cancels_asked;          /* aftp_worker_cancel calls */
    int cancels_done;                  /* of which the worker acted on */
    uint64_t end_by;                   /* ending without its peer: the grace's end; 0: not */
    uint64_t sent_at_end;              /* its datagrams sent when it began to end */
};

typedef struct session_list {
    aftp_worker_session *head, *tail;
} session_list;

static void list_append(session_list *l, aftp_worker_session *ws)
{
    ws->next = NULL;
    ws->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = ws;
    else
        l->head = ws;
    l->tail = ws;
}

static void list_remove(session_list *l, aftp_worker_session *ws)
{
    if (ws->prev != NULL)
        ws->prev->next = ws->next;
    else
        l->head = ws->next;
    if (ws->next != NULL)
        ws->next->prev = ws->prev;
    else
        l->tail = ws->prev;
}

/* Moves every session of `from` to the end of `to`. */
static void list_splice(session_list *to, session_list *from)
{
    if (from->head == NULL)
        return;
    from->head->prev = to->tail;
    if (to->tail != NULL)
        to->tail->next = from->head;
    else
        to->head = from->head;
    to->tail = from->tail;
    *from = (session_list){NULL, NULL};
}

static int list_holds(const session_list *l, const aftp_worker_session *ws)
{
    for (const aftp_worker_session *p = l->head; p != NULL; p = p->next)
        if (p == ws)
            return 1;
    return 0;
}

struct aftp_worker {
    unsigned index;
    int epfd;
    int evfd;          /* other threads' adds, cancels, quit */
    pthread_t thread;
    pthread_mutex_t lock;
    /* under the lock */
    session_list pending; /* added, not yet taken */
    int quit;
    int quitting; /* the worker thread's: quit seen, every session ending */
    /* The worker thread's, in round order, changed under the lock too: a
     * cancel from another thread looks its session up there. */
    session_list running;
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
    list_remove(&w->running, ws);
    pthread_mutex_unlock(&w->lock);
    ws->job.on_end(ws->job.app, ws, rc);
    free(ws);
    atomic_fetch_sub(&w->count, 1);
}

static uint64_t datagrams_sent(const aftp_worker_session *ws)
{
    aftp_stats st;
    aftp_drive_stats(ws->job.drive, &st);
    return st.packets_sent;
}

/* Ends the session without waiting for its peer: the engine cancels, and
 * its turns go on only until its CLOSE has left (whatever it sends once
 * cancelled is a CLOSE), so the peer is told. */
static void begin_end(aftp_worker_session *ws, uint64_t now)
{
    if (ws->end_by != 0)
        return;
    aftp_drive_cancel(ws->job.drive, now);
    ws->cancels_done = 2;
    ws->end_by = now + WORKER_END_GRACE_NS;
    ws->sent_at_end = datagrams_sent(ws);
    ws->wake_ns = 0;
}

/* An ending session whose CLOSE has left, or whose grace is over. */
static int end_due(const aftp_worker_session *ws, uint64_t now)
{
    return ws->end_by != 0 && (now >= ws->end_by || datagrams_sent(ws) > ws->sent_at_end);
}

/* One turn of the session at `now`; 0 when it ended in it. */
static int turn_session(aftp_worker *w, aftp_worker_session *ws, uint64_t now)
{
    int closed;
    ws->ready = 0;
    int rc = aftp_drive_turn(ws->job.drive, w->scratch, now, &ws->wake_ns, &closed);
    if (!closed && end_due(ws, now)) {
        closed = 1;
        rc = AFTP_ERR_CANCELLED;
    }
    if (closed)
        end_session(w, ws, rc);
    else if (ws->end_by != 0 && ws->wake_ns > ws->end_by)
        ws->wake_ns = ws->end_by;
    return !closed;
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

/* Moves the sessions added since the last look to the running list, in
 * one hold of the lock (a cancel always finds them); returns the first. */
static aftp_worker_session *take_pending(aftp_worker *w)
{
    pthread_mutex_lock(&w->lock);
    aftp_worker_session *first = w->pending.head;
    list_splice(&w->running, &w->pending);
    w->quitting = w->quit;
    pthread_mutex_unlock(&w->lock);
    return first;
}

/* The sessions from `first` on start: watched, due at once (wake_ns 0). */
static void start_taken(aftp_worker *w, aftp_worker_session *first)
{
    aftp_worker_session *next;
    for (aftp_worker_session *ws = first; ws != NULL; ws = next) {
        next = ws->next;
        int rc = fit_scratch(w, ws->job.drive->max_datagram);
        if (rc == AFTP_OK && !watch_session(w, ws))
            rc = AFTP_ERR_NO_MEMORY; /* epoll's only failure for a valid fd */
        if (rc != AFTP_OK)
            end_session(w, ws, rc);
    }
}

/* Acts on the cancels asked since the last look: the first cancels the
 * engine (its next turn, at once, tells the peer), the second ends the
 * session without waiting for the peer. */
static void apply_cancels(aftp_worker *w)
{
    for (aftp_worker_session *ws = w->running.head; ws != NULL; ws = ws->next) {
        int asked = atomic_load(&ws->cancels_asked);
        uint64_t now = aftp_drive_now_ns();
        if (asked > 0 && ws->cancels_done == 0) {
            aftp_drive_cancel(ws->job.drive, now);
            ws->cancels_done = 1;
            ws->wake_ns = 0;
        }
        if (asked > 1 || w->quitting)
            begin_end(ws, now);
    }
}

/* What other threads asked: sessions to take, cancels, quit (every
 * session then ends without waiting for its peer). */
static void take_control(aftp_worker *w)
{
    uint64_t count;
    (void)!read(w->evfd, &count, sizeof count);
    start_taken(w, take_pending(w));
    apply_cancels(w);
}

/* One round: every session ready or due gets one turn. Returns the
 * earliest wake of those left. */
static uint64_t run_round(aftp_worker *w)
{
    uint64_t earliest = NO_WAKE;
    aftp_worker_session *next;
    for (aftp_worker_session *ws = w->running.head; ws != NULL; ws = next) {
        next = ws->next; /* a turn may end ws, never another session */
        uint64_t now = aftp_drive_now_ns();
        if ((ws->ready || ws->wake_ns <= now) && !turn_session(w, ws, now))
            continue;
        if (ws->wake_ns < earliest)
            earliest = ws->wake_ns;
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
        if (w->quitting && w->running.head == NULL)
            return NULL; /* aftp_worker_del: every session has ended */
        if (sleep_until(w, wake))
            take_control(w);
    }
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
    list_append(&w->pending, ws);
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
    /* Only a session the worker has and has not begun to end: its
     * memory is then still the session's. */
    int held = list_holds(&w->pending, ws) || list_holds(&w->running, ws);
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
