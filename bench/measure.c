/* SPDX-License-Identifier: MIT */
/* Timing one call: calibrate the batch size, then time repeated batches.
 *
 * The calibration doubles (or scales) the batch until one batch lasts at
 * least half the target; those calls are the warm-up (caches, TLB, page
 * faults of freshly filled buffers, frequency ramp). Then every repeat times
 * a batch sized to last >= min_time_s, and the per-call time of each batch
 * is recorded: median, min and CV are over repeats. When `repeats` batches
 * would take longer than max_time_s, fewer are timed (at least 3). */
#include <math.h>

#include "fcb.h"

static double time_batch(fcb_call_fn fn, void *ctx, size_t iters)
{
    double t0 = fcb_now();
    for (size_t i = 0; i < iters; i++) fn(ctx);
    return fcb_now() - t0;
}

fcb_timing fcb_measure(fcb_call_fn fn, void *ctx, int repeats, double min_time_s, double max_time_s)
{
    fcb_timing r = {0, 0, 0, 1, repeats};
    if (repeats < 1) repeats = r.repeats = 1;
    if (repeats > FCB_MAX_REPEATS) repeats = r.repeats = FCB_MAX_REPEATS;
    size_t iters = 1;
    double t = time_batch(fn, ctx, iters);
    while (t < 0.5 * min_time_s && iters < ((size_t)1 << 40)) {
        double scale = t > 0 ? 0.6 * min_time_s / t : 100.0;
        if (scale < 2) scale = 2;
        if (scale > 100) scale = 100;
        iters = (size_t)ceil((double)iters * scale);
        t = time_batch(fn, ctx, iters);
    }
    if (t < min_time_s && t > 0) {
        iters = (size_t)ceil((double)iters * min_time_s / t);
        t = min_time_s;
    }
    /* Long calls: fewer repeats (not below 3) rather than minutes per arm. */
    if (max_time_s > 0 && repeats > 3 && t * repeats > max_time_s) {
        int fit = (int)(max_time_s / t);
        repeats = r.repeats = fit < 3 ? 3 : fit;
    }
    double per_call[FCB_MAX_REPEATS];
    int first = 0;
    /* One call alone lasts several min_time (out of cache, slow arms): it is
     * a repeat of its own, as warm as the ones that follow will be. */
    if (iters == 1 && t >= 4 * min_time_s && min_time_s > 0) per_call[first++] = t;
    for (int i = first; i < repeats; i++) per_call[i] = time_batch(fn, ctx, iters) / (double)iters;
    r.iters = iters;
    r.median_s = fcb_median(per_call, (size_t)repeats);
    r.min_s = fcb_min(per_call, (size_t)repeats);
    r.cv = fcb_cv(per_call, (size_t)repeats);
    return r;
}
