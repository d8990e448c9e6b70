/* SPDX-License-Identifier: MIT */
/* fucina serve: an OpenAI-compatible HTTP server with llama-server's flags
 * (src/serve/; docs/SERVE.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_args.h"

#ifdef FUCINA_HAVE_SERVE
#include "serve/server.h"
#endif

static void help(FILE *f) {
    fprintf(f,
            "usage: fucina serve MODEL.gguf [options]      (or -m MODEL.gguf)\n\n"
            "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (plain and\n"
            "stream: true), GET /v1/models, /health, /props, /slots, /metrics, POST /tokenize,\n"
            "/detokenize, and a chat page at /. Requests share the model: continuous batching over\n"
            "N slots, each with its own KV cache reused across requests (prompt caching).\n\n"
            "  --host ADDR           address to listen on (default 127.0.0.1)\n"
            "  --port N              port (default 8080; 0: any free port, printed when ready)\n"
            "  -np, --parallel N     slots: requests decoded together (default 4)\n"
            "  -c, --ctx-size N      KV positions PER SLOT (default: the model's context, at most 4096)\n"
            "  -t, --threads N       compute threads (default: FUCINA_THREADS, else the cores)\n"
            "  -b, --batch-size N    prompt tokens prefilled per step, between decode steps (default 512)\n"
            "  -ctk, --cache-type-k T  KV cache type: f16 (default), q8_0, f32\n"
            "  --chat-template NAME  override the model's template (%s)\n"
            "  -a, --alias NAME      the model's id in the API (default: the file name)\n"
            "  --api-key KEY         require Authorization: Bearer KEY (repeatable: any of them);\n"
            "                        /health and the chat page stay open\n"
            "  --metrics             serve GET /metrics (Prometheus text)\n"
            "  --no-webui            do not serve the chat page\n"
            "  --queue N             requests waiting for a slot before 503 (default 64)\n"
            "  --max-body BYTES      request body limit, 413 beyond (default 8388608)\n"
            "  --max-header BYTES    memory for a request's line and headers (default 65536)\n"
            "  -to, --timeout S      close a connection idle for S seconds (default 600)\n"
            "  --mmap | --no-mmap    how the weights reach memory (default: by size)\n"
            "  --lora FILE           a LoRA adapter (llama.cpp's GGUF format) for every request (repeatable)\n"
            "  --lora-scaled FILE S  ... with the user scale S (repeatable)\n\n"
            "SIGINT / SIGTERM: stop accepting, end the requests in flight, exit 0.\n"
            "Exit status: 0 stopped by a signal, 1 failure, 2 bad usage.\n",
            "chatml, qwen3, llama3, mistral-v1/-v3/-v3-tekken/-v7, gemma, phi3, llama2...");
}

#ifdef FUCINA_HAVE_SERVE
/* --lora / --lora-scaled go through fc_cli_gen_arg, which stops at FC_CLI_MAX_LORA */
_Static_assert(SRV_MAX_LORA >= FC_CLI_MAX_LORA, "the server takes every adapter the option parser does");

static int need(int argc, char **argv, int i) {
    if (i + 1 < argc) return 0;
    fprintf(stderr, "fucina serve: %s needs a value (see --help)\n", argv[i]);
    return -1;
}

static int num(const char *flag, const char *v, long lo, long hi, long *out) {
    if (!fc_cli_parse_long(v, lo, hi, out)) return 0;
    fprintf(stderr, "fucina serve: %s '%s' is not an integer in [%ld, %ld]\n", flag, v, lo, hi);
    return -1;
}

int fc_cmd_serve(int argc, char **argv) {
    srv_options o = {
        .port = 8080,
        .n_slots = 4,
        .queue_cap = 64,
        .kv_type = FC_F16,
        .webui = 1,
        .max_body = (size_t)8 << 20,
        .max_header = 65536,
        .timeout_s = 600,
    };
    long v;
    fc_cli_gen_args lora = fc_cli_gen_args_default(0); /* --lora / --lora-scaled, parsed as run's */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define IS(x) (!strcmp(a, x))
#define VALUE() (need(argc, argv, i) ? NULL : argv[++i])
        if (IS("-h") || IS("--help")) {
            help(stdout);
            return 0;
        } else if (IS("-m") || IS("--model")) {
            if (!(o.model_path = VALUE())) return 2;
        } else if (IS("--host")) {
            if (!(o.host = VALUE())) return 2;
        } else if (IS("--port")) {
            const char *x = VALUE();
            if (!x || num(a, x, 0, 65535, &v)) return 2;
            o.port = (int)v;
        } else if (IS("-np") || IS("--parallel")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 256, &v)) return 2;
            o.n_slots = (int)v;
        } else if (IS("-c") || IS("--ctx-size") || IS("--ctx")) {
            const char *x = VALUE();
            if (!x || num(a, x, 0, 1L << 24, &v)) return 2;
            o.n_ctx = v;
        } else if (IS("-t") || IS("--threads")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 1024, &v)) return 2;
            o.threads = (int)v;
        } else if (IS("-b") || IS("--batch-size") || IS("-ub") || IS("--ubatch-size")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 1L << 20, &v)) return 2;
            o.n_batch = (int)v;
        } else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            const char *x = VALUE();
            if (!x) return 2;
            if (!strcmp(x, "f16")) o.kv_type = FC_F16;
            else if (!strcmp(x, "f32")) o.kv_type = FC_F32;
            else if (!strcmp(x, "q8_0")) o.kv_type = FC_Q8_0;
            else {
                fprintf(stderr, "fucina serve: %s '%s': the KV cache types are f16, q8_0 and f32\n", a, x);
                return 2;
            }
        } else if (IS("--chat-template")) {
            if (!(o.chat_template = VALUE())) return 2;
        } else if (IS("-a") || IS("--alias")) {
            if (!(o.alias = VALUE())) return 2;
        } else if (IS("--api-key")) {
            const char *x = VALUE();
            if (!x) return 2;
            if (!*x) {
                fprintf(stderr, "fucina serve: --api-key: an empty key\n");
                return 2;
            }
            if (o.n_api_keys == SRV_MAX_API_KEYS) {
                fprintf(stderr, "fucina serve: --api-key: at most %d keys\n", SRV_MAX_API_KEYS);
                return 2;
            }
            o.api_keys[o.n_api_keys++] = x;
        } else if (IS("--metrics")) {
            o.metrics = 1;
        } else if (IS("--no-webui")) {
            o.webui = 0;
        } else if (IS("--queue")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 1L << 20, &v)) return 2;
            o.queue_cap = (int)v;
        } else if (IS("--max-body")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 1L << 30, &v)) return 2;
            o.max_body = (size_t)v;
        } else if (IS("--max-header")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1024, 1L << 24, &v)) return 2;
            o.max_header = (size_t)v;
        } else if (IS("-to") || IS("--timeout")) {
            const char *x = VALUE();
            if (!x || num(a, x, 1, 86400, &v)) return 2;
            o.timeout_s = (int)v;
        } else if (IS("--lora") || IS("--lora-scaled")) {
            if (fc_cli_gen_arg("serve", argc, argv, &i, &lora) < 0) return 2;
            o.lora_path[o.n_lora] = lora.lora[lora.n_lora - 1].path;
            o.lora_scale[o.n_lora++] = lora.lora[lora.n_lora - 1].scale;
        } else if (IS("--mmap")) {
            o.mmap = 1;
        } else if (IS("--no-mmap")) {
            o.mmap = -1;
        } else if (a[0] == '-') {
            fprintf(stderr, "fucina serve: unknown option %s (see --help)\n", a);
            return 2;
        } else if (!o.model_path) {
            o.model_path = a;
        } else {
            fprintf(stderr, "fucina serve: a second model path '%s' (one model per server)\n", a);
            return 2;
        }
#undef IS
#undef VALUE
    }
    if (!o.model_path) {
        fprintf(stderr, "fucina serve: no model (fucina serve MODEL.gguf; see --help)\n");
        return 2;
    }
    return srv_run(&o);
}
#else
int fc_cmd_serve(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help(stdout);
            printf("\n(this build has no server: libmicrohttpd was not found when it was configured)\n");
            return 0;
        }
    fprintf(stderr, "fucina serve: this build has no server: libmicrohttpd was not found when it was configured "
                    "(apt-get install libmicrohttpd-dev, then reconfigure)\n");
    return 1;
}
#endif
