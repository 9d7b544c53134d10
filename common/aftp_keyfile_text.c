/* Key text forms and the authorized-keys list (aftp_keyfile_text.h). */
#include "aftp_keyfile_text.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

const char *aftp_keyfile_line_problem(const char *line, size_t len, int *code)
{
    *code = AFTP_ERR_LIMIT;
    if (len > AFTP_KEYFILE_MAX_LINE)
        return "line too long";
    *code = AFTP_ERR_BAD_KEY;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return "control character";
    }
    return NULL;
}

void aftp_keyfile_base64(const uint8_t *key, char *b64)
{
    sodium_bin2base64(b64, AFTP_KEYFILE_B64_LEN + 1, key, AFTP_KEYFILE_KEY_LEN,
                      sodium_base64_VARIANT_ORIGINAL);
}

static int comment_ok(const char *comment)
{
    int code;
    return comment == NULL || aftp_keyfile_line_problem(comment, strlen(comment), &code) == NULL;
}

int aftp_keyfile_format_public(const uint8_t *key, const char *comment, char *out, size_t cap)
{
    char b64[AFTP_KEYFILE_B64_LEN + 1];
    if (!comment_ok(comment))
        return AFTP_ERR_INVALID_ARGUMENT;
    aftp_keyfile_base64(key, b64);
    int n = snprintf(out, cap, "%s %s%s%s\n", AFTP_KEYFILE_PUBLIC_TAG, b64,
                     comment != NULL && *comment ? " " : "", comment != NULL ? comment : "");
    if (n < 0 || (size_t)n >= cap)
        return AFTP_ERR_BUFFER_TOO_SMALL;
    return (size_t)n - 1 > AFTP_KEYFILE_MAX_LINE ? AFTP_ERR_LIMIT : AFTP_OK;
}

void aftp_keyfile_key_text(const uint8_t *key, char *out, size_t cap)
{
    if (aftp_keyfile_format_public(key, NULL, out, cap) != AFTP_OK) {
        snprintf(out, cap, "(unprintable key)");
        return;
    }
    out[strcspn(out, "\n")] = '\0';
}

void aftp_keyfile_fingerprint(const uint8_t *key, char *out, size_t cap)
{
    uint8_t hash[crypto_hash_sha256_BYTES];
    char b64[sodium_base64_ENCODED_LEN(crypto_hash_sha256_BYTES,
                                       sodium_base64_VARIANT_ORIGINAL_NO_PADDING)];
    crypto_hash_sha256(hash, key, AFTP_KEYFILE_KEY_LEN);
    sodium_bin2base64(b64, sizeof b64, hash, sizeof hash,
                      sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
    snprintf(out, cap, "SHA256:%s", b64);
}

int aftp_keyfile_list_contains(const aftp_keyfile_list *list, const uint8_t *key)
{
    int found = 0;
    for (size_t i = 0; i < list->count; i++)
        found |= sodium_memcmp(list->keys[i], key, AFTP_KEYFILE_KEY_LEN) == 0;
    return found;
}

/* The index of key's first line, or -1. */
static long list_index(const aftp_keyfile_list *list, const uint8_t *key)
{
    for (size_t i = 0; i < list->count; i++)
        if (sodium_memcmp(list->keys[i], key, AFTP_KEYFILE_KEY_LEN) == 0)
            return (long)i;
    return -1;
}

const char *aftp_keyfile_list_comment(const aftp_keyfile_list *list, const uint8_t *key)
{
    long i = list_index(list, key);
    if (i < 0)
        return NULL;
    return list->comments != NULL ? list->comments[i] : "";
}

const aftp_keyfile_options *aftp_keyfile_list_options(const aftp_keyfile_list *list,
                                                      const uint8_t *key)
{
    long i = list_index(list, key);
    return i >= 0 && list->options != NULL ? &list->options[i] : NULL;
}

void aftp_keyfile_list_free(aftp_keyfile_list *list)
{
    for (size_t i = 0; list->comments != NULL && i < list->count; i++)
        free(list->comments[i]);
    for (size_t i = 0; list->options != NULL && i < list->count; i++) {
        free(list->options[i].root);
        free(list->options[i].from);
        free(list->options[i].from_text);
    }
    free(list->options);
    free(list->comments);
    free(list->keys);
    *list = (aftp_keyfile_list){NULL, 0, NULL, NULL};
}
