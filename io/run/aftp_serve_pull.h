/*
 * The engine and storage for an admitted pull (spec 9.15): the server's
 * side is a sender engine in role PULL whose storage (aftp_pullsrc)
 * resolves each requested path beneath the session's root and walks the
 * served ones into entries. The serve loop calls these where a push
 * session has its receiver; nothing here knows about listeners, doors or
 * how many sessions run.
 */
#ifndef AFTP_SERVE_PULL_H
#define AFTP_SERVE_PULL_H

#include "aftp/aftp_engine.h"
#include "aftp_pullsrc.h"

/* What the sender of a pull is made from: the serve loop's settings. */
typedef struct aftp_serve_pull_opts {
    uint16_t max_datagram;
    uint64_t idle_timeout_ns;      /* 0: the engine's default */
    uint32_t pipeline_window;      /* the largest entry window the server runs */
    const aftp_security_settings *security; /* identity, cipher */
    aftp_peer_policy peers;        /* the serve loop's admission for this HELLO */
    aftp_event_cb on_event;
    void *user;                    /* the engine's user: must be the aftp_pullsrc */
} aftp_serve_pull_opts;

/* A sender engine in role PULL over the storage at o->user. */
int aftp_serve_pull_sender(const aftp_serve_pull_opts *o, aftp_sender **out);
/* Each turn of the session's loop: a source whose size or mtime moved
 * ends its entry alone (spec 9.14.3); the served paths' entries are added
 * as the window frees; a walk that fails ends the session with its error. */
void aftp_serve_pull_turn(aftp_pullsrc *src, aftp_sender *s, uint64_t now_ns);
/* An aftp_tree_notice_fn for aftp_pullsrc_init, `user` the serve run's
 * aftp_io_hooks: what a served tree skipped (a FIFO, a device ...) goes
 * to the operator (on_warning), named beneath the client's root. */
void aftp_serve_pull_notice(void *user, const char *local, int err, const char *why);
/* After each batch (aftp_drive.after_send, ctx the aftp_pullsrc): the
 * bytes the batch borrowed are released. */
void aftp_serve_pull_after_send(void *ctx);

#endif /* AFTP_SERVE_PULL_H */
