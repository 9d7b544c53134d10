/*
 * Fuzz harness for early entries and a pull's early request (spec
 * 12.3.4): message 1's application payload as the server reads it. The
 * input is that payload; a real client (common/aftp_hello_client) puts it
 * into message 1 of a protected pipelined push's HELLO and of a pull's, a
 * real server end (common/aftp_hello_server) admits each HELLO, decides
 * whether it takes the entries (push) or the request (pull) and answers,
 * and the client reads the HELLO_ACK. Fixed keys and randomness:
 * repeatable.
 *
 * Properties:
 *  - aftp_wire_early_entries_decode never reads past the payload; what it
 *    accepts is a run of valid records that encodes back to the same bytes;
 *  - the server takes the entries exactly when they decode, start the
 *    stream (entry 1, block 0) and fit the window, and then hands back the
 *    payload's own records;
 *  - aftp_wire_early_request_decode likewise: its paths lie inside the
 *    payload, as many as it counts, and encode back to the same bytes;
 *    a pull's server takes the request exactly when it decodes;
 *  - the client accepts the HELLO_ACK, and it says EARLY_ENTRIES exactly
 *    when the server took them;
 *  - a payload longer than message 1 holds (256 bytes) is not taken by the
 *    client at all.
 */
#include <string.h>

#include "common/aftp_hello_client.h"
#include "common/aftp_hello_server.h"
#include "fuzz_harness.h"

#define CLIENT_ID 0x11223344u
#define SERVER_ID 0x55667788u
#define MAX_DGRAM 1452u
#define WINDOW 4u
#define NOW UINT64_C(1767225600000000000)

static uint8_t client_secret[AFTP_KEY_LEN], client_public[AFTP_KEY_LEN];
static uint8_t server_secret[AFTP_KEY_LEN], server_public[AFTP_KEY_LEN];

static void fixed_bytes(void *user, uint8_t *buf, size_t len)
{
    (void)user;
    memset(buf, 0x5A, len);
}

static int admit_client(void *user, const uint8_t *client_key, uint8_t *psk)
{
    (void)user;
    if (memcmp(client_key, client_public, AFTP_KEY_LEN) != 0)
        return AFTP_ERR_UNKNOWN_PEER;
    memset(psk, 0, AFTP_KEY_LEN);
    return AFTP_OK;
}

static void keys_once(void)
{
    static int made;
    if (made)
        return;
    memset(client_secret, 0x11, sizeof client_secret);
    memset(server_secret, 0x22, sizeof server_secret);
    FUZZ_CHECK(aftp_hs_public_key(client_secret, client_public) == AFTP_OK);
    FUZZ_CHECK(aftp_hs_public_key(server_secret, server_public) == AFTP_OK);
    made = 1;
}

/* What the server must decide for this payload, from the decoder alone. */
static int takeable(uint8_t role, const uint8_t *data, size_t size)
{
    aftp_wire_pull_request q;
    if (role == AFTP_WIRE_ROLE_PULL)
        return aftp_wire_early_request_decode(data, size, &q) == AFTP_OK;
    aftp_wire_entries en;
    aftp_wire_record_iter it;
    aftp_wire_entry first;
    if (aftp_wire_early_entries_decode(data, size, &en) != AFTP_OK || en.count > WINDOW)
        return 0;
    aftp_wire_entries_iter_init(&it, &en);
    return aftp_wire_entries_next(&it, &first) && first.entry_id == 1 && first.base_block == 0;
}

/* The decoder alone: inside the input, valid records, the same bytes back. */
static void check_decoder(const uint8_t *data, size_t size)
{
    aftp_wire_entries en;
    aftp_wire_record_iter it;
    aftp_wire_entry e;
    uint8_t again[AFTP_HS_MAX_PAYLOAD];
    size_t len = 0;
    uint16_t n = 0;
    if (aftp_wire_early_entries_decode(data, size, &en) != AFTP_OK)
        return;
    FUZZ_CHECK(fuzz_inside(data, size, en.record_bytes, en.record_bytes_len));
    aftp_wire_entries_iter_init(&it, &en);
    while (aftp_wire_entries_next(&it, &e))
        n++;
    FUZZ_CHECK(n == en.count);
    if (size <= sizeof again) {
        FUZZ_CHECK(aftp_wire_early_entries_encode(&en, again, sizeof again, &len) == AFTP_OK);
        FUZZ_CHECK(len == size && memcmp(again, data, size) == 0);
    }
}

/* The request decoder alone: paths inside, as many as counted, the same
 * bytes back. */
static void check_request_decoder(const uint8_t *data, size_t size)
{
    aftp_wire_pull_request q;
    aftp_wire_record_iter it;
    aftp_wire_path path;
    uint8_t again[AFTP_HS_MAX_PAYLOAD];
    size_t len = 0;
    uint16_t n = 0;
    if (aftp_wire_early_request_decode(data, size, &q) != AFTP_OK)
        return;
    FUZZ_CHECK(fuzz_inside(data, size, q.path_bytes, q.path_bytes_len));
    aftp_wire_pull_paths_iter_init(&it, &q);
    while (aftp_wire_pull_paths_next(&it, &path))
        n++;
    FUZZ_CHECK(n == q.path_count);
    if (size <= sizeof again) {
        FUZZ_CHECK(aftp_wire_early_request_encode(&q, again, sizeof again, &len) == AFTP_OK);
        FUZZ_CHECK(len == size && memcmp(again, data, size) == 0);
    }
}

/* What the server took, checked against the payload: AFTP_OK when taken. */
static int server_takes(const aftp_hello_server *h, const uint8_t *data, size_t size)
{
    aftp_wire_entries en;
    aftp_wire_pull_request q;
    if (h->role == AFTP_WIRE_ROLE_PULL) {
        int rc = aftp_hello_server_early_request(h, &q);
        if (rc == AFTP_OK)
            FUZZ_CHECK(q.path_bytes_len + AFTP_WIRE_PULL_REQUEST_FIXED == size &&
                       memcmp(q.path_bytes, data + AFTP_WIRE_PULL_REQUEST_FIXED,
                              q.path_bytes_len) == 0);
        return rc;
    }
    int rc = aftp_hello_server_early(h, &en);
    if (rc == AFTP_OK)
        FUZZ_CHECK(en.record_bytes_len + 2 == size &&
                   memcmp(en.record_bytes, data + 2, en.record_bytes_len) == 0);
    return rc;
}

/* The client's HELLO with the payload in message 1; 0 when the client
 * does not take the payload (too long). */
static int client_hello(aftp_hello_client *c, aftp_session *cs, uint8_t role,
                        const uint8_t *data, size_t size, uint8_t *dg_buf, size_t *dg_len)
{
    aftp_security_settings sec = {.cipher = AFTP_CIPHER_AUTO, .identity = client_secret,
                                  .peer_key = server_public, .unix_time_ns = NOW,
                                  .random = fixed_bytes};
    aftp_datagram dg;
    FUZZ_CHECK(aftp_hello_client_init(c, cs, &sec, role, WINDOW) == AFTP_OK);
    int taken = aftp_hello_client_set_early(c, data, size);
    FUZZ_CHECK(taken == (size <= AFTP_HS_MAX_PAYLOAD));
    if (!taken)
        return 0;
    FUZZ_CHECK(aftp_hello_client_encode(c, cs, dg_buf, MAX_DGRAM, &dg) == AFTP_OK);
    FUZZ_CHECK(dg.payload == NULL && dg.head_len <= MAX_DGRAM);
    memcpy(dg_buf, dg.head, dg.head_len);
    *dg_len = dg.head_len;
    return 1;
}

/* The server: admits the HELLO, takes the entries or the request when it
 * can, answers. Returns whether it took them; the HELLO_ACK in ack. */
static int server_answer(aftp_session *ss, uint8_t role, const uint8_t *hello, size_t hello_len,
                         const uint8_t *data, size_t size, uint8_t *ack, size_t *ack_len)
{
    aftp_security_settings sec = {.cipher = AFTP_CIPHER_AUTO, .identity = server_secret,
                                  .peers = {.lookup = admit_client}, .random = fixed_bytes};
    aftp_hello_server h;
    aftp_wire_packet p;
    aftp_datagram dg;
    FUZZ_CHECK(aftp_hello_server_init(&h, &sec, role, WINDOW) == AFTP_OK);
    FUZZ_CHECK(aftp_wire_decode(hello, hello_len, &p) == AFTP_OK);
    FUZZ_CHECK(aftp_hello_server_hello(&h, ss, &p, 0) == AFTP_HELLO_ADMITTED);
    FUZZ_CHECK(h.window == WINDOW);
    int taken = server_takes(&h, data, size) == AFTP_OK;
    FUZZ_CHECK(taken == takeable(role, data, size));
    h.early_taken = taken;
    FUZZ_CHECK(aftp_hello_server_answer(&h, ss) == AFTP_OK);
    FUZZ_CHECK(aftp_hello_server_encode(&h, ss, ack, MAX_DGRAM, &dg) == AFTP_OK);
    memcpy(ack, dg.head, dg.head_len);
    *ack_len = dg.head_len;
    aftp_hello_server_free(&h);
    return taken;
}

static void check_round_trip(uint8_t role, const uint8_t *data, size_t size)
{
    aftp_session cs, ss;
    aftp_hello_client c;
    aftp_hello_grant grant;
    aftp_wire_packet p;
    uint8_t hello[MAX_DGRAM], ack[MAX_DGRAM];
    size_t hello_len = 0, ack_len = 0;
    int violation = 0;
    FUZZ_CHECK(aftp_session_init(&cs, CLIENT_ID, MAX_DGRAM, 0, NULL, NULL, 0) == AFTP_OK);
    FUZZ_CHECK(aftp_session_init(&ss, SERVER_ID, MAX_DGRAM, 0, NULL, NULL, 0) == AFTP_OK);
    cs.peer_id = CLIENT_ID; /* a HELLO carries the client's own id (spec 9.3) */
    if (client_hello(&c, &cs, role, data, size, hello, &hello_len)) {
        int taken = server_answer(&ss, role, hello, hello_len, data, size, ack, &ack_len);
        FUZZ_CHECK(aftp_wire_decode(ack, ack_len, &p) == AFTP_OK);
        FUZZ_CHECK(aftp_hello_client_ack(&c, &cs, &p.u.hello_ack, &grant, &violation) == AFTP_OK);
        FUZZ_CHECK(grant.window == WINDOW && grant.early_entries == taken);
    }
    aftp_hello_client_free(&c);
    aftp_session_free(&cs);
    aftp_session_free(&ss);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    keys_once();
    check_decoder(data, size);
    check_request_decoder(data, size);
    if (size > 0) {
        check_round_trip(AFTP_WIRE_ROLE_PUSH, data, size);
        check_round_trip(AFTP_WIRE_ROLE_PULL, data, size);
    }
    return 0;
}
