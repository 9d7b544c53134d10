/* The options of authorized-keys lines (spec Appendix B.4, io/keys/
 * aftp_keyfile.h): each option parsed into its key's entry; every
 * malformed or unknown option, and an option past its bounds, fails the
 * whole file with FILE:LINE and what is wrong; a key listed twice with
 * different options is refused naming both lines, with the same options
 * it is admitted once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "aftp/aftp_error.h"
#include "aftp_keyfile.h"

#define KEY_A "aftp-x25519 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8= alice@ingest"
#define KEY_B "aftp-x25519 //////////////////////////////////////////8="

static const uint8_t key_a[AFTP_KEYFILE_KEY_LEN] = {0,  1,  2,  3,  4,  5,  6,  7,
                                                    8,  9,  10, 11, 12, 13, 14, 15,
                                                    16, 17, 18, 19, 20, 21, 22, 23,
                                                    24, 25, 26, 27, 28, 29, 30, 31};

static int parse(const char *text, aftp_keyfile_list *list, char *err, size_t cap)
{
    return aftp_keyfile_authorized_parse("auth", text, strlen(text), list, err, cap);
}

static int from_ipv4(const aftp_keyfile_options *o, const char *addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    return aftp_addrmatch_any(o->from, o->from_count, (const struct sockaddr *)&sa);
}

static void test_every_option(void **state)
{
    (void)state;
    static const char text[] =
        "# partners\n"
        "root=\"/srv/partners/acme corp\",from=\"198.18.0.0/15,2001:db8::/32\",rate=200M,"
        "write-only " KEY_A "\n"
        "read-only,rate=1.5G,root=in/beta " KEY_B "\n";
    aftp_keyfile_list list;
    char err[256];
    assert_int_equal(parse(text, &list, err, sizeof err), AFTP_OK);
    assert_int_equal(list.count, 2);
    const aftp_keyfile_options *a = aftp_keyfile_list_options(&list, key_a);
    assert_non_null(a);
    assert_string_equal(a->root, "/srv/partners/acme corp");
    assert_int_equal(a->rate_bps, UINT64_C(200000000));
    assert_int_equal(a->access, AFTP_KEYFILE_ACCESS_WRITE);
    assert_int_equal(a->from_count, 2);
    assert_string_equal(a->from_text, "198.18.0.0/15,2001:db8::/32");
    assert_true(from_ipv4(a, "198.19.0.1"));
    assert_false(from_ipv4(a, "127.0.0.1"));
    assert_int_equal(a->line, 2);
    assert_string_equal(aftp_keyfile_list_comment(&list, key_a), "alice@ingest");
    const aftp_keyfile_options *b = &list.options[1];
    assert_string_equal(b->root, "in/beta");
    assert_int_equal(b->rate_bps, UINT64_C(1500000000));
    assert_int_equal(b->access, AFTP_KEYFILE_ACCESS_READ);
    assert_int_equal(b->from_count, 0);
    assert_null(b->from_text);
    assert_int_equal(b->line, 3);
    aftp_keyfile_list_free(&list);
}

/* A line without options: everything allowed, from anywhere. */
static void test_no_options(void **state)
{
    (void)state;
    aftp_keyfile_list list;
    char err[256];
    assert_int_equal(parse("  " KEY_A "\n", &list, err, sizeof err), AFTP_OK);
    const aftp_keyfile_options *a = aftp_keyfile_list_options(&list, key_a);
    assert_non_null(a);
    assert_null(a->root);
    assert_int_equal(a->rate_bps, 0);
    assert_int_equal(a->access, AFTP_KEYFILE_ACCESS_ALL);
    assert_int_equal(a->from_count, 0);
    aftp_keyfile_list_free(&list);
    aftp_keyfile_list by_hand = {NULL, 0, NULL, NULL};
    assert_null(aftp_keyfile_list_options(&by_hand, key_a));
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *options, *why;
        int code;
    } rows[] = {
        {"rot=\"/srv\"", "unknown option 'rot'", AFTP_ERR_BAD_KEY},
        {"Root=\"/srv\"", "unknown option 'Root'", AFTP_ERR_BAD_KEY},
        {"command=\"ls\"", "unknown option 'command'", AFTP_ERR_BAD_KEY},
        {"root=\"/a\",root=\"/b\"", "option 'root' given twice", AFTP_ERR_BAD_KEY},
        {"root=\"\"", "names no directory", AFTP_ERR_BAD_KEY},
        {"root", "needs a value", AFTP_ERR_BAD_KEY},
        {"root=\"/srv", "not closed", AFTP_ERR_BAD_KEY},
        {"root=\"/srv\"x", "text after the closing quote", AFTP_ERR_BAD_KEY},
        {"root=/s\"r\"v", "a double quote inside", AFTP_ERR_BAD_KEY},
        {"read-only,,rate=1M", "an empty option", AFTP_ERR_BAD_KEY},
        {"read-only,", "an empty option", AFTP_ERR_BAD_KEY},
        {",read-only", "an empty option", AFTP_ERR_BAD_KEY},
        {"read-only=yes", "takes no value", AFTP_ERR_BAD_KEY},
        {"read-only,write-only", "leave this key nothing", AFTP_ERR_BAD_KEY},
        {"rate=fast", "rate=fast is not a rate", AFTP_ERR_BAD_KEY},
        {"rate=0", "rate=0 is not a rate", AFTP_ERR_BAD_KEY},
        {"rate=", "is not a rate", AFTP_ERR_BAD_KEY},
        {"from=\"10.0.0.0/33\"", "from= entry '10.0.0.0/33': prefix length", AFTP_ERR_BAD_KEY},
        {"from=\"10.0.0.1/8\"", "bits set beyond", AFTP_ERR_BAD_KEY},
        {"from=\"10.0.0.0/8,\"", "an empty entry", AFTP_ERR_BAD_KEY},
        {"from=\"partner.example\"", "names are not accepted", AFTP_ERR_BAD_KEY},
        {"from=\"\"", "an empty entry", AFTP_ERR_BAD_KEY},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char text[512], err[512];
        aftp_keyfile_list list;
        snprintf(text, sizeof text, KEY_B "\n%s " KEY_A "\n", rows[i].options);
        int rc = parse(text, &list, err, sizeof err);
        if (rc != rows[i].code || strncmp(err, "auth:2: ", 8) != 0 ||
            strstr(err, rows[i].why) == NULL)
            fail_msg("%s: %d '%s', expected 'auth:2: ...%s'", rows[i].options, rc, err,
                     rows[i].why);
        assert_null(list.keys);
        assert_int_equal(list.count, 0);
    }
}

/* Options without a key type after them, a blank inside an option list. */
static void test_not_a_key_line(void **state)
{
    (void)state;
    aftp_keyfile_list list;
    char err[256];
    assert_int_equal(parse("read-only\n", &list, err, sizeof err), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:1: expected '[options] aftp-x25519"));
    assert_int_equal(parse("read-only, rate=1M " KEY_A "\n", &list, err, sizeof err),
                     AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:1:"));
    /* a bad key after good options is the key's problem */
    assert_int_equal(parse("read-only aftp-x25519 AAAA\n", &list, err, sizeof err),
                     AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:1: key is not 44 characters"));
}

static void test_bounds(void **state)
{
    (void)state;
    char text[2048], err[512], from[1024];
    aftp_keyfile_list list;
    /* AFTP_KEYFILE_MAX_FROM prefixes, then one more */
    size_t n = 0;
    for (unsigned i = 0; i < AFTP_KEYFILE_MAX_FROM; i++)
        n += (size_t)snprintf(from + n, sizeof from - n, "%s10.0.%u.0/24", i ? "," : "", i);
    snprintf(text, sizeof text, "from=\"%s\" " KEY_A "\n", from);
    assert_int_equal(parse(text, &list, err, sizeof err), AFTP_OK);
    assert_int_equal(list.options[0].from_count, AFTP_KEYFILE_MAX_FROM);
    aftp_keyfile_list_free(&list);
    snprintf(text, sizeof text, "from=\"%s,10.1.0.0/16\" " KEY_A "\n", from);
    assert_int_equal(parse(text, &list, err, sizeof err), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:1: from= lists 33 addresses, more than the 32 allowed"));
    /* options of AFTP_KEYFILE_MAX_OPTIONS bytes, then one more */
    char root[AFTP_KEYFILE_MAX_OPTIONS + 1];
    memset(root, 'd', sizeof root - 1);
    root[sizeof root - 1] = '\0';
    snprintf(text, sizeof text, "root=\"/%.*s\" " KEY_A "\n",
             (int)(AFTP_KEYFILE_MAX_OPTIONS - 8), root);
    assert_int_equal(parse(text, &list, err, sizeof err), AFTP_OK);
    aftp_keyfile_list_free(&list);
    snprintf(text, sizeof text, "root=\"/%.*s\" " KEY_A "\n",
             (int)(AFTP_KEYFILE_MAX_OPTIONS - 7), root);
    assert_int_equal(parse(text, &list, err, sizeof err), AFTP_ERR_LIMIT);
    assert_non_null(strstr(err, "auth:1: the options are 769 bytes, more than the 768 allowed"));
}

static void test_listed_twice(void **state)
{
    (void)state;
    aftp_keyfile_list list;
    char err[256];
    /* the same options, written in another order: admitted once */
    static const char same[] = "rate=1M,read-only " KEY_A "\n" KEY_B "\n"
                               "read-only,rate=1000K " KEY_A " again\n";
    assert_int_equal(parse(same, &list, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_list_options(&list, key_a)->line, 1);
    aftp_keyfile_list_free(&list);
    static const char differ[] = "rate=1M " KEY_A "\n" KEY_B "\n"
                                 "# later\n"
                                 "rate=2M " KEY_A "\n";
    assert_int_equal(parse(differ, &list, err, sizeof err), AFTP_ERR_BAD_KEY);
    assert_string_equal(err, "auth:1 and auth:4 list the same key with different options: "
                             "ambiguous (keep one line per key)");
    assert_null(list.keys);
    static const char root_or_not[] = KEY_A "\nroot=\"/a\" " KEY_A "\n";
    assert_int_equal(parse(root_or_not, &list, err, sizeof err), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:1 and auth:2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option),
        cmocka_unit_test(test_no_options),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_not_a_key_line),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_listed_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
