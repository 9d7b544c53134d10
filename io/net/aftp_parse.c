#include "aftp_parse.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int decimal_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Multiplier of a rate suffix, 0 if the character is not one. */
static uint64_t rate_multiplier(char c)
{
    switch (c) {
    case '\0': return 1;
    case 'k': case 'K': return UINT64_C(1000);
    case 'm': case 'M': return UINT64_C(1000000);
    case 'g': case 'G': return UINT64_C(1000000000);
    case 't': case 'T': return UINT64_C(1000000000000);
    default: return 0;
    }
}

int aftp_parse_rate(const char *text, uint64_t *bps)
{
    /* Integer arithmetic in units of 1e-9 so "2.5g" is exact and no locale
     * decides what the decimal point is. */
    const uint64_t nano = UINT64_C(1000000000);
    const uint64_t max_whole = AFTP_PARSE_MAX_RATE;
    uint64_t whole = 0, frac = 0, frac_scale = nano;
    const char *p = text;
    if (!decimal_digit(*p))
        return AFTP_ERR_INVALID_ARGUMENT;
    for (; decimal_digit(*p); p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > max_whole)
            return AFTP_ERR_INVALID_ARGUMENT;
    }
    if (*p == '.') {
        p++;
        if (!decimal_digit(*p))
            return AFTP_ERR_INVALID_ARGUMENT;
        for (; decimal_digit(*p); p++) {
            if (frac_scale == 1)
                return AFTP_ERR_INVALID_ARGUMENT; /* more than 9 fractional digits */
            frac_scale /= 10;
            frac += (uint64_t)(*p - '0') * frac_scale;
        }
    }
    uint64_t mult = rate_multiplier(*p);
    if (mult == 0 || (*p != '\0' && p[1] != '\0'))
        return AFTP_ERR_INVALID_ARGUMENT;
    if (whole > max_whole / mult)
        return AFTP_ERR_INVALID_ARGUMENT;
    /* frac < 1e9 and mult <= 1e12: frac * (mult / 1e3) / 1e6 avoids overflow
     * for every multiplier >= 1000; for 1, the fraction is below one bit. */
    uint64_t value = whole * mult + (mult >= 1000 ? frac * (mult / 1000) / (nano / 1000) : 0);
    if (value == 0 || value > max_whole)
        return AFTP_ERR_INVALID_ARGUMENT;
    *bps = value;
    return AFTP_OK;
}

static int parse_port(const char *text, int passive, uint16_t *port)
{
    char *end;
    if (!decimal_digit(text[0]))
        return AFTP_ERR_INVALID_ARGUMENT;
    unsigned long v = strtoul(text, &end, 10);
    if (*end != '\0' || v > 65535 || (v == 0 && !passive))
        return AFTP_ERR_INVALID_ARGUMENT;
    *port = (uint16_t)v;
    return AFTP_OK;
}

/* Splits "HOST:PORT" / "[HOST]:PORT" into host (copied into `host`) and
 * the port text; with `passive`, a bare "PORT" gives an empty host. */
static int split_host_port(const char *text, int passive, char *host, size_t cap,
                           const char **port)
{
    const char *colon;
    size_t host_len;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return AFTP_ERR_INVALID_ARGUMENT;
        host_len = (size_t)(close - text - 1);
        text++;
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL) {
            if (!passive)
                return AFTP_ERR_INVALID_ARGUMENT;
            host[0] = '\0';
            *port = text;
            return AFTP_OK;
        }
        host_len = (size_t)(colon - text);
        if (memchr(text, ':', host_len) != NULL)
            return AFTP_ERR_INVALID_ARGUMENT; /* a bare IPv6 address needs brackets */
    }
    if (host_len == 0 || host_len >= cap)
        return AFTP_ERR_INVALID_ARGUMENT;
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    *port = colon + 1;
    return AFTP_OK;
}

int aftp_parse_addr(const char *text, int passive, struct sockaddr_storage *out,
                    socklen_t *out_len)
{
    char host[256];
    const char *port_text;
    uint16_t port;
    int rc = split_host_port(text, passive, host, sizeof host, &port_text);
    if (rc != AFTP_OK || (rc = parse_port(port_text, passive, &port)) != AFTP_OK)
        return rc;
    if (host[0] == '\0')
        strcpy(host, "0.0.0.0");

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return AFTP_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *out_len = res->ai_addrlen;
    freeaddrinfo(res);
    if (out->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)out)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)out)->sin_port = htons(port);
    return AFTP_OK;
}

void aftp_format_addr(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
        snprintf(buf, cap, "[%s]:%u", host, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        snprintf(buf, cap, "%s:%u", host, ntohs(s4->sin_port));
    }
}
