#!/usr/bin/python3
"""An independent byte-level BPE trainer: the reference for fc_tokenizer_train.

Written from the algorithm's description (include/fucina/tokenizer_train.h),
not from the C code, and as plainly as possible: the words come from the
pre-tokenizer regex (the `regex` module, Debian's python3-regex), and every
merge recounts every pair of every word (O(merges x words): fine for the test
corpus, far too slow for real training).

    bpe_train_ref.py [--vocab-size N] [--pre NAME] [--special TOKEN]...
                     [--min-pair-count N] [--ids] FILE...

Each FILE is one document. Prints one merge per line, "LEFT RIGHT" with each
side the hex of its bytes; with --ids, then one line "ids: ..." with the
corpus's tokens as training left them (each word's final symbols, in text
order), which encoding with the trained file must reproduce.

The rules, restated:
- Text is decoded to codepoints as llama.cpp decodes it: the lead byte fixes
  the length, only continuation bytes' top bits are checked (overlong forms
  and surrogates decode), anything else is U+FFFD consuming one byte, and so
  is a 4-byte form above U+10FFFF. A word is the UTF-8 of its codepoints.
- Pair counts: every adjacent position of every word, times the word's count.
- Best pair: the largest count; ties go to the smallest (left id, right id).
  Bytes are ids 0..255, merge k is id 256 + k.
- A pair whose bytes spell an existing token (or a special token's text read
  as GPT-2 byte images) is never merged.
- A merge replaces its pair left to right, without overlaps, in every word.
"""
import argparse
import sys

import regex

# llama.cpp's LLAMA3 regex (GPT-4's cl100k split), its QWEN2 one (single
# digits) and GPT-2's.
PATTERNS = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
DEFAULT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def decode(data):
    """Codepoints of data with llama.cpp's UTF-8 rules, as a str (lone surrogates allowed)."""
    out = []
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        size = 1 if b < 0x80 else 2 if b >> 5 == 6 else 3 if b >> 4 == 14 else 4 if b >> 3 == 30 else 0
        cont = size > 0 and i + size <= n and all(data[i + k] >> 6 == 2 for k in range(1, size))
        if size == 1:
            out.append(b)
        elif cont:
            cp = b & (0xFF >> (size + 1))
            for k in range(1, size):
                cp = cp << 6 | (data[i + k] & 0x3F)
            if cp > 0x10FFFF:
                size = 0
            else:
                out.append(cp)
        else:
            size = 0
        if size == 0:
            out.append(0xFFFD)
            size = 1
        i += size
    return "".join(map(chr, out))


def byte_images():
    """GPT-2's map: printable bytes are themselves, the others U+0100.. in byte order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    img, extra = {}, 0
    for b in range(256):
        if b in keep:
            img[b] = b
        else:
            img[b] = 0x100 + extra
            extra += 1
    return img


def image_bytes(text):
    """The bytes text spells as byte images, or None when it is not such a spelling."""
    back = {cp: b for b, cp in byte_images().items()}
    try:
        return bytes(back[ord(c)] for c in text)
    except KeyError:
        return None


def words_of(docs, pattern):
    order = []
    for doc in docs:
        for m in regex.finditer(pattern, decode(doc)):
            order.append(m.group(0).encode("utf-8", "surrogatepass"))
    return order


def merge_word(w, a, b, c):
    out, i = [], 0
    while i < len(w):
        if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
            out.append(c)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return tuple(out)


def train(docs, vocab_size, pre, specials, min_count):
    order = words_of(docs, PATTERNS[pre])
    counts = {}
    for w in order:
        counts[w] = counts.get(w, 0) + 1
    words = {w: tuple(w) for w in counts}  # original bytes -> current symbols
    tok = [bytes([b]) for b in range(256)]
    spelled = set(tok)
    for s in specials:
        b = image_bytes(s)
        if b:
            spelled.add(b)
    merges = []
    max_merges = vocab_size - 256 - len(specials)
    while len(merges) < max_merges:
        pairs = {}
        for w, syms in words.items():
            for p in zip(syms, syms[1:]):
                pairs[p] = pairs.get(p, 0) + counts[w]
        best = None
        for p, n in pairs.items():
            if tok[p[0]] + tok[p[1]] in spelled:
                continue
            if best is None or n > pairs[best] or (n == pairs[best] and p < best):
                best = p
        if best is None or pairs[best] < min_count:
            break
        c = len(tok)
        tok.append(tok[best[0]] + tok[best[1]])
        spelled.add(tok[c])
        merges.append(best)
        for w, syms in words.items():
            if best[0] in syms:
                words[w] = merge_word(syms, best[0], best[1], c)
    ids = [i for w in order for i in words[w]]
    return tok, merges, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--pre", default="llama-bpe", choices=sorted(PATTERNS))
    ap.add_argument("--special", action="append")
    ap.add_argument("--min-pair-count", type=int, default=2)
    ap.add_argument("--ids", action="store_true")
    a = ap.parse_args()
    docs = []
    for f in a.files:
        with open(f, "rb") as fh:
            docs.append(fh.read())
    specials = a.special if a.special is not None else DEFAULT_SPECIALS
    tok, merges, ids = train(docs, a.vocab_size, a.pre, specials, a.min_pair_count)
    out = sys.stdout
    for l, r in merges:
        out.write(f"{tok[l].hex()} {tok[r].hex()}\n")
    if a.ids:
        out.write("ids: " + " ".join(map(str, ids)) + "\n")


if __name__ == "__main__":
    main()
