#!/usr/bin/python3
"""Golden files for tests/runtime/test_nn.c (softmax, log_softmax, rmsnorm,
layernorm, RoPE, attention), computed with PyTorch in float64.

Each case is one file nn_<case>.f32: the named arrays below, in order, as
little-endian float32, row-major, concatenated (integer positions are stored
as exact floats). The shapes and the order are repeated in test_nn.c.

Run: /usr/bin/python3 tests/goldens/gen_nn_goldens.py  (numpy, torch >= 1.13)
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20240611)
D = torch.float64


def rnd(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(D)


def write(name, *arrays):
    path = os.path.join(OUT, "nn_" + name + ".f32")
    with open(path, "wb") as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a.detach().numpy(), dtype="<f4").tobytes())
    print(path, os.path.getsize(path), "bytes")


# --- softmax: x [head=3, seq=5, kv_seq=7], along kv_seq ---------------------
x = rnd(3, 5, 7, scale=2.0)
write("softmax_scale", x, torch.softmax(0.5 * x, dim=-1))

mask = rnd(5, 7)  # [seq, kv_seq], broadcast over head
mask[1, 2] = -math.inf
mask[3, :] = -math.inf  # a fully masked row: zeros
sm = torch.softmax(x + mask, dim=-1)
sm = torch.nan_to_num(sm, nan=0.0)
write("softmax_mask", x, mask, sm)

# causal: (q, k) masked when k > q + 2 (query 0 at key position 2)
q_idx = torch.arange(5).view(5, 1)
k_idx = torch.arange(7).view(1, 7)
causal = torch.where(k_idx > q_idx + 2, -math.inf, 0.0).to(D)
write("softmax_causal", x, torch.softmax(x + causal, dim=-1))

# sinks (gpt-oss): one logit per head joins the denominator
sinks = rnd(3)
z = torch.cat([x, sinks.view(3, 1, 1).expand(3, 5, 1)], dim=-1)
write("softmax_sinks", x, sinks, torch.softmax(z, dim=-1)[..., :7])

# along a non-innermost axis: x2 [seq=6, d=4] along seq
x2 = rnd(6, 4, scale=3.0)
write("softmax_axis0", x2, torch.softmax(x2, dim=0))

# --- log_softmax: x [r=4, c=9] along c ----------------------------------------
x3 = rnd(4, 9, scale=3.0)
write("log_softmax", x3, torch.log_softmax(x3, dim=-1))

# --- rmsnorm (Llama / Qwen): x * rsqrt(mean(x^2) + eps) * w; x [seq=4, d=16] -
x4 = rnd(4, 16)
w4 = 1.0 + 0.1 * rnd(16)
eps = 1e-6
rms = x4 * torch.rsqrt(x4.pow(2).mean(-1, keepdim=True) + eps) * w4
write("rmsnorm", x4, w4, rms)

# --- layernorm: x [seq=4, d=16], eps 1e-5 ------------------------------------
b4 = 0.1 * rnd(16)
write("layernorm", x4, w4, b4, F.layer_norm(x4, (16,), w4, b4, eps=1e-5))

# --- RoPE: x [seq=5, head=2, d=8], positions 3..7, theta 10000 ----------------
x5 = rnd(5, 2, 8)
pos = torch.tensor([3.0, 4.0, 5.0, 6.0, 9.0], dtype=D)


def inv_freq(n_rot, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, n_rot, 2, dtype=D) / n_rot))


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], dim=-1)


def rope_neox(x, pos, n_rot):
    """Hugging Face Llama apply_rotary_pos_emb on the first n_rot dims (GPT-NeoX)."""
    freqs = pos.view(-1, 1) * inv_freq(n_rot).view(1, -1)  # [seq, n_rot/2]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    r, rest = x[..., :n_rot], x[..., n_rot:]
    return torch.cat([r * cos + rotate_half(r) * sin, rest], dim=-1)


def rotate_every_two(t):
    x1, x2 = t[..., ::2], t[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rope_gptj(x, pos, n_rot):
    """GPT-J apply_rotary_pos_emb (interleaved pairs) on the first n_rot dims."""
    freqs = pos.view(-1, 1) * inv_freq(n_rot).view(1, -1)
    cos = torch.repeat_interleave(freqs.cos(), 2, dim=-1)[:, None, :]
    sin = torch.repeat_interleave(freqs.sin(), 2, dim=-1)[:, None, :]
    r, rest = x[..., :n_rot], x[..., n_rot:]
    return torch.cat([r * cos + rotate_every_two(r) * sin, rest], dim=-1)


write("rope_neox", x5, pos, rope_neox(x5, pos, 8))
write("rope_normal", x5, pos, rope_gptj(x5, pos, 8))
write("rope_neox_partial", x5, pos, rope_neox(x5, pos, 4))

# --- attention: q [seq=5, head=4, d=8], k/v [kv_seq=7, kv_head=2, d=8] ---------
q = rnd(5, 4, 8)
k = rnd(7, 2, 8)
v = rnd(7, 2, 8)


def sdpa(q, k, v, mask):
    """torch SDPA with an explicit float mask [head, seq, kv_seq]; GQA by
    repeat_interleave of the kv heads."""
    rep = q.shape[1] // k.shape[1]
    kk = torch.repeat_interleave(k, rep, dim=1).transpose(0, 1)  # [head, kv, d]
    vv = torch.repeat_interleave(v, rep, dim=1).transpose(0, 1)
    qq = q.transpose(0, 1)  # [head, seq, d]
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask)
    else:  # torch 1.13: SDPA's documented reference computation
        s = qq @ kk.transpose(-2, -1) / math.sqrt(qq.shape[-1]) + mask
        o = torch.softmax(s, dim=-1) @ vv
    return o.transpose(0, 1)  # [seq, head, d]


causal_mask = causal.view(1, 5, 7).expand(4, 5, 7)
write("attn_causal", q, k, v, sdpa(q, k, v, causal_mask))

amask = rnd(5, 7)
amask[0, 3] = -math.inf
amask[2, 0:2] = -math.inf
write("attn_mask", q, k, v, amask, sdpa(q, k, v, amask.view(1, 5, 7).expand(4, 5, 7)))

# sinks + causal, by hand: softmax over [logits, sink], drop the sink column
asinks = rnd(4)
rep = 2
kk = torch.repeat_interleave(k, rep, dim=1).transpose(0, 1)
vv = torch.repeat_interleave(v, rep, dim=1).transpose(0, 1)
logits = q.transpose(0, 1) @ kk.transpose(1, 2) / math.sqrt(8) + causal.view(1, 5, 7)
z = torch.cat([logits, asinks.view(4, 1, 1).expand(4, 5, 1)], dim=-1)
p = torch.softmax(z, dim=-1)[..., :7]
write("attn_sinks", q, k, v, asinks, (p @ vv).transpose(0, 1))
