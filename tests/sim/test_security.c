/* Protected sessions (spec section 14) through the engines: transfers
 * with each cipher, who is refused and how (silence, UNAUTHORIZED, a clear
 * PROTOCOL reason), downgrade and replay of the handshake, tampered,
 * replayed and forged packets (dropped, counted, never reaching storage),
 * key updates and RETRY. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_aead.h"
#include "common/aftp_handshake.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define CLIENT_ID 0x11111111u
#define MAX_DGRAM 1452u

/* ---- whole runs over the simulated path (sim_run) ---- */

/* CONNECTED events seen, with the peer key each carried. */
typedef struct connected_seen {
    const void *user;
    int has_key;
    uint8_t key[AFTP_KEY_LEN];
} connected_seen;

static connected_seen seen[2];
static size_t seen_count;

static void record_event(void *user, const aftp_event *ev)
{
    if (ev->type == AFTP_EV_CONNECTED && seen_count < 2) {
        connected_seen *c = &seen[seen_count++];
        c->user = user;
        c->has_key = ev->peer_key != NULL;
        if (c->has_key)
            memcpy(c->key, ev->peer_key, AFTP_KEY_LEN);
    }
    sim_on_event(user, ev);
}

static const connected_seen *connected_of(const void *user)
{
    for (size_t i = 0; i < seen_count; i++)
        if (seen[i].user == user)
            return &seen[i];
    return NULL;
}

static void tune_record(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    seen_count = 0;
    s->on_event = record_event;
    r->on_event = record_event;
}

static void assert_transfer_ok(const sim_cfg *c, sim_result *r)
{
    assert_false(r->stuck);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
    assert_true(r->snd_side.ev.has_digest && r->rcv_side.ev.has_digest);
    assert_memory_equal(r->snd_side.ev.digest, r->rcv_side.ev.digest, AFTP_DIGEST_LEN);
    for (int i = 1; i <= c->nfiles; i++)
        assert_true(sim_file_intact(&r->st, (uint32_t)i));
}

static void transfer_with(int choice, uint8_t wire_cipher, const char *name)
{
    if (!aftp_aead_available(wire_cipher)) {
        printf("[sim] %s: not available on this CPU\n", name);
        skip();
    }
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.cipher = choice;
    c.fwd.loss = 0.01;
    c.rev.loss = 0.01;
    c.tune = tune_record;
    sim_run(&c, &r);
    sim_report(name, &c, &r);
    assert_transfer_ok(&c, &r);
    assert_int_equal(r.snd.cipher, wire_cipher);
    assert_int_equal(r.rcv.cipher, wire_cipher);
    assert_int_equal(r.snd.auth_failures + r.rcv.auth_failures, 0);
    /* Each side learnt the other's authenticated key. */
    const connected_seen *snd = connected_of(&r.snd_side), *rcv = connected_of(&r.rcv_side);
    assert_non_null(snd);
    assert_non_null(rcv);
    assert_true(snd->has_key && rcv->has_key);
    assert_memory_equal(snd->key, sim_server_public(), AFTP_KEY_LEN);
    assert_memory_equal(rcv->key, sim_client_public(), AFTP_KEY_LEN);
    sim_result_free(&r);
}

static void test_aes_transfer(void **state)
{
    (void)state;
    transfer_with(AFTP_CIPHER_AES256GCM, AFTP_WIRE_CIPHER_AES256GCM, "aes-256-gcm 1%");
}

static void test_chacha_transfer(void **state)
{
    (void)state;
    transfer_with(AFTP_CIPHER_CHACHA20POLY1305, AFTP_WIRE_CIPHER_CHACHA20POLY1305,
                  "chacha20-poly1305 1%");
}

/* An unprotected run (both sides opted in): no peer key, no cipher. */
static void test_none_both_sides(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.cipher = AFTP_CIPHER_NONE;
    c.tune = tune_record;
    sim_run(&c, &r);
    assert_transfer_ok(&c, &r);
    assert_int_equal(r.snd.cipher, AFTP_WIRE_CIPHER_NONE);
    assert_false(connected_of(&r.snd_side)->has_key);
    assert_false(connected_of(&r.rcv_side)->has_key);
    sim_result_free(&r);
}

/* A refused session: nothing opened or stored on the receiver. */
static void run_refused(void (*tune)(void *, aftp_sender_settings *, aftp_receiver_settings *),
                        sim_result *r)
{
    sim_cfg c;
    sim_cfg_default(&c);
    c.tune = tune;
    c.time_limit_ns = 20 * SIM_S;
    sim_run(&c, r);
    assert_false(r->stuck);
    assert_int_equal(r->snd_side.ev.connected, 0);
    assert_int_equal(r->rcv_side.ev.connected, 0);
    assert_int_equal(r->snd_side.ev.file_start, 0);
    assert_false(sim_storage_file(&r->st, 1)->opened);
    assert_int_equal(r->rcv.payload_bytes_received, 0);
    assert_int_equal(r->snd_state, AFTP_STATE_CLOSED);
}

static void tune_wrong_server_key(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    (void)r;
    s->security.peer_key = sim_client_public(); /* not the server's */
}

/* Section 14.3: message 1 does not open: the server never answers, the
 * client gives up when its idle timeout passes. */
static void test_wrong_server_key_gets_silence(void **state)
{
    (void)state;
    sim_result r;
    run_refused(tune_wrong_server_key, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(r.rcv.packets_sent, 0);
    assert_int_equal(r.rcv.wire_bytes_sent, 0);
    assert_true(r.rcv.packets_dropped >= 1); /* every HELLO */
    assert_int_equal(r.rcv_error, AFTP_ERR_IDLE_TIMEOUT);
    sim_result_free(&r);
}

static int refuse_everyone(void *user, const uint8_t *client_key, uint8_t *psk)
{
    (void)user;
    (void)client_key;
    (void)psk;
    return AFTP_ERR_UNKNOWN_PEER;
}

static void tune_unknown_client(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    (void)s;
    r->security.peers.lookup = refuse_everyone;
}

static void test_unknown_client_is_told(void **state)
{
    (void)state;
    sim_result r;
    run_refused(tune_unknown_client, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_UNKNOWN_PEER);
    assert_string_equal(r.snd_side.ev.message, "client key not authorized");
    assert_int_equal(r.rcv_error, AFTP_ERR_UNKNOWN_PEER);
    sim_result_free(&r);
}

static void tune_client_none(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    (void)r;
    s->security.cipher = AFTP_CIPHER_NONE;
}

static void tune_server_none(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    (void)s;
    r->security.cipher = AFTP_CIPHER_NONE;
}

/* No fallback either way; the CLOSE's reason says what to change. */
static void test_none_against_protected_refused(void **state)
{
    (void)state;
    sim_result r;
    run_refused(tune_client_none, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_PEER_CLOSED);
    assert_string_equal(r.snd_side.ev.message,
                        "unprotected transfers are not enabled on this server");
    sim_result_free(&r);
    run_refused(tune_server_none, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_PEER_CLOSED);
    assert_string_equal(r.snd_side.ev.message,
                        "server runs without encryption (--cipher none); the client must opt "
                        "in too");
    sim_result_free(&r);
}

static void tune_no_common_cipher(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->security.cipher = AFTP_CIPHER_CHACHA20POLY1305;
    r->security.cipher = AFTP_CIPHER_AES256GCM;
}

static void test_no_common_cipher(void **state)
{
    (void)state;
    if (!aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM))
        skip();
    sim_result r;
    run_refused(tune_no_common_cipher, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_PEER_CLOSED);
    assert_string_equal(r.snd_side.ev.message, "no common cipher");
    sim_result_free(&r);
}

/* Key updates every 1000 packets on a lossy, reordering path: both
 * directions keep opening across the updates. */
static void test_key_update_under_loss_and_reorder(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.key_update_packets = 1000;
    c.fwd.loss = 0.02;
    c.fwd.reorder = 0.02;
    c.fwd.reorder_ns = 2 * SIM_MS;
    c.rev.loss = 0.02;
    c.idle_timeout_ns = 30 * SIM_S;
    sim_run(&c, &r);
    sim_report("key update /1000", &c, &r);
    assert_transfer_ok(&c, &r);
    assert_true(r.snd.key_updates >= 2);
    assert_true(r.rcv.key_updates >= 2);
    assert_int_equal(r.rcv.auth_failures, 0);
    sim_result_free(&r);
}

/* ---- packet by packet: two engines back to back ---- */

typedef struct pair pair;
/* Sees a datagram on its way (may change it); 0 drops it. */
typedef int (*pair_hook)(pair *p, uint8_t *pkt, size_t *len);

struct pair {
    sim_storage st;
    sim_side snd_side, rcv_side;
    uint64_t clock;
    aftp_sender *snd;
    aftp_receiver *rcv;
    pair_hook to_rcv, to_snd;
    uint8_t saved[AFTP_WIRE_MAX_DATAGRAM]; /* what a hook kept */
    size_t saved_len;
    uint8_t buf[MAX_DGRAM];
};

static void pair_open(pair *p, uint64_t size)
{
    memset(p, 0, sizeof *p);
    sim_storage_init(&p->st, 1, size, 5);
    p->snd_side = (sim_side){.st = &p->st, .clock = &p->clock};
    p->rcv_side = (sim_side){.st = &p->st, .clock = &p->clock};
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    sim_engine_settings(&ss, &p->snd_side, &rs, &p->rcv_side);
    ss.security.cipher = rs.security.cipher = AFTP_CIPHER_CHACHA20POLY1305;
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = 100 * 1000 * 1000;
    assert_int_equal(aftp_sender_new(&ss, 0, &p->snd), AFTP_OK);
    assert_int_equal(aftp_receiver_new(&rs, 0, &p->rcv), AFTP_OK);
    aftp_file_info info = {.file_id = 1, .size = size, .mode = 0600, .path = "f"};
    assert_int_equal(aftp_sender_add_file(p->snd, &info), AFTP_OK);
    aftp_sender_finish(p->snd);
}

static void pair_close(pair *p)
{
    aftp_sender_del(p->snd);
    aftp_receiver_del(p->rcv);
    sim_storage_free(&p->st);
}

static void pass(pair *p, const aftp_datagram *dg, int to_rcv)
{
    uint8_t pkt[AFTP_WIRE_MAX_DATAGRAM];
    size_t len = dg->head_len + dg->payload_len;
    memcpy(pkt, dg->head, dg->head_len);
    if (dg->payload_len > 0)
        memcpy(pkt + dg->head_len, dg->payload, dg->payload_len);
    pair_hook hook = to_rcv ? p->to_rcv : p->to_snd;
    if (hook != NULL && !hook(p, pkt, &len))
        return;
    if (to_rcv)
        aftp_receiver_read(p->rcv, p->clock, pkt, len);
    else
        aftp_sender_read(p->snd, p->clock, pkt, len);
}

/* 100 us of time: timers, then everything either side writes. */
static void pair_step(pair *p)
{
    aftp_datagram dg;
    p->clock += 100 * 1000;
    if (p->clock >= aftp_sender_expiry(p->snd))
        aftp_sender_handle_expiry(p->snd, p->clock);
    if (p->clock >= aftp_receiver_expiry(p->rcv))
        aftp_receiver_handle_expiry(p->rcv, p->clock);
    while (aftp_sender_write(p->snd, p->clock, p->buf, sizeof p->buf, &dg) == 1)
        pass(p, &dg, 1);
    while (aftp_receiver_write(p->rcv, p->clock, p->buf, sizeof p->buf, &dg) == 1)
        pass(p, &dg, 0);
}

static int both_closed(const pair *p)
{
    return aftp_sender_state(p->snd) == AFTP_STATE_CLOSED &&
           aftp_receiver_state(p->rcv) == AFTP_STATE_CLOSED;
}

static int something_saved(const pair *p)
{
    return p->saved_len > 0;
}

static void pair_run_until(pair *p, int (*done)(const pair *), uint64_t limit_ns)
{
    while (!done(p)) {
        assert_true(p->clock < limit_ns);
        pair_step(p);
    }
}

static void pair_finishes_intact(pair *p)
{
    p->to_rcv = p->to_snd = NULL;
    pair_run_until(p, both_closed, p->clock + 30 * SIM_S);
    assert_int_equal(aftp_sender_error(p->snd), AFTP_OK);
    assert_true(sim_file_intact(&p->st, 1));
}

/* Hooks keeping the first packet of one type (and dropping it). */
static int keep_first(pair *p, uint8_t *pkt, size_t *len, uint8_t type)
{
    if (p->saved_len > 0 || *len < 2 || pkt[1] != type)
        return 1;
    memcpy(p->saved, pkt, *len);
    p->saved_len = *len;
    return 0;
}

static int keep_first_data(pair *p, uint8_t *pkt, size_t *len)
{
    return keep_first(p, pkt, len, AFTP_WIRE_DATA);
}

static int keep_first_feedback(pair *p, uint8_t *pkt, size_t *len)
{
    return keep_first(p, pkt, len, AFTP_WIRE_FEEDBACK);
}

static uint64_t drops_of(const aftp_stats *st)
{
    return st->auth_failures + st->packets_dropped + st->duplicate_packets;
}

static void stats_of(const pair *p, int receiver, aftp_stats *st)
{
    if (receiver)
        aftp_receiver_get_stats(p->rcv, st);
    else
        aftp_sender_get_stats(p->snd, st);
}

static int feed(pair *p, int receiver, const uint8_t *pkt, size_t len)
{
    return receiver ? aftp_receiver_read(p->rcv, p->clock, pkt, len)
                    : aftp_sender_read(p->snd, p->clock, pkt, len);
}

/* Feeds every single-bit variant of p->saved to one engine: each is
 * dropped and counted once (a change past the clear associated data as an
 * authentication failure) and nothing of it is received. */
static void feed_every_bit_flip(pair *p, int receiver, size_t ad_len)
{
    uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    aftp_stats before, after;
    for (size_t bit = 0; bit < p->saved_len * 8; bit++) {
        memcpy(d, p->saved, p->saved_len);
        d[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        stats_of(p, receiver, &before);
        assert_int_equal(feed(p, receiver, d, p->saved_len), AFTP_OK);
        stats_of(p, receiver, &after);
        assert_int_equal(drops_of(&after), drops_of(&before) + 1);
        if (bit >= ad_len * 8)
            assert_int_equal(after.auth_failures, before.auth_failures + 1);
        assert_int_equal(after.payload_bytes_received, before.payload_bytes_received);
        assert_int_equal(after.packets_received, before.packets_received);
    }
}

/* Every single-bit change of a sealed DATA is dropped and counted and
 * stores nothing; the genuine datagram is then stored and the transfer
 * completes. */
static void test_tampered_data_bits_dropped(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, 40 * 1000);
    p.to_rcv = keep_first_data;
    pair_run_until(&p, something_saved, 5 * SIM_S);
    assert_true(p.saved[3] & AFTP_WIRE_FLAG_PROTECTED);
    feed_every_bit_flip(&p, 1, AFTP_AEAD_AD_DATA);
    assert_int_equal(sim_storage_file(&p.st, 1)->writes[0], 0);
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, p.saved, p.saved_len), AFTP_OK);
    assert_int_equal(sim_storage_file(&p.st, 1)->writes[0], 1);
    pair_finishes_intact(&p);
    pair_close(&p);
}

/* The same for a sealed FEEDBACK on its way to the sender. */
static void test_tampered_feedback_bits_dropped(void **state)
{
    (void)state;
    pair p;
    aftp_stats before, after;
    pair_open(&p, 40 * 1000);
    p.to_snd = keep_first_feedback;
    pair_run_until(&p, something_saved, 5 * SIM_S);
    feed_every_bit_flip(&p, 0, AFTP_AEAD_AD_HEADER);
    aftp_sender_get_stats(p.snd, &before);
    assert_int_equal(aftp_sender_read(p.snd, p.clock, p.saved, p.saved_len), AFTP_OK);
    aftp_sender_get_stats(p.snd, &after);
    assert_int_equal(after.packets_received, before.packets_received + 1);
    pair_finishes_intact(&p);
    pair_close(&p);
}

/* Records every DATA (and the first FEEDBACK) and lets them through. */
typedef struct recorder {
    uint8_t pkts[8][AFTP_WIRE_MAX_DATAGRAM];
    size_t lens[8];
    size_t count;
} recorder;

static recorder rec;

static int record_data(pair *p, uint8_t *pkt, size_t *len)
{
    (void)p;
    if (pkt[1] == AFTP_WIRE_DATA && rec.count < 8) {
        memcpy(rec.pkts[rec.count], pkt, *len);
        rec.lens[rec.count++] = *len;
    }
    return 1;
}

static int record_feedback(pair *p, uint8_t *pkt, size_t *len)
{
    if (pkt[1] == AFTP_WIRE_FEEDBACK && p->saved_len == 0) {
        memcpy(p->saved, pkt, *len);
        p->saved_len = *len;
    }
    return 1;
}

static int eight_recorded(const pair *p)
{
    return p->saved_len > 0 && rec.count == 8;
}

/* Replayed DATA: dropped before decryption (the blocks are held),
 * counted, never written again. A replayed FEEDBACK: dropped by the
 * replay window. */
static void test_replayed_packets_dropped(void **state)
{
    (void)state;
    pair p;
    aftp_stats before, after;
    memset(&rec, 0, sizeof rec);
    pair_open(&p, 200 * 1000);
    p.to_rcv = record_data;
    p.to_snd = record_feedback;
    pair_run_until(&p, eight_recorded, 5 * SIM_S);
    pair_step(&p);
    aftp_receiver_get_stats(p.rcv, &before);
    for (size_t i = 0; i < rec.count; i++)
        assert_int_equal(aftp_receiver_read(p.rcv, p.clock, rec.pkts[i], rec.lens[i]), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &after);
    assert_int_equal(after.duplicate_packets, before.duplicate_packets + rec.count);
    assert_int_equal(after.payload_bytes_received, before.payload_bytes_received);
    assert_int_equal(after.auth_failures, before.auth_failures);
    for (uint64_t b = 0; b < 8; b++)
        assert_int_equal(sim_storage_file(&p.st, 1)->writes[b], 1);
    aftp_sender_get_stats(p.snd, &before);
    assert_int_equal(aftp_sender_read(p.snd, p.clock, p.saved, p.saved_len), AFTP_OK);
    aftp_sender_get_stats(p.snd, &after);
    assert_int_equal(after.packets_dropped, before.packets_dropped + 1);
    assert_int_equal(after.packets_received, before.packets_received);
    pair_finishes_intact(&p);
    pair_close(&p);
}

/* A forgery: the clear header of a real DATA (a fresh packet number),
 * garbage for ciphertext and tag. */
static void forge(const uint8_t *real, size_t len, uint8_t *out)
{
    memcpy(out, real, len);
    out[8] = 0x7F; /* packet number far ahead of anything sent */
    for (size_t i = AFTP_AEAD_AD_DATA; i < len; i++)
        out[i] = (uint8_t)(i * 31 + 7);
}

/* Section 14.5: a forged DATA at a block held changes no stored byte (under
 * a packet number already accepted it is not even decrypted; under a fresh
 * one it is opened into scratch, 9.2 step 7, and fails); one at a missing
 * block fails to open and its block stays missing. Opened in scratch (storage lends no bytes), it changes no
 * byte at all; opened in place, it may spoil only that missing block's
 * bytes, which the real DATA then fills. */
static void forged_data_case(int refuse_place)
{
    pair p;
    aftp_stats before, after;
    uint8_t f[AFTP_WIRE_MAX_DATAGRAM];
    memset(&rec, 0, sizeof rec);
    pair_open(&p, 200 * 1000);
    p.st.refuse_place = refuse_place;
    p.to_rcv = record_data;
    p.to_snd = record_feedback;
    pair_run_until(&p, eight_recorded, 5 * SIM_S);
    sim_file *file = sim_storage_file(&p.st, 1);
    uint8_t snapshot[200 * 1000];
    memcpy(snapshot, file->dst, file->size);

    forge(rec.pkts[2], rec.lens[2], f); /* block 2: held */
    memcpy(f + 8, rec.pkts[2] + 8, 8);   /* under its packet number, accepted */
    aftp_receiver_get_stats(p.rcv, &before);
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, f, rec.lens[2]), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &after);
    assert_int_equal(after.duplicate_packets, before.duplicate_packets + 1);
    assert_int_equal(after.auth_failures, before.auth_failures);
    forge(rec.pkts[2], rec.lens[2], f); /* a fresh packet number: opened, fails */
    before = after;
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, f, rec.lens[2]), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &after);
    assert_int_equal(after.duplicate_packets, before.duplicate_packets);
    assert_int_equal(after.auth_failures, before.auth_failures + 1);
    assert_memory_equal(file->dst, snapshot, file->size);
    assert_int_equal(file->writes[2], 1);
    before = after;

    /* Block 40 is missing: rewrite the block index of the header. */
    forge(rec.pkts[3], rec.lens[3], f);
    memset(f + AFTP_WIRE_HEADER_LEN + 4, 0, 8);
    f[AFTP_WIRE_HEADER_LEN + 11] = 40;
    assert_int_equal(file->writes[40], 0);
    assert_int_equal(aftp_receiver_read(p.rcv, p.clock, f, rec.lens[3]), AFTP_OK);
    aftp_receiver_get_stats(p.rcv, &after);
    assert_int_equal(after.auth_failures, before.auth_failures + 1);
    assert_int_equal(file->writes[40], 0);
    size_t block40 = 40 * (size_t)file->block_size;
    assert_memory_equal(file->dst, snapshot, refuse_place ? file->size : block40);
    size_t after40 = block40 + file->block_size;
    assert_memory_equal(file->dst + after40, snapshot + after40, file->size - after40);
    pair_finishes_intact(&p);
    assert_int_equal(file->writes[40], 1);
    assert_int_equal(file->placed_writes, refuse_place ? 0 : file->blocks);
    pair_close(&p);
}

static void test_forged_data_never_reaches_storage(void **state)
{
    (void)state;
    forged_data_case(0);
    forged_data_case(1);
}

/* ---- the handshake, datagram by datagram ---- */

/* A sender that wrote its first HELLO, and the settings of its server. */
typedef struct hs_rig {
    sim_storage st;
    sim_side side;
    uint64_t clock;
    aftp_sender *s;
    aftp_receiver_settings rs;
    uint8_t hello[MAX_DGRAM];
    size_t hello_len;
    uint8_t out[MAX_DGRAM]; /* a receiver's latest datagram */
    size_t out_len;
} hs_rig;

static void hs_rig_open(hs_rig *g)
{
    aftp_sender_settings ss;
    aftp_datagram dg;
    memset(g, 0, sizeof *g);
    sim_storage_init(&g->st, 1, 1000, 2);
    g->side = (sim_side){.st = &g->st, .clock = &g->clock};
    sim_engine_settings(&ss, &g->side, &g->rs, &g->side);
    assert_int_equal(aftp_sender_new(&ss, 0, &g->s), AFTP_OK);
    assert_int_equal(aftp_sender_write(g->s, 0, g->hello, MAX_DGRAM, &dg), 1);
    assert_int_equal(dg.head[1], AFTP_WIRE_HELLO);
    assert_null(dg.payload);
    g->hello_len = dg.head_len;
}

static void hs_rig_close(hs_rig *g)
{
    aftp_sender_del(g->s);
    sim_storage_free(&g->st);
}

static aftp_receiver *hs_receiver(hs_rig *g)
{
    aftp_receiver *r;
    assert_int_equal(aftp_receiver_new(&g->rs, 0, &r), AFTP_OK);
    return r;
}

/* Feeds a datagram to r: 1 and its answer in g->out, or 0 for silence. */
static int ask(hs_rig *g, aftp_receiver *r, const uint8_t *pkt, size_t len)
{
    aftp_datagram dg;
    assert_int_equal(aftp_receiver_read(r, g->clock, pkt, len), AFTP_OK);
    if (aftp_receiver_write(r, g->clock, g->out, MAX_DGRAM, &dg) != 1)
        return 0;
    g->out_len = dg.head_len;
    return 1;
}

/* A cipher list changed in flight (the HELLO re-encoded, padded as the
 * encoder pads) breaks the prologue: the server does not answer. */
static void test_downgraded_offer_gets_silence(void **state)
{
    (void)state;
    hs_rig g;
    hs_rig_open(&g);
    aftp_receiver *r = hs_receiver(&g);
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(g.hello, g.hello_len, &p), AFTP_OK);
    int only_chacha = p.u.hello.cipher_count == 1 &&
                      p.u.hello.ciphers[0] == AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.ciphers[0] = AFTP_WIRE_CIPHER_CHACHA20POLY1305;
    p.u.hello.ciphers[1] = AFTP_WIRE_CIPHER_AES256GCM;
    p.u.hello.cipher_count = only_chacha ? 2 : 1;
    uint8_t tampered[MAX_DGRAM];
    size_t tampered_len;
    assert_int_equal(aftp_wire_encode(&p, tampered, sizeof tampered, &tampered_len), AFTP_OK);
    assert_false(ask(&g, r, tampered, tampered_len));
    assert_int_equal(aftp_receiver_state(r), AFTP_STATE_HANDSHAKE);
    /* The genuine HELLO still gets its answer. */
    assert_true(ask(&g, r, g.hello, g.hello_len));
    assert_int_equal(g.out[1], AFTP_WIRE_HELLO_ACK);
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

/* A recorded HELLO replayed to a fresh receiver of the same server gets
 * silence; the same HELLO repeated to the first receiver gets the same
 * HELLO_ACK, byte for byte. */
static void test_replayed_hello_gets_silence(void **state)
{
    (void)state;
    hs_rig g;
    sim_ts_memory memory = {0};
    uint8_t ack[MAX_DGRAM];
    hs_rig_open(&g);
    g.rs.security.peers.check_timestamp = sim_remember_timestamp;
    g.rs.security.peers.user = &memory;
    aftp_receiver *first = hs_receiver(&g), *fresh = hs_receiver(&g);
    assert_true(ask(&g, first, g.hello, g.hello_len));
    assert_true(memory.has);
    size_t ack_len = g.out_len;
    memcpy(ack, g.out, ack_len);
    assert_true(ask(&g, first, g.hello, g.hello_len));
    assert_int_equal(g.out_len, ack_len);
    assert_memory_equal(g.out, ack, ack_len);

    assert_false(ask(&g, fresh, g.hello, g.hello_len));
    assert_int_equal(aftp_receiver_state(fresh), AFTP_STATE_HANDSHAKE);
    /* The sender accepts the genuine answer. */
    assert_int_equal(aftp_sender_read(g.s, 0, ack, ack_len), AFTP_OK);
    assert_int_equal(aftp_sender_state(g.s), AFTP_STATE_TRANSFER);
    assert_int_equal(g.side.ev.connected, 1);
    aftp_receiver_del(first);
    aftp_receiver_del(fresh);
    hs_rig_close(&g);
}

/* Message 2 authenticates the HELLO_ACK's fields: one changed in flight
 * (re-encoded) fails the session with AFTP_ERR_AUTH. */
static void test_altered_hello_ack_fails_auth(void **state)
{
    (void)state;
    hs_rig g;
    uint8_t altered[MAX_DGRAM];
    size_t altered_len = 0;
    hs_rig_open(&g);
    aftp_receiver *r = hs_receiver(&g);
    assert_true(ask(&g, r, g.hello, g.hello_len));
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(g.out, g.out_len, &p), AFTP_OK);
    p.u.hello_ack.max_datagram = 1300;
    assert_int_equal(aftp_wire_encode(&p, altered, sizeof altered, &altered_len), AFTP_OK);
    assert_int_equal(aftp_sender_read(g.s, 0, altered, altered_len), AFTP_ERR_AUTH);
    assert_int_equal(aftp_sender_state(g.s), AFTP_STATE_CLOSED);
    assert_int_equal(g.side.ev.connected, 0);
    assert_string_equal(g.side.ev.message,
                        "server failed to authenticate: wrong --peer-key or known-hosts entry?");
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

/* ---- the receiver's rate cap (RATE_CAP, spec sections 12.3, 14.2.3) ---- */

#define CAP_BPS UINT64_C(30000000)

static uint64_t grant_cap(void *user, const uint8_t *client_key)
{
    (void)user;
    assert_non_null(client_key); /* protected: asked with the proved key */
    return CAP_BPS;
}

/* The HELLO_ACK of a receiver that caps this client: RATE_CAP with the
 * cap, and message 2 over the fields and that TLV (55 + 12 bytes). */
static void capped_ack(hs_rig *g, aftp_receiver **r, aftp_wire_packet *ack)
{
    const uint8_t *v;
    uint16_t v_len;
    uint64_t bps = 0;
    g->rs.security.peers.rate_cap = grant_cap;
    *r = hs_receiver(g);
    assert_true(ask(g, *r, g->hello, g->hello_len));
    assert_int_equal(aftp_wire_decode(g->out, g->out_len, ack), AFTP_OK);
    assert_int_equal(ack->hdr.type, AFTP_WIRE_HELLO_ACK);
    assert_int_equal(aftp_wire_ext_rate_cap(ack->u.hello_ack.ext, ack->u.hello_ack.ext_len, &bps),
                     1);
    assert_int_equal(bps, CAP_BPS);
    assert_true(aftp_wire_ext_find(ack->u.hello_ack.ext, ack->u.hello_ack.ext_len,
                                   AFTP_WIRE_EXT_HANDSHAKE, &v, &v_len));
    assert_int_equal(v_len, 55 + 4 + AFTP_WIRE_RATE_CAP_LEN);
}

/* The genuine capped answer: the sender connects and obeys the cap. */
static void test_capped_ack_is_obeyed(void **state)
{
    (void)state;
    hs_rig g;
    aftp_receiver *r;
    aftp_wire_packet ack;
    aftp_stats st;
    hs_rig_open(&g);
    capped_ack(&g, &r, &ack);
    assert_int_equal(aftp_sender_read(g.s, 0, g.out, g.out_len), AFTP_OK);
    assert_int_equal(aftp_sender_state(g.s), AFTP_STATE_TRANSFER);
    aftp_sender_get_stats(g.s, &st);
    assert_int_equal(st.rate_cap_bps, CAP_BPS);
    assert_true(st.pacing_rate_bps <= CAP_BPS);
    aftp_receiver_get_stats(r, &st);
    assert_int_equal(st.rate_cap_bps, CAP_BPS);
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

/* The HELLO_ACK re-encoded with other extensions than the server sent:
 * message 2 no longer matches, the session ends with AFTP_ERR_AUTH. */
static void assert_forged_ack_fails(hs_rig *g, aftp_wire_packet *ack, const uint8_t *ext,
                                    uint16_t ext_len)
{
    uint8_t forged[MAX_DGRAM];
    size_t forged_len = 0;
    ack->u.hello_ack.ext = ext;
    ack->u.hello_ack.ext_len = ext_len;
    assert_int_equal(aftp_wire_encode(ack, forged, sizeof forged, &forged_len), AFTP_OK);
    assert_int_equal(aftp_sender_read(g->s, 0, forged, forged_len), AFTP_ERR_AUTH);
    assert_int_equal(aftp_sender_state(g->s), AFTP_STATE_CLOSED);
    assert_int_equal(g->side.ev.connected, 0);
}

/* The HELLO_ACK's HANDSHAKE TLV after an optional RATE_CAP of `bps`. */
static uint16_t ext_with_cap(const aftp_wire_packet *ack, uint64_t bps, uint8_t *ext, size_t cap)
{
    const uint8_t *msg2;
    uint16_t msg2_len;
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, cap);
    if (bps != 0)
        assert_int_equal(aftp_wire_ext_put_rate_cap(&w, bps), AFTP_OK);
    assert_true(aftp_wire_ext_find(ack->u.hello_ack.ext, ack->u.hello_ack.ext_len,
                                   AFTP_WIRE_EXT_HANDSHAKE, &msg2, &msg2_len));
    assert_int_equal(aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg2, msg2_len), AFTP_OK);
    return (uint16_t)w.pos;
}

/* A capped HELLO_ACK whose cap an attacker replaced by forged_bps (0:
 * removed): AUTH, never a session under another cap or none. */
static void forge_capped_ack(uint64_t forged_bps)
{
    hs_rig g;
    aftp_receiver *r;
    aftp_wire_packet ack;
    uint8_t ext[MAX_DGRAM];
    hs_rig_open(&g);
    capped_ack(&g, &r, &ack);
    assert_forged_ack_fails(&g, &ack, ext, ext_with_cap(&ack, forged_bps, ext, sizeof ext));
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

static void test_raised_cap_fails_auth(void **state)
{
    (void)state;
    forge_capped_ack(100 * CAP_BPS);
}

static void test_stripped_cap_fails_auth(void **state)
{
    (void)state;
    forge_capped_ack(0);
}

/* An attacker adds a cap to an uncapped HELLO_ACK: AUTH (a slower
 * session would be a denial of service message 2 does not let through). */
static void test_added_cap_fails_auth(void **state)
{
    (void)state;
    hs_rig g;
    aftp_wire_packet ack;
    uint8_t ext[MAX_DGRAM];
    hs_rig_open(&g);
    aftp_receiver *r = hs_receiver(&g);
    assert_true(ask(&g, r, g.hello, g.hello_len));
    assert_int_equal(aftp_wire_decode(g.out, g.out_len, &ack), AFTP_OK);
    assert_forged_ack_fails(&g, &ack, ext, ext_with_cap(&ack, CAP_BPS / 10, ext, sizeof ext));
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

/* The sender's HELLO re-encoded without its RATE_CAP announcement: a
 * client written before RATE_CAP. Its message 1 still opens (the prologue
 * does not cover extensions). */
static size_t hello_without_rate_cap(const hs_rig *g, uint8_t *out)
{
    aftp_wire_packet p;
    uint8_t ext[MAX_DGRAM];
    size_t len;
    aftp_wire_writer w;
    assert_int_equal(aftp_wire_decode(g->hello, g->hello_len, &p), AFTP_OK);
    const uint8_t *v;
    uint16_t v_len;
    assert_true(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len, AFTP_WIRE_EXT_RATE_CAP, &v,
                                   &v_len));
    assert_int_equal(v_len, 0); /* the announcement is empty */
    aftp_wire_writer_init(&w, ext, sizeof ext);
    assert_int_equal(aftp_wire_ext_put_except(&w, p.u.hello.ext, p.u.hello.ext_len,
                                              AFTP_WIRE_EXT_RATE_CAP),
                     AFTP_OK);
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    assert_int_equal(aftp_wire_encode(&p, out, MAX_DGRAM, &len), AFTP_OK);
    return len;
}

/* A client that cannot honour a cap, at a server that requires one for
 * it: CLOSE(LIMIT) in clear, its reason naming the cap. */
static void test_cap_refused_to_client_without_rate_cap(void **state)
{
    (void)state;
    hs_rig g;
    uint8_t old_hello[MAX_DGRAM];
    aftp_wire_packet p;
    hs_rig_open(&g);
    size_t len = hello_without_rate_cap(&g, old_hello);
    g.rs.security.peers.rate_cap = grant_cap;
    aftp_receiver *r = hs_receiver(&g);
    aftp_datagram dg;
    assert_int_equal(aftp_receiver_read(r, 0, old_hello, len), AFTP_ERR_LIMIT);
    assert_int_equal(aftp_receiver_write(r, 0, g.out, MAX_DGRAM, &dg), 1);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_CLOSE);
    assert_int_equal(p.u.close.error, AFTP_WIRE_ERR_LIMIT);
    char reason[AFTP_WIRE_MAX_REASON + 1];
    memcpy(reason, p.u.close.reason, p.u.close.reason_len);
    reason[p.u.close.reason_len] = '\0';
    assert_non_null(strstr(reason, "rate cap of 30000000 bit/s"));
    assert_non_null(strstr(reason, "no RATE_CAP"));
    assert_int_equal(aftp_receiver_error(r), AFTP_ERR_LIMIT);
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

/* Interop with clients written before RATE_CAP: a server without a cap
 * for them answers as before, with no extension but message 2 over the
 * three fields alone (55 bytes). */
static void test_client_without_rate_cap_gets_todays_ack(void **state)
{
    (void)state;
    hs_rig g;
    uint8_t old_hello[MAX_DGRAM];
    aftp_wire_packet p;
    const uint8_t *v;
    uint16_t v_len;
    hs_rig_open(&g);
    size_t len = hello_without_rate_cap(&g, old_hello);
    aftp_receiver *r = hs_receiver(&g);
    assert_true(ask(&g, r, old_hello, len));
    assert_int_equal(aftp_wire_decode(g.out, g.out_len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_HELLO_ACK);
    assert_true(aftp_wire_ext_find(p.u.hello_ack.ext, p.u.hello_ack.ext_len,
                                   AFTP_WIRE_EXT_HANDSHAKE, &v, &v_len));
    assert_int_equal(v_len, 55);
    assert_int_equal(p.u.hello_ack.ext_len, 4 + 55);
    assert_int_equal(aftp_sender_read(g.s, 0, g.out, g.out_len), AFTP_OK);
    assert_int_equal(aftp_sender_state(g.s), AFTP_STATE_TRANSFER);
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

static void hello_tlv(const uint8_t *hello, size_t len, uint16_t type, const uint8_t **v,
                      uint16_t *v_len, int expect)
{
    aftp_wire_packet p;
    assert_int_equal(aftp_wire_decode(hello, len, &p), AFTP_OK);
    assert_int_equal(p.hdr.type, AFTP_WIRE_HELLO);
    assert_int_equal(aftp_wire_ext_find(p.u.hello.ext, p.u.hello.ext_len, type, v, v_len), expect);
}

static size_t retry_packet(const char *token, uint8_t *out)
{
    aftp_wire_packet p;
    size_t len;
    memset(&p, 0, sizeof p);
    p.hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = AFTP_WIRE_RETRY,
                               .conn_id = CLIENT_ID};
    p.u.retry = (aftp_wire_retry){.token_len = (uint16_t)strlen(token),
                                  .token = (const uint8_t *)token};
    assert_int_equal(aftp_wire_encode(&p, out, MAX_DGRAM, &len), AFTP_OK);
    return len;
}

/* Section 14.7: RETRY -> the next HELLO echoes the token in a COOKIE and
 * carries the same handshake message; a second RETRY is ignored; the
 * server answers the HELLO with the cookie. */
static void test_retry_echoes_cookie(void **state)
{
    (void)state;
    hs_rig g;
    aftp_datagram dg;
    aftp_stats stats;
    uint8_t hello2[MAX_DGRAM], retry[MAX_DGRAM];
    const uint8_t *m1, *m2, *cookie;
    uint16_t m1_len, m2_len, cookie_len;
    hs_rig_open(&g);
    hello_tlv(g.hello, g.hello_len, AFTP_WIRE_EXT_HANDSHAKE, &m1, &m1_len, 1);
    hello_tlv(g.hello, g.hello_len, AFTP_WIRE_EXT_COOKIE, &cookie, &cookie_len, 0);

    size_t rlen = retry_packet("token-of-the-server-20", retry);
    assert_int_equal(aftp_sender_read(g.s, 1000, retry, rlen), AFTP_OK);
    uint64_t t = aftp_sender_expiry(g.s); /* the pacer's next slot: due at once */
    assert_true(t < 100 * SIM_MS);
    assert_int_equal(aftp_sender_write(g.s, t, hello2, sizeof hello2, &dg), 1);
    assert_int_equal(dg.head_len, AFTP_WIRE_HELLO_MIN_LEN);
    hello_tlv(hello2, dg.head_len, AFTP_WIRE_EXT_HANDSHAKE, &m2, &m2_len, 1);
    hello_tlv(hello2, dg.head_len, AFTP_WIRE_EXT_COOKIE, &cookie, &cookie_len, 1);
    assert_int_equal(m1_len, m2_len);
    assert_memory_equal(m1, m2, m1_len);
    assert_int_equal(cookie_len, strlen("token-of-the-server-20"));
    assert_memory_equal(cookie, "token-of-the-server-20", cookie_len);

    rlen = retry_packet("another", retry);
    assert_int_equal(aftp_sender_read(g.s, t, retry, rlen), AFTP_OK);
    assert_int_equal(aftp_sender_write(g.s, aftp_sender_expiry(g.s) - 1, g.out, MAX_DGRAM, &dg), 0);
    aftp_sender_get_stats(g.s, &stats);
    assert_int_equal(stats.packets_dropped, 1);

    aftp_receiver *r = hs_receiver(&g);
    g.clock = t;
    assert_true(ask(&g, r, hello2, AFTP_WIRE_HELLO_MIN_LEN));
    assert_int_equal(aftp_sender_read(g.s, t, g.out, g.out_len), AFTP_OK);
    assert_int_equal(aftp_sender_state(g.s), AFTP_STATE_TRANSFER);
    aftp_receiver_del(r);
    hs_rig_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aes_transfer),
        cmocka_unit_test(test_chacha_transfer),
        cmocka_unit_test(test_none_both_sides),
        cmocka_unit_test(test_wrong_server_key_gets_silence),
        cmocka_unit_test(test_unknown_client_is_told),
        cmocka_unit_test(test_none_against_protected_refused),
        cmocka_unit_test(test_no_common_cipher),
        cmocka_unit_test(test_key_update_under_loss_and_reorder),
        cmocka_unit_test(test_tampered_data_bits_dropped),
        cmocka_unit_test(test_tampered_feedback_bits_dropped),
        cmocka_unit_test(test_replayed_packets_dropped),
        cmocka_unit_test(test_forged_data_never_reaches_storage),
        cmocka_unit_test(test_downgraded_offer_gets_silence),
        cmocka_unit_test(test_replayed_hello_gets_silence),
        cmocka_unit_test(test_altered_hello_ack_fails_auth),
        cmocka_unit_test(test_retry_echoes_cookie),
        cmocka_unit_test(test_capped_ack_is_obeyed),
        cmocka_unit_test(test_raised_cap_fails_auth),
        cmocka_unit_test(test_stripped_cap_fails_auth),
        cmocka_unit_test(test_added_cap_fails_auth),
        cmocka_unit_test(test_cap_refused_to_client_without_rate_cap),
        cmocka_unit_test(test_client_without_rate_cap_gets_todays_ack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
