/* Sparse files in pipelined mode end to end (label sim): the real sender
 * and receiver engines, a file's holes announced in its ENTRIES record
 * (flag HOLES, spec 6.13). The blocks wholly inside holes are never sent
 * nor written, the file arrives byte-exact and verified, and a RESUME
 * whose held ranges overlap the holes sends only the union's complement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/aftp_wire.h"
#include "sim_run.h"

#define BS 1024u
#define SPARSE_SIZE (300u * BS + 100u) /* 301 blocks, the last of 100 bytes */
#define WINDOW 16u

/* Holes in bytes: the first ends inside block 10 (which stays data), the
 * last runs to the end of the file (the short last block is a hole). */
static const aftp_byte_range sparse_holes[] = {
    {0, 10 * BS + 500}, {50 * BS, 70 * BS}, {200 * BS + 1, 100 * BS + 99}};
#define SPARSE_HOLES (sizeof sparse_holes / sizeof sparse_holes[0])

typedef struct sparse_case {
    int resume;              /* file 2 is resumed from a partial copy */
    aftp_block_range held[2]; /* its held blocks, overlapping the holes */
    size_t held_count;
    uint64_t hole_blocks;    /* hole blocks of one sparse file, from the test's own count */
} sparse_case;

/* Block b of a sparse file lies wholly inside a hole. */
static int in_hole(uint64_t b)
{
    uint64_t lo = b * BS, hi = lo + aftp_wire_block_len(SPARSE_SIZE, BS, b);
    for (size_t i = 0; i < SPARSE_HOLES; i++)
        if (lo >= sparse_holes[i].off && hi <= sparse_holes[i].off + sparse_holes[i].len)
            return 1;
    return 0;
}

/* Block b of file `id` was held by RESUME (the storage's own list is
 * gone once the file closed: the case keeps it). */
static int in_held(const sparse_case *c, uint32_t id, uint64_t b)
{
    for (size_t i = 0; c->resume && id == 2 && i < c->held_count; i++)
        if (b >= c->held[i].start && b - c->held[i].start < c->held[i].len)
            return 1;
    return 0;
}

/* A sparse FILE entry: its source reads as zeros in the holes. */
static void add_sparse(sim_storage *st, aftp_sender *snd, const char *path, unsigned flags)
{
    sim_file *f = sim_storage_add_entry(st, AFTP_ENTRY_FILE, path, SPARSE_SIZE, BS, NULL);
    for (size_t i = 0; i < SPARSE_HOLES; i++)
        memset(f->src + sparse_holes[i].off, 0, sparse_holes[i].len);
    aftp_entry_info e = {.file = {.file_id = f->id, .size = f->size, .mode = 0644,
                                  .block_size = BS, .path = path},
                         .kind = AFTP_ENTRY_FILE, .flags = flags, .source_id = 7,
                         .holes = sparse_holes, .hole_count = SPARSE_HOLES};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
}

/* Entry 1 sparse, entry 2 sparse (resumed when asked), entry 3 an
 * ordinary file, entry 4 nothing but a hole. */
static void feed(void *ctx, sim_storage *st, aftp_sender *snd)
{
    const sparse_case *c = ctx;
    add_sparse(st, snd, "vm/a.img", 0);
    add_sparse(st, snd, "vm/b.img", AFTP_ENTRY_RESUME);
    if (c->resume) {
        sim_file *b = sim_storage_file(st, 2);
        memcpy(b->held, c->held, sizeof c->held);
        b->held_count = c->held_count;
    }
    sim_file *plain = sim_storage_add_entry(st, AFTP_ENTRY_FILE, "plain", 5 * BS + 3, BS, NULL);
    aftp_entry_info e = {.file = {.file_id = plain->id, .size = plain->size, .mode = 0644,
                                  .block_size = BS, .path = "plain"},
                         .kind = AFTP_ENTRY_FILE};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
    sim_file *empty = sim_storage_add_entry(st, AFTP_ENTRY_FILE, "zeros", 64 * BS, BS, NULL);
    memset(empty->src, 0, empty->size);
    aftp_byte_range all = {0, empty->size};
    e = (aftp_entry_info){.file = {.file_id = empty->id, .size = empty->size, .mode = 0644,
                                   .block_size = BS, .path = "zeros"},
                          .kind = AFTP_ENTRY_FILE, .holes = &all, .hole_count = 1};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
}

/* A block map window of 128 blocks: smaller than the files, so it moves
 * only if cum_block passes the hole blocks (held at the verdict, spec
 * 9.14.2), as it passes received ones. */
static void set_windows(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = WINDOW;
    r->pipeline_window = WINDOW;
    r->map_window_blocks = 128;
}

/* Bytes the sender must send first-hand of file f: every block neither
 * in a hole (sparse files) nor held by RESUME. */
static uint64_t wanted_bytes(const sparse_case *c, const sim_file *f, int sparse)
{
    uint64_t bytes = 0;
    for (uint64_t b = 0; b < f->blocks; b++)
        if (!(sparse && in_hole(b)) && !in_held(c, f->id, b))
            bytes += aftp_wire_block_len(f->size, BS, b);
    return bytes;
}

/* File id arrived byte-exact and committed; each block written once,
 * except hole blocks, never written (held ones were preloaded once). */
static void expect_arrived(const sparse_case *c, sim_storage *st, uint32_t id, int sparse)
{
    sim_file *f = sim_storage_file(st, id);
    assert_true(f->committed);
    assert_memory_equal(f->dst, f->src, f->size);
    for (uint64_t b = 0; b < f->blocks; b++) {
        int hole = (sparse && in_hole(b)) || (id == 4);
        assert_int_equal(f->writes[b], hole && !in_held(c, id, b) ? 0 : 1);
    }
}

typedef void (*feed_fn)(void *ctx, sim_storage *st, aftp_sender *snd);

/* Runs both engines over the entries `fn` adds, `loss` each way; the
 * session must end cleanly. */
static void run_fed(const char *name, feed_fn fn, void *ctx, double loss, sim_result *r)
{
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.nfiles = 0;
    cfg.fwd.loss = loss;
    cfg.rev.loss = loss;
    cfg.tune = set_windows;
    cfg.feed = fn;
    cfg.feed_ctx = ctx;
    sim_run(&cfg, r);
    sim_report(name, &cfg, r);
    assert_false(r->stuck);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
    assert_int_equal(r->snd_side.ev.last_file_error, AFTP_OK);
}

static void run_sparse(const char *name, sparse_case *c, double loss)
{
    sim_result r;
    run_fed(name, feed, c, loss, &r);
    assert_int_equal(r.snd_side.ev.file_end, 4);
    assert_int_equal(r.rcv_side.ev.file_end, 4);
    uint64_t wanted = 0;
    for (uint32_t id = 1; id <= 4; id++) {
        int sparse = id <= 2;
        expect_arrived(c, &r.st, id, sparse);
        wanted += id == 4 ? 0 : wanted_bytes(c, sim_storage_file(&r.st, id), sparse);
    }
    /* First transmissions: exactly the data blocks, no hole block. */
    assert_int_equal(r.snd.payload_bytes_sent - r.snd.payload_bytes_retransmitted, wanted);
    print_message("%s: %llu payload bytes sent first-hand of %llu bytes of files\n", name,
                  (unsigned long long)wanted, (unsigned long long)(2u * SPARSE_SIZE + 69 * BS + 3));
    sim_result_free(&r);
}

static void test_sparse_files_send_no_hole(void **state)
{
    (void)state;
    sparse_case c = {0};
    run_sparse("sparse, no loss", &c, 0.0);
}

static void test_sparse_files_over_loss(void **state)
{
    (void)state;
    sparse_case c = {0};
    run_sparse("sparse, 3% loss", &c, 0.03);
}

/* RESUME's held blocks 5-14 and 110-129 overlap the holes (blocks 0-9,
 * 50-119): the union is held, the rest is sent. */
static void test_resume_and_holes_overlap(void **state)
{
    (void)state;
    sparse_case c = {.resume = 1, .held = {{5, 10}, {110, 20}}, .held_count = 2};
    run_sparse("sparse resumed", &c, 0.01);
}

/* ---- a hole list longer than an ENTRIES can carry ---- */

#define MANY_HOLES 1000u
#define MANY_SIZE (4u * MANY_HOLES * BS)

/* Hole i covers blocks [4i, 4i + len): one block, three for every
 * hundredth; each is followed by data. */
static aftp_byte_range many_holes[MANY_HOLES];

static void feed_many(void *ctx, sim_storage *st, aftp_sender *snd)
{
    (void)ctx;
    sim_file *f = sim_storage_add_entry(st, AFTP_ENTRY_FILE, "many", MANY_SIZE, BS, NULL);
    for (uint32_t i = 0; i < MANY_HOLES; i++) {
        many_holes[i] = (aftp_byte_range){4u * i * BS, (i % 100 == 0 ? 3u : 1u) * BS};
        memset(f->src + many_holes[i].off, 0, many_holes[i].len);
    }
    aftp_entry_info e = {.file = {.file_id = f->id, .size = f->size, .mode = 0644,
                                  .block_size = BS, .path = "many"},
                         .kind = AFTP_ENTRY_FILE, .holes = many_holes, .hole_count = MANY_HOLES};
    assert_int_equal(aftp_sender_add_entry(snd, &e), AFTP_OK);
}

/* 1000 holes take about 2000 bytes of ranges, more than a 1452-byte
 * datagram: the sender sends its smallest holes as data until the rest
 * fit (spec 6.13), and the file still arrives byte-exact; its largest
 * holes are kept. */
static void test_too_many_holes_smallest_sent_as_data(void **state)
{
    (void)state;
    sim_result r;
    run_fed("many holes", feed_many, NULL, 0.0, &r);
    sim_file *f = sim_storage_file(&r.st, 1);
    assert_true(f->committed);
    assert_memory_equal(f->dst, f->src, f->size);
    uint64_t hole_blocks = 0, unwritten = 0;
    for (uint32_t i = 0; i < MANY_HOLES; i++)
        hole_blocks += many_holes[i].len / BS;
    for (uint64_t b = 0; b < f->blocks; b++)
        unwritten += f->writes[b] == 0;
    for (uint32_t i = 0; i < MANY_HOLES; i += 100) /* the three-block holes stay holes */
        for (uint64_t b = 4u * i; b < 4u * i + 3u; b++)
            assert_int_equal(f->writes[b], 0);
    uint64_t sent = r.snd.payload_bytes_sent - r.snd.payload_bytes_retransmitted;
    print_message("%u holes (%llu blocks): %llu blocks left unsent, %llu payload bytes sent "
                  "first-hand of %u\n",
                  MANY_HOLES, (unsigned long long)hole_blocks, (unsigned long long)unwritten,
                  (unsigned long long)sent, MANY_SIZE);
    assert_true(unwritten > 30 && unwritten < hole_blocks);
    assert_int_equal(sent, (f->blocks - unwritten) * BS);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sparse_files_send_no_hole),
        cmocka_unit_test(test_sparse_files_over_loss),
        cmocka_unit_test(test_resume_and_holes_overlap),
        cmocka_unit_test(test_too_many_holes_smallest_sent_as_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
