"""Shared helpers of the attention tests: one-node models, strict sessions
per (model, SIMD level, implementation, threads), onnxruntime and
onnx.reference as oracles, and the tolerance check of manifest.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from olc_attention.manifest import TOLERANCE, kernel_name
from onnx import TensorProto, helper

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]
TYPES = ("float32", "float16", "bfloat16")
NP_TYPE = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
           "bfloat16": np.dtype(ml_dtypes.bfloat16), "bool": np.dtype(bool), "int64": np.dtype(np.int64),
           "int32": np.dtype(np.int32)}
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
             "bool": TensorProto.BOOL, "int64": TensorProto.INT64, "int32": TensorProto.INT32}
MS = "com.microsoft"


def make_model(op, inputs, outputs, attrs=None, domain="", opset=23):
    """inputs: (name, type name) pairs, name "" for an absent optional input;
    outputs: names, "" for an absent optional output (types left to
    inference or the registration)."""
    node = helper.make_node(op, [n for n, _ in inputs], list(outputs), name="n0", domain=domain, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], None) for n, t in inputs if n],
        [helper.make_value_info(n, helper.TypeProto()) for n in outputs if n])
    if domain == MS:
        opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    else:
        opsets = [helper.make_opsetid("", opset)]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 10
    return m


_sessions: dict = {}


def session(model, level="avx512", naive=False, threads=1, fusion=True):
    level = level if level in LEVELS else LEVELS[-1]
    key = (model.SerializeToString(), level, naive, threads, fusion)
    if key not in _sessions:
        if len(_sessions) > 256:
            _sessions.clear()
        with olc_core.simd_cap(level):
            _sessions[key] = olc_core.Session(model, threads=threads, strict=True, record_usage=True,
                                              naive="olc-attention" if naive else False, fusion=fusion)
    return _sessions[key]


def run_checked(model, name, feeds, level="avx512", naive=False, threads=1, fusion=True, before=()):
    """Runs the model and checks that the intended kernel (and only it, after
    the kernels named in `before`) ran."""
    s = session(model, level, naive, threads, fusion)
    out = s.run(None, feeds)
    assert s.kernel_usage() == [*before, kernel_name(name, naive)], s.kernel_usage()
    return out


def ort_run(model, feeds, threads=1):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def reference_run(model, feeds):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feeds)


def to64(a):
    return np.asarray(a).astype(np.float64)


def assert_close(y, ref, t, what="", tol=None):
    """|y - ref| <= a * max|ref| + r * |ref| (TOLERANCE[t] unless tol is
    given), NaN and infinities at the same places."""
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


def rand(rng, shape, t, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(NP_TYPE[t])
