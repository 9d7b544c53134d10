/*
 * The receiver's group commit beside its packet handling (spec 9.14.3),
 * on a bounded pool of threads shared by many receivers.
 *
 * A group commit's syncs and renames take milliseconds on a disk; run in
 * the packet loop they stop it, and with it the reading of DATA and the
 * sending of FEEDBACK and VERDICTS, once per group. A committer hands its
 * receiver's groups, one at a time, to a pool thread that runs
 * aftp_treestore_commit_run: start() claims the group on the caller's
 * thread (commit_begin) and queues it; the pool thread signals `wake_fd`
 * (an eventfd, for the caller's poll) when the group is durable;
 * collect() ends it on the caller's thread (commit_end) and gives its
 * results. Only the pool thread touches the group's files between the
 * two; everything else of the treestore stays with the caller's thread.
 *
 * Why a pool (aftp_commit_pool) and not a thread per committer: a server
 * runs hundreds of sessions, each committing a short group now and then;
 * a thread each is hundreds of stacks and schedulable threads for work
 * that is mostly idle. The pool's threads are made as groups wait for one
 * (never more than its size) and take the groups in the order they were
 * queued, the oldest first among those their filesystem lets run (below).
 * What the committers keep from having a thread each:
 * - the caller never waits for a disk flush, but in collect(wait),
 *   settle() and fini(), which wait for its own group's run and nothing
 *   else: a group still queued leaves the queue and runs on the caller's
 *   thread (which would only wait otherwise), a group running on a pool
 *   thread is waited for. So a server's session ending holds its worker
 *   for its own group's syncs and renames, never for other sessions'
 *   groups queued before it;
 * - a committer's groups run in its order: it queues its next group only
 *   once the last one is collected (one in flight at most);
 * - a stalled disk delays its own sessions, not the others. Each
 *   committer names the filesystem its groups write to (`dev`, st_dev of
 *   its root); on a pool of N >= 2 threads at most N - 1 groups of one
 *   filesystem run at once, and a group whose filesystem is at that cap
 *   waits in the queue while younger groups of other filesystems run. So
 *   a filesystem that stops answering fsync holds at most N - 1 threads,
 *   its own later groups wait for it (as they would with a thread each),
 *   and a group on another filesystem waits for no stalled group unless
 *   stalls on two filesystems or more hold all N threads at once; else
 *   at most for the answering groups queued before it. A pool of one has
 *   no thread to spare: one stall holds it;
 * - fini() ends the group in flight, queued or running, before the
 *   committer's memory can go (the session that owns it may be freed next).
 */
#ifndef AFTP_COMMITTER_H
#define AFTP_COMMITTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aftp_treestore.h"

typedef struct aftp_commit_pool aftp_commit_pool;

typedef struct aftp_committer {
    aftp_treestore *ts;
    dev_t dev;                   /* the filesystem ts writes to: the pool's cap;
                                  * changed only with no group in flight */
    aftp_commit_pool *pool;
    int wake_fd;                 /* readable once the group in flight ran */
    /* under the pool's lock */
    aftp_treestore_group *job;   /* handed to the pool, NULL: none */
    int job_ran;                 /* a pool thread finished `job` */
    int job_queued;              /* `job` waits in the pool's queue */
    struct aftp_committer *queued_next; /* in the pool's queue */
    /* the group in flight, caller's side */
    aftp_treestore_group *flight;
    int *results;                /* its results, W of them */
    size_t results_cap;
    int ended;                   /* collected, the engine not yet told */
} aftp_committer;

/* A pool of at most `threads` (at least 1) commit threads, none made yet:
 * each is made when a group waits and no thread is free (named
 * "aftp-c<index>", every signal blocked). AFTP_OK or AFTP_ERR_NO_MEMORY. */
int aftp_commit_pool_new(aftp_commit_pool **out, unsigned threads);
/* The threads it has made so far (at most its size). Any thread. */
unsigned aftp_commit_pool_threads(aftp_commit_pool *p);
/* Joins its threads and frees it; every committer of it finished first. */
void aftp_commit_pool_del(aftp_commit_pool *p);

/* Ready to start groups into `ts`, which writes to filesystem `dev`
 * (st_dev of its root), on `pool` (borrowed: it outlives the committer).
 * AFTP_OK or an error (no eventfd, no memory). */
int aftp_committer_init(aftp_committer *c, aftp_treestore *ts, dev_t dev, size_t max_group,
                        aftp_commit_pool *pool);
/* Ends the group in flight: runs it here if it is still queued, else
 * waits for its run on the pool thread. */
void aftp_committer_fini(aftp_committer *c);

/* Begins the group of `ids` and queues it on the pool (no group may be in
 * flight). AFTP_OK, or the error of commit_begin, or AFTP_ERR_NO_MEMORY
 * when the pool has no thread and cannot make one. */
int aftp_committer_start(aftp_committer *c, const uint32_t *ids, size_t count);
/* Whether a group was started and its outcome is not yet taken. */
int aftp_committer_busy(const aftp_committer *c);
/* Ends the group in flight once it ran (`wait`: running it here if it is
 * still queued, else blocking until the pool thread ran it). Returns 1 with *results, each file's outcome (valid until the
 * next start), when the group ended now or earlier without being taken,
 * else 0. */
int aftp_committer_collect(aftp_committer *c, int wait, const int **results);
/* Ends the group in flight (as a waiting collect) without taking the
 * outcome: it stays for the next collect. Before a synchronous commit. */
void aftp_committer_settle(aftp_committer *c);

#endif /* AFTP_COMMITTER_H */
