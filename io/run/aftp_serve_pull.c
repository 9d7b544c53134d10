#include "aftp_serve_pull.h"

#include <stdio.h>

#include "aftp_drive.h"
#include "aftp_io.h"
#include "aftp_path.h"

int aftp_serve_pull_sender(const aftp_serve_pull_opts *o, aftp_sender **out)
{
    aftp_sender_settings set;
    aftp_sender_settings_default(&set);
    set.conn_id = aftp_io_random_conn_id();
    set.max_datagram = o->max_datagram;
    if (o->idle_timeout_ns)
        set.idle_timeout_ns = o->idle_timeout_ns;
    set.role = AFTP_ROLE_PULL;
    set.pipeline_window = o->pipeline_window;
    set.storage = &aftp_pullsrc_ops;
    set.on_event = o->on_event;
    set.user = o->user;
    set.security = *o->security;
    set.security.peers = o->peers;
    return aftp_sender_new(&set, aftp_drive_now_ns(), out);
}

void aftp_serve_pull_turn(aftp_pullsrc *src, aftp_sender *s, uint64_t now_ns)
{
    for (uint32_t id; (id = aftp_treesend_changed(&src->tree)) != 0;)
        if (aftp_sender_abandon(s, id, AFTP_ERR_SOURCE_CHANGED) != AFTP_OK) {
            aftp_sender_abort(s, now_ns, AFTP_ERR_SOURCE_CHANGED, src->tree.message);
            return;
        }
    int rc = aftp_pullsrc_feed(src, s);
    if (rc != AFTP_OK)
        aftp_sender_abort(s, now_ns, rc, "the server cannot read the requested files");
}

void aftp_serve_pull_notice(void *user, const char *local, int err, const char *why)
{
    char shown[256], line[1024];
    (void)err;
    aftp_path_printable(local, shown, sizeof shown);
    snprintf(line, sizeof line, "a client's pull skipped %s beneath its root: %s", shown, why);
    aftp_io_warn(user, line);
}

void aftp_serve_pull_after_send(void *ctx)
{
    aftp_pullsrc *src = ctx;
    aftp_treesend_settle(&src->tree);
}
