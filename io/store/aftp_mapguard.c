#include "aftp_mapguard.h"

#include <stdatomic.h>
#include <string.h>

#include "aftp/aftp_error.h"

/* The guard armed on this thread, if any: each thread drives its own
 * engine, and SIGBUS from a fault goes to the thread that faulted. */
static _Thread_local aftp_mapguard *armed;
static struct sigaction previous; /* never on_sigbus itself */
static atomic_flag installing = ATOMIC_FLAG_INIT;
static atomic_int enabled; /* the embedder allowed the handler (aftp_global_init) */

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    aftp_mapguard *g = armed;
    uintptr_t addr = (uintptr_t)si->si_addr;
    if (g != NULL && si->si_code > 0 && addr >= g->lo && addr < g->hi) {
        armed = NULL;
        g->tripped = 1;
        siglongjmp(g->env, 1);
    }
    /* Not a guarded read: what would have happened without this handler.
     * A faulting read faults again on return; a sent signal is raised
     * again (it stays pending until this handler returns). */
    sigaction(SIGBUS, &previous, NULL);
    if (si->si_code <= 0)
        raise(sig);
}

/* Installs on_sigbus unless it is in place; checked at every init because
 * other code (a test framework, the application) may have replaced it. */
static int install_handler(void)
{
    struct sigaction cur, sa;
    int rc = AFTP_OK;
    while (atomic_flag_test_and_set(&installing))
        ; /* another thread is installing: a few instructions */
    if (sigaction(SIGBUS, NULL, &cur) != 0) {
        rc = AFTP_ERR_INTERNAL;
    } else if (cur.sa_sigaction != on_sigbus) {
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        previous = cur;
        if (sigaction(SIGBUS, &sa, NULL) != 0)
            rc = AFTP_ERR_INTERNAL;
    }
    atomic_flag_clear(&installing);
    return rc;
}

int aftp_mapguard_enable(void)
{
    int rc = install_handler();
    if (rc == AFTP_OK)
        atomic_store(&enabled, 1);
    return rc;
}

void aftp_mapguard_disable(void)
{
    struct sigaction cur;
    while (atomic_flag_test_and_set(&installing))
        ;
    atomic_store(&enabled, 0);
    if (sigaction(SIGBUS, NULL, &cur) == 0 && cur.sa_sigaction == on_sigbus)
        sigaction(SIGBUS, &previous, NULL);
    atomic_flag_clear(&installing);
}

int aftp_mapguard_enabled(void)
{
    return atomic_load(&enabled);
}

int aftp_mapguard_init(aftp_mapguard *g, const void *base, size_t len)
{
    memset(g, 0, sizeof *g);
    g->lo = (uintptr_t)base;
    g->hi = g->lo + len;
    return len > 0 && atomic_load(&enabled) ? install_handler() : AFTP_OK;
}

void aftp_mapguard_enter(aftp_mapguard *g)
{
    armed = g;
}

void aftp_mapguard_leave(aftp_mapguard *g)
{
    if (armed == g)
        armed = NULL;
}

void aftp_mapguard_trip(aftp_mapguard *g)
{
    g->tripped = 1;
}

int aftp_mapguard_tripped(const aftp_mapguard *g)
{
    return g->tripped != 0;
}
