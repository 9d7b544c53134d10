/* The library's own version, for programs that run with another libaftp
 * than the one whose headers they were compiled with. */
#include "aftp/aftp_version.h"

unsigned aftp_version(void)
{
    return AFTP_VERSION_NUM;
}

const char *aftp_version_string(void)
{
    return AFTP_VERSION_STRING;
}
