/* Streaming XXH3-128 in canonical form (aftp_digest.h). */
#include "common/aftp_digest.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "aftp/aftp_error.h"

struct aftp_digest {
    XXH3_state_t *state;
};

int aftp_digest_new(aftp_digest **out)
{
    aftp_digest *d = malloc(sizeof *d);
    if (d == NULL)
        return AFTP_ERR_NO_MEMORY;
    d->state = XXH3_createState();
    if (d->state == NULL) {
        free(d);
        return AFTP_ERR_NO_MEMORY;
    }
    aftp_digest_reset(d);
    *out = d;
    return AFTP_OK;
}

void aftp_digest_del(aftp_digest *d)
{
    if (d == NULL)
        return;
    XXH3_freeState(d->state);
    free(d);
}

void aftp_digest_reset(aftp_digest *d)
{
    XXH3_128bits_reset(d->state);
}

void aftp_digest_update(aftp_digest *d, const uint8_t *p, size_t len)
{
    if (len > 0)
        XXH3_128bits_update(d->state, p, len);
}

void aftp_digest_final(const aftp_digest *d, uint8_t out[AFTP_DIGEST_BYTES])
{
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(d->state));
    memcpy(out, canon.digest, AFTP_DIGEST_BYTES);
}
