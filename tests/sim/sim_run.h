/*
 * Whole transfers between a sender and a receiver engine over two
 * simulated links on a virtual clock: no sockets, no real time.
 */
#ifndef SIM_RUN_H
#define SIM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_handshake.h"
#include "sim_link.h"
#include "sim_storage.h"

#define SIM_MS UINT64_C(1000000)
#define SIM_S (1000 * SIM_MS)

typedef struct sim_cfg {
    uint64_t file_size;
    int nfiles;
    uint32_t block_size;       /* 0: the engine's choice */
    uint64_t rate_bps;         /* sender pacing rate */
    int policy;                /* sender rate policy; AFTP_CC_FIXED by default, so
                                * rate_bps is the rate */
    uint16_t max_datagram;
    sim_link_cfg fwd;          /* sender -> receiver */
    sim_link_cfg rev;          /* receiver -> sender */
    uint64_t seed;
    uint64_t idle_timeout_ns;
    uint64_t receiver_dies_at; /* the endpoint stops (no input, no output); */
    uint64_t sender_dies_at;   /* AFTP_NO_EXPIRY: never */
    uint64_t sender_cancels_at;
    uint64_t receiver_cancels_at; /* aftp_receiver_cancel then (AFTP_NO_EXPIRY: never) */
    int sender_abort_error;    /* non-zero: at sender_cancels_at the sender aborts
                                * with this error (aftp_sender_abort), not cancels */
    int open_error;            /* receiver storage refuses the open */
    int64_t corrupt_offset;    /* receiver storage corrupts this byte */
    uint64_t time_limit_ns;    /* give up (the test then fails) */
    /* Sees every datagram the reverse link delivers to a live sender,
     * before the sender reads it, and drops it when it returns 0 (NULL:
     * none). */
    int (*rev_tap)(void *ctx, uint64_t now, const uint8_t *pkt, size_t len);
    void *rev_tap_ctx;
    /* Sees every datagram a live sender writes, when it writes it (NULL:
     * none): what the sender emits, before the link shapes it. */
    void (*fwd_tap)(void *ctx, uint64_t now, const aftp_datagram *dg);
    void *fwd_tap_ctx;
    /* Sees every datagram a live sender writes, after fwd_tap, and drops
     * it when it returns 0 (NULL: none): a chosen packet lost. */
    int (*fwd_filter)(void *ctx, const aftp_datagram *dg);
    void *fwd_filter_ctx;
    int cipher;                /* enum aftp_cipher_choice of both sides: AUTO (the
                                * default, protected) or NONE for a plain run */
    uint64_t key_update_packets; /* both sides; 0: the engine's default */
    /* Adjusts the engine settings before the engines are made (NULL: none). */
    void (*tune)(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r);
    void *tune_ctx;
    /* Adds the sender's entries and shapes the storage's files to match
     * (NULL: nfiles files of file_size through aftp_sender_add_file);
     * aftp_sender_finish follows. */
    void (*feed)(void *ctx, sim_storage *st, aftp_sender *snd);
    void *feed_ctx;
    /* Instead of `feed`, for a tree larger than the sender's entry window:
     * called at every step while the sender lives, adds entries as the
     * sender takes them (aftp_sender_add_entry's LIMIT: at a later step);
     * returns 1 once the last is added, and aftp_sender_finish follows
     * (once). Takes feed_ctx. */
    int (*refill)(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now);
    /* Called at every step, before the engines' timers and output, while
     * both live (NULL: none): a test acts on the engines mid-run (a
     * server's new cap, a datagram held back and delivered late). */
    void (*step)(void *ctx, aftp_sender *snd, aftp_receiver *rcv, uint64_t now);
    void *step_ctx;
} sim_cfg;

typedef struct sim_result {
    sim_storage st;
    sim_side snd_side, rcv_side;
    int snd_state, rcv_state;
    int snd_error, rcv_error;
    aftp_stats snd, rcv;
    uint64_t fwd_data_lost;    /* DATA payload bytes the forward link lost */
    uint64_t fwd_duplicated;
    uint64_t rcv_view_max;     /* most bytes the receiver read back in one engine call */
    uint64_t end_ns;           /* virtual time the run stopped */
    int stuck;                 /* the loop stopped making progress */
    uint64_t clock;
} sim_result;

/* Engine settings wired to the in-memory storage and event recorders of
 * the two sides (defaults otherwise; ids 0x11111111 and 0x22222222), and
 * a protected session (cipher AUTO) between the fixed sim keys below: the
 * receiver admits sim_client_public only, handshakes use a deterministic
 * random source. */
void sim_engine_settings(aftp_sender_settings *s, sim_side *snd_side, aftp_receiver_settings *r,
                         sim_side *rcv_side);
/* The fixed key pairs (private keys are 32 x 0xC1 and 32 x 0x5E). */
extern const uint8_t sim_client_secret[AFTP_KEY_LEN], sim_server_secret[AFTP_KEY_LEN];
const uint8_t *sim_client_public(void);
const uint8_t *sim_server_public(void);
/* The sim receiver's admission policy: sim_client_public, no psk. */
int sim_admit_client(void *user, const uint8_t *client_key, uint8_t *psk);
/* Deterministic bytes (a counter through splitmix64) for handshakes. */
void sim_random(void *user, uint8_t *buf, size_t len);

/* 100 Mbit/s paced sender over a 200 Mbit/s, 20 ms one-way path with a
 * 1 MB queue, no loss, 3 MB file, 5 s idle timeout, 120 s limit. */
void sim_cfg_default(sim_cfg *c);
/* Runs until both sides are closed (or dead) or the time limit. */
void sim_run(const sim_cfg *cfg, sim_result *out);
void sim_result_free(sim_result *r);
/* Asserts (cmocka) that the run ended cleanly: not stuck, both sides
 * closed with AFTP_OK (their messages printed when not). */
void sim_expect_clean_end(const sim_result *r);
/* Prints one line of figures for the run. */
void sim_report(const char *name, const sim_cfg *cfg, const sim_result *r);

/* What a sender emitted once its HELLO was out (before it, no cap was
 * known): (time, bytes) per datagram, recorded by sim_emitted_record as a
 * fwd_tap (ctx: the sim_emitted, zeroed to start). */
typedef struct sim_emitted {
    uint64_t *at, *bytes;
    size_t count, cap;
} sim_emitted;
void sim_emitted_record(void *ctx, uint64_t now, const aftp_datagram *dg);
/* The most bytes emitted within any window_ns inside [from, to). */
uint64_t sim_emitted_busiest(const sim_emitted *e, uint64_t window_ns, uint64_t from,
                             uint64_t to);
void sim_emitted_free(sim_emitted *e);

/* When a sender's first HELLO and first DATA left (virtual clock),
 * recorded by sim_first_record as a fwd_tap (ctx: the sim_first, zeroed
 * to start). */
typedef struct sim_first {
    uint64_t hello_at, data_at;
    int has_hello, has_data;
} sim_first;
void sim_first_record(void *ctx, uint64_t now, const aftp_datagram *dg);
/* The offset in a HELLO datagram of its extension TLV of this type, 0
 * when it has none (or is no HELLO). */
size_t sim_hello_ext_at(const uint8_t *pkt, size_t len, uint16_t type);

/* A server's memory of its one client's latest handshake timestamp (spec
 * 14.2.4): sim_remember_timestamp as peers.check_timestamp, its user the
 * sim_ts_memory, zeroed to start. */
typedef struct sim_ts_memory {
    int has;
    uint8_t last[AFTP_HS_TIMESTAMP_LEN];
} sim_ts_memory;
int sim_remember_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts);

/* A whole transfer over a WAN: the controller's default policy (FAIR)
 * over a link of link_bps, rtt_ms round trip, a queue of one
 * bandwidth-delay product, `loss` on the forward link only; 600 s limit. */
void sim_cfg_wan(sim_cfg *c, uint64_t link_bps, uint64_t rtt_ms, double loss);

/* For a sim_cfg tune: the pair runs a pull (spec 9.15). The sender is the
 * server, its storage `server_ops` (sim_sender_storage with this
 * pull_path), the receiver the client asking `request`; both run entry
 * window `window`, and the keys change ends with the roles. */
void sim_tune_pull(aftp_sender_settings *s, aftp_receiver_settings *r, aftp_storage_ops *server_ops,
                   int (*pull_path)(void *user, uint32_t index, const char *path, unsigned flags),
                   uint32_t window, const aftp_pull_request *request);

#endif /* SIM_RUN_H */
