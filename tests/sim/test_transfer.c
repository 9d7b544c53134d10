/* Whole transfers over the simulated path (label sim): sizes, loss
 * patterns, reordering, duplication, dead peers, refusals, corruption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_session.h"
#include "proto/aftp_wire.h"
#include "sim_run.h"

#define BLOCK AFTP_WIRE_DEFAULT_BLOCK

/* Virtual time a clean transfer needs at the paced rate, plus RTTs. */
static uint64_t ideal_ns(const sim_cfg *c)
{
    uint64_t bytes = c->file_size * (uint64_t)c->nfiles;
    return bytes * 8 * SIM_S / c->rate_bps + 10 * 2 * c->fwd.delay_ns;
}

static void assert_clean_success(const sim_cfg *c, sim_result *r)
{
    assert_false(r->stuck);
    assert_int_equal(r->snd_state, AFTP_STATE_CLOSED);
    assert_int_equal(r->rcv_state, AFTP_STATE_CLOSED);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
    assert_int_equal(r->snd_side.ev.connected, 1);
    assert_int_equal(r->rcv_side.ev.connected, 1);
    assert_int_equal(r->snd_side.ev.file_start, c->nfiles);
    assert_int_equal(r->snd_side.ev.file_end, c->nfiles);
    assert_int_equal(r->rcv_side.ev.file_end, c->nfiles);
    assert_int_equal(r->snd_side.ev.last_file_error, AFTP_OK);
    assert_int_equal(r->rcv_side.ev.last_file_error, AFTP_OK);
    /* Both ends report the same whole-file digest. */
    assert_true(r->snd_side.ev.has_digest && r->rcv_side.ev.has_digest);
    assert_memory_equal(r->snd_side.ev.digest, r->rcv_side.ev.digest, AFTP_DIGEST_LEN);
    for (int i = 1; i <= c->nfiles; i++) {
        assert_true(sim_file_intact(&r->st, (uint32_t)i));
        assert_int_equal(sim_storage_file(&r->st, (uint32_t)i)->sender_closed, 1);
    }
    assert_int_equal(r->rcv.payload_bytes_received, c->file_size * (uint64_t)c->nfiles);
    /* After the last file, closing takes 3 PTOs (PTO <= 2 initial RTTs). */
    assert_true(r->end_ns <= r->snd_side.ev.file_end_at + 3 * 2 * 100 * SIM_MS + c->fwd.delay_ns);
}

static void run_clean(const char *name, sim_cfg *c, sim_result *r)
{
    sim_run(c, r);
    sim_report(name, c, r);
    assert_clean_success(c, r);
}

static void transfer_of_size(uint64_t size)
{
    sim_cfg c;
    sim_result r;
    char name[32];
    sim_cfg_default(&c);
    c.file_size = size;
    snprintf(name, sizeof name, "size %llu", (unsigned long long)size);
    run_clean(name, &c, &r);
    /* Without loss nothing is repaired. */
    assert_int_equal(r.snd.payload_bytes_retransmitted, 0);
    assert_int_equal(r.snd.payload_bytes_sent, size);
    assert_true(r.snd_side.ev.file_end_at < ideal_ns(&c));
    sim_result_free(&r);
}

static void test_size_0(void **state) { (void)state; transfer_of_size(0); }
static void test_size_1(void **state) { (void)state; transfer_of_size(1); }
static void test_size_block_minus_1(void **state) { (void)state; transfer_of_size(BLOCK - 1); }
static void test_size_block(void **state) { (void)state; transfer_of_size(BLOCK); }
static void test_size_block_plus_1(void **state) { (void)state; transfer_of_size(BLOCK + 1); }
static void test_size_3mb(void **state) { (void)state; transfer_of_size(3 * 1000 * 1000); }

/* The sender asks for jumbo datagrams (a 9000-byte MTU), the receiver
 * takes up to *ctx. */
static void set_max_datagrams(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    s->max_datagram = 8952;
    r->max_datagram = *(const uint16_t *)ctx;
}

/* Section 4.1: the session takes the smaller of the two max_datagram
 * settings, and blocks fill it (jumbo datagrams when both allow them). */
static void sized_by_smaller_max_datagram(uint16_t receiver_max, uint16_t expect)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 3 * 1000 * 1000;
    c.max_datagram = 9168; /* the sim's buffers: the largest either side takes */
    c.tune = set_max_datagrams;
    c.tune_ctx = &receiver_max;
    run_clean("max datagram", &c, &r);
    assert_int_equal(r.snd.max_datagram, expect);
    assert_int_equal(r.rcv.max_datagram, expect);
    uint32_t block = expect - AFTP_WIRE_DATA_OVERHEAD;
    assert_int_equal(sim_storage_file(&r.st, 1)->block_size, block);
    /* Each DATA carries a whole block: few more datagrams than blocks. */
    uint64_t blocks = (c.file_size + block - 1) / block;
    assert_true(r.rcv.packets_received >= blocks && r.rcv.packets_received < blocks + 40);
    sim_result_free(&r);
}

static void test_max_datagram_negotiated(void **state)
{
    (void)state;
    sized_by_smaller_max_datagram(9168, 8952);
    sized_by_smaller_max_datagram(1452, 1452);
}

static void test_small_explicit_blocks(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 100 * 1000;
    c.block_size = AFTP_WIRE_MIN_BLOCK;
    c.fwd.loss = 0.05;
    run_clean("64-byte blocks 5%", &c, &r);
    sim_result_free(&r);
}

static void test_three_files(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.nfiles = 3;
    c.file_size = 500 * 1000;
    c.fwd.loss = 0.02;
    run_clean("three files 2%", &c, &r);
    sim_result_free(&r);
}

/* Random loss: completes, repairs stay within 2x what the link lost, and
 * the time stays near (size / rate) / (1 - p) plus a few RTTs per repair
 * round. */
static void lossy_transfer(const char *name, double fwd_loss, double rev_loss, uint64_t size,
                           uint64_t seed, uint64_t slack_ns)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.idle_timeout_ns = 30 * SIM_S;
    c.file_size = size;
    c.fwd.loss = fwd_loss;
    c.rev.loss = rev_loss;
    c.seed = seed;
    run_clean(name, &c, &r);
    assert_true(r.fwd_data_lost > 0);
    assert_true(r.snd.payload_bytes_retransmitted <= 2 * r.fwd_data_lost);
    assert_true(r.snd.payload_bytes_retransmitted >= r.fwd_data_lost / 2);
    double bound = (double)ideal_ns(&c) / (1.0 - fwd_loss) + (double)slack_ns;
    assert_true((double)r.snd_side.ev.file_end_at < bound);
    sim_result_free(&r);
}

static void test_loss_1(void **state)
{
    (void)state;
    lossy_transfer("loss 1%", 0.01, 0.01, 3000000, 11, 500 * SIM_MS);
}

static void test_loss_10(void **state)
{
    (void)state;
    lossy_transfer("loss 10%", 0.10, 0.10, 3000000, 12, 1 * SIM_S);
}

/* Half the DATA lost (FEEDBACK on a 5% path). */
static void test_loss_50(void **state)
{
    (void)state;
    lossy_transfer("loss 50%", 0.50, 0.05, 1000000, 13, 2 * SIM_S);
}

/* Half of everything lost, both ways: the tail exchange (FILE_DONE,
 * FEEDBACK) then needs several probe rounds with backoff. The seed is one
 * where some copy of the client's CLOSE gets through: all three lost (one
 * run in eight) leaves the receiver to its idle timeout, as spec 9.11
 * allows (33 of 200 seeds here end so, 36 of 200 before the tail changes
 * of spec 9.9.1, which moved this run's random draws). */
static void test_loss_50_both_ways(void **state)
{
    (void)state;
    lossy_transfer("loss 50% both ways", 0.50, 0.50, 1000000, 16, 30 * SIM_S);
}

static void test_bursty_loss(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    /* Gilbert-Elliott: ~1% of packets start a burst of ~4, 80% lost in it. */
    c.fwd.ge_enter_bad = 0.01;
    c.fwd.ge_leave_bad = 0.25;
    c.fwd.ge_loss_bad = 0.8;
    c.seed = 21;
    run_clean("bursty loss", &c, &r);
    assert_true(r.fwd_data_lost > 0);
    assert_true(r.snd.payload_bytes_retransmitted <= 2 * r.fwd_data_lost);
    sim_result_free(&r);
}

static void test_reordering(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.fwd.reorder = 0.1;
    c.fwd.reorder_ns = SIM_MS; /* ~9 packets at the rate */
    c.rev.reorder = 0.1;
    c.rev.reorder_ns = SIM_MS;
    c.seed = 31;
    run_clean("reordering", &c, &r);
    /* Nothing is lost: repairs are only the few reorderings mistaken for
     * loss by a FEEDBACK sent inside the reordering window. */
    assert_int_equal(r.fwd_data_lost, 0);
    assert_true(r.snd.payload_bytes_retransmitted <= c.file_size / 20);
    sim_result_free(&r);
}

static void test_duplication(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.fwd.duplicate = 0.2;
    c.rev.duplicate = 0.2;
    c.seed = 41;
    run_clean("duplication", &c, &r);
    /* Every duplicate DATA was seen and dropped before storage. */
    assert_true(r.fwd_duplicated > 0);
    assert_true(r.rcv.duplicate_packets > 0);
    assert_true(r.rcv.duplicate_packets <= r.fwd_duplicated);
    sim_result_free(&r);
}

static void test_loss_reorder_dup_mix(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.fwd = (sim_link_cfg){.rate_bps = 200000000, .delay_ns = 50 * SIM_MS, .queue_bytes = 1000000,
                           .loss = 0.05, .reorder = 0.05, .reorder_ns = 2 * SIM_MS,
                           .duplicate = 0.05};
    c.rev = c.fwd;
    c.seed = 51;
    run_clean("mix 5% each", &c, &r);
    sim_result_free(&r);
}

/* The receiver vanishes: the sender ends with IDLE_TIMEOUT after about
 * the idle timeout, and its file with the same error. */
static void test_receiver_dies(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.idle_timeout_ns = 2 * SIM_S;
    c.receiver_dies_at = 150 * SIM_MS;
    sim_run(&c, &r);
    sim_report("receiver dies", &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_state, AFTP_STATE_CLOSED);
    assert_int_equal(r.snd_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(r.snd_side.ev.closed, 1);
    assert_true(r.snd_side.ev.message[0] != '\0');
    uint64_t at = r.snd_side.ev.closed_at;
    assert_true(at >= c.receiver_dies_at + c.idle_timeout_ns - 100 * SIM_MS);
    assert_true(at <= c.receiver_dies_at + c.idle_timeout_ns + 100 * SIM_MS);
    sim_result_free(&r);
}

/* The sender vanishes: the receiver ends with IDLE_TIMEOUT and discards
 * the partial file (never committed). */
static void test_sender_dies(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.idle_timeout_ns = 2 * SIM_S;
    c.sender_dies_at = 150 * SIM_MS;
    sim_run(&c, &r);
    sim_report("sender dies", &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.rcv_state, AFTP_STATE_CLOSED);
    assert_int_equal(r.rcv_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(r.rcv_side.ev.file_end, 1);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_IDLE_TIMEOUT);
    sim_file *f = sim_storage_file(&r.st, 1);
    assert_int_equal(f->receiver_closed, 1);
    assert_false(f->committed);
    assert_true(r.rcv.payload_bytes_received > 0);
    assert_true(r.rcv.payload_bytes_received < c.file_size);
    sim_result_free(&r);
}

/* Nobody answers the HELLO at all. */
static void test_no_receiver(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.idle_timeout_ns = 3 * SIM_S;
    c.receiver_dies_at = 0;
    sim_run(&c, &r);
    assert_int_equal(r.snd_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_int_equal(r.snd_side.ev.connected, 0);
    assert_int_equal(r.snd_side.ev.file_end, 0);
    assert_string_equal(r.snd_side.ev.message, "no answer from the receiver");
    /* HELLO at 0 then after 200, 400, 800 ms of backoff (0, 0.2, 0.6,
     * 1.4 s); the next would leave at 3.0 s, when the idle timeout ends it. */
    assert_int_equal(r.snd.packets_sent, 4);
    sim_result_free(&r);
}

static void test_digest_mismatch(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 200 * 1000;
    c.corrupt_offset = 12345;
    sim_run(&c, &r);
    sim_report("digest mismatch", &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_ERR_DIGEST_MISMATCH);
    sim_file *f = sim_storage_file(&r.st, 1);
    assert_int_equal(f->receiver_closed, 1);
    assert_false(f->committed);
    /* The receiver's digest (of what it stored) differs from the sender's. */
    assert_memory_not_equal(r.snd_side.ev.digest, r.rcv_side.ev.digest, AFTP_DIGEST_LEN);
    /* The session itself ends cleanly. */
    assert_int_equal(r.snd_error, AFTP_OK);
    assert_int_equal(r.rcv_error, AFTP_OK);
    sim_result_free(&r);
}

static void test_refused_file_exists(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.open_error = AFTP_ERR_FILE_EXISTS;
    sim_run(&c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_state, AFTP_STATE_CLOSED);
    assert_int_equal(r.snd_error, AFTP_ERR_FILE_EXISTS);
    assert_int_equal(r.snd_side.ev.file_start, 0);
    assert_int_equal(r.snd_side.ev.file_end, 1);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_ERR_FILE_EXISTS);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_FILE_EXISTS);
    /* The receiver learns of it through CLOSE(FILE_EXISTS). */
    assert_int_equal(r.rcv_state, AFTP_STATE_CLOSED);
    assert_int_equal(r.rcv_error, AFTP_ERR_FILE_EXISTS);
    assert_string_equal(r.rcv_side.ev.message, "destination file exists");
    assert_int_equal(r.snd.payload_bytes_sent, 0);
    sim_result_free(&r);
}

/* A driver that finds the source changed aborts the sender: the file fails
 * on both sides, the receiver discards it and learns why from CLOSE. */
static void test_sender_aborts_source_changed(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.sender_cancels_at = 100 * SIM_MS;
    c.sender_abort_error = AFTP_ERR_SOURCE_CHANGED;
    sim_run(&c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_ERR_SOURCE_CHANGED);
    assert_int_equal(r.snd_side.ev.last_file_error, AFTP_ERR_SOURCE_CHANGED);
    /* CLOSE(SOURCE_CHANGED) maps to the same local error (spec 11.2). */
    assert_int_equal(r.rcv_error, AFTP_ERR_SOURCE_CHANGED);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_SOURCE_CHANGED);
    assert_string_equal(r.rcv_side.ev.message, "source changed");
    sim_file *f = sim_storage_file(&r.st, 1);
    assert_int_equal(f->receiver_closed, 1);
    assert_false(f->committed);
    assert_true(r.snd.payload_bytes_sent < c.file_size); /* it was cut short */
    sim_result_free(&r);
}

/* Verification reads a multi-step file back in bounded steps: no engine
 * call reads more than AFTP_RECEIVER_VERIFY_STEP bytes of it, and every
 * byte is read back exactly once. */
static void test_verification_in_steps(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 2 * AFTP_RECEIVER_VERIFY_STEP + AFTP_RECEIVER_VERIFY_STEP / 2 + 7;
    c.rate_bps = UINT64_C(1000000000);
    c.fwd.rate_bps = UINT64_C(2000000000);
    c.fwd.queue_bytes = 4 * 1000 * 1000;
    run_clean("verification in steps", &c, &r);
    assert_int_equal(r.st.receiver_view_bytes, c.file_size);
    assert_true(r.rcv_view_max > 0);
    assert_true(r.rcv_view_max <= AFTP_RECEIVER_VERIFY_STEP);
    sim_result_free(&r);
}

/* The read-back follows the contiguous held prefix while data still
 * arrives (under loss, so repairs hold it back): it never reads a block
 * before it is written, reads every byte once, and most of the file is
 * read back before the last block arrives. */
static void test_verification_follows_held_prefix(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 4 * AFTP_RECEIVER_VERIFY_STEP + 12345;
    c.rate_bps = UINT64_C(500000000);
    c.fwd = (sim_link_cfg){.rate_bps = UINT64_C(500000000), .delay_ns = 20 * SIM_MS,
                           .queue_bytes = 4 * 1000 * 1000, .loss = 0.02};
    run_clean("verification follows prefix", &c, &r);
    sim_file *f = sim_storage_file(&r.st, 1);
    assert_int_equal(f->viewed_unwritten, 0);
    assert_int_equal(r.st.receiver_view_bytes, c.file_size);
    assert_true(f->viewed_early >= 3 * AFTP_RECEIVER_VERIFY_STEP);
    sim_result_free(&r);
}

static void test_sender_cancels(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.sender_cancels_at = 100 * SIM_MS;
    sim_run(&c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_ERR_CANCELLED);
    assert_int_equal(r.rcv_error, AFTP_ERR_CANCELLED);
    assert_int_equal(r.rcv_side.ev.last_file_error, AFTP_ERR_CANCELLED);
    assert_false(sim_storage_file(&r.st, 1)->committed);
    sim_result_free(&r);
}

/* The time a push client's quick close takes: its CLOSE copies, spaced. */
#define QUICK_CLOSE_NS ((AFTP_SESSION_QUICK_CLOSES - 1) * (uint64_t)AFTP_SESSION_QUICK_SPACING_NS)

/* Section 9.11: once its last file has its FILE_RESULT, the client of a
 * push sends its CLOSE copies and is done, without waiting a round trip
 * for the receiver's answer; the receiver ends when the first arrives. */
static void test_client_closes_quickly(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    run_clean("quick close", &c, &r);
    assert_true(r.rcv_side.ev.closed_at <= r.snd_side.ev.file_end_at + c.fwd.delay_ns + SIM_MS);
    assert_true(r.snd_side.ev.closed_at <= r.snd_side.ev.file_end_at + QUICK_CLOSE_NS + SIM_MS);
    sim_result_free(&r);
}

static int is_close(const aftp_datagram *dg)
{
    aftp_wire_header hdr;
    return aftp_wire_header_decode(dg->head, dg->head_len, &hdr) == AFTP_OK &&
           hdr.type == AFTP_WIRE_CLOSE;
}

static void count_close(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    (void)now;
    *(unsigned *)ctx += (unsigned)is_close(dg);
}

/* A lossier path gets more copies of the quick close (p^n <= 1e-6): at
 * 10% random loss seven or more, at none three. */
static void test_quick_close_copies_follow_loss(void **state)
{
    (void)state;
    for (int lossy = 0; lossy <= 1; lossy++) {
        sim_cfg c;
        sim_result r;
        unsigned closes = 0;
        sim_cfg_default(&c);
        c.fwd.loss = lossy ? 0.10 : 0.0;
        c.fwd_tap = count_close;
        c.fwd_tap_ctx = &closes;
        run_clean(lossy ? "quick close 10%" : "quick close 0%", &c, &r);
        if (lossy)
            assert_true(closes >= 7);
        else
            assert_int_equal(closes, AFTP_SESSION_QUICK_CLOSES);
        sim_result_free(&r);
    }
}

static int drop_sent_close(void *ctx, const aftp_datagram *dg)
{
    (void)ctx;
    return !is_close(dg);
}

/* Every copy of the client's CLOSE lost: the client still ends at once,
 * successfully; the receiver, its file committed, ends on its idle
 * timeout. */
static void test_quick_close_lost(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.fwd_filter = drop_sent_close;
    sim_run(&c, &r);
    sim_report("quick close lost", &c, &r);
    assert_false(r.stuck);
    assert_int_equal(r.snd_error, AFTP_OK);
    assert_true(r.snd_side.ev.closed_at <= r.snd_side.ev.file_end_at + QUICK_CLOSE_NS + SIM_MS);
    assert_true(sim_file_intact(&r.st, 1));
    assert_int_equal(r.rcv_error, AFTP_ERR_IDLE_TIMEOUT);
    assert_true(r.rcv_side.ev.closed_at >= r.snd_side.ev.file_end_at + c.idle_timeout_ns -
                                               c.fwd.delay_ns - c.rev.delay_ns);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_0),
        cmocka_unit_test(test_size_1),
        cmocka_unit_test(test_size_block_minus_1),
        cmocka_unit_test(test_size_block),
        cmocka_unit_test(test_size_block_plus_1),
        cmocka_unit_test(test_size_3mb),
        cmocka_unit_test(test_max_datagram_negotiated),
        cmocka_unit_test(test_small_explicit_blocks),
        cmocka_unit_test(test_three_files),
        cmocka_unit_test(test_loss_1),
        cmocka_unit_test(test_loss_10),
        cmocka_unit_test(test_loss_50),
        cmocka_unit_test(test_loss_50_both_ways),
        cmocka_unit_test(test_bursty_loss),
        cmocka_unit_test(test_reordering),
        cmocka_unit_test(test_duplication),
        cmocka_unit_test(test_loss_reorder_dup_mix),
        cmocka_unit_test(test_receiver_dies),
        cmocka_unit_test(test_sender_dies),
        cmocka_unit_test(test_no_receiver),
        cmocka_unit_test(test_digest_mismatch),
        cmocka_unit_test(test_refused_file_exists),
        cmocka_unit_test(test_verification_in_steps),
        cmocka_unit_test(test_verification_follows_held_prefix),
        cmocka_unit_test(test_sender_aborts_source_changed),
        cmocka_unit_test(test_sender_cancels),
        cmocka_unit_test(test_client_closes_quickly),
        cmocka_unit_test(test_quick_close_lost),
        cmocka_unit_test(test_quick_close_copies_follow_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
