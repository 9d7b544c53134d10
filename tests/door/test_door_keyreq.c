/* The client side of the key request (door/aftp_keyreq.h), sans-I/O: the
 * request's form, which answers it takes (the door's SERVER_KEY for its
 * id, nothing else), and its resend schedule on a virtual clock. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "door/aftp_door.h"
#include "door/aftp_keyreq.h"

static const uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN] = {
    0x8f, 0x40, 0xc5, 0xad, 0xb6, 0x8f, 0x25, 0x62, 0x4a, 0xe5, 0xb2, 0x14, 0xea, 0x76, 0x7a, 0x6e,
    0xc9, 0x4d, 0x82, 0x9d, 0x3d, 0x7b, 0x5e, 0x1a, 0xd1, 0xba, 0x6f, 0x3e, 0x21, 0x38, 0x28, 0x5f};

/* The request is a full-size HELLO with an empty KEY_REQUEST and no
 * HANDSHAKE: nothing a server could start a session with. */
static void test_request_form(void **state)
{
    (void)state;
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    size_t len = 0;
    assert_int_equal(aftp_keyreq_encode(0x1234abcdu, 1452, buf, sizeof buf, &len), AFTP_OK);
    assert_int_equal(len, AFTP_WIRE_HELLO_MIN_LEN);
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(buf, len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_HELLO);
    assert_int_equal(p.hdr.conn_id, 0x1234abcdu);
    assert_int_equal(p.u.hello.max_datagram, 1452);
    const uint8_t *value;
    uint16_t value_len = 99;
    assert_int_equal(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len,
                                        AFTP_WIRE_EXT_KEY_REQUEST, &value, &value_len),
                     1);
    assert_int_equal(value_len, 0);
    assert_int_equal(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len, AFTP_WIRE_EXT_HANDSHAKE,
                                        &value, &value_len),
                     0);
    /* a buffer one byte short is refused */
    assert_int_not_equal(aftp_keyreq_encode(1, 1452, buf, AFTP_WIRE_HELLO_MIN_LEN - 1, &len),
                         AFTP_OK);
}

/* The door's answer to our request is taken, for our id only; other
 * packets are not answers. */
static void test_answer_matching(void **state)
{
    (void)state;
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN], retry_buf[64];
    size_t retry_len;
    aftp_keyreq k;
    aftp_door d;
    aftp_door_verdict v;
    aftp_door_settings set = {.server_key = server_key};
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(4000),
                               .sin_addr.s_addr = htonl(0x7f000001u)};
    assert_int_equal(aftp_door_init(&d, &set, 0), AFTP_OK);
    assert_int_equal(aftp_keyreq_init(&k, 77, 1452, 4, 1000), AFTP_OK);
    assert_int_equal(aftp_door_input(&d, k.req, k.req_len, (struct sockaddr *)&from, 0, 0, &v),
                     AFTP_DOOR_REPLY);
    memset(key, 0xee, sizeof key);
    assert_int_equal(aftp_keyreq_answer(78, v.reply, v.reply_len, key), 0);
    assert_int_equal(aftp_keyreq_answer(77, v.reply, v.reply_len - 1, key), 0);
    assert_int_equal(aftp_keyreq_answer(77, k.req, k.req_len, key), 0); /* a HELLO */
    for (size_t i = 0; i < sizeof key; i++)
        assert_int_equal(key[i], 0xee);
    assert_int_equal(aftp_keyreq_answer(77, v.reply, v.reply_len, key), 1);
    assert_memory_equal(key, server_key, sizeof key);
    /* a RETRY for our id is no key */
    aftp_wire_packet retry;
    memset(&retry, 0, sizeof retry);
    retry.hdr = (aftp_wire_header){AFTP_WIRE_VERSION, AFTP_WIRE_RETRY, 0, 77, 0};
    retry.u.retry = (aftp_wire_retry){1, key};
    assert_int_equal(aftp_wire_encode(&retry, retry_buf, sizeof retry_buf, &retry_len), AFTP_OK);
    assert_int_equal(aftp_keyreq_answer(77, retry_buf, retry_len, key), 0);
    aftp_door_fini(&d);
}

/* The request is due at once, then every interval_ns until `attempts`
 * were sent; once the last went unanswered for interval_ns, the end. */
static void test_schedule_on_a_virtual_clock(void **state)
{
    (void)state;
    const uint64_t sec = 1000000000u, t0 = 5 * sec;
    aftp_keyreq k;
    assert_int_equal(aftp_keyreq_init(&k, 9, 1452, 3, sec), AFTP_OK);
    assert_int_equal(aftp_keyreq_due(&k, t0), 1);
    assert_int_equal(aftp_keyreq_due(&k, t0), 0);
    assert_int_equal(aftp_keyreq_due(&k, t0 + sec - 1), 0);
    assert_int_equal(k.next_send_ns, t0 + sec);
    assert_int_equal(aftp_keyreq_due(&k, t0 + sec), 1);
    assert_int_equal(aftp_keyreq_due(&k, t0 + 2 * sec + 5), 1); /* a late turn: sent then */
    assert_int_equal(k.next_send_ns, t0 + 3 * sec + 5);
    assert_int_equal(aftp_keyreq_due(&k, t0 + 3 * sec), 0);
    assert_int_equal(aftp_keyreq_due(&k, t0 + 3 * sec + 5), AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(k.sent, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_form),
        cmocka_unit_test(test_answer_matching),
        cmocka_unit_test(test_schedule_on_a_virtual_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
