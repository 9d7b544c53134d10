/*
 * Fuzz harness for the handshake message readers (common/aftp_handshake.h):
 * aftp_handshake_read_init on the server side and
 * aftp_handshake_read_response on the client side, with fixed identities
 * and scripted randomness so every run is repeatable.
 *
 * Input: byte 0 chooses the reader (even: message 1 to a fresh responder;
 * odd: message 2 to an initiator that has just sent the genuine message 1);
 * the rest is the message.
 *
 * Properties:
 *  - a message is accepted exactly when it is the genuine one: nothing
 *    else authenticates (no forgery), nothing crashes or reads past it;
 *  - an accepted message gives the genuine payload and, for message 2,
 *    the traffic secret the responder derived;
 *  - a rejected message leaves the handshake dead: no keys, and every
 *    later step is refused.
 */
#include "fuzz_harness.h"

#include "../crypto/crypto_fixtures.h"

enum { KEY = AFTP_HS_KEY_LEN };

static const uint64_t NOW = UINT64_C(1767225600000000000);
static const uint8_t offer[] = "fuzz offer";
static const uint8_t answer[] = "fuzz answer";

typedef struct genuine {
    uint8_t client_secret[KEY], client_public[KEY];
    uint8_t server_secret[KEY], server_public[KEY];
    uint8_t msg1[AFTP_HS_MAX_INIT], msg2[AFTP_HS_MAX_RESPONSE];
    size_t len1, len2;
    uint8_t secret_i2r[KEY];
} genuine;

/* Both parties, freshly made: the same keys and random bytes every time. */
typedef struct parties {
    policy pol;
    aftp_hs_peers peers;
    fixed_random client_rng, server_rng;
    aftp_handshake *client, *server;
} parties;

static void parties_new(const genuine *g, parties *p)
{
    memset(p, 0, sizeof *p);
    policy_admit(&p->pol, g->client_public, NULL);
    p->peers = policy_peers(&p->pol);
    p->client_rng.fill = 0x40;
    p->server_rng.fill = 0x80;
    aftp_hs_config c = {AFTP_HS_INITIATOR, g->client_secret, g->server_public, NULL, NULL,
                        NULL, 0, fixed_random_fn, &p->client_rng};
    aftp_hs_config s = {AFTP_HS_RESPONDER, g->server_secret, NULL, NULL, &p->peers,
                        NULL, 0, fixed_random_fn, &p->server_rng};
    FUZZ_CHECK(aftp_handshake_new(&p->client, &c) == AFTP_OK);
    FUZZ_CHECK(aftp_handshake_new(&p->server, &s) == AFTP_OK);
}

static void parties_del(parties *p)
{
    aftp_handshake_del(p->client);
    aftp_handshake_del(p->server);
}

/* The client writes message 1; it must be the genuine one (determinism). */
static void send_init(const genuine *g, parties *p)
{
    uint8_t msg[AFTP_HS_MAX_INIT];
    size_t len;
    FUZZ_CHECK(aftp_handshake_write_init(p->client, NOW, offer, sizeof offer, msg, sizeof msg,
                                         &len) == AFTP_OK);
    FUZZ_CHECK(len == g->len1 && memcmp(msg, g->msg1, len) == 0);
}

static const genuine *genuine_run(void)
{
    static genuine g;
    static int made;
    if (made)
        return &g;
    memset(g.client_secret, 0x11, KEY);
    memset(g.server_secret, 0x22, KEY);
    FUZZ_CHECK(aftp_hs_public_key(g.client_secret, g.client_public) == AFTP_OK);
    FUZZ_CHECK(aftp_hs_public_key(g.server_secret, g.server_public) == AFTP_OK);
    parties p;
    uint8_t payload[AFTP_HS_MAX_PAYLOAD];
    size_t len;
    g.len1 = 0;
    parties_new(&g, &p);
    FUZZ_CHECK(aftp_handshake_write_init(p.client, NOW, offer, sizeof offer, g.msg1,
                                         sizeof g.msg1, &g.len1) == AFTP_OK);
    FUZZ_CHECK(aftp_handshake_read_init(p.server, g.msg1, g.len1, payload, sizeof payload,
                                        &len) == AFTP_OK);
    FUZZ_CHECK(aftp_handshake_write_response(p.server, answer, sizeof answer, g.msg2,
                                             sizeof g.msg2, &g.len2) == AFTP_OK);
    uint64_t gen;
    FUZZ_CHECK(aftp_handshake_secret(p.server, AFTP_HS_RECV, g.secret_i2r, &gen) == AFTP_OK);
    parties_del(&p);
    made = 1;
    return &g;
}

static void check_dead(aftp_handshake *hs)
{
    uint8_t secret[KEY];
    uint64_t gen;
    aftp_aead *a = NULL;
    FUZZ_CHECK(!aftp_handshake_done(hs));
    FUZZ_CHECK(aftp_handshake_secret(hs, AFTP_HS_SEND, secret, &gen) == AFTP_ERR_INVALID_STATE);
    FUZZ_CHECK(aftp_handshake_aead(hs, AFTP_HS_RECV, AFTP_WIRE_CIPHER_NONE, &a) ==
               AFTP_ERR_INVALID_STATE);
    FUZZ_CHECK(a == NULL);
}

static int is_genuine(const uint8_t *msg, size_t len, const uint8_t *want, size_t want_len)
{
    return len == want_len && memcmp(msg, want, len) == 0;
}

static void fuzz_init(const genuine *g, parties *p, const uint8_t *msg, size_t len)
{
    uint8_t payload[AFTP_HS_MAX_PAYLOAD];
    size_t plen = 0;
    int rc = aftp_handshake_read_init(p->server, msg, len, payload, sizeof payload, &plen);
    FUZZ_CHECK((rc == AFTP_OK) == is_genuine(msg, len, g->msg1, g->len1));
    if (rc == AFTP_OK)
        FUZZ_CHECK(plen == sizeof offer && memcmp(payload, offer, plen) == 0);
    else
        check_dead(p->server);
}

static void fuzz_response(const genuine *g, parties *p, const uint8_t *msg, size_t len)
{
    uint8_t payload[AFTP_HS_MAX_PAYLOAD], secret[KEY];
    size_t plen = 0;
    uint64_t gen;
    send_init(g, p);
    int rc = aftp_handshake_read_response(p->client, msg, len, payload, sizeof payload, &plen);
    FUZZ_CHECK((rc == AFTP_OK) == is_genuine(msg, len, g->msg2, g->len2));
    if (rc != AFTP_OK) {
        check_dead(p->client);
        return;
    }
    FUZZ_CHECK(plen == sizeof answer && memcmp(payload, answer, plen) == 0);
    FUZZ_CHECK(aftp_handshake_secret(p->client, AFTP_HS_SEND, secret, &gen) == AFTP_OK);
    FUZZ_CHECK(memcmp(secret, g->secret_i2r, KEY) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const genuine *g = genuine_run();
    parties p;
    parties_new(g, &p);
    if (data[0] % 2 == 0)
        fuzz_init(g, &p, data + 1, size - 1);
    else
        fuzz_response(g, &p, data + 1, size - 1);
    parties_del(&p);
    return 0;
}
