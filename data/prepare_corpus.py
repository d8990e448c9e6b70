#!/usr/bin/python3
"""Build the pretraining corpus for `fucina pretrain` from Debian packages.

Sources (each optional; the default is every one that is installed):

  fortunes  the fortune cookie databases of the `fortunes` and `fortunes-min`
            packages (/usr/share/games/fortunes; the offensive set of
            `fortunes-off` is never read): one document per fortune.
  gcide     the GNU Collaborative International Dictionary of English of the
            `dict-gcide` package (/usr/share/dictd/gcide.dict.dz, read with
            gzip: dictzip is gzip-compatible): one document per headword,
            its entries turned into plain "word (pos.): definition" text.
  pydoc     the Python documentation of the `python3-doc` package: the
            reStructuredText sources it ships as plain text
            (/usr/share/doc/python3.X/html/_sources/**/*.rst.txt), lightly
            de-marked, one document per section.

Output: OUT/train.jsonl and OUT/val.jsonl, one {"text": "..."} per line.
A document goes to val when int(sha256(text)) % 100 < 2, so the split of a
document never depends on which other documents exist. Documents are written
in the order of their SHA-256 (a fixed shuffle that mixes the sources), and
--max-mb keeps a prefix of that order, so a capped corpus is an unbiased,
stable sample. Exact duplicate documents are written once.

Standard library only; deterministic: two runs on the same packages give
byte-identical files.
"""

import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import sys
import time

FORTUNE_DIR = "/usr/share/games/fortunes"
GCIDE_DICT = "/usr/share/dictd/gcide.dict.dz"
GCIDE_INDEX = "/usr/share/dictd/gcide.index"
PYDOC_GLOB = "/usr/share/doc/python3*/html/_sources"  # python3-doc

ALL_SOURCES = ("fortunes", "gcide", "pydoc")
PACKAGE_OF = {
    "fortunes": "fortunes fortunes-min",
    "gcide": "dict-gcide",
    "pydoc": "python3-doc",
}
VAL_PERCENT = 2


# --------------------------------------------------------------------------
# normalization

_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLANKS = re.compile(r"\n{4,}")  # 3+ blank lines


def normalize(text):
    """UTF-8 text with \\n line ends, no trailing spaces, no control
    characters, at most two consecutive blank lines, no leading or trailing
    blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\ufeff", "")
    text = _CTRL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANKS.sub("\n\n\n", text)
    return text.strip("\n")


def decode_bytes(raw):
    """UTF-8, falling back to cp1252 (then Latin-1) for stray legacy bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    for piece in re.split(rb"([\x80-\xff]+)", raw):
        if not piece:
            continue
        try:
            out.append(piece.decode("utf-8"))
        except UnicodeDecodeError:
            try:
                out.append(piece.decode("cp1252"))
            except UnicodeDecodeError:
                out.append(piece.decode("latin-1"))
    return "".join(out)


# --------------------------------------------------------------------------
# fortunes

_OVERSTRIKE = re.compile(r".\x08")  # "_\bX" underline, "X\bX" bold


def fortune_files():
    """The fortune text files: regular files without an extension, top level
    only (so never the offensive set under off/)."""
    if not os.path.isdir(FORTUNE_DIR):
        return []
    out = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if "." in name or os.path.islink(path) or not os.path.isfile(path):
            continue
        out.append(path)
    return out


def read_fortunes():
    """Yield (file name, text) for every fortune."""
    for path in fortune_files():
        with open(path, "rb") as f:
            text = decode_bytes(f.read())
        text = text.replace("\r\n", "\n")
        text = _OVERSTRIKE.sub("", text)
        record = []
        for line in text.split("\n") + ["%"]:
            if line.rstrip() == "%":
                body = normalize("\n".join(l.expandtabs(8) for l in record))
                if body.strip():
                    yield os.path.basename(path), body
                record = []
            else:
                record.append(line)


# --------------------------------------------------------------------------
# GCIDE

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64num(s):
    v = 0
    for c in s:
        v = v * 64 + _B64.index(c)
    return v


# Character escapes of the dictd conversion of GCIDE, [xx], that we render.
# Pronunciation-only marks (macrons, breves, dots under) become the base
# letter; the common foreign letters become their Unicode form.
_GCIDE_CHARS = {
    "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "=ae": "æ",
    "'e": "é", "'a": "á", "'i": "í", "'o": "ó", "'u": "ú", "'E": "É",
    "`e": "è", "`a": "à", "`i": "ì", "`o": "ò", "`u": "ù",
    '"o': "ö", '"e': "ë", '"u': "ü", '"i': "ï", '"a': "ä", "aum": "ä",
    "^o": "ô", "^u": "û", "^a": "â", "^e": "ê", "^i": "î",
    "~n": "ñ", "~e": "e", "~a": "ã", "~o": "õ", ",c": "ç",
    "eth": "ð", "thorn": "þ", "yogh": "ȝ", "ng": "ŋ", "th": "th",
    "deg": "°", "sect": "§", "pounds": "£", "root": "√", "bprime": "″",
    "prime": "′", "frac12": "½", "frac14": "¼", "frac34": "¾",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ",
    "epsilon": "ε", "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π",
    "rho": "ρ", "sigma": "σ", "Sigma": "Σ", "tau": "τ", "phi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Omega": "Ω",
    "imac": "i", "asl": "a", "add": "a", "udd": "u", "dsdot": "d",
    "bar": "", "=oo": "oo", "oo^": "oo", "=oo^": "oo",
}
for _c in "aeiouyAEIOUY":
    for _m in ("=", "-", "."):
        _GCIDE_CHARS.setdefault(_m + _c, _c)
    _GCIDE_CHARS.setdefault(_c + "^", _c)
    _GCIDE_CHARS.setdefault("*" + _c, _c)
for _c in "rtnsdhzlmk":
    _GCIDE_CHARS.setdefault("." + _c, _c)
_GCIDE_CHAR_RE = re.compile(
    r"\[(" + "|".join(re.escape(k) for k in
                      sorted(_GCIDE_CHARS, key=len, reverse=True)) + r")\]")

# Source tags on their own line: [1913 Webster], [WordNet 1.5 +PJC], ...
_SOURCE_TAG = re.compile(
    r"^\s*\[(?:[^\]]*(?:Webster|WordNet|PJC|RDH|RHUD|Century|Chambers|"
    r"Johnson|Source|Dict|Encyc|Rees|Gould|Hooper|Cyc)[^\]]*)\]\s*$",
    re.IGNORECASE)
# The same tags inside a line ("[Obs.] [1913 Webster]"); a few entries of
# the data carry a stray next headword after the tag, dropped with it.
_SOURCE_TAG_INLINE = re.compile(
    r"[ \t]*\[(?:1913 Webster|Webster 1913[^\]]*|WordNet[^\]]*|PJC\.?|RDH|"
    r"RHUD|Century Dict\.?|Chambers[^\]]*)\](?:[ \t]+[A-Z][a-z-]+[ \t]*$)?",
    re.M)
_ATTRIBUTION = re.compile(r"\s*--\s?[A-Z0-9\[][^\n]*$")  # "--Chaucer."
_SENSE_START = re.compile(
    r"^(?:\d+\.\s|\([a-z]\)\s|Note:|Syn\.|Note\s|Specif\.|Usage:)")


def gcide_entries():
    """Yield raw entry bytes of GCIDE in file order, one per distinct
    (offset, length) of the index, skipping the 00-database-* records."""
    seen = set()
    spans = []
    with open(GCIDE_INDEX, "rb") as f:
        for line in f:
            parts = line.rstrip(b"\n").split(b"\t")
            if len(parts) < 3 or parts[0].startswith(b"00-"):
                continue
            span = (_b64num(parts[1].decode("ascii")),
                    _b64num(parts[2].decode("ascii")))
            if span not in seen:
                seen.add(span)
                spans.append(span)
    spans.sort()
    with gzip.open(GCIDE_DICT, "rb") as f:
        data = f.read()
    for off, length in spans:
        yield data[off:off + length]


def _skip_balanced(s, i, open_c, close_c):
    """Index just past the bracket group starting at s[i] == open_c."""
    depth = 0
    while i < len(s):
        if s[i] == open_c:
            depth += 1
        elif s[i] == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(s)


def _clean_inline(s):
    s = s.replace("{", "").replace("}", "")
    s = s.replace("``", "\u201c").replace("''", "\u201d")
    s = re.sub(r"[ \t]+", " ", s)
    s = re.sub(r" ([,.;:])", r"\1", s)
    return s.strip()


def parse_gcide_entry(raw):
    """Turn one raw entry into (headword, pos, senses, paragraphs).

    headword: the first headword ("Apple"); pos: "n.", "v. t." or "";
    senses: the body split into its senses and notes (each one line of
    text); returns None for an entry that has no definition text."""
    text = decode_bytes(raw).replace("\r\n", "\n")
    text = _GCIDE_CHAR_RE.sub(lambda m: _GCIDE_CHARS[m.group(1)], text)
    lines = [l for l in text.split("\n") if not _SOURCE_TAG.match(l)]
    lines = [_ATTRIBUTION.sub("", _SOURCE_TAG_INLINE.sub("", l))
             for l in lines]
    text = "\n".join(lines).strip("\n")
    if not text:
        return None

    # Header: Word \pron\ (pron), Word2 \pron2\, pos. [etymology] (Domain)
    m = re.match(r"([^\\\n]+?)\s*\\", text)
    if not m:
        return None
    head = _clean_inline(m.group(1).replace('"', "").replace("*", "")
                         .replace("`", ""))
    i = m.end() - 1
    while True:
        i = _skip_balanced_backslash(text, i)
        j = i
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j < len(text) and text[j] == "(":
            j = _skip_balanced(text, j, "(", ")")
        i = j
        # another headword: ", Colour \Col"our\"
        m2 = re.match(r",?\s*(?:or\s+)?[^\\\n,.\[]{1,40}?\s*\\", text[i:])
        if m2 and "\\" in m2.group(0):
            i = i + m2.end() - 1
            continue
        break
    rest = text[i:]
    rest = rest.lstrip(" ,\t")
    # part of speech: up to a bracket, a sense number or the end of the line
    mpos = re.match(r"((?:(?:[a-z]{1,6}\.|&)\s*)+)", rest)
    pos = ""
    if mpos:
        pos = re.sub(r"\s+", " ", mpos.group(1)).strip().rstrip(",")
        rest = rest[mpos.end():]
    # etymology / inflection groups right after the header
    while True:
        r2 = rest.lstrip(" ,\t\n")
        if r2.startswith("["):
            rest = r2[_skip_balanced(r2, 0, "[", "]"):]
            continue
        break
    rest = rest.lstrip(" ,;.\t")

    # Body: paragraphs (blank-line separated); within a paragraph, a line
    # that starts a new sense or note starts a new item.
    items = []
    for para in re.split(r"\n\s*\n", rest):
        cur = []
        for line in para.split("\n"):
            stripped = line.strip()
            if not stripped:
                continue
            if cur and _SENSE_START.match(stripped):
                items.append(" ".join(cur))
                cur = []
            cur.append(stripped)
        if cur:
            items.append(" ".join(cur))
        items.append("")  # paragraph break marker
    senses = []
    for it in items:
        if it == "":
            if senses and senses[-1] != "":
                senses.append("")
            continue
        it = _subentry(it)
        it = _clean_inline(it)
        if it:
            senses.append(it)
    while senses and senses[-1] == "":
        senses.pop()
    if not any(senses):
        return None
    return head, pos, senses


def _skip_balanced_backslash(s, i):
    """s[i] is the opening backslash of a \\pronunciation\\ group."""
    j = s.find("\\", i + 1)
    return len(s) if j < 0 else j + 1


_SUBENTRY = re.compile(
    r"^((?:\{[^{}]+\}(?:\s*(?:,|or|,\s*or)\s*(?=\{))?)+)"
    r"(\s*\([^()]*\))?\s*[,.]\s+")


def _subentry(item):
    """"{Apple sauce}, stewed apples." -> "Apple sauce: stewed apples."."""
    m = _SUBENTRY.match(item)
    if not m:
        return item
    heads = m.group(1)
    label = m.group(2) or ""
    return heads + label + ": " + item[m.end():]


def format_gcide(group):
    """One document from the parsed entries of one headword."""
    head = group[0][0]
    blocks = []
    for _, pos, senses in group:
        first = senses[0]
        label = head + (" (" + pos + ")" if pos else "")
        lines = [label + ": " + first]
        for s in senses[1:]:
            lines.append(s)
        block = "\n".join(lines)
        block = re.sub(r"\n{2,}", "\n\n", block)
        blocks.append(block)
    return normalize("\n\n".join(blocks))


def read_gcide():
    """Yield ("gcide", text): one document per run of consecutive entries
    with the same headword (so the noun and verb of "Apple" are one)."""
    group = []
    for raw in gcide_entries():
        parsed = parse_gcide_entry(raw)
        if parsed is None:
            continue
        if group and parsed[0].lower() != group[0][0].lower():
            doc = format_gcide(group)
            if doc:
                yield "gcide", doc
            group = []
        group.append(parsed)
    if group:
        doc = format_gcide(group)
        if doc:
            yield "gcide", doc


# --------------------------------------------------------------------------
# Python documentation

_RST_UNDER = re.compile(r"^([=\-~^*\"#+'`:.])\1{2,}\s*$")
_RST_ROLE = re.compile(r":[a-zA-Z:]+:`~?!?([^`<]*?)\s*(?:<[^>`]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>`]*>`_{1,2}")
_RST_DROP_DIRECTIVE = re.compile(
    r"^\.\.\s+(?:index|_[^:]*|highlight|sectionauthor|moduleauthor|"
    r"toctree|only|testsetup|testcleanup|raw|include|"
    r"literalinclude|image|figure|rubric|tabularcolumns|"
    r"currentmodule|module|program|opcode|c:|cmdoption|envvar|"
    r"audit-event|impl-detail|availability|productionlist|[|])"
    r"|^\.\.\s*$|^\.\.\s+[^:]*$")
PYDOC_MAX_CHARS = 12000


def _version_key(path):
    m = re.search(r"python(\d+)\.(\d+)", path)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def pydoc_root():
    """The real _sources directory of the newest installed python3.X-doc
    (the python3-*/ doc directories are symlinks to it)."""
    roots = {os.path.realpath(d) for d in glob.glob(PYDOC_GLOB)}
    roots = sorted((d for d in roots if os.path.isdir(d)),
                   key=lambda d: (_version_key(d), d))
    return roots[-1] if roots else None


def _rst_to_text(text):
    out = []
    lines = text.split("\n")
    skip_indent = None
    for line in lines:
        if skip_indent is not None:
            if not line.strip() or (len(line) - len(line.lstrip()) > 0):
                continue
            skip_indent = None
        if _RST_DROP_DIRECTIVE.match(line):
            skip_indent = True
            continue
        out.append(line)
    text = "\n".join(out)
    text = _RST_DIRECTIVE.sub(_rst_directive, text)
    text = re.sub(r"(\S)::$", r"\1:", text, flags=re.M)
    text = re.sub(r"^(\s*)::$\n", "", text, flags=re.M)
    text = _RST_NUMBERED_ROLE.sub(
        lambda m: (_RST_NUMBERED[m.group(1).lower()] + " "
                   + m.group(2)).strip().replace("gh- ", "gh-"), text)
    text = _RST_ROLE.sub(lambda m: m.group(1), text)
    text = _RST_LINK.sub(lambda m: m.group(1), text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"(?<![`\w])`([^`\n]+)`(?!`)_?", r"\1", text)
    text = re.sub(r"\|([A-Za-z0-9_-]+)\|", r"\1", text)
    return text


_RST_NUMBERED = {"issue": "issue", "gh": "gh-", "pep": "PEP", "rfc": "RFC",
                 "source": ""}
_RST_NUMBERED_ROLE = re.compile(r":(issue|gh|pep|rfc|source):`([^`]+)`",
                                re.IGNORECASE)
_RST_DIRECTIVE = re.compile(r"^([ \t]*)\.\.[ \t]+([a-z][\w:-]*)::[ \t]*(.*)$",
                            re.M)
_RST_LABELS = {
    "note": "Note:", "warning": "Warning:", "seealso": "See also:",
    "important": "Important:", "tip": "Tip:", "caution": "Caution:",
    "attention": "Attention:", "hint": "Hint:", "danger": "Danger:",
    "admonition": "", "topic": "",
    "versionadded": "New in version", "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "deprecated-removed": "Deprecated since version",
}
_RST_KINDS = {"class": "class", "exception": "exception",
              "decorator": "@", "module": "module"}


def _rst_directive(m):
    indent, name, arg = m.group(1), m.group(2), m.group(3).strip()
    name = name.split(":")[-1]
    if name in _RST_LABELS:
        label = _RST_LABELS[name]
        if name.startswith(("version", "deprecated")):
            return indent + (label + " " + arg).rstrip() + "."
        return indent + (label + " " + arg).strip()
    if name in _RST_KINDS:
        kind = _RST_KINDS[name]
        return indent + (kind + arg if kind == "@" else kind + " " + arg)
    if name in ("code-block", "sourcecode", "code", "doctest", "testcode",
                "testoutput", "parsed-literal", "csv-table", "table",
                "list-table", "glossary", "centered", "hlist", "cssclass"):
        return ""
    # function, method, attribute, data, describe, opcode, ...: the signature
    return indent + arg


def _rst_sections(text):
    """Split at section titles (a line underlined by a line of one
    punctuation character, optionally overlined)."""
    lines = text.split("\n")
    starts = [0]
    for i in range(1, len(lines)):
        if (_RST_UNDER.match(lines[i]) and lines[i - 1].strip()
                and not _RST_UNDER.match(lines[i - 1])
                and len(lines[i].rstrip()) >= len(lines[i - 1].rstrip()) - 1):
            start = i - 1
            if start >= 1 and _RST_UNDER.match(lines[start - 1]):
                start -= 1
            if start > starts[-1]:
                starts.append(start)
    starts.append(len(lines))
    for a, b in zip(starts, starts[1:]):
        yield "\n".join(lines[a:b])


def _split_long(text, limit):
    if len(text) <= limit:
        return [text]
    parts, cur, size = [], [], 0
    for para in text.split("\n\n"):
        if cur and size + len(para) + 2 > limit:
            parts.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(para)
        size += len(para) + 2
    if cur:
        parts.append("\n\n".join(cur))
    return parts


def read_pydoc():
    root = pydoc_root()
    if root is None:
        return
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".rst.txt") or name.endswith(".txt"):
                files.append(os.path.join(dirpath, name))
    for path in sorted(files):
        rel = os.path.relpath(path, root)
        if rel.startswith("whatsnew/changelog"):
            continue  # a huge list of issue numbers, not prose
        with open(path, "rb") as f:
            text = decode_bytes(f.read())
        text = _rst_to_text(normalize(text))
        for section in _rst_sections(text):
            section = normalize(section)
            for part in _split_long(section, PYDOC_MAX_CHARS):
                part = normalize(part)
                # a section that is only its title is not a document
                if len(part) < 80 or len(part.split("\n")) < 3:
                    continue
                yield rel, part


# --------------------------------------------------------------------------
# sources and main


def installed(source):
    if source == "fortunes":
        return bool(fortune_files())
    if source == "gcide":
        return os.path.isfile(GCIDE_DICT) and os.path.isfile(GCIDE_INDEX)
    if source == "pydoc":
        return pydoc_root() is not None
    return False


def missing_reason(source):
    if source == "fortunes":
        where = FORTUNE_DIR
    elif source == "gcide":
        where = GCIDE_DICT
    else:
        where = PYDOC_GLOB
    return "%s not found (apt-get install %s)" % (where, PACKAGE_OF[source])


READERS = {"fortunes": read_fortunes, "gcide": read_gcide,
           "pydoc": read_pydoc}


def is_val(digest):
    return int.from_bytes(digest, "big") % 100 < VAL_PERCENT


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build OUT/train.jsonl and OUT/val.jsonl ({\"text\": ...} "
                    "per line) from Debian's fortunes, GCIDE and Python "
                    "documentation packages.")
    ap.add_argument("--out", default="corpus/",
                    help="output directory (default: corpus/)")
    ap.add_argument("--sources", default=None,
                    help="comma-separated subset of %s (default: every one "
                         "that is installed)" % ",".join(ALL_SOURCES))
    ap.add_argument("--max-mb", type=float, default=None,
                    help="cap train.jsonl's document text at N MB (10^6 "
                         "bytes); val is not capped")
    args = ap.parse_args(argv)

    if args.sources is None:
        wanted = list(ALL_SOURCES)
        explicit = False
    else:
        wanted = [s.strip() for s in args.sources.split(",") if s.strip()]
        explicit = True
        bad = [s for s in wanted if s not in ALL_SOURCES]
        if bad or not wanted:
            ap.error("unknown source(s) %s; choose from %s"
                     % (",".join(bad) or "(none)", ",".join(ALL_SOURCES)))
    sources = []
    for s in wanted:
        if installed(s):
            sources.append(s)
        elif explicit:
            sys.exit("prepare_corpus: source %s: %s" % (s, missing_reason(s)))
        else:
            print("skipped %-8s %s" % (s, missing_reason(s)), file=sys.stderr)
    if not sources:
        sys.exit("prepare_corpus: no source is installed; as root run:\n"
                 "  apt-get install fortunes fortunes-min dict-gcide "
                 "python3-doc")

    t0 = time.time()
    docs = {}  # sha256 digest -> (source, text); first occurrence wins
    dups = {s: 0 for s in sources}
    for s in sources:
        for _, text in READERS[s]():
            if not text.strip():
                continue
            digest = hashlib.sha256(text.encode("utf-8")).digest()
            if digest in docs:
                dups[s] += 1
                continue
            docs[digest] = (s, text)

    os.makedirs(args.out, exist_ok=True)
    cap = None if args.max_mb is None else int(args.max_mb * 1e6)
    stats = {(s, sp): [0, 0] for s in sources for sp in ("train", "val")}
    dropped = [0, 0]
    train_bytes = 0
    paths = {sp: os.path.join(args.out, sp + ".jsonl")
             for sp in ("train", "val")}
    tmp = {sp: paths[sp] + ".tmp" for sp in paths}
    files = {sp: open(tmp[sp], "w", encoding="utf-8", newline="\n")
             for sp in tmp}
    try:
        for digest in sorted(docs):
            source, text = docs[digest]
            nbytes = len(text.encode("utf-8"))
            split = "val" if is_val(digest) else "train"
            if split == "train" and cap is not None:
                if train_bytes + nbytes > cap:
                    dropped[0] += 1
                    dropped[1] += nbytes
                    continue
                train_bytes += nbytes
            files[split].write(json.dumps({"text": text}, ensure_ascii=False)
                               + "\n")
            stats[(source, split)][0] += 1
            stats[(source, split)][1] += nbytes
    finally:
        for f in files.values():
            f.close()
    for sp in paths:
        os.replace(tmp[sp], paths[sp])

    print("source      split   documents        bytes")
    tot = {"train": [0, 0], "val": [0, 0]}
    for s in sources:
        for sp in ("train", "val"):
            n, b = stats[(s, sp)]
            tot[sp][0] += n
            tot[sp][1] += b
            print("%-10s  %-5s  %10d  %11d" % (s, sp, n, b))
        if dups[s]:
            print("%-10s  (%d exact duplicates left out)" % (s, dups[s]))
    for sp in ("train", "val"):
        print("%-10s  %-5s  %10d  %11d  -> %s (%d bytes on disk)"
              % ("all", sp, tot[sp][0], tot[sp][1], paths[sp],
                 os.path.getsize(paths[sp])))
    if cap is not None:
        print("--max-mb %g: %d documents (%d bytes) left out of train"
              % (args.max_mb, dropped[0], dropped[1]))
    print("%.1f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
