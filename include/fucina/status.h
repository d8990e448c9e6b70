/* SPDX-License-Identifier: MIT */
/* Fucina: status codes. Functions that can fail return an fc_status (or NULL
 * for constructors) and keep a message saying what and why. */
#ifndef FUCINA_STATUS_H
#define FUCINA_STATUS_H

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_status {
    FC_OK = 0,
    FC_ERR_INVALID_ARG, /* a bad value: unknown name, out-of-range number */
    FC_ERR_OOM,         /* an allocation failed */
    FC_ERR_UNSUPPORTED, /* valid, but not available in this build or on this CPU */
    FC_ERR_ENV,         /* a FUCINA_* environment variable has a bad value */
    FC_ERR_SHAPE,       /* sizes that do not fit: mismatch, zero dim, rank > 8 */
    FC_ERR_DTYPE,       /* an element type the op does not take, or operands that differ */
    FC_ERR_AXIS,        /* an unknown, duplicate or invalid axis name */
    FC_ERR_STATE,       /* a valid call at the wrong time (e.g. an unbalanced scope) */
    FC_ERR_IO,          /* a file could not be read or written */
    FC_ERR_FORMAT,      /* file data that is malformed */
} fc_status;

/* A stable name for a status ("FC_ERR_ENV"). */
FC_API const char *fc_status_name(fc_status s);

#ifdef __cplusplus
}
#endif
#endif
