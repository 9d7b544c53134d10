/*
 * The server's end of the handshake (spec sections 9.3, 12.3, 14.2, 14.3),
 * for whichever engine the server runs: the receiver in a push, the sender
 * in a pull (section 9.15). It judges the client's HELLO (role, ciphers,
 * message 1 and the admission policy, the rate cap, the entry window),
 * builds the HELLO_ACK (protected: once, with message 2, its very bytes
 * resent for a repeated HELLO), and knows when the client's address is
 * proved. Refusals close the session through aftp_session (CLOSE in
 * clear); the engine keeps everything else.
 */
#ifndef AFTP_HELLO_SERVER_H
#define AFTP_HELLO_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_handshake.h"
#include "common/aftp_rtt.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"

/* A HELLO_ACK's extensions: RATE_CAP, PIPELINE, PULL, PULL_END,
 * EARLY_ENTRIES, then HANDSHAKE. */
#define AFTP_HELLO_ACK_EXT_MAX                                                                 \
    (4u + AFTP_WIRE_RATE_CAP_LEN + 4u + AFTP_WIRE_PIPELINE_LEN + 4u + 4u + 4u + 4u +           \
     AFTP_HS_MAX_RESPONSE)
/* A HELLO_ACK: header, fixed fields, extension length, its TLVs. */
#define AFTP_HELLO_ACK_MAX (AFTP_WIRE_HEADER_LEN + 9u + AFTP_HELLO_ACK_EXT_MAX)

typedef struct aftp_hello_server {
    const aftp_security_settings *sec; /* the engine's copy (identity moved out) */
    uint8_t *identity;      /* own private key (sodium_malloc) until the handshake */
    uint8_t role;           /* the role this end serves: AFTP_WIRE_ROLE_PUSH or _PULL */
    uint32_t own_window;    /* the largest entry window it runs, 0: none */
    int seen;               /* a HELLO made this session the client's */
    int confirmed;          /* the client spoke under the session's id (section 14.3) */
    int ack_due;
    uint64_t ack_sent_ns;
    aftp_handshake *hs;     /* between admission and the answer */
    uint8_t cipher;
    uint8_t msg1[AFTP_HS_MAX_INIT]; /* the client's message 1, to know its resends */
    size_t msg1_len;
    uint8_t ack[AFTP_HELLO_ACK_MAX]; /* protected: the answer, resent as is */
    size_t ack_len;
    uint64_t rate_cap_bps;  /* the policy's cap for this client, 0: none */
    uint32_t window;        /* the session's entry window (PIPELINE), 0: one-file mode */
    uint8_t early[AFTP_HS_MAX_PAYLOAD]; /* message 1's early entries (spec 12.3.4) */
    size_t early_len;       /* 0: none, or they cannot be taken */
    int early_taken;        /* the engine took them: the HELLO_ACK says so */
    int pull_end;           /* pull: the HELLO announced PULL_END, the ack answers it */
} aftp_hello_server;

/* Keeps the private key in guarded memory and clears sec->identity (sec
 * stays the engine's: the module reads its policy at the HELLO). */
int aftp_hello_server_init(aftp_hello_server *h, aftp_security_settings *sec, uint8_t role,
                           uint32_t own_window);
void aftp_hello_server_free(aftp_hello_server *h);

/* aftp_hello_server_hello's answer for a client admitted: the engine
 * makes ready for h->window (it may set it to 0 when it cannot), then
 * calls aftp_hello_server_answer. */
#define AFTP_HELLO_ADMITTED 1

/* A HELLO (section 9.3 step 2, or a repeat, step 3): AFTP_HELLO_ADMITTED,
 * or 0 when it is dealt with here: the same answer due again, dropped, or
 * refused (the session then closes, CLOSE in clear, after drain_ns). */
int aftp_hello_server_hello(aftp_hello_server *h, aftp_session *ss, const aftp_wire_packet *p,
                            uint64_t drain_ns);
/* Section 12.3.4, for an admitted client in a pipelined session (after
 * the engine settled h->window, before aftp_hello_server_answer): the
 * early entries message 1 carried, when the session can take them (they
 * decode, start the stream at entry 1, block 0, and fit the window).
 * AFTP_OK and *out (its records point into h), or AFTP_ERR_NOT_FOUND:
 * none to take, ignored as a server without the extension would; the
 * client then sends them in ENTRIES. The engine that takes them sets
 * h->early_taken. */
int aftp_hello_server_early(const aftp_hello_server *h, aftp_wire_entries *out);

/* Section 12.3.4, the same for a pull: the request message 1 carried,
 * when it decodes as a PULL_REQUEST body. AFTP_OK and *out (its paths
 * point into h), or AFTP_ERR_NOT_FOUND: none to take; the client then
 * sends its PULL_REQUEST after the handshake. The engine that takes it
 * sets h->early_taken. */
int aftp_hello_server_early_request(const aftp_hello_server *h, aftp_wire_pull_request *out);

/* Builds the HELLO_ACK for h->window and, protected, installs the keys:
 * AFTP_OK (the answer is due), or the error the session closed with. */
int aftp_hello_server_answer(aftp_hello_server *h, aftp_session *ss);
int aftp_hello_server_encode(aftp_hello_server *h, aftp_session *ss, uint8_t *buf, size_t cap,
                             aftp_datagram *dg);

/* The header is for this session: a HELLO of its client (or the first
 * one), anything else carrying the server's id. */
int aftp_hello_server_addressed(const aftp_hello_server *h, const aftp_session *ss,
                                const aftp_wire_header *hdr);
/* Section 14.3: may a datagram leave before the client proved its address? */
int aftp_hello_server_may_send(const aftp_hello_server *h, const aftp_session *ss);
/* Section 9.3 step 5: the first packet under the server's id proves the
 * address; gives the one RTT sample (into rtt; NULL: none, the packet was
 * a resend), TRANSFER, CONNECTED. Returns 1 the first time, 0 after. */
int aftp_hello_server_confirm(aftp_hello_server *h, aftp_session *ss, aftp_rtt *rtt);

#endif /* AFTP_HELLO_SERVER_H */
