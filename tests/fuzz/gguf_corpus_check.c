/* SPDX-License-Identifier: MIT */
/* Runs the GGUF reader over a corpus written by gen_gguf_corpus.py:
 *
 *   gguf_corpus_check DIR
 *
 * good-*.gguf must open (mmap and read mode) and every tensor must be
 * reachable; bad-*.gguf must be rejected, in both modes, with FC_ERR_FORMAT
 * and a message naming the file and, per expect.tsv, the rule. Under ASan/UBSan this is the "rejected
 * cleanly" check: no abort, no out-of-bounds read. Exit 0 when all files
 * behave; 1 otherwise (each failure printed); 2 on usage errors or a corpus
 * with too few files (the issue asks for at least 30 malformed ones). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"

/* expect.tsv: "file<TAB>text the rejection message must contain". */
static char expect_names[128][256], expect_text[128][256];
static int n_expect;

static void load_expect(const char *dir)
{
    char path[1024], line[256];
    snprintf(path, sizeof path, "%s/expect.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (n_expect < 128 && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        tab[strcspn(tab + 1, "\n") + 1] = 0;
        snprintf(expect_names[n_expect], sizeof expect_names[0], "%s", line);
        snprintf(expect_text[n_expect], sizeof expect_text[0], "%s", tab + 1);
        n_expect++;
    }
    fclose(f);
}

static const char *expected_text(const char *name)
{
    for (int i = 0; i < n_expect; i++)
        if (!strcmp(expect_names[i], name)) return expect_text[i];
    return NULL;
}

static int check_file(fc_ctx *ctx, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int bad = strncmp(name, "bad-", 4) == 0, failures = 0;
    for (int mode = 0; mode < 2; mode++) {
        fc_gguf *g = fc_gguf_open(ctx, path, mode ? FC_GGUF_READ : 0);
        const char *how = mode ? "read" : "mmap";
        if (bad) {
            if (g) {
                fprintf(stderr, "%s (%s): a malformed file was accepted\n", name, how);
                fc_gguf_close(g);
                failures++;
                continue;
            }
            const char *m = fc_ctx_error(ctx);
            const char *want = expected_text(name);
            if (fc_ctx_status(ctx) != FC_ERR_FORMAT || !strstr(m, name) || (want && !strstr(m, want))) {
                fprintf(stderr, "%s (%s): want FC_ERR_FORMAT, the file name and \"%s\", got status %d: %s\n", name,
                        how, want ? want : "", (int)fc_ctx_status(ctx), m);
                failures++;
            }
        } else {
            if (!g) {
                fprintf(stderr, "%s (%s): a valid file was rejected: %s\n", name, how, fc_ctx_error(ctx));
                failures++;
                fc_ctx_clear_error(ctx);
                continue;
            }
            for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
                fc_gguf_tensor_info ti;
                if (!fc_gguf_tensor_info_at(g, i, &ti)) {
                    fprintf(stderr, "%s (%s): tensor %lld has no info\n", name, how, (long long)i);
                    failures++;
                }
            }
            fc_gguf_close(g);
        }
        fc_ctx_clear_error(ctx);
    }
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gguf_corpus_check DIR\n");
        return 2;
    }
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "gguf_corpus_check: %s\n", err);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 2;
    }
    load_expect(argv[1]);
    int failures = 0, n_bad = 0, n_good = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        if (!strncmp(e->d_name, "bad-", 4)) n_bad++;
        else if (!strncmp(e->d_name, "good-", 5)) n_good++;
        else continue;
        failures += check_file(ctx, argv[1], e->d_name);
    }
    closedir(d);
    fc_ctx_free(ctx);
    printf("gguf_corpus_check: %d malformed and %d valid files, %d failures\n", n_bad, n_good, failures);
    if (n_bad < 30 || n_good < 1) {
        fprintf(stderr, "gguf_corpus_check: the corpus in %s is too small (want >= 30 malformed files)\n", argv[1]);
        return 2;
    }
    return failures ? 1 : 0;
}
