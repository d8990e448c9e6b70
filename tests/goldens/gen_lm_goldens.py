#!/usr/bin/python3
"""Goldens for a tiny Qwen3 language model and its first two training steps,
computed with PyTorch 1.13 on CPU in float32 (writes lm_goldens.txt).

Run:  /usr/bin/python3 tests/goldens/gen_lm_goldens.py
(Debian: apt-get install python3-torch python3-numpy). The output is
deterministic (fixed seeds, torch.set_num_threads(1)) for a given BLAS kernel
set: OpenBLAS 0.3.21 picks its kernels by CPU, and on a CPU it does not know it
falls back to SSE3 ones whose sums round differently; the committed file was
written with the AVX2 kernels (OPENBLAS_CORETYPE=Haswell reproduces it
anywhere). The script first runs
its own sanity checks (see "Checks" below) and stops on any failure.

Model: the qwen3 graph of llama.cpp, parameters named by their GGUF names,
matrices [out, in] like torch.nn.Linear.weight, no biases, untied output.

  config  V=64 n_vocab, E=32 n_embd, L=2 n_layer, H=4 n_head, Hkv=2
          n_head_kv, D=8 head_dim, F=48 n_ff, rms eps 1e-6, RoPE base 10000
          (NeoX), batch B=2, sequence T=12.

  token_embd.weight [V, E]
  blk.<l>.attn_norm.weight [E]        blk.<l>.attn_q.weight [H*D, E]
  blk.<l>.attn_k.weight [Hkv*D, E]    blk.<l>.attn_v.weight [Hkv*D, E]
  blk.<l>.attn_q_norm.weight [D]      blk.<l>.attn_k_norm.weight [D]
  blk.<l>.attn_output.weight [E, H*D] blk.<l>.ffn_norm.weight [E]
  blk.<l>.ffn_gate.weight [F, E]      blk.<l>.ffn_up.weight [F, E]
  blk.<l>.ffn_down.weight [E, F]      (l = 0, 1)
  output_norm.weight [E]              output.weight [V, E]

Init: one torch.Generator seeded 1234, drawn in exactly the order above
(token_embd, then blk.0.* in the listed order attn_norm, attn_q, attn_k,
attn_v, attn_q_norm, attn_k_norm, attn_output, ffn_norm, ffn_gate, ffn_up,
ffn_down, then blk.1.*, output_norm, output): a matrix [out, in] is
randn(out, in) * (1 / sqrt(in)) (token_embd: randn(V, E), std 1), a norm
weight is 1 + 0.1 * randn(n). The C test loads init.* rather than redrawing.

Data (its own Generator, seeded 4321): x1 = randint(0, V,
[B, T]); y1[:, :-1] = x1[:, 1:] and y1[:, -1] = randint(0, V, [B]); then x2,
y2 the same way, and 7 targets of y2 set to -100 (ignored): row 0 positions
0, 1, 2 (a leading prompt run) and 7; row 1 positions 0, 5 and 11 (17 valid).

Forward, in this order of operations (float32 throughout; "@" a matrix
product, W^T the transpose of a stored [out, in] matrix):

  rmsnorm(v, w) over the last axis of size n:
      ms = sum(v*v) / n;  r = rsqrt(ms + eps);  y = (v * r) * w
      (torch.rsqrt; 1/sqrtf(ms + eps) agrees within an ulp)
  h = token_embd[x]                                        [B, T, E]
  per layer l:
    a = rmsnorm(h, attn_norm)
    q = a @ Wq^T viewed [B, T, H, D]; k = a @ Wk^T, v = a @ Wv^T [B, T, Hkv, D]
    q = rmsnorm(q, attn_q_norm), k = rmsnorm(k, attn_k_norm) over D, per head
    RoPE NeoX on q and k (v untouched): for i < D/2,
        inv_freq[i] = (float)pow(10000.0, (-2.0 * i) / D)   in double, then
                      rounded once to float32 (1, 0.1f, 0.01f, 0.001f here)
        angle[t][i] = (float)t * inv_freq[i]                 one float32 mul
        c = cosf(angle), s = sinf(angle)                     float32
        (x0, x1) = (x[i], x[i + D/2]) -> (x0*c - x1*s, x0*s + x1*c)
      position t = 0..T-1 in every row of the batch.
    attention, per batch row b and query head h, kv head g = h // (H/Hkv)
      (repeat_interleave: heads 0,1 -> kv 0; heads 2,3 -> kv 1):
        s[t][u] = (q[t] . k[u]) * scale,  scale = (float)(1 / sqrt(D)),
                  i.e. the scale multiplies the finished dot product
                  (not q beforehand)
        s[t][u] = -inf for u > t (causal), then softmax over u in float32
                  (max-subtracted: exp(s - max) / sum)
        o[t] = sum_u p[t][u] * v[u]
    h = h + o (reshaped [B, T, H*D], head-major: column h*D + d) @ Wo^T
    f = rmsnorm(h, ffn_norm)
    h = h + (silu(f @ Wg^T) * (f @ Wu^T)) @ Wd^T,   silu(z) = z * sigmoid(z)
  logits = rmsnorm(h, output_norm) @ output.weight^T      [B, T, V]
  loss = cross_entropy(logits, y, ignore_index=-100, reduction="sum")
         / (number of y != -100)      (log_softmax over V, a float32 sum,
                                       one float32 division by the count)

Training, two steps: step k takes (xk, yk), forward + backward from the
current parameters, then both optimizers step (disjoint parameters), then
grads are zeroed.
  * MuonRef (gen_optim_goldens.py; no internal AdamW: every parameter given
    to it is 2-D) on every blk.* matrix (attn_q, attn_k, attn_v, attn_output,
    ffn_gate, ffn_up, ffn_down): lr 0.02, momentum 0.95, nesterov, ns_steps
    5, weight_decay 0. Per matrix, with buf = 0 before step 1:
        buf = buf.lerp(g, 1 - 0.95)          buf + 0.05 * (g - buf)
        u = g.lerp(buf, 0.95)                g + 0.95 * (buf - g)
        u = newton_schulz5(u, 5)             (gen_optim_goldens.py: f32,
                                             X / (||X||_F + 1e-7), on the
                                             transpose when rows > cols)
        u = u * sqrt(max(1, rows / cols))    (ffn_gate: sqrt(1.5); others 1)
        p = p - 0.02 * u                     (p * (1 - lr*0) first, a no-op)
  * torch.optim.AdamW(foreach=False: _single_tensor_adamw), betas (0.8,
    0.95), eps 1e-10, weight_decay 0, three groups: token_embd.weight lr
    0.05; output.weight lr 0.004; every norm weight (attn_norm, attn_q_norm,
    attn_k_norm, ffn_norm of both layers, output_norm) lr 0.02. Per element,
    step k = 1, 2:
        m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g
        denom = sqrt(v) / sqrt(1 - b2^k) + eps      (bias terms in double)
        p = p - (lr / (1 - b1^k)) * m / denom
    Dense: token_embd rows whose tokens are absent from x1 have g = 0 and do
    not move at step 1, but rows used at step 1 and absent at step 2 still
    move at step 2 (m != 0).

Golden arrays (lm_goldens.txt; floats f32 unless marked, i64 integers):
  config           i64 [9]   V, E, L, H, Hkv, D, F, B, T
  config_f         f64 [2]   rms eps, RoPE base
  optim            f64 [12]  muon lr, muon momentum, muon nesterov (1),
                             muon ns_steps, muon weight decay, adamw beta1,
                             adamw beta2, adamw eps, adamw weight decay,
                             lr token_embd, lr output, lr norms
  init.<name>      every parameter before training (shapes as listed above)
  x1, y1, x2, y2   i64 [B, T]
  logits1          [B, T, V]  the step-1 forward, from init.*
  loss1            rank 0     loss of (x1, y1) at init.*
  grad1.<name>     every parameter's gradient at step 1 (shape of the param)
  step1.<name>     every parameter after the step-1 update
  loss2            rank 0     loss of (x2, y2) at step1.*
  step2.<name>     every parameter after the step-2 update

Checks run before writing: attention written once vectorised and once with
explicit loops over batch, head and position (each layer's output equal
within 1e-6; the whole forward's logits within 1e-6 of max |logit|); RoPE against a complex-multiplication
formulation; torch.autograd.gradcheck of the float64 loss (a tiny config,
with ignored targets and grouped-query heads) w.r.t. token_embd, attn_q,
attn_k, attn_k_norm and output_norm; the Muon update of one matrix at step 1
recomputed by hand with newton_schulz5; and the float32 loss and gradients
against a float64 run of the same model (the printed deviations are a guide
for the C test's tolerances).

Format (the loader in tests/harness/fct_golden.c): one array per two lines,
  <name> <f32|f64|i64> <rank> <dim0> ... <dimR-1>
  <values, row-major; floats as C99 hex floats (exact)>
"""
import math
import time

import torch
import torch.nn.functional as Fn

from gen_optim_goldens import MuonRef, newton_schulz5
from golden_writer import Writer

CFG = dict(V=64, E=32, L=2, H=4, Hkv=2, D=8, F=48, B=2, T=12, eps=1e-6, base=10000.0)
# A tiny configuration for gradcheck (float64).
TINY = dict(V=7, E=8, L=1, H=2, Hkv=1, D=4, F=6, B=1, T=4, eps=1e-6, base=10000.0)

MUON = dict(lr=0.02, momentum=0.95, nesterov=True, ns_steps=5, weight_decay=0.0)
ADAMW = dict(betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0)
LR_EMBD, LR_OUTPUT, LR_NORM = 0.05, 0.004, 0.02


# ---- parameters --------------------------------------------------------------------


def param_shapes(c):
    """(gguf name, shape, kind) in the draw order; kind: embd, matrix, norm."""
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
                (p + "attn_output.weight", (E, H * D), "matrix"),
                (p + "ffn_norm.weight", (E,), "norm"),
                (p + "ffn_gate.weight", (F, E), "matrix"),
                (p + "ffn_up.weight", (F, E), "matrix"),
                (p + "ffn_down.weight", (E, F), "matrix")]
    out += [("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "matrix")]
    return out


def init_params(c, seed):
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape, kind in param_shapes(c):
        if kind == "embd":
            t = torch.randn(*shape, generator=g)
        elif kind == "matrix":
            t = torch.randn(*shape, generator=g) * (1.0 / math.sqrt(shape[1]))
        else:
            t = 1.0 + 0.1 * torch.randn(*shape, generator=g)
        params[name] = t
    return params


def make_data(c, g):
    B, T, V = c["B"], c["T"], c["V"]
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.empty_like(x)
    y[:, :-1] = x[:, 1:]
    y[:, -1] = torch.randint(0, V, (B,), generator=g)
    return x, y


# ---- model ---------------------------------------------------------------------------


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


def attention_vec(q, k, v, c):
    """q [B, T, H, D], k and v [B, T, Hkv, D] -> [B, T, H*D]."""
    B, T, H, D = q.shape
    rep = H // k.shape[2]
    q = q.permute(0, 2, 1, 3)
    k = k.permute(0, 2, 1, 3)
    v = v.permute(0, 2, 1, 3)
    if rep > 1:  # grouped-query heads (with as many KV heads as heads, nothing to repeat)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    return (p @ v).permute(0, 2, 1, 3).reshape(B, T, H * D)


def attention_loops(q, k, v, c):
    """The same attention with explicit loops over batch, head and position."""
    B, T, H, D = q.shape
    rep = H // k.shape[2]
    scale = 1.0 / math.sqrt(D)
    out = torch.zeros(B, T, H, D, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            g = h // rep
            for t in range(T):
                s = torch.stack([torch.dot(q[b, t, h], k[b, u, g]) * scale for u in range(t + 1)])
                e = torch.exp(s - s.max())
                p = e / e.sum()
                out[b, t, h] = sum(p[u] * v[b, u, g] for u in range(t + 1))
    return out.reshape(B, T, H * D)


def forward(P, x, c, attn=attention_vec, trace=None, rope=None):
    """rope: (cos, sin) from rope_tables, or None to compute them here."""
    B, T = x.shape
    H, Hkv, D, eps = c["H"], c["Hkv"], c["D"], c["eps"]
    cos, sin = rope if rope is not None else rope_tables(c, P["token_embd.weight"].dtype)
    h = P["token_embd.weight"][x]
    for l in range(c["L"]):
        p = f"blk.{l}."
        a = rmsnorm(h, P[p + "attn_norm.weight"], eps)
        q = (a @ P[p + "attn_q.weight"].t()).view(B, T, H, D)
        k = (a @ P[p + "attn_k.weight"].t()).view(B, T, Hkv, D)
        v = (a @ P[p + "attn_v.weight"].t()).view(B, T, Hkv, D)
        q = rope_neox(rmsnorm(q, P[p + "attn_q_norm.weight"], eps), cos, sin)
        k = rope_neox(rmsnorm(k, P[p + "attn_k_norm.weight"], eps), cos, sin)
        if trace is not None:
            trace.append((q.detach(), k.detach(), v.detach()))
        h = h + attn(q, k, v, c) @ P[p + "attn_output.weight"].t()
        f = rmsnorm(h, P[p + "ffn_norm.weight"], eps)
        h = h + (Fn.silu(f @ P[p + "ffn_gate.weight"].t()) * (f @ P[p + "ffn_up.weight"].t())) \
            @ P[p + "ffn_down.weight"].t()
    return rmsnorm(h, P["output_norm.weight"], eps) @ P["output.weight"].t()


def lm_loss(logits, y):
    n = int((y != -100).sum())
    s = Fn.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100, reduction="sum")
    return s / n


# ---- checks ---------------------------------------------------------------------------


def check_attention(P, x):
    trace = []
    with torch.no_grad():
        lv = forward(P, x, CFG, attention_vec, trace)
        ll = forward(P, x, CFG, attention_loops)
        worst = 0.0
        for q, k, v in trace:
            d = (attention_vec(q, k, v, CFG) - attention_loops(q, k, v, CFG)).abs().max().item()
            worst = max(worst, d)
    # The per-layer outputs (same q, k, v) within 1e-6; the whole forward,
    # whose roundoff compounds over two layers, within 1e-6 of max |logits|.
    dl = ((lv - ll).abs().max() / lv.abs().max()).item()
    assert worst <= 1e-6 and dl <= 1e-6, (worst, dl)
    print(f"check: attention loops vs vectorised: max |diff| {worst:.2e} (per layer); "
          f"logits max |diff| / max |logit| {dl:.2e}")


def check_rope():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(CFG["B"], CFG["T"], CFG["H"], CFG["D"], generator=g)
    cos, sin = rope_tables(CFG, torch.float32)
    half = CFG["D"] // 2
    z = torch.complex(x[..., :half], x[..., half:]) * torch.complex(cos, sin)[:, None]
    ref = torch.cat([z.real, z.imag], dim=-1)
    d = (rope_neox(x, cos, sin) - ref).abs().max().item()
    assert d <= 1e-6, d
    inv = [CFG["base"] ** ((-2.0 * i) / CFG["D"]) for i in range(half)]
    assert torch.equal(torch.tensor(inv, dtype=torch.float32), torch.tensor([1.0, 0.1, 0.01, 0.001]))
    print(f"check: RoPE vs complex rotation: max |diff| {d:.2e}")


def check_gradcheck():
    c = TINY
    P = {k: v.double() for k, v in init_params(c, 99).items()}
    g = torch.Generator().manual_seed(5)
    x, y = make_data(c, g)
    y[0, 1] = -100
    names = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_k_norm.weight",
             "output_norm.weight"]

    def f(*ts):
        Q = dict(P)
        Q.update(zip(names, ts))
        return lm_loss(forward(Q, x, c), y)

    inputs = tuple(P[n].clone().requires_grad_(True) for n in names)
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    print(f"check: gradcheck (float64, tiny config) w.r.t. {', '.join(names)}: ok")


def check_f64(init, x, y, loss32, grads32):
    P = {k: v.double().requires_grad_(True) for k, v in init.items()}
    loss = lm_loss(forward(P, x, CFG), y)
    loss.backward()
    dl = abs(loss.item() - loss32) / abs(loss.item())
    worst, where = 0.0, ""
    for n, p in P.items():
        r = ((grads32[n].double() - p.grad).abs().max() / p.grad.abs().max()).item()
        if r > worst:
            worst, where = r, n
    assert dl < 1e-5 and worst < 1e-4, (dl, worst, where)
    print(f"check: float32 vs float64: loss1 rel {dl:.2e}; grad1 max |diff| / max |grad| {worst:.2e} ({where})")


def check_muon_step1(name, init, grad, after):
    m = MUON["momentum"]
    buf = torch.zeros_like(grad).lerp(grad, 1 - m)
    u = newton_schulz5(grad.lerp(buf, m), MUON["ns_steps"]) * max(1, grad.shape[0] / grad.shape[1]) ** 0.5
    d = (after - init.add(u, alpha=-MUON["lr"])).abs().max().item()
    assert d == 0.0, (name, d)
    print(f"check: Muon step 1 of {name} by hand: identical")


# ---- training --------------------------------------------------------------------------


def make_optimizers(P, lr_embd=LR_EMBD, lr_output=LR_OUTPUT):
    matrices = [p for n, p in P.items() if n.startswith("blk.") and p.ndim == 2]
    norms = [p for n, p in P.items() if n.endswith("norm.weight")]
    assert len(matrices) + len(norms) + 2 == len(P)
    muon = MuonRef(matrices, lr=MUON["lr"], weight_decay=MUON["weight_decay"], momentum=MUON["momentum"],
                   nesterov=MUON["nesterov"], ns_steps=MUON["ns_steps"], adamw_betas=ADAMW["betas"],
                   adamw_eps=ADAMW["eps"])
    assert muon.adamw is None
    adamw = torch.optim.AdamW([{"params": [P["token_embd.weight"]], "lr": lr_embd},
                               {"params": [P["output.weight"]], "lr": lr_output},
                               {"params": norms, "lr": LR_NORM}],
                              lr=LR_NORM, foreach=False, **ADAMW)
    return muon, adamw


def train_step(P, opts, x, y, keep_logits=False):
    logits = forward(P, x, CFG)
    loss = lm_loss(logits, y)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in P.items()}
    for o in opts:
        o.step()
    for o in opts:
        o.zero_grad()
    after = {n: p.detach().clone() for n, p in P.items()}
    return loss.detach(), logits.detach() if keep_logits else None, grads, after


def main():
    t0 = time.time()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    c = CFG
    init = init_params(c, 1234)
    g = torch.Generator().manual_seed(4321)
    x1, y1 = make_data(c, g)
    x2, y2 = make_data(c, g)
    for b, t in [(0, 0), (0, 1), (0, 2), (0, 7), (1, 0), (1, 5), (1, 11)]:
        y2[b, t] = -100

    check_rope()
    check_attention(init, x1)
    check_gradcheck()

    P = {n: t.clone().requires_grad_(True) for n, t in init.items()}
    opts = make_optimizers(P)
    loss1, logits1, grad1, step1 = train_step(P, opts, x1, y1, keep_logits=True)
    loss2, _, _, step2 = train_step(P, opts, x2, y2)

    check_f64(init, x1, y1, loss1.item(), grad1)
    for n in ["blk.0.attn_k.weight", "blk.1.ffn_gate.weight"]:
        check_muon_step1(n, init[n], grad1[n], step1[n])

    w = Writer("lm_goldens.txt", "gen_lm_goldens.py")
    w.put("config", torch.tensor([c[k] for k in ["V", "E", "L", "H", "Hkv", "D", "F", "B", "T"]]))
    w.put_f64("config_f", [c["eps"], c["base"]])
    w.put_f64("optim", [MUON["lr"], MUON["momentum"], float(MUON["nesterov"]), MUON["ns_steps"],
                        MUON["weight_decay"], ADAMW["betas"][0], ADAMW["betas"][1], ADAMW["eps"],
                        ADAMW["weight_decay"], LR_EMBD, LR_OUTPUT, LR_NORM])
    for n, t in init.items():
        w.put(f"init.{n}", t)
    for n, t in [("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)]:
        w.put(n, t)
    w.put("logits1", logits1)
    w.put("loss1", loss1)
    for n, t in grad1.items():
        w.put(f"grad1.{n}", t)
    for n, t in step1.items():
        w.put(f"step1.{n}", t)
    w.put("loss2", loss2)
    for n, t in step2.items():
        w.put(f"step2.{n}", t)
    w.close()
    print(f"loss1 {loss1.item():.9g}  loss2 {loss2.item():.9g}  ({time.time() - t0:.2f} s)")


if __name__ == "__main__":
    main()
