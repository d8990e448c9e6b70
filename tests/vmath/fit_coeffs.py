#!/usr/bin/env python3
"""Minimax (Remez) fits of the polynomials in templates/_vocab/vmath.h.

Needs only mpmath. Each fit approximates g(t) by sum_k c_k t^k on [a, b],
minimising max |w(t) (g(t) - P(t))|; coefficients are then rounded to f32 one
at a time, re-fitting the rest after each (so the rounding of the early, large
coefficients is absorbed by the later ones). Prints C initialisers.

    python3 tests/vmath/fit_coeffs.py [name ...]
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 60


def f32(x):
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def remez(g, w, a, b, n, fixed=(), grid_n=6000, iters=30):
    """Coefficients c[len(fixed)..n-1] of the weighted minimax polynomial,
    with c[0..len(fixed)-1] = fixed. Returns (coeffs, max weighted error)."""
    a, b = mp.mpf(a), mp.mpf(b)
    nf = len(fixed)
    m = n - nf  # free coefficients
    grid = [a + (b - a) * (1 - mp.cos(mp.pi * i / (grid_n - 1))) / 2 for i in range(grid_n)]
    grid = [t if abs(t) > mp.mpf("1e-30") else mp.mpf("1e-30") for t in grid]
    gv = [g(t) for t in grid]
    wv = [w(t) for t in grid]

    def fixed_part(t):
        return sum(mp.mpf(c) * t ** k for k, c in enumerate(fixed))

    fv = [fixed_part(t) for t in grid]
    # initial reference: Chebyshev extrema
    idx = [int(round((grid_n - 1) * i / (m))) for i in range(m + 1)]
    pts = [grid[i] for i in idx]
    pidx = idx
    best = None
    for _ in range(iters):
        A = mp.matrix(m + 1, m + 1)
        rhs = mp.matrix(m + 1, 1)
        for i, j in enumerate(pidx):
            t = grid[j]
            for k in range(m):
                A[i, k] = t ** (k + nf)
            A[i, m] = (-1) ** i / wv[j]
            rhs[i] = gv[j] - fv[j]
        sol = mp.lu_solve(A, rhs)
        c = [sol[k] for k in range(m)]
        err = []
        for j, t in enumerate(grid):
            p = fv[j] + sum(c[k] * t ** (k + nf) for k in range(m))
            err.append(wv[j] * (gv[j] - p))
        emax = max(abs(e) for e in err)
        if best is None or emax < best[1]:
            best = (c, emax)
        # extrema
        ext = []
        for j in range(grid_n):
            e = err[j]
            left = err[j - 1] if j > 0 else None
            right = err[j + 1] if j + 1 < grid_n else None
            if (left is None or abs(e) >= abs(left)) and (right is None or abs(e) >= abs(right)):
                ext.append(j)
        # merge same-sign runs
        merged = []
        for j in ext:
            if merged and mp.sign(err[j]) == mp.sign(err[merged[-1]]):
                if abs(err[j]) > abs(err[merged[-1]]):
                    merged[-1] = j
            else:
                merged.append(j)
        while len(merged) > m + 1:
            if abs(err[merged[0]]) < abs(err[merged[-1]]):
                merged.pop(0)
            else:
                merged.pop()
        if len(merged) < m + 1:
            break
        if merged == pidx:
            break
        pidx = merged
    return best


def fit_rounded(g, w, a, b, n, lead=()):
    """Round coefficients to f32 greedily, refitting the rest after each."""
    fixed = list(lead)
    c, e = remez(g, w, a, b, n, fixed)
    print("  exact minimax err %.3e" % float(e))
    while len(fixed) < n:
        c, e = remez(g, w, a, b, n, fixed)
        fixed.append(f32(c[0]))
    # final error with all-f32 coefficients
    N = 20000
    emax = 0
    for i in range(N + 1):
        t = mp.mpf(a) + (mp.mpf(b) - a) * i / N
        if abs(t) < mp.mpf("1e-30"):
            t = mp.mpf("1e-30")
        p = sum(mp.mpf(cc) * t ** k for k, cc in enumerate(fixed))
        emax = max(emax, abs(w(t) * (g(t) - p)))
    print("  f32-coefficient err %.3e" % float(emax))
    return fixed


def show(name, cs):
    print("%s:" % name)
    for k, c in enumerate(cs):
        print("   c%d = %.9ef  /* %s */" % (k, c, float(c).hex()))


LN2H = mp.log(2) / 2
FITS = {}


def fit(name):
    def deco(fn):
        FITS[name] = fn
        return fn
    return deco


@fit("exp")
def _exp(deg=5):
    # exp(r) = 1 + r + r^2 * Q(r), |r| <= ln2/2 (+ slack for n off by one)
    a = LN2H * mp.mpf("1.0001")
    g = lambda r: (mp.expm1(r) - r) / r ** 2
    w = lambda r: r ** 2 / mp.exp(r)
    return fit_rounded(g, w, -a, a, deg + 1)


@fit("log")
def _log(deg=8):
    # log1p(f) = f + f^2 * (-0.5 + f * P(f)), f in [sqrt(1/2)-1, sqrt(2)-1]
    lo, hi = mp.sqrt(0.5) - 1, mp.sqrt(2) - 1
    g = lambda f: (mp.log1p(f) - f + f ** 2 / 2) / f ** 3
    w = lambda f: f ** 3 / mp.log1p(f)
    return fit_rounded(g, w, lo, hi, deg + 1)


@fit("sin")
def _sin(deg=3):
    # sin(r) = r + r^3 S(r^2), |r| <= pi/4 (+ slack)
    R = mp.pi / 4 * mp.mpf("1.02")
    g = lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3
    w = lambda z: mp.sqrt(z) ** 3 / mp.sin(mp.sqrt(z))
    return fit_rounded(g, w, 0, R * R, deg + 1)


@fit("cos")
def _cos(deg=3):
    # cos(r) = 1 - z/2 + z^2 C(z), z = r^2
    R = mp.pi / 4 * mp.mpf("1.02")
    g = lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z ** 2
    w = lambda z: z ** 2 / mp.cos(mp.sqrt(z))
    return fit_rounded(g, w, 0, R * R, deg + 1)


TANH_C = mp.mpf("0.625")


@fit("tanh")
def _tanh(deg=6):
    # tanh(x) = x + x^3 T(x^2), 0 <= x <= c
    g = lambda z: (mp.tanh(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3
    w = lambda z: mp.sqrt(z) ** 3 / mp.tanh(mp.sqrt(z))
    return fit_rounded(g, w, 0, TANH_C ** 2, deg + 1)


ERF_C = mp.mpf("0.921875")


@fit("erf_small")
def _erf_small(deg=6):
    # erf(x) = x + x E(x^2), 0 <= x <= c
    g = lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) - 1
    w = lambda z: mp.sqrt(z) / mp.erf(mp.sqrt(z))
    return fit_rounded(g, w, 0, ERF_C ** 2, deg + 1)


@fit("erf_large")
def _erf_large(deg=9):
    # erf(x) = 1 - exp(L(x - c)), c <= x <= 4; weight erfc(x) = absolute erf error
    g = lambda t: mp.log(mp.erfc(t + ERF_C))
    w = lambda t: mp.erfc(t + ERF_C)
    return fit_rounded(g, w, 0, 4 - ERF_C, deg + 1)


if __name__ == "__main__":
    # usage: fit_coeffs.py [name [degree]]; no name: every fit at its default degree
    names = sys.argv[1:2] if len(sys.argv) > 1 else list(FITS)
    for nm in names:
        print(nm)
        cs = FITS[nm](int(sys.argv[2])) if len(sys.argv) > 2 else FITS[nm]()
        show(nm, cs)
