/* A benchmark, not a test: what early entries (spec 12.3.4) save on a
 * whole transfer. The real engines push, pipelined and protected, over a
 * 1 Gbit/s, 150 ms path (the controller's default policy, a queue of one
 * bandwidth-delay product, loss on the forward link), each case with early entries off (the
 * transfer of before: the first DATA two round trips after the HELLO) and
 * on, over several seeds of the link's loss. Printed per case and seed:
 * the virtual time to the first DATA and to the end of the session.
 *
 *   sim_bench_first_flight [size_mib [files [loss [seeds]]]]
 *
 * defaults: 1024 MiB in 1 file, 0 loss, 3 seeds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim_run.h"

#define LINK_BPS (UINT64_C(1000) * 1000 * 1000)
#define RTT_MS 150

typedef struct bench_case {
    int no_early;
    sim_first first;
} bench_case;

static void tune(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    const bench_case *b = ctx;
    s->pipeline_window = 4096;
    r->pipeline_window = 4096;
    s->no_early_entries = b->no_early;
}

static void run(uint64_t size, int files, double loss, uint64_t seed, bench_case *b,
                uint64_t *end_ns)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_wan(&c, LINK_BPS, RTT_MS, loss);
    c.file_size = size;
    c.nfiles = files;
    c.seed = seed;
    c.tune = tune;
    c.tune_ctx = b;
    c.fwd_tap = sim_first_record;
    c.fwd_tap_ctx = &b->first;
    sim_run(&c, &r);
    if (r.snd_error != AFTP_OK || r.rcv_error != AFTP_OK || r.stuck)
        fprintf(stderr, "run failed: sender %d receiver %d stuck %d\n", r.snd_error, r.rcv_error,
                r.stuck);
    *end_ns = r.snd_side.ev.closed_at;
    sim_result_free(&r);
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    int files = argc > 2 ? atoi(argv[2]) : 1;
    double loss = argc > 3 ? atof(argv[3]) : 0;
    int seeds = argc > 4 ? atoi(argv[4]) : 3;
    uint64_t size = mib * 1024 * 1024 / (uint64_t)files;
    for (int seed = 1; seed <= seeds; seed++) {
        uint64_t end[2];
        bench_case b[2] = {{.no_early = 1}, {.no_early = 0}};
        for (int i = 0; i < 2; i++)
            run(size, files, loss, (uint64_t)seed, &b[i], &end[i]);
        printf("%" PRIu64 " MiB in %d file(s), loss %.3f, seed %d: first DATA %.3f -> %.3f s "
               "after the HELLO; sender closed at %.3f -> %.3f s (%+.3f s)\n",
               mib, files, loss, seed, (double)(b[0].first.data_at - b[0].first.hello_at) / 1e9,
               (double)(b[1].first.data_at - b[1].first.hello_at) / 1e9, (double)end[0] / 1e9,
               (double)end[1] / 1e9, ((double)end[1] - (double)end[0]) / 1e9);
    }
    return 0;
}
