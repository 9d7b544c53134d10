/*
 * Vector test: every record of the spec/vectors files (paths on the
 * command line) through the C wire code. A valid record is built from its
 * fields and encoded (must equal `hex`), `hex` is decoded (must give the
 * fields) and re-encoded (must give `hex` again). An invalid record must
 * be rejected with the error it names, leaving the output untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vec_parse.h"
#include "wire_fixtures.h"

#define MAX_OWNED 64
/* Records of one ENTRIES or VERDICTS vector (keys entry.N.* / verdict.N.*). */
#define MAX_VEC_RECORDS 16

/* One record under test and the memory its parsed values own. */
typedef struct vec_ctx {
    const char *file;
    vec_record *rec;
    const char *name;
    void *owned[MAX_OWNED];
    size_t n_owned;
} vec_ctx;

static uint8_t out_buf[WIRE_TEST_BUF];
static unsigned types_seen; /* bit per packet type with a valid vector */

__attribute__((format(printf, 2, 3))) static void vec_fail(const vec_ctx *c, const char *fmt,
                                                           ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_msg("%s:%u (%s): %s", c->file, c->rec->line, c->name, msg);
}

static void *own(vec_ctx *c, void *p)
{
    if (c->n_owned == MAX_OWNED)
        vec_fail(c, "too many byte fields");
    c->owned[c->n_owned++] = p;
    return p;
}

static const char *need(vec_ctx *c, const char *key)
{
    const char *v = vec_get(c->rec, key);
    if (v == NULL)
        vec_fail(c, "missing key '%s'", key);
    return v;
}

static uint64_t need_u64(vec_ctx *c, const char *key, uint64_t max)
{
    uint64_t v;
    if (vec_parse_u64(need(c, key), &v) != 0 || v > max)
        vec_fail(c, "'%s' is not an integer in [0, %llu]", key, (unsigned long long)max);
    return v;
}

static const uint8_t *need_bytes(vec_ctx *c, const char *key, size_t *len, size_t max)
{
    uint8_t *p;
    if (vec_parse_bytes(need(c, key), &p, len) != 0)
        vec_fail(c, "'%s' is not a byte string", key);
    own(c, p);
    if (*len > max)
        vec_fail(c, "'%s' is longer than %zu bytes", key, max);
    return p;
}

/* A byte field whose length the wire carries in 16 bits. */
static const uint8_t *need_bytes16(vec_ctx *c, const char *key, uint16_t *len)
{
    size_t n;
    const uint8_t *p = need_bytes(c, key, &n, UINT16_MAX);
    *len = (uint16_t)n;
    return p;
}

/* A name from `names` (NULL entries skipped) or an integer up to max. */
static uint64_t parse_name(vec_ctx *c, const char *what, const char *s,
                           const char *const *names, size_t n, uint64_t max)
{
    uint64_t v;
    for (size_t i = 0; i < n; i++)
        if (names[i] != NULL && strcmp(names[i], s) == 0)
            return i;
    if (vec_parse_u64(s, &v) != 0 || v > max)
        vec_fail(c, "unknown %s '%s'", what, s);
    return v;
}

static const char *const role_names[] = {NULL, "PUSH", "PULL"};
static const char *const cipher_names[] = {"NONE", "AES256GCM", "CHACHA20POLY1305"};
static const char *const kind_names[] = {NULL, "FILE", "DIR", "SYMLINK"};
static const char *const verdict_names[] = {"SEND", "RESUME", "SKIP", "REFUSED"};
static const char *type_names[AFTP_WIRE_TYPE_MAX + 1];
static const char *error_names[64];
static size_t error_name_count;

static void load_wire_names(void)
{
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++)
        type_names[t] = aftp_wire_type_name((uint8_t)t);
    error_name_count = 0;
    while (error_name_count < 64 &&
           strcmp(aftp_wire_error_name((uint16_t)error_name_count), "UNKNOWN") != 0) {
        error_names[error_name_count] = aftp_wire_error_name((uint16_t)error_name_count);
        error_name_count++;
    }
}

static uint16_t need_wire_error(vec_ctx *c, const char *key)
{
    return (uint16_t)parse_name(c, "wire error", need(c, key), error_names, error_name_count,
                                UINT16_MAX);
}

/* A list of names/integers into bytes; returns the count. */
static uint8_t need_byte_list(vec_ctx *c, const char *key, const char *const *names, size_t n,
                              uint8_t *out, size_t max)
{
    char copy[1024], *words[64];
    const char *s = need(c, key);
    if (strlen(s) >= sizeof copy)
        vec_fail(c, "'%s' too long", key);
    strcpy(copy, s);
    int count = vec_split_words(copy, words, (int)max);
    if (count < 0)
        vec_fail(c, "'%s' lists more than %zu items", key, max);
    for (int i = 0; i < count; i++)
        out[i] = (uint8_t)parse_name(c, key, words[i], names, n, UINT8_MAX);
    return (uint8_t)count;
}

static void build_header(vec_ctx *c, aftp_wire_header *h)
{
    h->type = (uint8_t)parse_name(c, "type", need(c, "type"), type_names, AFTP_WIRE_TYPE_MAX + 1,
                                  0);
    h->version = (uint8_t)need_u64(c, "version", UINT8_MAX);
    h->flags = (uint16_t)need_u64(c, "flags", UINT16_MAX);
    h->conn_id = (uint32_t)need_u64(c, "conn_id", UINT32_MAX);
    h->pn = need_u64(c, "pn", UINT64_MAX);
}

static void build_hello(vec_ctx *c, aftp_wire_hello *h)
{
    h->role = (uint8_t)parse_name(c, "role", need(c, "role"), role_names, 3, UINT8_MAX);
    h->cipher_count = need_byte_list(c, "ciphers", cipher_names, 3, h->ciphers,
                                     AFTP_WIRE_MAX_CIPHERS);
    h->max_datagram = (uint16_t)need_u64(c, "max_datagram", UINT16_MAX);
    h->ext = need_bytes16(c, "ext", &h->ext_len);
}

static void build_hello_ack(vec_ctx *c, aftp_wire_hello_ack *h)
{
    h->server_conn_id = (uint32_t)need_u64(c, "server_conn_id", UINT32_MAX);
    h->cipher = (uint8_t)parse_name(c, "cipher", need(c, "cipher"), cipher_names, 3, UINT8_MAX);
    h->max_datagram = (uint16_t)need_u64(c, "max_datagram", UINT16_MAX);
    h->ext = need_bytes16(c, "ext", &h->ext_len);
}

static void build_file_offer(vec_ctx *c, aftp_wire_file_offer *o)
{
    o->file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
    o->size = need_u64(c, "size", UINT64_MAX);
    if (vec_parse_i64(need(c, "mtime_ns"), &o->mtime_ns) != 0)
        vec_fail(c, "'mtime_ns' is not a signed 64-bit integer");
    o->mode = (uint32_t)need_u64(c, "mode", UINT32_MAX);
    o->block_size = (uint32_t)need_u64(c, "block_size", UINT32_MAX);
    o->flags = (uint16_t)need_u64(c, "offer_flags", UINT16_MAX);
    o->path = need_bytes16(c, "path", &o->path_len);
}

static void build_feedback(vec_ctx *c, aftp_wire_feedback *f)
{
    aftp_wire_range *ranges;
    size_t count;
    f->file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
    f->largest_pn = need_u64(c, "largest_pn", UINT64_MAX);
    f->ack_delay_us = (uint32_t)need_u64(c, "ack_delay_us", UINT32_MAX);
    f->recv_time_us = need_u64(c, "recv_time_us", UINT64_MAX);
    f->packets_received = need_u64(c, "packets_received", UINT64_MAX);
    f->blocks_received = need_u64(c, "blocks_received", UINT64_MAX);
    f->cum_block = need_u64(c, "cum_block", UINT64_MAX);
    f->scan_start = need_u64(c, "scan_start", UINT64_MAX);
    f->scan_end = need_u64(c, "scan_end", UINT64_MAX);
    if (vec_parse_ranges(need(c, "ranges"), &ranges, &count) != 0 || count > UINT16_MAX)
        vec_fail(c, "'ranges' is not a list of start+len");
    f->ranges = own(c, ranges);
    f->range_count = (uint16_t)count;
}

/* The key "<prefix>.<n>.<field>" (records of a batch are numbered from 1). */
static const char *record_key(char *buf, size_t cap, const char *prefix, size_t n,
                              const char *field)
{
    snprintf(buf, cap, "%s.%zu.%s", prefix, n, field);
    return buf;
}

/* How many records "<prefix>.1.entry_id", "<prefix>.2.entry_id"... exist. */
static uint16_t count_records(vec_ctx *c, const char *prefix)
{
    char key[64];
    uint16_t n = 0;
    while (n < MAX_VEC_RECORDS &&
           vec_get(c->rec, record_key(key, sizeof key, prefix, n + 1u, "entry_id")) != NULL)
        n++;
    if (n == 0)
        vec_fail(c, "no '%s.1.entry_id'", prefix);
    return n;
}

static void *own_array(vec_ctx *c, size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL)
        vec_fail(c, "out of memory");
    return own(c, p);
}

/* A byte string of exactly n bytes into out. */
static void need_fixed_bytes(vec_ctx *c, const char *key, uint8_t *out, size_t n)
{
    size_t len;
    const uint8_t *d = need_bytes(c, key, &len, n);
    if (len != n)
        vec_fail(c, "'%s' is not %zu bytes", key, n);
    memcpy(out, d, n);
}

static void need_digest(vec_ctx *c, uint8_t *digest)
{
    need_fixed_bytes(c, "digest", digest, AFTP_WIRE_DIGEST_LEN);
}

static void build_entry(vec_ctx *c, size_t n, void *out)
{
    aftp_wire_entry *e = out;
    char k[64];
#define ENTRY_KEY(field) record_key(k, sizeof k, "entry", n, field)
    e->entry_id = (uint32_t)need_u64(c, ENTRY_KEY("entry_id"), UINT32_MAX);
    e->kind = (uint8_t)parse_name(c, "kind", need(c, ENTRY_KEY("kind")), kind_names, 4,
                                  UINT8_MAX);
    e->flags = (uint16_t)need_u64(c, ENTRY_KEY("entry_flags"), UINT16_MAX);
    e->size = need_u64(c, ENTRY_KEY("size"), UINT64_MAX);
    if (vec_parse_i64(need(c, ENTRY_KEY("mtime_ns")), &e->mtime_ns) != 0)
        vec_fail(c, "'%s' is not a signed 64-bit integer", k);
    e->mode = (uint32_t)need_u64(c, ENTRY_KEY("mode"), UINT32_MAX);
    e->base_block = need_u64(c, ENTRY_KEY("base_block"), UINT64_MAX);
    e->block_size = (uint32_t)need_u64(c, ENTRY_KEY("block_size"), UINT32_MAX);
    e->source_id = need_u64(c, ENTRY_KEY("source_id"), UINT64_MAX);
    need_fixed_bytes(c, ENTRY_KEY("digest"), e->digest, AFTP_WIRE_DIGEST_LEN);
    e->path = need_bytes16(c, ENTRY_KEY("path"), &e->path_len);
    e->target = need_bytes16(c, ENTRY_KEY("target"), &e->target_len);
    /* entry.N.holes only on a record with flag HOLES (spec 6.13). */
    const char *holes = vec_get(c->rec, ENTRY_KEY("holes"));
    aftp_wire_range *list;
    size_t count;
    if (holes != NULL && (vec_parse_ranges(holes, &list, &count) != 0 || count > UINT16_MAX))
        vec_fail(c, "'%s' is not a list of start+len", k);
    if (holes != NULL) {
        e->holes = own(c, list);
        e->hole_count = (uint16_t)count;
    }
#undef ENTRY_KEY
}


static void build_verdict(vec_ctx *c, size_t n, void *out)
{
    aftp_wire_verdict *v = out;
    char k[64];
    aftp_wire_range *held;
    size_t count;
    v->entry_id = (uint32_t)need_u64(c, record_key(k, sizeof k, "verdict", n, "entry_id"),
                                     UINT32_MAX);
    v->verdict = (uint8_t)parse_name(c, "verdict",
                                     need(c, record_key(k, sizeof k, "verdict", n, "verdict")),
                                     verdict_names, 4, UINT8_MAX);
    v->error = need_wire_error(c, record_key(k, sizeof k, "verdict", n, "error"));
    record_key(k, sizeof k, "verdict", n, "held");
    if (vec_parse_ranges(need(c, k), &held, &count) != 0 || count > UINT16_MAX)
        vec_fail(c, "'%s' is not a list of start+len", k);
    v->ranges = own(c, held);
    v->range_count = (uint16_t)count;
}

/* PULL_REQUEST: pull_flags, max_rate, then path.1, path.2 ... (bytes). */
static void build_pull_request(vec_ctx *c, aftp_wire_pull_request *q)
{
    char k[64];
    uint16_t n = 0;
    q->flags = (uint16_t)need_u64(c, "pull_flags", UINT16_MAX);
    q->max_rate_bps = need_u64(c, "max_rate", UINT64_MAX);
    while (n < AFTP_WIRE_MAX_PULL_PATHS + 1u &&
           vec_get(c->rec, (snprintf(k, sizeof k, "path.%u", n + 1u), k)) != NULL)
        n++;
    if (n == 0)
        vec_fail(c, "no 'path.1'");
    aftp_wire_path *paths = own_array(c, n, sizeof *paths);
    for (uint16_t i = 0; i < n; i++) {
        snprintf(k, sizeof k, "path.%u", i + 1u);
        paths[i].bytes = need_bytes16(c, k, &paths[i].len);
    }
    q->paths = paths;
    q->path_count = n;
}

/* PULL_REPLY: `errors`, a list of wire error names, one per path. */
static void build_pull_reply(vec_ctx *c, aftp_wire_pull_reply *a)
{
    char copy[1024], *words[AFTP_WIRE_MAX_PULL_PATHS];
    const char *s = need(c, "errors");
    if (strlen(s) >= sizeof copy)
        vec_fail(c, "'errors' too long");
    strcpy(copy, s);
    int count = vec_split_words(copy, words, AFTP_WIRE_MAX_PULL_PATHS);
    if (count < 0)
        vec_fail(c, "'errors' lists more than %u items", AFTP_WIRE_MAX_PULL_PATHS);
    for (int i = 0; i < count; i++)
        a->errors[i] = (uint16_t)parse_name(c, "errors", words[i], error_names, error_name_count,
                                            UINT16_MAX);
    a->count = (uint16_t)count;
}

/* The numbered records "<prefix>.N.*" of a batch, each `size` bytes,
 * filled by `build`; *count is how many there are. */
static void *build_records(vec_ctx *c, const char *prefix, size_t size,
                           void (*build)(vec_ctx *, size_t, void *), uint16_t *count)
{
    *count = count_records(c, prefix);
    uint8_t *list = own_array(c, *count, size);
    for (uint16_t i = 0; i < *count; i++)
        build(c, i + 1u, list + (size_t)i * size);
    return list;
}

static void build_body(vec_ctx *c, aftp_wire_packet *p)
{
    switch (p->hdr.type) {
    case AFTP_WIRE_VERSION_NEG:
        p->u.version_neg.count = need_byte_list(c, "versions", NULL, 0, p->u.version_neg.versions,
                                                AFTP_WIRE_MAX_VERSIONS);
        break;
    case AFTP_WIRE_HELLO: build_hello(c, &p->u.hello); break;
    case AFTP_WIRE_HELLO_ACK: build_hello_ack(c, &p->u.hello_ack); break;
    case AFTP_WIRE_FILE_OFFER: build_file_offer(c, &p->u.file_offer); break;
    case AFTP_WIRE_FILE_REPLY:
        p->u.file_reply.file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
        p->u.file_reply.error = need_wire_error(c, "error");
        break;
    case AFTP_WIRE_PULL_END:
        p->u.pull_end.entry_count = (uint32_t)need_u64(c, "entry_count", UINT32_MAX);
        break;
    case AFTP_WIRE_RATE_UPDATE:
        p->u.rate_update.seq = need_u64(c, "seq", UINT64_MAX);
        p->u.rate_update.cap_bps = need_u64(c, "cap_bps", UINT64_MAX);
        break;
    case AFTP_WIRE_ABANDON:
        p->u.abandon.file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
        p->u.abandon.error = need_wire_error(c, "error");
        break;
    case AFTP_WIRE_DATA:
        p->u.data.file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
        p->u.data.block = need_u64(c, "block", UINT64_MAX);
        p->u.data.payload = need_bytes16(c, "payload", &p->u.data.payload_len);
        break;
    case AFTP_WIRE_FEEDBACK: build_feedback(c, &p->u.feedback); break;
    case AFTP_WIRE_FILE_DONE:
        p->u.file_done.file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
        p->u.file_done.block_count = need_u64(c, "block_count", UINT64_MAX);
        need_digest(c, p->u.file_done.digest);
        break;
    case AFTP_WIRE_FILE_RESULT:
        p->u.file_result.file_id = (uint32_t)need_u64(c, "file_id", UINT32_MAX);
        p->u.file_result.error = need_wire_error(c, "error");
        need_digest(c, p->u.file_result.digest);
        break;
    case AFTP_WIRE_CLOSE:
        p->u.close.error = need_wire_error(c, "error");
        p->u.close.reason = need_bytes16(c, "reason", &p->u.close.reason_len);
        break;
    case AFTP_WIRE_RETRY: p->u.retry.token = need_bytes16(c, "token", &p->u.retry.token_len); break;
    case AFTP_WIRE_SERVER_KEY:
        need_fixed_bytes(c, "key", p->u.server_key.key, AFTP_WIRE_SERVER_KEY_LEN);
        break;
    case AFTP_WIRE_ENTRIES:
        p->u.entries.entries = build_records(c, "entry", sizeof(aftp_wire_entry), build_entry,
                                             &p->u.entries.count);
        break;
    case AFTP_WIRE_VERDICTS:
        p->u.verdicts.verdicts = build_records(c, "verdict", sizeof(aftp_wire_verdict),
                                               build_verdict, &p->u.verdicts.count);
        break;
    case AFTP_WIRE_PULL_REQUEST: build_pull_request(c, &p->u.pull_request); break;
    case AFTP_WIRE_PULL_REPLY: build_pull_reply(c, &p->u.pull_reply); break;
    default: vec_fail(c, "no fields known for type %u", p->hdr.type);
    }
}

/* The packet the record's fields describe; every key must be consumed. */
static void build_packet(vec_ctx *c, aftp_wire_packet *p)
{
    memset(p, 0, sizeof *p);
    build_header(c, &p->hdr);
    build_body(c, p);
    const char *stray = vec_unused_key(c->rec);
    if (stray != NULL)
        vec_fail(c, "key '%s' does not belong to a %s", stray, type_names[p->hdr.type]);
}

static void expect_hex(vec_ctx *c, const char *what, const uint8_t *got, size_t got_len,
                       const uint8_t *hex, size_t hex_len)
{
    if (got_len != hex_len)
        vec_fail(c, "%s gives %zu bytes, hex has %zu", what, got_len, hex_len);
    for (size_t i = 0; i < hex_len; i++)
        if (got[i] != hex[i])
            vec_fail(c, "%s differs from hex at byte %zu: %02x, hex has %02x", what, i, got[i],
                     hex[i]);
}

static void check_valid(vec_ctx *c, const uint8_t *hex, size_t hex_len)
{
    aftp_wire_packet want, got;
    build_packet(c, &want);
    size_t len = 0;
    int rc = aftp_wire_encode(&want, out_buf, sizeof out_buf, &len);
    if (rc != AFTP_OK)
        vec_fail(c, "encoding the fields fails: %s", aftp_strerror(rc));
    expect_hex(c, "encoding the fields", out_buf, len, hex, hex_len);
    rc = aftp_wire_decode(hex, hex_len, &got);
    if (rc != AFTP_OK)
        vec_fail(c, "decoding hex fails: %s", aftp_strerror(rc));
    wire_expect_packets_equal(&want, &got);
    rc = aftp_wire_encode(&got, out_buf, sizeof out_buf, &len);
    if (rc != AFTP_OK)
        vec_fail(c, "re-encoding the decoded packet fails: %s", aftp_strerror(rc));
    expect_hex(c, "re-encoding the decoded packet", out_buf, len, hex, hex_len);
    types_seen |= 1u << want.hdr.type;
}

static int decoder_error(const char *name)
{
    static const struct {
        const char *name;
        int code;
    } codes[] = {{"TRUNCATED", AFTP_ERR_TRUNCATED}, {"MALFORMED", AFTP_ERR_MALFORMED},
                 {"UNKNOWN_TYPE", AFTP_ERR_UNKNOWN_TYPE}, {"VERSION", AFTP_ERR_VERSION},
                 {"LIMIT", AFTP_ERR_LIMIT}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(codes[i].name, name) == 0)
            return codes[i].code;
    return AFTP_OK;
}

static void check_invalid(vec_ctx *c, const char *expect, const uint8_t *hex, size_t hex_len)
{
    int want = decoder_error(expect);
    if (want == AFTP_OK)
        vec_fail(c, "unknown expect '%s'", expect);
    const char *stray = vec_unused_key(c->rec);
    if (stray != NULL)
        vec_fail(c, "key '%s' does not belong to an invalid vector", stray);
    int got = aftp_wire_decode(hex, hex_len, &(aftp_wire_packet){0});
    if (got != want)
        vec_fail(c, "decode gives %s, expected %s", aftp_strerror(got), aftp_strerror(want));
    wire_expect_decode_error(hex, hex_len, want);
}

static void check_record(const char *file, vec_record *rec)
{
    vec_ctx c = {file, rec, "?", {NULL}, 0};
    size_t hex_len;
    c.name = need(&c, "name");
    print_message("  %s\n", c.name);
    const uint8_t *hex = need_bytes(&c, "hex", &hex_len, WIRE_TEST_BUF);
    const char *expect = vec_get(rec, "expect");
    if (expect != NULL)
        check_invalid(&c, expect, hex, hex_len);
    else
        check_valid(&c, hex, hex_len);
    for (size_t i = 0; i < c.n_owned; i++)
        free(c.owned[i]);
}

static void test_vector_file(void **state)
{
    const char *path = *state;
    vec_file f;
    char err[512];
    if (vec_file_load(path, &f, err, sizeof err) != 0)
        fail_msg("%s", err);
    if (f.count == 0)
        fail_msg("%s: no vectors", path);
    for (size_t i = 0; i < f.count; i++)
        check_record(path, &f.records[i]);
    vec_file_free(&f);
}

static void test_every_type_has_a_vector(void **state)
{
    (void)state;
    for (unsigned t = 0; t <= AFTP_WIRE_TYPE_MAX; t++)
        if (!(types_seen & (1u << t)))
            fail_msg("no valid vector of type %s", aftp_wire_type_name((uint8_t)t));
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)argc - 1 : 0;
    struct CMUnitTest *tests = calloc(n + 1, sizeof *tests);
    if (tests == NULL)
        return 1;
    load_wire_names();
    for (size_t i = 0; i < n; i++) {
        tests[i].name = argv[i + 1];
        tests[i].test_func = test_vector_file;
        tests[i].initial_state = argv[i + 1];
    }
    tests[n].name = "every_type_has_a_vector";
    tests[n].test_func = test_every_type_has_a_vector;
    int failed = _cmocka_run_group_tests("vectors", tests, n + 1, NULL, NULL);
    free(tests);
    return failed;
}
