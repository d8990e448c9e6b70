/* SPDX-License-Identifier: MIT */
/* Status names. */
#include "fucina/status.h"

const char *fc_status_name(fc_status s)
{
    switch (s) {
    case FC_OK: return "FC_OK";
    case FC_ERR_INVALID_ARG: return "FC_ERR_INVALID_ARG";
    case FC_ERR_OOM: return "FC_ERR_OOM";
    case FC_ERR_UNSUPPORTED: return "FC_ERR_UNSUPPORTED";
    case FC_ERR_ENV: return "FC_ERR_ENV";
    case FC_ERR_SHAPE: return "FC_ERR_SHAPE";
    case FC_ERR_DTYPE: return "FC_ERR_DTYPE";
    case FC_ERR_AXIS: return "FC_ERR_AXIS";
    case FC_ERR_STATE: return "FC_ERR_STATE";
    case FC_ERR_IO: return "FC_ERR_IO";
    case FC_ERR_FORMAT: return "FC_ERR_FORMAT";
    }
    return "FC_ERR_?";
}
