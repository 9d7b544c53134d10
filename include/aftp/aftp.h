/*
 * libaftp: the umbrella header of aftp's public API.
 */
#ifndef AFTP_H
#define AFTP_H

#include "aftp/aftp_client.h"
#include "aftp/aftp_engine.h"
#include "aftp/aftp_error.h"

#endif /* AFTP_H */
