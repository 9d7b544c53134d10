/*
 * What the sender and receiver engines share about a session: connection
 * ids, packet numbering, the idle timeout, closing (CLOSE, draining) and
 * event delivery, the counters, and packet protection once the handshake
 * is done. The role-specific state machines in sender/ and receiver/ sit
 * on top of it.
 *
 * Receiving (spec section 14.5): aftp_session_peek reads the clear header,
 * aftp_session_precheck applies what needs no decryption (PROTECTED flag,
 * replay window), the engine may drop more on the clear part (the receiver
 * drops DATA for blocks it holds), and aftp_session_open decrypts into the
 * session's own scratch buffer (never into the caller's or stored bytes)
 * and decodes; aftp_session_open_data decrypts a DATA payload straight
 * into the bytes of a block the receiver does not hold yet. Once keys
 * exist every packet must be sealed, except HELLO (the server answers a
 * resent one with its stored HELLO_ACK).
 */
#ifndef AFTP_SESSION_H
#define AFTP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_handshake.h"
#include "common/aftp_protect.h"
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
    uint64_t closing_period_ns; /* 3 PTO, counted from the first CLOSE sent (spec 10.7) */
    int close_sent;            /* the first CLOSE of our closing has left */
    int close_held;            /* the period ran out before it did: restarted once */
    int close_copies;          /* a quick close: CLOSE copies still to send (spec 9.11) */
    uint64_t now_ns;           /* latest time any entry point was given */
    uint16_t close_wire_error; /* what our CLOSE says */
    int close_due;             /* a CLOSE should leave */
    aftp_stats stats;
    aftp_event_cb on_event;
    void *user;
    char message[AFTP_WIRE_MAX_REASON + 1]; /* detail for the CLOSED event */
    aftp_protect prot;         /* keys, once the handshake is done */
    uint8_t *scratch;          /* own_max_datagram bytes: packets open here */
    int has_peer_key;
    uint8_t peer_key[AFTP_HS_KEY_LEN]; /* the peer's authenticated static key */
    /* What the peer is, for messages: "peer" until this end builds its
     * first handshake packet, then peer_role: "receiver" for a sender,
     * "sender" for a receiver (in a push the client is the sender, in a
     * pull the receiver, spec 9.1). The engine sets peer_role. */
    const char *peer_name;
    const char *peer_role;
} aftp_session;

/* Which of the session's own timers fired. */
enum aftp_session_timer {
    AFTP_SESSION_TIMER_NONE,
    AFTP_SESSION_TIMER_IDLE,         /* the peer went silent */
    AFTP_SESSION_TIMER_DRAINED       /* CLOSING is over */
};

/* AFTP_OK, or AFTP_ERR_NO_MEMORY (the scratch buffer); either way
 * aftp_session_free releases what was allocated. */
int aftp_session_init(aftp_session *ss, uint32_t local_id, uint16_t max_datagram,
                      uint64_t idle_timeout_ns, aftp_event_cb on_event, void *user,
                      uint64_t now_ns);
/* Wipes the keys, frees the scratch buffer. */
void aftp_session_free(aftp_session *ss);

/* The handshake hs is done: packets are protected with `cipher` from now
 * on, the peer's key is kept for the CONNECTED event. The caller then
 * deletes hs (nothing points into it). */
int aftp_session_protect(aftp_session *ss, const aftp_handshake *hs, uint8_t cipher,
                         uint64_t key_update_packets);
int aftp_session_protected(const aftp_session *ss);
/* Bytes each packet grows by when sealed (0 in an unprotected session). */
size_t aftp_session_overhead(const aftp_session *ss);

/* ---- security settings and handshake fields shared by both roles ---- */

/* AFTP_OK; AFTP_ERR_BAD_KEY when a protected choice lacks its keys (the
 * own identity, and the server's key for a client or the admission policy
 * for a server); AFTP_ERR_INVALID_ARGUMENT for an unknown choice or a
 * cipher this host cannot run. */
int aftp_session_check_security(const aftp_security_settings *sec, int client);
/* Non-zero when `choice` (enum aftp_cipher_choice) allows the protected
 * wire cipher `cipher` and this host runs it. */
int aftp_session_cipher_allowed(int choice, uint8_t cipher);
/* The wire's cipher code (a session's stats.cipher) as the API names it:
 * enum aftp_cipher_choice (AFTP_CIPHER_NONE for an unprotected session). */
int aftp_session_cipher_choice(uint8_t cipher);
/* What message 2 of the handshake authenticates of a HELLO_ACK (spec
 * section 14.2.3): server_conn_id u32 || cipher u8 || max_datagram u16,
 * then the HELLO_ACK's extension TLVs other than HANDSHAKE, as they stand
 * in it (RATE_CAP). So the server builds it before it adds message 2, and
 * the client from the packet it got. AFTP_ERR_BUFFER_TOO_SMALL past cap
 * bytes. */
int aftp_session_ack_payload(const aftp_wire_hello_ack *a, uint8_t *out, size_t cap,
                             size_t *out_len);

/* Remember the latest clock reading (entry points call this first). */
void aftp_session_tick(aftp_session *ss, uint64_t now_ns);

/* The three receive steps (see the top); each returns AFTP_OK or the reason
 * to drop the datagram, and counts the drop (a packet that does not open
 * in stats.auth_failures, others in packets_dropped). */
int aftp_session_peek(aftp_session *ss, const uint8_t *buf, size_t len, aftp_wire_header *hdr);
int aftp_session_precheck(aftp_session *ss, const aftp_wire_header *hdr);
int aftp_session_open(aftp_session *ss, const uint8_t *buf, size_t len,
                      const aftp_wire_header *hdr, aftp_wire_packet *out);
/* Instead of aftp_session_open for a sealed DATA whose payload may go
 * straight to its place: the payload is decrypted into `payload` (the
 * block's bytes in storage, lent because the block is still missing) and
 * out->u.data.payload points there. On a failure `payload` may hold
 * unauthenticated bytes, which is why only a missing block may be lent.
 * AFTP_ERR_INVALID_ARGUMENT for anything but a sealed DATA. */
int aftp_session_open_data(aftp_session *ss, const uint8_t *buf, size_t len,
                           const aftp_wire_header *hdr, uint8_t *payload, aftp_wire_packet *out);
/* Count a datagram dropped after decoding (wrong id, unexpected, stale). */
void aftp_session_drop(aftp_session *ss);
/* A valid datagram of len bytes came from the peer: the idle timer restarts. */
void aftp_session_heard(aftp_session *ss, uint64_t now_ns, size_t len);

/* The header of the next packet of `type` (to the peer, next pn). */
void aftp_session_header(const aftp_session *ss, uint8_t type, aftp_wire_header *hdr);
/* A zeroed packet of `type` with that header, ready for its body. The
 * first HELLO or HELLO_ACK built tells the session which end it is
 * (peer_name). */
void aftp_session_packet(aftp_session *ss, uint8_t type, aftp_wire_packet *p);
/* Encodes pkt (its header filled by aftp_session_header) into buf, seals
 * it when the session is protected, and fills dg; on success the packet
 * number is consumed. */
int aftp_session_encode(aftp_session *ss, const aftp_wire_packet *pkt, uint8_t *buf, size_t cap,
                        aftp_datagram *dg);
/* A datagram built outside aftp_session_encode (DATA) left: consume its
 * packet number and count it. */
void aftp_session_sent(aftp_session *ss, const aftp_datagram *dg);
/* A datagram left that repeats an earlier one (same packet number): count it. */
void aftp_session_resent(aftp_session *ss, const aftp_datagram *dg);

void aftp_session_event(aftp_session *ss, int type, int error, const aftp_file_info *info,
                        const uint8_t *digest);

/* Start closing: CLOSE(wire_error) is due, state CLOSING for `drain_ns`,
 * then CLOSED with `error`. No effect once closing or closed. */
void aftp_session_start_closing(aftp_session *ss, int error, uint16_t wire_error,
                                uint64_t drain_ns);
/* Section 9.11, a client's quick close once every file has its result:
 * CLOSE(NONE) sent `copies` times (clamped to [AFTP_SESSION_QUICK_CLOSES,
 * AFTP_SESSION_QUICK_CLOSES_MAX]), AFTP_SESSION_QUICK_SPACING_NS apart,
 * then CLOSED with AFTP_OK without waiting for the answer. No effect once
 * closing or closed. */
#define AFTP_SESSION_QUICK_CLOSES 3
#define AFTP_SESSION_QUICK_CLOSES_MAX 16
#define AFTP_SESSION_QUICK_SPACING_NS 1000000u
void aftp_session_close_done(aftp_session *ss, unsigned copies);
/* How many copies make the loss of them all rarer than once in a million
 * at loss rate p: three below 1%, five at 5%, the cap at 42% and above. */
unsigned aftp_session_quick_close_copies(double p);
/* CLOSED at once (no CLOSE sent): emits the CLOSED event. Idempotent. */
void aftp_session_set_closed(aftp_session *ss, int error);
/* The local error a peer's CLOSE means (NONE: OK, but PEER_CLOSED while
 * this end has a file in progress, section 9.11; CANCELLED: CANCELLED;
 * otherwise PEER_CLOSED) and its reason kept, printable, as the message;
 * for CANCELLED the message says who cancelled ("the receiver cancelled
 * the transfer", the peer's reason after it when it says more). */
int aftp_session_peer_close(aftp_session *ss, const aftp_wire_close *c, int in_progress);
/* Section 9.11: the peer's CLOSE arrived outside our own closing and the
 * session is CLOSED: one CLOSE(NONE), with no reason, answers it, so that
 * the peer's closing period ends at once instead of after 3 PTO. */
void aftp_session_answer_close(aftp_session *ss);
/* Encodes the due CLOSE. */
int aftp_session_encode_close(aftp_session *ss, uint8_t *buf, size_t cap, aftp_datagram *dg);

/* The counters, with the RTT figures of `rtt` (zero before a sample) and
 * the key updates. */
void aftp_session_stats(const aftp_session *ss, const aftp_rtt *rtt, aftp_stats *out);

/* Earliest of the idle and draining deadlines. */
uint64_t aftp_session_expiry(const aftp_session *ss);
/* The timer due at now_ns. A closing period that ran out before the first
 * CLOSE left is restarted (once) instead. */
enum aftp_session_timer aftp_session_timer_due(aftp_session *ss, uint64_t now_ns);

/* Keep text (NUL-terminated) as the detail of the CLOSED event. */
void aftp_session_set_text(aftp_session *ss, const char *text);

/* What aftp_X_read returns: the session's error once it is closing or
 * closed because of one, AFTP_OK otherwise. */
int aftp_session_failure(const aftp_session *ss);

#endif /* AFTP_SESSION_H */
