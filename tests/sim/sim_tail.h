/*
 * The end of a whole transfer, measured on the virtual clock: from the
 * last block sent for the first time to the sender's close, split into
 * what the sender did after it (the first resend, the last DATA) and the
 * last FILE_RESULT's arrival. For the tail figures (sim_bench_tail) and
 * the tests that bound it (test_tail).
 */
#ifndef SIM_TAIL_H
#define SIM_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "sim_run.h"

/* Every DATA the sender wrote (time, stream or file block), recorded by
 * sim_tail_record_data as a fwd_tap, and the latest FILE_RESULT that
 * reached it, recorded by sim_tail_record_result as a rev_tap (ctx: the
 * sim_tail, zeroed to start; sim_tail_free releases it). Blocks are taken
 * as one sequence: a single file, or a pipelined stream. */
typedef struct sim_tail {
    uint64_t *at, *block;
    size_t count, cap;
    uint64_t result_at;
} sim_tail;
void sim_tail_record_data(void *ctx, uint64_t now, const aftp_datagram *dg);
int sim_tail_record_result(void *ctx, uint64_t now, const uint8_t *pkt, size_t len);
void sim_tail_free(sim_tail *t);
/* The block a DATA datagram (as a sender writes it) carries. */
uint64_t sim_tail_data_block(const aftp_datagram *dg);

/* A fwd_filter (ctx: the sim_tail_drop) losing the first `drops`
 * transmissions of `block`; `seen` counts them all. */
typedef struct sim_tail_drop {
    uint64_t block;
    int drops, seen;
} sim_tail_drop;
int sim_tail_drop_first_sends(void *ctx, const aftp_datagram *dg);

/* What the record shows once the run is over (times in ns). */
typedef struct sim_tail_split {
    uint64_t last_new_at;   /* the last block sent for the first time */
    uint64_t first_resend_at; /* the first DATA after it (a repair, copy or probe); 0: none */
    uint64_t last_data_at;  /* the last DATA of the run */
    uint64_t result_at;     /* the last FILE_RESULT reached the sender */
    uint64_t closed_at;     /* the sender closed */
    uint64_t tail_resends;  /* DATA after last_new_at */
    unsigned most_sends;    /* the most times one block went out */
} sim_tail_split;
void sim_tail_split_of(const sim_tail *t, uint64_t closed_at, sim_tail_split *out);

/* Wires both recorders into c (their ctx: t). */
void sim_tail_attach(sim_cfg *c, sim_tail *t);

#endif /* SIM_TAIL_H */
