/* Trust on first use: `aftp send` to a server whose key nobody pinned asks
 * the server for its key and its user whether to trust it (spec section
 * 14.9). Only a person at a terminal can compare a fingerprint, so this
 * runs only interactively. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aftp_cli.h"
#include "aftp_explain.h"
#include "aftp_keyfetch.h"
#include "common/aftp_keyfile.h"

int aftp_cli_interactive(void)
{
    return isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
}

/* The key fetch failed: one line in the user's terms, and the exit status. */
static int explain_fetch_failure(const char *host, int rc)
{
    double wait_s = AFTP_KEYFETCH_ATTEMPTS * (AFTP_KEYFETCH_INTERVAL_NS / 1e9);
    switch (rc) {
    case AFTP_ERR_IDLE_TIMEOUT:
        aftp_cli_error("no answer from %s within %.1f s when asking for its key (is 'aftp recv' "
                       "running there? is UDP blocked? one started with --cipher none has no "
                       "key to give)", host, wait_s);
        break;
    case AFTP_ERR_NETWORK:
        aftp_cli_error("%s is unreachable: connection refused (is 'aftp recv' listening there?)",
                       host);
        break;
    case AFTP_ERR_CANCELLED: break;
    default: aftp_cli_error("cannot ask %s for its key: %s", host, aftp_strerror(rc)); break;
    }
    return aftp_cli_exit_code(rc);
}

/* The question, then the user's line: non-zero only for exactly "yes". */
static int user_accepts(const char *host, const uint8_t *key, const char *known_hosts)
{
    char line[128], fingerprint[AFTP_KEYFILE_FINGERPRINT_MAX], answer[64];
    aftp_keyfile_key_text(key, line, sizeof line);
    aftp_keyfile_fingerprint(key, fingerprint, sizeof fingerprint);
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

/* The known-hosts file exists (created 0600: it says whom the user talks
 * to) and ends with a newline, so an appended line stays a line of its own. */
static int prepare_known_hosts(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return AFTP_ERR_IO;
    char last = '\n';
    off_t end = lseek(fd, 0, SEEK_END);
    int rc = AFTP_OK;
    if (end > 0 && pread(fd, &last, 1, end - 1) != 1)
        rc = AFTP_ERR_IO;
    if (rc == AFTP_OK && last != '\n' && write(fd, "\n", 1) != 1)
        rc = AFTP_ERR_IO;
    if (close(fd) != 0)
        rc = AFTP_ERR_IO;
    return rc;
}

static int remember(const aftp_cli_security *sec, const char *host, const uint8_t *key,
                    const char *known_hosts)
{
    char err[512], dir[4096];
    /* The default known hosts live in ~/.aftp (HOME is set: known_hosts
     * was found), created private when missing. */
    if (sec->known_hosts == NULL && aftp_cli_make_key_dir(dir, sizeof dir) != AFTP_EXIT_OK)
        return AFTP_EXIT_LOCAL_FILE;
    if (prepare_known_hosts(known_hosts) != AFTP_OK) {
        aftp_cli_error("cannot write %s: %s", known_hosts, strerror(errno));
        return AFTP_EXIT_LOCAL_FILE;
    }
    if (aftp_keyfile_known_hosts_append(known_hosts, host, key, err, sizeof err) != AFTP_OK) {
        aftp_cli_error("cannot remember the key: %s", err);
        return AFTP_EXIT_LOCAL_FILE;
    }
    fprintf(stderr, "aftp: the key of %s is now pinned in %s\n", host, known_hosts);
    return AFTP_EXIT_OK;
}

int aftp_cli_learn_peer_key(const aftp_cli_security *sec, const char *host,
                            const struct sockaddr *peer, socklen_t peer_len,
                            atomic_int *interrupt, aftp_cli_secrets *s)
{
    char buf[4096];
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
    const char *known_hosts = aftp_cli_known_hosts_path(sec, buf, sizeof buf);
    aftp_keyfetch_opts o = {.peer = peer, .peer_len = peer_len, .interrupt = interrupt};
    if (known_hosts == NULL) {
        aftp_cli_error("HOME is not set: give the server's key with --peer-key FILE");
        return AFTP_EXIT_USAGE;
    }
    int rc = aftp_keyfetch_run(&o, key);
    if (rc != AFTP_OK)
        return explain_fetch_failure(host, rc);
    if (!user_accepts(host, key, known_hosts)) {
        if (interrupt != NULL && *interrupt)
            return AFTP_EXIT_CANCELLED;
        aftp_cli_error("host key not accepted: no file was sent to %s and %s is unchanged",
                       host, known_hosts);
        return AFTP_EXIT_AUTH;
    }
    rc = remember(sec, host, key, known_hosts);
    if (rc == AFTP_EXIT_OK)
        memcpy(s->peer_key, key, AFTP_KEY_LEN);
    return rc;
}
