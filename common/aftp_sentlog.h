/*
 * The sender's memory of recent packets, for loss detection and RTT samples.
 *
 * A power-of-two ring indexed by packet number holds, for every packet sent
 * (any type), when it left and which block it carried. A direct-mapped
 * index (block modulo twice the ring size) gives the ring slot of a block's
 * latest transmission, so FEEDBACK can ask "when and as which packet was
 * block b last sent?" in O(1).
 *
 * Records are only needed while a packet may still be declared lost. The
 * ring drops its oldest records when full (and whenever they are decided),
 * so its size caps memory at ~32 bytes per slot whatever the file size. A
 * block whose record is gone (dropped, or its index entry taken by a block
 * a whole index size further) counts as long gone: if the peer still lists
 * it missing, it is lost.
 */
#ifndef AFTP_SENTLOG_H
#define AFTP_SENTLOG_H

#include <stddef.h>
#include <stdint.h>

#define AFTP_SENTLOG_NO_BLOCK UINT64_MAX
#define AFTP_SENTLOG_MIN_SLOTS 1024u
#define AFTP_SENTLOG_MAX_SLOTS (1u << 19) /* 16 MiB with the index */

typedef struct aftp_sentlog_rec {
    uint64_t block;   /* AFTP_SENTLOG_NO_BLOCK: control packet or decided */
    uint64_t sent_ns;
    uint64_t data_upto; /* DATA packets among 0..this packet's number */
} aftp_sentlog_rec;

typedef struct aftp_sentlog {
    aftp_sentlog_rec *ring;
    uint32_t *index;     /* block % size -> ring slot + 1; 0 = empty */
    uint64_t mask;       /* ring slots - 1 */
    uint64_t index_mask; /* index slots - 1 (twice the ring) */
    uint64_t tail_pn;    /* oldest packet number still held */
    uint64_t head_pn;    /* next packet number to record */
    uint64_t data_count; /* DATA packets recorded, all time */
} aftp_sentlog;

/* Ring sized for `packets` in flight, rounded up to a power of two and
 * clamped to [AFTP_SENTLOG_MIN_SLOTS, AFTP_SENTLOG_MAX_SLOTS]. */
int aftp_sentlog_init(aftp_sentlog *l, uint64_t packets);
void aftp_sentlog_free(aftp_sentlog *l);
size_t aftp_sentlog_slots(const aftp_sentlog *l);

/* Record the next packet: packets are numbered 0, 1, 2... exactly as the
 * session numbers them, every packet recorded, so head_pn is the session's
 * next packet number. A DATA packet names its block; an earlier record of
 * the same block is superseded. When the ring is full the oldest record is
 * dropped. */
void aftp_sentlog_add(aftp_sentlog *l, uint64_t sent_ns, uint64_t block);

/* When packet pn left: 1 and *sent_ns while pn is one of the ring's size
 * of packets sent last (retired or not: a FEEDBACK measured at the newest
 * packet settled in order asks for one already acknowledged), else 0. */
int aftp_sentlog_sent_time(const aftp_sentlog *l, uint64_t pn, uint64_t *sent_ns);
/* How many DATA packets were among packet numbers 0..pn: 1 and *count
 * while pn is one of the ring's size of packets sent last (retired or
 * not: the count stays true), else 0. The rate controller's sent count:
 * control packets are not DATA, and a pipelined session sends them by the
 * thousand (an ENTRIES or FILE_DONE per few files). */
int aftp_sentlog_data_upto(const aftp_sentlog *l, uint64_t pn, uint64_t *count);
/* The latest transmission of block: 1 with its pn and time, or 0. */
int aftp_sentlog_find_block(const aftp_sentlog *l, uint64_t block, uint64_t *pn,
                            uint64_t *sent_ns);
/* The block's latest transmission is decided (lost and queued for repair):
 * forget it so it is neither found nor declared lost twice. */
void aftp_sentlog_forget_block(aftp_sentlog *l, uint64_t block);
/* Drop decided records from the oldest end: control packets, forgotten
 * blocks and blocks below `acked_below` (all held by the peer).
 * UINT64_MAX drops every record (a new file reuses block numbers). */
void aftp_sentlog_retire(aftp_sentlog *l, uint64_t acked_below);

#endif /* AFTP_SENTLOG_H */
