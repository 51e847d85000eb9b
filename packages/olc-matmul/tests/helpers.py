"""Shared helpers of the olc-matmul tests: model builders, the float64
reference with its error bound, the SIMD levels of this machine."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]

NP = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
      "bfloat16": np.dtype(ml_dtypes.bfloat16), "uint8": np.dtype(np.uint8), "int8": np.dtype(np.int8),
      "int32": np.dtype(np.int32)}
ONNX = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
        "int32": TensorProto.INT32}
EPS = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-24, "bfloat16": 2.0**-24}
OUT_EPS = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8}


# onnxruntime's uint8 x int8 integer GEMM on x86 CPUs without VNNI (AVX2's
# vpmaddubsw) saturates the int16 sum of each pair of adjacent products, so
# there it is no exact oracle for such products; olc's kernels do not
# saturate (their exact references are the tests' oracle everywhere).
_FEATURES = olc_core.simd.detected_cpu_features()
ORT_U8S8_SATURATES = bool(_FEATURES.get("avx2")) and not any(
    _FEATURES.get(f) for f in ("avx512_vnni", "avx_vnni", "amx_int8"))


def ort_u8s8_exact(a, b):
    """Mask of the outputs of a @ b (uint8 a, int8 b, numpy broadcasting)
    that onnxruntime computes exactly on this host: all of them, except
    where ORT_U8S8_SATURATES and a pair of adjacent products (k even, k + 1)
    sums outside int16."""
    shape = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2]) + (np.shape(a)[-2], np.shape(b)[-1])
    if not ORT_U8S8_SATURATES or np.asarray(a).dtype != np.uint8 or np.asarray(b).dtype != np.int8:
        return np.ones(shape, bool)
    a64, b64 = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
    if a64.shape[-1] % 2:  # a zero product pairs with the odd last k
        a64 = np.concatenate([a64, np.zeros(a64.shape[:-1] + (1,), np.int64)], -1)
        b64 = np.concatenate([b64, np.zeros(b64.shape[:-2] + (1, b64.shape[-1]), np.int64)], -2)
    pair = (a64[..., :, 0::2, None] * b64[..., None, 0::2, :] + a64[..., :, 1::2, None] * b64[..., None, 1::2, :])
    return ~((pair > 32767) | (pair < -32768)).any(-2)


# The Conv pass tests' graphs also hold BatchNormalization and elementwise
# nodes (the unfused form, and what the pass must leave alone), whose
# kernels come from olc-normalization and olc-elementwise. With those
# installed such sessions run strict (every node on olc's kernels); with
# olc-matmul alone (its own nox session, the sanitize build) those nodes
# run on the onnx.reference fallback, still an independent comparison.
OTHERS_STRICT = {"BatchNormalization", "Add", "Relu", "Neg", "Sigmoid"} <= {
    r.op_type for r in olc_core.registered_kernels()}


def model(op, inputs, outputs, attrs=None, initializers=(), opset=21, domain="", extra_opsets=(), name="mm0"):
    """inputs: [(name, type)] with type None for an absent optional input
    (name ''); initializers: {name: array} become constants."""
    init_names = {n for n, _ in initializers}
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], name=name, domain=domain,
                            **(attrs or {}))
    vi = [helper.make_tensor_value_info(n, ONNX[t], None) for n, t in inputs if n and n not in init_names]
    vo = [helper.make_tensor_value_info(n, ONNX[t], None) for n, t in outputs]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers]
    g = helper.make_graph([node], "g", vi, vo, inits)
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    return m


def session(m, level="avx512", threads=1):
    with olc_core.simd_cap(level):
        return olc_core.Session(m, threads=threads, strict=True, record_usage=True)


def check_close(y, ref, absprod, K, t, what=""):
    """|y - ref| <= out_eps * |ref| + 2 * (K + 2) * eps * (|A| |B|) + tiny,
    all in float64; absprod is |op(A)| @ |op(B)| (plus |beta C|)."""
    y64 = np.asarray(y).astype(np.float64)
    bound = OUT_EPS[t] * np.abs(ref) + 2.0 * (K + 2) * EPS[t] * absprod + 1e-300
    err = np.abs(y64 - ref)
    bad = ~(err <= bound)
    if np.isnan(ref).any():
        bad &= ~(np.isnan(ref) & np.isnan(y64))
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {bad.size} elements out of bound; worst err {err[bad].max()} "
        f"bound {bound[bad].min()}")


def rand(rng, shape, t):
    return rng.standard_normal(shape).astype(NP[t])
