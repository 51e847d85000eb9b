"""com.microsoft MatMulNBits with accuracy_level 4 (int8 activations)
against an exact integer reference of the same quantization written here:

    amax = max |a| over a block of A, scale = amax / 127 (float32),
    q = rint(a * float32(127 / amax)) (ties to even), 0 where amax is 0,
    below 2^-96 or not finite;  y = sum over blocks of
    scale * s_w * (sum q w - z sum q)   (float zero points: the z term in float)

With power-of-two scales every float step is exact and olc must match the
reference bit for bit; otherwise within the float32 rounding of the block
sums. Also: against the float path within the documented quantization
bound, against onnxruntime's accuracy_level 4, at every SIMD level and
kernel (scalar, AVX2 vpmaddubsw, AVX-VNNI, AVX512_VNNI), 1 and 2 threads,
bits 2, 4 and 8, every zero-point form, row and column tails, K tails,
several K passes, dynamic weights, NaN and infinity, guard pages."""

from __future__ import annotations

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP
from onnx import helper
from test_nbits import dequant, make_weights, nbits_model, unpack_q, zero_points

import olc_core
from olc_core import testing, tuning

F32_MAX = np.finfo(np.float32).max


def kernels():
    """(SIMD level, use_vnni, expected kernel name) for every int8 kernel this CPU can run."""
    feats = olc_core.simd.detected_cpu_features()
    out = []
    for level in LEVELS:
        for vnni in (1, 0):
            if level == "scalar":
                name = "scalar"
            elif vnni and level == "avx512" and feats["avx512_vnni"]:
                name = "avx512vnni"
            elif vnni and feats.get("avx_vnni", False):
                name = "avxvnni"
            else:
                name = "avx2"
            if (level, name) not in [(lv, n) for lv, _, n in out]:
                out.append((level, vnni, name))
    return out


KERNELS = kernels()
KERNEL_IDS = [f"{lv}-{name}" for lv, _, name in KERNELS]


def int8_model(t, N, K, bits, bs, B, scales, zp, bias, const=True, name="nb8"):
    m = nbits_model(t, N, K, bits, bs, B, scales, zp, bias, const=const, name=name)
    m.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", 4))
    return m


def int8_session(m, level, vnni, threads=1):
    tuning.set("olc_matmul", "MatMulNBits", "use_vnni", vnni)
    try:
        with olc_core.simd_cap(level):
            return olc_core.Session(m, threads=threads, strict=True, record_usage=True)
    finally:
        tuning.reset("olc_matmul", "MatMulNBits", "use_vnni")


def quantize_ref(a, bs):
    """The int8 blocks of A [M, K] (float32): q [M, kb, bs] int64, scale [M, kb] float32, sum [M, kb]."""
    a = np.asarray(a, np.float32)
    M, K = a.shape
    kb = -(-K // bs)
    ap = np.zeros((M, kb * bs), np.float32)
    ap[:, :K] = a
    blk = ap.reshape(M, kb, bs)
    amax = np.abs(blk).max(axis=2)
    ok = (amax >= np.float32(2.0**-96)) & (amax <= F32_MAX)
    with np.errstate(all="ignore"):
        inv = np.where(ok, np.float32(127) / amax, np.float32(0)).astype(np.float32)
        q = np.rint(blk * inv[:, :, None])
    q = np.where(ok[:, :, None], q, 0).astype(np.int64)
    return q, (amax / np.float32(127)).astype(np.float32), q.sum(axis=2)


def int8_reference(a, B, scales, zp, bias, N, K, bits, bs, split=False):
    """The reference of the int8 product in float64, and the sum of the
    magnitudes of its terms (for the rounding bound; split: of the terms of
    sum q w and of z sum q apart, as a runtime that adds them in float has)."""
    q, sa, qsum = quantize_ref(a, bs)
    kb = q.shape[1]
    wq = unpack_q(B, bits)
    dots = np.einsum("mbk,nbk->mnb", q, wq)
    sw = scales.astype(np.float64).reshape(N, kb)
    z = zero_points(zp, N, kb, bits)
    sa64 = sa.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if split or (zp is not None and zp.dtype != np.uint8):  # the z term separately
            t1 = sa64[:, None, :] * sw[None] * dots
            t2 = (sa64 * qsum)[:, None, :] * (sw * z)[None]
            ref = t1.sum(axis=2) - t2.sum(axis=2)
            mag = np.abs(t1).sum(axis=2) + np.abs(t2).sum(axis=2)
        else:
            terms = sa64[:, None, :] * sw[None] * (dots - z[None] * qsum[:, None, :])
            ref = terms.sum(axis=2)
            mag = np.abs(terms).sum(axis=2)
    if bias is not None:
        ref = ref + bias.astype(np.float64)
        mag = mag + np.abs(bias.astype(np.float64))
    return ref, mag, sa


def check_int8(y, ref, mag, kb, t="float32", what=""):
    y64 = np.asarray(y).astype(np.float64)
    out_eps = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-8}[t]
    bound = 2.0**-23 * (kb + 4) * mag + out_eps * np.abs(ref) + 1e-30
    err = np.abs(y64 - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{what}: {int(bad.sum())} bad of {bad.size}; worst {err[bad].max()} bound {bound[bad].min()}"


# ------------------------------------------------------------ exact cases


def pow2_problem(rng, M, N, K, bits, bs, zk):
    """Activations j * 2^e (|j| <= 127, one |j| = 127 per block) and
    power-of-two weight scales: every float step of the int8 path is exact."""
    kb = -(-K // bs)
    B, _, zp = make_weights(rng, N, K, bits, bs, zk, "float32")
    scales = np.full(N * kb, 2.0**-7, np.float32)
    j = rng.integers(-127, 128, size=(M, kb * bs))
    j[:, ::bs] = 127 * rng.choice([-1, 1], size=(M, kb))
    e = rng.integers(-2, 0, size=(M, kb))
    a = (j.reshape(M, kb, bs) * np.exp2(e)[:, :, None]).reshape(M, kb * bs)[:, :K].astype(np.float32)
    bias = (rng.integers(-64, 64, size=N) * 2.0**-9).astype(np.float32)
    return a, B, scales, zp, bias


EXACT = [  # (M, N, K, bits, bs, zero points); at most 4 blocks so every sum stays within 24 bits
    (1, 40, 100, 4, 32, None), (3, 17, 64, 4, 16, "uint8"), (7, 70, 256, 4, 64, None),
    (2, 33, 100, 8, 32, "uint8"), (5, 20, 64, 8, 16, None), (1, 65, 128, 2, 32, "uint8"),
    (6, 18, 256, 2, 64, None),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level,vnni,kname", KERNELS, ids=KERNEL_IDS)
def test_int8_bit_exact(level, vnni, kname, threads):
    rng = np.random.default_rng(zlib.crc32(f"exact/{level}/{vnni}".encode()))
    for M, N, K, bits, bs, zk in EXACT:
        a, B, scales, zp, bias = pow2_problem(rng, M, N, K, bits, bs, zk)
        s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, bias), level, vnni, threads)
        y = s.run(None, {"a": a})[0]
        ref, _, _ = int8_reference(a, B, scales, zp, bias, N, K, bits, bs)
        assert np.array_equal(y, ref.astype(np.float32)), (M, N, K, bits, bs, zk, np.abs(y - ref).max())
        assert s.kernel_usage_details() == [
            f"olc_matmul::MatMulNBits[{kname} {bits}-bit block {bs} int8 prepacked-B "
            f"{s.kernel_plan()[0].prepacked_bytes / 1024:.1f} KiB]"]


@pytest.mark.parametrize("level,vnni,kname", KERNELS, ids=KERNEL_IDS)
def test_int8_rounds_ties_to_even(level, vnni, kname):
    # amax 127 in every block: scale 1, a * 127 / amax = a, so halves are ties.
    rng = np.random.default_rng(31)
    M, N, K, bits, bs = 3, 24, 75, 4, 16  # K tail: the quantizer's scalar tail too
    kb = -(-K // bs)
    a = (rng.integers(-127, 127, size=(M, K)) + 0.5).astype(np.float32)
    a[:, ::bs] = 127.0
    B, _, _ = make_weights(rng, N, K, bits, bs, None, "float32")
    scales = np.full(N * kb, 2.0**-10, np.float32)
    s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, None, None), level, vnni)
    y = s.run(None, {"a": a})[0]
    ref, _, _ = int8_reference(a, B, scales, None, None, N, K, bits, bs)
    assert np.array_equal(y, ref.astype(np.float32))
    # Rounding half away from zero would give other results.
    q_away = np.where(a < 0, -np.floor(-a + 0.5), np.floor(a + 0.5))
    assert not np.array_equal(q_away, np.rint(a))


# ------------------------------------------------------------ general cases

CASES = [  # (M, N, K, bits, bs, zero points)
    (1, 40, 64, 4, 32, None), (1, 33, 100, 4, 16, "uint8"), (3, 70, 256, 4, 64, "float"),
    (1, 65, 300, 8, 32, "uint8"), (2, 17, 128, 8, 128, None), (1, 8, 512, 4, 256, "uint8"),
    (5, 20, 40, 8, 16, "float"), (16, 70, 200, 4, 32, "uint8"), (9, 33, 300, 8, 64, None),
    (13, 100, 96, 2, 16, "float"), (4, 48, 1200, 4, 32, None), (11, 37, 1100, 2, 32, "uint8"),
    (1, 300, 1024, 4, 32, "uint8"), (2, 130, 640, 4, 128, "float"),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level,vnni,kname", KERNELS, ids=KERNEL_IDS)
def test_int8_integer_reference(level, vnni, kname, threads):
    rng = np.random.default_rng(zlib.crc32(f"ref/{level}/{vnni}/{threads}".encode()))
    for M, N, K, bits, bs, zk in CASES:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, "float32")
        bias = rng.standard_normal(N).astype(np.float32) if M % 2 else None
        s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, bias), level, vnni, threads)
        a = rng.standard_normal((M, K)).astype(np.float32)
        y = s.run(None, {"a": a})[0]
        ref, mag, _ = int8_reference(a, B, scales, zp, bias, N, K, bits, bs)
        check_int8(y, ref, mag, -(-K // bs), what=f"{kname} {(M, N, K, bits, bs, zk)}")


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_int8_half_activations(t):
    rng = np.random.default_rng(zlib.crc32(t.encode()))
    level, vnni, _ = KERNELS[-1]
    for M, N, K, bits, bs, zk in CASES[:6]:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, t)
        bias = rng.standard_normal(N).astype(NP[t])
        s = int8_session(int8_model(t, N, K, bits, bs, B, scales, zp, bias), level, vnni, 2)
        a = rng.standard_normal((M, K)).astype(NP[t])
        y = s.run(None, {"a": a})[0]
        assert y.dtype == NP[t]
        ref, mag, _ = int8_reference(a.astype(np.float32), B, scales.astype(np.float32),
                                     zp if zp is None or zp.dtype == np.uint8 else zp.astype(np.float32),
                                     bias.astype(np.float32), N, K, bits, bs)
        check_int8(y, ref, mag, -(-K // bs), t, f"{t} {(M, N, K, bits, bs, zk)}")


def test_int8_against_float_path():
    """|int8 - float| <= sum_k |w[n, k]| scale_a(block of k) / 2: each a is
    off by at most half its block's quantization step."""
    rng = np.random.default_rng(32)
    level, vnni, _ = KERNELS[-1]
    for M, N, K, bits, bs, zk in CASES:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, "float32")
        a = rng.standard_normal((M, K)).astype(np.float32)
        y8 = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, None), level, vnni).run(
            None, {"a": a})[0]
        yf = int8_session(nbits_model("float32", N, K, bits, bs, B, scales, zp, None), level, vnni).run(
            None, {"a": a})[0]
        w = dequant(B, scales, zp, N, K, bits, bs)
        _, sa, _ = quantize_ref(a, bs)
        half_step = np.repeat(sa.astype(np.float64) / 2, bs, axis=1)[:, :K]
        scale = np.abs(a.astype(np.float64)) @ np.abs(w.T)
        bound = half_step @ np.abs(w.T) + 1e-5 * scale + 1e-30
        assert (np.abs(y8.astype(np.float64) - yf) <= bound).all(), (M, N, K, bits, bs, zk)
        assert np.abs(y8 - yf).max() > 0  # the paths differ: the int8 one ran


@pytest.mark.parametrize("t", ["float32", "float16"])
def test_int8_against_onnxruntime(t):
    rng = np.random.default_rng(zlib.crc32(f"ort/{t}".encode()))
    level, vnni, _ = KERNELS[-1]
    for M, N, K, bits, bs, zk in CASES + [(1, 64, 2048, 4, 32, "uint8"), (128, 64, 256, 4, 32, None)]:
        if bits == 8 and zk == "float":
            continue  # onnxruntime refuses 8-bit weights with float zero points
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, t)
        bias = rng.standard_normal(N).astype(NP[t]) if M % 2 else None
        m = int8_model(t, N, K, bits, bs, B, scales, zp, bias)
        o = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        a = rng.standard_normal((2, M, K)).astype(NP[t])
        y = int8_session(m, level, vnni, 2).run(None, {"a": a})[0]
        yo = o.run(None, {"a": a})[0]
        assert y.shape == yo.shape == (2, M, N)
        ref, mag, _ = int8_reference(a.reshape(2 * M, K).astype(np.float32), B, scales.astype(np.float32),
                                     zp if zp is None or zp.dtype == np.uint8 else zp.astype(np.float32),
                                     None if bias is None else bias.astype(np.float32), N, K, bits, bs,
                                     split=True)
        out = 0 if t == "float32" else 2.0**-10
        tol = 2.0**-21 * (K // bs + 4) * mag.reshape(2, M, N) + out * np.abs(ref.reshape(2, M, N)) + 1e-30
        if zk == "float":
            # onnxruntime computes float zero points in float32 whatever the
            # accuracy level: the bound of the quantization against the float path.
            w = dequant(B, scales, zp, N, K, bits, bs)
            _, sa, _ = quantize_ref(a.reshape(2 * M, K).astype(np.float32), bs)
            half_step = np.repeat(sa.astype(np.float64) / 2, bs, axis=1)[:, :K]
            tol = tol + (half_step @ np.abs(w.T)).reshape(2, M, N) + 1e-5 * mag.reshape(2, M, N)
        assert (np.abs(y.astype(np.float64) - yo.astype(np.float64)) <= tol).all(), (M, N, K, bits, bs, zk)


# ------------------------------------------------------------ edges


@pytest.mark.parametrize("level,vnni,kname", KERNELS, ids=KERNEL_IDS)
def test_int8_dynamic_weights_and_guard_pages(level, vnni, kname):
    rng = np.random.default_rng(33)
    for M, N, K, bits, bs, zk in [(5, 40, 96, 4, 32, "uint8"), (1, 17, 70, 8, 16, "float"), (3, 33, 130, 2, 32, None)]:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, "float32")
        s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, None, const=False), level, vnni)
        for at in ("end", "start"):
            a = rng.standard_normal((M, K)).astype(np.float32)
            feeds = {"a": testing.guarded(a, at=at), "B": testing.guarded(B, at=at),
                     "scales": testing.guarded(scales, at=at)}
            if zp is not None:
                feeds["zp"] = testing.guarded(zp, at=at)
            y = s.run(None, feeds)[0]
            ref, mag, _ = int8_reference(a, B, scales, zp, None, N, K, bits, bs)
            check_int8(y, ref, mag, -(-K // bs), what=f"dynamic {kname} {(M, N, K, bits, bs, zk)}")
        assert s.kernel_usage_details() == [f"olc_matmul::MatMulNBits[{kname} {bits}-bit block {bs} int8]"]


@pytest.mark.parametrize("level,vnni,kname", KERNELS, ids=KERNEL_IDS)
def test_int8_non_finite_rows(level, vnni, kname):
    """A block holding NaN or an infinity makes every output of its row NaN;
    other rows are untouched. A block of zeros (or below 2^-96) contributes 0."""
    rng = np.random.default_rng(34)
    M, N, K, bits, bs = 5, 40, 100, 4, 32
    B, scales, zp = make_weights(rng, N, K, bits, bs, "uint8", "float32")
    s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, None), level, vnni)
    a = rng.standard_normal((M, K)).astype(np.float32)
    a[1, 40] = np.nan
    a[2, 99] = np.inf
    a[3, 0] = -np.inf
    a[4, 32:64] = 0.0
    a[4, 64:96] = 1e-30
    y = s.run(None, {"a": a})[0]
    assert np.isnan(y[1:4]).all()
    clean = a[[0, 4]]
    ref, mag, _ = int8_reference(clean, B, scales, zp, None, N, K, bits, bs)
    check_int8(y[[0, 4]], ref, mag, 4)


def test_int8_empty_and_batched_shapes():
    rng = np.random.default_rng(35)
    N, K, bits, bs = 20, 64, 4, 32
    B, scales, zp = make_weights(rng, N, K, bits, bs, None, "float32")
    s = int8_session(int8_model("float32", N, K, bits, bs, B, scales, zp, None), *KERNELS[-1][:2])
    assert s.run(None, {"a": np.zeros((0, K), np.float32)})[0].shape == (0, N)
    a = rng.standard_normal((2, 3, K)).astype(np.float32)
    y = s.run(None, {"a": a})[0]
    ref, mag, _ = int8_reference(a.reshape(6, K), B, scales, zp, None, N, K, bits, bs)
    check_int8(y.reshape(6, N), ref, mag, 2)
