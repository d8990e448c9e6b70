/* SPDX-License-Identifier: MIT */
/* Fucina: chat templates and multi-turn conversations over an LLM session.
 *
 * Templates. A model's GGUF carries its Jinja chat template in
 * "tokenizer.chat_template". We do not interpret Jinja: the template's
 * family is detected from its text the way llama.cpp's
 * llm_chat_detect_template does it, and rendered natively in C, byte for
 * byte what llama.cpp's llama_chat_apply_template renders for that family
 * (its quirks included; where a family's real Jinja template renders
 * something else, llama.cpp's rendering is the one we give):
 *   chatml             "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then "<|im_start|>assistant\n"
 *   qwen3              Qwen3's template (ChatML with the thinking switch; byte-identical
 *                      to the real template under jinja2, a superset of llama.cpp's chatml):
 *                      consecutive tool turns become one user turn of <tool_response>
 *                      blocks; assistant turns before the last user query lose their
 *                      <think>...</think> part, later ones keep it; FC_CHAT_NO_THINK ends the
 *                      generation prompt with an empty "<think>\n\n</think>\n\n"
 *   llama3             "<|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED<|eot_id|>", then
 *                      the assistant header; no <|begin_of_text|>: the tokenizer adds BOS
 *   mistral-v1         " [INST] " opens a turn; system "CONTENT\n\n", user "CONTENT [/INST]",
 *                      assistant " CONTENT</s>" (which closes the turn)
 *   mistral-v3         the same without the leading space and with "CONTENT[/INST]"; the
 *                      assistant's content is trimmed
 *   mistral-v3-tekken  as mistral-v3 with no space after "[INST]" or before an assistant
 *                      reply, and nothing trimmed
 *   mistral-v7         "[SYSTEM_PROMPT] C[/SYSTEM_PROMPT]", "[INST] C[/INST]", " C</s>"
 *   gemma              "<start_of_turn>ROLE\nTRIMMED<end_of_turn>\n" with "model" for the
 *                      assistant; system messages are trimmed, joined, and put (followed by
 *                      "\n\n") at the start of the next non-model turn
 *   phi3               "<|ROLE|>\nCONTENT<|end|>\n", then "<|assistant|>\n"
 *   llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip
 *                      "[INST] " ... "CONTENT [/INST]", assistant "CONTENT</s>"; -sys wraps
 *                      the system message in <<SYS>> (plain: "CONTENT\n"), -bos opens later
 *                      turns with "<s>[INST] ", -strip trims every message
 * Mistral and llama2 families have no generation prompt (a user turn already ends with
 * "[/INST]"). Roles other than system/user go through as their names ("tool"), as in
 * llama.cpp (mistral and llama2 treat them as the assistant).
 *
 * Detection (fc_chat_template_detect): a family name (fc_chat_template_names) is that
 * family; otherwise llama.cpp's rules in llama.cpp's order, for example:
 * "<|im_start|>" is ChatML (Qwen3 with "enable_thinking"; Phi-4's "<|im_sep|>",
 * SmolVLM's "<end_of_utterance>" and a "<think>" without "enable_thinking" are not
 * supported); a text starting with "mistral" or containing "[INST]" is mistral-v7 with
 * "[SYSTEM_PROMPT]", mistral-v1/-v3/-v3-tekken with "[AVAILABLE_TOOLS]" or
 * "' [INST] ' + system_message", else one of the llama2 variants; "<|assistant|>" +
 * "<|end|>" is phi3; "<start_of_turn>" is gemma; "<|start_header_id|>" +
 * "<|end_header_id|>" is llama3. A text llama.cpp would give another family (Zephyr,
 * Vicuna, Command-R, ...) or none is an FC_ERR_UNSUPPORTED error naming it, the reason
 * and the supported names. `fucina chat --chat-template NAME` overrides detection.
 *
 * Conversations. An fc_chat holds the messages and drives a session: each
 * fc_chat_generate renders the whole conversation with the generation
 * prompt, tokenizes it (fc_chat_tokenize: control-token strings in message
 * contents stay text unless FC_CHAT_SPECIAL_IN_CONTENT is given), keeps the
 * longest token prefix the session already holds (fc_llm_session_truncate
 * to it) and evaluates only the rest, then samples until an
 * end-of-generation token (fc_chat_template_eog_tokens: EOS and the
 * family's end of turn), a stop string, max_tokens or a full context. Text
 * streams through a callback in whole UTF-8 characters; text that may still
 * be the start of a stop string is held back until it is known not to be,
 * so no part of a stop string is ever emitted. The reply (without the stop
 * string) is appended to the conversation as an assistant message.
 *
 * Single-threaded: one chat per session, and nothing else may evaluate on
 * that session while the chat uses it (the chat tracks what it holds). */
#ifndef FUCINA_CHAT_H
#define FUCINA_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "fucina/sampler.h"
#include "fucina/status.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_chat_role {
    FC_CHAT_SYSTEM = 0,
    FC_CHAT_USER = 1,
    FC_CHAT_ASSISTANT = 2,
    FC_CHAT_TOOL = 3,
} fc_chat_role;

/* "system", "user", "assistant", "tool"; NULL for a value out of range. */
FC_API const char *fc_chat_role_name(fc_chat_role role);

/* A function call an assistant message made (OpenAI's tool_calls[i]). */
typedef struct fc_chat_tool_call {
    const char *id;        /* the call's id (NULL: none) */
    const char *name;      /* the function */
    const char *arguments; /* its arguments: a JSON object's text, written as given */
} fc_chat_tool_call;

typedef struct fc_chat_message {
    fc_chat_role role;
    const char *content; /* NUL-terminated UTF-8 ("" for an assistant turn that only calls tools) */
    /* assistant: the calls it made, in order (n_tool_calls 0: none) */
    const fc_chat_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_call_id; /* tool: the call this result answers (NULL: not given) */
} fc_chat_message;

/* Template families, named as llama.cpp names them. */
typedef enum fc_chat_template {
    FC_CHAT_TEMPLATE_CHATML = 0,
    FC_CHAT_TEMPLATE_QWEN3 = 1,
    FC_CHAT_TEMPLATE_LLAMA3 = 2,
    FC_CHAT_TEMPLATE_MISTRAL_V1 = 3,
    FC_CHAT_TEMPLATE_MISTRAL_V3 = 4,
    FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN = 5,
    FC_CHAT_TEMPLATE_MISTRAL_V7 = 6,
    FC_CHAT_TEMPLATE_GEMMA = 7,
    FC_CHAT_TEMPLATE_PHI3 = 8,
    FC_CHAT_TEMPLATE_LLAMA2 = 9,
    FC_CHAT_TEMPLATE_LLAMA2_SYS = 10,
    FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS = 11,
    FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP = 12,
} fc_chat_template;

/* "chatml", "qwen3", "llama3", "mistral-v1", "mistral-v3", "mistral-v3-tekken",
 * "mistral-v7", "gemma", "phi3", "llama2", "llama2-sys", "llama2-sys-bos",
 * "llama2-sys-strip"; NULL for a value out of range. */
FC_API const char *fc_chat_template_name(fc_chat_template t);
/* Every family name, comma-separated in enum order ("chatml, qwen3, ..."), for
 * messages; static storage. */
FC_API const char *fc_chat_template_names(void);
/* The family of a name (exactly one of fc_chat_template_names). An unknown
 * name is an FC_ERR_UNSUPPORTED error naming it and listing the names;
 * FC_ERR_INVALID_ARG for NULL. */
FC_API fc_status fc_chat_template_from_name(fc_ctx *ctx, const char *name, fc_chat_template *out);
/* The reference Jinja text of a family, for writers of GGUF files (static
 * storage; NULL for a value out of range). Each is detected as its own family
 * by fc_chat_template_detect and by llama.cpp. qwen3: Qwen3-0.6B's
 * tokenizer_config.json chat_template; llama3: Meta-Llama-3-8B-Instruct's;
 * mistral-v3: Mistral-7B-Instruct-v0.3's; gemma: gemma-3-it's; phi3:
 * Phi-3-mini-4k-instruct's; mistral-v1 / -v3-tekken: Mistral's v1 / v3-tekken
 * templates; mistral-v7: Mistral-Large-Instruct-2411's basic one; llama2:
 * Mistral-7B-Instruct-v0.1's; llama2-sys-strip: Llama-2-chat's; chatml,
 * llama2-sys, llama2-sys-bos: small templates rendering what the family renders. */
FC_API const char *fc_chat_template_text(fc_chat_template t);
/* The family of a Jinja template text, or of a family name (see the top of
 * this file). FC_ERR_UNSUPPORTED (naming the start of the text, the reason
 * and the supported names) when it is none we render; FC_ERR_INVALID_ARG for
 * NULL. */
FC_API fc_status fc_chat_template_detect(fc_ctx *ctx, const char *text, fc_chat_template *out);
/* tokenizer.chat_template of an open GGUF: *text points into g (valid while
 * g is open, NOT NUL-terminated: use *len), or is NULL when the key is
 * absent (not an error). A key of another type is an FC_ERR_FORMAT error. */
FC_API fc_status fc_chat_template_from_gguf(fc_ctx *ctx, fc_gguf *g, const char **text, size_t *len);
/* Open the GGUF at path and detect its template family. *found = 0 (and
 * *out untouched) when the file has no template: the caller chooses a
 * fallback, and should say so. Errors: the file cannot be read, or an
 * unsupported template (as fc_chat_template_detect). */
FC_API fc_status fc_chat_template_load(fc_ctx *ctx, const char *path, fc_chat_template *out, int *found);

#define FC_CHAT_ADD_GENERATION_PROMPT 1u /* end with the assistant's header */
#define FC_CHAT_NO_THINK 2u              /* qwen3: enable_thinking=false (no effect on other families) */
/* fc_chat_tokenize / fc_chat: read special-token strings inside message
 * contents as those tokens, as llama.cpp does (no effect on rendering) */
#define FC_CHAT_SPECIAL_IN_CONTENT 4u

/* Render msgs[0..n) into a new NUL-terminated string (free() it); *len
 * (may be NULL) receives its length. Families without a generation prompt
 * (mistral, llama2) ignore FC_CHAT_ADD_GENERATION_PROMPT, as llama.cpp does. A NULL content or a role out of range
 * is an FC_ERR_INVALID_ARG error naming the message. */
FC_API fc_status fc_chat_render(fc_ctx *ctx, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                                unsigned flags, char **out, size_t *len);

/* Rendering options; a zeroed struct is fc_chat_render's defaults. */
typedef struct fc_chat_render_options {
    unsigned flags; /* as fc_chat_render's */
    /* the tools the model may call: each one's definition as JSON text, OpenAI's
     * {"type": "function", "function": {"name", "description", "parameters"}} */
    const char *const *tools;
    size_t n_tools;
} fc_chat_render_options;

/* How a family's model writes a tool call (fc_chat_template_tool_format).
 * HERMES (qwen3, chatml: Qwen2.5/Qwen3, Hermes 2 Pro): the tools are listed
 * in the system turn inside <tools></tools>, one JSON object per line, as
 * Qwen3's template writes them, and each call is
 *   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 * (several separated by "\n"); results come back as user turns of
 * <tool_response> blocks. GENERIC (every other family): the tools and the
 * reply format are described in a system message, and the whole reply is
 * one JSON object, {"tool_calls": [{"name": "NAME", "arguments": ARGS}, ...]}
 * or {"response": "TEXT"}; results are "tool" turns. LLAMA3_JSON (llama3:
 * Llama 3.1 / 3.2 / 3.3 Instruct's template, its JSON tool calling): the
 * system turn opens "Environment: ipython" and the dated header, the tools
 * (indented JSON) lead the first user turn with Meta's instructions, and a
 * call is the whole reply, one per message:
 *   {"name": "NAME", "parameters": ARGS}
 * results are "ipython" turns holding the result as a JSON string. Llama's
 * built-in tools (<|python_tag|>, brave_search, code_interpreter) are not
 * offered. MISTRAL (mistral-v3: Mistral 7B v0.3; mistral-v3-tekken: Mistral
 * Nemo): their templates' [AVAILABLE_TOOLS] before the last user turn, the
 * calls as one list after the [TOOL_CALLS] control token,
 *   [TOOL_CALLS] [{"name": "NAME", "arguments": ARGS}, ...]
 * (tekken without the space), written back with each call's 9-character
 * id, and results as [TOOL_RESULTS] blocks naming it. */
typedef enum fc_chat_tool_format {
    FC_CHAT_TOOLS_HERMES = 0,
    FC_CHAT_TOOLS_GENERIC = 1,
    FC_CHAT_TOOLS_LLAMA3_JSON = 2,
    FC_CHAT_TOOLS_MISTRAL = 3,
} fc_chat_tool_format;
FC_API fc_chat_tool_format fc_chat_template_tool_format(fc_chat_template t);

/* The exact text of a call in a family's format, for a reader that splits a
 * reply as it streams (what the grammar forces and the renderer writes):
 *   open name_at NAME sep ARGS tail
 * with ARGS a JSON object. The call's JSON object starts obj_at bytes into
 * open and ends with tail's "}"; close follows it after optional blanks.
 * Text before a call, and calls after each other, are joined by newlines
 * (dropped when the reply is split). A list syntax (next non-NULL: Mistral)
 * opens once and lists its calls:
 *   open name_at NAME sep ARGS tail (next name_at NAME sep ARGS tail)* end
 * open_token: the control token open starts with, which a grammar names as
 * a token (NULL: open is text). */
typedef struct fc_chat_tool_syntax {
    const char *open;     /* where a call starts: the lazy grammar's trigger */
    const char *name_at;  /* from the end of open to the function name */
    const char *sep;      /* from the end of the name to the arguments */
    const char *tail;     /* after the arguments; each \x01 in it stands for one of [a-zA-Z0-9] */
    const char *close;    /* after the call's JSON object ("" when none) */
    const char *args_key; /* the member holding the arguments */
    size_t obj_at;        /* the call's JSON object starts this far into open */
    int max_calls;        /* 0: any number of calls; else at most this many a reply */
    const char *next;     /* a list syntax: between two calls of the list (NULL: not a list) */
    const char *end;      /* a list syntax: after its last call */
    const char *open_token;
} fc_chat_tool_syntax;
/* NULL for a family in the GENERIC format (and for t out of range). */
FC_API const fc_chat_tool_syntax *fc_chat_template_tool_syntax(fc_chat_template t);
/* p[0..n) against a syntax's tail: 1 it holds the whole tail, 0 it is a
 * beginning of it (a stream waits for more), -1 it is not. */
FC_API int fc_chat_tool_tail_match(const char *p, size_t n, const char *tail);

/* Which calls a reply may make (OpenAI's tool_choice; "none" is no tools). */
typedef enum fc_chat_tool_choice {
    FC_CHAT_TOOL_CHOICE_AUTO = 0,     /* the model decides: text, or calls */
    FC_CHAT_TOOL_CHOICE_REQUIRED = 1, /* calls only, at least one */
    FC_CHAT_TOOL_CHOICE_NAMED = 2,    /* calls of one function only */
} fc_chat_tool_choice;

/* Options of fc_chat_tools_grammar; a zeroed struct: auto, parallel calls. */
typedef struct fc_chat_tool_grammar_options {
    fc_chat_tool_choice choice;
    const char *name; /* FC_CHAT_TOOL_CHOICE_NAMED: the function */
    int single;       /* 1: at most one call (OpenAI's parallel_tool_calls false) */
} fc_chat_tool_grammar_options;

/* The grammar of a reply of family t that may call tools[0..n_tools)
 * (OpenAI's tool definitions, JSON text; each function's "parameters"
 * schema constrains its arguments through fc_json_schema_to_gbnf, a
 * missing one is any object). *trigger is NULL when the grammar holds from
 * the reply's first byte; otherwise (AUTO in a format with a syntax) the
 * reply is free text until the model writes *trigger (the syntax's open:
 * "<tool_call>", "{\"name\": \"", static storage), and
 * the grammar holds from the trigger's first byte on: feed the matcher the
 * trigger with fc_grammar_matcher_accept_bytes, then constrain the rest.
 * NULL + error naming the tool and the reason: a definition without a
 * function name, a name outside [a-zA-Z0-9_-]{1,64}, names given twice, a
 * NAMED choice naming no tool, a parameters schema the converter refuses. */
FC_API struct fc_grammar *fc_chat_tools_grammar(fc_ctx *ctx, fc_chat_template t, const char *const *tools,
                                                size_t n_tools, const fc_chat_tool_grammar_options *opt,
                                                const char **trigger);

/* A reply split into its text and its calls (fc_chat_parse_tool_calls). */
typedef struct fc_chat_tool_reply {
    char *content;           /* the text outside the calls ("" when none) */
    fc_chat_tool_call *calls; /* name, arguments and id malloc'd; id: the model's own (Mistral's), else NULL */
    size_t n_calls;
} fc_chat_tool_reply;

/* Parse a reply of family t written in its tool format. Hermes: every
 * <tool_call>...</tool_call> block holding {"name": S, "arguments": OBJECT
 * (or a string holding one)} is a call, the rest is content (a block that
 * does not parse stays content). Llama 3 JSON: the first {"name": S,
 * "parameters": OBJECT} object is the call, the text
 * around it content. Generic: {"tool_calls": [...]} or
 * {"response": S}; any other reply is all content. Free with
 * fc_chat_tool_reply_free. FC_ERR_OOM only. */
FC_API fc_status fc_chat_parse_tool_calls(fc_ctx *ctx, fc_chat_template t, const char *text, size_t len,
                                          fc_chat_tool_reply *out);
FC_API void fc_chat_tool_reply_free(fc_chat_tool_reply *r);

/* fc_chat_render with options (NULL: the defaults). With tools, or with
 * messages that carry tool calls, the family's tool format above is used.
 * A tool definition that is not a JSON object, or a call without a name or
 * with arguments that are not a JSON object, is an FC_ERR_INVALID_ARG
 * error naming it. */
FC_API fc_status fc_chat_render_ex(fc_ctx *ctx, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                                   const fc_chat_render_options *opt, char **out, size_t *len);

/* The tokens of fc_chat_render(t, msgs, n, flags) for the model of tok, into
 * a new array (free it with fc_tokens_free; *out is NULL when *n_out is 0),
 * with BOS / EOS added as the vocabulary asks (FC_TOKENIZE_ADD_SPECIAL).
 * Message contents are text: the strings of control tokens (<|im_end|>,
 * <|eot_id|>, <end_of_turn>, </s>, ...) are recognised only in the
 * template's own markup, so what a user types, or a reply re-rendered next
 * turn, can never open or close a turn. A token string with any byte from
 * a content stays text there; user-defined tokens (Qwen's <think>,
 * <tool_call>) are matched everywhere, as fc_tokenize always matches them.
 * The text between the matched control tokens, markup and content together,
 * is tokenized as one piece, as llama.cpp splits at special tokens, so a
 * conversation whose contents hold no control-token string gets exactly
 * llama.cpp's llama_tokenize(render, add_special, parse_special) tokens.
 * flags: FC_CHAT_ADD_GENERATION_PROMPT, FC_CHAT_NO_THINK (as fc_chat_render)
 * and FC_CHAT_SPECIAL_IN_CONTENT (contents parsed for control tokens too:
 * llama.cpp's behaviour, the whole rendering tokenized with parse_special).
 * FC_ERR_INVALID_ARG naming the argument: NULL tok / out / n_out, NULL msgs
 * with n > 0, unknown flags, a template or role out of range, a NULL
 * content; a byte the vocabulary cannot encode is FC_ERR_UNSUPPORTED. */
FC_API fc_status fc_chat_tokenize(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, const fc_chat_message *msgs,
                                  size_t n, unsigned flags, fc_token **out, size_t *n_out);
/* fc_chat_tokenize with options (NULL: the defaults; the tool definitions
 * and calls are content: read as text only). */
FC_API fc_status fc_chat_tokenize_ex(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t,
                                     const fc_chat_message *msgs, size_t n, const fc_chat_render_options *opt,
                                     fc_token **out, size_t *n_out);

/* The most tokens fc_chat_template_eog_tokens gives (EOS and up to 3
 * end-of-turn tokens). */
#define FC_CHAT_MAX_EOG_TOKENS 4
/* The tokens that end an assistant turn of family t in the vocabulary of
 * tok (what fc_chat stops at): the EOS, then the family's end-of-turn
 * tokens the vocabulary has (chatml/qwen3 <|im_end|> <|endoftext|>, llama3
 * <|eot_id|> <|eom_id|> <|end_of_text|>, gemma <end_of_turn>, phi3 <|end|>
 * <|endoftext|>, mistral and llama2 </s>), each once; those it lacks are
 * left out, so *n may be 0 (a vocabulary with no EOS and none of them).
 * out[0..*n) receives them. FC_ERR_INVALID_ARG naming the argument: NULL
 * tok / out / n, a template out of range, or cap smaller than the count
 * (*n is then the count; FC_CHAT_MAX_EOG_TOKENS is always enough). */
FC_API fc_status fc_chat_template_eog_tokens(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, fc_token *out,
                                             size_t cap, size_t *n);

/* ---- conversations ---- */
typedef struct fc_chat fc_chat;

typedef struct fc_chat_options {
    fc_chat_template tmpl;      /* the family to render with */
    unsigned flags;             /* FC_CHAT_NO_THINK, FC_CHAT_SPECIAL_IN_CONTENT */
    fc_sampler_params sampling; /* the sampler's parameters (fc_sampler_default_params) */
    int32_t max_tokens;         /* tokens per reply; <= 0: until the context is full */
    const char *const *stop;    /* stop strings (copied); NULL when n_stop = 0; empty strings are ignored */
    size_t n_stop;
    /* non-NULL: every reply is a sentence of this grammar (include/fucina/grammar.h), ended by the
     * family's end token once complete; borrowed: it must outlive the chat */
    const struct fc_grammar *grammar;
    /* with grammar: free text until the reply holds this (fc_grammar_matcher_set_trigger); NULL: from the start */
    const char *grammar_trigger;
} fc_chat_options;

/* {chatml, no flags, fc_sampler_default_params(), max_tokens 0, no stop strings} */
FC_API fc_chat_options fc_chat_default_options(void);

/* A conversation over model m evaluated on session s (both borrowed: they
 * must outlive the chat; s is reset now and then owned by the chat's
 * evaluations). ctx receives the errors of later calls and must outlive
 * the chat. NULL + error on a bad option (the sampler's are checked here). */
FC_API fc_chat *fc_chat_new(fc_ctx *ctx, const fc_llm_model *m, fc_llm_session *s, const fc_chat_options *opt);
FC_API void fc_chat_free(fc_chat *c);

/* Append a message (content is copied). FC_ERR_INVALID_ARG for a NULL
 * content or a role out of range. */
FC_API fc_status fc_chat_add(fc_ctx *ctx, fc_chat *c, fc_chat_role role, const char *content);
/* The messages so far (valid until the next call that changes them). */
FC_API const fc_chat_message *fc_chat_messages(const fc_chat *c, size_t *n);
/* Forget every message and the session's cache (the sampler is reset too). */
FC_API void fc_chat_clear(fc_chat *c);

/* Why a generation ended. */
typedef enum fc_chat_stop {
    FC_CHAT_STOP_EOG = 0,        /* an end-of-generation token */
    FC_CHAT_STOP_STRING = 1,     /* a stop string */
    FC_CHAT_STOP_MAX_TOKENS = 2, /* max_tokens generated */
    FC_CHAT_STOP_CONTEXT = 3,    /* the session is full */
    FC_CHAT_STOP_CALLBACK = 4,   /* on_text returned nonzero */
} fc_chat_stop;

typedef struct fc_chat_stats {
    int64_t n_prompt;  /* tokens of the rendered conversation */
    int64_t n_reused;  /* of them, already in the session's cache */
    int64_t n_eval;    /* of them, evaluated now (n_prompt - n_reused) */
    int64_t n_gen;     /* tokens sampled (the end-of-generation token included) */
    fc_chat_stop stop; /* why the reply ended */
    double prompt_ms;  /* fc_chat_generate: milliseconds in the prefill (render, tokenize, evaluate) */
    double gen_ms;     /* fc_chat_generate: milliseconds sampling and evaluating the reply */
} fc_chat_stats;

/* Called with each piece of the reply as it becomes final (whole UTF-8
 * characters, never part of a stop string); return nonzero to stop. */
typedef int (*fc_chat_on_text)(const char *text, size_t len, void *user);

/* Bring the session to the rendered conversation (with the generation
 * prompt), evaluating only what it does not hold, and return the last
 * position's logits (n_vocab floats, valid until the next call on c; NULL
 * on error). stats (may be NULL) receives n_prompt, n_reused, n_eval.
 * Errors: the conversation does not fit the context (naming both sizes),
 * an evaluation failure. */
FC_API const float *fc_chat_prefill(fc_ctx *ctx, fc_chat *c, fc_chat_stats *stats);
/* fc_chat_prefill, then sample the assistant's reply, streaming it to
 * on_text (may be NULL), and append it to the conversation. *reply (may be
 * NULL) receives the reply text (owned by c, valid until the next call that
 * changes the messages). stats may be NULL. */
FC_API fc_status fc_chat_generate(fc_ctx *ctx, fc_chat *c, fc_chat_on_text on_text, void *user,
                                  const char **reply, fc_chat_stats *stats);
/* The tokens the session holds for this chat (valid until the next call
 * on c). */
FC_API const fc_token *fc_chat_tokens(const fc_chat *c, size_t *n);

/* ---- stop strings (what fc_chat_generate uses; for other generators) ----
 * Given the generated text not yet shown, pend[0..n), decide how much may
 * be shown now. Returns 1 when a stop string occurs: *emit is the offset of
 * the earliest occurrence (show pend[0..*emit) and stop). Otherwise returns
 * 0 and *emit is the length of the longest prefix after which no suffix can
 * still grow into a stop string (show it; keep the rest pending). Empty
 * and NULL stop strings are ignored; n_stop may be 0, and a NULL `stop`
 * means none whatever n_stop is. */
FC_API int fc_chat_stop_scan(const char *pend, size_t n, const char *const *stop, size_t n_stop, size_t *emit);

#ifdef __cplusplus
}
#endif
#endif
