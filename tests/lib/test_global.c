/* aftp_global_init (include/aftp/aftp_global.h): aftp touches process-wide
 * state (OpenSSL's allocator, the SIGBUS disposition) only when its
 * embedder asks, and everything works either way.
 *
 * Each mode runs in a fresh process, as the state is the process's:
 *   none    no init: sealing, opening and a guarded source read install
 *           nothing;
 *   zero    aftp_global_init(0): the same;
 *   guards  init with both flags: both installed, a truncated source
 *           fails its read instead of killing the process, cleanup gives
 *           SIGBUS back;
 *   late    OpenSSL used before the init: the init says the key guard
 *           could not be installed, installs the source guard, aftp works.
 * cmocka puts its own SIGBUS handler in place around every test, so each
 * test compares the disposition with the one it found at its start. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "aftp/aftp_global.h"
#include "aftp_source.h"
#include "common/aftp_aead.h"
#include "common/aftp_keymem.h"
#include "crypto_fixtures.h"
#include "io_testutil.h"

enum { FILE_LEN = 3 * 4096 };

/* OpenSSL's allocator and the SIGBUS disposition: what aftp may change. */
typedef struct process_state {
    CRYPTO_malloc_fn malloc_fn;
    CRYPTO_realloc_fn realloc_fn;
    CRYPTO_free_fn free_fn;
    struct sigaction sigbus;
} process_state;

static process_state snapshot(void)
{
    process_state s;
    memset(&s, 0, sizeof s);
    CRYPTO_get_mem_functions(&s.malloc_fn, &s.realloc_fn, &s.free_fn);
    assert_int_equal(sigaction(SIGBUS, NULL, &s.sigbus), 0);
    return s;
}

static int same_allocator(const process_state *a, const process_state *b)
{
    return a->malloc_fn == b->malloc_fn && a->realloc_fn == b->realloc_fn &&
           a->free_fn == b->free_fn;
}

static int same_sigbus(const process_state *a, const process_state *b)
{
    return a->sigbus.sa_sigaction == b->sigbus.sa_sigaction &&
           a->sigbus.sa_flags == b->sigbus.sa_flags;
}

/* Keys a context with a fresh key (returned in key), seals and opens one
 * datagram through it. */
static aftp_aead *sealed_round_trip(uint8_t key[AFTP_AEAD_KEY_LEN])
{
    enum { BODY = 64 };
    uint8_t iv[AFTP_AEAD_IV_LEN], dg[AFTP_WIRE_HEADER_LEN + BODY + AFTP_AEAD_TAG_LEN] = {0};
    size_t len;
    aftp_aead *a = NULL;
    randombytes_buf(key, AFTP_AEAD_KEY_LEN);
    randombytes_buf(iv, sizeof iv);
    assert_int_equal(aftp_aead_new(&a, aftp_aead_preferred(), key, iv, 0), AFTP_OK);
    fixture_header(AFTP_WIRE_DATA, 0x01020304, 9, dg);
    memset(dg + AFTP_WIRE_HEADER_LEN, 0x5a, BODY);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, AFTP_WIRE_HEADER_LEN + BODY,
                                             AFTP_AEAD_AD_HEADER, sizeof dg, &len), AFTP_OK);
    assert_int_equal(aftp_aead_open_datagram(a, dg, len, AFTP_AEAD_AD_HEADER, &len), AFTP_OK);
    assert_int_equal(dg[AFTP_WIRE_HEADER_LEN + BODY - 1], 0x5a);
    return a;
}

/* A FILE_LEN source in a scratch directory (its path in *dir), opened. */
static void open_source(aftp_source *src, char **dir)
{
    int dir_fd;
    char path[512];
    uint8_t data[FILE_LEN];
    aftp_file_info info;
    *dir = io_test_mkdtemp(&dir_fd);
    io_test_pattern(data, sizeof data, 3);
    int fd = openat(dir_fd, "src.bin", O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, data, sizeof data), (ssize_t)sizeof data);
    close(fd);
    close(dir_fd);
    snprintf(path, sizeof path, "%s/src.bin", *dir);
    assert_int_equal(aftp_source_open(src, path, 1, &info), AFTP_OK);
}

static void close_source(aftp_source *src, char *dir)
{
    aftp_source_fini(src);
    io_test_rmtree(dir);
    free(dir);
}

static void test_nothing_installed(void **state)
{
    (void)state;
    process_state before = snapshot();
    uint8_t key[AFTP_AEAD_KEY_LEN], byte = 0;
    aftp_aead_del(sealed_round_trip(key));
    aftp_source src;
    char *dir;
    const uint8_t *view;
    open_source(&src, &dir);
    assert_int_equal(aftp_source_view(&src, 1, 0, FILE_LEN, &view), AFTP_OK);
    assert_int_equal(io_test_guarded_read(&src.guard, view + FILE_LEN - 1, &byte), 0);
    close_source(&src, dir);
    process_state after = snapshot();
    assert_false(aftp_keymem_guarded());
    assert_true(same_allocator(&before, &after));
    assert_true(same_sigbus(&before, &after));
}

static void test_guards_installed(void **state)
{
    (void)state;
    process_state found = snapshot(); /* cmocka's SIGBUS handler */
    /* main asked for the keys; this adds the source guard. */
    assert_int_equal(aftp_global_init(AFTP_INIT_GUARD_SOURCE), AFTP_OK);
    assert_int_equal(aftp_global_init(AFTP_INIT_GUARD_KEYS | AFTP_INIT_GUARD_SOURCE), AFTP_OK);
    assert_int_equal(aftp_global_init(0x80), AFTP_ERR_INVALID_ARGUMENT);
    process_state installed = snapshot();
    assert_false(same_sigbus(&found, &installed));
    assert_true(installed.sigbus.sa_flags & SA_SIGINFO);
    assert_true(aftp_keymem_guarded());
    assert_ptr_not_equal(installed.malloc_fn, CRYPTO_malloc);

    uint8_t key[AFTP_AEAD_KEY_LEN], byte = 0;
    aftp_aead *a = sealed_round_trip(key);
    assert_true(aftp_keymem_holds(key, sizeof key)); /* the schedule is guarded */
    aftp_aead_del(a);

    /* A source truncated under its mapping: the read fails, the process lives. */
    aftp_source src;
    char *dir;
    const uint8_t *view;
    open_source(&src, &dir);
    assert_int_equal(aftp_source_view(&src, 1, 0, FILE_LEN, &view), AFTP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/src.bin", dir);
    assert_int_equal(truncate(path, 4096), 0);
    assert_int_equal(io_test_guarded_read(&src.guard, view + FILE_LEN - 1, &byte), 1);
    assert_int_equal(aftp_source_view(&src, 1, 0, 100, &view), AFTP_ERR_SOURCE_CHANGED);
    close_source(&src, dir);

    aftp_global_cleanup();
    process_state cleaned = snapshot();
    assert_true(same_sigbus(&found, &cleaned));
    aftp_global_cleanup(); /* twice: nothing left to undo */
    assert_true(aftp_keymem_guarded()); /* OpenSSL keeps the allocator */
}

/* OpenSSL allocated before the init: no key guard, the rest works. */
static void test_late_init(void **state)
{
    (void)state;
    process_state found = snapshot();
    assert_int_equal(aftp_global_init(AFTP_INIT_GUARD_KEYS | AFTP_INIT_GUARD_SOURCE),
                     AFTP_ERR_INVALID_STATE);
    process_state after = snapshot();
    assert_false(aftp_keymem_guarded());
    assert_true(same_allocator(&found, &after));
    assert_false(same_sigbus(&found, &after));
    uint8_t key[AFTP_AEAD_KEY_LEN];
    aftp_aead_del(sealed_round_trip(key));
    aftp_global_cleanup();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "none";
    const struct CMUnitTest nothing[] = {cmocka_unit_test(test_nothing_installed)};
    const struct CMUnitTest guards[] = {cmocka_unit_test(test_guards_installed)};
    const struct CMUnitTest late[] = {cmocka_unit_test(test_late_init)};
    if (strcmp(mode, "none") == 0)
        return cmocka_run_group_tests_name("global_none", nothing, NULL, NULL);
    if (strcmp(mode, "zero") == 0) {
        if (aftp_global_init(0) != AFTP_OK)
            return 1;
        return cmocka_run_group_tests_name("global_zero", nothing, NULL, NULL);
    }
    if (strcmp(mode, "guards") == 0) {
        if (aftp_global_init(AFTP_INIT_GUARD_KEYS) != AFTP_OK) /* before OpenSSL's first use */
            return 1;
        return cmocka_run_group_tests_name("global_guards", guards, NULL, NULL);
    }
    if (strcmp(mode, "late") == 0) {
        EVP_CIPHER_free(EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL));
        return cmocka_run_group_tests_name("global_late", late, NULL, NULL);
    }
    fprintf(stderr, "usage: test_global none|zero|guards|late\n");
    return 2;
}
