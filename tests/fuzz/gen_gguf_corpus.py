#!/usr/bin/env python3
"""Write a corpus of GGUF files for the reader's rejection test and the fuzzer.

    gen_gguf_corpus.py OUT_DIR

Every file named bad-*.gguf breaks exactly one validation rule of the reader
(the name says which; expect.tsv gives, per file, text its rejection message
must contain); good-*.gguf files are valid and must open. The files are
built here byte by byte, independently of Fucina's writer, from the GGUF
specification (ggml/docs/gguf.md): header (magic, version, tensor count, KV
count), KV pairs, tensor infos, padding to general.alignment (default 32), data.
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_Q4_K = 0, 1, 2, 8, 12


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def header(n_t, n_kv, version=3, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, n_t, n_kv)


def kv_u32(key, v):
    return s(key) + struct.pack("<II", U32, v)


def kv_str(key, v):
    return s(key) + struct.pack("<I", STR) + s(v)


def kv_arr(key, elem, items, count=None):
    body = b"".join(struct.pack("<i", x) for x in items) if elem == I32 else b"".join(items)
    n = len(items) if count is None else count
    return s(key) + struct.pack("<IIQ", ARR, elem, n) + body


def tinfo(name, dims, ggml_type, off):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ggml_type, off)


def pad(b, a=32):
    return b + b"\0" * (-len(b) % a)


def model(tensors, kvs=(), version=3, align=32, data=None, n_t=None, n_kv=None):
    """tensors: (name, dims, type, offset, nbytes); data sized to cover them."""
    body = b"".join(kvs) + b"".join(tinfo(n, d, t, o) for n, d, t, o, _ in tensors)
    out = pad(header(len(tensors) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv, version) + body, align)
    if data is None:
        end = max([o + nb for _, _, _, o, nb in tensors], default=0)
        # ggml's reader expects the last tensor padded to the alignment too.
        end += -end % align
        data = bytes((i * 37) & 0x7F for i in range(end))
    return out + data


def f32_tensor(name, dims, off):
    n = 1
    for d in dims:
        n *= d
    return (name, dims, GGML_F32, off, 4 * n)


GOOD = {
    "good-empty-v3": model([]),
    "good-empty-v2": model([], version=2),
    "good-one-f32": model([f32_tensor("w", [8, 2], 0)], [kv_str("general.architecture", "test")]),
    "good-align64": model([f32_tensor("a", [4], 0), f32_tensor("b", [16], 64)], [kv_u32("general.alignment", 64)], align=64),
    "good-q8_0": model([("q", [64, 2], GGML_Q8_0, 0, 4 * 34)], [kv_arr("ids", I32, [1, 2, 3])]),
    "good-q4_K": model([("k", [256], GGML_Q4_K, 0, 144)]),
}

one = [f32_tensor("w", [8], 0)]
BAD = {
    "empty-file": b"",
    "short-magic": b"GG",
    "bad-magic": header(0, 0, magic=b"GGML"),
    "version-1": header(0, 0, version=1),
    "version-0": header(0, 0, version=0),
    "version-99": header(0, 0, version=99),
    "header-truncated": header(0, 0)[:20],
    "tensor-count-huge": header(1 << 62, 0),
    "kv-count-huge": header(0, 1 << 62),
    "kv-count-beyond-file": header(0, 5) + kv_u32("a", 1),
    "key-length-beyond-file": header(0, 1) + struct.pack("<Q", 1000) + b"abc" + b"\0" * 64,
    "key-length-over-cap": header(0, 1) + struct.pack("<Q", 1 << 40) + b"abc" + b"\0" * 64,
    "duplicate-key": model([], [kv_u32("k", 1), kv_u32("k", 2)]),
    "value-type-unknown": header(0, 1) + s("k") + struct.pack("<II", 13, 0),
    "value-truncated": header(0, 1) + s("k") + struct.pack("<I", U64) + b"\1\2",
    "string-beyond-file": header(0, 1) + s("k") + struct.pack("<IQ", STR, 999) + b"xy",
    "string-over-cap": header(0, 1) + s("k") + struct.pack("<IQ", STR, 1 << 50) + b"xy",
    "array-elem-type-unknown": header(0, 1) + s("k") + struct.pack("<IIQ", ARR, 77, 1) + b"\0" * 8,
    "array-count-overflow": header(0, 1) + s("k") + struct.pack("<IIQ", ARR, U64, 1 << 61) + b"\0" * 8,
    "array-beyond-file": header(0, 1) + kv_arr("k", I32, [1, 2], count=1000),
    "array-of-arrays": header(0, 1) + s("k") + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 0),
    "alignment-wrong-type": model([], [kv_str("general.alignment", "32")]),
    "alignment-zero": model([], [kv_u32("general.alignment", 0)]),
    "alignment-not-power-of-two": model([], [kv_u32("general.alignment", 48)]),
    "tensor-name-beyond-file": header(1, 0) + struct.pack("<Q", 500) + b"w" + b"\0" * 64,
    "tensor-name-duplicate": model([f32_tensor("w", [8], 0), f32_tensor("w", [8], 32)]),
    "tensor-dims-zero": model([("w", [], GGML_F32, 0, 4)]),
    "tensor-dims-five": model([("w", [1, 1, 1, 1, 1], GGML_F32, 0, 4)]),
    "tensor-dim-zero": model([("w", [8, 0], GGML_F32, 0, 32)]),
    "tensor-dim-negative": model([("w", [(1 << 64) - 8], GGML_F32, 0, 32)]),
    "tensor-elements-overflow": model([("w", [1 << 32, 1 << 32], GGML_F32, 0, 32)]),
    "tensor-bytes-overflow": model([("w", [1 << 61], GGML_F32, 0, 32)]),
    "tensor-type-removed": model([("w", [32], 4, 0, 20)]),
    "tensor-type-unknown": model([("w", [32], 200, 0, 20)]),
    "tensor-not-block-multiple": model([("w", [30], GGML_Q4_0, 0, 18)]),
    "tensor-offset-unaligned": model([f32_tensor("w", [8], 4)]),
    "tensor-beyond-file": model(one, data=b"\0" * 16),
    "tensor-offset-overflow": model([("w", [8], GGML_F32, (1 << 64) - 32, 32)], data=b"\0" * 32),
    "tensors-overlap": model([f32_tensor("a", [16], 0), f32_tensor("b", [16], 32)]),
    "tensor-info-truncated": (header(1, 0) + tinfo("w", [8], GGML_F32, 0) + b"\0" * 32)[:-37],
    "data-section-missing": header(1, 0) + tinfo("w", [8], GGML_F32, 0),
}


# What each rejection message must contain: the rule that was hit (a file
# that fails for another reason first would not test its rule).
EXPECT = {
    "empty-file": "header", "short-magic": "header", "bad-magic": "magic", "version-1": "v1",
    "version-0": "version", "version-99": "version", "header-truncated": "header",
    "tensor-count-huge": "tensor count", "kv-count-huge": "KV count", "kv-count-beyond-file": "KV count",
    "key-length-beyond-file": "key", "key-length-over-cap": "key", "duplicate-key": "duplicate key",
    "value-type-unknown": "value type", "value-truncated": "UINT64 value", "string-beyond-file": "string value",
    "string-over-cap": "exceeds the limit", "array-elem-type-unknown": "array element type",
    "array-count-overflow": "array length", "array-beyond-file": "array length", "array-of-arrays": "nested",
    "alignment-wrong-type": "general.alignment", "alignment-zero": "power of two",
    "alignment-not-power-of-two": "power of two", "tensor-name-beyond-file": "name at byte",
    "tensor-name-duplicate": "duplicate tensor name", "tensor-dims-zero": "n_dims", "tensor-dims-five": "n_dims",
    "tensor-dim-zero": "ne[1]", "tensor-dim-negative": "ne[0]", "tensor-elements-overflow": "element count overflows",
    "tensor-bytes-overflow": "byte size overflows", "tensor-type-removed": "unknown ggml type",
    "tensor-type-unknown": "unknown ggml type", "tensor-not-block-multiple": "multiple of the type's block size",
    "tensor-offset-unaligned": "multiple of the alignment", "tensor-beyond-file": "past the end of the file",
    "tensor-offset-overflow": "past the end of the file", "tensors-overlap": "overlap",
    "tensor-info-truncated": "tensor", "data-section-missing": "data section",
}
assert set(EXPECT) == set(BAD), set(BAD) ^ set(EXPECT)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_gguf_corpus.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, blob in list(GOOD.items()) + [("bad-" + k, v) for k, v in BAD.items()]:
        path = os.path.join(out, name + ".gguf")
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    with open(os.path.join(out, "expect.tsv"), "w") as f:
        for name in sorted(BAD):
            f.write("bad-%s.gguf\t%s\n" % (name, EXPECT[name]))


if __name__ == "__main__":
    main()
