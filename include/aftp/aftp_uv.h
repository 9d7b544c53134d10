/*
 * aftp on libuv: a client send and a server run on the embedder's uv loop,
 * every callback delivered on the loop's thread.
 *
 *   #include <uv.h>
 *   #include <aftp/aftp_uv.h>
 *
 *   aftp_client *c;                       // set up as for the blocking tier
 *   aftp_client_new(&c);
 *   aftp_client_set_identity_file(c, "/etc/mft/id_x25519");
 *   aftp_client_set_known_hosts_file(c, "/etc/mft/known_hosts");
 *   aftp_uv_send_cbs cbs = {.size = sizeof cbs, .progress = on_progress,
 *                           .file = on_file, .done = on_done, .user = app};
 *   const char *files[] = {"/data/a.bin"};
 *   aftp_uv_send *req;
 *   aftp_uv_client_send(uv_default_loop(), c, "partner.example:7400", files, 1, &cbs, &req);
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // on_done(app, status, errmsg) comes here
 *   aftp_client_del(c);
 *
 * How it runs: libuv's timers count milliseconds, far too coarse to pace
 * datagrams a few microseconds apart, so datapaths run on threads of
 * their own. A send is the blocking tier's aftp_client_send() on a thread.
 * A server's control plane runs on the embedder's loop itself: its
 * listening socket, the front door and handshakes, the admission, the
 * table of sessions and its timers are handles on that loop (as the
 * blocking aftp_server_run() has them on a loop of its own), and its
 * sessions' datapaths run on its worker threads (aftp_server_set_workers).
 * The admission callback and the server's log lines of the control plane
 * are called on the loop thread as they happen; what a datapath thread
 * has to say (a send's progress, file events and notices; a server's
 * receipts, entries, progress, and a session's own log lines) is copied
 * and handed to the loop through a uv_async_t, and the loop thread calls
 * the callbacks, in the order things happened. No callback of the tier
 * waits for another thread, and none of the loop's other work waits for
 * a transfer: the loop only must not be kept busy for long by the
 * embedder (a server's handshakes wait for it; clients repeat theirs).
 * The control plane's own disk work runs on the loop thread too: the
 * sweep of old resume state beneath the server's dir when the run starts
 * (a readdir of its resume directory), and beneath a session's root when
 * the session begins and ends.
 * A progress report the loop has not taken yet is replaced by a newer
 * one of the same session and file (aftp_progress.session tells a
 * server's sessions apart); every other event is delivered (a thread whose
 * copy finds no memory waits for some), and the done callback always
 * comes.
 *
 * Threads: every function here, and every callback, is on the loop's
 * thread. The aftp_client or aftp_server handle belongs to the uv tier
 * from the call that starts it until its done (stopped) callback: call
 * none of its functions meanwhile, except aftp_server_port(),
 * aftp_server_drain() and aftp_server_reload() (any thread, as for a
 * blocking run), and aftp_client_errmsg()/aftp_server_errmsg() only in
 * the done callback. Callback arguments are valid only during the
 * callback.
 *
 * Handles: each send holds a uv_async_t and a uv_timer_t on the loop; a
 * server a uv_async_t of the tier's and its control plane's (a uv_poll_t
 * on the listening socket, a uv_timer_t, a uv_async_t). They stay until
 * the done (stopped) callback, which comes as the last of them closes:
 * the loop does not run out of work before then, and
 * uv_loop_close() succeeds once every done callback has been called. Do
 * not close the tier's handles yourself (a uv_walk() that closes every
 * handle must skip them, or come only after the done callbacks). The tier
 * frees its state itself, after the done callback returns, never while
 * its threads run.
 *
 * <aftp/aftp.h> does not include this header (a program without a uv loop
 * has no use for it): include it next to <uv.h>. It does not need <uv.h>
 * itself: the loop is the forward-declared struct uv_loop_s (libuv's
 * uv_loop_t). libaftp links libuv; the embedder, calling uv_* itself,
 * links it too (pkg-config --cflags --libs aftp libuv).
 */
#ifndef AFTP_UV_H
#define AFTP_UV_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_error.h"
#include "aftp/aftp_export.h"
#include "aftp/aftp_server.h"

#ifdef __cplusplus
extern "C" {
#endif

struct uv_loop_s; /* libuv's uv_loop_t */

/* The end of a send or of a server run, on the loop thread: status is
 * what aftp_client_send() or aftp_server_run() returned, errmsg their
 * handle's message ("" on success). The handle given to the start call is
 * the caller's again from here on. */
typedef void (*aftp_uv_done_cb)(void *user, int status, const char *errmsg);

/* ---- client ---- */

typedef struct aftp_uv_send aftp_uv_send; /* one send in progress */

/* The callbacks of a send, as the blocking tier's (aftp/aftp_client.h) but
 * on the loop thread. The caller sets `size` to sizeof(aftp_uv_send_cbs):
 * fields are only ever appended, and a library newer than the caller reads
 * only the fields within size. */
typedef struct aftp_uv_send_cbs {
    size_t size;
    aftp_progress_cb progress; /* NULL: none */
    aftp_file_cb file;         /* NULL: none */
    aftp_notice_cb notice;     /* NULL: none */
    aftp_uv_done_cb done;      /* required */
    void *user;                /* the first argument of each */
} aftp_uv_send_cbs;

/* Starts sending the files to host_port with the settings of c, as
 * aftp_client_send() does, and returns at once; cbs->done comes later on
 * the loop thread, exactly once, with the send's result
 * (AFTP_ERR_CANCELLED after aftp_uv_send_cancel()). host_port and the
 * paths are copied; cbs is read now. The progress, file and notice
 * callbacks set on c are the tier's during the send and none (NULL) after
 * it: give them in cbs. *out (when out is not NULL) is the send, for
 * aftp_uv_send_cancel(), valid until cbs->done returns (the tier frees
 * it then).
 * Returns AFTP_OK, or without starting anything: AFTP_ERR_INVALID_ARGUMENT
 * (loop, c, host_port, files, cbs or cbs->done NULL, count 0, cbs->size
 * too small), AFTP_ERR_NO_MEMORY, AFTP_ERR_INTERNAL (libuv refused a
 * handle or a thread: what was opened closes when the loop runs next, and
 * no done callback comes). Errors of the send itself (a bad address, a missing
 * key, the network ...) come to cbs->done. */
AFTP_EXTERN int aftp_uv_client_send(struct uv_loop_s *loop, aftp_client *c,
                                    const char *host_port, const char *const *files,
                                    size_t count, const aftp_uv_send_cbs *cbs,
                                    aftp_uv_send **out);
/* Cancels the send (the server is told and keeps nothing of the file
 * under way): its done callback comes within about a second with
 * AFTP_ERR_CANCELLED. Also when the datapath has not begun yet. On the
 * loop thread, before the send's done callback; NULL-safe; a second call
 * changes nothing. */
AFTP_EXTERN void aftp_uv_send_cancel(aftp_uv_send *req);

/* ---- server ---- */

typedef struct aftp_uv_server aftp_uv_server; /* one server run */

/* No longer used (aftp_uv_server_cbs.admit_wait_ms): kept so that code
 * naming it still builds. */
#define AFTP_UV_ADMIT_WAIT_MS UINT64_C(5000)

/* The callbacks of a server run, as the blocking tier's
 * (aftp/aftp_server.h) but on the loop thread. `size` as in
 * aftp_uv_send_cbs. */
typedef struct aftp_uv_server_cbs {
    size_t size;
    /* NULL: the authorized keys decide alone. Otherwise called for each
     * handshake, on the loop thread as the handshake runs there (the
     * client waits for it: keep it short); `peer` and `decision` are valid
     * during the call (aftp_admission_set_root() on decision). */
    aftp_admit_cb admit;
    aftp_receipt_cb receipt;   /* NULL: none */
    aftp_progress_cb progress; /* NULL: none */
    aftp_log_cb log;           /* NULL: none */
    aftp_uv_done_cb stopped;   /* required: the run ended */
    void *user;                /* the first argument of each */
    /* No longer used: the admission is asked on the loop thread itself,
     * so no thread waits for the loop to take it (a busy loop delays the
     * handshake instead; the client repeats its HELLO). Kept so that the
     * struct's layout, and code that sets it, stay as they were. */
    uint64_t admit_wait_ms;
    aftp_receipt_cb entry;     /* NULL: none; as aftp_server_set_entry_cb() */
} aftp_uv_server_cbs;

/* Starts serving on loop with the settings of s, as aftp_server_run()
 * does, and returns at once (no callback is called from within it);
 * cbs->stopped comes later on the loop thread, exactly once, after the
 * run closed all its handles: after aftp_uv_server_stop() (status
 * AFTP_OK), after aftp_server_drain() once the sessions running then have
 * ended (AFTP_OK), at the end of the one session of a server set once (its
 * result), or when the run could not start (no listen address, a port
 * taken ...: the error and its message). Every receipt the run made has
 * been delivered by then. The log callback's AFTP_LOG_LISTENING line says
 * the server listens (then aftp_server_port(s) gives its port). The
 * admission, receipt, entry, progress and log callbacks set on s are the
 * tier's during the run and none (NULL) after it: give them in cbs. *out
 * (when out is not NULL) is the run, for aftp_uv_server_stop(), valid
 * until cbs->stopped returns.
 * Returns AFTP_OK, or without starting anything: AFTP_ERR_INVALID_ARGUMENT
 * (loop, s, cbs or cbs->stopped NULL, cbs->size too small),
 * AFTP_ERR_NO_MEMORY, AFTP_ERR_INTERNAL (libuv refused a handle: as for
 * aftp_uv_client_send()). */
AFTP_EXTERN int aftp_uv_server_start(struct uv_loop_s *loop, aftp_server *s,
                                     const aftp_uv_server_cbs *cbs, aftp_uv_server **out);
/* Ends the run: every session in progress is cancelled (its client
 * told); the stopped callback follows (within about 100 ms when idle; a
 * session whose client does not answer its CLOSE is ended without it 50 ms
 * later). For a graceful end, aftp_server_drain(s) instead. On the loop
 * thread, before the stopped callback (also from within the tier's
 * callbacks); NULL-safe; a second call changes nothing. */
AFTP_EXTERN void aftp_uv_server_stop(aftp_uv_server *u);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_UV_H */
