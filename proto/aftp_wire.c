/* aftp wire format: encoders and decoders (spec/aftp-protocol.md sections 3-7). */
#include "aftp_wire.h"

#include <string.h>

/* ---- cursors ---- */

void aftp_wire_reader_init(aftp_wire_reader *r, const uint8_t *buf, size_t len)
{
    r->buf = buf;
    r->len = len;
    r->pos = 0;
}

static size_t reader_left(const aftp_wire_reader *r)
{
    return r->len - r->pos;
}

/* Reads an n-byte big-endian unsigned integer (n <= 8). */
static int read_be(aftp_wire_reader *r, size_t n, uint64_t *v)
{
    if (reader_left(r) < n)
        return AFTP_ERR_TRUNCATED;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = (x << 8) | r->buf[r->pos + i];
    r->pos += n;
    *v = x;
    return AFTP_OK;
}

int aftp_wire_read_u8(aftp_wire_reader *r, uint8_t *v)
{
    uint64_t x;
    int rc = read_be(r, 1, &x);
    if (rc == AFTP_OK)
        *v = (uint8_t)x;
    return rc;
}

int aftp_wire_read_u16(aftp_wire_reader *r, uint16_t *v)
{
    uint64_t x;
    int rc = read_be(r, 2, &x);
    if (rc == AFTP_OK)
        *v = (uint16_t)x;
    return rc;
}

int aftp_wire_read_u32(aftp_wire_reader *r, uint32_t *v)
{
    uint64_t x;
    int rc = read_be(r, 4, &x);
    if (rc == AFTP_OK)
        *v = (uint32_t)x;
    return rc;
}

int aftp_wire_read_u64(aftp_wire_reader *r, uint64_t *v)
{
    return read_be(r, 8, v);
}

/* RFC 9000 section 16: the two high bits of the first byte give the length. */
int aftp_wire_read_varint(aftp_wire_reader *r, uint64_t *v)
{
    if (reader_left(r) < 1)
        return AFTP_ERR_TRUNCATED;
    size_t n = (size_t)1 << (r->buf[r->pos] >> 6);
    size_t start = r->pos;
    uint64_t x;
    int rc = read_be(r, n, &x);
    if (rc != AFTP_OK)
        return rc;
    x &= (n == 8) ? AFTP_WIRE_VARINT_MAX : ((UINT64_C(1) << (8 * n - 2)) - 1);
    /* Only the shortest encoding is valid, so every value has one encoding
     * and vectors stay byte-exact. */
    if (n > 1 && aftp_wire_varint_len(x) != n) {
        r->pos = start;
        return AFTP_ERR_MALFORMED;
    }
    *v = x;
    return AFTP_OK;
}

int aftp_wire_read_bytes(aftp_wire_reader *r, size_t n, const uint8_t **p)
{
    if (reader_left(r) < n)
        return AFTP_ERR_TRUNCATED;
    *p = r->buf + r->pos;
    r->pos += n;
    return AFTP_OK;
}

void aftp_wire_writer_init(aftp_wire_writer *w, uint8_t *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->pos = 0;
}

static int write_be(aftp_wire_writer *w, size_t n, uint64_t v)
{
    if (w->cap - w->pos < n)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    for (size_t i = 0; i < n; i++)
        w->buf[w->pos + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    w->pos += n;
    return AFTP_OK;
}

int aftp_wire_write_u8(aftp_wire_writer *w, uint8_t v)
{
    return write_be(w, 1, v);
}

int aftp_wire_write_u16(aftp_wire_writer *w, uint16_t v)
{
    return write_be(w, 2, v);
}

int aftp_wire_write_u32(aftp_wire_writer *w, uint32_t v)
{
    return write_be(w, 4, v);
}

int aftp_wire_write_u64(aftp_wire_writer *w, uint64_t v)
{
    return write_be(w, 8, v);
}

size_t aftp_wire_varint_len(uint64_t v)
{
    if (v < (UINT64_C(1) << 6))
        return 1;
    if (v < (UINT64_C(1) << 14))
        return 2;
    if (v < (UINT64_C(1) << 30))
        return 4;
    if (v <= AFTP_WIRE_VARINT_MAX)
        return 8;
    return 0;
}

int aftp_wire_write_varint(aftp_wire_writer *w, uint64_t v)
{
    size_t n = aftp_wire_varint_len(v);
    if (n == 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    uint64_t prefix = (uint64_t)(n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3) << (8 * n - 2);
    return write_be(w, n, v | prefix);
}

int aftp_wire_write_bytes(aftp_wire_writer *w, const uint8_t *p, size_t n)
{
    if (w->cap - w->pos < n)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    if (n > 0)
        memcpy(w->buf + w->pos, p, n);
    w->pos += n;
    return AFTP_OK;
}

/* Chains fallible steps: the first failure is kept and the rest skipped. */
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int try_rc_ = (expr);                                                                      \
        if (try_rc_ != AFTP_OK)                                                                    \
            return try_rc_;                                                                        \
    } while (0)

/* ---- block model (spec section 7) ---- */

uint64_t aftp_wire_block_count(uint64_t file_size, uint32_t block_size)
{
    if (block_size == 0)
        return 0;
    return file_size / block_size + (file_size % block_size != 0);
}

uint32_t aftp_wire_block_len(uint64_t file_size, uint32_t block_size, uint64_t index)
{
    uint64_t count = aftp_wire_block_count(file_size, block_size);
    if (index >= count)
        return 0;
    if (index + 1 < count)
        return block_size;
    return (uint32_t)(file_size - index * (uint64_t)block_size);
}

/* ---- missing ranges (spec section 6.7.2) ----
 * The first range is coded as (start - scan_start, len - 1); each later one
 * as (start - previous end - 1, len - 1): ranges never touch, so the gap is
 * at least one block. */

static int read_range(aftp_wire_reader *r, uint64_t next_min, uint64_t limit, aftp_wire_range *out)
{
    size_t start_pos = r->pos;
    uint64_t gap, len_minus_1;
    int rc = aftp_wire_read_varint(r, &gap);
    if (rc == AFTP_OK)
        rc = aftp_wire_read_varint(r, &len_minus_1);
    if (rc == AFTP_OK && (gap > limit - next_min || len_minus_1 >= limit - next_min - gap))
        rc = AFTP_ERR_MALFORMED; /* the range must end at or before limit */
    if (rc != AFTP_OK) {
        r->pos = start_pos;
        return rc;
    }
    out->start = next_min + gap;
    out->len = len_minus_1 + 1;
    return AFTP_OK;
}

/* Reads past `count` valid ranges of [scan_start, scan_end). */
static int skip_ranges(aftp_wire_reader *r, uint16_t count, uint64_t scan_start,
                       uint64_t scan_end)
{
    uint64_t next_min = scan_start;
    for (uint16_t i = 0; i < count; i++) {
        aftp_wire_range rg;
        if (next_min > scan_end)
            return AFTP_ERR_MALFORMED;
        TRY(read_range(r, next_min, scan_end, &rg));
        next_min = rg.start + rg.len + 1;
    }
    return AFTP_OK;
}

static int validate_ranges(const uint8_t *p, size_t len, uint16_t count, uint64_t scan_start,
                           uint64_t scan_end)
{
    aftp_wire_reader r;
    aftp_wire_reader_init(&r, p, len);
    TRY(skip_ranges(&r, count, scan_start, scan_end));
    return r.pos == len ? AFTP_OK : AFTP_ERR_MALFORMED;
}

static void range_iter_init(aftp_wire_range_iter *it, const uint8_t *p, size_t len,
                            uint16_t count, uint64_t scan_start)
{
    aftp_wire_reader_init(&it->r, p, len);
    it->next_min = scan_start;
    it->left = count;
}

void aftp_wire_range_iter_init(aftp_wire_range_iter *it, const aftp_wire_feedback *fb)
{
    range_iter_init(it, fb->range_bytes, fb->range_bytes_len, fb->range_count, fb->scan_start);
}

void aftp_wire_verdict_ranges_init(aftp_wire_range_iter *it, const aftp_wire_verdict *v)
{
    range_iter_init(it, v->range_bytes, v->range_bytes_len, v->range_count, 0);
}

int aftp_wire_ranges_next(aftp_wire_range_iter *it, aftp_wire_range *out)
{
    /* The list was validated by aftp_wire_decode, so the read cannot fail;
     * UINT64_MAX as the limit keeps read_range's checks meaningful. */
    if (it->left == 0 || read_range(&it->r, it->next_min, UINT64_MAX, out) != AFTP_OK)
        return 0;
    it->left--;
    it->next_min = out->start + out->len + 1;
    return 1;
}

/* A range to encode is non-empty, starts at or after next_min and ends at or
 * before limit (<= AFTP_WIRE_MAX_BLOCKS, so end + 1 cannot overflow). */
static int range_fits(const aftp_wire_range *rg, uint64_t next_min, uint64_t limit)
{
    return rg->len != 0 && rg->start >= next_min && rg->start <= limit &&
           rg->len <= limit - rg->start;
}

size_t aftp_wire_ranges_encoded_len(uint64_t scan_start, const aftp_wire_range *ranges,
                                    size_t count)
{
    size_t total = 0;
    uint64_t next_min = scan_start;
    for (size_t i = 0; i < count; i++) {
        const aftp_wire_range *rg = &ranges[i];
        if (!range_fits(rg, next_min, AFTP_WIRE_MAX_BLOCKS))
            return 0;
        total += aftp_wire_varint_len(rg->start - next_min) + aftp_wire_varint_len(rg->len - 1);
        next_min = rg->start + rg->len + 1;
    }
    return total;
}

/* A range list given either as `ranges` or, when that is NULL, already
 * encoded in `bytes` (as decoded: copied as it is, after validation). */
typedef struct range_list {
    uint16_t count;
    const aftp_wire_range *ranges;
    const uint8_t *bytes;
    size_t bytes_len;
    uint64_t scan_start;
    uint64_t scan_end;
} range_list;

static int write_ranges(aftp_wire_writer *w, const range_list *l)
{
    if (l->ranges == NULL) {
        if (validate_ranges(l->bytes, l->bytes_len, l->count, l->scan_start, l->scan_end) !=
            AFTP_OK)
            return AFTP_ERR_INVALID_ARGUMENT;
        return aftp_wire_write_bytes(w, l->bytes, l->bytes_len);
    }
    uint64_t next_min = l->scan_start;
    for (uint16_t i = 0; i < l->count; i++) {
        const aftp_wire_range *rg = &l->ranges[i];
        if (!range_fits(rg, next_min, l->scan_end))
            return AFTP_ERR_INVALID_ARGUMENT;
        TRY(aftp_wire_write_varint(w, rg->start - next_min));
        TRY(aftp_wire_write_varint(w, rg->len - 1));
        next_min = rg->start + rg->len + 1;
    }
    return AFTP_OK;
}

/* ---- per-type bodies ---- */

static int decode_version_neg(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_version_neg *v = &p->u.version_neg;
    const uint8_t *list;
    TRY(aftp_wire_read_u8(r, &v->count));
    if (v->count == 0 || v->count > AFTP_WIRE_MAX_VERSIONS)
        return AFTP_ERR_LIMIT;
    TRY(aftp_wire_read_bytes(r, v->count, &list));
    memcpy(v->versions, list, v->count);
    return AFTP_OK;
}

static int encode_version_neg(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_version_neg *v = &p->u.version_neg;
    if (v->count == 0 || v->count > AFTP_WIRE_MAX_VERSIONS)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u8(w, v->count));
    return aftp_wire_write_bytes(w, v->versions, v->count);
}

/* Extension TLVs (spec section 12.3): type u16, length u16, value. The block
 * must be a whole number of well-formed TLVs. */
static int validate_extensions(const uint8_t *p, size_t len)
{
    aftp_wire_reader r;
    aftp_wire_reader_init(&r, p, len);
    while (r.pos < len) {
        uint16_t type, vlen;
        const uint8_t *value;
        TRY(aftp_wire_read_u16(&r, &type));
        TRY(aftp_wire_read_u16(&r, &vlen));
        TRY(aftp_wire_read_bytes(&r, vlen, &value));
    }
    return AFTP_OK;
}

static int read_extensions(aftp_wire_reader *r, uint16_t *ext_len, const uint8_t **ext)
{
    TRY(aftp_wire_read_u16(r, ext_len));
    TRY(aftp_wire_read_bytes(r, *ext_len, ext));
    return validate_extensions(*ext, *ext_len) == AFTP_OK ? AFTP_OK : AFTP_ERR_MALFORMED;
}

static int write_extensions(aftp_wire_writer *w, uint16_t ext_len, const uint8_t *ext)
{
    if (validate_extensions(ext, ext_len) != AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, ext_len));
    return aftp_wire_write_bytes(w, ext, ext_len);
}

/* Walks a validated block: the next TLV, 1; the end (or a block that was
 * not validated after all), 0. */
static int ext_next(aftp_wire_reader *r, uint16_t *type, const uint8_t **value, uint16_t *len)
{
    return r->pos < r->len && aftp_wire_read_u16(r, type) == AFTP_OK &&
           aftp_wire_read_u16(r, len) == AFTP_OK &&
           aftp_wire_read_bytes(r, *len, value) == AFTP_OK;
}

int aftp_wire_ext_find(const uint8_t *ext, size_t ext_len, uint16_t type, const uint8_t **value,
                       uint16_t *value_len)
{
    aftp_wire_reader r;
    uint16_t t, vlen;
    const uint8_t *v;
    aftp_wire_reader_init(&r, ext, ext_len);
    /* The block was validated; a short read means it was not, and the
     * safe answer is "not there". */
    while (ext_next(&r, &t, &v, &vlen))
        if (t == type) {
            *value = v;
            *value_len = vlen;
            return 1;
        }
    return 0;
}

int aftp_wire_ext_put(aftp_wire_writer *w, uint16_t type, const uint8_t *value, uint16_t value_len)
{
    /* Check the whole TLV first so a short buffer leaves w unchanged. */
    if (w->cap - w->pos < 4u + (size_t)value_len)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    TRY(aftp_wire_write_u16(w, type));
    TRY(aftp_wire_write_u16(w, value_len));
    return aftp_wire_write_bytes(w, value, value_len);
}

int aftp_wire_ext_put_except(aftp_wire_writer *w, const uint8_t *ext, size_t ext_len,
                             uint16_t type)
{
    aftp_wire_reader r;
    uint16_t t, vlen;
    const uint8_t *v;
    aftp_wire_reader_init(&r, ext, ext_len);
    while (ext_next(&r, &t, &v, &vlen))
        if (t != type)
            TRY(aftp_wire_ext_put(w, t, v, vlen));
    return AFTP_OK;
}

int aftp_wire_ext_rate_cap(const uint8_t *ext, size_t ext_len, uint64_t *bps)
{
    const uint8_t *v;
    uint16_t vlen;
    aftp_wire_reader r;
    if (!aftp_wire_ext_find(ext, ext_len, AFTP_WIRE_EXT_RATE_CAP, &v, &vlen))
        return 0;
    aftp_wire_reader_init(&r, v, vlen);
    if (vlen != AFTP_WIRE_RATE_CAP_LEN || aftp_wire_read_u64(&r, bps) != AFTP_OK || *bps == 0)
        return -1;
    return 1;
}

int aftp_wire_ext_put_rate_cap(aftp_wire_writer *w, uint64_t bps)
{
    uint8_t value[AFTP_WIRE_RATE_CAP_LEN];
    aftp_wire_writer vw;
    aftp_wire_writer_init(&vw, value, sizeof value);
    if (bps == 0)
        return aftp_wire_ext_put(w, AFTP_WIRE_EXT_RATE_CAP, NULL, 0);
    TRY(aftp_wire_write_u64(&vw, bps));
    return aftp_wire_ext_put(w, AFTP_WIRE_EXT_RATE_CAP, value, sizeof value);
}

int aftp_wire_ext_pipeline(const uint8_t *ext, size_t ext_len, uint32_t *window)
{
    const uint8_t *v;
    uint16_t vlen;
    aftp_wire_reader r;
    if (!aftp_wire_ext_find(ext, ext_len, AFTP_WIRE_EXT_PIPELINE, &v, &vlen))
        return 0;
    aftp_wire_reader_init(&r, v, vlen);
    if (vlen != AFTP_WIRE_PIPELINE_LEN || aftp_wire_read_u32(&r, window) != AFTP_OK ||
        *window == 0 || *window > AFTP_WIRE_MAX_WINDOW)
        return -1;
    return 1;
}

int aftp_wire_ext_put_pipeline(aftp_wire_writer *w, uint32_t window)
{
    uint8_t value[AFTP_WIRE_PIPELINE_LEN];
    aftp_wire_writer vw;
    if (window == 0 || window > AFTP_WIRE_MAX_WINDOW)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_wire_writer_init(&vw, value, sizeof value);
    TRY(aftp_wire_write_u32(&vw, window));
    return aftp_wire_ext_put(w, AFTP_WIRE_EXT_PIPELINE, value, sizeof value);
}

int aftp_wire_ext_empty(const uint8_t *ext, size_t ext_len, uint16_t type)
{
    const uint8_t *v;
    uint16_t vlen;
    if (!aftp_wire_ext_find(ext, ext_len, type, &v, &vlen))
        return 0;
    return vlen == 0 ? 1 : -1;
}

int aftp_wire_ext_pull(const uint8_t *ext, size_t ext_len)
{
    return aftp_wire_ext_empty(ext, ext_len, AFTP_WIRE_EXT_PULL);
}

static int valid_max_datagram(uint16_t v)
{
    return v >= AFTP_WIRE_MIN_DATAGRAM && v <= AFTP_WIRE_MAX_DATAGRAM;
}

static int valid_role(uint8_t role)
{
    return role == AFTP_WIRE_ROLE_PUSH || role == AFTP_WIRE_ROLE_PULL;
}

static int decode_hello(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_hello *h = &p->u.hello;
    const uint8_t *list;
    TRY(aftp_wire_read_u8(r, &h->role));
    TRY(aftp_wire_read_u8(r, &h->cipher_count));
    if (h->cipher_count == 0 || h->cipher_count > AFTP_WIRE_MAX_CIPHERS)
        return AFTP_ERR_LIMIT;
    TRY(aftp_wire_read_bytes(r, h->cipher_count, &list));
    memcpy(h->ciphers, list, h->cipher_count);
    TRY(aftp_wire_read_u16(r, &h->max_datagram));
    TRY(read_extensions(r, &h->ext_len, &h->ext));
    if (!valid_role(h->role))
        return AFTP_ERR_MALFORMED;
    if (!valid_max_datagram(h->max_datagram))
        return AFTP_ERR_MALFORMED;
    /* The rest is padding: zeros only, and the datagram must be long enough
     * that a reply never exceeds three times what the client sent. */
    if (r->len < AFTP_WIRE_HELLO_MIN_LEN)
        return AFTP_ERR_MALFORMED;
    for (; r->pos < r->len; r->pos++)
        if (r->buf[r->pos] != 0)
            return AFTP_ERR_MALFORMED;
    return AFTP_OK;
}

static int encode_hello(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_hello *h = &p->u.hello;
    if (h->cipher_count == 0 || h->cipher_count > AFTP_WIRE_MAX_CIPHERS ||
        !valid_role(h->role) || !valid_max_datagram(h->max_datagram))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u8(w, h->role));
    TRY(aftp_wire_write_u8(w, h->cipher_count));
    TRY(aftp_wire_write_bytes(w, h->ciphers, h->cipher_count));
    TRY(aftp_wire_write_u16(w, h->max_datagram));
    TRY(write_extensions(w, h->ext_len, h->ext));
    if (w->pos < AFTP_WIRE_HELLO_MIN_LEN) {
        size_t pad = AFTP_WIRE_HELLO_MIN_LEN - w->pos;
        if (w->cap - w->pos < pad)
            return AFTP_ERR_BUFFER_TOO_SMALL;
        memset(w->buf + w->pos, 0, pad);
        w->pos += pad;
    }
    return AFTP_OK;
}

/* Spec section 14.2.2: "aftp" || version || role || cipher_count || ciphers
 * || max_datagram || client conn_id. Only what the server's answer depends
 * on; the packet number and the extensions are left out so a resent HELLO
 * carries the same handshake message. */
int aftp_wire_hello_prologue(const aftp_wire_hello *hello, uint32_t client_conn_id, uint8_t *out,
                             size_t cap, size_t *out_len)
{
    static const uint8_t label[4] = {'a', 'f', 't', 'p'};
    aftp_wire_writer w;
    if (hello->cipher_count == 0 || hello->cipher_count > AFTP_WIRE_MAX_CIPHERS)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_wire_writer_init(&w, out, cap);
    TRY(aftp_wire_write_bytes(&w, label, sizeof label));
    TRY(aftp_wire_write_u8(&w, AFTP_WIRE_VERSION));
    TRY(aftp_wire_write_u8(&w, hello->role));
    TRY(aftp_wire_write_u8(&w, hello->cipher_count));
    TRY(aftp_wire_write_bytes(&w, hello->ciphers, hello->cipher_count));
    TRY(aftp_wire_write_u16(&w, hello->max_datagram));
    TRY(aftp_wire_write_u32(&w, client_conn_id));
    *out_len = w.pos;
    return AFTP_OK;
}

static int decode_hello_ack(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_hello_ack *h = &p->u.hello_ack;
    TRY(aftp_wire_read_u32(r, &h->server_conn_id));
    TRY(aftp_wire_read_u8(r, &h->cipher));
    TRY(aftp_wire_read_u16(r, &h->max_datagram));
    TRY(read_extensions(r, &h->ext_len, &h->ext));
    if (!valid_max_datagram(h->max_datagram) || h->cipher > AFTP_WIRE_CIPHER_MAX)
        return AFTP_ERR_MALFORMED;
    return AFTP_OK;
}

static int encode_hello_ack(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_hello_ack *h = &p->u.hello_ack;
    if (!valid_max_datagram(h->max_datagram) || h->cipher > AFTP_WIRE_CIPHER_MAX)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, h->server_conn_id));
    TRY(aftp_wire_write_u8(w, h->cipher));
    TRY(aftp_wire_write_u16(w, h->max_datagram));
    return write_extensions(w, h->ext_len, h->ext);
}

static int valid_offer(const aftp_wire_file_offer *o)
{
    return o->size <= AFTP_WIRE_MAX_FILE_SIZE && o->mode <= 07777 &&
           o->block_size >= AFTP_WIRE_MIN_BLOCK && o->block_size <= AFTP_WIRE_MAX_BLOCK &&
           o->path_len >= 1 && o->path_len <= AFTP_WIRE_MAX_PATH &&
           memchr(o->path, 0, o->path_len) == NULL;
}

static int decode_file_offer(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_file_offer *o = &p->u.file_offer;
    uint64_t mtime;
    TRY(aftp_wire_read_u32(r, &o->file_id));
    TRY(aftp_wire_read_u64(r, &o->size));
    TRY(aftp_wire_read_u64(r, &mtime));
    TRY(aftp_wire_read_u32(r, &o->mode));
    TRY(aftp_wire_read_u32(r, &o->block_size));
    TRY(aftp_wire_read_u16(r, &o->flags));
    TRY(aftp_wire_read_u16(r, &o->path_len));
    TRY(aftp_wire_read_bytes(r, o->path_len, &o->path));
    o->mtime_ns = (int64_t)mtime;
    return valid_offer(o) ? AFTP_OK : AFTP_ERR_MALFORMED;
}

static int encode_file_offer(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_file_offer *o = &p->u.file_offer;
    if (!valid_offer(o))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, o->file_id));
    TRY(aftp_wire_write_u64(w, o->size));
    TRY(aftp_wire_write_u64(w, (uint64_t)o->mtime_ns));
    TRY(aftp_wire_write_u32(w, o->mode));
    TRY(aftp_wire_write_u32(w, o->block_size));
    TRY(aftp_wire_write_u16(w, o->flags));
    TRY(aftp_wire_write_u16(w, o->path_len));
    return aftp_wire_write_bytes(w, o->path, o->path_len);
}

static int decode_file_reply(aftp_wire_reader *r, aftp_wire_packet *p)
{
    TRY(aftp_wire_read_u32(r, &p->u.file_reply.file_id));
    return aftp_wire_read_u16(r, &p->u.file_reply.error);
}

static int encode_file_reply(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    TRY(aftp_wire_write_u32(w, p->u.file_reply.file_id));
    return aftp_wire_write_u16(w, p->u.file_reply.error);
}

static int decode_data(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_data *d = &p->u.data;
    TRY(aftp_wire_read_u32(r, &d->file_id));
    TRY(aftp_wire_read_u64(r, &d->block));
    size_t left = reader_left(r);
    if (left == 0)
        return AFTP_ERR_TRUNCATED;
    if (left > AFTP_WIRE_MAX_BLOCK)
        return AFTP_ERR_LIMIT;
    /* The receiver checks the block against the offered size; an index
     * this large is invalid for any file. */
    if (d->block >= AFTP_WIRE_MAX_BLOCKS)
        return AFTP_ERR_MALFORMED;
    d->payload_len = (uint16_t)left;
    return aftp_wire_read_bytes(r, left, &d->payload);
}

static int encode_data(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_data *d = &p->u.data;
    if (d->payload_len == 0 || d->payload_len > AFTP_WIRE_MAX_BLOCK ||
        d->block >= AFTP_WIRE_MAX_BLOCKS)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, d->file_id));
    TRY(aftp_wire_write_u64(w, d->block));
    return aftp_wire_write_bytes(w, d->payload, d->payload_len);
}

/* cum_block <= scan_start <= scan_end <= AFTP_WIRE_MAX_BLOCKS, and the
 * blocks held below cum_block are counted in blocks_received. */
static int valid_feedback_bounds(const aftp_wire_feedback *f)
{
    return f->cum_block <= f->scan_start && f->scan_start <= f->scan_end &&
           f->scan_end <= AFTP_WIRE_MAX_BLOCKS && f->cum_block <= f->blocks_received;
}

static int decode_feedback(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_feedback *f = &p->u.feedback;
    TRY(aftp_wire_read_u32(r, &f->file_id));
    TRY(aftp_wire_read_u64(r, &f->largest_pn));
    TRY(aftp_wire_read_u32(r, &f->ack_delay_us));
    TRY(aftp_wire_read_u64(r, &f->recv_time_us));
    TRY(aftp_wire_read_u64(r, &f->packets_received));
    TRY(aftp_wire_read_u64(r, &f->blocks_received));
    TRY(aftp_wire_read_u64(r, &f->cum_block));
    TRY(aftp_wire_read_u64(r, &f->scan_start));
    TRY(aftp_wire_read_u64(r, &f->scan_end));
    TRY(aftp_wire_read_u16(r, &f->range_count));
    if (f->range_count > AFTP_WIRE_MAX_RANGES)
        return AFTP_ERR_LIMIT;
    if (!valid_feedback_bounds(f))
        return AFTP_ERR_MALFORMED;
    f->ranges = NULL;
    f->range_bytes_len = reader_left(r);
    TRY(aftp_wire_read_bytes(r, f->range_bytes_len, &f->range_bytes));
    return validate_ranges(f->range_bytes, f->range_bytes_len, f->range_count, f->scan_start,
                           f->scan_end);
}

static int encode_feedback(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_feedback *f = &p->u.feedback;
    if (f->range_count > AFTP_WIRE_MAX_RANGES || !valid_feedback_bounds(f))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, f->file_id));
    TRY(aftp_wire_write_u64(w, f->largest_pn));
    TRY(aftp_wire_write_u32(w, f->ack_delay_us));
    TRY(aftp_wire_write_u64(w, f->recv_time_us));
    TRY(aftp_wire_write_u64(w, f->packets_received));
    TRY(aftp_wire_write_u64(w, f->blocks_received));
    TRY(aftp_wire_write_u64(w, f->cum_block));
    TRY(aftp_wire_write_u64(w, f->scan_start));
    TRY(aftp_wire_write_u64(w, f->scan_end));
    TRY(aftp_wire_write_u16(w, f->range_count));
    range_list l = {f->range_count, f->ranges, f->range_bytes, f->range_bytes_len,
                    f->scan_start, f->scan_end};
    return write_ranges(w, &l);
}

static int decode_digest(aftp_wire_reader *r, uint8_t digest[AFTP_WIRE_DIGEST_LEN])
{
    const uint8_t *d;
    TRY(aftp_wire_read_bytes(r, AFTP_WIRE_DIGEST_LEN, &d));
    memcpy(digest, d, AFTP_WIRE_DIGEST_LEN);
    return AFTP_OK;
}

static int decode_file_done(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_file_done *d = &p->u.file_done;
    TRY(aftp_wire_read_u32(r, &d->file_id));
    TRY(aftp_wire_read_u64(r, &d->block_count));
    TRY(decode_digest(r, d->digest));
    return d->block_count <= AFTP_WIRE_MAX_BLOCKS ? AFTP_OK : AFTP_ERR_MALFORMED;
}

static int encode_file_done(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_file_done *d = &p->u.file_done;
    if (d->block_count > AFTP_WIRE_MAX_BLOCKS)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, d->file_id));
    TRY(aftp_wire_write_u64(w, d->block_count));
    return aftp_wire_write_bytes(w, d->digest, AFTP_WIRE_DIGEST_LEN);
}

static int decode_file_result(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_file_result *d = &p->u.file_result;
    TRY(aftp_wire_read_u32(r, &d->file_id));
    TRY(aftp_wire_read_u16(r, &d->error));
    return decode_digest(r, d->digest);
}

static int encode_file_result(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_file_result *d = &p->u.file_result;
    TRY(aftp_wire_write_u32(w, d->file_id));
    TRY(aftp_wire_write_u16(w, d->error));
    return aftp_wire_write_bytes(w, d->digest, AFTP_WIRE_DIGEST_LEN);
}

/* ABANDON: FILE_REPLY's layout; an abandon without an error says nothing. */
static int decode_abandon(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_abandon *a = &p->u.abandon;
    TRY(aftp_wire_read_u32(r, &a->file_id));
    TRY(aftp_wire_read_u16(r, &a->error));
    return a->error != AFTP_WIRE_ERR_NONE ? AFTP_OK : AFTP_ERR_MALFORMED;
}

static int encode_abandon(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_abandon *a = &p->u.abandon;
    if (a->error == AFTP_WIRE_ERR_NONE)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u32(w, a->file_id));
    return aftp_wire_write_u16(w, a->error);
}

static int decode_close(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_close *c = &p->u.close;
    TRY(aftp_wire_read_u16(r, &c->error));
    TRY(aftp_wire_read_u16(r, &c->reason_len));
    if (c->reason_len > AFTP_WIRE_MAX_REASON)
        return AFTP_ERR_LIMIT;
    return aftp_wire_read_bytes(r, c->reason_len, &c->reason);
}

static int encode_close(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_close *c = &p->u.close;
    if (c->reason_len > AFTP_WIRE_MAX_REASON)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, c->error));
    TRY(aftp_wire_write_u16(w, c->reason_len));
    return aftp_wire_write_bytes(w, c->reason, c->reason_len);
}

/* RETRY (spec section 6.11): the token is opaque to the client and echoed
 * in a COOKIE extension, so it is bounded like any extension value. */
static int valid_token_len(uint16_t len)
{
    return len >= 1 && len <= AFTP_WIRE_MAX_TOKEN;
}

static int decode_retry(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_retry *t = &p->u.retry;
    TRY(aftp_wire_read_u16(r, &t->token_len));
    if (!valid_token_len(t->token_len))
        return AFTP_ERR_MALFORMED;
    return aftp_wire_read_bytes(r, t->token_len, &t->token);
}

static int encode_retry(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_retry *t = &p->u.retry;
    if (!valid_token_len(t->token_len))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, t->token_len));
    return aftp_wire_write_bytes(w, t->token, t->token_len);
}

/* SERVER_KEY (spec section 6.12): the key and nothing else. */
static int decode_server_key(aftp_wire_reader *r, aftp_wire_packet *p)
{
    const uint8_t *key;
    TRY(aftp_wire_read_bytes(r, AFTP_WIRE_SERVER_KEY_LEN, &key));
    memcpy(p->u.server_key.key, key, AFTP_WIRE_SERVER_KEY_LEN);
    return AFTP_OK;
}

static int encode_server_key(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    return aftp_wire_write_bytes(w, p->u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
}

/* ---- pipelined mode: ENTRIES and VERDICTS (spec sections 6.13, 6.14) ----
 * Both are a u16 record count then the records. A decoded packet keeps its
 * records encoded (validated once here) and the engines walk them with the
 * iterators, so decoding allocates nothing whatever the count. */

typedef int (*skip_records_fn)(aftp_wire_reader *r, uint16_t count);

/* The count, then `count` records that `skip` reads and checks; the
 * records stay encoded, borrowed from the datagram. */
static int read_batch(aftp_wire_reader *r, uint16_t max, skip_records_fn skip, uint16_t *count,
                      const uint8_t **records, size_t *records_len)
{
    TRY(aftp_wire_read_u16(r, count));
    if (*count == 0 || *count > max)
        return AFTP_ERR_LIMIT;
    size_t start = r->pos;
    TRY(skip(r, *count));
    *records = r->buf + start;
    *records_len = r->pos - start;
    return AFTP_OK;
}

uint64_t aftp_wire_entry_blocks(const aftp_wire_entry *e)
{
    if (e->kind != AFTP_WIRE_KIND_FILE || e->block_size == 0)
        return 0;
    return aftp_wire_block_count(e->size, e->block_size);
}

/* Bytes of the hole list after the target: its count and ranges. */
static size_t holes_len(const aftp_wire_entry *e)
{
    if (!(e->flags & AFTP_WIRE_ENTRY_HOLES))
        return 0;
    return 2 + (e->holes != NULL ? aftp_wire_ranges_encoded_len(0, e->holes, e->hole_count)
                                 : e->hole_bytes_len);
}

size_t aftp_wire_entry_len(const aftp_wire_entry *e)
{
    return AFTP_WIRE_ENTRY_FIXED + (size_t)e->path_len + e->target_len + holes_len(e);
}

static int valid_name(const uint8_t *p, uint16_t len, uint16_t min)
{
    return len >= min && len <= AFTP_WIRE_MAX_PATH && (len == 0 || memchr(p, 0, len) == NULL);
}

/* What a FILE, a DIR and a SYMLINK each require of size, block size and
 * target; then the fields every kind shares. */
static int valid_entry_kind(const aftp_wire_entry *e)
{
    switch (e->kind) {
    case AFTP_WIRE_KIND_FILE:
        return e->size <= AFTP_WIRE_MAX_FILE_SIZE && e->block_size >= AFTP_WIRE_MIN_BLOCK &&
               e->block_size <= AFTP_WIRE_MAX_BLOCK && e->target_len == 0;
    case AFTP_WIRE_KIND_DIR:
        return e->size == 0 && e->block_size == 0 && e->target_len == 0;
    case AFTP_WIRE_KIND_SYMLINK:
        return e->size == 0 && e->block_size == 0 && valid_name(e->target, e->target_len, 1);
    default:
        return 0;
    }
}

static int valid_entry(const aftp_wire_entry *e)
{
    return e->entry_id != 0 && valid_entry_kind(e) && e->mode <= 07777 &&
           valid_name(e->path, e->path_len, 1) && e->base_block <= AFTP_WIRE_MAX_BLOCKS &&
           aftp_wire_entry_blocks(e) <= AFTP_WIRE_MAX_BLOCKS - e->base_block;
}

/* Records of a batch are consecutive entries laid end to end (6.13 step 3). */
static int entry_follows(const aftp_wire_entry *prev, const aftp_wire_entry *e)
{
    return (uint64_t)e->entry_id == (uint64_t)prev->entry_id + 1 &&
           e->base_block == prev->base_block + aftp_wire_entry_blocks(prev);
}

static int read_entry(aftp_wire_reader *r, aftp_wire_entry *e)
{
    uint64_t mtime;
    const uint8_t *digest;
    TRY(aftp_wire_read_u32(r, &e->entry_id));
    TRY(aftp_wire_read_u8(r, &e->kind));
    TRY(aftp_wire_read_u16(r, &e->flags));
    TRY(aftp_wire_read_u64(r, &e->size));
    TRY(aftp_wire_read_u64(r, &mtime));
    TRY(aftp_wire_read_u32(r, &e->mode));
    TRY(aftp_wire_read_u64(r, &e->base_block));
    TRY(aftp_wire_read_u32(r, &e->block_size));
    TRY(aftp_wire_read_u64(r, &e->source_id));
    TRY(aftp_wire_read_bytes(r, AFTP_WIRE_DIGEST_LEN, &digest));
    TRY(aftp_wire_read_u16(r, &e->path_len));
    TRY(aftp_wire_read_u16(r, &e->target_len));
    TRY(aftp_wire_read_bytes(r, e->path_len, &e->path));
    TRY(aftp_wire_read_bytes(r, e->target_len, &e->target));
    memcpy(e->digest, digest, AFTP_WIRE_DIGEST_LEN);
    e->mtime_ns = (int64_t)mtime;
    e->hole_count = 0;
    e->holes = NULL;
    e->hole_bytes = NULL;
    e->hole_bytes_len = 0;
    return AFTP_OK;
}

/* The hole list of a record whose other fields are valid (6.13 step 4):
 * FILE only, 1..AFTP_WIRE_MAX_HOLES ranges inside the file's blocks. */
static int read_holes(aftp_wire_reader *r, aftp_wire_entry *e)
{
    if (!(e->flags & AFTP_WIRE_ENTRY_HOLES))
        return AFTP_OK;
    if (e->kind != AFTP_WIRE_KIND_FILE)
        return AFTP_ERR_MALFORMED;
    TRY(aftp_wire_read_u16(r, &e->hole_count));
    if (e->hole_count == 0)
        return AFTP_ERR_MALFORMED;
    if (e->hole_count > AFTP_WIRE_MAX_HOLES)
        return AFTP_ERR_LIMIT;
    size_t at = r->pos;
    TRY(skip_ranges(r, e->hole_count, 0, aftp_wire_entry_blocks(e)));
    e->hole_bytes = r->buf + at;
    e->hole_bytes_len = r->pos - at;
    return AFTP_OK;
}

/* Flag HOLES exactly when a FILE has a list of 1..AFTP_WIRE_MAX_HOLES. */
static int valid_holes_field(const aftp_wire_entry *e)
{
    if (!(e->flags & AFTP_WIRE_ENTRY_HOLES))
        return e->hole_count == 0;
    return e->kind == AFTP_WIRE_KIND_FILE && e->hole_count >= 1 &&
           e->hole_count <= AFTP_WIRE_MAX_HOLES;
}

static int write_holes(aftp_wire_writer *w, const aftp_wire_entry *e)
{
    if (!(e->flags & AFTP_WIRE_ENTRY_HOLES))
        return AFTP_OK;
    TRY(aftp_wire_write_u16(w, e->hole_count));
    range_list l = {e->hole_count, e->holes, e->hole_bytes, e->hole_bytes_len, 0,
                    aftp_wire_entry_blocks(e)};
    return write_ranges(w, &l);
}

void aftp_wire_entry_holes_init(aftp_wire_range_iter *it, const aftp_wire_entry *e)
{
    range_iter_init(it, e->hole_bytes, e->hole_bytes_len, e->hole_count, 0);
}

static int write_entry(aftp_wire_writer *w, const aftp_wire_entry *e)
{
    TRY(aftp_wire_write_u32(w, e->entry_id));
    TRY(aftp_wire_write_u8(w, e->kind));
    TRY(aftp_wire_write_u16(w, e->flags));
    TRY(aftp_wire_write_u64(w, e->size));
    TRY(aftp_wire_write_u64(w, (uint64_t)e->mtime_ns));
    TRY(aftp_wire_write_u32(w, e->mode));
    TRY(aftp_wire_write_u64(w, e->base_block));
    TRY(aftp_wire_write_u32(w, e->block_size));
    TRY(aftp_wire_write_u64(w, e->source_id));
    TRY(aftp_wire_write_bytes(w, e->digest, AFTP_WIRE_DIGEST_LEN));
    TRY(aftp_wire_write_u16(w, e->path_len));
    TRY(aftp_wire_write_u16(w, e->target_len));
    TRY(aftp_wire_write_bytes(w, e->path, e->path_len));
    TRY(aftp_wire_write_bytes(w, e->target, e->target_len));
    return write_holes(w, e);
}

/* Reads and checks `count` entry records (6.13 steps 2 and 3). */
static int skip_entries(aftp_wire_reader *r, uint16_t count)
{
    aftp_wire_entry prev = {0}, e; /* prev: read only from the second record on */
    for (uint16_t i = 0; i < count; i++) {
        TRY(read_entry(r, &e));
        if (!valid_entry(&e) || (i > 0 && !entry_follows(&prev, &e)))
            return AFTP_ERR_MALFORMED;
        TRY(read_holes(r, &e));
        prev = e;
    }
    return AFTP_OK;
}

static int decode_entries(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_entries *b = &p->u.entries;
    b->entries = NULL;
    return read_batch(r, AFTP_WIRE_MAX_ENTRIES, skip_entries, &b->count, &b->record_bytes,
                      &b->record_bytes_len);
}

static int write_encoded_records(aftp_wire_writer *w, const uint8_t *p, size_t len, uint16_t count,
                                 skip_records_fn skip)
{
    aftp_wire_reader r;
    aftp_wire_reader_init(&r, p, len);
    if (skip(&r, count) != AFTP_OK || r.pos != len)
        return AFTP_ERR_INVALID_ARGUMENT;
    return aftp_wire_write_bytes(w, p, len);
}

static int encode_entries(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_entries *b = &p->u.entries;
    if (b->count == 0 || b->count > AFTP_WIRE_MAX_ENTRIES)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, b->count));
    if (b->entries == NULL)
        return write_encoded_records(w, b->record_bytes, b->record_bytes_len, b->count,
                                     skip_entries);
    for (uint16_t i = 0; i < b->count; i++) {
        const aftp_wire_entry *e = &b->entries[i];
        if (!valid_entry(e) || !valid_holes_field(e) ||
            (i > 0 && !entry_follows(&b->entries[i - 1], e)))
            return AFTP_ERR_INVALID_ARGUMENT;
        TRY(write_entry(w, e));
    }
    return AFTP_OK;
}

/* A packet's body without its header (message 1's payload, spec 12.3.4):
 * decoded as the packet's would be, trailing bytes MALFORMED. */
static int decode_body(const uint8_t *buf, size_t len,
                       int (*decode)(aftp_wire_reader *, aftp_wire_packet *),
                       aftp_wire_packet *p)
{
    aftp_wire_reader r;
    aftp_wire_reader_init(&r, buf, len);
    int rc = decode(&r, p);
    return rc == AFTP_OK && r.pos != len ? AFTP_ERR_MALFORMED : rc;
}

static int encode_body(const aftp_wire_packet *p,
                       int (*encode)(aftp_wire_writer *, const aftp_wire_packet *),
                       uint8_t *buf, size_t cap, size_t *len)
{
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, buf, cap);
    int rc = encode(&w, p);
    *len = w.pos;
    return rc;
}

int aftp_wire_early_entries_decode(const uint8_t *buf, size_t len, aftp_wire_entries *out)
{
    aftp_wire_packet p;
    int rc = decode_body(buf, len, decode_entries, &p);
    if (rc == AFTP_OK)
        *out = p.u.entries;
    return rc;
}

int aftp_wire_early_entries_encode(const aftp_wire_entries *e, uint8_t *buf, size_t cap,
                                   size_t *len)
{
    aftp_wire_packet p;
    p.u.entries = *e;
    return encode_body(&p, encode_entries, buf, cap, len);
}

/* Error only with REFUSED, held ranges only with RESUME, ids ascending. */
static int valid_verdict(const aftp_wire_verdict *v, uint32_t prev_id)
{
    return v->entry_id != 0 && v->entry_id > prev_id && v->verdict <= AFTP_WIRE_VERDICT_MAX &&
           (v->error != 0) == (v->verdict == AFTP_WIRE_VERDICT_REFUSED) &&
           (v->range_count != 0) == (v->verdict == AFTP_WIRE_VERDICT_RESUME);
}

/* One verdict record; *ranges_total counts the packet's held ranges. */
static int read_verdict(aftp_wire_reader *r, uint32_t prev_id, uint32_t *ranges_total,
                        aftp_wire_verdict *v)
{
    size_t ranges_at;
    TRY(aftp_wire_read_u32(r, &v->entry_id));
    TRY(aftp_wire_read_u8(r, &v->verdict));
    TRY(aftp_wire_read_u16(r, &v->error));
    TRY(aftp_wire_read_u16(r, &v->range_count));
    if (!valid_verdict(v, prev_id))
        return AFTP_ERR_MALFORMED;
    *ranges_total += v->range_count;
    if (*ranges_total > AFTP_WIRE_MAX_RANGES)
        return AFTP_ERR_LIMIT;
    ranges_at = r->pos;
    TRY(skip_ranges(r, v->range_count, 0, AFTP_WIRE_MAX_BLOCKS));
    v->ranges = NULL;
    v->range_bytes = r->buf + ranges_at;
    v->range_bytes_len = r->pos - ranges_at;
    return AFTP_OK;
}

static int skip_verdicts(aftp_wire_reader *r, uint16_t count)
{
    aftp_wire_verdict v;
    uint32_t prev_id = 0, ranges_total = 0;
    for (uint16_t i = 0; i < count; i++) {
        TRY(read_verdict(r, prev_id, &ranges_total, &v));
        prev_id = v.entry_id;
    }
    return AFTP_OK;
}

static int decode_verdicts(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_verdicts *b = &p->u.verdicts;
    b->verdicts = NULL;
    return read_batch(r, AFTP_WIRE_MAX_VERDICTS, skip_verdicts, &b->count, &b->record_bytes,
                      &b->record_bytes_len);
}

static int write_verdict(aftp_wire_writer *w, const aftp_wire_verdict *v)
{
    TRY(aftp_wire_write_u32(w, v->entry_id));
    TRY(aftp_wire_write_u8(w, v->verdict));
    TRY(aftp_wire_write_u16(w, v->error));
    TRY(aftp_wire_write_u16(w, v->range_count));
    range_list l = {v->range_count, v->ranges, v->range_bytes, v->range_bytes_len, 0,
                    AFTP_WIRE_MAX_BLOCKS};
    return write_ranges(w, &l);
}

static int encode_verdicts(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_verdicts *b = &p->u.verdicts;
    uint32_t prev_id = 0, ranges_total = 0;
    if (b->count == 0 || b->count > AFTP_WIRE_MAX_VERDICTS)
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, b->count));
    if (b->verdicts == NULL)
        return write_encoded_records(w, b->record_bytes, b->record_bytes_len, b->count,
                                     skip_verdicts);
    for (uint16_t i = 0; i < b->count; i++) {
        const aftp_wire_verdict *v = &b->verdicts[i];
        ranges_total += v->range_count;
        if (!valid_verdict(v, prev_id) || ranges_total > AFTP_WIRE_MAX_RANGES)
            return AFTP_ERR_INVALID_ARGUMENT;
        TRY(write_verdict(w, v));
        prev_id = v->entry_id;
    }
    return AFTP_OK;
}

void aftp_wire_entries_iter_init(aftp_wire_record_iter *it, const aftp_wire_entries *e)
{
    aftp_wire_reader_init(&it->r, e->record_bytes, e->record_bytes_len);
    it->left = e->count;
}

int aftp_wire_entries_next(aftp_wire_record_iter *it, aftp_wire_entry *out)
{
    /* The records were validated by aftp_wire_decode: a failed read means
     * they were not, and the safe answer is "no more". */
    if (it->left == 0 || read_entry(&it->r, out) != AFTP_OK || read_holes(&it->r, out) != AFTP_OK)
        return 0;
    it->left--;
    return 1;
}

void aftp_wire_verdicts_iter_init(aftp_wire_record_iter *it, const aftp_wire_verdicts *v)
{
    aftp_wire_reader_init(&it->r, v->record_bytes, v->record_bytes_len);
    it->left = v->count;
}

int aftp_wire_verdicts_next(aftp_wire_record_iter *it, aftp_wire_verdict *out)
{
    uint32_t ranges_total = 0;
    if (it->left == 0 || read_verdict(&it->r, 0, &ranges_total, out) != AFTP_OK)
        return 0;
    it->left--;
    return 1;
}

/* PULL_REQUEST (spec 6.16): paths of 1..MAX_PATH bytes without NUL (the
 * server makes C strings of them), at most MAX_PULL_PATHS. */
static int read_pull_path(aftp_wire_reader *r, aftp_wire_path *out)
{
    aftp_wire_path path;
    TRY(aftp_wire_read_u16(r, &path.len));
    if (path.len == 0 || path.len > AFTP_WIRE_MAX_PATH)
        return AFTP_ERR_MALFORMED;
    TRY(aftp_wire_read_bytes(r, path.len, &path.bytes));
    if (memchr(path.bytes, 0, path.len) != NULL)
        return AFTP_ERR_MALFORMED;
    *out = path;
    return AFTP_OK;
}

static int skip_pull_paths(aftp_wire_reader *r, uint16_t count)
{
    aftp_wire_path path;
    for (uint16_t i = 0; i < count; i++)
        TRY(read_pull_path(r, &path));
    return AFTP_OK;
}

static int valid_pull_count(uint16_t count)
{
    return count >= 1 && count <= AFTP_WIRE_MAX_PULL_PATHS;
}

static int decode_pull_request(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_pull_request *q = &p->u.pull_request;
    TRY(aftp_wire_read_u16(r, &q->flags));
    TRY(aftp_wire_read_u64(r, &q->max_rate_bps));
    TRY(aftp_wire_read_u16(r, &q->path_count));
    if (!valid_pull_count(q->path_count))
        return AFTP_ERR_LIMIT;
    size_t start = r->pos;
    TRY(skip_pull_paths(r, q->path_count));
    q->paths = NULL;
    q->path_bytes = r->buf + start;
    q->path_bytes_len = r->pos - start;
    return AFTP_OK;
}

static int write_pull_paths(aftp_wire_writer *w, const aftp_wire_pull_request *q)
{
    if (q->paths == NULL)
        return write_encoded_records(w, q->path_bytes, q->path_bytes_len, q->path_count,
                                     skip_pull_paths);
    for (uint16_t i = 0; i < q->path_count; i++) {
        const aftp_wire_path *path = &q->paths[i];
        if (path->len == 0 || path->len > AFTP_WIRE_MAX_PATH ||
            memchr(path->bytes, 0, path->len) != NULL)
            return AFTP_ERR_INVALID_ARGUMENT;
        TRY(aftp_wire_write_u16(w, path->len));
        TRY(aftp_wire_write_bytes(w, path->bytes, path->len));
    }
    return AFTP_OK;
}

static int encode_pull_request(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_pull_request *q = &p->u.pull_request;
    if (!valid_pull_count(q->path_count))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, q->flags));
    TRY(aftp_wire_write_u64(w, q->max_rate_bps));
    TRY(aftp_wire_write_u16(w, q->path_count));
    return write_pull_paths(w, q);
}

int aftp_wire_early_request_decode(const uint8_t *buf, size_t len,
                                   aftp_wire_pull_request *out)
{
    aftp_wire_packet p;
    int rc = decode_body(buf, len, decode_pull_request, &p);
    if (rc == AFTP_OK)
        *out = p.u.pull_request;
    return rc;
}

int aftp_wire_early_request_encode(const aftp_wire_pull_request *q, uint8_t *buf, size_t cap,
                                   size_t *len)
{
    aftp_wire_packet p;
    p.u.pull_request = *q;
    return encode_body(&p, encode_pull_request, buf, cap, len);
}

void aftp_wire_pull_paths_iter_init(aftp_wire_record_iter *it, const aftp_wire_pull_request *q)
{
    aftp_wire_reader_init(&it->r, q->path_bytes, q->path_bytes_len);
    it->left = q->path_count;
}

int aftp_wire_pull_paths_next(aftp_wire_record_iter *it, aftp_wire_path *out)
{
    if (it->left == 0 || read_pull_path(&it->r, out) != AFTP_OK)
        return 0;
    it->left--;
    return 1;
}

/* PULL_REPLY (spec 6.17): one error per requested path. */
static int decode_pull_reply(aftp_wire_reader *r, aftp_wire_packet *p)
{
    aftp_wire_pull_reply *a = &p->u.pull_reply;
    TRY(aftp_wire_read_u16(r, &a->count));
    if (!valid_pull_count(a->count))
        return AFTP_ERR_LIMIT;
    for (uint16_t i = 0; i < a->count; i++)
        TRY(aftp_wire_read_u16(r, &a->errors[i]));
    return AFTP_OK;
}

static int encode_pull_reply(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    const aftp_wire_pull_reply *a = &p->u.pull_reply;
    if (!valid_pull_count(a->count))
        return AFTP_ERR_INVALID_ARGUMENT;
    TRY(aftp_wire_write_u16(w, a->count));
    for (uint16_t i = 0; i < a->count; i++)
        TRY(aftp_wire_write_u16(w, a->errors[i]));
    return AFTP_OK;
}

/* RATE_UPDATE (spec 6.18): two u64, sequence then cap. */
static int decode_rate_update(aftp_wire_reader *r, aftp_wire_packet *p)
{
    TRY(aftp_wire_read_u64(r, &p->u.rate_update.seq));
    return aftp_wire_read_u64(r, &p->u.rate_update.cap_bps);
}

static int encode_rate_update(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    TRY(aftp_wire_write_u64(w, p->u.rate_update.seq));
    return aftp_wire_write_u64(w, p->u.rate_update.cap_bps);
}

/* PULL_END (spec 6.19): one u32, the session's entry count. */
static int decode_pull_end(aftp_wire_reader *r, aftp_wire_packet *p)
{
    return aftp_wire_read_u32(r, &p->u.pull_end.entry_count);
}

static int encode_pull_end(aftp_wire_writer *w, const aftp_wire_packet *p)
{
    return aftp_wire_write_u32(w, p->u.pull_end.entry_count);
}

typedef struct wire_codec {
    const char *name;
    int (*decode)(aftp_wire_reader *r, aftp_wire_packet *p);
    int (*encode)(aftp_wire_writer *w, const aftp_wire_packet *p);
} wire_codec;

static const wire_codec codecs[AFTP_WIRE_TYPE_MAX + 1] = {
    [AFTP_WIRE_VERSION_NEG] = {"VERSION_NEG", decode_version_neg, encode_version_neg},
    [AFTP_WIRE_HELLO] = {"HELLO", decode_hello, encode_hello},
    [AFTP_WIRE_HELLO_ACK] = {"HELLO_ACK", decode_hello_ack, encode_hello_ack},
    [AFTP_WIRE_FILE_OFFER] = {"FILE_OFFER", decode_file_offer, encode_file_offer},
    [AFTP_WIRE_FILE_REPLY] = {"FILE_REPLY", decode_file_reply, encode_file_reply},
    [AFTP_WIRE_DATA] = {"DATA", decode_data, encode_data},
    [AFTP_WIRE_FEEDBACK] = {"FEEDBACK", decode_feedback, encode_feedback},
    [AFTP_WIRE_FILE_DONE] = {"FILE_DONE", decode_file_done, encode_file_done},
    [AFTP_WIRE_FILE_RESULT] = {"FILE_RESULT", decode_file_result, encode_file_result},
    [AFTP_WIRE_CLOSE] = {"CLOSE", decode_close, encode_close},
    [AFTP_WIRE_RETRY] = {"RETRY", decode_retry, encode_retry},
    [AFTP_WIRE_SERVER_KEY] = {"SERVER_KEY", decode_server_key, encode_server_key},
    [AFTP_WIRE_ENTRIES] = {"ENTRIES", decode_entries, encode_entries},
    [AFTP_WIRE_VERDICTS] = {"VERDICTS", decode_verdicts, encode_verdicts},
    [AFTP_WIRE_ABANDON] = {"ABANDON", decode_abandon, encode_abandon},
    [AFTP_WIRE_PULL_REQUEST] = {"PULL_REQUEST", decode_pull_request, encode_pull_request},
    [AFTP_WIRE_PULL_REPLY] = {"PULL_REPLY", decode_pull_reply, encode_pull_reply},
    [AFTP_WIRE_RATE_UPDATE] = {"RATE_UPDATE", decode_rate_update, encode_rate_update},
    [AFTP_WIRE_PULL_END] = {"PULL_END", decode_pull_end, encode_pull_end},
};

const char *aftp_wire_type_name(uint8_t type)
{
    return type <= AFTP_WIRE_TYPE_MAX ? codecs[type].name : "UNKNOWN";
}

/* A version-0 header is only valid on VERSION_NEG and vice versa. */
static int header_consistent(const aftp_wire_header *h)
{
    if (h->version == AFTP_WIRE_VERSION_NEGOTIATION)
        return h->type == AFTP_WIRE_VERSION_NEG ? AFTP_OK : AFTP_ERR_MALFORMED;
    if (h->version != AFTP_WIRE_VERSION)
        return AFTP_ERR_VERSION;
    if (h->type == AFTP_WIRE_VERSION_NEG)
        return AFTP_ERR_MALFORMED;
    return h->type <= AFTP_WIRE_TYPE_MAX ? AFTP_OK : AFTP_ERR_UNKNOWN_TYPE;
}

int aftp_wire_header_decode(const uint8_t *buf, size_t len, aftp_wire_header *out)
{
    aftp_wire_reader r;
    aftp_wire_header h;
    aftp_wire_reader_init(&r, buf, len);
    TRY(aftp_wire_read_u8(&r, &h.version));
    TRY(aftp_wire_read_u8(&r, &h.type));
    TRY(aftp_wire_read_u16(&r, &h.flags));
    TRY(aftp_wire_read_u32(&r, &h.conn_id));
    TRY(aftp_wire_read_u64(&r, &h.pn));
    *out = h;
    return AFTP_OK;
}

static int write_header(aftp_wire_writer *w, const aftp_wire_header *h)
{
    TRY(aftp_wire_write_u8(w, h->version));
    TRY(aftp_wire_write_u8(w, h->type));
    TRY(aftp_wire_write_u16(w, h->flags));
    TRY(aftp_wire_write_u32(w, h->conn_id));
    return aftp_wire_write_u64(w, h->pn);
}

int aftp_wire_header_encode(const aftp_wire_header *hdr, uint8_t *buf, size_t cap)
{
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, buf, cap);
    TRY(write_header(&w, hdr));
    return AFTP_OK;
}

int aftp_wire_data_header_encode(const aftp_wire_header *hdr, uint32_t file_id, uint64_t block,
                                 uint8_t *buf, size_t cap)
{
    aftp_wire_writer w;
    if (hdr->type != AFTP_WIRE_DATA)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_wire_writer_init(&w, buf, cap);
    TRY(write_header(&w, hdr));
    TRY(aftp_wire_write_u32(&w, file_id));
    return aftp_wire_write_u64(&w, block);
}

int aftp_wire_decode(const uint8_t *buf, size_t len, aftp_wire_packet *out)
{
    aftp_wire_packet pkt;
    aftp_wire_reader r;
    /* Nothing longer can be encoded, so nothing longer is accepted. */
    if (len > AFTP_WIRE_MAX_DATAGRAM)
        return AFTP_ERR_LIMIT;
    memset(&pkt, 0, sizeof pkt);
    TRY(aftp_wire_header_decode(buf, len, &pkt.hdr));
    TRY(header_consistent(&pkt.hdr));
    aftp_wire_reader_init(&r, buf, len);
    r.pos = AFTP_WIRE_HEADER_LEN;
    TRY(codecs[pkt.hdr.type].decode(&r, &pkt));
    if (r.pos != r.len)
        return AFTP_ERR_MALFORMED;
    *out = pkt;
    return AFTP_OK;
}

int aftp_wire_encode(const aftp_wire_packet *pkt, uint8_t *buf, size_t cap, size_t *written)
{
    aftp_wire_writer w;
    TRY(header_consistent(&pkt->hdr) == AFTP_OK ? AFTP_OK : AFTP_ERR_INVALID_ARGUMENT);
    /* Never write past the largest datagram: a packet that would not fit
     * is over the protocol's limit, however much room the caller has. */
    size_t room = cap < AFTP_WIRE_MAX_DATAGRAM ? cap : AFTP_WIRE_MAX_DATAGRAM;
    aftp_wire_writer_init(&w, buf, room);
    TRY(write_header(&w, &pkt->hdr));
    int rc = codecs[pkt->hdr.type].encode(&w, pkt);
    if (rc == AFTP_ERR_BUFFER_TOO_SMALL && room == AFTP_WIRE_MAX_DATAGRAM)
        return AFTP_ERR_LIMIT;
    TRY(rc);
    *written = w.pos;
    return AFTP_OK;
}

/* Spec section 12.2. The answer depends on the datagram alone, so a server
 * can give it before (and without) any session. */
int aftp_wire_version_neg_reply(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap,
                                size_t *out_len)
{
    aftp_wire_header h;
    /* Short datagrams get nothing: answering them would amplify. */
    if (in_len < AFTP_WIRE_HELLO_MIN_LEN || in_len > AFTP_WIRE_MAX_DATAGRAM ||
        aftp_wire_header_decode(in, in_len, &h) != AFTP_OK || h.version == AFTP_WIRE_VERSION ||
        h.version == AFTP_WIRE_VERSION_NEGOTIATION)
        return 0;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.hdr.version = AFTP_WIRE_VERSION_NEGOTIATION;
    p.hdr.type = AFTP_WIRE_VERSION_NEG;
    p.hdr.conn_id = h.conn_id;
    p.hdr.pn = h.pn;
    p.u.version_neg.count = 1;
    p.u.version_neg.versions[0] = AFTP_WIRE_VERSION;
    int rc = aftp_wire_encode(&p, out, cap, out_len);
    return rc == AFTP_OK ? 1 : rc;
}

const char *aftp_wire_error_name(uint16_t error)
{
    static const char *const names[] = {
        [AFTP_WIRE_ERR_NONE] = "NONE",
        [AFTP_WIRE_ERR_PROTOCOL] = "PROTOCOL",
        [AFTP_WIRE_ERR_VERSION] = "VERSION",
        [AFTP_WIRE_ERR_FILE_EXISTS] = "FILE_EXISTS",
        [AFTP_WIRE_ERR_NO_SPACE] = "NO_SPACE",
        [AFTP_WIRE_ERR_IO] = "IO",
        [AFTP_WIRE_ERR_DIGEST_MISMATCH] = "DIGEST_MISMATCH",
        [AFTP_WIRE_ERR_PATH_REJECTED] = "PATH_REJECTED",
        [AFTP_WIRE_ERR_IDLE_TIMEOUT] = "IDLE_TIMEOUT",
        [AFTP_WIRE_ERR_CANCELLED] = "CANCELLED",
        [AFTP_WIRE_ERR_INTERNAL] = "INTERNAL",
        [AFTP_WIRE_ERR_SOURCE_CHANGED] = "SOURCE_CHANGED",
        [AFTP_WIRE_ERR_PERMISSION] = "PERMISSION",
        [AFTP_WIRE_ERR_LIMIT] = "LIMIT",
        [AFTP_WIRE_ERR_UNAUTHORIZED] = "UNAUTHORIZED",
        [AFTP_WIRE_ERR_NOT_FOUND] = "NOT_FOUND",
    };
    return error < sizeof names / sizeof names[0] ? names[error] : "UNKNOWN";
}
