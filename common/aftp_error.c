/* Error texts and classification (include/aftp/aftp_error.h). */
#include "aftp/aftp_error.h"

const char *aftp_strerror(int err)
{
    switch (err) {
    case AFTP_OK: return "success";
    case AFTP_ERR_INVALID_ARGUMENT: return "invalid argument";
    case AFTP_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case AFTP_ERR_INVALID_STATE: return "operation not valid in the current state";
    case AFTP_ERR_FILE_EXISTS: return "destination file exists";
    case AFTP_ERR_NOT_FOUND: return "no such file or directory";
    case AFTP_ERR_PATH_REJECTED: return "path rejected (absolute, '..', control characters or too long)";
    case AFTP_ERR_CANCELLED: return "transfer cancelled";
    case AFTP_ERR_BAD_KEY: return "key or key file malformed";
    case AFTP_ERR_TRUNCATED: return "packet truncated";
    case AFTP_ERR_MALFORMED: return "packet malformed";
    case AFTP_ERR_UNKNOWN_TYPE: return "unknown packet type";
    case AFTP_ERR_VERSION: return "unsupported protocol version";
    case AFTP_ERR_LIMIT: return "protocol limit exceeded";
    case AFTP_ERR_PEER_CLOSED: return "peer closed the session";
    case AFTP_ERR_IDLE_TIMEOUT: return "peer not responding (idle timeout)";
    case AFTP_ERR_DIGEST_MISMATCH: return "file digest mismatch";
    case AFTP_ERR_PEER_REFUSED: return "peer refused the file";
    case AFTP_ERR_AUTH: return "authentication failed";
    case AFTP_ERR_REPLAY: return "replayed or duplicate packet";
    case AFTP_ERR_UNKNOWN_PEER: return "peer key not authorized or not pinned";
    case AFTP_ERR_IO: return "I/O error";
    case AFTP_ERR_NO_SPACE: return "no space left on device";
    case AFTP_ERR_NO_MEMORY: return "out of memory";
    case AFTP_ERR_PERMISSION: return "permission denied";
    case AFTP_ERR_NETWORK: return "network error";
    case AFTP_ERR_SOURCE_CHANGED: return "source file changed during transfer";
    case AFTP_ERR_INTERNAL: return "internal error";
    }
    if (err <= -100 && err > -200) return "usage error";
    if (err <= -200 && err > -300) return "protocol error";
    if (err <= -300 && err > -400) return "I/O or system error";
    return "unknown error";
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
