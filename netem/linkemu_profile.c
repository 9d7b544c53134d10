/* WAN link profiles: parsing, defaults and the views other tools need. */
#include "linkemu_profile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aftp/aftp_error.h"

/* queue_bytes while parsing: "one bandwidth-delay product" (the default). */
#define QUEUE_IS_BDP UINT64_MAX

enum value_kind { VALUE_RATE, VALUE_TIME, VALUE_PERCENT, VALUE_BYTES };

struct key_spec {
    const char *name;
    enum value_kind kind;
    size_t offset; /* into struct linkemu_dir_params */
};

static const struct key_spec dir_keys[] = {
    {"rate", VALUE_RATE, offsetof(struct linkemu_dir_params, rate_bps)},
    {"delay", VALUE_TIME, offsetof(struct linkemu_dir_params, delay_ns)},
    {"jitter", VALUE_TIME, offsetof(struct linkemu_dir_params, jitter_ns)},
    {"queue", VALUE_BYTES, offsetof(struct linkemu_dir_params, queue_bytes)},
    {"loss", VALUE_PERCENT, offsetof(struct linkemu_dir_params, loss)},
    {"ge_p", VALUE_PERCENT, offsetof(struct linkemu_dir_params, ge_p)},
    {"ge_r", VALUE_PERCENT, offsetof(struct linkemu_dir_params, ge_r)},
    {"ge_bad_loss", VALUE_PERCENT, offsetof(struct linkemu_dir_params, ge_bad_loss)},
    {"ge_good_loss", VALUE_PERCENT, offsetof(struct linkemu_dir_params, ge_good_loss)},
    {"reorder", VALUE_PERCENT, offsetof(struct linkemu_dir_params, reorder)},
    {"duplicate", VALUE_PERCENT, offsetof(struct linkemu_dir_params, duplicate)},
};

struct unit {
    const char *suffix;
    double scale;
};

static const struct unit rate_units[] = {{"", 1}, {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6},
                                         {"gbit", 1e9}, {NULL, 0}};
static const struct unit time_units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
                                         {NULL, 0}};
static const struct unit percent_units[] = {{"%", 0.01}, {NULL, 0}};
static const struct unit byte_units[] = {{"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6},
                                         {"kib", 1024.0}, {"mib", 1048576.0}, {NULL, 0}};

static void set_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* "12.5ms" -> 12.5e6 with time_units. Rejects negatives, NaN and unknown units. */
static int parse_scaled(const char *text, const struct unit *units, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || !(v >= 0) || isinf(v))
        return AFTP_ERR_INVALID_ARGUMENT;
    for (const struct unit *u = units; u->suffix; u++) {
        if (strcasecmp(end, u->suffix) == 0) {
            *out = v * u->scale;
            return AFTP_OK;
        }
    }
    return AFTP_ERR_INVALID_ARGUMENT;
}

static int parse_value(const struct key_spec *key, const char *text,
                       struct linkemu_dir_params *p)
{
    void *field = (char *)p + key->offset;
    double v = 0;
    int rc = AFTP_ERR_INVALID_ARGUMENT;
    switch (key->kind) {
    case VALUE_RATE:
        rc = parse_scaled(text, rate_units, &v);
        break;
    case VALUE_TIME:
        rc = parse_scaled(text, time_units, &v);
        break;
    case VALUE_BYTES:
        if (strcasecmp(text, "bdp") == 0) {
            *(uint64_t *)field = QUEUE_IS_BDP;
            return AFTP_OK;
        }
        rc = parse_scaled(text, byte_units, &v);
        break;
    case VALUE_PERCENT:
        rc = parse_scaled(text, percent_units, &v);
        if (rc == AFTP_OK && v > 1.0)
            rc = AFTP_ERR_INVALID_ARGUMENT;
        if (rc == AFTP_OK)
            *(double *)field = v;
        return rc;
    }
    if (rc == AFTP_OK)
        *(uint64_t *)field = (uint64_t)llround(v);
    return rc;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

static const struct key_spec *find_dir_key(const char *name)
{
    for (size_t i = 0; i < sizeof dir_keys / sizeof dir_keys[0]; i++)
        if (strcmp(dir_keys[i].name, name) == 0)
            return &dir_keys[i];
    return NULL;
}

/* Splits "fwd.rate" into a direction mask and the bare key. */
static const char *split_direction(const char *key, unsigned *dir_mask)
{
    if (strncmp(key, "fwd.", 4) == 0) {
        *dir_mask = 1u << LINKEMU_FWD;
        return key + 4;
    }
    if (strncmp(key, "rev.", 4) == 0) {
        *dir_mask = 1u << LINKEMU_REV;
        return key + 4;
    }
    *dir_mask = (1u << LINKEMU_FWD) | (1u << LINKEMU_REV);
    return key;
}

static int apply_line(struct linkemu_profile *prof, const char *key, const char *value,
                      int want_prefixed)
{
    unsigned mask;
    const char *bare = split_direction(key, &mask);
    int prefixed = bare != key;
    if (prefixed != want_prefixed)
        return AFTP_OK;
    if (!prefixed && strcmp(key, "mtu") == 0) {
        char *end;
        unsigned long mtu = strtoul(value, &end, 10);
        if (*end != '\0' || mtu < 576 || mtu > 65535)
            return AFTP_ERR_INVALID_ARGUMENT;
        prof->mtu = (unsigned)mtu;
        return AFTP_OK;
    }
    const struct key_spec *spec = find_dir_key(bare);
    if (!spec)
        return AFTP_ERR_NOT_FOUND;
    for (int d = 0; d < LINKEMU_NDIRS; d++) {
        if (mask & (1u << d)) {
            int rc = parse_value(spec, value, &prof->dir[d]);
            if (rc != AFTP_OK)
                return rc;
        }
    }
    return AFTP_OK;
}

/* One pass over the file; the first pass takes keys for both directions, the
 * second the fwd./rev. overrides, so an override wins wherever it stands. */
static int parse_pass(FILE *f, struct linkemu_profile *prof, int want_prefixed, char *err,
                      size_t errlen)
{
    char line[512];
    unsigned lineno = 0;
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            set_error(err, errlen, "line %u: expected key=value", lineno);
            return AFTP_ERR_INVALID_ARGUMENT;
        }
        *eq = '\0';
        const char *key = trim(s), *value = trim(eq + 1);
        int rc = apply_line(prof, key, value, want_prefixed);
        if (rc == AFTP_ERR_NOT_FOUND)
            set_error(err, errlen, "line %u: unknown key '%s'", lineno, key);
        else if (rc != AFTP_OK)
            set_error(err, errlen, "line %u: bad value '%s' for '%s'", lineno, value, key);
        if (rc != AFTP_OK)
            return rc;
    }
    return AFTP_OK;
}

static int check_dir(const struct linkemu_dir_params *p, const char *dname, char *err,
                     size_t errlen)
{
    if (p->ge_p > 0 && p->loss > 0) {
        set_error(err, errlen, "%s: loss and ge_p are two loss models; set one", dname);
        return AFTP_ERR_INVALID_ARGUMENT;
    }
    if (p->ge_p > 0 && p->ge_r <= 0) {
        set_error(err, errlen, "%s: ge_p needs ge_r > 0 (the bad state must end)", dname);
        return AFTP_ERR_INVALID_ARGUMENT;
    }
    if (p->reorder > 0 && p->delay_ns == 0) {
        set_error(err, errlen, "%s: reorder needs a delay to skip", dname);
        return AFTP_ERR_INVALID_ARGUMENT;
    }
    return AFTP_OK;
}

static void fill_default_queue(struct linkemu_profile *prof)
{
    uint64_t rtt_ns = prof->dir[LINKEMU_FWD].delay_ns + prof->dir[LINKEMU_REV].delay_ns;
    for (int d = 0; d < LINKEMU_NDIRS; d++) {
        struct linkemu_dir_params *p = &prof->dir[d];
        if (p->queue_bytes != QUEUE_IS_BDP)
            continue;
        double bdp = (double)p->rate_bps / 8.0 * (double)rtt_ns / 1e9;
        if (p->rate_bps == 0)
            bdp = 0; /* nothing queues on an unlimited link */
        p->queue_bytes = bdp > LINKEMU_MIN_DEFAULT_QUEUE ? (uint64_t)bdp
                                                         : LINKEMU_MIN_DEFAULT_QUEUE;
    }
}

static void name_from_path(const char *path, char *name, size_t len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strcspn(base, ".");
    if (n >= len)
        n = len - 1;
    memcpy(name, base, n);
    name[n] = '\0';
}

int linkemu_profile_load(const char *path, struct linkemu_profile *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->mtu = 1500;
    for (int d = 0; d < LINKEMU_NDIRS; d++) {
        out->dir[d].queue_bytes = QUEUE_IS_BDP;
        out->dir[d].ge_bad_loss = 1.0;
    }
    name_from_path(path, out->name, sizeof out->name);
    FILE *f = fopen(path, "r");
    if (!f) {
        set_error(err, errlen, "cannot open profile %s: %s", path, strerror(errno));
        return AFTP_ERR_NOT_FOUND;
    }
    int rc = parse_pass(f, out, 0, err, errlen);
    if (rc == AFTP_OK)
        rc = parse_pass(f, out, 1, err, errlen);
    fclose(f);
    for (int d = 0; rc == AFTP_OK && d < LINKEMU_NDIRS; d++)
        rc = check_dir(&out->dir[d], d == LINKEMU_FWD ? "fwd" : "rev", err, errlen);
    if (rc == AFTP_OK)
        fill_default_queue(out);
    return rc;
}

double linkemu_profile_mean_loss(const struct linkemu_dir_params *p)
{
    if (p->ge_p <= 0)
        return p->loss;
    double pi_bad = p->ge_p / (p->ge_p + p->ge_r);
    return pi_bad * p->ge_bad_loss + (1.0 - pi_bad) * p->ge_good_loss;
}

/* For the two-state chain, Cov(L_0, L_k) = (l_bad - l_good)^2 pi_bad pi_good
 * lambda^k with lambda = 1 - p - r; summing over k gives the factor. */
double linkemu_profile_loss_variance_factor(const struct linkemu_dir_params *p)
{
    double mu = linkemu_profile_mean_loss(p);
    if (p->ge_p <= 0 || mu <= 0 || mu >= 1)
        return 1.0;
    double pi_bad = p->ge_p / (p->ge_p + p->ge_r);
    double lambda = 1.0 - p->ge_p - p->ge_r;
    double dl = p->ge_bad_loss - p->ge_good_loss;
    return 1.0 + 2.0 * dl * dl * pi_bad * (1.0 - pi_bad) * lambda / ((1.0 - lambda) * mu * (1.0 - mu));
}

void linkemu_profile_describe(const struct linkemu_profile *prof, FILE *out)
{
    static const char *const tag[LINKEMU_NDIRS] = {"FWD", "REV"};
    fprintf(out, "WAN_PROFILE=%s\nWAN_MTU=%u\nWAN_RTT_US=%.3f\n", prof->name, prof->mtu,
            (double)(prof->dir[LINKEMU_FWD].delay_ns + prof->dir[LINKEMU_REV].delay_ns) / 1e3);
    for (int d = 0; d < LINKEMU_NDIRS; d++) {
        const struct linkemu_dir_params *p = &prof->dir[d];
        fprintf(out,
                "WAN_%s_RATE_BPS=%llu\nWAN_%s_DELAY_US=%.3f\nWAN_%s_JITTER_US=%.3f\n"
                "WAN_%s_QUEUE_BYTES=%llu\nWAN_%s_LOSS=%.8f\nWAN_%s_LOSS_VARIANCE_FACTOR=%.6f\n"
                "WAN_%s_REORDER=%.8f\nWAN_%s_DUPLICATE=%.8f\n",
                tag[d], (unsigned long long)p->rate_bps, tag[d], (double)p->delay_ns / 1e3,
                tag[d], (double)p->jitter_ns / 1e3, tag[d], (unsigned long long)p->queue_bytes,
                tag[d], linkemu_profile_mean_loss(p), tag[d],
                linkemu_profile_loss_variance_factor(p), tag[d], p->reorder, tag[d],
                p->duplicate);
    }
}

/* netem holds every packet for the whole delay and sits before the rate
 * limit, so its packet limit must cover an over-driven link's delay line. */
static unsigned long long netem_packet_limit(const struct linkemu_dir_params *p, unsigned mtu)
{
    if (p->rate_bps == 0)
        return 100000;
    double held = (double)p->rate_bps / 8.0 * (double)(p->delay_ns + 3 * p->jitter_ns) / 1e9;
    double packets = 4.0 * held / mtu;
    return packets > 10000 ? (unsigned long long)packets : 10000;
}

void linkemu_profile_print_netem_args(const struct linkemu_profile *prof, enum linkemu_dir d,
                                      FILE *out)
{
    const struct linkemu_dir_params *p = &prof->dir[d];
    fprintf(out, "limit %llu delay %lluus", netem_packet_limit(p, prof->mtu),
            (unsigned long long)(p->delay_ns / 1000));
    if (p->jitter_ns)
        fprintf(out, " %lluus distribution normal", (unsigned long long)(p->jitter_ns / 1000));
    if (p->ge_p > 0)
        fprintf(out, " loss gemodel %.6f%% %.6f%% %.6f%% %.6f%%", p->ge_p * 100,
                p->ge_r * 100, p->ge_bad_loss * 100, p->ge_good_loss * 100);
    else if (p->loss > 0)
        fprintf(out, " loss random %.6f%%", p->loss * 100);
    if (p->reorder > 0)
        fprintf(out, " reorder %.6f%%", p->reorder * 100);
    if (p->duplicate > 0)
        fprintf(out, " duplicate %.6f%%", p->duplicate * 100);
    fputc('\n', out);
}

void linkemu_profile_print_tbf_args(const struct linkemu_profile *prof, enum linkemu_dir d,
                                    FILE *out)
{
    const struct linkemu_dir_params *p = &prof->dir[d];
    if (p->rate_bps == 0)
        return;
    /* A 250 us token bucket: small enough to keep the bottleneck smooth,
     * large enough that the qdisc timer is not armed for every packet. */
    uint64_t burst = p->rate_bps / 8 / 4000;
    uint64_t min_burst = 4ull * (prof->mtu + 14);
    if (burst < min_burst)
        burst = min_burst;
    fprintf(out, "rate %llubit burst %llu limit %llu\n", (unsigned long long)p->rate_bps,
            (unsigned long long)burst, (unsigned long long)p->queue_bytes);
}
