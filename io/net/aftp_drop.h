/*
 * TEST-ONLY datagram loss on the real socket path. In a build with the
 * test hooks (CMake option AFTP_TEST_HOOKS, never in a release), when the
 * environment variable AFTP_TEST_DROP=RATE[,SEED] is set (RATE a fraction
 * such as 0.01, or a percentage such as 1%), the io layer discards that
 * fraction of its outgoing datagrams just before sendmmsg, chosen by a
 * pseudo-random sequence fixed by SEED (default 1), so loss repair runs
 * through real sockets reproducibly. A build without the hooks has no code
 * that reads the variable.
 */
#ifndef AFTP_DROP_H
#define AFTP_DROP_H

#include <stdint.h>

#include "aftp/aftp_error.h"

#define AFTP_DROP_ENV "AFTP_TEST_DROP"

typedef struct aftp_drop {
    uint64_t threshold; /* drop when the next 32-bit draw is below this; 0: off */
    uint64_t state;
    uint64_t dropped;
} aftp_drop;

/* Parses "RATE[,SEED]"; RATE in [0, 1] (or [0%, 100%]). */
int aftp_drop_parse(const char *spec, aftp_drop *d);
/* Reads AFTP_DROP_ENV in a build with the test hooks: off when unset,
 * error when set but malformed. Without the hooks: off. */
int aftp_drop_from_env(aftp_drop *d);
/* The warning a socket with the shim on owes its user; "" when off. */
const char *aftp_drop_warning(const aftp_drop *d);
/* 1 when the next datagram must be discarded. */
int aftp_drop_next(aftp_drop *d);

#endif /* AFTP_DROP_H */
