"""`fucina imatrix` and `fucina quantize --imatrix`, end to end.

usage: check_cli_imatrix.py FUCINA WORKDIR

On tiny models written by `fucina make-model` (qwen3 untied, qwen3moe tied):
- imatrix writes llama-imatrix's GGUF layout (read back by a small parser here): general.type
  imatrix, imatrix.datasets = [the text], imatrix.chunk_count / chunk_size = the chunks and -c;
  per matrix <name>.in_sum2 [cols, mats] and <name>.counts [1, mats] (1-D [cols] and [1] for a
  dense matrix, as ggml's writer drops trailing 1s); a dense matrix's count is
  chunks x ctx, an expert tensor's counts add up to chunks x ctx x experts used; the sums are
  non-negative and some positive; output.weight only with --process-output; 1 and 2 threads
  write the same bytes; the running and final perplexity are printed;
- quantize --imatrix FILE: the summary counts the tensors with weights, the tensors without an
  entry are named on stderr, --progress marks "(imatrix)", the output carries
  quantize.imatrix.file / entries_count / chunks_count;
- misuse exits 2 naming the flag or file: no -f, a text too short, a bad -c, a missing model,
  an imatrix that is missing, a model given as the imatrix, --imatrix without a value, an
  IQ1/IQ2/IQ3 mix (the reason: no grid encoders).
(The bytes against ggml_quantize_chunk and the sums against recomputations are test_imatrix's.)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK = sys.argv[1], sys.argv[2]
failures, check, run, w, _ = cli_check.helpers(FUCINA, WORK, 300)


def read_gguf(path):
    """KVs (scalars, strings, string arrays) and tensors {name: (ne, f32 values or None)}."""
    b = open(path, "rb").read()
    off = 0

    def take(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, b, off)
        off += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal off
        n = take("Q")
        s = b[off:off + n].decode()
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert b[:4] == b"GGUF", path
    off = 4
    _, nt, nkv = take("I"), take("Q"), take("Q")
    kvs = {}
    for _ in range(nkv):
        k = string()
        kvs[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        typ, toff = take("I"), take("Q")
        infos.append((name, ne, typ, toff))
    align = kvs.get("general.alignment", 32)
    data = (off + align - 1) // align * align
    tensors = {}
    for name, ne, typ, toff in infos:
        vals = None
        if typ == 0:
            n = 1
            for d in ne:
                n *= d
            vals = struct.unpack_from(f"<{n}f", b, data + toff)
        tensors[name] = (ne, vals, typ)
    return kvs, tensors, [i[0] for i in infos]


DENSE, MOE, TEXT = w("im-dense.gguf"), w("im-moe.gguf"), w("calib.txt")
run("make-model", "--preset", "small", "--untied", "--seed", "3", DENSE)
run("make-model", "--arch", "qwen3moe", "--seed", "3", MOE)
words = ("the of and a to in is you that it he was for on are as with his they at be this have from or one had "
         "by word but not what all were we when your can said there use an each which she do how their if will").split()
open(TEXT, "w").write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(2500)))

# dense, with the output head
IM = w("dense.imatrix.gguf")
r = run("imatrix", DENSE, "-f", TEXT, "-o", IM, "-c", "64", "--chunks", "3", "--process-output", "-t", "1")
check("[3]" in r.stdout and "Final estimate: PPL = " in r.stdout, f"imatrix prints the perplexity: {r.stdout[-200:]}")
kvs, ts, order = read_gguf(IM)
check(kvs.get("general.type") == "imatrix", f"general.type {kvs.get('general.type')}")
check(kvs.get("imatrix.datasets") == [TEXT], f"datasets {kvs.get('imatrix.datasets')}")
check(kvs.get("imatrix.chunk_count") == 3 and kvs.get("imatrix.chunk_size") == 64, f"chunks {kvs}")
check(list(kvs)[:4] == ["general.type", "imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"],
      f"key order {list(kvs)}")
names = sorted({n.rsplit(".", 1)[0] for n in ts})
check(order == [f"{n}.{s}" for n in names for s in ("in_sum2", "counts")], f"tensor order {order[:6]}")
check("output.weight" in names and "blk.1.ffn_down.weight" in names and len(names) == 15, f"entries {names}")
for n in names:
    ne, sums, _ = ts[n + ".in_sum2"]
    cne, counts, _ = ts[n + ".counts"]
    check(len(ne) == 1 and cne == [1], f"{n}: shapes {ne} {cne} (ggml writes a dense entry 1-D)")
    check(counts == (3 * 64.0,), f"{n}: counts {counts}, expected 3 chunks x 64")
    check(min(sums) >= 0 and max(sums) > 0, f"{n}: sums in [{min(sums)}, {max(sums)}]")
check(ts["blk.0.attn_q.weight.in_sum2"][1] == ts["blk.0.attn_k.weight.in_sum2"][1], "q and k share their input")
check(ts["blk.0.ffn_down.weight.in_sum2"][0] == [768], "ffn_down's input is the FFN width")
IM2 = w("dense2.imatrix.gguf")
run("imatrix", DENSE, "-f", TEXT, "-o", IM2, "-c", "64", "--chunks", "3", "--process-output", "-t", "2")
check(open(IM, "rb").read() == open(IM2, "rb").read(), "1 and 2 threads write the same imatrix")
IM3 = w("dense3.imatrix.gguf")
run("imatrix", "-m", DENSE, "-f", TEXT, "-o", IM3, "-c", "64", "--chunks", "2")
check("output.weight.in_sum2" not in read_gguf(IM3)[1], "output.weight only with --process-output")

IM4 = w("dense4.imatrix.gguf")
run("imatrix", DENSE, "-f", TEXT, "-o", IM4, "-c", "64", "--chunks", "1", "--chunk", "2")
k4, t4, _ = read_gguf(IM4)
check(k4.get("imatrix.chunk_count") == 1 and t4["blk.0.ffn_up.weight.counts"][1] == (64.0,), "--chunk 2 --chunks 1")
check(t4["blk.0.ffn_up.weight.in_sum2"][1] != read_gguf(IM3)[1]["blk.0.ffn_up.weight.in_sum2"][1],
      "--chunk skips the first chunks")
r = run("imatrix", DENSE, "-f", TEXT, "-o", IM4, "-c", "64", "--chunk", "1000", expect=2)
check("--chunk 1000 leaves too few tokens" in r.stderr, f"--chunk too far: {r.stderr}")

# MoE: per-expert rows and counts
IMM = w("moe.imatrix.gguf")
run("imatrix", MOE, "-f", TEXT, "-o", IMM, "-c", "48", "--chunks", "2")
_, tm, _ = read_gguf(IMM)
ne, _, _ = tm["blk.0.ffn_gate_exps.weight.in_sum2"]
cne, counts, _ = tm["blk.0.ffn_gate_exps.weight.counts"]
check(ne[1] == 8 and cne == [1, 8], f"expert entry shapes {ne} {cne}")
check(sum(counts) == 2 * 48 * 2, f"expert counts {counts} add up to tokens x 2 used")
check(tm["blk.0.ffn_gate_inp.weight.counts"][1] == (96.0,), "the router sees every token")

# quantize with it
Q = w("dense-q4km.gguf")
r = run("quantize", DENSE, Q, "Q4_K_M", "--imatrix", IM, "--progress")
check("15 tensors with importance weights" in r.stdout, f"summary: {r.stdout}")
check("has no entry for 1 tensor" in r.stderr and "token_embd.weight" in r.stderr, f"missing: {r.stderr[-300:]}")
check("(imatrix)" in r.stderr, "--progress marks the weighted tensors")
kq, _, _ = read_gguf(Q)
check(kq.get("quantize.imatrix.file") == IM and kq.get("quantize.imatrix.entries_count") == 15 and
      kq.get("quantize.imatrix.chunks_count") == 3 and kq.get("quantize.imatrix.dataset") == TEXT,
      f"quantize.imatrix keys: { {k: v for k, v in kq.items() if k.startswith('quantize.')} }")
QM = w("moe-q4.gguf")
r = run("quantize", MOE, QM, "IQ4_NL", "--imatrix", IMM)
check("tensors with importance weights" in r.stdout, f"MoE summary: {r.stdout}")
r = run("quantize", "--help")
check("--imatrix FILE" in r.stdout and "bpw" in r.stdout, "quantize --help lists --imatrix and the bits per weight")
r = run("imatrix", "--help")
check("in_sum2" in r.stdout and "--process-output" in r.stdout, "imatrix --help")

# misuse
r = run("imatrix", DENSE, "-o", w("x.gguf"), expect=2)
check("-f" in r.stderr, f"no text: {r.stderr}")
open(w("short.txt"), "w").write("the of and")
r = run("imatrix", DENSE, "-f", w("short.txt"), "-o", w("x.gguf"), expect=2)
check("tokenizes to only" in r.stderr, f"short text: {r.stderr}")
r = run("imatrix", DENSE, "-f", TEXT, "-c", "zero", expect=2)
check("-c" in r.stderr, f"bad -c: {r.stderr}")
r = run("imatrix", w("absent.gguf"), "-f", TEXT, "-o", w("x.gguf"), expect=2)
check("absent.gguf" in r.stderr, f"missing model: {r.stderr}")
r = run("quantize", DENSE, w("x.gguf"), "Q4_0", "--imatrix", w("absent.imatrix"), expect=2)
check("absent.imatrix" in r.stderr, f"missing imatrix: {r.stderr}")
r = run("quantize", DENSE, w("x.gguf"), "Q4_0", "--imatrix", MOE, expect=2)
check("general.type" in r.stderr and "im-moe.gguf" in r.stderr, f"a model as the imatrix: {r.stderr}")
r = run("quantize", DENSE, w("x.gguf"), "Q4_0", "--imatrix", IMM, expect=2)
check("imatrix entry for" in r.stderr, f"an imatrix of another model: {r.stderr}")
r = run("quantize", DENSE, w("x.gguf"), "Q4_0", "--imatrix", expect=2)
check("--imatrix" in r.stderr, f"--imatrix without a file: {r.stderr}")
r = run("quantize", DENSE, w("x.gguf"), "iq2_xxs", "--imatrix", IM, expect=2)
check("IQ2_XXS" in r.stderr and "grid-search encoders" in r.stderr, f"an IQ mix says why: {r.stderr}")
check(not os.path.exists(w("x.gguf")), "no output after a refusal")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("cli_imatrix: ok")
