/* SPDX-License-Identifier: MIT */
/* Shared by the tokenizer tests (test_tokenizer.c, test_tokenizer_spm.c):
 * tk_show prints bytes for a failure message; tk_expect_load_error checks
 * that loading a bad vocabulary fails with status st and a message naming
 * needle1 (and saying needle2 when given). Header-only; the latter takes
 * the suite's context. */
#ifndef FCT_TOKENIZER_EXPECT_H
#define FCT_TOKENIZER_EXPECT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fucina/tokenizer.h"

/* s[0..n) with bytes outside printable ASCII (and '\\') as \\xHH, cut at
 * about 560 characters; four rotating buffers, so a message can show four. */
static inline char *tk_show(const char *s, size_t n) {
    static char out[4][600];
    static int r;
    char *o = out[r++ & 3];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 560; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') o[k++] = (char)c;
        else k += (size_t)snprintf(o + k, 8, "\\x%02x", c);
    }
    o[k] = 0;
    return o;
}

static inline void tk_expect_load_error(fc_ctx *c, const char *path, fc_status st, const char *needle1,
                                        const char *needle2) {
    fc_ctx_clear_error(c);
    fc_tokenizer *t = fc_tokenizer_load(c, path);
    cr_expect_null(t, "%s loaded", path);
    fc_tokenizer_free(t);
    cr_expect_eq(fc_ctx_status(c), st, "status %s, expected %s (%s)", fc_status_name(fc_ctx_status(c)),
                 fc_status_name(st), fc_ctx_error(c));
    cr_expect(strstr(fc_ctx_error(c), needle1), "message \"%s\" does not name \"%s\"", fc_ctx_error(c), needle1);
    if (needle2)
        cr_expect(strstr(fc_ctx_error(c), needle2), "message \"%s\" does not say \"%s\"", fc_ctx_error(c), needle2);
    fc_ctx_clear_error(c);
}

#endif
