"""GridSample (16, 20, 22): every mode, padding mode and align_corners, 1 to
3 spatial axes.

Oracles: onnxruntime (2-D at every opset, 3-D linear / nearest; float32 and
float64) and onnx.reference (opset 20+, any rank). They disagree where
onnx.reference clamps or reflects the coordinate itself before cubic
interpolation under border / reflection padding (onnxruntime and PyTorch
pad each tap): olc pads the taps, and those cases are checked against
onnxruntime and against a direct numpy implementation written here. Every
case runs on a strict session at every SIMD level this CPU has, checks that
the olc kernel ran, and that the levels give the same bits.
"""

from __future__ import annotations

import itertools
import zlib

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core.testing import guarded, one_node_model, run_on_every_level

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover - onnxruntime is a test extra
    ort = None

K = "olc_tensor::GridSample"
CODE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16}
NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
MODES = {16: ("bilinear", "nearest", "bicubic"), 20: ("linear", "nearest", "cubic"), 22: ("linear", "nearest", "cubic")}
PADS = ("zeros", "border", "reflection")


def model(attrs, xt="float32", gt="float32", opset=20):
    return one_node_model("GridSample", [("X", CODE[xt], None), ("grid", CODE[gt], None)], [("Y", CODE[xt], None)],
                          attrs, opset=opset)


def ort_run(m, feeds):
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def levels(m, feeds, threads=1):
    res = run_on_every_level(m, feeds, threads=threads, expected_kernel=K)
    outs = [r[0] for r in res.values()]
    for level, o in zip(res, outs):
        np.testing.assert_array_equal(o.view(np.uint8), outs[0].view(np.uint8), err_msg=f"{level} differs")
    return outs[0]


def feeds_for(rng, x_shape, out_spatial, xt="float32", gt="float32", span=1.6):
    r = len(x_shape) - 2
    x = rng.standard_normal(x_shape).astype(NP[xt])
    g = rng.uniform(-span, span, (x_shape[0], *out_spatial, r)).astype(NP[gt])
    return {"X": x, "grid": g}


def keys(d):
    """Keys' cubic weights at distances 1 + d, d, 1 - d, 2 - d (a = -0.75)."""
    a = -0.75

    def w(t):
        t = abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0

    return [w(1 + d), w(d), w(1 - d), w(2 - d)]


def np_grid_sample(x, grid, mode, pad, align):
    """A direct float64 GridSample with padding applied per tap (PyTorch's
    definition): every output point, every tap of every axis."""
    n_, c_ = x.shape[:2]
    dims = x.shape[2:]
    r = len(dims)
    out = np.zeros((n_, c_, *grid.shape[1:-1]))

    def pad_index(i, size):
        if 0 <= i < size:
            return i
        if pad == "zeros":
            return None
        if pad == "border":
            return min(max(i, 0), size - 1)
        if align:
            if size == 1:
                return 0
            p = 2 * (size - 1)
            m = i % p
            return p - m if m >= size else m
        p = 2 * size
        m = i % p
        return p - 1 - m if m >= size else m

    for n in range(n_):
        for pos in itertools.product(*(range(s) for s in grid.shape[1:-1])):
            taps = []
            for a in range(r):
                v = float(grid[(n, *pos, r - 1 - a)])
                size = dims[a]
                xc = (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
                if mode == "nearest":
                    taps.append([(pad_index(int(np.rint(xc)), size), 1.0)])
                    continue
                x0 = int(np.floor(xc))
                d = xc - x0
                if mode == "linear":
                    taps.append([(pad_index(x0, size), 1 - d), (pad_index(x0 + 1, size), d)])
                else:
                    taps.append([(pad_index(x0 - 1 + j, size), w) for j, w in enumerate(keys(d))])
            acc = np.zeros(c_)
            for combo in itertools.product(*taps):
                if any(i is None for i, _ in combo):
                    continue
                acc += np.prod([w for _, w in combo]) * x[(n, slice(None), *[i for i, _ in combo])]
            out[(n, slice(None), *pos)] = acc
    return out


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("mode_index", [0, 1, 2], ids=["linear", "nearest", "cubic"])
@pytest.mark.parametrize("opset", [16, 20, 22])
def test_grid_sample_2d(opset, mode_index, pad, align):
    """2-D at every opset (bilinear / bicubic names at 16) against onnxruntime;
    from 20 against onnx.reference too, where it pads the same way."""
    mode = MODES[opset][mode_index]
    rng = np.random.default_rng(opset * 100 + mode_index * 10 + PADS.index(pad) * 2 + align)
    m = model({"mode": mode, "padding_mode": pad, "align_corners": align}, opset=opset)
    feeds = feeds_for(rng, (2, 3, 7, 9), (5, 6))
    got = levels(m, feeds)
    np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-5)
    if opset >= 20 and not (mode == "cubic" and pad != "zeros"):
        np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-5)
    if mode_index == 2:
        np.testing.assert_allclose(got, np_grid_sample(feeds["X"], feeds["grid"], "cubic", pad, align),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("x_shape,out", [((2, 2, 9), (7,)), ((1, 2, 4, 5, 6), (3, 2, 4)), ((1, 1, 1, 3, 2), (2, 2, 3))],
                         ids=["1d", "3d", "3d-unit"])
def test_grid_sample_nd(x_shape, out, mode, pad, align):
    """1-D and 3-D (opset 20+): onnx.reference (except cubic under border /
    reflection), onnxruntime for 3-D linear / nearest, the numpy version."""
    rng = np.random.default_rng(len(x_shape) * 1000 + ["linear", "nearest", "cubic"].index(mode) * 10 + align)
    m = model({"mode": mode, "padding_mode": pad, "align_corners": align}, opset=22)
    feeds = feeds_for(rng, x_shape, out)
    got = levels(m, feeds)
    np.testing.assert_allclose(got, np_grid_sample(feeds["X"], feeds["grid"], mode, pad, align), rtol=1e-4, atol=1e-4)
    # onnx.reference divides by zero reflecting about a one-pixel axis's
    # single centre (align_corners): olc maps every tap to it.
    ref_ok = not (pad == "reflection" and align and 1 in x_shape[2:])
    if ref_ok and not (mode == "cubic" and pad != "zeros"):
        np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-5)
    if len(x_shape) == 5 and mode != "cubic":
        np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("xt,gt,opset", [("float64", "float64", 20), ("float32", "float64", 20),
                                         ("float64", "float32", 20), ("float16", "float16", 20),
                                         ("float16", "float32", 20), ("bfloat16", "bfloat16", 22),
                                         ("float32", "bfloat16", 22)])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_types(xt, gt, opset, mode):
    """Each type pair against the float64 numpy version on the same values
    (float64 in either input computes in float64)."""
    rng = np.random.default_rng(zlib.crc32(f"{xt} {gt} {mode}".encode()))
    m = model({"mode": mode, "padding_mode": "border"}, xt, gt, opset)
    feeds = feeds_for(rng, (1, 3, 6, 7), (4, 5), xt, gt)
    got = levels(m, feeds)
    assert got.dtype == NP[xt]
    want = np_grid_sample(feeds["X"].astype(np.float64), feeds["grid"].astype(np.float64), mode, "border", 0)
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}[xt]
    if gt in ("float16", "bfloat16") or (xt != "float64" and gt != "float64"):
        tol = max(tol, 1e-4)
    if mode == "nearest" and gt in ("float16", "bfloat16"):
        return  # a half-precision grid rounds a coordinate onto the other side of a tie: checked by the float32 cases
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    if xt == gt == "float64":
        np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-12, atol=1e-12)


def test_grid_sample_special_coordinates():
    """NaN coordinates give NaN; infinite ones 0 (zeros), the edge (border)
    or NaN (reflection); far ones are reflected periodically."""
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    pts = np.array([[np.nan, 0], [np.inf, 0], [-np.inf, 0.5], [41.0, 0], [1e30, -1e30]], np.float32)
    grid = pts.reshape(1, 1, 5, 2)
    for mode in ("linear", "nearest", "cubic"):
        for pad in PADS:
            m = model({"mode": mode, "padding_mode": pad})
            got = levels(m, {"X": x, "grid": grid})[0, 0, 0]
            assert np.isnan(got[0]), (mode, pad, got)
            if pad == "zeros":
                assert got[1] == 0 and got[2] == 0 and got[3] == 0 and got[4] == 0, (mode, pad, got)
            elif pad == "border":
                assert np.isfinite(got[1:]).all(), (mode, pad, got)
                np.testing.assert_allclose(got[1], x[0, 0, 1, 3], rtol=1e-6)  # +inf: the last column
            else:
                assert np.isnan(got[1]) and np.isnan(got[2]), (mode, pad, got)
                want = np_grid_sample(x, grid[:, :, 3:4], mode, pad, 0)[0, 0, 0, 0]
                np.testing.assert_allclose(got[3], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("at", ["end", "start"])
def test_grid_sample_guarded(at):
    """X and grid against an inaccessible page; output points around the
    16-point block; coordinates reaching every edge."""
    rng = np.random.default_rng(23 if at == "end" else 29)
    for points in (1, 2, 15, 16, 17, 31, 33):
        for mode, pad in (("linear", "zeros"), ("cubic", "reflection"), ("nearest", "border"), ("cubic", "zeros")):
            feeds = feeds_for(rng, (1, 2, 5, 6), (1, points), span=1.3)
            m = model({"mode": mode, "padding_mode": pad, "align_corners": points % 2})
            want = ort_run(m, feeds)
            got = levels(m, {"X": guarded(feeds["X"], at=at), "grid": guarded(feeds["grid"], at=at)})
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_grid_sample_threads_and_large():
    rng = np.random.default_rng(31)
    for mode in ("linear", "cubic"):
        m = model({"mode": mode})
        feeds = feeds_for(rng, (2, 24, 40, 36), (33, 35), span=1.1)
        got = levels(m, feeds, threads=2)
        np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-5)


def test_grid_sample_empty():
    m = model({})
    got = levels(m, {"X": np.ones((2, 3, 4, 4), np.float32), "grid": np.zeros((2, 0, 5, 2), np.float32)})
    assert got.shape == (2, 3, 0, 5)


@pytest.mark.parametrize("x_shape,g_shape,fragment", [
    ((2, 1, 4, 4), (2, 3, 3, 3), "grid must be [N, O1, ..., O2, 2] with N = 2"),
    ((2, 1, 4, 4), (1, 3, 3, 2), "grid must be [N, O1, ..., O2, 2] with N = 2"),
    ((2, 1, 4, 4), (2, 3, 2), "grid must be [N, O1, ..., O2, 2]"),
    ((2, 1, 4, 4, 4), (2, 3, 3, 2), "grid must be [N, O1, ..., O3, 3]"),
])
def test_grid_sample_grid_shape_errors(x_shape, g_shape, fragment):
    """A grid of the wrong shape: a clear error naming the node, before any output exists."""
    m = model({})
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"X": np.zeros(x_shape, np.float32), "grid": np.zeros(g_shape, np.float32)})
    msg = str(info.value)
    assert "node" in msg and "GridSample" in msg and fragment in msg, msg
    # The session is intact: a valid feed runs and is right.
    feeds = feeds_for(np.random.default_rng(1), (2, 1, 4, 4), (3, 3))
    np.testing.assert_allclose(sess.run(None, feeds)[0], ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("attrs,opset,fragment", [
    ({"mode": "linear"}, 16, "is not bilinear, nearest or bicubic"),
    ({"mode": "bilinear"}, 20, "is not linear, nearest or cubic"),
    ({"padding_mode": "wrap"}, 20, "padding_mode"),
    ({"align_corners": 2}, 20, "align_corners"),
])
def test_grid_sample_attribute_errors(attrs, opset, fragment):
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(model(attrs, opset=opset), strict=True)
    assert fragment in str(info.value), str(info.value)


def test_grid_sample_opset_16_takes_4d_only():
    m = model({}, opset=16)
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"X": np.zeros((1, 1, 4, 4, 4), np.float32), "grid": np.zeros((1, 2, 2, 2, 3), np.float32)})
    assert "4-D" in str(info.value)
