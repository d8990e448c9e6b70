/* SPDX-License-Identifier: MIT */
/* Fucina llm: session state files (fucina/llm.h, "session state files").
 *
 * A file holds what a session needs to continue exactly where it was: each
 * sequence's position, the rows 0..pos of every (layer, sequence) K and V
 * cache in the cache's own encoding (f32, f16 or q8_0 blocks: copied, never
 * converted, so a restored session computes the same bits), the tokens of
 * sequence 0 (for prompt-prefix reuse), and enough of the model to refuse a
 * file of another one: the architecture, the geometry (layers, embedding,
 * heads, KV heads, head size, vocabulary) and a hash of the weights (each
 * tensor's type and shape, and its first, middle and last KiB: two models
 * of one shape differ there) with the LoRA adapters set on the model.
 *
 * Layout, little-endian (the hosts are):
 *   0   "FCSTATE\0"
 *   8   u32 version (1), u32 the KV type's ggml id
 *   16  u64 the model hash
 *   24  i64 arch, n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab, n_seq, n_ctx
 *   96  i64 pos[n_seq], i64 n_tokens, i32 tokens[n_tokens]
 *       per layer, per sequence: K rows 0..pos, then V rows 0..pos
 *       u64 hash of every byte before it
 *
 * Saving writes a temporary file and renames it (io/atomic_file.c). Loading
 * reads the whole file and checks everything (magic, version, the model,
 * the KV type, the sequences and positions, the size, the checksum) before
 * it touches the session, so a refused file leaves the session as it was. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/ctx.h"
#include "fucina/llm.h"
#include "io/atomic_file.h"
#include "io/read_all.h"
#include "llm/arch.h"
#include "llm/model.h"
#include "llm/session.h"

#define STATE_MAGIC   "FCSTATE"
#define STATE_VERSION 1u
#define HEADER_BYTES  96
#define SAMPLE_BYTES  1024

/* ---- hashing ------------------------------------------------------------------------ */

/* FNV-1a over 64-bit words (with an xor-shift per word): fast enough for a
 * cache of hundreds of MB, the same on every little-endian host, and the
 * same however the bytes are cut into calls (a partial word waits for the
 * next call; hash_end takes the last bytes one by one). */
typedef struct hasher {
    uint64_t h;
    unsigned char tail[8];
    size_t n_tail;
} hasher;

#define HASH_INIT                     \
    {                                 \
        0xcbf29ce484222325ull, {0}, 0 \
    }

static uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void hash_bytes(hasher *x, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = x->h, w;
    while (n && x->n_tail && x->n_tail < 8) { /* complete the waiting word first */
        x->tail[x->n_tail++] = *b++, n--;
        if (x->n_tail == 8) {
            memcpy(&w, x->tail, 8);
            h = mix(h, w);
            x->n_tail = 0;
        }
    }
    for (; n >= 8; b += 8, n -= 8) {
        memcpy(&w, b, 8);
        h = mix(h, w);
    }
    if (n) { /* fewer than 8 left, and no word waiting */
        memcpy(x->tail, b, n & 7);
        x->n_tail = n & 7;
    }
    x->h = h;
}

static uint64_t hash_end(hasher *x)
{
    uint64_t h = x->h;
    for (size_t i = 0; i < x->n_tail; i++) h = (h ^ x->tail[i]) * 0x100000001b3ull;
    return h;
}

static void hash_i64(hasher *x, int64_t v)
{
    hash_bytes(x, &v, sizeof v);
}
static void hash_f64(hasher *x, double v)
{
    hash_bytes(x, &v, sizeof v);
}

/* A tensor's type, shape and three samples of its bytes. */
static void hash_tensor(hasher *x, const fc_tensor *t)
{
    if (!t) {
        hash_i64(x, -1);
        return;
    }
    hash_i64(x, (int64_t)fc_tensor_dtype(t));
    hash_i64(x, fc_tensor_rank(t));
    for (int i = 0; i < fc_tensor_rank(t); i++) hash_i64(x, fc_tensor_dim(t, i));
    const size_t n = fc_tensor_nbytes(t);
    const unsigned char *d = fc_tensor_data(t);
    if (n <= 3 * SAMPLE_BYTES) {
        hash_bytes(x, d, n);
        return;
    }
    hash_bytes(x, d, SAMPLE_BYTES);
    hash_bytes(x, d + (n - SAMPLE_BYTES) / 2, SAMPLE_BYTES);
    hash_bytes(x, d + n - SAMPLE_BYTES, SAMPLE_BYTES);
}

/* The model's identity: hparams, every tensor of its entry, its adapters. */
static uint64_t model_hash(const fc_llm_model *m)
{
    hasher x = HASH_INIT;
    const fc_llm_hparams *hp = &m->hp;
    const int64_t ints[] = {hp->arch,      hp->n_vocab,       hp->n_ctx_train, hp->n_embd,     hp->n_ff,
                            hp->n_layer,   hp->n_head,        hp->n_head_kv,   hp->head_dim,   hp->n_rot,
                            hp->n_expert,  hp->n_expert_used, hp->n_ff_exp,    hp->n_swa,      hp->swa_pattern,
                            hp->rope_neox, hp->qk_norm,       hp->attn_bias,   hp->post_norms, hp->ffn_gelu};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) hash_i64(&x, ints[i]);
    const double reals[] = {hp->rope_theta, hp->rms_eps,      hp->rope_freq_scale, hp->embd_scale,
                            hp->attn_scale, hp->attn_softcap, hp->final_softcap,   hp->rope_theta_swa};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) hash_f64(&x, reals[i]);
    const fc_llm_arch_desc *d = m->desc;
    for (int i = 0; i < d->n_globals; i++)
        if (fc_llm_tensor_applies(&d->globals[i], hp)) hash_tensor(&x, *fc_llm_slot((void *)m, d->globals[i].field));
    for (int64_t l = 0; l < hp->n_layer; l++)
        for (int i = 0; i < d->n_layer; i++)
            if (fc_llm_tensor_applies(&d->layer[i], hp))
                hash_tensor(&x, *fc_llm_slot(&m->layers[l], d->layer[i].field));
    /* adapters change every K and V they touch: a cache made without them is another model's */
    const fc_llm_lora_set *ls = m->lora;
    hash_i64(&x, ls ? (int64_t)ls->n_adapters : 0);
    for (size_t i = 0; ls && i < ls->n_deltas; i++) {
        const fc_llm_lora_delta *dl = &ls->deltas[i];
        hash_i64(&x, dl->rank);
        hash_bytes(&x, &dl->scale, sizeof dl->scale);
        hash_tensor(&x, dl->a);
        hash_tensor(&x, dl->b);
    }
    return hash_end(&x);
}

/* ---- the cache's rows ---------------------------------------------------------------- */

/* Bytes of one position's row of K (or V) in the cache's encoding. */
static size_t row_bytes(const fc_llm_kv *kv)
{
    /* q8_0 rows are the cache's own blocks (kv_cache.c), the others its tensors' elements */
    return kv->type == FC_Q8_0 ? kv->row_bytes : fc_dtype_row_bytes(kv->type, kv->n_kv_head * kv->head_dim);
}

static unsigned char *cache_rows(const fc_llm_kv *kv, int64_t i, int is_v)
{
    if (kv->type == FC_Q8_0) return is_v ? kv->qv[i] : kv->qk[i];
    return fc_tensor_data(is_v ? kv->v[i] : kv->k[i]);
}

/* ---- saving --------------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put_i64(unsigned char *p, int64_t v)
{
    memcpy(p, &v, 8);
}

/* The header's geometry fields, in file order. */
static void geometry(const fc_llm_session *s, int64_t g[9])
{
    const fc_llm_hparams *hp = &s->m->hp;
    g[0] = hp->arch, g[1] = hp->n_layer, g[2] = hp->n_embd, g[3] = hp->n_head, g[4] = hp->n_head_kv;
    g[5] = hp->head_dim, g[6] = hp->n_vocab, g[7] = s->n_seq, g[8] = s->n_ctx;
}

static int write_hashed(fc_atomic_file *af, hasher *x, const void *p, size_t n)
{
    hash_bytes(x, p, n);
    return fc_atomic_write(af, p, n);
}

fc_status fc_llm_session_save(fc_ctx *ctx, const fc_llm_session *s, const char *path, const fc_token *tokens,
                              size_t n_tokens)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !path || (n_tokens && !tokens)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_save: NULL %s", !s ? "session" : !path ? "path" : "tokens");
        return FC_ERR_INVALID_ARG;
    }
    if ((int64_t)n_tokens != s->pos[0]) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "fc_llm_session_save: %zu tokens given, sequence 0 holds %lld positions (the file records the "
                "tokens it evaluated)",
                n_tokens, (long long)s->pos[0]);
        return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->hp.n_vocab) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_save: token %zu id %d out of range [0, %lld)", i,
                    (int)tokens[i], (long long)s->m->hp.n_vocab);
            return FC_ERR_INVALID_ARG;
        }
    unsigned char head[HEADER_BYTES];
    memset(head, 0, sizeof head);
    memcpy(head, STATE_MAGIC, 8);
    put_u32(head + 8, STATE_VERSION);
    put_u32(head + 12, (uint32_t)fc_dtype_ggml_type(s->kv.type));
    put_i64(head + 16, (int64_t)model_hash(s->m));
    int64_t g[9];
    geometry(s, g);
    for (int i = 0; i < 9; i++) put_i64(head + 24 + 8 * i, g[i]);
    fc_atomic_file af;
    if (!fc_atomic_open(&af, ctx, "fc_llm_session_save", path)) return fc_ctx_status(ctx);
    hasher x = HASH_INIT;
    const int64_t nt = (int64_t)n_tokens;
    int ok = write_hashed(&af, &x, head, sizeof head) &&
             write_hashed(&af, &x, s->pos, (size_t)s->n_seq * sizeof *s->pos) && write_hashed(&af, &x, &nt, 8);
    for (size_t i = 0; ok && i < n_tokens; i++) {
        const int32_t t = tokens[i];
        ok = write_hashed(&af, &x, &t, 4);
    }
    const size_t rb = row_bytes(&s->kv);
    for (int64_t l = 0; ok && l < s->kv.n_layer; l++)
        for (int64_t q = 0; ok && q < s->n_seq; q++) {
            const int64_t i = l * s->n_seq + q;
            ok = write_hashed(&af, &x, cache_rows(&s->kv, i, 0), (size_t)s->pos[q] * rb) &&
                 write_hashed(&af, &x, cache_rows(&s->kv, i, 1), (size_t)s->pos[q] * rb);
        }
    const uint64_t sum = hash_end(&x);
    if (!ok || !fc_atomic_write(&af, &sum, 8) || !fc_atomic_commit(&af)) return fc_ctx_status(ctx);
    return FC_OK;
}

/* ---- loading --------------------------------------------------------------------------- */

static int64_t get_i64(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static fc_status refuse(fc_ctx *ctx, fc_status st, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static fc_status refuse(fc_ctx *ctx, fc_status st, const char *path, const char *fmt, ...)
{
    char why[400], shown[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fc_fail(ctx, st, "session file %s: %s", fc_io_path_for_msg(path, shown, sizeof shown), why);
    return st;
}

static const char *const k_geom[9] = {"architecture",    "block count",   "embedding length",
                                      "head count",      "KV head count", "head size",
                                      "vocabulary size", "sequences",     "context (informational)"};

/* Checks the whole file b[0..n) against s; on FC_OK *pos points at the
 * file's positions, *tok at its tokens (n_tok) and *kv at the rows. */
static fc_status check_file(fc_ctx *ctx, const fc_llm_session *s, const char *path, const unsigned char *b, size_t n,
                            int prefix, const unsigned char **pos, const unsigned char **tok, int64_t *n_tok,
                            const unsigned char **kv)
{
    if (n < 12 || memcmp(b, STATE_MAGIC, 8))
        return refuse(ctx, FC_ERR_FORMAT, path, "not a Fucina session state file (no FCSTATE magic)");
    if (get_u32(b + 8) != STATE_VERSION)
        return refuse(ctx, FC_ERR_FORMAT, path, "version %u; this Fucina reads version %u", get_u32(b + 8),
                      STATE_VERSION);
    if (n < HEADER_BYTES + 8)
        return refuse(ctx, FC_ERR_FORMAT, path, "truncated: %zu bytes, shorter than the header", n);
    int64_t g[9];
    geometry(s, g);
    for (int i = 0; i < 8; i++) { /* n_ctx (the 9th) may differ: only the positions must fit */
        const int64_t f = get_i64(b + 24 + 8 * i);
        if (f != g[i]) {
            if (i == 0)
                return refuse(ctx, FC_ERR_INVALID_ARG, path, "saved from a %s model, this one is %s",
                              f >= 0 && f <= FC_LLM_ARCH_PHI3 ? fc_llm_arch_name((fc_llm_arch)f) : "unknown",
                              fc_llm_arch_name(s->m->hp.arch));
            return refuse(ctx, FC_ERR_INVALID_ARG, path, "%s %lld in the file, %lld in this %s", k_geom[i],
                          (long long)f, (long long)g[i], i == 7 ? "session" : "model");
        }
    }
    if ((uint64_t)get_i64(b + 16) != model_hash(s->m))
        return refuse(ctx, FC_ERR_INVALID_ARG, path,
                      "saved from another model (its weights or LoRA adapters differ from this one's)");
    const uint32_t ft = get_u32(b + 12), mt = (uint32_t)fc_dtype_ggml_type(s->kv.type);
    if (ft != mt) {
        const char *fname = ft == 0 ? "f32" : ft == 1 ? "f16" : ft == 8 ? "q8_0" : "unknown";
        return refuse(ctx, FC_ERR_INVALID_ARG, path, "KV cache type %s in the file, %s in this session", fname,
                      fc_dtype_name(s->kv.type));
    }
    size_t at = HEADER_BYTES;
    const size_t npos = (size_t)s->n_seq * 8;
    if (n - 8 < at + npos + 8)
        return refuse(ctx, FC_ERR_FORMAT, path, "truncated: %zu bytes, shorter than its positions", n);
    *pos = b + at;
    int64_t total = 0;
    /* every position holds 2 rows per layer: more than the file's bytes can hold is a cut file
     * (or a forged count), and the size sums below cannot overflow */
    const uint64_t per_pos = 2 * (uint64_t)row_bytes(&s->kv) * (uint64_t)s->kv.n_layer;
    for (int64_t q = 0; q < s->n_seq; q++) {
        const int64_t p = get_i64(b + at + 8 * q);
        if (p > 0 && (uint64_t)p > n / per_pos)
            return refuse(ctx, FC_ERR_FORMAT, path,
                          "truncated: %zu bytes cannot hold the %lld positions of sequence %lld", n, (long long)p,
                          (long long)q);
        /* a prefix load keeps of sequence 0 only what the prompt shares, which fits */
        if (p < 0 || (p > s->n_ctx && !(prefix && q == 0)))
            return refuse(ctx, FC_ERR_INVALID_ARG, path,
                          "sequence %lld holds %lld positions; this session's cache has %lld", (long long)q,
                          (long long)p, (long long)s->n_ctx);
        total += p;
    }
    at += npos;
    *n_tok = get_i64(b + at);
    at += 8;
    const int64_t p0 = get_i64(*pos);
    if (*n_tok != p0)
        return refuse(ctx, FC_ERR_FORMAT, path, "%lld tokens for the %lld positions of sequence 0", (long long)*n_tok,
                      (long long)p0);
    const size_t rb = row_bytes(&s->kv);
    /* the size the header promises: tokens, every sequence's K and V rows in every layer, the checksum */
    const uint64_t want = (uint64_t)at + (uint64_t)*n_tok * 4 + (uint64_t)total * 2 * rb * (uint64_t)s->kv.n_layer + 8;
    if ((uint64_t)n != want)
        return refuse(ctx, FC_ERR_FORMAT, path, "%s: %zu bytes, its header describes %llu",
                      (uint64_t)n < want ? "truncated" : "trailing bytes", n, (unsigned long long)want);
    *tok = b + at;
    for (int64_t i = 0; i < *n_tok; i++) {
        int32_t t;
        memcpy(&t, *tok + 4 * i, 4);
        if (t < 0 || t >= s->m->hp.n_vocab)
            return refuse(ctx, FC_ERR_FORMAT, path, "token %lld id %d out of range [0, %lld)", (long long)i, (int)t,
                          (long long)s->m->hp.n_vocab);
    }
    *kv = *tok + 4 * *n_tok;
    hasher x = HASH_INIT;
    hash_bytes(&x, b, n - 8);
    uint64_t sum;
    memcpy(&sum, b + n - 8, 8);
    if (sum != hash_end(&x))
        return refuse(ctx, FC_ERR_FORMAT, path, "corrupted (its checksum does not match its bytes)");
    return FC_OK;
}

/* The whole file at path, which must be a regular file: opened with
 * O_NONBLOCK and checked by fstat first, because a FIFO would block open()
 * until a writer came (fucina run --prompt-cache FIFO hung) and a device
 * has no state to load. NULL + the error recorded. */
static unsigned char *read_regular(fc_ctx *ctx, const char *path, size_t *n)
{
    char shown[160];
    const char *why = NULL;
    int e = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    FILE *f = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        e = errno;
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else {
        const int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) e = errno;
    }
    unsigned char *b = NULL;
    if (f) {
        errno = 0;
        b = (unsigned char *)fc_read_stream(f, 0, n);
        e = b ? 0 : errno ? errno : EIO;
        fclose(f); /* closes fd */
    } else if (fd >= 0) {
        close(fd);
    }
    if (!b)
        fc_fail(ctx, FC_ERR_IO, "session file %s: cannot read it: %s", fc_io_path_for_msg(path, shown, sizeof shown),
                why ? why : strerror(e));
    return b;
}

/* Load path into s; keep0 >= 0 keeps only that many positions of sequence
 * 0 (a prompt's common prefix). */
static fc_status load(fc_ctx *ctx, fc_llm_session *s, const char *path, const fc_token *prompt, size_t n_prompt,
                      int prefix, size_t *n_reused, fc_token **tokens_out, size_t *n_tokens_out)
{
    size_t n;
    unsigned char *b = read_regular(ctx, path, &n);
    if (!b) return FC_ERR_IO;
    const unsigned char *pos = NULL, *tok = NULL, *kv = NULL;
    int64_t n_tok = 0;
    fc_status st = check_file(ctx, s, path, b, n, prefix, &pos, &tok, &n_tok, &kv);
    fc_token *copy = NULL;
    if (st == FC_OK && tokens_out && n_tok > 0 && !(copy = malloc((size_t)n_tok * sizeof *copy))) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_session_load: out of memory for %lld tokens", (long long)n_tok);
        st = FC_ERR_OOM;
    }
    if (st != FC_OK) {
        free(b);
        return st;
    }
    /* every check passed: nothing below can fail */
    int64_t keep0 = get_i64(pos);
    if (prefix) {
        int64_t k = 0;
        while (k < keep0 && (size_t)k < n_prompt && k < s->n_ctx) {
            int32_t t;
            memcpy(&t, tok + 4 * k, 4);
            if (t != prompt[k]) break;
            k++;
        }
        keep0 = k;
    }
    const size_t rb = row_bytes(&s->kv);
    const unsigned char *p = kv;
    for (int64_t l = 0; l < s->kv.n_layer; l++)
        for (int64_t q = 0; q < s->n_seq; q++) {
            const int64_t i = l * s->n_seq + q, np = get_i64(pos + 8 * q), keep = q == 0 ? keep0 : np;
            for (int is_v = 0; is_v < 2; is_v++) {
                memcpy(cache_rows(&s->kv, i, is_v), p, (size_t)keep * rb);
                p += (size_t)np * rb;
                if (s->kv.type != FC_Q8_0) fc_storage_touch((is_v ? s->kv.v[i] : s->kv.k[i])->storage);
            }
        }
    for (int64_t q = 0; q < s->n_seq; q++) s->pos[q] = q == 0 ? keep0 : get_i64(pos + 8 * q);
    if (n_reused) *n_reused = (size_t)keep0;
    if (tokens_out) {
        for (int64_t i = 0; i < n_tok; i++) {
            int32_t t;
            memcpy(&t, tok + 4 * i, 4);
            copy[i] = t;
        }
        *tokens_out = copy;
        *n_tokens_out = (size_t)n_tok;
    }
    free(b);
    return FC_OK;
}

fc_status fc_llm_session_load(fc_ctx *ctx, fc_llm_session *s, const char *path, fc_token **tokens, size_t *n_tokens)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !path || (!tokens != !n_tokens)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_load: %s",
                !s      ? "NULL session"
                : !path ? "NULL path"
                        : "tokens and n_tokens go together");
        return FC_ERR_INVALID_ARG;
    }
    if (tokens) *tokens = NULL, *n_tokens = 0;
    return load(ctx, s, path, NULL, 0, 0, NULL, tokens, n_tokens);
}

fc_status fc_llm_session_load_prefix(fc_ctx *ctx, fc_llm_session *s, const char *path, const fc_token *prompt,
                                     size_t n_prompt, size_t *n_reused)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !path || (n_prompt && !prompt)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_session_load_prefix: NULL %s",
                !s      ? "session"
                : !path ? "path"
                        : "prompt");
        return FC_ERR_INVALID_ARG;
    }
    if (n_reused) *n_reused = 0;
    return load(ctx, s, path, prompt, n_prompt, 1, n_reused, NULL, NULL);
}
