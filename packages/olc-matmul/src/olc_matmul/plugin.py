"""olc-core plugin: registers the kernels listed in manifest.py, the Conv
graph pass (passes.py) and the MatMul bias pass (matmul_passes.py)."""

from __future__ import annotations

import olc_core

from . import manifest, rnn_attributes

FAMILY = "olc-matmul"
DESCRIPTIONS = {
    "Einsum": "Einsum: pairwise contractions on the batched GEMM, strided permutes and reductions",
    "Conv": "Conv: pointwise GEMM, implicit GEMM over im2col tiles on the packed microkernels, direct depthwise",
    "ConvTranspose": "ConvTranspose: W^T X on the packed microkernels, scattered back per tile (col2im)",
    "QLinearConv": "QLinearConv: the implicit GEMM on the integer kernels (VNNI / vpmaddwd), exact zero-point "
                   "compensation, requantized as the ONNX reference",
    "ConvInteger": "ConvInteger: the implicit GEMM on the integer kernels (VNNI / vpmaddwd), exact int32 sums",
    "FusedConv": "Conv with BatchNormalization folded into its weights and an activation applied per output tile",
    "FusedMatMul": "FusedMatMul: MatMul with transposes and alpha on the packed GEMM, operands read in place",
    "MatMulAdd": "MatMul with its bias Add, the bias added as the GEMM's output tiles are stored",
    "MatMulIntegerToFloat": "MatMulIntegerToFloat: the integer GEMM (VNNI / vpmaddwd) with a float output stage",
    "DynamicQuantizeMatMul": "DynamicQuantizeMatMul: A quantized to uint8 per tensor, then the integer GEMM",
    "MatMulNBits": "MatMulNBits: 2/4/8-bit weights; float32 GEMV/GEMM, or int8 activations (accuracy_level 4) on VNNI",
    "LSTM": "LSTM: the input projection of all steps as one GEMM, per step the recurrent GEMM (GEMV for one row) "
            "on the packed R and the fused gate math",
    "GRU": "GRU: the input projection of all steps as one GEMM, per step the recurrent GEMM (GEMV for one row) "
           "on the packed R (z and r, then r * H against h without linear_before_reset) and the fused gate math",
    "RNN": "RNN: the input projection of all steps as one GEMM, per step the recurrent GEMM (GEMV for one row) "
           "on the packed R and the fused activation",
    "DynamicQuantizeLSTM": "DynamicQuantizeLSTM: LSTM on the dequantized int8/uint8 weights (float activations); "
                           "one row's recurrent product reads the int8 R",
}
# Ops whose attributes the kernel ABI cannot carry as they are (STRINGS).
NATIVE_ATTRIBUTES = dict.fromkeys(("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM"), rnn_attributes.native_attributes)


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_matmul._ext")
    out = []
    for spec in manifest.OPS:
        factory = ext.vtable(spec.op)
        for seg in spec.segments:
            types = {spec.constraint: seg.types, **dict(spec.extra_types)}
            out.append(
                olc_core.KernelRegistration(
                    domain=spec.domain,
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op),
                    types=types,
                    inputs=spec.inputs,
                    outputs=spec.outputs,
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=DESCRIPTIONS.get(spec.op, f"{spec.op}: packed register-blocked GEMM, scalar/AVX2/AVX-512"),
                    native_attributes=NATIVE_ATTRIBUTES.get(spec.op),
                )
            )
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()


@olc_core.hookimpl
def olc_register_graph_passes() -> list[olc_core.GraphPass]:
    from . import matmul_passes, passes

    return [passes.GRAPH_PASS, matmul_passes.GRAPH_PASS]
