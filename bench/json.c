/* SPDX-License-Identifier: MIT */
/* A small streaming JSON writer (objects, arrays, strings, numbers). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fcb.h"
#include "fucina/dispatch.h"
#include "fucina/version.h"

int fcb_json_open(fcb_json *j, const char *path)
{
    memset(j, 0, sizeof *j);
    j->first[0] = 1;
    if (strcmp(path, "-") == 0) {
        /* JSON on stdout: the human-readable output moves to stderr. */
        fflush(stdout);
        int fd = dup(STDOUT_FILENO);
        if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return -1;
        j->f = fdopen(fd, "w");
    } else {
        j->f = fopen(path, "w");
    }
    return j->f ? 0 : -1;
}

int fcb_json_close(fcb_json *j)
{
    if (!j->f) return -1;
    fputc('\n', j->f);
    int err = j->err || ferror(j->f);
    err |= fclose(j->f) != 0;
    j->f = NULL;
    return err ? -1 : 0;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Separator and key of the next member. Records of depth <= 2 go on their
 * own lines, so one record is one line inside its array. */
static void member(fcb_json *j, const char *key)
{
    if (!j->first[j->depth]) fputc(',', j->f);
    if (j->depth <= 2 && j->depth > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++) fputc(' ', j->f);
    } else if (!j->first[j->depth]) {
        fputc(' ', j->f);
    }
    j->first[j->depth] = 0;
    if (key) {
        put_string(j->f, key);
        fputs(": ", j->f);
    }
}

void fcb_json_begin(fcb_json *j, const char *key, char bracket)
{
    if (j->depth > 0 || !j->first[0]) member(j, key);
    fputc(bracket, j->f);
    if (j->depth < 15) j->depth++;
    j->first[j->depth] = 1;
}

void fcb_json_end(fcb_json *j, char bracket)
{
    int had_members = !j->first[j->depth];
    if (j->depth > 0) j->depth--;
    if (had_members && j->depth < 2) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++) fputc(' ', j->f);
    }
    fputc(bracket, j->f);
    j->first[j->depth] = 0;
}

void fcb_json_str(fcb_json *j, const char *key, const char *v)
{
    member(j, key);
    if (v) put_string(j->f, v);
    else fputs("null", j->f);
}

void fcb_json_num(fcb_json *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v)) fprintf(j->f, "%.6g", v);
    else fputs("null", j->f);
}

void fcb_json_int(fcb_json *j, const char *key, long long v)
{
    member(j, key);
    fprintf(j->f, "%lld", v);
}

void fcb_json_bool(fcb_json *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void fcb_json_machine(fcb_json *j, const fcb_machine *m)
{
    fcb_json_begin(j, "machine", '{');
    fcb_json_str(j, "cpu_model", m->cpu_model);
    fcb_json_int(j, "cpus_online", m->cpus_online);
    fcb_json_int(j, "cpus_usable", m->cpus_allowed);
    fcb_json_int(j, "l1d_bytes", (long long)m->l1d);
    fcb_json_int(j, "l2_bytes", (long long)m->l2);
    fcb_json_int(j, "llc_bytes", (long long)m->llc);
    fcb_json_int(j, "mem_available_bytes", (long long)m->mem_available);
    fcb_json_str(j, "date", m->date);
    fcb_json_str(j, "kernel", m->kernel);
    fcb_json_str(j, "fucina_version", FUCINA_VERSION_STRING);
    fcb_json_str(j, "git_describe", m->git[0] ? m->git : NULL);
#if defined(__clang__)
    fcb_json_str(j, "compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
    fcb_json_str(j, "compiler", "gcc " __VERSION__);
#endif
    fcb_json_str(j, "isa_cap", fc_dispatch_cap());
    fcb_json_begin(j, "isas_supported", '[');
    for (size_t i = 0; fc_isa_name(i); i++)
        if (fc_isa_supported(i)) fcb_json_str(j, NULL, fc_isa_name(i));
    fcb_json_end(j, ']');
    fcb_json_begin(j, "cpu_features", '[');
    for (size_t i = 0; fc_cpu_feature_name(i); i++)
        if (fc_cpu_feature_present(i)) fcb_json_str(j, NULL, fc_cpu_feature_name(i));
    fcb_json_end(j, ']');
    fcb_json_end(j, '}');
}
