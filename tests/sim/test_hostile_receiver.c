/* The sender against receivers that lie (label sim): a scripted receiver,
 * packet by packet on a virtual clock, that reports a digest it did not
 * compute, a verdict before it had the digest, every block missing for
 * ever, or a HELLO_ACK that breaks spec section 6.3. The sender must never
 * report a success it cannot confirm (9.10), must bound what a receiver
 * can make it resend (9.9), and must treat a HELLO_ACK as 9.3 step 4 says.
 * Real loss (20%, 50%) still completes under the repair bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_digest.h"
#include "common/aftp_handshake.h"
#include "common/aftp_session.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define MAX_DGRAM 1452u
#define SENDER_DGRAM 9000u /* room for what a sender of larger datagrams writes */
#define LIAR_ID 0x33333333u
#define STEP_NS (100 * 1000)

/* What the scripted receiver does wrong. */
enum lie {
    LIE_NONE,            /* FILE_RESULT(NONE) echoing FILE_DONE's digest */
    LIE_ZERO_DIGEST,     /* FILE_RESULT(NONE, zero digest) */
    LIE_OTHER_DIGEST,    /* FILE_RESULT(NONE, FILE_DONE's digest with one bit flipped) */
    LIE_EARLY_VERDICT,   /* FILE_RESULT(NONE) at the first DATA, before FILE_DONE */
    LIE_ALL_MISSING      /* every FEEDBACK lists every block missing; no FILE_RESULT */
};

typedef struct liar {
    int lie;
    sim_storage st;
    sim_side side;
    uint64_t clock;
    aftp_sender *s;
    uint32_t client_id;
    uint64_t pn;             /* the liar's next packet number */
    uint32_t file_id;
    uint64_t block_count;
    uint64_t largest_pn;     /* largest DATA packet number seen */
    uint64_t data_seen;
    uint64_t next_feedback_ns;
    uint8_t out[8][MAX_DGRAM]; /* answers waiting for the sender */
    size_t out_len[8];
    int out_count;
    uint8_t buf[SENDER_DGRAM];
    /* The sender's FILE_END and CLOSED, messages in full. */
    char file_message[AFTP_WIRE_MAX_REASON + 1];
    char closed_message[AFTP_WIRE_MAX_REASON + 1];
    uint16_t close_sent;     /* wire error of the sender's CLOSE */
    int closes;
} liar;

static void record(void *user, const aftp_event *ev)
{
    liar *l = (liar *)((char *)user - offsetof(liar, side));
    if (ev->type == AFTP_EV_FILE_END)
        snprintf(l->file_message, sizeof l->file_message, "%s", ev->message ? ev->message : "");
    if (ev->type == AFTP_EV_CLOSED)
        snprintf(l->closed_message, sizeof l->closed_message, "%s",
                 ev->message ? ev->message : "");
    sim_on_event(user, ev);
}

/* A sender of one file of `size` bytes in blocks of `block_size` (0: as
 * large as the datagram allows); cipher NONE unless protected. */
static void liar_open_blocks(liar *l, int lie, uint64_t size, uint32_t block_size,
                             int protected_session)
{
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    memset(l, 0, sizeof *l);
    l->lie = lie;
    sim_storage_init(&l->st, 1, size, 7);
    l->side = (sim_side){.st = &l->st, .clock = &l->clock};
    sim_engine_settings(&ss, &l->side, &rs, &l->side);
    ss.on_event = record;
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = 100 * 1000 * 1000;
    if (!protected_session)
        ss.security.cipher = AFTP_CIPHER_NONE;
    if (block_size != 0)
        ss.max_datagram = SENDER_DGRAM; /* the liar's HELLO_ACK holds it to MAX_DGRAM */
    assert_int_equal(aftp_sender_new(&ss, 0, &l->s), AFTP_OK);
    l->client_id = ss.conn_id;
    aftp_file_info info = {.file_id = 1, .size = size, .mode = 0600, .path = "f",
                           .block_size = block_size};
    assert_int_equal(aftp_sender_add_file(l->s, &info), AFTP_OK);
    aftp_sender_finish(l->s);
}

static void liar_open(liar *l, int lie, uint64_t size, int protected_session)
{
    liar_open_blocks(l, lie, size, 0, protected_session);
}

static void liar_close(liar *l)
{
    aftp_sender_del(l->s);
    sim_storage_free(&l->st);
}

/* Queues an answer for the sender (packet number and address filled). */
static void answer(liar *l, aftp_wire_packet *p, uint8_t type)
{
    assert_true(l->out_count < 8);
    p->hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = type,
                                .conn_id = l->client_id, .pn = l->pn++};
    assert_int_equal(aftp_wire_encode(p, l->out[l->out_count], MAX_DGRAM,
                                      &l->out_len[l->out_count]),
                     AFTP_OK);
    l->out_count++;
}

static void answer_result(liar *l, const uint8_t *digest)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_result.file_id = l->file_id;
    p.u.file_result.error = AFTP_WIRE_ERR_NONE;
    memcpy(p.u.file_result.digest, digest, AFTP_DIGEST_LEN);
    answer(l, &p, AFTP_WIRE_FILE_RESULT);
}

static void on_file_done(liar *l, const aftp_wire_file_done *d)
{
    uint8_t digest[AFTP_DIGEST_LEN];
    memcpy(digest, d->digest, sizeof digest);
    switch (l->lie) {
    case LIE_ZERO_DIGEST: memset(digest, 0, sizeof digest); break;
    case LIE_OTHER_DIGEST: digest[15] ^= 1; break;
    case LIE_NONE: break;
    default: return;
    }
    answer_result(l, digest);
}

static void on_data(liar *l, const aftp_wire_packet *p)
{
    if (p->hdr.pn > l->largest_pn || l->data_seen == 0)
        l->largest_pn = p->hdr.pn;
    if (l->data_seen++ == 0 && l->lie == LIE_EARLY_VERDICT) {
        uint8_t zero[AFTP_DIGEST_LEN] = {0};
        answer_result(l, zero);
    }
}

/* The receiver's side of one datagram from the sender. */
static void liar_read(liar *l, const uint8_t *pkt, size_t len)
{
    aftp_wire_packet p, a;
    assert_int_equal(aftp_wire_decode(pkt, len, &p), AFTP_OK);
    memset(&a, 0, sizeof a);
    switch (p.hdr.type) {
    case AFTP_WIRE_HELLO:
        a.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = LIAR_ID,
                                              .cipher = AFTP_WIRE_CIPHER_NONE,
                                              .max_datagram = MAX_DGRAM};
        answer(l, &a, AFTP_WIRE_HELLO_ACK);
        break;
    case AFTP_WIRE_FILE_OFFER:
        l->file_id = p.u.file_offer.file_id;
        l->block_count = aftp_wire_block_count(p.u.file_offer.size, p.u.file_offer.block_size);
        a.u.file_reply = (aftp_wire_file_reply){.file_id = l->file_id};
        answer(l, &a, AFTP_WIRE_FILE_REPLY);
        break;
    case AFTP_WIRE_DATA: on_data(l, &p); break;
    case AFTP_WIRE_FILE_DONE: on_file_done(l, &p.u.file_done); break;
    case AFTP_WIRE_CLOSE:
        l->closes++;
        l->close_sent = p.u.close.error;
        break;
    default: break;
    }
}

/* LIE_ALL_MISSING: every millisecond of DATA, a FEEDBACK that has
 * received everything up to the latest packet and holds no block. */
static void maybe_feedback(liar *l)
{
    if (l->lie != LIE_ALL_MISSING || l->data_seen == 0 || l->clock < l->next_feedback_ns)
        return;
    l->next_feedback_ns = l->clock + SIM_MS;
    aftp_wire_range all = {.start = 0, .len = l->block_count};
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.feedback = (aftp_wire_feedback){.file_id = l->file_id, .largest_pn = l->largest_pn,
                                        .recv_time_us = l->clock / 1000,
                                        .packets_received = l->data_seen,
                                        .scan_end = l->block_count, .range_count = 1,
                                        .ranges = &all};
    answer(l, &p, AFTP_WIRE_FEEDBACK);
}

static void deliver(liar *l)
{
    for (int i = 0; i < l->out_count; i++)
        aftp_sender_read(l->s, l->clock, l->out[i], l->out_len[i]);
    l->out_count = 0;
}

/* One step of virtual time: the sender's timers and output, the liar's
 * answers. */
static void liar_step(liar *l)
{
    aftp_datagram dg;
    uint8_t pkt[SENDER_DGRAM];
    l->clock += STEP_NS;
    if (l->clock >= aftp_sender_expiry(l->s))
        aftp_sender_handle_expiry(l->s, l->clock);
    while (aftp_sender_write(l->s, l->clock, l->buf, sizeof l->buf, &dg) == 1) {
        size_t len = dg.head_len + dg.payload_len;
        memcpy(pkt, dg.head, dg.head_len);
        if (dg.payload_len > 0)
            memcpy(pkt + dg.head_len, dg.payload, dg.payload_len);
        liar_read(l, pkt, len);
        deliver(l);
    }
    maybe_feedback(l);
    deliver(l);
}

static void run_until_closed(liar *l, uint64_t limit_ns)
{
    while (aftp_sender_state(l->s) != AFTP_STATE_CLOSED && l->clock < limit_ns)
        liar_step(l);
}

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void source_digest(liar *l, uint8_t *out)
{
    aftp_digest *d;
    sim_file *f = sim_storage_file(&l->st, 1);
    assert_int_equal(aftp_digest_new(&d), AFTP_OK);
    aftp_digest_update(d, f->src, f->size);
    aftp_digest_final(d, out);
    aftp_digest_del(d);
}

/* ---- 9.10: the verdict is checked ---- */

/* The control: a receiver that echoes the right digest gives success. */
static void test_true_verdict_succeeds(void **state)
{
    (void)state;
    liar l;
    liar_open(&l, LIE_NONE, 100000, 0);
    run_until_closed(&l, 10 * SIM_S);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
    assert_int_equal(aftp_sender_error(l.s), AFTP_OK);
    assert_int_equal(l.side.ev.last_file_error, AFTP_OK);
    liar_close(&l);
}

/* FILE_RESULT(NONE) with a digest other than the one streamed: the file
 * fails with DIGEST_MISMATCH, naming both digests, and the session closes
 * with CLOSE(DIGEST_MISMATCH). */
static void lying_digest(int lie, const uint8_t *reported_xor)
{
    liar l;
    uint8_t ours[AFTP_DIGEST_LEN], theirs[AFTP_DIGEST_LEN];
    char ours_hex[2 * AFTP_DIGEST_LEN + 1], theirs_hex[2 * AFTP_DIGEST_LEN + 1];
    liar_open(&l, lie, 100000, 0);
    run_until_closed(&l, 10 * SIM_S);
    source_digest(&l, ours);
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        theirs[i] = reported_xor ? ours[i] ^ reported_xor[i] : 0;
    hex(ours, ours_hex);
    hex(theirs, theirs_hex);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
    assert_int_equal(l.side.ev.file_end, 1);
    assert_int_equal(l.side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_int_equal(aftp_sender_error(l.s), AFTP_ERR_DIGEST_MISMATCH);
    assert_int_equal(l.side.ev.closed_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_non_null(strstr(l.file_message, ours_hex));
    assert_non_null(strstr(l.file_message, theirs_hex));
    assert_string_equal(l.closed_message, l.file_message);
    assert_true(l.closes >= 1);
    assert_int_equal(l.close_sent, AFTP_WIRE_ERR_DIGEST_MISMATCH);
    liar_close(&l);
}

static void test_zero_digest_is_mismatch(void **state)
{
    (void)state;
    lying_digest(LIE_ZERO_DIGEST, NULL);
}

static void test_other_digest_is_mismatch(void **state)
{
    (void)state;
    uint8_t last_bit[AFTP_DIGEST_LEN] = {[15] = 1};
    lying_digest(LIE_OTHER_DIGEST, last_bit);
}

/* A NONE verdict before FILE_DONE: the receiver had no digest to verify
 * against, so it is no verification. */
static void test_verdict_before_file_done_is_mismatch(void **state)
{
    (void)state;
    liar l;
    liar_open(&l, LIE_EARLY_VERDICT, 100000, 0);
    run_until_closed(&l, 10 * SIM_S);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
    assert_int_equal(l.side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_int_equal(aftp_sender_error(l.s), AFTP_ERR_DIGEST_MISMATCH);
    assert_non_null(strstr(l.file_message, "before this side sent its digest"));
    assert_int_equal(l.close_sent, AFTP_WIRE_ERR_DIGEST_MISMATCH);
    liar_close(&l);
}

/* ---- 9.9: the repair bound ---- */

/* A receiver that lists every block missing for ever is cut off with
 * LIMIT once its resends pass 8 per block sent + 256. What it got resent
 * stays within that bound plus what one FEEDBACK could queue (every block
 * sent so far). Fails on a sender without the bound: it never ends. */
static void all_missing(uint64_t size)
{
    liar l;
    aftp_stats st;
    liar_open(&l, LIE_ALL_MISSING, size, 0);
    run_until_closed(&l, 120 * SIM_S);
    aftp_sender_get_stats(l.s, &st);
    uint64_t block = MAX_DGRAM - AFTP_WIRE_DATA_OVERHEAD;
    uint64_t first = st.payload_bytes_sent - st.payload_bytes_retransmitted;
    uint64_t sent = (first + block - 1) / block; /* blocks sent for the first time */
    printf("[sim] all missing, %llu bytes: closed after %.3f s, %llu blocks sent, %llu bytes "
           "resent\n", (unsigned long long)size, (double)l.clock / 1e9, (unsigned long long)sent,
           (unsigned long long)st.payload_bytes_retransmitted);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
    assert_int_equal(aftp_sender_error(l.s), AFTP_ERR_LIMIT);
    assert_int_equal(l.side.ev.last_file_error, AFTP_ERR_LIMIT);
    assert_int_equal(l.close_sent, AFTP_WIRE_ERR_LIMIT);
    assert_non_null(strstr(l.file_message, "the receiver asked for "));
    assert_non_null(strstr(l.file_message, "beyond the bound of 8 per block sent + 256"));
    assert_string_equal(l.closed_message, l.file_message);
    assert_true(st.payload_bytes_retransmitted <= (9 * sent + 256) * block);
    liar_close(&l);
}

static void test_all_missing_small_file(void **state)
{
    (void)state;
    all_missing(100000);
}

static void test_all_missing_one_block(void **state)
{
    (void)state;
    all_missing(1000);
}

static void test_all_missing_larger_file(void **state)
{
    (void)state;
    all_missing(3000000);
}

/* Real random loss stays far inside the bound: byte-exact completion at
 * 20% and 50% loss, small and larger files, several seeds. */
static void lossy(double loss, uint64_t size, uint64_t seed)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = size;
    c.fwd.loss = loss;
    c.rev.loss = loss;
    c.seed = seed;
    c.idle_timeout_ns = 60 * SIM_S; /* HELLOs lost 3 in 4 for a while stay within it */
    c.time_limit_ns = 600 * SIM_S;
    sim_run(&c, &r);
    char name[40];
    snprintf(name, sizeof name, "loss %.0f%% seed %llu", loss * 100, (unsigned long long)seed);
    sim_report(name, &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_OK);
    /* The receiver's session may end on its idle timeout when all three
     * of the sender's CLOSEs are lost (1 in 8 at 50%): its file is done. */
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_OK);
    assert_true(sim_file_intact(&r.st, 1));
    sim_result_free(&r);
}

static void test_loss_20_completes(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 1452, 20000, 300000, 2000000};
    for (uint64_t seed = 1; seed <= 3; seed++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            lossy(0.20, sizes[i], 100 + seed * 10 + i);
}

static void test_loss_50_completes(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 1452, 20000, 300000, 1000000};
    for (uint64_t seed = 1; seed <= 3; seed++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            lossy(0.50, sizes[i], 200 + seed * 10 + i);
}

/* ---- 9.3 step 4: HELLO_ACKs that break 6.3 ---- */

/* The sender's first HELLO, decoded. */
static void first_hello(liar *l, uint8_t *hello, size_t *len)
{
    aftp_datagram dg;
    assert_int_equal(aftp_sender_write(l->s, 0, hello, MAX_DGRAM, &dg), 1);
    assert_int_equal(dg.head[1], AFTP_WIRE_HELLO);
    *len = dg.head_len;
}

static size_t plain_ack(liar *l, uint32_t server_id, uint16_t max_datagram, uint8_t *out)
{
    aftp_wire_packet p;
    size_t len;
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_HELLO_ACK,
                               .conn_id = l->client_id};
    p.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = server_id,
                                          .cipher = AFTP_WIRE_CIPHER_NONE,
                                          .max_datagram = max_datagram};
    assert_int_equal(aftp_wire_encode(&p, out, MAX_DGRAM, &len), AFTP_OK);
    return len;
}

/* The next datagram the sender writes is a CLOSE, with this wire error
 * when it is not sealed (sealed, its clear header is all that shows). */
static void expect_close(liar *l, int sealed, uint16_t wire_error)
{
    aftp_datagram dg;
    aftp_wire_packet p;
    /* A moment later: the HELLO used the pacer's budget. */
    assert_int_equal(aftp_sender_write(l->s, SIM_MS, l->buf, sizeof l->buf, &dg), 1);
    assert_int_equal(dg.head[1], AFTP_WIRE_CLOSE);
    if (sealed)
        return;
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &p), AFTP_OK);
    assert_int_equal(p.u.close.error, wire_error);
}

static int any_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    (void)user;
    (void)client_key;
    (void)ts;
    return AFTP_OK;
}

/* A server's side of a protected handshake, scripted: message 2 over
 * whatever fields and extensions (fields->ext) the test chooses, so they
 * are authenticated; HANDSHAKE follows those extensions. */
static size_t protected_ack(const uint8_t *hello, size_t hello_len,
                            const aftp_wire_hello_ack *fields, uint8_t *out)
{
    aftp_wire_packet h, p;
    const uint8_t *msg1;
    uint16_t msg1_len;
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX], payload[AFTP_HS_MAX_PAYLOAD];
    uint8_t binding[AFTP_HS_MAX_PAYLOAD], msg2[AFTP_HS_MAX_RESPONSE];
    uint8_t ext[MAX_DGRAM];
    size_t prologue_len, payload_len, binding_len, msg2_len, len;
    aftp_handshake *hs;
    assert_int_equal(aftp_wire_decode(hello, hello_len, &h), AFTP_OK);
    assert_true(aftp_wire_ext_find(h.u.hello.ext, h.u.hello.ext_len, AFTP_WIRE_EXT_HANDSHAKE,
                                   &msg1, &msg1_len));
    assert_int_equal(aftp_wire_hello_prologue(&h.u.hello, h.hdr.conn_id, prologue,
                                              sizeof prologue, &prologue_len),
                     AFTP_OK);
    aftp_hs_peers peers = {.lookup = sim_admit_client, .check_timestamp = any_timestamp};
    aftp_hs_config cfg = {.role = AFTP_HS_RESPONDER, .static_secret = sim_server_secret,
                          .peers = &peers, .prologue = prologue, .prologue_len = prologue_len,
                          .random = sim_random};
    assert_int_equal(aftp_handshake_new(&hs, &cfg), AFTP_OK);
    assert_int_equal(aftp_handshake_read_init(hs, msg1, msg1_len, payload, sizeof payload,
                                              &payload_len),
                     AFTP_OK);
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_HELLO_ACK,
                               .conn_id = h.hdr.conn_id};
    p.u.hello_ack = *fields;
    assert_int_equal(
        aftp_session_ack_payload(&p.u.hello_ack, binding, sizeof binding, &binding_len), AFTP_OK);
    assert_int_equal(aftp_handshake_write_response(hs, binding, binding_len, msg2, sizeof msg2,
                                                   &msg2_len),
                     AFTP_OK);
    aftp_handshake_del(hs);
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (fields->ext_len > 0)
        assert_int_equal(aftp_wire_write_bytes(&w, fields->ext, fields->ext_len), AFTP_OK);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg2, (uint16_t)msg2_len),
                     AFTP_OK);
    p.u.hello_ack.ext = ext;
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    assert_int_equal(aftp_wire_encode(&p, out, MAX_DGRAM, &len), AFTP_OK);
    return len;
}

static uint8_t offered_cipher(const uint8_t *hello, size_t len)
{
    aftp_wire_packet h;
    assert_int_equal(aftp_wire_decode(hello, len, &h), AFTP_OK);
    return h.u.hello.ciphers[0];
}

/* Protected, NONE selected without message 2 (a forged downgrade): it
 * cannot be the server's, so it is dropped and the genuine HELLO_ACK that
 * follows is accepted. (Behaviour pinned: the sender already dropped it;
 * the spec said AUTH.) */
static void test_protected_ack_none_without_msg2_dropped(void **state)
{
    (void)state;
    liar l;
    uint8_t hello[MAX_DGRAM], ack[MAX_DGRAM];
    size_t hello_len;
    liar_open(&l, LIE_NONE, 1000, 1);
    first_hello(&l, hello, &hello_len);
    size_t len = plain_ack(&l, LIAR_ID, MAX_DGRAM, ack);
    assert_int_equal(aftp_sender_read(l.s, 0, ack, len), AFTP_OK);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_HANDSHAKE);
    aftp_stats st;
    aftp_sender_get_stats(l.s, &st);
    assert_int_equal(st.packets_dropped, 1);
    aftp_wire_hello_ack good = {.server_conn_id = LIAR_ID,
                                .cipher = offered_cipher(hello, hello_len),
                                .max_datagram = MAX_DGRAM};
    len = protected_ack(hello, hello_len, &good, ack);
    assert_int_equal(aftp_sender_read(l.s, 0, ack, len), AFTP_OK);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_TRANSFER);
    assert_int_equal(l.side.ev.connected, 1);
    liar_close(&l);
}

/* A HELLO_ACK breaking 6.3 in one field, authenticated by message 2 in a
 * protected session (nothing is, in an unprotected one): server id 0 ends
 * the session at once and silently (no id to address a CLOSE to); a
 * max_datagram above the client's gets CLOSE(PROTOCOL), sealed when
 * protected. Both end with MALFORMED before CONNECTED. */
static void bad_ack(int protected_session, uint32_t server_id, uint16_t max_datagram)
{
    liar l;
    uint8_t hello[MAX_DGRAM], ack[MAX_DGRAM];
    size_t hello_len, len;
    aftp_datagram dg;
    liar_open(&l, LIE_NONE, 1000, protected_session);
    first_hello(&l, hello, &hello_len);
    if (protected_session) {
        aftp_wire_hello_ack fields = {.server_conn_id = server_id,
                                      .cipher = offered_cipher(hello, hello_len),
                                      .max_datagram = max_datagram};
        len = protected_ack(hello, hello_len, &fields, ack);
    } else {
        len = plain_ack(&l, server_id, max_datagram, ack);
    }
    assert_int_equal(aftp_sender_read(l.s, 0, ack, len), AFTP_ERR_MALFORMED);
    assert_int_equal(l.side.ev.connected, 0);
    if (server_id == 0) {
        assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
        assert_string_equal(l.closed_message, "the receiver's HELLO_ACK gives server id 0");
        assert_int_equal(aftp_sender_write(l.s, SIM_MS, l.buf, sizeof l.buf, &dg), 0);
    } else {
        assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSING);
        expect_close(&l, protected_session, AFTP_WIRE_ERR_PROTOCOL);
    }
    liar_close(&l);
}

static void test_plain_ack_server_id_zero(void **state)
{
    (void)state;
    bad_ack(0, 0, MAX_DGRAM);
}

static void test_plain_ack_larger_datagram(void **state)
{
    (void)state;
    bad_ack(0, LIAR_ID, MAX_DGRAM + 100);
}

static void test_protected_ack_server_id_zero(void **state)
{
    (void)state;
    bad_ack(1, 0, MAX_DGRAM);
}

static void test_protected_ack_larger_datagram(void **state)
{
    (void)state;
    bad_ack(1, LIAR_ID, MAX_DGRAM + 100);
}

/* An authenticated HELLO_ACK whose RATE_CAP is not a non-zero u64 (spec
 * 12.3): the server broke the protocol; CLOSE(PROTOCOL), sealed, and
 * MALFORMED before CONNECTED, rather than a guess at the cap. */
static void bad_rate_cap(const uint8_t *value, uint16_t value_len)
{
    liar l;
    uint8_t hello[MAX_DGRAM], ack[MAX_DGRAM], ext[64];
    size_t hello_len;
    aftp_wire_writer w;
    liar_open(&l, LIE_NONE, 1000, 1);
    first_hello(&l, hello, &hello_len);
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_RATE_CAP, value, value_len), AFTP_OK);
    aftp_wire_hello_ack fields = {.server_conn_id = LIAR_ID,
                                  .cipher = offered_cipher(hello, hello_len),
                                  .max_datagram = MAX_DGRAM, .ext = ext,
                                  .ext_len = (uint16_t)w.pos};
    size_t len = protected_ack(hello, hello_len, &fields, ack);
    assert_int_equal(aftp_sender_read(l.s, 0, ack, len), AFTP_ERR_MALFORMED);
    assert_int_equal(l.side.ev.connected, 0);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSING);
    expect_close(&l, 1, AFTP_WIRE_ERR_PROTOCOL);
    liar_close(&l);
}

static void test_rate_cap_of_zero(void **state)
{
    (void)state;
    static const uint8_t zero[8] = {0};
    bad_rate_cap(zero, sizeof zero);
}

static void test_rate_cap_of_four_bytes(void **state)
{
    (void)state;
    static const uint8_t four[4] = {0, 0x98, 0x96, 0x80};
    bad_rate_cap(four, sizeof four);
}

/* A block size the negotiated datagram cannot carry: the file ends with
 * LIMIT, and the message names the figures (not "limit exceeded"). */
static void test_block_too_large_names_figures(void **state)
{
    (void)state;
    liar l;
    liar_open_blocks(&l, LIE_NONE, 100000, 2000, 0);
    run_until_closed(&l, 10 * SIM_S);
    assert_int_equal(aftp_sender_error(l.s), AFTP_ERR_LIMIT);
    assert_int_equal(l.side.ev.last_file_error, AFTP_ERR_LIMIT);
    assert_string_equal(l.file_message, "blocks of 2000 bytes need 2044-byte datagrams, above "
                                        "this session's limit of 1452 bytes");
    liar_close(&l);
}

/* ---- 9.2 step 3: types only a client sends ---- */

/* The sender's own HELLO reflected back to it, and a FILE_DONE, both with
 * its id: types a client never receives are dropped at the peek, so they
 * neither count as the server's packets nor keep the attempt alive past
 * its idle timeout. */
static void test_client_only_types_dropped(void **state)
{
    (void)state;
    liar l;
    uint8_t hello[MAX_DGRAM], done[MAX_DGRAM];
    size_t hello_len, done_len;
    aftp_stats st;
    aftp_wire_packet p;
    liar_open(&l, LIE_NONE, 1000, 0);
    first_hello(&l, hello, &hello_len);
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_FILE_DONE,
                               .conn_id = l.client_id, .pn = 1};
    p.u.file_done.file_id = 1;
    assert_int_equal(aftp_wire_encode(&p, done, MAX_DGRAM, &done_len), AFTP_OK);
    aftp_sender_settings defaults;
    aftp_sender_settings_default(&defaults);
    uint64_t idle = defaults.idle_timeout_ns;
    for (uint64_t t = SIM_S / 2; t < idle + SIM_S; t += SIM_S / 2) {
        assert_int_equal(aftp_sender_read(l.s, t, hello, hello_len), AFTP_OK);
        assert_int_equal(aftp_sender_read(l.s, t, done, done_len), AFTP_OK);
        if (t >= aftp_sender_expiry(l.s))
            aftp_sender_handle_expiry(l.s, t);
    }
    aftp_sender_get_stats(l.s, &st);
    assert_int_equal(st.packets_received, 0);
    assert_int_equal(aftp_sender_state(l.s), AFTP_STATE_CLOSED);
    assert_int_equal(aftp_sender_error(l.s), AFTP_ERR_IDLE_TIMEOUT);
    liar_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_true_verdict_succeeds),
        cmocka_unit_test(test_zero_digest_is_mismatch),
        cmocka_unit_test(test_other_digest_is_mismatch),
        cmocka_unit_test(test_verdict_before_file_done_is_mismatch),
        cmocka_unit_test(test_all_missing_small_file),
        cmocka_unit_test(test_all_missing_one_block),
        cmocka_unit_test(test_all_missing_larger_file),
        cmocka_unit_test(test_loss_20_completes),
        cmocka_unit_test(test_loss_50_completes),
        cmocka_unit_test(test_plain_ack_server_id_zero),
        cmocka_unit_test(test_plain_ack_larger_datagram),
        cmocka_unit_test(test_protected_ack_none_without_msg2_dropped),
        cmocka_unit_test(test_protected_ack_server_id_zero),
        cmocka_unit_test(test_protected_ack_larger_datagram),
        cmocka_unit_test(test_rate_cap_of_zero),
        cmocka_unit_test(test_rate_cap_of_four_bytes),
        cmocka_unit_test(test_client_only_types_dropped),
        cmocka_unit_test(test_block_too_large_names_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
