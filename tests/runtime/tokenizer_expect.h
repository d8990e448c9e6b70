/* Shared by the tokenizer tests (test_tokenizer.c, test_tokenizer_spm.c):
 * loading a bad vocabulary fails with status st and a message naming
 * needle1 (and saying needle2 when given). Header-only; takes the suite's
 * context. */
#ifndef FCT_TOKENIZER_EXPECT_H
#define FCT_TOKENIZER_EXPECT_H

#include <criterion/criterion.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fucina/tokenizer.h"

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
