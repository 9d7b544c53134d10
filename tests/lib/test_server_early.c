/* Early entries at a real server (spec 12.3.4): a protected pipelined push
 * of a tree to a server of the public API over 127.0.0.1. The tree's first
 * entry, its top directory, rides in the HELLO's message 1: the server
 * decides it before the client confirmed the handshake (its entry callback
 * reports it placed with no handshake time yet, where the entries of
 * later ENTRIES come after it), and decides it on the worker that runs the
 * session, not on the control thread that ran the handshake (where the
 * admission callback is called). The tree arrives byte-exact. A client
 * that declines early entries (no_early_entries, aftp send
 * --no-early-entries) offers it after the handshake. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server_fixture.h"

#define WINDOW 64u

typedef struct fixture {
    sfx_server srv; /* first: sfx_setup, sfx_teardown */
    sfx_key server, client;
    char dir[512], authorized[512], src[512], top[600], file[700];
    pthread_t control;       /* where the admission callback ran */
    pthread_t entry_thread;  /* where the top directory's decision was reported */
    int64_t top_connected_ns; /* its session's handshake time when it was decided */
    int top_seen;
} fixture;

static int admit(void *user, const aftp_peer *peer, aftp_admission *decision)
{
    fixture *f = user;
    (void)peer;
    (void)decision;
    f->control = pthread_self();
    return AFTP_OK;
}

static void on_entry(void *user, const aftp_receipt *r)
{
    fixture *f = user;
    if (strcmp(r->path, "tree") != 0)
        return;
    f->entry_thread = pthread_self();
    f->top_connected_ns = r->connected_unix_ns;
    f->top_seen = 1;
}

static int setup(void **state)
{
    fixture *f = sfx_setup(sizeof *f);
    sfx_key_new(&f->server);
    sfx_key_new(&f->client);
    sfx_mkdir(f->dir, sizeof f->dir, f->srv.top, "in");
    sfx_mkdir(f->src, sizeof f->src, f->srv.top, "src");
    sfx_mkdir(f->top, sizeof f->top, f->src, "tree");
    snprintf(f->file, sizeof f->file, "%s/a.bin", f->top);
    sfx_make_file(f->file, 300000, 7);
    FILE *out = sfx_authorized_open(f->authorized, sizeof f->authorized, f->srv.top);
    sfx_authorize(out, NULL, f->client.public_key, "partner");
    fclose(out);
    *state = f;
    return 0;
}

/* Pushes the tree (early entries declined or not) to a server set once. */
static void push_tree(fixture *f, int no_early_entries)
{
    aftp_server *s = f->srv.s;
    sfx_configure(&f->srv, f->dir, f->server.secret, f->authorized, 5000);
    assert_int_equal(aftp_server_set_once(s, 1), AFTP_OK);
    assert_int_equal(aftp_server_set_admit_cb(s, admit, f), AFTP_OK);
    assert_int_equal(aftp_server_set_entry_cb(s, on_entry, f), AFTP_OK);
    unsigned port = sfx_start(&f->srv, 10);

    const char *files[] = {f->top};
    aftp_push_result res;
    sfx_push p;
    sfx_push_init(&p, port, files, 1, UINT64_C(200000000));
    sfx_push_keys(&p, f->client.secret, f->server.public_key);
    p.o.pipeline_window = WINDOW;
    p.o.no_early_entries = no_early_entries;
    assert_int_equal(sfx_push_run(&p, &res), AFTP_OK);
    sfx_join(&f->srv, 30);
    assert_int_equal(f->srv.run_rc, AFTP_OK);
    assert_true(f->top_seen);
    assert_true(sfx_same_file(f->dir, "tree/a.bin", f->file));
}

static void test_top_directory_decided_early_on_the_worker(void **state)
{
    fixture *f = *state;
    push_tree(f, 0);
    assert_int_equal(f->top_connected_ns, 0); /* decided before the client confirmed */
    assert_false(pthread_equal(f->entry_thread, f->control));
}

static void test_declined_early_entries_come_after_the_handshake(void **state)
{
    fixture *f = *state;
    push_tree(f, 1);
    assert_true(f->top_connected_ns > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_top_directory_decided_early_on_the_worker, setup,
                                        sfx_teardown),
        cmocka_unit_test_setup_teardown(test_declined_early_entries_come_after_the_handshake,
                                        setup, sfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
