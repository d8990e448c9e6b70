/* SPDX-License-Identifier: MIT */
/* Token sampler (include/fucina/sampler.h) against llama.cpp's samplers.
 *
 * The reference is libllama itself, through oracle/ggml_oracle.h: each
 * deterministic stage (penalties, top-k, top-p, min-p, temperature, greedy)
 * runs on the same candidates array in ours and in llama_sampler_apply, over
 * many random logit vectors (sizes 1..151936, ties, -inf, extreme values),
 * sorted and unsorted inputs; the survivors, their order, logits and
 * probabilities must be bit-identical. The one allowed difference: among
 * EQUAL logits llama.cpp's order is std::partial_sort's, ours is by id, so
 * runs of equal logits are compared as sets, and at a cut inside a run of
 * ties only the count is compared (see sampler.h). Then llama.cpp's default
 * chain (penalties, top-k, top-p, min-p, temp, dist) with a seed must pick
 * the same 200 tokens as fc_sampler_sample, accepting each pick.
 *
 * Without the oracle: mt19937 against the C++ standard's check value,
 * parameter and NaN errors, greedy and top-k against plain computations. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/sampler.h"
#include "ggml_oracle.h"
#include "llm/sampler_rng.h"

static fc_ctx *ctx;
static void setup(void) { ctx = fct_suite_begin(1); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(sampler, .init = setup, .fini = teardown);

/* ---- llama.cpp's ABI (include/llama.h of the matching source) ---------- */

typedef int32_t llama_token;
typedef struct llama_token_data {
    llama_token id;
    float logit;
    float p;
} llama_token_data;
typedef struct llama_token_data_array {
    llama_token_data *data;
    size_t size;
    int64_t selected;
    bool sorted;
} llama_token_data_array;
typedef struct llama_sampler_chain_params {
    bool no_perf;
} llama_sampler_chain_params;
struct llama_sampler;

static struct {
    struct llama_sampler *(*top_k)(int32_t);
    struct llama_sampler *(*top_p)(float, size_t);
    struct llama_sampler *(*min_p)(float, size_t);
    struct llama_sampler *(*temp)(float);
    struct llama_sampler *(*temp_ext)(float, float, float);
    struct llama_sampler *(*penalties)(int32_t, int32_t, float, float, float);
    struct llama_sampler *(*dist)(uint32_t);
    struct llama_sampler *(*greedy)(void);
    struct llama_sampler *(*chain_init)(llama_sampler_chain_params);
    void (*chain_add)(struct llama_sampler *, struct llama_sampler *);
    void (*apply)(struct llama_sampler *, llama_token_data_array *);
    void (*accept)(struct llama_sampler *, llama_token);
    void (*free)(struct llama_sampler *);
} L;

/* Resolve libllama's sampler API or skip the test. */
static void need_llama(void) {
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("llama.cpp oracle unavailable: %s", why);
#define SYM(f, name)                                                                               \
    do {                                                                                           \
        *(void **)&L.f = fco_llama_sym(name);                                                      \
        if (!L.f) cr_skip_test("libllama (%s) is not available in %s", name, fco_ggml_dir());     \
    } while (0)
    SYM(top_k, "llama_sampler_init_top_k");
    SYM(top_p, "llama_sampler_init_top_p");
    SYM(min_p, "llama_sampler_init_min_p");
    SYM(temp, "llama_sampler_init_temp");
    SYM(temp_ext, "llama_sampler_init_temp_ext");
    SYM(penalties, "llama_sampler_init_penalties");
    SYM(dist, "llama_sampler_init_dist");
    SYM(greedy, "llama_sampler_init_greedy");
    SYM(chain_init, "llama_sampler_chain_init");
    SYM(chain_add, "llama_sampler_chain_add");
    SYM(apply, "llama_sampler_apply");
    SYM(accept, "llama_sampler_accept");
    SYM(free, "llama_sampler_free");
#undef SYM
}

/* ---- inputs --------------------------------------------------------------- */

static const size_t SIZES[] = {1, 2, 3, 7, 64, 128, 129, 500, 1024, 1025, 4096, 32000, 151936};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

static double gauss(fct_rng *r) {
    double u = fct_uniform(r, 1e-12, 1.0), v = fct_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Random logits of one of several shapes. Large POSITIVE extremes only for
 * n <= 128: llama.cpp's bucket sort (used when more than 128 are wanted)
 * mis-ranks logits above ~3.3e8 (see sampler_stages.c); we do not copy that. */
static void make_logits(float *x, size_t n, int kind, fct_rng *r) {
    double scale = fct_uniform(r, 0.5, 8.0);
    for (size_t i = 0; i < n; i++) {
        double g = gauss(r) * scale;
        switch (kind % 5) {
        case 0: x[i] = (float)g; break;                       /* smooth */
        case 1: x[i] = (float)floor(g * 2.0) * 0.5f; break;   /* many ties */
        case 2: /* -inf sprinkled, like masked tokens */
            x[i] = fct_uniform(r, 0, 1) < 0.3 ? -INFINITY : (float)g;
            break;
        case 3: { /* extremes */
            double t = fct_uniform(r, 0, 1);
            if (t < 0.05) x[i] = -FLT_MAX;
            else if (t < 0.1) x[i] = -1e30f;
            else if (t < 0.15) x[i] = n <= 128 ? 1e30f : 3e8f;
            else if (t < 0.2) x[i] = n <= 128 ? 1e20f : -3e8f;
            else x[i] = (float)(g * 1e3);
            break;
        }
        default: x[i] = (float)(g * 30.0); break; /* very peaked */
        }
    }
    if (kind % 5 == 2 && n > 0) x[fct_next(r) % n] = 1.0f; /* not all -inf */
}

/* Fill both arrays with the same candidates (id = index, p = 0). When
 * `sorted`, pre-sort descending (ties by id) and say so to both. */
static int cmp_desc(const void *pa, const void *pb) {
    const fc_token_data *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}
static void fill(fc_candidates *c, llama_token_data_array *l, const float *x, size_t n, bool sorted) {
    for (size_t i = 0; i < n; i++) c->data[i] = (fc_token_data){(fc_token)i, x[i], 0.0f};
    if (sorted) qsort(c->data, n, sizeof *c->data, cmp_desc);
    memcpy(l->data, c->data, n * sizeof *c->data);
    c->size = l->size = n;
    c->selected = l->selected = -1;
    c->sorted = l->sorted = sorted;
}

/* ---- comparison ---------------------------------------------------------- */

static bool same_f(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

static int cmp_id(const void *pa, const void *pb) {
    const llama_token_data *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_id_fc(const void *pa, const void *pb) {
    const fc_token_data *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* Ours vs llama.cpp's after one stage. `x`/`n0`: the stage's input, to tell
 * whether the last run of equal logits was cut (then its ids may differ). */
static void compare(const char *what, fc_candidates *c, llama_token_data_array *l,
                    const float *x, size_t n0) {
    cr_assert_eq(c->size, l->size, "%s: %zu survivors, llama.cpp %zu", what, c->size, l->size);
    cr_assert_eq(c->sorted, l->sorted, "%s: sorted %d, llama.cpp %d", what, c->sorted, l->sorted);
    size_t n = c->size;
    if (!c->sorted) { /* the input order, filtered: element for element */
        for (size_t i = 0; i < n; i++) {
            const fc_token_data *a = &c->data[i];
            const llama_token_data *b = &l->data[i];
            cr_assert(a->id == b->id && same_f(a->logit, b->logit) && same_f(a->p, b->p),
                      "%s: [%zu] ours (%d, %a, %a) llama.cpp (%d, %a, %a)", what, i, a->id,
                      (double)a->logit, (double)a->p, b->id, (double)b->logit, (double)b->p);
        }
        return;
    }
    /* Sorted: walk runs of equal logits; order each run by id on both sides
     * (a stage that does not sort, e.g. temp 0, keeps its input's order). */
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && same_f(l->data[j].logit, l->data[i].logit)) j++;
        qsort(l->data + i, j - i, sizeof *l->data, cmp_id);
        qsort(c->data + i, j - i, sizeof *c->data, cmp_id_fc);
        bool cut = false;
        if (j == n && n < n0) { /* a cut (logits unchanged): was a tie left out? */
            size_t in = 0;
            for (size_t k = 0; k < n0; k++) in += same_f(x[k], l->data[i].logit);
            cut = in > j - i;
        }
        for (size_t k = i; k < j; k++) {
            const fc_token_data *a = &c->data[k];
            const llama_token_data *b = &l->data[k];
            cr_assert(same_f(a->logit, b->logit) && same_f(a->p, b->p),
                      "%s: [%zu] ours (%d, %a, p %a) llama.cpp (%d, %a, p %a)", what, k, a->id,
                      (double)a->logit, (double)a->p, b->id, (double)b->logit, (double)b->p);
            if (!cut)
                cr_assert_eq(a->id, b->id, "%s: [%zu] id %d, llama.cpp %d (logit %a)", what, k,
                             a->id, b->id, (double)a->logit);
        }
        i = j;
    }
}

/* One stage on one input, in ours and llama.cpp's (which frees `ls`). */
typedef void (*our_stage)(fc_candidates *c, const void *arg);
static void run_stage(const char *what, struct llama_sampler *ls, our_stage f, const void *arg,
                      const float *x, size_t n, bool sorted, fc_token_data *cb,
                      llama_token_data *lb) {
    fc_candidates c = {.data = cb};
    llama_token_data_array l = {.data = lb};
    fill(&c, &l, x, n, sorted);
    f(&c, arg);
    L.apply(ls, &l);
    L.free(ls);
    cr_assert_eq(c.selected, l.selected, "%s: selected %lld, llama.cpp %lld", what,
                 (long long)c.selected, (long long)l.selected);
    compare(what, &c, &l, x, n);
}

typedef struct stage_arg {
    int32_t k;
    float p;
    size_t min_keep;
} stage_arg;
static void st_top_k(fc_candidates *c, const void *a) { fc_sample_top_k(c, ((const stage_arg *)a)->k); }
static void st_top_p(fc_candidates *c, const void *a) {
    fc_sample_top_p(c, ((const stage_arg *)a)->p, ((const stage_arg *)a)->min_keep);
}
static void st_min_p(fc_candidates *c, const void *a) {
    fc_sample_min_p(c, ((const stage_arg *)a)->p, ((const stage_arg *)a)->min_keep);
}
static void st_temp(fc_candidates *c, const void *a) { fc_sample_temp(c, ((const stage_arg *)a)->p); }
static void st_greedy(fc_candidates *c, const void *a) {
    (void)a;
    fc_sample_greedy(c);
}

typedef struct bufs {
    float *x;
    fc_token_data *c;
    llama_token_data *l;
} bufs;
static bufs bufs_new(void) {
    size_t n = SIZES[NSIZES - 1];
    bufs b = {malloc(n * sizeof(float)), malloc(n * sizeof(fc_token_data)),
              malloc(n * sizeof(llama_token_data))};
    cr_assert(b.x && b.c && b.l);
    return b;
}
static void bufs_free(bufs *b) {
    free(b->x);
    free(b->c);
    free(b->l);
}

/* ---- stage parity --------------------------------------------------------- */

Test(sampler, top_k_matches_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("top_k")};
    const int32_t ks[] = {1, 2, 5, 40, 128, 129, 300, 1000, 200000};
    char what[128];
    for (int si = 0; si < NSIZES; si++)
        for (int kind = 0; kind < 5; kind++)
            for (int ki = 0; ki < 9; ki++) {
                size_t n = SIZES[si];
                make_logits(b.x, n, kind, &r);
                stage_arg a = {.k = ks[ki]};
                snprintf(what, sizeof what, "top_k(%d) n %zu kind %d", a.k, n, kind);
                run_stage(what, L.top_k(a.k), st_top_k, &a, b.x, n, false, b.c, b.l);
            }
    bufs_free(&b);
}

Test(sampler, top_p_matches_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("top_p")};
    const float ps[] = {0.05f, 0.5f, 0.9f, 0.95f, 0.999999f};
    const size_t keeps[] = {0, 1, 7};
    char what[128];
    for (int si = 0; si < NSIZES; si++)
        for (int kind = 0; kind < 5; kind++)
            for (int pi = 0; pi < 5; pi++)
                for (int srt = 0; srt < 2; srt++) {
                    size_t n = SIZES[si];
                    make_logits(b.x, n, kind, &r);
                    stage_arg a = {.p = ps[pi], .min_keep = keeps[(pi + srt) % 3]};
                    snprintf(what, sizeof what, "top_p(%g, %zu) n %zu kind %d sorted %d",
                             (double)a.p, a.min_keep, n, kind, srt);
                    run_stage(what, L.top_p(a.p, a.min_keep), st_top_p, &a, b.x, n, srt, b.c, b.l);
                }
    bufs_free(&b);
}

Test(sampler, min_p_matches_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("min_p")};
    const float ps[] = {0.01f, 0.05f, 0.3f, 1.0f};
    const size_t keeps[] = {0, 3, 2000};
    char what[128];
    for (int si = 0; si < NSIZES; si++)
        for (int kind = 0; kind < 5; kind++)
            for (int pi = 0; pi < 4; pi++)
                for (int ki = 0; ki < 3; ki++)
                    for (int srt = 0; srt < 2; srt++) {
                        size_t n = SIZES[si];
                        make_logits(b.x, n, kind, &r);
                        stage_arg a = {.p = ps[pi], .min_keep = keeps[ki]};
                        snprintf(what, sizeof what, "min_p(%g, %zu) n %zu kind %d sorted %d",
                                 (double)a.p, a.min_keep, n, kind, srt);
                        run_stage(what, L.min_p(a.p, a.min_keep), st_min_p, &a, b.x, n, srt, b.c,
                                  b.l);
                    }
    bufs_free(&b);
}

Test(sampler, temp_and_greedy_match_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("temp")};
    const float ts[] = {0.1f, 0.7f, 1.5f, 3.0f, 0.0f, -1.0f};
    char what[128];
    for (int si = 0; si < NSIZES; si++)
        for (int kind = 0; kind < 5; kind++) {
            size_t n = SIZES[si];
            for (int ti = 0; ti < 6; ti++)
                for (int srt = 0; srt < 2; srt++) {
                    make_logits(b.x, n, kind, &r);
                    stage_arg a = {.p = ts[ti]};
                    snprintf(what, sizeof what, "temp(%g) n %zu kind %d sorted %d", (double)a.p, n,
                             kind, srt);
                    /* temp_ext(t, 0, 1) is what llama.cpp's default chain uses */
                    struct llama_sampler *ls = (ti & 1) ? L.temp_ext(a.p, 0.0f, 1.0f) : L.temp(a.p);
                    run_stage(what, ls, st_temp, &a, b.x, n, srt, b.c, b.l);
                }
            make_logits(b.x, n, kind, &r);
            snprintf(what, sizeof what, "greedy n %zu kind %d", n, kind);
            run_stage(what, L.greedy(), st_greedy, NULL, b.x, n, false, b.c, b.l);
        }
    bufs_free(&b);
}

Test(sampler, penalties_match_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("penalties")};
    const float rep[] = {1.0f, 1.1f, 0.8f, 1.5f};
    const float frq[] = {0.0f, 0.5f, -0.3f, 0.0f};
    const float prs[] = {0.0f, 0.25f, 0.0f, 1.7f};
    const int32_t lastn[] = {1, 8, 64, 300};
    fc_token hist[1000];
    char what[160];
    for (int si = 0; si < NSIZES; si++)
        for (int kind = 0; kind < 5; kind++)
            for (int pi = 0; pi < 4; pi++) {
                size_t n = SIZES[si];
                int32_t last_n = lastn[(si + kind + pi) % 4];
                make_logits(b.x, n, kind, &r);
                /* history: small ids repeat often; some ids beyond the vocabulary */
                size_t nh = (size_t)(fct_next(&r) % 700);
                struct llama_sampler *ls = L.penalties((int32_t)n, last_n, rep[pi], frq[pi], prs[(pi + kind) % 4]);
                for (size_t h = 0; h < nh; h++) {
                    hist[h] = (fc_token)(fct_next(&r) % (fct_next(&r) % 2 ? 20 : n + 5));
                    L.accept(ls, hist[h]);
                }
                size_t keep = nh < (size_t)last_n ? nh : (size_t)last_n;
                fc_candidates c = {.data = b.c};
                llama_token_data_array l = {.data = b.l};
                fill(&c, &l, b.x, n, kind & 1);
                fc_sample_penalties(&c, hist + nh - keep, keep, rep[pi], frq[pi], prs[(pi + kind) % 4]);
                L.apply(ls, &l);
                L.free(ls);
                snprintf(what, sizeof what, "penalties(%d, %g, %g, %g) n %zu kind %d hist %zu",
                         last_n, (double)rep[pi], (double)frq[pi], (double)prs[(pi + kind) % 4], n,
                         kind, nh);
                compare(what, &c, &l, b.x, n);
            }
    bufs_free(&b);
}

/* ---- RNG and the full chain ----------------------------------------------- */

Test(sampler, mt19937_standard_check_value) {
    /* [rand.predef]: the 10000th output of a default-constructed
     * std::mt19937 (seed 5489) is 4123659995. */
    fc_mt19937 m;
    fc_mt19937_seed(&m, 5489u);
    uint32_t v = 0;
    for (int i = 0; i < 10000; i++) v = fc_mt19937_next(&m);
    cr_assert_eq(v, 4123659995u, "mt19937 10000th output %u", v);
    fc_mt19937_seed(&m, 1234u);
    for (int i = 0; i < 10000; i++) {
        double u = fc_mt19937_uniform01(&m);
        cr_assert(u >= 0.0 && u < 1.0, "uniform01 gave %a", u);
    }
}

/* Distinct logits (ties would make the chain's pick depend on the order of
 * equal logits, which is std::partial_sort's in llama.cpp). */
static void make_distinct(float *x, size_t n, int kind, fct_rng *r, fc_token_data *scratch) {
    make_logits(x, n, kind == 1 || kind == 2 ? 0 : kind, r);
    for (size_t i = 0; i < n; i++) scratch[i] = (fc_token_data){(fc_token)i, x[i], 0};
    qsort(scratch, n, sizeof *scratch, cmp_desc);
    for (size_t i = 1; i < n; i++)
        if (!(scratch[i].logit < scratch[i - 1].logit))
            scratch[i].logit = nextafterf(scratch[i - 1].logit, -INFINITY);
    for (size_t i = 0; i < n; i++) x[scratch[i].id] = scratch[i].logit;
}

Test(sampler, chain_200_draws_match_llama) {
    need_llama();
    bufs b = bufs_new();
    fc_token_data *scratch = malloc(SIZES[NSIZES - 1] * sizeof *scratch);
    cr_assert(scratch);
    fct_rng r = {fct_seed_of("chain")};
    fc_sampler_params sets[6];
    for (int i = 0; i < 6; i++) sets[i] = fc_sampler_default_params();
    sets[0].seed = 42;                                                 /* llama.cpp's defaults */
    sets[1].seed = 7, sets[1].penalty_repeat = 1.3f, sets[1].penalty_freq = 0.2f,
    sets[1].penalty_present = 0.4f, sets[1].penalty_last_n = 16, sets[1].temp = 1.2f;
    sets[2].seed = 0, sets[2].top_k = 0, sets[2].top_p = 0.9f, sets[2].min_p = 0.0f, sets[2].temp = 1.0f;
    sets[3].seed = 123456789, sets[3].temp = 0.0f;                     /* greedy through dist */
    sets[4].seed = 99, sets[4].top_k = 0, sets[4].top_p = 1.0f, sets[4].min_p = 0.0f, sets[4].temp = 2.0f;
    sets[5].seed = 2024, sets[5].top_k = 500, sets[5].min_keep = 3, sets[5].min_p = 0.2f,
    sets[5].penalty_repeat = 0.9f;
    const size_t nv[6] = {151936, 1000, 32000, 500, 4096, 151936};
    for (int si = 0; si < 6; si++) {
        const fc_sampler_params *p = &sets[si];
        size_t n = nv[si];
        fc_sampler *s = fc_sampler_new(ctx, p);
        cr_assert(s, "%s", fc_ctx_error(ctx));
        struct llama_sampler *ch = L.chain_init((llama_sampler_chain_params){.no_perf = true});
        L.chain_add(ch, L.penalties((int32_t)n, p->penalty_last_n, p->penalty_repeat,
                                    p->penalty_freq, p->penalty_present));
        L.chain_add(ch, L.top_k(p->top_k));
        L.chain_add(ch, L.top_p(p->top_p, p->min_keep));
        L.chain_add(ch, L.min_p(p->min_p, p->min_keep));
        L.chain_add(ch, L.temp_ext(p->temp, 0.0f, 1.0f));
        L.chain_add(ch, L.dist(p->seed));
        int draws = n > 50000 ? 60 : 200; /* the full vocabulary is slow in llama.cpp's sort */
        if (si == 0) draws = 200;
        int distinct = 0;
        fc_token prev = -1;
        for (int t = 0; t < draws; t++) {
            make_distinct(b.x, n, (int)(fct_next(&r) % 5), &r, scratch);
            /* make repeats likely so the penalties matter */
            if (prev >= 0 && t % 3 == 0) b.x[prev] = b.x[prev] + 5.0f;
            fc_token ours = fc_sampler_sample(s, b.x, (int32_t)n);
            cr_assert_neq(ours, FC_TOKEN_NONE, "%s", fc_ctx_error(ctx));
            llama_token_data_array l = {.data = b.l, .size = n, .selected = -1, .sorted = false};
            for (size_t i = 0; i < n; i++) b.l[i] = (llama_token_data){(llama_token)i, b.x[i], 0.0f};
            L.apply(ch, &l);
            cr_assert(l.selected >= 0 && (size_t)l.selected < l.size);
            llama_token theirs = l.data[l.selected].id;
            cr_assert_eq(ours, theirs, "params set %d, draw %d: ours %d, llama.cpp %d", si, t,
                         ours, theirs);
            fc_sampler_accept(s, ours);
            L.accept(ch, theirs);
            distinct += ours != prev;
            prev = ours;
        }
        /* a sanity check that the draws are not trivially constant */
        if (p->temp > 0.0f) cr_assert_gt(distinct, 1, "params set %d: all draws equal", si);
        L.free(ch);
        fc_sampler_free(s);
    }
    free(scratch);
    bufs_free(&b);
}

Test(sampler, dist_stage_matches_llama) {
    need_llama();
    bufs b = bufs_new();
    fct_rng r = {fct_seed_of("dist")};
    char what[128];
    for (int si = 0; si < NSIZES; si++) {
        size_t n = SIZES[si];
        uint32_t seed = (uint32_t)fct_next(&r);
        struct llama_sampler *ls = L.dist(seed);
        fc_mt19937 m;
        fc_mt19937_seed(&m, seed);
        for (int t = 0; t < 20; t++) {
            int kind = (int)(fct_next(&r) % 5);
            make_logits(b.x, n, kind, &r);
            fc_candidates c = {.data = b.c};
            llama_token_data_array l = {.data = b.l};
            fill(&c, &l, b.x, n, t & 1);
            fc_sample_dist(&c, fc_mt19937_uniform01(&m));
            L.apply(ls, &l);
            snprintf(what, sizeof what, "dist n %zu kind %d draw %d", n, kind, t);
            cr_assert_eq(c.selected, l.selected, "%s: selected %lld, llama.cpp %lld", what,
                         (long long)c.selected, (long long)l.selected);
            compare(what, &c, &l, b.x, n);
        }
        L.free(ls);
    }
    bufs_free(&b);
}

/* ---- without the oracle --------------------------------------------------- */

Test(sampler, bad_params_are_clear_errors) {
    fc_sampler_params p;
#define EXPECT_BAD(field, value)                                                                   \
    do {                                                                                           \
        p = fc_sampler_default_params();                                                           \
        p.field = value;                                                                           \
        fc_ctx_clear_error(ctx);                                                                   \
        fc_sampler *s = fc_sampler_new(ctx, &p);                                                   \
        cr_assert_null(s, #field " = " #value " was accepted");                                    \
        cr_assert_eq(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);                                      \
        cr_assert(strstr(fc_ctx_error(ctx), #field), "error does not name " #field ": %s",        \
                  fc_ctx_error(ctx));                                                              \
    } while (0)
    EXPECT_BAD(top_p, 0.0f);
    EXPECT_BAD(top_p, 1.5f);
    EXPECT_BAD(top_p, -0.1f);
    EXPECT_BAD(top_p, NAN);
    EXPECT_BAD(top_k, -1);
    EXPECT_BAD(temp, NAN);
    EXPECT_BAD(temp, INFINITY);
    EXPECT_BAD(min_p, -0.5f);
    EXPECT_BAD(min_p, 2.0f);
    EXPECT_BAD(penalty_last_n, -1);
    EXPECT_BAD(penalty_repeat, 0.0f);
    EXPECT_BAD(penalty_repeat, NAN);
    EXPECT_BAD(penalty_freq, INFINITY);
    EXPECT_BAD(penalty_present, NAN);
#undef EXPECT_BAD
    fc_ctx_clear_error(ctx);
    cr_assert_null(fc_sampler_new(ctx, NULL));
    cr_assert_eq(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
}

Test(sampler, nan_logit_and_bad_sizes_are_errors) {
    fc_sampler_params p = fc_sampler_default_params();
    p.seed = 1;
    fc_sampler *s = fc_sampler_new(ctx, &p);
    cr_assert(s);
    float x[5] = {0.5f, 1.0f, NAN, -2.0f, 3.0f};
    cr_assert_eq(fc_sampler_sample(s, x, 5), FC_TOKEN_NONE);
    cr_assert(strstr(fc_ctx_error(ctx), "logit 2 is NaN"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_sampler_sample(s, x, 0), FC_TOKEN_NONE);
    cr_assert(strstr(fc_ctx_error(ctx), "n_vocab"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_sampler_sample(s, NULL, 5), FC_TOKEN_NONE);
    fc_ctx_clear_error(ctx);
    x[2] = 0.0f;
    fc_token t = fc_sampler_sample(s, x, 5);
    cr_assert(t >= 0 && t < 5);
    fc_sampler_free(s);
}

Test(sampler, greedy_and_top_k_by_plain_computation) {
    fct_rng r = {fct_seed_of("plain")};
    enum { N = 3000 };
    static float x[N];
    static fc_token_data d[N];
    fc_sampler_params p = fc_sampler_default_params();
    p.seed = 5, p.temp = 0.0f, p.penalty_last_n = 0;
    fc_sampler *s = fc_sampler_new(ctx, &p);
    cr_assert(s);
    for (int rep = 0; rep < 50; rep++) {
        make_logits(x, N, rep, &r);
        size_t best = 0; /* the first maximum */
        for (size_t i = 1; i < N; i++)
            if (x[i] > x[best]) best = i;
        cr_assert_eq(fc_sampler_sample(s, x, N), (fc_token)best);
        /* top-k: the k kept are exactly those with logit >= the k-th largest */
        int32_t k = 1 + (int32_t)(fct_next(&r) % 200);
        for (size_t i = 0; i < N; i++) d[i] = (fc_token_data){(fc_token)i, x[i], 0};
        fc_candidates c = {.data = d, .size = N, .selected = -1, .sorted = false};
        fc_sample_top_k(&c, k);
        cr_assert_eq(c.size, (size_t)k);
        cr_assert(c.sorted);
        float kth = c.data[k - 1].logit;
        size_t above = 0;
        for (size_t i = 0; i < N; i++) above += x[i] > kth;
        cr_assert_lt(above, (size_t)k);
        for (int32_t i = 0; i < k; i++) {
            cr_assert_eq(c.data[i].logit, x[c.data[i].id]);
            if (i) cr_assert(c.data[i].logit <= c.data[i - 1].logit);
        }
    }
    fc_sampler_free(s);
}

/* The penalties without the oracle: llama.cpp's formula written out plainly
 * (logit /= repeat if > 0 else *= repeat, then -= count*freq + (count>0)*present,
 * count over the history), bit for bit; and through the sampler, the window:
 * only the last penalty_last_n accepted tokens count (greedy picks the
 * argmax of the logits so penalized). */
Test(sampler, penalties_by_plain_computation) {
    fct_rng r = {fct_seed_of("penalties")};
    enum { N = 400, H = 90 };
    static float x[N], want[N];
    static fc_token_data d[N];
    fc_token hist[H];
    const float rep[] = {1.0f, 1.3f, 0.7f, 1.0f}, frq[] = {0.0f, 0.5f, -0.25f, 2.0f}, prs[] = {0.0f, 0.0f, 1.5f, -1.0f};
    for (int it = 0; it < 40; it++) {
        make_logits(x, N, it, &r);
        for (int i = 0; i < H; i++) hist[i] = (fc_token)(fct_next(&r) % 60); /* ids 0..59: many repeats */
        const int pi = it % 4;
        const size_t nh = (size_t)(fct_next(&r) % (H + 1));
        for (int i = 0; i < N; i++) {
            int count = 0;
            for (size_t j = 0; j < nh; j++) count += hist[j] == i;
            float l = x[i];
            if (count) {
                l = l <= 0.0f ? l * rep[pi] : l / rep[pi];
                l -= (float)count * frq[pi] + (float)(count > 0) * prs[pi];
            }
            want[i] = l;
        }
        for (int i = 0; i < N; i++) d[i] = (fc_token_data){(fc_token)i, x[i], 0};
        fc_candidates c = {.data = d, .size = N, .selected = -1, .sorted = false};
        fc_sample_penalties(&c, hist, nh, rep[pi], frq[pi], prs[pi]);
        cr_assert_eq(c.size, (size_t)N);
        for (int i = 0; i < N; i++) {
            cr_assert_eq(c.data[i].id, (fc_token)i);
            cr_assert(c.data[i].logit == want[i], "iter %d id %d: %g, expected %g", it, i, (double)c.data[i].logit,
                      (double)want[i]);
        }
        /* the sampler's window: the last W accepted tokens of the history */
        const int32_t W = (int32_t)(fct_next(&r) % 40);
        fc_sampler_params p = fc_sampler_default_params();
        p.seed = 1, p.temp = 0.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.penalty_last_n = W;
        p.penalty_repeat = rep[pi], p.penalty_freq = frq[pi], p.penalty_present = prs[pi];
        fc_sampler *s = fc_sampler_new(ctx, &p);
        cr_assert(s, "%s", fc_ctx_error(ctx));
        for (int j = 0; j < H; j++) fc_sampler_accept(s, hist[j]);
        size_t best = 0;
        for (int i = 0; i < N; i++) {
            int count = 0;
            for (int j = H - W; j < H; j++) count += j >= 0 && hist[j] == i;
            float l = x[i];
            if (count && !(rep[pi] == 1.0f && frq[pi] == 0.0f && prs[pi] == 0.0f)) {
                l = l <= 0.0f ? l * rep[pi] : l / rep[pi];
                l -= (float)count * frq[pi] + (float)(count > 0) * prs[pi];
            }
            want[i] = l;
            if (want[i] > want[best]) best = (size_t)i;
        }
        cr_assert_eq(fc_sampler_sample(s, x, N), (fc_token)best, "iter %d window %d", it, (int)W);
        fc_sampler_free(s);
    }
}

/* llama.cpp's bucket sort drops logits above ~3.3e8 and +inf from a top-k of
 * more than 128 (checked once against libllama 0.5.0: top_k(200) over 1000
 * logits loses a 4e8, 1e9 or +inf); we deliberately rank them first. */
Test(sampler, top_k_keeps_huge_logits) {
    enum { N = 1000 };
    static fc_token_data d[N];
    const float huge[] = {4e8f, 1e9f, FLT_MAX, INFINITY};
    for (int v = 0; v < 4; v++) {
        for (int i = 0; i < N; i++) d[i] = (fc_token_data){i, (float)(i % 97) * 0.1f, 0};
        d[500].logit = huge[v];
        fc_candidates c = {.data = d, .size = N, .selected = -1, .sorted = false};
        fc_sample_top_k(&c, 200);
        cr_assert_eq(c.size, 200u);
        cr_assert_eq(c.data[0].id, 500, "logit %g not ranked first", (double)huge[v]);
    }
}
