/*
 * The receiver as the client of a pull (spec section 9.15): it sends the
 * HELLO (common/aftp_hello_client: role PULL, PIPELINE, PULL), then its
 * PULL_REQUEST, resent on the control timer until the PULL_REPLY comes;
 * each PULL_REPLY is confirmed with a FEEDBACK. Before the reply it takes
 * nothing else, so everything it sends after its requests proves the
 * server that the reply arrived. From then on it is the pipelined
 * receiver of aftp_receiver_pipe.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aftp_errmap.h"
#include "receiver/aftp_receiver_internal.h"

/* The request in a datagram every path carries (spec 6.16): header, its
 * fixed fields and the tag leave this much for the paths. */
#define REQUEST_ROOM                                                                            \
    (AFTP_WIRE_MIN_DATAGRAM - AFTP_WIRE_HEADER_LEN - AFTP_WIRE_PULL_REQUEST_FIXED -           \
     AFTP_WIRE_TAG_LEN)

/* Copies the request's paths (the engine keeps no pointer into settings):
 * AFTP_ERR_INVALID_ARGUMENT when they break 6.16's bounds. */
static int copy_request(aftp_receiver *r)
{
    const aftp_pull_request *q = &r->set.pull;
    size_t total = 0, wire = 0;
    if (q->paths == NULL || q->path_count == 0 || q->path_count > AFTP_PULL_MAX_PATHS)
        return AFTP_ERR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < q->path_count; i++) {
        size_t len = q->paths[i] != NULL ? strnlen(q->paths[i], AFTP_WIRE_MAX_PATH + 1) : 0;
        if (len == 0 || len > AFTP_WIRE_MAX_PATH)
            return AFTP_ERR_INVALID_ARGUMENT;
        total += len + 1;
        wire += 2 + len;
    }
    if (wire > REQUEST_ROOM)
        return AFTP_ERR_INVALID_ARGUMENT;
    r->pull_text = malloc(total);
    r->pull_paths = calloc(q->path_count, sizeof *r->pull_paths);
    if (r->pull_text == NULL || r->pull_paths == NULL)
        return AFTP_ERR_NO_MEMORY;
    char *at = r->pull_text;
    for (uint32_t i = 0; i < q->path_count; i++) {
        size_t len = strlen(q->paths[i]);
        memcpy(at, q->paths[i], len + 1);
        r->pull_paths[i] = (aftp_wire_path){(uint16_t)len, (const uint8_t *)at};
        at += len + 1;
    }
    r->set.pull.paths = NULL;
    return AFTP_OK;
}

/* The request's fields, for its PULL_REQUEST and message 1 alike. */
static aftp_wire_pull_request request_fields(const aftp_receiver *r)
{
    const aftp_pull_request *q = &r->set.pull;
    return (aftp_wire_pull_request){.flags = (uint16_t)(q->flags & AFTP_WIRE_PULL_FLAGS_DEFINED),
                                    .max_rate_bps = q->max_rate_bps,
                                    .path_count = (uint16_t)q->path_count,
                                    .paths = r->pull_paths};
}

/* Section 12.3.4: the whole request rides in message 1 when it fits its
 * 256 bytes (a protected session only: set_early refuses otherwise); a
 * request that does not fit goes after the handshake, whole, as without
 * the extension (its reply answers one request, 6.17). */
static void offer_early_request(aftp_receiver *r)
{
    uint8_t body[AFTP_HS_MAX_PAYLOAD];
    size_t len;
    aftp_wire_pull_request q = request_fields(r);
    if (!r->set.no_early_request &&
        aftp_wire_early_request_encode(&q, body, sizeof body, &len) == AFTP_OK)
        (void)aftp_hello_client_set_early(&r->cli, body, len);
}

int aftp_rpull_init(aftp_receiver *r)
{
    aftp_security_settings *sec = &r->set.security;
    int rc = copy_request(r);
    if (rc == AFTP_OK)
        rc = aftp_hello_client_init(&r->cli, &r->ss, sec, AFTP_WIRE_ROLE_PULL,
                                    r->set.pipeline_window);
    if (rc == AFTP_OK)
        offer_early_request(r);
    sec->identity = sec->peer_key = sec->psk = NULL; /* copied into the handshake */
    /* Section 9.3: the HELLO carries the client's own id and leaves at once. */
    r->ss.peer_id = r->ss.local_id;
    r->hello_due = 1;
    r->pull_deadline = AFTP_NO_EXPIRY;
    return rc;
}

void aftp_rpull_free(aftp_receiver *r)
{
    aftp_hello_client_free(&r->cli);
    free(r->pull_text);
    free(r->pull_paths);
}

int aftp_rpull_receives(const aftp_receiver *r, uint8_t type)
{
    switch (type) {
    case AFTP_WIRE_VERSION_NEG:
    case AFTP_WIRE_HELLO_ACK:
    case AFTP_WIRE_RETRY:
    case AFTP_WIRE_CLOSE: return 1;
    case AFTP_WIRE_PULL_REPLY:
    case AFTP_WIRE_ENTRIES:
    case AFTP_WIRE_DATA:
    case AFTP_WIRE_FILE_DONE:
    case AFTP_WIRE_ABANDON: return r->window != 0;
    case AFTP_WIRE_PULL_END: return r->pull_end;
    default: return 0;
    }
}

static void arm(aftp_receiver *r)
{
    r->pull_deadline = r->ss.now_ns + aftp_rtt_pto_backoff(&r->rtt, r->pull_backoff);
}

/* Section 9.15.3, HANDSHAKE + HELLO_ACK: the pipelined session with the
 * granted window, CONNECTED, and the request due. */
static void on_hello_ack(aftp_receiver *r, const aftp_wire_hello_ack *a)
{
    aftp_hello_grant grant;
    int violation = 0;
    int rc = aftp_hello_client_ack(&r->cli, &r->ss, a, &grant, &violation);
    if (rc == AFTP_HELLO_DROPPED)
        return;
    r->hello_due = 0;
    r->pull_deadline = AFTP_NO_EXPIRY;
    if (rc != AFTP_OK && violation) {
        aftp_recv_start_closing(r, rc, AFTP_WIRE_ERR_PROTOCOL);
        return;
    }
    r->window = grant.window; /* never 0: a pull's HELLO_ACK has PIPELINE */
    r->pull_end = grant.pull_end;
    if (rc == AFTP_OK)
        rc = aftp_rpipe_init(r);
    if (rc != AFTP_OK) {
        aftp_recv_close_now(r, rc); /* no keys or no id: nothing the server could trust */
        return;
    }
    /* Section 9.3: one HELLO answered is an unambiguous RTT sample. */
    if (r->hellos_sent == 1 && r->ss.now_ns > r->hello_sent_ns)
        aftp_rtt_sample(&r->rtt, r->ss.now_ns - r->hello_sent_ns, 0);
    r->ss.state = AFTP_STATE_TRANSFER;
    aftp_session_event(&r->ss, AFTP_EV_CONNECTED, AFTP_OK, NULL, NULL);
    r->pull_backoff = 0;
    /* Section 12.3.4: a request the server took left with the first HELLO;
     * it is resent in a PULL_REQUEST only when its reply does not come. */
    if (grant.early_entries)
        arm(r);
    else
        r->request_due = 1;
}

/* Section 9.15.2: each path's verdict, reported once; every PULL_REPLY is
 * confirmed with a FEEDBACK at once. */
static void on_pull_reply(aftp_receiver *r, const aftp_wire_pull_reply *a)
{
    char why[128];
    if (a->count != r->set.pull.path_count) {
        snprintf(why, sizeof why, "the server's PULL_REPLY answers %u paths; the request "
                 "named %" PRIu32 " (spec 6.17)", (unsigned)a->count, r->set.pull.path_count);
        aftp_recv_close_protocol(r, why);
        return;
    }
    r->feedback_due = 1;
    if (r->replied)
        return;
    r->replied = 1;
    r->request_due = 0;
    r->pull_deadline = AFTP_NO_EXPIRY;
    for (uint16_t i = 0; i < a->count; i++) {
        aftp_file_info info = {.file_id = i + 1u, .path = (const char *)r->pull_paths[i].bytes};
        aftp_session_event(&r->ss, AFTP_EV_PULL_PATH, aftp_errmap_to_local(a->errors[i]), &info,
                           NULL);
    }
}

/* The server's CLOSE; one without its reply first cannot be a clean end
 * (9.15.3): the paths' fate is unknown. */
static void on_close(aftp_receiver *r, const aftp_wire_close *c)
{
    int answer = r->ss.state == AFTP_STATE_TRANSFER; /* in HANDSHAKE: no server id */
    int error = aftp_recv_peer_close_error(r, c);
    if (error == AFTP_OK && !r->replied) {
        error = AFTP_ERR_PEER_CLOSED;
        aftp_session_set_text(&r->ss, "the server closed before answering the request");
    }
    aftp_recv_close_now(r, error);
    if (answer)
        aftp_session_answer_close(&r->ss);
}

/* Section 9.15.5: PULL_END names the session's last entry; it never
 * changes and no entry beyond it comes. */
static void on_pull_end(aftp_receiver *r, const aftp_wire_pull_end *e)
{
    char why[160];
    if (r->end_known && e->entry_count != r->end_count)
        snprintf(why, sizeof why, "the server's PULL_END says %" PRIu32 " entries, after one "
                 "that said %" PRIu32 " (spec 6.19)", e->entry_count, r->end_count);
    else if (e->entry_count < r->stream.newest)
        snprintf(why, sizeof why, "the server's PULL_END says %" PRIu32 " entries, but it "
                 "offered entry %" PRIu32 " (spec 6.19)", e->entry_count, r->stream.newest);
    else {
        r->end_known = 1;
        r->end_count = e->entry_count;
        aftp_rpipe_end_known(r);
        return;
    }
    aftp_recv_close_protocol(r, why);
}

/* An ENTRIES after PULL_END offers nothing beyond its count: 1 when it
 * does (the session then closes). */
static int beyond_end(aftp_receiver *r, const aftp_wire_entries *en)
{
    aftp_wire_record_iter it;
    aftp_wire_entry first;
    char why[160];
    aftp_wire_entries_iter_init(&it, en);
    if (!r->end_known || !aftp_wire_entries_next(&it, &first) ||
        (uint64_t)first.entry_id + en->count - 1 <= r->end_count)
        return 0;
    snprintf(why, sizeof why, "the server offered entry %" PRIu64 " after its PULL_END said "
             "%" PRIu32 " entries (spec 6.19)", (uint64_t)first.entry_id + en->count - 1,
             r->end_count);
    aftp_recv_close_protocol(r, why);
    return 1;
}

/* Section 9.11's quick close, for a pull's client: the FILE_RESULTs that
 * left within a PTO go with every CLOSE copy (the server may not have
 * them yet, and reports its own outcome from them), and as many copies
 * as the DATA this client saw repeated (each lost block came again)
 * calls for. */
static void quick_close(aftp_receiver *r)
{
    uint64_t pto = aftp_rtt_pto(&r->rtt);
    uint32_t lo = r->end_count > r->window ? r->end_count - r->window + 1 : 1;
    r->close_result_count = 0;
    for (uint32_t id = r->end_count; id >= lo && id > 0 &&
                                     r->close_result_count < CLOSE_RESULTS_MAX; id--) {
        const pipe_entry *p = aftp_rpipe_slot(r, id);
        if (p != NULL && p->has_result && r->ss.now_ns - p->result_ns <= pto)
            r->close_results[r->close_result_count++] = id;
    }
    double repeated = r->data_packets > 0
                          ? (double)(r->data_packets - r->data_new) / (double)r->data_packets
                          : 0.0;
    aftp_session_close_done(&r->ss, aftp_session_quick_close_copies(repeated));
}

void aftp_rpull_check_end(aftp_receiver *r)
{
    if (r->end_known && r->ss.state == AFTP_STATE_TRANSFER &&
        aftp_rpipe_all_ended(r, r->end_count))
        quick_close(r);
}

static void in_handshake(aftp_receiver *r, const aftp_wire_packet *p)
{
    switch (p->hdr.type) {
    case AFTP_WIRE_HELLO_ACK: on_hello_ack(r, &p->u.hello_ack); break;
    case AFTP_WIRE_RETRY:
        if (aftp_hello_client_retry(&r->cli, &p->u.retry))
            r->hello_due = 1;
        else
            aftp_session_drop(&r->ss);
        break;
    case AFTP_WIRE_VERSION_NEG:
        if (aftp_hello_client_version_refused(&p->u.version_neg))
            aftp_recv_close_now(r, AFTP_ERR_VERSION); /* section 12.2 */
        break;
    default: aftp_session_drop(&r->ss); break;
    }
}

int aftp_rpull_on_packet(aftp_receiver *r, const aftp_wire_packet *p)
{
    if (p->hdr.type == AFTP_WIRE_CLOSE) {
        on_close(r, &p->u.close);
        return 1;
    }
    if (r->ss.state == AFTP_STATE_HANDSHAKE) {
        in_handshake(r, p);
        return 1;
    }
    if (p->hdr.type == AFTP_WIRE_PULL_REPLY) {
        on_pull_reply(r, &p->u.pull_reply);
        return 1;
    }
    /* Before the reply nothing of the pull is taken: the server resends it. */
    if (!r->replied || p->hdr.type == AFTP_WIRE_HELLO_ACK || p->hdr.type == AFTP_WIRE_RETRY ||
        p->hdr.type == AFTP_WIRE_VERSION_NEG) {
        aftp_session_drop(&r->ss);
        return 1;
    }
    if (p->hdr.type == AFTP_WIRE_PULL_END) {
        on_pull_end(r, &p->u.pull_end);
        return 1;
    }
    return p->hdr.type == AFTP_WIRE_ENTRIES && beyond_end(r, &p->u.entries);
}

uint8_t aftp_rpull_due(const aftp_receiver *r)
{
    if (r->ss.state == AFTP_STATE_HANDSHAKE && r->hello_due)
        return AFTP_WIRE_HELLO;
    if (r->ss.state == AFTP_STATE_TRANSFER && r->request_due)
        return AFTP_WIRE_PULL_REQUEST;
    return 0;
}

static int encode_request(aftp_receiver *r, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&r->ss, AFTP_WIRE_PULL_REQUEST, &p);
    p.u.pull_request = request_fields(r);
    return aftp_session_encode(&r->ss, &p, buf, cap, dg);
}

int aftp_rpull_encode(aftp_receiver *r, uint8_t type, uint8_t *buf, size_t cap,
                      aftp_datagram *dg)
{
    arm(r);
    if (type == AFTP_WIRE_PULL_REQUEST) {
        r->request_due = 0;
        return encode_request(r, buf, cap, dg);
    }
    r->hello_due = 0;
    r->hellos_sent++;
    r->hello_sent_ns = r->ss.now_ns;
    return aftp_hello_client_encode(&r->cli, &r->ss, buf, cap, dg);
}

uint64_t aftp_rpull_expiry(const aftp_receiver *r, uint64_t t)
{
    int waiting = r->ss.state == AFTP_STATE_HANDSHAKE ||
                  (r->ss.state == AFTP_STATE_TRANSFER && !r->replied);
    return waiting && r->pull_deadline < t ? r->pull_deadline : t;
}

/* The control timer (section 10.2): the HELLO or the request again. */
void aftp_rpull_handle_expiry(aftp_receiver *r)
{
    if (r->ss.now_ns < r->pull_deadline)
        return;
    r->pull_deadline = AFTP_NO_EXPIRY;
    r->pull_backoff++;
    if (r->ss.state == AFTP_STATE_HANDSHAKE)
        r->hello_due = 1;
    else if (r->ss.state == AFTP_STATE_TRANSFER && !r->replied)
        r->request_due = 1;
}
