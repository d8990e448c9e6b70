#!/usr/bin/env python3
"""Check the instruction encodings in an ISA's kernel objects (x86-64).

    check_encoding.py --objdump OBJDUMP --objects LISTFILE --isa NAME
                      [--no-avx512] [--no-vex] [--require MNEMONIC]... [--require-evex]
                      [--why TEXT]

LISTFILE holds one object path per line (CMake writes it from
$<TARGET_OBJECTS:...>). Every object is disassembled with `objdump -d` and
each instruction's bytes are decoded up to the opcode:

  --no-avx512 fail on any EVEX-encoded instruction: after the optional legacy
              prefixes (66 67 F0 F2 F3, segment overrides) the first byte is
              0x62, which in 64-bit mode is always EVEX (BOUND is invalid).
              That is every AVX-512 vector instruction, and the EVEX forms of
              AVX/AVX2/VNNI ones (e.g. vpdpbusd with AVX512-VNNI), which fault
              on CPUs without AVX-512 (AVX-VNNI-only Alder Lake, Zen 5 client).
              Also fail on the AVX-512 opmask instructions, which are
              VEX-encoded (kmov/kand/.../kortest/ktest: VEX map 0F opcodes
              41-4B, 90-93, 98-99; kshift: map 0F3A opcodes 30-33).
  --no-vex    fail on any VEX (0xC4, 0xC5) or XOP (0x8F with a non-zero
              ModRM.reg) instruction: baseline objects must be plain x86-64.
  --require M fail unless at least one instruction's text (as objdump prints
              it, e.g. "{vex} vpdpbusd") starts with M.
  --require-evex  fail unless at least one instruction is EVEX-encoded: the
              self-test, on objects that must be EVEX (the avx_vnni EVEX twin),
              that the decoder does see EVEX in real compiler output.

Exit status: 0 pass, 1 a check failed (the offending instructions are
printed), 77 nothing to check (empty list: the ISA has no objects), 2 usage or
tool errors.
"""
import argparse
import os
import re
import subprocess
import sys

SKIP = 77
LEGACY_PREFIXES = {0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65}
# "  1c:\t62 f2 7d 48 50 c1   \t{evex} vpdpbusd %zmm1,%zmm0,%zmm0"
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )*[0-9a-f]{2})\s*\t(.*)$")
FUNC_RE = re.compile(r"^[0-9a-f]+ <(.*)>:$")
MAX_REPORT = 20


OPMASK_OPCODES = {1: {0x41, 0x42, 0x44, 0x45, 0x46, 0x47, 0x4A, 0x4B, 0x90, 0x91, 0x92, 0x93, 0x98, 0x99},
                  3: {0x30, 0x31, 0x32, 0x33}}
KINDS = ("legacy", "vex", "opmask", "evex", "xop")


def encoding(raw):
    """'evex', 'opmask' (VEX-encoded AVX-512 mask instruction), 'vex', 'xop'
    or 'legacy' for an instruction's bytes."""
    i = 0
    while i < len(raw) and raw[i] in LEGACY_PREFIXES:
        i += 1
    if i >= len(raw):
        return "legacy"
    b = raw[i]
    if b == 0x62:
        return "evex"
    if b in (0xC4, 0xC5):
        # C5 xx op: map 0F; C4 xx yy op: map = low 5 bits of xx.
        vmap, op = (1, raw[i + 2]) if b == 0xC5 and i + 2 < len(raw) else \
                   (raw[i + 1] & 0x1F, raw[i + 3]) if i + 3 < len(raw) else (0, -1)
        if op in OPMASK_OPCODES.get(vmap, ()):
            return "opmask"
        return "vex"
    if b == 0x8F and i + 1 < len(raw) and (raw[i + 1] & 0x38) != 0:
        return "xop"
    return "legacy"


def disassemble(objdump, obj):
    # --insn-width=16: every byte of an instruction on its one line.
    p = subprocess.run([objdump, "-d", "--insn-width=16", obj],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{objdump} -d {obj} failed ({p.returncode}): {p.stderr.strip()}")
    func = "?"
    for line in p.stdout.splitlines():
        m = FUNC_RE.match(line)
        if m:
            func = m.group(1)
            continue
        m = INSN_RE.match(line)
        if m:
            yield func, m.group(1), bytes(int(x, 16) for x in m.group(2).split()), m.group(3).strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("--objects", required=True, help="file with one object path per line")
    ap.add_argument("--isa", required=True, help="name for messages")
    ap.add_argument("--no-avx512", action="store_true", help="no EVEX, no opmask instructions")
    ap.add_argument("--no-vex", action="store_true")
    ap.add_argument("--require", action="append", default=[], metavar="MNEMONIC")
    ap.add_argument("--require-evex", action="store_true")
    ap.add_argument("--why", default="", help="explanation printed when there is nothing to check")
    args = ap.parse_args(argv)

    try:
        with open(args.objects, encoding="utf-8") as f:
            objs = [line.strip() for line in f if line.strip()]
    except OSError as e:
        print(f"check_encoding: {e}", file=sys.stderr)
        return 2
    if not objs:
        print(f"SKIP: {args.isa}: no objects to check" + (f" ({args.why})" if args.why else ""))
        return SKIP
    missing = [o for o in objs if not os.path.exists(o)]
    if missing:
        print(f"check_encoding: {args.isa}: objects not built: {' '.join(missing)}", file=sys.stderr)
        return 2

    banned = set()
    if args.no_avx512:
        banned.update({"evex", "opmask"})
    if args.no_vex:
        banned.update({"vex", "opmask", "xop"})
    bad = []
    found = {r: [] for r in args.require}
    counts = {k: 0 for k in KINDS}
    n_insn = 0
    for obj in objs:
        try:
            for func, addr, raw, text in disassemble(args.objdump, obj):
                n_insn += 1
                enc = encoding(raw)
                counts[enc] += 1
                where = f"{os.path.basename(obj)}: {func}+0x{addr}"
                if enc in banned:
                    bad.append(f"  {where}: {enc.upper()}: {raw.hex(' ')}  {text}")
                for r in args.require:
                    if text.startswith(r):
                        found[r].append(where)
        except (OSError, RuntimeError) as e:
            print(f"check_encoding: {e}", file=sys.stderr)
            return 2

    summary = (f"{args.isa}: {len(objs)} objects, {n_insn} instructions ("
               + ", ".join(f"{k.upper() if k != 'legacy' else k} {counts[k]}" for k in KINDS) + ")")
    print(summary)
    rc = 0
    if bad:
        rc = 1
        print(f"FAIL: {args.isa}: {len(bad)} instructions with a banned encoding "
              f"({', '.join(sorted(e.upper() for e in banned))}):")
        for line in bad[:MAX_REPORT]:
            print(line)
        if len(bad) > MAX_REPORT:
            print(f"  ... and {len(bad) - MAX_REPORT} more")
    for r, where in found.items():
        if not where:
            rc = 1
            print(f"FAIL: {args.isa}: no '{r}' instruction in any object")
        else:
            print(f"ok: {args.isa}: '{r}' x{len(where)} (first: {where[0]})")
    if args.require_evex:
        if counts["evex"] == 0:
            rc = 1
            print(f"FAIL: {args.isa}: no EVEX instruction in any object")
        else:
            print(f"ok: {args.isa}: {counts['evex']} EVEX instructions")
    if rc == 0:
        print(f"ok: {args.isa}: encodings as required")
    return rc


if __name__ == "__main__":
    sys.exit(main())
