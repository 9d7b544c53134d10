/* The server's admission by key (aftp_admit.h). */
#include "door/aftp_admit.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void aftp_admit_init(aftp_admit *a, const aftp_keyfile_list *keys, const uint8_t *psk,
                     aftp_admit_clock wall_clock)
{
    memset(a, 0, sizeof *a);
    a->keys = keys;
    a->wall_clock = wall_clock;
    if (psk != NULL)
        memcpy(a->psk, psk, AFTP_KEY_LEN);
}

void aftp_admit_fini(aftp_admit *a)
{
    sodium_memzero(a->psk, sizeof a->psk);
    free(a->seen);
    memset(a, 0, sizeof *a);
}

static int admit_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    aftp_admit *a = user;
    if (a->keys != NULL && !aftp_keyfile_list_contains(a->keys, client_key)) {
        memcpy(a->rejected, client_key, AFTP_KEY_LEN);
        a->have_rejected = 1;
        return AFTP_ERR_UNKNOWN_PEER;
    }
    memcpy(psk, a->psk, AFTP_KEY_LEN);
    return AFTP_OK;
}

static aftp_admit_seen *find_seen(aftp_admit *a, const uint8_t *key)
{
    for (size_t i = 0; i < a->seen_count; i++)
        if (memcmp(a->seen[i].key, key, AFTP_KEY_LEN) == 0)
            return &a->seen[i];
    return NULL;
}

/* A slot for a client not in the table: a new one while there is room,
 * else the least recently seen client's. NULL when out of memory. */
static aftp_admit_seen *new_seen(aftp_admit *a)
{
    if (a->seen_count < a->seen_cap)
        return &a->seen[a->seen_count++];
    if (a->seen_cap < AFTP_ADMIT_MAX_CLIENTS) {
        size_t cap = a->seen_cap ? 2 * a->seen_cap : 16;
        if (cap > AFTP_ADMIT_MAX_CLIENTS)
            cap = AFTP_ADMIT_MAX_CLIENTS;
        aftp_admit_seen *grown = realloc(a->seen, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        a->seen = grown;
        a->seen_cap = cap;
        return &a->seen[a->seen_count++];
    }
    aftp_admit_seen *oldest = &a->seen[0];
    for (size_t i = 1; i < a->seen_count; i++)
        if (a->seen[i].last_use < oldest->last_use)
            oldest = &a->seen[i];
    return oldest;
}

static int seen_before(const aftp_admit_seen *e, uint64_t ts_ns)
{
    for (unsigned i = 0; i < e->recent_count; i++)
        if (e->recent[i] == ts_ns)
            return 1;
    return 0;
}

/* The replay rule of aftp_admit.h: AFTP_ADMIT_NO_REFUSAL, or why not
 * (with what ts_ns had to exceed in *bound). */
static int replay_check(const aftp_admit_seen *e, uint64_t ts_ns, uint64_t *bound)
{
    uint64_t window_start =
        e->latest_ns > AFTP_ADMIT_WINDOW_NS ? e->latest_ns - AFTP_ADMIT_WINDOW_NS : 0;
    *bound = e->floor_ns > window_start ? e->floor_ns : window_start;
    if (seen_before(e, ts_ns))
        return AFTP_ADMIT_REPEATED;
    return ts_ns > *bound ? AFTP_ADMIT_NO_REFUSAL : AFTP_ADMIT_OLD;
}

/* Remembers ts_ns, accepted at now_ns; when the list is full the oldest
 * entry goes, and no timestamp up to it is accepted from then on. The
 * window follows the server's clock at most (aftp_admit.h). */
static void remember(aftp_admit_seen *e, uint64_t ts_ns, uint64_t now_ns)
{
    if (e->recent_count == AFTP_ADMIT_RECENT) {
        unsigned oldest = 0;
        for (unsigned i = 1; i < e->recent_count; i++)
            if (e->recent[i] < e->recent[oldest])
                oldest = i;
        if (e->recent[oldest] > e->floor_ns)
            e->floor_ns = e->recent[oldest];
        e->recent[oldest] = e->recent[--e->recent_count];
    }
    e->recent[e->recent_count++] = ts_ns;
    uint64_t counted = ts_ns < now_ns ? ts_ns : now_ns;
    if (counted > e->latest_ns)
        e->latest_ns = counted;
}

/* Records a refusal for aftp_admit_explain; returns AFTP_ERR_REPLAY, the
 * policy's one refusal code (the engine drops the HELLO in silence). */
static int refuse(aftp_admit *a, const uint8_t *key, int kind, uint64_t ts_ns, uint64_t now_ns,
                  uint64_t bound_ns)
{
    aftp_admit_refusal r = {.kind = kind, .ts_ns = ts_ns, .now_ns = now_ns, .bound_ns = bound_ns};
    memcpy(r.key, key, AFTP_KEY_LEN);
    a->refusal = r;
    return AFTP_ERR_REPLAY;
}

int aftp_admit_check_timestamp(aftp_admit *a, const uint8_t *client_key, const uint8_t *ts,
                               uint64_t now_ns)
{
    uint64_t ts_ns = aftp_hs_timestamp_ns(ts), bound = 0;
    if (ts_ns > now_ns + AFTP_ADMIT_MAX_AHEAD_NS)
        return refuse(a, client_key, AFTP_ADMIT_AHEAD, ts_ns, now_ns, 0);
    aftp_admit_seen *e = find_seen(a, client_key);
    int kind = e != NULL ? replay_check(e, ts_ns, &bound) : AFTP_ADMIT_NO_REFUSAL;
    if (kind != AFTP_ADMIT_NO_REFUSAL)
        return refuse(a, client_key, kind, ts_ns, now_ns, bound);
    if (e == NULL) {
        if ((e = new_seen(a)) == NULL)
            return AFTP_ERR_NO_MEMORY;
        memset(e, 0, sizeof *e);
        memcpy(e->key, client_key, AFTP_KEY_LEN);
    }
    remember(e, ts_ns, now_ns);
    e->last_use = ++a->clock;
    return AFTP_OK;
}

/* The handshake's timestamps are Unix time: so is the clock the policy asks. */
static int policy_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    aftp_admit *a = user;
    return aftp_admit_check_timestamp(a, client_key, ts, a->wall_clock.now_ns(a->wall_clock.user));
}

static double seconds(uint64_t ns)
{
    return (double)ns / 1e9;
}

void aftp_admit_explain(const aftp_admit *a, char *buf, size_t cap)
{
    const aftp_admit_refusal *r = &a->refusal;
    switch (r->kind) {
    case AFTP_ADMIT_AHEAD:
        snprintf(buf, cap,
                 "its handshake timestamp is %.1f s ahead of this server's clock, more than the "
                 "%.0f s accepted: one of the two clocks is wrong (set both by NTP)",
                 seconds(r->ts_ns - r->now_ns), seconds(AFTP_ADMIT_MAX_AHEAD_NS));
        break;
    case AFTP_ADMIT_REPEATED:
        snprintf(buf, cap, "its handshake repeats one already used: a replayed HELLO");
        break;
    case AFTP_ADMIT_OLD:
        snprintf(buf, cap,
                 "its handshake timestamp is %.1f s behind the earliest this key may use now: "
                 "a replayed HELLO, or the client's clock went back (it is admitted again once "
                 "its clock passes that point)",
                 seconds(r->bound_ns - r->ts_ns));
        break;
    default:
        if (cap > 0)
            buf[0] = '\0';
        break;
    }
}

aftp_peer_policy aftp_admit_policy(aftp_admit *a)
{
    aftp_peer_policy p = {.lookup = admit_lookup, .check_timestamp = policy_check_timestamp,
                          .user = a};
    return p;
}

void aftp_admit_explain_unknown(const aftp_admit *a, const char *authorized_path, char *buf,
                                size_t cap)
{
    char key[128];
    aftp_keyfile_key_text(a->rejected, key, sizeof key);
    snprintf(buf, cap, "its key is not authorized (add the line '%s' to %s to admit it)", key,
             authorized_path);
}
