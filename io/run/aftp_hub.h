/*
 * The server's control plane (aftp_serve.h) on a libuv loop: the listener
 * (a uv_poll on its socket), the front door (door/aftp_door.h), the
 * handshakes (each HELLO the door starts gets a receiver engine, fed on
 * the loop's thread: the admission runs there), the table of sessions and
 * its limit, the worker threads that run the sessions' datapaths
 * (aftp_worker.h), a uv timer (every AFTP_HUB_TICK_NS: on_control_tick,
 * the stop and drain checks, the sweep steps of resume state) and a
 * uv_async by which the workers hand back the sessions that ended.
 *
 * Limits: at most max_sessions sessions are served at once (`once`: one).
 * A HELLO beyond them (or while draining) still runs its handshake, so
 * the refusal is authenticated: the session is handed to a worker marked
 * to be refused, and once its client confirms the handshake it is closed
 * with CLOSE(LIMIT) and a reason that names the limit (spec 14.2.5). At
 * most AFTP_HUB_REFUSING_MAX such refusals run at once; past them (and
 * always with `once`, whose next client is served once the current session
 * ends) such a HELLO gets silence, and the client resends it. The door
 * asks for cookies (RETRY) when the server is under load: the table three
 * quarters full, or AFTP_HUB_HANDSHAKING_LOAD sessions whose client has
 * not confirmed the handshake, or more unvalidated HELLOs in a second than
 * the door takes (aftp_door.h). A datagram on the listener from the
 * address of a session in the table is dropped: it is a late copy of that
 * client's HELLO (its socket, connected before the HELLO_ACK left, gets
 * everything else).
 *
 * One writer per file, not per client: a client key (or address) may run
 * any number of pushes at once. A file's partial data and resume state are
 * one session's, so the sessions claim the files they write in a table of
 * the hub (sh.files, aftp_filelock.h): a file another session writes gets
 * its verdict once that session released it (its entry ended, or the
 * session did), resuming from what it made durable (a sender restarted
 * after a crash waits at most for its lingering session's idle timeout);
 * meanwhile that push's entries already decided go on
 * (aftp_treestore_share). A server that keeps nothing (faux) has no such
 * state and no table.
 *
 * Stop (hooks.interrupt): every session is cancelled (its client told);
 * one still running AFTP_HUB_FORCE_NS later is cancelled again, which ends
 * it at once; the hub ends when the table is empty (within about 100 ms).
 * Drain (*drain): no new session is admitted (late HELLOs get the
 * refusal, "the server is shutting down"), running ones go on; at the
 * drain's deadline the rest are stopped as above; the hub ends, AFTP_OK,
 * when the table is empty.
 *
 * Total rate cap (o->total_rate_bps, aftp_share.h): a HELLO's admission
 * asks the hub for the new session's share beside the running ones (its
 * HELLO_ACK carries it); the timer measures every session's rate once a
 * second (AFTP_SHARE_ROUND_NS) and splits the total again then and after
 * each session's start or end; each session's worker hands its new share
 * to the engine (aftp_serve_session.h).
 *
 * Sweeps of resume state never run beneath a root while a session of that
 * root runs: the server's dir is swept in full when the hub starts, then
 * a step every AFTP_HUB_SWEEP_NS while no session of it runs; a root an
 * admission chose gets a step when its session is admitted and the rest
 * of the pass when it ends, each only when no other session of that root
 * runs.
 */
#ifndef AFTP_HUB_H
#define AFTP_HUB_H

#include "aftp_serve.h"

struct uv_loop_s;

#define AFTP_HUB_TICK_NS 50000000u      /* the control timer's period */
#define AFTP_HUB_FORCE_NS 50000000u     /* a stopped session's grace for its CLOSE */
#define AFTP_HUB_SWEEP_NS 100000000u    /* between sweep steps of an idle root */
#define AFTP_HUB_REFUSING_MAX 16u       /* authenticated refusals running at once */
#define AFTP_HUB_HANDSHAKING_LOAD 32u   /* unconfirmed sessions that mean load */

typedef struct aftp_hub aftp_hub;

/* Starts the control plane on `loop`, whose thread then runs every
 * callback of o the control thread makes (aftp_serve.h): the listener
 * bound (on_listening), the door, the workers, the server's dir swept.
 * The hub never runs the loop itself: the loop may be an embedder's, with
 * work of its own (aftp_serve_run gives it one of its own). AFTP_OK, or
 * the error with res->message saying why (res->phase AFTP_IO_PHASE_LOCAL).
 * Either way *out is the hub (NULL only when there was no memory for it,
 * and then nothing is left on the loop), and on_done(ctx) runs on the loop
 * once it ended (stop, drain, `once`; after a failed start, when the loop
 * runs next) and closed every handle it opened: on_done may free it
 * (aftp_hub_del), and uv_loop_close() then finds nothing of it.
 * aftp_hub_result gives what aftp_serve_run returns: the start's error,
 * or with `once` that session's result (also in *res), else AFTP_OK. */
int aftp_hub_start(aftp_hub **out, struct uv_loop_s *loop, const aftp_serve_opts *o,
                   aftp_io_result *res, void (*on_done)(void *ctx), void *ctx);
/* Loop thread: the stop and drain flags (hooks.interrupt, drain) are
 * looked at on the loop's next turn instead of at the next tick; nothing
 * runs inside the call (a caller may be one of the hub's own callbacks). */
void aftp_hub_look_now(aftp_hub *h);
int aftp_hub_result(const aftp_hub *h);
void aftp_hub_del(aftp_hub *h);

#endif /* AFTP_HUB_H */
