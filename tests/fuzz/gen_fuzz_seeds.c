/*
 * Writes the seed inputs of tests/fuzz/corpus/: gen_fuzz_seeds OUT_DIR
 * creates OUT_DIR/<target>/seed-* for every fuzz target. Regenerate the
 * checked-in seeds with  build/tests/fuzz/gen_fuzz_seeds tests/fuzz/corpus
 *
 * wire_decode and wire_header get real datagrams made by aftp_wire_encode:
 * every packet type, the limits, and a few invalid ones made by changing
 * bytes of valid ones. Each seed is decoded here and must give the verdict
 * it was written for, so a seed that stopped testing what its name says
 * fails loudly. wire_ranges and wire_framed get inputs in the layouts
 * documented in their harnesses.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_harness.h"
#include "door/aftp_keyreq.h"
#include "proto/aftp_wire.h"

/* Room for the largest seed: a FEEDBACK just over the datagram limit. */
#define SEED_CAP (2u * AFTP_WIRE_MAX_DATAGRAM)

static uint8_t seed[SEED_CAP];
static uint8_t payload[AFTP_WIRE_MAX_DATAGRAM];
static int failures;

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen_fuzz_seeds: mkdir %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void write_seed(const char *dir, const char *target, const char *name,
                       const uint8_t *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, target);
    make_dir(path);
    snprintf(path, sizeof path, "%s/%s/seed-%s", dir, target, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "gen_fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
}

/* A decode seed, also a header seed (its first bytes), after checking that
 * the decoder gives it the verdict it was written for. */
static void emit_datagram(const char *dir, const char *name, const uint8_t *buf, size_t len,
                          int want_rc)
{
    aftp_wire_packet pkt;
    int rc = aftp_wire_decode(buf, len, &pkt);
    if (rc != want_rc) {
        fprintf(stderr, "gen_fuzz_seeds: seed %s decodes to %d, expected %d\n", name, rc,
                want_rc);
        failures++;
    }
    write_seed(dir, "wire_decode", name, buf, len);
    write_seed(dir, "wire_header", name, buf,
               len < AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED
                   ? len
                   : AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED);
}

/* Encodes pkt into `seed`; returns its length. */
static size_t encode(const aftp_wire_packet *pkt)
{
    size_t len;
    int rc = aftp_wire_encode(pkt, seed, sizeof seed, &len);
    if (rc != AFTP_OK) {
        fprintf(stderr, "gen_fuzz_seeds: encoding a type %u packet failed: %d\n",
                pkt->hdr.type, rc);
        exit(1);
    }
    return len;
}

static void emit_valid(const char *dir, const char *name, const aftp_wire_packet *pkt)
{
    emit_datagram(dir, name, seed, encode(pkt), AFTP_OK);
}

/* pkt encoded, then seed[offset] set to value (offset may be the end: one byte appended). */
static void emit_patched(const char *dir, const char *name, const aftp_wire_packet *pkt,
                         size_t offset, uint8_t value, int want_rc)
{
    size_t len = encode(pkt);
    if (offset > len)
        memset(seed + len, 0, offset - len);
    seed[offset] = value;
    emit_datagram(dir, name, seed, offset < len ? len : offset + 1, want_rc);
}

static aftp_wire_packet packet(uint8_t type)
{
    aftp_wire_packet pkt;
    memset(&pkt, 0, sizeof pkt);
    pkt.hdr.version = type == AFTP_WIRE_VERSION_NEG ? AFTP_WIRE_VERSION_NEGOTIATION
                                                    : AFTP_WIRE_VERSION;
    pkt.hdr.type = type;
    pkt.hdr.conn_id = 0x1a2b3c4du;
    pkt.hdr.pn = 1000u + type;
    return pkt;
}

static void emit_handshake(const char *dir)
{
    static const uint8_t ext[] = {0x00, 0x01, 0x00, 0x04, 'a', 'f', 't', 'p', 0xff, 0xff, 0, 0};
    aftp_wire_packet p = packet(AFTP_WIRE_VERSION_NEG);
    p.u.version_neg.count = 1;
    p.u.version_neg.versions[0] = AFTP_WIRE_VERSION;
    emit_valid(dir, "version-neg", &p);
    p.u.version_neg.count = AFTP_WIRE_MAX_VERSIONS;
    for (uint8_t i = 0; i < AFTP_WIRE_MAX_VERSIONS; i++)
        p.u.version_neg.versions[i] = (uint8_t)(i + 1);
    emit_valid(dir, "version-neg-max", &p);
    emit_patched(dir, "version-neg-zero", &p, AFTP_WIRE_HEADER_LEN, 0, AFTP_ERR_LIMIT);

    p = packet(AFTP_WIRE_HELLO);
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.max_datagram = 1452;
    emit_valid(dir, "hello", &p);
    emit_patched(dir, "hello-long-padding", &p, 1499, 0, AFTP_OK);
    emit_patched(dir, "hello-nonzero-padding", &p, 1199, 1, AFTP_ERR_MALFORMED);
    emit_patched(dir, "hello-bad-role", &p, AFTP_WIRE_HEADER_LEN, 3, AFTP_ERR_MALFORMED);
    emit_datagram(dir, "hello-short", seed, encode(&p) - 1, AFTP_ERR_MALFORMED);
    p.u.hello.role = AFTP_WIRE_ROLE_PULL;
    p.u.hello.cipher_count = 3;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_AES256GCM;
    p.u.hello.ciphers[1] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = AFTP_WIRE_MAX_DATAGRAM;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = sizeof ext;
    emit_valid(dir, "hello-ext", &p);

    p = packet(AFTP_WIRE_HELLO_ACK);
    p.u.hello_ack.server_conn_id = 0x99887766u;
    p.u.hello_ack.max_datagram = AFTP_WIRE_MIN_DATAGRAM;
    emit_valid(dir, "hello-ack", &p);
    p.u.hello_ack.cipher = AFTP_WIRE_CIPHER_AES256GCM;
    p.u.hello_ack.ext = ext;
    p.u.hello_ack.ext_len = sizeof ext;
    emit_valid(dir, "hello-ack-ext", &p);
    /* Claim one more extension byte than the TLVs hold. */
    emit_patched(dir, "hello-ack-bad-ext", &p, AFTP_WIRE_HEADER_LEN + 8, sizeof ext + 1,
                 AFTP_ERR_TRUNCATED);
}

/* A HELLO asking for the server's key, and SERVER_KEY: valid, one byte
 * short, one byte over. */
static void emit_key_request(const char *dir)
{
    static const uint8_t ext[] = {0x00, 0x03, 0x00, 0x00}; /* KEY_REQUEST, empty */
    aftp_wire_packet p = packet(AFTP_WIRE_HELLO);
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = 1452;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = sizeof ext;
    emit_valid(dir, "hello-key-request", &p);

    p = packet(AFTP_WIRE_SERVER_KEY);
    p.hdr.pn = 0;
    for (uint8_t i = 0; i < AFTP_WIRE_SERVER_KEY_LEN; i++)
        p.u.server_key.key[i] = (uint8_t)(0x90 + i);
    size_t len = encode(&p);
    emit_datagram(dir, "server-key", seed, len, AFTP_OK);
    emit_datagram(dir, "server-key-short", seed, len - 1, AFTP_ERR_TRUNCATED);
    emit_patched(dir, "server-key-trailing", &p, len, 0, AFTP_ERR_MALFORMED);
}

/* The secure handshake's packets: a HELLO with a message-1-sized HANDSHAKE
 * extension and a cookie, then with the RATE_CAP announcement; a
 * HELLO_ACK with a message-2-sized one, then with a RATE_CAP before it;
 * RETRY, and the key request: a HELLO with KEY_REQUEST, SERVER_KEY. */
static void emit_secure_handshake(const char *dir)
{
    static uint8_t msg[108], token[AFTP_WIRE_MAX_TOKEN], ext[256];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(0x40 + i);
    for (size_t i = 0; i < sizeof token; i++)
        token[i] = (uint8_t)(0xc0 + i);
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg, sizeof msg) != AFTP_OK ||
        aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, token, 20) != AFTP_OK)
        exit(1);
    aftp_wire_packet p = packet(AFTP_WIRE_HELLO);
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 2;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_AES256GCM;
    p.u.hello.ciphers[1] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = 1452;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-handshake-cookie", &p);
    if (aftp_wire_ext_put_rate_cap(&w, 0) != AFTP_OK)
        exit(1);
    p.u.hello.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-handshake-rate-cap", &p);

    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg, 55) != AFTP_OK)
        exit(1);
    p = packet(AFTP_WIRE_HELLO_ACK);
    p.u.hello_ack.server_conn_id = 0x55667788u;
    p.u.hello_ack.cipher = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello_ack.max_datagram = 1452;
    p.u.hello_ack.ext = ext;
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-ack-handshake", &p);
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (aftp_wire_ext_put_rate_cap(&w, UINT64_C(100000000)) != AFTP_OK ||
        aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg, 67) != AFTP_OK)
        exit(1);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-ack-handshake-rate-cap", &p);

    p = packet(AFTP_WIRE_RETRY);
    p.hdr.pn = 0;
    p.u.retry.token = token;
    p.u.retry.token_len = 20;
    emit_valid(dir, "retry", &p);
    /* token_len 0 (the token becomes trailing bytes) and 65 (bytes short). */
    emit_patched(dir, "retry-empty-token", &p, AFTP_WIRE_HEADER_LEN + 1, 0, AFTP_ERR_MALFORMED);
    emit_patched(dir, "retry-token-too-long", &p, AFTP_WIRE_HEADER_LEN + 1,
                 AFTP_WIRE_MAX_TOKEN + 1, AFTP_ERR_MALFORMED);
    p.u.retry.token_len = AFTP_WIRE_MAX_TOKEN;
    emit_valid(dir, "retry-max-token", &p);
    emit_key_request(dir);
}

static void emit_files(const char *dir)
{
    static const char path[] = "photos/2024/holiday.jpg";
    static uint8_t long_path[AFTP_WIRE_MAX_PATH];
    aftp_wire_packet p = packet(AFTP_WIRE_FILE_OFFER);
    p.u.file_offer.file_id = 1;
    p.u.file_offer.size = 123456789;
    p.u.file_offer.mtime_ns = -1;
    p.u.file_offer.mode = 0644;
    p.u.file_offer.block_size = AFTP_WIRE_DEFAULT_BLOCK;
    p.u.file_offer.flags = AFTP_WIRE_OFFER_OVERWRITE;
    p.u.file_offer.path = (const uint8_t *)path;
    p.u.file_offer.path_len = sizeof path - 1;
    emit_valid(dir, "file-offer", &p);
    emit_patched(dir, "file-offer-nul-in-path", &p, AFTP_WIRE_HEADER_LEN + 33, 0,
                 AFTP_ERR_MALFORMED);
    emit_patched(dir, "file-offer-bad-mode", &p, AFTP_WIRE_HEADER_LEN + 22, 0x10,
                 AFTP_ERR_MALFORMED);
    memset(long_path, 'a', sizeof long_path);
    p.u.file_offer.size = AFTP_WIRE_MAX_FILE_SIZE;
    p.u.file_offer.mode = 07777;
    p.u.file_offer.block_size = AFTP_WIRE_MAX_BLOCK;
    p.u.file_offer.path = long_path;
    p.u.file_offer.path_len = sizeof long_path;
    emit_valid(dir, "file-offer-limits", &p);

    p = packet(AFTP_WIRE_FILE_REPLY);
    p.u.file_reply.file_id = 1;
    emit_valid(dir, "file-reply", &p);
    p.u.file_reply.error = AFTP_WIRE_ERR_NO_SPACE;
    emit_patched(dir, "file-reply-trailing", &p, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FILE_REPLY_LEN,
                 0, AFTP_ERR_MALFORMED);

    p = packet(AFTP_WIRE_ABANDON);
    p.u.abandon.file_id = 9;
    p.u.abandon.error = AFTP_WIRE_ERR_SOURCE_CHANGED;
    emit_valid(dir, "abandon", &p);
    emit_patched(dir, "abandon-error-none", &p, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_ABANDON_LEN - 1,
                 0, AFTP_ERR_MALFORMED);

    static const aftp_wire_path pull_paths[] = {{7, (const uint8_t *)"reports"},
                                                {6, (const uint8_t *)"../etc"}};
    p = packet(AFTP_WIRE_PULL_REQUEST);
    p.u.pull_request = (aftp_wire_pull_request){AFTP_WIRE_ENTRY_RESUME, 200000000, 2, pull_paths,
                                                NULL, 0};
    emit_valid(dir, "pull-request", &p);
    emit_patched(dir, "pull-request-nul-in-path", &p,
                 AFTP_WIRE_HEADER_LEN + AFTP_WIRE_PULL_REQUEST_FIXED + 4, 0, AFTP_ERR_MALFORMED);

    p = packet(AFTP_WIRE_PULL_REPLY);
    p.u.pull_reply.count = 2;
    p.u.pull_reply.errors[1] = AFTP_WIRE_ERR_NOT_FOUND;
    emit_valid(dir, "pull-reply", &p);
    emit_patched(dir, "pull-reply-trailing", &p, AFTP_WIRE_HEADER_LEN + 6, 0,
                 AFTP_ERR_MALFORMED);

    p = packet(AFTP_WIRE_PULL_END);
    p.u.pull_end.entry_count = 3;
    emit_valid(dir, "pull-end", &p);
    emit_patched(dir, "pull-end-trailing", &p, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_PULL_END_LEN, 0,
                 AFTP_ERR_MALFORMED);

    p = packet(AFTP_WIRE_RATE_UPDATE);
    p.u.rate_update = (aftp_wire_rate_update){2, 400000000};
    emit_valid(dir, "rate-update", &p);
    emit_patched(dir, "rate-update-trailing", &p,
                 AFTP_WIRE_HEADER_LEN + AFTP_WIRE_RATE_UPDATE_LEN, 0, AFTP_ERR_MALFORMED);

    p = packet(AFTP_WIRE_FILE_DONE);
    p.u.file_done.file_id = 7;
    p.u.file_done.block_count = 87654;
    memset(p.u.file_done.digest, 0xd1, sizeof p.u.file_done.digest);
    emit_valid(dir, "file-done", &p);

    p = packet(AFTP_WIRE_FILE_RESULT);
    p.u.file_result.file_id = 7;
    p.u.file_result.error = AFTP_WIRE_ERR_DIGEST_MISMATCH;
    memset(p.u.file_result.digest, 0xe2, sizeof p.u.file_result.digest);
    emit_valid(dir, "file-result", &p);
    emit_datagram(dir, "file-result-truncated", seed,
                  AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FILE_RESULT_LEN - 1, AFTP_ERR_TRUNCATED);
}

static void emit_data(const char *dir)
{
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 3);
    aftp_wire_packet p = packet(AFTP_WIRE_DATA);
    p.hdr.flags = 0xfffc; /* reserved bits: ignored on receipt */
    p.u.data.file_id = 1;
    p.u.data.payload = payload;
    p.u.data.payload_len = 1;
    emit_valid(dir, "data-1-byte", &p);
    p.u.data.block = 42;
    p.u.data.payload_len = AFTP_WIRE_DEFAULT_BLOCK;
    emit_valid(dir, "data-default-block", &p);
    p.u.data.block = AFTP_WIRE_MAX_BLOCKS - 1;
    p.u.data.payload_len = AFTP_WIRE_MAX_BLOCK;
    emit_valid(dir, "data-max", &p);
    emit_patched(dir, "data-over-max", &p, AFTP_WIRE_MAX_DATAGRAM, 0, AFTP_ERR_LIMIT);
    /* A block index past the last one any file can have. */
    emit_patched(dir, "data-block-out-of-range", &p, AFTP_WIRE_HEADER_LEN + 4, 0x01,
                 AFTP_ERR_MALFORMED);
    emit_datagram(dir, "data-no-payload", seed, AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED,
                  AFTP_ERR_TRUNCATED);
}

/* A FEEDBACK whose window starts at cum_block, with `count` identical
 * (gap, len - 1) ranges, written field by field so it may break the rules
 * the encoder enforces. */
static size_t feedback_by_hand(uint64_t cum_block, uint64_t scan_end, uint16_t count,
                               uint64_t gap, uint64_t len_minus_1)
{
    aftp_wire_header h = packet(AFTP_WIRE_FEEDBACK).hdr;
    aftp_wire_writer w;
    int failed = aftp_wire_header_encode(&h, seed, sizeof seed) != AFTP_OK;
    aftp_wire_writer_init(&w, seed + AFTP_WIRE_HEADER_LEN, sizeof seed - AFTP_WIRE_HEADER_LEN);
    failed |= aftp_wire_write_u32(&w, 3) != AFTP_OK;             /* file_id */
    failed |= aftp_wire_write_u64(&w, 5) != AFTP_OK;             /* largest_pn */
    failed |= aftp_wire_write_u32(&w, 0) != AFTP_OK;             /* ack_delay_us */
    failed |= aftp_wire_write_u64(&w, 0) != AFTP_OK;             /* recv_time_us */
    failed |= aftp_wire_write_u64(&w, 0) != AFTP_OK;             /* packets_received */
    failed |= aftp_wire_write_u64(&w, scan_end) != AFTP_OK;      /* blocks_received */
    failed |= aftp_wire_write_u64(&w, cum_block) != AFTP_OK;
    failed |= aftp_wire_write_u64(&w, cum_block) != AFTP_OK;      /* scan_start */
    failed |= aftp_wire_write_u64(&w, scan_end) != AFTP_OK;
    failed |= aftp_wire_write_u16(&w, count) != AFTP_OK;
    for (uint16_t i = 0; i < count; i++) {
        failed |= aftp_wire_write_varint(&w, gap) != AFTP_OK;
        failed |= aftp_wire_write_varint(&w, len_minus_1) != AFTP_OK;
    }
    if (failed) {
        fprintf(stderr, "gen_fuzz_seeds: cannot write a FEEDBACK by hand\n");
        exit(1);
    }
    return AFTP_WIRE_HEADER_LEN + w.pos;
}

/* Offsets in a FEEDBACK datagram: range_count, and the last (lowest) byte
 * of scan_start (body bytes 48-55). */
#define FB_COUNT_AT (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_FEEDBACK_FIXED - 2)
#define FB_SCAN_START_LOW_AT (AFTP_WIRE_HEADER_LEN + 48 + 7)

static void emit_feedback(const char *dir)
{
    static const aftp_wire_range few[] = {{12, 1}, {14, 100}, {20000, 70000}, {2000000000, 5}};
    static const aftp_wire_range at_limit[] = {{0, 1}, {AFTP_WIRE_MAX_BLOCKS - 2, 2}};
    aftp_wire_packet p = packet(AFTP_WIRE_FEEDBACK);
    aftp_wire_feedback *f = &p.u.feedback;
    f->file_id = 3;
    f->largest_pn = 99999;
    f->ack_delay_us = 250;
    f->recv_time_us = 123456789;
    f->packets_received = 5000;
    emit_valid(dir, "feedback-empty", &p);
    f->blocks_received = 4000;
    f->cum_block = 10;
    f->scan_start = 11; /* a sweep window above cum_block */
    f->scan_end = 2000000005;
    f->ranges = few;
    f->range_count = sizeof few / sizeof few[0];
    emit_valid(dir, "feedback-ranges", &p);
    /* Range count one past what the list holds, then past the limit. */
    emit_patched(dir, "feedback-count-too-high", &p, FB_COUNT_AT + 1, 5, AFTP_ERR_MALFORMED);
    /* scan_start 9, below cum_block 10. */
    emit_patched(dir, "feedback-scan-start-below-cum", &p, FB_SCAN_START_LOW_AT, 9,
                 AFTP_ERR_MALFORMED);
    f->range_count = 0;
    emit_patched(dir, "feedback-count-over-limit", &p, FB_COUNT_AT, 0x21, AFTP_ERR_LIMIT);
    /* An empty window, scan_start = scan_end = 2000 (0x7d0), then
     * scan_start 2001, one past scan_end. */
    f->scan_start = 2000;
    f->scan_end = 2000;
    emit_valid(dir, "feedback-empty-window", &p);
    emit_patched(dir, "feedback-scan-start-above-end", &p, FB_SCAN_START_LOW_AT, 0xd1,
                 AFTP_ERR_MALFORMED);
    f->cum_block = 0;
    f->scan_start = 0;
    f->scan_end = AFTP_WIRE_MAX_BLOCKS;
    f->ranges = at_limit;
    f->range_count = sizeof at_limit / sizeof at_limit[0];
    emit_valid(dir, "feedback-at-limit", &p);

    /* A range past scan_end, a non-shortest varint (0 in two bytes), and a
     * list too long for any datagram. */
    emit_datagram(dir, "feedback-range-past-scan-end", seed, feedback_by_hand(0, 10, 1, 9, 1),
                  AFTP_ERR_MALFORMED);
    size_t len = feedback_by_hand(0, 10, 1, 0, 64);
    seed[len - 2] = 0x40;
    seed[len - 1] = 0x00;
    emit_datagram(dir, "feedback-long-varint", seed, len, AFTP_ERR_MALFORMED);
    /* Ranges of two 8-byte varints: one more than a datagram holds. */
    uint16_t over =
        (AFTP_WIRE_MAX_DATAGRAM - AFTP_WIRE_HEADER_LEN - AFTP_WIRE_FEEDBACK_FIXED) / 16 + 1;
    emit_datagram(dir, "feedback-over-datagram", seed,
                  feedback_by_hand(0, AFTP_WIRE_MAX_BLOCKS, over, UINT64_C(1) << 30,
                                   UINT64_C(1) << 30),
                  AFTP_ERR_LIMIT);
}

/* Pipelined mode: a HELLO and a HELLO_ACK with PIPELINE; an ENTRIES of a
 * directory, a file and a link laid end to end, then broken (a base that
 * overlaps, a kind out of range, no record); a VERDICTS with each verdict,
 * then broken (an id going back, a RESUME without ranges). */
static void emit_pipelined(const char *dir)
{
    static const uint8_t dir_path[] = "d", file_path[] = "d/f", link_path[] = "d/l";
    static const aftp_wire_range held[] = {{0, 2}, {4, 1}};
    uint8_t ext[16];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (aftp_wire_ext_put_pipeline(&w, 1024) != AFTP_OK)
        exit(1);
    aftp_wire_packet p = packet(AFTP_WIRE_HELLO);
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.max_datagram = 1452;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-pipeline", &p);
    p = packet(AFTP_WIRE_HELLO_ACK);
    p.u.hello_ack.server_conn_id = 0x99887766u;
    p.u.hello_ack.max_datagram = 1452;
    p.u.hello_ack.ext = ext;
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    emit_valid(dir, "hello-ack-pipeline", &p);

    aftp_wire_entry e[3] = {
        {.entry_id = 1, .kind = AFTP_WIRE_KIND_DIR, .mode = 0755, .path_len = 1,
         .path = dir_path},
        {.entry_id = 2, .kind = AFTP_WIRE_KIND_FILE, .flags = AFTP_WIRE_ENTRY_RESUME,
         .size = 5000, .mode = 0644, .block_size = 1408, .source_id = 7, .path_len = 3,
         .path = file_path},
        {.entry_id = 3, .kind = AFTP_WIRE_KIND_SYMLINK, .mode = 0777, .base_block = 4,
         .path_len = 3, .path = link_path, .target_len = 1, .target = file_path + 2}};
    p = packet(AFTP_WIRE_ENTRIES);
    p.u.entries = (aftp_wire_entries){3, e, NULL, 0};
    emit_valid(dir, "entries-tree", &p);
    /* The link's base_block (record 3 at 18 + 2 * 67 + 1 + 3, offset 27
     * in it) read 3: inside the file's blocks 0-3. */
    size_t link_base = AFTP_WIRE_HEADER_LEN + 2 + 2 * AFTP_WIRE_ENTRY_FIXED + 1 + 3 + 27;
    emit_patched(dir, "entries-base-overlaps", &p, link_base + 7, 3, AFTP_ERR_MALFORMED);
    emit_patched(dir, "entries-kind-4", &p, AFTP_WIRE_HEADER_LEN + 2 + 4, 4, AFTP_ERR_MALFORMED);
    emit_patched(dir, "entries-count-zero", &p, AFTP_WIRE_HEADER_LEN + 1, 0, AFTP_ERR_LIMIT);
    /* The file alone, sparse: blocks 1-2 of its 4 in a hole (flag HOLES);
     * then the hole moved to blocks 3-4, past the file. */
    static const aftp_wire_range holes[] = {{1, 2}};
    aftp_wire_entry sparse = e[1];
    sparse.flags |= AFTP_WIRE_ENTRY_HOLES;
    sparse.hole_count = 1;
    sparse.holes = holes;
    p.u.entries = (aftp_wire_entries){1, &sparse, NULL, 0};
    emit_valid(dir, "entries-sparse", &p);
    size_t hole_gap = AFTP_WIRE_HEADER_LEN + 2 + AFTP_WIRE_ENTRY_FIXED + 3 + 2;
    emit_patched(dir, "entries-hole-past-file", &p, hole_gap, 3, AFTP_ERR_MALFORMED);

    aftp_wire_verdict v[4] = {{1, AFTP_WIRE_VERDICT_SEND, 0, 0, NULL, NULL, 0},
                              {2, AFTP_WIRE_VERDICT_RESUME, 0, 2, held, NULL, 0},
                              {3, AFTP_WIRE_VERDICT_REFUSED, AFTP_WIRE_ERR_PATH_REJECTED, 0,
                               NULL, NULL, 0},
                              {9, AFTP_WIRE_VERDICT_SKIP, 0, 0, NULL, NULL, 0}};
    p = packet(AFTP_WIRE_VERDICTS);
    p.u.verdicts = (aftp_wire_verdicts){4, v, NULL, 0};
    emit_valid(dir, "verdicts", &p);
    /* Record 1's id becomes 5, above record 2's 2. */
    emit_patched(dir, "verdicts-id-back", &p, AFTP_WIRE_HEADER_LEN + 2 + 3, 5,
                 AFTP_ERR_MALFORMED);
    /* Record 2's range_count (after 9-byte record 1, at 7 in record 2) reads 0. */
    emit_patched(dir, "verdicts-resume-no-ranges", &p, AFTP_WIRE_HEADER_LEN + 2 + 9 + 8, 0,
                 AFTP_ERR_MALFORMED);
}

static void emit_close_and_headers(const char *dir)
{
    static uint8_t reason[AFTP_WIRE_MAX_REASON];
    memset(reason, 'r', sizeof reason);
    aftp_wire_packet p = packet(AFTP_WIRE_CLOSE);
    emit_valid(dir, "close", &p);
    p.u.close.error = AFTP_WIRE_ERR_CANCELLED;
    p.u.close.reason = reason;
    p.u.close.reason_len = sizeof reason;
    emit_valid(dir, "close-max-reason", &p);
    emit_patched(dir, "close-reason-too-long", &p, AFTP_WIRE_HEADER_LEN + 3, 0x01,
                 AFTP_ERR_LIMIT);

    p.u.close.reason_len = 0;
    emit_datagram(dir, "empty", seed, 0, AFTP_ERR_TRUNCATED);
    emit_patched(dir, "version-unknown", &p, 0, 2, AFTP_ERR_VERSION);
    emit_patched(dir, "type-unknown", &p, 1, AFTP_WIRE_TYPE_MAX + 1, AFTP_ERR_UNKNOWN_TYPE);
    emit_patched(dir, "version-0-not-neg", &p, 0, AFTP_WIRE_VERSION_NEGOTIATION,
                 AFTP_ERR_MALFORMED);
    emit_datagram(dir, "header-truncated", seed, AFTP_WIRE_HEADER_LEN - 1, AFTP_ERR_TRUNCATED);
}

/* ---- wire_ranges and wire_framed: the layouts of their harnesses ---- */

typedef struct layout_input {
    uint8_t buf[1024];
    size_t len;
} layout_input;

static void put(layout_input *in, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        in->buf[in->len++] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* A "value": selector (width code) then the big-endian bytes. */
static void put_value(layout_input *in, uint64_t v)
{
    unsigned code = v <= 0xff ? 0 : v <= 0xffff ? 1 : v <= 0xffffffffu ? 2 : 3;
    put(in, code, 1);
    put(in, v, (size_t)1 << code);
}

/* scan_offset = scan_start - cum_block, scan_span = scan_end - scan_start. */
static void put_fields(layout_input *in, unsigned mutations, uint64_t cum_block,
                       uint64_t scan_offset, uint64_t scan_span, uint16_t count)
{
    put(in, mutations, 1);
    put(in, 0, 2);                       /* flags */
    put(in, 0x01020304, 4);              /* conn_id */
    put(in, 77, 8);                      /* pn */
    put(in, 1, 4);                       /* file_id */
    put(in, 76, 8);                      /* largest_pn */
    put(in, 300, 4);                     /* ack_delay_us */
    put(in, 1000000, 8);                 /* recv_time_us */
    put(in, 50, 8);                      /* packets_received */
    put_value(in, cum_block);
    put_value(in, scan_offset);
    put_value(in, scan_span);
    put_value(in, 40);                   /* blocks_received - cum_block */
    if (count < 0xf0) {
        put(in, count, 1);
    } else {
        put(in, 0xf0, 1);
        put(in, count, 2);
    }
}

static void emit_ranges_seeds(const char *dir)
{
    layout_input in = {.len = 0};
    write_seed(dir, "wire_ranges", "empty", in.buf, 0);

    /* Three relative ranges in a window starting above cum_block, all mutations. */
    put_fields(&in, 7, 100, 50, 100000, 3);
    static const uint64_t rel[][2] = {{0, 0}, {5, 300}, {20000, 9}};
    for (size_t i = 0; i < 3; i++) {
        put(&in, 0, 1);
        put_value(&in, rel[i][0]);
        put_value(&in, rel[i][1]);
    }
    put(&in, 9, 2);      /* cut */
    put(&in, 0x0001, 2); /* count_xor */
    put(&in, 0xab, 1);   /* appended */
    write_seed(dir, "wire_ranges", "three-ranges", in.buf, in.len);

    /* Raw ranges out of order: must be refused. */
    in.len = 0;
    put_fields(&in, 0, 0, 0, 1000, 2);
    static const uint64_t raw[][2] = {{500, 10}, {100, 10}};
    for (size_t i = 0; i < 2; i++) {
        put(&in, 1, 1);
        put_value(&in, raw[i][0]);
        put_value(&in, raw[i][1]);
    }
    write_seed(dir, "wire_ranges", "unordered", in.buf, in.len);

    /* A range ending exactly at the block limit. */
    in.len = 0;
    put_fields(&in, 3, AFTP_WIRE_MAX_BLOCKS - 10, 0, 10, 1);
    put(&in, 0, 1);
    put_value(&in, 5);
    put_value(&in, 4);
    write_seed(dir, "wire_ranges", "at-block-limit", in.buf, in.len);

    /* The most ranges allowed (the rest read as zeros: 1-block ranges). */
    in.len = 0;
    put_fields(&in, 0, 0, 0, 0xffffffffu, AFTP_WIRE_MAX_RANGES);
    write_seed(dir, "wire_ranges", "max-count", in.buf, in.len);
}

/* Header part of a wire_framed input: type (version implied), zero flags, ids. */
static void put_framed_header(layout_input *in, uint8_t type)
{
    put(in, type, 1);
    put(in, 0, 2);
    put(in, 0x0a0b0c0d, 4);
    put(in, 5, 8);
}

/* One framed entry record after its link bits (fuzz_wire_framed.c). */
static void put_framed_entry(layout_input *in, uint8_t kind, uint64_t size, uint32_t block_size,
                             uint8_t path)
{
    put(in, kind, 1);
    put(in, 0, 2);          /* flags */
    put_value(in, size);
    put(in, 0, 8);          /* mtime_ns */
    put(in, 0644, 4);
    put(in, block_size, 4);
    put(in, 0x51, 8);       /* source_id */
    for (int i = 0; i < 2; i++)
        put(in, 0, 8);      /* digest */
    put(in, 1, 2);          /* path_len */
    put(in, 0, 2);          /* target_len */
    put(in, path, 1);
}

/* A valid ENTRIES of a 2-block file then a directory linked after it, and a
 * valid VERDICTS: a RESUME with one held range, then a SEND linked after. */
static void emit_framed_batches(const char *dir)
{
    layout_input in = {.len = 0};
    put_framed_header(&in, AFTP_WIRE_ENTRIES);
    put(&in, 2, 1);
    put(&in, 0, 1);         /* link bits: id and base follow */
    put(&in, 7, 4);
    put_value(&in, 40);
    put_framed_entry(&in, AFTP_WIRE_KIND_FILE, 100, 64, 'a');
    put(&in, 3, 1);         /* id 8, base 42: linked */
    put_framed_entry(&in, AFTP_WIRE_KIND_DIR, 0, 0, 'b');
    write_seed(dir, "wire_framed", "entries-linked", in.buf, in.len);

    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_VERDICTS);
    put(&in, 2, 1);
    put(&in, 0, 1);
    put(&in, 7, 4);
    put(&in, AFTP_WIRE_VERDICT_RESUME, 1);
    put(&in, 0, 2);
    put(&in, 1, 1);         /* one held range: gap 0, len - 1 = 3 */
    put_value(&in, 0);
    put_value(&in, 3);
    put(&in, 1, 1);         /* id 8 */
    put(&in, AFTP_WIRE_VERDICT_SEND, 1);
    put(&in, 0, 2);
    put(&in, 0, 1);
    write_seed(dir, "wire_framed", "verdicts-linked", in.buf, in.len);
}

static void emit_framed_seeds(const char *dir)
{
    layout_input in;
    char name[32];
    /* Every type with all-zero fields and empty lists. */
    for (uint8_t type = 0; type <= AFTP_WIRE_TYPE_MAX; type++) {
        in.len = 0;
        put_framed_header(&in, type);
        snprintf(name, sizeof name, "type-%u", type);
        write_seed(dir, "wire_framed", name, in.buf, in.len);
    }
    /* A valid HELLO: role PUSH, one cipher, one TLV, padding to 1200 bytes. */
    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_HELLO);
    put(&in, AFTP_WIRE_ROLE_PUSH, 1);
    put(&in, 1, 1);
    put(&in, AFTP_WIRE_CIPHER_NONE, 1);
    put(&in, 1452, 2);
    put(&in, 1, 1);      /* one TLV */
    put(&in, 0x0001, 2); /* its type */
    put(&in, 2, 2);      /* its length */
    put(&in, 0x4142, 2);
    put(&in, AFTP_WIRE_HELLO_MIN_LEN - 29, 2);
    write_seed(dir, "wire_framed", "hello", in.buf, in.len);
    /* A valid RETRY with a 20-byte token. */
    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_RETRY);
    put(&in, 20, 2);
    for (uint8_t i = 0; i < 20; i++)
        put(&in, i, 1);
    write_seed(dir, "wire_framed", "retry", in.buf, in.len);
    /* A valid SERVER_KEY. */
    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_SERVER_KEY);
    for (uint8_t i = 0; i < AFTP_WIRE_SERVER_KEY_LEN; i++)
        put(&in, 0x90 + i, 1);
    write_seed(dir, "wire_framed", "server-key", in.buf, in.len);
    /* A valid CLOSE with a short reason, and a valid FILE_OFFER. */
    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_CLOSE);
    put(&in, AFTP_WIRE_ERR_CANCELLED, 2);
    put(&in, 4, 2);
    put(&in, 0x62796521, 4);
    write_seed(dir, "wire_framed", "close", in.buf, in.len);
    in.len = 0;
    put_framed_header(&in, AFTP_WIRE_FILE_OFFER);
    static const uint64_t offer[][2] = {{2, 4}, {1000, 8}, {0, 8}, {0644, 4}, {1408, 4}, {0, 2}};
    for (size_t i = 0; i < sizeof offer / sizeof offer[0]; i++)
        put(&in, offer[i][0], (size_t)offer[i][1]);
    put(&in, 5, 2);
    put(&in, 0x612f62, 3);
    put(&in, 0x2f63, 2);
    write_seed(dir, "wire_framed", "file-offer", in.buf, in.len);
    emit_framed_batches(dir);
}

/* Appends a door record ([flags][length u16][bytes], fuzz_door.c). */
static size_t door_record(uint8_t *out, size_t at, uint8_t flags, const uint8_t *pkt, size_t len)
{
    out[at] = flags;
    out[at + 1] = (uint8_t)(len >> 8);
    out[at + 2] = (uint8_t)len;
    memcpy(out + at + 3, pkt, len);
    return at + 3 + len;
}

/* The front door's seeds: a key request; a datagram in an unknown
 * version; a HELLO while busy (a RETRY), echoed with its cookie a second
 * later while busy (dropped) and once idle (started). */
static void emit_door_seeds(const char *dir)
{
    static uint8_t out[4 * (3 + AFTP_WIRE_MAX_DATAGRAM)];
    uint8_t hello[AFTP_WIRE_MAX_DATAGRAM], unknown[AFTP_WIRE_HELLO_MIN_LEN] = {7, 1, 0, 0, 1};
    size_t len = 0, n;
    if (aftp_keyreq_encode(0x5150, 1452, hello, sizeof hello, &len) != AFTP_OK) {
        fprintf(stderr, "gen_fuzz_seeds: no key request\n");
        exit(1);
    }
    write_seed(dir, "door", "key-request", out, door_record(out, 0, 0, hello, len));
    write_seed(dir, "door", "unknown-version", out,
               door_record(out, 0, 0, unknown, sizeof unknown));
    aftp_wire_packet p = packet(AFTP_WIRE_HELLO);
    p.u.hello.role = AFTP_WIRE_ROLE_PUSH;
    p.u.hello.cipher_count = 1;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.max_datagram = 1452;
    len = encode(&p);
    n = door_record(out, 0, 1, seed, len);               /* busy: RETRY */
    n = door_record(out, n, 1 | 2 | 1 << 3, seed, len);  /* echoed, busy: dropped */
    n = door_record(out, n, 2 | 1 << 3, seed, len);      /* echoed, idle: started */
    write_seed(dir, "door", "retry-echo", out, n);
}

/* The pipelined engines' seeds (fuzz_pipe_input.c): the verdicts byte (2
 * bits per FILE: 0 SEND, 1 RESUME, 2 SKIP, 3 REFUSED) and link operations.
 * A small tree all sent, with the HELLO delivered, the HELLO_ACK dropped
 * and the clock moved on; one FILE skipped; one resumed, with a datagram
 * corrupted on its way to the receiver. */
static void emit_pipe_seeds(const char *dir)
{
    static const uint8_t tree[] = {0x00, 0, 4 | 1, 20 << 3, 4};
    static const uint8_t skip[] = {2 << 2, 0, 4, 0, 4};
    static const uint8_t resume[] = {1, 0, 4, 0, 2, 40, 0x5A};
    write_seed(dir, "pipe_input", "tree", tree, sizeof tree);
    write_seed(dir, "pipe_input", "skip", skip, sizeof skip);
    write_seed(dir, "pipe_input", "resume", resume, sizeof resume);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    make_dir(argv[1]);
    emit_handshake(argv[1]);
    emit_secure_handshake(argv[1]);
    emit_files(argv[1]);
    emit_data(argv[1]);
    emit_feedback(argv[1]);
    emit_pipelined(argv[1]);
    emit_close_and_headers(argv[1]);
    emit_ranges_seeds(argv[1]);
    emit_framed_seeds(argv[1]);
    emit_door_seeds(argv[1]);
    emit_pipe_seeds(argv[1]);
    if (failures > 0)
        return 1;
    printf("gen_fuzz_seeds: seeds written to %s\n", argv[1]);
    return 0;
}
