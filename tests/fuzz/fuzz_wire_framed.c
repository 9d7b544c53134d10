/*
 * Structure-aware fuzz harness for aftp_wire_decode: the fuzzer picks every
 * field of a datagram, and the harness writes it with each length or count
 * prefix matching what follows. Raw mutation seldom changes a length and the
 * bytes it covers together, so limits such as "a CLOSE reason is at most
 * AFTP_WIRE_MAX_REASON bytes" are hard to reach from fuzz_wire_decode; here
 * the fuzzer only has to pick the length. Field values are not restricted:
 * the decoder decides, and wire_checks.c checks the verdict (an accepted
 * datagram must re-encode to the same bytes, so the decoder can accept
 * nothing the encoder refuses).
 *
 * Input layout (fuzz_input.h: reads past the end yield zeros; a "value" is
 * fuzz_take_value, a "count" fuzz_take_count; "bytes" is a u16 length then
 * that many bytes). The items of a list stop where the input does, while
 * its count stays as chosen: long lists of zeros only slow the fuzzer down
 * (fuzz_wire_ranges covers long range lists).
 *   u8 t: type = t % (AFTP_WIRE_TYPE_MAX + 1); when bit 7 is set a u8 header
 *     version follows, else the version that goes with the type
 *   u16 flags, u32 conn_id, u64 pn
 *   the body in wire order, fixed fields at their wire width, and:
 *     VERSION_NEG: count versions, then one u8 each
 *     HELLO:       u8 role, count ciphers + one u8 each, u16 max_datagram,
 *                  extensions, u16 bytes of zero padding
 *     HELLO_ACK:   u32 id, u8 cipher, u16 max_datagram, extensions
 *     extensions:  count TLVs, each u16 type + bytes (their u16 total goes first)
 *     FILE_OFFER:  fixed fields, then bytes path
 *     FILE_REPLY, ABANDON: u32 file id, u16 error
 *     DATA:        u32 file id, u64 block, then bytes payload
 *     FEEDBACK:    the nine fixed fields (blocks_received, cum_block,
 *                  scan_start and scan_end as values), count ranges (up to
 *                  one over the limit), each two values written as varints
 *     CLOSE:       u16 error, then bytes reason
 *     RETRY:       bytes token
 *     SERVER_KEY:  the 32 key bytes
 *     ENTRIES:     count records (up to one over the limit), each: u8 link
 *                  (bit 0: id = previous + 1, else a u32 follows; bit 1:
 *                  base_block = previous end, else a value follows), u8
 *                  kind, u16 flags, value size, i64 mtime, u32 mode, u32
 *                  block_size, u64 source_id, 16 digest bytes, u16 path
 *                  length, u16 target length, then the path and the target
 *                  (written in wire order); with flag HOLES, count hole
 *                  ranges (up to one over the limit), each two values
 *                  written as varints
 *     PULL_REQUEST: u16 flags, u64 max_rate, count paths (up to one over
 *                  the limit), each bytes
 *     PULL_REPLY:  count errors (up to one over the limit), each a u16
 *     RATE_UPDATE: u64 seq, u64 cap
 *     PULL_END:    u32 entry count
 *     VERDICTS:    count records (up to one over the limit), each: u8 link
 *                  (bit 0: id = previous + 1, else a u32 follows), u8
 *                  verdict, u16 error, count held ranges (up to one over
 *                  the limit), each two values written as varints
 */
#include <string.h>

#include "fuzz_input.h"
#include "wire_checks.h"

/* Room past AFTP_WIRE_MAX_DATAGRAM, so too-long datagrams are generated too. */
#define FRAMED_CAP (AFTP_WIRE_MAX_DATAGRAM + 1024u)

static uint8_t datagram[FRAMED_CAP];

/* Writers stop at FRAMED_CAP: what does not fit is dropped and the datagram
 * is simply shorter, which is still a datagram to decode. */
static void put(aftp_wire_writer *w, uint64_t v, size_t n)
{
    switch (n) {
    case 1:
        (void)aftp_wire_write_u8(w, (uint8_t)v);
        break;
    case 2:
        (void)aftp_wire_write_u16(w, (uint16_t)v);
        break;
    case 4:
        (void)aftp_wire_write_u32(w, (uint32_t)v);
        break;
    default:
        (void)aftp_wire_write_u64(w, v);
        break;
    }
}

/* A field copied from the input at its wire width. */
static void copy(fuzz_input *in, aftp_wire_writer *w, size_t n)
{
    put(w, fuzz_take(in, n), n);
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* n bytes from the input, zeros once it runs out (bulk: lengths reach 64 KiB). */
static void copy_bytes(fuzz_input *in, aftp_wire_writer *w, size_t n)
{
    size_t fit = min_size(n, w->cap - w->pos), from_input = min_size(fit, in->left);
    memcpy(w->buf + w->pos, in->p, from_input);
    memset(w->buf + w->pos + from_input, 0, fit - from_input);
    w->pos += fit;
    size_t taken = min_size(n, in->left);
    in->p += taken;
    in->left -= taken;
}

static void put_zeros(aftp_wire_writer *w, size_t n)
{
    size_t fit = min_size(n, w->cap - w->pos);
    memset(w->buf + w->pos, 0, fit);
    w->pos += fit;
}

/* A u16 length, then that many bytes. */
static void copy_counted_bytes(fuzz_input *in, aftp_wire_writer *w)
{
    uint16_t len = (uint16_t)fuzz_take(in, 2);
    put(w, len, 2);
    copy_bytes(in, w, len);
}

/* A count (u8 on the wire), then that many one-byte items. */
static void copy_byte_list(fuzz_input *in, aftp_wire_writer *w)
{
    size_t n = fuzz_take_count(in, UINT8_MAX);
    put(w, n, 1);
    copy_bytes(in, w, n);
}

/* The TLVs are written after a placeholder for their u16 total length,
 * which is filled in once they are known. */
static void copy_extensions(fuzz_input *in, aftp_wire_writer *w)
{
    size_t len_pos = w->pos;
    put(w, 0, 2);
    /* A TLV takes at least 4 bytes: no more fit a u16 total. */
    size_t start = w->pos, n = fuzz_take_count(in, UINT16_MAX / 4 + 1);
    for (size_t i = 0; i < n && in->left > 0; i++) {
        copy(in, w, 2);
        copy_counted_bytes(in, w);
    }
    if (len_pos + 2 <= w->cap) {
        uint16_t total = (uint16_t)(w->pos - start);
        w->buf[len_pos] = (uint8_t)(total >> 8);
        w->buf[len_pos + 1] = (uint8_t)total;
    }
}

static void copy_hello(fuzz_input *in, aftp_wire_writer *w)
{
    copy(in, w, 1); /* role */
    copy_byte_list(in, w);
    copy(in, w, 2); /* max_datagram */
    copy_extensions(in, w);
    put_zeros(w, fuzz_take(in, 2));
}

static void copy_hello_ack(fuzz_input *in, aftp_wire_writer *w)
{
    copy(in, w, 4);
    copy(in, w, 1);
    copy(in, w, 2);
    copy_extensions(in, w);
}

static void copy_feedback(fuzz_input *in, aftp_wire_writer *w)
{
    copy(in, w, 4); /* file_id */
    copy(in, w, 8); /* largest_pn */
    copy(in, w, 4); /* ack_delay_us */
    copy(in, w, 8); /* recv_time_us */
    copy(in, w, 8); /* packets_received */
    for (int i = 0; i < 4; i++) /* blocks_received, cum_block, scan_start, scan_end */
        put(w, fuzz_take_value(in), 8);
    size_t n = fuzz_take_count(in, AFTP_WIRE_MAX_RANGES + 1);
    put(w, n, 2);
    for (size_t i = 0; i < 2 * n && in->left > 0; i++)
        (void)aftp_wire_write_varint(w, fuzz_take_value(in) & AFTP_WIRE_VARINT_MAX);
}

/* Consecutive records are what a valid batch needs and what raw fields
 * almost never give, hence the link bits. */
typedef struct framed_link {
    uint64_t id;
    uint64_t end; /* previous entry's base_block + its blocks */
} framed_link;

static uint64_t linked_or_taken(fuzz_input *in, int linked, uint64_t linked_value, size_t n)
{
    return linked ? linked_value : (n == 0 ? fuzz_take_value(in) : fuzz_take(in, n));
}

static void copy_entry(fuzz_input *in, aftp_wire_writer *w, framed_link *link)
{
    uint8_t bits = (uint8_t)fuzz_take(in, 1);
    aftp_wire_entry e = {0};
    e.entry_id = (uint32_t)linked_or_taken(in, bits & 1, link->id + 1, 4);
    e.base_block = linked_or_taken(in, bits & 2, link->end, 0);
    e.kind = (uint8_t)fuzz_take(in, 1);
    e.flags = (uint16_t)fuzz_take(in, 2);
    e.size = fuzz_take_value(in);
    e.mtime_ns = (int64_t)fuzz_take(in, 8);
    e.mode = (uint32_t)fuzz_take(in, 4);
    e.block_size = (uint32_t)fuzz_take(in, 4);
    e.source_id = fuzz_take(in, 8);
    put(w, e.entry_id, 4);
    put(w, e.kind, 1);
    put(w, e.flags, 2);
    put(w, e.size, 8);
    put(w, (uint64_t)e.mtime_ns, 8);
    put(w, e.mode, 4);
    put(w, e.base_block, 8);
    put(w, e.block_size, 4);
    put(w, e.source_id, 8);
    copy_bytes(in, w, AFTP_WIRE_DIGEST_LEN);
    uint16_t path_len = (uint16_t)fuzz_take(in, 2), target_len = (uint16_t)fuzz_take(in, 2);
    put(w, path_len, 2);
    put(w, target_len, 2);
    copy_bytes(in, w, path_len);
    copy_bytes(in, w, target_len);
    if (e.flags & AFTP_WIRE_ENTRY_HOLES) {
        size_t holes = fuzz_take_count(in, AFTP_WIRE_MAX_HOLES + 1);
        put(w, holes, 2);
        for (size_t r = 0; r < 2 * holes && in->left > 0; r++)
            (void)aftp_wire_write_varint(w, fuzz_take_value(in) & AFTP_WIRE_VARINT_MAX);
    }
    link->id = e.entry_id;
    link->end = e.base_block + aftp_wire_entry_blocks(&e);
}

static void copy_entries(fuzz_input *in, aftp_wire_writer *w)
{
    framed_link link = {0, 0};
    size_t n = fuzz_take_count(in, AFTP_WIRE_MAX_ENTRIES + 1);
    put(w, n, 2);
    for (size_t i = 0; i < n && in->left > 0; i++)
        copy_entry(in, w, &link);
}

static void copy_verdicts(fuzz_input *in, aftp_wire_writer *w)
{
    framed_link link = {0, 0};
    size_t n = fuzz_take_count(in, AFTP_WIRE_MAX_VERDICTS + 1);
    put(w, n, 2);
    for (size_t i = 0; i < n && in->left > 0; i++) {
        uint8_t bits = (uint8_t)fuzz_take(in, 1);
        link.id = linked_or_taken(in, bits & 1, link.id + 1, 4);
        put(w, link.id, 4);
        copy(in, w, 1); /* verdict */
        copy(in, w, 2); /* error */
        size_t ranges = fuzz_take_count(in, AFTP_WIRE_MAX_RANGES + 1);
        put(w, ranges, 2);
        for (size_t r = 0; r < 2 * ranges && in->left > 0; r++)
            (void)aftp_wire_write_varint(w, fuzz_take_value(in) & AFTP_WIRE_VARINT_MAX);
    }
}

/* A count up to one over `limit` as a u16, then that many items. */
static void copy_counted_list(fuzz_input *in, aftp_wire_writer *w, size_t limit,
                              void (*item)(fuzz_input *, aftp_wire_writer *))
{
    size_t n = fuzz_take_count(in, limit + 1);
    put(w, n, 2);
    for (size_t i = 0; i < n && in->left > 0; i++)
        item(in, w);
}

static void copy_u16(fuzz_input *in, aftp_wire_writer *w)
{
    copy(in, w, 2);
}

static void copy_body(fuzz_input *in, aftp_wire_writer *w, uint8_t type)
{
    static const uint8_t offer_fixed[] = {4, 8, 8, 4, 4, 2}; /* id..flags */
    switch (type) {
    case AFTP_WIRE_VERSION_NEG:
        copy_byte_list(in, w);
        break;
    case AFTP_WIRE_HELLO:
        copy_hello(in, w);
        break;
    case AFTP_WIRE_HELLO_ACK:
        copy_hello_ack(in, w);
        break;
    case AFTP_WIRE_FILE_OFFER:
        for (size_t i = 0; i < sizeof offer_fixed; i++)
            copy(in, w, offer_fixed[i]);
        copy_counted_bytes(in, w);
        break;
    case AFTP_WIRE_FILE_REPLY:
    case AFTP_WIRE_ABANDON:
        copy(in, w, 4);
        copy(in, w, 2);
        break;
    case AFTP_WIRE_DATA:
        copy(in, w, 4);
        copy(in, w, 8);
        copy_bytes(in, w, fuzz_take(in, 2));
        break;
    case AFTP_WIRE_FEEDBACK:
        copy_feedback(in, w);
        break;
    case AFTP_WIRE_FILE_DONE:
        copy(in, w, 4);
        copy(in, w, 8);
        copy_bytes(in, w, AFTP_WIRE_DIGEST_LEN);
        break;
    case AFTP_WIRE_FILE_RESULT:
        copy(in, w, 4);
        copy(in, w, 2);
        copy_bytes(in, w, AFTP_WIRE_DIGEST_LEN);
        break;
    case AFTP_WIRE_CLOSE:
        copy(in, w, 2);
        copy_counted_bytes(in, w);
        break;
    case AFTP_WIRE_RETRY:
        copy_counted_bytes(in, w);
        break;
    case AFTP_WIRE_ENTRIES:
        copy_entries(in, w);
        break;
    case AFTP_WIRE_VERDICTS:
        copy_verdicts(in, w);
        break;
    case AFTP_WIRE_PULL_REQUEST:
        copy(in, w, 2);
        copy(in, w, 8);
        copy_counted_list(in, w, AFTP_WIRE_MAX_PULL_PATHS, copy_counted_bytes);
        break;
    case AFTP_WIRE_PULL_REPLY:
        copy_counted_list(in, w, AFTP_WIRE_MAX_PULL_PATHS, copy_u16);
        break;
    case AFTP_WIRE_RATE_UPDATE:
        copy(in, w, 8);
        copy(in, w, 8);
        break;
    case AFTP_WIRE_PULL_END:
        copy(in, w, 4);
        break;
    default: /* SERVER_KEY */
        copy_bytes(in, w, AFTP_WIRE_SERVER_KEY_LEN);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, datagram, sizeof datagram);

    uint8_t t = (uint8_t)fuzz_take(&in, 1);
    uint8_t type = (uint8_t)(t % (AFTP_WIRE_TYPE_MAX + 1));
    uint8_t version = type == AFTP_WIRE_VERSION_NEG ? AFTP_WIRE_VERSION_NEGOTIATION
                                                    : AFTP_WIRE_VERSION;
    if (t & 0x80)
        version = (uint8_t)fuzz_take(&in, 1);
    put(&w, version, 1);
    put(&w, type, 1);
    copy(&in, &w, 2); /* flags */
    copy(&in, &w, 4); /* conn_id */
    copy(&in, &w, 8); /* pn */
    copy_body(&in, &w, type);

    /* Checked from a buffer of exactly its size, so a sanitizer sees any
     * read past the end. */
    uint8_t *exact = malloc(w.pos);
    FUZZ_CHECK(exact != NULL);
    memcpy(exact, datagram, w.pos);
    fuzz_check_datagram(exact, w.pos);
    free(exact);
    return 0;
}
