/* SPDX-License-Identifier: MIT */
/* Fucina llm: a training model written as a GGUF file llama.cpp loads.
 *
 * Keys: general.*, the family's metadata keys from the model's hparams
 * (the writer the random-weight models use, fc_llm_write_keys), and every
 * tokenizer.* key of the file the tokenizer came from, copied as it is (so
 * the vocabulary, merges, special ids and chat template are exactly the
 * ones trained on). Tensors: the parameters in the loader's order under
 * their GGUF names; matrices in the requested dtype, vectors f32 (as
 * convert_hf_to_gguf.py writes norms and biases). */
#include <string.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/gguf.h"
#include "fucina/ops.h"
#include "llm/arch.h"
#include "llm/lm_internal.h"
#include "llm/make_model.h"

/* llama_ftype of the matrices' dtype (general.file_type). */
static uint32_t file_type_of(fc_dtype dt) { return dt == FC_F16 ? 1 : dt == FC_BF16 ? 32 : 0; }

static fc_status copy_tokenizer_keys(fc_ctx *ctx, fc_gguf_writer *w, const char *path)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return fc_ctx_status(ctx);
    fc_status st = FC_OK;
    int64_t n = 0;
    for (int64_t i = 0; i < fc_gguf_kv_count(g) && st == FC_OK; i++) {
        const char *key = fc_gguf_kv_key(g, i);
        if (key && !strncmp(key, "tokenizer.", 10)) {
            st = fc_gguf_writer_copy_kv(w, g, i);
            n++;
        }
    }
    fc_gguf_close(g);
    if (st == FC_OK && n == 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_lm_save_gguf: %s has no tokenizer.* keys to copy", path);
        st = FC_ERR_FORMAT;
    }
    return st;
}

#define TRY(e)                                                                                                     \
    do {                                                                                                           \
        if ((st = (e)) != FC_OK) goto done;                                                                        \
    } while (0)

fc_status fc_lm_write_gguf(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dt, fc_lm_gguf_head_fn head)
{
    fc_status st = FC_OK;
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    if (!w) return fc_ctx_status(ctx);
    TRY(head(ctx, w, lm, dt));
    for (int i = 0; i < lm->n_params; i++) {
        fc_tensor *p = lm->params[i];
        if (dt == FC_F32 || fc_tensor_rank(p) == 1) {
            TRY(fc_gguf_writer_add_tensor(w, lm->names[i], p));
            continue;
        }
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *c = fc_cast(ctx, fc_detach(ctx, p), dt);
        st = c ? fc_gguf_writer_add_tensor(w, lm->names[i], c) : fc_ctx_status(ctx);
        fc_scope_end(ctx, sc);
        if (st != FC_OK) goto done;
    }
    TRY(fc_gguf_writer_save(w, path));
done:
    fc_gguf_writer_free(w);
    return st;
}

/* general.*, the family's keys, the tokenizer's; rope_freqs (a constant, not a parameter) */
static fc_status export_head(fc_ctx *ctx, fc_gguf_writer *w, const fc_lm *lm, fc_dtype dt)
{
    const fc_llm_model *m = lm->m;
    fc_status st = FC_OK;
    TRY(fc_gguf_set_str(w, "general.architecture", m->desc->name));
    TRY(fc_gguf_set_str(w, "general.name", "fucina trained model"));
    TRY(fc_gguf_set_u32(w, "general.file_type", file_type_of(dt)));
    TRY(fc_llm_write_keys(w, m->desc, &m->hp));
    TRY(copy_tokenizer_keys(ctx, w, lm->tok_path));
    if (m->rope_freqs) TRY(fc_gguf_writer_add_tensor(w, "rope_freqs.weight", m->rope_freqs));
done:
    return st;
}

fc_status fc_lm_save_gguf(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dtype)
{
    static const char *op = "fc_lm_save_gguf";
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!lm || !path) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL %s", op, lm ? "path" : "model");
        return FC_ERR_INVALID_ARG;
    }
    if (lm->lora) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: a LoRA model: write its adapter (fc_lm_save_lora) or merge it "
                "(fc_llm_lora_merge)", op);
        return FC_ERR_INVALID_ARG;
    }
    const fc_dtype dt = dtype == (fc_dtype)0 ? FC_F32 : dtype;
    if (dt != FC_F32 && dt != FC_F16 && dt != FC_BF16) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: dtype %s: export is f32, f16 or bf16 (then fucina quantize)", op,
                fc_dtype_name(dt));
        return FC_ERR_INVALID_ARG;
    }
    if (!lm->tok_path) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the model has no tokenizer (made without a tokenizer file)", op);
        return FC_ERR_INVALID_ARG;
    }
    return fc_lm_write_gguf(ctx, lm, path, dt, export_head);
}
