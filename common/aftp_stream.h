/*
 * The entries of a pipelined session and their place in the session
 * stream (spec section 9.14): the table both engines keep, and the rules a
 * peer's entries and verdicts must keep, checked in one place.
 *
 * Entry ids are consecutive from 1 and each entry begins in the stream
 * where the previous one ends. At most W entries are live at a time: the
 * ids [oldest, oldest + W), where `oldest` is the smallest id that has not
 * ended. So the table is a ring of W slots, entry id i in slot i mod W,
 * fixed at init: memory W * sizeof(aftp_stream_entry) whatever the
 * session's size (64 KiB at the reference window of 2048).
 *
 * The sender adds its own entries in order, so its table has no holes. The
 * receiver adds what ENTRIES bring, possibly out of order (a lost batch),
 * so its table may have holes; every check that needs a neighbour makes it
 * when both are known, whichever arrived first.
 */
#ifndef AFTP_STREAM_H
#define AFTP_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

enum aftp_stream_state {
    AFTP_STREAM_EMPTY = 0,  /* slot unused */
    AFTP_STREAM_OFFERED,    /* known, no verdict yet */
    AFTP_STREAM_ACCEPTED,   /* a FILE with verdict SEND or RESUME: data flows */
    AFTP_STREAM_ENDED       /* verdict SKIP/REFUSED, placed DIR/SYMLINK, or FILE_RESULT */
};

typedef struct aftp_stream_entry {
    uint32_t id;
    uint8_t kind;       /* enum aftp_wire_entry_kind */
    uint8_t state;      /* enum aftp_stream_state */
    uint8_t verdict;    /* enum aftp_wire_verdict_kind, once state > OFFERED */
    uint16_t flags;     /* AFTP_WIRE_ENTRY_* */
    uint16_t error;     /* wire error it ended with (REFUSED, failed FILE_RESULT) */
    uint64_t base;      /* first stream block */
    uint64_t blocks;    /* stream blocks it holds (0 for DIR and SYMLINK) */
} aftp_stream_entry;

typedef struct aftp_stream {
    aftp_stream_entry *slots;
    uint32_t window;    /* W, 1..AFTP_WIRE_MAX_WINDOW */
    uint32_t oldest;    /* smallest id not ended (newest + 1 when all have) */
    uint32_t newest;    /* highest id added, 0 before the first */
    uint64_t oldest_base; /* where entry `oldest` begins: the end of the ended ones */
} aftp_stream;

/* A table for window W. AFTP_OK, AFTP_ERR_INVALID_ARGUMENT (W outside
 * 1..AFTP_WIRE_MAX_WINDOW) or AFTP_ERR_NO_MEMORY. */
int aftp_stream_init(aftp_stream *s, uint32_t window);
void aftp_stream_free(aftp_stream *s); /* safe on a zeroed or freed table */

/* The live entry `id`, or NULL (never added, or ended and forgotten). */
aftp_stream_entry *aftp_stream_find(aftp_stream *s, uint32_t id);

/* Adds an entry the wire decoder accepted (its own fields are valid).
 * Returns 1 when added; 0 when it is already known or ended (a repeated
 * ENTRIES: ignore it, other fields not compared, spec 9.14.3); or
 * AFTP_ERR_MALFORMED, with `why` saying which rule it broke and the
 * figures: an id at or beyond oldest + W, a base that is not the end of
 * the known entry before it, or an end that is not the base of the known
 * entry after it. */
int aftp_stream_add(aftp_stream *s, const aftp_wire_entry *e, char *why, size_t why_cap);

/* Applies a verdict to an offered entry: the receiver's own when it
 * decides, the sender's when VERDICTS brings it (spec 9.14.3). Returns 1
 * when it was new: the entry is now ACCEPTED (a FILE to send) or ENDED
 * (SKIP, REFUSED, a placed DIR or SYMLINK; `oldest` moves on), and *out
 * holds a copy of it, for the caller to mark its held blocks. Returns 0
 * when the verdict only repeats the entry's, or names an entry that ended
 * and is forgotten; AFTP_ERR_MALFORMED with `why` for a verdict on an
 * entry never offered, a different verdict for an entry that has one,
 * RESUME or SKIP on a non-FILE or without the entry's flag RESUME / SYNC,
 * or held ranges past the file's block count. The held ranges are read
 * from v->ranges when set, else from the decoded v->range_bytes. */
int aftp_stream_verdict(aftp_stream *s, const aftp_wire_verdict *v, aftp_stream_entry *out,
                        char *why, size_t why_cap);

/* Ends entry `id` with `error` (0: success). Moves `oldest` past every
 * ended entry in a row, freeing their slots. No effect on an unknown id. */
void aftp_stream_end(aftp_stream *s, uint32_t id, uint16_t error);

/* The entry that holds stream block `block`, among ids [oldest, newest],
 * which must all be known (the sender's table); NULL when none does. */
aftp_stream_entry *aftp_stream_locate(aftp_stream *s, uint64_t block);

#endif /* AFTP_STREAM_H */
