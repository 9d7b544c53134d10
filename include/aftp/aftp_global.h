/*
 * Process-wide set-up of libaftp: the only aftp calls that change anything
 * outside the objects the caller creates.
 *
 * Two protections of aftp need process-wide state, which a library must
 * not take behind its embedder's back. aftp installs them only when asked
 * here; without this call, or with flags 0, aftp installs nothing
 * process-wide (no signal handler, no OpenSSL allocator, no atexit) and
 * every other function works as documented: calling aftp_global_init is
 * optional. Libraries aftp uses initialise themselves on first use
 * (libsodium's sodium_init, which is thread-safe and idempotent).
 *
 * AFTP_INIT_GUARD_KEYS: aftp installs its allocator into OpenSSL
 * (CRYPTO_set_mem_functions) so that the key schedules OpenSSL builds for
 * aftp's packet ciphers live in libsodium's guarded memory (guard pages,
 * locked against swapping where mlock is allowed, wiped when freed). Every
 * other OpenSSL allocation of the process still goes to malloc, realloc and
 * free. OpenSSL accepts an allocator only before its first allocation in
 * the process: call aftp_global_init before anything in the process uses
 * OpenSSL (TLS, another library), typically first thing in main. Later,
 * the flag cannot take effect (see the errors below) and key schedules stay
 * in OpenSSL's heap, where OpenSSL wipes them when they are freed. Once
 * installed the allocator stays for the life of the process, since OpenSSL
 * may hold blocks it handed out: a process that unloads libaftp (dlclose)
 * must not have used this flag.
 *
 * AFTP_INIT_GUARD_SOURCE: aftp installs a process-wide SIGBUS handler so
 * that a source file truncated by another process while aftp sends it
 * fails that file's transfer with AFTP_ERR_SOURCE_CHANGED instead of
 * killing the process. The handler acts only on faults of aftp's own reads
 * of its source mappings; any other SIGBUS gets the disposition that was in
 * place before (chained). While the flag is in effect aftp puts its
 * handler back whenever it maps a source file, if other code replaced it.
 * Without the flag, aftp still checks the source's size and modification
 * time around every batch it sends and fails the file when they change, but
 * a truncation that lands between a check and a read of the mapping raises
 * SIGBUS, which kills the process unless the embedder handles SIGBUS
 * itself. An embedder that does not want aftp's handler can send only files
 * nobody truncates meanwhile (a snapshot, a file it owns, a lease), or run
 * transfers in a child process.
 *
 * Thread-safety: aftp_global_init and aftp_global_cleanup serialise among
 * themselves, but must be called while no other thread is inside an aftp
 * call: before other threads use aftp, and after they are done with it.
 */
#ifndef AFTP_GLOBAL_H
#define AFTP_GLOBAL_H

#include "aftp/aftp_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aftp may install its guarded-memory allocator into OpenSSL. */
#define AFTP_INIT_GUARD_KEYS 0x1u
/* aftp may install a process-wide SIGBUS handler for source files. */
#define AFTP_INIT_GUARD_SOURCE 0x2u

/* Installs the process-wide protections that `flags` (an OR of
 * AFTP_INIT_GUARD_*) names. Call it before any other aftp call and before
 * other threads use aftp, normally once at start-up; for
 * AFTP_INIT_GUARD_KEYS, before the process's first use of OpenSSL.
 *
 * Repeated calls are allowed and add to what earlier ones installed
 * (flags 0 changes nothing): a protection already in place stays, and
 * nothing is installed twice. Calls are not counted: one
 * aftp_global_cleanup undoes them all.
 *
 * Returns AFTP_OK when every protection asked for is in place, or:
 *   AFTP_ERR_INVALID_ARGUMENT  flags has a bit aftp does not know: nothing
 *                              was installed;
 *   AFTP_ERR_INVALID_STATE     AFTP_INIT_GUARD_KEYS was asked, but OpenSSL
 *                              had allocated memory before this call, so it
 *                              keeps its own allocator; the other flags took
 *                              effect and aftp works, with key schedules in
 *                              OpenSSL's heap;
 *   AFTP_ERR_INTERNAL          libsodium could not initialise, or the
 *                              system refused the SIGBUS handler
 *                              (sigaction); what could be installed was.
 * Whatever it returns, the rest of aftp works. */
AFTP_EXTERN int aftp_global_init(unsigned flags);

/* Undoes what aftp_global_init installed that can be undone: SIGBUS goes
 * back to the disposition aftp found (if aftp's handler is still the one
 * in place: a handler the application installed since is left alone), and
 * aftp stops guarding source reads. The OpenSSL allocator stays (see
 * AFTP_INIT_GUARD_KEYS). One call undoes every earlier aftp_global_init;
 * aftp_global_init may be called again afterwards. Call it only while no
 * transfer runs in any thread, for example before unloading libaftp or
 * before the application installs its own SIGBUS handler. Safe to call
 * without aftp_global_init, and more than once. */
AFTP_EXTERN void aftp_global_cleanup(void);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_GLOBAL_H */
