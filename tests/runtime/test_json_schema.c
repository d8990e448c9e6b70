/* SPDX-License-Identifier: MIT */
/* JSON Schema to grammar (fc_json_schema_to_gbnf, fc_grammar_from_json_schema).
 *
 * - Soundness against an independent validator: for each schema of
 *   tests/grammars/schemas/ (nested objects, required and optional
 *   properties, enum, const, arrays with bounds, prefixItems, anyOf, oneOf,
 *   allOf, $ref recursion, formats, patterns, integer ranges, string
 *   lengths, additionalProperties), 30 texts are sampled under the grammar
 *   (temperature 1, random logits that lean towards closing so walks end)
 *   and every one must validate with Python's jsonschema, run by
 *   tests/check_json_schema.py (its formats checked). Without the module
 *   the test skips, saying why.
 * - Hand-written instances per schema, accepted or refused (the expected
 *   answers by hand: "-16" is not in [-15, 2047], "007" is not JSON).
 * - Refusals: unsupported keywords and malformed schemas get an error that
 *   names the keyword or the value and where it is. */
#include <criterion/criterion.h>
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
#include "io/json_value.h"

FCT_SUITE_WITH_TMPDIR(json_schema, 1, "fc_json_schema_");

static const char *const corpus[] = {
    "person.json",   "enum_const.json", "array_bounds.json", "anyof.json",      "tree.json",
    "formats.json",  "pattern.json",    "int_range.json",    "digit.json",      "strlen.json",
    "tuple.json",    "additional.json", "allof.json",        "type_array.json", "oneof_defs.json",
};
#define N_CORPUS (sizeof corpus / sizeof corpus[0])

static char *schema_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/../grammars/schemas/%s", FC_GOLDEN_DIR, name);
    return path;
}

static char *schema_text(const char *name)
{
    size_t n;
    return (char *)fct_read_file(schema_path(name), &n);
}

static fc_tokenizer *tokenizer(void)
{
    const char *path = fct_path(dir, "tiny.gguf");
    fc_make_model_options o = {.preset = "tiny", .seed = 5};
    cr_assert_eq(fc_llm_make_model(ctx, path, &o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tokenizer *t = fc_tokenizer_load(ctx, path);
    cr_assert_not_null(t, "%s", fc_ctx_error(ctx));
    return t;
}

static fc_grammar *compile_schema(const char *what, const char *schema)
{
    fc_grammar *g = fc_grammar_from_json_schema(ctx, schema, strlen(schema));
    if (!g) {
        char *text = fc_json_schema_to_gbnf(ctx, schema, strlen(schema));
        cr_assert_fail("%s: no grammar: %s\n%s", what, fc_ctx_error(ctx), text ? text : "(no GBNF either)");
    }
    return g;
}

/* ---- sampling against the independent validator ---------------------- */

static const char *checker_cmd(const char *args, char *cmd, size_t cap)
{
    snprintf(cmd, cap, "python3 '%s/../check_json_schema.py' %s 2>&1", FC_GOLDEN_DIR, args);
    return cmd;
}

/* One walk under the grammar; the text in text[0..*n), 1 when the end token came. */
static int walk(fc_grammar_matcher *m, fc_tokenizer *tok, uint32_t seed, float *logits, char *text, size_t cap,
                size_t *n)
{
    const fct_walk w = {.seed = seed, .rng_seed = seed * 7919u + 1, .lean_after = 40, .max_steps = 500};
    return fct_grammar_walk(ctx, m, tok, &w, logits, text, cap, n);
}

Test(json_schema, sampled_texts_validate_with_python_jsonschema, .timeout = 900)
{
    char cmd[4096], out[1 << 16];
    int rc = fct_run(checker_cmd("--check", cmd, sizeof cmd), out, sizeof out);
    if (rc == 77) cr_skip_test("independent validator unavailable: %s", out);
    cr_assert_eq(rc, 0, "check_json_schema.py --check failed (%d): %s", rc, out);

    fc_tokenizer *tok = tokenizer();
    int32_t nv = fc_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)nv * sizeof *logits);
    char *text = malloc(1 << 16);
    for (size_t c = 0; c < N_CORPUS; c++) {
        char *schema = schema_text(corpus[c]);
        fc_grammar *g = compile_schema(corpus[c], schema);
        fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
        cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
        char samples[512];
        snprintf(samples, sizeof samples, "%s/%s.samples", dir, corpus[c]);
        FILE *f = fopen(samples, "wb");
        cr_assert_not_null(f, "cannot write %s", samples);
        int finished = 0;
        for (uint32_t seed = 1; seed <= 30; seed++) {
            size_t n;
            if (!walk(m, tok, seed + 100u * (uint32_t)c, logits, text, 1 << 16, &n)) continue;
            finished++;
            char err[256];
            fj_doc *d = fj_parse(text, n, NULL, err, sizeof err);
            cr_expect_not_null(d, "%s seed %u: not JSON for the strict reader (%s): %.*s", corpus[c], seed, err,
                               (int)n, text);
            fj_free(d);
            /* one text a line: a newline can only be whitespace between tokens */
            for (size_t i = 0; i < n; i++)
                if (text[i] == '\n') text[i] = ' ';
            fwrite(text, 1, n, f);
            fputc('\n', f);
        }
        fclose(f);
        cr_expect_geq(finished, 25, "%s: only %d of 30 walks reached the end token", corpus[c], finished);
        char args[2048];
        snprintf(args, sizeof args, "'%s' '%s'", schema_path(corpus[c]), samples);
        rc = fct_run(checker_cmd(args, cmd, sizeof cmd), out, sizeof out);
        cr_expect_eq(rc, 0, "%s: the validator refused samples (exit %d):\n%s", corpus[c], rc, out);
        cr_log_info("%s: %d of 30 walks ended; validator: %s", corpus[c], finished, out);
        fc_grammar_matcher_free(m);
        fc_grammar_free(g);
        free(schema);
    }
    free(text), free(logits);
    fc_tokenizer_free(tok);
}

/* ---- instances by hand -------------------------------------------------- */

typedef struct verdict {
    const char *text;
    int ok;
} verdict;

static int sentence(fc_grammar_matcher *m, const char *s)
{
    fc_grammar_matcher_reset(m);
    fc_ctx_clear_error(ctx);
    if (fc_grammar_matcher_accept_bytes(m, s, strlen(s)) != FC_OK) return 0;
    return fc_grammar_matcher_complete(m);
}

static void check(const char *what, const char *schema, const verdict *v, size_t n, fc_tokenizer *tok)
{
    fc_grammar *g = compile_schema(what, schema);
    fc_grammar_matcher *m = fc_grammar_matcher_new(ctx, g, tok, NULL, 0);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(sentence(m, v[i].text), v[i].ok, "%s: '%s' should be %s", what, v[i].text,
                     v[i].ok ? "accepted" : "refused");
    fc_ctx_clear_error(ctx);
    fc_grammar_matcher_free(m);
    fc_grammar_free(g);
}

static void check_file(const char *name, const verdict *v, size_t n, fc_tokenizer *tok)
{
    char *s = schema_text(name);
    check(name, s, v, n, tok);
    free(s);
}

#define CHECK_FILE(name, v) check_file(name, v, sizeof v / sizeof v[0], tok)
#define CHECK(what, schema, v) check(what, schema, v, sizeof v / sizeof v[0], tok)

Test(json_schema, corpus_instances_accept_and_refuse)
{
    fc_tokenizer *tok = tokenizer();
    static const verdict int_range[] = {
        {"-15", 1}, {"0", 1},   {"2047", 1},  {"-1", 1},   {"9", 1},     {"10", 1},    {"1999", 1},  {"2039", 1},
        {"-16", 0}, {"2048", 0}, {"007", 0}, {"-0", 0},  {"3000", 0},  {"1.5", 0},   {"20470", 0}, {"", 0},
        {"+5", 0},  {"-", 0},
    };
    CHECK_FILE("int_range.json", int_range);
    static const verdict digit[] = {{"0", 1}, {"9", 1}, {"5", 1}, {"10", 0}, {"-1", 0}, {"00", 0}};
    CHECK_FILE("digit.json", digit);
    static const verdict strlen_v[] = {
        {"\"ab\"", 1}, {"\"abcdef\"", 1}, {"\"\\u00e9\\n\"", 1}, {"\"\xC3\xA9\xC3\xA9\"", 1},
        {"\"a\"", 0},  {"\"abcdefg\"", 0}, {"ab", 0},             {"\"\"", 0},
    };
    CHECK_FILE("strlen.json", strlen_v);
    static const verdict person[] = {
        {"{\"name\": \"Ann\", \"age\": 31}", 1},
        {"{\"name\":\"Ann\",\"age\":150,\"address\":{\"city\":\"Oslo\",\"zip\":\"01234\"},\"tags\":[\"a\",\"b\"],"
         "\"active\":true}",
         1},
        {"{\"name\": \"Ann\", \"age\": 31, \"score\": -1.5e3}", 1},
        {"{\"name\": \"Ann\"}", 0},                               /* age is required */
        {"{\"age\": 31, \"name\": \"Ann\"}", 0},                  /* the schema's order */
        {"{\"name\": \"Ann\", \"age\": 151}", 0},
        {"{\"name\": \"\", \"age\": 1}", 0},                      /* minLength 1 */
        {"{\"name\": \"Ann\", \"age\": 1, \"x\": 1}", 0},         /* no additional properties */
        {"{\"name\": \"A\", \"age\": 1, \"address\": {\"zip\": \"01234\"}}", 0}, /* city required */
        {"{\"name\": \"A\", \"age\": 1, \"address\": {\"city\": \"O\", \"zip\": \"1234\"}}", 0},
        {"{\"name\": \"A\", \"age\": 1, \"tags\": [\"a\", \"b\", \"c\", \"d\"]}", 0}, /* maxItems 3 */
    };
    CHECK_FILE("person.json", person);
    static const verdict enums[] = {
        {"{\"kind\": \"point\", \"color\": \"red\"}", 1},
        {"{\"kind\": \"point\", \"color\": null}", 1},
        {"{\"kind\": \"point\", \"color\": 3}", 1},
        {"{\"kind\":\"point\",\"color\":\"caf\xC3\xA9 \\\"noir\\\"\"}", 1},
        {"{\"kind\":\"point\",\"color\":\"red\",\"flags\":{\"a\":[1,2.5,{\"b\":null}],\"c\":\"x\\\"y\\\\z\",\"d\":true}}",
         1},
        {"{\"kind\": \"point\", \"color\": \"red\", \"size\": \"M\"}", 1},
        {"{\"kind\": \"point\", \"color\": \"red\", \"size\": 42}", 0}, /* 42 is not a string */
        {"{\"kind\": \"line\", \"color\": \"red\"}", 0},
        {"{\"kind\": \"point\", \"color\": \"pink\"}", 0},
        {"{\"kind\": \"point\", \"color\": 4}", 0},
    };
    CHECK_FILE("enum_const.json", enums);
    static const verdict arrays[] = {
        {"[1, 2]", 1}, {"[0,9,3,4,5]", 1}, {"[ 7 , 8 ]", 1}, {"[1]", 0}, {"[1,2,3,4,5,6]", 0}, {"[10, 1]", 0},
        {"[]", 0},
    };
    CHECK_FILE("array_bounds.json", arrays);
    static const verdict anyof[] = {
        {"{\"value\": \"hi\"}", 1},         {"{\"value\": -5}", 1},      {"{\"value\": {\"x\": 1.5}}", 1},
        {"{\"value\": {\"x\": 1, \"y\": 2}}", 1}, {"{\"value\": null}", 1}, {"{\"value\": 6}", 0},
        {"{\"value\": {\"y\": 2}}", 0},      {"{\"value\": true}", 0},   {"{}", 0},
    };
    CHECK_FILE("anyof.json", anyof);
    static const verdict tree[] = {
        {"{\"value\": 1}", 1},
        {"{\"value\": 1, \"children\": []}", 1},
        {"{\"value\": 1, \"children\": [{\"value\": 2, \"children\": [{\"value\": 3}]}, {\"value\": 4}]}", 1},
        {"{\"value\": 1, \"children\": [{\"children\": []}]}", 0},
        {"{\"value\": 100}", 0},
        {"{\"value\":1,\"children\":[{\"value\":1},{\"value\":1},{\"value\":1},{\"value\":1}]}", 0},
    };
    CHECK_FILE("tree.json", tree);
    static const verdict formats[] = {
        {"{\"day\":\"2024-02-29\",\"at\":\"23:59:59Z\",\"when\":\"2000-12-31T00:00:00.5+05:30\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         1},
        {"{\"day\":\"2023-02-29\",\"at\":\"23:59:59Z\",\"when\":\"2000-12-31T00:00:00Z\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         0}, /* not a leap year */
        {"{\"day\":\"1900-02-29\",\"at\":\"23:59:59Z\",\"when\":\"2000-02-29T00:00:00Z\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         0}, /* 1900 is not a leap year (2000 is) */
        {"{\"day\":\"2024-04-31\",\"at\":\"23:59:59Z\",\"when\":\"2000-12-31T00:00:00Z\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         0},
        {"{\"day\":\"2024-01-01\",\"at\":\"24:00:00Z\",\"when\":\"2000-12-31T00:00:00Z\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         0},
        {"{\"day\":\"2024-01-01\",\"at\":\"12:00:00\",\"when\":\"2000-12-31T00:00:00Z\","
         "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}",
         0}, /* no offset */
        {"{\"day\":\"2024-01-01\",\"at\":\"12:00:00Z\",\"when\":\"2000-12-31T00:00:00Z\","
         "\"id\":\"123e4567e89b-12d3-a456-426614174000\"}",
         0},
    };
    CHECK_FILE("formats.json", formats);
    static const verdict pattern[] = {
        {"{\"code\":\"AB-12\",\"phone\":\"(555) 123-4567\",\"word\":\"abcdcz\",\"color\":\"#a0B1c2\",\"free\":\"a.b\"}",
         1},
        {"{\"code\":\"ABC-1234\",\"phone\":\"(555) 123-4567\",\"word\":\"abd\",\"color\":\"a0B1c2\",\"free\":\"\\\\x\"}",
         1},
        {"{\"code\":\"A-12\",\"phone\":\"(555) 123-4567\",\"word\":\"abc\",\"color\":\"#a0B1c2\",\"free\":\"a\"}", 0},
        {"{\"code\":\"AB-12\",\"phone\":\"555 123-4567\",\"word\":\"abc\",\"color\":\"#a0B1c2\",\"free\":\"a\"}", 0},
        {"{\"code\":\"AB-12\",\"phone\":\"(555) 123-4567\",\"word\":\"ab\",\"color\":\"#a0B1c2\",\"free\":\"a\"}", 0},
        {"{\"code\":\"AB-12\",\"phone\":\"(555) 123-4567\",\"word\":\"abc\",\"color\":\"#a0B1g2\",\"free\":\"a\"}", 0},
        {"{\"code\":\"AB-12\",\"phone\":\"(555) 123-4567\",\"word\":\"abc\",\"color\":\"#a0B1c2\",\"free\":\"a b\"}", 0},
    };
    CHECK_FILE("pattern.json", pattern);
    static const verdict tuple[] = {
        {"[\"ab\", 12]", 1}, {"[\"ab\", 1, true]", 1}, {"[\"ab\"]", 0}, {"[\"ab\", 13]", 0}, {"[\"ab\", 1, true, 1]", 0},
        {"[1, 1]", 0},
    };
    CHECK_FILE("tuple.json", tuple);
    static const verdict additional[] = {
        {"{\"id\": 5}", 1},
        {"{\"id\": 5, \"note\": \"hi\"}", 1},
        {"{\"id\": 5, \"note\": \"hi\", \"x\": \"abc\", \"idx\": \"\"}", 1},
        {"{\"id\": 5, \"i\": \"a\", \"notes\": \"b\", \"\": \"c\"}", 1},
        {"{\"id\": 5, \"x\": 3}", 0},           /* extras are strings */
        {"{\"id\": 5, \"x\": \"abcdef\"}", 0},  /* of at most 5 */
        {"{\"id\": 5, \"id\": \"a\"}", 0},      /* a declared key is not an extra */
        {"{\"id\": 5, \"note\": \"a\", \"note\": \"b\"}", 0},
        {"{\"id\": 5, \"\\u0069d\": \"a\"}", 0}, /* no escapes while spelling a declared key */
        {"{\"x\": \"a\"}", 0},
    };
    CHECK_FILE("additional.json", additional);
    static const verdict allof[] = {
        {"{\"a\": 1, \"c\": \"x\"}", 1}, {"{\"a\": 3, \"b\": false, \"c\": \"\"}", 1}, {"{\"a\": 1}", 0},
        {"{\"c\": \"x\"}", 0},           {"{\"a\": 4, \"c\": \"x\"}", 0},
    };
    CHECK_FILE("allof.json", allof);
    static const verdict types[] = {
        {"{\"maybe\": null, \"n\": 100}", 1}, {"{\"maybe\": \"abc\", \"n\": [null, null]}", 1},
        {"{\"maybe\": true, \"n\": 250}", 1}, {"{\"maybe\": \"abcd\", \"n\": 100}", 0},
        {"{\"maybe\": 1, \"n\": 100}", 0},    {"{\"maybe\": null, \"n\": 99}", 0},
        {"{\"maybe\": null, \"n\": [1]}", 0},
    };
    CHECK_FILE("type_array.json", types);
    static const verdict oneof[] = {{"[]", 1}, {"[-3, \"ab\", 3]", 1}, {"[4]", 0}, {"[\"\"]", 0}, {"[1,2,3,4,5]", 0}};
    CHECK_FILE("oneof_defs.json", oneof);

    /* smaller cases written here */
    static const verdict big[] = {{"-9999999999999999", 1}, {"9999999999999999", 1}, {"10000000000000000", 0}};
    CHECK("integer, no bounds", "{\"type\": \"integer\", \"minimum\": -1e300}", big);
    static const verdict excl[] = {{"2", 1}, {"3", 1}, {"1", 0}, {"4", 0}};
    CHECK("fractional bounds", "{\"type\": \"integer\", \"exclusiveMinimum\": 1.5, \"maximum\": 3.9}", excl);
    static const verdict any[] = {{"1", 1}, {"\"x\"", 1}, {"[{}]", 1}, {"null", 1}, {"nul", 0}};
    CHECK("empty schema", "{}", any);
    CHECK("true schema", "true", any);
    CHECK("annotations only", "{\"description\": \"anything\", \"title\": \"t\"}", any);
    static const verdict obj_any[] = {{"{}", 1}, {"{\"a\": [1]}", 1}, {"[]", 0}};
    CHECK("object without properties", "{\"type\": \"object\"}", obj_any);
    static const verdict obj_none[] = {{"{}", 1}, {"{ }", 1}, {"{\"a\": 1}", 0}};
    CHECK("additionalProperties false", "{\"type\": \"object\", \"additionalProperties\": false}", obj_none);
    static const verdict root_ref[] = {{"[]", 1}, {"[[], [[]]]", 1}, {"[1]", 0}};
    CHECK("$ref to the root", "{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}", root_ref);
    static const verdict alt[] = {{"\"cat\"", 1}, {"\"dog\"", 1}, {"\"x-cat-y\"", 1}, {"\"hotdogs\"", 1}, {"\"cow\"", 0}};
    CHECK("unanchored alternation", "{\"type\": \"string\", \"pattern\": \"cat|dog\"}", alt);
    static const verdict esc[] = {{"\"a\\\"b\"", 1}, {"\"a\\\\b\"", 1}, {"\"a\\nb\"", 1}, {"\"a\\tb\"", 0},
                                  {"\"a\"", 0}};
    CHECK("escaped characters in a pattern", "{\"pattern\": \"^a[\\\"\\\\\\\\\\n]b$\"}", esc);
    static const verdict neg[] = {{"\"\xC3\xA9\"", 1}, {"\"b\"", 1}, {"\"a\"", 0}, {"\"\\n\"", 1}, {"\"\"", 0}};
    CHECK("negated class", "{\"type\": \"string\", \"pattern\": \"^[^a]$\"}", neg);
    static const verdict dot[] = {{"\"\xE2\x82\xAC\"", 1}, {"\"\\\"\"", 1}, {"\"\\n\"", 0}};
    CHECK("dot", "{\"type\": \"string\", \"pattern\": \"^.$\"}", dot);
    static const verdict q[] = {{"\"aaa\"", 1}, {"\"aaaa\"", 1}, {"\"aa\"", 0}, {"\"a{3,4}\"", 0}, {"\"x{y\"", 0}};
    CHECK("counted repetition", "{\"type\": \"string\", \"pattern\": \"^a{3,4}$\"}", q);
    static const verdict brace[] = {{"\"x{y\"", 1}, {"\"xy\"", 0}};
    CHECK("a literal brace", "{\"type\": \"string\", \"pattern\": \"^x{y$\"}", brace);
    fc_tokenizer_free(tok);
}

/* ---- refusals ----------------------------------------------------------- */

typedef struct bad {
    const char *schema;
    const char *want;
} bad;

Test(json_schema, unsupported_and_malformed_schemas_are_refused_by_name)
{
    static const bad cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\", \"multipleOf\": 5}}}",
         "json schema at /properties/age: keyword 'multipleOf' is not supported"},
        {"{\"type\": \"object\", \"patternProperties\": {\"^x\": {}}}", "keyword 'patternProperties' is not supported"},
        {"{\"if\": {\"type\": \"string\"}, \"then\": {\"maxLength\": 3}, \"else\": {}}", "keyword 'if' is not supported"},
        {"{\"not\": {\"type\": \"string\"}}", "keyword 'not' is not supported"},
        {"{\"type\": \"object\", \"dependentRequired\": {\"a\": [\"b\"]}}",
         "keyword 'dependentRequired' is not supported"},
        {"{\"type\": \"array\", \"uniqueItems\": true}", "keyword 'uniqueItems' is not supported"},
        {"{\"type\": \"string\", \"format\": \"email\"}", "format 'email' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"^(?=a)a$\"}", "lookahead '(?=' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"(?<!a)b\"}", "lookbehind '(?<!' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}", "backreference '\\1' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"a(b\"}", "'(' without its ')'"},
        {"{\"type\": \"string\", \"pattern\": \"a^b\"}", "anchor '^' inside the pattern"},
        {"{\"type\": \"string\", \"pattern\": \"a|^b\"}", "anchor '^' inside the pattern"},
        {"{\"type\": \"string\", \"pattern\": \"\\\\bword\"}", "word boundary '\\b' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"(?i)abc\"}", "group '(?i' is not supported"},
        {"{\"type\": \"string\", \"pattern\": \"*a\"}", "'*' has nothing before it to repeat"},
        {"{\"$ref\": \"https://example.com/s.json\"}", "remote $ref 'https://example.com/s.json' is not supported"},
        {"{\"$ref\": \"#/$defs/missing\"}", "$ref '#/$defs/missing' points to nothing"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/a\", \"maxLength\": 2}}}",
         "json schema at /properties/a: keyword 'maxLength' next to '$ref' is not supported"},
        {"{\"type\": \"obj\"", "json schema: not valid JSON"},
        {"not json", "json schema: not valid JSON"},
        {"{\"type\": 42}", "'type' must be a type name or an array of them, not a number"},
        {"{\"type\": \"float\"}", "unknown type 'float'"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"array\", \"minItems\": 5, \"maxItems\": 2}}",
         "json schema at /items: 'minItems' is 5, above 'maxItems' 2"},
        {"{\"type\": \"string\", \"minLength\": -1}", "'minLength' must be a non-negative integer"},
        {"{\"type\": \"string\", \"maxLength\": 1000000}", "'maxLength' is 1000000, above the limit"},
        {"{\"type\": \"number\", \"minimum\": 0}", "keyword 'minimum' on type 'number' is not supported"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer"},
        {"{\"type\": \"string\", \"minimum\": 5}", "keyword 'minimum' applies to none of the types in 'type'"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}",
         "required property 'b' is not in 'properties'"},
        {"{\"allOf\": [{\"type\": \"string\"}, {\"maxLength\": 3}]}", "inside 'allOf' is not supported"},
        {"{\"allOf\": [{\"properties\": {\"a\": {}}}, {\"properties\": {\"a\": {}}}]}",
         "property 'a' is declared by two 'allOf' members"},
        {"{\"enum\": []}", "'enum' must be a non-empty array"},
        {"{\"type\": \"string\", \"enum\": [1, 2]}", "no value of 'enum' has a type in 'type'"},
        {"{\"anyOf\": [{\"type\": \"string\"}, 5]}", "json schema at /anyOf/1: a schema must be an object or a boolean"},
        {"{\"oneOf\": [false]}", "json schema at /oneOf/0: the schema false matches no value"},
        {"{\"type\": \"array\", \"items\": [{}, {}]}", "'items' as an array"},
        {"{\"type\": \"object\", \"additionalProperties\": 3}", "'additionalProperties' must be a boolean or a schema"},
        {"{\"properties\": {\"a~b/c\": {\"type\": \"string\", \"format\": \"ipv4\"}}}",
         "json schema at /properties/a~0b~1c: format 'ipv4' is not supported"},
        {"[]", "a schema must be an object or a boolean, not an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc_ctx_clear_error(ctx);
        char *text = fc_json_schema_to_gbnf(ctx, cases[i].schema, strlen(cases[i].schema));
        cr_expect_null(text, "'%s' was converted:\n%s", cases[i].schema, text ? text : "");
        cr_expect(strstr(fc_ctx_error(ctx), cases[i].want) != NULL, "'%s': error '%s', want '%s'", cases[i].schema,
                  fc_ctx_error(ctx), cases[i].want);
        free(text);
        fc_ctx_clear_error(ctx);
        fc_grammar *g = fc_grammar_from_json_schema(ctx, cases[i].schema, strlen(cases[i].schema));
        cr_expect_null(g, "'%s' compiled", cases[i].schema);
        cr_expect(strstr(fc_ctx_error(ctx), cases[i].want) != NULL, "'%s': error '%s'", cases[i].schema,
                  fc_ctx_error(ctx));
        fc_grammar_free(g);
    }
}

Test(json_schema, deep_and_self_referencing_schemas_fail_cleanly)
{
    /* 100 definitions, each a reference to the next: deeper than the cap */
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{\"$ref\": \"#/$defs/d0\", \"$defs\": {");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"d%d\": {\"$ref\": \"#/$defs/d%d\"}", i ? ", " : "", i, i + 1);
    n += (size_t)snprintf(s + n, cap - n, ", \"d100\": {\"type\": \"null\"}}}");
    fc_ctx_clear_error(ctx);
    char *text = fc_json_schema_to_gbnf(ctx, s, n);
    cr_expect_null(text);
    cr_expect(strstr(fc_ctx_error(ctx), "nest deeper than 64") != NULL, "error '%s'", fc_ctx_error(ctx));
    free(text);
    /* nested arrays past the JSON reader's depth limit */
    n = 0;
    for (int i = 0; i < 200; i++) n += (size_t)snprintf(s + n, cap - n, "{\"items\": ");
    n += (size_t)snprintf(s + n, cap - n, "{}");
    for (int i = 0; i < 200; i++) s[n++] = '}';
    fc_ctx_clear_error(ctx);
    text = fc_json_schema_to_gbnf(ctx, s, n);
    cr_expect_null(text);
    cr_expect(strstr(fc_ctx_error(ctx), "json schema: not valid JSON") != NULL, "error '%s'", fc_ctx_error(ctx));
    free(text);
    /* 30 levels of arrays: fine */
    n = 0;
    for (int i = 0; i < 30; i++) n += (size_t)snprintf(s + n, cap - n, "{\"items\": ");
    n += (size_t)snprintf(s + n, cap - n, "{\"type\": \"null\"}");
    for (int i = 0; i < 30; i++) s[n++] = '}';
    fc_grammar *g = fc_grammar_from_json_schema(ctx, s, n);
    cr_expect_not_null(g, "%s", fc_ctx_error(ctx));
    fc_grammar_free(g);
    free(s);
    /* a definition that is only itself: left recursion, refused by the compiler */
    const char *self = "{\"$ref\": \"#/$defs/a\", \"$defs\": {\"a\": {\"anyOf\": [{\"$ref\": \"#/$defs/a\"}]}}}";
    fc_ctx_clear_error(ctx);
    g = fc_grammar_from_json_schema(ctx, self, strlen(self));
    cr_expect_null(g);
    cr_expect(strstr(fc_ctx_error(ctx), "left-recursive") != NULL, "error '%s'", fc_ctx_error(ctx));
    fc_grammar_free(g);
    cr_expect_null(fc_json_schema_to_gbnf(ctx, NULL, 0));
}

Test(json_schema, gbnf_text_reuses_the_shared_json_rules)
{
    for (size_t c = 0; c < N_CORPUS; c++) {
        char *schema = schema_text(corpus[c]);
        char *text = fc_json_schema_to_gbnf(ctx, schema, strlen(schema));
        cr_assert_not_null(text, "%s: %s", corpus[c], fc_ctx_error(ctx));
        cr_expect(strncmp(text, "root ::= ", 9) == 0, "%s: the start rule is not first", corpus[c]);
        static const char *const shared[] = {"value", "object", "array", "string", "char", "number", "integer", "ws"};
        for (size_t k = 0; k < sizeof shared / sizeof shared[0]; k++) {
            char def[32];
            snprintf(def, sizeof def, "\n%s ::= ", shared[k]);
            const char *first = strstr(text, def);
            cr_expect(first && !strstr(first + 1, def), "%s: rule '%s' is not defined exactly once", corpus[c],
                      shared[k]);
        }
        /* every rule name is [a-zA-Z0-9-] and defined once */
        for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
            const char *sp = strstr(line, " ::= ");
            const char *nl = strchr(line, '\n');
            if (!sp || (nl && sp > nl)) continue;
            for (const char *q = line; q < sp; q++)
                cr_expect((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-',
                          "%s: rule name '%.*s'", corpus[c], (int)(sp - line), line);
            char def[128];
            snprintf(def, sizeof def, "\n%.*s ::= ", (int)(sp - line), line);
            const char *again = strstr(sp, def);
            cr_expect(again == NULL, "%s: rule '%.*s' defined twice", corpus[c], (int)(sp - line), line);
        }
        free(text);
        free(schema);
    }
}
