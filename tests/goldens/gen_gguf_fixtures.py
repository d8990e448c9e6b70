#!/usr/bin/env python3
"""Fixtures for tests/runtime/test_gguf.c (writes tests/goldens/gguf/).

An independent reference for the GGUF reader and writer: the format is
written by hand here with struct (neither gguf-py nor Fucina is used),
following ggml's docs/gguf.md, in llama.cpp's layout (KVs then tensor infos
in order, zero padding to the alignment, each tensor's data followed by zero
padding to the alignment, offsets = running padded total).

  reference_v3.gguf       version 3, default alignment 32: a KV of every scalar
                          type, strings (UTF-8, an embedded NUL), an array of every
                          element type, an empty array; tensors F32 F16 BF16 F64
                          I8 I16 I32 I64 (1 to 4 dims) and Q8_0 Q4_K MXFP4 blocks
  reference_align64.gguf  version 3, general.alignment = 64 (u32)
  reference_v2.gguf       version 2, one KV, one tensor

The values are simple formulas that test_gguf.c checks (see each tensor).

Usage: python3 tests/goldens/gen_gguf_fixtures.py [out_dir]
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B", U64: "Q", I64: "q", F64: "d"}
# ggml type id -> (block elements, block bytes)
GGML = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8),
        28: (1, 8), 30: (1, 2), 39: (32, 17)}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value, elem=None):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == STR:
        return out + gstr(value)
    if vtype == ARR:
        out += struct.pack("<IQ", elem, len(value))
        if elem == STR:
            return out + b"".join(gstr(v) for v in value)
        return out + b"".join(struct.pack("<" + FMT[elem], v) for v in value)
    return out + struct.pack("<" + FMT[vtype], value)


def pad(n, a):
    return (a - n % a) % a


def gguf(version, kvs, tensors, align=32):
    """tensors: (name, ggml type, ne list, data bytes)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    off = 0
    data = b""
    for name, t, ne, raw in tensors:
        blck, size = GGML[t]
        n = 1
        for d in ne:
            n *= d
        assert ne[0] % blck == 0 and len(raw) == n // blck * size, name
        head += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", t, off)
        chunk = raw + b"\0" * pad(len(raw), align)
        data += chunk
        off += len(chunk)
    head += b"\0" * pad(len(head), align)
    return head + data


def pack(fmt, values):
    return b"".join(struct.pack("<" + fmt, v) for v in values)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf")
    os.makedirs(out, exist_ok=True)

    kvs = [
        kv("general.architecture", STR, "fucina-test"),
        kv("t.u8", U8, 200), kv("t.i8", I8, -100), kv("t.u16", U16, 60000), kv("t.i16", I16, -30000),
        kv("t.u32", U32, 4000000000), kv("t.i32", I32, -2000000000), kv("t.f32", F32, 1.5),
        kv("t.bool", BOOL, 1), kv("t.str", STR, "h\u00e9llo\0world"), kv("t.u64", U64, 2**63 + 5),
        kv("t.i64", I64, -2**62), kv("t.f64", F64, -0.1),
        kv("t.arr.u8", ARR, [1, 2, 255], U8), kv("t.arr.i8", ARR, [-1, 0, 127], I8),
        kv("t.arr.u16", ARR, [1, 65535, 3], U16), kv("t.arr.i16", ARR, [-32768, 0, 5], I16),
        kv("t.arr.u32", ARR, [7, 8, 9], U32), kv("t.arr.i32", ARR, [-7, 8, -9], I32),
        kv("t.arr.f32", ARR, [0.25, -1.0, 3.5], F32), kv("t.arr.bool", ARR, [1, 0, 1], BOOL),
        kv("t.arr.u64", ARR, [2**64 - 1, 0, 1], U64), kv("t.arr.i64", ARR, [-2**63, 0, 2**63 - 1], I64),
        kv("t.arr.f64", ARR, [1e300, -2.5, 0.0], F64),
        kv("t.arr.str", ARR, ["a", "", "\u00fcn\u00ef"], STR), kv("t.arr.empty", ARR, [], U32),
    ]
    tensors = [
        ("f32", 0, [3, 2], pack("f", [i * 0.5 - 1 for i in range(6)])),          # i*0.5-1
        ("f16", 1, [4], pack("H", [0x3C00, 0xC000, 0x3800, 0x7BFF])),          # 1 -2 0.5 65504
        ("bf16", 30, [2, 1, 1, 2], pack("H", [0x3F80, 0x4000, 0xBF80, 0x4040])),  # 1 2 -1 3
        ("f64", 28, [2], pack("d", [0.1, -3.0])),
        ("i8", 24, [3], pack("b", [-1, 2, -3])),
        ("i16", 25, [2], pack("h", [-300, 300])),
        ("i32", 26, [2, 2], pack("i", [i * 1000 - 1 for i in range(4)])),      # i*1000-1
        ("i64", 27, [1], pack("q", [-2**40])),
        ("blk.0.q8_0", 8, [32, 2], bytes(i % 251 for i in range(68))),          # byte i = i % 251
        ("blk.0.q4_k", 12, [256], bytes((i * 7) % 256 for i in range(144))),    # byte i = 7i % 256
        ("mxfp4", 39, [32], bytes(range(17))),                                  # byte i = i
    ]
    files = {
        "reference_v3.gguf": gguf(3, kvs, tensors),
        "reference_align64.gguf": gguf(3, [kv("general.alignment", U32, 64), kv("t.name", STR, "a64")],
                                       [("a", 0, [5], pack("f", [1, 2, 3, 4, 5])),
                                        ("b", 26, [3], pack("i", [-1, -2, -3]))], align=64),
        "reference_v2.gguf": gguf(2, [kv("t.v2", U32, 2)], [("x", 0, [2], pack("f", [0.5, 0.25]))]),
    }
    for name, b in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)
        print(name, len(b))


if __name__ == "__main__":
    main()
