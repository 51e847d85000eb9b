"""Structured fuzzing of olc: mutated ONNX models run in a worker process.

A corpus of small valid models (built here with ``onnx.helper``) covers the
installed families and the runtime: elementwise chains with broadcasting,
MatMul/Gemm, normalization, shape chains, Cast, Reduce*, If/Loop/Scan with
subgraphs, sequences, an ``ai.onnx.ml`` and a ``com.microsoft`` node,
Quantize/DequantizeLinear, Einsum, the attention operators (Attention with
a KV cache, RotaryEmbedding and TensorScatter; GroupQueryAttention;
MultiHeadAttention, com.microsoft Attention and RotaryEmbedding), and
olc-core's own test kernels. Each
case takes one corpus model, applies one to three seeded mutations
(attributes, declared shapes and types, huge dims, wiring, initializer
payloads, op types and domains, opsets, node order, subgraph bodies, raw
byte flips of the serialized model) and random feeds for the declared
inputs (sometimes mutated feeds), and sends it to one long-lived worker
process over a pipe. The worker loads and runs it with ``olc_core.Session``.

A refusal (any Python exception: ``OlcError``, ``ValueError``, onnx's
errors, ``MemoryError`` under the worker's address-space limit) is counted,
not a failure. A worker killed by a signal (or exiting) while on a case is
a crash; a worker silent past ``--time-limit`` is a hang. Either way the
case is saved as ``<kind>-<seed>-<case>.onnx`` plus its feeds ``.npz`` and a
``.txt`` (mutations, exit status, the worker's faulthandler output) under
``--out``, checked once more in a fresh worker, and the worker is
restarted. The exit status is 1 when any crash or hang was found.

    python tools/fuzz_models.py --seed 1 --count 2000
    python tools/fuzz_models.py --long
    python -X faulthandler tools/fuzz_models.py --replay build/fuzz-out/crash-1-42.onnx

Refusals raised by something other than olc's, onnx's or numpy's expected
errors (a ``KeyError`` or ``IndexError`` escaping the runtime, say) are
listed at the end with where they came from: not failures, but worth a look.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
TEST_DOMAIN = "test.olc"  # olc-core's test kernels (olc_core_test::*), registered by the worker
SELF_TEST_DOMAIN = "olc.fuzz.selftest"  # only meaningful to a worker started with --self-test
STARTUP_LIMIT_S = 120.0
MAX_FEED_ELEMENTS = 1 << 16
LONG_COUNT = 200_000
DEFAULT_COUNT = 2000

INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 7, 64, 2**31 - 1, -(2**31), 2**31, 2**40, 2**62, 2**63 - 1, -(2**63)]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, math.nan, math.inf, -math.inf, 1e-45, 3.4e38, 1e-30]
HUGE_DIMS = [2**31, 2**31 - 1, 2**32, 2**40, 2**62]
OPSETS = [1, 6, 7, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 40]
DOMAINS = ["", "ai.onnx", "ai.onnx.ml", "com.microsoft", TEST_DOMAIN, "olc.fused", "no.such.domain"]
OP_TYPES = [
    "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Exp", "Where",
    "Equal", "Less", "MatMul", "Gemm", "Einsum", "Softmax", "LogSoftmax", "LayerNormalization",
    "BatchNormalization", "InstanceNormalization", "Gather", "GatherElements", "GatherND", "Concat",
    "Reshape", "Slice", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Split", "Pad",
    "TopK", "CumSum", "Trilu", "OneHot", "NonZero", "Range", "ConstantOfShape", "Shape", "Size", "Cast",
    "CastLike", "Identity", "Dropout", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd", "ArgMax",
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "If", "Loop", "Scan",
    "SequenceConstruct", "SequenceAt", "SequenceInsert", "ConcatFromSequence", "SplitToSequence",
    "MatMulNBits", "Copy", "Scale", "AddSum", "ElementwisePlan", "NoSuchOp",
]
ELEM_TYPES = [t for t in range(0, 26) if t != TensorProto.STRING] + [TensorProto.STRING]

# Exceptions that are the expected way of refusing a model or a feed.
EXPECTED_ERRORS = ("OlcError", "InvalidModelError", "NoKernelError", "ValueError", "ValidationError",
                   "InferenceError", "DecodeError", "MemoryError", "NotImplementedError", "RuntimeError",
                   "TypeError", "OverflowError")


# ------------------------------------------------------------------ corpus


def _v(name: str, elem: int = TensorProto.FLOAT, shape: list[Any] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _init(name: str, array: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: tuple[onnx.TensorProto, ...] = (), opset: int = OPSET,
           extra_opsets: tuple[tuple[str, int], ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def _n(op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=f"{op.lower()}_{outputs[0]}", domain=domain, **attrs)


def _corpus_models() -> dict[str, onnx.ModelProto]:
    f = np.float32
    rng = np.random.default_rng(0)
    m: dict[str, onnx.ModelProto] = {}
    m["elementwise"] = _model(
        [_n("Add", ["x", "y"], ["a"]), _n("Mul", ["a", "c2"], ["b"]), _n("Relu", ["b"], ["r"]),
         _n("Sub", ["r", "x"], ["s"]), _n("Div", ["s", "c2"], ["d"]), _n("Abs", ["d"], ["ab"]),
         _n("Sqrt", ["ab"], ["q"]), _n("Greater", ["q", "y"], ["g"]), _n("Where", ["g", "q", "x"], ["w"]),
         _n("Pow", ["w", "c2"], ["p"]), _n("Tanh", ["p"], ["out"])],
        [_v("x", shape=[2, 3, 4]), _v("y", shape=[3, 1])], [_v("out", shape=[2, 3, 4])],
        (_init("c2", f(2.0)),))
    m["elementwise_int"] = _model(
        [_n("Add", ["i", "j"], ["a"]), _n("Mul", ["a", "j"], ["b"]), _n("Mod", ["b", "k"], ["c"]),
         _n("Max", ["c", "i"], ["d"]), _n("Equal", ["d", "i"], ["e"]), _n("Not", ["e"], ["out"])],
        [_v("i", TensorProto.INT32, ["N", 5]), _v("j", TensorProto.INT32, [1, 5])],
        [_v("out", TensorProto.BOOL, ["N", 5])], (_init("k", np.int32(3)),))
    m["matmul_gemm"] = _model(
        [_n("MatMul", ["a", "b"], ["ab"]), _n("Flatten", ["ab"], ["fl"], axis=2),
         _n("Gemm", ["fl", "w", "c"], ["out"], alpha=0.5, beta=2.0, transB=1)],
        [_v("a", shape=[2, 3, 4])], [_v("out", shape=[6, 3])],
        (_init("b", rng.standard_normal((4, 5)).astype(f)), _init("w", rng.standard_normal((3, 5)).astype(f)),
         _init("c", rng.standard_normal(3).astype(f))))
    m["softmax_layernorm"] = _model(
        [_n("Softmax", ["x"], ["sm"], axis=-1), _n("LayerNormalization", ["sm", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
         _n("LogSoftmax", ["ln"], ["out"], axis=1)],
        [_v("x", shape=["B", 3, 8])], [_v("out", shape=["B", 3, 8])],
        (_init("g", np.ones(8, f)), _init("b", np.zeros(8, f))))
    m["normalization"] = _model(
        [_n("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["bn"], epsilon=1e-5),
         _n("InstanceNormalization", ["bn", "s", "bb"], ["inn"], epsilon=1e-5),
         _n("GroupNormalization", ["inn", "s", "bb"], ["out"], num_groups=2, epsilon=1e-5)],
        [_v("x", shape=[2, 4, 5])], [_v("out", shape=[2, 4, 5])],
        (_init("s", np.ones(4, f)), _init("bb", np.zeros(4, f)), _init("mean", np.zeros(4, f)),
         _init("var", np.ones(4, f))), opset=21)
    m["shape_chain"] = _model(
        [_n("Shape", ["x"], ["sh"]), _n("Gather", ["sh", "zero"], ["d0"], axis=0),
         _n("Unsqueeze", ["d0", "axes0"], ["d0u"]), _n("Concat", ["d0u", "minus1"], ["tgt"], axis=0),
         _n("Reshape", ["x", "tgt"], ["r"]), _n("Transpose", ["r"], ["t"], perm=[1, 0]),
         _n("Slice", ["t", "starts", "ends", "axes0", "steps"], ["sl"]),
         _n("Gather", ["sl", "idx"], ["ga"], axis=1), _n("Concat", ["ga", "ga"], ["cc"], axis=0),
         _n("Squeeze", ["cc"], ["sq"]), _n("Expand", ["sq", "eshape"], ["out"])],
        [_v("x", shape=["N", 3, 4])], [_v("out")],
        (_init("zero", np.int64(0)), _init("axes0", np.array([0], np.int64)),
         _init("minus1", np.array([-1], np.int64)), _init("starts", np.array([1], np.int64)),
         _init("ends", np.array([100], np.int64)), _init("steps", np.array([2], np.int64)),
         _init("idx", np.array([[0, 1]], np.int64)), _init("eshape", np.array([2, 1, 1], np.int64))))
    m["tensor_misc"] = _model(
        [_n("Pad", ["x", "pads"], ["pd"], mode="constant"), _n("Tile", ["pd", "reps"], ["tl"]),
         _n("Split", ["tl", "split"], ["sp0", "sp1"], axis=1), _n("TopK", ["sp0", "k"], ["tv", "ti"], axis=1),
         _n("CumSum", ["tv", "cax"], ["cs"]), _n("Trilu", ["cs"], ["tr"], upper=0),
         _n("GatherElements", ["sp0", "ti"], ["ge"], axis=1), _n("OneHot", ["ti", "depth", "onv"], ["oh"], axis=-1),
         _n("NonZero", ["sp1"], ["nz"]), _n("ScatterND", ["x", "sidx", "supd"], ["out"])],
        [_v("x", shape=[3, 4])],
        [_v("ge"), _v("oh"), _v("nz", TensorProto.INT64), _v("out", shape=[3, 4])],
        (_init("pads", np.array([0, 1, 0, 1], np.int64)), _init("reps", np.array([1, 2], np.int64)),
         _init("split", np.array([5, 7], np.int64)), _init("k", np.array([3], np.int64)),
         _init("cax", np.int64(1)), _init("depth", np.int64(4)), _init("onv", np.array([0, 1], f)),
         _init("sidx", np.array([[1], [0]], np.int64)), _init("supd", np.ones((2, 4), f))))
    m["cast"] = _model(
        [_n("Cast", ["x"], ["i"], to=TensorProto.INT32), _n("Cast", ["i"], ["h"], to=TensorProto.FLOAT16),
         _n("Cast", ["h"], ["bf"], to=TensorProto.BFLOAT16), _n("CastLike", ["bf", "x"], ["fx"]),
         _n("Cast", ["fx"], ["out"], to=TensorProto.DOUBLE)],
        [_v("x", shape=[7])], [_v("out", TensorProto.DOUBLE, [7])])
    m["reduce"] = _model(
        [_n("ReduceSum", ["x", "ax1"], ["rs"], keepdims=1), _n("ReduceMean", ["rs", "ax2"], ["rm"], keepdims=0),
         _n("ReduceMax", ["x"], ["rx"], keepdims=0), _n("ReduceProd", ["x", "ax1"], ["rp"]),
         _n("ReduceL2", ["x", "ax2"], ["out"]), _n("ArgMax", ["x"], ["am"], axis=2, keepdims=0)],
        [_v("x", shape=[2, 3, 4])], [_v("rm"), _v("rx"), _v("rp"), _v("out"), _v("am", TensorProto.INT64)],
        (_init("ax1", np.array([1], np.int64)), _init("ax2", np.array([-1], np.int64))), opset=18)
    then_g = helper.make_graph([_n("Add", ["x", "one"], ["ty"])], "then", [], [_v("ty", shape=[2, 3])])
    else_g = helper.make_graph([_n("Mul", ["x", "two"], ["ey"])], "else", [], [_v("ey", shape=[2, 3])])
    m["if"] = _model(
        [_n("If", ["cond"], ["iy"], then_branch=then_g, else_branch=else_g), _n("Relu", ["iy"], ["out"])],
        [_v("cond", TensorProto.BOOL, []), _v("x", shape=[2, 3])], [_v("out", shape=[2, 3])],
        (_init("one", f(1.0)), _init("two", f(2.0))))
    body = helper.make_graph(
        [_n("Add", ["v_in", "x"], ["v_out"]), _n("Less", ["i", "limit"], ["cond_out"]),
         _n("Identity", ["v_out"], ["scan_out"])],
        "body", [_v("i", TensorProto.INT64, []), _v("cond_in", TensorProto.BOOL, []), _v("v_in", shape=[3])],
        [_v("cond_out", TensorProto.BOOL, []), _v("v_out", shape=[3]), _v("scan_out", shape=[3])])
    m["loop"] = _model(
        [_n("Loop", ["trip", "cond0", "v0"], ["v_final", "scans"], body=body)],
        [_v("x", shape=[3]), _v("v0", shape=[3])], [_v("v_final", shape=[3]), _v("scans", shape=[None, 3])],
        (_init("trip", np.int64(5)), _init("cond0", np.bool_(True)), _init("limit", np.int64(3))))
    scan_body = helper.make_graph(
        [_n("Add", ["s_in", "x_t"], ["s_out"]), _n("Mul", ["s_out", "x_t"], ["y_t"])],
        "scan_body", [_v("s_in", shape=[3]), _v("x_t", shape=[3])], [_v("s_out", shape=[3]), _v("y_t", shape=[3])])
    m["scan"] = _model(
        [_n("Scan", ["s0", "xs"], ["s_final", "ys"], body=scan_body, num_scan_inputs=1)],
        [_v("s0", shape=[3]), _v("xs", shape=[4, 3])], [_v("s_final", shape=[3]), _v("ys", shape=[4, 3])])
    m["sequence"] = _model(
        [_n("SequenceConstruct", ["a", "b"], ["seq"]), _n("SequenceAt", ["seq", "pos"], ["at"]),
         _n("ConcatFromSequence", ["seq"], ["cat"], axis=0), _n("SequenceInsert", ["seq", "a"], ["seq2"]),
         _n("SequenceLength", ["seq2"], ["len"]), _n("ConcatFromSequence", ["seq2"], ["stk"], axis=1, new_axis=1)],
        [_v("a", shape=[2, 3]), _v("b", shape=[2, 3])],
        [_v("at", shape=[2, 3]), _v("cat", shape=[4, 3]), _v("len", TensorProto.INT64, []), _v("stk")],
        (_init("pos", np.int64(1)),))
    m["ml"] = _model(
        [_n("Scaler", ["x"], ["sc"], domain="ai.onnx.ml", offset=[0.5, 1.0, -1.0], scale=[2.0, 1.0, 0.5]),
         _n("Binarizer", ["sc"], ["bi"], domain="ai.onnx.ml", threshold=0.25), _n("Add", ["bi", "x"], ["out"])],
        [_v("x", shape=[4, 3])], [_v("out", shape=[4, 3])], extra_opsets=(("ai.onnx.ml", 3),))
    k, n, block = 32, 8, 16
    m["com_microsoft"] = _model(
        [_n("MatMulNBits", ["a", "qb", "scales"], ["mm"], domain="com.microsoft", K=k, N=n, bits=4,
            block_size=block), _n("Relu", ["mm"], ["out"])],
        [_v("a", shape=[2, k])], [_v("out", shape=[2, n])],
        (_init("qb", rng.integers(0, 256, (n, k // block, block // 2)).astype(np.uint8)),
         _init("scales", rng.random(n * k // block).astype(f))), extra_opsets=(("com.microsoft", 1),))
    m["quantize"] = _model(
        [_n("QuantizeLinear", ["x", "qs", "qz"], ["q"]), _n("DequantizeLinear", ["q", "qs", "qz"], ["dq"]),
         _n("QuantizeLinear", ["dq", "as", "az"], ["q2"], axis=1),
         _n("DequantizeLinear", ["q2", "as", "az"], ["out"], axis=1)],
        [_v("x", shape=[2, 8])], [_v("out", shape=[2, 8])],
        (_init("qs", f(0.05)), _init("qz", np.uint8(128)), _init("as", np.linspace(0.01, 0.1, 8).astype(f)),
         _init("az", np.zeros(8, np.int8))), opset=21)
    m["einsum"] = _model(
        [_n("Einsum", ["a", "b"], ["ab"], equation="bij,bjk->bik"), _n("Einsum", ["ab"], ["out"], equation="bik->bki"),
         _n("Einsum", ["sq"], ["diag"], equation="ii->i")],
        [_v("a", shape=[2, 3, 4]), _v("b", shape=[2, 4, 5]), _v("sq", shape=[4, 4])],
        [_v("out", shape=[2, 5, 3]), _v("diag", shape=[4])])
    cs = np.cos(rng.uniform(0, 6, (16, 4))).astype(f)
    sn = np.sin(rng.uniform(0, 6, (16, 4))).astype(f)
    m["attention"] = _model(
        [_n("Attention", ["q", "k", "v", "mask", "pk", "pv"], ["y", "ok", "ov", "qk"], is_causal=1,
            qk_matmul_output_mode=3),
         _n("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["r"]),
         _n("TensorScatter", ["pk", "upd", "wi"], ["ts"], mode="circular")],
        [_v("q", shape=[1, 4, 3, 8]), _v("k", shape=[1, 2, 3, 8]), _v("v", shape=[1, 2, 3, 8]),
         _v("mask", TensorProto.BOOL, [3, 8]), _v("pk", shape=[1, 2, 5, 8]), _v("pv", shape=[1, 2, 5, 8]),
         _v("x", shape=[1, 2, 3, 8]), _v("upd", shape=[1, 2, 2, 8]), _v("wi", TensorProto.INT64, [1])],
        [_v("y"), _v("ok"), _v("ov"), _v("qk"), _v("r"), _v("ts")],
        (_init("cos", cs), _init("sin", sn), _init("pos", np.array([[3, 4, 5]], np.int64))), opset=24)
    m["group_query_attention"] = _model(
        [_n("GroupQueryAttention", ["qkv", "", "", "pk", "pv", "sl", "tot", "cos", "sin"], ["y", "ok", "ov"],
            domain="com.microsoft", num_heads=4, kv_num_heads=2, do_rotary=1, local_window_size=3, softcap=2.0)],
        [_v("qkv", shape=[1, 1, 64]), _v("pk", shape=[1, 2, 6, 8]), _v("pv", shape=[1, 2, 6, 8])],
        [_v("y"), _v("ok"), _v("ov")],
        (_init("cos", cs), _init("sin", sn), _init("sl", np.array([6], np.int32)), _init("tot", np.int32(7))),
        extra_opsets=(("com.microsoft", 1),))
    m["encoder_attention"] = _model(
        [_n("MultiHeadAttention", ["q", "k", "v", "b", "m"], ["y1"], domain="com.microsoft", num_heads=2,
            unidirectional=1),
         _n("Attention", ["x", "w", "bb", "mi"], ["y2"], domain="com.microsoft", num_heads=2),
         _n("RotaryEmbedding", ["x", "p1", "cos2", "sin2"], ["r"], domain="com.microsoft", num_heads=2, interleaved=1)],
        [_v("q", shape=[2, 3, 8]), _v("k", shape=[2, 3, 8]), _v("v", shape=[2, 3, 8]),
         _v("m", TensorProto.INT32, [2]), _v("x", shape=[2, 3, 8]), _v("mi", TensorProto.INT32, [2, 3])],
        [_v("y1"), _v("y2"), _v("r")],
        (_init("b", rng.standard_normal(24).astype(f)), _init("w", rng.standard_normal((8, 24)).astype(f)),
         _init("bb", rng.standard_normal(24).astype(f)), _init("cos2", cs[:, :2].copy()),
         _init("sin2", sn[:, :2].copy()), _init("p1", np.array([2], np.int64))), extra_opsets=(("com.microsoft", 1),))
    m["test_kernels"] = _model(
        [_n("Copy", ["x"], ["c"], domain=TEST_DOMAIN), _n("Scale", ["c"], ["s"], domain=TEST_DOMAIN, factor=2.0),
         _n("AddSum", ["s", "w"], ["a"], domain=TEST_DOMAIN), _n("Copy", ["a"], ["out"], domain=TEST_DOMAIN)],
        [_v("x", shape=[5])], [_v("out", shape=[5])], (_init("w", np.array([1.0, 2.0, 0.5], f)),),
        extra_opsets=((TEST_DOMAIN, 1),))
    return m


def build_corpus() -> list[tuple[str, onnx.ModelProto]]:
    """The seed models, with value_info filled in by shape inference (so mutations can reach it)."""
    out = []
    for name, model in _corpus_models().items():
        with contextlib.suppress(Exception):
            model = onnx.shape_inference.infer_shapes(model)
        out.append((name, model))
    return out


def self_test_model(kind: str) -> onnx.ModelProto:
    """A model a worker started with ``--self-test KIND`` treats as "crash now" or "hang now"."""
    return _model([_n(kind.capitalize(), ["x"], ["y"], domain=SELF_TEST_DOMAIN)], [_v("x", shape=[2])],
                  [_v("y", shape=[2])], extra_opsets=((SELF_TEST_DOMAIN, 1),))


# ---------------------------------------------------------------- mutations


def _all_graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    graphs = [graph]
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                graphs += _all_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    graphs += _all_graphs(g)
    return graphs


def _all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for g in _all_graphs(model.graph) for node in g.node]


def _pick(rng: np.random.Generator, items: list[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def _value_infos(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [vi for g in _all_graphs(model.graph) for vi in [*g.input, *g.output, *g.value_info]]


def _tensor_type(vi: onnx.ValueInfoProto) -> Any:
    tp = vi.type
    if tp.HasField("sequence_type"):
        tp = tp.sequence_type.elem_type
    return tp.tensor_type


class Skip(Exception):
    """The chosen mutation does not apply to this model."""


def mut_attribute_value(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    nodes = [n for n in _all_nodes(model) if n.attribute]
    if not nodes:
        raise Skip
    node = _pick(rng, nodes)
    attr = _pick(rng, list(node.attribute))
    A = onnx.AttributeProto
    if attr.type == A.INT:
        attr.i = _pick(rng, INTERESTING_INTS)
    elif attr.type == A.FLOAT:
        attr.f = _pick(rng, INTERESTING_FLOATS)
    elif attr.type == A.INTS:
        values = list(attr.ints) or [0]
        choice = int(rng.integers(4))
        if choice == 0:
            values[int(rng.integers(len(values)))] = _pick(rng, INTERESTING_INTS)
        elif choice == 1:
            values.append(_pick(rng, INTERESTING_INTS))
        elif choice == 2:
            values = values[:-1]
        else:
            values = values[::-1] * int(rng.integers(1, 3))
        del attr.ints[:]
        attr.ints.extend(values)
    elif attr.type == A.FLOATS:
        values = list(attr.floats) or [0.0]
        if rng.random() < 0.5:
            values[int(rng.integers(len(values)))] = _pick(rng, INTERESTING_FLOATS)
        else:
            values = values[: int(rng.integers(len(values) + 1))]
        del attr.floats[:]
        attr.floats.extend(values)
    elif attr.type == A.STRING:
        attr.s = _pick(rng, [b"", b"ij,jk->ik", b"...,...->...", b"i,i", b"ii", b"a" * 300, b"->", b"\xff\xfe",
                             b"abc,cd->", b"constant", b"reflect", b"L2"])
    elif attr.type == A.GRAPH:
        raise Skip
    elif attr.type == A.TENSOR:
        _mutate_tensor_payload(attr.t, rng)
    return f"attribute value {node.op_type}.{attr.name}"


def mut_attribute_type(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    nodes = [n for n in _all_nodes(model) if n.attribute]
    if not nodes:
        raise Skip
    node = _pick(rng, nodes)
    index = int(rng.integers(len(node.attribute)))
    name = node.attribute[index].name
    value = _pick(rng, [3, 1.5, "x", [1, 2], [0.5], b"\x00", [b"a", b"b"],
                        numpy_helper.from_array(np.array([1], np.int64), "t"),
                        helper.make_graph([], "empty", [], [])])
    new = helper.make_attribute(name, value)
    node.attribute[index].CopyFrom(new)
    return f"attribute type {node.op_type}.{name} -> {onnx.AttributeProto.AttributeType.Name(new.type)}"


def mut_attribute_remove_or_add(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    node = _pick(rng, _all_nodes(model))
    if node.attribute and rng.random() < 0.6:
        index = int(rng.integers(len(node.attribute)))
        name = node.attribute[index].name
        del node.attribute[index]
        return f"attribute removed {node.op_type}.{name}"
    name = _pick(rng, ["axis", "axes", "perm", "keepdims", "to", "epsilon", "transA", "alpha", "mode", "k",
                       "num_scan_inputs", "block_size", "saturate", "allowzero", "new_axis", "bogus"])
    value = _pick(rng, [_pick(rng, INTERESTING_INTS), [0, -1], 0.0, "nearest", [7, 7, 7]])
    node.attribute.append(helper.make_attribute(name, value))
    return f"attribute added {node.op_type}.{name}={value!r}"


def _mutate_dims(shape: Any, rng: np.random.Generator) -> str:
    dims = shape.dim
    choice = int(rng.integers(7))
    if choice == 0 or not dims:
        dims.add().dim_value = int(_pick(rng, [0, 1, 2, 5]))
        return "dim appended"
    i = int(rng.integers(len(dims)))
    if choice == 1:
        del dims[i]
        return "dim removed"
    if choice == 2:
        dims[i].dim_value = int(_pick(rng, [0, 1, 2, 3, 7]))
        return f"dim {i} value"
    if choice == 3:
        dims[i].dim_param = _pick(rng, ["N", "M", "B", "?"])
        return f"dim {i} symbolic"
    if choice == 4:
        dims[i].Clear()
        return f"dim {i} unknown"
    if choice == 5:
        del dims[:]
        return "rank 0"
    dims[i].dim_value = int(_pick(rng, HUGE_DIMS))
    return f"dim {i} huge"


def mut_declared_shape(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    vis = _value_infos(model)
    if not vis:
        raise Skip
    vi = _pick(rng, vis)
    tt = _tensor_type(vi)
    if rng.random() < 0.15:
        tt.ClearField("shape")
        return f"shape of {vi.name} removed"
    return f"shape of {vi.name}: {_mutate_dims(tt.shape, rng)}"


def mut_huge_dim(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    vis = [vi for vi in _value_infos(model) if _tensor_type(vi).HasField("shape")]
    if not vis:
        raise Skip
    vi = _pick(rng, vis)
    dims = _tensor_type(vi).shape.dim
    if not dims:
        dims.add()
    i = int(rng.integers(len(dims)))
    dims[i].dim_value = int(_pick(rng, HUGE_DIMS))
    return f"huge dim {i} of {vi.name} = {dims[i].dim_value}"


def mut_declared_dtype(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    vis = _value_infos(model)
    if not vis:
        raise Skip
    vi = _pick(rng, vis)
    tt = _tensor_type(vi)
    tt.elem_type = int(_pick(rng, ELEM_TYPES))
    return f"dtype of {vi.name} -> {tt.elem_type}"


def mut_wiring(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    node = _pick(rng, _all_nodes(model))
    choice = int(rng.integers(5))
    if choice == 0 and len(node.input) >= 2:
        i, j = rng.choice(len(node.input), 2, replace=False)
        node.input[int(i)], node.input[int(j)] = node.input[int(j)], node.input[int(i)]
        return f"inputs {i} and {j} of {node.op_type} swapped"
    if choice == 1 and node.input:
        i = int(rng.integers(len(node.input)))
        del node.input[i]
        return f"input {i} of {node.op_type} dropped"
    if choice == 2 and node.input:
        i = int(rng.integers(len(node.input)))
        node.input[i] = _pick(rng, ["undefined_value", ""])
        return f"input {i} of {node.op_type} renamed to an undefined or empty name"
    if choice == 3:
        others = [name for n in _all_nodes(model) for name in n.output] + [i.name for i in model.graph.input]
        if not others:
            raise Skip
        node.input.append(_pick(rng, others))
        return f"extra input on {node.op_type}"
    if node.output:
        i = int(rng.integers(len(node.output)))
        node.output[i] = _pick(rng, ["", "dup", node.input[0] if node.input else "dup"])
        return f"output {i} of {node.op_type} renamed"
    raise Skip


def _mutate_tensor_payload(t: onnx.TensorProto, rng: np.random.Generator) -> str:
    choice = int(rng.integers(6))
    try:
        array = numpy_helper.to_array(t)
    except Exception as e:  # already broken: make it more so
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        raise Skip from e
    if choice == 0:
        raw = array.tobytes()
        t.ClearField("float_data"), t.ClearField("int32_data"), t.ClearField("int64_data")
        t.ClearField("double_data"), t.ClearField("uint64_data"), t.ClearField("string_data")
        cut = int(rng.integers(0, len(raw) + 1)) if rng.random() < 0.5 else len(raw) + int(rng.integers(1, 9))
        t.raw_data = (raw + bytes(16))[:cut]
        return "raw_data of the wrong size"
    if choice == 1 and array.dtype.kind == "f":
        flat = array.astype(array.dtype).reshape(-1).copy()
        if flat.size:
            flat[int(rng.integers(flat.size))] = _pick(rng, [math.nan, math.inf, -math.inf])
        t.CopyFrom(numpy_helper.from_array(flat.reshape(array.shape), t.name))
        return "NaN/inf in the payload"
    if choice == 2:
        for fld in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            t.ClearField(fld)
        if rng.random() < 0.5:
            del t.dims[:]
            t.dims.append(0)
        return "empty payload"
    if choice == 3 and array.dtype.kind in "iu":
        info = np.iinfo(array.dtype)
        flat = array.reshape(-1).copy()
        if flat.size == 0:
            raise Skip
        value = int(np.clip(_pick(rng, INTERESTING_INTS), info.min, info.max))
        flat[int(rng.integers(flat.size))] = value
        t.CopyFrom(numpy_helper.from_array(flat.reshape(array.shape), t.name))
        return f"int payload element = {value}"
    if choice == 4:
        t.ClearField("dims")
        t.dims.extend([int(d) for d in rng.integers(0, 4, int(rng.integers(0, 4)))])
        return "dims changed"
    t.data_type = int(_pick(rng, ELEM_TYPES))
    return f"data_type -> {t.data_type}"


def mut_initializer(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    inits = [t for g in _all_graphs(model.graph) for t in g.initializer]
    consts = [a.t for n in _all_nodes(model) for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    tensors = inits + consts
    if not tensors:
        raise Skip
    t = _pick(rng, tensors)
    return f"initializer {t.name or '(Constant)'}: {_mutate_tensor_payload(t, rng)}"


def mut_op_type(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    node = _pick(rng, _all_nodes(model))
    old = node.op_type
    if rng.random() < 0.7:
        node.op_type = _pick(rng, OP_TYPES)
        return f"op {old} -> {node.op_type}"
    node.domain = _pick(rng, DOMAINS)
    return f"domain of {old} -> {node.domain!r}"


def mut_opset(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    imports = model.opset_import
    choice = int(rng.integers(4))
    if choice == 0 and len(imports) > 0:
        i = int(rng.integers(len(imports)))
        domain = imports[i].domain
        del imports[i]
        return f"opset import {domain!r} removed"
    if choice == 1:
        imports.add().CopyFrom(helper.make_opsetid(_pick(rng, DOMAINS), int(_pick(rng, OPSETS))))
        return "opset import added"
    if choice == 2:
        model.ir_version = int(_pick(rng, [0, 1, 3, 7, 8, 9, 10, 11, 99]))
        return f"ir_version {model.ir_version}"
    entry = _pick(rng, list(imports)) if imports else imports.add()
    entry.version = int(_pick(rng, OPSETS))
    return f"opset {entry.domain!r} -> {entry.version}"


def mut_node_order(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    graph = _pick(rng, _all_graphs(model.graph))
    nodes = list(graph.node)
    if len(nodes) < 2:
        raise Skip
    choice = int(rng.integers(4))
    if choice == 0:
        order = rng.permutation(len(nodes))
        what = "shuffled"
    elif choice == 1:
        i = int(rng.integers(len(nodes) - 1))
        order = np.arange(len(nodes))
        order[i], order[i + 1] = order[i + 1], order[i]
        what = f"nodes {i} and {i + 1} swapped"
    elif choice == 2:
        i = int(rng.integers(len(nodes)))
        order = np.delete(np.arange(len(nodes)), i)
        what = f"node {nodes[i].op_type} removed"
    else:
        i = int(rng.integers(len(nodes)))
        order = np.insert(np.arange(len(nodes)), i, i)
        what = f"node {nodes[i].op_type} duplicated"
    copies = [onnx.NodeProto() for _ in order]
    for c, j in zip(copies, order):
        c.CopyFrom(nodes[int(j)])
    del graph.node[:]
    graph.node.extend(copies)
    return f"node order: {what}"


def mut_graph_io(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    g = model.graph
    choice = int(rng.integers(4))
    if choice == 0 and len(g.output) > 0:
        del g.output[int(rng.integers(len(g.output)))]
        return "graph output removed"
    if choice == 1:
        names = [o for n in g.node for o in n.output] + ["nowhere"]
        g.output.append(_v(_pick(rng, names)))
        return "graph output added"
    if choice == 2 and len(g.input) > 0:
        del g.input[int(rng.integers(len(g.input)))]
        return "graph input removed"
    inits = list(g.initializer)
    if inits:
        t = _pick(rng, inits)
        g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return f"initializer {t.name} made a feedable input"
    raise Skip


def mut_subgraph(model: onnx.ModelProto, rng: np.random.Generator) -> str:
    subgraphs = _all_graphs(model.graph)[1:]
    if not subgraphs:
        raise Skip
    g = _pick(rng, subgraphs)
    choice = int(rng.integers(5))
    if choice == 0 and len(g.output) > 0:
        del g.output[int(rng.integers(len(g.output)))]
        return f"subgraph {g.name}: output dropped"
    if choice == 1:
        names = [o for n in g.node for o in n.output] + [i.name for i in g.input] + ["x", "outer_nothing"]
        g.output.append(_v(_pick(rng, names), shape=_pick(rng, [None, [3], []])))
        return f"subgraph {g.name}: output added"
    if choice == 2 and len(g.input) > 0:
        del g.input[int(rng.integers(len(g.input)))]
        return f"subgraph {g.name}: input dropped"
    if choice == 3:
        g.input.append(_v("extra_in", shape=[3]))
        return f"subgraph {g.name}: input added"
    if len(g.node) > 0:
        del g.node[int(rng.integers(len(g.node)))]
        return f"subgraph {g.name}: node removed"
    raise Skip


STRUCTURED: list[tuple[str, Callable[[onnx.ModelProto, np.random.Generator], str], float]] = [
    ("attribute_value", mut_attribute_value, 3),
    ("attribute_type", mut_attribute_type, 1),
    ("attribute_remove_or_add", mut_attribute_remove_or_add, 1.5),
    ("declared_shape", mut_declared_shape, 3),
    ("huge_dim", mut_huge_dim, 1.5),
    ("declared_dtype", mut_declared_dtype, 2),
    ("wiring", mut_wiring, 2),
    ("initializer", mut_initializer, 3),
    ("op_type", mut_op_type, 2),
    ("opset", mut_opset, 1),
    ("node_order", mut_node_order, 1),
    ("graph_io", mut_graph_io, 1),
    ("subgraph", mut_subgraph, 1.5),
]
_WEIGHTS = np.array([w for _, _, w in STRUCTURED]) / sum(w for _, _, w in STRUCTURED)


def flip_bytes(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    buf = bytearray(data)
    choice = int(rng.integers(4))
    if choice == 0 or not buf:
        for _ in range(int(rng.integers(1, 9))):
            if buf:
                buf[int(rng.integers(len(buf)))] ^= int(rng.integers(1, 256))
        return bytes(buf), "bytes flipped"
    if choice == 1:
        return bytes(buf[: int(rng.integers(len(buf)))]), "truncated"
    if choice == 2:
        at = int(rng.integers(len(buf) + 1))
        return bytes(buf[:at]) + rng.bytes(int(rng.integers(1, 16))) + bytes(buf[at:]), "bytes inserted"
    at = int(rng.integers(len(buf)))
    n = int(rng.integers(1, 64))
    return bytes(buf[:at] + buf[at : at + n] + buf[at:]), "chunk duplicated"


# ------------------------------------------------------------------- feeds


def _np_dtype(elem: int) -> Any:
    if elem in (0, TensorProto.STRING):
        return np.dtype(object) if elem == TensorProto.STRING else np.dtype(np.float32)
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        return np.dtype(np.float32)


def _random_array(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == np.dtype(object):
        return np.array(["a", "bc"] * (int(np.prod(shape)) // 2 + 1), dtype=object)[: int(np.prod(shape))].reshape(shape)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer) and dtype.itemsize >= 1 and dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    values = rng.standard_normal(shape).astype(np.float32)
    try:
        return values.astype(dtype)
    except Exception:
        return values


def make_feeds(model: onnx.ModelProto, rng: np.random.Generator, mutate: bool) -> dict[str, Any]:
    inits = {t.name for t in model.graph.initializer}
    feeds: dict[str, Any] = {}
    params: dict[str, int] = {}
    for vi in model.graph.input:
        if vi.name in inits and rng.random() < 0.7:
            continue
        tt = _tensor_type(vi)
        dtype = _np_dtype(tt.elem_type)
        if tt.HasField("shape"):
            shape = []
            for d in tt.shape.dim:
                if d.HasField("dim_value") and 0 <= d.dim_value <= 64:
                    shape.append(int(d.dim_value))
                elif d.HasField("dim_param"):
                    shape.append(params.setdefault(d.dim_param, int(rng.integers(1, 5))))
                else:
                    shape.append(int(rng.integers(1, 5)))
        else:
            shape = [int(d) for d in rng.integers(1, 4, int(rng.integers(0, 4)))]
        while int(np.prod(shape)) > MAX_FEED_ELEMENTS:
            shape[int(np.argmax(shape))] //= 2
        feeds[vi.name] = _random_array(rng, dtype, tuple(shape))
    if mutate and feeds:
        name = _pick(rng, sorted(feeds))
        x = feeds[name]
        choice = int(rng.integers(7))
        if choice == 0:
            del feeds[name]
        elif choice == 1:
            feeds["not_an_input"] = np.zeros(2, np.float32)
        elif choice == 2:
            feeds[name] = _random_array(rng, _np_dtype(int(_pick(rng, ELEM_TYPES))), x.shape)
        elif choice == 3:
            feeds[name] = x.reshape(-1) if x.ndim != 1 else x.reshape(1, -1)
        elif choice == 4 and x.dtype.kind == "f":
            feeds[name] = np.full(x.shape, _pick(rng, [np.nan, np.inf, -np.inf]), x.dtype)
        elif choice == 5:
            feeds[name] = np.zeros((0, *x.shape[1:]), x.dtype) if x.ndim else np.zeros(0, x.dtype)
        elif x.ndim >= 1:
            # A non-contiguous view: every other element along the first axis.
            feeds[name] = np.concatenate([x, x], axis=0)[::2]
    return feeds


# --------------------------------------------------------------- reproducers


def save_feeds(path: Path, feeds: dict[str, Any]) -> None:
    """npz of the feeds; element types numpy cannot name (bfloat16, float8) are stored as bytes."""
    arrays: dict[str, Any] = {}
    dtypes: dict[str, str] = {}
    for i, (name, value) in enumerate(feeds.items()):
        key = f"f{i}"
        value = np.asarray(value)
        dtypes[key] = json.dumps([name, str(value.dtype)])
        # The scalar type names its module in every ml_dtypes release (the
        # dtype's class moved from numpy's module to ml_dtypes' in 0.7).
        arrays[key] = value.view(np.uint8) if value.dtype.type.__module__.startswith("ml_dtypes") else value
    arrays["__names__"] = np.array(json.dumps(dtypes))
    np.savez(path, **arrays)


def load_feeds(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    with np.load(path, allow_pickle=True) as data:
        meta = json.loads(str(data["__names__"]))
        feeds = {}
        for key, spec in meta.items():
            name, dtype = json.loads(spec)
            value = data[key]
            if value.dtype == np.uint8 and dtype != "uint8":
                import ml_dtypes

                value = value.view(getattr(ml_dtypes, dtype))
            feeds[name] = value
    return feeds


# ------------------------------------------------------------------ worker

FRAME = struct.Struct("<Q")


def _write_frame(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: Any, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def register_test_kernels() -> object:
    """Registers olc-core's test kernels (Copy, Scale, AddSum in the test.olc domain); returns the plugin."""
    import olc_core
    from olc_core import KernelRegistration, _native

    anytype = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
               "uint16", "uint32", "uint64", "bool")

    class CoreTestKernels:
        @olc_core.hookimpl
        def olc_register_kernels(self) -> list[Any]:
            f32 = {"T": ("float32",)}
            return [
                KernelRegistration(TEST_DOMAIN, "Copy", "olc_core_test::Copy", {"T": anytype}, ("T",),
                                   _native._test_vtable("copy"), outputs=("T",), family="olc-fuzz"),
                KernelRegistration(TEST_DOMAIN, "Scale", "olc_core_test::Scale", f32, ("T",),
                                   _native._test_vtable("scale"), outputs=("T",), family="olc-fuzz"),
                KernelRegistration(TEST_DOMAIN, "AddSum", "olc_core_test::AddSum", f32, ("T", "T"),
                                   _native._test_vtable("add_sum"), outputs=("T",), family="olc-fuzz"),
            ]

    plugin = CoreTestKernels()
    olc_core.register_plugin(plugin, name="olc-fuzz-test-kernels")
    return plugin


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "olc_" in frame.filename:
            return f"{Path(frame.filename).name}:{frame.lineno}"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


def _outcome(stage: str, exc: BaseException) -> dict[str, Any]:
    kind = type(exc).__name__
    return {"outcome": f"refused_{stage}", "kind": kind, "expected": kind in EXPECTED_ERRORS,
            "where": _where(exc), "message": str(exc)[:300]}


def run_case(model_bytes: bytes, feeds: dict[str, Any], threads: int, self_test: str | None = None) -> dict[str, Any]:
    """Loads and runs one case in this process; returns its outcome (never raises an Exception)."""
    import olc_core

    if self_test and SELF_TEST_DOMAIN.encode() in model_bytes:
        if self_test == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(3600)
    try:
        session = olc_core.Session(model_bytes, threads=threads)
    except Exception as exc:
        return _outcome("load", exc)
    try:
        session.run(None, feeds)
    except Exception as exc:
        return _outcome("run", exc)
    return {"outcome": "ran"}


def _quiet() -> None:
    import logging
    import warnings

    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")


def worker_main(args: argparse.Namespace) -> int:
    import faulthandler
    import resource

    # Replies go on the original stdout; anything a kernel prints goes to stderr (the log).
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    faulthandler.enable(all_threads=True)
    if args.memory_limit_mb:
        limit = args.memory_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _quiet()
    import olc_core

    register_test_kernels()
    olc_core.registered_kernels()  # load every plugin before the first case is timed
    requests = sys.stdin.buffer
    _write_frame(replies, {"ready": True})
    while True:
        try:
            (n,) = FRAME.unpack(_read_exact(requests, FRAME.size))
        except EOFError:
            return 0
        index, model_bytes, feeds = pickle.loads(_read_exact(requests, n))
        # The log holds this case's output only: what a crash leaves there is about it.
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
        print(f"case {index}", file=sys.stderr, flush=True)
        result = run_case(model_bytes, feeds, args.threads, args.self_test)
        result["index"] = index
        _write_frame(replies, result)


class Worker:
    """One worker process; ``run`` returns its reply, or ("crash" | "hang", detail)."""

    def __init__(self, args: argparse.Namespace, log_dir: Path, tag: str = "worker"):
        self.args = args
        self.tag = tag
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log_path = self.log_dir / f"{self.tag}-{self.starts}.log"
        cmd = [sys.executable, "-X", "faulthandler", str(Path(__file__).resolve()), "--worker",
               "--threads", str(self.args.threads), "--memory-limit-mb", str(self.args.memory_limit_mb)]
        if self.args.self_test:
            cmd += ["--self-test", self.args.self_test]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        reply = self._read(STARTUP_LIMIT_S)
        if not isinstance(reply, dict) or not reply.get("ready"):
            raise SystemExit(f"the fuzz worker did not start: {reply!r}\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(Exception):
                    stream.close()  # type: ignore[union-attr]
            self.proc = None

    def dump_and_stop(self) -> None:
        """Stops a hung worker with SIGABRT first, so faulthandler writes where every thread is."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.stop()

    def log_tail(self, limit: int = 6000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def _read(self, limit_s: float) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + limit_s
        buf = b""
        need = FRAME.size
        header = True
        while True:
            while len(buf) < need:
                left = deadline - time.monotonic()
                if left <= 0:
                    return ("hang", f"no reply within {limit_s:g} s")
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(fd, need - len(buf))
                if not chunk:
                    code = self.proc.wait()
                    how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
                    return ("crash", f"worker {how}")
                buf += chunk
            if header:
                (need,) = FRAME.unpack(buf)
                buf, header = b"", False
                continue
            return pickle.loads(buf)

    def run(self, index: int, model_bytes: bytes, feeds: dict[str, Any]) -> Any:
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        # A dead worker: the reply read below reports how it died.
        with contextlib.suppress(OSError):
            _write_frame(self.proc.stdin, (index, model_bytes, feeds))
        return self._read(self.args.time_limit)


# ------------------------------------------------------------------ driver


@dataclass
class Counts:
    models: int = 0
    refused_load: int = 0
    refused_run: int = 0
    ran: int = 0
    crashes: int = 0
    hangs: int = 0
    unexpected: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    first_case: dict[tuple[str, str, str], int] = field(default_factory=dict)
    by_corpus: Counter[tuple[str, str]] = field(default_factory=Counter)


def make_case(corpus: list[tuple[str, onnx.ModelProto]], seed: int, index: int
              ) -> tuple[str, bytes, dict[str, Any], list[str]]:
    """Case ``index`` of a run with ``seed``: (corpus name, model bytes, feeds, mutations applied)."""
    rng = np.random.default_rng([seed, index])
    name, base = corpus[int(rng.integers(len(corpus)))]
    model = onnx.ModelProto()
    model.CopyFrom(base)
    notes: list[str] = []
    for _ in range(int(rng.choice([1, 1, 2, 3]))):
        label, fn, _w = STRUCTURED[int(rng.choice(len(STRUCTURED), p=_WEIGHTS))]
        try:
            notes.append(f"{label}: {fn(model, rng)}")
        except Skip:
            notes.append(f"{label}: not applicable")
        except Exception as exc:
            notes.append(f"{label}: mutation failed ({type(exc).__name__})")
    try:
        data = model.SerializeToString()
    except Exception:
        data = base.SerializeToString()
        notes.append("mutated model did not serialize: the original used")
    feeds = make_feeds(model, rng, mutate=rng.random() < 0.15)
    if rng.random() < 0.1:
        data, note = flip_bytes(data, rng)
        notes.append(f"raw bytes: {note}")
    return name, data, feeds, notes


def _save(out: Path, kind: str, seed: int, index: int, corpus_name: str, data: bytes, feeds: dict[str, Any],
          notes: list[str], detail: str, log: str, standalone: str, self_test: str | None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{kind}-{seed}-{index}"
    stem.with_suffix(".onnx").write_bytes(data)
    save_feeds(stem.with_suffix(".npz"), feeds)
    text = io.StringIO()
    print(f"{kind}: {detail}", file=text)
    print(f"seed {seed}, case {index}, corpus model {corpus_name!r}", file=text)
    print(f"alone in a fresh worker: {standalone}", file=text)
    print("mutations:", file=text)
    for note in notes or ["(none)"]:
        print(f"  {note}", file=text)
    flag = f" --self-test {self_test}" if self_test else ""
    print(f"replay: python -X faulthandler tools/fuzz_models.py --replay {stem.with_suffix('.onnx')}{flag}", file=text)
    print("\nworker output (tail):", file=text)
    print(log, file=text)
    stem.with_suffix(".txt").write_text(text.getvalue())
    return stem.with_suffix(".onnx")


def fuzz(args: argparse.Namespace) -> int:
    np.seterr(all="ignore")  # random feeds cast to small types overflow, as intended
    corpus = build_corpus()
    out = Path(args.out)
    counts = Counts()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="olc-fuzz-") as tmp:
        worker = Worker(args, Path(tmp))
        worker.start()
        try:
            for index in range(args.count):
                notes: list[str]
                if args.self_test and index == 1:
                    name, notes = f"self-test {args.self_test}", []
                    data, feeds = self_test_model(args.self_test).SerializeToString(), {"x": np.zeros(2, np.float32)}
                else:
                    name, data, feeds, notes = make_case(corpus, args.seed, index)
                reply = worker.run(index, data, feeds)
                counts.models += 1
                if isinstance(reply, tuple):
                    kind, detail = reply
                    worker.dump_and_stop()
                    log = worker.log_tail()
                    # The same case alone in a fresh worker: does it need the earlier cases?
                    again = Worker(args, Path(tmp), tag="check")
                    again.start()
                    second = again.run(index, data, feeds)
                    again.stop()
                    standalone = (f"reproduces ({second[1]})" if isinstance(second, tuple)
                                  else f"did not reproduce ({second['outcome']})")
                    path = _save(out, kind, args.seed, index, name, data, feeds, notes, detail, log, standalone,
                                 args.self_test)
                    if kind == "crash":
                        counts.crashes += 1
                    else:
                        counts.hangs += 1
                    print(f"case {index}: {kind.upper()} ({detail}) on a mutant of {name!r}; {standalone}; "
                          f"saved {path}", flush=True)
                    continue
                outcome = reply["outcome"]
                setattr(counts, outcome, getattr(counts, outcome) + 1)
                counts.by_corpus[(name, outcome)] += 1
                if outcome != "ran" and not reply["expected"]:
                    key = (reply["kind"], reply["where"], reply["message"][:120])
                    counts.unexpected[key] += 1
                    counts.first_case.setdefault(key, index)
                if args.long and (index + 1) % 1000 == 0:
                    print(f"... {index + 1} models, {counts.crashes} crashes, {counts.hangs} hangs, "
                          f"{time.monotonic() - start:.0f} s", flush=True)
        except KeyboardInterrupt:
            print(f"interrupted after {counts.models} models", flush=True)
        worker.stop()
    elapsed = time.monotonic() - start
    total = counts.refused_load + counts.refused_run + counts.ran + counts.crashes + counts.hangs
    assert total == counts.models, (total, counts)
    if counts.unexpected:
        print("refusals by exceptions other than the expected ones (type, where, message: count, first case):")
        for key, n in counts.unexpected.most_common():
            print(f"  {key[0]} at {key[1]}: {key[2]!r}: {n}, case {counts.first_case[key]}")
    if args.verbose:
        for (name, outcome), n in sorted(counts.by_corpus.items()):
            print(f"  {name:20s} {outcome:13s} {n}")
    print(f"seed {args.seed}: models {counts.models}, refused at load {counts.refused_load}, "
          f"refused at run {counts.refused_run}, ran {counts.ran}, crashes {counts.crashes}, "
          f"hangs {counts.hangs} ({elapsed:.1f} s, {worker.starts} worker starts)")
    if counts.crashes or counts.hangs:
        print(f"reproducers are in {out}/")
        return 1
    return 0


def replay(args: argparse.Namespace) -> int:
    import faulthandler

    faulthandler.enable(all_threads=True)
    path = Path(args.replay)
    feeds = load_feeds(path.with_suffix(".npz"))
    _quiet()
    register_test_kernels()
    print(f"replaying {path} with feeds {', '.join(f'{k}: {np.asarray(v).dtype}{list(np.shape(v))}' for k, v in feeds.items()) or '(none)'}",
          flush=True)
    result = run_case(path.read_bytes(), feeds, args.threads, args.self_test)
    print(json.dumps(result, indent=1))
    if result["outcome"] != "ran":
        import olc_core

        with contextlib.suppress(Exception):
            olc_core.Session(path.read_bytes(), threads=args.threads).run(None, feeds)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=None, help="default 0; a random one with --long")
    p.add_argument("--count", type=int, default=None, help=f"models to run (default {DEFAULT_COUNT}, "
                   f"{LONG_COUNT} with --long)")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds per model before it counts as a hang")
    p.add_argument("--out", default="build/fuzz-out", help="folder for reproducers (created on the first crash or hang)")
    p.add_argument("--long", action="store_true", help=f"a long run ({LONG_COUNT} models unless --count)")
    p.add_argument("--replay", metavar="FILE.onnx", help="run one reproducer (and its .npz feeds) in this process")
    p.add_argument("--threads", type=int, default=2, help="threads of each Session (default 2)")
    p.add_argument("--memory-limit-mb", type=int, default=4096,
                   help="the worker's address-space limit, so a huge allocation is a MemoryError (0: none)")
    p.add_argument("-v", "--verbose", action="store_true", help="outcomes per corpus model")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    # Tests only: the worker kills itself (crash) or stops answering (hang) on the self-test model.
    p.add_argument("--self-test", choices=["crash", "hang"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little") if args.long else 0
    if args.count is None:
        args.count = LONG_COUNT if args.long else DEFAULT_COUNT
    if args.worker:
        return worker_main(args)
    if args.replay:
        return replay(args)
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
