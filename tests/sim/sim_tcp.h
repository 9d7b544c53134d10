/*
 * A TCP-like flow for the rate-control simulations: a window-based,
 * ack-clocked sender (slow start, then Reno's or CUBIC's congestion
 * avoidance; one multiplicative decrease per window of losses; a
 * retransmission timeout) and its receiver, exchanging packets of their
 * own format over the same simulated links as the aftp flows. Every packet
 * is acknowledged on its own (as with SACK: the sender knows exactly which
 * ones arrived); a packet is lost once three sent after it are
 * acknowledged. No pacing: the window goes out as the ACKs let it, in
 * bursts, like a TCP without pacing.
 *
 * Packets: byte 0 SIM_TCP_MAGIC (no aftp version), byte 1 the flow index
 * (| SIM_TCP_ACK on ACKs), then the transmission number (8 bytes, LE).
 */
#ifndef SIM_TCP_H
#define SIM_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"

#define SIM_TCP_MAGIC 0xEEu
#define SIM_TCP_ACK 0x80u
#define SIM_TCP_PACKET 1452u      /* the size of a full aftp datagram: equal costs */
#define SIM_TCP_PAYLOAD 1400u     /* data bytes per packet */
#define SIM_TCP_ACK_LEN 40u
#define SIM_TCP_RING (1u << 17)   /* transmissions tracked: the largest window */

enum sim_tcp_kind { SIM_TCP_RENO, SIM_TCP_CUBIC };

typedef struct sim_tcp_tx {
    uint64_t seq;       /* data packet it carries */
    uint64_t sent_ns;
    uint8_t state;      /* 0 in flight, 1 acknowledged, 2 lost */
} sim_tcp_tx;

typedef struct sim_tcp {
    int kind;
    uint8_t flow;
    uint64_t total;            /* data packets to deliver; UINT64_MAX: endless */
    /* sender */
    double cwnd, ssthresh;     /* packets */
    uint64_t next_tx, low_tx;  /* transmissions: next number, lowest unresolved */
    uint64_t next_seq;         /* next new data packet */
    uint64_t inflight;
    uint64_t *retx;            /* data packets to send again (FIFO ring) */
    uint64_t retx_head, retx_tail;
    sim_tcp_tx *ring;
    uint64_t recovery_end_tx;  /* losses of earlier transmissions: same event */
    uint64_t largest_acked;
    uint64_t last_ack_ns;
    uint64_t srtt_ns, min_rtt_ns;
    double w_max;              /* CUBIC: window before the last decrease */
    uint64_t epoch_ns;         /* CUBIC: when the window began to grow again */
    uint64_t acked;            /* data packets acknowledged (distinct) */
    uint64_t wire_bytes_sent, retransmits, loss_events;
    /* receiver */
    uint8_t *seen;             /* data packets received, by seq (grown on demand) */
    uint64_t seen_cap;
    uint64_t delivered;        /* distinct data packets received */
} sim_tcp;

void sim_tcp_init(sim_tcp *t, int kind, uint8_t flow, uint64_t bytes, uint64_t now);
void sim_tcp_free(sim_tcp *t);
/* One data packet into buf when the window allows (1), else 0. */
int sim_tcp_write(sim_tcp *t, uint64_t now, uint8_t *buf, size_t cap, aftp_datagram *dg);
/* The receiver takes a data packet and writes its ACK into buf. */
void sim_tcp_receive(sim_tcp *t, const uint8_t *pkt, size_t len, uint8_t *buf, size_t cap,
                     aftp_datagram *dg);
/* The sender takes an ACK. */
void sim_tcp_on_ack(sim_tcp *t, uint64_t now, const uint8_t *pkt, size_t len);
/* The retransmission timer. */
uint64_t sim_tcp_expiry(const sim_tcp *t);
void sim_tcp_handle_expiry(sim_tcp *t, uint64_t now);
/* Every data packet acknowledged. */
int sim_tcp_done(const sim_tcp *t);
/* The flow index of a TCP packet, or -1 when it is not one. */
int sim_tcp_flow_of(const uint8_t *pkt, size_t len);
int sim_tcp_is_ack(const uint8_t *pkt, size_t len);

#endif /* SIM_TCP_H */
