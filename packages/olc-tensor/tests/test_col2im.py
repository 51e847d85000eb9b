"""Col2Im (18) and MaxUnpool (9, 11, 22).

Col2Im against onnx.reference (float32 bit for bit: each image element sums
its contributions in the same order) and onnxruntime (2-D float32), at 1 to
3 spatial axes with every attribute, and the integer types against a numpy
fold that wraps. MaxUnpool against onnx.reference and onnxruntime on
MaxPool's own outputs. Every case runs on a strict session at every SIMD
level this CPU has and checks that the olc kernel ran.
"""

from __future__ import annotations

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
        "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
        "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
        "uint64": TensorProto.UINT64}
NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
      "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
      "uint64": np.uint64}


def ort_run(m, feeds):
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def levels(m, feeds, kernel, threads=1):
    res = run_on_every_level(m, feeds, threads=threads, expected_kernel=kernel)
    outs = [r[0] for r in res.values()]
    for level, o in zip(res, outs):
        np.testing.assert_array_equal(o.view(np.uint8), outs[0].view(np.uint8), err_msg=f"{level} differs")
    return outs[0]


# ------------------------------------------------------------------- Col2Im

def col2im_model(image, block, attrs, t="float32", constant=True):
    inits = {"image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)} if constant else {}
    return one_node_model("Col2Im", [("x", CODE[t], None), ("image_shape", TensorProto.INT64, None),
                                     ("block_shape", TensorProto.INT64, None)], [("y", CODE[t], None)], attrs,
                          opset=18, initializers=inits)


def n_blocks(image, block, attrs):
    r = len(image)
    d = attrs.get("dilations", [1] * r)
    s = attrs.get("strides", [1] * r)
    p = attrs.get("pads", [0] * 2 * r)
    return [(image[i] + p[i] + p[i + r] - d[i] * (block[i] - 1) - 1) // s[i] + 1 for i in range(r)]


def np_col2im(x, image, block, attrs):
    """A plain fold: every (kernel offset, block) value added at its image position."""
    r = len(image)
    d = attrs.get("dilations", [1] * r)
    s = attrs.get("strides", [1] * r)
    p = attrs.get("pads", [0] * 2 * r)
    nb = n_blocks(image, block, attrs)
    k = int(np.prod(block))
    n, ck, _ = x.shape
    c = ck // k
    y = np.zeros((n, c, *image), x.dtype)
    cols = x.reshape(n, c, k, *nb)
    with np.errstate(over="ignore"):
        for ko in np.ndindex(*block):
            kf = int(np.ravel_multi_index(ko, block))
            for bo in np.ndindex(*nb):
                pos = [bo[i] * s[i] - p[i] + ko[i] * d[i] for i in range(r)]
                if all(0 <= pos[i] < image[i] for i in range(r)):
                    y[(slice(None), slice(None), *pos)] += cols[(slice(None), slice(None), kf, *bo)]
    return y


CASES = [
    ((5, 5), (1, 5), {}),
    ((7, 9), (3, 5), {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    ((6, 7), (2, 2), {"strides": [3, 3], "dilations": [2, 2]}),
    ((13, 40), (3, 3), {"pads": [1, 1, 1, 1]}),
    ((11,), (3,), {"strides": [2], "pads": [1, 1]}),
    ((4, 5, 6), (2, 3, 2), {"strides": [1, 2, 2]}),
    ((3, 4, 5), (2, 2, 2), {"pads": [1, 0, 1, 0, 1, 1], "dilations": [1, 2, 1]}),
]


@pytest.mark.parametrize("image,block,attrs", CASES, ids=lambda v: str(v).replace(" ", ""))
def test_col2im(image, block, attrs):
    rng = np.random.default_rng(len(image) * 100 + sum(block))
    k, ll = int(np.prod(block)), int(np.prod(n_blocks(image, block, attrs)))
    x = rng.standard_normal((2, 3 * k, ll)).astype(np.float32)
    m = col2im_model(image, block, attrs)
    got = levels(m, {"x": x}, "olc_tensor::Col2Im")
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": x})[0])
    np.testing.assert_allclose(got, np_col2im(x.astype(np.float64), image, block, attrs), rtol=1e-5, atol=1e-5)
    if len(image) == 2:
        np.testing.assert_allclose(got, ort_run(m, {"x": x}), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("t", ["float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "uint64"])
def test_col2im_types(t):
    image, block, attrs = (7, 9), (3, 5), {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}
    rng = np.random.default_rng(7)
    k, ll = int(np.prod(block)), int(np.prod(n_blocks(image, block, attrs)))
    if t.startswith(("int", "uint")):
        info = np.iinfo(NP[t])
        x = rng.integers(info.min, info.max, (2, 2 * k, ll), endpoint=True, dtype=NP[t])  # sums wrap
    else:
        x = rng.standard_normal((2, 2 * k, ll)).astype(NP[t])
    got = levels(col2im_model(image, block, attrs, t), {"x": x}, "olc_tensor::Col2Im")
    assert got.dtype == NP[t]
    if t.startswith(("int", "uint")):
        np.testing.assert_array_equal(got, np_col2im(x, image, block, attrs))
    else:
        # float16 / bfloat16 sum in float32 and round once: within one rounding.
        want = np_col2im(x.astype(np.float64), image, block, attrs)
        tol = {"float64": 1e-12, "float16": 1e-3, "bfloat16": 8e-3}[t]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 8)


@pytest.mark.parametrize("at", ["end", "start"])
def test_col2im_guarded(at):
    """The input against an inaccessible page; image widths around the vector tiles."""
    rng = np.random.default_rng(41)
    for w in (1, 3, 7, 8, 9, 15, 16, 17, 31, 33):
        for attrs in ({}, {"pads": [0, 1, 0, 1]}, {"strides": [1, 2]}):
            block = (2, min(3, w))
            if n_blocks((4, w), block, attrs)[1] < 1:
                continue
            k, ll = int(np.prod(block)), int(np.prod(n_blocks((4, w), block, attrs)))
            x = rng.standard_normal((1, 2 * k, ll)).astype(np.float32)
            m = col2im_model((4, w), block, attrs)
            got = levels(m, {"x": guarded(x, at=at)}, "olc_tensor::Col2Im")
            np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_col2im_shapes_at_run_time_and_threads():
    """image_shape and block_shape fed (not constants); two threads."""
    rng = np.random.default_rng(43)
    m = col2im_model((0,), (0,), {"pads": [1, 1, 1, 1]}, constant=False)
    for image, block in (((20, 24), (3, 3)), ((9, 10), (2, 4))):
        k, ll = int(np.prod(block)), int(np.prod(n_blocks(image, block, {"pads": [1, 1, 1, 1]})))
        x = rng.standard_normal((2, 16 * k, ll)).astype(np.float32)
        feeds = {"x": x, "image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)}
        got = levels(m, feeds, "olc_tensor::Col2Im", threads=2)
        np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, feeds)[0])


@pytest.mark.parametrize("x_shape,image,block,attrs,fragment", [
    ((1, 10, 25), (5, 5), (2, 2), {}, "not a multiple of prod(block_shape) = 4"),
    ((1, 4, 15), (5, 5), (2, 2), {}, "must be the number of blocks, 16"),
    ((1, 4, 16), (5, 5), (2, 2), {"strides": [1]}, "must have 2, 2 and 4 values"),
    ((1, 4, 16), (5, 5), (2, 2, 2), {}, "must have the same, non-zero length"),
    ((1, 49, 1), (5, 5), (7, 7), {}, "larger than the padded image"),
    ((4, 16), (5, 5), (2, 2), {}, "input must be 3-D"),
])
def test_col2im_errors(x_shape, image, block, attrs, fragment):
    m = col2im_model(image, block, attrs, constant=False)
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"x": np.zeros(x_shape, np.float32), "image_shape": np.array(image, np.int64),
                        "block_shape": np.array(block, np.int64)})
    msg = str(info.value)
    assert "node" in msg and "Col2Im" in msg and fragment in msg, msg


# ---------------------------------------------------------------- MaxUnpool

def max_pool_outputs(x, attrs):
    m = one_node_model("MaxPool", [("x", TensorProto.FLOAT, None)],
                       [("y", TensorProto.FLOAT, None), ("i", TensorProto.INT64, None)], attrs, opset=12)
    return ReferenceEvaluator(m).run(None, {"x": x})


def unpool_model(attrs, t="float32", opset=11, output_shape=None):
    ins = [("x", CODE[t], None), ("i", TensorProto.INT64, None)]
    inits = {}
    if output_shape is not None:
        ins.append(("s", TensorProto.INT64, None))
        inits["s"] = np.array(output_shape, np.int64)
    return one_node_model("MaxUnpool", ins, [("y", CODE[t], None)], attrs, opset=opset, initializers=inits)


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 9, 8), {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}),
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 2, 11), {"kernel_shape": [3], "strides": [2]}),
    ((1, 2, 5, 6, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}),
    ((1, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [1, 1]}),  # overlapping windows: duplicate indices
])
@pytest.mark.parametrize("opset", [9, 11, 22])
def test_max_unpool(shape, attrs, opset):
    rng = np.random.default_rng(sum(shape) + opset)
    y, i = max_pool_outputs(rng.standard_normal(shape).astype(np.float32), attrs)
    m = unpool_model(attrs, opset=opset)
    got = levels(m, {"x": y, "i": i}, "olc_tensor::MaxUnpool")
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": y, "i": i})[0])
    if opset < 22:
        np.testing.assert_array_equal(got, ort_run(m, {"x": y, "i": i}))


def test_max_unpool_output_shape():
    """A larger output_shape: the unpooled block at the start of each axis
    (onnx.reference and the node suite); the inferred one as onnxruntime."""
    rng = np.random.default_rng(3)
    attrs = {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}
    y, i = max_pool_outputs(rng.standard_normal((2, 3, 9, 8)).astype(np.float32), attrs)
    for out in ((2, 3, 9, 8), (2, 3, 10, 9), (2, 3, 12, 11)):
        m = unpool_model(attrs, output_shape=out)
        got = levels(m, {"x": y, "i": i}, "olc_tensor::MaxUnpool")
        assert got.shape == out
        np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": y, "i": i})[0])
        if out == (2, 3, 9, 8):
            np.testing.assert_array_equal(got, ort_run(m, {"x": y, "i": i}))


@pytest.mark.parametrize("t,opset", [("float64", 11), ("float16", 11), ("bfloat16", 22)])
def test_max_unpool_types(t, opset):
    rng = np.random.default_rng(5)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    y, i = max_pool_outputs(rng.standard_normal((2, 2, 6, 6)).astype(np.float32), attrs)
    m = unpool_model(attrs, t, opset)
    got = levels(m, {"x": y.astype(NP[t]), "i": i}, "olc_tensor::MaxUnpool")
    want = ReferenceEvaluator(unpool_model(attrs)).run(None, {"x": y, "i": i})[0].astype(NP[t])
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_max_unpool_cross_plane_indices_and_threads():
    """Indices that point into another plane run serially, in X's order."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 8, 4, 4)).astype(np.float32)
    total = 2 * 8 * 8 * 8
    i = rng.integers(0, total, x.shape).astype(np.int64)
    m = unpool_model({"kernel_shape": [2, 2], "strides": [2, 2]})
    got = levels(m, {"x": x, "i": i}, "olc_tensor::MaxUnpool", threads=2)
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": x, "i": i})[0])
    y, i2 = max_pool_outputs(rng.standard_normal((2, 64, 32, 32)).astype(np.float32),
                             {"kernel_shape": [2, 2], "strides": [2, 2]})
    got = levels(m, {"x": y, "i": i2}, "olc_tensor::MaxUnpool", threads=2)
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": y, "i": i2})[0])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("bad", [-3, 2 * 64 * 16 * 16])
def test_max_unpool_bad_index_in_a_late_plane(threads, bad):
    """Planes are checked as they are scattered: an index outside the
    unpooled shape in the last plane, after the earlier planes' scatter,
    still fails the run with the index named, and the next good run is right."""
    rng = np.random.default_rng(21)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    y, i = max_pool_outputs(rng.standard_normal((2, 64, 16, 16)).astype(np.float32), attrs)
    m = unpool_model(attrs)
    sess = olc_core.Session(m, strict=True, threads=threads)
    bad_i = i.copy()
    bad_i[1, 63, 7, 7] = bad
    flat = bad_i.size - 1
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"x": y, "i": bad_i})
    msg = str(info.value)
    assert "MaxUnpool" in msg and f"I[{flat}] = {bad} is outside [0, {2 * 64 * 16 * 16})" in msg, msg
    np.testing.assert_array_equal(sess.run(None, {"x": y, "i": i})[0], ReferenceEvaluator(m).run(None, {"x": y, "i": i})[0])


@pytest.mark.parametrize("at", ["end", "start"])
def test_max_unpool_guarded(at):
    rng = np.random.default_rng(13)
    for w in (1, 2, 7, 16, 17):
        attrs = {"kernel_shape": [1, 2], "strides": [1, 2]}
        y, i = max_pool_outputs(rng.standard_normal((1, 2, 3, 2 * w)).astype(np.float32), attrs)
        m = unpool_model(attrs)
        got = levels(m, {"x": guarded(y, at=at), "i": guarded(i, at=at)}, "olc_tensor::MaxUnpool")
        np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"x": y, "i": i})[0])


@pytest.mark.parametrize("i,out,fragment", [
    (np.array([[[[0, 1], [2, 16]]]]), None, "I[3] = 16 is outside [0, 16)"),
    (np.array([[[[0, 1], [2, -1]]]]), None, "I[3] = -1 is outside [0, 16)"),
    (np.array([[[0, 1, 2, 3]]]), None, "it must have X's shape"),
    (np.array([[[[0, 1], [2, 3]]]]), (1, 1, 3, 4), "smaller than the unpooled shape"),
    (np.array([[[[0, 1], [2, 3]]]]), (1, 2, 4, 4), "must keep X's N and C"),
    (np.array([[[[0, 1], [2, 3]]]]), (4, 4), "output_shape has 2 values"),
])
def test_max_unpool_errors(i, out, fragment):
    m = unpool_model({"kernel_shape": [2, 2], "strides": [2, 2]}, output_shape=None)
    feeds = {"x": np.ones((1, 1, 2, 2), np.float32), "i": i.astype(np.int64)}
    if out is not None:
        m = one_node_model("MaxUnpool", [("x", TensorProto.FLOAT, None), ("i", TensorProto.INT64, None),
                                         ("s", TensorProto.INT64, None)], [("y", TensorProto.FLOAT, None)],
                           {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
        feeds["s"] = np.array(out, np.int64)
    sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, feeds)
    msg = str(info.value)
    assert "node" in msg and "MaxUnpool" in msg and fragment in msg, msg
