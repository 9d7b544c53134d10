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
 * limited to AFTP_GATE_MAX_REPLIES per second. The gate keeps no state per
 * client, so one source can never hold more than the single pending
 * handshake the server runs at a time. A validated HELLO that arrives
 * while a session is active is dropped: its client resends it (every 2 s
 * at most), and the copy that arrives once the server is idle starts its
 * session, so a waiting client is served next rather than starved.
 *
 * A HELLO carrying a KEY_REQUEST extension (spec section 14.9) is answered
 * with SERVER_KEY (the server's static public key) whatever the load, and
 * never starts a session: a client that does not know the key yet asks
 * for it, shows its fingerprint to its user, and starts over with a normal
 * HELLO. SERVER_KEY (48 bytes), RETRY and VERSION_NEG (the answer to a
 * datagram in a version we do not speak, spec section 12.2) share the
 * per-second budget of stateless replies: past it, silence.
 *
 * TEST-ONLY: in a build with the test hooks (CMake option AFTP_TEST_HOOKS,
 * never in a release), AFTP_TEST_RETRY=1 in the environment makes every
 * HELLO without a valid cookie get a RETRY, so tests exercise the exchange.
 * A build without the hooks has no code that reads the variable.
 */
#ifndef AFTP_GATE_H
#define AFTP_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/aftp_cookie.h"
#include "proto/aftp_wire.h"

#define AFTP_GATE_RETRY_ENV "AFTP_TEST_RETRY"
#define AFTP_GATE_MAX_UNVALIDATED 8u /* HELLOs per second before RETRY is required */
#define AFTP_GATE_MAX_REPLIES 256u   /* stateless replies (RETRY, SERVER_KEY) per second */
#define AFTP_GATE_REPLY_MAX 64u      /* bytes of a RETRY or SERVER_KEY datagram */

enum aftp_gate_verdict {
    AFTP_GATE_START = 1,  /* start a session with this HELLO */
    AFTP_GATE_RETRY,      /* send the reply (a RETRY) back to the source */
    AFTP_GATE_SERVER_KEY, /* send the reply (a SERVER_KEY) back to the source */
    AFTP_GATE_DROP        /* ignore it */
};

typedef struct aftp_gate {
    uint8_t secret[AFTP_COOKIE_SECRET_LEN]; /* per process: cookies die with it */
    uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN]; /* our static public key */
    int have_server_key;                    /* else key requests are dropped */
    int force_retry;                        /* AFTP_GATE_RETRY_ENV */
    uint32_t second;                        /* the second the counters below count */
    unsigned unvalidated;                   /* HELLOs without a valid cookie in it */
    unsigned replies;                       /* stateless replies sent in it */
    uint64_t retries_sent, keys_sent, version_negs_sent, dropped; /* totals, for tests and logs */
} aftp_gate;

/* A fresh random secret; reads AFTP_GATE_RETRY_ENV (test hooks only). server_key: the
 * server's static public key (AFTP_WIRE_SERVER_KEY_LEN bytes, copied), or
 * NULL when it has none (an unprotected server: key requests get nothing). */
int aftp_gate_init(aftp_gate *g, const uint8_t *server_key);
void aftp_gate_fini(aftp_gate *g); /* wipes the secret */
/* The warning a gate forcing RETRY owes its user; "" otherwise. */
const char *aftp_gate_warning(const aftp_gate *g);

/* The verdict on a full-size HELLO of our version (pkt, len) from `from`
 * at now_s (whole seconds of a monotonic clock); `busy`: a session is
 * active. On AFTP_GATE_RETRY and AFTP_GATE_SERVER_KEY reply[0..*reply_len)
 * holds the datagram to send back (reply: AFTP_GATE_REPLY_MAX bytes). */
int aftp_gate_hello(aftp_gate *g, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    int busy, uint32_t now_s, uint8_t *reply, size_t *reply_len);

/* A datagram (pkt, len) that is no HELLO of our version, at now_s: 1 when
 * it gets a VERSION_NEG (a long datagram in a version we do not speak,
 * spec section 12.2) within the reply budget, the datagram then in
 * reply[0..*reply_len) (reply: AFTP_GATE_REPLY_MAX bytes); 0 otherwise. */
int aftp_gate_version_neg(aftp_gate *g, const uint8_t *pkt, size_t len, uint32_t now_s,
                          uint8_t *reply, size_t *reply_len);

#endif /* AFTP_GATE_H */
