#!/usr/bin/env python3
"""Fixtures for tests/runtime/test_safetensors.c (writes tests/goldens/safetensors/).

An independent reference for the safetensors reader and writer: the format
is written by hand here with struct, json and numpy (the safetensors package
is not used), following https://huggingface.co/docs/safetensors.

  reference_aligned.safetensors    every dtype Fucina reads, ranks 0..8, a UTF-8
                                   name, metadata; compact JSON (raw UTF-8),
                                   header padded with spaces to 8 bytes, data in
                                   a different order than the header with holes
  reference_unaligned.safetensors  the same tensors; JSON with spaces and
                                   ensure_ascii escapes (\\u00e9, surrogate pairs),
                                   header of odd length, so the data is misaligned
                                   (the reader must copy instead of wrapping)
  reference.txt                    what both contain, computed here: one line per
                                   tensor (header order) and per metadata entry
  writer_expected.safetensors      the exact bytes fc_safetensors_save must write
                                   for the tensors built in the test "writer_exact_bytes"
                                   (layout: docs/IO.md)

reference.txt lines (hex tokens are prefixed with 'x' so they are never empty):
  T x<name utf-8 hex> <DTYPE> <rank> <dims...> <axes: a,b,c or -> x<data hex> <n> <values...>
  M x<key hex> x<value hex>
Values are decimal integers or Python float.hex() (C99 hex floats, "nan",
"inf", "-inf"), so strtod reads them exactly.

Usage: /usr/bin/python3 tests/goldens/gen_safetensors_fixtures.py [out_dir]
"""
import json
import os
import struct
import sys

import numpy as np


def bf16(values):
    """float32 values that bf16 holds exactly, as (bf16 bits uint16, the float32 values)."""
    f = np.array(values, dtype=np.float32)
    bits = f.view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "not exactly representable in bf16"
    return (bits >> 16).astype("<u2"), f


# name, safetensors dtype, shape, raw little-endian array, values for reference.txt, axes
def reference_tensors():
    ts = []
    f64 = np.array([0.0, -0.0, 1e300, 5e-324, float("inf"), float("nan")], dtype="<f8")
    ts.append(("f64", "F64", [6], f64, [float(v) for v in f64], None))
    f32 = np.array([[1.5, -2.25, 3.4028234663852886e38], [1.401298464324817e-45, -0.0, float("-inf")]], dtype="<f4")
    ts.append(("f32_2d", "F32", [2, 3], f32, [float(v) for v in f32.ravel()], "row,col"))
    f16 = np.array([1.0, -2.5, 65504.0, 5.960464477539063e-08, float("inf"), float("nan")], dtype="<f2")
    ts.append(("f16", "F16", [6], f16, [float(v) for v in f16], None))
    bits, vals = bf16([1.0, -3.0, 0.15625, 2.0**100, -(2.0**-130), float("inf")])
    ts.append(("bf16", "BF16", [2, 3], bits.reshape(2, 3), [float(v) for v in vals], None))
    i64 = np.array([0, -1, 2**62 + 3, -(2**63), 2**63 - 1, 12345678901234], dtype="<i8")
    ts.append(("i64", "I64", [6], i64, [int(v) for v in i64], None))
    i32 = np.array([-(2**31), 2**31 - 1, 0, 7, -7, 100000, 3, -3], dtype="<i4").reshape(2, 2, 2)
    ts.append(("i32_3d", "I32", [2, 2, 2], i32, [int(v) for v in i32.ravel()], None))
    i16 = np.array([-32768, 32767, 5], dtype="<i2")
    ts.append(("i16", "I16", [3], i16, [int(v) for v in i16], None))
    i8 = np.array([[-128, 127], [0, -1]], dtype="i1")
    ts.append(("i8_2d", "I8", [2, 2], i8, [int(v) for v in i8.ravel()], None))
    u8 = np.array([0, 255, 128], dtype="u1")
    ts.append(("u8", "U8", [3], u8, [int(v) for v in u8], None))
    b = np.array([True, False, True, True], dtype="?")
    ts.append(("bool", "BOOL", [4], b, [int(v) for v in b], None))
    sc = np.array(3.25, dtype="<f4")
    ts.append(("scalar", "F32", [], sc, [3.25], None))
    r8 = np.arange(8, dtype="u1").reshape(1, 2, 1, 2, 1, 1, 2, 1)
    ts.append(("rank8", "U8", [1, 2, 1, 2, 1, 1, 2, 1], r8, list(range(8)), None))
    uni = np.array([-1.0, 2.0], dtype="<f8")
    ts.append(("\u00e9moji\U0001F600", "F64", [2], uni, [-1.0, 2.0], None))
    return ts


REFERENCE_META = [
    ("format", "pt"),
    ("note", "\u00fcn\u00efcode \"quoted\"\n"),
    ("fucina.axes.f32_2d", "row,col"),
    ("fucina.axes.i32_3d", "a,a,b"),   # duplicate axis: the reader keeps positional names
    ("fucina.axes.i8_2d", "x"),        # wrong count: positional
    ("fucina.axes.scalar", ""),
]


def layout(ts):
    """Data in reverse header order, each begin rounded up to 8 after a 3-byte hole."""
    offsets, data, pos = {}, bytearray(), 0
    for name, _, _, arr, _, _ in reversed(ts):
        raw = arr.tobytes()
        pos += 3
        pos = (pos + 7) // 8 * 8
        data += b"\xee" * (pos - len(data))
        offsets[name] = (pos, pos + len(raw))
        data += raw
        pos += len(raw)
    return offsets, bytes(data)


def header_obj(ts, offsets):
    h = {"__metadata__": dict(REFERENCE_META)}
    for name, dt, shape, _, _, _ in ts:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": list(offsets[name])}
    return h


def write_reference(out):
    ts = reference_tensors()
    offsets, data = layout(ts)
    h = header_obj(ts, offsets)
    aligned = json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    aligned += b" " * (-len(aligned) % 8)
    unaligned = json.dumps(h, ensure_ascii=True).encode("ascii")
    if len(unaligned) % 2 == 0:
        unaligned += b" "  # odd: the data starts at an odd file offset
    assert b"\\ud83d\\ude00" in unaligned and b"\\u00e9" in unaligned
    for fname, hdr in (("reference_aligned.safetensors", aligned), ("reference_unaligned.safetensors", unaligned)):
        with open(os.path.join(out, fname), "wb") as f:
            f.write(struct.pack("<Q", len(hdr)) + hdr + data)
    lines = ["# Written by gen_safetensors_fixtures.py; see its docstring for the format."]
    for name, dt, shape, arr, values, axes in ts:
        vals = [v.hex() if isinstance(v, float) else str(v) for v in values]
        lines.append(" ".join(["T", "x" + name.encode().hex(), dt, str(len(shape))] + [str(d) for d in shape] +
                              [axes or "-", "x" + arr.tobytes().hex(), str(len(vals))] + vals))
    for k, v in REFERENCE_META:
        lines.append(f"M x{k.encode().hex()} x{v.encode().hex()}")
    with open(os.path.join(out, "reference.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_writer_expected(out):
    """What Fucina's writer must produce for the tensors of test writer_exact_bytes:
    "__metadata__" first (user entries in order, then fucina.axes.<name> for tensors
    whose axes are not _0, _1, ... in order), tensors in the given order, compact
    JSON as json.dumps(separators=(",", ":"), ensure_ascii=False), spaces up to a
    multiple of 8, data back to back."""
    w = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5], dtype="<f4")           # f32 {out=2, in=3}
    odd = "b\t\"\\\u00e9"                                                    # needs escapes
    i16 = np.array([-2, 0, 300], dtype="<i2")                                # positional [3]
    s = np.array(-7, dtype="i1")                                             # scalar
    m = np.array([1, 0, 0, 1], dtype="u1")                                   # bool, positional [2, 2]
    hb, _ = bf16([1.5, -2.0])                                                # bf16 {k=2}
    tensors = [("w", "F32", [2, 3], w), (odd, "I16", [3], i16), ("s", "I8", [], s),
               ("m", "BOOL", [2, 2], m), ("h", "BF16", [2], hb)]
    meta = {"format": "pt", "note": "x\ny", "fucina.axes.w": "out,in", "fucina.axes.h": "k"}
    h, pos, data = {"__metadata__": meta}, 0, b""
    for name, dt, shape, arr in tensors:
        raw = arr.tobytes()
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw)
        data += raw
    hdr = json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hdr += b" " * (-len(hdr) % 8)
    with open(os.path.join(out, "writer_expected.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")
    os.makedirs(out, exist_ok=True)
    write_reference(out)
    write_writer_expected(out)


if __name__ == "__main__":
    main()
