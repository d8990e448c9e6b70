/* SPDX-License-Identifier: MIT */
/* The compiled form of a grammar, shared by the GBNF compiler
 * (grammar_parse.c) and the matcher (grammar_match.c).
 *
 * A grammar is a list of rules; a rule is a list of alternatives; an
 * alternative is a run of elements in one flat array, ended by GE_END.
 * There are only two other elements: a set of bytes (one input byte from
 * the set) and a reference to a rule. Characters, classes, literals,
 * groups and repetitions have all been lowered to these by the compiler:
 * the matcher never sees a code point. */
#ifndef FC_LLM_GRAMMAR_INTERNAL_H
#define FC_LLM_GRAMMAR_INTERNAL_H

#include <stdint.h>

#include "fucina/grammar.h"

/* A token element (GBNF's <|end|>, and <[TOOL_CALLS]> for a bracketed token
 * text) matches a control token, which has no text: the compiler writes it
 * as the bytes GE_TOKEN_OPEN, the token's text, GE_TOKEN_CLOSE, and the
 * matcher's vocabulary gives every control token exactly those bytes. No
 * code point's UTF-8 holds a byte above 0xF4, so no other element can
 * match them, and the vocabulary leaves out the tokens whose text holds one
 * (no grammar could ever take them): a control token is produced only
 * where the grammar names it. The element also matches the text itself, for
 * a token that is not a control token (Qwen's <think> is user-defined). */
#define GE_TOKEN_OPEN 0xFFu
#define GE_TOKEN_CLOSE 0xFEu
#define GE_FIRST_NON_UTF8 0xF5u

typedef enum ge_kind {
    GE_END = 0,   /* the alternative ends here */
    GE_BYTES = 1, /* arg: index of a 256-bit byte set in fc_grammar.sets */
    GE_RULE = 2,  /* arg: rule index */
} ge_kind;

typedef struct ge {
    uint32_t kind; /* ge_kind */
    uint32_t arg;
} ge;

typedef struct ge_set {
    uint64_t w[4];
} ge_set;

static inline int ge_set_has(const ge_set *s, unsigned b) { return (int)((s->w[b >> 6] >> (b & 63)) & 1u); }

struct fc_grammar {
    ge *el; /* every alternative's elements, each run ended by GE_END */
    uint32_t n_el;
    ge_set *sets;
    uint32_t n_sets;
    uint32_t *alt; /* element index where each alternative starts, rule by rule */
    uint32_t *rule_alt0, *rule_nalt;
    uint32_t n_rules;
    char **rule_name; /* generated rules: "<named rule>-<n>" */
    uint32_t root;
};

#endif
