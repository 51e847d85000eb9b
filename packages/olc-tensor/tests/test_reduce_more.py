"""ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare and
CumSum against numpy oracles (float64 arithmetic, wrapping integers) and
onnx.reference: ranks 0 to 5, random axis subsets (negative too), keepdims,
axes as attribute (before 18) and input (18+), noop_with_empty_axes, empty
reductions, NaN and infinities, the float32 row kernels at every SIMD level
and length around the vector widths, one and two threads."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import LEVELS, NP, make_model, olc_run, ref_run, seed_of, type_name  # noqa: E402

import olc_core  # noqa: E402

OPS = ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")
REDUCE_TYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")
FLOATS = ("float32", "float64", "float16", "bfloat16")
EPS = {"float32": 2.0**-23, "float64": 2.0**-52, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def is_float(t: str) -> bool:
    return t in FLOATS


def norm_axes(x, axes, noop=False):
    if axes is None or len(axes) == 0:
        return () if noop else tuple(range(x.ndim))
    return tuple(sorted(a % x.ndim for a in axes))


def lse64(v, axes, keepdims):
    """log(sum(exp(v))) over axes in float64, with the maximum subtracted
    first (the mathematical value wherever it is finite)."""
    with np.errstate(all="ignore"):
        if v.size == 0 or any(v.shape[a] == 0 for a in axes):
            return np.full(np.sum(v, axis=axes, keepdims=keepdims).shape, -np.inf)
        m = np.max(v, axis=axes, keepdims=True)  # NaN propagates
        fm = np.where(np.isfinite(m), m, 0.0)
        s = np.sum(np.exp(v - fm), axis=axes, keepdims=True)
        r = np.where(np.isfinite(m), fm + np.log(s), m)  # an infinite (or NaN) maximum is the result
        return r if keepdims else np.squeeze(r, axis=axes)


def int_store(v: np.ndarray, t: str) -> np.ndarray:
    """float64 -> integer type: truncation, saturating, NaN -> 0."""
    info = np.iinfo(NP[t])
    v = np.where(np.isnan(v), 0.0, np.trunc(v))
    out = np.empty(v.shape, NP[t])
    flat = out.reshape(-1)
    for i, e in enumerate(v.reshape(-1)):
        flat[i] = info.max if e >= float(info.max) else info.min if e <= float(info.min) else int(e)
    return out


def oracle(op, x, axes, keepdims, noop=False):
    t = type_name(x)
    ax = norm_axes(x, axes, noop)
    kd = bool(keepdims)
    with np.errstate(all="ignore"):
        if is_float(t):
            v = x.astype(np.float64)
            if op == "ReduceProd":
                r = np.prod(v, axis=ax, keepdims=kd)
            elif op == "ReduceL1":
                r = np.sum(np.abs(v), axis=ax, keepdims=kd)
            elif op == "ReduceL2":
                r = np.sqrt(np.sum(v * v, axis=ax, keepdims=kd))
            elif op == "ReduceSumSquare":
                r = np.sum(v * v, axis=ax, keepdims=kd)
            else:
                r = lse64(v, ax, kd)
            return np.asarray(r).astype(NP[t])
        bits = NP[t].itemsize * 8
        w = x.astype(np.uint64)  # two's complement, modulo 2^64
        if op in ("ReduceL2", "ReduceLogSumExp"):
            v = x.astype(np.float64)
            r = np.sqrt(np.sum(v * v, axis=ax, keepdims=kd)) if op == "ReduceL2" else lse64(v, ax, kd)
            return int_store(np.asarray(r), t)
        if op == "ReduceProd":
            r = np.prod(w, axis=ax, keepdims=kd, dtype=np.uint64)
        elif op == "ReduceL1":
            neg = x < 0 if NP[t].kind == "i" else np.zeros(x.shape, bool)
            r = np.sum(np.where(neg, np.uint64(0) - w, w), axis=ax, keepdims=kd, dtype=np.uint64)
        else:
            r = np.sum(w * w, axis=ax, keepdims=kd, dtype=np.uint64)
        r = np.asarray(r)
        mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2**64 - 1)
        return (r & mask).astype(NP[t])


def check(op, got, want, x, what, axes=None, noop=False):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    t = type_name(want)
    if not is_float(t):
        assert np.array_equal(got, want), (what, got, want)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), (what, got, want)
    fin = ~np.isnan(w)
    assert np.array_equal(np.isinf(g[fin]), np.isinf(w[fin])), (what, got, want)
    ok = fin & ~np.isinf(w)
    # One rounding of the output type, plus the float64 work's own error
    # (the oracle's summation order differs): n terms of 2^-52 each.
    # LogSumExp is also absolute near 0 (log of a sum near 1).
    n = max(1, int(np.prod([x.shape[a] for a in norm_axes(x, axes, noop)])) if x.ndim else 1)
    rel = 2 * EPS[t] + 2 * n * 2.0**-52
    tol = rel * np.abs(w[ok]) + 1e-300
    if op == "ReduceLogSumExp":
        tol = tol + rel * max(1.0, float(np.nanmax(np.abs(x.astype(np.float64)), initial=1.0)))
    assert np.all(np.abs(g[ok] - w[ok]) <= tol), (what, got, want)


def small_values(rng, shape, t, op):
    if is_float(t):
        lo, hi = ((0.5, 1.5) if op == "ReduceProd" else (-4, 4))
        v = rng.uniform(lo, hi, shape)
        if op == "ReduceProd":
            v = v * rng.choice([-1.0, 1.0], shape)
        return v.astype(NP[t])
    if t.startswith("u"):
        return rng.integers(0, 40, shape).astype(NP[t])
    return rng.integers(-40, 40, shape).astype(NP[t])


def build(op, t, axes, keepdims, opset, noop=None):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    if opset >= 18:
        ins = [("x", t)] + ([("a", "int64")] if axes is not None else [])
        return make_model(op, ins, ["y"], opset, attrs), (None if axes is None else np.array(axes, np.int64))
    if axes is not None:
        attrs["axes"] = list(axes)
    return make_model(op, [("x", t)], ["y"], opset, attrs), None


def feeds_of(x, a):
    return {"x": x} if a is None else {"x": x, "a": a}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("t", REDUCE_TYPES)
def test_reduce_random(op, t):
    rng = np.random.default_rng(seed_of(op, t, "more"))
    opsets = [11, 13, 18] if t != "bfloat16" else [13, 18]
    if op == "ReduceLogSumExp" and is_float(t):
        opsets.append(28)
    for rank in range(0, 6):
        for _ in range(3):
            shape = tuple(int(v) for v in rng.integers(1, 5, rank))
            x = small_values(rng, shape, t, op)
            k = int(rng.integers(0, rank + 1))
            axes = [int(a) - (rank if rng.random() < 0.5 else 0) for a in rng.permutation(rank)[:k]] or None
            keepdims = int(rng.integers(0, 2))
            want = oracle(op, x, axes, keepdims)
            for opset in opsets:
                model, a = build(op, t, axes, keepdims, opset)
                (got,) = olc_run(model, feeds_of(x, a), expect_kernel=f"olc_tensor::{op}")
                check(op, got, want, x, f"{op} {t} {shape} {axes} k={keepdims} o={opset}", axes)


@pytest.mark.parametrize("op", OPS)
def test_against_reference(op):
    """onnx.reference agrees on ordinary float32/float64 inputs."""
    rng = np.random.default_rng(seed_of(op, "ref"))
    for t in ("float32", "float64"):
        for shape, axes in (((3, 4, 5), [1]), ((3, 4, 5), [-1, 0]), ((2, 7), None), ((6,), [0])):
            x = small_values(rng, shape, t, op)
            for keepdims in (0, 1):
                model, a = build(op, t, axes, keepdims, 18)
                (got,) = olc_run(model, feeds_of(x, a), expect_kernel=f"olc_tensor::{op}")
                (want,) = ref_run(model, feeds_of(x, a))
                assert got.dtype == want.dtype and got.shape == want.shape, (op, t, shape, axes)
                np.testing.assert_allclose(got, want, rtol=4 * EPS[t], atol=0)


@pytest.mark.parametrize("op", OPS)
def test_special_values(op):
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 2.0], [-0.0, 0.0, -1.0], [-np.inf, -np.inf, -np.inf],
                  [np.inf, 1.0, np.inf], [1000.0, 1000.0, -1000.0]], np.float32)
    for axes in ([1], [0], None):
        model, a = build(op, "float32", axes, 1, 18)
        (got,) = olc_run(model, feeds_of(x, a), expect_kernel=f"olc_tensor::{op}")
        check(op, got, oracle(op, x, axes, 1), x, f"{op} {axes}", axes)
    if op == "ReduceLogSumExp":
        # The running maximum keeps large inputs finite (exp(1000) overflows).
        model, a = build(op, "float32", [1], 0, 18)
        (got,) = olc_run(model, feeds_of(x, a))
        assert np.isnan(got[0]) and got[1] == np.inf and got[3] == -np.inf and got[4] == np.inf
        assert abs(float(got[5]) - (1000.0 + np.log(2.0))) < 1e-3


@pytest.mark.parametrize("op", OPS)
def test_empty_reductions(op):
    for t in ("float32", "int32", "uint64", "float16", "bfloat16"):
        x = np.zeros((3, 0, 2), NP[t])
        for axes, keepdims in (([1], 1), ([1], 0), ([0], 1), (None, 0)):
            model, a = build(op, t, axes, keepdims, 18)
            (got,) = olc_run(model, feeds_of(x, a), expect_kernel=f"olc_tensor::{op}")
            check(op, got, oracle(op, x, axes, keepdims), x, f"{op} {t} {axes}", axes)
    # Reducing nothing: Prod 1, L1/L2/SumSquare 0, LogSumExp -inf.
    model, a = build(op, "float32", [1], 0, 18)
    (got,) = olc_run(model, {"x": np.zeros((2, 0), np.float32), "a": a})
    want = {"ReduceProd": 1.0, "ReduceLogSumExp": -np.inf}.get(op, 0.0)
    assert got.tolist() == [want, want]


@pytest.mark.parametrize("op", OPS)
def test_noop_with_empty_axes(op):
    """Empty axes with noop_with_empty_axes=1 reduce nothing; the composite
    reductions still map each element (|x|, x*x, ...), as the spec says."""
    x = np.array([[-2.0, 3.0, 0.5], [-0.0, 1.0, -1.5]], np.float32)
    for noop in (0, 1):
        model = make_model(op, [("x", "float32"), ("a", "int64")], ["y"], 18,
                           {"keepdims": 1, "noop_with_empty_axes": noop})
        feeds = {"x": x, "a": np.zeros(0, np.int64)}
        (got,) = olc_run(model, feeds, expect_kernel=f"olc_tensor::{op}")
        check(op, got, oracle(op, x, [], 1, noop=bool(noop)), x, f"{op} noop={noop}", [], bool(noop))
        np.testing.assert_allclose(got, ref_run(model, feeds)[0], rtol=1e-6)
        assert not np.shares_memory(got, x)
    # an absent axes input with noop=1 behaves the same
    model = make_model(op, [("x", "float32")], ["y"], 18, {"noop_with_empty_axes": 1})
    (got,) = olc_run(model, {"x": x})
    check(op, got, oracle(op, x, [], 1, noop=True), x, f"{op} absent axes", [], True)


def test_integer_wraparound():
    i32 = np.iinfo(np.int32)
    cases = [
        ("ReduceProd", np.array([65536, 65536, 3], np.int32)),
        ("ReduceProd", np.array([2**40, 2**40, -7], np.int64)),
        ("ReduceSumSquare", np.array([i32.max, i32.min, 46341], np.int32)),
        ("ReduceSumSquare", np.array([2**62, 3], np.int64)),
        ("ReduceL1", np.array([i32.min, i32.min, 5], np.int32)),
        ("ReduceL1", np.array([-(2**63), 1], np.int64)),
        ("ReduceProd", np.array([2**32 - 1, 2**32 - 1], np.uint32)),
        ("ReduceL2", np.array([3, 4], np.int32)),
        ("ReduceL2", np.array([2**31 - 1, 2**31 - 1], np.uint32)),
        ("ReduceLogSumExp", np.array([2, 2, 100], np.int64)),
        ("ReduceLogSumExp", np.array([1000, 999], np.uint32)),
    ]
    for op, x in cases:
        t = type_name(x)
        model, a = build(op, t, [0], 0, 18)
        (got,) = olc_run(model, {"x": x, "a": a}, expect_kernel=f"olc_tensor::{op}")
        want = oracle(op, x, [0], 0)
        assert got.dtype == x.dtype and got == want, (op, x, got, want)
    # numpy wraps the same way for these
    x = np.array([65536, 65536, 3], np.int32)
    (got,) = olc_run(build("ReduceProd", "int32", [0], 0, 18)[0], {"x": x, "a": np.array([0], np.int64)})
    with np.errstate(all="ignore"):
        assert got == np.prod(x, dtype=np.int32)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"))
@pytest.mark.parametrize("axis", (-1, 0))
def test_float32_rows_every_level(level, op, axis):
    """The float32 row kernels of |x|, x*x and exp(x - max) (axis -1) and
    the column kernels of a kept inner axis (axis 0: float64 accumulators,
    four rows a pass) (scalar, AVX2, AVX-512): every length around the
    vector widths and their tails; NaN, -inf, +inf planted; for LogSumExp
    also terms far below the maximum (exp(-1000) underflows)."""
    rng = np.random.default_rng(seed_of(level, op) if axis == -1 else seed_of(level, op, axis))
    model, _ = build(op, "float32", [axis], 0, 18)
    with olc_core.simd_cap(level):
        sess = olc_core.Session(model, strict=True, record_usage=True)
    for n in list(range(1, 70)) + [4095, 4096, 4097]:
        x = (rng.standard_normal((7, n)) * 10).astype(np.float32)
        x[3, n // 2] = np.nan
        x[4, n - 1] = -np.inf
        x[5, 0] = np.inf
        x[6, :] = rng.uniform(-2000, 2000, n).astype(np.float32)
        (got,) = sess.run(None, {"x": x, "a": np.array([axis], np.int64)})
        check(op, got, oracle(op, x, [axis], 0), x, f"{level} axis {axis} n={n}", [axis])
    assert f"olc_tensor::{op}" in sess.kernel_usage()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", ([0], [0, 2], [1]))
def test_column_blocks_split_between_threads(op, axes):
    """A wide kept inner dimension (1,000 columns: blocks of 64 and a
    partial one) under a reduced outermost one shares its columns between
    threads, under kept outermost slices ([1]) the slices: the same bits on
    one and two threads, and the float64 oracle."""
    rng = np.random.default_rng(seed_of(op, axes, "column blocks"))
    shape = {0: (302, 1000), 2: (40, 7, 3, 1000), 1: (3, 301, 1000)}[axes[-1]]
    x = small_values(rng, shape, "float32", op)
    model, a = build(op, "float32", axes, 0, 18)
    outs = [olc_run(model, {"x": x, "a": a}, threads=t, expect_kernel=f"olc_tensor::{op}")[0] for t in (1, 2)]
    np.testing.assert_array_equal(outs[0], outs[1])
    check(op, outs[1], oracle(op, x, axes, 0), x, f"{op} {axes}", axes)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("threads", (1, 2))
def test_large_rows_and_columns(op, threads):
    """Big enough to split across the executor: rows (inner axis reduced)
    and columns (outer axis reduced, element-wise accumulators)."""
    rng = np.random.default_rng(seed_of(op, threads))
    x = small_values(rng, (96, 1531), "float32", op)
    for axes in ([1], [0], [0, 1]):
        model, a = build(op, "float32", axes, 0, 18)
        (got,) = olc_run(model, {"x": x, "a": a}, threads=threads, expect_kernel=f"olc_tensor::{op}")
        check(op, got, oracle(op, x, axes, 0), x, f"{op} {axes}", axes)


# -------------------------------------------------------------------- CumSum

CUMSUM_TYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")


def cumsum_oracle(x, axis, exclusive, reverse):
    """Sequential running sums: float64 (one rounding per output) or
    integers modulo 2^64, then the element type."""
    t = type_name(x)
    v = x.astype(np.float64) if is_float(t) else x.astype(np.uint64)
    if reverse:
        v = np.flip(v, axis)
    c = np.cumsum(v, axis=axis, dtype=v.dtype)
    if exclusive:
        z = np.zeros_like(v)
        dst = [slice(None)] * v.ndim
        src = [slice(None)] * v.ndim
        dst[axis], src[axis] = slice(1, None), slice(0, -1)
        z[tuple(dst)] = c[tuple(src)]
        c = z
    if reverse:
        c = np.flip(c, axis)
    return c.astype(NP[t])


def cumsum_check(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.dtype == NP["bfloat16"]:
        # ml_dtypes rounds float64 -> bfloat16 through float32: allow one ulp.
        g, w = got.astype(np.float64), want.astype(np.float64)
        assert np.all(np.abs(g - w) <= 2.0**-7 * np.abs(w) + 1e-30), (what, got, want)
    else:
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), (what, got, want)


@pytest.mark.parametrize("t", CUMSUM_TYPES)
def test_cumsum_random(t):
    rng = np.random.default_rng(seed_of("cumsum", t))
    opset = 14 if t in ("float16", "bfloat16") else 11
    for rank in range(1, 5):
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        x = (rng.standard_normal(shape) * 20).astype(NP[t]) if is_float(t) else \
            rng.integers(np.iinfo(NP[t]).min, np.iinfo(NP[t]).max, shape, dtype=NP[t], endpoint=True)
        for axis in range(-rank, rank):
            for atype in ("int64", "int32"):
                for exclusive in (0, 1):
                    for reverse in (0, 1):
                        model = make_model("CumSum", [("x", t), ("a", atype)], ["y"], opset,
                                           {"exclusive": exclusive, "reverse": reverse})
                        feeds = {"x": x, "a": np.array(axis, NP[atype])}
                        (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::CumSum")
                        cumsum_check(got, cumsum_oracle(x, axis % rank, exclusive, reverse),
                                     f"{t} {shape} axis={axis} ex={exclusive} rev={reverse}")


def test_cumsum_reference_and_special():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 2.0], [-0.0, 0.0, -1.0]], np.float32)
    for axis in (0, 1, -1):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                model = make_model("CumSum", [("x", "float32"), ("a", "int64")], ["y"], 14,
                                   {"exclusive": exclusive, "reverse": reverse})
                feeds = {"x": x, "a": np.array(axis, np.int64)}
                (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::CumSum")
                with np.errstate(invalid="ignore"):  # the reference's inf - inf
                    (want,) = ref_run(model, feeds)
                assert np.array_equal(got, want, equal_nan=True), (axis, exclusive, reverse, got, want)
    # integers wrap
    x = np.array([np.iinfo(np.int32).max, 1, 1], np.int32)
    model = make_model("CumSum", [("x", "int32"), ("a", "int32")], ["y"], 11)
    (got,) = olc_run(model, {"x": x, "a": np.array(0, np.int32)})
    with np.errstate(all="ignore"):
        assert np.array_equal(got, np.cumsum(x, dtype=np.int32))
    # empty
    for shape in ((0,), (3, 0), (0, 4)):
        x = np.zeros(shape, np.float32)
        model = make_model("CumSum", [("x", "float32"), ("a", "int64")], ["y"], 14)
        (got,) = olc_run(model, {"x": x, "a": np.array(-1, np.int64)})
        assert got.shape == shape


@pytest.mark.parametrize("threads", (1, 2))
def test_cumsum_large(threads):
    """Outer slices and 1024-wide inner blocks split across the executor."""
    rng = np.random.default_rng(threads)
    x = rng.standard_normal((7, 33, 2100)).astype(np.float32)
    for axis in (0, 1, 2):
        for reverse in (0, 1):
            model = make_model("CumSum", [("x", "float32"), ("a", "int64")], ["y"], 14, {"reverse": reverse})
            (got,) = olc_run(model, {"x": x, "a": np.array(axis, np.int64)}, threads=threads,
                             expect_kernel="olc_tensor::CumSum")
            cumsum_check(got, cumsum_oracle(x, axis, 0, reverse), f"axis={axis} rev={reverse}")
