/* fucina bench: (being written). */
#include <stdio.h>

#include "cli/cli.h"

int fc_cmd_bench(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "fucina bench: not implemented yet\n");
    return 1;
}
