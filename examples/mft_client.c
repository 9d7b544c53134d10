/*
 * mft_client: sends files to an aftp server (such as mft_server) with
 * libaftp, printing progress and each file's result.
 *
 *   mft_client IDENTITY_FILE SERVER_PUBKEY_FILE HOST:PORT FILE...
 *
 * IDENTITY_FILE       this partner's private key (`aftp keygen -f FILE`,
 *                     mode 0600); the server lists FILE.pub.
 * SERVER_PUBKEY_FILE  the server's public key (its FILE.pub): the client
 *                     talks only to the holder of that key.
 * HOST:PORT           where the server listens.
 * FILE...             sent in order, in one session; each lands under its
 *                     base name.
 *
 * stdout, one line per event:
 *   progress invoice.csv 524288/1048576 bytes 50.0% 812.4 Mbit/s
 *   sent invoice.csv 1048576 bytes 0.02 s xxh3=5f1e...c9
 * The exit status is 0 when every file was delivered and verified, else 1
 * with the reason on stderr. SIGINT cancels the send.
 *
 * Build against an installed libaftp:
 *   cc mft_client.c $(pkg-config --cflags --libs aftp) -o mft_client
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <aftp/aftp.h>

/* aftp_client_cancel() is async-signal-safe: the one thing a handler may do. */
static aftp_client *volatile sending_client;

static void on_signal(int sig)
{
    (void)sig;
    aftp_client_cancel(sending_client);
}

/* Callbacks run on the thread inside aftp_client_send(); their arguments
 * are valid only during the call (copy what you keep). */

/* About four times a second while a file is under way (a file that takes
 * less may get no call at all). */
static void on_progress(void *user, const aftp_progress *p)
{
    (void)user;
    printf("progress %s %llu/%llu bytes %.1f%% %.1f Mbit/s\n", p->name,
           (unsigned long long)p->bytes_done, (unsigned long long)p->size,
           p->size > 0 ? 100.0 * (double)p->bytes_done / (double)p->size : 100.0,
           p->goodput_bps / 1e6);
}

static void on_file(void *user, const aftp_file_event *ev)
{
    (void)user;
    if (ev->type == AFTP_FILE_FINISHED) {
        /* The XXH3-128 both sides computed and compared: the same digest
         * the server's receipt (its audit line) carries. */
        char digest[2 * AFTP_DIGEST_LEN + 1];
        for (int i = 0; i < AFTP_DIGEST_LEN; i++)
            snprintf(digest + 2 * i, 3, "%02x", ev->digest[i]);
        printf("sent %s %llu bytes %.2f s xxh3=%s\n", ev->name, (unsigned long long)ev->size,
               ev->seconds, digest);
    } else if (ev->type == AFTP_FILE_FAILED) {
        printf("failed %s: %s\n", ev->source, ev->message);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: mft_client IDENTITY_FILE SERVER_PUBKEY_FILE HOST:PORT FILE...\n");
        return 2;
    }
    /* Process-wide set-up, first thing, before anything uses OpenSSL:
     * AFTP_INIT_GUARD_KEYS keeps the ciphers' key schedules in guarded,
     * unswappable memory; AFTP_INIT_GUARD_SOURCE installs aftp's SIGBUS
     * handler, so that a file truncated by someone else while it is sent
     * fails that file (AFTP_ERR_SOURCE_CHANGED) instead of killing the
     * process. Optional: without it aftp installs nothing process-wide. */
    int rc = aftp_global_init(AFTP_INIT_GUARD_KEYS | AFTP_INIT_GUARD_SOURCE);
    if (rc != AFTP_OK)
        fprintf(stderr, "mft_client: aftp_global_init: %s (aftp works on without it)\n",
                aftp_strerror(rc));

    aftp_client *c = NULL;
    rc = aftp_client_new(&c);
    if (rc != AFTP_OK) {
        fprintf(stderr, "mft_client: %s\n", aftp_strerror(rc));
        return 1;
    }
    /* Key files are read now; the handle keeps its own copies. */
    if ((rc = aftp_client_set_identity_file(c, argv[1])) == AFTP_OK &&
        (rc = aftp_client_set_peer_key_file(c, argv[2])) == AFTP_OK) {
        aftp_client_set_progress_cb(c, on_progress, NULL);
        aftp_client_set_file_cb(c, on_file, NULL);
        sending_client = c;
        signal(SIGINT, on_signal);
        /* Blocks until every file is verified by the server, or the first
         * failure. */
        rc = aftp_client_send(c, argv[3], (const char *const *)&argv[4], (size_t)argc - 4);
        signal(SIGINT, SIG_DFL);
    }
    if (rc != AFTP_OK)
        fprintf(stderr, "mft_client: %s\n", aftp_client_errmsg(c));
    aftp_client_del(c); /* wipes the keys it held */
    aftp_global_cleanup();
    return rc == AFTP_OK ? 0 : 1;
}
