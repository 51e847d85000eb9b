"""Shared test helpers: one-node models, olc sessions per (SIMD level,
threads), the onnx.reference oracle and input generators."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]

NP = {
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16), "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8), "int16": np.dtype(np.int16), "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64),
}
ONNX = {
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16, "bool": TensorProto.BOOL, "int8": TensorProto.INT8,
    "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
}
ALL_TYPES = tuple(NP)
FLOATS = ("float32", "float64", "float16", "bfloat16")


def seed_of(*parts: object) -> int:
    """A stable seed from test parameters (Python's hash() of str varies per process)."""
    return zlib.crc32(repr(parts).encode())


def type_name(arr: np.ndarray) -> str:
    for k, v in NP.items():
        if arr.dtype == v:
            return k
    raise KeyError(arr.dtype)


def random_array(rng: np.random.Generator, shape: Sequence[int], t: str) -> np.ndarray:
    """Values of type t; floats include NaN, infinities and signed zeros."""
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    if t == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if t in FLOATS:
        x = rng.standard_normal(n) * 100
        sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0])
        k = min(n, len(sp))
        if k:
            x[rng.choice(n, k, replace=False)] = sp[:k]
        return x.astype(NP[t]).reshape(shape)
    info = np.iinfo(NP[t])
    return rng.integers(info.min, info.max, n, dtype=NP[t], endpoint=True).reshape(shape)


def make_model(op: str, inputs: Sequence[tuple[str, str | None]], outputs: Sequence[str], opset: int,
               attrs: dict[str, Any] | None = None, initializers: dict[str, np.ndarray] | None = None,
               out_types: Sequence[int] | None = None) -> onnx.ModelProto:
    """inputs: (name, type name) pairs, '' for an absent optional input."""
    initializers = initializers or {}
    node = helper.make_node(op, [n for n, _ in inputs], list(outputs), name="node0", **(attrs or {}))
    g_inputs = [helper.make_tensor_value_info(n, ONNX[t], None) for n, t in inputs if n and n not in initializers]
    g_outputs = [helper.make_tensor_value_info(o, (out_types[i] if out_types else 0), None)
                 for i, o in enumerate(outputs)]
    inits = [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    graph = helper.make_graph([node], "g", g_inputs, g_outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def olc_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], level: str = "avx512", threads: int = 1,
            expect_kernel: str | None = None, strict: bool = True) -> list[np.ndarray]:
    with olc_core.simd_cap(level):
        sess = olc_core.Session(model, threads=threads, strict=strict, record_usage=True)
    out = sess.run(None, feeds)
    if expect_kernel is not None:
        assert expect_kernel in sess.kernel_usage(), sess.kernel_plan()
    return out


def ref_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ReferenceEvaluator(model).run(None, feeds)


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Same dtype, shape and bytes (NaN payloads included)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g = np.ascontiguousarray(got).view(np.uint8)
    w = np.ascontiguousarray(want).view(np.uint8)
    if not np.array_equal(g, w):
        bad = np.flatnonzero(np.ascontiguousarray(got).reshape(-1) != np.ascontiguousarray(want).reshape(-1))
        raise AssertionError(f"{what}: {bad.size} elements differ, first at {bad[:5]}: "
                             f"{got.reshape(-1)[bad[:5]]} vs {want.reshape(-1)[bad[:5]]}")
