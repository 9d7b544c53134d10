/* Error texts and classification (include/aftp/aftp_error.h). */
#include "aftp/aftp_error.h"

#include <stddef.h>

/* Every code, its stable name and its text: the one list both functions read. */
static const struct {
    int code;
    const char *name;
    const char *text;
} errors[] = {
#define ERROR(code, text) {code, #code, text}
    ERROR(AFTP_OK, "success"),
    ERROR(AFTP_ERR_INVALID_ARGUMENT, "invalid argument"),
    ERROR(AFTP_ERR_BUFFER_TOO_SMALL, "buffer too small"),
    ERROR(AFTP_ERR_INVALID_STATE, "operation not valid in the current state"),
    ERROR(AFTP_ERR_FILE_EXISTS, "destination file exists"),
    ERROR(AFTP_ERR_NOT_FOUND, "no such file or directory"),
    ERROR(AFTP_ERR_PATH_REJECTED, "path rejected (absolute, '..', control characters or too long)"),
    ERROR(AFTP_ERR_CANCELLED, "transfer cancelled"),
    ERROR(AFTP_ERR_BAD_KEY, "key or key file malformed"),
    ERROR(AFTP_ERR_TRUNCATED, "packet truncated"),
    ERROR(AFTP_ERR_MALFORMED, "packet malformed"),
    ERROR(AFTP_ERR_UNKNOWN_TYPE, "unknown packet type"),
    ERROR(AFTP_ERR_VERSION, "unsupported protocol version"),
    ERROR(AFTP_ERR_LIMIT, "protocol limit exceeded"),
    ERROR(AFTP_ERR_PEER_CLOSED, "peer closed the session"),
    ERROR(AFTP_ERR_IDLE_TIMEOUT, "peer not responding (idle timeout)"),
    ERROR(AFTP_ERR_DIGEST_MISMATCH, "file digest mismatch"),
    ERROR(AFTP_ERR_PEER_REFUSED, "peer refused the file"),
    ERROR(AFTP_ERR_AUTH, "authentication failed"),
    ERROR(AFTP_ERR_REPLAY, "replayed or duplicate packet"),
    ERROR(AFTP_ERR_UNKNOWN_PEER, "peer key not authorized or not pinned"),
    ERROR(AFTP_ERR_IO, "I/O error"),
    ERROR(AFTP_ERR_NO_SPACE, "no space left on device"),
    ERROR(AFTP_ERR_NO_MEMORY, "out of memory"),
    ERROR(AFTP_ERR_PERMISSION, "permission denied"),
    ERROR(AFTP_ERR_NETWORK, "network error"),
    ERROR(AFTP_ERR_SOURCE_CHANGED, "source file changed during transfer"),
    ERROR(AFTP_ERR_INTERNAL, "internal error"),
#undef ERROR
};

static int error_index(int err)
{
    for (int i = 0; i < (int)(sizeof errors / sizeof errors[0]); i++)
        if (errors[i].code == err)
            return i;
    return -1;
}

const char *aftp_strerror(int err)
{
    int i = error_index(err);
    if (i >= 0)
        return errors[i].text;
    if (err <= -100 && err > -200) return "usage error";
    if (err <= -200 && err > -300) return "protocol error";
    if (err <= -300 && err > -400) return "I/O or system error";
    return "unknown error";
}

const char *aftp_error_name(int err)
{
    int i = error_index(err);
    return i >= 0 ? errors[i].name : NULL;
}

int aftp_err_is_retryable(int err)
{
    switch (err) {
    case AFTP_ERR_IDLE_TIMEOUT:
    case AFTP_ERR_PEER_CLOSED:
    case AFTP_ERR_NETWORK:
    case AFTP_ERR_NO_MEMORY:
    case AFTP_ERR_IO:
        return 1;
    default:
        return 0;
    }
}
