"""Render the registry through the templates into a build-tree directory.

Outputs are deterministic (sorted iteration, no timestamps, no absolute
paths) and a file is rewritten only when its content changed, so touching
kernels.yaml without changing it recompiles nothing.
"""
import hashlib
import json
import os
import re

import jinja2

from .model import Arm
from .registry import KNOWN_FEATURES, template_for

COMPUTE_CTYPE = {"f32": "float", "f64": "double", "i32": "int32_t"}
VOCAB_PREFIX = {"f32": "vf", "f64": "vd", "i32": "vi"}

GLUE = [
    # (template, output path)
    ("glue/fck_isa.h.j2", "include/fucina/gen/fck_isa.h"),
    ("glue/fck_kernels.h.j2", "include/fucina/gen/fck_kernels.h"),
    ("glue/fck_arms.inc.j2", "include/fucina/gen/fck_arms.inc"),
    ("glue/fck_dispatch_table.c.j2", "src/fck_dispatch_table.c"),
    ("glue/fck_bench_table.c.j2", "bench/fck_bench_table.c"),
]

_CALL_RE = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")
_CONST_RE = re.compile(r"\bc\(\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*\)")


def vexpr(expr, compute):
    """Translate a vector expression of the templates' vocabulary into C.

    `exp(x)` becomes `vf_exp(x)` (f32 compute) or `vd_exp(x)` (f64); `c(0.5)`
    becomes a broadcast constant `vf_set1(0.5f)`. Variables pass unchanged.
    """
    prefix = VOCAB_PREFIX[compute]
    consts = []

    def hide(m):
        consts.append(m.group(1))
        return f"@{len(consts) - 1}@"

    def literal(num):
        if "." not in num and "e" not in num.lower():
            num += ".0"
        return num + ("f" if compute == "f32" else "")

    out = _CONST_RE.sub(hide, expr)
    out = _CALL_RE.sub(lambda m: f"{prefix}_{m.group(1)}(", out)
    return re.sub(r"@([0-9]+)@", lambda m: f"{prefix}_set1({literal(consts[int(m.group(1))])})", out)


def _ctype_lit(value, compute):
    s = repr(float(value))
    return s + "f" if compute == "f32" else s


class Renderer:
    def __init__(self, reg, template_dir, arch, disabled_isas=()):
        self.reg = reg
        self.template_dir = template_dir
        self.arch = arch
        self.disabled = set(disabled_isas)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(template_dir),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        self.env.filters["vexpr"] = vexpr
        self.env.filters["upper"] = str.upper
        self.env.tests["mentions"] = lambda expr, name: re.search(rf"\b{re.escape(name)}\b", expr) is not None
        self.env.globals["lit"] = _ctype_lit
        self.env.globals["tol_c"] = tol_c

    # -- what gets rendered -------------------------------------------------
    def isas(self):
        return [i for i in self.reg.isas_for_arch(self.arch) if i.name not in self.disabled]

    def arms(self):
        names = {i.name for i in self.isas()}
        return [a for a in self.reg.arms_for_arch(self.arch) if a.isa.name in names]

    def families(self):
        used = sorted({a.family.name for a in self.arms()})
        return [self.reg.families[f] for f in used]

    def outputs(self):
        """[(relative path, kind, isa or None)] in a stable order."""
        out = []
        for a in sorted(self.arms(), key=lambda a: a.path):
            out.append((a.path, "kernel", a.isa.name))
            if a.isa.twin:
                out.append((twin_path(a), "twin", a.isa.name))
        for _, path in GLUE:
            out.append((path, "glue", None))
        for fam in self.families():
            out.append((f"tests/test_{fam.name}.c", "test", None))
        return out

    # -- rendering ------------------------------------------------------------
    def arm_context(self, a: Arm, twin=False):
        ct = a.dtype.compute
        fn = a.symbol + ("_twin" if twin else "")
        tpl = template_for(self.template_dir, a.family, a.isa)
        return {
            "arm": a, "k": a.kernel, "fam": a.family, "d": a.dtype, "isa": a.isa,
            "tile": a.tile, "fn": fn, "T": a.dtype.ctype, "CT": COMPUTE_CTYPE[ct],
            "P": VOCAB_PREFIX[ct], "V": VOCAB_PREFIX[ct] + "_t", "W": a.isa.width.get(ct, 1),
            "ct": ct, "attrs": a.kernel.attrs, "to": a.kernel.attrs.get("_to"), "params": a.params, "twin": twin,
            "mr": (a.mr_nr or (0, 0))[0], "nr": (a.mr_nr or (0, 0))[1],
            "blk": a.dtype.block, "partner": self.partner_of(a.dtype),
            "signature": signature(a, fn), "template": tpl,
            "provenance": provenance(a, tpl, self.reg.path, twin),
            "to_ct": lambda e, d=a.dtype: d.to_compute.format(e),
            "from_ct": lambda e, d=a.dtype: d.from_compute.format(e),
        }

    def partner_of(self, d):
        """The partner block (activation format) of a block dtype, else None."""
        if d.block is None or d.block.partner is None:
            return None
        return self.reg.dtypes[d.block.partner].block

    def render_arm(self, a, twin=False):
        ctx = self.arm_context(a, twin)
        return self.env.get_template(ctx["template"]).render(**ctx)

    def glue_context(self):
        arms = sorted(self.arms(), key=lambda a: (a.slot, -a.isa.rank, a.tile))
        slots = {}
        for a in arms:
            slots.setdefault(a.slot, []).append(a)
        features = KNOWN_FEATURES[self.arch]
        return {
            "arch": self.arch, "isas": self.isas(), "all_isas": sorted(self.reg.isas.values(), key=lambda i: (i.rank, i.name)),
            "arms": arms, "slots": slots, "families": self.families(), "dtypes": self.reg.dtypes,
            "features": features, "all_features": [f for a in sorted(KNOWN_FEATURES) for f in KNOWN_FEATURES[a]],
            "registry": os.path.basename(self.reg.path),
            "signature_of": lambda a, fn: signature(a, fn),
            "typedef_of": typedef_of, "COMPUTE_CTYPE": COMPUTE_CTYPE,
            "partner_of": self.partner_of, "bench_call": lambda a: bench_call(a, self.partner_of(a.dtype)),
        }

    def render_all(self):
        """{path: text} for every output."""
        files = {}
        for a in sorted(self.arms(), key=lambda a: a.path):
            files[a.path] = self.render_arm(a)
            if a.isa.twin:
                files[twin_path(a)] = self.render_arm(a, twin=True)
        g = self.glue_context()
        for tpl, path in GLUE:
            files[path] = self.env.get_template(tpl).render(**g)
        for fam in self.families():
            fam_arms = [a for a in g["arms"] if a.family.name == fam.name]
            files[f"tests/test_{fam.name}.c"] = self.env.get_template(f"{fam.template}/test.c.j2").render(
                fam=fam, fam_arms=fam_arms, **g)
        return files


def twin_path(a):
    return a.path.replace(f"kernels/{a.isa.name}/", f"kernels/{a.isa.name}_twin/", 1)


def signature(a, fn):
    to = a.kernel.attrs.get("_to")
    return a.family.signature.format(fn=fn, T=a.dtype.ctype, CT=COMPUTE_CTYPE[a.dtype.compute],
                                     U=to.ctype if to else "void")


def bench_call(a, partner=None):
    """The family's bench `call` for arm a: {fn} the symbol; for block formats
    also {elems} and {bytes} of the block and {pbytes} of its partner."""
    b = a.dtype.block
    return a.family.bench["call"].format(fn=a.symbol, elems=b.elems if b else 1, bytes=b.bytes if b else a.dtype.size,
                                         pbytes=partner.bytes if partner else (b.bytes if b else a.dtype.size))


def typedef_of(a):
    """The function-pointer typedef name shared by every arm of a slot."""
    return f"fck_{a.slot}_fn"


def provenance(a, tpl, registry_path, twin=False):
    line = a.kernel.line
    registry_path = a.kernel.path or registry_path
    extra = ", test-only twin" if twin else ""
    return (f"/* Generated by fucina_gen from {os.path.basename(registry_path)} (kernel '{a.kernel.name}' "
            f"at line {line}; {a.dtype.name}, {a.isa.name}, u{a.tile}{extra}) + templates/{tpl}. DO NOT EDIT. */")


def tol_c(tol, n_expr="0"):
    """A tolerance spec as a C initializer of struct fct_tol."""
    if tol is None or tol["kind"] == "exact":
        return "{FCT_TOL_EXACT, 0, 0.0, 0.0, 0.0}"
    return "{FCT_TOL_BOUND, %d, %r, %r, %r}" % (tol.get("ulp", 0), float(tol.get("abs", 0.0)),
                                                 float(tol.get("rel", 0.0)), float(tol.get("sum_bound", 0.0)))


def write_tree(files, out_dir, stamp=None):
    """Write files under out_dir, only where content changed; drop stale outputs.

    Returns (written, unchanged, removed) counts.
    """
    written = unchanged = removed = 0
    manifest_path = os.path.join(out_dir, "MANIFEST.json")
    previous = []
    if os.path.exists(manifest_path):
        try:
            with open(manifest_path, encoding="utf-8") as f:
                previous = json.load(f).get("files", [])
        except (OSError, ValueError):
            previous = []
    for rel in sorted(files):
        path = os.path.join(out_dir, rel)
        data = files[rel].encode("utf-8")
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    unchanged += 1
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        written += 1
    for rel in previous:
        if rel not in files:
            try:
                os.remove(os.path.join(out_dir, rel))
                removed += 1
            except OSError:
                pass
    manifest = {"files": sorted(files),
                "sha256": {rel: hashlib.sha256(files[rel].encode("utf-8")).hexdigest() for rel in sorted(files)}}
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    _write_if_changed(manifest_path, text)
    if stamp:
        os.makedirs(os.path.dirname(os.path.abspath(stamp)), exist_ok=True)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write("rendered\n")
    return written, unchanged, removed


def _write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return True
