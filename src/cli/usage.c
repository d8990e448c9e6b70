/* SPDX-License-Identifier: MIT */
/* A command's usage error: one line to stderr naming the thing, exit status 2. */
#include <stdio.h>

#include "cli/cli.h"

int fc_cli_usage_error(const char *cmd, const char *what, const char *arg)
{
    if (arg) fprintf(stderr, "%s: %s '%s' (see --help)\n", cmd, what, arg);
    else fprintf(stderr, "%s: %s (see --help)\n", cmd, what);
    return 2;
}
