/*
 * Fuzz harness for the engines' input path (aftp_receiver_read,
 * aftp_sender_read): a receiver and a sender are first brought through a
 * valid handshake and file offer, then fed arbitrary datagrams on a moving
 * clock, with timers and output drained after each one.
 *
 * Input: records of [flags u8][length u16 big-endian][bytes]. flags bit 0:
 * 0 = to the receiver, 1 = to the sender; bit 1: overwrite the connection id
 * with the one the target expects (so the fuzzer reaches past that check);
 * bits 2-7: milliseconds the clock advances first.
 *
 * The session runs under a receiver's rate cap (RATE_CAP, spec 12.3) equal
 * to the sender's own fixed rate, so the cap's paths run on both sides
 * without changing what the sender emits.
 *
 * Properties: nothing crashes; the receiver writes only inside the file and
 * never writes a block twice; every datagram produced fits max_datagram;
 * read returns AFTP_OK or, only once the session is ending, an error.
 */
#include <string.h>

#include "aftp/aftp_engine.h"
#include "fuzz_harness.h"
#include "proto/aftp_wire.h"

#define FILE_SIZE 5000u
#define BLOCK 1000u
#define BLOCKS 5u
#define SENDER_ID 0x0A0A0A0Au
#define RECEIVER_ID 0x0B0B0B0Bu
#define MAX_DGRAM 1452u
#define RATE_BPS 10000000u

typedef struct harness {
    uint8_t src[FILE_SIZE];
    uint8_t dst[FILE_SIZE];
    uint8_t written[BLOCKS];
    uint64_t now;
    aftp_sender *snd;
    aftp_receiver *rcv;
    uint64_t pn; /* next packet number of the packets built here */
    uint8_t buf[MAX_DGRAM];
} harness;

static int view_src(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    harness *h = user;
    (void)id;
    if (off > FILE_SIZE || len > FILE_SIZE - off)
        return AFTP_ERR_IO;
    *out = h->src + off;
    return AFTP_OK;
}

static int view_dst(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    harness *h = user;
    (void)id;
    if (off > FILE_SIZE || len > FILE_SIZE - off)
        return AFTP_ERR_IO;
    *out = h->dst + off;
    return AFTP_OK;
}

static int open_file(void *user, const aftp_file_info *info)
{
    (void)user;
    return info->size == FILE_SIZE ? AFTP_OK : AFTP_ERR_NO_SPACE;
}

static int write_block(void *user, uint32_t id, uint64_t off, const uint8_t *data, size_t len)
{
    harness *h = user;
    (void)id;
    FUZZ_CHECK(off % BLOCK == 0 && off < FILE_SIZE && len <= FILE_SIZE - off);
    FUZZ_CHECK(!h->written[off / BLOCK]);
    h->written[off / BLOCK] = 1;
    memcpy(h->dst + off, data, len);
    return AFTP_OK;
}

static int close_file(void *user, uint32_t id, int commit)
{
    (void)user;
    (void)id;
    (void)commit;
    return AFTP_OK;
}

static const aftp_storage_ops sender_ops = {.view = view_src, .close = close_file};
static const aftp_storage_ops receiver_ops = {
    .view = view_dst, .open = open_file, .write = write_block, .close = close_file};

static void drain(harness *h)
{
    aftp_datagram dg;
    int rc;
    if (h->now >= aftp_sender_expiry(h->snd))
        aftp_sender_handle_expiry(h->snd, h->now);
    if (h->now >= aftp_receiver_expiry(h->rcv))
        aftp_receiver_handle_expiry(h->rcv, h->now);
    for (int i = 0; i < 64 && (rc = aftp_sender_write(h->snd, h->now, h->buf, MAX_DGRAM, &dg)) == 1; i++)
        FUZZ_CHECK(dg.head_len + dg.payload_len <= MAX_DGRAM);
    for (int i = 0; i < 64 && (rc = aftp_receiver_write(h->rcv, h->now, h->buf, MAX_DGRAM, &dg)) == 1; i++)
        FUZZ_CHECK(dg.head_len + dg.payload_len <= MAX_DGRAM && dg.payload == NULL);
}

/* Encodes a packet from the harness and feeds it to one engine. */
static void feed_packet(harness *h, aftp_wire_packet *p, int to_sender)
{
    uint8_t d[MAX_DGRAM];
    size_t len;
    p->hdr.version = AFTP_WIRE_VERSION;
    p->hdr.pn = h->pn++;
    FUZZ_CHECK(aftp_wire_encode(p, d, sizeof d, &len) == AFTP_OK);
    int rc = to_sender ? aftp_sender_read(h->snd, h->now, d, len)
                       : aftp_receiver_read(h->rcv, h->now, d, len);
    FUZZ_CHECK(rc == AFTP_OK);
    drain(h);
}

static uint64_t cap_at_rate(void *user, const uint8_t *client_key)
{
    (void)user;
    (void)client_key;
    return RATE_BPS;
}

/* Both engines past the handshake and the file offer. */
static void setup(harness *h)
{
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    aftp_sender_settings_default(&ss);
    aftp_receiver_settings_default(&rs);
    ss.conn_id = SENDER_ID;
    /* A fixed 10 Mbit/s: the sent log is sized for that rate's flight,
     * small, so each input sets up fast. */
    ss.policy = AFTP_CC_FIXED;
    ss.rate_bps = RATE_BPS;
    ss.storage = &sender_ops;
    ss.user = h;
    rs.conn_id = RECEIVER_ID;
    rs.storage = &receiver_ops;
    rs.user = h;
    /* The null cipher: the fuzzer reaches what lies behind decryption
     * (DESIGN.md section 6); fuzz_handshake covers the handshake and the
     * AEAD parsers. */
    ss.security.cipher = AFTP_CIPHER_NONE;
    rs.security.cipher = AFTP_CIPHER_NONE;
    rs.security.peers.rate_cap = cap_at_rate;
    FUZZ_CHECK(aftp_sender_new(&ss, 0, &h->snd) == AFTP_OK);
    FUZZ_CHECK(aftp_receiver_new(&rs, 0, &h->rcv) == AFTP_OK);
    aftp_file_info info = {.file_id = 1, .size = FILE_SIZE, .block_size = BLOCK, .path = "f"};
    FUZZ_CHECK(aftp_sender_add_file(h->snd, &info) == AFTP_OK);
    aftp_sender_finish(h->snd);
    drain(h); /* the sender's HELLO */

    aftp_wire_packet p;
    uint8_t announce[4], cap[4 + AFTP_WIRE_RATE_CAP_LEN];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, announce, sizeof announce);
    FUZZ_CHECK(aftp_wire_ext_put_rate_cap(&w, 0) == AFTP_OK);
    memset(&p, 0, sizeof p);
    p.hdr.type = AFTP_WIRE_HELLO;
    p.hdr.conn_id = SENDER_ID;
    p.u.hello = (aftp_wire_hello){.role = AFTP_WIRE_ROLE_PUSH, .cipher_count = 1,
                                  .max_datagram = MAX_DGRAM, .ext = announce,
                                  .ext_len = sizeof announce};
    feed_packet(h, &p, 0);
    memset(&p, 0, sizeof p);
    p.hdr.type = AFTP_WIRE_FILE_OFFER;
    p.hdr.conn_id = RECEIVER_ID;
    p.u.file_offer = (aftp_wire_file_offer){.file_id = 1, .size = FILE_SIZE, .block_size = BLOCK,
                                            .path_len = 1, .path = (const uint8_t *)"f"};
    feed_packet(h, &p, 0);

    memset(&p, 0, sizeof p);
    p.hdr.type = AFTP_WIRE_HELLO_ACK;
    p.hdr.conn_id = SENDER_ID;
    aftp_wire_writer_init(&w, cap, sizeof cap);
    FUZZ_CHECK(aftp_wire_ext_put_rate_cap(&w, RATE_BPS) == AFTP_OK);
    p.u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = RECEIVER_ID,
                                          .max_datagram = MAX_DGRAM, .ext = cap,
                                          .ext_len = sizeof cap};
    feed_packet(h, &p, 1);
    memset(&p, 0, sizeof p);
    p.hdr.type = AFTP_WIRE_FILE_REPLY;
    p.hdr.conn_id = SENDER_ID;
    p.u.file_reply.file_id = 1;
    feed_packet(h, &p, 1);
    FUZZ_CHECK(aftp_sender_state(h->snd) == AFTP_STATE_TRANSFER);
    FUZZ_CHECK(aftp_receiver_state(h->rcv) == AFTP_STATE_TRANSFER);
    aftp_stats snd, rcv;
    aftp_sender_get_stats(h->snd, &snd);
    aftp_receiver_get_stats(h->rcv, &rcv);
    FUZZ_CHECK(snd.rate_cap_bps == RATE_BPS && rcv.rate_cap_bps == RATE_BPS);
}

static void feed_fuzzed(harness *h, uint8_t flags, uint8_t *d, size_t len)
{
    int to_sender = flags & 1;
    h->now += (uint64_t)(flags >> 2) * 1000000;
    if ((flags & 2) && len >= AFTP_WIRE_HEADER_LEN) {
        uint32_t id = to_sender ? SENDER_ID : RECEIVER_ID;
        for (int i = 0; i < 4; i++)
            d[4 + i] = (uint8_t)(id >> (24 - 8 * i));
    }
    int rc = to_sender ? aftp_sender_read(h->snd, h->now, d, len)
                       : aftp_receiver_read(h->rcv, h->now, d, len);
    int state = to_sender ? aftp_sender_state(h->snd) : aftp_receiver_state(h->rcv);
    FUZZ_CHECK(rc == AFTP_OK || state == AFTP_STATE_CLOSING || state == AFTP_STATE_CLOSED);
    drain(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static harness h;
    static uint8_t d[AFTP_WIRE_MAX_DATAGRAM];
    memset(&h, 0, sizeof h);
    for (size_t i = 0; i < FILE_SIZE; i++)
        h.src[i] = (uint8_t)(i * 7);
    setup(&h);
    size_t pos = 0;
    while (size - pos >= 3) {
        uint8_t flags = data[pos];
        size_t len = (size_t)data[pos + 1] << 8 | data[pos + 2];
        pos += 3;
        if (len > size - pos)
            len = size - pos;
        /* A record longer than any datagram (the length is a u16) has its
         * tail cut off, as a socket would, instead of overrunning d. */
        size_t dlen = len < sizeof d ? len : sizeof d;
        memcpy(d, data + pos, dlen);
        pos += len;
        feed_fuzzed(&h, flags, d, dlen);
    }
    aftp_sender_del(h.snd);
    aftp_receiver_del(h.rcv);
    return 0;
}
