#!/usr/bin/python3
"""The PyTorch side of `fucina-bench train`: the same training workloads as
bench/train.c, timed the same way (median of per-step wall times after a
warm-up), printed as one line per case:

    <case> <median_ms> <steps>

Run by fucina-bench (alternating with Fucina's own rounds); usable alone:
    /usr/bin/python3 bench/peers/torch_train.py --threads 2 --rounds 30 mlp_b64 block
Cases: mlp_b64, mlp_b256 (784-256-256-10 MLP, ReLU, cross-entropy, one AdamW
step per round), block (a pre-norm transformer block, d 256, 4 heads, seq 128,
causal attention, GELU MLP 1024: forward + backward of sum(out * w)).
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def mlp_case(batch, rounds):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(batch, 784)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
    return step


class Block(torch.nn.Module):
    def __init__(self, d=256, heads=4, ff=1024):
        super().__init__()
        self.h = heads
        self.n1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.n2 = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, ff)
        self.down = torch.nn.Linear(ff, d)

    def forward(self, x):
        s, d = x.shape
        hd = d // self.h
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(s, self.h, hd).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        a = (att @ v).transpose(0, 1).reshape(s, d)
        x = x + self.o(a)
        return x + self.down(F.gelu(self.up(self.n2(x)), approximate="tanh"))


def block_case(rounds):
    torch.manual_seed(0)
    b = Block()
    x = torch.randn(128, 256, requires_grad=True)
    w = torch.randn(128, 256)

    def step():
        for p in b.parameters():
            p.grad = None
        x.grad = None
        (b(x) * w).sum().backward()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("cases", nargs="*", default=["mlp_b64", "mlp_b256", "block"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.cases:
        if name == "mlp_b64":
            step = mlp_case(64, a.rounds)
        elif name == "mlp_b256":
            step = mlp_case(256, a.rounds)
        elif name == "block":
            step = block_case(a.rounds)
        else:
            sys.exit(f"torch_train.py: unknown case {name}")
        for _ in range(a.warmup):
            step()
        times = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        print(f"{name} {statistics.median(times) * 1e3:.6f} {a.rounds}", flush=True)


if __name__ == "__main__":
    main()
