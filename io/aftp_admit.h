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
#include "common/aftp_keyfile.h"

#define AFTP_ADMIT_MAX_CLIENTS 4096u
#define AFTP_ADMIT_RECENT 16u                         /* timestamps kept per client */
#define AFTP_ADMIT_WINDOW_NS (UINT64_C(10) * 1000000000u) /* reordering allowed */

typedef struct aftp_admit_seen {
    uint8_t key[AFTP_KEY_LEN];
    uint64_t latest_ns;                  /* latest timestamp accepted */
    uint64_t floor_ns;                   /* latest timestamp forgotten from `recent` */
    uint64_t recent[AFTP_ADMIT_RECENT];  /* accepted timestamps, unordered */
    unsigned recent_count;
    uint64_t last_use; /* admit->clock when last updated: eviction order */
} aftp_admit_seen;

typedef struct aftp_admit {
    const aftp_keyfile_list *keys; /* borrowed: the authorized keys */
    uint8_t psk[AFTP_KEY_LEN];     /* zeros: none */
    aftp_admit_seen *seen;
    size_t seen_count, seen_cap;
    uint64_t clock;
    /* the latest key refused, so the server can show it to its operator */
    uint8_t rejected[AFTP_KEY_LEN];
    int have_rejected;
} aftp_admit;

/* keys is borrowed for the admit's lifetime; psk (AFTP_KEY_LEN bytes, or
 * NULL) is copied and applies to every client. */
void aftp_admit_init(aftp_admit *a, const aftp_keyfile_list *keys, const uint8_t *psk);
/* Wipes the psk, frees the table. */
void aftp_admit_fini(aftp_admit *a);
/* The policy for aftp_security_settings.peers (user = a). */
aftp_peer_policy aftp_admit_policy(aftp_admit *a);

#endif /* AFTP_ADMIT_H */
