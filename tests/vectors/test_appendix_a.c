/*
 * Spec Appendix A, the worked example, against the wire code: every
 * datagram shown in A.2 and A.3 of spec/aftp-protocol.md (its path on the
 * command line) must be the packet the example's timeline (A.1) says it
 * is -- the table below, one entry per datagram in the order the appendix
 * shows them -- and the encoder must give its bytes back, so the appendix
 * cannot drift from the protocol unnoticed. The appendix shows a DATA by
 * its first 28 bytes (the payload is the file's: byte i is i mod 256) and
 * a HELLO without its zero padding: the test completes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_digest.h"
#include "proto/aftp_wire.h"
#include "wire_fixtures.h"

#define CLIENT_ID 0x1a2b3c4du
#define SERVER_ID 0x5e6f7081u
#define FILE_ID 1u
#define FILE_SIZE 5000u
#define BLOCK_SIZE 1408u
#define BLOCK_LEN(b) ((b) * BLOCK_SIZE + BLOCK_SIZE <= FILE_SIZE ? BLOCK_SIZE : FILE_SIZE - (b) * BLOCK_SIZE)
#define DATA_SHOWN (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED)
#define HELLO_SHOWN 32u /* the fields and the RATE_CAP announcement, before the padding */
#define MAX_BLOCKS 64

static uint8_t file_bytes[FILE_SIZE];               /* byte i is i mod 256 */
static uint8_t file_digest[AFTP_WIRE_DIGEST_LEN];   /* XXH3-128 of file_bytes */

/* One datagram of the appendix: what the timeline says it is, and where
 * the appendix shows it. */
typedef struct shown_datagram {
    aftp_wire_packet want;
    size_t shown_len;     /* bytes the appendix shows; 0: the whole datagram */
    const uint8_t *bytes; /* in the appendix's blocks; NULL: not shown */
    char name[48];
} shown_datagram;

static const uint8_t rate_cap_announced[] = {AFTP_WIRE_EXT_RATE_CAP >> 8,
                                             AFTP_WIRE_EXT_RATE_CAP & 0xff, 0, 0};
static const aftp_wire_range block_1_missing[] = {{1, 1}};
static const aftp_wire_range section_6_7_2_ranges[] = {{100, 2}, {105, 1}, {300, 70}};

#define HDR(t, conn, n) {.version = 1, .type = (t), .conn_id = (conn), .pn = (n)}
#define DATA(n, b)                                                                             \
    {.want = {.hdr = HDR(AFTP_WIRE_DATA, SERVER_ID, n),                                        \
              .u.data = {.file_id = FILE_ID, .block = (b), .payload_len = BLOCK_LEN(b),        \
                         .payload = file_bytes + (b) * BLOCK_SIZE}},                           \
     .shown_len = DATA_SHOWN}
/* The server's FEEDBACKs of A.1: block 1 missing, pn 6 the largest. */
#define FEEDBACK(n, ack_us, recv_us)                                                           \
    {.want = {.hdr = HDR(AFTP_WIRE_FEEDBACK, CLIENT_ID, n),                                    \
              .u.feedback = {.file_id = FILE_ID, .largest_pn = 6, .ack_delay_us = (ack_us),    \
                             .recv_time_us = (recv_us), .packets_received = 3,                 \
                             .blocks_received = 3, .cum_block = 1, .scan_start = 1,            \
                             .scan_end = 4, .range_count = 1, .ranges = block_1_missing}}}
#define CLOSE(conn, n)                                                                         \
    {.want = {.hdr = HDR(AFTP_WIRE_CLOSE, conn, n),                                            \
              .u.close = {.error = AFTP_WIRE_ERR_NONE, .reason = (const uint8_t *)""}}}

/* The timeline's values (A.1), in the order A.2 and A.3 show the datagrams. */
static shown_datagram shown[] = {
    {.want = {.hdr = HDR(AFTP_WIRE_HELLO, CLIENT_ID, 0),
              .u.hello = {.role = AFTP_WIRE_ROLE_PUSH, .cipher_count = 1,
                          .ciphers = {AFTP_WIRE_CIPHER_NONE}, .max_datagram = 1452,
                          .ext_len = sizeof rate_cap_announced, .ext = rate_cap_announced}},
     .shown_len = HELLO_SHOWN},
    {.want = {.hdr = HDR(AFTP_WIRE_HELLO_ACK, CLIENT_ID, 0),
              .u.hello_ack = {.server_conn_id = SERVER_ID, .cipher = AFTP_WIRE_CIPHER_NONE,
                              .max_datagram = 1452}}},
    {.want = {.hdr = HDR(AFTP_WIRE_FILE_OFFER, SERVER_ID, 1),
              .u.file_offer = {.file_id = FILE_ID, .size = FILE_SIZE,
                               .mtime_ns = INT64_C(1700000000123456789), .mode = 0644,
                               .block_size = BLOCK_SIZE, .path_len = 10,
                               .path = (const uint8_t *)"docs/a.bin"}}},
    {.want = {.hdr = HDR(AFTP_WIRE_FILE_REPLY, CLIENT_ID, 1),
              .u.file_reply = {.file_id = FILE_ID, .error = AFTP_WIRE_ERR_NONE}}},
    DATA(2, 0),
    DATA(3, 1),
    DATA(4, 2),
    DATA(5, 3),
    {.want = {.hdr = HDR(AFTP_WIRE_FILE_DONE, SERVER_ID, 6),
              .u.file_done = {.file_id = FILE_ID, .block_count = 4}}},
    FEEDBACK(2, 20, 125420),    /* the immediate one, 20 us after FILE_DONE arrived */
    FEEDBACK(3, 10020, 135420), /* the first tail FEEDBACK: it draws the repair */
    DATA(7, 1),
    {.want = {.hdr = HDR(AFTP_WIRE_FILE_RESULT, CLIENT_ID, 9),
              .u.file_result = {.file_id = FILE_ID, .error = AFTP_WIRE_ERR_NONE}}},
    CLOSE(SERVER_ID, 8), /* the quick close's ten copies */
    CLOSE(SERVER_ID, 9),
    CLOSE(SERVER_ID, 10),
    CLOSE(SERVER_ID, 11),
    CLOSE(SERVER_ID, 12),
    CLOSE(SERVER_ID, 13),
    CLOSE(SERVER_ID, 14),
    CLOSE(SERVER_ID, 15),
    CLOSE(SERVER_ID, 16),
    CLOSE(SERVER_ID, 17),
    CLOSE(CLIENT_ID, 10), /* the server's answer */
    /* A.3 */
    {.want = {.hdr = {.version = AFTP_WIRE_VERSION_NEGOTIATION, .type = AFTP_WIRE_VERSION_NEG,
                      .conn_id = CLIENT_ID, .pn = 0},
              .u.version_neg = {.count = 1, .versions = {AFTP_WIRE_VERSION}}}},
    {.want = {.hdr = HDR(AFTP_WIRE_FEEDBACK, CLIENT_ID, 40),
              .u.feedback = {.file_id = FILE_ID, .largest_pn = 520, .ack_delay_us = 1500,
                             .recv_time_us = 1000000, .packets_received = 480,
                             .blocks_received = 400, .cum_block = 40, .scan_start = 100,
                             .scan_end = 500, .range_count = 3,
                             .ranges = section_6_7_2_ranges}}},
};
#define SHOWN_COUNT (sizeof shown / sizeof shown[0])

/* The hex blocks of A.2 and A.3, as bytes. */
typedef struct hex_block {
    uint8_t *bytes;
    size_t len;
    unsigned line; /* of the opening fence in the spec */
} hex_block;

static hex_block blocks[MAX_BLOCKS];
static size_t block_count;
static char layout_error[512];

__attribute__((format(printf, 1, 2))) static void layout_fail(const char *fmt, ...)
{
    va_list ap;
    if (layout_error[0] != '\0')
        return; /* the first error explains the rest */
    va_start(ap, fmt);
    vsnprintf(layout_error, sizeof layout_error, fmt, ap);
    va_end(ap);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The bytes of one line of a block: hex tokens of two digits, up to the
 * first run of three spaces (the annotation after it is prose). */
static void parse_hex_line(hex_block *b, const char *line, size_t len, unsigned lineno)
{
    const char *note = strstr(line, "   ");
    size_t end = note != NULL && (size_t)(note - line) < len ? (size_t)(note - line) : len;
    for (size_t i = 0; i < end;) {
        if (line[i] == ' ') {
            i++;
            continue;
        }
        int hi = hex_digit(line[i]), lo = i + 1 < end ? hex_digit(line[i + 1]) : -1;
        if (hi < 0 || lo < 0 || (i + 2 < end && line[i + 2] != ' ')) {
            layout_fail("spec line %u: '%.*s' is not a run of two-digit hex bytes before its "
                        "note (three spaces apart)", lineno, (int)end, line);
            return;
        }
        b->bytes[b->len++] = (uint8_t)(hi << 4 | lo);
        i += 2;
    }
}

/* Collects the fenced blocks between `from` and `to` (line numbers are
 * counted from `text`). */
static void collect_blocks(const char *text, const char *from, const char *to)
{
    unsigned lineno = 1;
    hex_block *cur = NULL;
    for (const char *p = text; p < to;) {
        const char *nl = memchr(p, '\n', (size_t)(to - p));
        size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(to - p);
        if (p >= from && len >= 3 && memcmp(p, "```", 3) == 0) {
            if (cur != NULL) {
                cur = NULL;
            } else if (block_count == MAX_BLOCKS) {
                layout_fail("more than %d hex blocks in Appendix A", MAX_BLOCKS);
                return;
            } else {
                cur = &blocks[block_count++];
                cur->line = lineno;
                cur->bytes = malloc((size_t)(to - p));
                if (cur->bytes == NULL)
                    abort();
            }
        } else if (cur != NULL) {
            parse_hex_line(cur, p, len, lineno);
        }
        lineno++;
        p += len + 1;
    }
}

/* Gives each datagram of the table its bytes, in order: each block holds
 * whole datagrams, and every byte belongs to one. */
static void assign_bytes(void)
{
    size_t bi = 0, off = 0;
    for (size_t i = 0; i < SHOWN_COUNT && layout_error[0] == '\0'; i++) {
        shown_datagram *s = &shown[i];
        if (bi < block_count && off == blocks[bi].len) {
            bi++;
            off = 0;
        }
        if (bi == block_count) {
            layout_fail("Appendix A shows %zu datagrams; the timeline has %zu (next: %s)", i,
                        SHOWN_COUNT, s->name);
        } else if (off + s->shown_len > blocks[bi].len) {
            layout_fail("the block at spec line %u has %zu bytes left for %s, which shows %zu",
                        blocks[bi].line, blocks[bi].len - off, s->name, s->shown_len);
        } else {
            s->bytes = blocks[bi].bytes + off;
            off += s->shown_len;
        }
    }
    if (bi < block_count && off == blocks[bi].len) {
        bi++;
        off = 0;
    }
    if (layout_error[0] == '\0' && bi < block_count)
        layout_fail("the block at spec line %u shows bytes beyond the timeline's datagrams",
                    blocks[bi].line);
}

static int load_appendix(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int too_long = !feof(f);
    fclose(f);
    if (too_long) {
        fprintf(stderr, "%s: longer than the %zu bytes this test reads\n", path, sizeof text - 1);
        return -1;
    }
    text[n] = '\0';
    const char *start = strstr(text, "\n## Appendix A.");
    const char *end = start != NULL ? strstr(start, "\n## Appendix B.") : NULL;
    const char *from = start != NULL ? strstr(start, "\n### A.2") : NULL;
    if (end == NULL || from == NULL || from > end) {
        fprintf(stderr, "%s: no Appendix A with a section A.2 before Appendix B\n", path);
        return -1;
    }
    collect_blocks(text, from, end);
    assign_bytes();
    return 0;
}

/* The whole datagram: what the appendix shows, then the bytes it
 * describes in words (a DATA's payload, a HELLO's zero padding). */
static size_t complete_datagram(const shown_datagram *s, size_t len, uint8_t *out)
{
    memcpy(out, s->bytes, s->shown_len);
    if (s->want.hdr.type == AFTP_WIRE_DATA)
        memcpy(out + s->shown_len, s->want.u.data.payload, s->want.u.data.payload_len);
    else
        memset(out + s->shown_len, 0, len - s->shown_len);
    return s->want.hdr.type == AFTP_WIRE_DATA ? s->shown_len + s->want.u.data.payload_len : len;
}

static void test_layout(void **state)
{
    (void)state;
    if (layout_error[0] != '\0')
        fail_msg("%s", layout_error);
}

static void test_datagram(void **state)
{
    const shown_datagram *s = *state;
    static uint8_t want_bytes[WIRE_TEST_BUF], dgram[WIRE_TEST_BUF], again[WIRE_TEST_BUF];
    aftp_wire_packet got;
    if (s->bytes == NULL)
        fail_msg("not shown where Appendix A should show it: %s", layout_error);
    size_t len = wire_encode_ok(&s->want, want_bytes, sizeof want_bytes);
    size_t n = complete_datagram(s, len, dgram);
    wire_decode_ok(dgram, n, &got);
    wire_expect_packets_equal(&s->want, &got);
    assert_int_equal(wire_encode_ok(&got, again, sizeof again), n);
    assert_memory_equal(again, dgram, n);
    assert_int_equal(n, len);
    assert_memory_equal(want_bytes, dgram, n);
}

/* The file's bytes and digest, each datagram's name and the length the
 * appendix shows of it. */
static void prepare_table(void)
{
    aftp_digest *d;
    for (size_t i = 0; i < FILE_SIZE; i++)
        file_bytes[i] = (uint8_t)i;
    if (aftp_digest_new(&d) != AFTP_OK)
        abort();
    aftp_digest_update(d, file_bytes, FILE_SIZE);
    aftp_digest_final(d, file_digest);
    aftp_digest_del(d);
    for (size_t i = 0; i < SHOWN_COUNT; i++) {
        shown_datagram *s = &shown[i];
        uint8_t buf[WIRE_TEST_BUF];
        size_t len;
        if (s->want.hdr.type == AFTP_WIRE_FILE_DONE)
            memcpy(s->want.u.file_done.digest, file_digest, sizeof file_digest);
        if (s->want.hdr.type == AFTP_WIRE_FILE_RESULT)
            memcpy(s->want.u.file_result.digest, file_digest, sizeof file_digest);
        if (s->shown_len == 0 && aftp_wire_encode(&s->want, buf, sizeof buf, &len) == AFTP_OK)
            s->shown_len = len;
        snprintf(s->name, sizeof s->name, "%s pn %llu to the %s",
                 aftp_wire_type_name(s->want.hdr.type), (unsigned long long)s->want.hdr.pn,
                 s->want.hdr.conn_id == SERVER_ID ? "server" : "client");
    }
}

int main(int argc, char **argv)
{
    static struct CMUnitTest tests[SHOWN_COUNT + 1];
    if (argc != 2) {
        fprintf(stderr, "usage: %s spec/aftp-protocol.md\n", argv[0]);
        return 2;
    }
    prepare_table();
    if (load_appendix(argv[1]) != 0)
        return 1;
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_layout);
    for (size_t i = 0; i < SHOWN_COUNT; i++) {
        tests[i + 1] = (struct CMUnitTest)cmocka_unit_test_prestate(test_datagram, &shown[i]);
        tests[i + 1].name = shown[i].name;
    }
    int failed = cmocka_run_group_tests_name("appendix_a", tests, NULL, NULL);
    for (size_t i = 0; i < block_count; i++)
        free(blocks[i].bytes);
    return failed;
}
