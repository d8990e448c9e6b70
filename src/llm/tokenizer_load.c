/* Fucina llm: building a byte-level BPE tokenizer from GGUF metadata.
 *
 * What llama.cpp does and we follow (it decides token ids):
 * - merges are "left right", split at the first space after byte 0; rank =
 *   index; a repeated pair keeps its first rank;
 * - an empty token text is renamed "[EMPTY_<id>]";
 * - special-token partitioning uses control, user-defined and unknown
 *   tokens, longest text first.
 * Where we are stricter (an error instead of a log line and a guess):
 * unknown or missing pre-tokenizer, duplicate token texts (llama.cpp
 * asserts), a merge without a separator, special ids out of range, add_bos
 * without a BOS id. We do not copy llama.cpp's text heuristics that retype
 * tokens by name ("<|im_end|>" forced to control, "unused" tokens): the
 * file's token_type is taken as written. */
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

static const struct {
    const char *name;
    fctk_pre pre;
} k_pres[] = {
    /* llama.cpp maps these names to LLAMA_VOCAB_PRE_TYPE_QWEN2 */
    {"qwen2", FCTK_PRE_QWEN2},
    {"deepseek-r1-qwen", FCTK_PRE_QWEN2},
    {"kormo", FCTK_PRE_QWEN2},
    {"f2llmv2", FCTK_PRE_QWEN2},
};

void fc_tokenizer_free(fc_tokenizer *t) {
    if (!t) return;
    free(t->type);
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

static fc_status get_id_key(fc_ctx *ctx, fc_gguf *g, const char *key, int32_t n_vocab, fc_token *out) {
    *out = FC_TOKEN_NONE;
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

static fc_status get_bool_key(fc_ctx *ctx, fc_gguf *g, const char *key, int *out) {
    *out = 0;
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) return FC_OK;
    if (fc_gguf_kv_type(g, k) != FC_GGUF_BOOL) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s is %s, expected BOOL", key, fc_gguf_vtype_name(fc_gguf_kv_type(g, k)));
        return FC_ERR_FORMAT;
    }
    return fc_gguf_get_bool(g, key, out);
}

static fc_status get_str_array(fc_ctx *ctx, fc_gguf *g, const char *key, uint64_t *n) {
    int64_t k = fc_gguf_find_kv(g, key);
    if (k < 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: the GGUF has no %s (a gpt2 BPE vocabulary needs it)", key);
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

/* The special=true rendering of token id (llama.cpp's token_to_piece):
 * control / user-defined / unknown: the text as is; normal: each codepoint
 * mapped back to its byte, or "[UNK_BYTE_0x<hex>" + text + "]" for one that
 * is not a byte's image; byte: its byte; unused / undefined: nothing. */
static size_t render_piece(const fc_tokenizer *t, int32_t id, char *out) {
    const char *s = t->text + t->text_off[id];
    size_t len = t->text_len[id];
    switch ((fc_token_type)t->type[id]) {
    case FC_TOKEN_TYPE_CONTROL:
    case FC_TOKEN_TYPE_USER_DEFINED:
    case FC_TOKEN_TYPE_UNKNOWN:
        if (out) memcpy(out, s, len);
        return len;
    case FC_TOKEN_TYPE_NORMAL:
    case FC_TOKEN_TYPE_BYTE: {
        size_t n = 0, i = 0;
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

fc_tokenizer *fc_tokenizer_from_gguf(fc_ctx *ctx, fc_gguf *g) {
    if (!ctx) return NULL;
    if (!g) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_tokenizer_from_gguf: the GGUF handle is NULL");

    const char *model, *pre;
    size_t model_len, pre_len;
    if (get_str_key(ctx, g, KEY_MODEL, &model, &model_len, 1) != FC_OK) return NULL;
    if (strcmp(model, "gpt2") != 0)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED,
                       "fc_tokenizer: %s = \"%s\" is not supported (only \"gpt2\", byte-level BPE)", KEY_MODEL, model);
    if (get_str_key(ctx, g, KEY_PRE, &pre, &pre_len, 0) != FC_OK) return NULL;
    if (!pre)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED,
                       "fc_tokenizer: the GGUF has no %s; the pre-tokenizer decides the tokens, so it is not guessed "
                       "(supported: qwen2)", KEY_PRE);
    int pre_i = -1;
    for (size_t i = 0; i < sizeof k_pres / sizeof k_pres[0]; i++)
        if (strcmp(pre, k_pres[i].name) == 0) pre_i = (int)i;
    if (pre_i < 0)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED,
                       "fc_tokenizer: pre-tokenizer %s = \"%s\" is not supported (supported: qwen2, deepseek-r1-qwen, "
                       "kormo, f2llmv2)", KEY_PRE, pre);

    uint64_t n_tok64, n_merges;
    if (get_str_array(ctx, g, KEY_TOKENS, &n_tok64) != FC_OK) return NULL;
    if (get_str_array(ctx, g, KEY_MERGES, &n_merges) != FC_OK) return NULL;
    if (n_tok64 == 0 || n_tok64 > INT32_MAX)
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has %llu entries (1 .. 2^31-1 allowed)", KEY_TOKENS,
                       (unsigned long long)n_tok64);
    if (n_merges > INT32_MAX)
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: %s has too many entries", KEY_MERGES);
    const int32_t n = (int32_t)n_tok64;

    fc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return fc_fail(ctx, FC_ERR_OOM, "fc_tokenizer: out of memory");
    t->n_vocab = n;
    t->pre = k_pres[pre_i].pre;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
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

    /* special ids and flags */
    if (get_id_key(ctx, g, "tokenizer.ggml.bos_token_id", n, &t->bos) != FC_OK ||
        get_id_key(ctx, g, "tokenizer.ggml.eos_token_id", n, &t->eos) != FC_OK ||
        get_id_key(ctx, g, "tokenizer.ggml.padding_token_id", n, &t->pad) != FC_OK ||
        get_bool_key(ctx, g, "tokenizer.ggml.add_bos_token", &t->add_bos) != FC_OK ||
        get_bool_key(ctx, g, "tokenizer.ggml.add_eos_token", &t->add_eos) != FC_OK)
        return bad(t);
    if (t->add_bos && t->bos == FC_TOKEN_NONE) {
        fc_tokenizer_free(t);
        return fc_fail(ctx, FC_ERR_FORMAT, "fc_tokenizer: tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
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
