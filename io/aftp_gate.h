/*
 * The server's gate for new HELLOs (spec section 14, RETRY): which one may
 * start a session now, which one is asked to prove its address first
 * (a stateless RETRY with a cookie, common/aftp_cookie.h), which one is
 * dropped.
 *
 * A HELLO whose COOKIE extension carries a valid token comes from an
 * address that receives our datagrams (validated). Without one, a HELLO
 * starts a session directly only when the server is idle and few HELLOs
 * arrive; under load (a session active, or more than
 * AFTP_GATE_MAX_UNVALIDATED unvalidated HELLOs in the current second) it
 * gets a RETRY, which is far smaller than the HELLO (no amplification) and
 * limited to AFTP_GATE_MAX_RETRIES per second. The gate keeps no state per
 * client, so one source can never hold more than the single pending
 * handshake the server runs at a time. A validated HELLO that arrives
 * while a session is active is dropped: its client resends it (every 2 s
 * at most), and the copy that arrives once the server is idle starts its
 * session, so a waiting client is served next rather than starved.
 *
 * TEST-ONLY: AFTP_TEST_RETRY=1 in the environment makes every HELLO without
 * a valid cookie get a RETRY, so tests exercise the exchange.
 */
#ifndef AFTP_GATE_H
#define AFTP_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/aftp_cookie.h"

#define AFTP_GATE_RETRY_ENV "AFTP_TEST_RETRY"
#define AFTP_GATE_MAX_UNVALIDATED 8u /* HELLOs per second before RETRY is required */
#define AFTP_GATE_MAX_RETRIES 256u   /* RETRYs sent per second */
#define AFTP_GATE_REPLY_MAX 64u      /* bytes of a RETRY datagram */

enum aftp_gate_verdict {
    AFTP_GATE_START = 1, /* start a session with this HELLO */
    AFTP_GATE_RETRY,     /* send the reply (a RETRY) back to the source */
    AFTP_GATE_DROP       /* ignore it */
};

typedef struct aftp_gate {
    uint8_t secret[AFTP_COOKIE_SECRET_LEN]; /* per process: cookies die with it */
    int force_retry;                        /* AFTP_GATE_RETRY_ENV */
    uint32_t second;                        /* the second the counters below count */
    unsigned unvalidated;                   /* HELLOs without a valid cookie in it */
    unsigned retries;                       /* RETRYs sent in it */
    uint64_t retries_sent, dropped;         /* totals, for tests and logs */
} aftp_gate;

/* A fresh random secret; reads AFTP_GATE_RETRY_ENV. */
int aftp_gate_init(aftp_gate *g);
void aftp_gate_fini(aftp_gate *g); /* wipes the secret */

/* The verdict on a full-size HELLO of our version (pkt, len) from `from`
 * at now_s (whole seconds of a monotonic clock); `busy`: a session is
 * active. On AFTP_GATE_RETRY reply[0..*reply_len) holds the RETRY
 * (reply: AFTP_GATE_REPLY_MAX bytes). */
int aftp_gate_hello(aftp_gate *g, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    int busy, uint32_t now_s, uint8_t *reply, size_t *reply_len);

#endif /* AFTP_GATE_H */
