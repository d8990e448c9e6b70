/* SPDX-License-Identifier: MIT */
/* Fucina llm: training data — documents and conversations read, tokenized
 * and laid out as rows (see lm_data.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "exec/ctx.h"
#include "fucina/chat.h"
#include "io/json_value.h"
#include "io/read_all.h"
#include "llm/lm_data.h"
#include "llm/lm_internal.h"

#define IGNORE (-100)

typedef struct grow {
    fc_token *tok;
    uint8_t *target;
    size_t n, cap;
    size_t *off;
    size_t n_off, off_cap;
} grow;

static int push(grow *g, fc_token t, uint8_t target)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        fc_token *a = realloc(g->tok, cap * sizeof *a);
        if (a) g->tok = a;
        uint8_t *b = a ? realloc(g->target, cap) : NULL;
        if (!b) return -1;
        g->target = b;
        g->cap = cap;
    }
    g->tok[g->n] = t;
    g->target[g->n++] = target;
    return 0;
}

static int push_off(grow *g)
{
    if (g->n_off == g->off_cap) {
        size_t cap = g->off_cap ? g->off_cap * 2 : 256;
        size_t *a = realloc(g->off, cap * sizeof *a);
        if (!a) return -1;
        g->off = a;
        g->off_cap = cap;
    }
    g->off[g->n_off++] = g->n;
    return 0;
}

static char *read_all(fc_ctx *ctx, const char *path, size_t *n)
{
    errno = 0;
    char *buf = fc_read_path(path, 0, n);
    if (!buf && errno == ENOMEM) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory reading it", path);
    if (!buf && errno == EIO) return fc_fail(ctx, FC_ERR_IO, "%s: read error", path);
    if (!buf) return fc_fail(ctx, FC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return buf;
}

/* ---- documents ------------------------------------------------------------------------ */

static int add_document(fc_ctx *ctx, grow *g, const fc_tokenizer *tok, fc_token bos, const char *text, size_t len,
                        const char *path, size_t line)
{
    fc_token *t = NULL;
    size_t n = 0;
    if (fc_tokenize(ctx, tok, text, len, 0, &t, &n) != FC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s:%zu: %s", path, line, why);
        return -1;
    }
    int rc = push(g, bos, 1);
    for (size_t i = 0; i < n && rc == 0; i++) rc = push(g, t[i], 1);
    fc_tokens_free(t);
    if (rc) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", path);
    return rc;
}

/* ---- conversations -------------------------------------------------------------------- */

static int parse_role(const fj_val *r, fc_chat_role *out)
{
    static const char *names[] = {"system", "user", "assistant", "tool"};
    static const fc_chat_role roles[] = {FC_CHAT_SYSTEM, FC_CHAT_USER, FC_CHAT_ASSISTANT, FC_CHAT_TOOL};
    for (int i = 0; r && r->type == FJ_STR && i < 4; i++)
        if (!strcmp(r->str, names[i])) {
            *out = roles[i];
            return 0;
        }
    return -1;
}

/* The tokens of msgs[0..n), with the generation prompt when gen. */
static int chat_tokens(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                       int gen, fc_token **out, size_t *n_out)
{
    return fc_chat_tokenize(ctx, tok, t, msgs, n, gen ? FC_CHAT_ADD_GENERATION_PROMPT : 0, out, n_out) == FC_OK ? 0
                                                                                                              : -1;
}

static int is_prefix(const fc_token *a, size_t na, const fc_token *b, size_t nb)
{
    return na <= nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* One conversation: the whole rendering's tokens, and as targets the
 * tokens each assistant message adds after the prompt before it (the
 * message's text and the end of its turn). A rendering whose prefix does
 * not tokenize as a prefix of the whole is refused (the masks would be
 * wrong). */
static int add_conversation(fc_ctx *ctx, grow *g, const fc_tokenizer *tok, fc_chat_template tmpl, const fj_val *msgs,
                            const char *path, size_t line)
{
    if (!msgs || msgs->type != FJ_ARR || msgs->len == 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s:%zu: \"messages\" must be a non-empty array", path, line);
        return -1;
    }
    fc_chat_message *m = calloc(msgs->len, sizeof *m);
    fc_token *all = NULL, *pre = NULL, *upto = NULL;
    size_t n_all = 0, n_pre = 0, n_upto = 0;
    int rc = -1, n_assistant = 0;
    if (!m) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < msgs->len; i++) {
        const fj_val *v = msgs->items[i];
        const fj_val *c = fj_get(v, "content");
        if (!v || v->type != FJ_OBJ || parse_role(fj_get(v, "role"), &m[i].role) || !c || c->type != FJ_STR) {
            fc_fail(ctx, FC_ERR_FORMAT,
                    "%s:%zu: message %zu needs \"role\" (system, user, assistant or tool) and a string \"content\"",
                    path, line, i);
            goto done;
        }
        m[i].content = c->str;
        n_assistant += m[i].role == FC_CHAT_ASSISTANT;
    }
    if (!n_assistant) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s:%zu: the conversation has no assistant message to train on", path, line);
        goto done;
    }
    if (chat_tokens(ctx, tok, tmpl, m, msgs->len, 0, &all, &n_all)) goto done;
    uint8_t *tgt = calloc(n_all ? n_all : 1, 1);
    if (!tgt) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < msgs->len; i++) {
        if (m[i].role != FC_CHAT_ASSISTANT) continue;
        fc_tokens_free(pre), fc_tokens_free(upto);
        pre = upto = NULL;
        if (chat_tokens(ctx, tok, tmpl, m, i, 1, &pre, &n_pre) || chat_tokens(ctx, tok, tmpl, m, i + 1, 0, &upto, &n_upto)) {
            free(tgt);
            goto done;
        }
        if (!is_prefix(pre, n_pre, all, n_all) || !is_prefix(upto, n_upto, all, n_all) || n_upto < n_pre) {
            fc_fail(ctx, FC_ERR_FORMAT,
                    "%s:%zu: message %zu: the conversation's tokens do not extend its prefix's (the template "
                    "re-renders earlier turns), so its assistant tokens cannot be marked", path, line, i);
            free(tgt);
            goto done;
        }
        for (size_t k = n_pre; k < n_upto; k++) tgt[k] = 1;
    }
    rc = push_off(g);
    for (size_t k = 0; k < n_all && rc == 0; k++) rc = push(g, all[k], tgt[k]);
    free(tgt);
    if (rc) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", path);
done:
    free(m);
    fc_tokens_free(all), fc_tokens_free(pre), fc_tokens_free(upto);
    return rc;
}

/* ---- files ------------------------------------------------------------------------------- */

static int load_file(fc_ctx *ctx, lm_data *d, grow *g, const fc_tokenizer *tok, fc_chat_template tmpl, fc_token bos,
                     const char *path, const char *field)
{
    size_t len = 0;
    char *buf = read_all(ctx, path, &len);
    if (!buf) return -1;
    d->n_bytes += (int64_t)len;
    int rc = 0;
    if (!fc_str_ends_with(path, ".jsonl")) {
        if (d->kind == FC_LM_DATA_CHAT) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: conversations are read from JSONL files ({\"messages\": [...]} lines)",
                    path);
            rc = -1;
        } else {
            d->n_docs++;
            rc = add_document(ctx, g, tok, bos, buf, len, path, 1);
        }
        free(buf);
        return rc;
    }
    size_t line = 0;
    for (char *p = buf; rc == 0 && p < buf + len;) {
        char *e = memchr(p, '\n', (size_t)(buf + len - p));
        if (!e) e = buf + len;
        line++;
        size_t n = (size_t)(e - p);
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        if (n) {
            char err[160];
            fj_doc *doc = fj_parse(p, n, &(fj_limits){.max_bytes = (size_t)1 << 30}, err, sizeof err);
            const fj_val *root = doc ? fj_root(doc) : NULL;
            if (!doc) {
                fc_fail(ctx, FC_ERR_FORMAT, "%s:%zu: not JSON: %s", path, line, err);
                rc = -1;
            } else if (d->kind == FC_LM_DATA_CHAT) {
                d->n_docs++;
                rc = add_conversation(ctx, g, tok, tmpl, fj_get(root, "messages"), path, line);
            } else {
                const fj_val *t = fj_get(root, field);
                if (!t || t->type != FJ_STR) {
                    fc_fail(ctx, FC_ERR_FORMAT, "%s:%zu: no string field \"%s\"", path, line, field);
                    rc = -1;
                } else {
                    d->n_docs++;
                    rc = add_document(ctx, g, tok, bos, t->str, t->len, path, line);
                }
            }
            fj_free(doc);
        }
        p = e + 1;
    }
    free(buf);
    return rc;
}

int lm_data_load(fc_ctx *ctx, lm_data *d, const fc_lm *lm, fc_lm_data_kind kind, const char *const *files, int n,
                 const char *field, int64_t seq, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->seq = seq;
    d->seed = seed;
    d->perm_epoch = -1;
    const fc_tokenizer *tok = fc_lm_tokenizer(lm);
    if (!tok) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_train: the model has no tokenizer to read text with");
        return -1;
    }
    fc_token bos = fc_tokenizer_bos(tok);
    if (bos == FC_TOKEN_NONE) bos = fc_tokenizer_eos(tok);
    if (bos == FC_TOKEN_NONE) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_train: the vocabulary has neither BOS nor EOS to separate documents");
        return -1;
    }
    d->pad = fc_tokenizer_pad(tok) != FC_TOKEN_NONE ? fc_tokenizer_pad(tok) : bos;
    fc_chat_template tmpl = FC_CHAT_TEMPLATE_CHATML;
    if (kind == FC_LM_DATA_CHAT) {
        int found = 0;
        if (fc_chat_template_load(ctx, lm->tok_path, &tmpl, &found) != FC_OK) return -1;
        if (!found) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: no tokenizer.chat_template to render conversations with", lm->tok_path);
            return -1;
        }
    }
    grow g = {0};
    for (int i = 0; i < n; i++)
        if (load_file(ctx, d, &g, tok, tmpl, bos, files[i], field)) goto fail;
    if (kind == FC_LM_DATA_CHAT && push_off(&g)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_lm_train: out of memory");
        goto fail;
    }
    d->tok = g.tok;
    d->target = g.target;
    d->n_tok = g.n;
    d->item_off = g.off;
    d->n_items = kind == FC_LM_DATA_CHAT ? (int64_t)g.n_off - 1 : (int64_t)(g.n > 0 ? (g.n - 1) / (size_t)seq : 0);
    if (d->n_items < 1) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_train: %s holds %zu tokens, fewer than one row of %lld + 1",
                n == 1 ? files[0] : "the data", g.n, (long long)seq);
        lm_data_free(d);
        return -1;
    }
    return 0;
fail:
    free(g.tok), free(g.target), free(g.off);
    memset(d, 0, sizeof *d);
    return -1;
}

void lm_data_free(lm_data *d)
{
    free(d->tok), free(d->target), free(d->item_off), free(d->perm);
    memset(d, 0, sizeof *d);
}

/* ---- rows -------------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The epoch's visiting order: Fisher-Yates under (seed, epoch). */
static int shuffle(lm_data *d, int64_t epoch)
{
    if (d->perm_epoch == epoch) return 0;
    if (!d->perm && !(d->perm = malloc((size_t)d->n_items * sizeof *d->perm))) return -1;
    for (int64_t i = 0; i < d->n_items; i++) d->perm[i] = i;
    uint64_t s = d->seed ^ ((uint64_t)epoch * 0xD1B54A32D192ED03ull);
    for (int64_t i = d->n_items - 1; i > 0; i--) {
        const int64_t j = (int64_t)(splitmix(&s) % (uint64_t)(i + 1));
        const int64_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->perm_epoch = epoch;
    return 0;
}

static void item(const lm_data *d, int64_t k, int32_t *in, int32_t *out)
{
    const int64_t seq = d->seq;
    if (d->kind == FC_LM_DATA_TEXT) {
        const fc_token *t = d->tok + (size_t)k * (size_t)seq;
        for (int64_t i = 0; i < seq; i++) {
            in[i] = t[i];
            out[i] = t[i + 1];
        }
        return;
    }
    const size_t a = d->item_off[k], b = d->item_off[k + 1];
    for (int64_t i = 0; i < seq; i++) {
        const size_t p = a + (size_t)i;
        in[i] = p < b ? d->tok[p] : d->pad;
        out[i] = p + 1 < b && d->target[p + 1] ? d->tok[p + 1] : IGNORE;
    }
}

int lm_data_row(lm_data *d, int64_t batch, int64_t step, int64_t row, int32_t *in, int32_t *out)
{
    const int64_t k = step * batch + row;
    if (shuffle(d, k / d->n_items)) return -1;
    item(d, d->perm[k % d->n_items], in, out);
    return 0;
}

void lm_data_window(const lm_data *d, int64_t k, int32_t *in, int32_t *out) { item(d, k, in, out); }
