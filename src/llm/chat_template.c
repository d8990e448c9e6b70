/* SPDX-License-Identifier: MIT */
/* Fucina llm: chat template families, detected from the Jinja text and
 * rendered natively (include/fucina/chat.h): names, detection, reading the
 * GGUF key, and the ChatML and Qwen3 renderers (the other families:
 * src/llm/chat_render.c; reference texts: chat_texts.c, chat_qwen3_text.c).
 * The Qwen3 renderer follows the
 * template's logic step by step (src/llm/chat_qwen3_text.c holds the text;
 * tests/runtime/test_llm_chat.c renders it with jinja2 and compares bytes);
 * Python's str.strip('\n') family strips newlines only, and split(x)[0] /
 * split(x)[-1] are "before the first" / "after the last" occurrence. */
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "llm/chat_internal.h"

/* ---- buffer ----------------------------------------------------------------------- */

int fc_chat_buf_put(fc_chat_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int fc_chat_buf_puts(fc_chat_buf *b, const char *s) { return fc_chat_buf_put(b, s, strlen(s)); }

int fc_chat_buf_put_content(fc_chat_buf *b, const char *s, size_t n) {
    if (!n) return fc_chat_buf_put(b, s, 0); /* an empty content has no bytes to guard */
    fctk_span *last = b->n_spans ? &b->spans[b->n_spans - 1] : NULL;
    const int merge = last && last->off + last->len == b->n; /* two contents back to back (gemma's system) */
    if (!merge && b->n_spans == b->cap_spans) {
        const size_t cap = b->cap_spans ? 2 * b->cap_spans : 16;
        fctk_span *p = realloc(b->spans, cap * sizeof *p);
        if (!p) return -1;
        b->spans = p;
        b->cap_spans = cap;
    }
    const size_t at = b->n;
    if (fc_chat_buf_put(b, s, n)) return -1;
    if (merge)
        b->spans[b->n_spans - 1].len += n;
    else
        b->spans[b->n_spans++] = (fctk_span){at, n};
    return 0;
}

void fc_chat_buf_free(fc_chat_buf *b) {
    free(b->p);
    free(b->spans);
    *b = (fc_chat_buf){0};
}

/* ---- names ------------------------------------------------------------------------ */

const char *fc_chat_role_name(fc_chat_role role) {
    switch (role) {
    case FC_CHAT_SYSTEM: return "system";
    case FC_CHAT_USER: return "user";
    case FC_CHAT_ASSISTANT: return "assistant";
    case FC_CHAT_TOOL: return "tool";
    }
    return NULL;
}

const char *fc_chat_template_name(fc_chat_template t) {
    switch (t) {
    case FC_CHAT_TEMPLATE_CHATML: return "chatml";
    case FC_CHAT_TEMPLATE_QWEN3: return "qwen3";
    case FC_CHAT_TEMPLATE_LLAMA3: return "llama3";
    case FC_CHAT_TEMPLATE_MISTRAL_V1: return "mistral-v1";
    case FC_CHAT_TEMPLATE_MISTRAL_V3: return "mistral-v3";
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN: return "mistral-v3-tekken";
    case FC_CHAT_TEMPLATE_MISTRAL_V7: return "mistral-v7";
    case FC_CHAT_TEMPLATE_GEMMA: return "gemma";
    case FC_CHAT_TEMPLATE_PHI3: return "phi3";
    case FC_CHAT_TEMPLATE_LLAMA2: return "llama2";
    case FC_CHAT_TEMPLATE_LLAMA2_SYS: return "llama2-sys";
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS: return "llama2-sys-bos";
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: return "llama2-sys-strip";
    }
    return NULL;
}

/* test_llm_chat checks this list against fc_chat_template_name of every value */
static const char k_names[] = "chatml, qwen3, llama3, mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7, gemma, "
                              "phi3, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip";

const char *fc_chat_template_names(void) { return k_names; }

const char *fc_chat_template_text(fc_chat_template t) {
    if (t == FC_CHAT_TEMPLATE_QWEN3) return fc_chat_qwen3_jinja;
    return fc_chat_reference_text(t);
}

/* ---- detection -------------------------------------------------------------------- */

/* llama.cpp's other family names (llama_chat_builtin_templates). A name is
 * looked up before any text rule, so these must be refused here: left to the
 * rules, "mistral-v7-tekken" would start with "mistral" and come out llama2. */
static const char *const k_other_names[] = {
    "mistral-v7-tekken", "phi4",         "falcon3",       "zephyr",        "monarch",     "orion",
    "openchat",          "vicuna",       "vicuna-orca",   "deepseek",      "deepseek2",   "deepseek3",
    "deepseek-ocr",      "command-r",    "chatglm3",      "chatglm4",      "glmedge",     "minicpm",
    "exaone3",           "exaone4",      "exaone-moe",    "rwkv-world",    "granite",     "granite-4.0",
    "granite-4.1",       "gigachat",     "megrez",        "yandex",        "bailing",     "bailing-think",
    "bailing2",          "llama4",       "smolvlm",       "hunyuan-moe",   "hunyuan-dense", "hunyuan-vl",
    "gpt-oss",           "kimi-k2",      "seed_oss",      "grok-2",        "pangu-embedded", "solar-open",
};

static int by_name(const char *name, fc_chat_template *out) {
    for (int t = 0; t < FC_CHAT_N_TEMPLATES; t++)
        if (!strcmp(name, fc_chat_template_name((fc_chat_template)t))) {
            *out = (fc_chat_template)t;
            return 1;
        }
    return 0;
}

fc_status fc_chat_template_from_name(fc_ctx *ctx, const char *name, fc_chat_template *out) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!name || !out) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_from_name: NULL %s", name ? "out" : "name");
        return FC_ERR_INVALID_ARG;
    }
    if (by_name(name, out)) return FC_OK;
    fc_fail(ctx, FC_ERR_UNSUPPORTED, "unknown chat template name '%.60s' (supported: %s)", name, k_names);
    return FC_ERR_UNSUPPORTED;
}

#define HAS(s) (strstr(text, (s)) != NULL)

/* llama.cpp's detection rules, in llama.cpp's order, down to the last family
 * we render (llama3): an earlier rule for a family we do not render must
 * still win, or a text llama.cpp gives that family would come out as ours.
 * Returns 1 with *out set, or 0 with *why saying what the text is. */
static int detect_text(const char *text, fc_chat_template *out, const char **why) {
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) {
            *why = "it is Phi-4's (<|im_sep|>), which we do not render";
            return 0;
        }
        if (HAS("<end_of_utterance>")) {
            *why = "it is SmolVLM's (<end_of_utterance>), which we do not render";
            return 0;
        }
        /* our split of llama.cpp's chatml: Qwen3's thinking switch */
        if (HAS("enable_thinking")) {
            *out = FC_CHAT_TEMPLATE_QWEN3;
            return 1;
        }
        if (HAS("<think>")) {
            /* QwQ / thinking-only models: their generation prompt differs
             * from Qwen3's; rendering them as either would be a guess */
            *why = "it is ChatML with a <think> convention we do not know (not Qwen3's enable_thinking)";
            return 0;
        }
        *out = FC_CHAT_TEMPLATE_CHATML;
        return 1;
    }
    if (!strncmp(text, "mistral", 7) || HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]"))
            *out = FC_CHAT_TEMPLATE_MISTRAL_V7;
        else if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]"))
            /* Mistral's official v1 / v3 / v3-tekken templates */
            *out = HAS(" [INST]")       ? FC_CHAT_TEMPLATE_MISTRAL_V1
                   : HAS("\"[INST]\"") ? FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN
                                       : FC_CHAT_TEMPLATE_MISTRAL_V3;
        else if (HAS("content.strip()"))
            *out = FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP;
        else if (HAS("bos_token + '[INST]"))
            *out = FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS;
        else if (HAS("<<SYS>>"))
            *out = FC_CHAT_TEMPLATE_LLAMA2_SYS;
        else
            *out = FC_CHAT_TEMPLATE_LLAMA2;
        return 1;
    }
    if (HAS("<|assistant|>") && HAS("<|end|>")) {
        *out = FC_CHAT_TEMPLATE_PHI3;
        return 1;
    }
    *why = HAS("[gMASK]<sop>")                                         ? "it is ChatGLM4's, which we do not render"
           : HAS("<|assistant|>") && HAS("<|user|>")                   ? (HAS("</s>") ? "it is Falcon 3's, which we do not render"
                                                                                      : "it is GLM-Edge's, which we do not render")
           : HAS("<|{{ item['role'] }}|>") && HAS("<|begin_of_image|>") ? "it is GLM-Edge's, which we do not render"
           : HAS("<|user|>") && HAS("<|endoftext|>")                   ? "it is Zephyr's, which we do not render"
           : HAS("bos_token + message['role']")                        ? "it is Monarch's, which we do not render"
                                                                       : NULL;
    if (*why) return 0;
    if (HAS("<start_of_turn>")) {
        *out = FC_CHAT_TEMPLATE_GEMMA;
        return 1;
    }
    *why = HAS("'\\n\\nAssistant: ' + eos_token")                     ? "it is Orion's, which we do not render"
           : HAS("GPT4 Correct ")                                     ? "it is OpenChat's, which we do not render"
           : HAS("USER: ") && HAS("ASSISTANT: ")                      ? "it is Vicuna's, which we do not render"
           : HAS("### Instruction:") && HAS("<|EOT|>")                ? "it is DeepSeek Coder's, which we do not render"
           : HAS("<|START_OF_TURN_TOKEN|>") && HAS("<|USER_TOKEN|>")  ? "it is Command-R's, which we do not render"
                                                                      : NULL;
    if (*why) return 0;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
        *out = FC_CHAT_TEMPLATE_LLAMA3;
        return 1;
    }
    *why = "no family we render matches it";
    return 0;
}

#undef HAS

fc_status fc_chat_template_detect(fc_ctx *ctx, const char *text, fc_chat_template *out) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!text || !out) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_detect: NULL %s", text ? "out" : "text");
        return FC_ERR_INVALID_ARG;
    }
    if (by_name(text, out)) return FC_OK;
    const char *why = NULL;
    for (size_t i = 0; i < sizeof k_other_names / sizeof k_other_names[0] && !why; i++)
        if (!strcmp(text, k_other_names[i])) why = "it is the name of a llama.cpp family we do not render";
    if (!why && detect_text(text, out, &why)) return FC_OK;
    fc_fail(ctx, FC_ERR_UNSUPPORTED, "unsupported chat template \"%.40s%s\": %s (supported: %s)", text,
            strlen(text) > 40 ? "..." : "", why, k_names);
    return FC_ERR_UNSUPPORTED;
}

fc_status fc_chat_template_from_gguf(fc_ctx *ctx, fc_gguf *g, const char **text, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!g || !text || !len) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_from_gguf: NULL argument");
        return FC_ERR_INVALID_ARG;
    }
    *text = NULL;
    *len = 0;
    const int64_t i = fc_gguf_find_kv(g, "tokenizer.chat_template");
    if (i < 0) return FC_OK;
    if (fc_gguf_kv_type(g, i) != FC_GGUF_STR) {
        fc_fail(ctx, FC_ERR_FORMAT, "tokenizer.chat_template is not a string (GGUF type %d)", fc_gguf_kv_type(g, i));
        return FC_ERR_FORMAT;
    }
    return fc_gguf_get_str(g, "tokenizer.chat_template", text, len);
}

fc_status fc_chat_template_load(fc_ctx *ctx, const char *path, fc_chat_template *out, int *found) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || !out || !found) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_load: NULL argument");
        return FC_ERR_INVALID_ARG;
    }
    *found = 0;
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return fc_ctx_status(ctx);
    const char *text;
    size_t len;
    fc_status st = fc_chat_template_from_gguf(ctx, g, &text, &len);
    if (st == FC_OK && text) {
        char *z = malloc(len + 1); /* the GGUF string has no NUL */
        if (!z) {
            fc_fail(ctx, FC_ERR_OOM, "fc_chat_template_load: out of memory");
            st = FC_ERR_OOM;
        } else {
            memcpy(z, text, len);
            z[len] = 0;
            st = fc_chat_template_detect(ctx, z, out);
            if (st == FC_OK) *found = 1;
            free(z);
        }
    }
    fc_gguf_close(g);
    return st;
}

/* ---- rendering -------------------------------------------------------------------- */

/* A (pointer, length) view and Python's string helpers on it. */
typedef struct view {
    const char *p;
    size_t n;
} view;

static view lstrip_nl(view v) {
    while (v.n && v.p[0] == '\n') v.p++, v.n--;
    return v;
}

static view rstrip_nl(view v) {
    while (v.n && v.p[v.n - 1] == '\n') v.n--;
    return v;
}

/* first occurrence of pat in v, or NULL */
static const char *find_first(view v, const char *pat) {
    const size_t m = strlen(pat);
    for (size_t i = 0; i + m <= v.n; i++)
        if (!memcmp(v.p + i, pat, m)) return v.p + i;
    return NULL;
}

static const char *find_last(view v, const char *pat) {
    const size_t m = strlen(pat);
    for (size_t i = v.n >= m ? v.n - m + 1 : 0; i-- > 0;)
        if (!memcmp(v.p + i, pat, m)) return v.p + i;
    return NULL;
}

static int starts_with(view v, const char *pat) {
    const size_t m = strlen(pat);
    return v.n >= m && !memcmp(v.p, pat, m);
}

static int ends_with(view v, const char *pat) {
    const size_t m = strlen(pat);
    return v.n >= m && !memcmp(v.p + v.n - m, pat, m);
}

static view view_of(const char *s) { return (view){s, strlen(s)}; }

/* PUT writes markup; PUTC / PUTCV write (a view of) a message's content */
#define PUT(s) ok = ok && !fc_chat_buf_puts(b, (s))
#define PUTC(s) ok = ok && !fc_chat_buf_put_content(b, (s), strlen(s))
#define PUTCV(v) ok = ok && !fc_chat_buf_put_content(b, (v).p, (v).n)

static int render_chatml(fc_chat_buf *b, const fc_chat_message *msgs, size_t n, unsigned flags) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        PUT("<|im_start|>");
        PUT(fc_chat_role_name(msgs[i].role));
        PUT("\n");
        PUTC(msgs[i].content);
        PUT("<|im_end|>\n");
    }
    if (flags & FC_CHAT_ADD_GENERATION_PROMPT) PUT("<|im_start|>assistant\n");
    return ok;
}

/* An assistant turn of Qwen3's template (and its tool calls). */
static int qwen3_assistant(fc_chat_buf *b, const fc_chat_message *m, view content, int keep_think, int last) {
    int ok = 1;
    view reasoning = {"", 0};
    if (find_first(content, "</think>")) {
        /* reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        view head = {content.p, (size_t)(find_first(content, "</think>") - content.p)};
        head = rstrip_nl(head);
        const char *open = find_last(head, "<think>");
        if (open) head = (view){open + 7, head.n - (size_t)(open + 7 - head.p)};
        reasoning = lstrip_nl(head);
        /* content = content.split('</think>')[-1].lstrip('\n') */
        const char *close = find_last(content, "</think>");
        content = lstrip_nl((view){close + 8, content.n - (size_t)(close + 8 - content.p)});
    }
    PUT("<|im_start|>assistant\n");
    if (keep_think && (last || reasoning.n)) {
        PUT("<think>\n");
        PUTCV(rstrip_nl(lstrip_nl(reasoning)));
        PUT("\n</think>\n\n");
        PUTCV(lstrip_nl(content));
    } else {
        PUTCV(content);
    }
    ok = ok && !fc_chat_put_hermes_calls(b, m, content.n > 0);
    PUT("<|im_end|>\n");
    return ok;
}

static int render_qwen3(fc_chat_buf *b, const fc_chat_message *msgs, size_t n, const fc_chat_render_options *o) {
    int ok = 1;
    const unsigned flags = o->flags;
    if (o->n_tools) { /* the tools, after the system message's text */
        ok = !fc_chat_put_hermes_tools(b, n && msgs[0].role == FC_CHAT_SYSTEM ? msgs[0].content : NULL, o);
    } else if (n && msgs[0].role == FC_CHAT_SYSTEM) { /* no tools: a leading system message opens the prompt */
        PUT("<|im_start|>system\n");
        PUTC(msgs[0].content);
        PUT("<|im_end|>\n");
    }
    /* the last user message that is not a wrapped tool response */
    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;) {
        view c = view_of(msgs[i].content);
        if (msgs[i].role == FC_CHAT_USER && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n && ok; i++) {
        const fc_chat_message *m = &msgs[i];
        switch (m->role) {
        case FC_CHAT_SYSTEM:
            if (i == 0) break; /* already written */
            /* a later system message renders as a user one does */
            /* fall through */
        case FC_CHAT_USER:
            PUT("<|im_start|>");
            PUT(fc_chat_role_name(m->role));
            PUT("\n");
            PUTC(m->content);
            PUT("<|im_end|>\n");
            break;
        case FC_CHAT_ASSISTANT:
            ok = ok && qwen3_assistant(b, m, view_of(m->content), i > last_query, i + 1 == n);
            break;
        case FC_CHAT_TOOL:
            if (i == 0 || msgs[i - 1].role != FC_CHAT_TOOL) PUT("<|im_start|>user");
            PUT("\n<tool_response>\n");
            PUTC(m->content);
            PUT("\n</tool_response>");
            if (i + 1 == n || msgs[i + 1].role != FC_CHAT_TOOL) PUT("<|im_end|>\n");
            break;
        }
    }
    if (flags & FC_CHAT_ADD_GENERATION_PROMPT) {
        PUT("<|im_start|>assistant\n");
        if (flags & FC_CHAT_NO_THINK) PUT("<think>\n\n</think>\n\n");
    }
    return ok;
}

fc_status fc_chat_render_buf(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                             const fc_chat_render_options *opt, fc_chat_buf *b) {
    const fc_chat_render_options o = opt ? *opt : (fc_chat_render_options){0};
    const unsigned flags = o.flags;
    if (!fc_chat_template_name(t)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: template %d out of range", who, (int)t);
        return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        if (!fc_chat_role_name(msgs[i].role) || !msgs[i].content) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: message %zu has %s", who, i,
                    msgs[i].content ? "a role out of range" : "a NULL content");
            return FC_ERR_INVALID_ARG;
        }
    }
    fc_status st = fc_chat_tools_check(ctx, who, msgs, n, &o);
    if (st != FC_OK) return st;
    int tools = o.n_tools > 0;
    for (size_t i = 0; i < n && !tools; i++) tools = msgs[i].n_tool_calls > 0;
    if (tools) switch (fc_chat_template_tool_format(t)) {
        case FC_CHAT_TOOLS_GENERIC: return fc_chat_render_generic(ctx, who, t, msgs, n, &o, b);
        case FC_CHAT_TOOLS_LLAMA3_JSON: return fc_chat_render_llama3_tools(ctx, who, msgs, n, &o, b);
        case FC_CHAT_TOOLS_MISTRAL: return fc_chat_render_mistral_tools(ctx, who, t, msgs, n, &o, b);
        case FC_CHAT_TOOLS_HERMES: break; /* below, with the family's renderer */
        }
    int ok = !fc_chat_buf_put(b, "", 0);
    switch (t) {
    case FC_CHAT_TEMPLATE_CHATML: /* with tools, Qwen's Hermes convention (Qwen2.5's and Qwen3's templates) */
        ok = ok && (tools ? render_qwen3(b, msgs, n, &o) : render_chatml(b, msgs, n, flags));
        break;
    case FC_CHAT_TEMPLATE_QWEN3: ok = ok && render_qwen3(b, msgs, n, &o); break;
    case FC_CHAT_TEMPLATE_LLAMA3:
    case FC_CHAT_TEMPLATE_MISTRAL_V1:
    case FC_CHAT_TEMPLATE_MISTRAL_V3:
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN:
    case FC_CHAT_TEMPLATE_MISTRAL_V7:
    case FC_CHAT_TEMPLATE_GEMMA:
    case FC_CHAT_TEMPLATE_PHI3:
    case FC_CHAT_TEMPLATE_LLAMA2:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: ok = ok && fc_chat_render_builtin(b, t, msgs, n, flags); break;
    }
    if (!ok) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", who);
        return FC_ERR_OOM;
    }
    return FC_OK;
}

fc_status fc_chat_render(fc_ctx *ctx, fc_chat_template t, const fc_chat_message *msgs, size_t n, unsigned flags,
                         char **out, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!out || (n && !msgs)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_render: NULL %s", out ? "messages" : "out");
        return FC_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (len) *len = 0;
    fc_chat_buf b = {0};
    const fc_chat_render_options o = {.flags = flags};
    const fc_status st = fc_chat_render_buf(ctx, "fc_chat_render", t, msgs, n, &o, &b);
    if (st != FC_OK) {
        fc_chat_buf_free(&b);
        return st;
    }
    free(b.spans); /* the text is the caller's; where its contents lie is not asked for here */
    *out = b.p;
    if (len) *len = b.n;
    return FC_OK;
}

fc_status fc_chat_render_ex(fc_ctx *ctx, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                            const fc_chat_render_options *opt, char **out, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!out || (n && !msgs)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_render_ex: NULL %s", out ? "messages" : "out");
        return FC_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (len) *len = 0;
    fc_chat_buf b = {0};
    const fc_status st = fc_chat_render_buf(ctx, "fc_chat_render_ex", t, msgs, n, opt, &b);
    if (st != FC_OK) {
        fc_chat_buf_free(&b);
        return st;
    }
    free(b.spans);
    *out = b.p;
    if (len) *len = b.n;
    return FC_OK;
}
