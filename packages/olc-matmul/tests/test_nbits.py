"""com.microsoft MatMulNBits against a float64 dequantized reference written
here and against onnxruntime's own MatMulNBits: bits 4 and 8, block sizes 16
to 256, zero points absent / packed uint8 / float, bias, K not a multiple
of the block, float32/float16/bfloat16 activations, GEMV (small M) and GEMM
paths, every SIMD level, 1 and 2 threads; bad attributes and inputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, model, session

import olc_core


def make_weights(rng, N, K, bits, bs, zp_kind, t):
    kb = (K + bs - 1) // bs
    blob = bs * bits // 8
    B = rng.integers(0, 256, size=(N, kb, blob), dtype=np.uint8)
    scales = (rng.uniform(0.5, 2.0, size=N * kb) / (1 << bits)).astype(NP[t])
    zp = None
    if zp_kind == "uint8":
        zb = (kb * bits + 7) // 8
        zp = rng.integers(0, 256, size=N * zb, dtype=np.uint8)
    elif zp_kind == "float":
        zp = rng.uniform(0, (1 << bits) - 1, size=N * kb).astype(NP[t])
    return B, scales, zp


def unpack_q(B, bits):
    """B [N, kb, blob] -> the quantized values [N, kb, blob * 8 / bits] (low bits first)."""
    per = 8 // bits
    q = np.empty(B.shape[:2] + (B.shape[2] * per,), np.int64)
    for f in range(per):
        q[:, :, f::per] = (B >> (bits * f)) & ((1 << bits) - 1)
    return q


def zero_points(zp, N, kb, bits):
    """The zero point of every (column, block) as float64 [N, kb]."""
    if zp is None:
        return np.full((N, kb), float(1 << (bits - 1)))
    if zp.dtype == np.uint8:
        zr = zp.reshape(N, -1)
        return unpack_q(zr[:, None, :], bits)[:, 0, :kb].astype(np.float64)
    return zp.astype(np.float64).reshape(N, kb)


def dequant(B, scales, zp, N, K, bits, bs):
    kb = B.shape[1]
    q = unpack_q(B, bits).astype(np.float64)
    s = scales.astype(np.float64).reshape(N, kb)
    w = (q - zero_points(zp, N, kb, bits)[:, :, None]) * s[:, :, None]
    return w.reshape(N, kb * bs)[:, :K]


def nbits_model(t, N, K, bits, bs, B, scales, zp, bias, const=True, name="nb0"):
    ins = [("a", t), ("B", "uint8"), ("scales", t)]
    inits = [("B", B), ("scales", scales)]
    if zp is not None or bias is not None:
        zt = None if zp is None else ("uint8" if zp.dtype == np.uint8 else t)
        ins.append(("zp", zt) if zp is not None else ("", None))
        if zp is not None:
            inits.append(("zp", zp))
    if bias is not None:
        ins += [("", None), ("bias", t)]
        inits.append(("bias", bias))
    return model("MatMulNBits", ins, [("y", t)], {"K": K, "N": N, "bits": bits, "block_size": bs},
                 initializers=inits if const else [], domain="com.microsoft",
                 extra_opsets=[("com.microsoft", 1)], name=name)


def check(y, ref, absref, K, t):
    y64 = np.asarray(y).astype(np.float64)
    out_eps = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}[t]
    bound = out_eps * np.abs(ref) + 2 * (K + 2) * 2.0**-24 * absref + 1e-30
    bad = ~(np.abs(y64 - ref) <= bound)
    assert not bad.any(), f"{bad.sum()} bad; worst {np.abs(y64 - ref)[bad].max()} bound {bound[bad].min()}"


CASES = [  # (M, N, K, bits, bs, zp)
    (1, 40, 64, 4, 32, None), (1, 33, 100, 4, 16, "uint8"), (3, 70, 256, 4, 64, "float"),
    (1, 65, 300, 8, 32, "uint8"), (2, 17, 128, 8, 128, None), (1, 8, 512, 4, 256, "uint8"),
    (1, 20, 40, 8, 16, "float"), (16, 70, 200, 4, 32, "uint8"), (29, 33, 300, 8, 64, None),
    (13, 100, 96, 4, 16, "float"), (40, 64, 512, 4, 256, None),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_nbits_float32_reference(level, threads):
    rng = np.random.default_rng(21)
    for M, N, K, bits, bs, zk in CASES:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, "float32")
        bias = rng.standard_normal(N).astype(np.float32) if M % 2 else None
        s = session(nbits_model("float32", N, K, bits, bs, B, scales, zp, bias), level, threads)
        a = rng.standard_normal((M, K)).astype(np.float32)
        y = s.run(None, {"a": a})[0]
        w = dequant(B, scales, zp, N, K, bits, bs)
        ref = a.astype(np.float64) @ w.T + (0 if bias is None else bias)
        check(y, ref, np.abs(a) @ np.abs(w.T), K, "float32")
        assert s.kernel_usage() == ["olc_matmul::MatMulNBits"]


@pytest.mark.parametrize("t", ["float32", "float16"])
def test_nbits_against_onnxruntime(t):
    rng = np.random.default_rng(22)
    for M, N, K, bits, bs, zk in CASES + [(1, 64, 2048, 4, 32, "uint8"), (128, 64, 256, 4, 32, None)]:
        if bits == 8 and zk == "float":
            continue  # onnxruntime refuses 8-bit weights with float zero points
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, t)
        bias = rng.standard_normal(N).astype(NP[t]) if M % 2 else None
        m = nbits_model(t, N, K, bits, bs, B, scales, zp, bias)
        s = session(m)
        o = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        a = rng.standard_normal((2, M, K)).astype(NP[t])
        y = s.run(None, {"a": a})[0]
        yo = o.run(None, {"a": a})[0]
        assert y.shape == yo.shape == (2, M, N)
        w = dequant(B, scales, zp, N, K, bits, bs)
        scale = np.abs(a.astype(np.float64)) @ np.abs(w.T)
        tol = (1e-5 if t == "float32" else 4e-3) * (scale + 1)
        assert (np.abs(y.astype(np.float64) - yo.astype(np.float64)) <= tol).all(), (M, N, K, bits, bs, zk)


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_nbits_half_activations(t):
    rng = np.random.default_rng(23)
    for M, N, K, bits, bs, zk in CASES[:4] + CASES[-3:]:
        B, scales, zp = make_weights(rng, N, K, bits, bs, zk, t)
        s = session(nbits_model(t, N, K, bits, bs, B, scales, zp, None), "avx512" if "avx512" in LEVELS else LEVELS[-1], 2)
        a = rng.standard_normal((M, K)).astype(NP[t])
        y = s.run(None, {"a": a})[0]
        w = dequant(B, scales, zp, N, K, bits, bs)
        ref = a.astype(np.float64) @ w.T
        check(y, ref, np.abs(a.astype(np.float64)) @ np.abs(w.T), K, t)


def test_nbits_dynamic_weights():
    rng = np.random.default_rng(24)
    M, N, K, bits, bs = 5, 40, 96, 4, 32
    B, scales, zp = make_weights(rng, N, K, bits, bs, "uint8", "float32")
    s = session(nbits_model("float32", N, K, bits, bs, B, scales, zp, None, const=False))
    a = rng.standard_normal((M, K)).astype(np.float32)
    y = s.run(None, {"a": a, "B": B, "scales": scales, "zp": zp})[0]
    w = dequant(B, scales, zp, N, K, bits, bs)
    check(y, a.astype(np.float64) @ w.T, np.abs(a) @ np.abs(w.T), K, "float32")


def test_nbits_errors():
    rng = np.random.default_rng(25)
    B, scales, zp = make_weights(rng, 8, 64, 4, 32, "uint8", "float32")
    for attrs, msg in [({"bits": 3}, "unsupported bits=3"), ({"block_size": 24}, "block_size must be a power of two"),
                       ({"block_size": 8}, "block_size must be a power of two"),
                       ({"K": 2**40, "N": 2**40}, "too large: B would hold more than 2"),
                       ({"K": 64, "N": 2**62}, "too large: B would hold more than 2"),
                       ({"K": 2**63 - 1}, "too large: B would hold more than 2")]:
        m = nbits_model("float32", 8, 64, 4, 32, B, scales, zp, None, name="badnb")
        for at in m.graph.node[0].attribute:
            if at.name in attrs:
                at.i = attrs[at.name]
        with pytest.raises(olc_core.OlcError, match=f"badnb.*{msg}"):
            session(m)
    s = session(nbits_model("float32", 8, 64, 4, 32, B, scales, zp, None, const=False, name="badnb"))
    a = np.zeros((2, 64), np.float32)
    with pytest.raises(olc_core.OlcError, match=r"badnb.*zero_points"):
        s.run(None, {"a": a, "B": B, "scales": scales, "zp": zp[:-1]})
    with pytest.raises(olc_core.OlcError, match=r"badnb.*last dimension must be K"):
        s.run(None, {"a": np.zeros((2, 60), np.float32), "B": B, "scales": scales, "zp": zp})
