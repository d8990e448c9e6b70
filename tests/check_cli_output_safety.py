"""What `fucina` commands write, and where, under misuse (a red-team list).

usage: check_cli_output_safety.py FUCINA WORKDIR

- `run --logits-out` onto the model being run (by its name or a symlink,
  with --mmap or without) is refused, exit 2, and the model is unchanged; a
  logits file in a missing directory names the path and strerror.
- quantize / make-model onto a destination that exists and is not a regular
  file (a FIFO, a directory, /dev/null) is refused up front, exit 2, naming it
  and its kind; the destination is left as it was. So are run --logits-out,
  train-tokenizer -o, export-lora -o and run --prompt-cache (read too: a FIFO
  blocked its read); export-lora's FIFO inputs are refused without blocking.
- SIGINT or SIGTERM during make-model --preset 0.6b (a 2.4 GB file), or during
  quantize of a 160 MB model once its temporary exists, leaves no *.tmp.PID.N
  behind and the process dies by the signal (or exits non-zero), with no
  output file.
- stdout on /dev/full: tokenize, run, info, bench -o json and --version
  exit 1 saying the output was not written (they exited 0).
- make-model --seed / --n-vocab parse strictly ('abc' was seed 0, '12abc'
  seed 12): exit 2 naming the flag and the value; a number out of range
  (-n 99999999999) names the real bound, not ">= 0".
- a NUL byte: run -f keeps the whole file; chat refuses a line holding one.
- chat: "choose one with --chat-template" only for a template no family renders (with the file
  named), not for a model that cannot be read (a missing file, a FIFO).
- quantize of a quantized model: refused without --allow-requantize.
- demo spirals: a value out of range (--steps 0, --lr nan) names the option,
  the value and the range (it exited 2 without a word).
"""
import os
import re
import subprocess
import sys

FUCINA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
MODEL = os.path.join(WORK, "safety-tiny.gguf")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(cmd, *args, timeout=300, **kw):
    return subprocess.run([FUCINA, cmd, *args], capture_output=True, text=True, timeout=timeout, **kw)


r = run("make-model", MODEL, "--seed", "7")
if r.returncode != 0:
    sys.exit("make-model failed: " + r.stderr)
with open(MODEL, "rb") as f:
    model_bytes = f.read()

# 1. --logits-out onto the model
link = os.path.join(WORK, "safety-link.gguf")
if os.path.lexists(link):
    os.unlink(link)
os.symlink(os.path.basename(MODEL), link)
for target in (MODEL, link):
    for mode in ([], ["--mmap"]):
        r = run("run", MODEL, "-p", "hi", "-n", "2", "--threads", "1", "--logits-out", target, *mode)
        check(r.returncode == 2 and "model file itself" in r.stderr,
              f"run --logits-out {target} {mode}: exit {r.returncode}: {r.stderr.strip()!r}")
        with open(MODEL, "rb") as f:
            check(f.read() == model_bytes, f"run --logits-out {target} {mode}: the model changed")
bad = os.path.join(WORK, "no-such-dir", "logits.bin")
r = run("run", MODEL, "-p", "hi", "-n", "2", "--threads", "1", "--logits-out", bad)
check(r.returncode == 1 and bad in r.stderr and "No such file or directory" in r.stderr,
      f"run --logits-out in a missing directory: exit {r.returncode}: {r.stderr.strip()!r}")
good = os.path.join(WORK, "logits.bin")
r = run("run", MODEL, "-p", "hi", "-n", "2", "--threads", "1", "--logits-out", good)
check(r.returncode == 0 and os.path.getsize(good) > 0 and os.path.getsize(good) % 4 == 0,
      f"run --logits-out {good}: exit {r.returncode}: {r.stderr.strip()!r}")
check(not [n for n in os.listdir(WORK) if ".tmp." in n], f"temporaries left: {os.listdir(WORK)}")

# 2. a destination that is not a regular file
import stat
fifo = os.path.join(WORK, "safety-fifo")
if not os.path.exists(fifo):
    os.mkfifo(fifo)
dird = os.path.join(WORK, "safety-dir")
os.makedirs(dird, exist_ok=True)
for dest, kind in ((fifo, "a FIFO"), (dird, "a directory"), ("/dev/null", "a character device")):
    for cmd in (["quantize", MODEL, dest, "Q8_0"], ["make-model", dest]):
        r = run(*cmd)
        check(r.returncode == 2 and dest in r.stderr and kind in r.stderr, f"{cmd}: exit {r.returncode}: {r.stderr.strip()!r}")
# the other writers check their destination before their work (run evaluated the prompt,
# train-tokenizer trained, export-lora merged, then the rename was refused: exit 1)
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime", "data", "bpe_corpus.txt")
for dest, kind in ((fifo, "a FIFO"), (dird, "a directory"), ("/dev/null", "a character device")):
    for cmd in (["run", MODEL, "-p", "hi", "-n", "2", "--logits-out", dest],
                ["train-tokenizer", "-o", dest, "--vocab-size", "300", CORPUS],
                ["export-lora", "-m", MODEL, "--lora", MODEL, "-o", dest]):
        r = run(*cmd)
        check(r.returncode == 2 and dest in r.stderr and kind in r.stderr and r.stdout == "",
              f"{cmd}: exit {r.returncode}: {r.stderr.strip()!r}")
    # a prompt cache is read, then written: neither can be a FIFO (its read blocked for ever) or device
    for ro in ([], ["--prompt-cache-ro"]):
        r = run("run", MODEL, "-p", "hi", "-n", "2", "--prompt-cache", dest, *ro, timeout=30)
        check(r.returncode == 2 and dest in r.stderr and kind in r.stderr,
              f"run --prompt-cache {dest} {ro}: exit {r.returncode}: {r.stderr.strip()!r}")
# export-lora's inputs: a FIFO was opened to see if it could be read, and blocked
for args in (["-m", fifo, "--lora", MODEL], ["-m", MODEL, "--lora", fifo]):
    r = run("export-lora", *args, "-o", os.path.join(WORK, "safety-merged.gguf"), timeout=30)
    check(r.returncode == 2 and fifo in r.stderr and "a FIFO" in r.stderr,
          f"export-lora {args}: exit {r.returncode}: {r.stderr.strip()!r}")
check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced")
check(stat.S_ISDIR(os.stat(dird).st_mode), "the directory was replaced")
check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced")
check(not [n for n in os.listdir(WORK) if ".tmp." in n], f"temporaries left: {os.listdir(WORK)}")

# 3. a signal mid-write removes the temporary
import signal
import time
for sig in (signal.SIGINT, signal.SIGTERM):
    out = os.path.join(WORK, f"safety-big-{sig.name}.gguf")
    p = subprocess.Popen([FUCINA, "make-model", out, "--preset", "0.6b"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    p.send_signal(sig)
    rc = p.wait(timeout=300)
    left = [n for n in os.listdir(WORK) if n.startswith(os.path.basename(out))]
    check(rc != 0, f"make-model killed by {sig.name}: exit {rc}")
    check(not left, f"make-model killed by {sig.name}: left {left}")
    for n in left:
        os.unlink(os.path.join(WORK, n))
# quantize too, signalled once its temporary exists (a 160 MB input: Q4_K_M on one thread takes
# seconds, so the signal lands mid-write)
big_in = os.path.join(WORK, "safety-160mb.gguf")
if not os.path.exists(big_in):
    r = run("make-model", big_in, "--preset", "small", "--n-vocab", "151936")
    check(r.returncode == 0, f"make-model {big_in}: {r.stderr.strip()!r}")
for sig in (signal.SIGINT, signal.SIGTERM):
    out = os.path.join(WORK, f"safety-q-{sig.name}.gguf")
    p = subprocess.Popen([FUCINA, "quantize", big_in, out, "Q4_K_M", "--threads", "1"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    seen = False
    for _ in range(600):  # up to 30 s for the temporary to appear
        if [n for n in os.listdir(WORK) if n.startswith(os.path.basename(out) + ".tmp.")]:
            seen = True
            break
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.send_signal(sig)
    rc = p.wait(timeout=300)
    left = [n for n in os.listdir(WORK) if n.startswith(os.path.basename(out))]
    check(seen and rc != 0, f"quantize killed by {sig.name}: temporary seen {seen}, exit {rc}")
    check(not left, f"quantize killed by {sig.name}: left {left}")
    for n in left:
        os.unlink(os.path.join(WORK, n))

# 4. a stdout that cannot be written
if os.path.exists("/dev/full"):
    for cmd in (["tokenize", MODEL, "-p", "hello"], ["run", MODEL, "-p", "hi", "-n", "2", "--threads", "1"],
                ["info"], ["bench", MODEL, "-o", "json", "-p", "8", "-n", "4", "-r", "1"], ["--version"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([FUCINA, *cmd], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
        check(r.returncode == 1 and "No space left on device" in r.stderr,
              f"{cmd} > /dev/full: exit {r.returncode}: {r.stderr.strip()!r}")
        r = subprocess.run([FUCINA, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        check(r.returncode == 0, f"{cmd} > /dev/null: exit {r.returncode}: {r.stderr.strip()!r}")

# 5. strict numbers, real bounds
seeded = os.path.join(WORK, "safety-seed.gguf")
if os.path.exists(seeded):
    os.unlink(seeded)  # an earlier run's
for flag, v in (("--seed", "abc"), ("--seed", "12abc"), ("--seed", "-1"), ("--seed", ""),
                ("--seed", "18446744073709551616"), ("--n-vocab", "12x"), ("--n-vocab", "")):
    r = run("make-model", seeded, flag, v)
    check(r.returncode == 2 and f"{flag} '{v}' is not an integer" in r.stderr,
          f"make-model {flag} {v!r}: exit {r.returncode}: {r.stderr.strip()!r}")
    check(not os.path.exists(seeded), f"make-model {flag} {v!r}: wrote a model")
r = run("make-model", seeded, "--seed", "12")
check(r.returncode == 0, f"make-model --seed 12: exit {r.returncode}: {r.stderr.strip()!r}")
for flag, v, bound in (("-n", "99999999999", "-1..1073741824"), ("--top-k", "99999999999", "0..1073741824"),
                       ("--ctx", "99999999999", "0..16777216")):
    r = run("run", MODEL, "-p", "hi", flag, v)
    check(r.returncode == 2 and f"{flag} '{v}' is not an integer in {bound}" in r.stderr,
          f"run {flag} {v}: exit {r.returncode}: {r.stderr.strip()[:200]!r}")

# demo: a value out of range is exit 2 with a message naming the option, the
# value and the range (it was a silent exit 2)
for flag, v, what in (("--steps", "0", "an integer >= 1"), ("--steps", "1.5", "an integer >= 1"),
                      ("--lr", "nan", "a finite number > 0"), ("--lr", "0", "a finite number > 0"),
                      ("--dropout", "1", "a number in [0, 1)"), ("--min-accuracy", "2", "a number in [0, 1]"),
                      ("--log", "0", "an integer >= 1")):
    r = run("demo", "spirals", flag, v)
    check(r.returncode == 2 and f"{flag} '{v}' must be {what}" in r.stderr,
          f"demo spirals {flag} {v}: exit {r.returncode}: {r.stderr.strip()!r}")

# a NUL byte in the prompt: run -f reads the whole file (it stopped at the
# NUL); chat refuses a line holding one instead of sending what precedes it
nul = os.path.join(WORK, "safety-nul.txt")
with open(nul, "wb") as f:
    f.write(b"ab\x00cd")
r = subprocess.run([FUCINA, "run", MODEL, "-f", nul, "-n", "0"], capture_output=True, timeout=300)
check(r.returncode == 0 and r.stdout.startswith(b"ab\x00cd"),
      f"run -f with a NUL: exit {r.returncode}, stdout {r.stdout[:20]!r}")
r = subprocess.run([FUCINA, "chat", MODEL, "-n", "2"], input=b"hi\x00there\n", capture_output=True, timeout=300)
check(r.returncode == 0 and b"NUL byte: not sent" in r.stderr,
      f"chat with a NUL in a line: exit {r.returncode}, stderr {r.stderr[-200:]!r}")

# chat: the --chat-template hint only for a template no family renders, not for a model
# that cannot be read (a missing file, a FIFO: "not a regular file (choose one with ...)")
with open(MODEL, "rb") as f:
    odd = f.read()
for s in (b"<|im_start|>", b"<|im_end|>", b"<think>", b"</think>", b"tool_call", b"tool_response"):
    odd = odd.replace(s, b"#" * len(s))  # same lengths: the file stays valid, its template is no family's
odd_path = os.path.join(WORK, "safety-odd-template.gguf")
with open(odd_path, "wb") as f:
    f.write(odd)
for p, hint in ((os.path.join(WORK, "safety-missing.gguf"), False), (fifo, False), (odd_path, True)):
    r = run("chat", p, "-n", "2", input="hi\n", timeout=30)
    check(r.returncode == 2 and p in r.stderr and ("--chat-template" in r.stderr) == hint,
          f"chat {p}: exit {r.returncode}, hint expected {hint}: {r.stderr.strip()[-200:]!r}")

# quantize a quantized model: refused (exit 2, naming a tensor and the flag)
# unless --allow-requantize, as llama-quantize does
q8 = os.path.join(WORK, "safety-q8.gguf")
q4 = os.path.join(WORK, "safety-q4.gguf")
for f in (q8, q4):
    if os.path.exists(f):
        os.unlink(f)
r = run("quantize", MODEL, q8, "Q8_0", "--quiet")
check(r.returncode == 0, f"quantize to Q8_0: exit {r.returncode}: {r.stderr.strip()!r}")
r = run("quantize", q8, q4, "Q4_0", "--quiet")
check(r.returncode == 2 and "is already Q8_0" in r.stderr and "--allow-requantize" in r.stderr
      and not os.path.exists(q4), f"requantize without the flag: exit {r.returncode}: {r.stderr.strip()!r}")
r = run("quantize", q8, q4, "Q4_0", "--quiet", "--allow-requantize")
check(r.returncode == 0 and os.path.exists(q4), f"requantize with the flag: exit {r.returncode}: {r.stderr.strip()!r}")

# quantize --help: each type with its base's bits per weight (ggml's block
# sizes: Q4_K 144 bytes per 256 weights, Q6_K 210 per 256, Q8_0 34 per 32)
r = run("quantize", "--help")
for mix, bpw in (("Q4_K_M", "4.5"), ("Q6_K", "6.562"), ("Q8_0", "8.5"), ("F16", "16")):
    check(re.search(rf"\b{mix}\s+\S+\s+{re.escape(bpw)} bpw", r.stdout) is not None,
          f"quantize --help: no '{mix} ... {bpw} bpw' in {r.stdout[:400]!r}")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("ok")
