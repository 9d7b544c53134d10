/* The client's end of the handshake (aftp_hello_client.h). */
#include "common/aftp_hello_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Section 14.2: protected ciphers only (this host's preference first),
 * or [NONE] when the user opted out. */
static void build_offer(aftp_hello_client *c, int choice)
{
    uint8_t preferred = aftp_aead_preferred();
    uint8_t order[2] = {preferred, preferred == AFTP_WIRE_CIPHER_AES256GCM
                                       ? AFTP_WIRE_CIPHER_CHACHA20POLY1305
                                       : AFTP_WIRE_CIPHER_AES256GCM};
    c->offer_count = 0;
    if (choice == AFTP_CIPHER_NONE) {
        c->offer[c->offer_count++] = AFTP_WIRE_CIPHER_NONE;
        return;
    }
    for (size_t i = 0; i < sizeof order; i++)
        if (aftp_session_cipher_allowed(choice, order[i]))
            c->offer[c->offer_count++] = order[i];
}

/* The HELLO's fixed fields: what the prologue binds and the server sees. */
static void hello_fields(const aftp_hello_client *c, const aftp_session *ss, aftp_wire_hello *h)
{
    memset(h, 0, sizeof *h);
    h->role = c->role;
    h->cipher_count = c->offer_count;
    memcpy(h->ciphers, c->offer, c->offer_count);
    h->max_datagram = ss->own_max_datagram;
}

/* The handshake of message 1, bound to the offer (the prologue). */
static int new_handshake(const aftp_hello_client *c, const aftp_session *ss,
                         const aftp_security_settings *sec, aftp_handshake **out)
{
    aftp_wire_hello h;
    uint8_t prologue[AFTP_WIRE_PROLOGUE_MAX];
    size_t prologue_len;
    hello_fields(c, ss, &h);
    int rc = aftp_wire_hello_prologue(&h, ss->local_id, prologue, sizeof prologue, &prologue_len);
    if (rc != AFTP_OK)
        return rc;
    aftp_hs_config cfg = {.role = AFTP_HS_INITIATOR, .static_secret = sec->identity,
                          .server_key = sec->peer_key, .psk = sec->psk, .prologue = prologue,
                          .prologue_len = prologue_len, .random = sec->random,
                          .random_user = sec->random_user};
    return aftp_handshake_new(out, &cfg);
}

/* Message 1 is written at the first HELLO (early entries may join it
 * until then), but whether the keys make a handshake at all (a server key
 * that is a low-order point does not) must be known now: a trial message
 * 1 is written and thrown away. */
static int start_handshake(aftp_hello_client *c, const aftp_session *ss,
                           const aftp_security_settings *sec)
{
    aftp_handshake *trial = NULL;
    uint8_t scratch[AFTP_HS_MAX_INIT];
    size_t scratch_len;
    int rc = new_handshake(c, ss, sec, &trial);
    if (rc == AFTP_OK)
        rc = aftp_handshake_write_init(trial, sec->unix_time_ns, NULL, 0, scratch,
                                       sizeof scratch, &scratch_len);
    aftp_handshake_del(trial);
    if (rc == AFTP_OK)
        rc = new_handshake(c, ss, sec, &c->hs);
    /* Besides memory, only the keys can make this fail. */
    return rc == AFTP_OK || rc == AFTP_ERR_NO_MEMORY ? rc : AFTP_ERR_BAD_KEY;
}

int aftp_hello_client_init(aftp_hello_client *c, const aftp_session *ss,
                           const aftp_security_settings *sec, uint8_t role, uint32_t window)
{
    memset(c, 0, sizeof *c);
    c->role = role;
    c->window = window;
    c->key_update_packets = sec->key_update_packets;
    c->unix_ns = sec->unix_time_ns;
    build_offer(c, sec->cipher);
    return sec->cipher != AFTP_CIPHER_NONE ? start_handshake(c, ss, sec) : AFTP_OK;
}

void aftp_hello_client_free(aftp_hello_client *c)
{
    aftp_handshake_del(c->hs);
    c->hs = NULL;
}

/* The HELLO's extensions: message 1, the RETRY token once there is one,
 * RATE_CAP when this end is the sender (it honours a receiver's cap,
 * section 12.3), PIPELINE when a window is proposed (12.3.2), and PULL
 * and PULL_END in a pull (12.3.3, 12.3.5). */
#define HELLO_EXT_MAX \
    (7u * 4u + AFTP_HS_MAX_INIT + AFTP_WIRE_MAX_TOKEN + AFTP_WIRE_PIPELINE_LEN)

static int hello_extensions(const aftp_hello_client *c, uint8_t *ext, uint16_t *ext_len)
{
    aftp_wire_writer w;
    int rc = AFTP_OK;
    aftp_wire_writer_init(&w, ext, HELLO_EXT_MAX);
    if (c->msg1_len > 0)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_HANDSHAKE, c->msg1, (uint16_t)c->msg1_len);
    if (rc == AFTP_OK && c->token_len > 0)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_COOKIE, c->token, c->token_len);
    if (rc == AFTP_OK && c->role == AFTP_WIRE_ROLE_PUSH)
        rc = aftp_wire_ext_put_rate_cap(&w, 0);
    if (rc == AFTP_OK && c->window > 0)
        rc = aftp_wire_ext_put_pipeline(&w, c->window);
    if (rc == AFTP_OK && c->role == AFTP_WIRE_ROLE_PULL)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_PULL, NULL, 0);
    if (rc == AFTP_OK && c->role == AFTP_WIRE_ROLE_PULL)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_PULL_END, NULL, 0);
    if (rc == AFTP_OK && c->early_len > 0)
        rc = aftp_wire_ext_put(&w, AFTP_WIRE_EXT_EARLY_ENTRIES, NULL, 0);
    *ext_len = (uint16_t)w.pos;
    return rc;
}

int aftp_hello_client_encode(aftp_hello_client *c, aftp_session *ss, uint8_t *buf, size_t cap,
                             aftp_datagram *dg)
{
    aftp_wire_packet p;
    uint8_t ext[HELLO_EXT_MAX];
    if (c->hs != NULL && c->msg1_len == 0) {
        int rc = aftp_handshake_write_init(c->hs, c->unix_ns, c->early, c->early_len, c->msg1,
                                           sizeof c->msg1, &c->msg1_len);
        if (rc != AFTP_OK)
            return rc;
    }
    aftp_session_packet(ss, AFTP_WIRE_HELLO, &p);
    hello_fields(c, ss, &p.u.hello);
    int rc = hello_extensions(c, ext, &p.u.hello.ext_len);
    if (rc != AFTP_OK)
        return rc;
    p.u.hello.ext = ext;
    return aftp_session_encode(ss, &p, buf, cap, dg);
}

int aftp_hello_client_set_early(aftp_hello_client *c, const uint8_t *payload, size_t len)
{
    if (c->hs == NULL || c->msg1_len > 0 || len > sizeof c->early)
        return 0;
    memcpy(c->early, payload, len);
    c->early_len = len;
    return 1;
}

/* Section 14.7: the server wants its cookie back before it does any
 * handshake work. Followed once; the HELLO keeps its message 1 (the
 * server has not processed it). */
int aftp_hello_client_retry(aftp_hello_client *c, const aftp_wire_retry *t)
{
    if (c->retried)
        return 0;
    c->retried = 1;
    memcpy(c->token, t->token, t->token_len);
    c->token_len = t->token_len;
    return 1;
}

int aftp_hello_client_version_refused(const aftp_wire_version_neg *v)
{
    for (uint8_t i = 0; i < v->count; i++)
        if (v->versions[i] == AFTP_WIRE_VERSION)
            return 0; /* we speak a listed version: a forged or stale packet */
    return 1;
}

/* Section 14.3: message 2 must open and authenticate the HELLO_ACK's
 * fields; then the traffic keys are installed and the handshake wiped.
 * AFTP_ERR_AUTH when the server is not the one pinned. */
static int finish_handshake(aftp_hello_client *c, aftp_session *ss, const aftp_wire_hello_ack *a,
                            const uint8_t *msg2, uint16_t msg2_len)
{
    uint8_t expected[AFTP_HS_MAX_PAYLOAD], got[AFTP_HS_MAX_PAYLOAD];
    size_t expected_len = 0, got_len = 0;
    int rc = aftp_handshake_read_response(c->hs, msg2, msg2_len, got, sizeof got, &got_len);
    /* A HELLO_ACK whose other extensions do not fit a payload cannot have
     * been authenticated either. */
    if (rc == AFTP_OK)
        rc = aftp_session_ack_payload(a, expected, sizeof expected, &expected_len);
    if (rc != AFTP_OK || got_len != expected_len || memcmp(got, expected, got_len) != 0)
        rc = AFTP_ERR_AUTH;
    if (rc == AFTP_OK)
        rc = aftp_session_protect(ss, c->hs, a->cipher, c->key_update_packets);
    aftp_hello_client_free(c);
    return rc;
}

/* A protected HELLO_ACK: one of our ciphers and message 2, or it is not
 * from the server at all (AFTP_HELLO_DROPPED). AFTP_OK once
 * authenticated; the error when message 2 fails. */
static int accept_protected_ack(aftp_hello_client *c, aftp_session *ss,
                                const aftp_wire_hello_ack *a)
{
    const uint8_t *msg2;
    uint16_t msg2_len;
    if (a->cipher == AFTP_WIRE_CIPHER_NONE ||
        memchr(c->offer, a->cipher, c->offer_count) == NULL ||
        !aftp_wire_ext_find(a->ext, a->ext_len, AFTP_WIRE_EXT_HANDSHAKE, &msg2, &msg2_len)) {
        aftp_session_drop(ss);
        return AFTP_HELLO_DROPPED;
    }
    int rc = finish_handshake(c, ss, a, msg2, msg2_len);
    if (rc == AFTP_ERR_AUTH)
        aftp_session_set_text(ss, "server failed to authenticate: wrong --peer-key or "
                                  "known-hosts entry?");
    return rc;
}

/* Section 12.3.2: a HELLO_ACK's PIPELINE must be 4 bytes, a window of
 * 1..the one this side proposed, and only when it proposed one. */
static int pipeline_broken(const aftp_hello_client *c, const aftp_session *ss,
                           const aftp_wire_hello_ack *a, char *why, size_t cap)
{
    uint32_t window = 0;
    int found = aftp_wire_ext_pipeline(a->ext, a->ext_len, &window);
    if (found < 0) {
        snprintf(why, cap, "the %s's HELLO_ACK carries a PIPELINE that is not a u32 "
                 "window of 1-%u (spec 12.3.2)", ss->peer_name, (unsigned)AFTP_WIRE_MAX_WINDOW);
        return 1;
    }
    if (found > 0 && window > c->window) {
        snprintf(why, cap, "the %s's HELLO_ACK carries a PIPELINE window of %" PRIu32
                 " entries, above the %" PRIu32 " this side proposed (spec 12.3.2)",
                 ss->peer_name, window, c->window);
        return 1;
    }
    return 0;
}

/* Section 9.15.1: a pull's HELLO_ACK carries PULL and PIPELINE and no
 * RATE_CAP; a push's carries no PULL. */
static int role_broken(const aftp_hello_client *c, const aftp_session *ss,
                       const aftp_wire_hello_ack *a, char *why, size_t cap)
{
    uint32_t window = 0;
    uint64_t bps = 0;
    int pull = aftp_wire_ext_pull(a->ext, a->ext_len);
    int pull_end = aftp_wire_ext_empty(a->ext, a->ext_len, AFTP_WIRE_EXT_PULL_END);
    if (c->role == AFTP_WIRE_ROLE_PUSH && (pull != 0 || pull_end != 0)) {
        snprintf(why, cap, "the %s's HELLO_ACK carries a %s this side did not announce "
                 "(spec 12.3.3, 12.3.5)", ss->peer_name, pull != 0 ? "PULL" : "PULL_END");
        return 1;
    }
    if (pull_end < 0) {
        snprintf(why, cap, "the server's HELLO_ACK carries a PULL_END with a value; it has "
                 "none (spec 12.3.5)");
        return 1;
    }
    if (c->role == AFTP_WIRE_ROLE_PULL &&
        (pull != 1 || aftp_wire_ext_pipeline(a->ext, a->ext_len, &window) != 1 ||
         aftp_wire_ext_rate_cap(a->ext, a->ext_len, &bps) != 0)) {
        snprintf(why, cap, "the server's HELLO_ACK to a pull needs an empty PULL and a "
                 "PIPELINE, and no RATE_CAP (spec 9.15.1)");
        return 1;
    }
    return 0;
}

/* Section 12.3.4: the server took message 1's entries. */
static int early_taken(const aftp_wire_hello_ack *a)
{
    const uint8_t *value;
    uint16_t value_len;
    return aftp_wire_ext_find(a->ext, a->ext_len, AFTP_WIRE_EXT_EARLY_ENTRIES, &value,
                              &value_len);
}

/* Section 6.3's field checks, on a HELLO_ACK that is authenticated (or in
 * an unprotected session, where nothing is): 1 and why when one fails.
 * (A protected ack's cipher was checked before authentication.) */
static int ack_fields_broken(const aftp_hello_client *c, const aftp_session *ss,
                             const aftp_wire_hello_ack *a, char *why, size_t cap)
{
    if (!aftp_session_protected(ss) && a->cipher != AFTP_WIRE_CIPHER_NONE) {
        snprintf(why, cap, "the %s's HELLO_ACK selects cipher %u; this side offered "
                 "only none (--cipher none)", ss->peer_name, (unsigned)a->cipher);
        return 1;
    }
    if (a->max_datagram > ss->own_max_datagram) {
        snprintf(why, cap, "the %s's HELLO_ACK negotiates datagrams of %u bytes, above "
                 "the %u this side offered", ss->peer_name, (unsigned)a->max_datagram,
                 (unsigned)ss->own_max_datagram);
        return 1;
    }
    uint64_t bps = 0;
    if (aftp_wire_ext_rate_cap(a->ext, a->ext_len, &bps) < 0) {
        snprintf(why, cap, "the %s's HELLO_ACK carries a RATE_CAP that is not a non-zero "
                 "u64 (spec 12.3)", ss->peer_name);
        return 1;
    }
    if (early_taken(a) && c->early_len == 0) {
        snprintf(why, cap, "the %s's HELLO_ACK carries an EARLY_ENTRIES this side did not "
                 "announce (spec 12.3.4)", ss->peer_name);
        return 1;
    }
    if (early_taken(a) && a->max_datagram != ss->own_max_datagram) {
        snprintf(why, cap, "the %s's HELLO_ACK takes the early entries, whose blocks fit "
                 "%u-byte datagrams, but negotiates %u (spec 12.3.4)", ss->peer_name,
                 (unsigned)ss->own_max_datagram, (unsigned)a->max_datagram);
        return 1;
    }
    return pipeline_broken(c, ss, a, why, cap) || role_broken(c, ss, a, why, cap);
}

int aftp_hello_client_ack(aftp_hello_client *c, aftp_session *ss, const aftp_wire_hello_ack *a,
                          aftp_hello_grant *grant, int *violation)
{
    char why[160];
    *violation = 0;
    if (c->hs != NULL) {
        int rc = accept_protected_ack(c, ss, a);
        if (rc != AFTP_OK)
            return rc;
    }
    if (a->server_conn_id == 0) {
        /* No id to address a CLOSE to: the session ends silently. */
        snprintf(why, sizeof why, "the %s's HELLO_ACK gives server id 0", ss->peer_name);
        aftp_session_set_text(ss, why);
        return AFTP_ERR_MALFORMED;
    }
    ss->peer_id = a->server_conn_id;
    if (ack_fields_broken(c, ss, a, why, sizeof why)) {
        aftp_session_set_text(ss, why);
        *violation = 1;
        return AFTP_ERR_MALFORMED;
    }
    ss->max_datagram = a->max_datagram;
    if (aftp_wire_ext_rate_cap(a->ext, a->ext_len, &grant->rate_cap_bps) <= 0)
        grant->rate_cap_bps = 0;
    if (aftp_wire_ext_pipeline(a->ext, a->ext_len, &grant->window) <= 0)
        grant->window = 0;
    grant->early_entries = early_taken(a);
    grant->pull_end = aftp_wire_ext_empty(a->ext, a->ext_len, AFTP_WIRE_EXT_PULL_END) == 1;
    return AFTP_OK;
}
