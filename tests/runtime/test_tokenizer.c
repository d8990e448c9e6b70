/* SPDX-License-Identifier: MIT */
/* Byte-level BPE tokenizer (include/fucina/tokenizer.h).
 *
 * The reference is llama.cpp: there is no vocabulary to download, so the
 * tests train a real byte-level BPE vocabulary here (a plain BPE trainer on
 * the project's docs and headers plus a generated multilingual sample: CJK,
 * emoji, accented Latin, digits, CRLF, whitespace runs, code), add Qwen's
 * special tokens, and write it with our GGUF writer as a "qwen3" model with
 * tokenizer.ggml.pre = "qwen2". llama.cpp loads it with vocab_only and
 * tokenizes a corpus of hard cases, random strings and ~1 MB of text; the
 * tokens, the detokenized text and every token's piece must be identical.
 * Our Unicode class table is compared with llama.cpp's for every codepoint.
 *
 * Without the oracle: round trips of random UTF-8, the streaming
 * detokenizer never emitting half a character, BPE merge order on a
 * hand-made vocabulary, and clear errors for bad vocabularies and ids. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fct.h"
#include "tokenizer_expect.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/tokenizer.h"
#include "ggml_oracle.h"
#include "llama_abi.h"
#include "llm/unicode.h"

FCT_SUITE_WITH_TMPDIR(tokenizer, 1, "fc_tokenizer_");

/* ---- growable byte buffer ---------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void buf_add(buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 1024;
        while (c < b->n + n + 1) c *= 2;
        b->p = realloc(b->p, c);
        cr_assert(b->p);
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void buf_str(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void add_file(buf *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) buf_add(b, tmp, k);
    fclose(f);
}

/* ---- text sources -------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const k_pieces[] = {
    "the", " the", " and", " of", " tensor", " kernel", " quantization", " token", "Hello", " world", "I'm", " you're",
    " we've", " they'll", " she'd", " it's", " DON'T", " Ain't",
    " perché", " così", " città", " già", " più", " Straße", " über", " Öl", " ñandú", " garçon", " déjà", " naïve",
    " Ελληνικά", " Привет", " мир", " שלום", " مرحبا", " नमस्ते", " ภาษาไทย",
    "你好", "世界", "，", "。", "这是一个测试", "中文分词", "日本語", "のテキスト", "カタカナ", "한국어", " 텍스트",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇮🇹", "🇯🇵", "🏳️‍🌈", "❤️‍🔥", "🤖", "✨",
    "0", "1", "42", " 2026", "3.14159", " 1,000,000", " 0x1F", " 1e-5", "١٢٣", "①②",
    "\n", "\r\n", "\n\n", "  ", "    ", "\t", "        ", " \n ", "\r\n\r\n",
    "int main(void) {", "    return 0;", "}", "for (i = 0; i < n; i++)", "x->y[i] += 2;", "#include <stdio.h>",
    "def f(x):", "    return x**2", "// comment", "/* block */", "a == b && c != d", "\"quoted\"", "'single'",
    "!!", "?!", "...", " --", " ->", " =>", " ::", "{}", "[]", "()", "<>", "@#$%^&*",
};

/* Concatenate random pieces into roughly `bytes` bytes. */
static void gen_sample(buf *b, size_t bytes, uint64_t seed) {
    const size_t np = sizeof k_pieces / sizeof k_pieces[0];
    while (b->n < bytes) buf_str(b, k_pieces[rng_next(&seed) % np]);
}

/* The training text: docs, public headers, and a multilingual sample. */
static void training_text(buf *b) {
    const char *docs[] = {"README.md", "docs/API.md", "docs/ARCHITECTURE.md", "docs/IO.md", "docs/KERNELS.md",
                          "docs/TRAINING.md", "include/fucina/tensor.h", "include/fucina/gguf.h",
                          "include/fucina/ops.h"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/../../%s", FC_GOLDEN_DIR, docs[i]);
        add_file(b, path);
    }
    gen_sample(b, b->n + 60000, 7);
}

/* ---- GPT-2 byte images (an independent spelling of the map) --------------------- */

static void byte_images(uint32_t img[256]) {
    int n = 0;
    for (int c = 0; c < 256; c++) {
        int self = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
        img[c] = self ? (uint32_t)c : (uint32_t)(256 + n++);
    }
}

static size_t put_utf8(uint32_t c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 63)); return 2; }
    o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 63)); o[2] = (char)(0x80 | (c & 63));
    return 3;
}

/* ---- a small byte-level BPE trainer --------------------------------------------- */

typedef struct tword {
    int32_t *s;
    int n;
    int64_t count;
} tword;

typedef struct pairmap {
    uint64_t *key;  /* (a << 32 | b) + 1; 0 = empty */
    int64_t *val;
    size_t cap;
    size_t *used;
    size_t n_used;
} pairmap;

static size_t pm_slot(pairmap *m, uint64_t k) {
    uint64_t h = k * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 20) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k) i = (i + 1) & (m->cap - 1);
    return i;
}

typedef struct vocab {
    char **tok;        /* byte-image spelling */
    size_t *tok_len;
    int32_t *type;
    int n, cap;
    char **merge;      /* "left right" */
    int n_merges;
} vocab;

static void vocab_add(vocab *v, const char *s, size_t len, int32_t type) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 512;
        v->tok = realloc(v->tok, (size_t)v->cap * sizeof *v->tok);
        v->tok_len = realloc(v->tok_len, (size_t)v->cap * sizeof *v->tok_len);
        v->type = realloc(v->type, (size_t)v->cap * sizeof *v->type);
    }
    v->tok[v->n] = malloc(len + 1);
    memcpy(v->tok[v->n], s, len);
    v->tok[v->n][len] = 0;
    v->tok_len[v->n] = len;
    v->type[v->n] = type;
    v->n++;
}

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merge[i]);
    free(v->tok);
    free(v->tok_len);
    free(v->type);
    free(v->merge);
}

/* Words for training: an optional leading space and a run of one class
 * (letters/digits/non-ASCII, punctuation, or whitespace). Simple on purpose:
 * the vocabulary only has to be realistic, not match any pre-tokenizer. */
static int byte_class(unsigned char c) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') return 0;
    if (c >= 0x80 || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z')) return 1;
    return 2;
}

static void train(vocab *v, const buf *text, int n_merges) {
    uint32_t img[256];
    byte_images(img);
    /* symbols: their bytes */
    int nsym = 256, symcap = 256 + n_merges;
    char **sb = malloc((size_t)symcap * sizeof *sb);
    size_t *sl = malloc((size_t)symcap * sizeof *sl);
    for (int c = 0; c < 256; c++) {
        sb[c] = malloc(1);
        sb[c][0] = (char)c;
        sl[c] = 1;
    }
    /* unique words with counts (a simple chained hash on the bytes) */
    size_t hcap = 1 << 16;
    int *head = malloc(hcap * sizeof *head);
    for (size_t i = 0; i < hcap; i++) head[i] = -1;
    int *nextw = NULL;
    const char **wstart = NULL;
    size_t *wlen = NULL;
    tword *w = NULL;
    int nw = 0, wcap = 0;
    const unsigned char *u = (const unsigned char *)text->p;
    size_t i = 0;
    while (i < text->n) {
        size_t s = i;
        if (u[i] == ' ' && i + 1 < text->n && byte_class(u[i + 1]) != 0) i++;
        int cls = byte_class(u[i]);
        while (i < text->n && byte_class(u[i]) == cls && i - s < 24) i++;
        size_t len = i - s;
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < len; k++) h = (h ^ u[s + k]) * 1099511628211ull;
        size_t bkt = (size_t)(h >> 40) & (hcap - 1);
        int f = head[bkt];
        while (f >= 0 && !(wlen[f] == len && memcmp(wstart[f], u + s, len) == 0)) f = nextw[f];
        if (f >= 0) {
            w[f].count++;
            continue;
        }
        if (nw == wcap) {
            wcap = wcap ? wcap * 2 : 4096;
            w = realloc(w, (size_t)wcap * sizeof *w);
            nextw = realloc(nextw, (size_t)wcap * sizeof *nextw);
            wstart = realloc(wstart, (size_t)wcap * sizeof *wstart);
            wlen = realloc(wlen, (size_t)wcap * sizeof *wlen);
        }
        w[nw].s = malloc(len * sizeof *w[nw].s);
        for (size_t k = 0; k < len; k++) w[nw].s[k] = u[s + k];
        w[nw].n = (int)len;
        w[nw].count = 1;
        wstart[nw] = (const char *)u + s;
        wlen[nw] = len;
        nextw[nw] = head[bkt];
        head[bkt] = nw;
        nw++;
    }
    free(head);
    free(nextw);
    free(wstart);
    free(wlen);

    pairmap pm = {0};
    pm.cap = 1 << 18;
    pm.key = calloc(pm.cap, sizeof *pm.key);
    pm.val = calloc(pm.cap, sizeof *pm.val);
    pm.used = malloc(pm.cap * sizeof *pm.used);
    v->merge = malloc((size_t)n_merges * sizeof *v->merge);
    for (int m = 0; m < n_merges; m++) {
        for (size_t k = 0; k < pm.n_used; k++) pm.key[pm.used[k]] = 0;
        pm.n_used = 0;
        for (int a = 0; a < nw; a++)
            for (int k = 0; k + 1 < w[a].n; k++) {
                uint64_t key = ((uint64_t)(uint32_t)w[a].s[k] << 32 | (uint32_t)w[a].s[k + 1]) + 1;
                size_t sl2 = pm_slot(&pm, key);
                if (!pm.key[sl2]) {
                    pm.key[sl2] = key;
                    pm.val[sl2] = 0;
                    pm.used[pm.n_used++] = sl2;
                }
                pm.val[sl2] += w[a].count;
            }
        uint64_t best = 0;
        int64_t bc = 0;
        for (size_t k = 0; k < pm.n_used; k++) {
            size_t s = pm.used[k];
            if (pm.val[s] > bc || (pm.val[s] == bc && pm.key[s] < best)) {
                bc = pm.val[s];
                best = pm.key[s];
            }
        }
        if (bc < 2) break;
        int32_t a = (int32_t)((best - 1) >> 32), b2 = (int32_t)((best - 1) & 0xffffffffu);
        int c = nsym++;
        sl[c] = sl[a] + sl[b2];
        sb[c] = malloc(sl[c]);
        memcpy(sb[c], sb[a], sl[a]);
        memcpy(sb[c] + sl[a], sb[b2], sl[b2]);
        for (int x = 0; x < nw; x++) {
            int o = 0;
            for (int k = 0; k < w[x].n; k++) {
                if (k + 1 < w[x].n && w[x].s[k] == a && w[x].s[k + 1] == b2) {
                    w[x].s[o++] = c;
                    k++;
                } else {
                    w[x].s[o++] = w[x].s[k];
                }
            }
            w[x].n = o;
        }
        /* the merge, spelled with byte images */
        char *ms = malloc((sl[a] + sl[b2]) * 3 + 2);
        size_t o = 0;
        for (size_t k = 0; k < sl[a]; k++) o += put_utf8(img[(unsigned char)sb[a][k]], ms + o);
        ms[o++] = ' ';
        for (size_t k = 0; k < sl[b2]; k++) o += put_utf8(img[(unsigned char)sb[b2][k]], ms + o);
        ms[o] = 0;
        v->merge[v->n_merges++] = ms;
    }
    /* tokens: the 256 bytes, then every merged symbol (skipping a spelling seen before) */
    for (int s = 0; s < nsym; s++) {
        char sp[256 * 3];
        size_t o = 0;
        if (sl[s] > 200) continue;
        for (size_t k = 0; k < sl[s]; k++) o += put_utf8(img[(unsigned char)sb[s][k]], sp + o);
        int dup = 0;
        for (int t = 256; t < v->n && !dup; t++) dup = v->tok_len[t] == o && memcmp(v->tok[t], sp, o) == 0;
        if (!dup) vocab_add(v, sp, o, FC_TOKEN_TYPE_NORMAL);
    }
    for (int s = 0; s < nsym; s++) free(sb[s]);
    free(sb);
    free(sl);
    for (int x = 0; x < nw; x++) free(w[x].s);
    free(w);
    free(pm.key);
    free(pm.val);
    free(pm.used);
}

static void add_qwen_specials(vocab *v) {
    vocab_add(v, "<|endoftext|>", 13, FC_TOKEN_TYPE_CONTROL);
    vocab_add(v, "<|im_start|>", 12, FC_TOKEN_TYPE_CONTROL);
    vocab_add(v, "<|im_end|>", 10, FC_TOKEN_TYPE_CONTROL);
    vocab_add(v, "<think>", 7, FC_TOKEN_TYPE_USER_DEFINED);
    vocab_add(v, "</think>", 8, FC_TOKEN_TYPE_USER_DEFINED);
}

static int find_tok(const vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (v->tok_len[i] == strlen(s) && memcmp(v->tok[i], s, v->tok_len[i]) == 0) return i;
    return -1;
}

typedef struct gguf_opts {
    const char *model;  /* NULL: "gpt2" */
    const char *pre;    /* NULL: "qwen2"; "" leaves the key out */
    int no_merges;
    int add_bos;
    int32_t bad_bos;    /* >= 0: write this as the BOS id */
} gguf_opts;

static void write_gguf(const vocab *v, const char *path, gguf_opts o) {
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "qwen3"), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "general.name", "fucina tokenizer test"), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "tokenizer.ggml.model", o.model ? o.model : "gpt2"), FC_OK);
    if (!o.pre || o.pre[0]) cr_assert_eq(fc_gguf_set_str(w, "tokenizer.ggml.pre", o.pre ? o.pre : "qwen2"), FC_OK);
    cr_assert_eq(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, v->tok_len, (uint64_t)v->n),
                 FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, v->type, (uint64_t)v->n), FC_OK);
    if (!o.no_merges)
        cr_assert_eq(fc_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merge, NULL,
                                         (uint64_t)v->n_merges), FC_OK);
    int eot = find_tok(v, "<|endoftext|>"), im_end = find_tok(v, "<|im_end|>");
    if (eot >= 0) {
        cr_assert_eq(fc_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", o.bad_bos >= 0 ? (uint32_t)o.bad_bos : (uint32_t)eot), FC_OK);
        cr_assert_eq(fc_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)im_end), FC_OK);
        cr_assert_eq(fc_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot), FC_OK);
    }
    cr_assert_eq(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", o.add_bos), FC_OK);
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
}

static const gguf_opts k_default = {NULL, NULL, 0, 0, -1};

/* The trained vocabulary (~2000 merges) as a GGUF in the test directory. */
static void make_trained(vocab *v, int n_merges) {
    buf text = {0};
    training_text(&text);
    train(v, &text, n_merges);
    add_qwen_specials(v);
    free(text.p);
}

static fc_tokenizer *load_tok(const char *path) {
    fc_tokenizer *t = fc_tokenizer_load(ctx, path);
    cr_assert(t, "fc_tokenizer_load(%s): %s", path, fc_ctx_error(ctx));
    return t;
}

static void encode(const fc_tokenizer *t, const char *s, size_t n, unsigned flags, fc_token **out, size_t *nt) {
    fc_status st = fc_tokenize(ctx, t, s, n, flags, out, nt);
    cr_assert_eq(st, FC_OK, "fc_tokenize: %s", fc_ctx_error(ctx));
}

/* ---- the oracle: include/llama.h of the matching llama.cpp ------------------------ */

struct llama_vocab; /* the rest of the ABI: oracle/llama_abi.h */
typedef struct llama_model_params (*default_params_fn)(void);
typedef struct llama_model *(*load_fn)(const char *path, struct llama_model_params params);
typedef void (*model_free_fn)(struct llama_model *);
typedef const struct llama_vocab *(*get_vocab_fn)(const struct llama_model *);
typedef int32_t (*n_tokens_fn)(const struct llama_vocab *);
typedef int32_t (*tokenize_fn)(const struct llama_vocab *, const char *, int32_t, llama_token *, int32_t, bool, bool);
typedef int32_t (*to_piece_fn)(const struct llama_vocab *, llama_token, char *, int32_t, int32_t, bool);
typedef int32_t (*detok_fn)(const struct llama_vocab *, const llama_token *, int32_t, char *, int32_t, bool, bool);
typedef void (*log_cb)(int level, const char *text, void *user);
typedef void (*log_set_fn)(log_cb cb, void *user);
/* unicode.h: unicode_cpt_flags unicode_cpt_flags_from_cpt(uint32_t); the
 * struct is 16 bits of flags, trivially copyable, so it comes back in a
 * register like a uint16_t. */
typedef uint16_t (*cpt_flags_fn)(uint32_t);

typedef struct oracle {
    load_fn load;
    model_free_fn model_free;
    get_vocab_fn get_vocab;
    n_tokens_fn n_tokens;
    tokenize_fn tokenize;
    to_piece_fn to_piece;
    detok_fn detok;
    struct llama_model_params params;
} oracle;

static void quiet(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static oracle get_oracle(void) {
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    oracle o = {0};
    default_params_fn defaults = (default_params_fn)fco_llama_sym("llama_model_default_params");
    o.load = (load_fn)fco_llama_sym("llama_model_load_from_file");
    o.model_free = (model_free_fn)fco_llama_sym("llama_model_free");
    o.get_vocab = (get_vocab_fn)fco_llama_sym("llama_model_get_vocab");
    o.n_tokens = (n_tokens_fn)fco_llama_sym("llama_vocab_n_tokens");
    o.tokenize = (tokenize_fn)fco_llama_sym("llama_tokenize");
    o.to_piece = (to_piece_fn)fco_llama_sym("llama_token_to_piece");
    o.detok = (detok_fn)fco_llama_sym("llama_detokenize");
    log_set_fn log_set = (log_set_fn)fco_llama_sym("llama_log_set");
    if (!defaults || !o.load || !o.model_free || !o.get_vocab || !o.n_tokens || !o.tokenize || !o.to_piece ||
        !o.detok || !log_set)
        cr_skip_test("libllama (llama_tokenize & co.) is not available in %s", fco_ggml_dir());
    log_set(quiet, NULL);
    o.params = defaults();
    /* The struct goes by value: check that our declaration matches the
     * library's layout through the documented defaults. */
    if (o.params.n_gpu_layers != -1 || o.params.vocab_only || !o.params.use_extra_bufts || o.params.no_alloc)
        cr_skip_test("llama_model_params of %s does not match include/llama.h (n_gpu_layers %d, use_extra_bufts %d)",
                     fco_ggml_dir(), o.params.n_gpu_layers, (int)o.params.use_extra_bufts);
    o.params.vocab_only = true;
    return o;
}

static llama_token *llama_encode(const oracle *o, const struct llama_vocab *lv, const char *s, size_t n, bool add,
                                 bool parse, int32_t *nt) {
    int32_t cap = (int32_t)n + 8;
    llama_token *t = malloc((size_t)cap * sizeof *t);
    int32_t k = o->tokenize(lv, s, (int32_t)n, t, cap, add, parse);
    if (k < 0) {
        cap = -k;
        t = realloc(t, (size_t)cap * sizeof *t);
        k = o->tokenize(lv, s, (int32_t)n, t, cap, add, parse);
    }
    cr_assert_geq(k, 0, "llama_tokenize failed (%d)", k);
    *nt = k;
    return t;
}

#define show tk_show

static int compare_case(const oracle *o, const struct llama_vocab *lv, const fc_tokenizer *t, const char *s,
                        size_t n, unsigned flags) {
    int32_t nl;
    llama_token *lt = llama_encode(o, lv, s, n, flags & FC_TOKENIZE_ADD_SPECIAL, flags & FC_TOKENIZE_PARSE_SPECIAL, &nl);
    fc_token *ft;
    size_t nf;
    encode(t, s, n, flags, &ft, &nf);
    int ok = nf == (size_t)nl;
    size_t first = 0;
    while (first < nf && first < (size_t)nl && ft[first] == lt[first]) first++;
    if (!ok || first != nf) {
        ok = 0;
        cr_log_error("tokens differ for \"%s\" (flags %u): ours %zu, llama.cpp %d, first difference at %zu (ours %d, "
                     "theirs %d)", show(s, n), flags, nf, nl, first, first < nf ? ft[first] : -1,
                     first < (size_t)nl ? lt[first] : -1);
    }
    /* detokenization of llama.cpp's tokens, every flag combination */
    for (int f = 0; ok && f < 4; f++) {
        bool rm = f & 1, un = (f >> 1) & 1;
        int32_t cap = (int32_t)n * 4 + 64;
        char *lb = malloc((size_t)cap);
        int32_t ln = o->detok(lv, lt, nl, lb, cap, rm, un);
        cr_assert_geq(ln, 0);
        char *fb;
        size_t fl;
        fc_status st = fc_detokenize(ctx, t, (const fc_token *)lt, (size_t)nl,
                                     (rm ? FC_DETOKENIZE_REMOVE_SPECIAL : 0) | (un ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0),
                                     &fb, &fl);
        cr_assert_eq(st, FC_OK, "%s", fc_ctx_error(ctx));
        if (fl != (size_t)ln || memcmp(fb, lb, fl) != 0) {
            ok = 0;
            cr_log_error("detokenized text differs for \"%s\" (remove_special %d, unparse_special %d): ours \"%s\", "
                         "llama.cpp \"%s\"", show(s, n), rm, un, show(fb, fl), show(lb, (size_t)ln));
        }
        free(lb);
        free(fb);
    }
    free(lt);
    fc_tokens_free(ft);
    return ok;
}

#define S(lit) {lit, sizeof(lit) - 1}
static const struct {
    const char *s;
    size_t n;
} k_cases[] = {
    S(""), S(" "), S("  "), S("\n"), S("Hello world"), S(" leading space"), S("trailing space "),
    S("   three leading and trailing   "), S("\t\ttabs\tand\ttext\t"),
    S("I'm you're we've they'll she'd it's don't I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T 's 'tis '' 'x ' s"),
    S("1234567890 3.14159 1,000,000 x=42; 0x1F 2026-11-30 12:00:00 1e-5 -7"),
    S("0000000000000000000000000000000000000000000000000000000000000000000001"),
    S("line1\r\nline2\r\n\r\nline3\n\n\n   \n end\r\r\n \r\n"),
    S("     many     spaces          here     "),
    S("x                                                                                                    y"),
    S("\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n"),
    S("int main(void) {\n    return printf(\"%d\\n\", a[i] + b->c);\n}\n// comment\n#include <stdio.h>\n"),
    S("def f(x):\n    if x:\n        return x ** 2  # square\n    return None\n\n\nclass A(B):\n\tpass\n"),
    S("你好，世界！这是一个测试。日本語のテキストとカタカナ。한국어 텍스트입니다."),
    S("👍🏽 👨‍👩‍👧‍👦 🇮🇹🇯🇵 🏳️‍🌈 ❤️‍🔥 😀😃😄 🧑🏿‍💻 🤌"),
    S("Però perché così? Ça va très bien. Straße über Öl. ñandú déjà vu naïve Ærø"),
    S("Ελληνικά Привет, мир! שלום עולם مرحبا بالعالم नमस्ते दुनिया ภาษาไทย"),
    S("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHi!<|im_end|><|endoftext|>"),
    S("<|im_start|<think<|endoftext|><|endoftext|>x<think>y</think>z<<think>>"),
    S("abc\x80" "def"), S("\xff\xfe"), S("\xc3("), S("\xe4\xbd"), S("ok\xf0\x9f\x98"), S("\xed\xa0\x80" "x"),
    S("\xc0\x80" "a"), S("a\0b"), S("\x01\x02\x1b[0m\x7f"),
    S("a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\x83" "d\xc2\x85" "e\xe2\x80\xa8" "f"),
    S("\xd9\xa3\xd9\xa4\xd9\xa5 \xe2\x91\xa0\xe2\x91\xa1 \xc2\xbd \xe2\x85\xab"),
    S("e\xcc\x81 n\xcc\x83 a\xcc\x80\xcc\x80"),
    S("!!! ??? ... --- ;;; ::: ((( ))) \"\"\" ''' ``` ~~~ @@@ ### $$$ %%% ^^^ &&& *** +++ === ||| \\\\"),
    S(" !\n ?\r\n ...\n\n"),
};

/* Random strings from pieces that stress the rules (UTF-8 valid or not). */
static size_t random_text(uint64_t *seed, char *out, size_t cap) {
    static const char *const bits[] = {
        " ", "  ", "\n", "\r\n", "\t", "a", "Z", "é", "ß", "世", "界", "😀", "👍🏽", "\xe2\x80\x8d", "1", "23", "٣",
        "'", "'s", "'RE", "!", "?", ".", ",", "-", "_", "(", ")", "\"", "<", ">", "|", "<|im_end|>", "<think>",
        "\x80", "\xff", "\xc3", "\xe4\xbd", "\xc2\xa0", "\xe3\x80\x80", "\xcc\x81", "\x00", "\x7f", "word", " the",
    };
    size_t n = 0, parts = rng_next(seed) % 24;
    for (size_t i = 0; i < parts; i++) {
        const char *b = bits[rng_next(seed) % (sizeof bits / sizeof bits[0])];
        size_t l = b[0] ? strlen(b) : 1;
        if (n + l >= cap) break;
        memcpy(out + n, b, l);
        n += l;
    }
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void big_text(buf *b) {
    buf t = {0};
    training_text(&t);
    while (b->n < (1u << 20)) buf_add(b, t.p, t.n);
    free(t.p);
}

Test(tokenizer, parity_with_llama_cpp, .timeout = 600) {
    oracle o = get_oracle();
    vocab v = {0};
    make_trained(&v, 2000);
    const char *path = fct_path(dir, "qwen_bpe.gguf");
    write_gguf(&v, path, k_default);
    struct llama_model *m = o.load(path, o.params);
    cr_assert(m, "llama.cpp did not load %s with vocab_only", path);
    const struct llama_vocab *lv = o.get_vocab(m);
    fc_tokenizer *t = load_tok(path);
    cr_assert_eq(o.n_tokens(lv), fc_tokenizer_n_vocab(t));
    cr_assert_eq(fc_tokenizer_n_vocab(t), v.n);

    int bad = 0, n = 0;
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
        for (unsigned f = 0; f < 4; f++, n++) bad += !compare_case(&o, lv, t, k_cases[c].s, k_cases[c].n, f);
    /* long runs: one word of 5000 letters, 3000 CJK characters, 4000 spaces, ... */
    static const char *const unit[] = {"a", "世", " ", "7", "ab", "\r\n", "👍🏽", " x"};
    static const int reps[] = {5000, 3000, 4000, 2000, 2500, 1000, 500, 3000};
    for (size_t k = 0; k < sizeof unit / sizeof unit[0]; k++) {
        buf b = {0};
        for (int r = 0; r < reps[k]; r++) buf_str(&b, unit[k]);
        for (unsigned f = 0; f < 2; f++, n++) bad += !compare_case(&o, lv, t, b.p, b.n, f);
        free(b.p);
    }
    uint64_t seed = 12345;
    char rnd[512];
    for (int r = 0; r < 3000; r++, n++) {
        size_t len = random_text(&seed, rnd, sizeof rnd);
        bad += !compare_case(&o, lv, t, rnd, len, (unsigned)r & 3);
    }
    /* every token's piece, with and without special rendering */
    for (int32_t id = 0; id < v.n; id++)
        for (int sp = 0; sp < 2; sp++) {
            char lb[1024];
            int32_t ln = o.to_piece(lv, id, lb, sizeof lb, 0, sp);
            const char *fp;
            size_t fl;
            cr_assert_eq(fc_token_piece(ctx, t, id, sp, &fp, &fl), FC_OK);
            if (ln < 0 || (size_t)ln != fl || memcmp(lb, fp, fl) != 0) {
                bad++;
                cr_log_error("piece of token %d (special %d) differs: ours \"%s\", llama.cpp \"%s\"", id, sp,
                             show(fp, fl), show(lb, ln < 0 ? 0 : (size_t)ln));
            }
        }
    /* ~1 MB of text, one call each */
    buf big = {0};
    big_text(&big);
    double t0 = now_s();
    int32_t nl;
    llama_token *lt = llama_encode(&o, lv, big.p, big.n, false, true, &nl);
    double t1 = now_s();
    fc_token *ft;
    size_t nf;
    encode(t, big.p, big.n, FC_TOKENIZE_PARSE_SPECIAL, &ft, &nf);
    double t2 = now_s();
    cr_log_info("1 MB text: %zu bytes -> %zu tokens; fucina %.1f ms (%.0f tokens/s), llama.cpp %.1f ms (%.0f tokens/s)",
                big.n, nf, (t2 - t1) * 1e3, (double)nf / (t2 - t1), (t1 - t0) * 1e3, (double)nl / (t1 - t0));
    fprintf(stderr, "tokenizer: 1 MB text: %zu bytes -> %zu tokens; fucina %.1f ms (%.0f tokens/s), llama.cpp %.1f ms "
            "(%.0f tokens/s)\n", big.n, nf, (t2 - t1) * 1e3, (double)nf / (t2 - t1), (t1 - t0) * 1e3,
            (double)nl / (t1 - t0));
    cr_expect_eq(nf, (size_t)nl, "1 MB text: %zu tokens, llama.cpp %d", nf, nl);
    cr_expect(nf == (size_t)nl && memcmp(ft, lt, nf * sizeof *ft) == 0, "1 MB text: tokens differ from llama.cpp");
    free(lt);
    fc_tokens_free(ft);
    free(big.p);

    cr_expect_eq(bad, 0, "%d of %d comparisons with llama.cpp differ (see the log)", bad, n + 2 * v.n);
    fc_tokenizer_free(t);
    o.model_free(m);
    vocab_free(&v);
}

Test(tokenizer, parity_add_bos) {
    /* add_bos_token = true: BOS first with add_special, and removed again by
     * remove_special when detokenizing. */
    oracle o = get_oracle();
    vocab v = {0};
    make_trained(&v, 300);
    const char *path = fct_path(dir, "qwen_bpe_bos.gguf");
    gguf_opts opt = k_default;
    opt.add_bos = 1;
    write_gguf(&v, path, opt);
    struct llama_model *m = o.load(path, o.params);
    cr_assert(m, "llama.cpp did not load %s", path);
    fc_tokenizer *t = load_tok(path);
    cr_assert(fc_tokenizer_add_bos(t));
    int bad = 0;
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
        for (unsigned f = 0; f < 4; f++) bad += !compare_case(&o, o.get_vocab(m), t, k_cases[c].s, k_cases[c].n, f);
    cr_expect_eq(bad, 0, "%d cases differ from llama.cpp", bad);
    fc_tokenizer_free(t);
    o.model_free(m);
    vocab_free(&v);
}

Test(tokenizer, unicode_classes_match_llama_cpp) {
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    cpt_flags_fn flags = (cpt_flags_fn)fco_llama_sym("_Z26unicode_cpt_flags_from_cptj");
    if (!flags) cr_skip_test("libllama does not export unicode_cpt_flags_from_cpt");
    int bad = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        uint16_t want = flags(c) & 0x1FF, got = fcu_flags(c);
        if (want != got && bad++ < 10)
            cr_log_error("U+%04X: ours 0x%03x, llama.cpp 0x%03x (Unicode %s)", c, got, want, fcu_unicode_version);
    }
    cr_expect_eq(bad, 0, "%d codepoints classified differently from llama.cpp", bad);
}

/* ---- without the oracle -------------------------------------------------------- */

static int utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if ((u[i + k] & 0xC0) != 0x80) return 0;
        i += l;
    }
    return 1;
}

Test(tokenizer, round_trip_random_utf8) {
    vocab v = {0};
    make_trained(&v, 500);
    const char *path = fct_path(dir, "rt.gguf");
    write_gguf(&v, path, k_default);
    fc_tokenizer *t = load_tok(path);
    static const uint32_t pool[] = {' ', ' ', '\n', '\r', '\t', 'a', 'b', 'Q', '0', '7', '\'', '.', '<', '|', '>',
                                    0xE9, 0xDF, 0x3A9, 0x416, 0x5D0, 0x627, 0x915, 0x4E16, 0x754C, 0x3042, 0xAC00,
                                    0x1F600, 0x1F44D, 0x1F3FD, 0x200D, 0x2764, 0xFE0F, 0x1F1EE, 0x3000, 0xA0, 0x301,
                                    0x10FFFF, 0xFFFD, 0x7F, 0x1};
    uint64_t seed = 99;
    for (int r = 0; r < 2000; r++) {
        char s[600];
        size_t n = 0, len = rng_next(&seed) % 60;
        for (size_t i = 0; i < len; i++) {
            uint32_t c = pool[rng_next(&seed) % (sizeof pool / sizeof pool[0])];
            n += (size_t)fcu_encode(c, (unsigned char *)s + n);
        }
        fc_token *tk;
        size_t nt;
        encode(t, s, n, 0, &tk, &nt);
        char *back;
        size_t bl;
        cr_assert_eq(fc_detokenize(ctx, t, tk, nt, 0, &back, &bl), FC_OK, "%s", fc_ctx_error(ctx));
        cr_assert(bl == n && memcmp(back, s, n) == 0, "round trip of \"%s\" gave \"%s\"", show(s, n), show(back, bl));
        free(back);
        fc_tokens_free(tk);
    }
    fc_tokenizer_free(t);
    vocab_free(&v);
}

/* A vocabulary of the 256 bytes only (no merges): every multi-byte character
 * is split across tokens, the worst case for streaming. */
static void bytes_only(vocab *v) {
    uint32_t img[256];
    byte_images(img);
    for (int c = 0; c < 256; c++) {
        char sp[4];
        vocab_add(v, sp, put_utf8(img[c], sp), FC_TOKEN_TYPE_NORMAL);
    }
    add_qwen_specials(v);
    v->merge = malloc(sizeof *v->merge);
    v->merge[0] = strdup("a b");
    v->n_merges = 1;
}

Test(tokenizer, streaming_never_splits_a_character) {
    vocab v = {0};
    bytes_only(&v);
    const char *path = fct_path(dir, "bytes.gguf");
    write_gguf(&v, path, k_default);
    fc_tokenizer *t = load_tok(path);
    const char *texts[] = {"héllo wörld", "你好，世界", "👨‍👩‍👧‍👦 and 🇮🇹", "a<|im_end|>é<think>世</think>",
                           "bad \x80 byte \xe4\xbd then ok é", "cut at the end \xf0\x9f\x98"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const char *s = texts[k];
        fc_token *tk;
        size_t nt;
        encode(t, s, strlen(s), FC_TOKENIZE_PARSE_SPECIAL, &tk, &nt);
        for (int sp = 0; sp < 2; sp++) {
            fc_detok_stream *st = fc_detok_stream_new(ctx, t, sp ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0);
            cr_assert(st, "%s", fc_ctx_error(ctx));
            buf all = {0};
            int valid_input = utf8_valid(s, strlen(s));
            for (size_t i = 0; i < nt; i++) {
                const char *o;
                size_t ol;
                cr_assert_eq(fc_detok_stream_push(ctx, st, tk[i], &o, &ol), FC_OK, "%s", fc_ctx_error(ctx));
                /* valid text: every chunk is whole characters */
                if (valid_input) cr_assert(utf8_valid(o, ol), "chunk %zu of \"%s\" is \"%s\"", i, show(s, strlen(s)), show(o, ol));
                buf_add(&all, o, ol);
            }
            const char *o;
            size_t ol;
            cr_assert_eq(fc_detok_stream_flush(ctx, st, &o, &ol), FC_OK);
            buf_add(&all, o, ol);
            char *whole;
            size_t wl;
            cr_assert_eq(fc_detokenize(ctx, t, tk, nt, sp ? FC_DETOKENIZE_UNPARSE_SPECIAL : 0, &whole, &wl), FC_OK);
            cr_assert(all.n == wl && memcmp(all.p, whole, wl) == 0, "stream \"%s\" != whole \"%s\"", show(all.p, all.n),
                      show(whole, wl));
            free(whole);
            free(all.p);
            fc_detok_stream_free(st);
        }
        fc_tokens_free(tk);
    }
    /* byte by byte by hand: é = C3 A9 arrives in two tokens */
    fc_detok_stream *st = fc_detok_stream_new(ctx, t, 0);
    const char *o;
    size_t ol;
    fc_token c3 = fc_tokenizer_find(t, "Ã", 2), a9 = fc_tokenizer_find(t, "©", 2);
    cr_assert(c3 >= 0 && a9 >= 0);
    cr_assert_eq(fc_detok_stream_push(ctx, st, c3, &o, &ol), FC_OK);
    cr_expect_eq(ol, 0, "half of 'é' was emitted");
    cr_assert_eq(fc_detok_stream_push(ctx, st, a9, &o, &ol), FC_OK);
    cr_expect(ol == 2 && memcmp(o, "\xc3\xa9", 2) == 0);
    /* a lone lead byte at the end comes out on flush */
    cr_assert_eq(fc_detok_stream_push(ctx, st, c3, &o, &ol), FC_OK);
    cr_expect_eq(ol, 0);
    cr_assert_eq(fc_detok_stream_flush(ctx, st, &o, &ol), FC_OK);
    cr_expect(ol == 1 && (unsigned char)o[0] == 0xC3);
    fc_detok_stream_free(st);
    fc_tokenizer_free(t);
    vocab_free(&v);
}

Test(tokenizer, merges_by_rank_not_by_order_found) {
    /* Hand-made vocabulary: "c d" has the best rank, then "b cd", then
     * "a b": "abcd" must become a + bcd (BPE), not ab + cd (greedy left). */
    vocab v = {0};
    bytes_only(&v);
    free(v.merge[0]);
    free(v.merge);
    const char *merges[] = {"c d", "b cd", "a b", "ab cd", "Ġ a"};
    v.merge = malloc(5 * sizeof *v.merge);
    for (int i = 0; i < 5; i++) v.merge[i] = strdup(merges[i]);
    v.n_merges = 5;
    vocab_add(&v, "cd", 2, FC_TOKEN_TYPE_NORMAL);
    vocab_add(&v, "bcd", 3, FC_TOKEN_TYPE_NORMAL);
    vocab_add(&v, "ab", 2, FC_TOKEN_TYPE_NORMAL);
    vocab_add(&v, "Ġa", 3, FC_TOKEN_TYPE_NORMAL);
    const char *path = fct_path(dir, "hand.gguf");
    write_gguf(&v, path, k_default);
    fc_tokenizer *t = load_tok(path);
    fc_token *tk;
    size_t nt;
    encode(t, "abcd", 4, 0, &tk, &nt);
    cr_assert_eq(nt, 2);
    cr_expect_eq(tk[0], fc_tokenizer_find(t, "a", 1));
    cr_expect_eq(tk[1], fc_tokenizer_find(t, "bcd", 3));
    fc_tokens_free(tk);
    /* " a1" -> " a" (space image Ġ merged with a), then the digit alone */
    encode(t, " a1", 3, 0, &tk, &nt);
    cr_assert_eq(nt, 2);
    cr_expect_eq(tk[0], fc_tokenizer_find(t, "Ġa", 3));
    cr_expect_eq(tk[1], fc_tokenizer_find(t, "1", 1));
    fc_tokens_free(tk);
    /* "12" is two words under qwen2 (single digits) */
    encode(t, "12", 2, 0, &tk, &nt);
    cr_expect_eq(nt, 2);
    fc_tokens_free(tk);
    /* control tokens only with PARSE_SPECIAL; user-defined always */
    fc_token im_end = fc_tokenizer_find(t, "<|im_end|>", 10), think = fc_tokenizer_find(t, "<think>", 7);
    encode(t, "<|im_end|>", 10, FC_TOKENIZE_PARSE_SPECIAL, &tk, &nt);
    cr_expect(nt == 1 && tk[0] == im_end);
    fc_tokens_free(tk);
    encode(t, "<|im_end|>", 10, 0, &tk, &nt);
    cr_expect(nt > 1);
    fc_tokens_free(tk);
    encode(t, "<think>", 7, 0, &tk, &nt);
    cr_expect(nt == 1 && tk[0] == think);
    fc_tokens_free(tk);
    fc_tokenizer_free(t);
    vocab_free(&v);
}

#define expect_load_error(path, st, n1, n2) tk_expect_load_error(ctx, path, st, n1, n2)

Test(tokenizer, errors_are_clear) {
    vocab v = {0};
    bytes_only(&v);
    gguf_opts o = k_default;
    o.no_merges = 1;
    write_gguf(&v, fct_path(dir, "nomerges.gguf"), o);
    expect_load_error(fct_path(dir, "nomerges.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.merges", "no");
    o = k_default;
    o.pre = "no-such-pre";
    write_gguf(&v, fct_path(dir, "pre.gguf"), o);
    expect_load_error(fct_path(dir, "pre.gguf"), FC_ERR_UNSUPPORTED, "no-such-pre", "not supported");
    o = k_default;
    o.pre = "";
    write_gguf(&v, fct_path(dir, "nopre.gguf"), o);
    expect_load_error(fct_path(dir, "nopre.gguf"), FC_ERR_UNSUPPORTED, "tokenizer.ggml.pre", "not guessed");
    o = k_default;
    o.model = "bert";
    write_gguf(&v, fct_path(dir, "bert.gguf"), o);
    expect_load_error(fct_path(dir, "bert.gguf"), FC_ERR_UNSUPPORTED, "tokenizer.ggml.model", "\"bert\"");
    /* "llama" is SentencePiece, which needs scores (test_tokenizer_spm.c has the rest) */
    o = k_default;
    o.model = "llama";
    write_gguf(&v, fct_path(dir, "spm.gguf"), o);
    expect_load_error(fct_path(dir, "spm.gguf"), FC_ERR_FORMAT, "tokenizer.ggml.scores", NULL);
    o = k_default;
    o.bad_bos = 100000;
    write_gguf(&v, fct_path(dir, "bos.gguf"), o);
    expect_load_error(fct_path(dir, "bos.gguf"), FC_ERR_FORMAT, "bos_token_id", "out of range");

    /* a merge without a separator, and duplicate tokens */
    free(v.merge[0]);
    v.merge[0] = strdup("ab");
    write_gguf(&v, fct_path(dir, "badmerge.gguf"), k_default);
    expect_load_error(fct_path(dir, "badmerge.gguf"), FC_ERR_FORMAT, "merge 0", "no space");
    free(v.merge[0]);
    v.merge[0] = strdup("a b");
    vocab_add(&v, "a", 1, FC_TOKEN_TYPE_NORMAL);
    write_gguf(&v, fct_path(dir, "dup.gguf"), k_default);
    expect_load_error(fct_path(dir, "dup.gguf"), FC_ERR_FORMAT, "same text", "\"a\"");
    v.n--;
    free(v.tok[v.n]);

    /* ids out of range when decoding */
    write_gguf(&v, fct_path(dir, "ok.gguf"), k_default);
    fc_tokenizer *t = load_tok(fct_path(dir, "ok.gguf"));
    const char *p;
    size_t pl;
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_token_piece(ctx, t, v.n, 0, &p, &pl), FC_ERR_INVALID_ARG);
    cr_expect(strstr(fc_ctx_error(ctx), "out of range") && strstr(fc_ctx_error(ctx), "261"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_token ids[] = {1, -5};
    char *text;
    cr_expect_eq(fc_detokenize(ctx, t, ids, 2, 0, &text, NULL), FC_ERR_INVALID_ARG);
    cr_expect(strstr(fc_ctx_error(ctx), "-5"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_detok_stream *st = fc_detok_stream_new(ctx, t, 0);
    const char *o2;
    size_t ol;
    cr_expect_eq(fc_detok_stream_push(ctx, st, 1 << 30, &o2, &ol), FC_ERR_INVALID_ARG);
    cr_expect(strstr(fc_ctx_error(ctx), "out of range"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_detok_stream_free(st);
    fc_token *tk;
    size_t nt;
    cr_expect_eq(fc_tokenize(ctx, t, "x", 1, 0x80, &tk, &nt), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    fc_tokenizer_free(t);
    vocab_free(&v);
}

Test(tokenizer, speed_1mb) {
    vocab v = {0};
    make_trained(&v, 2000);
    const char *path = fct_path(dir, "speed.gguf");
    write_gguf(&v, path, k_default);
    fc_tokenizer *t = load_tok(path);
    buf big = {0};
    big_text(&big);
    double t0 = now_s();
    fc_token *tk;
    size_t nt;
    encode(t, big.p, big.n, FC_TOKENIZE_PARSE_SPECIAL, &tk, &nt);
    double t1 = now_s();
    fprintf(stderr, "tokenizer: encoded %zu bytes into %zu tokens in %.1f ms: %.0f tokens/s, %.1f MB/s\n", big.n, nt,
            (t1 - t0) * 1e3, (double)nt / (t1 - t0), (double)big.n / (t1 - t0) / 1e6);
    char *back;
    size_t bl;
    cr_assert_eq(fc_detokenize(ctx, t, tk, nt, FC_DETOKENIZE_UNPARSE_SPECIAL, &back, &bl), FC_OK);
    cr_expect(utf8_valid(big.p, big.n) ? (bl == big.n && memcmp(back, big.p, bl) == 0) : 1, "1 MB round trip differs");
    free(back);
    fc_tokens_free(tk);
    free(big.p);
    fc_tokenizer_free(t);
    vocab_free(&v);
}
