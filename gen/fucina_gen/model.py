"""Immutable objects the registry is turned into, and the naming grammar.

Symbol grammar (fixed): fck_<dtype>_<op><form>__<isa>_u<tile>
  - `__` separates what (dtype, op, form) from how (ISA, tile), so names parse
    with one regex (see SYMBOL_RE).
  - <form> is the family's suffix ('' for the plain form, '_vs', '_row', ...).
File grammar: kernels/<isa>/<dtype>-<op><form>-<isa>-u<tile>.c
Slot grammar: <dtype>_<op><form> (one field of struct fck_table).
"""
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

SYMBOL_RE = re.compile(r"^fck_(?P<what>[a-z0-9_]+?)__(?P<isa>[a-z0-9_]+?)_u(?P<tile>[0-9]+(?:x[0-9]+)?)$")


@dataclass(frozen=True)
class Isa:
    name: str
    arch: Tuple[str, ...]
    cflags: Tuple[str, ...]
    requires: Tuple[str, ...]
    rank: int
    vocab: Optional[str]          # templates/_vocab/<vocab>.h, None if the ISA has no vocabulary
    width: Dict[str, int]         # vector lanes per compute type
    parent: Optional[str]         # a feature-gated variant of another ISA (neon_dotprod -> neon)
    twin: Optional[dict]          # test-only twin build: {cflags, requires, define}
    doc: str
    line: int

    @property
    def enum(self):
        return "FCK_ISA_" + self.name.upper()

    @property
    def cap_name(self):
        """The FUCINA_ISA name that admits this ISA."""
        return self.parent or self.name


@dataclass(frozen=True)
class Block:
    """A block-quantized storage format (registry `blocks:`): `elems` values
    stored in one `bytes`-byte struct `ctype` (src/quant/blocks.h)."""
    name: str
    ctype: str
    elems: int
    bytes: int
    partner: Optional[str]        # activation format of the integer dot (q8_0, q8_1, q8_K)
    mins: Optional[str]           # the struct field holding the min scale (dmin, m), if any
    doc: str
    line: int


@dataclass(frozen=True)
class DType:
    name: str
    ctype: str
    size: int
    compute: str                  # f32, f64 or i32
    to_compute: str               # C expression with {} for the stored value
    from_compute: str             # C expression with {} for the compute value
    ulp_bits: int                 # mantissa bits incl. hidden (for ULP distance), 0 for integers
    line: int
    block: Optional[Block] = None  # set for block-quantized formats (registry `blocks:`)

    @property
    def enum(self):
        return "FCK_DT_" + self.name.upper()


@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    signature: str                # "{ret} {fn}(...)" with {T}, {CT}
    suffix: str                   # form suffix in symbols ('' or '_vs', ...)
    kernel_keys: Tuple[str, ...]  # family-specific keys a kernel may carry
    required_keys: Tuple[str, ...]
    bench: dict                   # traffic model: read/write elements, flops per element
    default_arms: Dict[str, dict]
    ref_tolerance: dict
    line: int
    path: str = ""
    template: str = ""            # folder under templates/ (default: the family's name)
    operands: dict = field(default_factory=dict, hash=False, compare=False)
    blocks: bool = False          # its dtypes are block formats (registry `blocks:`), tiles are free-form


@dataclass(frozen=True)
class Arm:
    kernel: "Kernel"
    family: Family
    dtype: DType
    isa: Isa
    tile: object                  # lanes per main-loop step (int), or "MRxNR" for register tiles
    is_dispatch: bool
    params: dict                  # extra per-arm parameters from the registry (e.g. mr, nr)

    @property
    def mr_nr(self):
        """(MR, NR) of a register-tile arm ("6x32"), else None."""
        if isinstance(self.tile, str):
            mr, nr = self.tile.split("x")
            return int(mr), int(nr)
        return None

    @property
    def what(self):
        return f"{self.dtype.name}_{self.kernel.name}{self.family.suffix}"

    @property
    def slot(self):
        return self.what

    @property
    def symbol(self):
        return f"fck_{self.what}__{self.isa.name}_u{self.tile}"

    @property
    def path(self):
        return (f"kernels/{self.isa.name}/{self.dtype.name}-{self.kernel.name}"
                f"{self.family.suffix.replace('_', '-')}-{self.isa.name}-u{self.tile}.c")

    @property
    def test_symbol(self):
        """The symbol the conformance test calls: the twin for ISAs that have one."""
        if self.isa.twin:
            return self.symbol + "_twin"
        return self.symbol


@dataclass
class Kernel:
    name: str
    families: Tuple[str, ...]
    dtypes: Tuple[str, ...]
    doc: str
    tolerance: Dict[str, dict]
    ref_tolerance: Dict[str, dict]
    nan: str
    attrs: dict                   # family-specific keys (scalar, vector, ref, domain, ...)
    arms_spec: Dict[str, dict]
    line: int
    path: str = ""


@dataclass
class Registry:
    path: str
    isas: Dict[str, Isa]
    dtypes: Dict[str, DType]
    families: Dict[str, Family]
    kernels: List[Kernel]
    arms: List[Arm] = field(default_factory=list)

    def arms_for_arch(self, arch):
        return [a for a in self.arms if arch in a.isa.arch]

    def isas_for_arch(self, arch):
        return [i for i in sorted(self.isas.values(), key=lambda i: (i.rank, i.name)) if arch in i.arch]

    def slots(self, arch):
        """Ordered unique slots with their arms, best ISA first."""
        out = {}
        for a in self.arms_for_arch(arch):
            out.setdefault(a.slot, []).append(a)
        for slot in out:
            out[slot].sort(key=lambda a: (-a.isa.rank, a.isa.name))
        return out
