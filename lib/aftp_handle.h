/*
 * What every public handle of the library needs at birth: its own memory
 * and its secrets (keys) in guarded, locked pages (sodium_malloc) that are
 * wiped when freed.
 */
#ifndef AFTP_HANDLE_H
#define AFTP_HANDLE_H

#include <stddef.h>

/* *handle: `size` zeroed bytes (free()); *secrets: `secrets_size` zeroed
 * bytes in guarded memory (sodium_free()). Both or neither: AFTP_OK,
 * AFTP_ERR_INTERNAL (libsodium cannot start) or AFTP_ERR_NO_MEMORY. */
int aftp_handle_alloc(size_t size, void **handle, size_t secrets_size, void **secrets);

#endif /* AFTP_HANDLE_H */
