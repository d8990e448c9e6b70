/* SPDX-License-Identifier: MIT */
/* Command-line values: flags, numbers, size lists, ISA names; byte counts. */
#include <errno.h>
#include <stdlib.h>
#include <fnmatch.h>
#include <string.h>

#include "fcb.h"
#include "fucina/gen/fck_isa.h"

int fcb_arg_is(fcb_argv *a, const char *name, const char **value)
{
    const char *arg = a->argv[a->i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0) return 0;
    if (arg[len] == '=') {
        if (!value) {
            fprintf(stderr, "fucina-bench %s: %s takes no value\n", a->cmd, name);
            exit(FCB_EXIT_USAGE);
        }
        *value = arg + len + 1;
        a->i++;
        return 1;
    }
    if (arg[len] != 0) return 0;
    a->i++;
    if (value) {
        if (a->i >= a->argc) {
            fprintf(stderr, "fucina-bench %s: %s needs a value (see fucina-bench %s --help)\n", a->cmd, name, a->cmd);
            exit(FCB_EXIT_USAGE);
        }
        *value = a->argv[a->i++];
    }
    return 1;
}

int fcb_parse_int(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "fucina-bench %s: %s: '%s' is not an integer in [%ld, %ld]\n", cmd, flag, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

int fcb_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, "fucina-bench %s: %s: '%s' is not a number in [%g, %g]\n", cmd, flag, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

int fcb_parse_int_list(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out, int max,
                       int *count)
{
    *count = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < lo || x > hi || (*end && *end != ',') || *count == max) {
            fprintf(stderr, "fucina-bench %s: %s: bad list '%s' (up to %d integers in [%d, %d])\n", cmd, flag, s, max,
                    lo, hi);
            return 0;
        }
        out[(*count)++] = (int)x;
        if (!*end) return 1;
        p = end + 1;
    }
}

int fcb_parse_sizes(const char *cmd, const char *flag, const char *s, size_t *out, int max, int *count)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item) goto bad_item;
        memcpy(item, p, len);
        item[len] = 0;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(item, &end, 10);
        unsigned long long mul = 1;
        if (*end == 'k' || *end == 'K') mul = 1024, end++;
        else if (*end == 'm' || *end == 'M') mul = 1024 * 1024, end++;
        else if (*end == 'g' || *end == 'G') mul = 1024ull * 1024 * 1024, end++;
        if (end == item || *end || errno || item[0] == '-' || v == 0 || v > (1ull << 40) / mul) goto bad_item;
        if (n == max) {
            fprintf(stderr, "fucina-bench %s: %s: at most %d sizes\n", cmd, flag, max);
            return 0;
        }
        out[n++] = (size_t)(v * mul);
        if (!comma) break;
        p = comma + 1;
        continue;
    bad_item:
        fprintf(stderr, "fucina-bench %s: %s: '%.*s' is not a positive element count "
                        "(e.g. 4096, 256k, 16M) in the list '%s'\n", cmd, flag, (int)len, p, s);
        return 0;
    }
    *count = n;
    return 1;
}

int fcb_isa_by_name(const char *name, fck_isa *out)
{
    for (int i = 0; i < FCK_ISA_COUNT; i++)
        if (strcmp(fck_isa_table[i].name, name) == 0) {
            *out = (fck_isa)i;
            return 1;
        }
    return 0;
}

const char *fcb_isa_name(fck_isa isa) { return fck_isa_table[isa].name; }

void fcb_print_isa_names(FILE *f)
{
    for (int i = 0; i < FCK_ISA_COUNT; i++) fprintf(f, "%s%s", i ? ", " : "", fck_isa_table[i].name);
}

void fcb_fmt_bytes(char *buf, size_t len, double b)
{
    if (b <= 0) snprintf(buf, len, "?");
    else if (b >= 1024.0 * 1024 * 1024) snprintf(buf, len, "%.3g GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, len, "%.3g MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(buf, len, "%.3g KiB", b / 1024.0);
    else snprintf(buf, len, "%.0f B", b);
}

int fcb_name_matches(const char *const *filters, int n, const char *name)
{
    if (n == 0) return 1;
    for (int i = 0; i < n; i++) {
        const char *f = filters[i];
        if (strpbrk(f, "*?[") ? fnmatch(f, name, 0) == 0 : strstr(name, f) != NULL) return 1;
    }
    return 0;
}
