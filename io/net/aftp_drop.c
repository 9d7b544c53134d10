#include "aftp_drop.h"

#include <stdlib.h>
#include <string.h>

int aftp_drop_parse(const char *spec, aftp_drop *d)
{
    char *end;
    double rate = strtod(spec, &end);
    if (end == spec)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (*end == '%') {
        rate /= 100.0;
        end++;
    }
    uint64_t seed = 1;
    if (*end == ',') {
        const char *s = end + 1;
        seed = strtoull(s, &end, 10);
        if (end == s)
            return AFTP_ERR_INVALID_ARGUMENT;
    }
    if (*end != '\0' || !(rate >= 0.0 && rate <= 1.0))
        return AFTP_ERR_INVALID_ARGUMENT;
    memset(d, 0, sizeof *d);
    d->threshold = (uint64_t)(rate * 4294967296.0);
    d->state = seed;
    return AFTP_OK;
}

#ifdef AFTP_TEST_HOOKS
int aftp_drop_from_env(aftp_drop *d)
{
    const char *spec = getenv(AFTP_DROP_ENV);
    if (spec == NULL || spec[0] == '\0') {
        memset(d, 0, sizeof *d);
        return AFTP_OK;
    }
    return aftp_drop_parse(spec, d);
}

const char *aftp_drop_warning(const aftp_drop *d)
{
    return d->threshold != 0 ? "test loss shim active (" AFTP_DROP_ENV ")" : "";
}
#else
int aftp_drop_from_env(aftp_drop *d)
{
    memset(d, 0, sizeof *d);
    return AFTP_OK;
}

const char *aftp_drop_warning(const aftp_drop *d)
{
    (void)d; /* never on: nothing could have turned the shim on */
    return "";
}
#endif

int aftp_drop_next(aftp_drop *d)
{
    if (d->threshold == 0)
        return 0;
    /* splitmix64: one multiply-xorshift step per draw, good enough spread */
    uint64_t z = (d->state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    int drop = (z >> 32) < d->threshold;
    d->dropped += (uint64_t)drop;
    return drop;
}
