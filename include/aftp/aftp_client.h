/*
 * aftp client, blocking tier: send files to an aftp server, as libcurl's
 * easy interface fetches a URL.
 *
 *   aftp_client *c = NULL;
 *   if (aftp_client_new(&c) != AFTP_OK) ...;
 *   aftp_client_set_identity_file(c, "/etc/mft/id_x25519");
 *   aftp_client_set_known_hosts_file(c, "/etc/mft/known_hosts");
 *   aftp_client_set_file_cb(c, on_file, app);
 *   const char *files[] = {"/data/a.bin", "/data/b.bin"};
 *   int rc = aftp_client_send(c, "partner.example:7400", files, 2);
 *   if (rc != AFTP_OK)
 *       log_error(aftp_client_errmsg(c));
 *   aftp_client_del(c);
 *
 * Threads: a handle is used by one thread at a time, except
 * aftp_client_cancel(), which any thread or a signal handler may call at
 * any time. Handles are independent: two threads may send at once with
 * two handles.
 * Ownership: strings and keys are copied when set (keys into locked memory
 * that is wiped when the handle is deleted); nothing the caller passes is
 * kept, except the `user` pointers of callbacks. Callback arguments are
 * valid only during the callback.
 * Callbacks run on the thread inside aftp_client_send() and must not call
 * the handle's functions other than aftp_client_cancel().
 * Errors: fallible functions return AFTP_OK or a negative aftp_error
 * (aftp_error.h); aftp_client_errmsg() says what went wrong, in words,
 * with the figures involved.
 * The library never prints and never exits; what it has to say goes to
 * the callbacks and aftp_client_errmsg(). The client installs no signal
 * handler of its own: the only process-wide state a send touches is the
 * SIGBUS guard of its file mappings (a source truncated while it is sent
 * fails that file instead of the process), which the library's global
 * initialisation governs.
 */
#ifndef AFTP_CLIENT_H
#define AFTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp/aftp_error.h"
#include "aftp/aftp_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aftp_client aftp_client;

/* A new handle with the defaults: cipher AFTP_CIPHER_AUTO (keys needed),
 * policy AFTP_CC_FAIR, rate AFTP_CLIENT_DEFAULT_RATE, no rate limits,
 * MTU 1500, idle timeout AFTP_CLIENT_DEFAULT_IDLE_MS, no callbacks.
 * AFTP_OK and *out, or AFTP_ERR_INVALID_ARGUMENT (out is NULL),
 * AFTP_ERR_NO_MEMORY. */
#define AFTP_CLIENT_DEFAULT_RATE UINT64_C(1000000000) /* 1 Gbit/s */
#define AFTP_CLIENT_DEFAULT_IDLE_MS UINT64_C(30000)
AFTP_EXTERN int aftp_client_new(aftp_client **out);
/* Wipes the handle's keys and frees it. NULL-safe. Not during a send. */
AFTP_EXTERN void aftp_client_del(aftp_client *c);

/* ---- keys (spec Appendix B gives the file formats) ----
 * Each setter returns AFTP_OK, or AFTP_ERR_INVALID_ARGUMENT for a NULL
 * argument; the file readers also AFTP_ERR_NOT_FOUND, AFTP_ERR_PERMISSION
 * (unreadable; a private key file that others may read, or a symbolic
 * link), AFTP_ERR_BAD_KEY (malformed) or AFTP_ERR_IO, with
 * aftp_client_errmsg() naming the file and what is wrong with it. A failed
 * setter leaves the previous setting in place. */

/* Own X25519 private key, read now from a key file (refused when others
 * than its owner can read it), or given as its 32 bytes. Needed unless the
 * cipher is AFTP_CIPHER_NONE. */
AFTP_EXTERN int aftp_client_set_identity_file(aftp_client *c, const char *path);
AFTP_EXTERN int aftp_client_set_identity(aftp_client *c, const uint8_t secret[AFTP_KEY_LEN]);
/* The server's public key: pinned directly, from a public key file (read
 * now; a failure message of a server answering with another key names the
 * file), or looked up at send time in a known-hosts file under HOST:PORT
 * exactly as given to aftp_client_send(). A pinned key is used, and
 * checked against the known hosts (aftp_client_send()). A key file's
 * failure message names the setting as aftp_client_terms.peer_key_setting. */
AFTP_EXTERN int aftp_client_set_peer_key(aftp_client *c, const uint8_t key[AFTP_KEY_LEN]);
AFTP_EXTERN int aftp_client_set_peer_key_file(aftp_client *c, const char *path);
/* The path is copied; the file is read by each send. */
AFTP_EXTERN int aftp_client_set_known_hosts_file(aftp_client *c, const char *path);
/* Optional pre-shared key both sides hold (private key file format). */
AFTP_EXTERN int aftp_client_set_psk_file(aftp_client *c, const char *path);
/* enum aftp_cipher_choice. AFTP_ERR_INVALID_ARGUMENT for another value,
 * and for AFTP_CIPHER_AES256GCM on a CPU without AES instructions
 * (AFTP_CIPHER_AUTO then picks ChaCha20-Poly1305). */
AFTP_EXTERN int aftp_client_set_cipher(aftp_client *c, int cipher);

/* ---- rate and path ----
 * AFTP_OK, or AFTP_ERR_INVALID_ARGUMENT for a value out of range (the
 * setting is then unchanged). */

/* enum aftp_cc_policy. */
AFTP_EXTERN int aftp_client_set_policy(aftp_client *c, int policy);
/* AFTP_CC_FIXED: the pacing rate; adaptive policies: the starting rate's
 * cap. Bits of UDP payload per second, > 0. */
AFTP_EXTERN int aftp_client_set_rate(aftp_client *c, uint64_t bits_per_s);
/* Never pace faster / slower (any policy); 0: no limit. A send refuses a
 * minimum above the maximum. */
AFTP_EXTERN int aftp_client_set_max_rate(aftp_client *c, uint64_t bits_per_s);
AFTP_EXTERN int aftp_client_set_min_rate(aftp_client *c, uint64_t bits_per_s);
/* Bytes of an IP packet on the path, AFTP_CLIENT_MIN_MTU..AFTP_CLIENT_MAX_MTU
 * (9000: jumbo frames). The datagrams are mtu - 48 bytes; the receiver may
 * take smaller ones. */
#define AFTP_CLIENT_MIN_MTU 1248u
#define AFTP_CLIENT_MAX_MTU 9216u
AFTP_EXTERN int aftp_client_set_mtu(aftp_client *c, unsigned mtu);
/* Silence from the server that ends the send, 1 ms .. 1 day. */
AFTP_EXTERN int aftp_client_set_idle_timeout_ms(aftp_client *c, uint64_t ms);
/* Path memory (Careful Resume, spec 13.4): a send starts from the rate and
 * minimum RTT that an earlier send measured on the same path (the same
 * server key, or address and port when unprotected, from the same local
 * address) within the last hour, instead of from a small initial window,
 * and a send that reached steady state saves what it measured. `path` is
 * a small text file (copied name; created with its directories, mode
 * 0600, replaced atomically, at most 256 paths); a malformed or unreadable
 * file is ignored with a notice (aftp_client_set_notice_cb), as is a
 * failed save. NULL (the default): no memory, each send starts afresh.
 * Handles of one process or several may share the file (the last save
 * wins). Sends only: a pull's sender is the server. */
AFTP_EXTERN int aftp_client_set_path_memory_file(aftp_client *c, const char *path);
/* Early entries (spec 12.3.4), on by default: the first few entries of a
 * tree or file list (names, sizes, times: at most 256 bytes) ride in the
 * handshake's first message, so their verdicts come with the server's
 * answer and the data one round trip sooner. In a pull (aftp_client_get)
 * the same holds for the requested paths: the whole request rides in
 * that message when it fits in its 256 bytes. Those names are protected
 * by the server's static key (and the pre-shared key, if any) alone, not
 * by the session's fresh keys: someone who recorded the handshake and
 * later steals the server's key could read them (spec 14.2.8). 0: they
 * go after the handshake, as every later entry does, at one round trip's
 * cost. Never file content. */
AFTP_EXTERN int aftp_client_set_early_entries(aftp_client *c, int allow);

/* ---- callbacks ---- */

/* About 4 times a second while a file is under way: the figures of the
 * CLI's progress line. In a tree (pipelined mode) many files are in flight
 * at once and the figures are the session's: `size` counts the bytes still
 * to send of every file accepted so far (resumed bytes excluded), `name`
 * is the file accepted last, and `seconds` runs from the first acceptance.
 * Fields are only ever appended. */
typedef struct aftp_progress {
    const char *name;    /* the file's name as offered to the receiver, printable (as
                          * aftp_file_event.printable_name) */
    uint64_t size;       /* bytes in the file (a tree: see above) */
    uint64_t bytes_done; /* bytes sent at least once (what the receiver is getting) */
    double seconds;      /* since the receiver accepted the file */
    double goodput_bps;  /* bits per second of bytes_done since the previous call */
    double eta_seconds;  /* at goodput_bps; < 0 when unknown */
    uint64_t rate_bps;   /* the rate controller's current pacing rate */
    double loss;         /* share of packets lost over the latest rate sample, 0..1 */
    double rtt_ms;       /* smoothed round-trip time; 0 before the first sample */
    double min_rtt_ms;   /* the path's windowed minimum round-trip time, which the rate
                          * controller takes as the path without queues; 0 before a sample */
    double queue_ms;     /* the latest round-trip time above that minimum: the queue the
                          * send is building on the path */
    uint64_t session;    /* a server's progress (aftp_server_set_progress_cb): which of its
                          * sessions, a number it gives each session from 1, not reused
                          * while the server handle lives, so that concurrent sessions'
                          * reports can be told apart; 0 in a client's progress */
} aftp_progress;
typedef void (*aftp_progress_cb)(void *user, const aftp_progress *p);
/* cb NULL: no progress. Always AFTP_OK (AFTP_ERR_INVALID_ARGUMENT for a
 * NULL handle). */
AFTP_EXTERN int aftp_client_set_progress_cb(aftp_client *c, aftp_progress_cb cb, void *user);

enum aftp_file_event_type {
    AFTP_FILE_STARTED = 1, /* the receiver accepted the offer */
    AFTP_FILE_FINISHED,    /* delivered and verified by the receiver; a directory or link:
                            * placed */
    AFTP_FILE_FAILED,      /* error and message say why */
    AFTP_FILE_SKIPPED      /* an identical file is there already (sync): nothing sent */
};
/* Fields are only ever appended. */
typedef struct aftp_file_event {
    int type;           /* enum aftp_file_event_type */
    size_t index;       /* the SRC in the files given to aftp_client_send() */
    const char *source; /* that SRC as given */
    const char *name;   /* the name the receiver was offered: the entry's path */
    uint64_t size;      /* a file's bytes; 0 for a directory, a link, or a file that could
                         * not be opened */
    uint64_t bytes;     /* FINISHED: the bytes delivered (size); FAILED: bytes sent at
                         * least once before the failure (pipelined mode: 0, the session
                         * counts bytes for all its files together) */
    double seconds;     /* FINISHED, FAILED: offer accepted to verdict (0 if never accepted) */
    uint8_t digest[AFTP_DIGEST_LEN]; /* FINISHED: XXH3-128 verified by both sides; else zeros */
    double retransmitted; /* FINISHED, FAILED: bytes sent again / size (pipelined mode: the
                           * session's bytes sent again / sent so far) */
    int cipher;         /* enum aftp_cipher_choice in use (AFTP_CIPHER_NONE: unprotected) */
    int error;          /* FAILED: aftp_error; else AFTP_OK */
    const char *message; /* FAILED: the reason in words (aftp_client_errmsg()); else "" */
    uint64_t rate_cap_bps; /* FINISHED, FAILED: the receiver's rate cap the send obeyed,
                            * bits/s, on top of aftp_client_set_max_rate (spec 12.3
                            * RATE_CAP); 0: none */
    double session_seconds; /* FINISHED, FAILED: from the handshake (the session's start) to
                             * the verdict, what a summary of the session's first file
                             * reports; 0 when no session was made */
    const char *printable_name; /* name for people: bytes that are not printable UTF-8 (a
                                 * tab, an escape) as \xHH */
    int kind;           /* enum aftp_entry_kind: AFTP_ENTRY_FILE, _DIR or _SYMLINK */
    const char *path;   /* the entry's path at the receiver, relative ("d/sub/f"), raw
                         * bytes; `name` and printable_name are this path too */
    uint64_t resumed_bytes; /* FINISHED, FAILED: of size, the bytes the receiver already
                             * held and that were not sent again (resume); else 0 */
} aftp_file_event;
typedef void (*aftp_file_cb)(void *user, const aftp_file_event *ev);
/* Every entry of a send gets its events: a file STARTED when the receiver
 * accepts it (to be sent whole or resumed), then FINISHED, or FAILED; a
 * file the receiver already holds identical gets SKIPPED alone; a
 * directory or link FINISHED when placed (no STARTED). A refused or
 * failed entry gets FAILED with its own error and message and the send
 * goes on. Entries end in the order the receiver decides them, which is
 * the walk's order except that files still being sent end after entries
 * that follow them. `index` is the SRC the entry came from. A send that
 * fails as a whole (the network, a cancel, the keys) ends the entries
 * under way with FAILED, and those not yet offered get no event. With
 * faux:// sources (one-file mode) the first failure ends the send, its
 * FAILED event just before aftp_client_send() returns. cb NULL: no
 * events. */
AFTP_EXTERN int aftp_client_set_file_cb(aftp_client *c, aftp_file_cb cb, void *user);

/* What the library would tell the operator of a send that goes on
 * regardless, as one line of text without a newline: each thing of a tree
 * skipped here, named ("skipped PATH: why": a FIFO, device or socket, a
 * link inside a tree without links (aftp_client_set_links), a name with a
 * control character, something unreadable), a socket buffer
 * smaller than the rate needs (and the setting that raises it), a route
 * that carries smaller IP packets than the MTU (the datagrams shrink), a
 * receiver that takes smaller datagrams than the MTU set
 * (aftp_client_set_mtu) asks for. Called from aftp_client_send()'s
 * thread; text is valid during the call. cb NULL: none. Always AFTP_OK
 * (AFTP_ERR_INVALID_ARGUMENT for a NULL handle). */
typedef void (*aftp_notice_cb)(void *user, const char *text);
AFTP_EXTERN int aftp_client_set_notice_cb(aftp_client *c, aftp_notice_cb cb, void *user);

/* ---- trees: sync, resume, links ----
 * Each returns AFTP_OK, or AFTP_ERR_INVALID_ARGUMENT for a NULL handle or
 * a value out of range (the setting is then unchanged). They apply to the
 * next send, to every file in it. */

/* Whether a file already at the receiver is left alone (spec 9.14.4):
 * AFTP_CLIENT_SYNC_MTIME (the default): skipped (SKIPPED) when its size and
 * modification time are the source's; AFTP_CLIENT_SYNC_CHECKSUM: when its
 * content digest is the source's (each source is read once more, at its
 * offer, to compute it); AFTP_CLIENT_SYNC_OFF: every file is sent. A file
 * there that is not skipped is refused (FAILED, AFTP_ERR_FILE_EXISTS)
 * unless the receiver allows replacing files. */
enum aftp_client_sync {
    AFTP_CLIENT_SYNC_OFF = 1,
    AFTP_CLIENT_SYNC_MTIME,
    AFTP_CLIENT_SYNC_CHECKSUM
};
AFTP_EXTERN int aftp_client_set_sync(aftp_client *c, int sync);
/* on (the default): a file whose earlier send was interrupted is resumed
 * from what the receiver holds durably of the same source version (same
 * size, mtime, inode and ctime), and verified whole like any file; 0:
 * always sent from its first byte. */
AFTP_EXTERN int aftp_client_set_resume(aftp_client *c, int on);
/* Symbolic links met inside a directory tree (a link named as a SRC is
 * always followed): AFTP_CLIENT_LINKS_SKIP (the default) skips each with a
 * notice; AFTP_CLIENT_LINKS_RECREATE sends each as a link whose target is
 * taken literally (never followed, on either side). */
enum aftp_client_links {
    AFTP_CLIENT_LINKS_SKIP = 1,
    AFTP_CLIENT_LINKS_RECREATE
};
AFTP_EXTERN int aftp_client_set_links(aftp_client *c, int links);
/* A get only (aftp_client_get): on, a file already in dest_dir that the
 * sync setting does not find identical is replaced by the server's
 * (verified first, then renamed over it); off (the default), that entry
 * fails with AFTP_ERR_FILE_EXISTS, its message naming the file and this
 * setting, and the get goes on. A directory or special file in the way
 * is never replaced. A send's receiver decides for itself (its operator's
 * overwrite setting): this setting does not apply to aftp_client_send. */
AFTP_EXTERN int aftp_client_set_overwrite(aftp_client *c, int on);

/* ---- the summary of a send ----
 * The figures of the last aftp_client_send() on the handle, complete once
 * it returned (whatever it returned; zeros before any send). The caller
 * sets `size` to sizeof(aftp_client_summary): fields are only ever
 * appended, and a library newer than the caller fills only the fields
 * within size. */
typedef struct aftp_client_summary {
    size_t size;
    uint64_t entries;        /* entries offered: files, directories, links */
    uint64_t files_sent;     /* files sent whole and verified */
    uint64_t files_resumed;  /* files completed from what the receiver held, verified */
    uint64_t files_skipped;  /* files identical at the receiver: nothing sent */
    uint64_t failed;         /* entries refused or failed (any kind) */
    uint64_t dirs;           /* directories placed */
    uint64_t links;          /* links placed */
    uint64_t skipped_locally; /* not offered, each with a notice: FIFOs, devices, sockets,
                               * links without AFTP_CLIENT_LINKS_RECREATE, bad names */
    uint64_t file_bytes;     /* bytes in the files sent, resumed and skipped */
    uint64_t bytes_sent;     /* file bytes sent (at least once) in this send */
    uint64_t bytes_resumed;  /* bytes the receiver already held of resumed files */
    uint64_t bytes_skipped;  /* bytes of the skipped files */
    double seconds;          /* from the call of aftp_client_send() to its return */
    double retransmitted;    /* bytes sent again / bytes_sent, 0 when none sent */
} aftp_client_summary;
/* Fills the fields of *out within out->size. AFTP_OK;
 * AFTP_ERR_INVALID_ARGUMENT for a NULL argument or a size below that of
 * the first field. */
AFTP_EXTERN int aftp_client_get_summary(const aftp_client *c, aftp_client_summary *out);

/* ---- messages ---- */

/* How aftp_client_errmsg() names, in its advice, what the application's
 * user can act on: an MFT product names its own settings, the aftp tool
 * its options. Each field NULL keeps the default (in parentheses). The
 * caller sets `size` to sizeof(aftp_client_terms): fields are only ever
 * appended, and a library newer than the caller reads only the fields
 * within size. */
typedef struct aftp_client_terms {
    size_t size;
    const char *server_program;    /* what runs at the server ("an aftp server") */
    const char *idle_setting;      /* how the idle timeout is set ("the idle timeout") */
    const char *peer_key_setting;  /* how a server's key is pinned ("aftp_client_set_peer_key") */
    const char *psk_setting;       /* the pre-shared key ("pre-shared key") */
    const char *cipher_none;       /* running without protection ("no protection (cipher none)") */
    const char *overwrite_setting; /* how a receiver allows replacing a file ("its overwrite
                                    * setting") */
    const char *mtu_setting;       /* how the MTU is set, followed by its value in the notice
                                    * of a receiver that took smaller datagrams ("MTU") */
    const char *get_overwrite_setting; /* how a get replaces a local file that differs
                                        * ("aftp_client_set_overwrite") */
} aftp_client_terms;
/* The strings are copied. terms NULL: the defaults again. AFTP_OK;
 * AFTP_ERR_INVALID_ARGUMENT for a NULL handle or a size below that of
 * the first field; AFTP_ERR_NO_MEMORY (the previous terms stay). */
AFTP_EXTERN int aftp_client_set_terms(aftp_client *c, const aftp_client_terms *terms);

/* ---- perform ---- */

/* Sends the files and directories (each a SRC) to the server at
 * host_port ("HOST:PORT", "[v6addr]:PORT", a numeric address or a name to
 * resolve), in one session in pipelined mode (spec 9.14, entry window
 * AFTP_CLIENT_PIPELINE_WINDOW): the offers of the next entries flow while
 * earlier files are still sent, so a small file costs no round trip of
 * its own. Blocks until every entry has its verdict, or the session
 * fails. Names at the receiver (rsync's trailing-slash rule): a file SRC
 * arrives as its base name; a directory SRC "d" as "d" with its contents
 * beneath ("d/sub/f"); "d/" puts d's contents directly beneath the
 * receiver's directory. Directories are walked in sorted order, parents
 * first; empty ones are kept. Modification time and permission bits are
 * sent (the receiver's mode mask decides the bits kept). A link named as
 * SRC is followed; see aftp_client_set_links for links inside a tree and
 * aftp_client_set_sync, aftp_client_set_resume for files already there.
 * Against a server without pipelined mode the files go one at a time and
 * a directory entry fails.
 * Bounds, for a tree of any size: the walk holds one open directory per
 * level of the current path (at most 129) and the names of those
 * directories; the session at most AFTP_CLIENT_PIPELINE_WINDOW entries
 * (their paths, and a few dozen bytes each besides), at most 256 source
 * files open and mapped at once whatever the window (the least recently
 * read is closed and reopened, checked unchanged, when a repair needs
 * it), and files of up to 64 KiB read once into buffers of at most 32 MiB
 * in all.
 * A SRC "faux:///NAME?SIZE" is no file but SIZE zero bytes (SIZE a byte
 * count, suffixes k M G T binary) offered as NAME: a test source that
 * measures the network without disks (a server whose directory is
 * faux:// keeps nothing and checks that it gets such zeros). A send of
 * faux:// sources runs one-file mode, files one after another (ids 1, 2,
 * 3 ..., spec 9.6), as before pipelined mode: there is no file system to
 * walk, sync and resume have nothing to compare, and the figures a
 * benchmark takes stay comparable with earlier runs. faux:// sources and
 * real ones cannot be mixed in one send (AFTP_ERR_INVALID_ARGUMENT).
 * The server's key: the pinned one (aftp_client_set_peer_key*), else the
 * known-hosts entry of host_port. A pinned key must agree with the
 * known-hosts file too, when the handle has one that lists host_port: a
 * different listed key fails the send with AFTP_ERR_AUTH before any
 * datagram (the server's key changed, or the pin is wrong; the message
 * begins "WARNING:"), as does a known-hosts file listing host_port with
 * different keys.
 * Returns AFTP_OK when every entry was sent, resumed, skipped or placed.
 * When some entries failed and the session itself ended cleanly: the
 * first failed entry's error, failure place AFTP_CLIENT_FAILED_IN_SESSION
 * (AFTP_CLIENT_FAILED_LOCALLY when that entry's local source could not be
 * read), and aftp_client_errmsg() "N of M entries failed; the first: ..."
 * (when the send had one entry, only that entry's message).
 * Otherwise the session's error, and aftp_client_errmsg() says why:
 *   AFTP_ERR_INVALID_ARGUMENT  bad host_port, no files, min rate > max rate
 *   AFTP_ERR_BAD_KEY           protected without identity or server key
 *   AFTP_ERR_UNKNOWN_PEER      the known hosts do not list host_port, or
 *                              the server does not admit this client's key
 *   AFTP_ERR_AUTH              the server's key is not the pinned one
 *   AFTP_ERR_NETWORK           refused (nothing listens), or the path failed
 *   AFTP_ERR_IDLE_TIMEOUT      no answer, or the server went silent
 *   AFTP_ERR_CANCELLED         aftp_client_cancel(), or the server cancelled
 *   AFTP_ERR_NOT_FOUND, AFTP_ERR_PERMISSION, AFTP_ERR_SOURCE_CHANGED, ...
 *                              a local file; FILE_EXISTS, NO_SPACE,
 *                              PATH_REJECTED, LIMIT ...: the receiver refused.
 * Not reentrant on one handle (AFTP_ERR_INVALID_STATE from a callback). */
/* Entries in flight: enough that a tree of small files keeps a 1 Gbit/s,
 * 150 ms path busy while the front files are repaired and committed (the
 * Go source tree, 8,976 entries, took 2.1 s at 8192, 2.5 s at 4096 and
 * 3.8 s at 16384, where the first flight of offers holds the data back). */
#define AFTP_CLIENT_PIPELINE_WINDOW 8192u
AFTP_EXTERN int aftp_client_send(aftp_client *c, const char *host_port,
                                 const char *const *files, size_t count);
/* Fetches remote_paths[0..n) (1..AFTP_PULL_MAX_PATHS, each beneath the
 * root this client's key has on the server) from the server at host_port
 * into the existing directory dest_dir, in one session (a pull, spec
 * 9.15): the server is the sender, this handle's keys, rates (max rate:
 * the server paces no faster), MTU, idle timeout, sync and resume apply as
 * for aftp_client_send. Names (rsync's trailing-slash rule, as for a
 * send): "d" arrives as dest_dir/d with its contents, "d/" puts d's
 * contents directly beneath dest_dir, a file as its base name. What the
 * server offers goes through this side's path rules (spec 14.4): nothing
 * lands outside dest_dir; an existing file identical by the sync setting
 * is skipped (SKIPPED), a partial one resumed, one that differs is
 * replaced only with aftp_client_set_overwrite (else that entry fails with
 * FILE_EXISTS); a directory in the way of a file is left alone and that
 * entry fails.
 * Events and summary as for a send (aftp_client_set_file_cb,
 * aftp_client_get_summary); an entry's `index` is the requested path it
 * came from, told by the served paths' order and names (spec 9.15.2: a
 * path "x/d" gives "d" and "d/...", "x/d/" d's contents, sorted), an
 * entry "d" that a contents path and a later path ".../d" could both give
 * being the latter's; a path the server refused
 * (PATH_REJECTED: `..`, absolute, a link on the path, a FIFO or device;
 * NOT_FOUND; PERMISSION) gets one FAILED event with that error, `index`
 * its number in remote_paths, and the server's reason; the other paths go
 * on. Returns AFTP_OK when every path was served and every entry stored
 * and verified; else as aftp_client_send: the first failed entry's or
 * path's error ("N of M entries failed; the first: ..."), or the
 * session's (AFTP_ERR_PERMISSION: the server does not let this key pull;
 * AFTP_ERR_INVALID_ARGUMENT: bad host_port, no paths, more than
 * AFTP_PULL_MAX_PATHS, dest_dir not a directory; AFTP_ERR_NOT_FOUND:
 * dest_dir missing). Not reentrant on one handle. */
AFTP_EXTERN int aftp_client_get(aftp_client *c, const char *host_port,
                                const char *const *remote_paths, size_t n, const char *dest_dir);
/* Checks what aftp_client_send() would refuse at once with
 * AFTP_ERR_INVALID_ARGUMENT, without sending: host_port's form (a name
 * is resolved), the files given (a faux:// source's NAME and SIZE), the
 * rates. Lets an application report a mistake in its input before it
 * reads keys or asks its user anything. AFTP_OK, or
 * AFTP_ERR_INVALID_ARGUMENT with aftp_client_errmsg(). */
AFTP_EXTERN int aftp_client_check_send(aftp_client *c, const char *host_port,
                                       const char *const *files, size_t count);

/* Where the last aftp_client_send() failed, so that an application can
 * tell its user's own mistakes from the server's verdicts:
 *   AFTP_CLIENT_FAILED_KEYS        before any datagram, at the keys: no
 *                                  identity, the server's key unknown
 *                                  (AFTP_ERR_UNKNOWN_PEER: trust on first
 *                                  use may help) or contradicted, a
 *                                  known-hosts file that cannot be read
 *                                  (its own error: AFTP_ERR_IO, ...);
 *   AFTP_CLIENT_FAILED_LOCALLY     before the session carried a file: the
 *                                  arguments, a local file that cannot be
 *                                  sent, the socket, or a cancel before
 *                                  the first datagram (then
 *                                  AFTP_ERR_CANCELLED, whatever the step
 *                                  it broke made of it);
 *   AFTP_CLIENT_FAILED_IN_SESSION  in the session: the network, the
 *                                  server's refusal or failure (there
 *                                  AFTP_ERR_IO is the server's storage: a
 *                                  local source that fails to read ends as
 *                                  AFTP_ERR_SOURCE_CHANGED), a cancel;
 *   0                              the last send succeeded, or none ran.
 * Valid until the next send on the handle. */
enum aftp_client_failure_place {
    AFTP_CLIENT_FAILED_LOCALLY = 1,
    AFTP_CLIENT_FAILED_IN_SESSION,
    AFTP_CLIENT_FAILED_KEYS
};
AFTP_EXTERN int aftp_client_failure_place(const aftp_client *c);

/* Cancels a send in progress (the server is told; nothing of the files
 * under way appears under their final names: with resume on, the
 * receiver keeps their partial copies in its resume state for the next
 * send); aftp_client_send() then returns AFTP_ERR_CANCELLED
 * within about a second. Safe from any thread and from a signal handler
 * (it only stores to a lock-free atomic the send polls); a no-op when no
 * send runs, and NULL-safe. The handle must outlive the call. */
AFTP_EXTERN void aftp_client_cancel(aftp_client *c);
/* The reason for the last failure of this handle, "" when none (a
 * successful call clears it). Owned by the handle; valid until the next
 * call on the handle. */
AFTP_EXTERN const char *aftp_client_errmsg(const aftp_client *c);

/* ---- learning a server's key: trust on first use (spec 14.9) ----
 *
 * WARNING: what aftp_client_fetch_server_key() returns is NOT
 * authenticated and cannot be: whoever answers from the server's address
 * (an attacker on the path, or one that guesses the request's connection
 * id and spoofs that address) can give its own key, and a client that
 * pins it runs every later session with the attacker, undetected. Pin a
 * fetched key only after a person compared its fingerprint with one
 * obtained out of band (the server's operator; the reference server
 * prints it when it starts), as SSH's first-connection prompt does; never
 * pin it automatically, and never fetch again to replace a pinned key
 * that no longer matches (a changed key is the attack this guards
 * against: ask the server's operator). Prefer handing keys over out of
 * band (aftp_client_set_peer_key, known hosts) altogether. */

/* How long a fetch waits for its answer: the request is sent up to 4
 * times, 1 s apart (spec 14.9), then the server counts as silent. */
#define AFTP_CLIENT_FETCH_KEY_WAIT_MS UINT64_C(4000)
/* Asks the server at host_port (as aftp_client_send() takes it) for its
 * static public key; blocks up to AFTP_CLIENT_FETCH_KEY_WAIT_MS. No
 * session starts, nothing is pinned and the handle's keys are unchanged.
 * AFTP_OK and key_out; otherwise, with aftp_client_errmsg():
 *   AFTP_ERR_INVALID_ARGUMENT  NULL argument, bad host_port
 *   AFTP_ERR_IDLE_TIMEOUT      no answer (nothing listens and no ICMP came,
 *                              UDP is blocked, or the server runs without
 *                              protection and so has no key to give)
 *   AFTP_ERR_NETWORK           unreachable (nothing listens: ICMP)
 *   AFTP_ERR_CANCELLED         aftp_client_cancel() during the wait
 *   AFTP_ERR_INVALID_STATE     called from a callback of this handle
 *   another error              no socket could be opened. */
AFTP_EXTERN int aftp_client_fetch_server_key(aftp_client *c, const char *host_port,
                                             uint8_t key_out[AFTP_KEY_LEN]);
/* Pins key for host_port (as given to aftp_client_send()) in the handle's
 * known-hosts file (aftp_client_set_known_hosts_file): appends the line
 * "HOST:PORT aftp-x25519 <base64>", creating the file (mode 0600, not its
 * directory) when missing. Only after the fingerprint was confirmed (see
 * the warning above). AFTP_OK; AFTP_ERR_INVALID_ARGUMENT for a NULL
 * argument or a host_port that cannot name a line; AFTP_ERR_INVALID_STATE
 * without a known-hosts file; the file's error otherwise (AFTP_ERR_IO,
 * AFTP_ERR_PERMISSION, AFTP_ERR_NOT_FOUND for a missing directory), with
 * aftp_client_errmsg() naming the file and the system's reason. */
AFTP_EXTERN int aftp_client_add_known_host(aftp_client *c, const char *host_port,
                                           const uint8_t key[AFTP_KEY_LEN]);

/* What users compare: a key as its known-hosts and key-file line,
 * "aftp-x25519 <base64>", and its fingerprint "SHA256:<unpadded base64 of
 * SHA-256(key)>" (the form the reference server prints). Each writes a
 * NUL-terminated text into out: AFTP_OK, AFTP_ERR_INVALID_ARGUMENT for a
 * NULL argument, AFTP_ERR_BUFFER_TOO_SMALL when cap is below the _MAX
 * (out then holds ""). Thread-safe; no handle needed. */
#define AFTP_CLIENT_KEY_TEXT_MAX 64u    /* "aftp-x25519 " + 44 base64 + NUL, and room */
#define AFTP_CLIENT_FINGERPRINT_MAX 51u /* "SHA256:" + 43 base64 + NUL */
AFTP_EXTERN int aftp_client_format_key(const uint8_t key[AFTP_KEY_LEN], char *out, size_t cap);
AFTP_EXTERN int aftp_client_format_fingerprint(const uint8_t key[AFTP_KEY_LEN], char *out,
                                               size_t cap);

/* ---- making keys and reading figures ---- */

/* Makes a new X25519 key pair (the client's identity, or a server's) and
 * writes it as key files (spec Appendix B): the private key to path (mode
 * 0600) and its public key line, "aftp-x25519 <base64> comment", to
 * path.pub, which the other side pins. Never replaces a file, and leaves
 * neither behind when one cannot be written. The public key line, with its
 * newline, goes to line_out (AFTP_CLIENT_KEY_LINE_MAX bytes are enough).
 * comment may be NULL. The handle only carries aftp_client_errmsg(); its
 * keys are unchanged. AFTP_OK, or: AFTP_ERR_INVALID_ARGUMENT (a NULL
 * argument, a comment that is not one line of printable text),
 * AFTP_ERR_BUFFER_TOO_SMALL (cap), AFTP_ERR_FILE_EXISTS, AFTP_ERR_NOT_FOUND
 * (a missing directory), AFTP_ERR_PERMISSION, AFTP_ERR_IO. */
#define AFTP_CLIENT_KEY_LINE_MAX 1026u /* a key file's line, its newline and NUL */
AFTP_EXTERN int aftp_client_keygen(aftp_client *c, const char *path, const char *comment,
                                   char *line_out, size_t cap);
/* The public key of the handle's identity (aftp_client_set_identity*),
 * what the server's authorized keys list. AFTP_OK and out;
 * AFTP_ERR_INVALID_ARGUMENT for a NULL argument; AFTP_ERR_BAD_KEY without
 * an identity. */
AFTP_EXTERN int aftp_client_public_key(const aftp_client *c, uint8_t out[AFTP_KEY_LEN]);
/* A rate as people write it: "500M", "1G", "2.5g", "800000": bits per
 * second, decimal suffixes k M G T (powers of 1000, either case), up to 9
 * fractional digits, 1 bit/s to 1 Tbit/s. AFTP_OK and *bits_per_s
 * (untouched otherwise), or AFTP_ERR_INVALID_ARGUMENT. Thread-safe. */
AFTP_EXTERN int aftp_client_parse_rate(const char *text, uint64_t *bits_per_s);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_CLIENT_H */
