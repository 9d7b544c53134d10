/* Per-session packet protection (common/aftp_protect.h): sealing and
 * opening between the two ends of a real handshake, the replay window,
 * key updates followed by the peer (including packets from before an
 * update arriving late), and forgeries that change nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_protect.h"
#include "sim_run.h"

#define CIPHER AFTP_WIRE_CIPHER_CHACHA20POLY1305
#define BODY 40u
#define DG_LEN (AFTP_WIRE_HEADER_LEN + BODY + AFTP_WIRE_TAG_LEN)

typedef struct ends {
    aftp_protect client, server;
    uint8_t dg[DG_LEN];
    size_t len;
    uint8_t out[DG_LEN];
} ends;

static int admit_all(void *user, const uint8_t *key, uint8_t *psk)
{
    (void)user;
    (void)key;
    memset(psk, 0, AFTP_HS_KEY_LEN);
    return AFTP_OK;
}

static int any_time(void *user, const uint8_t *key, const uint8_t *ts)
{
    (void)user;
    (void)key;
    (void)ts;
    return AFTP_OK;
}

/* Both ends keyed from one handshake, client updating every `update`. */
static void ends_start(ends *e, uint64_t update)
{
    aftp_hs_peers peers = {.lookup = admit_all, .check_timestamp = any_time};
    aftp_hs_config c = {.role = AFTP_HS_INITIATOR, .static_secret = sim_client_secret,
                        .server_key = sim_server_public(), .random = sim_random};
    aftp_hs_config s = {.role = AFTP_HS_RESPONDER, .static_secret = sim_server_secret,
                        .peers = &peers, .random = sim_random};
    aftp_handshake *hc, *hsv;
    uint8_t m1[AFTP_HS_MAX_INIT], m2[AFTP_HS_MAX_RESPONSE], pl[AFTP_HS_MAX_PAYLOAD];
    size_t m1_len, m2_len, pl_len;
    assert_int_equal(aftp_handshake_new(&hc, &c), AFTP_OK);
    assert_int_equal(aftp_handshake_new(&hsv, &s), AFTP_OK);
    assert_int_equal(aftp_handshake_write_init(hc, 1, NULL, 0, m1, sizeof m1, &m1_len), AFTP_OK);
    assert_int_equal(aftp_handshake_read_init(hsv, m1, m1_len, pl, sizeof pl, &pl_len), AFTP_OK);
    assert_int_equal(aftp_handshake_write_response(hsv, NULL, 0, m2, sizeof m2, &m2_len), AFTP_OK);
    assert_int_equal(aftp_handshake_read_response(hc, m2, m2_len, pl, sizeof pl, &pl_len), AFTP_OK);
    aftp_protect_init(&e->client);
    aftp_protect_init(&e->server);
    assert_false(aftp_protect_started(&e->client));
    assert_int_equal(aftp_protect_start(&e->client, hc, CIPHER, update), AFTP_OK);
    assert_int_equal(aftp_protect_start(&e->server, hsv, CIPHER, update), AFTP_OK);
    assert_int_equal(aftp_protect_overhead(&e->client), AFTP_WIRE_TAG_LEN);
    aftp_handshake_del(hc);
    aftp_handshake_del(hsv);
}

static void ends_free(ends *e)
{
    aftp_protect_free(&e->client);
    aftp_protect_free(&e->server);
}

/* The client seals a packet numbered pn into e->dg. */
static void client_seals(ends *e, uint64_t pn)
{
    aftp_wire_header h = {.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_FEEDBACK, .pn = pn};
    assert_int_equal(aftp_wire_header_encode(&h, e->dg, sizeof e->dg), AFTP_OK);
    memset(e->dg + AFTP_WIRE_HEADER_LEN, (int)(pn & 0xff), BODY);
    assert_int_equal(aftp_protect_seal_datagram(&e->client, e->dg, AFTP_WIRE_HEADER_LEN + BODY,
                                                AFTP_AEAD_AD_HEADER, sizeof e->dg, &e->len),
                     AFTP_OK);
    assert_int_equal(e->len, sizeof e->dg);
}

static int server_opens(ends *e, const uint8_t *dg, size_t len)
{
    aftp_wire_header h;
    size_t body_len = 0;
    assert_int_equal(aftp_wire_header_decode(dg, len, &h), AFTP_OK);
    memset(e->out, 0xEE, sizeof e->out);
    int rc = aftp_protect_open(&e->server, dg, len, AFTP_AEAD_AD_HEADER, h.pn,
                               (h.flags & AFTP_WIRE_FLAG_KEY_PHASE) != 0, e->out, &body_len);
    if (rc == AFTP_OK) {
        assert_int_equal(body_len, BODY);
        assert_int_equal(e->out[0], (uint8_t)(h.pn & 0xff));
        assert_int_equal(e->out[BODY - 1], (uint8_t)(h.pn & 0xff));
    }
    return rc;
}

static void test_seal_open_and_replay(void **state)
{
    (void)state;
    ends e;
    ends_start(&e, 0);
    client_seals(&e, 7);
    uint8_t copy[sizeof e.dg];
    memcpy(copy, e.dg, e.len);
    assert_int_equal(aftp_protect_check(&e.server, 7), AFTP_OK);
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_OK);
    assert_memory_equal(copy, e.dg, e.len); /* the input is never written */
    assert_int_equal(aftp_protect_check(&e.server, 7), AFTP_ERR_REPLAY);
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_ERR_REPLAY);
    /* A forged packet (one bit of the tag) does not open and does not
     * take its packet number: the genuine one still opens after it. */
    client_seals(&e, 8);
    e.dg[e.len - 1] ^= 1;
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_ERR_AUTH);
    e.dg[e.len - 1] ^= 1;
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_OK);
    client_seals(&e, 9);
    assert_int_equal(server_opens(&e, e.dg, AFTP_WIRE_HEADER_LEN + 3), AFTP_ERR_TRUNCATED);
    assert_int_equal(e.client.key_updates + e.server.key_updates, 0);
    ends_free(&e);
}

/* Update every 4 packets: the KEY_PHASE flips each time, the receiver
 * follows, and a packet sealed just before an update still opens when it
 * arrives after the first packet of the new key. */
static void test_key_updates_followed(void **state)
{
    (void)state;
    ends e;
    uint8_t late[sizeof e.dg];
    size_t late_len = 0;
    ends_start(&e, 4);
    for (uint64_t pn = 0; pn < 20; pn++) {
        client_seals(&e, pn);
        unsigned phase = (e.dg[3] & AFTP_WIRE_FLAG_KEY_PHASE) != 0;
        assert_int_equal(phase, (pn / 4) & 1);
        if (pn == 11) { /* held back past the update at 12 */
            memcpy(late, e.dg, e.len);
            late_len = e.len;
            continue;
        }
        assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_OK);
        if (pn == 12)
            assert_int_equal(server_opens(&e, late, late_len), AFTP_OK);
    }
    assert_int_equal(e.client.key_updates, 4);
    assert_int_equal(e.server.key_updates, 4);
    ends_free(&e);
}

/* A forged packet of the other phase must not move the receiver to the
 * next key. */
static void test_forged_phase_moves_nothing(void **state)
{
    (void)state;
    ends e;
    ends_start(&e, 0);
    client_seals(&e, 1);
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_OK);
    client_seals(&e, 2);
    e.dg[3] ^= AFTP_WIRE_FLAG_KEY_PHASE;
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_ERR_AUTH);
    assert_int_equal(e.server.key_updates, 0);
    e.dg[3] ^= AFTP_WIRE_FLAG_KEY_PHASE;
    assert_int_equal(server_opens(&e, e.dg, e.len), AFTP_OK);
    ends_free(&e);
}

static void test_limits(void **state)
{
    (void)state;
    aftp_protect p;
    aftp_protect_init(&p);
    uint8_t dg[64] = {0};
    size_t n;
    assert_int_equal(aftp_protect_seal_datagram(&p, dg, 16, 16, sizeof dg, &n),
                     AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_protect_overhead(&p), 0);
    ends e;
    ends_start(&e, UINT64_MAX); /* capped at the hard limit */
    assert_int_equal(e.client.update_packets, AFTP_HS_KEY_MAX_PACKETS);
    ends_free(&e);
    ends_start(&e, 0);
    assert_int_equal(e.client.update_packets, AFTP_HS_KEY_UPDATE_PACKETS);
    ends_free(&e);
    aftp_protect_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_open_and_replay),
        cmocka_unit_test(test_key_updates_followed),
        cmocka_unit_test(test_forged_phase_moves_nothing),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
