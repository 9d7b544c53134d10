/*
 * Anti-replay window over packet numbers (spec section 14.5), the sliding
 * counter window of WireGuard (RFC 6479 style): a ring of bit words behind
 * the highest packet number seen. A packet number is accepted once: never
 * twice, and never when it is too far behind the highest one.
 *
 * Use after authentication only (a forged packet must not move the
 * window): aftp_replay_check before decrypting, to skip the work for an
 * obvious replay, then aftp_replay_accept once the packet opened.
 *
 * The window spans AFTP_REPLAY_WINDOW packet numbers behind the highest
 * seen: at 10 Gbit/s with 1452-byte packets about 76 ms of reordering,
 * 760 ms at 1 Gbit/s. A path that lets a packet skip its delay (netem's
 * reorder) has it overtake a whole one-way delay of packets, and with a
 * narrower window those it overtook arrive below the window and are
 * dropped as replays (spec 14.5.4). 8 KiB per session.
 */
#ifndef AFTP_REPLAY_H
#define AFTP_REPLAY_H

#include <stdint.h>

#define AFTP_REPLAY_BITS 65536u
/* One word of the ring is always being recycled, so the usable window is
 * one word short of the ring. */
#define AFTP_REPLAY_WINDOW (AFTP_REPLAY_BITS - 64u)

typedef struct aftp_replay {
    uint64_t next;                          /* highest packet number accepted + 1; 0: none */
    uint64_t words[AFTP_REPLAY_BITS / 64u]; /* ring: bit pn % AFTP_REPLAY_BITS */
} aftp_replay;

void aftp_replay_init(aftp_replay *w);

/* AFTP_OK when pn would be accepted now; AFTP_ERR_REPLAY when it was seen,
 * is too old, or is UINT64_MAX (never sent: packet numbers do not wrap).
 * Changes nothing. */
int aftp_replay_check(const aftp_replay *w, uint64_t pn);

/* As aftp_replay_check, and on AFTP_OK records pn (sliding the window
 * forward when pn is the new highest). */
int aftp_replay_accept(aftp_replay *w, uint64_t pn);

#endif /* AFTP_REPLAY_H */
