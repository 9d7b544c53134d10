/*
 * Parsing of user-supplied values: rates and socket addresses.
 * Pure functions (address parsing may resolve a host name); each returns
 * AFTP_OK or AFTP_ERR_INVALID_ARGUMENT and leaves the output untouched on
 * failure.
 */
#ifndef AFTP_PARSE_H
#define AFTP_PARSE_H

#include <stdint.h>
#include <sys/socket.h>

#include "aftp/aftp_error.h"

#define AFTP_PARSE_MAX_RATE UINT64_C(1000000000000) /* 1 Tbit/s */

/* "500M", "1G", "2.5g", "800000": bits per second, decimal suffixes
 * k/M/G/T (powers of 1000, either case), up to 9 fractional digits.
 * The result must lie in [1, AFTP_PARSE_MAX_RATE]. */
int aftp_parse_rate(const char *text, uint64_t *bps);

/* "HOST:PORT", "[IPV6]:PORT", or with `passive` also "PORT" alone (the
 * wildcard address). HOST may be a name (first address getaddrinfo gives).
 * Port 0 is accepted only when `passive` (the kernel picks one). */
int aftp_parse_addr(const char *text, int passive, struct sockaddr_storage *out,
                    socklen_t *out_len);

/* "ADDR:PORT" into buf (brackets around IPv6), for messages. */
void aftp_format_addr(const struct sockaddr *sa, char *buf, size_t cap);

#endif /* AFTP_PARSE_H */
