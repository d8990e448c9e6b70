/* Fucina llm: stop strings. Generated text is held back while some suffix
 * of it may still grow into a stop string, so a caller streaming the
 * emitted part never shows any piece of one (src/llm/chat_internal.h). */
#include <string.h>

#include "llm/chat_internal.h"

int fc_chat_stop_scan(const char *pend, size_t n, const char *const *stop, size_t n_stop, size_t *emit) {
    /* a complete occurrence: stop at the earliest one */
    size_t best = n + 1;
    for (size_t k = 0; k < n_stop; k++) {
        const size_t m = strlen(stop[k]);
        if (!m || m > n) continue;
        for (size_t p = 0; p + m <= n && p < best; p++)
            if (!memcmp(pend + p, stop[k], m)) {
                best = p;
                break;
            }
    }
    if (best <= n) {
        *emit = best;
        return 1;
    }
    /* otherwise hold back from the earliest position whose tail is a proper
     * prefix of a stop string: an occurrence starting earlier can no longer
     * complete, because its start would need a longer matching tail */
    for (size_t p = 0; p < n; p++)
        for (size_t k = 0; k < n_stop; k++) {
            const size_t m = strlen(stop[k]);
            if (n - p < m && !memcmp(pend + p, stop[k], n - p)) {
                *emit = p;
                return 0;
            }
        }
    *emit = n;
    return 0;
}
