"""Load kernels.yaml, validate it, and expand it into Arms.

Every error names the file, the line and the offending key. The checks are the
registry's invariants (docs/KERNELS.md, "Invariants"):
  - no unknown keys at any level;
  - every ISA's features are ones the C detector knows (KNOWN_FEATURES);
  - every kernel names known families, dtypes and ISAs, and has a scalar arm;
  - every (kernel, dtype) has a tolerance; NaN policy is one of NAN_POLICIES;
  - symbol names are unique; every arm has a template to render it;
  - each arm's dispatch tile is one of its tiles.
"""
import os
import re

from . import yamlsrc
from .model import Arm, Block, DType, Family, Isa, Kernel, Registry
from .yamlsrc import LDict, LList, RegistryError

SCHEMA_VERSION = 1

# Must match src/core/cpu_features.c (x86: CPUID + XGETBV, AArch64: getauxval).
KNOWN_FEATURES = {
    "x86_64": ["sse2", "avx2", "fma", "f16c", "os_ymm", "avx512f", "avx512bw", "avx512dq",
               "avx512vl", "avx512_vnni", "avx512_bf16", "os_zmm", "avx_vnni"],
    "aarch64": ["asimd", "fphp", "asimddp", "i8mm", "bf16"],
}
ALL_FEATURES = [f for arch in sorted(KNOWN_FEATURES) for f in KNOWN_FEATURES[arch]]
ARCHES = tuple(sorted(KNOWN_FEATURES))
NAN_POLICIES = ("propagate", "any", "unchecked")
COMPUTE_TYPES = ("f32", "f64", "i32")

TOP_KEYS = {"schema", "isas", "dtypes", "blocks", "families", "kernels", "include"}
OPTIONAL_TOP_KEYS = {"include", "blocks"}
INCLUDED_KEYS = {"blocks", "families", "kernels"}
ISA_KEYS = {"arch", "cflags", "requires", "rank", "vocab", "width", "parent", "twin", "doc"}
TWIN_KEYS = {"cflags", "requires", "define"}
DTYPE_KEYS = {"ctype", "size", "compute", "to_compute", "from_compute", "ulp_bits", "doc"}
BLOCK_KEYS = {"ctype", "elems", "bytes", "partner", "mins", "doc"}
FAMILY_KEYS = {"doc", "signature", "suffix", "kernel_keys", "required_keys", "bench", "arms",
               "ref_tolerance", "template", "operands", "blocks"}
KERNEL_KEYS = {"name", "family", "dtypes", "doc", "tolerance", "ref_tolerance", "nan", "arms"}
ARM_KEYS = {"tiles", "dispatch", "dtypes", "params"}
TOLERANCE_KEYS = {"ulp", "abs", "rel", "sum_bound"}


class _Ctx:
    def __init__(self, path):
        self.path = path

    def err(self, node, key, message):
        line = node.line_of(key) if isinstance(node, (LDict, LList)) else 0
        path = getattr(node, "path", None) or self.path
        raise RegistryError(path, line, message)

    def require_map(self, parent, key, value):
        if not isinstance(value, LDict):
            self.err(parent, key, f"'{key}' must be a mapping")
        return value

    def check_keys(self, node, allowed, where):
        for k in node:
            if k not in allowed:
                self.err(node, k, f"unknown key '{k}' in {where} (allowed: {', '.join(sorted(allowed))})")

    def str_list(self, parent, key, value):
        if value is None:
            return ()
        if not isinstance(value, LList) or not all(isinstance(v, str) for v in value):
            self.err(parent, key, f"'{key}' must be a list of strings")
        return tuple(value)


def parse_tolerance(ctx, parent, key, value):
    """exact | {ulp: N} | {abs: a, rel: r} | {ulp: N, abs: a} | {sum_bound: c}."""
    if value == "exact":
        return {"kind": "exact"}
    if not isinstance(value, LDict) or not value:
        ctx.err(parent, key, f"tolerance '{key}' must be 'exact' or a mapping of ulp/abs/rel/sum_bound")
    ctx.check_keys(value, TOLERANCE_KEYS, f"tolerance '{key}'")
    out = {"kind": "bound", "ulp": 0, "abs": 0.0, "rel": 0.0, "sum_bound": 0.0}
    for k, v in value.items():
        if isinstance(v, str):  # YAML 1.1 reads 6e-8 (no dot) as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            ctx.err(value, k, f"tolerance '{key}.{k}' must be a non-negative number")
        out[k] = v
    if "ulp" in value and not isinstance(value["ulp"], int):
        ctx.err(value, "ulp", f"tolerance '{key}.ulp' must be an integer")
    return out


def _parse_isas(ctx, raw):
    isas = {}
    for name, spec in raw.items():
        spec = ctx.require_map(raw, name, spec)
        ctx.check_keys(spec, ISA_KEYS, f"isa '{name}'")
        for req in ("arch", "rank"):
            if req not in spec:
                ctx.err(raw, name, f"isa '{name}' is missing '{req}'")
        arch = ctx.str_list(spec, "arch", spec["arch"])
        for a in arch:
            if a not in ARCHES:
                ctx.err(spec, "arch", f"isa '{name}': unknown arch '{a}' (known: {', '.join(ARCHES)})")
        requires = ctx.str_list(spec, "requires", spec.get("requires"))
        for f in requires:
            if not any(f in KNOWN_FEATURES[a] for a in arch):
                ctx.err(spec, "requires", f"isa '{name}': unknown CPU feature '{f}' "
                        f"(known for {'/'.join(arch)}: {', '.join(f2 for a in arch for f2 in KNOWN_FEATURES[a])})")
        rank = spec["rank"]
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            ctx.err(spec, "rank", f"isa '{name}': rank must be a non-negative integer")
        width = spec.get("width", LDict())
        if not isinstance(width, LDict):
            ctx.err(spec, "width", f"isa '{name}': width must map compute types to lanes")
        for ct, w in width.items():
            if ct not in COMPUTE_TYPES:
                ctx.err(width, ct, f"isa '{name}': width for unknown compute type '{ct}'")
            if not isinstance(w, int) or w < 1:
                ctx.err(width, ct, f"isa '{name}': width.{ct} must be a positive integer")
        twin = spec.get("twin")
        if twin is not None:
            twin = ctx.require_map(spec, "twin", twin)
            ctx.check_keys(twin, TWIN_KEYS, f"isa '{name}'.twin")
            twin = {"cflags": ctx.str_list(twin, "cflags", twin.get("cflags")),
                    "requires": ctx.str_list(twin, "requires", twin.get("requires")),
                    "define": str(twin.get("define", ""))}
        isas[name] = Isa(name=name, arch=arch, cflags=ctx.str_list(spec, "cflags", spec.get("cflags")),
                         requires=requires, rank=rank, vocab=spec.get("vocab", name),
                         width=dict(width), parent=spec.get("parent"), twin=twin,
                         doc=str(spec.get("doc", "")), line=raw.line_of(name))
    if "scalar" not in isas:
        ctx.err(raw, None, "the 'scalar' ISA is required: it is the specification every arm is tested against")
    for isa in isas.values():
        if isa.parent is not None and (isa.parent not in isas or isas[isa.parent].parent is not None):
            ctx.err(raw[isa.name], "parent", f"isa '{isa.name}': parent '{isa.parent}' must be a top-level ISA")
    by_rank = {}
    for isa in isas.values():
        for a in isa.arch:
            other = by_rank.get((a, isa.rank))
            if other:
                ctx.err(raw[isa.name], "rank", f"isa '{isa.name}': rank {isa.rank} is already used by '{other}' on {a}")
            by_rank[(a, isa.rank)] = isa.name
    return isas


def _parse_dtypes(ctx, raw):
    dtypes = {}
    for name, spec in raw.items():
        spec = ctx.require_map(raw, name, spec)
        ctx.check_keys(spec, DTYPE_KEYS, f"dtype '{name}'")
        for req in ("ctype", "size", "compute"):
            if req not in spec:
                ctx.err(raw, name, f"dtype '{name}' is missing '{req}'")
        if spec["compute"] not in COMPUTE_TYPES:
            ctx.err(spec, "compute", f"dtype '{name}': unknown compute type '{spec['compute']}'")
        dtypes[name] = DType(name=name, ctype=spec["ctype"], size=int(spec["size"]), compute=spec["compute"],
                             to_compute=spec.get("to_compute", "{}"), from_compute=spec.get("from_compute", "{}"),
                             ulp_bits=int(spec.get("ulp_bits", 0)), line=raw.line_of(name))
    return dtypes


def _parse_blocks(ctx, raw, dtypes):
    """Block-quantized formats: each becomes a dtype whose `block` is set.

    A block is `elems` values in a `bytes`-byte C struct `ctype`; `partner`
    names the activation format of its integer dot (a block of the same
    `elems`); `mins` names the struct field of the min scale, if the format has
    one (tests use it to bound cancellation between the scale and min terms)."""
    parsed = {}
    for name, spec in raw.items():
        spec = ctx.require_map(raw, name, spec)
        ctx.check_keys(spec, BLOCK_KEYS, f"block '{name}'")
        if name in dtypes:
            ctx.err(raw, name, f"block '{name}' has the name of a dtype")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9]*(_[a-zA-Z0-9]+)*", name):
            ctx.err(raw, name, f"block name {name!r} must be letters, digits and single underscores")
        for req in ("ctype", "elems", "bytes"):
            if req not in spec:
                ctx.err(spec, None, f"block '{name}' is missing '{req}'")
        for k in ("elems", "bytes"):
            v = spec[k]
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                ctx.err(spec, k, f"block '{name}': {k} must be a positive integer")
        if not isinstance(spec["ctype"], str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec["ctype"]):
            ctx.err(spec, "ctype", f"block '{name}': ctype must be a C type name")
        for k in ("partner", "mins"):
            if k in spec and not isinstance(spec[k], str):
                ctx.err(spec, k, f"block '{name}': {k} must be a name")
        parsed[name] = (spec, Block(name=name, ctype=spec["ctype"], elems=spec["elems"], bytes=spec["bytes"],
                                    partner=spec.get("partner"), mins=spec.get("mins"),
                                    doc=str(spec.get("doc", "")), line=raw.line_of(name)))
    for name, (spec, b) in parsed.items():
        if b.partner is not None:
            if b.partner not in parsed:
                ctx.err(spec, "partner", f"block '{name}': unknown partner '{b.partner}' "
                        f"(known blocks: {', '.join(sorted(parsed))})")
            if parsed[b.partner][1].elems != b.elems:
                ctx.err(spec, "partner", f"block '{name}': partner '{b.partner}' has {parsed[b.partner][1].elems} "
                        f"elements per block, not {b.elems}")
        dtypes[name] = DType(name=name, ctype=b.ctype, size=b.bytes, compute="f32", to_compute="{}",
                             from_compute="{}", ulp_bits=0, line=b.line, block=b)


def _parse_arms(ctx, parent, key, raw, isas, where):
    raw = ctx.require_map(parent, key, raw)
    out = {}
    for isa, spec in raw.items():
        if isa not in isas:
            ctx.err(raw, isa, f"{where}: unknown ISA '{isa}' (known: {', '.join(sorted(isas))})")
        if spec is None:
            spec = LDict()
        spec = ctx.require_map(raw, isa, spec)
        ctx.check_keys(spec, ARM_KEYS, f"{where}.arms.{isa}")
        tiles = spec.get("tiles", [1])
        if not isinstance(tiles, list) or not tiles or not all(_valid_tile(t) for t in tiles):
            ctx.err(spec, "tiles", f"{where}.arms.{isa}: tiles must be a non-empty list of positive integers "
                    f"or register tiles 'MRxNR'")
        dispatch = spec.get("dispatch", tiles[-1])
        if dispatch not in tiles:
            ctx.err(spec, "dispatch", f"{where}.arms.{isa}: dispatch tile {dispatch} is not among tiles {list(tiles)}")
        out[isa] = {"tiles": list(tiles), "dispatch": dispatch,
                    "dtypes": ctx.str_list(spec, "dtypes", spec.get("dtypes")) or None,
                    "params": dict(spec.get("params") or {}), "node": spec}
    return out


def _plain(v):
    """LDict/LList trees to plain dicts and lists (for templates)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _valid_tile(t):
    if isinstance(t, bool):
        return False
    if isinstance(t, int):
        return t > 0
    return isinstance(t, str) and re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", t) is not None


def _parse_families(ctx, raw, isas):
    fams = {}
    for name, spec in raw.items():
        spec = ctx.require_map(raw, name, spec)
        ctx.check_keys(spec, FAMILY_KEYS, f"family '{name}'")
        for req in ("signature", "arms"):
            if req not in spec:
                ctx.err(raw, name, f"family '{name}' is missing '{req}'")
        arms = _parse_arms(ctx, spec, "arms", spec["arms"], isas, f"family '{name}'")
        blocks = spec.get("blocks", False)
        if not isinstance(blocks, bool):
            ctx.err(spec, "blocks", f"family '{name}': blocks must be true or false")
        ref_tol = None
        if "ref_tolerance" in spec:
            ref_tol = parse_tolerance(ctx, spec, "ref_tolerance", spec["ref_tolerance"])
        fams[name] = Family(name=name, doc=str(spec.get("doc", "")), signature=spec["signature"],
                            suffix=str(spec.get("suffix", "")),
                            kernel_keys=ctx.str_list(spec, "kernel_keys", spec.get("kernel_keys")),
                            required_keys=ctx.str_list(spec, "required_keys", spec.get("required_keys")),
                            bench=dict(spec.get("bench") or {}), default_arms=arms,
                            ref_tolerance=ref_tol, line=raw.line_of(name), path=spec.path or ctx.path,
                            template=str(spec.get("template", name)), operands=_plain(spec.get("operands") or {}),
                            blocks=blocks)
    return fams


def _parse_kernels(ctx, raw, isas, dtypes, fams):
    if not isinstance(raw, LList):
        ctx.err(raw, None, "'kernels' must be a list")
    kernels = []
    seen = {}
    for idx, spec in enumerate(raw):
        if not isinstance(spec, LDict):
            raise RegistryError(raw.path or ctx.path, raw.line_of(idx), "each kernel must be a mapping")
        for req in ("name", "family", "dtypes"):
            if req not in spec:
                raise RegistryError(spec.path or ctx.path, spec.line, f"kernel #{idx + 1} is missing '{req}'")
        name = spec["name"]
        if not isinstance(name, str) or not name.replace("_", "").isalnum() or not name[0].isalpha() \
                or name != name.lower() or "__" in name:
            ctx.err(spec, "name", f"kernel name {name!r} must be lowercase letters, digits and single underscores")
        where = f"kernel '{name}'"
        families = spec["family"]
        families = [families] if isinstance(families, str) else families
        if not isinstance(families, list) or not families:
            ctx.err(spec, "family", f"{where}: family must be a name or a list of names")
        extra_keys = set()
        for f in families:
            if f not in fams:
                ctx.err(spec, "family", f"{where}: unknown family '{f}' (known: {', '.join(sorted(fams))})")
            extra_keys |= set(fams[f].kernel_keys)
        ctx.check_keys(spec, KERNEL_KEYS | extra_keys, where)
        for f in families:
            for req in fams[f].required_keys:
                if req not in spec:
                    ctx.err(spec, "name", f"{where}: family '{f}' requires key '{req}'")
        dts = ctx.str_list(spec, "dtypes", spec["dtypes"])
        for d in dts:
            if d not in dtypes:
                ctx.err(spec, "dtypes", f"{where}: unknown dtype '{d}' (known: {', '.join(sorted(dtypes))})")
            for f in families:
                if fams[f].blocks and dtypes[d].block is None:
                    ctx.err(spec, "dtypes", f"{where}: family '{f}' takes block formats (registry 'blocks:'), "
                            f"and '{d}' is not one")
                if not fams[f].blocks and dtypes[d].block is not None:
                    ctx.err(spec, "dtypes", f"{where}: '{d}' is a block format, which family '{f}' does not take")
        tol_raw = spec.get("tolerance")
        if tol_raw is None:
            ctx.err(spec, "name", f"{where}: missing 'tolerance' (needed for every dtype: {', '.join(dts)})")
        if tol_raw == "exact":
            tolerance = {d: {"kind": "exact"} for d in dts}
        else:
            tol_raw = ctx.require_map(spec, "tolerance", tol_raw)
            tolerance = {}
            for d in dts:
                if d not in tol_raw:
                    ctx.err(spec, "tolerance", f"{where}: missing tolerance for dtype '{d}'")
                tolerance[d] = parse_tolerance(ctx, tol_raw, d, tol_raw[d])
            for d in tol_raw:
                if d not in dts:
                    ctx.err(tol_raw, d, f"{where}: tolerance for dtype '{d}' which the kernel does not list")
        ref_tolerance = {}
        rt_raw = spec.get("ref_tolerance")
        if rt_raw is not None:
            if rt_raw == "exact":
                ref_tolerance = {d: {"kind": "exact"} for d in dts}
            else:
                rt_raw = ctx.require_map(spec, "ref_tolerance", rt_raw)
                for d, v in rt_raw.items():
                    if d not in dts:
                        ctx.err(rt_raw, d, f"{where}: ref_tolerance for dtype '{d}' which the kernel does not list")
                    ref_tolerance[d] = parse_tolerance(ctx, rt_raw, d, v)
        nan = spec.get("nan", "propagate")
        if nan not in NAN_POLICIES:
            ctx.err(spec, "nan", f"{where}: unknown NaN policy '{nan}' (one of: {', '.join(NAN_POLICIES)})")
        arms_spec = None
        if "arms" in spec:
            arms_spec = _parse_arms(ctx, spec, "arms", spec["arms"], isas, where)
        attrs = {k: spec[k] for k in extra_keys if k in spec}
        attrs["_lines"] = {k: spec.line_of(k) for k in spec}
        k = Kernel(name=name, families=tuple(families), dtypes=dts, doc=str(spec.get("doc", "")),
                   tolerance=tolerance, ref_tolerance=ref_tolerance, nan=nan, attrs=attrs,
                   arms_spec=arms_spec, line=spec.line, path=spec.path or ctx.path)
        for f in families:
            for d in dts:  # a slot is <dtype>_<name><suffix>: it must be unique
                slot_what = (name, fams[f].suffix, d)
                if slot_what in seen:
                    ctx.err(spec, "name", f"duplicate kernel '{name}{fams[f].suffix}' for dtype '{d}' "
                            f"(first at line {seen[slot_what]})")
                seen[slot_what] = spec.line
        kernels.append(k)
    return kernels


def _expand_arms(ctx, reg, raw_kernels, template_dir):
    symbols = {}
    for k, kspec in zip(reg.kernels, raw_kernels):
        if "to" in k.attrs:  # conversions: the target dtype ({U} in signatures)
            if k.attrs["to"] not in reg.dtypes:
                ctx.err(kspec, "to", f"kernel '{k.name}': unknown target dtype '{k.attrs['to']}'")
            k.attrs["_to"] = reg.dtypes[k.attrs["to"]]
        for fname in k.families:
            fam = reg.families[fname]
            arms = k.arms_spec if k.arms_spec is not None else fam.default_arms
            if "scalar" not in arms:
                ctx.err(kspec, "arms" if "arms" in kspec else "name",
                        f"kernel '{k.name}': no scalar arm (the scalar arm is the specification)")
            for isa_name, arm in arms.items():
                isa = reg.isas[isa_name]
                if template_dir is not None and not template_exists(template_dir, fam, isa):
                    ctx.err(kspec, "arms" if "arms" in kspec else "family",
                            f"kernel '{k.name}': family '{fam.name}' has no template for ISA '{isa_name}' "
                            f"(looked for templates/{fam.template}/{isa_name}.c.j2"
                            + (f" and templates/{fam.template}/vector.c.j2" if isa.vocab else "")
                            + ")")
                for dname in k.dtypes:
                    if arm["dtypes"] is not None and dname not in arm["dtypes"]:
                        continue
                    dt = reg.dtypes[dname]
                    free_tiles = fam.name in NO_WIDTH_FAMILIES or fam.blocks
                    if isa_name != "scalar" and dt.compute not in isa.width and not free_tiles:
                        continue  # the ISA has no vector type for this compute type: no arm
                    for tile in arm["tiles"]:
                        a = Arm(kernel=k, family=fam, dtype=dt, isa=isa, tile=tile,
                                is_dispatch=(tile == arm["dispatch"]), params=arm["params"])
                        if a.symbol in symbols:
                            ctx.err(kspec, "name", f"duplicate symbol {a.symbol}")
                        w = isa.width.get(dt.compute, 1)
                        if isinstance(tile, str) and not free_tiles:
                            ctx.err(arm["node"], "tiles", f"kernel '{k.name}': register tile '{tile}' in family "
                                    f"'{fam.name}', which takes lane counts")
                        if isa_name != "scalar" and not free_tiles and tile % w:
                            ctx.err(arm["node"], "tiles", f"kernel '{k.name}': tile {tile} of ISA '{isa_name}' "
                                    f"is not a multiple of its {dt.compute} width {w}")
                        symbols[a.symbol] = a
                        reg.arms.append(a)


# Families whose arms pick their own register tiles (tile = a variant id, not lanes).
NO_WIDTH_FAMILIES = {"gemm_f32", "gemm_pack_a", "gemm_pack_b", "idot", "convert"}


def template_exists(template_dir, fam, isa):
    if os.path.exists(os.path.join(template_dir, fam.template, f"{isa.name}.c.j2")):
        return True
    if isa.vocab and os.path.exists(os.path.join(template_dir, fam.template, "vector.c.j2")):
        return True
    return False


def template_for(template_dir, fam, isa):
    """templates/<family template>/<isa>.c.j2 if present, else its vector.c.j2 (any ISA with a vocabulary)."""
    specific = os.path.join(fam.template, f"{isa.name}.c.j2")
    if os.path.exists(os.path.join(template_dir, specific)):
        return specific
    return os.path.join(fam.template, "vector.c.j2")


def load(path, template_dir=None):
    raw = yamlsrc.load(path)
    return build(raw, path, template_dir)


def loads(text, path="<string>", template_dir=None):
    return build(yamlsrc.loads(text, path), path, template_dir)


def _merge_includes(ctx, raw, path):
    """include: [files] adds their families and kernels (paths relative to the registry)."""
    inc = raw.get("include")
    if inc is None:
        return
    files = ctx.str_list(raw, "include", inc)
    base = os.path.dirname(path)
    for i, rel in enumerate(files):
        sub_path = os.path.join(base, rel)
        if not os.path.exists(sub_path):
            raise RegistryError(path, inc.line_of(i), f"include: no such file '{rel}'")
        sub = yamlsrc.load(sub_path)
        if not isinstance(sub, LDict):
            raise RegistryError(sub_path, 1, "an included registry file must be a mapping")
        ctx.check_keys(sub, INCLUDED_KEYS, f"included file '{rel}'")
        sub_blocks = sub.get("blocks")
        if sub_blocks is not None:
            sub_blocks = ctx.require_map(sub, "blocks", sub_blocks)
            if raw.get("blocks") is None:
                raw["blocks"] = LDict()
                raw["blocks"].key_lines = {}
            for name, spec in sub_blocks.items():
                if name in raw["blocks"]:
                    ctx.err(sub_blocks, name, f"duplicate block '{name}'")
                raw["blocks"][name] = spec
                raw["blocks"].key_lines[name] = sub_blocks.line_of(name)
        for name, fam in (sub.get("families") or {}).items():
            if name in raw["families"]:
                ctx.err(sub["families"], name, f"duplicate family '{name}' (first at {path}:{raw['families'].line_of(name)})")
            raw["families"][name] = fam
            raw["families"].key_lines[name] = sub["families"].line_of(name)
        kernels = sub.get("kernels")
        if kernels is None:  # a file of blocks or families only
            continue
        if not isinstance(kernels, LList):
            ctx.err(sub, "kernels", "'kernels' must be a list")
        raw["kernels"].extend(kernels)
        raw["kernels"].item_lines.extend(kernels.item_lines or [])


def registry_files(path):
    """kernels.yaml and the files it includes (for build-system dependencies)."""
    raw = yamlsrc.load(path)
    out = [path]
    for rel in (raw.get("include") or []) if isinstance(raw, LDict) else []:
        out.append(os.path.join(os.path.dirname(path), rel))
    return out


def build(raw, path, template_dir=None):
    ctx = _Ctx(path)
    if not isinstance(raw, LDict):
        raise RegistryError(path, 1, "the registry must be a mapping")
    ctx.check_keys(raw, TOP_KEYS, "the registry")
    for k in TOP_KEYS - OPTIONAL_TOP_KEYS:
        if k not in raw:
            raise RegistryError(path, raw.line, f"missing top-level key '{k}'")
    _merge_includes(ctx, raw, path)
    if raw["schema"] != SCHEMA_VERSION:
        ctx.err(raw, "schema", f"schema {raw['schema']!r} is not supported (this generator reads schema {SCHEMA_VERSION})")
    isas = _parse_isas(ctx, ctx.require_map(raw, "isas", raw["isas"]))
    dtypes = _parse_dtypes(ctx, ctx.require_map(raw, "dtypes", raw["dtypes"]))
    if raw.get("blocks") is not None:
        _parse_blocks(ctx, ctx.require_map(raw, "blocks", raw["blocks"]), dtypes)
    fams = _parse_families(ctx, ctx.require_map(raw, "families", raw["families"]), isas)
    kernels = _parse_kernels(ctx, raw["kernels"], isas, dtypes, fams)
    reg = Registry(path=path, isas=isas, dtypes=dtypes, families=fams, kernels=kernels)
    _expand_arms(ctx, reg, list(raw["kernels"]), template_dir)
    return reg
