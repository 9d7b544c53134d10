/* The wall clock for the server's admission (aftp_wallclock.h). */
#include "aftp_wallclock.h"

#include <time.h>

static uint64_t realtime_ns(void *unused)
{
    (void)unused;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

aftp_admit_clock aftp_wallclock(void)
{
    return (aftp_admit_clock){.now_ns = realtime_ns, .user = NULL};
}
