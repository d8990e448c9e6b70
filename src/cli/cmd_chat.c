/* fucina chat: (being written). */
#include <stdio.h>

#include "cli/cli.h"

int fc_cmd_chat(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "fucina chat: not implemented yet\n");
    return 1;
}
