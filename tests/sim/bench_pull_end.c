/* A benchmark, not a test: how a pull's end compares with a push's (spec
 * 9.11, 9.15.5). The real engines, protected and pipelined, move one file
 * over a 1 Gbit/s, 150 ms path (the controller's default policy, a queue
 * of one bandwidth-delay product), once pushed and once pulled. Printed
 * per seed: when the client's session ended, when its last file ended,
 * and pull / push of the client's end time.
 *
 *   sim_bench_pull_end [size_mib [loss [seeds]]]
 *
 * defaults: 128 MiB, 0 loss, 3 seeds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_run.h"

#define LINK_BPS (UINT64_C(1000) * 1000 * 1000)
#define RTT_MS 150
#define WINDOW 64u

static const char *const request[] = {"f"};
static uint64_t pull_size;
static aftp_storage_ops server_ops;
static int asked; /* the request's path was decided */

static int pull_path(void *user, uint32_t index, const char *path, unsigned flags)
{
    (void)user;
    (void)index;
    (void)path;
    (void)flags;
    asked = 1;
    return AFTP_OK;
}

static void tune_pull(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    aftp_pull_request q = {.paths = request, .path_count = 1};
    sim_tune_pull(s, r, &server_ops, pull_path, WINDOW, &q);
}

static void tune_push(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    (void)ctx;
    s->pipeline_window = WINDOW;
    r->pipeline_window = WINDOW;
}

/* The server's walk: the one file once the request is decided. */
static int walk(void *ctx, sim_storage *st, aftp_sender *snd, uint64_t now)
{
    (void)ctx;
    (void)now;
    if (!asked) /* storage decides the request first (in message 1, 12.3.4) */
        return 0;
    if (st->nfiles == 0) {
        aftp_entry_info e = {.file = {.file_id = 1, .size = pull_size, .mode = 0644,
                                      .mtime_ns = 1700000000 * SIM_S, .path = "f"},
                             .kind = AFTP_ENTRY_FILE, .source_id = 7};
        if (aftp_sender_add_entry(snd, &e) != AFTP_OK)
            abort();
        sim_storage_add_entry(st, AFTP_ENTRY_FILE, "f", pull_size,
                              1452u - AFTP_WIRE_DATA_OVERHEAD, NULL);
    }
    return 1;
}

/* The client's end and its last file's end (virtual ns). */
static void run(int pull, uint64_t size, double loss, uint64_t seed, uint64_t *end_ns,
                uint64_t *file_ns)
{
    sim_cfg c;
    sim_result r;
    sim_cfg_wan(&c, LINK_BPS, RTT_MS, loss);
    c.file_size = size;
    c.nfiles = pull ? 0 : 1;
    c.seed = seed;
    c.tune = pull ? tune_pull : tune_push;
    pull_size = size;
    asked = 0;
    if (pull)
        c.refill = walk;
    sim_run(&c, &r);
    if (r.snd_error != AFTP_OK || r.rcv_error != AFTP_OK || r.stuck)
        fprintf(stderr, "run failed: sender %d receiver %d stuck %d\n", r.snd_error, r.rcv_error,
                r.stuck);
    const sim_side *client = pull ? &r.rcv_side : &r.snd_side;
    *end_ns = client->ev.closed_at;
    *file_ns = client->ev.file_end_at;
    sim_result_free(&r);
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 128;
    double loss = argc > 2 ? atof(argv[2]) : 0;
    int seeds = argc > 3 ? atoi(argv[3]) : 3;
    for (int seed = 1; seed <= seeds; seed++) {
        uint64_t end[2], file[2];
        for (int pull = 0; pull < 2; pull++)
            run(pull, mib * 1024 * 1024, loss, (uint64_t)seed, &end[pull], &file[pull]);
        printf("%" PRIu64 " MiB, loss %.3f, seed %d: push client ended %.3f s (file %.3f), "
               "pull client ended %.3f s (file %.3f); pull/push %.3f\n",
               mib, loss, seed, (double)end[0] / 1e9, (double)file[0] / 1e9,
               (double)end[1] / 1e9, (double)file[1] / 1e9, (double)end[0] / (double)end[1]);
    }
    return 0;
}
