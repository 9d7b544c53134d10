/* Address prefixes and matching (aftp_addrmatch.h). */
#include "aftp_addrmatch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* ::ffff:0:0/96, the IPv4-mapped IPv6 addresses (RFC 4291 2.5.5.2). */
static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* "/N": N into *bits, at most max; NULL or why not. */
static const char *parse_bits(const char *text, size_t len, unsigned max, unsigned *bits)
{
    if (len == 0 || len > 3 || (text[0] == '0' && len > 1))
        return "prefix length is not a decimal number without leading zeros";
    unsigned n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return "prefix length is not a decimal number without leading zeros";
        n = n * 10 + (unsigned)(text[i] - '0');
    }
    if (n > max)
        return max == 32 ? "prefix length is beyond /32 for an IPv4 address"
                         : "prefix length is beyond /128 for an IPv6 address";
    *bits = n;
    return NULL;
}

/* Non-zero when every bit of addr from `bits` on (of len bytes) is zero. */
static int host_bits_zero(const uint8_t *addr, size_t len, unsigned bits)
{
    for (size_t i = bits / 8; i < len; i++) {
        uint8_t keep = i == bits / 8 ? (uint8_t)(0xff00u >> (bits % 8)) : 0;
        if (addr[i] & (uint8_t)~keep)
            return 0;
    }
    return 1;
}

/* An IPv4-mapped IPv6 prefix of at least /96 as the IPv4 prefix it is. */
static void fold_mapped(aftp_addrmatch_prefix *p)
{
    if (!p->v6 || p->bits < 96 || memcmp(p->addr, v4_mapped, sizeof v4_mapped) != 0)
        return;
    uint8_t v4[4];
    memcpy(v4, p->addr + 12, 4);
    memset(p->addr, 0, sizeof p->addr);
    memcpy(p->addr, v4, 4);
    p->v6 = 0;
    p->bits = (uint8_t)(p->bits - 96);
}

const char *aftp_addrmatch_parse(const char *text, size_t len, aftp_addrmatch_prefix *out)
{
    char addr[AFTP_ADDRMATCH_TEXT_MAX];
    const char *slash = memchr(text, '/', len);
    size_t addr_len = slash != NULL ? (size_t)(slash - text) : len;
    aftp_addrmatch_prefix p = {0};
    if (addr_len == 0 || addr_len >= sizeof addr)
        return "not an IPv4 or IPv6 address";
    memcpy(addr, text, addr_len);
    addr[addr_len] = '\0';
    if (inet_pton(AF_INET, addr, p.addr) == 1)
        p.v6 = 0;
    else if (inet_pton(AF_INET6, addr, p.addr) == 1)
        p.v6 = 1;
    else
        return "not an IPv4 or IPv6 address (names are not accepted: they could change)";
    unsigned max = p.v6 ? 128 : 32, bits = max;
    const char *why = slash != NULL ? parse_bits(slash + 1, len - addr_len - 1, max, &bits)
                                    : NULL;
    if (why != NULL)
        return why;
    if (!host_bits_zero(p.addr, p.v6 ? 16 : 4, bits))
        return "address has bits set beyond its prefix length (write the network, "
               "e.g. 198.18.0.0/15, or the host without a length)";
    p.bits = (uint8_t)bits;
    fold_mapped(&p);
    *out = p;
    return NULL;
}

/* sa as a /32 or /128 "prefix", an IPv4-mapped one as IPv4; 0 for another
 * family. */
static int address_of(const struct sockaddr *sa, aftp_addrmatch_prefix *a)
{
    memset(a, 0, sizeof *a);
    if (sa->sa_family == AF_INET) {
        memcpy(a->addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        a->bits = 32;
        return 1;
    }
    if (sa->sa_family != AF_INET6)
        return 0;
    memcpy(a->addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    a->v6 = 1;
    a->bits = 128;
    fold_mapped(a);
    return 1;
}

int aftp_addrmatch_contains(const aftp_addrmatch_prefix *p, const struct sockaddr *sa)
{
    aftp_addrmatch_prefix a;
    if (!address_of(sa, &a) || a.v6 != p->v6)
        return 0;
    size_t whole = p->bits / 8;
    if (memcmp(a.addr, p->addr, whole) != 0)
        return 0;
    if (p->bits % 8 == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff00u >> (p->bits % 8));
    return (a.addr[whole] & mask) == p->addr[whole];
}

int aftp_addrmatch_any(const aftp_addrmatch_prefix *list, size_t count,
                       const struct sockaddr *sa)
{
    for (size_t i = 0; i < count; i++)
        if (aftp_addrmatch_contains(&list[i], sa))
            return 1;
    return 0;
}
