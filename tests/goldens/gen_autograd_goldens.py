#!/usr/bin/python3
"""Goldens for the autograd core (tests/runtime/test_autograd.c): gradients of
a two-layer network whose loss uses every elementwise, reduction, view and
contraction op of the core, computed by PyTorch 1.13 autograd in float64
from float32 inputs.

Run:  /usr/bin/python3 tests/goldens/gen_autograd_goldens.py
Output: autograd_core.txt next to this script (format: see
gen_structure_goldens.py; the gradients are rounded to f32 for storage, the
test compares with a relative tolerance).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_writer import Writer


def inputs():
    rng = np.random.default_rng(20261129)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * np.float32(0.7)
    return {"x": f(4, 5), "w1": f(6, 5), "b1": f(6), "w2": f(3, 6), "t": f(4, 3)}


def loss_fn(x, w1, b1, w2, t):
    a = x @ w1.T + b1                                     # fc_linear
    h = F.gelu(a, approximate="tanh") * torch.sigmoid(a) + F.silu(a) - 0.1 * F.softplus(a)
    h = h + torch.tanh(a) * torch.cos(a) - 0.2 * torch.sin(a)
    z = h @ w2.T                                          # fc_linear, no bias
    parts = [
        (torch.tanh(z) * t).sum(),
        torch.exp(-z * z).mean(),
        z.var(dim=0, unbiased=True).sum(),
        torch.logsumexp(z, dim=1).sum(),
        z.max(dim=1).values.sum(),
        torch.linalg.vector_norm(h),
        (z / (1 + z * z)).sum(),
        torch.clamp(z, -0.5, 0.5).sum(),
        torch.cumsum(z, dim=1).sum() * 0.1,
        torch.sqrt(1 + z * z).sum(),
        torch.log(1 + z * z).mean(),
        torch.abs(z).sum() * 0.05,
        torch.relu(z).sum() * 0.3,
        torch.maximum(z, t).sum() - torch.minimum(z, 0.5 * t).sum(),
        torch.where(z > 0, z, 0.5 * z).sum(),
        (torch.rsqrt(2 + z * z) + 1 / (3 + z)).sum(),
        (z.T.reshape(2, 6)[:, 1:4] ** 2).sum(),            # permute, reshape, narrow
    ]
    return sum(parts)


def main():
    w = Writer("autograd_core.txt", "gen_autograd_goldens.py")
    inp = inputs()
    for k, v in inp.items():
        w.put(k, v)
    ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=(k != "t")) for k, v in inp.items()}
    loss = loss_fn(**ts)
    loss.backward()
    w.put("loss", np.array([loss.item()]))
    for k in ("x", "w1", "b1", "w2"):
        w.put("grad_" + k, ts[k].grad.numpy())
    w.close()


if __name__ == "__main__":
    main()
