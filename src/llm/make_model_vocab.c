/* SPDX-License-Identifier: MIT */
/* Fucina llm: the random-weight model writer's BPE vocabularies (Qwen and
 * Llama 3 layouts) and the GGUF writing shared with the SPM one
 * (make_model_spm_vocab.c).
 *
 * Every merge's result is a token and every non-byte, non-special token is
 * the result of exactly one merge (the concatenation of its pair), so the
 * table is a valid byte-level BPE that llama.cpp and our tokenizer load. The
 * large layout (Qwen3's 151936 ids) grows word tokens one letter at a time,
 * breadth first, so real English text tokenizes into multi-byte tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/tokenizer.h"
#include "llm/make_model.h"

/* Words whose left-to-right merges make the small BPE table: each word w
 * adds the merges (w[0..i), w[i]) for i = 1.., skipping pairs already
 * present. */
static const char *const k_words[] = {
    " the", " and", " of", " to", " in", " is", " that", " for", " it", " with", " as", " on", " was",
    " he", " be", " at", " by", " this", " had", " not", " are", " but", " from", " or", " have",
    " an", " they", " which", " one", " you", " were", " her", " all", " she", " there", " would",
    " their", " we", " him", " been", " has", " when", " who", " will", " more", " no", " if", " out",
    "ing", "tion", "ed", "er", "es", "ly", "ent", "ation", "Hello", " hello", " world", " World",
    " model", " token", " fucina", " tensor", " Qwen", " llama", "The", " The", "  ", "   ", "\n\n",
    " 1", " 2", "12", "123", ", ", ". ", "!\n", "'s", "'t",
};

/* Qwen2/Qwen3's added tokens from id 151643, in order; 1 = control, 0 =
 * user-defined (not "special" in tokenizer_config.json). */
static const struct {
    const char *text;
    int control;
} k_specials[] = {
    {"<|endoftext|>", 1},    {"<|im_start|>", 1},    {"<|im_end|>", 1},      {"<|object_ref_start|>", 1},
    {"<|object_ref_end|>", 1}, {"<|box_start|>", 1}, {"<|box_end|>", 1},     {"<|quad_start|>", 1},
    {"<|quad_end|>", 1},     {"<|vision_start|>", 1}, {"<|vision_end|>", 1}, {"<|vision_pad|>", 1},
    {"<|image_pad|>", 1},    {"<|video_pad|>", 1},   {"<tool_call>", 0},     {"</tool_call>", 0},
    {"<|fim_prefix|>", 1},   {"<|fim_middle|>", 1},  {"<|fim_suffix|>", 1},  {"<|fim_pad|>", 1},
    {"<|repo_name|>", 1},    {"<|file_sep|>", 1},    {"<tool_response>", 0}, {"</tool_response>", 0},
    {"<think>", 0},          {"</think>", 0},
};
#define N_SPECIALS ((int)(sizeof k_specials / sizeof k_specials[0]))
#define QWEN_FIRST_SPECIAL 151643

/* GPT-2's byte images: printable bytes stand for themselves, the others map
 * to U+0100.. in byte order. */
static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

static uint32_t byte_image(unsigned b)
{
    if (printable(b)) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++) n += !printable(c);
    return 256 + n;
}

static size_t put_utf8(uint32_t c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2; /* byte images are < U+0800 */
}

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int mm_vocab_find(const mm_vocab *v, const char *s)
{
    if (!v->hash_cap) return -1;
    for (uint32_t i = str_hash(s) & (v->hash_cap - 1);; i = (i + 1) & (v->hash_cap - 1)) {
        int32_t id = v->hash[i];
        if (id < 0) return -1;
        if (!strcmp(v->tok[id], s)) return id;
    }
}

/* Keeps the table at most half full. */
static int hash_insert(mm_vocab *v, int32_t id)
{
    if ((uint32_t)(v->n + 1) * 2 > v->hash_cap) {
        uint32_t cap = v->hash_cap ? v->hash_cap * 2 : 1024;
        int32_t *h = malloc((size_t)cap * sizeof *h);
        if (!h) return -1;
        for (uint32_t i = 0; i < cap; i++) h[i] = -1;
        free(v->hash);
        v->hash = h;
        v->hash_cap = cap;
        for (int32_t j = 0; j < id; j++) {
            uint32_t i = str_hash(v->tok[j]) & (cap - 1);
            while (h[i] >= 0) i = (i + 1) & (cap - 1);
            h[i] = j;
        }
    }
    uint32_t i = str_hash(v->tok[id]) & (v->hash_cap - 1);
    while (v->hash[i] >= 0) i = (i + 1) & (v->hash_cap - 1);
    v->hash[i] = id;
    return 0;
}

int mm_vocab_add(mm_vocab *v, const char *s, int32_t type, float score)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 512;
        char **t = realloc(v->tok, (size_t)cap * sizeof *t);
        if (!t) return -1;
        v->tok = t;
        int32_t *ty = realloc(v->type, (size_t)cap * sizeof *ty);
        if (!ty) return -1;
        v->type = ty;
        if (v->kind == MM_VOCAB_SPM) {
            float *sc = realloc(v->score, (size_t)cap * sizeof *sc);
            if (!sc) return -1;
            v->score = sc;
        }
        v->cap = cap;
    }
    if (v->kind == MM_VOCAB_SPM) v->score[v->n] = score;
    size_t len = strlen(s);
    v->tok[v->n] = malloc(len + 1);
    if (!v->tok[v->n]) return -1;
    memcpy(v->tok[v->n], s, len + 1);
    v->type[v->n] = type;
    v->n++;
    return hash_insert(v, v->n - 1);
}

static int merge_add(mm_vocab *v, const char *l, const char *r)
{
    if (v->n_merges == v->merge_cap) {
        int cap = v->merge_cap ? v->merge_cap * 2 : 256;
        char **m = realloc(v->merge, (size_t)cap * sizeof *m);
        if (!m) return -1;
        v->merge = m;
        v->merge_cap = cap;
    }
    size_t ll = strlen(l), lr = strlen(r);
    char *m = malloc(ll + lr + 2);
    if (!m) return -1;
    memcpy(m, l, ll);
    m[ll] = ' ';
    memcpy(m + ll + 1, r, lr + 1);
    v->merge[v->n_merges++] = m;
    return 0;
}

void mm_vocab_free(mm_vocab *v)
{
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merge[i]);
    free(v->tok);
    free(v->type);
    free(v->merge);
    free(v->hash);
    free(v->score);
    memset(v, 0, sizeof *v);
}

/* The merge (l, r) and its token, unless l+r already is a token. Returns 1
 * when added, 0 when present, -1 out of memory. */
static int add_pair(mm_vocab *v, const char *l, const char *r)
{
    char joined[256];
    if (snprintf(joined, sizeof joined, "%s%s", l, r) >= (int)sizeof joined) return 0;
    if (mm_vocab_find(v, joined) >= 0) return 0;
    if (merge_add(v, l, r) || mm_vocab_add(v, joined, FC_TOKEN_TYPE_NORMAL, 0.0f)) return -1;
    return 1;
}

static int add_words(mm_vocab *v)
{
    for (size_t w = 0; w < sizeof k_words / sizeof k_words[0]; w++) {
        const unsigned char *word = (const unsigned char *)k_words[w];
        char cur[64], next[8];
        size_t len = put_utf8(byte_image(word[0]), cur);
        cur[len] = 0;
        for (size_t i = 1; word[i]; i++) {
            const size_t k = put_utf8(byte_image(word[i]), next);
            next[k] = 0;
            if (add_pair(v, cur, next) < 0) return -1;
            if (len + k >= sizeof cur) break; /* the words are short: never */
            memcpy(cur + len, next, k + 1);
            len += k;
        }
    }
    return 0;
}

/* A word token: an optional leading space image (U+0120, "\xC4\xA0") then
 * ASCII letters only; the bare space image too, so words that follow a space
 * grow from it (as GPT-2-style vocabularies have "Ġthe"). */
static int wordish(const char *s)
{
    if ((unsigned char)s[0] == 0xC4 && (unsigned char)s[1] == 0xA0) {
        s += 2;
        if (!*s) return 1;
    }
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return 0;
    return 1;
}

/* Letter extensions, breadth first over word tokens (the queue is the token
 * list itself), until the normal tokens reach `target`. Lowercase letters
 * first by frequency order so short common words appear early. */
static int grow_words(mm_vocab *v, int target)
{
    static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
    for (int base = 0; base < v->n && v->n < target; base++) {
        if (!wordish(v->tok[base])) continue;
        for (const char *l = letters; *l && v->n < target; l++) {
            char r[2] = {*l, 0};
            if (add_pair(v, v->tok[base], r) < 0) return -1;
        }
    }
    return v->n == target ? 0 : -1;
}

/* The fields every Qwen-layout vocabulary shares (make_model.c's keys). */
static void qwen_ids(mm_vocab *v)
{
    v->kind = MM_VOCAB_BPE;
    v->pre = "qwen2";
    v->bos = v->pad = mm_vocab_find(v, "<|endoftext|>");
    v->eos = mm_vocab_find(v, "<|im_end|>");
    v->unk = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = 0;
}

/* The 256 byte tokens and the word merges, the start of both BPE layouts. */
static int bytes_and_words(mm_vocab *v)
{
    char s[32];
    for (unsigned b = 0; b < 256; b++) {
        s[put_utf8(byte_image(b), s)] = 0;
        if (mm_vocab_add(v, s, FC_TOKEN_TYPE_NORMAL, 0.0f)) return -1;
    }
    return add_words(v);
}

int mm_vocab_build(mm_vocab *v, int64_t n_vocab)
{
    memset(v, 0, sizeof *v);
    if (n_vocab && n_vocab < QWEN_FIRST_SPECIAL + N_SPECIALS) return -1;
    char s[32];
    if (bytes_and_words(v)) goto oom;
    if (!n_vocab) {
        for (int i = 0; i < 3; i++) /* <|endoftext|>, <|im_start|>, <|im_end|> */
            if (mm_vocab_add(v, k_specials[i].text, FC_TOKEN_TYPE_CONTROL, 0.0f)) goto oom;
        qwen_ids(v);
        return 0;
    }
    if (grow_words(v, QWEN_FIRST_SPECIAL)) goto oom;
    for (int i = 0; i < N_SPECIALS; i++)
        if (mm_vocab_add(v, k_specials[i].text, k_specials[i].control ? FC_TOKEN_TYPE_CONTROL : FC_TOKEN_TYPE_USER_DEFINED,
                         0.0f))
            goto oom;
    while (v->n < n_vocab) {
        snprintf(s, sizeof s, "[PAD%d]", v->n);
        if (mm_vocab_add(v, s, FC_TOKEN_TYPE_UNUSED, 0.0f)) goto oom;
    }
    qwen_ids(v);
    return 0;
oom:
    mm_vocab_free(v);
    return -1;
}

/* Llama 3's added tokens, in its order (all control: llama.cpp's convert
 * marks them special). */
static const char *const k_llama3_specials[] = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
    "<|python_tag|>",
};

int mm_vocab_build_llama3(mm_vocab *v)
{
    memset(v, 0, sizeof *v);
    if (bytes_and_words(v)) goto oom;
    for (size_t i = 0; i < sizeof k_llama3_specials / sizeof k_llama3_specials[0]; i++)
        if (mm_vocab_add(v, k_llama3_specials[i], FC_TOKEN_TYPE_CONTROL, 0.0f)) goto oom;
    v->kind = MM_VOCAB_BPE;
    v->pre = "llama-bpe";
    v->bos = mm_vocab_find(v, "<|begin_of_text|>");
    v->eos = mm_vocab_find(v, "<|eot_id|>"); /* the instruct models' EOS */
    v->pad = mm_vocab_find(v, "<|finetune_right_pad_id|>");
    v->unk = -1;
    v->add_bos = 1;
    v->add_eos = 0;
    v->add_space_prefix = 0;
    return 0;
oom:
    mm_vocab_free(v);
    return -1;
}

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        fc_status st_ = (x);                                                                                           \
        if (st_ != FC_OK) return st_;                                                                                  \
    } while (0)

/* The keys in make_model.c's former order for BPE (model, pre, tokens,
 * types, merges, EOS, PAD, BOS, add_bos), so its files stay byte-identical
 * when it switches to this function; add_eos only when set (or SPM), since
 * llama.cpp defaults it to false for both. */
fc_status mm_vocab_write(fc_gguf_writer *w, const mm_vocab *v)
{
    const int spm = v->kind == MM_VOCAB_SPM;
    TRY(fc_gguf_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2"));
    if (v->pre) TRY(fc_gguf_set_str(w, "tokenizer.ggml.pre", v->pre));
    TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, NULL, (uint64_t)v->n));
    if (v->score) TRY(fc_gguf_set_arr(w, "tokenizer.ggml.scores", FC_GGUF_F32, v->score, (uint64_t)v->n));
    TRY(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, v->type, (uint64_t)v->n));
    if (!spm)
        TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merge, NULL, (uint64_t)v->n_merges));
    if (v->eos >= 0) TRY(fc_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos));
    if (v->pad >= 0) TRY(fc_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad));
    if (v->bos >= 0) TRY(fc_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos));
    if (v->unk >= 0) TRY(fc_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk));
    TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos));
    if (spm || v->add_eos) TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos));
    if (spm) TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix));
    return FC_OK;
}
