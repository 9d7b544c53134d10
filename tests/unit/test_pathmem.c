/* io/store/aftp_pathmem: the client's memory of paths (Careful Resume):
 * round trip through the file, the entry bound, the lifetime, malformed
 * files ignored with a notice, the atomic write (nothing left behind, the
 * old file intact when the rename cannot happen), mode 0600. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aftp_pathmem.h"

#define T0 UINT64_C(1800000000) /* a Unix time */

typedef struct fixture {
    char dir[64];
    char path[128];  /* <dir>/cache/aftp/paths: the directories do not exist yet */
    aftp_pathmem pm, back;
    char notice[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/aftp-pathmem-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/cache/aftp/paths", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Files in the directory of f->path. */
static int files_beside(const fixture *f)
{
    char dir[160];
    snprintf(dir, sizeof dir, "%s/cache/aftp", f->dir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_key_names_server_and_addresses(void **state)
{
    (void)state;
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(40000)};
    struct sockaddr_in6 peer = {.sin6_family = AF_INET6, .sin6_port = htons(4433)};
    inet_pton(AF_INET, "192.0.2.7", &local.sin_addr);
    inet_pton(AF_INET6, "2001:db8::1", &peer.sin6_addr);
    uint8_t key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    char out[AFTP_PATHMEM_KEY_MAX];
    assert_int_equal(aftp_pathmem_key(key, (struct sockaddr *)&local, (struct sockaddr *)&peer,
                                      out), AFTP_OK);
    assert_string_equal(out, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                             "/192.0.2.7/[2001:db8::1]:4433");
    assert_int_equal(aftp_pathmem_key(NULL, (struct sockaddr *)&local, (struct sockaddr *)&local,
                                      out), AFTP_OK);
    assert_string_equal(out, "-/192.0.2.7/192.0.2.7:40000");
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_int_equal(aftp_pathmem_key(NULL, &un, (struct sockaddr *)&local, out),
                     AFTP_ERR_INVALID_ARGUMENT);
}

static void test_round_trip(void **state)
{
    fixture *f = *state;
    /* no file yet: an empty memory, no notice */
    assert_int_equal(aftp_pathmem_load(&f->pm, f->path, f->notice, sizeof f->notice), AFTP_OK);
    assert_int_equal(f->pm.count, 0);
    assert_string_equal(f->notice, "");
    aftp_pathmem_update(&f->pm, "k1/10.0.0.1/10.0.0.2:4433", 936000000, 150000000, T0);
    aftp_pathmem_update(&f->pm, "k2/10.0.0.1/10.0.0.3:4433", 95000000, 600000000, T0 + 1);
    aftp_pathmem_update(&f->pm, "k1/10.0.0.1/10.0.0.2:4433", 940000000, 151000000, T0 + 2);
    assert_int_equal(f->pm.count, 2);
    char why[256];
    assert_int_equal(aftp_pathmem_save(&f->pm, f->path, T0 + 2, why, sizeof why), AFTP_OK);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(files_beside(f), 1); /* no temporary file left */
    assert_int_equal(aftp_pathmem_load(&f->back, f->path, f->notice, sizeof f->notice), AFTP_OK);
    assert_string_equal(f->notice, "");
    const aftp_pathmem_entry *e =
        aftp_pathmem_lookup(&f->back, "k1/10.0.0.1/10.0.0.2:4433", T0 + 10);
    assert_non_null(e);
    assert_int_equal(e->rate_bps, 940000000);
    assert_int_equal(e->min_rtt_ns, 151000000);
    assert_int_equal(e->saved_s, T0 + 2);
    e = aftp_pathmem_lookup(&f->back, "k2/10.0.0.1/10.0.0.3:4433", T0 + 10);
    assert_non_null(e);
    assert_int_equal(e->rate_bps, 95000000);
    assert_null(aftp_pathmem_lookup(&f->back, "k3/10.0.0.1/10.0.0.3:4433", T0 + 10));
}

/* The 257th path takes the oldest one's place. */
static void test_bounded(void **state)
{
    fixture *f = *state;
    char key[64];
    for (unsigned i = 0; i <= AFTP_PATHMEM_MAX_ENTRIES; i++) {
        snprintf(key, sizeof key, "-/10.0.0.1/10.0.%u.%u:1", i / 256, i % 256);
        aftp_pathmem_update(&f->pm, key, 1000 + i, 1000, T0 + i);
    }
    assert_int_equal(f->pm.count, AFTP_PATHMEM_MAX_ENTRIES);
    uint64_t now = T0 + AFTP_PATHMEM_MAX_ENTRIES;
    assert_null(aftp_pathmem_lookup(&f->pm, "-/10.0.0.1/10.0.0.0:1", now));
    assert_non_null(aftp_pathmem_lookup(&f->pm, "-/10.0.0.1/10.0.0.1:1", now));
    assert_non_null(aftp_pathmem_lookup(&f->pm, "-/10.0.0.1/10.0.1.0:1", now));
    char why[256];
    assert_int_equal(aftp_pathmem_save(&f->pm, f->path, now, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_pathmem_load(&f->back, f->path, f->notice, sizeof f->notice), AFTP_OK);
    assert_int_equal(f->back.count, AFTP_PATHMEM_MAX_ENTRIES);
}

/* Used for an hour after it was saved, never after, nor when it comes
 * from the future; a save leaves expired entries out. */
static void test_lifetime(void **state)
{
    fixture *f = *state;
    const char *k = "-/10.0.0.1/10.0.0.2:1";
    aftp_pathmem_update(&f->pm, k, 1000, 1000, T0);
    aftp_pathmem_update(&f->pm, "-/10.0.0.1/10.0.0.3:1", 1000, 1000, T0 + 1000);
    assert_non_null(aftp_pathmem_lookup(&f->pm, k, T0 + AFTP_PATHMEM_LIFETIME_S));
    assert_null(aftp_pathmem_lookup(&f->pm, k, T0 + AFTP_PATHMEM_LIFETIME_S + 1));
    assert_non_null(aftp_pathmem_lookup(&f->pm, k, T0 - AFTP_PATHMEM_FUTURE_S));
    assert_null(aftp_pathmem_lookup(&f->pm, k, T0 - AFTP_PATHMEM_FUTURE_S - 1));
    char why[256];
    assert_int_equal(
        aftp_pathmem_save(&f->pm, f->path, T0 + AFTP_PATHMEM_LIFETIME_S + 1, why, sizeof why),
        AFTP_OK);
    assert_int_equal(aftp_pathmem_load(&f->back, f->path, f->notice, sizeof f->notice), AFTP_OK);
    assert_int_equal(f->back.count, 1);
    assert_null(aftp_pathmem_lookup(&f->back, k, T0));
}

/* Anything but the format is ignored as a whole, with a notice naming the
 * file and the line. */
static void test_malformed_ignored(void **state)
{
    fixture *f = *state;
    static const char *const bad[] = {
        "",                                                    /* empty */
        "aftp-path-memory 2\n",                                /* another version */
        "aftp-path-memory 1\n-/a/b:1 1000 1000 5\n-/a/c:1 1000 1000\n", /* field missing */
        "aftp-path-memory 1\n-/a/b:1 1000 1000 5 6\n",         /* one too many */
        "aftp-path-memory 1\n-/a/b:1 0 1000 5\n",              /* no rate */
        "aftp-path-memory 1\n-/a/b:1 -1000 1000 5\n",          /* negative */
        "aftp-path-memory 1\n-/a/b:1 99999999999999999999999 1 5\n", /* overflow */
        "aftp-path-memory 1\n-/a/b:1 1000 1000 5 \n",          /* trailing blank */
        "aftp-path-memory 1\n-/a/b\x01:1 1000 1000 5\n",       /* control character */
    };
    char dir[160];
    snprintf(dir, sizeof dir, "%s/cache", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(dir, sizeof dir, "%s/cache/aftp", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(f->path, bad[i]);
        f->pm.count = 7;
        assert_int_equal(aftp_pathmem_load(&f->pm, f->path, f->notice, sizeof f->notice),
                         AFTP_OK);
        assert_int_equal(f->pm.count, 0);
        assert_non_null(strstr(f->notice, f->path));
        assert_non_null(strstr(f->notice, "not in its format"));
    }
    /* the line at fault */
    write_file(f->path, bad[2]);
    aftp_pathmem_load(&f->pm, f->path, f->notice, sizeof f->notice);
    assert_non_null(strstr(f->notice, "line 3"));
    /* too large to be ours */
    FILE *fp = fopen(f->path, "w");
    fprintf(fp, "%s\n", AFTP_PATHMEM_HEADER);
    for (size_t n = 0; n < AFTP_PATHMEM_MAX_FILE; n += 16) /* twice the bound */
        fprintf(fp, "-/10.0.0.1/10.0.0.2:1 1 1 1 x\n");
    fclose(fp);
    aftp_pathmem_load(&f->pm, f->path, f->notice, sizeof f->notice);
    assert_int_equal(f->pm.count, 0);
    assert_non_null(strstr(f->notice, "cannot be read"));
    /* one entry too many */
    fp = fopen(f->path, "w");
    fprintf(fp, "%s\n", AFTP_PATHMEM_HEADER);
    for (unsigned n = 0; n <= AFTP_PATHMEM_MAX_ENTRIES; n++)
        fprintf(fp, "-/10.0.0.1/10.0.0.2:%u 1 1 1\n", n);
    fclose(fp);
    aftp_pathmem_load(&f->pm, f->path, f->notice, sizeof f->notice);
    assert_int_equal(f->pm.count, 0);
    assert_non_null(strstr(f->notice, "not in its format"));
}

/* A save writes a new file and renames it over the old one: a reader
 * holding the old one (here a second link to it) sees it whole and
 * unchanged. A save whose rename cannot happen (a directory stands at the
 * path) fails with the reason, and leaves nothing behind. */
static void test_save_is_atomic(void **state)
{
    fixture *f = *state;
    aftp_pathmem_update(&f->pm, "-/10.0.0.1/10.0.0.2:1", 1000, 1000, T0);
    char why[256] = "";
    assert_int_equal(aftp_pathmem_save(&f->pm, f->path, T0, why, sizeof why), AFTP_OK);
    char held[192];
    snprintf(held, sizeof held, "%s/held", f->dir);
    assert_int_equal(link(f->path, held), 0);
    aftp_pathmem_update(&f->pm, "-/10.0.0.1/10.0.0.2:1", 2000, 1000, T0 + 1);
    assert_int_equal(aftp_pathmem_save(&f->pm, f->path, T0 + 1, why, sizeof why), AFTP_OK);
    assert_int_equal(aftp_pathmem_load(&f->back, held, f->notice, sizeof f->notice), AFTP_OK);
    assert_int_equal(f->back.entries[0].rate_bps, 1000);
    assert_int_equal(aftp_pathmem_load(&f->back, f->path, f->notice, sizeof f->notice), AFTP_OK);
    assert_int_equal(f->back.entries[0].rate_bps, 2000);
    /* the old file is whole while a new one is written beside it: replace
     * it by a directory holding a file, which rename cannot replace */
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(mkdir(f->path, 0700), 0);
    char inner[192];
    snprintf(inner, sizeof inner, "%s/x", f->path);
    write_file(inner, "keep");
    assert_int_equal(aftp_pathmem_save(&f->pm, f->path, T0, why, sizeof why), AFTP_ERR_IO);
    assert_non_null(strstr(why, f->path));
    assert_int_equal(files_beside(f), 1); /* the directory; no temporary file */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_names_server_and_addresses),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifetime, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_is_atomic, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
