/* Guarded memory for OpenSSL's key schedules (common/aftp_keymem.h): the
 * expanded key of every protected cipher is found in guarded blocks while
 * its context lives and nowhere among them after; OpenSSL's other
 * allocations stay plain; a guarded block stays guarded through realloc and
 * can be freed by another thread.
 *
 * The allocator is the embedder's to allow: main asks for it with
 * aftp_global_init(AFTP_INIT_GUARD_KEYS) before anything uses OpenSSL.
 * Run with the argument "late", the process uses OpenSSL before it asks:
 * the init must say it could not, and aftp must say its key schedules are
 * not guarded and still work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>

#include "aftp/aftp_global.h"
#include "common/aftp_aead.h"
#include "common/aftp_keymem.h"
#include "crypto_fixtures.h"

static const uint8_t protected_ciphers[] = {AFTP_WIRE_CIPHER_AES256GCM,
                                            AFTP_WIRE_CIPHER_CHACHA20POLY1305};

/* Seals and opens one datagram: the context works whatever its memory. */
static void assert_round_trip(const aftp_aead *a)
{
    enum { BODY = 64 };
    uint8_t dg[AFTP_WIRE_HEADER_LEN + BODY + AFTP_AEAD_TAG_LEN] = {0};
    size_t len;
    fixture_header(AFTP_WIRE_DATA, 0x01020304, 9, dg);
    memset(dg + AFTP_WIRE_HEADER_LEN, 0x5a, BODY);
    assert_int_equal(aftp_aead_seal_datagram(a, dg, AFTP_WIRE_HEADER_LEN + BODY,
                                             AFTP_AEAD_AD_HEADER, sizeof dg, &len), AFTP_OK);
    assert_int_equal(aftp_aead_open_datagram(a, dg, len, AFTP_AEAD_AD_HEADER, &len), AFTP_OK);
    for (size_t i = 0; i < BODY; i++)
        assert_int_equal(dg[AFTP_WIRE_HEADER_LEN + i], 0x5a);
}

static aftp_aead *keyed(uint8_t cipher, uint8_t key[AFTP_AEAD_KEY_LEN])
{
    uint8_t iv[AFTP_AEAD_IV_LEN];
    randombytes_buf(key, AFTP_AEAD_KEY_LEN);
    randombytes_buf(iv, sizeof iv);
    aftp_aead *a = NULL;
    assert_int_equal(aftp_aead_new(&a, cipher, key, iv, 0), AFTP_OK);
    return a;
}

/* Both AES-256's and ChaCha20's schedules begin with the key's own bytes,
 * so finding the key in guarded memory finds the schedule. */
static void test_key_schedule_is_guarded(void **state)
{
    (void)state;
    assert_true(aftp_keymem_guarded());
    for (size_t c = 0; c < sizeof protected_ciphers; c++) {
        if (!aftp_aead_available(protected_ciphers[c]))
            continue; /* AES without AES-NI */
        size_t before = aftp_keymem_blocks();
        uint8_t key[AFTP_AEAD_KEY_LEN];
        aftp_aead *a = keyed(protected_ciphers[c], key);
        assert_true(aftp_keymem_blocks() > before);
        assert_true(aftp_keymem_holds(key, sizeof key));
        assert_round_trip(a);
        aftp_aead_del(a);
        assert_int_equal(aftp_keymem_blocks(), before);
        assert_false(aftp_keymem_holds(key, sizeof key));
    }
}

/* Many generations at once, as a daemon with sessions keeps them: every
 * one guarded, each freed alone. */
static void test_many_contexts(void **state)
{
    (void)state;
    enum { N = 40 };
    aftp_aead *a[N];
    uint8_t keys[N][AFTP_AEAD_KEY_LEN];
    size_t before = aftp_keymem_blocks();
    for (size_t i = 0; i < N; i++)
        a[i] = keyed(AFTP_WIRE_CIPHER_CHACHA20POLY1305, keys[i]);
    for (size_t i = 0; i < N; i += 2)
        aftp_aead_del(a[i]);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(aftp_keymem_holds(keys[i], AFTP_AEAD_KEY_LEN), i % 2);
    for (size_t i = 1; i < N; i += 2) {
        assert_round_trip(a[i]);
        aftp_aead_del(a[i]);
    }
    assert_int_equal(aftp_keymem_blocks(), before);
}

static void test_other_allocations_stay_plain(void **state)
{
    (void)state;
    size_t before = aftp_keymem_blocks();
    char *plain = OPENSSL_malloc(100);
    assert_non_null(plain);
    assert_int_equal(aftp_keymem_blocks(), before);
    plain = OPENSSL_realloc(plain, 5000);
    assert_non_null(plain);
    assert_int_equal(aftp_keymem_blocks(), before);
    OPENSSL_free(plain);
    OPENSSL_free(NULL);
    assert_int_equal(aftp_keymem_blocks(), before);
}

static void *free_elsewhere(void *block)
{
    OPENSSL_clear_free(block, 1000);
    return NULL;
}

/* Grown or shrunk, a guarded block keeps its bytes and stays guarded,
 * though the resize happens outside begin/end; another thread frees it. */
static void test_guarded_block_stays_guarded(void **state)
{
    (void)state;
    static const char marker[] = "guarded block marker";
    size_t before = aftp_keymem_blocks();
    aftp_keymem_begin();
    char *block = OPENSSL_zalloc(10);
    aftp_keymem_end();
    assert_non_null(block);
    assert_int_equal(aftp_keymem_blocks(), before + 1);
    memcpy(block, marker, 10);
    block = OPENSSL_realloc(block, 1000);
    assert_non_null(block);
    memcpy(block + 10, marker + 10, sizeof marker - 10);
    assert_int_equal(aftp_keymem_blocks(), before + 1);
    assert_true(aftp_keymem_holds(marker, sizeof marker));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, free_elsewhere, block), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(aftp_keymem_blocks(), before);
    assert_false(aftp_keymem_holds(marker, sizeof marker));
}

/* realloc to 0 bytes frees a guarded block, as realloc does. */
static void test_guarded_block_realloc_to_zero(void **state)
{
    (void)state;
    size_t before = aftp_keymem_blocks();
    aftp_keymem_begin();
    char *block = OPENSSL_malloc(100);
    aftp_keymem_end();
    assert_non_null(block);
    assert_int_equal(aftp_keymem_blocks(), before + 1);
    assert_null(OPENSSL_realloc(block, 0));
    assert_int_equal(aftp_keymem_blocks(), before);
}

/* "late": OpenSSL allocated before aftp's first call. */
static void test_openssl_used_first(void **state)
{
    (void)state;
    assert_false(aftp_keymem_guarded());
    uint8_t key[AFTP_AEAD_KEY_LEN];
    aftp_aead *a = keyed(aftp_aead_preferred(), key);
    assert_int_equal(aftp_keymem_blocks(), 0);
    assert_round_trip(a);
    aftp_aead_del(a);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "late") == 0) {
        EVP_CIPHER_free(EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL));
        if (aftp_global_init(AFTP_INIT_GUARD_KEYS) != AFTP_ERR_INVALID_STATE)
            return 1;
        const struct CMUnitTest late[] = {cmocka_unit_test(test_openssl_used_first)};
        return cmocka_run_group_tests_name("keymem_late", late, NULL, NULL);
    }
    if (aftp_global_init(AFTP_INIT_GUARD_KEYS) != AFTP_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_schedule_is_guarded),
        cmocka_unit_test(test_many_contexts),
        cmocka_unit_test(test_other_allocations_stay_plain),
        cmocka_unit_test(test_guarded_block_stays_guarded),
        cmocka_unit_test(test_guarded_block_realloc_to_zero),
    };
    return cmocka_run_group_tests_name("keymem", tests, NULL, NULL);
}
