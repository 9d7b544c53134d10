/*
 * Server side: listens on a UDP port and receives pushed files into a
 * destination directory, one session at a time (receiver engine +
 * destination storage + datapath loop). Each session gets its own socket,
 * bound to the listening port and connected to its client. Other clients'
 * HELLOs meanwhile get a RETRY (io/aftp_gate.h) and are served when they
 * come again after the session; a HELLO that does not authenticate
 * starts nothing, and one that asks for the server's key (KEY_REQUEST) is
 * answered with SERVER_KEY, busy or not, and starts nothing either.
 */
#ifndef AFTP_SERVE_H
#define AFTP_SERVE_H

#include <sys/socket.h>

#include "aftp_push.h"

typedef struct aftp_serve_opts {
    const struct sockaddr *listen;
    socklen_t listen_len;
    int dirfd;             /* destination directory (borrowed) */
    int faux;              /* no directory: receive into faux:// (aftp_faux.h) */
    int overwrite;         /* replace existing files */
    int once;              /* return after the first session */
    uint64_t idle_timeout_ns; /* 0: the engine's default */
    uint16_t max_datagram;    /* largest datagram to accept; 0: AFTP_IO_DATAGRAM */
    aftp_security_settings security; /* identity, admission policy (borrowed), cipher */
    aftp_io_hooks hooks;
    /* optional: the socket is bound (tells the port the kernel chose) */
    void (*on_listening)(void *app, const struct sockaddr *local);
    /* optional: a session ended with `res` */
    void (*on_session_end)(void *app, const aftp_io_result *res, const struct sockaddr *peer);
} aftp_serve_opts;

/* Serves sessions until the local stop (hooks.interrupt set, e.g. by
 * SIGINT/SIGTERM), or with `once` until the end of the first session that
 * was not refused at the handshake. A session's client that cancels
 * (CLOSE(CANCELLED)), vanishes or fails ends that session only: its result
 * goes to on_session_end and the next client is served.
 * Returns: with `once`, that session's result (also in *res;
 * AFTP_ERR_CANCELLED when stopped before it ended); without `once`,
 * AFTP_OK after the local stop (a session in progress is cancelled and
 * reported to on_session_end). When the server cannot start (the
 * listener), its error, with res->phase AFTP_IO_PHASE_LOCAL and the
 * reason in res->message. */
int aftp_serve_run(const aftp_serve_opts *o, aftp_io_result *res);

#endif /* AFTP_SERVE_H */
