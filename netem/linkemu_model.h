/*
 * The link model of one direction, without I/O: given a packet's arrival
 * time and length it decides the packet's fate (lost, dropped by the full
 * queue, or delivered at a time, maybe twice). The emulator owns the clock
 * and the buffers; tests drive the model on a virtual clock.
 *
 * Order of effects, the same as the kernel's netem + tbf backend:
 * loss (random or Gilbert-Elliott) -> drop-tail queue and bottleneck
 * serialisation -> propagation delay + jitter (FIFO order kept) ->
 * reordering (skip the delay) and duplication.
 */
#ifndef LINKEMU_MODEL_H
#define LINKEMU_MODEL_H

#include <stdint.h>

#include "linkemu_profile.h"

/* xoshiro256**: fast, seedable, good enough for loss decisions. */
struct linkemu_rng {
    uint64_t s[4];
};

void linkemu_rng_seed(struct linkemu_rng *rng, uint64_t seed);
uint64_t linkemu_rng_next(struct linkemu_rng *rng);

enum linkemu_verdict {
    LINKEMU_DELIVER = 0,
    LINKEMU_DROP_LOSS,  /* the model's random or bursty loss */
    LINKEMU_DROP_QUEUE, /* drop-tail: the bottleneck queue was full */
};

struct linkemu_fate {
    enum linkemu_verdict verdict;
    uint64_t due_ns;  /* when to deliver (valid for LINKEMU_DELIVER) */
    unsigned copies;  /* 1, or 2 when duplicated */
    int reordered;    /* skipped the delay: due before packets admitted earlier */
};

struct linkemu_model {
    struct linkemu_dir_params p;
    /* probabilities as thresholds on a uniform 64-bit draw */
    uint64_t th_loss, th_ge_p, th_ge_r, th_bad_loss, th_good_loss, th_reorder, th_dup;
    int ge_bad;              /* Gilbert-Elliott state */
    uint64_t link_free_ns;   /* when the bottleneck finishes its last packet */
    uint64_t last_due_ns;    /* latest delay-line departure (keeps FIFO order) */
    struct linkemu_rng rng;
};

/* Copies `p` and seeds the direction's random stream. */
void linkemu_model_init(struct linkemu_model *m, const struct linkemu_dir_params *p,
                        uint64_t seed);

/* Decides the fate of a `len`-byte IP packet arriving at `now_ns`. Arrival
 * times must not go backwards. */
struct linkemu_fate linkemu_model_admit(struct linkemu_model *m, uint64_t now_ns, uint32_t len);

#endif /* LINKEMU_MODEL_H */
