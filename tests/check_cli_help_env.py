#!/usr/bin/env python3
"""Every FUCINA_* environment variable the sources read is listed in
`fucina --help`, one line each (a variable nobody can discover is a variable
nobody sets): the library's and the command's (src/), and those of
fucina-bench, the oracle and the tests (bench/, oracle/, tests/).

usage: check_cli_help_env.py FUCINA SOURCE_DIR
"""
import os
import re
import subprocess
import sys

fucina, root = sys.argv[1], sys.argv[2]
used = {}
for top in ("src", "bench", "oracle", "tests"):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if x != "node_modules"]
        for name in files:
            if name.endswith((".c", ".h")):
                with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                    for v in re.findall(r'getenv\("(FUCINA_[A-Z0-9_]+)"\)', f.read()):
                        used.setdefault(v, top)
if "src" not in used.values():
    sys.exit("no getenv(\"FUCINA_...\") found under src/: the scan is broken")
out = subprocess.run([fucina, "--help"], capture_output=True, text=True, timeout=60).stdout
# "  FUCINA_X=VALUE   what it does": the variable opens its own line
listed = set(re.findall(r"^  (FUCINA_[A-Z0-9_]+)=\S+ +\S", out, re.M))
missing = sorted(f"{v} ({used[v]}/)" for v in used if v not in listed)
if missing:
    sys.exit("not on a line of its own in fucina --help: " + ", ".join(missing))
print("ok:", ", ".join(sorted(used)))
