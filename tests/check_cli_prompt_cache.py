"""`fucina run --prompt-cache FILE [--prompt-cache-ro | --prompt-cache-all]`, end to end.

usage: check_cli_prompt_cache.py FUCINA WORKDIR

On tiny models written by `fucina make-model` (greedy generation):
- the first run says the cache does not exist yet and writes it; a second run of the same prompt
  reuses all but its last token (evaluated again for its logits, as llama-cli) and prints the same
  text; a longer prompt sharing a prefix reuses exactly the common tokens (`fucina tokenize --ids`)
  and prints what a run without the cache prints; a prompt sharing nothing reuses 0;
- --prompt-cache-ro reads the file and never writes it (its bytes unchanged);
- a file that is not valid for the run is refused with exit 1 naming the file and the reason: not a
  state file, truncated, another model of the same shape, another -ctk;
- misuse exits 2: no value, --prompt-cache-ro alone, with --logits-out, the model file as the
  cache, two caches, a cache that is not a regular file (a directory; before the model loads).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK = sys.argv[1], sys.argv[2]
failures, check, _, w, _ = cli_check.helpers(FUCINA, WORK, 300)


def run(*args):
    r = subprocess.run([FUCINA, *args], capture_output=True, timeout=300,
                       env={**os.environ, "FUCINA_NO_PROGRESS": "1"})
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


M, OTHER = w("pc.gguf"), w("pc-other.gguf")
for args in (["make-model", "--seed", "2", "--untied", M], ["make-model", "--seed", "3", "--untied", OTHER]):
    r = run(*args)
    assert r.returncode == 0, (args, r.stderr)


def ids(text):
    r = run("tokenize", M, "-p", text, "--ids", "--no-escape")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


P1 = "Hello world, the model is a tensor. 12 + 3 ="
P2 = P1 + " 15 and the next one"
P3 = "Something else entirely"
CACHE = w("prompt.cache")
if os.path.exists(CACHE):
    os.remove(CACHE)


def gen(prompt, *extra):
    return run("run", M, "-p", prompt, "-n", "12", *extra)


plain1, plain2 = gen(P1), gen(P2)
r1 = gen(P1, "--prompt-cache", CACHE)
check(r1.returncode == 0 and "does not exist yet" in r1.stderr and os.path.exists(CACHE),
      f"first run writes the cache: {r1.stderr[-300:]}")
check(r1.stdout == plain1.stdout, "the first run prints what a run without the cache prints")
n1 = len(ids(P1))
r2 = gen(P1, "--prompt-cache", CACHE)
check(r2.returncode == 0 and f"reused {n1 - 1} of {n1} prompt tokens" in r2.stderr,
      f"second run reuses all but the last token: {r2.stderr[-300:]}")
check(r2.stdout == r1.stdout, "the second run prints the same text")
# the perf report counts the tokens evaluated: 1 of them here (llama-cli's count), all of them at first
check(f"/ {n1:5d} tokens" in r1.stderr.split("prompt eval time", 1)[-1].split("\n", 1)[0],
      f"first run's report counts {n1} prompt tokens: {r1.stderr[-400:]}")
check("/     1 tokens" in r2.stderr.split("prompt eval time", 1)[-1].split("\n", 1)[0],
      f"second run's report counts the 1 token evaluated: {r2.stderr[-400:]}")
t1, t2 = ids(P1), ids(P2)
common = 0
while common < min(len(t1), len(t2)) and t1[common] == t2[common]:
    common += 1
r3 = gen(P2, "--prompt-cache", CACHE)
check(r3.returncode == 0 and f"reused {common} of {len(t2)} prompt tokens" in r3.stderr,
      f"a longer prompt reuses the {common} common tokens: {r3.stderr[-300:]}")
check(r3.stdout == plain2.stdout, "a longer prompt prints what a run without the cache prints")
# the cache now holds P2; read-only runs leave it as it is
before = open(CACHE, "rb").read()
r4 = gen(P3, "--prompt-cache", CACHE, "--prompt-cache-ro")
check(r4.returncode == 0 and f"reused 0 of {len(ids(P3))} prompt tokens" in r4.stderr,
      f"a prompt sharing nothing reuses 0: {r4.stderr[-300:]}")
r5 = gen(P2, "--prompt-cache", CACHE, "--prompt-cache-ro")
check(r5.returncode == 0 and f"reused {len(t2) - 1} of {len(t2)}" in r5.stderr and r5.stdout == plain2.stdout,
      f"--prompt-cache-ro reads the cache: {r5.stderr[-300:]}")
check(open(CACHE, "rb").read() == before, "--prompt-cache-ro never writes the file")
RO_NEW = w("never-written.cache")
r6 = gen(P1, "--prompt-cache", RO_NEW, "--prompt-cache-ro")
check(r6.returncode == 0 and not os.path.exists(RO_NEW), "--prompt-cache-ro with a new file writes nothing")


def refused(args, code, *needles):
    r = run("run", *args)
    ok = r.returncode == code and all(n in r.stderr for n in needles)
    check(ok, f"run {' '.join(args)}: exit {r.returncode}, expected {code} naming {needles}: {r.stderr.strip()[-300:]}")


# files not valid for the run: exit 1, the file and the reason named
NOT_STATE = w("not-state.cache")
with open(NOT_STATE, "wb") as f:
    f.write(b"hello, I am not a session state" * 4)
TRUNC = w("trunc.cache")
with open(TRUNC, "wb") as f:
    f.write(before[:len(before) // 2])
refused([M, "-p", P1, "--prompt-cache", NOT_STATE], 1, NOT_STATE, "not a Fucina session state file")
refused([M, "-p", P1, "--prompt-cache", TRUNC], 1, TRUNC, "truncated")
refused([OTHER, "-p", P1, "--prompt-cache", CACHE], 1, CACHE, "another model")
refused([M, "-p", P1, "--prompt-cache", CACHE, "-ctk", "q8_0"], 1, CACHE, "KV cache type f16 in the file, q8_0")
check(open(CACHE, "rb").read() == before, "refused runs leave the cache file as it was")
# --prompt-cache-all: the state is saved after the generation, so the file holds the generated
# tokens' positions too (one more K and V row each: a larger file than the prompt's alone), and a
# run of the same prompt from it prints what a run without the cache prints
ALL, PONLY = w("all.cache"), w("prompt-only.cache")
for f in (ALL, PONLY):
    if os.path.exists(f):
        os.remove(f)
ra = gen(P1, "--prompt-cache", ALL, "--prompt-cache-all")
rp = gen(P1, "--prompt-cache", PONLY)
check(ra.returncode == 0 and rp.returncode == 0 and ra.stdout == plain1.stdout, f"--prompt-cache-all: {ra.stderr[-300:]}")
check(os.path.getsize(ALL) > os.path.getsize(PONLY),
      f"--prompt-cache-all saves the generation: {os.path.getsize(ALL)} bytes vs {os.path.getsize(PONLY)}")
rb = gen(P1, "--prompt-cache", ALL)
check(rb.returncode == 0 and rb.stdout == plain1.stdout and f"reused {n1 - 1} of {n1} prompt tokens" in rb.stderr,
      f"a run from the --prompt-cache-all file: {rb.stderr[-300:]}")
# misuse: exit 2
refused([M, "-p", P1, "--prompt-cache-all"], 2, "--prompt-cache-all needs --prompt-cache")
refused([M, "-p", P1, "--prompt-cache", ALL, "--prompt-cache-all", "--prompt-cache-ro"], 2, "give one")
refused([M, "-p", P1, "--prompt-cache"], 2, "--prompt-cache needs a value")
refused([M, "-p", P1, "--prompt-cache-ro"], 2, "--prompt-cache-ro needs --prompt-cache")
refused([M, "-p", P1, "--prompt-cache", CACHE, "--logits-out", w("l.bin")], 2, "--logits-out")
refused([M, "-p", P1, "--prompt-cache", M], 2, "is the model file itself")
refused([M, "-p", P1, "--prompt-cache", CACHE, "--prompt-cache", w("b")], 2, "one file only")
refused([M, "-p", P1, "--prompt-cache", WORK], 2, WORK, "is a directory, not a regular file")

r = run("run", "--help")
check(r.returncode == 0 and "--prompt-cache FILE" in r.stdout and "--prompt-cache-ro" in r.stdout,
      "--help names --prompt-cache")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
