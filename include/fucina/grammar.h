/* SPDX-License-Identifier: MIT */
/* Fucina: constrained generation. A grammar (GBNF, or a JSON Schema turned
 * into GBNF) and a matcher that says which tokens may come next.
 *
 * GBNF is llama.cpp's dialect (grammars/README.md there): rules
 * `name ::= alternatives`, `|`, groups `( )`, literals "..." with the
 * escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, character classes
 * [a-z] and negated [^...], `.` (any character), repetition * + ? {m}
 * {m,} {m,n}, comments `#` to the end of the line. A rule may span lines
 * when the continuation is inside parentheses or follows `|` or `::=`.
 * Left recursion (`expr ::= expr "+" term`) is refused, naming the rule.
 *
 * The compiled grammar works on bytes, not characters: each character
 * class becomes the UTF-8 byte sequences of its code points (surrogates
 * excluded), so a token that holds half a character is matched exactly as
 * far as it goes and a class never accepts an invalid UTF-8 sequence.
 *
 * A matcher pairs a grammar with a vocabulary (the tokens' bytes, read once
 * into a trie). Control tokens carry no bytes and are never allowed, except
 * the end-of-generation tokens, which are allowed exactly when the text so
 * far is a complete sentence of the grammar, and are the only choice once
 * nothing can follow.
 *
 * Errors name the thing and the reason: "grammar line 3, column 7:
 * expected '::=' after the rule name 'value'". */
#ifndef FUCINA_GRAMMAR_H
#define FUCINA_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/sampler.h"
#include "fucina/status.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_grammar fc_grammar;

/* Compile GBNF text[0..len); the start rule is `root` ("root" when NULL).
 * NULL + error in ctx (line and column) for a malformed grammar. A grammar
 * is immutable: any number of matchers and threads may share it. */
FC_API fc_grammar *fc_grammar_parse(fc_ctx *ctx, const char *text, size_t len, const char *root);
FC_API void fc_grammar_free(fc_grammar *g);

/* JSON Schema text[0..len) to GBNF (a NUL-terminated malloc'd string, free
 * with free()), or NULL + error naming the keyword or the value that is
 * refused: a keyword we do not implement is an error, never ignored. */
FC_API char *fc_json_schema_to_gbnf(fc_ctx *ctx, const char *schema, size_t len);
/* fc_json_schema_to_gbnf then fc_grammar_parse. */
FC_API fc_grammar *fc_grammar_from_json_schema(fc_ctx *ctx, const char *schema, size_t len);
/* The grammar of any JSON value (an object at the root when object_root):
 * the server's response_format {"type": "json_object"}. */
FC_API fc_grammar *fc_grammar_json(fc_ctx *ctx, bool object_root);

typedef struct fc_grammar_matcher fc_grammar_matcher;

/* A matcher at the start of the grammar over tok's vocabulary. eog[0..n_eog)
 * are the tokens that end generation (n_eog 0: the tokenizer's EOS). ctx
 * receives later errors and must outlive the matcher. */
FC_API fc_grammar_matcher *fc_grammar_matcher_new(fc_ctx *ctx, const fc_grammar *g, const fc_tokenizer *tok,
                                                  const fc_token *eog, size_t n_eog);
FC_API void fc_grammar_matcher_free(fc_grammar_matcher *m);
/* Back to the start of the grammar (the vocabulary and caches stay; a lazy
 * matcher waits for its trigger again). */
FC_API void fc_grammar_matcher_reset(fc_grammar_matcher *m);
/* Make the grammar lazy (NULL: not lazy): the text is free — every token
 * allowed, nothing masked, complete at any point — until the accepted text
 * holds trigger; from the trigger's first byte on, the grammar holds (the
 * trigger and what follows it in the same token are fed to it). The tool
 * calls of tool_choice auto use it (fc_chat_tools_grammar's trigger).
 * Resets the matcher. */
FC_API fc_status fc_grammar_matcher_set_trigger(fc_grammar_matcher *m, const char *trigger);

/* 1 when token may come next, 0 when not, -1 on error (in ctx). */
FC_API int fc_grammar_matcher_allows(fc_grammar_matcher *m, fc_token token);
/* Advance over token; FC_ERR_INVALID_ARG (state unchanged) when the grammar
 * does not allow it. An end-of-generation token leaves the state as is. */
FC_API fc_status fc_grammar_matcher_accept(fc_grammar_matcher *m, fc_token token);
/* Set logits[t] = -INFINITY for every token t of [0, n_vocab) that may not
 * come next (ids at or above the vocabulary size are never allowed). */
FC_API fc_status fc_grammar_matcher_mask(fc_grammar_matcher *m, float *logits, int32_t n_vocab);
/* Advance over raw bytes (for tests and prefilled text); FC_ERR_INVALID_ARG
 * naming the byte offset when the grammar refuses them (state unchanged). */
FC_API fc_status fc_grammar_matcher_accept_bytes(fc_grammar_matcher *m, const char *bytes, size_t n);
/* The text so far is a complete sentence (an end token is allowed). */
FC_API bool fc_grammar_matcher_complete(const fc_grammar_matcher *m);
/* Nothing but an end token can follow. */
FC_API bool fc_grammar_matcher_done(const fc_grammar_matcher *m);

/* The sampler seam: a filter restricts which tokens the sampler may pick. */
typedef struct fc_token_filter {
    void *user;
    /* 1: token may come next; 0: it may not; -1: error */
    int (*allows)(void *user, fc_token token);
    /* set the logit of every token that may not come next to -INFINITY;
     * 0 on success, -1 on error */
    int (*mask)(void *user, float *logits, int32_t n_vocab);
} fc_token_filter;

/* A filter backed by the matcher (it does not advance it: accept the token
 * the sampler returns with fc_grammar_matcher_accept). */
FC_API fc_token_filter fc_grammar_matcher_filter(fc_grammar_matcher *m);

/* llama.cpp's common_sampler order: run the chain on the logits; when the
 * filter allows the chosen token, that is the answer; otherwise mask the
 * logits with the filter and run the chain again (a second RNG draw). NULL
 * filter: fc_sampler_sample. FC_TOKEN_NONE + error when the filter allows
 * no token. */
FC_API fc_token fc_sampler_sample_filtered(fc_sampler *s, const float *logits, int32_t n_vocab,
                                           const fc_token_filter *f);

#ifdef __cplusplus
}
#endif
#endif
