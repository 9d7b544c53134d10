/* Shared helpers for the wire-format tests (see wire_fixtures.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire_fixtures.h"

/* One extension TLV: type 0x0001, length 3, "abc". */
static const uint8_t fixture_ext[] = {0x00, 0x01, 0x00, 0x03, 'a', 'b', 'c'};
static const uint8_t fixture_path[] = "dir/file.bin";
static const uint8_t fixture_reason[] = "bad thing";
static const uint8_t fixture_token[] = {0x5e, 0xc0, 0x01, 0x7e, 0x9a};
static const aftp_wire_range fixture_ranges[] = {{700, 5}, {710, 1}, {1000, 100}};
static uint8_t fixture_payload[100];
static const uint8_t fixture_dir[] = "photos";
static const uint8_t fixture_file[] = "photos/a.jpg";
static const uint8_t fixture_link[] = "photos/latest";
static const uint8_t fixture_target[] = "a.jpg";
static const aftp_wire_path fixture_pull_paths[] = {
    {sizeof fixture_dir - 1, fixture_dir}, {sizeof fixture_path - 1, fixture_path}};
static aftp_wire_entry fixture_entry_list[3];
/* Blocks 1-2 and 5 of the fixture's 8-block file lie in holes. */
static const aftp_wire_range fixture_holes[2] = {{1, 2}, {5, 1}};
static const aftp_wire_range fixture_held[] = {{0, 3}, {5, 2}};
static const aftp_wire_verdict fixture_verdict_list[] = {
    {7, AFTP_WIRE_VERDICT_SEND, 0, 0, NULL, NULL, 0},
    {8, AFTP_WIRE_VERDICT_RESUME, 0, 2, fixture_held, NULL, 0},
    {9, AFTP_WIRE_VERDICT_SKIP, 0, 0, NULL, NULL, 0},
    {11, AFTP_WIRE_VERDICT_REFUSED, AFTP_WIRE_ERR_PATH_REJECTED, 0, NULL, NULL, 0},
};

static void fixture_header(uint8_t type, aftp_wire_header *h)
{
    h->version = type == AFTP_WIRE_VERSION_NEG ? AFTP_WIRE_VERSION_NEGOTIATION : AFTP_WIRE_VERSION;
    h->type = type;
    h->flags = 0;
    h->conn_id = 0xa1b2c3d4u;
    h->pn = 0x0102030405060708u;
}

static void fixture_digest(uint8_t *digest, uint8_t first)
{
    for (size_t i = 0; i < AFTP_WIRE_DIGEST_LEN; i++)
        digest[i] = (uint8_t)(first + i);
}

static void fixture_hello(aftp_wire_hello *h)
{
    h->role = AFTP_WIRE_ROLE_PUSH;
    h->cipher_count = 3;
    h->ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    h->ciphers[1] = AFTP_WIRE_CIPHER_AES256GCM;
    h->ciphers[2] = AFTP_WIRE_CIPHER_NONE;
    h->max_datagram = 1452;
    h->ext_len = sizeof fixture_ext;
    h->ext = fixture_ext;
}

static void fixture_offer(aftp_wire_file_offer *o)
{
    o->file_id = 3;
    o->size = 1000000;
    o->mtime_ns = -1234567890;
    o->mode = 0644;
    o->block_size = AFTP_WIRE_DEFAULT_BLOCK;
    o->flags = AFTP_WIRE_OFFER_OVERWRITE;
    o->path_len = sizeof fixture_path - 1;
    o->path = fixture_path;
}

static void fixture_feedback(aftp_wire_feedback *f)
{
    f->file_id = 3;
    f->largest_pn = 1000;
    f->ack_delay_us = 250;
    f->recv_time_us = 123456789;
    f->packets_received = 900;
    f->blocks_received = 800;
    /* The list starts above cum_block, so code that took ranges as coded
     * from cum_block would read them 50 blocks early. */
    f->cum_block = 650;
    f->scan_start = 700;
    f->scan_end = 2000;
    f->range_count = sizeof fixture_ranges / sizeof fixture_ranges[0];
    f->ranges = fixture_ranges;
}

/* A directory, a file of 8 blocks in it and a link to that file:
 * consecutive ids 7, 8, 9 laid end to end from stream block 40. */
static void fixture_entries(aftp_wire_entries *b)
{
    aftp_wire_entry *e = fixture_entry_list;
    memset(fixture_entry_list, 0, sizeof fixture_entry_list);
    e[0] = (aftp_wire_entry){.entry_id = 7, .kind = AFTP_WIRE_KIND_DIR, .mtime_ns = -5,
                             .mode = 0755, .base_block = 40, .source_id = 0x1111,
                             .path_len = sizeof fixture_dir - 1, .path = fixture_dir};
    e[1] = (aftp_wire_entry){.entry_id = 8, .kind = AFTP_WIRE_KIND_FILE,
                             .flags = AFTP_WIRE_ENTRY_RESUME | AFTP_WIRE_ENTRY_SYNC |
                                      AFTP_WIRE_ENTRY_CHECKSUM | AFTP_WIRE_ENTRY_HOLES,
                             .hole_count = 2, .holes = fixture_holes,
                             .size = 7 * 1408 + 5, .mtime_ns = 1700000000123456789,
                             .mode = 0640, .base_block = 40, .block_size = 1408,
                             .source_id = 0xfedcba9876543210u,
                             .path_len = sizeof fixture_file - 1, .path = fixture_file};
    fixture_digest(e[1].digest, 0x40);
    e[2] = (aftp_wire_entry){.entry_id = 9, .kind = AFTP_WIRE_KIND_SYMLINK, .mode = 0777,
                             .base_block = 48, .path_len = sizeof fixture_link - 1,
                             .path = fixture_link, .target_len = sizeof fixture_target - 1,
                             .target = fixture_target};
    *b = (aftp_wire_entries){3, fixture_entry_list, NULL, 0};
}

static void fixture_body(uint8_t type, aftp_wire_packet *p)
{
    switch (type) {
    case AFTP_WIRE_VERSION_NEG:
        p->u.version_neg.count = 3;
        p->u.version_neg.versions[0] = 1;
        p->u.version_neg.versions[1] = 2;
        p->u.version_neg.versions[2] = 7;
        break;
    case AFTP_WIRE_HELLO: fixture_hello(&p->u.hello); break;
    case AFTP_WIRE_HELLO_ACK:
        p->u.hello_ack = (aftp_wire_hello_ack){0x0badf00du, AFTP_WIRE_CIPHER_AES256GCM, 1400,
                                               sizeof fixture_ext, fixture_ext};
        break;
    case AFTP_WIRE_FILE_OFFER: fixture_offer(&p->u.file_offer); break;
    case AFTP_WIRE_FILE_REPLY:
        p->u.file_reply = (aftp_wire_file_reply){3, AFTP_WIRE_ERR_FILE_EXISTS};
        break;
    case AFTP_WIRE_DATA:
        for (size_t i = 0; i < sizeof fixture_payload; i++)
            fixture_payload[i] = (uint8_t)(i * 7 + 1);
        p->u.data = (aftp_wire_data){3, 42, sizeof fixture_payload, fixture_payload};
        break;
    case AFTP_WIRE_FEEDBACK: fixture_feedback(&p->u.feedback); break;
    case AFTP_WIRE_FILE_DONE:
        p->u.file_done.file_id = 3;
        p->u.file_done.block_count = 717;
        fixture_digest(p->u.file_done.digest, 0x00);
        break;
    case AFTP_WIRE_FILE_RESULT:
        p->u.file_result.file_id = 3;
        p->u.file_result.error = AFTP_WIRE_ERR_DIGEST_MISMATCH;
        fixture_digest(p->u.file_result.digest, 0xf0);
        break;
    case AFTP_WIRE_CLOSE:
        p->u.close = (aftp_wire_close){AFTP_WIRE_ERR_PROTOCOL, sizeof fixture_reason - 1,
                                       fixture_reason};
        break;
    case AFTP_WIRE_RETRY:
        p->u.retry = (aftp_wire_retry){sizeof fixture_token, fixture_token};
        break;
    case AFTP_WIRE_SERVER_KEY:
        for (size_t i = 0; i < AFTP_WIRE_SERVER_KEY_LEN; i++)
            p->u.server_key.key[i] = (uint8_t)(0x20 + 3 * i);
        break;
    case AFTP_WIRE_ENTRIES: fixture_entries(&p->u.entries); break;
    case AFTP_WIRE_VERDICTS:
        p->u.verdicts = (aftp_wire_verdicts){
            sizeof fixture_verdict_list / sizeof fixture_verdict_list[0], fixture_verdict_list,
            NULL, 0};
        break;
    case AFTP_WIRE_ABANDON:
        p->u.abandon = (aftp_wire_abandon){9, AFTP_WIRE_ERR_SOURCE_CHANGED};
        break;
    case AFTP_WIRE_PULL_REQUEST:
        p->u.pull_request = (aftp_wire_pull_request){
            AFTP_WIRE_ENTRY_RESUME, 50000000, 2, fixture_pull_paths, NULL, 0};
        break;
    case AFTP_WIRE_PULL_REPLY:
        p->u.pull_reply.count = 3;
        p->u.pull_reply.errors[1] = AFTP_WIRE_ERR_NOT_FOUND;
        p->u.pull_reply.errors[2] = AFTP_WIRE_ERR_PATH_REJECTED;
        break;
    case AFTP_WIRE_RATE_UPDATE:
        p->u.rate_update = (aftp_wire_rate_update){3, UINT64_C(250000000)};
        break;
    case AFTP_WIRE_PULL_END:
        p->u.pull_end.entry_count = 7;
        break;
    default: fail_msg("no fixture for type %u", type);
    }
}

void wire_fixture(uint8_t type, aftp_wire_packet *out)
{
    memset(out, 0, sizeof *out);
    fixture_header(type, &out->hdr);
    fixture_body(type, out);
}

size_t wire_encode_ok(const aftp_wire_packet *pkt, uint8_t *buf, size_t cap)
{
    size_t len = 0;
    assert_int_equal(aftp_wire_encode(pkt, buf, cap, &len), AFTP_OK);
    return len;
}

size_t wire_fixture_encode(uint8_t type, uint8_t *buf, size_t cap)
{
    aftp_wire_packet p;
    wire_fixture(type, &p);
    return wire_encode_ok(&p, buf, cap);
}

void wire_decode_ok(const uint8_t *buf, size_t len, aftp_wire_packet *out)
{
    assert_int_equal(aftp_wire_decode(buf, len, out), AFTP_OK);
}

int wire_decode_untouched(const uint8_t *buf, size_t len)
{
    aftp_wire_packet out, sentinel;
    memset(&sentinel, 0xa5, sizeof sentinel);
    out = sentinel;
    int rc = aftp_wire_decode(buf, len, &out);
    if (rc != AFTP_OK)
        assert_memory_equal(&out, &sentinel, sizeof out);
    return rc;
}

void wire_expect_decode_error(const uint8_t *buf, size_t len, int want)
{
    assert_int_equal(wire_decode_untouched(buf, len), want);
}

void wire_expect_encode_error(const aftp_wire_packet *pkt, int want)
{
    static uint8_t buf[WIRE_TEST_BUF];
    size_t written = 0x5a5a;
    assert_int_equal(aftp_wire_encode(pkt, buf, sizeof buf, &written), want);
    assert_int_equal(written, 0x5a5a);
}

static void expect_bytes_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    assert_int_equal(alen, blen);
    if (alen > 0)
        assert_memory_equal(a, b, alen);
}

static void expect_ranges_equal(const aftp_wire_feedback *want, const aftp_wire_feedback *got)
{
    assert_int_equal(want->range_count, got->range_count);
    assert_null(got->ranges);
    if (want->ranges == NULL) {
        expect_bytes_equal(want->range_bytes, want->range_bytes_len, got->range_bytes,
                           got->range_bytes_len);
        return;
    }
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, got);
    for (uint16_t i = 0; i < want->range_count; i++) {
        assert_int_equal(aftp_wire_ranges_next(&it, &rg), 1);
        assert_int_equal(rg.start, want->ranges[i].start);
        assert_int_equal(rg.len, want->ranges[i].len);
    }
    assert_int_equal(aftp_wire_ranges_next(&it, &rg), 0);
}

static void expect_feedback_equal(const aftp_wire_feedback *want, const aftp_wire_feedback *got)
{
    assert_int_equal(want->file_id, got->file_id);
    assert_int_equal(want->largest_pn, got->largest_pn);
    assert_int_equal(want->ack_delay_us, got->ack_delay_us);
    assert_int_equal(want->recv_time_us, got->recv_time_us);
    assert_int_equal(want->packets_received, got->packets_received);
    assert_int_equal(want->blocks_received, got->blocks_received);
    assert_int_equal(want->cum_block, got->cum_block);
    assert_int_equal(want->scan_start, got->scan_start);
    assert_int_equal(want->scan_end, got->scan_end);
    expect_ranges_equal(want, got);
}

static void expect_offer_equal(const aftp_wire_file_offer *want, const aftp_wire_file_offer *got)
{
    assert_int_equal(want->file_id, got->file_id);
    assert_int_equal(want->size, got->size);
    assert_true(want->mtime_ns == got->mtime_ns);
    assert_int_equal(want->mode, got->mode);
    assert_int_equal(want->block_size, got->block_size);
    assert_int_equal(want->flags, got->flags);
    expect_bytes_equal(want->path, want->path_len, got->path, got->path_len);
}

static void expect_ranges_walk(aftp_wire_range_iter *it, const aftp_wire_range *want,
                               uint16_t count);

static void expect_entry_equal(const aftp_wire_entry *want, const aftp_wire_entry *got)
{
    assert_int_equal(want->entry_id, got->entry_id);
    assert_int_equal(want->kind, got->kind);
    assert_int_equal(want->flags, got->flags);
    assert_int_equal(want->size, got->size);
    assert_true(want->mtime_ns == got->mtime_ns);
    assert_int_equal(want->mode, got->mode);
    assert_int_equal(want->base_block, got->base_block);
    assert_int_equal(want->block_size, got->block_size);
    assert_int_equal(want->source_id, got->source_id);
    assert_memory_equal(want->digest, got->digest, AFTP_WIRE_DIGEST_LEN);
    expect_bytes_equal(want->path, want->path_len, got->path, got->path_len);
    expect_bytes_equal(want->target, want->target_len, got->target, got->target_len);
    aftp_wire_range_iter it;
    assert_int_equal(want->hole_count, got->hole_count);
    assert_null(got->holes);
    aftp_wire_entry_holes_init(&it, got);
    expect_ranges_walk(&it, want->holes, want->hole_count);
}

static void expect_entries_equal(const aftp_wire_entries *want, const aftp_wire_entries *got)
{
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    assert_int_equal(want->count, got->count);
    assert_null(got->entries);
    if (want->entries == NULL) {
        expect_bytes_equal(want->record_bytes, want->record_bytes_len, got->record_bytes,
                           got->record_bytes_len);
        return;
    }
    aftp_wire_entries_iter_init(&it, got);
    for (uint16_t i = 0; i < want->count; i++) {
        assert_int_equal(aftp_wire_entries_next(&it, &e), 1);
        expect_entry_equal(&want->entries[i], &e);
    }
    assert_int_equal(aftp_wire_entries_next(&it, &e), 0);
}

/* A decoded range list (it) yields exactly want[0..count). */
static void expect_ranges_walk(aftp_wire_range_iter *it, const aftp_wire_range *want,
                               uint16_t count)
{
    aftp_wire_range rg;
    for (uint16_t i = 0; i < count; i++) {
        assert_int_equal(aftp_wire_ranges_next(it, &rg), 1);
        assert_int_equal(rg.start, want[i].start);
        assert_int_equal(rg.len, want[i].len);
    }
    assert_int_equal(aftp_wire_ranges_next(it, &rg), 0);
}

static void expect_held_equal(const aftp_wire_verdict *want, const aftp_wire_verdict *got)
{
    aftp_wire_range_iter it;
    aftp_wire_verdict_ranges_init(&it, got);
    expect_ranges_walk(&it, want->ranges, want->range_count);
}

static void expect_verdicts_equal(const aftp_wire_verdicts *want, const aftp_wire_verdicts *got)
{
    aftp_wire_record_iter it;
    aftp_wire_verdict v;
    assert_int_equal(want->count, got->count);
    assert_null(got->verdicts);
    if (want->verdicts == NULL) {
        expect_bytes_equal(want->record_bytes, want->record_bytes_len, got->record_bytes,
                           got->record_bytes_len);
        return;
    }
    aftp_wire_verdicts_iter_init(&it, got);
    for (uint16_t i = 0; i < want->count; i++) {
        const aftp_wire_verdict *w = &want->verdicts[i];
        assert_int_equal(aftp_wire_verdicts_next(&it, &v), 1);
        assert_int_equal(w->entry_id, v.entry_id);
        assert_int_equal(w->verdict, v.verdict);
        assert_int_equal(w->error, v.error);
        assert_int_equal(w->range_count, v.range_count);
        assert_null(v.ranges);
        expect_held_equal(w, &v);
    }
    assert_int_equal(aftp_wire_verdicts_next(&it, &v), 0);
}

static void expect_hello_equal(const aftp_wire_hello *want, const aftp_wire_hello *got)
{
    assert_int_equal(want->role, got->role);
    expect_bytes_equal(want->ciphers, want->cipher_count, got->ciphers, got->cipher_count);
    assert_int_equal(want->max_datagram, got->max_datagram);
    expect_bytes_equal(want->ext, want->ext_len, got->ext, got->ext_len);
}

/* A PULL_REQUEST's fields and its paths, walked on both sides (either
 * may hold them as an array or encoded). */
static void expect_pull_request_equal(const aftp_wire_pull_request *want,
                                      const aftp_wire_pull_request *got)
{
    aftp_wire_record_iter wi, gi;
    aftp_wire_path wp, gp;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    aftp_wire_pull_request enc = *want;
    assert_int_equal(want->flags, got->flags);
    assert_int_equal(want->max_rate_bps, got->max_rate_bps);
    assert_int_equal(want->path_count, got->path_count);
    if (want->paths != NULL) { /* walk an array as the decoder would: encode it first */
        aftp_wire_writer w;
        aftp_wire_writer_init(&w, buf, sizeof buf);
        for (uint16_t i = 0; i < want->path_count; i++) {
            assert_int_equal(aftp_wire_write_u16(&w, want->paths[i].len), AFTP_OK);
            assert_int_equal(aftp_wire_write_bytes(&w, want->paths[i].bytes, want->paths[i].len),
                             AFTP_OK);
        }
        enc.path_bytes = buf;
        enc.path_bytes_len = w.pos;
    }
    aftp_wire_pull_paths_iter_init(&wi, &enc);
    aftp_wire_pull_paths_iter_init(&gi, got);
    for (uint16_t i = 0; i < want->path_count; i++) {
        assert_true(aftp_wire_pull_paths_next(&wi, &wp));
        assert_true(aftp_wire_pull_paths_next(&gi, &gp));
        expect_bytes_equal(wp.bytes, wp.len, gp.bytes, gp.len);
    }
    assert_false(aftp_wire_pull_paths_next(&gi, &gp));
}

static void expect_body_equal(const aftp_wire_packet *want, const aftp_wire_packet *got)
{
    const uint8_t *wv = want->u.version_neg.versions, *gv = got->u.version_neg.versions;
    switch (want->hdr.type) {
    case AFTP_WIRE_VERSION_NEG:
        expect_bytes_equal(wv, want->u.version_neg.count, gv, got->u.version_neg.count);
        break;
    case AFTP_WIRE_HELLO: expect_hello_equal(&want->u.hello, &got->u.hello); break;
    case AFTP_WIRE_HELLO_ACK:
        assert_int_equal(want->u.hello_ack.server_conn_id, got->u.hello_ack.server_conn_id);
        assert_int_equal(want->u.hello_ack.cipher, got->u.hello_ack.cipher);
        assert_int_equal(want->u.hello_ack.max_datagram, got->u.hello_ack.max_datagram);
        expect_bytes_equal(want->u.hello_ack.ext, want->u.hello_ack.ext_len, got->u.hello_ack.ext,
                           got->u.hello_ack.ext_len);
        break;
    case AFTP_WIRE_FILE_OFFER: expect_offer_equal(&want->u.file_offer, &got->u.file_offer); break;
    case AFTP_WIRE_FILE_REPLY:
        assert_int_equal(want->u.file_reply.file_id, got->u.file_reply.file_id);
        assert_int_equal(want->u.file_reply.error, got->u.file_reply.error);
        break;
    case AFTP_WIRE_ABANDON:
        assert_int_equal(want->u.abandon.file_id, got->u.abandon.file_id);
        assert_int_equal(want->u.abandon.error, got->u.abandon.error);
        break;
    case AFTP_WIRE_DATA:
        assert_int_equal(want->u.data.file_id, got->u.data.file_id);
        assert_int_equal(want->u.data.block, got->u.data.block);
        expect_bytes_equal(want->u.data.payload, want->u.data.payload_len, got->u.data.payload,
                           got->u.data.payload_len);
        break;
    case AFTP_WIRE_FEEDBACK: expect_feedback_equal(&want->u.feedback, &got->u.feedback); break;
    case AFTP_WIRE_FILE_DONE:
        assert_int_equal(want->u.file_done.file_id, got->u.file_done.file_id);
        assert_int_equal(want->u.file_done.block_count, got->u.file_done.block_count);
        assert_memory_equal(want->u.file_done.digest, got->u.file_done.digest, AFTP_WIRE_DIGEST_LEN);
        break;
    case AFTP_WIRE_FILE_RESULT:
        assert_int_equal(want->u.file_result.file_id, got->u.file_result.file_id);
        assert_int_equal(want->u.file_result.error, got->u.file_result.error);
        assert_memory_equal(want->u.file_result.digest, got->u.file_result.digest,
                            AFTP_WIRE_DIGEST_LEN);
        break;
    case AFTP_WIRE_CLOSE:
        assert_int_equal(want->u.close.error, got->u.close.error);
        expect_bytes_equal(want->u.close.reason, want->u.close.reason_len, got->u.close.reason,
                           got->u.close.reason_len);
        break;
    case AFTP_WIRE_RETRY:
        expect_bytes_equal(want->u.retry.token, want->u.retry.token_len, got->u.retry.token,
                           got->u.retry.token_len);
        break;
    case AFTP_WIRE_SERVER_KEY:
        assert_memory_equal(want->u.server_key.key, got->u.server_key.key,
                            AFTP_WIRE_SERVER_KEY_LEN);
        break;
    case AFTP_WIRE_ENTRIES: expect_entries_equal(&want->u.entries, &got->u.entries); break;
    case AFTP_WIRE_VERDICTS: expect_verdicts_equal(&want->u.verdicts, &got->u.verdicts); break;
    case AFTP_WIRE_PULL_REQUEST:
        expect_pull_request_equal(&want->u.pull_request, &got->u.pull_request);
        break;
    case AFTP_WIRE_PULL_REPLY:
        assert_int_equal(want->u.pull_reply.count, got->u.pull_reply.count);
        assert_memory_equal(want->u.pull_reply.errors, got->u.pull_reply.errors,
                            want->u.pull_reply.count * sizeof want->u.pull_reply.errors[0]);
        break;
    case AFTP_WIRE_RATE_UPDATE:
        assert_int_equal(want->u.rate_update.seq, got->u.rate_update.seq);
        assert_int_equal(want->u.rate_update.cap_bps, got->u.rate_update.cap_bps);
        break;
    case AFTP_WIRE_PULL_END:
        assert_int_equal(want->u.pull_end.entry_count, got->u.pull_end.entry_count);
        break;
    default: fail_msg("unexpected type %u", want->hdr.type);
    }
}

void wire_expect_packets_equal(const aftp_wire_packet *want, const aftp_wire_packet *got)
{
    assert_int_equal(want->hdr.version, got->hdr.version);
    assert_int_equal(want->hdr.type, got->hdr.type);
    assert_int_equal(want->hdr.flags, got->hdr.flags);
    assert_int_equal(want->hdr.conn_id, got->hdr.conn_id);
    assert_int_equal(want->hdr.pn, got->hdr.pn);
    expect_body_equal(want, got);
}

void wire_put_be(uint8_t *p, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}
