/*
 * Fuzz harness for aftp_wire_header_decode, the peek the datapath takes at
 * every datagram (type, connection id) before anything else, and for the
 * header encoders it must round-trip with.
 *
 * Properties:
 *  - the header decodes exactly when the input holds AFTP_WIRE_HEADER_LEN
 *    bytes; a failure leaves the output untouched;
 *  - aftp_wire_header_encode reproduces those bytes exactly and fails
 *    cleanly one byte short; aftp_wire_data_header_encode reproduces the
 *    DATA header (with file id and block) and refuses any other type;
 *  - the peek agrees with the full decoder: same header when both succeed,
 *    and, for datagrams no longer than AFTP_WIRE_MAX_DATAGRAM, the
 *    version/type verdict the header alone implies.
 */
#include <string.h>

#include "fuzz_harness.h"
#include "proto/aftp_wire.h"

enum { DATA_HEADER_LEN = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED };

/* Big-endian read written here, independent of the reader under test. */
static uint64_t load_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static int same_header(const aftp_wire_header *a, const aftp_wire_header *b)
{
    return a->version == b->version && a->type == b->type && a->flags == b->flags &&
           a->conn_id == b->conn_id && a->pn == b->pn;
}

static void check_fields(const uint8_t *data, const aftp_wire_header *h)
{
    FUZZ_CHECK(h->version == data[0] && h->type == data[1]);
    FUZZ_CHECK(h->flags == load_be(data + 2, 2));
    FUZZ_CHECK(h->conn_id == load_be(data + 4, 4));
    FUZZ_CHECK(h->pn == load_be(data + 8, 8));
}

static void check_header_encode(const uint8_t *data, const aftp_wire_header *h)
{
    uint8_t out[AFTP_WIRE_HEADER_LEN];
    FUZZ_CHECK(aftp_wire_header_encode(h, out, sizeof out) == AFTP_OK);
    FUZZ_CHECK(memcmp(out, data, sizeof out) == 0);
    FUZZ_CHECK(aftp_wire_header_encode(h, out, sizeof out - 1) == AFTP_ERR_BUFFER_TOO_SMALL);
}

/* File id and block come from the input when it is long enough. */
static void check_data_header_encode(const uint8_t *data, size_t size, const aftp_wire_header *h)
{
    uint8_t out[DATA_HEADER_LEN];
    uint32_t file_id = 0;
    uint64_t block = 0;
    size_t compare = AFTP_WIRE_HEADER_LEN;
    if (size >= DATA_HEADER_LEN) {
        file_id = (uint32_t)load_be(data + AFTP_WIRE_HEADER_LEN, 4);
        block = load_be(data + AFTP_WIRE_HEADER_LEN + 4, 8);
        compare = DATA_HEADER_LEN;
    }
    int rc = aftp_wire_data_header_encode(h, file_id, block, out, sizeof out);
    if (h->type != AFTP_WIRE_DATA) {
        FUZZ_CHECK(rc == AFTP_ERR_INVALID_ARGUMENT);
        return;
    }
    FUZZ_CHECK(rc == AFTP_OK);
    FUZZ_CHECK(memcmp(out, data, compare) == 0);
    FUZZ_CHECK(load_be(out + AFTP_WIRE_HEADER_LEN, 4) == file_id);
    FUZZ_CHECK(load_be(out + AFTP_WIRE_HEADER_LEN + 4, 8) == block);
    FUZZ_CHECK(aftp_wire_data_header_encode(h, file_id, block, out, sizeof out - 1) ==
               AFTP_ERR_BUFFER_TOO_SMALL);
}

/* What the header alone says about the whole datagram (spec section 10):
 * version 0 goes with VERSION_NEG only, versions other than 0 and 1 are
 * unknown, and types past AFTP_WIRE_TYPE_MAX are unknown. */
static void check_full_decode_agrees(const uint8_t *data, size_t size, const aftp_wire_header *h)
{
    aftp_wire_packet pkt;
    int rc = aftp_wire_decode(data, size, &pkt);
    if (rc == AFTP_OK)
        FUZZ_CHECK(same_header(&pkt.hdr, h));
    if (size > AFTP_WIRE_MAX_DATAGRAM)
        FUZZ_CHECK(rc == AFTP_ERR_LIMIT); /* refused before its header is judged */
    else if (h->version != AFTP_WIRE_VERSION_NEGOTIATION && h->version != AFTP_WIRE_VERSION)
        FUZZ_CHECK(rc == AFTP_ERR_VERSION);
    else if ((h->version == AFTP_WIRE_VERSION_NEGOTIATION) != (h->type == AFTP_WIRE_VERSION_NEG))
        FUZZ_CHECK(rc == AFTP_ERR_MALFORMED);
    else if (h->type > AFTP_WIRE_TYPE_MAX)
        FUZZ_CHECK(rc == AFTP_ERR_UNKNOWN_TYPE);

    const char *name = aftp_wire_type_name(h->type);
    FUZZ_CHECK(name != NULL && (strcmp(name, "UNKNOWN") == 0) == (h->type > AFTP_WIRE_TYPE_MAX));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    aftp_wire_header h, untouched;
    memset(&h, 0x5a, sizeof h);
    memset(&untouched, 0x5a, sizeof untouched);

    int rc = aftp_wire_header_decode(data, size, &h);
    if (size < AFTP_WIRE_HEADER_LEN) {
        FUZZ_CHECK(rc == AFTP_ERR_TRUNCATED);
        FUZZ_CHECK(memcmp(&h, &untouched, sizeof h) == 0);
        return 0;
    }
    FUZZ_CHECK(rc == AFTP_OK);
    check_fields(data, &h);
    check_header_encode(data, &h);
    check_data_header_encode(data, size, &h);
    check_full_decode_agrees(data, size, &h);
    return 0;
}
