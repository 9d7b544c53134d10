/* A pipelined entry whose source fails mid-send ends alone (label sim,
 * spec 9.14.3, 6.15): the real sender abandons it with an ABANDON, the
 * real receiver discards its partial data and answers FILE_RESULT with
 * the error, and the session goes on: every other file arrives
 * byte-exact, and the session ends OK with that one entry failed. Over a
 * clean and a lossy path, with the ABANDON lost, and with the FILE_RESULT
 * answering it lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"

#define FILES 8u
#define FILE_SIZE (64u * 1024u)
#define BS (1452u - AFTP_WIRE_DATA_OVERHEAD)
#define FAILING 3u              /* the entry whose source fails */
#define FAILS_AT (32u * 1024u)  /* at this offset: half sent */
#define WINDOW 16u

static void set_windows(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = WINDOW;
    r->pipeline_window = WINDOW;
}

/* What a case changes: loss, how the source fails, and which of the
 * abandon's packets to drop. */
typedef struct abandon_case {
    double loss;
    int by_driver;          /* the driver abandons FAILING (aftp_sender_abandon) mid-file,
                             * instead of a view of it failing */
    int drop_abandons;      /* the first N ABANDONs the sender writes are lost */
    int drop_results;       /* the first N FILE_RESULTs for FAILING are lost (plain session) */
    int abandons_seen, results_dropped;
    int fed, abandoned;
} abandon_case;

/* FILES entries; the source of FAILING changes after FAILS_AT bytes. */
static void feed(void *ctx, sim_storage *st, aftp_sender *snd)
{
    const abandon_case *c = ctx;
    for (uint32_t i = 1; i <= FILES; i++) {
        char path[32];
        snprintf(path, sizeof path, "top/f%u", i);
        sim_file *f = sim_storage_add_entry(st, AFTP_ENTRY_FILE, path, FILE_SIZE, BS, NULL);
        if (f->id == FAILING && !c->by_driver) {
            f->source_error = AFTP_ERR_SOURCE_CHANGED;
            f->source_fails_at = FAILS_AT;
        }
        aftp_entry_info e = {.file = {.file_id = f->id, .size = f->size, .mode = 0644,
                                      .block_size = BS, .path = f->path},
                             .kind = AFTP_ENTRY_FILE};
        assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
    }
}

/* The driver's way (by_driver): the entries at the first step; once
 * the sender is half-way through FAILING's bytes, aftp_sender_abandon,
 * as the push driver does when a source's size or mtime moved. */
static int feed_then_abandon(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    (void)now;
    abandon_case *c = ctx;
    aftp_stats stats;
    if (!c->fed) {
        feed(ctx, st, snd);
        c->fed = 1;
    }
    aftp_sender_get_stats(snd, &stats);
    if (!c->abandoned && stats.payload_bytes_sent >= (FAILING - 1) * FILE_SIZE + FAILS_AT) {
        assert_int_equal(aftp_sender_abandon(snd, FAILING, AFTP_ERR_SOURCE_CHANGED), AFTP_OK);
        assert_int_equal(aftp_sender_abandon(snd, FAILING, AFTP_ERR_SOURCE_CHANGED),
                         AFTP_ERR_INVALID_STATE); /* once */
        c->abandoned = 1;
    }
    return 1;
}

static int drop_abandon(void *ctx, const aftp_datagram *dg)
{
    abandon_case *c = ctx;
    if (dg->head[1] != AFTP_WIRE_ABANDON)
        return 1;
    return ++c->abandons_seen > c->drop_abandons;
}

/* In a plain session the FILE_RESULT's file_id follows the header. */
static int drop_result(void *ctx, uint64_t now, const uint8_t *pkt, size_t len)
{
    (void)now;
    abandon_case *c = ctx;
    aftp_wire_packet p;
    if (c->results_dropped >= c->drop_results || aftp_wire_decode(pkt, len, &p) != AFTP_OK ||
        p.hdr.type != AFTP_WIRE_FILE_RESULT || p.u.file_result.file_id != FAILING)
        return 1;
    c->results_dropped++;
    return 0;
}

static void run_abandon(const char *name, abandon_case *c)
{
    sim_cfg cfg;
    sim_result r;
    sim_cfg_default(&cfg);
    cfg.nfiles = 0;
    cfg.fwd.loss = c->loss;
    cfg.rev.loss = c->loss;
    cfg.tune = set_windows;
    cfg.feed = c->by_driver ? NULL : feed;
    cfg.refill = c->by_driver ? feed_then_abandon : NULL;
    cfg.feed_ctx = c;
    cfg.fwd_filter = drop_abandon;
    cfg.fwd_filter_ctx = c;
    if (c->drop_results > 0) {
        cfg.cipher = AFTP_CIPHER_NONE;
        cfg.rev_tap = drop_result;
        cfg.rev_tap_ctx = c;
    }
    sim_run(&cfg, &r);
    sim_report(name, &cfg, &r);
    sim_expect_clean_end(&r);
    /* Both sides end every entry; exactly one failed, with the error. */
    assert_int_equal(r.snd_side.ev.entry_end, FILES);
    assert_int_equal(r.rcv_side.ev.entry_end, FILES);
    assert_int_equal(r.snd_side.ev.entries_failed, 1);
    assert_int_equal(r.rcv_side.ev.entries_failed, 1);
    assert_int_equal(r.snd_side.ev.first_failed_id, FAILING);
    assert_int_equal(r.snd_side.ev.first_failed_error, AFTP_ERR_SOURCE_CHANGED);
    assert_int_equal(r.rcv_side.ev.first_failed_id, FAILING);
    assert_int_equal(r.rcv_side.ev.first_failed_error, AFTP_ERR_SOURCE_CHANGED);
    for (uint32_t id = 1; id <= FILES; id++) {
        sim_file *f = sim_storage_file(&r.st, id);
        assert_int_equal(f->sender_closed, 1); /* released once, abandoned or not */
        if (id == FAILING) {
            assert_false(f->committed); /* discarded, never under its name */
            assert_int_equal(f->receiver_closed, 1);
        } else {
            assert_true(sim_file_intact(&r.st, id));
        }
    }
    assert_true(c->abandons_seen > c->drop_abandons);
    assert_int_equal(c->results_dropped, c->drop_results);
    sim_result_free(&r);
}

static void test_abandon_clean_path(void **state)
{
    (void)state;
    abandon_case c = {0};
    run_abandon("abandon, 0% loss", &c);
    assert_int_equal(c.abandons_seen, 1); /* answered at once: never resent */
}

static void test_abandon_lossy_path(void **state)
{
    (void)state;
    abandon_case c = {.loss = 0.03};
    run_abandon("abandon, 3% loss", &c);
}

static void test_abandon_lost_is_resent(void **state)
{
    (void)state;
    abandon_case c = {.drop_abandons = 2};
    run_abandon("abandon lost twice", &c);
    assert_true(c.abandons_seen >= 3);
}

static void test_abandon_answer_lost(void **state)
{
    (void)state;
    abandon_case c = {.drop_results = 1};
    run_abandon("abandon's FILE_RESULT lost", &c);
    assert_true(c.abandons_seen >= 2); /* resent, answered again */
}

static void test_abandon_by_driver(void **state)
{
    (void)state;
    abandon_case c = {.by_driver = 1, .loss = 0.01};
    run_abandon("abandon by the driver, 1% loss", &c);
    assert_true(c.abandoned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abandon_clean_path),
        cmocka_unit_test(test_abandon_lossy_path),
        cmocka_unit_test(test_abandon_lost_is_resent),
        cmocka_unit_test(test_abandon_answer_lost),
        cmocka_unit_test(test_abandon_by_driver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
