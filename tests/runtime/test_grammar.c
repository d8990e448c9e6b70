/* SPDX-License-Identifier: MIT */
/* The grammar engine (include/fucina/grammar.h).
 *
 * - GBNF: accept / reject suites on grammars in the style of llama.cpp's
 *   examples (tests/grammars/: arithmetic, a C-like language, lists, Greek
 *   and CJK classes) and on JSON, the expected answers written by hand;
 *   repetition bounds; UTF-8 (overlong forms and surrogates refused,
 *   characters split across tokens matched as far as they go).
 * - Malformed grammars: the error names the line, the column and the reason.
 * - Token masks against llama.cpp (libllama's grammar sampler, the oracle)
 *   on Qwen's 151936-id vocabulary: along random walks through each
 *   grammar, the set of allowed normal tokens must be identical. Control
 *   tokens are where we differ on purpose: llama.cpp matches their text
 *   ("<|im_end|>" inside a JSON string), we never allow one, except the end
 *   token once the grammar is complete.
 * - The sampler seam: a token the chain picks and the grammar allows is the
 *   unconstrained pick (same seed, same token); a refused pick is replaced by
 *   an allowed one; JSON sampled under the grammar with many seeds parses
 *   with the strict JSON reader. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fct_grammar.h"
#include "fucina/fucina.h"
#include "fucina/grammar.h"
#include "fucina/llm.h"
#include "fucina/sampler.h"
#include "fucina/tokenizer.h"
#include "ggml_oracle.h"
#include "io/json_value.h"
#include "llama_abi.h"

FCT_SUITE_WITH_TMPDIR(grammar, 1, "fc_grammar_");

static char *fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/../grammars/%s", FC_GOLDEN_DIR, name);
    size_t n;
    unsigned char *b = fct_read_file(path, &n);
    cr_assert_not_null(b, "cannot read %s", path);
    char *s = malloc(n + 1);
    memcpy(s, b, n);
    s[n] = 0;
    free(b);
    return s;
}

/* A tiny model's tokenizer (n_vocab 0: the small vocabulary). */
static fc_tokenizer *tokenizer(int64_t n_vocab)
{
    const char *path = fct_path(dir, n_vocab ? "big.gguf" : "tiny.gguf");
    fc_make_model_options o = {.preset = "tiny", .seed = 5, .n_vocab = n_vocab};
    cr_assert_eq(fc_llm_make_model(ctx, path, &o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tokenizer *t = fc_tokenizer_load(ctx, path);
    cr_assert_not_null(t, "%s", fc_ctx_error(ctx));
    return t;
}

static fc_grammar *compile(const char *text)
{
    fc_grammar *g = fc_grammar_parse(ctx, text, strlen(text), NULL);
    cr_assert_not_null(g, "grammar failed to compile: %s\n%s", fc_ctx_error(ctx), text);
    return g;
}

/* 1: s is a complete sentence; 0: refused or incomplete. */
static int sentence(fc_grammar_matcher *m, const char *s, size_t n)
{
    fc_grammar_matcher_reset(m);
    if (fc_grammar_matcher_accept_bytes(m, s, n) != FC_OK) return 0;
    return fc_grammar_matcher_complete(m);
}

typedef struct verdict {
    const char *text;
    int ok;
} verdict;

static void check_all(const char *what, const char *gbnf, const verdict *v, size_t n, fc_tokenizer *tok)
{
    fc_grammar *g = compile(gbnf);
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(sentence(m, v[i].text, strlen(v[i].text)), v[i].ok, "%s: \"%s\" should be %s", what,
                     v[i].text, v[i].ok ? "accepted" : "refused");
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
}

Test(grammar, example_grammars_accept_and_refuse)
{
    fc_tokenizer *tok = tokenizer(0);
    char *arith = fixture("arithmetic.gbnf"), *list = fixture("list.gbnf"), *c = fixture("c_like.gbnf"),
         *greek = fixture("greek.gbnf");
    static const verdict arith_v[] = {
        {"x=1\n", 1},      {"a+b*c=d\n", 1}, {"(a +1)/2= x\n", 1}, {"(a + 1)=x\n", 0}, {"x1_y=42\n", 1}, {"x=1\ny=2\n", 1},
        {"x=1", 0},        {"=1\n", 0},      {"x==1\n", 0},          {"(a=1\n", 0},    {"X=1\n", 0},
        {"a+=1\n", 0},     {"", 0},
    };
    check_all("arithmetic", arith, arith_v, sizeof arith_v / sizeof arith_v[0], tok);
    static const verdict list_v[] = {
        {"- milk\n", 1},
        {"- milk\n- eggs and ham\n", 1},
        {"- caf\xC3\xA9 cr\xC3\xA8me\n", 1},
        {"- \xE2\x82\xAC 5\n", 1},
        {"- a\n- b\n- c\n- d\n- e\n- f\n- g\n- h\n", 1},
        {"- a\n- b\n- c\n- d\n- e\n- f\n- g\n- h\n- i\n", 0}, /* 9 items: above {1,8} */
        {"", 0},
        {"- \n", 0},
        {"-milk\n", 0},
        {"- milk", 0},
        {"- a\rb\n", 0},
        {"- a\xE2\x80\xA8" "b\n", 0}, /* U+2028 is excluded */
        {"- a\xC2\x85\n", 0},          /* U+0085 too */
    };
    check_all("list", list, list_v, sizeof list_v / sizeof list_v[0], tok);
    { /* characters cut short: a prefix is taken exactly when some character completes it */
        fc_grammar *g = compile(list);
        fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
        cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
        static const verdict prefix_v[] = {
            {"- \xC2", 1},         /* U+0080..U+00BF, of which only U+0085 is excluded */
            {"- \xC2\x85", 0},     /* ... that one */
            {"- \xE2\x80", 1},     /* U+2000..U+203F: most allowed */
            {"- \xE2\x80\xA8", 0}, /* U+2028 */
            {"- \xF5", 0},         /* no character starts with F5 */
            {"- \xC0", 0},         /* nor with C0 (overlong) */
            {"- \xED\xA0", 0},     /* a surrogate's first two bytes */
            {"- \xF4\x8F", 1},     /* U+10F000.. */
            {"- \xF4\x90", 0},     /* past U+10FFFF */
            {"- \x80", 0},         /* a continuation byte first */
        };
        for (size_t i = 0; i < sizeof prefix_v / sizeof prefix_v[0]; i++) {
            fc_grammar_matcher_reset(m);
            fc_ctx_clear_error(ctx);
            int ok = fc_grammar_matcher_accept_bytes(m, prefix_v[i].text, strlen(prefix_v[i].text)) == FC_OK;
            cr_expect_eq(ok, prefix_v[i].ok, "list prefix %zu should be %s", i, prefix_v[i].ok ? "taken" : "refused");
        }
        fc_ctx_clear_error(ctx);
        fc_grammar_matcher_free(m);
        fc_grammar_free(g);
    }
    static const verdict c_v[] = {
        {"int main() { return 0; }", 1},
        {"int f(int a, float b) { int c = a + b * 2; return c; }\n", 1},
        {"char g() {\n  while (x < 10) { x = x + 1; }\n  if (x == 10) { return 1; } else { return 0; }\n}\n", 1},
        {"int h() { // note\n return 1; }", 1},
        {"int main() { return 0 }", 0},
        {"long main() { return 0; }", 0},
        {"int main( { return 0; }", 0},
        {"int 9x() { return 0; }", 0},
        {"int main() { if x { } }", 0},
    };
    check_all("c_like", c, c_v, sizeof c_v / sizeof c_v[0], tok);
    static const verdict greek_v[] = {
        {"\xCE\xB1\xCE\xB2 \xE4\xB8\x80.", 1},              /* αβ 一. */
        {"\xCF\x89 \xCE\xAC\xCF\x8E \xF0\x9F\x98\x80.", 1}, /* ω άώ 😀. */
        {"\xCE\xB1 \xE4\xB8\x80", 0},                       /* no dot */
        {"a \xE4\xB8\x80.", 0},                             /* Latin a */
        {"\xCE\xB1 \xF0\x9F\x99\x90.", 0},                  /* U+1F650: past the emoji range */
        {"\xCE\xB1 \xE3\x80\x80.", 0},                      /* U+3000: below the CJK range */
        {"\xC1\xB1 \xE4\xB8\x80.", 0},                      /* overlong encoding of 'q' as a "letter" */
        {"\xCE\xB1 \xED\xA0\x80.", 0},                      /* a surrogate */
        {"\xCE \xE4\xB8\x80.", 0},                          /* a truncated character */
    };
    check_all("greek", greek, greek_v, sizeof greek_v / sizeof greek_v[0], tok);
    free(arith), free(list), free(c), free(greek);
    fc_tokenizer_free(tok);
}

Test(grammar, json_and_repetitions)
{
    fc_tokenizer *tok = tokenizer(0);
    fc_grammar *g = fc_grammar_json(ctx, true);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    static const verdict json_v[] = {
        {"{}", 1},
        {"{\"a\": 1}", 1},
        {"{\"a\": [1, -2.5e+10, true, false, null, \"x\\n\\u00e9\\ud83d\\ude00\"], \"b\": {\"c\": {}}}", 1},
        {"{\n  \"k\": \"v\"\n}", 1},
        {"{\"a\": 0.5}", 1},
        {"[1]", 0},              /* the root is an object */
        {"{\"a\": 01}", 0},      /* leading zero */
        {"{\"a\": 1,}", 0},      /* trailing comma */
        {"{'a': 1}", 0},         /* single quotes */
        {"{\"a\": .5}", 0},
        {"{\"a\": \"\\ud800\"}", 0}, /* a lone surrogate escape */
        {"{\"a\": \"\\q\"}", 0},
        {"{\"a\": \"tab\tinside\"}", 0}, /* a raw control character */
        {"{\"a\": NaN}", 0},
        {"{\"a\": 1", 0},
    };
    for (size_t i = 0; i < sizeof json_v / sizeof json_v[0]; i++)
        cr_expect_eq(sentence(m, json_v[i].text, strlen(json_v[i].text)), json_v[i].ok, "json: '%s' should be %s",
                     json_v[i].text, json_v[i].ok ? "accepted" : "refused");
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);

    static const verdict rep_v[] = {{"", 0}, {"a", 0}, {"aa", 1}, {"aaa", 1}, {"aaaa", 1}, {"aaaaa", 0}};
    check_all("a{2,4}", "root ::= \"a\"{2,4}", rep_v, 6, tok);
    static const verdict rep2_v[] = {{"ab", 0}, {"abab", 1}, {"ababab", 1}, {"abababababab", 1}, {"ababa", 0}};
    check_all("(ab){2,}", "root ::= (\"ab\"){2,}", rep2_v, 5, tok);
    static const verdict rep3_v[] = {{"", 1}, {"xyz", 1}, {"xyzxyz", 0}, {"xy", 0}};
    check_all("xyz?", "root ::= \"xyz\"?", rep3_v, 4, tok);
    static const verdict rep4_v[] = {{"", 0}, {"abc", 1}, {"abcabcabc", 1}, {"abcab", 0}};
    check_all("abc+", "root ::= (\"abc\")+", rep4_v, 4, tok);
    static const verdict rep5_v[] = {{"12", 0}, {"123", 1}, {"1234", 0}};
    check_all("[0-9]{3}", "root ::= [0-9]{3}", rep5_v, 3, tok);
    static const verdict any_v[] = {{"x", 1}, {"\xE2\x82\xAC", 1}, {"\xF4\x8F\xBF\xBF", 1}, {"\xF4\x90\x80\x80", 0},
                                    {"\xC0\x80", 0}, {"xy", 0}};
    check_all(".", "root ::= .", any_v, 6, tok);
    static const verdict alt_v[] = {{"cat", 1}, {"dog", 1}, {"", 1}, {"cow", 0}};
    check_all("alternatives", "root ::= \"cat\" | \"dog\" | \"\"  # a comment\n", alt_v, 4, tok);
    static const verdict neg_v[] = {{"b", 1}, {"a", 0}, {"\xC3\xA9", 1}, {"]", 0}, {"-", 0}};
    check_all("[^a\\]-]", "root ::= [^a\\]-]", neg_v, 5, tok);
    static const verdict nest_v[] = {{"()", 1}, {"(())", 1}, {"(()())", 1}, {"(()", 0}, {")(", 0}};
    check_all("parentheses", "root ::= pair+\npair ::= \"(\" pair* \")\"", nest_v, 5, tok);
    fc_tokenizer_free(tok);
}

typedef struct bad {
    const char *text;
    const char *want;
} bad;

Test(grammar, malformed_grammars_name_line_column_and_reason)
{
    static const bad cases[] = {
        {"root ::= foo", "line 1, column 10: rule 'foo' is used but never defined"},
        {"root ::= \"abc", "line 1, column 10: unterminated literal"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= (\"a\"", "line 1, column 10: '(' without its ')'"},
        {"root ::= \"a\")", "line 1, column 13: ')' without its '('"},
        {"root = \"a\"", "line 1, column 6: expected '::=' after the rule name 'root'"},
        {"root ::= root \"a\"", "rule 'root' is left-recursive"},
        {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", "rule 'a' is left-recursive"},
        {"root ::= \"a\"{3,1}", "the maximum is below the minimum"},
        {"root ::= *", "line 1, column 10: '*' has nothing before it to repeat"},
        {"root ::= \"\\q\"", "unknown escape '\\q'"},
        {"root ::= [z-a]", "character range ends below its start"},
        {"x ::= \"a\"", "no rule named 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        {"root ::= \"\\uD800\"", "is not a Unicode scalar value"},
        {"root ::= \"a\"\nfoo ::= bar baz\n", "line 2, column 9: rule 'bar' is used but never defined"},
        {"root ::= \"a\" }", "line 1, column 14: unexpected '}' in rule 'root'"},
        {"root ::= \"a\"{1000000}", "repetition count above"},
        {"root ::= \"\\x4\"", "escape needs 2 hex digits"},
        {"::= \"a\"", "line 1, column 1: expected a rule name"},
        {"root ::= []", "the start rule 'root' can match no text at all"},
        {"root ::= \"\xC3\"", "invalid UTF-8"},
        {"root ::= (\"a\"?)*", "rule 'root' repeats something that can match nothing"},
    };
    fc_tokenizer *tok = tokenizer(0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc_ctx_clear_error(ctx);
        fc_grammar *g = fc_grammar_parse(ctx, cases[i].text, strlen(cases[i].text), NULL);
        fc_grammar_matcher *m = g ? fc_grammar_matcher_new(ctx, g, tok, NULL, 0) : NULL;
        cr_expect(g == NULL || m == NULL, "'%s' compiled", cases[i].text);
        cr_expect(strstr(fc_ctx_error(ctx), cases[i].want) != NULL, "'%s': error '%s', want '%s'", cases[i].text,
                  fc_ctx_error(ctx), cases[i].want);
        fc_grammar_matcher_free(m);
        fc_grammar_free(g);
    }
    fc_tokenizer_free(tok);
}

/* ---- masks against llama.cpp ------------------------------------------- */

typedef struct llama_token_data {
    llama_token id;
    float logit;
    float p;
} llama_token_data;
typedef struct llama_token_data_array {
    llama_token_data *data;
    size_t size;
    int64_t selected;
    bool sorted;
} llama_token_data_array;
struct llama_sampler;

static struct {
    struct llama_sampler *(*init)(const void *vocab, const char *grammar, const char *root);
    void (*apply)(struct llama_sampler *, llama_token_data_array *);
    void (*accept)(struct llama_sampler *, llama_token);
    void (*free)(struct llama_sampler *);
} G;

/* Whole, valid UTF-8 without NUL: the tokens llama.cpp judges exactly.
 * Its grammar reads pieces as C strings (a token that starts with byte 0 is
 * always refused), and its test for a character cut short at the token's
 * end is approximate: [^\x85] refuses the lone byte C2 (U+0080..U+00BF
 * minus U+0085 is not empty) and allows F5 (no character starts with it).
 * Those are checked by hand in example_grammars_accept_and_refuse. */
static int whole_utf8(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = b[i];
        int k = c == 0 ? -1 : c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : -1;
        if (k < 0 || i + (size_t)k > n) return 0;
        uint32_t cp = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
        for (int j = 1; j < k; j++) {
            if ((b[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (b[i + j] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += (size_t)k;
    }
    return 1;
}

static void walk_against_llama(const char *what, const char *gbnf, fc_tokenizer *tok, const void *vocab,
                               uint64_t seed, int steps)
{
    fc_grammar *g = compile(gbnf);
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    struct llama_sampler *ls = G.init(vocab, gbnf, "root");
    cr_assert_not_null(ls, "%s: llama.cpp refused the grammar", what);
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *ours = malloc((size_t)nv * sizeof *ours);
    llama_token_data *cand = malloc((size_t)nv * sizeof *cand);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    fct_rng r = {seed};
    for (int step = 0; step < steps; step++) {
        for (int32_t t = 0; t < nv; t++) ours[t] = 0.0f, cand[t] = (llama_token_data){t, 0.0f, 0.0f};
        cr_assert_eq(fc_grammar_matcher_mask(m, ours, nv), FC_OK, "%s", fc_ctx_error(ctx));
        llama_token_data_array arr = {cand, (size_t)nv, -1, false};
        G.apply(ls, &arr);
        int32_t n_allowed = 0, diffs = 0;
        for (int32_t t = 0; t < nv; t++) {
            int a = ours[t] == 0.0f, b = cand[t].logit != -INFINITY;
            if (fc_tokenizer_token_type(tok, t) == FC_TOKEN_TYPE_CONTROL) {
                cr_expect(!a || t == fc_tokenizer_eos(tok), "%s step %d: control token %d allowed", what, step, t);
                continue;
            }
            const char *piece;
            size_t plen;
            cr_assert_eq(fc_token_piece(ctx, tok, t, 0, &piece, &plen), FC_OK);
            if (!whole_utf8((const unsigned char *)piece, plen)) continue;
            if (a != b && diffs++ < 5) {
                size_t len;
                const char *txt = fc_tokenizer_token_text(tok, t, &len);
                cr_expect_fail("%s step %d: token %d '%.*s': ours %s, llama.cpp %s", what, step, t, (int)len, txt,
                               a ? "allows" : "refuses", b ? "allows" : "refuses");
            }
            if (a && t != fc_tokenizer_eos(tok)) allowed[n_allowed++] = t;
        }
        cr_assert_eq(diffs, 0, "%s step %d: %d tokens differ", what, step, diffs);
        if (n_allowed == 0) break; /* only the end token is left */
        /* prefer longer tokens now and then, so walks get somewhere */
        int32_t pick = allowed[fct_next(&r) % (uint64_t)n_allowed];
        cr_assert_eq(fc_grammar_matcher_allows(m, pick), 1);
        cr_assert_eq(fc_grammar_matcher_accept(m, pick), FC_OK, "%s", fc_ctx_error(ctx));
        G.accept(ls, pick);
    }
    G.free(ls);
    free(ours), free(cand), free(allowed);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
}

Test(grammar, masks_equal_llama_cpp_on_qwen_vocabulary)
{
    const char *why = NULL;
    const fco_llama_api *L = fco_llama_load(&why);
    if (!L) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    *(void **)&G.init = fco_llama_sym("llama_sampler_init_grammar");
    *(void **)&G.apply = fco_llama_sym("llama_sampler_apply");
    *(void **)&G.accept = fco_llama_sym("llama_sampler_accept");
    *(void **)&G.free = fco_llama_sym("llama_sampler_free");
    if (!G.init || !G.apply || !G.accept || !G.free) cr_skip_test("libllama lacks the grammar sampler");
    fc_tokenizer *tok = tokenizer(151936);
    struct llama_model_params mp = L->model_defaults();
    mp.vocab_only = true;
    struct llama_model *model = L->load(fct_path(dir, "big.gguf"), mp);
    cr_assert_not_null(model, "llama.cpp could not load the vocabulary");
    const void *vocab = L->get_vocab(model);

    char *json_text = NULL;
    {
        extern const char fc_grammar_json_rules[];
        size_t n = strlen(fc_grammar_json_rules);
        json_text = malloc(n + 32);
        memcpy(json_text, "root ::= object\n", 16);
        memcpy(json_text + 16, fc_grammar_json_rules, n + 1);
    }
    const char *names[] = {"arithmetic.gbnf", "list.gbnf", "c_like.gbnf", "greek.gbnf"};
    for (int i = 0; i < 4; i++) {
        char *t = fixture(names[i]);
        for (uint64_t s = 1; s <= 2; s++) walk_against_llama(names[i], t, tok, vocab, s, 20);
        free(t);
    }
    for (uint64_t s = 1; s <= 3; s++) walk_against_llama("json", json_text, tok, vocab, s, 30);
    free(json_text);
    L->model_free(model);
    fc_tokenizer_free(tok);
}

/* ---- the sampler seam --------------------------------------------------- */

Test(grammar, filtered_sampling_keeps_allowed_picks_and_replaces_refused_ones)
{
    fc_tokenizer *tok = tokenizer(0);
    fc_grammar *g = compile("root ::= [a-z]+");
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)nv * sizeof *logits);
    fct_rng r = {11};
    int kept = 0, replaced = 0;
    for (int trial = 0; trial < 200; trial++) {
        for (int32_t t = 0; t < nv; t++) logits[t] = (float)fct_uniform(&r, -3, 3);
        fc_sampler_params p = fc_sampler_default_params();
        p.seed = (uint32_t)(trial + 1);
        p.temp = 1.0f;
        fc_sampler *a = fc_sampler_new(ctx, &p), *b = fc_sampler_new(ctx, &p);
        fc_token_filter f = fc_grammar_matcher_filter(m);
        fc_token plain = fc_sampler_sample(a, logits, nv), got = fc_sampler_sample_filtered(b, logits, nv, &f);
        cr_assert_neq(got, FC_TOKEN_NONE, "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_grammar_matcher_allows(m, got), 1, "token %d is not allowed", (int)got);
        if (fc_grammar_matcher_allows(m, plain) == 1) {
            cr_expect_eq(got, plain, "an allowed pick was replaced");
            kept++;
        } else {
            replaced++;
        }
        fc_sampler_free(a);
        fc_sampler_free(b);
    }
    cr_expect(kept > 0 && replaced > 0, "kept %d, replaced %d: both paths must run", kept, replaced);
    free(logits);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    fc_tokenizer_free(tok);
}

Test(grammar, sampled_json_parses)
{
    fc_tokenizer *tok = tokenizer(0);
    fc_grammar *g = fc_grammar_json(ctx, true);
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)nv * sizeof *logits);
    char *text = malloc(1 << 16);
    int finished = 0;
    for (uint32_t seed = 1; seed <= 40; seed++) {
        const fct_walk w = {.seed = seed, .rng_seed = seed, .lean_after = 60, .max_steps = 400};
        size_t n = 0;
        const int ended = fct_grammar_walk(ctx, m, tok, &w, logits, text, 1 << 16, &n);
        if (ended) {
            finished++;
            char err[256];
            fj_doc *d = fj_parse(text, n, NULL, err, sizeof err);
            cr_expect_not_null(d, "seed %u: sampled text is not JSON (%s): %.*s", seed, err, (int)n, text);
            if (d) cr_expect_eq(fj_root(d)->type, FJ_OBJ, "seed %u: the root is not an object", seed);
            fj_free(d);
        }
    }
    cr_expect_geq(finished, 30, "only %d of 40 walks reached the end token", finished);
    free(text), free(logits);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    fc_tokenizer_free(tok);
}

/* Hostile grammars: no crash, no stack overflow, no quadratic compile. */
Test(grammar, hostile_grammars_are_bounded)
{
    fc_tokenizer *tok = tokenizer(0);
    /* a closure that walks a 100000-deep nest of nullable repeats (C recursion would overflow) */
    static const verdict deep_v[] = {{"", 1}, {"aaaa", 1}, {"b", 0}};
    check_all("(a?){0,100000}", "root ::= (\"a\"?){0,100000}", deep_v, 3, tok);
    /* parentheses 100000 deep: refused with a position, not a stack overflow in the parser */
    size_t n = 100000;
    char *deep = malloc(2 * n + 32);
    size_t k = (size_t)sprintf(deep, "root ::= ");
    for (size_t i = 0; i < n; i++) deep[k++] = '(';
    k += (size_t)sprintf(deep + k, "\"a\"");
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_grammar_parse(ctx, deep, k, NULL));
    cr_expect(strstr(fc_ctx_error(ctx), "parentheses nested deeper than"), "%s", fc_ctx_error(ctx));
    free(deep);
    /* 200000 references to one rule: compiles at once (the names are hashed) */
    char *wide = malloc(200000 * 2 + 64);
    k = (size_t)sprintf(wide, "root ::= ");
    for (size_t i = 0; i < 200000; i++) k += (size_t)sprintf(wide + k, "b ");
    k += (size_t)sprintf(wide + k, "\nb ::= \"x\"?\n");
    fc_ctx_clear_error(ctx);
    fc_grammar *g = fc_grammar_parse(ctx, wide, k, NULL);
    cr_expect_not_null(g, "%s", fc_ctx_error(ctx));
    fc_grammar_free(g);
    free(wide);
    /* a name like a generated rule's is the user's own rule */
    static const verdict gen_v[] = {{"xy", 1}, {"x", 0}};
    check_all("root-1", "root ::= (\"x\") root-1\nroot-1 ::= \"y\"", gen_v, 2, tok);
    fc_ctx_clear_error(ctx);
    fc_tokenizer_free(tok);
}

/* An end token is judged as an end token by the mask too, whatever bytes it has. */
Test(grammar, end_tokens_with_text_are_ends_in_the_mask)
{
    fc_tokenizer *tok = tokenizer(0);
    const fc_token a = fc_tokenizer_find(tok, "a", 1);
    cr_assert_neq(a, FC_TOKEN_NONE);
    fc_grammar *g = compile("root ::= \"ab\"");
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, &a, 1);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *l = calloc((size_t)nv, sizeof *l);
    cr_assert_eq(fc_grammar_matcher_mask(m, l, nv), FC_OK);
    cr_expect(l[a] == -INFINITY, "the end token 'a' is allowed before the grammar is complete");
    cr_expect_eq(fc_grammar_matcher_allows(m, a), 0);
    cr_assert_eq(fc_grammar_matcher_accept_bytes(m, "ab", 2), FC_OK);
    for (int32_t t = 0; t < nv; t++) l[t] = 0.0f;
    cr_assert_eq(fc_grammar_matcher_mask(m, l, nv), FC_OK);
    cr_expect(l[a] == 0.0f, "the end token is refused once the grammar is complete");
    free(l);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    fc_tokenizer_free(tok);
}

/* A lazy grammar: free text until the trigger, then the grammar from the trigger on. */
Test(grammar, lazy_grammar_waits_for_its_trigger)
{
    fc_tokenizer *tok = tokenizer(0);
    fc_grammar *g = compile("root ::= \"<call>\" [0-9]+ \"</call>\"");
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_grammar_matcher_set_trigger(m, "<call>"), FC_OK);
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *l = calloc((size_t)nv, sizeof *l);
    /* waiting: anything goes, nothing is masked, the text may end */
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "any text, even 123 </call>", 26), FC_OK);
    cr_assert_eq(fc_grammar_matcher_mask(m, l, nv), FC_OK);
    int masked = 0;
    for (int32_t t = 0; t < nv; t++) masked += l[t] != 0.0f;
    cr_expect_eq(masked, 0);
    cr_expect(fc_grammar_matcher_complete(m));
    cr_expect_eq(fc_grammar_matcher_allows(m, fc_tokenizer_eos(tok)), 1);
    /* the trigger, split across two feeds, with the first digit after it in the same feed */
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "then <ca", 8), FC_OK);
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "ll>4", 4), FC_OK);
    cr_expect(!fc_grammar_matcher_complete(m), "the grammar holds now");
    fc_ctx_clear_error(ctx);
    cr_expect_neq(fc_grammar_matcher_accept_bytes(m, "x", 1), FC_OK, "a letter after the digits is refused");
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "2</call>", 8), FC_OK);
    cr_expect(fc_grammar_matcher_done(m));
    /* reset: waiting again */
    fc_grammar_matcher_reset(m);
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "xyz", 3), FC_OK);
    /* text after the trigger that the grammar refuses is refused, and the matcher keeps waiting */
    fc_ctx_clear_error(ctx);
    cr_expect_neq(fc_grammar_matcher_accept_bytes(m, "<call>z", 7), FC_OK);
    fc_ctx_clear_error(ctx);
    free(l);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    fc_tokenizer_free(tok);
}

/* Token elements: <|im_start|> (a control token of the Qwen vocabulary)
 * is allowed exactly where the grammar names it — never by a character
 * class or a literal elsewhere — and its text is accepted there too; a
 * lazy grammar whose trigger is a control token's text wakes on that
 * token. <[N]> (a token id) is refused with the reason. */
Test(grammar, token_elements_match_control_tokens_only_where_named)
{
    fc_tokenizer *tok = tokenizer(0);
    const fc_token im = fc_tokenizer_find(tok, "<|im_start|>", 12);
    cr_assert_neq(im, FC_TOKEN_NONE);
    cr_assert_eq(fc_tokenizer_token_type(tok, im), FC_TOKEN_TYPE_CONTROL);
    fc_grammar *g = compile("root ::= \"a\" <|im_start|> \"b\"");
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_grammar_matcher_allows(m, im), 0, "the token before 'a'");
    cr_assert_eq(fc_grammar_matcher_accept_bytes(m, "a", 1), FC_OK);
    cr_expect_eq(fc_grammar_matcher_allows(m, im), 1, "the token where the grammar names it");
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *l = calloc((size_t)nv, sizeof *l);
    cr_assert_eq(fc_grammar_matcher_mask(m, l, nv), FC_OK);
    cr_expect(l[im] == 0.0f, "the mask keeps the named token");
    cr_assert_eq(fc_grammar_matcher_accept(m, im), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_grammar_matcher_accept_bytes(m, "b", 1), FC_OK);
    cr_expect(fc_grammar_matcher_complete(m));
    /* the text itself is accepted in its place (a user-defined token is matched so) */
    fc_grammar_matcher_reset(m);
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "a<|im_start|>b", 14), FC_OK, "%s", fc_ctx_error(ctx));
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    /* nowhere else: not in a class, not after a literal that spells it */
    static const char *const others[] = {"root ::= [^x]*", "root ::= .*", "root ::= \"<|im_start|>\" \"b\""};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        g = compile(others[i]);
        m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
        cr_assert_not_null(m);
        cr_expect_eq(fc_grammar_matcher_allows(m, im), 0, "%s allows the control token", others[i]);
        for (int32_t t = 0; t < nv; t++) l[t] = 0.0f;
        cr_assert_eq(fc_grammar_matcher_mask(m, l, nv), FC_OK);
        cr_expect(l[im] == -INFINITY, "%s: the mask keeps the control token", others[i]);
        fc_grammar_matcher_free(m);
        fc_grammar_free(g);
    }
    /* a lazy grammar woken by the control token, fed as the token it is */
    g = compile("root ::= <|im_start|> [0-9]");
    m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m);
    cr_assert_eq(fc_grammar_matcher_set_trigger(m, "<|im_start|>"), FC_OK);
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "free text", 9), FC_OK);
    cr_assert_eq(fc_grammar_matcher_accept(m, im), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect(!fc_grammar_matcher_complete(m), "woken: a digit must follow");
    cr_expect_eq(fc_grammar_matcher_accept_bytes(m, "7", 1), FC_OK);
    cr_expect(fc_grammar_matcher_complete(m));
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
    free(l);
    /* ids need a vocabulary, which a grammar does not have; a '<' without its '>' */
    cr_expect_null(fc_grammar_parse(ctx, "root ::= <[151644]>", 19, "root"));
    cr_expect(strstr(fc_ctx_error(ctx), "token id"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_expect_null(fc_grammar_parse(ctx, "root ::= <abc \"x\"", 17, "root"));
    cr_expect(strstr(fc_ctx_error(ctx), "'<' without"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_tokenizer_free(tok);
}
