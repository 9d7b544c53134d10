/* A program outside aftp's tree, built against an installed libaftp: it
 * prints the library's version and one error text, and fails when the
 * library it runs with disagrees with the headers it was compiled with or
 * does not know the error code. In its own file so that the static case can
 * put it, with all of libaftp.a, into a shared object (a plugin that embeds
 * aftp). */
#include <stdio.h>
#include <string.h>

#include <aftp/aftp.h>

#include "report.h"

int consumer_report(void)
{
    const char *cancelled = aftp_strerror(AFTP_ERR_CANCELLED);
    /* A code of the usage band that no release defines gets the band's
     * generic text: a real table gives AFTP_ERR_CANCELLED its own. */
    const char *unknown = aftp_strerror(-199);

    printf("version %s\n", aftp_version_string());
    printf("cancelled %s\n", cancelled);
    if (strcmp(aftp_version_string(), AFTP_VERSION_STRING) != 0 ||
        aftp_version() != AFTP_VERSION_NUM) {
        fprintf(stderr, "consumer: library %s (0x%06x), headers %s (0x%06x)\n",
                aftp_version_string(), aftp_version(), AFTP_VERSION_STRING,
                (unsigned)AFTP_VERSION_NUM);
        return 1;
    }
    /* The number encodes the string: (major << 16) | (minor << 8) | patch. */
    unsigned v = aftp_version();
    char decoded[32];
    snprintf(decoded, sizeof decoded, "%u.%u.%u", v >> 16, (v >> 8) & 0xffu, v & 0xffu);
    if (strcmp(decoded, aftp_version_string()) != 0) {
        fprintf(stderr, "consumer: aftp_version() 0x%06x decodes to %s, the string says %s\n",
                v, decoded, aftp_version_string());
        return 1;
    }
    if (cancelled[0] == '\0' || strcmp(cancelled, unknown) == 0) {
        fprintf(stderr, "consumer: aftp_strerror(AFTP_ERR_CANCELLED) is '%s', "
                        "as for an unknown code\n", cancelled);
        return 1;
    }
    return 0;
}
