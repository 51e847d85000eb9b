"""Variadic Sum/Mean/Min/Max against onnx.reference: every type each schema
allows, 1 to 16 inputs over one common broadcast space, NaN propagation,
every SIMD level, 1 and 2 threads, in place."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from test_binary import (
    FLOATS,
    LEVELS,
    NP,
    check,
    float_values,
    int_values,
    make_model,
    newest_opset,
    reference,
    session,
    streaming_lowered,
)

import olc_core
from olc_elementwise import binary_manifest as bm

VARIADIC = [o for o in bm.NARY_OPS if o.kind == "variadic"]

SHAPE_SETS = [
    [(33,)],
    [(257,), (257,)],
    [(4, 33), (33,), (4, 1)],
    [(), (2, 3, 5), (3, 1), (1, 5)],
    [(2, 1, 4, 1, 3), (1, 3, 1, 5, 1), (3,), (), (2, 3, 4, 5, 3)],
    [(0, 3), (3,)],
    [(7,)] * 16,
]


def values(t, shape, rng):
    n = int(np.prod(shape, dtype=np.int64))
    x = float_values(t, n, rng, -50, 50) if t in FLOATS else int_values(t, n, rng)
    return x.reshape(shape)


def tol(op, t):
    # float16/bfloat16 accumulate in float32 and round once; the reference
    # rounds after each addition (and Mean's division) in the narrow type.
    if op in ("Sum", "Mean") and t in ("float16", "bfloat16"):
        return 2.0 ** -7 if t == "bfloat16" else 2.0 ** -9
    return 0.0


def cases():
    for spec in VARIADIC:
        for t in spec.types("T"):
            yield spec.op, t


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op,t", list(cases()))
def test_variadic_differential(op, t):
    spec = bm.BY_NAME[op]
    rng = np.random.default_rng(zlib.crc32(f"{op}/{t}".encode()))
    for shapes in SHAPE_SETS:
        model = make_model(op, [t] * len(shapes), t, newest_opset(spec, t))
        feeds = {f"x{i}": values(t, s, rng) for i, s in enumerate(shapes)}
        if op == "Mean":
            # onnx.reference's Mean adds in place into input 0 and fails when
            # a later input broadcasts it; the same steps on broadcast copies
            arrays = [a.copy() for a in np.broadcast_arrays(*feeds.values())]
            ref = arrays[0]
            for m in arrays[1:]:
                ref += m
            ref = (ref / len(arrays)).astype(NP[t])
        else:
            ref = reference(model, feeds)
        exact = None
        if tol(op, t):
            # The reference rounds after every step in the narrow type; check
            # against the float64 result instead (olc rounds once).
            exact = sum(np.broadcast_arrays(*[v.astype(np.float64) for v in feeds.values()]))
            exact = exact / len(feeds) if op == "Mean" else exact
        for level in LEVELS:
            sess = session((op, t, len(shapes)), model, level)
            y = sess.run(None, feeds)[0]
            assert sess.kernel_usage() == [bm.kernel_name(op)]
            if exact is not None:
                y64 = y.astype(np.float64)
                assert (np.isnan(y64) == np.isnan(exact)).all()
                with np.errstate(invalid="ignore"):
                    ok = np.isnan(exact) | (y64 == exact) | (np.abs(y64 - exact) <= 1e-5 + tol(op, t) * np.abs(exact))
                assert ok.all(), f"{op} {t}: y={y[~ok][:5]} exact={exact[~ok][:5]}"
                continue
            # Min/Max of +0 and -0 may return either zero; the reference Sum
            # starts from the integer 0 (0 + -0 is +0), olc adds the inputs only
            check(op, y, ref, t, tol(op, t), signed_zero=op == "Mean" and tol(op, t) == 0)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Min", "Max"])
def test_variadic_large_two_threads(op):
    t = "float32"
    rng = np.random.default_rng(1)
    shapes = [(2, 64, 32, 32), (64, 1, 1), (2, 64, 32, 32), (32, 32)]
    model = make_model(op, [t] * 4, t, 13)
    feeds = {f"x{i}": values(t, s, rng) for i, s in enumerate(shapes)}
    ref = reference(model, feeds)
    for level in LEVELS:
        for threads in (1, 2):
            y = session((op, "large"), model, level, threads).run(None, feeds)[0]
            check(op, y, ref, t, signed_zero=False)


# (shapes, whether the run streams): three full inputs; rows of 4,099
# elements (off a 64-byte line) with a broadcast row and a column; inner
# blocks too short to stream.
VARIADIC_STREAM_SHAPES = [([(1_050_001,)] * 3, True),
                          ([(257, 4099), (4099,), (257, 1)], True),
                          ([(8300, 127), (8300, 1)], False)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op,t", [("Sum", "float32"), ("Mean", "float64"), ("Max", "int32"), ("Min", "float32")])
@pytest.mark.parametrize("threads", [1, 2])
def test_variadic_streaming(op, t, threads):
    """Runs that read at least stream_min_bytes take the non-temporal variant
    (the binary ops' rule); both thresholds are lowered here so that
    1M-element outputs and split runs stream."""
    spec = bm.BY_NAME[op]
    rng = np.random.default_rng(zlib.crc32(f"stream/{op}/{t}".encode()))
    with streaming_lowered(op, t):
        for shapes, streams in VARIADIC_STREAM_SHAPES:
            model = make_model(op, [t] * len(shapes), t, newest_opset(spec, t))
            feeds = {f"x{i}": values(t, s, rng) for i, s in enumerate(shapes)}
            if op in ("Sum", "Mean"):
                # left to right in the input type, as the kernel (and numpy) rounds each step
                arrays = np.broadcast_arrays(*feeds.values())
                ref = arrays[0].copy()
                for a in arrays[1:]:
                    ref = ref + a
                ref = (ref / NP[t].type(len(arrays))).astype(NP[t]) if op == "Mean" else ref
            else:
                ref = reference(model, feeds)
            for level in LEVELS:
                sess = session((op, t, "stream", len(shapes)), model, level, threads)
                check(op, sess.run(None, feeds)[0], ref, t, signed_zero=False)
                want = streams and level != "scalar"
                assert ("stream" in sess.kernel_usage_details()[-1]) == want, (level, shapes)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf in the numpy reference
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max"])
@pytest.mark.parametrize("t", ["float32", "int32", "float16"])
def test_variadic_in_place(op, t):
    """An intermediate that dies at the variadic node becomes its output (in
    place on input 0), with two and three inputs, a broadcast third input,
    the intermediate read again as a later input (Sum(t, c, t)), and a size
    that streams (thresholds lowered for the two-thread runs)."""
    from onnx import TensorProto, helper

    if op in ("Sum", "Mean") and t == "int32":
        pytest.skip(f"{op} has no integer types")
    code = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32, "float16": TensorProto.FLOAT16}[t]
    rng = np.random.default_rng(zlib.crc32(f"inplace/{op}/{t}".encode()))
    for n_in in (2, 3, "again"):
        for n in (1000, 300_001):
            # "again": Sum(t, c, t), the output's buffer is also a later input
            names = ["c", "t"] if n_in == "again" else ["c", "d"][: n_in - 1]
            nodes = [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node(op, ["t", *names], ["y"])]
            shapes = {"a": [n], "b": [n], "c": [n], "d": [1]}
            graph_inputs = ["a", "b", *[v for v in names if v != "t"]]
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(v, code, shapes[v]) for v in graph_inputs],
                                  [helper.make_tensor_value_info("y", code, [n])])
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            feeds = {v: values(t, shapes[v], rng) for v in graph_inputs}
            feeds_t = dict(feeds, t=feeds["a"] + feeds["b"])
            parts = [feeds_t["t"], *[np.broadcast_to(feeds_t[v], (n,)) for v in names]]
            if op == "Max":
                ref = np.maximum.reduce(parts)
            elif t == "float16":  # olc accumulates 16-bit floats in float32 and rounds once
                acc = sum(p.astype(np.float32) for p in parts)
                ref = (acc / np.float32(len(parts)) if op == "Mean" else acc).astype(np.float16)
            else:
                acc = parts[0]
                for p in parts[1:]:
                    acc = acc + p
                ref = acc / NP[t].type(len(parts)) if op == "Mean" else acc
            with streaming_lowered(op, t):
                for level in LEVELS:
                    for threads in (1, 2):
                        with olc_core.simd_cap(level):
                            sess = olc_core.Session(model, threads=threads, strict=True, fusion=False)
                        np.testing.assert_array_equal(sess.run(None, feeds)[0], ref.astype(NP[t]))


@pytest.mark.parametrize("level", LEVELS)
def test_nan_propagates(level):
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    for op in ("Min", "Max"):
        sess = session((op, "nan"), make_model(op, ["float32"] * 3, "float32", 13), level)
        y = sess.run(None, {"x0": f(np.nan, 1, 2, 3), "x1": f(1, np.nan, 2, 3), "x2": f(1, 2, np.nan, -np.inf)})[0]
        assert np.isnan(y[:3]).all()
        assert y[3] == (-np.inf if op == "Min" else 3)


def test_more_inputs_than_the_kernel_takes_fall_back():
    model = make_model("Sum", ["float32"] * 17, "float32", 13)
    s = olc_core.Session(model)
    plan = {e.op_type: e for e in s.kernel_plan()}
    assert "fallback" in str(plan["Sum"]).lower() or not plan["Sum"].native
    feeds = {f"x{i}": np.full(3, i, np.float32) for i in range(17)}
    np.testing.assert_array_equal(s.run(None, feeds)[0], np.full(3, sum(range(17)), np.float32))


def test_shape_mismatch_is_an_error():
    sess = session(("Max", "err"), make_model("Max", ["float32"] * 2, "float32", 13), LEVELS[-1])
    with pytest.raises(Exception, match="broadcast"):
        sess.run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((2,), np.float32)})
