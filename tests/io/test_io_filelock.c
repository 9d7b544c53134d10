/* The table of destination files being written (aftp_filelock.h): one
 * owner per file, told apart by root and path; an owner's repeated claims
 * each released once; many claims (the table grows) all found again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "aftp/aftp_error.h"
#include "aftp_filelock.h"

static void test_one_owner_per_file(void **state)
{
    (void)state;
    int a, b; /* two owners */
    aftp_filelocks *t = aftp_filelocks_new();
    assert_non_null(t);
    aftp_filelock_key f = {.dev = 1, .ino = 2, .path = "d/f"};
    aftp_filelock_key other_root = {.dev = 1, .ino = 3, .path = "d/f"};
    aftp_filelock_key other_path = {.dev = 1, .ino = 2, .path = "d/g"};
    assert_int_equal(aftp_filelocks_claim(t, &f, &a), 1);
    assert_int_equal(aftp_filelocks_claim(t, &f, &b), 0);
    assert_int_equal(aftp_filelocks_claim(t, &other_root, &b), 1);
    assert_int_equal(aftp_filelocks_claim(t, &other_path, &b), 1);
    aftp_filelocks_release(t, &f, &b); /* not b's: nothing */
    assert_int_equal(aftp_filelocks_claim(t, &f, &b), 0);
    assert_int_equal(aftp_filelocks_claim(t, &f, &a), 1); /* a's twice... */
    aftp_filelocks_release(t, &f, &a);
    assert_int_equal(aftp_filelocks_claim(t, &f, &b), 0); /* ...held until both go */
    aftp_filelocks_release(t, &f, &a);
    assert_int_equal(aftp_filelocks_claim(t, &f, &b), 1);
    assert_int_equal(aftp_filelocks_count(t), 3);
    aftp_filelocks_del(t); /* with claims left */
}

static void test_many_claims(void **state)
{
    (void)state;
    enum { N = 5000 };
    static char paths[N][16];
    int a, b;
    aftp_filelocks *t = aftp_filelocks_new();
    assert_non_null(t);
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "f%d", i);
        aftp_filelock_key k = {.dev = 7, .ino = 8, .path = paths[i]};
        assert_int_equal(aftp_filelocks_claim(t, &k, &a), 1);
    }
    assert_int_equal(aftp_filelocks_count(t), N);
    for (int i = 0; i < N; i++) {
        aftp_filelock_key k = {.dev = 7, .ino = 8, .path = paths[i]};
        assert_int_equal(aftp_filelocks_claim(t, &k, &b), 0);
        if (i % 2 == 0)
            aftp_filelocks_release(t, &k, &a);
    }
    assert_int_equal(aftp_filelocks_count(t), N / 2);
    for (int i = 0; i < N; i++) {
        aftp_filelock_key k = {.dev = 7, .ino = 8, .path = paths[i]};
        assert_int_equal(aftp_filelocks_claim(t, &k, &b), i % 2 == 0);
    }
    aftp_filelocks_del(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_owner_per_file),
        cmocka_unit_test(test_many_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
