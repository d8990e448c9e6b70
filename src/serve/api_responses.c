/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: POST /v1/responses, OpenAI's Responses API, stateless.
 *
 * `instructions` and `input` (a string, or items: messages with input_text /
 * output_text parts, function_call and function_call_output) become the same
 * conversation as a chat completion; `tools` ({type: function, name,
 * description, parameters}), `tool_choice`, `parallel_tool_calls` and
 * `text.format` (text, json_object, json_schema) the same tools and
 * grammars. Nothing is stored: `previous_response_id` is refused, `store` is
 * accepted and means nothing. The answer's output is a message item with
 * one output_text part and one function_call item per call. Streamed, the
 * events come in the order the SDK's accumulator expects, each with a
 * sequence_number counting up from 0: response.created, .in_progress, per
 * item output_item.added, (message) content_part.added, output_text.delta...,
 * output_text.done, content_part.done, (call) function_call_arguments.delta...,
 * .done, then output_item.done; response.completed or response.incomplete
 * (max_output_tokens) last. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fucina/grammar.h"
#include "serve/server.h"
#include "serve/sse.h"
#include "serve/tools.h"

#define BAD(param, ...) srv_api_error(out, 400, "invalid_request_error", param, __VA_ARGS__)
#define RS_MAX_ITEMS 64

static int check_keys(const fj_val *v, const char *where, const char *const *known, srv_http_response *out) {
    for (size_t i = 0; i < v->len; i++) {
        int ok = 0;
        for (size_t k = 0; known[k] && !ok; k++) ok = !strcmp(v->keys[i], known[k]);
        if (!ok) {
            char p[128];
            snprintf(p, sizeof p, "%s%s%s", where, *where ? "." : "", v->keys[i]);
            return BAD(p, "'%s' is not supported", p);
        }
    }
    return 0;
}

/* ---- the conversation ---- */

typedef struct conv {
    fc_chat_message m[RS_MAX_ITEMS + 1];
    size_t n;
    fc_chat_tool_call calls[RS_MAX_ITEMS];
    size_t n_calls;
    char *owned[RS_MAX_ITEMS + 1];
    size_t n_owned;
} conv;

static const char *parts_text(conv *c, const fj_val *v, const char *where, srv_http_response *out) {
    if (v && v->type == FJ_STR) {
        if (memchr(v->str, 0, v->len)) return BAD(where, "'%s' contains a NUL character", where), NULL;
        return v->str;
    }
    if (!v || v->type != FJ_ARR) return BAD(where, "'%s' must be a string or an array of text parts", where), NULL;
    fj_buf b = {0};
    fj_raw(&b, "", 0);
    for (size_t i = 0; i < v->len; i++) {
        const fj_val *t = fj_get(v->items[i], "type"), *tx = fj_get(v->items[i], "text");
        if (!t || t->type != FJ_STR || (strcmp(t->str, "input_text") && strcmp(t->str, "output_text")) || !tx ||
            tx->type != FJ_STR || memchr(tx->str, 0, tx->len)) {
            fj_buf_free(&b);
            return BAD(where, "'%s[%zu]' must be {\"type\": \"input_text\", \"text\": STRING} (other parts are not "
                       "supported)", where, i), NULL;
        }
        fj_raw(&b, tx->str, tx->len);
    }
    fj_raw(&b, "", 1);
    if (b.oom || c->n_owned == RS_MAX_ITEMS + 1) {
        fj_buf_free(&b);
        return srv_api_error(out, 500, "server_error", NULL, "out of memory"), NULL;
    }
    return c->owned[c->n_owned++] = b.p;
}

static int read_input(conv *c, const fj_val *root, srv_http_response *out) {
    const fj_val *ins = fj_get(root, "instructions"), *in = fj_get(root, "input");
    if (ins && ins->type != FJ_NULL) {
        if (ins->type != FJ_STR || memchr(ins->str, 0, ins->len)) return BAD("instructions", "'instructions' must be a string");
        c->m[c->n++] = (fc_chat_message){.role = FC_CHAT_SYSTEM, .content = ins->str};
    }
    if (in && in->type == FJ_STR) {
        if (memchr(in->str, 0, in->len)) return BAD("input", "'input' contains a NUL character");
        c->m[c->n++] = (fc_chat_message){.role = FC_CHAT_USER, .content = in->str};
        return 0;
    }
    if (!in || in->type != FJ_ARR || !in->len) return BAD("input", "'input' must be a string or a non-empty array of items");
    if (in->len > RS_MAX_ITEMS) return BAD("input", "'input' has %zu items: at most %d", in->len, RS_MAX_ITEMS);
    for (size_t i = 0; i < in->len; i++) {
        const fj_val *it = in->items[i], *type = fj_get(it, "type");
        char where[48];
        snprintf(where, sizeof where, "input[%zu]", i);
        if (it->type != FJ_OBJ) return BAD(where, "'%s' must be an object", where);
        const char *ty = type && type->type == FJ_STR ? type->str : "message";
        if (!strcmp(ty, "message")) {
            static const char *const known[] = {"type", "role", "content", "id", "status", NULL};
            if (check_keys(it, where, known, out)) return -1;
            const fj_val *role = fj_get(it, "role");
            fc_chat_role r;
            if (!role || role->type != FJ_STR) return BAD(where, "'%s.role' must be a string", where);
            if (!strcmp(role->str, "user")) r = FC_CHAT_USER;
            else if (!strcmp(role->str, "assistant")) r = FC_CHAT_ASSISTANT;
            else if (!strcmp(role->str, "system") || !strcmp(role->str, "developer")) r = FC_CHAT_SYSTEM;
            else return BAD(where, "'%s.role' is '%s': the roles are user, assistant, system and developer", where, role->str);
            char cw[64];
            snprintf(cw, sizeof cw, "%s.content", where);
            const char *t = parts_text(c, fj_get(it, "content"), cw, out);
            if (!t) return -1;
            c->m[c->n++] = (fc_chat_message){.role = r, .content = t};
        } else if (!strcmp(ty, "function_call")) {
            static const char *const known[] = {"type", "call_id", "name", "arguments", "id", "status", NULL};
            if (check_keys(it, where, known, out)) return -1;
            const fj_val *id = fj_get(it, "call_id"), *name = fj_get(it, "name"), *args = fj_get(it, "arguments");
            if (!id || id->type != FJ_STR || !name || name->type != FJ_STR || !args || args->type != FJ_STR ||
                memchr(args->str, 0, args->len))
                return BAD(where, "'%s' needs call_id, name and arguments (a JSON text)", where);
            /* consecutive calls are one assistant turn */
            fc_chat_message *last = c->n ? &c->m[c->n - 1] : NULL;
            c->calls[c->n_calls] = (fc_chat_tool_call){.id = id->str, .name = name->str, .arguments = args->str};
            if (last && last->role == FC_CHAT_ASSISTANT && (last->n_tool_calls || !last->content[0]) &&
                (!last->n_tool_calls || last->tool_calls + last->n_tool_calls == &c->calls[c->n_calls])) {
                if (!last->n_tool_calls) last->tool_calls = &c->calls[c->n_calls];
                last->n_tool_calls++;
            } else {
                c->m[c->n++] = (fc_chat_message){.role = FC_CHAT_ASSISTANT, .content = "",
                                                 .tool_calls = &c->calls[c->n_calls], .n_tool_calls = 1};
            }
            c->n_calls++;
        } else if (!strcmp(ty, "function_call_output")) {
            static const char *const known[] = {"type", "call_id", "output", "id", "status", NULL};
            if (check_keys(it, where, known, out)) return -1;
            const fj_val *id = fj_get(it, "call_id"), *o = fj_get(it, "output");
            if (!id || id->type != FJ_STR || !o || o->type != FJ_STR || memchr(o->str, 0, o->len))
                return BAD(where, "'%s' needs call_id and output (a string)", where);
            c->m[c->n++] = (fc_chat_message){.role = FC_CHAT_TOOL, .content = o->str, .tool_call_id = id->str};
        } else {
            return BAD(where, "'%s.type' is '%s': items are message, function_call and function_call_output", where, ty);
        }
    }
    return 0;
}

/* Responses' flat tools ({type, name, description, parameters, strict}) as
 * chat-completion tool definitions, for srv_tools_parse. */
static int read_tools(const fj_val *root, srv_tools *t, srv_http_response *out) {
    const fj_val *tools = fj_get(root, "tools");
    fj_buf b = {0};
    fj_raws(&b, "{\"tools\":[");
    for (size_t i = 0; tools && tools->type == FJ_ARR && i < tools->len; i++) {
        const fj_val *tool = tools->items[i], *type = fj_get(tool, "type");
        char where[48];
        snprintf(where, sizeof where, "tools[%zu]", i);
        static const char *const known[] = {"type", "name", "description", "parameters", "strict", NULL};
        if (tool->type != FJ_OBJ || !type || type->type != FJ_STR || strcmp(type->str, "function")) {
            fj_buf_free(&b);
            return BAD(where, "'%s' must be a function tool (other tool types are not supported)", where);
        }
        if (check_keys(tool, where, known, out)) {
            fj_buf_free(&b);
            return -1;
        }
        if (i) fj_raws(&b, ",");
        fj_raws(&b, "{\"type\":\"function\",\"function\":{");
        int first = 1;
        for (size_t k = 0; k < tool->len; k++) {
            if (!strcmp(tool->keys[k], "type")) continue;
            if (!first) fj_raws(&b, ",");
            first = 0;
            fj_str(&b, tool->keys[k], tool->key_lens[k]);
            fj_raws(&b, ":");
            fj_value(&b, tool->items[k]);
        }
        fj_raws(&b, "}}");
    }
    if (tools && tools->type != FJ_NULL && tools->type != FJ_ARR) {
        fj_buf_free(&b);
        return BAD("tools", "'tools' must be an array");
    }
    fj_raws(&b, "]");
    /* tool_choice: "auto" | "none" | "required" | {"type": "function", "name"} */
    const fj_val *ch = fj_get(root, "tool_choice"), *par = fj_get(root, "parallel_tool_calls");
    if (ch && ch->type == FJ_STR) {
        fj_raws(&b, ",\"tool_choice\":");
        fj_str(&b, ch->str, ch->len);
    } else if (ch && ch->type == FJ_OBJ) {
        const fj_val *name = fj_get(ch, "name");
        fj_raws(&b, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":");
        if (name) fj_value(&b, name);
        else fj_raws(&b, "null");
        fj_raws(&b, "}}");
    } else if (ch && ch->type != FJ_NULL) {
        fj_buf_free(&b);
        return BAD("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (par && par->type != FJ_NULL) {
        fj_raws(&b, ",\"parallel_tool_calls\":");
        fj_value(&b, par);
    }
    fj_raws(&b, "}");
    if (b.oom) {
        fj_buf_free(&b);
        return srv_api_error(out, 500, "server_error", NULL, "out of memory");
    }
    fj_doc *d = fj_parse(b.p, b.n, NULL, NULL, 0);
    fj_buf_free(&b);
    if (!d) return srv_api_error(out, 500, "server_error", NULL, "out of memory");
    int rc = srv_tools_parse(fj_root(d), t, out);
    fj_free(d);
    return rc;
}

/* text.format -> a grammar (NULL: free text). */
static int read_format(srv_server *sv, const fj_val *root, fc_grammar **g, srv_http_response *out) {
    const fj_val *text = fj_get(root, "text");
    if (!text || text->type == FJ_NULL) return 0;
    static const char *const known[] = {"format", "verbosity", NULL};
    if (text->type != FJ_OBJ) return BAD("text", "'text' must be an object");
    if (check_keys(text, "text", known, out)) return -1;
    const fj_val *f = fj_get(text, "format");
    if (!f || f->type == FJ_NULL) return 0;
    const fj_val *type = f->type == FJ_OBJ ? fj_get(f, "type") : NULL;
    if (!type || type->type != FJ_STR) return BAD("text.format", "'text.format.type' must be text, json_object or json_schema");
    if (!strcmp(type->str, "text")) return 0;
    const fj_val *schema = fj_get(f, "schema");
    if (strcmp(type->str, "json_object") && strcmp(type->str, "json_schema"))
        return BAD("text.format", "'text.format.type' is '%s': it must be text, json_object or json_schema", type->str);
    static const char *const kf[] = {"type", "name", "schema", "strict", "description", NULL};
    if (check_keys(f, "text.format", kf, out)) return -1;
    fj_buf b = {0};
    if (schema && schema->type != FJ_NULL && !strcmp(type->str, "json_schema")) fj_value(&b, schema);
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    *g = b.n ? fc_grammar_from_json_schema(sv->tok_ctx, b.p, b.n) : fc_grammar_json(sv->tok_ctx, true);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    fj_buf_free(&b);
    if (!*g) return BAD("text.format.schema", "'text.format.schema': %s", why);
    return 0;
}

static int read_params(const fj_val *root, srv_gen_params *gp, int *stream, srv_http_response *out) {
    fc_sampler_params sp = fc_sampler_default_params();
    sp.temp = 1.0f; /* the Responses API's default */
    const fj_val *x;
    if ((x = fj_get(root, "temperature")) && x->type != FJ_NULL) {
        if (x->type != FJ_NUM || x->num < 0 || x->num > 100) return BAD("temperature", "'temperature' must be in [0, 100]");
        sp.temp = (float)x->num;
    }
    if ((x = fj_get(root, "top_p")) && x->type != FJ_NULL) {
        if (x->type != FJ_NUM || x->num <= 0 || x->num > 1) return BAD("top_p", "'top_p' must be in (0, 1]");
        sp.top_p = (float)x->num;
    }
    sp.seed = FC_SAMPLER_SEED_RANDOM;
    if ((x = fj_get(root, "seed")) && x->type != FJ_NULL) {
        if (x->type != FJ_NUM || !x->is_int || x->i < 0 || x->i > 0xFFFFFFFEll)
            return BAD("seed", "'seed' must be an integer in [0, 4294967294]");
        sp.seed = (uint32_t)x->i;
    }
    gp->sp = sp;
    if ((x = fj_get(root, "max_output_tokens")) && x->type != FJ_NULL) {
        if (x->type != FJ_NUM || !x->is_int || x->i < 1 || x->i > INT32_MAX)
            return BAD("max_output_tokens", "'max_output_tokens' must be an integer >= 1");
        gp->max_tokens = (int32_t)x->i;
    }
    if ((x = fj_get(root, "stream")) && x->type != FJ_NULL && x->type != FJ_BOOL)
        return BAD("stream", "'stream' must be a boolean");
    *stream = x && x->type == FJ_BOOL && x->boolean;
    if ((x = fj_get(root, "previous_response_id")) && x->type != FJ_NULL)
        return BAD("previous_response_id", "'previous_response_id' is not supported: this server stores no responses");
    if ((x = fj_get(root, "store")) && x->type != FJ_NULL && x->type != FJ_BOOL) return BAD("store", "'store' must be a boolean");
    if ((x = fj_get(root, "truncation")) && x->type != FJ_NULL && !(x->type == FJ_STR && !strcmp(x->str, "disabled")))
        return BAD("truncation", "'truncation' other than disabled is not supported");
    if ((x = fj_get(root, "metadata")) && x->type != FJ_NULL && x->type != FJ_OBJ)
        return BAD("metadata", "'metadata' must be an object");
    if ((x = fj_get(root, "include")) && x->type != FJ_NULL && !(x->type == FJ_ARR && !x->len))
        return BAD("include", "'include' is not supported");
    gp->tool_format = -1;
    return 0;
}

/* ---- the answer ---- */

typedef struct rs_item {
    int call;       /* 0: the message, 1: a function call */
    char id[48];    /* msg_... / fc_... */
    char call_id[40];
    char name[65];
    fj_buf text;    /* the message's text, or the call's arguments */
    int done;
} rs_item;

typedef struct rs_stream {
    srv_sse sse; /* first: the shared part (phase 0: response.created and .in_progress are due) */
    srv_server *sv;
    char id[48];
    int64_t created;
    int64_t seq;
    int tools;
    srv_tool_stream ts;
    rs_item items[RS_MAX_ITEMS];
    size_t n_items;
    int open; /* the index of the item being written, -1: none */
} rs_stream;

static void item_json(fj_buf *b, const rs_item *it, int done) {
    if (it->call) {
        fj_raws(b, "{\"type\":\"function_call\",\"id\":");
        fj_strs(b, it->id);
        fj_raws(b, ",\"call_id\":");
        fj_strs(b, it->call_id);
        fj_raws(b, ",\"name\":");
        fj_strs(b, it->name);
        fj_raws(b, ",\"arguments\":");
        if (done) fj_str(b, it->text.p ? it->text.p : "", it->text.n);
        else fj_raws(b, "\"\"");
        fj_raws(b, done ? ",\"status\":\"completed\"}" : ",\"status\":\"in_progress\"}");
        return;
    }
    fj_raws(b, "{\"type\":\"message\",\"id\":");
    fj_strs(b, it->id);
    fj_raws(b, done ? ",\"status\":\"completed\"" : ",\"status\":\"in_progress\"");
    fj_raws(b, ",\"role\":\"assistant\",\"content\":[");
    if (done) {
        fj_raws(b, "{\"type\":\"output_text\",\"text\":");
        fj_str(b, it->text.p ? it->text.p : "", it->text.n);
        fj_raws(b, ",\"annotations\":[]}");
    }
    fj_raws(b, "]}");
}

/* The whole response object. */
static void response_json(fj_buf *b, srv_server *sv, const char *id, int64_t created, const srv_req *r,
                          const rs_item *items, size_t n, int final) {
    const int incomplete = final && r->finish == SRV_FINISH_LENGTH;
    fj_raws(b, "{\"id\":");
    fj_strs(b, id);
    fj_printf(b, ",\"object\":\"response\",\"created_at\":%" PRId64 ",\"status\":", created);
    fj_strs(b, !final ? "in_progress" : incomplete ? "incomplete" : "completed");
    fj_raws(b, ",\"model\":");
    fj_strs(b, sv->model_id);
    fj_raws(b, ",\"output\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) fj_raws(b, ",");
        item_json(b, &items[i], 1);
    }
    fj_raws(b, "],\"incomplete_details\":");
    fj_raws(b, incomplete ? "{\"reason\":\"max_output_tokens\"}" : "null");
    fj_raws(b, ",\"error\":null,\"parallel_tool_calls\":");
    fj_raws(b, r->gp.tool_format >= 0 ? "true" : "false");
    fj_raws(b, ",\"tool_choice\":\"auto\",\"tools\":[],\"temperature\":");
    fj_numf(b, r->gp.sp.temp);
    fj_raws(b, ",\"top_p\":");
    fj_numf(b, r->gp.sp.top_p);
    fj_raws(b, ",\"max_output_tokens\":");
    if (r->gp.max_tokens > 0) fj_int(b, r->gp.max_tokens);
    else fj_raws(b, "null");
    fj_raws(b, ",\"text\":{\"format\":{\"type\":\"text\"}},\"usage\":");
    if (final)
        fj_printf(b,
                  "{\"input_tokens\":%zu,\"input_tokens_details\":{\"cached_tokens\":%" PRId64 "},\"output_tokens\":%" PRId64
                  ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%" PRId64 "}",
                  r->n_prompt, r->n_cached, r->n_gen, (int64_t)r->n_prompt + r->n_gen);
    else fj_raws(b, "null");
    fj_raws(b, "}");
}

static void ev(rs_stream *s, const char *type) {
    fj_raws(&s->sse.out, "event: ");
    fj_raws(&s->sse.out, type);
    fj_raws(&s->sse.out, "\ndata: {\"type\":");
    fj_strs(&s->sse.out, type);
    fj_printf(&s->sse.out, ",\"sequence_number\":%" PRId64, s->seq++);
}

static void close_item(rs_stream *s) {
    if (s->open < 0) return;
    rs_item *it = &s->items[s->open];
    const int oi = s->open;
    if (it->call) {
        ev(s, "response.function_call_arguments.done");
        fj_raws(&s->sse.out, ",\"item_id\":");
        fj_strs(&s->sse.out, it->id);
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"arguments\":", oi);
        fj_str(&s->sse.out, it->text.p ? it->text.p : "", it->text.n);
        fj_raws(&s->sse.out, "}\n\n");
    } else {
        ev(s, "response.output_text.done");
        fj_raws(&s->sse.out, ",\"item_id\":");
        fj_strs(&s->sse.out, it->id);
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"content_index\":0,\"text\":", oi);
        fj_str(&s->sse.out, it->text.p ? it->text.p : "", it->text.n);
        fj_raws(&s->sse.out, "}\n\n");
        ev(s, "response.content_part.done");
        fj_raws(&s->sse.out, ",\"item_id\":");
        fj_strs(&s->sse.out, it->id);
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":", oi);
        fj_str(&s->sse.out, it->text.p ? it->text.p : "", it->text.n);
        fj_raws(&s->sse.out, ",\"annotations\":[]}}\n\n");
    }
    ev(s, "response.output_item.done");
    fj_printf(&s->sse.out, ",\"output_index\":%d,\"item\":", oi);
    item_json(&s->sse.out, it, 1);
    fj_raws(&s->sse.out, "}\n\n");
    it->done = 1;
    s->open = -1;
}

static rs_item *open_item(rs_stream *s, int call) {
    if (s->n_items == RS_MAX_ITEMS) return NULL;
    close_item(s);
    rs_item *it = &s->items[s->n_items];
    memset(it, 0, sizeof *it);
    it->call = call;
    char cid[40];
    srv_tool_call_id(s->sse.r->id ^ s->sv->id_salt, s->n_items, cid);
    snprintf(it->id, sizeof it->id, "%s_%s", call ? "fc" : "msg", cid + 5);
    s->open = (int)s->n_items++;
    return it;
}

static void rs_text(void *u, const char *t, size_t n) {
    rs_stream *s = u;
    if (!n) return;
    if (s->open < 0 || s->items[s->open].call) {
        rs_item *it = open_item(s, 0);
        if (!it) return;
        ev(s, "response.output_item.added");
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"item\":", s->open);
        item_json(&s->sse.out, it, 0);
        fj_raws(&s->sse.out, "}\n\n");
        ev(s, "response.content_part.added");
        fj_raws(&s->sse.out, ",\"item_id\":");
        fj_strs(&s->sse.out, it->id);
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\","
                           "\"annotations\":[]}}\n\n",
                  s->open);
    }
    rs_item *it = &s->items[s->open];
    fj_raw(&it->text, t, n);
    ev(s, "response.output_text.delta");
    fj_raws(&s->sse.out, ",\"item_id\":");
    fj_strs(&s->sse.out, it->id);
    fj_printf(&s->sse.out, ",\"output_index\":%d,\"content_index\":0,\"delta\":", s->open);
    fj_str(&s->sse.out, t, n);
    fj_raws(&s->sse.out, ",\"logprobs\":[]}\n\n");
}

static void rs_call(void *u, size_t index, const char *id, const char *name, const char *args, size_t n) {
    rs_stream *s = u;
    (void)index;
    if (id) {
        rs_item *it = open_item(s, 1);
        if (!it) return;
        snprintf(it->call_id, sizeof it->call_id, "%s", id);
        snprintf(it->name, sizeof it->name, "%s", name);
        ev(s, "response.output_item.added");
        fj_printf(&s->sse.out, ",\"output_index\":%d,\"item\":", s->open);
        item_json(&s->sse.out, it, 0);
        fj_raws(&s->sse.out, "}\n\n");
    }
    if (!n || s->open < 0) return;
    rs_item *it = &s->items[s->open];
    fj_raw(&it->text, args, n);
    ev(s, "response.function_call_arguments.delta");
    fj_raws(&s->sse.out, ",\"item_id\":");
    fj_strs(&s->sse.out, it->id);
    fj_printf(&s->sse.out, ",\"output_index\":%d,\"delta\":", s->open);
    fj_str(&s->sse.out, args, n);
    fj_raws(&s->sse.out, "}\n\n");
}

static void rs_produce(srv_sse *base) {
    rs_stream *s = (rs_stream *)base;
    srv_req *r = s->sse.r;
    if (s->sse.phase == 0) {
        for (int k = 0; k < 2; k++) {
            ev(s, k ? "response.in_progress" : "response.created");
            fj_raws(&s->sse.out, ",\"response\":");
            response_json(&s->sse.out, s->sv, s->id, s->created, r, NULL, 0, 0);
            fj_raws(&s->sse.out, "}\n\n");
        }
        s->sse.phase = 1;
        return;
    }
    srv_sse_news nw;
    srv_sse_take(&s->sse, &nw);
    const srv_finish f = nw.finish;
    const srv_tool_sink sink = {s, rs_text, rs_call};
    if (nw.n_text) {
        if (s->tools) srv_tool_stream_push(&s->ts, nw.text, nw.n_text, &sink);
        else rs_text(s, nw.text, nw.n_text);
    }
    free(nw.text);
    free(nw.lp);
    if (f == SRV_FINISH_NONE) return;
    if (f == SRV_FINISH_ERROR) {
        ev(s, "error");
        fj_raws(&s->sse.out, ",\"code\":\"server_error\",\"message\":");
        fj_strs(&s->sse.out, nw.error);
        fj_raws(&s->sse.out, ",\"param\":null}\n\n");
    } else {
        if (s->tools) srv_tool_stream_end(&s->ts, &sink);
        close_item(s);
        ev(s, f == SRV_FINISH_LENGTH ? "response.incomplete" : "response.completed");
        fj_raws(&s->sse.out, ",\"response\":");
        response_json(&s->sse.out, s->sv, s->id, s->created, r, s->items, s->n_items, 1);
        fj_raws(&s->sse.out, "}\n\n");
    }
    s->sse.phase = 2;
}

/* The dialect's own state (the shared part is srv_sse_free's). */
static void rs_destroy(srv_sse *base)
{
    rs_stream *s = (rs_stream *)base;
    srv_tool_stream_free(&s->ts);
    for (size_t i = 0; i < s->n_items; i++) fj_buf_free(&s->items[i].text);
}

void srv_api_responses(srv_server *sv, const srv_http_request *rq, srv_http_response *out) {
    atomic_fetch_add(&sv->requests_total, 1);
    char err[512];
    fj_limits lim = {.max_bytes = sv->o->max_body, .max_depth = 64};
    fj_doc *doc = fj_parse(rq->body, rq->body_len, &lim, err, sizeof err);
    conv *c = calloc(1, sizeof *c);
    rs_stream *s = calloc(1, sizeof *s);
    srv_tools tools = {0};
    srv_gen_params gp = {.tool_format = -1};
    fc_token *toks = NULL;
    size_t n_toks = 0;
    srv_req *r = NULL;
    int stream = 0;
    if (!c || !s) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    if (!doc || fj_root(doc)->type != FJ_OBJ) {
        BAD(NULL, "the request body is %s", doc ? "not a JSON object" : err);
        goto done;
    }
    const fj_val *root = fj_root(doc);
    static const char *const known[] = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
                                        "stream", "tools", "tool_choice", "parallel_tool_calls", "text", "store",
                                        "metadata", "user", "seed", "previous_response_id", "truncation", "include", NULL};
    if (check_keys(root, "", known, out) || read_params(root, &gp, &stream, out) || read_input(c, root, out) ||
        read_tools(root, &tools, out) || read_format(sv, root, &gp.grammar, out))
        goto done;
    if (tools.n && !tools.none) {
        if (gp.grammar) {
            BAD("tools", "'tools' and 'text.format' both constrain the output: give one");
            goto done;
        }
        pthread_mutex_lock(&sv->tok_mu);
        fc_ctx_clear_error(sv->tok_ctx);
        gp.grammar = fc_chat_tools_grammar(sv->tok_ctx, sv->tmpl, (const char *const *)tools.defs, tools.n, &tools.choice,
                                           &gp.trigger);
        snprintf(err, sizeof err, "%s", fc_ctx_error(sv->tok_ctx));
        pthread_mutex_unlock(&sv->tok_mu);
        if (!gp.grammar) {
            BAD("tools", "'tools': %s", err);
            goto done;
        }
        gp.tool_format = (int)fc_chat_template_tool_format(sv->tmpl);
    }
    {
        const fc_chat_render_options ro = {.flags = FC_CHAT_ADD_GENERATION_PROMPT,
                                           .tools = (const char *const *)tools.defs, .n_tools = tools.n};
        pthread_mutex_lock(&sv->tok_mu);
        fc_ctx_clear_error(sv->tok_ctx);
        const fc_status st = fc_chat_tokenize_ex(sv->tok_ctx, sv->tok, sv->tmpl, c->m, c->n, &ro, &toks, &n_toks);
        snprintf(err, sizeof err, "%s", fc_ctx_error(sv->tok_ctx));
        pthread_mutex_unlock(&sv->tok_mu);
        if (st != FC_OK) {
            BAD("input", "the conversation cannot be rendered: %s", err);
            goto done;
        }
    }
    if ((int64_t)n_toks > sv->n_ctx) {
        srv_api_error(out, 400, "invalid_request_error", "input",
                      "the input is %zu tokens, longer than the slot's context (%" PRId64 " tokens)", n_toks, sv->n_ctx);
        goto done;
    }
    r = srv_req_new(toks, n_toks, &gp);
    if (!r) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    toks = NULL;
    gp.grammar = NULL;
    r->id = atomic_fetch_add(&sv->next_id, 1) + 1;
    int q = srv_engine_submit(sv->eng, r);
    if (q) {
        out->retry_after = 1;
        srv_api_error(out, 503, "unavailable_error", NULL, "%s", q == -1 ? "the queue is full" : "the server is stopping");
        goto done;
    }
    s->sv = sv, s->open = -1, s->created = (int64_t)time(NULL);
    s->sse = (srv_sse){.r = r, .fd = rq->fd, .produce = rs_produce, .destroy = rs_destroy};
    snprintf(s->id, sizeof s->id, "resp_%016" PRIx64 "%08" PRIx64, sv->id_salt, r->id);
    if (r->gp.tool_format >= 0) {
        s->tools = 1;
        srv_tool_stream_init(&s->ts, sv->tmpl, r->id ^ sv->id_salt);
    }
    if (stream) {
        r = NULL; /* the stream holds it */
        out->status = 200;
        out->content_type = "text/event-stream";
        out->stream = (srv_http_stream){s, srv_sse_read, srv_sse_free};
        s = NULL;
        goto done;
    }
    if (srv_wait_news(r, 0, 0, rq->fd, 1)) {
        srv_req_cancel(r);
        srv_api_error(out, 499, "invalid_request_error", NULL, "the client closed the connection");
        goto done;
    }
    if (r->finish == SRV_FINISH_ERROR) {
        srv_api_error(out, 500, "server_error", NULL, "%s", r->error);
        goto done;
    }
    /* the same split as the stream's, all at once */
    {
        const srv_tool_sink sink = {s, rs_text, rs_call};
        if (s->tools) {
            srv_tool_stream_push(&s->ts, r->text ? r->text : "", r->n_text, &sink);
            srv_tool_stream_end(&s->ts, &sink);
        } else {
            rs_text(s, r->text ? r->text : "", r->n_text);
        }
        close_item(s);
        fj_buf b = {0};
        response_json(&b, sv, s->id, s->created, r, s->items, s->n_items, 1);
        if (b.oom) {
            fj_buf_free(&b);
            srv_api_error(out, 500, "server_error", NULL, "out of memory");
            goto done;
        }
        out->status = 200;
        out->body = b.p;
        out->len = b.n;
    }
done:
    if (out->status >= 400) atomic_fetch_add(&sv->requests_errors, 1);
    if (s) { /* not handed to the connection: its request is released below */
        fj_buf_free(&s->sse.out);
        rs_destroy(&s->sse);
        free(s);
    }
    for (size_t k = 0; k < gp.n_stop; k++) free(gp.stop[k]);
    fc_grammar_free(gp.grammar);
    srv_tools_free(&tools);
    if (c)
        for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c);
    free(toks);
    srv_req_release(r);
    fj_free(doc);
}
