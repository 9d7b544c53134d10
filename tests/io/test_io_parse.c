/* Rates and addresses as the user types them. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp_parse.h"

static void test_rates_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bps;
    } ok[] = {
        {"500M", 500000000u}, {"1G", 1000000000u}, {"2.5g", 2500000000u},
        {"800000", 800000u}, {"1k", 1000u}, {"1.5K", 1500u}, {"10G", 10000000000u},
        {"0.001M", 1000u}, {"1T", 1000000000000u}, {"123.456789m", 123456789u},
        {"1", 1u},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t bps = 0;
        assert_int_equal(aftp_parse_rate(ok[i].text, &bps), AFTP_OK);
        assert_int_equal(bps, ok[i].bps);
    }
}

static void test_rates_rejected(void **state)
{
    (void)state;
    const char *bad[] = {"", "G", "-1G", "1.G", ".5G", "1GG", "1X", "0", "0.0G", "1 G",
                         "1.0000000001G", "1001G0", "2T", "99999999999999999999",
                         "1e9", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t bps = 42;
        assert_int_equal(aftp_parse_rate(bad[i], &bps), AFTP_ERR_INVALID_ARGUMENT);
        assert_int_equal(bps, 42);
    }
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port)
                                     : ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static void test_addresses_accepted(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    char text[64];

    assert_int_equal(aftp_parse_addr("127.0.0.1:4000", 0, &ss, &len), AFTP_OK);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(port_of(&ss), 4000);
    aftp_format_addr((struct sockaddr *)&ss, text, sizeof text);
    assert_string_equal(text, "127.0.0.1:4000");

    assert_int_equal(aftp_parse_addr("[::1]:65535", 0, &ss, &len), AFTP_OK);
    assert_int_equal(ss.ss_family, AF_INET6);
    aftp_format_addr((struct sockaddr *)&ss, text, sizeof text);
    assert_string_equal(text, "[::1]:65535");

    assert_int_equal(aftp_parse_addr("localhost:9", 0, &ss, &len), AFTP_OK);
    assert_int_equal(port_of(&ss), 9);

    /* listening: a bare port is the IPv4 wildcard; port 0 lets the kernel choose */
    assert_int_equal(aftp_parse_addr("5000", 1, &ss, &len), AFTP_OK);
    aftp_format_addr((struct sockaddr *)&ss, text, sizeof text);
    assert_string_equal(text, "0.0.0.0:5000");
    assert_int_equal(aftp_parse_addr("127.0.0.1:0", 1, &ss, &len), AFTP_OK);
    assert_int_equal(port_of(&ss), 0);
}

static void test_addresses_rejected(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    const char *bad_send[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                              ":5000", "::1:5000", "[::1]5000", "[::1", "host:port",
                              "127.0.0.1:-1", "127.0.0.1:5000x", "300.1.1.1:5000", "5000"};
    for (size_t i = 0; i < sizeof bad_send / sizeof bad_send[0]; i++)
        assert_int_equal(aftp_parse_addr(bad_send[i], 0, &ss, &len), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_parse_addr("70000", 1, &ss, &len), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_parse_addr("x", 1, &ss, &len), AFTP_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_accepted),
        cmocka_unit_test(test_rates_rejected),
        cmocka_unit_test(test_addresses_accepted),
        cmocka_unit_test(test_addresses_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
