/*
 * One direction of a simulated network path on a virtual clock: a
 * bottleneck of fixed rate with a tail-drop queue, one-way delay, seeded
 * random loss (Bernoulli or Gilbert-Elliott bursts), reordering,
 * duplication, and stalls (the bottleneck stops serving for a while, as an
 * emulator or a VM that loses the CPU does: a queue no flow built).
 * Datagrams are copied in and come out at their arrival time.
 */
#ifndef SIM_LINK_H
#define SIM_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"

typedef struct sim_link_cfg {
    uint64_t rate_bps;     /* bottleneck rate; 0 = unlimited */
    uint64_t delay_ns;     /* one-way propagation delay */
    uint64_t queue_bytes;  /* bottleneck queue; 0 = unlimited */
    double loss;           /* independent loss probability */
    double ge_enter_bad;   /* Gilbert-Elliott: P(good -> bad) per packet; 0 = off */
    double ge_leave_bad;   /* P(bad -> good) */
    double ge_loss_bad;    /* loss probability in the bad state */
    double reorder;        /* probability a packet is reordered: held back by
                            * reorder_ns, or with reorder_early sent ahead */
    uint64_t reorder_ns;   /* by this much */
    int reorder_early;     /* a reordered packet skips reorder_ns of the delay
                            * (at most all of it: netem's reorder), so it
                            * overtakes the packets sent that long before it */
    double duplicate;      /* probability a packet arrives twice */
    uint64_t stall_every_ns; /* mean time between stalls (exponential); 0 = none */
    uint64_t stall_max_ns;   /* a stall lasts up to this (uniform) */
} sim_link_cfg;

typedef struct sim_pkt {
    uint64_t at;
    uint64_t seq;
    size_t len;
    uint8_t *data;
} sim_pkt;

typedef struct sim_link {
    sim_link_cfg cfg;
    uint64_t rng;
    int ge_bad;
    uint64_t busy_until;
    uint64_t next_stall_at;
    sim_pkt *heap;
    size_t count, cap;
    uint64_t seq;
    /* counters */
    uint64_t sent, lost, queue_drops, duplicated;
    uint64_t data_payload_lost; /* payload bytes of DATA packets lost or dropped */
} sim_link;

void sim_link_init(sim_link *l, const sim_link_cfg *cfg, uint64_t seed);
void sim_link_free(sim_link *l);
void sim_link_send(sim_link *l, uint64_t now, const aftp_datagram *dg);
/* Arrival time of the next datagram, or AFTP_NO_EXPIRY. */
uint64_t sim_link_next(const sim_link *l);
/* Removes the next datagram; the caller frees p->data. */
sim_pkt sim_link_pop(sim_link *l);

/* The emulated WAN's host stalls, as the simulation models them: the
 * bottleneck stops for up to 40 ms about twice a second. */
void sim_link_wan_stalls(sim_link_cfg *cfg);

/* Seeded generator shared by the simulation. */
uint64_t sim_rand(uint64_t *state);
double sim_rand_unit(uint64_t *state);

#endif /* SIM_LINK_H */
