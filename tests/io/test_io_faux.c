/* faux:// endpoints: the source URL's parsing, the source's zero views,
 * and a destination that keeps nothing but checks what it is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "aftp_faux.h"
#include "aftp_source.h"

static int parse(const char *url, uint64_t *size)
{
    char name[AFTP_PATH_MAX_COMPONENT + 1], why[512];
    return aftp_faux_parse(url, name, size, why, sizeof why);
}

static void test_parses_name_and_size(void **state)
{
    (void)state;
    char name[AFTP_PATH_MAX_COMPONENT + 1], why[512];
    uint64_t size = 1;
    assert_int_equal(aftp_faux_parse("faux:///t?10G", name, &size, why, sizeof why), AFTP_OK);
    assert_string_equal(name, "t");
    assert_true(size == UINT64_C(10) << 30);
    assert_int_equal(parse("faux:///t?0", &size), AFTP_OK);
    assert_true(size == 0);
    assert_int_equal(parse("faux:///t?123", &size), AFTP_OK);
    assert_true(size == 123);
    assert_int_equal(parse("faux:///t?3k", &size), AFTP_OK);
    assert_true(size == 3072);
    assert_int_equal(parse("faux:///t?2T", &size), AFTP_OK);
    assert_true(size == UINT64_C(2) << 40);
}

static void test_refuses_malformed_urls(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "faux://t?1",   "faux:///?1",     "faux:///a/b?1", "faux:///t",     "faux:///t?",
        "faux:///t?1x", "faux:///t?1kk", "faux:///..?1",  "faux:///t?k",   "faux:///t?-1",
        "faux:///t?99999999999999999999", "faux:///t?2000000T", "file:///t?1"};
    uint64_t size;
    char why[512];
    char name[AFTP_PATH_MAX_COMPONENT + 1];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(aftp_faux_parse(bad[i], name, &size, why, sizeof why),
                         AFTP_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(why, "bad faux source"));
    }
}

static void test_source_is_zeros_without_a_file(void **state)
{
    (void)state;
    aftp_source src;
    aftp_file_info info;
    const uint8_t *p;
    assert_int_equal(aftp_source_open(&src, "faux:///big?1T", 7, &info), AFTP_OK);
    assert_string_equal(info.path, "big");
    assert_true(info.size == UINT64_C(1) << 40);
    assert_int_equal(info.file_id, 7);
    uint64_t off = (UINT64_C(1) << 40) - 9000;
    assert_int_equal(aftp_source_view(&src, 7, off, 9000, &p), AFTP_OK);
    for (size_t i = 0; i < 9000; i++)
        assert_int_equal(p[i], 0);
    assert_int_equal(aftp_source_view(&src, 7, off, 9001, &p), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_source_view(&src, 8, 0, 1, &p), AFTP_ERR_INVALID_STATE);
    assert_int_equal(aftp_source_check(&src), AFTP_OK);
    aftp_source_fini(&src);
    assert_int_equal(aftp_source_open(&src, "faux:///x?1Q", 1, &info), AFTP_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(src.message, "SIZE must be"));
}

static void test_sink_keeps_only_zeros(void **state)
{
    (void)state;
    aftp_faux_sink sink;
    memset(&sink, 0, sizeof sink);
    const aftp_storage_ops *ops = &aftp_faux_sink_ops;
    aftp_file_info info = {.file_id = 3, .size = 5000, .path = "z"};
    uint8_t block[1000] = {0};
    const uint8_t *view;
    assert_int_equal(ops->open(&sink, &info), AFTP_OK);
    assert_int_equal(ops->open(&sink, &info), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->write(&sink, 3, 4000, block, sizeof block), AFTP_OK);
    assert_int_equal(ops->write(&sink, 3, 4001, block, sizeof block), AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->write(&sink, 4, 0, block, sizeof block), AFTP_ERR_INVALID_STATE);
    assert_int_equal(ops->view(&sink, 3, 0, 5000, &view), AFTP_OK);
    assert_int_equal(view[4999], 0);
    block[999] = 1;
    assert_int_equal(ops->write(&sink, 3, 0, block, sizeof block), AFTP_ERR_IO);
    assert_int_equal(sink.report.last_error, AFTP_ERR_IO);
    assert_non_null(strstr(sink.report.message, "takes only a faux:// source: z"));
    assert_int_equal(ops->close(&sink, 3, 0), AFTP_OK);
    assert_int_equal(ops->close(&sink, 3, 0), AFTP_ERR_INVALID_STATE);
}

static void test_sink_checks_paths(void **state)
{
    (void)state;
    aftp_faux_sink sink;
    memset(&sink, 0, sizeof sink);
    aftp_file_info info = {.file_id = 1, .size = 1, .path = "../escape"};
    assert_int_equal(aftp_faux_sink_ops.open(&sink, &info), AFTP_ERR_PATH_REJECTED);
    assert_non_null(strstr(sink.report.message, "refused unsafe path"));
    info.path = "/etc/passwd";
    assert_int_equal(aftp_faux_sink_ops.open(&sink, &info), AFTP_ERR_PATH_REJECTED);
    info.path = "sub/ok";
    assert_int_equal(aftp_faux_sink_ops.open(&sink, &info), AFTP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_name_and_size),
        cmocka_unit_test(test_refuses_malformed_urls),
        cmocka_unit_test(test_source_is_zeros_without_a_file),
        cmocka_unit_test(test_sink_keeps_only_zeros),
        cmocka_unit_test(test_sink_checks_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
