/*
 * The one table between wire error codes (FILE_REPLY, FILE_RESULT, CLOSE)
 * and local aftp_error codes, used in both directions.
 */
#ifndef AFTP_ERRMAP_H
#define AFTP_ERRMAP_H

#include <stdint.h>

/* Wire -> local. NONE -> AFTP_OK; codes without a local twin (PROTOCOL,
 * INTERNAL, unknown) -> AFTP_ERR_PEER_CLOSED. */
int aftp_errmap_to_local(uint16_t wire_error);
/* Local -> wire. AFTP_OK -> NONE; malformed-input codes -> PROTOCOL;
 * anything without a wire twin -> INTERNAL. */
uint16_t aftp_errmap_to_wire(int error);

#endif /* AFTP_ERRMAP_H */
