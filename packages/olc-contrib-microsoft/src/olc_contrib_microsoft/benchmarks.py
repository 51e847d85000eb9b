"""Benchmark cases of olc-contrib-microsoft for tools/benchmark_parity.py.

    python tools/benchmark_parity.py --suite contrib_microsoft --threads 1,2 --min-time 0.3 [--enforce]

Transformer shapes [1, rows, H] for rows in 1, 128, 2048 and H in 384, 768,
4096, float32 (one gated group per kind of operator):

- "transformer": SkipLayerNormalization with gamma, beta and bias as
  initializers (as BERT exports have them), BiasGelu and FastGelu (with its
  bias);
- "embed": EmbedLayerNormalization of [1, rows] int32 ids with segments and
  a mask, tables (4096 words, 2048 positions, 2 segments) as initializers;
- "bias_softmax": BiasSoftmax of [1, rows, H] with a [1, 1, H] mask
  (onnxruntime's CPU has no BiasSoftmax: it runs Add + Softmax);
- "cdist": CDist of A [rows, H] against a constant B [256, H] (a search over
  a fixed set), squared euclidean;
- "gather_block_quantized": GatherBlockQuantized of [1, rows] token ids from
  a 32,000 x 4,096 table, 32-element blocks: uint8 holding 4-bit values
  with zero points (the genai builder's embedding), uint4 and int4.

Ungated group "other": SkipSimplifiedLayerNormalization, QuickGelu, Gelu,
FastGelu without a bias, CDist euclidean and float64. Ungated group "moe":
MoE and QMoE (4-bit, per row and per 32-element block) of 8 SwiGLU experts
of 768 x 1536, top 2, for 1 and 128 tokens. The shapes are fixed (the
tool's --sizes does not apply).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .manifest import DOMAIN, kernel_name

ROWS = (1, 128, 2048)
HIDDEN = (384, 768, 4096)
GROUP = "transformer"


def _case(op: str, rows: int, h: int, params: int, runtime_inputs: int = 1, group: str = GROUP,
          attributes: dict[str, Any] | None = None, label: str = "") -> dict[str, Any]:
    shape = [1, rows, h]
    inputs: list[dict[str, Any]] = [{"shape": shape, "dtype": "float32", "generator": "normal"}
                                    for _ in range(runtime_inputs)]
    inputs += [{"shape": [h], "dtype": "float32", "generator": "normal", "constant": True} for _ in range(params)]
    return {"op": op, "domain": DOMAIN, "opset": 1, "attributes": attributes or {}, "inputs": inputs,
            "outputs": ["float32"], "expected_kernel": kernel_name(op),
            "name": f"{label or op} [1, {rows}, {h}]", "size": rows * h, "rtol": 1e-4, "atol": 1e-5,
            "group": group}


EMBED_WORDS, EMBED_POSITIONS = 4096, 2048
CDIST_B_ROWS = 256
VOCAB, VOCAB_HIDDEN, QBLOCK = 32000, 4096, 32


def _word_ids(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.integers(0, EMBED_WORDS, shape).astype(dtype)


def _segment_ids(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.integers(0, 2, shape).astype(dtype)


def _ones(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return np.ones(shape, dtype)


def _token_ids(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.integers(0, VOCAB, shape).astype(dtype)


def _bytes(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.integers(0, 256, shape).astype(dtype)


def _nibbles(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.integers(-8 if np.dtype(dtype).name == "int4" else 0, 8 if np.dtype(dtype).name == "int4" else 16,
                        shape).astype(dtype)


def _scales(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return rng.uniform(0.001, 0.02, shape).astype(dtype)


def _embed_case(rows: int, h: int) -> dict[str, Any]:
    ids = {"shape": [1, rows], "dtype": "int32"}
    table = {"dtype": "float32", "generator": "normal", "constant": True}
    return {"op": "EmbedLayerNormalization", "domain": DOMAIN, "opset": 1, "attributes": {"epsilon": 1e-12},
            "inputs": [dict(ids, generator=_word_ids), dict(ids, generator=_segment_ids),
                       dict(table, shape=[EMBED_WORDS, h]), dict(table, shape=[EMBED_POSITIONS, h]),
                       dict(table, shape=[2, h]), dict(table, shape=[h]), dict(table, shape=[h]),
                       dict(ids, generator=_ones)],
            "outputs": ["float32", "int32"], "expected_kernel": kernel_name("EmbedLayerNormalization"),
            "name": f"EmbedLayerNormalization [1, {rows}] x {h}", "size": rows * h, "rtol": 1e-4, "atol": 1e-4,
            "group": "embed"}


def _add_softmax(model: Any) -> Any:
    """What onnxruntime runs for a one-node BiasSoftmax: Add, then Softmax
    over the last axis (every case here has axis = the last)."""
    from onnx import helper

    node = model.graph.node[0]
    out = node.output[0]
    nodes = [helper.make_node("Add", list(node.input), [out + "_sum"], name="add"),
             helper.make_node("Softmax", [out + "_sum"], [out], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "bench", list(model.graph.input), list(model.graph.output),
                              list(model.graph.initializer))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = model.ir_version
    return m


def _bias_softmax_case(rows: int, h: int) -> dict[str, Any]:
    return {"op": "BiasSoftmax", "domain": DOMAIN, "opset": 1, "attributes": {"axis": 2, "is_inner_broadcast": 1},
            "inputs": [{"shape": [1, rows, h], "dtype": "float32", "generator": "normal"},
                       {"shape": [1, 1, h], "dtype": "float32", "generator": "normal"}],
            "expected_kernel": kernel_name("BiasSoftmax"), "ort_model": _add_softmax,
            "name": f"BiasSoftmax [1, {rows}, {h}]", "size": rows * h, "rtol": 1e-4, "atol": 1e-6,
            "group": "bias_softmax"}


def _cdist_case(rows: int, h: int, metric: str = "sqeuclidean", dtype: str = "float32",
                group: str = "cdist") -> dict[str, Any]:
    label = "" if (metric, dtype) == ("sqeuclidean", "float32") else f" {metric} {dtype}"
    return {"op": "CDist", "domain": DOMAIN, "opset": 1, "attributes": {"metric": metric},
            "inputs": [{"shape": [rows, h], "dtype": dtype, "generator": "normal"},
                       {"shape": [CDIST_B_ROWS, h], "dtype": dtype, "generator": "normal", "constant": True}],
            "expected_kernel": kernel_name("CDist"), "name": f"CDist [{rows}, {h}] x [{CDIST_B_ROWS}, {h}]{label}",
            "size": rows * h, "rtol": 1e-4, "atol": 1e-2, "group": group}


def _gbq_case(rows: int, fmt: str) -> dict[str, Any]:
    packed = fmt == "uint8"
    data = {"shape": [VOCAB, VOCAB_HIDDEN // 2 if packed else VOCAB_HIDDEN], "dtype": fmt,
            "generator": _bytes if packed else _nibbles, "constant": True}
    scales = {"shape": [VOCAB, VOCAB_HIDDEN // QBLOCK], "dtype": "float32", "generator": _scales, "constant": True}
    inputs = [data, {"shape": [1, rows], "dtype": "int64", "generator": _token_ids}, scales]
    if packed:  # zero points, two 4-bit values per byte
        inputs.append({"shape": [VOCAB, VOCAB_HIDDEN // QBLOCK // 2], "dtype": "uint8", "generator": _bytes,
                       "constant": True})
    label = "uint8 4-bit + zero points" if packed else fmt
    return {"op": "GatherBlockQuantized", "domain": DOMAIN, "opset": 1,
            "attributes": {"gather_axis": 0, "quantize_axis": 1, "block_size": QBLOCK, "bits": 4},
            "inputs": inputs, "outputs": ["float32"], "expected_kernel": kernel_name("GatherBlockQuantized"),
            "name": f"GatherBlockQuantized {label} [1, {rows}] of {VOCAB} x {VOCAB_HIDDEN}",
            "size": rows * VOCAB_HIDDEN, "rtol": 0.0, "atol": 0.0, "group": "gather_block_quantized"}


MOE_EXPERTS, MOE_HIDDEN, MOE_INTER = 8, 768, 1536


def _small_weights(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    return (0.03 * rng.standard_normal(shape)).astype(dtype)


def _moe_case(tokens: int, quantized: bool, block: int = 0) -> dict[str, Any]:
    E, H, inter = MOE_EXPERTS, MOE_HIDDEN, MOE_INTER
    act = {"shape": [tokens, H], "dtype": "float32", "generator": "normal"}
    router = {"shape": [tokens, E], "dtype": "float32", "generator": "normal"}
    attrs: dict[str, Any] = {"k": 2, "activation_type": "swiglu", "swiglu_fusion": 1}
    if not quantized:
        w = {"dtype": "float32", "generator": _small_weights, "constant": True}
        inputs = [act, router, dict(w, shape=[E, 2 * inter, H]), dict(w, shape=[E, 2 * inter]),
                  dict(w, shape=[E, H, inter]), dict(w, shape=[E, H])]
        name = f"MoE float32 [{tokens}, {H}], {E} experts of {inter}, top 2"
    else:
        q = {"dtype": "uint8", "generator": _bytes, "constant": True}
        s = {"dtype": "float32", "generator": _scales, "constant": True}
        blocks = (lambda k: [k // block]) if block else (lambda k: [])
        inputs = [act, router, dict(q, shape=[E, 2 * inter, H // 2]), dict(s, shape=[E, 2 * inter, *blocks(H)]),
                  dict(s, shape=[E, 2 * inter]), dict(q, shape=[E, H, inter // 2]),
                  dict(s, shape=[E, H, *blocks(inter)])]
        # onnxruntime's CPU kernel renormalizes the top-k weights whatever the attribute says
        attrs.update(expert_weight_bits=4, normalize_routing_weights=1, weights_prepacked=0)
        if block:
            attrs["block_size"] = block
        name = f"QMoE 4-bit {'block ' + str(block) if block else 'per row'} [{tokens}, {H}], {E} experts of {inter}, top 2"
    op = "QMoE" if quantized else "MoE"
    return {"op": op, "domain": DOMAIN, "opset": 1, "attributes": attrs, "inputs": inputs, "outputs": ["float32"],
            "expected_kernel": kernel_name(op), "name": name, "size": tokens * H, "rtol": 1e-3, "atol": 1e-3,
            "group": "moe"}


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for h in HIDDEN:
        for rows in ROWS:
            # input, skip (runtime), gamma, beta, bias (initializers)
            cases.append(_case("SkipLayerNormalization", rows, h, params=3, runtime_inputs=2,
                               attributes={"epsilon": 1e-12}))
            cases.append(_case("BiasGelu", rows, h, params=1))
            cases.append(_case("FastGelu", rows, h, params=1))
            cases.append(_embed_case(rows, h))
            cases.append(_bias_softmax_case(rows, h))
            cases.append(_cdist_case(rows, h))
    for rows in ROWS:
        for fmt in ("uint8", "uint4", "int4"):
            cases.append(_gbq_case(rows, fmt))
    for rows in (128, 2048):
        h = 768
        cases.append(_case("SkipSimplifiedLayerNormalization", rows, h, params=2, runtime_inputs=2, group="other",
                           attributes={"epsilon": 1e-6}))
        cases.append(_case("QuickGelu", rows, h, params=0, group="other"))
        cases.append(_case("Gelu", rows, h, params=0, group="other"))
        cases.append(_case("FastGelu", rows, h, params=0, group="other", label="FastGelu (no bias)"))
        cases.append(_cdist_case(rows, h, metric="euclidean", group="other"))
        cases.append(_cdist_case(rows, h, dtype="float64", group="other"))
    for tokens in (1, 128):
        cases.append(_moe_case(tokens, quantized=False))
        cases.append(_moe_case(tokens, quantized=True))
        cases.append(_moe_case(tokens, quantized=True, block=32))
    return cases


GATED_GROUPS = (GROUP, "embed", "bias_softmax", "cdist", "gather_block_quantized")


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": f"contrib_microsoft: {group}, float32, ort/olc", "group": group,
             "median_at_least": 1.3, "min_at_least": 1.0} for group in GATED_GROUPS]
