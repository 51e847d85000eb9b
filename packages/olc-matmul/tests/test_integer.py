"""MatMulInteger (exact, int64 numpy reference) and QLinearMatMul (float64
reference with round-half-even and saturation, plus onnxruntime) at every
SIMD level, 1 and 2 threads, every sign mix, zero points scalar / per row /
per column, constant and dynamic B, batches and tails."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, model, session

import olc_core

I8 = ("uint8", "int8")
SHAPES = [(0, 5, 3), (1, 1, 1), (5, 7, 3), (13, 33, 17), (12, 32, 1024), (25, 65, 1030), (3, 100, 9),
          (130, 70, 500), (200, 300, 700)]  # the last two run on two threads; the last also splits the
# row and column sums over the threads (above 256 KiB of operands)


def rand_q(rng, shape, t):
    info = np.iinfo(NP[t])
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64).astype(NP[t])


def ref_mmi(a, b, za, zb):
    A = a.astype(np.int64) - (np.asarray(za, np.int64).reshape(-1, 1) if za is not None else 0)
    B = b.astype(np.int64) - (np.asarray(zb, np.int64).reshape(1, -1) if zb is not None else 0)
    return A @ B


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("ta,tb", list(itertools.product(I8, I8)))
def test_matmul_integer(ta, tb, level, threads):
    rng = np.random.default_rng(11)
    s = session(model("MatMulInteger", [("a", ta), ("b", tb), ("za", ta), ("zb", tb)], [("y", "int32")], opset=10),
                level, threads)
    s2 = session(model("MatMulInteger", [("a", ta), ("b", tb)], [("y", "int32")], opset=10), level, threads)
    for M, N, K in SHAPES:
        a, b = rand_q(rng, (M, K), ta), rand_q(rng, (K, N), tb)
        for za_shape, zb_shape in [((), ()), ((M,), (N,)), ((), (N,)), ((M,), ())]:
            za, zb = rand_q(rng, za_shape, ta), rand_q(rng, zb_shape, tb)
            y = s.run(None, {"a": a, "b": b, "za": za, "zb": zb})[0]
            assert y.dtype == np.int32
            np.testing.assert_array_equal(y, ref_mmi(a, b, za, zb).astype(np.int32))
        y = s2.run(None, {"a": a, "b": b})[0]
        np.testing.assert_array_equal(y, ref_mmi(a, b, None, None).astype(np.int32))
    assert s.kernel_usage() == ["olc_matmul::MatMulInteger"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tb", I8)
def test_matmul_integer_constant_b_and_batches(tb, level):
    rng = np.random.default_rng(12)
    for sa, sb in [((4, 13, 17), (17, 33)), ((2, 3, 5, 7), (3, 7, 4)), ((7,), (7, 40)), ((3, 9, 70), (70,))]:
        a, b = rand_q(rng, sa, "uint8"), rand_q(rng, sb, tb)
        zb = rand_q(rng, (), tb)
        m = model("MatMulInteger", [("a", "uint8"), ("b", tb), ("", None), ("zb", tb)], [("y", "int32")],
                  opset=10, initializers=[("b", b)])
        s = session(m, level, 2)
        y = s.run(None, {"a": a, "zb": zb})[0]
        ref = np.matmul(a.astype(np.int64), b.astype(np.int64) - int(zb))
        np.testing.assert_array_equal(y, ref.astype(np.int32))


def ref_qlm(a, sa, za, b, sb, zb, sy, zy):
    acc = ref_mmi(a, b, za, zb).astype(np.float64)
    mult = (np.asarray(sa, np.float32).reshape(-1, 1) * np.asarray(sb, np.float32).reshape(1, -1)) \
        / np.asarray(sy, np.float32).reshape(-1, 1)
    d = np.rint(acc * mult.astype(np.float64) + np.asarray(zy, np.float64).reshape(-1, 1))
    info = np.iinfo(zy.dtype)
    return np.clip(d, info.min, info.max).astype(zy.dtype)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("ta,tb,ty", [("uint8", "uint8", "uint8"), ("int8", "int8", "int8"),
                                      ("uint8", "int8", "uint8"), ("int8", "uint8", "int8")])
@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul(opset, ta, tb, ty, level, threads):
    rng = np.random.default_rng(13)
    ins = [("a", ta), ("sa", "float32"), ("za", ta), ("b", tb), ("sb", "float32"), ("zb", tb), ("sy", "float32"),
           ("zy", ty)]
    m = model("QLinearMatMul", ins, [("y", ty)], opset=opset)
    s = session(m, level, threads)
    try:
        o = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime has no kernel for some sign mixes
        o = None
    for M, N, K in SHAPES:
        # olc against the exact reference, over the full range of both types.
        feeds = qlinear_feeds(rng, M, N, K, ta, tb, ty)
        np.testing.assert_array_equal(s.run(None, feeds)[0], ref_qlm(*(feeds[k] for k in QLM_INPUTS)))
        if o is None:
            continue
        # onnxruntime as a second oracle, on inputs where its result is exact
        # but for its float32 requantization (one unit either way). On x86
        # CPUs without VNNI its uint8 x int8 kernel adds pairs of products in
        # saturating 16-bit lanes (VPMADDUBSW, a documented onnxruntime
        # limitation): with the uint8 operand below 128 no pair can saturate,
        # on any ISA it picks.
        feeds = qlinear_feeds(rng, M, N, K, ta, tb, ty, saturation_safe=True)
        y = s.run(None, feeds)[0]
        np.testing.assert_array_equal(y, ref_qlm(*(feeds[k] for k in QLM_INPUTS)))
        yo = o.run(None, feeds)[0]
        assert np.abs(y.astype(np.int32) - yo.astype(np.int32)).max(initial=0) <= 1
    assert s.kernel_usage() == ["olc_matmul::QLinearMatMul"]


QLM_INPUTS = ("a", "sa", "za", "b", "sb", "zb", "sy", "zy")


def qlinear_feeds(rng, M, N, K, ta, tb, ty, saturation_safe=False):
    """Scalar scales and zero points; with ``saturation_safe``, a uint8 operand
    multiplied with an int8 one stays below 128 (see test_qlinear_matmul)."""
    def operand(shape, t, other):
        if saturation_safe and t == "uint8" and other == "int8":
            return rng.integers(0, 127, size=shape, endpoint=True).astype(np.uint8)
        return rand_q(rng, shape, t)

    feeds = {"a": operand((M, K), ta, tb), "sa": np.float32(rng.uniform(0.01, 0.05)), "za": rand_q(rng, (), ta),
             "b": operand((K, N), tb, ta), "sb": np.float32(rng.uniform(0.01, 0.05)), "zb": rand_q(rng, (), tb),
             "sy": np.float32(rng.uniform(0.5, 4.0) * np.sqrt(max(K, 1))), "zy": rand_q(rng, (), ty)}
    return {k: np.asarray(v) for k, v in feeds.items()}


def test_qlinear_saturation_safe_feeds_cannot_saturate_16_bit_pairs():
    rng = np.random.default_rng(16)
    for ta, tb in (("uint8", "int8"), ("int8", "uint8")):
        f = qlinear_feeds(rng, 40, 40, 64, ta, tb, "uint8", saturation_safe=True)
        u, s8 = (f["a"], f["b"]) if ta == "uint8" else (f["b"], f["a"])
        # The extreme sums of two adjacent products fit in int16.
        lo, hi = 2 * int(u.max()) * int(s8.min()), 2 * int(u.max()) * int(s8.max())
        i16 = np.iinfo(np.int16)
        assert u.max() <= 127 and i16.min <= lo and hi <= i16.max


def test_qlinear_per_row_and_column():
    rng = np.random.default_rng(14)
    M, N, K = 13, 33, 40
    ins = [("a", "uint8"), ("sa", "float32"), ("za", "uint8"), ("b", "int8"), ("sb", "float32"), ("zb", "int8"),
           ("sy", "float32"), ("zy", "uint8")]
    s = session(model("QLinearMatMul", ins, [("y", "uint8")], opset=10))
    a, b = rand_q(rng, (M, K), "uint8"), rand_q(rng, (K, N), "int8")
    feeds = {"a": a, "sa": rng.uniform(0.01, 0.05, M).astype(np.float32), "za": rand_q(rng, (M,), "uint8"), "b": b,
             "sb": rng.uniform(0.01, 0.05, N).astype(np.float32), "zb": rand_q(rng, (N,), "int8"),
             "sy": np.float32(3.0), "zy": np.uint8(100)}
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    y = s.run(None, feeds)[0]
    np.testing.assert_array_equal(y, ref_qlm(*[feeds[k] for k in ("a", "sa", "za", "b", "sb", "zb", "sy", "zy")]))


def test_integer_errors():
    s = session(model("MatMulInteger", [("a", "uint8"), ("b", "int8"), ("za", "uint8")], [("y", "int32")],
                      opset=10, name="mmi0"))
    with pytest.raises(olc_core.OlcError, match=r"mmi0.*inner dimensions differ"):
        s.run(None, {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((4, 2), np.int8), "za": np.uint8(0)})
    with pytest.raises(olc_core.OlcError, match=r"mmi0.*a_zero_point of shape \[3\]"):
        s.run(None, {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((3, 2), np.int8),
                     "za": np.zeros(3, np.uint8)})


@pytest.mark.parametrize("st", ["float16", "bfloat16"])
def test_qlinear_opset21_half_scales(st):
    rng = np.random.default_rng(15)
    M, N, K = 9, 40, 70
    ins = [("a", "int8"), ("sa", st), ("za", "int8"), ("b", "int8"), ("sb", st), ("zb", "int8"),
           ("sy", st), ("zy", "int8")]
    s = session(model("QLinearMatMul", ins, [("y", "int8")], opset=21))
    a, b = rand_q(rng, (M, K), "int8"), rand_q(rng, (K, N), "int8")
    feeds = {"a": a, "sa": np.asarray(0.02, NP[st]), "za": np.asarray(3, np.int8), "b": b,
             "sb": np.asarray(0.03, NP[st]), "zb": np.asarray(-2, np.int8), "sy": np.asarray(4.0, NP[st]),
             "zy": np.asarray(-5, np.int8)}
    y = s.run(None, feeds)[0]
    ref = ref_qlm(a, feeds["sa"].astype(np.float32), feeds["za"], b, feeds["sb"].astype(np.float32), feeds["zb"],
                  feeds["sy"].astype(np.float32), feeds["zy"])
    np.testing.assert_array_equal(y, ref)
    assert s.kernel_usage() == ["olc_matmul::QLinearMatMul"]


@pytest.mark.parametrize("ta,tb", list(itertools.product(I8, I8)))
def test_matmul_integer_avx512_without_vnni(ta, tb):
    """The AVX-512 vpmaddwd kernel (machines without VNNI), forced through the
    use_vnni tuning switch."""
    from olc_core import tuning

    if "avx512" not in LEVELS:
        pytest.skip("no AVX-512")
    rng = np.random.default_rng(16)
    try:
        tuning.set("olc_matmul", "MatMulInteger", "use_vnni", 0)
        s = session(model("MatMulInteger", [("a", ta), ("b", tb), ("za", ta), ("zb", tb)], [("y", "int32")],
                          opset=10), "avx512", 2)
        for M, N, K in SHAPES:
            a, b = rand_q(rng, (M, K), ta), rand_q(rng, (K, N), tb)
            za, zb = rand_q(rng, (M,), ta), rand_q(rng, (), tb)
            y = s.run(None, {"a": a, "b": b, "za": za, "zb": zb})[0]
            np.testing.assert_array_equal(y, ref_mmi(a, b, za, zb).astype(np.int32))
        assert "[avx512]" in s.kernel_usage_details()[0]
    finally:
        tuning.reset()


def test_qlinear_rounds_half_to_even_and_saturates():
    rng = np.random.default_rng(17)
    M, N, K = 6, 37, 5
    ins = [("a", "int8"), ("sa", "float32"), ("za", "int8"), ("b", "int8"), ("sb", "float32"), ("zb", "int8"),
           ("sy", "float32"), ("zy", "uint8")]
    s = session(model("QLinearMatMul", ins, [("y", "uint8")], opset=10))
    a = rng.integers(-3, 4, (M, K)).astype(np.int8)
    b = rng.integers(-3, 4, (K, N)).astype(np.int8)
    for sy, zy in [(1.0, 100), (1.0, 2), (0.01, 128)]:  # mult 0.5: every odd sum is a tie; then saturation
        feeds = {"a": a, "sa": np.asarray(1.0, np.float32), "za": np.asarray(0, np.int8), "b": b,
                 "sb": np.asarray(0.5, np.float32), "zb": np.asarray(0, np.int8),
                 "sy": np.asarray(sy, np.float32), "zy": np.asarray(zy, np.uint8)}
        y = s.run(None, feeds)[0]
        ref = ref_qlm(a, feeds["sa"], feeds["za"], b, feeds["sb"], feeds["zb"], feeds["sy"], feeds["zy"])
        np.testing.assert_array_equal(y, ref)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    assert (acc % 2 != 0).any()  # ties were present


@pytest.mark.parametrize("use_amx", [1, 0])
def test_matmul_integer_amx_blocks(use_amx):
    """AMX-INT8 32 x 32 blocks (uint8 A read in place) with the vpdpbusd
    kernel for the K tail past a multiple of 64 and for partial blocks, and
    the same shapes with AMX switched off (use_amx): both exact."""
    from olc_core import tuning

    if "avx512" not in LEVELS:
        pytest.skip("no AVX-512")
    feats = olc_core.simd.detected_cpu_features()
    has_amx = feats.get("amx_tile") and feats.get("amx_int8") and feats.get("avx512_vnni")
    rng = np.random.default_rng(18)
    try:
        tuning.set("olc_matmul", "MatMulInteger", "use_amx", use_amx)
        for threads in (1, 2):
            s = session(model("MatMulInteger", [("a", "uint8"), ("b", "int8"), ("za", "uint8"), ("zb", "int8")],
                              [("y", "int32")], opset=10), "avx512", threads)
            for M, N, K in [(32, 32, 64), (64, 96, 256), (33, 31, 64), (100, 70, 1300), (32, 64, 1024 + 68),
                            (65, 129, 60), (96, 32, 4)]:
                a, b = rand_q(rng, (M, K), "uint8"), rand_q(rng, (K, N), "int8")
                za, zb = rand_q(rng, (M,), "uint8"), rand_q(rng, (N,), "int8")
                y = s.run(None, {"a": a, "b": b, "za": za, "zb": zb})[0]
                np.testing.assert_array_equal(y, ref_mmi(a, b, za, zb).astype(np.int32))
            assert s.kernel_usage_details()[0].startswith(
                "olc_matmul::MatMulInteger[amx+" if use_amx and has_amx else "olc_matmul::MatMulInteger[avx512")
    finally:
        tuning.reset()


def bounded_b(rng, shape, tb, worst=128):
    """B whose adjacent rows (2p, 2p + 1) have kernel-space values (int8, or
    uint8 less 128) with |b0| + |b1| <= worst in every column; the extreme
    pairs (-128 with 0, 64 with -64, 127 with 1, ...) planted in some columns."""
    v = rng.integers(-64, 65, size=shape, dtype=np.int64)
    K, N = shape[-2], shape[-1]
    extremes = [(-128, 0), (0, -128), (64, 64), (-64, -64), (127, 1), (-1, -127), (100, -28)]
    for p in range(0, K - 1, 2):
        for j in range(0, N, 5):
            v[..., p, j], v[..., p + 1, j] = extremes[(p // 2 + j) % len(extremes)]
    if worst > 128 and K >= 2 and N >= 1:  # one pair past the bound
        v[..., K // 2 * 2 - 2, N - 1], v[..., K // 2 * 2 - 1, N - 1] = -128, -1
    return (v if tb == "int8" else v + 128).astype(NP[tb])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("ta,tb", list(itertools.product(I8, I8)))
def test_matmul_integer_u8s8_where_pairs_fit(ta, tb, level, threads):
    """The AVX2 vpmaddubsw kernel takes a B whose adjacent pairs fit int16
    (|b0| + |b1| <= 128); a B with a single pair past that goes to the
    exact int16-pair kernel. Both exact against int64, with the A bytes at
    255 (the sums that would saturate) and zero points; dynamic and constant
    B; uint8 B and int8 A through the driver's 128 offsets."""
    rng = np.random.default_rng(19)
    dyn = session(model("MatMulInteger", [("a", ta), ("b", tb), ("za", ta), ("zb", tb)], [("y", "int32")],
                        opset=10), level, threads)
    hi = np.iinfo(NP[ta]).max
    for M, N, K in [(4, 16, 4), (7, 33, 9), (130, 70, 500), (64, 40, 1030), (3, 17, 64), (1, 5, 8)]:
        a = rand_q(rng, (M, K), ta)
        a[: M // 2 + 1] = hi  # where a pair past the bound would saturate
        za, zb = rand_q(rng, (M,), ta), rand_q(rng, (N,), tb)
        for worst in (128, 129):
            b = bounded_b(rng, (K, N), tb, worst)
            ref = ref_mmi(a, b, za, zb).astype(np.int32)
            y = dyn.run(None, {"a": a, "b": b, "za": za, "zb": zb})[0]
            np.testing.assert_array_equal(y, ref)
            took_u8s8 = "[avx2-u8s8" in dyn.kernel_usage_details()[0]
            assert took_u8s8 == (level == "avx2" and worst == 128 and M >= 4)
            const = session(model("MatMulInteger", [("a", ta), ("b", tb), ("za", ta), ("zb", tb)], [("y", "int32")],
                                  opset=10, initializers=[("b", b)]), level, threads)
            np.testing.assert_array_equal(const.run(None, {"a": a, "za": za, "zb": zb})[0], ref)
            assert ("[avx2-u8s8" in const.kernel_usage_details()[0]) == (level == "avx2" and worst == 128)


def test_matmul_integer_u8s8_batched_b():
    """Batched dynamic B: every matrix's pairs are checked (the bound broken
    in the last one only sends the whole product to the exact kernel)."""
    if "avx2" not in LEVELS:
        pytest.skip("no AVX2")
    rng = np.random.default_rng(20)
    s = session(model("MatMulInteger", [("a", "uint8"), ("b", "int8")], [("y", "int32")], opset=10), "avx2", 2)
    a = np.full((3, 12, 33), 255, np.uint8)
    for worst, kernel in ((128, "[avx2-u8s8"), (129, "[avx2]")):
        b = np.stack([bounded_b(rng, (33, 20), "int8", 128) for _ in range(2)]
                     + [bounded_b(rng, (33, 20), "int8", worst)])
        ref = np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
        np.testing.assert_array_equal(s.run(None, {"a": a, "b": b})[0], ref)
        assert kernel in s.kernel_usage_details()[0]
