#include "aftp_io.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "aftp_drive.h"

uint32_t aftp_io_random_conn_id(void)
{
    uint32_t id = 0;
    while (id == 0)
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint32_t)aftp_drive_now_ns() | 1u;
    return id;
}

void aftp_io_warn(const aftp_io_hooks *h, const char *text)
{
    if (h->on_warning && text[0] != '\0')
        h->on_warning(h->app, text);
}

static void note_event(aftp_io_result *res, const aftp_event *ev)
{
    switch (ev->type) {
    case AFTP_EV_CONNECTED:
        res->connected = 1;
        if (ev->peer_key != NULL) {
            memcpy(res->peer_key, ev->peer_key, AFTP_KEY_LEN);
            res->have_peer_key = 1;
        }
        break;
    case AFTP_EV_FILE_END:
        if (ev->error == AFTP_OK)
            res->files_ok++;
        else if (res->error == AFTP_OK)
            res->error = ev->error;
        break;
    case AFTP_EV_ENTRY_END: /* pipelined mode: a refused or failed entry */
        if (ev->error != AFTP_OK && res->error == AFTP_OK)
            res->error = ev->error;
        break;
    default:
        break;
    }
    if (ev->message && ev->message[0] != '\0' && res->message[0] == '\0')
        snprintf(res->message, sizeof res->message, "%s", ev->message);
}

void aftp_io_on_event(void *user, const aftp_event *ev)
{
    aftp_io_ctx *ctx = (aftp_io_ctx *)((char *)user - offsetof(aftp_io_ctx, storage));
    note_event(ctx->res, ev);
    if (ctx->hooks->on_event)
        ctx->hooks->on_event(ctx->hooks->app, ev);
}
