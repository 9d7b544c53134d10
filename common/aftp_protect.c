/* Per-session packet protection (aftp_protect.h). */
#include "common/aftp_protect.h"

#include <sodium.h>
#include <string.h>

#define SECRET_LEN AFTP_HS_KEY_LEN
#define SEND_SECRET(p) ((p)->secrets)
#define NEXT_RECV_SECRET(p) ((p)->secrets + SECRET_LEN)

void aftp_protect_init(aftp_protect *p)
{
    memset(p, 0, sizeof *p);
    aftp_replay_init(&p->replay);
}

/* The AEAD of one generation: key and IV from its secret. */
static int aead_from_secret(const uint8_t *secret, uint8_t cipher, unsigned key_phase,
                            aftp_aead **out)
{
    uint8_t key[AFTP_AEAD_KEY_LEN], iv[AFTP_AEAD_IV_LEN];
    aftp_hs_traffic_keys(secret, cipher, key, iv);
    int rc = aftp_aead_new(out, cipher, key, iv, key_phase);
    sodium_memzero(key, sizeof key);
    sodium_memzero(iv, sizeof iv);
    return rc;
}

static unsigned other_phase(const aftp_aead *a)
{
    return aftp_aead_key_phase(a) ^ 1u;
}

/* The receive key after recv_cur: secret of generation (current + 1). */
static int derive_next_recv(aftp_protect *p)
{
    aftp_hs_next_secret(NEXT_RECV_SECRET(p), NEXT_RECV_SECRET(p));
    return aead_from_secret(NEXT_RECV_SECRET(p), p->cipher, other_phase(p->recv_cur),
                            &p->recv_next);
}

static int install_keys(aftp_protect *p, const aftp_handshake *hs)
{
    uint64_t generation;
    int rc = aftp_handshake_secret(hs, AFTP_HS_SEND, SEND_SECRET(p), &generation);
    if (rc == AFTP_OK)
        rc = aftp_handshake_secret(hs, AFTP_HS_RECV, NEXT_RECV_SECRET(p), &generation);
    if (rc == AFTP_OK)
        rc = aftp_handshake_aead(hs, AFTP_HS_SEND, p->cipher, &p->send);
    if (rc == AFTP_OK)
        rc = aftp_handshake_aead(hs, AFTP_HS_RECV, p->cipher, &p->recv_cur);
    if (rc == AFTP_OK)
        rc = derive_next_recv(p);
    return rc;
}

int aftp_protect_start(aftp_protect *p, const aftp_handshake *hs, uint8_t cipher,
                       uint64_t update_packets)
{
    if (cipher == AFTP_WIRE_CIPHER_NONE || !aftp_aead_available(cipher))
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_protect_free(p);
    p->secrets = sodium_malloc(2 * SECRET_LEN);
    if (p->secrets == NULL)
        return AFTP_ERR_NO_MEMORY;
    p->cipher = cipher;
    if (update_packets == 0)
        update_packets = AFTP_HS_KEY_UPDATE_PACKETS;
    p->update_packets =
        update_packets < AFTP_HS_KEY_MAX_PACKETS ? update_packets : AFTP_HS_KEY_MAX_PACKETS;
    int rc = install_keys(p, hs);
    if (rc != AFTP_OK)
        aftp_protect_free(p);
    return rc;
}

void aftp_protect_free(aftp_protect *p)
{
    aftp_aead_del(p->send);
    aftp_aead_del(p->recv_cur);
    aftp_aead_del(p->recv_next);
    aftp_aead_del(p->recv_prev);
    if (p->secrets != NULL)
        sodium_free(p->secrets); /* wipes */
    aftp_protect_init(p);
}

int aftp_protect_started(const aftp_protect *p)
{
    return p->send != NULL;
}

size_t aftp_protect_overhead(const aftp_protect *p)
{
    return p->send != NULL ? aftp_aead_overhead(p->send) : 0;
}

/* Send key update (spec section 14.6): the next generation's secret,
 * KEY_PHASE flipped. */
static int rotate_send(aftp_protect *p)
{
    aftp_aead *next;
    aftp_hs_next_secret(SEND_SECRET(p), SEND_SECRET(p));
    int rc = aead_from_secret(SEND_SECRET(p), p->cipher, other_phase(p->send), &next);
    if (rc != AFTP_OK)
        return rc;
    aftp_aead_del(p->send);
    p->send = next;
    p->send_sealed = 0;
    p->key_updates++;
    return AFTP_OK;
}

/* The send key for one more packet: a fresh one once the count is used. */
static int send_key(aftp_protect *p)
{
    if (p->send == NULL)
        return AFTP_ERR_INVALID_STATE;
    if (p->send_sealed < p->update_packets)
        return AFTP_OK;
    return rotate_send(p);
}

/* One more packet went out under the send key when rc says it was sealed. */
static int count_sealed(aftp_protect *p, int rc)
{
    if (rc == AFTP_OK)
        p->send_sealed++;
    return rc;
}

int aftp_protect_seal_datagram(aftp_protect *p, uint8_t *dg, size_t len, size_t ad_len,
                               size_t cap, size_t *sealed_len)
{
    int rc = send_key(p);
    if (rc != AFTP_OK)
        return rc;
    return count_sealed(p, aftp_aead_seal_datagram(p->send, dg, len, ad_len, cap, sealed_len));
}

int aftp_protect_seal(aftp_protect *p, uint8_t *ad, size_t ad_len, const uint8_t *body,
                      size_t body_len, uint8_t *out)
{
    int rc = send_key(p);
    if (rc != AFTP_OK)
        return rc;
    return count_sealed(p, aftp_aead_seal(p->send, ad, ad_len, body, body_len, out));
}

int aftp_protect_check(const aftp_protect *p, uint64_t pn)
{
    return aftp_replay_check(&p->replay, pn);
}

/* The peer's key update took effect: next becomes current, the old
 * current stays for late packets, and the key after is prepared. A
 * failure to prepare it leaves recv_next NULL: packets of the following
 * generation then fail to open, which is safe. */
static void advance_recv(aftp_protect *p)
{
    aftp_aead_del(p->recv_prev);
    p->recv_prev = p->recv_cur;
    p->recv_cur = p->recv_next;
    p->recv_next = NULL;
    p->cur_opened = 0;
    p->key_updates++;
    (void)derive_next_recv(p);
}

int aftp_protect_open(aftp_protect *p, const uint8_t *dg, size_t len, size_t ad_len,
                      uint64_t pn, unsigned key_phase, uint8_t *body_out, size_t *body_len)
{
    if (p->send == NULL)
        return AFTP_ERR_INVALID_STATE;
    if (len < ad_len)
        return AFTP_ERR_TRUNCATED;
    int rc = aftp_replay_check(&p->replay, pn);
    if (rc != AFTP_OK)
        return rc;
    /* The other phase above everything the current key opened is the
     * peer's next generation; below it, a packet from before its update. */
    int is_next = key_phase != aftp_aead_key_phase(p->recv_cur) &&
                  (!p->cur_opened || pn > p->cur_max_pn);
    const aftp_aead *a = key_phase == aftp_aead_key_phase(p->recv_cur) ? p->recv_cur
                         : is_next                                      ? p->recv_next
                                                                        : p->recv_prev;
    if (a == NULL)
        return AFTP_ERR_AUTH;
    rc = aftp_aead_open(a, dg, ad_len, dg + ad_len, len - ad_len, body_out);
    if (rc != AFTP_OK)
        return rc;
    aftp_replay_accept(&p->replay, pn);
    if (is_next)
        advance_recv(p);
    if (a != p->recv_prev && (!p->cur_opened || pn > p->cur_max_pn)) {
        p->cur_opened = 1;
        p->cur_max_pn = pn;
    }
    *body_len = len - ad_len - aftp_aead_overhead(a);
    return AFTP_OK;
}
