"""The one table of olc-tensor's kernels.

Registration (plugin.py), the tests and the benchmarks read this table.
Each row gives the operator, the constraint of each input position, and one
segment per range of opsets with the element types the kernel claims there
(bfloat16 joins most of these schemas at opset 13, float8 joins Cast and
CastLike at 19). Types are claimed only where that version's schema allows
them and the kernel handles them. A row whose types belong to another
constraint than input 0's names it (`segment_constraint`: OneHot's values
T3, ConstantOfShape's output T2); two rows have a domain of their own (the
ConstantOfShape and Concat nodes the graph passes of passes.py restate).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_OPSET = 2**31 - 1

NUMERIC = ("float32", "float64", "float16",
           "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
ALL_NO_BF16 = NUMERIC + ("bool",)
ALL = ALL_NO_BF16 + ("bfloat16",)
FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
ALL_F8 = ALL + FLOAT8  # Cast / CastLike from opset 19
INDEX = ("int32", "int64")


@dataclass(frozen=True)
class Segment:
    since: int
    until: int
    types: tuple[str, ...]  # element types of constraint T (T1 for Cast)


@dataclass(frozen=True)
class TensorOp:
    op: str
    segments: tuple[Segment, ...]
    inputs: tuple[str | None, ...]  # constraint per input position (None: checked by the kernel)
    extra_types: tuple[tuple[str, tuple[str, ...]], ...] = ()  # other constraints, e.g. Tind
    description: str = ""
    # The constraint the segments' types belong to (default: input 0's);
    # `mirrors` take the same types (EyeLike's output T2 follows T1's list).
    segment_constraint: str = ""
    mirrors: tuple[str, ...] = ()
    # Output constraints, for typing outputs when inference could not.
    outputs: tuple[str | None, ...] = ()
    domain: str = ""

    @property
    def since(self) -> int:
        return self.segments[0].since

    @property
    def main_constraint(self) -> str:
        return self.segment_constraint or self.inputs[0] or "T"

    def types_at(self, opset: int) -> tuple[str, ...]:
        for s in self.segments:
            if s.since <= opset <= s.until:
                return s.types
        return ()


def _bf16_from_13(since: int) -> tuple[Segment, ...]:
    if since >= 13:
        return (Segment(since, MAX_OPSET, ALL),)
    return (Segment(since, 12, ALL_NO_BF16), Segment(13, MAX_OPSET, ALL))


def _split(since: int, changes: dict[int, tuple[str, ...]]) -> tuple[Segment, ...]:
    """Segments from {first opset: types}; each runs until the next one."""
    starts = sorted(changes)
    assert starts[0] == since
    return tuple(Segment(s, (starts[k + 1] - 1) if k + 1 < len(starts) else MAX_OPSET, changes[s])
                 for k, s in enumerate(starts))


def _bf16_from_13_numeric(since: int) -> tuple[Segment, ...]:
    return (Segment(since, 12, NUMERIC), Segment(13, MAX_OPSET, NUMERIC + ("bfloat16",)))


RED = ("float32", "float64", "float16", "int32", "int64", "uint32", "uint64")
BYTE = ("int8", "uint8")
RED_FLOAT = ("float32", "float64", "float16", "bfloat16")
CUMSUM = ("float32", "float64", "int32", "int64", "uint32", "uint64")
RANGE = ("float32", "float64", "int16", "int32", "int64")
INT64 = ("int64",)
# Nodes the graph passes (passes.py) restate in a domain of their own:
# ConstantOfShape, whose `value` is a TENSOR attribute, which the kernel ABI
# does not carry (as the INT attributes `dtype`, the ONNX code, and
# `value_bits`, its bytes); a Concat whose inputs are Slices of one tensor
# (as one node reading that tensor, the Slices as INTS attributes).
RESTATED_DOMAIN = "olc.tensor"


# QuantizeLinear / DequantizeLinear: the quantized types. int4/uint4 join
# the schemas at 21 (one element per byte, as olc-core holds them); int2/uint2,
# float4e2m1 and float8e8m0 scales (23-25) have no element type in the kernel
# ABI: those nodes fall back.
QFLOAT = ("float32", "float16", "bfloat16")
Q8 = ("int8", "uint8")
Q16 = ("int16", "uint16")
Q4 = ("int4", "uint4")
F32 = ("float32",)


def _quantize_rows() -> tuple[TensorOp, ...]:
    """One row per schema shape: the scale's constraint changes at 19 and 23."""
    q = "QuantizeLinear"
    dq = "DequantizeLinear"
    return (
        # 10: per tensor; 13: + axis. y_scale is float32; x float32 or int32.
        TensorOp(q, (Segment(10, 18, ("float32", "int32")),), ("T1", "Ts", "T2"),
                 (("Ts", F32), ("T2", Q8)), "SIMD float32 -> int8/uint8, per tensor / per axis", outputs=("T2",)),
        # 19: x and y_scale share T1 (float32/16, bfloat16), float8 outputs;
        # 21: + int16/uint16, int4/uint4, block_size.
        TensorOp(q, (Segment(19, 20, QFLOAT),), ("T1", "T1", "T2"), (("T2", Q8 + FLOAT8),), outputs=("T2",)),
        TensorOp(q, (Segment(21, 22, QFLOAT),), ("T1", "T1", "T2"), (("T2", Q8 + Q16 + Q4 + FLOAT8),),
                 outputs=("T2",)),
        # 23+: y_scale has a constraint of its own; output_dtype, precision.
        TensorOp(q, (Segment(23, MAX_OPSET, QFLOAT + ("int32",)),), ("T1", "T2", "T3"),
                 (("T2", QFLOAT), ("T3", Q8 + Q16 + Q4 + FLOAT8)), outputs=("T3",)),
        TensorOp(dq, (Segment(10, 18, Q8 + ("int32",)),), ("T", "Ts", "T"), (("Ts", F32),),
                 "SIMD int4/uint4/int8/uint8/int16/uint16/int32 -> float32", outputs=("Ts",)),
        TensorOp(dq, (Segment(19, 20, Q8 + ("int32",) + FLOAT8),), ("T1", "T2", "T1"), (("T2", QFLOAT),),
                 outputs=("T2",)),
        TensorOp(dq, (Segment(21, 22, Q8 + Q16 + Q4 + ("int32",) + FLOAT8),), ("T1", "T2", "T1"), (("T2", QFLOAT),),
                 outputs=("T2",)),
        # 23+: the output type comes from output_dtype (default: the scale's).
        TensorOp(dq, (Segment(23, MAX_OPSET, Q8 + Q16 + Q4 + ("int32",) + FLOAT8),), ("T1", "T2", "T1"),
                 (("T2", QFLOAT), ("T3", QFLOAT)), outputs=("T3",)),
        TensorOp("DynamicQuantizeLinear", (Segment(11, MAX_OPSET, F32),), ("T1",), (("T2", ("uint8",)), ("Ts", F32)),
                 "one SIMD min/max pass, then the float32 -> uint8 kernel", outputs=("T2", "Ts", "T2")),
    )


POOL_FLOAT = ("float32", "float64", "float16")


def _pool_rows() -> tuple[TensorOp, ...]:
    """Pooling: float32/64/16 (+ bfloat16 22+); MaxPool + int8/uint8 from 12
    and its Indices output (int64) from 8."""
    bf = ("bfloat16",)
    plain = _split(1, {1: POOL_FLOAT, 22: POOL_FLOAT + bf})
    rows = [TensorOp("MaxPool", _split(1, {1: POOL_FLOAT, 12: POOL_FLOAT + BYTE, 22: POOL_FLOAT + BYTE + bf}),
                     ("T",), (("I", INT64),), "rows reduced into a padded buffer, then a SIMD sliding window",
                     outputs=("T", "I"))]
    for op in ("AveragePool", "LpPool", "GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"):
        rows.append(TensorOp(op, plain, ("T",), outputs=("T",)))
    return tuple(rows)


def _resize_rows() -> tuple[TensorOp, ...]:
    """Resize: scales input (10); roi, scales, sizes inputs (11+, checked by
    the kernel); bfloat16 from 13. Upsample: scales attribute (7-8), input (9).
    Every numeric type and bool (bool by nearest only)."""
    return (
        TensorOp("Resize", (Segment(10, 10, ALL_NO_BF16),), ("T", None), outputs=("T",),
                 description="per-axis tap tables cached per shape; nearest gathers, separable SIMD linear/cubic"),
        TensorOp("Resize", (Segment(11, 12, ALL_NO_BF16), Segment(13, MAX_OPSET, ALL)), ("T1", None, None, None),
                 outputs=("T1",)),
        TensorOp("Upsample", (Segment(7, 8, ALL_NO_BF16),), ("T",), outputs=("T",)),
        TensorOp("Upsample", (Segment(9, 9, ALL_NO_BF16),), ("T", None), outputs=("T",)),
    )


def _sampling_rows() -> tuple[TensorOp, ...]:
    """RoiAlign, MaxRoiPool, GridSample, Col2Im, MaxUnpool: the float types
    (bfloat16 from 22, where it joins these schemas); Col2Im every numeric
    type. GridSample's X (T1) and grid (T2) may differ in type."""
    bf = ("bfloat16",)
    fl = _split(1, {1: POOL_FLOAT, 22: POOL_FLOAT + bf})
    col2im = NUMERIC + bf
    return (
        TensorOp("RoiAlign", (Segment(10, 21, POOL_FLOAT), Segment(22, MAX_OPSET, POOL_FLOAT + bf)),
                 ("T1", "T1", "T2"), (("T2", INT64),), "tap plan per block of bins, SIMD gathers per channel",
                 outputs=("T1",)),
        TensorOp("MaxRoiPool", fl, ("T", "T"), description="rows of bins reduced by the SIMD pooling rows",
                 outputs=("T",)),
        TensorOp("GridSample", (Segment(16, 21, POOL_FLOAT),), ("T1", "T2"), (("T2", POOL_FLOAT),),
                 "tap plan per chunk of points, SIMD gathers per channel", outputs=("T1",)),
        TensorOp("GridSample", (Segment(22, MAX_OPSET, POOL_FLOAT + bf),), ("T1", "T2"), (("T2", POOL_FLOAT + bf),),
                 outputs=("T1",)),
        TensorOp("Col2Im", (Segment(18, MAX_OPSET, col2im),), ("T", None, None),
                 description="per plane, kernel offsets in order, SIMD row adds", outputs=("T",)),
        TensorOp("MaxUnpool", (Segment(9, 21, POOL_FLOAT), Segment(22, MAX_OPSET, POOL_FLOAT + bf)),
                 ("T1", "T2", None), (("T2", INT64),), outputs=("T1",)),
    )


SAMPLING_OPS = ("RoiAlign", "MaxRoiPool", "GridSample", "Col2Im", "MaxUnpool")

RESIZE_OPS = ("Resize", "Upsample")

POOL_OPS = ("MaxPool", "AveragePool", "LpPool", "GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool")

QUANTIZE_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def _reduce_segments() -> tuple[Segment, ...]:
    return _split(1, {1: RED, 13: RED + ("bfloat16",)})

OPS: tuple[TensorOp, ...] = (
    TensorOp("Transpose", _bf16_from_13(1), ("T",), description="blocked 2-D tiles after merging dims"),
    TensorOp("Gather", _bf16_from_13(1), ("T", "Tind"), (("Tind", INDEX),), "row copies, indices checked first"),
    TensorOp("GatherElements", _bf16_from_13(11), ("T", "Tind"), (("Tind", INDEX),)),
    TensorOp("Concat", _bf16_from_13(4), ("T",), description="row copies split across the executor"),
    TensorOp("Concat", (Segment(1, MAX_OPSET, ALL),), ("T",),
             description="a Concat of Slices of one tensor, restated by the graph pass: each part copied from its view",
             domain=RESTATED_DOMAIN),
    TensorOp("Split", _bf16_from_13(2), ("T",), description="split attribute, split input or num_outputs"),
    # Slice 1-9 takes starts/ends/axes as attributes; 10+ as int32/int64 inputs.
    TensorOp("Slice", (Segment(1, 9, ALL_NO_BF16),), ("T",)),
    TensorOp("Slice", (Segment(10, 12, ALL_NO_BF16), Segment(13, MAX_OPSET, ALL)),
             ("T", "Tind", "Tind", "Tind", "Tind"), (("Tind", INDEX),)),
    TensorOp("Expand", _bf16_from_13(8), ("T", None)),
    TensorOp("Tile", _bf16_from_13(6), ("T", None)),
    TensorOp("Cast", (Segment(6, 12, ALL_NO_BF16), Segment(13, 18, ALL), Segment(19, MAX_OPSET, ALL_F8)), ("T1",),
             description="SIMD float32 <-> float16/bfloat16, float8 (19+)"),
    TensorOp("CastLike", (Segment(15, 18, ALL), Segment(19, MAX_OPSET, ALL_F8)), ("T1", "T2")),
    # Reductions: axes as an attribute until the opset where they become an
    # input (ReduceSum 13, the others 18); int8/uint8 join Max/Min at 12,
    # bool at 20.
    TensorOp("ReduceSum", _split(1, {1: RED, 13: RED + ("bfloat16",)}), ("T", None)),
    TensorOp("ReduceMean", _split(1, {1: RED, 13: RED + ("bfloat16",)}), ("T", None)),
    TensorOp("ReduceMax", _split(1, {1: RED, 12: RED + BYTE, 13: RED + BYTE + ("bfloat16",),
                                     20: RED + BYTE + ("bfloat16", "bool")}), ("T", None)),
    TensorOp("ReduceMin", _split(1, {1: RED, 12: RED + BYTE, 13: RED + BYTE + ("bfloat16",),
                                     20: RED + BYTE + ("bfloat16", "bool")}), ("T", None)),
    TensorOp("ArgMax", _bf16_from_13_numeric(1), ("T",)),
    TensorOp("ArgMin", _bf16_from_13_numeric(1), ("T",)),
    TensorOp("ScatterND", _bf16_from_13(11), ("T", None, "T")),
    TensorOp("NonZero", (Segment(9, 12, ALL_NO_BF16), Segment(13, MAX_OPSET, ALL)), ("T",)),
    TensorOp("TopK", _bf16_from_13_numeric(1), ("T", None)),
    # Pad 2-10: pads/value attributes, float types; 11+: inputs, numeric;
    # 13+: bool and bfloat16 too.
    TensorOp("Pad", (Segment(2, 10, ("float32", "float64", "float16")), Segment(11, 12, NUMERIC),
                     Segment(13, MAX_OPSET, ALL)), ("T", None, None, None)),
    # More reductions on the same traversal: axes as an input from 18;
    # integers leave ReduceLogSumExp at 28.
    TensorOp("ReduceProd", _reduce_segments(), ("T", None)),
    TensorOp("ReduceL1", _reduce_segments(), ("T", None), description="SIMD float32 rows of |x|"),
    TensorOp("ReduceL2", _reduce_segments(), ("T", None), description="SIMD float32 rows of x*x"),
    TensorOp("ReduceSumSquare", _reduce_segments(), ("T", None), description="SIMD float32 rows of x*x"),
    TensorOp("ReduceLogSumExp", _split(1, {1: RED, 13: RED + ("bfloat16",), 28: RED_FLOAT}), ("T", None),
             description="running max and rescaled sum: no overflow"),
    TensorOp("CumSum", _split(11, {11: CUMSUM, 14: CUMSUM + ("float16", "bfloat16")}), ("T", "T2"),
             (("T2", INDEX),)),
    TensorOp("GatherND", _bf16_from_13(11), ("T", "Tind"), (("Tind", INT64),), "batch_dims from 12"),
    # reduction: add/mul from 16, max/min from 18 (checked by the kernel).
    TensorOp("ScatterElements", _bf16_from_13(11), ("T", "Tind", "T"), (("Tind", INDEX),)),
    TensorOp("OneHot", (Segment(9, 27, ALL_NO_BF16), Segment(28, MAX_OPSET, ALL)), ("T1", "T2", "T3"),
             (("T1", NUMERIC), ("T2", NUMERIC)), segment_constraint="T3", outputs=("T3",)),
    # The output type comes from the `value` attribute (float32 without one).
    TensorOp("ConstantOfShape", (Segment(9, 19, ALL_NO_BF16), Segment(20, MAX_OPSET, ALL_F8)), ("T1",),
             (("T1", INT64),), segment_constraint="T2", outputs=("T2",)),
    TensorOp("ConstantOfShape", (Segment(1, MAX_OPSET, ALL_F8),), ("T1",), (("T1", INT64),),
             "ConstantOfShape with its value restated by the graph pass", segment_constraint="T2",
             outputs=("T2",), domain=RESTATED_DOMAIN),
    TensorOp("Range", (Segment(11, 26, RANGE), Segment(27, MAX_OPSET, RANGE + ("float16", "bfloat16"))),
             ("T", "T", "T"), outputs=("T",)),
    TensorOp("EyeLike", (Segment(9, 21, ALL_NO_BF16), Segment(22, MAX_OPSET, ALL)), ("T1",), mirrors=("T2",),
             outputs=("T2",)),
    TensorOp("Trilu", (Segment(14, MAX_OPSET, ALL),), ("T", None)),
    # mode (DCR/CRD): DepthToSpace from 11, SpaceToDepth from 28.
    TensorOp("DepthToSpace", _bf16_from_13(1), ("T",), description="row by row, each row read once"),
    TensorOp("SpaceToDepth", _bf16_from_13(1), ("T",), description="row by row, each row read once"),
) + _quantize_rows() + _pool_rows() + _resize_rows() + _sampling_rows()

BY_NAME: dict[str, list[TensorOp]] = {}
for _o in OPS:
    if not _o.domain:
        BY_NAME.setdefault(_o.op, []).append(_o)

# Element type names by ONNX TensorProto code, for the types olc moves natively.
CODE_TO_TYPE = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
    17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
}
# The quantized element types QuantizeLinear's output_dtype may name too.
QUANT_CODE_TO_TYPE = {**CODE_TO_TYPE, 21: "uint4", 22: "int4"}


def kernel_name(op: str) -> str:
    return f"olc_tensor::{op}"


def cast_target_types(opset: int) -> tuple[str, ...]:
    """Types Cast converts to natively at this opset."""
    if opset >= 19:
        return ALL_F8
    return ALL if opset >= 13 else ALL_NO_BF16
