/* The engines' input path, packet by packet: bad input is dropped and
 * counted, the handshake rules (version negotiation, role, cipher,
 * amplification), DATA checks and FEEDBACK contents, argument checks.
 * The packets are built here in clear, so these engines run unprotected
 * (cipher NONE on both sides); test_security.c covers protected input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_digest.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"
#include "sim_script.h"

#define CLIENT_ID SIM_SCRIPT_CLIENT_ID
#define SERVER_ID SIM_SCRIPT_SERVER_ID

/* The scripted client of sim_script.h, under this file's names. */
typedef sim_script rig;

static void rig_receiver(rig *g, uint64_t file_size)
{
    sim_script_start(g, file_size, NULL);
}

static void rig_free(rig *g)
{
    sim_script_free(g);
}

static int feed(rig *g, aftp_wire_packet *p, uint8_t type)
{
    return sim_script_send(g, p, type);
}

static int next_out(rig *g)
{
    return sim_script_next(g);
}

static int send_hello(rig *g, uint8_t role, uint8_t cipher)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.hello = (aftp_wire_hello){.role = role, .cipher_count = 1, .max_datagram = 1452};
    p.u.hello.ciphers[0] = cipher;
    return feed(g, &p, AFTP_WIRE_HELLO);
}

static void handshake_and_offer(rig *g, uint64_t size, uint32_t block_size)
{
    assert_int_equal(send_hello(g, AFTP_WIRE_ROLE_PUSH, AFTP_WIRE_CIPHER_NONE), AFTP_OK);
    assert_true(next_out(g));
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_HELLO_ACK);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_offer = (aftp_wire_file_offer){.file_id = 1, .size = size, .mode = 0600,
                                            .block_size = block_size, .path_len = 5,
                                            .path = (const uint8_t *)"a/b.c"};
    assert_int_equal(feed(g, &p, AFTP_WIRE_FILE_OFFER), AFTP_OK);
    assert_true(next_out(g));
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_FILE_REPLY);
    assert_int_equal(g->out.u.file_reply.error, AFTP_WIRE_ERR_NONE);
    assert_int_equal(aftp_receiver_state(g->r), AFTP_STATE_TRANSFER);
}

static void feed_data(rig *g, uint64_t block, size_t len)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    static const uint8_t filler[1500];
    sim_file *f = sim_storage_file(&g->st, 1);
    uint64_t off = block * 1000;
    /* The source bytes where they exist, zeros for deliberately bad sizes. */
    const uint8_t *payload = off + len <= f->size ? f->src + off : filler;
    p.u.data = (aftp_wire_data){.file_id = 1, .block = block, .payload_len = (uint16_t)len,
                                .payload = payload};
    assert_int_equal(feed(g, &p, AFTP_WIRE_DATA), AFTP_OK);
}

static void test_garbage_is_dropped(void **state)
{
    (void)state;
    rig g;
    aftp_stats st;
    rig_receiver(&g, 10);
    /* Below 1200 bytes: a long datagram in an unknown version would
     * rightly get VERSION_NEG. */
    uint8_t junk[AFTP_WIRE_HELLO_MIN_LEN - 1];
    uint64_t rng = 5;
    for (size_t len = 0; len < sizeof junk; len += 37) {
        for (size_t i = 0; i < len; i++)
            junk[i] = (uint8_t)sim_rand(&rng);
        assert_int_equal(aftp_receiver_read(g.r, 0, junk, len), AFTP_OK);
    }
    assert_int_equal(aftp_receiver_read(g.r, 0, NULL, 0), AFTP_OK);
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.packets_received, 0);
    assert_int_equal(st.packets_dropped, sizeof junk / 37 + 2);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_HANDSHAKE);
    assert_false(next_out(&g)); /* nothing is ever answered */
    rig_free(&g);
}

/* Only a HELLO can open the session. */
static void test_first_packet_must_be_hello(void **state)
{
    (void)state;
    rig g;
    aftp_stats st;
    rig_receiver(&g, 3000);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done.file_id = 1;
    assert_int_equal(feed(&g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.packets_dropped, 1);
    assert_false(next_out(&g));
    rig_free(&g);
}

/* One VERSION_NEG answerer: the server's front door (door/aftp_door.h,
 * tests/door). The engine, fed a long datagram in a version we do not
 * speak, stays silent and open for the HELLO. */
static void test_version_negotiation_left_to_the_door(void **state)
{
    (void)state;
    rig g;
    rig_receiver(&g, 10);
    uint8_t d[1200];
    memset(d, 0, sizeof d);
    d[0] = 7;           /* a version we do not speak */
    d[1] = AFTP_WIRE_HELLO;
    d[4] = 0xAB;        /* conn id 0xAB000001 */
    d[7] = 0x01;
    d[15] = 42;         /* pn 42 */
    assert_int_equal(aftp_receiver_read(g.r, 0, d, 100), AFTP_OK);
    assert_false(next_out(&g));
    assert_int_equal(aftp_receiver_read(g.r, 0, d, sizeof d), AFTP_OK);
    assert_false(next_out(&g));
    assert_int_not_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSED);
    rig_free(&g);
}

static void expect_protocol_close(uint8_t role, uint8_t cipher, const char *reason)
{
    rig g;
    rig_receiver(&g, 10);
    /* The session fails: read says so. */
    assert_int_equal(send_hello(&g, role, cipher), AFTP_ERR_MALFORMED);
    assert_true(next_out(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(g.out.hdr.conn_id, CLIENT_ID);
    assert_int_equal(g.out.u.close.error, AFTP_WIRE_ERR_PROTOCOL);
    assert_int_equal(g.out.u.close.reason_len, strlen(reason));
    assert_memory_equal(g.out.u.close.reason, reason, strlen(reason));
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSING);
    /* Draining ends after 3 PTOs (2 initial RTTs each before a sample). */
    g.clock = 599 * SIM_MS;
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSING);
    g.clock = 600 * SIM_MS;
    assert_int_equal(aftp_receiver_expiry(g.r), g.clock);
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSED);
    rig_free(&g);
}

static void test_pull_refused(void **state)
{
    (void)state;
    expect_protocol_close(AFTP_WIRE_ROLE_PULL, AFTP_WIRE_CIPHER_NONE, "pull not supported");
}

/* Section 14.2: no fallback; the reason tells the user what to change. */
static void test_cipher_refused(void **state)
{
    (void)state;
    expect_protocol_close(AFTP_WIRE_ROLE_PUSH, AFTP_WIRE_CIPHER_AES256GCM,
                          "server runs without encryption (--cipher none); the client must opt "
                          "in too");
}

/* Repeated HELLOs get the same HELLO_ACK (new pn), and before the client
 * speaks again the server never sends more than 3x what it received. */
static void test_repeated_hello_and_amplification(void **state)
{
    (void)state;
    rig g;
    aftp_stats st;
    rig_receiver(&g, 10);
    uint64_t last_pn = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(send_hello(&g, AFTP_WIRE_ROLE_PUSH, AFTP_WIRE_CIPHER_NONE), AFTP_OK);
        assert_true(next_out(&g));
        assert_int_equal(g.out.hdr.type, AFTP_WIRE_HELLO_ACK);
        assert_int_equal(g.out.u.hello_ack.server_conn_id, SERVER_ID);
        assert_int_equal(g.out.u.hello_ack.max_datagram, 1452);
        assert_true(i == 0 || g.out.hdr.pn > last_pn);
        last_pn = g.out.hdr.pn;
        assert_false(next_out(&g));
        aftp_receiver_get_stats(g.r, &st);
        assert_true(st.wire_bytes_sent <= 3 * st.wire_bytes_received);
    }
    assert_int_equal(g.side.ev.connected, 0);
    rig_free(&g);
}

/* Section 10.7: the closing period counts from the first CLOSE sent. A
 * driver busy elsewhere (a worker thread serving many sessions) that runs
 * the receiver's timers long after it decided to close, before it lets
 * the engine write, still gets that CLOSE out: the peer is told instead
 * of waiting for its idle timeout, and the period ends after the CLOSE. */
static void test_late_driver_still_sends_close(void **state)
{
    (void)state;
    rig g;
    rig_receiver(&g, 1000);
    handshake_and_offer(&g, 1000, 1000);
    aftp_receiver_cancel(g.r, g.clock);
    g.clock += 10 * SIM_S;
    sim_script_tick(&g);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSING);
    assert_true(next_out(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(g.out.u.close.error, AFTP_WIRE_ERR_CANCELLED);
    assert_true(aftp_receiver_expiry(g.r) > g.clock);
    g.clock = aftp_receiver_expiry(g.r);
    sim_script_tick(&g);
    assert_int_equal(aftp_receiver_state(g.r), AFTP_STATE_CLOSED);
    assert_int_equal(aftp_receiver_error(g.r), AFTP_ERR_CANCELLED);
    rig_free(&g);
}

static void test_data_checks_and_feedback(void **state)
{
    (void)state;
    rig g;
    aftp_stats st;
    rig_receiver(&g, 2500); /* blocks of 1000: 1000, 1000, 500 */
    handshake_and_offer(&g, 2500, 1000);
    assert_int_equal(g.side.ev.connected, 1);
    assert_int_equal(g.side.ev.file_start, 1);
    feed_data(&g, 0, 999);  /* wrong length: dropped */
    feed_data(&g, 2, 1000); /* the last block is 500 bytes: dropped */
    feed_data(&g, 3, 500);  /* past the end: dropped */
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.packets_dropped, 3);
    assert_int_equal(st.payload_bytes_received, 0);
    feed_data(&g, 2, 500);
    feed_data(&g, 2, 500); /* duplicate */
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.payload_bytes_received, 500);
    assert_int_equal(st.duplicate_packets, 1);
    assert_int_equal(sim_storage_file(&g.st, 1)->writes[2], 1);
    /* First FEEDBACK at once: block 0 and 1 missing below the highest. */
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_true(next_out(&g));
    aftp_wire_feedback *fb = &g.out.u.feedback;
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FEEDBACK);
    assert_int_equal(fb->cum_block, 0);
    assert_int_equal(fb->scan_start, 0);
    assert_int_equal(fb->scan_end, 3);
    assert_int_equal(fb->blocks_received, 1);
    assert_int_equal(fb->packets_received, 5);
    assert_int_equal(fb->largest_pn, g.pn - 1);
    assert_int_equal(fb->range_count, 1);
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, fb);
    assert_true(aftp_wire_ranges_next(&it, &rg));
    assert_int_equal(rg.start, 0);
    assert_int_equal(rg.len, 2);
    /* The next one waits for the feedback interval. */
    feed_data(&g, 0, 1000);
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_false(next_out(&g));
    assert_int_equal(aftp_receiver_expiry(g.r), g.clock + 10 * SIM_MS);
    rig_free(&g);
}

/* Section 9.11: a sender's CLOSE(NONE) while a file is open discards the
 * file, which then ends with PEER_CLOSED, as the session does. */
static void test_receiver_close_none_mid_file(void **state)
{
    (void)state;
    rig g;
    rig_receiver(&g, 5000);
    handshake_and_offer(&g, 5000, 1000);
    feed_data(&g, 0, 1000);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.close.error = AFTP_WIRE_ERR_NONE;
    assert_int_equal(feed(&g, &p, AFTP_WIRE_CLOSE), AFTP_ERR_PEER_CLOSED);
    assert_int_equal(g.side.ev.last_file_error, AFTP_ERR_PEER_CLOSED);
    assert_int_equal(g.side.ev.closed_error, AFTP_ERR_PEER_CLOSED);
    rig_free(&g);
}

/* FILE_DONE with a block missing: FEEDBACK reports the tail at once. */
static void test_done_reports_tail(void **state)
{
    (void)state;
    rig g;
    rig_receiver(&g, 2500);
    handshake_and_offer(&g, 2500, 1000);
    feed_data(&g, 0, 1000);
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_true(next_out(&g)); /* feedback for block 0 */
    g.clock += 20 * SIM_MS;
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done.file_id = 1;
    p.u.file_done.block_count = 3;
    assert_int_equal(feed(&g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_true(next_out(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FEEDBACK);
    assert_int_equal(g.out.u.feedback.cum_block, 1);
    assert_int_equal(g.out.u.feedback.scan_start, 1);
    assert_int_equal(g.out.u.feedback.scan_end, 3);
    assert_int_equal(g.out.u.feedback.range_count, 1);
    rig_free(&g);
}

static void feed_file_done(rig *g, uint64_t block_count, const uint8_t *digest)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done.file_id = 1;
    p.u.file_done.block_count = block_count;
    memcpy(p.u.file_done.digest, digest, AFTP_DIGEST_LEN);
    assert_int_equal(feed(g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
}

/* Section 9.10: verification reads the file back one step per expiry,
 * nothing inside read; a FILE_DONE repeated meanwhile is answered with a
 * FEEDBACK showing every block held, and the result comes after the last
 * step. */
static void test_verification_steps_and_answers(void **state)
{
    (void)state;
    rig g;
    const uint64_t blocks = AFTP_RECEIVER_VERIFY_STEP / 1000 + 3, size = blocks * 1000 - 500;
    rig_receiver(&g, size);
    handshake_and_offer(&g, size, 1000);
    for (uint64_t b = 0; b < blocks; b++)
        feed_data(&g, b, b + 1 < blocks ? 1000 : 500);
    while (next_out(&g))
        assert_int_equal(g.out.hdr.type, AFTP_WIRE_FEEDBACK);
    uint8_t digest[AFTP_DIGEST_LEN];
    aftp_digest *d;
    assert_int_equal(aftp_digest_new(&d), AFTP_OK);
    aftp_digest_update(d, sim_storage_file(&g.st, 1)->src, size);
    aftp_digest_final(d, digest);
    aftp_digest_del(d);

    feed_file_done(&g, blocks, digest);
    assert_int_equal(g.st.receiver_view_bytes, 0);
    assert_int_equal(aftp_receiver_expiry(g.r), g.clock); /* a step is due now */
    g.clock += 2 * SIM_MS;
    feed_file_done(&g, blocks, digest);
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_int_equal(g.st.receiver_view_bytes, AFTP_RECEIVER_VERIFY_STEP);
    assert_true(next_out(&g));
    const aftp_wire_feedback *fb = &g.out.u.feedback;
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FEEDBACK);
    assert_int_equal(fb->cum_block, blocks);
    assert_int_equal(fb->scan_start, blocks);
    assert_int_equal(fb->scan_end, blocks);
    assert_int_equal(fb->range_count, 0);
    assert_int_equal(fb->blocks_received, blocks);
    assert_false(next_out(&g)); /* no result before the last step */
    assert_false(sim_storage_file(&g.st, 1)->committed);

    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_int_equal(g.st.receiver_view_bytes, size);
    assert_true(next_out(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FILE_RESULT);
    assert_int_equal(g.out.u.file_result.error, AFTP_WIRE_ERR_NONE);
    assert_memory_equal(g.out.u.file_result.digest, digest, AFTP_DIGEST_LEN);
    assert_true(sim_storage_file(&g.st, 1)->committed);
    assert_int_equal(g.side.ev.last_file_error, AFTP_OK);
    rig_free(&g);
}

/* The next periodic FEEDBACK: one interval later, drawn by a duplicate
 * DATA; checks its window and that its ranges are the even blocks there. */
static void expect_sweep_feedback(rig *g, uint64_t cum, uint64_t scan_start, uint64_t scan_end)
{
    g->clock += 10 * SIM_MS;
    feed_data(g, 1, 1000);
    aftp_receiver_handle_expiry(g->r, g->clock);
    assert_true(next_out(g));
    const aftp_wire_feedback *fb = &g->out.u.feedback;
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_FEEDBACK);
    assert_int_equal(fb->cum_block, cum);
    assert_int_equal(fb->scan_start, scan_start);
    assert_int_equal(fb->scan_end, scan_end);
    assert_int_equal(fb->range_count, (scan_end - scan_start + 1) / 2);
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, fb);
    for (uint64_t b = scan_start; b < scan_end; b += 2) {
        assert_true(aftp_wire_ranges_next(&it, &rg));
        assert_int_equal(rg.start, b);
        assert_int_equal(rg.len, 1);
    }
}

/* More holes than one FEEDBACK lists: successive FEEDBACKs continue where
 * the previous one was cut (scan_start = its scan_end), start again from
 * cum_block after reaching the end, and never start below cum_block. */
static void test_feedback_sweeps_outstanding_area(void **state)
{
    (void)state;
    rig g;
    rig_receiver(&g, 2000 * 1000);
    handshake_and_offer(&g, 2000 * 1000, 1000);
    for (uint64_t b = 1; b < 2000; b += 2)
        feed_data(&g, b, 1000); /* the 1000 even blocks are missing */
    aftp_receiver_handle_expiry(g.r, g.clock);
    assert_true(next_out(&g));
    /* 1452 - 82 bytes hold 685 two-byte ranges: [0, 1370) fits. */
    const aftp_wire_feedback *fb = &g.out.u.feedback;
    assert_int_equal(fb->scan_start, 0);
    assert_int_equal(fb->scan_end, 1370);
    assert_int_equal(fb->range_count, 685);
    expect_sweep_feedback(&g, 0, 1370, 2000);
    expect_sweep_feedback(&g, 0, 0, 1370);
    /* The holes below 1400 are filled: the cursor (1370) is now below
     * cum_block, which is where the list starts. */
    for (uint64_t b = 0; b < 1400; b += 2)
        feed_data(&g, b, 1000);
    expect_sweep_feedback(&g, 1400, 1400, 2000);
    expect_sweep_feedback(&g, 1400, 1400, 2000);
    rig_free(&g);
}

static void test_settings_and_arguments(void **state)
{
    (void)state;
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    aftp_sender *s = NULL;
    aftp_receiver *r = NULL;
    aftp_sender_settings_default(&ss);
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_ERR_INVALID_ARGUMENT); /* no id, storage */
    ss.conn_id = 1;
    ss.storage = &sim_sender_storage;
    ss.max_datagram = 1199;
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_ERR_INVALID_ARGUMENT);
    ss.max_datagram = 1452;
    /* Protected by default: no keys, no sender. */
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_ERR_BAD_KEY);
    ss.security.identity = sim_client_secret;
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_ERR_BAD_KEY); /* no server key */
    ss.security.cipher = 9;
    ss.security.peer_key = sim_server_public();
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_ERR_INVALID_ARGUMENT);
    ss.security.cipher = AFTP_CIPHER_CHACHA20POLY1305;
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_OK);
    aftp_sender_del(s);
    ss.security = (aftp_security_settings){.cipher = AFTP_CIPHER_NONE};
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_OK);
    /* Rate limits of a running session: a ceiling below the floor is refused. */
    assert_int_equal(aftp_sender_set_rate_limits(s, 50000000, 40000000),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_sender_set_rate_limits(s, 50000000, 0), AFTP_OK);
    assert_int_equal(aftp_sender_set_rate_limits(NULL, 0, 0), AFTP_ERR_INVALID_ARGUMENT);
    aftp_file_info f = {.file_id = 2, .size = 10, .path = "x"};
    assert_int_equal(aftp_sender_add_file(s, &f), AFTP_OK);
    f.file_id = 2; /* ids must grow */
    assert_int_equal(aftp_sender_add_file(s, &f), AFTP_ERR_INVALID_ARGUMENT);
    f.file_id = 3;
    f.path = "";
    assert_int_equal(aftp_sender_add_file(s, &f), AFTP_ERR_INVALID_ARGUMENT);
    f.path = "y";
    f.block_size = 1452; /* larger than a datagram can carry */
    assert_int_equal(aftp_sender_add_file(s, &f), AFTP_ERR_INVALID_ARGUMENT);
    f.block_size = 0;
    aftp_sender_finish(s);
    assert_int_equal(aftp_sender_add_file(s, &f), AFTP_ERR_INVALID_STATE);
    uint8_t small[100];
    aftp_datagram dg;
    assert_int_equal(aftp_sender_write(s, 0, small, sizeof small, &dg), AFTP_ERR_BUFFER_TOO_SMALL);
    /* An abort needs an error: success or nothing is not a reason. */
    assert_int_equal(aftp_sender_abort(s, 0, AFTP_OK, NULL), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_sender_abort(NULL, 0, AFTP_ERR_IO, NULL), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_sender_state(s), AFTP_STATE_HANDSHAKE);
    aftp_sender_del(s);
    aftp_sender_del(NULL);

    aftp_receiver_settings_default(&rs);
    rs.conn_id = 1;
    assert_int_equal(aftp_receiver_new(&rs, 0, &r), AFTP_ERR_INVALID_ARGUMENT); /* no storage */
    rs.storage = &sim_receiver_storage;
    rs.feedback_interval_ns = 1000; /* below 1 ms */
    assert_int_equal(aftp_receiver_new(&rs, 0, &r), AFTP_ERR_INVALID_ARGUMENT);
    rs.feedback_interval_ns = 10 * SIM_MS;
    assert_int_equal(aftp_receiver_new(&rs, 0, &r), AFTP_ERR_BAD_KEY); /* protected, no keys */
    rs.security.identity = sim_server_secret;
    assert_int_equal(aftp_receiver_new(&rs, 0, &r), AFTP_ERR_BAD_KEY); /* no admission policy */
    rs.security.peers.lookup = sim_admit_client;
    assert_int_equal(aftp_receiver_new(&rs, 0, &r), AFTP_OK);
    aftp_receiver_del(r);
    aftp_receiver_del(NULL);
}

/* The sender: a VERSION_NEG without version 1 ends the attempt; one that
 * lists version 1 is ignored; FEEDBACK for packets never sent is dropped. */
static void test_sender_version_neg(void **state)
{
    (void)state;
    sim_storage st;
    uint64_t clock = 0;
    sim_storage_init(&st, 1, 10, 1);
    sim_side side = {.st = &st, .clock = &clock};
    aftp_sender_settings ss;
    aftp_sender_settings_default(&ss);
    ss.conn_id = CLIENT_ID;
    ss.storage = &sim_sender_storage;
    ss.on_event = sim_on_event;
    ss.user = &side;
    ss.security.cipher = AFTP_CIPHER_NONE;
    aftp_sender *s;
    assert_int_equal(aftp_sender_new(&ss, 0, &s), AFTP_OK);
    uint8_t buf[1452], d[64];
    aftp_datagram dg;
    assert_int_equal(aftp_sender_write(s, 0, buf, sizeof buf, &dg), 1);
    assert_int_equal(dg.head_len, AFTP_WIRE_HELLO_MIN_LEN);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = 0, .type = AFTP_WIRE_VERSION_NEG, .conn_id = CLIENT_ID};
    p.u.version_neg.count = 2;
    p.u.version_neg.versions[0] = 3;
    p.u.version_neg.versions[1] = AFTP_WIRE_VERSION;
    size_t len;
    assert_int_equal(aftp_wire_encode(&p, d, sizeof d, &len), AFTP_OK);
    assert_int_equal(aftp_sender_read(s, 1000, d, len), AFTP_OK);
    assert_int_equal(aftp_sender_state(s), AFTP_STATE_HANDSHAKE);
    p.u.version_neg.versions[1] = 9;
    assert_int_equal(aftp_wire_encode(&p, d, sizeof d, &len), AFTP_OK);
    assert_int_equal(aftp_sender_read(s, 2000, d, len), AFTP_ERR_VERSION);
    assert_int_equal(aftp_sender_state(s), AFTP_STATE_CLOSED);
    assert_int_equal(side.ev.closed_error, AFTP_ERR_VERSION);
    assert_int_equal(aftp_sender_expiry(s), AFTP_NO_EXPIRY);
    aftp_sender_del(s);
    sim_storage_free(&st);
}

/* A sender driven by hand: one 10-block file (blocks of 1000 bytes) sent
 * through to FILE_DONE. Packet numbers: HELLO 0, FILE_OFFER 1, DATA of
 * block b at 2 + b, FILE_DONE 12. */
typedef struct sender_rig {
    sim_storage st;
    sim_side side;
    uint64_t clock;
    aftp_sender *s;
    uint64_t peer_pn;
    uint8_t buf[1452];
    aftp_datagram dg;
} sender_rig;

/* The next datagram the sender writes, waiting for the pacer if needed. */
static void sender_next(sender_rig *g)
{
    for (int i = 0; i < 100; i++) {
        if (aftp_sender_write(g->s, g->clock, g->buf, sizeof g->buf, &g->dg) == 1)
            return;
        uint64_t t = aftp_sender_expiry(g->s);
        assert_true(t != AFTP_NO_EXPIRY);
        g->clock = t > g->clock ? t : g->clock;
    }
    fail_msg("the sender writes nothing");
}

static int sender_feed(sender_rig *g, aftp_wire_packet *p, uint8_t type)
{
    uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    p->hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = type,
                                .conn_id = CLIENT_ID, .pn = g->peer_pn++};
    assert_int_equal(aftp_wire_encode(p, d, sizeof d, &len), AFTP_OK);
    return aftp_sender_read(g->s, g->clock, d, len);
}

static void sender_rig_through_file_done(sender_rig *g)
{
    memset(g, 0, sizeof *g);
    sim_storage_init(&g->st, 1, 10 * 1000, 3);
    g->side = (sim_side){.st = &g->st, .clock = &g->clock};
    aftp_sender_settings ss;
    aftp_receiver_settings unused;
    sim_engine_settings(&ss, &g->side, &unused, &g->side);
    ss.conn_id = CLIENT_ID;
    ss.security.cipher = AFTP_CIPHER_NONE;
    assert_int_equal(aftp_sender_new(&ss, 0, &g->s), AFTP_OK);
    aftp_file_info f = {.file_id = 1, .size = 10 * 1000, .mode = 0600, .block_size = 1000,
                        .path = "a/b.c"};
    assert_int_equal(aftp_sender_add_file(g->s, &f), AFTP_OK);
    sender_next(g); /* HELLO */
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = SERVER_ID,
                                          .cipher = AFTP_WIRE_CIPHER_NONE, .max_datagram = 1452};
    assert_int_equal(sender_feed(g, &p, AFTP_WIRE_HELLO_ACK), AFTP_OK);
    sender_next(g); /* FILE_OFFER */
    memset(&p, 0, sizeof p);
    p.u.file_reply.file_id = 1;
    assert_int_equal(sender_feed(g, &p, AFTP_WIRE_FILE_REPLY), AFTP_OK);
    for (int i = 0; i <= 10; i++)
        sender_next(g); /* DATA 0-9, FILE_DONE */
    assert_int_equal(g->dg.head[1], AFTP_WIRE_FILE_DONE);
}

/* Section 9.11: a receiver's CLOSE(NONE) while the file awaits its
 * FILE_RESULT ends the file and the session with PEER_CLOSED, not OK. */
static void test_close_none_mid_file_is_no_success(void **state)
{
    (void)state;
    sender_rig g;
    sender_rig_through_file_done(&g);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.close.error = AFTP_WIRE_ERR_NONE;
    assert_int_equal(sender_feed(&g, &p, AFTP_WIRE_CLOSE), AFTP_ERR_PEER_CLOSED);
    assert_int_equal(g.side.ev.last_file_error, AFTP_ERR_PEER_CLOSED);
    assert_int_equal(g.side.ev.closed_error, AFTP_ERR_PEER_CLOSED);
    aftp_sender_del(g.s);
    sim_storage_free(&g.st);
}

/* The block index of the DATA datagram in g->dg (its head). */
static uint64_t data_block(const sender_rig *g)
{
    aftp_wire_reader r;
    uint64_t block = UINT64_MAX;
    aftp_wire_reader_init(&r, g->dg.head + AFTP_WIRE_HEADER_LEN + 4, 8);
    assert_int_equal(aftp_wire_read_u64(&r, &block), AFTP_OK);
    return block;
}

/* FEEDBACK for file 1 listing `ranges` in [scan_start, scan_end). */
static int sender_feedback(sender_rig *g, uint64_t cum, uint64_t scan_start, uint64_t scan_end,
                           uint64_t blocks_received, const aftp_wire_range *ranges,
                           uint16_t count)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.feedback = (aftp_wire_feedback){.file_id = 1, .largest_pn = 12,
                                        .blocks_received = blocks_received, .cum_block = cum,
                                        .scan_start = scan_start, .scan_end = scan_end,
                                        .range_count = count, .ranges = ranges};
    return sender_feed(g, &p, AFTP_WIRE_FEEDBACK);
}

/* The sender repairs what the window [scan_start, scan_end) lists missing
 * and assumes nothing of the blocks below scan_start; a FEEDBACK whose
 * window or block count exceeds the file is dropped. */
static void test_sender_uses_scan_window(void **state)
{
    (void)state;
    sender_rig g;
    aftp_stats st;
    sender_rig_through_file_done(&g);
    static const aftp_wire_range block6[] = {{6, 1}};
    aftp_sender_get_stats(g.s, &st);
    uint64_t dropped = st.packets_dropped;
    assert_int_equal(sender_feedback(&g, 0, 5, 11, 8, block6, 1), AFTP_OK);
    assert_int_equal(sender_feedback(&g, 0, 5, 10, 11, block6, 1), AFTP_OK);
    aftp_sender_get_stats(g.s, &st);
    assert_int_equal(st.packets_dropped, dropped + 2);
    assert_int_equal(aftp_sender_write(g.s, g.clock, g.buf, sizeof g.buf, &g.dg), 0);

    /* Blocks 0-4 were sent long enough ago to count as lost if listed, but
     * they are below scan_start: only block 6 is repaired. */
    g.clock += 10 * SIM_MS;
    assert_int_equal(sender_feedback(&g, 0, 5, 10, 8, block6, 1), AFTP_OK);
    sender_next(&g);
    assert_int_equal(g.dg.head[1], AFTP_WIRE_DATA);
    assert_int_equal(data_block(&g), 6);
    assert_int_equal(aftp_sender_write(g.s, g.clock, g.buf, sizeof g.buf, &g.dg), 0);
    aftp_sender_del(g.s);
    sim_storage_free(&g.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_is_dropped),
        cmocka_unit_test(test_first_packet_must_be_hello),
        cmocka_unit_test(test_version_negotiation_left_to_the_door),
        cmocka_unit_test(test_pull_refused),
        cmocka_unit_test(test_cipher_refused),
        cmocka_unit_test(test_repeated_hello_and_amplification),
        cmocka_unit_test(test_late_driver_still_sends_close),
        cmocka_unit_test(test_data_checks_and_feedback),
        cmocka_unit_test(test_feedback_sweeps_outstanding_area),
        cmocka_unit_test(test_done_reports_tail),
        cmocka_unit_test(test_receiver_close_none_mid_file),
        cmocka_unit_test(test_verification_steps_and_answers),
        cmocka_unit_test(test_settings_and_arguments),
        cmocka_unit_test(test_sender_version_neg),
        cmocka_unit_test(test_sender_uses_scan_window),
        cmocka_unit_test(test_close_none_mid_file_is_no_success),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
