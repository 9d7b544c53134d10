#include "aftp_explain.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "aftp_keyfile.h"
#include "proto/aftp_wire.h"

/* The message buffer of one explanation. */
typedef struct explain_out {
    char *buf;
    size_t cap;
} explain_out;

static void say(const explain_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const explain_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->buf, o->cap, fmt, ap);
    va_end(ap);
}

/* No HELLO_ACK: nobody there, or (protected) a server that cannot open
 * our handshake because it holds another key than the one we pinned: it
 * stays silent by design, so say both. A server that answered our key
 * request with the pinned key is there and holds that key: what else
 * makes it ignore a handshake (spec 14.2.5) is said instead. */
static void explain_no_answer(const aftp_explain_ctx *x, const aftp_push_result *pr,
                              const explain_out *o)
{
    const aftp_explain_words *w = x->words;
    if (pr->key_answer == AFTP_PUSH_KEY_PINNED)
        say(o, "%s answers key requests with the key pinned for it, but ignored our "
            "handshake for %.1f s: do both sides use the same %s (or none)? was this host's "
            "clock set back since it last connected there? (the server refuses handshakes "
            "older than the newest it accepted, less 10 s)", x->peer, x->idle_s,
            w->psk_setting);
    else if (x->cipher == AFTP_CIPHER_NONE)
        say(o, "no answer from %s within %.1f s (is %s running there? is UDP blocked?)",
            x->peer, x->idle_s, w->server_program);
    else
        say(o, "no answer from %s within %.1f s (is %s running there? is UDP blocked? a "
            "server whose key is not the one pinned for it (%s or known hosts) ignores us, as "
            "does one started with %s)", x->peer, x->idle_s, w->server_program,
            w->peer_key_setting, w->cipher_none);
}

/* The session ended on a refused socket (ICMP port unreachable), or on a
 * path that no longer carries our datagrams (the message says which). */
static void explain_network(const aftp_explain_ctx *x, const aftp_io_result *res,
                            const explain_out *o)
{
    if (res->message[0]) /* the path, not the peer (its MTU fell) */
        say(o, "transfer of %s to %s failed: %s", x->file, x->peer, res->message);
    else if (res->connected)
        say(o, "the receiver at %s stopped answering mid-transfer (connection refused: its "
            "process is gone)", x->peer);
    else
        say(o, "%s is unreachable: connection refused (is %s listening there?)", x->peer,
            x->words->server_program);
}

/* What the sender offered, for a receiver's LIMIT refusal (FILE_REPLY
 * carries no reason, so the figures it judged are all there is to show). */
static void explain_limit(const aftp_explain_ctx *x, const aftp_io_result *res,
                          const explain_out *o)
{
    if (!res->connected) {
        say(o, "%s refused the session: it is at a limit (%s)", x->peer,
            res->message[0] ? res->message : "too many sessions?");
        return;
    }
    if (res->stats.payload_bytes_sent == 0 && res->message[0]) { /* its CLOSE's reason: a server
                                                                  * full or draining (14.2.5) */
        say(o, "%s refused the session: %s", x->peer, res->message);
        return;
    }
    if (res->stats.payload_bytes_sent > 0) { /* past the offer: the repair bound (spec 9.9) */
        say(o, "transfer of %s to %s failed: %s", x->file, x->peer,
            res->message[0] ? res->message : aftp_strerror(res->error));
        return;
    }
    unsigned long long blocks =
        x->block_size ? (unsigned long long)aftp_wire_block_count(x->size, x->block_size) : 0;
    say(o, "%s refused %s: the offer exceeds a limit of the receiver (offered %llu bytes in "
        "%llu blocks of %u bytes, datagrams of %u bytes)", x->peer, x->file,
        (unsigned long long)x->size, blocks, (unsigned)x->block_size,
        (unsigned)res->stats.max_datagram);
}

/* The receiver's FILE_REPLY (nothing sent yet) or FILE_RESULT refused the
 * file: what each wire code says, and no more. */
static void explain_refusal(const aftp_explain_ctx *x, const aftp_io_result *res,
                            const explain_out *o)
{
    const char *peer = x->peer, *file = x->file;
    int at_offer = res->stats.payload_bytes_sent == 0;
    switch (res->error) {
    case AFTP_ERR_FILE_EXISTS:
        say(o, "%s refused %s: it exists at the receiver (its operator can allow replacing it "
            "with %s)", peer, file, x->words->overwrite_setting);
        break;
    case AFTP_ERR_NO_SPACE:
        if (at_offer)
            say(o, "%s refused %s: not enough space on the receiver", peer, file);
        else
            say(o, "%s ran out of space for %s during the transfer", peer, file);
        break;
    case AFTP_ERR_PATH_REJECTED:
        say(o, "%s refused %s: the receiver could not place the file there (the name breaks "
            "its path rules, or something that is not a file is in the way)", peer, file);
        break;
    case AFTP_ERR_PERMISSION:
        say(o, "%s refused %s: the receiver could not place the file there (permission denied "
            "on its side)", peer, file);
        break;
    default: /* AFTP_ERR_IO: the receiver's storage failed (its reason, if it gave one) */
        if (at_offer)
            say(o, "%s refused %s: the receiver could not place the file there (its storage "
                "failed; its own log says why)", peer, file);
        else
            say(o, "transfer of %s to %s failed: the receiver could not write it (%s)", file,
                peer, res->message[0] ? res->message : "its storage failed; its own log says why");
        break;
    }
}

/* The server answered our key request with another key than the pinned
 * one (aftp_push.h): say it as ssh says a changed host key, and that the
 * answer proves nothing by itself. */
static void explain_other_key(const aftp_explain_ctx *x, const aftp_push_result *pr,
                              const explain_out *o)
{
    char answered[AFTP_KEYFILE_FINGERPRINT_MAX], pinned[AFTP_KEYFILE_FINGERPRINT_MAX];
    aftp_keyfile_fingerprint(pr->server_key, answered, sizeof answered);
    aftp_keyfile_fingerprint(x->pinned_key, pinned, sizeof pinned);
    say(o, "the server at %s answers with key %s but %s is pinned for it in %s: the server's "
        "key changed, or this is not the server you expect (that answer is not "
        "authenticated: a hint, not proof; check the key with its operator)", x->peer,
        answered, pinned, x->pinned_where ? x->pinned_where : "the known hosts");
}

/* Failures in the session, by error. */
static void explain_session(const aftp_explain_ctx *x, const aftp_push_result *pr,
                            const explain_out *o)
{
    const aftp_io_result *res = &pr->io;
    const char *peer = x->peer;
    char own[128] = "(no key)";
    switch (res->error) {
    case AFTP_ERR_NETWORK:
        explain_network(x, res, o);
        break;
    case AFTP_ERR_IDLE_TIMEOUT:
        if (res->connected)
            say(o, "%s went silent for %.1f s (%s)", peer, x->idle_s, x->words->idle_setting);
        else
            explain_no_answer(x, pr, o);
        break;
    case AFTP_ERR_AUTH:
        say(o, "%s failed to authenticate: its key is not the one pinned for it (wrong %s or "
            "known-hosts entry?)", peer, x->words->peer_key_setting);
        break;
    case AFTP_ERR_UNKNOWN_PEER:
        if (x->own_key != NULL)
            aftp_keyfile_key_text(x->own_key, own, sizeof own);
        say(o, "%s refused us: this client's key is not authorized there (add the line '%s' "
            "to its authorized keys)", peer, own);
        break;
    case AFTP_ERR_PERMISSION:
        if (!res->connected) { /* at the handshake: what this key may do (spec 14.2.5) */
            say(o, "%s refused us: %s", peer,
                res->message[0] ? res->message : "this client key may not push there");
            break;
        }
        explain_refusal(x, res, o);
        break;
    case AFTP_ERR_FILE_EXISTS:
    case AFTP_ERR_NO_SPACE:
    case AFTP_ERR_PATH_REJECTED:
    case AFTP_ERR_IO:
        explain_refusal(x, res, o);
        break;
    case AFTP_ERR_LIMIT:
        explain_limit(x, res, o);
        break;
    case AFTP_ERR_CANCELLED:
        if (x->cancelled_here)
            say(o, "transfer of %s to %s cancelled here", x->file, peer);
        else
            say(o, "the receiver at %s cancelled the transfer of %s", peer, x->file);
        break;
    case AFTP_ERR_DIGEST_MISMATCH:
        /* The engine's message names both digests when the receiver's
         * verdict disagrees with what was sent: say it, for the audit. */
        say(o, "verification failed: %s arrived at %s with a different digest%s%s", x->file,
            peer, res->message[0] ? ": " : "", res->message);
        break;
    default:
        say(o, "transfer of %s to %s failed: %s", x->file, peer,
            res->message[0] ? res->message : aftp_strerror(res->error));
        break;
    }
}

void aftp_explain_send_failure(const aftp_explain_ctx *x, const aftp_push_result *pr, char *out,
                               size_t cap)
{
    const aftp_io_result *res = &pr->io;
    explain_out o = {.buf = out, .cap = cap};
    /* local: the message names the file and says what went wrong with it */
    if (res->phase == AFTP_IO_PHASE_LOCAL || res->error == AFTP_ERR_SOURCE_CHANGED)
        say(&o, "%s", res->message[0] ? res->message : aftp_strerror(res->error));
    else if (pr->key_answer == AFTP_PUSH_KEY_OTHER && x->pinned_key != NULL)
        explain_other_key(x, pr, &o);
    else
        explain_session(x, pr, &o);
}
