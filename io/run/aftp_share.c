/* Max-min fair shares of the server's total rate (aftp_share.h). */
#include "aftp_share.h"

/* A limit where 0 means none, as a number to compare. */
static uint64_t limit_of(uint64_t bps)
{
    return bps != 0 ? bps : UINT64_MAX;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t aftp_share_demand(const aftp_share_session *s)
{
    if (!s->measured)
        return s->cap_bps;
    uint64_t grown = s->used_bps > UINT64_MAX / AFTP_SHARE_GROWTH ? UINT64_MAX
                                                                  : s->used_bps * AFTP_SHARE_GROWTH;
    if (grown < AFTP_SHARE_FLOOR_BPS)
        grown = AFTP_SHARE_FLOOR_BPS;
    return min_u64(limit_of(s->cap_bps), grown);
}

/* How much more a session can take: in the first pass its demand, in the
 * second what its own cap leaves above its first grant. */
typedef uint64_t (*room_fn)(const aftp_share_session *s);

static uint64_t first_room(const aftp_share_session *s)
{
    return limit_of(aftp_share_demand(s));
}

static uint64_t second_room(const aftp_share_session *s)
{
    return s->cap_bps != 0 ? s->cap_bps - min_u64(s->share_bps, s->cap_bps) : UINT64_MAX;
}

/* The water level: the largest L with sum(min(room, L)) <= total. It
 * starts at an equal part and rises while the sessions that need less
 * than L leave more to the others (at most n steps: each step settles
 * at least one more session, or none and it stops). */
static uint64_t water_level(uint64_t total, const aftp_share_session *s, size_t n, room_fn room)
{
    uint64_t level = total / n;
    for (;;) {
        uint64_t left = total;
        size_t above = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = room(&s[i]);
            if (r > level)
                above++;
            else
                left -= r;
        }
        if (above == 0)
            return UINT64_MAX; /* every session has all it can take */
        uint64_t next = left / above;
        if (next <= level)
            return level;
        level = next;
    }
}

/* Gives each session min(room, level) of total; returns what is left. */
static uint64_t fill(uint64_t total, aftp_share_session *s, size_t n, room_fn room)
{
    uint64_t level = water_level(total, s, n, room);
    for (size_t i = 0; i < n; i++) {
        uint64_t give = min_u64(room(&s[i]), level);
        s[i].share_bps += give;
        total -= give;
    }
    return total;
}

void aftp_share_split(uint64_t total_bps, aftp_share_session *s, size_t n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        s[i].share_bps = 0;
    uint64_t left = fill(total_bps, s, n, first_room);
    if (left > 0)
        fill(left, s, n, second_room);
    for (size_t i = 0; i < n; i++)
        if (s[i].share_bps == 0)
            s[i].share_bps = 1; /* a cap is never 0 (spec 6.18) */
}

uint64_t aftp_share_entry(uint64_t total_bps, aftp_share_session *s, size_t n, uint64_t cap_bps)
{
    s[n] = (aftp_share_session){.cap_bps = cap_bps};
    aftp_share_split(total_bps, s, n + 1);
    return s[n].share_bps;
}

uint64_t aftp_share_rate(uint64_t bytes, uint64_t span_ns)
{
    if (span_ns == 0)
        return 0;
    return (uint64_t)((double)bytes * 8e9 / (double)span_ns);
}
