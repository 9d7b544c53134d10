/* Security options and key files of `aftp send` and `aftp recv`. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aftp_admit.h"
#include "aftp_cli.h"
#include "common/aftp_aead.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"
#include "proto/aftp_wire.h"

static const char *const cipher_names[] = {[AFTP_CIPHER_AUTO] = "auto",
                                           [AFTP_CIPHER_AES256GCM] = "aes",
                                           [AFTP_CIPHER_CHACHA20POLY1305] = "chacha",
                                           [AFTP_CIPHER_NONE] = "none"};

static int parse_cipher(const char *text, int *cipher)
{
    for (int c = 0; c < (int)(sizeof cipher_names / sizeof cipher_names[0]); c++) {
        if (strcmp(text, cipher_names[c]) == 0) {
            *cipher = c;
            return AFTP_OK;
        }
    }
    return AFTP_ERR_INVALID_ARGUMENT;
}

int aftp_cli_security_option(int c, const char *arg, aftp_cli_security *sec,
                             aftp_cli_common *co)
{
    switch (c) {
    case AFTP_CLI_OPT_IDENTITY: sec->identity = arg; return AFTP_EXIT_OK;
    case AFTP_CLI_OPT_PEER_KEY: sec->peer_key = arg; return AFTP_EXIT_OK;
    case AFTP_CLI_OPT_KNOWN_HOSTS: sec->known_hosts = arg; return AFTP_EXIT_OK;
    case AFTP_CLI_OPT_AUTHORIZED_KEYS: sec->authorized_keys = arg; return AFTP_EXIT_OK;
    case AFTP_CLI_OPT_PSK_FILE: sec->psk_file = arg; return AFTP_EXIT_OK;
    case AFTP_CLI_OPT_CIPHER:
        if (parse_cipher(arg, &sec->cipher) != AFTP_OK) {
            aftp_cli_error("bad cipher '%s' (auto, aes, chacha or none)", arg);
            return AFTP_EXIT_USAGE;
        }
        if (sec->cipher == AFTP_CIPHER_AES256GCM &&
            !aftp_aead_available(AFTP_WIRE_CIPHER_AES256GCM)) {
            aftp_cli_error("AES-256-GCM needs a CPU with AES-NI; use --cipher chacha or auto");
            return AFTP_EXIT_USAGE;
        }
        return AFTP_EXIT_OK;
    default:
        return aftp_cli_common_option(c, arg, co);
    }
}

const char *aftp_cli_key_dir(char *buf, size_t cap)
{
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0')
        return NULL;
    int n = snprintf(buf, cap, "%s/" AFTP_CLI_KEY_DIR, home);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

int aftp_cli_make_key_dir(char *buf, size_t cap)
{
    if (aftp_cli_key_dir(buf, cap) == NULL)
        return AFTP_EXIT_USAGE;
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
        aftp_cli_error("cannot create %s: %s", buf, strerror(errno));
        return AFTP_EXIT_LOCAL_FILE;
    }
    return AFTP_EXIT_OK;
}

const char *aftp_cli_key_path(const char *given, const char *name, char *buf, size_t cap)
{
    if (given != NULL)
        return given;
    if (aftp_cli_key_dir(buf, cap) == NULL)
        return NULL;
    size_t used = strlen(buf);
    int n = snprintf(buf + used, cap - used, "/%s", name);
    return n > 0 && (size_t)n < cap - used ? buf : NULL;
}

aftp_cli_secrets *aftp_cli_secrets_new(void)
{
    if (sodium_init() < 0)
        return NULL;
    /* Guarded, locked pages (never swapped), zeroed again by sodium_free. */
    aftp_cli_secrets *s = sodium_malloc(sizeof *s);
    if (s != NULL)
        memset(s, 0, sizeof *s);
    return s;
}

void aftp_cli_secrets_free(aftp_cli_secrets *s)
{
    if (s != NULL)
        sodium_free(s);
}

/* The exit status and message of a key file that could not be used. */
static int key_problem(const char *what, const char *err)
{
    aftp_cli_error("%s: %s", what, err);
    return AFTP_EXIT_AUTH;
}

int aftp_cli_load_identity(const aftp_cli_security *sec, aftp_cli_secrets *s)
{
    char buf[4096], err[512] = "not a valid X25519 private key";
    const char *path = aftp_cli_key_path(sec->identity, AFTP_CLI_IDENTITY_NAME, buf, sizeof buf);
    if (path == NULL) {
        aftp_cli_error("HOME is not set: give the identity key with --identity FILE");
        return AFTP_EXIT_USAGE;
    }
    int rc = aftp_keyfile_read_private(path, s->identity, err, sizeof err);
    if (rc == AFTP_ERR_NOT_FOUND && sec->identity == NULL) {
        aftp_cli_error("no identity key at %s: create one with 'aftp keygen' "
                       "(or give --identity FILE)", path);
        return AFTP_EXIT_AUTH;
    }
    if (rc == AFTP_OK)
        rc = aftp_hs_public_key(s->identity, s->public_key);
    return rc == AFTP_OK ? AFTP_EXIT_OK : key_problem("identity key", err);
}

int aftp_cli_load_psk(const aftp_cli_security *sec, aftp_cli_secrets *s)
{
    char err[512];
    if (sec->psk_file == NULL)
        return AFTP_EXIT_OK;
    if (aftp_keyfile_read_private(sec->psk_file, s->psk, err, sizeof err) != AFTP_OK)
        return key_problem("pre-shared key", err);
    s->have_psk = 1;
    return AFTP_EXIT_OK;
}

int aftp_cli_explain_unknown_host(const char *host, const char *known_hosts)
{
    aftp_cli_error("the key of %s is unknown (not in %s). 'aftp recv' prints its key when it "
                   "starts ('aftp: server key aftp-x25519 <base64>'); pin it with --peer-key FILE "
                   "(a file holding that key line) or add the line "
                   "'%s aftp-x25519 <base64>' to %s, or run 'aftp send' from a terminal: it "
                   "then shows the server's key and asks whether to trust it",
                   host, known_hosts, host, known_hosts);
    return AFTP_EXIT_AUTH;
}

const char *aftp_cli_known_hosts_path(const aftp_cli_security *sec, char *buf, size_t cap)
{
    return aftp_cli_key_path(sec->known_hosts, AFTP_CLI_KNOWN_HOSTS_NAME, buf, cap);
}

int aftp_cli_load_peer_key(const aftp_cli_security *sec, const char *host, aftp_cli_secrets *s,
                           int *unknown)
{
    char buf[4096], err[512];
    const char *known = aftp_cli_known_hosts_path(sec, buf, sizeof buf);
    *unknown = 0;
    if (sec->peer_key != NULL) {
        if (aftp_keyfile_read_public(sec->peer_key, s->peer_key, err, sizeof err) != AFTP_OK)
            return key_problem("server key (--peer-key)", err);
        /* A pinned entry that disagrees means the server's key changed. */
        if (known != NULL &&
            aftp_keyfile_known_hosts_check_file(known, host, s->peer_key, err, sizeof err) ==
                AFTP_ERR_AUTH) {
            aftp_cli_error("WARNING: the key given with --peer-key is not the one pinned for "
                           "%s: %s", host, err);
            return AFTP_EXIT_AUTH;
        }
        return AFTP_EXIT_OK;
    }
    if (known == NULL) {
        aftp_cli_error("HOME is not set: give the server's key with --peer-key FILE");
        return AFTP_EXIT_USAGE;
    }
    int rc = aftp_keyfile_known_hosts_lookup_file(known, host, s->peer_key, err, sizeof err);
    if (rc == AFTP_ERR_UNKNOWN_PEER) {
        *unknown = 1; /* the caller explains, or asks its user */
        return AFTP_EXIT_AUTH;
    }
    if (rc == AFTP_ERR_AUTH) {
        aftp_cli_error("WARNING: %s", err);
        return AFTP_EXIT_AUTH;
    }
    return rc == AFTP_OK ? AFTP_EXIT_OK : key_problem("known hosts", err);
}
