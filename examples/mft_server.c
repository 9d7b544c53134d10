/*
 * mft_server: a minimal managed-file-transfer receiver built on libaftp.
 *
 *   mft_server LISTEN IDENTITY_FILE PARTNERS_FILE AUDIT_LOG
 *
 * LISTEN         "[ADDR:]PORT"; port 0 lets the kernel choose. The port it
 *                listens on is printed on stdout as "listening on port N".
 * IDENTITY_FILE  the server's private key (`aftp keygen -f FILE`, mode 0600);
 *                clients pin FILE.pub.
 * PARTNERS_FILE  who may send, and where their files land. One partner a
 *                line, fields separated by spaces or tabs:
 *
 *                  # NAME  DIRECTORY          KEY (the partner's FILE.pub line) [cap=BITS/S]
 *                  acme    /srv/mft/in/acme   aftp-x25519 +TkOlVUnAn3G...tS8= acme-prod
 *                  globex  /srv/mft/in/globex 3FxpP0ye6LUK8rMXs...ob7Sq= cap=200000000
 *
 *                KEY is the base64 of the partner's public key, with or
 *                without the "aftp-x25519" word before it. After it, a word
 *                "cap=N" caps that partner's senders at N bits/s (its
 *                share of the link: libaftp tells the sender, which paces
 *                under it); other words are ignored. DIRECTORY must exist
 *                (no spaces in it). Blank lines and lines starting with '#'
 *                are ignored.
 * AUDIT_LOG      appended to, one line per file received:
 *
 *   2026-11-26T09:30:12.345Z partner=acme client=127.0.0.1:40512 cipher=aes-256-gcm
 *     size=1048576 xxh3=5f1e...c9 path=/srv/mft/in/acme/invoice.csv     (one line)
 *
 * SIGINT or SIGTERM stops it (exit status 0).
 *
 * Build against an installed libaftp:
 *   cc mft_server.c $(pkg-config --cflags --libs aftp) -o mft_server
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <aftp/aftp.h>

#define MAX_PARTNERS 64

typedef struct partner {
    char name[64];
    char dir[1024];
    char key[AFTP_CLIENT_KEY_TEXT_MAX]; /* "aftp-x25519 <base64>", as aftp_client_format_key */
    unsigned long long cap_bps;         /* 0: no rate cap */
} partner;

/* Everything the callbacks need reaches them through their `void *user`:
 * libaftp keeps that pointer and never looks inside. */
typedef struct mft_app {
    partner partners[MAX_PARTNERS];
    size_t count;
    FILE *audit;
    aftp_server *server;
} mft_app;

/* aftp_server_stop() is async-signal-safe: the one thing a handler may do. */
static aftp_server *volatile stopping_server;

static void on_signal(int sig)
{
    (void)sig;
    aftp_server_stop(stopping_server);
}

/* ---- the partners file ---- */

/* The "cap=N" among the words after the key (0: none); -1 for a cap that
 * is not a positive number. */
static int parse_cap(char **save, unsigned long long *cap_bps)
{
    const char *word;
    *cap_bps = 0;
    while ((word = strtok_r(NULL, " \t\r\n", save)) != NULL) {
        if (strncmp(word, "cap=", 4) != 0)
            continue;
        char *end = NULL;
        errno = 0;
        *cap_bps = strtoull(word + 4, &end, 10);
        if (errno != 0 || end == word + 4 || *end != '\0' || *cap_bps == 0)
            return -1;
    }
    return 0;
}

/* One line "NAME DIRECTORY [aftp-x25519] BASE64 [... cap=N ...]" into p. */
static int parse_partner(char *line, partner *p, const char **why)
{
    char *save = NULL;
    const char *name = strtok_r(line, " \t\r\n", &save);
    const char *dir = strtok_r(NULL, " \t\r\n", &save);
    const char *key = strtok_r(NULL, " \t\r\n", &save);
    if (key != NULL && strcmp(key, "aftp-x25519") == 0)
        key = strtok_r(NULL, " \t\r\n", &save);
    struct stat st;
    if (key == NULL)
        *why = "expected NAME DIRECTORY KEY";
    else if (strlen(name) >= sizeof p->name || strlen(dir) >= sizeof p->dir)
        *why = "the name or the directory is too long";
    else if (strlen(key) != 44) /* 32 bytes in base64 */
        *why = "the key is not 44 characters of base64 (a FILE.pub line of aftp keygen)";
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        *why = "the directory does not exist";
    else if (parse_cap(&save, &p->cap_bps) != 0)
        *why = "cap= wants a positive number of bits per second (cap=200000000: 200 Mbit/s)";
    else {
        snprintf(p->name, sizeof p->name, "%s", name);
        snprintf(p->dir, sizeof p->dir, "%s", dir);
        snprintf(p->key, sizeof p->key, "aftp-x25519 %s", key);
        return 0;
    }
    return -1;
}

static int load_partners(mft_app *app, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "mft_server: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[2048];
    const char *why = NULL;
    for (unsigned n = 1; why == NULL && fgets(line, sizeof line, f) != NULL; n++) {
        size_t skip = strspn(line, " \t\r\n");
        if (line[skip] == '\0' || line[skip] == '#')
            continue;
        if (app->count == MAX_PARTNERS)
            why = "more partners than this example holds (64)";
        else if (parse_partner(line, &app->partners[app->count], &why) == 0)
            app->count++;
        if (why != NULL)
            fprintf(stderr, "mft_server: %s line %u: %s\n", path, n, why);
    }
    fclose(f);
    if (why == NULL && app->count == 0) {
        fprintf(stderr, "mft_server: %s lists no partner: nobody could send\n", path);
        return -1;
    }
    return why == NULL ? 0 : -1;
}

/* The partner whose key a client proved, or NULL. */
static const partner *find_partner(const mft_app *app, const uint8_t *key)
{
    char text[AFTP_CLIENT_KEY_TEXT_MAX];
    if (key == NULL || aftp_client_format_key(key, text, sizeof text) != AFTP_OK)
        return NULL; /* no key: an unprotected session, which this server never runs */
    for (size_t i = 0; i < app->count; i++)
        if (strcmp(app->partners[i].key, text) == 0)
            return &app->partners[i];
    return NULL;
}

/* ---- callbacks: on the thread inside aftp_server_run(), one at a time ---- */

/* Once per session, after the client proved its key: refuse, or choose
 * where its files land. A refused client gets AFTP_ERR_UNKNOWN_PEER and
 * nothing of it is written. */
static int on_admit(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    const partner *p = find_partner(user, peer->key);
    if (p == NULL)
        return AFTP_ERR_UNKNOWN_PEER;
    /* The partner's share of the link, if it has one: its sender is told
     * and never paces faster. */
    if (p->cap_bps != 0 && aftp_admission_set_rate_cap(decision, p->cap_bps) != AFTP_OK)
        return AFTP_ERR_INTERNAL;
    /* The client's paths stay beneath this root: libaftp refuses any that
     * would leave it ("..", absolute paths, symbolic links). */
    return aftp_admission_set_root(decision, p->dir);
}

static const char *cipher_name(int cipher)
{
    switch (cipher) {
    case AFTP_CIPHER_AES256GCM: return "aes-256-gcm";
    case AFTP_CIPHER_CHACHA20POLY1305: return "chacha20-poly1305";
    case AFTP_CIPHER_NONE: return "none";
    default: return "unknown";
    }
}

/* "2026-11-26T09:30:12.345Z" */
static void format_time(int64_t unix_ns, char *out, size_t cap)
{
    time_t secs = (time_t)(unix_ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03dZ", (int)(unix_ns % 1000000000 / 1000000));
}

/* "192.0.2.7:40512" or "[2001:db8::7]:40512" */
static void format_addr(const aftp_peer *peer, char *out, size_t cap)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getnameinfo(peer->addr, peer->addr_len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, cap, "?");
    else
        snprintf(out, cap, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

/* Once per file, after it is verified (its XXH3-128 matched the sender's)
 * and durable under its final name: the audit trail. */
static void on_receipt(void *user, const aftp_receipt *r)
{
    mft_app *app = user;
    const partner *p = find_partner(app, r->client->key);
    char when[40], addr[NI_MAXHOST + NI_MAXSERV + 4], digest[2 * AFTP_DIGEST_LEN + 1];
    format_time(r->end_unix_ns, when, sizeof when);
    format_addr(r->client, addr, sizeof addr);
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        snprintf(digest + 2 * i, 3, "%02x", r->digest[i]);
    /* The path comes from the client, but aftp refuses paths with control
     * characters, so it cannot break the line; it may hold spaces, hence
     * last. */
    fprintf(app->audit, "%s partner=%s client=%s cipher=%s size=%llu xxh3=%s path=%s/%s\n",
            when, p != NULL ? p->name : "?", addr, cipher_name(r->cipher),
            (unsigned long long)r->size, digest, r->root, r->path);
    /* One line per file, on disk before the next file is taken. */
    if (fflush(app->audit) != 0 || fsync(fileno(app->audit)) != 0)
        fprintf(stderr, "mft_server: audit log: %s\n", strerror(errno));
}

/* libaftp prints nothing: what an operator needs comes here, one line each. */
static void on_log(void *user, int kind, const char *line)
{
    mft_app *app = user;
    if (kind == AFTP_LOG_LISTENING) {
        /* aftp_server_port() is one of the calls allowed in a callback. */
        printf("listening on port %u\n", aftp_server_port(app->server));
        fflush(stdout);
    }
    fprintf(stderr, "mft_server: %s\n", line);
}

/* ---- main ---- */

/* Files land only in partners' directories (on_admit always chooses one),
 * but the server's own directory, left at its default ".", must still
 * exist and accept files: aftp_server_run checks it before it listens. */
static int configure(mft_app *app, char **argv)
{
    aftp_server *s = app->server;
    if (aftp_server_set_listen(s, argv[1]) != AFTP_OK ||
        aftp_server_set_identity_file(s, argv[2]) != AFTP_OK ||
        aftp_server_set_admit_cb(s, on_admit, app) != AFTP_OK ||
        aftp_server_set_receipt_cb(s, on_receipt, app) != AFTP_OK ||
        aftp_server_set_log_cb(s, on_log, app) != AFTP_OK) {
        fprintf(stderr, "mft_server: %s\n", aftp_server_errmsg(s));
        return -1;
    }
    return 0;
}

static int serve(mft_app *app)
{
    stopping_server = app->server;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int rc = aftp_server_run(app->server); /* blocks until aftp_server_stop() */
    if (rc != AFTP_OK)
        fprintf(stderr, "mft_server: %s\n", aftp_server_errmsg(app->server));
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: mft_server LISTEN IDENTITY_FILE PARTNERS_FILE AUDIT_LOG\n");
        return 2;
    }
    /* Process-wide set-up, first thing, before anything uses OpenSSL:
     * AFTP_INIT_GUARD_KEYS keeps the ciphers' key schedules in guarded,
     * unswappable memory. A receiver maps no source file, so it does not
     * need AFTP_INIT_GUARD_SOURCE's SIGBUS handler. Optional: without it
     * aftp works and installs nothing process-wide. */
    int rc = aftp_global_init(AFTP_INIT_GUARD_KEYS);
    if (rc != AFTP_OK)
        fprintf(stderr, "mft_server: aftp_global_init: %s (aftp works on without it)\n",
                aftp_strerror(rc));

    static mft_app app; /* static: the partner table is large for a stack */
    if (load_partners(&app, argv[3]) != 0)
        return 1;
    app.audit = fopen(argv[4], "a");
    if (app.audit == NULL) {
        fprintf(stderr, "mft_server: %s: %s\n", argv[4], strerror(errno));
        return 1;
    }
    rc = aftp_server_new(&app.server);
    if (rc != AFTP_OK)
        fprintf(stderr, "mft_server: %s\n", aftp_strerror(rc));
    else if (configure(&app, argv) == 0)
        rc = serve(&app);
    else
        rc = AFTP_ERR_INVALID_ARGUMENT;
    aftp_server_del(app.server); /* NULL-safe; wipes the server's key */
    fclose(app.audit);
    aftp_global_cleanup();
    return rc == AFTP_OK ? 0 : 1;
}
