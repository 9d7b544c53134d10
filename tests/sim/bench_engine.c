/*
 * Engine CPU cost, not a test: a sender and a receiver engine back to back
 * (no link model, optional random DATA loss), paced at 100 Gbit/s so CPU is
 * the only limit, on a virtual clock stepped 1 us at a time. Prints the CPU
 * time per datagram for both engines together, storage copies and both
 * XXH3 passes (sender stream, receiver read-back) and, in a protected
 * session, the encryption and decryption of every packet included.
 *   sim_bench_engine [bytes (default 64 MiB)] [loss (default 0)]
 *                    [cipher: auto (default), aes, chacha, none]
 * Sizes above SIM_SYNTHETIC_ABOVE (64 MiB) run on synthetic storage, which
 * copies no file bytes: their figures leave the storage copies out and are
 * not comparable with those of smaller sizes.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_run.h"

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct bench {
    sim_storage st;
    sim_side snd_side, rcv_side;
    uint64_t clock;
    aftp_sender *snd;
    aftp_receiver *rcv;
} bench;

static int cipher_choice(const char *name)
{
    static const struct {
        const char *name;
        int choice;
    } names[] = {{"auto", AFTP_CIPHER_AUTO},
                 {"aes", AFTP_CIPHER_AES256GCM},
                 {"chacha", AFTP_CIPHER_CHACHA20POLY1305},
                 {"none", AFTP_CIPHER_NONE}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].choice;
    fprintf(stderr, "unknown cipher %s (auto, aes, chacha, none)\n", name);
    exit(2);
}

static void make(bench *b, uint64_t size, int cipher)
{
    sim_storage_init(&b->st, 1, size, 1);
    b->snd_side = (sim_side){.st = &b->st, .clock = &b->clock};
    b->rcv_side = (sim_side){.st = &b->st, .clock = &b->clock};
    aftp_sender_settings s;
    aftp_receiver_settings r;
    sim_engine_settings(&s, &b->snd_side, &r, &b->rcv_side);
    s.rate_bps = UINT64_C(100000000000);
    s.initial_rtt_ns = SIM_MS;
    s.security.cipher = r.security.cipher = cipher;
    aftp_file_info info = {.file_id = 1, .size = size, .path = "bench"};
    if (aftp_sender_new(&s, 0, &b->snd) != AFTP_OK || aftp_receiver_new(&r, 0, &b->rcv) != AFTP_OK ||
        aftp_sender_add_file(b->snd, &info) != AFTP_OK)
        abort();
    aftp_sender_finish(b->snd);
}

int main(int argc, char **argv)
{
    uint64_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : SIM_SYNTHETIC_ABOVE;
    double loss = argc > 2 ? atof(argv[2]) : 0.0;
    int cipher = cipher_choice(argc > 3 ? argv[3] : "auto");
    static uint8_t sbuf[1452], rbuf[1452], pkt[1452];
    bench b;
    aftp_datagram dg;
    uint64_t rng = 1, datagrams = 0;
    make(&b, size, cipher);
    double t0 = cpu_seconds();
    while (aftp_sender_state(b.snd) != AFTP_STATE_CLOSED && b.clock < 600 * SIM_S) {
        b.clock += 1000;
        if (b.clock >= aftp_sender_expiry(b.snd))
            aftp_sender_handle_expiry(b.snd, b.clock);
        if (b.clock >= aftp_receiver_expiry(b.rcv))
            aftp_receiver_handle_expiry(b.rcv, b.clock);
        while (aftp_sender_write(b.snd, b.clock, sbuf, sizeof sbuf, &dg) == 1) {
            datagrams++;
            if (loss > 0 && sim_rand_unit(&rng) < loss)
                continue;
            /* What a driver's receive path sees: one contiguous datagram. */
            memcpy(pkt, dg.head, dg.head_len);
            memcpy(pkt + dg.head_len, dg.payload, dg.payload_len);
            aftp_receiver_read(b.rcv, b.clock, pkt, dg.head_len + dg.payload_len);
        }
        while (aftp_receiver_write(b.rcv, b.clock, rbuf, sizeof rbuf, &dg) == 1)
            aftp_sender_read(b.snd, b.clock, dg.head, dg.head_len);
    }
    double cpu = cpu_seconds() - t0;
    aftp_stats st;
    aftp_sender_get_stats(b.snd, &st);
    static const char *const wire_names[] = {"none", "aes-256-gcm", "chacha20-poly1305"};
    printf("bench_engine: cipher %s, %llu bytes, loss %.3f: %llu datagrams, %.3f s CPU, %.0f ns/datagram, "
           "%.2f Gbit/s of payload per core, retransmitted %.4f, result %s\n",
           wire_names[st.cipher], (unsigned long long)size, loss, (unsigned long long)datagrams, cpu,
           cpu * 1e9 / (double)datagrams, (double)size * 8 / cpu / 1e9,
           (double)st.payload_bytes_retransmitted / (double)(size ? size : 1),
           sim_file_intact(&b.st, 1) ? "intact" : "NOT INTACT");
    aftp_sender_del(b.snd);
    aftp_receiver_del(b.rcv);
    sim_storage_free(&b.st);
    return 0;
}
