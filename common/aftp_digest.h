/*
 * Whole-file digest: streaming XXH3-128, output in canonical (big-endian)
 * form as it travels in FILE_DONE and FILE_RESULT.
 */
#ifndef AFTP_DIGEST_H
#define AFTP_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define AFTP_DIGEST_BYTES 16

typedef struct aftp_digest aftp_digest;

/* AFTP_OK and *out (reset, ready for input), or AFTP_ERR_NO_MEMORY. */
int aftp_digest_new(aftp_digest **out);
void aftp_digest_del(aftp_digest *d); /* NULL-safe */
void aftp_digest_reset(aftp_digest *d);
void aftp_digest_update(aftp_digest *d, const uint8_t *p, size_t len);
/* The digest of everything since the last reset; d stays usable. */
void aftp_digest_final(const aftp_digest *d, uint8_t out[AFTP_DIGEST_BYTES]);

#endif /* AFTP_DIGEST_H */
