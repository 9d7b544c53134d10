/*
 * libaftp, all of its public API in one include:
 *
 *   #include <aftp/aftp.h>
 *
 * Compile and link with `pkg-config --cflags --libs aftp`, or in CMake with
 * find_package(aftp) and the imported target aftp::aftp.
 */
#ifndef AFTP_H
#define AFTP_H

#include "aftp/aftp_export.h"
#include "aftp/aftp_version.h"
#include "aftp/aftp_error.h"
#include "aftp/aftp_global.h"
#include "aftp/aftp_engine.h"
#include "aftp/aftp_client.h"
#include "aftp/aftp_server.h"

#endif /* AFTP_H */
