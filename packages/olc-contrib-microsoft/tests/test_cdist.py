"""CDist: the optimized kernel at every SIMD level against the naive
reference (sums of squared differences in float64), both metrics, float32
and float64, the few-row exact path and the packed product path (B fed or a
constant packed at creation), tails of every panel width, close and
identical pairs (where |a|^2 + |b|^2 - 2ab cancels), onnxruntime, guard
pages and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import LEVELS, assert_close, make_model, ort_run, run_checked, session

import olc_core
from olc_core.testing import guarded

OP = "CDist"
METRICS = ("sqeuclidean", "euclidean")
# M: 1..8 take the exact few-row path, more the packed products.
SHAPES = [(1, 5, 7), (3, 17, 1), (8, 33, 768), (9, 1, 7), (13, 16, 4095), (50, 65, 33), (97, 100, 768),
          (130, 7, 64), (53, 1030, 260)]


def formula(A, B, metric):
    d = ((A[:, None, :].astype(np.float64) - B[None, :, :].astype(np.float64)) ** 2).sum(-1)
    return np.sqrt(d) if metric == "euclidean" else d


def model(t, metric, B=None):
    inits = {"b": B} if B is not None else None
    return make_model(OP, [("a", t), ("b", t)], ["c"], {"metric": metric}, initializers=inits)


def tol(t, metric):
    # The packed path keeps a product-form result only where it is above a
    # quarter of |a|^2 + |b|^2: a few float32 rounding errors of that sum.
    return {"float32": (2e-6, 2e-5), "float64": (1e-14, 1e-13)}[t]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("const_b", [False, True])
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("t", ["float32", "float64"])
def test_matches_naive(t, M, N, K, const_b, level):
    rng = np.random.default_rng(M * 100 + N + K)
    A = rng.standard_normal((M, K)).astype(t)
    B = rng.standard_normal((N, K)).astype(t)
    for metric in METRICS:
        m = model(t, metric, B if const_b else None)
        f = {"a": A} if const_b else {"a": A, "b": B}
        (opt,) = run_checked(m, OP, f, level)
        (nai,) = run_checked(m, OP, f, level, naive=True)
        assert opt.shape == (M, N) and opt.dtype == np.dtype(t)
        ref = formula(A, B, metric)
        assert_close(nai, ref, t, "naive vs float64", tol=(0.0, 2e-7) if t == "float32" else (0.0, 1e-14))
        assert_close(opt, nai, t, f"{metric} optimized vs naive", tol=tol(t, metric))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("M", [4, 40])
@pytest.mark.parametrize("t", ["float32", "float64"])
def test_close_and_identical_pairs(t, M, level):
    # Points far from the origin next to each other: the product form alone
    # cancels to noise; every such pair must come out of the exact sum.
    rng = np.random.default_rng(M)
    K = 300
    B = (100.0 + rng.standard_normal((37, K))).astype(t)
    A = B[rng.integers(0, 37, M)] + (1e-3 * rng.standard_normal((M, K))).astype(t)
    A[0] = B[5]  # an exact duplicate: distance 0
    for metric in METRICS:
        m = model(t, metric)
        (opt,) = run_checked(m, OP, {"a": A, "b": B}, level)
        (nai,) = run_checked(m, OP, {"a": A, "b": B}, level, naive=True)
        assert opt[0, 5] == 0.0
        # relative to each distance itself, the small ones included
        assert_close(opt, nai, t, "close pairs", tol=(0.0, 1e-4 if t == "float32" else 1e-12))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("M", [2, 20])
def test_special_values(M, level):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((M, 19)).astype(np.float32)
    B = rng.standard_normal((21, 19)).astype(np.float32)
    A[0, 3] = np.inf
    A[1, 4] = np.nan
    B[2, 0] = -np.inf
    (opt,) = run_checked(model("float32", "sqeuclidean"), OP, {"a": A, "b": B}, level)
    (nai,) = run_checked(model("float32", "sqeuclidean"), OP, {"a": A, "b": B}, level, naive=True)
    np.testing.assert_array_equal(np.isnan(opt), np.isnan(nai))
    assert np.isinf(opt[0, 0]) and np.all(np.isnan(opt[1])) and np.isinf(opt[5 % M if M > 2 else 0, 2])
    fin = np.isfinite(nai)
    assert_close(opt[fin], nai[fin], "float32", "finite entries", tol=tol("float32", "sqeuclidean"))


@pytest.mark.parametrize("M,N,K", [(1, 10, 7), (7, 40, 768), (64, 100, 768), (128, 33, 4095)])
@pytest.mark.parametrize("t", ["float32", "float64"])
def test_against_onnxruntime(t, M, N, K):
    rng = np.random.default_rng(M + N + K)
    A = rng.standard_normal((M, K)).astype(t)
    B = rng.standard_normal((N, K)).astype(t)
    for metric in METRICS:
        m = model(t, metric)
        (ref,) = ort_run(m, {"a": A, "b": B})
        (opt,) = run_checked(m, OP, {"a": A, "b": B}, LEVELS[-1])
        # onnxruntime takes |a|^2 + |b|^2 - 2ab everywhere: absolute errors of
        # a few roundings of |a|^2 + |b|^2
        assert_close(opt, ref, t, f"{metric} vs onnxruntime", tol=(1e-5, 1e-5) if t == "float32" else (1e-13, 1e-13))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("M,N,K", [(3, 9, 13), (23, 37, 21)])
def test_guard_pages(M, N, K, at, level):
    rng = np.random.default_rng(K)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((N, K)).astype(np.float32)
    m = model("float32", "euclidean")
    (want,) = run_checked(m, OP, {"a": A, "b": B}, level, naive=True)
    (got,) = run_checked(m, OP, {"a": guarded(A, at=at), "b": guarded(B, at=at)}, level)
    assert_close(got, want, "float32", "guarded", tol=tol("float32", "euclidean"))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("M", [5, 300])
@pytest.mark.parametrize("N", [200, 600])  # 600: work items of several panel groups per row chunk
def test_threads(M, N, threads):
    rng = np.random.default_rng(8)
    A = rng.standard_normal((M, 256)).astype(np.float32)
    B = rng.standard_normal((N, 256)).astype(np.float32)
    m = model("float32", "sqeuclidean")
    (one,) = run_checked(m, OP, {"a": A, "b": B}, LEVELS[-1])
    (many,) = run_checked(m, OP, {"a": A, "b": B}, LEVELS[-1], threads=threads)
    np.testing.assert_array_equal(one, many)


def test_empty_and_zero_width():
    m = model("float32", "euclidean")
    (c,) = run_checked(m, OP, {"a": np.zeros((0, 4), np.float32), "b": np.ones((3, 4), np.float32)}, LEVELS[-1])
    assert c.shape == (0, 3)
    (c,) = run_checked(m, OP, {"a": np.ones((2, 0), np.float32), "b": np.ones((3, 0), np.float32)}, LEVELS[-1])
    np.testing.assert_array_equal(c, np.zeros((2, 3), np.float32))


ERRORS = [
    ((3, 4), (5, 3), r"B has shape \[5, 3\], expected \[N, 4\] \(the columns of A \[3, 4\]\)"),
    ((3, 4, 1), (5, 4), r"A must have rank 2 \[M, K\], got shape \[3, 4, 1\]"),
    ((3, 4), (4,), r"B has shape \[4\], expected \[N, 4\]"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("a_shape,b_shape,pattern", ERRORS)
def test_errors_name_the_node(a_shape, b_shape, pattern, naive):
    s = session(model("float32", "sqeuclidean"), LEVELS[-1], naive)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(CDist\): " + pattern):
        s.run(None, {"a": np.ones(a_shape, np.float32), "b": np.ones(b_shape, np.float32)})


def test_unsupported_metric():
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*metric 'cosine' is not supported"):
        olc_core.Session(model("float32", "cosine"), strict=True)
    m = make_model(OP, [("a", "float32"), ("b", "float64")], ["c"])
    with pytest.raises(olc_core.NoKernelError, match=r"node 'n0'.*different types"):
        olc_core.Session(m, strict=True)
