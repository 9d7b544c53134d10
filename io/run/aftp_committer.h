/*
 * The receiver's group commit beside its packet handling (spec 9.14.3).
 *
 * A group commit's syncs and renames take milliseconds on a disk; run in
 * the packet loop they stop it, and with it the reading of DATA and the
 * sending of FEEDBACK and VERDICTS, once per group. The committer runs
 * aftp_treestore_commit_run on a worker thread of its own, one group at a
 * time: start() claims the group on the caller's thread (commit_begin)
 * and hands it over; the worker signals `wake_fd` (an eventfd, for the
 * caller's poll) when the group is durable; collect() ends it on the
 * caller's thread (commit_end) and gives its results. Only the worker
 * touches the group's files between the two; everything else of the
 * treestore stays with the caller's thread.
 */
#ifndef AFTP_COMMITTER_H
#define AFTP_COMMITTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "aftp_treestore.h"

typedef struct aftp_committer {
    aftp_treestore *ts;
    int wake_fd;                 /* readable once the group in flight ran */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    aftp_treestore_group *job;   /* handed to the worker, NULL: none */
    int job_ran;                 /* the worker finished `job` */
    int quit;
    /* the group in flight, caller's side */
    aftp_treestore_group *flight;
    int *results;                /* its results, W of them */
    size_t results_cap;
    int ended;                   /* collected, the engine not yet told */
} aftp_committer;

/* Ready to start groups into `ts` (no thread yet: the first group makes
 * it). AFTP_OK or an error (no eventfd, no memory). */
int aftp_committer_init(aftp_committer *c, aftp_treestore *ts, size_t max_group);
/* Joins the worker; any group still in flight runs to its end first. */
void aftp_committer_fini(aftp_committer *c);

/* Begins the group of `ids` and hands it to the worker (no group may be in
 * flight). AFTP_OK, or the error of commit_begin or of the thread. */
int aftp_committer_start(aftp_committer *c, const uint32_t *ids, size_t count);
/* Whether a group was started and its outcome is not yet taken. */
int aftp_committer_busy(const aftp_committer *c);
/* Ends the group in flight once the worker ran it (`wait`: blocking until
 * then). Returns 1 with *results, each file's outcome (valid until the
 * next start), when the group ended now or earlier without being taken,
 * else 0. */
int aftp_committer_collect(aftp_committer *c, int wait, const int **results);
/* Ends the group in flight (waiting for the worker) without taking the
 * outcome: it stays for the next collect. Before a synchronous commit. */
void aftp_committer_settle(aftp_committer *c);

#endif /* AFTP_COMMITTER_H */
