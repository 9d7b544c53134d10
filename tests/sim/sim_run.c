/* Virtual-clock transfer loop (sim_run.h). */
#include "sim_run.h"

#include "common/aftp_handshake.h"
#include "proto/aftp_wire.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAX_LOOPS_AT_ONE_TIME 100000

void sim_cfg_default(sim_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->file_size = 3 * 1000 * 1000;
    c->nfiles = 1;
    c->rate_bps = 100 * 1000 * 1000;
    c->policy = AFTP_CC_FIXED;
    c->max_datagram = 1452;
    c->fwd = (sim_link_cfg){.rate_bps = 200 * 1000 * 1000, .delay_ns = 20 * SIM_MS,
                            .queue_bytes = 1000 * 1000};
    c->rev = c->fwd;
    c->seed = 1;
    c->idle_timeout_ns = 5 * SIM_S;
    c->receiver_dies_at = AFTP_NO_EXPIRY;
    c->sender_dies_at = AFTP_NO_EXPIRY;
    c->sender_cancels_at = AFTP_NO_EXPIRY;
    c->receiver_cancels_at = AFTP_NO_EXPIRY;
    c->corrupt_offset = -1;
    c->time_limit_ns = 120 * SIM_S;
}

typedef struct sim_world {
    const sim_cfg *cfg;
    sim_result *res;
    aftp_sender *snd;
    aftp_receiver *rcv;
    sim_link fwd, rev;
    uint8_t *sbuf, *rbuf;
    int all_fed;           /* every entry added, aftp_sender_finish called */
} sim_world;

static int alive(uint64_t now, uint64_t dies_at)
{
    return now < dies_at;
}

/* Keeps the largest read-back of one receiver call: bytes viewed since
 * `before`. */
static void note_receiver_views(sim_world *w, uint64_t before)
{
    uint64_t n = w->res->st.receiver_view_bytes - before;
    if (n > w->res->rcv_view_max)
        w->res->rcv_view_max = n;
}

static void deliver(sim_world *w, uint64_t now)
{
    while (sim_link_next(&w->fwd) <= now) {
        sim_pkt p = sim_link_pop(&w->fwd);
        uint64_t before = w->res->st.receiver_view_bytes;
        if (alive(now, w->cfg->receiver_dies_at))
            aftp_receiver_read(w->rcv, now, p.data, p.len);
        note_receiver_views(w, before);
        free(p.data);
    }
    while (sim_link_next(&w->rev) <= now) {
        sim_pkt p = sim_link_pop(&w->rev);
        if (alive(now, w->cfg->sender_dies_at)) {
            if (w->cfg->rev_tap == NULL || w->cfg->rev_tap(w->cfg->rev_tap_ctx, now, p.data, p.len))
                aftp_sender_read(w->snd, now, p.data, p.len);
        }
        free(p.data);
    }
}

/* The entries the sender has room for now (sim_cfg.refill). */
static void refill(sim_world *w, uint64_t now)
{
    if (w->cfg->refill == NULL || !alive(now, w->cfg->sender_dies_at))
        return;
    if (w->cfg->refill(w->cfg->feed_ctx, &w->res->st, w->snd, now) && !w->all_fed) {
        aftp_sender_finish(w->snd);
        w->all_fed = 1;
    }
}

static void run_timers_and_output(sim_world *w, uint64_t now)
{
    aftp_datagram dg;
    refill(w, now);
    if (w->cfg->step != NULL && alive(now, w->cfg->sender_dies_at) &&
        alive(now, w->cfg->receiver_dies_at))
        w->cfg->step(w->cfg->step_ctx, w->snd, w->rcv, now);
    if (alive(now, w->cfg->sender_dies_at)) {
        if (now >= w->cfg->sender_cancels_at && w->cfg->sender_abort_error != 0)
            aftp_sender_abort(w->snd, now, w->cfg->sender_abort_error, "source changed");
        else if (now >= w->cfg->sender_cancels_at)
            aftp_sender_cancel(w->snd, now);
        if (now >= aftp_sender_expiry(w->snd)) {
            aftp_sender_handle_expiry(w->snd, now);
            refill(w, now); /* a timer may have let the walk go on (a pull's request) */
        }
        while (aftp_sender_write(w->snd, now, w->sbuf, w->cfg->max_datagram, &dg) == 1) {
            if (w->cfg->fwd_tap != NULL)
                w->cfg->fwd_tap(w->cfg->fwd_tap_ctx, now, &dg);
            if (w->cfg->fwd_filter == NULL || w->cfg->fwd_filter(w->cfg->fwd_filter_ctx, &dg))
                sim_link_send(&w->fwd, now, &dg);
        }
    }
    if (alive(now, w->cfg->receiver_dies_at)) {
        uint64_t before = w->res->st.receiver_view_bytes;
        if (now >= w->cfg->receiver_cancels_at)
            aftp_receiver_cancel(w->rcv, now);
        if (now >= aftp_receiver_expiry(w->rcv))
            aftp_receiver_handle_expiry(w->rcv, now);
        note_receiver_views(w, before);
        for (;;) {
            before = w->res->st.receiver_view_bytes;
            int rc = aftp_receiver_write(w->rcv, now, w->rbuf, w->cfg->max_datagram, &dg);
            note_receiver_views(w, before);
            if (rc != 1)
                break;
            sim_link_send(&w->rev, now, &dg);
        }
    }
}

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a < b ? a : b;
    return m < c ? m : c;
}

/* The next moment anything can happen. */
static uint64_t next_event(sim_world *w, uint64_t now)
{
    uint64_t t = min3(sim_link_next(&w->fwd), sim_link_next(&w->rev), AFTP_NO_EXPIRY);
    if (alive(now, w->cfg->sender_dies_at))
        t = min3(t, aftp_sender_expiry(w->snd), w->cfg->sender_dies_at);
    if (alive(now, w->cfg->receiver_dies_at))
        t = min3(t, aftp_receiver_expiry(w->rcv), w->cfg->receiver_dies_at);
    if (w->cfg->sender_cancels_at > now)
        t = min3(t, w->cfg->sender_cancels_at, AFTP_NO_EXPIRY);
    if (w->cfg->receiver_cancels_at > now)
        t = min3(t, w->cfg->receiver_cancels_at, AFTP_NO_EXPIRY);
    return t;
}

static int finished(sim_world *w, uint64_t now)
{
    int snd_done = !alive(now, w->cfg->sender_dies_at) ||
                   aftp_sender_state(w->snd) == AFTP_STATE_CLOSED;
    int rcv_done = !alive(now, w->cfg->receiver_dies_at) ||
                   aftp_receiver_state(w->rcv) == AFTP_STATE_CLOSED;
    return snd_done && rcv_done;
}

const uint8_t sim_client_secret[AFTP_KEY_LEN] = {
    0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1,
    0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1, 0xC1};
const uint8_t sim_server_secret[AFTP_KEY_LEN] = {
    0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E,
    0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E, 0x5E};

static const uint8_t *public_of(const uint8_t *secret, uint8_t *pub, int *done)
{
    if (!*done && aftp_hs_public_key(secret, pub) != AFTP_OK)
        abort();
    *done = 1;
    return pub;
}

const uint8_t *sim_client_public(void)
{
    static uint8_t pub[AFTP_KEY_LEN];
    static int done;
    return public_of(sim_client_secret, pub, &done);
}

const uint8_t *sim_server_public(void)
{
    static uint8_t pub[AFTP_KEY_LEN];
    static int done;
    return public_of(sim_server_secret, pub, &done);
}

int sim_admit_client(void *user, const uint8_t *client_key, uint8_t *psk)
{
    (void)user;
    if (memcmp(client_key, sim_client_public(), AFTP_KEY_LEN) != 0)
        return AFTP_ERR_UNKNOWN_PEER;
    memset(psk, 0, AFTP_KEY_LEN);
    return AFTP_OK;
}

void sim_random(void *user, uint8_t *buf, size_t len)
{
    static uint64_t counter;
    (void)user;
    for (size_t i = 0; i < len; i++) {
        uint64_t z = (counter += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        buf[i] = (uint8_t)(z ^ (z >> 31));
    }
}

/* Keys as the CLI would load them; a fixed wall-clock time. */
static void sim_security(aftp_security_settings *sec, int client)
{
    sec->cipher = AFTP_CIPHER_AUTO;
    sec->identity = client ? sim_client_secret : sim_server_secret;
    sec->peer_key = client ? sim_server_public() : NULL;
    sec->peers.lookup = client ? NULL : sim_admit_client;
    sec->unix_time_ns = UINT64_C(1700000000) * SIM_S;
    sec->random = sim_random;
}

void sim_engine_settings(aftp_sender_settings *s, sim_side *snd_side, aftp_receiver_settings *r,
                         sim_side *rcv_side)
{
    aftp_sender_settings_default(s);
    s->conn_id = 0x11111111;
    s->storage = &sim_sender_storage;
    s->on_event = sim_on_event;
    s->user = snd_side;
    aftp_receiver_settings_default(r);
    r->conn_id = 0x22222222;
    r->storage = &sim_receiver_storage;
    r->on_event = sim_on_event;
    r->user = rcv_side;
    sim_security(&s->security, 1);
    sim_security(&r->security, 0);
}

static void make_engines(sim_world *w)
{
    const sim_cfg *c = w->cfg;
    aftp_sender_settings ss;
    aftp_receiver_settings rs;
    sim_engine_settings(&ss, &w->res->snd_side, &rs, &w->res->rcv_side);
    ss.rate_bps = c->rate_bps;
    ss.policy = c->policy;
    ss.max_datagram = c->max_datagram;
    ss.idle_timeout_ns = c->idle_timeout_ns;
    rs.max_datagram = c->max_datagram;
    rs.idle_timeout_ns = c->idle_timeout_ns;
    ss.security.cipher = rs.security.cipher = c->cipher;
    ss.security.key_update_packets = rs.security.key_update_packets = c->key_update_packets;
    if (c->tune != NULL)
        c->tune(c->tune_ctx, &ss, &rs);
    if (aftp_sender_new(&ss, 0, &w->snd) != AFTP_OK || aftp_receiver_new(&rs, 0, &w->rcv) != AFTP_OK)
        abort();
    if (c->refill != NULL)
        return; /* refill() adds them as the run goes */
    for (int i = 0; c->feed == NULL && i < c->nfiles; i++) {
        char path[32];
        snprintf(path, sizeof path, "dir/file-%d.bin", i + 1);
        aftp_file_info info = {.file_id = (uint32_t)i + 1, .size = c->file_size,
                               .mode = 0644, .block_size = c->block_size, .path = path};
        if (aftp_sender_add_file(w->snd, &info) != AFTP_OK)
            abort();
    }
    if (c->feed != NULL)
        c->feed(c->feed_ctx, &w->res->st, w->snd);
    aftp_sender_finish(w->snd);
    w->all_fed = 1;
}

static void collect(sim_world *w, uint64_t now)
{
    sim_result *r = w->res;
    r->end_ns = now;
    r->snd_state = aftp_sender_state(w->snd);
    r->rcv_state = aftp_receiver_state(w->rcv);
    r->snd_error = aftp_sender_error(w->snd);
    r->rcv_error = aftp_receiver_error(w->rcv);
    aftp_sender_get_stats(w->snd, &r->snd);
    aftp_receiver_get_stats(w->rcv, &r->rcv);
    r->fwd_data_lost = w->fwd.data_payload_lost;
    r->fwd_duplicated = w->fwd.duplicated;
}

void sim_run(const sim_cfg *cfg, sim_result *out)
{
    memset(out, 0, sizeof *out);
    sim_storage_init(&out->st, cfg->nfiles, cfg->file_size, cfg->seed);
    out->st.open_error = cfg->open_error;
    out->st.corrupt_offset = cfg->corrupt_offset;
    out->snd_side = (sim_side){.st = &out->st, .clock = &out->clock};
    out->rcv_side = (sim_side){.st = &out->st, .clock = &out->clock};
    sim_world w = {.cfg = cfg, .res = out};
    sim_link_init(&w.fwd, &cfg->fwd, cfg->seed * 2 + 1);
    sim_link_init(&w.rev, &cfg->rev, cfg->seed * 2 + 2);
    w.sbuf = malloc(cfg->max_datagram);
    w.rbuf = malloc(cfg->max_datagram);
    make_engines(&w);

    uint64_t now = 0, last = 0;
    unsigned same_time = 0;
    for (;;) {
        out->clock = now;
        deliver(&w, now);
        run_timers_and_output(&w, now);
        if (finished(&w, now))
            break;
        uint64_t next = next_event(&w, now);
        if (next == AFTP_NO_EXPIRY || next > cfg->time_limit_ns)
            break;
        now = next > now ? next : now;
        same_time = now == last ? same_time + 1 : 0;
        last = now;
        if (same_time > MAX_LOOPS_AT_ONE_TIME) {
            out->stuck = 1;
            break;
        }
    }
    collect(&w, now);
    aftp_sender_del(w.snd);
    aftp_receiver_del(w.rcv);
    sim_link_free(&w.fwd);
    sim_link_free(&w.rev);
    free(w.sbuf);
    free(w.rbuf);
}

void sim_result_free(sim_result *r)
{
    sim_storage_free(&r->st);
}

void sim_expect_clean_end(const sim_result *r)
{
    assert_false(r->stuck);
    if (r->snd_error != AFTP_OK || r->rcv_error != AFTP_OK)
        print_message("sender: %s; receiver: %s\n", r->snd_side.ev.message,
                      r->rcv_side.ev.message);
    assert_int_equal(r->snd_error, AFTP_OK);
    assert_int_equal(r->rcv_error, AFTP_OK);
}

void sim_report(const char *name, const sim_cfg *cfg, const sim_result *r)
{
    double sent = (double)r->snd.payload_bytes_sent;
    double retx = (double)r->snd.payload_bytes_retransmitted;
    double lost = (double)r->fwd_data_lost;
    double secs = (double)r->snd_side.ev.file_end_at / 1e9;
    printf("[sim] %-20s size=%llu files=%d loss=%.2f/%.2f: done=%.3fs closed=%.3fs retx/sent=%.4f "
           "retx/lost=%.3f goodput=%.1fMbit/s srtt=%.1fms dups=%llu dropped=%llu/%llu\n",
           name, (unsigned long long)cfg->file_size, cfg->nfiles, cfg->fwd.loss, cfg->rev.loss, secs,
           (double)r->end_ns / 1e9,
           sent > 0 ? retx / sent : 0.0, lost > 0 ? retx / lost : 0.0,
           secs > 0 ? (double)cfg->file_size * cfg->nfiles * 8 / secs / 1e6 : 0.0,
           (double)r->snd.srtt_ns / 1e6, (unsigned long long)r->rcv.duplicate_packets,
           (unsigned long long)r->snd.packets_dropped, (unsigned long long)r->rcv.packets_dropped);
}

void sim_emitted_record(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    sim_emitted *e = ctx;
    if (dg->head[1] == AFTP_WIRE_HELLO)
        return;
    if (e->count == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 4096;
        e->at = realloc(e->at, e->cap * sizeof *e->at);
        e->bytes = realloc(e->bytes, e->cap * sizeof *e->bytes);
        assert_non_null(e->at);
        assert_non_null(e->bytes);
    }
    e->at[e->count] = now;
    e->bytes[e->count++] = dg->head_len + dg->payload_len;
}

uint64_t sim_emitted_busiest(const sim_emitted *e, uint64_t window_ns, uint64_t from,
                             uint64_t to)
{
    uint64_t most = 0, sum = 0;
    size_t first = SIZE_MAX;
    for (size_t i = 0; i < e->count; i++) {
        if (e->at[i] < from || e->at[i] >= to)
            continue; /* the times only grow: those inside are one run */
        if (first == SIZE_MAX)
            first = i;
        sum += e->bytes[i];
        while (e->at[i] - e->at[first] >= window_ns)
            sum -= e->bytes[first++];
        if (sum > most)
            most = sum;
    }
    return most;
}

void sim_emitted_free(sim_emitted *e)
{
    free(e->at);
    free(e->bytes);
}

void sim_first_record(void *ctx, uint64_t now, const aftp_datagram *dg)
{
    sim_first *f = ctx;
    if (dg->head[1] == AFTP_WIRE_HELLO && !f->has_hello) {
        f->has_hello = 1;
        f->hello_at = now;
    }
    if (dg->head[1] == AFTP_WIRE_DATA && !f->has_data) {
        f->has_data = 1;
        f->data_at = now;
    }
}

int sim_remember_timestamp(void *user, const uint8_t *client_key, const uint8_t *ts)
{
    sim_ts_memory *m = user;
    (void)client_key;
    if (m->has && !aftp_hs_timestamp_after(ts, m->last))
        return AFTP_ERR_REPLAY;
    memcpy(m->last, ts, sizeof m->last);
    m->has = 1;
    return AFTP_OK;
}

void sim_tune_pull(aftp_sender_settings *s, aftp_receiver_settings *r, aftp_storage_ops *server_ops,
                   int (*pull_path)(void *user, uint32_t index, const char *path, unsigned flags),
                   uint32_t window, const aftp_pull_request *request)
{
    aftp_security_settings client = s->security;
    *server_ops = sim_sender_storage;
    server_ops->pull_path = pull_path;
    s->storage = server_ops;
    s->role = AFTP_ROLE_PULL;
    s->pipeline_window = window;
    s->security = r->security;
    r->security = client;
    r->role = AFTP_ROLE_PULL;
    r->pipeline_window = window;
    r->pull = *request;
}

void sim_cfg_wan(sim_cfg *c, uint64_t link_bps, uint64_t rtt_ms, double loss)
{
    sim_cfg_default(c);
    c->policy = AFTP_CC_FAIR;
    c->rate_bps = link_bps;
    c->fwd = (sim_link_cfg){.rate_bps = link_bps, .delay_ns = rtt_ms * SIM_MS / 2,
                            .queue_bytes = link_bps / 8 * rtt_ms / 1000, .loss = loss};
    c->rev = (sim_link_cfg){.delay_ns = rtt_ms * SIM_MS / 2};
    c->time_limit_ns = 600 * SIM_S;
}

size_t sim_hello_ext_at(const uint8_t *pkt, size_t len, uint16_t type)
{
    aftp_wire_packet p;
    if (len < 2 || pkt[1] != AFTP_WIRE_HELLO || aftp_wire_decode(pkt, len, &p) != AFTP_OK)
        return 0;
    for (size_t at = 0; at + 4 <= p.u.hello.ext_len;) {
        const uint8_t *tlv = p.u.hello.ext + at;
        uint16_t t = (uint16_t)(tlv[0] << 8 | tlv[1]), n = (uint16_t)(tlv[2] << 8 | tlv[3]);
        if (t == type)
            return (size_t)(tlv - pkt);
        at += 4u + n;
    }
    return 0;
}
