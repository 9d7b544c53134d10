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

/* Sends o->file and returns res->error. */
int aftp_push_run(const aftp_push_opts *o, aftp_io_result *res);

#endif /* AFTP_PUSH_H */
