/*
 * Many sessions' datapaths on one thread: a server's worker.
 *
 * A worker owns a thread that runs the turns (aftp_drive_turn) of the
 * sessions handed to it. Each round it turns every session that is ready
 * (its socket or its drive's wake_fd readable) or due (its wake time
 * passed), once each: one batch in and one batch out at most
 * (AFTP_UDP_TX_MAX datagrams), so a session's burst delays another by at
 * most one batch per session. Between rounds it sleeps in epoll until the
 * earliest wake (ns precision, 1 us timer slack on its own thread) or a
 * readable fd: the sessions' sockets and wake fds, and an eventfd by which
 * other threads hand it sessions and cancels. It allocates nothing per
 * datagram: one set of batch buffers (aftp_drive_scratch) serves every
 * session in turn. A session's storage callbacks (its engine's, its
 * committer's results) run on the worker thread that runs the session.
 */
#ifndef AFTP_WORKER_H
#define AFTP_WORKER_H

#include <stddef.h>

#include "aftp_drive.h"

typedef struct aftp_worker aftp_worker;
typedef struct aftp_worker_session aftp_worker_session;

typedef struct aftp_worker_job {
    aftp_drive *drive;   /* borrowed until on_end: engine, connected socket, hooks; drive->interrupt unused */
    /* required, on the worker thread: the session ended (rc and closed as aftp_drive_turn gives them). After it
     * returns the worker never touches the session or the drive again. */
    void (*on_end)(void *app, aftp_worker_session *ws, int rc);
    void *app;
} aftp_worker_job;

/* Starts a worker and its thread (named "aftp-w<index>"). AFTP_OK, or an
 * error with what failed and why in err. */
int aftp_worker_new(aftp_worker **out, unsigned index, char *err, size_t err_cap);

/* Any thread: the worker takes the session at its next turn (it wakes at
 * once). *out stays valid until the job's on_end returns. AFTP_OK,
 * AFTP_ERR_NO_MEMORY, AFTP_ERR_INVALID_ARGUMENT (no drive or on_end), or
 * AFTP_ERR_INVALID_STATE once aftp_worker_del has begun. */
int aftp_worker_add(aftp_worker *w, const aftp_worker_job *job, aftp_worker_session **out);

/* Any thread: the session's engine cancels (its peer is told); on_end
 * follows. Idempotent; a second call ends it without waiting for the peer
 * (as a second interrupt does in aftp_drive_run): once its CLOSE has left
 * (the sender's pacer may hold it a little), at most 100 ms later, with
 * AFTP_ERR_CANCELLED unless it closed meanwhile. A cancel racing the
 * session's end is harmless (an ending session is left alone); once its
 * on_end has returned, ws must not be passed again (its memory may then
 * hold a newer session). */
void aftp_worker_cancel(aftp_worker *w, aftp_worker_session *ws);

/* Any thread: how many sessions it runs now (added, their on_end not yet
 * returned). */
unsigned aftp_worker_sessions(const aftp_worker *w);

/* Ends what is left as a second cancel does (each peer is told: the
 * session's turns go on until its CLOSE has left, 100 ms at most), calls
 * every on_end, joins the thread and frees the worker. Not from the
 * worker's own thread (an on_end). */
void aftp_worker_del(aftp_worker *w);

#endif /* AFTP_WORKER_H */
