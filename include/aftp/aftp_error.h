/*
 * aftp error codes.
 *
 * 0 is success; every failure is a negative code. Codes live in bands by
 * category so a caller can classify an unknown future code by its range:
 *   -100 .. -199  usage: the caller asked for something invalid
 *   -200 .. -299  protocol / peer: the packet or the peer misbehaved
 *   -300 .. -399  I/O / system: files, sockets, memory
 *   -400 .. -499  fatal / internal
 * Codes are never renumbered; new codes take the next free value in a band.
 */
#ifndef AFTP_ERROR_H
#define AFTP_ERROR_H

#include "aftp/aftp_export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum aftp_error {
    AFTP_OK = 0,

    /* usage */
    AFTP_ERR_INVALID_ARGUMENT = -100,
    AFTP_ERR_BUFFER_TOO_SMALL = -101,
    AFTP_ERR_INVALID_STATE = -102,
    AFTP_ERR_FILE_EXISTS = -103,
    AFTP_ERR_NOT_FOUND = -104,
    AFTP_ERR_PATH_REJECTED = -105,
    AFTP_ERR_CANCELLED = -106,
    AFTP_ERR_BAD_KEY = -107,

    /* protocol / peer */
    AFTP_ERR_TRUNCATED = -200,
    AFTP_ERR_MALFORMED = -201,
    AFTP_ERR_UNKNOWN_TYPE = -202,
    AFTP_ERR_VERSION = -203,
    AFTP_ERR_LIMIT = -204,
    AFTP_ERR_PEER_CLOSED = -205,
    AFTP_ERR_IDLE_TIMEOUT = -206,
    AFTP_ERR_DIGEST_MISMATCH = -207,
    AFTP_ERR_PEER_REFUSED = -208,
    AFTP_ERR_AUTH = -209,
    AFTP_ERR_REPLAY = -210,
    AFTP_ERR_UNKNOWN_PEER = -211,

    /* I/O / system */
    AFTP_ERR_IO = -300,
    AFTP_ERR_NO_SPACE = -301,
    AFTP_ERR_NO_MEMORY = -302,
    AFTP_ERR_PERMISSION = -303,
    AFTP_ERR_NETWORK = -304,
    AFTP_ERR_SOURCE_CHANGED = -305,

    /* fatal / internal */
    AFTP_ERR_INTERNAL = -400
};

/* A short, static, human-readable description of an error code.
 * Never returns NULL; unknown codes get a generic text naming the band. */
AFTP_EXTERN const char *aftp_strerror(int err);

/* The code's stable name, the enumerator's spelling ("AFTP_ERR_CANCELLED"
 * for -106, "AFTP_OK" for 0): for logs and machine-readable output, where
 * a name outlives a number's meaning to a reader. Static storage; NULL for
 * a code this version of the library does not know. Thread-safe. */
AFTP_EXTERN const char *aftp_error_name(int err);

/* Non-zero when retrying the same operation later may succeed
 * (network trouble, a dead or busy peer, a transient resource shortage). */
AFTP_EXTERN int aftp_err_is_retryable(int err);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_ERROR_H */
