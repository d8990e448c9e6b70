/* SPDX-License-Identifier: MIT */
/* Fucina llm: loading LoRA adapters (llama.cpp's GGUF format, see
 * fucina/lora.h) against a model, and setting them on it.
 *
 * The checks are llama_adapter_lora_init's (src/llama-adapter.cpp): the
 * general.type, adapter.type and general.architecture keys, lora_a/lora_b
 * pairing, the base tensor present in the model, A's ne[0] = the base's
 * ne[0] (inputs), B's ne[1] = the base's ne[1] (outputs), A's ne[1] = B's
 * ne[0] (the rank); norm tensors are skipped as it skips them. Beyond it we
 * refuse, naming the tensor, what the forward does not apply yet (see the
 * header) instead of loading an adapter that would be silently ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "exec/ctx.h"
#include "fucina/gguf.h"
#include "llm/arch.h"
#include "llm/lora_internal.h"
#include "llm/model.h"

/* The model's tensor named name and its spec; NULL when the model has none
 * by that name (or the slot is empty: an absent optional tensor). */
static fc_tensor *model_weight(const fc_llm_model *m, const char *name, const fc_llm_tensor_spec **spec)
{
    long l;
    const fc_llm_tensor_spec *t = fc_llm_spec_of(m->desc, &m->hp, name, &l);
    if (!t || l >= m->hp.n_layer) return NULL;
    *spec = t;
    if (l >= 0) return *fc_llm_slot(&m->layers[l], t->field);
    /* a tied model's output slot holds token_embd: the file has no output.weight */
    if (!strcmp(name, "output.weight") && m->hp.tied_output) return NULL;
    return *fc_llm_slot((void *)m, t->field);
}

void fc_llm_lora_free(fc_llm_lora *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) {
        fc_release(a->p[i].a);
        fc_release(a->p[i].b);
    }
    free(a->p);
    free(a);
}

float fc_llm_lora_alpha(const fc_llm_lora *a)
{
    return a ? a->alpha : 0.0f;
}
size_t fc_llm_lora_n_weights(const fc_llm_lora *a)
{
    return a ? a->n : 0;
}

const fc_llm_lora_pair *fc_llm_lora_pair_of(const fc_llm_lora *a, const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->p[i].name, name)) return &a->p[i];
    return NULL;
}

/* A string key that must have the value want. */
static int check_str_key(fc_ctx *ctx, fc_gguf *g, const char *path, const char *key, const char *want, const char *what)
{
    const char *v = NULL;
    if (fc_gguf_find_kv(g, key) < 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s: metadata key %s is missing (expected '%s')", path, what, key, want);
        return -1;
    }
    if (fc_gguf_get_str(g, key, &v, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s: metadata key %s is not a string (expected '%s')", path, what, key, want);
        return -1;
    }
    if (strcmp(v, want)) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s: metadata key %s is '%s', expected '%s'", path, what, key, v, want);
        return -1;
    }
    return 0;
}

static int read_keys(fc_ctx *ctx, fc_gguf *g, const char *path, const fc_llm_model *m, float *alpha)
{
    if (check_str_key(ctx, g, path, "general.type", "adapter", "not an adapter") ||
        check_str_key(ctx, g, path, "adapter.type", "lora", "not a LoRA adapter"))
        return -1;
    const char *arch = NULL, *want = fc_llm_arch_name(m->hp.arch);
    if (fc_gguf_get_str(g, "general.architecture", &arch, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-string general.architecture (the model is '%s')", path, want);
        return -1;
    }
    if (strcmp(arch, want)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: general.architecture is '%s' but the model is '%s': an adapter for "
                "another architecture",
                path, arch, want);
        return -1;
    }
    *alpha = 0.0f;
    if (fc_gguf_find_kv(g, "adapter.lora.alpha") >= 0 && fc_gguf_get_f32(g, "adapter.lora.alpha", alpha) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: metadata key adapter.lora.alpha is not an f32", path);
        return -1;
    }
    if (!isfinite(*alpha)) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: adapter.lora.alpha is %g; it must be finite", path, (double)*alpha);
        return -1;
    }
    return 0;
}

/* Pair the .lora_a / .lora_b tensors by base name into a->p (names and
 * file indices only); -1 on an unexpected tensor or out of memory. */
static int pair_up(fc_ctx *ctx, fc_gguf *g, const char *path, fc_llm_lora *a, int64_t *ia, int64_t *ib)
{
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        const int is_a = fc_str_ends_with(ti.name, ".lora_a"), is_b = fc_str_ends_with(ti.name, ".lora_b");
        if (!is_a && !is_b) {
            if (fc_str_ends_with(ti.name, "_norm.weight")) continue; /* llama.cpp skips norm vectors too */
            fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is neither a .lora_a nor a .lora_b tensor", path, ti.name);
            return -1;
        }
        const size_t n = strlen(ti.name) - strlen(".lora_a");
        size_t k = 0;
        while (k < a->n && (strlen(a->p[k].name) != n || memcmp(a->p[k].name, ti.name, n))) k++;
        if (k == a->n) {
            memcpy(a->p[k].name, ti.name, n);
            a->p[k].name[n] = 0;
            ia[k] = ib[k] = -1;
            a->n++;
        }
        (is_a ? ia : ib)[k] = i;
    }
    return 0;
}

static const char *dims_str(const fc_gguf_tensor_info *t, char *buf, size_t cap)
{
    int o = snprintf(buf, cap, "[");
    for (int d = 0; d < t->n_dims && o > 0 && (size_t)o < cap; d++)
        o += snprintf(buf + o, cap - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (o > 0 && (size_t)o < cap) snprintf(buf + o, cap - (size_t)o, "]");
    return buf;
}

/* token_embd's pair, in llama.cpp's layout for it (llm_build_inp_embd: A
 * and B flipped, B not transposed): lora_a ne [rank, vocab], lora_b ne
 * [rank, embd]. */
static int bind_embd(fc_ctx *ctx, fc_gguf *g, const char *path, fc_llm_lora_pair *p, const fc_gguf_tensor_info *ta,
                     const fc_gguf_tensor_info *tb, int64_t n_vocab, int64_t n_embd)
{
    char da[96], db[96];
    if (ta->ne[1] != n_vocab || tb->ne[1] != n_embd || ta->ne[0] != tb->ne[0] || ta->ne[0] < 1) {
        fc_fail(ctx, FC_ERR_SHAPE,
                "%s: tensors %s %s and %s %s (GGUF ne) do not fit token_embd.weight: it takes lora_a [rank, %lld] "
                "and lora_b [rank, %lld] (llama.cpp's layout for the embeddings)",
                path, ta->name, dims_str(ta, da, sizeof da), tb->name, dims_str(tb, db, sizeof db),
                (long long)n_vocab, (long long)n_embd);
        return -1;
    }
    p->rank = ta->ne[0];
    p->a = fc_gguf_tensor(g, ta->name);
    p->b = p->a ? fc_gguf_tensor(g, tb->name) : NULL;
    return p->b ? 0 : -1;
}

/* Check pair k against the model and bind its tensors. */
static int bind_pair(fc_ctx *ctx, fc_gguf *g, const char *path, const fc_llm_model *m, fc_llm_lora_pair *p, int64_t ia,
                     int64_t ib)
{
    if (ia < 0 || ib < 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s.%s has no %s.%s: a LoRA weight needs both", path, p->name,
                ia < 0 ? "lora_b" : "lora_a", p->name, ia < 0 ? "lora_a" : "lora_b");
        return -1;
    }
    const fc_llm_tensor_spec *spec = NULL;
    const fc_tensor *w = model_weight(m, p->name, &spec);
    if (!w) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: tensor %s.lora_a: the base model has no tensor %s%s", path, p->name,
                p->name, !strcmp(p->name, "output.weight") ? " (its output is tied to token_embd.weight)" : "");
        return -1;
    }
    if (spec->rank != 2) {
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: tensor %s.lora_a: LoRA on %s is not supported (%s)", path, p->name,
                p->name, spec->rank == 3 ? "a stack of experts" : "a vector");
        return -1;
    }
    fc_gguf_tensor_info ta, tb;
    fc_gguf_tensor_info_at(g, ia, &ta);
    fc_gguf_tensor_info_at(g, ib, &tb);
    const int64_t n_in = fc_tensor_dim(w, 1), n_out = fc_tensor_dim(w, 0);
    char da[96], db[96];
    for (int j = 0; j < 2; j++) {
        const fc_gguf_tensor_info *t = j ? &tb : &ta;
        fc_dtype dt;
        if (t->n_dims != 2) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is %s (%d-D); a LoRA tensor is a matrix", path, t->name,
                    dims_str(t, da, sizeof da), t->n_dims);
            return -1;
        }
        if (!fc_dtype_from_ggml_type(t->type, &dt) || (dt != FC_F32 && dt != FC_F16 && dt != FC_BF16)) {
            fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: tensor %s is %s; LoRA tensors must be F32, F16 or BF16", path,
                    t->name, t->type_name ? t->type_name : "of an unknown type");
            return -1;
        }
    }
    p->w = w;
    p->embd = !strcmp(p->name, "token_embd.weight");
    if (p->embd && m->hp.tied_output) {
        /* llama.cpp's tied output is token_embd by name, so its graph would apply this pair, in the
         * embeddings' layout, to the output product too (which cannot take it) */
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: tensor %s.lora_a: LoRA on token_embd.weight of a model whose output is "
                "tied to it is not supported", path, p->name);
        return -1;
    }
    if (p->embd) return bind_embd(ctx, g, path, p, &ta, &tb, n_out, n_in);
    if (ta.ne[0] != n_in) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: tensor %s is %s (GGUF ne), but %s takes %lld inputs (ne[0] must match)", path,
                ta.name, dims_str(&ta, da, sizeof da), p->name, (long long)n_in);
        return -1;
    }
    if (tb.ne[1] != n_out) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: tensor %s is %s (GGUF ne), but %s has %lld outputs (ne[1] must match)", path,
                tb.name, dims_str(&tb, db, sizeof db), p->name, (long long)n_out);
        return -1;
    }
    if (ta.ne[1] != tb.ne[0] || ta.ne[1] < 1) {
        fc_fail(ctx, FC_ERR_SHAPE,
                "%s: tensors %s %s and %s %s disagree on the rank (lora_a ne[1] %lld, lora_b "
                "ne[0] %lld)",
                path, ta.name, dims_str(&ta, da, sizeof da), tb.name, dims_str(&tb, db, sizeof db), (long long)ta.ne[1],
                (long long)tb.ne[0]);
        return -1;
    }
    p->w = w;
    p->rank = ta.ne[1];
    p->a = fc_gguf_tensor(g, ta.name);
    p->b = p->a ? fc_gguf_tensor(g, tb.name) : NULL;
    return p->b ? 0 : -1;
}

fc_llm_lora *fc_llm_lora_load(fc_ctx *ctx, const fc_llm_model *m, const char *path)
{
    if (!ctx) return NULL;
    if (!m || !path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_lora_load: NULL %s", m ? "path" : "model");
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return NULL;
    const int64_t nt = fc_gguf_tensor_count(g);
    fc_llm_lora *a = calloc(1, sizeof *a);
    int64_t *idx = calloc((size_t)(2 * nt + 2), sizeof *idx);
    if (a) a->p = calloc((size_t)nt + 1, sizeof *a->p);
    if (!a || !idx || !a->p) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory for the adapter", path);
        goto fail;
    }
    a->m = m;
    if (read_keys(ctx, g, path, m, &a->alpha) || pair_up(ctx, g, path, a, idx, idx + nt + 1)) goto fail;
    if (a->n == 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: the adapter has no .lora_a / .lora_b tensors", path);
        goto fail;
    }
    for (size_t k = 0; k < a->n; k++)
        if (bind_pair(ctx, g, path, m, &a->p[k], idx[k], idx[nt + 1 + k])) goto fail;
    free(idx);
    fc_gguf_close(g);
    return a;
fail:
    free(idx);
    fc_gguf_close(g);
    fc_llm_lora_free(a);
    return NULL;
}

/* ---- setting adapters on a model -------------------------------------------------- */

void fc_llm_lora_set_free(fc_llm_lora_set *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_deltas; i++) {
        fc_release(s->deltas[i].a);
        fc_release(s->deltas[i].b);
    }
    free(s->deltas);
    free(s->keys);
    free(s->first);
    free(s);
}

size_t fc_llm_model_n_loras(const fc_llm_model *m)
{
    return m && m->lora ? m->lora->n_adapters : 0;
}

fc_status fc_llm_model_set_loras(fc_ctx *ctx, fc_llm_model *m, fc_llm_lora *const *adapters, const float *scales,
                                 size_t n)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!m) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_model_set_loras: NULL model");
        return FC_ERR_INVALID_ARG;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!adapters || !adapters[i] || adapters[i]->m != m || !scales || !isfinite(scales[i])) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_model_set_loras: adapter %zu is %s", i,
                    !adapters || !adapters[i] ? "NULL"
                    : adapters[i]->m != m     ? "loaded for another model"
                    : !scales                 ? "without a scale (NULL scales)"
                                              : "given a non-finite scale");
            return FC_ERR_INVALID_ARG;
        }
        total += adapters[i]->n;
    }
    fc_llm_lora_set *s = NULL;
    if (n) {
        s = calloc(1, sizeof *s);
        size_t cap = 16;
        while (cap < 2 * total) cap *= 2;
        if (s) {
            s->cap = cap;
            s->keys = calloc(cap, sizeof *s->keys);
            s->first = calloc(cap, sizeof *s->first);
            s->deltas = calloc(total, sizeof *s->deltas);
        }
        if (!s || !s->keys || !s->first || !s->deltas) {
            fc_llm_lora_set_free(s);
            fc_fail(ctx, FC_ERR_OOM, "fc_llm_model_set_loras: out of memory");
            return FC_ERR_OOM;
        }
        s->n_adapters = n;
        fc_llm_lora_delta *embd_tail = NULL;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < adapters[i]->n; k++) {
                const fc_llm_lora_pair *p = &adapters[i]->p[k];
                fc_llm_lora_delta *d = &s->deltas[s->n_deltas++];
                d->a = fc_retain(p->a);
                d->b = fc_retain(p->b);
                d->rank = p->rank;
                d->scale = fc_llm_lora_scale(scales[i], adapters[i]->alpha, p->rank);
                if (p->embd) { /* kept apart, in adapter order */
                    if (embd_tail) embd_tail->next = d;
                    else s->tok_embd = d;
                    embd_tail = d;
                    continue;
                }
                size_t h = fc_llm_lora_slot(p->w, cap);
                while (s->keys[h] && s->keys[h] != p->w) h = (h + 1) & (cap - 1);
                if (!s->keys[h]) {
                    s->keys[h] = p->w;
                    s->first[h] = d;
                } else { /* after the weight's earlier deltas: llama.cpp adds them in adapter order */
                    fc_llm_lora_delta *e = s->first[h];
                    while (e->next) e = (fc_llm_lora_delta *)e->next;
                    e->next = d;
                }
            }
    }
    fc_llm_lora_set_free(m->lora);
    m->lora = s;
    return FC_OK;
}
