"""Benchmark cases of elementwise fusion for ``tools/benchmark_parity.py``::

    python tools/benchmark_parity.py --cases olc_elementwise.fusion_benchmarks:benchmark_cases --threads 1,2

Each case is a multi-node model (``"model"``): onnxruntime runs the unfused
graph as given, olc runs it with fusion on, and the case requires olc's
kernel usage to show the fused kernel. The shapes are those of the fusion
specification (docs/fusion.md); ``sizes`` is accepted for the tool's
interface and ignored, because the shapes are fixed by the models they
come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .fusion import KERNEL_NAME

OPSET = 21
SWIGLU_S = (1, 32, 512)
SWIGLU_H = (3072, 9728)
SCORES_H = (16, 32)
SCORES_QK = ((1, 128), (32, 1024), (128, 4096))
_ONNX_TYPE = {"float32": TensorProto.FLOAT, "bfloat16": TensorProto.BFLOAT16}


def _model(nodes, inputs, output, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fusion_case", inputs, [output], initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 9  # readable by onnxruntime >= 1.17
    return m


def swiglu_model(dtype: str, s: int, h: int) -> onnx.ModelProto:
    """y = gate * Sigmoid(gate) * up, the SwiGLU gate, on [1, S, H]."""
    t = _ONNX_TYPE[dtype]
    nodes = [
        helper.make_node("Sigmoid", ["gate"], ["sig"], name="sigmoid"),
        helper.make_node("Mul", ["gate", "sig"], ["silu"], name="silu"),
        helper.make_node("Mul", ["silu", "up"], ["y"], name="gated"),
    ]
    ins = [helper.make_tensor_value_info(n, t, [1, s, h]) for n in ("gate", "up")]
    return _model(nodes, ins, helper.make_tensor_value_info("y", t, [1, s, h]))


def scores_model(h: int, q: int, k: int, scale: float = 0.125) -> onnx.ModelProto:
    """y = scores * scale + mask: attention scores [1,H,Q,K], mask [1,1,Q,K], scale a scalar constant."""
    nodes = [
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
        helper.make_node("Add", ["scaled", "mask"], ["y"], name="mask_add"),
    ]
    ins = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, h, q, k]),
           helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, q, k])]
    init = [numpy_helper.from_array(np.array(scale, np.float32), "scale")]
    return _model(nodes, ins, helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, h, q, k]), init)


def _mask(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    # A causal-style additive mask: 0 where visible, a large negative value elsewhere.
    return np.where(rng.random(shape) < 0.3, -10000.0, 0.0).astype(dtype)


def benchmark_cases(sizes: Sequence[int] | None = None) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    # float32 only: onnxruntime's CPU provider has no bfloat16 Sigmoid
    # ("Could not find an implementation for Sigmoid(13)"), so it cannot run
    # the bfloat16 graph to compare with.
    for dtype in ("float32",):
        rtol, atol = 1e-5, 1e-6
        for h in SWIGLU_H:
            for s in SWIGLU_S:
                cases.append({
                    "op": "SwiGLU", "name": f"SwiGLU {dtype} [1,{s},{h}]", "size": s * h,
                    "model": (lambda dtype=dtype, s=s, h=h: swiglu_model(dtype, s, h)),
                    "inputs": [{"shape": [1, s, h], "dtype": dtype, "generator": "normal"}] * 2,
                    "outputs": [dtype], "expected_kernel": KERNEL_NAME, "group": "swiglu",
                    "rtol": rtol, "atol": atol,
                })
    for h in SCORES_H:
        for q, k in SCORES_QK:
            cases.append({
                "op": "ScaleMask", "name": f"scores*scale+mask [1,{h},{q},{k}]", "size": h * q * k,
                "model": (lambda h=h, q=q, k=k: scores_model(h, q, k)),
                "inputs": [{"shape": [1, h, q, k], "dtype": "float32", "generator": "normal"},
                           {"shape": [1, 1, q, k], "dtype": "float32", "generator": _mask}],
                "outputs": ["float32"], "expected_kernel": KERNEL_NAME, "group": "scale_mask",
                "rtol": 1e-6, "atol": 1e-6,
            })
    return cases


def benchmark_gates() -> list[dict[str, Any]]:
    return [
        {"name": "fusion/swiglu", "group": "swiglu", "median_at_least": 1.3, "min_at_least": 1.15},
        {"name": "fusion/scale_mask", "group": "scale_mask", "median_at_least": 1.3, "min_at_least": 1.15},
    ]
