"""The one table of olc-contrib-microsoft's kernels.

Registration (plugin.py), the tests and the benchmarks all read this table.
Each row gives the operator (domain ``com.microsoft``, opset 1), the type
constraint of each input and output, the element types of each constraint,
and the ONNX Runtime schema facts the kernel follows. Every operator is registered twice: the optimized kernel
(``olc_contrib_microsoft::<Op>``) and its plain reference
(``olc_contrib_microsoft::Naive<Op>``, ``implementation="naive"``).

``TOLERANCE`` is the accepted difference between the optimized and the
naive kernel per element type, as (a, r): |y - ref| <= a * max|ref| +
r * |ref| over the output (see README.md for the figures behind them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DOMAIN = "com.microsoft"
FAMILY = "olc-contrib-microsoft"
LIBRARY = "olc_contrib_microsoft"
TYPES = ("float32", "float16", "bfloat16")
STATS = ("float32",)
FLOAT_TYPES = {"T": TYPES, "U": STATS}


@dataclass(frozen=True)
class ContribOp:
    op: str
    inputs: tuple[str, ...]   # constraint per input position
    outputs: tuple[str, ...]  # constraint per output position
    attrs: tuple[str, ...]
    required: int             # inputs that must be present
    summary: str
    types: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(FLOAT_TYPES))


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
    ContribOp("EmbedLayerNormalization", ("T1", "T1", "T", "T", "T", "T", "T", "T1", "T1"), ("T", "M", "T"),
              ("epsilon", "mask_index_type"), 7,
              "LayerNorm(word[ids] + position[pos] (+ segment[seg])) * gamma + beta; mask_index = count(mask == 1)",
              {"T": TYPES, "T1": ("int32", "int64"), "M": ("int32",)}),
    ContribOp("BiasSoftmax", ("T", "T"), ("T",), ("axis", "is_inner_broadcast"), 2,
              "softmax(data + bias) over the axes from `axis` on, bias broadcast inner or outer",
              {"T": TYPES + ("float64",)}),
    ContribOp("CDist", ("T", "T"), ("T",), ("metric",), 2,
              "pairwise (squared) euclidean distances of the rows of A [M, K] and B [N, K]",
              {"T": ("float32", "float64")}),
    ContribOp("GatherBlockQuantized", ("T1", "Tind", "T2", "T1"), ("T2",),
              ("gather_axis", "quantize_axis", "block_size", "bits"), 3,
              "Gather of block-quantized data, dequantized: (q - zero_point) * scale",
              {"T1": ("uint8", "uint4", "int4"), "Tind": ("int32", "int64"), "T2": TYPES}),
    ContribOp("MoE", ("T",) * 8, ("T",),
              ("k", "activation_type", "normalize_routing_weights", "swiglu_fusion", "swiglu_limit", "activation_alpha",
               "activation_beta"), 5,
              "top-k mixture of expert FFNs: FC2(act(FC1 x) (* FC3 x)), weighted by the softmax of the router",
              {"T": TYPES}),
    ContribOp("QMoE", ("T", "T", "T1", "T2", "T", "T1", "T2", "T", "T1", "T2", "T", "T1", "T1", "T1", "T"), ("T",),
              ("k", "activation_type", "normalize_routing_weights", "swiglu_fusion", "expert_weight_bits",
               "block_size"), 7,
              "MoE with 2-, 4- or 8-bit integer expert weights (per row or per block scales, zero points)",
              {"T": TYPES, "T1": ("uint8",), "T2": TYPES}),
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
    "float64": (1e-14, 1e-13),
}


def kernel_name(op: str, naive: bool = False) -> str:
    return f"{LIBRARY}::{'Naive' if naive else ''}{op}"


# What the optimized kernel of an operator is, where it is not the row engine.
ENGINE: dict[str, str] = {
    "CDist": "blocked |a|^2 + |b|^2 - 2ab with exact recomputation of close pairs",
    "GatherBlockQuantized": "blockwise dequantization of the gathered rows",
    "MoE": "routed tokens per expert through packed-panel products",
    "QMoE": "routed tokens per expert through dequantized packed-panel products",
}
