/*
 * Guards the reads of a file mapping against the file shrinking under it:
 * when another process truncates the sender's source, a read of the
 * mapping past the new end of file raises SIGBUS, which kills the process.
 *
 * Catching that fault takes a process-wide SIGBUS handler, which a library
 * may install only when its embedder asked: aftp_global_init with
 * AFTP_INIT_GUARD_SOURCE calls aftp_mapguard_enable. Until then guards
 * track nothing but aftp_mapguard_trip, and a fault takes the process's
 * own SIGBUS disposition (by default, death with a core dump).
 *
 * Once enabled, reads made on this thread between aftp_mapguard_enter and
 * aftp_mapguard_leave that fault inside the guarded range jump back to the
 * caller's sigsetjmp(g->env, 1) point instead (it returns non-zero), with
 * the guard tripped. Faults anywhere else keep the effect they had before
 * (the previous SIGBUS disposition, by default a core dump). The handler
 * only compares the fault address and calls siglongjmp: async-signal-safe.
 *
 * The code between enter and leave may be abandoned midway, so it must
 * hold no lock and allocate nothing; the caller treats what it was doing
 * as lost. The kernel's own reads of the mapping (sendmmsg copying an
 * iovec) do not raise SIGBUS: they fail with EFAULT, and a check of the
 * file's size and mtime (aftp_source_check) has to catch those.
 *
 * Usage:
 *   if (sigsetjmp(g->env, 1) != 0)
 *       return ...;        // a guarded read faulted: g is tripped
 *   aftp_mapguard_enter(g);
 *   ... read the mapping ...
 *   aftp_mapguard_leave(g);
 */
#ifndef AFTP_MAPGUARD_H
#define AFTP_MAPGUARD_H

#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct aftp_mapguard {
    sigjmp_buf env;
    uintptr_t lo, hi;              /* guarded bytes [lo, hi) */
    volatile sig_atomic_t tripped; /* the mapped file is no longer as opened */
} aftp_mapguard;

/* Installs the process-wide SIGBUS handler and keeps it in place: every
 * later aftp_mapguard_init puts it back if other code (a test framework,
 * the application) replaced it. Returns AFTP_OK, or AFTP_ERR_INTERNAL
 * when sigaction fails. */
int aftp_mapguard_enable(void);
/* Gives SIGBUS back to the disposition aftp_mapguard_enable found, if the
 * handler is still aftp's, and stops putting it back. No guarded read may
 * run meanwhile. */
void aftp_mapguard_disable(void);
/* 1 between aftp_mapguard_enable and aftp_mapguard_disable. */
int aftp_mapguard_enabled(void);

/* Guards [base, base + len): when enabled, (re)installs the handler.
 * Returns AFTP_OK, or AFTP_ERR_INTERNAL when sigaction fails. */
int aftp_mapguard_init(aftp_mapguard *g, const void *base, size_t len);

/* Arms g for this thread; call right after sigsetjmp(g->env, 1) returned 0. */
void aftp_mapguard_enter(aftp_mapguard *g);
void aftp_mapguard_leave(aftp_mapguard *g);

/* Marks the mapping unusable (a check found the file changed). */
void aftp_mapguard_trip(aftp_mapguard *g);
int aftp_mapguard_tripped(const aftp_mapguard *g);

#endif /* AFTP_MAPGUARD_H */
