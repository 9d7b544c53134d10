/*
 * The key-file module's pure half: the text forms of aftp's X25519 keys
 * and the in-memory list of keys an authorized-keys file yields, with its
 * lookups. No file, no clock: the server's admission (door/aftp_admit.h)
 * consults the list, the client's messages print keys, and io/keys (the
 * module's I/O half, aftp_keyfile.h) reads and writes the files that hold
 * them. One prefix for both halves: they are one format, split by layer.
 *
 * Public key text: "aftp-x25519 <base64 of the 32-byte key> [comment]";
 * base64 is the standard alphabet with padding (44 characters per key).
 */
#ifndef AFTP_KEYFILE_TEXT_H
#define AFTP_KEYFILE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "common/aftp_addrmatch.h"

#define AFTP_KEYFILE_KEY_LEN 32u
#define AFTP_KEYFILE_B64_LEN 44u            /* base64 of a key, padded */
#define AFTP_KEYFILE_PRIVATE_TAG "aftp-private-key"
#define AFTP_KEYFILE_PUBLIC_TAG "aftp-x25519"
#define AFTP_KEYFILE_MAX_LINE 1024u         /* bytes per line, newline excluded */

/* Why a line cannot be read at all ("line too long": AFTP_ERR_LIMIT,
 * "control character": AFTP_ERR_BAD_KEY, into *code), or NULL. */
const char *aftp_keyfile_line_problem(const char *line, size_t len, int *code);
/* The base64 of a key into b64 (AFTP_KEYFILE_B64_LEN + 1 bytes). */
void aftp_keyfile_base64(const uint8_t *key, char *b64);
/* "aftp-x25519 <base64>[ comment]\n" into out (NUL-terminated). The
 * comment (may be NULL) must be printable, one line. */
int aftp_keyfile_format_public(const uint8_t *key, const char *comment, char *out, size_t cap);
/* "aftp-x25519 <base64>" of a key: one line without a newline, for
 * messages ("(unprintable key)" if it cannot be formatted). */
void aftp_keyfile_key_text(const uint8_t *key, char *out, size_t cap);
/* "SHA256:<base64>" (SHA-256 of the 32 key bytes, unpadded base64, as ssh
 * shows host keys; spec Appendix B.3): the short form users compare out of
 * band. */
#define AFTP_KEYFILE_FINGERPRINT_MAX 56u
void aftp_keyfile_fingerprint(const uint8_t *key, char *out, size_t cap);

/* ---- the authorized keys (server) ---- */

/* What a key's line may say before its type (spec Appendix B.4):
 * root="DIR", from="CIDR,...", rate=N[K|M|G], read-only, write-only. */
#define AFTP_KEYFILE_ACCESS_READ 1u  /* may pull */
#define AFTP_KEYFILE_ACCESS_WRITE 2u /* may push */
#define AFTP_KEYFILE_ACCESS_ALL (AFTP_KEYFILE_ACCESS_READ | AFTP_KEYFILE_ACCESS_WRITE)
#define AFTP_KEYFILE_MAX_OPTIONS 768u /* bytes of a line's options */
#define AFTP_KEYFILE_MAX_FROM 32u     /* prefixes of one from= */

typedef struct aftp_keyfile_options {
    char *root;                  /* root=: the key's root as written; NULL: none */
    uint64_t rate_bps;           /* rate=: bits/s; 0: none */
    unsigned access;             /* AFTP_KEYFILE_ACCESS_* bits: both unless read-only
                                  * or write-only */
    aftp_addrmatch_prefix *from; /* from=: the prefixes a client may come from */
    size_t from_count;           /* 0: from anywhere */
    char *from_text;             /* from= as written, for messages; NULL: none */
    unsigned line;               /* the line of the file the key was read from */
} aftp_keyfile_options;

typedef struct aftp_keyfile_list {
    uint8_t (*keys)[AFTP_KEYFILE_KEY_LEN];
    size_t count;
    /* comments[i]: the comment of keys[i]'s line, "" when none (parsed
     * lists only; NULL in a list built by hand) */
    char **comments;
    /* options[i]: what keys[i]'s line said before its type (parsed lists
     * only; NULL in a list built by hand: no options) */
    aftp_keyfile_options *options;
} aftp_keyfile_list;

/* Non-zero when key is in the list (constant-time comparison per entry). */
int aftp_keyfile_list_contains(const aftp_keyfile_list *list, const uint8_t *key);
/* The comment of key's line (the first that lists it): "" when it has
 * none, or the list has no comments; NULL when key is not listed. */
const char *aftp_keyfile_list_comment(const aftp_keyfile_list *list, const uint8_t *key);
/* The options of key's line (the first that lists it); NULL when key is
 * not listed or the list has no options. */
const aftp_keyfile_options *aftp_keyfile_list_options(const aftp_keyfile_list *list,
                                                      const uint8_t *key);
/* Frees a parsed list's allocations (the keys, every comment and option). */
void aftp_keyfile_list_free(aftp_keyfile_list *list);

#endif /* AFTP_KEYFILE_TEXT_H */
