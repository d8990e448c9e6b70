#!/usr/bin/env python3
"""Golden values for tests/runtime/test_rope.c (writes rope_goldens.txt).

Two independent computations per configuration:

  cos/sin  ggml's float32 table arithmetic, step by step (ggml-cpu ops.cpp:
           theta_scale = powf(base, -2/n_rot); theta_0 = (float)p; theta_{i+1}
           = theta_i * theta_scale; rope_yarn ramp and mscale in float). Every
           + - * / is a numpy float32 operation (IEEE single rounding); every
           transcendental is the float64 libm value rounded once to float32,
           i.e. a correctly rounded logf/powf/cosf/sinf (glibc's agree except
           in rare near-halfway cases, hence the test's 2-ulp bound).
  yref     the rotation of x computed PyTorch/Hugging Face style in float64:
           inv_freq = 1 / base^(arange(0, n_rot, 2)/n_rot), YaRN as in
           transformers' _compute_yarn_parameters (find_correction_range,
           linear ramp mask, get_mscale), rotate_half for NeoX and interleaved
           pairs for the normal mode; then rounded to float32.

x is a deterministic pseudo-random input (numpy's PCG64 with a fixed seed).
Values are written as C99 hex floats, read back exactly with strtod.

Usage: python3 tests/goldens/gen_rope.py [out_path]
"""
import math
import os
import sys

import numpy as np

F = np.float32

CONFIGS = [
    # name, mode, head_dim, n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast, beta_slow, positions
    ("neox_plain", "neox", 64, 64, 10000.0, 1.0, 0, 0.0, 1.0, 32.0, 1.0, [0, 1, 2, 17, 100, 1023, 4095]),
    ("normal_plain", "normal", 64, 64, 10000.0, 1.0, 0, 0.0, 1.0, 32.0, 1.0, [0, 1, 5, 33, 511, 2047]),
    ("neox_partial", "neox", 80, 32, 10000.0, 1.0, 0, 0.0, 1.0, 32.0, 1.0, [0, 3, 77, 999]),
    ("normal_partial", "normal", 96, 64, 500000.0, 1.0, 0, 0.0, 1.0, 32.0, 1.0, [0, 9, 250, 8191]),
    ("neox_linear", "neox", 128, 128, 10000.0, 0.25, 0, 0.0, 1.0, 32.0, 1.0, [0, 1, 63, 4096, 16383]),
    ("neox_yarn", "neox", 128, 128, 10000.0, 0.25, 4096, 1.0, 1.0, 32.0, 1.0, [0, 1, 100, 4095, 9000, 16383]),
    ("normal_yarn", "normal", 64, 64, 1000000.0, 0.125, 2048, 1.0, 0.9, 32.0, 1.0, [0, 7, 2047, 16000]),
    ("neox_yarn_half", "neox", 64, 48, 10000.0, 0.5, 8192, 0.5, 1.0, 16.0, 2.0, [0, 31, 12345]),
]


def f32(x):
    return F(x)


def cr(fn, x):
    """A correctly rounded float32 transcendental: float64 libm, rounded once."""
    return F(fn(float(x)))


def corr_dim(n_dims, n_ctx_orig, n_rot_turns, base):
    # n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base)), all float
    den = F(n_rot_turns) * F(2.0) * F(math.pi)
    num = F(n_ctx_orig) / den
    return F(n_dims) * cr(math.log, num) / (F(2.0) * cr(math.log, F(base)))


def corr_dims(n_dims, n_ctx_orig, base, beta_fast, beta_slow):
    start = F(math.floor(corr_dim(n_dims, n_ctx_orig, beta_fast, base)))
    end = F(math.ceil(corr_dim(n_dims, n_ctx_orig, beta_slow, base)))
    return max(F(0.0), start), min(F(n_dims - 1), end)


def ggml_tables(n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast, beta_slow, positions):
    half = n_rot // 2
    theta_scale = F(math.pow(float(F(base)), float(F(-2.0) / F(n_rot))))
    low, high = (F(0.0), F(0.0))
    if ext_factor != 0.0:
        low, high = corr_dims(n_rot, n_ctx_orig, base, beta_fast, beta_slow)
    mscale = F(attn_factor)
    if ext_factor != 0.0:
        mscale = mscale * (F(1.0) + F(0.1) * cr(math.log, F(1.0) / F(freq_scale)))
    cos_t = np.zeros((len(positions), half), dtype=F)
    sin_t = np.zeros((len(positions), half), dtype=F)
    for k, p in enumerate(positions):
        theta = F(p)
        for i in range(half):
            extrap = theta
            interp = F(freq_scale) * extrap
            th = interp
            if ext_factor != 0.0:
                d = high - low
                y = (F(i) - low) / (d if d > F(0.001) else F(0.001))
                ramp = F(1.0) - min(F(1.0), max(F(0.0), y))
                mix = ramp * F(ext_factor)
                th = interp * (F(1.0) - mix) + extrap * mix
            cos_t[k, i] = cr(math.cos, th) * mscale
            sin_t[k, i] = cr(math.sin, th) * mscale
            theta = theta * theta_scale
    return cos_t, sin_t


def hf_angles(n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast, beta_slow, positions):
    """float64 angles and magnitude, Hugging Face style."""
    dim = n_rot
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = freq_scale / pos_freqs  # 1 / (factor * pos_freqs)
    mscale = attn_factor
    if ext_factor != 0.0:
        def find_correction_dim(num_rotations):
            return (dim * math.log(n_ctx_orig / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

        low = max(math.floor(find_correction_dim(beta_fast)), 0)
        high = min(math.ceil(find_correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrapolation_factor = (1 - ramp) * ext_factor
        inv_freq = inv_freq_interpolation * (1 - extrapolation_factor) + inv_freq_extrapolation * extrapolation_factor
        mscale = attn_factor * (0.1 * math.log(1.0 / freq_scale) + 1.0)
    else:
        inv_freq = inv_freq_interpolation
    theta = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    return theta, mscale


def hf_rotate(x, theta, mscale, mode, n_rot):
    """x: [n_pos, head_dim] float32; returns float64 rotated copy."""
    y = x.astype(np.float64).copy()
    c = np.cos(theta) * mscale
    s = np.sin(theta) * mscale
    half = n_rot // 2
    if mode == "neox":
        x0 = y[:, :half].copy()
        x1 = y[:, half:n_rot].copy()
        y[:, :half] = x0 * c - x1 * s
        y[:, half:n_rot] = x0 * s + x1 * c
    else:
        x0 = y[:, 0:n_rot:2].copy()
        x1 = y[:, 1:n_rot:2].copy()
        y[:, 0:n_rot:2] = x0 * c - x1 * s
        y[:, 1:n_rot:2] = x0 * s + x1 * c
    return y


def hex1(v):
    """A float's C99 hex form with the mantissa's trailing zeros dropped."""
    h = float(v).hex()
    if "." not in h:
        return h
    mant, exp = h.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return mant + "p" + exp


def hexs(a):
    return " ".join(hex1(v) for v in np.asarray(a, dtype=np.float64).ravel())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "rope_goldens.txt")
    rng = np.random.Generator(np.random.PCG64(20240601))
    lines = ["# generated by tests/goldens/gen_rope.py; do not edit (rerun the script)"]
    for (name, mode, head_dim, n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast, beta_slow,
         positions) in CONFIGS:
        cos_t, sin_t = ggml_tables(n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast,
                                   beta_slow, positions)
        theta, mscale = hf_angles(n_rot, base, freq_scale, n_ctx_orig, ext_factor, attn_factor, beta_fast,
                                  beta_slow, positions)
        x = rng.uniform(-2.0, 2.0, size=(len(positions), head_dim)).astype(F)
        yref = hf_rotate(x, theta, mscale, mode, n_rot).astype(F)
        lines.append(
            f"config {name} mode {mode} head_dim {head_dim} n_rot {n_rot} base {hex1(base)} "
            f"freq_scale {hex1(freq_scale)} n_ctx_orig {n_ctx_orig} ext_factor {hex1(ext_factor)} "
            f"attn_factor {hex1(attn_factor)} beta_fast {hex1(beta_fast)} "
            f"beta_slow {hex1(beta_slow)} n_pos {len(positions)}")
        lines.append("pos " + " ".join(str(p) for p in positions))
        lines.append("cos " + hexs(cos_t))
        lines.append("sin " + hexs(sin_t))
        lines.append("x " + hexs(x))
        lines.append("yref " + hexs(yref))
    lines.append("end")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
