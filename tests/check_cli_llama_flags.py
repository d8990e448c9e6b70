# SPDX-License-Identifier: MIT
"""`fucina run` / `fucina chat` with llama-cli's flag names, end to end.

usage: check_cli_llama_flags.py FUCINA WORKDIR

On a tiny model from `fucina make-model` (greedy unless said):
- -m/--model is the positional model; -t, -c/--ctx-size, --n-predict and
  -ctk/--cache-type-k are the same as ours; -ctv is accepted equal to -ctk
  and refused (exit 2, the reason) otherwise;
- -s -1 prints the seed it drew on stderr, and -s with that seed prints the
  same text again;
- -n -1 runs to the end of the context: context - prompt + 1 tokens sampled
  (the last one is not evaluated);
- -f - reads the prompt from standard input, the same as -p;
- -r STR stops after STR (printed); --stop STR before it (not printed);
- --presence-penalty, --frequency-penalty, --repeat-penalty over
  --repeat-last-n tokens: the first token sampled is the argmax of the
  prompt's last logits (--logits-out) penalized as llama.cpp does, computed
  here from the prompt's token ids (--verbose-prompt); --repeat-last-n -1 is
  the context size;
- --no-display-prompt prints only the generated text; stdout ends with a newline;
- the perf report on stderr: prompt tokens = --verbose-prompt's count,
  generated = -n, total = their sum; tokens/s consistent with the times;
- chat: -sys / --system-prompt are --system (the system prompt is evaluated),
  -r ends the reply, --no-display-prompt drops the '> MESSAGE' echo, the
  perf report at the end;
- an unknown option is one line "unknown option 'X' (see --help)", exit 2,
  and the other misuses exit 2 naming the flag.
"""
import os
import re
import struct
import subprocess
import sys

FUCINA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, stdin=b"", expect=0):
    """stdout as bytes (a random model's text need not be UTF-8), stderr as text"""
    r = subprocess.run([FUCINA, *args], capture_output=True, timeout=120, input=stdin,
                       env={**os.environ, "FUCINA_NO_PROGRESS": "1"})
    r.stderr = r.stderr.decode("utf-8", "replace")
    if expect is not None:
        check(r.returncode == expect, f"{[a if isinstance(a, str) else repr(a) for a in args]}: exit {r.returncode}, "
              f"expected {expect}: {r.stderr[-400:]}")
    return r


MODEL = os.path.join(WORK, "llama-flags.gguf")
r = subprocess.run([FUCINA, "make-model", "--seed", "3", MODEL], capture_output=True, text=True, timeout=120)
if r.returncode != 0:
    sys.exit("make-model failed: " + r.stderr)

PROMPT = "Hello world"
PB = PROMPT.encode()
PERF = {
    "load": re.compile(r"^fucina (\w+):        load time = +([0-9.]+) ms$", re.M),
    "prompt": re.compile(r"^fucina (\w+): prompt eval time = +([0-9.]+) ms / +(\d+) tokens \( +([0-9.]+) ms per token, "
                         r"+([0-9.]+) tokens per second\)$", re.M),
    "eval": re.compile(r"^fucina (\w+):        eval time = +([0-9.]+) ms / +(\d+) tokens \( +([0-9.]+) ms per token, "
                       r"+([0-9.]+) tokens per second\)$", re.M),
    "total": re.compile(r"^fucina (\w+):       total time = +([0-9.]+) ms / +(\d+) tokens$", re.M),
}


def perf(stderr, what):
    """(prompt tokens, generated tokens) from the report, after checking its lines"""
    m = {k: v.search(stderr) for k, v in PERF.items()}
    check(all(m.values()), f"{what}: the perf report lacks {[k for k, v in m.items() if not v]}:\n{stderr}")
    if not all(m.values()):
        return None, None
    n_p, n_g, n_t = int(m["prompt"].group(3)), int(m["eval"].group(3)), int(m["total"].group(3))
    check(n_t == n_p + n_g, f"{what}: total {n_t} tokens != prompt {n_p} + generated {n_g}")
    for k in ("prompt", "eval"):
        ms, n, per, tps = (float(m[k].group(i)) for i in (2, 3, 4, 5))
        if n and ms > 0.05:  # a time printed to 0.01 ms: its ratios to a few percent only
            check(abs(per - ms / n) <= 0.01 + 0.02 * per, f"{what}: {k} {per} ms per token != {ms} / {n}")
            check(abs(tps - 1e3 * n / ms) <= 0.05 * tps + 1, f"{what}: {k} {tps} tokens/s != {n} / {ms} ms")
    check(float(m["total"].group(2)) + 0.02 >= float(m["load"].group(2)), f"{what}: total time below load time")
    return n_p, n_g


def prompt_ids(stderr):
    """--verbose-prompt's "%6d -> 'piece'" lines, after its count line"""
    m = re.search(r"number of tokens in prompt = (\d+)\n", stderr)
    check(m is not None, f"--verbose-prompt: no count line:\n{stderr}")
    ids = [int(x) for x in re.findall(r"^ *(\d+) -> '", stderr, re.M)]
    if m:
        check(len(ids) == int(m.group(1)), f"--verbose-prompt: {len(ids)} token lines, count {m.group(1)}")
    return ids


# ---- run: the names, the report, the newline -----------------------------------------------
base = run("run", MODEL, "-p", PROMPT, "-n", "12", "--verbose-prompt")
ids = prompt_ids(base.stderr)
n_p, n_g = perf(base.stderr, "run -n 12")
check(n_p == len(ids) and n_g == 12, f"run -n 12: report counts prompt {n_p}, generated {n_g}; expected {len(ids)}, 12")
check(base.stdout.startswith(PB) and base.stdout.endswith(b"\n"), f"run: prompt, text, newline: {base.stdout!r}")
GEN = base.stdout[len(PB):-1]
for args in (["-m", MODEL], ["--model", MODEL]):
    r = run("run", *args, "-p", PROMPT, "-n", "12")
    check(r.stdout == base.stdout, f"run {args[0]} MODEL prints what run MODEL does: {r.stdout!r}")
for alias in (["--n-predict", "12", "-t", "1", "-c", "64"], ["-n", "12", "--threads", "1", "--ctx-size", "64"],
              ["-n", "12", "-ctk", "f32", "-ctv", "f32"], ["-n", "12", "--cache-type-k", "q8_0",
                                                          "--cache-type-v", "q8_0"]):
    r = run("run", MODEL, "-p", PROMPT, *alias)
    check(r.returncode == 0 and r.stdout.startswith(PB), f"run {alias}: {r.stdout!r}")
# -fa on|off|auto: accepted, and the text is the same (one attention implementation)
for v in ("on", "off", "auto"):
    for flag in ("-fa", "--flash-attn"):
        r = run("run", MODEL, "-p", PROMPT, "-n", "12", flag, v)
        check(r.returncode == 0 and r.stdout == base.stdout, f"run {flag} {v}: {r.stdout!r}")
r = run("run", MODEL, "-p", PROMPT, "-n", "12", "--no-display-prompt")
check(r.stdout == GEN + b"\n", f"--no-display-prompt prints only the generated text: {r.stdout!r} vs {GEN!r}")
r = run("run", MODEL, "-f", "-", "-n", "12", stdin=PB)
check(r.stdout == base.stdout, f"-f - (stdin) prints what -p does: {r.stdout!r}")
r = run("run", MODEL, "--file", "-", "-n", "12", stdin=PB)
check(r.stdout == base.stdout, f"--file - prints what -p does: {r.stdout!r}")

# -n -1: to the end of the context (the tiny model's greedy text has no end token here)
r = run("run", MODEL, "-p", PROMPT, "-n", "-1", "-c", "24")
n_p, n_g = perf(r.stderr, "run -n -1 -c 24")
if n_p is not None:
    check(n_g == 24 - n_p + 1, f"-n -1 -c 24: {n_g} tokens generated from a {n_p}-token prompt, expected {24 - n_p + 1}")
check(r.stdout.endswith(b"\n"), "-n -1: a final newline")

# -s -1: a random seed, printed, and reproducible
SAMPLE = ["--temp", "3", "--top-k", "0", "--top-p", "1", "--min-p", "0", "-n", "24"]
r = run("run", MODEL, "-p", PROMPT, *SAMPLE, "-s", "-1")
m = re.search(r"seed (\d+) \(random; -s (\d+) repeats this run\)", r.stderr)
check(m is not None and m.group(1) == m.group(2), f"-s -1 prints the seed: {r.stderr!r}")
if m:
    again = run("run", MODEL, "-p", PROMPT, *SAMPLE, "-s", m.group(1))
    check(again.stdout == r.stdout, f"-s {m.group(1)} repeats the -s -1 run: {again.stdout!r} vs {r.stdout!r}")
    check("random" not in again.stderr, "a given seed is not announced as random")
r1 = run("run", MODEL, "-p", PROMPT, *SAMPLE, "-s", "1")
r2 = run("run", MODEL, "-p", PROMPT, *SAMPLE, "--seed", "2")
check(r1.stdout != r2.stdout, "seeds 1 and 2 sample different texts at temperature 3 (else the seed test is void)")

# -r: stops after the string (printed), --stop before it (not printed)
pen = run("run", MODEL, "-p", PROMPT, "-n", "24", "--frequency-penalty", "5")
text = pen.stdout[len(PB):-1]
at = next((i for i in range(len(text) // 2, len(text) - 2) if all(33 <= c < 127 for c in text[i:i + 2])), None)
check(at is not None, f"the penalized text has two printable bytes after its middle: {text!r}")
if at is not None:
    s = text[at:at + 2]
    cut = text.find(s)
    r = run("run", MODEL, "-p", PROMPT, "-n", "24", "--frequency-penalty", "5", "-r", s.decode())
    check(r.stdout == PB + text[:cut + 2] + b"\n", f"-r {s!r}: {r.stdout!r}, expected to stop after it in {text!r}")
    n_p, n_g = perf(r.stderr, "run -r")
    check(n_g is not None and n_g < 24, f"-r stopped generating early: {n_g} tokens")
    r = run("run", MODEL, "-p", PROMPT, "-n", "24", "--frequency-penalty", "5", "--reverse-prompt", "zzz",
            "--stop", s.decode())
    check(r.stdout == PB + text[:cut] + b"\n", f"--stop {s!r}: {r.stdout!r}, expected to stop before it in {text!r}")

# ---- the penalties against an independent computation -------------------------------------
f32 = struct.Struct("<f")


def to_f32(x):
    return f32.unpack(f32.pack(x))[0]


def penalized_argmax(logits, history, last_n, repeat, freq, present):
    """llama.cpp's penalties stage over the last last_n ids of history, then the argmax (first maximum)"""
    window = history[-last_n:] if last_n > 0 else []
    count = {}
    for t in window:
        count[t] = count.get(t, 0) + 1
    best, best_v = -1, None
    for i, v in enumerate(logits):
        c = count.get(i, 0)
        if c:
            v = to_f32(v / repeat) if v > 0 else to_f32(v * repeat)
            v = to_f32(v - to_f32(to_f32(c * freq) + present))
        if best_v is None or v > best_v:
            best, best_v = i, v
    return best


# "The The The": three tokens, "The" then " The" twice; greedy continues with "The", which
# the history holds once, as the first token
prompt_bytes = b"The The The"
PF = os.path.join(WORK, "penalty-prompt.txt")
with open(PF, "wb") as fh:
    fh.write(prompt_bytes)
LOGITS = os.path.join(WORK, "penalty-logits.f32")
cases = [  # (flags, last_n, repeat, freq, present, the penalty must change the argmax)
    (["--presence-penalty", "4"], 64, 1.0, 0.0, 4.0, True),
    (["--frequency-penalty", "6"], 64, 1.0, 6.0, 0.0, True),
    (["--frequency-penalty", "0.5", "--presence-penalty", "2"], 64, 1.0, 0.5, 2.0, True),
    (["--repeat-penalty", "3"], 64, 3.0, 0.0, 0.0, False),
    (["--repeat-penalty", "50"], 64, 50.0, 0.0, 0.0, True),
    (["--repeat-last-n", "2", "--presence-penalty", "9"], 2, 1.0, 0.0, 9.0, False),  # "The" is out of the window
    (["--repeat-last-n", "3", "--presence-penalty", "9"], 3, 1.0, 0.0, 9.0, True),
    (["--repeat-last-n", "0", "--presence-penalty", "9"], 0, 1.0, 0.0, 9.0, False),
]
for extra, last_n, rep, fr, pr, must_change in cases:
    r = run("run", MODEL, "-f", PF, "-n", "1", "--verbose-prompt", "--logits-out", LOGITS, *extra)
    hist = prompt_ids(r.stderr)
    raw = open(LOGITS, "rb").read()
    n_vocab = len(raw) // 4 // max(1, len(hist))
    last = list(struct.unpack(f"<{n_vocab}f", raw[(len(hist) - 1) * n_vocab * 4:len(hist) * n_vocab * 4]))
    want = penalized_argmax(last, hist, last_n, rep, fr, pr)
    plain = penalized_argmax(last, hist, 0, 1.0, 0.0, 0.0)
    if must_change:
        check(want != plain, f"{extra}: the penalty changes the argmax ({plain}), else this case tests nothing")
    got = r.stdout[len(prompt_bytes):-1]
    tok_file = os.path.join(WORK, "penalty-token.txt")
    with open(tok_file, "wb") as fh:
        fh.write(got)
    t = subprocess.run([FUCINA, "tokenize", MODEL, "-f", tok_file, "--ids", "--no-bos"], capture_output=True,
                       text=True, timeout=60)
    check(t.stdout.strip() == f"[{want}]", f"{extra}: sampled {got!r} = {t.stdout.strip()}, computed [{want}]")
# --repeat-last-n -1 is the context size
a = run("run", MODEL, "-p", PROMPT, "-n", "16", "-c", "40", "--repeat-last-n", "-1", "--frequency-penalty", "5")
b = run("run", MODEL, "-p", PROMPT, "-n", "16", "-c", "40", "--repeat-last-n", "40", "--frequency-penalty", "5")
c = run("run", MODEL, "-p", PROMPT, "-n", "16", "-c", "40", "--repeat-last-n", "0", "--frequency-penalty", "5")
check(a.stdout == b.stdout, "--repeat-last-n -1 is --repeat-last-n <context size>")
check(a.stdout != c.stdout, "--repeat-last-n -1 penalizes (it is not 0, off)")

# ---- chat -----------------------------------------------------------------------------------
MSG = b"hello there\n"
plain = run("chat", MODEL, "-n", "8", stdin=MSG)
sys_a = run("chat", MODEL, "-n", "8", "--system", "Be brief.", stdin=MSG)
for flag in ("-sys", "--system-prompt"):
    r = run("chat", MODEL, "-n", "8", flag, "Be brief.", stdin=MSG)
    check(r.stdout == sys_a.stdout, f"chat {flag} is --system: {r.stdout!r} vs {sys_a.stdout!r}")
p0, _ = perf(plain.stderr, "chat")
p1, _ = perf(sys_a.stderr, "chat --system")
check(p0 is not None and p1 is not None and p1 > p0, f"the system prompt is evaluated: {p0} vs {p1} prompt tokens")
r = run("chat", "-m", MODEL, "-n", "8", stdin=MSG)
check(r.stdout == plain.stdout, "chat -m MODEL is chat MODEL")
r = run("chat", MODEL, "-n", "8", "--no-display-prompt", stdin=MSG)
check(r.stdout == plain.stdout[len(b"> ") + len(MSG):], f"chat --no-display-prompt: no echo: {r.stdout!r}")
pen = run("chat", MODEL, "-n", "30", "--frequency-penalty", "5", "--no-display-prompt", stdin=MSG)
reply = pen.stdout[:-1]
at = next((i for i in range(len(reply) // 2, len(reply) - 2) if all(33 <= c < 127 for c in reply[i:i + 2])), None)
check(at is not None, f"the penalized reply has two printable bytes after its middle: {reply!r}")
if at is not None:
    s = reply[at:at + 2]
    r = run("chat", MODEL, "-n", "30", "--frequency-penalty", "5", "--no-display-prompt", "-r", s.decode(), stdin=MSG)
    check(r.stdout == reply[:reply.find(s)] + b"\n", f"chat -r {s!r} ends the reply there: {r.stdout!r} in {reply!r}")
r = run("chat", MODEL, "-n", "-1", "-c", "48", "--no-display-prompt", stdin=MSG)
n_p, n_g = perf(r.stderr, "chat -n -1")
check(n_g is not None and n_p + n_g <= 49, f"chat -n -1 -c 48: {n_p} + {n_g} tokens")

# ---- misuse: exit 2 and a short message ------------------------------------------------------
PROMPT_ARG = {"run": ["-p", "hi"], "chat": []}  # chat reads its messages from stdin
for cmd in ("run", "chat"):
    r = run(cmd, MODEL, *PROMPT_ARG[cmd], "--bogus", expect=2)
    check(r.stderr == f"fucina {cmd}: unknown option '--bogus' (see --help)\n", f"{cmd} --bogus: {r.stderr!r}")
    check(r.stdout == b"", f"{cmd} --bogus prints nothing on stdout")
for args, want in ((["-ctk", "f16", "-ctv", "q8_0"], "K and V share one cache type"),
                   (["-ctv", "f32"], "-ctv f32 differs from -ctk f16"),
                   (["-m", MODEL], "one model only"),
                   (["-s", "-2"], "-s '-2'"), (["--seed", "x"], "--seed 'x'"),
                   (["--repeat-last-n", "-2"], "--repeat-last-n '-2'"),
                   (["--presence-penalty", "nan"], "--presence-penalty 'nan'"),
                   (["--frequency-penalty", "1e9"], "--frequency-penalty '1e9'"),
                   (["-n", "-2"], "-n '-2'"), (["-c", "x"], "-c 'x'"), (["-t", "0"], "-t '0'"),
                   (["-fa", "1"], "-fa '1' is not one of on, off, auto")):
    for cmd in ("run", "chat"):
        r = run(cmd, MODEL, *PROMPT_ARG[cmd], *args, expect=2)
        check(want in r.stderr and len(r.stderr.splitlines()) == 1, f"{cmd} {args}: stderr {r.stderr!r}")
for flag in ("-sys", "--system-prompt", "--chat-template"):
    r = run("run", MODEL, "-p", "hi", flag, "x", expect=2)
    check("no chat template" in r.stderr and "fucina chat" in r.stderr, f"run {flag}: {r.stderr!r}")
r = run("run", "-m", MODEL, "-m", MODEL, "-p", "hi", expect=2)
check("one model only" in r.stderr, f"run -m twice: {r.stderr!r}")
r = run("run", MODEL, "-p", "hi", "-r", expect=2)
check("-r needs a value" in r.stderr, f"run -r without a value: {r.stderr!r}")
for cmd in ("run", "chat"):
    r = run(cmd, "--help")
    h = r.stdout.decode()
    for flag in ("-m, --model", "-s, --seed", "-c, --ctx-size", "--presence-penalty", "--frequency-penalty",
                 "--repeat-last-n", "-ctv", "--reverse-prompt", "--no-display-prompt", "--flash-attn"):
        check(flag in h, f"{cmd} --help lacks {flag}")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("ok")
