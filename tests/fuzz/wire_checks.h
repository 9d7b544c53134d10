/* Shared properties of aftp_wire_decode (see wire_checks.c). */
#ifndef AFTP_FUZZ_WIRE_CHECKS_H
#define AFTP_FUZZ_WIRE_CHECKS_H

#include "fuzz_harness.h"
#include "proto/aftp_wire.h"

/* Decodes data[0..size) and aborts if any property of wire_checks.c fails. */
void fuzz_check_datagram(const uint8_t *data, size_t size);

#endif /* AFTP_FUZZ_WIRE_CHECKS_H */
