#!/usr/bin/python3
"""Goldens for the optimizers, gradient clipping and learning-rate schedules
(tests/runtime/test_optim.c), computed with PyTorch 1.13 on CPU.

Run:  /usr/bin/python3 tests/goldens/gen_optim_goldens.py
(Debian: apt-get install python3-torch python3-numpy). The output,
optim_goldens.txt next to this script, is deterministic (fixed seeds) for a
given BLAS kernel set: the committed file was written with OpenBLAS's AVX2
kernels (OPENBLAS_CORETYPE=Haswell reproduces it on a CPU OpenBLAS 0.3.21
does not know, where it would fall back to SSE3 kernels that round
differently).

Two parameters, w [4, 6] and b [6], and a fixed sequence of K = 5 gradients
for each. Every optimizer case starts from init.w / init.b, takes gradient k
at step k and records both parameters after every step:

  <case>.w [K, 4, 6] and <case>.b [K, 6]   (muon_tall.w is [K, 6, 4]: w
                                            transposed, gradients too)

SGD, Adam and AdamW are torch.optim's (foreach=False: the _single_tensor_*
code paths, whose order of operations Fucina follows). Muon is not in
PyTorch 1.13: MuonRef below transcribes the reference algorithm (Keller
Jordan's Muon, Newton-Schulz-5 in f32 instead of bf16) with torch ops, and
its non-2-D parameters go to torch.optim.AdamW.

Clipping: torch.nn.utils.clip_grad_norm_ / clip_grad_value_ on gradient 0.
Schedules: the lr after `step` scheduler steps (torch's last_epoch), from
LambdaLR / LinearLR / CosineAnnealingLR / StepLR / SequentialLR, as f64.

Format (the loader in tests/harness/fct_golden.c): one array per two lines,
  <name> <f32|f64|i64> <rank> <dim0> ... <dimR-1>
  <values, row-major; floats as C99 hex floats (exact)>
"""
import math
import os
import warnings

import numpy as np
import torch

from golden_writer import Writer

K = 5




# ---- Muon, transcribed ------------------------------------------------------------


def newton_schulz5(G, steps):
    """Orthogonalise G (f32) with the quintic Newton-Schulz iteration."""
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.to(torch.float32)
    tall = G.size(-2) > G.size(-1)
    if tall:
        X = X.mT
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A  # (c * A) @ A: * and @ bind alike, left to right
        X = a * X + B @ X
    if tall:
        X = X.mT
    return X


class MuonRef(torch.optim.Optimizer):
    """2-D parameters: momentum (lerp), optional Nesterov, Newton-Schulz-5,
    scale sqrt(max(1, rows/cols)), decoupled weight decay. Others: AdamW."""

    def __init__(self, params, lr, weight_decay, momentum, nesterov, ns_steps, adamw_betas, adamw_eps):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_steps=ns_steps))
        others = [p for g in self.param_groups for p in g["params"] if p.ndim != 2]
        # None when every parameter is 2-D (torch rejects an empty param list).
        self.adamw = torch.optim.AdamW(others, lr=lr, betas=adamw_betas, eps=adamw_eps,
                                       weight_decay=weight_decay, foreach=False) if others else None

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None or p.ndim != 2:
                    continue
                g = p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(g, 1 - group["momentum"])
                update = g.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                update = newton_schulz5(update, group["ns_steps"])
                update *= max(1, p.size(-2) / p.size(-1)) ** 0.5
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update, alpha=-group["lr"])
        if self.adamw is not None:
            self.adamw.step()


# ---- optimizer trajectories ---------------------------------------------------------


def trajectory(w, make_opt, init_w, init_b, grads_w, grads_b):
    pw = init_w.clone().requires_grad_(True)
    pb = init_b.clone().requires_grad_(True)
    opt = make_opt(pw, pb)
    ws, bs = [], []
    for k in range(K):
        pw.grad = grads_w[k].clone()
        pb.grad = grads_b[k].clone()
        opt.step()
        ws.append(pw.detach().clone())
        bs.append(pb.detach().clone())
    return torch.stack(ws), torch.stack(bs)


def gen_optim(w):
    g = torch.Generator().manual_seed(2024)
    init_w = torch.randn(4, 6, generator=g)
    init_b = torch.randn(6, generator=g)
    grads_w = torch.randn(K, 4, 6, generator=g)
    grads_b = torch.randn(K, 6, generator=g) * 0.5
    w.put("init.w", init_w)
    w.put("init.b", init_b)
    w.put("grad.w", grads_w)
    w.put("grad.b", grads_b)

    O = torch.optim
    cases = {
        "sgd": lambda a, b: O.SGD([a, b], lr=0.1, foreach=False),
        "sgd_mom": lambda a, b: O.SGD([a, b], lr=0.1, momentum=0.9, foreach=False),
        "sgd_nesterov": lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.9, nesterov=True, foreach=False),
        "sgd_damp": lambda a, b: O.SGD([a, b], lr=0.1, momentum=0.8, dampening=0.3, foreach=False),
        "sgd_wd": lambda a, b: O.SGD([a, b], lr=0.1, momentum=0.9, weight_decay=0.05, foreach=False),
        "adam": lambda a, b: O.Adam([a, b], lr=1e-2, foreach=False),
        "adam_wd": lambda a, b: O.Adam([a, b], lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                                      foreach=False),
        "adamw": lambda a, b: O.AdamW([a, b], lr=1e-2, weight_decay=0.1, foreach=False),
        # Two groups: w with its own lr and decay, b with lr 5e-3 and no decay.
        "adamw_groups": lambda a, b: O.AdamW([{"params": [a], "lr": 2e-2, "weight_decay": 0.05},
                                              {"params": [b], "lr": 5e-3, "weight_decay": 0.0}],
                                             lr=1e-3, weight_decay=0.01, foreach=False),
        "muon": lambda a, b: MuonRef([a, b], lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True,
                                     ns_steps=5, adamw_betas=(0.9, 0.95), adamw_eps=1e-8),
    }
    for name, make in cases.items():
        tw, tb = trajectory(w, make, init_w, init_b, grads_w, grads_b)
        w.put(f"{name}.w", tw)
        w.put(f"{name}.b", tb)
    # A tall matrix (rows > cols: Newton-Schulz works on the transpose),
    # plain momentum, 3 iterations.
    tall = lambda a, b: MuonRef([a, b], lr=0.05, weight_decay=0.0, momentum=0.9, nesterov=False,
                                ns_steps=3, adamw_betas=(0.9, 0.95), adamw_eps=1e-8)
    tw, tb = trajectory(w, tall, init_w.t().contiguous(), init_b, grads_w.transpose(1, 2).contiguous(), grads_b)
    w.put("muon_tall.w", tw)
    w.put("muon_tall.b", tb)
    return init_w, init_b, grads_w, grads_b


# ---- clipping ------------------------------------------------------------------------


def gen_clip(w, grads_w, grads_b):
    for name, max_norm in [("clip_norm", 1.0), ("clip_norm_big", 100.0)]:
        pw = torch.zeros(4, 6, requires_grad=True)
        pb = torch.zeros(6, requires_grad=True)
        pw.grad = grads_w[0].clone()
        pb.grad = grads_b[0].clone()
        total = torch.nn.utils.clip_grad_norm_([pw, pb], max_norm)
        w.put(f"{name}.total", total)
        w.put(f"{name}.w", pw.grad)
        w.put(f"{name}.b", pb.grad)
    pw = torch.zeros(4, 6, requires_grad=True)
    pb = torch.zeros(6, requires_grad=True)
    pw.grad = grads_w[0].clone()
    pb.grad = grads_b[0].clone()
    torch.nn.utils.clip_grad_value_([pw, pb], 0.5)
    w.put("clip_value.w", pw.grad)
    w.put("clip_value.b", pb.grad)


# ---- schedules -----------------------------------------------------------------------


def lrs(make_sched, base_lr, n):
    """The lr in effect for steps 0..n-1 (after `step` scheduler steps)."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = make_sched(opt)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def close(a, b):
    return all(abs(x - y) <= 1e-12 * max(1.0, abs(y)) for x, y in zip(a, b))


def gen_schedules(w):
    S = torch.optim.lr_scheduler
    n = 16
    # Linear warmup from 0 over 5 steps (LinearLR cannot start at 0: LambdaLR).
    w.put_f64("sched.warmup0", lrs(lambda o: S.LambdaLR(o, lambda s: min(1.0, s / 5)), 0.1, n))
    # Linear warmup from 0.25 of the lr over 5 steps.
    w.put_f64("sched.warmup25", lrs(lambda o: S.LinearLR(o, start_factor=0.25, total_iters=5), 0.1, n))
    # Cosine from 0.1 to 1e-3 over 10 steps; Fucina stays at min_lr after
    # T_max where CosineAnnealingLR would rise again.
    cos = lrs(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=1e-3), 0.1, 11)
    w.put_f64("sched.cosine", cos + [1e-3] * (n - 11))
    # Step decay: x0.5 every 3 steps.
    w.put_f64("sched.step", lrs(lambda o: S.StepLR(o, step_size=3, gamma=0.5), 0.1, n))
    # Warmup (from 0.1 of the lr, 4 steps) then cosine to 2e-3 at step 14.
    seq = lrs(lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=4),
                                            S.CosineAnnealingLR(o, T_max=10, eta_min=2e-3)], milestones=[4]),
              0.1, 15)
    closed = [0.1 * (0.1 + 0.9 * s / 4) if s < 4 else
              2e-3 + (0.1 - 2e-3) * (1 + math.cos(math.pi * (s - 4) / 10)) / 2 for s in range(15)]
    assert close(seq, closed), (seq, closed)
    w.put_f64("sched.warmup_cosine", seq + [2e-3] * (n - 15))
    # Warmup from 0 (LambdaLR with the composed factor).
    def f(s):
        if s < 4:
            return s / 4
        t = min(s - 4, 10)
        return (2e-3 + (0.1 - 2e-3) * (1 + math.cos(math.pi * t / 10)) / 2) / 0.1
    w.put_f64("sched.warmup0_cosine", lrs(lambda o: S.LambdaLR(o, f), 0.1, n))


def main():
    # SequentialLR steps its schedulers with an explicit epoch, which warns.
    warnings.filterwarnings("ignore", category=UserWarning, module="torch.optim.lr_scheduler")
    torch.set_num_threads(1)
    w = Writer("optim_goldens.txt", "gen_optim_goldens.py")
    init_w, init_b, grads_w, grads_b = gen_optim(w)
    gen_clip(w, grads_w, grads_b)
    gen_schedules(w)
    w.close()


if __name__ == "__main__":
    main()
