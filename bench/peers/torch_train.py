#!/usr/bin/python3
"""The PyTorch side of `fucina-bench train`: the same training workloads as
bench/train.c, timed the same way (median of per-step wall times after a
warm-up), printed as one line per case:

    <case> <median_ms> <steps>

Run by fucina-bench (alternating with Fucina's own rounds); usable alone:
    /usr/bin/python3 bench/peers/torch_train.py --threads 2 --rounds 30 mlp_b64 block
Cases: mlp_b64, mlp_b256 (784-256-256-10 MLP, ReLU, cross-entropy, one AdamW
step per round), block (a pre-norm transformer block, d 256, 4 heads, seq 128,
causal attention, GELU MLP 1024: forward + backward of sum(out * w)),
gpt_step and gpt_small (one whole training step of the qwen3 language model of
fc_lm_new: forward, mean cross-entropy, backward, Muon + AdamW step; the model,
its sizes and hyper-parameters as in bench/train.c). The gpt cases print two
more fields, the mean loss (nats per target) of the first and of the last step.

The gpt model and Muon are copied from tests/goldens/gen_lm_goldens.py and
gen_optim_goldens.py (the PyTorch replica that the C tests check one training
step against, bitwise-close), with two changes that cost PyTorch nothing in
meaning: the RoPE tables are computed once per case rather than per forward,
and repeat_interleave is skipped when there are as many KV heads as heads.

BLAS: PyTorch 1.13 as Debian builds it runs its matmuls on the system BLAS
(OpenBLAS), whose threads torch.set_num_threads does not govern, and OpenBLAS
0.3.21 does not know every CPU: on one it does not recognise it falls back to
its SSE3 "Prescott" kernels (a Xeon of family 6 model 207: 12 GFLOP/s instead
of 90 on one thread). So before torch loads, this script sets
OPENBLAS_NUM_THREADS to --threads, and when OpenBLAS would pick Prescott on a
CPU with AVX2 or AVX-512 it sets OPENBLAS_CORETYPE to the matching kernels
(Cooperlake, SkylakeX, Haswell); either variable already in the environment
is left alone. A first line "# peer: ..." says what it ran with.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time


def _argv_threads():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


def _openblas_core():
    """The kernels OpenBLAS picks here (in a child: they are chosen once, at load)."""
    probe = ("import ctypes, ctypes.util\n"
             "n = ctypes.util.find_library('openblas')\n"
             "l = ctypes.CDLL(n or 'libopenblas.so.0')\n"
             "l.openblas_get_corename.restype = ctypes.c_char_p\n"
             "print(l.openblas_get_corename().decode())\n")
    try:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _blas_env():
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _argv_threads())
    if "OPENBLAS_CORETYPE" in os.environ:
        return "OPENBLAS_CORETYPE from the environment"
    core = _openblas_core()
    if core != "Prescott":
        return f"OpenBLAS core {core or 'unknown (no OpenBLAS?)'}"
    f = _cpu_flags()
    pick = None
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f:
        pick = "Cooperlake" if "avx512_bf16" in f else "SkylakeX"
    elif {"avx2", "fma"} <= f:
        pick = "Haswell"
    if pick:
        os.environ["OPENBLAS_CORETYPE"] = pick
        return f"OPENBLAS_CORETYPE={pick} (OpenBLAS picked Prescott on this CPU)"
    return "OpenBLAS core Prescott"


_BLAS_NOTE = _blas_env()

import torch  # noqa: E402 (after the BLAS environment above)
import torch.nn.functional as F  # noqa: E402


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


# ---- gpt_step, gpt_small: the qwen3 training model ---------------------------------
#
# Sizes: keep in step with gpt_sizes[] in bench/train.c. V vocab, E width, L
# layers, H heads, Hkv KV heads, D head dim, F FFN width, B batch, T seq.
GPT_SIZES = {
    "gpt_step": dict(V=4096, E=256, L=4, H=4, Hkv=4, D=64, F=768, B=4, T=256, eps=1e-6, base=10000.0),
    "gpt_small": dict(V=4096, E=128, L=2, H=2, Hkv=2, D=64, F=384, B=4, T=128, eps=1e-6, base=10000.0),
}


def gpt_param_shapes(c):
    """(gguf name, shape, kind) in the loader's order; kind: embd, matrix, out, head, norm."""
    E, H, Hkv, D, F, V = c["E"], c["H"], c["Hkv"], c["D"], c["F"], c["V"]
    out = [("token_embd.weight", (V, E), "embd")]
    for l in range(c["L"]):
        p = f"blk.{l}."
        out += [(p + "attn_norm.weight", (E,), "norm"),
                (p + "attn_q.weight", (H * D, E), "matrix"),
                (p + "attn_k.weight", (Hkv * D, E), "matrix"),
                (p + "attn_v.weight", (Hkv * D, E), "matrix"),
                (p + "attn_q_norm.weight", (D,), "norm"),
                (p + "attn_k_norm.weight", (D,), "norm"),
                (p + "attn_output.weight", (E, H * D), "out"),
                (p + "ffn_norm.weight", (E,), "norm"),
                (p + "ffn_gate.weight", (F, E), "matrix"),
                (p + "ffn_up.weight", (F, E), "matrix"),
                (p + "ffn_down.weight", (E, F), "out")]
    out += [("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "out")]
    return out


def gpt_init(c, seed):
    """fc_lm_new's initialisation (nanochat's), drawn with torch's generator:
    embeddings N(0, 1); Q/K/V, gate, up uniform with std 1/sqrt(in) *
    min(1, sqrt(out/in)); attn_output, ffn_down and output zero; norms one."""
    g = torch.Generator().manual_seed(seed)
    P = {}
    for name, shape, kind in gpt_param_shapes(c):
        if kind == "embd":
            t = torch.randn(*shape, generator=g)
        elif kind == "matrix":
            out, inp = shape
            a = math.sqrt(3.0) * (1.0 / math.sqrt(inp)) * min(1.0, math.sqrt(out / inp))
            t = (torch.rand(*shape, generator=g) * 2 - 1) * a
        elif kind == "out":
            t = torch.zeros(*shape)
        else:
            t = torch.ones(*shape)
        P[name] = t.requires_grad_(True)
    return P


def gpt_data(c, seed=12345):
    """The same tokens as bench/train.c's gpt_data: a 64-bit LCG, token =
    (state >> 33) % V, B rows of T + 1 tokens; x the first T, y the last T."""
    B, T, V = c["B"], c["T"], c["V"]
    s = seed
    toks = []
    for _ in range(B * (T + 1)):
        s = (s * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        toks.append((s >> 33) % V)
    t = torch.tensor(toks, dtype=torch.int64).view(B, T + 1)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def rmsnorm(v, w, eps):
    return (v * torch.rsqrt((v * v).mean(-1, keepdim=True) + eps)) * w


def rope_tables(c, dtype):
    D, T = c["D"], c["T"]
    inv = torch.tensor([c["base"] ** ((-2.0 * i) / D) for i in range(D // 2)], dtype=torch.float64).to(dtype)
    ang = torch.arange(T, dtype=dtype)[:, None] * inv[None, :]  # [T, D/2]
    return ang.cos(), ang.sin()


def rope_neox(x, cos, sin):
    """x [B, T, heads, D]; cos, sin [T, D/2]."""
    half = x.shape[-1] // 2
    c, s = cos[:, None, :], sin[:, None, :]
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)


def attention_vec(q, k, v):
    """q [B, T, H, D], k and v [B, T, Hkv, D] -> [B, T, H*D]."""
    B, T, H, D = q.shape
    rep = H // k.shape[2]
    q = q.permute(0, 2, 1, 3)
    k = k.permute(0, 2, 1, 3)
    v = v.permute(0, 2, 1, 3)
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    return (p @ v).permute(0, 2, 1, 3).reshape(B, T, H * D)


def gpt_forward(P, x, c, cos, sin):
    B, T = x.shape
    H, Hkv, D, eps = c["H"], c["Hkv"], c["D"], c["eps"]
    h = P["token_embd.weight"][x]
    for l in range(c["L"]):
        p = f"blk.{l}."
        a = rmsnorm(h, P[p + "attn_norm.weight"], eps)
        q = (a @ P[p + "attn_q.weight"].t()).view(B, T, H, D)
        k = (a @ P[p + "attn_k.weight"].t()).view(B, T, Hkv, D)
        v = (a @ P[p + "attn_v.weight"].t()).view(B, T, Hkv, D)
        q = rope_neox(rmsnorm(q, P[p + "attn_q_norm.weight"], eps), cos, sin)
        k = rope_neox(rmsnorm(k, P[p + "attn_k_norm.weight"], eps), cos, sin)
        h = h + attention_vec(q, k, v) @ P[p + "attn_output.weight"].t()
        f = rmsnorm(h, P[p + "ffn_norm.weight"], eps)
        h = h + (F.silu(f @ P[p + "ffn_gate.weight"].t()) * (f @ P[p + "ffn_up.weight"].t())) \
            @ P[p + "ffn_down.weight"].t()
    return rmsnorm(h, P["output_norm.weight"], eps) @ P["output.weight"].t()


def lm_loss(logits, y):
    n = int((y != -100).sum())
    s = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100, reduction="sum")
    return s / n


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
    scale sqrt(max(1, rows/cols)), decoupled weight decay (every parameter
    given to it here is 2-D; the others are in the AdamW below)."""

    def __init__(self, params, lr, weight_decay, momentum, nesterov, ns_steps):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
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


def gpt_optimizers(P, c):
    """fc_lm_optimizer's recipe with its defaults (src/llm/lm_train.c): Muon
    lr 0.02, momentum 0.95, Nesterov, 5 Newton-Schulz steps, no weight decay,
    on the layers' matrices; AdamW betas (0.8, 0.95), eps 1e-10, no weight
    decay: token_embd lr 0.2 s, output.weight lr 0.004 s (s = (E/768)^-0.5),
    the norm weights lr 0.02. lr schedule factor 1 (mid-run)."""
    scale = 1.0 / math.sqrt(c["E"] / 768.0)
    matrices = [p for n, p in P.items() if n.startswith("blk.") and p.ndim == 2]
    norms = [p for n, p in P.items() if n.endswith("norm.weight")]
    assert len(matrices) + len(norms) + 2 == len(P)
    muon = MuonRef(matrices, lr=0.02, weight_decay=0.0, momentum=0.95, nesterov=True, ns_steps=5)
    adamw = torch.optim.AdamW([{"params": [P["token_embd.weight"]], "lr": 0.2 * scale},
                               {"params": [P["output.weight"]], "lr": 0.004 * scale},
                               {"params": norms, "lr": 0.02}],
                              lr=0.02, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0, foreach=False)
    return muon, adamw


def gpt_case(name):
    c = GPT_SIZES[name]
    torch.manual_seed(0)
    P = gpt_init(c, 1234)
    opts = gpt_optimizers(P, c)
    x, y = gpt_data(c)
    cos, sin = rope_tables(c, torch.float32)
    losses = []

    def step():
        loss = lm_loss(gpt_forward(P, x, c, cos, sin), y)
        loss.backward()
        for o in opts:
            o.step()
        for o in opts:
            o.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return step, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("cases", nargs="*", default=["mlp_b64", "mlp_b256", "block", "gpt_small", "gpt_step"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# peer: torch {torch.__version__}, {a.threads} threads, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}, {_BLAS_NOTE}", flush=True)
    for name in a.cases:
        losses = None
        if name in GPT_SIZES:
            step, losses = gpt_case(name)
        elif name == "mlp_b64":
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
        extra = f" {losses[0]:.6f} {losses[-1]:.6f}" if losses else ""
        print(f"{name} {statistics.median(times) * 1e3:.6f} {a.rounds}{extra}", flush=True)


if __name__ == "__main__":
    main()
