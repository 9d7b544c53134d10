#include "aftp_gate.h"

#include <netinet/in.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"
#include "proto/aftp_wire.h"

#ifdef AFTP_TEST_HOOKS
static int retry_forced(void)
{
    const char *force = getenv(AFTP_GATE_RETRY_ENV);
    return force != NULL && strcmp(force, "1") == 0;
}

const char *aftp_gate_warning(const aftp_gate *g)
{
    return g->force_retry ? "test RETRY shim active (" AFTP_GATE_RETRY_ENV ")" : "";
}
#else
static int retry_forced(void)
{
    return 0;
}

const char *aftp_gate_warning(const aftp_gate *g)
{
    (void)g; /* never forced: nothing could have forced it */
    return "";
}
#endif

int aftp_gate_init(aftp_gate *g, const uint8_t *server_key)
{
    memset(g, 0, sizeof *g);
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    if (server_key != NULL) {
        memcpy(g->server_key, server_key, sizeof g->server_key);
        g->have_server_key = 1;
    }
    randombytes_buf(g->secret, sizeof g->secret);
    g->force_retry = retry_forced();
    return AFTP_OK;
}

void aftp_gate_fini(aftp_gate *g)
{
    sodium_memzero(g->secret, sizeof g->secret);
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

static int has_valid_cookie(const aftp_gate *g, const aftp_wire_hello *hello,
                            const aftp_cookie_peer *peer, uint32_t now_s)
{
    const uint8_t *token;
    uint16_t token_len;
    return aftp_wire_ext_find(hello->ext, hello->ext_len, AFTP_WIRE_EXT_COOKIE, &token,
                              &token_len) &&
           aftp_cookie_verify(g->secret, peer, now_s, token, token_len) == AFTP_OK;
}

/* A stateless reply's header: our version, the client's own id echoed,
 * packet number 0, no flags. */
static void stateless_reply(uint8_t type, uint32_t client_id, aftp_wire_packet *p)
{
    memset(p, 0, sizeof *p);
    p->hdr.version = AFTP_WIRE_VERSION;
    p->hdr.type = type;
    p->hdr.conn_id = client_id;
}

/* RETRY: our cookie for this source and id. */
static int encode_retry(const aftp_gate *g, const aftp_cookie_peer *peer, uint32_t now_s,
                        uint8_t *reply, size_t *reply_len)
{
    uint8_t token[AFTP_COOKIE_LEN];
    aftp_wire_packet p;
    stateless_reply(AFTP_WIRE_RETRY, peer->conn_id, &p);
    p.u.retry.token_len = AFTP_COOKIE_LEN;
    p.u.retry.token = token;
    int rc = aftp_cookie_make(g->secret, peer, now_s, token);
    return rc == AFTP_OK ? aftp_wire_encode(&p, reply, AFTP_GATE_REPLY_MAX, reply_len) : rc;
}

/* SERVER_KEY: our static public key, nothing else. */
static int encode_server_key(const aftp_gate *g, uint32_t client_id, uint8_t *reply,
                             size_t *reply_len)
{
    aftp_wire_packet p;
    stateless_reply(AFTP_WIRE_SERVER_KEY, client_id, &p);
    memcpy(p.u.server_key.key, g->server_key, sizeof p.u.server_key.key);
    return aftp_wire_encode(&p, reply, AFTP_GATE_REPLY_MAX, reply_len);
}

static int asks_for_key(const aftp_wire_hello *hello)
{
    const uint8_t *value;
    uint16_t value_len;
    return aftp_wire_ext_find(hello->ext, hello->ext_len, AFTP_WIRE_EXT_KEY_REQUEST, &value,
                              &value_len);
}

static void count_second(aftp_gate *g, uint32_t now_s)
{
    if (now_s != g->second) {
        g->second = now_s;
        g->unvalidated = 0;
        g->replies = 0;
    }
}

/* A key request: answered while the reply budget lasts, never a session. */
static int key_verdict(aftp_gate *g, uint32_t client_id, uint8_t *reply, size_t *reply_len)
{
    if (g->have_server_key && g->replies < AFTP_GATE_MAX_REPLIES &&
        encode_server_key(g, client_id, reply, reply_len) == AFTP_OK)
        return AFTP_GATE_SERVER_KEY;
    return AFTP_GATE_DROP;
}

/* A HELLO for a session: started, asked to prove its address, or dropped. */
static int session_verdict(aftp_gate *g, const aftp_wire_hello *hello,
                           const aftp_cookie_peer *peer, int busy, uint32_t now_s,
                           uint8_t *reply, size_t *reply_len)
{
    if (has_valid_cookie(g, hello, peer, now_s))
        return busy ? AFTP_GATE_DROP : AFTP_GATE_START;
    if (++g->unvalidated <= AFTP_GATE_MAX_UNVALIDATED && !busy && !g->force_retry)
        return AFTP_GATE_START;
    if (g->replies < AFTP_GATE_MAX_REPLIES &&
        encode_retry(g, peer, now_s, reply, reply_len) == AFTP_OK)
        return AFTP_GATE_RETRY;
    return AFTP_GATE_DROP;
}

_Static_assert(AFTP_WIRE_VERSION_NEG_REPLY_LEN <= AFTP_GATE_REPLY_MAX, "VERSION_NEG fits a reply");

int aftp_gate_version_neg(aftp_gate *g, const uint8_t *pkt, size_t len, uint32_t now_s,
                          uint8_t *reply, size_t *reply_len)
{
    count_second(g, now_s);
    if (aftp_wire_version_neg_reply(pkt, len, reply, AFTP_GATE_REPLY_MAX, reply_len) != 1)
        return 0;
    if (g->replies == AFTP_GATE_MAX_REPLIES) {
        g->dropped++;
        return 0;
    }
    g->replies++;
    g->version_negs_sent++;
    return 1;
}

int aftp_gate_hello(aftp_gate *g, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    int busy, uint32_t now_s, uint8_t *reply, size_t *reply_len)
{
    aftp_wire_packet p;
    aftp_cookie_peer peer;
    if (aftp_wire_decode(pkt, len, &p) != AFTP_OK || p.hdr.type != AFTP_WIRE_HELLO ||
        cookie_peer(from, p.hdr.conn_id, &peer) != AFTP_OK) {
        g->dropped++;
        return AFTP_GATE_DROP;
    }
    count_second(g, now_s);
    int verdict = asks_for_key(&p.u.hello)
                      ? key_verdict(g, peer.conn_id, reply, reply_len)
                      : session_verdict(g, &p.u.hello, &peer, busy, now_s, reply, reply_len);
    g->replies += verdict == AFTP_GATE_RETRY || verdict == AFTP_GATE_SERVER_KEY;
    g->retries_sent += verdict == AFTP_GATE_RETRY;
    g->keys_sent += verdict == AFTP_GATE_SERVER_KEY;
    g->dropped += verdict == AFTP_GATE_DROP;
    return verdict;
}
