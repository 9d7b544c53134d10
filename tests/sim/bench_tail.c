/*
 * The end of whole transfers, not a test: the engines (FAIR, no cipher:
 * the virtual clock does not see CPU) over a 1 Gbit/s path with one BDP
 * of queue and random loss on the forward link. Per run, from the last
 * block sent for the first time (T) to the sender's close, in round
 * trips: T -> the first DATA after it (waiting for loss detection, or a
 * tail copy), -> the last DATA (repair rounds), -> the last FILE_RESULT
 * at the sender (flight, verification, commit, the result's way back),
 * -> closed; and the whole time, the retransmitted share and the share of
 * the file's bytes the link lost (random loss and queue overflow); and
 * the bytes the receiver still had to read back (verify) once each
 * file's last block had landed, which the clock does not see.
 *   sim_bench_tail [size_mib [files [rtt_ms [loss [seeds [window]]]]]]
 * defaults: 256 MiB in 1 file, 150 ms, 1% loss, 3 seeds, a pipelined
 * session of window 4096 (as the CLI's; 0: one-file).
 */
#include <stdio.h>
#include <stdlib.h>

#include "sim_tail.h"

#define LINK_BPS UINT64_C(1000000000)

/* The pipeline window of both sides (ctx): 0 for a one-file session. */
static void pipelined(void *ctx, aftp_sender_settings *s, aftp_receiver_settings *r)
{
    s->pipeline_window = *(const uint32_t *)ctx;
    r->pipeline_window = *(const uint32_t *)ctx;
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
    int files = argc > 2 ? atoi(argv[2]) : 1;
    uint64_t rtt_ms = argc > 3 ? strtoull(argv[3], NULL, 10) : 150;
    double loss = argc > 4 ? atof(argv[4]) : 0.01;
    int seeds = argc > 5 ? atoi(argv[5]) : 3;
    uint32_t window = argc > 6 ? (uint32_t)strtoul(argv[6], NULL, 10) : 4096;
    double rtt = (double)rtt_ms * 1e6;
    for (int seed = 1; seed <= seeds; seed++) {
        sim_cfg c;
        sim_result r;
        sim_tail t = {0};
        sim_tail_split sp;
        sim_cfg_wan(&c, LINK_BPS, rtt_ms, loss);
        c.file_size = mib * 1024 * 1024 / (uint64_t)files;
        c.nfiles = files;
        c.seed = (uint64_t)seed;
        c.cipher = AFTP_CIPHER_NONE;
        c.tune = pipelined;
        c.tune_ctx = &window;
        sim_tail_attach(&c, &t);
        sim_run(&c, &r);
        sim_tail_split_of(&t, r.snd_side.ev.closed_at, &sp);
        uint64_t read_late = 0;
        for (uint32_t id = 1; id <= (uint32_t)files; id++) {
            const sim_file *f = sim_storage_file(&r.st, id);
            read_late += f->viewed - f->viewed_early;
        }
        uint64_t detect_end = sp.first_resend_at ? sp.first_resend_at : sp.last_new_at;
        printf("%llu MiB/%d, %llu ms, loss %.3f, seed %d: %s tail %.2f RTT = wait %.2f + "
               "repairs %.2f (%llu DATA, most sends of a block %u) + result %.2f + close %.2f; "
               "whole %.3f s, retransmitted %.2f%% (link lost %.2f%%, tail copies %.2f%%); "
               "read back after the last block %.1f MiB\n",
               (unsigned long long)mib, files, (unsigned long long)rtt_ms, loss, seed,
               r.snd_error == AFTP_OK && r.rcv_error == AFTP_OK && !r.stuck ? "ok" : "FAILED",
               (double)(sp.closed_at - sp.last_new_at) / rtt,
               (double)(detect_end - sp.last_new_at) / rtt,
               (double)(sp.last_data_at - detect_end) / rtt,
               (unsigned long long)sp.tail_resends, sp.most_sends,
               (double)(sp.result_at - sp.last_data_at) / rtt,
               (double)(sp.closed_at - sp.result_at) / rtt, (double)sp.closed_at / 1e9,
               100.0 * (double)r.snd.payload_bytes_retransmitted / (double)(mib << 20),
               100.0 * (double)r.fwd_data_lost / (double)(mib << 20),
               100.0 * (double)r.snd.payload_bytes_copied / (double)(mib << 20),
               (double)read_late / (1024.0 * 1024.0));
        sim_tail_free(&t);
        sim_result_free(&r);
    }
    return 0;
}
