"""RoiAlign (10, 16, 22) and MaxRoiPool (1, 22).

Oracles: onnxruntime (RoiAlign 10 and 16, float32 and float64; MaxRoiPool
float32, whose bins start from FLT_MIN rather than -FLT_MAX, so its inputs
here are positive), onnx.reference (RoiAlign 16 and 22) and, for
MaxRoiPool, a plain numpy implementation written here (onnx.reference has
none). Every case runs on a strict session at every SIMD level this CPU has,
checks that the olc kernel ran, and that the levels give the same bits.
"""

from __future__ import annotations

import math

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

CODE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16}
NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def roi_align_model(attrs, t="float32", opset=16):
    return one_node_model("RoiAlign", [("X", CODE[t], None), ("rois", CODE[t], None), ("bi", TensorProto.INT64, None)],
                          [("Y", CODE[t], None)], attrs, opset=opset)


def max_roi_pool_model(attrs, t="float32", opset=1):
    return one_node_model("MaxRoiPool", [("X", CODE[t], None), ("rois", CODE[t], None)], [("Y", CODE[t], None)],
                          attrs, opset=opset)


def ort_run(model, feeds):
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def levels(model, feeds, kernel, threads=1):
    """Outputs at every level; asserts the kernel ran and the levels agree bit for bit."""
    res = run_on_every_level(model, feeds, threads=threads, expected_kernel=kernel)
    outs = [r[0] for r in res.values()]
    for level, o in zip(res, outs):
        np.testing.assert_array_equal(o.view(np.uint8), outs[0].view(np.uint8), err_msg=f"{level} differs")
    return outs[0]


def rois_inside(rng, n, h, w, scale=1.0, lo=-3.0, min_size=0.5):
    """Well-formed boxes (x2 > x1, y2 > y1) in input-image coordinates, some reaching outside."""
    x1 = rng.uniform(lo, w / scale, n)
    y1 = rng.uniform(lo, h / scale, n)
    x2 = x1 + rng.uniform(min_size, 0.8 * w / scale + 2, n)
    y2 = y1 + rng.uniform(min_size, 0.8 * h / scale + 2, n)
    return np.stack([x1, y1, x2, y2], 1)


def align_feeds(rng, shape, n_rois, t, scale):
    n, _, h, w = shape
    x = rng.standard_normal(shape).astype(NP[t])
    rois = rois_inside(rng, n_rois, h, w, scale).astype(NP[t])
    bi = rng.integers(0, n, n_rois).astype(np.int64)
    return {"X": x, "rois": rois, "bi": bi}


# (X shape, rois, output_height, output_width): odd sizes, one roi, many.
GEOMETRIES = [((1, 1, 10, 10), 3, 5, 5), ((2, 3, 11, 13), 7, 3, 5), ((3, 5, 7, 9), 12, 7, 7), ((1, 4, 1, 17), 2, 1, 4)]


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("opset,ctm", [(10, None), (16, "half_pixel"), (16, "output_half_pixel")])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: "x".join(map(str, g[0])))
def test_roi_align_against_onnxruntime(geom, opset, ctm, sampling_ratio, mode):
    shape, n_rois, oh, ow = geom
    rng = np.random.default_rng(sum(shape) * 31 + sampling_ratio + opset)
    scale = 0.5 if n_rois % 2 else 1.0
    attrs = {"mode": mode, "output_height": oh, "output_width": ow, "sampling_ratio": sampling_ratio,
             "spatial_scale": scale}
    if ctm:
        attrs["coordinate_transformation_mode"] = ctm
    m = roi_align_model(attrs, opset=opset)
    feeds = align_feeds(rng, shape, n_rois, "float32", scale)
    got = levels(m, feeds, "olc_tensor::RoiAlign")
    np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-5)
    if opset >= 16:
        np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align_opset_22_against_reference(mode, ctm):
    rng = np.random.default_rng(22)
    m = roi_align_model({"mode": mode, "output_height": 4, "output_width": 3, "sampling_ratio": 0,
                         "coordinate_transformation_mode": ctm, "spatial_scale": 0.25}, opset=22)
    feeds = align_feeds(rng, (2, 3, 9, 14), 6, "float32", 0.25)
    got = levels(m, feeds, "olc_tensor::RoiAlign")
    np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t,opset", [("float64", 16), ("float16", 16), ("bfloat16", 22)])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_types(t, opset, mode):
    """float64 against onnxruntime's float64 kernel; float16 and bfloat16
    (computed in float32, rounded once) against float32 on the same values."""
    rng = np.random.default_rng(5)
    attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": 2, "spatial_scale": 0.5}
    m = roi_align_model(attrs, t, opset)
    feeds = align_feeds(rng, (2, 3, 11, 13), 5, t, 0.5)
    got = levels(m, feeds, "olc_tensor::RoiAlign")
    assert got.dtype == NP[t]
    if t == "float64":
        np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-12, atol=1e-12)
        return
    f32 = {k: v.astype(np.float32) if v.dtype != np.int64 else v for k, v in feeds.items()}
    want = ort_run(roi_align_model(attrs, "float32", 16), f32)
    tol = 1e-2 if t == "float16" else 4e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol)


def test_roi_align_malformed_and_outside_rois():
    """Reversed boxes (zero samples under half_pixel: 0; forced to 1x1 under
    output_half_pixel), boxes wholly outside the image, a box on one pixel."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 8, 9)).astype(np.float32)
    rois = np.array([[6, 5, 2, 1], [-30, -30, -20, -25], [40, 2, 50, 6], [3, 3, 3, 3], [0, 0, 9, 8]], np.float32)
    feeds = {"X": x, "rois": rois, "bi": np.zeros(5, np.int64)}
    for ctm in ("half_pixel", "output_half_pixel"):
        for mode in ("avg", "max"):
            m = roi_align_model({"mode": mode, "output_height": 2, "output_width": 3, "sampling_ratio": 2,
                                 "coordinate_transformation_mode": ctm})
            got = levels(m, feeds, "olc_tensor::RoiAlign")
            np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-6)
    # Adaptive sampling on a reversed box under half_pixel: no samples, all 0
    # (onnxruntime fails on it: a negative grid size).
    m = roi_align_model({"output_height": 2, "output_width": 2, "sampling_ratio": 0})
    got = levels(m, feeds, "olc_tensor::RoiAlign")
    assert np.all(got[0] == 0)
    np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("at", ["end", "start"])
def test_roi_align_guarded(at):
    """X against an inaccessible page, bins per roi around the 16-point block."""
    rng = np.random.default_rng(seed=7 if at == "end" else 8)
    for ow in (1, 3, 15, 16, 17, 33):
        x = rng.standard_normal((1, 3, 6, 7)).astype(np.float32)
        rois = rois_inside(rng, 3, 6, 7, lo=-2).astype(np.float32)
        rois[0] = [0, 0, 7, 6]  # the whole image: samples on the last row and column
        feeds = {"X": guarded(x, at=at), "rois": rois, "bi": np.zeros(3, np.int64)}
        m = roi_align_model({"output_height": 2, "output_width": ow, "sampling_ratio": 2})
        got = levels(m, feeds, "olc_tensor::RoiAlign")
        np.testing.assert_allclose(got, ort_run(m, {**feeds, "X": x}), rtol=1e-5, atol=1e-5)


def test_roi_align_threads():
    rng = np.random.default_rng(11)
    m = roi_align_model({"output_height": 7, "output_width": 7, "sampling_ratio": 0, "spatial_scale": 0.25})
    for n_rois in (1, 9):
        feeds = align_feeds(rng, (2, 16, 20, 24), n_rois, "float32", 0.25)
        got = levels(m, feeds, "olc_tensor::RoiAlign", threads=2)
        np.testing.assert_allclose(got, ort_run(m, feeds), rtol=1e-5, atol=1e-5)


def test_roi_align_empty():
    m = roi_align_model({"output_height": 2, "output_width": 2})
    x = np.ones((1, 3, 4, 4), np.float32)
    got = levels(m, {"X": x, "rois": np.zeros((0, 4), np.float32), "bi": np.zeros(0, np.int64)},
                 "olc_tensor::RoiAlign")
    assert got.shape == (0, 3, 2, 2)


@pytest.mark.parametrize("feeds,fragment", [
    ({"bi": np.array([0, 2], np.int64)}, "batch_indices[1] = 2 is outside [0, 2)"),
    ({"bi": np.array([-1, 0], np.int64)}, "batch_indices[0] = -1 is outside [0, 2)"),
    ({"bi": np.array([0], np.int64)}, "batch_indices must be [num_rois] = [2]"),
    ({"rois": np.zeros((2, 5), np.float32)}, "rois must be [num_rois, 4]"),
    ({"rois": np.array([[0, 0, 1, np.nan], [0, 0, 1, 1]], np.float32)}, "rois[0] has a non-finite coordinate"),
    ({"X": np.zeros((2, 1, 4), np.float32)}, "X must be 4-D"),
    ({"rois": np.array([[0, 0, 1e9, 1e9], [0, 0, 1, 1]], np.float32)}, "samples per bin"),
])
def test_roi_align_errors(feeds, fragment):
    """A clear error naming the node, before any output exists."""
    m = roi_align_model({"output_height": 2, "output_width": 2})
    base = {"X": np.zeros((2, 1, 4, 4), np.float32), "rois": np.array([[0, 0, 2, 2], [1, 1, 3, 3]], np.float32),
            "bi": np.array([0, 1], np.int64)}
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {**base, **feeds})
    msg = str(info.value)
    assert "node" in msg and "RoiAlign" in msg and fragment in msg, msg
    # The session is intact: a valid feed runs and is right.
    np.testing.assert_allclose(sess.run(None, base)[0], ReferenceEvaluator(m).run(None, base)[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attrs,opset,fragment", [
    ({"mode": "sum"}, 16, "attribute 'mode'"),
    ({"coordinate_transformation_mode": "align_corners"}, 16, "coordinate_transformation_mode"),
    ({"coordinate_transformation_mode": "half_pixel"}, 10, "unknown attribute"),
    ({"output_height": 0}, 16, "must be positive"),
    ({"sampling_ratio": -1}, 16, "must not be negative"),
])
def test_roi_align_attribute_errors(attrs, opset, fragment):
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(roi_align_model(attrs, opset=opset), strict=True)
    assert fragment in str(info.value), str(info.value)


# ---------------------------------------------------------------- MaxRoiPool

def np_max_roi_pool(x, rois, pooled, scale):
    """The Fast R-CNN RoIPool, written plainly: bins of a roi rounded to whole
    pixels, each bin's maximum (NaN ignored), 0 for an empty bin."""
    n_rois = rois.shape[0]
    _, c, h, w = x.shape
    ph_n, pw_n = pooled
    out = np.zeros((n_rois, c, ph_n, pw_n), x.dtype)
    f32 = np.float32
    for r in range(n_rois):
        b = int(rois[r, 0])
        # round half away from zero, in float32 as onnxruntime computes it
        sw, sh, ew, eh = (int(math.copysign(math.floor(abs(float(f32(v) * f32(scale))) + 0.5), float(f32(v) * f32(scale))))
                          for v in rois[r, 1:])
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        bh, bw = f32(rh) / f32(ph_n), f32(rw) / f32(pw_n)
        for ph in range(ph_n):
            hs = min(max(math.floor(f32(ph) * bh) + sh, 0), h)
            he = min(max(math.ceil(f32(ph + 1) * bh) + sh, 0), h)
            for pw in range(pw_n):
                ws = min(max(math.floor(f32(pw) * bw) + sw, 0), w)
                we = min(max(math.ceil(f32(pw + 1) * bw) + sw, 0), w)
                if he <= hs or we <= ws:
                    continue
                win = x[b, :, hs:he, ws:we].reshape(c, -1).astype(np.float64)
                out[r, :, ph, pw] = np.fmax.reduce(win, axis=1)
    return out


def pool_rois(rng, n, batch, h, w, scale):
    lo = np.stack([rng.uniform(-3, w / scale, n), rng.uniform(-3, h / scale, n)], 1)
    hi = lo + rng.uniform(-2, 0.8 * max(h, w) / scale, (n, 2))
    return np.concatenate([rng.integers(0, batch, (n, 1)) + 0.25, lo, hi], 1)


@pytest.mark.parametrize("pooled", [(1, 1), (2, 3), (3, 4), (7, 7)])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0625])
def test_max_roi_pool(pooled, scale):
    rng = np.random.default_rng(pooled[0] * 10 + pooled[1] + int(scale * 100))
    x = rng.standard_normal((2, 3, 13, 15)).astype(np.float32)
    rois = pool_rois(rng, 9, 2, 13, 15, scale).astype(np.float32)
    m = max_roi_pool_model({"pooled_shape": list(pooled), "spatial_scale": scale})
    got = levels(m, {"X": x, "rois": rois}, "olc_tensor::MaxRoiPool")
    np.testing.assert_array_equal(got, np_max_roi_pool(x, rois, pooled, scale))
    # onnxruntime's bins start from FLT_MIN (not -FLT_MAX): compare on positive values.
    xp = np.abs(x) + 0.5
    got = levels(m, {"X": xp, "rois": rois}, "olc_tensor::MaxRoiPool")
    np.testing.assert_array_equal(got, ort_run(m, {"X": xp, "rois": rois}))


@pytest.mark.parametrize("t,opset", [("float64", 1), ("float16", 1), ("bfloat16", 22)])
def test_max_roi_pool_types(t, opset):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 9, 11)).astype(NP[t])
    rois = pool_rois(rng, 5, 2, 9, 11, 1.0).astype(NP[t])
    m = max_roi_pool_model({"pooled_shape": [2, 3]}, t, opset)
    got = levels(m, {"X": x, "rois": rois}, "olc_tensor::MaxRoiPool")
    assert got.dtype == NP[t]
    # A maximum is exact in every type; the rois as the kernel reads them.
    want = np_max_roi_pool(x.astype(np.float64), rois.astype(np.float64), (2, 3), 1.0)
    np.testing.assert_array_equal(got.astype(np.float64), want)


def test_max_roi_pool_nan_ignored():
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(1, 2, 6, 6)
    x[0, 0, :3, :3] = np.nan
    x[0, 1, 0, 0] = np.nan
    rois = np.array([[0, 0, 0, 5, 5]], np.float32)
    m = max_roi_pool_model({"pooled_shape": [2, 2]})
    got = levels(m, {"X": x, "rois": rois}, "olc_tensor::MaxRoiPool")
    assert np.isnan(got[0, 0, 0, 0])  # a bin of NaN only
    np.testing.assert_array_equal(got[0, 1], [[x[0, 1, 2, 2], x[0, 1, 2, 5]], [x[0, 1, 5, 2], x[0, 1, 5, 5]]])


@pytest.mark.parametrize("at", ["end", "start"])
def test_max_roi_pool_guarded(at):
    rng = np.random.default_rng(17)
    for w in (1, 2, 15, 16, 17, 31, 33):
        x = rng.standard_normal((1, 2, 5, w)).astype(np.float32)
        rois = np.array([[0, -1, -1, w + 2, 6], [0, 0, 0, w - 1, 4], [0, w // 2, 1, w, 3]], np.float32)
        m = max_roi_pool_model({"pooled_shape": [2, 3]})
        got = levels(m, {"X": guarded(x, at=at), "rois": rois}, "olc_tensor::MaxRoiPool")
        np.testing.assert_array_equal(got, np_max_roi_pool(x, rois, (2, 3), 1.0))


def test_max_roi_pool_threads():
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 32, 14, 14)).astype(np.float32)
    rois = pool_rois(rng, 6, 2, 14, 14, 1.0).astype(np.float32)
    m = max_roi_pool_model({"pooled_shape": [7, 7]})
    got = levels(m, {"X": x, "rois": rois}, "olc_tensor::MaxRoiPool", threads=2)
    np.testing.assert_array_equal(got, np_max_roi_pool(x, rois, (7, 7), 1.0))


@pytest.mark.parametrize("rois,fragment", [
    (np.array([[2, 0, 0, 1, 1]], np.float32), "batch index 2, outside [0, 2)"),
    (np.array([[-1, 0, 0, 1, 1]], np.float32), "batch index -1, outside [0, 2)"),
    (np.array([[0, 0, np.inf, 1, 1]], np.float32), "non-finite"),
    (np.array([[0, 0, 0, 1]], np.float32), "rois must be [num_rois, 5]"),
])
def test_max_roi_pool_errors(rois, fragment):
    m = max_roi_pool_model({"pooled_shape": [2, 2]})
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"X": np.zeros((2, 1, 4, 4), np.float32), "rois": rois})
    msg = str(info.value)
    assert "node" in msg and "MaxRoiPool" in msg and fragment in msg, msg
