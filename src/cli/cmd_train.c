/* SPDX-License-Identifier: MIT */
/* fucina pretrain / sft / finetune: train a language model (fc_lm_train)
 * and export it as a GGUF file llama.cpp loads.
 *
 *   pretrain  a new model of the given shape with a tokenizer file's
 *             vocabulary, on documents of text
 *   sft       a model read from a GGUF file (f32/f16/bf16), on conversations
 *             in its chat template, the loss on assistant turns only
 *   finetune  --lora: LoRA pairs over a frozen GGUF model in any format
 *             (fucina/lm_lora.h), on conversations (or text with --text);
 *             writes the adapter, and with --merge the merged model
 *
 * All share the loop's options. Progress goes to stderr (a redrawn line on
 * a terminal, a line per ~5% otherwise), the per-step log to --log (CSV),
 * the loss curve to --plot (SVG). Options are a table: one row per flag. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/svg_plot.h"
#include "cli/train_ranks.h"
#include "fucina/fucina.h"
#include "fucina/lm_lora.h"
#include "fucina/lm_train.h"
#include "io/atomic_file.h"

#define MAX_FILES 64
#define MAX_TARGETS 16

/* The commands, as bits of an option's `cmds` (0: every command). */
enum { CMD_PRETRAIN = 1, CMD_SFT = 2, CMD_FINETUNE = 4 };

typedef struct train_cli {
    fc_lm_config cfg;
    fc_lm_lora_config lora;
    fc_lm_train_options o;
    const char *tokenizer, *model, *out, *dtype, *log, *plot, *targets, *merge;
    int text;
    const char *train[MAX_FILES], *val[MAX_FILES];
    int n_train, n_val;
    long threads;
    int quiet;
} train_cli;

typedef enum opt_kind { OPT_I64, OPT_U64, OPT_F64, OPT_STR, OPT_FLAG, OPT_FILE, OPT_VAL } opt_kind;

typedef struct opt {
    const char *name;
    opt_kind kind;
    size_t off; /* into train_cli */
    double lo, hi;
    int cmds; /* CMD_* bits of the commands that take it; 0: all */
} opt;

#define F(field) offsetof(train_cli, field)
static const opt k_opts[] = {
    {"--tokenizer", OPT_STR, F(tokenizer), 0, 0, CMD_PRETRAIN},
    {"--arch", OPT_STR, F(cfg.arch), 0, 0, CMD_PRETRAIN},
    {"--n-embd", OPT_I64, F(cfg.n_embd), 8, 65536, CMD_PRETRAIN},
    {"--n-layer", OPT_I64, F(cfg.n_layer), 1, 1024, CMD_PRETRAIN},
    {"--n-head", OPT_I64, F(cfg.n_head), 1, 4096, CMD_PRETRAIN},
    {"--n-head-kv", OPT_I64, F(cfg.n_head_kv), 1, 4096, CMD_PRETRAIN},
    {"--n-ff", OPT_I64, F(cfg.n_ff), 1, 1 << 18, CMD_PRETRAIN},
    {"--ctx", OPT_I64, F(cfg.n_ctx), 1, 1 << 20, CMD_PRETRAIN},
    {"--rope-theta", OPT_F64, F(cfg.rope_theta), 1, 1e12, CMD_PRETRAIN},
    {"--tied", OPT_FLAG, F(cfg.tied), 0, 0, CMD_PRETRAIN},
    {"--init-seed", OPT_U64, F(cfg.seed), 0, 0, CMD_PRETRAIN},
    {"--train", OPT_FILE, 0, 0, 0, CMD_PRETRAIN},
    {"--data", OPT_FILE, 0, 0, 0, CMD_SFT | CMD_FINETUNE},
    {"--val", OPT_VAL, 0, 0, 0, 0},
    {"--jsonl-field", OPT_STR, F(o.jsonl_field), 0, 0, CMD_PRETRAIN | CMD_FINETUNE},
    {"--steps", OPT_I64, F(o.steps), 1, 1e9, 0},
    {"--seq", OPT_I64, F(o.seq), 2, 1 << 20, 0},
    {"--batch", OPT_I64, F(o.batch), 1, 1 << 20, 0},
    {"--accum", OPT_I64, F(o.accum), 1, 1 << 20, 0},
    {"--matrix-lr", OPT_F64, F(o.matrix_lr), 0, 10, CMD_PRETRAIN | CMD_SFT},
    {"--embed-lr", OPT_F64, F(o.embed_lr), 0, 10, CMD_PRETRAIN | CMD_SFT},
    {"--head-lr", OPT_F64, F(o.head_lr), 0, 10, CMD_PRETRAIN | CMD_SFT},
    {"--scalar-lr", OPT_F64, F(o.scalar_lr), 0, 10, CMD_PRETRAIN | CMD_SFT},
    {"--lora", OPT_STR, F(model), 0, 0, CMD_FINETUNE},
    {"--text", OPT_FLAG, F(text), 0, 0, CMD_FINETUNE},
    {"--rank", OPT_I64, F(lora.rank), 1, 4096, CMD_FINETUNE},
    {"--alpha", OPT_F64, F(lora.alpha), 1e-6, 1e6, CMD_FINETUNE},
    {"--targets", OPT_STR, F(targets), 0, 0, CMD_FINETUNE},
    {"--lora-lr", OPT_F64, F(o.lora_lr), 0, 10, CMD_FINETUNE},
    {"--lr", OPT_F64, F(o.lora_lr), 0, 10, CMD_FINETUNE},
    {"--lora-seed", OPT_U64, F(lora.seed), 0, 0, CMD_FINETUNE},
    {"--merge", OPT_STR, F(merge), 0, 0, CMD_FINETUNE},
    {"--warmup", OPT_F64, F(o.warmup), 0, 1, 0},
    {"--warmdown", OPT_F64, F(o.warmdown), 0, 1, 0},
    {"--final-lr-frac", OPT_F64, F(o.final_lr_frac), 0, 1, 0},
    {"--clip", OPT_F64, F(o.clip), 0, 1e6, 0},
    {"--checkpoint-layers", OPT_FLAG, F(o.checkpoint_layers), 0, 0, 0},
    {"--seed", OPT_U64, F(o.seed), 0, 0, 0},
    {"--eval-every", OPT_I64, F(o.eval_every), 1, 1e9, 0},
    {"--eval-tokens", OPT_I64, F(o.eval_tokens), 1, 1e12, 0},
    {"--save", OPT_STR, F(o.save_path), 0, 0, 0},
    {"--save-every", OPT_I64, F(o.save_every), 1, 1e9, 0},
    {"--resume", OPT_STR, F(o.resume_path), 0, 0, 0},
    {"--log", OPT_STR, F(log), 0, 0, 0},
    {"--plot", OPT_STR, F(plot), 0, 0, 0},
    {"--dtype", OPT_STR, F(dtype), 0, 0, 0},
    {"-o", OPT_STR, F(out), 0, 0, 0},
    {"--output", OPT_STR, F(out), 0, 0, 0},
    {"-t", OPT_I64, F(threads), 1, 1024, 0},
    {"--threads", OPT_I64, F(threads), 1, 1024, 0},
    {"--quiet", OPT_FLAG, F(quiet), 0, 0, 0},
};
#undef F

static void help(FILE *f, int cmd)
{
    const int sft = cmd == CMD_SFT;
    if (cmd == CMD_FINETUNE)
        fprintf(f, "usage: fucina finetune --lora MODEL.gguf --data FILE.jsonl [--text] -o ADAPTER.gguf\n"
                   "                       [--rank R] [--alpha A] [--targets q,k,v,o,gate,up,down]\n"
                   "                       [--merge MERGED.gguf] [options]\n\n"
                   "LoRA fine-tuning: the model (a dense qwen3, llama or qwen2 GGUF, in any format: f32, f16,\n"
                   "bf16 or quantized) stays frozen; each targeted projection W of every layer gains a trained\n"
                   "pair, W x + (alpha/rank) B (A x). The data are conversations ({\"messages\": [...]} per line,\n"
                   "the loss on assistant turns) or, with --text, documents ({\"text\": ...} per line, or whole\n"
                   "files). The output is an adapter in llama.cpp's format: fucina run --lora, llama.cpp --lora,\n"
                   "fucina export-lora.\n\n"
                   "LoRA:\n"
                   "  --rank R (8)  --alpha A (the rank: scale 1)  --lora-lr/--lr X (AdamW, 1e-3)  --lora-seed S\n"
                   "  --targets LIST  comma-separated: attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down\n"
                   "                  (or q,k,v,o,gate,up,down; output: the untied head); default all seven\n"
                   "  --text  documents instead of conversations (--jsonl-field NAME: their field, text)\n"
                   "  --merge MERGED.gguf  also write the model with the adapter merged (fucina export-lora's\n"
                   "                  types: f32 where the base is f32, else f16; then fucina quantize)\n\n");
    else if (sft)
        fprintf(f, "usage: fucina sft MODEL.gguf --data CHAT.jsonl [--val TEXT.jsonl] -o OUT.gguf [options]\n\n"
                   "Supervised fine-tuning of a model (f32, f16 or bf16 GGUF of a dense qwen3, llama or qwen2\n"
                   "family) on conversations: one JSON object per line, {\"messages\": [{\"role\": \"system\"|\n"
                   "\"user\"|\"assistant\", \"content\": \"...\"}, ...]}, rendered in the model's chat template;\n"
                   "the loss is on the assistant turns only (their text and the token ending the turn).\n\n");
    else
        fprintf(f, "usage: fucina pretrain --tokenizer TOK.gguf --train FILE... [--val FILE] -o OUT.gguf [options]\n\n"
                   "Trains a language model from scratch on documents: .jsonl files hold one {\"text\": ...}\n"
                   "per line (--jsonl-field), other files are one document each. The tokenizer is any GGUF\n"
                   "with tokenizer.ggml.* keys (fucina train-tokenizer writes one).\n\n"
                   "model (pretrain):\n"
                   "  --arch qwen3|llama|qwen2  (default qwen3: per-head Q/K norms, NeoX RoPE)\n"
                   "  --n-embd N (128)  --n-layer N (4)  --n-head N (n-embd/64)  --n-head-kv N (n-head)\n"
                   "  --n-ff N (8/3 n-embd, rounded up to 32)  --ctx N (512)  --rope-theta X (10000)\n"
                   "  --tied (share embeddings and output)  --init-seed S\n\n");
    fprintf(f, "training:\n"
               "  --steps N (200)  --seq N tokens per row (128)  --batch N rows per step (8)\n"
               "  --accum N micro-batches per step (1, or the ranks under mpirun; divides --batch)\n"
               "  --checkpoint-layers (recompute each layer in the backward pass: less memory)\n"
               "%s"
               "  --warmup F (fraction of steps, 0)  --warmdown F (0.2)  --final-lr-frac F (0)  --clip X\n"
               "  --seed S (data order)  --val FILE (held-out text: loss and bits per byte)\n"
               "  --eval-every N  --eval-tokens N (65536)\n"
               "  --save CKPT.safetensors [--save-every N]  --resume CKPT (same options: continues bit for bit)\n"
               "  --log FILE.csv  --plot FILE.svg (the loss curve)  -t/--threads N  --quiet\n"
               "data parallelism: mpirun -np K fucina %s ... (each rank takes accum/K micro-batches;\n"
               "  the result equals one process's bit for bit; rank 0 logs, evaluates and writes)\n"
               "output:\n"
               "%s"
               "Exit status: 0 done, 1 failure, 2 bad usage or input.\n",
            cmd == CMD_FINETUNE ? ""
                                : "  --matrix-lr X (Muon, 0.02)  --embed-lr X (AdamW, 0.2 (n_embd/768)^-0.5)\n"
                                  "  --head-lr X (AdamW, 0.004 (n_embd/768)^-0.5)  --scalar-lr X (norms, 0.02)\n",
            cmd == CMD_FINETUNE ? "finetune" : sft ? "sft" : "pretrain",
            cmd == CMD_FINETUNE ? "  -o/--output ADAPTER.gguf  --dtype f32|f16|bf16 (of A and B; f32)\n"
                                : "  -o/--output OUT.gguf  --dtype f32|f16|bf16 (f32; then fucina quantize)\n");
}

static int set_opt(const char *cmd, train_cli *c, const opt *op, const char *v)
{
    char *base = (char *)c + op->off, *end = NULL;
    errno = 0;
    switch (op->kind) {
    case OPT_I64: {
        const long long x = strtoll(v, &end, 10);
        if (errno || !*v || *end || x < op->lo || x > op->hi) break;
        if (op->off == offsetof(train_cli, threads)) *(long *)base = (long)x;
        else *(int64_t *)base = x;
        return 0;
    }
    case OPT_U64: {
        const unsigned long long x = strtoull(v, &end, 10);
        if (errno || !(*v >= '0' && *v <= '9') || *end) break;
        *(uint64_t *)base = x;
        return 0;
    }
    case OPT_F64: {
        const double x = strtod(v, &end);
        if (errno || !*v || *end || !isfinite(x) || x < op->lo || x > op->hi) break;
        *(double *)base = x == 0 ? -0.0 : x; /* an explicit 0 (FC_OPTIM_ZERO), not the default */
        return 0;
    }
    case OPT_STR: *(const char **)base = v; return 0;
    case OPT_FILE:
    case OPT_VAL: {
        int *n = op->kind == OPT_FILE ? &c->n_train : &c->n_val;
        if (*n == MAX_FILES) {
            fprintf(stderr, "fucina %s: %s: at most %d files\n", cmd, op->name, MAX_FILES);
            return -1;
        }
        (op->kind == OPT_FILE ? c->train : c->val)[(*n)++] = v;
        return 0;
    }
    case OPT_FLAG: break;
    }
    if (op->kind == OPT_U64)
        fprintf(stderr, "fucina %s: %s '%s' is not an integer in 0..18446744073709551615\n", cmd, op->name, v);
    else
        fprintf(stderr, "fucina %s: %s '%s' is not a number in %g..%g\n", cmd, op->name, v, op->lo, op->hi);
    return -1;
}

/* ---- progress, the log, the plot ------------------------------------------------------- */

typedef struct progress {
    int tty, quiet;
    double t0;
    FILE *log;
    double *step, *loss, *vstep, *vloss;
    size_t n, nv, cap;
    int oom;
} progress;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fmt_time(double s, char *buf, size_t cap)
{
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

static void on_step(const fc_lm_step_info *in, void *user)
{
    progress *p = user;
    if (p->n == p->cap && !p->oom) {
        const size_t cap = p->cap ? p->cap * 2 : 1024;
        double *a = realloc(p->step, cap * sizeof *a), *b = a ? realloc(p->loss, cap * sizeof *b) : NULL;
        double *c = b ? realloc(p->vstep, cap * sizeof *c) : NULL, *d = c ? realloc(p->vloss, cap * sizeof *d) : NULL;
        if (a) p->step = a;
        if (b) p->loss = b;
        if (c) p->vstep = c;
        if (d) p->vloss = d, p->cap = cap;
        else p->oom = 1;
    }
    if (p->n < p->cap) {
        p->step[p->n] = (double)in->step, p->loss[p->n++] = in->loss;
        if (!isnan(in->val_loss)) p->vstep[p->nv] = (double)in->step, p->vloss[p->nv++] = in->val_loss;
    }
    if (p->log) {
        fprintf(p->log, "%lld,%.6f,%.6f,%.1f,%lld", (long long)in->step, in->loss, in->lr_scale, in->tokens_per_s,
                (long long)in->tokens_seen);
        if (!isnan(in->val_loss)) fprintf(p->log, ",%.6f,%.6f", in->val_loss, in->val_bpb);
        else fputs(",,", p->log);
        fprintf(p->log, ",%.6f\n", in->reduce_s);
    }
    if (p->quiet) return;
    const double el = now_s() - p->t0, frac = (double)in->step / (double)in->steps;
    char eta[32], val[64] = "";
    fmt_time(frac > 0 ? el / frac - el : 0, eta, sizeof eta);
    if (!isnan(in->val_bpb)) snprintf(val, sizeof val, "  val %.4f (%.4f bpb)", in->val_loss, in->val_bpb);
    const int width = 24, fill = (int)(frac * width);
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
    const long long every = in->steps / 20 > 0 ? in->steps / 20 : 1;
    if (p->tty) {
        fprintf(stderr, "\r\033[K%6lld/%lld [%s] loss %.4f  lr x%.3f  %.0f tok/s  eta %s%s", (long long)in->step,
                (long long)in->steps, bar, in->loss, in->lr_scale, in->tokens_per_s, eta, val);
        if (val[0] || in->step == in->steps) fputc('\n', stderr);
    } else if (in->step % every == 0 || val[0] || in->step == in->steps || in->step == 1) {
        fprintf(stderr, "step %lld/%lld loss %.4f lr x%.3f %.0f tok/s eta %s%s\n", (long long)in->step,
                (long long)in->steps, in->loss, in->lr_scale, in->tokens_per_s, eta, val);
    }
}

/* ---- the commands ------------------------------------------------------------------------ */

/* --targets a,b,c into names[] (pointing into buf); the count, or -1 + a message. */
static int split_targets(const char *cmd, const char *list, char *buf, size_t cap, const char **names)
{
    if (strlen(list) >= cap) {
        fprintf(stderr, "fucina %s: --targets '%s' is too long\n", cmd, list);
        return -1;
    }
    strcpy(buf, list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == MAX_TARGETS) {
            fprintf(stderr, "fucina %s: --targets: at most %d names\n", cmd, MAX_TARGETS);
            return -1;
        }
        names[n++] = t;
    }
    if (!n) fprintf(stderr, "fucina %s: --targets '%s' names no projection\n", cmd, list);
    return n ? n : -1;
}

static int train_main(int argc, char **argv, int which)
{
    const int sft = which == CMD_SFT, lora = which == CMD_FINETUNE;
    const char *cmd = lora ? "finetune" : sft ? "sft" : "pretrain";
    train_cli c = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout, which);
            return 0;
        }
        const opt *op = NULL;
        for (size_t k = 0; k < sizeof k_opts / sizeof k_opts[0] && !op; k++)
            if (!strcmp(a, k_opts[k].name)) op = &k_opts[k];
        if (!op && a[0] != '-' && sft && !c.model) {
            c.model = a;
            continue;
        }
        if (!op || (op->cmds && !(op->cmds & which))) {
            fprintf(stderr, "fucina %s: unknown option '%s' (see fucina %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (op->kind == OPT_FLAG) {
            *(int *)((char *)&c + op->off) = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "fucina %s: %s needs a value\n", cmd, a);
            return 2;
        }
        if (set_opt(cmd, &c, op, argv[++i])) return 2;
    }
    const char *missing = sft && !c.model    ? "MODEL.gguf"
                          : lora && !c.model ? "--lora MODEL.gguf"
                          : which == CMD_PRETRAIN && !c.tokenizer ? "--tokenizer"
                          : !c.n_train                            ? (which == CMD_PRETRAIN ? "--train" : "--data")
                          : !c.out                                ? (lora ? "-o ADAPTER.gguf" : "-o OUT.gguf")
                                                                  : NULL;
    if (missing) {
        fprintf(stderr, "fucina %s: missing %s (see fucina %s --help)\n", cmd, missing, cmd);
        return 2;
    }
    fc_dtype dt = FC_F32;
    if (c.dtype && strcmp(c.dtype, "f32")) {
        dt = !strcmp(c.dtype, "f16") ? FC_F16 : !strcmp(c.dtype, "bf16") ? FC_BF16 : (fc_dtype)0;
        if (dt == (fc_dtype)0) {
            fprintf(stderr, "fucina %s: --dtype '%s': f32, f16 or bf16 (then fucina quantize)\n", cmd, c.dtype);
            return 2;
        }
    }
    /* the base is read again by --merge after training: no output may replace it */
    const char *onto = fc_same_file(c.model, c.out) ? "-o" : fc_same_file(c.model, c.merge) ? "--merge"
                       : fc_same_file(c.model, c.o.save_path)                            ? "--save"
                                                                                      : NULL;
    if (lora && onto) {
        fprintf(stderr, "fucina %s: %s %s is the model itself; write the output elsewhere\n", cmd, onto, c.model);
        return 2;
    }
    char target_buf[512];
    const char *targets[MAX_TARGETS];
    if (c.targets) {
        const int n = split_targets(cmd, c.targets, target_buf, sizeof target_buf, targets);
        if (n < 0) return 2;
        c.lora.targets = targets;
        c.lora.n_targets = n;
    }
    cli_ranks ranks;
    if (cli_ranks_begin(cmd, &ranks)) return 2;
    const int lead = ranks.par.rank == 0; /* only the first rank prints progress and writes files */
    char who[48];
    if (lead) snprintf(who, sizeof who, "%s", cmd);
    else snprintf(who, sizeof who, "%s (rank %d)", cmd, ranks.par.rank);
    cmd = who;
    if (!lead) c.out = c.plot = c.log = c.merge = NULL, c.quiet = 1; /* checkpoints: fc_lm_train saves on rank 0 only */
    if (ranks.par.size > 1) c.o.parallel = &ranks.par;
    char err[256];
    fc_ctx_options co = {.threads = (int)c.threads};
    fc_ctx *ctx = fc_ctx_new(c.threads > 0 ? &co : NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina %s: %s\n", cmd, err);
        cli_ranks_end(&ranks, 1);
        return 1;
    }
    int rc = 1;
    progress pg = {.tty = isatty(STDERR_FILENO) && !getenv("FUCINA_NO_PROGRESS"), .quiet = c.quiet};
    fc_lm *lm = NULL;
    /* destinations that cannot be written fail now, not after the training */
    const char *dests[] = {c.out, c.o.save_path, c.plot, c.merge};
    for (int k = 0; k < 4; k++)
        if (lead && dests[k] && !fc_atomic_check_dest(ctx, cmd, dests[k])) {
            fprintf(stderr, "fucina %s: %s\n", cmd, fc_ctx_error(ctx));
            rc = 2;
            goto done;
        }
    if (c.log && !(pg.log = fopen(c.log, "w"))) {
        fprintf(stderr, "fucina %s: --log %s: %s\n", cmd, c.log, strerror(errno));
        rc = 2;
        goto done;
    }
    if (pg.log) fputs("step,loss,lr_scale,tokens_per_s,tokens_seen,val_loss,val_bpb,reduce_s\n", pg.log);
    lm = lora  ? fc_lm_lora_new(ctx, c.model, &c.lora)
         : sft ? fc_lm_load(ctx, c.model)
               : fc_lm_new(ctx, c.tokenizer, &c.cfg);
    if (!lm) {
        fprintf(stderr, "fucina %s: %s\n", cmd, fc_ctx_error(ctx));
        rc = 2;
        goto done;
    }
    const fc_llm_hparams *hp = fc_lm_hparams(lm);
    if (!c.quiet)
        fprintf(stderr, "fucina %s: %s, %lld layers, embd %lld, %lld/%lld heads of %lld, ff %lld, vocab %lld: "
                        "%.2fM parameters\n", cmd, fc_llm_arch_name(hp->arch), (long long)hp->n_layer,
                (long long)hp->n_embd, (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim,
                (long long)hp->n_ff, (long long)hp->n_vocab, (double)fc_lm_n_elements(lm) / 1e6);
    if (!c.quiet && lora)
        fprintf(stderr, "fucina %s: LoRA rank %lld, alpha %g, %d weights adapted: the parameters above are the "
                        "pairs'; the base is frozen\n", cmd, (long long)fc_lm_lora_rank(lm), fc_lm_lora_alpha(lm),
                fc_lm_param_count(lm) / 2);
    c.o.data = sft || (lora && !c.text) ? FC_LM_DATA_CHAT : FC_LM_DATA_TEXT;
    c.o.train_files = c.train;
    c.o.n_train_files = c.n_train;
    c.o.val_files = c.n_val ? c.val : NULL;
    c.o.n_val_files = c.n_val;
    c.o.on_step = on_step;
    c.o.user = &pg;
    pg.t0 = now_s();
    fc_atomic_cleanup_on_signals();
    fc_status st = fc_lm_train(ctx, lm, &c.o);
    if (st != FC_OK) {
        if (pg.tty && !c.quiet) fputc('\n', stderr);
        fprintf(stderr, "fucina %s: %s\n", cmd, fc_ctx_error(ctx));
        rc = st == FC_ERR_INVALID_ARG || st == FC_ERR_FORMAT || st == FC_ERR_IO || st == FC_ERR_UNSUPPORTED ? 2 : 1;
        goto done;
    }
    if (c.out && (lora ? fc_lm_save_lora(ctx, lm, c.out, dt) : fc_lm_save_gguf(ctx, lm, c.out, dt)) != FC_OK) {
        fprintf(stderr, "fucina %s: %s\n", cmd, fc_ctx_error(ctx));
        goto done;
    }
    if (c.merge) {
        const float one = 1.0f;
        const char *adapter = c.out;
        if (fc_llm_lora_merge(ctx, c.model, &adapter, &one, 1, c.merge, NULL) != FC_OK) {
            fprintf(stderr, "fucina %s: --merge: %s\n", cmd, fc_ctx_error(ctx));
            goto done;
        }
        if (!c.quiet) fprintf(stderr, "fucina %s: wrote %s (the model with the adapter merged)\n", cmd, c.merge);
    }
    if (c.plot) {
        char title[160];
        snprintf(title, sizeof title, "fucina %s: %s %lldx%lld, %lld steps", cmd, fc_llm_arch_name(hp->arch),
                 (long long)hp->n_layer, (long long)hp->n_embd, (long long)(pg.n ? pg.step[pg.n - 1] : 0));
        if (fc_cli_svg_loss_plot(ctx, c.plot, title, pg.step, pg.loss, pg.n, pg.vstep, pg.vloss, pg.nv)) {
            fprintf(stderr, "fucina %s: --plot: %s\n", cmd, fc_ctx_error(ctx));
            goto done;
        }
    }
    if (!c.quiet && c.out)
        fprintf(stderr, "fucina %s: wrote %s (%s) in %.1f s\n", cmd, c.out, fc_dtype_name(dt), now_s() - pg.t0);
    rc = 0;
done:
    if (pg.log && fclose(pg.log) && rc == 0) {
        fprintf(stderr, "fucina %s: --log %s: %s\n", cmd, c.log, strerror(errno));
        rc = 1;
    }
    free(pg.step), free(pg.loss), free(pg.vstep), free(pg.vloss);
    fc_lm_free(lm);
    fc_ctx_free(ctx);
    cli_ranks_end(&ranks, rc);
    return rc;
}

int fc_cmd_pretrain(int argc, char **argv) { return train_main(argc, argv, CMD_PRETRAIN); }
int fc_cmd_sft(int argc, char **argv) { return train_main(argc, argv, CMD_SFT); }
int fc_cmd_finetune(int argc, char **argv) { return train_main(argc, argv, CMD_FINETUNE); }
