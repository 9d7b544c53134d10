/* libaftp's umbrella header: includes every public header. */
#ifndef AFTP_H
#define AFTP_H

#include "aftp/aftp_global.h"

#endif /* AFTP_H */
