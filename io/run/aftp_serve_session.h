/*
 * One session of the server (aftp_serve.h): its engine (a receiver, or a
 * pull's sender), its
 * connected socket, its storage beneath its root, its group committer and
 * its datapath (aftp_drive). Made and handshaken on the control thread
 * (aftp_hub.h), then run by a worker thread (aftp_worker.h), whose on_end
 * ends it there (aftp_serve_session_end); the control thread then reports
 * and frees it. Each call names the thread it belongs to.
 *
 * The callbacks of aftp_serve_opts are made under `cb_lock` of the shared
 * part, whichever thread makes them: one at a time for the whole run.
 */
#ifndef AFTP_SERVE_SESSION_H
#define AFTP_SERVE_SESSION_H

#include <pthread.h>
#include <sys/stat.h>

#include "aftp_committer.h"
#include "aftp_drive.h"
#include "aftp_filelock.h"
#include "aftp_serve.h"
#include "aftp_share.h"

/* What a run's sessions share: read-only once the run started, but for
 * the lock. */
typedef struct aftp_serve_shared {
    const aftp_serve_opts *o;
    pthread_mutex_t cb_lock; /* held around each callback of o */
    /* The destination files the pushes are writing, one writer per file
     * (aftp_filelock.h); NULL when they keep nothing (faux). */
    aftp_filelocks *files;
    /* The threads the pushes' group commits run on (aftp_committer.h);
     * NULL: each commit runs in its session's turn. */
    aftp_commit_pool *commits;
    /* Control thread, with a total rate cap: the share a session about to
     * start gets beside the running ones (its own cap cap_bps, 0: none). */
    uint64_t (*entry_share)(const struct aftp_serve_shared *sh, uint64_t cap_bps);
} aftp_serve_shared;

/* How far the HELLO got with the admission policy, so a HELLO that
 * started nothing can be explained (enum aftp_serve_drop). */
typedef struct aftp_serve_probe {
    int looked_up;  /* message 1 opened as far as the client's key */
    int ts_refused; /* the policy refused its timestamp */
    int refused;    /* unprotected: the admission refused the session */
    int admitted;   /* unprotected: its admission ran (at the first probe that asks) */
    uint8_t key[AFTP_KEY_LEN];
} aftp_serve_probe;

/* The root a session's files go beneath, as the sweeps tell roots apart. */
typedef struct aftp_serve_root {
    dev_t dev;
    ino_t ino;
} aftp_serve_root;

typedef struct aftp_serve_session aftp_serve_session;
struct aftp_serve_session {
    aftp_serve_shared *sh;
    void *app;                   /* its callbacks' app (session_open) */
    struct sockaddr_storage addr; /* its client */
    uint32_t conn_id;            /* the client's id, from its HELLO */
    aftp_io_ctx io;              /* the storage the engine writes to, the result */
    aftp_io_result res;
    aftp_udp udp;                /* connected to the client */
    aftp_drive d;
    aftp_storage_ops tree_ops;   /* aftp_treestore_ops, its decisions reported */
    aftp_committer committer;    /* group commits beside the packets */
    aftp_serve_probe probe;
    int pull;                    /* a pull (spec 9.15): d.sender serves it from
                                  * io.storage.pull_src, else d.receiver stores */
    int rootfd;                  /* chosen by o->admit, -1: the server's dir */
    aftp_serve_root root;
    uint64_t rate_cap;           /* its sender's cap, chosen by o->admit; 0: none */
    /* Non-empty: the session is refused once its handshake completes, by
     * CLOSE(LIMIT) with this reason (the server is full, or draining). */
    char refusal[160];
    uint64_t next_tree_tick_ns;
    /* The total rate cap (o->total_rate_bps): the worker publishes the
     * session's datagram bytes, the hub measures them and sets its share,
     * the worker hands that to the engine. */
    uint64_t wire_bytes;         /* atomic; worker writes */
    uint64_t share_bps;          /* atomic; hub writes, 0: none yet */
    uint64_t share_applied;      /* worker: what the engine has */
    uint64_t next_publish_ns;    /* worker */
    aftp_share_session share;    /* hub: its cap and last measured rate */
    uint64_t sampled_bytes, sampled_ns; /* hub: the previous round's sample */
    int end_rc;                  /* the engine's end, as the worker gave it */
    /* the hub's bookkeeping */
    void *worker, *worker_session;
    int counts;                  /* it holds one of the max_sessions slots */
    int refusing;                /* it is refused (at once, or once confirmed) */
    int handshaking;             /* not yet confirmed by its client (atomic) */
    aftp_serve_session *prev, *next;
    aftp_serve_session *ended_next; /* the worker handed it back */
    int ended;                   /* so: its worker session is gone (under the hub's lock) */
};

/* Control thread: a session for the HELLO from `from` (conn_id): its
 * storage at the server's dir, its socket bound beside `listener` and
 * connected to `from`, its engine: a receiver, or for a HELLO with role
 * PULL (pull, on a server with a tree storage) a sender over aftp_pullsrc
 * (aftp_serve_pull.h). NULL when any of them fails (`why` then says why,
 * for the operator) or session_open gave nothing. */
aftp_serve_session *aftp_serve_session_new(aftp_serve_shared *sh, const aftp_udp *listener,
                                           const struct sockaddr *from, uint32_t conn_id,
                                           int pull, char *why, size_t cap);
/* Control thread: feeds the HELLO to the engine (the handshake and the
 * admission run now). 1 when the engine took it (the session is to run:
 * HELLO_ACK or a CLOSE is due), 0 when it dropped it in silence (the probe
 * says why; the session is then only to be freed). */
int aftp_serve_session_hello(aftp_serve_session *ss, const uint8_t *pkt, size_t len,
                             uint64_t now_ns);
/* Whether the engine took the HELLO as a session to serve (not refused at
 * once: CLOSE(UNAUTHORIZED), CLOSE(PROTOCOL), a rate cap it cannot honour). */
int aftp_serve_session_admitted(const aftp_serve_session *ss);
/* Control thread, before it runs: the session is refused once its client
 * confirms the handshake, by CLOSE(LIMIT, reason). */
void aftp_serve_session_refuse(aftp_serve_session *ss, const char *reason);
/* A step of the sweep of resume state beneath the session's root
 * (budget entries, UINT_MAX: the rest of the pass). Control thread, when
 * no other session of that root runs. */
void aftp_serve_session_sweep(aftp_serve_session *ss, unsigned budget);
/* Worker thread (the job's on_end): the engine ended with rc; the group
 * in flight is settled, the outcome settled, the tree's metadata applied. */
void aftp_serve_session_end(aftp_serve_session *ss, int rc);
/* Control thread, once ended: on_session_end. */
void aftp_serve_session_report(aftp_serve_session *ss);
/* Control thread: frees it (storage, engine, socket, root, its app).
 * root_shared: another user of its root (a session, the hub's sweeps)
 * runs, so its empty resume directory stays for them. */
void aftp_serve_session_del(aftp_serve_session *ss, int root_shared);
/* Control thread, each round of the total rate cap: the session's rate
 * since the previous round (the first round only starts the count), into
 * ss->share. */
void aftp_serve_session_measure(aftp_serve_session *ss, uint64_t now_ns);
/* A HELLO refused at the handshake (its key not admitted, a replay): not
 * the session `once` waits for. */
int aftp_serve_session_refused(const aftp_serve_session *ss);
/* The root a directory fd is, as the sweeps compare them. */
void aftp_serve_root_of(int dirfd, aftp_serve_root *out);
/* Runs o's callback `call` under the run's lock. */
#define AFTP_SERVE_CALLBACK(sh, call)                                                        \
    do {                                                                                     \
        pthread_mutex_lock(&(sh)->cb_lock);                                                  \
        call;                                                                                \
        pthread_mutex_unlock(&(sh)->cb_lock);                                                \
    } while (0)

#endif /* AFTP_SERVE_SESSION_H */
