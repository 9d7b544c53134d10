/* aftp_sentlog (ring + block index) checked against a plain model, and
 * aftp_repairq (bounded FIFO without duplicates). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "common/aftp_sentlog.h"
#include "sender/aftp_repairq.h"
#include "sim_link.h"

#define NONE AFTP_SENTLOG_NO_BLOCK

static void test_basic(void **state)
{
    (void)state;
    aftp_sentlog l;
    uint64_t pn, t;
    assert_int_equal(aftp_sentlog_init(&l, 10), AFTP_OK);
    assert_int_equal(aftp_sentlog_slots(&l), AFTP_SENTLOG_MIN_SLOTS);
    aftp_sentlog_add(&l, 1000, NONE); /* pn 0: control */
    aftp_sentlog_add(&l, 1001, 7);    /* pn 1 */
    aftp_sentlog_add(&l, 1002, 8);    /* pn 2 */
    aftp_sentlog_add(&l, 1003, 7);    /* pn 3: block 7 again */
    assert_true(aftp_sentlog_find_block(&l, 7, &pn, &t));
    assert_int_equal(pn, 3);
    assert_int_equal(t, 1003);
    assert_true(aftp_sentlog_sent_time(&l, 0, &t));
    assert_int_equal(t, 1000);
    assert_false(aftp_sentlog_sent_time(&l, 4, &t));
    aftp_sentlog_forget_block(&l, 8);
    assert_false(aftp_sentlog_find_block(&l, 8, &pn, &t));
    /* pn 0 (control), 1 (superseded), 2 (forgotten) are decided; pn 3 holds. */
    aftp_sentlog_retire(&l, 0);
    assert_int_equal(l.tail_pn, 3);
    assert_true(aftp_sentlog_sent_time(&l, 2, &t)); /* retired, still in the ring */
    assert_int_equal(t, 1002);
    aftp_sentlog_retire(&l, 8); /* block 7 < 8: acknowledged */
    assert_int_equal(l.tail_pn, 4);
    assert_false(aftp_sentlog_find_block(&l, 7, &pn, &t));
    aftp_sentlog_free(&l);
}

static void test_size_clamp(void **state)
{
    (void)state;
    aftp_sentlog l;
    assert_int_equal(aftp_sentlog_init(&l, UINT64_C(1) << 40), AFTP_OK);
    assert_int_equal(aftp_sentlog_slots(&l), AFTP_SENTLOG_MAX_SLOTS);
    aftp_sentlog_free(&l);
    assert_int_equal(aftp_sentlog_init(&l, 3000), AFTP_OK);
    assert_int_equal(aftp_sentlog_slots(&l), 4096);
    aftp_sentlog_free(&l);
}

/* The model keeps every record and a direct-mapped owner table like the
 * index: a block is found while the entry for (block % size) belongs to
 * its latest, still undecided record. */
typedef struct model {
    aftp_sentlog_rec *rec; /* every record ever added, by pn */
    uint64_t *owner;       /* index entry -> pn + 1, 0 = empty */
    uint64_t isize, head, tail;
} model;

static int64_t model_find(const model *m, uint64_t block)
{
    uint64_t o = m->owner[block % m->isize];
    return o != 0 && m->rec[o - 1].block == block ? (int64_t)o - 1 : -1;
}

/* A record stops being findable. */
static void model_decide(model *m, uint64_t pn)
{
    uint64_t block = m->rec[pn].block;
    if (block != NONE && m->owner[block % m->isize] == pn + 1)
        m->owner[block % m->isize] = 0;
    m->rec[pn].block = NONE;
}

static void model_add(model *m, uint64_t cap, uint64_t t, uint64_t block)
{
    if (m->head - m->tail == cap)
        model_decide(m, m->tail++);
    if (block != NONE && model_find(m, block) >= 0)
        model_decide(m, (uint64_t)model_find(m, block));
    m->rec[m->head] = (aftp_sentlog_rec){.block = block, .sent_ns = t};
    if (block != NONE)
        m->owner[block % m->isize] = m->head + 1;
    m->head++;
}

static void model_retire(model *m, uint64_t acked)
{
    while (m->tail < m->head && (m->rec[m->tail].block == NONE || m->rec[m->tail].block < acked))
        model_decide(m, m->tail++);
}

static void test_random_against_model(void **state)
{
    (void)state;
    enum { OPS = 60000, BLOCKS = 3000 }; /* more blocks than index entries: collisions */
    aftp_sentlog l;
    uint64_t acked = 0, rng = 7;
    assert_int_equal(aftp_sentlog_init(&l, 1), AFTP_OK);
    uint64_t cap = aftp_sentlog_slots(&l);
    model m = {.rec = calloc(OPS, sizeof(aftp_sentlog_rec)), .isize = 2 * cap};
    m.owner = calloc(m.isize, sizeof *m.owner);
    for (int op = 0; op < OPS; op++) {
        uint64_t r = sim_rand(&rng) % 100;
        uint64_t b = sim_rand(&rng) % BLOCKS;
        if (r < 85) {
            uint64_t block = r < 5 ? NONE : b;
            model_add(&m, cap, (uint64_t)op, block);
            aftp_sentlog_add(&l, (uint64_t)op, block);
        } else if (r < 95) {
            if (model_find(&m, b) >= 0)
                model_decide(&m, (uint64_t)model_find(&m, b));
            aftp_sentlog_forget_block(&l, b);
        } else {
            acked += sim_rand(&rng) % 20;
            model_retire(&m, acked);
            aftp_sentlog_retire(&l, acked);
        }
        assert_int_equal(l.tail_pn, m.tail);
        assert_int_equal(l.head_pn, m.head);
        for (int probe = 0; probe < 4; probe++) {
            uint64_t q = sim_rand(&rng) % BLOCKS, pn, t;
            int64_t want = model_find(&m, q);
            int found = aftp_sentlog_find_block(&l, q, &pn, &t);
            assert_int_equal(found, want >= 0);
            if (found) {
                assert_int_equal(pn, (uint64_t)want);
                assert_int_equal(t, m.rec[pn].sent_ns);
            }
        }
    }
    aftp_sentlog_free(&l);
    free(m.rec);
    free(m.owner);
}

/* The DATA count up to a packet: exact across thousands of control
 * packets (a pipelined session's FILE_DONEs), kept when the records are
 * retired, unknown once the ring has reused the slot. */
static void test_data_upto(void **state)
{
    (void)state;
    aftp_sentlog l;
    uint64_t count;
    assert_int_equal(aftp_sentlog_init(&l, 1), AFTP_OK);
    uint64_t slots = aftp_sentlog_slots(&l), block = 0;
    for (uint64_t pn = 0; pn < 3 * slots; pn++) /* every third packet a control */
        aftp_sentlog_add(&l, pn, pn % 3 == 2 ? AFTP_SENTLOG_NO_BLOCK : block++);
    aftp_sentlog_retire(&l, UINT64_MAX);
    for (uint64_t pn = 2 * slots; pn < 3 * slots; pn++) {
        assert_int_equal(aftp_sentlog_data_upto(&l, pn, &count), 1);
        assert_int_equal(count, pn + 1 - (pn + 1) / 3);
    }
    assert_int_equal(aftp_sentlog_data_upto(&l, 2 * slots - 1, &count), 0);
    assert_int_equal(aftp_sentlog_data_upto(&l, 3 * slots, &count), 0);
    aftp_sentlog_free(&l);
}

static void test_repairq(void **state)
{
    (void)state;
    aftp_repairq q;
    uint64_t b;
    assert_int_equal(aftp_repairq_init(&q, 3), AFTP_OK); /* rounded up to 4 */
    aftp_repairq_reset(&q, 100);
    assert_int_equal(aftp_repairq_push(&q, 5), 1);
    assert_int_equal(aftp_repairq_push(&q, 5), 0); /* already queued */
    assert_int_equal(aftp_repairq_push(&q, 100), 0); /* out of range */
    assert_int_equal(aftp_repairq_push(&q, 2), 1);
    assert_int_equal(aftp_repairq_push(&q, 99), 1);
    assert_int_equal(aftp_repairq_push(&q, 8), 1);
    assert_int_equal(aftp_repairq_push(&q, 6), 0); /* full */
    assert_false(aftp_repairq_contains(&q, 6));
    assert_true(aftp_repairq_contains(&q, 99));
    assert_int_equal(aftp_repairq_len(&q), 4);
    const uint64_t order[] = {5, 2, 99, 8};
    for (int i = 0; i < 4; i++) {
        assert_true(aftp_repairq_pop(&q, &b));
        assert_int_equal(b, order[i]);
        assert_false(aftp_repairq_contains(&q, b));
    }
    assert_false(aftp_repairq_pop(&q, &b));
    assert_int_equal(aftp_repairq_push(&q, 5), 1); /* queued again after leaving */
    aftp_repairq_reset(&q, 10);
    assert_int_equal(aftp_repairq_len(&q), 0);
    assert_false(aftp_repairq_contains(&q, 5));
    aftp_repairq_free(&q);
}

/* Memory does not follow the file's size: the last block of a file of
 * 2^56 blocks (the wire's limit) is queued like the first. A block whose
 * index entry another queued block holds (a capacity apart) waits until
 * that one leaves. */
static void test_repairq_huge_file(void **state)
{
    (void)state;
    aftp_repairq q;
    uint64_t b, last = (UINT64_C(1) << 56) - 1;
    assert_int_equal(aftp_repairq_init(&q, 1024), AFTP_OK);
    aftp_repairq_reset(&q, last + 1);
    assert_int_equal(aftp_repairq_push(&q, last), 1);
    assert_int_equal(aftp_repairq_push(&q, 0), 1);
    assert_true(aftp_repairq_contains(&q, last));
    assert_false(aftp_repairq_contains(&q, last - 1024)); /* same entry, not queued */
    assert_int_equal(aftp_repairq_push(&q, last - 1024), 0);
    assert_true(aftp_repairq_pop(&q, &b));
    assert_int_equal(b, last);
    assert_false(aftp_repairq_contains(&q, last));
    assert_int_equal(aftp_repairq_push(&q, last - 1024), 1); /* its entry is free now */
    assert_true(aftp_repairq_contains(&q, last - 1024));
    assert_true(aftp_repairq_contains(&q, 0));
    aftp_repairq_free(&q);
    assert_int_equal(aftp_repairq_init(&q, AFTP_REPAIRQ_MAX_CAPACITY + 1),
                     AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_size_clamp),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_data_upto),
        cmocka_unit_test(test_repairq),
        cmocka_unit_test(test_repairq_huge_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
