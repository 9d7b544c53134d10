/*
 * The wall clock (CLOCK_REALTIME, Unix ns) for the server's admission
 * (door/aftp_admit.h), whose handshake timestamps are Unix time: the one
 * place the admission's clock is read.
 */
#ifndef AFTP_WALLCLOCK_H
#define AFTP_WALLCLOCK_H

#include "door/aftp_admit.h"

/* The admission's clock: reads CLOCK_REALTIME at each call. */
aftp_admit_clock aftp_wallclock(void);

#endif /* AFTP_WALLCLOCK_H */
