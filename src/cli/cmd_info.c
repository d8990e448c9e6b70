/* SPDX-License-Identifier: MIT */
/* fucina info: what this build can do on this CPU, or what a GGUF file holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "fucina/chat.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina info [--slots]\n"
               "       fucina info MODEL.gguf [--slots] [--all]\n\n"
               "Without a file: prints the version, the CPU features Fucina detects, the ISAs of this\n"
               "build and whether this CPU runs them, the ISA cap (FUCINA_ISA), and how many kernel\n"
               "slots each ISA serves; --slots lists the arm chosen for every slot.\n\n"
               "With a GGUF file: a short summary: architecture and shape, parameters, file size, the\n"
               "mix of tensor types, the trained context, the vocabulary, the chat template family and\n"
               "the memory a run takes (weights plus the f16 KV cache). --slots (or --tensors) lists\n"
               "instead its version, alignment and data offset; every metadata key with its type and\n"
               "value (arrays as type, length and the first few items; --all prints every item and\n"
               "implies --slots); the tensor table (name, type, shape in GGUF order ne[0] first, bytes,\n"
               "offset in the data section); totals: parameter count, bytes, and a histogram of types.\n"
               "A malformed file is reported (exit status 2) with the reader's message.\n");
}

/* ---- fucina info MODEL.gguf ------------------------------------------------------------ */

static void print_scalar(const void *p, int type)
{
    switch ((fc_gguf_vtype)type) {
    case FC_GGUF_U8: printf("%u", *(const uint8_t *)p); break;
    case FC_GGUF_I8: printf("%d", *(const int8_t *)p); break;
    case FC_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); printf("%u", v); break; }
    case FC_GGUF_I16: { int16_t v; memcpy(&v, p, 2); printf("%d", v); break; }
    case FC_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); printf("%" PRIu32, v); break; }
    case FC_GGUF_I32: { int32_t v; memcpy(&v, p, 4); printf("%" PRId32, v); break; }
    case FC_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); printf("%" PRIu64, v); break; }
    case FC_GGUF_I64: { int64_t v; memcpy(&v, p, 8); printf("%" PRId64, v); break; }
    case FC_GGUF_F32: { float v; memcpy(&v, p, 4); printf("%.9g", v); break; }
    case FC_GGUF_F64: { double v; memcpy(&v, p, 8); printf("%.17g", v); break; }
    case FC_GGUF_BOOL: printf("%s", *(const uint8_t *)p ? "true" : "false"); break;
    case FC_GGUF_STR: case FC_GGUF_ARR: break;
    }
}

/* A string, quoted, control bytes escaped, cut at max bytes. */
static void print_str(const char *s, size_t len, size_t max)
{
    putchar('"');
    for (size_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (len > max) printf("... (%zu bytes)", len);
}

static size_t scalar_size(int t)
{
    switch ((fc_gguf_vtype)t) {
    case FC_GGUF_U8: case FC_GGUF_I8: case FC_GGUF_BOOL: return 1;
    case FC_GGUF_U16: case FC_GGUF_I16: return 2;
    case FC_GGUF_U32: case FC_GGUF_I32: case FC_GGUF_F32: return 4;
    case FC_GGUF_U64: case FC_GGUF_I64: case FC_GGUF_F64: return 8;
    case FC_GGUF_STR: case FC_GGUF_ARR: return 0;
    }
    return 0;
}

/* ---- the summary ---------------------------------------------------------------------- */

/* An integer key of any integer type; 0 when absent or not an integer. */
static int get_int(fc_gguf *g, const char *key, int64_t *out)
{
    const int64_t i = fc_gguf_find_kv(g, key);
    if (i < 0) return 0;
    const int t = fc_gguf_kv_type(g, i);
    fc_status st = FC_ERR_FORMAT;
    switch ((fc_gguf_vtype)t) {
    case FC_GGUF_U8: {
        uint8_t v;
        st = fc_gguf_get_u8(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_I8: {
        int8_t v;
        st = fc_gguf_get_i8(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_U16: {
        uint16_t v;
        st = fc_gguf_get_u16(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_I16: {
        int16_t v;
        st = fc_gguf_get_i16(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_U32: {
        uint32_t v;
        st = fc_gguf_get_u32(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_I32: {
        int32_t v;
        st = fc_gguf_get_i32(g, key, &v);
        *out = v;
        break;
    }
    case FC_GGUF_U64: {
        uint64_t v;
        st = fc_gguf_get_u64(g, key, &v);
        *out = v > INT64_MAX ? -1 : (int64_t)v;
        break;
    }
    case FC_GGUF_I64: st = fc_gguf_get_i64(g, key, out); break;
    case FC_GGUF_F32:
    case FC_GGUF_F64:
    case FC_GGUF_BOOL:
    case FC_GGUF_STR:
    case FC_GGUF_ARR: break;
    }
    return st == FC_OK;
}

/* "<arch>.<suffix>" as an integer (dflt when absent). */
static int64_t arch_int(fc_gguf *g, const char *arch, const char *suffix, int64_t dflt)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    return get_int(g, key, &v) ? v : dflt;
}

/* A byte count for people: B, KiB, MiB or GiB with three significant digits. */
static const char *human(uint64_t b, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", b);
    else
        snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
    return buf;
}

/* A parameter count as 1.23 K / M / B. */
static const char *count(int64_t n, char *buf, size_t cap)
{
    const double v = (double)n;
    if (v >= 1e9)
        snprintf(buf, cap, "%.2f B", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.2f M", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.2f K", v / 1e3);
    else
        snprintf(buf, cap, "%" PRId64, n);
    return buf;
}

/* KV heads of layer l: <arch>.attention.head_count_kv is a number or (some
 * converters) one per layer. */
static int64_t kv_heads(fc_gguf *g, const char *arch, int64_t l, int64_t n_head)
{
    char key[160];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    int et;
    uint64_t n;
    const void *d;
    if (fc_gguf_get_arr(g, key, &et, &n) == FC_OK) {
        if ((uint64_t)l >= n || fc_gguf_get_arr_data(g, key, et, &d, &n) != FC_OK) return n_head;
        if (et == FC_GGUF_U32 || et == FC_GGUF_I32) {
            uint32_t v;
            memcpy(&v, (const unsigned char *)d + 4 * l, 4);
            return (int64_t)v;
        }
        return n_head;
    }
    return arch_int(g, arch, "attention.head_count_kv", n_head);
}

/* What a person asks of a model file first, one line each; --slots has the rest. */
static void summary(fc_ctx *ctx, fc_gguf *g, const char *path)
{
    char b1[32], b2[32], b3[32];
    const int64_t nt = fc_gguf_tensor_count(g);
    uint64_t bytes = 0, counts[64] = {0}, bytes_of[64] = {0};
    int64_t params = 0;
    for (int64_t i = 0; i < nt; i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        int64_t e = 1;
        for (int d = 0; d < ti.n_dims; d++) e *= ti.ne[d];
        params += e;
        bytes += ti.nbytes;
        if (ti.type < 64) counts[ti.type]++, bytes_of[ti.type] += ti.nbytes;
    }
    struct stat fst;
    const int splits = fc_gguf_split_count(g);
    if (splits > 1 || stat(path, &fst) != 0) /* the data of every split, not this file's size */
        printf("file: %s, %s of tensor data in %d file%s", path, human(bytes, b1, sizeof b1), splits,
               splits == 1 ? "" : "s");
    else
        printf("file: %s, %s", path, human((uint64_t)fst.st_size, b1, sizeof b1));
    printf(" (GGUF v%u, %" PRId64 " tensors, %" PRId64 " metadata keys)\n", fc_gguf_version(g), nt,
           fc_gguf_kv_count(g));
    const char *s;
    size_t len;
    char arch[64] = "";
    if (fc_gguf_get_str(g, "general.architecture", &s, &len) == FC_OK)
        snprintf(arch, sizeof arch, "%.*s", (int)(len < 63 ? len : 63), s);
    if (fc_gguf_get_str(g, "general.name", &s, &len) == FC_OK) {
        printf("name: ");
        print_str(s, len, 80);
        printf("\n");
    }
    const int64_t n_layer = arch_int(g, arch, "block_count", 0), n_embd = arch_int(g, arch, "embedding_length", 0);
    const int64_t n_head = arch_int(g, arch, "attention.head_count", 0);
    const int64_t k_len = arch_int(g, arch, "attention.key_length", n_head > 0 ? n_embd / n_head : 0);
    const int64_t v_len = arch_int(g, arch, "attention.value_length", k_len);
    const int64_t n_expert = arch_int(g, arch, "expert_count", 0);
    printf("architecture: %s", arch[0] ? arch : "(no general.architecture)");
    if (n_layer) printf(", %" PRId64 " layers, embedding %" PRId64, n_layer, n_embd);
    if (n_head) printf(", %" PRId64 " heads (%" PRId64 " KV) of %" PRId64, n_head, kv_heads(g, arch, 0, n_head), k_len);
    if (n_expert)
        printf(", %" PRId64 " experts (%" PRId64 " used)", n_expert, arch_int(g, arch, "expert_used_count", 0));
    printf("\nparameters: %s (%" PRId64 "), %.2f bits each\n", count(params, b1, sizeof b1), params,
           params ? 8.0 * (double)bytes / (double)params : 0.0);
    /* the mix, by bytes, largest first */
    printf("types:");
    for (int shown = 0, first = 1; shown < 64; shown++) {
        int best = -1;
        for (int t = 0; t < 64; t++)
            if (counts[t] && (best < 0 || bytes_of[t] > bytes_of[best])) best = t;
        if (best < 0) break;
        printf("%s %s %" PRIu64 " tensor%s %s (%.1f%%)", first ? "" : ",", fc_ggml_type_name((uint32_t)best),
               counts[best], counts[best] == 1 ? "" : "s", human(bytes_of[best], b1, sizeof b1),
               bytes ? 100.0 * (double)bytes_of[best] / (double)bytes : 0.0);
        counts[best] = 0, first = 0;
    }
    int64_t ft;
    if (get_int(g, "general.file_type", &ft)) printf("; general.file_type %" PRId64, ft);
    printf("\n");
    const int64_t n_ctx = arch_int(g, arch, "context_length", 0);
    if (n_ctx)
        printf("context: %" PRId64 " positions (%s.context_length)\n", n_ctx, arch);
    else
        printf("context: unknown (no %s.context_length)\n", arch[0] ? arch : "<arch>");
    int et;
    uint64_t n_vocab = 0;
    if (fc_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_vocab) == FC_OK) {
        printf("vocab: %" PRIu64 " tokens", n_vocab);
        if (fc_gguf_get_str(g, "tokenizer.ggml.model", &s, &len) == FC_OK) printf(", %.*s", (int)len, s);
        if (fc_gguf_get_str(g, "tokenizer.ggml.pre", &s, &len) == FC_OK) printf(" (pre-tokenizer %.*s)", (int)len, s);
        printf("\n");
    } else {
        printf("vocab: none (no tokenizer.ggml.tokens)\n");
    }
    const char *tt = NULL;
    size_t tl = 0;
    if (fc_chat_template_from_gguf(ctx, g, &tt, &tl) != FC_OK || !tt) {
        printf("chat template: none in the file\n");
    } else {
        char *z = malloc(tl + 1);
        fc_chat_template fam;
        if (z) memcpy(z, tt, tl), z[tl] = 0;
        if (z && fc_chat_template_detect(ctx, z, &fam) == FC_OK)
            printf("chat template: %s (%zu bytes of tokenizer.chat_template)\n", fc_chat_template_name(fam), tl);
        else
            printf("chat template: not one Fucina renders (%zu bytes; chat needs --chat-template)\n", tl);
        free(z);
    }
    fc_ctx_clear_error(ctx);
    /* a run holds the weights and an f16 KV cache of K and V rows for every layer and position;
     * the keys are the file's word, so a forged block_count or width is bounded, not looped over */
    uint64_t kv_pos = 0;
    const int sane = n_layer > 0 && n_layer <= 4096 && n_head > 0 && n_head <= 65536 && k_len > 0 && k_len <= 65536 &&
                     v_len > 0 && v_len <= 65536 && n_ctx > 0 && n_ctx <= ((int64_t)1 << 32);
    for (int64_t l = 0; sane && l < n_layer; l++) {
        const int64_t h = kv_heads(g, arch, l, n_head);
        if (h >= 0 && h <= 65536) kv_pos += 2u * (uint64_t)h * (uint64_t)(k_len + v_len);
    }
    printf("memory: %s of weights", human(bytes, b1, sizeof b1));
    if (kv_pos && n_ctx) {
        const int64_t chat_ctx = n_ctx < 4096 ? n_ctx : 4096; /* chat's default context */
        printf(" + f16 KV cache %s per position: %s at %" PRId64 " positions%s", human(kv_pos, b2, sizeof b2),
               human(bytes + kv_pos * (uint64_t)chat_ctx, b3, sizeof b3), chat_ctx,
               chat_ctx < n_ctx ? " (chat's default context)" : "");
        if (chat_ctx < n_ctx)
            printf(", %s at the full %" PRId64, human(bytes + kv_pos * (uint64_t)n_ctx, b3, sizeof b3), n_ctx);
    }
    printf("\n");
}

static int info_gguf(const char *path, int slots, int all)
{
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina info: %s\n", err);
        return 1;
    }
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) {
        fprintf(stderr, "fucina info: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 2;
    }
    if (!slots) {
        summary(ctx, g, path);
        printf("(--slots: every metadata key and the tensor table)\n");
        fc_gguf_close(g);
        fc_ctx_free(ctx);
        return 0;
    }
    int64_t nkv = fc_gguf_kv_count(g), nt = fc_gguf_tensor_count(g);
    printf("file: %s\nGGUF version %u, alignment %u, data at byte %" PRIu64 ", %" PRId64 " metadata keys, %" PRId64
           " tensors\n", path, fc_gguf_version(g), fc_gguf_alignment(g), fc_gguf_data_offset(g), nkv, nt);
    printf("\nmetadata:\n");
    const uint64_t show = all ? UINT64_MAX : 8;
    for (int64_t i = 0; i < nkv; i++) {
        const char *key = fc_gguf_kv_key(g, i);
        int type = fc_gguf_kv_type(g, i);
        printf("  %-44s %-7s ", key, fc_gguf_vtype_name(type));
        if (type == FC_GGUF_STR) {
            const char *s;
            size_t len;
            if (fc_gguf_get_str(g, key, &s, &len) == FC_OK) print_str(s, len, all ? (size_t)-1 : 120);
        } else if (type == FC_GGUF_ARR) {
            int et;
            uint64_t n;
            if (fc_gguf_get_arr(g, key, &et, &n) != FC_OK) continue;
            printf("[%s x %" PRIu64 "]", fc_gguf_vtype_name(et), n);
            if (n) printf(" ");
            if (et == FC_GGUF_STR) {
                for (uint64_t k = 0; k < n && k < show; k++) {
                    const char *s;
                    size_t len;
                    if (fc_gguf_get_arr_str(g, key, k, &s, &len) != FC_OK) break;
                    printf("%s", k ? ", " : "");
                    print_str(s, len, all ? (size_t)-1 : 40);
                }
            } else {
                const void *d;
                uint64_t m;
                if (fc_gguf_get_arr_data(g, key, et, &d, &m) == FC_OK)
                    for (uint64_t k = 0; k < m && k < show; k++) {
                        printf("%s", k ? ", " : "");
                        print_scalar((const unsigned char *)d + k * scalar_size(et), et);
                    }
            }
            if (n > show) printf(", ...");
        } else {
            unsigned char raw[8] = {0};
            fc_status st = FC_OK;
            switch ((fc_gguf_vtype)type) {
            case FC_GGUF_U8: st = fc_gguf_get_u8(g, key, (uint8_t *)raw); break;
            case FC_GGUF_I8: st = fc_gguf_get_i8(g, key, (int8_t *)raw); break;
            case FC_GGUF_U16: { uint16_t v; st = fc_gguf_get_u16(g, key, &v); memcpy(raw, &v, 2); break; }
            case FC_GGUF_I16: { int16_t v; st = fc_gguf_get_i16(g, key, &v); memcpy(raw, &v, 2); break; }
            case FC_GGUF_U32: { uint32_t v; st = fc_gguf_get_u32(g, key, &v); memcpy(raw, &v, 4); break; }
            case FC_GGUF_I32: { int32_t v; st = fc_gguf_get_i32(g, key, &v); memcpy(raw, &v, 4); break; }
            case FC_GGUF_U64: { uint64_t v; st = fc_gguf_get_u64(g, key, &v); memcpy(raw, &v, 8); break; }
            case FC_GGUF_I64: { int64_t v; st = fc_gguf_get_i64(g, key, &v); memcpy(raw, &v, 8); break; }
            case FC_GGUF_F32: { float v; st = fc_gguf_get_f32(g, key, &v); memcpy(raw, &v, 4); break; }
            case FC_GGUF_F64: { double v; st = fc_gguf_get_f64(g, key, &v); memcpy(raw, &v, 8); break; }
            case FC_GGUF_BOOL: { int v; st = fc_gguf_get_bool(g, key, &v); raw[0] = v != 0; break; }
            case FC_GGUF_STR: case FC_GGUF_ARR: break;
            }
            if (st == FC_OK) print_scalar(raw, type);
        }
        printf("\n");
    }
    printf("\ntensors:\n  %-5s %-44s %-8s %-28s %14s %14s\n", "#", "name", "type", "shape (ne)", "bytes", "offset");
    uint64_t total_bytes = 0, counts[64] = {0}, bytes_of[64] = {0};
    int64_t total_params = 0;
    for (int64_t i = 0; i < nt; i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        char sh[96];
        size_t l = 0;
        int64_t elems = 1;
        for (int d = 0; d < ti.n_dims; d++) {
            l += (size_t)snprintf(sh + l, l < sizeof sh ? sizeof sh - l : 0, "%s%" PRId64, d ? " x " : "", ti.ne[d]);
            elems *= ti.ne[d];
        }
        printf("  %-5" PRId64 " %-44s %-8s %-28s %14" PRIu64 " %14" PRIu64 "\n", i, ti.name, ti.type_name, sh,
               ti.nbytes, ti.offset);
        total_params += elems;
        total_bytes += ti.nbytes;
        if (ti.type < 64) {
            counts[ti.type]++;
            bytes_of[ti.type] += ti.nbytes;
        }
    }
    printf("\ntotals: %" PRId64 " tensors, %" PRId64 " parameters (%.3f B), %" PRIu64 " bytes (%.2f MiB), "
           "%.3f bits/parameter\n", nt, total_params, (double)total_params / 1e9, total_bytes,
           (double)total_bytes / (1024.0 * 1024.0), total_params ? 8.0 * (double)total_bytes / (double)total_params : 0.0);
    printf("types:\n");
    for (uint32_t t = 0; t < 64; t++)
        if (counts[t])
            printf("  %-8s %6" PRIu64 " tensors %14" PRIu64 " bytes (%5.1f%%)\n", fc_ggml_type_name(t), counts[t],
                   bytes_of[t], total_bytes ? 100.0 * (double)bytes_of[t] / (double)total_bytes : 0.0);
    fc_gguf_close(g);
    fc_ctx_free(ctx);
    return 0;
}

int fc_cmd_info(int argc, char **argv)
{
    int slots = 0, all = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else if (!strcmp(argv[i], "--all")) {
            all = 1;
        } else if (!strcmp(argv[i], "--slots") || !strcmp(argv[i], "--tensors")) {
            slots = 1;
        } else if (!strcmp(argv[i], "--no-slots")) {
            slots = 0;
        } else {
            fprintf(stderr, "fucina info: unknown option '%s'\n", argv[i]);
            help(stderr);
            return 2;
        }
    }
    if (path) return info_gguf(path, slots || all, all);
    if (fc_dispatch_init() != FC_OK) {
        fprintf(stderr, "fucina info: %s\n", fc_dispatch_error());
        return 2;
    }
    printf("fucina %s\n", fc_version());
    printf("cpu features:");
    for (size_t i = 0; fc_cpu_feature_name(i); i++)
        if (fc_cpu_feature_present(i)) printf(" %s", fc_cpu_feature_name(i));
    printf("\nisas:");
    for (size_t i = 0; fc_isa_name(i); i++)
        printf(" %s(%s)", fc_isa_name(i), fc_isa_supported(i) ? "yes" : "no");
    printf("\nisa cap: %s\n", fc_dispatch_cap());
    {
        /* the summary: slots per chosen ISA, in the order of the ISA list */
        printf("slots: %zu (", fc_kernel_slot_count());
        int first = 1;
        for (size_t k = 0; fc_isa_name(k); k++) {
            size_t n = 0;
            for (size_t i = 0; i < fc_kernel_slot_count(); i++) {
                fc_kernel_slot s;
                if (fc_kernel_slot_get(i, &s) == FC_OK && !strcmp(s.isa, fc_isa_name(k))) n++;
            }
            if (n) printf("%s%s %zu", first ? "" : ", ", fc_isa_name(k), n), first = 0;
        }
        printf(")%s\n", slots ? "" : "; --slots lists them");
    }
    if (slots) {
        printf("%-28s %-10s %-6s %s\n", "slot", "isa", "tile", "symbol");
        for (size_t i = 0; i < fc_kernel_slot_count(); i++) {
            fc_kernel_slot s;
            if (fc_kernel_slot_get(i, &s) != FC_OK) continue;
            printf("%-28s %-10s %-6s %s\n", s.slot, s.isa, s.tile, s.symbol);
        }
    }
    return 0;
}
