#include "aftp_pullsrc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp_path.h"

void aftp_pullsrc_init(aftp_pullsrc *p, int root_fd, aftp_tree_notice_fn notice, void *user)
{
    memset(p, 0, sizeof *p);
    aftp_treesend_init(&p->tree);
    p->tree.at = root_fd; /* every source opened beneath the root */
    p->root_fd = root_fd;
    p->next_id = 1;
    p->notice = notice;
    p->notice_user = user;
}

void aftp_pullsrc_fini(aftp_pullsrc *p)
{
    if (p->walking)
        aftp_tree_fini(&p->walk);
    aftp_treesend_fini(&p->tree);
    for (size_t i = 0; i < p->served_count; i++)
        free(p->served[i]);
    p->served_count = 0;
}

static int refuse(aftp_pullsrc *p, const char *path, int err, const char *why)
{
    char shown[256];
    aftp_path_printable(path, shown, sizeof shown);
    snprintf(p->message, sizeof p->message, "requested path %s refused: %s", shown, why);
    return err;
}

/* Why the file system refused a path, for the operator's log. */
static const char *resolve_why(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: return "nothing of that kind there beneath the client's root";
    case ELOOP: case EXDEV: return "a symbolic link on the path (a pull follows none)";
    case EACCES: case EPERM: return "the server may not read it";
    default: return strerror(e);
    }
}

/* The text alone (spec 14.10): one trailing '/' allowed (rsync's rule). */
static int check_text(const char *path, char *plain, size_t cap, int *contents_only)
{
    size_t len = strlen(path);
    *contents_only = len > 1 && path[len - 1] == '/';
    if (*contents_only)
        len--;
    if (len >= cap || memchr(path, '\\', len) != NULL)
        return AFTP_ERR_PATH_REJECTED;
    memcpy(plain, path, len);
    plain[len] = '\0';
    return aftp_path_check(plain);
}

/* What is at `plain` beneath the root (a directory only when
 * contents_only), opened as aftp_source_openat resolves it and stated
 * through that descriptor: its S_IFMT, or -errno. */
static int what_is_there(aftp_pullsrc *p, const char *plain, int contents_only)
{
    struct stat sb;
    int fd = aftp_source_openat(p->root_fd, plain, O_PATH | (contents_only ? O_DIRECTORY : 0));
    if (fd < 0)
        return -errno;
    int rc = fstat(fd, &sb) == 0 ? (int)(sb.st_mode & S_IFMT) : -errno;
    close(fd);
    return rc;
}

/* Keeps the served path, as requested, for the walk. */
static int serve(aftp_pullsrc *p, const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return AFTP_ERR_NO_MEMORY;
    p->served[p->served_count++] = copy;
    return AFTP_OK;
}

int aftp_pullsrc_path(aftp_pullsrc *p, uint32_t index, const char *path, unsigned flags)
{
    (void)index;
    char plain[AFTP_WIRE_MAX_PATH + 1];
    int contents_only;
    p->decided = 1;
    p->flags = flags;
    if (p->served_count == AFTP_PULL_MAX_PATHS) /* the wire's bound: never reached */
        return refuse(p, path, AFTP_ERR_LIMIT, "too many paths");
    if (check_text(path, plain, sizeof plain, &contents_only) != AFTP_OK)
        return refuse(p, path, AFTP_ERR_PATH_REJECTED,
                      "not a plain relative path (absolute, '..', '.', an empty component, a "
                      "backslash or a control character)");
    int type = what_is_there(p, plain, contents_only);
    if (type == S_IFREG || type == S_IFDIR)
        return serve(p, path);
    const char *unused;
    if (type < 0)
        return refuse(p, path, aftp_source_errno_error(-type, &unused), resolve_why(-type));
    return refuse(p, path, AFTP_ERR_PATH_REJECTED,
                  "a FIFO, socket or device: only files and directories are served");
}

/* The walk's next entry into p->info: 1, 0 when the walk is over, or the error. */
static int load_entry(aftp_pullsrc *p)
{
    if (aftp_tree_next(&p->walk, &p->e) != 1)
        return 0;
    unsigned file_flags = p->flags & ~AFTP_ENTRY_OVERWRITE;
    int rc = aftp_treesend_entry_info(&p->e, p->next_id, 0, file_flags, &p->info);
    p->info.file.overwrite = (p->flags & AFTP_ENTRY_OVERWRITE) != 0;
    if (rc == AFTP_OK && p->e.kind == AFTP_TREE_FILE)
        rc = aftp_treesend_add(&p->tree, &p->info, p->e.local);
    if (rc != AFTP_OK)
        return rc;
    p->next_id++;
    return 1;
}

int aftp_pullsrc_feed(aftp_pullsrc *p, aftp_sender *s)
{
    if (!p->decided || p->done)
        return AFTP_OK;
    if (!p->walking) {
        int rc = aftp_tree_init_beneath(&p->walk, p->root_fd, (const char *const *)p->served,
                                        p->served_count, p->notice, p->notice_user);
        if (rc != AFTP_OK)
            return rc;
        p->walking = 1;
    }
    for (;;) {
        int rc = p->pending ? 1 : load_entry(p);
        if (rc == 0) {
            aftp_sender_finish(s);
            p->done = 1;
            return AFTP_OK;
        }
        if (rc < 0)
            return rc;
        p->pending = 1;
        rc = aftp_sender_add_entry(s, &p->info);
        if (rc == AFTP_ERR_LIMIT)
            return AFTP_OK; /* the window is full: again once an entry ends */
        p->pending = 0;
        if (rc != AFTP_OK)
            return rc;
    }
}

static int ops_view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    return aftp_treesend_view(&((aftp_pullsrc *)user)->tree, id, off, len, out);
}

static int ops_close(void *user, uint32_t id, int commit)
{
    (void)commit;
    return aftp_treesend_close(&((aftp_pullsrc *)user)->tree, id);
}

static int ops_pull_path(void *user, uint32_t index, const char *path, unsigned flags)
{
    return aftp_pullsrc_path(user, index, path, flags);
}

const aftp_storage_ops aftp_pullsrc_ops = {.view = ops_view, .close = ops_close,
                                           .pull_path = ops_pull_path};
