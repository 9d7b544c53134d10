/*
 * Reading a fuzzer's input as a stream of fields, for the structure-aware
 * harnesses. Reads past the end yield zeros, so every input is usable and a
 * short input means "the rest is zero".
 */
#ifndef AFTP_FUZZ_INPUT_H
#define AFTP_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_input {
    const uint8_t *p;
    size_t left;
} fuzz_input;

/* The next n bytes (n <= 8) as a big-endian integer. */
static inline uint64_t fuzz_take(fuzz_input *in, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        v <<= 8;
        if (in->left > 0) {
            v |= *in->p++;
            in->left--;
        }
    }
    return v;
}

/* A selector byte whose low 2 bits pick a width of 1, 2, 4 or 8 bytes, then
 * the value: small values keep structures valid, wide ones reach limits. */
static inline uint64_t fuzz_take_value(fuzz_input *in)
{
    static const size_t widths[4] = {1, 2, 4, 8};
    return fuzz_take(in, widths[fuzz_take(in, 1) & 3]);
}

/* A list length: the byte itself below 0xf0 (short lists, cheap runs), else
 * a u16 follows, taken modulo `longest` + 1. */
static inline size_t fuzz_take_count(fuzz_input *in, size_t longest)
{
    uint64_t c = fuzz_take(in, 1);
    return (size_t)(c < 0xf0 ? c : fuzz_take(in, 2) % (longest + 1));
}

#endif /* AFTP_FUZZ_INPUT_H */
