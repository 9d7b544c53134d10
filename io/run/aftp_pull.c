#include "aftp_pull.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "aftp_drive.h"
#include "aftp_path.h"
#include "aftp_udp.h"
#include "aftp_wallclock.h"

/* The receive buffer absorbs what arrives while the loop is busy (page
 * faults, writeback): 50 ms at 10 Gbit/s, as a push's server sizes it. */
#define PULL_RCV_RATE_BPS UINT64_C(10000000000)
#define PULL_RCV_WINDOW_NS 50000000u

/* What the engine gets as `user`: the run's context (storage first, for
 * aftp_io_on_event) and the options. */
typedef struct pull_ctx {
    aftp_io_ctx io;
    const aftp_pull_opts *o;
    aftp_io_hooks hooks; /* io.hooks: pull_on_event first, then o->hooks.on_event */
    aftp_storage_ops ops; /* aftp_treestore_ops, its decisions reported (on_entry) */
    aftp_receiver *receiver;
} pull_ctx;

/* The storage's decision, reported (o->on_entry). */
static int pull_entry(void *user, const aftp_entry_info *info, aftp_entry_verdict *out)
{
    pull_ctx *pc = (pull_ctx *)((char *)user - offsetof(aftp_io_ctx, storage));
    int rc = aftp_treestore_ops.entry(user, info, out);
    if (rc == AFTP_OK && pc->o->on_entry != NULL)
        pc->o->on_entry(pc->o->hooks.app, info, out);
    return rc;
}

/* The server's verdict on a path: a refusal is the run's failure, named. */
static void note_path(pull_ctx *pc, const aftp_event *ev)
{
    const aftp_pull_opts *o = pc->o;
    aftp_io_result *res = pc->io.res;
    uint32_t index = ev->info->file_id - 1;
    if (o->on_path != NULL)
        o->on_path(o->hooks.app,
                   &(aftp_pull_path){.index = index, .path = ev->info->path, .error = ev->error});
    if (ev->error == AFTP_OK || res->error != AFTP_OK)
        return;
    char shown[256];
    aftp_path_printable(ev->info->path, shown, sizeof shown);
    res->error = ev->error;
    snprintf(res->message, sizeof res->message, "the server refused %s: %s", shown,
             aftp_strerror(ev->error));
}

static void pull_on_event(void *app, const aftp_event *ev)
{
    pull_ctx *pc = app;
    if (ev->type == AFTP_EV_PULL_PATH)
        note_path(pc, ev);
    if (pc->o->on_session_event != NULL && pc->receiver != NULL) {
        aftp_stats st;
        aftp_receiver_get_stats(pc->receiver, &st);
        pc->o->on_session_event(pc->o->hooks.app, ev, &st);
    }
    if (pc->o->hooks.on_event)
        pc->o->hooks.on_event(pc->o->hooks.app, ev);
}

static int open_socket(const aftp_pull_opts *o, aftp_udp *udp)
{
    int rc = aftp_io_open_client_socket(udp, o->peer, o->peer_len,
                                        aftp_io_max_datagram(o->max_datagram));
    return rc != AFTP_OK ? rc
                         : aftp_io_size_buffers(&o->hooks, udp, AFTP_UDP_MIN_BUFFER,
                                                aftp_udp_buffer_for(PULL_RCV_RATE_BPS,
                                                                    PULL_RCV_WINDOW_NS));
}

static int new_receiver(const aftp_pull_opts *o, pull_ctx *pc, aftp_receiver **out)
{
    aftp_receiver_settings set;
    aftp_io_receiver_settings(&set, o->max_datagram, o->idle_timeout_ns);
    pc->ops = aftp_treestore_ops;
    pc->ops.entry = pull_entry;
    set.storage = &pc->ops;
    set.pipeline_window = o->pipeline_window ? o->pipeline_window : AFTP_PULL_DEFAULT_WINDOW;
    set.on_event = aftp_io_on_event;
    set.user = &pc->io.storage;
    set.security = o->security;
    /* wall-clock time: the server refuses a repeat or a stale handshake */
    set.security.unix_time_ns = aftp_wallclock_now_ns();
    set.role = AFTP_ROLE_PULL;
    set.pull = (aftp_pull_request){.paths = o->paths, .path_count = o->path_count,
                                   .flags = o->flags, .max_rate_bps = o->max_rate_bps};
    set.no_early_request = o->no_early_request;
    return aftp_receiver_new(&set, aftp_drive_now_ns(), out);
}

/* The time bound on unsynced blocks (aftp_treestore.h). */
static void pull_turn(void *ctx, uint64_t now_ns)
{
    pull_ctx *pc = ctx;
    (void)aftp_treestore_tick(&pc->io.storage.tree_dst, now_ns);
}

static int run_session(const aftp_pull_opts *o, pull_ctx *pc, aftp_udp *udp)
{
    aftp_receiver *r = NULL;
    int rc = new_receiver(o, pc, &r);
    if (rc != AFTP_OK)
        return rc;
    pc->receiver = r;
    aftp_drive d = {.receiver = r, .udp = udp, .max_datagram = aftp_io_max_datagram(o->max_datagram),
                    .interrupt = o->hooks.interrupt, .on_tick = o->hooks.on_tick,
                    .app = o->hooks.app, .on_turn = pull_turn, .on_turn_ctx = pc};
    rc = aftp_drive_run(&d);
    aftp_drive_stats(&d, &pc->io.res->stats);
    pc->receiver = NULL;
    aftp_receiver_del(r);
    return rc;
}

/* The directories' metadata once their files are in; the storage's own
 * failure says more than the session's. */
static int finish_storage(pull_ctx *pc, int rc)
{
    aftp_io_result *res = pc->io.res;
    aftp_treestore *ts = &pc->io.storage.tree_dst;
    int fin = aftp_treestore_finish(ts);
    if (ts->report.last_error != AFTP_OK && res->error == AFTP_OK) {
        res->error = ts->report.last_error;
        snprintf(res->message, sizeof res->message, "%s", ts->report.message);
    } else if (fin != AFTP_OK && res->error == AFTP_OK) {
        res->error = fin;
        snprintf(res->message, sizeof res->message, "%s", ts->place.message);
    }
    return res->error != AFTP_OK ? res->error : rc;
}

int aftp_pull_run(const aftp_pull_opts *o, aftp_io_result *res)
{
    pull_ctx pc = {.io = {.res = res}, .o = o};
    aftp_place_options opt;
    char why[256];
    memset(res, 0, sizeof *res);
    pc.hooks = o->hooks;
    pc.hooks.on_event = pull_on_event;
    pc.hooks.app = &pc;
    pc.io.hooks = &pc.hooks;
    res->phase = AFTP_IO_PHASE_LOCAL;
    if (o->place != NULL)
        opt = *o->place;
    else
        aftp_place_defaults(&opt);
    opt.overwrite = (o->flags & AFTP_ENTRY_OVERWRITE) != 0;
    int rc = aftp_treestore_init(&pc.io.storage.tree_dst, o->dest_fd, &opt, why, sizeof why);
    if (rc != AFTP_OK) {
        snprintf(res->message, sizeof res->message, "%s", why);
        return res->error = rc;
    }
    aftp_udp udp;
    rc = open_socket(o, &udp);
    if (rc != AFTP_OK) {
        snprintf(res->message, sizeof res->message, "cannot open a UDP socket to the server");
    } else {
        res->phase = AFTP_IO_PHASE_SESSION;
        rc = run_session(o, &pc, &udp);
    }
    aftp_udp_close(&udp);
    rc = finish_storage(&pc, rc);
    aftp_treestore_fini(&pc.io.storage.tree_dst);
    if (res->error == AFTP_OK)
        res->error = rc;
    return res->error;
}
