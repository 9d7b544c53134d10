/* A scripted client against one receiver engine (sim_script.h). */
#include "sim_script.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "sim_run.h"

static void start_with_files(sim_script *g, int nfiles, uint64_t file_size, uint32_t window,
                             void (*tune)(aftp_receiver_settings *))
{
    memset(g, 0, sizeof *g);
    sim_storage_init(&g->st, nfiles, file_size, 9);
    g->side = (sim_side){.st = &g->st, .clock = &g->clock};
    aftp_sender_settings unused;
    sim_side unused_side = {0};
    aftp_receiver_settings s;
    sim_engine_settings(&unused, &unused_side, &s, &g->side);
    s.conn_id = SIM_SCRIPT_SERVER_ID;
    s.security.cipher = AFTP_CIPHER_NONE;
    s.pipeline_window = window;
    if (tune != NULL)
        tune(&s);
    assert_int_equal(aftp_receiver_new(&s, 0, &g->r), AFTP_OK);
}

void sim_script_start(sim_script *g, uint64_t file_size, void (*tune)(aftp_receiver_settings *))
{
    start_with_files(g, 1, file_size, 0, tune);
}

void sim_script_start_pipelined(sim_script *g, uint32_t window,
                                void (*tune)(aftp_receiver_settings *))
{
    start_with_files(g, 0, 0, window, tune);
}

void sim_script_free(sim_script *g)
{
    aftp_receiver_del(g->r);
    sim_storage_free(&g->st);
}

int sim_script_send(sim_script *g, aftp_wire_packet *p, uint8_t type)
{
    uint8_t dgram[AFTP_WIRE_MAX_DATAGRAM];
    size_t len;
    p->hdr.version = AFTP_WIRE_VERSION;
    p->hdr.type = type;
    p->hdr.conn_id = type == AFTP_WIRE_HELLO ? SIM_SCRIPT_CLIENT_ID : SIM_SCRIPT_SERVER_ID;
    p->hdr.pn = g->pn++;
    assert_int_equal(aftp_wire_encode(p, dgram, sizeof dgram, &len), AFTP_OK);
    return aftp_receiver_read(g->r, g->clock, dgram, len);
}

int sim_script_next(sim_script *g)
{
    aftp_datagram dg;
    int rc = aftp_receiver_write(g->r, g->clock, g->buf, sizeof g->buf, &dg);
    assert_true(rc == 0 || rc == 1); /* an error here is the engine's own fault */
    if (rc == 0)
        return 0;
    assert_null(dg.payload);
    assert_int_equal(aftp_wire_decode(dg.head, dg.head_len, &g->out), AFTP_OK);
    return 1;
}

static int send_hello(sim_script *g, const uint8_t *ciphers, uint8_t count, const uint8_t *ext,
                      uint16_t ext_len)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.hello = (aftp_wire_hello){.role = AFTP_WIRE_ROLE_PUSH, .cipher_count = count,
                                  .max_datagram = 1452, .ext = ext, .ext_len = ext_len};
    memcpy(p.u.hello.ciphers, ciphers, count);
    return sim_script_send(g, &p, AFTP_WIRE_HELLO);
}

int sim_script_hello(sim_script *g, const uint8_t *ciphers, uint8_t count)
{
    return send_hello(g, ciphers, count, NULL, 0);
}

uint32_t sim_script_hello_pipeline(sim_script *g, uint32_t window)
{
    const uint8_t none = AFTP_WIRE_CIPHER_NONE;
    uint8_t ext[16];
    aftp_wire_writer w;
    aftp_wire_writer_init(&w, ext, sizeof ext);
    if (window != 0)
        assert_int_equal(aftp_wire_ext_put_pipeline(&w, window), AFTP_OK);
    assert_int_equal(send_hello(g, &none, 1, ext, (uint16_t)w.pos), AFTP_OK);
    assert_true(sim_script_next(g));
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_HELLO_ACK);
    uint32_t granted = 0;
    const aftp_wire_hello_ack *a = &g->out.u.hello_ack;
    assert_int_not_equal(aftp_wire_ext_pipeline(a->ext, a->ext_len, &granted), -1);
    return granted;
}

aftp_wire_entry sim_script_entry(const sim_script *g, uint32_t id, uint16_t flags)
{
    const sim_file *f = &g->st.files[id - 1];
    aftp_wire_entry e = {.entry_id = id, .kind = (uint8_t)f->kind, .flags = flags,
                         .size = f->size, .mode = 0640, .base_block = f->base,
                         .block_size = f->block_size, .source_id = 0x5eed + id,
                         .path_len = (uint16_t)strlen(f->path), .path = (const uint8_t *)f->path};
    if (f->kind == AFTP_ENTRY_SYMLINK) {
        e.target_len = (uint16_t)strlen(f->target);
        e.target = (const uint8_t *)f->target;
    }
    return e;
}

int sim_script_send_entries(sim_script *g, const aftp_wire_entry *list, uint16_t count)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.entries = (aftp_wire_entries){.count = count, .entries = list};
    return sim_script_send(g, &p, AFTP_WIRE_ENTRIES);
}

int sim_script_entries(sim_script *g, uint32_t first, uint16_t count, uint16_t flags)
{
    aftp_wire_entry list[SIM_MAX_FILES];
    assert_true(count <= SIM_MAX_FILES);
    for (uint16_t i = 0; i < count; i++)
        list[i] = sim_script_entry(g, first + i, flags);
    return sim_script_send_entries(g, list, count);
}

int sim_script_stream_data(sim_script *g, uint32_t id, uint64_t file_block)
{
    const sim_file *f = &g->st.files[id - 1];
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.data = (aftp_wire_data){
        .file_id = id, .block = f->base + file_block,
        .payload_len = (uint16_t)aftp_wire_block_len(f->size, f->block_size, file_block),
        .payload = f->src + file_block * f->block_size};
    return sim_script_send(g, &p, AFTP_WIRE_DATA);
}

int sim_script_file_done(sim_script *g, uint32_t id)
{
    const sim_file *f = &g->st.files[id - 1];
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    sim_file_digest(f, p.u.file_done.digest);
    p.u.file_done.file_id = id;
    p.u.file_done.block_count = f->blocks;
    return sim_script_send(g, &p, AFTP_WIRE_FILE_DONE);
}

int sim_script_offer(sim_script *g, uint32_t file_id, uint32_t block_size)
{
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.file_offer = (aftp_wire_file_offer){.file_id = file_id, .size = g->st.files[0].size,
                                            .mode = 0600, .block_size = block_size,
                                            .path_len = 5, .path = (const uint8_t *)"a/b.c"};
    return sim_script_send(g, &p, AFTP_WIRE_FILE_OFFER);
}

uint16_t sim_script_connect_and_offer(sim_script *g, uint32_t block_size)
{
    const uint8_t none = AFTP_WIRE_CIPHER_NONE;
    assert_int_equal(sim_script_hello(g, &none, 1), AFTP_OK);
    assert_true(sim_script_next(g));
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_HELLO_ACK);
    assert_int_equal(sim_script_offer(g, 1, block_size), AFTP_OK);
    assert_true(sim_script_next(g));
    assert_int_equal(g->out.hdr.type, AFTP_WIRE_FILE_REPLY);
    return g->out.u.file_reply.error;
}

int sim_script_data(sim_script *g, uint64_t block, uint32_t block_size)
{
    const sim_file *f = &g->st.files[0];
    size_t len = aftp_wire_block_len(f->size, block_size, block);
    aftp_wire_packet p;
    memset(&p, 0, sizeof p);
    p.u.data = (aftp_wire_data){.file_id = 1, .block = block, .payload_len = (uint16_t)len};
    assert_int_equal(sim_sender_storage.view(&g->side, 1, block * block_size, len,
                                             &p.u.data.payload),
                     AFTP_OK);
    return sim_script_send(g, &p, AFTP_WIRE_DATA);
}

void sim_script_tick(sim_script *g)
{
    if (aftp_receiver_expiry(g->r) <= g->clock)
        aftp_receiver_handle_expiry(g->r, g->clock);
}
