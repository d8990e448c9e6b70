/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: POST /v1/messages, Anthropic's Messages API.
 *
 * The request is read field by field as the OpenAI endpoints are (an
 * unknown or unsupported field is a 400 naming it) and mapped onto the same
 * conversation and engine: `system` (a string or text blocks) opens it;
 * user and assistant messages take a string or content blocks — text,
 * tool_use (assistant: a call with its input object) and tool_result (user:
 * the result of a call, a string or text blocks; each becomes a tool turn);
 * `tools` ({name, description, input_schema}) and `tool_choice` ({type:
 * auto, any, tool, none; name; disable_parallel_tool_use}) become the same
 * tool definitions and grammars as OpenAI's. The answer is a message with
 * text and tool_use content blocks and Anthropic's stop reasons (end_turn,
 * max_tokens, stop_sequence with the sequence, tool_use); streamed, the
 * event sequence message_start, content_block_start / _delta (text_delta,
 * input_json_delta) / _stop per block, message_delta, message_stop. Errors
 * have Anthropic's shape: {"type": "error", "error": {"type", "message"}}. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/grammar.h"
#include "serve/server.h"
#include "serve/sse.h"
#include "serve/tools.h"

__attribute__((format(printf, 4, 5))) static int msg_error(srv_http_response *out, int status, const char *type,
                                                           const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fj_buf b = {0};
    fj_raws(&b, "{\"type\":\"error\",\"error\":{\"type\":");
    fj_strs(&b, type);
    fj_raws(&b, ",\"message\":");
    fj_strs(&b, msg);
    fj_raws(&b, "}}");
    out->status = b.oom ? 500 : status;
    out->body = b.p;
    out->len = b.n;
    return -1;
}
#define BAD(...) msg_error(out, 400, "invalid_request_error", __VA_ARGS__)

static int check_keys(const fj_val *v, const char *where, const char *const *known, srv_http_response *out) {
    for (size_t i = 0; i < v->len; i++) {
        int ok = 0;
        for (size_t k = 0; known[k] && !ok; k++) ok = !strcmp(v->keys[i], known[k]);
        if (!ok) return BAD("%s%s%s: not supported", where, *where ? "." : "", v->keys[i]);
    }
    return 0;
}

/* ---- the conversation ---- */

typedef struct conv {
    fc_chat_message *m;
    size_t n, cap;
    char **owned; /* strings to free */
    size_t n_owned, cap_owned;
    fc_chat_tool_call **calls;
    size_t n_calls_arrays;
} conv;

static char *own(conv *c, char *s) {
    if (!s) return NULL;
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? 2 * c->cap_owned : 16;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            free(s);
            return NULL;
        }
        c->owned = o, c->cap_owned = cap;
    }
    return c->owned[c->n_owned++] = s;
}

static fc_chat_message *push(conv *c) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        fc_chat_message *m = realloc(c->m, cap * sizeof *m);
        if (!m) return NULL;
        c->m = m, c->cap = cap;
    }
    c->m[c->n] = (fc_chat_message){.content = ""};
    return &c->m[c->n++];
}

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    for (size_t i = 0; i < c->n_calls_arrays; i++) free(c->calls[i]);
    free(c->owned), free(c->calls), free(c->m);
}

/* A string, or text blocks joined: a new string (owned by c). */
static const char *text_of(conv *c, const fj_val *v, const char *where, srv_http_response *out) {
    if (v && v->type == FJ_STR) {
        if (memchr(v->str, 0, v->len)) return BAD("%s: contains a NUL character", where), NULL;
        return v->str;
    }
    if (!v || v->type != FJ_ARR) return BAD("%s: must be a string or an array of text blocks", where), NULL;
    fj_buf b = {0};
    fj_raw(&b, "", 0);
    for (size_t i = 0; i < v->len; i++) {
        const fj_val *t = fj_get(v->items[i], "type"), *tx = fj_get(v->items[i], "text");
        if (!t || t->type != FJ_STR || strcmp(t->str, "text") || !tx || tx->type != FJ_STR || memchr(tx->str, 0, tx->len)) {
            fj_buf_free(&b);
            return BAD("%s[%zu]: must be {\"type\": \"text\", \"text\": STRING}", where, i), NULL;
        }
        fj_raw(&b, tx->str, tx->len);
    }
    fj_raw(&b, "", 1);
    if (b.oom) return msg_error(out, 500, "api_error", "out of memory"), NULL;
    return own(c, b.p);
}

static int read_messages(conv *c, const fj_val *root, srv_http_response *out) {
    const fj_val *sys = fj_get(root, "system"), *msgs = fj_get(root, "messages");
    if (sys && sys->type != FJ_NULL) {
        const char *t = text_of(c, sys, "system", out);
        fc_chat_message *m = t ? push(c) : NULL;
        if (!t) return -1;
        if (!m) return msg_error(out, 500, "api_error", "out of memory");
        m->role = FC_CHAT_SYSTEM, m->content = t;
    }
    if (!msgs || msgs->type != FJ_ARR || !msgs->len) return BAD("messages: must be a non-empty array");
    for (size_t i = 0; i < msgs->len; i++) {
        const fj_val *msg = msgs->items[i];
        char where[64];
        snprintf(where, sizeof where, "messages[%zu]", i);
        static const char *const known[] = {"role", "content", NULL};
        if (msg->type != FJ_OBJ) return BAD("%s: must be an object", where);
        if (check_keys(msg, where, known, out)) return -1;
        const fj_val *role = fj_get(msg, "role"), *content = fj_get(msg, "content");
        int user = role && role->type == FJ_STR && !strcmp(role->str, "user");
        if (!user && !(role && role->type == FJ_STR && !strcmp(role->str, "assistant")))
            return BAD("%s.role: must be user or assistant", where);
        if (content && content->type == FJ_STR) {
            fc_chat_message *m = push(c);
            if (!m) return msg_error(out, 500, "api_error", "out of memory");
            m->role = user ? FC_CHAT_USER : FC_CHAT_ASSISTANT;
            m->content = content->str;
            if (memchr(content->str, 0, content->len)) return BAD("%s.content: contains a NUL character", where);
            continue;
        }
        if (!content || content->type != FJ_ARR) return BAD("%s.content: must be a string or an array of blocks", where);
        /* blocks: text joins into one turn; tool_use are its calls; each tool_result is a tool turn */
        fj_buf text = {0};
        fj_raw(&text, "", 0);
        fc_chat_tool_call *calls = calloc(content->len ? content->len : 1, sizeof *calls);
        size_t n_calls = 0;
        if (!calls) return msg_error(out, 500, "api_error", "out of memory");
        fc_chat_tool_call **ca = realloc(c->calls, (c->n_calls_arrays + 1) * sizeof *ca);
        if (!ca) {
            free(calls);
            return msg_error(out, 500, "api_error", "out of memory");
        }
        c->calls = ca;
        c->calls[c->n_calls_arrays++] = calls;
        for (size_t k = 0; k < content->len; k++) {
            const fj_val *blk = content->items[k];
            const fj_val *type = fj_get(blk, "type");
            char bw[96];
            snprintf(bw, sizeof bw, "%s.content[%zu]", where, k);
            if (blk->type != FJ_OBJ || !type || type->type != FJ_STR) {
                fj_buf_free(&text);
                return BAD("%s: must be a content block with a type", bw);
            }
            if (!strcmp(type->str, "text")) {
                static const char *const kt[] = {"type", "text", "cache_control", NULL};
                const fj_val *tx = fj_get(blk, "text");
                if (check_keys(blk, bw, kt, out) || !tx || tx->type != FJ_STR || memchr(tx->str, 0, tx->len)) {
                    fj_buf_free(&text);
                    return out->status ? -1 : BAD("%s.text: must be a string", bw);
                }
                fj_raw(&text, tx->str, tx->len);
            } else if (!strcmp(type->str, "tool_use") && !user) {
                static const char *const ku[] = {"type", "id", "name", "input", "cache_control", NULL};
                const fj_val *id = fj_get(blk, "id"), *name = fj_get(blk, "name"), *input = fj_get(blk, "input");
                if (check_keys(blk, bw, ku, out) || !id || id->type != FJ_STR || !name || name->type != FJ_STR ||
                    !input || input->type != FJ_OBJ) {
                    fj_buf_free(&text);
                    return out->status ? -1 : BAD("%s: a tool_use block needs id, name and an input object", bw);
                }
                fj_buf a = {0};
                fj_value(&a, input);
                fj_raw(&a, "", 1);
                if (a.oom || !own(c, a.p)) {
                    fj_buf_free(&text);
                    return msg_error(out, 500, "api_error", "out of memory");
                }
                calls[n_calls++] = (fc_chat_tool_call){.id = id->str, .name = name->str, .arguments = a.p};
            } else if (!strcmp(type->str, "tool_result") && user) {
                static const char *const kr[] = {"type", "tool_use_id", "content", "is_error", "cache_control", NULL};
                const fj_val *tid = fj_get(blk, "tool_use_id"), *rc = fj_get(blk, "content");
                if (check_keys(blk, bw, kr, out) || !tid || tid->type != FJ_STR) {
                    fj_buf_free(&text);
                    return out->status ? -1 : BAD("%s: a tool_result block needs a tool_use_id", bw);
                }
                char rw[128];
                snprintf(rw, sizeof rw, "%s.content", bw);
                const char *r = rc ? text_of(c, rc, rw, out) : "";
                fc_chat_message *m = r ? push(c) : NULL;
                if (!r || !m) {
                    fj_buf_free(&text);
                    return r ? msg_error(out, 500, "api_error", "out of memory") : -1;
                }
                m->role = FC_CHAT_TOOL, m->content = r, m->tool_call_id = tid->str;
            } else {
                fj_buf_free(&text);
                return BAD("%s: a block of type '%s' is not supported in a%s message", bw, type->str,
                           user ? " user" : "n assistant");
            }
        }
        fj_raw(&text, "", 1);
        if (text.oom) return msg_error(out, 500, "api_error", "out of memory");
        if (text.n > 1 || n_calls || (!user && text.n <= 1)) {
            if (!own(c, text.p)) return msg_error(out, 500, "api_error", "out of memory");
            fc_chat_message *m = push(c);
            if (!m) return msg_error(out, 500, "api_error", "out of memory");
            m->role = user ? FC_CHAT_USER : FC_CHAT_ASSISTANT;
            m->content = text.p;
            m->tool_calls = n_calls ? calls : NULL;
            m->n_tool_calls = n_calls;
        } else {
            fj_buf_free(&text);
        }
    }
    return 0;
}

/* tools: [{name, description, input_schema}] -> OpenAI definitions;
 * tool_choice: {type: auto | any | tool | none, name, disable_parallel_tool_use}. */
static int read_tools(const fj_val *root, srv_tools *t, srv_http_response *out) {
    const fj_val *tools = fj_get(root, "tools"), *choice = fj_get(root, "tool_choice");
    if (tools && tools->type != FJ_NULL) {
        if (tools->type != FJ_ARR) return BAD("tools: must be an array");
        t->defs = calloc(tools->len ? tools->len : 1, sizeof *t->defs);
        if (!t->defs) return msg_error(out, 500, "api_error", "out of memory");
        for (size_t i = 0; i < tools->len; i++) {
            const fj_val *tool = tools->items[i];
            char where[48];
            snprintf(where, sizeof where, "tools[%zu]", i);
            static const char *const known[] = {"name", "description", "input_schema", "cache_control", "type", NULL};
            if (tool->type != FJ_OBJ) return BAD("%s: must be an object", where);
            if (check_keys(tool, where, known, out)) return -1;
            const fj_val *name = fj_get(tool, "name"), *desc = fj_get(tool, "description"),
                         *schema = fj_get(tool, "input_schema"), *type = fj_get(tool, "type");
            if (type && (type->type != FJ_STR || strcmp(type->str, "custom")))
                return BAD("%s.type: only custom tools (the default) are supported", where);
            if (!name || name->type != FJ_STR) return BAD("%s.name: must be a string", where);
            if (!schema || schema->type != FJ_OBJ) return BAD("%s.input_schema: must be a JSON Schema object", where);
            fj_buf b = {0};
            fj_raws(&b, "{\"type\":\"function\",\"function\":{\"name\":");
            fj_str(&b, name->str, name->len);
            if (desc && desc->type == FJ_STR) {
                fj_raws(&b, ",\"description\":");
                fj_str(&b, desc->str, desc->len);
            }
            fj_raws(&b, ",\"parameters\":");
            fj_value(&b, schema);
            fj_raws(&b, "}}");
            fj_raw(&b, "", 1);
            if (b.oom) return msg_error(out, 500, "api_error", "out of memory");
            t->defs[t->n++] = b.p;
        }
    }
    if (choice && choice->type != FJ_NULL) {
        static const char *const known[] = {"type", "name", "disable_parallel_tool_use", NULL};
        if (choice->type != FJ_OBJ) return BAD("tool_choice: must be an object");
        if (check_keys(choice, "tool_choice", known, out)) return -1;
        const fj_val *type = fj_get(choice, "type"), *name = fj_get(choice, "name"),
                     *dp = fj_get(choice, "disable_parallel_tool_use");
        if (!type || type->type != FJ_STR) return BAD("tool_choice.type: must be auto, any, tool or none");
        if (!strcmp(type->str, "auto")) t->choice.choice = FC_CHAT_TOOL_CHOICE_AUTO;
        else if (!strcmp(type->str, "any")) t->choice.choice = FC_CHAT_TOOL_CHOICE_REQUIRED;
        else if (!strcmp(type->str, "none")) t->none = 1;
        else if (!strcmp(type->str, "tool")) {
            if (!name || name->type != FJ_STR || !name->len || name->len > 64) return BAD("tool_choice.name: must name a tool");
            t->choice.choice = FC_CHAT_TOOL_CHOICE_NAMED;
            memcpy(t->name, name->str, name->len);
            t->name[name->len] = 0;
            t->choice.name = t->name;
        } else {
            return BAD("tool_choice.type: '%s' is none of auto, any, tool, none", type->str);
        }
        if (dp && dp->type == FJ_BOOL) t->choice.single = dp->boolean;
        if (!t->n && !t->none && t->choice.choice != FC_CHAT_TOOL_CHOICE_AUTO)
            return BAD("tool_choice: asks for a tool, but there are no tools");
    }
    return 0;
}

/* ---- generation parameters ---- */

static int num_in(const fj_val *root, const char *key, double lo, double hi, double *v, srv_http_response *out) {
    const fj_val *x = fj_get(root, key);
    if (!x || x->type == FJ_NULL) return 0;
    if (x->type != FJ_NUM || x->num < lo || x->num > hi) return BAD("%s: must be a number in [%g, %g]", key, lo, hi);
    *v = x->num;
    return 0;
}

static int read_params(srv_server *sv, const fj_val *root, srv_gen_params *gp, int *stream, srv_http_response *out) {
    fc_sampler_params sp = fc_sampler_default_params();
    sp.temp = 1.0f; /* Anthropic's default */
    double d;
    d = sp.temp;
    if (num_in(root, "temperature", 0, 100, &d, out)) return -1;
    sp.temp = (float)d;
    d = sp.top_p;
    if (num_in(root, "top_p", 1e-9, 1, &d, out)) return -1;
    sp.top_p = (float)d;
    d = sp.top_k;
    if (num_in(root, "top_k", 0, 1e9, &d, out)) return -1;
    sp.top_k = (int32_t)d;
    sp.seed = FC_SAMPLER_SEED_RANDOM;
    const fj_val *seed = fj_get(root, "seed"); /* not Anthropic's, but reproducible tests need it */
    if (seed && seed->type != FJ_NULL) {
        if (seed->type != FJ_NUM || !seed->is_int || seed->i < 0 || seed->i > 0xFFFFFFFEll)
            return BAD("seed: must be an integer in [0, 4294967294]");
        sp.seed = (uint32_t)seed->i;
    }
    gp->sp = sp;
    const fj_val *mt = fj_get(root, "max_tokens");
    if (!mt || mt->type != FJ_NUM || !mt->is_int || mt->i < 1 || mt->i > INT32_MAX)
        return BAD("max_tokens: required, an integer >= 1");
    gp->max_tokens = (int32_t)mt->i;
    const fj_val *ss = fj_get(root, "stop_sequences");
    if (ss && ss->type != FJ_NULL) {
        if (ss->type != FJ_ARR || ss->len > SRV_MAX_STOP) return BAD("stop_sequences: at most %d strings", SRV_MAX_STOP);
        for (size_t k = 0; k < ss->len; k++) {
            if (ss->items[k]->type != FJ_STR || !ss->items[k]->len)
                return BAD("stop_sequences[%zu]: must be a non-empty string", k);
            if (!(gp->stop[gp->n_stop++] = strdup(ss->items[k]->str))) return msg_error(out, 500, "api_error", "out of memory");
        }
    }
    const fj_val *st = fj_get(root, "stream");
    if (st && st->type != FJ_NULL && st->type != FJ_BOOL) return BAD("stream: must be a boolean");
    *stream = st && st->type == FJ_BOOL && st->boolean;
    const fj_val *md = fj_get(root, "metadata");
    if (md && md->type != FJ_NULL && md->type != FJ_OBJ) return BAD("metadata: must be an object");
    const fj_val *model = fj_get(root, "model");
    if (!model || model->type != FJ_STR) return BAD("model: required, a string");
    gp->tool_format = -1;
    (void)sv;
    return 0;
}

/* ---- the answer ---- */

static const char *stop_reason(const srv_req *r, int called) {
    switch (r->finish) {
    case SRV_FINISH_STOP: return called ? "tool_use" : r->stop_index >= 0 ? "stop_sequence" : "end_turn";
    case SRV_FINISH_LENGTH: return "max_tokens";
    case SRV_FINISH_NONE:
    case SRV_FINISH_ERROR: return "end_turn";
    }
    return "end_turn";
}

static void stop_sequence_json(fj_buf *b, const srv_req *r) {
    if (r->finish == SRV_FINISH_STOP && r->stop_index >= 0) fj_strs(b, r->gp.stop[r->stop_index]);
    else fj_raws(b, "null");
}

static void tool_use_id(uint64_t seed, size_t k, char out[48]) {
    char cid[40];
    srv_tool_call_id(seed, k, cid);
    snprintf(out, 48, "toolu_%s", cid + 5);
}

typedef struct msg_stream {
    srv_sse sse; /* first: the shared part (phase 0: message_start is due) */
    srv_server *sv;
    char id[48];
    int tools;
    srv_tool_stream ts;
    int block;     /* the open block's index, -1: none */
    int block_is_text;
    int n_blocks;
} msg_stream;

static void event(msg_stream *s, const char *name) {
    fj_raws(&s->sse.out, "event: ");
    fj_raws(&s->sse.out, name);
    fj_raws(&s->sse.out, "\ndata: ");
}

static void close_block(msg_stream *s) {
    if (s->block < 0) return;
    event(s, "content_block_stop");
    fj_printf(&s->sse.out, "{\"type\":\"content_block_stop\",\"index\":%d}\n\n", s->block);
    s->block = -1;
}

static void on_text(void *u, const char *t, size_t n) {
    msg_stream *s = u;
    if (!n) return;
    if (s->block < 0 || !s->block_is_text) {
        close_block(s);
        s->block = s->n_blocks++;
        s->block_is_text = 1;
        event(s, "content_block_start");
        fj_printf(&s->sse.out, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
                  s->block);
    }
    event(s, "content_block_delta");
    fj_printf(&s->sse.out, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":", s->block);
    fj_str(&s->sse.out, t, n);
    fj_raws(&s->sse.out, "}}\n\n");
}

static void on_call(void *u, size_t index, const char *id, const char *name, const char *args, size_t n) {
    msg_stream *s = u;
    if (id) {
        close_block(s);
        s->block = s->n_blocks++;
        s->block_is_text = 0;
        char tid[48];
        tool_use_id(s->sse.r->id ^ s->sv->id_salt, index, tid);
        event(s, "content_block_start");
        fj_printf(&s->sse.out, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\",\"id\":",
                  s->block);
        fj_strs(&s->sse.out, tid);
        fj_raws(&s->sse.out, ",\"name\":");
        fj_strs(&s->sse.out, name);
        fj_raws(&s->sse.out, ",\"input\":{}}}\n\n");
    }
    if (!n) return;
    event(s, "content_block_delta");
    fj_printf(&s->sse.out, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":",
              s->block);
    fj_str(&s->sse.out, args, n);
    fj_raws(&s->sse.out, "}}\n\n");
}

static void msg_head(msg_stream *s, fj_buf *b) {
    fj_raws(b, "{\"id\":");
    fj_strs(b, s->id);
    fj_raws(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    fj_strs(b, s->sv->model_id);
}

static void msg_produce(srv_sse *base) {
    msg_stream *s = (msg_stream *)base;
    srv_req *r = s->sse.r;
    if (s->sse.phase == 0) {
        event(s, "message_start");
        fj_raws(&s->sse.out, "{\"type\":\"message_start\",\"message\":");
        msg_head(s, &s->sse.out);
        fj_printf(&s->sse.out, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":%zu,"
                           "\"output_tokens\":0}}}\n\n",
                  r->n_prompt);
        s->sse.phase = 1;
        return;
    }
    srv_sse_news nw;
    srv_sse_take(&s->sse, &nw);
    const srv_finish f = nw.finish;
    const srv_tool_sink sink = {s, on_text, on_call};
    if (nw.n_text) {
        if (s->tools) srv_tool_stream_push(&s->ts, nw.text, nw.n_text, &sink);
        else on_text(s, nw.text, nw.n_text);
    }
    free(nw.text);
    free(nw.lp);
    if (f == SRV_FINISH_NONE) return;
    if (f == SRV_FINISH_ERROR) {
        event(s, "error");
        fj_raws(&s->sse.out, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":");
        fj_strs(&s->sse.out, nw.error);
        fj_raws(&s->sse.out, "}}\n\n");
    } else {
        if (s->tools) srv_tool_stream_end(&s->ts, &sink);
        close_block(s);
        event(s, "message_delta");
        fj_raws(&s->sse.out, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
        fj_strs(&s->sse.out, stop_reason(r, s->tools && s->ts.n_calls));
        fj_raws(&s->sse.out, ",\"stop_sequence\":");
        stop_sequence_json(&s->sse.out, r);
        fj_printf(&s->sse.out, "},\"usage\":{\"output_tokens\":%" PRId64 "}}\n\n", r->n_gen);
        event(s, "message_stop");
        fj_raws(&s->sse.out, "{\"type\":\"message_stop\"}\n\n");
    }
    s->sse.phase = 2;
}

static void msg_destroy(srv_sse *base) { srv_tool_stream_free(&((msg_stream *)base)->ts); }

void srv_api_messages(srv_server *sv, const srv_http_request *rq, srv_http_response *out) {
    atomic_fetch_add(&sv->requests_total, 1);
    char err[256];
    fj_limits lim = {.max_bytes = sv->o->max_body, .max_depth = 64};
    fj_doc *doc = fj_parse(rq->body, rq->body_len, &lim, err, sizeof err);
    conv c = {0};
    srv_tools tools = {0};
    srv_gen_params gp = {0};
    fc_token *toks = NULL;
    size_t n_toks = 0;
    srv_req *r = NULL;
    int stream = 0;
    if (!doc || fj_root(doc)->type != FJ_OBJ) {
        BAD("the request body is %s", doc ? "not a JSON object" : err);
        goto done;
    }
    const fj_val *root = fj_root(doc);
    static const char *const known[] = {"model", "messages", "max_tokens", "system", "stop_sequences", "temperature",
                                        "top_p", "top_k", "stream", "tools", "tool_choice", "metadata", "seed", NULL};
    if (check_keys(root, "", known, out) || read_params(sv, root, &gp, &stream, out) || read_messages(&c, root, out) ||
        read_tools(root, &tools, out))
        goto done;
    if (tools.n && !tools.none) {
        pthread_mutex_lock(&sv->tok_mu);
        fc_ctx_clear_error(sv->tok_ctx);
        gp.grammar = fc_chat_tools_grammar(sv->tok_ctx, sv->tmpl, (const char *const *)tools.defs, tools.n, &tools.choice,
                                           &gp.trigger);
        snprintf(err, sizeof err, "%s", fc_ctx_error(sv->tok_ctx));
        pthread_mutex_unlock(&sv->tok_mu);
        if (!gp.grammar) {
            BAD("tools: %s", err);
            goto done;
        }
        gp.tool_format = (int)fc_chat_template_tool_format(sv->tmpl);
    }
    {
        const fc_chat_render_options ro = {.flags = FC_CHAT_ADD_GENERATION_PROMPT,
                                           .tools = (const char *const *)tools.defs, .n_tools = tools.n};
        pthread_mutex_lock(&sv->tok_mu);
        fc_ctx_clear_error(sv->tok_ctx);
        const fc_status st = fc_chat_tokenize_ex(sv->tok_ctx, sv->tok, sv->tmpl, c.m, c.n, &ro, &toks, &n_toks);
        snprintf(err, sizeof err, "%s", fc_ctx_error(sv->tok_ctx));
        pthread_mutex_unlock(&sv->tok_mu);
        if (st != FC_OK) {
            BAD("messages: the conversation cannot be rendered: %s", err);
            goto done;
        }
    }
    if ((int64_t)n_toks > sv->n_ctx) {
        BAD("prompt is too long: %zu tokens > %" PRId64 " maximum (the slot's context)", n_toks, sv->n_ctx);
        goto done;
    }
    r = srv_req_new(toks, n_toks, &gp);
    if (!r) {
        msg_error(out, 500, "api_error", "out of memory");
        goto done;
    }
    toks = NULL;
    memset(gp.stop, 0, sizeof gp.stop);
    gp.n_stop = 0;
    gp.grammar = NULL;
    r->id = atomic_fetch_add(&sv->next_id, 1) + 1;
    int q = srv_engine_submit(sv->eng, r);
    if (q) {
        out->retry_after = 1;
        msg_error(out, q == -1 ? 529 : 503, "overloaded_error", "%s", q == -1 ? "the queue is full" : "the server is stopping");
        goto done;
    }
    char id[48];
    snprintf(id, sizeof id, "msg_%016" PRIx64 "%08" PRIx64, sv->id_salt, r->id);
    if (stream) {
        msg_stream *s = calloc(1, sizeof *s);
        if (!s) {
            srv_req_cancel(r);
            msg_error(out, 500, "api_error", "out of memory");
            goto done;
        }
        s->sv = sv, s->block = -1;
        s->sse = (srv_sse){.r = r, .fd = rq->fd, .produce = msg_produce, .destroy = msg_destroy};
        snprintf(s->id, sizeof s->id, "%s", id);
        if (r->gp.tool_format >= 0) {
            s->tools = 1;
            srv_tool_stream_init(&s->ts, sv->tmpl, r->id ^ sv->id_salt);
        }
        r = NULL;
        out->status = 200;
        out->content_type = "text/event-stream";
        out->stream = (srv_http_stream){s, srv_sse_read, srv_sse_free};
        goto done;
    }
    if (srv_wait_news(r, 0, 0, rq->fd, 1)) {
        srv_req_cancel(r);
        msg_error(out, 499, "invalid_request_error", "the client closed the connection");
        goto done;
    }
    if (r->finish == SRV_FINISH_ERROR) {
        msg_error(out, 500, "api_error", "%s", r->error);
        goto done;
    }
    {
        fc_chat_tool_reply tr = {0};
        int called = 0;
        if (r->gp.tool_format >= 0) {
            pthread_mutex_lock(&sv->tok_mu);
            fc_status ps = fc_chat_parse_tool_calls(sv->tok_ctx, sv->tmpl, r->text ? r->text : "", r->n_text, &tr);
            pthread_mutex_unlock(&sv->tok_mu);
            if (ps != FC_OK) {
                msg_error(out, 500, "api_error", "out of memory");
                goto done;
            }
            called = tr.n_calls > 0;
        }
        fj_buf b = {0};
        msg_stream h = {.sv = sv};
        snprintf(h.id, sizeof h.id, "%s", id);
        msg_head(&h, &b);
        fj_raws(&b, ",\"content\":[");
        const char *text = r->gp.tool_format >= 0 ? tr.content : r->text ? r->text : "";
        const size_t n_text = r->gp.tool_format >= 0 ? strlen(tr.content) : r->n_text;
        int any = 0;
        if (n_text) {
            fj_raws(&b, "{\"type\":\"text\",\"text\":");
            fj_str(&b, text, n_text);
            fj_raws(&b, "}");
            any = 1;
        }
        for (size_t k = 0; k < tr.n_calls; k++) {
            char tid[48];
            tool_use_id(r->id ^ sv->id_salt, k, tid);
            fj_raws(&b, any ? ",{\"type\":\"tool_use\",\"id\":" : "{\"type\":\"tool_use\",\"id\":");
            fj_strs(&b, tid);
            fj_raws(&b, ",\"name\":");
            fj_strs(&b, tr.calls[k].name);
            fj_raws(&b, ",\"input\":");
            fj_raws(&b, tr.calls[k].arguments); /* a JSON object's text */
            fj_raws(&b, "}");
            any = 1;
        }
        fj_raws(&b, "],\"stop_reason\":");
        fj_strs(&b, stop_reason(r, called));
        fj_raws(&b, ",\"stop_sequence\":");
        stop_sequence_json(&b, r);
        fj_printf(&b, ",\"usage\":{\"input_tokens\":%zu,\"output_tokens\":%" PRId64 "}}", r->n_prompt, r->n_gen);
        fc_chat_tool_reply_free(&tr);
        if (b.oom) {
            fj_buf_free(&b);
            msg_error(out, 500, "api_error", "out of memory");
            goto done;
        }
        out->status = 200;
        out->body = b.p;
        out->len = b.n;
    }
done:
    if (out->status >= 400) atomic_fetch_add(&sv->requests_errors, 1);
    for (size_t k = 0; k < gp.n_stop; k++) free(gp.stop[k]);
    fc_grammar_free(gp.grammar);
    srv_tools_free(&tools);
    conv_free(&c);
    free(toks);
    srv_req_release(r);
    fj_free(doc);
}
