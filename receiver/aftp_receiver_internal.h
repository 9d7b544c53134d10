/*
 * What the receiver engine's two files share (not an API): the engine's
 * state, and the few steps both the one-file session (aftp_receiver.c)
 * and pipelined mode (aftp_receiver_pipe.c, spec section 9.14) use.
 */
#ifndef AFTP_RECEIVER_INTERNAL_H
#define AFTP_RECEIVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_blockmap.h"
#include "common/aftp_digest.h"
#include "common/aftp_hello_client.h"
#include "common/aftp_hello_server.h"
#include "common/aftp_rtt.h"
#include "common/aftp_session.h"
#include "common/aftp_stream.h"
#include "proto/aftp_wire.h"

#define NS_PER_MS UINT64_C(1000000)
#define MIN_FEEDBACK_NS NS_PER_MS           /* section 9.8: never more often */
#define VERIFY_CHUNK (UINT64_C(1) << 20)    /* one storage view while verifying */
/* Section 9.14.3: the least a group commit waits for more files. A commit
 * costs a file system sync or two whatever the group's size (ms on a
 * disk), so on a short path, where the feedback interval is 1 ms, groups
 * of one or two files would make the sync the cost of every file. */
#define GROUP_MIN_NS (10 * NS_PER_MS)
/* Section 6.18: the current RATE_UPDATE goes again this long after the
 * last copy, so a lost one delays the cap by about this much at most. */
#define RATE_UPDATE_REPEAT_NS (1000 * NS_PER_MS)
/* Section 9.11, a pull client's quick close: each CLOSE copy goes with
 * the FILE_RESULTs that left within a PTO before it, at most this many. */
#define CLOSE_RESULTS_MAX 8u

enum file_phase {
    FILE_NONE,  /* no file offered yet */
    FILE_OPEN,  /* accepted, receiving blocks */
    FILE_ENDED  /* refused, verified or failed: the answer is kept for repeats */
};

/* What the engine keeps of one entry of a pipelined session (the entry
 * table, common/aftp_stream.h, keeps its place in the stream). */
enum pipe_phase {
    PIPE_OFFERED,   /* known, its verdict not decided yet */
    PIPE_RECEIVING, /* a FILE accepted (SEND, RESUME): blocks arrive */
    PIPE_READY,     /* FILE_DONE in, every block held: to be read back */
    PIPE_VERIFYING, /* being read back (r->verify_id) */
    PIPE_DEFERRED,  /* verified, closed with AFTP_CLOSE_DEFER: in the group commit */
    PIPE_ENDED      /* its verdict or FILE_RESULT sent: kept for repeats */
};

typedef struct pipe_entry {
    uint32_t id;            /* 0: slot unused */
    uint8_t phase;          /* enum pipe_phase */
    uint8_t verdict;        /* wire verdict, once decided */
    uint16_t wire_error;    /* REFUSED's error, then the FILE_RESULT's */
    int done;               /* FILE_DONE arrived */
    int has_result;         /* ended with a FILE_RESULT (repeated FILE_DONEs get it) */
    int closed;             /* storage closed the file: its held list is gone */
    int end_sent;           /* the verdict or FILE_RESULT that ended it left */
    uint64_t result_ns;     /* when its latest FILE_RESULT left */
    int unmarked;           /* holds blocks beyond the map's window, not marked yet */
    char *path;             /* path, NUL, target, NUL: what info points at */
    aftp_entry_info info;
    uint64_t base, blocks;  /* its stream blocks [base, base + blocks) */
    uint64_t missing;       /* blocks neither received nor held by the verdict */
    const aftp_block_range *held; /* RESUME: storage's list, usable part */
    size_t held_count;
    uint64_t held_blocks;
    /* Flag HOLES: the file's hole blocks (owned), held from the verdict
     * on, and the same as bytes for storage (info.holes). */
    aftp_block_range *holes;
    aftp_byte_range *hole_bytes;
    size_t hole_count;
    uint8_t expected[AFTP_DIGEST_LEN];
    uint8_t digest[AFTP_DIGEST_LEN];
} pipe_entry;

struct aftp_receiver {
    aftp_session ss;
    aftp_receiver_settings set;
    aftp_rtt rtt;           /* one sample: HELLO_ACK to the next packet */
    aftp_digest *hash;

    aftp_hello_server srv;  /* push: the handshake as the server (section 9.3) */

    /* Pull (section 9.15): this receiver is the client. */
    int client;             /* settings.role is AFTP_ROLE_PULL */
    aftp_hello_client cli;
    int hello_due;
    int request_due;
    int replied;            /* the PULL_REPLY came */
    unsigned hellos_sent;
    uint64_t hello_sent_ns;
    uint64_t pull_deadline; /* the HELLO's, then the PULL_REQUEST's resend */
    unsigned pull_backoff;
    char *pull_text;        /* the request's paths, each NUL-terminated */
    aftp_wire_path *pull_paths; /* the same, as the wire carries them */
    uint32_t window;        /* the session's entry window W (PIPELINE), 0: one-file mode */
    int pull_end;           /* the server sends PULL_END (its HELLO_ACK had it, 12.3.5) */
    int end_known;          /* PULL_END arrived: the session's entries are 1..end_count */
    uint32_t end_count;
    uint32_t ended_below;   /* entries below ended, their end sent (aftp_rpipe_all_ended) */
    uint32_t grouped_below; /* entries below ended or in the group commit */
    uint32_t close_results[CLOSE_RESULTS_MAX]; /* the quick close's FILE_RESULT copies */
    uint32_t close_result_count;
    uint32_t close_result_next; /* the next to go before the next CLOSE copy */

    /* RATE_UPDATE (section 6.18): the cap told the client after RATE_CAP. */
    uint64_t cap_bps;       /* 0: none yet, the HELLO_ACK's RATE_CAP holds */
    uint64_t cap_seq;
    int cap_due;
    uint64_t cap_deadline;  /* its next repeat */

    /* The current (latest offered) file. */
    int phase;
    aftp_file_info info;    /* info.path points at path */
    char *path;
    uint64_t block_count;
    aftp_blockmap held;     /* sliding window: memory fixed by settings (14.7) */
    uint64_t scan_hi;       /* highest block received + 1 */
    int done_received;
    uint8_t expected[AFTP_DIGEST_LEN];
    int verifying;          /* every block held and FILE_DONE in: finishing the read-back */
    uint64_t verified;      /* bytes of the stored file read back and hashed so far */
    int reply_due;
    uint16_t reply_error;
    char refusal[224];      /* why the offer was refused, when the engine refused it */
    int result_due;
    int result_sent;        /* a FILE_RESULT went out for this file (section 9.6) */
    uint16_t result_error;
    uint8_t result_digest[AFTP_DIGEST_LEN];
    uint64_t resend_deadline; /* FILE_RESULT retransmission (section 9.10) */
    unsigned backoff;

    /* FEEDBACK (section 9.8). */
    int has_largest;
    uint64_t largest_pn;
    uint64_t largest_pn_ns;
    uint64_t data_packets;
    uint64_t data_new;      /* of them, those that brought a block not held before */
    int feedback_armed;
    int feedback_due;
    uint64_t feedback_deadline;
    int feedback_sent;      /* for the current file */
    uint64_t last_feedback_ns;
    uint64_t scan_cursor;   /* where the next FEEDBACK's list starts */
    aftp_wire_range *ranges;
    size_t max_ranges;

    /* Pipelined mode (section 9.14), when window != 0; `held` then maps
     * the stream. */
    aftp_stream stream;
    pipe_entry *pe;           /* W slots: entry id i in slot i mod W... */
    uint32_t pe_cap;          /* ...of which the first pe_cap are allocated: grown (doubling) to the
                               * highest slot used, so a session of few entries holds few */
    uint32_t decide_next;     /* the next id storage decides (verdicts in id order) */
    uint32_t verdicts_from;   /* verdicts of ids [verdicts_from, decide_next) wait to leave */
    uint64_t verdicts_deadline;
    uint64_t decide_retry_ns; /* storage answered AFTP_STORAGE_WAIT for decide_next, or
                               * early entries wait for their first decision: when to
                               * ask (0: no entry waits for storage) */
    int early_decide;         /* message 1's entries may be decided before TRANSFER */
    uint32_t repeat_lo, repeat_hi; /* a repeated ENTRIES' ids to answer (lo > hi: none) */
    uint64_t done_end;        /* end of the highest entry whose FILE_DONE arrived */
    uint32_t *results;        /* ring of W ids whose FILE_RESULT is due */
    uint32_t results_head, results_len;
    uint32_t *group;          /* W ids verified and waiting for the group commit */
    int *group_results;
    uint32_t group_len;
    uint64_t group_deadline;
    uint32_t *flight;         /* the ids of the group commit_start began */
    uint32_t flight_len;      /* 0: no group in flight */
    uint32_t verify_id;       /* the file being read back, 0: none */
    uint32_t ready_count;     /* files waiting to be read back */
    /* Section 9.10, the read-back ahead: the lowest FILE still receiving
     * that is larger than one step has its contiguous held prefix hashed
     * while its data arrives, so only the rest is read once it is READY. */
    aftp_digest *prefix_hash;
    uint32_t prefix_id;       /* the entry followed, 0: none yet */
    uint32_t prefix_next;     /* the entries below were passed over: the look for one goes on here */
    uint64_t prefix_blocks;   /* its blocks from base all held, as far as the last look */
    uint64_t prefix_bytes;    /* of them, the bytes hashed into prefix_hash */
    int idle_held;            /* the idle timer held by that work (aftp_rpipe_hold_idle) */
    uint64_t answered_ns;     /* when the latest VERDICTS or FILE_RESULT left */
    int answered;             /* one left (answered_ns is set; 0 is a time too) */
    uint32_t mark_lo;         /* lowest entry flagged unmarked, 0: none */
    uint64_t marked_end;      /* the map's window end when marks were last applied */
    aftp_wire_verdict *vrecs; /* one VERDICTS' records and held ranges */
    size_t max_vrecs;
    aftp_wire_range *vranges;
    size_t max_vranges;
};

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* ---- aftp_receiver.c, for pipelined mode ---- */

/* ~RTT/4 once the handshake measured the RTT, within [1 ms, setting]. */
uint64_t aftp_recv_feedback_interval(const aftp_receiver *r);
/* FEEDBACK no earlier than `earliest` after the previous one. */
void aftp_recv_schedule_feedback(aftp_receiver *r, uint64_t earliest);
void aftp_recv_start_closing(aftp_receiver *r, int error, uint16_t wire_error);
/* CLOSE(PROTOCOL, reason): the peer broke the protocol. */
void aftp_recv_close_protocol(aftp_receiver *r, const char *reason);
/* Section 9.6: a block must fit one DATA datagram (refusal text kept). */
int aftp_recv_check_block_size(aftp_receiver *r, uint32_t block_size);
/* Section 9.5: 1 when stored, 0 when not wanted, or storage's error. */
int aftp_recv_store_block(aftp_receiver *r, const aftp_wire_data *d, uint64_t file_offset);
/* Section 9.10's read-back: file_id's stored bytes [*done, end) hashed
 * into d through storage.view, a bounded chunk per view; *done follows.
 * AFTP_OK, or storage's error (*done where it stopped). */
int aftp_recv_hash_stored(aftp_receiver *r, uint32_t file_id, aftp_digest *d, uint64_t *done,
                          uint64_t end);
int aftp_recv_encode_file_result(aftp_receiver *r, uint32_t file_id, uint16_t wire_error,
                                 const uint8_t *digest, uint8_t *buf, size_t cap,
                                 aftp_datagram *dg);

/* Session over: open files discarded (verified ones committed), CLOSED. */
void aftp_recv_close_now(aftp_receiver *r, int error);
/* The local result of the peer's CLOSE (section 9.11): its mapped error,
 * and PEER_CLOSED for a CLOSE(NONE) while a file is in progress. */
int aftp_recv_peer_close_error(aftp_receiver *r, const aftp_wire_close *c);

/* ---- aftp_receiver_pull.c: the client of a pull (section 9.15) ---- */

/* The request copied, the HELLO built: AFTP_OK, INVALID_ARGUMENT for a
 * request that breaks 6.16's bounds, BAD_KEY, NO_MEMORY. */
int aftp_rpull_init(aftp_receiver *r);
void aftp_rpull_free(aftp_receiver *r);
/* Section 5.3: the types a pull's client receives. */
int aftp_rpull_receives(const aftp_receiver *r, uint8_t type);
/* A packet accepted: 1 when the pull took it (the handshake, the reply,
 * what comes before the reply), 0 for the pipelined receiver. */
int aftp_rpull_on_packet(aftp_receiver *r, const aftp_wire_packet *p);
/* What the pull has to send, 0: nothing; else AFTP_WIRE_HELLO or
 * AFTP_WIRE_PULL_REQUEST, encoded by aftp_rpull_encode. */
uint8_t aftp_rpull_due(const aftp_receiver *r);
int aftp_rpull_encode(aftp_receiver *r, uint8_t type, uint8_t *buf, size_t cap,
                      aftp_datagram *dg);
uint64_t aftp_rpull_expiry(const aftp_receiver *r, uint64_t t);
/* Section 9.15.5: after PULL_END, once every entry ended, the quick close. */
void aftp_rpull_check_end(aftp_receiver *r);
void aftp_rpull_handle_expiry(aftp_receiver *r);

/* ---- aftp_receiver_pipe.c: pipelined mode ---- */

/* The session's state for window r->window: AFTP_OK or NO_MEMORY (then
 * nothing is kept). aftp_rpipe_free is safe on a receiver without it. */
int aftp_rpipe_init(aftp_receiver *r);
void aftp_rpipe_free(aftp_receiver *r);
/* Session over: open files discarded, verified ones committed. */
void aftp_rpipe_close_all(aftp_receiver *r, int error);
/* 1 while an entry's file is still arriving or being read back. */
int aftp_rpipe_in_progress(const aftp_receiver *r);
/* The slot of entry id, or NULL when it holds another (or none). */
pipe_entry *aftp_rpipe_slot(const aftp_receiver *r, uint32_t id);
/* The accepted, unended file a DATA belongs to, or NULL (drop it). */
pipe_entry *aftp_rpipe_data_entry(const aftp_receiver *r, uint32_t file_id, uint64_t block,
                                  size_t payload_len);
void aftp_rpipe_on_entries(aftp_receiver *r, const aftp_wire_entries *en);
void aftp_rpipe_on_early_entries(aftp_receiver *r, const aftp_wire_entries *en);
void aftp_rpipe_on_data(aftp_receiver *r, const aftp_wire_data *d);
void aftp_rpipe_on_file_done(aftp_receiver *r, const aftp_wire_file_done *d);
void aftp_rpipe_on_abandon(aftp_receiver *r, const aftp_wire_abandon *a);
/* Before choosing output: drops answers whose entry is gone. */
void aftp_rpipe_prune(aftp_receiver *r);
/* Every entry 1..count ended and its end (verdict or FILE_RESULT) left,
 * with nothing queued or at work: the session has nothing more to say. */
int aftp_rpipe_all_ended(aftp_receiver *r, uint32_t count);
/* PULL_END arrived: a group no other file can join commits now. */
void aftp_rpipe_end_known(aftp_receiver *r);
/* One of the quick close's FILE_RESULT copies (r->close_results). */
int aftp_rpipe_encode_close_result(aftp_receiver *r, uint8_t *buf, size_t cap,
                                   aftp_datagram *dg);
/* aftp_receiver_commit_done's work: the group in flight ended. */
int aftp_rpipe_commit_done(aftp_receiver *r, int rc, const int *results);
/* Before the idle timer is looked at: files the sender finished and the
 * receiver is still reading back or committing hold it. */
void aftp_rpipe_hold_idle(aftp_receiver *r);
int aftp_rpipe_verdicts_due(const aftp_receiver *r);
int aftp_rpipe_encode_verdicts(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg);
int aftp_rpipe_encode_result(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg);
/* t, or earlier when a pipelined timer is due sooner. */
uint64_t aftp_rpipe_expiry(const aftp_receiver *r, uint64_t t);
void aftp_rpipe_handle_expiry(aftp_receiver *r);

#endif /* AFTP_RECEIVER_INTERNAL_H */
