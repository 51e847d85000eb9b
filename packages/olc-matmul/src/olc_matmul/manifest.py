"""The one table of olc-matmul's kernels.

Registration (plugin.py), the tests and the benchmarks all read this table.
Each row gives the operator, its domain, and one segment per ONNX schema
version range with the element types claimed there (only types that
version's schema allows).

``TOLERANCE`` documents the accepted error of float results against a
float64 reference: ``|y - ref| <= atol_k * sqrt(K) * scale + rtol * |ref|``
where ``scale`` is the typical magnitude of one product. See README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_OPSET = 2**31 - 1

F3 = ("float32", "float64", "float16")
F4 = F3 + ("bfloat16",)
I8 = ("uint8", "int8")
# Einsum: every numeric type of its schema (integers wrap).
CONV_T = ("float32", "float16")
EINSUM_T = F3 + ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
F32 = ("float32",)


@dataclass(frozen=True)
class Segment:
    since: int
    until: int
    types: tuple[str, ...]


@dataclass(frozen=True)
class OpSpec:
    op: str
    domain: str
    segments: tuple[Segment, ...]
    constraint: str  # the type constraint of the float operands
    inputs: tuple[str | None, ...]  # constraint name per input position
    outputs: tuple[str | None, ...]
    extra_types: tuple[tuple[str, tuple[str, ...]], ...] = ()  # other constraints

    @property
    def types(self) -> tuple[str, ...]:
        seen: list[str] = []
        for s in self.segments:
            seen.extend(t for t in s.types if t not in seen)
        return tuple(seen)


OPS: tuple[OpSpec, ...] = (
    # Gemm 7..10: C required; 11: C optional; 13: bfloat16 added. C has A's
    # type T: an absent C (name "") matches any constraint, a present one of
    # another type is refused like a mismatched B.
    OpSpec("Gemm", "", (Segment(7, 12, F3), Segment(13, MAX_OPSET, F4)), "T", ("T", "T", "T"), ("T",)),
    # MatMul 1..8: float types; 9: integers (not claimed here); 13: bfloat16.
    OpSpec("MatMul", "", (Segment(1, 12, F3), Segment(13, MAX_OPSET, F4)), "T", ("T", "T"), ("T",)),
    # The optional zero points have their operand's type (a_zero_point T1,
    # b_zero_point T2); an absent one (name "") matches any constraint.
    OpSpec("MatMulInteger", "", (Segment(10, MAX_OPSET, I8),), "T1", ("T1", "T2", "T1", "T2"), ("T3",),
           (("T2", I8), ("T3", ("int32",)))),
    # Scales: float32 at 10; float32/float16/bfloat16 at 21 (checked in create()).
    OpSpec("QLinearMatMul", "", (Segment(10, MAX_OPSET, I8),), "T1", ("T1", None, "T1", "T2", None, "T2", None, "T3"),
           ("T3",), (("T2", I8), ("T3", I8))),
    # com.microsoft: A, scales and bias share T1; B uint8; zero points T3
    # (uint8, or A's float type: create() checks which); g_idx T4 int32, a
    # present one refused in create().
    OpSpec("MatMulNBits", "com.microsoft", (Segment(1, MAX_OPSET, ("float32", "float16", "bfloat16")),), "T1",
           ("T1", "T2", "T1", "T3", "T4", "T1"), ("T1",),
           (("T2", ("uint8",)), ("T3", ("uint8", "float32", "float16", "bfloat16")), ("T4", ("int32",)))),
    # com.microsoft FusedMatMul: MatMul with transposes of the last two axes,
    # of the first axis into the rows (transBatchA/B) and alpha; every type
    # of its schema.
    OpSpec("FusedMatMul", "com.microsoft", (Segment(1, MAX_OPSET, F4),), "T", ("T", "T"), ("T",)),
    # olc.fused MatMulAdd (the matmul-add graph pass, matmul_passes.py):
    # MatMul(A, B) + bias, bias of shape [N] added as the output tiles are
    # stored.
    OpSpec("MatMulAdd", "olc.fused", (Segment(1, MAX_OPSET, F4),), "T", ("T", "T", "T"), ("T",)),
    # com.microsoft MatMulIntegerToFloat: A T1, B T2 (uint8 or int8), the
    # scales, the bias and Y T3 (float32, float16); zero points of A's and
    # B's types.
    OpSpec("MatMulIntegerToFloat", "com.microsoft", (Segment(1, MAX_OPSET, I8),), "T1",
           ("T1", "T2", "T3", "T3", "T1", "T2", "T3"), ("T3",), (("T2", I8), ("T3", ("float32", "float16")))),
    # com.microsoft DynamicQuantizeMatMul: A, b_scale, bias and Y float32 (T1),
    # B and its zero point uint8 or int8 (T2).
    OpSpec("DynamicQuantizeMatMul", "com.microsoft", (Segment(1, MAX_OPSET, ("float32",)),), "T1",
           ("T1", "T2", "T1", "T2", "T1"), ("T1",), (("T2", I8),)),
    # Einsum 12: every numeric type; 28: bfloat16 added. Variadic: the types
    # of inputs past the first are checked equal in create().
    OpSpec("Einsum", "", (Segment(12, 27, EINSUM_T), Segment(28, MAX_OPSET, EINSUM_T + ("bfloat16",))), "T",
           ("T",), ("T",)),
    # Conv 1, 11 (the same attributes), 22: bfloat16 added. float64 is left
    # to the fallback. X, W and the optional B share T.
    OpSpec("Conv", "", (Segment(1, 10, CONV_T), Segment(11, 21, CONV_T), Segment(22, MAX_OPSET, CONV_T + ("bfloat16",))),
           "T", ("T", "T", "T"), ("T",)),
    # olc.fused FusedConv (the Conv graph pass, passes.py): Conv with a
    # following BatchNormalization folded into its constant weights and an
    # activation applied as its tiles are stored. Inputs X, W, B, then the
    # BatchNormalization's scale, bias, mean and var (any float type), then
    # the residual R (Y's shape and type T, added before the activation):
    # 4 inputs X, W, B, R; 7 with BatchNormalization; 8 with both. Input 3
    # is R (T) or scale (any float type): the kernel checks which.
    OpSpec("FusedConv", "olc.fused", (Segment(1, MAX_OPSET, CONV_T + ("bfloat16",)),), "T",
           ("T", "T", "T", None, None, None, None, "T"), ("T",)),
    # QLinearConv 10: x, x_zero_point T1; w, w_zero_point T2 (w_zero_point
    # and w_scale per tensor or per output channel); y_zero_point and y T3;
    # B int32 T4; the scales float32 (checked in create()).
    OpSpec("QLinearConv", "", (Segment(10, MAX_OPSET, I8),), "T1",
           ("T1", None, "T1", "T2", None, "T2", None, "T3", "T4"), ("T3",),
           (("T2", I8), ("T3", I8), ("T4", ("int32",)))),
    # ConvInteger 10: x, x_zero_point T1; w, w_zero_point T2; int32 out.
    OpSpec("ConvInteger", "", (Segment(10, MAX_OPSET, I8),), "T1", ("T1", "T2", "T1", "T2"), ("T3",),
           (("T2", I8), ("T3", ("int32",)))),
    # ConvTranspose: the same versions and types as Conv.
    OpSpec("ConvTranspose", "",
           (Segment(1, 10, CONV_T), Segment(11, 21, CONV_T), Segment(22, MAX_OPSET, CONV_T + ("bfloat16",))),
           "T", ("T", "T", "T"), ("T",)),
    # LSTM 1 (its output_sequence attribute is ignored: the output names
    # say which outputs are wanted), 7, 14 (layout added), 22 (bfloat16
    # added): float32 only. X, W, R, B, initial_h, initial_c and P share T;
    # sequence_lens is int32 (T1).
    OpSpec("LSTM", "", (Segment(1, 6, F32), Segment(7, 13, F32), Segment(14, MAX_OPSET, F32)), "T",
           ("T", "T", "T", "T", "T1", "T", "T", "T"), ("T", "T", "T"), (("T1", ("int32",)),)),
    # GRU 1, 3 (linear_before_reset added), 7, 14 (layout added), 22
    # (bfloat16 added) and RNN 1, 7, 14, 22: float32 only, on LSTM's
    # driver; output_sequence (opsets 1 - 6) ignored as LSTM's. X, W, R, B
    # and initial_h share T; sequence_lens is int32 (T1).
    OpSpec("GRU", "", (Segment(1, 2, F32), Segment(3, 6, F32), Segment(7, 13, F32), Segment(14, MAX_OPSET, F32)),
           "T", ("T", "T", "T", "T", "T1", "T"), ("T", "T"), (("T1", ("int32",)),)),
    OpSpec("RNN", "", (Segment(1, 6, F32), Segment(7, 13, F32), Segment(14, MAX_OPSET, F32)), "T",
           ("T", "T", "T", "T", "T1", "T"), ("T", "T"), (("T1", ("int32",)),)),
    # com.microsoft DynamicQuantizeLSTM: LSTM's inputs (no layout; W [dirs,
    # input, 4 hidden] and R [dirs, hidden, 4 hidden] int8 or uint8, T2),
    # then W_scale, W_zero_point, R_scale, R_zero_point. W, R and the zero
    # points are left unconstrained here so that create() names which one
    # has which type (they must all have W's, int8 or uint8).
    OpSpec("DynamicQuantizeLSTM", "com.microsoft", (Segment(1, MAX_OPSET, F32),), "T",
           ("T", None, None, "T", "T1", "T", "T", "T", "T", None, "T", None), ("T", "T", "T"),
           (("T1", ("int32",)), ("T2", I8))),
)

BY_NAME = {s.op: s for s in OPS}

# The activation functions of the ONNX RNN operators in the order of the
# operator's documentation: the kernel takes `activations` as these indices
# (RnnAct in csrc/rnn_kernels.h). Names match case-insensitively, as in
# ONNX Runtime.
RNN_ACTIVATIONS = ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                   "Elu", "Softsign", "Softplus")

# Per element type: (atol per sqrt(K) unit-magnitude products, rtol).
TOLERANCE = {
    "float64": (1e-13, 1e-12),
    "float32": (2e-6, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}


def kernel_name(op: str) -> str:
    return f"olc_matmul::{op}"
