/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: the endpoints — OpenAI's chat and text completions, the
 * model list, llama-server's health, props, slots, metrics, tokenize and
 * detokenize, and the chat page.
 *
 * Requests are checked field by field before anything runs: a field of the
 * wrong type or out of range, an unknown field, or one we cannot honour
 * (n > 1, tools, a schema keyword the grammar engine lacks) is a 400 naming it in
 * `param` — a request is never run with part of it silently dropped.
 * Errors have OpenAI's shape: {"error": {"message", "type", "param", "code"}}. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fucina/fucina.h"
#include "fucina/grammar.h"
#include "fucina/tokenizer.h"
#include "io/json_value.h"
#include "serve/server.h"
#include "serve/sse.h"
#include "serve/tools.h"

/* ---- errors ---- */
static void set_json(srv_http_response *out, int status, fj_buf *b) {
    out->status = status;
    if (b->oom) {
        fj_buf_free(b);
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                                  "\"code\":null}}";
        out->status = 500;
        out->body = strdup(oom);
        out->len = out->body ? strlen(oom) : 0;
        return;
    }
    out->body = b->p;
    out->len = b->n;
    *b = (fj_buf){0};
}

int srv_api_error(srv_http_response *out, int status, const char *type, const char *param, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fj_buf b = {0};
    fj_raws(&b, "{\"error\":{");
    fj_key(&b, "message");
    fj_strs(&b, msg);
    fj_raws(&b, ",");
    fj_key(&b, "type");
    fj_strs(&b, type);
    fj_raws(&b, ",");
    fj_key(&b, "param");
    if (param) fj_strs(&b, param);
    else fj_raws(&b, "null");
    fj_raws(&b, ",\"code\":");
    /* OpenAI's codes for the cases clients branch on */
    const char *code = status == 401   ? "invalid_api_key"
                       : status == 413 ? "request_too_large"
                       : status == 404 ? "not_found"
                                       : NULL;
    if (strstr(msg, "longer than the slot's context")) code = "context_length_exceeded";
    if (code) fj_strs(&b, code);
    else fj_raws(&b, "null");
    fj_raws(&b, "}}");
    set_json(out, status, &b);
    return -1;
}

#define BAD(param, ...) srv_api_error(out, 400, "invalid_request_error", param, __VA_ARGS__)

/* ---- reading fields ---- */
static int check_known(const fj_val *root, const char *const *known, srv_http_response *out) {
    for (size_t i = 0; i < root->len; i++) {
        int ok = 0;
        for (const char *const *k = known; *k; k++)
            if (!strcmp(root->keys[i], *k)) ok = 1;
        if (!ok) return BAD(root->keys[i], "unrecognized request argument '%s'", root->keys[i]);
    }
    return 0;
}

/* A number field in [lo, hi]; absent (or null) leaves *v. */
static int get_num(const fj_val *root, const char *key, double lo, double hi, double *v, srv_http_response *out) {
    const fj_val *x = fj_get(root, key);
    if (!x || x->type == FJ_NULL) return 0;
    if (x->type != FJ_NUM) return BAD(key, "'%s' must be a number, not %s", key, fj_type_name(x->type));
    if (!isfinite(x->num) || x->num < lo || x->num > hi)
        return BAD(key, "'%s' is %g: it must be in [%g, %g]", key, x->num, lo, hi);
    *v = x->num;
    return 0;
}

static int get_int(const fj_val *root, const char *key, int64_t lo, int64_t hi, int64_t *v, srv_http_response *out) {
    const fj_val *x = fj_get(root, key);
    if (!x || x->type == FJ_NULL) return 0;
    if (x->type != FJ_NUM || !x->is_int)
        return BAD(key, "'%s' must be an integer, not %s", key,
                   x->type == FJ_NUM ? "a fraction or an out-of-range number" : fj_type_name(x->type));
    if (x->i < lo || x->i > hi)
        return BAD(key, "'%s' is %" PRId64 ": it must be in [%" PRId64 ", %" PRId64 "]", key, x->i, lo, hi);
    *v = x->i;
    return 0;
}

static int get_bool(const fj_val *root, const char *key, int *v, srv_http_response *out) {
    const fj_val *x = fj_get(root, key);
    if (!x || x->type == FJ_NULL) return 0;
    if (x->type != FJ_BOOL) return BAD(key, "'%s' must be a boolean, not %s", key, fj_type_name(x->type));
    *v = x->boolean;
    return 0;
}

/* ---- generation parameters (both completion endpoints) ---- */
typedef struct gen_req {
    srv_gen_params gp;
    srv_tools tools; /* chat: the tools the model may call */
    int stream, include_usage, chat;
    int cache_prompt;
    unsigned chat_flags;
} gen_req;

/* Compile a grammar (GBNF text, or a schema value) under the tokenizer
 * lock (its context reports the error); a 400 naming param otherwise. */
static int compile_constraint(srv_server *sv, const char *param, const char *gbnf, const fj_val *schema,
                              fc_grammar **g, srv_http_response *out) {
    fj_buf b = {0};
    if (schema) {
        fj_value(&b, schema);
        if (b.oom) {
            fj_buf_free(&b);
            return srv_api_error(out, 500, "server_error", NULL, "out of memory"), -1;
        }
    }
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    *g = schema ? fc_grammar_from_json_schema(sv->tok_ctx, b.p, b.n)
         : gbnf ? fc_grammar_parse(sv->tok_ctx, gbnf, strlen(gbnf), NULL)
                : fc_grammar_json(sv->tok_ctx, true);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    fj_buf_free(&b);
    if (!*g) return BAD(param, "'%s': %s", param, why);
    return 0;
}

/* The output's constraint: OpenAI's response_format (text, json_object,
 * json_schema {name, schema, strict, description}) or llama-server's
 * "grammar" (GBNF) and "json_schema" (a schema); at most one of them. */
static int parse_constraint(srv_server *sv, const fj_val *root, fc_grammar **g, srv_http_response *out) {
    const fj_val *rf = fj_get(root, "response_format"), *gr = fj_get(root, "grammar"), *js = fj_get(root, "json_schema");
    if (rf && rf->type == FJ_NULL) rf = NULL;
    if (gr && gr->type == FJ_NULL) gr = NULL;
    if (js && js->type == FJ_NULL) js = NULL;
    if (rf) {
        if (rf->type != FJ_OBJ) return BAD("response_format", "'response_format' must be an object");
        const fj_val *t = fj_get(rf, "type");
        if (!t || t->type != FJ_STR)
            return BAD("response_format", "'response_format.type' must be one of text, json_object, json_schema");
        if (!strcmp(t->str, "text")) {
            static const char *const known[] = {"type", NULL};
            if (check_known(rf, known, out)) return -1;
            rf = NULL;
        } else if (!strcmp(t->str, "json_object")) {
            /* llama-server also takes a schema here */
            static const char *const known[] = {"type", "schema", NULL};
            if (check_known(rf, known, out)) return -1;
        } else if (!strcmp(t->str, "json_schema")) {
            static const char *const known[] = {"type", "json_schema", NULL};
            if (check_known(rf, known, out)) return -1;
        } else {
            return BAD("response_format", "'response_format.type' is '%s': it must be one of text, json_object, "
                       "json_schema", t->str);
        }
    }
    if ((rf != NULL) + (gr != NULL) + (js != NULL) > 1)
        return BAD(rf ? "response_format" : "grammar", "'%s' and '%s' both constrain the output: give one",
                   rf ? "response_format" : "grammar", js ? "json_schema" : "grammar");
    if (gr) {
        if (gr->type != FJ_STR) return BAD("grammar", "'grammar' must be a string (GBNF), not %s", fj_type_name(gr->type));
        if (memchr(gr->str, 0, gr->len)) return BAD("grammar", "'grammar' contains a NUL character");
        return compile_constraint(sv, "grammar", gr->str, NULL, g, out);
    }
    if (js) {
        if (js->type != FJ_OBJ && js->type != FJ_BOOL)
            return BAD("json_schema", "'json_schema' must be a schema (an object), not %s", fj_type_name(js->type));
        return compile_constraint(sv, "json_schema", NULL, js, g, out);
    }
    if (!rf) return 0;
    const fj_val *t = fj_get(rf, "type");
    if (!strcmp(t->str, "json_object")) {
        const fj_val *sc = fj_get(rf, "schema");
        if (sc && sc->type != FJ_NULL) return compile_constraint(sv, "response_format.schema", NULL, sc, g, out);
        return compile_constraint(sv, "response_format", NULL, NULL, g, out);
    }
    const fj_val *j = fj_get(rf, "json_schema");
    if (!j || j->type != FJ_OBJ)
        return BAD("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
    static const char *const known[] = {"name", "schema", "strict", "description", NULL};
    if (check_known(j, known, out)) return -1;
    const fj_val *name = fj_get(j, "name"), *strict = fj_get(j, "strict"), *desc = fj_get(j, "description");
    if (name && name->type != FJ_STR && name->type != FJ_NULL)
        return BAD("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
    if (strict && strict->type != FJ_BOOL && strict->type != FJ_NULL)
        return BAD("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
    if (desc && desc->type != FJ_STR && desc->type != FJ_NULL)
        return BAD("response_format.json_schema.description",
                   "'response_format.json_schema.description' must be a string");
    const fj_val *sc = fj_get(j, "schema");
    if (!sc || sc->type == FJ_NULL) /* OpenAI: no schema is any JSON object */
        return compile_constraint(sv, "response_format.json_schema", NULL, NULL, g, out);
    return compile_constraint(sv, "response_format.json_schema.schema", NULL, sc, g, out);
}

static int parse_gen(srv_server *sv, const fj_val *root, gen_req *g, srv_http_response *out) {
    fc_sampler_params sp = fc_sampler_default_params();
    double d;
    int64_t i;
    d = sp.temp;
    if (get_num(root, "temperature", 0, 100, &d, out)) return -1;
    sp.temp = (float)d;
    d = sp.top_p;
    if (get_num(root, "top_p", 0, 1, &d, out)) return -1;
    if (d <= 0) return BAD("top_p", "'top_p' is 0: it must be in (0, 1]");
    sp.top_p = (float)d;
    i = sp.top_k;
    if (get_int(root, "top_k", 0, INT32_MAX, &i, out)) return -1;
    sp.top_k = (int32_t)i;
    d = sp.min_p;
    if (get_num(root, "min_p", 0, 1, &d, out)) return -1;
    sp.min_p = (float)d;
    d = sp.penalty_present;
    if (get_num(root, "presence_penalty", -2, 2, &d, out)) return -1;
    sp.penalty_present = (float)d;
    d = sp.penalty_freq;
    if (get_num(root, "frequency_penalty", -2, 2, &d, out)) return -1;
    sp.penalty_freq = (float)d;
    d = sp.penalty_repeat;
    if (get_num(root, "repeat_penalty", 0, 100, &d, out)) return -1;
    if (d <= 0) return BAD("repeat_penalty", "'repeat_penalty' is 0: it must be > 0");
    sp.penalty_repeat = (float)d;
    i = sp.penalty_last_n;
    if (get_int(root, "repeat_last_n", -1, INT32_MAX, &i, out)) return -1;
    sp.penalty_last_n = i < 0 ? (int32_t)sv->n_ctx : (int32_t)i;
    i = -1;
    if (get_int(root, "seed", -1, UINT32_MAX, &i, out)) return -1;
    sp.seed = i < 0 ? FC_SAMPLER_SEED_RANDOM : (uint32_t)i;
    g->gp.sp = sp;

    int64_t mt = -1;
    if (get_int(root, "max_tokens", 1, INT32_MAX, &mt, out)) return -1;
    int64_t mct = -1;
    if (get_int(root, "max_completion_tokens", 1, INT32_MAX, &mct, out)) return -1;
    if (mct > 0) mt = mct;
    g->gp.max_tokens = mt > 0 ? (int32_t)mt : 0;

    int64_t n = 1;
    if (get_int(root, "n", 1, INT32_MAX, &n, out)) return -1;
    if (n != 1) return BAD("n", "'n' is %" PRId64 ": only one choice per request is supported", n);

    const fj_val *stop = fj_get(root, "stop");
    if (stop && stop->type == FJ_STR) {
        if (stop->len) g->gp.stop[g->gp.n_stop++] = strdup(stop->str);
    } else if (stop && stop->type == FJ_ARR) {
        if (stop->len > SRV_MAX_STOP) return BAD("stop", "'stop' has %zu strings: at most %d", stop->len, SRV_MAX_STOP);
        for (size_t k = 0; k < stop->len; k++) {
            if (stop->items[k]->type != FJ_STR)
                return BAD("stop", "'stop[%zu]' must be a string, not %s", k, fj_type_name(stop->items[k]->type));
            if (stop->items[k]->len) g->gp.stop[g->gp.n_stop++] = strdup(stop->items[k]->str);
        }
    } else if (stop && stop->type != FJ_NULL) {
        return BAD("stop", "'stop' must be a string or an array of strings, not %s", fj_type_name(stop->type));
    }
    for (size_t k = 0; k < g->gp.n_stop; k++)
        if (!g->gp.stop[k]) return srv_api_error(out, 500, "server_error", NULL, "out of memory"), -1;

    if (get_bool(root, "stream", &g->stream, out)) return -1;
    const fj_val *so = fj_get(root, "stream_options");
    if (so && so->type != FJ_NULL) {
        if (so->type != FJ_OBJ) return BAD("stream_options", "'stream_options' must be an object");
        static const char *const known[] = {"include_usage", NULL};
        if (check_known(so, known, out)) return -1;
        if (get_bool(so, "include_usage", &g->include_usage, out)) return -1;
    }
    g->cache_prompt = 1;
    if (get_bool(root, "cache_prompt", &g->cache_prompt, out)) return -1;
    g->gp.no_cache = !g->cache_prompt;

    const fj_val *x;
    g->gp.tool_format = -1;
    if (parse_constraint(sv, root, &g->gp.grammar, out)) return -1;
    if (g->chat) {
        if (srv_tools_parse(root, &g->tools, out)) return -1;
        if (g->tools.n && !g->tools.none) {
            if (g->gp.grammar)
                return BAD("tools", "'tools' and a response format or grammar both constrain the reply: give one");
            /* the calls' grammar: from the start, or (Hermes, auto) from the model's <tool_call> on */
            pthread_mutex_lock(&sv->tok_mu);
            fc_ctx_clear_error(sv->tok_ctx);
            g->gp.grammar = fc_chat_tools_grammar(sv->tok_ctx, sv->tmpl, (const char *const *)g->tools.defs,
                                                  g->tools.n, &g->tools.choice, &g->gp.trigger);
            char why[512];
            snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
            pthread_mutex_unlock(&sv->tok_mu);
            if (!g->gp.grammar) return BAD("tools", "'tools': %s", why);
            g->gp.tool_format = (int)fc_chat_template_tool_format(sv->tmpl);
        }
    }
    if ((x = fj_get(root, "logit_bias")) && x->type != FJ_NULL && !(x->type == FJ_OBJ && x->len == 0))
        return BAD("logit_bias", "'logit_bias' is not supported");
    if ((x = fj_get(root, "model")) && x->type != FJ_STR && x->type != FJ_NULL)
        return BAD("model", "'model' must be a string, not %s", fj_type_name(x->type));
    if ((x = fj_get(root, "user")) && x->type != FJ_STR && x->type != FJ_NULL)
        return BAD("user", "'user' must be a string, not %s", fj_type_name(x->type));
    return 0;
}

/* ---- tokens of the prompt ---- */
static int role_of(const char *s, fc_chat_role *r) {
    if (!strcmp(s, "system") || !strcmp(s, "developer")) *r = FC_CHAT_SYSTEM;
    else if (!strcmp(s, "user")) *r = FC_CHAT_USER;
    else if (!strcmp(s, "assistant")) *r = FC_CHAT_ASSISTANT;
    else if (!strcmp(s, "tool")) *r = FC_CHAT_TOOL;
    else return -1;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text"} parts
 * (joined). *owned receives a malloc'd string when parts were joined. */
static int message_content(const fj_val *c, size_t i, const char **text, char **owned, srv_http_response *out) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (c && c->type == FJ_STR) {
        if (memchr(c->str, 0, c->len)) return BAD(param, "'%s' contains a NUL character", param);
        *text = c->str;
        return 0;
    }
    if (!c || c->type != FJ_ARR)
        return BAD(param, "'%s' must be a string or an array of text parts, not %s", param,
                   c ? fj_type_name(c->type) : "missing");
    fj_buf b = {0};
    fj_raw(&b, "", 0);
    for (size_t k = 0; k < c->len; k++) {
        const fj_val *p = c->items[k];
        const fj_val *t = fj_get(p, "type"), *tx = fj_get(p, "text");
        if (!t || t->type != FJ_STR || strcmp(t->str, "text") || !tx || tx->type != FJ_STR ||
            memchr(tx->str, 0, tx->len)) {
            fj_buf_free(&b);
            return BAD(param, "'%s[%zu]' must be {\"type\": \"text\", \"text\": STRING} (other parts are not supported)",
                       param, k);
        }
        fj_raw(&b, tx->str, tx->len);
    }
    if (b.oom) {
        fj_buf_free(&b);
        return srv_api_error(out, 500, "server_error", NULL, "out of memory"), -1;
    }
    *owned = b.p;
    *text = b.p;
    return 0;
}

/* An assistant message's tool_calls: [{"id", "type": "function", "function":
 * {"name", "arguments": a JSON text (or an object)}}] into *calls (malloc'd;
 * the strings point into the request, or into *owned for objects). */
static int message_calls(const fj_val *tc, size_t i, fc_chat_tool_call **calls, size_t *n, char ***owned,
                         srv_http_response *out) {
    char param[96];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (tc->type != FJ_ARR) return BAD(param, "'%s' must be an array", param);
    *calls = calloc(tc->len ? tc->len : 1, sizeof **calls);
    *owned = calloc(tc->len ? tc->len : 1, sizeof **owned);
    if (!*calls || !*owned) return srv_api_error(out, 500, "server_error", NULL, "out of memory");
    for (size_t k = 0; k < tc->len; k++) {
        const fj_val *c = tc->items[k], *f = fj_get(c, "function");
        const fj_val *id = fj_get(c, "id"), *name = f ? fj_get(f, "name") : NULL, *args = f ? fj_get(f, "arguments") : NULL;
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, k);
        if (c->type != FJ_OBJ || !f || f->type != FJ_OBJ || !name || name->type != FJ_STR || !name->len ||
            memchr(name->str, 0, name->len))
            return BAD(param, "'%s' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}",
                       param);
        if (id && id->type != FJ_STR && id->type != FJ_NULL) return BAD(param, "'%s.id' must be a string", param);
        const char *a = "{}";
        if (args && args->type == FJ_STR) {
            if (memchr(args->str, 0, args->len)) return BAD(param, "'%s.function.arguments' contains a NUL", param);
            a = args->str;
        } else if (args && args->type == FJ_OBJ) {
            fj_buf b = {0};
            fj_value(&b, args);
            fj_raw(&b, "", 1);
            if (b.oom) {
                fj_buf_free(&b);
                return srv_api_error(out, 500, "server_error", NULL, "out of memory");
            }
            a = (*owned)[k] = b.p;
        } else if (args && args->type != FJ_NULL) {
            return BAD(param, "'%s.function.arguments' must be a JSON text (a string)", param);
        }
        (*calls)[k] = (fc_chat_tool_call){.id = id && id->type == FJ_STR ? id->str : NULL, .name = name->str, .arguments = a};
        *n = k + 1; /* the owned strings of calls [0, *n) are freed by the caller */
    }
    return 0;
}

/* Render and tokenize the conversation: *toks (malloc'd) and *n. */
static int chat_tokens(srv_server *sv, const fj_val *root, unsigned flags, const srv_tools *tools, fc_token **toks,
                       size_t *n, srv_http_response *out) {
    const fj_val *msgs = fj_get(root, "messages");
    if (!msgs) return BAD("messages", "'messages' is required");
    if (msgs->type != FJ_ARR) return BAD("messages", "'messages' must be an array, not %s", fj_type_name(msgs->type));
    if (!msgs->len) return BAD("messages", "'messages' is empty");
    fc_chat_message *m = calloc(msgs->len, sizeof *m);
    char **owned = calloc(msgs->len, sizeof *owned);
    fc_chat_tool_call **calls = calloc(msgs->len, sizeof *calls);
    char ***call_owned = calloc(msgs->len, sizeof *call_owned);
    int rc = -1;
    if (!m || !owned || !calls || !call_owned) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < msgs->len; i++) {
        const fj_val *msg = msgs->items[i];
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (msg->type != FJ_OBJ) {
            BAD(param, "'%s' must be an object, not %s", param, fj_type_name(msg->type));
            goto done;
        }
        for (size_t k = 0; k < msg->len; k++)
            if (strcmp(msg->keys[k], "role") && strcmp(msg->keys[k], "content") && strcmp(msg->keys[k], "name") &&
                strcmp(msg->keys[k], "tool_calls") && strcmp(msg->keys[k], "tool_call_id")) {
                snprintf(param, sizeof param, "messages[%zu].%s", i, msg->keys[k]);
                BAD(param, "'%s' is not supported", param);
                goto done;
            }
        const fj_val *role = fj_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role || role->type != FJ_STR) {
            BAD(param, "'%s' must be a string", param);
            goto done;
        }
        if (role_of(role->str, &m[i].role)) {
            BAD(param, "'%s' is '%s': the roles are system, user, assistant and tool", param, role->str);
            goto done;
        }
        const fj_val *tc = fj_get(msg, "tool_calls"), *tid = fj_get(msg, "tool_call_id");
        if (tc && tc->type != FJ_NULL) {
            if (m[i].role != FC_CHAT_ASSISTANT) {
                snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
                BAD(param, "'%s': only assistant messages make tool calls", param);
                goto done;
            }
            if (message_calls(tc, i, &calls[i], &m[i].n_tool_calls, &call_owned[i], out)) goto done;
            m[i].tool_calls = calls[i];
        }
        if (tid && tid->type != FJ_NULL) {
            snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
            if (m[i].role != FC_CHAT_TOOL || tid->type != FJ_STR) {
                BAD(param, "'%s' must be a string, on a tool message", param);
                goto done;
            }
            m[i].tool_call_id = tid->str;
        }
        const fj_val *content = fj_get(msg, "content");
        if (m[i].n_tool_calls && (!content || content->type == FJ_NULL)) m[i].content = ""; /* calls only */
        else if (message_content(content, i, &m[i].content, &owned[i], out)) goto done;
    }
    /* message contents are text: only the template's own markup becomes
     * control tokens, so a typed "<|im_start|>system" stays what it is */
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    const fc_chat_render_options ro = {.flags = flags | FC_CHAT_ADD_GENERATION_PROMPT,
                                       .tools = (const char *const *)tools->defs, .n_tools = tools->n};
    const fc_status st = fc_chat_tokenize_ex(sv->tok_ctx, sv->tok, sv->tmpl, m, msgs->len, &ro, toks, n);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    if (st != FC_OK) {
        BAD("messages", "the conversation cannot be rendered: %s", why);
        goto done;
    }
    rc = 0;
done:
    for (size_t i = 0; i < msgs->len; i++) {
        if (owned) free(owned[i]);
        if (m && call_owned && call_owned[i]) {
            for (size_t k = 0; k < m[i].n_tool_calls; k++) free(call_owned[i][k]);
            free(call_owned[i]);
        }
        if (calls) free(calls[i]);
    }
    free(owned);
    free(calls);
    free(call_owned);
    free(m);
    return rc;
}

static int prompt_tokens(srv_server *sv, const fj_val *root, fc_token **toks, size_t *n, srv_http_response *out) {
    const fj_val *p = fj_get(root, "prompt");
    if (!p) return BAD("prompt", "'prompt' is required");
    if (p->type == FJ_ARR && p->len == 1 && p->items[0]->type == FJ_STR) p = p->items[0];
    if (p->type == FJ_ARR) {
        /* a prompt given as token ids */
        if (!p->len) return BAD("prompt", "'prompt' is empty");
        *toks = malloc(p->len * sizeof **toks);
        if (!*toks) return srv_api_error(out, 500, "server_error", NULL, "out of memory"), -1;
        for (size_t i = 0; i < p->len; i++) {
            const fj_val *t = p->items[i];
            if (t->type != FJ_NUM || !t->is_int || t->i < 0 || t->i >= sv->n_vocab) {
                free(*toks);
                *toks = NULL;
                return BAD("prompt", "'prompt[%zu]' must be a token id in [0, %" PRId64 ") (or the prompt one string)",
                           i, sv->n_vocab);
            }
            (*toks)[i] = (fc_token)t->i;
        }
        *n = p->len;
        return 0;
    }
    if (p->type != FJ_STR) return BAD("prompt", "'prompt' must be a string or an array of token ids");
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    const fc_status st =
        fc_tokenize(sv->tok_ctx, sv->tok, p->str, p->len, FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, toks, n);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    if (st != FC_OK) return BAD("prompt", "the prompt cannot be tokenized: %s", why);
    if (!*n) return BAD("prompt", "'prompt' has no tokens");
    return 0;
}

/* ---- responses ---- */
static void piece_json(srv_server *sv, fj_buf *b, int32_t token, int with_bytes) {
    const char *p = "";
    size_t n = 0;
    pthread_mutex_lock(&sv->tok_mu);
    if (fc_token_piece(sv->tok_ctx, sv->tok, token, 0, &p, &n) != FC_OK) p = "", n = 0;
    fc_ctx_clear_error(sv->tok_ctx);
    fj_key(b, "token");
    fj_str(b, p, n);
    if (with_bytes) {
        fj_raws(b, ",\"bytes\":[");
        for (size_t i = 0; i < n; i++) fj_printf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)p[i]);
        fj_raws(b, "]");
    }
    pthread_mutex_unlock(&sv->tok_mu);
}

/* OpenAI's chat logprobs {"content": [...]}, or the legacy completion form. */
static void logprobs_json(srv_server *sv, fj_buf *b, const srv_logprob *lp, size_t n, int chat) {
    if (chat) {
        fj_raws(b, "{\"content\":[");
        for (size_t i = 0; i < n; i++) {
            fj_raws(b, i ? ",{" : "{");
            piece_json(sv, b, lp[i].token, 1);
            fj_raws(b, ",\"logprob\":");
            fj_numf(b, lp[i].logprob);
            fj_raws(b, ",\"top_logprobs\":[");
            for (int k = 0; k < lp[i].n_top; k++) {
                fj_raws(b, k ? ",{" : "{");
                piece_json(sv, b, lp[i].top[k].token, 1);
                fj_raws(b, ",\"logprob\":");
                fj_numf(b, lp[i].top[k].logprob);
                fj_raws(b, "}");
            }
            fj_raws(b, "]}");
        }
        fj_raws(b, "]}");
        return;
    }
    fj_raws(b, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        const char *p = "";
        size_t len = 0;
        pthread_mutex_lock(&sv->tok_mu);
        if (fc_token_piece(sv->tok_ctx, sv->tok, lp[i].token, 0, &p, &len) != FC_OK) p = "", len = 0;
        fc_ctx_clear_error(sv->tok_ctx);
        if (i) fj_raws(b, ",");
        fj_str(b, p, len);
        pthread_mutex_unlock(&sv->tok_mu);
    }
    fj_raws(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) fj_raws(b, ",");
        fj_numf(b, lp[i].logprob);
    }
    fj_raws(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        fj_raws(b, i ? ",{" : "{");
        for (int k = 0; k < lp[i].n_top; k++) {
            const char *p = "";
            size_t len = 0;
            pthread_mutex_lock(&sv->tok_mu);
            if (fc_token_piece(sv->tok_ctx, sv->tok, lp[i].top[k].token, 0, &p, &len) != FC_OK) p = "", len = 0;
            fc_ctx_clear_error(sv->tok_ctx);
            if (k) fj_raws(b, ",");
            fj_str(b, p, len);
            pthread_mutex_unlock(&sv->tok_mu);
            fj_raws(b, ":");
            fj_numf(b, lp[i].top[k].logprob);
        }
        fj_raws(b, "}");
    }
    fj_raws(b, "]}");
}

static void usage_json(fj_buf *b, const srv_req *r) {
    fj_printf(b,
              "\"usage\":{\"prompt_tokens\":%zu,\"completion_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64
              ",\"prompt_tokens_details\":{\"cached_tokens\":%" PRId64 "}}",
              r->n_prompt, r->n_gen, (int64_t)r->n_prompt + r->n_gen, r->n_cached);
}

/* llama-server's timings object. */
static void timings_json(fj_buf *b, const srv_req *r) {
    const int64_t pn = (int64_t)r->n_prompt - r->n_cached;
    fj_printf(b, "\"timings\":{\"cache_n\":%" PRId64 ",\"prompt_n\":%" PRId64 ",\"prompt_ms\":", r->n_cached, pn);
    fj_num(b, r->t_prompt_ms);
    fj_raws(b, ",\"prompt_per_token_ms\":");
    fj_num(b, pn > 0 ? r->t_prompt_ms / (double)pn : 0);
    fj_raws(b, ",\"prompt_per_second\":");
    fj_num(b, r->t_prompt_ms > 0 ? 1e3 * (double)pn / r->t_prompt_ms : 0);
    fj_printf(b, ",\"predicted_n\":%" PRId64 ",\"predicted_ms\":", r->n_gen);
    fj_num(b, r->t_gen_ms);
    fj_raws(b, ",\"predicted_per_token_ms\":");
    fj_num(b, r->n_gen > 1 ? r->t_gen_ms / (double)(r->n_gen - 1) : 0);
    fj_raws(b, ",\"predicted_per_second\":");
    /* the first token comes with the prompt: the rate is over the others */
    fj_num(b, r->t_gen_ms > 0 && r->n_gen > 1 ? 1e3 * (double)(r->n_gen - 1) / r->t_gen_ms : 0);
    fj_raws(b, "}");
}

static const char *finish_name(srv_finish f) {
    switch (f) {
    case SRV_FINISH_STOP: return "stop";
    case SRV_FINISH_LENGTH: return "length";
    case SRV_FINISH_NONE:
    case SRV_FINISH_ERROR: return NULL;
    }
    return NULL;
}

/* The head every response object of this request shares. */
static void head_json(srv_server *sv, fj_buf *b, const char *id, int64_t created, const char *object) {
    fj_raws(b, "{\"id\":");
    fj_strs(b, id);
    fj_raws(b, ",\"object\":");
    fj_strs(b, object);
    fj_printf(b, ",\"created\":%" PRId64 ",\"model\":", created);
    fj_strs(b, sv->model_id);
    fj_raws(b, ",\"system_fingerprint\":");
    fj_strs(b, "fucina-" FUCINA_VERSION_STRING);
}

/* Wait until r has text, log-probabilities or an end beyond what was seen
 * (until_end: until it ends). -1 when the client hung up meanwhile: the
 * socket is checked every 50 ms of waiting, however often tokens arrive. */
int srv_wait_news(srv_req *r, size_t seen_text, size_t seen_lp, int fd, int until_end) {
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->finish != SRV_FINISH_NONE) break;
        if (!until_end && (r->n_text != seen_text || r->n_lp != seen_lp)) break;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
            pthread_mutex_unlock(&r->mu);
            if (srv_http_client_gone(fd)) return -1;
            pthread_mutex_lock(&r->mu);
            next = now;
            next.tv_nsec += 50 * 1000 * 1000;
            if (next.tv_nsec >= 1000000000L) next.tv_sec++, next.tv_nsec -= 1000000000L;
            continue;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &next);
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* ---- streaming ---- */
typedef struct api_stream {
    srv_sse sse; /* first: the shared part (phase 0: the role chunk is due) */
    srv_server *sv;
    int chat, include_usage;
    char id[48];
    int64_t created;
    int tools; /* the reply is split into content and tool-call deltas (ts) */
    srv_tool_stream ts;
} api_stream;

static void sse_begin(api_stream *s, fj_buf *b) {
    fj_raws(b, "data: ");
    head_json(s->sv, b, s->id, s->created, s->chat ? "chat.completion.chunk" : "text_completion");
}

/* One chunk: text (may be empty), optional log-probabilities, finish. */
static void sse_chunk(api_stream *s, const char *text, size_t n, const srv_logprob *lp, size_t n_lp, int role,
                      const char *finish) {
    fj_buf *b = &s->sse.out;
    sse_begin(s, b);
    fj_raws(b, ",\"choices\":[{\"index\":0,");
    if (s->chat) {
        fj_raws(b, "\"delta\":{");
        if (role) fj_raws(b, "\"role\":\"assistant\",\"content\":\"\"");
        else if (n) {
            fj_key(b, "content");
            fj_str(b, text, n);
        }
        fj_raws(b, "}");
    } else {
        fj_key(b, "text");
        fj_str(b, text, n);
    }
    fj_raws(b, ",\"logprobs\":");
    if (n_lp) logprobs_json(s->sv, b, lp, n_lp, s->chat);
    else fj_raws(b, "null");
    fj_raws(b, ",\"finish_reason\":");
    if (finish) fj_strs(b, finish);
    else fj_raws(b, "null");
    fj_raws(b, "}]");
    if (finish) {
        fj_raws(b, ",");
        timings_json(b, s->sse.r);
    }
    fj_raws(b, "}\n\n");
}

/* A tool-call delta: {"tool_calls": [{"index", "id", "type", "function": {"name", "arguments"}}]}
 * with id, type and name the first time, arguments growing after. */
static void sse_call(void *user, size_t index, const char *id, const char *name, const char *args, size_t n_args) {
    api_stream *s = user;
    fj_buf *b = &s->sse.out;
    sse_begin(s, b);
    fj_printf(b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%zu,", index);
    if (id) {
        fj_raws(b, "\"id\":");
        fj_strs(b, id);
        fj_raws(b, ",\"type\":\"function\",\"function\":{\"name\":");
        fj_strs(b, name);
        fj_raws(b, ",\"arguments\":");
    } else {
        fj_raws(b, "\"function\":{\"arguments\":");
    }
    fj_str(b, args, n_args);
    fj_raws(b, "}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
}

static void sse_content(void *user, const char *text, size_t n) {
    if (n) sse_chunk(user, text, n, NULL, 0, 0, NULL);
}

static void stream_produce(srv_sse *base) {
    api_stream *s = (api_stream *)base;
    srv_req *r = s->sse.r;
    if (s->sse.phase == 0) {
        if (s->chat) sse_chunk(s, NULL, 0, NULL, 0, 1, NULL);
        s->sse.phase = 1;
        return;
    }
    srv_sse_news nw;
    srv_sse_take(&s->sse, &nw);
    const srv_finish f = nw.finish;
    const srv_tool_sink sink = {s, sse_content, sse_call};
    if (s->tools) { /* log-probabilities are not split with the text: they go with the chunks they came in */
        if (nw.n_text) srv_tool_stream_push(&s->ts, nw.text, nw.n_text, &sink);
        if (nw.n_lp) sse_chunk(s, NULL, 0, nw.lp, nw.n_lp, 0, NULL);
    } else if (nw.n_text || nw.n_lp) {
        sse_chunk(s, nw.text, nw.n_text, nw.lp, nw.n_lp, 0, NULL);
    }
    free(nw.text);
    free(nw.lp);
    if (f == SRV_FINISH_NONE) return;
    if (f == SRV_FINISH_ERROR) {
        fj_buf *b = &s->sse.out;
        fj_raws(b, "data: {\"error\":{");
        fj_key(b, "message");
        fj_strs(b, nw.error);
        fj_raws(b, ",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");
    } else {
        if (s->tools) srv_tool_stream_end(&s->ts, &sink);
        sse_chunk(s, "", 0, NULL, 0, 0, s->tools && s->ts.n_calls && f == SRV_FINISH_STOP ? "tool_calls" : finish_name(f));
        if (s->include_usage) {
            sse_begin(s, &s->sse.out);
            fj_raws(&s->sse.out, ",\"choices\":[],");
            usage_json(&s->sse.out, r);
            fj_raws(&s->sse.out, "}\n\n");
        }
        fj_raws(&s->sse.out, "data: [DONE]\n\n");
    }
    s->sse.phase = 2;
}

static void stream_destroy(srv_sse *base) { srv_tool_stream_free(&((api_stream *)base)->ts); }

/* ---- the completion endpoints ---- */
static void complete(srv_server *sv, const srv_http_request *rq, srv_http_response *out, int chat) {
    atomic_fetch_add(&sv->requests_total, 1);
    char err[256];
    fj_limits lim = {.max_bytes = sv->o->max_body, .max_depth = 64};
    fj_doc *doc = fj_parse(rq->body, rq->body_len, &lim, err, sizeof err);
    if (!doc) {
        srv_api_error(out, 400, "invalid_request_error", NULL, "the request body is not valid JSON: %s", err);
        return;
    }
    const fj_val *root = fj_root(doc);
    gen_req g = {.chat = chat};
    fc_token *toks = NULL;
    size_t n_toks = 0;
    srv_req *r = NULL;
    static const char *const chat_known[] = {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
        "presence_penalty", "frequency_penalty", "repeat_penalty", "repeat_last_n", "seed", "stop", "stream",
        "stream_options", "logprobs", "top_logprobs", "n", "user", "cache_prompt", "tools", "tool_choice",
        "response_format", "logit_bias", "chat_template_kwargs", "grammar", "json_schema", "parallel_tool_calls", NULL};
    static const char *const cmpl_known[] = {
        "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
        "frequency_penalty", "repeat_penalty", "repeat_last_n", "seed", "stop", "stream", "stream_options",
        "logprobs", "n", "user", "cache_prompt", "echo", "suffix", "best_of", "logit_bias", "grammar",
        "json_schema", "response_format", NULL};
    if (root->type != FJ_OBJ) {
        srv_api_error(out, 400, "invalid_request_error", NULL, "the request body must be a JSON object, not %s",
                  fj_type_name(root->type));
        goto done;
    }
    if (check_known(root, chat ? chat_known : cmpl_known, out)) goto done;
    if (parse_gen(sv, root, &g, out)) goto done;
    if (chat) {
        int lp = 0;
        int64_t top = 0;
        if (get_bool(root, "logprobs", &lp, out)) goto done;
        if (get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, out)) goto done;
        if (top && !lp) {
            BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
            goto done;
        }
        g.gp.logprobs = lp;
        g.gp.top_logprobs = (int)top;
        const fj_val *kw = fj_get(root, "chat_template_kwargs");
        if (kw && kw->type != FJ_NULL) {
            static const char *const known[] = {"enable_thinking", NULL};
            if (kw->type != FJ_OBJ) {
                BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
                goto done;
            }
            if (check_known(kw, known, out)) goto done;
            int think = 1;
            if (get_bool(kw, "enable_thinking", &think, out)) goto done;
            if (!think) g.chat_flags |= FC_CHAT_NO_THINK;
        }
        if (chat_tokens(sv, root, g.chat_flags, &g.tools, &toks, &n_toks, out)) goto done;
    } else {
        const fj_val *x = fj_get(root, "logprobs");
        if (x && x->type == FJ_BOOL) {
            g.gp.logprobs = x->boolean;
        } else if (x && x->type != FJ_NULL) {
            int64_t k = 0;
            if (get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, out)) goto done;
            g.gp.logprobs = 1;
            g.gp.top_logprobs = (int)k;
        }
        int echo = 0;
        if (get_bool(root, "echo", &echo, out)) goto done;
        if (echo) {
            BAD("echo", "'echo' is not supported");
            goto done;
        }
        if ((x = fj_get(root, "suffix")) && x->type != FJ_NULL) {
            BAD("suffix", "'suffix' is not supported");
            goto done;
        }
        int64_t best_of = 1;
        if (get_int(root, "best_of", 1, 1, &best_of, out)) goto done;
        if (prompt_tokens(sv, root, &toks, &n_toks, out)) goto done;
    }
    if ((int64_t)n_toks > sv->n_ctx) {
        srv_api_error(out, 400, "invalid_request_error", chat ? "messages" : "prompt",
                  "the prompt is %zu tokens, longer than the slot's context (%" PRId64 " tokens)", n_toks, sv->n_ctx);
        goto done;
    }
    r = srv_req_new(toks, n_toks, &g.gp);
    if (!r) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    toks = NULL;
    memset(g.gp.stop, 0, sizeof g.gp.stop); /* the request owns them now */
    g.gp.n_stop = 0;
    g.gp.grammar = NULL;
    r->id = atomic_fetch_add(&sv->next_id, 1) + 1;
    const int q = srv_engine_submit(sv->eng, r);
    if (q) {
        out->retry_after = 1;
        srv_api_error(out, 503, "unavailable_error", NULL,
                  q == -1 ? "the server is busy: every slot is taken and the queue is full (--queue); retry later"
                          : "the server is shutting down");
        goto done;
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%016" PRIx64 "%08" PRIx64, chat ? "chatcmpl" : "cmpl", sv->id_salt, r->id);
    const int64_t created = (int64_t)time(NULL);
    if (g.stream) {
        api_stream *s = calloc(1, sizeof *s);
        if (!s) {
            srv_req_cancel(r);
            srv_api_error(out, 500, "server_error", NULL, "out of memory");
            goto done;
        }
        s->sv = sv;
        s->sse = (srv_sse){.r = r, .fd = rq->fd, .produce = stream_produce, .destroy = stream_destroy};
        r = NULL; /* the stream holds it */
        s->chat = chat;
        s->include_usage = g.include_usage;
        if (chat && s->sse.r->gp.tool_format >= 0) {
            s->tools = 1;
            srv_tool_stream_init(&s->ts, sv->tmpl, s->sse.r->id ^ sv->id_salt);
        }
        snprintf(s->id, sizeof s->id, "%s", id);
        s->created = created;
        out->status = 200;
        out->content_type = "text/event-stream";
        out->stream = (srv_http_stream){s, srv_sse_read, srv_sse_free};
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
    fj_buf b = {0};
    head_json(sv, &b, id, created, chat ? "chat.completion" : "text_completion");
    fj_raws(&b, ",\"choices\":[{\"index\":0,");
    int called = 0;
    if (chat && r->gp.tool_format >= 0) { /* the reply split into its text and its calls */
        fc_chat_tool_reply tr;
        pthread_mutex_lock(&sv->tok_mu);
        const fc_status ps = fc_chat_parse_tool_calls(sv->tok_ctx, sv->tmpl, r->text ? r->text : "", r->n_text, &tr);
        pthread_mutex_unlock(&sv->tok_mu);
        if (ps != FC_OK) {
            fj_buf_free(&b);
            srv_api_error(out, 500, "server_error", NULL, "out of memory");
            goto done;
        }
        called = tr.n_calls > 0;
        fj_raws(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
        if (called && !tr.content[0]) fj_raws(&b, "null");
        else fj_strs(&b, tr.content);
        if (called) {
            fj_raws(&b, ",\"tool_calls\":[");
            for (size_t k = 0; k < tr.n_calls; k++) {
                char cid[40];
                srv_tool_call_id(r->id ^ sv->id_salt, k, cid);
                fj_raws(&b, k ? ",{\"id\":" : "{\"id\":");
                fj_strs(&b, cid);
                fj_raws(&b, ",\"type\":\"function\",\"function\":{\"name\":");
                fj_strs(&b, tr.calls[k].name);
                fj_raws(&b, ",\"arguments\":");
                fj_strs(&b, tr.calls[k].arguments);
                fj_raws(&b, "}}");
            }
            fj_raws(&b, "]");
        }
        fj_raws(&b, "},");
        fc_chat_tool_reply_free(&tr);
    } else if (chat) {
        fj_raws(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
        fj_str(&b, r->text ? r->text : "", r->n_text);
        fj_raws(&b, "},");
    } else {
        fj_key(&b, "text");
        fj_str(&b, r->text ? r->text : "", r->n_text);
        fj_raws(&b, ",");
    }
    fj_raws(&b, "\"logprobs\":");
    if (r->gp.logprobs) logprobs_json(sv, &b, r->lp, r->n_lp, chat);
    else fj_raws(&b, "null");
    fj_raws(&b, ",\"finish_reason\":");
    fj_strs(&b, called && r->finish == SRV_FINISH_STOP ? "tool_calls" : finish_name(r->finish));
    fj_raws(&b, "}],");
    usage_json(&b, r);
    fj_raws(&b, ",");
    timings_json(&b, r);
    fj_raws(&b, "}");
    set_json(out, 200, &b);
done:
    if (out->status >= 400) atomic_fetch_add(&sv->requests_errors, 1);
    for (size_t k = 0; k < g.gp.n_stop; k++) free(g.gp.stop[k]);
    fc_grammar_free(g.gp.grammar);
    srv_tools_free(&g.tools);
    free(toks);
    srv_req_release(r);
    fj_free(doc);
}

/* ---- the small endpoints ---- */
static void health(srv_server *sv, srv_http_response *out) {
    if (!atomic_load(&sv->ready)) {
        srv_api_error(out, 503, "unavailable_error", NULL, "Loading model");
        return;
    }
    fj_buf b = {0};
    fj_raws(&b, "{\"status\":\"ok\"}");
    set_json(out, 200, &b);
}

static void models(srv_server *sv, srv_http_response *out) {
    const fc_llm_hparams *hp = fc_llm_model_hparams(sv->model);
    fj_buf b = {0};
    fj_raws(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    fj_strs(&b, sv->model_id);
    fj_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"fucina\",\"meta\":{", sv->t_start);
    fj_raws(&b, "\"architecture\":");
    fj_strs(&b, fc_llm_arch_name(hp->arch));
    fj_printf(&b,
              ",\"n_vocab\":%" PRId64 ",\"n_ctx_train\":%" PRId64 ",\"n_embd\":%" PRId64 ",\"n_layer\":%" PRId64
              "}}]}",
              hp->n_vocab, hp->n_ctx_train, hp->n_embd, hp->n_layer);
    set_json(out, 200, &b);
}

static void props(srv_server *sv, srv_http_response *out) {
    const fc_sampler_params sp = fc_sampler_default_params();
    fj_buf b = {0};
    fj_printf(&b, "{\"default_generation_settings\":{\"n_ctx\":%" PRId64 ",\"params\":{\"temperature\":", sv->n_ctx);
    fj_numf(&b, sp.temp);
    fj_printf(&b, ",\"top_k\":%d,\"top_p\":", sp.top_k);
    fj_numf(&b, sp.top_p);
    fj_raws(&b, ",\"min_p\":");
    fj_numf(&b, sp.min_p);
    fj_printf(&b, ",\"repeat_last_n\":%d,\"repeat_penalty\":", sp.penalty_last_n);
    fj_numf(&b, sp.penalty_repeat);
    fj_raws(&b, ",\"presence_penalty\":");
    fj_numf(&b, sp.penalty_present);
    fj_raws(&b, ",\"frequency_penalty\":");
    fj_numf(&b, sp.penalty_freq);
    fj_printf(&b, ",\"max_tokens\":-1}},\"total_slots\":%d,\"n_ctx\":%" PRId64 ",\"model_path\":",
              srv_engine_n_slots(sv->eng), sv->n_ctx);
    fj_strs(&b, sv->o->model_path);
    fj_raws(&b, ",\"model_alias\":");
    fj_strs(&b, sv->model_id);
    fj_raws(&b, ",\"chat_template\":");
    fj_strs(&b, fc_chat_template_name(sv->tmpl));
    fj_raws(&b, ",\"build_info\":");
    fj_strs(&b, "fucina " FUCINA_VERSION_STRING);
    fj_raws(&b, "}");
    set_json(out, 200, &b);
}

static void slots(srv_server *sv, srv_http_response *out) {
    const int n = srv_engine_n_slots(sv->eng);
    srv_slot_info *si = calloc((size_t)n, sizeof *si);
    if (!si) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        return;
    }
    srv_stats st;
    srv_engine_stats(sv->eng, &st, si);
    fj_buf b = {0};
    fj_raws(&b, "[");
    for (int i = 0; i < n; i++)
        fj_printf(&b,
                  "%s{\"id\":%d,\"id_task\":%lld,\"n_ctx\":%" PRId64 ",\"is_processing\":%s,\"n_cache\":%" PRId64
                  ",\"n_prompt_tokens\":%" PRId64 ",\"n_decoded\":%" PRId64 "}",
                  i ? "," : "", si[i].id, si[i].busy ? (long long)si[i].req_id : -1LL, sv->n_ctx,
                  si[i].busy ? "true" : "false", si[i].n_cache, si[i].n_prompt, si[i].n_gen);
    fj_raws(&b, "]");
    free(si);
    set_json(out, 200, &b);
}

static void metrics(srv_server *sv, srv_http_response *out) {
    if (!sv->o->metrics) {
        srv_api_error(out, 501, "not_supported_error", NULL,
                  "this server does not expose metrics: start it with --metrics");
        return;
    }
    srv_stats st;
    srv_engine_stats(sv->eng, &st, NULL);
    fj_buf b = {0};
#define METRIC(name, type, help, fmt, v) \
    fj_printf(&b, "# HELP fucina_" name " " help "\n# TYPE fucina_" name " " type "\nfucina_" name " " fmt "\n", v)
    METRIC("prompt_tokens_total", "counter", "Prompt tokens evaluated.", "%llu", (unsigned long long)st.prompt_tokens);
    METRIC("prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.", "%llu",
           (unsigned long long)st.cached_tokens);
    METRIC("prompt_seconds_total", "counter", "Time spent evaluating prompts.", "%.6f", st.prompt_ms / 1e3);
    METRIC("tokens_predicted_total", "counter", "Tokens generated.", "%llu", (unsigned long long)st.predicted_tokens);
    METRIC("tokens_predicted_seconds_total", "counter", "Time spent generating.", "%.6f", st.predicted_ms / 1e3);
    METRIC("requests_total", "counter", "Completion requests received.", "%llu",
           (unsigned long long)atomic_load(&sv->requests_total));
    METRIC("requests_errors_total", "counter", "Completion requests answered with an error.", "%llu",
           (unsigned long long)atomic_load(&sv->requests_errors));
    METRIC("requests_done_total", "counter", "Requests that ran to their end.", "%llu",
           (unsigned long long)st.requests_done);
    METRIC("requests_cancelled_total", "counter", "Requests dropped because the client went away.", "%llu",
           (unsigned long long)st.requests_cancelled);
    METRIC("requests_processing", "gauge", "Busy slots.", "%d", st.busy_slots);
    METRIC("requests_deferred", "gauge", "Requests waiting for a slot.", "%d", st.queued);
    METRIC("slots_total", "gauge", "Slots (-np).", "%d", srv_engine_n_slots(sv->eng));
#undef METRIC
    set_json(out, 200, &b);
    out->content_type = "text/plain; version=0.0.4";
}

static fj_doc *parse_body(srv_server *sv, const srv_http_request *rq, srv_http_response *out) {
    char err[256];
    fj_limits lim = {.max_bytes = sv->o->max_body, .max_depth = 64};
    fj_doc *doc = fj_parse(rq->body, rq->body_len, &lim, err, sizeof err);
    if (!doc) {
        srv_api_error(out, 400, "invalid_request_error", NULL, "the request body is not valid JSON: %s", err);
        return NULL;
    }
    if (fj_root(doc)->type != FJ_OBJ) {
        srv_api_error(out, 400, "invalid_request_error", NULL, "the request body must be a JSON object");
        fj_free(doc);
        return NULL;
    }
    return doc;
}

static void tokenize(srv_server *sv, const srv_http_request *rq, srv_http_response *out) {
    fj_doc *doc = parse_body(sv, rq, out);
    if (!doc) return;
    const fj_val *root = fj_root(doc);
    static const char *const known[] = {"content", "add_special", "parse_special", "with_pieces", NULL};
    int add_special = 0, parse_special = 1, with_pieces = 0;
    const fj_val *c = fj_get(root, "content");
    if (check_known(root, known, out) || get_bool(root, "add_special", &add_special, out) ||
        get_bool(root, "parse_special", &parse_special, out) || get_bool(root, "with_pieces", &with_pieces, out))
        goto done;
    if (!c || c->type != FJ_STR) {
        BAD("content", "'content' must be a string");
        goto done;
    }
    fc_token *toks = NULL;
    size_t n = 0;
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    const fc_status st = fc_tokenize(sv->tok_ctx, sv->tok, c->str, c->len,
                                     (add_special ? FC_TOKENIZE_ADD_SPECIAL : 0u) |
                                         (parse_special ? FC_TOKENIZE_PARSE_SPECIAL : 0u),
                                     &toks, &n);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    if (st != FC_OK) {
        BAD("content", "the text cannot be tokenized: %s", why);
        goto done;
    }
    fj_buf b = {0};
    fj_raws(&b, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) fj_raws(&b, ",");
        if (with_pieces) {
            fj_printf(&b, "{\"id\":%d,\"piece\":", toks[i]);
            const char *p = "";
            size_t len = 0;
            pthread_mutex_lock(&sv->tok_mu);
            if (fc_token_piece(sv->tok_ctx, sv->tok, toks[i], 1, &p, &len) != FC_OK) p = "", len = 0;
            fc_ctx_clear_error(sv->tok_ctx);
            fj_str(&b, p, len);
            pthread_mutex_unlock(&sv->tok_mu);
            fj_raws(&b, "}");
        } else {
            fj_printf(&b, "%d", toks[i]);
        }
    }
    fj_raws(&b, "]}");
    fc_tokens_free(toks);
    set_json(out, 200, &b);
done:
    fj_free(doc);
}

static void detokenize(srv_server *sv, const srv_http_request *rq, srv_http_response *out) {
    fj_doc *doc = parse_body(sv, rq, out);
    if (!doc) return;
    const fj_val *root = fj_root(doc);
    static const char *const known[] = {"tokens", NULL};
    const fj_val *t = fj_get(root, "tokens");
    fc_token *toks = NULL;
    if (check_known(root, known, out)) goto done;
    if (!t || t->type != FJ_ARR) {
        BAD("tokens", "'tokens' must be an array of token ids");
        goto done;
    }
    toks = malloc((t->len + 1) * sizeof *toks);
    if (!toks) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->len; i++) {
        const fj_val *x = t->items[i];
        if (x->type != FJ_NUM || !x->is_int || x->i < 0 || x->i >= sv->n_vocab) {
            BAD("tokens", "'tokens[%zu]' must be a token id in [0, %" PRId64 ")", i, sv->n_vocab);
            goto done;
        }
        toks[i] = (fc_token)x->i;
    }
    char *text = NULL;
    size_t len = 0;
    pthread_mutex_lock(&sv->tok_mu);
    fc_ctx_clear_error(sv->tok_ctx);
    const fc_status st = fc_detokenize(sv->tok_ctx, sv->tok, toks, t->len, 0, &text, &len);
    char why[512];
    snprintf(why, sizeof why, "%s", fc_ctx_error(sv->tok_ctx));
    pthread_mutex_unlock(&sv->tok_mu);
    if (st != FC_OK) {
        BAD("tokens", "the tokens cannot be detokenized: %s", why);
        goto done;
    }
    fj_buf b = {0};
    fj_raws(&b, "{\"content\":");
    fj_str(&b, text, len);
    fj_raws(&b, "}");
    free(text);
    set_json(out, 200, &b);
done:
    free(toks);
    fj_free(doc);
}

static void webui(srv_server *sv, srv_http_response *out) {
    if (!sv->o->webui) {
        srv_api_error(out, 404, "not_found_error", NULL, "the chat page is disabled (--no-webui)");
        return;
    }
    out->status = 200;
    out->body = malloc(srv_webui_html_len);
    if (!out->body) {
        srv_api_error(out, 500, "server_error", NULL, "out of memory");
        return;
    }
    memcpy(out->body, srv_webui_html, srv_webui_html_len);
    out->len = srv_webui_html_len;
    out->content_type = "text/html; charset=utf-8";
}

/* ---- routing ---- */
typedef enum route_id {
    R_WEBUI, R_HEALTH, R_MODELS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_PROPS, R_SLOTS, R_METRICS, R_MESSAGES, R_RESPONSES,
} route_id;

typedef struct route {
    const char *path;
    const char *method;
    route_id id;
    int open; /* served without an API key */
} route;

static const route routes[] = {
    {"/", "GET", R_WEBUI, 1},
    {"/index.html", "GET", R_WEBUI, 1},
    {"/health", "GET", R_HEALTH, 1},
    {"/v1/health", "GET", R_HEALTH, 1},
    {"/v1/models", "GET", R_MODELS, 0},
    {"/models", "GET", R_MODELS, 0},
    {"/v1/chat/completions", "POST", R_CHAT, 0},
    {"/chat/completions", "POST", R_CHAT, 0},
    {"/v1/completions", "POST", R_COMPLETIONS, 0},
    {"/completions", "POST", R_COMPLETIONS, 0},
    {"/tokenize", "POST", R_TOKENIZE, 0},
    {"/detokenize", "POST", R_DETOKENIZE, 0},
    {"/props", "GET", R_PROPS, 0},
    {"/slots", "GET", R_SLOTS, 0},
    {"/metrics", "GET", R_METRICS, 0},
    {"/v1/messages", "POST", R_MESSAGES, 0},
    {"/v1/responses", "POST", R_RESPONSES, 0},
    {"/responses", "POST", R_RESPONSES, 0},
};

/* Compare without an early exit, so the time taken says nothing about how
 * much of a key matched. */
static int key_equal(const char *a, size_t na, const char *b) {
    const size_t nb = strlen(b);
    unsigned d = na != nb;
    for (size_t i = 0; i < na; i++) d |= (unsigned)(unsigned char)a[i] ^ (unsigned)(unsigned char)b[i % (nb ? nb : 1)];
    return d == 0;
}

static int authorized(srv_server *sv, const srv_http_request *rq) {
    if (!sv->o->n_api_keys) return 1;
    const char *h = srv_http_header(rq, "Authorization");
    const char *key = NULL;
    if (h && !strncmp(h, "Bearer ", 7)) key = h + 7;
    if (!key) key = srv_http_header(rq, "X-Api-Key");
    if (!key) return 0;
    int ok = 0;
    for (int i = 0; i < sv->o->n_api_keys; i++) ok |= key_equal(key, strlen(key), sv->o->api_keys[i]);
    return ok;
}

void srv_api_handle(void *server, const srv_http_request *rq, srv_http_response *out) {
    srv_server *sv = server;
    const route *rt = NULL;
    char allow[64] = "";
    /* HEAD is GET without the body (libmicrohttpd drops it) */
    const char *method = !strcmp(rq->method, "HEAD") ? "GET" : rq->method;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(routes[i].path, rq->path)) {
            if (!strcmp(routes[i].method, method)) rt = &routes[i];
            else snprintf(allow, sizeof allow, "%s, OPTIONS", routes[i].method);
        }
    if (!rt && allow[0] && !strcmp(rq->method, "OPTIONS")) {
        out->status = 204;
        out->allow = "GET, POST, OPTIONS";
        out->cors_preflight = 1;
        return;
    }
    if (!rt && allow[0]) {
        static char allow_static[2][24] = {"GET, OPTIONS", "POST, OPTIONS"};
        out->allow = !strncmp(allow, "GET", 3) ? allow_static[0] : allow_static[1];
        srv_api_error(out, 405, "invalid_request_error", NULL, "%s is not allowed on %s (allowed: %s)", rq->method,
                  rq->path, out->allow);
        return;
    }
    if (!rt) {
        srv_api_error(out, 404, "not_found_error", NULL, "no endpoint %s %s", rq->method, rq->path);
        return;
    }
    if (!rt->open && !authorized(sv, rq)) {
        srv_api_error(out, 401, "authentication_error", NULL, "invalid or missing API key (Authorization: Bearer KEY)");
        return;
    }
    if (rt->id != R_HEALTH && rt->id != R_WEBUI && !atomic_load(&sv->ready)) {
        out->retry_after = 1;
        srv_api_error(out, 503, "unavailable_error", NULL, "Loading model");
        return;
    }
    switch (rt->id) {
    case R_WEBUI: webui(sv, out); return;
    case R_HEALTH: health(sv, out); return;
    case R_MODELS: models(sv, out); return;
    case R_CHAT: complete(sv, rq, out, 1); return;
    case R_COMPLETIONS: complete(sv, rq, out, 0); return;
    case R_TOKENIZE: tokenize(sv, rq, out); return;
    case R_DETOKENIZE: detokenize(sv, rq, out); return;
    case R_PROPS: props(sv, out); return;
    case R_SLOTS: slots(sv, out); return;
    case R_METRICS: metrics(sv, out); return;
    case R_MESSAGES: srv_api_messages(sv, rq, out); return;
    case R_RESPONSES: srv_api_responses(sv, rq, out); return;
    }
}
