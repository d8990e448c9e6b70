/* SPDX-License-Identifier: MIT */
/* TEMPORARY: stands in until src/llm/json_schema.c lands. */
#include "exec/ctx.h"
#include "fucina/grammar.h"
char *fc_json_schema_to_gbnf(fc_ctx *ctx, const char *schema, size_t len)
{
    (void)schema, (void)len;
    return fc_fail(ctx, FC_ERR_UNSUPPORTED, "json schema: not built yet");
}
fc_grammar *fc_grammar_from_json_schema(fc_ctx *ctx, const char *schema, size_t len)
{
    return (fc_grammar *)(void *)fc_json_schema_to_gbnf(ctx, schema, len);
}
