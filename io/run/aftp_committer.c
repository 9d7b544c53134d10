/* The receiver's group commit on a worker thread (aftp_committer.h). */
#include "aftp_committer.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "aftp/aftp_error.h"

int aftp_committer_init(aftp_committer *c, aftp_treestore *ts, size_t max_group)
{
    *c = (aftp_committer){.ts = ts, .wake_fd = -1};
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
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    return AFTP_OK;
}

static void *worker(void *arg)
{
    aftp_committer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->quit && (c->job == NULL || c->job_ran))
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->job == NULL || c->job_ran)
            break; /* quit, nothing left to run */
        aftp_treestore_group *g = c->job;
        pthread_mutex_unlock(&c->lock);
        aftp_treestore_commit_run(c->ts, g);
        pthread_mutex_lock(&c->lock);
        c->job_ran = 1;
        pthread_cond_broadcast(&c->cond);
        uint64_t one = 1;
        (void)!write(c->wake_fd, &one, sizeof one);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* The worker, made with every signal blocked: the process's signals stay
 * with the threads that expect them. */
static int start_thread(aftp_committer *c)
{
    if (c->thread_started)
        return AFTP_OK;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&c->thread, NULL, worker, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    c->thread_started = err == 0;
    return err == 0 ? AFTP_OK : AFTP_ERR_NO_MEMORY;
}

int aftp_committer_start(aftp_committer *c, const uint32_t *ids, size_t count)
{
    if (c->flight != NULL || c->ended || count > c->results_cap)
        return AFTP_ERR_INVALID_STATE;
    int rc = start_thread(c);
    if (rc == AFTP_OK)
        rc = aftp_treestore_commit_begin(c->ts, ids, count, c->results, &c->flight);
    if (rc != AFTP_OK)
        return rc;
    pthread_mutex_lock(&c->lock);
    c->job = c->flight;
    c->job_ran = 0;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return AFTP_OK;
}

int aftp_committer_busy(const aftp_committer *c)
{
    return c->flight != NULL || c->ended;
}

/* Ends the group in flight once it ran; 1 when it has ended (now or
 * earlier). */
static int end_flight(aftp_committer *c, int wait)
{
    if (c->flight == NULL)
        return c->ended;
    pthread_mutex_lock(&c->lock);
    while (wait && !c->job_ran)
        pthread_cond_wait(&c->cond, &c->lock);
    int ran = c->job_ran;
    if (ran)
        c->job = NULL;
    pthread_mutex_unlock(&c->lock);
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
    if (c->thread_started) {
        pthread_mutex_lock(&c->lock);
        c->quit = 1;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    close(c->wake_fd);
    free(c->results);
    *c = (aftp_committer){.wake_fd = -1};
}
