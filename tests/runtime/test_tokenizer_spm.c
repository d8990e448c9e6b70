/* SPDX-License-Identifier: MIT */
/* SentencePiece vocabularies and the llama3 / gpt-2 BPE pre-tokenizers
 * (include/fucina/tokenizer.h), against llama.cpp.
 *
 * The vocabularies are the model writer's (src/llm/make_model.h): a
 * Llama-2-style SPM one (scores, <0xXX> byte fallback, Gemma / Mistral /
 * Phi-3 chat tokens) and a Llama-3-style byte-level BPE one (pre
 * "llama-bpe"). Each is written with our GGUF writer as a "qwen3" model
 * (tokenizer keys only) that libllama loads with vocab_only; then an
 * adversarial corpus (code with tabs and CRLF, CJK, ZWJ emoji, digit and
 * whitespace runs, leading/trailing spaces, special-token look-alikes,
 * chat templates, invalid UTF-8, NUL), random strings and random token
 * sequences must give the same tokens (add_special and parse_special on
 * and off), the same detokenized text (remove_special / unparse_special on
 * and off) and the same piece for every token as llama_tokenize,
 * llama_detokenize and llama_token_to_piece. Variants flip the flags the
 * SPM rules depend on (add_space_prefix, add_bos / add_eos) and retype a
 * token by name as llama.cpp does.
 *
 * Without the oracle: the streaming detokenizer against fc_detokenize, the
 * builders' layout, and clear errors for bad vocabularies (missing or
 * mistyped scores, unknown model / pre-tokenizer, a malformed byte token,
 * a byte without a fallback token). */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "tokenizer_expect.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/tokenizer.h"
#include "llama_abi.h"
#include "llm/make_model.h"

FCT_SUITE_WITH_TMPDIR(spm, 1, "fc_tok_spm_");

/* ---- writing vocabularies ------------------------------------------------------ */

/* Changes to a builder's vocabulary before writing it. */
typedef struct tweak {
    const char *model;     /* NULL: the vocabulary's */
    const char *pre;       /* NULL: the vocabulary's; "" leaves the key out */
    int scores;            /* 0 as built, 1 leave out, 2 one short, 3 as strings, 4 as u8, 5 a NaN */
    int space_prefix;      /* -1 as built, else written */
    int add_bos, add_eos;  /* -1 as built */
    int no_flag_keys;      /* no special ids, add_* or add_space_prefix keys: the loaders' defaults */
} tweak;

static const tweak k_as_built = {NULL, NULL, 0, -1, -1, -1, 0};

#define W(x) cr_assert_eq((x), FC_OK, "%s", fc_ctx_error(ctx))

/* A "qwen3" GGUF holding only general.* and the tokenizer keys: as built
 * through mm_vocab_write (the model writer's path), or by hand with the
 * tweaks applied. */
static void write_vocab(mm_vocab v, const char *path, tweak tw) {
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w, "%s", fc_ctx_error(ctx));
    W(fc_gguf_set_str(w, "general.architecture", "qwen3"));
    W(fc_gguf_set_str(w, "general.name", "fucina tokenizer test"));
    if (memcmp(&tw, &k_as_built, sizeof tw) == 0) {
        W(mm_vocab_write(w, &v));
        W(fc_gguf_writer_save(w, path));
        fc_gguf_writer_free(w);
        return;
    }
    const int spm = v.kind == MM_VOCAB_SPM;
    if (tw.space_prefix >= 0) v.add_space_prefix = tw.space_prefix;
    if (tw.add_bos >= 0) v.add_bos = tw.add_bos;
    if (tw.add_eos >= 0) v.add_eos = tw.add_eos;
    if (tw.pre) v.pre = tw.pre[0] ? tw.pre : NULL;
    W(fc_gguf_set_str(w, "tokenizer.ggml.model", tw.model ? tw.model : spm ? "llama" : "gpt2"));
    if (v.pre) W(fc_gguf_set_str(w, "tokenizer.ggml.pre", v.pre));
    W(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL, (uint64_t)v.n));
    W(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, v.type, (uint64_t)v.n));
    if (v.score && tw.scores == 0) W(fc_gguf_set_arr(w, "tokenizer.ggml.scores", FC_GGUF_F32, v.score, (uint64_t)v.n));
    if (tw.scores == 2) W(fc_gguf_set_arr(w, "tokenizer.ggml.scores", FC_GGUF_F32, v.score, (uint64_t)v.n - 1));
    if (tw.scores == 3)
        W(fc_gguf_set_arr_str(w, "tokenizer.ggml.scores", (const char *const *)v.tok, NULL, (uint64_t)v.n));
    if (tw.scores == 4) {
        uint8_t *u = calloc((size_t)v.n, 1);
        W(fc_gguf_set_arr(w, "tokenizer.ggml.scores", FC_GGUF_U8, u, (uint64_t)v.n));
        free(u);
    }
    if (tw.scores == 5) {
        float *f = malloc((size_t)v.n * sizeof *f);
        memcpy(f, v.score, (size_t)v.n * sizeof *f);
        f[300] = NAN;
        W(fc_gguf_set_arr(w, "tokenizer.ggml.scores", FC_GGUF_F32, f, (uint64_t)v.n));
        free(f);
    }
    if (!spm) W(fc_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge, NULL, (uint64_t)v.n_merges));
    if (!tw.no_flag_keys) {
        if (v.bos >= 0) W(fc_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v.bos));
        if (v.eos >= 0) W(fc_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v.eos));
        if (v.unk >= 0) W(fc_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v.unk));
        W(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v.add_bos));
        W(fc_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v.add_eos));
        if (spm) W(fc_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
    }
    W(fc_gguf_writer_save(w, path));
    fc_gguf_writer_free(w);
}

static mm_vocab spm_vocab(void) {
    mm_vocab v;
    cr_assert_eq(mm_spm_vocab_build(&v), 0);
    return v;
}

static mm_vocab llama3_vocab(void) {
    mm_vocab v;
    cr_assert_eq(mm_vocab_build_llama3(&v), 0);
    return v;
}

static fc_tokenizer *load_tok(const char *path) {
    fc_tokenizer *t = fc_tokenizer_load(ctx, path);
    cr_assert(t, "fc_tokenizer_load(%s): %s", path, fc_ctx_error(ctx));
    return t;
}

/* ---- printing ------------------------------------------------------------------ */

#define show tk_show

static char *show_ids(const int32_t *t, size_t n) {
    static char out[2][600];
    static int r;
    char *o = out[r++ & 1];
    size_t k = 0;
    o[0] = 0;
    for (size_t i = 0; i < n && k < 560; i++) k += (size_t)snprintf(o + k, 600 - k, "%s%d", i ? " " : "", t[i]);
    return o;
}

/* ---- the oracle ---------------------------------------------------------------- */

typedef struct oracle {
    fco_llama_api api;
    struct llama_model *m;
    const void *lv;
} oracle;

static fco_llama_api get_api(void) {
    const char *why = NULL;
    const fco_llama_api *api = fco_llama_load(&why);
    if (!api) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    return *api;
}

static oracle open_oracle(const char *path) {
    oracle o = {get_api(), NULL, NULL};
    struct llama_model_params mp = o.api.model_defaults();
    mp.vocab_only = true;
    o.m = o.api.load(path, mp);
    cr_assert(o.m, "llama.cpp did not load %s with vocab_only (FCT_LLAMA_VERBOSE=1 shows its log)", path);
    o.lv = o.api.get_vocab(o.m);
    return o;
}

static void close_oracle(oracle *o) { o->api.model_free(o->m); }

static llama_token *llama_encode(const oracle *o, const char *s, size_t n, bool add, bool parse, int32_t *nt) {
    int32_t cap = (int32_t)n + 8;
    llama_token *t = malloc((size_t)cap * sizeof *t);
    int32_t k = o->api.tokenize(o->lv, s, (int32_t)n, t, cap, add, parse);
    if (k < 0) {
        cap = -k;
        t = realloc(t, (size_t)cap * sizeof *t);
        k = o->api.tokenize(o->lv, s, (int32_t)n, t, cap, add, parse);
    }
    cr_assert_geq(k, 0, "llama_tokenize failed (%d)", k);
    *nt = k;
    return t;
}

static char *llama_decode(const oracle *o, const llama_token *t, int32_t n, bool rm, bool un, int32_t *len) {
    int32_t cap = n * 16 + 64;
    char *b = malloc((size_t)cap);
    int32_t k = o->api.detokenize(o->lv, t, n, b, cap, rm, un);
    if (k < 0) {
        cap = -k;
        b = realloc(b, (size_t)cap);
        k = o->api.detokenize(o->lv, t, n, b, cap, rm, un);
    }
    cr_assert_geq(k, 0, "llama_detokenize failed (%d)", k);
    *len = k;
    return b;
}

/* The stream's pushes + flush must equal fc_detokenize (no remove_special). */
static int stream_matches(const fc_tokenizer *t, const fc_token *ids, size_t n, int special, const char *what) {
    unsigned f = special ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0;
    fc_detok_stream *st = fc_detok_stream_new(ctx, t, f);
    cr_assert(st, "%s", fc_ctx_error(ctx));
    char *all = malloc(n * 64 + 64);
    size_t an = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        cr_assert_eq(fc_detok_stream_push(ctx, st, ids[i], &p, &pl), FC_OK, "%s", fc_ctx_error(ctx));
        memcpy(all + an, p, pl);
        an += pl;
    }
    const char *p;
    size_t pl;
    cr_assert_eq(fc_detok_stream_flush(ctx, st, &p, &pl), FC_OK);
    memcpy(all + an, p, pl);
    an += pl;
    fc_detok_stream_free(st);
    char *whole;
    size_t wl;
    cr_assert_eq(fc_detokenize(ctx, t, ids, n, f, &whole, &wl), FC_OK, "%s", fc_ctx_error(ctx));
    int ok = an == wl && memcmp(all, whole, wl) == 0;
    if (!ok)
        cr_log_error("%s: stream \"%s\" != fc_detokenize \"%s\" (special %d)", what, show(all, an), show(whole, wl),
                     special);
    free(all);
    free(whole);
    return ok;
}

/* Detokenizing ids[0..n) with every flag combination: ours == llama.cpp's. */
static int compare_decode(const oracle *o, const fc_tokenizer *t, const fc_token *ids, size_t n, const char *what) {
    int ok = 1;
    for (int f = 0; f < 4; f++) {
        bool rm = f & 1, un = (f >> 1) & 1;
        int32_t ln;
        char *lb = llama_decode(o, (const llama_token *)ids, (int32_t)n, rm, un, &ln);
        char *fb;
        size_t fl;
        fc_status st = fc_detokenize(ctx, t, ids, n,
                                     (rm ? FC_DETOKENIZE_REMOVE_SPECIAL : 0) | (un ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0),
                                     &fb, &fl);
        cr_assert_eq(st, FC_OK, "%s", fc_ctx_error(ctx));
        if (fl != (size_t)ln || memcmp(fb, lb, fl) != 0) {
            ok = 0;
            cr_log_error("%s: detokenized (remove_special %d, unparse_special %d) ours \"%s\", llama.cpp \"%s\" (ids %s)",
                         what, rm, un, show(fb, fl), show(lb, (size_t)ln), show_ids(ids, n));
        }
        free(lb);
        free(fb);
    }
    ok &= stream_matches(t, ids, n, 0, what) & stream_matches(t, ids, n, 1, what);
    return ok;
}

/* Tokens of s under flags (bit 0 add_special, bit 1 parse_special) and
 * their decoding: ours == llama.cpp's. */
static int compare_case(const oracle *o, const fc_tokenizer *t, const char *s, size_t n, unsigned flags) {
    int32_t nl;
    llama_token *lt = llama_encode(o, s, n, flags & FC_TOKENIZE_ADD_SPECIAL, flags & FC_TOKENIZE_PARSE_SPECIAL, &nl);
    fc_token *ft;
    size_t nf;
    fc_status st = fc_tokenize(ctx, t, s, n, flags, &ft, &nf);
    cr_assert_eq(st, FC_OK, "fc_tokenize(\"%s\"): %s", show(s, n), fc_ctx_error(ctx));
    size_t first = 0;
    while (first < nf && first < (size_t)nl && ft[first] == lt[first]) first++;
    int ok = nf == (size_t)nl && first == nf;
    if (!ok)
        cr_log_error("tokens differ for \"%s\" (flags %u): ours [%s], llama.cpp [%s]", show(s, n), flags,
                     show_ids(ft, nf), show_ids(lt, (size_t)nl));
    if (ok) ok = compare_decode(o, t, (const fc_token *)lt, (size_t)nl, show(s, n));
    free(lt);
    fc_tokens_free(ft);
    return ok;
}

/* ---- the corpus ---------------------------------------------------------------- */

#define S(lit) {lit, sizeof(lit) - 1}
static const struct {
    const char *s;
    size_t n;
} k_cases[] = {
    S(""), S(" "), S("  "), S("   "), S("\n"), S("\t"), S("a"), S("Hello"), S("Hello world"), S(" Hello world"),
    S("Hello world "), S("  two leading, two trailing  "), S("the forge heats the metal"),
    S("The smith and the model, the tensor and the token: the forge makes them all."),
    S("tokenizing testing hammering forging reading writing"),
    S("I'm you're we've they'll she'd it's don't I'M YOU'RE 's 'tis '' 'x ' s"),
    S("1234567890 3.14159 1,000,000 x=42; 0x1F 2026-11-30 12:00:00 1e-5 -7"),
    S("0000000000000000000000000000000000000000000000001 12 123 1234 12345 123456"),
    S("line1\r\nline2\r\n\r\nline3\n\n\n   \n end\r\r\n \r\n"),
    S("int main(void) {\n\treturn printf(\"%d\\n\", a[i] + b->c);\n}\r\n\tif (x)\t{ y(); }\r\n"),
    S("def forward(self, x):\n    return self.linear(x) + self.bias\n\n\nclass A(B):\n\tpass\n"),
    S("     many     spaces          here     "),
    S("x                                                                      y"),
    S("\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE8\xBF\x99\xE6\x98\xAF\xE4\xB8\x80"
      "\xE4\xB8\xAA\xE6\xB5\x8B\xE8\xAF\x95\xE3\x80\x82 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86"
      "\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4"),
    S("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
      "\xF0\x9F\x87\xAE\xF0\x9F\x87\xB9 \xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 a\xF0\x9F\x98\x80"),
    S("Caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e na\xC3\xAFve \xC3\x86r\xC3\xB8 e\xCC\x81 n\xCC\x83"),
    S("\xE2\x96\x81" "already\xE2\x96\x81" "escaped \xE2\x96\x81\xE2\x96\x81 \xE2\x96"),
    /* special tokens and look-alikes */
    S("<s>Hello</s>"), S("<s"), S("</s >"), S("<s> <s>  </s></s>"), S("<unk> <unk>x"), S("<0x41> <0x0A>"),
    S("<0x4"), S("[INST] inside [/INST] text [INST][/INST]"), S("a[INST]b"), S("<|user|>hi<|assistant|>"),
    S("<|user|<|assistant|>>"), S("<start_of_turn <end_of_turn>>"), S("<|end|><|end|>"),
    S("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"),
    /* chat templates */
    S("<s><start_of_turn>user\nWhat is a tensor?<end_of_turn>\n<start_of_turn>model\nAn array.<end_of_turn>\n"
      "<start_of_turn>model\n"),
    S("<s>[INST] What is a tensor? [/INST] An array.</s>[INST] And a token? [/INST]"),
    S("<s><|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n"),
    S("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
    /* what llama.cpp's clean-up of BPE spaces acts on */
    S("Hello , world . Really ? Yes ! a ' b ' ' c 'x he 's I 'm we 're you 've they 'll it 'd do 't"),
    S(" ' ' ' '' ''' ' 's 'm 're 've ?? ,, .. !!"), S(" ,"), S(" 's"), S("' s"),
    /* control bytes and invalid UTF-8 */
    S("abc\x80" "def"), S("\xff\xfe"), S("\xc3("), S("\xe4\xbd"), S("ok\xf0\x9f\x98"), S("\xed\xa0\x80" "x"),
    S("\xc0\x80" "a"), S("a\0b"), S("\x01\x02\x1b[0m\x7f"), S("\xf8\x88\x80\x80\x80"),
    S("a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\x83" "d\xc2\x85" "e\xe2\x80\xa8" "f"),
};

/* Random strings from pieces that stress the rules (UTF-8 valid or not). */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t random_text(uint64_t *seed, char *out, size_t cap) {
    static const char *const bits[] = {
        " ", "  ", "\n", "\r\n", "\t", "a", "Z", "the", " the", "forge", " token", "ing", "\xC3\xA9", "\xC3\x9F",
        "\xE4\xB8\x96", "\xE7\x95\x8C", "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xE2\x80\x8D", "1",
        "23", "456", "'", "'s", "'RE", " '", "!", "?", " ?", ".", ",", " ,", "-", "_", "(", ")", "\"", "<", ">", "|",
        "<s>", "</s>", "<s", "<unk>", "<0x41>", "[INST]", "[/INST]", "<|user|>", "<|end|>", "<start_of_turn>",
        "<|eot_id|>", "<|begin_of_text|>", "\xE2\x96\x81", "\x80", "\xff", "\xc3", "\xe4\xbd", "\xc2\xa0", "\x00",
        "\x7f", "\x01",
    };
    size_t n = 0, parts = rng_next(seed) % 20;
    for (size_t i = 0; i < parts; i++) {
        const char *b = bits[rng_next(seed) % (sizeof bits / sizeof bits[0])];
        size_t l = b[0] ? strlen(b) : 1;
        if (n + l >= cap) break;
        memcpy(out + n, b, l);
        n += l;
    }
    return n;
}

/* The whole comparison for one vocabulary file: corpus x 4 flag sets,
 * random strings, long runs, random token sequences, every token's piece.
 * Returns the number of differences (each logged). */
static int parity_run(const char *path, int n_random, int n_seq) {
    /* FCT_TOKENIZER_ROUNDS=k: k times the random strings and sequences */
    const char *rounds = getenv("FCT_TOKENIZER_ROUNDS");
    if (rounds && atoi(rounds) > 1) n_random *= atoi(rounds), n_seq *= atoi(rounds);
    oracle o = open_oracle(path);
    fc_tokenizer *t = load_tok(path);
    int32_t nv = fc_tokenizer_n_vocab(t);
    cr_assert_eq(o.api.vocab_n_tokens(o.lv), nv);
    int bad = 0;
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
        for (unsigned f = 0; f < 4; f++) bad += !compare_case(&o, t, k_cases[c].s, k_cases[c].n, f);
    static const char *const unit[] = {"a", "\xE4\xB8\x96", " ", "7", "the ", "\r\n", "\xF0\x9F\x91\x8D", " x", "\t"};
    static const int reps[] = {3000, 1000, 2000, 1000, 1000, 500, 300, 1000, 500};
    for (size_t k = 0; k < sizeof unit / sizeof unit[0]; k++) {
        size_t ul = strlen(unit[k]);
        char *b = malloc(ul * (size_t)reps[k] + 1);
        for (int r = 0; r < reps[k]; r++) memcpy(b + (size_t)r * ul, unit[k], ul);
        for (unsigned f = 0; f < 2; f++) bad += !compare_case(&o, t, b, ul * (size_t)reps[k], f);
        free(b);
    }
    uint64_t seed = 20260101;
    char rnd[512];
    for (int r = 0; r < n_random; r++) {
        size_t len = random_text(&seed, rnd, sizeof rnd);
        bad += !compare_case(&o, t, rnd, len, (unsigned)r & 3);
    }
    /* random id sequences: every token type, in any order */
    for (int r = 0; r < n_seq; r++) {
        fc_token ids[24];
        size_t n = rng_next(&seed) % 24;
        for (size_t i = 0; i < n; i++) ids[i] = (fc_token)(rng_next(&seed) % (uint64_t)nv);
        if (n && (r & 1)) ids[0] = fc_tokenizer_bos(t) >= 0 ? fc_tokenizer_bos(t) : ids[0];
        bad += !compare_decode(&o, t, ids, n, "random ids");
    }
    /* every token's piece, with and without special rendering */
    for (int32_t id = 0; id < nv; id++)
        for (int sp = 0; sp < 2; sp++) {
            char lb[512];
            int32_t ln = o.api.token_to_piece(o.lv, id, lb, sizeof lb, 0, sp);
            const char *fp;
            size_t fl;
            cr_assert_eq(fc_token_piece(ctx, t, id, sp, &fp, &fl), FC_OK);
            if (ln < 0 || (size_t)ln != fl || memcmp(lb, fp, fl) != 0) {
                bad++;
                cr_log_error("piece of token %d (special %d) differs: ours \"%s\", llama.cpp \"%s\"", id, sp,
                             show(fp, fl), show(lb, ln < 0 ? 0 : (size_t)ln));
            }
        }
    cr_log_info("%s: %d tokens, %d differences", path, nv, bad);
    fc_tokenizer_free(t);
    close_oracle(&o);
    return bad;
}

/* ---- parity tests -------------------------------------------------------------- */

Test(spm, parity_with_llama_cpp, .timeout = 120) {
    get_api();
    mm_vocab v = spm_vocab();
    const char *path = fct_path(dir, "spm.gguf");
    write_vocab(v, path, k_as_built);
    int bad = parity_run(path, 3000, 1500);
    cr_expect_eq(bad, 0, "%d comparisons with llama.cpp differ (see the log)", bad);
    fc_tokenizer *t = load_tok(path);
    cr_expect_str_eq(fc_tokenizer_model(t), "llama");
    cr_expect(fc_tokenizer_add_bos(t) && !fc_tokenizer_add_eos(t) && fc_tokenizer_add_space_prefix(t));
    cr_expect(fc_tokenizer_bos(t) == 1 && fc_tokenizer_eos(t) == 2 && fc_tokenizer_unk(t) == 0);
    fc_tokenizer_free(t);
    mm_vocab_free(&v);
}

Test(spm, parity_flag_variants, .timeout = 120) {
    /* The SPM rules that hang on flags, each flipped against llama.cpp: no
     * space prefix; no BOS but an EOS; the defaults (no flag keys at all:
     * llama.cpp's SPM defaults must be ours); a chat token typed
     * user-defined that llama.cpp retypes to control by its name. */
    get_api();
    mm_vocab v = spm_vocab();
    int bad = 0;
    tweak tw = k_as_built;
    tw.space_prefix = 0;
    write_vocab(v, fct_path(dir, "nospace.gguf"), tw);
    bad += parity_run(fct_path(dir, "nospace.gguf"), 300, 200);
    tw = k_as_built;
    tw.add_bos = 0;
    tw.add_eos = 1;
    write_vocab(v, fct_path(dir, "eos.gguf"), tw);
    bad += parity_run(fct_path(dir, "eos.gguf"), 300, 200);
    tw = k_as_built;
    tw.no_flag_keys = 1;
    write_vocab(v, fct_path(dir, "defaults.gguf"), tw);
    bad += parity_run(fct_path(dir, "defaults.gguf"), 300, 200);
    int end = mm_vocab_find(&v, "<|end|>");
    cr_assert_geq(end, 0);
    v.type[end] = FC_TOKEN_TYPE_USER_DEFINED;
    write_vocab(v, fct_path(dir, "retype.gguf"), k_as_built);
    bad += parity_run(fct_path(dir, "retype.gguf"), 300, 100);
    fc_tokenizer *t = load_tok(fct_path(dir, "retype.gguf"));
    cr_expect_eq(fc_tokenizer_token_type(t, end), FC_TOKEN_TYPE_CONTROL, "<|end|> is not retyped to control");
    fc_tokenizer_free(t);
    cr_expect_eq(bad, 0, "%d comparisons with llama.cpp differ (see the log)", bad);
    mm_vocab_free(&v);
}

Test(spm, llama3_bpe_parity, .timeout = 120) {
    get_api();
    mm_vocab v = llama3_vocab();
    const char *path = fct_path(dir, "llama3.gguf");
    write_vocab(v, path, k_as_built);
    int bad = parity_run(path, 3000, 1500);
    fc_tokenizer *t = load_tok(path);
    cr_expect_str_eq(fc_tokenizer_pre(t), "llama-bpe");
    cr_expect(fc_tokenizer_add_bos(t));
    cr_expect_eq(fc_tokenizer_bos(t), mm_vocab_find(&v, "<|begin_of_text|>"));
    fc_tokenizer_free(t);
    /* the same vocabulary under gpt-2's and qwen2's pre-tokenizers */
    tweak tw = k_as_built;
    tw.pre = "gpt-2";
    tw.add_bos = 0;
    write_vocab(v, fct_path(dir, "gpt2.gguf"), tw);
    bad += parity_run(fct_path(dir, "gpt2.gguf"), 1000, 300);
    tw.pre = "qwen2";
    write_vocab(v, fct_path(dir, "qwen2.gguf"), tw);
    bad += parity_run(fct_path(dir, "qwen2.gguf"), 500, 100);
    cr_expect_eq(bad, 0, "%d comparisons with llama.cpp differ (see the log)", bad);
    mm_vocab_free(&v);
}

Test(spm, llama3_ignore_merges) {
    /* A word that is a token but that the merges would split: llama3's
     * ignore_merges takes the whole token, qwen2 the merges' result. The
     * llama3 vocabulary plus "yz" (merge "y z") and "xyzzy" (no merge makes
     * it). */
    get_api();
    mm_vocab v = {0};
    cr_assert_eq(mm_vocab_build_llama3(&v), 0);
    int32_t nb = v.n;
    cr_assert_eq(mm_vocab_add(&v, "xyzzy", FC_TOKEN_TYPE_NORMAL, 0.0f), 0);
    cr_assert_eq(mm_vocab_add(&v, "yz", FC_TOKEN_TYPE_NORMAL, 0.0f), 0);
    /* and merges whose results are no tokens (" q", "é"): llama.cpp then
     * keeps only the piece's ASCII bytes */
    char **m = realloc(v.merge, (size_t)(v.n_merges + 3) * sizeof *m);
    cr_assert(m);
    v.merge = m;
    v.merge[v.n_merges++] = strdup("y z");
    v.merge[v.n_merges++] = strdup("\xC4\xA0 q");
    v.merge[v.n_merges++] = strdup("\xC3\x83 \xC2\xA9");
    v.merge_cap = v.n_merges;
    for (int k = 0; k < 2; k++) {
        tweak tw = k_as_built;
        tw.pre = k ? "qwen2" : "llama-bpe";
        const char *path = fct_path(dir, k ? "im_qwen2.gguf" : "im_llama3.gguf");
        write_vocab(v, path, tw);
        oracle o = open_oracle(path);
        fc_tokenizer *t = load_tok(path);
        int bad = 0;
        static const char *const texts[] = {"xyzzy", " xyzzy", "xyzzyx", "xyz", "axyzzy", " q", "a q q", "\xC3\xA9",
                                            "caf\xC3\xA9 q"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            for (unsigned f = 0; f < 4; f++) bad += !compare_case(&o, t, texts[i], strlen(texts[i]), f);
        fc_token *ids;
        size_t n;
        cr_assert_eq(fc_tokenize(ctx, t, "xyzzy", 5, 0, &ids, &n), FC_OK);
        if (k == 0) cr_expect(n == 1 && ids[0] == nb, "llama-bpe: \"xyzzy\" is not the one token %d", nb);
        else cr_expect_gt(n, 1, "qwen2 ignored the merges");
        fc_tokens_free(ids);
        cr_expect_eq(bad, 0, "%s: %d differences", tw.pre, bad);
        fc_tokenizer_free(t);
        close_oracle(&o);
    }
    mm_vocab_free(&v);
}

/* ---- without the oracle -------------------------------------------------------- */

Test(spm, builders_layout) {
    mm_vocab v = spm_vocab(), w = spm_vocab();
    cr_assert_eq(v.n, w.n, "the SPM builder is not deterministic");
    for (int i = 0; i < v.n; i++) {
        cr_assert_str_eq(v.tok[i], w.tok[i]);
        cr_assert(v.score[i] == w.score[i] && v.type[i] == w.type[i]);
    }
    cr_expect_str_eq(v.tok[0], "<unk>");
    cr_expect_str_eq(v.tok[1], "<s>");
    cr_expect_str_eq(v.tok[2], "</s>");
    cr_expect_eq(v.type[0], FC_TOKEN_TYPE_UNKNOWN);
    cr_expect_eq(v.type[1], FC_TOKEN_TYPE_CONTROL);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        cr_expect_str_eq(v.tok[3 + b], s);
        cr_expect_eq(v.type[3 + b], FC_TOKEN_TYPE_BYTE);
    }
    int ties = 0, merged = 0;
    for (int i = 260; i < v.n && v.type[i] == FC_TOKEN_TYPE_NORMAL; i++) {
        cr_expect_leq(v.score[i], v.score[i - 1], "scores go up at %d", i);
        ties += v.score[i] == v.score[i - 1];
    }
    for (int i = 259; i < v.n; i++) merged += v.type[i] == FC_TOKEN_TYPE_NORMAL && v.score[i] > -640.0f;
    cr_expect_gt(ties, 10, "no equal scores to exercise the tie rule");
    cr_expect_gt(merged, 400, "too few merged pieces (%d)", merged);
    cr_expect_gt(v.n, 800);
    static const char *const chat[] = {"<start_of_turn>", "<end_of_turn>", "[INST]", "[/INST]", "<|user|>",
                                       "<|assistant|>", "<|end|>", "<|system|>", "\xE2\x96\x81the"};
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++) cr_expect_geq(mm_vocab_find(&v, chat[i]), 0, "%s", chat[i]);
    cr_expect_lt(mm_vocab_find(&v, "\n"), 0, "newline must go through <0x0A>");
    mm_vocab_free(&v);
    mm_vocab_free(&w);
    /* mm_vocab_write writes a Qwen vocabulary exactly as make_model.c's own
     * key sequence did (so switching to it changes no file) */
    mm_vocab q;
    cr_assert_eq(mm_vocab_build(&q, 0), 0);
    for (int k = 0; k < 2; k++) {
        fc_gguf_writer *gw = fc_gguf_writer_new(ctx);
        if (k == 0) {
            W(mm_vocab_write(gw, &q));
        } else {
            W(fc_gguf_set_str(gw, "tokenizer.ggml.model", "gpt2"));
            W(fc_gguf_set_str(gw, "tokenizer.ggml.pre", "qwen2"));
            W(fc_gguf_set_arr_str(gw, "tokenizer.ggml.tokens", (const char *const *)q.tok, NULL, (uint64_t)q.n));
            W(fc_gguf_set_arr(gw, "tokenizer.ggml.token_type", FC_GGUF_I32, q.type, (uint64_t)q.n));
            W(fc_gguf_set_arr_str(gw, "tokenizer.ggml.merges", (const char *const *)q.merge, NULL, (uint64_t)q.n_merges));
            W(fc_gguf_set_u32(gw, "tokenizer.ggml.eos_token_id", (uint32_t)mm_vocab_find(&q, "<|im_end|>")));
            W(fc_gguf_set_u32(gw, "tokenizer.ggml.padding_token_id", (uint32_t)mm_vocab_find(&q, "<|endoftext|>")));
            W(fc_gguf_set_u32(gw, "tokenizer.ggml.bos_token_id", (uint32_t)mm_vocab_find(&q, "<|endoftext|>")));
            W(fc_gguf_set_bool(gw, "tokenizer.ggml.add_bos_token", 0));
        }
        W(fc_gguf_writer_save(gw, fct_path(dir, k ? "qwen_by_hand.gguf" : "qwen_written.gguf")));
        fc_gguf_writer_free(gw);
    }
    size_t na, nb;
    unsigned char *fa = fct_read_file(fct_path(dir, "qwen_written.gguf"), &na);
    unsigned char *fb = fct_read_file(fct_path(dir, "qwen_by_hand.gguf"), &nb);
    cr_expect(na == nb && memcmp(fa, fb, na) == 0, "mm_vocab_write differs from make_model.c's key sequence");
    free(fa);
    free(fb);
    mm_vocab_free(&q);
    mm_vocab l = llama3_vocab();
    cr_expect_str_eq(l.pre, "llama-bpe");
    cr_expect(l.add_bos && l.bos == mm_vocab_find(&l, "<|begin_of_text|>") && l.eos == mm_vocab_find(&l, "<|eot_id|>"));
    cr_expect_eq(l.type[l.eos], FC_TOKEN_TYPE_CONTROL);
    mm_vocab_free(&l);
}

Test(spm, round_trips_and_streams) {
    /* Valid UTF-8 without special-token texts round-trips (the first token's
     * space is dropped again); the stream equals fc_detokenize. */
    mm_vocab v = spm_vocab();
    const char *path = fct_path(dir, "rt.gguf");
    write_vocab(v, path, k_as_built);
    fc_tokenizer *t = load_tok(path);
    uint64_t seed = 5;
    static const char *const bits[] = {" ", "  ", "\n", "\t", "the", " forge", "tensor", "\xC3\xA9", "\xE4\xB8\x96",
                                       "\xF0\x9F\x98\x80", "1", "23", "'s", "?", ",", "x", "\xE2\x80\x8D"};
    for (int r = 0; r < 2000; r++) {
        char s[400];
        size_t n = 0, parts = rng_next(&seed) % 16;
        for (size_t i = 0; i < parts; i++) {
            const char *b = bits[rng_next(&seed) % (sizeof bits / sizeof bits[0])];
            memcpy(s + n, b, strlen(b));
            n += strlen(b);
        }
        fc_token *ids;
        size_t nt;
        cr_assert_eq(fc_tokenize(ctx, t, s, n, FC_TOKENIZE_ADD_SPECIAL, &ids, &nt), FC_OK, "%s", fc_ctx_error(ctx));
        cr_assert(nt >= 1 && ids[0] == 1, "no BOS first");
        char *back;
        size_t bl;
        cr_assert_eq(fc_detokenize(ctx, t, ids + 1, nt - 1, 0, &back, &bl), FC_OK);
        cr_assert(bl == n && memcmp(back, s, n) == 0, "round trip of \"%s\" gave \"%s\"", show(s, n), show(back, bl));
        free(back);
        cr_assert(stream_matches(t, ids, nt, r & 1, "round trip"));
        fc_tokens_free(ids);
    }
    fc_tokenizer_free(t);
    mm_vocab_free(&v);
}

#define expect_load_error(path, st, n1, n2) tk_expect_load_error(ctx, path, st, n1, n2)

Test(spm, errors_are_clear) {
    mm_vocab v = spm_vocab();
    tweak tw = k_as_built;
    tw.scores = 1;
    write_vocab(v, fct_path(dir, "noscores.gguf"), tw);
    expect_load_error(fct_path(dir, "noscores.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.scores", "not assumed");
    tw.scores = 2;
    write_vocab(v, fct_path(dir, "short.gguf"), tw);
    expect_load_error(fct_path(dir, "short.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.scores", "entries");
    tw.scores = 3;
    write_vocab(v, fct_path(dir, "strscores.gguf"), tw);
    expect_load_error(fct_path(dir, "strscores.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.scores", "FLOAT32");
    tw.scores = 4;
    write_vocab(v, fct_path(dir, "u8scores.gguf"), tw);
    expect_load_error(fct_path(dir, "u8scores.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.scores", "UINT8");
    tw.scores = 5;
    write_vocab(v, fct_path(dir, "nan.gguf"), tw);
    expect_load_error(fct_path(dir, "nan.gguf"), FC_ERR_FORMAT, "scores[300]", "NaN");
    tw = k_as_built;
    tw.model = "bert";
    write_vocab(v, fct_path(dir, "bert.gguf"), tw);
    expect_load_error(fct_path(dir, "bert.gguf"), FC_ERR_UNSUPPORTED, "\"bert\"", "\"llama\"");
    /* SPM ignores tokenizer.ggml.pre, as llama.cpp does */
    tw = k_as_built;
    tw.pre = "no-such-pre";
    write_vocab(v, fct_path(dir, "spmpre.gguf"), tw);
    fc_tokenizer *t = load_tok(fct_path(dir, "spmpre.gguf"));
    cr_expect_str_eq(fc_tokenizer_pre(t), "no-such-pre");
    fc_tokenizer_free(t);
    /* a BYTE token that is not <0xXX> */
    free(v.tok[3 + 0x41]);
    v.tok[3 + 0x41] = strdup("<0xG1>");
    write_vocab(v, fct_path(dir, "badbyte.gguf"), k_as_built);
    expect_load_error(fct_path(dir, "badbyte.gguf"), FC_ERR_FORMAT, "token 68", "<0xXX>");
    /* a byte with no fallback token: an error from fc_tokenize, naming it */
    v.type[3 + 0x41] = FC_TOKEN_TYPE_NORMAL;
    free(v.tok[3 + 0xF0]);
    v.tok[3 + 0xF0] = strdup("not-a-byte");
    v.type[3 + 0xF0] = FC_TOKEN_TYPE_NORMAL;
    write_vocab(v, fct_path(dir, "nobyte.gguf"), k_as_built);
    t = load_tok(fct_path(dir, "nobyte.gguf"));
    fc_token *ids;
    size_t n;
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_tokenize(ctx, t, "a\xF0\x9F\x98\x80", 5, 0, &ids, &n), FC_ERR_UNSUPPORTED);
    cr_expect(strstr(fc_ctx_error(ctx), "0xF0"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_tokenize(ctx, t, "the forge", 9, 0, &ids, &n), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tokens_free(ids);
    fc_tokenizer_free(t);
    mm_vocab_free(&v);

    /* BPE: an unknown pre-tokenizer is named, with the supported list */
    mm_vocab l = llama3_vocab();
    tw = k_as_built;
    tw.pre = "no-such-pre";
    write_vocab(l, fct_path(dir, "bpepre.gguf"), tw);
    expect_load_error(fct_path(dir, "bpepre.gguf"), FC_ERR_UNSUPPORTED, "\"no-such-pre\"", "llama-bpe");
    /* llama-bpe's add_bos default needs a BOS id */
    l.bos = -1;
    write_vocab(l, fct_path(dir, "nobos.gguf"), k_as_built);
    expect_load_error(fct_path(dir, "nobos.gguf"), FC_ERR_FORMAT, "add_bos_token", "bos_token_id");
    mm_vocab_free(&l);
}
