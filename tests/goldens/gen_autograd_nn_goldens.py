#!/usr/bin/python3
"""Goldens for the gradients of the nn ops (tests/runtime/test_autograd_nn.c):
softmax (scale, mask, causal, sinks), log_softmax, rmsnorm, the fused
residual rmsnorm (both outputs), layernorm, rope (interleaved, NeoX,
partial, linear scaling) and attention (GQA with scale, softcap, causal,
window, mask and sinks; batched with k/v broadcast over the batch),
computed by PyTorch 1.13 autograd in float64.

Run:  /usr/bin/python3 tests/goldens/gen_autograd_nn_goldens.py
Output: autograd_nn.txt next to this script, in the format of
gen_structure_goldens.py (the loader reads every non-i64 array as double).

Each case <op> stores its inputs (<op>.<name>, multiples of 1/32 in
[-2, 2], exact in f32 and short in text), a weight <op>.wt of the output's
shape, and the gradients <op>.g_<name> of sum(out * wt) with respect to
every float input, rounded to f32 (far below the tests' tolerance) to keep
the file small. Axis names and options are fixed in the test, next to the
case name.
"""
import math
import os

import numpy as np
import torch

from golden_writer import Writer





G = torch.Generator().manual_seed(20261201)


def grid(*shape, lo=-64, hi=64):
    """Multiples of 1/32 in [lo/32, hi/32] as float64."""
    return torch.randint(lo, hi + 1, shape, generator=G).to(torch.float64) / 32.0


def case(w, name, fn, floats, ints=None):
    """Store the inputs, a weight of the output's shape (several outputs:
    wt0, wt1, ...) and the gradients of sum(out * wt)."""
    ints = ints or {}
    for k, v in ints.items():
        w.put(f"{name}.{k}", v)
    leaves = {}
    for k, v in floats.items():
        w.put(f"{name}.{k}", v)
        leaves[k] = v.clone().requires_grad_(True)
    outs = fn(**leaves, **ints)
    if not isinstance(outs, tuple):
        outs = (outs,)
    loss = 0
    for i, out in enumerate(outs):
        wt = grid(*out.shape)
        w.put(f"{name}.wt" if len(outs) == 1 else f"{name}.wt{i}", wt)
        loss = loss + (out * wt).sum()
    loss.backward()
    for k, v in leaves.items():
        w.put(f"{name}.g_{k}", v.grad)


# ---- softmax ------------------------------------------------------------------

def softmax_ext(z, sinks):
    """softmax over the last dim with a sink logit per row that joins the
    denominator only (gpt-oss); sinks broadcast to z[..., :1]."""
    if sinks is None:
        return torch.softmax(z, -1)
    s = sinks.expand(z[..., :1].shape)
    return torch.softmax(torch.cat([z, s], -1), -1)[..., :-1]


def causal_bias(n_q, n_k, q_offset):
    """-inf where key k > q + q_offset."""
    qi = torch.arange(n_q)[:, None]
    ki = torch.arange(n_k)[None, :]
    b = torch.zeros(n_q, n_k, dtype=torch.float64)
    b[ki > qi + q_offset] = -math.inf
    return b


def gen_softmax(w):
    # sm: x [r=3, c=5], softmax along c.
    case(w, "sm", lambda x: torch.softmax(x, -1), {"x": grid(3, 5)})
    # smo: x [h=2, q=3, k=4] along k; scale 0.7, mask [q, k] (one -inf),
    # causal (query axis q, q_offset 1), sinks [h].
    mask = grid(3, 4)
    mask[2, 0] = -math.inf

    def smo(x, mask, sinks):
        z = 0.7 * x + mask + causal_bias(3, 4, 1)
        return softmax_ext(z, sinks[:, None, None])
    case(w, "smo", smo, {"x": grid(2, 3, 4), "mask": mask, "sinks": grid(2)})
    # lsm: x [c=5, r=3], log_softmax along c (the first axis).
    case(w, "lsm", lambda x: torch.log_softmax(x, 0), {"x": grid(5, 3)})


# ---- normalization -------------------------------------------------------------

EPS = 1e-5


def rmsnorm(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def gen_norm(w):
    # x [t=3, d=8] along d, weight [d].
    case(w, "rms", rmsnorm, {"x": grid(3, 8), "w": grid(8)})
    # The fused step returns y = rmsnorm(x + r) * w and s = x + r.
    case(w, "rmsr", lambda x, r, w: (rmsnorm(x + r, w), x + r), {"x": grid(3, 8), "r": grid(3, 8), "w": grid(8)})
    case(w, "ln", lambda x, w, b: torch.nn.functional.layer_norm(x, (8,), w, b, EPS),
         {"x": grid(3, 8), "w": grid(8), "b": grid(8)})


# ---- rope ------------------------------------------------------------------------

def rope(x, pos, n_rot, neox, freq_scale, theta=10000.0):
    """x [seq, head, d]; angles p * freq_scale * theta^(-2i/n_rot) in float64
    (Fucina's f64_angles = 1)."""
    half = n_rot // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / n_rot)
    ang = pos.to(torch.float64)[:, None] * freq_scale * inv[None, :]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    if neox:
        x0, x1 = x[..., :half], x[..., half:n_rot]
        rot = torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1)
    else:
        x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        rot = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(*x.shape[:-1], n_rot)
    return torch.cat([rot, x[..., n_rot:]], -1)


def gen_rope(w):
    pos = torch.tensor([0, 3, 7, 11])
    # x [seq=4, head=2, d=6]
    case(w, "rope_n", lambda x, pos: rope(x, pos, 6, False, 1.0), {"x": grid(4, 2, 6)}, {"pos": pos})
    case(w, "rope_x", lambda x, pos: rope(x, pos, 6, True, 0.5), {"x": grid(4, 2, 6)}, {"pos": pos})
    case(w, "rope_p", lambda x, pos: rope(x, pos, 4, True, 1.0), {"x": grid(4, 2, 6)}, {"pos": pos})


# ---- attention -------------------------------------------------------------------

def attention(q, k, v, scale, softcap=0.0, causal=False, q_pos0=0, window=0, mask=None, sinks=None):
    """q [..., seq, head, d], k/v [..., kv_seq, kv_head, d] (k/v may lack the
    leading batch dims); head h uses kv head h // (head / kv_head)."""
    n_head, n_kvh = q.shape[-2], k.shape[-2]
    rep = n_head // n_kvh
    kk = k.repeat_interleave(rep, -2)
    vv = v.repeat_interleave(rep, -2)
    x = torch.einsum("...thd,...shd->...hts", q, kk) * scale
    if softcap > 0:
        x = softcap * torch.tanh(x / softcap)
    if mask is not None:
        x = x + mask  # [seq, kv_seq]
    n_q, n_kv = q.shape[-3], k.shape[-3]
    t = torch.arange(n_q)[:, None] + q_pos0
    s = torch.arange(n_kv)[None, :]
    hidden = torch.zeros(n_q, n_kv, dtype=torch.bool)
    if causal:
        hidden |= s > t
    if window > 0:
        hidden |= (t - s) >= window
    x = x.masked_fill(hidden, -math.inf)
    p = softmax_ext(x, None if sinks is None else sinks[:, None, None])
    return torch.einsum("...hts,...shd->...thd", p, vv)


def gen_attention(w):
    # attn: q [seq=3, head=4, d=4], k [kv_seq=5, kv_head=2, d=4],
    # v [kv_seq=5, kv_head=2, d=3]; scale 0.6, softcap 2, causal with
    # q_pos0 2, window 4, mask [seq, kv_seq], sinks [head].
    case(w, "attn",
         lambda q, k, v, mask, sinks: attention(q, k, v, 0.6, 2.0, True, 2, 4, mask, sinks),
         {"q": grid(3, 4, 4), "k": grid(5, 2, 4), "v": grid(5, 2, 3), "mask": grid(3, 5, lo=-32, hi=32),
          "sinks": grid(4)})
    # attnb: q [b=2, seq=3, head=2, d=4]; k, v [kv_seq=4, kv_head=1, d=4]
    # shared by the batch (MQA); default scale 1/sqrt(4), no options.
    case(w, "attnb", lambda q, k, v: attention(q, k, v, 0.5),
         {"q": grid(2, 3, 2, 4), "k": grid(4, 1, 4), "v": grid(4, 1, 4)})


def main():
    w = Writer("autograd_nn.txt", "gen_autograd_nn_goldens.py")
    gen_softmax(w)
    gen_norm(w)
    gen_rope(w)
    gen_attention(w)
    w.close()


if __name__ == "__main__":
    main()
