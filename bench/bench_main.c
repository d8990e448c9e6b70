/* SPDX-License-Identifier: MIT */
/* fucina-bench: the benchmark harness (bench/README.md).
 *   fucina-bench roofline   this machine's limits, measured now
 *   fucina-bench kernels    every generated arm against them
 *   fucina-bench ops        runtime ops (f32 GEMM) against OpenBLAS
 *   fucina-bench train      training steps against PyTorch */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fcb.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fucina-bench roofline [--threads N] [--json FILE] [...]\n"
            "       fucina-bench kernels [--filter PATTERN] [--isa ISA] [--sizes N,N,...] [--repeats R]\n"
            "                            [--quick] [--json FILE] [...]\n"
            "       fucina-bench ops [--filter PATTERN] [--threads N,N] [--quick] [--json FILE] [...]\n"
            "       fucina-bench train [--threads N,N] [--rounds N] [--passes N] [--filter NAME] [--no-peer]\n"
            "       fucina-bench quant [--threads N,N] [--rounds N] [--filter P] [--shape MxNxK] [--no-peer]\n"
            "       fucina-bench quantize [--size MIB] [--type MIX] [--threads N] [--rounds N] [--no-peer]\n"
            "       fucina-bench llm MODEL.gguf [...] [--threads N,N] [--prompts P,P] [--gen N] [--no-peer]\n"
            "       fucina-bench serve MODEL.gguf [...] [--streams N,N] [--gen N] [--threads N] [--no-peer]\n"
            "       fucina-bench grammar MODEL.gguf [--schema FILE | --grammar FILE] [--gen N] [--rounds N]\n"
            "       fucina-bench help [COMMAND] | --help\n"
            "\n"
            "  roofline   peak f32 FMA rate (1 core, all cores) and DRAM bandwidth (read, copy),\n"
            "             measured now with generated probe arms\n"
            "  kernels    time every generated kernel arm (median ns, CV, GB/s, GFLOP/s), as a\n"
            "             fraction of the roofline and as a speedup over the scalar arm\n"
            "  ops        runtime ops: f32 GEMM against OpenBLAS (alternating runs), small-op cost, softmax/rmsnorm\n"
            "             rows and attention against the roofline measured in the same run; 1 and 2 threads\n"
            "  train      backward bookkeeping per record; MLP AdamW steps and a transformer block's\n"
            "             forward + backward against PyTorch (alternating runs, same thread count)\n"
            "  quant      quantized matmul (q8_0, q4_0, q4_K, q5_K, q6_K weights) against ggml's CPU\n"
            "             backend on the same bytes (alternating runs); M=1 against the DRAM roofline\n"
            "  quantize   GGUF model quantization (f16 qwen3-shaped model to Q4_K_M) against\n"
            "             llama.cpp's llama_model_quantize (alternating runs, same thread count)\n"
            "  llm        whole-model prefill (ppP) and decode (tgN) tokens/s against llama.cpp's\n"
            "             libllama on the same GGUF (alternating runs); decode against the DRAM roofline\n"
            "  serve      aggregate decode tokens/s of N streams through `fucina serve` (HTTP clients)\n"
            "  grammar    constrained decoding: the grammar's cost per token against a decode step\n"
            "             against libllama decoding N sequences in lockstep; first-token time, overhead\n"
            "\n"
            "'fucina-bench COMMAND --help' documents every flag of a command. Exit status: 0 ok,\n"
            "1 run-time failure (memory, output file), 2 bad command line.\n");
}

/* OpenBLAS's pool threads spin (sched_yield) for 2^28 cycles, about 0.1 s,
 * after each call before they sleep; they are started when the library
 * loads, even for commands that never call it. In the ops suite, whose
 * batches alternate ours / OpenBLAS every few ms, a spinning OpenBLAS thread
 * takes one of the two vCPUs from our 2-thread batches some of the time
 * (perf showed such a thread in a quarter of the samples of a run that never
 * called OpenBLAS). OPENBLAS_THREAD_TIMEOUT=17 (2^17 cycles, ~47 us at 2.8
 * GHz) matches our own pool's spin-then-park window, so both sides park the
 * same way. OpenBLAS reads it when it loads, before main: so set it and
 * re-execute once; a caller's own value is kept. */
static void park_openblas_like_us(char **argv)
{
    if (getenv("OPENBLAS_THREAD_TIMEOUT")) return;
    setenv("OPENBLAS_THREAD_TIMEOUT", "17", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: then run as is */
}

int main(int argc, char **argv)
{
    park_openblas_like_us(argv);
    if (argc < 2) {
        usage(stderr);
        return FCB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return FCB_EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc > 2) {
            char help_flag[] = "--help";
            char *sub[] = {argv[2], help_flag, NULL};
            if (!strcmp(argv[2], "roofline")) return fcb_cmd_roofline(2, sub);
            if (!strcmp(argv[2], "kernels")) return fcb_cmd_kernels(2, sub);
            if (!strcmp(argv[2], "ops")) return fcb_cmd_ops(2, sub);
            if (!strcmp(argv[2], "train")) return fcb_cmd_train(2, sub);
            if (!strcmp(argv[2], "quant")) return fcb_cmd_quant(2, sub);
            if (!strcmp(argv[2], "quantize")) return fcb_cmd_quantize(2, sub);
            if (!strcmp(argv[2], "llm")) return fcb_cmd_llm(2, sub);
            if (!strcmp(argv[2], "serve")) return fcb_cmd_serve(2, sub);
            if (!strcmp(argv[2], "grammar")) return fcb_cmd_grammar(2, sub);
            fprintf(stderr, "fucina-bench help: unknown command '%s' (roofline, kernels, ops, train, quant, quantize, llm, serve, grammar)\n", argv[2]);
            return FCB_EXIT_USAGE;
        }
        usage(stdout);
        return FCB_EXIT_OK;
    }
    if (!strcmp(cmd, "roofline")) return fcb_cmd_roofline(argc - 1, argv + 1);
    if (!strcmp(cmd, "kernels")) return fcb_cmd_kernels(argc - 1, argv + 1);
    if (!strcmp(cmd, "ops")) return fcb_cmd_ops(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return fcb_cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "quant")) return fcb_cmd_quant(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return fcb_cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "llm")) return fcb_cmd_llm(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return fcb_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "grammar")) return fcb_cmd_grammar(argc - 1, argv + 1);
    fprintf(stderr, "fucina-bench: unknown command '%s' (roofline, kernels, ops, train, quant, quantize, llm, serve, grammar; see fucina-bench --help)\n", cmd);
    return FCB_EXIT_USAGE;
}
