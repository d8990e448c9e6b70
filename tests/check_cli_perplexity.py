"""`fucina perplexity`, end to end.

usage: check_cli_perplexity.py FUCINA WORKDIR

On a tiny model written by `fucina make-model` and its Q8_0 quantization
(`fucina quantize`), a text made here (a few thousand tokens), -c 64:
- the running estimates "[1]x,[2]y,..." are one per chunk (n_tokens / 64,
  or --chunks), the last equals "Final estimate: PPL = X +/- Y" (both parse);
  the thread count does not change the numbers;
- --kl-divergence-base FILE writes the base and prints the same estimate;
  --kl-divergence against it prints the statistics: the model against its own
  base has KLD 0 and 100% the same top token, PPL(Q) = PPL(base); the Q8_0
  model a small positive KLD;
- misuse exits 2 naming the flag or file and the reason (the library's numbers
  against llama.cpp are test_perplexity's).
"""
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK = sys.argv[1], sys.argv[2]
failures, check, _, _, _ = cli_check.helpers(FUCINA, WORK, 300)


def run(*args, stdin=b""):
    r = subprocess.run([FUCINA, *args], capture_output=True, timeout=300, input=stdin)
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def p(name):
    return os.path.join(WORK, name)


MODEL, Q8, LLAMA = p("ppl-tiny.gguf"), p("ppl-tiny-q8.gguf"), p("ppl-llama.gguf")
for args in (["make-model", "--seed", "3", MODEL], ["quantize", MODEL, Q8, "Q8_0"],
             ["make-model", "--arch", "llama", LLAMA]):
    r = run(*args)
    assert r.returncode == 0, (args, r.stderr)

rng = random.Random(5)
words = ["the", "model", "tensor", "of", "a", "chunk", "perplexity", "token", "and", "is", "12", "+", "3"]
TEXT = p("text.txt")
with open(TEXT, "w") as f:
    f.write(" ".join(rng.choice(words) for _ in range(1500)))
SHORT = p("short.txt")
with open(SHORT, "w") as f:
    f.write("a few words only")
EMPTY = p("empty.txt")
open(EMPTY, "w").close()
OTHER = p("other.txt")
with open(OTHER, "w") as f:
    f.write(" ".join(rng.choice(words) for _ in range(1500)))

FINAL = re.compile(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)")


def ppl(*extra, model=MODEL):
    r = run("perplexity", "-m", model, "-f", TEXT, "-c", "64", *extra)
    check(r.returncode == 0, f"perplexity {extra} exits 0: {r.stderr}")
    m = FINAL.search(r.stdout)
    check(m is not None, f"perplexity {extra} prints the final estimate: {r.stdout[-300:]}")
    run_est = re.findall(r"\[(\d+)\]([0-9.]+),", r.stdout)
    return r, m, run_est


r, m, est = ppl("-t", "1")
if m and est:
    check(est[-1][1] == m.group(1), f"the last running estimate {est[-1][1]} is the final {m.group(1)}")
    check([int(i) for i, _ in est] == list(range(1, len(est) + 1)), "the chunks are numbered 1..n")
    n_tok = int(re.search(r"(\d+) tokens", r.stderr).group(1))
    check(len(est) == n_tok // 64, f"{len(est)} chunks of 64 from {n_tok} tokens")
    final = m.group(0)
    r2, m2, _ = ppl("-t", "2")
    check(m2 is not None and m2.group(0) == final, "2 threads print the same estimate as 1")
    r3, m3, est3 = ppl("--chunks", "3")
    check(len(est3) == 3 and m3 is not None and est3[2] == est[2], "--chunks 3 stops after the third chunk")

    BASE = p("base.kld")
    rb, mb, _ = ppl("--kl-divergence-base", BASE)
    check(mb is not None and mb.group(0) == final, "writing the KL base prints the same estimate")
    check(os.path.getsize(BASE) > 24, "the KL base is written")

    def stats(model, *extra):
        r = run("perplexity", "-m", model, "--kl-divergence-base", BASE, "--kl-divergence", *extra)
        check(r.returncode == 0, f"--kl-divergence on {model} exits 0: {r.stderr}")
        out = {}
        for key, pat in (("ppl_q", r"Mean PPL\(Q\)\s*: *([0-9.]+)"), ("ppl_base", r"Mean PPL\(base\)\s*: *([0-9.]+)"),
                         ("kld", r"Mean    KLD: *(-?[0-9.]+)"), ("top", r"Same top p: *([0-9.]+)"),
                         ("cor", r"Cor\(ln\(PPL\(Q\)\), ln\(PPL\(base\)\)\): *(-?[0-9.]+)%"),
                         ("ratio", r"Mean PPL\(Q\)/PPL\(base\)\s*: *([0-9.]+)"),
                         ("dp", r"Mean    Δp: *(-?[0-9.]+) ±"), ("rms", r"RMS Δp    : *([0-9.]+) ±"),
                         ("dp_max", r"Maximum Δp: *(-?[0-9.]+)%"), ("dp_min", r"Minimum Δp: *(-?[0-9.]+)%")):
            mm = re.search(pat, r.stdout)
            check(mm is not None, f"--kl-divergence prints {key}: {r.stdout[-400:]}")
            out[key] = float(mm.group(1)) if mm else float("nan")
        # llama-perplexity's layout: its KLD and dp percentile lines, in its order
        kld_lines = re.findall(r"^(.{7}) KLD:", r.stdout, re.M)
        check([x.strip() for x in kld_lines] == ["Mean", "Maximum", "99.9%", "99.0%", "95.0%", "90.0%", "Median",
                                                 "10.0%", "5.0%", "1.0%", "0.1%", "Minimum"],
              f"the KLD lines: {kld_lines}")
        dp_lines = re.findall(r"^(.{7}) Δp:", r.stdout, re.M)
        check([x.strip() for x in dp_lines] == ["Mean", "Maximum", "99.9%", "99.0%", "95.0%", "90.0%", "75.0%", "Median",
                                                "25.0%", "10.0%", "5.0%", "1.0%", "0.1%", "Minimum"], f"the dp lines: {dp_lines}")
        return out

    s = stats(MODEL)
    check(s["kld"] == 0.0 and s["top"] == 100.0, f"the model against its own base: KLD 0, top 100%: {s}")
    check(s["ppl_q"] == s["ppl_base"], f"PPL(Q) = PPL(base) against itself: {s}")
    check(s["dp"] == 0.0 and s["rms"] == 0.0 and s["dp_max"] == 0.0 and s["dp_min"] == 0.0 and s["ratio"] == 1.0
          and s["cor"] == 100.0, f"against itself: no probability moves, ratio 1, correlation 100%: {s}")
    check(abs(s["ppl_base"] / float(m.group(1)) - 1) < 1e-5, f"PPL(base) {s['ppl_base']} is the estimate {m.group(1)}")
    s = stats(MODEL, "-f", TEXT)
    check(s["kld"] == 0.0, "-f with the base's own text is accepted")
    s = stats(Q8)
    check(0 < s["kld"] < 0.05, f"the Q8_0 model's KLD is small and positive: {s}")
    # (a random-weight model gives the text's tokens tiny probabilities: dp rounds to 0.000 %)
    check(0 <= s["rms"] < 5 and s["dp_min"] <= s["dp"] <= s["dp_max"] and 0 < s["cor"] <= 100,
          f"the Q8_0 model's dp and correlation: {s}")

    # a base file that is not one, or truncated
    NOTBASE = p("notbase.kld")
    with open(NOTBASE, "wb") as f:
        f.write(b"not a base file at all, just bytes" * 4)
    TRUNC = p("trunc.kld")
    with open(BASE, "rb") as f, open(TRUNC, "wb") as g:
        g.write(f.read()[:-100])

    def refused(args, *words, stdin=b""):
        r = run("perplexity", *args, stdin=stdin)
        check(r.returncode == 2, f"{args} exits 2 (got {r.returncode}: {r.stderr.strip()})")
        for w in words:
            check(w in r.stderr, f"{args}: the message names {w!r}: {r.stderr.strip()}")

    refused([], "no model")
    refused(["-m", MODEL], "no text")
    refused(["-m", MODEL, "-f", TEXT, "--bogus"], "unknown option", "--bogus")
    refused(["-m", MODEL, "-f", TEXT, "-c", "x"], "-c")
    refused(["-m", MODEL, "-f", TEXT, "-c", "2"], "-c", "at least 3")
    refused(["-m", MODEL, "-f", TEXT, "--chunks", "0"], "--chunks")
    refused(["-m", MODEL, "-f", TEXT, "-t", "0"], "-t")
    refused(["-m", MODEL, "-f", SHORT, "-c", "64"], SHORT, "at least 128")
    refused(["-m", MODEL, "-f", EMPTY], EMPTY, "empty")
    refused(["-m", MODEL, "-f", "-"], "'-'", "empty")
    refused(["-m", MODEL, "-f", p("missing.txt")], "missing.txt")
    refused(["-m", p("missing.gguf"), "-f", TEXT], "missing.gguf")
    refused(["-m", MODEL, "--kl-divergence"], "--kl-divergence-base")
    refused(["-m", LLAMA, "--kl-divergence-base", BASE, "--kl-divergence"], BASE, "vocabulary")
    refused(["-m", MODEL, "--kl-divergence-base", BASE, "--kl-divergence", "-f", OTHER], BASE, "other tokens")
    refused(["-m", MODEL, "--kl-divergence-base", BASE, "--kl-divergence", "-c", "32"], "-c 32", "64")
    refused(["-m", MODEL, "--kl-divergence-base", NOTBASE, "--kl-divergence"], NOTBASE, "not a KL base")
    refused(["-m", MODEL, "--kl-divergence-base", TRUNC, "--kl-divergence"], TRUNC, "truncated")
    refused(["-m", MODEL, "-f", TEXT, "-c", "64", "--kl-divergence-base", WORK], WORK)
    # standard input is read with -f -
    with open(TEXT, "rb") as f:
        r = run("perplexity", "-m", MODEL, "-f", "-", "-c", "64", stdin=f.read())
    mm = FINAL.search(r.stdout)
    check(r.returncode == 0 and mm is not None and mm.group(0) == final, "-f - reads the text from standard input")

r = run("perplexity", "--help")
check(r.returncode == 0 and "--kl-divergence-base" in r.stdout, "--help names the flags")
r = run("--help")
check("perplexity" in r.stdout + r.stderr, "fucina --help lists perplexity")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
