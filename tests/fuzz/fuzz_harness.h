/*
 * Shared by the libFuzzer harnesses, their standalone replay driver and the
 * seed generator: the fuzzing entry point and the property check.
 */
#ifndef AFTP_FUZZ_HARNESS_H
#define AFTP_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Called once per input, by libFuzzer or by replay_main.c. Returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken property aborts, so libFuzzer saves the input as a crash and the
 * corpus replay fails in every build. Not assert(): it must survive NDEBUG. */
#define FUZZ_CHECK(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))

__attribute__((noreturn)) static inline void fuzz_fail(const char *what, const char *file,
                                                       int line)
{
    fprintf(stderr, "%s:%d: property violated: %s\n", file, line, what);
    abort();
}

/* Whether [p, p + n) lies inside [base, base + size): a decoded packet may
 * only borrow bytes of the datagram it came from. */
static inline int fuzz_inside(const uint8_t *base, size_t size, const uint8_t *p, size_t n)
{
    uintptr_t b = (uintptr_t)base, q = (uintptr_t)p;
    return q >= b && n <= size && q - b <= size - n;
}

#endif /* AFTP_FUZZ_HARNESS_H */
