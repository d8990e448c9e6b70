"""Data-parallel `fucina pretrain` under OpenMPI's mpirun, 2 ranks on loopback.

usage: check_cli_mpi.py FUCINA WORKDIR SOURCE_DIR HAVE_MPI

- 2 ranks (one thread each) write the model, the checkpoint and the losses
  of one process with the same global batch and accumulation, byte for byte;
- a rank killed with SIGKILL mid-run ends the job with a non-zero status
  naming the dead process, and the last checkpoint is intact (a single
  process resumes from it and finishes);
- accum not a multiple of the ranks exits non-zero naming both numbers.
Exits 77 (skipped) when mpirun is missing or fucina was built without MPI.
"""
import csv
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

FUCINA, WORK, SRC, HAVE_MPI = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
if HAVE_MPI != "ON":
    print("SKIP: fucina was built without MPI (apt-get install libopenmpi-dev, then reconfigure)")
    sys.exit(77)
MPIRUN = shutil.which("mpirun")
if not MPIRUN:
    print("SKIP: no mpirun (apt-get install openmpi-bin)")
    sys.exit(77)
os.makedirs(WORK, exist_ok=True)
CORPUS = os.path.join(SRC, "tests", "runtime", "data", "bpe_corpus.txt")
# CI runs as root; TCP on loopback only, as a 2-rank job on one machine would
ENV = {**os.environ, "FUCINA_NO_PROGRESS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
       "OMPI_MCA_oob_tcp_if_include": "lo"}
MPI = [MPIRUN, "-np", "2", "--oversubscribe"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def w(name):
    return os.path.join(WORK, name)


def run(argv, expect=0, timeout=300):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV)
    if expect is not None:
        check(p.returncode == expect, f"{' '.join(argv[:6])}...: exit {p.returncode}, expected {expect}: "
                                      f"{p.stderr[-600:]}")
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


run([FUCINA, "train-tokenizer", "-o", w("tok.gguf"), "--vocab-size", "600", CORPUS])
model = ["--tokenizer", w("tok.gguf"), "--train", CORPUS, "--n-embd", "64", "--n-layer", "2", "--seq", "64",
         "-t", "1", "--quiet"]
common = [*model, "--batch", "8", "--accum", "4"]

# 2 ranks == 1 process
run([FUCINA, "pretrain", *common, "--steps", "8", "--save", w("one.st"), "--log", w("one.csv"), "-o", w("one.gguf")])
p = run([*MPI, FUCINA, "pretrain", *common, "--steps", "8", "--save", w("two.st"), "--log", w("two.csv"),
         "-o", w("two.gguf")])
if p.returncode == 0:
    check(read(w("one.gguf")) == read(w("two.gguf")), "2 ranks: the model differs from one process's")
    check(read(w("one.st")) == read(w("two.st")), "2 ranks: the checkpoint differs from one process's")
    one = [r["loss"] for r in csv.DictReader(open(w("one.csv")))]
    two = list(csv.DictReader(open(w("two.csv"))))
    check(one == [r["loss"] for r in two] and len(one) == 8, f"losses: one process {one}, 2 ranks "
                                                              f"{[r['loss'] for r in two]}")
    check(all(float(r["reduce_s"]) > 0 for r in two), "2 ranks log the time spent combining gradients")

# a rank killed mid-run: the job ends with an error, the last checkpoint stays whole
ck = w("kill.st")
job = subprocess.Popen([*MPI, FUCINA, "pretrain", *common, "--steps", "100000", "--save", ck, "--save-every", "3",
                        "-o", w("kill.gguf")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def rank1_pid():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = read(f"/proc/{pid}/environ").split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if os.path.basename(exe) == "fucina" and b"OMPI_COMM_WORLD_RANK=1" in env and \
                b"kill.st" in read(f"/proc/{pid}/cmdline"):
            return int(pid)
    return None


deadline = time.time() + 120
victim = None
while time.time() < deadline and job.poll() is None:
    if os.path.exists(ck) and victim is None:
        time.sleep(0.5)  # a few more checkpoints: the kill lands mid-run, maybe mid-write
        victim = rank1_pid()
        if victim:
            os.kill(victim, signal.SIGKILL)
            break
    time.sleep(0.05)
check(victim is not None, "found rank 1 of the running job after its first checkpoint")
try:
    out, err = job.communicate(timeout=120)
except subprocess.TimeoutExpired:
    job.kill()
    out, err = job.communicate()
    check(False, "the job did not end within 120 s of a rank's death")
check(job.returncode != 0, f"the job with a killed rank exited {job.returncode}")
check("signal 9" in err or "Killed" in err or "killed" in err, f"mpirun names the killed rank: {err[-600:]}")
check(not os.path.exists(w("kill.gguf")), "no model written by the failed job")
steps = None
if os.path.exists(ck):
    # intact: a single process resumes from it and finishes a few steps later
    blob = read(ck)
    header = blob[8:8 + struct.unpack("<Q", blob[:8])[0]].decode()
    steps = int(json.loads(header)["__metadata__"]["fucina.lm.step"])
    run([FUCINA, "pretrain", *common, "--steps", str(steps + 2), "--resume", ck, "-o", w("resumed.gguf")])
    check(os.path.exists(w("resumed.gguf")), "resumed from the checkpoint the killed job left")
check(steps is not None and steps >= 3, f"the killed job's checkpoint step: {steps}")

# misuse: ranks that cannot share the micro-batches equally
p = run([*MPI, FUCINA, "pretrain", *model, "--accum", "3", "--batch", "6", "--steps", "2",
         "-o", w("x.gguf")], expect=None)
check(p.returncode != 0 and "accum (3)" in p.stderr and "number of ranks (2)" in p.stderr,
      f"accum 3 on 2 ranks: exit {p.returncode}: {p.stderr[-400:]}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("cli_mpi: all checks passed")
