/* Path memory file (aftp_pathmem.h). */
#include "aftp_pathmem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_engine.h"

/* ---- keys ---- */

/* "<address>" or "[<address>]:<port>" (IPv6) / "<address>:<port>". */
static int format_address(const struct sockaddr *sa, int with_port, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    unsigned port;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        port = ntohs(in6->sin6_port);
    } else {
        return AFTP_ERR_INVALID_ARGUMENT;
    }
    if (!with_port)
        snprintf(out, cap, "%s", ip);
    else if (sa->sa_family == AF_INET6)
        snprintf(out, cap, "[%s]:%u", ip, port);
    else
        snprintf(out, cap, "%s:%u", ip, port);
    return AFTP_OK;
}

int aftp_pathmem_key(const uint8_t *server_key, const struct sockaddr *local,
                     const struct sockaddr *peer, char out[AFTP_PATHMEM_KEY_MAX])
{
    char server[2 * AFTP_KEY_LEN + 1], here[INET6_ADDRSTRLEN], there[INET6_ADDRSTRLEN + 8];
    for (size_t i = 0; server_key != NULL && i < AFTP_KEY_LEN; i++)
        snprintf(server + 2 * i, 3, "%02x", server_key[i]);
    if (server_key == NULL)
        snprintf(server, sizeof server, "-");
    if (format_address(local, 0, here, sizeof here) != AFTP_OK ||
        format_address(peer, 1, there, sizeof there) != AFTP_OK)
        return AFTP_ERR_INVALID_ARGUMENT;
    snprintf(out, AFTP_PATHMEM_KEY_MAX, "%s/%s/%s", server, here, there);
    return AFTP_OK;
}

/* ---- reading ---- */

/* The whole file, NUL-terminated, if it is no larger than the bound. */
static char *read_bounded(const char *path, int *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    char *buf = malloc(AFTP_PATHMEM_MAX_FILE + 1);
    size_t len = 0;
    ssize_t n = 1;
    while (buf != NULL && n > 0 && len <= AFTP_PATHMEM_MAX_FILE) {
        n = read(fd, buf + len, AFTP_PATHMEM_MAX_FILE + 1 - len);
        len += n > 0 ? (size_t)n : 0;
    }
    *err = buf == NULL ? ENOMEM : n < 0 ? errno : len > AFTP_PATHMEM_MAX_FILE ? EFBIG : 0;
    close(fd);
    if (*err != 0) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* A decimal figure, digits only, that fits 64 bits and is not zero;
 * *text moves past it. */
static int parse_figure(const char **text, uint64_t *out)
{
    const char *p = *text;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return 0;
        v = v * 10 + digit;
    }
    *text = p;
    *out = v;
    return v != 0; /* no digit at all reads as 0 too */
}

/* One entry line: a key of printable characters, then three non-zero
 * figures, each after one space, and nothing else. */
static int parse_entry(const char *line, aftp_pathmem_entry *e)
{
    size_t key_len = strcspn(line, " ");
    if (key_len == 0 || key_len >= AFTP_PATHMEM_KEY_MAX)
        return 0;
    for (size_t i = 0; i < key_len; i++)
        if (line[i] <= ' ' || line[i] > '~')
            return 0;
    memcpy(e->key, line, key_len);
    e->key[key_len] = '\0';
    uint64_t *figures[] = {&e->rate_bps, &e->min_rtt_ns, &e->saved_s};
    const char *p = line + key_len;
    for (size_t i = 0; i < 3; i++) {
        if (*p++ != ' ' || !parse_figure(&p, figures[i]))
            return 0;
    }
    return *p == '\0';
}

/* 0 when the text is not the format; the line number at fault in *bad. */
static int parse_file(aftp_pathmem *pm, char *text, size_t *bad)
{
    size_t line_no = 0;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        *bad = ++line_no;
        if (line_no == 1) {
            if (strcmp(line, AFTP_PATHMEM_HEADER) != 0)
                return 0;
            continue;
        }
        if (pm->count == AFTP_PATHMEM_MAX_ENTRIES || !parse_entry(line, &pm->entries[pm->count]))
            return 0;
        pm->count++;
    }
    return line_no > 0;
}

int aftp_pathmem_load(aftp_pathmem *pm, const char *path, char *notice, size_t notice_cap)
{
    pm->count = 0;
    notice[0] = '\0';
    int err;
    char *text = read_bounded(path, &err);
    if (text == NULL) {
        if (err != ENOENT)
            snprintf(notice, notice_cap,
                     "path memory %s cannot be read (%s%s): this transfer starts without it",
                     path, strerror(err), err == EFBIG ? ", over the bound of the format" : "");
        return AFTP_OK;
    }
    size_t bad = 0;
    if (!parse_file(pm, text, &bad)) {
        pm->count = 0;
        snprintf(notice, notice_cap,
                 "path memory %s is not in its format (line %zu): ignored, and replaced when "
                 "this transfer saves what it measured",
                 path, bad);
    }
    free(text);
    return AFTP_OK;
}

/* ---- entries ---- */

static int fresh(const aftp_pathmem_entry *e, uint64_t now_s)
{
    return e->saved_s <= now_s + AFTP_PATHMEM_FUTURE_S &&
           (e->saved_s >= now_s || now_s - e->saved_s <= AFTP_PATHMEM_LIFETIME_S);
}

static aftp_pathmem_entry *find(aftp_pathmem *pm, const char *key)
{
    for (size_t i = 0; i < pm->count; i++)
        if (strcmp(pm->entries[i].key, key) == 0)
            return &pm->entries[i];
    return NULL;
}

const aftp_pathmem_entry *aftp_pathmem_lookup(const aftp_pathmem *pm, const char *key,
                                              uint64_t now_s)
{
    const aftp_pathmem_entry *e = find((aftp_pathmem *)pm, key);
    return e != NULL && fresh(e, now_s) ? e : NULL;
}

static aftp_pathmem_entry *oldest(aftp_pathmem *pm)
{
    aftp_pathmem_entry *o = &pm->entries[0];
    for (size_t i = 1; i < pm->count; i++)
        if (pm->entries[i].saved_s < o->saved_s)
            o = &pm->entries[i];
    return o;
}

void aftp_pathmem_update(aftp_pathmem *pm, const char *key, uint64_t rate_bps,
                         uint64_t min_rtt_ns, uint64_t now_s)
{
    aftp_pathmem_entry *e = find(pm, key);
    if (e == NULL)
        e = pm->count < AFTP_PATHMEM_MAX_ENTRIES ? &pm->entries[pm->count++] : oldest(pm);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->rate_bps = rate_bps;
    e->min_rtt_ns = min_rtt_ns;
    e->saved_s = now_s;
}

/* ---- writing ---- */

/* Makes the directories above `path` that are missing (mode 0700). */
static int make_parents(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return ENAMETOOLONG;
    for (char *slash = strchr(dir + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return errno;
        *slash = '/';
    }
    return 0;
}

static int write_entries(FILE *f, const aftp_pathmem *pm, uint64_t now_s)
{
    fprintf(f, "%s\n", AFTP_PATHMEM_HEADER);
    for (size_t i = 0; i < pm->count; i++) {
        const aftp_pathmem_entry *e = &pm->entries[i];
        if (fresh(e, now_s))
            fprintf(f, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", e->key, e->rate_bps,
                    e->min_rtt_ns, e->saved_s);
    }
    return fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0 ? 0 : errno ? errno : EIO;
}

int aftp_pathmem_save(const aftp_pathmem *pm, const char *path, uint64_t now_s, char *why,
                      size_t why_cap)
{
    char tmp[4096 + 16];
    int err = make_parents(path);
    if (err == 0 && snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        err = ENAMETOOLONG;
    int fd = err == 0 ? mkostemp(tmp, O_CLOEXEC) : -1; /* mode 0600 */
    if (err == 0 && fd < 0)
        err = errno;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && f == NULL) {
        err = errno;
        close(fd);
    }
    if (f != NULL) {
        err = write_entries(f, pm, now_s);
        if (fclose(f) != 0 && err == 0)
            err = errno;
        if (err == 0 && rename(tmp, path) != 0)
            err = errno;
        if (err != 0)
            unlink(tmp);
    }
    if (err == 0)
        return AFTP_OK;
    snprintf(why, why_cap, "cannot save the path memory %s: %s", path, strerror(err));
    return AFTP_ERR_IO;
}
