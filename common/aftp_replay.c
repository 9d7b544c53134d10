/* Anti-replay window (aftp_replay.h). */
#include "common/aftp_replay.h"

#include <string.h>

#include "aftp/aftp_error.h"

enum { WORD_BITS = 64, RING_WORDS = AFTP_REPLAY_BITS / WORD_BITS };

void aftp_replay_init(aftp_replay *w)
{
    memset(w, 0, sizeof *w);
}

static size_t word_index(uint64_t pn)
{
    return (size_t)((pn / WORD_BITS) % RING_WORDS);
}

static uint64_t bit_of(uint64_t pn)
{
    return UINT64_C(1) << (pn % WORD_BITS);
}

int aftp_replay_check(const aftp_replay *w, uint64_t pn)
{
    if (pn == UINT64_MAX)
        return AFTP_ERR_REPLAY;
    if (pn >= w->next)
        return AFTP_OK;
    if (w->next - pn > AFTP_REPLAY_WINDOW)
        return AFTP_ERR_REPLAY;
    return (w->words[word_index(pn)] & bit_of(pn)) ? AFTP_ERR_REPLAY : AFTP_OK;
}

/* pn becomes the highest: the ring words between the old highest's word
 * and pn's word now stand for newer numbers, so they start empty. A jump
 * of a whole ring or more empties all of it. */
static void slide_to(aftp_replay *w, uint64_t pn)
{
    uint64_t first = w->next == 0 ? 0 : (w->next - 1) / WORD_BITS + 1;
    uint64_t last = pn / WORD_BITS;
    uint64_t count = last >= first ? last - first + 1 : 0;
    if (count > RING_WORDS)
        count = RING_WORDS;
    for (uint64_t i = 0; i < count; i++)
        w->words[(first + i) % RING_WORDS] = 0;
    w->next = pn + 1;
}

int aftp_replay_accept(aftp_replay *w, uint64_t pn)
{
    int rc = aftp_replay_check(w, pn);
    if (rc != AFTP_OK)
        return rc;
    if (pn >= w->next)
        slide_to(w, pn);
    w->words[word_index(pn)] |= bit_of(pn);
    return AFTP_OK;
}
