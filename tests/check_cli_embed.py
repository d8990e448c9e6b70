"""`fucina embed`, end to end.

usage: check_cli_embed.py FUCINA WORKDIR

On tiny models written by `fucina make-model` (qwen3 and llama, whose vocabulary adds a BOS):
- --embd-output-format json and array parse and agree exactly (%.9g floats), plain shows the same
  vectors to its 6 decimals;
- the number of vectors: one per prompt (prompts cut at newlines, or --embd-separator; a final
  newline ends the last prompt), one per token with --pooling none (the count `fucina tokenize`
  gives); the default of a model without <arch>.pooling_type is none;
- pooling relations on the raw vectors (--embd-normalize -1): cls is the first token's vector, last
  the last token's, mean the mean of the token vectors (1e-6 x the largest |value|);
- normalizations: 2 (default) unit length, -1 the raw vector, 0 the largest |x| 32760, 1 unit
  taxicab norm, all proportional to the raw one;
- -f FILE and -f - equal -p; 1 and 2 threads give the same numbers;
- misuse exits 2 naming the flag or file (the numbers against llama.cpp are test_llm_embed's).
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK = sys.argv[1], sys.argv[2]
failures, check, _, w, _ = cli_check.helpers(FUCINA, WORK, 300)


def run(*args, stdin=b""):
    r = subprocess.run([FUCINA, *args], capture_output=True, timeout=300, input=stdin,
                       env={**os.environ, "FUCINA_NO_PROGRESS": "1"})
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


QWEN, LLAMA = w("embd-qwen3.gguf"), w("embd-llama.gguf")
for args in (["make-model", "--seed", "4", QWEN], ["make-model", "--arch", "llama", "--seed", "4", LLAMA]):
    r = run(*args)
    assert r.returncode == 0, (args, r.stderr)

PROMPTS = ["Hello world, the model is a tensor.", "12 + 3 = 15", "<|im_start|>user"]
TEXT = "\n".join(PROMPTS)


def embed(model, *args, text=TEXT, fmt="json"):
    r = run("embed", model, "-p", text, "--embd-output-format", fmt, *args)
    check(r.returncode == 0, f"embed {' '.join(args)}: exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode != 0:
        return []
    if fmt == "json":
        doc = json.loads(r.stdout)
        check(doc["object"] == "list", "json: an OpenAI list")
        check([d["index"] for d in doc["data"]] == list(range(len(doc["data"]))), "json: indices 0, 1, ...")
        return [d["embedding"] for d in doc["data"]]
    if fmt == "array":
        return json.loads(r.stdout)
    rows = []
    for k, line in enumerate(r.stdout.split("\n\ncosine similarity matrix:")[0].splitlines()):
        head, _, vals = line.partition(":")
        check(head == f"embedding {k}", f"plain line {k} starts '{head}'")
        rows.append([float(v) for v in vals.split()])
    return rows


def n_tokens(model, text):
    r = run("tokenize", model, "-p", text, "--ids", "--no-escape")
    assert r.returncode == 0, r.stderr
    return len(json.loads(r.stdout))


def close(a, b, tol):
    scale = max([abs(x) for x in b] + [1e-30])
    return len(a) == len(b) and all(abs(x - y) <= tol * scale for x, y in zip(a, b))


for model in (QWEN, LLAMA):
    name = os.path.basename(model)
    E = None
    # formats
    js = embed(model, "--pooling", "mean")
    arr = embed(model, "--pooling", "mean", fmt="array")
    plain = embed(model, "--pooling", "mean", fmt="plain")
    check(len(js) == len(PROMPTS), f"{name}: {len(js)} mean vectors for {len(PROMPTS)} prompts")
    check(js == arr, f"{name}: json and array print the same floats")
    check(len(plain) == len(js) and all(len(p) == len(j) and all(abs(x - y) <= 5.1e-7 for x, y in zip(p, j))
                                        for p, j in zip(plain, js)), f"{name}: plain shows the json vectors")
    E = len(js[0]) if js else 0
    # json+: json and the cosine of every pair, computed here from the json vectors; plain ends with
    # the same matrix to 2 decimals, its columns headed by each prompt's first 6 bytes
    r = run("embed", model, "-p", TEXT, "--pooling", "mean", "--embd-output-format", "json+")
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    check([d["embedding"] for d in doc.get("data", [])] == js, f"{name}: json+ has json's vectors")

    def cos(a, b):
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
        return sum(x * y for x, y in zip(a, b)) / (na * nb)
    want = [[cos(a, b) for b in js] for a in js]
    got = doc.get("cosineSimilarity", [])
    check(len(got) == len(want) and all(abs(x - y) < 1e-6 for gr, wr in zip(got, want) for x, y in zip(gr, wr)),
          f"{name}: json+ cosineSimilarity {got} vs {want}")
    r = run("embed", model, "-p", TEXT, "--pooling", "mean")
    tail = r.stdout.split("cosine similarity matrix:\n\n", 1)[-1].splitlines()
    check(tail[0] == "".join(f"{p[:6]:>6} " for p in PROMPTS), f"{name}: the matrix header {tail[:1]}")
    rows = [[float(x) for x in t.split()[:len(PROMPTS)]] for t in tail[1:]]
    check(len(rows) == len(PROMPTS) and all(abs(x - y) <= 0.0051 for gr, wr in zip(rows, want) for x, y in zip(gr, wr)),
          f"{name}: plain's matrix {rows} vs {want}")
    r = run("embed", model, "-p", PROMPTS[0], "--pooling", "mean", "--embd-output-format", "json+")
    check(r.returncode == 0 and "cosineSimilarity" not in json.loads(r.stdout), f"{name}: one vector, no matrix")
    # defaults: no pooling_type key -> none, one vector per token, unit length
    toks = [n_tokens(model, p) for p in PROMPTS]
    dflt = embed(model)
    check(len(dflt) == sum(toks), f"{name}: default pooling gives {len(dflt)} vectors, tokens {toks}")
    check(all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in dflt), f"{name}: default rows unit length")
    # pooling relations on the raw vectors
    raw_none = embed(model, "--pooling", "none", "--embd-normalize", "-1")
    check(len(raw_none) == sum(toks), f"{name}: --pooling none gives one vector per token")
    at = 0
    per_prompt = []
    for t in toks:
        per_prompt.append(raw_none[at:at + t])
        at += t
    for pool in ("mean", "cls", "last"):
        got = embed(model, "--pooling", pool, "--embd-normalize", "-1")
        check(len(got) == len(PROMPTS), f"{name}: --pooling {pool} gives one vector per prompt")
        for i, rows in enumerate(per_prompt):
            if i >= len(got) or not rows:
                continue
            if pool == "cls":
                want = rows[0]
            elif pool == "last":
                want = rows[-1]
            else:
                want = [sum(r[j] for r in rows) / len(rows) for j in range(E)]
            check(close(got[i], want, 1e-6), f"{name}: --pooling {pool}, prompt {i}: not the token vectors' {pool}")
        if pool == "mean":
            raw_mean = got
    # normalizations, proportional to the raw vector
    for mode in ("2", "0", "1", "3"):
        got = embed(model, "--pooling", "mean", "--embd-normalize", mode)
        for i, v in enumerate(got):
            r0 = raw_mean[i]
            if mode == "2":
                s = math.sqrt(sum(x * x for x in r0))
            elif mode == "0":
                s = max(abs(x) for x in r0) / 32760.0
            else:
                p = int(mode)
                s = sum(abs(x) ** p for x in r0) ** (1.0 / p)
            check(close(v, [x / s for x in r0], 1e-6), f"{name}: --embd-normalize {mode}, prompt {i}")
    # sources and threads
    f = w("prompts.txt")
    with open(f, "w") as fh:
        fh.write(TEXT + "\n")  # the final newline ends the last prompt
    r1 = run("embed", model, "-f", f, "--pooling", "last", "--embd-output-format", "json")
    r2 = run("embed", model, "-f", "-", "--pooling", "last", "--embd-output-format", "json", stdin=TEXT.encode())
    r3 = run("embed", model, "-p", TEXT, "--pooling", "last", "--embd-output-format", "json", "-t", "2")
    r4 = run("embed", "-m", model, "-p", TEXT, "--pooling", "last", "--embd-output-format", "json", "-t", "1")
    check(r1.returncode == 0 and r1.stdout == r2.stdout == r3.stdout == r4.stdout,
          f"{name}: -f FILE, -f -, -p, -m and 1 or 2 threads print the same")
    sep = embed(model, "--pooling", "last", "--embd-separator", "||", text="||".join(PROMPTS))
    check(r1.returncode == 0 and sep == [d["embedding"] for d in json.loads(r1.stdout)["data"]],
          f"{name}: --embd-separator")


def refused(args, *needles, code=2):
    r = run("embed", *args)
    ok = r.returncode == code and r.stdout == "" and all(n in r.stderr for n in needles)
    check(ok, f"embed {' '.join(args)}: exit {r.returncode}, expected {code} naming {needles}: {r.stderr.strip()}")


refused([], "no MODEL.gguf")
refused([QWEN], "-p TEXT or -f FILE")
refused([QWEN, "-p", "a", "-f", "b"], "-p TEXT or -f FILE")
refused([QWEN, "-p"], "-p needs a value")
refused([QWEN, "-p", "a", "--pooling", "rank"], "--pooling", "'rank'")
refused([QWEN, "-p", "a", "--embd-normalize", "2x"], "--embd-normalize", "'2x'")
refused([QWEN, "-p", "a", "--embd-normalize", "-2"], "--embd-normalize", "'-2'")
refused([QWEN, "-p", "a", "--embd-output-format", "csv"], "--embd-output-format", "'csv'")
refused([QWEN, "-p", "a", "--embd-separator", ""], "--embd-separator")
refused([QWEN, "-p", "a", "-t", "0"], "--threads", "'0'")
refused([QWEN, "-p", "a", "--bogus"], "unknown option", "'--bogus'")
refused([QWEN, LLAMA, "-p", "a"], "one model only")
refused([QWEN, "-p", "a", "--mmap", "--no-mmap"], "contradict")
refused([QWEN, "-f", w("missing.txt")], "missing.txt")
refused([w("missing.gguf"), "-p", "a"], "missing.gguf")
refused([QWEN, "-p", "a\n\nb"], "prompt 1 has no tokens")

r = run("embed", "--help")
check(r.returncode == 0 and "--embd-normalize" in r.stdout and "--pooling" in r.stdout, "--help names the flags")
r = run("--help")
check("embed" in r.stdout, "fucina --help lists embed")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
