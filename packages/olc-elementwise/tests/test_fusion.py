"""Elementwise fusion: the pass, the ElementwisePlan kernel and the plan.

Oracles: ``onnx.reference`` on the unfused graph (float32), numpy in
float64 rounded once (bfloat16), and olc itself with ``fusion=False`` (a
different code path: one kernel, or the fallback, per node). float32
fusion keeps the unfused evaluation order and rounds each step to float32
as the unfused nodes do, so it must match ``fusion=False`` bit for bit at
the same SIMD level.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core import tuning
from olc_core.testing import guarded
from olc_elementwise import fusion

BF16 = np.dtype(ml_dtypes.bfloat16)
LEVELS = [lvl for lvl in olc_core.SIMD_LEVELS if olc_core.SIMD_LEVELS.index(lvl)
          <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]
THREADS = [1, 2]
KERNEL = fusion.KERNEL_NAME
ONNX_T = {np.dtype(np.float32): TensorProto.FLOAT, BF16: TensorProto.BFLOAT16, np.dtype(np.float64): TensorProto.DOUBLE}


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, ONNX_T[np.dtype(dtype)], shape)


def model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def swiglu_model(dtype, shape):
    nodes = [
        helper.make_node("Sigmoid", ["gate"], ["sg"], name="sigmoid"),
        helper.make_node("Mul", ["gate", "sg"], ["silu"], name="silu"),
        helper.make_node("Mul", ["silu", "up"], ["y"], name="gated"),
    ]
    return model(nodes, [vi("gate", dtype, shape), vi("up", dtype, shape)], [vi("y", dtype, shape)])


def scores_model(h, q, k, scale=0.125):
    nodes = [
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
        helper.make_node("Add", ["scaled", "mask"], ["y"], name="mask_add"),
    ]
    init = [numpy_helper.from_array(np.array(scale, np.float32), "scale")]
    return model(nodes, [vi("scores", np.float32, [1, h, q, k]), vi("mask", np.float32, [1, 1, q, k])],
                 [vi("y", np.float32, [1, h, q, k])], init)


def make_session(m, level, threads=1, **kw):
    with olc_core.simd_cap(level):
        return olc_core.Session(m, threads=threads, record_usage=True, **kw)


def assert_fused(session, originals):
    plan = session.kernel_plan()
    fused = [e for e in plan if e.fused_nodes]
    assert len(fused) == 1, plan
    assert fused[0].kernel == KERNEL and fused[0].native
    assert [n for n, _ in fused[0].fused_nodes] == originals
    assert fused[0].graph_pass == fusion.PASS_NAME


def rng_for(*key):
    return np.random.default_rng(abs(hash(key)) % 2**32)


# ------------------------------------------------------------ the patterns


@pytest.fixture(params=[1, 0], ids=["one-pass", "tiles"])
def specialized(request):
    """The patterns' one-pass loops (1, the default) or the generic tile steps (0)."""
    for lvl in LEVELS:
        for t in ("float32", "bfloat16"):
            tuning.set("olc_elementwise", "ElementwisePlan", "specialized", request.param, implementation=lvl, dtype=t)
    yield request.param
    for lvl in LEVELS:
        for t in ("float32", "bfloat16"):
            tuning.reset("olc_elementwise", "ElementwisePlan", "specialized", implementation=lvl, dtype=t)


SWIGLU_SHAPES = [(1, 1, 3072), (1, 32, 3072), (1, 3, 1000), (1, 1, 9728)]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", SWIGLU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_swiglu_float32(shape, level, threads, specialized):
    m = swiglu_model(np.float32, list(shape))
    rng = rng_for("swiglu", shape)
    feeds = {"gate": (rng.standard_normal(shape) * 4).astype(np.float32),
             "up": rng.standard_normal(shape).astype(np.float32)}
    s = make_session(m, level, threads)
    assert_fused(s, ["sigmoid", "silu", "gated"])
    (y,) = s.run(None, feeds)
    assert s.kernel_usage() == [KERNEL]
    assert s.kernel_usage_details() == [f"{KERNEL}[{level}]"]
    (unfused,) = make_session(m, level, threads, fusion=False).run(None, feeds)
    np.testing.assert_array_equal(y, unfused)
    (ref,) = ReferenceEvaluator(m).run(None, feeds)
    # The family's Sigmoid is within 4 ulp of exact; two exact products follow.
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-30)


def bf16_oracle(gate, up):
    g = gate.astype(np.float64)
    return (g / (1.0 + np.exp(-g)) * up.astype(np.float64)).astype(np.float32).astype(BF16)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", [(1, 1, 3072), (1, 32, 3072), (1, 5, 77)], ids=lambda s: "x".join(map(str, s)))
def test_swiglu_bfloat16(shape, level, threads, specialized):
    m = swiglu_model(BF16, list(shape))
    rng = rng_for("swiglu-bf16", shape)
    feeds = {"gate": (rng.standard_normal(shape) * 4).astype(BF16), "up": rng.standard_normal(shape).astype(BF16)}
    s = make_session(m, level, threads)
    assert_fused(s, ["sigmoid", "silu", "gated"])
    (y,) = s.run(None, feeds)
    assert y.dtype == BF16 and y.shape == shape
    assert s.kernel_usage() == [KERNEL]
    # Intermediates stay in float32 and the result rounds once: within half
    # a bfloat16 ulp (u = 2^-8 relative) of the exact value, as is the
    # exact value rounded once; so the two are within 2u.
    exact = bf16_oracle(feeds["gate"], feeds["up"]).astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), exact, rtol=2.1 * 2.0**-8, atol=1e-37)
    # The unfused chain also rounds Sigmoid and the first product to
    # bfloat16 (unit roundoff u = 2^-8 each): four roundings apart at most,
    # 4u relative, plus second-order terms (docs/fusion.md).
    (unfused,) = make_session(m, level, threads, fusion=False).run(None, feeds)
    np.testing.assert_allclose(y.astype(np.float32), unfused.astype(np.float32), rtol=4.1 * 2.0**-8, atol=1e-37)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("level", LEVELS)
def test_swiglu_one_pass_matches_tile_steps(level, dtype):
    """The one-pass SwiGLU loops give the bits of the generic tile steps (every tail length)."""
    if level == "scalar":
        pytest.skip("the scalar level has no one-pass SwiGLU loop (both runs would take the tile steps)")
    rng = rng_for("one-pass", level, str(dtype))
    for n in (1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 1000):
        m = swiglu_model(dtype, [1, 1, n])
        feeds = {"gate": (rng.standard_normal((1, 1, n)) * 6).astype(dtype),
                 "up": rng.standard_normal((1, 1, n)).astype(dtype)}
        out = {}
        for flag in (1, 0):
            tuning.set("olc_elementwise", "ElementwisePlan", "specialized", flag, implementation=level,
                       dtype="float32" if dtype is np.float32 else "bfloat16")
            try:
                (out[flag],) = make_session(m, level).run(None, feeds)
            finally:
                tuning.reset("olc_elementwise", "ElementwisePlan", "specialized", implementation=level,
                             dtype="float32" if dtype is np.float32 else "bfloat16")
        np.testing.assert_array_equal(out[1].view(np.uint16 if dtype is BF16 else np.uint32),
                                      out[0].view(np.uint16 if dtype is BF16 else np.uint32), err_msg=f"n={n}")


SCORES_SHAPES = [(2, 1, 128), (4, 32, 1024), (1, 3, 513), (3, 2, 17)]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("hqk", SCORES_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_scaled_masked_scores(hqk, level, threads, specialized):
    h, q, k = hqk
    m = scores_model(h, q, k)
    rng = rng_for("scores", hqk)
    mask = np.where(rng.random((1, 1, q, k)) < 0.2, np.float32(-np.inf), np.float32(0)).astype(np.float32)
    feeds = {"scores": (rng.standard_normal((1, h, q, k)) * 8).astype(np.float32), "mask": mask}
    s = make_session(m, level, threads)
    assert_fused(s, ["scale_mul", "mask_add"])
    (entry,) = [e for e in s.kernel_plan() if e.fused_nodes]
    assert entry.fused_nodes == (("scale_mul", "Mul"), ("mask_add", "Add"))
    (y,) = s.run(None, feeds)
    assert s.kernel_usage() == [KERNEL]
    (ref,) = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_array_equal(y, ref)  # two IEEE operations, same order
    (unfused,) = make_session(m, level, threads, fusion=False).run(None, feeds)
    np.testing.assert_array_equal(y, unfused)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("level", LEVELS)
def test_scaled_masked_scores_streaming(level, threads):
    """Runs that read 12 MiB and more take the non-temporal variant of the
    one-pass loop (split runs too, once they read stream_parallel_min_bytes,
    or read and write stream_parallel_min_footprint): the same bits, rows of
    4,099 elements so every row starts off a 64-byte line."""
    h, q, k = 12, 65, 4099  # 3.2M elements: about 13.9 MB read, 26.7 MB in all
    m = scores_model(h, q, k)
    rng = rng_for("stream", level, threads)
    mask = np.where(rng.random((1, 1, q, k)) < 0.2, np.float32(-np.inf), np.float32(0)).astype(np.float32)
    feeds = {"scores": (rng.standard_normal((1, h, q, k)) * 8).astype(np.float32), "mask": mask}
    ref = (feeds["scores"] * np.float32(0.125)) + mask
    cases = ((24 << 20, 0, False), (1, 0, True), (24 << 20, 16 << 20, True), (24 << 20, 32 << 20, False))
    for parallel_min, footprint_min, split_streams in cases:
        for name, value in (("stream_parallel_min_bytes", parallel_min),
                            ("stream_parallel_min_footprint", footprint_min)):
            tuning.set("olc_elementwise", "ElementwisePlan", name, value, implementation=level, dtype="float32")
        try:
            s = make_session(m, level, threads)
            (y,) = s.run(None, feeds)
            np.testing.assert_array_equal(y, ref)
            streams = level != "scalar" and (threads == 1 or split_streams)
            assert ("stream" in s.kernel_usage_details()[-1]) == streams, s.kernel_usage_details()
        finally:
            for name in ("stream_parallel_min_bytes", "stream_parallel_min_footprint"):
                tuning.reset("olc_elementwise", "ElementwisePlan", name, implementation=level, dtype="float32")


def test_scale_folded_into_the_program():
    s = make_session(scores_model(2, 4, 8), "scalar")
    (entry,) = s.kernel_plan()
    assert entry.op_type == "ElementwisePlan" and entry.domain == "olc.fused"
    # The scalar initializer is a program constant, not an input.
    rw = fusion.fuse_elementwise(_ctx(scores_model(2, 4, 8)))
    (r,) = rw
    assert list(r.node.input) == ["scores", "mask"]
    attrs = {a.name: helper.get_attribute_value(a) for a in r.node.attribute}
    assert attrs["ops"] == b"Mul;Add" and list(attrs["constants"]) == [0.125]
    assert list(attrs["args"]) == [0, 2, 3, 1]


def _ctx(m):
    """A pass context built as the session builds it (for inspecting the rewrite)."""
    from olc_core.graph_passes import build_context
    from olc_core.session import _value_types

    inferred = onnx.shape_inference.infer_shapes(m)
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(m.graph.node)]
    return build_context(m.graph, names, _value_types(inferred), consts, {"ai.onnx": m.opset_import[0].version},
                         [[] for _ in m.graph.node])


# ------------------------------------------------- tiles, threads, broadcast


@pytest.fixture
def tiny_tiles():
    """16-element tiles and threads from the first element, at every level."""
    for lvl in LEVELS:
        for t in ("float32", "bfloat16"):
            tuning.set("olc_elementwise", "ElementwisePlan", "tile_elements", 16, implementation=lvl, dtype=t)
            tuning.set("olc_elementwise", "ElementwisePlan", "parallel_min_elements", 1, implementation=lvl, dtype=t)
    yield
    for lvl in LEVELS:
        for t in ("float32", "bfloat16"):
            for name in ("tile_elements", "parallel_min_elements"):
                tuning.reset("olc_elementwise", "ElementwisePlan", name, implementation=lvl, dtype=t)


def chain_model(dtype, shapes, out_shape):
    """y = Div(Sub(Tanh(a) * b, c), Abs(d) + 1.5): every binary op, broadcast inputs, a constant."""
    nodes = [
        helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
        helper.make_node("Mul", ["t", "b"], ["tb"], name="mul"),
        helper.make_node("Sub", ["tb", "c"], ["s"], name="sub"),
        helper.make_node("Abs", ["d"], ["ad"], name="abs"),
        helper.make_node("Add", ["ad", "k"], ["den"], name="add"),
        helper.make_node("Div", ["s", "den"], ["y"], name="div"),
    ]
    init = [numpy_helper.from_array(np.array([1.5], dtype=dtype), "k")]
    ins = [vi(n, dtype, list(s)) for n, s in zip("abcd", shapes)]
    return model(nodes, ins, [vi("y", dtype, list(out_shape))], init)


BROADCASTS = [
    [(3, 1, 40), (1, 5, 40), (40,), (3, 5, 1)],   # general
    [(2, 37), (2, 37), (2, 37), (2, 37)],         # contiguous, odd tail
    [(4, 1), (1, 33), (), (4, 33)],               # outer product and a scalar input
    [(1,), (1,), (1,), (1,)],                     # one element
    [(0, 4), (1, 4), (4,), (1, 1)],               # empty
]


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=["general", "contiguous", "outer", "one", "empty"])
def test_broadcast_chain_small_tiles(tiny_tiles, shapes, level, threads, dtype):
    out_shape = np.broadcast_shapes(*shapes)
    m = chain_model(dtype, shapes, out_shape)
    rng = rng_for("chain", str(shapes))
    feeds = {n: rng.uniform(-3, 3, s).astype(dtype) for n, s in zip("abcd", shapes)}
    s = make_session(m, level, threads)
    assert_fused(s, ["tanh", "mul", "sub", "abs", "add", "div"])
    (y,) = s.run(None, feeds)
    assert y.shape == out_shape and y.dtype == np.dtype(dtype)
    if dtype is np.float32:
        (unfused,) = make_session(m, level, threads, fusion=False).run(None, feeds)
        np.testing.assert_array_equal(y, unfused)
        (ref,) = ReferenceEvaluator(m).run(None, feeds)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    else:
        f = {n: v.astype(np.float64) for n, v in feeds.items()}
        exact = (np.tanh(f["a"]) * f["b"] - f["c"]) / (np.abs(f["d"]) + 1.5)
        np.testing.assert_allclose(y.astype(np.float64), exact.astype(np.float32).astype(BF16).astype(np.float64),
                                   rtol=2.0**-7, atol=1e-6)


@pytest.mark.parametrize("level", LEVELS)
def test_every_unary_op_as_a_step(level):
    """Each fusable unary op between two products: bit-identical to fusion=False."""
    rng = rng_for("unary-steps")
    x = np.concatenate([rng.uniform(-6, 6, 1000), [0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan]]).astype(np.float32)
    w = rng.uniform(0.5, 2, x.shape).astype(np.float32)
    checked = 0
    for op in fusion.UNARY_OPS:
        attrs = {"approximate": "tanh"} if op == "Gelu" else {}
        for extra in ([{}, attrs] if attrs else [{}]):
            nodes = [helper.make_node("Mul", ["x", "w"], ["xw"], name="pre"),
                     helper.make_node(op, ["xw"], ["u"], name="op", **extra),
                     helper.make_node("Mul", ["u", "w"], ["y"], name="post")]
            m = model(nodes, [vi("x", np.float32, [x.size]), vi("w", np.float32, [x.size])],
                      [vi("y", np.float32, [x.size])])
            s = make_session(m, level)
            assert_fused(s, ["pre", "op", "post"])
            (y,) = s.run(None, {"x": x, "w": w})
            (u,) = make_session(m, level, fusion=False).run(None, {"x": x, "w": w})
            np.testing.assert_array_equal(y, u, err_msg=f"{op} {extra}")
            checked += 1
    assert checked == len(fusion.UNARY_OPS) + 1


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("level", LEVELS)
def test_unary_attributes_reach_the_steps(level, dtype):
    """Non-default attributes, Shrink's lambd and bias included (they travel
    as alpha and beta): the fused steps give the unfused nodes' bits in
    float32; in bfloat16 the fused kernel rounds once at the end instead of
    after every node, so within a unit of each rounding."""
    rng = rng_for("unary-attrs", str(dtype))
    x = np.concatenate([rng.uniform(-4, 4, 500), [0.0, -0.0, 1.0, -1.0, 1.25, np.inf, -np.inf, np.nan]]).astype(dtype)
    cases = [("Shrink", {"lambd": 1.25, "bias": 0.75}), ("Shrink", {"lambd": -0.5, "bias": -2.0}),
             ("Celu", {"alpha": 0.3}), ("Celu", {"alpha": -1.5}), ("ThresholdedRelu", {"alpha": -0.25}),
             ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Selu", {"alpha": 1.2, "gamma": 0.7})]
    for op, attrs in cases:
        if op == "Shrink" and dtype is BF16:
            continue  # Shrink has no bfloat16 schema type
        nodes = [helper.make_node("Abs", ["x"], ["a"], name="pre"),
                 helper.make_node(op, ["x"], ["u"], name="op", **attrs),
                 helper.make_node("Sub", ["u", "a"], ["y"], name="post")]
        m = model(nodes, [vi("x", dtype, [x.size])], [vi("y", dtype, [x.size])], opset=22)
        if op == "Celu":
            m.opset_import[0].version = 28 if dtype is BF16 else 22
        s = make_session(m, level)
        assert_fused(s, ["pre", "op", "post"])
        (y,) = s.run(None, {"x": x})
        (u,) = make_session(m, level, fusion=False).run(None, {"x": x})
        if dtype is np.float32:
            np.testing.assert_array_equal(y.view(np.uint32), u.view(np.uint32), err_msg=f"{op} {attrs}")
        else:
            y32, u32, x32 = (v.astype(np.float32) for v in (y, u, x))
            assert (np.isnan(y32) == np.isnan(u32)).all(), f"{op} {attrs}"
            ok = ~np.isnan(u32)
            with np.errstate(invalid="ignore"):
                close = np.abs(y32 - u32) <= 2.0**-7 * (np.abs(u32) + 2 * np.abs(x32)) + 1e-30
            assert (close | (y32 == u32))[ok].all(), f"{op} {attrs}"


def test_celu_alpha_zero_is_not_fused():
    """Celu refuses alpha = 0 (it divides by it): the pass leaves such a node
    to its own kernel, which names it."""
    nodes = [helper.make_node("Celu", ["x"], ["c"], name="celu", alpha=0.0),
             helper.make_node("Mul", ["c", "x"], ["y"], name="mul")]
    m = model(nodes, [vi("x", np.float32, [8])], [vi("y", np.float32, [8])])
    with pytest.raises(olc_core.OlcError, match=r"celu.*Celu.*alpha"):
        olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match="alpha must be non-zero"):
        olc_core.Session(plan_node(n_inputs=1, ops="Celu", args=[0, -1], step_floats=[0.0, 0.0, 0.0]))


# --------------------------------------------------------- nothing fused


def plan_kernels(m, **kw):
    return make_session(m, LEVELS[-1], **kw).kernel_plan()


def test_intermediate_read_twice_is_not_fused():
    nodes = [
        helper.make_node("Sigmoid", ["gate"], ["sg"], name="sigmoid"),
        helper.make_node("Mul", ["gate", "sg"], ["silu"], name="silu"),
        helper.make_node("Add", ["sg", "up"], ["z"], name="other"),
    ]
    m = model(nodes, [vi("gate", np.float32, [8]), vi("up", np.float32, [8])],
              [vi("silu", np.float32, [8]), vi("z", np.float32, [8])])
    plan = plan_kernels(m)
    assert [e.node_name for e in plan] == ["sigmoid", "silu", "other"]
    assert not any(e.fused_nodes for e in plan)


def test_intermediate_graph_output_is_not_fused():
    m = swiglu_model(np.float32, [1, 2, 8])
    m.graph.output.append(vi("silu", np.float32, [1, 2, 8]))
    plan = plan_kernels(m)
    # sigmoid -> silu may still fuse; silu itself is an output, so "gated" stays apart.
    for e in plan:
        assert "silu" not in [n for n, _ in e.fused_nodes][:-1]
    assert any(e.node_name == "gated" and not e.fused_nodes for e in plan)
    rng = rng_for("graph-out")
    feeds = {"gate": rng.standard_normal((1, 2, 8)).astype(np.float32),
             "up": rng.standard_normal((1, 2, 8)).astype(np.float32)}
    y, silu = make_session(m, LEVELS[-1]).run(None, feeds)
    ry, rsilu = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_allclose(silu, rsilu, rtol=1e-6)
    np.testing.assert_allclose(y, ry, rtol=1e-6)


def test_mixed_types_are_not_fused():
    nodes = [
        helper.make_node("Sigmoid", ["gate"], ["sg"], name="sigmoid"),
        helper.make_node("Cast", ["sg"], ["sg16"], name="cast", to=TensorProto.BFLOAT16),
        helper.make_node("Mul", ["sg16", "up"], ["y"], name="mul"),
    ]
    m = model(nodes, [vi("gate", np.float32, [8]), vi("up", BF16, [8])], [vi("y", BF16, [8])])
    assert not any(e.fused_nodes for e in plan_kernels(m))
    # float64 is not fused either
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="a"), helper.make_node("Mul", ["s", "x"], ["y"], name="b")]
    m = model(nodes, [vi("x", np.float64, [8])], [vi("y", np.float64, [8])])
    assert not any(e.fused_nodes for e in plan_kernels(m))


def test_bitwise_not_is_not_fused():
    nodes = [helper.make_node("BitwiseNot", ["x"], ["a"], name="not1"),
             helper.make_node("BitwiseNot", ["a"], ["y"], name="not2")]
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT32, [8])],
              [helper.make_tensor_value_info("y", TensorProto.INT32, [8])], opset=18)
    assert "BitwiseNot" not in fusion.UNARY_OPS
    assert not any(e.fused_nodes for e in plan_kernels(m))


def test_unfusable_ops_are_not_fused():
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], name="softmax"),
        helper.make_node("Pow", ["s", "x"], ["p"], name="pow"),
        helper.make_node("IsNaN", ["p"], ["y"], name="isnan"),
    ]
    m = model(nodes, [vi("x", np.float32, [8])], [helper.make_tensor_value_info("y", TensorProto.BOOL, [8])])
    assert not any(e.fused_nodes for e in plan_kernels(m))


def test_fusion_off_per_session():
    m = swiglu_model(np.float32, [1, 2, 64])
    s = make_session(m, LEVELS[-1], fusion=False)
    assert [e.node_name for e in s.kernel_plan()] == ["sigmoid", "silu", "gated"]
    assert KERNEL not in [e.kernel for e in s.kernel_plan()]


# ------------------------------------------------------- bad programs/input


def plan_node(dtype=np.float32, n_inputs=2, **attrs):
    names = [f"x{i}" for i in range(n_inputs)]
    node = helper.make_node("ElementwisePlan", names, ["y"], name="plan", domain="olc.fused", **attrs)
    m = model([node], [vi(n, dtype, ["n"]) for n in names], [vi("y", dtype, None)])
    m.opset_import.append(helper.make_opsetid("olc.fused", 1))
    return m


@pytest.mark.parametrize(
    "attrs,message",
    [
        ({"ops": "Mul;Pow", "args": [0, 1, 2, 0]}, "op 'Pow' cannot be fused"),
        ({"ops": "Mul", "args": [0, 5]}, "operand 1 refers to value 5"),
        ({"ops": "Sigmoid", "args": [0, 1]}, "unary step takes one operand"),
        ({"ops": "Mul", "args": [0, 1, 2]}, "needs 2 entries per step"),
        ({"ops": "Mul", "args": [0, 0]}, "input 1 is not read"),
        ({"ops": "Mul", "args": [0, 1], "bogus": 1}, "unknown attribute 'bogus'"),
        ({"args": [0, 1]}, "attribute 'ops' is required"),
        ({"ops": "Elu", "args": [0, -1], "step_floats": [float("inf"), 0.0, 0.0]}, "must be finite"),
    ],
)
def test_bad_programs_are_refused_at_creation(attrs, message):
    n_inputs = 1 if attrs.get("ops") == "Elu" else 2
    with pytest.raises(olc_core.OlcError, match=message):
        olc_core.Session(plan_node(n_inputs=n_inputs, **attrs))


def test_wrong_type_has_no_kernel():
    with pytest.raises(olc_core.NoKernelError, match="kernel accepts float32, bfloat16"):
        olc_core.Session(plan_node(dtype=np.float64, ops="Mul", args=[0, 1]), strict=True)


def test_incompatible_shapes_raise_before_output():
    s = olc_core.Session(plan_node(ops="Mul", args=[0, 1]))
    with pytest.raises(olc_core.OlcError, match=r"node 'plan' \(ElementwisePlan\).*cannot be broadcast"):
        s.run(None, {"x0": np.ones(3, np.float32), "x1": np.ones(4, np.float32)})
    (y,) = s.run(None, {"x0": np.full(3, 2, np.float32), "x1": np.full(1, 3, np.float32)})
    np.testing.assert_array_equal(y, [6, 6, 6])


# ------------------------------------------------------------- no over-read


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("level", LEVELS)
def test_inputs_ending_at_a_guard_page(level, dtype, specialized):
    """Every path (one-pass and tile steps) reads nothing past an input's end."""
    rng = rng_for("guard", level, str(dtype))
    for n in (1, 5, 8, 15, 16, 17, 31, 33, 513):
        g = guarded(rng.standard_normal((1, 1, n)).astype(dtype))
        u = guarded(rng.standard_normal((1, 1, n)).astype(dtype))
        s = make_session(swiglu_model(dtype, [1, 1, n]), level)
        (y,) = s.run(None, {"gate": g, "up": u})
        (ref,) = make_session(swiglu_model(dtype, [1, 1, n]), level, fusion=False).run(None, {"gate": g, "up": u})
        np.testing.assert_allclose(y.astype(np.float32), ref.astype(np.float32), rtol=4.1 * 2.0**-8)
        if dtype is np.float32:
            x = guarded(rng.standard_normal((1, 2, 1, n)).astype(np.float32))
            mk = guarded(rng.standard_normal((1, 1, 1, n)).astype(np.float32))
            m = scores_model(2, 1, n)
            (y,) = make_session(m, level).run(None, {"scores": x, "mask": mk})
            np.testing.assert_array_equal(y, x * np.float32(0.125) + mk)
