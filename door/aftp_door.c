/* The server's front door (aftp_door.h). */
#include "door/aftp_door.h"

#include <netinet/in.h>
#include <sodium.h>
#include <string.h>

#include "aftp/aftp_error.h"

#define NS_PER_S 1000000000u

static void sodium_random(void *user, uint8_t *buf, size_t len)
{
    (void)user;
    randombytes_buf(buf, len);
}

int aftp_door_init(aftp_door *d, const aftp_door_settings *s, uint64_t now_ns)
{
    memset(d, 0, sizeof *d);
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    if (s->server_key != NULL) {
        memcpy(d->server_key, s->server_key, sizeof d->server_key);
        d->have_server_key = 1;
    }
    d->force_retry = s->force_retry;
    d->random = s->random != NULL ? s->random : sodium_random;
    d->random_user = s->random_user;
    d->random(d->random_user, d->previous, sizeof d->previous);
    d->random(d->random_user, d->secret, sizeof d->secret);
    d->secret_since_s = (uint32_t)(now_ns / NS_PER_S);
    d->second = d->secret_since_s;
    return AFTP_OK;
}

void aftp_door_fini(aftp_door *d)
{
    sodium_memzero(d->secret, sizeof d->secret);
    sodium_memzero(d->previous, sizeof d->previous);
}

/* The port of an IPv4 or IPv6 address (0 for another family). */
static in_port_t port_of(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET6)
        return ((const struct sockaddr_in6 *)(const void *)a)->sin6_port;
    return a->sa_family == AF_INET ? ((const struct sockaddr_in *)(const void *)a)->sin_port : 0;
}

int aftp_door_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return a->sa_family == AF_INET && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

int aftp_door_same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    return aftp_door_same_host(a, b) && port_of(a) == port_of(b);
}

static void peer_note(aftp_door_peer *p, const struct sockaddr *from, uint32_t conn_id)
{
    size_t len = from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                             : sizeof(struct sockaddr_in);
    memset(&p->addr, 0, sizeof p->addr);
    memcpy(&p->addr, from, len);
    p->conn_id = conn_id;
    p->set = 1;
}

static int peer_is(const aftp_door_peer *p, const struct sockaddr *from, uint32_t conn_id)
{
    return p->set && p->conn_id == conn_id &&
           aftp_door_same_addr(from, (const struct sockaddr *)&p->addr);
}

/* A new secret every AFTP_DOOR_SECRET_PERIOD_S; the one it replaces still
 * checks the tokens it made (they live AFTP_COOKIE_MAX_AGE_S at most). */
static void rotate_secret(aftp_door *d, uint32_t now_s)
{
    if (now_s - d->secret_since_s < AFTP_DOOR_SECRET_PERIOD_S)
        return;
    memcpy(d->previous, d->secret, sizeof d->previous);
    d->random(d->random_user, d->secret, sizeof d->secret);
    d->secret_since_s = now_s;
}

static void count_second(aftp_door *d, uint32_t now_s)
{
    if (now_s != d->second) {
        d->second = now_s;
        d->unvalidated = 0;
        d->replies = 0;
    }
}

/* What a cookie binds: the source's address, port and the HELLO's id. */
static int cookie_peer(const struct sockaddr *from, uint32_t conn_id, aftp_cookie_peer *peer)
{
    peer->conn_id = conn_id;
    if (from->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)from;
        peer->addr = a->sin6_addr.s6_addr;
        peer->addr_len = sizeof a->sin6_addr.s6_addr;
        peer->port = ntohs(a->sin6_port);
        return AFTP_OK;
    }
    if (from->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)from;
        peer->addr = (const uint8_t *)&a->sin_addr.s_addr;
        peer->addr_len = sizeof a->sin_addr.s_addr;
        peer->port = ntohs(a->sin_port);
        return AFTP_OK;
    }
    return AFTP_ERR_INVALID_ARGUMENT;
}

static int has_valid_cookie(const aftp_door *d, const aftp_wire_hello *hello,
                            const aftp_cookie_peer *peer, uint32_t now_s)
{
    const uint8_t *token;
    uint16_t token_len;
    if (!aftp_wire_ext_find(hello->ext, hello->ext_len, AFTP_WIRE_EXT_COOKIE, &token, &token_len))
        return 0;
    return aftp_cookie_verify(d->secret, peer, now_s, token, token_len) == AFTP_OK ||
           aftp_cookie_verify(d->previous, peer, now_s, token, token_len) == AFTP_OK;
}

static int asks_for_key(const aftp_wire_hello *hello)
{
    const uint8_t *value;
    uint16_t value_len;
    return aftp_wire_ext_find(hello->ext, hello->ext_len, AFTP_WIRE_EXT_KEY_REQUEST, &value,
                              &value_len);
}

/* A stateless reply: our version, the client's own id echoed, packet
 * number 0, no flags, within the per-second budget. */
static int reply(aftp_door *d, aftp_wire_packet *p, uint32_t client_id, aftp_door_verdict *v)
{
    if (d->replies == AFTP_DOOR_MAX_REPLIES)
        return AFTP_DOOR_DROP;
    p->hdr = (aftp_wire_header){.version = AFTP_WIRE_VERSION, .type = p->hdr.type,
                                .conn_id = client_id};
    if (aftp_wire_encode(p, v->reply, sizeof v->reply, &v->reply_len) != AFTP_OK)
        return AFTP_DOOR_DROP;
    d->replies++;
    v->reply_type = p->hdr.type;
    return AFTP_DOOR_REPLY;
}

/* RETRY: our cookie for this source and id. */
static int retry(aftp_door *d, const aftp_cookie_peer *peer, uint32_t now_s,
                 aftp_door_verdict *v)
{
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_wire_packet p = {.hdr.type = AFTP_WIRE_RETRY};
    if (aftp_cookie_make(d->secret, peer, now_s, token) != AFTP_OK)
        return AFTP_DOOR_DROP;
    p.u.retry.token_len = AFTP_COOKIE_LEN;
    p.u.retry.token = token;
    int action = reply(d, &p, peer->conn_id, v);
    d->retries_sent += action == AFTP_DOOR_REPLY;
    return action;
}

/* SERVER_KEY: our static public key, nothing else; never a session. */
static int server_key(aftp_door *d, uint32_t client_id, aftp_door_verdict *v)
{
    aftp_wire_packet p = {.hdr.type = AFTP_WIRE_SERVER_KEY};
    if (!d->have_server_key)
        return AFTP_DOOR_DROP;
    memcpy(p.u.server_key.key, d->server_key, sizeof p.u.server_key.key);
    int action = reply(d, &p, client_id, v);
    d->keys_sent += action == AFTP_DOOR_REPLY;
    return action;
}

/* A HELLO for a session: started, or asked to prove its address. */
static int session_verdict(aftp_door *d, const aftp_cookie_peer *peer, int under_load,
                           uint32_t now_s, aftp_door_verdict *v)
{
    if (has_valid_cookie(d, &v->hello.u.hello, peer, now_s)) {
        v->validated = 1;
        return AFTP_DOOR_START;
    }
    if (++d->unvalidated <= AFTP_DOOR_MAX_UNVALIDATED && !under_load && !d->force_retry)
        return AFTP_DOOR_START;
    return retry(d, peer, now_s, v);
}

/* Spec section 12.2: a long datagram in a version we do not speak. */
static int version_neg(aftp_door *d, const uint8_t *pkt, size_t len, aftp_door_verdict *v)
{
    _Static_assert(AFTP_WIRE_VERSION_NEG_REPLY_LEN <= AFTP_DOOR_REPLY_MAX, "VERSION_NEG fits");
    if (d->replies == AFTP_DOOR_MAX_REPLIES ||
        aftp_wire_version_neg_reply(pkt, len, v->reply, sizeof v->reply, &v->reply_len) != 1)
        return AFTP_DOOR_DROP;
    d->replies++;
    d->version_negs_sent++;
    v->reply_type = AFTP_WIRE_VERSION_NEG;
    return AFTP_DOOR_REPLY;
}

/* A full-size HELLO of our version that decodes, from an address a cookie
 * can bind, and no late copy of the latest session's HELLO. */
static int door_hello(aftp_door *d, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                      aftp_door_verdict *v, aftp_cookie_peer *peer)
{
    aftp_wire_header h;
    if (len < AFTP_WIRE_HELLO_MIN_LEN || aftp_wire_header_decode(pkt, len, &h) != AFTP_OK ||
        h.version != AFTP_WIRE_VERSION || h.type != AFTP_WIRE_HELLO)
        return 0;
    return !peer_is(&d->started, from, h.conn_id) &&
           aftp_wire_decode(pkt, len, &v->hello) == AFTP_OK &&
           cookie_peer(from, h.conn_id, peer) == AFTP_OK;
}

static int decide(aftp_door *d, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                  int under_load, uint32_t now_s, aftp_door_verdict *v)
{
    aftp_cookie_peer peer;
    if (!door_hello(d, pkt, len, from, v, &peer))
        return version_neg(d, pkt, len, v);
    if (asks_for_key(&v->hello.u.hello))
        return server_key(d, peer.conn_id, v);
    return session_verdict(d, &peer, under_load, now_s, v);
}

int aftp_door_input(aftp_door *d, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    int under_load, uint64_t now_ns, aftp_door_verdict *v)
{
    uint32_t now_s = (uint32_t)(now_ns / NS_PER_S);
    memset(v, 0, sizeof *v);
    rotate_secret(d, now_s);
    count_second(d, now_s);
    v->action = decide(d, pkt, len, from, under_load, now_s, v);
    d->started_count += v->action == AFTP_DOOR_START;
    d->dropped += v->action == AFTP_DOOR_DROP;
    return v->action;
}

void aftp_door_session_started(aftp_door *d, const struct sockaddr *from, uint32_t conn_id)
{
    peer_note(&d->started, from, conn_id);
}

int aftp_door_report_drop(aftp_door *d, const struct sockaddr *from, uint32_t conn_id,
                          uint64_t now_ns, uint64_t *unreported)
{
    if (peer_is(&d->reported, from, conn_id))
        return 0; /* a resent copy of a handshake already counted */
    peer_note(&d->reported, from, conn_id);
    if (now_ns - d->report_period_ns >= AFTP_DOOR_DROP_PERIOD_NS) {
        d->report_period_ns = now_ns;
        d->reports = 0;
    }
    if (d->reports == AFTP_DOOR_DROP_REPORTS) {
        d->unreported++;
        return 0;
    }
    d->reports++;
    *unreported = d->unreported;
    d->unreported = 0;
    return 1;
}
