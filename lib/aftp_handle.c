/* A public handle and its guarded secrets (aftp_handle.h). */
#include "aftp_handle.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "aftp/aftp_error.h"

int aftp_handle_alloc(size_t size, void **handle, size_t secrets_size, void **secrets)
{
    *handle = NULL;
    *secrets = NULL;
    if (sodium_init() < 0)
        return AFTP_ERR_INTERNAL;
    void *h = calloc(1, size);
    void *s = sodium_malloc(secrets_size);
    if (h == NULL || s == NULL) {
        free(h);
        sodium_free(s);
        return AFTP_ERR_NO_MEMORY;
    }
    memset(s, 0, secrets_size);
    *handle = h;
    *secrets = s;
    return AFTP_OK;
}
