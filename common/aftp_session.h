/*
 * What the sender and receiver engines share about a session: connection
 * ids, packet numbering, the idle timeout, closing (CLOSE, draining) and
 * event delivery, and the counters. The role-specific state machines in
 * sender/ and receiver/ sit on top of it.
 */
#ifndef AFTP_SESSION_H
#define AFTP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_rtt.h"
#include "proto/aftp_wire.h"

typedef struct aftp_session {
    uint32_t local_id;
    uint32_t peer_id;          /* 0 until known */
    uint16_t max_datagram;     /* own limit; min(own, peer's) after the handshake */
    uint16_t own_max_datagram;
    int state;                 /* enum aftp_state */
    int error;                 /* why it closed (or is closing) */
    uint64_t next_pn;
    uint64_t idle_timeout_ns;
    uint64_t idle_deadline;
    uint64_t closing_deadline;
    uint64_t now_ns;           /* latest time any entry point was given */
    uint16_t close_wire_error; /* what our CLOSE says */
    int close_due;             /* a CLOSE should leave */
    aftp_stats stats;
    aftp_event_cb on_event;
    void *user;
    char message[AFTP_WIRE_MAX_REASON + 1]; /* detail for the CLOSED event */
} aftp_session;

/* Which of the session's own timers fired. */
enum aftp_session_timer {
    AFTP_SESSION_TIMER_NONE,
    AFTP_SESSION_TIMER_IDLE,         /* the peer went silent */
    AFTP_SESSION_TIMER_DRAINED       /* CLOSING is over */
};

void aftp_session_init(aftp_session *ss, uint32_t local_id, uint16_t max_datagram,
                       uint64_t idle_timeout_ns, aftp_event_cb on_event, void *user,
                       uint64_t now_ns);

/* Remember the latest clock reading (entry points call this first). */
void aftp_session_tick(aftp_session *ss, uint64_t now_ns);

/* Decodes a datagram and applies the checks common to both roles (size
 * limit, no protection in this version). AFTP_OK or the reason to drop it;
 * drops are counted. */
int aftp_session_decode(aftp_session *ss, const uint8_t *buf, size_t len, aftp_wire_packet *out);
/* Count a datagram dropped after decoding (wrong id, unexpected, stale). */
void aftp_session_drop(aftp_session *ss);
/* A valid datagram of len bytes came from the peer: the idle timer restarts. */
void aftp_session_heard(aftp_session *ss, uint64_t now_ns, size_t len);

/* The header of the next packet of `type` (to the peer, next pn). */
void aftp_session_header(const aftp_session *ss, uint8_t type, aftp_wire_header *hdr);
/* A zeroed packet of `type` with that header, ready for its body. */
void aftp_session_packet(const aftp_session *ss, uint8_t type, aftp_wire_packet *p);
/* Encodes pkt (its header filled by aftp_session_header) into buf and
 * fills dg; on success the packet number is consumed. */
int aftp_session_encode(aftp_session *ss, const aftp_wire_packet *pkt, uint8_t *buf, size_t cap,
                        aftp_datagram *dg);
/* A datagram built outside aftp_session_encode (DATA) left: consume its
 * packet number and count it. */
void aftp_session_sent(aftp_session *ss, const aftp_datagram *dg);

void aftp_session_event(aftp_session *ss, int type, int error, const aftp_file_info *info,
                        const uint8_t *digest);

/* Start closing: CLOSE(wire_error) is due, state CLOSING for `drain_ns`,
 * then CLOSED with `error`. No effect once closing or closed. */
void aftp_session_start_closing(aftp_session *ss, int error, uint16_t wire_error,
                                uint64_t drain_ns);
/* CLOSED at once (no CLOSE sent): emits the CLOSED event. Idempotent. */
void aftp_session_set_closed(aftp_session *ss, int error);
/* The local error a peer's CLOSE means (NONE: OK, CANCELLED: CANCELLED,
 * otherwise PEER_CLOSED) and its reason kept, printable, as the message. */
int aftp_session_peer_close(aftp_session *ss, const aftp_wire_close *c);
/* Encodes the due CLOSE. */
int aftp_session_encode_close(aftp_session *ss, uint8_t *buf, size_t cap, aftp_datagram *dg);

/* The counters, with the RTT figures of `rtt` (zero before a sample). */
void aftp_session_stats(const aftp_session *ss, const aftp_rtt *rtt, aftp_stats *out);

/* Earliest of the idle and draining deadlines. */
uint64_t aftp_session_expiry(const aftp_session *ss);
enum aftp_session_timer aftp_session_timer_due(const aftp_session *ss, uint64_t now_ns);

/* Keep text (NUL-terminated) as the detail of the CLOSED event. */
void aftp_session_set_text(aftp_session *ss, const char *text);

/* What aftp_X_read returns: the session's error once it is closing or
 * closed because of one, AFTP_OK otherwise. */
int aftp_session_failure(const aftp_session *ss);

#endif /* AFTP_SESSION_H */
