/*
 * The sender (client, push) state machine: handshake, one file at a time
 * (FILE_OFFER, DATA, FILE_DONE, FILE_RESULT), loss repair from FEEDBACK,
 * pacing, probe and idle timers, closing. Behaviour: spec/aftp-protocol.md
 * sections 9, 10 and 14; the section numbers below refer to it.
 *
 * Pipelined mode (section 9.14, when the HELLO_ACK carries PIPELINE): the
 * application's entries (sender/aftp_entryq) go out in ENTRIES batches
 * ahead of the data, common/aftp_stream checks the verdicts, and the
 * one-file machinery (sent log, repair queue, rate control, probes) runs
 * over the session stream, keyed by stream block; FILE_DONE and
 * FILE_RESULT are per entry.
 *
 * Pull (section 9.15, settings.role AFTP_ROLE_PULL): this sender is the
 * server. It answers the client's HELLO (common/aftp_hello_server), asks
 * storage about each path of the client's PULL_REQUEST, answers with the
 * PULL_REPLY (resent until the client confirms it), and from then on is
 * the pipelined sender above; its storage adds the entries.
 *
 * The tail (section 9.9.1): once every block went out, a repair gets a
 * second copy when capacity is idle (and the last FILE_DONE goes once
 * more), within a bound of 1/128 of the blocks: a lost tail repair would
 * cost the whole transfer another detection round.
 *
 * Protected sessions: message 1 of the handshake is built once at
 * aftp_sender_new and every HELLO (resends, the answer to a RETRY) carries
 * the same bytes; HELLO_ACK's message 2 authenticates the server and the
 * HELLO_ACK fields, then every packet is sealed. DATA is sealed straight
 * from the storage view into the caller's buffer (one copy, the
 * encryption itself).
 */
#include "aftp/aftp_engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aftp_cc.h"
#include "common/aftp_digest.h"
#include "common/aftp_errmap.h"
#include "common/aftp_handshake.h"
#include "common/aftp_hello_client.h"
#include "common/aftp_hello_server.h"
#include "common/aftp_pacer.h"
#include "common/aftp_rtt.h"
#include "common/aftp_sentlog.h"
#include "common/aftp_session.h"
#include "common/aftp_stream.h"
#include "proto/aftp_wire.h"
#include "sender/aftp_entryq.h"
#include "sender/aftp_repairq.h"

#define NS_PER_MS UINT64_C(1000000)
#define DEFAULT_RATE_BPS UINT64_C(1000000000)
#define DEFAULT_IDLE_NS (UINT64_C(30000) * NS_PER_MS)
#define DEFAULT_INITIAL_RTT_NS (100 * NS_PER_MS)
#define REORDER_PACKETS 3                 /* section 10.3: packet threshold of controls */
#define LOSS_RTT_SAMPLES 32               /* section 10.3: a run of the loss threshold's RTT */
#define BURST_DATAGRAMS 4                 /* section 13.1: bucket depth floor */
/* The sent log covers this much time at the pacing rate (or 4 initial
 * RTTs, whichever is longer); older packets are long decided. */
#define SENTLOG_HORIZON_NS (1000 * NS_PER_MS)
/* An adaptive policy may find a path this fast unless max_rate_bps says
 * less: the sent log is sized for it. */
#define ADAPTIVE_CEILING_BPS UINT64_C(10000000000)
/* Section 9.9 repair bound: the resends a receiver may ask for in one file,
 * per block sent for the first time so far, plus a slack for small files.
 * Random loss p costs p/(1-p) resends per block on average: 1 at 50%, and
 * 8 only at 89%, so a real path stays far below while a receiver that
 * keeps listing held blocks missing is cut off. */
#define REPAIR_BOUND_PER_BLOCK 8
/* Held blocks of a resumed file read for its digest per call into the
 * engine: a file resumed after gigabytes is hashed a step at a time, so
 * packets are still read and sent meanwhile. */
#define HASH_STEP_BLOCKS 1024
#define REPAIR_BOUND_SLACK 256
/* Section 9.9.1 tail copies: at most one per TAIL_COPY_SHARE blocks sent
 * for the first time (0.8 points of retransmitted share), and at most
 * TAIL_DUPS tail repairs waiting for their second copy (a round trip's
 * losses at 1 Gbit/s, 150 ms and 8%). */
#define TAIL_COPY_SHARE 128
#define TAIL_DUPS 1024

enum file_phase {
    PHASE_IDLE,        /* no file active (between files, or none queued) */
    PHASE_OFFER,       /* FILE_OFFER sent, waiting for FILE_REPLY */
    PHASE_DATA,        /* first transmissions in progress */
    PHASE_WAIT_RESULT  /* every block sent once, FILE_DONE out, repairs go on */
};

/* Where the server of a pull is (section 9.15.3). */
enum pull_phase {
    PULL_NONE,      /* a push: this sender is the client */
    PULL_WAITING,   /* no PULL_REQUEST yet */
    PULL_REPLIED,   /* PULL_REPLY sent, the client has not confirmed it */
    PULL_CONFIRMED  /* the client has the reply: entries run to the end */
};

/* Which protocol the session runs (spec 9.14): known at HELLO_ACK. */
enum session_mode {
    MODE_UNKNOWN,   /* handshake: the receiver has not said */
    MODE_ONE_FILE,  /* sections 9.4-9.10: one FILE_OFFER at a time */
    MODE_PIPELINED  /* section 9.14: ENTRIES, VERDICTS, one stream */
};

typedef struct sender_file {
    aftp_file_info info; /* info.path points at path */
    char *path;
} sender_file;

struct aftp_sender {
    aftp_session ss;
    aftp_sender_settings set;
    aftp_rtt rtt;
    aftp_pacer pacer;
    aftp_cc cc;
    aftp_sentlog log;
    aftp_repairq repairs;
    aftp_digest *hash;

    sender_file *files;
    size_t file_count, file_cap, cur; /* files[cur] is active or next */
    int finished;                     /* aftp_sender_finish() was called */

    int phase;
    uint64_t block_count;
    uint64_t next_block;   /* next block to send for the first time */
    uint64_t acked_cum;    /* every block below is held by the peer */
    uint64_t resends_asked; /* blocks of this file declared lost (section 9.9) */
    uint64_t data_declared_lost; /* DATA transmissions of the session declared lost */
    uint64_t data_settled;       /* ...plus those received, at the latest FEEDBACK */
    uint8_t digest[AFTP_DIGEST_LEN];

    int hello_due, offer_due, done_due, probe_due;

    /* Control / probe timer (sections 10.2, 10.4) with exponential backoff. */
    uint64_t timer_deadline;
    unsigned backoff;

    uint64_t emitted_block; /* block of the datagram being built, or none */

    int has_acked;
    uint64_t largest_acked;
    /* The RTT the loss threshold scales (section 10.3): the largest sample
     * of the latest two runs of LOSS_RTT_SAMPLES. */
    uint64_t loss_rtt_ns[2];
    unsigned loss_rtt_count; /* samples in loss_rtt_ns[1], the current run */
    int has_feedback;
    uint64_t last_feedback_pn;
    /* The peer's packets (section 10.1): the highest number received, and
     * how many of the peer's packets the latest one overtook. */
    int has_peer_pn;
    uint64_t peer_pn_newest;
    uint64_t peer_pn_overtook;

    aftp_hello_client hello; /* push: the handshake as the client (section 9.3) */
    aftp_hello_server srv;   /* pull: the handshake as the server */
    int pull;               /* enum pull_phase */
    aftp_wire_pull_reply reply;
    int reply_due;
    uint64_t reply_deadline; /* its resend while unconfirmed */
    unsigned reply_backoff;
    aftp_wire_pull_request early_request; /* message 1's request (12.3.4), paths in srv */
    int early_request_due;  /* to be decided at the engine's next timer */
    uint64_t rate_cap_bps;  /* the receiver's cap (RATE_CAP), 0: none */
    uint64_t cap_seq;       /* the newest RATE_UPDATE applied (6.18); RATE_CAP is 0 */
    uint64_t client_max_bps; /* pull: the request's max_rate, 0: none */
    /* Section 9.15.5: PULL_END, when the client announced it (srv.pull_end). */
    int end_due;            /* a copy is to leave */
    int end_sent;           /* the first copy left: the client may quick-close */

    /* Pipelined mode (section 9.14). The application's entries wait in
     * `entries` (pipeline_window of them at most); `stream` applies the
     * verdict rules over the negotiated window W. First transmissions walk
     * the stream with next_block, inside entry cursor_entry. */
    int mode;               /* enum session_mode */
    uint32_t last_entry_id; /* the newest id the application gave */
    aftp_entryq entries;
    aftp_stream stream;
    aftp_wire_entry *records;  /* scratch for one ENTRIES */
    uint64_t offered_end;   /* stream end of the newest entry offered */
    uint32_t cursor_entry;  /* the entry next_block lies in */
    int cursor_started;     /* its digest has begun */
    int cursor_ready;       /* next_block is a block to send for the first time */
    int cursor_busy;        /* held blocks remain to hash before it can move on */
    uint32_t view_failed;   /* the entry whose storage view just failed; 0: none */
    uint32_t resend_from;   /* a round of ENTRIES resends: next id to look at; 0: none */
    /* The control timer of pipelined mode: each ENTRIES and FILE_DONE is
     * resent one PTO after it left unanswered, however much else the
     * receiver answers meanwhile (FEEDBACK and other verdicts keep coming). */
    uint64_t ctl_deadline;
    uint64_t resend_before; /* this round resends what left at or before this */
    unsigned ctl_backoff;
    int ctl_answered;       /* a verdict or FILE_RESULT came since the last expiry */
    uint64_t first_sent;    /* first transmissions (the repair bound's `sent`) */
    uint64_t last_new_block; /* the latest block sent for the first time */
    uint64_t hello_sent_ns; /* the first HELLO... */
    unsigned hello_sends;   /* ...and how many: one gives the handshake's RTT */
    uint32_t early_count;   /* entries 1..early_count rode in message 1 (section 12.3.4) */
    /* Section 9.9.1, the tail: once every block went out, idle capacity
     * carries second copies of the tail's repairs (tail_dups). */
    int tail_ready;         /* a second copy is due */
    int tail_done_copied;   /* the FILE_DONE went again with the tail's first repair */
    uint64_t tail_copies;   /* copies sent, against the TAIL_COPY_SHARE bound */
    aftp_repairq tail_dups;
};

#define ENTRIES_LEAD_RTTS 4.0 /* new data before ENTRIES while this much is offered ahead */

/* ---- settings and lifetime ---- */

void aftp_sender_settings_default(aftp_sender_settings *s)
{
    memset(s, 0, sizeof *s);
    s->rate_bps = DEFAULT_RATE_BPS;
    s->max_datagram = 1452;
    s->idle_timeout_ns = DEFAULT_IDLE_NS;
    s->initial_rtt_ns = DEFAULT_INITIAL_RTT_NS;
    s->policy = AFTP_CC_FAIR;
}

static int settings_valid(const aftp_sender_settings *s)
{
    return s != NULL && s->conn_id != 0 && s->rate_bps > 0 &&
           s->max_datagram >= AFTP_WIRE_MIN_DATAGRAM && s->max_datagram <= AFTP_WIRE_MAX_DATAGRAM &&
           s->idle_timeout_ns > 0 && s->initial_rtt_ns > 0 && s->storage != NULL &&
           s->storage->view != NULL && s->storage->close != NULL && s->policy >= AFTP_CC_FAIR &&
           s->policy <= AFTP_CC_LOW &&
           (s->max_rate_bps == 0 || s->max_rate_bps >= s->min_rate_bps) &&
           s->pipeline_window <= AFTP_WIRE_MAX_WINDOW &&
           (s->role == AFTP_ROLE_PUSH ||
            (s->role == AFTP_ROLE_PULL && s->pipeline_window > 0 && s->storage->pull_path != NULL));
}

/* The fastest the sender may pace: the rate itself when fixed. */
static uint64_t peak_rate(const aftp_sender_settings *s)
{
    if (s->policy == AFTP_CC_FIXED)
        return s->rate_bps;
    if (s->max_rate_bps != 0)
        return s->max_rate_bps;
    return s->rate_bps > ADAPTIVE_CEILING_BPS ? s->rate_bps : ADAPTIVE_CEILING_BPS;
}

/* Packets the sent log must remember: the horizon's worth at the rate. */
static uint64_t sentlog_packets(const aftp_sender_settings *s)
{
    uint64_t horizon = 4 * s->initial_rtt_ns;
    if (horizon < SENTLOG_HORIZON_NS)
        horizon = SENTLOG_HORIZON_NS;
    uint64_t bytes_per_s = peak_rate(s) / 8;
    return bytes_per_s / s->max_datagram * (horizon / NS_PER_MS) / 1000 + 1;
}

/* The rate controller never lets more packets fly than the sent log can
 * remember (half of it: the rest holds those reported but undecided). */
static void init_controller(aftp_sender *s, uint64_t now_ns)
{
    const aftp_sender_settings *set = &s->set;
    aftp_cc_config cfg = {.policy = set->policy, .rate_bps = set->rate_bps,
                          .min_rate_bps = set->min_rate_bps, .max_rate_bps = set->max_rate_bps,
                          .initial_rtt_ns = set->initial_rtt_ns,
                          .max_inflight = aftp_sentlog_slots(&s->log) / 2, .seed = set->conn_id,
                          .resume_rate_bps = set->resume_rate_bps,
                          .resume_rtt_ns = set->resume_rtt_ns};
    aftp_cc_init(&s->cc, &cfg, now_ns);
}

/* The pacer follows the controller's rate and the session's datagram size
 * (a changed value only: setting either costs a division). The bucket's
 * depth is at least 4 of the session's datagrams (section 13.1): the
 * handshake may lower it from this end's own maximum, and a server's own
 * may be a jumbo frame's, whose 4 hold 25 of a 1500-byte path's. */
static void sync_pacer(aftp_sender *s)
{
    uint32_t burst = (uint32_t)s->ss.max_datagram * BURST_DATAGRAMS;
    if (burst != s->pacer.burst_bytes)
        aftp_pacer_set_burst(&s->pacer, burst);
    if (aftp_cc_rate(&s->cc) != aftp_pacer_rate(&s->pacer))
        aftp_pacer_set_rate(&s->pacer, aftp_cc_rate(&s->cc));
}

/* Keys were copied into the handshake: the engine keeps no pointer. */
static void forget_key_pointers(aftp_security_settings *sec)
{
    sec->identity = NULL;
    sec->peer_key = NULL;
    sec->psk = NULL;
}

int aftp_sender_new(const aftp_sender_settings *settings, uint64_t now_ns, aftp_sender **out)
{
    if (!settings_valid(settings) || out == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = aftp_session_check_security(&settings->security, settings->role == AFTP_ROLE_PUSH);
    if (rc != AFTP_OK)
        return rc;
    aftp_sender *s = calloc(1, sizeof *s);
    if (s == NULL)
        return AFTP_ERR_NO_MEMORY;
    s->set = *settings;
    rc = aftp_session_init(&s->ss, settings->conn_id, settings->max_datagram,
                           settings->idle_timeout_ns, settings->on_event, settings->user, now_ns);
    aftp_rtt_init(&s->rtt, settings->initial_rtt_ns);
    s->ss.peer_role = "receiver";
    s->pull = settings->role == AFTP_ROLE_PULL ? PULL_WAITING : PULL_NONE;
    if (rc == AFTP_OK && s->pull != PULL_NONE)
        rc = aftp_hello_server_init(&s->srv, &s->set.security, AFTP_WIRE_ROLE_PULL,
                                    settings->pipeline_window);
    else if (rc == AFTP_OK)
        rc = aftp_hello_client_init(&s->hello, &s->ss, &settings->security, AFTP_WIRE_ROLE_PUSH,
                                    settings->pipeline_window);
    forget_key_pointers(&s->set.security);
    uint64_t packets = sentlog_packets(settings);
    if (rc == AFTP_OK)
        rc = aftp_sentlog_init(&s->log, packets);
    init_controller(s, now_ns);
    aftp_pacer_init(&s->pacer, aftp_cc_rate(&s->cc),
                    (uint32_t)settings->max_datagram * BURST_DATAGRAMS, now_ns);
    if (rc == AFTP_OK)
        rc = aftp_repairq_init(&s->repairs, aftp_sentlog_slots(&s->log));
    if (rc == AFTP_OK)
        rc = aftp_repairq_init(&s->tail_dups, TAIL_DUPS);
    if (rc == AFTP_OK)
        rc = aftp_digest_new(&s->hash);
    s->mode = settings->pipeline_window > 0 ? MODE_UNKNOWN : MODE_ONE_FILE;
    if (rc == AFTP_OK && settings->pipeline_window > 0)
        rc = aftp_entryq_init(&s->entries, settings->pipeline_window);
    if (rc != AFTP_OK) {
        aftp_sender_del(s);
        return rc;
    }
    /* Section 9.3: HELLO leaves at once and on the control timer after that.
     * HELLO carries the client's own id (the server has none yet). The
     * server of a pull waits for the client's HELLO instead. */
    s->ss.peer_id = s->pull == PULL_NONE ? settings->conn_id : 0;
    s->hello_due = s->pull == PULL_NONE;
    s->timer_deadline = AFTP_NO_EXPIRY;
    s->reply_deadline = AFTP_NO_EXPIRY;
    *out = s;
    return AFTP_OK;
}

void aftp_sender_del(aftp_sender *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->file_count; i++)
        free(s->files[i].path);
    free(s->files);
    aftp_entryq_free(&s->entries);
    aftp_stream_free(&s->stream);
    free(s->records);
    aftp_sentlog_free(&s->log);
    aftp_repairq_free(&s->repairs);
    aftp_repairq_free(&s->tail_dups);
    aftp_digest_del(s->hash);
    aftp_hello_client_free(&s->hello);
    aftp_hello_server_free(&s->srv);
    aftp_session_free(&s->ss);
    free(s);
}

/* ---- timers ---- */

/* Section 10.2: PTO, doubled per expiry without an answer, capped at 2 s. */
static void arm_timer(aftp_sender *s)
{
    s->timer_deadline = s->ss.now_ns + aftp_rtt_pto_backoff(&s->rtt, s->backoff);
}

/* The peer answered what we were waiting for: the backoff starts over. */
static void progress(aftp_sender *s)
{
    s->backoff = 0;
    arm_timer(s);
}

static uint64_t drain_time(const aftp_sender *s)
{
    return 3 * aftp_rtt_pto(&s->rtt);
}

/* ---- files ---- */

static sender_file *current_file(aftp_sender *s)
{
    return s->cur < s->file_count ? &s->files[s->cur] : NULL;
}

static int file_active(const aftp_sender *s)
{
    return s->phase != PHASE_IDLE;
}

/* Ends the active file: FILE_END, storage released, next file selected.
 * message (or NULL) says why a failed file failed, during the callback. */
static void end_file(aftp_sender *s, int error, const uint8_t *digest, const char *message)
{
    sender_file *f = current_file(s);
    s->phase = PHASE_IDLE;
    s->offer_due = s->done_due = s->probe_due = 0;
    s->timer_deadline = AFTP_NO_EXPIRY;
    s->cur++;
    s->set.storage->close(s->set.user, f->info.file_id, error == AFTP_OK);
    if (s->ss.on_event == NULL)
        return;
    aftp_event ev = {.type = AFTP_EV_FILE_END, .error = error, .info = &f->info,
                     .digest = digest, .message = message};
    s->ss.on_event(s->ss.user, &ev);
}

static void end_all_entries(aftp_sender *s, int error, const char *message);
static void early_entries_taken(aftp_sender *s);
static int take_entry(aftp_sender *s, uint32_t id, int resend, size_t room, aftp_wire_entry *rec);
static void arm_control_timer(aftp_sender *s);
static int first_transmissions_over(const aftp_sender *s);
static uint32_t next_offered(aftp_sender *s, uint32_t from);

/* The session ends abruptly (idle, peer's CLOSE, version): the active file
 * (or every live entry) ends with the same error, then CLOSED. */
static void close_now(aftp_sender *s, int error)
{
    if (file_active(s))
        end_file(s, error, NULL, NULL);
    end_all_entries(s, error, NULL);
    aftp_session_set_closed(&s->ss, error);
}

/* End the active file (if any) with `error` and close the session with
 * CLOSE(error) (section 9.6: in version 1 a refused file ends the session). */
static void fail_and_close(aftp_sender *s, int error)
{
    if (file_active(s))
        end_file(s, error, NULL, NULL);
    end_all_entries(s, error, NULL);
    aftp_session_start_closing(&s->ss, error, aftp_errmap_to_wire(error), drain_time(s));
}

/* The same for a failure this side detected in the receiver's conduct:
 * `why` is the file's message, the session's, and the CLOSE reason. */
static void fail_and_close_saying(aftp_sender *s, int error, const char *why)
{
    aftp_session_set_text(&s->ss, why);
    if (file_active(s))
        end_file(s, error, s->phase == PHASE_WAIT_RESULT ? s->digest : NULL, why);
    end_all_entries(s, error, why);
    aftp_session_start_closing(&s->ss, error, aftp_errmap_to_wire(error), drain_time(s));
}

static uint32_t largest_block(const aftp_sender *s)
{
    return (uint32_t)(s->ss.max_datagram - AFTP_WIRE_DATA_OVERHEAD);
}

/* A block size the negotiated datagram cannot carry ends the session
 * (1, after saying why). */
static int block_size_too_large(aftp_sender *s, uint32_t block_size)
{
    char why[160];
    if (block_size <= largest_block(s))
        return 0;
    snprintf(why, sizeof why, "blocks of %" PRIu32 " bytes need %" PRIu32 "-byte datagrams, "
             "above this session's limit of %u bytes", block_size,
             block_size + AFTP_WIRE_DATA_OVERHEAD, (unsigned)s->ss.max_datagram);
    fail_and_close_saying(s, AFTP_ERR_LIMIT, why);
    return 1;
}

/* Section 9.11: the quick close's copies for the loss this session
 * showed (DATA declared lost per block sent, or the controller's baseline
 * when larger). */
static unsigned quick_close_copies(const aftp_sender *s)
{
    double seen = s->first_sent ? (double)s->data_declared_lost / (double)s->first_sent : 0.0;
    return aftp_session_quick_close_copies(s->cc.base_loss > seen ? s->cc.base_loss : seen);
}

/* Every file has its result: the client of a push closes quickly, as it
 * needs no answer (section 9.11); the server of a pull stays in its
 * closing period to answer a client that missed the CLOSE. */
static void close_done(aftp_sender *s)
{
    if (s->pull == PULL_NONE)
        aftp_session_close_done(&s->ss, quick_close_copies(s));
    else
        aftp_session_start_closing(&s->ss, AFTP_OK, AFTP_WIRE_ERR_NONE, drain_time(s));
}

/* Offers the next queued file, or closes after the last one (section 9.10). */
static void start_next_file(aftp_sender *s)
{
    sender_file *f = current_file(s);
    if (s->mode == MODE_PIPELINED) {
        /* Section 9.14.3: CLOSE(NONE) once every entry ended; in a pull
         * not before the client has its PULL_REPLY (9.15.3). */
        if (s->ss.state == AFTP_STATE_TRANSFER && s->finished &&
            s->entries.oldest > s->entries.newest &&
            (s->pull == PULL_NONE || s->pull == PULL_CONFIRMED))
            close_done(s);
        return;
    }
    if (s->ss.state != AFTP_STATE_TRANSFER || file_active(s))
        return;
    if (f == NULL) {
        if (s->finished)
            close_done(s);
        return;
    }
    /* Block size 0 means "as large as the negotiated datagram allows". */
    if (f->info.block_size == 0)
        f->info.block_size = largest_block(s);
    s->phase = PHASE_OFFER;
    if (block_size_too_large(s, f->info.block_size))
        return;
    s->offer_due = 1;
    s->backoff = 0;
    arm_timer(s);
}

static int info_valid(const aftp_sender *s, const aftp_file_info *info)
{
    if (info == NULL || info->path == NULL || info->file_id == 0)
        return 0;
    size_t path_len = strnlen(info->path, AFTP_WIRE_MAX_PATH + 1);
    if (path_len == 0 || path_len > AFTP_WIRE_MAX_PATH)
        return 0;
    if (info->size > AFTP_WIRE_MAX_FILE_SIZE || info->mode > 07777)
        return 0;
    if (info->block_size != 0 && (info->block_size < AFTP_WIRE_MIN_BLOCK ||
                                  info->block_size > s->set.max_datagram - AFTP_WIRE_DATA_OVERHEAD))
        return 0;
    /* Ids grow so the receiver can tell a late duplicate from a new file. */
    return s->file_count == 0 || info->file_id > s->files[s->file_count - 1].info.file_id;
}

static int accepts_more(const aftp_sender *s)
{
    return !s->finished && s->ss.state != AFTP_STATE_CLOSING && s->ss.state != AFTP_STATE_CLOSED;
}

/* One-file mode's queue (unbounded: add_file's contract). */
static int queue_file(aftp_sender *s, const aftp_file_info *info)
{
    if (s->file_count == s->file_cap) {
        size_t cap = s->file_cap ? 2 * s->file_cap : 8;
        sender_file *grown = realloc(s->files, cap * sizeof *grown);
        if (grown == NULL)
            return AFTP_ERR_NO_MEMORY;
        s->files = grown;
        s->file_cap = cap;
    }
    sender_file *f = &s->files[s->file_count];
    f->path = strdup(info->path);
    if (f->path == NULL)
        return AFTP_ERR_NO_MEMORY;
    f->info = *info;
    f->info.path = f->path;
    s->file_count++;
    s->last_entry_id = info->file_id;
    start_next_file(s);
    return AFTP_OK;
}

int aftp_sender_add_file(aftp_sender *s, const aftp_file_info *info)
{
    if (s == NULL || !info_valid(s, info))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (!accepts_more(s))
        return AFTP_ERR_INVALID_STATE;
    if (s->mode != MODE_ONE_FILE) {
        /* A session that may be pipelined numbers files as entries. */
        aftp_entry_info entry = {.file = *info, .kind = AFTP_ENTRY_FILE};
        return aftp_sender_add_entry(s, &entry);
    }
    return queue_file(s, info);
}

/* Section 9.15.5: the server of a pull whose client announced PULL_END
 * tells it once its walk is over and every entry is in the stream. */
static int pull_end_known(const aftp_sender *s)
{
    return s->pull == PULL_CONFIRMED && s->srv.pull_end && s->finished &&
           s->stream.newest == s->last_entry_id;
}

/* PULL_END goes once when known, and again after each ENTRIES, FILE_DONE
 * or ABANDON that leaves once no first transmission remains: the stream's
 * last control packets, repeated on its control timer, carry it again. */
static void pull_end_check(aftp_sender *s, int after_control)
{
    if (pull_end_known(s) && (!s->end_sent || (after_control && first_transmissions_over(s))))
        s->end_due = 1;
}

void aftp_sender_finish(aftp_sender *s)
{
    if (s == NULL)
        return;
    s->finished = 1;
    start_next_file(s);
    pull_end_check(s, 0);
}

/* ---- entries (pipelined mode, section 9.14) ---- */

/* A FILE's holes: at most AFTP_ENTRY_MAX_HOLES byte extents, non-empty,
 * ascending, disjoint, inside the file. */
static int holes_valid(const aftp_entry_info *e)
{
    uint64_t next = 0;
    if (e->hole_count > AFTP_ENTRY_MAX_HOLES || (e->hole_count > 0 && e->holes == NULL))
        return 0;
    for (size_t i = 0; i < e->hole_count; i++) {
        const aftp_byte_range *h = &e->holes[i];
        if (h->len == 0 || h->off < next || h->off > e->file.size ||
            h->len > e->file.size - h->off)
            return 0;
        next = h->off + h->len;
    }
    return 1;
}

/* The kinds' own rules on top of add_file's (spec 6.13). */
static int entry_valid(const aftp_sender *s, const aftp_entry_info *e)
{
    if (!info_valid(s, &e->file))
        return 0;
    if (e->kind == AFTP_ENTRY_FILE)
        return e->target == NULL && holes_valid(e);
    if (e->hole_count != 0)
        return 0;
    if (e->kind != AFTP_ENTRY_DIR && e->kind != AFTP_ENTRY_SYMLINK)
        return 0;
    if (e->file.size != 0 || e->file.block_size != 0)
        return 0;
    if (e->kind == AFTP_ENTRY_DIR)
        return e->target == NULL;
    size_t target_len = e->target ? strnlen(e->target, AFTP_WIRE_MAX_PATH + 1) : 0;
    return target_len > 0 && target_len <= AFTP_WIRE_MAX_PATH;
}

/* The bytes of a file's blocks that RESUME listed held (the last block
 * may be short). */
static uint64_t held_bytes(const aftp_entryq_item *e)
{
    uint32_t bs = e->info.file.block_size;
    uint64_t bytes = e->held_blocks * bs;
    if (e->blocks > 0 && aftp_entryq_resumed(e, e->blocks - 1))
        bytes -= bs - aftp_wire_block_len(e->info.file.size, bs, e->blocks - 1);
    return bytes;
}

static void entry_event(aftp_sender *s, const aftp_entryq_item *e, int type, int error,
                        const uint8_t *digest, const char *message)
{
    if (s->ss.on_event == NULL)
        return;
    aftp_event ev = {.type = type, .error = error, .info = &e->info.file, .digest = digest,
                     .message = message, .verdict = e->verdict,
                     .held_bytes = e->state == AFTP_ENTRYQ_QUEUED ? 0 : held_bytes(e)};
    s->ss.on_event(s->ss.user, &ev);
}

/* Entry e ends with `error`: its source is released, FILE_END for a file
 * that was being sent, then ENTRY_END; its slot is freed after the events
 * (so the application adds more once the callback has returned). */
static void end_entry(aftp_sender *s, aftp_entryq_item *e, int error, const uint8_t *digest,
                      const char *message)
{
    uint32_t id = e->info.file.file_id;
    int was_sending = e->state == AFTP_ENTRYQ_SENDING || e->state == AFTP_ENTRYQ_DONE_SENT;
    int reported = e->state == AFTP_ENTRYQ_ABANDONED; /* source released, events sent */
    if (e->state == AFTP_ENTRYQ_QUEUED || e->state == AFTP_ENTRYQ_OFFERED)
        e->verdict = AFTP_WIRE_VERDICT_REFUSED; /* ended before the receiver decided */
    if (e->done_due)
        s->done_due--;
    e->done_due = 0;
    aftp_stream_end(&s->stream, id, aftp_errmap_to_wire(error));
    if (e->info.kind == AFTP_ENTRY_FILE && !reported)
        s->set.storage->close(s->set.user, id, error == AFTP_OK);
    if (was_sending)
        entry_event(s, e, AFTP_EV_FILE_END, error, digest, message);
    if (!reported)
        entry_event(s, e, AFTP_EV_ENTRY_END, error, digest, message);
    aftp_entryq_end(&s->entries, id);
}

/* The session ends: every entry still live ends with its error. */
static void end_all_entries(aftp_sender *s, int error, const char *message)
{
    for (uint32_t id = s->entries.oldest; id != 0 && id <= s->entries.newest; id++) {
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e != NULL && e->state != AFTP_ENTRYQ_ENDED)
            end_entry(s, e, error, NULL, message);
    }
}

/* No PIPELINE in the HELLO_ACK: the entries queued so far go the one-file
 * way; a DIR or SYMLINK cannot, and ends at once. */
static const char no_pipeline_text[] =
    "the receiver does not run pipelined mode (no PIPELINE in its HELLO_ACK): directories and "
    "symbolic links cannot be sent to it";

static void refuse_unsent(aftp_sender *s, aftp_entryq_item *e)
{
    e->verdict = AFTP_WIRE_VERDICT_REFUSED;
    entry_event(s, e, AFTP_EV_ENTRY_END, AFTP_ERR_PEER_REFUSED, NULL, no_pipeline_text);
}

static void fall_back_to_one_file(aftp_sender *s)
{
    s->mode = MODE_ONE_FILE;
    for (uint32_t id = s->entries.oldest; id <= s->entries.newest; id++) {
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e->info.kind == AFTP_ENTRY_FILE)
            queue_file(s, &e->info.file);
        else
            refuse_unsent(s, e);
    }
    aftp_entryq_free(&s->entries);
}

int aftp_sender_add_entry(aftp_sender *s, const aftp_entry_info *info)
{
    if (s == NULL || info == NULL || !entry_valid(s, info))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (!accepts_more(s))
        return AFTP_ERR_INVALID_STATE;
    if (s->mode == MODE_ONE_FILE) {
        if (info->kind == AFTP_ENTRY_FILE)
            return queue_file(s, &info->file);
        return AFTP_ERR_PEER_REFUSED;
    }
    /* Section 9.14.1: ids 1, 2, 3 ... in the order offered. */
    if (info->file.file_id != s->last_entry_id + 1)
        return AFTP_ERR_INVALID_ARGUMENT;
    int rc = aftp_entryq_add(&s->entries, info);
    if (rc == AFTP_OK)
        s->last_entry_id = info->file.file_id;
    return rc;
}

/* ---- input ---- */

static void on_version_neg(aftp_sender *s, const aftp_wire_version_neg *v)
{
    if (s->ss.state == AFTP_STATE_HANDSHAKE && aftp_hello_client_version_refused(v))
        close_now(s, AFTP_ERR_VERSION); /* section 12.2 */
}

/* The fastest this sender may pace: its user's maximum, lowered to the
 * receiver's cap (0: no limit). */
static uint64_t effective_max_rate(const aftp_sender *s)
{
    uint64_t own = s->set.max_rate_bps, cap = s->rate_cap_bps;
    if (cap == 0 || (own != 0 && own < cap))
        return own;
    return cap;
}

/* Section 13.2: the receiver's cap binds every policy, fixed rates and
 * minimum rates included (the controller's maximum wins over both). */
static void obey_rate_cap(aftp_sender *s, uint64_t cap_bps)
{
    s->rate_cap_bps = cap_bps;
    aftp_cc_set_limits(&s->cc, s->set.min_rate_bps, effective_max_rate(s));
    sync_pacer(s);
}

/* Section 12.3.2: the session is pipelined exactly when the HELLO_ACK
 * (checked by pipeline_broken) carries PIPELINE. The repair queue then
 * holds stream blocks, whatever entry they belong to. */
static int choose_mode(aftp_sender *s, uint32_t window)
{
    if (s->mode == MODE_ONE_FILE)
        return AFTP_OK;
    if (window == 0) {
        fall_back_to_one_file(s);
        return AFTP_OK;
    }
    s->mode = MODE_PIPELINED;
    s->ctl_deadline = AFTP_NO_EXPIRY;
    s->records = calloc(AFTP_WIRE_MAX_ENTRIES, sizeof *s->records);
    if (s->records == NULL)
        return AFTP_ERR_NO_MEMORY;
    aftp_repairq_reset(&s->repairs, AFTP_WIRE_MAX_BLOCKS);
    aftp_repairq_reset(&s->tail_dups, AFTP_WIRE_MAX_BLOCKS);
    s->cursor_entry = 1;
    return aftp_stream_init(&s->stream, window);
}

/* Section 9.3 step 4. Protected: what cannot be the server's answer is
 * dropped before authentication (aftp_hello_client_ack), so a forged
 * HELLO_ACK costs the handshake nothing; an authenticated one that breaks
 * 6.3 ends the session. Unprotected, nothing is authenticated and the
 * checks of 6.3 end the session at once. */
static void on_hello_ack(aftp_sender *s, const aftp_wire_hello_ack *a)
{
    aftp_hello_grant grant;
    int violation = 0;
    if (s->ss.state != AFTP_STATE_HANDSHAKE) {
        aftp_session_drop(&s->ss);
        return;
    }
    int rc = aftp_hello_client_ack(&s->hello, &s->ss, a, &grant, &violation);
    if (rc == AFTP_HELLO_DROPPED)
        return;
    s->hello_due = 0;
    s->timer_deadline = AFTP_NO_EXPIRY;
    if (rc != AFTP_OK && violation) {
        aftp_session_start_closing(&s->ss, rc, AFTP_WIRE_ERR_PROTOCOL, drain_time(s));
        return;
    }
    if (rc != AFTP_OK) {
        close_now(s, rc); /* no keys, or no id: no CLOSE the server could trust */
        return;
    }
    obey_rate_cap(s, grant.rate_cap_bps);
    if (choose_mode(s, grant.window) != AFTP_OK) {
        close_now(s, AFTP_ERR_NO_MEMORY);
        return;
    }
    s->ss.state = AFTP_STATE_TRANSFER;
    if (grant.early_entries && s->mode == MODE_PIPELINED)
        early_entries_taken(s);
    if (s->hello_sends == 1) /* a resent HELLO's answer could be to either */
        aftp_cc_on_handshake_rtt(&s->cc, s->ss.now_ns - s->hello_sent_ns);
    aftp_session_event(&s->ss, AFTP_EV_CONNECTED, AFTP_OK, NULL, NULL);
    start_next_file(s);
}

static int is_current(aftp_sender *s, uint32_t file_id)
{
    sender_file *f = current_file(s);
    return file_active(s) && f != NULL && f->info.file_id == file_id;
}

/* After the first transmission of the last block, or at once for an empty
 * file: the digest is final and FILE_DONE is due (section 9.7). */
static void data_sent_once(aftp_sender *s)
{
    aftp_digest_final(s->hash, s->digest);
    s->phase = PHASE_WAIT_RESULT;
    s->done_due = 1;
    s->probe_due = 0;
}

static void on_file_reply(aftp_sender *s, const aftp_wire_file_reply *r)
{
    if (s->phase != PHASE_OFFER || !is_current(s, r->file_id)) {
        aftp_session_drop(&s->ss);
        return;
    }
    s->offer_due = 0;
    if (r->error != AFTP_WIRE_ERR_NONE) {
        fail_and_close(s, aftp_errmap_to_local(r->error));
        return;
    }
    sender_file *f = current_file(s);
    s->block_count = aftp_wire_block_count(f->info.size, f->info.block_size);
    aftp_repairq_reset(&s->repairs, s->block_count);
    aftp_repairq_reset(&s->tail_dups, s->block_count);
    s->tail_ready = s->tail_done_copied = 0;
    s->tail_copies = 0;
    /* Block numbers restart with every file: forget the previous file's. */
    aftp_sentlog_retire(&s->log, UINT64_MAX);
    s->next_block = 0;
    s->first_sent = 0;
    s->acked_cum = 0;
    s->resends_asked = 0;
    s->has_feedback = 0;
    aftp_digest_reset(s->hash);
    s->phase = PHASE_DATA;
    progress(s);
    aftp_session_event(&s->ss, AFTP_EV_FILE_START, AFTP_OK, &f->info, NULL);
    if (s->block_count == 0)
        data_sent_once(s);
}

/* The pipelined entry that holds stream block b, when b may still be
 * sent: its FILE is being sent and the receiver has not said it holds b
 * (section 9.14.2: nothing is sent for a held block). */
static aftp_entryq_item *sendable_entry(aftp_sender *s, uint64_t b)
{
    const aftp_stream_entry *se = aftp_stream_locate(&s->stream, b);
    if (se == NULL || se->state != AFTP_STREAM_ACCEPTED)
        return NULL;
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, se->id);
    return e != NULL && e->state != AFTP_ENTRYQ_ABANDONED && !aftp_entryq_is_held(e, b - e->base)
               ? e
               : NULL;
}

static int repairable(aftp_sender *s, uint64_t b)
{
    return s->mode != MODE_PIPELINED || sendable_entry(s, b) != NULL;
}

/* Section 10.3: the RTT the loss threshold scales is the largest sample
 * of the latest LOSS_RTT_SAMPLES to twice as many. A packet that skipped
 * the path's delay (reordering) gives a sample of about the one-way delay,
 * and while the sender sends in bursts such samples come in runs: smoothed
 * in, they shrank the threshold below the round trip of the packets they
 * overtook, which were then all declared lost. */
static void track_loss_rtt(aftp_sender *s, uint64_t rtt_ns)
{
    if (s->loss_rtt_count++ == LOSS_RTT_SAMPLES) {
        s->loss_rtt_ns[0] = s->loss_rtt_ns[1];
        s->loss_rtt_ns[1] = 0;
        s->loss_rtt_count = 1;
    }
    if (rtt_ns > s->loss_rtt_ns[1])
        s->loss_rtt_ns[1] = rtt_ns;
}

/* Section 10.3: 9/8 of that RTT (or of srtt and the latest sample where
 * they are larger), at least 1 ms; initial_rtt before any sample. */
static uint64_t loss_threshold(const aftp_sender *s)
{
    uint64_t delay = aftp_rtt_loss_delay(&s->rtt);
    uint64_t rtt = s->loss_rtt_ns[0] > s->loss_rtt_ns[1] ? s->loss_rtt_ns[0] : s->loss_rtt_ns[1];
    return rtt + rtt / 8 > delay ? rtt + rtt / 8 : delay;
}

/* Spec section 9.9: a block listed missing is lost when its latest
 * transmission is acknowledged-or-older (pn <= largest) and left a loss
 * delay ago or more: a time threshold only, as RACK (RFC 8985) has it. A
 * packet threshold takes reordering for loss: a packet jittered by a few
 * ms at 1 Gbit/s is hundreds of packets behind. A block with no record
 * left was sent long ago: lost. Only [scan_start, scan_end) is described
 * by the list; blocks outside it (the receiver's sweep reports them in
 * other FEEDBACKs) are left as they are. */
static void detect_losses(aftp_sender *s, const aftp_wire_feedback *fb)
{
    uint64_t delay = loss_threshold(s);
    aftp_wire_range_iter it;
    aftp_wire_range rg;
    aftp_wire_range_iter_init(&it, fb);
    while (aftp_wire_ranges_next(&it, &rg)) {
        uint64_t end = rg.start + rg.len;
        if (end > s->next_block)
            end = s->next_block; /* never sent: nothing to repair */
        for (uint64_t b = rg.start; b < end; b++) {
            uint64_t pn, sent_ns;
            if (aftp_repairq_contains(&s->repairs, b) || !repairable(s, b))
                continue;
            if (aftp_sentlog_find_block(&s->log, b, &pn, &sent_ns)) {
                if (pn > fb->largest_pn)
                    continue; /* still in flight */
                if (s->ss.now_ns - sent_ns < delay)
                    continue; /* maybe only reordered */
            }
            if (aftp_repairq_push(&s->repairs, b)) {
                aftp_sentlog_forget_block(&s->log, b);
                s->resends_asked++;
                s->data_declared_lost++;
            }
        }
    }
}

/* The control packet entry e last left in (an ENTRIES or its FILE_DONE)
 * is lost when REORDER_PACKETS or more below largest_pn and it left at
 * `before` or earlier (a loss delay ago, as a block's threshold, 9.9). */
static int control_lost(const aftp_entryq_item *e, const aftp_wire_feedback *fb, uint64_t before)
{
    return e->sent_ns <= before && fb->largest_pn >= e->sent_pn + REORDER_PACKETS;
}

/* Section 9.14.3, loss of control packets detected from FEEDBACK, so that
 * they are resent about a round trip after they left rather than a PTO
 * (swollen by any queue) or up to two later, while the entry window stands
 * still behind them:
 * - an entry still without verdict, its ENTRIES lost (one loss delay
 *   after it left: the receiver batches verdicts for at most a feedback
 *   interval). The entries after it wait for it at the receiver, which
 *   decides in id order, so the round resends them too;
 * - a FILE_DONE still without FILE_RESULT though every block of its file
 *   is acknowledged (below cum_block), two loss delays after it left (the
 *   receiver also verifies and commits it): the FILE_DONE or the
 *   FILE_RESULT was lost;
 * - an ABANDON still without FILE_RESULT one loss delay after it left (the
 *   receiver answers it at once). */
static void detect_lost_controls(aftp_sender *s, const aftp_wire_feedback *fb)
{
    uint64_t loss_delay = loss_threshold(s);
    if (s->ss.now_ns < 2 * loss_delay)
        return;
    uint64_t before = s->ss.now_ns - loss_delay, done_before = before - loss_delay;
    for (uint32_t id = s->entries.oldest; id <= s->stream.newest; id++) {
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e->state == AFTP_ENTRYQ_OFFERED && s->resend_from == 0 &&
            control_lost(e, fb, before)) {
            s->resend_before = before;
            s->resend_from = id;
        } else if (!e->done_due &&
                   ((e->state == AFTP_ENTRYQ_DONE_SENT && e->base + e->blocks <= s->acked_cum &&
                     control_lost(e, fb, done_before)) ||
                    (e->state == AFTP_ENTRYQ_ABANDONED && control_lost(e, fb, before)))) {
            e->done_due = 1;
            s->done_due++;
        }
    }
}

/* The packet a FEEDBACK measures the path at (section 10.1). */
typedef struct rtt_point {
    int known;             /* its send time is known */
    uint64_t sent_ns;
    uint64_t data_sent;    /* DATA packets up to largest_pn; AFTP_CC_UNKNOWN: no longer known */
    uint64_t data_settled; /* DATA packets up to it when settled */
    uint64_t ack_delay_ns; /* the receiver's delay after it arrived */
    int settled;           /* the newest packet settled in order, not largest_pn */
} rtt_point;

/* The first packet number in [lo, hi] whose record field (its DATA count,
 * aftp_sentlog_data_upto, or send time, aftp_sentlog_sent_time: both grow
 * with the number; those the log no longer knows are below) reaches
 * value; hi when none before it does. */
static uint64_t first_pn_reaching(const aftp_sentlog *log,
                                  int (*field)(const aftp_sentlog *, uint64_t, uint64_t *),
                                  uint64_t lo, uint64_t hi, uint64_t value)
{
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2, v;
        if (field(log, mid, &v) && v >= value)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* DATA packets among the `upto` sent up to pn that left within span_ns
 * before pn did (pn itself included); lo: the oldest packet number the
 * log may know. */
static uint64_t sent_since(const aftp_sender *s, uint64_t lo, uint64_t pn, uint64_t upto,
                           uint64_t span_ns)
{
    uint64_t pn_ns, before;
    if (!aftp_sentlog_sent_time(&s->log, pn, &pn_ns) || pn_ns <= span_ns)
        return upto;
    uint64_t from = first_pn_reaching(&s->log, aftp_sentlog_sent_time, lo, pn, pn_ns - span_ns);
    if (!aftp_sentlog_data_upto(&s->log, from, &before) || before > upto)
        return 0;
    return upto - before;
}

/* DATA packets up to pn (count `upto`) the path has likely lost and the
 * sender not yet declared: the baseline loss of those sent within a loss
 * threshold, which no FEEDBACK could show lost yet. */
static uint64_t undeclared_losses(const aftp_sender *s, uint64_t lo, uint64_t pn, uint64_t upto)
{
    uint64_t recent = sent_since(s, lo, pn, upto, loss_threshold(s));
    return (uint64_t)(s->cc.base_loss * (double)recent);
}

/* Section 10.1: largest_pn, unless it overtook the packets sent before it
 * (reordering: an early packet's round trip is short by the delay it
 * skipped, every packet it overtook would look lost, and its sample's
 * shortfall like queue). Then the newest DATA packet settled in order, as
 * RACK (RFC 8985) measures from the packets delivered in order: the one
 * whose number among the DATA packets is what arrived (packets_received)
 * plus what was declared lost, plus what the baseline loss says is lost
 * and not yet declared (without it the settled packet lags by those, and
 * its sample, taken into the loss threshold, puts off declaring them
 * further). largest_pn overtook it when it left later after the settled
 * packet, with more packets unsettled between them, than losses not yet
 * declared and jitter explain (aftp_cc_overtaken). The
 * settled packet arrived about when the FEEDBACK was built (no ack
 * delay), if any settled since the previous FEEDBACK: else it is an old
 * one, whose age measures nothing but the losses not yet declared behind
 * it. */
/* The point moves to the settled packet: its send time (the round trip
 * at most twice largest_pn's: an early packet skips at most the one-way
 * delay; beyond, the settled packet lags behind losses not yet declared,
 * and its age would put off declaring them), its DATA count, no ack
 * delay; a sample only if packets settled since the previous FEEDBACK. */
static void move_to_settled(const aftp_sender *s, const aftp_wire_feedback *fb, rtt_point *p,
                            uint64_t settled_pn, uint64_t sent_ns)
{
    uint64_t earliest = s->ss.now_ns - 2 * (s->ss.now_ns - p->sent_ns);
    p->settled = 1;
    p->known = fb->packets_received + s->data_declared_lost > s->data_settled;
    p->sent_ns = sent_ns > earliest ? sent_ns : earliest;
    p->ack_delay_ns = 0;
    aftp_sentlog_data_upto(&s->log, settled_pn, &p->data_settled);
}

/* Section 10.1: a FEEDBACK that overtook two or more of the receiver's
 * packets on its way skipped part of the return delay (reordering), so
 * its round trip is short by that: no sample. The receiver sends at most
 * one FEEDBACK per quarter round trip, so one that skipped the one-way
 * delay overtook two or more; a lost FEEDBACK alone leaves a gap of one. */
#define EARLY_FEEDBACK_OVERTOOK 2

static rtt_point settle_point(const aftp_sender *s, const aftp_wire_feedback *fb)
{
    rtt_point p = {0, 0, AFTP_CC_UNKNOWN, 0, (uint64_t)fb->ack_delay_us * 1000, 0};
    uint64_t pn = fb->largest_pn, settled = fb->packets_received + s->data_declared_lost;
    p.known = aftp_sentlog_sent_time(&s->log, pn, &p.sent_ns) && s->ss.now_ns > p.sent_ns;
    if (!aftp_sentlog_data_upto(&s->log, pn, &p.data_sent)) {
        p.data_sent = AFTP_CC_UNKNOWN;
        return p;
    }
    uint64_t lo = pn - (pn < aftp_sentlog_slots(&s->log) ? pn : aftp_sentlog_slots(&s->log));
    settled += undeclared_losses(s, lo, pn, p.data_sent);
    if (!p.known || settled == 0 || p.data_sent <= settled)
        return p;
    uint64_t settled_pn = first_pn_reaching(&s->log, aftp_sentlog_data_upto, lo, pn, settled);
    uint64_t settled_ns, lead_ns;
    if (!aftp_sentlog_sent_time(&s->log, settled_pn, &settled_ns))
        return p;
    lead_ns = p.sent_ns > settled_ns ? p.sent_ns - settled_ns : 0;
    uint64_t sent_in_rtt = sent_since(s, lo, pn, p.data_sent, aftp_cc_rtt(&s->cc));
    if (aftp_cc_overtaken(&s->cc, p.data_sent - settled, sent_in_rtt, lead_ns))
        move_to_settled(s, fb, &p, settled_pn, settled_ns);
    return p;
}

/* The point, and whether its round trip is a sample: not when the
 * FEEDBACK came early (EARLY_FEEDBACK_OVERTOOK). */
static rtt_point feedback_point(const aftp_sender *s, const aftp_wire_feedback *fb)
{
    rtt_point p = settle_point(s, fb);
    if (s->peer_pn_overtook >= EARLY_FEEDBACK_OVERTOOK)
        p.known = 0;
    return p;
}

/* Section 10.1: an RTT sample when the largest acknowledged packet grows. */
static void sample_rtt(aftp_sender *s, const aftp_wire_feedback *fb, const rtt_point *p)
{
    if (s->has_acked && fb->largest_pn <= s->largest_acked)
        return;
    s->has_acked = 1;
    s->largest_acked = fb->largest_pn;
    if (p->known) {
        uint64_t rtt_ns = s->ss.now_ns - p->sent_ns, ack_delay_ns = p->ack_delay_ns;
        aftp_rtt_sample(&s->rtt, rtt_ns, ack_delay_ns);
        track_loss_rtt(s, rtt_ns > ack_delay_ns ? rtt_ns - ack_delay_ns : rtt_ns);
    }
}

/* Spec section 6.7.2, session checks: the scan window and the block count
 * must fit the active file. The decoder guarantees cum_block <= scan_start
 * <= scan_end, so bounding scan_end bounds the whole window. */
static int feedback_fits_file(const aftp_sender *s, const aftp_wire_feedback *fb)
{
    return fb->scan_end <= s->block_count && fb->blocks_received <= s->block_count;
}

/* The rate controller's view of a FEEDBACK: the receiver's counters and
 * clock, and an RTT sample of the packet it measures the path at while
 * its send time is known. */
static void feed_controller(aftp_sender *s, const aftp_wire_feedback *fb, const rtt_point *p)
{
    aftp_cc_feedback in = {.now_ns = s->ss.now_ns, .largest_pn = fb->largest_pn,
                           .ack_delay_ns = p->ack_delay_ns, .recv_time_us = fb->recv_time_us,
                           .packets_received = fb->packets_received, .data_sent = p->data_sent,
                           .rtt_settled = p->settled, .data_settled = p->data_settled};
    if (p->known)
        in.rtt_ns = s->ss.now_ns - p->sent_ns;
    aftp_cc_on_feedback(&s->cc, &in);
    sync_pacer(s);
}

/* Section 9.9 repair bound: past it, the receiver is asking for more than
 * any path that delivers data could lose; the file ends with LIMIT rather
 * than the sender becoming its traffic source. */
static void check_repair_bound(aftp_sender *s)
{
    uint64_t bound = REPAIR_BOUND_PER_BLOCK * s->first_sent + REPAIR_BOUND_SLACK;
    char why[AFTP_WIRE_MAX_REASON];
    if (s->resends_asked <= bound)
        return;
    if (s->mode == MODE_PIPELINED)
        snprintf(why, sizeof why, "the receiver asked for %" PRIu64 " resends after %" PRIu64
                 " blocks of the session were sent, beyond the bound of %d per block sent + "
                 "%d: it keeps reporting delivered blocks missing, or the path loses more "
                 "than %d datagrams in %d", s->resends_asked, s->first_sent,
                 REPAIR_BOUND_PER_BLOCK, REPAIR_BOUND_SLACK, REPAIR_BOUND_PER_BLOCK,
                 REPAIR_BOUND_PER_BLOCK + 1);
    else
        snprintf(why, sizeof why, "the receiver asked for %" PRIu64 " resends of file %" PRIu32
             " after %" PRIu64 " of its %" PRIu64 " blocks were sent, beyond the bound of %d "
             "per block sent + %d: it keeps reporting delivered blocks missing, or the path "
             "loses more than %d datagrams in %d",
             s->resends_asked, current_file(s)->info.file_id, s->next_block, s->block_count,
             REPAIR_BOUND_PER_BLOCK, REPAIR_BOUND_SLACK, REPAIR_BOUND_PER_BLOCK,
             REPAIR_BOUND_PER_BLOCK + 1);
    fail_and_close_saying(s, AFTP_ERR_LIMIT, why);
}

/* Section 9.14.2: a pipelined FEEDBACK reports the stream (file_id 0) up
 * to the end of the newest entry offered; otherwise the active file. */
static int feedback_applies(aftp_sender *s, const aftp_wire_feedback *fb)
{
    if (s->mode == MODE_PIPELINED)
        return fb->file_id == 0 && fb->scan_end <= s->offered_end &&
               fb->blocks_received <= s->offered_end;
    return (s->phase == PHASE_DATA || s->phase == PHASE_WAIT_RESULT) &&
           is_current(s, fb->file_id) && feedback_fits_file(s, fb);
}

static void on_feedback(aftp_sender *s, uint64_t pkt_pn, const aftp_wire_feedback *fb)
{
    /* Acknowledging a packet never sent, a block past the file or an older
     * FEEDBACK than one already used: drop it. */
    if (!feedback_applies(s, fb) || fb->largest_pn >= s->ss.next_pn ||
        (s->has_feedback && pkt_pn <= s->last_feedback_pn)) {
        aftp_session_drop(&s->ss);
        return;
    }
    s->has_feedback = 1;
    s->last_feedback_pn = pkt_pn;
    progress(s);
    s->probe_due = 0;
    rtt_point point = feedback_point(s, fb);
    sample_rtt(s, fb, &point);
    feed_controller(s, fb, &point);
    s->data_settled = fb->packets_received + s->data_declared_lost;
    if (fb->cum_block > s->acked_cum)
        s->acked_cum = fb->cum_block;
    detect_losses(s, fb);
    if (s->mode == MODE_PIPELINED)
        detect_lost_controls(s, fb);
    aftp_sentlog_retire(&s->log, s->acked_cum);
    check_repair_bound(s);
}

static void digest_hex(const uint8_t *digest, char *hex)
{
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

/* Section 9.10: a FILE_RESULT(NONE) this side cannot confirm (a digest
 * other than the one it streamed, or a verdict before FILE_DONE gave the
 * receiver a digest to check against) is a receiver breaking the protocol
 * about the one fact the transfer exists for: the file fails with
 * AFTP_ERR_DIGEST_MISMATCH and the session closes with DIGEST_MISMATCH. */
static void refute_result(const aftp_wire_file_result *r, const uint8_t *streamed,
                          uint64_t sent, uint64_t count, char *why, size_t cap)
{
    char theirs[2 * AFTP_DIGEST_LEN + 1], ours[2 * AFTP_DIGEST_LEN + 1];
    digest_hex(r->digest, theirs);
    if (streamed != NULL) {
        digest_hex(streamed, ours);
        snprintf(why, cap, "file %" PRIu32 " not verified: the receiver reports digest "
                 "xxh3-128 %s, this side streamed %s", r->file_id, theirs, ours);
    } else {
        snprintf(why, cap, "file %" PRIu32 " not verified: the receiver reports it "
                 "verified (digest xxh3-128 %s) after %" PRIu64 " of its %" PRIu64
                 " blocks, before this side sent its digest", r->file_id, theirs, sent, count);
    }
}

static void refute_verdict(aftp_sender *s, const aftp_wire_file_result *r)
{
    char why[AFTP_WIRE_MAX_REASON];
    refute_result(r, s->phase == PHASE_WAIT_RESULT ? s->digest : NULL, s->next_block,
                  s->block_count, why, sizeof why);
    fail_and_close_saying(s, AFTP_ERR_DIGEST_MISMATCH, why);
}

static void on_entry_result(aftp_sender *s, const aftp_wire_file_result *r);
static void on_file_result(aftp_sender *s, const aftp_wire_file_result *r)
{
    if (s->mode == MODE_PIPELINED) {
        on_entry_result(s, r);
        return;
    }
    if ((s->phase != PHASE_DATA && s->phase != PHASE_WAIT_RESULT) || !is_current(s, r->file_id)) {
        aftp_session_drop(&s->ss);
        return;
    }
    int verified = s->phase == PHASE_WAIT_RESULT &&
                   memcmp(r->digest, s->digest, AFTP_DIGEST_LEN) == 0;
    if (r->error == AFTP_WIRE_ERR_NONE && !verified) {
        refute_verdict(s, r);
        return;
    }
    end_file(s, aftp_errmap_to_local(r->error), s->phase == PHASE_WAIT_RESULT ? s->digest : NULL,
             NULL);
    start_next_file(s);
}

/* A receiver broke a rule of section 9.14.3: CLOSE(PROTOCOL, why). */
static void protocol_violation(aftp_sender *s, const char *why)
{
    aftp_session_set_text(&s->ss, why);
    end_all_entries(s, AFTP_ERR_MALFORMED, why);
    aftp_session_start_closing(&s->ss, AFTP_ERR_MALFORMED, AFTP_WIRE_ERR_PROTOCOL, drain_time(s));
}

/* A new verdict (section 9.14.3): a FILE accepted joins the stream's first
 * transmissions, RESUME's held blocks excepted; anything else ends the
 * entry, and its blocks are held (never sent). */
static void apply_verdict(aftp_sender *s, const aftp_wire_verdict *v, const aftp_stream_entry *se)
{
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, v->entry_id);
    e->verdict = v->verdict;
    if (se->state == AFTP_STREAM_ACCEPTED) {
        if (v->verdict == AFTP_WIRE_VERDICT_RESUME && aftp_entryq_hold(e, v) != AFTP_OK) {
            fail_and_close(s, AFTP_ERR_NO_MEMORY);
            return;
        }
        e->state = AFTP_ENTRYQ_SENDING;
        entry_event(s, e, AFTP_EV_FILE_START, AFTP_OK, NULL, NULL);
        return;
    }
    e->state = AFTP_ENTRYQ_ENDED; /* by this verdict */
    end_entry(s, e, v->verdict == AFTP_WIRE_VERDICT_REFUSED ? aftp_errmap_to_local(v->error)
                                                             : AFTP_OK,
              NULL, NULL);
}

static void on_verdicts(aftp_sender *s, const aftp_wire_verdicts *v)
{
    aftp_wire_record_iter it;
    aftp_wire_verdict rec;
    aftp_stream_entry se;
    char why[AFTP_WIRE_MAX_REASON];
    aftp_wire_verdicts_iter_init(&it, v);
    while (s->ss.state == AFTP_STATE_TRANSFER && aftp_wire_verdicts_next(&it, &rec)) {
        int rc = aftp_stream_verdict(&s->stream, &rec, &se, why, sizeof why);
        if (rc < 0) {
            protocol_violation(s, why);
            return;
        }
        if (rc > 0)
            apply_verdict(s, &rec, &se);
    }
    s->ctl_answered = 1;
    progress(s);
    start_next_file(s);
}

/* Blocks of entry e sent for the first time so far (for messages). */
static uint64_t entry_blocks_sent(const aftp_sender *s, const aftp_entryq_item *e)
{
    if (s->cursor_entry == e->info.file.file_id)
        return s->next_block - e->base;
    return s->cursor_entry > e->info.file.file_id ? e->blocks : 0;
}

/* Section 9.14.3, DONE_SENT + FILE_RESULT: as 9.10, per file. */
static void on_entry_result(aftp_sender *s, const aftp_wire_file_result *r)
{
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, r->file_id);
    if (e == NULL || (e->state != AFTP_ENTRYQ_SENDING && e->state != AFTP_ENTRYQ_DONE_SENT &&
                      e->state != AFTP_ENTRYQ_ABANDONED)) {
        aftp_session_drop(&s->ss);
        return;
    }
    int done = e->state == AFTP_ENTRYQ_DONE_SENT, abandoned = e->state == AFTP_ENTRYQ_ABANDONED;
    if (!abandoned && r->error == AFTP_WIRE_ERR_NONE &&
        !(done && memcmp(r->digest, e->digest, AFTP_DIGEST_LEN) == 0)) {
        char why[AFTP_WIRE_MAX_REASON];
        refute_result(r, done ? e->digest : NULL, entry_blocks_sent(s, e), e->blocks, why,
                      sizeof why);
        fail_and_close_saying(s, AFTP_ERR_DIGEST_MISMATCH, why);
        return;
    }
    /* An abandoned entry ends whatever the receiver says (9.14.3): its
     * failure was reported when its source failed. */
    end_entry(s, e, aftp_errmap_to_local(abandoned ? e->abandon_error : r->error),
              done ? e->digest : NULL, NULL);
    s->ctl_answered = 1;
    progress(s);
    start_next_file(s);
}

static const char lost_result_text[] =
    "the client closed after PULL_END, having ended every entry, but its FILE_RESULT or verdict "
    "for this entry never arrived: whether it stored the entry, only the client's own report says";

/* Section 9.15.5: a pull's client that had PULL_END closes once every
 * entry ended on its side; an entry whose FILE_DONE or ABANDON left but
 * whose FILE_RESULT was lost with every copy, or whose verdict was lost
 * (its ENTRIES left: the client decided and ended it), ends unknown here.
 * 1 when the close was such a one (the session then ends AFTP_OK); 0 when
 * an entry was still being sent, which no quick close can follow. */
static int pull_end_closed(aftp_sender *s, const aftp_wire_close *c)
{
    if (!s->end_sent || c->error != AFTP_WIRE_ERR_NONE)
        return 0;
    for (uint32_t id = s->entries.oldest; id != 0 && id <= s->entries.newest; id++) {
        const aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e != NULL && e->state != AFTP_ENTRYQ_ENDED && e->state != AFTP_ENTRYQ_DONE_SENT &&
            e->state != AFTP_ENTRYQ_OFFERED &&
            !(e->state == AFTP_ENTRYQ_ABANDONED && !e->done_due))
            return 0;
    }
    end_all_entries(s, AFTP_ERR_PEER_CLOSED, lost_result_text);
    return 1;
}

/* A file or entry this side still sends or awaits the result of. */
static int work_in_progress(aftp_sender *s)
{
    if (file_active(s))
        return 1;
    for (uint32_t id = s->entries.oldest; id != 0 && id <= s->entries.newest; id++) {
        const aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e != NULL && e->state != AFTP_ENTRYQ_ENDED)
            return 1;
    }
    return 0;
}

static void on_close(aftp_sender *s, const aftp_wire_close *c)
{
    if (s->ss.state == AFTP_STATE_TRANSFER && s->pull != PULL_NONE && pull_end_closed(s, c)) {
        close_now(s, AFTP_OK);
        return; /* a quick close (9.11): the client waits for no answer */
    }
    int error = aftp_session_peer_close(&s->ss, c,
                                        s->ss.state == AFTP_STATE_TRANSFER && work_in_progress(s));
    /* During our own closing the peer's CLOSE only confirms it. Otherwise
     * it gets an answer once the server's id is known (section 9.13: a
     * client in HANDSHAKE has nowhere to address one). */
    if (s->ss.state == AFTP_STATE_CLOSING) {
        close_now(s, s->ss.error);
        return;
    }
    int answer = s->ss.state == AFTP_STATE_TRANSFER;
    close_now(s, error);
    if (answer)
        aftp_session_answer_close(&s->ss);
}

/* Section 14.7: the server wants its cookie back before it does any
 * handshake work. Followed once, only while waiting for HELLO_ACK; the
 * HELLO keeps its message 1 (the server has not processed it). */
static void on_retry(aftp_sender *s, const aftp_wire_retry *t)
{
    if (s->ss.state != AFTP_STATE_HANDSHAKE || !aftp_hello_client_retry(&s->hello, t)) {
        aftp_session_drop(&s->ss);
        return;
    }
    s->hello_due = 1;
}

/* ---- pull: this sender is the server (section 9.15) ---- */

/* Section 9.15.3: a repeated HELLO shows the client had no HELLO_ACK, so
 * it could open nothing sent behind it: the early request's PULL_REPLY
 * again, and a round of resends of every entry offered without verdict,
 * now, not a PTO after it left (a young RTT estimate's, backed off: the
 * pull ended 2 s late). */
static void answer_early_again(aftp_sender *s)
{
    s->reply_due = 1;
    s->resend_before = s->ss.now_ns;
    s->resend_from = next_offered(s, s->entries.oldest);
}

/* Section 9.15.1: the client's HELLO; an admitted client gets the
 * pipelined session, the policy's cap on this sender, and its HELLO_ACK. */
static void on_pull_hello(aftp_sender *s, const aftp_wire_packet *p)
{
    int repeat = s->srv.seen;
    if (aftp_hello_server_hello(&s->srv, &s->ss, p, drain_time(s)) != AFTP_HELLO_ADMITTED) {
        if (repeat && s->srv.ack_due && s->pull == PULL_REPLIED && s->srv.early_taken)
            answer_early_again(s);
        return;
    }
    if (choose_mode(s, s->srv.window) != AFTP_OK) {
        close_now(s, AFTP_ERR_NO_MEMORY);
        return;
    }
    obey_rate_cap(s, s->srv.rate_cap_bps);
    s->srv.early_taken = aftp_hello_server_early_request(&s->srv, &s->early_request) == AFTP_OK;
    /* Section 12.3.4: the paths are decided by storage, which must not run
     * where the handshake does (a server's control thread): at the
     * engine's next timer, on the thread that then drives the session. */
    if (aftp_hello_server_answer(&s->srv, &s->ss) == AFTP_OK && s->srv.early_taken)
        s->early_request_due = 1;
}

/* A path's refusal as PULL_REPLY says it: NOT_FOUND is its own there
 * (spec 11.3), everything else as everywhere. */
static uint16_t path_verdict(int rc)
{
    return rc == AFTP_ERR_NOT_FOUND ? AFTP_WIRE_ERR_NOT_FOUND : aftp_errmap_to_wire(rc);
}

static uint64_t lower_limit(uint64_t a, uint64_t b)
{
    return a == 0 || (b != 0 && b < a) ? b : a;
}

/* Section 9.15.2: storage decides each path; the reply goes at once and
 * is repeated for a repeated request. */
static void on_pull_request(aftp_sender *s, const aftp_wire_pull_request *q)
{
    aftp_wire_record_iter it;
    aftp_wire_path path;
    char text[AFTP_WIRE_MAX_PATH + 1];
    s->early_request_due = 0; /* decided now, whichever came first */
    if (s->pull != PULL_WAITING) {
        s->reply_due = 1;
        return;
    }
    unsigned flags = q->flags & AFTP_WIRE_PULL_FLAGS_DEFINED; /* the API's values */
    s->reply.count = 0;
    aftp_wire_pull_paths_iter_init(&it, q);
    while (aftp_wire_pull_paths_next(&it, &path)) {
        memcpy(text, path.bytes, path.len);
        text[path.len] = '\0';
        int rc = s->set.storage->pull_path(s->set.user, s->reply.count, text, flags);
        s->reply.errors[s->reply.count++] = path_verdict(rc);
    }
    s->client_max_bps = q->max_rate_bps;
    obey_rate_cap(s, lower_limit(s->rate_cap_bps, q->max_rate_bps)); /* the policy's, or a share */
    s->pull = PULL_REPLIED;
    s->reply_due = 1;
}

/* Message 1's request waits for the engine's timer (on_pull_hello). */
static int early_request_pending(const aftp_sender *s)
{
    return s->early_request_due &&
           (s->ss.state == AFTP_STATE_HANDSHAKE || s->ss.state == AFTP_STATE_TRANSFER);
}

/* Any FEEDBACK or VERDICTS shows the client has its PULL_REPLY: the reply
 * stops, and the session may end once its entries have. */
static void pull_confirmed(aftp_sender *s)
{
    s->pull = PULL_CONFIRMED;
    s->reply_deadline = AFTP_NO_EXPIRY;
    start_next_file(s);
    pull_end_check(s, 0);
}

static int encode_pull_reply(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&s->ss, AFTP_WIRE_PULL_REPLY, &p);
    p.u.pull_reply = s->reply;
    s->reply_due = 0;
    if (s->pull == PULL_REPLIED)
        s->reply_deadline = s->ss.now_ns + aftp_rtt_pto_backoff(&s->rtt, s->reply_backoff);
    return aftp_session_encode(&s->ss, &p, buf, cap, dg);
}

/* Section 6.19: the session's entries are 1..last_entry_id. */
static int encode_pull_end(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&s->ss, AFTP_WIRE_PULL_END, &p);
    p.u.pull_end.entry_count = s->last_entry_id;
    s->end_due = 0;
    s->end_sent = 1;
    return aftp_session_encode(&s->ss, &p, buf, cap, dg);
}

/* A pull's own input (9.15.3): 1 when the packet was the pull's alone,
 * 0 when the pipelined sender takes it on. */
static int dispatch_pull(aftp_sender *s, const aftp_wire_packet *p)
{
    if (p->hdr.type == AFTP_WIRE_HELLO) {
        on_pull_hello(s, p);
        return 1;
    }
    /* Anything else carries the server's id and opened: the address is
     * the client's (section 9.3 step 5). A PULL_REQUEST where the HELLO
     * carried the request is the client's resend on its timer: its time
     * since the HELLO_ACK is no round trip (Karn). */
    int resent = p->hdr.type == AFTP_WIRE_PULL_REQUEST && s->srv.early_taken;
    aftp_hello_server_confirm(&s->srv, &s->ss, resent ? NULL : &s->rtt);
    int answer = p->hdr.type == AFTP_WIRE_FEEDBACK || p->hdr.type == AFTP_WIRE_VERDICTS ||
                 p->hdr.type == AFTP_WIRE_FILE_RESULT;
    if (p->hdr.type == AFTP_WIRE_PULL_REQUEST) {
        on_pull_request(s, &p->u.pull_request);
        return 1;
    }
    if (answer && s->pull == PULL_WAITING) {
        aftp_session_drop(&s->ss); /* nothing was offered yet */
        return 1;
    }
    if (answer && s->pull == PULL_REPLIED && p->hdr.type != AFTP_WIRE_FILE_RESULT)
        pull_confirmed(s);
    return 0;
}

/* Section 6.18: the server's newer cap replaces the one in force; an
 * older or repeated sequence (the server's repeats, a late copy) changes
 * nothing. A cap of 0 cannot be obeyed and comes sealed from the server
 * itself: a protocol violation. */
static void on_rate_update(aftp_sender *s, const aftp_wire_rate_update *u)
{
    char why[128];
    if (s->ss.state != AFTP_STATE_TRANSFER || u->seq <= s->cap_seq)
        return;
    if (u->cap_bps == 0) {
        snprintf(why, sizeof why, "the server sent a RATE_UPDATE (sequence %" PRIu64
                 ") with a cap of 0 bit/s (spec 6.18)", u->seq);
        fail_and_close_saying(s, AFTP_ERR_MALFORMED, why);
        return;
    }
    s->cap_seq = u->seq;
    aftp_sender_set_rate_cap(s, u->cap_bps, s->ss.now_ns);
}

static void dispatch(aftp_sender *s, const aftp_wire_packet *p)
{
    if (s->pull != PULL_NONE && dispatch_pull(s, p))
        return;
    switch (p->hdr.type) {
    case AFTP_WIRE_VERSION_NEG: on_version_neg(s, &p->u.version_neg); break;
    case AFTP_WIRE_RETRY: on_retry(s, &p->u.retry); break;
    case AFTP_WIRE_HELLO_ACK: on_hello_ack(s, &p->u.hello_ack); break;
    case AFTP_WIRE_FILE_REPLY: on_file_reply(s, &p->u.file_reply); break;
    case AFTP_WIRE_FEEDBACK: on_feedback(s, p->hdr.pn, &p->u.feedback); break;
    case AFTP_WIRE_FILE_RESULT: on_file_result(s, &p->u.file_result); break;
    case AFTP_WIRE_VERDICTS: on_verdicts(s, &p->u.verdicts); break;
    case AFTP_WIRE_RATE_UPDATE: on_rate_update(s, &p->u.rate_update); break;
    case AFTP_WIRE_CLOSE: on_close(s, &p->u.close); break;
    default: aftp_session_drop(&s->ss); break;
    }
}

/* Section 9.2 step 3: the types a client receives; the others only a
 * client sends, so they are no input for it, and dropped before they can
 * count as the server's (an unsealed HELLO would restart the idle timer). */
static int client_receives(const aftp_sender *s, uint8_t type)
{
    if (s->pull != PULL_NONE) /* section 5.3: what a pull's server receives */
        return type == AFTP_WIRE_HELLO || type == AFTP_WIRE_PULL_REQUEST ||
               type == AFTP_WIRE_FEEDBACK || type == AFTP_WIRE_VERDICTS ||
               type == AFTP_WIRE_FILE_RESULT || type == AFTP_WIRE_CLOSE;
    if (type == AFTP_WIRE_VERDICTS) /* only once PIPELINE was negotiated (12.3.2) */
        return s->mode == MODE_PIPELINED;
    return type == AFTP_WIRE_VERSION_NEG || type == AFTP_WIRE_HELLO_ACK ||
           type == AFTP_WIRE_FILE_REPLY || type == AFTP_WIRE_FEEDBACK ||
           type == AFTP_WIRE_FILE_RESULT || type == AFTP_WIRE_CLOSE || type == AFTP_WIRE_RETRY ||
           type == AFTP_WIRE_SERVER_KEY || type == AFTP_WIRE_RATE_UPDATE;
}

/* The receive steps (aftp_session.h): clear header, type and id (everything
 * the server sends carries our id; VERSION_NEG echoes it), replay and flag
 * checks, then decryption. */
/* The receive steps (aftp_session.h). In a pull whose handshake is
 * complete a type the client never sends is opened all the same: once it
 * is the client's, it is a protocol violation (*wrong_role, spec 9.15.3). */
static int admit(aftp_sender *s, const uint8_t *pkt, size_t len, aftp_wire_packet *p,
                 int *wrong_role)
{
    aftp_wire_header hdr;
    if (aftp_session_peek(&s->ss, pkt, len, &hdr) != AFTP_OK)
        return 0;
    int ours = s->pull != PULL_NONE ? aftp_hello_server_addressed(&s->srv, &s->ss, &hdr)
                                    : hdr.conn_id == s->ss.local_id;
    *wrong_role = !client_receives(s, hdr.type);
    int judged = s->pull != PULL_NONE && s->srv.confirmed && hdr.type != AFTP_WIRE_HELLO;
    if ((*wrong_role && !judged) || !ours) {
        aftp_session_drop(&s->ss);
        return 0;
    }
    return aftp_session_precheck(&s->ss, &hdr) == AFTP_OK &&
           aftp_session_open(&s->ss, pkt, len, &hdr, p) == AFTP_OK;
}

/* How many of the peer's packets not yet received this one (pn) overtook:
 * what a FEEDBACK's RTT sample is judged by (EARLY_FEEDBACK_OVERTOOK). */
static void note_peer_pn(aftp_sender *s, uint64_t pn)
{
    if (s->has_peer_pn && pn <= s->peer_pn_newest) {
        s->peer_pn_overtook = 0;
        return;
    }
    s->peer_pn_overtook = s->has_peer_pn ? pn - s->peer_pn_newest - 1 : 0;
    s->has_peer_pn = 1;
    s->peer_pn_newest = pn;
}

int aftp_sender_read(aftp_sender *s, uint64_t now_ns, const uint8_t *pkt, size_t len)
{
    aftp_wire_packet p;
    int wrong_role = 0;
    char why[128];
    if (s == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&s->ss, now_ns);
    if (s->ss.state == AFTP_STATE_CLOSED)
        return AFTP_OK;
    if (!admit(s, pkt, len, &p, &wrong_role))
        return AFTP_OK;
    aftp_session_heard(&s->ss, s->ss.now_ns, len);
    note_peer_pn(s, p.hdr.pn);
    if (wrong_role && s->ss.state == AFTP_STATE_TRANSFER) {
        snprintf(why, sizeof why, "the client sent a %s, which a pull's client never sends "
                 "(spec 9.15.3)", aftp_wire_type_name(p.hdr.type));
        fail_and_close_saying(s, AFTP_ERR_MALFORMED, why);
        return aftp_session_failure(&s->ss);
    }
    if (s->ss.state == AFTP_STATE_CLOSING) {
        /* Section 9.11: while closing, any packet is answered with CLOSE. */
        if (p.hdr.type == AFTP_WIRE_CLOSE)
            on_close(s, &p.u.close);
        else
            s->ss.close_due = 1;
        return AFTP_OK;
    }
    dispatch(s, &p);
    return aftp_session_failure(&s->ss);
}

/* ---- output ---- */

enum output_kind {
    OUT_NONE, OUT_CLOSE, OUT_HELLO, OUT_OFFER, OUT_ENTRIES, OUT_DONE, OUT_REPAIR, OUT_NEW,
    OUT_PROBE, OUT_COPY, OUT_HELLO_ACK, OUT_PULL_REPLY, OUT_PULL_END
};

/* Section 9.14.3: a resend round is under way, or the next entry is queued
 * and inside the entry window. */
static int entries_due(const aftp_sender *s)
{
    uint32_t next = s->stream.newest + 1;
    return s->mode == MODE_PIPELINED &&
           (s->resend_from != 0 ||
            (next <= s->entries.newest &&
             (uint64_t)next < (uint64_t)s->stream.oldest + s->stream.window));
}

/* An ENTRIES goes ahead of new data only while the blocks offered but not
 * yet sent once would run out before the next ENTRIES' verdicts come, a
 * lost one's included: ENTRIES_LEAD_RTTS round trips of blocks at the
 * current rate (one for the verdicts; a PTO and one more when an ENTRIES
 * or its VERDICTS is lost, since first transmissions wait at an entry
 * without verdict). Sent first always, the ENTRIES of a whole window
 * would hold the data back for as long as they take at the controller's
 * first, low rate (256 ENTRIES: a third of a second), though the first
 * verdicts came a round trip after the first ENTRIES. */
static int entries_urgent(const aftp_sender *s)
{
    if (s->resend_from != 0)
        return 1;
    double rtt_s = (double)(s->rtt.has_sample ? s->rtt.smoothed : s->rtt.initial) / 1e9;
    double lead = (double)aftp_pacer_rate(&s->pacer) / 8.0 / s->ss.max_datagram *
                  ENTRIES_LEAD_RTTS * rtt_s;
    return (double)(s->offered_end - s->next_block) < lead + 1.0;
}

static int new_block_ready(const aftp_sender *s)
{
    if (s->mode == MODE_PIPELINED)
        return s->cursor_ready;
    return s->phase == PHASE_DATA && s->next_block < s->block_count;
}

/* ---- the tail (section 9.9.1) ---- */

/* Pipelined: the application finished and the first transmissions
 * passed its last entry (every FILE_DONE is due or out). */
static int first_transmissions_over(const aftp_sender *s)
{
    return s->finished && !s->cursor_ready && !s->cursor_busy &&
           s->cursor_entry > s->entries.newest;
}

/* Every block went out once and no more will come: the file's FILE_DONE
 * is due or out (one-file), or the application finished and the last
 * entry's blocks are all sent (pipelined). */
static int all_blocks_sent(const aftp_sender *s)
{
    if (s->mode == MODE_PIPELINED)
        return s->first_sent > 0 && first_transmissions_over(s);
    return s->phase == PHASE_WAIT_RESULT && s->first_sent > 0;
}

/* Second copies are made only on a path that lost blocks in this
 * session, and only one per TAIL_COPY_SHARE first transmissions: the
 * retransmitted share grows by at most 1/TAIL_COPY_SHARE. */
static int tail_budget_left(const aftp_sender *s)
{
    return s->data_declared_lost > 0 && s->tail_copies < s->first_sent / TAIL_COPY_SHARE;
}

/* Says whether a second copy of a tail repair is due (tail_ready): only
 * in the tail (one-file: not once the file ended and the next is
 * offered); copies of repairs whose blocks were acknowledged or ended
 * since are dropped. */
static void prepare_tail(aftp_sender *s)
{
    s->tail_ready = 0;
    if (!all_blocks_sent(s))
        return;
    uint64_t b;
    while (aftp_repairq_peek(&s->tail_dups, &b) && (b < s->acked_cum || !repairable(s, b)))
        aftp_repairq_pop(&s->tail_dups, &b);
    s->tail_ready = aftp_repairq_len(&s->tail_dups) > 0 && tail_budget_left(s);
}

/* The last FILE_DONE goes once more (section 9.9.1): lost, it left the
 * receiver unable to verify until the control timer resent it, a PTO or
 * more later. */
static void copy_last_done(aftp_sender *s)
{
    if (s->mode != MODE_PIPELINED) {
        s->done_due = 1;
        return;
    }
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, s->entries.newest);
    if (e != NULL && e->state == AFTP_ENTRYQ_DONE_SENT && !e->done_due) {
        e->done_due = 1;
        s->done_due++;
    }
}

/* A repair that leaves in the tail gets a second copy when capacity is
 * idle: a lost tail repair would cost the whole session a detection round
 * more (a loss delay and a FEEDBACK), which a second copy saves unless it
 * is lost too. The first also sends the FILE_DONE again, a few ms after
 * the first (the tail's repairs follow the losses the path has), under
 * the copies' bound. */
static void tail_repair_sent(aftp_sender *s, uint64_t block)
{
    if (!all_blocks_sent(s))
        return;
    aftp_repairq_push(&s->tail_dups, block);
    if (!s->tail_done_copied && tail_budget_left(s))
        copy_last_done(s);
    s->tail_done_copied = 1;
}

/* A copy counts as declared lost as it leaves: a lost copy is never
 * declared (its block is not missing), and the settled count (10.1) would
 * otherwise lag one packet behind for each, until the tail's RTT samples
 * came from packets long acknowledged; an arriving copy puts the count
 * one ahead instead, which only makes a sample look less overtaken. */
static uint64_t take_tail_copy(aftp_sender *s)
{
    uint64_t b;
    aftp_repairq_pop(&s->tail_dups, &b);
    s->tail_copies++;
    s->data_declared_lost++;
    return b;
}

/* What the next datagram would be, in priority order: control first, then
 * repairs, then new blocks, then a probe (sections 9.7, 10.4). */
/* The server of a pull, before its reply is out (section 9.15.3): the
 * HELLO_ACK, then the PULL_REPLY, and nothing else before the reply. 1
 * and *kind when this decides. */
static int pull_output(const aftp_sender *s, int *kind)
{
    *kind = OUT_NONE;
    if (s->ss.state == AFTP_STATE_CLOSED) /* answering the client's CLOSE */
        return 0;
    if (!aftp_hello_server_may_send(&s->srv, &s->ss)) /* section 14.3 */
        return 1;
    if (s->ss.state == AFTP_STATE_CLOSING)
        return 0;
    if (s->srv.ack_due)
        *kind = OUT_HELLO_ACK;
    else if (s->reply_due)
        *kind = OUT_PULL_REPLY;
    else if (s->ss.state == AFTP_STATE_HANDSHAKE && s->pull == PULL_REPLIED && entries_due(s))
        *kind = OUT_ENTRIES; /* message 1's request was answered (12.3.4) */
    return *kind != OUT_NONE || s->ss.state != AFTP_STATE_TRANSFER || s->pull == PULL_WAITING;
}

static int next_output(const aftp_sender *s)
{
    int kind;
    if (s->pull != PULL_NONE && pull_output(s, &kind))
        return kind;
    switch (s->ss.state) {
    case AFTP_STATE_CLOSING:
    case AFTP_STATE_CLOSED: return s->ss.close_due ? OUT_CLOSE : OUT_NONE;
    case AFTP_STATE_HANDSHAKE: return s->hello_due ? OUT_HELLO : OUT_NONE;
    case AFTP_STATE_TRANSFER: break;
    default: return OUT_NONE;
    }
    if (s->offer_due)
        return OUT_OFFER;
    int entries = entries_due(s);
    if (entries && entries_urgent(s))
        return OUT_ENTRIES;
    if (s->done_due)
        return OUT_DONE;
    if (s->end_due)
        return OUT_PULL_END;
    /* DATA beyond the controller's inflight cap waits for FEEDBACK; probes
     * do not, so a path that went silent is still asked. */
    int may_send_data = aftp_cc_may_send(&s->cc);
    if (may_send_data && aftp_repairq_len(&s->repairs) > 0)
        return OUT_REPAIR;
    if (may_send_data && new_block_ready(s))
        return OUT_NEW;
    if (entries)
        return OUT_ENTRIES;
    if (s->probe_due)
        return OUT_PROBE;
    if (may_send_data && s->tail_ready)
        return OUT_COPY;
    return OUT_NONE;
}

/* The record entry `id` would have in the first ENTRIES, base `base`
 * (the entry itself stays queued): 0 when it cannot ride in message 1
 * (not added yet, or a hole list still to be fitted). */
static int early_record(aftp_sender *s, uint32_t id, uint64_t base, aftp_wire_entry *rec,
                        uint64_t *blocks)
{
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
    if (e == NULL || e->state != AFTP_ENTRYQ_QUEUED || e->hole_bytes != NULL)
        return 0;
    aftp_entryq_item copy = *e;
    copy.base = base;
    *blocks = 0;
    if (copy.info.kind == AFTP_ENTRY_FILE) {
        if (copy.info.file.block_size == 0)
            copy.info.file.block_size = largest_block(s);
        *blocks = aftp_wire_block_count(copy.info.file.size, copy.info.file.block_size);
    }
    aftp_entryq_record(&copy, rec);
    return 1;
}

/* Section 12.3.4: the first entries, as many as message 1's payload
 * holds, ride in the first HELLO, with the records the first ENTRIES
 * would carry (the same block size: the server takes them only when the
 * negotiated datagram is this side's own). They stay queued until the
 * HELLO_ACK says the server took them. */
static void offer_early_entries(aftp_sender *s)
{
    aftp_wire_entry recs[AFTP_HS_MAX_PAYLOAD / AFTP_WIRE_ENTRY_FIXED];
    uint8_t body[AFTP_HS_MAX_PAYLOAD];
    size_t room = sizeof body - 2, len = 0;
    uint64_t base = 0, blocks = 0;
    uint16_t count = 0;
    if (s->mode != MODE_UNKNOWN || s->set.no_early_entries)
        return;
    while (count < sizeof recs / sizeof recs[0] && count < s->set.pipeline_window &&
           early_record(s, count + 1u, base, &recs[count], &blocks) &&
           aftp_wire_entry_len(&recs[count]) <= room) {
        room -= aftp_wire_entry_len(&recs[count]);
        base += blocks;
        count++;
    }
    aftp_wire_entries en = {.count = count, .entries = recs};
    if (count > 0 && aftp_wire_early_entries_encode(&en, body, sizeof body, &len) == AFTP_OK &&
        aftp_hello_client_set_early(&s->hello, body, len))
        s->early_count = count;
}

/* Section 12.3.4: the server took message 1's entries: they are offered
 * now as if the first ENTRIES had carried them (same records), waiting
 * for the verdicts that follow the HELLO_ACK, resent like any ENTRIES'
 * when those do not come. */
static void early_entries_taken(aftp_sender *s)
{
    aftp_wire_entry rec;
    for (uint32_t id = 1; id <= s->early_count; id++)
        take_entry(s, id, 0, SIZE_MAX, &rec);
    arm_control_timer(s);
}

static int encode_hello(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    s->hello_due = 0;
    arm_timer(s);
    if (s->hello_sends == 0)
        offer_early_entries(s);
    if (s->hello_sends++ == 0)
        s->hello_sent_ns = s->ss.now_ns;
    return aftp_hello_client_encode(&s->hello, &s->ss, buf, cap, dg);
}

static int encode_offer(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    const aftp_file_info *info = &current_file(s)->info;
    aftp_wire_packet p;
    aftp_session_packet(&s->ss, AFTP_WIRE_FILE_OFFER, &p);
    aftp_wire_file_offer *o = &p.u.file_offer;
    o->file_id = info->file_id;
    o->size = info->size;
    o->mtime_ns = info->mtime_ns;
    o->mode = info->mode;
    o->block_size = info->block_size;
    o->flags = info->overwrite ? AFTP_WIRE_OFFER_OVERWRITE : 0;
    o->path_len = (uint16_t)strlen(info->path);
    o->path = (const uint8_t *)info->path;
    s->offer_due = 0;
    return aftp_session_encode(&s->ss, &p, buf, cap, dg);
}

/* Pipelined: the control timer runs while anything it resends is out. */
static void arm_control_timer(aftp_sender *s)
{
    if (s->ctl_deadline == AFTP_NO_EXPIRY)
        s->ctl_deadline = s->ss.now_ns + aftp_rtt_pto_backoff(&s->rtt, s->ctl_backoff);
}

/* The pipelined entry whose FILE_DONE is due, oldest first. */
static aftp_entryq_item *first_done_due(aftp_sender *s)
{
    for (uint32_t id = s->entries.oldest; id <= s->entries.newest; id++) {
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e->done_due)
            return e;
    }
    return NULL;
}

static int encode_done(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    aftp_wire_packet p;
    aftp_session_packet(&s->ss, AFTP_WIRE_FILE_DONE, &p);
    if (s->mode == MODE_PIPELINED) {
        aftp_entryq_item *e = first_done_due(s);
        if (e->state == AFTP_ENTRYQ_ABANDONED) {
            aftp_session_packet(&s->ss, AFTP_WIRE_ABANDON, &p);
            p.u.abandon = (aftp_wire_abandon){e->info.file.file_id, e->abandon_error};
        } else {
            p.u.file_done.file_id = e->info.file.file_id;
            p.u.file_done.block_count = e->blocks;
            memcpy(p.u.file_done.digest, e->digest, AFTP_DIGEST_LEN);
            e->state = AFTP_ENTRYQ_DONE_SENT;
        }
        e->done_due = 0;
        e->sent_ns = s->ss.now_ns;
        e->sent_pn = s->ss.next_pn; /* this FILE_DONE */
        s->done_due--;
        arm_control_timer(s);
        pull_end_check(s, 1);
    } else {
        p.u.file_done.file_id = current_file(s)->info.file_id;
        p.u.file_done.block_count = s->block_count;
        memcpy(p.u.file_done.digest, s->digest, AFTP_DIGEST_LEN);
        s->done_due = 0;
    }
    arm_timer(s);
    return aftp_session_encode(&s->ss, &p, buf, cap, dg);
}

/* ---- pipelined output (section 9.14) ---- */

/* The next entry, from `from` on, still waiting for its verdict; 0: none. */
static uint32_t next_offered(aftp_sender *s, uint32_t from)
{
    if (from < s->entries.oldest)
        from = s->entries.oldest;
    for (uint32_t id = from; id <= s->stream.newest; id++) {
        const aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        if (e != NULL && e->state == AFTP_ENTRYQ_OFFERED && e->sent_ns <= s->resend_before)
            return id;
    }
    return 0;
}

/* Section 9.14.2: an entry offered for the first time takes its place at
 * the end of the stream; the table of verdict rules learns it. */
static void place_entry(aftp_sender *s, aftp_entryq_item *e)
{
    aftp_wire_entry rec;
    e->base = s->offered_end;
    e->blocks = e->info.kind == AFTP_ENTRY_FILE
                    ? aftp_wire_block_count(e->info.file.size, e->info.file.block_size)
                    : 0;
    s->offered_end += e->blocks;
    e->state = AFTP_ENTRYQ_OFFERED;
    aftp_entryq_record(e, &rec);
    aftp_stream_add(&s->stream, &rec, NULL, 0); /* in order, in the window: always added */
}

/* Bytes an ENTRIES leaves for its records. */
static size_t entries_room(const aftp_sender *s)
{
    return s->ss.max_datagram - AFTP_WIRE_HEADER_LEN - 2 - aftp_session_overhead(&s->ss);
}

/* The entry record of `id` for the next ENTRIES, when it is one: an
 * OFFERED entry in a resend round, else a queued one inside the window
 * (placed in the stream now, its hole list fixed to fit an ENTRIES of
 * its own). 0 when the run ends here. */
static int take_entry(aftp_sender *s, uint32_t id, int resend, size_t room, aftp_wire_entry *rec)
{
    aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
    if (e == NULL || e->state != (resend ? AFTP_ENTRYQ_OFFERED : AFTP_ENTRYQ_QUEUED) ||
        (resend && e->sent_ns > s->resend_before))
        return 0;
    if (!resend && (uint64_t)id >= (uint64_t)s->stream.oldest + s->stream.window)
        return 0;
    if (e->info.kind == AFTP_ENTRY_FILE && e->info.file.block_size == 0)
        e->info.file.block_size = largest_block(s);
    aftp_entryq_place_holes(e, entries_room(s));
    aftp_entryq_record(e, rec);
    if (aftp_wire_entry_len(rec) > room)
        return 0;
    if (!resend)
        place_entry(s, e);
    aftp_entryq_record(e, rec); /* with its base */
    e->sent_ns = s->ss.now_ns;
    e->sent_pn = s->ss.next_pn; /* the ENTRIES being built */
    return 1;
}

/* One ENTRIES: a run of consecutive entries, as many as fit the datagram
 * (section 9.14.3), resends first. */
static int encode_entries(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    size_t room = entries_room(s);
    int resend = s->resend_from != 0;
    uint32_t id = resend ? s->resend_from : s->stream.newest + 1;
    uint16_t count = 0;
    while (count < AFTP_WIRE_MAX_ENTRIES && take_entry(s, id, resend, room, &s->records[count])) {
        room -= aftp_wire_entry_len(&s->records[count]);
        count++;
        id++;
    }
    if (resend)
        s->resend_from = next_offered(s, id);
    if (count == 0) {
        char why[AFTP_WIRE_MAX_REASON];
        snprintf(why, sizeof why, "entry %" PRIu32 " needs an ENTRIES record of more than the "
                 "%zu bytes a %u-byte datagram leaves: shorten its path or target", id, room,
                 (unsigned)s->ss.max_datagram);
        fail_and_close_saying(s, AFTP_ERR_LIMIT, why);
        return AFTP_ERR_LIMIT;
    }
    arm_control_timer(s);
    pull_end_check(s, 1);
    aftp_wire_packet p;
    aftp_session_packet(&s->ss, AFTP_WIRE_ENTRIES, &p);
    p.u.entries.count = count;
    p.u.entries.entries = s->records;
    return aftp_session_encode(&s->ss, &p, buf, cap, dg);
}

/* A hole block's bytes, for the digest: zeros, never read from the source. */
static void hash_zeros(aftp_digest *hash, uint32_t len)
{
    static const uint8_t zeros[4096];
    for (uint32_t n; len > 0; len -= n) {
        n = len < sizeof zeros ? len : (uint32_t)sizeof zeros;
        aftp_digest_update(hash, zeros, n);
    }
}

/* The first transmissions pass the blocks RESUME said are held, reading
 * them through `view` for the digest only, and the hole blocks, hashed as
 * zeros (section 9.14.2, 6.13). */
static int hash_held_blocks(aftp_sender *s, const aftp_entryq_item *e)
{
    const aftp_file_info *f = &e->info.file;
    for (unsigned step = 0; s->next_block < e->base + e->blocks &&
                            aftp_entryq_is_held(e, s->next_block - e->base);
         step++) {
        if (step == HASH_STEP_BLOCKS) {
            s->cursor_busy = 1; /* the next call goes on */
            return AFTP_OK;
        }
        uint64_t file_block = s->next_block - e->base;
        uint32_t len = aftp_wire_block_len(f->size, f->block_size, file_block);
        const uint8_t *bytes;
        if (aftp_entryq_in_hole(e, file_block)) {
            hash_zeros(s->hash, len);
        } else {
            int rc = s->set.storage->view(s->set.user, f->file_id, file_block * f->block_size,
                                          len, &bytes);
            if (rc != AFTP_OK) {
                s->view_failed = f->file_id;
                return rc;
            }
            aftp_digest_update(s->hash, bytes, len);
        }
        s->next_block++;
    }
    return AFTP_OK;
}

static void next_cursor_entry(aftp_sender *s)
{
    s->cursor_entry++;
    s->cursor_started = 0;
}

/* Moves the first transmissions (section 9.14.2) to the next block to
 * send: past ended entries and held blocks, finishing each file's digest
 * and queuing its FILE_DONE on the way; it stops at an entry that waits
 * for its verdict, or at the newest offered. */
static int advance_cursor(aftp_sender *s)
{
    s->cursor_ready = s->cursor_busy = 0;
    for (;;) {
        if (s->cursor_entry < s->entries.oldest) {
            s->cursor_entry = s->entries.oldest;
            s->cursor_started = 0;
        }
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, s->cursor_entry);
        if (e == NULL || s->cursor_entry > s->stream.newest || e->state == AFTP_ENTRYQ_OFFERED)
            return AFTP_OK;
        if (e->state != AFTP_ENTRYQ_SENDING) {
            next_cursor_entry(s);
            continue;
        }
        if (!s->cursor_started) {
            s->next_block = e->base;
            aftp_digest_reset(s->hash);
            s->cursor_started = 1;
        }
        int rc = hash_held_blocks(s, e);
        if (rc != AFTP_OK || s->cursor_busy)
            return rc;
        if (s->next_block < e->base + e->blocks) {
            s->cursor_ready = 1;
            return AFTP_OK;
        }
        aftp_digest_final(s->hash, e->digest);
        e->done_due = 1;
        s->done_due++;
        next_cursor_entry(s);
    }
}

/* Before choosing a pipelined datagram: repairs and a probe of blocks
 * whose entry ended since are dropped (nothing is sent for a held block),
 * a finished resend round ends, the first transmissions move on. */
static int prepare_stream(aftp_sender *s)
{
    uint64_t b;
    if (s->mode != MODE_PIPELINED || s->ss.state != AFTP_STATE_TRANSFER)
        return AFTP_OK;
    while (aftp_repairq_peek(&s->repairs, &b) && sendable_entry(s, b) == NULL)
        aftp_repairq_pop(&s->repairs, &b);
    if (s->probe_due && sendable_entry(s, s->last_new_block) == NULL)
        s->probe_due = 0;
    if (s->resend_from != 0)
        s->resend_from = next_offered(s, s->resend_from);
    return advance_cursor(s);
}

/* Fills dg with a DATA datagram whose 28-byte head is in buf: protected,
 * the payload sealed from the storage view into buf after the head (the
 * tag after it), head only; unprotected, the payload borrowed from
 * storage (zero copy). */
static int seal_data(aftp_sender *s, const uint8_t *payload, uint32_t len, uint8_t *buf,
                     aftp_datagram *dg)
{
    size_t head_len = AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED;
    *dg = (aftp_datagram){.head = buf, .head_len = head_len, .payload = payload,
                          .payload_len = len};
    if (!aftp_session_protected(&s->ss))
        return AFTP_OK;
    int rc = aftp_protect_seal(&s->ss.prot, buf, AFTP_AEAD_AD_DATA, payload, len, buf + head_len);
    *dg = (aftp_datagram){.head = buf,
                          .head_len = head_len + len + aftp_session_overhead(&s->ss)};
    return rc;
}

/* One DATA datagram for `block`; *plain gets the payload's clear bytes
 * (the storage view), len bytes. */
static int encode_data(aftp_sender *s, uint64_t block, uint8_t *buf, size_t cap,
                       aftp_datagram *dg, const uint8_t **plain, uint32_t *plain_len)
{
    /* One-file: the active file's block; pipelined: a stream block of the
     * entry that holds it (section 9.14.2). */
    const aftp_file_info *info;
    uint64_t file_block = block;
    if (s->mode == MODE_PIPELINED) {
        const aftp_entryq_item *e = sendable_entry(s, block);
        info = &e->info.file;
        file_block = block - e->base;
    } else {
        info = &current_file(s)->info;
    }
    uint32_t len = aftp_wire_block_len(info->size, info->block_size, file_block);
    const uint8_t *payload = NULL;
    int rc = s->set.storage->view(s->set.user, info->file_id, file_block * info->block_size,
                                  len, &payload);
    if (rc != AFTP_OK) {
        s->view_failed = info->file_id;
        return rc;
    }
    aftp_wire_header hdr;
    aftp_session_header(&s->ss, AFTP_WIRE_DATA, &hdr);
    rc = aftp_wire_data_header_encode(&hdr, info->file_id, block, buf, cap);
    if (rc == AFTP_OK)
        rc = seal_data(s, payload, len, buf, dg);
    if (rc != AFTP_OK)
        return rc;
    *plain = payload;
    *plain_len = len;
    s->emitted_block = block;
    aftp_session_sent(&s->ss, dg);
    s->ss.stats.payload_bytes_sent += len;
    return AFTP_OK;
}

static int emit_new_block(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    const uint8_t *plain;
    uint32_t len;
    int rc = encode_data(s, s->next_block, buf, cap, dg, &plain, &len);
    if (rc != AFTP_OK)
        return rc;
    /* First transmissions go in order, so one streaming state hashes the
     * whole file without a pre-pass (section 9.7). */
    aftp_digest_update(s->hash, plain, len);
    s->first_sent++;
    s->last_new_block = s->next_block++;
    if (s->mode == MODE_PIPELINED)
        return advance_cursor(s);
    if (s->next_block == s->block_count)
        data_sent_once(s);
    return AFTP_OK;
}

static int emit_repair(aftp_sender *s, uint64_t block, uint8_t *buf, size_t cap,
                       aftp_datagram *dg)
{
    const uint8_t *plain;
    uint32_t len;
    int rc = encode_data(s, block, buf, cap, dg, &plain, &len);
    if (rc == AFTP_OK)
        s->ss.stats.payload_bytes_retransmitted += len;
    return rc;
}

static int emit_copy(aftp_sender *s, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    uint64_t before = s->ss.stats.payload_bytes_retransmitted;
    int rc = emit_repair(s, take_tail_copy(s), buf, cap, dg);
    s->ss.stats.payload_bytes_copied += s->ss.stats.payload_bytes_retransmitted - before;
    return rc;
}

static int emit(aftp_sender *s, int kind, uint8_t *buf, size_t cap, aftp_datagram *dg)
{
    uint64_t block;
    switch (kind) {
    case OUT_CLOSE: return aftp_session_encode_close(&s->ss, buf, cap, dg);
    case OUT_HELLO: return encode_hello(s, buf, cap, dg);
    case OUT_HELLO_ACK: return aftp_hello_server_encode(&s->srv, &s->ss, buf, cap, dg);
    case OUT_PULL_REPLY: return encode_pull_reply(s, buf, cap, dg);
    case OUT_PULL_END: return encode_pull_end(s, buf, cap, dg);
    case OUT_OFFER: return encode_offer(s, buf, cap, dg);
    case OUT_ENTRIES: return encode_entries(s, buf, cap, dg);
    case OUT_DONE: return encode_done(s, buf, cap, dg);
    case OUT_REPAIR:
        aftp_repairq_pop(&s->repairs, &block);
        tail_repair_sent(s, block);
        return emit_repair(s, block, buf, cap, dg);
    case OUT_NEW: return emit_new_block(s, buf, cap, dg);
    case OUT_COPY: return emit_copy(s, buf, cap, dg);
    default:
        /* Section 10.4 probe: the last block sent, again, to draw a FEEDBACK. */
        s->probe_due = 0;
        return emit_repair(s, s->last_new_block, buf, cap, dg);
    }
}

/* Section 9.14.3: a pipelined entry whose source fails ends alone. It is
 * reported failed at once (FILE_END, ENTRY_END: the storage that failed
 * can tell the application why, during the callback), its source is
 * released, nothing more of it is sent, and an ABANDON is resent like a
 * FILE_DONE until the receiver's FILE_RESULT frees its slot. */
static void abandon_entry(aftp_sender *s, aftp_entryq_item *e, int error)
{
    e->state = AFTP_ENTRYQ_ABANDONED;
    e->abandon_error = aftp_errmap_to_wire(error);
    if (!e->done_due)
        s->done_due++;
    e->done_due = 1;
    s->set.storage->close(s->set.user, e->info.file.file_id, 0);
    entry_event(s, e, AFTP_EV_FILE_END, error, NULL, NULL);
    entry_event(s, e, AFTP_EV_ENTRY_END, error, NULL, NULL);
}

/* A storage view failed (or another step of the output did): in
 * pipelined mode the entry whose view failed is abandoned and the session
 * goes on; otherwise the file and the session end (section 9.4). */
static void source_failed(aftp_sender *s, int error)
{
    aftp_entryq_item *e = s->mode == MODE_PIPELINED && s->view_failed != 0
                              ? aftp_entryq_find(&s->entries, s->view_failed)
                              : NULL;
    if (e != NULL && (e->state == AFTP_ENTRYQ_SENDING || e->state == AFTP_ENTRYQ_DONE_SENT))
        abandon_entry(s, e, error);
    else
        fail_and_close(s, error);
}

int aftp_sender_write(aftp_sender *s, uint64_t now_ns, uint8_t *buf, size_t cap,
                      aftp_datagram *dg)
{
    if (s == NULL || buf == NULL || dg == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (cap < s->ss.own_max_datagram)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    aftp_session_tick(&s->ss, now_ns);
    s->view_failed = 0;
    int rc = prepare_stream(s);
    if (rc != AFTP_OK) {
        source_failed(s, rc);
        return 0;
    }
    prepare_tail(s);
    int kind = next_output(s);
    /* The answer to the peer's CLOSE leaves at once: the driver stops
     * once the session is CLOSED and this write is its last. */
    int paced = s->ss.state != AFTP_STATE_CLOSED;
    if (kind == OUT_NONE || (paced && !aftp_pacer_ready(&s->pacer, s->ss.now_ns)))
        return 0;
    s->emitted_block = AFTP_SENTLOG_NO_BLOCK;
    rc = emit(s, kind, buf, cap, dg);
    if (rc != AFTP_OK) {
        source_failed(s, rc);
        return 0;
    }
    /* Every packet is logged, so log and session number packets alike. */
    aftp_sentlog_add(&s->log, s->ss.now_ns, s->emitted_block);
    uint64_t bytes = dg->head_len + dg->payload_len;
    aftp_pacer_on_send(&s->pacer, s->ss.now_ns, bytes);
    aftp_cc_on_sent(&s->cc, s->ss.now_ns, s->ss.next_pn - 1, bytes,
                    s->emitted_block != AFTP_SENTLOG_NO_BLOCK);
    sync_pacer(s);
    return 1;
}

/* ---- timers ---- */

uint64_t aftp_sender_expiry(const aftp_sender *s)
{
    if (s == NULL || s->ss.state == AFTP_STATE_CLOSED)
        return AFTP_NO_EXPIRY;
    uint64_t t = aftp_session_expiry(&s->ss);
    /* The timers handle_expiry runs only before closing (the control
     * timer, pipelined mode's too): once closing, one still armed must not
     * hold the expiry at a time already past. */
    if (s->ss.state != AFTP_STATE_CLOSING && s->timer_deadline < t)
        t = s->timer_deadline;
    if (s->mode == MODE_PIPELINED && s->ss.state == AFTP_STATE_TRANSFER && s->ctl_deadline < t)
        t = s->ctl_deadline;
    if (s->cursor_busy && s->ss.state == AFTP_STATE_TRANSFER)
        t = s->ss.now_ns; /* hashing a resumed file: the next step is due now */
    if (s->pull == PULL_REPLIED && s->ss.state == AFTP_STATE_TRANSFER && s->reply_deadline < t)
        t = s->reply_deadline;
    if (early_request_pending(s))
        t = s->ss.now_ns;
    if (next_output(s) != OUT_NONE && aftp_pacer_next_send(&s->pacer) < t)
        t = aftp_pacer_next_send(&s->pacer);
    return t;
}

/* Pipelined (section 9.14.3), the control timer: the ENTRIES still
 * without verdict and the FILE_DONE still without FILE_RESULT that left a
 * PTO ago or more are resent; the timer backs off only when nothing was
 * answered since it last fired. */
static void control_timeout(aftp_sender *s)
{
    s->ctl_backoff = s->ctl_answered ? 0 : s->ctl_backoff + 1;
    s->ctl_answered = 0;
    uint64_t pto = aftp_rtt_pto(&s->rtt);
    s->resend_before = s->ss.now_ns > pto ? s->ss.now_ns - pto : 0;
    /* The next expiry is a PTO (backed off) after the earliest of what
     * stays unanswered left (now, for what is resent now): one that left
     * just after resend_before is due then, not two PTOs from its send,
     * as a timer re-armed a PTO from now would make it. */
    uint64_t earliest = AFTP_NO_EXPIRY;
    for (uint32_t id = s->entries.oldest; id <= s->stream.newest; id++) {
        aftp_entryq_item *e = aftp_entryq_find(&s->entries, id);
        int resend = e->sent_ns <= s->resend_before;
        int answer_due = e->state == AFTP_ENTRYQ_DONE_SENT || e->state == AFTP_ENTRYQ_ABANDONED;
        if (answer_due && !e->done_due && resend) {
            e->done_due = 1;
            s->done_due++;
        }
        if (e->state != AFTP_ENTRYQ_OFFERED && !answer_due)
            continue;
        uint64_t left = resend || e->done_due ? s->ss.now_ns : e->sent_ns;
        if (left < earliest)
            earliest = left;
    }
    s->resend_from = next_offered(s, s->entries.oldest);
    s->ctl_deadline = AFTP_NO_EXPIRY;
    /* Never less than the PTO the cut-off above uses (the backed-off one
     * stops at 2 s, a PTO need not), so the next expiry finds the earliest
     * due and never lies in the past. */
    uint64_t wait = aftp_rtt_pto_backoff(&s->rtt, s->ctl_backoff);
    if (earliest != AFTP_NO_EXPIRY)
        s->ctl_deadline = earliest + (wait > pto ? wait : pto);
}

/* Pipelined, the data timer: probe when data is unanswered and nothing
 * else can go (section 10.4). */
static void stream_timeout(aftp_sender *s)
{
    if (s->first_sent > 0 && s->last_new_block >= s->acked_cum &&
        (aftp_repairq_len(&s->repairs) == 0 || !aftp_cc_may_send(&s->cc)))
        s->probe_due = 1;
    else
        s->timer_deadline = AFTP_NO_EXPIRY;
}

/* The control timer fired: resend what is unanswered, or probe (sections 10.2, 10.4). */
static void on_control_timeout(aftp_sender *s)
{
    s->backoff++;
    arm_timer(s);
    if (s->ss.state == AFTP_STATE_HANDSHAKE) {
        s->hello_due = 1;
        return;
    }
    if (s->mode == MODE_PIPELINED) {
        stream_timeout(s);
        return;
    }
    switch (s->phase) {
    case PHASE_OFFER: s->offer_due = 1; break;
    case PHASE_WAIT_RESULT: s->done_due = 1; break;
    case PHASE_DATA:
        /* Probe when nothing else can go: no repair, or the inflight cap
         * holds everything back until a FEEDBACK. */
        if (s->next_block > s->acked_cum &&
            (aftp_repairq_len(&s->repairs) == 0 || !aftp_cc_may_send(&s->cc)))
            s->probe_due = 1;
        break;
    default: s->timer_deadline = AFTP_NO_EXPIRY; break;
    }
}

int aftp_sender_handle_expiry(aftp_sender *s, uint64_t now_ns)
{
    if (s == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&s->ss, now_ns);
    switch (aftp_session_timer_due(&s->ss, s->ss.now_ns)) {
    case AFTP_SESSION_TIMER_DRAINED:
        close_now(s, s->ss.error);
        return s->ss.error;
    case AFTP_SESSION_TIMER_IDLE:
        /* Section 9.12: the peer is gone; no CLOSE. */
        aftp_session_set_text(&s->ss, s->ss.state == AFTP_STATE_HANDSHAKE
                                          ? "no answer from the receiver"
                                          : "the receiver stopped answering");
        close_now(s, AFTP_ERR_IDLE_TIMEOUT);
        return AFTP_ERR_IDLE_TIMEOUT;
    default: break;
    }
    if (s->ss.state != AFTP_STATE_CLOSING && s->ss.now_ns >= s->timer_deadline)
        on_control_timeout(s);
    if (s->ss.state == AFTP_STATE_TRANSFER && s->mode == MODE_PIPELINED &&
        s->ss.now_ns >= s->ctl_deadline)
        control_timeout(s);
    if (s->pull == PULL_REPLIED && s->ss.state == AFTP_STATE_TRANSFER &&
        s->ss.now_ns >= s->reply_deadline) {
        s->reply_backoff++; /* section 9.15.2: until the client confirms it */
        s->reply_deadline = AFTP_NO_EXPIRY;
        s->reply_due = 1;
    }
    if (early_request_pending(s))
        on_pull_request(s, &s->early_request);
    return AFTP_OK;
}

/* ---- queries ---- */

int aftp_sender_state(const aftp_sender *s)
{
    return s ? s->ss.state : AFTP_STATE_CLOSED;
}

int aftp_sender_error(const aftp_sender *s)
{
    return s ? s->ss.error : AFTP_ERR_INVALID_ARGUMENT;
}

void aftp_sender_get_stats(const aftp_sender *s, aftp_stats *out)
{
    if (s == NULL || out == NULL)
        return;
    aftp_session_stats(&s->ss, &s->rtt, out);
    aftp_cc_stats(&s->cc, out);
    out->rate_cap_bps = s->rate_cap_bps;
}

int aftp_sender_abort(aftp_sender *s, uint64_t now_ns, int error, const char *reason)
{
    if (s == NULL || error >= AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (s->ss.state == AFTP_STATE_CLOSING || s->ss.state == AFTP_STATE_CLOSED)
        return AFTP_OK;
    aftp_session_tick(&s->ss, now_ns);
    if (reason != NULL)
        aftp_session_set_text(&s->ss, reason);
    fail_and_close(s, error);
    return AFTP_OK;
}

int aftp_sender_abandon(aftp_sender *s, uint32_t entry_id, int error)
{
    if (s == NULL || error >= AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_entryq_item *e = s->mode == MODE_PIPELINED && s->ss.state == AFTP_STATE_TRANSFER
                              ? aftp_entryq_find(&s->entries, entry_id)
                              : NULL;
    if (e == NULL || (e->state != AFTP_ENTRYQ_SENDING && e->state != AFTP_ENTRYQ_DONE_SENT))
        return AFTP_ERR_INVALID_STATE;
    abandon_entry(s, e, error);
    return AFTP_OK;
}

int aftp_sender_set_rate_limits(aftp_sender *s, uint64_t min_rate_bps, uint64_t max_rate_bps)
{
    if (s == NULL || (max_rate_bps != 0 && max_rate_bps < min_rate_bps))
        return AFTP_ERR_INVALID_ARGUMENT;
    s->set.min_rate_bps = min_rate_bps;
    s->set.max_rate_bps = max_rate_bps;
    aftp_cc_set_limits(&s->cc, min_rate_bps, effective_max_rate(s));
    sync_pacer(s);
    return AFTP_OK;
}

int aftp_sender_set_rate_cap(aftp_sender *s, uint64_t cap_bps, uint64_t now_ns)
{
    if (s == NULL || cap_bps == 0)
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_session_tick(&s->ss, now_ns);
    /* A pull's client asked for no more than its max_rate: that stays. */
    obey_rate_cap(s, lower_limit(cap_bps, s->client_max_bps));
    return AFTP_OK;
}

void aftp_sender_cancel(aftp_sender *s, uint64_t now_ns)
{
    aftp_sender_abort(s, now_ns, AFTP_ERR_CANCELLED, NULL); /* section 9.13 */
}
