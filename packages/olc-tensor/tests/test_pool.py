"""MaxPool, AveragePool, LpPool and the global pools at ranks 1-3.

Oracles: onnxruntime (float32/float64, the Indices output), ``onnx.reference``
where it is right, and a brute-force numpy oracle written from the schema
text (every window enumerated, padding excluded, NaN ignored by max) for the
types neither takes (float16, bfloat16, int8/uint8) and for GlobalMaxPool
of a rank-3 input, where onnx.reference returns [N, 1] instead of
[N, C, 1]. Every case runs at every SIMD level this CPU has on a strict
session and checks that the olc kernel ran.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

sys.path.insert(0, str(Path(__file__).parent))
from helpers import NP, seed_of  # noqa: E402

import olc_core  # noqa: E402
from olc_core.testing import guarded, one_node_model, run_on_every_level  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover - onnxruntime is a test extra
    ort = None

CODE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8}


def kname(op):
    return f"olc_tensor::{op}"


def pool_model(op, attrs, t="float32", opset=22, indices=False):
    outs = [("y", CODE[t], None)] + ([("i", TensorProto.INT64, None)] if indices else [])
    return one_node_model(op, [("x", CODE[t], None)], outs, attrs, opset=opset)


def geometry(shape, kernel, strides, pads, dilations, ceil_mode, auto_pad):
    """(output spatial shape, begin pads, end pads) from the schema's formulas."""
    sp = len(shape) - 2
    strides = strides or [1] * sp
    dilations = dilations or [1] * sp
    pads = list(pads or [0] * 2 * sp)
    out = []
    for a in range(sp):
        n, k, s, d = shape[2 + a], kernel[a], strides[a], dilations[a]
        ext = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s)
            tot = max(0, (o - 1) * s + ext - n)
            lo = tot // 2 if auto_pad == "SAME_UPPER" else tot - tot // 2
            pads[a], pads[a + sp] = lo, tot - lo
        elif auto_pad == "VALID":
            o = (n - ext) // s + 1
            pads[a] = pads[a + sp] = 0
        else:
            span = n + pads[a] + pads[a + sp] - ext
            o = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (o - 1) * s >= n + pads[a]:
                o -= 1
        out.append(o)
    return out, pads[:sp], pads[sp:], strides, dilations


def np_pool(x, kind, kernel, strides=None, pads=None, dilations=None, ceil_mode=0, auto_pad="NOTSET",
            count_include_pad=0, p=2, indices=False, storage_order=0):
    """Every window enumerated; the result in float64 (and flat indices)."""
    xf = x.astype(np.float64)
    sp = x.ndim - 2
    out, pb, pe, strides, dilations = geometry(x.shape, kernel, strides, pads, dilations, ceil_mode, auto_pad)
    y = np.zeros(x.shape[:2] + tuple(out))
    idx = np.zeros(y.shape, np.int64)
    plane = int(np.prod(x.shape[2:]))
    for nc in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*[range(v) for v in out]):
            vals, where, inc = [], [], 1
            for a in range(sp):
                pos = [o[a] * strides[a] - pb[a] + j * dilations[a] for j in range(kernel[a])]
                inc *= sum(1 for q in pos if q < x.shape[2 + a] + pe[a])
            for j in itertools.product(*[range(k) for k in kernel]):
                pos = [o[a] * strides[a] - pb[a] + j[a] * dilations[a] for a in range(sp)]
                if all(0 <= pos[a] < x.shape[2 + a] for a in range(sp)):
                    vals.append(xf[nc + tuple(pos)])
                    where.append(pos)
            v = np.array(vals)
            if kind == "max":
                ok = ~np.isnan(v)
                if ok.any():
                    k = int(np.flatnonzero(ok)[np.argmax(v[ok])])
                else:
                    k = 0
                y[nc + o] = v[k]
                pos = where[k]
                if storage_order:
                    s, m = 0, 1
                    for a in range(sp):
                        s += pos[a] * m
                        m *= x.shape[2 + a]
                else:
                    s = int(np.ravel_multi_index(pos, x.shape[2:]))
                idx[nc + o] = (nc[0] * x.shape[1] + nc[1]) * plane + s
            elif kind == "avg":
                y[nc + o] = v.sum() / (inc if count_include_pad else len(v))
            else:
                y[nc + o] = (np.abs(v) ** p).sum() ** (1.0 / p)
    return (y, idx) if indices else y


def cast_like(y, t):
    if t in ("int8", "uint8"):
        return y.astype(NP[t])
    return y.astype(np.float32).astype(NP[t]) if t in ("float16", "bfloat16") else y.astype(NP[t])


def values(rng, shape, t):
    if t in ("int8", "uint8"):
        info = np.iinfo(NP[t])
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(NP[t])
    return (rng.standard_normal(shape) * 4).astype(NP[t])


def ort_run(model, feeds):
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(autouse=True)
def _pools_split_at_any_size():
    """The pools go parallel above parallel_min_bytes of input (24 KiB for the
    windowed pools, 256 KiB for the global ones), which these shapes stay
    below: at 0 their two-thread runs split the planes across the threads."""
    import olc_core.tuning as tuning

    for kernel in ("Pool", "GlobalPool"):
        tuning.set("olc_tensor", kernel, "parallel_min_bytes", 0, implementation="any")
    yield
    for kernel in ("Pool", "GlobalPool"):
        tuning.reset("olc_tensor", kernel, "parallel_min_bytes", implementation="any")


def check_levels(model, feeds, op, want, rtol, atol, what=""):
    """Every SIMD level on one thread and on two (planes split across them)."""
    for threads in (2, 1):
        res = run_on_every_level(model, feeds, threads=threads, expected_kernel=kname(op))
        for level, outs in res.items():
            for k, w in enumerate(want):
                got = outs[k]
                where = f"{what} {level} {threads} thread(s) output {k}"
                assert got.shape == w.shape, f"{where}: {got.shape} != {w.shape}"
                if got.dtype == np.int64:
                    np.testing.assert_array_equal(got, w, err_msg=where)
                else:
                    np.testing.assert_allclose(got.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                               err_msg=where)
    return res


# (input shape, attributes): ranks 1-3, odd sizes, 3x5 kernels, stride 2
# with padding, dilations, ceil_mode and every auto_pad.
WINDOWS = [
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 2, 17), {"kernel_shape": [4], "strides": [3], "pads": [2, 1], "ceil_mode": 1}),
    ((1, 2, 20), {"kernel_shape": [3], "dilations": [3], "pads": [2, 0]}),
    ((2, 3, 7, 9), {"kernel_shape": [3, 5], "strides": [2, 2], "pads": [1, 2, 1, 2]}),
    ((2, 3, 7, 9), {"kernel_shape": [3, 5], "strides": [2, 2], "pads": [1, 2, 1, 2], "ceil_mode": 1}),
    ((1, 4, 7, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 7, 9), {"kernel_shape": [3, 4], "strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 4, 7, 9), {"kernel_shape": [3, 3], "strides": [1, 2], "auto_pad": "VALID"}),
    ((1, 2, 9, 11), {"kernel_shape": [2, 3], "strides": [1, 1], "dilations": [2, 3], "pads": [1, 1, 0, 2]}),
    ((1, 3, 33, 35), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 7, 9), {"kernel_shape": [3, 3, 5], "strides": [2, 2, 2], "pads": [1, 1, 2, 1, 1, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 3], "ceil_mode": 1, "pads": [1, 0, 1, 0, 1, 1]}),
    ((1, 2, 6, 7, 8), {"kernel_shape": [2, 2, 3], "dilations": [2, 1, 2], "auto_pad": "SAME_UPPER"}),
    # Output rows tiling the input rows (W == stride * OW): the block path.
    ((2, 3, 7, 9), {"kernel_shape": [3, 5], "pads": [1, 2, 1, 2]}),
    ((1, 2, 8, 12), {"kernel_shape": [3, 3], "dilations": [1, 2], "pads": [1, 2, 1, 2]}),
    ((1, 3, 9, 34), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 8, 10), {"kernel_shape": [3, 3, 3], "strides": [1, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 40), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    # Windows nearly as wide as the row (most outputs at a row edge): the
    # block's rows between margins of the identity, one long window (SPP's
    # 13 at 13x13; stride 2; dilated; 3-D; merged planes of 1-row windows).
    ((1, 3, 13, 13), {"kernel_shape": [13, 13], "pads": [6, 6, 6, 6]}),
    ((2, 3, 13, 13), {"kernel_shape": [9, 9], "pads": [4, 4, 4, 4]}),
    ((1, 2, 6, 10), {"kernel_shape": [5, 5], "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 2, 5, 7, 7), {"kernel_shape": [3, 5, 5], "pads": [1, 2, 2, 1, 2, 2]}),
    ((2, 5, 8, 6), {"kernel_shape": [1, 5], "pads": [0, 2, 0, 2]}),
    # Windows tiling H too (no H padding, H == stride * OH): several planes
    # run as one tall plane; rows at a pitch in one call; 1-D and 1-row
    # windows read the input in place.
    ((2, 5, 8, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 6, 9, 8), {"kernel_shape": [3, 2], "strides": [3, 2]}),
    ((3, 4, 12), {"kernel_shape": [4], "strides": [4]}),
    ((1, 3, 5, 12), {"kernel_shape": [1, 4], "strides": [1, 4]}),
    ((2, 3, 16, 16), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 40), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # One-row planes whose windows stay inside the row, the row not tiled
    # (a tail of W left over): straight from the input, plane by plane.
    ((2, 4, 31), {"kernel_shape": [4], "strides": [4]}),
    ((1, 3, 23), {"kernel_shape": [3], "strides": [2], "dilations": [2]}),
    ((1, 2, 1, 35), {"kernel_shape": [1, 4], "strides": [1, 4]}),
    # W strides past 2 (gathered taps) with a row of more than a vector and
    # a partial last vector at AVX2 (10 and 15 outputs).
    ((1, 2, 43), {"kernel_shape": [4], "strides": [4]}),
    ((1, 3, 2, 47), {"kernel_shape": [2, 3], "strides": [1, 3]}),
    # Stride 4 with taps past the first 4-aligned group (dilation 3;
    # overlapping windows of 6) and a padded 2-D one: AVX2 transposes
    # blocks of 8 outputs while another output follows.
    ((1, 2, 70), {"kernel_shape": [3], "strides": [4], "dilations": [3]}),
    ((1, 3, 80), {"kernel_shape": [6], "strides": [4]}),
    ((1, 2, 3, 75), {"kernel_shape": [2, 4], "strides": [1, 4], "pads": [0, 1, 0, 2]}),
]
IDS = [f"r{len(s) - 2}-{'-'.join(f'{k}{v}' for k, v in a.items())}" for s, a in WINDOWS]


def oracle_kwargs(attrs):
    return {"kernel": attrs["kernel_shape"], "strides": attrs.get("strides"), "pads": attrs.get("pads"),
                "dilations": attrs.get("dilations"), "ceil_mode": attrs.get("ceil_mode", 0),
                "auto_pad": attrs.get("auto_pad", "NOTSET")}


def ort_allows(attrs):
    # onnxruntime refuses ceil_mode with auto_pad; SAME with dilations differs
    # in its padding split from the schema text for even extents.
    return not (attrs.get("dilations") and attrs.get("auto_pad", "NOTSET").startswith("SAME"))


@pytest.mark.parametrize("shape,attrs", WINDOWS, ids=IDS)
def test_max_pool(shape, attrs):
    rng = np.random.default_rng(seed_of("max", shape, sorted(attrs.items())))
    x = values(rng, shape, "float32")
    want = np_pool(x, "max", **oracle_kwargs(attrs)).astype(np.float32)
    check_levels(pool_model("MaxPool", attrs), {"x": x}, "MaxPool", [want], 0, 0, "numpy")
    if ort_allows(attrs):
        check_levels(pool_model("MaxPool", attrs), {"x": x}, "MaxPool", ort_run(pool_model("MaxPool", attrs), {"x": x}),
                     0, 0, "onnxruntime")


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape,attrs", WINDOWS, ids=IDS)
def test_max_pool_indices(shape, attrs, storage_order):
    rng = np.random.default_rng(seed_of("argmax", shape, sorted(attrs.items())))
    # Few distinct values: ties pick the first in row-major window order.
    x = rng.integers(-3, 4, shape).astype(np.float32)
    a = dict(attrs, storage_order=storage_order)
    y, idx = np_pool(x, "max", **oracle_kwargs(attrs), indices=True, storage_order=storage_order)
    m = pool_model("MaxPool", a, indices=True)
    check_levels(m, {"x": x}, "MaxPool", [y.astype(np.float32), idx], 0, 0, "numpy")
    if ort_allows(attrs) and len(shape) == 4:
        check_levels(m, {"x": x}, "MaxPool", ort_run(m, {"x": x}), 0, 0, "onnxruntime")


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", WINDOWS, ids=IDS)
def test_average_pool(shape, attrs, count_include_pad):
    rng = np.random.default_rng(seed_of("avg", shape, sorted(attrs.items()), count_include_pad))
    x = values(rng, shape, "float32")
    a = dict(attrs, count_include_pad=count_include_pad)
    want = np_pool(x, "avg", **oracle_kwargs(attrs), count_include_pad=count_include_pad)
    m = pool_model("AveragePool", a)
    check_levels(m, {"x": x}, "AveragePool", [want], 1e-5, 1e-6, "numpy")
    if ort_allows(attrs):
        check_levels(m, {"x": x}, "AveragePool", ort_run(m, {"x": x}), 1e-5, 1e-6, "onnxruntime")


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape,attrs", WINDOWS[::2], ids=IDS[::2])
def test_lp_pool(shape, attrs, p):
    rng = np.random.default_rng(seed_of("lp", shape, sorted(attrs.items()), p))
    x = values(rng, shape, "float32")
    want = np_pool(x, "lp", **oracle_kwargs(attrs), p=p)
    m = pool_model("LpPool", dict(attrs, p=p))
    check_levels(m, {"x": x}, "LpPool", [want], 1e-5, 1e-5, "numpy")
    if ort_allows(attrs) and not attrs.get("ceil_mode") and not attrs.get("dilations"):
        m18 = pool_model("LpPool", dict(attrs, p=p), opset=18)
        check_levels(m18, {"x": x}, "LpPool", ort_run(m18, {"x": x}), 1e-5, 1e-5, "onnxruntime")


@pytest.mark.parametrize("t", ["float64", "float16", "bfloat16", "int8", "uint8"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_types(op, t):
    if t in ("int8", "uint8") and op != "MaxPool":
        pytest.skip("int8/uint8 are MaxPool's only")
    for shape, attrs in (WINDOWS[0], WINDOWS[4], WINDOWS[10]):
        rng = np.random.default_rng(seed_of(op, t, shape))
        x = values(rng, shape, t)
        kind = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}[op]
        want = cast_like(np_pool(x, kind, **oracle_kwargs(attrs)), t)
        tol = {"float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}.get(t, 0)
        check_levels(pool_model(op, attrs, t), {"x": x}, op, [want], tol, tol, t)


def test_max_pool_int8_pads():
    # Padding never wins: all-negative int8 windows keep their values.
    x = np.full((1, 1, 5, 5), -128, np.int8)
    x[0, 0, 2, 2] = -100
    want = np_pool(x, "max", [3, 3], [2, 2], [1, 1, 1, 1]).astype(np.int8)
    check_levels(pool_model("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, "int8"),
                 {"x": x}, "MaxPool", [want], 0, 0)


def test_max_pool_nan_ignored():
    """NaN loses to every number (as onnx.reference, which drops NaN from
    each window, and onnxruntime's generic loop); a window of NaN only is NaN."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(7)
    x = values(rng, (1, 2, 7, 9), "float32")
    x[0, 0, 1, ::2] = np.nan
    x[0, 1, :3, :4] = np.nan
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    m = pool_model("MaxPool", attrs)
    want = np_pool(x, "max", [3, 3], [2, 2], [1, 1, 1, 1]).astype(np.float32)
    res = check_levels(m, {"x": x}, "MaxPool", [want], 0, 0)
    assert np.isnan(res["scalar"][0][0, 1, 0, 0])
    ref = ReferenceEvaluator(m).run(None, {"x": np.where(np.isnan(x), np.float32(-1e30), x)})[0]
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(res["scalar"][0][finite], np.where(ref < -1e29, np.nan, ref)[finite])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 7, 9), (1, 5, 3, 4, 5), (1, 3, 2, 2, 2, 3), (2, 64, 1, 1)])
def test_global_pool(op, shape):
    rng = np.random.default_rng(seed_of(op, shape))
    x = values(rng, shape, "float32")
    axes = tuple(range(2, len(shape)))
    xd = x.astype(np.float64)
    want = {"GlobalAveragePool": xd.mean(axis=axes, keepdims=True),
            "GlobalMaxPool": xd.max(axis=axes, keepdims=True),
            "GlobalLpPool": np.sqrt((xd * xd).sum(axis=axes, keepdims=True))}[op]
    m = pool_model(op, {})
    check_levels(m, {"x": x}, op, [want], 1e-5, 1e-6, "numpy")
    if op != "GlobalLpPool" and len(shape) <= 5:
        check_levels(m, {"x": x}, op, ort_run(m, {"x": x}), 1e-5, 1e-6, "onnxruntime")


@pytest.mark.parametrize("t", ["float64", "float16", "bfloat16"])
def test_global_pool_types(t):
    rng = np.random.default_rng(seed_of("global", t))
    x = values(rng, (2, 5, 7, 9), t)
    xd = x.astype(np.float64)
    tol = {"float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}[t]
    for op, want in (("GlobalAveragePool", xd.mean(axis=(2, 3), keepdims=True)),
                     ("GlobalMaxPool", xd.max(axis=(2, 3), keepdims=True)),
                     ("GlobalLpPool", np.sqrt((xd * xd).sum(axis=(2, 3), keepdims=True)))):
        check_levels(pool_model(op, {}, t), {"x": x}, op, [cast_like(want, t)], tol, tol, f"{op} {t}")


def test_global_lp_pool_p3_opset2():
    rng = np.random.default_rng(3)
    x = values(rng, (2, 3, 7, 9), "float32")
    want = (np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)
    check_levels(pool_model("GlobalLpPool", {"p": 3}, opset=2), {"x": x}, "GlobalLpPool", [want], 1e-5, 1e-6)


@pytest.mark.parametrize("at", ["end", "start"])
def test_pool_rows_guarded(at):
    """Every row length around the 8- and 16-lane tiles, the input against an
    inaccessible page: a kernel touching a byte outside faults."""
    rng = np.random.default_rng(seed_of("guard", at))
    for w in list(range(1, 36)) + [47, 48, 49, 63, 64, 65]:
        x = values(rng, (1, 2, 3, w), "float32")
        feeds = {"x": guarded(x, at=at)}
        for op, attrs, kind in (("MaxPool", {"kernel_shape": [2, 3], "strides": [1, 1], "pads": [1, 1, 0, 1]}, "max"),
                                ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, "max"),
                                ("AveragePool", {"kernel_shape": [1, 3], "strides": [1, 2], "pads": [0, 1, 0, 1]}, "avg")):
            if w + 2 < 3:
                continue
            want = np_pool(x, kind, **oracle_kwargs(attrs))
            check_levels(pool_model(op, attrs), feeds, op, [want], 1e-6, 1e-6, f"{op} w={w}")
        for op, want in (("GlobalAveragePool", x.astype(np.float64).mean(axis=(2, 3), keepdims=True)),
                         ("GlobalMaxPool", x.max(axis=(2, 3), keepdims=True))):
            check_levels(pool_model(op, {}), feeds, op, [want], 1e-6, 1e-6, f"{op} w={w}")


@pytest.mark.parametrize("at", ["end", "start"])
def test_pool_large_strides_guarded(at):
    """Strides above 2 (gathers at AVX2 / AVX-512): output counts around the
    8- and 16-lane tiles, the input against an inaccessible page."""
    rng = np.random.default_rng(seed_of("strides", at))
    for n_out in list(range(1, 20)) + [31, 32, 33]:
        for op, attrs, kind in (("MaxPool", {"kernel_shape": [4], "strides": [4]}, "max"),
                                ("AveragePool", {"kernel_shape": [4], "strides": [4]}, "avg"),
                                ("MaxPool", {"kernel_shape": [3], "strides": [3], "dilations": [2]}, "max"),
                                ("MaxPool", {"kernel_shape": [2], "strides": [4], "dilations": [3]}, "max"),
                                ("AveragePool", {"kernel_shape": [5], "strides": [3], "pads": [2, 1]}, "avg")):
            k, s_, d = attrs["kernel_shape"][0], attrs["strides"][0], attrs.get("dilations", [1])[0]
            w = (n_out - 1) * s_ + (k - 1) * d + 1 - sum(attrs.get("pads", [0, 0]))
            x = values(rng, (1, 2, w), "float32")
            want = np_pool(x, kind, **oracle_kwargs(attrs))
            assert want.shape[-1] == n_out
            check_levels(pool_model(op, attrs), {"x": guarded(x, at=at)}, op, [want], 1e-6, 1e-6, f"{op} {attrs} n={n_out}")


def test_pool_threads():
    rng = np.random.default_rng(11)
    x = values(rng, (2, 48, 33, 35), "float32")
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    want = ort_run(pool_model("MaxPool", attrs), {"x": x})
    res = run_on_every_level(pool_model("MaxPool", attrs), {"x": x}, threads=2, expected_kernel=kname("MaxPool"))
    for outs in res.values():
        np.testing.assert_array_equal(outs[0], want[0])


def test_pool_bfloat16_waits_for_opset_22():
    m = pool_model("MaxPool", {"kernel_shape": [2]}, "bfloat16", opset=21)
    sess = olc_core.Session(m, strict=False, record_usage=True)
    x = np.ones((1, 1, 4), ml_dtypes.bfloat16)
    sess.run(None, {"x": x})
    assert kname("MaxPool") not in sess.kernel_usage()


@pytest.mark.parametrize("op,attrs,shape,fragment", [
    ("MaxPool", {"kernel_shape": [3, 3]}, (1, 1, 9), "kernel_shape has 2 values"),
    ("AveragePool", {"kernel_shape": [3], "pads": [1, 1, 1, 1]}, (1, 1, 9), "pads has 4 values"),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2]}, (1, 1, 9, 9), "strides has 1 values"),
    ("LpPool", {"kernel_shape": [3, 3], "dilations": [1, 1, 1]}, (1, 1, 9, 9), "dilations has 3 values"),
    ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 3, 1, 1]}, (1, 1, 9, 9), "must be smaller than kernel_shape"),
    ("AveragePool", {"kernel_shape": [2], "auto_pad": "SAME"}, (1, 1, 9), "auto_pad"),
    ("MaxPool", {"kernel_shape": [0]}, (1, 1, 9), "must be positive"),
    ("MaxPool", {"kernel_shape": [5, 5]}, (1, 1, 3, 3), "larger than the padded input"),
])
def test_pool_errors(op, attrs, shape, fragment):
    """A clear error naming the node, raised before any output exists."""
    m = pool_model(op, attrs)
    with pytest.raises(olc_core.OlcError) as info:
        sess = olc_core.Session(m, strict=True)
        sess.run(None, {"x": np.zeros(shape, np.float32)})
    msg = str(info.value)
    assert "node" in msg and fragment in msg, msg
