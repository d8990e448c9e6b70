/* Install smoke test: a consumer of an installed Fucina (see CMakeLists.txt
 * here, and .ci/run for the pkg-config build). */
#include <stdio.h>

#include <fucina/fucina.h>

int main(void)
{
    fc_status st = fc_dispatch_init();
    size_t n = fc_kernel_slot_count();
    printf("fucina %s: fc_dispatch_init() = %d, %zu kernel slots, isa cap %s\n", FUCINA_VERSION_STRING, (int)st,
           n, fc_dispatch_cap());
    return st == FC_OK && n > 0 ? 0 : 1;
}
