/* The IK handshake and key schedule (common/aftp_handshake.h) between two
 * in-memory parties with scripted randomness. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/aftp_handshake.h"
#include "crypto_fixtures.h"

enum { KEY = AFTP_HS_KEY_LEN };

static const uint64_t NOW = UINT64_C(1767225600) * 1000000000u; /* 2026-01-01 */
static const uint8_t prologue[] = "aftp v1 test";

/* Everything one handshake run needs: both identities, the server's
 * policy, the randomness of each side, the messages. */
typedef struct run {
    uint8_t client_secret[KEY], client_public[KEY];
    uint8_t server_secret[KEY], server_public[KEY];
    uint8_t pinned[KEY];           /* the server key the client expects */
    const uint8_t *client_psk;
    policy pol;
    aftp_hs_peers peers;
    fixed_random client_rng, server_rng;
    aftp_handshake *client, *server;
    uint8_t msg1[AFTP_HS_MAX_INIT], msg2[AFTP_HS_MAX_RESPONSE];
    size_t msg1_len, msg2_len;
} run;

static void keypair(uint8_t seed, uint8_t *secret, uint8_t *public_key)
{
    memset(secret, seed, KEY);
    assert_int_equal(aftp_hs_public_key(secret, public_key), AFTP_OK);
}

/* Fixed identities; the client is admitted without a psk. */
static void run_init(run *r)
{
    memset(r, 0, sizeof *r);
    keypair(0x11, r->client_secret, r->client_public);
    keypair(0x22, r->server_secret, r->server_public);
    memcpy(r->pinned, r->server_public, KEY);
    policy_admit(&r->pol, r->client_public, NULL);
    r->peers = policy_peers(&r->pol);
    r->client_rng.fill = 0x40;
    r->server_rng.fill = 0x80;
}

static void run_start(run *r)
{
    aftp_hs_config c = {AFTP_HS_INITIATOR, r->client_secret, r->pinned, r->client_psk, NULL,
                        prologue, sizeof prologue, fixed_random_fn, &r->client_rng};
    aftp_hs_config s = {AFTP_HS_RESPONDER, r->server_secret, NULL, NULL, &r->peers,
                        prologue, sizeof prologue, fixed_random_fn, &r->server_rng};
    assert_int_equal(aftp_handshake_new(&r->client, &c), AFTP_OK);
    assert_int_equal(aftp_handshake_new(&r->server, &s), AFTP_OK);
}

static void run_free(run *r)
{
    aftp_handshake_del(r->client);
    aftp_handshake_del(r->server);
    r->client = r->server = NULL;
}

static void write_msg1(run *r, uint64_t now, const char *payload)
{
    assert_int_equal(aftp_handshake_write_init(r->client, now, (const uint8_t *)payload,
                                               strlen(payload), r->msg1, sizeof r->msg1,
                                               &r->msg1_len), AFTP_OK);
    assert_int_equal(r->msg1_len, AFTP_HS_INIT_OVERHEAD + strlen(payload));
}

static int read_msg1(run *r)
{
    uint8_t payload[AFTP_HS_MAX_PAYLOAD];
    size_t len;
    return aftp_handshake_read_init(r->server, r->msg1, r->msg1_len, payload, sizeof payload, &len);
}

static void write_msg2(run *r, const char *payload)
{
    assert_int_equal(aftp_handshake_write_response(r->server, (const uint8_t *)payload,
                                                   strlen(payload), r->msg2, sizeof r->msg2,
                                                   &r->msg2_len), AFTP_OK);
}

static int read_msg2(run *r)
{
    uint8_t payload[AFTP_HS_MAX_PAYLOAD];
    size_t len;
    return aftp_handshake_read_response(r->client, r->msg2, r->msg2_len, payload, sizeof payload,
                                        &len);
}

/* The whole exchange; both sides done. */
static void run_handshake(run *r)
{
    run_start(r);
    write_msg1(r, NOW, "");
    assert_int_equal(read_msg1(r), AFTP_OK);
    write_msg2(r, "");
    assert_int_equal(read_msg2(r), AFTP_OK);
}

/* A datagram sealed by `from` opens with `to`. */
static void expect_channel(aftp_handshake *from, aftp_handshake *to, int should_open)
{
    uint8_t cipher = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    aftp_aead *seal, *open;
    uint8_t dg[64];
    size_t len;
    assert_int_equal(aftp_handshake_aead(from, AFTP_HS_SEND, cipher, &seal), AFTP_OK);
    assert_int_equal(aftp_handshake_aead(to, AFTP_HS_RECV, cipher, &open), AFTP_OK);
    fixture_header(AFTP_WIRE_FEEDBACK, 42, 1000, dg);
    memset(dg + AFTP_WIRE_HEADER_LEN, 0x5a, 20);
    assert_int_equal(aftp_aead_seal_datagram(seal, dg, 36, AFTP_AEAD_AD_HEADER, sizeof dg, &len),
                     AFTP_OK);
    assert_int_equal(aftp_aead_open_datagram(open, dg, len, AFTP_AEAD_AD_HEADER, &len),
                     should_open ? AFTP_OK : AFTP_ERR_AUTH);
    aftp_aead_del(seal);
    aftp_aead_del(open);
}

static void expect_secret(aftp_handshake *hs, int dir, uint8_t *secret, uint64_t generation)
{
    uint64_t gen;
    assert_int_equal(aftp_handshake_secret(hs, dir, secret, &gen), AFTP_OK);
    assert_int_equal(gen, generation);
}

static void test_handshake_agrees(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    run_start(&r);
    uint8_t payload[AFTP_HS_MAX_PAYLOAD], key[KEY];
    size_t len;
    write_msg1(&r, NOW, "offer: cipher list");
    assert_int_equal(aftp_handshake_read_init(r.server, r.msg1, r.msg1_len, payload,
                                              sizeof payload, &len), AFTP_OK);
    assert_int_equal(len, strlen("offer: cipher list"));
    assert_memory_equal(payload, "offer: cipher list", len);
    assert_int_equal(aftp_handshake_peer_key(r.server, key), AFTP_OK);
    assert_memory_equal(key, r.client_public, KEY);
    write_msg2(&r, "chosen");
    assert_int_equal(r.msg2_len, AFTP_HS_RESPONSE_OVERHEAD + 6);
    assert_int_equal(aftp_handshake_read_response(r.client, r.msg2, r.msg2_len, payload,
                                                  sizeof payload, &len), AFTP_OK);
    assert_memory_equal(payload, "chosen", 6);
    assert_true(aftp_handshake_done(r.client) && aftp_handshake_done(r.server));

    uint8_t h1[AFTP_HS_HASH_LEN], h2[AFTP_HS_HASH_LEN], a[KEY], b[KEY];
    assert_int_equal(aftp_handshake_hash(r.client, h1), AFTP_OK);
    assert_int_equal(aftp_handshake_hash(r.server, h2), AFTP_OK);
    assert_memory_equal(h1, h2, sizeof h1);
    expect_secret(r.client, AFTP_HS_SEND, a, 0);
    expect_secret(r.server, AFTP_HS_RECV, b, 0);
    assert_memory_equal(a, b, KEY);
    expect_secret(r.client, AFTP_HS_RECV, a, 0);
    expect_secret(r.server, AFTP_HS_SEND, b, 0);
    assert_memory_equal(a, b, KEY);
    expect_secret(r.client, AFTP_HS_SEND, b, 0);
    assert_memory_not_equal(a, b, KEY); /* one key per direction */
    expect_channel(r.client, r.server, 1);
    expect_channel(r.server, r.client, 1);
    run_free(&r);
}

/* The same identities and random bytes give the same bytes on the wire;
 * other ephemeral randomness gives other messages and other keys. */
static void test_deterministic(void **state)
{
    (void)state;
    run r1, r2;
    run_init(&r1);
    run_init(&r2);
    run_handshake(&r1);
    run_handshake(&r2);
    assert_int_equal(r1.msg1_len, r2.msg1_len);
    assert_memory_equal(r1.msg1, r2.msg1, r1.msg1_len);
    assert_memory_equal(r1.msg2, r2.msg2, r1.msg2_len);
    run_free(&r2);
    run_init(&r2);
    r2.client_rng.fill = 0x41;
    run_handshake(&r2);
    assert_memory_not_equal(r1.msg1, r2.msg1, KEY);
    uint8_t a[KEY], b[KEY];
    expect_secret(r1.client, AFTP_HS_SEND, a, 0);
    expect_secret(r2.client, AFTP_HS_SEND, b, 0);
    assert_memory_not_equal(a, b, KEY);
    run_free(&r1);
    run_free(&r2);
}

/* A failed handshake is dead: every later step is refused. */
static void expect_dead(aftp_handshake *hs)
{
    uint8_t buf[AFTP_HS_MAX_INIT];
    size_t len;
    aftp_aead *a;
    assert_false(aftp_handshake_done(hs));
    assert_int_equal(aftp_handshake_read_init(hs, buf, AFTP_HS_INIT_OVERHEAD, buf, sizeof buf,
                                              &len), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_write_response(hs, NULL, 0, buf, sizeof buf, &len),
                     AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_aead(hs, AFTP_HS_SEND, AFTP_WIRE_CIPHER_NONE, &a),
                     AFTP_ERR_INVALID_STATE);
}

/* Message 1 of the prepared run r is refused with `want`; the server's
 * handshake is dead afterwards. */
static void expect_init_refused(run *r, int want)
{
    run_start(r);
    write_msg1(r, NOW, "");
    assert_int_equal(read_msg1(r), want);
    expect_dead(r->server);
    run_free(r);
}

/* The client pinned another server's key: the real server cannot decrypt
 * the client's identity. */
static void test_wrong_server_key(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    uint8_t other_secret[KEY];
    keypair(0x33, other_secret, r.pinned);
    expect_init_refused(&r, AFTP_ERR_AUTH);
}

static void test_unknown_client(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    r.pol.count = 0;
    expect_init_refused(&r, AFTP_ERR_UNKNOWN_PEER);
}

/* The same message 1 again (a recorded initiation), or an older one, is
 * refused by a fresh server state sharing the policy; a newer one works. */
static void test_replayed_initiation(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    run_handshake(&r);
    uint8_t recorded[AFTP_HS_MAX_INIT];
    size_t recorded_len = r.msg1_len;
    memcpy(recorded, r.msg1, recorded_len);
    run_free(&r);

    run_start(&r);
    memcpy(r.msg1, recorded, recorded_len);
    r.msg1_len = recorded_len;
    assert_int_equal(read_msg1(&r), AFTP_ERR_REPLAY);
    run_free(&r);

    uint64_t steps[] = {NOW - 1000000000u, NOW + 1000u, NOW + 1000000000u};
    int want[] = {AFTP_ERR_REPLAY, AFTP_OK, AFTP_OK}; /* full precision: +1 us is later */
    for (size_t i = 0; i < 3; i++) {
        run_start(&r);
        write_msg1(&r, steps[i], "");
        assert_int_equal(read_msg1(&r), want[i]);
        run_free(&r);
    }
}

/* Any bit flipped in either message fails the handshake. */
static void test_corrupted_messages(void **state)
{
    (void)state;
    run r, good;
    run_init(&good);
    run_handshake(&good);
    for (size_t i = 0; i < good.msg1_len; i++) {
        run_init(&r);
        run_start(&r);
        memcpy(r.msg1, good.msg1, good.msg1_len);
        r.msg1_len = good.msg1_len;
        r.msg1[i] ^= (uint8_t)(1u << (i % 8));
        assert_int_not_equal(read_msg1(&r), AFTP_OK);
        run_free(&r);
    }
    for (size_t i = 0; i < good.msg2_len; i++) {
        run_init(&r);
        run_start(&r);
        write_msg1(&r, NOW, "");
        memcpy(r.msg2, good.msg2, good.msg2_len);
        r.msg2_len = good.msg2_len;
        r.msg2[i] ^= (uint8_t)(1u << (i % 8));
        assert_int_not_equal(read_msg2(&r), AFTP_OK);
        run_free(&r);
    }
    run_init(&r);
    run_start(&r);
    write_msg1(&r, NOW, "");
    r.msg1_len = AFTP_HS_INIT_OVERHEAD - 1;
    assert_int_equal(read_msg1(&r), AFTP_ERR_MALFORMED);
    run_free(&r);
    run_free(&good);
}

/* Both sides must agree on the prologue (the HELLO parameters) and, when
 * the server requires one, on the psk. */
static void test_prologue_and_psk_bound(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    run_start(&r);
    aftp_handshake_del(r.client);
    static const uint8_t other[] = "aftp v1 TEST";
    aftp_hs_config c = {AFTP_HS_INITIATOR, r.client_secret, r.pinned, NULL, NULL,
                        other, sizeof other, fixed_random_fn, &r.client_rng};
    assert_int_equal(aftp_handshake_new(&r.client, &c), AFTP_OK);
    write_msg1(&r, NOW, "");
    assert_int_equal(read_msg1(&r), AFTP_ERR_AUTH);
    run_free(&r);

    static const uint8_t psk[KEY] = {9, 9, 9};
    run_init(&r);
    memcpy(r.pol.entries[0].psk, psk, KEY);
    run_start(&r);
    write_msg1(&r, NOW, "");
    assert_int_equal(read_msg1(&r), AFTP_ERR_AUTH); /* client has no psk */
    run_free(&r);
    run_init(&r);
    memcpy(r.pol.entries[0].psk, psk, KEY);
    r.client_psk = psk;
    run_handshake(&r);
    expect_channel(r.client, r.server, 1);
    run_free(&r);
}

/* Key update: each side derives the next generation on its own, the keys
 * match, KEY_PHASE flips, and no generation opens another's packets. */
static void test_rekey(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    run_handshake(&r);
    uint8_t gen0[KEY], a[KEY], b[KEY];
    expect_secret(r.client, AFTP_HS_SEND, gen0, 0);
    aftp_aead *old_open;
    assert_int_equal(aftp_handshake_aead(r.server, AFTP_HS_RECV, AFTP_WIRE_CIPHER_CHACHA20POLY1305,
                                         &old_open), AFTP_OK);
    for (uint64_t gen = 1; gen <= 2; gen++) {
        assert_int_equal(aftp_handshake_update(r.client, AFTP_HS_SEND), AFTP_OK);
        expect_channel(r.client, r.server, 0); /* the server has not updated yet */
        assert_int_equal(aftp_handshake_update(r.server, AFTP_HS_RECV), AFTP_OK);
        expect_secret(r.client, AFTP_HS_SEND, a, gen);
        expect_secret(r.server, AFTP_HS_RECV, b, gen);
        assert_memory_equal(a, b, KEY);
        assert_memory_not_equal(a, gen0, KEY);
        expect_channel(r.client, r.server, 1);
        aftp_aead *seal;
        assert_int_equal(aftp_handshake_aead(r.client, AFTP_HS_SEND,
                                             AFTP_WIRE_CIPHER_CHACHA20POLY1305, &seal), AFTP_OK);
        assert_int_equal(aftp_aead_key_phase(seal), gen & 1);
        uint8_t dg[AFTP_WIRE_HEADER_LEN + AFTP_AEAD_TAG_LEN];
        size_t len;
        fixture_header(AFTP_WIRE_CLOSE, 1, 5000 + gen, dg);
        assert_int_equal(aftp_aead_seal_datagram(seal, dg, AFTP_WIRE_HEADER_LEN,
                                                 AFTP_AEAD_AD_HEADER, sizeof dg, &len), AFTP_OK);
        assert_int_equal(aftp_aead_open_datagram(old_open, dg, len, AFTP_AEAD_AD_HEADER, &len),
                         AFTP_ERR_AUTH);
        aftp_aead_del(seal);
    }
    /* the other direction was not touched */
    expect_secret(r.server, AFTP_HS_SEND, a, 0);
    expect_channel(r.server, r.client, 1);
    uint8_t next[KEY];
    aftp_hs_next_secret(gen0, next);
    aftp_hs_next_secret(next, next);
    assert_memory_equal(next, b, KEY); /* the schedule, step by step */
    aftp_aead_del(old_open);
    run_free(&r);
}

static void test_misuse(void **state)
{
    (void)state;
    run r;
    run_init(&r);
    run_start(&r);
    uint8_t buf[AFTP_HS_MAX_INIT], key[KEY], hash[AFTP_HS_HASH_LEN];
    size_t len;
    aftp_aead *a;
    assert_int_equal(aftp_handshake_aead(r.client, AFTP_HS_SEND, AFTP_WIRE_CIPHER_NONE, &a),
                     AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_hash(r.client, hash), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_peer_key(r.server, key), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_write_init(r.server, NOW, NULL, 0, buf, sizeof buf, &len),
                     AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_write_init(r.client, NOW, buf, AFTP_HS_MAX_PAYLOAD + 1, buf,
                                               sizeof buf, &len), AFTP_ERR_LIMIT);
    assert_int_equal(aftp_handshake_write_init(r.client, NOW, NULL, 0, buf,
                                               AFTP_HS_INIT_OVERHEAD - 1, &len),
                     AFTP_ERR_BUFFER_TOO_SMALL);
    write_msg1(&r, NOW, "");
    assert_int_equal(aftp_handshake_write_init(r.client, NOW, NULL, 0, buf, sizeof buf, &len),
                     AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_handshake_peer_key(r.client, key), AFTP_OK);
    assert_memory_equal(key, r.server_public, KEY);
    run_free(&r);

    aftp_handshake *hs = NULL;
    aftp_hs_config bad = {AFTP_HS_RESPONDER, r.server_secret, NULL, NULL, NULL,
                          NULL, 0, NULL, NULL};
    assert_int_equal(aftp_handshake_new(&hs, &bad), AFTP_ERR_INVALID_ARGUMENT);
    bad.role = AFTP_HS_INITIATOR;
    assert_int_equal(aftp_handshake_new(&hs, &bad), AFTP_ERR_INVALID_ARGUMENT);
    assert_null(hs);
}

static void test_timestamps(void **state)
{
    (void)state;
    uint8_t a[AFTP_HS_TIMESTAMP_LEN], b[AFTP_HS_TIMESTAMP_LEN];
    aftp_hs_timestamp(NOW, a);
    aftp_hs_timestamp(NOW + (UINT64_C(1) << 24), b);
    assert_true(aftp_hs_timestamp_after(b, a));
    assert_false(aftp_hs_timestamp_after(a, b));
    assert_false(aftp_hs_timestamp_after(a, a));
    aftp_hs_timestamp(NOW + 999999999u, b); /* the last ns of the second */
    assert_true(aftp_hs_timestamp_after(b, a));
    aftp_hs_timestamp(NOW + 1000000000u, a); /* the next second: nanos restart at 0 */
    assert_true(aftp_hs_timestamp_after(a, b));
    assert_int_equal(a[0], 0x40); /* TAI64 label 2^62 + seconds */
    /* Full precision: sessions 1 ns apart carry different timestamps, and
     * the bytes decode back to the same time. */
    static const uint8_t want[AFTP_HS_TIMESTAMP_LEN] = {0x40, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00,
                                                        0x07, 0x5b, 0xcd, 0x15};
    aftp_hs_timestamp(UINT64_C(1700000000123456789), a);
    assert_memory_equal(a, want, sizeof want);
    assert_int_equal(aftp_hs_timestamp_ns(a), UINT64_C(1700000000123456789));
    aftp_hs_timestamp(UINT64_C(1700000000123456790), b);
    assert_true(aftp_hs_timestamp_after(b, a));
    memset(a, 0, sizeof a); /* before 1970 */
    assert_int_equal(aftp_hs_timestamp_ns(a), 0);
    memset(a, 0x7f, sizeof a); /* beyond 64-bit ns */
    assert_int_equal(aftp_hs_timestamp_ns(a), UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_agrees),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_wrong_server_key),
        cmocka_unit_test(test_unknown_client),
        cmocka_unit_test(test_replayed_initiation),
        cmocka_unit_test(test_corrupted_messages),
        cmocka_unit_test(test_prologue_and_psk_bound),
        cmocka_unit_test(test_rekey),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_timestamps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
