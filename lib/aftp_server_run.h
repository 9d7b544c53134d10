/*
 * A server's run on a loop it does not own (lib-private: the libuv tier,
 * lib/aftp_uv.c, starts one; aftp_server_run() is the blocking form).
 * Both forms build the run the same way (the serve options, the security,
 * the dir opened) and end it the same way (the handle's message, the
 * stop, drain and port settled for its next run): lib/aftp_server.c.
 *
 * Everything here is on the loop's thread. The serve driver's control
 * plane (io/run/aftp_hub.h) runs on that loop: the listener, the door,
 * the handshakes, the admission, the timers; the sessions' datapaths on
 * worker threads. The handle's callbacks are called where the run makes
 * them: admission and most log lines on the loop thread, receipts, entries,
 * progress and some log lines (a session started, a rate cap) on workers.
 *
 * It does not include <uv.h> (tests/lib/uv_confined.sh): the loop is the
 * forward-declared struct uv_loop_s.
 */
#ifndef AFTP_SERVER_RUN_H
#define AFTP_SERVER_RUN_H

#include "aftp/aftp_server.h"

struct uv_loop_s;

typedef struct aftp_server_loop_run aftp_server_loop_run;

/* Starts s's run on loop with s's settings and callbacks, and returns.
 * AFTP_OK: *out is the run, and on_done(ctx) comes on the loop once it
 * ended (stopped, drained, `once`, or a listener that could not open) and
 * closed every handle it opened; aftp_server_loop_finish() then gives its
 * result. Else the error (aftp_server_errmsg(s) says why: no listen
 * address, a dir that cannot be opened, no keys ...), *out NULL, and
 * nothing is left on the loop. s is the run's until the finish. */
int aftp_server_loop_start(aftp_server *s, struct uv_loop_s *loop, void (*on_done)(void *ctx),
                           void *ctx, aftp_server_loop_run **out);
/* The run stops as aftp_server_stop() asks, looked at on the loop's next
 * turn (not inside this call: a caller may be one of the run's callbacks).
 * Before on_done. */
void aftp_server_loop_stop(aftp_server_loop_run *r);
/* On or after on_done: frees the run and returns what aftp_server_run()
 * would have (its message in aftp_server_errmsg); s is the caller's
 * again. */
int aftp_server_loop_finish(aftp_server_loop_run *r);

#endif /* AFTP_SERVER_RUN_H */
