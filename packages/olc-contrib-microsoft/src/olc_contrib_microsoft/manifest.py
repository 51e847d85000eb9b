"""The one table of olc-contrib-microsoft's kernels.

Registration (plugin.py), the tests and the benchmarks all read this table.
Each row gives the operator (domain ``com.microsoft``, opset 1), the type
constraint of each input and output, and the ONNX Runtime schema facts the
kernel follows. Every operator is registered twice: the optimized kernel
(``olc_contrib_microsoft::<Op>``) and its plain reference
(``olc_contrib_microsoft::Naive<Op>``, ``implementation="naive"``).

``TOLERANCE`` is the accepted difference between the optimized and the
naive kernel per element type, as (a, r): |y - ref| <= a * max|ref| +
r * |ref| over the output (see README.md for the figures behind them).
"""

from __future__ import annotations

from dataclasses import dataclass

DOMAIN = "com.microsoft"
FAMILY = "olc-contrib-microsoft"
LIBRARY = "olc_contrib_microsoft"
TYPES = ("float32", "float16", "bfloat16")
STATS = ("float32",)


@dataclass(frozen=True)
class ContribOp:
    op: str
    inputs: tuple[str, ...]   # constraint per input position
    outputs: tuple[str, ...]  # constraint per output position
    attrs: tuple[str, ...]
    required: int             # inputs that must be present
    summary: str


OPS: tuple[ContribOp, ...] = (
    ContribOp("SkipLayerNormalization", ("T", "T", "T", "T", "T"), ("T", "U", "U", "T"), ("epsilon",), 3,
              "s = input + skip (+ bias); LayerNorm(s) * gamma (+ beta); outputs y, mean, inv_std_var, s"),
    ContribOp("SkipSimplifiedLayerNormalization", ("T", "T", "T", "T"), ("T", "U", "U", "T"), ("epsilon",), 3,
              "s = input + skip (+ bias); s / sqrt(mean(s^2) + eps) * gamma; outputs y, (mean: 0), inv_std_var, s"),
    ContribOp("BiasGelu", ("T", "T"), ("T",), (), 2, "erf GELU of A + B"),
    ContribOp("FastGelu", ("T", "T"), ("T",), (), 1, "tanh-approximated GELU of X (+ bias)"),
    ContribOp("QuickGelu", ("T",), ("T",), ("alpha",), 1, "x * sigmoid(alpha x), alpha = 1.702 by default"),
    ContribOp("Gelu", ("T",), ("T",), (), 1, "erf GELU"),
    ContribOp("BiasAdd", ("T", "T", "T"), ("T",), (), 3, "X + bias + skip, X and skip [N, S, C], bias [C]"),
)

BY_NAME: dict[str, ContribOp] = {o.op: o for o in OPS}

# Optimized against naive (the naive computes its statistics and
# activations in float64). float32: a few float32 ulps of the output scale;
# float16 / bfloat16: one rounding of the type, plus a float32 result that
# lies next to a rounding midpoint going the other way (one ulp of the type).
TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (2e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (8e-3, 8e-3),
}


def kernel_name(op: str, naive: bool = False) -> str:
    return f"{LIBRARY}::{'Naive' if naive else ''}{op}"
