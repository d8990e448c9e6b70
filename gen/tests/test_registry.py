"""Registry validation: every error names the file, the line and the key."""
import os
import unittest

from fucina_gen import registry
from fucina_gen.yamlsrc import RegistryError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "templates")

BASE = """\
schema: 1
isas:
  scalar: {arch: [x86_64, aarch64], rank: 0, width: {f32: 1}}
  avx2: {arch: [x86_64], rank: 10, cflags: [-mavx2], requires: [avx2], width: {f32: 8}}
dtypes:
  f32: {ctype: float, size: 4, compute: f32}
families:
  unary:
    template: elementwise
    operands: {in: [x], out: y}
    signature: "void {fn}(size_t n, const {T} *x_, {T} *y_)"
    kernel_keys: [scalar, vector, ref, domain]
    required_keys: [scalar, vector, ref]
    bench: {call: "{fn}(a->n, a->x, a->y)"}
    arms:
      scalar: {tiles: [1]}
      avx2: {tiles: [8]}
kernels:
  - name: neg
    family: unary
    dtypes: [f32]
    scalar: "-x"
    vector: "neg(x)"
    ref: "-x"
    tolerance: exact
"""


def load(text):
    return registry.loads(text, "fixture.yaml", TEMPLATES)


class ErrorAssertions:
    """assertError: loading `text` fails at fixture.yaml:`line` with every fragment
    in the message (a mixin, shared by the registry test modules)."""

    def assertError(self, text, line, *fragments):
        with self.assertRaises(RegistryError) as cm:
            load(text)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith(f"fixture.yaml:{line}:"), msg)
        for f in fragments:
            self.assertIn(f, msg)


class RegistryErrors(ErrorAssertions, unittest.TestCase):
    def test_base_is_valid(self):
        reg = load(BASE)
        self.assertEqual(sorted(a.symbol for a in reg.arms),
                         ["fck_f32_neg__avx2_u8", "fck_f32_neg__scalar_u1"])

    def test_unknown_kernel_key(self):
        self.assertError(BASE + "    colour: blue\n", 26, "unknown key 'colour'", "kernel 'neg'")

    def test_unknown_top_key(self):
        self.assertError("extras: 1\n" + BASE, 1, "unknown key 'extras'")

    def test_unknown_isa_key(self):
        text = BASE.replace("width: {f32: 1}}", "width: {f32: 1}, speed: 3}")
        self.assertError(text, 3, "unknown key 'speed'", "isa 'scalar'")

    def test_unknown_dtype(self):
        self.assertError(BASE.replace("dtypes: [f32]", "dtypes: [f33]"), 21, "unknown dtype 'f33'")

    def test_unknown_isa_in_arms(self):
        text = BASE.replace("      avx2: {tiles: [8]}", "      avx3: {tiles: [8]}")
        self.assertError(text, 17, "unknown ISA 'avx3'")

    def test_unknown_family(self):
        self.assertError(BASE.replace("family: unary", "family: unery"), 20, "unknown family 'unery'")

    def test_unknown_feature(self):
        self.assertError(BASE.replace("requires: [avx2]", "requires: [avx9]"), 4, "unknown CPU feature 'avx9'")

    def test_missing_tolerance(self):
        self.assertError(BASE.replace("    tolerance: exact\n", ""), 19, "missing 'tolerance'")

    def test_missing_tolerance_for_one_dtype(self):
        text = BASE.replace("  f32: {ctype: float, size: 4, compute: f32}",
                            "  f32: {ctype: float, size: 4, compute: f32}\n  f64: {ctype: double, size: 8, compute: f64}")
        text = text.replace("dtypes: [f32]", "dtypes: [f32, f64]").replace("tolerance: exact", "tolerance: {f32: exact}")
        self.assertError(text, 26, "missing tolerance for dtype 'f64'")

    def test_missing_scalar_arm(self):
        text = BASE + "    arms:\n      avx2: {tiles: [8]}\n"
        self.assertError(text, 26, "no scalar arm")

    def test_duplicate_kernel(self):
        dup = BASE.split("kernels:\n")[1]
        self.assertError(BASE + dup, 26, "duplicate kernel 'neg' for dtype 'f32'")

    def test_duplicate_yaml_key(self):
        self.assertError(BASE + "    ref: \"x\"\n", 26, "duplicate key 'ref'", "first at line 24")

    def test_missing_required_family_key(self):
        self.assertError(BASE.replace('    vector: "neg(x)"\n', ""), 19, "requires key 'vector'")

    def test_bad_nan_policy(self):
        self.assertError(BASE + "    nan: sometimes\n", 26, "unknown NaN policy 'sometimes'")

    def test_dispatch_tile_not_in_tiles(self):
        text = BASE.replace("      avx2: {tiles: [8]}", "      avx2: {tiles: [8], dispatch: 16}")
        self.assertError(text, 17, "dispatch tile 16")

    def test_tile_not_multiple_of_width(self):
        text = BASE.replace("      avx2: {tiles: [8]}", "      avx2: {tiles: [12]}")
        self.assertError(text, 17, "not a multiple of its f32 width 8")

    def test_bad_tolerance_value(self):
        self.assertError(BASE.replace("tolerance: exact", "tolerance: {f32: {ulp: -1}}"), 25, "non-negative")

    def test_yaml_syntax_error(self):
        self.assertError(BASE + "  - name: [unclosed\n", 27, "YAML syntax")

    def test_real_registry_is_valid(self):
        reg = registry.load(os.path.join(ROOT, "kernels.yaml"), TEMPLATES)
        slots = {}
        for a in reg.arms:
            slots.setdefault(a.slot, set()).add(a.isa.name)
        for slot, isas in slots.items():
            self.assertIn("scalar", isas, slot)


if __name__ == "__main__":
    unittest.main()
