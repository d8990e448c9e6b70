/* SPDX-License-Identifier: MIT */
/* fucina: the command-line entry point. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fucina/fucina.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", fc_cmd_info, "CPU features, ISAs, kernel slots; MODEL.gguf: a summary (--slots: all)"},
    {"quantize", fc_cmd_quantize, "IN.gguf OUT.gguf TYPE: re-encode a model to a quantization mix (Q4_K_M, ...)"},
    {"export-lora", fc_cmd_export_lora, "-m BASE.gguf --lora A.gguf -o OUT.gguf: merge LoRA adapters into a model"},
    {"run", fc_cmd_run, "MODEL.gguf -p TEXT: tokenize, prefill and generate (any supported family)"},
    {"chat", fc_cmd_chat, "MODEL.gguf: an interactive chat with the model's chat template"},
    {"serve", fc_cmd_serve, "MODEL.gguf: an OpenAI-compatible HTTP server with a chat page (llama-server's flags)"},
    {"tokenize", fc_cmd_tokenize, "MODEL.gguf -p TEXT: the tokens of a text, as llama-tokenize prints them"},
    {"embed", fc_cmd_embed, "MODEL.gguf -p TEXT: a text's embedding (pooled hidden states, as llama-embedding)"},
    {"train-tokenizer", fc_cmd_train_tokenizer, "-o OUT.gguf FILE...: train a byte-level BPE tokenizer on text files"},
    {"pretrain", fc_cmd_pretrain, "--tokenizer TOK.gguf --train FILE -o OUT.gguf: train a language model from scratch"},
    {"sft", fc_cmd_sft, "MODEL.gguf --data CHAT.jsonl -o OUT.gguf: fine-tune on conversations (assistant turns)"},
    {"finetune", fc_cmd_finetune, "--lora MODEL.gguf --data FILE.jsonl -o ADAPTER.gguf: LoRA fine-tuning (any format)"},
    {"perplexity", fc_cmd_perplexity, "-m MODEL.gguf -f TEXT: perplexity and KL divergence (llama-perplexity's way)"},
    {"imatrix", fc_cmd_imatrix, "MODEL.gguf -f TEXT -o OUT.gguf: an importance matrix for quantize (llama-imatrix's)"},
    {"bench", fc_cmd_bench, "MODEL.gguf: prefill and decode tokens/s (llama-bench's flags)"},
    {"make-model", fc_cmd_make_model, "OUT.gguf: write a random-weight model of any family (llama.cpp's names)"},
    {"demo", fc_cmd_demo, "small end-to-end examples (spirals: train a classifier with each optimizer)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fucina <command> [options]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-15s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'fucina <command> --help' for a command's options.\n\n"
               "Environment:\n"
               "  FUCINA_THREADS=N           compute threads (default: the usable cores)\n"
               "  FUCINA_ISA=ISA             cap the kernel ISA: scalar, avx2, avx_vnni, avx512, neon, ...\n"
               "  FUCINA_VERBOSE_DISPATCH=1  print the kernel arm chosen for every slot\n"
               "  FUCINA_SPIN_US=N           microseconds a worker spins for work before it parks\n"
               "  FUCINA_NO_PROGRESS=1       no progress bars, even on a terminal\n"
               "A bad FUCINA_THREADS or FUCINA_ISA is an error naming it, in every command.\n"
               "Read by fucina-bench and the tests, not by fucina:\n"
               "  FUCINA_GGML_DIR=DIR        where the oracle's libraries are (llama.cpp's prebuilt ggml, libllama)\n"
               "  FUCINA_GGML_CPU=VARIANT    the ggml CPU variant the oracle loads (default: the best for this CPU)\n"
               "  FUCINA_GIT_DESCRIBE=TEXT   the source version fucina-bench records (default: the build's)\n"
               "  FUCINA_FUCINA_CLI=PATH     the fucina binary the C tests run (ctest sets it)\n"
               "  FUCINA_PYTHON=PATH         the Python the C tests run (ctest sets it)\n");
}

/* The command's status, or 1 when its output did not reach stdout (a full
 * disk, /dev/full, a closed pipe with SIGPIPE ignored): printf's failures are
 * sticky in the stream, the buffered tail fails at the flush. Without this
 * every command exited 0 with its output lost. */
static int finish(const char *cmd, int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad) return rc;
    if (rc) return rc; /* the command failed already and said why (tokenize checks its own writes) */
    fprintf(stderr, "fucina%s%s: writing the output failed: %s\n", cmd ? " " : "", cmd ? cmd : "",
            strerror(err ? err : EIO));
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return finish(NULL, 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fucina %s\n", fc_version()); /* the library's, not the headers' */
        return finish(NULL, 0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return finish(argv[1], commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "fucina: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
