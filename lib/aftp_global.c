/* Process-wide set-up (aftp/aftp_global.h): the one place that lets aftp's
 * modules touch process-wide state, each only when its flag asks. */
#include "aftp/aftp_global.h"

#include <pthread.h>
#include <sodium.h>

#include "aftp/aftp_error.h"
#include "aftp_mapguard.h"
#include "common/aftp_keymem.h"

#define KNOWN_FLAGS (AFTP_INIT_GUARD_KEYS | AFTP_INIT_GUARD_SOURCE)

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;

int aftp_global_init(unsigned flags)
{
    if (flags & ~KNOWN_FLAGS)
        return AFTP_ERR_INVALID_ARGUMENT;
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    int rc = AFTP_OK;
    pthread_mutex_lock(&global_lock);
    /* The allocator first: nothing may reach OpenSSL before it. */
    if ((flags & AFTP_INIT_GUARD_KEYS) && !aftp_keymem_install())
        rc = AFTP_ERR_INVALID_STATE;
    if ((flags & AFTP_INIT_GUARD_SOURCE) && !aftp_mapguard_enabled() &&
        aftp_mapguard_enable() != AFTP_OK)
        rc = AFTP_ERR_INTERNAL;
    pthread_mutex_unlock(&global_lock);
    return rc;
}

void aftp_global_cleanup(void)
{
    pthread_mutex_lock(&global_lock);
    if (aftp_mapguard_enabled())
        aftp_mapguard_disable();
    pthread_mutex_unlock(&global_lock);
}
