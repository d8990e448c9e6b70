/* fucina info: what this build can do on this CPU. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fucina/fucina.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina info [--slots]\n\n"
               "Prints the version, the CPU features Fucina detects, the ISAs of this build and\n"
               "whether this CPU runs them, the ISA cap (FUCINA_ISA), and with --slots (the default\n"
               "when stdout is not a terminal too) the arm chosen for every kernel slot.\n");
}

int fc_cmd_info(int argc, char **argv)
{
    int slots = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--slots")) {
            slots = 1;
        } else if (!strcmp(argv[i], "--no-slots")) {
            slots = 0;
        } else {
            fprintf(stderr, "fucina info: unknown option '%s'\n", argv[i]);
            help(stderr);
            return 2;
        }
    }
    if (fc_dispatch_init() != FC_OK) {
        fprintf(stderr, "fucina info: %s\n", fc_dispatch_error());
        return 2;
    }
    printf("fucina %s\n", FUCINA_VERSION_STRING);
    printf("cpu features:");
    for (size_t i = 0; fc_cpu_feature_name(i); i++)
        if (fc_cpu_feature_present(i)) printf(" %s", fc_cpu_feature_name(i));
    printf("\nisas:");
    for (size_t i = 0; fc_isa_name(i); i++)
        printf(" %s(%s)", fc_isa_name(i), fc_isa_supported(i) ? "yes" : "no");
    printf("\nisa cap: %s\n", fc_dispatch_cap());
    if (slots) {
        printf("slots: %zu\n", fc_kernel_slot_count());
        printf("%-28s %-10s %-6s %s\n", "slot", "isa", "tile", "symbol");
        for (size_t i = 0; i < fc_kernel_slot_count(); i++) {
            fc_kernel_slot s;
            if (fc_kernel_slot_get(i, &s) != FC_OK) continue;
            printf("%-28s %-10s %-6s %s\n", s.slot, s.isa, s.tile, s.symbol);
        }
    }
    return 0;
}
