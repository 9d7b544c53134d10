/*
 * The client's end of the handshake (spec sections 9.3, 6.3, 14.2), for
 * whichever engine the client runs: the sender in a push, the receiver in
 * a pull (section 9.15). It builds the HELLO (the cipher offer, message 1
 * built once so every resend carries the same bytes, a RETRY's cookie,
 * the extensions of the role) and checks the server's HELLO_ACK. The
 * engine keeps its own timers and closing; this module only says what
 * happened.
 */
#ifndef AFTP_HELLO_CLIENT_H
#define AFTP_HELLO_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_handshake.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"

typedef struct aftp_hello_client {
    aftp_handshake *hs;    /* until HELLO_ACK authenticated the server */
    uint8_t role;          /* AFTP_WIRE_ROLE_PUSH or _PULL */
    uint8_t offer[AFTP_WIRE_MAX_CIPHERS];
    uint8_t offer_count;
    uint64_t unix_ns;      /* message 1's time, fixed at init */
    uint8_t msg1[AFTP_HS_MAX_INIT]; /* written at the first HELLO, then resent as is */
    size_t msg1_len;
    uint8_t early[AFTP_HS_MAX_PAYLOAD]; /* message 1's early entries (spec 12.3.4) */
    size_t early_len;
    int retried;           /* a RETRY was followed (at most one) */
    uint8_t token[AFTP_WIRE_MAX_TOKEN];
    uint16_t token_len;
    uint32_t window;       /* the PIPELINE proposed, 0: none */
    uint64_t key_update_packets;
} aftp_hello_client;

/* What an accepted HELLO_ACK grants: the cap the sender must obey (push,
 * RATE_CAP; 0: none) and the session's entry window (0: one-file mode). */
typedef struct aftp_hello_grant {
    uint64_t rate_cap_bps;
    uint32_t window;
    int early_entries;     /* the server took message 1's entries (EARLY_ENTRIES) */
    int pull_end;          /* pull: the server sends PULL_END (spec 12.3.5) */
} aftp_hello_grant;

/* aftp_hello_client_ack's answer for a HELLO_ACK that cannot be the
 * server's: dropped, nothing changed. */
#define AFTP_HELLO_DROPPED 1

/* The offer and, for a protected one, the handshake of message 1 (with
 * the time of sec->unix_time_ns; written at the first HELLO, so early
 * entries can still join it). ss must be initialised: its id and datagram size
 * go into the prologue. AFTP_ERR_BAD_KEY when the keys cannot make a
 * handshake; NO_MEMORY. */
int aftp_hello_client_init(aftp_hello_client *c, const aftp_session *ss,
                           const aftp_security_settings *sec, uint8_t role, uint32_t window);
void aftp_hello_client_free(aftp_hello_client *c);

/* Section 12.3.4: message 1 carries `len` bytes of early entries (an
 * ENTRIES body, at most AFTP_HS_MAX_PAYLOAD). 1 when taken; 0 when it is
 * too late (the first HELLO left: message 1 never changes), the session
 * unprotected (no message 1) or the bytes too many. */
int aftp_hello_client_set_early(aftp_hello_client *c, const uint8_t *payload, size_t len);

/* The HELLO, with a new packet number (the engine arms its timer). */
int aftp_hello_client_encode(aftp_hello_client *c, aftp_session *ss, uint8_t *buf, size_t cap,
                             aftp_datagram *dg);
/* A RETRY while waiting for HELLO_ACK: 1 when followed (the HELLO goes
 * again at once with the cookie), 0 when it is one too many. */
int aftp_hello_client_retry(aftp_hello_client *c, const aftp_wire_retry *t);
/* A VERSION_NEG in HANDSHAKE ends the attempt (AFTP_ERR_VERSION) unless
 * it lists our version, which a genuine server would not (section 12.2). */
int aftp_hello_client_version_refused(const aftp_wire_version_neg *v);

/* Section 9.3 step 4 on a HELLO_ACK. AFTP_OK: the session has the
 * server's id, its negotiated datagram size and (protected) its keys, and
 * *grant says what the server granted. AFTP_HELLO_DROPPED: not the
 * server's answer (protected: no message 2, a cipher not offered).
 * Negative: the session must end with that error, its text set in ss;
 * *violation 1 when a CLOSE(PROTOCOL) is due (an authenticated server
 * broke 6.3), 0 when it ends silently (message 2 failed, server id 0). */
int aftp_hello_client_ack(aftp_hello_client *c, aftp_session *ss, const aftp_wire_hello_ack *a,
                          aftp_hello_grant *grant, int *violation);

#endif /* AFTP_HELLO_CLIENT_H */
