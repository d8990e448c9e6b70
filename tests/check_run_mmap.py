"""`fucina run` / `fucina chat` --mmap and --no-mmap, end to end.

usage: check_run_mmap.py FUCINA WORKDIR

On a tiny model written by `fucina make-model`:
- how the weights reach memory is read from the kernel, not from our output:
  while `fucina chat` waits for its next line, /proc/PID/maps lists the
  model file with --mmap and does not without it (default and --no-mmap
  read the file into private memory);
- greedy `fucina run` prints the same text with the file mapped or read
  (the weights are the same bytes either way);
- misuse exits 2 naming the flag: --mmap with --no-mmap, --mmap=1, an
  unknown switch.
"""
import os
import select
import subprocess
import sys
import time

FUCINA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
MODEL = os.path.realpath(os.path.join(WORK, "mmap-tiny.gguf"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(cmd, *args, stdin=None):
    return subprocess.run([FUCINA, cmd, *args], capture_output=True, text=True, timeout=300, input=stdin)


r = run("make-model", MODEL, "--seed", "7")
if r.returncode != 0:
    sys.exit("make-model failed: " + r.stderr)

# run: the same greedy tokens whichever way the file is loaded
PROMPT = "The quick brown fox"
outs = {}
for mode in ([], ["--mmap"], ["--no-mmap"]):
    r = run("run", MODEL, "-p", PROMPT, "-n", "12", "--threads", "1", *mode)
    check(r.returncode == 0, f"run {mode}: exit {r.returncode}: {r.stderr.strip()!r}")
    outs[" ".join(mode) or "default"] = r.stdout
check(outs["default"].startswith(PROMPT) and len(outs["default"]) > len(PROMPT), f"run: no text generated: {outs['default']!r}")
check(outs["--mmap"] == outs["default"], f"run --mmap: {outs['--mmap']!r} != {outs['default']!r}")
check(outs["--no-mmap"] == outs["default"], f"run --no-mmap: {outs['--no-mmap']!r} != {outs['default']!r}")


def chat_maps_model(*mode):
    """Start `fucina chat`, send one line, and once it is echoed (the model is
    loaded) look at the process's mappings; 1 if the model file is mapped."""
    p = subprocess.Popen([FUCINA, "chat", MODEL, "-n", "2", "--threads", "1", *mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        p.stdin.write(b"hello\n")
        p.stdin.flush()
        seen, deadline = b"", time.monotonic() + 120
        while b"> hello" not in seen and time.monotonic() < deadline and p.poll() is None:
            ready, _, _ = select.select([p.stdout], [], [], 1.0)
            if ready:
                seen += os.read(p.stdout.fileno(), 4096)
        if b"> hello" not in seen:
            check(False, f"chat {mode}: no echo of the first line (exit {p.poll()}): {seen!r}")
            return None
        with open(f"/proc/{p.pid}/maps") as f:
            return int(any(line.rstrip("\n").endswith(MODEL) for line in f))
    finally:
        p.stdin.close()
        p.wait(timeout=120)
        p.stdout.close()


if os.path.exists("/proc/self/maps"):
    check(chat_maps_model("--mmap") == 1, "chat --mmap: the model file is not mapped")
    check(chat_maps_model("--no-mmap") == 0, "chat --no-mmap: the model file is mapped")
    check(chat_maps_model() == 0, "chat (default, a small file): the model file is mapped")
else:
    print("no /proc/PID/maps: mapping checks skipped")

# chat: the same replies mapped or read
replies = [run("chat", MODEL, "-n", "8", "--threads", "1", *mode, stdin="hi\nhow are you\n") for mode in ([], ["--mmap"])]
check(all(r.returncode == 0 for r in replies), f"chat: exit {[r.returncode for r in replies]}")
check(replies[0].stdout == replies[1].stdout, f"chat --mmap: {replies[1].stdout!r} != {replies[0].stdout!r}")

# misuse: exit 2 naming the flag
for cmd in ("run", "chat"):
    extra = ["-p", "x"] if cmd == "run" else []
    for bad, flag in [(["--mmap", "--no-mmap"], "--no-mmap"), (["--no-mmap", "--mmap"], "--mmap"),
                      (["--mmap=1"], "--mmap=1"), (["--mmapp"], "--mmapp")]:
        r = run(cmd, MODEL, *extra, *bad)
        check(r.returncode == 2 and flag in r.stderr, f"{cmd} {bad}: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    r = run(cmd, "--help")
    check(r.returncode == 0 and "--mmap" in r.stdout and "--no-mmap" in r.stdout, f"{cmd} --help lacks --mmap/--no-mmap")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("fucina run/chat --mmap/--no-mmap: all checks passed")
