#include "aftp_cli_base.h"

/* Every error a transfer can end with, and what the shell sees. Errors
 * not listed end with AFTP_EXIT_FAILED. Keep cli/EXIT_CODES.md in step. */
static const struct {
    int error;
    int exit_code;
} exit_table[] = {
    {AFTP_OK, AFTP_EXIT_OK},
    {AFTP_ERR_INVALID_ARGUMENT, AFTP_EXIT_USAGE},
    {AFTP_ERR_NOT_FOUND, AFTP_EXIT_LOCAL_FILE},
    {AFTP_ERR_IO, AFTP_EXIT_LOCAL_FILE},
    {AFTP_ERR_SOURCE_CHANGED, AFTP_EXIT_LOCAL_FILE},
    {AFTP_ERR_NETWORK, AFTP_EXIT_NETWORK},
    {AFTP_ERR_IDLE_TIMEOUT, AFTP_EXIT_NETWORK},
    {AFTP_ERR_FILE_EXISTS, AFTP_EXIT_REFUSED},
    {AFTP_ERR_PATH_REJECTED, AFTP_EXIT_REFUSED},
    {AFTP_ERR_PERMISSION, AFTP_EXIT_REFUSED},
    {AFTP_ERR_NO_SPACE, AFTP_EXIT_REFUSED},
    {AFTP_ERR_LIMIT, AFTP_EXIT_REFUSED},
    {AFTP_ERR_PEER_REFUSED, AFTP_EXIT_REFUSED},
    {AFTP_ERR_DIGEST_MISMATCH, AFTP_EXIT_VERIFY},
    {AFTP_ERR_CANCELLED, AFTP_EXIT_CANCELLED},
    {AFTP_ERR_AUTH, AFTP_EXIT_AUTH},
    {AFTP_ERR_UNKNOWN_PEER, AFTP_EXIT_AUTH},
    {AFTP_ERR_BAD_KEY, AFTP_EXIT_AUTH},
};

int aftp_cli_exit_code(int error)
{
    for (size_t i = 0; i < sizeof exit_table / sizeof exit_table[0]; i++)
        if (exit_table[i].error == error)
            return exit_table[i].exit_code;
    return AFTP_EXIT_FAILED;
}
