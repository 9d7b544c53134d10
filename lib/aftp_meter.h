/*
 * The figures of a progress line, from the engine's counters: how much of
 * the file is done, at what goodput, and when it will be over. The client's
 * and the server's progress callbacks (and so the aftp tool's progress
 * line, log and --json objects) read the same meter.
 */
#ifndef AFTP_METER_H
#define AFTP_METER_H

#include <stdint.h>

#include "aftp/aftp_engine.h"

typedef struct aftp_meter {
    uint64_t size;      /* bytes in the file */
    uint64_t base;      /* the session's count when the file started */
    uint64_t start_ns;  /* when it started */
    uint64_t last_ns;   /* the previous reading (or the start) */
    uint64_t last_done;
} aftp_meter;

typedef struct aftp_meter_reading {
    uint64_t done;   /* bytes of the file counted so far, at most its size */
    double rate_bps; /* bits per second of `done` since the previous reading */
    double eta_s;    /* seconds left at rate_bps; < 0 when unknown */
    double seconds;  /* since the file started */
} aftp_meter_reading;

/* A file of `size` bytes starts at now_ns; `base` is the session's count
 * (below) then, as the counters run over a session's files. */
void aftp_meter_start(aftp_meter *m, uint64_t size, uint64_t base, uint64_t now_ns);
/* Bytes of the file done by the session's count, at most its size. */
uint64_t aftp_meter_done(const aftp_meter *m, uint64_t count);
/* Reads the meter at now_ns with the session's count: 1 and *out, or 0
 * (nothing read) when now_ns is not past the previous reading. */
int aftp_meter_read(aftp_meter *m, uint64_t count, uint64_t now_ns, aftp_meter_reading *out);

/* The progress callbacks' figures (aftp_progress, aftp/aftp_client.h) of
 * file `name` from a reading and the engine's counters. */
struct aftp_progress;
void aftp_meter_progress(const aftp_meter *m, const aftp_meter_reading *r, const aftp_stats *st,
                         const char *name, struct aftp_progress *out);

/* The count of a sender: payload bytes sent at least once. The receiver
 * counts stats.payload_bytes_received. */
static inline uint64_t aftp_meter_sent_once(const aftp_stats *st)
{
    return st->payload_bytes_sent - st->payload_bytes_retransmitted;
}

#endif /* AFTP_METER_H */
