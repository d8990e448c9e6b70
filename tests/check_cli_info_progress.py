#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What make-model, quantize and info print, on a terminal and off it.

usage: check_cli_info_progress.py FUCINA WORKDIR

- make-model: off a terminal, exactly one summary line on stdout (the file,
  family, preset, type, tensors, parameters, size, time) and nothing on
  stderr; with stderr on a terminal (a pty) a progress bar that reaches 100%
  and is erased, unless FUCINA_NO_PROGRESS is set.
- quantize: per-tensor progress lines on a terminal, none off it (the summary
  on stdout either way).
- info MODEL: a short summary by default (architecture, parameters, file size,
  type mix, context, vocab, chat template family, memory), its numbers equal
  to what the full listing (--slots, or --tensors) says; the tensor table
  only with --slots; a forged block_count does not make it loop.
- info without a file: the slot counts, the slot table only with --slots.
"""
import os
import pty
import re
import subprocess
import sys

FUCINA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, timeout=300, **kw):
    return subprocess.run([FUCINA, *args], capture_output=True, text=True, timeout=timeout, **kw)


def on_pty(*args, env=None):
    """Run with stderr on a pseudo-terminal; return (status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([FUCINA, *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    tty = b""
    while True:  # read as it comes: a full pty buffer would block the child
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        tty += chunk
    out = p.stdout.read()
    p.stdout.close()
    rc = p.wait(timeout=300)
    os.close(master)
    return rc, out.decode(), tty.decode(errors="replace")


def fresh(name):
    path = os.path.join(WORK, name)
    if os.path.exists(path):
        os.unlink(path)
    return path


# ---- make-model ------------------------------------------------------------------
model = fresh("tiny.gguf")
r = run("make-model", model, "--seed", "3")
check(r.returncode == 0, f"make-model: exit {r.returncode}: {r.stderr!r}")
summary_re = (re.escape(f"wrote {model}: qwen3 tiny, f32, ") +
              r"(\d+) tensors, (\d+\.\d{3}) M parameters, (\d+\.\d{2}) MiB in \d+\.\d{2} s\n")
m = re.fullmatch(summary_re, r.stdout)
check(m is not None, f"make-model off a terminal: not one summary line: {r.stdout!r}")
check(r.stderr == "", f"make-model off a terminal wrote on stderr: {r.stderr!r}")
if m:
    check(abs(float(m.group(3)) - os.path.getsize(model) / 2**20) < 0.01,
          f"make-model: the summary's size {m.group(3)} MiB is not the file's {os.path.getsize(model)} bytes")

q8 = fresh("tiny-q8.gguf")
rc, out, tty = on_pty("make-model", q8, "--preset", "small", "--dtype", "q8_0")
check(rc == 0 and out.startswith(f"wrote {q8}: qwen3 small, q8_0, "), f"make-model on a terminal: exit {rc}: {out!r}")
check("\rwriting [" in tty and "] 100%" in tty and tty.endswith("\r\x1b[K"),
      f"make-model on a terminal: no progress bar reaching 100% and erased: {tty[-200:]!r}")
env = dict(os.environ, FUCINA_NO_PROGRESS="1")
rc, out, tty = on_pty("make-model", fresh("tiny-quiet.gguf"), env=env)
check(rc == 0 and tty == "", f"make-model with FUCINA_NO_PROGRESS: the terminal got {tty!r}")

# ---- quantize --------------------------------------------------------------------
qp = fresh("q-pipe.gguf")
r = run("quantize", model, qp, "Q8_0")
check(r.returncode == 0 and r.stderr == "" and re.fullmatch(
    r"quantized Q8_0: 24 tensors \(\d+ re-encoded, 0 by fallback\), [\d.]+ M parameters; tensor data .*; files: " +
    re.escape(f"{model} ") + r"[\d.]+ MiB -> " + re.escape(qp) + r" [\d.]+ MiB in [\d.]+ s \(general.file_type 7\)\n",
    r.stdout), f"quantize off a terminal: not one summary line: exit {r.returncode}, stderr {r.stderr!r}, stdout {r.stdout!r}")
r = run("quantize", model, fresh("q-dry.gguf"), "Q8_0", "--dry-run")
check(r.returncode == 0 and r.stdout.splitlines()[-1].startswith("plan for Q8_0: 24 tensors"),
      f"quantize --dry-run: the plan's last line is not the summary: {r.stdout[-300:]!r}")
rc, out, tty = on_pty("quantize", model, fresh("q-tty.gguf"), "Q8_0")
check(rc == 0 and re.search(r"^\[\s*\d+/\s*\d+\] token_embd\.weight ", tty, re.M) and out.startswith("quantized Q8_0: "),
      f"quantize on a terminal: exit {rc}, no per-tensor lines: {tty[:300]!r}")

# ---- info MODEL ------------------------------------------------------------------
r = run("info", model)
check(r.returncode == 0, f"info: exit {r.returncode}: {r.stderr!r}")
lines = r.stdout.splitlines()
fields = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in lines if ":" in ln and not ln.startswith(" ")}
for k in ("file", "name", "architecture", "parameters", "types", "context", "vocab", "chat template", "memory"):
    check(k in fields, f"info: no '{k}:' line in {r.stdout!r}")
check(len(lines) <= 12, f"info: the summary is {len(lines)} lines, not short")
check("blk.0.attn_q.weight" not in r.stdout and "tokenizer.ggml.merges" not in r.stdout,
      f"info: the summary lists tensors or keys: {r.stdout!r}")
full = run("info", model, "--slots")
check(full.returncode == 0 and "blk.0.attn_q.weight" in full.stdout and "tokenizer.ggml.merges" in full.stdout,
      f"info --slots: no tensor table or metadata: {full.stdout[:300]!r}")
check(run("info", model, "--tensors").stdout == full.stdout, "info --tensors differs from --slots")


def key(name):
    mm = re.search(rf"^  {re.escape(name)}\s+\S+\s+(.*)$", full.stdout, re.M)
    return mm.group(1) if mm else None


tot = re.search(r"^totals: (\d+) tensors, (\d+) parameters .*?, (\d+) bytes", full.stdout, re.M)
if tot and fields.get("parameters"):
    check(f"({tot.group(2)})" in fields["parameters"],
          f"info: parameters {fields['parameters']!r} but the listing says {tot.group(2)}")
    check(f"{tot.group(1)} tensors" in fields["file"], f"info: file {fields['file']!r} vs {tot.group(1)} tensors")
if fields.get("architecture"):
    nl, ne, nh, nkv = (key(f"qwen3.{k}") for k in ("block_count", "embedding_length", "attention.head_count",
                                                     "attention.head_count_kv"))
    kl = key("qwen3.attention.key_length") or str(int(ne) // int(nh))
    check(fields["architecture"].startswith(f"qwen3, {nl} layers, embedding {ne}, {nh} heads ({nkv} KV) of {kl}"),
          f"info: architecture {fields['architecture']!r} vs the keys {nl} {ne} {nh} {nkv} {kl}")
    check(fields.get("context", "").startswith(f"{key('qwen3.context_length')} positions"),
          f"info: context {fields.get('context')!r}")
    ntok = re.search(r"\[STRING x (\d+)\]", key("tokenizer.ggml.tokens") or "")
    check(ntok and fields.get("vocab", "").startswith(f"{ntok.group(1)} tokens, gpt2"), f"info: vocab {fields.get('vocab')!r}")
    # K and V rows of key_length f16 values per KV head, layer and position
    kv = int(nl) * 2 * int(nkv) * int(kl) * 2
    check(f"f16 KV cache {kv} B per position" in fields.get("memory", ""), f"info: memory {fields.get('memory')!r}, want {kv} B")
check(fields.get("chat template", "").startswith("qwen3 "), f"info: chat template {fields.get('chat template')!r}")
check(fields.get("types", "").startswith("F32 "), f"info: types {fields.get('types')!r}")
size = os.path.getsize(model)
fs = re.match(re.escape(model) + r", ([\d.]+) KiB \(GGUF v3,", fields.get("file", ""))
check(fs and abs(float(fs.group(1)) * 1024 - size) < 0.01 * size, f"info: file {fields.get('file')!r} vs {size} bytes")

r = run("info", q8)
check(re.search(r"^types: Q8_0 \d+ tensors .*%\), F32 \d+ tensors", r.stdout, re.M) is not None,
      f"info on a q8_0 model: the type mix, largest first: {r.stdout[:400]!r}")
gm = fresh("gemma.gguf")
run("make-model", "--arch", "gemma3", gm)
r = run("info", gm)
check(re.search(r"^chat template: gemma ", r.stdout, re.M) and "architecture: gemma3," in r.stdout,
      f"info on gemma3: {r.stdout[:400]!r}")

# a forged block_count (2^31 - 1) is not looped over: the summary ends at once, without a KV size
with open(model, "rb") as f:
    raw = bytearray(f.read())
k = raw.find(b"qwen3.block_count") + len(b"qwen3.block_count") + 4  # past the key and its u32 type
raw[k:k + 4] = (0x7FFFFFFF).to_bytes(4, "little")
forged = fresh("forged.gguf")
with open(forged, "wb") as f:
    f.write(raw)
r = run("info", forged, timeout=20)
check(r.returncode == 0 and "2147483647 layers" in r.stdout and re.search(r"^memory: [^+]*$", r.stdout, re.M),
      f"info on a forged block_count: exit {r.returncode}: {r.stdout[-300:]!r}")

# ---- info without a file: the slot table behind --slots --------------------------
r = run("info")
check(r.returncode == 0 and re.search(r"^slots: \d+ \(", r.stdout, re.M) and "symbol" not in r.stdout,
      f"info: {r.stdout[-300:]!r}")
r = run("info", "--slots")
check(r.returncode == 0 and re.search(r"^slot\s+isa\s+tile\s+symbol$", r.stdout, re.M),
      f"info --slots: no slot table: {r.stdout[-300:]!r}")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("ok")
