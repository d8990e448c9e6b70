/* SPDX-License-Identifier: MIT */
/* The grammar of JSON (RFC 8259) as GBNF: the server's response_format
 * {"type": "json_object"} and the building blocks of JSON Schema grammars.
 *
 * Exact where RFC 8259 is loose in ways a strict reader refuses: a \u
 * escape of a high surrogate must be followed by the escape of a low one
 * (a lone surrogate is valid JSON text but names no character); raw control
 * characters are not string characters. Bounded where a model could run
 * away: whitespace between tokens is one blank, or a newline and at most 20
 * blanks (pretty-printed JSON's indentation); integer parts have at most 16
 * digits, fractions 16, exponents 3 (what a generated number needs; a
 * longer one is refused, not cut). */
#include <string.h>

#include "exec/ctx.h"
#include "llm/grammar_internal.h"
#include "llm/grammar_json.h"

const char fc_grammar_json_rules[] =
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex-bmp | \"u\" [dD] [89abAB] hex hex \"\\\\u\" [dD] "
    "[c-fC-F] hex hex )\n"
    "hex ::= [0-9a-fA-F]\n"
    "hex-bmp ::= [0-9a-cA-CeEfF] hex hex hex | [dD] [0-7] hex hex\n"
    "number ::= integer fraction? exponent?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "fraction ::= \".\" [0-9]{1,16}\n"
    "exponent ::= [eE] [-+]? [0-9]{1,3}\n"
    "ws ::= \"\" | \" \" | \"\\n\" [ \\t]{0,20}\n";

fc_grammar *fc_grammar_json(fc_ctx *ctx, bool object_root)
{
    static const char root_object[] = "root ::= object\n", root_value[] = "root ::= value\n";
    const char *root = object_root ? root_object : root_value;
    size_t nr = strlen(root), nj = sizeof fc_grammar_json_rules - 1;
    char text[sizeof fc_grammar_json_rules + sizeof root_object];
    memcpy(text, root, nr);
    memcpy(text + nr, fc_grammar_json_rules, nj);
    return fc_grammar_parse(ctx, text, nr + nj, "root");
}
