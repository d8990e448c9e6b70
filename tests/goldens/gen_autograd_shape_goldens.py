#!/usr/bin/python3
"""Goldens for the gradients of the structure, index, loss and conv ops
(tests/runtime/test_autograd_shape.c), computed by PyTorch 1.13 autograd in
float64.

Run:  /usr/bin/python3 tests/goldens/gen_autograd_shape_goldens.py
Output: autograd_shape.txt next to this script. Format as in
gen_structure_goldens.py, except that float arrays are typed f64 and written
as exact C99 hex doubles (the loader reads every non-i64 array as double).

Each case <op> stores its inputs (<op>.<name>, all exactly representable in
f32, so the f32-only losses and convolutions see the same values; the
cross-entropy cases share ce.x and ce.t), a fixed
weight <op>.wt of the output's shape, and the float64 gradients
<op>.g_<name> of sum(out * wt) with respect to each float input.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_writer import Writer





G = torch.Generator().manual_seed(20261130)


def randn(*shape, scale=1.0):
    """f32-representable values, as float64."""
    return (torch.randn(*shape, generator=G) * scale).to(torch.float32).to(torch.float64)


def case(w, name, fn, floats, ints=None, store_inputs=True):
    """Store the inputs (unless the caller stored them once for several
    cases), a weight of the output's shape, and the gradients of
    sum(fn(...) * wt) for every float input."""
    ints = ints or {}
    leaves = {}
    for k, v in ints.items():
        if store_inputs:
            w.put(f"{name}.{k}", v)
    for k, v in floats.items():
        if store_inputs:
            w.put(f"{name}.{k}", v)
        leaves[k] = v.clone().requires_grad_(True)
    out = fn(**leaves, **ints)
    wt = (torch.rand(out.shape, generator=G, dtype=torch.float64) + 0.5).to(torch.float32).to(torch.float64)
    w.put(f"{name}.wt", wt)
    (out * wt).sum().backward()
    for k, v in leaves.items():
        w.put(f"{name}.g_{k}", v.grad)


def main():
    w = Writer("autograd_shape.txt", "gen_autograd_shape_goldens.py", floats="f64")
    # --- structure ops ([i, j] unless said) ---
    case(w, "concat", lambda a, b: torch.cat([a, b], 1), {"a": randn(2, 3), "b": randn(2, 2)})
    case(w, "stack", lambda a, b: torch.stack([a, b], 1), {"a": randn(2, 3), "b": randn(2, 3)})
    case(w, "pad", lambda x: F.pad(x, (1, 2), value=0.5), {"x": randn(3, 4)})
    case(w, "repeat", lambda x: x.repeat(1, 3), {"x": randn(2, 3)})
    case(w, "flip", lambda x: torch.flip(x, [0]), {"x": randn(3, 4)})
    # --- index ops, with repeated indices ---
    case(w, "get_rows", lambda table, ids: F.embedding(ids, table), {"table": randn(5, 3)},
         {"ids": torch.tensor([[4, 0, 4], [1, 4, 0]])})
    case(w, "index_select", lambda x, idx: torch.index_select(x, 1, idx), {"x": randn(3, 5, 2)},
         {"idx": torch.tensor([4, 0, 4, 2, 4, 1])})
    case(w, "gather", lambda x, idx: torch.gather(x, 1, idx), {"x": randn(3, 4)},
         {"idx": torch.randint(0, 4, (3, 5), generator=G)})
    case(w, "scatter_add", lambda t, src, idx: t.scatter_add(1, idx, src), {"t": randn(3, 4), "src": randn(3, 6)},
         {"idx": torch.randint(0, 4, (3, 6), generator=G)})
    case(w, "topk", lambda x: torch.topk(x, 3, dim=1).values, {"x": randn(3, 6)})
    case(w, "topk_min", lambda x: torch.topk(x, 2, dim=0, largest=False).values, {"x": randn(4, 5)})
    # --- losses: logits [n=3, c=4, s=2] (class axis in the middle, torch's
    # [N, C, d1]), ignore index 2, every reduction, label smoothing ---
    logits = randn(3, 4, 2, scale=2.0)
    tg = torch.tensor([[0, 2], [1, 3], [2, 3]])
    w.put("ce.x", logits)
    w.put("ce.t", tg)
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.2):
            fn = lambda x, t, red=red, ls=ls: F.cross_entropy(x, t, ignore_index=2, reduction=red, label_smoothing=ls)
            case(w, f"ce_{red}_{int(ls * 10)}", fn, {"x": logits}, {"t": tg}, store_inputs=False)
    # Class axis last: [n=6, c=4], default ignore index -100.
    case(w, "ce_last", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
         {"x": randn(6, 4)}, {"t": torch.tensor([3, -100, 0, 1, 3, 2])})
    # mse, b [j=4] broadcast against a [i=3, j=4].
    for red in ("mean", "sum", "none"):
        def mse(a, b, red=red):
            sq = (a - b) ** 2
            return sq.mean() if red == "mean" else sq.sum() if red == "sum" else sq
        case(w, f"mse_{red}", mse, {"a": randn(3, 4), "b": randn(4)})
    # --- convolutions ([b, c, t]) ---
    # conv1d: stride 2, padding (1, 2), dilation 2, groups 2, bias.
    case(w, "conv1d",
         lambda x, wt_, b: F.conv1d(F.pad(x, (1, 2)), wt_, b, stride=2, dilation=2, groups=2),
         {"x": randn(2, 4, 9), "wt_": randn(6, 2, 3, scale=0.5), "b": randn(6)})
    # conv1d whose last two inputs feed no window ((L - d(K-1) - 1) mod stride
    # = (14 - 3 - 1) mod 4 = 2).
    case(w, "conv1d_tail", lambda x, wt_: F.conv1d(x, wt_, stride=4),
         {"x": randn(1, 3, 14), "wt_": randn(2, 3, 4, scale=0.5)})
    # conv_transpose1d: stride 2, padding 1, output_padding 1, dilation 2, groups 2, bias.
    case(w, "tconv",
         lambda x, wt_, b: F.conv_transpose1d(x, wt_, b, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
         {"x": randn(2, 4, 5), "wt_": randn(4, 3, 3, scale=0.5), "b": randn(6)})
    # output_padding >= stride (allowed by a larger dilation).
    case(w, "tconv_op",
         lambda x, wt_: F.conv_transpose1d(x, wt_, stride=1, padding=1, output_padding=2, dilation=3),
         {"x": randn(1, 2, 6), "wt_": randn(2, 3, 2, scale=0.5)})
    w.close()


if __name__ == "__main__":
    main()
