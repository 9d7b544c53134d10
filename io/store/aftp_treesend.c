/* The sender's entries from a walked tree (aftp_treesend.h). */
#include "aftp_treesend.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "aftp_store.h"
#include "aftp_treestore.h"

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t aftp_treesend_source_id(const aftp_tree_entry *e)
{
    uint8_t buf[40];
    put_le64(buf, e->dev);
    put_le64(buf + 8, e->ino);
    put_le64(buf + 16, e->size);
    put_le64(buf + 24, (uint64_t)e->mtime_ns);
    put_le64(buf + 32, (uint64_t)e->ctime_ns);
    return XXH3_64bits(buf, sizeof buf);
}

static int file_digest(const char *local, uint64_t size, uint8_t out[AFTP_DIGEST_LEN])
{
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return aftp_store_errno_error(errno);
    int rc = aftp_treestore_digest(fd, size, out);
    close(fd);
    return rc;
}

int aftp_treesend_entry_info(const aftp_tree_entry *e, uint32_t id, uint32_t block_size,
                             unsigned flags, aftp_entry_info *out)
{
    static const int kinds[] = {[AFTP_TREE_FILE] = AFTP_ENTRY_FILE,
                                [AFTP_TREE_DIR] = AFTP_ENTRY_DIR,
                                [AFTP_TREE_SYMLINK] = AFTP_ENTRY_SYMLINK};
    int file = e->kind == AFTP_TREE_FILE;
    memset(out, 0, sizeof *out);
    out->file = (aftp_file_info){.file_id = id, .size = file ? e->size : 0,
                                 .mtime_ns = e->mtime_ns, .mode = e->mode,
                                 .block_size = file ? block_size : 0, .path = e->path};
    out->kind = kinds[e->kind];
    out->flags = file ? flags : 0;
    out->source_id = aftp_treesend_source_id(e);
    out->target = e->kind == AFTP_TREE_SYMLINK ? e->target : NULL;
    return file && (flags & AFTP_ENTRY_CHECKSUM) ? file_digest(e->local, e->size, out->digest)
                                                 : AFTP_OK;
}
