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

The gpt model, its loss and the optimizers (Muon from gen_optim_goldens.py)
are imported from tests/goldens/gen_lm_goldens.py (the PyTorch replica that
the C tests check one training step against, bitwise-close), with two changes
that cost PyTorch nothing in meaning: the RoPE tables are computed once per
case rather than per forward (forward's rope argument), and repeat_interleave
is skipped when there are as many KV heads as heads (as attention_vec does).
Only the initialisation (fc_lm_new's), the tokens and the learning rates of
token_embd and output (fc_lm_optimizer's defaults) are this script's own.

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

# The model, the loss and the optimizers: the PyTorch replica of the goldens.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "goldens"))
import gen_lm_goldens as goldens  # noqa: E402


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
    """(gguf name, shape, kind) in the loader's order; kind: embd, matrix, out
    (the matrices fc_lm_new starts at zero), norm."""
    zero = ("attn_output.weight", "ffn_down.weight")
    return [(n, shape, "out" if n.endswith(zero) or n == "output.weight" else kind)
            for n, shape, kind in goldens.param_shapes(c)]


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


def gpt_optimizers(P, c):
    """fc_lm_optimizer's recipe with its defaults (src/llm/lm_train.c), as the
    goldens' make_optimizers: Muon lr 0.02, momentum 0.95, Nesterov, 5
    Newton-Schulz steps, no weight decay, on the layers' matrices; AdamW betas
    (0.8, 0.95), eps 1e-10, no weight decay: token_embd lr 0.2 s,
    output.weight lr 0.004 s (s = (E/768)^-0.5), the norm weights lr 0.02. lr
    schedule factor 1 (mid-run)."""
    scale = 1.0 / math.sqrt(c["E"] / 768.0)
    return goldens.make_optimizers(P, lr_embd=0.2 * scale, lr_output=0.004 * scale)


def gpt_case(name):
    c = GPT_SIZES[name]
    torch.manual_seed(0)
    P = gpt_init(c, 1234)
    opts = gpt_optimizers(P, c)
    x, y = gpt_data(c)
    rope = goldens.rope_tables(c, torch.float32)  # once per case, not per forward
    losses = []

    def step():
        loss = goldens.lm_loss(goldens.forward(P, x, c, rope=rope), y)
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
