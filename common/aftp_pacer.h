/*
 * Token-bucket pacer in nanoseconds. Every datagram leaves through it, so
 * neither loss repair nor control traffic can burst beyond the rate.
 *
 * The bucket is kept as a single "cursor" time: each datagram moves the
 * cursor forward by its transmission time at the rate, and the cursor may
 * lag `now` by at most the bucket depth (the burst a driver may batch).
 * A datagram may leave when cursor <= now. A congestion controller drives
 * the rate through aftp_pacer_set_rate().
 */
#ifndef AFTP_PACER_H
#define AFTP_PACER_H

#include <stdint.h>

typedef struct aftp_pacer {
    uint64_t rate_bps;       /* bits of UDP payload per second, > 0 */
    uint64_t depth_ns;       /* bucket depth as time at the current rate */
    uint64_t cursor_ns;      /* when the bucket would be empty */
    uint32_t burst_bytes;    /* the bucket holds at least this many bytes */
} aftp_pacer;

#define AFTP_PACER_MIN_DEPTH_NS UINT64_C(1000000) /* 1 ms of data */

/* burst_bytes: the smallest depth in bytes (e.g. 4 full datagrams). The
 * bucket starts full. */
void aftp_pacer_init(aftp_pacer *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now_ns);
void aftp_pacer_set_rate(aftp_pacer *p, uint64_t rate_bps);
/* A new smallest depth in bytes: a session's datagram size is known only
 * once its handshake is done. */
void aftp_pacer_set_burst(aftp_pacer *p, uint32_t burst_bytes);
uint64_t aftp_pacer_rate(const aftp_pacer *p);

/* Nanoseconds `bytes` take at the current rate. */
uint64_t aftp_pacer_tx_time(const aftp_pacer *p, uint64_t bytes);
/* 1 when a datagram may leave at now_ns. */
int aftp_pacer_ready(const aftp_pacer *p, uint64_t now_ns);
/* Earliest time the next datagram may leave. */
uint64_t aftp_pacer_next_send(const aftp_pacer *p);
/* A datagram of `bytes` left at now_ns. */
void aftp_pacer_on_send(aftp_pacer *p, uint64_t now_ns, uint64_t bytes);

#endif /* AFTP_PACER_H */
