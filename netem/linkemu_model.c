/* The link model of one direction: loss, bottleneck queue, delay. */
#include "linkemu_model.h"

#include <string.h>

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* splitmix64 spreads any seed (even 0) over the whole xoshiro state. */
void linkemu_rng_seed(struct linkemu_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        rng->s[i] = z ^ (z >> 31);
    }
}

uint64_t linkemu_rng_next(struct linkemu_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* An event of probability p happens when a uniform 64-bit draw is below this. */
static uint64_t threshold(double p)
{
    if (p <= 0)
        return 0;
    if (p >= 1)
        return UINT64_MAX;
    return (uint64_t)(p * 18446744073709551616.0);
}

static int happens(struct linkemu_model *m, uint64_t th)
{
    return th != 0 && linkemu_rng_next(&m->rng) < th;
}

void linkemu_model_init(struct linkemu_model *m, const struct linkemu_dir_params *p,
                        uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->p = *p;
    m->th_loss = threshold(p->loss);
    m->th_ge_p = threshold(p->ge_p);
    m->th_ge_r = threshold(p->ge_r);
    m->th_bad_loss = threshold(p->ge_bad_loss);
    m->th_good_loss = threshold(p->ge_good_loss);
    m->th_reorder = threshold(p->reorder);
    m->th_dup = threshold(p->duplicate);
    linkemu_rng_seed(&m->rng, seed);
}

/* Gilbert-Elliott: move the chain one step, then lose with the state's rate. */
static int lost(struct linkemu_model *m)
{
    if (m->th_ge_p == 0)
        return happens(m, m->th_loss);
    if (m->ge_bad ? happens(m, m->th_ge_r) : happens(m, m->th_ge_p))
        m->ge_bad = !m->ge_bad;
    return happens(m, m->ge_bad ? m->th_bad_loss : m->th_good_loss);
}

static uint64_t serialisation_ns(const struct linkemu_model *m, uint32_t len)
{
    return m->p.rate_bps ? (uint64_t)len * 8000000000ull / m->p.rate_bps : 0;
}

static int queue_overflows(const struct linkemu_model *m, uint64_t now_ns, uint32_t len)
{
    if (m->p.rate_bps == 0)
        return 0;
    uint64_t backlog_ns = m->link_free_ns > now_ns ? m->link_free_ns - now_ns : 0;
    double backlog_bytes = (double)backlog_ns * (double)m->p.rate_bps / 8e9;
    return backlog_bytes + len > (double)m->p.queue_bytes;
}

/* A jitter sample of standard deviation `sigma`: the sum of four uniform
 * draws (Irwin-Hall) is close to normal and bounded at +-3.46 sigma. */
static int64_t jitter_ns(struct linkemu_model *m)
{
    if (m->p.jitter_ns == 0)
        return 0;
    uint64_t r = linkemu_rng_next(&m->rng);
    double sum = 0;
    for (int i = 0; i < 4; i++, r >>= 16)
        sum += (double)(r & 0xffff) / 65536.0;
    return (int64_t)((sum - 2.0) * 1.7320508075688772 * (double)m->p.jitter_ns);
}

static uint64_t propagation_due(struct linkemu_model *m, uint64_t departed_ns)
{
    int64_t delay = (int64_t)m->p.delay_ns + jitter_ns(m);
    uint64_t due = departed_ns + (uint64_t)(delay > 0 ? delay : 0);
    if (due < m->last_due_ns)
        due = m->last_due_ns; /* jitter never reorders: a link is a FIFO */
    m->last_due_ns = due;
    return due;
}

struct linkemu_fate linkemu_model_admit(struct linkemu_model *m, uint64_t now_ns, uint32_t len)
{
    struct linkemu_fate fate = {.verdict = LINKEMU_DELIVER, .copies = 1};
    if (lost(m)) {
        fate.verdict = LINKEMU_DROP_LOSS;
        return fate;
    }
    if (queue_overflows(m, now_ns, len)) {
        fate.verdict = LINKEMU_DROP_QUEUE;
        return fate;
    }
    if (happens(m, m->th_dup))
        fate.copies = 2; /* both copies cross the bottleneck, as with netem */
    uint64_t start = m->link_free_ns > now_ns ? m->link_free_ns : now_ns;
    m->link_free_ns = start + fate.copies * serialisation_ns(m, len);
    if (happens(m, m->th_reorder)) {
        fate.reordered = 1;
        fate.due_ns = m->link_free_ns;
        return fate;
    }
    fate.due_ns = propagation_due(m, m->link_free_ns);
    return fate;
}
