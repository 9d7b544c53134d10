/*
 * The server's admission policy (aftp_peer_policy): which client keys may
 * connect, the pre-shared key they must also hold, and the handshake
 * timestamps each client used lately, which make a recorded HELLO useless
 * (spec section 14.2.4).
 *
 * Replay rule per client key: a timestamp is accepted when it was not
 * accepted before and is later than both (latest accepted - the window)
 * and every timestamp this key's bounded list had to forget. So sessions
 * one key opens in parallel may arrive out of order within the window, an
 * exact repeat is always refused, and an old HELLO is refused once the
 * client moved on.
 *
 * Clock bound: a timestamp more than AFTP_ADMIT_MAX_AHEAD_NS ahead of this
 * server's wall clock is refused. One that is accepted ahead of it counts,
 * as "latest accepted", only up to the server's clock at that moment (the
 * exact value is still remembered, so a repeat of it is refused): a client
 * whose clock ran ahead once and was then set right is admitted again at
 * once, instead of being refused until its clock catches up with the
 * future it once sent (spec section 14.2.4).
 *
 * Sans-I/O: the server's wall clock (Unix time, as the handshake's
 * timestamps are) comes in, never read here. The engine's policy callback
 * (aftp_peer_policy.check_timestamp) carries no time, so the admit holds
 * a clock callback (aftp_admit_clock) that its policy asks once per
 * timestamp: the server's driver gives one that reads the wall clock
 * (io/run/aftp_wallclock.h), tests a virtual one they set.
 * aftp_admit_check_timestamp takes the time as an argument.
 *
 * Every refusal is recorded (aftp_admit.refusal) so the server can tell
 * its operator why a client was turned away: aftp_admit_explain.
 *
 * The timestamp table lives as long as the server process and holds at
 * most AFTP_ADMIT_MAX_CLIENTS keys; past that the least recently seen
 * client is forgotten (a replay of that client's older HELLO would then be
 * admitted once more: it only costs the server one handshake, since the
 * replayer cannot complete it without the client's keys).
 */
#ifndef AFTP_ADMIT_H
#define AFTP_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "common/aftp_handshake.h"
#include "common/aftp_keyfile_text.h"

#define AFTP_ADMIT_MAX_CLIENTS 4096u
#define AFTP_ADMIT_RECENT 16u                         /* timestamps kept per client */
#define AFTP_ADMIT_WINDOW_NS (UINT64_C(10) * 1000000000u) /* reordering allowed */
/* How far ahead of this server's clock a client's may be: far more than
 * hosts kept by NTP differ (milliseconds), and what a host left without
 * time synchronisation drifts in weeks; a clock further off is refused,
 * and the refusal says by how much. */
#define AFTP_ADMIT_MAX_AHEAD_NS (UINT64_C(60) * 1000000000u)

typedef struct aftp_admit_seen {
    uint8_t key[AFTP_KEY_LEN];
    uint64_t latest_ns;                  /* latest timestamp accepted, each capped at the
                                          * server's clock when it was accepted */
    uint64_t floor_ns;                   /* latest timestamp forgotten from `recent` */
    uint64_t recent[AFTP_ADMIT_RECENT];  /* accepted timestamps, unordered */
    unsigned recent_count;
    uint64_t last_use; /* aftp_admit.clock when last updated: eviction order */
} aftp_admit_seen;

/* Why a timestamp was refused. */
enum aftp_admit_refusal_kind {
    AFTP_ADMIT_NO_REFUSAL = 0,
    AFTP_ADMIT_AHEAD,    /* more than AFTP_ADMIT_MAX_AHEAD_NS ahead of the server's clock */
    AFTP_ADMIT_REPEATED, /* accepted before: a replayed HELLO */
    AFTP_ADMIT_OLD       /* not later than `bound`: a replay, or the client's clock went back */
};

/* The latest refusal of a timestamp. */
typedef struct aftp_admit_refusal {
    int kind;           /* enum aftp_admit_refusal_kind */
    uint8_t key[AFTP_KEY_LEN];
    uint64_t ts_ns;     /* the refused timestamp (Unix ns) */
    uint64_t now_ns;    /* the server's clock then */
    uint64_t bound_ns;  /* OLD: what it had to exceed */
} aftp_admit_refusal;

/* The server's wall clock: Unix time in ns. */
typedef struct aftp_admit_clock {
    uint64_t (*now_ns)(void *user);
    void *user;
} aftp_admit_clock;

typedef struct aftp_admit {
    const aftp_keyfile_list *keys; /* borrowed: the authorized keys (NULL: any) */
    uint8_t psk[AFTP_KEY_LEN];     /* zeros: none */
    aftp_admit_seen *seen;
    size_t seen_count, seen_cap;
    aftp_admit_clock wall_clock;
    uint64_t clock; /* counts updates of `seen`: its eviction order */
    /* the latest key refused, so the server can show it to its operator */
    uint8_t rejected[AFTP_KEY_LEN];
    int have_rejected;
    aftp_admit_refusal refusal; /* the latest timestamp refused */
} aftp_admit;

/* keys is borrowed for the admit's lifetime (NULL: every key is admitted,
 * for a server whose own admission hook decides, aftp_serve_opts.admit);
 * psk (AFTP_KEY_LEN bytes, or NULL) is copied and applies to every client;
 * wall_clock is what the policy asks for the time of each timestamp. */
void aftp_admit_init(aftp_admit *a, const aftp_keyfile_list *keys, const uint8_t *psk,
                     aftp_admit_clock wall_clock);
/* Wipes the psk, frees the table. */
void aftp_admit_fini(aftp_admit *a);
/* The replay and clock rules above for client_key's handshake timestamp
 * ts (AFTP_HS_TIMESTAMP_LEN bytes) at the server's wall clock now_ns:
 * AFTP_OK (remembered), AFTP_ERR_REPLAY (a->refusal says why), or
 * AFTP_ERR_NO_MEMORY. */
int aftp_admit_check_timestamp(aftp_admit *a, const uint8_t *client_key, const uint8_t *ts,
                               uint64_t now_ns);
/* The policy for aftp_security_settings.peers (user = a): its
 * check_timestamp is aftp_admit_check_timestamp at a->wall_clock's time. */
aftp_peer_policy aftp_admit_policy(aftp_admit *a);
/* The latest timestamp refusal in words, with its figures, for the
 * server's log: "its handshake timestamp is 3600.0 s ahead of this
 * server's clock ...". Empty when none was refused. */
void aftp_admit_explain(const aftp_admit *a, char *buf, size_t cap);

/* Why the latest key refused was (a->rejected): "its key is not
 * authorized (add the line 'aftp-x25519 <base64>' to PATH to admit it)",
 * PATH the authorized keys' file. */
void aftp_admit_explain_unknown(const aftp_admit *a, const char *authorized_path, char *buf,
                                size_t cap);

#endif /* AFTP_ADMIT_H */
