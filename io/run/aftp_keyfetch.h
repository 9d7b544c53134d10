/*
 * Client side of the key request (spec section 14.9) over a socket: asks a
 * server for its static public key with the request of door/aftp_keyreq.h
 * and waits for the SERVER_KEY that answers it, from the server's address
 * and with the request's connection id. The answer is not authenticated: the
 * caller shows its fingerprint to a user, who decides whether to trust it
 * (trust on first use), or only compares it with the key it pins to
 * explain a server that ignores its HELLO (aftp_push.h). No session is
 * started on either side.
 */
#ifndef AFTP_KEYFETCH_H
#define AFTP_KEYFETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aftp_udp.h"
#include "door/aftp_keyreq.h"

#define AFTP_KEYFETCH_ATTEMPTS 4u                /* the request, then up to 3 resends */
#define AFTP_KEYFETCH_INTERVAL_NS 1000000000u    /* between two sends */

typedef struct aftp_keyfetch_opts {
    const struct sockaddr *peer;
    socklen_t peer_len;
    unsigned attempts;                      /* 0: AFTP_KEYFETCH_ATTEMPTS */
    uint64_t interval_ns;                   /* 0: AFTP_KEYFETCH_INTERVAL_NS */
    atomic_int *interrupt;       /* optional: non-zero cancels */
} aftp_keyfetch_opts;

/* A key request run step by step, alongside other work (the push driver
 * asks a server that does not answer its HELLO): its own socket and
 * connection id, the request resent every interval_ns up to `attempts`
 * times. */
typedef struct aftp_keyprobe {
    aftp_udp udp;
    aftp_keyreq req; /* the request and its schedule */
} aftp_keyprobe;

/* Opens the probe's socket and builds its request (nothing sent yet);
 * o->interrupt is not used. AFTP_OK, or the error of the socket. */
int aftp_keyprobe_open(aftp_keyprobe *p, const aftp_keyfetch_opts *o);
/* Reads what is queued, then sends the request when due, without
 * blocking: 1 and key when the answer came; 0 while waiting;
 * AFTP_ERR_IDLE_TIMEOUT once the last request went unanswered for
 * interval_ns; AFTP_ERR_NETWORK when the peer is unreachable (ICMP). */
int aftp_keyprobe_step(aftp_keyprobe *p, uint64_t now_ns, uint8_t *key);
void aftp_keyprobe_close(aftp_keyprobe *p);

/* Asks o->peer for its key, sending the request up to o->attempts times,
 * o->interval_ns apart. AFTP_OK and key; AFTP_ERR_IDLE_TIMEOUT when no
 * answer came; AFTP_ERR_NETWORK when the peer is unreachable (ICMP);
 * AFTP_ERR_CANCELLED on *interrupt; another error when no socket opens. */
int aftp_keyfetch_run(const aftp_keyfetch_opts *o, uint8_t *key);

#endif /* AFTP_KEYFETCH_H */
