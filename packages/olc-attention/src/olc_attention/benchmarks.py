"""Benchmark cases of olc-attention for tools/benchmark_parity.py.

    python tools/benchmark_parity.py --suite attention --threads 1,2 --min-time 0.3 [--enforce]

Gated group "attention", float32, batch 1, for (heads, kv heads, head size)
in (14, 2, 64), (32, 8, 128), (16, 16, 64):

- com.microsoft GroupQueryAttention as onnxruntime-genai's model builder
  emits it (QKV packed in ``query``, ``do_rotary`` with cos/sin caches of
  4160 positions): prefill of S = 128, 512, 2048 tokens (an empty past) and
  decode of one token after a past of 128, 1024, 4096 tokens;
- ai.onnx Attention (opset 24, 4-D BNSH, causal): prefill of S = 128, 512,
  2048, and decode of one token with past_key / past_value of 128, 1024,
  4096 tokens and the present outputs.

Gated group "ms_attention": com.microsoft Attention (BERT) as onnxruntime's
transformer optimizer writes it (constant weights and bias, a 1-D
mask_index of full lengths), batch 1, S = 128 and 512, at all-MiniLM-L6's
heads (12 x 32) and BERT-base's (12 x 64). Both runtimes run the same node:
olc splits it into olc-matmul's MatMul and PackedQkvAttention (the graph
pass attention-projection), so the case needs olc-matmul installed.

The shapes are fixed (the tool's --sizes does not apply).

The suite also holds the cases of the recurrent-state operators (group
"linear" and its gate, group "linear_function"): see linear_benchmarks.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import linear_benchmarks
from .manifest import kernel_name

GROUP = "attention"
HEADS = ((14, 2, 64), (32, 8, 128), (16, 16, 64))
PREFILL = (128, 512, 2048)
DECODE = (128, 1024, 4096)
MAX_POS = 4160


def _const(values: Any, dtype: str) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Any, dt: Any) -> np.ndarray:
        return np.array(values, dtype=dtype).reshape(shape)

    gen.__name__ = f"const({values})"
    return gen


def _angles(part: str) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Any, dt: Any) -> np.ndarray:
        pos = np.arange(shape[0])[:, None]
        inv = 10000.0 ** (-np.arange(shape[1]) / shape[1])
        ang = pos * inv[None]
        return (np.cos(ang) if part == "cos" else np.sin(ang)).astype(dt)

    gen.__name__ = part
    return gen


def _model(nodes: list[Any], inputs: Sequence[tuple[str, Any]], outputs: list[str], domain: str) -> Any:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info(n, t, None) for n, t in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    opsets = [helper.make_opsetid("", 24)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def _gqa_case(hq: int, hkv: int, d: int, s: int, past: int) -> dict[str, Any]:
    from onnx import TensorProto, helper

    total = past + s
    w = (hq + 2 * hkv) * d
    f, i32 = TensorProto.FLOAT, TensorProto.INT32
    names = ["query", "", "", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache"]

    def model() -> Any:
        node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                                domain="com.microsoft", num_heads=hq, kv_num_heads=hkv, do_rotary=1)
        ins = [(n, i32 if n in ("seqlens_k", "total_sequence_length") else f) for n in names if n]
        return _model([node], ins, ["output", "present_key", "present_value"], "com.microsoft")

    phase = f"prefill {s}" if past == 0 else f"decode past {past}"
    return {
        "op": "GroupQueryAttention", "domain": "com.microsoft", "opset": 1, "model": model,
        "inputs": [
            {"shape": [1, s, w], "dtype": "float32", "generator": "normal"},
            {"shape": [1, hkv, past, d], "dtype": "float32", "generator": "normal"},
            {"shape": [1, hkv, past, d], "dtype": "float32", "generator": "normal"},
            {"shape": [1], "dtype": "int32", "generator": _const([total - 1], "int32")},
            {"shape": [], "dtype": "int32", "generator": _const(total, "int32")},
            {"shape": [MAX_POS, d // 2], "dtype": "float32", "generator": _angles("cos")},
            {"shape": [MAX_POS, d // 2], "dtype": "float32", "generator": _angles("sin")},
        ],
        "expected_kernel": kernel_name("GroupQueryAttention"),
        "name": f"GQA ({hq},{hkv},{d}) {phase}", "size": s * total, "rtol": 1e-3, "atol": 1e-4, "group": GROUP,
    }


def _attention_case(hq: int, hkv: int, d: int, s: int, past: int) -> dict[str, Any]:
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    names = ["Q", "K", "V"] + (["", "past_key", "past_value"] if past else [])
    outs = ["Y"] + (["present_key", "present_value"] if past else [])

    def model() -> Any:
        node = helper.make_node("Attention", names, outs, is_causal=1)
        return _model([node], [(n, f) for n in names if n], outs, "")

    inputs = [{"shape": [1, hq, s, d], "dtype": "float32", "generator": "normal"},
              {"shape": [1, hkv, s, d], "dtype": "float32", "generator": "normal"},
              {"shape": [1, hkv, s, d], "dtype": "float32", "generator": "normal"}]
    if past:
        inputs += [{"shape": [1, hkv, past, d], "dtype": "float32", "generator": "normal"}] * 2
    phase = f"prefill {s}" if past == 0 else f"decode past {past}"
    return {"op": "Attention", "domain": "", "opset": 24, "model": model, "inputs": inputs,
            "expected_kernel": kernel_name("Attention"), "name": f"Attention ({hq},{hkv},{d}) {phase}",
            "size": s * (past + s), "rtol": 1e-3, "atol": 1e-4, "group": GROUP}


MS_GROUP = "ms_attention"
MS_SHAPES = (("MiniLM-L6", 12, 32), ("BERT-base", 12, 64))


def _scaled(factor: float) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Any, dt: Any) -> np.ndarray:
        return (rng.standard_normal(shape) * factor).astype(dt)

    gen.__name__ = f"normal*{factor:.3g}"
    return gen


def _ms_attention_case(label: str, n: int, h: int, s: int) -> dict[str, Any]:
    hid = n * h
    return {
        "op": "Attention", "domain": "com.microsoft", "opset": 1, "attributes": {"num_heads": n},
        "inputs": [{"shape": [1, s, hid], "dtype": "float32", "generator": "normal"},
                   {"shape": [hid, 3 * hid], "dtype": "float32", "generator": _scaled(hid ** -0.5), "constant": True},
                   {"shape": [3 * hid], "dtype": "float32", "generator": _scaled(0.1), "constant": True},
                   {"shape": [1], "dtype": "int32", "generator": _const([s], "int32")}],
        "expected_kernel": kernel_name("PackedQkvAttention"),
        "name": f"ms Attention {label} ({n},{h}) S{s}", "size": s, "group": MS_GROUP,
        "flops": 2 * s * hid * 3 * hid + 4 * n * s * s * h, "rtol": 1e-3, "atol": 1e-4,
    }


def benchmark_cases() -> list[dict[str, Any]]:
    cases = [_ms_attention_case(label, n, h, s) for label, n, h in MS_SHAPES for s in (128, 512)]
    for hq, hkv, d in HEADS:
        for s in PREFILL:
            cases.append(_gqa_case(hq, hkv, d, s, 0))
            cases.append(_attention_case(hq, hkv, d, s, 0))
        for past in DECODE:
            cases.append(_gqa_case(hq, hkv, d, 1, past))
            cases.append(_attention_case(hq, hkv, d, 1, past))
    return cases + linear_benchmarks.benchmark_cases()


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "attention: GroupQueryAttention and Attention prefill and decode, float32, ort/olc",
             "group": GROUP, "median_at_least": 1.3, "min_at_least": 1.0},
            {"name": "com.microsoft Attention (BERT), MiniLM-L6 and BERT-base heads, S 128 and 512: olc >= ort",
             "group": MS_GROUP, "median_at_least": 1.0, "min_at_least": 0.95}] + linear_benchmarks.benchmark_gates()
