/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the GBNF compiler on arbitrary bytes (no crash, no leak,
 * bounded time; a refusal must say why), and every grammar it accepts run
 * through a matcher over a small real vocabulary: the input's bytes fed as
 * text, a mask computed at every step, each allowed token's verdict checked
 * against accepting it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina/fucina.h"
#include "fucina/grammar.h"
#include "fucina/llm.h"

static fc_ctx *ctx;
static fc_tokenizer *tok;
static float *logits;
static int32_t n_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[256];
    ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) abort();
    char path[] = "/tmp/fuzz_grammar_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    const fc_make_model_options o = {.preset = "tiny", .seed = 1};
    if (fc_llm_make_model(ctx, path, &o) != FC_OK || !(tok = fc_tokenizer_load(ctx, path))) abort();
    unlink(path);
    n_vocab = fc_tokenizer_n_vocab(tok);
    logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the first line-free half is the grammar; what follows a 0xFF byte is text to feed */
    size_t gl = 0;
    while (gl < size && data[gl] != 0xFF) gl++;
    fc_ctx_clear_error(ctx);
    fc_grammar *g = fc_grammar_parse(ctx, (const char *)data, gl, NULL);
    if (!g) {
        if (!fc_ctx_error(ctx)[0]) abort(); /* a refusal says why */
        return 0;
    }
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    if (m) {
        const uint8_t *text = data + (gl < size ? gl + 1 : gl);
        size_t n = size - (size_t)(text - data);
        for (size_t i = 0; i < n && i < 64; i++) {
            for (int32_t t = 0; t < n_vocab; t++) logits[t] = 0.0f;
            if (fc_grammar_matcher_mask(m, logits, n_vocab) != FC_OK) break;
            /* one allowed token (the first) must be accepted */
            for (int32_t t = 0; t < n_vocab; t++) {
                if (logits[t] == 0.0f) {
                    if (fc_grammar_matcher_allows(m, t) != 1) abort();
                    break;
                }
            }
            fc_ctx_clear_error(ctx);
            if (fc_grammar_matcher_accept_bytes(m, (const char *)text + i, 1) != FC_OK) break;
        }
        fc_grammar_matcher_free(m);
    }
    fc_grammar_free(g);
    return 0;
}
