/* The server's end of the handshake (aftp_hello_server.h). */
#include "common/aftp_hello_server.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define AMPLIFICATION_FACTOR 3 /* section 14.3 */
/* Largest datagram sent before the handshake completes (a CLOSE with the
 * longest reason); HELLO_ACK is smaller. */
#define PRECONFIRM_MAX_LEN (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_CLOSE_FIXED + AFTP_WIRE_MAX_REASON)

int aftp_hello_server_init(aftp_hello_server *h, aftp_security_settings *sec, uint8_t role,
                           uint32_t own_window)
{
    memset(h, 0, sizeof *h);
    h->sec = sec;
    h->role = role;
    h->own_window = own_window;
    if (sec->cipher == AFTP_CIPHER_NONE) {
        sec->identity = NULL;
        return AFTP_OK;
    }
    /* The private key is needed when the HELLO comes: kept in guarded
     * memory, the settings' pointer forgotten. */
    h->identity = sodium_malloc(AFTP_HS_KEY_LEN);
    if (h->identity == NULL)
        return AFTP_ERR_NO_MEMORY;
    memcpy(h->identity, sec->identity, AFTP_HS_KEY_LEN);
    sec->identity = NULL;
    return AFTP_OK;
}

static void wipe_identity(aftp_hello_server *h)
{
    if (h->identity != NULL)
        sodium_free(h->identity);
    h->identity = NULL;
}

void aftp_hello_server_free(aftp_hello_server *h)
{
    wipe_identity(h);
    aftp_handshake_del(h->hs);
    h->hs = NULL;
}

/* A refused HELLO: CLOSE(wire_error, reason) in clear (section 9.3). */
static void refuse(aftp_session *ss, int error, uint16_t wire_error, const char *reason,
                   uint64_t drain_ns)
{
    aftp_session_set_text(ss, reason);
    aftp_session_start_closing(ss, error, wire_error, drain_ns);
}

/* The session belongs to this client from now on. */
static void take_hello(aftp_hello_server *h, aftp_session *ss, const aftp_wire_packet *p)
{
    h->seen = 1;
    ss->peer_id = p->hdr.conn_id;
    if (p->u.hello.max_datagram < ss->max_datagram)
        ss->max_datagram = p->u.hello.max_datagram;
}

/* Section 14.2: the first of the client's ciphers this server allows. */
static uint8_t pick_cipher(const aftp_hello_server *h, const aftp_wire_hello *hl)
{
    for (uint8_t i = 0; i < hl->cipher_count; i++)
        if (aftp_session_cipher_allowed(h->sec->cipher, hl->ciphers[i]))
            return hl->ciphers[i];
    return AFTP_WIRE_CIPHER_NONE;
}

/* Sections 9.1, 9.15.1: the role this end serves, and for a pull its
 * PULL and PIPELINE. NULL when the HELLO may go on, else the reason. */
static const char *role_refused(const aftp_hello_server *h, const aftp_wire_hello *hl)
{
    uint32_t window = 0;
    if (hl->role != h->role)
        return h->role == AFTP_WIRE_ROLE_PUSH ? "pull not supported"
                                              : "this endpoint serves pull only";
    if (h->role == AFTP_WIRE_ROLE_PUSH)
        return NULL;
    if (aftp_wire_ext_pull(hl->ext, hl->ext_len) != 1)
        return "pull not supported";
    if (h->own_window == 0 || aftp_wire_ext_pipeline(hl->ext, hl->ext_len, &window) != 1)
        return "pull needs pipelined mode (PIPELINE)";
    return NULL;
}

/* The admission policy, as the handshake calls it (user: the module). */
static int policy_lookup(void *user, const uint8_t *client_key, uint8_t *psk)
{
    const aftp_peer_policy *pol = &((aftp_hello_server *)user)->sec->peers;
    return pol->lookup(pol->user, client_key, psk);
}

static int policy_check_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    const aftp_peer_policy *pol = &((aftp_hello_server *)user)->sec->peers;
    return pol->check_timestamp != NULL ? pol->check_timestamp(pol->user, client_key, ts)
                                        : AFTP_OK;
}

/* Section 12.3.4: message 1's payload is early entries (a push) or the
 * early request (a pull) when the HELLO says so; the role, bound into
 * the prologue, says which. */
static int early_announced(const aftp_wire_packet *p)
{
    const uint8_t *value;
    uint16_t value_len;
    return aftp_wire_ext_find(p->u.hello.ext, p->u.hello.ext_len, AFTP_WIRE_EXT_EARLY_ENTRIES,
                              &value, &value_len);
}

/* Reads message 1 with the HELLO's prologue: AFTP_OK and *out, or why not
 * (AUTH, REPLAY, UNKNOWN_PEER, MALFORMED, NO_MEMORY). */
static int read_message1(aftp_hello_server *h, const aftp_wire_packet *p, const uint8_t *msg,
                         uint16_t msg_len, aftp_handshake **out)
{
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX], payload[AFTP_HS_MAX_PAYLOAD];
    size_t prologue_len, payload_len;
    int rc = aftp_wire_hello_prologue(&p->u.hello, p->hdr.conn_id, prologue, sizeof prologue,
                                      &prologue_len);
    aftp_hs_peers peers = {.lookup = policy_lookup, .check_timestamp = policy_check_timestamp,
                           .user = h};
    aftp_hs_config cfg = {.role = AFTP_HS_RESPONDER, .static_secret = h->identity,
                          .peers = &peers, .prologue = prologue, .prologue_len = prologue_len,
                          .random = h->sec->random, .random_user = h->sec->random_user};
    *out = NULL;
    if (rc == AFTP_OK)
        rc = aftp_handshake_new(out, &cfg);
    if (rc == AFTP_OK)
        rc = aftp_handshake_read_init(*out, msg, msg_len, payload, sizeof payload, &payload_len);
    if (rc == AFTP_OK && early_announced(p)) {
        memcpy(h->early, payload, payload_len);
        h->early_len = payload_len;
    }
    return rc;
}

/* Section 12.3.1: the policy's cap for this client (client_key NULL in an
 * unprotected session). In a push a client that cannot honour a cap (its
 * HELLO has no RATE_CAP) is refused with CLOSE(LIMIT) rather than served
 * faster than its server allows: AFTP_ERR_LIMIT, the session closing. In
 * a pull the cap binds this end's own sender (9.15.4). */
static int decide_rate_cap(aftp_hello_server *h, aftp_session *ss, const aftp_wire_hello *hl,
                           const uint8_t *client_key, uint64_t drain_ns)
{
    const aftp_peer_policy *pol = &h->sec->peers;
    const uint8_t *value;
    uint16_t value_len;
    char why[256];
    h->rate_cap_bps = pol->rate_cap != NULL ? pol->rate_cap(pol->user, client_key) : 0;
    if (h->rate_cap_bps == 0 || h->role == AFTP_WIRE_ROLE_PULL ||
        aftp_wire_ext_find(hl->ext, hl->ext_len, AFTP_WIRE_EXT_RATE_CAP, &value, &value_len))
        return AFTP_OK;
    snprintf(why, sizeof why,
             "this server serves this client only with a rate cap of %" PRIu64 " bit/s, and "
             "the client cannot honour a cap (its HELLO has no RATE_CAP): use a client that "
             "supports RATE_CAP",
             h->rate_cap_bps);
    refuse(ss, AFTP_ERR_LIMIT, AFTP_WIRE_ERR_LIMIT, why, drain_ns);
    return AFTP_ERR_LIMIT;
}

/* Section 14.2.5: the policy refused a key it could read, in clear: not
 * admitted at all (UNKNOWN_PEER: CLOSE(UNAUTHORIZED)), or admitted but
 * not for this role (PERMISSION, from its admission: CLOSE(PERMISSION)). */
static void refuse_client_key(const aftp_hello_server *h, aftp_session *ss, int rc,
                              uint64_t drain_ns)
{
    if (rc == AFTP_ERR_UNKNOWN_PEER)
        refuse(ss, rc, AFTP_WIRE_ERR_UNAUTHORIZED, "client key not authorized", drain_ns);
    else
        refuse(ss, rc, AFTP_WIRE_ERR_PERMISSION,
               h->role == AFTP_WIRE_ROLE_PULL
                   ? "this client key may only push to this server: pulling is not allowed for it"
                   : "this client key may only pull from this server: pushing is not allowed for it",
               drain_ns);
}

/* Section 9.15.1: the policy may keep a client key from a role (a
 * write-only key may not pull): CLOSE(PERMISSION), AFTP_ERR_PERMISSION. */
static int check_role_allowed(aftp_hello_server *h, aftp_session *ss, const uint8_t *client_key,
                              uint64_t drain_ns)
{
    const aftp_peer_policy *pol = &h->sec->peers;
    int role = h->role == AFTP_WIRE_ROLE_PULL ? AFTP_ROLE_PULL : AFTP_ROLE_PUSH;
    if (pol->role_allowed == NULL || pol->role_allowed(pol->user, client_key, role) == AFTP_OK)
        return AFTP_OK;
    refuse_client_key(h, ss, AFTP_ERR_PERMISSION, drain_ns);
    return AFTP_ERR_PERMISSION;
}

/* Section 12.3.2: pipelined mode when this end runs it and the HELLO
 * announced a valid PIPELINE; the session's W is the smaller window. A
 * pull's PULL_END (12.3.5) is decided with it, from the same HELLO. */
static void decide_window(aftp_hello_server *h, const aftp_wire_hello *hl)
{
    uint32_t asked = 0;
    h->window = 0;
    if (h->own_window != 0 && aftp_wire_ext_pipeline(hl->ext, hl->ext_len, &asked) == 1)
        h->window = asked < h->own_window ? asked : h->own_window;
    /* Section 12.3.5: PULL_END is answered when a pull's HELLO announced it. */
    h->pull_end = h->role == AFTP_WIRE_ROLE_PULL &&
                  aftp_wire_ext_empty(hl->ext, hl->ext_len, AFTP_WIRE_EXT_PULL_END) == 1;
}

/* Section 14.3: a protected offer. Message 1 that does not authenticate
 * (wrong server key, changed offer, replayed) gets silence; an unknown
 * client key CLOSE(UNAUTHORIZED); an admitted one its cap decided, the
 * handshake kept for the answer. */
static int protected_hello(aftp_hello_server *h, aftp_session *ss, const aftp_wire_packet *p,
                           uint8_t cipher, uint64_t drain_ns)
{
    const uint8_t *msg;
    uint16_t msg_len;
    uint8_t client_key[AFTP_HS_KEY_LEN];
    aftp_handshake *hs = NULL;
    int rc = AFTP_ERR_MALFORMED;
    if (aftp_wire_ext_find(p->u.hello.ext, p->u.hello.ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg,
                           &msg_len) && msg_len <= sizeof h->msg1)
        rc = read_message1(h, p, msg, msg_len, &hs);
    if (rc == AFTP_ERR_UNKNOWN_PEER || rc == AFTP_ERR_PERMISSION) {
        take_hello(h, ss, p);
        refuse_client_key(h, ss, rc, drain_ns);
    } else if (rc != AFTP_OK) {
        aftp_session_drop(ss);
    }
    if (rc == AFTP_OK) {
        take_hello(h, ss, p);
        memcpy(h->msg1, msg, msg_len);
        h->msg1_len = msg_len;
        if (h->role == AFTP_WIRE_ROLE_PUSH && ss->max_datagram != p->u.hello.max_datagram)
            h->early_len = 0; /* its blocks were sized for a datagram this side cannot take */
        rc = aftp_handshake_peer_key(hs, client_key);
    }
    if (rc == AFTP_OK && (check_role_allowed(h, ss, client_key, drain_ns) != AFTP_OK ||
                          decide_rate_cap(h, ss, &p->u.hello, client_key, drain_ns) != AFTP_OK)) {
        wipe_identity(h); /* refused: no handshake will follow */
        rc = AFTP_ERR_PERMISSION;
    }
    if (rc != AFTP_OK) {
        aftp_handshake_del(hs);
        return 0;
    }
    decide_window(h, &p->u.hello);
    h->hs = hs;
    h->cipher = cipher;
    return AFTP_HELLO_ADMITTED;
}

/* A HELLO again: the same answer, when it is the same client's resend
 * (protected: the same message 1, before the client spoke under keys). */
static void repeated_hello(aftp_hello_server *h, aftp_session *ss, const aftp_wire_hello *hl)
{
    const uint8_t *msg;
    uint16_t msg_len;
    int same = !aftp_session_protected(ss) ||
               (!h->confirmed &&
                aftp_wire_ext_find(hl->ext, hl->ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg,
                                   &msg_len) &&
                msg_len == h->msg1_len && memcmp(msg, h->msg1, msg_len) == 0);
    if (same)
        h->ack_due = 1;
    else
        aftp_session_drop(ss);
}

/* Sections 9.3, 14.2: the role served; NONE only when both sides chose it. */
int aftp_hello_server_hello(aftp_hello_server *h, aftp_session *ss, const aftp_wire_packet *p,
                            uint64_t drain_ns)
{
    const aftp_wire_hello *hl = &p->u.hello;
    if (h->seen) {
        repeated_hello(h, ss, hl);
        return 0;
    }
    int none_offered = memchr(hl->ciphers, AFTP_WIRE_CIPHER_NONE, hl->cipher_count) != NULL;
    int server_none = h->sec->cipher == AFTP_CIPHER_NONE;
    /* Sections 6.2.1, 14.2.5: a list with NONE in it is an unprotected
     * offer, whatever else it lists. */
    uint8_t cipher = server_none || none_offered ? AFTP_WIRE_CIPHER_NONE : pick_cipher(h, hl);
    const char *role_refusal = role_refused(h, hl);
    if (role_refusal == NULL && cipher != AFTP_WIRE_CIPHER_NONE)
        return protected_hello(h, ss, p, cipher, drain_ns);
    take_hello(h, ss, p);
    const char *why = role_refusal;
    if (why == NULL && server_none && !none_offered)
        why = "server runs without encryption (--cipher none); the client must opt in too";
    else if (why == NULL && !server_none && none_offered)
        why = "unprotected transfers are not enabled on this server";
    else if (why == NULL && !server_none)
        why = "no common cipher";
    if (why != NULL) {
        refuse(ss, AFTP_ERR_MALFORMED, AFTP_WIRE_ERR_PROTOCOL, why, drain_ns);
        return 0;
    }
    if (check_role_allowed(h, ss, NULL, drain_ns) != AFTP_OK ||
        decide_rate_cap(h, ss, hl, NULL, drain_ns) != AFTP_OK)
        return 0;
    decide_window(h, hl);
    return AFTP_HELLO_ADMITTED;
}

/* The HELLO_ACK's extensions before message 2: the cap granted, if any
 * (push), the entry window of a pipelined session, PULL in a pull. */
static int put_ack_extensions(const aftp_hello_server *h, aftp_wire_writer *w)
{
    int rc = AFTP_OK;
    if (h->role == AFTP_WIRE_ROLE_PUSH && h->rate_cap_bps != 0)
        rc = aftp_wire_ext_put_rate_cap(w, h->rate_cap_bps);
    if (rc == AFTP_OK && h->window != 0)
        rc = aftp_wire_ext_put_pipeline(w, h->window);
    if (rc == AFTP_OK && h->role == AFTP_WIRE_ROLE_PULL)
        rc = aftp_wire_ext_put(w, AFTP_WIRE_EXT_PULL, NULL, 0);
    if (rc == AFTP_OK && h->pull_end)
        rc = aftp_wire_ext_put(w, AFTP_WIRE_EXT_PULL_END, NULL, 0);
    if (rc == AFTP_OK && h->early_taken)
        rc = aftp_wire_ext_put(w, AFTP_WIRE_EXT_EARLY_ENTRIES, NULL, 0);
    return rc;
}

int aftp_hello_server_early(const aftp_hello_server *h, aftp_wire_entries *out)
{
    aftp_wire_record_iter it;
    aftp_wire_entry first;
    if (h->role != AFTP_WIRE_ROLE_PUSH || h->early_len == 0 || h->window == 0 ||
        aftp_wire_early_entries_decode(h->early, h->early_len, out) != AFTP_OK ||
        out->count > h->window)
        return AFTP_ERR_NOT_FOUND;
    aftp_wire_entries_iter_init(&it, out);
    if (!aftp_wire_entries_next(&it, &first) || first.entry_id != 1 || first.base_block != 0)
        return AFTP_ERR_NOT_FOUND;
    return AFTP_OK;
}

int aftp_hello_server_early_request(const aftp_hello_server *h, aftp_wire_pull_request *out)
{
    if (h->role != AFTP_WIRE_ROLE_PULL || h->early_len == 0 || h->window == 0 ||
        aftp_wire_early_request_decode(h->early, h->early_len, out) != AFTP_OK)
        return AFTP_ERR_NOT_FOUND;
    return AFTP_OK;
}

/* A HELLO_ACK whose extensions are to be written into ext. */
static void fill_ack(aftp_session *ss, uint8_t cipher, uint8_t *ext, aftp_wire_packet *p)
{
    aftp_session_packet(ss, AFTP_WIRE_HELLO_ACK, p);
    p->u.hello_ack = (aftp_wire_hello_ack){.server_conn_id = ss->local_id, .cipher = cipher,
                                           .max_datagram = ss->max_datagram, .ext = ext};
}

/* Message 2 authenticates the HELLO_ACK's fields and its other extensions
 * (section 14.2.3), so it is added last; the whole datagram is built now
 * (its packet number taken) and kept for repeated HELLOs. */
static int build_protected_ack(aftp_hello_server *h, aftp_session *ss)
{
    aftp_wire_packet p;
    uint8_t payload[AFTP_HS_MAX_PAYLOAD], msg2[AFTP_HS_MAX_RESPONSE], ext[AFTP_HELLO_ACK_EXT_MAX];
    size_t payload_len, msg2_len;
    aftp_wire_writer w;
    fill_ack(ss, h->cipher, ext, &p);
    aftp_wire_writer_init(&w, ext, sizeof ext);
    int rc = put_ack_extensions(h, &w);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    if (rc == AFTP_OK)
        rc = aftp_session_ack_payload(&p.u.hello_ack, payload, sizeof payload, &payload_len);
    if (rc == AFTP_OK)
        rc = aftp_handshake_write_response(h->hs, payload, payload_len, msg2, sizeof msg2,
                                           &msg2_len);
    if (rc == AFTP_OK)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, msg2, (uint16_t)msg2_len);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    if (rc == AFTP_OK)
        rc = aftp_wire_encode(&p, h->ack, sizeof h->ack, &h->ack_len);
    if (rc == AFTP_OK)
        ss->next_pn++;
    return rc;
}

int aftp_hello_server_answer(aftp_hello_server *h, aftp_session *ss)
{
    int rc = AFTP_OK;
    if (h->hs != NULL) {
        rc = build_protected_ack(h, ss);
        if (rc == AFTP_OK)
            rc = aftp_session_protect(ss, h->hs, h->cipher, h->sec->key_update_packets);
        aftp_handshake_del(h->hs);
        h->hs = NULL;
        wipe_identity(h);
    }
    if (rc == AFTP_OK)
        h->ack_due = 1;
    else
        aftp_session_set_closed(ss, rc);
    return rc;
}

int aftp_hello_server_encode(aftp_hello_server *h, aftp_session *ss, uint8_t *buf, size_t cap,
                             aftp_datagram *dg)
{
    h->ack_due = 0;
    h->ack_sent_ns = ss->now_ns;
    if (h->ack_len > 0) {
        /* Protected: the stored answer, byte for byte (no new DH). */
        memcpy(buf, h->ack, h->ack_len);
        *dg = (aftp_datagram){.head = buf, .head_len = h->ack_len};
        aftp_session_resent(ss, dg);
        return AFTP_OK;
    }
    aftp_wire_packet p;
    uint8_t ext[AFTP_HELLO_ACK_EXT_MAX];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    int rc = put_ack_extensions(h, &w); /* unprotected: unauthenticated, as all else */
    if (rc != AFTP_OK)
        return rc;
    fill_ack(ss, AFTP_WIRE_CIPHER_NONE, ext, &p);
    p.u.hello_ack.ext_len = (uint16_t)w.pos;
    return aftp_session_encode(ss, &p, buf, cap, dg);
}

int aftp_hello_server_addressed(const aftp_hello_server *h, const aftp_session *ss,
                                const aftp_wire_header *hdr)
{
    if (hdr->type == AFTP_WIRE_HELLO)
        return !h->seen || hdr->conn_id == ss->peer_id;
    return h->seen && hdr->conn_id == ss->local_id;
}

int aftp_hello_server_may_send(const aftp_hello_server *h, const aftp_session *ss)
{
    return h->confirmed || ss->stats.wire_bytes_sent + PRECONFIRM_MAX_LEN <=
                               AMPLIFICATION_FACTOR * ss->stats.wire_bytes_received;
}

int aftp_hello_server_confirm(aftp_hello_server *h, aftp_session *ss, aftp_rtt *rtt)
{
    if (h->confirmed)
        return 0;
    h->confirmed = 1;
    ss->state = AFTP_STATE_TRANSFER;
    if (rtt != NULL && ss->now_ns > h->ack_sent_ns)
        aftp_rtt_sample(rtt, ss->now_ns - h->ack_sent_ns, 0);
    aftp_session_event(ss, AFTP_EV_CONNECTED, AFTP_OK, NULL, NULL);
    return 1;
}
