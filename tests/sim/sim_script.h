/*
 * A scripted client against one receiver engine: the test builds each
 * packet by hand (any field, any order, hostile or not) and reads the
 * engine's answers decoded. The receiver runs unprotected (cipher NONE)
 * unless the test's tune function says otherwise; the clock is virtual.
 */
#ifndef SIM_SCRIPT_H
#define SIM_SCRIPT_H

#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "proto/aftp_wire.h"
#include "sim_storage.h"

#define SIM_SCRIPT_CLIENT_ID 0xC1C1C1C1u
#define SIM_SCRIPT_SERVER_ID 0x5E5E5E5Eu

typedef struct sim_script {
    sim_storage st;
    sim_side side;
    uint64_t clock;
    aftp_receiver *r;
    uint64_t pn;            /* the client's next packet number */
    uint8_t buf[AFTP_WIRE_MAX_DATAGRAM];
    aftp_wire_packet out;   /* the engine's latest datagram, decoded */
} sim_script;

/* Storage holds one file of file_size bytes (synthetic above
 * SIM_SYNTHETIC_ABOVE); tune (NULL: none) adjusts the settings. */
void sim_script_start(sim_script *g, uint64_t file_size, void (*tune)(aftp_receiver_settings *));
void sim_script_free(sim_script *g);

/* Sends p (its header filled here: version 1, the type, the id the
 * type is addressed with, the next pn); returns aftp_receiver_read's code. */
int sim_script_send(sim_script *g, aftp_wire_packet *p, uint8_t type);
/* 1 and the engine's next datagram in g->out, or 0 when it has none
 * (the test fails when the engine cannot build it). */
int sim_script_next(sim_script *g);

/* A push HELLO listing these ciphers. */
int sim_script_hello(sim_script *g, const uint8_t *ciphers, uint8_t count);
/* A FILE_OFFER of the storage's file under another id (its size). */
int sim_script_offer(sim_script *g, uint32_t file_id, uint32_t block_size);
/* HELLO [NONE], its HELLO_ACK, then the offer of file 1 and its reply:
 * the reply's error. */
uint16_t sim_script_connect_and_offer(sim_script *g, uint32_t block_size);
/* DATA for this block of file 1 with its true bytes. */
int sim_script_data(sim_script *g, uint64_t block, uint32_t block_size);
/* Runs the engine's due timers at the current clock. */
void sim_script_tick(sim_script *g);

/* ---- pipelined mode (spec 9.14) ---- */

/* A receiver whose pipeline_window is `window`, its storage empty: the
 * test adds entries with sim_storage_add_entry. */
void sim_script_start_pipelined(sim_script *g, uint32_t window,
                                void (*tune)(aftp_receiver_settings *));
/* HELLO [NONE] announcing PIPELINE(window) (0: no PIPELINE), then its
 * HELLO_ACK: the window the receiver granted, 0 when it sent none. */
uint32_t sim_script_hello_pipeline(sim_script *g, uint32_t window);
/* Storage entry `id` as an ENTRIES record (flags as given). */
aftp_wire_entry sim_script_entry(const sim_script *g, uint32_t id, uint16_t flags);
/* One ENTRIES with these records, as given (any of them hostile). */
int sim_script_send_entries(sim_script *g, const aftp_wire_entry *list, uint16_t count);
/* One ENTRIES with storage entries [first, first + count). */
int sim_script_entries(sim_script *g, uint32_t first, uint16_t count, uint16_t flags);
/* DATA for block `file_block` of entry id: its stream block, true bytes. */
int sim_script_stream_data(sim_script *g, uint32_t id, uint64_t file_block);
/* FILE_DONE of entry id with its true block count and digest. */
int sim_script_file_done(sim_script *g, uint32_t id);

#endif /* SIM_SCRIPT_H */
