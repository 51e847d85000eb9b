"""Benchmark cases of the recurrent-state operators (LinearAttention,
CausalConvWithState) for tools/benchmark_parity.py; part of the family's
suite (``--suite attention``), or alone::

    python tools/benchmark_parity.py --cases olc_attention.linear_benchmarks --threads 1,2 [--enforce]

Gated group "linear", float32, batch 1, the shapes of a Qwen3.5-style
Gated DeltaNet layer (16 key heads, dk = dv = 128, per-head decay and beta;
a depthwise conv over 8192 channels, kernel 4, SiLU):

- ai.onnx LinearAttention (gated_delta, 16 query and kv heads) against
  onnxruntime's com.microsoft LinearAttention kernel (the same function;
  onnxruntime has no kernel for the ai.onnx op): prefill of 128 and 512
  tokens after a past state, and the one-token decode step;
- com.microsoft LinearAttention with 16 key and query heads and 32 value
  heads (onnxruntime's inverse GQA), against the same op there;
- ai.onnx CausalConvWithState against onnxruntime's com.microsoft
  CausalConvWithState kernel: prefill of 128 and 512 positions and decode.

Ungated group "linear_function": one prefill and the decode of each ai.onnx
op against onnxruntime running the op's function body (what onnxruntime
does with the ai.onnx node itself: a Scan over the tokens, Conv + Slice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .manifest import kernel_name

GROUP = "linear"
FUNCTION_GROUP = "linear_function"
PREFILL = (128, 512)
DK = DV = 128
CONV_C, CONV_K = 8192, 4


def _uniform(lo: float, hi: float) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Any, dt: Any) -> np.ndarray:
        return rng.uniform(lo, hi, shape).astype(dt)

    gen.__name__ = f"uniform({lo}, {hi})"
    return gen


def _unit_keys(rng: np.random.Generator, shape: Any, dt: Any) -> np.ndarray:
    """Keys L2-normalized per head of DK (the delta rules expect them so)."""
    k = rng.standard_normal((*shape[:-1], shape[-1] // DK, DK))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return k.reshape(shape).astype(dt)


def _one_node(op: str, inputs: list[tuple[str, list[int]]], outputs: list[str], domain: str,
              attrs: dict[str, Any]) -> Any:
    from onnx import TensorProto, helper

    node = helper.make_node(op, [n for n, _ in inputs], outputs, name="n0", domain=domain, **attrs)
    graph = helper.make_graph([node], "bench",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs if n],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    opsets = [helper.make_opsetid("", 27)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def as_microsoft(model: Any) -> Any:
    """The same node in the com.microsoft domain (onnxruntime's kernel)."""
    from onnx import helper

    m = type(model)()
    m.CopyFrom(model)
    m.graph.node[0].domain = "com.microsoft"
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def function_body(model: Any) -> Any:
    """The model with its one node replaced by the op's function body, as
    the ONNX backend tests expand it."""
    from onnx import helper
    from onnx.backend.test.case.node import function_testcase_helper

    g = model.graph
    types = [vi.type for vi in g.input]
    expanded, _ = function_testcase_helper(g.node[0], types, "fn", list(model.opset_import))
    nodes = list(expanded[0][0])
    graph = helper.make_graph(nodes, "bench_fn", list(g.input), list(g.output))
    m = helper.make_model(graph, opset_imports=list(model.opset_import))
    m.ir_version = model.ir_version
    return m


def _linear_attention_case(T: int, hq: int, hkv: int, hk: int, domain: str, group: str,
                           ort: Callable[[Any], Any] | None) -> dict[str, Any]:
    names = [("q", [1, T, hq * DK]), ("k", [1, T, hk * DK]), ("v", [1, T, hkv * DV]), ("past", [1, hkv, DK, DV]),
             ("decay", [1, T, hkv]), ("beta", [1, T, hkv])]
    gens = ["normal", _unit_keys, "normal", _uniform(-0.5, 0.5), _uniform(-0.7, 0.0), _uniform(0.0, 1.0)]
    attrs = {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": "gated_delta"}
    ms = domain == "com.microsoft"
    phase = f"prefill {T}" if T > 1 else "decode"
    heads = f"({hq},{hkv},{hk},{DK})" if ms else f"({hq},{hkv},{DK})"
    against = "" if ort is None else " vs ms kernel" if ort is as_microsoft else " vs function body"
    return {
        "op": "LinearAttention", "domain": domain, "opset": 1 if ms else 27,
        "model": lambda: _one_node("LinearAttention", names, ["y", "present"], domain, attrs),
        "ort_model": ort,
        "inputs": [{"shape": s, "dtype": "float32", "generator": g} for (_, s), g in zip(names, gens)],
        "expected_kernel": kernel_name("MicrosoftLinearAttention" if ms else "LinearAttention"),
        "name": f"{'ms ' if ms else ''}LinearAttention {heads} {phase}{against}", "size": T * hkv * DK * DV,
        # retrieval, update and readout: three multiply-adds per state element and token
        "flops": 2.0 * 3 * T * hkv * DK * DV, "rtol": 1e-3, "atol": 1e-4, "group": group,
    }


def _conv_case(L: int, group: str, ort: Callable[[Any], Any]) -> dict[str, Any]:
    names = [("x", [1, CONV_C, L]), ("w", [CONV_C, 1, CONV_K]), ("", []), ("p", [1, CONV_C, CONV_K - 1])]
    phase = f"prefill {L}" if L > 1 else "decode"
    against = " vs ms kernel" if ort is as_microsoft else " vs function body"
    return {
        "op": "CausalConvWithState", "domain": "", "opset": 27,
        "model": lambda: _one_node("CausalConvWithState", names, ["y", "present"], "", {"activation": "silu"}),
        "ort_model": ort,
        "inputs": [{"shape": s, "dtype": "float32", "generator": "normal"} for n, s in names if n],
        "expected_kernel": kernel_name("CausalConvWithState"),
        "name": f"CausalConvWithState C={CONV_C} K={CONV_K} silu {phase}{against}", "size": CONV_C * L,
        "flops": 2.0 * CONV_C * L * CONV_K, "rtol": 1e-4, "atol": 1e-5, "group": group,
    }


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for T in (*PREFILL, 1):
        cases.append(_linear_attention_case(T, 16, 16, 16, "", GROUP, as_microsoft))
        cases.append(_linear_attention_case(T, 16, 32, 16, "com.microsoft", GROUP, None))
        cases.append(_conv_case(T, GROUP, as_microsoft))
    for T in (PREFILL[0], 1):
        cases.append(_linear_attention_case(T, 16, 16, 16, "", FUNCTION_GROUP, function_body))
        cases.append(_conv_case(T, FUNCTION_GROUP, function_body))
    return cases


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "linear: LinearAttention and CausalConvWithState prefill and decode, float32, ort/olc",
             "group": GROUP, "median_at_least": 1.2, "min_at_least": 1.0}]
