/* The destination files being written (aftp_filelock.h). */
#include "aftp_filelock.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "aftp/aftp_error.h"

#define MIN_BUCKETS 64u

typedef struct claim {
    struct claim *next;
    uint64_t hash;
    dev_t dev;
    ino_t ino;
    const void *owner;
    unsigned holds; /* the owner's claims of it, each released once */
    char path[]; /* NUL-terminated */
} claim;

struct aftp_filelocks {
    pthread_mutex_t lock;
    claim **buckets;
    size_t bucket_count; /* a power of two */
    size_t count;
};

static uint64_t key_hash(const aftp_filelock_key *k)
{
    uint64_t root[2] = {(uint64_t)k->dev, (uint64_t)k->ino};
    return XXH3_64bits_withSeed(k->path, strlen(k->path), XXH3_64bits(root, sizeof root));
}

aftp_filelocks *aftp_filelocks_new(void)
{
    aftp_filelocks *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->buckets = calloc(MIN_BUCKETS, sizeof *t->buckets);
    if (t->buckets == NULL) {
        free(t);
        return NULL;
    }
    t->bucket_count = MIN_BUCKETS;
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void aftp_filelocks_del(aftp_filelocks *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->bucket_count; i++)
        for (claim *c = t->buckets[i], *next; c != NULL; c = next) {
            next = c->next;
            free(c);
        }
    free(t->buckets);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The link that points at the key's claim, or at the end of its chain. */
static claim **find(aftp_filelocks *t, const aftp_filelock_key *k, uint64_t hash)
{
    claim **at = &t->buckets[hash & (t->bucket_count - 1)];
    for (; *at != NULL; at = &(*at)->next)
        if ((*at)->hash == hash && (*at)->dev == k->dev && (*at)->ino == k->ino &&
            strcmp((*at)->path, k->path) == 0)
            break;
    return at;
}

/* Twice the buckets once the claims outnumber them (a failure only keeps
 * the chains longer). */
static void grow(aftp_filelocks *t)
{
    size_t n = t->bucket_count * 2;
    claim **b = t->count >= t->bucket_count ? calloc(n, sizeof *b) : NULL;
    if (b == NULL)
        return;
    for (size_t i = 0; i < t->bucket_count; i++)
        for (claim *c = t->buckets[i], *next; c != NULL; c = next) {
            next = c->next;
            c->next = b[c->hash & (n - 1)];
            b[c->hash & (n - 1)] = c;
        }
    free(t->buckets);
    t->buckets = b;
    t->bucket_count = n;
}

static int claim_locked(aftp_filelocks *t, const aftp_filelock_key *k, const void *owner)
{
    uint64_t hash = key_hash(k);
    claim **at = find(t, k, hash);
    if (*at != NULL && (*at)->owner != owner)
        return 0;
    if (*at != NULL) {
        (*at)->holds++;
        return 1;
    }
    size_t len = strlen(k->path);
    claim *c = malloc(sizeof *c + len + 1);
    if (c == NULL)
        return AFTP_ERR_NO_MEMORY;
    *c = (claim){.hash = hash, .dev = k->dev, .ino = k->ino, .owner = owner, .holds = 1};
    memcpy(c->path, k->path, len + 1);
    *at = c;
    t->count++;
    grow(t);
    return 1;
}

int aftp_filelocks_claim(aftp_filelocks *t, const aftp_filelock_key *key, const void *owner)
{
    pthread_mutex_lock(&t->lock);
    int rc = claim_locked(t, key, owner);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void aftp_filelocks_release(aftp_filelocks *t, const aftp_filelock_key *key, const void *owner)
{
    pthread_mutex_lock(&t->lock);
    claim **at = find(t, key, key_hash(key));
    claim *c = *at;
    if (c != NULL && c->owner == owner && --c->holds == 0) {
        *at = c->next;
        free(c);
        t->count--;
    }
    pthread_mutex_unlock(&t->lock);
}

size_t aftp_filelocks_count(aftp_filelocks *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
}
