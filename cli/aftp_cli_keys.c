/* Security options and key files of `aftp send` and `aftp recv`. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aftp/aftp_client.h"
#include "aftp_cli_base.h"

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

/* Whether this machine can run the cipher: the client API knows (AES-256-GCM
 * needs AES instructions). */
static int cipher_available(int cipher)
{
    aftp_client *c = NULL;
    int ok = aftp_client_new(&c) == AFTP_OK && aftp_client_set_cipher(c, cipher) == AFTP_OK;
    aftp_client_del(c);
    return ok;
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
        if (!cipher_available(sec->cipher)) {
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

/* A key file the client refused: its message; AFTP_EXIT_AUTH. */
static int key_problem(const aftp_client *c)
{
    aftp_cli_error("%s", aftp_client_errmsg(c));
    return AFTP_EXIT_AUTH;
}

int aftp_cli_load_identity(const aftp_cli_security *sec, aftp_client *c, char *buf, size_t cap,
                           const char **path_out)
{
    const char *path = aftp_cli_key_path(sec->identity, AFTP_CLI_IDENTITY_NAME, buf, cap);
    *path_out = path;
    if (path == NULL) {
        aftp_cli_error("HOME is not set: give the identity key with --identity FILE");
        return AFTP_EXIT_USAGE;
    }
    int rc = aftp_client_set_identity_file(c, path);
    if (rc == AFTP_ERR_NOT_FOUND && sec->identity == NULL) {
        aftp_cli_error("no identity key at %s: create one with 'aftp keygen' "
                       "(or give --identity FILE)", path);
        return AFTP_EXIT_AUTH;
    }
    return rc == AFTP_OK ? AFTP_EXIT_OK : key_problem(c);
}

int aftp_cli_load_psk(const aftp_cli_security *sec, aftp_client *c)
{
    if (sec->psk_file == NULL || aftp_client_set_psk_file(c, sec->psk_file) == AFTP_OK)
        return AFTP_EXIT_OK;
    return key_problem(c);
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

int aftp_cli_load_peer_key(const aftp_cli_security *sec, aftp_client *c)
{
    char buf[4096];
    const char *known = aftp_cli_known_hosts_path(sec, buf, sizeof buf);
    if (sec->peer_key != NULL && aftp_client_set_peer_key_file(c, sec->peer_key) != AFTP_OK)
        return key_problem(c);
    if (known == NULL && sec->peer_key == NULL) {
        aftp_cli_error("HOME is not set: give the server's key with --peer-key FILE");
        return AFTP_EXIT_USAGE;
    }
    /* also with --peer-key: an entry that disagrees means the key changed */
    if (known != NULL && aftp_client_set_known_hosts_file(c, known) != AFTP_OK) {
        aftp_cli_error("%s", aftp_client_errmsg(c));
        return AFTP_EXIT_FAILED;
    }
    return AFTP_EXIT_OK;
}
