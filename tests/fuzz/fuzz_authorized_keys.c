/*
 * Fuzz harness for the authorized-keys parser with its per-key options
 * (io/keys/aftp_keyfile.h, spec Appendix B.4): the input is the file's
 * text, as an operator (or whoever can write the file) gives it.
 *
 * Properties:
 *  - a refused text leaves no list (no keys, count 0) and a reason that
 *    names the file: "fuzz:LINE: ...", or "fuzz:L1 and fuzz:L2 ..." for a
 *    key listed twice with different options; an accepted one has no
 *    reason to give;
 *  - an accepted list holds at most AFTP_KEYFILE_MAX_KEYS keys, each with
 *    its comment (a line's worth at most) and options within their bounds:
 *    access one of read, write or both; a rate of 1 bit/s to 1 Tbit/s or
 *    none; a root not empty; 1 to AFTP_KEYFILE_MAX_FROM prefixes with
 *    their text, or none; each prefix's bits beyond its length zero, its
 *    length within its family, and its own network address inside it;
 *    the line a key came from within the text's lines, in order;
 *  - every key is found, and its options are those of its first line,
 *    equal to those of every other line that lists it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "aftp/aftp_error.h"
#include "aftp_keyfile.h"
#include "fuzz_harness.h"

/* The prefix's network address as a client address inside it. */
static void check_prefix(const aftp_addrmatch_prefix *p)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    FUZZ_CHECK(p->bits <= (p->v6 ? 128 : 32));
    for (unsigned bit = p->bits; bit < (p->v6 ? 128u : 32u); bit++)
        FUZZ_CHECK((p->addr[bit / 8] & (0x80u >> (bit % 8))) == 0);
    if (p->v6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
        v6->sin6_family = AF_INET6;
        memcpy(&v6->sin6_addr, p->addr, 16);
    } else {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
        v4->sin_family = AF_INET;
        memcpy(&v4->sin_addr, p->addr, 4);
    }
    FUZZ_CHECK(aftp_addrmatch_contains(p, (const struct sockaddr *)&ss));
}

static void check_options(const aftp_keyfile_options *o, unsigned lines)
{
    FUZZ_CHECK(o->access >= 1 && o->access <= AFTP_KEYFILE_ACCESS_ALL);
    FUZZ_CHECK(o->rate_bps <= UINT64_C(1000000000000));
    FUZZ_CHECK(o->root == NULL || o->root[0] != '\0');
    FUZZ_CHECK(o->from_count <= AFTP_KEYFILE_MAX_FROM);
    FUZZ_CHECK((o->from_count == 0) == (o->from == NULL));
    FUZZ_CHECK((o->from_count == 0) == (o->from_text == NULL));
    for (size_t i = 0; i < o->from_count; i++)
        check_prefix(&o->from[i]);
    FUZZ_CHECK(o->line >= 1 && o->line <= lines);
}

static int same_options(const aftp_keyfile_options *a, const aftp_keyfile_options *b)
{
    return ((a->root == NULL && b->root == NULL) ||
            (a->root != NULL && b->root != NULL && strcmp(a->root, b->root) == 0)) &&
           a->rate_bps == b->rate_bps && a->access == b->access &&
           a->from_count == b->from_count &&
           (a->from_count == 0 || memcmp(a->from, b->from, a->from_count * sizeof *a->from) == 0);
}

static void check_list(const aftp_keyfile_list *list, const uint8_t *data, size_t size)
{
    unsigned lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    FUZZ_CHECK(list->count <= AFTP_KEYFILE_MAX_KEYS);
    for (size_t i = 0; i < list->count; i++) {
        const aftp_keyfile_options *o = &list->options[i];
        check_options(o, lines);
        FUZZ_CHECK(i == 0 || o->line > list->options[i - 1].line);
        FUZZ_CHECK(strlen(list->comments[i]) <= AFTP_KEYFILE_MAX_LINE);
        const aftp_keyfile_options *first = aftp_keyfile_list_options(list, list->keys[i]);
        FUZZ_CHECK(first != NULL && first->line <= o->line && same_options(first, o));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    aftp_keyfile_list list;
    char err[512] = "";
    int rc = aftp_keyfile_authorized_parse("fuzz", (const char *)data, size, &list, err,
                                           sizeof err);
    if (rc != AFTP_OK) {
        FUZZ_CHECK(list.keys == NULL && list.count == 0 && list.options == NULL);
        FUZZ_CHECK(strncmp(err, "fuzz:", 5) == 0);
        return 0;
    }
    FUZZ_CHECK(err[0] == '\0');
    check_list(&list, data, size);
    aftp_keyfile_list_free(&list);
    return 0;
}
