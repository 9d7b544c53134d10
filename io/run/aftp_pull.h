/*
 * Client side of a pull (spec 9.15): the paths named on the server, beneath
 * the root its key has there, fetched into a local directory in one
 * session over a real UDP socket (receiver engine in role PULL + the tree
 * storage aftp_treestore beneath DEST + datapath loop). The server offers
 * what it serves as a pipelined session; this side's storage decides each
 * entry with its path rules (spec 14.4), resume and sync as a push's
 * receiver does, so a hostile server cannot write outside DEST.
 */
#ifndef AFTP_PULL_H
#define AFTP_PULL_H

#include <stdint.h>
#include <sys/socket.h>

#include "aftp_io.h"
#include "aftp_place.h"

/* A server's verdict on one requested path, for aftp_pull_opts.on_path. */
typedef struct aftp_pull_path {
    uint32_t index;        /* in aftp_pull_opts.paths */
    const char *path;      /* as requested */
    int error;             /* AFTP_OK: served; else why the server refused it */
} aftp_pull_path;

typedef struct aftp_pull_opts {
    const char *const *paths;  /* on the server, beneath this client's root */
    uint32_t path_count;       /* 1..AFTP_PULL_MAX_PATHS */
    int dest_fd;               /* DEST, an open directory (borrowed) */
    const aftp_place_options *place; /* NULL: aftp_place_defaults (overwrite from flags) */
    /* AFTP_ENTRY_OVERWRITE | _RESUME | _SYNC | _CHECKSUM: what the server
     * may offer and this side may answer (spec 9.14.4). */
    unsigned flags;
    uint32_t pipeline_window;  /* the entry window asked for; 0: AFTP_PULL_DEFAULT_WINDOW */
    const struct sockaddr *peer;
    socklen_t peer_len;
    uint64_t max_rate_bps;     /* the server paces no faster; 0: its own limits */
    uint64_t idle_timeout_ns;  /* 0: the engine's default */
    uint16_t max_datagram;     /* 0: AFTP_IO_DATAGRAM */
    int no_early_request;      /* the request goes after the handshake (spec 12.3.4) */
    /* Keys (borrowed): identity, the server's peer_key, cipher;
     * unix_time_ns is set here from the wall clock. */
    aftp_security_settings security;
    aftp_io_hooks hooks;
    /* optional: the server's verdict on each requested path */
    void (*on_path)(void *app, const aftp_pull_path *p);
    /* optional: this side's storage decided an entry the server offered
     * (info, its verdict): what the engine's events do not tell, the
     * entry's kind, is here */
    void (*on_entry)(void *app, const aftp_entry_info *info, const aftp_entry_verdict *v);
    /* optional: the engine's events (hooks.on_event sees them too), with
     * its counters at that moment (the cipher in use, bytes received) */
    void (*on_session_event)(void *app, const aftp_event *ev, const aftp_stats *st);
} aftp_pull_opts;

#define AFTP_PULL_DEFAULT_WINDOW 256u

/* Fetches o->paths into o->dest_fd and returns res->error: AFTP_OK when
 * every path was served and every entry stored and verified, else the
 * first failure (a refused path: the server's error, res->message naming
 * the path). */
int aftp_pull_run(const aftp_pull_opts *o, aftp_io_result *res);

#endif /* AFTP_PULL_H */
