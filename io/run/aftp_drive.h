/*
 * The datapath of one session: drives one engine (sender or receiver) with
 * a UDP socket and the monotonic clock.
 *
 * A turn (aftp_drive_turn): feed the queued datagrams (recvmmsg, GRO
 * split), run the engine's timers, collect what the engine releases (its
 * token bucket holds ~1 ms at the pacing rate) into one sendmmsg/GSO
 * batch, and say when the session next needs a turn. After a paced batch
 * that is at least AFTP_DRIVE_BATCH_GAP_NS later, so each batch carries
 * ~0.5 ms of data instead of one datagram per wake-up; an expiry already
 * due (the receiver's next verification step) or a full batch asks for a
 * turn at once. aftp_drive_run turns one session on the caller's thread
 * until it is closed, sleeping in ppoll between turns; aftp_worker.h turns
 * many on one thread.
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
/* Datagrams a turn feeds before it lets the others run (output, timers,
 * other sessions): about what one batch out carries. */
#define AFTP_DRIVE_TURN_INPUT AFTP_UDP_TX_MAX

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
    /* the turns' own state (zero before the first turn) */
    uint64_t last_turn_ns; /* the engine has been told this time: no arrival before it */
    uint64_t next_tick_ns; /* on_tick's next call, 0: not yet set */
} aftp_drive;

/* The batch buffers of the turns of one thread: room for AFTP_UDP_TX_MAX
 * datagrams of up to `max_datagram` bytes out, and the socket arrays
 * (aftp_udp_bufs, ~2.2 MiB) each session's socket borrows for its turn's
 * reads and sends. About 2.2 MiB + AFTP_UDP_TX_MAX * max_datagram (3.7 MiB
 * at 1452 bytes) per thread, whatever the number of sessions it runs. */
typedef struct aftp_drive_scratch aftp_drive_scratch;
int aftp_drive_scratch_new(aftp_drive_scratch **out, size_t max_datagram);
void aftp_drive_scratch_del(aftp_drive_scratch *s);
/* The datagram size a scratch needs to turn `d`: the larger of what its
 * engine sends and what its socket receives. */
size_t aftp_drive_scratch_datagram(const aftp_drive *d);

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

/* One turn of one session at now_ns: feed what is queued on its socket
 * (a bounded share: what is left makes the next turn due at once),
 * on_wake, due timers, one batch out, the source and path-MTU checks,
 * on_turn, the ~4 Hz on_tick. AFTP_OK with *wake_ns = when it next needs a
 * turn (<= now_ns: at once, a batch was full or work is due; the caller
 * also turns it when its socket or wake_fd is readable); *closed = 1 once
 * the engine is CLOSED (rc then the engine's closing error, as
 * aftp_drive_run returns it), or a socket error (rc, *closed = 1). A
 * socket error once the engine is CLOSING (its CLOSE is out, the peer may
 * be gone) ends the session with the engine's error. The scratch's
 * datagrams must hold aftp_drive_scratch_datagram(d) bytes (else
 * AFTP_ERR_INVALID_ARGUMENT, closed). d->interrupt is not looked at: the
 * caller cancels (aftp_drive_cancel). */
int aftp_drive_turn(aftp_drive *d, aftp_drive_scratch *sc, uint64_t now_ns, uint64_t *wake_ns,
                    int *closed);

/* The engine cancels (section 9.13: its peer is told at the next turn). */
void aftp_drive_cancel(const aftp_drive *d, uint64_t now_ns);

/* Runs until the engine is CLOSED. Returns the engine's closing error, or
 * AFTP_ERR_NETWORK when the socket failed (peer unreachable) and
 * AFTP_ERR_CANCELLED after a second interrupt, without waiting for CLOSED. */
int aftp_drive_run(aftp_drive *d);

void aftp_drive_stats(const aftp_drive *d, aftp_stats *st);
/* The engine's state (enum aftp_state) and, once it closes, its error:
 * whichever role it plays. */
int aftp_drive_state(const aftp_drive *d);
int aftp_drive_error(const aftp_drive *d);

#endif /* AFTP_DRIVE_H */
