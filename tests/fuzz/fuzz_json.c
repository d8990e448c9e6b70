/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the server's JSON reader on arbitrary bytes (no crash,
 * no leak, bounded time), and every string it accepts written back by the
 * writer and read again to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_value.h"

static void check_strings(const fj_val *v) {
    if (v->type == FJ_STR) {
        fj_buf b = {0};
        fj_str(&b, v->str, v->len);
        if (b.oom) abort();
        fj_doc *d = fj_parse(b.p, b.n, NULL, NULL, 0);
        if (!d || fj_root(d)->len != v->len || memcmp(fj_root(d)->str, v->str, v->len)) abort();
        fj_free(d);
        fj_buf_free(&b);
    }
    if (v->type == FJ_ARR || v->type == FJ_OBJ)
        for (size_t i = 0; i < v->len; i++) check_strings(v->items[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    fj_doc *d = fj_parse((const char *)data, size, &(fj_limits){.max_depth = 64}, err, sizeof err);
    if (d) {
        check_strings(fj_root(d));
        fj_free(d);
    }
    return 0;
}
