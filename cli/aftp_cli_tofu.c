/* Trust on first use: `aftp send` to a server whose key nobody pinned asks
 * the server for its key and its user whether to trust it (spec section
 * 14.9). Only a person at a terminal can compare a fingerprint, so this
 * runs only interactively. On the public client API alone. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aftp/aftp_client.h"
#include "aftp_cli_base.h"

int aftp_cli_interactive(void)
{
    return isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
}

/* The key fetch failed: one line in the user's terms, and the exit status. */
static int explain_fetch_failure(const char *host, int rc, const char *errmsg)
{
    switch (rc) {
    case AFTP_ERR_IDLE_TIMEOUT:
        aftp_cli_error("no answer from %s within %.1f s when asking for its key (is 'aftp recv' "
                       "running there? is UDP blocked? one started with --cipher none has no "
                       "key to give)", host, (double)AFTP_CLIENT_FETCH_KEY_WAIT_MS / 1e3);
        break;
    case AFTP_ERR_NETWORK:
        aftp_cli_error("%s is unreachable: connection refused (is 'aftp recv' listening there?)",
                       host);
        break;
    case AFTP_ERR_CANCELLED: break;
    default: aftp_cli_error("%s", errmsg); break;
    }
    return aftp_cli_exit_code(rc);
}

/* The question, then the user's line: non-zero only for exactly "yes". */
static int user_accepts(const char *host, const uint8_t *key, const char *known_hosts)
{
    char line[AFTP_CLIENT_KEY_TEXT_MAX], fingerprint[AFTP_CLIENT_FINGERPRINT_MAX], answer[64];
    aftp_client_format_key(key, line, sizeof line);
    aftp_client_format_fingerprint(key, fingerprint, sizeof fingerprint);
    fprintf(stderr,
            "The server %s is not known. Its key is %s (fingerprint: %s). Trust it and "
            "remember it in %s? (yes/no) ",
            host, line, fingerprint, known_hosts);
    fflush(stderr);
    if (fgets(answer, sizeof answer, stdin) == NULL)
        return 0;
    answer[strcspn(answer, "\r\n")] = '\0';
    return strcmp(answer, "yes") == 0;
}

static int remember(aftp_client *c, const aftp_cli_security *sec, const char *host,
                    const uint8_t *key, const char *known_hosts)
{
    char dir[4096];
    /* The default known hosts live in ~/.aftp (HOME is set: known_hosts
     * was found), created private when missing. */
    if (sec->known_hosts == NULL && aftp_cli_make_key_dir(dir, sizeof dir) != AFTP_EXIT_OK)
        return AFTP_EXIT_LOCAL_FILE;
    if (aftp_client_add_known_host(c, host, key) != AFTP_OK) {
        aftp_cli_error("%s", aftp_client_errmsg(c));
        return AFTP_EXIT_LOCAL_FILE;
    }
    fprintf(stderr, "aftp: the key of %s is now pinned in %s\n", host, known_hosts);
    return AFTP_EXIT_OK;
}

/* Asks, and pins what the user accepts; c's known hosts are known_hosts. */
static int learn_with(aftp_client *c, const aftp_cli_security *sec, const char *host,
                      const char *known_hosts)
{
    uint8_t key[AFTP_KEY_LEN];
    aftp_cli_cancel_on_signal(c); /* Ctrl-C ends the wait for the answer */
    int rc = aftp_client_fetch_server_key(c, host, key);
    aftp_cli_cancel_on_signal(NULL);
    if (rc != AFTP_OK)
        return explain_fetch_failure(host, rc, aftp_client_errmsg(c));
    if (!user_accepts(host, key, known_hosts)) {
        if (aftp_cli_interrupted())
            return AFTP_EXIT_CANCELLED;
        aftp_cli_error("host key not accepted: no file was sent to %s and %s is unchanged",
                       host, known_hosts);
        return AFTP_EXIT_AUTH;
    }
    return remember(c, sec, host, key, known_hosts);
}

int aftp_cli_learn_peer_key(const aftp_cli_security *sec, const char *host)
{
    char buf[4096];
    aftp_client *c = NULL;
    const char *known_hosts = aftp_cli_known_hosts_path(sec, buf, sizeof buf);
    if (known_hosts == NULL) {
        aftp_cli_error("HOME is not set: give the server's key with --peer-key FILE");
        return AFTP_EXIT_USAGE;
    }
    if (aftp_client_new(&c) != AFTP_OK ||
        aftp_client_set_known_hosts_file(c, known_hosts) != AFTP_OK) {
        aftp_client_del(c);
        aftp_cli_error("cannot allocate memory for the key request");
        return AFTP_EXIT_FAILED;
    }
    int rc = learn_with(c, sec, host, known_hosts);
    aftp_client_del(c);
    return rc;
}
