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
    }
    return "FC_ERR_?";
}
