/* The serve driver (aftp_serve.h): the control plane's own loop, and the
 * operator's lines. */
#include "aftp_serve.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "aftp_hub.h"
#include "aftp_keyfile.h"
#include "aftp_parse.h"
#include "aftp_path.h"
#include "door/aftp_admit.h"

int aftp_serve_run(const aftp_serve_opts *o, aftp_io_result *res)
{
    uv_loop_t loop;
    aftp_hub *hub = NULL;
    if (uv_loop_init(&loop) != 0) {
        memset(res, 0, sizeof *res);
        res->phase = AFTP_IO_PHASE_LOCAL;
        snprintf(res->message, sizeof res->message, "cannot start the event loop");
        return res->error = AFTP_ERR_INTERNAL;
    }
    int rc = aftp_hub_start(&hub, &loop, o, res, NULL, NULL);
    if (hub != NULL) {
        uv_run(&loop, UV_RUN_DEFAULT); /* until the hub ends and closes its handles */
        rc = aftp_hub_result(hub);
        aftp_hub_del(hub);
    }
    uv_loop_close(&loop);
    return rc;
}

void aftp_serve_describe_client(const struct sockaddr *from, const uint8_t *key,
                                const char *comment, char *out, size_t cap)
{
    char who[64], text[128], escaped[256] = "";
    aftp_format_addr(from, who, sizeof who);
    if (key == NULL) {
        snprintf(out, cap, "from %s", who);
        return;
    }
    aftp_keyfile_key_text(key, text, sizeof text);
    if (comment != NULL)
        aftp_path_printable(comment, escaped, sizeof escaped);
    snprintf(out, cap, "from %s key %s%s%s%s", who, text, escaped[0] ? " \"" : "", escaped,
             escaped[0] ? "\"" : "");
}

void aftp_serve_explain_failure(const aftp_io_result *res, const char *client,
                                const char *refusal, double idle_s, const char *idle_setting,
                                char *out, size_t cap)
{
    if ((res->error == AFTP_ERR_UNKNOWN_PEER || res->error == AFTP_ERR_PERMISSION) &&
        refusal != NULL)
        snprintf(out, cap, "refused client %s: %s", client, refusal);
    else if (res->error == AFTP_ERR_IDLE_TIMEOUT)
        snprintf(out, cap, "sender %s went silent for %.1f s (%s)", client, idle_s, idle_setting);
    else
        snprintf(out, cap, "transfer %s failed: %s", client,
                 res->message[0] ? res->message : aftp_strerror(res->error));
}

void aftp_serve_explain_drop(const struct sockaddr *from, int why, const char *client,
                             const char *psk_advice, const struct aftp_admit *admit,
                             uint64_t unreported, char *out, size_t cap)
{
    char who[64], reason[320], more[96] = "";
    if (unreported > 0)
        snprintf(more, sizeof more, " (and %llu more dropped handshakes not reported)",
                 (unsigned long long)unreported);
    if (why == AFTP_SERVE_DROP_UNOPENED) {
        aftp_format_addr(from, who, sizeof who);
        snprintf(out, cap, "a client at %s sent a handshake this server cannot open (it may have "
                           "pinned another server key)%s", who, more);
        return;
    }
    if (why == AFTP_SERVE_DROP_TIMESTAMP)
        aftp_admit_explain(admit, reason, sizeof reason);
    else
        snprintf(reason, sizeof reason, "the rest of its handshake does not open with this "
                                        "server's pre-shared key (%s)", psk_advice);
    snprintf(out, cap, "ignored a handshake %s: %s%s", client, reason, more);
}
