/* Files of any size the wire allows (spec sections 4.2, 9.5, 14.7): a
 * 16 TiB offer is accepted and its blocks move with the receiver's block
 * map within its stated memory; the map's window drops DATA beyond it as
 * if lost, takes it once the window has moved, and a whole transfer
 * through a small window is still byte-exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/aftp_blockmap.h"
#include "sim_run.h"
#include "sim_script.h"

#define TIB (UINT64_C(1) << 40)
#define DEFAULT_BLOCK 1408u
/* The map of the default window: one bit per block and a 1/64 summary. */
#define MAP_BOUND (AFTP_RECEIVER_MAP_WINDOW / 8 + AFTP_RECEIVER_MAP_WINDOW / 64 / 8)
/* Its first ring, all that blocks arriving near the first missing one need. */
#define MAP_FIRST (AFTP_BLOCKMAP_FIRST_RING / 8 + AFTP_BLOCKMAP_FIRST_RING / 64 / 8)

/* The engines on the virtual clock: the 16 TiB offer is accepted, the
 * first blocks arrive intact, and the receiver's map stays within the
 * window's bound (a bit per block would be 1.5 GiB), grown only as far
 * as the blocks reached. */
static void test_16tib_through_the_engines(void **state)
{
    (void)state;
    sim_cfg c;
    sim_result r;
    sim_cfg_default(&c);
    c.file_size = 16 * TIB;
    c.sender_cancels_at = 2 * SIM_S;
    c.time_limit_ns = 10 * SIM_S;
    sim_run(&c, &r);
    const sim_file *f = sim_storage_file(&r.st, 1);
    assert_int_equal(r.rcv_side.ev.file_start, 1);
    assert_int_equal(r.snd_error, AFTP_ERR_CANCELLED);
    assert_true(r.rcv.payload_bytes_received > 10 * 1000 * 1000);
    assert_int_equal(f->blocks_written * DEFAULT_BLOCK, r.rcv.payload_bytes_received);
    assert_int_equal(f->wrong_bytes, 0);
    assert_int_equal(f->bad_writes, 0);
    assert_true(r.rcv.map_bytes >= MAP_FIRST);
    assert_true(r.rcv.map_bytes < MAP_BOUND);
    assert_int_equal(r.rcv.beyond_window_packets, 0);
    sim_result_free(&r);
}

/* A scripted sender moves the file's first blocks and its last one: the
 * last is beyond the window, dropped before any write and counted; after
 * FILE_DONE the FEEDBACK lists it missing, as everything past the held
 * start. */
static void test_16tib_start_and_end(void **state)
{
    (void)state;
    sim_script g;
    aftp_stats st;
    sim_script_start(&g, 16 * TIB, NULL);
    const uint64_t blocks = (16 * TIB + DEFAULT_BLOCK - 1) / DEFAULT_BLOCK;
    assert_int_equal(sim_script_connect_and_offer(&g, DEFAULT_BLOCK), AFTP_WIRE_ERR_NONE);
    for (uint64_t b = 0; b < 100; b++)
        assert_int_equal(sim_script_data(&g, b, DEFAULT_BLOCK), AFTP_OK);
    assert_int_equal(sim_script_data(&g, blocks - 1, DEFAULT_BLOCK), AFTP_OK);
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.payload_bytes_received, 100 * DEFAULT_BLOCK);
    assert_int_equal(st.beyond_window_packets, 1);
    assert_int_equal(st.duplicate_packets, 0);
    assert_int_equal(st.map_bytes, MAP_FIRST); /* the last block was beyond the window */
    assert_int_equal(g.st.files[0].writes_total, 100);
    assert_int_equal(g.st.files[0].wrong_bytes, 0);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_done = (aftp_wire_file_done){.file_id = 1, .block_count = blocks};
    assert_int_equal(sim_script_send(&g, &p, AFTP_WIRE_FILE_DONE), AFTP_OK);
    int feedback = 0;
    for (g.clock = 0; !feedback && g.clock < SIM_S; g.clock += SIM_MS) {
        sim_script_tick(&g);
        while (!feedback && sim_script_next(&g))
            feedback = g.out.hdr.type == AFTP_WIRE_FEEDBACK;
    }
    assert_true(feedback);
    const aftp_wire_feedback *fb = &g.out.u.feedback;
    assert_int_equal(fb->cum_block, 100);
    assert_int_equal(fb->blocks_received, 100);
    assert_int_equal(fb->scan_end, blocks);
    assert_int_equal(fb->range_count, 1);
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, fb);
    assert_true(aftp_wire_ranges_next(&it, &rg));
    assert_int_equal(rg.start, 100);
    assert_int_equal(rg.len, blocks - 100);
    sim_script_free(&g);
}

static void window_of_64(aftp_receiver_settings *s)
{
    s->map_window_blocks = 64;
}

/* DATA beyond the window is dropped before any write (counted apart from
 * duplicates) and taken once the blocks below it have moved the window. */
static void test_window_drops_then_accepts(void **state)
{
    (void)state;
    sim_script g;
    aftp_stats st;
    sim_script_start(&g, 200 * 100, window_of_64); /* 200 blocks of 100 */
    assert_int_equal(sim_script_connect_and_offer(&g, 100), AFTP_WIRE_ERR_NONE);
    assert_int_equal(sim_script_data(&g, 63, 100), AFTP_OK); /* the window's last */
    assert_int_equal(sim_script_data(&g, 64, 100), AFTP_OK); /* beyond: dropped */
    assert_int_equal(sim_script_data(&g, 150, 100), AFTP_OK);
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.beyond_window_packets, 2);
    assert_int_equal(st.duplicate_packets, 0);
    assert_int_equal(st.payload_bytes_received, 100);
    assert_int_equal(g.st.files[0].writes[64], 0);
    assert_int_equal(st.map_bytes, 16); /* 64 bits and their summary word */
    /* The first FEEDBACK: DATA beyond the window arrived (packets_received
     * counts it: the path delivered it) but is missing, and outside the
     * reportable area until a block beyond it is held. */
    sim_script_tick(&g);
    assert_true(sim_script_next(&g));
    assert_int_equal(g.out.hdr.type, AFTP_WIRE_FEEDBACK);
    assert_int_equal(g.out.u.feedback.packets_received, 3);
    assert_int_equal(g.out.u.feedback.blocks_received, 1);
    assert_int_equal(g.out.u.feedback.scan_end, 64);
    for (uint64_t b = 0; b < 63; b++)
        assert_int_equal(sim_script_data(&g, b, 100), AFTP_OK);
    assert_int_equal(sim_script_data(&g, 64, 100), AFTP_OK); /* the window moved */
    aftp_receiver_get_stats(g.r, &st);
    assert_int_equal(st.beyond_window_packets, 2);
    assert_int_equal(st.payload_bytes_received, 65 * 100);
    assert_int_equal(g.st.files[0].writes[64], 1);
    sim_script_free(&g);
}

static void tune_window(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)s;
    r->map_window_blocks = *(const uint64_t *)ctx;
}

/* A whole protected transfer of `size` bytes at 1% loss through a
 * receiver window of `window` blocks, the sender on `policy`: the sender
 * repairs what the receiver discarded beyond the window as it repairs
 * losses, and the file arrives byte-exact, each block written once. */
static void transfer_through_window(const char *name, uint64_t window, int policy, uint64_t size,
                                    sim_result *r)
{
    sim_cfg c;
    sim_cfg_default(&c);
    c.file_size = size;
    c.fwd.loss = 0.01;
    c.policy = policy;
    c.tune = tune_window;
    c.tune_ctx = &window;
    c.time_limit_ns = 60 * SIM_S;
    sim_run(&c, r);
    sim_report(name, &c, r);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
    assert_true(sim_file_intact(&r->st, 1));
    assert_true(r->rcv.beyond_window_packets > 0);
}

/* Through a 64-block window at a fixed rate: every loss fills the window
 * (the sender has ~700 blocks in flight). */
static void test_small_window_transfer_byte_exact(void **state)
{
    (void)state;
    sim_result r;
    transfer_through_window("window-64", 64, AFTP_CC_FIXED, 3 * 1000 * 1000, &r);
    assert_int_equal(r.rcv.map_bytes, 16);
    sim_result_free(&r);
}

/* 30 MB through a 1536-block window with a fair sender (its flight grows
 * to about twice the path's 1 MB bandwidth-delay product, ~1400 blocks,
 * so DATA lands beyond the window; a 1024-block window makes the sender
 * resend past its bound, spec 9.5): DATA beyond the
 * window is authenticated before it is discarded, so its packet number is
 * acknowledged (a lost repair of the block holding the window back is
 * detected) and it keeps the session alive; and it counts as delivered,
 * so the rate controller does not take a full window for congestion. */
static void test_small_window_fair_sender_completes(void **state)
{
    (void)state;
    sim_result r;
    transfer_through_window("window-1536-fair", 1536, AFTP_CC_FAIR, 30 * 1000 * 1000, &r);
    sim_result_free(&r);
}

/* A receiver needs a window to bound its map: none is a bad setting. */
static void test_window_setting_checked(void **state)
{
    (void)state;
    aftp_sender_settings unused;
    sim_side side = {0};
    aftp_receiver_settings s;
    aftp_receiver *r = NULL;
    sim_engine_settings(&unused, &side, &s, &side);
    s.map_window_blocks = 0;
    assert_int_equal(aftp_receiver_new(&s, 0, &r), AFTP_ERR_INVALID_ARGUMENT);
    assert_null(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_16tib_through_the_engines),
        cmocka_unit_test(test_16tib_start_and_end),
        cmocka_unit_test(test_window_drops_then_accepts),
        cmocka_unit_test(test_small_window_transfer_byte_exact),
        cmocka_unit_test(test_small_window_fair_sender_completes),
        cmocka_unit_test(test_window_setting_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
