/*
 * Client side of a push transfer: local files to one receiver, in one
 * session, over a real UDP socket (source mapping + sender engine +
 * datapath loop). Files are opened one at a time: the next one is opened
 * and queued (file ids 1, 2, 3 ..., spec 9.6) once the previous one has
 * its verdict, so a send of many files holds one mapping at a time. The
 * first file that fails ends the session.
 */
#ifndef AFTP_PUSH_H
#define AFTP_PUSH_H

#include <stdint.h>
#include <sys/socket.h>

#include "aftp_io.h"

/* A file's verdict, for aftp_push_opts.on_file_end; valid during the call. */
typedef struct aftp_push_file_end {
    size_t index;          /* in aftp_push_opts.files */
    const char *name;      /* the name offered to the receiver */
    uint64_t size;
    uint32_t block_size;   /* as offered; 0 when the file was not offered */
    int started;           /* the receiver accepted the offer (FILE_START) */
    int error;             /* AFTP_OK: delivered and verified */
    const uint8_t *digest; /* XXH3-128 both sides agree on; NULL unless verified */
    const char *message;   /* why it failed, never NULL ("" when the error says all) */
    /* The session's counters now. Payload counters cover exactly the
     * files up to this one: the next file is queued only after this call. */
    const aftp_stats *stats;
} aftp_push_file_end;

/* Pipelined mode: an entry was accepted or ended, for
 * aftp_push_opts.on_entry; valid during the call. */
typedef struct aftp_push_entry {
    int ended;             /* 0: the receiver accepted a FILE (SEND or RESUME); 1: it ended */
    size_t index;          /* the SRC in aftp_push_opts.files it came from */
    uint32_t id;           /* entry id, 1, 2, 3 ... */
    int kind;              /* enum aftp_entry_kind */
    const char *path;      /* its path at the receiver, relative */
    uint64_t size;         /* a FILE's bytes; 0 for the other kinds */
    int verdict;           /* ended: enum aftp_verdict_kind */
    int error;             /* ended: AFTP_OK, or why it failed */
    uint64_t held_bytes;   /* RESUME: bytes the receiver already held */
    uint64_t accepted_ns;  /* when the FILE was accepted; 0 if never */
    const uint8_t *digest; /* a verified FILE's XXH3-128, else NULL */
    const char *message;   /* why it failed, never NULL ("" when the error says all) */
    const aftp_stats *stats; /* the session's counters now */
    int local;             /* the walk could not read it here (no id: never offered), or
                            * its source failed here once sent (abandoned, spec 9.14.3);
                            * the message names the file */
    /* The session failed under the entry before the engine ended it (the
     * run's result, its session_error set), else NULL. */
    const struct aftp_push_result *session;
} aftp_push_entry;

typedef struct aftp_push_opts {
    const char *const *files;  /* sent in this order, in one session */
    size_t file_count;         /* at least 1 */
    /* 0: one-file mode, `files` are files. Else pipelined mode (spec 9.14)
     * with this entry window: `files` are SRC arguments walked by
     * aftp_tree (directories with their contents), each entry offered with
     * `entry_flags` (AFTP_ENTRY_SYNC ...) as the window frees. on_file_end
     * is not called in this mode: hooks.on_event sees each ENTRY_END, and
     * on_entry each entry with the SRC it came from. */
    uint32_t pipeline_window;
    unsigned entry_flags;
    /* Pipelined mode: links inside a tree are sent as links (target
     * literal); 0: skipped with a notice (hooks.on_warning). */
    int send_links;
    /* optional, pipelined mode: a FILE accepted, and every entry's end. */
    void (*on_entry)(void *app, const aftp_push_entry *e);
    const struct sockaddr *peer;
    socklen_t peer_len;
    uint64_t rate_bps;         /* FIXED: the rate; adaptive policies: the starting cap */
    int policy;                /* enum aftp_cc_policy */
    uint64_t max_rate_bps;     /* 0: none */
    uint64_t min_rate_bps;     /* 0: none */
    uint64_t idle_timeout_ns; /* 0: the engine's default */
    uint16_t max_datagram;     /* largest datagram to send; 0: AFTP_IO_DATAGRAM */
    /* Keys (borrowed) and cipher; unix_time_ns is set here from the
     * wall clock when the session starts. */
    aftp_security_settings security;
    /* The path memory file (io/store/aftp_pathmem.h): a session starts
     * from what an earlier one measured on the same path, and leaves what
     * it measured; NULL: none. */
    const char *path_memory_file;
    /* Non-zero: no entry rides in the handshake (aftp_sender_settings). */
    int no_early_entries;
    aftp_io_hooks hooks;
    /* optional: a file has its verdict (after the engine's FILE_END went to
     * hooks.on_event), or could not be opened (its error and message are
     * the local ones, res->io.phase is LOCAL), or the run failed while at
     * it (before its offer: the run's error and message). Called once for
     * each file up to the first failure; the files after it get no call. */
    void (*on_file_end)(void *app, const aftp_push_file_end *fe);
} aftp_push_opts;

/* A server that cannot open our HELLO (it holds another key than the one
 * pinned for it) stays silent by design (spec 14.2.5). When the handshake
 * of a protected session has not completed this long after the first
 * HELLO (or half the idle timeout, if shorter), the client asks the server
 * for its key (spec 14.9) alongside, as a diagnosis: an answer with
 * another key ends the attempt at once instead of at the idle timeout.
 * The answer is not authenticated and is used for nothing else. */
#define AFTP_PUSH_KEY_PROBE_NS UINT64_C(2000000000)

/* What the key request of an unanswered HELLO learnt. */
enum aftp_push_key_answer {
    AFTP_PUSH_KEY_NO_ANSWER, /* not asked, or no answer */
    AFTP_PUSH_KEY_PINNED,    /* the pinned key: the server is there, yet ignores the HELLO */
    AFTP_PUSH_KEY_OTHER      /* another key (server_key): io.error is AFTP_ERR_AUTH */
};

typedef struct aftp_push_result aftp_push_result;
struct aftp_push_result {
    aftp_io_result io;
    /* enum aftp_push_key_answer. Unauthenticated: a hint for the user,
     * never a key to trust. */
    int key_answer;
    uint8_t server_key[AFTP_KEY_LEN];
    /* Pipelined mode: what the walk skipped here, each with a notice
     * (FIFOs, devices, sockets, bad names, unreadable, links unless
     * send_links). */
    uint64_t skipped_locally;
    /* Pipelined mode: the session's own end (AFTP_OK when it closed
     * cleanly, whatever its entries' verdicts); io.error is the first
     * failed entry's error, or this. */
    int session_error;
    /* AFTP_ERR_SOURCE_CHANGED: io.message names the source and what
     * changed (else it could not tell which source it was). */
    int changed_named;
};

/* Sends o->files and returns res->io.error: AFTP_OK when every file was
 * delivered and verified, else the first failure (its detail in
 * res->io.message). */
int aftp_push_run(const aftp_push_opts *o, aftp_push_result *res);

#endif /* AFTP_PUSH_H */
