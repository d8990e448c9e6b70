/* SPDX-License-Identifier: MIT */
/* Fucina llm: building a tokenizer (byte-level BPE or SentencePiece) from
 * GGUF metadata.
 *
 * What llama.cpp does and we follow (it decides token ids):
 * - tokenizer.ggml.model "gpt2" is byte-level BPE, "llama" SentencePiece;
 *   SPM defaults: BOS 1, EOS 2, UNK 0 (each dropped when out of range),
 *   add_bos true, add_eos false, add_space_prefix true; BPE: add_bos false,
 *   except the llama3 pre-tokenizers (true, and ignore_merges);
 * - merges are "left right", split at the first space after byte 0; rank =
 *   index; a repeated pair keeps its first rank;
 * - an empty token text is renamed "[EMPTY_<id>]";
 * - tokens whose text llama.cpp lists as end-of-generation ("<|eot_id|>",
 *   "<|im_end|>", "<|end|>", "<end_of_turn>", "</s>", ...) are made control
 *   tokens whatever the file says, and its gpt-oss / o200k / gemma4 retyping
 *   rules are applied (retype_by_name), because the type decides whether a
 *   token is matched in plain text and whether it renders;
 * - special-token partitioning uses control, user-defined and unknown
 *   tokens, longest text first.
 * Where we are stricter (an error instead of a log line and a guess):
 * unknown or missing pre-tokenizer (BPE), duplicate token texts (llama.cpp
 * throws), a merge without a separator, special ids out of range (llama.cpp
 * keeps its default), add_bos/add_eos without the id (BPE files without
 * bos_token_id get id 11 from llama.cpp; we have none), a missing
 * tokenizer.ggml.scores for SPM (llama.cpp scores every token 0, which
 * silently merges left to right), scores or token types whose length is not
 * the vocabulary's, NaN scores, BYTE tokens not spelled <0xXX>. Not copied:
 * the FIM-name retyping, the "unused"-name flag (no effect on ids or text)
 * and the per-model lstrip/rstrip attributes llama.cpp sets from
 * general.name (Phi-3) or the pre name (jina-v2). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "llm/tokenizer_internal.h"
#include "llm/unicode.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_SCORES "tokenizer.ggml.scores"

/* The tokenizer.ggml.pre names we implement, with the flags llama.cpp's
 * llama_vocab::impl::load gives each (it decides them by name). */
static const struct {
    const char *name;
    fctk_pre pre;
    int ignore_merges, add_bos, clean_spaces;
} k_pres[] = {
    /* LLAMA_VOCAB_PRE_TYPE_QWEN2 (clean_spaces off) */
    {"qwen2", FCTK_PRE_QWEN2, 0, 0, 0},
    {"deepseek-r1-qwen", FCTK_PRE_QWEN2, 0, 0, 0},
    {"kormo", FCTK_PRE_QWEN2, 0, 0, 0},
    {"f2llmv2", FCTK_PRE_QWEN2, 0, 0, 0},
    /* LLAMA_VOCAB_PRE_TYPE_LLAMA3: ignore_merges, add_bos */
    {"llama-bpe", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"llama3", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"llama-v3", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"falcon3", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"falcon-h1", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"pixtral", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"midm-2.0", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"lfm2", FCTK_PRE_LLAMA3, 1, 1, 1},
    {"jina-v5-nano", FCTK_PRE_LLAMA3, 1, 1, 1},
    /* DBRX / SMAUG: llama3's regex without its flags */
    {"dbrx", FCTK_PRE_LLAMA3, 0, 0, 1},
    {"smaug-bpe", FCTK_PRE_LLAMA3, 0, 0, 1},
    /* LLAMA_VOCAB_PRE_TYPE_GPT2 (and MPT / OLMO: the same regex and flags) */
    {"gpt-2", FCTK_PRE_GPT2, 0, 0, 1},
    {"phi-2", FCTK_PRE_GPT2, 0, 0, 1},
    {"mpt", FCTK_PRE_GPT2, 0, 0, 1},
    {"olmo", FCTK_PRE_GPT2, 0, 0, 1},
};
#define N_PRES (sizeof k_pres / sizeof k_pres[0])

/* "a, b, c" of every supported pre-tokenizer name into buf, for error
 * messages (no static buffer: loads may run on several threads). */
static const char *pre_names(char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_PRES && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", k_pres[i].name);
    return buf;
}

void fc_tokenizer_free(fc_tokenizer *t) {
    if (!t) return;
    free(t->type);
    free(t->score);
    free(t->text_off);
    free(t->text_len);
    free(t->text);
    free(t->piece_off);
    free(t->piece_len);
    free(t->piece);
    fctk_map_free(&t->by_text);
    fctk_map_free(&t->by_bytes);
    fctk_map_free(&t->merges);
    free(t->specials);
    free(t);
}

/* Decode a byte-mapped spelling into bytes; 0 when a codepoint is not the
 * image of a byte (such text can never be produced by BPE). */
static int unmap_text(const char *s, size_t len, unsigned char *out, size_t *out_len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, n = 0;
    while (i < len) {
        uint32_t c = fcu_decode(u, len, &i);
        int b = fcu_cpt_to_byte(c);
        if (b < 0) return 0;
        out[n++] = (unsigned char)b;
    }
    *out_len = n;
    return 1;
}

static fc_status get_str_key(fc_ctx *ctx, fc_gguf *g, const char *key, const char **out, size_t *len, int required) {
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) {
        if (!required) {
            *out = NULL;
            return FC_OK;
        }
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: the GGUF has no %s", key);
        return FC_ERR_FORMAT;
    }
    if (fc_gguf_kv_type(g, k) != FC_GGUF_STR) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s is %s, expected STRING", key,
                fc_gguf_vtype_name(fc_gguf_kv_type(g, k)));
        return FC_ERR_FORMAT;
    }
    return fc_gguf_get_str(g, key, out, len);
}

/* *out keeps its value (the default) when the key is absent. */
static fc_status get_id_key(fc_ctx *ctx, fc_gguf *g, const char *key, int32_t n_vocab, fc_token *out) {
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) return FC_OK;
    uint32_t v;
    int ty = fc_gguf_kv_type(g, k);
    if (ty == FC_GGUF_U32) {
        fc_gguf_get_u32(g, key, &v);
    } else if (ty == FC_GGUF_I32) {
        int32_t s;
        fc_gguf_get_i32(g, key, &s);
        if (s < 0) {
            fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s = %d is negative", key, (int)s);
            return FC_ERR_FORMAT;
        }
        v = (uint32_t)s;
    } else {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s is %s, expected UINT32", key, fc_gguf_vtype_name(ty));
        return FC_ERR_FORMAT;
    }
    if (v >= (uint32_t)n_vocab) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s = %u is out of range (the vocabulary has %d tokens)", key,
                (unsigned)v, (int)n_vocab);
        return FC_ERR_FORMAT;
    }
    *out = (fc_token)v;
    return FC_OK;
}

/* *out keeps its value (the default) when the key is absent. */
static fc_status get_bool_key(fc_ctx *ctx, fc_gguf *g, const char *key, int *out) {
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) return FC_OK;
    if (fc_gguf_kv_type(g, k) != FC_GGUF_BOOL) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s is %s, expected BOOL", key, fc_gguf_vtype_name(fc_gguf_kv_type(g, k)));
        return FC_ERR_FORMAT;
    }
    return fc_gguf_get_bool(g, key, out);
}

static fc_status get_str_array(fc_ctx *ctx, fc_gguf *g, const char *key, const char *what, uint64_t *n) {
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: the GGUF has no %s (a %s vocabulary needs it)", key, what);
        return FC_ERR_FORMAT;
    }
    int et;
    if (fc_gguf_kv_type(g, k) != FC_GGUF_ARR || fc_gguf_get_arr(g, key, &et, n) != FC_OK || et != FC_GGUF_STR) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s must be an array of strings", key);
        return FC_ERR_FORMAT;
    }
    return FC_OK;
}

static void *oom(fc_ctx *ctx, fc_tokenizer *t) {
    fc_tokenizer_free(t);
    return fc_fail(ctx, FC_ERR_OOM, "fc_tokenizer: out of memory while building the vocabulary");
}

static void *bad(fc_tokenizer *t) {
    fc_tokenizer_free(t);
    return NULL;
}

/* The byte of a BYTE token, spelled <0xXX> (either case, as llama.cpp's
 * strtol reads it); -1 for any other spelling. */
static int byte_of_text(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The special=true rendering of token id (llama.cpp's token_to_piece):
 * control / user-defined / unknown: the text as is; byte: its byte; normal:
 * for SPM the text with every U+2581 turned back into a space, for BPE each
 * codepoint mapped back to its byte, or "[UNK_BYTE_0x<hex>" + text + "]"
 * for one that is not a byte's image; unused / undefined: nothing. */
static size_t render_piece(const fc_tokenizer *t, int32_t id, char *out) {
    const char *s = t->text + t->text_off[id];
    size_t len = t->text_len[id];
    switch ((fc_token_type)t->type[id]) {
    case FC_TOKEN_TYPE_CONTROL:
    case FC_TOKEN_TYPE_USER_DEFINED:
    case FC_TOKEN_TYPE_UNKNOWN:
        if (out) memcpy(out, s, len);
        return len;
    case FC_TOKEN_TYPE_BYTE:
        if (out) out[0] = (char)byte_of_text(s, len); /* checked at load */
        return 1;
    case FC_TOKEN_TYPE_NORMAL: {
        size_t n = 0, i = 0;
        if (t->model == FCTK_MODEL_SPM) {
            while (i < len) {
                if (i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                    if (out) out[n] = ' ';
                    n++;
                    i += 3;
                } else {
                    if (out) out[n] = s[i];
                    n++;
                    i++;
                }
            }
            return n;
        }
        const unsigned char *u = (const unsigned char *)s;
        while (i < len) {
            uint32_t c = fcu_decode(u, len, &i);
            int b = fcu_cpt_to_byte(c);
            if (b >= 0) {
                if (out) out[n] = (char)b;
                n++;
                continue;
            }
            unsigned char enc[4];
            int el = fcu_encode(c, enc);
            char tmp[16];
            const char *pre = "[UNK_BYTE_0x";
            if (out) memcpy(out + n, pre, 12);
            n += 12;
            for (int k = 0; k < el; k++) {
                snprintf(tmp, sizeof tmp, "%02x", enc[k]);
                if (out) memcpy(out + n, tmp, 2);
                n += 2;
            }
            if (out) memcpy(out + n, s, len);
            n += len;
            if (out) out[n] = ']';
            n++;
        }
        return n;
    }
    case FC_TOKEN_TYPE_UNUSED:
    case FC_TOKEN_TYPE_UNDEFINED:
        return 0;
    }
    return 0;
}

/* The texts llama.cpp takes for end-of-generation tokens (its special_eog_ids
 * list in llama_vocab::impl::load): such a token becomes a control token
 * whatever its type in the file. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of"
    "\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[",
};

static fc_token find_text(const fc_tokenizer *t, const char *s) { return fctk_map_get(&t->by_text, s, strlen(s), 0); }

/* llama.cpp's retyping by text, in its order: end-of-generation names to
 * control; gpt-oss's channel tokens to user-defined; "<|end|>" back to
 * user-defined for o200k_harmony / solar-open (which end turns with
 * <|return|> / <|call|> / <|flush|>); gemma4's "</s>" to normal. */
static void retype_by_name(fc_tokenizer *t) {
    for (size_t i = 0; i < sizeof k_eog_texts / sizeof k_eog_texts[0]; i++) {
        fc_token id = find_text(t, k_eog_texts[i]);
        if (id >= 0) t->type[id] = FC_TOKEN_TYPE_CONTROL;
    }
    static const char *const k_gpt_oss[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof k_gpt_oss / sizeof k_gpt_oss[0]; i++) {
        fc_token id = find_text(t, k_gpt_oss[i]);
        if (id >= 0) t->type[id] = FC_TOKEN_TYPE_USER_DEFINED;
    }
    fc_token end = find_text(t, "<|end|>");
    int has_call = find_text(t, "<|call|>") >= 0 || find_text(t, "<|calls|>") >= 0;
    if (end >= 0 && has_call && (find_text(t, "<|return|>") >= 0 || find_text(t, "<|flush|>") >= 0))
        t->type[end] = FC_TOKEN_TYPE_USER_DEFINED;
    fc_token s = find_text(t, "</s>");
    if (s >= 0 && find_text(t, "<|tool_response>") >= 0) t->type[s] = FC_TOKEN_TYPE_NORMAL;
}

/* qsort has no user pointer in C11: sort (length, id) pairs instead. */
typedef struct special_key {
    uint32_t len;
    fc_token id;
} special_key;

static int cmp_special_key(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return x->id < y->id ? -1 : x->id > y->id;               /* then by id: deterministic */
}

/* tokenizer.ggml.scores: optional for BPE (unused there), required for SPM;
 * F32 or I32 (llama.cpp takes both), one per token, no NaN. */
static fc_status read_scores(fc_ctx *ctx, fc_gguf *g, fc_tokenizer *t) {
    int32_t n = t->n_vocab;
    t->score = calloc((size_t)n, sizeof *t->score);
    if (!t->score) {
        fc_fail(ctx, FC_ERR_OOM, "fc_tokenizer: out of memory for %d scores", (int)n);
        return FC_ERR_OOM;
    }
    int64_t k = fc_gguf_find_kv(g, KEY_SCORES);
    if (k < 0) {
        if (t->model != FCTK_MODEL_SPM) return FC_OK;
        fc_fail(ctx, FC_ERR_FORMAT,
                "fc_tokenizer: the GGUF has no %s; a SentencePiece (\"llama\") vocabulary merges by these scores, so "
                "they are not assumed 0", KEY_SCORES);
        return FC_ERR_FORMAT;
    }
    int et = -1;
    uint64_t ns = 0;
    if (fc_gguf_kv_type(g, k) != FC_GGUF_ARR || fc_gguf_get_arr(g, KEY_SCORES, &et, &ns) != FC_OK ||
        (et != FC_GGUF_F32 && et != FC_GGUF_I32)) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s must be an array of FLOAT32 (or INT32), not %s%s", KEY_SCORES,
                fc_gguf_kv_type(g, k) == FC_GGUF_ARR ? "an array of " : "",
                fc_gguf_vtype_name(fc_gguf_kv_type(g, k) == FC_GGUF_ARR ? et : fc_gguf_kv_type(g, k)));
        return FC_ERR_FORMAT;
    }
    if (ns != (uint64_t)n) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has %llu entries but %s has %d", KEY_SCORES,
                (unsigned long long)ns, KEY_TOKENS, (int)n);
        return FC_ERR_FORMAT;
    }
    const void *data;
    fc_status st = fc_gguf_get_arr_data(g, KEY_SCORES, et, &data, &ns);
    if (st != FC_OK) return st;
    for (int32_t i = 0; i < n; i++) {
        float v;
        if (et == FC_GGUF_F32) {
            memcpy(&v, (const char *)data + (size_t)i * 4, 4);
        } else {
            int32_t iv;
            memcpy(&iv, (const char *)data + (size_t)i * 4, 4);
            v = (float)iv;
        }
        if (v != v) { /* the merge order would be undefined (llama.cpp's queue misorders NaN) */
            fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s[%d] is NaN", KEY_SCORES, (int)i);
            return FC_ERR_FORMAT;
        }
        t->score[i] = v;
    }
    return FC_OK;
}

fc_tokenizer *fc_tokenizer_from_gguf(fc_ctx *ctx, fc_gguf *g) {
    if (!ctx) return NULL;
    if (!g) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_tokenizer_from_gguf: the GGUF handle is NULL");

    const char *model, *pre;
    size_t model_len, pre_len;
    if (get_str_key(ctx, g, KEY_MODEL, &model, &model_len, 1) != FC_OK) return NULL;
    fctk_model kind;
    if (strcmp(model, "gpt2") == 0) kind = FCTK_MODEL_BPE;
    else if (strcmp(model, "llama") == 0) kind = FCTK_MODEL_SPM;
    else
        return fc_fail(ctx, FC_ERR_UNSUPPORTED,
                       "fc_tokenizer: %s = \"%s\" is not supported (supported: \"gpt2\", byte-level BPE; \"llama\", "
                       "SentencePiece)", KEY_MODEL, model);
    if (get_str_key(ctx, g, KEY_PRE, &pre, &pre_len, 0) != FC_OK) return NULL;
    int pre_i = -1;
    char names[512];
    if (kind == FCTK_MODEL_BPE) { /* llama.cpp reads the pre-tokenizer for BPE only */
        if (!pre)
            return fc_fail(ctx, FC_ERR_UNSUPPORTED,
                           "fc_tokenizer: the GGUF has no %s; the pre-tokenizer decides the tokens, so it is not guessed "
                           "(supported: %s)", KEY_PRE, pre_names(names, sizeof names));
        for (size_t i = 0; i < N_PRES; i++)
            if (strcmp(pre, k_pres[i].name) == 0) pre_i = (int)i;
        if (pre_i < 0)
            return fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_tokenizer: pre-tokenizer %s = \"%s\" is not supported (supported: %s)",
                           KEY_PRE, pre, pre_names(names, sizeof names));
    }

    uint64_t n_tok64, n_merges = 0;
    const char *what = kind == FCTK_MODEL_SPM ? "SentencePiece" : "gpt2 BPE";
    if (get_str_array(ctx, g, KEY_TOKENS, what, &n_tok64) != FC_OK) return NULL;
    if (kind == FCTK_MODEL_BPE && get_str_array(ctx, g, KEY_MERGES, what, &n_merges) != FC_OK) return NULL;
    if (n_tok64 == 0 || n_tok64 > INT32_MAX)
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has %llu entries (1 .. 2^31-1 allowed)", KEY_TOKENS,
                       (unsigned long long)n_tok64);
    if (n_merges > INT32_MAX)
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has too many entries", KEY_MERGES);
    const int32_t n = (int32_t)n_tok64;

    fc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return fc_fail(ctx, FC_ERR_OOM, "fc_tokenizer: out of memory");
    static atomic_ullong serials;
    t->serial = atomic_fetch_add(&serials, 1) + 1;
    t->n_vocab = n;
    t->model = kind;
    t->pre = pre_i >= 0 ? k_pres[pre_i].pre : FCTK_PRE_NONE;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre ? pre : "");
    for (int b = 0; b < 256; b++) t->byte_token[b] = FC_TOKEN_NONE;

    /* token types (optional: all normal) */
    t->type = malloc((size_t)n);
    if (!t->type) return oom(ctx, t);
    memset(t->type, FC_TOKEN_TYPE_NORMAL, (size_t)n);
    if (fc_gguf_find_kv(g, KEY_TYPES) >= 0) {
        int et;
        uint64_t nt;
        const void *data;
        if (fc_gguf_get_arr(g, KEY_TYPES, &et, &nt) != FC_OK || et != FC_GGUF_I32) {
            fc_tokenizer_free(t);
            return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s must be an array of INT32", KEY_TYPES);
        }
        if (nt != n_tok64) {
            fc_tokenizer_free(t);
            return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has %llu entries but %s has %d", KEY_TYPES,
                           (unsigned long long)nt, KEY_TOKENS, (int)n);
        }
        if (fc_gguf_get_arr_data(g, KEY_TYPES, FC_GGUF_I32, &data, &nt) != FC_OK) return bad(t);
        const int32_t *ty = data;
        for (int32_t i = 0; i < n; i++) {
            int32_t v = ty[i];
            /* llama.cpp treats a value it does not know as undefined */
            t->type[i] = (uint8_t)((v >= FC_TOKEN_TYPE_UNDEFINED && v <= FC_TOKEN_TYPE_BYTE) ? v : FC_TOKEN_TYPE_UNDEFINED);
        }
    }
    if (read_scores(ctx, g, t) != FC_OK) return bad(t);

    /* token texts */
    t->text_off = malloc((size_t)n * sizeof *t->text_off);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    if (!t->text_off || !t->text_len) return oom(ctx, t);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (fc_gguf_get_arr_str(g, KEY_TOKENS, (uint64_t)i, &s, &len) != FC_OK) return bad(t);
        total += len ? len : 32;
    }
    t->text = malloc(total + 1);
    unsigned char *scratch = NULL;
    size_t scratch_cap = 0;
    if (!t->text) return oom(ctx, t);
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        fc_gguf_get_arr_str(g, KEY_TOKENS, (uint64_t)i, &s, &len);
        char empty[32];
        if (len == 0) { /* llama.cpp's renaming, so ids and texts agree with it */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)i);
            s = empty;
        }
        if (len > UINT32_MAX) {
            free(scratch);
            fc_tokenizer_free(t);
            return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: token %d is too long", (int)i);
        }
        memcpy(t->text + off, s, len);
        t->text_off[i] = off;
        t->text_len[i] = (uint32_t)len;
        off += len;
        int32_t prev;
        int r = fctk_map_put(&t->by_text, s, len, 0, i, &prev);
        if (r < 0) {
            free(scratch);
            return oom(ctx, t);
        }
        if (r == 0) {
            free(scratch);
            fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: tokens %d and %d have the same text \"%.*s\"", (int)prev, (int)i,
                    (int)(len > 64 ? 64 : len), s);
            return bad(t);
        }
        if (t->type[i] == FC_TOKEN_TYPE_BYTE && byte_of_text(s, len) < 0) {
            /* llama.cpp reads text[3..5) as hex (and throws on a shorter text) */
            free(scratch);
            fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: token %d \"%.*s\" has type BYTE but is not spelled <0xXX>",
                    (int)i, (int)(len > 64 ? 64 : len), s);
            return bad(t);
        }
        if (kind == FCTK_MODEL_SPM) continue;
        /* Byte-level spelling: BPE works on raw bytes, so index every token
         * whose text is made of byte images by those bytes. */
        if (len > scratch_cap) {
            scratch_cap = len * 2;
            unsigned char *p = realloc(scratch, scratch_cap);
            if (!p) {
                free(scratch);
                return oom(ctx, t);
            }
            scratch = p;
        }
        size_t bl;
        if (unmap_text(s, len, scratch, &bl)) {
            if (fctk_map_put(&t->by_bytes, scratch, bl, 0, i, NULL) < 0) {
                free(scratch);
                return oom(ctx, t);
            }
            if (bl == 1 && t->byte_token[scratch[0]] == FC_TOKEN_NONE) t->byte_token[scratch[0]] = i;
        }
    }
    if (kind == FCTK_MODEL_SPM) {
        /* byte fallback as llama.cpp's byte_to_token: "<0xXX>" (upper-case
         * hex), else the one-byte text */
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            fc_token id = fctk_map_get(&t->by_text, hex, 6, 0);
            if (id < 0) {
                char one = (char)b;
                id = fctk_map_get(&t->by_text, &one, 1, 0);
            }
            t->byte_token[b] = id;
        }
    }

    /* merges: "left right" -> rank, keyed by the bytes they spell */
    for (uint64_t r = 0; r < n_merges; r++) {
        const char *s;
        size_t len;
        if (fc_gguf_get_arr_str(g, KEY_MERGES, r, &s, &len) != FC_OK) {
            free(scratch);
            return bad(t);
        }
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            free(scratch);
            fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: merge %llu \"%.*s\" has no space between its two parts",
                    (unsigned long long)r, (int)(len > 64 ? 64 : len), s);
            return bad(t);
        }
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        if (len > scratch_cap) {
            scratch_cap = len * 2;
            unsigned char *p = realloc(scratch, scratch_cap);
            if (!p) {
                free(scratch);
                return oom(ctx, t);
            }
            scratch = p;
        }
        size_t lb, rb;
        /* A part that is not spelled with byte images can never match. */
        if (!unmap_text(s, ll, scratch, &lb) || !unmap_text(sp + 1, rl, scratch + lb, &rb)) continue;
        if (lb == 0 || rb == 0) continue;
        if (fctk_map_put(&t->merges, scratch, lb + rb, (uint32_t)lb, (int32_t)r, NULL) < 0) {
            free(scratch);
            return oom(ctx, t);
        }
    }
    free(scratch);

    retype_by_name(t);

    /* special ids and flags: llama.cpp's defaults per model, then the keys */
    t->bos = t->eos = t->pad = t->unk = FC_TOKEN_NONE;
    if (kind == FCTK_MODEL_SPM) {
        t->unk = 0;
        t->bos = n > 1 ? 1 : FC_TOKEN_NONE;
        t->eos = n > 2 ? 2 : FC_TOKEN_NONE;
        t->add_bos = 1;
        t->add_space_prefix = 1;
    } else {
        t->add_bos = k_pres[pre_i].add_bos;
        t->ignore_merges = k_pres[pre_i].ignore_merges;
        t->clean_spaces = k_pres[pre_i].clean_spaces;
    }
    if (get_id_key(ctx, g, "tokenizer.ggml.bos_token_id", n, &t->bos) != FC_OK ||
        get_id_key(ctx, g, "tokenizer.ggml.eos_token_id", n, &t->eos) != FC_OK ||
        get_id_key(ctx, g, "tokenizer.ggml.padding_token_id", n, &t->pad) != FC_OK ||
        get_id_key(ctx, g, "tokenizer.ggml.unknown_token_id", n, &t->unk) != FC_OK ||
        get_bool_key(ctx, g, "tokenizer.ggml.add_bos_token", &t->add_bos) != FC_OK ||
        get_bool_key(ctx, g, "tokenizer.ggml.add_eos_token", &t->add_eos) != FC_OK ||
        get_bool_key(ctx, g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix) != FC_OK)
        return bad(t);
    if (t->add_bos && t->bos == FC_TOKEN_NONE) {
        fc_tokenizer_free(t);
        return fc_fail(ctx, FC_ERR_FORMAT,
                       "fc_tokenizer: tokenizer.ggml.add_bos_token is true (given, or the default of this vocabulary) "
                       "but there is no bos_token_id");
    }
    if (t->add_eos && t->eos == FC_TOKEN_NONE) {
        fc_tokenizer_free(t);
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: tokenizer.ggml.add_eos_token is true but there is no eos_token_id");
    }

    /* specials, longest first */
    int32_t ns = 0;
    for (int32_t i = 0; i < n; i++) {
        fc_token_type ty = (fc_token_type)t->type[i];
        ns += ty == FC_TOKEN_TYPE_CONTROL || ty == FC_TOKEN_TYPE_USER_DEFINED || ty == FC_TOKEN_TYPE_UNKNOWN;
    }
    special_key *keys = malloc(((size_t)ns + 1) * sizeof *keys);
    t->specials = malloc(((size_t)ns + 1) * sizeof *t->specials);
    if (!keys || !t->specials) {
        free(keys);
        return oom(ctx, t);
    }
    ns = 0;
    for (int32_t i = 0; i < n; i++) {
        fc_token_type ty = (fc_token_type)t->type[i];
        if (ty == FC_TOKEN_TYPE_CONTROL || ty == FC_TOKEN_TYPE_USER_DEFINED || ty == FC_TOKEN_TYPE_UNKNOWN)
            keys[ns++] = (special_key){t->text_len[i], i};
    }
    qsort(keys, (size_t)ns, sizeof *keys, cmp_special_key);
    for (int32_t i = 0; i < ns; i++) t->specials[i] = keys[i].id;
    t->n_specials = ns;
    free(keys);

    /* pieces */
    t->piece_off = malloc((size_t)n * sizeof *t->piece_off);
    t->piece_len = malloc((size_t)n * sizeof *t->piece_len);
    if (!t->piece_off || !t->piece_len) return oom(ctx, t);
    size_t ptotal = 0;
    for (int32_t i = 0; i < n; i++) ptotal += render_piece(t, i, NULL);
    t->piece = malloc(ptotal + 1);
    if (!t->piece) return oom(ctx, t);
    size_t poff = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t pl = render_piece(t, i, t->piece + poff);
        t->piece_off[i] = poff;
        t->piece_len[i] = (uint32_t)pl;
        poff += pl;
    }
    return t;
}

fc_tokenizer *fc_tokenizer_load(fc_ctx *ctx, const char *path) {
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_tokenizer_load: path is NULL");
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return NULL;
    fc_tokenizer *t = fc_tokenizer_from_gguf(ctx, g);
    fc_gguf_close(g);
    return t;
}

int32_t fc_tokenizer_n_vocab(const fc_tokenizer *t) { return t ? t->n_vocab : 0; }
const char *fc_tokenizer_model(const fc_tokenizer *t) {
    return !t ? NULL : t->model == FCTK_MODEL_SPM ? "llama" : "gpt2";
}
fc_token fc_tokenizer_unk(const fc_tokenizer *t) { return t ? t->unk : FC_TOKEN_NONE; }
int fc_tokenizer_add_space_prefix(const fc_tokenizer *t) { return t ? t->add_space_prefix : 0; }
float fc_tokenizer_token_score(const fc_tokenizer *t, fc_token id) {
    return (!t || id < 0 || id >= t->n_vocab) ? 0.0f : t->score[id];
}
const char *fc_tokenizer_pre(const fc_tokenizer *t) { return t ? t->pre_name : NULL; }
fc_token fc_tokenizer_bos(const fc_tokenizer *t) { return t ? t->bos : FC_TOKEN_NONE; }
fc_token fc_tokenizer_eos(const fc_tokenizer *t) { return t ? t->eos : FC_TOKEN_NONE; }
fc_token fc_tokenizer_pad(const fc_tokenizer *t) { return t ? t->pad : FC_TOKEN_NONE; }
int fc_tokenizer_add_bos(const fc_tokenizer *t) { return t ? t->add_bos : 0; }
int fc_tokenizer_add_eos(const fc_tokenizer *t) { return t ? t->add_eos : 0; }

const char *fc_tokenizer_token_text(const fc_tokenizer *t, fc_token id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = t->text_len[id];
    return t->text + t->text_off[id];
}

fc_token_type fc_tokenizer_token_type(const fc_tokenizer *t, fc_token id) {
    if (!t || id < 0 || id >= t->n_vocab) return FC_TOKEN_TYPE_UNDEFINED;
    return (fc_token_type)t->type[id];
}

fc_token fc_tokenizer_find(const fc_tokenizer *t, const char *text, size_t len) {
    if (!t || (!text && len)) return FC_TOKEN_NONE;
    return fctk_map_get(&t->by_text, text ? text : "", len, 0);
}
