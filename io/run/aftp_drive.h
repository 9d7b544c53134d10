/*
 * The datapath loop: drives one engine (sender or receiver) with a UDP
 * socket and the monotonic clock until its session is closed.
 *
 * Each turn: feed every queued datagram (recvmmsg, GRO split), run the
 * engine's timers, collect every datagram the engine releases (its token
 * bucket holds ~1 ms at the pacing rate) into one sendmmsg/GSO batch, then
 * sleep in ppoll until the engine's expiry or a datagram arrives. After a
 * paced batch the loop sleeps at least AFTP_DRIVE_BATCH_GAP_NS, so each
 * batch carries ~0.5 ms of data instead of one datagram per wake-up; an
 * expiry already due (the receiver's next verification step) is run at
 * once.
 */
#ifndef AFTP_DRIVE_H
#define AFTP_DRIVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp_mapguard.h"
#include "aftp_udp.h"

#define AFTP_DRIVE_BATCH_GAP_NS 500000u  /* half the engine's 1 ms bucket depth */
#define AFTP_DRIVE_TICK_NS 250000000u    /* progress callback period */

typedef struct aftp_drive {
    aftp_sender *sender;      /* exactly one of sender / receiver */
    aftp_receiver *receiver;
    aftp_udp *udp;            /* connected to the peer */
    size_t max_datagram;
    atomic_int *interrupt; /* non-zero: cancel the session (SIGINT, another thread) */
    void (*on_tick)(void *app, const aftp_stats *st, uint64_t now_ns);
    void *app;
    /* optional: a batch has been handed to the kernel (payloads read) */
    void (*after_send)(void *ctx);
    void *after_send_ctx;
    /* optional, sender: the guard of its source mapping. The engine's
     * writes (which read the source) run under it, and once it trips the
     * file fails with AFTP_ERR_SOURCE_CHANGED. */
    aftp_mapguard *source_guard;
    /* optional: called once per loop turn (a server answers the other
     * clients on its listener meanwhile) */
    void (*on_turn)(void *ctx, uint64_t now_ns);
    void *on_turn_ctx;
    /* optional: work finished beside the loop (a receiver's group commit
     * on a worker thread) makes `wake_fd` readable, which ends the loop's
     * sleep; on_wake runs every turn, before the engine's timers and
     * output, to hand such results to the engine. wake_fd < 0: none (0 is
     * taken for none too, as a zeroed aftp_drive has it). */
    int wake_fd;
    void (*on_wake)(void *ctx, uint64_t now_ns);
    void *on_wake_ctx;
} aftp_drive;

uint64_t aftp_drive_now_ns(void);

/* When a datagram reached the socket, on the engine's clock (`now_ns`,
 * CLOCK_MONOTONIC): the kernel's stamp (CLOCK_REALTIME, 0: none) moved
 * across by its age at `now_real_ns`, and never before `floor_ns`. A
 * process busy with a batch, or off the CPU, reads datagrams late and in
 * bunches: stamped when read, their spacing would show rates the path
 * never had, and their RTT samples delays it never had. A stamp from the
 * future (the wall clock was set back) counts as `now_ns`. */
uint64_t aftp_drive_arrival_ns(uint64_t stamp_real_ns, uint64_t now_real_ns, uint64_t now_ns,
                               uint64_t floor_ns);

/* Feeds one datagram to the engine. */
int aftp_drive_feed(const aftp_drive *d, uint64_t now_ns, const uint8_t *pkt, size_t len);

/* Runs until the engine is CLOSED. Returns the engine's closing error, or
 * AFTP_ERR_NETWORK when the socket failed (peer unreachable) and
 * AFTP_ERR_CANCELLED after a second interrupt, without waiting for CLOSED. */
int aftp_drive_run(aftp_drive *d);

void aftp_drive_stats(const aftp_drive *d, aftp_stats *st);

#endif /* AFTP_DRIVE_H */
