/* SPDX-License-Identifier: MIT */
/* Fucina: dlopen access to ggml / llama.cpp (see ggml_oracle.h). */
#define _GNU_SOURCE
#include "ggml_oracle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FCO_GGML_DEFAULT_DIR
#define FCO_GGML_DEFAULT_DIR ""
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_once_t llama_once = PTHREAD_ONCE_INIT;
static void *h_base, *h_cpu, *h_ggml, *h_llama;
static char dir[1024];
static char variant[64];
static char why_buf[1400];

/* Ordered oldest to newest; ties in score keep the later (newer) one. */
static const char *const variants[] = {"x64",     "sse42",      "sandybridge", "ivybridge",     "piledriver",
                                       "haswell", "skylakex",   "cannonlake",  "cascadelake",   "icelake",
                                       "cooperlake", "zen4",    "alderlake",   "sapphirerapids"};

static void *open_in_dir(const char *file, int global)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
}

static void load(void)
{
    const char *env = getenv("FUCINA_GGML_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : FCO_GGML_DEFAULT_DIR);
    if (!dir[0]) {
        snprintf(why_buf, sizeof why_buf, "no oracle directory configured (set FUCINA_GGML_DIR)");
        return;
    }
    /* Global, so the CPU variants (NEEDED libggml-base.so) bind to this copy. */
    h_base = open_in_dir("libggml-base.so", 1);
    if (!h_base) {
        snprintf(why_buf, sizeof why_buf,
                 "ggml oracle not found: %s/libggml-base.so (%s); install it with "
                 "`.ci/setup --packages-only` (npm @node-llama-cpp/linux-x64@3.22.1) or set FUCINA_GGML_DIR",
                 dir, dlerror());
        return;
    }
    const char *want = getenv("FUCINA_GGML_CPU");
    int best = 0;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        if (want && *want && strcmp(want, variants[i]) != 0) continue;
        char file[96];
        snprintf(file, sizeof file, "libggml-cpu-%s.so", variants[i]);
        void *h = open_in_dir(file, 0);
        if (!h) continue;
        int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        int s = score ? score() : 0;
        if (s > 0 && s >= best) {
            if (h_cpu) dlclose(h_cpu);
            h_cpu = h;
            best = s;
            snprintf(variant, sizeof variant, "%s", variants[i]);
        } else {
            dlclose(h);
        }
    }
    if (!h_cpu) {
        snprintf(why_buf, sizeof why_buf, "ggml oracle: no libggml-cpu-*.so in %s runs on this CPU%s%s", dir,
                 want && *want ? " (FUCINA_GGML_CPU=" : "", want && *want ? want : "");
        if (want && *want) strncat(why_buf, ")", sizeof why_buf - strlen(why_buf) - 1);
        dlclose(h_base);
        h_base = NULL;
        return;
    }
    h_ggml = open_in_dir("libggml.v0.5.0.so", 1);
    void (*cpu_init)(void) = (void (*)(void))dlsym(h_cpu, "ggml_cpu_init");
    if (cpu_init) cpu_init(); /* fills the f16 tables the CPU kernels read */
}

int fco_ggml_available(const char **why)
{
    pthread_once(&once, load);
    if (why) *why = h_base ? "" : why_buf;
    return h_base != NULL;
}

void *fco_ggml_sym(const char *name)
{
    if (!fco_ggml_available(NULL)) return NULL;
    void *p = dlsym(h_base, name);
    if (!p) p = dlsym(h_cpu, name);
    if (!p && h_ggml) p = dlsym(h_ggml, name);
    return p;
}

static void load_llama(void)
{
    if (fco_ggml_available(NULL)) h_llama = open_in_dir("libllama.v0.5.0.so", 0);
}

void *fco_llama_sym(const char *name)
{
    pthread_once(&llama_once, load_llama);
    return h_llama ? dlsym(h_llama, name) : NULL;
}

const char *fco_ggml_cpu_variant(void)
{
    return fco_ggml_available(NULL) ? variant : "";
}

const char *fco_ggml_dir(void)
{
    fco_ggml_available(NULL);
    return dir;
}
