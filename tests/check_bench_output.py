"""`fucina bench` end to end: llama-bench's output formats, read back with
Python's own parsers, and its flag errors.

usage: check_bench_output.py FUCINA WORKDIR [SRCDIR]

Writes a tiny f32 model with `fucina make-model`, runs `fucina bench` on it
with -o json / jsonl / csv / md and checks what a llama-bench consumer
relies on: the field names and JSON types, one record per (threads, test)
in flag order, n_prompt / n_gen / n_depth as asked, the statistics
consistent with the samples (recomputed here), the model size against the
file (every tensor is f32: size = 4 x params). Then -pg and -d (llama-bench's
test order: per depth the pp, tg, then pg tests; names "pp4+tg2 @ d8"; t/s
counts the prompt and generated tokens, not the depth's), and that the depth
really sits in the cache: tg at depth 4096 is several times slower than at
depth 0 on the tiny model (attention over 4096 positions outweighs its
0.13M weights many times). Repeated list flags append; -b, -ub, -fa, -t, -d
make llama-bench's cross product in its order; -b chunks the prompt (-b 1 is
much slower); -o sql runs in sqlite3 (twice: IF NOT EXISTS) with its column
types, csv and jsonl say the same; build_commit is a commit of the source
tree's history (or "unknown" outside git, as the stamp script writes for a
tarball); --progress, --no-warmup, -v. Bad flags must exit 2 naming the flag.
"""
import csv
import io
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys

FUCINA, WORK = sys.argv[1], sys.argv[2]
SRC = sys.argv[3] if len(sys.argv) > 3 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.makedirs(WORK, exist_ok=True)
MODEL = os.path.join(WORK, "bench-tiny.gguf")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, cmd="bench"):
    return subprocess.run([FUCINA, cmd, *args], capture_output=True, text=True, timeout=300)


r = run(MODEL, cmd="make-model")
if r.returncode != 0:
    sys.exit("make-model failed: " + r.stderr)

REPS = 3
FLAGS = ["-p", "1,4", "-n", "3", "-t", "1,2", "-r", str(REPS), "-ctk", "f32"]
EXPECT = [(t, p, g, 0) for t in (1, 2) for (p, g) in ((1, 0), (4, 0), (0, 3))]

INT_FIELDS = ["model_size", "model_n_params", "n_threads", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
              "n_batch"]
STR_FIELDS = ["model_filename", "model_type", "type_k", "type_v", "test_time", "backends"]
NUM_FIELDS = ["avg_ts", "stddev_ts"]


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def close(a, b, rel=1e-4, abs_=1.0):
    return abs(a - b) <= max(abs_, rel * abs(b))


def check_records(recs, fmt, expect=EXPECT, reps=REPS):
    check(len(recs) == len(expect), f"{fmt}: {len(recs)} records, expected {len(expect)}")
    fsize = os.path.getsize(MODEL)
    for rec, (t, p, g, d) in zip(recs, expect):
        name = f"{fmt} t{t} p{p} n{g} d{d}"
        for f in INT_FIELDS:
            check(isinstance(rec.get(f), int) and not isinstance(rec.get(f), bool), f"{name}: {f} is not an int")
        for f in STR_FIELDS:
            check(isinstance(rec.get(f), str), f"{name}: {f} is not a string")
        for f in NUM_FIELDS:
            check(isinstance(rec.get(f), (int, float)), f"{name}: {f} is not a number")
        if failures:
            return
        check((rec["n_threads"], rec["n_prompt"], rec["n_gen"], rec["n_depth"]) == (t, p, g, d),
              f"{name}: got threads/n_prompt/n_gen/n_depth "
              f"{rec['n_threads']}/{rec['n_prompt']}/{rec['n_gen']}/{rec['n_depth']}")
        check(rec["model_filename"] == MODEL, f"{name}: model_filename {rec['model_filename']}")
        check(rec["type_k"] == "f32" and rec["type_v"] == "f32", f"{name}: type_k/type_v not f32")
        check(rec["model_size"] == 4 * rec["model_n_params"], f"{name}: f32 model size != 4 x params")
        check(0 < rec["model_size"] < fsize, f"{name}: model_size {rec['model_size']} vs file {fsize}")
        ns, ts = rec["samples_ns"], rec["samples_ts"]
        check(len(ns) == reps and len(ts) == reps, f"{name}: {len(ns)} / {len(ts)} samples, expected {reps}")
        check(all(isinstance(x, int) and x > 0 for x in ns), f"{name}: samples_ns not positive ints")
        for a, b in zip(ns, ts):
            check(close(b, 1e9 * (p + g) / a, 1e-4, 1e-3), f"{name}: samples_ts {b} != tokens / samples_ns")
        m, sd = mean_sd(ns)
        check(close(rec["avg_ns"], m) and close(rec["stddev_ns"], sd), f"{name}: avg_ns/stddev_ns inconsistent")
        m, sd = mean_sd(ts)
        check(close(rec["avg_ts"], m, 1e-4, 1e-3) and close(rec["stddev_ts"], sd, 1e-4, 1e-3),
              f"{name}: avg_ts/stddev_ts inconsistent")


# json
r = run(MODEL, *FLAGS, "-o", "json")
check(r.returncode == 0, "json: exit status %d: %s" % (r.returncode, r.stderr))
if r.returncode == 0:
    check_records(json.loads(r.stdout), "json")

# jsonl: one object per line
r = run(MODEL, *FLAGS, "-o", "jsonl")
check(r.returncode == 0, "jsonl: exit status %d" % r.returncode)
if r.returncode == 0:
    check_records([json.loads(line) for line in r.stdout.splitlines() if line.strip()], "jsonl")

# csv: every value quoted as llama-bench writes them; types come from the header
r = run(MODEL, *FLAGS, "-o", "csv")
check(r.returncode == 0, "csv: exit status %d" % r.returncode)
if r.returncode == 0:
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    recs = []
    for row in rows:
        rec = dict(row)
        for f in INT_FIELDS:
            rec[f] = int(row[f])
        for f in NUM_FIELDS:
            rec[f] = float(row[f])
        recs.append(rec)
    # csv has no samples: check the rest
    check(len(recs) == len(EXPECT), f"csv: {len(recs)} rows, expected {len(EXPECT)}")
    for rec, (t, p, g, d) in zip(recs, EXPECT):
        check((rec["n_threads"], rec["n_prompt"], rec["n_gen"], rec["n_depth"]) == (t, p, g, d), f"csv: row {rec}")
        check(rec["avg_ts"] > 0 and rec["avg_ns"] > 0, "csv: non-positive averages")

# md: llama-bench's columns and test names
r = run(MODEL, *FLAGS, "-o", "md")
check(r.returncode == 0, "md: exit status %d" % r.returncode)
lines = [l for l in r.stdout.splitlines() if l.startswith("|")]
if lines:
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    check(head == ["model", "size", "params", "backend", "threads", "type_k", "test", "t/s"], f"md header {head}")
    tests = [[c.strip() for c in l.strip("|").split("|")][6] for l in lines[2:]]
    check(tests == ["pp1", "pp4", "tg3"] * 2, f"md tests {tests}")
    check(all("±" in l for l in lines[2:]), "md: t/s without ±")
else:
    check(False, "md: no table")

# ranges expand as llama-bench's
r = run(MODEL, "-p", "2-8*2,3", "-n", "0", "-t", "1", "-r", "1", "-o", "jsonl", "-ctk", "f32")
got = [json.loads(l)["n_prompt"] for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else None
check(got == [2, 4, 8, 3], f"range -p 2-8*2,3 gave {got}")

# -pg and -d: per depth the pp, tg and pg tests (llama-bench's order); -pg 0,0 is no test
PG_REPS = 2
PG_FLAGS = ["-p", "4", "-n", "3", "-pg", "4,2", "-pg", "0,0", "-pg", "2,1", "-d", "0,8", "-t", "1",
            "-r", str(PG_REPS), "-ctk", "f32"]
PG_TESTS = [(4, 0), (0, 3), (4, 2), (2, 1)]
PG_EXPECT = [(1, p, g, d) for d in (0, 8) for (p, g) in PG_TESTS]
for fmt in ("json", "jsonl"):
    r = run(MODEL, *PG_FLAGS, "-o", fmt)
    check(r.returncode == 0, f"-pg/-d {fmt}: exit {r.returncode}: {r.stderr.strip()!r}")
    if r.returncode == 0:
        recs = json.loads(r.stdout) if fmt == "json" else [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        check_records(recs, f"-pg/-d {fmt}", PG_EXPECT, PG_REPS)
r = run(MODEL, *PG_FLAGS, "-o", "csv")
check(r.returncode == 0, f"-pg/-d csv: exit {r.returncode}")
if r.returncode == 0:
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    got = [(int(x["n_threads"]), int(x["n_prompt"]), int(x["n_gen"]), int(x["n_depth"])) for x in rows]
    check(got == PG_EXPECT, f"-pg/-d csv: rows {got}")
r = run(MODEL, *PG_FLAGS, "-o", "md")
check(r.returncode == 0, f"-pg/-d md: exit {r.returncode}")
lines = [l for l in r.stdout.splitlines() if l.startswith("|")]
tests = [[c.strip() for c in l.strip("|").split("|")][6] for l in lines[2:]]
check(tests == ["pp4", "tg3", "pp4+tg2", "pp2+tg1", "pp4 @ d8", "tg3 @ d8", "pp4+tg2 @ d8", "pp2+tg1 @ d8"],
      f"-pg/-d md tests {tests}")
# repeated -d flags add up, as llama-bench's
r = run(MODEL, "-p", "2", "-n", "0", "-d", "4", "-d", "1-2", "-t", "1", "-r", "1", "-o", "jsonl", "-ctk", "f32")
got = [json.loads(l)["n_depth"] for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else None
check(got == [4, 1, 2], f"-d 4 -d 1-2 gave depths {got}")
# --ctx must hold depth + test
r = run(MODEL, "--ctx", "12", "-p", "4", "-n", "0", "-d", "8", "-t", "1", "-r", "1", "-o", "jsonl")
check(r.returncode == 0, f"--ctx 12 -p 4 -d 8: exit {r.returncode}: {r.stderr.strip()!r}")
# the depth is in the cache: decoding after 4096 tokens is much slower than after none
r = run(MODEL, "-p", "0", "-n", "8", "-d", "0,4096", "-t", "1", "-r", "5", "-o", "jsonl", "-ctk", "f32")
check(r.returncode == 0, f"-d 0,4096: exit {r.returncode}: {r.stderr.strip()!r}")
if r.returncode == 0:
    d0, d4096 = [min(json.loads(l)["samples_ns"]) for l in r.stdout.splitlines() if l.strip()]
    check(d4096 > 3 * d0, f"tg8 @ d4096 took {d4096} ns, not > 3 x tg8's {d0} ns: is the depth in the cache?")

# repeated list flags append (llama-bench's -p 4 -p 8 = -p 4,8); pp and tg are separate tests
r = run(MODEL, "-p", "4", "-p", "8", "-n", "2,4", "-t", "1", "-r", "1", "-o", "jsonl")
recs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else []
check([(x["n_prompt"], x["n_gen"]) for x in recs] == [(4, 0), (8, 0), (0, 2), (0, 4)],
      f"-p 4 -p 8 -n 2,4: {[(x['n_prompt'], x['n_gen']) for x in recs]}")
r = run(MODEL, "-p", "2", "-n", "0", "-t", "1", "-t", "2", "-r", "1", "-o", "jsonl")
got = [json.loads(l)["n_threads"] for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else None
check(got == [1, 2], f"-t 1 -t 2 gave threads {got}")
# -ctk is a list too, between -ub and -fa in the order; -ctv may repeat it
r = run(MODEL, "-p", "2", "-n", "0", "-t", "1", "-r", "1", "-ctk", "f16,q8_0", "-ctk", "f32", "-fa", "0,1",
        "-ctv", "f16,q8_0,f32", "-o", "jsonl")
got = [(json.loads(l)["type_k"], json.loads(l)["type_v"], json.loads(l)["flash_attn"])
       for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else r.stderr
check(got == [(k, k, fa) for k in ("f16", "q8_0", "f32") for fa in (False, True)], f"-ctk f16,q8_0 -ctk f32: {got}")

# the cross product in llama-bench's order: -b, -ub, -fa, -t, -d outermost to innermost, then the tests
CROSS = ["-p", "4", "-n", "1", "-b", "2,4", "-fa", "0", "-fa", "1", "-t", "1,2", "-d", "0,2", "-r", "1", "-ctk",
         "f32"]
CROSS_EXPECT = [(b, fa, t, d, p, g) for b in (2, 4) for fa in (False, True) for t in (1, 2) for d in (0, 2)
                for (p, g) in ((4, 0), (0, 1))]
r = run(MODEL, *CROSS, "-o", "json")
check(r.returncode == 0, f"cross product: exit {r.returncode}: {r.stderr.strip()!r}")
cross_json = json.loads(r.stdout) if r.returncode == 0 else []
got = [(x["n_batch"], x["flash_attn"], x["n_threads"], x["n_depth"], x["n_prompt"], x["n_gen"]) for x in cross_json]
check(got == CROSS_EXPECT, f"cross product records {got}, expected {CROSS_EXPECT}")
check(all(isinstance(x["flash_attn"], bool) and isinstance(x["use_mmap"], bool) for x in cross_json),
      "flash_attn / use_mmap are JSON booleans (llama-bench's BOOL fields)")
check(all(x["n_ubatch"] == x["n_batch"] for x in cross_json), "-b without -ub: n_ubatch is the chunk, n_batch")
r = run(MODEL, "-p", "8", "-n", "0", "-b", "8", "-ub", "2,4", "-t", "1", "-r", "1", "-o", "jsonl")
got = [(json.loads(l)["n_batch"], json.loads(l)["n_ubatch"]) for l in r.stdout.splitlines() if l.strip()]
check(got == [(8, 2), (8, 4)], f"-b 8 -ub 2,4 records {got}")
r = run(MODEL, "-p", "8", "-n", "0", "-t", "1", "-r", "1", "-o", "jsonl")
got = [(json.loads(l)["n_batch"], json.loads(l)["flash_attn"]) for l in r.stdout.splitlines() if l.strip()]
check(got == [(8, False)], f"no -b / -fa: the prompt in one evaluation, fa false: {got}")
# -b really chunks the prompt: 64 one-token evaluations are much slower than one of 64 tokens
r = run(MODEL, "-p", "64", "-n", "0", "-b", "1,64", "-t", "1", "-r", "3", "-o", "jsonl", "-ctk", "f32")
if r.returncode == 0:
    b1, b64 = [min(json.loads(l)["samples_ns"]) for l in r.stdout.splitlines() if l.strip()]
    check(b1 > 2 * b64, f"pp64 with -b 1 took {b1} ns, not > 2 x -b 64's {b64} ns: is the prompt chunked?")
else:
    check(False, f"-b 1,64: exit {r.returncode}: {r.stderr.strip()!r}")

# every -o format parses with the reader made for it and says the same
r = run(MODEL, *CROSS, "-o", "csv")
rows = list(csv.DictReader(io.StringIO(r.stdout))) if r.returncode == 0 else []
check([(int(x["n_batch"]), x["flash_attn"] == "1", int(x["n_threads"]), int(x["n_depth"]), int(x["n_prompt"]),
        int(x["n_gen"])) for x in rows] == CROSS_EXPECT, "csv: the cross product's rows")
r = run(MODEL, *CROSS, "-o", "jsonl")
lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()] if r.returncode == 0 else []
check([(x["n_batch"], x["flash_attn"], x["n_threads"], x["n_depth"], x["n_prompt"], x["n_gen"]) for x in lines]
      == CROSS_EXPECT, "jsonl: the cross product's records")
r = run(MODEL, *CROSS, "-o", "sql")
check(r.returncode == 0 and r.stdout.startswith("CREATE TABLE IF NOT EXISTS llama_bench ("), "sql: the table first")
if r.returncode == 0:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(r.stdout)
        db.executescript(r.stdout)  # IF NOT EXISTS: a second run appends to the same table
        cols = [c[1] for c in db.execute("PRAGMA table_info(llama_bench)")]
        check(cols[:2] == ["build_commit", "build_number"] and "flash_attn" in cols and "avg_ts" in cols,
              f"sql columns {cols}")
        got = [(b, bool(fa), t, d, p, g) for b, fa, t, d, p, g in db.execute(
            "SELECT n_batch, flash_attn, n_threads, n_depth, n_prompt, n_gen FROM llama_bench ORDER BY rowid")]
        check(got == CROSS_EXPECT * 2, f"sql rows {got}")
        types = db.execute("SELECT typeof(n_prompt), typeof(avg_ts), typeof(model_type), typeof(flash_attn) "
                           "FROM llama_bench LIMIT 1").fetchone()
        check(types == ("integer", "real", "text", "integer"), f"sql column types {types}")
    except sqlite3.Error as e:
        check(False, f"sql: sqlite3 cannot execute the output: {e}")
r = run(MODEL, *CROSS, "-o", "md")
lines = [l for l in r.stdout.splitlines() if l.startswith("|")]
head = [c.strip() for c in lines[0].strip("|").split("|")] if lines else []
check(head == ["model", "size", "params", "backend", "threads", "n_batch", "type_k", "fa", "test", "t/s"],
      f"md header with -b and -fa 0,1: {head}")
check(len(lines) == 2 + len(CROSS_EXPECT), f"md: {len(lines) - 2} rows")

# build_commit: the commit the binary was built from (llama-bench's `git rev-parse --short HEAD`)
rec = cross_json[0] if cross_json else {}
git = shutil.which("git")
top = subprocess.run([git, "-C", SRC, "rev-parse", "--show-toplevel"], capture_output=True, text=True) if git else None
if top and top.returncode == 0 and os.path.realpath(top.stdout.strip()) == os.path.realpath(SRC):
    c = rec.get("build_commit", "")
    short = subprocess.run([git, "-C", SRC, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    # HEAD may have moved since the build (a commit between build and test): the commit must be HEAD
    # or one of its ancestors, spelled as `rev-parse --short` spells it
    known = subprocess.run([git, "-C", SRC, "merge-base", "--is-ancestor", c, "HEAD"], capture_output=True)
    check(re.fullmatch(r"[0-9a-f]{7,40}", c) is not None and len(c) == len(short.strip()) and known.returncode == 0,
          f"build_commit {c!r} is not a short commit of HEAD's history (HEAD {short.strip()})")
    n = subprocess.run([git, "-C", SRC, "rev-list", "--count", c], capture_output=True, text=True).stdout.strip()
    check(str(rec.get("build_number")) == n, f"build_number {rec.get('build_number')} != rev-list --count {n}")
else:
    check(rec.get("build_commit") == "unknown", f"outside git: build_commit {rec.get('build_commit')!r}")
# ... and the stamp outside a checkout (a tarball) or below its top: "unknown", 0
cmake = shutil.which("cmake")
if cmake:
    for where in (os.path.join(WORK, "tarball"), os.path.join(SRC, "src")):
        os.makedirs(where, exist_ok=True)
        out = os.path.join(WORK, "commit.h")
        if os.path.exists(out):
            os.remove(out)
        subprocess.run([cmake, f"-DGIT={git or ''}", f"-DSRC={where}", f"-DOUT={out}", "-P",
                        os.path.join(SRC, "cmake", "build_commit.cmake")], check=True, capture_output=True)
        text = open(out).read()
        check('FC_BUILD_COMMIT "unknown"' in text and "FC_BUILD_NUMBER 0" in text, f"{where}: {text!r}")

# --progress, --no-warmup, -v on stderr; stdout keeps only the records
r = run(MODEL, "-p", "4", "-n", "2", "-t", "1", "-r", "2", "--progress", "-o", "jsonl")
steps = [l for l in r.stderr.splitlines() if "benchmark " in l]
check(any("benchmark 1/2: starting" in l for l in steps) and any("benchmark 2/2: run 2/2" in l for l in steps)
      and any("warmup run" in l for l in steps), f"--progress: {steps}")
check(len([l for l in r.stdout.splitlines() if l.strip()]) == 2, "--progress: stdout has the records only")
r = run(MODEL, "-p", "4", "-n", "0", "-t", "1", "-r", "1", "--progress", "--no-warmup", "-o", "jsonl")
check(r.returncode == 0 and "warmup" not in r.stderr and "run 1/1" in r.stderr, f"--no-warmup: {r.stderr!r}")
r = run(MODEL, "-p", "4", "-n", "0", "-t", "1", "-r", "2", "-v", "-o", "jsonl")
check(r.returncode == 0 and "loaded" in r.stderr and len(re.findall(r"pp4: run \d/2: \d+ ns", r.stderr)) == 2,
      f"-v: {r.stderr!r}")

# bad flags: exit 2 and a message naming the flag
for bad, flag in [(["-p", "12x"], "-p"), (["-n", "1,,2"], "-n"), (["-r", "0"], "-r"), (["-o", "xml"], "-o"),
                  (["-t", "two"], "-t"), (["-p", "9-3"], "-p"), (["-ctk", "q4_0"], "-ctk"), (["--ctx", "2", "-p", "8"], "--ctx"),
                  (["--frobnicate", "1"], "--frobnicate"), (["-p"], "-p"),
                  (["-pg", "5"], "-pg"), (["-pg", "a,b"], "-pg"), (["-pg", "1,2,3"], "-pg"), (["-pg", "4,-1"], "-pg"),
                  (["-pg"], "-pg"), (["-d", "-1"], "-d"), (["--n-depth", "x"], "--n-depth"), (["-d", "1,,2"], "-d"),
                  (["--ctx", "11", "-p", "4", "-n", "0", "-d", "8"], "--ctx"),
                  (["-fa", "2"], "-fa"), (["-b", "0"], "-b"), (["-ub", "x"], "-ub"), (["--flash-attn", "yes"], "--flash-attn"),
                  (["-ctk", "f16", "-ctv", "q8_0"], "-ctv"), (["-ctk", "f16,q8_0", "-ctv", "f16"], "-ctv"),
                  (["-ctk", "f16,,f32"], "-ctk"), (["-d", "1-64", "-b", "1-64", "-ub", "1-64"], "tests")]:
    r = run(MODEL, *bad)
    check(r.returncode == 2 and flag in r.stderr, f"{bad}: exit {r.returncode}, stderr {r.stderr.strip()!r}")
r = run(os.path.join(WORK, "missing.gguf"), "-r", "1")
check(r.returncode == 1 and "missing.gguf" in r.stderr, f"missing model: exit {r.returncode}, {r.stderr.strip()!r}")
r = run("--help")
check(r.returncode == 0 and all(f in r.stdout for f in ("-ctk", "-pg", "--n-depth")), "--help")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("fucina bench output: all checks passed")
