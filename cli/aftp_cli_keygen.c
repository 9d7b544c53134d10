/* aftp keygen: a new X25519 identity (private key file + public key file). */
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_client.h"
#include "aftp_cli_base.h"

typedef struct keygen_args {
    const char *file; /* NULL: $HOME/.aftp/id_x25519 */
    const char *comment;
} keygen_args;

static void keygen_usage(FILE *to)
{
    fputs("usage: aftp keygen [-f FILE] [-C COMMENT]\n"
          "Writes a new X25519 key pair: FILE (the private key, mode 0600; default\n"
          "~/" AFTP_CLI_KEY_DIR "/" AFTP_CLI_IDENTITY_NAME ") and FILE.pub (its public key line, which\n"
          "the other side pins), and prints the public key line. Never replaces a file.\n",
          to);
}

/* -1 after --help, an exit status otherwise. */
static int parse_keygen_args(int argc, char **argv, keygen_args *a)
{
    static const struct option opts[] = {{"file", required_argument, NULL, 'f'},
                                         {"comment", required_argument, NULL, 'C'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "f:C:h", opts, NULL)) != -1) {
        if (c == 'f') {
            a->file = optarg;
        } else if (c == 'C') {
            a->comment = optarg;
        } else if (c == 'h') {
            keygen_usage(stdout);
            return -1;
        } else {
            return AFTP_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        aftp_cli_error("keygen takes no arguments, only -f FILE and -C COMMENT");
        return AFTP_EXIT_USAGE;
    }
    return AFTP_EXIT_OK;
}

/* user@host, the comment when none is given (as ssh-keygen). */
static void default_comment(char *buf, size_t cap)
{
    const struct passwd *pw = getpwuid(geteuid());
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    snprintf(buf, cap, "%s@%s", pw ? pw->pw_name : "aftp", host[0] ? host : "localhost");
}

static int refuse_existing(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return AFTP_EXIT_OK;
    aftp_cli_error("%s already exists: refusing to replace a key (remove it first, or choose another FILE with -f)",
                   path);
    return AFTP_EXIT_LOCAL_FILE;
}

/* Writes both files (the client API's key pair writer: a failure leaves
 * neither behind) and prints the public key line. */
static int write_pair(const char *file, const char *comment)
{
    char line[AFTP_CLIENT_KEY_LINE_MAX];
    aftp_client *c = NULL;
    int rc = aftp_client_new(&c);
    if (rc != AFTP_OK) {
        aftp_cli_error("cannot make a key pair: %s", aftp_strerror(rc));
        return AFTP_EXIT_FAILED;
    }
    rc = aftp_client_keygen(c, file, comment, line, sizeof line);
    if (rc == AFTP_ERR_INVALID_ARGUMENT)
        aftp_cli_error("the comment must be one line of printable text");
    else if (rc != AFTP_OK)
        aftp_cli_error("%s", aftp_client_errmsg(c));
    aftp_client_del(c);
    if (rc == AFTP_OK)
        fputs(line, stdout);
    return rc == AFTP_OK                      ? AFTP_EXIT_OK
           : rc == AFTP_ERR_INVALID_ARGUMENT ? AFTP_EXIT_USAGE
                                              : AFTP_EXIT_LOCAL_FILE;
}

int aftp_cli_keygen(int argc, char **argv)
{
    keygen_args a = {NULL, NULL};
    char dir[4096], file[4096], pub_file[4096 + 8], comment[512];
    int rc = parse_keygen_args(argc, argv, &a);
    if (rc != AFTP_EXIT_OK)
        return rc < 0 ? AFTP_EXIT_OK : rc;
    if (a.file == NULL) {
        if ((rc = aftp_cli_make_key_dir(dir, sizeof dir)) == AFTP_EXIT_USAGE)
            aftp_cli_error("HOME is not set: give the key file with -f FILE");
        if (rc != AFTP_EXIT_OK)
            return rc;
        a.file = aftp_cli_key_path(NULL, AFTP_CLI_IDENTITY_NAME, file, sizeof file);
    }
    if (a.comment == NULL) {
        default_comment(comment, sizeof comment);
        a.comment = comment;
    }
    int n = a.file != NULL ? snprintf(pub_file, sizeof pub_file, "%s.pub", a.file) : -1;
    if (n < 0 || (size_t)n >= sizeof pub_file) {
        aftp_cli_error("key file name too long");
        return AFTP_EXIT_USAGE;
    }
    if ((rc = refuse_existing(a.file)) != AFTP_EXIT_OK ||
        (rc = refuse_existing(pub_file)) != AFTP_EXIT_OK)
        return rc;
    return write_pair(a.file, a.comment);
}
