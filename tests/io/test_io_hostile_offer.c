/* A hostile sender offers paths that try to escape the destination: the
 * receiver engine, wired to the real store (io/store/aftp_store) beneath a
 * directory, refuses each one through the protocol (the sender's file ends
 * with PATH_REJECTED or FILE_EXISTS) and nothing outside the destination
 * changes. The sender is the real engine: it sends whatever path it is
 * given, as a modified peer would. Both engines run in-process on a fake
 * clock, over a protected session like the CLI's. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_store.h"
#include "common/aftp_handshake.h"
#include "io_testutil.h"

static const uint8_t payload[] = "hostile bytes";

typedef struct world {
    char *root;       /* holds dst/ and outside/ */
    int root_fd, dst_fd, out_fd;
    aftp_store store;
    uint8_t client_secret[AFTP_KEY_LEN], client_public[AFTP_KEY_LEN];
    uint8_t server_secret[AFTP_KEY_LEN], server_public[AFTP_KEY_LEN];
    int file_end_error; /* the sender's FILE_END, 1 before it */
} world;

static world *current;

static int view(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out)
{
    (void)user, (void)file_id;
    if (off + len > sizeof payload)
        return AFTP_ERR_IO;
    *out = payload + off;
    return AFTP_OK;
}

static int close_source(void *user, uint32_t file_id, int commit)
{
    (void)user, (void)file_id, (void)commit;
    return AFTP_OK;
}

static const aftp_storage_ops source_ops = {.view = view, .close = close_source};

static void on_sender_event(void *user, const aftp_event *ev)
{
    world *w = user;
    if (ev->type == AFTP_EV_FILE_END)
        w->file_end_error = ev->error;
}

static int admit_client(void *user, const uint8_t *client_key, uint8_t *psk)
{
    (void)user;
    if (memcmp(client_key, current->client_public, AFTP_KEY_LEN) != 0)
        return AFTP_ERR_UNKNOWN_PEER;
    memset(psk, 0, AFTP_KEY_LEN);
    return AFTP_OK;
}

static void make_file(int dirfd, const char *name, const char *text)
{
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* root/dst (the destination) with dst/link -> ../outside and
 * dst/evil -> ../outside/victim planted; root/outside/victim = "keep". */
static int setup(void **state)
{
    static world w;
    memset(&w, 0, sizeof w);
    w.root = io_test_mkdtemp(&w.root_fd);
    if (mkdirat(w.root_fd, "dst", 0755) != 0 || mkdirat(w.root_fd, "outside", 0755) != 0)
        return -1;
    w.dst_fd = openat(w.root_fd, "dst", O_RDONLY | O_DIRECTORY);
    w.out_fd = openat(w.root_fd, "outside", O_RDONLY | O_DIRECTORY);
    make_file(w.out_fd, "victim", "keep");
    if (symlinkat("../outside", w.dst_fd, "link") != 0 ||
        symlinkat("../outside/victim", w.dst_fd, "evil") != 0)
        return -1;
    if (aftp_hs_keypair(w.client_secret, w.client_public) != AFTP_OK ||
        aftp_hs_keypair(w.server_secret, w.server_public) != AFTP_OK)
        return -1;
    current = &w;
    *state = &w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    close(w->dst_fd);
    close(w->out_fd);
    close(w->root_fd);
    io_test_rmtree(w->root);
    return 0;
}

static void new_engines(world *w, const char *path, int overwrite, aftp_sender **snd,
                        aftp_receiver **rcv)
{
    aftp_sender_settings ss;
    aftp_sender_settings_default(&ss);
    ss.conn_id = 0x11111111;
    ss.storage = &source_ops;
    ss.on_event = on_sender_event;
    ss.user = w;
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = UINT64_C(100000000);
    ss.security.identity = w->client_secret;
    ss.security.peer_key = w->server_public;
    ss.security.unix_time_ns = UINT64_C(1700000000000000000);
    assert_int_equal(aftp_sender_new(&ss, 0, snd), AFTP_OK);

    aftp_receiver_settings rs;
    aftp_receiver_settings_default(&rs);
    rs.conn_id = 0x22222222;
    rs.storage = &aftp_store_ops;
    rs.user = &w->store;
    rs.security.identity = w->server_secret;
    rs.security.peers.lookup = admit_client;
    assert_int_equal(aftp_receiver_new(&rs, 0, rcv), AFTP_OK);

    aftp_file_info info = {.file_id = 1, .size = sizeof payload, .mode = 0644,
                           .overwrite = overwrite, .path = path};
    assert_int_equal(aftp_sender_add_file(*snd, &info), AFTP_OK);
    aftp_sender_finish(*snd);
}

/* One datagram as the network would carry it: head then payload. */
static size_t flatten(const aftp_datagram *dg, uint8_t *out)
{
    memcpy(out, dg->head, dg->head_len);
    if (dg->payload_len > 0)
        memcpy(out + dg->head_len, dg->payload, dg->payload_len);
    return dg->head_len + dg->payload_len;
}

/* Moves datagrams both ways (no loss, no delay) and runs the timers until
 * the sender's session is over; returns the sender's final error. */
static int run(aftp_sender *snd, aftp_receiver *rcv)
{
    static uint8_t buf[AFTP_WIRE_MAX_DATAGRAM], pkt[AFTP_WIRE_MAX_DATAGRAM];
    aftp_datagram dg;
    uint64_t now = 0;
    for (int round = 0; round < 100000 && aftp_sender_state(snd) != AFTP_STATE_CLOSED; round++) {
        int moved = 0;
        while (aftp_sender_write(snd, now, buf, sizeof buf, &dg) == 1) {
            assert_int_equal(aftp_receiver_read(rcv, now, pkt, flatten(&dg, pkt)) < 0 &&
                                 aftp_receiver_state(rcv) != AFTP_STATE_CLOSING &&
                                 aftp_receiver_state(rcv) != AFTP_STATE_CLOSED,
                             0);
            moved = 1;
        }
        while (aftp_receiver_write(rcv, now, buf, sizeof buf, &dg) == 1) {
            (void)aftp_sender_read(snd, now, pkt, flatten(&dg, pkt));
            moved = 1;
        }
        if (moved)
            continue;
        uint64_t next = aftp_sender_expiry(snd);
        if (aftp_receiver_expiry(rcv) < next)
            next = aftp_receiver_expiry(rcv);
        assert_true(next != AFTP_NO_EXPIRY);
        now = next > now ? next : now;
        if (aftp_sender_expiry(snd) <= now)
            (void)aftp_sender_handle_expiry(snd, now);
        if (aftp_receiver_expiry(rcv) <= now)
            (void)aftp_receiver_handle_expiry(rcv, now);
    }
    assert_int_equal(aftp_sender_state(snd), AFTP_STATE_CLOSED);
    return aftp_sender_error(snd);
}

static void assert_outside_untouched(world *w)
{
    char back[8] = {0};
    int fd = openat(w->out_fd, "victim", O_RDONLY | O_NOFOLLOW);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, back, sizeof back), 4);
    close(fd);
    assert_memory_equal(back, "keep", 4);
    assert_int_equal(io_test_count_entries(w->out_fd), 1);
    assert_int_equal(io_test_count_entries(w->root_fd), 2); /* dst, outside */
}

/* Offers `path`; the file must end with `want` and nothing may change
 * outside dst/ (nor inside it, but for the planted links). */
static void offer(world *w, const char *path, int overwrite, int want)
{
    aftp_sender *snd;
    aftp_receiver *rcv;
    aftp_store_init(&w->store, w->dst_fd, overwrite);
    w->file_end_error = 1;
    new_engines(w, path, overwrite, &snd, &rcv);
    (void)run(snd, rcv);
    if (w->file_end_error != want)
        fail_msg("offer of \"%s\": file ended with %d (%s), expected %d (%s)", path,
                 w->file_end_error, aftp_strerror(w->file_end_error), want, aftp_strerror(want));
    aftp_sender_del(snd);
    aftp_receiver_del(rcv);
    aftp_store_fini(&w->store);
    assert_outside_untouched(w);
}

static void test_escaping_paths_rejected(void **state)
{
    world *w = *state;
    char overlong[300];
    memset(overlong, 'n', sizeof overlong - 1);
    overlong[sizeof overlong - 1] = '\0';
    const char *hostile[] = {
        "../outside/victim", "../x", "/tmp/aftp-absolute", "a/../../x", "./x", "a//b", "a/",
        "link/victim", "link/new", "name\x1b[2Jwith-escape", "line\nbreak", "del\x7f",
        overlong,
    };
    int entries = io_test_count_entries(w->dst_fd);
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        offer(w, hostile[i], 0, AFTP_ERR_PATH_REJECTED);
        assert_int_equal(io_test_count_entries(w->dst_fd), entries);
    }
}

/* A symlink planted at the final name: refused without overwrite; with
 * overwrite the link itself is replaced by the verified file, its target
 * outside keeps its bytes. */
static void test_symlink_at_final_name(void **state)
{
    world *w = *state;
    offer(w, "evil", 0, AFTP_ERR_FILE_EXISTS);
    offer(w, "evil", 1, AFTP_OK);
    struct stat sb;
    assert_int_equal(fstatat(w->dst_fd, "evil", &sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sb.st_size, (off_t)sizeof payload);
}

/* The same engines deliver an honest path, so the refusals above are the
 * path checks and not a broken harness. */
static void test_honest_path_delivered(void **state)
{
    world *w = *state;
    offer(w, "sub/dir/ok.bin", 0, AFTP_OK);
    int fd = openat(w->dst_fd, "sub/dir/ok.bin", O_RDONLY | O_NOFOLLOW);
    assert_true(fd >= 0);
    uint8_t back[sizeof payload];
    assert_int_equal(read(fd, back, sizeof back), (ssize_t)sizeof back);
    close(fd);
    assert_memory_equal(back, payload, sizeof payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_honest_path_delivered),
        cmocka_unit_test(test_escaping_paths_rejected),
        cmocka_unit_test(test_symlink_at_final_name),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
