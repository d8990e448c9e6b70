/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the GGUF reader: each input is written to a file and
 * opened in both modes (mmap and read); a file that opens is walked (every
 * KV and tensor info, and each tensor is materialized). Any crash, sanitizer
 * report or leak is a finding. Built only with -DFUCINA_FUZZ=ON and clang
 * (see tests/fuzz/CMakeLists.txt); .ci/run's fuzz leg runs it for a bounded
 * time over the corpus of gen_gguf_corpus.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina/fucina.h"

static fc_ctx *ctx;
static char path[64];

static void walk(fc_gguf *g)
{
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) {
        const char *k = fc_gguf_kv_key(g, i);
        int t = fc_gguf_kv_type(g, i);
        if (k && t == FC_GGUF_STR) {
            const char *v;
            size_t n;
            (void)fc_gguf_get_str(g, k, &v, &n);
        }
    }
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        fc_tensor *t = fc_gguf_tensor(g, ti.name);
        if (t) fc_release(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        char err[128];
        ctx = fc_ctx_new(NULL, err, sizeof err);
        if (!ctx) abort();
        snprintf(path, sizeof path, "/dev/shm/fucina-fuzz-%d.gguf", (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    for (int mode = 0; mode < 2; mode++) {
        fc_gguf *g = fc_gguf_open(ctx, path, mode ? FC_GGUF_READ : 0);
        if (g) {
            walk(g);
            fc_gguf_close(g);
        }
        fc_ctx_clear_error(ctx);
    }
    return 0;
}
