/*
 * Rate controller (sans-I/O): from the receiver's FEEDBACK it estimates the
 * path (bottleneck delivery rate, minimum RTT, queueing delay, baseline
 * random loss) and yields the pacing rate and a cap on packets in flight.
 * Random loss is not congestion: congestion is queueing delay above the
 * policy's target, or loss clearly above the baseline measured while the
 * queue was empty. Design: DESIGN.md section 4, spec section 13.4.
 *
 * Model (BBR-like, rate based):
 *   STARTUP    pace at 5 x bw while samples show no queue (not LOW),
 *              else 2.89 x bw; at most 2 BDP in flight whatever the gain:
 *              the rate grows 2-5 fold per round, smoothly. Leaves on a
 *              bandwidth plateau (3 rounds without +25%), a queue of 4 x
 *              target (at most 20 ms; while the rate still grows 25% per
 *              round, half the min RTT, at most 80 ms), loss beyond chance
 *              on a growing queue (a buffer shallower than that), or a
 *              standing queue while its rate no longer grows; never on
 *              random loss.
 *   DRAIN      pace at 0.35 x bw until the unreported data is one BDP.
 *   PROBE_BW   a cycle of 5-7 rounds (at most ~0.5 s once 2 rounds have
 *              passed): UP (1.25 x) for max(4 x target, 3 feedback
 *              intervals) capped at one RTT, DOWN (0.75 x) as long to
 *              drain what UP queued, then CRUISE (1 x).
 *   DIP        when min RTT has not been seen again for 10 s and the
 *              queue is within the target (not competing): a PROBE_BW
 *              phase at 1/2 x bw, long enough to drain the queue seen (if
 *              it is ours) and for two FEEDBACKs to report packets sent on
 *              the emptied queue. Alone on a path, the cruising queue is
 *              a few ms and the dip about 25 ms: at half rate, about a
 *              dozen ms of link time less the queue it drains, where
 *              PROBE_RTT costs two rounds (1.5% of a 150 ms path).
 *   PROBE_RTT  when min RTT is due and the queue is above the target or
 *              the flow competes, when a DIP's packets did not show min
 *              RTT again, or when 3 cuts in a row did not shrink the queue
 *              (it is not ours: a longer route, unresponsive traffic):
 *              1/2 x bw for two rounds and at least 100 ms; its lowest
 *              RTT becomes the minimum. When 3 futile cuts come again
 *              within 10 s, the queue is held by loss-based traffic
 *              (TCP): FAIR (and HIGH) then compete, taking
 *              only loss as congestion (any loss the baseline does not
 *              explain, as TCP; CUBIC-like cuts; probes of 1.1 x, and FAIR
 *              regrows no faster than a CUBIC window) until the queue is
 *              gone. A spell of 5 s or more is remembered for 30 s: a
 *              queue that stands again then resumes competing at once.
 * CAREFUL RESUME (a start rate remembered for the path, after the IETF's
 *            Careful Resume): with a saved rate and min RTT in the config,
 *            STARTUP runs as usual until the first RTT sample, the
 *            handshake's when the sender gives it (Reconnaissance). When
 *            that sample lies within [1/2, 10] x the saved RTT (not for
 *            LOW, which yields, nor FIXED), the rate jumps to half the
 *            saved rate, with at most one saved RTT of it in flight
 *            (Unvalidated), until the jump's own packets are
 *            reported (Validating): two samples delivering at least 85%
 *            of the rate they were sent at, on a queue below startup's
 *            deep-queue bound and without loss beyond chance, confirm
 *            it: STARTUP goes on from the delivered rate. Otherwise Safe
 *            Retreat: bw = what the jump delivered (never more), DRAIN
 *            empties the queue the jump built, then PROBE_BW.
 * A new minimum RTT takes two samples in a row below the old one: a lone
 * low sample comes from a busy endpoint's late timestamps. Reordering: a
 * FEEDBACK whose largest_pn overtook the packets sent before it (an early
 * packet: its round trip is short by the delay it skipped) is measured, by
 * the sender, at the newest packet settled in order (RACK's idea): RTT,
 * sent count and send time of the DATA packet whose number among all DATA
 * is what arrived plus what was declared lost (plus the baseline's share
 * of what left within a loss threshold). The overtaken packets are
 * then neither queue nor loss. Such a sample never lowers min RTT: the
 * early packets counted as arrived move it forward, by a whole send pause
 * when the sender sends in bursts.
 * bw is the windowed maximum (10 rounds; past startup, of the median of
 * each three samples in a row, so that one sample's spike from arrivals
 * delivered in a bunch is not taken) of the rate at which the receiver
 * saw our packet numbers go by (lost packets included: that is the receive
 * rate / (1 - loss) without the loss's own noise; packets lost beyond the
 * baseline are not counted, they died in the bottleneck queue), each
 * sample capped by the rate its packets were sent at; pacing is
 * gain x bw, clamped to [min_rate, max_rate]; inflight is capped at 2 BDP
 * (plus a feedback interval), one BDP plus half the queue target in CRUISE. Congestion is a queue above the policy's
 * target for longer than a probe's spike (CoDel's standing-queue idea) or
 * loss over a round clearly above the baseline random loss, learnt while
 * the queue is empty. It cuts bw in proportion to the excess (the queue
 * drained over 2 rounds), then holds until packets sent after the cut are
 * reported.
 * Policies differ in target and cut: FAIR 5 ms, 2-15%, 30% when
 * competing; HIGH max(20 ms, min RTT), 2-15% (a queue that deep is the
 * whole buffer: it seldom needs to compete; 20% then); LOW 2 ms, 15-50%,
 * never re-bases nor competes.
 *
 * Time in nanoseconds, rates in bits of UDP payload (whole aftp datagrams)
 * per second, like the pacer.
 */
#ifndef AFTP_CC_H
#define AFTP_CC_H

#include <stdint.h>

#include "aftp/aftp_engine.h"

#define AFTP_CC_BW_ROUNDS 10         /* bandwidth max-filter window, rounds */
#define AFTP_CC_INITIAL_WINDOW 32u   /* packets in flight before any estimate */
#define AFTP_CC_DEFAULT_DATAGRAM 1200u /* assumed size before the first DATA packet */

enum aftp_cc_mode {
    AFTP_CC_MODE_FIXED = 0, /* policy FIXED: no model, constant rate */
    AFTP_CC_MODE_STARTUP,
    AFTP_CC_MODE_DRAIN,
    AFTP_CC_MODE_PROBE_BW,
    AFTP_CC_MODE_PROBE_RTT
};

/* Careful Resume (cc->resume). */
enum aftp_cc_resume {
    AFTP_CC_RESUME_OFF = 0,     /* no saved state, declined, or over */
    AFTP_CC_RESUME_RECON,       /* normal start until the first RTT sample */
    AFTP_CC_RESUME_UNVALIDATED, /* pacing at the jump rate, its packets not yet reported */
    AFTP_CC_RESUME_VALIDATING   /* the jump's packets are being reported */
};

/* Phases of the PROBE_BW cycle. */
enum aftp_cc_phase {
    AFTP_CC_PHASE_UP,
    AFTP_CC_PHASE_DOWN,
    AFTP_CC_PHASE_CRUISE,
    AFTP_CC_PHASE_DIP /* a short drain to see the minimum RTT again */
};

typedef struct aftp_cc_config {
    int policy;                 /* enum aftp_cc_policy */
    uint64_t rate_bps;          /* FIXED: the rate; others: caps the initial rate */
    uint64_t min_rate_bps;      /* 0: none */
    uint64_t max_rate_bps;      /* 0: none */
    uint64_t initial_rtt_ns;    /* RTT assumed before the first sample */
    uint64_t max_inflight;      /* packets the sender can track in flight; 0: no limit */
    uint64_t seed;              /* varies the cycle length between flows */
    /* Careful Resume: the bottleneck rate and min RTT a previous session
     * measured on this path (0: none, a normal start). */
    uint64_t resume_rate_bps;
    uint64_t resume_rtt_ns;
} aftp_cc_config;

/* What one FEEDBACK tells the controller. */
typedef struct aftp_cc_feedback {
    uint64_t now_ns;
    uint64_t largest_pn;        /* highest packet number the receiver saw */
    /* The RTT sample (spec 10.1): now - sent time of largest_pn, or, when
     * largest_pn overtook others (aftp_cc_overtaken), of the newest DATA
     * packet settled in order; 0: unknown. */
    uint64_t rtt_ns;
    uint64_t ack_delay_ns;      /* receiver's delay before answering (0 for a settled packet) */
    int rtt_settled;            /* rtt_ns is the settled packet's: it never lowers min RTT */
    uint64_t recv_time_us;      /* receiver's clock when it sent the FEEDBACK */
    uint64_t packets_received;  /* DATA datagrams that arrived, cumulative */
    /* DATA packets among 0..largest_pn, from the sender's record of what
     * it sent (AFTP_CC_UNKNOWN: no longer known; no rate sample then). */
    uint64_t data_sent;
    /* With rtt_settled: DATA packets among 0..the settled packet. The
     * rate sample ends there: the packets largest_pn overtook are, as far
     * as rate and loss can tell, not sent yet (not lost). */
    uint64_t data_settled;
} aftp_cc_feedback;

#define AFTP_CC_UNKNOWN UINT64_MAX

/* A receive-rate measurement point (receiver's clock and counters). */
typedef struct aftp_cc_mark {
    uint64_t recv_time_us;
    uint64_t packets_received;
    uint64_t data_sent;         /* DATA packets sent up to largest_pn */
    uint64_t sent_ns;           /* when largest_pn was sent (our clock); 0: unknown */
} aftp_cc_mark;

typedef struct aftp_cc {
    aftp_cc_config cfg;
    int mode;                   /* enum aftp_cc_mode */
    int phase;                  /* enum aftp_cc_phase (PROBE_BW) */
    uint64_t rate_bps;          /* current pacing rate */
    uint64_t datagram_bytes;    /* largest DATA datagram seen; 0: none yet */

    /* packet numbering */
    uint64_t next_pn;           /* one past the last packet sent */
    uint64_t data_count;        /* DATA packets sent */
    uint64_t data_reported;     /* DATA packets among 0..largest_pn */
    int has_largest;
    uint64_t largest_pn;

    /* rounds: a round ends when a packet sent after its start is reported */
    uint64_t round;
    uint64_t round_end_pn;

    /* bandwidth: per-round maxima of the receive rate, bits/s */
    uint64_t bw_slot[AFTP_CC_BW_ROUNDS];
    unsigned bw_index;          /* slot of the current round */
    uint64_t bw_bps;
    uint64_t bw_recent[3];      /* latest receive-rate samples, oldest first */
    unsigned bw_recent_count;   /* how many of them came since the last cut */
    int has_mark;
    aftp_cc_mark mark;          /* start of the current rate sample */
    uint64_t span_min_qdelay_ns; /* lowest queueing delay since the mark */
    uint64_t sample_qdelay_ns;  /* the same, for the latest sample */
    uint64_t last_recv_time_us;
    uint64_t feedback_gap_ns;   /* FEEDBACK spacing (receiver's clock), smoothed */

    /* RTT */
    uint64_t min_rtt_ns;        /* 0: no sample yet */
    uint64_t min_rtt_seen_ns;   /* when a sample last came near min_rtt */
    uint64_t probe_rtt_min_ns;  /* lowest sample during PROBE_RTT */
    uint64_t prev_rtt_ns;       /* the previous sample: a new minimum takes two */
    uint64_t handshake_rtt_ns;  /* the handshake's round trip; 0: not measured */
    uint64_t qdelay_ns;         /* latest queueing delay */

    /* loss */
    double base_loss;           /* random loss while the queue was empty */
    uint64_t base_packets;      /* packets that went into base_loss */
    double recent_loss;         /* loss of the latest rate sample */
    uint64_t window_sent, window_lost; /* this round's samples, for congestion */
    uint64_t window_round;

    /* state machine */
    uint64_t full_bw_bps;       /* startup plateau detection */
    unsigned full_bw_rounds;
    int startup_overflow;       /* a sample showed the buffer overflowing */
    uint64_t phase_start_ns;
    uint64_t cycle_start_round;
    uint64_t cycle_start_ns;
    unsigned cycle_rounds;      /* this cycle's length in rounds... */
    uint64_t cycle_max_ns;      /* ...or time, whichever ends first */
    int queue_above;            /* queueing delay above target... */
    uint64_t queue_since_ns;    /* ...since then, */
    uint64_t queue_bw_bps;      /* ...when bw was this */
    uint64_t probe_rtt_round;   /* round PROBE_RTT began */
    uint64_t dip_ns;            /* length of the current DIP */
    uint64_t dip_end_pn;        /* 0: no DIP tried since min RTT was seen;
                                 * UINT64_MAX: one runs; else the first
                                 * packet sent after it */
    uint64_t drain_round;       /* round DRAIN began */
    uint64_t hold_until_pn;     /* after a cut: no new cut or sample before */
    uint64_t hold_release_ns;   /* ...the first packet sent after this time */
    uint64_t now_ns;            /* latest time seen */
    uint64_t rng;
    uint64_t congestion_events;
    uint64_t last_cut_qdelay_ns; /* queue seen at the latest delay cut */
    unsigned futile_cuts;       /* delay cuts in a row that did not shrink it */
    uint64_t futile_probe_ns;   /* PROBE_RTT for futile cuts last began; 0: never */
    int competing;              /* a queue we cannot shrink: only loss is congestion */
    uint64_t compete_start_ns;  /* when competing last began */
    uint64_t compete_end_ns;    /* when a long spell of competing last ended; 0: never */
    uint64_t compete_wmax_bps;  /* FAIR competing: the rate before the latest loss cut... */
    uint64_t compete_epoch_ns;  /* ...and when it came: growth since is CUBIC's */

    /* Careful Resume */
    int resume;                 /* enum aftp_cc_resume */
    uint64_t jump_rate_bps;     /* half the saved rate, clamped */
    uint64_t jump_first_pn;     /* first packet sent at the jump rate */
    uint64_t jump_data_sent;    /* DATA packets sent before the jump (data_count then) */
    uint64_t jump_round;        /* round the jump began */
    unsigned jump_good, jump_bad; /* samples in a row that confirm / refute it */
} aftp_cc;

void aftp_cc_init(aftp_cc *cc, const aftp_cc_config *cfg, uint64_t now_ns);

/* Packet pn (numbered 0, 1, 2... by the session) of `bytes` left at now;
 * is_data: a DATA packet (counted by the receiver's packets_received). */
void aftp_cc_on_sent(aftp_cc *cc, uint64_t now_ns, uint64_t pn, uint64_t bytes, int is_data);
/* 1 when a FEEDBACK's largest_pn overtook the packets sent before it
 * (reordering): `unsettled` DATA packets before it (neither received nor
 * declared lost) and it left `lead_ns` after the settled packet, more of
 * a round trip (aftp_cc_rtt) than losses not yet declared and jitter
 * explain. Its RTT is then not the path's round trip (spec 10.1). */
int aftp_cc_overtaken(const aftp_cc *cc, uint64_t unsettled, uint64_t sent_in_rtt,
                      uint64_t lead_ns);
/* The round trip reordering is judged over: min RTT plus a feedback
 * interval (initial RTT before a sample). */
uint64_t aftp_cc_rtt(const aftp_cc *cc);
/* A FEEDBACK arrived (stale ones, not raising largest_pn, are ignored). */
void aftp_cc_on_feedback(aftp_cc *cc, const aftp_cc_feedback *fb);

/* The handshake took rtt_ns (one HELLO, its HELLO_ACK): Careful Resume's
 * Reconnaissance may judge the saved RTT by it before any DATA, and jump
 * from the first DATA on. It includes the server's handshake work, so it
 * can only show a path longer than it is: one more than 10 x the saved
 * RTT leaves the judgement to the first FEEDBACK; one below half of it
 * rules the saved state out. */
void aftp_cc_on_handshake_rtt(aftp_cc *cc, uint64_t rtt_ns);

/* New --min-rate / --max-rate (0: none) from now on; the estimates stay. */
void aftp_cc_set_limits(aftp_cc *cc, uint64_t min_rate_bps, uint64_t max_rate_bps);
/* The pacing rate now, bits per second. */
uint64_t aftp_cc_rate(const aftp_cc *cc);
/* 1 when one more DATA packet may leave: DATA packets sent after the
 * largest reported one stay below the inflight cap. Control packets do
 * not count: the receiver answers DATA with FEEDBACK, not them, so a run
 * of them (a pipelined session's ENTRIES) would otherwise hold DATA back
 * for good. */
int aftp_cc_may_send(const aftp_cc *cc);
/* DATA packets the controller allows in flight (UINT64_MAX: no cap). */
uint64_t aftp_cc_inflight_cap(const aftp_cc *cc);
/* DATA packets sent and not yet covered by a FEEDBACK. */
uint64_t aftp_cc_inflight(const aftp_cc *cc);

/* Fills the controller's fields of a stats record. */
void aftp_cc_stats(const aftp_cc *cc, aftp_stats *out);

#endif /* AFTP_CC_H */
