#include "aftp_io.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "aftp_drive.h"
#include "aftp_udp.h"

uint32_t aftp_io_random_conn_id(void)
{
    uint32_t id = 0;
    while (id == 0)
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint32_t)aftp_drive_now_ns() | 1u;
    return id;
}

void aftp_io_receiver_settings(aftp_receiver_settings *set, uint16_t max_datagram,
                               uint64_t idle_timeout_ns)
{
    aftp_receiver_settings_default(set);
    set->conn_id = aftp_io_random_conn_id();
    set->max_datagram = aftp_io_max_datagram(max_datagram);
    if (idle_timeout_ns)
        set->idle_timeout_ns = idle_timeout_ns;
}

void aftp_io_warn(const aftp_io_hooks *h, const char *text)
{
    if (h->on_warning && text[0] != '\0')
        h->on_warning(h->app, text);
}

int aftp_io_open_client_socket(aftp_udp *udp, const struct sockaddr *peer, socklen_t peer_len,
                               uint16_t max_datagram)
{
    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    local.ss_family = peer->sa_family; /* wildcard address, any port */
    socklen_t len = local.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);
    int rc = aftp_udp_open(udp, (struct sockaddr *)&local, len, max_datagram, 0);
    return rc == AFTP_OK ? aftp_udp_connect(udp, peer, peer_len) : rc;
}

int aftp_io_size_buffers(const aftp_io_hooks *hooks, aftp_udp *udp, size_t want_snd,
                         size_t want_rcv)
{
    aftp_udp_buffers b = {.want_snd = want_snd, .want_rcv = want_rcv};
    char advice[256];
    int rc = aftp_udp_set_buffers(udp, &b);
    aftp_udp_buffers_advice(&b, advice, sizeof advice);
    aftp_io_warn(hooks, advice);
    return rc;
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
