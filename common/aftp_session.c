/* State shared by both engine roles (aftp_session.h). */
#include "common/aftp_session.h"

#include "common/aftp_errmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int aftp_session_init(aftp_session *ss, uint32_t local_id, uint16_t max_datagram,
                      uint64_t idle_timeout_ns, aftp_event_cb on_event, void *user,
                      uint64_t now_ns)
{
    memset(ss, 0, sizeof *ss);
    aftp_protect_init(&ss->prot);
    ss->local_id = local_id;
    ss->max_datagram = max_datagram;
    ss->own_max_datagram = max_datagram;
    ss->state = AFTP_STATE_HANDSHAKE;
    ss->idle_timeout_ns = idle_timeout_ns;
    ss->idle_deadline = now_ns + idle_timeout_ns;
    ss->closing_deadline = AFTP_NO_EXPIRY;
    ss->now_ns = now_ns;
    ss->on_event = on_event;
    ss->user = user;
    ss->peer_name = "peer";
    ss->scratch = malloc(max_datagram);
    return ss->scratch != NULL ? AFTP_OK : AFTP_ERR_NO_MEMORY;
}

void aftp_session_free(aftp_session *ss)
{
    aftp_protect_free(&ss->prot);
    free(ss->scratch);
    ss->scratch = NULL;
}

int aftp_session_protect(aftp_session *ss, const aftp_handshake *hs, uint8_t cipher,
                         uint64_t key_update_packets)
{
    int rc = aftp_handshake_peer_key(hs, ss->peer_key);
    if (rc == AFTP_OK)
        rc = aftp_protect_start(&ss->prot, hs, cipher, key_update_packets);
    if (rc != AFTP_OK)
        return rc;
    ss->has_peer_key = 1;
    ss->stats.cipher = cipher;
    return AFTP_OK;
}

int aftp_session_protected(const aftp_session *ss)
{
    return aftp_protect_started(&ss->prot);
}

size_t aftp_session_overhead(const aftp_session *ss)
{
    return aftp_protect_overhead(&ss->prot);
}

int aftp_session_cipher_allowed(int choice, uint8_t cipher)
{
    int wanted = choice == AFTP_CIPHER_AUTO ||
                 (choice == AFTP_CIPHER_AES256GCM && cipher == AFTP_WIRE_CIPHER_AES256GCM) ||
                 (choice == AFTP_CIPHER_CHACHA20POLY1305 &&
                  cipher == AFTP_WIRE_CIPHER_CHACHA20POLY1305);
    return wanted && cipher != AFTP_WIRE_CIPHER_NONE && cipher <= AFTP_WIRE_CIPHER_MAX &&
           aftp_aead_available(cipher);
}

int aftp_session_cipher_choice(uint8_t cipher)
{
    switch (cipher) {
    case AFTP_WIRE_CIPHER_AES256GCM: return AFTP_CIPHER_AES256GCM;
    case AFTP_WIRE_CIPHER_CHACHA20POLY1305: return AFTP_CIPHER_CHACHA20POLY1305;
    default: return AFTP_CIPHER_NONE;
    }
}

int aftp_session_check_security(const aftp_security_settings *sec, int client)
{
    switch (sec->cipher) {
    case AFTP_CIPHER_NONE: return AFTP_OK;
    case AFTP_CIPHER_AUTO: break;
    case AFTP_CIPHER_AES256GCM:
        if (!aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM))
            return AFTP_ERR_INVALID_ARGUMENT;
        break;
    case AFTP_CIPHER_CHACHA20POLY1305: break;
    default: return AFTP_ERR_INVALID_ARGUMENT;
    }
    int has_keys = sec->identity != NULL &&
                   (client ? sec->peer_key != NULL : sec->peers.lookup != NULL);
    return has_keys ? AFTP_OK : AFTP_ERR_BAD_KEY;
}

int aftp_session_ack_payload(const aftp_wire_hello_ack *a, uint8_t *out, size_t cap,
                             size_t *out_len)
{
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, out, cap);
    int rc = aftp_wire_write_u32(&w, a->server_conn_id);
    if (rc == AFTP_OK)
        rc = aftp_wire_write_u8(&w, a->cipher);
    if (rc == AFTP_OK)
        rc = aftp_wire_write_u16(&w, a->max_datagram);
    if (rc == AFTP_OK)
        rc = aftp_wire_ext_put_except(&w, a->ext, a->ext_len, AFTP_WIRE_EXT_HANDSHAKE);
    *out_len = w.pos;
    return rc;
}

void aftp_session_tick(aftp_session *ss, uint64_t now_ns)
{
    if (now_ns > ss->now_ns)
        ss->now_ns = now_ns;
}

void aftp_session_drop(aftp_session *ss)
{
    ss->stats.packets_dropped++;
}

int aftp_session_peek(aftp_session *ss, const uint8_t *buf, size_t len, aftp_wire_header *hdr)
{
    int rc = AFTP_ERR_LIMIT;
    if (buf != NULL && len <= ss->own_max_datagram)
        rc = aftp_wire_header_decode(buf, len, hdr);
    if (rc != AFTP_OK)
        aftp_session_drop(ss);
    return rc;
}

/* Once keys exist everything but a resent HELLO must be sealed. */
static int expects_sealed(const aftp_session *ss, const aftp_wire_header *hdr)
{
    return aftp_session_protected(ss) && hdr->type != AFTP_WIRE_HELLO;
}

int aftp_session_precheck(aftp_session *ss, const aftp_wire_header *hdr)
{
    int sealed = (hdr->flags & AFTP_WIRE_FLAG_PROTECTED) != 0;
    int rc = AFTP_OK;
    if (sealed != expects_sealed(ss, hdr))
        rc = AFTP_ERR_MALFORMED;
    else if (sealed)
        rc = aftp_protect_check(&ss->prot, hdr->pn);
    if (rc != AFTP_OK)
        aftp_session_drop(ss);
    return rc;
}

/* Decrypts the body of a sealed datagram into body_out. */
static int open_body(aftp_session *ss, const uint8_t *buf, size_t len, const aftp_wire_header *hdr,
                     size_t ad_len, uint8_t *body_out, size_t *body_len)
{
    unsigned key_phase = (hdr->flags & AFTP_WIRE_FLAG_KEY_PHASE) != 0;
    return aftp_protect_open(&ss->prot, buf, len, ad_len, hdr->pn, key_phase, body_out, body_len);
}

/* Counts a datagram that did not open: an authentication failure, or a drop. */
static int opened(aftp_session *ss, int rc)
{
    if (rc == AFTP_ERR_AUTH)
        ss->stats.auth_failures++;
    else if (rc != AFTP_OK)
        aftp_session_drop(ss);
    return rc;
}

/* Decrypts into the scratch buffer and decodes from there. */
static int open_sealed(aftp_session *ss, const uint8_t *buf, size_t len,
                       const aftp_wire_header *hdr, aftp_wire_packet *out)
{
    size_t ad_len = hdr->type == AFTP_WIRE_DATA ? AFTP_AEAD_AD_DATA : AFTP_AEAD_AD_HEADER;
    size_t body_len;
    int rc = len < ad_len ? AFTP_ERR_TRUNCATED
                          : open_body(ss, buf, len, hdr, ad_len, ss->scratch + ad_len, &body_len);
    if (rc == AFTP_OK) {
        memcpy(ss->scratch, buf, ad_len);
        rc = aftp_wire_decode(ss->scratch, ad_len + body_len, out);
    }
    return opened(ss, rc);
}

int aftp_session_open(aftp_session *ss, const uint8_t *buf, size_t len,
                      const aftp_wire_header *hdr, aftp_wire_packet *out)
{
    if (expects_sealed(ss, hdr))
        return open_sealed(ss, buf, len, hdr, out);
    int rc = aftp_wire_decode(buf, len, out);
    if (rc != AFTP_OK)
        aftp_session_drop(ss);
    return rc;
}

/* The clear part is decoded from the datagram itself (its payload, still
 * ciphertext, is then replaced by the opened one), so nothing but the
 * payload is ever written to `payload`. */
int aftp_session_open_data(aftp_session *ss, const uint8_t *buf, size_t len,
                           const aftp_wire_header *hdr, uint8_t *payload, aftp_wire_packet *out)
{
    size_t tag = aftp_protect_overhead(&ss->prot);
    size_t body_len;
    if (hdr->type != AFTP_WIRE_DATA || !expects_sealed(ss, hdr))
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = len < AFTP_AEAD_AD_DATA + tag ? AFTP_ERR_TRUNCATED
                                           : aftp_wire_decode(buf, len - tag, out);
    if (rc == AFTP_OK)
        rc = open_body(ss, buf, len, hdr, AFTP_AEAD_AD_DATA, payload, &body_len);
    if (rc == AFTP_OK)
        out->u.data.payload = payload;
    return opened(ss, rc);
}

void aftp_session_heard(aftp_session *ss, uint64_t now_ns, size_t len)
{
    ss->stats.packets_received++;
    ss->stats.wire_bytes_received += len;
    ss->idle_deadline = now_ns + ss->idle_timeout_ns;
}

void aftp_session_header(const aftp_session *ss, uint8_t type, aftp_wire_header *hdr)
{
    hdr->version = AFTP_WIRE_VERSION;
    hdr->type = type;
    hdr->flags = 0;
    hdr->conn_id = ss->peer_id;
    hdr->pn = ss->next_pn;
}

/* See aftp_session.peer_name. */
static void learn_peer_name(aftp_session *ss, uint8_t type)
{
    if ((type == AFTP_WIRE_HELLO || type == AFTP_WIRE_HELLO_ACK) && ss->peer_role != NULL)
        ss->peer_name = ss->peer_role;
}

void aftp_session_packet(aftp_session *ss, uint8_t type, aftp_wire_packet *p)
{
    learn_peer_name(ss, type);
    memset(p, 0, sizeof *p);
    aftp_session_header(ss, type, &p->hdr);
}

void aftp_session_stats(const aftp_session *ss, const aftp_rtt *rtt, aftp_stats *out)
{
    *out = ss->stats;
    out->srtt_ns = rtt->has_sample ? rtt->smoothed : 0;
    out->min_rtt_ns = rtt->has_sample ? rtt->min : 0;
    out->key_updates = ss->prot.key_updates;
    out->max_datagram = ss->max_datagram;
}

void aftp_session_resent(aftp_session *ss, const aftp_datagram *dg)
{
    ss->stats.packets_sent++;
    ss->stats.wire_bytes_sent += dg->head_len + dg->payload_len;
}

void aftp_session_sent(aftp_session *ss, const aftp_datagram *dg)
{
    ss->next_pn++;
    aftp_session_resent(ss, dg);
}

int aftp_session_encode(aftp_session *ss, const aftp_wire_packet *pkt, uint8_t *buf, size_t cap,
                        aftp_datagram *dg)
{
    size_t len, overhead = aftp_session_overhead(ss);
    if (cap < overhead)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    int rc = aftp_wire_encode(pkt, buf, cap - overhead, &len);
    if (rc == AFTP_OK && overhead > 0)
        rc = aftp_protect_seal_datagram(&ss->prot, buf, len, AFTP_AEAD_AD_HEADER, cap, &len);
    if (rc != AFTP_OK)
        return rc;
    dg->head = buf;
    dg->head_len = len;
    dg->payload = NULL;
    dg->payload_len = 0;
    aftp_session_sent(ss, dg);
    return AFTP_OK;
}

void aftp_session_event(aftp_session *ss, int type, int error, const aftp_file_info *info,
                        const uint8_t *digest)
{
    if (ss->on_event == NULL)
        return;
    aftp_event ev = {
        .type = type,
        .peer_key = type == AFTP_EV_CONNECTED && ss->has_peer_key ? ss->peer_key : NULL,
        .error = error,
        .info = info,
        .digest = digest,
        /* The detail explains the session's end, not a file's. */
        .message = type == AFTP_EV_CLOSED && ss->message[0] != '\0' ? ss->message : NULL,
    };
    ss->on_event(ss->user, &ev);
}

/* Keeps len bytes of text as the message, control characters replaced. */
static void set_message(aftp_session *ss, const char *text, size_t len)
{
    if (len > AFTP_WIRE_MAX_REASON)
        len = AFTP_WIRE_MAX_REASON;
    /* Peer text is shown to users: no control characters get through raw. */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        ss->message[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    ss->message[len] = '\0';
}

void aftp_session_set_text(aftp_session *ss, const char *text)
{
    set_message(ss, text, strlen(text));
}

int aftp_session_failure(const aftp_session *ss)
{
    int ending = ss->state == AFTP_STATE_CLOSING || ss->state == AFTP_STATE_CLOSED;
    return ending ? ss->error : AFTP_OK;
}

void aftp_session_start_closing(aftp_session *ss, int error, uint16_t wire_error,
                                uint64_t drain_ns)
{
    if (ss->state == AFTP_STATE_CLOSING || ss->state == AFTP_STATE_CLOSED)
        return;
    ss->state = AFTP_STATE_CLOSING;
    ss->error = error;
    ss->close_wire_error = wire_error;
    ss->close_due = 1;
    ss->closing_period_ns = drain_ns;
    ss->closing_deadline = ss->now_ns + drain_ns; /* until the CLOSE leaves */
}

void aftp_session_close_done(aftp_session *ss, unsigned copies)
{
    if (ss->state == AFTP_STATE_CLOSING || ss->state == AFTP_STATE_CLOSED)
        return;
    aftp_session_start_closing(ss, AFTP_OK, AFTP_WIRE_ERR_NONE, AFTP_SESSION_QUICK_SPACING_NS);
    ss->close_copies = copies < AFTP_SESSION_QUICK_CLOSES       ? AFTP_SESSION_QUICK_CLOSES
                       : copies > AFTP_SESSION_QUICK_CLOSES_MAX ? AFTP_SESSION_QUICK_CLOSES_MAX
                                                                : (int)copies;
}

unsigned aftp_session_quick_close_copies(double p)
{
    unsigned n = AFTP_SESSION_QUICK_CLOSES;
    double all_lost = p * p * p;
    while (n < AFTP_SESSION_QUICK_CLOSES_MAX && all_lost > 1e-6) {
        all_lost *= p;
        n++;
    }
    return n;
}

void aftp_session_set_closed(aftp_session *ss, int error)
{
    if (ss->state == AFTP_STATE_CLOSED)
        return;
    ss->state = AFTP_STATE_CLOSED;
    ss->error = error;
    ss->close_due = 0;
    ss->idle_deadline = AFTP_NO_EXPIRY;
    ss->closing_deadline = AFTP_NO_EXPIRY;
    aftp_session_event(ss, AFTP_EV_CLOSED, error, NULL, NULL);
}

void aftp_session_answer_close(aftp_session *ss)
{
    ss->close_wire_error = AFTP_WIRE_ERR_NONE;
    ss->close_due = 1;
}

/* The peer's cancel reads as the peer's, not as one of ours: its reason
 * is kept after it when it says more than the stock text. */
static void set_peer_cancel_message(aftp_session *ss, const aftp_wire_close *c)
{
    const char *stock = aftp_strerror(AFTP_ERR_CANCELLED);
    size_t len = c->reason_len;
    char text[64 + AFTP_WIRE_MAX_REASON];
    int head = snprintf(text, sizeof text, "the %s cancelled the transfer", ss->peer_name);
    if (len > AFTP_WIRE_MAX_REASON)
        len = AFTP_WIRE_MAX_REASON;
    if (len > 0 && !(len == strlen(stock) && memcmp(c->reason, stock, len) == 0)) {
        memcpy(text + head, ": ", 2);
        memcpy(text + head + 2, c->reason, len);
        head += 2 + (int)len;
    }
    set_message(ss, text, (size_t)head);
}

int aftp_session_peer_close(aftp_session *ss, const aftp_wire_close *c, int in_progress)
{
    /* Spec 11.2: the same table as per-file errors; codes without a local
     * twin (PROTOCOL, INTERNAL, unknown) become PEER_CLOSED. */
    int error = aftp_errmap_to_local(c->error);
    if (error == AFTP_ERR_CANCELLED)
        set_peer_cancel_message(ss, c);
    else
        set_message(ss, (const char *)c->reason, c->reason_len);
    return error == AFTP_OK && in_progress ? AFTP_ERR_PEER_CLOSED : error;
}

int aftp_session_encode_close(aftp_session *ss, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet pkt;
    aftp_session_packet(ss, AFTP_WIRE_CLOSE, &pkt);
    pkt.u.close.error = ss->close_wire_error;
    /* An answer to the peer's CLOSE (state CLOSED) has nothing to say;
     * the message then holds the peer's own reason. */
    const char *reason = ss->state == AFTP_STATE_CLOSED ? ""
                         : ss->message[0] != '\0'      ? ss->message
                         : ss->error == AFTP_OK         ? ""
                                                        : aftp_strerror(ss->error);
    pkt.u.close.reason = (const uint8_t *)reason;
    pkt.u.close.reason_len = (uint16_t)strlen(reason);
    int rc = aftp_session_encode(ss, &pkt, buf, cap, dg);
    if (rc != AFTP_OK)
        return rc;
    ss->close_due = 0;
    if (ss->state == AFTP_STATE_CLOSING && ss->close_copies > 0) {
        /* A quick close: the next copy a spacing later, CLOSED at once
         * after the last. */
        ss->close_copies--;
        ss->close_sent = 1;
        ss->closing_deadline = ss->now_ns + (ss->close_copies > 0 ? ss->closing_period_ns : 0);
    } else if (ss->state == AFTP_STATE_CLOSING && !ss->close_sent) {
        /* The period counts from this CLOSE, not from the decision to
         * close: a driver late to send (a busy thread, a packet that
         * waited in the socket) must not find the period over before the
         * peer was ever told. */
        ss->close_sent = 1;
        ss->closing_deadline = ss->now_ns + ss->closing_period_ns;
    }
    return rc;
}

uint64_t aftp_session_expiry(const aftp_session *ss)
{
    return ss->idle_deadline < ss->closing_deadline ? ss->idle_deadline : ss->closing_deadline;
}

/* The closing period is over: 3 PTO since our first CLOSE left. Until it
 * has, the period counts from the decision to close; one that runs out
 * with the CLOSE still unsent (a driver that handles the expiry before it
 * lets the engine write) starts once more from now, so the peer is told,
 * and a CLOSE that could never leave (were the amplification limit to
 * hold it) still does not keep the session open beyond that. */
static int drained(aftp_session *ss, uint64_t now_ns)
{
    if (now_ns < ss->closing_deadline)
        return 0;
    if (ss->close_copies > 0) { /* a quick close: the next copy is due */
        ss->close_due = 1;
        ss->closing_deadline = now_ns + ss->closing_period_ns;
        return 0;
    }
    if (ss->close_sent || ss->close_held)
        return 1;
    ss->close_held = 1;
    ss->closing_deadline = now_ns + ss->closing_period_ns;
    return 0;
}

enum aftp_session_timer aftp_session_timer_due(aftp_session *ss, uint64_t now_ns)
{
    if (ss->state == AFTP_STATE_CLOSED)
        return AFTP_SESSION_TIMER_NONE;
    if (drained(ss, now_ns))
        return AFTP_SESSION_TIMER_DRAINED;
    if (now_ns >= ss->idle_deadline)
        return AFTP_SESSION_TIMER_IDLE;
    return AFTP_SESSION_TIMER_NONE;
}
