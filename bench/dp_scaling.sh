#!/usr/bin/env bash
# Data-parallel scaling of `fucina pretrain`: 1 process with 2 threads against
# 2 MPI ranks with 1 thread each, the same global batch (8 rows of 256 tokens,
# accum 2) on the same machine, alternating, ROUNDS times; prints each run's
# median tokens/s (steps 4..16), the ratio of the medians, the median time per
# step spent combining gradients (the log's reduce_s: it includes waiting for
# the slower rank), and whether the two runs wrote the same bytes.
#
#   bench/dp_scaling.sh [BUILD_DIR] [CORPUS.jsonl]   (defaults: build, corpus/val.jsonl)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
corpus=${2:-$root/corpus/val.jsonl}
rounds=${ROUNDS:-3}
fucina=$build/fucina
command -v mpirun >/dev/null || { echo "dp_scaling: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
[ -f "$corpus" ] || { echo "dp_scaling: no corpus at $corpus (python3 data/prepare_corpus.py --out corpus/)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FUCINA_NO_PROGRESS=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
"$fucina" train-tokenizer -o "$work/tok.gguf" --vocab-size 4096 "$corpus" >/dev/null
common=(--tokenizer "$work/tok.gguf" --train "$corpus" --n-embd 256 --n-layer 4 --seq 256 --batch 8 --accum 2
        --steps 16 --quiet)
for r in $(seq "$rounds"); do
  "$fucina" pretrain "${common[@]}" -t 2 -o "$work/one.gguf" --log "$work/one$r.csv"
  mpirun -np 2 --bind-to none "$fucina" pretrain "${common[@]}" -t 1 -o "$work/two.gguf" --log "$work/two$r.csv"
  if cmp -s "$work/one.gguf" "$work/two.gguf"; then echo "round $r: the same bytes"; else echo "round $r: bytes differ"; fi
done
python3 - "$work" "$rounds" <<'PY'
import csv, statistics as st, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def per_round(name, col):
    out = []
    for r in range(1, rounds + 1):
        rows = list(csv.DictReader(open(f"{work}/{name}{r}.csv")))[3:]
        out.append(st.median(float(x[col]) for x in rows))
    return out
one, two = per_round("one", "tokens_per_s"), per_round("two", "tokens_per_s")
red = per_round("two", "reduce_s")
print("1 process x 2 threads, tokens/s:", [round(x) for x in one])
print("2 ranks x 1 thread,   tokens/s:", [round(x) for x in two])
print("2 ranks / 1 process (medians): %.3f" % (st.median(two) / st.median(one)))
print("combining gradients per step (median of each round): %s ms" % [round(1000 * x, 1) for x in red])
PY
