#include "aftp_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/aftp_wire.h"

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static int component_ok(const char *c, size_t len)
{
    if (len == 0 || len > AFTP_PATH_MAX_COMPONENT)
        return 0;
    if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (is_control((unsigned char)c[i]))
            return 0;
    return 1;
}

int aftp_path_check(const char *path)
{
    size_t total = strlen(path);
    if (total == 0 || total > AFTP_WIRE_MAX_PATH || path[0] == '/')
        return AFTP_ERR_PATH_REJECTED;
    const char *start = path;
    for (;;) {
        const char *slash = strchr(start, '/');
        size_t len = slash ? (size_t)(slash - start) : strlen(start);
        if (!component_ok(start, len))
            return AFTP_ERR_PATH_REJECTED;
        if (slash == NULL)
            return AFTP_OK;
        start = slash + 1;
    }
}

static int errno_to_error(int e)
{
    switch (e) {
    case EACCES: case EPERM: case EROFS: return AFTP_ERR_PERMISSION;
    case ENOSPC: case EDQUOT: return AFTP_ERR_NO_SPACE;
    case ELOOP: case ENOTDIR: return AFTP_ERR_PATH_REJECTED; /* a symlink or file in the way */
    case ENOMEM: return AFTP_ERR_NO_MEMORY;
    default: return AFTP_ERR_IO;
    }
}

/* Opens directory `name` beneath `at`, creating it when missing. */
static int open_subdir(int at, const char *name, int *out)
{
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(at, name, flags);
    if (fd < 0 && errno == ENOENT) {
        if (mkdirat(at, name, 0755) != 0 && errno != EEXIST)
            return errno_to_error(errno);
        fd = openat(at, name, flags);
    }
    if (fd < 0)
        return errno_to_error(errno);
    *out = fd;
    return AFTP_OK;
}

int aftp_path_open_parent(int dirfd, const char *path, int *parent_fd, const char **leaf)
{
    char name[AFTP_PATH_MAX_COMPONENT + 1];
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (cur < 0)
        return errno_to_error(errno);
    const char *start = path;
    const char *slash;
    while ((slash = strchr(start, '/')) != NULL) {
        size_t len = (size_t)(slash - start);
        memcpy(name, start, len);
        name[len] = '\0';
        int next = -1;
        int rc = open_subdir(cur, name, &next);
        close(cur);
        if (rc != AFTP_OK)
            return rc;
        cur = next;
        start = slash + 1;
    }
    *parent_fd = cur;
    *leaf = start;
    return AFTP_OK;
}

void aftp_path_printable(const char *text, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        char esc[5];
        int printable = !is_control(*p) && *p < 0x80 && *p != '\\';
        size_t n = printable ? 1 : 4;
        if (printable)
            esc[0] = (char)*p;
        else
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        if (o + n >= cap)
            break;
        memcpy(buf + o, esc, n);
        o += n;
    }
    buf[o] = '\0';
}

int aftp_path_report_fail(aftp_path_report *r, int err, const char *what, const char *detail)
{
    char printable[128];
    if (r->last_error != AFTP_OK)
        return err;
    aftp_path_printable(r->name, printable, sizeof printable);
    r->last_error = err;
    snprintf(r->message, sizeof r->message, "%s %s%s%s", what, printable, detail ? ": " : "",
             detail ? detail : "");
    return err;
}

int aftp_path_report_start(aftp_path_report *r, const char *path)
{
    r->last_error = AFTP_OK;
    r->message[0] = '\0';
    snprintf(r->name, sizeof r->name, "%s", path);
    if (aftp_path_check(path) != AFTP_OK)
        return aftp_path_report_fail(r, AFTP_ERR_PATH_REJECTED, "refused unsafe path", NULL);
    return AFTP_OK;
}
