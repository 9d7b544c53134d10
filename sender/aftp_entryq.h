/*
 * The sender's entries of a pipelined session (spec section 9.14): what
 * the application added with aftp_sender_add_entry, copied, from the
 * oldest entry that has not ended up to the newest added. A ring of
 * `cap` slots (the sender's pipeline_window), entry id i in slot i mod
 * cap: the application may add an entry only while its id is below
 * oldest + cap, so memory is bounded by cap entries (each with its path,
 * target and RESUME's held ranges) whatever the size of the tree.
 */
#ifndef AFTP_ENTRYQ_H
#define AFTP_ENTRYQ_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "proto/aftp_wire.h"

enum aftp_entryq_state {
    AFTP_ENTRYQ_FREE = 0,  /* slot unused */
    AFTP_ENTRYQ_QUEUED,    /* added, not yet in an ENTRIES */
    AFTP_ENTRYQ_OFFERED,   /* sent in an ENTRIES, no verdict yet */
    AFTP_ENTRYQ_SENDING,   /* a FILE with verdict SEND or RESUME */
    AFTP_ENTRYQ_DONE_SENT, /* its FILE_DONE went out; waiting for FILE_RESULT */
    AFTP_ENTRYQ_ABANDONED, /* its source failed: ABANDON sent (spec 9.14.3), reported
                            * failed, waiting for the FILE_RESULT that ends it */
    AFTP_ENTRYQ_ENDED      /* ended; freed once every older entry has too */
};

typedef struct aftp_entryq_item {
    aftp_entry_info info;  /* info.file.path, info.target point at the copies */
    char *path, *target;
    int state;             /* enum aftp_entryq_state */
    uint8_t verdict;       /* enum aftp_wire_verdict_kind, once given */
    uint64_t base, blocks; /* place in the session stream, once offered */
    aftp_wire_range *held; /* RESUME: held ranges (file blocks, ascending) */
    size_t held_count;
    uint64_t held_blocks;
    /* Holes: the application's byte extents (info.holes, copied) until
     * the entry is placed, then the blocks wholly inside them that its
     * record lists (flag HOLES), fixed for the session. */
    aftp_byte_range *hole_bytes;
    aftp_wire_range *holes;
    size_t hole_count;
    int done_due;          /* its FILE_DONE (ABANDONED: its ABANDON) should leave */
    uint16_t abandon_error; /* ABANDONED: the wire error its ABANDON carries */
    uint64_t sent_ns;      /* when its latest ENTRIES or FILE_DONE left */
    uint64_t sent_pn;      /* and as which packet */
    uint8_t digest[AFTP_DIGEST_LEN]; /* streamed digest, once DONE_SENT */
} aftp_entryq_item;

typedef struct aftp_entryq {
    aftp_entryq_item *slots;
    uint32_t cap;
    uint32_t oldest;       /* smallest id not ended */
    uint32_t newest;       /* highest id added, 0 before the first */
} aftp_entryq;

int aftp_entryq_init(aftp_entryq *q, uint32_t cap);
void aftp_entryq_free(aftp_entryq *q);

/* Copies `info` as entry newest + 1 (its place in the stream is set when
 * it is offered). AFTP_OK; AFTP_ERR_LIMIT when the ring is full (the id
 * would be oldest + cap); AFTP_ERR_NO_MEMORY. */
int aftp_entryq_add(aftp_entryq *q, const aftp_entry_info *info);

/* The live entry `id` (oldest..newest), or NULL. */
aftp_entryq_item *aftp_entryq_find(aftp_entryq *q, uint32_t id);

/* Keeps RESUME's held ranges of a decoded verdict. AFTP_OK or no memory. */
int aftp_entryq_hold(aftp_entryq_item *e, const aftp_wire_verdict *v);
/* 1 when the entry's own block `file_block` is held: listed by its
 * RESUME verdict or by its hole list (never sent, either way). */
int aftp_entryq_is_held(const aftp_entryq_item *e, uint64_t file_block);
/* 1 when `file_block` is listed by the RESUME verdict alone. */
int aftp_entryq_resumed(const aftp_entryq_item *e, uint64_t file_block);
/* 1 when `file_block` is in the entry's hole list (reads as zeros). */
int aftp_entryq_in_hole(const aftp_entryq_item *e, uint64_t file_block);

/* Turns a FILE's hole extents into its hole list once its block size is
 * set (spec 6.13): the blocks wholly inside a hole; then drops the
 * smallest holes (sent as data) until at most AFTP_WIRE_MAX_HOLES remain
 * and the record takes at most `room` bytes. Does nothing the second
 * time. Out of memory, the list stays empty: the holes go as data. */
void aftp_entryq_place_holes(aftp_entryq_item *e, size_t room);

/* Marks `id` ended; frees the ended entries in a row from the oldest. */
void aftp_entryq_end(aftp_entryq *q, uint32_t id);

/* The wire record of an entry (borrows its path and target). */
void aftp_entryq_record(const aftp_entryq_item *e, aftp_wire_entry *out);

#endif /* AFTP_ENTRYQ_H */
