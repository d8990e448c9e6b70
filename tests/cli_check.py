"""Shared by the CLI end-to-end checks (check_cli_train.py, check_cli_finetune.py, check_cli_perplexity.py).

helpers(fucina, work, timeout, errors) makes WORK and returns (failures, check, run, w, check_log):
check(cond, what) records and prints a failure; run(*args, expect=0) runs the fucina command
(FUCINA_NO_PROGRESS=1) and checks its exit status; w(name) is WORK/name; check_log(path, n, frac)
checks a training CSV log: n rows, the last loss below frac of the first (returns the rows).
"""
import csv
import os
import subprocess


def helpers(fucina, work, timeout, errors=None):
    os.makedirs(work, exist_ok=True)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    def run(*args, expect=0):
        p = subprocess.run([fucina, *args], capture_output=True, text=True, errors=errors, timeout=timeout,
                           env={**os.environ, "FUCINA_NO_PROGRESS": "1"})
        check(p.returncode == expect,
              f"{' '.join(args[:2])}: exit {p.returncode}, expected {expect}: {p.stderr[-400:]}")
        return p

    def w(name):
        return os.path.join(work, name)

    def check_log(path, n, frac):
        rows = list(csv.DictReader(open(path)))
        check(len(rows) == n, f"log has {len(rows)} rows")
        if rows:
            first, last = float(rows[0]["loss"]), float(rows[-1]["loss"])
            check(last < frac * first, f"loss {first} -> {last}: should fall below {frac:.0%}")
        return rows

    return failures, check, run, w, check_log
