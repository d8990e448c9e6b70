/* SPDX-License-Identifier: MIT */
/* The server's streamed tool-call splitter (src/serve/tools.c) against the
 * library's whole-reply parse (fc_chat_parse_tool_calls): for replies with
 * text, one or several calls, braces and tags inside argument strings, cut
 * into chunks at every size from 1 byte up, the content and the calls the
 * stream emits must add up to the parse of the whole reply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/chat.h"
#include "serve/tools.h"

typedef struct got {
    fj_buf content;
    fj_buf args[8];
    char names[8][65];
    char ids[8][40];
    size_t n_calls;
    int order_ok;
} got;

static void on_content(void *u, const char *t, size_t n) { fj_raw(&((got *)u)->content, t, n); }

static void on_call(void *u, size_t index, const char *id, const char *name, const char *args, size_t n) {
    got *g = u;
    cr_assert_lt(index, 8);
    if (id) {
        if (index != g->n_calls) g->order_ok = 0; /* named once, in order */
        snprintf(g->ids[index], sizeof g->ids[index], "%s", id);
        snprintf(g->names[index], sizeof g->names[index], "%s", name);
        g->n_calls = index + 1;
    } else if (index + 1 != g->n_calls) {
        g->order_ok = 0; /* arguments only for the call being written */
    }
    fj_raw(&g->args[index], args, n);
}

static void check(fc_chat_template t, const char *reply) {
    fc_chat_tool_reply want;
    cr_assert_eq(fc_chat_parse_tool_calls(NULL, t, reply, strlen(reply), &want), FC_OK);
    const size_t n = strlen(reply);
    for (size_t chunk = 1; chunk <= n; chunk++) {
        got g = {.order_ok = 1};
        srv_tool_stream s;
        srv_tool_stream_init(&s, t, 42);
        const srv_tool_sink k = {&g, on_content, on_call};
        for (size_t at = 0; at < n; at += chunk) srv_tool_stream_push(&s, reply + at, at + chunk > n ? n - at : chunk, &k);
        srv_tool_stream_end(&s, &k);
        fj_raw(&g.content, "", 1);
        cr_expect_str_eq(g.content.p, want.content, "chunk %zu of '%s'", chunk, reply);
        cr_expect_eq(g.n_calls, want.n_calls, "chunk %zu of '%s'", chunk, reply);
        cr_expect(g.order_ok, "chunk %zu: deltas out of order", chunk);
        for (size_t i = 0; i < g.n_calls && i < want.n_calls; i++) {
            fj_raw(&g.args[i], "", 1);
            cr_expect_str_eq(g.names[i], want.calls[i].name, "chunk %zu call %zu", chunk, i);
            cr_expect_str_eq(g.args[i].p, want.calls[i].arguments, "chunk %zu call %zu", chunk, i);
            char id[40];
            srv_tool_call_id(42, i, id);
            cr_expect_str_eq(g.ids[i], id);
        }
        fj_buf_free(&g.content);
        for (size_t i = 0; i < 8; i++) fj_buf_free(&g.args[i]);
        srv_tool_stream_free(&s);
    }
    fc_chat_tool_reply_free(&want);
}

Test(serve_tools, hermes_stream_equals_the_whole_parse) {
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 3}}\n</tool_call>");
    check(FC_CHAT_TEMPLATE_QWEN3, "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                                  "<tool_call>\n{\"name\": \"b-2\", \"arguments\": {\"s\": \"} ]\\\" </tool_call> {\", "
                                  "\"n\": [1, {\"x\": [2]}]}}\n</tool_call>");
    check(FC_CHAT_TEMPLATE_CHATML, "no calls at all, but a < and <tool and \n\n newlines\n");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\nthen text after");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nthen\n\ntext\n");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>not a call</tool_call> and text");
    check(FC_CHAT_TEMPLATE_QWEN3, "a<tool_call>junk</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>");
    check(FC_CHAT_TEMPLATE_QWEN3, "");
    /* cut short by max_tokens or a stop sequence: a call with the arguments it got, either way */
    check(FC_CHAT_TEMPLATE_QWEN3, "x\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":1}");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\"");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_");
    check(FC_CHAT_TEMPLATE_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arg");
}

Test(serve_tools, llama3_stream_equals_the_whole_parse) {
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 3}}");
    check(FC_CHAT_TEMPLATE_LLAMA3, "Let me look.\n{\"name\": \"a-1\", \"parameters\": {\"s\": \"} {\\\"name\\\": \\\"x\\\"\", "
                                   "\"n\": [1, {\"x\": [2]}]}}");
    /* one call a reply: a second one is text */
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"f\", \"parameters\": {}}\n{\"name\": \"g\", \"parameters\": {}}");
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"x\": 1}} and text after");
    check(FC_CHAT_TEMPLATE_LLAMA3, "braces {} and {\"name\" and {\"name\": \"\" are text");
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"f\", \"arguments\": {}}");
    check(FC_CHAT_TEMPLATE_LLAMA3, "");
    /* cut short by max_tokens or a stop sequence */
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"a\": [1, {\"b\"");
    check(FC_CHAT_TEMPLATE_LLAMA3, "{\"name\": \"f\", \"param");
}

Test(serve_tools, mistral_stream_equals_the_whole_parse) {
    const fc_chat_template v3 = FC_CHAT_TEMPLATE_MISTRAL_V3, tk = FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN;
#define ID(x) ", \"id\": \"" x "\"}"
    check(v3, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 3}" ID("a1B2c3D4e") "]");
    check(tk, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}" ID("000000000") "]");
    check(v3, "Sure.\n[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}" ID("aaaaaaaaa") ", {\"name\": \"b-2\", \"arguments\": "
              "{\"s\": \"}, {\\\"name\\\": \\\"x\\\"] [TOOL_CALLS] [\", \"n\": [1, {\"x\": [2]}]}" ID("bbbbbbbbb")
              "]\n\nafter\nthe list");
    check(v3, "no calls, but [TOOL and [TOOL_CALLS] then text");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}" ID("fffffffff") ", junk] then [TOOL_CALLS] [{\"name\": \"g\", "
              "\"arguments\": {}" ID("ggggggggg") "]");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}x and [{\"name\"");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}, \"id\": \"short\"}]");
    check(tk, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}" ID("fffffffff") "][TOOL_CALLS][{\"name\": \"g\", "
              "\"arguments\": {}" ID("ggggggggg") "]");
    check(v3, "");
    /* cut short: in the arguments, in the id, after a call, inside the next head */
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\"");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}, \"id\": \"abc");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}" ID("fffffffff"));
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}" ID("fffffffff") ",");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}" ID("fffffffff") ", {\"name\": \"g\", \"argu");
    check(v3, "[TOOL_CALLS] [{\"name\": \"f\", \"arg");
#undef ID
}

/* What the parse reads from Mistral replies, checked directly: the calls, their
 * own ids, the text around them. */
Test(serve_tools, mistral_parse_reads_calls_ids_and_text) {
    const char *r = "Sure.\n[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": [1, \"]\"]}, \"id\": \"Abc123xyZ\"}, "
                    "{\"name\": \"b\", \"arguments\": {}, \"id\": \"000000001\"}]\nafter";
    fc_chat_tool_reply p;
    cr_assert_eq(fc_chat_parse_tool_calls(NULL, FC_CHAT_TEMPLATE_MISTRAL_V3, r, strlen(r), &p), FC_OK);
    cr_expect_str_eq(p.content, "Sure.after");
    cr_assert_eq(p.n_calls, 2);
    cr_expect_str_eq(p.calls[0].name, "a");
    cr_expect_str_eq(p.calls[0].arguments, "{\"x\": [1, \"]\"]}");
    cr_expect_str_eq(p.calls[0].id, "Abc123xyZ");
    cr_expect_str_eq(p.calls[1].name, "b");
    cr_expect_str_eq(p.calls[1].id, "000000001");
    fc_chat_tool_reply_free(&p);
}

Test(serve_tools, generic_stream_equals_the_whole_parse) {
    check(FC_CHAT_TEMPLATE_MISTRAL_V7, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}, {\"name\": \"g\", "
                                   "\"arguments\": {}}]}");
    check(FC_CHAT_TEMPLATE_GEMMA, "{\"response\": \"just text \\u00e9\"}");
    check(FC_CHAT_TEMPLATE_PHI3, "not JSON at all");
}
