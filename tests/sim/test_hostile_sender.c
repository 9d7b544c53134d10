/* A scripted sender that breaks the rules the spec sets on offers, cipher
 * lists and packet types (sections 6.2.1, 9.2, 9.6, 14.2.5), against the
 * receiver engine: each gets the answer the spec gives it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_digest.h"
#include "sim_run.h"
#include "sim_script.h"

#define BLOCK 1000u

static void assert_protocol_close(const sim_script *g, const char *reason)
{
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(g->out.u.close.error, AFTP_WIRE_ERR_PROTOCOL);
    assert_int_equal(g->out.u.close.reason_len, strlen(reason));
    assert_memory_equal(g->out.u.close.reason, reason, strlen(reason));
    assert_int_equal(aftp_receiver_state(g->r), AFTP_STATE_CLOSING);
}

/* Section 9.6: file id 0 is reserved; offering it breaks the protocol,
 * and nothing is opened. */
static void test_file_id_zero_closes(void **state)
{
    (void)state;
    sim_script g;
    sim_script_start(&g, 3000, NULL);
    const uint8_t none = AFTP_WIRE_CIPHER_NONE;
    assert_int_equal(sim_script_hello(&g, &none, 1), AFTP_OK);
    assert_true(sim_script_next(&g));
    assert_int_equal(sim_script_offer(&g, 0, BLOCK), AFTP_ERR_MALFORMED);
    assert_true(sim_script_next(&g));
    assert_protocol_close(&g, "the sender offered file id 0, which is reserved");
    assert_int_equal(g.side.ev.file_start, 0);
    assert_int_equal(g.st.files[0].opened, 0);
    sim_script_free(&g);
}

/* Section 9.6: a new id while a file is open breaks the protocol; the
 * open file is discarded. */
static void test_new_offer_while_open_closes(void **state)
{
    (void)state;
    sim_script g;
    sim_script_start(&g, 3000, NULL);
    assert_int_equal(sim_script_connect_and_offer(&g, BLOCK), AFTP_WIRE_ERR_NONE);
    assert_int_equal(sim_script_offer(&g, 2, BLOCK), AFTP_ERR_MALFORMED);
    assert_true(sim_script_next(&g));
    assert_protocol_close(&g, "the sender offered a new file before the open one ended");
    assert_int_equal(g.st.files[0].receiver_closed, 1);
    assert_int_equal(g.st.files[0].committed, 0);
    sim_script_free(&g);
}

/* Every block and a FILE_DONE with the file's true digest. */
static void deliver_whole_file(sim_script *g)
{
    const sim_file *f = &g->st.files[0];
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done = (aftp_wire_file_done){.file_id = 1, .block_count = 3};
    aftp_digest *d;
    assert_int_equal(aftp_digest_new(&d), AFTP_OK);
    aftp_digest_update(d, f->src, f->size);
    aftp_digest_final(d, p.u.file_done.digest);
    aftp_digest_del(d);
    for (uint64_t b = 0; b < 3; b++)
        assert_int_equal(sim_script_data(g, b, BLOCK), AFTP_OK);
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
}

/* Section 9.6: a repeat of the last offer gets the same FILE_REPLY while
 * its file is open, and is a late duplicate once its FILE_RESULT went
 * out: dropped, never answered with a reply for a file that has ended. */
static void test_reoffer_after_result_dropped(void **state)
{
    (void)state;
    sim_script g;
    aftp_stats st;
    sim_script_start(&g, 3000, NULL);
    assert_int_equal(sim_script_connect_and_offer(&g, BLOCK), AFTP_WIRE_ERR_NONE);
    assert_int_equal(sim_script_offer(&g, 1, BLOCK), AFTP_OK);
    assert_true(sim_script_next(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FILE_REPLY);
    deliver_whole_file(&g);
    sim_script_tick(&g); /* the read-back */
    int result = 0;
    while (!result && sim_script_next(&g))
        result = g.out.hdr.type == AFTP_WIRE_FILE_RESULT;
    assert_true(result);
    assert_int_equal(g.out.u.file_result.error, AFTP_WIRE_ERR_NONE);
    assert_true(sim_file_intact(&g.st, 1));
    aftp_receiver_get_stats(g.r, &st);
    uint64_t dropped = st.packets_dropped;
    assert_int_equal(sim_script_offer(&g, 1, BLOCK), AFTP_OK);
    assert_false(sim_script_next(&g));
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.packets_dropped, dropped + 1);
    assert_int_equal(g.side.ev.file_start, 1);
    sim_script_free(&g);
}

static void protected_receiver(aftp_receiver_settings *s)
{
    s->security.cipher = AFTP_CIPHER_AUTO;
}

/* Sections 6.2.1, 14.2.5: a list with NONE in it is an unprotected offer,
 * whatever else it lists; a protected server refuses it in clear and runs
 * no handshake. */
static void test_none_next_to_real_cipher_refused(void **state)
{
    (void)state;
    static const uint8_t lists[2][2] = {
        {AFTP_WIRE_CIPHER_NONE, AFTP_WIRE_CIPHER_CHACHA20POLY1305},
        {AFTP_WIRE_CIPHER_CHACHA20POLY1305, AFTP_WIRE_CIPHER_NONE},
    };
    for (int i = 0; i < 2; i++) {
        sim_script g;
        sim_script_start(&g, 3000, protected_receiver);
        assert_int_equal(sim_script_hello(&g, lists[i], 2), AFTP_ERR_MALFORMED);
        assert_true(sim_script_next(&g));
        assert_protocol_close(&g, "unprotected transfers are not enabled on this server");
        assert_int_equal(g.out.hdr.conn_id, SIM_SCRIPT_CLIENT_ID);
        sim_script_free(&g);
    }
    /* A server that runs unprotected takes such a list as the unprotected
     * offer it is. */
    sim_script g;
    sim_script_start(&g, 3000, NULL);
    assert_int_equal(sim_script_hello(&g, lists[1], 2), AFTP_OK);
    assert_true(sim_script_next(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_HELLO_ACK);
    assert_int_equal(g.out.u.hello_ack.cipher, AFTP_WIRE_CIPHER_NONE);
    sim_script_free(&g);
}

/* Packets of the types only a server sends, each valid and carrying the
 * server's id. */
static void send_server_only_types(sim_script *g)
{
    static const uint8_t token[1] = {7};
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = SIM_SCRIPT_SERVER_ID,
                                          .max_datagram = 1452};
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_HELLO_ACK), AFTP_OK);
    memset(&p, 0, sizeof p);
    p.u.file_reply.file_id = 1;
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_FILE_REPLY), AFTP_OK);
    memset(&p, 0, sizeof p);
    p.u.feedback.file_id = 1;
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_FEEDBACK), AFTP_OK);
    memset(&p, 0, sizeof p);
    p.u.file_result.file_id = 1;
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_FILE_RESULT), AFTP_OK);
    memset(&p, 0, sizeof p);
    p.u.retry = (aftp_wire_retry){.token_len = 1, .token = token};
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_RETRY), AFTP_OK);
    memset(&p, 0, sizeof p);
    assert_int_equal(sim_script_send(g, &p, AFTP_WIRE_SERVER_KEY), AFTP_OK);
}

/* Section 9.2 step 3: a server drops the types only a server sends
 * (HELLO_ACK, FILE_REPLY, FEEDBACK, FILE_RESULT, RETRY, SERVER_KEY) at the
 * header: they neither validate the client's address nor count as its
 * packets. */
static void test_server_only_types_dropped(void **state)
{
    (void)state;
    sim_script g;
    aftp_stats st;
    sim_script_start(&g, 3000, NULL);
    const uint8_t none = AFTP_WIRE_CIPHER_NONE;
    assert_int_equal(sim_script_hello(&g, &none, 1), AFTP_OK);
    assert_true(sim_script_next(&g));
    uint64_t idle_expiry = aftp_receiver_expiry(g.r);
    g.clock += SIM_S;
    send_server_only_types(&g);
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.packets_dropped, 6);
    assert_int_equal(st.packets_received, 1); /* the HELLO */
    assert_int_equal(g.side.ev.connected, 0);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_HANDSHAKE);
    assert_int_equal(aftp_receiver_expiry(g.r), idle_expiry);
    assert_false(sim_script_next(&g));
    sim_script_free(&g);
}

/* Section 9.6: the engine's one limit on an offer (a block must fit the
 * session's datagram) is refused with LIMIT, and the receiver's FILE_END
 * says which limit and which value hit it. */
static void test_limit_refusal_names_figures(void **state)
{
    (void)state;
    sim_script g;
    sim_script_start(&g, 30000, NULL);
    assert_int_equal(sim_script_connect_and_offer(&g, 8192), AFTP_WIRE_ERR_LIMIT);
    assert_int_equal(g.side.ev.file_end, 1);
    assert_int_equal(g.side.ev.last_file_error, AFTP_ERR_LIMIT);
    assert_string_equal(g.side.ev.file_message,
                        "offer refused: blocks of 8192 bytes need 8236-byte datagrams, above "
                        "this session's limit of 1452 bytes (the smaller max_datagram of the "
                        "two sides); send smaller blocks");
    assert_int_equal(g.st.files[0].opened, 0);
    sim_script_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_id_zero_closes),
        cmocka_unit_test(test_new_offer_while_open_closes),
        cmocka_unit_test(test_reoffer_after_result_dropped),
        cmocka_unit_test(test_none_next_to_real_cipher_refused),
        cmocka_unit_test(test_server_only_types_dropped),
        cmocka_unit_test(test_limit_refusal_names_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
