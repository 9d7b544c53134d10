/*
 * aftp sans-I/O transfer engine.
 *
 * The engine is two state machines, one per role: the sender (owns the
 * source, sends DATA, repairs loss) and the receiver (owns the block bitmap,
 * sends FEEDBACK, verifies). They never touch sockets, clocks, threads or
 * files: time comes in as a nanosecond argument (any monotonic clock),
 * datagrams go in and out through the functions below, and file bytes move
 * through the storage callbacks. Drivers in io/ wrap them with sockets and
 * mmap; tests wrap them with an in-process link on a virtual clock.
 *
 * Two roles (spec section 9.1): in a push (the default) the client is the
 * sender and the server the receiver; in a pull (section 9.15, settings'
 * `role` AFTP_ROLE_PULL) the client is the receiver, which names what it
 * wants in its settings' `pull` request, and the server is the sender,
 * whose storage learns each requested path through `pull_path`. Either
 * way the client's engine sends the HELLO and the server's answers it.
 *
 * Usage, either role:
 *   loop:
 *     for each datagram that arrived:   aftp_X_read(e, now, buf, len)
 *     if now >= aftp_X_expiry(e):       aftp_X_handle_expiry(e, now)
 *     while aftp_X_write(e, now, buf, cap, &dg) == 1: transmit dg
 *     wait until aftp_X_expiry(e) or a datagram arrives
 *   until aftp_X_state(e) is AFTP_STATE_CLOSED.
 *
 * Input: aftp_X_read() returns AFTP_OK when the datagram was used or
 * dropped (malformed, unexpected, duplicate and foreign datagrams are
 * dropped silently and counted); a negative code only when the session
 * itself failed, after which the state is CLOSING or CLOSED.
 *
 * Ownership: settings and file info are copied at the call; the engine
 * keeps no pointer into them (except `user`, passed back to callbacks).
 * Datagram buffers belong to the caller. Callbacks must not call back into
 * the same engine. Engines are not thread-safe: one thread drives each.
 */
#ifndef AFTP_ENGINE_H
#define AFTP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_export.h"
#include "aftp/aftp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AFTP_DIGEST_LEN 16 /* XXH3-128, canonical big-endian form */
#define AFTP_NO_EXPIRY UINT64_MAX

typedef struct aftp_sender aftp_sender;
typedef struct aftp_receiver aftp_receiver;

/* What a file is. `path` is relative, '/'-separated and NUL-terminated; it
 * is borrowed for the duration of the call that receives it. */
typedef struct aftp_file_info {
    uint32_t file_id;
    uint64_t size;
    int64_t mtime_ns;
    uint32_t mode;       /* permission bits */
    uint32_t block_size;
    int overwrite;       /* the sender asks to replace an existing file */
    const char *path;
} aftp_file_info;

/* ---- pipelined mode (spec section 9.14): entries and verdicts ----
 * The receiver's storage decides each entry a pipelined sender offers
 * (storage op `entry` below). Values equal the wire's (spec 6.13, 6.14). */
enum aftp_entry_kind {
    AFTP_ENTRY_FILE = 1,
    AFTP_ENTRY_DIR = 2,
    AFTP_ENTRY_SYMLINK = 3
};

/* A pull request's flag (aftp_pull_request.flags, the `flags` of storage's
 * pull_path): the entries may replace what exists (file.overwrite). */
#define AFTP_ENTRY_OVERWRITE 0x0001u
/* What the sender allows the receiver to answer (aftp_entry_info.flags). */
#define AFTP_ENTRY_RESUME 0x0002u   /* RESUME from a partial copy of this source version */
#define AFTP_ENTRY_SYNC 0x0004u     /* SKIP when an identical file is there */
#define AFTP_ENTRY_CHECKSUM 0x0008u /* with SYNC: identical by content digest, not mtime */

enum aftp_verdict_kind {
    AFTP_VERDICT_SEND = 0,    /* FILE: send it whole; DIR, SYMLINK: placed */
    AFTP_VERDICT_RESUME = 1,  /* FILE: the `held` blocks are stored already */
    AFTP_VERDICT_SKIP = 2,    /* FILE: an identical file is there; kept as it is */
    AFTP_VERDICT_REFUSED = 3  /* `error` says why; the entry ends, the session goes on */
};

/* Blocks [start, start + len) of one file, its own block indices. */
typedef struct aftp_block_range {
    uint64_t start;
    uint64_t len;
} aftp_block_range;

/* Bytes [off, off + len) of one file. */
typedef struct aftp_byte_range {
    uint64_t off;
    uint64_t len;
} aftp_byte_range;

/* Most holes an entry lists (aftp_entry_info.holes; the wire's bound). */
#define AFTP_ENTRY_MAX_HOLES 1024u

/* One entry of a pipelined session; borrowed for the call. */
typedef struct aftp_entry_info {
    aftp_file_info file;     /* file_id = the entry id; DIR, SYMLINK: size 0, block_size 0 */
    int kind;                /* enum aftp_entry_kind */
    unsigned flags;          /* AFTP_ENTRY_RESUME | _SYNC | _CHECKSUM */
    /* The sender's identity of this version of the source (the reference
     * sender hashes size, mtime, inode and ctime): a partial copy may be
     * resumed only when it was taken of the same size, mtime, block size
     * and source_id (spec 9.14.4). */
    uint64_t source_id;
    uint8_t digest[AFTP_DIGEST_LEN]; /* with AFTP_ENTRY_CHECKSUM: the file's XXH3-128 */
    /* SYMLINK: the target, NUL-terminated, to be stored literally: never
     * resolved, followed or rewritten (spec 14.4). NULL for other kinds. */
    const char *target;
    /* FILE, optional (NULL, 0: none): holes of a sparse file, byte
     * extents that hold no data and read as zeros; ascending, disjoint,
     * non-empty, inside the file, at most AFTP_ENTRY_MAX_HOLES.
     * Sender: the blocks lying wholly inside them are neither read nor
     * sent (spec 6.13, flag HOLES); the engine copies the list, and sends
     * the smallest holes as data when the list does not fit an ENTRIES.
     * Receiver (storage's `entry`): the bytes of the hole blocks the
     * sender announced, block-aligned (the last may end at the file's
     * size): never written, they stay holes of the stored file and need
     * no space; the file's verification covers them as zeros. */
    const aftp_byte_range *holes;
    size_t hole_count;
} aftp_entry_info;

/* Storage's answer for an entry. */
typedef struct aftp_entry_verdict {
    int verdict;             /* enum aftp_verdict_kind */
    int error;               /* REFUSED: a negative aftp_error, sent as its wire error */
    /* RESUME: the file's blocks already on stable storage, ascending and
     * non-adjacent, at least one; storage owns the array until the entry's
     * `close`. It may list fewer blocks than it holds, never more. */
    const aftp_block_range *held;
    size_t held_count;
} aftp_entry_verdict;

/* `close`'s commit argument: discard, commit now, or (receiver, pipelined
 * mode, with `commit_group`) keep the verified file until the group commit. */
#define AFTP_CLOSE_DISCARD 0
#define AFTP_CLOSE_COMMIT 1
#define AFTP_CLOSE_DEFER 2

/* Receiver storage's `open` and `entry` may return this (not an error):
 * the file cannot be decided yet, because another writer of this storage
 * (another session of the same server) holds it; it will be once that
 * writer ends. `open` (one-file mode): the offer is dropped unanswered and
 * asked again when the sender resends it. `entry` (pipelined mode): the
 * entry stays undecided, and so do the entries after it (verdicts go in id
 * order); the engine asks again at its timer, every
 * AFTP_STORAGE_WAIT_RETRY_NS at most, while the data of entries already
 * decided keeps flowing (spec 9.14.4). */
#define AFTP_STORAGE_WAIT 1
#define AFTP_STORAGE_WAIT_RETRY_NS 10000000u

/* The engine's only access to file bytes. Each returns AFTP_OK or a
 * negative aftp_error, which ends that file with the matching wire error. */
typedef struct aftp_storage_ops {
    /* Both roles: borrow bytes [off, off+len) of the file. The sender reads
     * DATA payloads through it (the pointer may go straight into an iovec);
     * the receiver reads back the stored file to verify its digest. The
     * pointer must stay valid until `close` for that file. */
    int (*view)(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out);
    /* Receiver: the peer offers a file. Check the path, refuse an existing
     * file unless overwrite, make sure info->size bytes fit (a full disk
     * fails here, before any data). May return AFTP_STORAGE_WAIT. */
    int (*open)(void *user, const aftp_file_info *info);
    /* Receiver: store len bytes at off (only ever for blocks not yet held).
     * `data` may be the very pointer `place` lent for these bytes: they are
     * in place already, only the write is to be recorded. */
    int (*write)(void *user, uint32_t file_id, uint64_t off, const uint8_t *data, size_t len);
    /* Receiver: commit = AFTP_CLOSE_COMMIT (1): make the verified file
     * durable and give it its final name. AFTP_CLOSE_DISCARD (0): discard
     * it. AFTP_CLOSE_DEFER (2, pipelined mode, only when `commit_group` is
     * set): the file is verified; keep it, not yet visible under its final
     * name, until `commit_group` names it. Sender: release the source. */
    int (*close)(void *user, uint32_t file_id, int commit);
    /* Receiver, optional (NULL: every payload is opened into the engine's
     * scratch buffer and handed to `write`): lend the len writable bytes at
     * off of a block not yet held, valid until `close`, so that a sealed
     * DATA payload is decrypted straight into place, saving a copy. When
     * the payload authenticates, `write` follows with that pointer; when it
     * does not, the lent bytes may hold garbage, the block stays missing
     * and no `write` follows. A failure here only means the payload takes
     * the scratch buffer and `write`. */
    int (*place)(void *user, uint32_t file_id, uint64_t off, size_t len, uint8_t **out);
    /* Receiver, pipelined mode (spec 9.14.4); NULL: the receiver does not
     * offer pipelined mode. Decide entry `info`, in entry id order, and
     * fill *out; returns AFTP_OK, AFTP_STORAGE_WAIT (*out unused: asked
     * again later), or an error that ends the session (the storage itself
     * failed; a refusal of the entry is a REFUSED verdict).
     * Apply the path rules (spec 14.4) to every kind and the checks `open`
     * makes to a FILE. A FILE answered SEND or RESUME is open on return,
     * as after `open` (writes, views and `close` follow; RESUME's held
     * blocks are never written). A DIR or SYMLINK answered SEND is placed
     * on return (a directory's mode and mtime may wait until the session
     * ends, after its contents). SKIP keeps the existing file untouched. */
    int (*entry)(void *user, const aftp_entry_info *info, aftp_entry_verdict *out);
    /* Receiver, pipelined mode, optional (NULL: each verified file is
     * committed alone, close(id, AFTP_CLOSE_COMMIT)): make the `count`
     * files closed with AFTP_CLOSE_DEFER durable under their final names
     * together (one flush of their data, renames, one flush of each
     * directory), filling results[i] with AFTP_OK or the error of ids[i].
     * The engine sends a FILE_RESULT(NONE) only for a file committed here
     * (spec 9.14.3, group commit). */
    int (*commit_group)(void *user, const uint32_t *ids, size_t count, int *results);
    /* Sender, the server of a pull (spec 9.15), required there: the client
     * asks for `path` (its request's path number `index`, from 0;
     * NUL-terminated, untrusted text to resolve beneath the root this
     * client may read, spec 14.10). AFTP_OK: it is served: the entries
     * beneath it are added with aftp_sender_add_entry after this call
     * returns (with `flags`, AFTP_ENTRY_OVERWRITE | _RESUME | _SYNC |
     * _CHECKSUM as the client asked), and aftp_sender_finish follows once
     * every served path's entries are added. Otherwise the error that
     * refuses this path alone (AFTP_ERR_NOT_FOUND, AFTP_ERR_PATH_REJECTED,
     * AFTP_ERR_PERMISSION, ...), which the client is told. */
    int (*pull_path)(void *user, uint32_t index, const char *path, unsigned flags);
    /* Receiver, pipelined mode, optional, only with `commit_group` (NULL:
     * the group commit runs inside the engine's call): start the group
     * commit of `commit_group` and return at once, so that packets keep
     * flowing while the disk syncs. `ids` stays valid until the caller
     * reports the outcome with aftp_receiver_commit_done (results in the
     * order of ids). At most one group is started at a time; the files of
     * the next gather meanwhile. AFTP_OK: started; an error fails the
     * group's files at once. The engine still calls `commit_group` for
     * the last group at the session's end: it must wait for the group in
     * flight first (the storage's state is not to be shared). */
    int (*commit_start)(void *user, const uint32_t *ids, size_t count);
} aftp_storage_ops;

enum aftp_event_type {
    AFTP_EV_CONNECTED = 1, /* handshake complete */
    AFTP_EV_FILE_START,    /* file accepted by the receiver: info valid */
    AFTP_EV_FILE_END,      /* file finished: error (AFTP_OK when verified), digest */
    AFTP_EV_CLOSED,        /* session over: error says why (AFTP_OK: clean) */
    AFTP_EV_ENTRY_END,     /* an entry ended: verdict, error, bytes already held for RESUME */
    /* Receiver, the client of a pull: the server's verdict on one path of
     * the request (info->path, info->file_id = its number from 1): error
     * AFTP_OK when it is served, else why it is refused. Once per path. */
    AFTP_EV_PULL_PATH
};

typedef struct aftp_event {
    int type;                    /* enum aftp_event_type */
    /* CONNECTED: the peer's authenticated static X25519 public key
     * (AFTP_KEY_LEN bytes), or NULL for an unprotected session. */
    const uint8_t *peer_key;
    int error;                   /* aftp_error */
    const aftp_file_info *info;  /* FILE_START, FILE_END; valid during the callback */
    const uint8_t *digest;       /* FILE_END: AFTP_DIGEST_LEN bytes, or NULL */
    /* Human-readable detail, or NULL; valid during the callback. CLOSED:
     * why the session ended (the peer's reason, or this side's). FILE_END
     * of a failed file: what this side found (e.g. the two digests of a
     * verdict it cannot confirm), when it knows more than `error`. */
    const char *message;
    int verdict; /* ENTRY_END: enum aftp_verdict_kind */
    /* (Sender: an entry that ended before the receiver's verdict, e.g. the
     * session closed, reports AFTP_VERDICT_REFUSED with the error.) */
    uint64_t held_bytes; /* ENTRY_END: RESUME's bytes already there */
} aftp_event;

typedef void (*aftp_event_cb)(void *user, const aftp_event *ev);

enum aftp_state {
    AFTP_STATE_HANDSHAKE = 1,
    AFTP_STATE_TRANSFER,
    AFTP_STATE_CLOSING,  /* CLOSE sent or received; draining */
    AFTP_STATE_CLOSED
};

/* Counters for progress lines, benchmarks and tests. */
typedef struct aftp_stats {
    uint64_t packets_sent;
    uint64_t packets_received;
    uint64_t payload_bytes_sent;          /* DATA payload, first transmissions + repairs */
    uint64_t payload_bytes_retransmitted; /* repairs only (tail copies included: see the end) */
    uint64_t payload_bytes_received;      /* distinct blocks stored (receiver) */
    uint64_t duplicate_packets;           /* DATA for blocks already held (receiver) */
    uint64_t wire_bytes_sent;             /* whole datagrams */
    uint64_t wire_bytes_received;
    uint64_t srtt_ns;                     /* smoothed RTT (sender), 0 before the first sample */
    uint64_t min_rtt_ns;
    uint64_t pacing_rate_bps;             /* current pacing rate, bits of UDP payload per second */
    uint64_t packets_dropped;             /* malformed, foreign, unexpected or stale datagrams */
    /* Rate controller (sender; zero on the receiver and before a sample): */
    uint64_t delivery_rate_bps;           /* bottleneck estimate: max receive rate, wire bits/s */
    uint64_t loss_ppm;                    /* baseline random loss, parts per million */
    uint64_t recent_loss_ppm;             /* loss over the latest rate sample */
    uint64_t queue_delay_ns;              /* latest RTT above the path's minimum */
    uint64_t path_min_rtt_ns;             /* windowed minimum RTT the controller uses */
    uint64_t inflight_packets;            /* sent, not yet covered by a FEEDBACK */
    uint64_t inflight_cap_packets;        /* the controller's cap (UINT64_MAX: none) */
    uint64_t congestion_events;           /* times the controller backed off */
    int cipher;                           /* AFTP_WIRE_CIPHER_* in use (0: none) */
    uint64_t key_updates;                 /* key generations moved to, both directions */
    uint64_t auth_failures;               /* datagrams that failed to open */
    int cc_mode;                          /* enum aftp_cc_mode (common/aftp_cc.h): 0 fixed,
                                             1 startup, 2 drain, 3 probe bandwidth, 4 probe RTT */
    uint32_t max_datagram;                /* largest datagram of the session: the negotiated
                                             one once connected, else the own setting */
    /* Receiver's block map (spec 14.7): */
    uint64_t map_bytes;                   /* largest block map held this session, bytes */
    uint64_t beyond_window_packets;       /* DATA dropped beyond the map's window */
    /* The receiver's rate cap (spec 12.3, RATE_CAP), bits/s, 0: none: the
     * one the sender obeys on top of its own limits / the one the
     * receiver granted. */
    uint64_t rate_cap_bps;
    /* Appended (fields keep their places): of payload_bytes_retransmitted,
     * the tail's second copies (spec 9.9.1), redundancy the sender chose,
     * not repairs of losses. */
    uint64_t payload_bytes_copied;
} aftp_stats;

/* One outgoing datagram: `head` (in the caller's buffer) then `payload`
 * (borrowed from storage, NULL for packets without file data). A driver
 * sends the two as one datagram, e.g. two iovecs. In a protected session
 * DATA is sealed from storage into the caller's buffer: head only. */
typedef struct aftp_datagram {
    const uint8_t *head;
    size_t head_len;
    const uint8_t *payload;
    size_t payload_len;
} aftp_datagram;

/* ---- security (spec section 14) ----
 *
 * Protected sessions (the default) run a Noise IK handshake inside HELLO /
 * HELLO_ACK and then seal every packet with the negotiated AEAD. Both
 * engines need their own X25519 private key (`identity`); the sender also
 * the receiver's public key (`peer_key`, pinned), the receiver a policy that
 * admits clients by key. An unprotected session (AFTP_CIPHER_NONE) happens
 * only when both sides chose it explicitly: there is no fallback. */
#define AFTP_KEY_LEN 32

enum aftp_cipher_choice {
    AFTP_CIPHER_AUTO = 0,     /* AES-256-GCM where the CPU accelerates it, else ChaCha20-Poly1305 */
    AFTP_CIPHER_AES256GCM,    /* only AES-256-GCM */
    AFTP_CIPHER_CHACHA20POLY1305, /* only ChaCha20-Poly1305 */
    AFTP_CIPHER_NONE          /* no handshake, no protection: opt-in on both sides */
};

/* The receiver's admission policy; the engine copies the struct. */
typedef struct aftp_peer_policy {
    /* Is this client key admitted? AFTP_OK and psk filled (AFTP_KEY_LEN
     * zero bytes when no pre-shared key applies), or AFTP_ERR_UNKNOWN_PEER. */
    int (*lookup)(void *user, const uint8_t *client_key, uint8_t *psk);
    /* Message 1 authenticated with a 12-byte TAI64N timestamp: AFTP_OK and
     * remember it when the replay rule of spec section 14.2.4 accepts it
     * for this key (never accepted before, not older than the latest minus
     * a reordering window), AFTP_ERR_REPLAY otherwise (a replayed HELLO).
     * A server's own admission, decided here once the key is proved, may
     * also refuse it: AFTP_ERR_UNKNOWN_PEER (told CLOSE(UNAUTHORIZED)), or
     * AFTP_ERR_PERMISSION for a key that may not push (told
     * CLOSE(PERMISSION), spec section 14.2.5). NULL: no memory kept (the
     * engine then only rejects repeats within its own session). */
    int (*check_timestamp)(void *user, const uint8_t *client_key, const uint8_t *ts);
    void *user;
    /* Optional: the rate this client's sender must not exceed, in bits of
     * UDP payload per second (0: none), asked once per session when the
     * HELLO is accepted: after lookup and check_timestamp admitted
     * client_key, or with client_key NULL in an unprotected session. It
     * reaches the sender in the HELLO_ACK's RATE_CAP (spec section 12.3);
     * a client that did not announce it can honour one is refused with
     * CLOSE(LIMIT). NULL: no cap. */
    uint64_t (*rate_cap)(void *user, const uint8_t *client_key);
    /* Optional: may this client use `role` (enum aftp_role: push, pull)?
     * Asked once per session when the HELLO is accepted, as rate_cap is.
     * AFTP_OK, or AFTP_ERR_PERMISSION: the client is refused with
     * CLOSE(PERMISSION) ("this client key may not pull", spec 9.15.1).
     * NULL: every admitted client may. */
    int (*role_allowed)(void *user, const uint8_t *client_key, int role);
} aftp_peer_policy;

/* Fills buf with len random bytes (tests make handshakes deterministic). */
typedef void (*aftp_random_fn)(void *user, uint8_t *buf, size_t len);

typedef struct aftp_security_settings {
    int cipher;                  /* enum aftp_cipher_choice */
    const uint8_t *identity;     /* own X25519 private key, AFTP_KEY_LEN bytes (copied) */
    const uint8_t *peer_key;     /* sender: the receiver's public key (copied) */
    const uint8_t *psk;          /* sender: optional pre-shared key (copied), or NULL */
    aftp_peer_policy peers;      /* receiver: who is admitted */
    uint64_t unix_time_ns;       /* sender: wall-clock time at aftp_sender_new (handshake timestamp) */
    uint64_t key_update_packets; /* packets per key before a key update; 0: 2^22 */
    aftp_random_fn random;       /* NULL: the system's random source */
    void *random_user;
} aftp_security_settings;

/* ---- roles (spec sections 9.1, 9.15) ---- */

enum aftp_role {
    AFTP_ROLE_PUSH = 0, /* the client sends: sender = client, receiver = server */
    AFTP_ROLE_PULL = 1  /* the client receives: receiver = client, sender = server */
};

/* Most paths one pull request names (the wire's bound, spec 6.16). */
#define AFTP_PULL_MAX_PATHS 64u

/* What the client of a pull asks for (receiver settings' `pull`). The
 * request travels in one datagram that every path carries (1200 bytes):
 * its paths take 2 bytes each plus their length, 1156 bytes in all. */
typedef struct aftp_pull_request {
    const char *const *paths;  /* beneath the client's root on the server; copied */
    uint32_t path_count;       /* 1..AFTP_PULL_MAX_PATHS */
    unsigned flags;            /* AFTP_ENTRY_OVERWRITE | _RESUME | _SYNC | _CHECKSUM */
    uint64_t max_rate_bps;     /* the server's sender paces no faster; 0: no limit */
} aftp_pull_request;

/* ---- sender (client of a push, server of a pull) ---- */

/* How the sender chooses its rate (Aspera's policy names). */
enum aftp_cc_policy {
    AFTP_CC_FAIR = 0, /* fill the path, share it with TCP and other flows, small queue */
    AFTP_CC_FIXED,    /* pace at rate_bps whatever the path does */
    AFTP_CC_HIGH,     /* about twice a fair share: backs off only on a large queue */
    AFTP_CC_LOW       /* yield: backs off early and further than fair flows */
};

typedef struct aftp_sender_settings {
    uint32_t conn_id;            /* this endpoint's connection id: random, non-zero */
    uint64_t rate_bps;           /* FIXED: the pacing rate, bits of UDP payload per
                                  * second; other policies: caps the starting rate */
    uint16_t max_datagram;       /* largest datagram to send, >= AFTP_WIRE_MIN_DATAGRAM */
    uint64_t idle_timeout_ns;    /* silence from the peer that ends the session */
    uint64_t initial_rtt_ns;     /* RTT assumed before the first sample */
    const aftp_storage_ops *storage;
    aftp_event_cb on_event;
    void *user;                  /* passed to storage and event callbacks */
    int policy;                  /* enum aftp_cc_policy; default FAIR */
    uint64_t max_rate_bps;       /* never pace faster (any policy); 0 = no limit */
    uint64_t min_rate_bps;       /* never pace slower, even when congested; 0 = none */
    aftp_security_settings security; /* default: AUTO with no keys (aftp_sender_new then
                                      * fails with AFTP_ERR_BAD_KEY until keys are set) */
    uint32_t pipeline_window; /* 0: one-file mode; else the W proposed in PIPELINE (spec 12.3.2) */
    /* AFTP_ROLE_PUSH (default): the client of a push. AFTP_ROLE_PULL: the
     * server of a pull (spec 9.15): the first datagram fed must be the
     * client's HELLO; it needs security.identity and security.peers (as
     * a receiver's), pipeline_window (the largest W it runs) and
     * storage->pull_path; the policy's rate_cap and the client's request
     * lower max_rate_bps. */
    int role;
    /* Careful Resume (spec 13.2 item 6, 13.4): the bottleneck rate and min
     * RTT an earlier session measured on this path, to start from (both
     * 0, the default: a normal start). The caller vouches that they are
     * this path's and recent (io/store/aftp_pathmem.h keeps them). */
    uint64_t resume_rate_bps;
    uint64_t resume_rtt_ns;
    /* Non-zero: the first entries do not ride in the HELLO's message 1
     * (spec 12.3.4; default 0: they do, when the session is protected and
     * pipelined and entries were added before the first write), so names
     * and sizes never travel under the server's static key alone (no
     * forward secrecy for them, spec 14.2.8). Costs one round trip.
     * Last, so the fields before keep their places. */
    int no_early_entries;
} aftp_sender_settings;

AFTP_EXTERN void aftp_sender_settings_default(aftp_sender_settings *s);

/* Returns AFTP_OK and *out, or an error (invalid settings; AFTP_ERR_BAD_KEY
 * when protected without identity or peer_key; no memory). The handshake's
 * first message is built here, with security.unix_time_ns. */
AFTP_EXTERN int aftp_sender_new(const aftp_sender_settings *settings, uint64_t now_ns,
                                aftp_sender **out);
AFTP_EXTERN void aftp_sender_del(aftp_sender *s); /* NULL-safe */

/* Queue a file (sent in queue order). info->block_size 0 picks the largest
 * block that max_datagram allows. */
AFTP_EXTERN int aftp_sender_add_file(aftp_sender *s, const aftp_file_info *info);
/* Queue an entry of a pipelined session (spec 9.14): a FILE, DIR or
 * SYMLINK, offered in ENTRIES as the entry window allows. Entry ids are
 * info->file.file_id, 1, 2, 3 ... in the order added, with no gap.
 * info->file.block_size 0 picks as aftp_sender_add_file does. Memory is
 * bounded: at most settings.pipeline_window entries are held, from the
 * oldest that has not ended; beyond that AFTP_ERR_LIMIT, and every
 * AFTP_EV_ENTRY_END makes room for one more once its callback has
 * returned. Storage: `view` and `close` with the entry id
 * as file_id, for FILE entries only; `close` is called once per FILE when
 * it ends, whatever its verdict. A view that fails ends that entry alone
 * (aftp_sender_abandon): its events come at once, its slot is freed once
 * the receiver has confirmed.
 * Entries may be added before the handshake ends. When the receiver's
 * HELLO_ACK carries no PIPELINE (or pipeline_window is 0), the session is
 * one-file mode: each FILE entry is sent as aftp_sender_add_file would
 * send it (FILE_START, FILE_END), and a DIR or SYMLINK queued before ends
 * with AFTP_EV_ENTRY_END, error AFTP_ERR_PEER_REFUSED (the receiver does
 * not run pipelined mode); added after, it returns AFTP_ERR_PEER_REFUSED.
 * In a session that may be pipelined (pipeline_window > 0),
 * aftp_sender_add_file adds a FILE entry and follows these rules.
 * AFTP_ERR_INVALID_ARGUMENT for a bad entry (id out of order, kind, a
 * DIR or SYMLINK with a size or block size, a SYMLINK without target);
 * AFTP_ERR_INVALID_STATE after aftp_sender_finish or once closing. */
AFTP_EXTERN int aftp_sender_add_entry(aftp_sender *s, const aftp_entry_info *info);
/* No more files will be added: the session closes after the last one. */
AFTP_EXTERN void aftp_sender_finish(aftp_sender *s);

AFTP_EXTERN int aftp_sender_read(aftp_sender *s, uint64_t now_ns, const uint8_t *pkt, size_t len);
/* Returns 1 and fills *dg when a datagram is due, 0 when nothing may be sent
 * before aftp_sender_expiry() (pacing, waiting for the peer), or an error.
 * buf must hold max_datagram bytes. */
AFTP_EXTERN int aftp_sender_write(aftp_sender *s, uint64_t now_ns, uint8_t *buf, size_t cap,
                                  aftp_datagram *dg);
AFTP_EXTERN uint64_t aftp_sender_expiry(const aftp_sender *s);
AFTP_EXTERN int aftp_sender_handle_expiry(aftp_sender *s, uint64_t now_ns);
AFTP_EXTERN int aftp_sender_state(const aftp_sender *s);
AFTP_EXTERN int aftp_sender_error(const aftp_sender *s); /* why the session closed */
AFTP_EXTERN void aftp_sender_get_stats(const aftp_sender *s, aftp_stats *out);
/* Ask the engine to close with a CLOSE to the peer (user cancel). */
AFTP_EXTERN void aftp_sender_cancel(aftp_sender *s, uint64_t now_ns);
/* Changes max_rate_bps and min_rate_bps of a running session (an operator
 * turns a transfer down for the working day, or up for the night); they
 * hold from the next datagram on, and the controller keeps what it learnt
 * of the path. What the sender can track in flight was sized by
 * aftp_sender_new for the settings' max_rate_bps: a session created with
 * a low max_rate_bps does not go much faster when it is raised (create it
 * without one and lower it at once instead). AFTP_ERR_INVALID_ARGUMENT when
 * max_rate_bps (0: no limit) is below min_rate_bps. */
AFTP_EXTERN int aftp_sender_set_rate_limits(aftp_sender *s, uint64_t min_rate_bps,
                                            uint64_t max_rate_bps);
/* The receiver's cap on this sender changed to cap_bps (bits of UDP
 * payload per second, non-zero), replacing the one in force (RATE_CAP,
 * spec 12.3.1): what a push's client does on a RATE_UPDATE (spec 6.18),
 * and what a server calls on a pull's sender to give it its share of the
 * server's total rate. A pull's sender stays under the max_rate its client
 * asked for too. A lower cap holds from the next datagram on (every policy,
 * fixed and minimum rates included, spec 13.2); a higher one lets the
 * controller grow to it. Same thread as the engine's other calls.
 * AFTP_OK, or AFTP_ERR_INVALID_ARGUMENT for a cap of 0. */
AFTP_EXTERN int aftp_sender_set_rate_cap(aftp_sender *s, uint64_t cap_bps, uint64_t now_ns);
/* The application or driver found the active file unusable outside the
 * storage callbacks (e.g. AFTP_ERR_SOURCE_CHANGED: the source shrank
 * while a read of it was under way): the file ends with `error` (FILE_END)
 * and the session closes with CLOSE(the matching wire error), as when a
 * storage view fails. `reason` (copied, may be NULL) is the CLOSE's
 * reason text. Does nothing once the session is closing. Returns AFTP_OK,
 * or AFTP_ERR_INVALID_ARGUMENT when error is not a negative aftp_error. */
AFTP_EXTERN int aftp_sender_abort(aftp_sender *s, uint64_t now_ns, int error, const char *reason);
/* Pipelined mode (spec 9.14.3): the application or driver found the
 * source of entry `entry_id`, a FILE being sent, unusable outside the
 * storage callbacks (e.g. its size or mtime moved): that entry alone
 * ends, as when a storage view of it fails: FILE_END and ENTRY_END with
 * `error` during this call, `close` of its source, and an ABANDON to the
 * receiver; the session goes on. Its slot is freed (room for another
 * entry) once the receiver confirms with its FILE_RESULT. AFTP_OK;
 * AFTP_ERR_INVALID_STATE when the entry is not being sent (no verdict
 * yet, ended, a one-file session: use aftp_sender_abort);
 * AFTP_ERR_INVALID_ARGUMENT when error is not a negative aftp_error. */
AFTP_EXTERN int aftp_sender_abandon(aftp_sender *s, uint32_t entry_id, int error);

/* ---- receiver (server of a push, client of a pull) ---- */

typedef struct aftp_receiver_settings {
    uint32_t conn_id;            /* this endpoint's connection id: random, non-zero */
    uint16_t max_datagram;
    uint64_t idle_timeout_ns;
    uint64_t feedback_interval_ns; /* upper bound; the engine uses ~RTT/4 when it knows the RTT */
    const aftp_storage_ops *storage;
    aftp_event_cb on_event;
    void *user;
    uint64_t initial_rtt_ns;     /* RTT assumed until the handshake measures one */
    aftp_security_settings security; /* as for the sender: identity + peers, or NONE */
    /* Blocks the block map records ahead of the first missing block (its
     * memory is this / 8 bytes plus 1/64; rounded up to a multiple of 64).
     * DATA beyond it is dropped and looks lost to the sender: keep it well
     * above a sender's flight (2 x bandwidth-delay product, in blocks), or
     * each loss wastes up to a flight of DATA. */
    uint64_t map_window_blocks;  /* default AFTP_RECEIVER_MAP_WINDOW */
    uint32_t pipeline_window; /* 0: no pipelined mode; else the largest W accepted (needs storage->entry) */
    /* AFTP_ROLE_PUSH (default): the server of a push. AFTP_ROLE_PULL: the
     * client of a pull (spec 9.15): it sends the HELLO (needs
     * security.identity, peer_key and unix_time_ns, as a sender's), then
     * `pull`; pipeline_window and storage->entry are required. */
    int role;
    aftp_pull_request pull;
    /* Pull client, non-zero: the request does not ride in the HELLO's
     * message 1 (spec 12.3.4; default 0: it does, when the session is
     * protected and the request fits its 256 bytes), so the paths never
     * travel under the server's static key alone (no forward secrecy for
     * them, spec 14.2.8). Costs one round trip. */
    int no_early_request;
} aftp_receiver_settings;

/* 2^27 blocks: 16 MiB + 256 KiB of map per receiving session, whatever the
 * file's size; 176 GiB of data ahead of a missing block at the default
 * block size, far beyond what a sender has in flight. */
#define AFTP_RECEIVER_MAP_WINDOW (UINT64_C(1) << 27)

/* Pipelined mode, receiver side (spec 9.14): with pipeline_window W > 0
 * and storage->entry set, a client whose HELLO announces PIPELINE gets a
 * session with window min(its W, this W); any other client gets the
 * one-file session. Storage is asked to decide entries in id order; a
 * FILE accepted (SEND, RESUME) emits FILE_START, then FILE_END (error,
 * digest) when its FILE_RESULT is decided; every entry emits ENTRY_END
 * when it ends (verdict; error; for RESUME held_bytes). Verified files
 * are closed with AFTP_CLOSE_DEFER and committed by commit_group within
 * one feedback interval or when W/2 wait, else each with
 * AFTP_CLOSE_COMMIT. Memory is bounded by W: per entry its path and link
 * target, W queued FILE_RESULTs, W files waiting for the group commit;
 * the block map over the whole stream is map_window_blocks as in
 * one-file mode; one file is read back at a time (READY files, lowest id
 * first), plus one receiving file's held prefix hashed ahead (the lowest
 * FILE still receiving larger than AFTP_RECEIVER_VERIFY_STEP, one step per
 * aftp_receiver_handle_expiry while no READY file waits: one more digest
 * state), so a big file's read-back at the end is its last steps only. */

/* Verification (reading the stored file back to check its digest) goes in
 * steps of at most this many bytes, one per aftp_receiver_handle_expiry
 * call (the expiry is `now` while it runs), so a driver serves the socket
 * between steps. */
#define AFTP_RECEIVER_VERIFY_STEP (UINT64_C(8) << 20)

AFTP_EXTERN void aftp_receiver_settings_default(aftp_receiver_settings *s);
/* As aftp_sender_new; AFTP_ERR_BAD_KEY when protected without identity or
 * peers.lookup. One receiver serves one client: a driver makes one per
 * new HELLO source. */
AFTP_EXTERN int aftp_receiver_new(const aftp_receiver_settings *settings, uint64_t now_ns,
                                  aftp_receiver **out);
AFTP_EXTERN void aftp_receiver_del(aftp_receiver *r);

/* The server of a push: the first datagram fed must be the client's HELLO
 * (the client of a pull sends its own HELLO first, aftp_receiver_write). */
AFTP_EXTERN int aftp_receiver_read(aftp_receiver *r, uint64_t now_ns, const uint8_t *pkt,
                                   size_t len);
AFTP_EXTERN int aftp_receiver_write(aftp_receiver *r, uint64_t now_ns, uint8_t *buf, size_t cap,
                                    aftp_datagram *dg);
AFTP_EXTERN uint64_t aftp_receiver_expiry(const aftp_receiver *r);
AFTP_EXTERN int aftp_receiver_handle_expiry(aftp_receiver *r, uint64_t now_ns);
AFTP_EXTERN int aftp_receiver_state(const aftp_receiver *r);
AFTP_EXTERN int aftp_receiver_error(const aftp_receiver *r);
AFTP_EXTERN void aftp_receiver_get_stats(const aftp_receiver *r, aftp_stats *out);
AFTP_EXTERN void aftp_receiver_cancel(aftp_receiver *r, uint64_t now_ns);
/* The application ends the session with `error` (a negative aftp_error)
 * and `reason` (copied, may be NULL), sent in the CLOSE (the matching wire
 * error): a server refusing an authenticated client it cannot serve now
 * (CLOSE(LIMIT), spec 14.2.5). Files under way fail as with a cancel. Does
 * nothing once the session is closing. AFTP_OK, or
 * AFTP_ERR_INVALID_ARGUMENT when error is not a negative aftp_error. */
AFTP_EXTERN int aftp_receiver_abort(aftp_receiver *r, uint64_t now_ns, int error,
                                    const char *reason);
/* The group commit `commit_start` began has ended: rc AFTP_OK and
 * results[i] the outcome of its ids[i], or rc the error of the whole
 * group. Each file gets its FILE_RESULT now (spec 9.14.3); the next group,
 * gathered meanwhile, may start within this call. AFTP_ERR_INVALID_STATE
 * when no group is in flight. */
/* A server's new cap on this push client's sender, cap_bps bits of UDP
 * payload per second (non-zero): sent to the client in RATE_UPDATE (spec
 * 6.18) at once, then repeated about every second for the rest of the
 * session, so a lost datagram costs at most that delay. Only in a session
 * whose HELLO_ACK carried RATE_CAP (the admission capped this client,
 * aftp_peer_policy.rate_cap): the client announced it obeys caps.
 * Same thread as the engine's other calls. AFTP_OK (also when the cap is
 * the one in force: nothing is sent), AFTP_ERR_INVALID_ARGUMENT for a cap
 * of 0, AFTP_ERR_INVALID_STATE in a pull's receiver or a session without
 * RATE_CAP. */
AFTP_EXTERN int aftp_receiver_set_rate_cap(aftp_receiver *r, uint64_t cap_bps, uint64_t now_ns);
AFTP_EXTERN int aftp_receiver_commit_done(aftp_receiver *r, uint64_t now_ns, int rc,
                                          const int *results);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_ENGINE_H */
