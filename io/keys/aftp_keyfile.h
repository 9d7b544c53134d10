/*
 * Key files: the files that hold aftp's X25519 keys, the server's
 * authorized keys and the client's known hosts, read into and written from
 * the pure half of this module (common/aftp_keyfile_text.h: the text of
 * one key, and the list an authorized-keys file yields, which the server's
 * admission consults). Formats (one key per line, '#' starts a comment
 * line, blank lines are ignored in lists):
 *
 *   private key file   aftp-private-key <base64 of the 32-byte secret>
 *   public key         aftp-x25519 <base64 of the 32-byte key> [comment]
 *   authorized keys    one public key line per admitted client
 *   known hosts        <host>:<port> aftp-x25519 <base64> [comment]
 *
 * Base64 is the standard alphabet with padding (44 characters per key).
 * A private key file must be a regular file, owned by the user (or root),
 * and readable by nobody else (mode 0600 or stricter, like ssh): otherwise
 * it is refused with AFTP_ERR_PERMISSION and a message saying how to fix
 * it. Secrets are read into buffers that are wiped afterwards; they never
 * travel on a command line.
 *
 * Every function that can fail writes a one-line reason ("FILE:LINE: what")
 * into err (err_len bytes, may be 0) and returns an aftp_error:
 * AFTP_ERR_BAD_KEY for malformed content, AFTP_ERR_LIMIT past the bounds
 * below, AFTP_ERR_PERMISSION, AFTP_ERR_NOT_FOUND, AFTP_ERR_FILE_EXISTS,
 * AFTP_ERR_IO.
 */
#ifndef AFTP_KEYFILE_H
#define AFTP_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/aftp_keyfile_text.h"

#define AFTP_KEYFILE_MAX_KEYS 10000u        /* entries per list */
#define AFTP_KEYFILE_MAX_SIZE (4u << 20)    /* bytes per list file */
#define AFTP_KEYFILE_MAX_HOST 255u          /* "host:port" */

/* ---- text forms (the others: aftp_keyfile_text.h) ---- */

/* One public key line (no newline; len bytes, not NUL-terminated). */
int aftp_keyfile_parse_public(const char *line, size_t len, uint8_t *key, char *err,
                              size_t err_len);

/* ---- key files ---- */

/* Creates path (never replaces one) with mode 0600 holding the secret. */
int aftp_keyfile_write_private(const char *path, const uint8_t *secret, char *err, size_t err_len);
/* Creates path (never replaces one) holding the public key line. */
int aftp_keyfile_write_public(const char *path, const uint8_t *key, const char *comment, char *err,
                              size_t err_len);
/* Reads a private key file after the ownership and permission checks. */
int aftp_keyfile_read_private(const char *path, uint8_t *secret, char *err, size_t err_len);
/* Reads a public key file (its first non-comment line). */
int aftp_keyfile_read_public(const char *path, uint8_t *key, char *err, size_t err_len);

/* ---- authorized keys (server) ---- */

/* Parses text (len bytes) named `name` in messages; on success *out owns
 * an allocation (aftp_keyfile_list_free). A malformed line fails the whole
 * list: a typo must not silently drop a key. */
int aftp_keyfile_authorized_parse(const char *name, const char *text, size_t len,
                                  aftp_keyfile_list *out, char *err, size_t err_len);
int aftp_keyfile_authorized_load(const char *path, aftp_keyfile_list *out, char *err,
                                 size_t err_len);

/* ---- known hosts (client) ---- */

/* Looks host ("host:port") up in known-hosts text: AFTP_OK when it is
 * listed with this key, AFTP_ERR_AUTH when it is listed only with other
 * keys (the server's key changed: possible attack, never accept silently),
 * AFTP_ERR_UNKNOWN_PEER when it is not listed, or a parse error. */
int aftp_keyfile_known_hosts_check(const char *name, const char *text, size_t len,
                                   const char *host, const uint8_t *key, char *err,
                                   size_t err_len);
/* The same on a file; a missing file lists nothing. */
int aftp_keyfile_known_hosts_check_file(const char *path, const char *host, const uint8_t *key,
                                        char *err, size_t err_len);
/* The key that known-hosts text pins for host ("host:port"), for a client
 * that must know the server's key before it connects: AFTP_OK and key,
 * AFTP_ERR_UNKNOWN_PEER when host is not listed, AFTP_ERR_AUTH when it is
 * listed with different keys (one of them is stale: the key changed), or a
 * parse error. */
int aftp_keyfile_known_hosts_lookup(const char *name, const char *text, size_t len,
                                    const char *host, uint8_t *key, char *err, size_t err_len);
/* The same on a file; a missing file lists nothing. */
int aftp_keyfile_known_hosts_lookup_file(const char *path, const char *host, uint8_t *key,
                                         char *err, size_t err_len);
/* Appends "host aftp-x25519 <base64>\n" (creating the file, mode 0600). */
int aftp_keyfile_known_hosts_append(const char *path, const char *host, const uint8_t *key,
                                    char *err, size_t err_len);

#endif /* AFTP_KEYFILE_H */
