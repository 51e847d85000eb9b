"""Resize (10, 11-12, 13-17, 18, 19+) and Upsample (7-9).

Oracles: ``onnx.reference`` (the spec's own numpy code: every mode,
coordinate transformation, antialias, axes and keep_aspect_ratio_policy)
and onnxruntime where it implements the same thing (it rounds coordinates
in float32, so a nearest pick exactly at .5 can differ: the inputs here
avoid such scales). Every case runs at every SIMD level this CPU has on a
strict session and checks that the olc kernel ran; the levels agree
exactly with each other (same tap order, no FMA contraction).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).parent))
from helpers import NP, seed_of  # noqa: E402

import olc_core  # noqa: E402
from olc_core.testing import guarded, one_node_model, run_on_every_level  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover - onnxruntime is a test extra
    ort = None

K = "olc_tensor::Resize"
CODE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
        "int32": TensorProto.INT32, "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def resize_model(attrs, t="float32", opset=19, scales=None, sizes=None, roi=None):
    """Resize with constant roi/scales/sizes (as a real model has them)."""
    inits = {}
    names = ["x", "", "", ""]
    if roi is not None:
        inits["roi"] = np.asarray(roi, np.float32)
        names[1] = "roi"
    if scales is not None:
        inits["scales"] = np.asarray(scales, np.float32)
        names[2] = "scales"
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        names[3] = "sizes"
    while names and names[-1] == "":
        names.pop()
    ins = [("x", CODE[t], None)] + [(n, 0, None) for n in names[1:]]
    return one_node_model("Resize", ins, [("y", CODE[t], None)], attrs, opset=opset, initializers=inits)


def values(rng, shape, t):
    if t in ("int8", "uint8", "int32", "int64"):
        info = np.iinfo(NP[t])
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, shape, endpoint=True).astype(NP[t])
    if t == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return (rng.standard_normal(shape) * 4).astype(NP[t])


def check(model, feeds, want, rtol=1e-5, atol=1e-5, what=""):
    res = run_on_every_level(model, feeds, expected_kernel=K if model.graph.node[0].op_type == "Resize"
                             else "olc_tensor::Upsample")
    first = None
    for level, outs in res.items():
        got = outs[0]
        assert got.shape == want.shape, f"{what} {level}: {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{what} {level}: {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"{what} {level}")
        if first is None:
            first = got
        else:
            np.testing.assert_array_equal(got, first, err_msg=f"{what}: {level} differs from the scalar level")
    return res


def ref(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)[0]


def ort_ref(model, feeds):
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def ort_agrees(coord, shape, scales):
    """onnx.reference (and olc, and the node suite) take scale * length for
    the output length in align_corners and pytorch_half_pixel; onnxruntime
    the integer length: they agree where the product is an integer."""
    lengths = [float(np.float32(s)) * n for s, n in zip(scales, shape) if s != 1]
    if coord == "pytorch_half_pixel":
        return all(v != 1 and int(v) != 1 for v in lengths)
    if coord == "align_corners":
        return all(v == int(v) for v in lengths)
    return True


def ort_takes_cubic(shape, scales):
    """onnxruntime's cubic: 2-D inputs, or 4-D ones with N and C unscaled."""
    return len(shape) == 2 or (len(shape) == 4 and scales[0] == scales[1] == 1)


COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# (input shape, scales): 1-D, 2-D (bilinear), 3-D (trilinear), odd sizes,
# up and down, scales that are not integers.
SCALES = [
    ((1, 2, 7), (1, 1, 2.0)),
    ((1, 1, 13), (1, 1, 0.6)),
    ((1, 3, 7, 9), (1, 1, 2.0, 2.0)),
    ((2, 2, 7, 9), (1, 1, 1.7, 0.55)),
    ((1, 2, 8, 10), (1, 1, 0.5, 0.5)),
    ((1, 1, 5, 6, 7), (1, 1, 1.5, 2.0, 0.6)),
    ((3, 7, 9), (1, 2.5, 1.0)),
]
SIDS = [f"{'x'.join(map(str, s))}-{'_'.join(map(str, c))}" for s, c in SCALES]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("shape,scales", SCALES, ids=SIDS)
def test_linear(shape, scales, coord):
    rng = np.random.default_rng(seed_of("linear", shape, coord))
    x = values(rng, shape, "float32")
    m = resize_model({"mode": "linear", "coordinate_transformation_mode": coord}, scales=scales)
    check(m, {"x": x}, ref(m, {"x": x}), what="onnx.reference")
    if ort_agrees(coord, shape, scales):
        check(m, {"x": x}, ort_ref(m, {"x": x}), what="onnxruntime")


@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("shape,scales", [SCALES[0], SCALES[2], SCALES[3], SCALES[5]], ids=[SIDS[0], SIDS[2], SIDS[3], SIDS[5]])
def test_cubic(shape, scales, coord, exclude_outside):
    rng = np.random.default_rng(seed_of("cubic", shape, coord))
    x = values(rng, shape, "float32")
    for a in (-0.75, -0.5):
        m = resize_model({"mode": "cubic", "coordinate_transformation_mode": coord, "cubic_coeff_a": a,
                          "exclude_outside": exclude_outside}, scales=scales)
        check(m, {"x": x}, ref(m, {"x": x}), 1e-4, 1e-4, what="onnx.reference")
        if ort_takes_cubic(shape, scales) and ort_agrees(coord, shape, scales):
            check(m, {"x": x}, ort_ref(m, {"x": x}), 1e-4, 1e-4, what="onnxruntime")


@pytest.mark.parametrize("nearest_mode", NEAREST)
@pytest.mark.parametrize("coord", COORDS + ["tf_half_pixel_for_nn"])
@pytest.mark.parametrize("shape,scales", SCALES, ids=SIDS)
def test_nearest(shape, scales, coord, nearest_mode):
    rng = np.random.default_rng(seed_of("nearest", shape, coord))
    x = values(rng, shape, "float32")
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": nearest_mode}
    if coord == "tf_half_pixel_for_nn":
        # Resize 11-12 only (not in onnx.reference): onnxruntime, which
        # computes coordinates in float32; with scales exact in binary both
        # land on the same side of every rounding tie.
        if any(float(np.float32(v)) != v or v * 4 != int(v * 4) for v in scales):
            pytest.skip("scale not exact in binary")
        m = resize_model(attrs, opset=11, scales=scales, roi=[])
        check(m, {"x": x}, ort_ref(m, {"x": x}), 0, 0, what="onnxruntime")
        return
    m = resize_model(attrs, scales=scales)
    check(m, {"x": x}, ref(m, {"x": x}), 0, 0, what="onnx.reference")


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_sizes_axes_policy(mode, policy):
    rng = np.random.default_rng(seed_of("sizes", mode, policy))
    x = values(rng, (2, 3, 7, 9), "float32")
    for axes, sizes in ((None, [2, 3, 11, 5]), ([2, 3], [11, 5]), ([-1, 2], [4, 13]), ([3], [20])):
        attrs = {"mode": mode, "keep_aspect_ratio_policy": policy}
        if axes is not None:
            attrs["axes"] = axes
        elif policy != "stretch":
            continue  # the policy applies to every axis given: N and C would change
        m = resize_model(attrs, sizes=sizes)
        # onnx.reference cannot take negative axes: onnxruntime there.
        oracle = ort_ref if axes and min(axes) < 0 else ref
        if oracle is ort_ref and (mode == "cubic" or policy != "stretch"):
            continue  # onnxruntime: no cubic on these shapes; the policy with negative axes misplaces sizes
        check(m, {"x": x}, oracle(m, {"x": x}), 1e-4, 1e-4, what=f"axes {axes} sizes {sizes}")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_scales_with_axes(mode):
    rng = np.random.default_rng(seed_of("axes", mode))
    x = values(rng, (2, 5, 7, 9), "float32")
    for axes, scales in (([2, 3], [1.5, 0.5]), ([1], [2.0]), ([3, 2], [0.7, 1.25]), ([0, 3], [2.0, 1.3])):
        m = resize_model({"mode": mode, "axes": axes}, scales=scales, opset=18)
        check(m, {"x": x}, ref(m, {"x": x}), 1e-4, 1e-4, what=f"axes {axes}")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode):
    rng = np.random.default_rng(seed_of("crop", mode))
    x = values(rng, (1, 2, 7, 9), "float32")
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -7.5}
    for roi, sizes in (([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.7], [1, 2, 5, 6]),
                       ([0, 0, -0.3, 0.4, 1, 1, 1.2, 1.6], [1, 2, 9, 8]),
                       ([0, 0, 0.5, 0.5, 1, 1, 0.5, 0.5], [1, 2, 1, 1])):
        m = resize_model(attrs, sizes=sizes, roi=roi)
        want = ref(m, {"x": x})
        res = check(m, {"x": x}, want, 1e-4, 1e-4, what=f"roi {roi}")
        if min(roi) < 0:
            assert (res["scalar"][0] == np.float32(-7.5)).any()
    # roi over `axes` only (18+)
    m = resize_model(dict(attrs, axes=[3, 2]), sizes=[6, 5], roi=[0.1, 0.2, 1.3, 0.8], opset=18)
    check(m, {"x": x}, ref(m, {"x": x}), 1e-4, 1e-4, what="axes")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias(mode):
    rng = np.random.default_rng(seed_of("aa", mode))
    x = values(rng, (1, 2, 16, 19), "float32")
    for scales in ((1, 1, 0.5, 0.5), (1, 1, 0.3, 0.7), (1, 1, 0.25, 1.5), (1, 1, 2.0, 0.6)):
        for excl in (0, 1):
            m = resize_model({"mode": mode, "antialias": 1, "exclude_outside": excl}, scales=scales)
            check(m, {"x": x}, ref(m, {"x": x}), 1e-4, 1e-4, what=f"scales {scales} exclude {excl}")
    m = resize_model({"mode": mode, "antialias": 1}, sizes=[1, 2, 5, 7])
    check(m, {"x": x}, ref(m, {"x": x}), 1e-4, 1e-4, what="sizes")
    check(m, {"x": x}, ort_ref(m, {"x": x}), 1e-4, 1e-4, what="onnxruntime")


@pytest.mark.parametrize("t", ["float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_types(mode, t):
    rng = np.random.default_rng(seed_of("types", mode, t))
    x = values(rng, (1, 2, 7, 9), t)
    m = resize_model({"mode": mode}, t=t, scales=(1, 1, 1.7, 0.6))
    if t in ("float16", "bfloat16"):
        # The oracle in float64 from the same values, rounded once to t.
        m32 = resize_model({"mode": mode}, scales=(1, 1, 1.7, 0.6))
        want = ref(m32, {"x": x.astype(np.float32)}).astype(NP[t])
        tol = 1e-3 if t == "float16" else 8e-3
        check(m, {"x": x}, want, tol, tol * 4, what=t)
    else:
        # onnx.reference evaluates the cubic coefficients in float32: float64
        # results differ from it in the 6th digit there, and an integer
        # result near .5 may round the other way.
        tol = (1e-12 if mode != "cubic" else 2e-5) if t == "float64" else (1 if mode == "cubic" else 0)
        check(m, {"x": x}, ref(m, {"x": x}), 0, tol, what=t)


def nearest_index(n_in, n_out, scale):
    """half_pixel + round_prefer_floor source indices, from the schema text."""
    x = (np.arange(n_out) + 0.5) / float(np.float32(scale)) - 0.5
    fl = np.floor(x)
    idx = np.where(x - fl <= 0.5, fl, fl + 1)
    return np.clip(idx, 0, n_in - 1).astype(int)


def test_nearest_every_type():
    rng = np.random.default_rng(5)
    for t in ("bool", "int8", "int32", "int64", "float64", "float16", "bfloat16"):
        x = values(rng, (2, 3, 5), "float32" if t in ("bfloat16", "float16") else t).astype(NP[t])
        m = resize_model({"mode": "nearest"}, t=t, scales=(1, 1.5, 2.2))
        want = x[:, nearest_index(3, 4, 1.5)][:, :, nearest_index(5, 11, 2.2)]
        check(m, {"x": x}, want, 0, 0, what=t)


@pytest.mark.parametrize("opset", [10, 11, 13, 18])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_older_opsets(mode, opset):
    rng = np.random.default_rng(seed_of("old", mode, opset))
    x = values(rng, (1, 2, 7, 9), "float32")
    # (scales exact in binary: onnxruntime computes coordinates in float32,
    # olc in float64; exact operands keep both on the same side of ties)
    for scales in ((1, 1, 2.0, 3.0), (1, 1, 0.5, 0.75), (1, 1, 1.75, 2.25)):
        if opset == 10:
            m = one_node_model("Resize", [("x", TensorProto.FLOAT, None), ("scales", 0, None)],
                               [("y", TensorProto.FLOAT, None)], {"mode": mode}, opset=10,
                               initializers={"scales": np.asarray(scales, np.float32)})
        else:
            m = resize_model({"mode": mode}, opset=opset, scales=scales, roi=[] if opset < 13 else None)
        check(m, {"x": x}, ort_ref(m, {"x": x}), 1e-5, 1e-5, what=f"opset {opset} scales {scales}")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode):
    rng = np.random.default_rng(seed_of("upsample", mode))
    x = values(rng, (1, 2, 5, 7), "float32")
    scales = [1.0, 1.0, 2.0, 3.0]
    m7 = one_node_model("Upsample", [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT, None)],
                        {"mode": mode, "scales": scales}, opset=7)
    m9 = one_node_model("Upsample", [("x", TensorProto.FLOAT, None), ("s", 0, None)], [("y", TensorProto.FLOAT, None)],
                        {"mode": mode}, opset=9, initializers={"s": np.asarray(scales, np.float32)})
    for m in (m7, m9):
        want = ort_ref(m, {"x": x})
        check(m, {"x": x}, want, 1e-5, 1e-5, what=f"opset {m.opset_import[0].version}")
        if mode == "nearest":
            np.testing.assert_array_equal(want, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))


@pytest.mark.parametrize("at", ["end", "start"])
def test_rows_guarded(at):
    """Every row length around the 8- and 16-lane tiles, the input against an
    inaccessible page; the output of each length checked."""
    rng = np.random.default_rng(seed_of("guard", at))
    for w in list(range(1, 36)) + [47, 48, 49, 63, 64, 65]:
        x = values(rng, (1, 2, 3, w), "float32")
        feeds = {"x": guarded(x, at=at)}
        for attrs, scales in (({"mode": "linear"}, (1, 1, 2.0, 2.0)), ({"mode": "linear"}, (1, 1, 1.0, 0.5)),
                              ({"mode": "cubic"}, (1, 1, 1.5, 1.5)), ({"mode": "nearest"}, (1, 1, 2.0, 2.0))):
            m = resize_model(attrs, scales=scales)
            check(m, feeds, ref(m, {"x": x}), 1e-4, 1e-4, what=f"{attrs} w={w}")


def test_plan_cache_across_shapes():
    """One session, shapes alternating: each run uses the tables of its own shape."""
    m = resize_model({"mode": "linear"}, scales=(1, 1, 2.0, 0.5))
    sess = olc_core.Session(m, strict=True, record_usage=True)
    rng = np.random.default_rng(9)
    for shape in [(1, 2, 5, 8), (1, 2, 7, 6), (1, 2, 5, 8), (2, 1, 3, 10), (1, 2, 7, 6)]:
        x = values(rng, shape, "float32")
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref(m, {"x": x}), rtol=1e-5, atol=1e-5)
    assert K in sess.kernel_usage()


def test_threads():
    rng = np.random.default_rng(13)
    x = values(rng, (2, 32, 33, 35), "float32")
    for mode in ("nearest", "linear", "cubic"):
        m = resize_model({"mode": mode}, scales=(1, 1, 2.0, 1.5))
        want = ref(m, {"x": x})
        res = run_on_every_level(m, {"x": x}, threads=2, expected_kernel=K)
        for outs in res.values():
            np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,scales", [
    ((2, 3, 17, 40), (1, 1, 2.0, 1.0)),    # H only: rows straight from the input
    ((2, 3, 17, 40), (1, 1, 1.0, 2.0)),    # W only
    ((1, 16, 32, 32), (1, 1, 2.0, 2.0)),   # the U-Net's 2x, whole blocks of 16 (threaded)
    ((1, 2, 9, 200), (1, 1, 3.0, 0.3)),    # blocks reading more than 32 sources: the gather path
    ((1, 2, 11, 70), (1, 1, 0.7, 0.8)),    # mild downscale: blocks and a tail
    ((13, 50), (2.5, 1.3)),                # rank 2: one plane
], ids=["h", "w", "2x", "wide", "down", "rank2"])
def test_planar_rows(shape, scales, threads):
    """The fused pass over the last two axes (every row of the W pass kept in
    a ring and reused by the output rows that read it; blocks of 16 outputs
    through permutes) against onnx.reference, at every level and thread count."""
    rng = np.random.default_rng(seed_of("planar", shape, scales))
    x = values(rng, shape, "float32")
    for mode in ("linear", "cubic"):
        m = resize_model({"mode": mode}, scales=scales)
        want = ref(m, {"x": x})
        res = run_on_every_level(m, {"x": guarded(x)}, threads=threads, expected_kernel=K)
        first = None
        for level, outs in res.items():
            np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4, err_msg=f"{mode} {level}")
            if first is None:
                first = outs[0]
            np.testing.assert_array_equal(outs[0], first, err_msg=f"{mode}: {level} differs from the first level")


def test_runtime_scales_input():
    """scales fed at run time (not a constant), sizes absent."""
    x = values(np.random.default_rng(1), (1, 1, 4, 6), "float32")
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    for s in ((1, 1, 2.0, 0.5), (1, 1, 0.5, 3.0)):
        feeds = {"x": x, "s": np.asarray(s, np.float32)}
        check(m, feeds, ref(m, feeds), what=str(s))


@pytest.mark.parametrize("attrs,kw,fragment", [
    ({"mode": "linear"}, {"scales": (1, 1, 2, 2), "sizes": (1, 1, 8, 8)}, "both 'scales' and 'sizes'"),
    ({"mode": "bicubic"}, {"scales": (1, 1, 2, 2)}, "attribute 'mode'"),
    ({"coordinate_transformation_mode": "corner"}, {"scales": (1, 1, 2, 2)}, "coordinate_transformation_mode"),
    ({"nearest_mode": "round"}, {"scales": (1, 1, 2, 2)}, "nearest_mode"),
    ({"keep_aspect_ratio_policy": "fit"}, {"sizes": (1, 1, 8, 8)}, "keep_aspect_ratio_policy"),
    ({}, {"scales": (1, 2, 2)}, "'scales' has 3 values"),
    ({}, {"scales": (1, 1, 0, 2)}, "must be positive"),
    ({"axes": [1, 1]}, {"scales": (2, 2)}, "repeated"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, {"sizes": (1, 1, 8, 8)}, "roi"),
])
def test_errors(attrs, kw, fragment):
    m = resize_model(attrs, **kw)
    with pytest.raises(olc_core.OlcError) as info:
        sess = olc_core.Session(m, strict=True)
        sess.run(None, {"x": np.zeros((1, 1, 4, 4), np.float32)})
    msg = str(info.value)
    assert "node" in msg and fragment in msg, msg


def test_scales_and_sizes_fed_at_run_time():
    """scales and sizes both fed (so not known when the session is built):
    the run fails naming the node before any output exists, and the same
    session then runs a valid feed."""
    node = helper.make_node("Resize", ["x", "", "s", "z"], ["y"], mode="linear", name="up")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [None]),
                                        helper.make_tensor_value_info("z", TensorProto.INT64, [None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    sess = olc_core.Session(m, strict=True)
    x = values(np.random.default_rng(2), (1, 1, 4, 6), "float32")
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"x": x, "s": np.array([1, 1, 2, 2], np.float32), "z": np.array([1, 1, 8, 12], np.int64)})
    msg = str(info.value)
    assert "'up'" in msg and "Resize" in msg and "both 'scales' and 'sizes'" in msg, msg
    feeds = {"x": x, "s": np.array([1, 1, 2, 2], np.float32), "z": np.zeros(0, np.int64)}
    want = ref(resize_model({"mode": "linear"}, scales=(1, 1, 2, 2)), {"x": x})  # onnx.reference refuses empty sizes
    np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5)

