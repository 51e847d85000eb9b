"""Benchmark cases of olc-matmul for ``tools/benchmark_parity.py --suite matmul``.

Groups: ``gemm`` (the float32 Gemm corpus of 19 shapes), ``const`` (its
constant-B cases, also listed in ``gemm``), ``matmul`` (batched, broadcast
and vector MatMul), ``bf16``, ``integer`` (MatMulInteger), ``nbits_m1`` and
``nbits_m128`` (MatMulNBits 4-bit, block 32), ``nbits_int8_m1`` and
``nbits_int8_m128`` (the same with accuracy_level 4, with and without zero
points), ``ms_matmul`` (com.microsoft FusedMatMul, MatMulIntegerToFloat,
DynamicQuantizeMatMul at BERT-base shapes), ``einsum`` (attention,
batched-matmul and projection contractions, transposes, reductions, outer
product), ``conv`` (ResNet 3x3 and 1x1, depthwise 3x3, a 1-D audio
conv, a 2x upsampling ConvTranspose), ``conv_layers`` (ResNet-50 and
MobileNetV2 layer shapes at batch 1 and 8), ``qconv`` (QLinearConv at
ResNet-50 layer shapes, uint8 x int8 per channel, reported without a gate). ``benchmark_gates()`` gives
the acceptance gates, ``benchmark_extras(threads)`` the figures that are not
ratios against onnxruntime (FMA peak, GFLOP/s at 1024 cubed).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

F32 = "float32"


def _inp(shape, dtype=F32, generator="normal", constant=False):
    return {"shape": list(shape), "dtype": dtype, "generator": generator, "constant": constant}


def _gemm(name, M, N, K, *, ta=0, tb=0, bias=None, const_b=False, group="gemm"):
    a = _inp((K, M) if ta else (M, K))
    b = _inp((N, K) if tb else (K, N), constant=const_b)
    inputs = [a, b]
    if bias is not None:
        shape = {"scalar": (1,), "row": (N,), "column": (M, 1), "matrix": (M, N)}[bias]
        inputs.append(_inp(shape))
    attrs = {}
    if ta:
        attrs["transA"] = 1
    if tb:
        attrs["transB"] = 1
    return {
        "op": "Gemm", "domain": "", "opset": 13, "attributes": attrs, "inputs": inputs, "outputs": [F32],
        "expected_kernel": "olc_matmul::Gemm", "name": f"Gemm {name} {M}x{N}x{K}", "size": M * N * K,
        "flops": 2 * M * N * K,
        "rtol": 1e-4, "atol": 1e-3 * max(1.0, K ** 0.5 / 8), "group": group,
    }


def _matmul(name, sa, sb, *, const_b=False, dtype=F32, group="matmul", opset=13):
    k = sa[-1]
    return {
        "op": "MatMul", "domain": "", "opset": opset, "attributes": {},
        "inputs": [_inp(sa, dtype), _inp(sb, dtype, constant=const_b)], "outputs": [dtype],
        "expected_kernel": "olc_matmul::MatMul", "name": f"MatMul {name} {sa}x{sb}",
        "size": int(np.prod(sa)) * (sb[-1] if len(sb) > 1 else 1),
        "flops": 2 * int(np.prod(sa)) * (sb[-1] if len(sb) > 1 else 1),
        "rtol": 1e-4 if dtype == F32 else 2e-2, "atol": (1e-3 if dtype == F32 else 5e-2) * max(1.0, k ** 0.5 / 8),
        "group": group,
    }


def _einsum(name, equation, *shapes, group="einsum"):
    out = shapes[-1]
    shapes = shapes[:-1]
    k = max(1, int(np.prod([int(np.prod(s)) for s in shapes])) // max(1, int(np.prod(out))))
    return {
        "op": "Einsum", "domain": "", "opset": 13, "attributes": {"equation": equation},
        "inputs": [_inp(s) for s in shapes], "outputs": [F32],
        "expected_kernel": "olc_matmul::Einsum", "name": f"Einsum {name} {equation} {list(shapes)}",
        "size": int(np.prod(out)) * k, "rtol": 1e-4, "atol": 1e-3 * max(1.0, k ** 0.5 / 8), "group": group,
    }


def _conv(name, xs, ws, attrs, *, bias=True, group="conv"):
    n, _, *sp = xs
    m = ws[0]
    k = int(np.prod(ws[1:]))
    strides = attrs.get("strides", [1] * len(sp))
    out = [-(-d // s) for d, s in zip(sp, strides)]  # the cases use SAME-sized outputs
    inputs = [_inp(xs), _inp(ws, constant=True)] + ([_inp((m,), constant=True)] if bias else [])
    return {
        "op": "Conv", "domain": "", "opset": 11, "attributes": attrs, "inputs": inputs, "outputs": [F32],
        "expected_kernel": "olc_matmul::Conv", "name": f"Conv {name} {list(xs)}*{list(ws)}",
        "size": n * m * int(np.prod(out)) * k, "flops": 2 * n * m * int(np.prod(out)) * k,
        "rtol": 1e-4, "atol": 1e-3 * max(1.0, k ** 0.5 / 8), "group": group,
    }


def conv_cases() -> list[dict[str, Any]]:
    """Conv in the forms vision and audio models use, constant weights and bias."""
    return [
        _conv("resnet 3x3 64->64", (1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
        _conv("resnet 1x1 256->64", (1, 256, 56, 56), (64, 256, 1, 1), {}),
        _conv("depthwise 3x3", (1, 32, 112, 112), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
        _conv("audio 1-D k3", (1, 80, 3000), (384, 80, 3), {"pads": [1, 1]}),
    ]


# ResNet-50 and MobileNetV2 layers at 224x224 input: (label, X without the
# batch, W, attributes). Pads keep the output at input / stride.
RESNET50_LAYERS = [
    ("resnet50 stem 7x7 s2", (3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ("resnet50 3x3 64@56", (64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("resnet50 1x1 256->64@56", (256, 56, 56), (64, 256, 1, 1), {}),
    ("resnet50 3x3 s2 128@56", (128, 56, 56), (128, 128, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("resnet50 3x3 256@14", (256, 14, 14), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("resnet50 1x1 1024->256@14", (1024, 14, 14), (256, 1024, 1, 1), {}),
    ("resnet50 3x3 512@7", (512, 7, 7), (512, 512, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("resnet50 1x1 512->2048@7", (512, 7, 7), (2048, 512, 1, 1), {}),
]
MOBILENETV2_LAYERS = [
    ("mobilenetv2 stem 3x3 s2", (3, 224, 224), (32, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 dw 3x3 32@112", (32, 112, 112), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 dw 3x3 s2 96@112", (96, 112, 112), (96, 1, 3, 3),
     {"group": 96, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 dw 3x3 144@56", (144, 56, 56), (144, 1, 3, 3), {"group": 144, "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 dw 3x3 384@14", (384, 14, 14), (384, 1, 3, 3), {"group": 384, "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 dw 3x3 960@7", (960, 7, 7), (960, 1, 3, 3), {"group": 960, "pads": [1, 1, 1, 1]}),
    ("mobilenetv2 1x1 16->96@112", (16, 112, 112), (96, 16, 1, 1), {}),
    ("mobilenetv2 1x1 144->24@56", (144, 56, 56), (24, 144, 1, 1), {}),
    ("mobilenetv2 1x1 384->64@14", (384, 14, 14), (64, 384, 1, 1), {}),
    ("mobilenetv2 1x1 960->160@7", (960, 7, 7), (160, 960, 1, 1), {}),
]


def conv_layer_cases() -> list[dict[str, Any]]:
    """ResNet-50 and MobileNetV2 layer shapes at batch 1 and 8 (3x3, 1x1,
    depthwise, strided), constant weights and bias: group ``conv_layers``."""
    return [_conv(name, (batch, *xs), ws, attrs, group="conv_layers")
            for batch in (1, 8) for name, xs, ws, attrs in RESNET50_LAYERS + MOBILENETV2_LAYERS]


def conv_transpose_cases() -> list[dict[str, Any]]:
    """ConvTranspose as decoders use it: 2x upsampling, kernel 4, stride 2, pad 1, and the U-Net's kernel 2,
    stride 2 (a kernel that tiles the output)."""
    cases = []
    for xs, ws, attrs in (((1, 64, 28, 28), (64, 32, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
                          ((1, 256, 8, 8), (256, 128, 2, 2), {"strides": [2, 2]}),
                          ((1, 128, 16, 16), (128, 64, 2, 2), {"strides": [2, 2]})):
        k = ws[2] * ws[3]
        cases.append({
            "op": "ConvTranspose", "domain": "", "opset": 11, "attributes": attrs,
            "inputs": [_inp(xs), _inp(ws, constant=True), _inp((ws[1],), constant=True)], "outputs": [F32],
            "expected_kernel": "olc_matmul::ConvTranspose",
            "name": f"ConvTranspose upsample 2x {list(xs)}*{list(ws)}",
            "size": xs[1] * xs[2] * xs[3] * ws[1] * k, "rtol": 1e-4, "atol": 1e-3 * 4, "group": "conv",
        })
    return cases


def einsum_cases() -> list[dict[str, Any]]:
    """Einsum in the forms models use (the last shape of each is the output's)."""
    return [
        _einsum("attention scores", "bhid,bhjd->bhij", (1, 12, 128, 64), (1, 12, 128, 64), (1, 12, 128, 128)),
        _einsum("attention context", "bhij,bhjd->bhid", (1, 12, 128, 128), (1, 12, 128, 64), (1, 12, 128, 64)),
        _einsum("batched matmul", "bij,bjk->bik", (8, 128, 64), (8, 64, 128), (8, 128, 128)),
        _einsum("projection", "bsnh,nhd->bsd", (1, 128, 12, 64), (12, 64, 768), (1, 128, 768)),
        _einsum("transpose", "ij->ji", (1024, 1024), (1024, 1024)),
        _einsum("row sums", "ij->i", (1024, 1024), (1024,)),
        _einsum("batch sums", "...ij->...", (16, 256, 256), (16,)),
        _einsum("outer product", "i,j->ij", (1024,), (1024,), (1024, 1024)),
    ]


def gemm_corpus() -> list[dict[str, Any]]:
    c = [
        _gemm("direct", 32, 128, 16),
        _gemm("tiny", 1, 64, 64),
        _gemm("tiny const-B", 1, 64, 64, const_b=True),
        _gemm("square", 128, 128, 128),
        _gemm("square", 512, 512, 512),
        _gemm("square", 1024, 1024, 1024),
    ]
    for layout in ("scalar", "row", "column", "matrix"):
        c.append(_gemm(f"bias-{layout}", 256, 256, 256, bias=layout))
    c += [
        _gemm("skinny", 1, 1024, 1024),
        _gemm("skinny", 1024, 1, 1024),
        _gemm("large-K", 32, 32, 4096),
        _gemm("split-K", 2, 2, 4096),
        _gemm("transA", 128, 128, 128, ta=1),
        _gemm("transB", 128, 128, 128, tb=1),
        _gemm("transAB", 128, 128, 128, ta=1, tb=1),
        _gemm("transformer", 128, 3072, 768),
        _gemm("transformer const-B", 128, 3072, 768, const_b=True),
    ]
    return c


def benchmark_cases(sizes=None) -> list[dict[str, Any]]:
    cases = gemm_corpus()
    cases += [{**case, "group": "const"} for case in gemm_corpus() if case["inputs"][1].get("constant")]
    cases += [
        _matmul("batched", (8, 128, 64), (8, 64, 128)),
        _matmul("broadcast", (8, 128, 64), (64, 128)),
        _matmul("vector-matrix", (1024,), (1024, 1024)),
        _matmul("matrix-vector", (1024, 1024), (1024,)),
        _matmul("vector-vector", (4096,), (4096,)),
    ]
    for M in (1, 128):
        for K in (2048, 4096):
            for N in (2048, 4096):
                cases.append(_nbits(M, N, K))
    cases += nbits_int8_cases()
    cases += [_mmi(n) for n in (128, 512, 1024)]
    cases += ms_matmul_cases()
    cases += einsum_cases()
    cases += conv_cases()
    cases += conv_layer_cases()
    cases += conv_transpose_cases()
    cases += qconv_cases()
    return cases


def _gen_u8(rng, shape, dtype):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def _gen_s8(rng, shape, dtype):
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def _gen_s7(rng, shape, dtype):
    """int8 weights of 7 bits for uint8 x int8 products: onnxruntime's kernel
    for those on x86 without VNNI (vpmaddubsw) saturates the int16 sum of a
    pair of products, which 7-bit weights never reach; neither runtime's
    time depends on the values."""
    return rng.integers(-64, 64, size=shape, dtype=np.int64).astype(np.int8)


def _gen_scales(rng, shape, dtype):
    return rng.uniform(0.002, 0.02, size=shape).astype(dtype)


def nbits_int8_cases() -> list[dict[str, Any]]:
    """MatMulNBits 4-bit block 32 with accuracy_level 4 (int8 activations, as
    onnxruntime-genai writes CPU int4 decoder models), with and without zero
    points: groups ``nbits_int8_m1`` and ``nbits_int8_m128``."""
    return [_nbits(M, N, K, acc=4, zp=zp) for M in (1, 128) for zp in (False, True)
            for K in (2048, 4096) for N in (2048, 4096)]


def _nbits(M, N, K, bits=4, bs=32, *, acc=None, zp=True):
    kb = (K + bs - 1) // bs
    attrs = {"K": K, "N": N, "bits": bits, "block_size": bs}
    inputs = [_inp((M, K)), _inp((N, kb, bs * bits // 8), "uint8", _gen_u8, True),
              _inp((N * kb,), F32, _gen_scales, True)]
    if zp:
        inputs.append(_inp((N * ((kb * bits + 7) // 8),), "uint8", _gen_u8, True))
    name = f"MatMulNBits {bits}-bit block {bs} M={M} N={N} K={K}"
    group = "nbits_m1" if M == 1 else "nbits_m128"
    rtol, atol = 1e-4, 1e-3
    if acc is not None:
        attrs["accuracy_level"] = acc
        name = f"MatMulNBits {bits}-bit block {bs} acc{acc} {'zp' if zp else 'no-zp'} M={M} N={N} K={K}"
        group = "nbits_int8_m1" if M == 1 else "nbits_int8_m128"
        # Both runtimes quantize A to int8 per block the same way; they differ
        # only in float rounding of the block sums (and a rare tie in the
        # quantization itself, worth one unit of a block's scale).
        rtol, atol = 1e-3, 2e-2
    return {
        "op": "MatMulNBits", "domain": "com.microsoft", "opset": 1, "attributes": attrs, "inputs": inputs,
        "outputs": [F32], "expected_kernel": "olc_matmul::MatMulNBits", "name": name, "size": M * N * K,
        "flops": 2 * M * N * K,
        "rtol": rtol, "atol": atol, "group": group,
    }


def _ms(op, label, inputs, *, attrs=None, size=0, rtol=1e-4, atol=1e-3):
    case = {"op": op, "domain": "com.microsoft", "opset": 1, "attributes": attrs or {}, "inputs": inputs,
            "outputs": [F32], "expected_kernel": f"olc_matmul::{op}", "name": f"{op} {label}", "size": size,
            "rtol": rtol, "atol": atol, "group": "ms_matmul"}
    if op == "FusedMatMul":  # float work: its GFLOP/s against the FMA peak (not the integer products)
        case["flops"] = 2 * size
    return case


def ms_matmul_cases() -> list[dict[str, Any]]:
    """The com.microsoft matrix products at BERT-base shapes (hidden 768,
    12 heads, sequence 128; one token for decode): group ``ms_matmul``."""
    fmm, mif, dq = "FusedMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul"
    c = [
        _ms(fmm, "attention scores QK^T/8 (1, 12, 128, 64)", [_inp((1, 12, 128, 64)), _inp((1, 12, 128, 64))],
            attrs={"transB": 1, "alpha": 0.125}, size=12 * 128 * 128 * 64),
        _ms(fmm, "attention context (1, 12, 128, 128)x(1, 12, 128, 64)",
            [_inp((1, 12, 128, 128)), _inp((1, 12, 128, 64))], size=12 * 128 * 128 * 64, atol=5e-3),
        _ms(fmm, "transBatchA (128, 12, 64)x(12, 64, 128)", [_inp((128, 12, 64)), _inp((12, 64, 128))],
            attrs={"transBatchA": 1}, size=12 * 128 * 128 * 64, atol=5e-3),
    ]
    for m in (1, 128):
        c.append(_ms(fmm, f"x W^T constant M={m} K=768 N=3072", [_inp((1, m, 768)), _inp((3072, 768), constant=True)],
                     attrs={"transB": 1}, size=m * 768 * 3072, atol=5e-3))
    for m in (1, 128):
        k, n = 768, 3072
        c.append(_ms(mif, f"u8 x s8 per-column M={m} K={k} N={n}",
                     [_inp((m, k), "uint8", _gen_u8), _inp((k, n), "int8", _gen_s7, True),
                      _inp((), F32, _gen_scales, True), _inp((n,), F32, _gen_scales, True),
                      _inp((), "uint8", _gen_u8, True), _inp((n,), "int8", _gen_s8, True), _inp((n,), constant=True)],
                     size=m * k * n, rtol=1e-5, atol=1e-2))
    for m, k, n in ((1, 768, 3072), (128, 768, 3072), (128, 3072, 768)):
        c.append(_ms(dq, f"s8 per-column M={m} K={k} N={n}",
                     [_inp((1, m, k)), _inp((k, n), "int8", _gen_s7, True), _inp((n,), F32, _gen_scales, True),
                      _inp((n,), "int8", _gen_s8, True), _inp((n,), constant=True)],
                     size=m * k * n, rtol=1e-5, atol=1e-3))
    return c


def _gen_zero(rng, shape, dtype):
    return np.zeros(shape, dtype)


def _gen_bias(rng, shape, dtype):
    return rng.integers(-1000, 1000, size=shape).astype(dtype)


def _gen_yscale(rng, shape, dtype):
    """An output scale that keeps most requantized outputs inside [0, 255]."""
    return rng.uniform(0.1, 0.3, size=shape).astype(dtype)


def qconv_cases() -> list[dict[str, Any]]:
    """QLinearConv as onnxruntime's static quantizer writes it (uint8
    activations, int8 weights with per-channel scales and zero points of
    zero, an int32 bias; 7-bit weights, which onnxruntime's AVX2 kernel needs
    to stay exact) at ResNet-50 layer shapes, batch 1: group ``qconv``."""
    cases = []
    for name, xs, ws, attrs in RESNET50_LAYERS[1:6]:
        m, k = ws[0], int(np.prod(ws[1:]))
        out = [-(-d // s) for d, s in zip(xs[1:], attrs.get("strides", [1, 1]))]
        cases.append({
            "op": "QLinearConv", "domain": "", "opset": 10, "attributes": attrs,
            "inputs": [_inp((1, *xs), "uint8", _gen_u8), _inp((), F32, _gen_scales, True),
                       _inp((), "uint8", _gen_u8, True), _inp(ws, "int8", _gen_s7, True),
                       _inp((m,), F32, _gen_scales, True), _inp((m,), "int8", _gen_zero, True),
                       _inp((), F32, _gen_yscale, True), _inp((), "uint8", _gen_u8, True),
                       _inp((m,), "int32", _gen_bias, True)],
            "outputs": ["uint8"], "expected_kernel": "olc_matmul::QLinearConv",
            "name": f"QLinearConv {name} {[1, *xs]}*{list(ws)}", "size": m * int(np.prod(out)) * k,
            # onnxruntime requantizes in float32, olc as the ONNX reference
            # (float64): a value on a rounding tie may differ by one.
            "rtol": 0, "atol": 1, "group": "qconv",
        })
    return cases


def _mmi(n):
    return {
        "op": "MatMulInteger", "domain": "", "opset": 10, "attributes": {},
        "inputs": [_inp((n, n), "uint8", _gen_u8), _inp((n, n), "int8", _gen_s7),
                   _inp((1,), "uint8", _gen_u8), _inp((1,), "int8", _gen_s8)],
        "outputs": ["int32"], "expected_kernel": "olc_matmul::MatMulInteger", "name": f"MatMulInteger {n}^3",
        "size": n ** 3, "rtol": 0, "atol": 0, "group": "integer",
    }


def benchmark_gates() -> list[dict[str, Any]]:
    return [
        {"name": "float32 Gemm corpus", "group": "gemm", "median_at_least": 1.0, "min_at_least": 0.85},
        {"name": "constant B", "group": "const", "median_at_least": 1.1, "min_at_least": None},
        {"name": "MatMul batched/broadcast/vector", "group": "matmul", "median_at_least": 1.0, "min_at_least": 0.85},
        {"name": "MatMulNBits 4-bit M=1", "group": "nbits_m1", "median_at_least": 1.0, "min_at_least": None},
        {"name": "MatMulNBits 4-bit M=128", "group": "nbits_m128", "median_at_least": 0.9, "min_at_least": None},
        {"name": "MatMulNBits 4-bit accuracy_level 4 M=1", "group": "nbits_int8_m1", "median_at_least": 1.2,
         "min_at_least": None},
        {"name": "MatMulNBits 4-bit accuracy_level 4 M=128", "group": "nbits_int8_m128", "median_at_least": 1.0,
         "min_at_least": None},
        # No per-case floor: on AMX hosts onnxruntime's M = 128 integer products
        # run about 1.1-1.3x faster than olc's AMX blocks (see README).
        {"name": "com.microsoft FusedMatMul / MatMulIntegerToFloat / DynamicQuantizeMatMul", "group": "ms_matmul",
         "median_at_least": 1.0, "min_at_least": None},
        {"name": "MatMulInteger", "group": "integer", "median_at_least": 1.0, "min_at_least": None},
        {"name": "Einsum", "group": "einsum", "median_at_least": 1.0, "min_at_least": None},
        {"name": "Conv: ResNet-50 and MobileNetV2 layers at batch 1 and 8", "group": "conv_layers",
         "median_at_least": 1.1, "min_at_least": 0.9},
    ]


def _time_matmul(m, n, k, dtype, threads, min_time=0.5) -> float:
    """Seconds of the fastest of the timed olc MatMul [m, k] x [k, n] runs (B
    dynamic). One thread: the calling thread's CPU time (the session runs on
    it), the clock the FMA peak it is divided by is timed with, so time
    other processes hold the core drops out of both; more threads: wall
    time."""
    import ml_dtypes
    from onnx import TensorProto, helper

    import olc_core

    code = {"float32": TensorProto.FLOAT, "bfloat16": TensorProto.BFLOAT16}[dtype]
    npt = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", code, [m, k]),
                           helper.make_tensor_value_info("b", code, [k, n])],
                          [helper.make_tensor_value_info("y", code, [m, n])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = olc_core.Session(model, threads=threads, strict=True)
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((m, k)).astype(npt), "b": rng.standard_normal((k, n)).astype(npt)}
    sess.run(None, feeds)
    clock = time.thread_time_ns if threads == 1 else time.perf_counter_ns
    samples: list[int] = []
    end = time.perf_counter() + min_time
    while time.perf_counter() < end or len(samples) < 5:
        t0 = clock()
        sess.run(None, feeds)
        samples.append(clock() - t0)
    return float(np.min(samples)) * 1e-9


def benchmark_extras(threads) -> list[dict[str, Any]]:
    """threads: the thread counts of the run (an int or a list of ints)."""
    out = []
    for t in ([threads] if isinstance(threads, int) else list(threads)):
        out += _extras_for(int(t))
    return out


def _extras_for(threads: int) -> list[dict[str, Any]]:
    import olc_core

    from . import _ext  # type: ignore[attr-defined]  # the built extension

    # The level the sessions run at (the CPU's, or OLC_SIMD's cap): its FMA
    # peak is the one the float32 MatMul is judged against.
    isa = "avx512" if olc_core.simd.simd_level() == "avx512" else "avx2"
    # bfloat16 pays only with native bf16 dot products (AVX512_BF16, AMX);
    # elsewhere it is widened to float32 and the ratio is reported ungated.
    features = olc_core.simd.cpu_features()
    native_bf16 = features["avx512_bf16"] or features["amx_bf16"]
    out = []
    n = 1024
    flops = 2.0 * n * n * n
    f32 = flops / _time_matmul(n, n, n, "float32", threads) * 1e-9
    if threads == 1:
        peak = max(_ext.fma_peak_gflops(20_000_000, isa=isa) for _ in range(3))
        width = "zmm" if isa == "avx512" else "ymm"
        out.append({"name": f"FMA peak ({isa}, 1 thread)", "value": peak, "unit": "GFLOP/s", "at_least": None,
                    "detail": f"independent {width} FMA chains, best of 3, thread CPU time"})
        out.append({"name": "float32 MatMul 1024^3 / FMA peak", "value": f32 / peak if peak else 0.0,
                    "unit": "fraction", "at_least": 0.75,
                    "detail": f"{f32:.1f} GFLOP/s, fastest run, against the {isa} peak"})
    out.append({"name": f"float32 MatMul 1024^3 ({threads} threads)", "value": f32, "unit": "GFLOP/s",
                "at_least": None, "detail": ""})
    bf = flops / _time_matmul(n, n, n, "bfloat16", threads) * 1e-9
    out.append({"name": f"bfloat16 / float32 MatMul 1024^3 ({threads} threads)", "value": bf / f32,
                "unit": "ratio", "at_least": 1.5 if native_bf16 else None,
                "detail": f"bfloat16 {bf:.1f} GFLOP/s, float32 {f32:.1f}"
                          + ("" if native_bf16 else "; no native bf16 on this CPU (widened to float32): not gated")})
    return out
