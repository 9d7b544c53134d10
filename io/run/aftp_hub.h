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
 * One client, one session: while a session of a client key runs (of a
 * client address, unprotected), a new HELLO of it is dropped in silence
 * before its timestamp is taken, and its resent copy is served once that
 * session ended: the resume state of its files is one session's (a sender
 * restarted after a crash would race its own lingering session). A server
 * that keeps nothing (faux) has no such state and does not wait.
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

/* Starts the control plane on `loop` (run by the calling thread): the
 * listener bound (on_listening), the door, the workers. AFTP_OK, or the
 * error with res->message saying why (res->phase AFTP_IO_PHASE_LOCAL).
 * on_done(ctx) runs on the loop once the hub ended (stop, drain, `once`)
 * and closed its handles; aftp_hub_result then gives what aftp_serve_run
 * returns (with `once`, that session's result is in *res), and
 * aftp_hub_del frees it. */
int aftp_hub_start(aftp_hub **out, struct uv_loop_s *loop, const aftp_serve_opts *o,
                   aftp_io_result *res, void (*on_done)(void *ctx), void *ctx);
int aftp_hub_result(const aftp_hub *h);
void aftp_hub_del(aftp_hub *h);

#endif /* AFTP_HUB_H */
