/* Simulated path, one direction (sim_link.h). */
#include "sim_link.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/aftp_wire.h"

uint64_t sim_rand(uint64_t *state)
{
    /* splitmix64: tiny, seedable, good enough for a channel model. */
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

double sim_rand_unit(uint64_t *state)
{
    return (double)(sim_rand(state) >> 11) * (1.0 / 9007199254740992.0);
}

void sim_link_init(sim_link *l, const sim_link_cfg *cfg, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    l->cfg = *cfg;
    l->rng = seed;
}

void sim_link_free(sim_link *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->heap[i].data);
    free(l->heap);
    memset(l, 0, sizeof *l);
}

static int earlier(const sim_pkt *a, const sim_pkt *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(sim_link *l, sim_pkt p)
{
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->heap = realloc(l->heap, l->cap * sizeof *l->heap);
        if (l->heap == NULL)
            abort();
    }
    size_t i = l->count++;
    while (i > 0 && earlier(&p, &l->heap[(i - 1) / 2])) {
        l->heap[i] = l->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    l->heap[i] = p;
}

sim_pkt sim_link_pop(sim_link *l)
{
    sim_pkt top = l->heap[0];
    sim_pkt last = l->heap[--l->count];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->count)
            break;
        if (c + 1 < l->count && earlier(&l->heap[c + 1], &l->heap[c]))
            c++;
        if (!earlier(&l->heap[c], &last))
            break;
        l->heap[i] = l->heap[c];
        i = c;
    }
    if (l->count > 0)
        l->heap[i] = last;
    return top;
}

uint64_t sim_link_next(const sim_link *l)
{
    return l->count ? l->heap[0].at : AFTP_NO_EXPIRY;
}

static int channel_loses(sim_link *l)
{
    if (l->cfg.ge_enter_bad > 0) {
        double u = sim_rand_unit(&l->rng);
        l->ge_bad = l->ge_bad ? u >= l->cfg.ge_leave_bad : u < l->cfg.ge_enter_bad;
        if (l->ge_bad && sim_rand_unit(&l->rng) < l->cfg.ge_loss_bad)
            return 1;
    }
    return l->cfg.loss > 0 && sim_rand_unit(&l->rng) < l->cfg.loss;
}

/* A sealed DATA is head only: its payload is what follows the file id and
 * block, less the tag. */
static void note_loss(sim_link *l, const aftp_datagram *dg)
{
    size_t fixed = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED;
    if (dg->head_len < fixed || dg->head[1] != AFTP_WIRE_DATA)
        return;
    if (dg->head[3] & AFTP_WIRE_FLAG_PROTECTED)
        l->data_payload_lost += dg->head_len - fixed - AFTP_WIRE_TAG_LEN;
    else
        l->data_payload_lost += dg->payload_len;
}

static void deliver_at(sim_link *l, uint64_t at, const aftp_datagram *dg)
{
    sim_pkt p = {.at = at, .seq = l->seq++, .len = dg->head_len + dg->payload_len};
    p.data = malloc(p.len);
    if (p.data == NULL)
        abort();
    memcpy(p.data, dg->head, dg->head_len);
    if (dg->payload_len)
        memcpy(p.data + dg->head_len, dg->payload, dg->payload_len);
    heap_push(l, p);
}

void sim_link_wan_stalls(sim_link_cfg *cfg)
{
    cfg->stall_every_ns = UINT64_C(500000000);
    cfg->stall_max_ns = UINT64_C(40000000);
}

/* The bottleneck stops serving when a stall comes due: what waits, and
 * what comes meanwhile, queues behind it. */
static void maybe_stall(sim_link *l, uint64_t now)
{
    if (l->cfg.stall_every_ns == 0)
        return;
    if (l->next_stall_at != 0 && now >= l->next_stall_at) {
        uint64_t start = l->busy_until > now ? l->busy_until : now;
        l->busy_until = start + (uint64_t)(sim_rand_unit(&l->rng) * (double)l->cfg.stall_max_ns);
    }
    if (l->next_stall_at == 0 || now >= l->next_stall_at) {
        double gap = -log(1.0 - sim_rand_unit(&l->rng)) * (double)l->cfg.stall_every_ns;
        l->next_stall_at = now + (uint64_t)gap + 1;
    }
}

/* A reordered packet's arrival: late by reorder_ns, or early by it (never
 * before it left the bottleneck). */
static uint64_t reordered_arrival(const sim_link_cfg *cfg, uint64_t depart)
{
    if (!cfg->reorder_early)
        return depart + cfg->delay_ns + cfg->reorder_ns;
    uint64_t skip = cfg->reorder_ns < cfg->delay_ns ? cfg->reorder_ns : cfg->delay_ns;
    return depart + cfg->delay_ns - skip;
}

void sim_link_send(sim_link *l, uint64_t now, const aftp_datagram *dg)
{
    uint64_t len = dg->head_len + dg->payload_len;
    uint64_t depart = now;
    l->sent++;
    if (l->cfg.rate_bps) {
        maybe_stall(l, now);
        uint64_t start = l->busy_until > now ? l->busy_until : now;
        uint64_t backlog = (uint64_t)((double)(start - now) * (double)l->cfg.rate_bps / 8e9);
        if (l->cfg.queue_bytes && backlog + len > l->cfg.queue_bytes) {
            l->queue_drops++;
            note_loss(l, dg);
            return;
        }
        l->busy_until = start + len * 8 * UINT64_C(1000000000) / l->cfg.rate_bps;
        depart = l->busy_until;
    }
    if (channel_loses(l)) {
        l->lost++;
        note_loss(l, dg);
        return;
    }
    uint64_t at = depart + l->cfg.delay_ns;
    if (l->cfg.reorder > 0 && sim_rand_unit(&l->rng) < l->cfg.reorder)
        at = reordered_arrival(&l->cfg, depart);
    deliver_at(l, at, dg);
    if (l->cfg.duplicate > 0 && sim_rand_unit(&l->rng) < l->cfg.duplicate) {
        l->duplicated++;
        deliver_at(l, at + 1000, dg);
    }
}
