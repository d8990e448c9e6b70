"""`fucina run --lora`, `--lora-scaled` and `fucina export-lora`, end to end.

usage: check_cli_lora.py FUCINA WORKDIR

On a tiny model written by `fucina make-model` and a LoRA adapter written
here (llama.cpp's GGUF adapter format, random f32 A and B):
- greedy `fucina run --lora A` prints the same text as `fucina run` on the
  model `fucina export-lora --outtype f32` merged, and --lora-scaled A 0.5
  likewise; the adapter changes the text (or nothing would be tested);
- `fucina serve --lora A` answers a greedy completion with the text the
  server on the merged model gives (when the build has the server);
- misuse exits 2 naming the flag or file and the reason: --lora without a
  file, --lora-scaled with a bad scale, an adapter that does not exist, a
  model file given as an adapter, export-lora onto its own input.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import urllib.request

FUCINA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
MODEL = os.path.join(WORK, "lora-tiny.gguf")
ADAPTER = os.path.join(WORK, "lora-a.gguf")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    """stdout as bytes (a random model's text need not be UTF-8), stderr as text"""
    r = subprocess.run([FUCINA, *args], capture_output=True, timeout=300, input=b"")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_adapter(path, kv, tensors):
    """A GGUF v3 file: kv is [(key, 'str'|'f32', value)], tensors [(name, ne, floats)] as F32."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, t, v in kv:
        head += gguf_str(k) + (struct.pack("<I", 8) + gguf_str(v) if t == "str" else struct.pack("<If", 6, v))
    data, infos = b"", b""
    for name, ne, vals in tensors:
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", 0, len(data))  # F32, offset
        data += struct.pack(f"<{len(vals)}f", *vals)
        data += b"\0" * (-len(data) % 32)
    head += infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


r = run("make-model", MODEL, "--seed", "7", "--untied")
if r.returncode != 0:
    sys.exit("make-model failed: " + r.stderr)

# the tiny preset: embd 64, q 4 x 32, kv 2 x 32, ff 128 (GGUF ne [n_in, n_out])
SHAPES = {"blk.0.attn_q.weight": (64, 128), "blk.1.attn_v.weight": (64, 64), "blk.0.ffn_down.weight": (128, 64)}
rng = random.Random(5)
RANK = 4
tensors = []
for name, (n_in, n_out) in SHAPES.items():
    a = [rng.uniform(-1, 1) * (3 / n_in) ** 0.5 for _ in range(n_in * RANK)]
    b = [rng.uniform(-1, 1) * 0.5 * (3 / RANK) ** 0.5 for _ in range(RANK * n_out)]
    tensors += [(name + ".lora_a", (n_in, RANK), a), (name + ".lora_b", (RANK, n_out), b)]
KV = [("general.architecture", "str", "qwen3"), ("general.type", "str", "adapter"), ("adapter.type", "str", "lora"),
      ("adapter.lora.alpha", "f32", 8.0)]
write_adapter(ADAPTER, KV, tensors)

PROMPT = "The quick brown fox"
GEN = ["-p", PROMPT, "-n", "12", "--threads", "1"]
plain = run("run", MODEL, *GEN)
check(plain.returncode == 0, f"run: exit {plain.returncode}: {plain.stderr.strip()!r}")
for flags, tag in ((["--lora", ADAPTER], "1"), (["--lora-scaled", ADAPTER, "0.5"], "0.5")):
    adapted = run("run", MODEL, *GEN, *flags)
    check(adapted.returncode == 0, f"run {flags}: exit {adapted.returncode}: {adapted.stderr.strip()!r}")
    check(adapted.stdout != plain.stdout, f"run {flags}: the adapter changed nothing: {adapted.stdout!r}")
    merged = os.path.join(WORK, f"merged-{tag}.gguf")
    r = run("export-lora", "-m", MODEL, *flags, "-o", merged, "--outtype", "f32")
    check(r.returncode == 0, f"export-lora {flags}: exit {r.returncode}: {r.stderr.strip()!r}")
    m = run("run", merged, *GEN)
    check(m.returncode == 0 and m.stdout == adapted.stdout,
          f"run on the merged model {tag}: {m.stdout!r} != run --lora: {adapted.stdout!r}")



def serve_completion(model, *flags):
    """Start `fucina serve` on a free port, ask for a greedy completion, stop it; the text."""
    p = subprocess.Popen([FUCINA, "serve", model, "--port", "0", "-np", "1", "--threads", "1", "--no-webui", *flags],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in p.stderr:
            m = re.search(r"listening on http://[^\s]*:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            return None
        body = json.dumps({"prompt": PROMPT, "max_tokens": 12, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)["choices"][0]["text"]
    finally:
        p.terminate()
        p.wait(timeout=30)


HAVE_SERVE = "this build has no server" not in run("serve", "--help").stdout.decode()
if HAVE_SERVE:
    lora_text = serve_completion(MODEL, "--lora-scaled", ADAPTER, "0.5")
    merged_text = serve_completion(os.path.join(WORK, "merged-0.5.gguf"))
    plain_text = serve_completion(MODEL)
    check(lora_text is not None and lora_text == merged_text,
          f"serve --lora-scaled: {lora_text!r} != serve on the merged model: {merged_text!r}")
    check(lora_text != plain_text, f"serve --lora-scaled: the adapter changed nothing: {lora_text!r}")

# misuse: exit 2, the flag or file and the reason named
NOT_THERE = os.path.join(WORK, "missing.gguf")
for args, want in ((["run", MODEL, "-p", "x", "--lora"], "--lora needs a FILE"),
                   (["run", MODEL, "-p", "x", "--lora-scaled", ADAPTER], "--lora-scaled needs a FILE and a SCALE"),
                   (["run", MODEL, "-p", "x", "--lora-scaled", ADAPTER, "big"], "the scale 'big' is not a number"),
                   (["run", MODEL, "-p", "x", "--lora", NOT_THERE], NOT_THERE),
                   (["run", MODEL, "-p", "x", "--lora", MODEL], "not an adapter"),
                   (["chat", MODEL, "--lora", MODEL], "not an adapter"),
                   (["serve", MODEL, "--lora-scaled", ADAPTER, "x"], "the scale 'x' is not a number"),
                   (["export-lora", "-m", MODEL, "--lora", ADAPTER, "-o", MODEL], "the output is the base model itself"),
                   (["export-lora", "-m", MODEL, "-o", os.path.join(WORK, "x.gguf")], "no adapter"),
                   (["export-lora", "-m", MODEL, "--lora", ADAPTER, "-o", os.path.join(WORK, "x.gguf"), "--outtype",
                     "q9"], "--outtype 'q9'")):
    if args[0] == "serve" and not HAVE_SERVE:
        continue
    r = run(*args)
    check(r.returncode == 2, f"{args}: exit {r.returncode}, expected 2 ({r.stderr.strip()!r})")
    check(want in r.stderr, f"{args}: stderr does not say {want!r}: {r.stderr.strip()!r}")
check(not os.path.exists(os.path.join(WORK, "x.gguf")), "a refused export-lora wrote its output")

print(f"cli_lora: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
