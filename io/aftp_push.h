/*
 * Client side of a push transfer: one local file to one receiver over a
 * real UDP socket (source mapping + sender engine + datapath loop).
 */
#ifndef AFTP_PUSH_H
#define AFTP_PUSH_H

#include <stdint.h>
#include <sys/socket.h>

#include "aftp_session.h"

typedef struct aftp_push_opts {
    const char *file;
    const struct sockaddr *peer;
    socklen_t peer_len;
    uint64_t rate_bps;         /* FIXED: the rate; adaptive policies: the starting cap */
    int policy;                /* enum aftp_cc_policy */
    uint64_t max_rate_bps;     /* 0: none */
    uint64_t min_rate_bps;     /* 0: none */
    uint64_t idle_timeout_ns; /* 0: the engine's default */
    uint16_t max_datagram;     /* largest datagram to send; 0: AFTP_IO_DATAGRAM */
    /* Keys (borrowed) and cipher; unix_time_ns is set here from the
     * wall clock when the session starts. */
    aftp_security_settings security;
    aftp_io_hooks hooks;
} aftp_push_opts;

/* A server that cannot open our HELLO (it holds another key than the one
 * pinned for it) stays silent by design (spec 14.2.5). When the handshake
 * of a protected session has not completed this long after the first
 * HELLO (or half the idle timeout, if shorter), the client asks the server
 * for its key (spec 14.9) alongside, as a diagnosis: an answer with
 * another key ends the attempt at once instead of at the idle timeout.
 * The answer is not authenticated and is used for nothing else. */
#define AFTP_PUSH_KEY_PROBE_NS UINT64_C(2000000000)

/* What the key request of an unanswered HELLO learnt. */
enum aftp_push_key_answer {
    AFTP_PUSH_KEY_NO_ANSWER, /* not asked, or no answer */
    AFTP_PUSH_KEY_PINNED,    /* the pinned key: the server is there, yet ignores the HELLO */
    AFTP_PUSH_KEY_OTHER      /* another key (server_key): io.error is AFTP_ERR_AUTH */
};

typedef struct aftp_push_result {
    aftp_io_result io;
    /* enum aftp_push_key_answer. Unauthenticated: a hint for the user,
     * never a key to trust. */
    int key_answer;
    uint8_t server_key[AFTP_KEY_LEN];
} aftp_push_result;

/* Sends o->file and returns res->io.error. */
int aftp_push_run(const aftp_push_opts *o, aftp_push_result *res);

#endif /* AFTP_PUSH_H */
