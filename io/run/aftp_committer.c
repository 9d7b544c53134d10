/* The receiver's group commit on a shared pool of threads
 * (aftp_committer.h). */
#include "aftp_committer.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "aftp/aftp_error.h"

struct aftp_commit_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;            /* a group queued, or quit */
    pthread_cond_t done;            /* a group ran */
    aftp_committer *head, *tail;    /* committers whose group waits, in start order */
    unsigned queued;                /* of them */
    unsigned idle;                  /* threads made and running no group */
    unsigned started, size;         /* threads made, at most size */
    unsigned per_dev_max;           /* groups of one filesystem running at once */
    int quit;
    pthread_t *threads;             /* size of them, the first `started` made */
    aftp_committer **running;       /* size slots: whose group a pool thread
                                     * runs, NULL: a free slot */
};

int aftp_commit_pool_new(aftp_commit_pool **out, unsigned threads)
{
    aftp_commit_pool *p = calloc(1, sizeof *p);
    unsigned size = threads ? threads : 1;
    *out = NULL;
    if (p != NULL) {
        p->threads = calloc(size, sizeof *p->threads);
        p->running = calloc(size, sizeof *p->running);
    }
    if (p == NULL || p->threads == NULL || p->running == NULL) {
        if (p != NULL) {
            free(p->threads);
            free(p->running);
        }
        free(p);
        return AFTP_ERR_NO_MEMORY;
    }
    p->size = size;
    /* One thread stays out of any one filesystem's reach (a pool of one
     * has none to spare). */
    p->per_dev_max = size > 1 ? size - 1 : 1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    *out = p;
    return AFTP_OK;
}

/* Under the lock: c's group leaves the queue (`prev` before it, NULL when
 * it is the first). */
static void unlink_queued(aftp_commit_pool *p, aftp_committer *prev, aftp_committer *c)
{
    if (prev != NULL)
        prev->queued_next = c->queued_next;
    else
        p->head = c->queued_next;
    if (p->tail == c)
        p->tail = prev;
    c->queued_next = NULL;
    c->job_queued = 0;
    p->queued--;
}

/* Under the lock: the groups running on pool threads that write to `dev`. */
static unsigned running_on(const aftp_commit_pool *p, dev_t dev)
{
    unsigned n = 0;
    for (unsigned i = 0; i < p->size; i++)
        n += p->running[i] != NULL && p->running[i]->dev == dev;
    return n;
}

/* Under the lock: the oldest queued group whose filesystem runs fewer
 * than per_dev_max groups, taken from the queue into a free slot (*slot);
 * NULL when none may run now. */
static aftp_committer *take_eligible(aftp_commit_pool *p, unsigned *slot)
{
    aftp_committer *prev = NULL, *c = p->head;
    while (c != NULL && running_on(p, c->dev) >= p->per_dev_max) {
        prev = c;
        c = c->queued_next;
    }
    if (c == NULL)
        return NULL;
    unlink_queued(p, prev, c);
    for (*slot = 0; p->running[*slot] != NULL; (*slot)++)
        continue; /* a thread is free (this one), so is a slot */
    p->running[*slot] = c;
    return c;
}

/* Under the lock: the group has run. Its wake_fd is written before the
 * lock goes: once job_ran is seen the committer may be freed. */
static void finish_job(aftp_commit_pool *p, aftp_committer *c)
{
    uint64_t one = 1;
    c->job_ran = 1;
    pthread_cond_broadcast(&p->done);
    (void)!write(c->wake_fd, &one, sizeof one);
}

static void *pool_main(void *arg)
{
    aftp_commit_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        unsigned slot;
        aftp_committer *c = take_eligible(p, &slot);
        if (c == NULL && p->quit)
            break; /* nothing left to run: every committer finished */
        if (c == NULL) {
            pthread_cond_wait(&p->work, &p->lock);
            continue;
        }
        p->idle--;
        pthread_mutex_unlock(&p->lock);
        aftp_treestore_commit_run(c->ts, c->job);
        pthread_mutex_lock(&p->lock);
        p->running[slot] = NULL;
        finish_job(p, c);
        p->idle++;
        /* its filesystem may have been at its cap: a group waiting on it
         * may run now on a thread that waits */
        pthread_cond_broadcast(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Under the lock: one more thread, made with every signal blocked (the
 * process's signals stay with the threads that expect them). */
static int add_thread(aftp_commit_pool *p)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&p->threads[p->started], NULL, pool_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return AFTP_ERR_NO_MEMORY;
    char name[16];
    snprintf(name, sizeof name, "aftp-c%u", p->started);
    pthread_setname_np(p->threads[p->started], name);
    p->started++;
    p->idle++; /* from its birth: it takes the next group queued */
    return AFTP_OK;
}

/* Under the lock: a thread for each group that waits, while the size
 * allows. AFTP_OK when the pool has a thread at all. */
static int staff(aftp_commit_pool *p)
{
    while (p->queued > p->idle && p->started < p->size)
        if (add_thread(p) != AFTP_OK)
            break;
    return p->started > 0 ? AFTP_OK : AFTP_ERR_NO_MEMORY;
}

unsigned aftp_commit_pool_threads(aftp_commit_pool *p)
{
    pthread_mutex_lock(&p->lock);
    unsigned n = p->started;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void aftp_commit_pool_del(aftp_commit_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->running);
    free(p->threads);
    free(p);
}

int aftp_committer_init(aftp_committer *c, aftp_treestore *ts, dev_t dev, size_t max_group,
                        aftp_commit_pool *pool)
{
    *c = (aftp_committer){.ts = ts, .dev = dev, .pool = pool, .wake_fd = -1};
    c->results = calloc(max_group ? max_group : 1, sizeof *c->results);
    c->results_cap = max_group;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->results == NULL || c->wake_fd < 0) {
        int rc = c->results == NULL ? AFTP_ERR_NO_MEMORY : AFTP_ERR_IO;
        free(c->results);
        if (c->wake_fd >= 0)
            close(c->wake_fd);
        *c = (aftp_committer){.wake_fd = -1};
        return rc;
    }
    return AFTP_OK;
}

/* The group in flight joins the pool's queue. */
static void enqueue(aftp_committer *c)
{
    aftp_commit_pool *p = c->pool;
    pthread_mutex_lock(&p->lock);
    c->job = c->flight;
    c->job_ran = 0;
    c->job_queued = 1;
    c->queued_next = NULL;
    if (p->tail != NULL)
        p->tail->queued_next = c;
    else
        p->head = c;
    p->tail = c;
    p->queued++;
    (void)staff(p); /* it has a thread already (start): the group will run */
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

/* The pool has a thread to run a group before one is begun (a group
 * begun must run to be ended). */
static int pool_ready(aftp_commit_pool *p)
{
    pthread_mutex_lock(&p->lock);
    int rc = p->started > 0 ? AFTP_OK : add_thread(p);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int aftp_committer_start(aftp_committer *c, const uint32_t *ids, size_t count)
{
    if (c->flight != NULL || c->ended || count > c->results_cap)
        return AFTP_ERR_INVALID_STATE;
    int rc = pool_ready(c->pool);
    if (rc == AFTP_OK)
        rc = aftp_treestore_commit_begin(c->ts, ids, count, c->results, &c->flight);
    if (rc != AFTP_OK)
        return rc;
    enqueue(c);
    return AFTP_OK;
}

int aftp_committer_busy(const aftp_committer *c)
{
    return c->flight != NULL || c->ended;
}

/* Under the lock: c's group, still queued, leaves the queue and runs on
 * the caller's thread, which would only wait for it otherwise: behind
 * other committers' groups (a stalled disk's among them) when every
 * thread is busy. */
static void run_here(aftp_committer *c)
{
    aftp_commit_pool *p = c->pool;
    aftp_committer *prev = NULL;
    for (aftp_committer *q = p->head; q != c; q = q->queued_next)
        prev = q;
    unlink_queued(p, prev, c);
    pthread_mutex_unlock(&p->lock);
    aftp_treestore_commit_run(c->ts, c->job);
    pthread_mutex_lock(&p->lock);
    finish_job(p, c);
}

/* Ends the group in flight once it ran; 1 when it has ended (now or
 * earlier). */
static int end_flight(aftp_committer *c, int wait)
{
    if (c->flight == NULL)
        return c->ended;
    aftp_commit_pool *p = c->pool;
    pthread_mutex_lock(&p->lock);
    if (wait && c->job_queued)
        run_here(c);
    while (wait && !c->job_ran)
        pthread_cond_wait(&p->done, &p->lock);
    int ran = c->job_ran;
    if (ran)
        c->job = NULL;
    pthread_mutex_unlock(&p->lock);
    if (!ran)
        return 0;
    uint64_t count;
    (void)!read(c->wake_fd, &count, sizeof count);
    aftp_treestore_commit_end(c->ts, c->flight);
    c->flight = NULL;
    c->ended = 1;
    return 1;
}

int aftp_committer_collect(aftp_committer *c, int wait, const int **results)
{
    if (!end_flight(c, wait))
        return 0;
    c->ended = 0;
    *results = c->results;
    return 1;
}

void aftp_committer_settle(aftp_committer *c)
{
    (void)end_flight(c, 1);
}

void aftp_committer_fini(aftp_committer *c)
{
    if (c->results == NULL)
        return;
    aftp_committer_settle(c);
    close(c->wake_fd);
    free(c->results);
    *c = (aftp_committer){.wake_fd = -1};
}
