/*
 * Fuzz harness for aftp_wire_decode, the parser every datagram from the
 * network goes through (proto/aftp_wire.h): raw bytes in, the properties of
 * wire_checks.c checked (rejections leave no trace, accepted packets borrow
 * only from the input and re-encode to the same bytes).
 */
#include "wire_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_check_datagram(data, size);
    return 0;
}
