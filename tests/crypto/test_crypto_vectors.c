/* spec/vectors/crypto.vec through the C implementation: handshakes with
 * fixed keys over the prologue of a concrete HELLO (messages, transcript
 * hash, traffic secrets), the key schedule, and sealed packets per cipher. The file format is the
 * one of spec/vectors/README.md; kinds are described in crypto.vec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "common/aftp_aead.h"
#include "common/aftp_handshake.h"
#include "common/aftp_session.h"
#include "crypto_fixtures.h"
#include "vec_parse.h"

enum { KEY = AFTP_HS_KEY_LEN, MAX_OWNED = 32 };

/* The record under test, and the parsed values it owns. */
typedef struct ctx {
    vec_record *rec;
    const char *name;
    uint8_t *owned[MAX_OWNED];
    size_t n_owned;
} ctx;

static const char *vector_path;

static void vfail(ctx *c, const char *what, const char *key)
{
    fail_msg("%s:%u %s: %s %s", vector_path, c->rec->line, c->name, what, key);
}

static const char *need(ctx *c, const char *key)
{
    const char *v = vec_get(c->rec, key);
    if (v == NULL)
        vfail(c, "missing key", key);
    return v;
}

/* The bytes of `key`; exact_len 0 accepts any length. */
static const uint8_t *need_bytes(ctx *c, const char *key, size_t exact_len, size_t *len)
{
    uint8_t *b;
    size_t n;
    if (vec_parse_bytes(need(c, key), &b, &n) != 0 || c->n_owned == MAX_OWNED)
        vfail(c, "unreadable bytes in", key);
    c->owned[c->n_owned++] = b;
    if (exact_len != 0 && n != exact_len)
        vfail(c, "wrong length of", key);
    if (len != NULL)
        *len = n;
    return b;
}

static uint64_t need_u64(ctx *c, const char *key)
{
    uint64_t v;
    if (vec_parse_u64(need(c, key), &v) != 0)
        vfail(c, "bad integer in", key);
    return v;
}

/* The value of a name from `names` (index = wire value; NULL: unused). */
static uint8_t parse_name(ctx *c, const char *what, const char *name, const char *const *names,
                          size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] != NULL && strcmp(names[i], name) == 0)
            return (uint8_t)i;
    vfail(c, what, name);
    return 0;
}

static const char *const cipher_names[] = {"NONE", "AES256GCM", "CHACHA20POLY1305"};
static const char *const role_names[] = {NULL, "PUSH", "PULL"};

/* A protected cipher: the ones traffic keys and sealed packets exist for. */
static uint8_t need_protected_cipher(ctx *c, const char *key)
{
    uint8_t cipher = parse_name(c, "unknown cipher", need(c, key), cipher_names, 3);
    if (cipher == AFTP_WIRE_CIPHER_NONE)
        vfail(c, "no keys for cipher NONE in", key);
    return cipher;
}

static uint8_t need_cipher(ctx *c)
{
    return need_protected_cipher(c, "cipher");
}

static void expect_bytes(ctx *c, const char *key, const uint8_t *got, size_t got_len)
{
    size_t len;
    const uint8_t *want = need_bytes(c, key, 0, &len);
    if (len != got_len || memcmp(want, got, len) != 0)
        vfail(c, "computed value differs from", key);
}

/* ---- kind = handshake ---- */

typedef struct hs_inputs {
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX];
    uint8_t p2[AFTP_HS_MAX_PAYLOAD]; /* message 2's payload: server_conn_id, cipher,
                                      * max_datagram, the HELLO_ACK's other TLVs */
    const uint8_t *i_static, *r_static, *i_eph, *r_eph, *psk, *p1;
    size_t prologue_len, p1_len, p2_len;
    uint64_t now;
} hs_inputs;

/* The prologue of the HELLO the record describes (spec section 14.2.2). */
static void hello_prologue(ctx *c, hs_inputs *in)
{
    aftp_wire_hello hello;
    char list[256], *words[AFTP_WIRE_MAX_CIPHERS];
    memset(&hello, 0, sizeof hello);
    hello.role = parse_name(c, "unknown role", need(c, "hello_role"), role_names, 3);
    if (snprintf(list, sizeof list, "%s", need(c, "hello_ciphers")) >= (int)sizeof list)
        vfail(c, "too long:", "hello_ciphers");
    int count = vec_split_words(list, words, AFTP_WIRE_MAX_CIPHERS);
    if (count <= 0)
        vfail(c, "bad list in", "hello_ciphers");
    hello.cipher_count = (uint8_t)count;
    for (int i = 0; i < count; i++)
        hello.ciphers[i] = parse_name(c, "unknown cipher", words[i], cipher_names, 3);
    hello.max_datagram = (uint16_t)need_u64(c, "hello_max_datagram");
    uint32_t client_id = (uint32_t)need_u64(c, "client_conn_id");
    assert_int_equal(aftp_wire_hello_prologue(&hello, client_id, in->prologue,
                                              sizeof in->prologue, &in->prologue_len),
                     AFTP_OK);
    expect_bytes(c, "prologue", in->prologue, in->prologue_len);
}

/* Message 2's payload: the HELLO_ACK fields it authenticates and its
 * extensions other than HANDSHAKE, ack_ext (optional; spec 14.2.3), as
 * the engines build it. */
static void ack_payload(ctx *c, hs_inputs *in)
{
    size_t ext_len = 0;
    aftp_wire_hello_ack a = {.server_conn_id = (uint32_t)need_u64(c, "ack_server_conn_id"),
                             .cipher = need_protected_cipher(c, "ack_cipher"),
                             .max_datagram = (uint16_t)need_u64(c, "ack_max_datagram")};
    if (vec_get(c->rec, "ack_ext") != NULL)
        a.ext = need_bytes(c, "ack_ext", 0, &ext_len);
    a.ext_len = (uint16_t)ext_len;
    assert_int_equal(aftp_session_ack_payload(&a, in->p2, sizeof in->p2, &in->p2_len), AFTP_OK);
    expect_bytes(c, "response_payload", in->p2, in->p2_len);
}

static void read_hs_inputs(ctx *c, hs_inputs *in)
{
    hello_prologue(c, in);
    ack_payload(c, in);
    in->i_static = need_bytes(c, "initiator_static", KEY, NULL);
    in->r_static = need_bytes(c, "responder_static", KEY, NULL);
    in->i_eph = need_bytes(c, "initiator_ephemeral", KEY, NULL);
    in->r_eph = need_bytes(c, "responder_ephemeral", KEY, NULL);
    in->psk = need_bytes(c, "psk", KEY, NULL);
    in->p1 = need_bytes(c, "init_payload", 0, &in->p1_len);
    in->now = need_u64(c, "timestamp_ns");
}

static void check_traffic_secrets(ctx *c, aftp_handshake *client, aftp_handshake *server)
{
    uint8_t a[KEY], b[KEY];
    uint64_t gen;
    assert_int_equal(aftp_handshake_secret(client, AFTP_HS_SEND, a, &gen), AFTP_OK);
    assert_int_equal(aftp_handshake_secret(server, AFTP_HS_RECV, b, &gen), AFTP_OK);
    assert_memory_equal(a, b, KEY);
    expect_bytes(c, "secret_i2r", a, KEY);
    assert_int_equal(aftp_handshake_secret(client, AFTP_HS_RECV, a, &gen), AFTP_OK);
    assert_int_equal(aftp_handshake_secret(server, AFTP_HS_SEND, b, &gen), AFTP_OK);
    assert_memory_equal(a, b, KEY);
    expect_bytes(c, "secret_r2i", a, KEY);
}

static void check_handshake(ctx *c)
{
    hs_inputs in;
    read_hs_inputs(c, &in);
    uint8_t i_pub[KEY], r_pub[KEY], msg1[AFTP_HS_MAX_INIT], msg2[AFTP_HS_MAX_RESPONSE];
    uint8_t payload[AFTP_HS_MAX_PAYLOAD], hash[AFTP_HS_HASH_LEN];
    size_t len1, len2, plen;
    assert_int_equal(aftp_hs_public_key(in.i_static, i_pub), AFTP_OK);
    assert_int_equal(aftp_hs_public_key(in.r_static, r_pub), AFTP_OK);
    expect_bytes(c, "initiator_public", i_pub, KEY);
    expect_bytes(c, "responder_public", r_pub, KEY);

    policy pol = {0};
    policy_admit(&pol, i_pub, in.psk);
    aftp_hs_peers peers = policy_peers(&pol);
    fixed_random i_rng = {in.i_eph, KEY, 0, 0}, r_rng = {in.r_eph, KEY, 0, 0};
    aftp_hs_config ic = {AFTP_HS_INITIATOR, in.i_static, r_pub, in.psk, NULL,
                         in.prologue, in.prologue_len, fixed_random_fn, &i_rng};
    aftp_hs_config rc = {AFTP_HS_RESPONDER, in.r_static, NULL, NULL, &peers,
                         in.prologue, in.prologue_len, fixed_random_fn, &r_rng};
    aftp_handshake *client, *server;
    assert_int_equal(aftp_handshake_new(&client, &ic), AFTP_OK);
    assert_int_equal(aftp_handshake_new(&server, &rc), AFTP_OK);
    assert_int_equal(aftp_handshake_write_init(client, in.now, in.p1, in.p1_len, msg1, sizeof msg1,
                                               &len1), AFTP_OK);
    expect_bytes(c, "msg1", msg1, len1);
    assert_int_equal(aftp_handshake_read_init(server, msg1, len1, payload, sizeof payload, &plen),
                     AFTP_OK);
    assert_true(plen == in.p1_len && memcmp(payload, in.p1, plen) == 0);
    assert_int_equal(aftp_handshake_write_response(server, in.p2, in.p2_len, msg2, sizeof msg2,
                                                   &len2), AFTP_OK);
    expect_bytes(c, "msg2", msg2, len2);
    assert_int_equal(aftp_handshake_read_response(client, msg2, len2, payload, sizeof payload,
                                                  &plen), AFTP_OK);
    assert_int_equal(aftp_handshake_hash(server, hash), AFTP_OK);
    expect_bytes(c, "handshake_hash", hash, sizeof hash);
    assert_int_equal(aftp_handshake_hash(client, hash), AFTP_OK);
    expect_bytes(c, "handshake_hash", hash, sizeof hash);
    check_traffic_secrets(c, client, server);
    aftp_handshake_del(client);
    aftp_handshake_del(server);
}

/* ---- kind = traffic ---- */

static void check_traffic(ctx *c)
{
    const uint8_t *secret = need_bytes(c, "secret", KEY, NULL);
    uint8_t key[AFTP_AEAD_KEY_LEN], iv[AFTP_AEAD_IV_LEN], next[KEY];
    aftp_hs_traffic_keys(secret, need_cipher(c), key, iv);
    aftp_hs_next_secret(secret, next);
    expect_bytes(c, "key", key, sizeof key);
    expect_bytes(c, "iv", iv, sizeof iv);
    expect_bytes(c, "next_secret", next, sizeof next);
}

/* ---- kind = sealed ---- */

static void check_sealed(ctx *c)
{
    uint8_t cipher = need_cipher(c);
    const uint8_t *key = need_bytes(c, "key", AFTP_AEAD_KEY_LEN, NULL);
    const uint8_t *iv = need_bytes(c, "iv", AFTP_AEAD_IV_LEN, NULL);
    uint64_t phase = need_u64(c, "key_phase");
    uint64_t ad_len = need_u64(c, "ad_len");
    size_t plain_len, len;
    const uint8_t *plain = need_bytes(c, "plain", 0, &plain_len);
    if (!aftp_aead_available(cipher)) {
        (void)vec_get(c->rec, "sealed");
        print_message("  %s: cipher not available on this CPU, not checked\n", c->name);
        return;
    }
    uint8_t dg[AFTP_WIRE_MAX_DATAGRAM];
    assert_true(plain_len >= ad_len && plain_len + AFTP_AEAD_TAG_LEN <= sizeof dg);
    memcpy(dg, plain, plain_len);
    aftp_aead *a;
    assert_int_equal(aftp_aead_new(&a, cipher, key, iv, (unsigned)phase), AFTP_OK);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, plain_len, ad_len, sizeof dg, &len), AFTP_OK);
    expect_bytes(c, "sealed", dg, len);
    assert_int_equal(aftp_aead_open_datagram(a, dg, len, ad_len, &len), AFTP_OK);
    assert_int_equal(len, plain_len);
    assert_memory_equal(dg + AFTP_WIRE_HEADER_LEN, plain + AFTP_WIRE_HEADER_LEN,
                        plain_len - AFTP_WIRE_HEADER_LEN);
    aftp_aead_del(a);
}

static void check_record(vec_record *rec)
{
    ctx c = {rec, "?", {NULL}, 0};
    c.name = need(&c, "name");
    print_message("  %s\n", c.name);
    const char *kind = need(&c, "kind");
    if (strcmp(kind, "handshake") == 0)
        check_handshake(&c);
    else if (strcmp(kind, "traffic") == 0)
        check_traffic(&c);
    else if (strcmp(kind, "sealed") == 0)
        check_sealed(&c);
    else
        vfail(&c, "unknown kind", kind);
    const char *stray = vec_unused_key(rec);
    if (stray != NULL)
        vfail(&c, "key not checked:", stray);
    for (size_t i = 0; i < c.n_owned; i++)
        free(c.owned[i]);
}

static vec_file vectors;

static int load_vectors(void **state)
{
    (void)state;
    char err[512];
    if (vec_file_load(vector_path, &vectors, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int free_vectors(void **state)
{
    (void)state;
    vec_file_free(&vectors);
    return 0;
}

static void test_crypto_vectors(void **state)
{
    (void)state;
    assert_true(vectors.count > 0);
    for (size_t i = 0; i < vectors.count; i++)
        check_record(&vectors.records[i]);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s spec/vectors/crypto.vec\n", argv[0]);
        return 2;
    }
    vector_path = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_crypto_vectors)};
    return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}
