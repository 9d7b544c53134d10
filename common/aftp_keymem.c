/* Guarded memory for OpenSSL's key schedules (aftp_keymem.h).
 *
 * A registry of the guarded blocks (pointer and size) tells free and
 * realloc which allocator a pointer came from. OpenSSL frees almost nothing
 * while packets flow (a context is keyed once per key generation), so a
 * linear search under a mutex costs nothing that matters, and a process
 * holding no guarded block skips even that. */
#define _GNU_SOURCE /* memmem */
#include "common/aftp_keymem.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* sodium_malloc puts a block at the very end of its pages, so the guard
 * page catches an overflow: the block is as aligned as its size is.
 * OpenSSL expects malloc's alignment, and whole cache lines suit AES. */
#define BLOCK_ALIGN 64u

typedef struct guarded_block {
    void *ptr;
    size_t size;
} guarded_block;

static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int installed;
static _Thread_local int key_mode;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static guarded_block *registry; /* from malloc: never guarded itself */
static size_t registry_len, registry_cap;
static atomic_size_t registry_live;

/* ---- registry ---- */

static int registry_add(void *ptr, size_t size)
{
    int ok = 1;
    pthread_mutex_lock(&registry_lock);
    if (registry_len == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 16;
        guarded_block *grown = realloc(registry, cap * sizeof *grown);
        if (grown == NULL)
            ok = 0;
        else
            registry = grown, registry_cap = cap;
    }
    if (ok) {
        registry[registry_len++] = (guarded_block){ptr, size};
        atomic_store(&registry_live, registry_len);
    }
    pthread_mutex_unlock(&registry_lock);
    return ok;
}

/* The size of the guarded block at ptr, 0 when ptr is not one (OpenSSL's
 * plain allocations); `remove` takes the block out of the registry. */
static size_t registry_lookup(void *ptr, int remove)
{
    if (atomic_load(&registry_live) == 0)
        return 0;
    size_t size = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_len; i++) {
        if (registry[i].ptr != ptr)
            continue;
        size = registry[i].size;
        if (remove) {
            registry[i] = registry[--registry_len];
            atomic_store(&registry_live, registry_len);
        }
        break;
    }
    pthread_mutex_unlock(&registry_lock);
    return size;
}

/* ---- the allocator OpenSSL calls ---- */

static void *guarded_alloc(size_t num)
{
    if (num > SIZE_MAX - BLOCK_ALIGN)
        return NULL;
    size_t size = num == 0 ? BLOCK_ALIGN : (num + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    void *ptr = sodium_malloc(size);
    if (ptr != NULL && !registry_add(ptr, size)) {
        sodium_free(ptr);
        ptr = NULL;
    }
    return ptr;
}

static void *keymem_malloc(size_t num, const char *file, int line)
{
    (void)file, (void)line;
    return key_mode ? guarded_alloc(num) : malloc(num);
}

static void keymem_free(void *ptr, const char *file, int line)
{
    (void)file, (void)line;
    if (ptr != NULL && registry_lookup(ptr, 1) != 0)
        sodium_free(ptr); /* wipes */
    else
        free(ptr);
}

/* A guarded block stays guarded when it grows or shrinks, whoever asks. */
static void *keymem_realloc(void *ptr, size_t num, const char *file, int line)
{
    (void)file, (void)line;
    if (ptr == NULL)
        return keymem_malloc(num, file, line);
    size_t old = registry_lookup(ptr, 0);
    if (old == 0)
        return realloc(ptr, num);
    if (num == 0) {
        keymem_free(ptr, file, line);
        return NULL;
    }
    void *moved = guarded_alloc(num);
    if (moved == NULL)
        return NULL; /* realloc's contract: the old block stays */
    memcpy(moved, ptr, old < num ? old : num);
    keymem_free(ptr, file, line);
    return moved;
}

/* ---- interface ---- */

/* Once in, the allocator stays: OpenSSL may hold blocks it handed out. */
int aftp_keymem_install(void)
{
    pthread_mutex_lock(&install_lock);
    if (!atomic_load(&installed) && sodium_init() >= 0)
        atomic_store(&installed, CRYPTO_set_mem_functions(keymem_malloc, keymem_realloc,
                                                          keymem_free) == 1);
    pthread_mutex_unlock(&install_lock);
    return atomic_load(&installed);
}

int aftp_keymem_guarded(void)
{
    return atomic_load(&installed);
}

void aftp_keymem_begin(void)
{
    key_mode = 1;
}

void aftp_keymem_end(void)
{
    key_mode = 0;
}

size_t aftp_keymem_blocks(void)
{
    return atomic_load(&registry_live);
}

int aftp_keymem_holds(const void *bytes, size_t len)
{
    int found = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_len && !found; i++)
        found = memmem(registry[i].ptr, registry[i].size, bytes, len) != NULL;
    pthread_mutex_unlock(&registry_lock);
    return found;
}
