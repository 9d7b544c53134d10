/*
 * In-memory storage for the simulated engines: the sender views a source
 * buffer of seeded bytes, the receiver writes into a destination buffer.
 * A file above SIM_SYNTHETIC_ABOVE bytes (up to the wire's 2^62) is
 * synthetic instead: its bytes repeat a seeded pattern of a little over
 * 4 MiB, which the sender views and the receiver's writes are compared
 * with (then forgotten), so a 16 TiB file costs a few MiB.
 * It counts writes per block (each must be written exactly once) and the
 * writes of payloads opened in place, can refuse the open or the lending
 * of a block's bytes, or corrupt one byte, and records commits and
 * discards.
 */
#ifndef SIM_STORAGE_H
#define SIM_STORAGE_H

#include <stdint.h>

#include "aftp/aftp_engine.h"

#define SIM_MAX_FILES 64
#define SIM_SYNTHETIC_ABOVE (UINT64_C(64) << 20)

typedef struct sim_file {
    uint32_t id;
    uint64_t size;
    uint32_t block_size;
    uint64_t blocks;
    uint8_t *src;
    uint8_t *dst;       /* receiver side, allocated by open */
    uint8_t *writes;    /* writes per block (saturating) */
    /* Synthetic files (src and dst NULL): byte i is pattern[i % period]. */
    uint8_t *pattern;   /* period bytes, then room for any view to run on */
    uint64_t period;
    uint8_t *landing;   /* what place() lends for a synthetic block */
    uint64_t writes_total;   /* block writes, every one */
    uint64_t wrong_bytes;    /* synthetic: written bytes unlike the pattern */
    uint64_t bad_writes; /* writes not covering exactly one block */
    uint64_t placed_writes; /* writes of the very bytes place() lent */
    uint64_t blocks_written;  /* distinct blocks written at least once */
    uint64_t viewed_unwritten; /* receiver read-back bytes of blocks not written yet */
    uint64_t viewed_early;    /* receiver read-back bytes while blocks were missing
                               * (synthetic files too) */
    uint64_t viewed;          /* receiver read-back bytes of this file, all views */
    int opened;
    int sender_closed, receiver_closed;
    int committed;      /* closed with AFTP_CLOSE_COMMIT, or in a commit_group */
    int deferred;       /* closed with AFTP_CLOSE_DEFER */
    /* Pipelined mode: what the entry is, and what the receiver's `entry`
     * found (sim_storage_add_entry). */
    int kind;           /* enum aftp_entry_kind */
    char path[64];
    char target[64];    /* SYMLINK */
    uint64_t base;      /* first stream block */
    int identical;      /* the receiver holds an identical file: SKIP with SYNC */
    aftp_block_range held[4]; /* the receiver holds these blocks of a partial copy */
    size_t held_count;
    int placed;         /* DIR, SYMLINK: created by `entry` */
    char placed_target[64];
    int verdict;        /* what `entry` answered, -1 before */
    uint64_t added_at;  /* set by a test: when the entry was added */
    int source_error;   /* non-zero: the sender's views reaching past source_fails_at
                         * fail with it (a source changed or unreadable mid-send) */
    uint64_t source_fails_at;
    uint64_t ended_at;  /* the later ENTRY_END of the two sides */
} sim_file;

typedef struct sim_storage {
    sim_file *files;       /* room for `room` files (SIM_MAX_FILES at least) */
    int nfiles, room;
    int open_error;        /* non-zero: open() fails with it */
    int entry_error;       /* non-zero: entry() itself fails with it */
    int refuse_place;      /* non-zero: place() fails, payloads take scratch */
    int64_t corrupt_offset; /* >= 0: the byte at this offset is flipped on write */
    uint64_t receiver_view_bytes; /* bytes the receiver read back, all views */
    uint64_t stream_end;   /* pipelined: where the next entry added begins */
    uint32_t last_decided; /* the latest entry `entry` decided (ids must ascend) */
    int out_of_order;      /* `entry` was asked out of id order */
    int group_commits;     /* commit_group calls */
    int results_at_commit; /* FILE_RESULTs the script had seen at the first commit_group */
    const int *results_seen; /* the script's count, read at commit_group */
} sim_storage;

/* Files 1..nfiles of `size` bytes each, different seeded content; room
 * for SIM_MAX_FILES files or nfiles, whichever is more. */
void sim_storage_init(sim_storage *st, int nfiles, uint64_t size, uint64_t seed);
/* Room for `files` files in all (a tree larger than SIM_MAX_FILES); only
 * before the first sim_storage_add_entry, whose files it would move. */
void sim_storage_reserve(sim_storage *st, int files);
void sim_storage_free(sim_storage *st);
/* Pipelined mode: one more entry (id nfiles + 1), laid in the stream after
 * the ones before it; a FILE of `size` seeded bytes in blocks of
 * block_size, DIR and SYMLINK (`target`) hold no block. Returns it. */
sim_file *sim_storage_add_entry(sim_storage *st, int kind, const char *path, uint64_t size,
                                uint32_t block_size, const char *target);
sim_file *sim_storage_file(sim_storage *st, uint32_t id);

/* Both tables take a sim_side (below) as user. */
extern const aftp_storage_ops sim_sender_storage;
extern const aftp_storage_ops sim_receiver_storage;

/* What one simulated endpoint's callbacks see. */
typedef struct sim_events {
    int connected, file_start, file_end, closed;
    int entry_end;          /* pipelined: ENTRY_END events */
    int entries_failed;     /* ENTRY_END events with an error */
    uint32_t first_failed_id; /* the first of them, and its error */
    int first_failed_error;
    int last_entry_verdict; /* the latest ENTRY_END's verdict and error */
    int last_entry_error;
    int last_file_error;
    int closed_error;
    int has_digest;
    uint8_t digest[AFTP_DIGEST_LEN];
    char message[128];      /* CLOSED's */
    char file_message[256]; /* the latest FILE_END's */
    uint64_t file_end_at;  /* virtual time of the latest FILE_END */
    uint64_t closed_at;
} sim_events;

typedef struct sim_side {
    sim_storage *st;
    sim_events ev;
    const uint64_t *clock;
} sim_side;

void sim_on_event(void *user, const aftp_event *ev);

/* The XXH3-128 of the file's source bytes (what FILE_DONE carries). */
void sim_file_digest(const sim_file *f, uint8_t digest[AFTP_DIGEST_LEN]);

/* 1 when file id arrived intact: committed, bytes equal, every block
 * written exactly once. */
int sim_file_intact(sim_storage *st, uint32_t id);

#endif /* SIM_STORAGE_H */
