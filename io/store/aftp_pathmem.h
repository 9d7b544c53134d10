/*
 * Path memory: what a client's earlier sessions measured on a path, so
 * that the next session over the same path starts from it (Careful Resume,
 * spec 13.2 item 6 and 13.4) instead of from the initial window.
 *
 * A path is a server (its static key in hex; for an unprotected session
 * its address and port) seen from one local address: its key is
 * "<server>/<local address>/<peer address>:<port>" (aftp_pathmem_key).
 * An entry holds the bottleneck rate a session measured in steady state,
 * its minimum RTT and when (Unix seconds).
 *
 * The file is text, one entry a line after the header line
 * AFTP_PATHMEM_HEADER:
 *   <key> <rate bits/s> <min RTT ns> <saved, Unix s>
 * Bounded: at most AFTP_PATHMEM_MAX_ENTRIES entries (the oldest dropped
 * for a new one) and AFTP_PATHMEM_MAX_FILE bytes. Written whole to a
 * temporary file beside it (mode 0600) and renamed over it, so a reader
 * sees the old file or the new one, never half of one; two clients that
 * save at once keep one of their updates. A file that is not exactly this
 * format is ignored as a whole with a notice (the next save replaces it):
 * it is a cache, and a wrong entry would make a sender jump to a rate the
 * path never carried.
 *
 * Lifetime. An entry is used for AFTP_PATHMEM_LIFETIME_S after it was
 * saved, never after (nor when it claims to come from the future: a clock
 * set back): the capacity of a shared path changes over the day, and the
 * IETF's Careful Resume asks that saved state expire. Each session that
 * reaches steady state saves it anew, so partners sent to all day keep a
 * fresh entry.
 */
#ifndef AFTP_PATHMEM_H
#define AFTP_PATHMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aftp/aftp_error.h"

#define AFTP_PATHMEM_HEADER "aftp-path-memory 1"
#define AFTP_PATHMEM_MAX_ENTRIES 256u
#define AFTP_PATHMEM_LIFETIME_S 3600u
#define AFTP_PATHMEM_FUTURE_S 300u /* clock skew tolerated on a saved time */
#define AFTP_PATHMEM_KEY_MAX 192u  /* key bytes, with its terminator */
#define AFTP_PATHMEM_MAX_FILE (AFTP_PATHMEM_MAX_ENTRIES * (AFTP_PATHMEM_KEY_MAX + 64u))

typedef struct aftp_pathmem_entry {
    char key[AFTP_PATHMEM_KEY_MAX];
    uint64_t rate_bps;   /* bottleneck rate, bits of UDP payload per second */
    uint64_t min_rtt_ns;
    uint64_t saved_s;    /* Unix time */
} aftp_pathmem_entry;

typedef struct aftp_pathmem {
    aftp_pathmem_entry entries[AFTP_PATHMEM_MAX_ENTRIES];
    size_t count;
} aftp_pathmem;

/* The key of the path to a server: its static key (NULL: unprotected,
 * named by its address and port) from `local` to `peer`. AFTP_OK, or
 * AFTP_ERR_INVALID_ARGUMENT for an address family other than IPv4/IPv6. */
int aftp_pathmem_key(const uint8_t *server_key, const struct sockaddr *local,
                     const struct sockaddr *peer, char out[AFTP_PATHMEM_KEY_MAX]);

/* Reads `path` into pm. A missing file is an empty memory (AFTP_OK); a
 * file that cannot be read or is malformed is an empty memory too, with
 * a notice in `notice` (else notice[0] is '\0'), and AFTP_OK: the memory
 * only ever speeds a start up. */
int aftp_pathmem_load(aftp_pathmem *pm, const char *path, char *notice, size_t notice_cap);

/* The entry for `key` still within its lifetime at `now_s`, or NULL. */
const aftp_pathmem_entry *aftp_pathmem_lookup(const aftp_pathmem *pm, const char *key,
                                              uint64_t now_s);

/* Records what a session measured (replacing the key's entry, else
 * taking a free slot, else the oldest one's). */
void aftp_pathmem_update(aftp_pathmem *pm, const char *key, uint64_t rate_bps,
                         uint64_t min_rtt_ns, uint64_t now_s);

/* Writes pm to `path` (entries expired at `now_s` left out): a temporary
 * file beside it, mode 0600, then renamed over it; the directory is made
 * (0700) when missing. AFTP_OK, or AFTP_ERR_IO with the reason in
 * `why`. */
int aftp_pathmem_save(const aftp_pathmem *pm, const char *path, uint64_t now_s, char *why,
                      size_t why_cap);

#endif /* AFTP_PATHMEM_H */
