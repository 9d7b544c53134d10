/* The lock-free delay line between aftp-linkemu's ingest and dispatch
 * threads: FIFO order and content across wraps, refusal when full, and one
 * producer and one consumer thread running at once. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "linkemu_ring.h"

/* Deterministic lengths 0..max and bytes, so the consumer can check both. */
static uint32_t len_of(uint64_t seq, uint32_t max)
{
    return (uint32_t)((seq * 2654435761u) % (max + 1));
}

static uint8_t byte_of(uint64_t seq, uint32_t i)
{
    return (uint8_t)(seq * 31 + i * 7);
}

static int push(struct linkemu_ring *r, uint64_t seq, uint32_t max)
{
    uint32_t len = len_of(seq, max);
    struct linkemu_record *rec = linkemu_ring_reserve(r, len);
    if (!rec)
        return 0;
    rec->due_ns = seq;
    rec->len = len;
    rec->copies = 1;
    for (uint32_t i = 0; i < len; i++)
        rec->data[i] = byte_of(seq, i);
    linkemu_ring_commit(r, rec);
    return 1;
}

/* Pops the next record and checks it is `seq`, whole. */
static void pop_expect(struct linkemu_ring *r, uint64_t seq, uint32_t max)
{
    struct linkemu_record *rec = linkemu_ring_peek(r);
    assert_non_null(rec);
    assert_int_equal(rec->due_ns, seq);
    assert_int_equal(rec->len, len_of(seq, max));
    for (uint32_t i = 0; i < rec->len; i++)
        assert_int_equal(rec->data[i], byte_of(seq, i));
    linkemu_ring_pop(r);
}

static uint8_t *area(size_t size)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, size), 0);
    memset(p, 0xa5, size); /* stale bytes must never read as a record */
    return p;
}

/* A small ring, kept between half and almost full while thousands of
 * records of every length pass: each wraps the area many times. */
static void fifo_order_and_content_across_wraps(void **state)
{
    (void)state;
    const size_t size = 1024;
    const uint32_t max = 200;
    uint8_t *buf = area(size);
    struct linkemu_ring r;
    linkemu_ring_init(&r, buf, size);
    uint64_t pushed = 0, popped = 0;
    while (popped < 20000) {
        while (push(&r, pushed, max))
            pushed++;
        assert_true(pushed > popped); /* an empty ring takes any record that fits */
        uint64_t keep = (pushed - popped) / 2;
        while (pushed - popped > keep)
            pop_expect(&r, popped++, max);
    }
    while (popped < pushed)
        pop_expect(&r, popped++, max);
    assert_null(linkemu_ring_peek(&r));
    free(buf);
}

/* Full means full: the refused record leaves the ring as it was, and the
 * room one pop frees is used again. */
static void full_ring_refuses_then_reuses_room(void **state)
{
    (void)state;
    const size_t size = 4096;
    uint8_t *buf = area(size);
    struct linkemu_ring r;
    linkemu_ring_init(&r, buf, size);
    const size_t rec = linkemu_record_size(1500);
    uint64_t n = 0;
    while (push(&r, n, 0) && n < 1000) /* 16-byte records: 256 fit */
        n++;
    assert_int_equal(n, size / linkemu_record_size(0));
    assert_null(linkemu_ring_reserve(&r, 1500));
    for (uint64_t i = 0; i < rec / linkemu_record_size(0); i++)
        pop_expect(&r, i, 0);
    assert_non_null(linkemu_ring_reserve(&r, 1500)); /* reserved, not committed */
    for (uint64_t i = rec / linkemu_record_size(0); i < n; i++)
        pop_expect(&r, i, 0);
    assert_null(linkemu_ring_peek(&r));
    free(buf);
}

static void empty_area_is_always_full_and_empty(void **state)
{
    (void)state;
    struct linkemu_ring r;
    linkemu_ring_init(&r, NULL, 0);
    assert_null(linkemu_ring_reserve(&r, 0));
    assert_null(linkemu_ring_peek(&r));
}

#define STRESS_RECORDS 300000u
#define STRESS_MAX_LEN 1500u

static void *stress_producer(void *arg)
{
    struct linkemu_ring *r = arg;
    for (uint64_t seq = 0; seq < STRESS_RECORDS;)
        if (push(r, seq, STRESS_MAX_LEN))
            seq++;
        else
            sched_yield();
    return NULL;
}

/* The producer fills while the consumer drains: every record arrives once,
 * in order and whole (a record read before its bytes were published, or a
 * wrap missed by either side, fails the content check). */
static void producer_and_consumer_threads(void **state)
{
    (void)state;
    const size_t size = 64 * 1024;
    uint8_t *buf = area(size);
    struct linkemu_ring r;
    linkemu_ring_init(&r, buf, size);
    pthread_t producer;
    assert_int_equal(pthread_create(&producer, NULL, stress_producer, &r), 0);
    for (uint64_t seq = 0; seq < STRESS_RECORDS;) {
        if (!linkemu_ring_peek(&r)) {
            sched_yield();
            continue;
        }
        pop_expect(&r, seq++, STRESS_MAX_LEN);
    }
    pthread_join(producer, NULL);
    assert_null(linkemu_ring_peek(&r));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_order_and_content_across_wraps),
        cmocka_unit_test(full_ring_refuses_then_reuses_room),
        cmocka_unit_test(empty_area_is_always_full_and_empty),
        cmocka_unit_test(producer_and_consumer_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
