"""The matmul-add graph pass (olc_matmul.matmul_passes) and its MatMulAdd
kernel: MatMul with a constant 2-D B and the Add of a constant [N] bias,
the bias added as the GEMM stores its tiles.

Every fused result is checked against a float64 numpy statement of the two
original nodes and against the same model run by olc without fusion; at
every SIMD level on 1 and 2 threads, for A of rank 1, 2 and 3, row, column
and K tails, empty M and K = 0, both operand orders of the Add, the four
float types, prepacked B over several panels and K blocks. The negative
cases check that the pass leaves alone what it must not fuse (and that the
results stay right), and a bias of the wrong shape given to the kernel
directly is an error naming the node before any output is written."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import EPS, LEVELS, NP, ONNX, OTHERS_STRICT, OUT_EPS
from onnx import TensorProto, helper, numpy_helper

import olc_core

FUSED = "olc_matmul::MatMulAdd"


def linear_model(a_shape, K, N, t, rng, *, bias_first=False, bias_shape=None, const_w=True, const_b=True,
                 extra_reader=False, product_output=False):
    w = rng.standard_normal((K, N)).astype(NP[t])
    b = rng.standard_normal(bias_shape if bias_shape is not None else (N,)).astype(NP[t])
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p"], name="mm"),
             helper.make_node("Add", ["b", "p"] if bias_first else ["p", "b"], ["y"], name="add")]
    outputs = [helper.make_tensor_value_info("y", ONNX[t], None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["p"], ["q"], name="neg"))
        outputs.append(helper.make_tensor_value_info("q", ONNX[t], None))
    if product_output:
        outputs.append(helper.make_tensor_value_info("p", ONNX[t], None))
    inputs = [helper.make_tensor_value_info("a", ONNX[t], list(a_shape))]
    inits = []
    for name, value, const in (("w", w, const_w), ("b", b, const_b)):
        if const:
            inits.append(numpy_helper.from_array(value, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, ONNX[t], list(value.shape)))
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m, w, b


def reference(a, w, b):
    """float64 MatMul then Add, and the error bound of the fused float result."""
    A, W, B = (x.astype(np.float64) for x in (a, w, b))
    y = A @ W + B
    prod = np.abs(A) @ np.abs(W) + np.abs(B)
    return y, prod


def check(y, ref, prod, K, t, what, unfused=False):
    y64 = np.asarray(y).astype(np.float64)
    # The product rounds once per K step (float32 accumulation for the
    # 16-bit types), the bias add once more, the result once to t. Unfused,
    # the product is also rounded to t before the Add.
    bound = OUT_EPS[t] * (np.abs(ref) + (prod if unfused else 0)) + 2.0 * (K + 3) * EPS[t] * prod + 1e-300
    assert y64.shape == ref.shape, what
    bad = np.abs(y64 - ref) > bound
    assert not bad.any(), f"{what}: max err {np.abs(y64 - ref).max()} at {np.argwhere(bad)[0]}"


def session(m, level, threads, fusion=True):
    with olc_core.simd_cap(level):
        return olc_core.Session(m, threads=threads, strict=True, record_usage=True, fusion=fusion)


SHAPES = [  # (A shape, K, N)
    ((37, 150), 150, 200),     # row tail of the 12-row tile, K blocks, column tail
    ((2, 64, 384), 384, 384),  # rank 3, the batch folded into M (an encoder's projection)
    ((5,), 5, 33),             # rank 1 A: one row
    ((3, 7), 7, 1),            # one output column
    ((0, 9), 9, 16),           # no rows
    ((4, 0), 0, 17),           # K = 0: the bias alone
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", ["float32", "float64", "float16", "bfloat16"])
def test_fused_matches_float64_and_unfused(t, level, threads):
    rng = np.random.default_rng(21)
    for (a_shape, K, N), bias_first in zip(SHAPES, [False, True, False, True, False, True]):
        m, w, b = linear_model(a_shape, K, N, t, rng, bias_first=bias_first)
        s = session(m, level, threads)
        plan = {e.node_name: e for e in s.kernel_plan()}
        fused = [e for e in plan.values() if e.kernel == FUSED]
        assert len(fused) == 1 and {n for n, _ in fused[0].fused_nodes} == {"mm", "add"}, plan
        assert fused[0].graph_pass == "matmul-add"
        a = rng.standard_normal(a_shape).astype(NP[t])
        y = s.run(None, {"a": a})[0]
        ref, prod = reference(a, w, b)
        what = f"{t} {level} t{threads} {a_shape}x[{K},{N}]"
        check(y, ref, prod, K, t, what)
        assert y.dtype == NP[t]
        if a.size and K:
            assert "prepacked-B" in s.kernel_usage_details()[0], what
        # The unfused nodes (olc's MatMul and Add, or the fallback's Add)
        # agree within the same bound.
        u = olc_core.Session(m, threads=threads, fusion=False)
        assert not any(e.kernel == FUSED for e in u.kernel_plan())
        check(u.run(None, {"a": a})[0], ref, prod, K, t, what + " unfused", unfused=True)


def test_pass_leaves_alone():
    """No rewrite where the pass must not take the nodes; the results stay right."""
    rng = np.random.default_rng(22)
    t = "float32"
    cases = {
        "bias [1, N]": {"bias_shape": (1, 16)},
        "bias [M, N]": {"bias_shape": (6, 16)},
        "bias [1]": {"bias_shape": (1,)},
        "bias fed": {"const_b": False},
        "B fed": {"const_w": False},
        "product read twice": {"extra_reader": True},
        "product a graph output": {"product_output": True},
    }
    for label, kw in cases.items():
        m, w, b = linear_model((6, 10), 10, 16, t, rng, **kw)
        s = olc_core.Session(m, strict=OTHERS_STRICT)
        assert not any(e.kernel == FUSED for e in s.kernel_plan()), label
        feeds = {"a": rng.standard_normal((6, 10)).astype(np.float32)}
        if not kw.get("const_b", True):
            feeds["b"] = b
        if not kw.get("const_w", True):
            feeds["w"] = w
        y = s.run(None, feeds)[0]
        ref, prod = reference(feeds["a"], w, b)
        check(y, ref, prod, 10, t, label)


def test_mixed_types_left_alone():
    """A bias of another float type makes the Add invalid ONNX; a float64
    MatMul feeding a float64 Add is taken like float32 (covered above). An
    integer MatMul is not the pass's business."""
    rng = np.random.default_rng(23)
    w = rng.integers(-3, 3, (4, 5)).astype(np.int32)
    b = rng.integers(-3, 3, (5,)).astype(np.int32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["p"], name="mm"), helper.make_node("Add", ["p", "b"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("a", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    s = olc_core.Session(m)
    assert not any(e.kernel == FUSED for e in s.kernel_plan())
    a = rng.integers(-3, 3, (3, 4)).astype(np.int32)
    np.testing.assert_array_equal(s.run(None, {"a": a})[0], a @ w + b)


def direct_model():
    g = helper.make_graph(
        [helper.make_node("MatMulAdd", ["a", "w", "b"], ["y"], name="mma", domain="olc.fused")], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("olc.fused", 1)])
    m.ir_version = 10
    return m


def test_bad_bias_is_an_error_naming_the_node():
    s = olc_core.Session(direct_model(), strict=True)
    a = np.ones((3, 4), np.float32)
    for w, b in [(np.ones((4, 5), np.float32), np.ones((4,), np.float32)),     # wrong length
                 (np.ones((4, 5), np.float32), np.ones((1, 5), np.float32)),   # not 1-D
                 (np.ones((4,), np.float32), np.ones((1,), np.float32))]:      # B of rank 1
        with pytest.raises(olc_core.OlcError, match=r"mma.*bias of shape"):
            s.run(None, {"a": a, "w": w, "b": b})
    # A good call on the same session: dynamic B, bias added.
    w = np.arange(20, dtype=np.float32).reshape(4, 5)
    b = np.arange(5, dtype=np.float32)
    np.testing.assert_allclose(s.run(None, {"a": a, "w": w, "b": b})[0], a @ w + b, rtol=1e-6)
