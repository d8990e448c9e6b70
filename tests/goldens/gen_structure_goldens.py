#!/usr/bin/python3
"""Goldens for the structure, loss and conv ops (tests/runtime/test_shape_ops.c,
test_loss.c, test_conv.c), computed with PyTorch 1.13 on CPU.

Run:  /usr/bin/python3 tests/goldens/gen_structure_goldens.py
(Debian: apt-get install python3-torch python3-numpy). The output is
deterministic (fixed seeds), small text files next to this script:

  structure_loss.txt   cross_entropy (ignore_index, label_smoothing, every
                       reduction, class axis first / middle / last), mse
  structure_conv.txt   conv1d and conv_transpose1d (stride, padding,
                       dilation, groups, output_padding, bias)
  structure_index.txt  gather, scatter_add, topk, argsort (ties, NaN)

Format: one array per two lines,
  <name> <f32|i64> <rank> <dim0> ... <dimR-1>
  <values, row-major; floats as C99 hex floats (exact), nan, inf, -inf>
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_writer import Writer





def randn(g, *shape, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).to(torch.float32)


def gen_loss():
    w = Writer("structure_loss.txt", "gen_structure_goldens.py")
    g = torch.Generator().manual_seed(1234)
    red = {"mean": 0, "sum": 1, "none": 2}
    cases = []
    # ce0: [n=6, c=5], class axis last, default ignore -100 (one target ignored).
    x = randn(g, 6, 5, scale=2.0)
    t = torch.tensor([0, 4, -100, 2, 3, 1])
    cases.append(("ce0", x, t, 1, -100))
    # ce1: [b=2, c=4, s=3] (torch's [N, C, d1]), custom ignore index 1.
    x = randn(g, 2, 4, 3, scale=3.0)
    t = torch.tensor([[0, 1, 3], [2, 1, 0]])
    cases.append(("ce1", x, t, 1, 1))
    # ce2: class axis first [c=7, n=4]; torch needs classes at dim 1, so transpose.
    x = randn(g, 7, 4)
    t = torch.tensor([6, 0, 3, 5])
    cases.append(("ce2", x, t, 0, -100))
    for name, x, t, cdim, ign in cases:
        w.put(f"{name}.logits", x)
        w.put(f"{name}.targets", t)
        w.put(f"{name}.meta", torch.tensor([cdim, ign]))
        xt = x.transpose(0, 1) if cdim == 0 else x
        for ls_i, ls in enumerate([0.0, 0.1, 0.35]):
            for rname, r in red.items():
                y = F.cross_entropy(xt, t, ignore_index=ign, label_smoothing=ls, reduction=rname)
                w.put(f"{name}.ls{ls_i}.{rname}", y)
    # Half-precision logits: values rounded to f16 / bf16 first, loss in f32.
    x = randn(g, 5, 9, scale=2.0)
    t = torch.tensor([1, 8, 0, 4, 4])
    for dt, nm in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        xr = x.to(dt).to(torch.float32)
        w.put(f"ce_{nm}.logits", xr)
        w.put(f"ce_{nm}.targets", t)
        w.put(f"ce_{nm}.mean", F.cross_entropy(xr, t, label_smoothing=0.1))
    # mse: a [r=3, c=4], b [c=4] (broadcast), and same-shape.
    a = randn(g, 3, 4)
    b = randn(g, 4)
    c = randn(g, 3, 4)
    w.put("mse.a", a)
    w.put("mse.b", b)
    w.put("mse.c", c)
    for rname in red:
        w.put(f"mse.ab.{rname}", F.mse_loss(a, b.expand(3, 4), reduction=rname))
        w.put(f"mse.ac.{rname}", F.mse_loss(a, c, reduction=rname))
    w.close()


def gen_conv():
    w = Writer("structure_conv.txt", "gen_structure_goldens.py")
    g = torch.Generator().manual_seed(99)
    # (batch, cin, cout, L, K, stride, pad_l, pad_r, dilation, groups, bias)
    conv_cases = [
        (2, 4, 6, 11, 3, 1, 1, 1, 1, 1, True),
        (1, 3, 5, 16, 5, 2, 2, 2, 1, 1, False),
        (2, 4, 6, 13, 3, 1, 2, 2, 2, 2, True),
        (3, 6, 6, 9, 3, 3, 0, 0, 1, 6, True),   # depthwise
        (2, 5, 4, 10, 1, 1, 0, 0, 1, 1, True),  # pointwise (direct GEMM on x)
        (1, 2, 3, 8, 4, 1, 3, 0, 1, 1, True),   # causal: left padding only
        (2, 4, 2, 7, 2, 2, 1, 2, 3, 2, False),  # asymmetric, dilated, grouped
    ]
    for i, (nb, cin, cout, L, K, s, pl, pr, d, grp, has_b) in enumerate(conv_cases):
        x = randn(g, nb, cin, L)
        wt = randn(g, cout, cin // grp, K, scale=0.5)
        b = randn(g, cout) if has_b else None
        y = F.conv1d(F.pad(x, (pl, pr)), wt, b, stride=s, dilation=d, groups=grp)
        nm = f"conv{i}"
        w.put(f"{nm}.params", torch.tensor([s, pl, pr, d, grp, 0, int(has_b)]))
        w.put(f"{nm}.x", x)
        w.put(f"{nm}.w", wt)
        if has_b:
            w.put(f"{nm}.b", b)
        w.put(f"{nm}.y", y)
    # (batch, cin, cout, L, K, stride, pad_l, pad_r, dilation, groups, output_padding, bias)
    tconv_cases = [
        (2, 4, 6, 5, 3, 2, 1, 1, 1, 1, 1, True),
        (1, 3, 2, 7, 4, 1, 0, 0, 1, 1, 0, False),
        (2, 4, 6, 6, 3, 3, 2, 2, 2, 2, 2, True),
        (1, 6, 6, 5, 3, 2, 0, 0, 1, 6, 1, True),  # depthwise
        (2, 2, 3, 6, 3, 2, 1, 3, 2, 1, 1, True),  # asymmetric padding
    ]
    for i, (nb, cin, cout, L, K, s, pl, pr, d, grp, op, has_b) in enumerate(tconv_cases):
        x = randn(g, nb, cin, L)
        wt = randn(g, cin, cout // grp, K, scale=0.5)
        b = randn(g, cout) if has_b else None
        if pl == pr:
            y = F.conv_transpose1d(x, wt, b, stride=s, padding=pl, output_padding=op, groups=grp, dilation=d)
        else:
            full = F.conv_transpose1d(x, wt, b, stride=s, padding=0, output_padding=op, groups=grp, dilation=d)
            y = full[:, :, pl:full.shape[2] - pr]
        nm = f"tconv{i}"
        w.put(f"{nm}.params", torch.tensor([s, pl, pr, d, grp, op, int(has_b)]))
        w.put(f"{nm}.x", x)
        w.put(f"{nm}.w", wt)
        if has_b:
            w.put(f"{nm}.b", b)
        w.put(f"{nm}.y", y)
    w.close()


def gen_index():
    w = Writer("structure_index.txt", "gen_structure_goldens.py")
    g = torch.Generator().manual_seed(7)
    # gather along dim 1 of [a=3, b=5, c=4] with idx [a=2, b=6, c=3].
    t = randn(g, 3, 5, 4)
    idx = torch.randint(0, 5, (2, 6, 3), generator=g)
    w.put("gather.t", t)
    w.put("gather.idx", idx)
    w.put("gather.out", torch.gather(t, 1, idx))
    # scatter_add along dim 0 of [a=4, b=3] with idx/src [a=6, b=3] (repeats).
    t = randn(g, 4, 3)
    idx = torch.randint(0, 4, (6, 3), generator=g)
    src = randn(g, 6, 3)
    w.put("scatter.t", t)
    w.put("scatter.idx", idx)
    w.put("scatter.src", src)
    w.put("scatter.out", t.scatter_add(0, idx, src))
    # scatter_add along dim 1 with idx smaller than src.
    t = randn(g, 3, 5)
    idx = torch.randint(0, 5, (2, 4), generator=g)
    src = randn(g, 3, 6)
    w.put("scatter2.t", t)
    w.put("scatter2.idx", idx)
    w.put("scatter2.src", src)
    w.put("scatter2.out", t.scatter_add(1, idx, src))
    # Sorting along the last axis of [r=4, n=9]: ties, +-0, inf, NaN.
    x = torch.tensor([
        [3.0, 1.0, 3.0, -2.0, 0.0, -0.0, 7.0, 1.0, 3.0],
        [float("nan"), 2.0, float("inf"), -float("inf"), 2.0, float("nan"), 5.0, -1.0, 0.5],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
    ])
    w.put("sort.x", x)
    for desc in (0, 1):
        s = torch.sort(x, dim=1, descending=bool(desc), stable=True)
        w.put(f"sort.argsort{desc}", s.indices)
        w.put(f"sort.sorted{desc}", s.values)
    # topk = the first k of a stable sort (largest: descending, NaN first).
    y = randn(g, 3, 12)
    y[1, 3] = y[1, 7]  # a tie
    w.put("topk.x", y)
    for largest in (0, 1):
        s = torch.sort(y, dim=1, descending=bool(largest), stable=True)
        w.put(f"topk.values{largest}", s.values[:, :5])
        w.put(f"topk.indices{largest}", s.indices[:, :5])
        v, ix = torch.topk(y, 5, dim=1, largest=bool(largest), sorted=True)
        assert torch.equal(v, s.values[:, :5])
    w.close()


if __name__ == "__main__":
    torch.manual_seed(0)
    gen_loss()
    gen_conv()
    gen_index()
