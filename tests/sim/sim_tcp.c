/* A TCP-like flow for the simulations (sim_tcp.h). */
#include "sim_tcp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1e9
#define DUP_THRESHOLD 3          /* later packets acknowledged: this one is lost */
#define INITIAL_WINDOW 10.0
#define MIN_WINDOW 2.0
#define RENO_BETA 0.5
#define CUBIC_BETA 0.7           /* RFC 9438 */
#define CUBIC_C 0.4
#define RTO_MIN_NS UINT64_C(200000000)
#define RTO_INITIAL_NS UINT64_C(1000000000)

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void *zalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL)
        abort();
    return p;
}

void sim_tcp_init(sim_tcp *t, int kind, uint8_t flow, uint64_t bytes, uint64_t now)
{
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->flow = flow;
    t->total = bytes ? (bytes + SIM_TCP_PAYLOAD - 1) / SIM_TCP_PAYLOAD : UINT64_MAX;
    t->cwnd = INITIAL_WINDOW;
    t->ssthresh = HUGE_VAL;
    t->ring = zalloc(SIM_TCP_RING, sizeof *t->ring);
    t->retx = zalloc(SIM_TCP_RING, sizeof *t->retx);
    t->epoch_ns = now;
    t->last_ack_ns = now;
}

void sim_tcp_free(sim_tcp *t)
{
    free(t->ring);
    free(t->retx);
    free(t->seen);
    memset(t, 0, sizeof *t);
}

int sim_tcp_flow_of(const uint8_t *pkt, size_t len)
{
    return len >= 10 && pkt[0] == SIM_TCP_MAGIC ? (int)(pkt[1] & ~SIM_TCP_ACK) : -1;
}

int sim_tcp_is_ack(const uint8_t *pkt, size_t len)
{
    return sim_tcp_flow_of(pkt, len) >= 0 && (pkt[1] & SIM_TCP_ACK) != 0;
}

/* ---- sender ---- */

/* The next data packet to send: a repair first, else new data. */
static int next_seq(sim_tcp *t, uint64_t *seq)
{
    if (t->retx_head != t->retx_tail) {
        *seq = t->retx[t->retx_head++ % SIM_TCP_RING];
        return 1;
    }
    if (t->next_seq >= t->total)
        return 0;
    *seq = t->next_seq++;
    return 1;
}

int sim_tcp_write(sim_tcp *t, uint64_t now, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    uint64_t seq;
    if (cap < SIM_TCP_PACKET || (double)t->inflight >= floor(t->cwnd) ||
        t->next_tx - t->low_tx >= SIM_TCP_RING || !next_seq(t, &seq))
        return 0;
    if (t->inflight == 0)
        t->last_ack_ns = now; /* the timer runs from the first packet in flight */
    uint64_t tx = t->next_tx++;
    t->ring[tx % SIM_TCP_RING] = (sim_tcp_tx){.seq = seq, .sent_ns = now};
    t->inflight++;
    t->wire_bytes_sent += SIM_TCP_PACKET;
    memset(buf, 0, SIM_TCP_PACKET);
    buf[0] = SIM_TCP_MAGIC;
    buf[1] = t->flow;
    put_u64(buf + 2, tx);
    put_u64(buf + 10, seq);
    *dg = (aftp_datagram){.head = buf, .head_len = SIM_TCP_PACKET};
    return 1;
}

/* One multiplicative decrease per window: losses among packets sent
 * before the previous decrease belong to the same event. */
static void on_loss(sim_tcp *t, uint64_t tx, uint64_t now)
{
    if (tx < t->recovery_end_tx)
        return;
    t->loss_events++;
    t->w_max = t->cwnd;
    t->cwnd *= t->kind == SIM_TCP_CUBIC ? CUBIC_BETA : RENO_BETA;
    t->cwnd = fmax(t->cwnd, MIN_WINDOW);
    t->ssthresh = t->cwnd;
    t->recovery_end_tx = t->next_tx;
    t->epoch_ns = now;
}

static void mark_lost(sim_tcp *t, uint64_t tx, uint64_t now)
{
    sim_tcp_tx *r = &t->ring[tx % SIM_TCP_RING];
    if (r->state != 0)
        return;
    r->state = 2;
    t->inflight--;
    t->retx[t->retx_tail++ % SIM_TCP_RING] = r->seq;
    t->retransmits++;
    on_loss(t, tx, now);
}

/* Every packet sent DUP_THRESHOLD or more before the largest acknowledged
 * one and still unacknowledged is lost; the lowest unresolved moves on. */
static void detect_losses(sim_tcp *t, uint64_t now)
{
    while (t->low_tx < t->next_tx) {
        sim_tcp_tx *r = &t->ring[t->low_tx % SIM_TCP_RING];
        if (r->state == 0 && t->low_tx + DUP_THRESHOLD > t->largest_acked)
            break;
        mark_lost(t, t->low_tx, now);
        t->low_tx++;
    }
}

/* CUBIC's window t seconds into the epoch (RFC 9438 section 4.2), and the
 * window Reno would have reached (section 4.3): the larger. */
static double cubic_target(const sim_tcp *t, uint64_t now)
{
    double secs = (double)(now - t->epoch_ns + t->min_rtt_ns) / NS_PER_S;
    double k = cbrt(t->w_max * (1.0 - CUBIC_BETA) / CUBIC_C);
    double cubic = CUBIC_C * pow(secs - k, 3) + t->w_max;
    double rtt = t->srtt_ns ? (double)t->srtt_ns / NS_PER_S : 0.1;
    double reno = t->w_max * CUBIC_BETA +
                  3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) * secs / rtt;
    return fmax(cubic, reno);
}

static void grow(sim_tcp *t, uint64_t tx, uint64_t now)
{
    if (tx < t->recovery_end_tx)
        return; /* no growth while the losses of a decrease are repaired */
    if (t->cwnd < t->ssthresh) {
        t->cwnd += 1.0;
    } else if (t->kind == SIM_TCP_RENO) {
        t->cwnd += 1.0 / t->cwnd;
    } else {
        double target = cubic_target(t, now);
        t->cwnd += target > t->cwnd ? (target - t->cwnd) / t->cwnd : 0.01 / t->cwnd;
    }
    t->cwnd = fmin(t->cwnd, (double)(SIM_TCP_RING - 1));
}

static void sample_rtt(sim_tcp *t, uint64_t rtt)
{
    t->srtt_ns = t->srtt_ns ? (7 * t->srtt_ns + rtt) / 8 : rtt;
    if (t->min_rtt_ns == 0 || rtt < t->min_rtt_ns)
        t->min_rtt_ns = rtt;
}

void sim_tcp_on_ack(sim_tcp *t, uint64_t now, const uint8_t *pkt, size_t len)
{
    if (len < 10)
        return;
    uint64_t tx = get_u64(pkt + 2);
    if (tx < t->low_tx || tx >= t->next_tx)
        return;
    sim_tcp_tx *r = &t->ring[tx % SIM_TCP_RING];
    if (r->state == 1)
        return;
    if (r->state == 0) {
        t->inflight--;
        sample_rtt(t, now - r->sent_ns);
        grow(t, tx, now);
    }
    r->state = 1;
    t->last_ack_ns = now;
    if (tx > t->largest_acked)
        t->largest_acked = tx;
    detect_losses(t, now);
}

uint64_t sim_tcp_expiry(const sim_tcp *t)
{
    if (t->inflight == 0)
        return AFTP_NO_EXPIRY;
    uint64_t rto = t->srtt_ns ? 2 * t->srtt_ns : RTO_INITIAL_NS;
    return t->last_ack_ns + (rto > RTO_MIN_NS ? rto : RTO_MIN_NS);
}

/* Nothing acknowledged for a timeout: everything in flight is lost and
 * the window starts again from one packet. */
void sim_tcp_handle_expiry(sim_tcp *t, uint64_t now)
{
    if (now < sim_tcp_expiry(t))
        return;
    for (uint64_t tx = t->low_tx; tx < t->next_tx; tx++)
        mark_lost(t, tx, now);
    t->ssthresh = fmax(t->cwnd / 2, MIN_WINDOW);
    t->w_max = t->cwnd;
    t->cwnd = 1.0;
    t->recovery_end_tx = t->next_tx;
    t->epoch_ns = now;
    t->last_ack_ns = now;
}

int sim_tcp_done(const sim_tcp *t)
{
    return t->delivered >= t->total;
}

/* ---- receiver ---- */

/* Marks seq received; 1 when it is new. */
static int note_seen(sim_tcp *t, uint64_t seq)
{
    if (seq >= t->seen_cap) {
        uint64_t cap = t->seen_cap ? t->seen_cap : 65536;
        while (cap <= seq)
            cap *= 2;
        uint8_t *p = realloc(t->seen, cap);
        if (p == NULL)
            abort();
        memset(p + t->seen_cap, 0, cap - t->seen_cap);
        t->seen = p;
        t->seen_cap = cap;
    }
    if (t->seen[seq])
        return 0;
    t->seen[seq] = 1;
    return 1;
}

void sim_tcp_receive(sim_tcp *t, const uint8_t *pkt, size_t len, uint8_t *buf, size_t cap,
                     aftp_datagram *dg)
{
    *dg = (aftp_datagram){0};
    if (len < 18 || cap < SIM_TCP_ACK_LEN)
        return;
    if (note_seen(t, get_u64(pkt + 10)))
        t->delivered++;
    memset(buf, 0, SIM_TCP_ACK_LEN);
    buf[0] = SIM_TCP_MAGIC;
    buf[1] = (uint8_t)(t->flow | SIM_TCP_ACK);
    memcpy(buf + 2, pkt + 2, 8);
    *dg = (aftp_datagram){.head = buf, .head_len = SIM_TCP_ACK_LEN};
}
