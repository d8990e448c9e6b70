"""Block-quantized formats (`blocks:`) and the families that take them."""
import os
import tempfile
import unittest

from fucina_gen import registry
from fucina_gen.render import Renderer
from tests.test_registry import ErrorAssertions, load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "templates")

BASE = """\
schema: 1
isas:
  scalar: {arch: [x86_64, aarch64], rank: 0, width: {f32: 1}}
  avx512: {arch: [x86_64], rank: 30, cflags: [-mavx512f], requires: [avx512f], width: {f32: 16}}
dtypes:
  f32: {ctype: float, size: 4, compute: f32}
blocks:
  q8_0: {ctype: fcq_block_q8_0, elems: 32, bytes: 34, partner: q8_0}
  q4_K: {ctype: fcq_block_q4_K, elems: 256, bytes: 144, partner: q8_K, mins: dmin}
  q8_K: {ctype: fcq_block_q8_K, elems: 256, bytes: 292}
families:
  qgemm:
    blocks: true
    signature: "void {fn}(size_t nb, const void *restrict w, size_t w_stride, const void *restrict a, size_t a_stride, float *restrict c, size_t ldc)"
    bench: {shape: gemm, call: "{fn}(a->n / {elems}, a->y, a->n / {elems} * {bytes}, a->x, a->n / {elems} * {pbytes}, a->z, a->cols)"}
    arms:
      scalar: {tiles: ["1x1", "4x4"], dispatch: "4x4"}
      avx512: {tiles: ["4x4"], dtypes: [q4_K]}
kernels:
  - name: qgemm
    family: qgemm
    dtypes: [q8_0, q4_K]
    tolerance: {q8_0: {sum_bound: 4}, q4_K: {sum_bound: 4}}
"""


class Blocks(ErrorAssertions, unittest.TestCase):
    def test_blocks_become_dtypes_with_block_geometry(self):
        reg = load(BASE)
        q4k = reg.dtypes["q4_K"]
        self.assertEqual((q4k.block.elems, q4k.block.bytes, q4k.block.partner, q4k.block.mins),
                         (256, 144, "q8_K", "dmin"))
        self.assertEqual(q4k.ctype, "fcq_block_q4_K")
        self.assertIsNone(reg.dtypes["f32"].block)
        self.assertEqual(sorted(a.symbol for a in reg.arms),
                         ["fck_q4_K_qgemm__avx512_u4x4", "fck_q4_K_qgemm__scalar_u1x1",
                          "fck_q4_K_qgemm__scalar_u4x4", "fck_q8_0_qgemm__scalar_u1x1",
                          "fck_q8_0_qgemm__scalar_u4x4"])

    def test_register_tiles_need_no_lane_multiple(self):
        reg = load(BASE.replace('avx512: {tiles: ["4x4"]', 'avx512: {tiles: ["1x3"]'))
        self.assertIn("fck_q4_K_qgemm__avx512_u1x3", {a.symbol for a in reg.arms})

    def test_unknown_block_key(self):
        self.assertError(BASE.replace("bytes: 292}", "bytes: 292, colour: red}"), 10, "unknown key 'colour'",
                         "block 'q8_K'")

    def test_missing_block_key(self):
        self.assertError(BASE.replace("elems: 256, bytes: 292", "elems: 256"), 10, "missing 'bytes'")

    def test_bad_elems(self):
        self.assertError(BASE.replace("elems: 32, bytes: 34", "elems: 0, bytes: 34"), 8, "elems must be a positive")

    def test_unknown_partner(self):
        self.assertError(BASE.replace("partner: q8_K", "partner: q8_X"), 9, "unknown partner 'q8_X'")

    def test_partner_of_another_block_size(self):
        self.assertError(BASE.replace("partner: q8_K", "partner: q8_0"), 9, "has 32 elements per block, not 256")

    def test_block_named_like_a_dtype(self):
        self.assertError(BASE.replace("  q8_K: {ctype", "  f32: {ctype").replace("partner: q8_K", "partner: f32"),
                         10, "has the name of a dtype")

    def test_plain_dtype_in_block_family(self):
        self.assertError(BASE.replace("dtypes: [q8_0, q4_K]", "dtypes: [q8_0, f32]")
                         .replace("q4_K: {sum_bound: 4}", "f32: {sum_bound: 4}"), 22, "takes block formats", "'f32'")

    def test_block_in_plain_family(self):
        text = BASE.replace("    blocks: true\n", "")
        self.assertError(text, 21, "'q8_0' is a block format")

    def test_bad_blocks_flag(self):
        self.assertError(BASE.replace("blocks: true", "blocks: maybe"), 13, "blocks must be true or false")

    def test_blocks_in_included_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            main, blocks = BASE.split("blocks:\n", 1)
            blocks, rest = blocks.split("families:\n", 1)
            with open(os.path.join(tmp, "quant.yaml"), "w", encoding="utf-8") as f:
                f.write("blocks:\n" + blocks)
            with open(os.path.join(tmp, "kernels.yaml"), "w", encoding="utf-8") as f:
                f.write(main.replace("schema: 1\n", "schema: 1\ninclude: [quant.yaml]\n") + "families:\n" + rest)
            reg = registry.load(os.path.join(tmp, "kernels.yaml"), TEMPLATES)
            self.assertEqual(reg.dtypes["q8_0"].block.bytes, 34)

    def test_bench_call_knows_block_geometry(self):
        reg = load(BASE)
        r = Renderer(reg, TEMPLATES, "x86_64")
        table = r.render_all()["bench/fck_bench_table.c"]
        self.assertIn("fck_q4_K_qgemm__avx512_u4x4(a->n / 256, a->y, a->n / 256 * 144, a->x, a->n / 256 * 292, "
                      "a->z, a->cols)", table)

    def test_real_registry_has_quant_slots(self):
        reg = registry.load(os.path.join(ROOT, "kernels.yaml"), TEMPLATES)
        slots = {a.slot for a in reg.arms}
        for s in ("q4_K_qgemm", "q8_0_qgemv", "q8_K_quantize"):
            self.assertIn(s, slots)
        for a in reg.arms:
            if a.dtype.block is not None and a.family.name == "qgemm":
                self.assertIsNotNone(a.dtype.block.partner, a.symbol)


if __name__ == "__main__":
    unittest.main()
