/*
 * The properties every datagram must satisfy under aftp_wire_decode, shared
 * by the fuzz harnesses that feed it datagrams (raw or generated).
 *
 * Beyond "no crash, no out-of-bounds read":
 *  - rejected: the error is one of the protocol decode errors and the output
 *    struct is untouched;
 *  - accepted: every borrowed pointer (payload, path, reason, extensions,
 *    range list) lies inside the input; a FEEDBACK has cum_block <=
 *    scan_start <= scan_end <= AFTP_WIRE_MAX_BLOCKS and its iterator yields
 *    exactly range_count ascending, non-adjacent ranges inside [scan_start,
 *    scan_end); and re-encoding the packet reproduces the input byte for byte, into a
 *    buffer of exactly that size, while one byte less fails cleanly. A
 *    FEEDBACK is re-encoded twice: as decoded (borrowed encoded list) and
 *    with the iterated ranges as an array.
 *    HELLO is the one exception: the encoder canonicalises its zero padding
 *    (to AFTP_WIRE_HELLO_MIN_LEN, or none when the body is longer), so there
 *    the re-encoding must be a prefix of the input followed only by zeros.
 *  - an ENTRIES or VERDICTS: its records lie inside the input and end it;
 *    the iterator yields exactly `count` records, each valid for its kind
 *    (entries: non-zero consecutive ids laid end to end in the stream,
 *    paths and targets inside the input without a zero byte, a hole list
 *    exactly on flag HOLES, on a FILE only, of 1..1024 ascending,
 *    non-adjacent ranges inside the file's blocks; verdicts:
 *    ascending ids, an error exactly on REFUSED, held ranges exactly on
 *    RESUME, ascending and non-adjacent, at most 8192 in the packet); and
 *    re-encoding from the iterated records as arrays gives the input again.
 *  - a PULL_REQUEST: its paths lie inside the input and end it; the
 *    iterator yields exactly path_count paths of 1..AFTP_WIRE_MAX_PATH
 *    bytes without a zero byte, and re-encoding them as an array gives the
 *    input again. A PULL_REPLY holds 1..AFTP_WIRE_MAX_PULL_PATHS errors.
 *  - a HELLO's or HELLO_ACK's extension block: PULL reads as its first TLV
 *    says (well-formed only when empty); RATE_CAP and PIPELINE read
 *    as the first TLV of their type says (well-formed only with 8 bytes,
 *    non-zero; 4 bytes, 1..AFTP_WIRE_MAX_WINDOW),
 *    and the TLVs but HANDSHAKE (what message 2 authenticates of a
 *    HELLO_ACK) copy out whole, in order, without a HANDSHAKE, and keep
 *    the block's RATE_CAP verdict.
 */
#include <string.h>

#include "wire_checks.h"

/* Sizes only: a decoded datagram is at most AFTP_WIRE_MAX_DATAGRAM long, so
 * re-encoding it must fit there. */
static uint8_t reencoded[AFTP_WIRE_MAX_DATAGRAM];
static aftp_wire_range ranges[AFTP_WIRE_MAX_RANGES];
static aftp_wire_entry entries[AFTP_WIRE_MAX_ENTRIES];
static aftp_wire_verdict verdicts[AFTP_WIRE_MAX_VERDICTS];
static aftp_wire_path pull_paths[AFTP_WIRE_MAX_PULL_PATHS];

static int is_decode_error(int rc)
{
    return rc == AFTP_ERR_TRUNCATED || rc == AFTP_ERR_MALFORMED ||
           rc == AFTP_ERR_UNKNOWN_TYPE || rc == AFTP_ERR_VERSION || rc == AFTP_ERR_LIMIT;
}

/* A decoded list kept encoded (FEEDBACK's ranges, a batch's records): no
 * array, and its bytes are the datagram's tail. */
static void check_encoded_tail(const uint8_t *data, size_t size, const void *array,
                               const uint8_t *bytes, size_t len)
{
    FUZZ_CHECK(array == NULL);
    FUZZ_CHECK(bytes + len == data + size);
    FUZZ_CHECK(fuzz_inside(data, size, bytes, len));
}

static void check_borrowed(const uint8_t *data, size_t size, const aftp_wire_packet *pkt)
{
    switch (pkt->hdr.type) {
    case AFTP_WIRE_HELLO:
        FUZZ_CHECK(fuzz_inside(data, size, pkt->u.hello.ext, pkt->u.hello.ext_len));
        break;
    case AFTP_WIRE_HELLO_ACK:
        FUZZ_CHECK(fuzz_inside(data, size, pkt->u.hello_ack.ext, pkt->u.hello_ack.ext_len));
        break;
    case AFTP_WIRE_FILE_OFFER:
        FUZZ_CHECK(fuzz_inside(data, size, pkt->u.file_offer.path, pkt->u.file_offer.path_len));
        break;
    case AFTP_WIRE_DATA:
        /* The payload is everything after the fixed DATA fields. */
        FUZZ_CHECK(pkt->u.data.payload_len >= 1);
        FUZZ_CHECK(pkt->u.data.payload == data + AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED);
        FUZZ_CHECK(pkt->u.data.payload_len ==
                   size - AFTP_WIRE_HEADER_LEN - AFTP_WIRE_DATA_FIXED);
        break;
    case AFTP_WIRE_FEEDBACK:
        check_encoded_tail(data, size, pkt->u.feedback.ranges, pkt->u.feedback.range_bytes,
                           pkt->u.feedback.range_bytes_len);
        break;
    case AFTP_WIRE_CLOSE:
        FUZZ_CHECK(fuzz_inside(data, size, pkt->u.close.reason, pkt->u.close.reason_len));
        break;
    case AFTP_WIRE_ENTRIES:
        check_encoded_tail(data, size, pkt->u.entries.entries, pkt->u.entries.record_bytes,
                           pkt->u.entries.record_bytes_len);
        break;
    case AFTP_WIRE_VERDICTS:
        check_encoded_tail(data, size, pkt->u.verdicts.verdicts, pkt->u.verdicts.record_bytes,
                           pkt->u.verdicts.record_bytes_len);
        break;
    case AFTP_WIRE_PULL_REQUEST:
        check_encoded_tail(data, size, pkt->u.pull_request.paths, pkt->u.pull_request.path_bytes,
                           pkt->u.pull_request.path_bytes_len);
        break;
    case AFTP_WIRE_PULL_REPLY:
        FUZZ_CHECK(pkt->u.pull_reply.count >= 1 &&
                   pkt->u.pull_reply.count <= AFTP_WIRE_MAX_PULL_PATHS);
        FUZZ_CHECK(size == AFTP_WIRE_HEADER_LEN + AFTP_WIRE_PULL_REPLY_FIXED +
                               2u * pkt->u.pull_reply.count);
        break;
    case AFTP_WIRE_RETRY:
        FUZZ_CHECK(pkt->u.retry.token_len >= 1 && pkt->u.retry.token_len <= AFTP_WIRE_MAX_TOKEN);
        FUZZ_CHECK(fuzz_inside(data, size, pkt->u.retry.token, pkt->u.retry.token_len));
        break;
    default:
        break;
    }
}

/* Walks the missing ranges into `ranges` and checks the documented shape. */
static void check_feedback_ranges(const aftp_wire_feedback *fb)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    uint64_t next_min = fb->scan_start;
    size_t n = 0;
    FUZZ_CHECK(fb->cum_block <= fb->scan_start && fb->scan_start <= fb->scan_end &&
               fb->scan_end <= AFTP_WIRE_MAX_BLOCKS);
    aftp_wire_range_iter_init(&it, fb);
    while (aftp_wire_ranges_next(&it, &rg)) {
        FUZZ_CHECK(n < fb->range_count);
        FUZZ_CHECK(rg.len >= 1 && rg.start >= next_min);
        FUZZ_CHECK(rg.start < fb->scan_end && rg.len <= fb->scan_end - rg.start);
        ranges[n++] = rg;
        next_min = rg.start + rg.len + 1; /* cannot wrap: below scan_end + 1 */
    }
    FUZZ_CHECK(n == fb->range_count);
    FUZZ_CHECK(aftp_wire_ranges_next(&it, &rg) == 0);
    FUZZ_CHECK(aftp_wire_ranges_encoded_len(fb->scan_start, ranges, n) == fb->range_bytes_len);
}

static int name_ok(const uint8_t *data, size_t size, const uint8_t *p, uint16_t len)
{
    return len <= AFTP_WIRE_MAX_PATH && fuzz_inside(data, size, p, len) &&
           (len == 0 || memchr(p, 0, len) == NULL);
}

/* An entry's hole list (flag HOLES): walked into `ranges`, each inside
 * the file's blocks, the encoding inside the input. */
static void check_holes(const uint8_t *data, size_t size, const aftp_wire_entry *e)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    uint64_t next_min = 0, blocks = aftp_wire_entry_blocks(e);
    size_t n = 0;
    FUZZ_CHECK(e->holes == NULL);
    if (!(e->flags & AFTP_WIRE_ENTRY_HOLES)) {
        FUZZ_CHECK(e->hole_count == 0 && e->hole_bytes_len == 0);
        return;
    }
    FUZZ_CHECK(e->kind == AFTP_WIRE_KIND_FILE);
    FUZZ_CHECK(e->hole_count >= 1 && e->hole_count <= AFTP_WIRE_MAX_HOLES);
    FUZZ_CHECK(fuzz_inside(data, size, e->hole_bytes, e->hole_bytes_len));
    aftp_wire_entry_holes_init(&it, e);
    while (aftp_wire_ranges_next(&it, &rg)) {
        FUZZ_CHECK(n < e->hole_count);
        FUZZ_CHECK(rg.len >= 1 && rg.start >= next_min);
        FUZZ_CHECK(rg.start < blocks && rg.len <= blocks - rg.start);
        ranges[n++] = rg;
        next_min = rg.start + rg.len + 1;
    }
    FUZZ_CHECK(n == e->hole_count);
    FUZZ_CHECK(aftp_wire_ranges_encoded_len(0, ranges, n) == e->hole_bytes_len);
}

static void check_entry(const uint8_t *data, size_t size, const aftp_wire_entry *e)
{
    FUZZ_CHECK(e->entry_id != 0 && e->mode <= 07777);
    FUZZ_CHECK(e->path_len >= 1 && name_ok(data, size, e->path, e->path_len));
    FUZZ_CHECK(name_ok(data, size, e->target, e->target_len));
    FUZZ_CHECK((e->target_len != 0) == (e->kind == AFTP_WIRE_KIND_SYMLINK));
    if (e->kind == AFTP_WIRE_KIND_FILE) {
        FUZZ_CHECK(e->size <= AFTP_WIRE_MAX_FILE_SIZE);
        FUZZ_CHECK(e->block_size >= AFTP_WIRE_MIN_BLOCK && e->block_size <= AFTP_WIRE_MAX_BLOCK);
    } else {
        FUZZ_CHECK(e->kind == AFTP_WIRE_KIND_DIR || e->kind == AFTP_WIRE_KIND_SYMLINK);
        FUZZ_CHECK(e->size == 0 && e->block_size == 0);
    }
    FUZZ_CHECK(e->base_block <= AFTP_WIRE_MAX_BLOCKS &&
               aftp_wire_entry_blocks(e) <= AFTP_WIRE_MAX_BLOCKS - e->base_block);
    check_holes(data, size, e);
}

/* Walks the records into `entries` and checks each and their chaining. */
static void check_entries(const uint8_t *data, size_t size, const aftp_wire_entries *b)
{
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    size_t n = 0;
    FUZZ_CHECK(b->count >= 1 && b->count <= AFTP_WIRE_MAX_ENTRIES);
    aftp_wire_entries_iter_init(&it, b);
    while (aftp_wire_entries_next(&it, &e)) {
        FUZZ_CHECK(n < b->count);
        check_entry(data, size, &e);
        if (n > 0) {
            const aftp_wire_entry *prev = &entries[n - 1];
            FUZZ_CHECK(e.entry_id - 1u == prev->entry_id);
            FUZZ_CHECK(e.base_block == prev->base_block + aftp_wire_entry_blocks(prev));
        }
        entries[n++] = e;
    }
    FUZZ_CHECK(n == b->count);
}

/* Walks one RESUME's held ranges into ranges[*used..]. */
static void check_held(const aftp_wire_verdict *v, size_t *used)
{
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    uint64_t next_min = 0;
    size_t n = 0;
    aftp_wire_verdict_ranges_init(&it, v);
    while (aftp_wire_ranges_next(&it, &rg)) {
        FUZZ_CHECK(n < v->range_count && *used + n < AFTP_WIRE_MAX_RANGES);
        FUZZ_CHECK(rg.len >= 1 && rg.start >= next_min);
        FUZZ_CHECK(rg.start < AFTP_WIRE_MAX_BLOCKS && rg.len <= AFTP_WIRE_MAX_BLOCKS - rg.start);
        ranges[*used + n++] = rg;
        next_min = rg.start + rg.len + 1;
    }
    FUZZ_CHECK(n == v->range_count);
    FUZZ_CHECK(aftp_wire_ranges_encoded_len(0, &ranges[*used], n) == v->range_bytes_len);
    *used += n;
}

/* Walks the records into `verdicts` (their held ranges into `ranges`). */
static void check_verdicts(const aftp_wire_verdicts *b)
{
    aftp_wire_record_iter it;
    aftp_wire_verdict v;
    size_t n = 0, used = 0;
    FUZZ_CHECK(b->count >= 1 && b->count <= AFTP_WIRE_MAX_VERDICTS);
    aftp_wire_verdicts_iter_init(&it, b);
    while (aftp_wire_verdicts_next(&it, &v)) {
        FUZZ_CHECK(n < b->count);
        FUZZ_CHECK(v.entry_id != 0 && (n == 0 || v.entry_id > verdicts[n - 1].entry_id));
        FUZZ_CHECK(v.verdict <= AFTP_WIRE_VERDICT_MAX);
        FUZZ_CHECK((v.error != 0) == (v.verdict == AFTP_WIRE_VERDICT_REFUSED));
        FUZZ_CHECK((v.range_count != 0) == (v.verdict == AFTP_WIRE_VERDICT_RESUME));
        size_t first = used;
        check_held(&v, &used);
        v.ranges = &ranges[first];
        verdicts[n++] = v;
    }
    FUZZ_CHECK(n == b->count);
}

/* Walks a PULL_REQUEST's paths into `pull_paths`, checking each. */
static void check_pull_paths(const uint8_t *data, size_t size, const aftp_wire_pull_request *q)
{
    aftp_wire_record_iter it;
    aftp_wire_path path;
    uint16_t n = 0;
    FUZZ_CHECK(q->path_count >= 1 && q->path_count <= AFTP_WIRE_MAX_PULL_PATHS);
    aftp_wire_pull_paths_iter_init(&it, q);
    while (aftp_wire_pull_paths_next(&it, &path)) {
        FUZZ_CHECK(n < q->path_count);
        FUZZ_CHECK(path.len >= 1 && name_ok(data, size, path.bytes, path.len));
        pull_paths[n++] = path;
    }
    FUZZ_CHECK(n == q->path_count);
}

/* Encodes pkt into a heap buffer of exactly cap bytes (so ASan sees any
 * write past it); on success the bytes must equal the first encoding. */
static int encode_exact(const aftp_wire_packet *pkt, size_t cap, size_t *written)
{
    uint8_t *buf = malloc(cap > 0 ? cap : 1);
    FUZZ_CHECK(buf != NULL);
    int rc = aftp_wire_encode(pkt, buf, cap, written);
    if (rc == AFTP_OK)
        FUZZ_CHECK(*written <= cap && memcmp(buf, reencoded, *written) == 0);
    free(buf);
    return rc;
}

static void check_reencode(const uint8_t *data, size_t size, const aftp_wire_packet *pkt)
{
    size_t written = SIZE_MAX;
    FUZZ_CHECK(aftp_wire_encode(pkt, reencoded, sizeof reencoded, &written) == AFTP_OK);
    if (pkt->hdr.type == AFTP_WIRE_HELLO) {
        FUZZ_CHECK(written >= AFTP_WIRE_HELLO_MIN_LEN && written <= size);
        FUZZ_CHECK(memcmp(reencoded, data, written) == 0);
        for (size_t i = written; i < size; i++)
            FUZZ_CHECK(data[i] == 0);
    } else {
        FUZZ_CHECK(written == size && memcmp(reencoded, data, size) == 0);
    }

    /* The encoder honours its capacity exactly: it fits in `written` bytes
     * and fails, without touching *written, with one byte less. */
    size_t exact = SIZE_MAX, short_by_one = SIZE_MAX;
    FUZZ_CHECK(encode_exact(pkt, written, &exact) == AFTP_OK && exact == written);
    FUZZ_CHECK(encode_exact(pkt, written - 1, &short_by_one) ==
               AFTP_ERR_BUFFER_TOO_SMALL);
    FUZZ_CHECK(short_by_one == SIZE_MAX);
}

/* Big-endian integer of n bytes (n <= 8), written here apart from the
 * wire reader. */
static uint64_t be_uint(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* An extension whose value is one non-zero big-endian integer of want_len
 * bytes, at most max: the decoder's verdict (0 none, 1 well-formed, -1
 * not) and value `got` must be what the first TLV of its type says. */
static void check_uint_ext(const uint8_t *ext, size_t ext_len, uint16_t type, uint16_t want_len,
                           uint64_t max, int verdict, uint64_t got)
{
    const uint8_t *v = NULL;
    uint16_t v_len = 0;
    if (!aftp_wire_ext_find(ext, ext_len, type, &v, &v_len)) {
        FUZZ_CHECK(verdict == 0);
        return;
    }
    uint64_t want = v_len == want_len ? be_uint(v, want_len) : 0;
    if (want != 0 && want <= max)
        FUZZ_CHECK(verdict == 1 && got == want);
    else
        FUZZ_CHECK(verdict == -1);
}

static void check_rate_cap(const uint8_t *ext, size_t ext_len)
{
    uint64_t bps = 0;
    int verdict = aftp_wire_ext_rate_cap(ext, ext_len, &bps);
    check_uint_ext(ext, ext_len, AFTP_WIRE_EXT_RATE_CAP, AFTP_WIRE_RATE_CAP_LEN, UINT64_MAX,
                   verdict, bps);
}

static void check_pipeline(const uint8_t *ext, size_t ext_len)
{
    uint32_t window = 0;
    int verdict = aftp_wire_ext_pipeline(ext, ext_len, &window);
    check_uint_ext(ext, ext_len, AFTP_WIRE_EXT_PIPELINE, AFTP_WIRE_PIPELINE_LEN,
                   AFTP_WIRE_MAX_WINDOW, verdict, window);
}

static void check_extensions(const uint8_t *ext, size_t ext_len)
{
    static uint8_t others[AFTP_WIRE_MAX_DATAGRAM];
    const uint8_t *v;
    uint16_t v_len;
    uint64_t a = 0, b = 0;
    aftp_wire_writer w;
    check_rate_cap(ext, ext_len);
    check_pipeline(ext, ext_len);
    int pull = aftp_wire_ext_pull(ext, ext_len);
    if (!aftp_wire_ext_find(ext, ext_len, AFTP_WIRE_EXT_PULL, &v, &v_len))
        FUZZ_CHECK(pull == 0);
    else
        FUZZ_CHECK(pull == (v_len == 0 ? 1 : -1));
    aftp_wire_writer_init(&w, others, sizeof others);
    FUZZ_CHECK(aftp_wire_ext_put_except(&w, ext, ext_len, AFTP_WIRE_EXT_HANDSHAKE) == AFTP_OK);
    FUZZ_CHECK(w.pos <= ext_len);
    FUZZ_CHECK((w.pos == ext_len) ==
               !aftp_wire_ext_find(ext, ext_len, AFTP_WIRE_EXT_HANDSHAKE, &v, &v_len));
    FUZZ_CHECK(!aftp_wire_ext_find(others, w.pos, AFTP_WIRE_EXT_HANDSHAKE, &v, &v_len));
    FUZZ_CHECK(aftp_wire_ext_rate_cap(others, w.pos, &a) == aftp_wire_ext_rate_cap(ext, ext_len, &b));
    FUZZ_CHECK(a == b);
    check_rate_cap(others, w.pos);
}

void fuzz_check_datagram(const uint8_t *data, size_t size)
{
    aftp_wire_packet pkt, untouched;
    memset(&pkt, 0x5a, sizeof pkt);
    memset(&untouched, 0x5a, sizeof untouched);

    int rc = aftp_wire_decode(data, size, &pkt);
    if (rc != AFTP_OK) {
        FUZZ_CHECK(is_decode_error(rc));
        FUZZ_CHECK(memcmp(&pkt, &untouched, sizeof pkt) == 0);
        return;
    }
    FUZZ_CHECK(size >= AFTP_WIRE_HEADER_LEN && size <= AFTP_WIRE_MAX_DATAGRAM);
    FUZZ_CHECK(pkt.hdr.type <= AFTP_WIRE_TYPE_MAX);
    check_borrowed(data, size, &pkt);
    check_reencode(data, size, &pkt);
    if (pkt.hdr.type == AFTP_WIRE_HELLO)
        check_extensions(pkt.u.hello.ext, pkt.u.hello.ext_len);
    if (pkt.hdr.type == AFTP_WIRE_HELLO_ACK)
        check_extensions(pkt.u.hello_ack.ext, pkt.u.hello_ack.ext_len);
    if (pkt.hdr.type == AFTP_WIRE_FEEDBACK) {
        /* The list walked into an array must encode to the same bytes as
         * the borrowed encoded list just did. */
        check_feedback_ranges(&pkt.u.feedback);
        pkt.u.feedback.ranges = ranges;
        check_reencode(data, size, &pkt);
    }
    /* The same for the batches: their records walked into arrays. */
    if (pkt.hdr.type == AFTP_WIRE_ENTRIES) {
        check_entries(data, size, &pkt.u.entries);
        pkt.u.entries.entries = entries;
        check_reencode(data, size, &pkt);
    }
    if (pkt.hdr.type == AFTP_WIRE_VERDICTS) {
        check_verdicts(&pkt.u.verdicts);
        pkt.u.verdicts.verdicts = verdicts;
        check_reencode(data, size, &pkt);
    }
    if (pkt.hdr.type == AFTP_WIRE_PULL_REQUEST) {
        check_pull_paths(data, size, &pkt.u.pull_request);
        pkt.u.pull_request.paths = pull_paths;
        check_reencode(data, size, &pkt);
    }
}
