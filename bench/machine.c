/* SPDX-License-Identifier: MIT */
/* What the run happened on: CPU model, CPUs, caches, memory, date, kernel. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "fcb.h"
#include "fcb_git_describe.h" /* generated at build time (bench/git_describe.cmake) */

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

/* The value of the first "key<spaces>: value" line of a file. */
static int file_value(const char *path, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    size_t klen = strlen(key);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        char *colon = strchr(line + klen, ':');
        if (!colon) continue;
        for (char *p = line + klen; p < colon; p++)
            if (*p != ' ' && *p != '\t') goto next;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(out, len, "%s", colon);
        trim(out);
        found = 1;
    next:;
    }
    fclose(f);
    return found;
}

/* "48K", "1280K", "48M" from sysfs. */
static size_t parse_cache_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K') v *= 1024;
    else if (*end == 'M') v *= 1024 * 1024;
    return (size_t)v;
}

static void probe_caches(fcb_machine *m)
{
    for (int i = 0; i < 8; i++) {
        char path[128], level[16] = "", type[32] = "", size[32] = "";
        FILE *f;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "r"))) break;
        if (!fgets(level, sizeof level, f)) level[0] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(type, sizeof type, f)) type[0] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(size, sizeof size, f)) size[0] = 0;
            fclose(f);
        }
        if (!strncmp(type, "Instruction", 11)) continue;
        size_t bytes = parse_cache_size(size);
        int lvl = atoi(level);
        if (lvl == 1) m->l1d = bytes;
        else if (lvl == 2) m->l2 = bytes;
        if (lvl >= 2 && bytes > m->llc) m->llc = bytes;
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (m->llc == 0) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v > 0) m->llc = (size_t)v;
    }
#endif
}

void fcb_machine_probe(fcb_machine *m)
{
    memset(m, 0, sizeof *m);
    if (!file_value("/proc/cpuinfo", "model name", m->cpu_model, sizeof m->cpu_model)) {
        char impl[32] = "", part[32] = "";
        if (file_value("/proc/cpuinfo", "CPU implementer", impl, sizeof impl) &&
            file_value("/proc/cpuinfo", "CPU part", part, sizeof part))
            snprintf(m->cpu_model, sizeof m->cpu_model, "implementer %s part %s", impl, part);
        else
            snprintf(m->cpu_model, sizeof m->cpu_model, "unknown");
    }
    long on = sysconf(_SC_NPROCESSORS_ONLN);
    m->cpus_online = on > 0 ? (int)on : 1;
    int cpus[1024];
    m->cpus_allowed = fcb_cpu_list(cpus, 1024);
    probe_caches(m);
    char avail[64];
    if (file_value("/proc/meminfo", "MemAvailable", avail, sizeof avail))
        m->mem_available = (size_t)strtoull(avail, NULL, 10) * 1024; /* "kB" */
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    struct utsname u;
    if (uname(&u) == 0) snprintf(m->kernel, sizeof m->kernel, "%s %s %s", u.sysname, u.release, u.machine);
    const char *git = getenv("FUCINA_GIT_DESCRIBE");
    snprintf(m->git, sizeof m->git, "%s", git && *git ? git : FUCINA_GIT_DESCRIBE);
}

void fcb_machine_print(FILE *f, const fcb_machine *m)
{
    char l1[32], l2[32], l3[32];
    fcb_fmt_bytes(l1, sizeof l1, (double)m->l1d);
    fcb_fmt_bytes(l2, sizeof l2, (double)m->l2);
    fcb_fmt_bytes(l3, sizeof l3, (double)m->llc);
    fprintf(f, "machine: %s; %d CPUs online, %d usable; L1d %s, L2 %s, LLC %s; %s; %s%s%s\n", m->cpu_model,
            m->cpus_online, m->cpus_allowed, l1, l2, l3, m->kernel, m->date, m->git[0] ? "; " : "", m->git);
}
