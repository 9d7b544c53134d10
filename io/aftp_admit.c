#include "aftp_admit.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>


void aftp_admit_init(aftp_admit *a, const aftp_keyfile_list *keys, const uint8_t *psk)
{
    memset(a, 0, sizeof *a);
    a->keys = keys;
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
    if (!aftp_keyfile_list_contains(a->keys, client_key)) {
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

/* The replay rule of aftp_admit.h. */
static int acceptable(const aftp_admit_seen *e, uint64_t ts_ns)
{
    uint64_t window_start = e->latest_ns > AFTP_ADMIT_WINDOW_NS ? e->latest_ns - AFTP_ADMIT_WINDOW_NS : 0;
    uint64_t bound = e->floor_ns > window_start ? e->floor_ns : window_start;
    return ts_ns > bound && !seen_before(e, ts_ns);
}

/* Remembers ts_ns; when the list is full the oldest entry goes, and no
 * timestamp up to it is accepted from then on. */
static void remember(aftp_admit_seen *e, uint64_t ts_ns)
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
    if (ts_ns > e->latest_ns)
        e->latest_ns = ts_ns;
}

static int admit_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    aftp_admit *a = user;
    uint64_t ts_ns = aftp_hs_timestamp_ns(ts);
    aftp_admit_seen *e = find_seen(a, client_key);
    if (e != NULL && !acceptable(e, ts_ns))
        return AFTP_ERR_REPLAY;
    if (e == NULL) {
        if ((e = new_seen(a)) == NULL)
            return AFTP_ERR_NO_MEMORY;
        memset(e, 0, sizeof *e);
        memcpy(e->key, client_key, AFTP_KEY_LEN);
    }
    remember(e, ts_ns);
    e->last_use = ++a->clock;
    return AFTP_OK;
}

aftp_peer_policy aftp_admit_policy(aftp_admit *a)
{
    aftp_peer_policy p = {.lookup = admit_lookup, .check_timestamp = admit_check_timestamp,
                          .user = a};
    return p;
}
