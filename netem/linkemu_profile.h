/*
 * WAN link profiles: the key=value files in netem/profiles/, read by both
 * emulation backends (the user-space TUN emulator and, through the tc
 * arguments printed here, the kernel's netem + tbf qdiscs), so the two share
 * one parser and one meaning for every setting.
 *
 * File format: one `key=value` per line, `#` starts a comment. A key applies
 * to both directions; `fwd.key` (sender -> receiver) or `rev.key`
 * (receiver -> sender) overrides it for one direction. Keys:
 *   rate=1gbit        bottleneck rate of IP packets (bit, kbit, mbit, gbit); 0 = unlimited
 *   delay=75ms        one-way propagation delay (ns, us, ms, s)
 *   jitter=0ms        delay variation (about normal, sigma = jitter, FIFO order kept)
 *   queue=bdp         drop-tail queue in bytes (B, KB, MB, KiB, MiB) or `bdp`
 *   loss=1%           independent random loss
 *   ge_p=0.25%        Gilbert-Elliott: P(good -> bad) per packet (enables the model)
 *   ge_r=25%          Gilbert-Elliott: P(bad -> good) per packet
 *   ge_bad_loss=100%  loss probability in the bad state
 *   ge_good_loss=0%   loss probability in the good state
 *   reorder=0%        packets that skip the propagation delay (overtake others)
 *   duplicate=0%      packets delivered twice
 *   mtu=1500          both directions only
 */
#ifndef LINKEMU_PROFILE_H
#define LINKEMU_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum linkemu_dir { LINKEMU_FWD = 0, LINKEMU_REV = 1, LINKEMU_NDIRS = 2 };

/* The link model of one direction. Probabilities are in [0, 1]. */
struct linkemu_dir_params {
    uint64_t rate_bps;    /* IP-layer bottleneck rate; 0 = unlimited */
    uint64_t delay_ns;    /* one-way propagation delay */
    uint64_t jitter_ns;   /* standard deviation of the delay variation */
    uint64_t queue_bytes; /* drop-tail queue in front of the bottleneck */
    double loss;          /* independent random loss */
    double ge_p, ge_r;    /* Gilbert-Elliott transitions; ge_p > 0 enables it */
    double ge_bad_loss, ge_good_loss;
    double reorder;
    double duplicate;
};

struct linkemu_profile {
    char name[64];
    unsigned mtu;
    struct linkemu_dir_params dir[LINKEMU_NDIRS];
};

/* The smallest default queue: a one-BDP queue of a LAN-sized RTT would drop
 * ordinary bursts that any real switch absorbs. */
#define LINKEMU_MIN_DEFAULT_QUEUE (128u * 1024u)

/* Parses the profile file at `path` into `out` and fills the defaults
 * (queue = one bandwidth-delay product of the round trip). On failure returns
 * a negative aftp_error code and writes a message naming the line to `err`. */
int linkemu_profile_load(const char *path, struct linkemu_profile *out, char *err,
                         size_t errlen);

/* Long-run average loss probability of one direction (random or the
 * Gilbert-Elliott stationary mean). */
double linkemu_profile_mean_loss(const struct linkemu_dir_params *p);

/* Factor by which bursty loss widens the variance of a loss count over many
 * packets compared with independent loss (1 for random loss): lets a test
 * build a confidence interval around the mean. */
double linkemu_profile_loss_variance_factor(const struct linkemu_dir_params *p);

/* Prints the profile as shell assignments (WAN_MTU=..., WAN_FWD_RATE_BPS=...). */
void linkemu_profile_describe(const struct linkemu_profile *prof, FILE *out);

/* Prints the `tc qdisc add ... netem` options of one direction. */
void linkemu_profile_print_netem_args(const struct linkemu_profile *prof, enum linkemu_dir d,
                                      FILE *out);

/* Prints the `tc qdisc add ... tbf` options of one direction, or nothing
 * when the direction has no rate limit. */
void linkemu_profile_print_tbf_args(const struct linkemu_profile *prof, enum linkemu_dir d,
                                    FILE *out);

#endif /* LINKEMU_PROFILE_H */
