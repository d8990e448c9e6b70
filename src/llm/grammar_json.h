/* SPDX-License-Identifier: MIT */
/* JSON's grammar rules (GBNF): value, object, array, string, char, hex,
 * hex-bmp, number, integer, fraction, exponent, ws. A JSON Schema grammar
 * appends them and refers to them by these names. */
#ifndef FC_LLM_GRAMMAR_JSON_H
#define FC_LLM_GRAMMAR_JSON_H

extern const char fc_grammar_json_rules[];

#endif
