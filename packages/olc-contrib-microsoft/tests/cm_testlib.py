"""Shared helpers of the com.microsoft tests: one-node models, strict
sessions per (model, SIMD level, implementation), onnxruntime as a second
oracle, and the tolerance check of manifest.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from olc_contrib_microsoft.manifest import DOMAIN, TOLERANCE, kernel_name
from onnx import TensorProto, helper

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]
TYPES = ("float32", "float16", "bfloat16")
HIDDEN = (1, 7, 768, 4095)
ROWS = {1: (1, 1), 3: (1, 3), 128: (2, 64)}  # rows -> (batch, sequence)

NP_TYPE = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
           "bfloat16": np.dtype(ml_dtypes.bfloat16), "float64": np.dtype(np.float64),
           "int32": np.dtype(np.int32), "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8),
           "uint4": np.dtype(ml_dtypes.uint4), "int4": np.dtype(ml_dtypes.int4)}
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
             "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
             "uint8": TensorProto.UINT8, "uint4": TensorProto.UINT4, "int4": TensorProto.INT4}


def make_model(op, inputs, outputs, attrs=None, initializers=None):
    """inputs: (name, type name) pairs, name "" for an absent optional input;
    outputs: names, "" for an absent optional output (types left to the
    registration, as for any com.microsoft node); initializers: name ->
    array for inputs that are constants of the model."""
    from onnx import numpy_helper

    inits = dict(initializers or {})
    node = helper.make_node(op, [n for n, _ in inputs], list(outputs), name="n0", domain=DOMAIN, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], None) for n, t in inputs if n and n not in inits],
        [helper.make_value_info(n, helper.TypeProto()) for n in outputs if n],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = 10
    return m


_sessions: dict = {}


def session(model, level, naive=False, threads=1):
    key = (model.SerializeToString(), level, naive, threads)
    if key not in _sessions:
        with olc_core.simd_cap(level):
            _sessions[key] = olc_core.Session(model, threads=threads, strict=True, record_usage=True,
                                              naive="olc-contrib-microsoft" if naive else False)
    return _sessions[key]


def run_checked(model, op, feeds, level, naive=False, threads=1):
    """Runs the model and checks that the intended kernel (and only it) ran."""
    s = session(model, level, naive, threads)
    out = s.run(None, feeds)
    assert s.kernel_usage() == [kernel_name(op, naive)], s.kernel_usage()
    return out


def ort_run(model, feeds):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def to64(a):
    return np.asarray(a).astype(np.float64)


def assert_close(y, ref, t, what="", tol=None):
    """|y - ref| <= a * max|ref| + r * |ref| (TOLERANCE[t] unless tol is
    given), NaN at the same places."""
    y, ref = to64(y), to64(ref)
    assert y.shape == ref.shape, f"{what}: shape {y.shape} != {ref.shape}"
    if ref.size == 0:
        return
    assert np.array_equal(np.isnan(y), np.isnan(ref)), f"{what}: NaN positions differ"
    fin = np.isfinite(ref)
    assert np.array_equal(y[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)]), f"{what}: infinities differ"
    if not fin.any():
        return
    a, r = tol or TOLERANCE[t]
    scale = float(np.max(np.abs(ref[fin]))) or 1.0
    err = np.abs(y[fin] - ref[fin])
    bound = a * scale + r * np.abs(ref[fin])
    worst = int(np.argmax(err - bound))
    assert np.all(err <= bound), (
        f"{what}: got {y[fin][worst]!r}, expected {ref[fin][worst]!r} at {worst} "
        f"(err {err[worst]:.3g} > bound {bound[worst]:.3g}; {int((err > bound).sum())} of {err.size})")


def rand(rng, shape, t, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(NP_TYPE[t])
