/*
 * The server's front door (spec sections 9.2 step 2, 9.3 step 2, 12.2,
 * 14.3, 14.9), sans-I/O: it is shown each datagram that reaches the
 * server's listening socket and no session takes, with its source address
 * and the time, and decides what to do with it. It never touches a socket
 * or a clock: it returns a verdict and, when there is something to send
 * back, the bytes to send.
 *
 *  - a long datagram (at least 1200 bytes) in a version we do not speak
 *    gets VERSION_NEG (spec 12.2); this is the server's only VERSION_NEG
 *    answerer;
 *  - a full-size HELLO of our version carrying KEY_REQUEST gets SERVER_KEY
 *    (the server's static public key), whatever the load, and never starts
 *    a session; a server without a static key (cipher NONE) stays silent;
 *  - a HELLO whose COOKIE extension carries a valid token comes from an
 *    address that receives our datagrams (validated): it starts a session
 *    (whether the server then serves it, refuses it at its limit or drops
 *    it is the caller's decision, aftp_hub.h);
 *  - a HELLO without a valid cookie starts a session directly only when
 *    the server is not under load (the caller says: its table nearly
 *    full, many handshakes unconfirmed) and few such HELLOs arrive; else
 *    (or past AFTP_DOOR_MAX_UNVALIDATED of them in the current second) it
 *    gets a RETRY carrying a cookie (aftp_cookie.h);
 *  - everything else is dropped: shorter datagrams, HELLOs that do not
 *    decode, other types, the late copies of the HELLO whose session was
 *    started last.
 *
 * Every reply is at most AFTP_DOOR_REPLY_MAX bytes and answers a datagram
 * of at least 1200: far below the 3x anti-amplification bound (spec
 * 14.3). VERSION_NEG, RETRY and SERVER_KEY share a budget of
 * AFTP_DOOR_MAX_REPLIES per second: past it, silence. The door keeps no
 * state per client; a source's HELLO runs its handshake at once, on the
 * caller's thread, and only an authenticated one leaves state (a session).
 *
 * What a started HELLO then meets (its role, its ciphers, message 1, the
 * admission of the client's key: CLOSE(PROTOCOL) or CLOSE(UNAUTHORIZED),
 * or silence) is decided by the receiver engine that the driver creates
 * for it, the one place that holds the server's handshake state; the door
 * hands the HELLO over decoded, with whether a cookie validated it.
 *
 * Cookies are made under a random secret that the door replaces every
 * AFTP_DOOR_SECRET_PERIOD_S seconds of the caller's clock, keeping the
 * previous one so a token issued just before a change lives its
 * AFTP_COOKIE_MAX_AGE_S; a secret that leaked stops minting valid tokens
 * two changes later.
 */
#ifndef AFTP_DOOR_H
#define AFTP_DOOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "door/aftp_cookie.h"
#include "proto/aftp_wire.h"

#define AFTP_DOOR_MAX_UNVALIDATED 8u /* HELLOs per second before RETRY is required */
#define AFTP_DOOR_MAX_REPLIES 256u   /* stateless replies per second */
#define AFTP_DOOR_REPLY_MAX 64u      /* bytes of a VERSION_NEG, RETRY or SERVER_KEY */
#define AFTP_DOOR_SECRET_PERIOD_S 60u /* a cookie secret's turn as the current one */
/* At most this many dropped HELLOs are reported per period: a flood of
 * them cannot fill the server's log. */
#define AFTP_DOOR_DROP_REPORTS 6u
#define AFTP_DOOR_DROP_PERIOD_NS UINT64_C(60000000000)

_Static_assert(AFTP_DOOR_SECRET_PERIOD_S >= AFTP_COOKIE_MAX_AGE_S,
               "a token outlives at most one change of secret");

enum aftp_door_action {
    AFTP_DOOR_DROP = 0, /* ignore it */
    AFTP_DOOR_REPLY,    /* send reply[0..reply_len) back to the source */
    AFTP_DOOR_START     /* start a session with this HELLO */
};

/* Fills buf with len random bytes (the cookie secrets). */
typedef void (*aftp_door_random_fn)(void *user, uint8_t *buf, size_t len);

typedef struct aftp_door_settings {
    const uint8_t *server_key; /* AFTP_WIRE_SERVER_KEY_LEN bytes, copied; NULL: none, key
                                * requests get nothing (an unprotected server) */
    int force_retry;           /* every HELLO without a valid cookie gets a RETRY, idle or
                                * not (the serve driver's test hook) */
    aftp_door_random_fn random; /* NULL: libsodium's generator */
    void *random_user;
} aftp_door_settings;

typedef struct aftp_door_verdict {
    int action;                        /* enum aftp_door_action */
    uint8_t reply_type;                /* REPLY: AFTP_WIRE_VERSION_NEG, RETRY or SERVER_KEY */
    uint8_t reply[AFTP_DOOR_REPLY_MAX];
    size_t reply_len;
    aftp_wire_packet hello; /* START: the HELLO decoded (it borrows the datagram) */
    int validated;          /* START: a valid cookie proved the source's address */
} aftp_door_verdict;

/* The HELLO a session was started with, whose late copies are dropped. */
typedef struct aftp_door_peer {
    struct sockaddr_storage addr;
    uint32_t conn_id;
    int set;
} aftp_door_peer;

typedef struct aftp_door {
    uint8_t secret[AFTP_COOKIE_SECRET_LEN];   /* makes and checks cookies */
    uint8_t previous[AFTP_COOKIE_SECRET_LEN]; /* checks the cookies it made */
    uint32_t secret_since_s;                  /* when `secret` became current */
    uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN];
    int have_server_key;
    int force_retry;
    aftp_door_random_fn random;
    void *random_user;
    uint32_t second;       /* the second the two counters below count */
    unsigned unvalidated;  /* HELLOs without a valid cookie in it */
    unsigned replies;      /* stateless replies given in it */
    aftp_door_peer started; /* the HELLO of the latest session */
    aftp_door_peer reported; /* the HELLO last reported as dropped */
    uint64_t report_period_ns; /* start of the current report period */
    unsigned reports;          /* dropped HELLOs reported in it */
    uint64_t unreported;       /* kept back since the last report */
    uint64_t retries_sent, keys_sent, version_negs_sent, started_count, dropped; /* totals */
} aftp_door;

/* Draws the first cookie secrets; now_ns: the caller's clock (the one
 * every later call uses). AFTP_OK, or AFTP_ERR_INTERNAL when libsodium
 * does not start. */
int aftp_door_init(aftp_door *d, const aftp_door_settings *s, uint64_t now_ns);
void aftp_door_fini(aftp_door *d); /* wipes the secrets */

/* The verdict (enum aftp_door_action, also in v->action) on datagram
 * (pkt, len) from `from` at now_ns; `under_load`: a HELLO must prove its
 * address (a cookie) before its handshake runs. */
int aftp_door_input(aftp_door *d, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    int under_load, uint64_t now_ns, aftp_door_verdict *v);

/* The HELLO (conn_id) from `from` started a session: its late copies are
 * dropped from now on. */
void aftp_door_session_started(aftp_door *d, const struct sockaddr *from, uint32_t conn_id);

/* A started HELLO from `from` (conn_id) went nowhere (the engine dropped
 * it: message 1 did not open, a replay). 1 when the operator is to be told
 * now, with *unreported the drops kept back since the last report; 0 when
 * it is kept back: the copies a client resends are one handshake, and at
 * most AFTP_DOOR_DROP_REPORTS are reported per AFTP_DOOR_DROP_PERIOD_NS. */
int aftp_door_report_drop(aftp_door *d, const struct sockaddr *from, uint32_t conn_id,
                          uint64_t now_ns, uint64_t *unreported);

/* Whether a and b are the same IPv4 or IPv6 address and port. */
int aftp_door_same_addr(const struct sockaddr *a, const struct sockaddr *b);
/* Whether a and b are the same IPv4 or IPv6 address, whatever the ports. */
int aftp_door_same_host(const struct sockaddr *a, const struct sockaddr *b);

#endif /* AFTP_DOOR_H */
