/* Key files, authorized keys and known hosts (io/keys/aftp_keyfile.h):
 * accept/reject tables, file round trips and the private-key permission
 * refusal. Files live in a fresh temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp/aftp_error.h"
#include "common/aftp_handshake.h"
#include "aftp_keyfile.h"

enum { KEY = AFTP_KEYFILE_KEY_LEN };

/* base64 of the bytes 0..31, and of 32 x 0xff */
#define KEY_A_B64 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define KEY_B_B64 "//////////////////////////////////////////8="

static const uint8_t key_a[KEY] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                   11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                   22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
static uint8_t key_b[KEY];

static char dir[] = "/tmp/aftp-keyfile-XXXXXX";

static int setup(void **state)
{
    (void)state;
    memset(key_b, 0xff, KEY);
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *path_in_dir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* ---- public key lines ---- */

static void test_public_line_accepted(void **state)
{
    (void)state;
    static const char *good[] = {
        "aftp-x25519 " KEY_A_B64,
        "aftp-x25519 " KEY_A_B64 " alice@laptop",
        "aftp-x25519\t" KEY_A_B64 "\tcomment with  spaces ",
        "  aftp-x25519   " KEY_A_B64,
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint8_t key[KEY] = {0};
        char err[128];
        if (aftp_keyfile_parse_public(good[i], strlen(good[i]), key, err, sizeof err) != AFTP_OK)
            fail_msg("rejected '%s': %s", good[i], err);
        assert_memory_equal(key, key_a, KEY);
    }
}

static void test_public_line_rejected(void **state)
{
    (void)state;
    static char long_line[AFTP_KEYFILE_MAX_LINE + 2];
    memset(long_line, 'x', sizeof long_line - 1);
    memcpy(long_line, "aftp-x25519 " KEY_A_B64 " ", 57);
    static const struct {
        const char *line;
        int code;
    } bad[] = {
        {"", AFTP_ERR_BAD_KEY},
        {"aftp-x25519", AFTP_ERR_BAD_KEY},
        {"ssh-ed25519 " KEY_A_B64, AFTP_ERR_BAD_KEY},
        {"aftp-x25519 " KEY_A_B64 "=", AFTP_ERR_BAD_KEY},                           /* 45 chars */
        {"aftp-x25519 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", AFTP_ERR_BAD_KEY}, /* 43 */
        {"aftp-x25519 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh*=", AFTP_ERR_BAD_KEY},
        {"aftp-x25519 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8A", AFTP_ERR_BAD_KEY}, /* 33 B */
        {"aftp-x25519 " KEY_A_B64 " bell\a", AFTP_ERR_BAD_KEY},
        {long_line, AFTP_ERR_LIMIT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t key[KEY];
        char err[128] = "";
        int rc = aftp_keyfile_parse_public(bad[i].line, strlen(bad[i].line), key, err, sizeof err);
        if (rc != bad[i].code)
            fail_msg("line %zu: got %s, want %s", i, aftp_strerror(rc), aftp_strerror(bad[i].code));
        assert_true(strlen(err) > 0);
    }
}

static void test_public_format_round_trip(void **state)
{
    (void)state;
    char line[AFTP_KEYFILE_MAX_LINE + 2];
    uint8_t key[KEY];
    assert_int_equal(aftp_keyfile_format_public(key_b, "bob", line, sizeof line), AFTP_OK);
    assert_string_equal(line, "aftp-x25519 " KEY_B_B64 " bob\n");
    assert_int_equal(aftp_keyfile_parse_public(line, strlen(line) - 1, key, NULL, 0), AFTP_OK);
    assert_memory_equal(key, key_b, KEY);
    assert_int_equal(aftp_keyfile_format_public(key_b, NULL, line, sizeof line), AFTP_OK);
    assert_string_equal(line, "aftp-x25519 " KEY_B_B64 "\n");
    assert_int_equal(aftp_keyfile_format_public(key_b, "two\nlines", line, sizeof line),
                     AFTP_ERR_INVALID_ARGUMENT);
    assert_int_equal(aftp_keyfile_format_public(key_b, NULL, line, 20), AFTP_ERR_BUFFER_TOO_SMALL);
}

/* ---- authorized keys ---- */

static void test_authorized_keys(void **state)
{
    (void)state;
    static const char text[] = "# clients allowed to push\n"
                               "\n"
                               "aftp-x25519 " KEY_A_B64 " alice\n"
                               "   # indented comment\r\n"
                               "aftp-x25519 " KEY_B_B64 "\r\n";
    aftp_keyfile_list list;
    char err[128];
    assert_int_equal(aftp_keyfile_authorized_parse("auth", text, strlen(text), &list, err,
                                                   sizeof err), AFTP_OK);
    assert_int_equal(list.count, 2);
    assert_true(aftp_keyfile_list_contains(&list, key_a));
    assert_true(aftp_keyfile_list_contains(&list, key_b));
    uint8_t other[KEY] = {1};
    assert_false(aftp_keyfile_list_contains(&list, other));
    aftp_keyfile_list_free(&list);
    assert_int_equal(list.count, 0);
}

static void test_authorized_keys_rejected(void **state)
{
    (void)state;
    static const char typo[] = "aftp-x25519 " KEY_A_B64 "\n"
                               "aftp-x2559 " KEY_B_B64 "\n";
    aftp_keyfile_list list;
    char err[128];
    assert_int_equal(aftp_keyfile_authorized_parse("auth", typo, strlen(typo), &list, err,
                                                   sizeof err), AFTP_ERR_BAD_KEY);
    assert_non_null(strstr(err, "auth:2:"));
    assert_null(list.keys);

    /* one key more than allowed */
    size_t line_len = strlen("aftp-x25519 " KEY_A_B64 "\n");
    size_t n = AFTP_KEYFILE_MAX_KEYS + 1;
    char *many = malloc(n * line_len + 1);
    assert_non_null(many);
    for (size_t i = 0; i < n; i++)
        memcpy(many + i * line_len, "aftp-x25519 " KEY_A_B64 "\n", line_len);
    assert_int_equal(aftp_keyfile_authorized_parse("many", many, n * line_len, &list, err,
                                                   sizeof err), AFTP_ERR_LIMIT);
    assert_int_equal(aftp_keyfile_authorized_parse("many", many, (n - 1) * line_len, &list, err,
                                                   sizeof err), AFTP_OK);
    assert_int_equal(list.count, n - 1);
    aftp_keyfile_list_free(&list);
    free(many);
}

static void test_authorized_keys_file(void **state)
{
    (void)state;
    const char *path = path_in_dir("authorized_keys");
    write_text(path, "aftp-x25519 " KEY_B_B64 " bob\n", 0644);
    aftp_keyfile_list list;
    char err[256];
    assert_int_equal(aftp_keyfile_authorized_load(path, &list, err, sizeof err), AFTP_OK);
    assert_int_equal(list.count, 1);
    assert_true(aftp_keyfile_list_contains(&list, key_b));
    aftp_keyfile_list_free(&list);
    assert_int_equal(aftp_keyfile_authorized_load(path_in_dir("none"), &list, err, sizeof err),
                     AFTP_ERR_NOT_FOUND);
}

/* ---- known hosts ---- */

static void test_known_hosts(void **state)
{
    (void)state;
    static const char text[] = "# pinned servers\n"
                               "example.org:4000 aftp-x25519 " KEY_A_B64 "\n"
                               "[::1]:4000 aftp-x25519 " KEY_B_B64 " added by aftp\n";
    char err[256];
    size_t len = strlen(text);
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", text, len, "example.org:4000", key_a,
                                                    err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", text, len, "[::1]:4000", key_b, err,
                                                    sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", text, len, "example.org:4000", key_b,
                                                    err, sizeof err), AFTP_ERR_AUTH);
    assert_non_null(strstr(err, "kh:2:"));
    assert_non_null(strstr(err, "CHANGED"));
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", text, len, "example.org:4001", key_a,
                                                    err, sizeof err), AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", text, len, "bad host", key_a, err,
                                                    sizeof err), AFTP_ERR_INVALID_ARGUMENT);
    static const char broken[] = "example.org:4000 aftp-x25519 AAAA\n";
    assert_int_equal(aftp_keyfile_known_hosts_check("kh", broken, strlen(broken),
                                                    "example.org:4000", key_a, err, sizeof err),
                     AFTP_ERR_BAD_KEY);
}

static void test_known_hosts_file(void **state)
{
    (void)state;
    char path[256], err[256];
    snprintf(path, sizeof path, "%s", path_in_dir("known_hosts"));
    assert_int_equal(aftp_keyfile_known_hosts_check_file(path, "h:1", key_a, err, sizeof err),
                     AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(aftp_keyfile_known_hosts_append(path, "h:1", key_a, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_append(path, "h:2", key_b, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_check_file(path, "h:1", key_a, err, sizeof err),
                     AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_check_file(path, "h:2", key_a, err, sizeof err),
                     AFTP_ERR_AUTH);
    assert_int_equal(aftp_keyfile_known_hosts_append(path, "#h:3", key_b, err, sizeof err),
                     AFTP_ERR_INVALID_ARGUMENT);
}

/* A client looks the server's key up before it connects. */
static void test_known_hosts_lookup(void **state)
{
    (void)state;
    static const char text[] = "# pinned servers\n"
                               "example.org:4000 aftp-x25519 " KEY_A_B64 "\n"
                               "other:1 aftp-x25519 " KEY_B_B64 "\n"
                               "example.org:4000 aftp-x25519 " KEY_A_B64 " again\n"
                               "changed:1 aftp-x25519 " KEY_A_B64 "\n"
                               "changed:1 aftp-x25519 " KEY_B_B64 "\n";
    char err[256], path[256];
    uint8_t key[KEY];
    size_t len = strlen(text);
    assert_int_equal(aftp_keyfile_known_hosts_lookup("kh", text, len, "example.org:4000", key,
                                                     err, sizeof err), AFTP_OK);
    assert_memory_equal(key, key_a, KEY);
    assert_int_equal(aftp_keyfile_known_hosts_lookup("kh", text, len, "other:1", key, err,
                                                     sizeof err), AFTP_OK);
    assert_memory_equal(key, key_b, KEY);
    assert_int_equal(aftp_keyfile_known_hosts_lookup("kh", text, len, "changed:1", key, err,
                                                     sizeof err), AFTP_ERR_AUTH);
    assert_non_null(strstr(err, "kh:5 and kh:6"));
    assert_int_equal(aftp_keyfile_known_hosts_lookup("kh", text, len, "example.org:4001", key,
                                                     err, sizeof err), AFTP_ERR_UNKNOWN_PEER);
    static const char broken[] = "other:2 aftp-x25519 AAAA\n";
    assert_int_equal(aftp_keyfile_known_hosts_lookup("kh", broken, strlen(broken), "other:1",
                                                     key, err, sizeof err), AFTP_ERR_BAD_KEY);
    snprintf(path, sizeof path, "%s", path_in_dir("lookup_hosts"));
    assert_int_equal(aftp_keyfile_known_hosts_lookup_file(path, "h:1", key, err, sizeof err),
                     AFTP_ERR_UNKNOWN_PEER);
    assert_int_equal(aftp_keyfile_known_hosts_append(path, "h:1", key_b, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_known_hosts_lookup_file(path, "h:1", key, err, sizeof err),
                     AFTP_OK);
    assert_memory_equal(key, key_b, KEY);
}

/* ---- private and public key files ---- */

static void test_private_key_file(void **state)
{
    (void)state;
    char path[256], err[256];
    uint8_t secret[KEY];
    struct stat st;
    snprintf(path, sizeof path, "%s", path_in_dir("id"));
    assert_int_equal(aftp_keyfile_write_private(path, key_a, err, sizeof err), AFTP_OK);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(aftp_keyfile_read_private(path, secret, err, sizeof err), AFTP_OK);
    assert_memory_equal(secret, key_a, KEY);
    assert_int_equal(aftp_keyfile_write_private(path, key_b, err, sizeof err),
                     AFTP_ERR_FILE_EXISTS);
    assert_int_equal(aftp_keyfile_read_private(path, secret, err, sizeof err), AFTP_OK);
    assert_memory_equal(secret, key_a, KEY); /* not replaced */

    const char *pub = path_in_dir("id.pub");
    assert_int_equal(aftp_keyfile_write_public(pub, key_b, "me@host", err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_read_public(pub, secret, err, sizeof err), AFTP_OK);
    assert_memory_equal(secret, key_b, KEY);
}

/* Like ssh: group- or world-accessible private keys are refused, with a
 * message that says how to fix it. So are symbolic links. */
static void test_private_key_permissions(void **state)
{
    (void)state;
    char path[256], link[256], err[256];
    uint8_t secret[KEY];
    snprintf(path, sizeof path, "%s", path_in_dir("loose"));
    write_text(path, "aftp-private-key " KEY_A_B64 "\n", 0600);
    static const mode_t loose[] = {0640, 0604, 0660, 0644, 0601, 0610};
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        assert_int_equal(chmod(path, loose[i]), 0);
        assert_int_equal(aftp_keyfile_read_private(path, secret, err, sizeof err),
                         AFTP_ERR_PERMISSION);
        assert_non_null(strstr(err, "chmod 600"));
    }
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(aftp_keyfile_read_private(path, secret, err, sizeof err), AFTP_OK);
    snprintf(link, sizeof link, "%s", path_in_dir("link"));
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(aftp_keyfile_read_private(link, secret, err, sizeof err),
                     AFTP_ERR_PERMISSION);
    assert_int_equal(aftp_keyfile_read_private(dir, secret, err, sizeof err), AFTP_ERR_BAD_KEY);
}

static void test_private_key_content_rejected(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "aftp-private-key\n",
        "aftp-x25519 " KEY_A_B64 "\n",
        "aftp-private-key " KEY_A_B64 " comment\n",
        "aftp-private-key " KEY_A_B64 "\naftp-private-key " KEY_A_B64 "\n",
        "aftp-private-key " KEY_A_B64 "\n\n",
        "aftp-private-key AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\n",
        "aftp-private-key " KEY_A_B64 "                                                         "
        "                                                                            \n",
    };
    char path[256], err[256];
    uint8_t secret[KEY];
    snprintf(path, sizeof path, "%s", path_in_dir("bad"));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unlink(path);
        write_text(path, bad[i], 0600);
        int rc = aftp_keyfile_read_private(path, secret, err, sizeof err);
        if (rc != AFTP_ERR_BAD_KEY)
            fail_msg("content %zu: got %s", i, aftp_strerror(rc));
    }
    write_text(path, "aftp-private-key " KEY_A_B64, 0600); /* no newline: fine */
    assert_int_equal(aftp_keyfile_read_private(path, secret, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_read_private(path_in_dir("missing"), secret, err, sizeof err),
                     AFTP_ERR_NOT_FOUND);
}

/* ---- the example of spec Appendix B.6 ---- */

#define B6_PRIVATE "aftp-private-key NGw81CoHuXrH/35z1n7AyCk/qyLs0DwGaExGDtmKQIQ=\n"
#define B6_PUBLIC "aftp-x25519 dKAzyLHOBO7zH4MBxUrMEf8MWu89+BH06q0FP6xq1H4= alice@ingest1\n"
#define B6_FINGERPRINT "SHA256:WxaFaztSgHORaP6G2XTN9rDajrCHg2uZHs88fM0Dna8"
#define B6_KNOWN_HOST "server.example:7400 aftp-x25519 dKAzyLHOBO7zH4MBxUrMEf8MWu89+BH06q0FP6xq1H4=\n"

/* The spec's example is what this code reads and derives: the public key
 * of the private file, its fingerprint, the known-hosts entry. */
static void test_spec_example(void **state)
{
    (void)state;
    char err[256], fp[AFTP_KEYFILE_FINGERPRINT_MAX], text[128];
    uint8_t secret[KEY], derived[KEY], listed[KEY];
    write_text(path_in_dir("b6"), B6_PRIVATE, 0600);
    write_text(path_in_dir("b6.pub"), B6_PUBLIC, 0644);
    assert_int_equal(aftp_keyfile_read_private(path_in_dir("b6"), secret, err, sizeof err), AFTP_OK);
    assert_int_equal(aftp_keyfile_read_public(path_in_dir("b6.pub"), listed, err, sizeof err),
                     AFTP_OK);
    assert_int_equal(aftp_hs_public_key(secret, derived), AFTP_OK);
    assert_memory_equal(derived, listed, KEY);

    aftp_keyfile_fingerprint(listed, fp, sizeof fp);
    assert_string_equal(fp, B6_FINGERPRINT);
    aftp_keyfile_key_text(listed, text, sizeof text);
    assert_string_equal(text, "aftp-x25519 dKAzyLHOBO7zH4MBxUrMEf8MWu89+BH06q0FP6xq1H4=");

    assert_int_equal(aftp_keyfile_known_hosts_check("b6", B6_KNOWN_HOST, strlen(B6_KNOWN_HOST),
                                                    "server.example:7400", listed, err,
                                                    sizeof err),
                     AFTP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_public_line_accepted),
        cmocka_unit_test(test_public_line_rejected),
        cmocka_unit_test(test_public_format_round_trip),
        cmocka_unit_test(test_authorized_keys),
        cmocka_unit_test(test_authorized_keys_rejected),
        cmocka_unit_test(test_authorized_keys_file),
        cmocka_unit_test(test_known_hosts),
        cmocka_unit_test(test_known_hosts_file),
        cmocka_unit_test(test_known_hosts_lookup),
        cmocka_unit_test(test_private_key_file),
        cmocka_unit_test(test_private_key_permissions),
        cmocka_unit_test(test_private_key_content_rejected),
        cmocka_unit_test(test_spec_example),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
