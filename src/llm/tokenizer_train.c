/* SPDX-License-Identifier: MIT */
/* Fucina llm: fc_tokenizer_train (include/fucina/tokenizer_train.h): the
 * options' checks, the words of the texts (fc_tokenize's own decoding and
 * pre-tokenizer, so training sees exactly the words encoding will), the
 * merge loop (tokenizer_train_bpe.c) and the GGUF, written with the model
 * writer's vocabulary writer (mm_vocab_write) so both emit the same keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "exec/ctx.h"
#include "fucina/chat.h"
#include "fucina/gguf.h"
#include "fucina/tokenizer.h"
#include "fucina/tokenizer_train.h"
#include "io/atomic_file.h"
#include "llm/make_model.h"
#include "llm/tokenizer_train_internal.h"
#include "llm/unicode.h"

#define OP "fc_tokenizer_train"

static const char *const k_default_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

/* The pre-tokenizers we train for, and the tokenizer.ggml.pre each writes
 * (llama.cpp's names; "gpt2" is its "gpt-2"). */
static const struct {
    const char *name, *written;
    fctk_pre pre;
} k_pres[] = {
    {"llama-bpe", "llama-bpe", FCTK_PRE_LLAMA3},
    {"qwen2", "qwen2", FCTK_PRE_QWEN2},
    {"gpt2", "gpt-2", FCTK_PRE_GPT2},
    {"gpt-2", "gpt-2", FCTK_PRE_GPT2},
};

typedef struct plan {
    int64_t vocab_size, max_merges, min_count;
    fctk_pre pre;
    const char *pre_name, *arch;
    const char *const *specials;
    int n_specials;
} plan;

/* Records an FC_ERR_INVALID_ARG (or st) error, prefixed with the function. */
#define FAIL(st, ...) (fc_fail(ctx, (st), OP ": " __VA_ARGS__), (st))

/* The bytes a special's text spells when read as GPT-2 byte images, into
 * out; 0 when some codepoint is not a byte image (the text can then never
 * be a merged token's spelling). */
static size_t image_bytes(const char *s, unsigned char *out, size_t cap)
{
    const unsigned char *u = (const unsigned char *)s;
    const size_t n = strlen(s);
    size_t i = 0, k = 0;
    while (i < n) {
        const int b = fcu_cpt_to_byte(fcu_decode(u, n, &i));
        if (b < 0 || k == cap) return 0;
        out[k++] = (unsigned char)b;
    }
    return k;
}

/* Checks the options and reserves the specials' image spellings (no merge
 * may make one: the vocabulary would hold that text twice). */
static fc_status make_plan(fc_ctx *ctx, const fc_tokenizer_train_options *opt, plan *p, fctk_map *reserved)
{
    static const fc_tokenizer_train_options zero = {0};
    if (!opt) opt = &zero;
    memset(p, 0, sizeof *p);
    p->pre = FCTK_PRE_LLAMA3;
    p->pre_name = "llama-bpe";
    if (opt->pre) {
        size_t i = 0;
        while (i < sizeof k_pres / sizeof k_pres[0] && strcmp(k_pres[i].name, opt->pre)) i++;
        if (i == sizeof k_pres / sizeof k_pres[0])
            return FAIL(FC_ERR_INVALID_ARG, "unknown pre-tokenizer '%s' (supported: llama-bpe, qwen2, gpt2)", opt->pre);
        p->pre = k_pres[i].pre;
        p->pre_name = k_pres[i].written;
    }
    p->arch = opt->arch ? opt->arch : "qwen3";
    if (!p->arch[0]) return FAIL(FC_ERR_INVALID_ARG, "the architecture name is empty");
    if (opt->n_specials < 0 || (!opt->specials && opt->n_specials))
        return FAIL(FC_ERR_INVALID_ARG, "n_specials %d %s", opt->n_specials,
                    opt->n_specials < 0 ? "is negative" : "with specials NULL");
    p->specials = opt->specials ? opt->specials : k_default_specials;
    p->n_specials = opt->specials ? opt->n_specials : 3;
    for (int i = 0; i < p->n_specials; i++) {
        const char *s = p->specials[i];
        if (!s) return FAIL(FC_ERR_INVALID_ARG, "special token %d is NULL", i);
        if (!s[0]) return FAIL(FC_ERR_INVALID_ARG, "special token %d is empty", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(p->specials[j], s))
                return FAIL(FC_ERR_INVALID_ARG, "special token '%s' is given twice (specials %d and %d)", s, j, i);
        unsigned char img[256];
        const size_t k = image_bytes(s, img, sizeof img);
        if (k == 1) return FAIL(FC_ERR_INVALID_ARG, "special token '%s' is spelled like the byte token %d", s, img[0]);
        if (k > 1 && fctk_map_put(reserved, img, k, 0, -2, NULL) < 0) return FAIL(FC_ERR_OOM, "out of memory");
    }
    const long long min_vocab = 256 + p->n_specials;
    p->vocab_size = opt->vocab_size ? opt->vocab_size : 4096;
    if (p->vocab_size < min_vocab || p->vocab_size > INT32_MAX)
        return FAIL(FC_ERR_INVALID_ARG, "vocab_size %lld is %s %lld (256 byte tokens + %d special tokens)",
                    (long long)p->vocab_size, p->vocab_size < min_vocab ? "below" : "above the limit,",
                    p->vocab_size < min_vocab ? min_vocab : (long long)INT32_MAX, p->n_specials);
    p->max_merges = p->vocab_size - min_vocab;
    if (opt->min_pair_count < 0)
        return FAIL(FC_ERR_INVALID_ARG, "min_pair_count %lld is negative", (long long)opt->min_pair_count);
    p->min_count = opt->min_pair_count ? opt->min_pair_count : 2;
    return FC_OK;
}

/* ---- the words ---- */

typedef struct collect {
    fctk_map words; /* word bytes -> index; entry i's bytes are word i's */
    int64_t *count;
    size_t count_cap;
    int64_t n_words;
    uint32_t *cpts;
    size_t *ends;
    size_t cpt_cap;
    unsigned char *word;
    size_t word_cap;
} collect;

static int add_text(collect *c, fctk_pre pre, const unsigned char *u, size_t len)
{
    if (!len) return 0; /* no words (and no zero-size allocations) */
    if (fc_grow((void **)&c->cpts, &c->cpt_cap, len, sizeof *c->cpts)) return -1;
    size_t *e = realloc(c->ends, c->cpt_cap * sizeof *e);
    if (!e) return -1;
    c->ends = e;
    size_t nc = 0, i = 0;
    while (i < len) c->cpts[nc++] = fcu_decode(u, len, &i);
    const size_t nw = fctk_pretokenize(pre, c->cpts, nc, c->ends);
    size_t start = 0;
    for (size_t k = 0; k < nw; k++) {
        const size_t end = c->ends[k];
        if (fc_grow((void **)&c->word, &c->word_cap, (end - start) * 4, 1)) return -1;
        size_t wn = 0;
        for (size_t j = start; j < end; j++) wn += (size_t)fcu_encode(c->cpts[j], c->word + wn);
        start = end;
        if (c->words.n >= INT32_MAX) return -1;
        int32_t id = (int32_t)c->words.n;
        const int r = fctk_map_put(&c->words, c->word, wn, 0, id, &id);
        if (r < 0) return -1;
        if (r == 1) {
            if (fc_grow((void **)&c->count, &c->count_cap, c->words.n, sizeof *c->count)) return -1;
            c->count[id] = 0;
        }
        c->count[id]++;
        c->n_words++;
    }
    return 0;
}

static void collect_free(collect *c)
{
    fctk_map_free(&c->words);
    free(c->count);
    free(c->cpts);
    free(c->ends);
    free(c->word);
}

/* The words as symbol runs: one symbol per byte, laid out as the map's arena. */
static int make_words(const collect *c, fctt_words *w)
{
    memset(w, 0, sizeof *w);
    w->n = c->words.n;
    w->count = c->count;
    w->off = malloc((w->n ? w->n : 1) * sizeof *w->off);
    w->len = malloc((w->n ? w->n : 1) * sizeof *w->len);
    w->sym = malloc((c->words.arena_len ? c->words.arena_len : 1) * sizeof *w->sym);
    if (!w->off || !w->len || !w->sym) return -1;
    for (size_t i = 0; i < c->words.arena_len; i++) w->sym[i] = c->words.arena[i];
    for (size_t i = 0; i < w->n; i++) {
        w->off[i] = c->words.entries[i].off;
        w->len[i] = c->words.entries[i].len;
    }
    return 0;
}

/* ---- the file ---- */

/* Token id's bytes spelled with GPT-2's byte images (with_right: then a
 * space and token right's: a merge line), NUL-terminated (no byte has NUL
 * as its image), into a new string. */
static char *spell(const fctt_tokens *t, int32_t id, int with_right, int32_t right)
{
    const size_t n = t->len[id] + (with_right ? t->len[right] : 0);
    char *s = malloc(n * 2 + 2); /* images are below U+0800: at most two bytes each */
    if (!s) return NULL;
    size_t o = 0;
    for (int side = 0; side < (with_right ? 2 : 1); side++) {
        const int32_t k = side ? right : id;
        if (side) s[o++] = ' ';
        for (uint32_t i = 0; i < t->len[k]; i++)
            o += (size_t)fcu_encode(fcu_byte_to_cpt(t->bytes[t->off[k] + i]), (unsigned char *)s + o);
    }
    s[o] = 0;
    return s;
}

static int has_special(const plan *p, const char *s)
{
    for (int i = 0; i < p->n_specials; i++)
        if (!strcmp(p->specials[i], s)) return 1;
    return 0;
}

#define TRY(x)                      \
    do {                            \
        st = (x);                   \
        if (st != FC_OK) goto done; \
    } while (0)

static fc_status write_gguf(fc_ctx *ctx, const plan *p, const fctt_tokens *toks, const fctt_merge *m, int64_t nm,
                            const char *path)
{
    mm_vocab v = {0};
    fc_gguf_writer *w = NULL;
    fc_status st = FC_OK;
    v.kind = MM_VOCAB_BPE;
    v.pre = p->pre_name;
    v.bos = v.eos = v.pad = v.unk = -1;
    for (size_t i = 0; i < toks->n; i++) {
        char *s = spell(toks, (int32_t)i, 0, 0);
        const int bad_add = !s || mm_vocab_add(&v, s, FC_TOKEN_TYPE_NORMAL, 0.0f);
        free(s);
        if (bad_add) goto oom;
    }
    for (int i = 0; i < p->n_specials; i++)
        if (mm_vocab_add(&v, p->specials[i], FC_TOKEN_TYPE_CONTROL, 0.0f)) goto oom;
    if (p->n_specials) {
        v.bos = v.pad = (int32_t)toks->n;
        v.eos = (int32_t)toks->n + p->n_specials - 1;
    }
    if (nm && !(v.merge = malloc((size_t)nm * sizeof *v.merge))) goto oom;
    v.merge_cap = (int)nm;
    for (int64_t k = 0; k < nm; k++) {
        if (!(v.merge[k] = spell(toks, m[k].left, 1, m[k].right))) goto oom;
        v.n_merges++;
    }
    if (!(w = fc_gguf_writer_new(ctx))) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    TRY(fc_gguf_set_str(w, "general.architecture", p->arch));
    TRY(fc_gguf_set_str(w, "general.name", "fucina trained tokenizer"));
    TRY(mm_vocab_write(w, &v));
    TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0)); /* mm_vocab_write leaves a false one out */
    if (has_special(p, "<|im_start|>") && has_special(p, "<|im_end|>"))
        TRY(fc_gguf_set_str(w, "tokenizer.chat_template", fc_chat_template_text(FC_CHAT_TEMPLATE_CHATML)));
    TRY(fc_gguf_writer_save(w, path));
done:
    fc_gguf_writer_free(w);
    mm_vocab_free(&v);
    return st;
oom:
    mm_vocab_free(&v);
    fc_fail(ctx, FC_ERR_OOM, OP ": out of memory writing the vocabulary (%zu tokens)", toks->n);
    return FC_ERR_OOM;
}

fc_status fc_tokenizer_train_ex(fc_ctx *ctx, const char *const *texts, const size_t *lens, size_t n,
                                const char *out_path, const fc_tokenizer_train_options *opt,
                                fc_tokenizer_train_stats *stats)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (n && (!texts || !lens))
        return FAIL(FC_ERR_INVALID_ARG, "%s is NULL with %zu texts", !texts ? "texts" : "lens", n);
    if (!out_path) return FAIL(FC_ERR_INVALID_ARG, "the output path is NULL");
    for (size_t i = 0; i < n; i++)
        if (!texts[i] && lens[i]) return FAIL(FC_ERR_INVALID_ARG, "text %zu is NULL with %zu bytes", i, lens[i]);
    plan p;
    fctk_map reserved = {0};
    collect c = {0};
    fctt_words w = {0};
    fctt_tokens toks = {0};
    fctt_merge *merges = NULL;
    int64_t nm = 0, skipped = 0;
    fc_status st = make_plan(ctx, opt, &p, &reserved);
    if (st != FC_OK) goto done;
    if (!fc_atomic_check_dest(ctx, OP, out_path)) {
        st = FC_ERR_IO;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (add_text(&c, p.pre, (const unsigned char *)texts[i], lens[i])) goto oom;
    if (make_words(&c, &w)) goto oom;
    if (fctt_bpe(&w, p.max_merges, p.min_count, &reserved, &merges, &nm, &toks, &skipped)) goto oom;
    st = write_gguf(ctx, &p, &toks, merges, nm, out_path);
    if (st == FC_OK && stats) {
        stats->n_vocab = (int64_t)toks.n + p.n_specials;
        stats->n_merges = nm;
        stats->n_words = c.n_words;
        stats->n_unique_words = (int64_t)c.words.n;
        stats->n_skipped = skipped;
    }
    goto done;
oom:
    st = FC_ERR_OOM;
    fc_fail(ctx, st, OP ": out of memory (%zu texts, %zu unique words so far)", n, c.words.n);
done:
    fctk_map_free(&reserved);
    collect_free(&c);
    free(w.off);
    free(w.len);
    free(w.sym);
    fctt_tokens_free(&toks);
    free(merges);
    return st;
}

fc_status fc_tokenizer_train(fc_ctx *ctx, const char *const *texts, const size_t *lens, size_t n, const char *out_path,
                             const fc_tokenizer_train_options *opt)
{
    return fc_tokenizer_train_ex(ctx, texts, lens, n, out_path, opt, NULL);
}
