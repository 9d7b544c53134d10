/*
 * Packet protection of one session once the handshake is done (spec
 * section 14.5-14.6): the send key with its packet count, the receive keys
 * (current, next, previous), the replay window and the key updates.
 *
 * Sending: every packet is sealed under the current send key; after
 * `update_packets` packets the key moves to the next generation (the
 * KEY_PHASE bit flips), so no key ever seals more than
 * AFTP_HS_KEY_MAX_PACKETS.
 *
 * Receiving: a packet whose KEY_PHASE is the current one opens with the
 * current key. The other phase means either the peer updated (its pn is
 * above every pn the current key opened: try the precomputed next key,
 * and on success it becomes current) or the packet was sealed before the
 * update and arrived late (try the previous key). Forged packets never
 * move anything: the replay window and the keys change only after a
 * packet opened.
 *
 * Secrets and AEAD contexts live in sodium_malloc'd memory and are wiped
 * by aftp_protect_free. The state itself holds no key bytes.
 */
#ifndef AFTP_PROTECT_H
#define AFTP_PROTECT_H

#include <stddef.h>
#include <stdint.h>

#include "common/aftp_aead.h"
#include "common/aftp_handshake.h"
#include "common/aftp_replay.h"

typedef struct aftp_protect {
    uint8_t cipher;          /* AFTP_WIRE_CIPHER_*; 0 (NONE): not started */
    uint64_t update_packets; /* send packets per key */
    uint8_t *secrets;        /* sodium_malloc: send secret, receive secret of `next` */
    aftp_aead *send;
    uint64_t send_sealed;    /* packets sealed under `send` */
    aftp_aead *recv_cur, *recv_next, *recv_prev;
    int cur_opened;          /* recv_cur opened a packet... */
    uint64_t cur_max_pn;     /* ...and this is the highest pn it opened */
    aftp_replay replay;
    uint64_t key_updates;    /* generations moved to, both directions */
} aftp_protect;

/* Zeroed state: not started (aftp_protect_started is 0). */
void aftp_protect_init(aftp_protect *p);

/* Installs the traffic keys of a completed handshake for `cipher` (the
 * handshake may be wiped afterwards). update_packets 0 means
 * AFTP_HS_KEY_UPDATE_PACKETS; more than AFTP_HS_KEY_MAX_PACKETS is capped.
 * AFTP_ERR_INVALID_STATE (handshake not done), AFTP_ERR_INVALID_ARGUMENT
 * (cipher NONE or unavailable), AFTP_ERR_NO_MEMORY. */
int aftp_protect_start(aftp_protect *p, const aftp_handshake *hs, uint8_t cipher,
                       uint64_t update_packets);
/* Wipes and frees the keys; the state is "not started" again. */
void aftp_protect_free(aftp_protect *p);

int aftp_protect_started(const aftp_protect *p);
/* Bytes sealing adds to a datagram: the tag, or 0 when not started. */
size_t aftp_protect_overhead(const aftp_protect *p);

/* Seals a datagram in place (aftp_aead_seal_datagram) with the send key,
 * moving to the next key first when the current one is used up. */
int aftp_protect_seal_datagram(aftp_protect *p, uint8_t *dg, size_t len, size_t ad_len,
                               size_t cap, size_t *sealed_len);
/* Seals body_len bytes at body into out (aftp_aead_seal; out != body
 * allowed), ad being the first ad_len bytes of the datagram. */
int aftp_protect_seal(aftp_protect *p, uint8_t *ad, size_t ad_len, const uint8_t *body,
                      size_t body_len, uint8_t *out);

/* AFTP_OK when packet number pn could still be accepted (nothing
 * changes), AFTP_ERR_REPLAY otherwise. */
int aftp_protect_check(const aftp_protect *p, uint64_t pn);
/* Opens the len-byte datagram dg whose header says pn and key_phase: the
 * plaintext of its body (what follows the first ad_len bytes) goes to
 * body_out (len - ad_len - tag bytes, *body_len), never touching dg. On
 * success the replay window records pn and a key update of the peer is
 * followed. AFTP_ERR_REPLAY, AFTP_ERR_AUTH (body_out holds unauthenticated
 * or zeroed bytes), AFTP_ERR_TRUNCATED. */
int aftp_protect_open(aftp_protect *p, const uint8_t *dg, size_t len, size_t ad_len,
                      uint64_t pn, unsigned key_phase, uint8_t *body_out, size_t *body_len);

#endif /* AFTP_PROTECT_H */
