/* SPDX-License-Identifier: MIT */
/* The library's own version: the one compiled into it, which a program
 * linked against a shared libfucina may differ from (fucina/version.h). */
#include "fucina/version.h"

const char *fc_version(void) { return FUCINA_VERSION_STRING; }

int fc_version_number(void) { return FUCINA_VERSION_NUMBER; }
