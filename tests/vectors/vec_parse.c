/* Reader for spec/vectors files (see vec_parse.h and spec/vectors/README.md). */
#include "vec_parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_whole_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (;;) {
        if (text == NULL)
            break;
        len += fread(text + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *bigger = realloc(text, cap * 2);
        if (bigger == NULL)
            free(text);
        text = bigger;
        cap *= 2;
    }
    if (text != NULL && ferror(f)) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (text != NULL)
        text[len] = '\0';
    return text;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int is_blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            return 0;
    return 1;
}

static vec_record *start_record(vec_file *f, unsigned line)
{
    vec_record *grown = realloc(f->records, (f->count + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    f->records = grown;
    vec_record *r = &f->records[f->count++];
    memset(r, 0, sizeof *r);
    r->line = line;
    return r;
}

static int add_field(vec_record *r, char *key, const char *value)
{
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->fields[i].key, key) == 0)
            return -1;
    vec_field *grown = realloc(r->fields, (r->count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    r->fields = grown;
    char *copy = malloc(strlen(value) + 1);
    if (copy == NULL)
        return -1;
    strcpy(copy, value);
    r->fields[r->count++] = (vec_field){key, copy, 0};
    return 0;
}

static int continue_field(vec_record *r, const char *more)
{
    vec_field *f = &r->fields[r->count - 1];
    size_t old = strlen(f->value);
    char *grown = realloc(f->value, old + 1 + strlen(more) + 1);
    if (grown == NULL)
        return -1;
    grown[old] = ' ';
    strcpy(grown + old + 1, more);
    f->value = grown;
    return 0;
}

/* One non-blank, non-comment line: a new key, or the rest of the last value. */
static const char *take_line(vec_file *f, vec_record **cur, char *line, unsigned lineno)
{
    if (line[0] == ' ' || line[0] == '\t') {
        if (*cur == NULL || (*cur)->count == 0)
            return "continuation line outside a record";
        return continue_field(*cur, trim(line)) == 0 ? NULL : "out of memory";
    }
    char *eq = strchr(line, '=');
    if (eq == NULL)
        return "expected 'key = value'";
    *eq = '\0';
    if (*cur == NULL && (*cur = start_record(f, lineno)) == NULL)
        return "out of memory";
    return add_field(*cur, trim(line), trim(eq + 1)) == 0 ? NULL : "duplicate key";
}

int vec_file_load(const char *path, vec_file *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    out->text = read_whole_file(path);
    if (out->text == NULL) {
        snprintf(err, err_len, "%s: cannot read", path);
        return -1;
    }
    vec_record *cur = NULL;
    unsigned lineno = 0;
    for (char *line = out->text; line != NULL; lineno++) {
        char *next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        const char *problem = NULL;
        if (is_blank(line))
            cur = NULL;
        else if (line[0] != '#')
            problem = take_line(out, &cur, line, lineno + 1);
        if (problem != NULL) {
            snprintf(err, err_len, "%s:%u: %s", path, lineno + 1, problem);
            vec_file_free(out);
            return -1;
        }
        line = next;
    }
    return 0;
}

void vec_file_free(vec_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        for (size_t k = 0; k < f->records[i].count; k++)
            free(f->records[i].fields[k].value);
        free(f->records[i].fields);
    }
    free(f->records);
    free(f->text);
    memset(f, 0, sizeof *f);
}

const char *vec_get(vec_record *r, const char *key)
{
    for (size_t i = 0; i < r->count; i++) {
        if (strcmp(r->fields[i].key, key) == 0) {
            r->fields[i].used = 1;
            return r->fields[i].value;
        }
    }
    return NULL;
}

const char *vec_unused_key(const vec_record *r)
{
    for (size_t i = 0; i < r->count; i++)
        if (!r->fields[i].used)
            return r->fields[i].key;
    return NULL;
}

int vec_parse_u64(const char *s, uint64_t *v)
{
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
        base = s[1] == 'x' ? 16 : 8;
        s += 2;
    }
    if (!isxdigit((unsigned char)s[0]))
        return -1; /* also refuses the sign strtoull would accept */
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0')
        return -1;
    *v = x;
    return 0;
}

int vec_parse_i64(const char *s, int64_t *v)
{
    uint64_t mag;
    if (s[0] != '-') {
        if (vec_parse_u64(s, &mag) != 0 || mag > INT64_MAX)
            return -1;
        *v = (int64_t)mag;
        return 0;
    }
    if (vec_parse_u64(s + 1, &mag) != 0 || mag > (UINT64_C(1) << 63))
        return -1;
    *v = mag == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)mag;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_byte(const char *s, uint8_t *b)
{
    int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
    if (lo < 0)
        return -1;
    *b = (uint8_t)(hi << 4 | lo);
    return 0;
}

/* Appends n bytes: copied from src, or `fill` repeated when src is NULL. */
static int append(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *src, uint8_t fill,
                  size_t n)
{
    if (*len + n > *cap) {
        size_t want = (*len + n) * 2 + 16;
        uint8_t *grown = realloc(*buf, want);
        if (grown == NULL)
            return -1;
        *buf = grown;
        *cap = want;
    }
    if (src != NULL)
        memcpy(*buf + *len, src, n);
    else
        memset(*buf + *len, fill, n);
    *len += n;
    return 0;
}

/* One hex token: "HHHH..." or "HH*N". */
static int hex_token(const char *t, size_t tlen, uint8_t **buf, size_t *len, size_t *cap)
{
    uint8_t b;
    if (tlen > 3 && t[2] == '*') {
        char count[24];
        uint64_t n;
        if (tlen - 3 >= sizeof count || hex_byte(t, &b) != 0)
            return -1;
        memcpy(count, t + 3, tlen - 3);
        count[tlen - 3] = '\0';
        if (vec_parse_u64(count, &n) != 0 || n > AFTP_WIRE_MAX_DATAGRAM)
            return -1;
        return append(buf, len, cap, NULL, b, (size_t)n);
    }
    if (tlen % 2 != 0)
        return -1;
    for (size_t i = 0; i < tlen; i += 2)
        if (hex_byte(t + i, &b) != 0 || append(buf, len, cap, &b, 0, 1) != 0)
            return -1;
    return 0;
}

int vec_parse_bytes(const char *s, uint8_t **out, size_t *len)
{
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    const char *last_quote = strrchr(s, '"');
    if (s[0] == '"') {
        if (last_quote == s || last_quote[1] != '\0')
            return -1;
        rc = append(&buf, &n, &cap, (const uint8_t *)s + 1, 0, (size_t)(last_quote - s - 1));
    } else {
        while (rc == 0 && *s != '\0') {
            size_t tlen = strcspn(s, " \t");
            rc = tlen == 0 ? 0 : hex_token(s, tlen, &buf, &n, &cap);
            s += tlen + strspn(s + tlen, " \t");
        }
    }
    /* Always hand back a pointer to free, even for zero bytes. */
    if (rc == 0 && buf == NULL && (buf = malloc(1)) == NULL)
        rc = -1;
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

int vec_split_words(char *s, char **words, int max)
{
    int n = 0;
    for (char *w = strtok(s, " \t"); w != NULL; w = strtok(NULL, " \t")) {
        if (n == max)
            return -1;
        words[n++] = w;
    }
    return n;
}

static int parse_range(char *word, aftp_wire_range *rg)
{
    char *plus = strchr(word, '+');
    if (plus == NULL)
        return -1;
    *plus = '\0';
    return vec_parse_u64(word, &rg->start) == 0 && vec_parse_u64(plus + 1, &rg->len) == 0 ? 0 : -1;
}

int vec_parse_ranges(const char *s, aftp_wire_range **out, size_t *count)
{
    size_t cap = strlen(s) / 2 + 1; /* each range needs at least "a+b " */
    char *copy = malloc(strlen(s) + 1);
    char **words = malloc(cap * sizeof *words);
    aftp_wire_range *ranges = malloc(cap * sizeof *ranges);
    int n = -1;
    if (copy != NULL && words != NULL && ranges != NULL) {
        strcpy(copy, s);
        n = vec_split_words(copy, words, (int)cap);
        for (int i = 0; i < n; i++)
            if (parse_range(words[i], &ranges[i]) != 0)
                n = -1;
    }
    free(copy);
    free(words);
    if (n < 0) {
        free(ranges);
        return -1;
    }
    *out = ranges;
    *count = (size_t)n;
    return 0;
}
