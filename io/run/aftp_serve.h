/*
 * Server side: listens on a UDP port and receives pushed files into a
 * destination directory, many sessions at once.
 *
 * The control plane (aftp_hub.h) runs on a libuv loop: its own, on the
 * thread that calls aftp_serve_run, or a caller's (aftp_hub_start, as the
 * library's libuv tier runs a server on its embedder's loop): the listener, the front door (door/aftp_door.h),
 * the handshakes (a receiver engine per HELLO, created and fed on that
 * thread, which runs the admission), the table of sessions, the limits,
 * the sweeps of resume state, the stop and the drain. A session whose
 * HELLO the engine took gets its own socket, bound to the listening port
 * and connected to its client before its HELLO_ACK leaves (so none of its
 * later datagrams land on the listener), and goes to the least loaded of
 * the worker threads (aftp_worker.h), which run its datapath until the
 * engine closes. A HELLO that does not authenticate starts nothing (the
 * operator learns why: on_hello_dropped); one that asks for the server's
 * key (KEY_REQUEST) is answered with SERVER_KEY and starts nothing either.
 * The listener's port is the server's alone (aftp_udp.h,
 * AFTP_UDP_PORT_SERVE).
 *
 * Threads: the callbacks below run on the control thread (on_listening,
 * admit, on_hello_dropped, on_swept, on_session_end, on_control_tick,
 * on_draining, session_open/close, hooks.on_warning) or on the worker
 * thread that runs the session (on_session_event, on_entry, hooks.on_tick,
 * hooks.on_event), and never two at once: one lock of the run is held
 * around each, so a callback may use the application's state without a
 * lock of its own, and must not block for long (a worker's other sessions
 * wait meanwhile). A callback must not wait for another thread of the run:
 * a worker's callback in particular must not wait for the loop's thread,
 * which may be waiting for the lock that callback holds (the library's
 * libuv tier queues what a worker says and wakes the loop instead).
 */
#ifndef AFTP_SERVE_H
#define AFTP_SERVE_H

#include <sys/socket.h>

#include "aftp_push.h"

struct aftp_admit;

/* Why a HELLO started nothing. The wire says nothing (spec section
 * 14.2.5: silence); the server's operator is told. */
enum aftp_serve_drop {
    AFTP_SERVE_DROP_UNOPENED = 1, /* message 1 did not open: the client pinned another
                                   * server key, or the datagram is no client's */
    AFTP_SERVE_DROP_PSK,          /* the client's key opened, the rest did not: the
                                   * pre-shared keys differ */
    AFTP_SERVE_DROP_TIMESTAMP     /* the admission policy refused its timestamp (a
                                   * replay, a clock far off) */
};
/* TEST-ONLY: the variable that, in a build with the test hooks (CMake
 * option AFTP_TEST_HOOKS, never a release), makes the door answer every
 * HELLO without a valid cookie with a RETRY. */
#define AFTP_SERVE_RETRY_ENV "AFTP_TEST_RETRY"
/* Entries of a resume directory one sweep step looks at: a readdir and
 * up to three fstatat each, about 1 ms in all. */
#define AFTP_SERVE_SWEEP_BUDGET 256u
/* Sessions at once by default, and the bounds of the setting. */
#define AFTP_SERVE_MAX_SESSIONS_DEFAULT 256u
#define AFTP_SERVE_MAX_SESSIONS_MAX 65536u
#define AFTP_SERVE_DRAIN_TIMEOUT_DEFAULT_NS UINT64_C(30000000000)

typedef struct aftp_serve_opts {
    const struct sockaddr *listen;
    socklen_t listen_len;
    int dirfd;             /* destination directory (borrowed) */
    int faux;              /* no directory: receive into faux:// (aftp_faux.h) */
    int overwrite;         /* replace existing files */
    int once;              /* return after the first session (one session at a time) */
    /* Sessions served at once (0: AFTP_SERVE_MAX_SESSIONS_DEFAULT). A
     * client beyond it completes its handshake and is then told, in an
     * authenticated CLOSE(LIMIT), "the server is serving its maximum of N
     * sessions, try again later" (spec 14.2.5). */
    unsigned max_sessions;
    /* The server's total rate (UDP payload in and out, bits/s) shared
     * max-min fairly between its sessions (aftp_share.h, spec 12.3.1);
     * 0: none. Every push client is then capped (a client that cannot
     * honour a cap is refused) and its share follows by RATE_UPDATE. */
    uint64_t total_rate_bps;
    unsigned workers;      /* datapath threads; 0: one per online CPU */
    /* optional: non-zero: drain (admit no new session, let running ones
     * end, then return AFTP_OK); set from any thread or a signal handler */
    atomic_int *drain;
    /* a drain's deadline: sessions still running then are cancelled, their
     * clients told (0: AFTP_SERVE_DRAIN_TIMEOUT_DEFAULT_NS) */
    uint64_t drain_timeout_ns;
    /* 0: one-file mode only. Else (with a directory, not faux) the largest
     * pipelined entry window accepted (spec 9.14): each session's files,
     * directories and metadata go through aftp_treestore beneath its root. */
    uint32_t pipeline_window;
    /* Pipelined storage: links recreated or refused, the mode mask
     * (aftp_place.h). NULL: aftp_place_defaults (links refused, 0777). */
    const aftp_place_options *place;
    /* Pipelined storage: resume state untouched for this long is removed
     * (0: AFTP_JOURNAL_DEFAULT_MAX_AGE_S). The server's dir is swept in
     * full when the run starts, then a step of AFTP_SERVE_SWEEP_BUDGET
     * entries each time an idle server looks at its stop flag; a root the
     * admission chose gets one such step when its session opens it (before
     * any entry) and the rest of its pass when that session ends. Never
     * while files are received: a file that waits in the entry window may
     * go untouched longer than the age. */
    uint64_t partial_max_age_s;
    uint64_t idle_timeout_ns; /* 0: the engine's default */
    uint16_t max_datagram;    /* largest datagram to accept; 0: AFTP_IO_DATAGRAM */
    aftp_security_settings security; /* identity, admission policy (borrowed), cipher */
    /* hooks.interrupt: the stop (every session cancelled, the run returns
     * within about 100 ms); hooks.on_tick: a session's progress */
    aftp_io_hooks hooks;
    /* optional: the `app` of one session's callbacks (admit,
     * on_session_event, on_entry, on_swept of its root, on_session_end,
     * hooks.on_tick), made when a HELLO starts a session (NULL: that
     * HELLO is dropped); session_close(hooks.app, it) releases it after
     * the session's last callback. Without session_open: hooks.app. */
    void *(*session_open)(void *app);
    void (*session_close)(void *app, void *session_app);
    /* optional: on the control thread at least every 100 ms and before
     * each HELLO is handled, so what it changes (the admission's keys:
     * aftp_server_reload) applies to that HELLO */
    void (*on_control_tick)(void *app, uint64_t now_ns);
    /* optional: the drain began, with `running` sessions to wait for up
     * to `timeout_ns` */
    void (*on_draining)(void *app, unsigned running, uint64_t timeout_ns);
    /* optional: the socket is bound (tells the port the kernel chose) */
    void (*on_listening)(void *app, const struct sockaddr *local);
    /* optional: admits a session, once per handshake: `from` its client,
     * client_key the static key it proved (the policy of security.peers
     * admitted the key and its timestamp first), NULL in an unprotected
     * session. AFTP_OK admits it, with *rootfd the directory its files go
     * beneath (the run closes it at the session's end), or -1 for dirfd,
     * and *rate_cap_bps the rate its sender must stay under (0: none,
     * spec section 12.3 RATE_CAP); a negative code refuses it: a
     * protected client is told it is not authorized (CLOSE(UNAUTHORIZED)),
     * an unprotected session is cancelled. */
    int (*admit)(void *app, const struct sockaddr *from, const uint8_t *client_key, int *rootfd,
                 uint64_t *rate_cap_bps);
    /* optional: the session engine's events (hooks.on_event sees them
     * too), with its counters at that moment (the cipher in use, ...) */
    void (*on_session_event)(void *app, const aftp_event *ev, const aftp_stats *st);
    /* optional: pipelined storage decided an entry (info, its verdict):
     * what the engine's events do not tell, the entry's kind and link
     * target, is here */
    void (*on_entry)(void *app, const aftp_entry_info *info, const aftp_entry_verdict *v,
                     const aftp_stats *st);
    /* optional: a sweep removed `removed` resume states (> 0) beneath the
     * server's dir (session_root 0, `app` hooks.app) or a session's root
     * (1, `app` that session's) */
    void (*on_swept)(void *app, int removed, int session_root);
    /* optional: a session ended with `res` */
    void (*on_session_end)(void *app, const aftp_io_result *res, const struct sockaddr *peer);
    /* optional: a HELLO from `from` started nothing, `why` (enum
     * aftp_serve_drop); client_key: the client's static key (PSK,
     * TIMESTAMP), else NULL; `unreported`: drops since the last call that
     * the rate limit (AFTP_DOOR_DROP_REPORTS per period) kept back. For
     * TIMESTAMP the policy itself knows why (aftp_admit_explain). */
    void (*on_hello_dropped)(void *app, const struct sockaddr *from, int why,
                             const uint8_t *client_key, uint64_t unreported);
    /* optional: after `admit` admitted the client, may it use `role`
     * (enum aftp_role)? AFTP_OK, or AFTP_ERR_PERMISSION: it is told
     * CLOSE(PERMISSION) (spec 9.15.1). NULL: both. A HELLO with role PULL
     * is served (with a directory and pipeline_window) by a sender engine
     * whose storage resolves each requested path beneath the client's
     * root (aftp_serve_pull.h, aftp_pullsrc.h); without them the client
     * is told "pull not supported". */
    int (*role_allowed)(void *app, int role);
} aftp_serve_opts;

/* Serves sessions until the local stop (hooks.interrupt set, e.g. by
 * SIGINT), the end of a drain (*drain set), or with `once` until the end of
 * the first session that was not refused at the handshake. A session's
 * client that cancels (CLOSE(CANCELLED)), vanishes or fails ends that
 * session only: its result goes to on_session_end and the others go on.
 * Returns: with `once`, that session's result (also in *res;
 * AFTP_ERR_CANCELLED when stopped before it ended); without `once`,
 * AFTP_OK after the local stop or the drain (sessions in progress are
 * cancelled and reported to on_session_end). When the server cannot start (the
 * listener), its error, with res->phase AFTP_IO_PHASE_LOCAL and the
 * reason in res->message. */
int aftp_serve_run(const aftp_serve_opts *o, aftp_io_result *res);

/* Who a client is, for the operator: "from ADDR key aftp-x25519 <base64>
 * "comment"" (key NULL: "from ADDR"; comment NULL or "": none; escaped). */
void aftp_serve_describe_client(const struct sockaddr *from, const uint8_t *key,
                                const char *comment, char *out, size_t cap);
/* The operator's line for a session that failed (res): "refused client
 * CLIENT: REFUSAL" when the handshake refused its key, or its push
 * (AFTP_ERR_PERMISSION) (refusal: why;
 * NULL when it was not refused), "sender CLIENT went silent for S s
 * (IDLE_SETTING)", else "transfer CLIENT failed: why". */
void aftp_serve_explain_failure(const aftp_io_result *res, const char *client,
                                const char *refusal, double idle_s, const char *idle_setting,
                                char *out, size_t cap);
/* The operator's line for a dropped HELLO (on_hello_dropped's arguments;
 * client as aftp_serve_describe_client wrote it; psk_advice: what to
 * check when the pre-shared keys differ; admit: the policy, which knows
 * why it refused a timestamp). */
void aftp_serve_explain_drop(const struct sockaddr *from, int why, const char *client,
                             const char *psk_advice, const struct aftp_admit *admit,
                             uint64_t unreported, char *out, size_t cap);

#endif /* AFTP_SERVE_H */
