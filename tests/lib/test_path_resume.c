/* Path memory at work (Careful Resume, spec 13.2 item 6 and 13.4;
 * io/store/aftp_pathmem.h): a send's lookup of its path in the memory
 * file hands the sender the saved rate and RTT, and the sender jumps.
 *
 * A server runs in a thread of this process (server_fixture.h); the client
 * (aftp_client_send with aftp_client_set_path_memory_file) reaches it
 * through a relay of this test that delays every datagram RELAY_DELAY_MS
 * each way, so that the path has a round-trip time a scheduler's hiccup
 * does not blur, and that counts the bytes the client sent in its first
 * round trips after the handshake.
 *
 *   jump      with an entry for this server (its key, the client's
 *             address, the relay's address and port) of SAVED_BPS, the
 *             first round trips carry at least what the jump to half that
 *             rate puts in flight in one round trip;
 *   no jump   with an entry for another server only, they carry what
 *             startup's initial window does: less than a quarter of it.
 * Both files arrive byte-exact.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "aftp/aftp_client.h"
#include "io_testutil.h"
#include "server_fixture.h"

#define RELAY_DELAY_MS 50u
#define RTT_NS (UINT64_C(2) * RELAY_DELAY_MS * 1000000u)
#define SAVED_BPS UINT64_C(400000000) /* the entry's rate: the jump is to half of it */
#define FILE_LEN (16u << 20)
/* From the handshake's end (however long the server took to answer it):
 * two round trips of data (the file's offer rode in the handshake, spec
 * 12.3.4, so its verdict came with the handshake's answer). A jump's
 * first round trip of data falls within it whole; of startup, its first
 * two windows (its initial one, then about three times that). */
#define EARLY_NS (2 * RTT_NS)

enum { RING = 4096, DATAGRAM_MAX = 2048 };

/* ---- the relay ---- */

typedef struct held_datagram {
    uint64_t due_ns;
    int to_server;
    size_t len;
    uint8_t bytes[DATAGRAM_MAX];
} held_datagram;

/* The client sends to `front`; what it sends goes out of `back` to the
 * server, what comes back goes to the client, each RELAY_DELAY_MS later
 * (a datagram that finds the ring full is dropped, as a router's queue
 * would). */
typedef struct relay {
    int front, back;
    unsigned port; /* front's */
    struct sockaddr_in client;
    int have_client;
    held_datagram *ring;
    size_t head, count;
    uint64_t answered_ns; /* the server's first datagram came (0: not yet) */
    uint64_t first_ns;    /* the client's first datagram once it can have heard
                           * that answer: its handshake ended (0: not yet) */
    uint64_t early_bytes; /* the client's bytes within EARLY_NS of it */
    atomic_int stop;
    pthread_t thread;
} relay;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int udp_bound(unsigned port)
{
    struct sockaddr_in at = io_test_loopback((uint16_t)port);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int big = 8 << 20;
    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    assert_int_equal(bind(fd, (struct sockaddr *)&at, sizeof at), 0);
    return fd;
}

/* A datagram of n bytes from the client at `now`, counted when it comes
 * within EARLY_NS of the handshake's end. */
static void count_early(relay *r, uint64_t now, uint64_t n)
{
    uint64_t heard = r->answered_ns + RELAY_DELAY_MS * UINT64_C(1000000);
    if (r->first_ns == 0 && r->answered_ns != 0 && now >= heard)
        r->first_ns = now;
    if (r->first_ns != 0 && now - r->first_ns <= EARLY_NS)
        r->early_bytes += n;
}

/* Every datagram waiting on fd into the ring, due RELAY_DELAY_MS from now. */
static void relay_take(relay *r, int fd, int to_server)
{
    for (;;) {
        held_datagram *d = &r->ring[(r->head + r->count) % RING];
        held_datagram spill;
        struct sockaddr_in from;
        socklen_t from_len = sizeof from;
        if (r->count == RING)
            d = &spill;
        ssize_t n = recvfrom(fd, d->bytes, sizeof d->bytes, 0, (struct sockaddr *)&from,
                             &from_len);
        if (n < 0)
            return;
        uint64_t now = mono_ns();
        if (!to_server && r->answered_ns == 0)
            r->answered_ns = now;
        if (to_server) {
            r->client = from;
            r->have_client = 1;
            count_early(r, now, (uint64_t)n);
        }
        if (d == &spill)
            continue;
        d->due_ns = now + RELAY_DELAY_MS * UINT64_C(1000000);
        d->to_server = to_server;
        d->len = (size_t)n;
        r->count++;
    }
}

/* The datagrams due by now, sent on; the time until the next one is due
 * in ms (-1: none held). */
static int relay_send_due(relay *r)
{
    uint64_t now = mono_ns();
    while (r->count > 0 && r->ring[r->head].due_ns <= now) {
        held_datagram *d = &r->ring[r->head];
        if (d->to_server)
            (void)send(r->back, d->bytes, d->len, 0);
        else
            (void)sendto(r->front, d->bytes, d->len, 0, (struct sockaddr *)&r->client,
                         sizeof r->client);
        r->head = (r->head + 1) % RING;
        r->count--;
    }
    if (r->count == 0)
        return -1;
    return (int)((r->ring[r->head].due_ns - now) / 1000000u);
}

static void *relay_thread(void *arg)
{
    relay *r = arg;
    while (!atomic_load(&r->stop)) {
        int wait_ms = relay_send_due(r);
        struct pollfd fds[2] = {{.fd = r->front, .events = POLLIN},
                                {.fd = r->back, .events = POLLIN}};
        if (poll(fds, 2, wait_ms < 0 || wait_ms > 50 ? 50 : wait_ms) <= 0)
            continue;
        if (fds[0].revents & POLLIN)
            relay_take(r, r->front, 1);
        if (fds[1].revents & POLLIN)
            relay_take(r, r->back, 0);
    }
    return NULL;
}

/* A relay to the server at 127.0.0.1:server_port, running. */
static void relay_start(relay *r, unsigned server_port)
{
    struct sockaddr_in at;
    socklen_t len = sizeof at;
    struct sockaddr_in server = io_test_loopback((uint16_t)server_port);
    memset(r, 0, sizeof *r);
    r->ring = calloc(RING, sizeof *r->ring);
    assert_non_null(r->ring);
    r->front = udp_bound(0);
    r->back = udp_bound(0);
    assert_int_equal(connect(r->back, (struct sockaddr *)&server, sizeof server), 0);
    assert_int_equal(getsockname(r->front, (struct sockaddr *)&at, &len), 0);
    r->port = ntohs(at.sin_port);
    assert_int_equal(pthread_create(&r->thread, NULL, relay_thread, r), 0);
}

static void relay_stop(relay *r)
{
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    close(r->front);
    close(r->back);
    free(r->ring);
}

/* ---- the test ---- */

typedef sfx_one fixture;

/* A path memory at `path` with one entry, saved now: the path to the
 * server of `key` from 127.0.0.1 to 127.0.0.1:port (the format of
 * aftp_pathmem.h, written here as a client's earlier session left it). */
static void write_memory(const char *path, const uint8_t *key, unsigned port)
{
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fprintf(out, "aftp-path-memory 1\n");
    for (size_t i = 0; i < AFTP_KEY_LEN; i++)
        fprintf(out, "%02x", key[i]);
    fprintf(out, "/127.0.0.1/127.0.0.1:%u %llu %llu %lld\n", port,
            (unsigned long long)SAVED_BPS, (unsigned long long)RTT_NS,
            (long long)time(NULL));
    fclose(out);
}

/* A send of `name` through a new relay to the server, with the path
 * memory of an entry for `memory_key`; the client's bytes in its first
 * round trips. */
static uint64_t send_through_relay(fixture *f, unsigned port, const char *name,
                                   const uint8_t *memory_key)
{
    char src[700], memory[700];
    relay r;
    snprintf(src, sizeof src, "%s/%s", f->srv.top, name);
    snprintf(memory, sizeof memory, "%s/%s.paths", f->srv.top, name);
    sfx_make_file(src, FILE_LEN, (uint32_t)name[0]);
    relay_start(&r, port);
    write_memory(memory, memory_key, r.port);
    aftp_client *c = sfx_client_new(f->client.secret, f->server.public_key);
    assert_int_equal(aftp_client_set_path_memory_file(c, memory), AFTP_OK);
    char host[64];
    sfx_client_host(host, sizeof host, r.port);
    const char *files[] = {src};
    int rc = aftp_client_send(c, host, files, 1);
    aftp_client_del(c);
    relay_stop(&r);
    assert_int_equal(rc, AFTP_OK);
    assert_true(sfx_same_file(f->dir, name, src));
    return r.early_bytes;
}

static void test_saved_path_jumps(void **state)
{
    fixture *f = *state;
    sfx_key other;
    sfx_key_new(&other);
    sfx_configure(&f->srv, f->dir, f->server.secret, f->authorized, 10000);
    unsigned port = sfx_start(&f->srv, 30);
    uint64_t cold = send_through_relay(f, port, "cold.bin", other.public_key);
    uint64_t warm = send_through_relay(f, port, "warm.bin", f->server.public_key);
    sfx_stop(&f->srv, 10);

    /* what a jump to half the saved rate puts in flight in one round trip */
    uint64_t jump_bytes = SAVED_BPS / 2 / 8 * RTT_NS / 1000000000u;
    print_message("%llu ms from the handshake: %llu bytes with the entry, %llu without "
                  "(a jump's round trip: %llu)\n", (unsigned long long)(EARLY_NS / 1000000u),
                  (unsigned long long)warm, (unsigned long long)cold,
                  (unsigned long long)jump_bytes);
    assert_true(warm >= jump_bytes);
    assert_true(cold < jump_bytes / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_saved_path_jumps, sfx_one_setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
