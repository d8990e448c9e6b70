/* SPDX-License-Identifier: MIT */
/* `fucina tokenize` (src/cli/cmd_tokenize.c) run as a process, its output
 * parsed and compared with llama.cpp through the oracle (libllama loaded
 * with vocab_only), called as llama-tokenize calls it:
 * - the ids: llama_tokenize with add_special = the vocabulary's add_bos and
 *   not --no-bos, parse_special = not --no-parse-special;
 * - the pieces: llama_token_to_piece with special = true and no lstrip
 *   (common_token_to_piece), cut at the first NUL (llama-tokenize prints
 *   the piece with %s);
 * - the text: escapes processed by hand here (common's
 *   string_process_escapes rules) unless --no-escape.
 * The whole default output ("%6d -> 'PIECE'" lines) is built from those and
 * compared byte for byte; where the text has no specials added, the uncut
 * pieces must also spell it. Models: `fucina make-model` (the CLI; Qwen's
 * BPE vocabularies), rewritten here where a test needs add_bos / add_eos,
 * and a tokenizer-only "llama" GGUF with the model writer's Llama-2-style
 * SentencePiece vocabulary (no tensors at all). Skipped with the reason
 * when the oracle or the CLI (FUCINA_FUCINA_CLI, set by ctest) is absent;
 * the usage errors need no oracle. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "llm/make_model.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(cli_tokenize, 1, "fc_cli_tokenize_");

static const char *cli(void) {
    const char *p = getenv("FUCINA_FUCINA_CLI");
    if (!p) cr_skip_test("FUCINA_FUCINA_CLI is not set (run through ctest)");
    return p;
}

/* text in single quotes for /bin/sh (a quote becomes '\'') */
static const char *shq(const char *s) {
    static char buf[4][8192];
    static int k;
    char *b = buf[k++ & 3];
    size_t o = 0;
    b[o++] = '\'';
    for (; *s; s++) {
        cr_assert_lt(o, sizeof buf[0] - 8, "text too long to quote");
        if (*s == '\'') {
            memcpy(b + o, "'\\''", 4);
            o += 4;
        } else {
            b[o++] = *s;
        }
    }
    b[o++] = '\'';
    b[o] = 0;
    return b;
}

/* The command's stdout (in out) and stderr (in err), its exit status. */
static char out[1 << 18], err[1 << 14];
static int tokenize(const char *args) {
    char cmd[16384];
    char ef[512]; /* not fct_path: the caller's paths live in its buffers */
    snprintf(ef, sizeof ef, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' tokenize %s 2>'%s'", cli(), args, ef);
    const int rc = fct_run(cmd, out, sizeof out);
    size_t n;
    unsigned char *e = fct_read_file(ef, &n);
    if (n >= sizeof err) n = sizeof err - 1;
    memcpy(err, e, n);
    err[n] = 0;
    free(e);
    return rc;
}

/* A tiny make-model model at dir/name (n_vocab 0: the small vocabulary). */
static const char *make_model(const char *name, long n_vocab) {
    static char path[4][512];
    static int k;
    char *p = path[k++ & 3], cmd[2048];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    char nv[64] = "";
    if (n_vocab) snprintf(nv, sizeof nv, " --n-vocab %ld", n_vocab);
    snprintf(cmd, sizeof cmd, "'%s' make-model --preset tiny --seed 3%s '%s' 2>&1", cli(), nv, p);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
    return p;
}

/* A copy of src at dir/name with tokenizer.ggml.add_bos_token and
 * add_eos_token set to add_bos / add_eos (-1: as in src). */
static const char *rewrite(const char *src, const char *name, int add_bos, int add_eos) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fc_gguf *g = fc_gguf_open(ctx, src, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_not_null(w, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) {
        const char *key = fc_gguf_kv_key(g, i);
        if ((add_bos >= 0 && !strcmp(key, "tokenizer.ggml.add_bos_token")) ||
            (add_eos >= 0 && !strcmp(key, "tokenizer.ggml.add_eos_token")))
            continue;
        cr_assert_eq(fc_gguf_writer_copy_kv(w, g, i), FC_OK, "%s", fc_ctx_error(ctx));
    }
    if (add_bos >= 0) cr_assert_eq(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos), FC_OK);
    if (add_eos >= 0) cr_assert_eq(fc_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos), FC_OK);
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        cr_assert_eq(fc_gguf_writer_add_raw(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data, ti.nbytes), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    fc_gguf_close(g);
    return path;
}

/* ---- references ------------------------------------------------------------------------- */

typedef struct ref {
    lp_oracle o;
    struct llama_model *m;
    fc_gguf *g; /* the vocabulary's strings, to find ids by text */
    uint64_t n_vocab;
} ref;

static ref ref_open(const char *path) {
    ref r;
    r.o = lp_get_oracle();
    struct llama_model_params mp = r.o.model_defaults();
    mp.vocab_only = 1;
    r.m = r.o.load(path, mp);
    cr_assert_not_null(r.m, "llama.cpp cannot load %s (FCT_LLAMA_VERBOSE=1 shows its log)", path);
    r.g = fc_gguf_open(ctx, path, 0);
    cr_assert_not_null(r.g, "%s", fc_ctx_error(ctx));
    int et;
    cr_assert_eq(fc_gguf_get_arr(r.g, "tokenizer.ggml.tokens", &et, &r.n_vocab), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq((int64_t)r.n_vocab, r.o.vocab_n_tokens(r.o.get_vocab(r.m)));
    return r;
}

static void ref_close(ref *r) {
    r->o.model_free(r->m);
    fc_gguf_close(r->g);
}

/* llama_tokenize of text[0..len) into ids (cap entries); the count. */
static int ref_ids(const ref *r, const char *text, size_t len, int add_special, int parse_special, int32_t *ids,
                   int cap) {
    const int n = r->o.tokenize(r->o.get_vocab(r->m), text, (int32_t)len, ids, cap, add_special, parse_special);
    cr_assert_geq(n, 0, "llama_tokenize needs %d ids, the test gives %d", -n, cap);
    return n;
}

/* The piece llama-tokenize prints for id: llama_token_to_piece with
 * special = true and no lstrip (common_token_to_piece's defaults), cut at
 * the first NUL; its uncut length in *full. */
static size_t ref_piece(const ref *r, int32_t id, char *p, size_t cap, size_t *full) {
    const int32_t n = r->o.token_to_piece(r->o.get_vocab(r->m), id, p, (int32_t)cap, 0, true);
    cr_assert_geq(n, 0, "llama_token_to_piece(%d) needs %d bytes", id, -n);
    *full = (size_t)n;
    const char *nul = memchr(p, 0, (size_t)n);
    return nul ? (size_t)(nul - p) : (size_t)n;
}

/* The default output for ids: "%6d -> 'PIECE'\n" each, into buf. Checks
 * that the uncut pieces spell `text` when want_text is not NULL. */
static void ref_default(const ref *r, const int32_t *ids, int n, char *buf, size_t cap, const char *want_text,
                        size_t want_len) {
    static char spelled[1 << 16];
    size_t o = 0, so = 0;
    for (int i = 0; i < n; i++) {
        char piece[512];
        size_t full, len = ref_piece(r, ids[i], piece, sizeof piece, &full);
        int w = snprintf(buf + o, cap - o, "%6d -> '", ids[i]);
        cr_assert(w > 0 && o + (size_t)w + len + 3 < cap);
        o += (size_t)w;
        memcpy(buf + o, piece, len);
        o += len;
        memcpy(buf + o, "'\n", 2);
        o += 2;
        cr_assert_lt(so + full, sizeof spelled);
        memcpy(spelled + so, piece, full);
        so += full;
    }
    buf[o] = 0;
    if (want_text) {
        cr_assert_eq(so, want_len, "the pieces spell %zu bytes, the text has %zu", so, want_len);
        cr_assert(!memcmp(spelled, want_text, so), "the pieces do not spell the text");
    }
}

/* "[a, b, c]\n" */
static void ref_list(const int32_t *ids, int n, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n; i++) o += (size_t)snprintf(buf + o, cap - o, i ? ", %d" : "%d", ids[i]);
    snprintf(buf + o, cap - o, "]\n");
}

/* Runs args and checks exit 0, an empty stderr and stdout == want. */
static void expect_output(const char *args, const char *want) {
    const int rc = tokenize(args);
    cr_assert_eq(rc, 0, "tokenize %s: exit %d\n%s", args, rc, err);
    cr_expect_str_empty(err, "tokenize %s wrote to stderr:\n%s", args, err);
    cr_expect_str_eq(out, want, "tokenize %s", args);
}

static int32_t find_id(const ref *r, const char *text) {
    for (uint64_t i = 0; i < r->n_vocab; i++) {
        const char *s;
        size_t len;
        cr_assert_eq(fc_gguf_get_arr_str(r->g, "tokenizer.ggml.tokens", i, &s, &len), FC_OK);
        if (len == strlen(text) && !memcmp(s, text, len)) return (int32_t)i;
    }
    cr_assert_fail("no token '%s' in the vocabulary", text);
    return -1;
}

static const char *const corpus[] = {
    "Hello world, the model is a tensor.\n\n  12 + 3 = 15<|im_end|>\n<|im_start|>assistant",
    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and it's 'quoted'\r\n\t x",
    "   leading spaces, trailing tab\t",
};

/* ---- the tests -------------------------------------------------------------------------- */

static void default_format_on(const char *path) {
    ref r = ref_open(path);
    static char want[1 << 18];
    int32_t ids[4096];
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        const char *t = corpus[c];
        const int n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
        cr_assert_gt(n, 0);
        ref_default(&r, ids, n, want, sizeof want, t, strlen(t));
        char args[8192];
        snprintf(args, sizeof args, "'%s' -p %s", path, shq(t));
        expect_output(args, want);
        snprintf(args, sizeof args, "-m '%s' --log-disable --prompt %s", path, shq(t));
        expect_output(args, want);
    }
    ref_close(&r);
}

Test(cli_tokenize, default_format_ids_and_pieces) {
    default_format_on(make_model("m.gguf", 0));
}

/* Qwen3's 151936-id layout: words are multi-byte tokens, the added tokens
 * (<think>, <tool_call>) user-defined. */
Test(cli_tokenize, default_format_qwen_vocabulary) {
    const char *path = make_model("q.gguf", 151936);
    default_format_on(path);
    ref r = ref_open(path);
    static char want[1 << 16];
    int32_t ids[512];
    const char *t = "<think>\n</think><tool_call>{\"name\": \"f\"}</tool_call><|endoftext|>";
    const int n = ref_ids(&r, t, strlen(t), 0, 1, ids, 512);
    ref_default(&r, ids, n, want, sizeof want, t, strlen(t));
    char args[4096];
    snprintf(args, sizeof args, "'%s' -p %s", path, shq(t));
    expect_output(args, want);
    ref_close(&r);
}

Test(cli_tokenize, ids_and_show_count) {
    const char *path = make_model("m.gguf", 0);
    ref r = ref_open(path);
    static char want[1 << 17], list[1 << 16];
    int32_t ids[4096];
    const char *t = corpus[0];
    const int n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
    ref_list(ids, n, list, sizeof list);
    char args[8192];
    snprintf(args, sizeof args, "'%s' -p %s --ids", path, shq(t));
    expect_output(args, list);
    snprintf(args, sizeof args, "'%s' --ids --show-count -p %s", path, shq(t));
    snprintf(want, sizeof want, "%sTotal number of tokens: %d\n", list, n);
    expect_output(args, want);
    /* the count after the default lines */
    ref_default(&r, ids, n, want, sizeof want, t, strlen(t));
    snprintf(want + strlen(want), sizeof want - strlen(want), "Total number of tokens: %d\n", n);
    snprintf(args, sizeof args, "'%s' -p %s --show-count", path, shq(t));
    expect_output(args, want);
    /* an empty text */
    snprintf(args, sizeof args, "'%s' -p '' --ids --show-count", path);
    expect_output(args, "[]\nTotal number of tokens: 0\n");
    snprintf(args, sizeof args, "'%s' -p ''", path);
    expect_output(args, "");
    /* one token */
    const int n1 = ref_ids(&r, "Hello", 5, 0, 1, ids, 4096);
    cr_assert_eq(n1, 1);
    snprintf(want, sizeof want, "[%d]\n", ids[0]);
    snprintf(args, sizeof args, "'%s' -p Hello --ids", path);
    expect_output(args, want);
    ref_close(&r);
}

/* BOS is added exactly when the vocabulary asks for it and --no-bos is not
 * given; EOS only along with it (llama-tokenize's add_special = add_bos). */
Test(cli_tokenize, no_bos) {
    const char *base = make_model("m.gguf", 0);
    static char want[1 << 16];
    int32_t ids[4096];
    const char *t = "Hello world";
    struct {
        int add_bos, add_eos;
    } cases[] = {{0, -1}, {1, -1}, {1, 1}, {0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[64];
        snprintf(name, sizeof name, "bos%d_eos%d.gguf", cases[c].add_bos, cases[c].add_eos);
        const char *path = rewrite(base, name, cases[c].add_bos, cases[c].add_eos);
        ref r = ref_open(path);
        const int32_t bos = find_id(&r, "<|endoftext|>"); /* make-model's BOS id */
        char args[4096];
        /* default */
        int n = ref_ids(&r, t, strlen(t), cases[c].add_bos, 1, ids, 4096);
        cr_assert_eq(ids[0] == bos, cases[c].add_bos, "%s: llama.cpp's first id %d, BOS %d", name, ids[0], bos);
        ref_list(ids, n, want, sizeof want);
        snprintf(args, sizeof args, "'%s' -p %s --ids", path, shq(t));
        expect_output(args, want);
        ref_default(&r, ids, n, want, sizeof want, NULL, 0);
        snprintf(args, sizeof args, "'%s' -p %s", path, shq(t));
        expect_output(args, want);
        /* --no-bos */
        n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
        cr_assert_neq(ids[0], bos);
        ref_list(ids, n, want, sizeof want);
        snprintf(args, sizeof args, "'%s' -p %s --ids --no-bos", path, shq(t));
        expect_output(args, want);
        ref_close(&r);
    }
}

Test(cli_tokenize, no_parse_special) {
    const char *path = make_model("m.gguf", 0);
    ref r = ref_open(path);
    static char want[1 << 16];
    int32_t ids[4096], plain[4096];
    const char *t = "Hi<|im_end|>\n<|im_start|>user";
    const int32_t im_end = find_id(&r, "<|im_end|>");
    const int n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
    const int np = ref_ids(&r, t, strlen(t), 0, 0, plain, 4096);
    int has = 0, has_plain = 0;
    for (int i = 0; i < n; i++) has |= ids[i] == im_end;
    for (int i = 0; i < np; i++) has_plain |= plain[i] == im_end;
    cr_assert(has && !has_plain && np > n, "llama.cpp: %d ids with <|im_end|> parsed, %d without", n, np);
    char args[4096];
    ref_list(plain, np, want, sizeof want);
    snprintf(args, sizeof args, "'%s' -p %s --ids --no-parse-special", path, shq(t));
    expect_output(args, want);
    ref_default(&r, plain, np, want, sizeof want, t, strlen(t));
    snprintf(args, sizeof args, "'%s' --no-parse-special -p %s", path, shq(t));
    expect_output(args, want);
    ref_list(ids, n, want, sizeof want);
    snprintf(args, sizeof args, "'%s' -p %s --ids", path, shq(t));
    expect_output(args, want);
    ref_close(&r);
}

/* Escapes are processed (llama.cpp's rules) unless --no-escape: \n \r \t
 * \' \" \\ and \xHH; an unknown one and a trailing backslash stay. A NUL
 * from \x00 is a token whose piece prints empty (cut at the NUL). */
Test(cli_tokenize, escapes) {
    const char *path = make_model("m.gguf", 0);
    ref r = ref_open(path);
    static char want[1 << 16];
    int32_t ids[4096];
    const char *given = "a\\tb\\x41\\q\\n\\\\ \\x4g \\'\\\"\\x00z\\";
    const char processed[] = "a\tbA\\q\n\\ \\x4g '\"\0z\\";
    const size_t plen = sizeof processed - 1;
    char args[4096];
    int n = ref_ids(&r, processed, plen, 0, 1, ids, 4096);
    ref_default(&r, ids, n, want, sizeof want, processed, plen);
    snprintf(args, sizeof args, "'%s' -p %s", path, shq(given));
    expect_output(args, want);
    snprintf(args, sizeof args, "'%s' -p %s --escape", path, shq(given));
    expect_output(args, want);
    n = ref_ids(&r, given, strlen(given), 0, 1, ids, 4096);
    ref_default(&r, ids, n, want, sizeof want, given, strlen(given));
    snprintf(args, sizeof args, "'%s' -p %s --no-escape", path, shq(given));
    expect_output(args, want);
    ref_close(&r);
}

Test(cli_tokenize, file_and_stdin) {
    const char *path = make_model("m.gguf", 0);
    ref r = ref_open(path);
    static char want[1 << 16], want_ids[1 << 16];
    int32_t ids[4096];
    /* every corpus text and a final newline: exactly the file's bytes */
    static char t[8192];
    t[0] = 0;
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) strcat(strcat(t, corpus[c]), "\n");
    const char *file = fct_path(dir, "text.txt");
    fct_write_file(file, t, strlen(t));
    const int n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
    ref_list(ids, n, want_ids, sizeof want_ids);
    ref_default(&r, ids, n, want, sizeof want, t, strlen(t));
    char args[4096];
    snprintf(args, sizeof args, "'%s' -f '%s'", path, file);
    expect_output(args, want);
    snprintf(args, sizeof args, "'%s' --file '%s' --ids", path, file);
    expect_output(args, want_ids);
    snprintf(args, sizeof args, "'%s' -f - --ids < '%s'", path, file);
    expect_output(args, want_ids);
    snprintf(args, sizeof args, "'%s' --stdin < '%s'", path, file);
    expect_output(args, want);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' tokenize '%s' -f - --ids --show-count", file, cli(), path);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0);
    static char both[1 << 17];
    snprintf(both, sizeof both, "%sTotal number of tokens: %d\n", want_ids, n);
    cr_expect_str_eq(out, both);
    /* escapes apply to a file's text too (as in llama-tokenize) */
    fct_write_file(file, "x\\ty", 4);
    int m = ref_ids(&r, "x\ty", 3, 0, 1, ids, 4096);
    ref_list(ids, m, want_ids, sizeof want_ids);
    snprintf(args, sizeof args, "'%s' -f '%s' --ids", path, file);
    expect_output(args, want_ids);
    m = ref_ids(&r, "x\\ty", 4, 0, 1, ids, 4096);
    ref_list(ids, m, want_ids, sizeof want_ids);
    snprintf(args, sizeof args, "'%s' --no-escape --ids < '%s' --stdin", path, file);
    expect_output(args, want_ids);
    /* an empty standard input */
    snprintf(args, sizeof args, "'%s' --stdin --ids --show-count < /dev/null", path);
    expect_output(args, "[]\nTotal number of tokens: 0\n");
    ref_close(&r);
}

/* Not only qwen3: a GGUF holding just a "llama" architecture name and a
 * Llama-2-style SentencePiece vocabulary (add_bos true, U+2581 spaces,
 * <0xXX> byte fallback for newlines and tabs, Gemma / Mistral / Phi-3 chat
 * tokens), no tensors. BOS comes by default, --no-bos drops it. */
Test(cli_tokenize, sentencepiece_vocabulary) {
    mm_vocab v;
    cr_assert_eq(mm_spm_vocab_build(&v), 0);
    const char *path = fct_path(dir, "spm.gguf");
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_not_null(w, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "llama"), FC_OK);
    cr_assert_eq(mm_vocab_write(w, &v), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    mm_vocab_free(&v);
    ref r = ref_open(path);
    static char want[1 << 18];
    int32_t ids[4096];
    const char *texts[] = {
        corpus[0], corpus[1], corpus[2],
        "<start_of_turn>user\nHi<end_of_turn>\n[INST] x [/INST]<|user|>q<|end|><|assistant|>",
    };
    for (size_t c = 0; c < sizeof texts / sizeof texts[0]; c++) {
        const char *t = texts[c];
        char args[8192];
        int n = ref_ids(&r, t, strlen(t), 1, 1, ids, 4096);
        cr_assert_eq(ids[0], 1, "llama.cpp adds BOS (<s>, id 1) for an SPM vocabulary");
        ref_default(&r, ids, n, want, sizeof want, NULL, 0);
        snprintf(args, sizeof args, "'%s' -p %s", path, shq(t));
        expect_output(args, want);
        n = ref_ids(&r, t, strlen(t), 0, 1, ids, 4096);
        ref_list(ids, n, want, sizeof want);
        snprintf(args, sizeof args, "'%s' -p %s --no-bos --ids", path, shq(t));
        expect_output(args, want);
        n = ref_ids(&r, t, strlen(t), 1, 0, ids, 4096);
        ref_default(&r, ids, n, want, sizeof want, NULL, 0);
        snprintf(args, sizeof args, "'%s' -p %s --no-parse-special", path, shq(t));
        expect_output(args, want);
    }
    ref_close(&r);
}

/* Usage errors exit 2 with one line naming the problem and nothing on
 * stdout; --help exits 0. Needs no oracle. */
Test(cli_tokenize, usage_errors) {
    const char *path = make_model("m.gguf", 0);
    const char *text = fct_path(dir, "plain.txt");
    fct_write_file(text, "not a model\n", 12);
    char m[600], t[600], nf[600];
    snprintf(m, sizeof m, "'%s'", path);
    snprintf(t, sizeof t, "'%s'", text);
    snprintf(nf, sizeof nf, "'%s/none.txt'", dir);
    struct {
        const char *fmt; /* {M} the model, {T} a text file, {N} a missing file */
        int rc;
        const char *msg;
    } cases[] = {
        {"-p hi", 2, "fucina tokenize: no model given"},
        {"{M}", 2, "fucina tokenize: no text given"},
        {"{M} -p hi -f {T}", 2, "give only one of -p, -f and --stdin; the second source is '-f'"},
        {"{M} -f {T} -p hi", 2, "the second source is '-p'"},
        {"{M} -p hi --stdin", 2, "the second source is '--stdin'"},
        {"{M} -f {N}", 2, "cannot open the text file"},
        {"{M} -f {M}/", 2, "cannot open the text file"},
        {"{M} -f /", 2, "cannot read the text file '/'"},
        {"{N} -p hi", 2, "none.txt"},
        {"{T} -p hi", 2, "plain.txt"},
        {"{M} -p hi --bogus", 2, "fucina tokenize: unknown option '--bogus' (see --help)"},
        {"{M} -x -p hi", 2, "unknown option '-x'"},
        {"{M} -p", 2, "a value is missing after '-p'"},
        {"{M} -p hi -f", 2, "a value is missing after '-f'"},
        {"-p hi -m", 2, "a value is missing after '-m'"},
        {"{M} {T} -p hi", 2, "unexpected argument"},
        {"-m {M} -m {M} -p hi", 2, "the model is given twice"},
        {"-m {M} {M} -p hi", 2, "unexpected argument"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[4096];
        size_t o = 0;
        for (const char *f = cases[c].fmt; *f;) {
            const char *sub = !strncmp(f, "{M}", 3) ? m : !strncmp(f, "{T}", 3) ? t : !strncmp(f, "{N}", 3) ? nf : NULL;
            const size_t k = sub ? strlen(sub) : 1;
            cr_assert_lt(o + k, sizeof args);
            memcpy(args + o, sub ? sub : f, k);
            o += k;
            f += sub ? 3 : 1;
        }
        args[o] = 0;
        const int rc = tokenize(args);
        cr_expect_eq(rc, cases[c].rc, "tokenize %s: exit %d, want %d\n%s", args, rc, cases[c].rc, err);
        cr_expect(strstr(err, cases[c].msg), "tokenize %s: stderr lacks '%s':\n%s", args, cases[c].msg, err);
        cr_expect_str_empty(out, "tokenize %s wrote to stdout:\n%s", args, out);
        const char *nl = strchr(err, '\n');
        cr_expect(nl && !nl[1], "tokenize %s: not one line on stderr:\n%s", args, err);
    }
    cr_assert_eq(tokenize("--help"), 0);
    cr_expect(strstr(out, "usage: fucina tokenize") && strstr(out, "--no-parse-special") && strstr(out, "--ids"),
              "%s", out);
    cr_expect_str_empty(err);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --help", cli());
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0);
    cr_expect(strstr(out, "  tokenize "), "fucina --help does not list tokenize:\n%s", out);
}
