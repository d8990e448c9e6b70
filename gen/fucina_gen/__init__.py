"""Fucina's kernel generator: kernels.yaml + templates/ -> per-ISA C kernels,
dispatch tables, conformance tests and micro-benchmark tables."""
