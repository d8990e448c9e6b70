/* SPDX-License-Identifier: MIT */
/* A loss curve as a standalone SVG file: training loss per step as a line,
 * held-out loss as dots, linear axes with round tick values. No fonts or
 * scripts beyond what every browser and image viewer renders. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/svg_plot.h"
#include "exec/ctx.h"
#include "io/atomic_file.h"

#define W 720
#define H 420
#define L 64 /* margins */
#define R 24
#define T 40
#define B 48

/* A "nice" tick step (1, 2 or 5 times a power of ten) for ~n ticks over span. */
static double tick_step(double span, int n)
{
    const double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

typedef struct svg {
    char *p;
    size_t n, cap;
    int oom;
} svg;

static void put(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(svg *s, const char *fmt, ...)
{
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            s->oom = 1;
            return;
        }
        if (s->p && s->n + (size_t)k < s->cap) {
            s->n += (size_t)k;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 8192;
        while (cap < s->n + (size_t)k + 1) cap *= 2;
        char *q = realloc(s->p, cap);
        if (!q) {
            s->oom = 1;
            return;
        }
        s->p = q;
        s->cap = cap;
    }
}

int fc_cli_svg_loss_plot(fc_ctx *ctx, const char *path, const char *title, const double *step, const double *loss,
                         size_t n, const double *val_step, const double *val_loss, size_t n_val)
{
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t k = 0; k < n + n_val; k++) {
        const double x = k < n ? step[k] : val_step[k - n], y = k < n ? loss[k] : val_loss[k - n];
        if (!isfinite(y)) continue;
        x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
    }
    if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    const double ys = tick_step(y1 - y0, 6), xs = tick_step(x1 - x0, 8);
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * (W - L - R))
#define PY(y) (H - B - ((y) - y0) / (y1 - y0) * (H - T - B))
    svg s = {0};
    put(&s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        W, H, W, H);
    put(&s, "<text x=\"%d\" y=\"24\" font-size=\"15\">", L);
    for (const char *c = title; c && *c; c++) /* escape the title */
        put(&s, "%s", *c == '<' ? "&lt;" : *c == '&' ? "&amp;" : *c == '>' ? "&gt;" : (char[2]){*c, 0});
    put(&s, "</text>\n");
    for (double y = y0; y <= y1 + ys / 2; y += ys)
        put(&s, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n", L, W - R, PY(y), PY(y), L - 6, PY(y) + 4, y);
    for (double x = ceil(x0 / xs) * xs; x <= x1 + xs / 2; x += xs)
        put(&s, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", PX(x), H - B + 18, x);
    put(&s, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>"
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, W - R, H - B, H - B, L, L, T,
        H - B);
    put(&s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 10);
    put(&s, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">loss (nats/token)</text>\n",
        (T + H - B) / 2);
    put(&s, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
    for (size_t i = 0; i < n; i++)
        if (isfinite(loss[i])) put(&s, "%.1f,%.1f ", PX(step[i]), PY(loss[i]));
    put(&s, "\"/>\n");
    for (size_t i = 0; i < n_val; i++)
        if (isfinite(val_loss[i]))
            put(&s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#d62728\"/>\n", PX(val_step[i]), PY(val_loss[i]));
    put(&s, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"%d\">train</text>\n", W - R - 150, W - R - 130, T + 4, T + 4, W - R - 124, T + 8);
    if (n_val)
        put(&s, "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"#d62728\"/><text x=\"%d\" y=\"%d\">held out</text>\n",
            W - R - 70, T + 4, W - R - 62, T + 8);
    put(&s, "</svg>\n");
#undef PX
#undef PY
    if (s.oom) {
        free(s.p);
        fc_fail(ctx, FC_ERR_OOM, "fucina: out of memory drawing %s", path);
        return -1;
    }
    fc_atomic_file af;
    const int ok = fc_atomic_open(&af, ctx, "fucina", path) && fc_atomic_write(&af, s.p, s.n) && fc_atomic_commit(&af);
    free(s.p);
    return ok ? 0 : -1;
}
