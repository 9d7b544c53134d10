/* In-memory storage and event recording for simulations (sim_storage.h). */
#include "sim_storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aftp_digest.h"
#include "proto/aftp_wire.h"
#include "sim_link.h"

/* A synthetic file's pattern: an odd period, so blocks at different
 * offsets differ, and a copy of its start after it, so any view (a block,
 * or a read-back step of 1 MiB) is contiguous. */
#define SYNTHETIC_REACH (UINT64_C(2) << 20)
#define SYNTHETIC_PERIOD ((UINT64_C(4) << 20) + 13) /* above the reach: one copy */

static uint8_t *seeded_bytes(uint64_t len, uint64_t rng)
{
    uint8_t *p = malloc(len ? len : 1);
    if (p == NULL)
        abort();
    for (uint64_t off = 0; off < len; off++)
        p[off] = (uint8_t)sim_rand(&rng);
    return p;
}

static void make_synthetic(sim_file *f, uint64_t rng)
{
    f->period = SYNTHETIC_PERIOD;
    f->pattern = seeded_bytes(f->period + SYNTHETIC_REACH, rng);
    memcpy(f->pattern + f->period, f->pattern, SYNTHETIC_REACH);
    f->landing = malloc(AFTP_WIRE_MAX_BLOCK);
    if (f->landing == NULL)
        abort();
}

void sim_storage_reserve(sim_storage *st, int files)
{
    if (files <= st->room)
        return;
    st->files = realloc(st->files, (size_t)files * sizeof *st->files);
    if (st->files == NULL)
        abort();
    memset(st->files + st->room, 0, (size_t)(files - st->room) * sizeof *st->files);
    st->room = files;
}

void sim_storage_init(sim_storage *st, int nfiles, uint64_t size, uint64_t seed)
{
    memset(st, 0, sizeof *st);
    sim_storage_reserve(st, nfiles > SIM_MAX_FILES ? nfiles : SIM_MAX_FILES);
    st->nfiles = nfiles;
    st->corrupt_offset = -1;
    for (int i = 0; i < nfiles; i++) {
        sim_file *f = &st->files[i];
        f->id = (uint32_t)i + 1;
        f->size = size;
        uint64_t rng = seed * 31 + (uint64_t)i;
        if (size > SIM_SYNTHETIC_ABOVE)
            make_synthetic(f, rng);
        else
            f->src = seeded_bytes(size, rng);
    }
}

sim_file *sim_storage_add_entry(sim_storage *st, int kind, const char *path, uint64_t size,
                                uint32_t block_size, const char *target)
{
    if (st->nfiles == st->room)
        abort();
    sim_file *f = &st->files[st->nfiles++];
    memset(f, 0, sizeof *f);
    f->id = (uint32_t)st->nfiles;
    f->kind = kind;
    f->size = size;
    f->block_size = kind == AFTP_ENTRY_FILE ? block_size : 0;
    f->blocks = kind == AFTP_ENTRY_FILE ? aftp_wire_block_count(size, block_size) : 0;
    f->src = seeded_bytes(size, 77 + f->id);
    f->base = st->stream_end;
    f->verdict = -1;
    st->stream_end += f->blocks;
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->target, sizeof f->target, "%s", target ? target : "");
    return f;
}

/* The synthetic file's bytes at off, or NULL when a view of len bytes
 * there would run past the pattern's copy. */
static const uint8_t *synthetic_at(const sim_file *f, uint64_t off, size_t len)
{
    return len <= SYNTHETIC_REACH ? f->pattern + off % f->period : NULL;
}

void sim_storage_free(sim_storage *st)
{
    for (int i = 0; i < st->nfiles; i++) {
        free(st->files[i].src);
        free(st->files[i].dst);
        free(st->files[i].writes);
        free(st->files[i].pattern);
        free(st->files[i].landing);
    }
    free(st->files);
    memset(st, 0, sizeof *st);
}

sim_file *sim_storage_file(sim_storage *st, uint32_t id)
{
    if (id == 0 || id > (uint32_t)st->nfiles)
        return NULL;
    return &st->files[id - 1];
}

static sim_storage *storage_of(void *user)
{
    return ((sim_side *)user)->st;
}

/* The file's bytes [off, off + len): the synthetic pattern, or the given
 * buffer (the source, or what the receiver wrote). */
static int borrow(const sim_file *f, const uint8_t *base, uint64_t off, size_t len,
                  const uint8_t **out)
{
    if (off > f->size || len > f->size - off)
        return AFTP_ERR_IO;
    *out = f->pattern ? synthetic_at(f, off, len) : base ? base + off : NULL;
    return *out ? AFTP_OK : AFTP_ERR_IO;
}

static int sender_view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    sim_file *f = sim_storage_file(storage_of(user), id);
    if (f != NULL && f->source_error != 0 && off + len > f->source_fails_at)
        return f->source_error;
    return f ? borrow(f, f->src, off, len, out) : AFTP_ERR_NOT_FOUND;
}

static int sender_close(void *user, uint32_t id, int commit)
{
    (void)commit;
    sim_file *f = sim_storage_file(storage_of(user), id);
    if (f == NULL)
        return AFTP_ERR_NOT_FOUND;
    f->sender_closed++;
    return AFTP_OK;
}

static int receiver_open(void *user, const aftp_file_info *info)
{
    sim_storage *st = storage_of(user);
    sim_file *f = sim_storage_file(st, info->file_id);
    if (f == NULL || info->size != f->size || f->opened)
        return AFTP_ERR_IO;
    if (st->open_error)
        return st->open_error;
    f->block_size = info->block_size;
    f->blocks = aftp_wire_block_count(info->size, info->block_size);
    f->opened = 1;
    if (f->pattern)
        return AFTP_OK; /* compared on write, nothing kept */
    f->dst = calloc(f->size ? f->size : 1, 1);
    f->writes = calloc(f->blocks ? f->blocks : 1, 1);
    if (f->dst == NULL || f->writes == NULL)
        abort();
    return AFTP_OK;
}

/* A synthetic file's write: one block, compared with the pattern. */
static int synthetic_write(sim_file *f, uint64_t off, const uint8_t *data, size_t len)
{
    uint64_t block = off / f->block_size;
    f->writes_total++;
    if (off % f->block_size != 0 || len != aftp_wire_block_len(f->size, f->block_size, block))
        f->bad_writes++;
    else
        f->blocks_written++;
    if (memcmp(data, synthetic_at(f, off, len), len) != 0)
        f->wrong_bytes += len;
    return AFTP_OK;
}

static int receiver_write(void *user, uint32_t id, uint64_t off, const uint8_t *data, size_t len)
{
    sim_storage *st = storage_of(user);
    sim_file *f = sim_storage_file(st, id);
    if (f == NULL || !f->opened || off > f->size || len > f->size - off)
        return AFTP_ERR_IO;
    if (f->pattern)
        return synthetic_write(f, off, data, len);
    f->writes_total++;
    uint64_t block = off / f->block_size;
    if (off % f->block_size != 0 || len != aftp_wire_block_len(f->size, f->block_size, block))
        f->bad_writes++;
    else if (f->writes[block] < 255)
        f->blocks_written += f->writes[block]++ == 0;
    if (data == f->dst + off)
        f->placed_writes++; /* opened in place: nothing to copy */
    else
        memcpy(f->dst + off, data, len);
    if (st->corrupt_offset >= 0 && (uint64_t)st->corrupt_offset >= off &&
        (uint64_t)st->corrupt_offset < off + len)
        f->dst[st->corrupt_offset] ^= 0x5a;
    return AFTP_OK;
}

static int receiver_place(void *user, uint32_t id, uint64_t off, size_t len, uint8_t **out)
{
    sim_storage *st = storage_of(user);
    sim_file *f = sim_storage_file(st, id);
    if (st->refuse_place || f == NULL || !f->opened || off > f->size || len > f->size - off)
        return AFTP_ERR_INVALID_STATE;
    *out = f->pattern ? f->landing : f->dst + off;
    return AFTP_OK;
}

static int receiver_view(void *user, uint32_t id, uint64_t off, size_t len, const uint8_t **out)
{
    sim_storage *st = storage_of(user);
    sim_file *f = sim_storage_file(st, id);
    int rc = f ? borrow(f, f->dst, off, len, out) : AFTP_ERR_NOT_FOUND;
    if (rc != AFTP_OK)
        return rc;
    st->receiver_view_bytes += len;
    f->viewed += len;
    if (f->blocks_written < f->blocks)
        f->viewed_early += len;
    if (f->pattern)
        return AFTP_OK; /* its writes were compared already */
    for (uint64_t b = off / f->block_size; len > 0 && b <= (off + len - 1) / f->block_size; b++)
        if (f->writes[b] == 0)
            f->viewed_unwritten += aftp_wire_block_len(f->size, f->block_size, b);
    return AFTP_OK;
}

static int receiver_close(void *user, uint32_t id, int commit)
{
    sim_file *f = sim_storage_file(storage_of(user), id);
    if (f == NULL)
        return AFTP_ERR_NOT_FOUND;
    f->receiver_closed++;
    /* The RESUME list lent to the engine is gone with the close. */
    memset(f->held, 0, sizeof f->held);
    f->committed = commit == AFTP_CLOSE_COMMIT;
    f->deferred = commit == AFTP_CLOSE_DEFER;
    return AFTP_OK;
}

/* Spec 14.4 in brief: a relative path with no ".." component. */
static int path_allowed(const char *path)
{
    if (path[0] == '/')
        return 0;
    for (const char *c = path; c != NULL; c = strchr(c, '/')) {
        c += *c == '/';
        if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
            return 0;
    }
    return 1;
}

/* A RESUME: the held blocks are the source's bytes already in place,
 * counted as written once (by the earlier session). */
static void preload_held(sim_file *f)
{
    for (size_t i = 0; i < f->held_count; i++)
        for (uint64_t b = f->held[i].start; b < f->held[i].start + f->held[i].len; b++) {
            uint64_t off = b * f->block_size;
            memcpy(f->dst + off, f->src + off, aftp_wire_block_len(f->size, f->block_size, b));
            f->writes[b] = 1;
            f->blocks_written++;
        }
}

static void decide_file(void *user, sim_file *f, const aftp_entry_info *info,
                        aftp_entry_verdict *out)
{
    if ((info->flags & AFTP_ENTRY_SYNC) && f->identical) {
        out->verdict = AFTP_VERDICT_SKIP;
        return;
    }
    int rc = receiver_open(user, &info->file);
    if (rc != AFTP_OK) {
        *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_REFUSED, .error = rc};
        return;
    }
    if ((info->flags & AFTP_ENTRY_RESUME) && f->held_count > 0) {
        preload_held(f);
        *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_RESUME, .held = f->held,
                                    .held_count = f->held_count};
    }
}

/* Pipelined mode: entries decided in id order; DIR and SYMLINK are
 * "placed" in memory, a FILE opened, skipped or resumed as set up. */
static int receiver_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    sim_storage *st = storage_of(user);
    sim_file *f = sim_storage_file(st, info->file.file_id);
    st->out_of_order |= info->file.file_id <= st->last_decided;
    st->last_decided = info->file.file_id;
    if (st->entry_error)
        return st->entry_error;
    *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_SEND};
    if (f == NULL || !path_allowed(info->file.path)) {
        *out = (aftp_entry_verdict){.verdict = AFTP_VERDICT_REFUSED,
                                    .error = AFTP_ERR_PATH_REJECTED};
    } else if (info->kind == AFTP_ENTRY_FILE) {
        decide_file(user, f, info, out);
    } else {
        f->placed = 1;
        snprintf(f->placed_target, sizeof f->placed_target, "%s",
                 info->target ? info->target : "");
    }
    if (f != NULL)
        f->verdict = out->verdict;
    return AFTP_OK;
}

static int receiver_commit_group(void *user, const uint32_t *ids, size_t count, int *results)
{
    sim_storage *st = storage_of(user);
    if (st->group_commits++ == 0 && st->results_seen != NULL)
        st->results_at_commit = *st->results_seen;
    for (size_t i = 0; i < count; i++) {
        sim_file *f = sim_storage_file(st, ids[i]);
        results[i] = f != NULL && f->deferred ? AFTP_OK : AFTP_ERR_NOT_FOUND;
        if (f != NULL && f->deferred)
            f->committed = 1;
    }
    return AFTP_OK;
}

const aftp_storage_ops sim_sender_storage = {
    .view = sender_view,
    .close = sender_close,
};

const aftp_storage_ops sim_receiver_storage = {
    .view = receiver_view,
    .open = receiver_open,
    .write = receiver_write,
    .close = receiver_close,
    .place = receiver_place,
    .entry = receiver_entry,
    .commit_group = receiver_commit_group,
};

static void note_entry_end(sim_side *side, const aftp_event *ev)
{
    sim_file *f = ev->info ? sim_storage_file(side->st, ev->info->file_id) : NULL;
    if (f != NULL && *side->clock > f->ended_at)
        f->ended_at = *side->clock;
}

void sim_on_event(void *user, const aftp_event *ev)
{
    sim_side *side = user;
    sim_events *e = &side->ev;
    switch (ev->type) {
    case AFTP_EV_CONNECTED: e->connected++; break;
    case AFTP_EV_FILE_START: e->file_start++; break;
    case AFTP_EV_FILE_END:
        e->file_end++;
        e->file_end_at = *side->clock;
        e->last_file_error = ev->error;
        snprintf(e->file_message, sizeof e->file_message, "%s", ev->message ? ev->message : "");
        e->has_digest = ev->digest != NULL;
        if (ev->digest)
            memcpy(e->digest, ev->digest, AFTP_DIGEST_LEN);
        break;
    case AFTP_EV_ENTRY_END:
        note_entry_end(side, ev);
        e->entry_end++;
        if (ev->error != AFTP_OK && e->entries_failed++ == 0) {
            e->first_failed_id = ev->info ? ev->info->file_id : 0;
            e->first_failed_error = ev->error;
        }
        e->last_entry_verdict = ev->verdict;
        e->last_entry_error = ev->error;
        break;
    case AFTP_EV_CLOSED:
        e->closed++;
        e->closed_error = ev->error;
        e->closed_at = *side->clock;
        snprintf(e->message, sizeof e->message, "%s", ev->message ? ev->message : "");
        break;
    default: break;
    }
}

void sim_file_digest(const sim_file *f, uint8_t digest[AFTP_DIGEST_LEN])
{
    aftp_digest *d = NULL;
    if (aftp_digest_new(&d) != AFTP_OK)
        abort();
    aftp_digest_update(d, f->src, f->size);
    aftp_digest_final(d, digest);
    aftp_digest_del(d);
}

int sim_file_intact(sim_storage *st, uint32_t id)
{
    sim_file *f = sim_storage_file(st, id);
    if (f == NULL || !f->committed || f->receiver_closed != 1 || f->bad_writes != 0)
        return 0;
    if (f->pattern)
        return f->wrong_bytes == 0 && f->writes_total == f->blocks;
    for (uint64_t b = 0; b < f->blocks; b++)
        if (f->writes[b] != 1)
            return 0;
    return f->size == 0 || memcmp(f->src, f->dst, f->size) == 0;
}
