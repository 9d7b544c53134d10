/* The wall clock for the server's admission (aftp_wallclock.h). */
#include "aftp_wallclock.h"

#include <time.h>

uint64_t aftp_wallclock_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t admission_now_ns(void *unused)
{
    (void)unused;
    return aftp_wallclock_now_ns();
}

aftp_admit_clock aftp_wallclock(void)
{
    return (aftp_admit_clock){.now_ns = admission_now_ns, .user = NULL};
}
