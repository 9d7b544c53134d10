/* The from= address matcher (common/aftp_addrmatch.h), table-driven:
 * which texts parse (and to what), which are refused and why, and which
 * addresses each prefix holds, at the edge lengths /0, /32, /128 and one
 * bit inside and outside a prefix; an IPv4-mapped IPv6 client matches
 * IPv4 prefixes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "common/aftp_addrmatch.h"

/* A client address, IPv4 or IPv6 by its text. */
static struct sockaddr_storage client(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
    } else {
        assert_int_equal(inet_pton(AF_INET6, text, &v6->sin6_addr), 1);
        v6->sin6_family = AF_INET6;
    }
    return ss;
}

static int matches(const char *prefix, const char *addr)
{
    aftp_addrmatch_prefix p;
    struct sockaddr_storage ss = client(addr);
    const char *why = aftp_addrmatch_parse(prefix, strlen(prefix), &p);
    if (why != NULL)
        fail_msg("%s: %s", prefix, why);
    return aftp_addrmatch_contains(&p, (const struct sockaddr *)&ss);
}

static void test_matching(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *addr;
        int in;
    } rows[] = {
        {"198.18.0.0/15", "198.18.0.0", 1},
        {"198.18.0.0/15", "198.19.255.255", 1},
        {"198.18.0.0/15", "198.20.0.0", 0},
        {"198.18.0.0/15", "198.17.255.255", 0},
        {"198.18.0.0/15", "127.0.0.1", 0},
        {"127.0.0.0/8", "127.0.0.1", 1},
        {"127.0.0.0/8", "128.0.0.1", 0},
        {"0.0.0.0/0", "203.0.113.9", 1},
        {"0.0.0.0/0", "2001:db8::1", 0},      /* /0 holds its own family only */
        {"192.0.2.7", "192.0.2.7", 1},        /* no length: the host, /32 */
        {"192.0.2.7/32", "192.0.2.6", 0},
        {"192.0.2.7/32", "192.0.2.8", 0},
        {"2001:db8::/32", "2001:db8:ffff::1", 1},
        {"2001:db8::/32", "2001:db9::1", 0},
        {"2001:db8::/32", "198.18.0.1", 0},
        {"::/0", "::1", 1},
        {"::/0", "127.0.0.1", 0},
        {"::1/128", "::1", 1},
        {"::1", "::2", 0},
        {"2001:db8::80/121", "2001:db8::ff", 1}, /* a length that is no byte boundary */
        {"2001:db8::80/121", "2001:db8::7f", 0},
        /* a dual-stack socket reports an IPv4 client as ::ffff:a.b.c.d */
        {"127.0.0.0/8", "::ffff:127.0.0.1", 1},
        {"198.18.0.0/15", "::ffff:127.0.0.1", 0},
        {"::ffff:198.18.0.0/111", "198.19.1.1", 1}, /* a mapped prefix is IPv4 */
        {"::ffff:198.18.0.0/111", "198.20.1.1", 0},
        {"::ffff:0:0/96", "10.0.0.1", 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (matches(rows[i].prefix, rows[i].addr) != rows[i].in)
            fail_msg("%s %s %s", rows[i].addr, rows[i].in ? "not in" : "in", rows[i].prefix);
}

static void test_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } rows[] = {
        {"", "not an IPv4"},
        {"/8", "not an IPv4"},
        {"example.com", "names are not accepted"},
        {"198.18.0.0/", "decimal number"},
        {"198.18.0.0/33", "beyond /32"},
        {"2001:db8::/129", "beyond /128"},
        {"198.18.0.0/015", "leading zeros"},
        {"198.18.0.0/+15", "decimal number"},
        {"198.18.0.0/1x", "decimal number"},
        {"198.18.0.0/1000", "decimal number"},
        {"198.18.0.1/15", "bits set beyond"},
        {"2001:db8::1/32", "bits set beyond"},
        {"198.18.0", "not an IPv4"},
        {"198.18.0.256", "not an IPv4"},
        {"fe80::1%eth0", "not an IPv4"},
        {"198.18.0.0/15/1", "decimal number"},
        {"1234567890123456789012345678901234567890123456789012345678901234567", "not an IPv4"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        aftp_addrmatch_prefix p;
        const char *why = aftp_addrmatch_parse(rows[i].text, strlen(rows[i].text), &p);
        if (why == NULL || strstr(why, rows[i].why) == NULL)
            fail_msg("'%s': %s, expected '%s'", rows[i].text, why ? why : "accepted",
                     rows[i].why);
    }
}

/* The parse reads only the len bytes it is given. */
static void test_length_bounded(void **state)
{
    (void)state;
    aftp_addrmatch_prefix p;
    const char text[] = "10.0.0.0/8,192.0.2.1";
    assert_null(aftp_addrmatch_parse(text, 10, &p));
    assert_int_equal(p.bits, 8);
    assert_int_equal(p.v6, 0);
    assert_int_equal(p.addr[0], 10);
}

static void test_any(void **state)
{
    (void)state;
    aftp_addrmatch_prefix list[2];
    assert_null(aftp_addrmatch_parse("10.0.0.0/8", 10, &list[0]));
    assert_null(aftp_addrmatch_parse("2001:db8::/32", 13, &list[1]));
    struct sockaddr_storage a = client("2001:db8::5"), b = client("11.0.0.1");
    assert_true(aftp_addrmatch_any(list, 2, (const struct sockaddr *)&a));
    assert_false(aftp_addrmatch_any(list, 2, (const struct sockaddr *)&b));
    assert_false(aftp_addrmatch_any(list, 0, (const struct sockaddr *)&a));
    struct sockaddr unix_family = {.sa_family = AF_UNIX};
    assert_false(aftp_addrmatch_any(list, 2, &unix_family));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_length_bounded),
        cmocka_unit_test(test_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
