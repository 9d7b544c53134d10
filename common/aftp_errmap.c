/* Wire <-> local error mapping (aftp_errmap.h), one table for both ways. */
#include "common/aftp_errmap.h"

#include "aftp/aftp_error.h"
#include "proto/aftp_wire.h"

enum { BOTH_WAYS, TO_WIRE_ONLY };

static const struct {
    uint16_t wire;
    int local;
    int direction;
} error_table[] = {
    {AFTP_WIRE_ERR_NONE, AFTP_OK, BOTH_WAYS},
    {AFTP_WIRE_ERR_FILE_EXISTS, AFTP_ERR_FILE_EXISTS, BOTH_WAYS},
    {AFTP_WIRE_ERR_NO_SPACE, AFTP_ERR_NO_SPACE, BOTH_WAYS},
    {AFTP_WIRE_ERR_IO, AFTP_ERR_IO, BOTH_WAYS},
    {AFTP_WIRE_ERR_DIGEST_MISMATCH, AFTP_ERR_DIGEST_MISMATCH, BOTH_WAYS},
    {AFTP_WIRE_ERR_PATH_REJECTED, AFTP_ERR_PATH_REJECTED, BOTH_WAYS},
    {AFTP_WIRE_ERR_PERMISSION, AFTP_ERR_PERMISSION, BOTH_WAYS},
    {AFTP_WIRE_ERR_IDLE_TIMEOUT, AFTP_ERR_IDLE_TIMEOUT, BOTH_WAYS},
    {AFTP_WIRE_ERR_SOURCE_CHANGED, AFTP_ERR_SOURCE_CHANGED, BOTH_WAYS},
    {AFTP_WIRE_ERR_LIMIT, AFTP_ERR_LIMIT, BOTH_WAYS},
    {AFTP_WIRE_ERR_VERSION, AFTP_ERR_VERSION, BOTH_WAYS},
    {AFTP_WIRE_ERR_CANCELLED, AFTP_ERR_CANCELLED, BOTH_WAYS},
    /* Spec 14.3: the server did not admit the client's key. */
    {AFTP_WIRE_ERR_UNAUTHORIZED, AFTP_ERR_UNKNOWN_PEER, BOTH_WAYS},
    /* A local failure to parse or follow the protocol is the peer's fault. */
    {AFTP_WIRE_ERR_PROTOCOL, AFTP_ERR_MALFORMED, TO_WIRE_ONLY},
    {AFTP_WIRE_ERR_PROTOCOL, AFTP_ERR_TRUNCATED, TO_WIRE_ONLY},
    {AFTP_WIRE_ERR_PROTOCOL, AFTP_ERR_UNKNOWN_TYPE, TO_WIRE_ONLY},
    {AFTP_WIRE_ERR_IO, AFTP_ERR_NOT_FOUND, TO_WIRE_ONLY},
    {AFTP_WIRE_ERR_NO_SPACE, AFTP_ERR_NO_MEMORY, TO_WIRE_ONLY},
    /* Spec 6.17: NOT_FOUND is a PULL_REPLY's answer only; after the line
     * above, so every other packet still says IO for it (push unchanged). */
    {AFTP_WIRE_ERR_NOT_FOUND, AFTP_ERR_NOT_FOUND, BOTH_WAYS},
};

#define TABLE_LEN (sizeof error_table / sizeof error_table[0])

int aftp_errmap_to_local(uint16_t wire_error)
{
    for (size_t i = 0; i < TABLE_LEN; i++)
        if (error_table[i].direction == BOTH_WAYS && error_table[i].wire == wire_error)
            return error_table[i].local;
    return AFTP_ERR_PEER_CLOSED;
}

uint16_t aftp_errmap_to_wire(int error)
{
    for (size_t i = 0; i < TABLE_LEN; i++)
        if (error_table[i].local == error)
            return error_table[i].wire;
    return AFTP_WIRE_ERR_INTERNAL;
}
