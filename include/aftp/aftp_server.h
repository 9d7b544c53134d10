/*
 * aftp server, blocking tier: receives pushed files, many sessions at once
 * on one UDP port (aftp_server_set_max_sessions), their datapaths spread
 * over worker threads (aftp_server_set_workers).
 *
 *   aftp_server *s = NULL;
 *   aftp_server_new(&s);
 *   aftp_server_set_listen(s, "0.0.0.0:7400");
 *   aftp_server_set_dir(s, "/srv/incoming");
 *   aftp_server_set_identity_file(s, "/etc/mft/server_x25519");
 *   aftp_server_set_admit_cb(s, admit, app);        // per client key: refuse, or its root
 *   aftp_server_set_receipt_cb(s, on_receipt, app); // one per committed file: the audit trail
 *   int rc = aftp_server_run(s);                    // until aftp_server_stop()
 *   aftp_server_del(s);
 *
 * Threads: one thread at a time runs aftp_server_run(); it is the server's
 * control thread (its libuv loop: the listener, the handshakes, the
 * timers), and the sessions' datapaths run on worker threads the run
 * starts. aftp_server_stop(), aftp_server_drain(), aftp_server_reload() and
 * aftp_server_port() may be called from any thread, and aftp_server_stop(),
 * aftp_server_drain() and aftp_server_reload() from a signal handler. The setters must not be
 * called while a run is in progress. Callbacks run one at a time (the run
 * holds a lock around each, so they need none of their own): the
 * admission and log callbacks on the control thread, a session's receipt,
 * entry and progress callbacks on the worker thread that runs it (a slow
 * callback holds up that worker's other sessions, never loses a receipt).
 * They must not call the handle's functions other than aftp_server_stop(),
 * aftp_server_drain(), aftp_server_reload() and aftp_server_port().
 * A server the libuv tier runs (aftp/aftp_uv.h: aftp_uv_server_start) has
 * its control thread on the embedder's loop, and delivers every callback
 * there; the stop, drain and reload work on it as on a blocking run.
 *
 * Ownership: strings, keys and key files are copied or read when set;
 * the handle owns its copies until aftp_server_del(). Callback arguments
 * are valid only during the callback.
 *
 * Errors: functions return AFTP_OK or a negative aftp_error
 * (aftp/aftp_error.h); aftp_server_errmsg() then says why, with the
 * figures and names involved. A failed setter leaves the setting as it was.
 *
 * The library never prints, never exits and installs no signal handler:
 * what an operator's log wants reaches the log callback.
 */
#ifndef AFTP_SERVER_H
#define AFTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aftp/aftp_client.h"
#include "aftp/aftp_engine.h"
#include "aftp/aftp_error.h"
#include "aftp/aftp_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aftp_server aftp_server;

/* A server with the defaults: no listen address yet (required), files into
 * the current directory, existing files kept, cipher AFTP_CIPHER_AUTO,
 * idle timeout 30 s, datagrams up to what a 9216-byte MTU carries (the
 * client's --mtu decides: the smaller of the two is used), trees in
 * pipelined mode with a window of 8192 entries, links recreated, mode
 * mask 0777, resume state removed after 7 days unclaimed.
 * *out is set to the new handle (NULL on failure). AFTP_ERR_NO_MEMORY, or
 * AFTP_ERR_INTERNAL when the crypto library cannot start. */
AFTP_EXTERN int aftp_server_new(aftp_server **out);
/* Frees the handle and wipes its keys. NULL-safe. Not while a run is in
 * progress. */
AFTP_EXTERN void aftp_server_del(aftp_server *s);

/* Where to listen: "[ADDR:]PORT" or "[V6ADDR]:PORT"; ADDR may be a host
 * name (resolved now); without ADDR, every IPv4 address. Port 0: the
 * kernel chooses (aftp_server_port, the listening log line).
 * AFTP_ERR_INVALID_ARGUMENT for text that is none of these. */
AFTP_EXTERN int aftp_server_set_listen(aftp_server *s, const char *addr_port);
/* Where files land when no admission callback chose another root (path
 * copied). It must exist and accept new files: checked now (an error
 * names the path, the reason and the terms' dir_setting, so set the terms
 * first) and again when aftp_server_run starts; an error (AFTP_ERR_IO,
 * AFTP_ERR_PERMISSION ...) for one that cannot take files.
 * Exactly "faux://" (AFTP_SERVER_FAUX_DIR): a
 * destination that keeps nothing, to measure the network and the
 * protocol without a disk: every file's payload must be zero bytes (any
 * other byte fails that file with AFTP_ERR_IO) and its digest is
 * verified as for a real file; receipts still come (root "faux://"); an
 * admission callback still decides who is served, and a root it chooses
 * must still open, but nothing lands there. */
#define AFTP_SERVER_FAUX_DIR "faux://"

AFTP_EXTERN int aftp_server_set_dir(aftp_server *s, const char *path);
/* Non-zero: a client may replace existing files (it must also ask to). */
AFTP_EXTERN int aftp_server_set_overwrite(aftp_server *s, int allow);
/* Non-zero: aftp_server_run serves one session and returns its result
 * instead of serving until aftp_server_stop(). The session counted is the
 * first one past the handshake: a handshake this server refused (a key
 * not admitted) or dropped in silence is logged and the run goes on
 * waiting. The run then returns AFTP_OK when the session ended with every
 * file of it committed, else that session's error (its client's, a
 * file's, AFTP_ERR_IDLE_TIMEOUT for a client gone silent,
 * AFTP_ERR_CANCELLED for aftp_server_stop() before it ended), with
 * aftp_server_errmsg() saying why. Default 0. */
AFTP_EXTERN int aftp_server_set_once(aftp_server *s, int once);
/* The server's X25519 private key, read now from a key file
 * ("aftp-private-key <base64>", mode 0600 or stricter, owned by the user):
 * AFTP_ERR_NOT_FOUND, AFTP_ERR_PERMISSION, AFTP_ERR_BAD_KEY, AFTP_ERR_IO. */
AFTP_EXTERN int aftp_server_set_identity_file(aftp_server *s, const char *path);
/* The same from AFTP_KEY_LEN bytes (copied into guarded memory). */
AFTP_EXTERN int aftp_server_set_identity(aftp_server *s, const uint8_t secret[AFTP_KEY_LEN]);
/* The clients admitted by key (spec Appendix B.4: "[options]
 * aftp-x25519 <base64> [comment]" per line), read now; a file without a
 * key admits nobody: AFTP_ERR_BAD_KEY; the comment of a key's line
 * reaches aftp_peer.comment. A line's options (root=, from=, rate=,
 * read-only, write-only) pre-fill its key's admission decision (below);
 * an unknown or malformed option, or a key listed twice with different
 * options, refuses the whole file (AFTP_ERR_BAD_KEY, errmsg names
 * FILE:LINE). Without an admission callback, only these clients
 * are admitted, as their options say; with one, a key must be listed here
 * too (when a file is set) and then the callback decides. Errors as
 * aftp_server_set_identity_file, and AFTP_ERR_LIMIT for a list past its
 * bounds. */
AFTP_EXTERN int aftp_server_set_authorized_keys_file(aftp_server *s, const char *path);
/* A pre-shared key every client must also hold (a private key file),
 * read now. */
AFTP_EXTERN int aftp_server_set_psk_file(aftp_server *s, const char *path);
/* enum aftp_cipher_choice. AFTP_CIPHER_NONE serves unprotected sessions
 * only (no keys, no admission by key): clients must choose it too. */
AFTP_EXTERN int aftp_server_set_cipher(aftp_server *s, int cipher);
/* The largest path MTU to accept datagrams for, 1248 to 9216 bytes. */
AFTP_EXTERN int aftp_server_set_mtu(aftp_server *s, unsigned mtu);
/* Silence from a client that ends its session; 0: the default (30 s). */
AFTP_EXTERN int aftp_server_set_idle_timeout_ms(aftp_server *s, uint64_t ms);

/* ---- concurrency ---- */

/* Sessions served at once, 1 to AFTP_SERVER_MAX_SESSIONS_MAX, default
 * AFTP_SERVER_MAX_SESSIONS_DEFAULT. A client key may run any number of
 * pushes and pulls at once; only a destination file has one writer at a
 * time: a push's file that another session is writing waits (its verdict
 * comes once that file ended there, resuming from what it made durable),
 * while the rest of both pushes goes on (spec 9.14.4). A client beyond it completes its
 * handshake and is then refused with CLOSE(LIMIT) (spec 14.2.5): its
 * error is AFTP_ERR_LIMIT, its message "the server is serving its maximum
 * of N sessions, try again later". With aftp_server_set_once: one.
 * AFTP_ERR_INVALID_ARGUMENT outside the bounds. */
#define AFTP_SERVER_MAX_SESSIONS_DEFAULT 256u
#define AFTP_SERVER_MAX_SESSIONS_MAX 65536u
AFTP_EXTERN int aftp_server_set_max_sessions(aftp_server *s, unsigned n);
/* Worker threads that run the sessions' datapaths (a new session goes to
 * the one with the fewest), 1 to AFTP_SERVER_WORKERS_MAX; 0 (the default):
 * one per online CPU. AFTP_ERR_INVALID_ARGUMENT beyond. */
#define AFTP_SERVER_WORKERS_MAX 1024u
AFTP_EXTERN int aftp_server_set_workers(aftp_server *s, unsigned n);
/* The server's total rate: the UDP payload its sessions send and receive
 * together, in bits per second, shared max-min fairly between the running
 * sessions, push and pull alike (spec 12.3.1): each gets an equal part,
 * except that one capped lower (its key's rate=, the admission's
 * aftp_admission_set_rate_cap) or measured using clearly less gets what it
 * can use, and the rest goes to the others; the shares follow sessions
 * starting and ending and, every second, their measured rates. A push
 * client learns its share in its HELLO_ACK and each change in a
 * RATE_UPDATE (spec 6.18); a client that cannot honour a cap is refused
 * with CLOSE(LIMIT). 0 (the default): no total cap. Before
 * aftp_server_run; the run's log says the cap (AFTP_LOG_RATE_CAP) once it
 * listens. AFTP_OK. */
AFTP_EXTERN int aftp_server_set_rate_cap(aftp_server *s, uint64_t bits_per_s);
/* How long a drain (aftp_server_drain) waits for running sessions before
 * it cancels them (their clients told): default 30000 ms, 0: at once, at
 * most AFTP_SERVER_DRAIN_TIMEOUT_MAX_MS (AFTP_ERR_INVALID_ARGUMENT). */
#define AFTP_SERVER_DRAIN_TIMEOUT_DEFAULT_MS UINT64_C(30000)
#define AFTP_SERVER_DRAIN_TIMEOUT_MAX_MS (UINT64_C(24) * 3600 * 1000)
AFTP_EXTERN int aftp_server_set_drain_timeout_ms(aftp_server *s, uint64_t ms);

/* ---- trees (pipelined mode, spec 9.14) ---- */

/* Non-zero (the default): symbolic links a client sends inside a tree are
 * recreated beneath the root, their targets stored literally, never
 * followed (a client sends them only when its user asked for them). 0:
 * each is refused (AFTP_ERR_PATH_REJECTED, the client's entry fails, its
 * session goes on). */
AFTP_EXTERN int aftp_server_set_links(aftp_server *s, int allow);
/* The permission bits kept of the mode a client sends for a file or
 * directory: 0 to 07777, default 0777 (setuid, setgid and sticky only
 * when the mask has them: 07777 keeps them). AFTP_ERR_INVALID_ARGUMENT
 * for a mask with other bits. */
#define AFTP_SERVER_MODE_MASK_DEFAULT 0777u
AFTP_EXTERN int aftp_server_set_mode_mask(aftp_server *s, uint32_t mask);
/* Resume state (a partial file and its journal in ".aftp-partial"
 * beneath each root) that no sender came back for in this many seconds
 * is removed: default 604800 (7 days), 1 to
 * AFTP_SERVER_PARTIAL_MAX_AGE_MAX_S (AFTP_ERR_INVALID_ARGUMENT beyond).
 * When: the server's dir in full when a run starts, then a bounded step
 * (at most 256 entries of the directory, about 1 ms) every 100 ms while
 * no session runs; a root an admission chose, one such step when its
 * session opens it and the rest of the pass when that session ends. No
 * state is removed while a session receives files. Each sweep that
 * removed something is an AFTP_LOG_PARTIAL_SWEPT line. */
#define AFTP_SERVER_PARTIAL_MAX_AGE_DEFAULT_S UINT64_C(604800)
#define AFTP_SERVER_PARTIAL_MAX_AGE_MAX_S (UINT64_C(100) * 366 * 86400)
AFTP_EXTERN int aftp_server_set_partial_max_age_s(aftp_server *s, uint64_t seconds);
/* The largest pipelined entry window a client gets (spec 12.3.2): files,
 * directories and links offered ahead of the data, 1 to 65536, default
 * AFTP_SERVER_PIPELINE_WINDOW; each costs a session its path and a
 * record of memory. 0: no pipelined mode: one file at a time, no trees,
 * no resume state and no sweep (AFTP_ERR_INVALID_ARGUMENT beyond 65536). */
#define AFTP_SERVER_PIPELINE_WINDOW 8192u
#define AFTP_SERVER_PIPELINE_WINDOW_MAX 65536u
AFTP_EXTERN int aftp_server_set_pipeline_window(aftp_server *s, uint32_t window);

/* ---- admission: per client key, refuse or accept into a root ---- */

/* A client, as the admission and receipt callbacks see it. */
typedef struct aftp_peer {
    const struct sockaddr *addr; /* the client's address */
    socklen_t addr_len;
    const uint8_t *key;          /* the static key it proved (AFTP_KEY_LEN bytes);
                                  * NULL in an unprotected session (AFTP_CIPHER_NONE) */
    const char *comment;         /* its authorized-keys line's comment, or "" */
} aftp_peer;

/* The decision being made: opaque, so that later versions can add to it. */
typedef struct aftp_admission aftp_admission;
/* This client's files land beneath `root` (copied): an existing directory
 * that accepts new files, opened when the callback returns; the path
 * rules that apply beneath the server's dir apply beneath it (a client's
 * path cannot leave it). Only during the admission callback.
 * AFTP_ERR_INVALID_ARGUMENT for NULL, "" or a path of 4096 bytes or more. */
AFTP_EXTERN int aftp_admission_set_root(aftp_admission *a, const char *root);
/* This client's sender must never pace faster than bits_per_s (bits of
 * UDP payload per second, whatever its own settings and rate policy);
 * 0: no cap (the default). The cap travels to the client in the
 * HELLO_ACK (spec section 12.3, RATE_CAP), authenticated by the handshake
 * in a protected session (in an unprotected one nothing is). A client
 * that cannot honour a cap (one built before RATE_CAP) is refused: it is
 * told why (CLOSE(LIMIT): its error is AFTP_ERR_LIMIT) and the session
 * failure reaches the log callback. An admitted capped client gets an
 * AFTP_LOG_RATE_CAP line and its receipts carry the cap. Only during the
 * admission callback. AFTP_ERR_INVALID_ARGUMENT for a NULL decision. */
AFTP_EXTERN int aftp_admission_set_rate_cap(aftp_admission *a, uint64_t bits_per_s);

/* What a client may do: AFTP_ACCESS_READ pull, AFTP_ACCESS_WRITE push
 * (both, the default, unless its authorized-keys line says read-only or
 * write-only). A push by a client without AFTP_ACCESS_WRITE is refused at
 * its handshake: it is told "this client key may only pull from this
 * server" (CLOSE(PERMISSION): its error is AFTP_ERR_PERMISSION) and the
 * log callback says why. Only during the admission callback.
 * AFTP_ERR_INVALID_ARGUMENT for a NULL decision, 0 (refuse the client
 * instead) or other bits. */
#define AFTP_ACCESS_READ 1u
#define AFTP_ACCESS_WRITE 2u
AFTP_EXTERN int aftp_admission_set_access(aftp_admission *a, unsigned access);
/* The decision so far: the root (NULL: the server's dir), the rate cap
 * (0: none), the access (AFTP_ACCESS_* bits). NULL-safe (NULL, 0, 0). */
AFTP_EXTERN const char *aftp_admission_root(const aftp_admission *a);
AFTP_EXTERN uint64_t aftp_admission_rate_cap(const aftp_admission *a);
AFTP_EXTERN unsigned aftp_admission_access(const aftp_admission *a);

/* Called once per handshake, on the run's thread, after the client proved
 * its key (and the authorized keys, when set, listed it), before any file.
 * The decision comes pre-filled from the key's authorized-keys options
 * (spec Appendix B.4): root= (a relative one beneath the server's dir;
 * with a faux:// dir, relative to the working directory),
 * rate=, read-only or write-only; the callback sees them through the
 * getters and may change any of them. A from= the client's address is
 * not in refuses it before the callback (it is told it is not
 * authorized; the log callback says "key K is limited to from=...;
 * client came from ADDR").
 * Returns AFTP_OK to admit (into the server's dir unless a root was
 * chosen), or a negative code to refuse:
 * the client is told it is not authorized (its error is
 * AFTP_ERR_UNKNOWN_PEER) and nothing of it lands. A root that cannot be
 * opened refuses the client too (the log callback says why). Without a
 * callback the pre-filled decision applies as it is. */
typedef int (*aftp_admit_cb)(void *user, const aftp_peer *peer, aftp_admission *decision);
/* cb NULL: no callback (the authorized keys decide). */
AFTP_EXTERN int aftp_server_set_admit_cb(aftp_server *s, aftp_admit_cb cb, void *user);

/* ---- receipts: one per file committed under its final name ---- */

typedef struct aftp_receipt {      /* fields are only ever appended */
    const char *path;              /* where it landed, relative to its root, as the client
                                    * named it (any bytes) */
    const char *root;              /* the root it landed beneath (the server's dir or the
                                    * admission's) */
    uint64_t size;                 /* bytes */
    uint8_t digest[AFTP_DIGEST_LEN]; /* XXH3-128 of the content, verified */
    const aftp_peer *client;
    int64_t start_unix_ns;         /* the offer accepted (wall clock) */
    int64_t end_unix_ns;           /* committed and durable (wall clock) */
    int cipher;                    /* enum aftp_cipher_choice in use (AFTP_CIPHER_NONE:
                                    * unprotected) */
    /* The session's figures when the file was committed, as aftp recv's
     * summary line shows them: */
    int64_t connected_unix_ns;     /* its handshake completed (wall clock) */
    uint64_t packets_received;     /* data packets received in the session so far */
    uint64_t duplicate_packets;    /* of those, ones for blocks already held: what the
                                    * sender repeated without need */
    const char *printable_path;    /* path for a log line: bytes that are not printable
                                    * escaped ("\\xHH") */
    uint64_t rate_cap_bps;         /* the rate cap its sender obeyed, bits/s
                                    * (aftp_admission_set_rate_cap; with
                                    * aftp_server_set_rate_cap, the share in force
                                    * at the file's end); 0: none */
    int kind;                      /* enum aftp_entry_kind (aftp/aftp_engine.h): a
                                    * receipt's is AFTP_ENTRY_FILE; the entry callback's
                                    * also DIR and SYMLINK */
    int outcome;                   /* enum aftp_receipt_outcome */
    uint64_t held_bytes;           /* RESUMED: bytes the file already held from an
                                    * earlier session (not sent again); else 0 */
    const char *target;            /* a PLACED link's target, literal; else NULL */
    int pulled;                    /* 1: the client fetched it from this server (a pull,
                                    * aftp get): the server sent it, from beneath `root` */
    double retransmitted;          /* pulled: bytes the server sent again / bytes it sent,
                                    * in the session so far; else 0 */
} aftp_receipt;

/* What became of an entry. A receipt's outcome is SENT or RESUMED; the
 * entry callback's SKIPPED or PLACED. */
enum aftp_receipt_outcome {
    AFTP_OUTCOME_SENT = 1, /* the whole file was sent, verified and committed */
    AFTP_OUTCOME_RESUMED,  /* the file was completed from the blocks it held
                            * (held_bytes), then verified whole and committed */
    AFTP_OUTCOME_SKIPPED,  /* an identical file (size and mtime, or digest as the
                            * client asked) was there and was kept as it is */
    AFTP_OUTCOME_PLACED    /* a directory created (or one already there), a link made */
};
/* Called on the run's thread once the file is verified and durable under
 * its final name (with a faux:// dir: once verified; nothing is kept).
 * cb NULL: no receipts. */
typedef void (*aftp_receipt_cb)(void *user, const aftp_receipt *r);
AFTP_EXTERN int aftp_server_set_receipt_cb(aftp_server *s, aftp_receipt_cb cb, void *user);
/* Entries of a tree that are not received files, one call each, as the
 * server decides them: a file skipped as identical (outcome SKIPPED; its
 * size and mtime as the client sent them), a directory or link placed
 * (PLACED; size 0). Digest all zero, start and end the decision's time.
 * Why a callback of its own rather than more receipts: a receipt is the
 * audit trail of data that arrived and was verified, and callers written
 * before trees count each one as a file received; a skip or a directory
 * is neither. cb NULL: none (the default). */
AFTP_EXTERN int aftp_server_set_entry_cb(aftp_server *s, aftp_receipt_cb cb, void *user);

/* ---- progress: the file being received ---- */

/* About 4 times a second while a file is under way (aftp_progress,
 * aftp/aftp_client.h): name is the path as the client named it, with
 * bytes that are not printable escaped ("\\xHH"),
 * bytes_done the bytes received, goodput and ETA from them; the path's
 * figures (rate_bps, loss, RTTs) are the receiving engine's, mostly 0: the
 * sender controls the rate; `session` says which session reports (two
 * clients may send files of one name at once). On the run's thread. cb
 * NULL: no progress. */
AFTP_EXTERN int aftp_server_set_progress_cb(aftp_server *s, aftp_progress_cb cb, void *user);

/* ---- what an operator's log wants: the library prints nothing ---- */

/* Listening (the address, with the port the kernel chose); a session that
 * failed (its client, its reason: a refused key, a failed file, a client
 * gone silent); a handshake dropped in silence (why: another server key
 * pinned, a pre-shared key that differs, a replay; at most 6 a minute); a
 * warning (socket buffers smaller than asked, a reload that failed); a
 * client served under a rate cap (aftp_admission_set_rate_cap: the client
 * and the cap); the authorized keys reloaded (aftp_server_reload). One line
 * of text each, no newline. Kinds may be added: treat an unknown one as
 * information. */
enum aftp_log_kind {
    AFTP_LOG_LISTENING = 1,
    AFTP_LOG_SESSION_FAILED,
    AFTP_LOG_HELLO_DROPPED,
    AFTP_LOG_WARNING,
    AFTP_LOG_RATE_CAP,      /* a client admitted with a rate cap: its client and the cap;
                             * and once, the server's total cap (aftp_server_set_rate_cap) */
    AFTP_LOG_PARTIAL_SWEPT, /* resume state no sender came back for was removed: how
                             * many, beneath which root, and the age */
    AFTP_LOG_RELOADED,      /* aftp_server_reload read the authorized keys again:
                             * "reloaded N keys from PATH" */
    AFTP_LOG_SESSION_STARTED, /* a client's handshake completed: who, and its root */
    AFTP_LOG_SESSION_ENDED, /* a session that started ended: who, root, files, bytes,
                             * duration, outcome ("ok" or why; a failure also gets
                             * its AFTP_LOG_SESSION_FAILED line) */
    AFTP_LOG_DRAINING       /* aftp_server_drain: the sessions it waits for, how long */
};
typedef void (*aftp_log_cb)(void *user, int kind, const char *line);
/* cb NULL: the lines go nowhere. */
AFTP_EXTERN int aftp_server_set_log_cb(aftp_server *s, aftp_log_cb cb, void *user);
/* The aftp_error of the latest session that failed (what its
 * AFTP_LOG_SESSION_FAILED line explains: read it in that callback, on the
 * run's thread), AFTP_OK before any; NULL-safe. */
AFTP_EXTERN int aftp_server_session_error(const aftp_server *s);

/* A client as the log lines name it, into out (cap bytes, NUL-terminated,
 * cut to fit): "from ADDR:PORT", and for a client with a key
 * " key aftp-x25519 <base64>" and its comment, quoted, with bytes that are
 * not printable escaped ("\\xHH"). AFTP_SERVER_PEER_TEXT_MAX bytes hold
 * any. Any thread; AFTP_ERR_INVALID_ARGUMENT for a NULL argument or cap 0. */
#define AFTP_SERVER_PEER_TEXT_MAX 512u
AFTP_EXTERN int aftp_server_format_peer(const aftp_peer *peer, char *out, size_t cap);

/* How the log lines and aftp_server_errmsg() name, in their advice, what
 * the operator can act on: an MFT product names its own settings, the
 * aftp tool its options. Each field NULL keeps the default (in
 * parentheses). The caller sets `size` to sizeof(aftp_server_terms):
 * fields are only ever appended, and a library newer than the caller
 * reads only the fields within size. */
typedef struct aftp_server_terms {
    size_t size;
    const char *dir_setting;  /* what names the server's dir, in "cannot use destination
                               * directory D: ... (SETTING must name an existing
                               * directory)" ("the server's directory") */
    const char *idle_setting; /* how the idle timeout is set, after a client gone silent
                               * ("the idle timeout") */
    const char *psk_differs;  /* the advice for a handshake that does not open with this
                               * server's pre-shared key ("the pre-shared keys differ") */
} aftp_server_terms;
/* Each string of up to AFTP_SERVER_TERM_MAX - 1 bytes, copied. terms
 * NULL: the defaults again. AFTP_OK; AFTP_ERR_INVALID_ARGUMENT for a size
 * below that of the first field or a longer string (the previous terms
 * stay). */
#define AFTP_SERVER_TERM_MAX 64u
AFTP_EXTERN int aftp_server_set_terms(aftp_server *s, const aftp_server_terms *terms);

/* The bound port while a run listens, else 0. Any thread. */
AFTP_EXTERN unsigned aftp_server_port(const aftp_server *s);

/* Serves until aftp_server_stop() or the end of aftp_server_drain(), then
 * returns AFTP_OK (with aftp_server_set_once: until the end of one
 * session, and returns its result). Returns an error
 * at once when it cannot start: no listen address
 * (AFTP_ERR_INVALID_ARGUMENT), no identity or nobody admitted in a
 * protected server (AFTP_ERR_INVALID_ARGUMENT), a directory that cannot
 * take files, a port it cannot bind (AFTP_ERR_NETWORK): errmsg says which.
 * A session that fails ends that session only (the log callback says why)
 * and the next client is served. */
AFTP_EXTERN int aftp_server_run(aftp_server *s);
/* Ends the run in progress: every session in progress is cancelled (its
 * client told), and aftp_server_run returns AFTP_OK within about 100 ms
 * (a client that does not answer the cancel is not waited for). A stop
 * before the run starts makes that run return at once. Any thread, or a
 * signal handler (async-signal-safe). */
AFTP_EXTERN void aftp_server_stop(aftp_server *s);
/* Reads the authorized keys file (aftp_server_set_authorized_keys_file)
 * again, within about 100 ms, on the run's thread: new handshakes are
 * admitted by the new list, sessions under way go on (a key removed ends
 * no session; the replay protection of the keys that stay is kept). It
 * says "reloaded N keys from PATH" (AFTP_LOG_RELOADED); a file that fails
 * to load (unreadable, malformed, no key) keeps the list in force, and an
 * AFTP_LOG_WARNING line says why. Requests made before the run's tick
 * took one up count once. The embedder's admission callback is not
 * affected. Any thread, or a signal handler (async-signal-safe: a
 * lock-free store), e.g. the daemon's SIGHUP. */
AFTP_EXTERN void aftp_server_reload(aftp_server *s);
/* Ends the run in progress gently: no new session is admitted (a client
 * that comes now is refused with CLOSE(LIMIT), "the server is shutting
 * down and takes no new session, try again later"), running sessions go on
 * to their end, and aftp_server_run returns AFTP_OK once none is left (a
 * run of the libuv tier: its stopped callback comes with AFTP_OK);
 * those still running at the drain timeout (aftp_server_set_drain_timeout_ms)
 * are cancelled, their clients told. An AFTP_LOG_DRAINING line says so.
 * Any thread, or a signal handler (async-signal-safe). */
AFTP_EXTERN void aftp_server_drain(aftp_server *s);
/* Why the latest setter or run failed, with the figures and names
 * involved; "" after one that succeeded. Valid until the next call on the
 * handle. */
AFTP_EXTERN const char *aftp_server_errmsg(const aftp_server *s);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_SERVER_H */
