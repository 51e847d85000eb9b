"""BiasSoftmax: the optimized kernel at every SIMD level against the naive
reference, the reference against a float64 numpy formula, and both against
onnxruntime running the same function as Add + Softmax (opset 11 Softmax
flattens the axes from `axis` on, as BiasSoftmax does; onnxruntime's CPU has
no BiasSoftmax kernel). Inner and outer bias broadcasts, every float type,
row lengths with tails, masked (-inf) entries, guard pages, errors."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import LEVELS, NP_TYPE, assert_close, make_model, rand, run_checked, session, to64
from onnx import TensorProto, helper

import olc_core
from olc_core.testing import guarded

OP = "BiasSoftmax"
TYPES = ("float32", "float16", "bfloat16", "float64")
ROW = (1, 7, 768, 4095)

# (data shape, bias shape, axis, is_inner_broadcast)
BROADCASTS = [
    ((2, 3, 5, 11), (2, 1, 1, 11), 3, 1),    # attention mask [B, 1, 1, S] over [B, N, S, S]
    ((2, 3, 5, 11), (1, 3, 5, 11), 3, 0),    # a per-head bias shared by the batch
    ((2, 3, 5, 11), (3, 5, 11), 3, 0),       # the same with the leading 1 left out
    ((2, 3, 5, 11), (5, 11), -1, 0),
    ((2, 3, 5, 11), (2, 3, 5, 11), 3, 1),    # no broadcast
    ((2, 3, 5, 11), (2, 3, 5, 11), 3, 0),
    ((6, 4, 9), (6, 4, 9), 1, 1),            # softmax over the last two axes together
    ((6, 4, 9), (1, 4, 9), 1, 0),
    ((6, 4, 9), (6, 1, 9), 2, 1),
    ((4, 9), (1, 9), 1, 0),
    ((4, 9), (4, 9), 0, 1),                  # one row: the whole tensor
]


def bias_rows(x_shape, b_shape, axis):
    r = len(x_shape)
    a = axis % r
    b = (1,) * (r - len(b_shape)) + tuple(b_shape)
    return a, b


def formula(x, bias, axis):
    """float64 softmax of the sum in the type's arithmetic (float32 for 16-bit types)."""
    a = axis % x.ndim
    wide = np.float64 if x.dtype == np.float64 else np.float32
    v = to64(x.astype(wide) + np.broadcast_to(bias, x.shape).astype(wide))
    flat = v.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1)
    with np.errstate(invalid="ignore"):
        e = np.exp(flat - flat.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)).reshape(x.shape)


def check(t, x, bias, axis, opt, nai):
    ref = formula(x, bias, axis)
    naive_tol = {"float32": (1e-7, 1e-6), "float16": (5e-4, 5e-4), "bfloat16": (4e-3, 4e-3),
                 "float64": (1e-15, 1e-14)}[t]
    assert_close(nai, ref, t, "naive vs float64", tol=naive_tol)
    assert_close(opt, nai, t, "optimized vs naive")


def model(t, axis, inner):
    return make_model(OP, [("x", t), ("bias", t)], ["y"], {"axis": axis, "is_inner_broadcast": inner})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("E", ROW)
@pytest.mark.parametrize("t", TYPES)
def test_rows_match_naive(t, E, level):
    rng = np.random.default_rng(E)
    x = rand(rng, (2, 3, E), t, -8, 8)
    bias = rand(rng, (2, 1, E), t, -4, 4)
    opt = run_checked(model(t, 2, 1), OP, {"x": x, "bias": bias}, level)[0]
    nai = run_checked(model(t, 2, 1), OP, {"x": x, "bias": bias}, level, naive=True)[0]
    assert opt.dtype == NP_TYPE[t] and opt.shape == x.shape
    check(t, x, bias, 2, opt, nai)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("x_shape,b_shape,axis,inner", BROADCASTS)
def test_broadcasts(x_shape, b_shape, axis, inner, level):
    t = "float32"
    rng = np.random.default_rng(len(b_shape) * 7 + axis)
    x = rand(rng, x_shape, t)
    bias = rand(rng, b_shape, t)
    opt = run_checked(model(t, axis, inner), OP, {"x": x, "bias": bias}, level)[0]
    nai = run_checked(model(t, axis, inner), OP, {"x": x, "bias": bias}, level, naive=True)[0]
    check(t, x, bias, axis, opt, nai)


def ort_add_softmax(x, bias, axis):
    import onnxruntime as ort

    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
            np.dtype(np.float64): TensorProto.DOUBLE}[x.dtype]
    nodes = [helper.make_node("Add", ["x", "bias"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=axis)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, None),
                                       helper.make_tensor_value_info("bias", elem, None)],
                          [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 7
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "bias": bias})[0]


@pytest.mark.parametrize("t", ["float32", "float64", "float16"])
@pytest.mark.parametrize("x_shape,b_shape,axis,inner", BROADCASTS[:5] + BROADCASTS[7:9])
def test_against_onnxruntime_add_softmax(x_shape, b_shape, axis, inner, t):
    rng = np.random.default_rng(3)
    x = rand(rng, x_shape, t)
    bias = rand(rng, b_shape, t)
    opt = run_checked(model(t, axis, inner), OP, {"x": x, "bias": bias}, LEVELS[-1])[0]
    ref = ort_add_softmax(x, bias, axis)
    # onnxruntime rounds x + bias to float16 before its softmax; olc keeps float32
    tol = {"float32": (1e-6, 1e-5), "float64": (1e-15, 1e-13), "float16": (2e-3, 2e-3)}[t]
    assert_close(opt, ref, t, "vs onnxruntime Add + Softmax", tol=tol)


@pytest.mark.parametrize("level", LEVELS)
def test_masked_and_special_rows(level):
    t = "float32"
    x = np.array([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0],
                  [1e30, -1e30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                  [-100.0] * 17,
                  [0.0] * 16 + [np.nan]], np.float32)
    mask = np.zeros((4, 17), np.float32)
    mask[0, 5:] = -np.inf          # padding masked out
    mask[2, :] = -np.inf           # every entry masked: 0 / 0
    f = {"x": x, "bias": mask}
    opt = run_checked(model(t, 1, 1), OP, f, level)[0]
    nai = run_checked(model(t, 1, 1), OP, f, level, naive=True)[0]
    assert np.all(opt[0, 5:] == 0) and abs(opt[0].sum() - 1) < 1e-6
    assert opt[1, 0] == 1 and np.all(opt[1, 1:] == 0)
    assert np.all(np.isnan(opt[2])) and np.all(np.isnan(nai[2]))
    assert np.all(np.isnan(opt[3])) and np.all(np.isnan(nai[3]))
    assert_close(opt[:2], nai[:2], t, "special rows")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", TYPES)
def test_guard_pages(t, at, level):
    rng = np.random.default_rng(6)
    x = rand(rng, (3, 2, 21), t)
    bias = rand(rng, (3, 1, 21), t)
    want = run_checked(model(t, 2, 1), OP, {"x": x, "bias": bias}, level, naive=True)[0]
    got = run_checked(model(t, 2, 1), OP, {"x": guarded(x, at=at), "bias": guarded(bias, at=at)}, level)[0]
    assert_close(got, want, t, "guarded")


@pytest.mark.parametrize("threads", [2, 3])
def test_threads(threads):
    rng = np.random.default_rng(8)
    x = rand(rng, (2, 12, 128, 128), "float32")
    bias = rand(rng, (2, 1, 1, 128), "float32")
    f = {"x": x, "bias": bias}
    one = run_checked(model("float32", 3, 1), OP, f, LEVELS[-1])[0]
    many = run_checked(model("float32", 3, 1), OP, f, LEVELS[-1], threads=threads)[0]
    np.testing.assert_array_equal(one, many)


ERRORS = [
    ((2, 3, 5), (2, 3, 4), 2, 1, r"bias has shape \[2, 3, 4\]; its dimensions from axis 2 on must equal those of "
                                 r"data \[2, 3, 5\]"),
    ((2, 3, 5), (1, 3, 5), 2, 1, r"bias has shape \[1, 3, 5\]; with is_inner_broadcast=1 its dimensions before axis 2 must be those of data"),
    ((2, 3, 5), (2, 1, 5), 2, 0, r"bias has shape \[2, 1, 5\]; with is_inner_broadcast=0 its dimensions before axis 2 must be 1 up to some axis"),
    ((2, 3, 5), (1, 2, 3, 5), 2, 1, r"bias has shape \[1, 2, 3, 5\], of a higher rank than data"),
    ((2, 3, 5), (2, 3, 5), 3, 1, r"axis 3 is out of range for data of rank 3"),
    # numpy would broadcast these; the operator's row sharing cannot express them
    ((2, 3, 5, 11), (2, 1, 5, 11), 3, 1, r".*with is_inner_broadcast=1 its dimensions before axis 3"),
    ((6, 4, 9), (6, 1, 1), 2, 1, r".*its dimensions from axis 2 on must equal those of data \[6, 4, 9\]"),
    ((2, 3, 5), (2, 3, 5), -4, 1, r"axis -4 is out of range"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("x_shape,b_shape,axis,inner,pattern", ERRORS)
def test_errors_name_the_node(x_shape, b_shape, axis, inner, pattern, naive):
    rng = np.random.default_rng(0)
    s = session(model("float32", axis, inner), LEVELS[-1], naive)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(BiasSoftmax\): " + pattern):
        s.run(None, {"x": rand(rng, x_shape, "float32"), "bias": rand(rng, b_shape, "float32")})


def test_attribute_errors():
    m = make_model(OP, [("x", "float32"), ("bias", "float32")], ["y"], {"axis": 1})
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*'is_inner_broadcast' is required"):
        olc_core.Session(m, strict=True)
    m = make_model(OP, [("x", "float32"), ("bias", "float32")], ["y"], {"is_inner_broadcast": 2})
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*'is_inner_broadcast' must be 0 or 1"):
        olc_core.Session(m, strict=True)
