/*
 * Why a send failed, in the user's terms: one message with the figures
 * involved and what to do, for aftp_client_errmsg(). Each application
 * names its own settings (a command-line option for the aftp tool, an API
 * function by default) through aftp_client_terms, which become
 * aftp_explain_words.
 */
#ifndef AFTP_EXPLAIN_H
#define AFTP_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "aftp_push.h"

/* How a front end names what a message points its user to. */
typedef struct aftp_explain_words {
    const char *server_program; /* what runs at the server: "'aftp recv'" */
    const char *idle_setting;   /* "--idle-timeout" */
    const char *peer_key_setting; /* how a server key is pinned: "--peer-key" */
    const char *psk_setting;    /* "--psk-file" */
    const char *cipher_none;    /* a server without protection: "--cipher none" */
    const char *overwrite_setting; /* how a receiver allows replacing a file */
} aftp_explain_words;

/* What the message speaks of, besides the push's result. */
typedef struct aftp_explain_ctx {
    const aftp_explain_words *words;
    const char *peer;        /* the server as the user named it */
    const char *file;        /* printable name of the file the failure concerns */
    uint64_t size;           /* its size and block size as offered */
    uint32_t block_size;
    double idle_s;           /* the idle timeout in force */
    int cipher;              /* enum aftp_cipher_choice asked for */
    int cancelled_here;      /* this side cancelled */
    const uint8_t *own_key;  /* this client's public key (NULL: unprotected) */
    const uint8_t *pinned_key; /* the server key pinned (NULL: unprotected) */
    const char *pinned_where;  /* where it was pinned: a file, or the settings */
} aftp_explain_ctx;

/* The message for a failed push (pr->io.error != AFTP_OK) into out. */
void aftp_explain_send_failure(const aftp_explain_ctx *x, const aftp_push_result *pr, char *out,
                               size_t cap);

#endif /* AFTP_EXPLAIN_H */
