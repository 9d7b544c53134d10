/*
 * Fuzz harness for the server's front door (door/aftp_door.h): one door,
 * with a server key and predictable secrets, fed arbitrary datagrams from
 * two sources on a moving clock (through expiries and secret changes).
 *
 * Input: records of [flags u8][length u16 big-endian][bytes]. flags bit 0:
 * the server is busy; bit 1: the datagram, when it decodes as a HELLO, is
 * sent with the latest RETRY's token as its COOKIE (so the fuzzer reaches
 * the validated paths); bit 2: from the second source; bits 3-7: seconds
 * the clock advances first.
 *
 * Properties: nothing crashes; no reply to a datagram shorter than 1200
 * bytes, none over 3x the datagram nor AFTP_DOOR_REPLY_MAX; every reply
 * decodes as the VERSION_NEG, RETRY or SERVER_KEY it claims to be, for the
 * datagram's connection id; no more than AFTP_DOOR_MAX_REPLIES replies in
 * one second; a session starts only on an idle server, with a full-size
 * HELLO of our version whose id is the datagram's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "door/aftp_door.h"
#include "fuzz_harness.h"

static const uint8_t server_key[AFTP_WIRE_SERVER_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

typedef struct harness {
    aftp_door d;
    unsigned draws;
    uint64_t now_ns;
    uint32_t second;     /* the second `replies` counts */
    unsigned replies;
    uint8_t token[AFTP_COOKIE_LEN];
    int have_token;
    uint8_t echo[AFTP_WIRE_MAX_DATAGRAM];
} harness;

static void counting_random(void *user, uint8_t *buf, size_t len)
{
    unsigned *draws = user;
    memset(buf, (int)++*draws, len);
}

/* The HELLO in pkt again, its extensions replaced by the latest token:
 * its length in h->echo, or 0 when pkt is no HELLO. */
static size_t with_cookie(harness *h, const uint8_t *pkt, size_t len)
{
    aftp_wire_packet p;
    uint8_t ext[4 + AFTP_COOKIE_LEN];
    aftp_wire_writer w;
    size_t out = 0;
    if (!h->have_token || aftp_wire_decode(pkt, len, &p) != AFTP_OK ||
        p.hdr.type != AFTP_WIRE_HELLO)
        return 0;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, h->token, sizeof h->token) != AFTP_OK)
        return 0;
    p.u.hello.ext = ext;
    p.u.hello.ext_len = (uint16_t)w.pos;
    return aftp_wire_encode(&p, h->echo, sizeof h->echo, &out) == AFTP_OK ? out : 0;
}

static uint64_t be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static void check_reply(harness *h, const uint8_t *pkt, size_t len, const aftp_door_verdict *v)
{
    aftp_wire_packet r;
    FUZZ_CHECK(len >= AFTP_WIRE_HELLO_MIN_LEN);
    FUZZ_CHECK(v->reply_len <= 3 * len && v->reply_len <= AFTP_DOOR_REPLY_MAX);
    FUZZ_CHECK(aftp_wire_decode(v->reply, v->reply_len, &r) == AFTP_OK);
    FUZZ_CHECK(r.hdr.type == v->reply_type);
    FUZZ_CHECK(r.hdr.type == AFTP_WIRE_VERSION_NEG || r.hdr.type == AFTP_WIRE_RETRY ||
               r.hdr.type == AFTP_WIRE_SERVER_KEY);
    /* the datagram's id echoed; its pn too in a VERSION_NEG, else 0 */
    FUZZ_CHECK(r.hdr.conn_id == be(pkt + 4, 4));
    FUZZ_CHECK(r.hdr.pn == (r.hdr.type == AFTP_WIRE_VERSION_NEG ? be(pkt + 8, 8) : 0));
    uint32_t second = (uint32_t)(h->now_ns / 1000000000u);
    if (second != h->second) {
        h->second = second;
        h->replies = 0;
    }
    FUZZ_CHECK(++h->replies <= AFTP_DOOR_MAX_REPLIES);
    if (r.hdr.type == AFTP_WIRE_RETRY) {
        FUZZ_CHECK(r.u.retry.token_len == AFTP_COOKIE_LEN);
        memcpy(h->token, r.u.retry.token, sizeof h->token);
        h->have_token = 1;
    }
}

static void check_start(const uint8_t *pkt, size_t len, int busy, const aftp_door_verdict *v)
{
    aftp_wire_header in;
    FUZZ_CHECK(!busy || v->validated); /* under load, only a proven address starts */
    FUZZ_CHECK(len >= AFTP_WIRE_HELLO_MIN_LEN);
    FUZZ_CHECK(aftp_wire_header_decode(pkt, len, &in) == AFTP_OK);
    FUZZ_CHECK(in.version == AFTP_WIRE_VERSION && in.type == AFTP_WIRE_HELLO);
    FUZZ_CHECK(v->hello.hdr.type == AFTP_WIRE_HELLO && v->hello.hdr.conn_id == in.conn_id);
    FUZZ_CHECK(v->reply_len == 0);
}

static void feed(harness *h, uint8_t flags, const uint8_t *pkt, size_t len)
{
    aftp_door_verdict v;
    int busy = flags & 1;
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(4000),
                               .sin_addr.s_addr = htonl((flags & 4) ? 0xc0000202u : 0xc0000201u)};
    h->now_ns += (uint64_t)(flags >> 3) * 1000000000u;
    if (flags & 2) {
        size_t echoed = with_cookie(h, pkt, len);
        if (echoed > 0) {
            pkt = h->echo;
            len = echoed;
        }
    }
    int action = aftp_door_input(&h->d, pkt, len, (struct sockaddr *)&from, busy, h->now_ns, &v);
    FUZZ_CHECK(action == v.action);
    if (action == AFTP_DOOR_REPLY)
        check_reply(h, pkt, len, &v);
    else if (action == AFTP_DOOR_START)
        check_start(pkt, len, busy, &v);
    else
        FUZZ_CHECK(action == AFTP_DOOR_DROP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static harness h;
    memset(&h, 0, sizeof h);
    aftp_door_settings set = {.server_key = server_key, .random = counting_random,
                              .random_user = &h.draws};
    FUZZ_CHECK(aftp_door_init(&h.d, &set, 0) == AFTP_OK);
    while (size >= 3) { /* [flags][length u16][bytes], the last one cut to what is left */
        size_t len = (size_t)be(data + 1, 2);
        if (len > size - 3)
            len = size - 3;
        feed(&h, data[0], data + 3, len);
        data += 3 + len;
        size -= 3 + len;
    }
    aftp_door_fini(&h.d);
    return 0;
}
