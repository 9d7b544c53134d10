/* An embedder of the libuv tier outside aftp's tree, built with
 * `pkg-config --cflags --libs aftp libuv`: it drives its own loop, starts
 * a server that cannot run (no listen address), hears why through the
 * stopped callback on the loop, and closes the loop, which must find no
 * handle of aftp's left. */
#define _XOPEN_SOURCE 700 /* <uv.h> needs POSIX's thread types under -std=c99 */
#include <stdio.h>

#include <uv.h>
#include <aftp/aftp.h>
#include <aftp/aftp_uv.h>

static void on_stopped(void *user, int status, const char *errmsg)
{
    int *calls = user;
    ++*calls;
    printf("stopped %s: %s\n", aftp_error_name(status), errmsg);
}

int main(void)
{
    uv_loop_t loop;
    aftp_server *s = NULL;
    int calls = 0;
    if (uv_loop_init(&loop) != 0 || aftp_server_new(&s) != AFTP_OK)
        return 1;
    aftp_uv_server_cbs cbs = {sizeof cbs, NULL, NULL, NULL, NULL, on_stopped, &calls, 0, NULL};
    int rc = aftp_uv_server_start(&loop, s, &cbs, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    int closed = uv_loop_close(&loop);
    printf("started %s, stopped callbacks %d, uv_loop_close %d\n", aftp_error_name(rc), calls,
           closed);
    aftp_server_del(s);
    return rc == AFTP_OK && calls == 1 && closed == 0 ? 0 : 1;
}
