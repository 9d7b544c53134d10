/*
 * Shared helpers for the wire-format tests: one valid example packet of
 * every type, and checks that the unit and vector tests both need
 * (field-by-field comparison, "a failed decode leaves no trace").
 * They assert through cmocka, so they run only inside a cmocka test.
 */
#ifndef AFTP_WIRE_FIXTURES_H
#define AFTP_WIRE_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

/* Large enough for any datagram, plus room to append bytes past the limit. */
#define WIRE_TEST_BUF (AFTP_WIRE_MAX_DATAGRAM + 64u)

/* A valid packet of `type` with distinct, non-zero field values. Variable
 * data (path, payload, ranges, extensions) points to static storage. */
void wire_fixture(uint8_t type, aftp_wire_packet *out);

/* Encodes pkt, asserting success; returns the length. */
size_t wire_encode_ok(const aftp_wire_packet *pkt, uint8_t *buf, size_t cap);
/* Encodes the fixture of `type`; returns the length. */
size_t wire_fixture_encode(uint8_t type, uint8_t *buf, size_t cap);
/* Decodes, asserting success. */
void wire_decode_ok(const uint8_t *buf, size_t len, aftp_wire_packet *out);

/* Decodes into a sentinel-filled packet; asserts it is untouched when the
 * decode fails, and returns the decoder's result. */
int wire_decode_untouched(const uint8_t *buf, size_t len);
/* Decode must fail with `want` and leave the output untouched. */
void wire_expect_decode_error(const uint8_t *buf, size_t len, int want);
/* Encode must fail with `want` and leave *written untouched. */
void wire_expect_encode_error(const aftp_wire_packet *pkt, int want);

/* Field-by-field equality. `want` may be an encoder-side packet (FEEDBACK
 * with a `ranges` array) or a decoded one; `got` must be decoded. */
void wire_expect_packets_equal(const aftp_wire_packet *want, const aftp_wire_packet *got);

/* Writes v big-endian into p[0..n), to patch fields of a valid encoding. */
void wire_put_be(uint8_t *p, size_t n, uint64_t v);

#endif /* AFTP_WIRE_FIXTURES_H */
