#!/usr/bin/env python3
"""Every FUCINA_* environment variable the sources read is listed in
`fucina --help` (a variable nobody can discover is a variable nobody sets).

usage: check_cli_help_env.py FUCINA SOURCE_DIR
"""
import os
import re
import subprocess
import sys

fucina, root = sys.argv[1], sys.argv[2]
used = set()
for d, _, files in os.walk(os.path.join(root, "src")):
    for name in files:
        if name.endswith((".c", ".h")):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                used.update(re.findall(r'getenv\("(FUCINA_[A-Z0-9_]+)"\)', f.read()))
if not used:
    sys.exit("no getenv(\"FUCINA_...\") found under src/: the scan is broken")
out = subprocess.run([fucina, "--help"], capture_output=True, text=True, timeout=60).stdout
missing = sorted(v for v in used if v not in out)
if missing:
    sys.exit("not in fucina --help: " + ", ".join(missing))
print("ok:", ", ".join(sorted(used)))
