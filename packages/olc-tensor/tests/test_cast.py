"""Cast and CastLike against an oracle written from the documented rules
(README.md, "Conversion semantics"):

- integer -> integer: modular (numpy's astype is modular too);
- float -> integer: truncation toward zero, saturating, NaN -> 0;
- x -> bool: x != 0; bool -> x: 0 or 1;
- -> float16 / bfloat16: one round-to-nearest-even from the exact value,
  computed here with Python's exact rationals;
- -> float32 / float64: the IEEE conversion (numpy).

Every pair of the 13 native types; the SIMD pairs (float32 <-> float16 /
bfloat16) at every SIMD level, lengths around the vector widths, subnormals,
ties and overflow, and one and two threads on a million elements.
float8 (opset 19+) is tested in test_cast_float8.py.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, FLOATS, LEVELS, NP, ONNX, make_model, olc_run, seed_of  # noqa: E402

import olc_core  # noqa: E402

LENGTHS = (0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 4095, 4096, 4097)
SIMD_PAIRS = [("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32")]
NARROW = {"float16": (10, -14, 15), "bfloat16": (7, -126, 127)}  # mantissa bits, min normal exp, max exp


def exact_round(v, mant: int, emin: int, emax: int) -> float:
    """v (a Python float or int, finite) rounded once to the narrow format."""
    f = Fraction(v)
    if f == 0:
        return float(v) if isinstance(v, float) else 0.0  # keeps -0.0
    sign = -1 if f < 0 else 1
    a = abs(f)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - mant)
    q = round(a / ulp)  # Fraction rounding: half to even
    r = q * ulp
    if r >= Fraction(2) ** (emax + 1):
        return sign * float("inf")
    return sign * float(r)


def oracle(x: np.ndarray, dst: str) -> np.ndarray:
    src = str(x.dtype) if x.dtype != NP["bfloat16"] else "bfloat16"
    out_t = NP[dst]
    if dst == "bool":
        return (x.astype(np.float64) != 0) if src in FLOATS else (x != 0)
    if src == "bool":
        return x.astype(np.uint8).astype(out_t)
    if src not in FLOATS and dst not in FLOATS:
        return x.astype(out_t)  # modular
    if src in FLOATS and dst not in FLOATS:
        v = x.astype(np.float64).reshape(-1)
        info = np.iinfo(out_t)
        res = np.zeros(v.shape, out_t)
        for i, a in enumerate(v):
            if np.isnan(a):
                res[i] = 0
            elif a <= float(info.min):
                res[i] = info.min
            elif a >= float(info.max) + 1.0 if info.bits < 53 else a >= 2.0 ** (info.bits - (1 if info.min < 0 else 0)):
                res[i] = info.max
            else:
                res[i] = int(a)  # truncation toward zero
        return res.reshape(x.shape)
    # Float targets.
    if dst in ("float32", "float64"):
        if src in ("int64", "uint64"):
            return np.array([exact_float(int(a), dst) for a in x.reshape(-1)], out_t).reshape(x.shape)
        return x.astype(np.float64).astype(out_t) if src != "float64" else x.astype(out_t)
    mant, emin, emax = NARROW[dst]
    flat = x.reshape(-1)
    vals = []
    for a in flat:
        if src in FLOATS:
            a = float(a)
            if np.isnan(a):
                vals.append(float("nan"))
                continue
            if np.isinf(a):
                vals.append(a)
                continue
        else:
            a = int(a)
        vals.append(exact_round(a, mant, emin, emax))
    return np.array(vals, np.float64).astype(out_t).reshape(x.shape)  # exact: values are representable


def exact_float(v: int, dst: str) -> float:
    if dst == "float64":
        return float(v)  # Python rounds int -> float correctly
    return exact_round(v, 23, -126, 127)


def assert_cast_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype.kind == "f" or got.dtype == NP["bfloat16"]:
        with np.errstate(invalid="ignore"):
            g64, w64 = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g64) & np.isnan(w64)
        w = want.view(np.uint16 if got.itemsize == 2 else np.uint32 if got.itemsize == 4 else np.uint64)
        g = got.view(w.dtype)
        bad = ~both_nan & (g != w)
    else:
        bad = got != want
    if bad.any():
        i = np.flatnonzero(bad.reshape(-1))[:5]
        raise AssertionError(f"{what}: {int(bad.sum())} differ at {i}: got {got.reshape(-1)[i]}, want "
                             f"{want.reshape(-1)[i]}")


def inputs_for(src: str, rng: np.random.Generator, n: int = 200) -> np.ndarray:
    t = NP[src]
    if src == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if src in FLOATS:
        fi = ml_dtypes.finfo(t) if src == "bfloat16" else np.finfo(t)
        mx, tiny, sub = float(fi.max), float(fi.smallest_normal), float(fi.smallest_subnormal)
        special = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, mx, -mx, 0.5, -0.5, 1.5,
                   -1.5, 2.5, -0.99, 127.5, 128.0, -128.5, 255.5, 256.0, 32767.9, 32768.0, 65503.0, 65504.0,
                   65519.99, 65520.0, -65520.0, 2.0**31, -2.0**31, 2.0**31 - 128, 2.0**32, 2.0**63, -2.0**63,
                   2.0**64, 3e38, 1e300, -1e300, 5.960464477539063e-08, 2.98e-08, 2.0**-25, 2.0**-126, 2.0**-133,
                   1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 2.0**-149]
        with np.errstate(over="ignore"):
            sp = np.array(special, np.float64).astype(t)
        lo = np.log2(float(fi.smallest_subnormal))
        rnd = (2.0 ** rng.uniform(lo, np.log2(mx), n) * rng.choice([-1, 1], n))
        with np.errstate(over="ignore"):
            return np.concatenate([sp, rnd.astype(t), (rng.standard_normal(n) * 300).astype(t)])
    info = np.iinfo(t)
    edge = np.array([info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] if info.min < 0 else []), t)
    extra = []
    if info.bits == 64:  # values near float rounding boundaries
        base = np.array([2**53 + 1, 2**54 + 3, 2**60 + 2**36, 2**62 + 2**38 + 1, 65519, 65520, 2**24 + 1],
                        dtype=np.uint64 if info.min == 0 else np.int64)
        extra = [base.astype(t)]
    return np.concatenate([edge, rng.integers(info.min, info.max, n, dtype=t, endpoint=True), *extra])


def cast_model(src: str, dst: str, opset: int = 19, like: bool = False):
    if like:
        return make_model("CastLike", [("x", src), ("t", dst)], ["y"], opset, out_types=[ONNX[dst]])
    return make_model("Cast", [("x", src)], ["y"], opset, {"to": ONNX[dst]}, out_types=[ONNX[dst]])


@pytest.mark.parametrize("src", ALL_TYPES)
@pytest.mark.parametrize("dst", ALL_TYPES)
def test_every_pair(src, dst):
    rng = np.random.default_rng(seed_of(src, dst))
    x = inputs_for(src, rng)
    with np.errstate(all="ignore"):
        want = oracle(x, dst)
    (got,) = olc_run(cast_model(src, dst), {"x": x}, expect_kernel="olc_tensor::Cast")
    assert_cast_equal(got, want, f"{src}->{dst}")


# Pairs with SIMD variants at some level: (src, dst) -> {level: detail}.
SIMD_VARIANTS = {
    **{p: {"scalar": "scalar", "avx2": "avx2", "avx512": "avx512"} for p in SIMD_PAIRS},
    ("float32", "int32"): {"scalar": "generic", "avx2": "avx2", "avx512": "avx512"},
    ("float32", "int64"): {"scalar": "generic", "avx2": "generic", "avx512": "avx512"},
    **{("float32", t): {"scalar": "generic", "avx2": "generic", "avx512": "avx512"}
       for t in ("int8", "uint8", "int16", "uint16", "uint32", "bool")},
    ("float64", "int32"): {"scalar": "generic", "avx2": "generic", "avx512": "avx512"},
}


@pytest.mark.parametrize("src,dst", list(SIMD_VARIANTS))
@pytest.mark.parametrize("level", LEVELS)
def test_simd_pairs_lengths(src, dst, level):
    rng = np.random.default_rng(5)
    pool = inputs_for(src, rng, 5000)
    model = cast_model(src, dst)
    with olc_core.simd_cap(level):
        sess = olc_core.Session(model, strict=True, record_usage=True)
    for n in LENGTHS:
        x = rng.choice(pool, n) if n else pool[:0]
        with np.errstate(all="ignore"):
            want = oracle(x, dst)
        (got,) = sess.run(None, {"x": x})
        assert_cast_equal(got, want, f"{src}->{dst} n={n} level={level}")
    detail = sess.kernel_usage_details()[-1]
    assert f"[{SIMD_VARIANTS[(src, dst)][level]}" in detail, detail


@pytest.mark.parametrize("src,dst", SIMD_PAIRS)
@pytest.mark.parametrize("level", LEVELS)
def test_simd_pairs_exhaustive_16bit(src, dst, level):
    """Every float16 / bfloat16 bit pattern; for float32 sources, every
    16-bit pattern widened with each low half-word class (ties, just above,
    just below)."""
    all16 = np.arange(65536, dtype=np.uint32)
    if src in ("float16", "bfloat16"):
        x = all16.astype(np.uint16).view(NP[src])
    else:
        lows = np.array([0x0000, 0x8000, 0x8001, 0x7fff, 0x0001, 0xffff, 0x1000], np.uint32)
        if dst == "float16":  # float16's rounding position is 13 bits down
            lows = np.array([0x0000, 0x1000, 0x1001, 0x0fff, 0x0001, 0x1fff, 0x3000], np.uint32)
            x = ((all16[:, None] << 16) | lows[None, :]).reshape(-1).view(np.float32)
        else:
            x = ((all16[:, None] << 16) | lows[None, :]).reshape(-1).view(np.float32)
    with olc_core.simd_cap(level):
        sess = olc_core.Session(cast_model(src, dst), strict=True)
    (got,) = sess.run(None, {"x": x})
    want = fast_oracle(x, dst)
    assert_cast_equal(got, want, f"{src}->{dst} level={level}")


def fast_oracle(x: np.ndarray, dst: str) -> np.ndarray:
    """Vectorized oracle for the SIMD pairs (numpy / ml_dtypes round to nearest
    even; checked against exact_round on a sample below)."""
    with np.errstate(all="ignore"):
        return x.astype(NP[dst])


def test_fast_oracle_matches_exact():
    rng = np.random.default_rng(9)
    x = inputs_for("float32", rng, 3000)
    for dst in ("float16", "bfloat16"):
        with np.errstate(all="ignore"):
            assert_cast_equal(fast_oracle(x, dst), oracle(x, dst), f"oracle float32->{dst}")


@pytest.mark.parametrize("src,dst", SIMD_PAIRS + [("float64", "float16"), ("int32", "float32"),
                                                  ("float32", "int64")])
@pytest.mark.parametrize("threads", (1, 2))
def test_large_two_threads(src, dst, threads):
    rng = np.random.default_rng(11)
    n = 1_000_003
    x = (rng.standard_normal(n) * 1000).astype(NP[src])
    (got,) = olc_run(cast_model(src, dst), {"x": x}, threads=threads, expect_kernel="olc_tensor::Cast")
    want = fast_oracle(x, dst) if dst not in ("int64",) else np.trunc(x.astype(np.float64)).astype(np.int64)
    assert_cast_equal(got, want, f"{src}->{dst}")


@pytest.mark.skipif("avx512" not in LEVELS, reason="needs AVX-512")
@pytest.mark.parametrize("threads", [1, 2])
def test_streaming_float16_path(threads):
    """The non-temporal float32 -> float16 variant (large outputs on one
    thread), forced on small tensors by lowering its threshold."""
    from olc_core import tuning

    rng = np.random.default_rng(17)
    pool = inputs_for("float32", rng, 5000)
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(cast_model("float32", "float16"), threads=threads, strict=True, record_usage=True)
    tuning.set("olc_tensor", "Cast", "stream_min_bytes", 1, implementation="avx512", dtype="float32")
    try:
        for n in LENGTHS + (100_003, 1_000_003):
            x = rng.choice(pool, n) if n else pool[:0]
            (got,) = sess.run(None, {"x": x})
            with np.errstate(all="ignore"):
                assert_cast_equal(got, fast_oracle(x, "float16"), f"stream n={n}")
            if n:
                assert "stream" in sess.kernel_usage_details()[-1]
    finally:
        tuning.set("olc_tensor", "Cast", "stream_min_bytes", 4 << 20, implementation="avx512", dtype="float32")


@pytest.mark.skipif("avx512" not in LEVELS, reason="needs AVX-512")
@pytest.mark.parametrize("bf16_isa", [0, 1])
def test_bfloat16_variants_and_streaming(bf16_isa):
    """float32 -> bfloat16 with and without the AVX512_BF16 instruction (a
    tuning switch selects the integer rounding path on CPUs that have it),
    each also through its streaming variant; every 16-bit pattern with each
    rounding class of the low half."""
    from olc_core import tuning

    has_bf16 = olc_core.cpu_features().get("avx512_bf16", False)
    if bf16_isa and not has_bf16:
        pytest.skip("CPU lacks AVX512_BF16")
    all16 = np.arange(65536, dtype=np.uint32)
    lows = np.array([0x0000, 0x8000, 0x8001, 0x7fff, 0x0001, 0xffff, 0x1000], np.uint32)
    x = ((all16[:, None] << 16) | lows[None, :]).reshape(-1).view(np.float32)
    want = fast_oracle(x, "bfloat16")
    isa = "avx512_bf16" if bf16_isa else "avx512"
    tuning.set("olc_tensor", "Cast", "enabled", bf16_isa, implementation="avx512_bf16", dtype="float32")
    try:
        for stream in (False, True):
            tuning.set("olc_tensor", "Cast", "stream_min_bytes", 1 if stream else 4 << 20, implementation=isa,
                       dtype="float32")
            with olc_core.simd_cap("avx512"):
                sess = olc_core.Session(cast_model("float32", "bfloat16"), threads=1, strict=True, record_usage=True)
            for sl in (slice(None), slice(1, 1000), slice(3, 4)):
                (got,) = sess.run(None, {"x": np.ascontiguousarray(x[sl])})
                assert_cast_equal(got, want[sl], f"{isa} stream={stream}")
            detail = sess.kernel_usage_details()[-1]
            assert f"[{isa}{',stream' if stream else ']'}" in detail, detail
    finally:
        tuning.set("olc_tensor", "Cast", "enabled", 1, implementation="avx512_bf16", dtype="float32")
        tuning.set("olc_tensor", "Cast", "stream_min_bytes", 4 << 20, implementation=isa, dtype="float32")


def test_shapes_kept():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (got,) = olc_run(cast_model("float32", "float16"), {"x": x})
    assert got.shape == (2, 3, 4)
    (got,) = olc_run(cast_model("float32", "int8"), {"x": np.float32(3.7)})
    assert got.shape == () and got == 3
    (got,) = olc_run(cast_model("float32", "float16"), {"x": np.zeros((3, 0), np.float32)})
    assert got.shape == (3, 0) and got.dtype == np.float16


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("int64", "bfloat16"), ("bool", "float32"),
                                     ("float64", "uint8"), ("bfloat16", "int32")])
def test_castlike(src, dst):
    rng = np.random.default_rng(13)
    x = inputs_for(src, rng)
    with np.errstate(all="ignore"):
        want = oracle(x, dst)
    (got,) = olc_run(cast_model(src, dst, opset=19, like=True), {"x": x, "t": np.zeros(2, NP[dst])},
                     expect_kernel="olc_tensor::CastLike")
    assert_cast_equal(got, want, f"CastLike {src}->{dst}")


def test_opset_segments():
    x = np.array([1.5, -2.5], np.float32)
    # bfloat16 targets join Cast at opset 13: an older model falls back.
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(cast_model("float32", "bfloat16", opset=9), record_usage=True)
    sess.run(None, {"x": x})
    assert "olc_tensor::Cast" not in sess.kernel_usage()
    (got,) = olc_run(cast_model("float32", "int32", opset=6), {"x": x}, expect_kernel="olc_tensor::Cast")
    assert list(got) == [1, -2]


def test_saturate_attribute_accepted():
    x = np.array([1e10, -3.5], np.float32)
    model = make_model("Cast", [("x", "float32")], ["y"], 19, {"to": ONNX["int16"], "saturate": 0})
    (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::Cast")
    assert list(got) == [32767, -3]
