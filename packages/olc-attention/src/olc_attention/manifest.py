"""The one table of olc-attention's kernels.

Registration (plugin.py), the tests and the benchmarks all read this table.
Each row gives the operator (domain, type, opset range), the type
constraint of each input and output and the kernel name. Every operator is
registered twice: the optimized kernel (``olc_attention::<Name>``) and its
plain reference (``olc_attention::Naive<Name>``, ``implementation="naive"``).

``TOLERANCE`` is the accepted difference between the optimized and the
naive kernel per element type, as (a, r): |y - ref| <= a * max|ref| +
r * |ref| over the output (see README.md for the figures behind them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAMILY = "olc-attention"
LIBRARY = "olc_attention"
FLOATS = ("float32", "float16", "bfloat16")
# TensorScatter moves elements without looking at them: every fixed-width type.
ANY_FIXED = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
             "uint32", "uint64", "bool", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
             "uint4", "int4")


@dataclass(frozen=True)
class AttnOp:
    domain: str
    op: str
    name: str                   # kernel name without the library and Naive prefix
    since: int
    types: dict[str, tuple[str, ...]] = field(hash=False)
    inputs: tuple[str | None, ...]
    outputs: tuple[str | None, ...]
    summary: str


OPS: tuple[AttnOp, ...] = (
    AttnOp("ai.onnx", "Attention", "Attention", 23,
           {"T1": FLOATS, "U": ("bool", *FLOATS), "M": ("int64",)},
           ("T1", "T1", "T1", "U", "T1", "T1", "M"), ("T1", "T1", "T1", "T1"),
           "scaled dot-product attention: 3-D / 4-D, MHA / GQA / MQA, past / present, masks, causal, "
           "softcap, windows (25), nonpad_kv_seqlen (24), qk_matmul_output"),
    AttnOp("ai.onnx", "RotaryEmbedding", "RotaryEmbedding", 23,
           {"T": FLOATS, "M": ("int64",)}, ("T", "T", "T", "M"), ("T",),
           "rotary position embedding: split-half or interleaved, partial, rank 3 / 4"),
    AttnOp("ai.onnx", "TensorScatter", "TensorScatter", 24,
           {"T": ANY_FIXED, "M": ("int64",)}, ("T", "T", "M"), ("T",),
           "KV-cache update, linear or circular, in place when the runtime owns the cache"),
    AttnOp("com.microsoft", "GroupQueryAttention", "GroupQueryAttention", 1,
           {"T": FLOATS, "M": ("int32",), "P": ("int64",)},
           ("T", "T", "T", "T", "T", "M", "M", "T", "T", "P", "T", "T"), ("T", "T", "T"),
           "grouped-query attention with a BNSH KV cache, packed or separate QKV, rotary fused into the Q/K load, "
           "local window, softcap, head sink"),
    AttnOp("com.microsoft", "RotaryEmbedding", "MicrosoftRotaryEmbedding", 1,
           {"T": FLOATS, "M": ("int64",)}, ("T", "M", "T", "T"), ("T",),
           "rotary position embedding: position ids or a start position, split-half or interleaved, partial"),
    AttnOp("com.microsoft", "MultiHeadAttention", "MultiHeadAttention", 1,
           {"T": FLOATS, "M": ("int32",)}, ("T", "T", "T", "T", "M", "T", "T", "T", "M", "M"), ("T", "T", "T"),
           "multi-head attention: separate, packed QKV / KV or BNSH key and value, bias, key padding mask, "
           "attention_bias, past / present"),
    AttnOp("com.microsoft", "Attention", "MicrosoftAttention", 1,
           {"T": FLOATS, "M": ("int32",)}, ("T", "T", "T", "M", "T", "T", "M"), ("T", "T"),
           "BERT-style attention: the QKV projection (a blocked GEMM of the family) then the engine; mask_index "
           "lengths, start/end, 2-D and 3-D; unidirectional; past / present"),
    # The recurrent-state operators of hybrid linear-attention decoders (linear_adapter.cc).
    AttnOp("ai.onnx", "LinearAttention", "LinearAttention", 27,
           {"T": FLOATS, "S": FLOATS}, ("T", "T", "T", "S", "T", "T"), ("T", "S"),
           "linear attention with a recurrent state: linear, gated, delta, gated_delta rules, per-head or "
           "per-key decay, GQA / MQA; prefill and decode on column slabs of the state"),
    AttnOp("com.microsoft", "LinearAttention", "MicrosoftLinearAttention", 1,
           {"T": FLOATS, "S": FLOATS}, ("T", "T", "T", "S", "T", "T"), ("T", "S"),
           "linear attention as onnxruntime defines it: the ai.onnx rules plus inverse GQA, key heads shared "
           "by several kv heads, state_window"),
    AttnOp("ai.onnx", "CausalConvWithState", "CausalConvWithState", 27,
           {"T": FLOATS}, ("T", "T", "T", "T"), ("T", "T"),
           "stateful causal depthwise 1-D convolution: bias, carried state, fused SiLU / Swish"),
    # The node the graph pass (passes.py) makes of an encoder export's unfused
    # attention: ai.onnx Attention's semantics on 3-D Q, K, V (opset 23).
    AttnOp("olc.fused", "Attention", "FusedAttention", 1,
           {"T1": FLOATS, "U": ("bool", *FLOATS)}, ("T1", "T1", "T1", "U"), ("T1",),
           "an encoder export's MatMul / scale / mask Add / Softmax / MatMul attention with its head split "
           "and merge, fused by the graph pass: the Attention engine on 3-D Q, K, V"),
    # com.microsoft Attention after its projection, which the graph pass runs as
    # a MatMul on olc-matmul: qkv = input . weights, then bias (added as Q, K, V
    # are used), mask_index, past, attention_bias; the attributes of Attention.
    AttnOp("olc.fused", "PackedQkvAttention", "PackedQkvAttention", 1,
           {"T": FLOATS, "M": ("int32",)}, ("T", "T", "M", "T", "T"), ("T", "T"),
           "com.microsoft Attention on its projection input . weights (a MatMul before it, made by the graph "
           "pass): the bias added as Q, K, V are loaded, then the engine"),
)

BY_NAME: dict[str, AttnOp] = {o.name: o for o in OPS}

# Optimized against naive. float32: the engine accumulates in float32 in
# another order than the float64 reference (a few ulps of the output
# scale); float16 / bfloat16: one rounding of the type on each side.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (2e-5, 2e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}


def kernel_name(name: str, naive: bool = False) -> str:
    return f"{LIBRARY}::{'Naive' if naive else ''}{name}"
