#!/usr/bin/env python3
"""Fail if a source file includes a header of a higher layer.

Layers, lowest first (docs/ARCHITECTURE.md): core, quant, kernels, dispatch, exec,
tensor, io, autograd, train, llm, serve, cli. A file in src/<layer>/ may
include headers of its own layer and of layers below it only.
"""
import os
import re
import sys

LAYERS = ["core", "quant", "kernels", "dispatch", "exec", "tensor", "io", "autograd", "train", "llm", "serve", "cli"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main(root):
    bad = []
    src = os.path.join(root, "src")
    for layer in sorted(os.listdir(src)):
        if layer not in LAYERS:
            bad.append(f"src/{layer}/: not a known layer (add it to tests/check_layering.py and docs/ARCHITECTURE.md)")
            continue
        rank = LAYERS.index(layer)
        for dirpath, _, files in os.walk(os.path.join(src, layer)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    if inc in LAYERS and LAYERS.index(inc) > rank:
                        line = text[:m.start()].count("\n") + 1
                        bad.append(f"{os.path.relpath(path, root)}:{line}: layer '{layer}' includes '{m.group(0).strip()}' "
                                   f"from the higher layer '{inc}'")
    for b in bad:
        print(b)
    print(f"layering: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
