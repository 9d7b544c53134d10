/*
 * faux://, test endpoints in the manner of Aspera's: a source of SIZE zero
 * bytes that needs no file ("faux:///NAME?SIZE"), and a destination that
 * keeps nothing ("faux://"). They measure the network and the protocol
 * without disks: a long benchmark run needs neither the space for its data
 * nor the CPU a file system spends clearing fresh pages, which on a small
 * host takes what the link (or its emulator) needs.
 *
 * A faux destination still checks what it receives: every payload must be
 * zero bytes, so only a faux source can fill it, and the file's digest is
 * verified over those zeros as for a real file. The usual path rules
 * apply to the name it is offered.
 */
#ifndef AFTP_FAUX_H
#define AFTP_FAUX_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_engine.h"
#include "aftp_path.h"

#define AFTP_FAUX_PREFIX "faux://"
/* The most zero bytes one view lends: a receiver's verification step. */
#define AFTP_FAUX_WINDOW AFTP_RECEIVER_VERIFY_STEP

/* 1 when `s` names a faux endpoint (begins with faux://). */
int aftp_faux_is(const char *s);

/* Parses "faux:///NAME?SIZE": NAME one path component, SIZE a byte count
 * with an optional binary suffix k, M, G or T (KiB ... TiB). AFTP_OK, or
 * AFTP_ERR_INVALID_ARGUMENT with `why` saying what is wrong. */
int aftp_faux_parse(const char *url, char name[AFTP_PATH_MAX_COMPONENT + 1], uint64_t *size,
                    char *why, size_t why_cap);

/* len (<= AFTP_FAUX_WINDOW) zero bytes, read-only, or NULL when they could
 * not be mapped. They are the kernel's zero page: no memory per byte. */
const uint8_t *aftp_faux_zeros(size_t len);

/* A destination that keeps nothing: one file at a time, as aftp_store. */
typedef struct aftp_faux_sink {
    int open;
    uint32_t file_id;
    uint64_t size;
    aftp_path_report report; /* first failure of the current file */
} aftp_faux_sink;

/* Storage callbacks for the receiver engine; `user` must be a zeroed
 * aftp_faux_sink. */
extern const aftp_storage_ops aftp_faux_sink_ops;

#endif /* AFTP_FAUX_H */
