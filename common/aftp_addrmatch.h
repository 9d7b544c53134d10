/*
 * Address prefixes for the server's per-key from= option (spec Appendix
 * B.4): parsing "198.18.0.0/15", "2001:db8::/32", "192.0.2.7", "::1" and
 * matching a client's address against them. Sans-I/O: text and socket
 * addresses in, no lookup of names, no clock.
 *
 * Rules:
 * - An address without "/N" is the whole address (/32 or /128).
 * - N is decimal, 0 to 32 (IPv4) or 0 to 128 (IPv6), without a sign or
 *   leading zeros; "/0" matches every address of its family.
 * - Bits beyond N must be zero ("198.18.0.1/15" is refused): a prefix
 *   written with host bits is ambiguous (a typo for a host, or for the
 *   network?) and a typo must never widen access.
 * - IPv4 and IPv6 are one space: an IPv4-mapped IPv6 address
 *   (::ffff:a.b.c.d, as a dual-stack socket reports an IPv4 client)
 *   matches IPv4 prefixes, and a prefix written as ::ffff:a.b.c.d/N with
 *   N >= 96 is the IPv4 prefix a.b.c.d/(N-96).
 */
#ifndef AFTP_ADDRMATCH_H
#define AFTP_ADDRMATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest text of one prefix: an IPv6 address in full with its "/128". */
#define AFTP_ADDRMATCH_TEXT_MAX 64u

typedef struct aftp_addrmatch_prefix {
    uint8_t v6;        /* 0: IPv4 (addr[0..3]), 1: IPv6 (addr[0..15]) */
    uint8_t bits;      /* prefix length */
    uint8_t addr[16];  /* bits beyond `bits` are zero */
} aftp_addrmatch_prefix;

/* One prefix of len bytes of text: NULL and *out, or why not (a phrase
 * for a message: "prefix length 33 is beyond /32 for IPv4"). */
const char *aftp_addrmatch_parse(const char *text, size_t len, aftp_addrmatch_prefix *out);
/* Non-zero when the address sa (AF_INET or AF_INET6) lies in p. */
int aftp_addrmatch_contains(const aftp_addrmatch_prefix *p, const struct sockaddr *sa);
/* Non-zero when sa lies in any of the count prefixes. */
int aftp_addrmatch_any(const aftp_addrmatch_prefix *list, size_t count,
                       const struct sockaddr *sa);

#endif /* AFTP_ADDRMATCH_H */
