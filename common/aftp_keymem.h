/*
 * Guarded memory for the key schedules OpenSSL keeps (spec section 14.6.2).
 *
 * The bulk AEAD runs on OpenSSL (aftp_aead.c), and OpenSSL allocates the
 * cipher context that holds a key generation's expanded key itself. To keep
 * that key in sodium_malloc'd memory (guard pages, locked against swapping
 * where mlock is allowed, wiped when freed), aftp installs its own
 * allocator into OpenSSL (CRYPTO_set_mem_functions): every allocation a
 * thread makes between aftp_keymem_begin and aftp_keymem_end goes to
 * sodium_malloc, and freeing such a block (whenever and by whichever
 * thread) goes to sodium_free. Every other allocation goes to malloc,
 * realloc and free unchanged, as OpenSSL's own allocator does.
 *
 * An allocator is process-wide, so aftp installs it only when its embedder
 * asks (aftp_global_init with AFTP_INIT_GUARD_KEYS calls
 * aftp_keymem_install); otherwise OpenSSL keeps its own, and begin/end
 * change nothing. OpenSSL takes a new allocator only before its first
 * allocation in the process: in a process that used OpenSSL earlier (an
 * application embedding aftp that also speaks TLS, say) the install fails,
 * and key schedules stay in OpenSSL's heap, where OpenSSL still wipes them
 * when they are freed. aftp_keymem_guarded tells which.
 */
#ifndef AFTP_KEYMEM_H
#define AFTP_KEYMEM_H

#include <stddef.h>

/* Installs the allocator into OpenSSL if OpenSSL still takes one, and
 * leaves it there for the life of the process. Returns
 * aftp_keymem_guarded(). Thread-safe; later calls only report. */
int aftp_keymem_install(void);

/* 1 when OpenSSL allocates through aftp_keymem, so that allocations inside
 * begin/end go to guarded memory; 0 before aftp_keymem_install, or when
 * OpenSSL had allocated before it ran. */
int aftp_keymem_guarded(void);

/* Until aftp_keymem_end, OpenSSL's allocations made by this thread go to
 * guarded memory. Not nested. */
void aftp_keymem_begin(void);
void aftp_keymem_end(void);

/* Guarded blocks OpenSSL holds now. */
size_t aftp_keymem_blocks(void);

/* 1 when len bytes equal to `bytes` appear in a guarded block: tests and
 * diagnostics use it to show where a key schedule lives. */
int aftp_keymem_holds(const void *bytes, size_t len);

#endif /* AFTP_KEYMEM_H */
