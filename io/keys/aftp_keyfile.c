/* Key files, authorized keys and known hosts (aftp_keyfile.h). */
#include "aftp_keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "aftp_parse.h"

enum {
    KEY = AFTP_KEYFILE_KEY_LEN,
    B64_LEN = AFTP_KEYFILE_B64_LEN,
    PRIVATE_FILE_MAX = 128    /* the one line of a private key file, with room to spare */
};

__attribute__((format(printf, 4, 5))) static int fail(int code, char *err, size_t err_len,
                                                      const char *fmt, ...)
{
    if (err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- spans, tokens, lines ---- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static span skip_blanks(span s)
{
    while (s.n > 0 && is_blank(*s.p))
        s.p++, s.n--;
    return s;
}

/* The next blank-separated token of *rest; *rest moves past it. */
static span next_token(span *rest)
{
    span s = skip_blanks(*rest), tok = {s.p, 0};
    while (tok.n < s.n && !is_blank(s.p[tok.n]))
        tok.n++;
    rest->p = s.p + tok.n;
    rest->n = s.n - tok.n;
    return tok;
}

static int span_is(span s, const char *text)
{
    return s.n == strlen(text) && memcmp(s.p, text, s.n) == 0;
}

typedef struct lines {
    span rest;
    unsigned no; /* number of the line last returned, from 1 */
} lines;

/* The next line without its newline (and a trailing CR); 0 at the end. */
static int next_line(lines *it, span *line)
{
    if (it->rest.n == 0)
        return 0;
    const char *nl = memchr(it->rest.p, '\n', it->rest.n);
    size_t n = nl != NULL ? (size_t)(nl - it->rest.p) : it->rest.n;
    *line = (span){it->rest.p, n};
    if (line->n > 0 && line->p[line->n - 1] == '\r')
        line->n--;
    it->rest.p += nl != NULL ? n + 1 : n;
    it->rest.n -= nl != NULL ? n + 1 : n;
    it->no++;
    return 1;
}

/* Why a line cannot be read at all (aftp_keyfile_line_problem), or NULL. */
static const char *line_problem(span line, int *code)
{
    return aftp_keyfile_line_problem(line.p, line.n, code);
}

static int is_skipped(span line)
{
    span s = skip_blanks(line);
    return s.n == 0 || s.p[0] == '#';
}

/* ---- keys in text ---- */

static const char *decode_key(span tok, uint8_t *key)
{
    size_t len = 0;
    const char *end = NULL;
    if (tok.n != B64_LEN ||
        sodium_base642bin(key, KEY, tok.p, tok.n, NULL, &len, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        len != KEY || end != tok.p + tok.n)
        return "key is not 44 characters of base64 (32 bytes)";
    return NULL;
}

/* "aftp-x25519 <base64> [comment]": the comment is the rest of the line
 * (comment may be NULL when not wanted). */
static const char *parse_public_fields(span rest, uint8_t *key, span *comment)
{
    if (!span_is(next_token(&rest), AFTP_KEYFILE_PUBLIC_TAG))
        return "expected '" AFTP_KEYFILE_PUBLIC_TAG " <base64> [comment]'";
    const char *why = decode_key(next_token(&rest), key);
    if (comment != NULL) {
        *comment = skip_blanks(rest);
        while (comment->n > 0 && is_blank(comment->p[comment->n - 1]))
            comment->n--;
    }
    return why;
}

int aftp_keyfile_parse_public(const char *line, size_t len, uint8_t *key, char *err,
                              size_t err_len)
{
    span s = {line, len};
    int code;
    const char *why = line_problem(s, &code);
    if (why == NULL && (why = parse_public_fields(s, key, NULL)) != NULL)
        code = AFTP_ERR_BAD_KEY;
    return why != NULL ? fail(code, err, err_len, "public key: %s", why) : AFTP_OK;
}

/* ---- files ---- */

static int open_error(const char *path, char *err, size_t err_len)
{
    int e = errno;
    if (e == ENOENT)
        return fail(AFTP_ERR_NOT_FOUND, err, err_len, "%s: no such file", path);
    if (e == ELOOP)
        return fail(AFTP_ERR_PERMISSION, err, err_len, "%s: is a symbolic link (refused)", path);
    if (e == EEXIST)
        return fail(AFTP_ERR_FILE_EXISTS, err, err_len, "%s: exists (refusing to replace it)",
                    path);
    return fail(e == EACCES || e == EPERM ? AFTP_ERR_PERMISSION : AFTP_ERR_IO, err, err_len,
                "%s: %s", path, strerror(e));
}

/* Reads fd to its end into buf; AFTP_ERR_LIMIT when it holds cap bytes or more. */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + *len, cap - *len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return AFTP_ERR_IO;
        if (r == 0)
            return AFTP_OK;
        *len += (size_t)r;
        if (*len == cap)
            return AFTP_ERR_LIMIT;
    }
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return AFTP_ERR_IO;
        buf += w;
        len -= (size_t)w;
    }
    return AFTP_OK;
}

/* Creates path exclusively with exactly `mode`, writes text, syncs. A
 * failure leaves no partial file behind. */
static int write_new_file(const char *path, mode_t mode, const char *text, size_t len, char *err,
                          size_t err_len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return open_error(path, err, err_len);
    int rc = fchmod(fd, mode) == 0 ? write_all(fd, text, len) : AFTP_ERR_IO;
    if (rc == AFTP_OK && fsync(fd) != 0)
        rc = AFTP_ERR_IO;
    if (close(fd) != 0 && rc == AFTP_OK)
        rc = AFTP_ERR_IO;
    if (rc != AFTP_OK) {
        unlink(path);
        return fail(rc, err, err_len, "%s: cannot write: %s", path, strerror(errno));
    }
    return AFTP_OK;
}

int aftp_keyfile_write_private(const char *path, const uint8_t *secret, char *err, size_t err_len)
{
    char text[PRIVATE_FILE_MAX], b64[B64_LEN + 1];
    aftp_keyfile_base64(secret, b64);
    int n = snprintf(text, sizeof text, "%s %s\n", AFTP_KEYFILE_PRIVATE_TAG, b64);
    int rc = write_new_file(path, 0600, text, (size_t)n, err, err_len);
    sodium_memzero(text, sizeof text);
    sodium_memzero(b64, sizeof b64);
    return rc;
}

int aftp_keyfile_write_public(const char *path, const uint8_t *key, const char *comment, char *err,
                              size_t err_len)
{
    char text[AFTP_KEYFILE_MAX_LINE + 2];
    int rc = aftp_keyfile_format_public(key, comment, text, sizeof text);
    if (rc != AFTP_OK)
        return fail(rc, err, err_len, "%s: comment must be one printable line", path);
    return write_new_file(path, 0644, text, strlen(text), err, err_len);
}

/* Like ssh: a secret others can read is already compromised, so refuse it
 * rather than use it. */
static int private_file_safe(const char *path, const struct stat *st, char *err, size_t err_len)
{
    if (!S_ISREG(st->st_mode))
        return fail(AFTP_ERR_BAD_KEY, err, err_len, "%s: not a regular file", path);
    if (st->st_uid != geteuid() && st->st_uid != 0)
        return fail(AFTP_ERR_PERMISSION, err, err_len,
                    "%s: owned by uid %u, not by you: refusing to use this private key", path,
                    (unsigned)st->st_uid);
    if (st->st_mode & 077)
        return fail(AFTP_ERR_PERMISSION, err, err_len,
                    "%s: mode %04o lets others read the private key: run chmod 600 %s", path,
                    (unsigned)(st->st_mode & 07777), path);
    return AFTP_OK;
}

/* The file is exactly "aftp-private-key <base64>" and an optional newline. */
static const char *parse_private(span text, uint8_t *secret)
{
    if (text.n > 0 && text.p[text.n - 1] == '\n')
        text.n--;
    int code;
    if (memchr(text.p, '\n', text.n) != NULL || line_problem(text, &code) != NULL)
        return "expected one line";
    if (!span_is(next_token(&text), AFTP_KEYFILE_PRIVATE_TAG))
        return "expected '" AFTP_KEYFILE_PRIVATE_TAG " <base64>'";
    const char *why = decode_key(next_token(&text), secret);
    if (why == NULL && skip_blanks(text).n != 0)
        why = "unexpected text after the key";
    return why;
}

int aftp_keyfile_read_private(const char *path, uint8_t *secret, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return open_error(path, err, err_len);
    char buf[PRIVATE_FILE_MAX];
    size_t len = 0;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? private_file_safe(path, &st, err, err_len) : AFTP_ERR_IO;
    if (rc == AFTP_OK)
        rc = read_all(fd, buf, sizeof buf, &len);
    close(fd);
    const char *why = rc == AFTP_OK ? parse_private((span){buf, len}, secret) : NULL;
    sodium_memzero(buf, sizeof buf);
    if (why != NULL || rc == AFTP_ERR_LIMIT)
        return fail(AFTP_ERR_BAD_KEY, err, err_len, "%s: %s", path,
                    why != NULL ? why : "too long for a private key file");
    if (rc == AFTP_ERR_IO)
        return fail(rc, err, err_len, "%s: cannot read: %s", path, strerror(errno));
    return rc;
}

/* Reads a whole list file (at most AFTP_KEYFILE_MAX_SIZE bytes) into a
 * malloc'd buffer. */
static int load_text(const char *path, char **text, size_t *len, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return open_error(path, err, err_len);
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? AFTP_OK : AFTP_ERR_IO;
    if (rc == AFTP_OK && (!S_ISREG(st.st_mode) || st.st_size > (off_t)AFTP_KEYFILE_MAX_SIZE))
        rc = AFTP_ERR_LIMIT;
    char *buf = rc == AFTP_OK ? malloc((size_t)st.st_size + 1) : NULL;
    if (rc == AFTP_OK && buf == NULL)
        rc = AFTP_ERR_NO_MEMORY;
    if (rc == AFTP_OK)
        rc = read_all(fd, buf, (size_t)st.st_size + 1, len);
    close(fd);
    if (rc != AFTP_OK) {
        free(buf);
        return fail(rc, err, err_len, "%s: %s", path,
                    rc == AFTP_ERR_LIMIT ? "not a regular file of at most 4 MiB (or changed "
                                           "while read)"
                                         : aftp_strerror(rc));
    }
    *text = buf;
    return AFTP_OK;
}

int aftp_keyfile_read_public(const char *path, uint8_t *key, char *err, size_t err_len)
{
    char *text;
    size_t len;
    int rc = load_text(path, &text, &len, err, err_len);
    if (rc != AFTP_OK)
        return rc;
    lines it = {{text, len}, 0};
    span line;
    const char *why = "no key in the file";
    rc = AFTP_ERR_BAD_KEY;
    while (next_line(&it, &line)) {
        if ((why = line_problem(line, &rc)) == NULL && is_skipped(line))
            continue;
        if (why == NULL && (why = parse_public_fields(line, key, NULL)) != NULL)
            rc = AFTP_ERR_BAD_KEY;
        break;
    }
    free(text);
    return why != NULL ? fail(rc, err, err_len, "%s:%u: %s", path, it.no, why) : AFTP_OK;
}

/* ---- lists ---- */

/* Room for one more entry in each of the list's arrays. */
static int list_grow(aftp_keyfile_list *list, size_t *cap)
{
    if (list->count < *cap)
        return AFTP_OK;
    size_t grown = *cap ? *cap * 2 : 16;
    void *keys = realloc(list->keys, grown * sizeof *list->keys);
    if (keys == NULL)
        return AFTP_ERR_NO_MEMORY;
    list->keys = keys;
    void *comments = realloc(list->comments, grown * sizeof *list->comments);
    if (comments == NULL)
        return AFTP_ERR_NO_MEMORY;
    list->comments = comments;
    void *options = realloc(list->options, grown * sizeof *list->options);
    if (options == NULL)
        return AFTP_ERR_NO_MEMORY;
    list->options = options;
    *cap = grown;
    return AFTP_OK;
}

static void options_free(aftp_keyfile_options *o)
{
    free(o->root);
    free(o->from);
    free(o->from_text);
    memset(o, 0, sizeof *o);
}

/* The list takes key, a copy of comment and the options (which it owns
 * from then on, pushed or not). */
static int list_push(aftp_keyfile_list *list, size_t *cap, const uint8_t *key, span comment,
                     aftp_keyfile_options *opts)
{
    char *text = NULL;
    int rc = list_grow(list, cap);
    if (rc == AFTP_OK && (text = strndup(comment.p, comment.n)) == NULL)
        rc = AFTP_ERR_NO_MEMORY;
    if (rc != AFTP_OK) {
        options_free(opts);
        return rc;
    }
    list->comments[list->count] = text;
    list->options[list->count] = *opts;
    memcpy(list->keys[list->count++], key, KEY);
    return AFTP_OK;
}

/* ---- options (spec Appendix B.4) ---- */

/* A reason with figures, written into the parse's buffer. */
typedef struct reason {
    char *buf;
    size_t cap;
} reason;

__attribute__((format(printf, 2, 3))) static const char *say(const reason *r, const char *fmt,
                                                              ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->buf, r->cap, fmt, ap);
    va_end(ap);
    return r->buf;
}

/* The options field: from the line's first non-blank to the first blank
 * outside double quotes (empty when the line starts with the key type);
 * *rest moves past it. */
static span options_field(span *rest)
{
    span s = skip_blanks(*rest), probe = s, f = {s.p, 0};
    if (span_is(next_token(&probe), AFTP_KEYFILE_PUBLIC_TAG))
        return f;
    int quoted = 0;
    while (f.n < s.n && (quoted || !is_blank(s.p[f.n])))
        quoted ^= s.p[f.n++] == '"';
    rest->p = s.p + f.n;
    rest->n = s.n - f.n;
    return f;
}

/* A field whose last double quote opens a value that never closes (it
 * ran to the end of the line). */
static int quote_open(span field)
{
    size_t quotes = 0;
    for (size_t i = 0; i < field.n; i++)
        quotes += field.p[i] == '"';
    return quotes % 2 != 0;
}

/* One option of *field (whose quotes all close: quote_open): its name
 * and, after '=', its value (quotes removed); *field moves past it and
 * its comma. NULL or why not. */
static const char *next_option(span *field, span *name, span *value, int *has_value,
                               const reason *r)
{
    size_t i = 0;
    while (i < field->n && field->p[i] != '=' && field->p[i] != ',')
        i++;
    *name = (span){field->p, i};
    *has_value = i < field->n && field->p[i] == '=';
    *value = (span){field->p + i, 0};
    if (*has_value) {
        int quoted = ++i < field->n && field->p[i] == '"';
        size_t from = i += (size_t)quoted;
        while (i < field->n && (quoted ? field->p[i] != '"' : field->p[i] != ','))
            i++;
        *value = (span){field->p + from, i - from};
        if (!quoted && memchr(value->p, '"', value->n) != NULL)
            return say(r, "option '%.*s': a double quote inside a value that does not start "
                          "with one", (int)name->n, name->p);
        i += (size_t)quoted;
    }
    if (name->n == 0)
        return say(r, "an empty option (two commas, or a comma at an end)");
    if (i < field->n && field->p[i] != ',')
        return say(r, "option '%.*s': text after the closing quote (options are separated by "
                      "commas, without blanks)", (int)name->n, name->p);
    int comma = i < field->n;
    field->p += i + (size_t)comma;
    field->n -= i + (size_t)comma;
    if (comma && field->n == 0)
        return say(r, "an empty option (two commas, or a comma at an end)");
    return NULL;
}

/* root="DIR": any path but an empty one. */
static const char *option_root(span value, aftp_keyfile_options *o, const reason *r)
{
    if (value.n == 0)
        return say(r, "root=\"\" names no directory");
    if ((o->root = strndup(value.p, value.n)) == NULL)
        return say(r, "out of memory");
    return NULL;
}

/* from="CIDR,...": at most AFTP_KEYFILE_MAX_FROM prefixes. */
static const char *option_from(span value, aftp_keyfile_options *o, const reason *r)
{
    size_t count = 1;
    for (size_t i = 0; i < value.n; i++)
        count += value.p[i] == ',';
    if (count > AFTP_KEYFILE_MAX_FROM)
        return say(r, "from= lists %zu addresses, more than the %u allowed", count,
                   AFTP_KEYFILE_MAX_FROM);
    o->from = calloc(count, sizeof *o->from);
    o->from_text = strndup(value.p, value.n);
    if (o->from == NULL || o->from_text == NULL)
        return say(r, "out of memory");
    span rest = value;
    for (size_t k = 0; k < count; k++) {
        const char *comma = memchr(rest.p, ',', rest.n);
        span one = {rest.p, comma != NULL ? (size_t)(comma - rest.p) : rest.n};
        const char *why = one.n == 0 ? "an empty entry"
                                     : aftp_addrmatch_parse(one.p, one.n, &o->from[k]);
        if (why != NULL)
            return say(r, "from= entry '%.*s': %s", (int)one.n, one.p, why);
        rest.p += one.n + (comma != NULL);
        rest.n -= one.n + (comma != NULL);
    }
    o->from_count = count;
    return NULL;
}

/* rate=N[K|M|G]: bits/s, as the tool's --rate reads it. */
static const char *option_rate(span value, aftp_keyfile_options *o, const reason *r)
{
    char text[32];
    if (value.n == 0 || value.n >= sizeof text)
        return say(r, "rate=%.*s is not a rate (bits/s: 800000, 200M, 1.5G)", (int)value.n,
                   value.p);
    memcpy(text, value.p, value.n);
    text[value.n] = '\0';
    if (aftp_parse_rate(text, &o->rate_bps) != AFTP_OK)
        return say(r, "rate=%s is not a rate of 1 bit/s to 1T (bits/s: 800000, 200M, 1.5G)",
                   text);
    return NULL;
}

enum { OPT_ROOT, OPT_FROM, OPT_RATE, OPT_READ_ONLY, OPT_WRITE_ONLY, OPT_COUNT };
static const char *const option_names[OPT_COUNT] = {"root", "from", "rate", "read-only",
                                                    "write-only"};

/* One option into o (`given`: the options seen on this line, by bit). */
static const char *apply_option(span name, span value, int has_value, unsigned *given,
                                aftp_keyfile_options *o, const reason *r)
{
    int which = 0;
    while (which < OPT_COUNT && !span_is(name, option_names[which]))
        which++;
    if (which == OPT_COUNT)
        return say(r, "unknown option '%.*s' (known: root=\"DIR\", from=\"CIDR,...\", "
                      "rate=N[K|M|G], read-only, write-only)", (int)(name.n < 64 ? name.n : 64),
                   name.p);
    if (*given & (1u << which))
        return say(r, "option '%s' given twice", option_names[which]);
    *given |= 1u << which;
    int flag = which == OPT_READ_ONLY || which == OPT_WRITE_ONLY;
    if (flag && has_value)
        return say(r, "option '%s' takes no value", option_names[which]);
    if (!flag && !has_value)
        return say(r, "option '%s' needs a value (%s=...)", option_names[which],
                   option_names[which]);
    switch (which) {
    case OPT_ROOT: return option_root(value, o, r);
    case OPT_FROM: return option_from(value, o, r);
    case OPT_RATE: return option_rate(value, o, r);
    case OPT_READ_ONLY: o->access &= ~AFTP_KEYFILE_ACCESS_WRITE; break;
    default: o->access &= ~AFTP_KEYFILE_ACCESS_READ; break;
    }
    return o->access == 0 ? say(r, "read-only and write-only together leave this key nothing "
                                   "to do: keep one, or remove the line")
                          : NULL;
}

/* A line's options field into o (set to the defaults first); NULL or why
 * not (*code the error). */
static const char *parse_options(span field, aftp_keyfile_options *o, int *code,
                                 const reason *r)
{
    unsigned given = 0;
    o->access = AFTP_KEYFILE_ACCESS_ALL;
    *code = AFTP_ERR_LIMIT;
    if (field.n > AFTP_KEYFILE_MAX_OPTIONS)
        return say(r, "the options are %zu bytes, more than the %u allowed", field.n,
                   AFTP_KEYFILE_MAX_OPTIONS);
    *code = AFTP_ERR_BAD_KEY;
    while (field.n > 0) {
        span name, value;
        int has_value;
        const char *why = next_option(&field, &name, &value, &has_value, r);
        if (why == NULL)
            why = apply_option(name, value, has_value, &given, o, r);
        if (why != NULL)
            return why;
    }
    return NULL;
}

/* One authorized-keys line into the list; a reason on failure. */
static const char *authorized_line(span line, unsigned no, aftp_keyfile_list *list, size_t *cap,
                                   int *code, const reason *r)
{
    uint8_t key[KEY];
    span comment, rest = line;
    aftp_keyfile_options opts = {.line = no};
    const char *why = line_problem(line, code);
    if (why != NULL || is_skipped(line))
        return why;
    *code = AFTP_ERR_LIMIT;
    if (list->count == AFTP_KEYFILE_MAX_KEYS)
        return "too many keys";
    *code = AFTP_ERR_BAD_KEY;
    span field = options_field(&rest), type = rest;
    if (quote_open(field))
        return "a double quote in the options is not closed";
    if (field.n > 0 && !span_is(next_token(&type), AFTP_KEYFILE_PUBLIC_TAG))
        return "expected '[options] " AFTP_KEYFILE_PUBLIC_TAG " <base64> [comment]'";
    if ((why = parse_public_fields(rest, key, &comment)) != NULL)
        return why;
    if ((why = parse_options(field, &opts, code, r)) != NULL) {
        options_free(&opts);
        return why;
    }
    *code = list_push(list, cap, key, comment, &opts);
    return *code == AFTP_OK ? NULL : "out of memory";
}

static int same_options(const aftp_keyfile_options *a, const aftp_keyfile_options *b)
{
    int same_root = (a->root == NULL) == (b->root == NULL) &&
                    (a->root == NULL || strcmp(a->root, b->root) == 0);
    return same_root && a->rate_bps == b->rate_bps && a->access == b->access &&
           a->from_count == b->from_count &&
           (a->from_count == 0 || memcmp(a->from, b->from, a->from_count * sizeof *a->from) == 0);
}

/* Orders entries of the list by key, then by line (the duplicate check's
 * sort: n log n, where comparing each pair would take seconds for a
 * full list). */
static int by_key(const void *pa, const void *pb, void *list)
{
    const aftp_keyfile_list *l = list;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    int c = memcmp(l->keys[a], l->keys[b], KEY);
    return c != 0 ? c : (a > b) - (a < b);
}

/* A key listed twice is admitted once when both lines say the same;
 * with different options the file is ambiguous: refused, naming both
 * lines. */
static int check_duplicates(const char *name, const aftp_keyfile_list *list, char *err,
                            size_t err_len)
{
    if (list->count < 2)
        return AFTP_OK;
    size_t *order = malloc(list->count * sizeof *order);
    if (order == NULL)
        return fail(AFTP_ERR_NO_MEMORY, err, err_len, "%s: out of memory", name);
    for (size_t i = 0; i < list->count; i++)
        order[i] = i;
    qsort_r(order, list->count, sizeof *order, by_key, (void *)list);
    int rc = AFTP_OK;
    for (size_t i = 1; i < list->count && rc == AFTP_OK; i++) {
        const aftp_keyfile_options *a = &list->options[order[i - 1]],
                                   *b = &list->options[order[i]];
        if (memcmp(list->keys[order[i - 1]], list->keys[order[i]], KEY) == 0 &&
            !same_options(a, b))
            rc = fail(AFTP_ERR_BAD_KEY, err, err_len,
                      "%s:%u and %s:%u list the same key with different options: ambiguous "
                      "(keep one line per key)", name, a->line, name, b->line);
    }
    free(order);
    return rc;
}

int aftp_keyfile_authorized_parse(const char *name, const char *text, size_t len,
                                  aftp_keyfile_list *out, char *err, size_t err_len)
{
    char detail[AFTP_KEYFILE_MAX_OPTIONS + 128];
    reason r = {detail, sizeof detail};
    *out = (aftp_keyfile_list){NULL, 0, NULL, NULL};
    if (len > AFTP_KEYFILE_MAX_SIZE)
        return fail(AFTP_ERR_LIMIT, err, err_len, "%s: larger than 4 MiB", name);
    lines it = {{text, len}, 0};
    span line;
    size_t cap = 0;
    int rc = AFTP_OK;
    while (rc == AFTP_OK && next_line(&it, &line)) {
        int code;
        const char *why = authorized_line(line, it.no, out, &cap, &code, &r);
        if (why != NULL)
            rc = fail(code, err, err_len, "%s:%u: %s", name, it.no, why);
    }
    if (rc == AFTP_OK)
        rc = check_duplicates(name, out, err, err_len);
    if (rc != AFTP_OK)
        aftp_keyfile_list_free(out);
    return rc;
}

int aftp_keyfile_authorized_load(const char *path, aftp_keyfile_list *out, char *err,
                                 size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    *out = (aftp_keyfile_list){NULL, 0, NULL, NULL};
    int rc = load_text(path, &text, &len, err, err_len);
    if (rc == AFTP_OK)
        rc = aftp_keyfile_authorized_parse(path, text, len, out, err, err_len);
    free(text);
    return rc;
}

/* ---- known hosts ---- */

/* A host field: one printable token that cannot be taken for a comment. */
static int host_ok(const char *host)
{
    size_t n = strlen(host);
    if (n == 0 || n > AFTP_KEYFILE_MAX_HOST || host[0] == '#')
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)host[i] <= 0x20 || (unsigned char)host[i] == 0x7f)
            return 0;
    return 1;
}

/* One known-hosts line: *this_host set (and the key in listed) when it
 * names host. */
static const char *known_host_entry(span line, const char *host, uint8_t *listed, int *this_host,
                                    int *code)
{
    *this_host = 0;
    const char *why = line_problem(line, code);
    if (why != NULL || is_skipped(line))
        return why;
    span rest = line;
    int named = span_is(next_token(&rest), host);
    *code = AFTP_ERR_BAD_KEY;
    if ((why = parse_public_fields(rest, listed, NULL)) != NULL)
        return why;
    *this_host = named;
    return NULL;
}

/* What one known-hosts line says about host: 1 same key, -1 other key, 0 not this host. */
static const char *known_host_line(span line, const char *host, const uint8_t *key, int *verdict,
                                   int *code)
{
    uint8_t listed[KEY];
    int this_host;
    const char *why = known_host_entry(line, host, listed, &this_host, code);
    *verdict = this_host ? (sodium_memcmp(listed, key, KEY) == 0 ? 1 : -1) : 0;
    return why;
}

/* What both known-hosts functions check first. */
static int known_hosts_args(const char *name, size_t len, const char *host, char *err,
                            size_t err_len)
{
    if (!host_ok(host))
        return fail(AFTP_ERR_INVALID_ARGUMENT, err, err_len, "invalid host name");
    if (len > AFTP_KEYFILE_MAX_SIZE)
        return fail(AFTP_ERR_LIMIT, err, err_len, "%s: larger than 4 MiB", name);
    return AFTP_OK;
}

int aftp_keyfile_known_hosts_check(const char *name, const char *text, size_t len,
                                   const char *host, const uint8_t *key, char *err,
                                   size_t err_len)
{
    int rc = known_hosts_args(name, len, host, err, err_len);
    if (rc != AFTP_OK)
        return rc;
    lines it = {{text, len}, 0};
    span line;
    unsigned same = 0, other = 0;
    while (next_line(&it, &line)) {
        int verdict, code;
        const char *why = known_host_line(line, host, key, &verdict, &code);
        if (why != NULL)
            return fail(code, err, err_len, "%s:%u: %s", name, it.no, why);
        if (verdict > 0 && same == 0)
            same = it.no;
        if (verdict < 0 && other == 0)
            other = it.no;
    }
    if (same)
        return AFTP_OK;
    if (other)
        return fail(AFTP_ERR_AUTH, err, err_len,
                    "%s:%u: the key of %s has CHANGED: someone may be intercepting the "
                    "connection; if the server's key really changed, remove that line",
                    name, other, host);
    return fail(AFTP_ERR_UNKNOWN_PEER, err, err_len, "%s: %s is not a known host", name, host);
}

/* A known-hosts file, missing = empty: check it for check_key, or look
 * the key of host up into lookup_key. */
static int known_hosts_file(const char *path, const char *host, const uint8_t *check_key,
                            uint8_t *lookup_key, char *err, size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    int rc = load_text(path, &text, &len, err, err_len);
    if (rc == AFTP_ERR_NOT_FOUND)
        rc = AFTP_OK; /* no file yet: nothing is known */
    const char *t = text != NULL ? text : "";
    if (rc == AFTP_OK)
        rc = lookup_key != NULL
                 ? aftp_keyfile_known_hosts_lookup(path, t, len, host, lookup_key, err, err_len)
                 : aftp_keyfile_known_hosts_check(path, t, len, host, check_key, err, err_len);
    free(text);
    return rc;
}

int aftp_keyfile_known_hosts_check_file(const char *path, const char *host, const uint8_t *key,
                                        char *err, size_t err_len)
{
    return known_hosts_file(path, host, key, NULL, err, err_len);
}

int aftp_keyfile_known_hosts_lookup(const char *name, const char *text, size_t len,
                                    const char *host, uint8_t *key, char *err, size_t err_len)
{
    int rc = known_hosts_args(name, len, host, err, err_len);
    if (rc != AFTP_OK)
        return rc;
    lines it = {{text, len}, 0};
    span line;
    unsigned first = 0;
    while (next_line(&it, &line)) {
        uint8_t listed[KEY];
        int this_host, code;
        const char *why = known_host_entry(line, host, listed, &this_host, &code);
        if (why != NULL)
            return fail(code, err, err_len, "%s:%u: %s", name, it.no, why);
        if (this_host && first == 0) {
            memcpy(key, listed, KEY);
            first = it.no;
        } else if (this_host && sodium_memcmp(listed, key, KEY) != 0) {
            return fail(AFTP_ERR_AUTH, err, err_len,
                        "%s:%u and %s:%u list different keys for %s: the server's key may "
                        "have CHANGED; keep only the line with its real key",
                        name, first, name, it.no, host);
        }
    }
    return first ? AFTP_OK
                 : fail(AFTP_ERR_UNKNOWN_PEER, err, err_len, "%s: %s is not a known host", name,
                        host);
}

int aftp_keyfile_known_hosts_lookup_file(const char *path, const char *host, uint8_t *key,
                                         char *err, size_t err_len)
{
    return known_hosts_file(path, host, NULL, key, err, err_len);
}

int aftp_keyfile_known_hosts_append(const char *path, const char *host, const uint8_t *key,
                                    char *err, size_t err_len)
{
    char line[AFTP_KEYFILE_MAX_HOST + 1 + AFTP_KEYFILE_MAX_LINE + 2], pub[AFTP_KEYFILE_MAX_LINE];
    if (!host_ok(host))
        return fail(AFTP_ERR_INVALID_ARGUMENT, err, err_len, "invalid host name");
    aftp_keyfile_format_public(key, NULL, pub, sizeof pub);
    int n = snprintf(line, sizeof line, "%s %s", host, pub);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return open_error(path, err, err_len);
    int rc = write_all(fd, line, (size_t)n);
    if (rc == AFTP_OK && fsync(fd) != 0)
        rc = AFTP_ERR_IO;
    if (close(fd) != 0 && rc == AFTP_OK)
        rc = AFTP_ERR_IO;
    return rc == AFTP_OK ? AFTP_OK
                         : fail(rc, err, err_len, "%s: cannot append: %s", path, strerror(errno));
}
