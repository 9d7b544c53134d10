#include "aftp_faux.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define FAUX_MAX_SIZE (UINT64_C(1) << 60) /* 1 EiB: no suffix arithmetic overflows */

int aftp_faux_is(const char *s)
{
    return strncmp(s, AFTP_FAUX_PREFIX, strlen(AFTP_FAUX_PREFIX)) == 0;
}

static int parse_error(char *why, size_t cap, const char *url, const char *what)
{
    snprintf(why, cap, "bad faux source '%s': %s (faux:///NAME?SIZE, e.g. faux:///test?10G)",
             url, what);
    return AFTP_ERR_INVALID_ARGUMENT;
}

static int suffix_shift(char c, unsigned *shift)
{
    static const char suffixes[] = "kmgt";
    const char *at = c ? strchr(suffixes, tolower((unsigned char)c)) : NULL;
    if (c != '\0' && at == NULL)
        return 0;
    *shift = at ? 10u * (unsigned)(at - suffixes + 1) : 0;
    return 1;
}

static int parse_size(const char *text, uint64_t *size)
{
    uint64_t n = 0;
    const char *p = text;
    unsigned shift;
    for (; isdigit((unsigned char)*p); p++) {
        n = n * 10 + (uint64_t)(*p - '0');
        if (n > FAUX_MAX_SIZE)
            return 0;
    }
    if (p == text || !suffix_shift(*p, &shift) || (*p != '\0' && p[1] != '\0'))
        return 0;
    if (n > FAUX_MAX_SIZE >> shift)
        return 0;
    *size = n << shift;
    return 1;
}

int aftp_faux_parse(const char *url, char name[AFTP_PATH_MAX_COMPONENT + 1], uint64_t *size,
                    char *why, size_t why_cap)
{
    if (!aftp_faux_is(url) || url[strlen(AFTP_FAUX_PREFIX)] != '/')
        return parse_error(why, why_cap, url, "it must begin with faux:///");
    const char *start = url + strlen(AFTP_FAUX_PREFIX) + 1;
    const char *query = strchr(start, '?');
    if (query == NULL)
        return parse_error(why, why_cap, url, "no ?SIZE");
    size_t len = (size_t)(query - start);
    if (len == 0 || len > AFTP_PATH_MAX_COMPONENT || memchr(start, '/', len) != NULL)
        return parse_error(why, why_cap, url, "NAME must be one path component");
    memcpy(name, start, len);
    name[len] = '\0';
    if (aftp_path_check(name) != AFTP_OK)
        return parse_error(why, why_cap, url, "NAME is not a safe file name");
    if (!parse_size(query + 1, size))
        return parse_error(why, why_cap, url, "SIZE must be a byte count, suffix k M G or T");
    return AFTP_OK;
}

static const uint8_t *zeros;
static pthread_once_t zeros_once = PTHREAD_ONCE_INIT;

/* Never unmapped: like a static buffer, it lives as long as the process. */
static void map_zeros(void)
{
    void *m = mmap(NULL, AFTP_FAUX_WINDOW, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    zeros = m == MAP_FAILED ? NULL : m;
}

const uint8_t *aftp_faux_zeros(size_t len)
{
    if (len > AFTP_FAUX_WINDOW)
        return NULL;
    pthread_once(&zeros_once, map_zeros);
    return zeros;
}

static int sink_open(void *user, const aftp_file_info *info)
{
    aftp_faux_sink *k = user;
    if (k->open)
        return AFTP_ERR_INVALID_STATE; /* one file at a time */
    int rc = aftp_path_report_start(&k->report, info->path);
    if (rc != AFTP_OK)
        return rc;
    if (aftp_faux_zeros(0) == NULL)
        return aftp_path_report_fail(&k->report, AFTP_ERR_NO_MEMORY, "cannot map zero pages for",
                                     NULL);
    k->open = 1;
    k->file_id = info->file_id;
    k->size = info->size;
    return AFTP_OK;
}

static int sink_range(const aftp_faux_sink *k, uint32_t file_id, uint64_t off, size_t len)
{
    if (!k->open || file_id != k->file_id)
        return AFTP_ERR_INVALID_STATE;
    if (off > k->size || len > k->size - off || len > AFTP_FAUX_WINDOW)
        return AFTP_ERR_INVALID_ARGUMENT;
    return AFTP_OK;
}

static int sink_write(void *user, uint32_t file_id, uint64_t off, const uint8_t *data, size_t len)
{
    aftp_faux_sink *k = user;
    int rc = sink_range(k, file_id, off, len);
    if (rc != AFTP_OK)
        return rc;
    if (memcmp(data, aftp_faux_zeros(len), len) != 0)
        return aftp_path_report_fail(&k->report, AFTP_ERR_IO,
                                     "a faux:// destination takes only a faux:// source:",
                                     "it has bytes other than zeros (receive it into a directory)");
    return AFTP_OK;
}

/* What was received is known to be zeros: the digest is checked over them. */
static int sink_view(void *user, uint32_t file_id, uint64_t off, size_t len, const uint8_t **out)
{
    aftp_faux_sink *k = user;
    int rc = sink_range(k, file_id, off, len);
    if (rc == AFTP_OK)
        *out = aftp_faux_zeros(len);
    return rc;
}

static int sink_close(void *user, uint32_t file_id, int commit)
{
    aftp_faux_sink *k = user;
    (void)commit;
    if (!k->open || file_id != k->file_id)
        return AFTP_ERR_INVALID_STATE;
    k->open = 0;
    return AFTP_OK;
}

const aftp_storage_ops aftp_faux_sink_ops = {
    .view = sink_view, .open = sink_open, .write = sink_write, .close = sink_close};
