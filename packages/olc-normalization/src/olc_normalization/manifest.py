"""The one table of olc-normalization's kernels.

Registration (plugin.py), the tests and the benchmarks all read this table;
nothing about an operator is listed twice. Each row gives the operator, its
domain, the type constraint of each input and output, and one segment per
range of opsets with the element types of each constraint that the schema
of that range allows. ``refuse`` names attribute values the kernel does not
implement: such nodes are left to the next registration or the fallback.

``TOLERANCE`` is the accepted error against a float64 oracle per element
type, as (a, r): |y - ref| <= a * max|ref| + r * |ref|, max over the finite
values of the output (an absolute term on the output's own scale, so that
small probabilities are not waved through). See README.md for the measured
figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_OPSET = 2**31 - 1

F3 = ("float32", "float64", "float16")
F4 = F3 + ("bfloat16",)


@dataclass(frozen=True)
class Segment:
    since: int
    until: int
    types: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class NormOp:
    op: str
    segments: tuple[Segment, ...]
    inputs: tuple[str | None, ...]  # None: unconstrained (an optional input)
    outputs: tuple[str, ...]
    attrs: tuple[str, ...]
    domain: str = ""
    # attribute name -> the only value the kernel implements
    refuse: tuple[tuple[str, Any], ...] = ()
    # at most this many non-empty outputs (BatchNormalization: training outputs)
    max_outputs: int | None = None

    @property
    def since(self) -> int:
        return self.segments[0].since

    @property
    def x_types(self) -> tuple[str, ...]:
        seen: list[str] = []
        for s in self.segments:
            first = self.inputs[0]
            assert first is not None  # X is always constrained
            seen.extend(t for t in s.types[first] if t not in seen)
        return tuple(seen)

    def segment_at(self, opset: int) -> Segment | None:
        for s in self.segments:
            if s.since <= opset <= s.until:
                return s
        return None


def _seg(since: int, until: int = MAX_OPSET, **types: tuple[str, ...]) -> Segment:
    return Segment(since, until, dict(types))


_SOFTMAX_SEGS = (_seg(1, 12, T=F3), _seg(13, T=F4))
_STASH = (("stash_type", 1),)

NORM_OPS: tuple[NormOp, ...] = (
    NormOp("Softmax", _SOFTMAX_SEGS, ("T",), ("T",), ("axis",)),
    NormOp("LogSoftmax", _SOFTMAX_SEGS, ("T",), ("T",), ("axis",)),
    # The optional bias has X's type T: an absent one (name "") matches any
    # constraint, a present one of another type is refused like X or scale.
    NormOp("LayerNormalization", (_seg(17, T=F4, U=("float32", "bfloat16")),), ("T", "T", "T"),
           ("T", "U", "U"), ("axis", "epsilon", "stash_type"), refuse=_STASH),
    NormOp("RMSNormalization", (_seg(23, T=F4, V=F4),), ("T", "V"), ("V",),
           ("axis", "epsilon", "stash_type"), refuse=_STASH),
    # Not an ONNX operator: the default-domain op of onnxruntime that Llama
    # and Qwen exports use. X and scale have independent float types, Y has
    # the scale's type; the optional second output is the inverse standard
    # deviation (U: float32 when not inferred).
    NormOp("SimplifiedLayerNormalization", (_seg(1, T=F4, V=F4, U=("float32", "float64")),), ("T", "V"),
           ("V", "U"), ("axis", "epsilon", "stash_type"), refuse=_STASH),
    # Inference mode only: training_mode=1 (and the running statistics
    # outputs) or spatial=0 nodes are refused and run on the fallback.
    NormOp("BatchNormalization",
           (_seg(7, 13, T=F3), _seg(14, 14, T=F4, U=F4), _seg(15, T=F4, T1=F4, T2=F4)),
           ("T", "T", "T", "T", "T"), ("T",), ("epsilon", "momentum", "training_mode", "spatial"),
           refuse=(("training_mode", 0), ("spatial", 1)), max_outputs=1),
    NormOp("GroupNormalization", (_seg(18, 20, T=F4), _seg(21, T=F4)), ("T", "T", "T"), ("T",),
           ("num_groups", "epsilon", "stash_type"), refuse=_STASH),
    NormOp("InstanceNormalization", (_seg(6, 21, T=F3), _seg(22, T=F4)), ("T", "T", "T"), ("T",), ("epsilon",)),
    NormOp("LpNormalization", (_seg(1, 21, T=F3), _seg(22, T=F4)), ("T",), ("T",), ("axis", "p")),
    NormOp("MeanVarianceNormalization", (_seg(9, 12, T=F3), _seg(13, T=F4)), ("T",), ("T",), ("axes",)),
)

# BatchNormalization's parameter constraints at opsets 14 and 15.
BATCHNORM_INPUTS = {14: ("T", "U", "U", "U", "U"), 15: ("T", "T1", "T1", "T2", "T2")}

BY_NAME: dict[str, NormOp] = {o.op: o for o in NORM_OPS}

# (atol, rtol) against a float64 oracle. float32: the row engine's exp is
# within 2 ulp and the reductions keep 4 x W partial sums; float16 and
# bfloat16 are computed in float32 and rounded once to the output type.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-6, 1e-5),
    "float64": (1e-12, 1e-11),
    # half an output ulp (2^-11, 2^-8) plus the float32 error; the absolute
    # term covers float16 subnormal outputs (quantum 2^-24)
    "float16": (1e-4, 1e-3),
    "bfloat16": (1e-3, 8e-3),
}


def kernel_name(op: str) -> str:
    return f"olc_normalization::{op}"
