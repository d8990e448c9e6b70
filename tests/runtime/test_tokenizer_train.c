/* SPDX-License-Identifier: MIT */
/* The BPE trainer (include/fucina/tokenizer_train.h).
 *
 * - The merges, in order, equal those of an independent naive trainer
 *   (tests/goldens/bpe_train_ref.py: Python, the split pattern as a `regex`
 *   regex) on an adversarial corpus (tests/runtime/data/bpe_corpus.txt:
 *   prose, code, numbers, contractions in any case, whitespace runs, tabs,
 *   CRLF, emoji, CJK, Greek, combining marks, invalid UTF-8), for each
 *   pre-tokenizer; and fc_tokenize with the written file gives exactly the
 *   tokens training left the corpus in (the reference prints them).
 *   Skipped when python3 or its regex module is missing.
 * - Round trips: the pieces of the tokens spell the text back (invalid UTF-8
 *   as U+FFFD, one per bad byte, as fc_tokenize reads it); fc_detokenize
 *   too where the pre-tokenizer has no space clean-up (qwen2); the specials
 *   parse as one control token each; the file's ids and keys.
 * - llama.cpp loads the file with vocab_only and gives the same tokens and
 *   detokenized text on the corpus and random text (skipped without the
 *   oracle).
 * - Every error names its option and reason; a failed run leaves no file. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/tokenizer.h"
#include "fucina/tokenizer_train.h"
#include "ggml_oracle.h"
#include "llama_abi.h"
#include "llm/unicode.h"

FCT_SUITE_WITH_TMPDIR(tokenizer_train, 1, "fc_tokenizer_train_");

#define CORPUS FC_GOLDEN_DIR "/../runtime/data/bpe_corpus.txt"
#define REF    FC_GOLDEN_DIR "/bpe_train_ref.py"

static unsigned char *corpus(size_t *n)
{
    return fct_read_file(CORPUS, n);
}

static void train_on(const void *text, size_t n, const char *path, const fc_tokenizer_train_options *opt,
                     fc_tokenizer_train_stats *st)
{
    const char *texts[1] = {text};
    fc_status s = fc_tokenizer_train_ex(ctx, texts, &n, 1, path, opt, st);
    cr_assert_eq(s, FC_OK, "fc_tokenizer_train: %s", fc_ctx_error(ctx));
}

static fc_tokenizer *load(const char *path)
{
    fc_tokenizer *t = fc_tokenizer_load(ctx, path);
    cr_assert(t, "fc_tokenizer_load(%s): %s", path, fc_ctx_error(ctx));
    return t;
}

static fc_token *encode(const fc_tokenizer *t, const void *s, size_t n, unsigned flags, size_t *nt)
{
    fc_token *out = NULL;
    cr_assert_eq(fc_tokenize(ctx, t, s, n, flags, &out, nt), FC_OK, "fc_tokenize: %s", fc_ctx_error(ctx));
    return out;
}

/* ---- the Python reference --------------------------------------------------- */

static const char *python(void)
{
    const char *p = getenv("FUCINA_PYTHON");
    if (!p || !*p) p = "/usr/bin/python3";
    if (access(p, X_OK)) cr_skip_test("no Python at %s (set FUCINA_PYTHON): the reference trainer needs it", p);
    char cmd[1024], out[64];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import regex' 2>/dev/null", p);
    if (fct_run(cmd, out, sizeof out) != 0)
        cr_skip_test("%s has no regex module (Debian: apt-get install python3-regex)", p);
    return p;
}

/* The reference's output for the corpus: its merge lines and its ids line. */
static char *run_ref(const char *args, size_t *n)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --ids %s '%s'", python(), REF, args, CORPUS);
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen(%s)", cmd);
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap);
    for (size_t r; (r = fread(p + len, 1, cap - len - 1, f)) > 0;) {
        len += r;
        if (len + 1 == cap) p = realloc(p, cap *= 2);
    }
    cr_assert_eq(pclose(f), 0, "%s failed", cmd);
    p[len] = 0;
    *n = len;
    return p;
}

/* A spelled token (byte images) back to hex of its bytes. */
static void spelled_hex(const char *s, size_t n, char *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        const int b = fcu_cpt_to_byte(fcu_decode((const unsigned char *)s, n, &i));
        cr_assert_geq(b, 0, "a merge side is not spelled with byte images: %.*s", (int)n, s);
        o += (size_t)sprintf(out + o, "%02x", b);
    }
    out[o] = 0;
}

/* The file's merges as the reference prints them (one "LEFT RIGHT" hex line each). */
static char *file_merges(const char *path, uint64_t *count)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    int et;
    uint64_t n;
    cr_assert_eq(fc_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n), FC_OK);
    char *all = malloc(n * 2100 + 1), l[1024], r[1024];
    size_t o = 0;
    for (uint64_t k = 0; k < n; k++) {
        const char *s;
        size_t len;
        cr_assert_eq(fc_gguf_get_arr_str(g, "tokenizer.ggml.merges", k, &s, &len), FC_OK);
        const char *sp = memchr(s, ' ', len);
        cr_assert(sp && sp > s && sp < s + len - 1, "merge %llu '%.*s' is not 'left right'", (unsigned long long)k,
                  (int)len, s);
        spelled_hex(s, (size_t)(sp - s), l);
        spelled_hex(sp + 1, len - (size_t)(sp - s) - 1, r);
        o += (size_t)sprintf(all + o, "%s %s\n", l, r);
    }
    all[o] = 0;
    fc_gguf_close(g);
    *count = n;
    return all;
}

static void check_reference(const char *pre, int64_t vocab, const char *ref_args)
{
    size_t n;
    unsigned char *text = corpus(&n);
    const char *path = fct_path(dir, "ref.gguf");
    fc_tokenizer_train_options opt = {.vocab_size = vocab, .pre = pre};
    fc_tokenizer_train_stats st;
    train_on(text, n, path, &opt, &st);
    uint64_t nm;
    char *ours = file_merges(path, &nm);
    cr_assert_eq((int64_t)nm, st.n_merges);
    size_t rn;
    char *ref = run_ref(ref_args, &rn);
    char *ids = strstr(ref, "ids:");
    cr_assert(ids, "the reference printed no ids line");
    *ids = 0;
    /* the first differing merge, by line */
    if (strcmp(ours, ref)) {
        size_t line = 1, i = 0, start = 0;
        for (; ours[i] && ours[i] == ref[i]; i++)
            if (ours[i] == '\n') line++, start = i + 1;
        cr_assert_fail("pre %s: merge %zu differs: ours '%.*s', reference '%.*s' (ours %llu merges)",
                       pre ? pre : "llama-bpe", line, (int)strcspn(ours + start, "\n"), ours + start,
                       (int)strcspn(ref + start, "\n"), ref + start, (unsigned long long)nm);
    }
    cr_assert_gt(nm, 200, "pre %s: only %llu merges", pre, (unsigned long long)nm);
    /* encoding the corpus gives the tokens training left it in */
    fc_tokenizer *t = load(path);
    size_t nt;
    fc_token *tok = encode(t, text, n, 0, &nt);
    char *p = ids + 4;
    for (size_t k = 0; k < nt; k++) {
        char *end;
        const long id = strtol(p, &end, 10);
        cr_assert(end != p, "pre %s: the reference has %zu ids, fc_tokenize %zu", pre, k, nt);
        cr_assert_eq(tok[k], id, "pre %s: token %zu: fc_tokenize %d, training %ld", pre, k, tok[k], id);
        p = end;
    }
    while (*p == ' ' || *p == '\n') p++;
    cr_assert_eq(*p, 0, "pre %s: the reference has more ids than fc_tokenize's %zu", pre, nt);
    fc_tokens_free(tok);
    fc_tokenizer_free(t);
    free(ours);
    free(ref);
    free(text);
}

Test(tokenizer_train, merges_equal_reference_llama_bpe, .timeout = 300)
{
    check_reference(NULL, 1000, "--vocab-size 1000");
}

Test(tokenizer_train, merges_equal_reference_qwen2, .timeout = 300)
{
    check_reference("qwen2", 700, "--vocab-size 700 --pre qwen2");
}

Test(tokenizer_train, merges_equal_reference_gpt2, .timeout = 300)
{
    check_reference("gpt2", 700, "--vocab-size 700 --pre gpt2");
}

/* ---- round trips, specials, the file's keys ----------------------------------- */

/* text as fc_tokenize reads it: each bad byte becomes U+FFFD (the re-encoded codepoints). */
static unsigned char *normalized(const unsigned char *s, size_t n, size_t *out_n)
{
    unsigned char *o = malloc(n * 3 + 1);
    size_t i = 0, k = 0;
    while (i < n) k += (size_t)fcu_encode(fcu_decode(s, n, &i), o + k);
    *out_n = k;
    return o;
}

/* The tokens' pieces (no clean-up) equal normalized(text); with `detok`, fc_detokenize too. */
static void round_trip(const fc_tokenizer *t, const unsigned char *s, size_t n, int detok)
{
    size_t nt, wn;
    fc_token *tok = encode(t, s, n, 0, &nt);
    unsigned char *want = normalized(s, n, &wn);
    unsigned char *got = malloc(wn + 64);
    size_t gn = 0;
    for (size_t k = 0; k < nt; k++) {
        const char *p;
        size_t l;
        cr_assert_eq(fc_token_piece(ctx, t, tok[k], 1, &p, &l), FC_OK);
        cr_assert_leq(gn + l, wn, "the pieces are longer than the text");
        memcpy(got + gn, p, l);
        gn += l;
        cr_assert_lt(tok[k], fc_tokenizer_n_vocab(t) - 3, "a special token from plain text");
    }
    cr_assert(gn == wn && !memcmp(got, want, wn), "the pieces do not spell the text back (%zu bytes, %zu tokens)", n,
              nt);
    if (detok) {
        char *d;
        size_t dl;
        cr_assert_eq(fc_detokenize(ctx, t, tok, nt, 0, &d, &dl), FC_OK, "%s", fc_ctx_error(ctx));
        cr_assert(dl == wn && !memcmp(d, want, wn), "fc_detokenize does not give the text back (%zu bytes)", n);
        free(d);
    }
    free(got);
    free(want);
    fc_tokens_free(tok);
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random bytes, or random pieces of the corpus with random bytes between them. */
static size_t random_text(uint64_t *seed, const unsigned char *corp, size_t cn, unsigned char *out, size_t cap)
{
    size_t n = 0;
    const int mode = (int)(rng(seed) % 3);
    while (n + 40 < cap && rng(seed) % 32) {
        if (mode == 0) {
            out[n++] = (unsigned char)rng(seed);
        } else {
            const size_t at = rng(seed) % cn, len = 1 + rng(seed) % 24;
            for (size_t k = 0; k < len && at + k < cn; k++) out[n++] = corp[at + k];
            if (mode == 2) out[n++] = (unsigned char)rng(seed);
        }
    }
    return n;
}

static void check_round_trips(const char *pre, int detok)
{
    size_t n;
    unsigned char *text = corpus(&n);
    const char *path = fct_path(dir, "rt.gguf");
    const fc_tokenizer_train_options opt = {.vocab_size = 1000, .pre = pre};
    train_on(text, n, path, &opt, NULL);
    fc_tokenizer *t = load(path);
    round_trip(t, text, n, detok);
    for (int b = 0; b < 256; b++) {
        const unsigned char one = (unsigned char)b;
        round_trip(t, &one, 1, detok);
        size_t nt;
        fc_token *tok = encode(t, &one, 1, 0, &nt);
        /* a byte alone: its own id when it is a character, else U+FFFD's bytes */
        if (b < 0x80) cr_assert(nt == 1 && tok[0] == b, "byte 0x%02x: %zu tokens, first %d", b, nt, nt ? tok[0] : -1);
        fc_tokens_free(tok);
    }
    uint64_t seed = 99;
    unsigned char buf[600];
    for (int r = 0; r < 2000; r++) {
        const size_t len = random_text(&seed, text, n, buf, sizeof buf);
        round_trip(t, buf, len, detok);
    }
    fc_tokenizer_free(t);
    free(text);
}

Test(tokenizer_train, round_trips_llama_bpe)
{
    check_round_trips(NULL, 0);
}
Test(tokenizer_train, round_trips_qwen2_detokenize)
{
    check_round_trips("qwen2", 1);
}

Test(tokenizer_train, specials_ids_and_keys)
{
    size_t n;
    unsigned char *text = corpus(&n);
    const char *path = fct_path(dir, "sp.gguf");
    fc_tokenizer_train_stats st;
    train_on(text, n, path, NULL, &st);
    cr_assert_eq(st.n_vocab, 256 + st.n_merges + 3);
    fc_tokenizer *t = load(path);
    const int32_t nv = fc_tokenizer_n_vocab(t);
    cr_assert_eq(nv, st.n_vocab);
    cr_assert_str_eq(fc_tokenizer_model(t), "gpt2");
    cr_assert_str_eq(fc_tokenizer_pre(t), "llama-bpe");
    const fc_token eot = nv - 3, im_start = nv - 2, im_end = nv - 1;
    cr_assert_eq(fc_tokenizer_find(t, "<|endoftext|>", 13), eot);
    cr_assert_eq(fc_tokenizer_find(t, "<|im_start|>", 12), im_start);
    cr_assert_eq(fc_tokenizer_find(t, "<|im_end|>", 10), im_end);
    cr_assert_eq(fc_tokenizer_bos(t), eot);
    cr_assert_eq(fc_tokenizer_pad(t), eot);
    cr_assert_eq(fc_tokenizer_eos(t), im_end);
    cr_assert_eq(fc_tokenizer_add_bos(t), 0);
    cr_assert_eq(fc_tokenizer_add_eos(t), 0);
    for (fc_token id = 0; id < nv; id++)
        cr_assert_eq(fc_tokenizer_token_type(t, id), id >= eot ? FC_TOKEN_TYPE_CONTROL : FC_TOKEN_TYPE_NORMAL);
    /* bytes are ids 0..255 in byte order, spelled with GPT-2's images */
    for (int b = 0; b < 256; b++) {
        size_t len;
        const char *s = fc_tokenizer_token_text(t, b, &len);
        size_t i = 0;
        cr_assert(len && fcu_cpt_to_byte(fcu_decode((const unsigned char *)s, len, &i)) == b && i == len);
    }
    static const char chat[] = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<|endoftext|>";
    size_t nt;
    fc_token *tok = encode(t, chat, sizeof chat - 1, FC_TOKENIZE_PARSE_SPECIAL | FC_TOKENIZE_ADD_SPECIAL, &nt);
    cr_assert_eq(tok[0], im_start, "no BOS is added; the first token is <|im_start|>");
    cr_assert_eq(tok[nt - 1], eot);
    int n_special = 0;
    for (size_t k = 0; k < nt; k++) n_special += tok[k] >= eot;
    cr_assert_eq(n_special, 4);
    fc_tokens_free(tok);
    tok = encode(t, chat, sizeof chat - 1, 0, &nt);
    for (size_t k = 0; k < nt; k++) cr_assert_lt(tok[k], eot, "without parse_special the specials are text");
    fc_tokens_free(tok);
    fc_tokenizer_free(t);

    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    const char *s;
    size_t len;
    cr_assert_eq(fc_gguf_get_str(g, "general.architecture", &s, &len), FC_OK);
    cr_assert_str_eq(s, "qwen3");
    cr_assert_eq(fc_gguf_get_str(g, "tokenizer.chat_template", &s, &len), FC_OK);
    cr_assert_str_eq(s, fc_chat_template_text(FC_CHAT_TEMPLATE_CHATML));
    cr_assert_eq(fc_gguf_tensor_count(g), 0);
    fc_gguf_close(g);

    /* deterministic: the same file again, byte for byte */
    const char *again = fct_path(dir, "sp2.gguf");
    train_on(text, n, again, NULL, NULL);
    size_t n1, n2;
    unsigned char *a = fct_read_file(path, &n1), *b = fct_read_file(again, &n2);
    cr_assert(n1 == n2 && !memcmp(a, b, n1), "two runs wrote different files");
    free(a);
    free(b);
    free(text);
}

Test(tokenizer_train, custom_specials_and_documents)
{
    /* two documents: no word crosses them, so "ab" + "cd" never makes "abcd" */
    const char *texts[] = {"xyab", "cdxy", "xy xy xy xy"};
    const size_t lens[] = {4, 4, 11};
    const char *sp[] = {"<s>", "</s>", "xyz"};
    const fc_tokenizer_train_options opt = {
        .vocab_size = 300, .specials = sp, .n_specials = 3, .arch = "llama", .min_pair_count = 1, .pre = "gpt2"};
    const char *path = fct_path(dir, "cs.gguf");
    fc_tokenizer_train_stats st;
    cr_assert_eq(fc_tokenizer_train_ex(ctx, texts, lens, 3, path, &opt, &st), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tokenizer *t = load(path);
    const int32_t nv = fc_tokenizer_n_vocab(t);
    cr_assert_eq(nv, 256 + st.n_merges + 3);
    cr_assert_eq(fc_tokenizer_bos(t), nv - 3);
    cr_assert_eq(fc_tokenizer_eos(t), nv - 1);
    cr_assert_str_eq(fc_tokenizer_pre(t), "gpt-2");
    cr_assert_eq(fc_tokenizer_find(t, "abcd", 4), FC_TOKEN_NONE);
    cr_assert_neq(fc_tokenizer_find(t, "xy", 2), FC_TOKEN_NONE);
    fc_tokenizer_free(t);
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert(g);
    cr_assert_eq(fc_gguf_find_kv(g, "tokenizer.chat_template"), -1, "no ChatML without <|im_start|>/<|im_end|>");
    fc_gguf_close(g);

    /* "xyz" is a special: no merge may spell it, though "xy" "z"... is not in the text; a word "xyz" is */
    const char *t2[] = {"xyz xyz xyz xyz"};
    const size_t l2[] = {15};
    cr_assert_eq(fc_tokenizer_train_ex(ctx, t2, l2, 1, path, &opt, &st), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_geq(st.n_skipped, 1, "the merge spelling 'xyz' was not skipped");
    t = load(path);
    cr_assert_eq(fc_tokenizer_find(t, "xyz", 3), fc_tokenizer_n_vocab(t) - 1);
    fc_tokenizer_free(t);

    /* no specials at all, and an empty corpus */
    const fc_tokenizer_train_options none = {.specials = sp, .n_specials = 0};
    cr_assert_eq(fc_tokenizer_train_ex(ctx, NULL, NULL, 0, path, &none, &st), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(st.n_vocab, 256);
    t = load(path);
    cr_assert_eq(fc_tokenizer_n_vocab(t), 256);
    cr_assert_eq(fc_tokenizer_bos(t), FC_TOKEN_NONE);
    fc_tokenizer_free(t);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect_error(const fc_tokenizer_train_options *opt, const char *const *texts, const size_t *lens, size_t n,
                         const char *path, fc_status want, const char *needle)
{
    fc_ctx_clear_error(ctx);
    const fc_status s = fc_tokenizer_train(ctx, texts, lens, n, path, opt);
    cr_assert_eq(s, want, "status %d, want %d (%s)", s, want, fc_ctx_error(ctx));
    cr_assert(strstr(fc_ctx_error(ctx), needle), "the message '%s' does not say '%s'", fc_ctx_error(ctx), needle);
    cr_assert(strstr(fc_ctx_error(ctx), "fc_tokenizer_train"), "the message does not name the function");
    fc_ctx_clear_error(ctx);
}

Test(tokenizer_train, errors)
{
    const char *texts[] = {"hello hello", NULL};
    const size_t lens[] = {11, 3};
    const char *path = fct_path(dir, "err.gguf");
    const char *dup[] = {"<a>", "<b>", "<a>"}, *empty[] = {"<a>", ""}, *nul[] = {NULL}, *byte[] = {"x"};
    const fc_tokenizer_train_options small = {.vocab_size = 258}, huge = {.vocab_size = (int64_t)INT32_MAX + 1},
                                     pre = {.pre = "llama4"}, d = {.specials = dup, .n_specials = 3},
                                     e = {.specials = empty, .n_specials = 2}, nl = {.specials = nul, .n_specials = 1},
                                     by = {.specials = byte, .n_specials = 1}, neg = {.n_specials = -1},
                                     nulls = {.n_specials = 2}, arch = {.arch = ""}, mpc = {.min_pair_count = -3};
    expect_error(&small, texts, lens, 1, path, FC_ERR_INVALID_ARG, "vocab_size 258 is below 259");
    expect_error(&huge, texts, lens, 1, path, FC_ERR_INVALID_ARG, "vocab_size 2147483648 is above");
    expect_error(&pre, texts, lens, 1, path, FC_ERR_INVALID_ARG, "unknown pre-tokenizer 'llama4'");
    expect_error(&d, texts, lens, 1, path, FC_ERR_INVALID_ARG, "special token '<a>' is given twice");
    expect_error(&e, texts, lens, 1, path, FC_ERR_INVALID_ARG, "special token 1 is empty");
    expect_error(&nl, texts, lens, 1, path, FC_ERR_INVALID_ARG, "special token 0 is NULL");
    expect_error(&by, texts, lens, 1, path, FC_ERR_INVALID_ARG, "special token 'x' is spelled like the byte token 120");
    expect_error(&neg, texts, lens, 1, path, FC_ERR_INVALID_ARG, "n_specials -1 is negative");
    expect_error(&nulls, texts, lens, 1, path, FC_ERR_INVALID_ARG, "n_specials 2 with specials NULL");
    expect_error(&arch, texts, lens, 1, path, FC_ERR_INVALID_ARG, "the architecture name is empty");
    expect_error(&mpc, texts, lens, 1, path, FC_ERR_INVALID_ARG, "min_pair_count -3 is negative");
    expect_error(NULL, texts, lens, 2, path, FC_ERR_INVALID_ARG, "text 1 is NULL with 3 bytes");
    expect_error(NULL, NULL, lens, 1, path, FC_ERR_INVALID_ARG, "texts is NULL");
    expect_error(NULL, texts, NULL, 1, path, FC_ERR_INVALID_ARG, "lens is NULL");
    expect_error(NULL, texts, lens, 1, NULL, FC_ERR_INVALID_ARG, "the output path is NULL");
    expect_error(NULL, texts, lens, 1, dir, FC_ERR_IO, "");
    expect_error(NULL, texts, lens, 1, fct_path(dir, "no/such/dir/x.gguf"), FC_ERR_IO, "no/such/dir");
    cr_assert_neq(access(path, F_OK), 0, "a failed run left %s", path);
    cr_assert_eq(fc_tokenizer_train(NULL, texts, lens, 1, path, NULL), FC_ERR_INVALID_ARG);
}

/* ---- llama.cpp ------------------------------------------------------------------ */

/* libllama through the shared loader (oracle/llama_abi.h), models loaded vocab_only. */
typedef struct oracle {
    fco_llama_api api;
    struct llama_model_params params;
} oracle;

static oracle get_oracle(void)
{
    const char *why = NULL;
    const fco_llama_api *api = fco_llama_load(&why);
    if (!api) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    oracle o = {*api, api->model_defaults()};
    o.params.vocab_only = true;
    return o;
}

/* Same tokens from llama.cpp and from us, and the same detokenized text. */
static int same(const oracle *o, const void *lv, const fc_tokenizer *t, const void *s, size_t n,
                unsigned flags)
{
    int32_t cap = (int32_t)n + 8;
    llama_token *lt = malloc((size_t)cap * sizeof *lt);
    const bool parse = flags & FC_TOKENIZE_PARSE_SPECIAL;
    const int32_t nl = o->api.tokenize(lv, s, (int32_t)n, lt, cap, false, parse);
    cr_assert_geq(nl, 0, "llama_tokenize failed (%d)", nl);
    size_t nf;
    fc_token *ft = encode(t, s, n, flags, &nf);
    int ok = nf == (size_t)nl;
    for (size_t k = 0; ok && k < nf; k++) ok = ft[k] == lt[k];
    if (!ok) {
        size_t k = 0;
        while (k < nf && k < (size_t)nl && ft[k] == lt[k]) k++;
        cr_log_error("tokens differ (%zu bytes, parse_special %d): ours %zu, llama.cpp %d, first at %zu (%d vs %d)", n,
                     parse, nf, nl, k, k < nf ? ft[k] : -1, k < (size_t)nl ? lt[k] : -1);
    }
    if (ok) {
        const int32_t dcap = (int32_t)n * 4 + 64;
        char *lb = malloc((size_t)dcap), *fb;
        const int32_t ln = o->api.detokenize(lv, lt, nl, lb, dcap, false, true);
        size_t fl;
        cr_assert_eq(fc_detokenize(ctx, t, ft, nf, FC_DETOKENIZE_UNPARSE_SPECIAL, &fb, &fl), FC_OK);
        ok = ln >= 0 && (size_t)ln == fl && !memcmp(lb, fb, fl);
        if (!ok) cr_log_error("detokenized texts differ (%zu bytes)", n);
        free(lb);
        free(fb);
    }
    free(lt);
    fc_tokens_free(ft);
    return ok;
}

/* llama.cpp throws (std::invalid_argument, uncaught through the C API) on a
 * 4-byte form above U+10FFFF, where we read U+FFFD: such leads become '?'. */
static void tame(unsigned char *s, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++) {
        if ((s[i] & 0xF8) != 0xF0 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
            (s[i + 3] & 0xC0) != 0x80)
            continue;
        if (((uint32_t)(s[i] & 7) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12) > 0x10FFFF) s[i] = '?';
    }
}

static void check_llama(const char *pre)
{
    oracle o = get_oracle();
    size_t n;
    unsigned char *text = corpus(&n);
    const char *path = fct_path(dir, "llama.gguf");
    const fc_tokenizer_train_options opt = {.vocab_size = 1000, .pre = pre};
    train_on(text, n, path, &opt, NULL);
    struct llama_model *m = o.api.load(path, o.params);
    cr_assert(m, "llama.cpp did not load %s with vocab_only", path);
    const void *lv = o.api.get_vocab(m);
    fc_tokenizer *t = load(path);
    cr_assert_eq(o.api.vocab_n_tokens(lv), fc_tokenizer_n_vocab(t));
    int bad = 0;
    for (unsigned f = 0; f < 2; f++) bad += !same(&o, lv, t, text, n, f ? FC_TOKENIZE_PARSE_SPECIAL : 0);
    uint64_t seed = 7;
    unsigned char buf[600];
    for (int r = 0; r < 2000; r++) {
        const size_t len = random_text(&seed, text, n, buf, sizeof buf);
        tame(buf, len);
        bad += !same(&o, lv, t, buf, len, (unsigned)r & 1 ? FC_TOKENIZE_PARSE_SPECIAL : 0);
    }
    static const char chat[] = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>";
    bad += !same(&o, lv, t, chat, sizeof chat - 1, FC_TOKENIZE_PARSE_SPECIAL);
    cr_assert_eq(bad, 0, "pre %s: %d texts tokenize differently in llama.cpp", pre ? pre : "llama-bpe", bad);
    fc_tokenizer_free(t);
    o.api.model_free(m);
    free(text);
}

Test(tokenizer_train, llama_cpp_llama_bpe, .timeout = 300)
{
    check_llama(NULL);
}
Test(tokenizer_train, llama_cpp_qwen2, .timeout = 300)
{
    check_llama("qwen2");
}
Test(tokenizer_train, llama_cpp_gpt2, .timeout = 300)
{
    check_llama("gpt2");
}

/* A special spelled like a word ("xyz": its text is its own byte images):
 * no merge makes it, and with llama-bpe's ignore_merges llama.cpp takes the
 * plain word "xyz" as that token even without parse_special; so do we. */
Test(tokenizer_train, llama_cpp_special_spelled_as_word)
{
    oracle o = get_oracle();
    static const char text[] = "xyz abc xyz abc hello hello xyzxyz";
    const char *sp[] = {"xyz", "<|im_end|>"};
    const fc_tokenizer_train_options opt = {.specials = sp, .n_specials = 2};
    const char *path = fct_path(dir, "word_special.gguf");
    fc_tokenizer_train_stats st;
    train_on(text, sizeof text - 1, path, &opt, &st);
    cr_assert_geq(st.n_skipped, 1);
    struct llama_model *m = o.api.load(path, o.params);
    cr_assert(m, "llama.cpp did not load %s with vocab_only", path);
    fc_tokenizer *t = load(path);
    static const char probe[] = "xyz hello xyz xyzxyz abc";
    for (unsigned f = 0; f < 2; f++)
        cr_assert(same(&o, o.api.get_vocab(m), t, probe, sizeof probe - 1, f ? FC_TOKENIZE_PARSE_SPECIAL : 0));
    size_t nt;
    fc_token *tok = encode(t, probe, sizeof probe - 1, 0, &nt);
    cr_assert_eq(tok[0], fc_tokenizer_n_vocab(t) - 2, "the word 'xyz' is the special token");
    fc_tokens_free(tok);
    fc_tokenizer_free(t);
    o.api.model_free(m);
}

/* ---- the command ---------------------------------------------------------------- */

/* The fucina CLI: FUCINA_FUCINA_CLI, else the build tree's (tests/.. /fucina). */
static const char *cli(void)
{
    static char path[4096];
    const char *p = getenv("FUCINA_FUCINA_CLI");
    if (p && *p) return p;
    char self[4000];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) cr_skip_test("FUCINA_FUCINA_CLI is not set and /proc/self/exe is unreadable");
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(path, sizeof path, "%s/../fucina", self);
    if (access(path, X_OK)) cr_skip_test("no fucina CLI at %s (set FUCINA_FUCINA_CLI)", path);
    return path;
}

Test(tokenizer_train, command)
{
    const char *f = cli();
    char cmd[8192], out[4096];
    const char *jsonl = fct_path(dir, "docs.jsonl");
    static const char lines[] = "{\"text\": \"hello world\", \"id\": 1}\n\n{\"text\": \"hello there\"}\n";
    fct_write_file(jsonl, lines, sizeof lines - 1);
    const char *gguf = fct_path(dir, "cli.gguf");
    snprintf(cmd, sizeof cmd, "'%s' train-tokenizer -o '%s' --vocab-size 600 '%s' '%s' 2>&1", f, gguf, CORPUS, jsonl);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s: %s", cmd, out);
    cr_assert(strstr(out, "train-tokenizer: wrote") && strstr(out, "vocab 600 (341 merges, 3 specials), 3 documents"),
              "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' --ids -p 'hello world<|im_end|>' 2>&1", f, gguf);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s: %s", cmd, out);
    fc_tokenizer *t = load(gguf);
    size_t nt;
    static const char probe[] = "hello world<|im_end|>";
    fc_token *tok = encode(t, probe, sizeof probe - 1, FC_TOKENIZE_PARSE_SPECIAL, &nt);
    char want[512];
    size_t o = 0;
    for (size_t k = 0; k < nt; k++) o += (size_t)snprintf(want + o, sizeof want - o, k ? ", %d" : "[%d", tok[k]);
    snprintf(want + o, sizeof want - o, "]\n");
    cr_assert_str_eq(out, want);
    fc_tokens_free(tok);
    fc_tokenizer_free(t);

    /* usage and input errors: status 2 and a message naming the culprit */
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"", "no output given"},
        {"-o x.gguf", "no input files"},
        {"-o x.gguf --frobnicate y", "unknown option '--frobnicate'"},
        {"-o x.gguf --vocab-size 12x y", "--vocab-size '12x' is not a positive integer"},
        {"-o x.gguf /no/such/file", "cannot read '/no/such/file'"},
        {"-o x.gguf --vocab-size 100 /dev/null", "vocab_size 100 is below 259"},
        {"-o x.gguf --pre llama4 /dev/null", "unknown pre-tokenizer 'llama4'"},
        {"-o x.gguf --jsonl-field body DOCS", "line 1: no field 'body'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char args[1024];
        const char *d = strstr(bad[k].args, "DOCS");
        if (d)
            snprintf(args, sizeof args, "%.*s'%s'", (int)(d - bad[k].args), bad[k].args, jsonl);
        else
            snprintf(args, sizeof args, "%s", bad[k].args);
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' train-tokenizer %s 2>&1", dir, f, args);
        cr_assert_eq(fct_run(cmd, out, sizeof out), 2, "%s: %s", cmd, out);
        cr_assert(strstr(out, bad[k].needle), "%s: '%s' does not say '%s'", args, out, bad[k].needle);
    }
    cr_assert_neq(access(fct_path(dir, "x.gguf"), F_OK), 0, "a failed run left x.gguf");
}
