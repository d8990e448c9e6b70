/* SPDX-License-Identifier: MIT */
/* The pre-tokenizers' SPLITS against llama.cpp's (qwen2, llama-bpe, gpt-2).
 *
 * Token-id parity on a trained vocabulary cannot see a wrong word boundary
 * when no merge crosses it (a digit starting a letter run in qwen2 changed
 * no id). Here the vocabulary is built from the words our pre-tokenizer
 * (fctk_pretokenize) cuts an adversarial corpus into: every substring of a
 * word is a token, made by merging any two adjacent substrings, so BPE always
 * ends a word of ours as its one token; and every two ADJACENT words are one
 * token too, merged last. Where llama.cpp cuts what we keep, our word's token
 * cannot form; where it keeps together what we cut, its BPE merges across our
 * cut (at the latest the two words into their pair token).
 * Either way the ids differ from ours. Skipped without the oracle.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/tokenizer.h"
#include "llm/tokenizer_internal.h"
#include "llm/unicode.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(tokenizer_splits, 1, "fc_tok_splits_");

static const char *const CORPUS[] = {
    "abc123def 4567xyz a1b2c3 3rd 1st 22nd 100km 9a 9 a 12345678901 x9y8z7",
    "I'm you're he'll she'd it's we've they'RE DON'T 'tis o'clock ''' 's 'S 'll9 '9",
    "Hello   world\t\ttab  \n\n  \r\n x  \n\t end   ",
    "caf\xc3\xa9 na\xc3\xafve \xc3\x9c" "ber \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
    "\xce\xb1\xce\xb2\xce\xb3 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88 "
    "\xd9\xa1\xd9\xa2\xd9\xa3" "abc \xe2\x85\xa0\xe2\x85\xa1x \xc2\xb2\xc2\xb3 \xe2\x91\xa0\xe2\x91\xa1",
    "x\xd9\xa3y \xef\xbc\x91\xef\xbc\x92\xef\xbd\x81 \xe0\xa5\xa8\xe0\xa4\x95 3\xc3\xa9 \xc3\xa9" "3",
    "foo.bar,baz!! ?? (x) [y] {z} <a/> a+b=c 3.14 1,000 -5 $100 #tag @user ~~ ... --> ;;",
    " .a  .b \t!c\n?d 1.a a.1 _x_ x_1 \xe2\x80\x94" "dash\xe2\x80\x94 \xc2\xa0nbsp\xc2\xa0 \xe2\x80\x83" "em",
    "ABCdefGHI aB1cD2 \xc3\x80" "b\xc3\xa9" "C mixedCASE9words 0x1F 1e10 v2.0.1",
    "  leading\n\n\ntrailing \n new\r\rline   \t\n   ",
    "'s'd'm'll're've't x's 3's \xc3\xa9's don\xe2\x80\x99t \xf0\x9f\x98\x80\xf0\x9f\x98\x80 a\xf0\x9f\x98\x80" "1",
};

typedef struct vocab {
    char **tok;
    size_t *tok_len;
    int32_t *type;
    int n, cap;
    char **merge;
    int n_merges, merge_cap;
} vocab;

/* byte-image spelling of raw bytes */
static size_t image(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)fcu_encode(fcu_byte_to_cpt((uint8_t)s[i]), (unsigned char *)out + o);
    out[o] = 0;
    return o;
}

/* string sets (open addressing on FNV-1a), for tokens and merges */
#define SET_CAP (1u << 19)
typedef struct strset {
    char **key;
    size_t *len;
    int32_t *val;
} strset;

static int32_t *set_slot(strset *h, const char *s, size_t n, int *found) {
    if (!h->key) {
        h->key = calloc(SET_CAP, sizeof *h->key);
        h->len = calloc(SET_CAP, sizeof *h->len);
        h->val = calloc(SET_CAP, sizeof *h->val);
    }
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) x = (x ^ (unsigned char)s[i]) * 1099511628211ull;
    size_t i = (size_t)(x >> 20) & (SET_CAP - 1);
    while (h->key[i] && !(h->len[i] == n && memcmp(h->key[i], s, n) == 0)) i = (i + 1) & (SET_CAP - 1);
    *found = h->key[i] != NULL;
    if (!*found) {
        h->key[i] = malloc(n + 1);
        memcpy(h->key[i], s, n);
        h->len[i] = n;
    }
    return &h->val[i];
}
static void set_free(strset *h) {
    for (size_t i = 0; h->key && i < SET_CAP; i++) free(h->key[i]);
    free(h->key);
    free(h->len);
    free(h->val);
}

static strset toks, merges;

static void add_tok(vocab *v, const char *s, size_t n, int32_t type) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 1024;
        v->tok = realloc(v->tok, (size_t)v->cap * sizeof *v->tok);
        v->tok_len = realloc(v->tok_len, (size_t)v->cap * sizeof *v->tok_len);
        v->type = realloc(v->type, (size_t)v->cap * sizeof *v->type);
    }
    v->tok[v->n] = malloc(n + 1);
    memcpy(v->tok[v->n], s, n);
    v->tok[v->n][n] = 0;
    v->tok_len[v->n] = n;
    v->type[v->n] = type;
    int found;
    *set_slot(&toks, s, n, &found) = v->n;
    v->n++;
}

/* token a+b (raw bytes) made by the merge (a, b), unless it exists */
static void add_merge(vocab *v, const char *a, size_t na, const char *b, size_t nb) {
    char ia[1024], ib[1024], ab[2048];
    size_t la = image(a, na, ia), lb = image(b, nb, ib);
    memcpy(ab, ia, la);
    memcpy(ab + la, ib, lb);
    int found;
    char mk[2048];
    memcpy(mk, ia, la);
    mk[la] = ' ';
    memcpy(mk + la + 1, ib, lb);
    (void)set_slot(&merges, mk, la + lb + 1, &found);
    if (found) return;
    (void)set_slot(&toks, ab, la + lb, &found);
    if (!found) add_tok(v, ab, la + lb, FC_TOKEN_TYPE_NORMAL);
    if (v->n_merges == v->merge_cap) {
        v->merge_cap = v->merge_cap ? v->merge_cap * 2 : 1024;
        v->merge = realloc(v->merge, (size_t)v->merge_cap * sizeof *v->merge);
    }
    char *m = malloc(la + lb + 2);
    memcpy(m, ia, la);
    m[la] = ' ';
    memcpy(m + la + 1, ib, lb);
    m[la + lb + 1] = 0;
    v->merge[v->n_merges++] = m;
}

typedef struct words {
    size_t n;
    size_t off[4096], len[4096]; /* byte ranges in the text */
} words;

static void split(fctk_pre pre, const char *s, words *w) {
    size_t n = strlen(s), nc = 0, i = 0;
    uint32_t cpt[4096];
    size_t boff[4097], ends[4096];
    while (i < n) {
        boff[nc] = i;
        cpt[nc++] = fcu_decode((const unsigned char *)s, n, &i);
    }
    boff[nc] = n;
    w->n = fctk_pretokenize(pre, cpt, nc, ends);
    size_t st = 0;
    for (size_t k = 0; k < w->n; k++) {
        w->off[k] = boff[st];
        w->len[k] = boff[ends[k]] - boff[st];
        st = ends[k];
    }
    cr_assert_eq(st, nc, "the words cover the text");
}

static void check_pre(const char *name, fctk_pre pre) {
    lp_oracle o = lp_get_oracle();
    vocab v = {0};
    char b;
    for (int c = 0; c < 256; c++) {
        char im[8];
        b = (char)c;
        size_t l = image(&b, 1, im);
        add_tok(&v, im, l, FC_TOKEN_TYPE_NORMAL);
    }
    size_t nc = sizeof CORPUS / sizeof CORPUS[0];
    words *w = malloc(nc * sizeof *w);
    /* every word one token, whatever order BPE merges its bytes in: every
     * substring of a word is a token, made by a merge of any two adjacent
     * substrings (shorter results first) */
    size_t maxl = 0;
    for (size_t t = 0; t < nc; t++) {
        split(pre, CORPUS[t], &w[t]);
        for (size_t k = 0; k < w[t].n; k++) maxl = w[t].len[k] > maxl ? w[t].len[k] : maxl;
    }
    for (size_t l = 2; l <= maxl; l++)
        for (size_t t = 0; t < nc; t++)
            for (size_t k = 0; k < w[t].n; k++)
                for (size_t i = 0; i + l <= w[t].len[k]; i++) {
                    const char *p = CORPUS[t] + w[t].off[k] + i;
                    for (size_t j = 1; j < l; j++) add_merge(&v, p, j, p + j, l - j);
                }
    /* every two adjacent words one token, merged after all the chains */
    for (size_t t = 0; t < nc; t++)
        for (size_t k = 0; k + 1 < w[t].n; k++)
            add_merge(&v, CORPUS[t] + w[t].off[k], w[t].len[k], CORPUS[t] + w[t].off[k + 1], w[t].len[k + 1]);
    add_tok(&v, "<|endoftext|>", 13, FC_TOKEN_TYPE_CONTROL);

    char path[4096];
    snprintf(path, sizeof path, "%s/splits_%s.gguf", dir, name);
    fc_gguf_writer *gw = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_str(gw, "general.architecture", "qwen3"), FC_OK);
    cr_assert_eq(fc_gguf_set_str(gw, "tokenizer.ggml.model", "gpt2"), FC_OK);
    cr_assert_eq(fc_gguf_set_str(gw, "tokenizer.ggml.pre", name), FC_OK);
    cr_assert_eq(fc_gguf_set_arr_str(gw, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.tok_len, (uint64_t)v.n),
                 FC_OK);
    cr_assert_eq(fc_gguf_set_arr(gw, "tokenizer.ggml.token_type", FC_GGUF_I32, v.type, (uint64_t)v.n), FC_OK);
    cr_assert_eq(fc_gguf_set_arr_str(gw, "tokenizer.ggml.merges", (const char *const *)v.merge, NULL,
                                     (uint64_t)v.n_merges), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(gw, "tokenizer.ggml.bos_token_id", (uint32_t)(v.n - 1)), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(gw, "tokenizer.ggml.eos_token_id", (uint32_t)(v.n - 1)), FC_OK);
    cr_assert_eq(fc_gguf_set_bool(gw, "tokenizer.ggml.add_bos_token", false), FC_OK);
    cr_assert_eq(fc_gguf_writer_save(gw, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(gw);

    struct llama_model_params mp = o.model_defaults();
    mp.vocab_only = true;
    struct llama_model *lm = o.load(path, mp);
    cr_assert(lm, "llama.cpp cannot load %s", path);
    const void *lv = o.get_vocab(lm);
    fc_tokenizer *tk = fc_tokenizer_load(ctx, path);
    cr_assert(tk, "fc_tokenizer_load(%s): %s", path, fc_ctx_error(ctx));

    int bad = 0;
    for (size_t t = 0; t < nc; t++) {
        const char *s = CORPUS[t];
        fc_token *ft = NULL;
        size_t fn = 0;
        cr_assert_eq(fc_tokenize(ctx, tk, s, strlen(s), 0, &ft, &fn), FC_OK, "%s", fc_ctx_error(ctx));
        llama_token lt[4096];
        int32_t ln = o.tokenize(lv, s, (int32_t)strlen(s), lt, 4096, false, false);
        cr_assert_geq(ln, 0);
        int same = (size_t)ln == fn;
        for (size_t k = 0; same && k < fn; k++) same = lt[k] == ft[k];
        if (!same) {
            bad++;
            cr_log_error("%s: \"%s\": llama.cpp %d tokens, ours %zu (one per word: %zu); first difference:", name,
                         s, ln, fn, w[t].n);
            for (size_t k = 0; k < fn || k < (size_t)ln; k++) {
                int a = k < (size_t)ln ? lt[k] : -1, f = k < fn ? (int)ft[k] : -1;
                if (a == f) continue;
                cr_log_error("  token %zu: llama.cpp %d \"%s\", ours %d \"%s\"", k, a, a >= 0 ? v.tok[a] : "",
                             f, f >= 0 ? v.tok[f] : "");
                break;
            }
        }
        /* the construction works: our words are our tokens */
        cr_assert_eq(fn, w[t].n, "%s: \"%s\": %zu words but %zu tokens", name, s, w[t].n, fn);
        fc_tokens_free(ft);
    }
    cr_assert_eq(bad, 0, "%s: %d of %zu corpus lines split differently from llama.cpp", name, bad, nc);
    fc_tokenizer_free(tk);
    o.model_free(lm);
    free(w);
    for (int i = 0; i < v.n; i++) free(v.tok[i]);
    for (int i = 0; i < v.n_merges; i++) free(v.merge[i]);
    free(v.tok);
    free(v.tok_len);
    free(v.type);
    free(v.merge);
    set_free(&toks);
    set_free(&merges);
    memset(&toks, 0, sizeof toks);
    memset(&merges, 0, sizeof merges);
}

Test(tokenizer_splits, qwen2) { check_pre("qwen2", FCTK_PRE_QWEN2); }
Test(tokenizer_splits, llama_bpe) { check_pre("llama-bpe", FCTK_PRE_LLAMA3); }
Test(tokenizer_splits, gpt2) { check_pre("gpt-2", FCTK_PRE_GPT2); }
