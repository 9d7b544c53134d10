/*
 * Structure-aware fuzz harness for FEEDBACK and its missing-range list
 * (spec section 6.7.2): the fuzzer chooses the fields and ranges, the harness
 * encodes, decodes and compares. Random bytes rarely form a valid range
 * list, so this reaches what fuzz_wire_decode seldom does: long valid lists,
 * ranges at the block limit, lists just over the datagram limit.
 *
 * Input layout (fuzz_input.h: reads past the end yield zeros; a "value" is
 * fuzz_take_value, a "count" fuzz_take_count):
 *   u8 mutations (bit 0: truncate, bit 1: corrupt range_count, bit 2: append)
 *   u16 flags, u32 conn_id, u64 pn
 *   u32 file_id, u64 largest_pn, u32 ack_delay_us, u64 recv_time_us,
 *   u64 packets_received
 *   value cum_block, value scan_start - cum_block, value scan_end - scan_start,
 *   value blocks_received - cum_block
 *   count range_count (fuzz_input.h: up to AFTP_WIRE_MAX_RANGES + 1, one over the limit)
 *   per range: u8 mode, value a, value b
 *     mode bit 0 clear: start = previous end + 1 + a (scan_start + a first), len = b + 1
 *     mode bit 0 set:   start = a, len = b (raw, to reach unordered lists)
 *   u16 cut, u16 count_xor, u8 appended byte (for the mutations)
 * Arithmetic wraps on purpose; an independent model below decides what the
 * encoder must accept.
 *
 * Properties:
 *  - the encoder accepts exactly what the model accepts, with the model's
 *    length, and fails with INVALID_ARGUMENT (bad fields or ranges) or
 *    LIMIT (valid but longer than a datagram) otherwise;
 *  - aftp_wire_ranges_encoded_len gives the model's length for any list
 *    inside [scan_start, AFTP_WIRE_MAX_BLOCKS) and 0 for any other;
 *  - an accepted packet decodes to the same fields and, through the
 *    iterator, to the same ranges in order, and the decoded packet encodes
 *    back to the same bytes;
 *  - any strict prefix, any other range_count and any trailing byte make the
 *    decoder fail without touching its output.
 */
#include <string.h>

#include "fuzz_harness.h"
#include "fuzz_input.h"
#include "proto/aftp_wire.h"

#define RANGES_CAP (AFTP_WIRE_MAX_RANGES + 1u)
#define COUNT_OFFSET (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED - 2u)
/* Worst case: every range takes two 8-byte varints, plus one appended byte. */
#define ENCODED_CAP (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED + RANGES_CAP * 16u + 1u)

static aftp_wire_range ranges[RANGES_CAP];
static uint8_t encoded[ENCODED_CAP];

static void take_ranges(fuzz_input *in, aftp_wire_feedback *fb, size_t count)
{
    uint64_t next_min = fb->scan_start;
    for (size_t i = 0; i < count; i++) {
        unsigned mode = (unsigned)fuzz_take(in, 1);
        uint64_t a = fuzz_take_value(in), b = fuzz_take_value(in);
        ranges[i].start = (mode & 1) ? a : next_min + a;
        ranges[i].len = (mode & 1) ? b : b + 1;
        next_min = ranges[i].start + ranges[i].len + 1;
    }
    fb->ranges = ranges;
}

static void take_packet(fuzz_input *in, aftp_wire_packet *pkt)
{
    aftp_wire_feedback *fb = &pkt->u.feedback;
    memset(pkt, 0, sizeof *pkt);
    pkt->hdr.version = AFTP_WIRE_VERSION;
    pkt->hdr.type = AFTP_WIRE_FEEDBACK;
    pkt->hdr.flags = (uint16_t)fuzz_take(in, 2);
    pkt->hdr.conn_id = (uint32_t)fuzz_take(in, 4);
    pkt->hdr.pn = fuzz_take(in, 8);
    fb->file_id = (uint32_t)fuzz_take(in, 4);
    fb->largest_pn = fuzz_take(in, 8);
    fb->ack_delay_us = (uint32_t)fuzz_take(in, 4);
    fb->recv_time_us = fuzz_take(in, 8);
    fb->packets_received = fuzz_take(in, 8);
    fb->cum_block = fuzz_take_value(in);
    fb->scan_start = fb->cum_block + fuzz_take_value(in);
    fb->scan_end = fb->scan_start + fuzz_take_value(in);
    fb->blocks_received = fb->cum_block + fuzz_take_value(in);
    fb->range_count = (uint16_t)fuzz_take_count(in, AFTP_WIRE_MAX_RANGES + 1);
    take_ranges(in, fb, fb->range_count);
}

/* ---- the model: spec section 6.7 restated independently ---- */

/* RFC 9000 section 16 varint length; 0 when the value cannot be encoded. */
static size_t model_varint_len(uint64_t v)
{
    if (v <= 63)
        return 1;
    if (v <= 16383)
        return 2;
    if (v <= 1073741823)
        return 4;
    return v <= (UINT64_C(1) << 62) - 1 ? 8 : 0;
}

static int model_fields_valid(const aftp_wire_feedback *fb)
{
    return fb->range_count <= AFTP_WIRE_MAX_RANGES && fb->cum_block <= fb->scan_start &&
           fb->scan_start <= fb->scan_end && fb->scan_end <= AFTP_WIRE_MAX_BLOCKS &&
           fb->cum_block <= fb->blocks_received;
}

/* Ranges ascending, non-overlapping, non-adjacent, inside [scan_start,
 * limit) with limit <= AFTP_WIRE_MAX_BLOCKS (so nothing wraps); on success
 * *body is their encoded length, the first range coded from scan_start. */
static int model_ranges_valid(uint64_t scan_start, const aftp_wire_range *rs, size_t n,
                              uint64_t limit, size_t *body)
{
    uint64_t next_min = scan_start;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (rs[i].len == 0 || rs[i].start < next_min || rs[i].start >= limit ||
            rs[i].len > limit - rs[i].start)
            return 0;
        total += model_varint_len(rs[i].start - next_min) + model_varint_len(rs[i].len - 1);
        next_min = rs[i].start + rs[i].len + 1;
    }
    *body = total;
    return 1;
}

/* aftp_wire_ranges_encoded_len sizes any list a FEEDBACK could carry, that
 * is one inside [scan_start, AFTP_WIRE_MAX_BLOCKS), and returns 0 otherwise. */
static void check_encoded_len(const aftp_wire_feedback *fb)
{
    size_t body = 0;
    int ok = model_ranges_valid(fb->scan_start, fb->ranges, fb->range_count,
                                AFTP_WIRE_MAX_BLOCKS, &body);
    FUZZ_CHECK(aftp_wire_ranges_encoded_len(fb->scan_start, fb->ranges, fb->range_count) ==
               (ok ? body : 0));
}

/* ---- checks ---- */

static void check_decoded_equal(const aftp_wire_packet *want, const aftp_wire_packet *got,
                                size_t body)
{
    const aftp_wire_feedback *w = &want->u.feedback, *g = &got->u.feedback;
    FUZZ_CHECK(got->hdr.version == want->hdr.version && got->hdr.type == want->hdr.type &&
               got->hdr.flags == want->hdr.flags && got->hdr.conn_id == want->hdr.conn_id &&
               got->hdr.pn == want->hdr.pn);
    FUZZ_CHECK(g->file_id == w->file_id && g->largest_pn == w->largest_pn &&
               g->ack_delay_us == w->ack_delay_us && g->recv_time_us == w->recv_time_us &&
               g->packets_received == w->packets_received &&
               g->blocks_received == w->blocks_received && g->cum_block == w->cum_block &&
               g->scan_start == w->scan_start && g->scan_end == w->scan_end &&
               g->range_count == w->range_count);
    FUZZ_CHECK(g->ranges == NULL && g->range_bytes_len == body);

    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, g);
    for (size_t i = 0; i < w->range_count; i++) {
        FUZZ_CHECK(aftp_wire_ranges_next(&it, &rg) == 1);
        FUZZ_CHECK(rg.start == w->ranges[i].start && rg.len == w->ranges[i].len);
    }
    FUZZ_CHECK(aftp_wire_ranges_next(&it, &rg) == 0);
}

/* A decoded FEEDBACK (list still encoded, borrowed) encodes to the same bytes. */
static void check_reencode_decoded(const aftp_wire_packet *decoded, size_t written)
{
    static uint8_t again[AFTP_WIRE_MAX_DATAGRAM];
    size_t again_len = SIZE_MAX;
    FUZZ_CHECK(aftp_wire_encode(decoded, again, sizeof again, &again_len) == AFTP_OK);
    FUZZ_CHECK(again_len == written && memcmp(again, encoded, written) == 0);
}

static void check_rejected(const uint8_t *buf, size_t len)
{
    aftp_wire_packet pkt, untouched;
    memset(&pkt, 0x5a, sizeof pkt);
    memset(&untouched, 0x5a, sizeof untouched);
    FUZZ_CHECK(aftp_wire_decode(buf, len, &pkt) != AFTP_OK);
    FUZZ_CHECK(memcmp(&pkt, &untouched, sizeof pkt) == 0);
}

/* Every mutation of a valid encoding that the range list cannot absorb. */
static void check_mutations(fuzz_input *in, unsigned mutations, size_t written)
{
    uint16_t cut = (uint16_t)fuzz_take(in, 2), count_xor = (uint16_t)fuzz_take(in, 2);
    uint8_t appended = (uint8_t)fuzz_take(in, 1);
    if (mutations & 1)
        check_rejected(encoded, cut % written); /* a strict prefix */
    if ((mutations & 2) && count_xor != 0) {
        encoded[COUNT_OFFSET] ^= (uint8_t)(count_xor >> 8);
        encoded[COUNT_OFFSET + 1] ^= (uint8_t)count_xor;
        check_rejected(encoded, written);
        encoded[COUNT_OFFSET] ^= (uint8_t)(count_xor >> 8);
        encoded[COUNT_OFFSET + 1] ^= (uint8_t)count_xor;
    }
    if (mutations & 4) {
        encoded[written] = appended;
        check_rejected(encoded, written + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    unsigned mutations = (unsigned)fuzz_take(&in, 1);
    aftp_wire_packet pkt;
    take_packet(&in, &pkt);
    const aftp_wire_feedback *fb = &pkt.u.feedback;

    check_encoded_len(fb);
    size_t body = 0;
    int valid = model_fields_valid(fb) &&
                model_ranges_valid(fb->scan_start, fb->ranges, fb->range_count, fb->scan_end,
                                   &body);

    size_t written = SIZE_MAX;
    size_t want_len = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED + body;
    int rc = aftp_wire_encode(&pkt, encoded, sizeof encoded - 1, &written);
    if (!valid) {
        FUZZ_CHECK(rc == AFTP_ERR_INVALID_ARGUMENT && written == SIZE_MAX);
        return 0;
    }
    if (want_len > AFTP_WIRE_MAX_DATAGRAM) {
        FUZZ_CHECK(rc == AFTP_ERR_LIMIT && written == SIZE_MAX);
        return 0;
    }
    FUZZ_CHECK(rc == AFTP_OK && written == want_len);

    aftp_wire_packet decoded;
    FUZZ_CHECK(aftp_wire_decode(encoded, written, &decoded) == AFTP_OK);
    check_decoded_equal(&pkt, &decoded, body);
    check_reencode_decoded(&decoded, written);
    check_mutations(&in, mutations, written);
    return 0;
}
