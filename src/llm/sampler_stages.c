/* SPDX-License-Identifier: MIT */
/* The sampler's stages on a candidates array, each one llama.cpp's
 * (src/llama-sampler.cpp) in arithmetic and in how it treats `sorted`.
 *
 * Why the order of elements matters: softmax sums p in array order in
 * float, top-p accumulates in sorted order, dist sums in double in array
 * order. To give the same floats as llama.cpp, every stage leaves the array
 * in the order llama.cpp's leaves it (sorted, or the input order filtered).
 *
 * Sorting: llama.cpp uses std::partial_sort (<= 128 wanted) or a 128-bucket
 * histogram over [-10, 10] followed by std::sort. Both yield the npartial
 * largest logits in descending order; they differ from ours only in the
 * order among equal logits (we break ties by ascending id). One llama.cpp
 * quirk we do NOT copy: its bucket index int(6.4 * logit + 64) overflows for
 * logits above ~3.3e8 (and +inf), which x86 turns into bucket 0, the lowest,
 * so on that path (more than 128 wanted) such logits can be dropped from a
 * top-k; we rank them correctly. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/sampler.h"

/* a ranks before b: larger logit, then smaller id. */
static int better(const fc_token_data *a, const fc_token_data *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_desc(const void *pa, const void *pb) {
    const fc_token_data *a = pa, *b = pb;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap_td(fc_token_data *a, fc_token_data *b) {
    fc_token_data t = *a;
    *a = *b;
    *b = t;
}

/* Sift down in a heap whose root is the WORST of the kept elements. */
static void sift_down(fc_token_data *h, size_t n, size_t i) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && better(&h[w], &h[l])) w = l;
        if (r < n && better(&h[w], &h[r])) w = r;
        if (w == i) return;
        swap_td(&h[i], &h[w]);
        i = w;
    }
}

/* Sorting many (top-p over a flat distribution sorts the whole vocabulary):
 * an LSD radix sort on a 64-bit rank key (logit, then id), 5x faster than
 * qsort's comparator calls at 151936 candidates. Same order as cmp_desc.
 * Returns 0 when scratch memory is unavailable (the caller uses qsort). */
typedef struct rkey {
    uint64_t key;
    uint32_t idx, pad;
} rkey;

static uint64_t rank_key(const fc_token_data *t) {
    uint32_t u;
    memcpy(&u, &t->logit, sizeof u);
    if (u == 0x80000000u) u = 0; /* -0 == +0: a tie, broken by id like cmp_desc */
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* unsigned order = float order */
    uint32_t lo = (uint32_t)t->id ^ 0x80000000u;    /* unsigned order = signed id order */
    return ((uint64_t)~u << 32) | lo;               /* ascending key: larger logit first */
}

static int radix_sort_desc(fc_token_data *d, size_t n) {
    rkey *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    fc_token_data *tmp = malloc(n * sizeof *tmp);
    if (!a || !b || !tmp) {
        free(a), free(b), free(tmp);
        return 0;
    }
    for (size_t i = 0; i < n; i++) a[i] = (rkey){rank_key(&d[i]), (uint32_t)i, 0};
    for (int shift = 0; shift < 64; shift += 8) {
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++) cnt[(a[i].key >> shift) & 255u]++;
        if (cnt[(a[0].key >> shift) & 255u] == n) continue; /* one digit value: no-op pass */
        size_t pos = 0;
        for (int v = 0; v < 256; v++) {
            size_t c = cnt[v];
            cnt[v] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++) b[cnt[(a[i].key >> shift) & 255u]++] = a[i];
        rkey *t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < n; i++) tmp[i] = d[a[i].idx];
    memcpy(d, tmp, n * sizeof *d);
    free(a), free(b), free(tmp);
    return 1;
}

static void sort_desc(fc_token_data *d, size_t n) {
    if (n < 4096 || n > UINT32_MAX || !radix_sort_desc(d, n)) qsort(d, n, sizeof *d, cmp_desc);
}

/* Put the npartial best of d[0..n) first, in descending order; the rest
 * stay behind them in some order (a permutation: nothing is lost). A heap
 * selection when few are wanted out of many (top-k 40 of 151936 must not
 * sort them all). */
static void select_sorted(fc_token_data *d, size_t n, size_t npartial) {
    if (npartial > n) npartial = n;
    if (npartial > 0 && npartial * 8 < n) {
        for (size_t i = npartial / 2; i-- > 0;) sift_down(d, npartial, i);
        for (size_t i = npartial; i < n; i++)
            if (better(&d[i], &d[0])) {
                swap_td(&d[0], &d[i]);
                sift_down(d, npartial, 0);
            }
        sort_desc(d, npartial);
    } else {
        sort_desc(d, n);
    }
}

/* llama_token_data_array_partial_sort_inplace: the npartial best first, in
 * descending order; size = npartial, sorted = true. */
static void partial_sort_inplace(fc_candidates *c, size_t npartial) {
    if (npartial > c->size) npartial = c->size;
    select_sorted(c->data, c->size, npartial);
    c->size = npartial;
    c->sorted = true;
}

/* llama_sampler_softmax_impl(cur_p, do_sort = false): p in array order, the
 * normalizer summed in float in array order. */
static void softmax_nosort(fc_candidates *c) {
    float max_l = c->data[0].logit;
    if (!c->sorted)
        for (size_t i = 1; i < c->size; i++)
            if (max_l < c->data[i].logit) max_l = c->data[i].logit;
    float sum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p /= sum;
}

static int cmp_token(const void *pa, const void *pb) {
    fc_token a = *(const fc_token *)pa, b = *(const fc_token *)pb;
    return (a > b) - (a < b);
}

void fc_sample_penalties(fc_candidates *c, const fc_token *hist, size_t n_hist, float repeat,
                         float freq, float present) {
    /* llama.cpp's is_disabled(): then even `sorted` is left alone. */
    if (repeat == 1.0f && freq == 0.0f && present == 0.0f) return;
    /* Count each candidate's occurrences in the history: binary search in a
     * sorted copy (linear scan if the copy cannot be allocated). */
    fc_token *h = n_hist ? malloc(n_hist * sizeof *h) : NULL;
    if (h) {
        memcpy(h, hist, n_hist * sizeof *h);
        qsort(h, n_hist, sizeof *h, cmp_token);
    }
    for (size_t i = 0; i < c->size; i++) {
        fc_token id = c->data[i].id;
        int count = 0;
        if (h) {
            size_t lo = 0, hi = n_hist; /* first index with h >= id */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (h[mid] < id) lo = mid + 1;
                else hi = mid;
            }
            while (lo < n_hist && h[lo] == id) count++, lo++;
        } else {
            for (size_t j = 0; j < n_hist; j++) count += hist[j] == id;
        }
        if (count == 0) continue;
        /* Dividing a negative logit would make the token MORE likely, hence
         * multiply those (llama.cpp: logit <= 0 multiplies). */
        if (c->data[i].logit <= 0.0f) c->data[i].logit *= repeat;
        else c->data[i].logit /= repeat;
        /* float(count) * freq + float(count > 0) * present, two roundings
         * then the add (no FMA: -ffp-contract=off, and llama.cpp's generic
         * x86-64 build has none either). */
        float fterm = (float)count * freq;
        float pterm = 1.0f * present;
        c->data[i].logit -= fterm + pterm;
    }
    free(h);
    c->sorted = false;
}

void fc_sample_top_k(fc_candidates *c, int32_t k) {
    if (k <= 0) return;
    size_t kk = (size_t)k < c->size ? (size_t)k : c->size;
    if (!c->sorted) partial_sort_inplace(c, kk);
    c->size = kk;
}

void fc_sample_top_p(fc_candidates *c, float p, size_t min_keep) {
    if (p >= 1.0f || c->size == 0) return; /* llama.cpp asserts on size 0 */
    /* p from the array as it is (its float sum order), THEN sort: llama.cpp
     * sorts after the softmax (partially, widening to a full sort when the
     * first 256 do not reach p: the same prefix as a full sort). */
    softmax_nosort(c);
    /* Like llama.cpp, sort only the best 256 first and everything only if
     * their p do not reach the target: the prefix is the same either way. */
    size_t k = c->size;
    if (!c->sorted) {
        k = c->size > 1024 ? 256 : c->size;
        select_sorted(c->data, c->size, k);
    }
    float cum = 0.0f;
    size_t last = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[i].p;
        if (cum >= p && i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
        if (i + 1 == k && k < c->size) { /* widen: sort the rest too */
            select_sorted(c->data + k, c->size - k, c->size - k);
            k = c->size;
        }
    }
    c->size = last;
    c->sorted = true;
}

void fc_sample_min_p(fc_candidates *c, float p, size_t min_keep) {
    if (p <= 0.0f || c->size == 0) return;
    if (!c->sorted) {
        /* Unsorted: filter in place, keeping the order, when enough pass. */
        float max_l = -FLT_MAX;
        for (size_t i = 0; i < c->size; i++)
            if (max_l < c->data[i].logit) max_l = c->data[i].logit;
        const float min_l = max_l + logf(p); /* p_i >= p * p_max */
        size_t n = 0;
        for (size_t i = 0; i < c->size; i++) n += c->data[i].logit >= min_l;
        if (n > 0 && n >= min_keep) {
            size_t j = 0;
            for (size_t i = 0; i < c->size; i++)
                if (c->data[i].logit >= min_l) c->data[j++] = c->data[i];
            c->size = n;
            return;
        }
        /* Too few (or none: all -inf): sort and cut, as llama.cpp falls back. */
        partial_sort_inplace(c, c->size);
    }
    const float min_l = c->data[0].logit + logf(p);
    size_t i = 1; /* the first always stays */
    for (; i < c->size; i++)
        if (c->data[i].logit < min_l && i >= min_keep) break;
    c->size = i;
}

void fc_sample_temp(fc_candidates *c, float temp) {
    if (c->size == 0) return;
    if (temp <= 0.0f) {
        /* Greedy as a distribution: keep the FIRST maximum, -inf elsewhere. */
        size_t max_i = 0;
        float max_l = c->data[0].logit;
        for (size_t i = 1; i < c->size; i++) {
            if (c->data[i].logit > max_l) {
                c->data[max_i].logit = -INFINITY;
                max_i = i;
                max_l = c->data[i].logit;
            } else {
                c->data[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].logit /= temp;
}

void fc_sample_greedy(fc_candidates *c) {
    c->selected = 0;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > c->data[c->selected].logit) c->selected = (int64_t)i;
}

void fc_sample_dist(fc_candidates *c, double u) {
    if (c->size == 0) {
        c->selected = -1;
        return;
    }
    c->selected = 0;
    if (c->size == 1) {
        c->data[0].p = 1.0f;
        return;
    }
    float max_l = c->data[0].logit;
    if (!c->sorted)
        for (size_t i = 1; i < c->size; i++)
            if (max_l < c->data[i].logit) max_l = c->data[i].logit;
    /* p in float, the normalizer in double (llama.cpp's sum_cum). */
    double sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    /* One pass: the first index whose running sum reaches sum * u. */
    const double target = sum * u;
    double run = 0.0;
    int found = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (!found) {
            run += c->data[i].p;
            if (run >= target) {
                c->selected = (int64_t)i;
                found = 1;
            }
        }
        c->data[i].p = (float)((double)c->data[i].p / sum);
    }
    if (!found) c->selected = (int64_t)c->size - 1; /* only with NaN sums */
}
