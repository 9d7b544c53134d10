/*
 * The server's total rate cap, shared between its sessions (spec 12.3.1,
 * "The server's total cap"): max-min fair (water-filling). Pure
 * arithmetic, no clock and no I/O: the hub (aftp_hub.c) measures each
 * session's rate and hands the shares to the sessions, which apply them
 * (a push by RATE_UPDATE, a pull to its own sender).
 *
 * A session can use at most its own cap (its key's rate=, 0: none) and,
 * once it was measured over a whole round, its demand: what it used with
 * room to grow (AFTP_SHARE_GROWTH times it, at least AFTP_SHARE_FLOOR_BPS),
 * so one that trickles or idles does not hold a share nobody uses, and one
 * limited by its share (it uses all of it) keeps asking for more than it
 * got. Each session gets min(what it can use, an equal part of what is
 * left), the smallest first; what remains once every session has what it
 * can use is divided again between them all, within their own caps, so the
 * grants add up to the total whenever the caps allow it.
 */
#ifndef AFTP_SHARE_H
#define AFTP_SHARE_H

#include <stddef.h>
#include <stdint.h>

#define AFTP_SHARE_GROWTH 2u                 /* demand = used x this... */
#define AFTP_SHARE_FLOOR_BPS UINT64_C(1000000) /* ...and at least this */
#define AFTP_SHARE_ROUND_NS UINT64_C(1000000000) /* rates measured over this */

typedef struct aftp_share_session {
    uint64_t cap_bps;   /* its own cap, 0: none */
    uint64_t used_bps;  /* measured over the last whole round */
    int measured;       /* used_bps is a whole round's (else: demand unknown) */
    uint64_t share_bps; /* out: its share, >= 1 (0 only with total 0) */
} aftp_share_session;

/* The most session `s` can use this round, 0: no limit. */
uint64_t aftp_share_demand(const aftp_share_session *s);

/* Sets share_bps of the n sessions from total_bps (> 0). */
void aftp_share_split(uint64_t total_bps, aftp_share_session *s, size_t n);

/* The share of a session about to start (not measured yet, its own cap
 * cap_bps) beside the n running ones: it is put in s[n] (s has room for
 * n + 1) and the n + 1 split as aftp_share_split does. */
uint64_t aftp_share_entry(uint64_t total_bps, aftp_share_session *s, size_t n, uint64_t cap_bps);

/* The rate of `bytes` (UDP payload) over span_ns, bits/s. */
uint64_t aftp_share_rate(uint64_t bytes, uint64_t span_ns);

#endif /* AFTP_SHARE_H */
