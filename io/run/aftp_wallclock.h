/*
 * The wall clock (CLOCK_REALTIME, Unix ns): for the server's admission
 * (door/aftp_admit.h), whose handshake timestamps are Unix time, and for
 * the drivers' Unix-time stamps (receipts, handshakes). The one place it
 * is read.
 */
#ifndef AFTP_WALLCLOCK_H
#define AFTP_WALLCLOCK_H

#include "door/aftp_admit.h"

/* CLOCK_REALTIME now, in nanoseconds since the Unix epoch. */
uint64_t aftp_wallclock_now_ns(void);
/* The admission's clock: reads CLOCK_REALTIME at each call. */
aftp_admit_clock aftp_wallclock(void);

#endif /* AFTP_WALLCLOCK_H */
