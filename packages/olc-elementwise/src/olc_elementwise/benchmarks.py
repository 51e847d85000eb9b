"""Benchmark cases of the binary kernels for ``tools/benchmark_parity.py``::

    python tools/benchmark_parity.py --suite elementwise --threads 1,2 --min-time 0.3

The priority matrix: Add, Sub, Mul, Div, PRelu in float32; Equal and Less in
float32 and int32; And in bool; BitwiseAnd in int32; Pow and Mod (fmod=1) in
float32. bfloat16 is left out: onnxruntime 1.32 has no CPU kernel for any of
these operators in bfloat16 (checked: NOT_IMPLEMENTED), so there is nothing
to compare against. Each op runs over the broadcast families (contiguous,
left scalar, right scalar, row, per-channel, outer, general strided) at the
``sizes`` given (output element counts; default 4,096, 65,536, 1,048,576 and
4,194,304). The group of a case is its broadcast family, so a run may be
narrowed with the tool's filters and the gates hold per suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .binary_manifest import kernel_name

DEFAULT_SIZES = (4096, 65536, 1048576, 4194304)

# (op, dtype, attributes, generator of A, generator of B)
MATRIX: tuple[tuple[str, str, dict[str, Any], str, str], ...] = (
    ("Add", "float32", {}, "normal", "normal"),
    ("Sub", "float32", {}, "normal", "normal"),
    ("Mul", "float32", {}, "normal", "normal"),
    ("Div", "float32", {}, "normal", "nonzero"),
    ("PRelu", "float32", {}, "normal", "normal"),
    ("Equal", "float32", {}, "integers", "integers"),
    ("Equal", "int32", {}, "integers", "integers"),
    ("Less", "float32", {}, "normal", "normal"),
    ("Less", "int32", {}, "integers", "integers"),
    ("And", "bool", {}, "bool", "bool"),
    ("BitwiseAnd", "int32", {}, "integers", "integers"),
    ("Pow", "float32", {}, "positive", "normal"),
    ("Mod", "float32", {"fmod": 1}, "normal", "nonzero"),
)

BOOL_OUT = {"Equal", "Less", "And"}
OPSET = {"BitwiseAnd": 18}


def _bool(rng, shape, dtype):
    return rng.random(shape) < 0.5


def family_shapes(family: str, n: int) -> tuple[list[int], list[int]] | None:
    """(shape of A, shape of B) whose broadcast has n elements."""
    if family == "contiguous":
        return [n], [n]
    if family == "left_scalar":
        return [1], [n]
    if family == "right_scalar":
        return [n], [1]
    if family == "row":  # [M, 256] op [256]
        return [n // 256, 256], [256]
    if family == "per_channel":  # [B, 64, H*W] op [64, 1]
        b = max(1, n // (64 * 4096))
        return [b, 64, n // (64 * b)], [64, 1]
    if family == "outer":  # [M, 256] op [M, 1]
        return [n // 256, 256], [n // 256, 1]
    if family == "general":  # [P, 16, 64] op [P, 1, 64]: strided on both sides
        return [n // 1024, 16, 64], [n // 1024, 1, 64]
    return None


FAMILIES = ("contiguous", "left_scalar", "right_scalar", "row", "per_channel", "outer", "general")

# float32 Pow with a constant scalar exponent (an initializer): the exact
# paths of docs/binary.md ("Pow"); (exponent, generator of the base).
POW_CONSTANTS: tuple[tuple[float, str], ...] = ((2.0, "normal"), (3.0, "normal"), (0.5, "positive"),
                                                (-1.0, "nonzero"))


def _filled(value: float):
    def gen(rng, shape, dtype):
        import numpy as np

        return np.full(shape, value, dtype=dtype)
    gen.__name__ = f"filled_{value:g}"
    return gen


def benchmark_cases(sizes: Sequence[int] | None = None) -> list[dict[str, Any]]:
    chosen: tuple[int, ...] = tuple(sizes) if sizes else tuple(DEFAULT_SIZES)
    cases = []
    for op, dtype, attrs, ga, gb in MATRIX:
        for family in FAMILIES:
            if op == "PRelu" and family == "left_scalar":
                continue  # the slope must broadcast to X
            for n in chosen:
                if n < 1024 or n % 1024:
                    continue
                shapes = family_shapes(family, n)
                if shapes is None:
                    raise ValueError(f"unknown broadcast family {family!r}")
                sa, sb = shapes
                gen_a = _bool if ga == "bool" else ga
                gen_b = _bool if gb == "bool" else gb
                attr_txt = "".join(f" {k}={v}" for k, v in attrs.items())
                cases.append({
                    "op": op, "domain": "", "opset": OPSET.get(op, 17), "attributes": dict(attrs),
                    "inputs": [{"shape": sa, "dtype": dtype, "generator": gen_a},
                               {"shape": sb, "dtype": dtype, "generator": gen_b}],
                    "outputs": ["bool" if op in BOOL_OUT else dtype],
                    "expected_kernel": kernel_name(op),
                    "name": f"{op}{attr_txt} {dtype} {family} {n}",
                    "size": n,
                    "group": family,
                    "rtol": 2e-6 if op == "Pow" else 1e-6, "atol": 1e-6,
                })
    for value, gen_a in POW_CONSTANTS:
        for n in chosen:
            if n < 1024 or n % 1024:
                continue
            cases.append({
                "op": "Pow", "domain": "", "opset": 17, "attributes": {},
                "inputs": [{"shape": [n], "dtype": "float32", "generator": gen_a},
                           {"shape": [], "dtype": "float32", "generator": _filled(value), "constant": True}],
                "outputs": ["float32"],
                "expected_kernel": kernel_name("Pow"),
                "name": f"Pow float32 x^{value:g} (initializer) {n}",
                "size": n,
                "group": "pow_constant",
                "rtol": 2e-6, "atol": 1e-6,
            })
    return cases


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "elementwise binary: median ratio >= 1.1, every case >= 0.95", "group": None,
             "median_at_least": 1.1, "min_at_least": 0.95}]
