"""Gemm and MatMul against a float64 numpy reference: every SIMD level,
1 and 2 threads, M/N/K of 0, 1 and tails around each register tile,
transposes, every bias layout, batched and broadcast MatMul, rank-1
operands, constant and dynamic B."""

from __future__ import annotations

import gc
import itertools

import numpy as np
import olc_matmul
import pytest
from helpers import LEVELS, NP, check_close, model, rand, session

import olc_core

FLOATS = ("float32", "float64", "float16", "bfloat16")
# Around the tiles: scalar 4x8 (f64 4x4), avx2 6x16, avx512 12x32 (f64 12x16).
DIMS_M = (0, 1, 3, 5, 12, 13, 25)
DIMS_N = (0, 1, 4, 7, 16, 33, 65)
DIMS_K = (0, 1, 17, 300)


def ref_gemm(a, b, c, alpha, beta, ta, tb):
    A = a.astype(np.float64).T if ta else a.astype(np.float64)
    B = b.astype(np.float64).T if tb else b.astype(np.float64)
    y = alpha * (A @ B)
    prod = abs(alpha) * (np.abs(A) @ np.abs(B))
    if c is not None and beta != 0:
        y = y + beta * c.astype(np.float64)
        prod = prod + np.abs(beta * c.astype(np.float64))
    return y, prod


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", FLOATS)
def test_matmul_dynamic_shapes(t, level, threads):
    rng = np.random.default_rng(1)
    s = session(model("MatMul", [("a", t), ("b", t)], [("y", t)]), level, threads)
    for M, N, K in itertools.product(DIMS_M, DIMS_N, DIMS_K):
        a, b = rand(rng, (M, K), t), rand(rng, (K, N), t)
        y = s.run(None, {"a": a, "b": b})[0]
        assert y.dtype == NP[t] and y.shape == (M, N)
        ref, prod = ref_gemm(a, b, None, 1.0, 0.0, False, False)
        check_close(y, ref, prod, K, t, f"{t} {level} {M}x{N}x{K}")
    assert s.kernel_usage() == ["olc_matmul::MatMul"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_matmul_large_paths(level, threads):
    """Shapes that reach K blocking, N blocking, split K and the thread grid;
    rows of A 4 KiB apart (K = 1024: packed at AVX-512, read in place below)."""
    rng = np.random.default_rng(2)
    s = session(model("MatMul", [("a", "float32"), ("b", "float32")], [("y", "float32")]), level, threads)
    for M, N, K in [(2, 2, 4096), (32, 32, 1500), (97, 1100, 70), (1, 1030, 600), (700, 1, 600), (64, 64, 513),
                    (130, 70, 260), (37, 45, 1024), (8, 40, 1024)]:
        a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
        y = s.run(None, {"a": a, "b": b})[0]
        ref, prod = ref_gemm(a, b, None, 1.0, 0.0, False, False)
        check_close(y, ref, prod, K, "float32", f"{level} {M}x{N}x{K}")


# Matrix-vector products whose matrix rows are 2 or 4 KiB apart (K = 512,
# 1024, 1536 float32; 256 float64), read in blocks of 8 rows instead of 16
# at AVX-512: row counts leaving a partial block, then the 4-row and
# one-row loops; A x b (N = 1) and a x B^T (M = 1, transB).
GEMV_SET_CASES = [(1027, 1, 512, 0), (1031, 1, 1024, 0), (21, 1, 1536, 0), (1, 37, 1024, 1), (1, 19, 512, 1)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", ["float32", "float64"])
def test_gemv_rows_a_cache_set_apart(t, level, threads):
    rng = np.random.default_rng(5)
    for M, N, K, tb in GEMV_SET_CASES:
        s = session(model("Gemm", [("a", t), ("b", t)], [("y", t)], {"transB": tb}), level, threads)
        a, b = rand(rng, (M, K), t), rand(rng, (N, K) if tb else (K, N), t)
        y = s.run(None, {"a": a, "b": b})[0]
        assert y.shape == (M, N)
        assert "gemv" in s.kernel_usage_details()[0], s.kernel_usage_details()
        ref, prod = ref_gemm(a, b, None, 1.0, 0.0, False, bool(tb))
        check_close(y, ref, prod, K, t, f"{t} {level} t{threads} {M}x{N}x{K} transB {tb}")


BIAS_SHAPES = [None, (), (1,), ("N",), (1, "N"), ("M", 1), ("M", "N"), (1, 1)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", FLOATS)
def test_gemm_attributes_and_bias(t, level, threads):
    rng = np.random.default_rng(3)
    sessions = {}
    # alpha with beta = 1 and with a general beta: the microkernels finish
    # the two in different epilogues; (1, 1) without bias is the plain one.
    for (ta, tb), bias, (M, N, K), scales in itertools.product(
            [(0, 0), (1, 0), (0, 1), (1, 1)], BIAS_SHAPES,
            [(13, 33, 17), (1, 7, 5), (6, 1, 40), (12, 32, 257), (3, 4, 0), (0, 5, 3), (26, 65, 70)],
            [(0.75, -1.5), (0.75, 1.0), (1.0, 1.0)]):
        if bias is None and scales == (0.75, -1.5):
            continue
        alpha, beta = scales
        key = (ta, tb, bias is not None, scales)
        if key not in sessions:
            ins = [("a", t), ("b", t)] + ([("c", t)] if bias is not None else [])
            sessions[key] = session(model("Gemm", ins, [("y", t)],
                                          {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}), level, threads)
        s = sessions[key]
        a = rand(rng, (K, M) if ta else (M, K), t)
        b = rand(rng, (N, K) if tb else (K, N), t)
        feeds = {"a": a, "b": b}
        c = None
        if bias is not None:
            shape = tuple(M if d == "M" else N if d == "N" else d for d in bias)
            c = rand(rng, shape, t)
            feeds["c"] = c
        y = s.run(None, feeds)[0]
        ref, prod = ref_gemm(a, b, c, alpha, beta, ta, tb)
        check_close(y, ref, prod, K, t, f"{t} {level} trans={ta}{tb} bias={bias} {M}x{N}x{K}")
    for s in sessions.values():
        assert s.kernel_usage() == ["olc_matmul::Gemm"]


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
def test_gemm_opsets(opset):
    rng = np.random.default_rng(4)
    a, b, c = rand(rng, (4, 3), "float32"), rand(rng, (3, 5), "float32"), rand(rng, (5,), "float32")
    s = session(model("Gemm", [("a", "float32"), ("b", "float32"), ("c", "float32")], [("y", "float32")],
                      {"alpha": 2.0, "beta": 0.5}, opset=opset))
    y = s.run(None, {"a": a, "b": b, "c": c})[0]
    ref, prod = ref_gemm(a, b, c, 2.0, 0.5, 0, 0)
    check_close(y, ref, prod, 3, "float32")
    assert s.kernel_usage() == ["olc_matmul::Gemm"]


def test_gemm_absent_c():
    rng = np.random.default_rng(9)
    a, b = rand(rng, (4, 3), "float32"), rand(rng, (3, 5), "float32")
    s = session(model("Gemm", [("a", "float32"), ("b", "float32"), ("", None)], [("y", "float32")],
                      {"alpha": 0.5}, opset=13))
    y = s.run(None, {"a": a, "b": b})[0]
    ref, prod = ref_gemm(a, b, None, 0.5, 1.0, 0, 0)
    check_close(y, ref, prod, 3, "float32")
    assert s.kernel_usage() == ["olc_matmul::Gemm"]


def test_gemm_beta_zero_ignores_bias_nan():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 4), np.float32)
    c = np.full((4,), np.nan, np.float32)
    s = session(model("Gemm", [("a", "float32"), ("b", "float32"), ("c", "float32")], [("y", "float32")],
                      {"beta": 0.0}))
    np.testing.assert_array_equal(s.run(None, {"a": a, "b": b, "c": c})[0], np.full((2, 4), 3, np.float32))


def test_special_values_propagate():
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [1.0, 2.0]], np.float32)
    b = np.array([[1.0, -1.0, 0.0], [2.0, 3.0, 4.0]], np.float32)
    for level in LEVELS:
        s = session(model("MatMul", [("a", "float32"), ("b", "float32")], [("y", "float32")]), level)
        y = s.run(None, {"a": a, "b": b})[0]
        with np.errstate(invalid="ignore"):
            ref = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
        fin = np.isfinite(ref)
        np.testing.assert_allclose(y[fin], ref[fin], rtol=1e-6)
        np.testing.assert_array_equal(y[np.isinf(ref)], ref[np.isinf(ref)])


BATCH_CASES = [
    ((2, 3, 5, 7), (3, 7, 4)),
    ((8, 13, 17), (17, 33)),      # B shared: folded into M
    ((17,), (3, 17, 9)),          # rank-1 A
    ((4, 13, 17), (17,)),         # rank-1 B
    ((17,), (17,)),               # scalar output
    ((1, 5, 6), (3, 6, 2)),       # A broadcast
    ((3, 1, 5, 6), (1, 2, 6, 40)),
    ((2, 0, 4), (2, 4, 3)),
    ((2, 3, 0), (2, 0, 5)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("const_b", [False, True])
@pytest.mark.parametrize("t", ["float32", "float64", "float16", "bfloat16"])
def test_matmul_batched(t, const_b, level, threads):
    rng = np.random.default_rng(5)
    for sa, sb in BATCH_CASES:
        a, b = rand(rng, sa, t), rand(rng, sb, t)
        if const_b:
            m = model("MatMul", [("a", t), ("b", t)], [("y", t)], initializers=[("b", b)])
            feeds = {"a": a}
        else:
            m = model("MatMul", [("a", t), ("b", t)], [("y", t)])
            feeds = {"a": a, "b": b}
        s = session(m, level, threads)
        y = s.run(None, feeds)[0]
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        prod = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        assert y.shape == ref.shape, (sa, sb)
        check_close(y, ref, prod, sa[-1], t, f"{sa}x{sb}")
        assert s.kernel_usage() == ["olc_matmul::MatMul"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", FLOATS)
def test_constant_b_gemm(t, level, threads):
    rng = np.random.default_rng(6)
    for (M, N, K), tb in itertools.product([(1, 65, 33), (13, 33, 300), (30, 100, 20), (1, 1, 9)], [0, 1]):
        b = rand(rng, (N, K) if tb else (K, N), t)
        c = rand(rng, (N,), t)
        m = model("Gemm", [("a", t), ("b", t), ("c", t)], [("y", t)], {"transB": tb, "alpha": 1.25},
                  initializers=[("b", b), ("c", c)])
        s = session(m, level, threads)
        a = rand(rng, (M, K), t)
        y = s.run(None, {"a": a})[0]
        ref, prod = ref_gemm(a, b, c, 1.25, 1.0, 0, tb)
        check_close(y, ref, prod, K, t, f"{t} const {M}x{N}x{K} tb={tb}")
        assert "prepacked-B" in s.kernel_usage_details()[0]


def test_prepacked_cache_shared_and_released():
    gc.collect()
    base = olc_matmul.prepacked_bytes()
    rng = np.random.default_rng(7)
    w = rand(rng, (64, 96), "float32")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="n1"),
             helper.make_node("Slice", ["h", "st", "en", "ax"], ["h2"], name="sl"),
             helper.make_node("MatMul", ["h2", "w"], ["y"], name="n2")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([0], np.int64), "st"),
         numpy_helper.from_array(np.array([64], np.int64), "en"),
         numpy_helper.from_array(np.array([1], np.int64), "ax")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    s = olc_core.Session(m, record_usage=True)
    held = olc_matmul.prepacked_bytes() - base
    assert 64 * 96 * 4 <= held <= 64 * 128 * 4  # one copy (N padded to the tile), not two
    # The session sees the same: each node holds the buffer, the total counts it once.
    per_node = {e.node_name: e.prepacked_bytes for e in s.kernel_plan()}
    assert per_node["n1"] == per_node["n2"] == held and per_node["sl"] == 0
    assert s.prepacked_bytes() == held
    x = rand(rng, (5, 64), "float32")
    y = s.run(None, {"x": x})[0]
    ref = (x.astype(np.float64) @ w)[:, :64] @ w
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    details = s.kernel_usage_details()
    assert sum("shared" in d for d in details) == 1, details
    del s
    gc.collect()
    assert olc_matmul.prepacked_bytes() == base


def test_errors_name_the_node():
    s = session(model("MatMul", [("a", "float32"), ("b", "float32")], [("y", "float32")], name="badmm"))
    with pytest.raises(olc_core.OlcError, match=r"badmm.*inner dimensions differ"):
        s.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((4, 2), np.float32)})
    with pytest.raises(olc_core.OlcError, match=r"badmm.*cannot be broadcast"):
        s.run(None, {"a": np.ones((2, 2, 3), np.float32), "b": np.ones((3, 3, 2), np.float32)})
    g = session(model("Gemm", [("a", "float32"), ("b", "float32"), ("c", "float32")], [("y", "float32")],
                      name="badgemm"))
    with pytest.raises(olc_core.OlcError, match=r"badgemm.*bias C of shape \[3\]"):
        g.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((3, 4), np.float32),
                     "c": np.ones((3,), np.float32)})
    with pytest.raises(olc_core.OlcError, match=r"badgemm.*inner dimensions differ"):
        g.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 4), np.float32),
                     "c": np.ones((4,), np.float32)})


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_tuning_overrides_reach_every_blocking_path(level, threads):
    """Small K and N blocks, A packed instead of read in place, B read in
    place for more row blocks, no GEMV shortcut: every combination must still
    match the reference (the defaults alone never reach some of them)."""
    from olc_core import tuning

    isa = level
    names = {"kc": 16, "nc": 64, "direct_a": 0, "direct_b_max_mblocks": 100, "gemv_max": 1,
             "parallel_min_macs": 0, "split_k_min": 64}
    rng = np.random.default_rng(8)
    try:
        for t in ("float32", "float64"):
            for k, v in names.items():
                tuning.set("olc_matmul", "MatMul", k, v, implementation=isa, dtype=t)
            s = session(model("MatMul", [("a", t), ("b", t)], [("y", t)]), level, threads)
            for M, N, K in [(3, 70, 50), (30, 130, 77), (2, 3, 300), (25, 33, 40)]:
                a, b = rand(rng, (M, K), t), rand(rng, (K, N), t)
                y = s.run(None, {"a": a, "b": b})[0]
                ref, prod = ref_gemm(a, b, None, 1.0, 0.0, False, False)
                check_close(y, ref, prod, K, t, f"tuned {t} {level} {M}x{N}x{K}")
            for k in names:
                assert tuning.get("olc_matmul", "MatMul", k, implementation=isa, dtype=t) == names[k]
    finally:
        tuning.reset()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_prepacked_b_panel_order_and_prefetch(level, threads):
    """A prepacked B is walked panel by panel, every row block using a panel
    before the next, each prefetching a slice of the panel that follows (the
    next one in the block, the first of the next K block, of the next column
    block). Small blocks put several of each in one product; row, column
    and K tails everywhere; a bias (Gemm C) and the split over threads."""
    from olc_core import tuning

    rng = np.random.default_rng(9)
    shapes = [(37, 200, 150), (1, 33, 5), (25, 64, 64), (13, 97, 33), (0, 40, 20)]
    try:
        for t in ("float32", "float64"):
            for blocking in ({"kc": 16, "nc": 64}, {}):
                tuning.reset()
                for k, v in blocking.items():
                    tuning.set("olc_matmul", "MatMul", k, v, implementation=level, dtype=t)
                    tuning.set("olc_matmul", "Gemm", k, v, implementation=level, dtype=t)
                for M, N, K in shapes:
                    b = rand(rng, (K, N), t)
                    c = rand(rng, (N,), t)
                    for op in ("MatMul", "Gemm"):
                        if op == "MatMul":
                            m = model(op, [("a", t), ("b", t)], [("y", t)], initializers=[("b", b)])
                        else:
                            m = model(op, [("a", t), ("b", t), ("c", t)], [("y", t)], initializers=[("b", b), ("c", c)])
                        s = session(m, level, threads)
                        a = rand(rng, (M, K), t)
                        y = s.run(None, {"a": a})[0]
                        ref, prod = ref_gemm(a, b, c if op == "Gemm" else None, 1.0, 1.0, 0, 0)
                        check_close(y, ref, prod, K, t, f"{op} {t} {level} {blocking} {M}x{N}x{K}")
                        if M:
                            assert "prepacked-B" in s.kernel_usage_details()[0]
    finally:
        tuning.reset()


def test_gemm_blocking_follows_the_caches():
    """kc keeps an A strip and a B panel in L1, nc the packed B block in half
    of an L2 of 1 MiB or more, an eighth of a smaller one, per thread (a
    cache SMT siblings share counts as its share); the tuned defaults (256,
    512) where the caches allow them."""
    from olc_matmul import _ext

    K = 1024
    assert _ext.gemm_blocking(48 * K, 1, 2048 * K, 1) == (256, 512)  # Sapphire Rapids
    assert _ext.gemm_blocking(32 * K, 1, 1024 * K, 1) == (256, 512)  # Zen 4
    assert _ext.gemm_blocking(32 * K, 1, 512 * K, 1) == (256, 64)    # Zen 2/3: a 512 KiB L2
    assert _ext.gemm_blocking(32 * K, 2, 512 * K, 2) == (128, 64)    # both vCPUs on one core
    assert _ext.gemm_blocking(32 * K, 1, 1024 * K, 1, float64=True) == (256, 256)
    assert _ext.gemm_blocking(32 * K, 1, 512 * K, 1, float64=True) == (256, 64)
    assert _ext.gemm_blocking(0, 1, 0, 1) == (256, 512)  # caches unknown
    # This host's defaults are the ones its caches give.
    c = _ext.cache_info()
    kc, nc = _ext.gemm_blocking(c["l1d_bytes"], c["l1d_sharers"], c["l2_bytes"], c["l2_sharers"])
    from olc_core import tuning

    session(model("MatMul", [("a", "float32"), ("b", "float32")], [("y", "float32")]), LEVELS[-1])
    assert tuning.get("olc_matmul", "MatMul", "kc", implementation=LEVELS[-1], dtype="float32") == kc
    assert tuning.get("olc_matmul", "MatMul", "nc", implementation=LEVELS[-1], dtype="float32") == nc


def test_fma_peak_probes():
    """The AVX2 (ymm) and AVX-512 (zmm) FMA peak probes: positive where the
    CPU has the ISA whatever the OLC_SIMD cap, 0 where it lacks it."""
    import olc_matmul

    feats = olc_core.simd.detected_cpu_features()
    for isa, has in (("avx2", feats["avx2"] and feats["fma"]), ("avx512", feats["avx512f"])):
        with olc_core.simd_cap("scalar"):
            peak = olc_matmul.fma_peak_gflops(200_000, isa=isa)
        assert (peak > 0) == bool(has), (isa, peak)
    with pytest.raises(ValueError, match="isa must be"):
        olc_matmul.fma_peak_gflops(1000, isa="sse")


AMX_BF16 = bool(olc_core.simd.detected_cpu_features().get("amx_bf16"))  # the CPU, whatever OLC_SIMD caps


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("use_amx", [1, 0])
def test_bfloat16_blocks_of_32(use_amx, threads):
    """bfloat16 GEMMs large enough for the 32 x 32 blocks that AMX tiles take
    where the CPU has AMX-BF16 (32-k steps, then the vdpbf16ps kernel for the
    K tail, the partial panels and rows, and the epilogue), and the same
    with AMX turned off: constant and dynamic B, transB, bias, alpha/beta,
    K over several k blocks (kc 48 and the default) and split K."""
    from olc_core import tuning

    rng = np.random.default_rng(11)
    t = "bfloat16"
    shapes = [(32, 32, 32), (33, 65, 64), (64, 96, 95), (100, 33, 300), (40, 64, 1000), (32, 32, 4096)]
    try:
        tuning.set("olc_matmul", "MatMul", "use_amx", use_amx, implementation="default", dtype=t)
        for kc in (None, 48):
            if kc:
                for op in ("MatMul", "Gemm"):
                    tuning.set("olc_matmul", op, "kc", kc, implementation="avx512", dtype=t)
            for (M, N, K), const_b, tb in itertools.product(shapes, [False, True], [0, 1]):
                a = rand(rng, (M, K), t)
                b = rand(rng, (N, K) if tb else (K, N), t)
                c = rand(rng, (N,), t)
                inits = [("b", b), ("c", c)] if const_b else [("c", c)]
                m = model("Gemm", [("a", t), ("b", t), ("c", t)], [("y", t)],
                          {"transB": tb, "alpha": 0.75, "beta": 1.5}, initializers=inits)
                s = session(m, "avx512", threads)
                y = s.run(None, {"a": a} if const_b else {"a": a, "b": b})[0]
                ref, prod = ref_gemm(a, b, c, 0.75, 1.5, 0, tb)
                check_close(y, ref, prod, K, t, f"amx={use_amx} kc={kc} {M}x{N}x{K} const={const_b} tb={tb}")
                detail = s.kernel_usage_details()[0]
                if "avx512bf16" in detail:  # the CPU has AVX512_BF16
                    assert ("amx-bf16" in detail) == bool(use_amx and AMX_BF16), detail
                mm = model("MatMul", [("a", t), ("b", t)], [("y", t)])
                bb = b.T.copy() if tb else b
                y = session(mm, "avx512", threads).run(None, {"a": a, "b": bb})[0]
                ref, prod = ref_gemm(a, bb, None, 1.0, 0.0, 0, 0)
                check_close(y, ref, prod, K, t, f"MatMul amx={use_amx} kc={kc} {M}x{N}x{K}")
    finally:
        tuning.reset()
