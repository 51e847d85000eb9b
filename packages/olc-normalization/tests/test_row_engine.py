"""The float32 row engine called directly at each ISA level, on every row
length from 1 to 130 (every tail of the 4 x 16-lane AVX-512 and 4 x 8-lane
AVX2 loops) and around 4096, against float64 oracles; and the accuracy the
README states for Softmax."""

from __future__ import annotations

import numpy as np
import pytest
from norm_testlib import LEVELS
from olc_normalization import _ext

import olc_core


def available(level):
    """The engine is called directly, so the level must be allowed now
    (OLC_SIMD may cap it below what the CPU has)."""
    if olc_core.SIMD_LEVELS.index(level) > olc_core.SIMD_LEVELS.index(olc_core.simd_level()):
        pytest.skip(f"{level} is above the current SIMD level {olc_core.simd_level()}")

LENGTHS = list(range(1, 131)) + [4095, 4096, 4097]


@pytest.mark.parametrize("level", LEVELS)
def test_every_length(level):
    available(level)
    rng = np.random.default_rng(50)
    for n in LENGTHS:
        x = rng.uniform(-30, 30, n).astype(np.float32)
        xd = x.astype(np.float64)
        y, _ = _ext.engine_f32(level, "softmax", x)
        e = np.exp(xd - xd.max())
        np.testing.assert_allclose(y, e / e.sum(), rtol=1e-5, atol=1e-7 * (e / e.sum()).max(), err_msg=f"n={n}")
        y, _ = _ext.engine_f32(level, "logsoftmax", x)
        np.testing.assert_allclose(y, xd - xd.max() - np.log(e.sum()), rtol=1e-5, atol=1e-6, err_msg=f"n={n}")
        (mean,), var = _ext.engine_f32(level, "moments", x)
        np.testing.assert_allclose(mean, xd.mean(), rtol=1e-5, atol=1e-5, err_msg=f"n={n}")
        np.testing.assert_allclose(var, xd.var(), rtol=1e-5, err_msg=f"n={n}")
        (ss,), _ = _ext.engine_f32(level, "sum_squares", x)
        np.testing.assert_allclose(ss, (xd * xd).sum(), rtol=1e-5, err_msg=f"n={n}")
        (sa,), _ = _ext.engine_f32(level, "sum_abs", x)
        np.testing.assert_allclose(sa, np.abs(xd).sum(), rtol=1e-5, err_msg=f"n={n}")


@pytest.mark.parametrize("level", LEVELS)
def test_softmax_accuracy_claim(level):
    """Max relative error over rows of 4097 values in [-20, 20] stays under
    the 2^-24 * max|x - max| bound of the float32 argument plus a few ulps
    (README: about 2.2e-6 measured)."""
    available(level)
    rng = np.random.default_rng(51)
    worst = 0.0
    for _ in range(8):
        x = rng.uniform(-20, 20, 4097).astype(np.float32)
        xd = x.astype(np.float64)
        y, _ = _ext.engine_f32(level, "softmax", x)
        e = np.exp(xd - xd.max())
        ref = e / e.sum()
        keep = ref > 1e-30
        worst = max(worst, float(np.max(np.abs(y[keep] - ref[keep]) / ref[keep])))
    assert worst < 40 * 2.0**-24 + 8 * 2.0**-24, worst


def test_unavailable_level_is_refused():
    with pytest.raises(ValueError):
        _ext.engine_f32("neon", "softmax", np.ones(3, np.float32))
    with pytest.raises(ValueError):
        _ext.engine_f32("scalar", "softmax", np.ones(0, np.float32))


@pytest.mark.parametrize("level", LEVELS)
def test_conversions_bit_exact(level):
    """float16/bfloat16 <-> float32 at each level against numpy/ml_dtypes,
    bit for bit: every 16-bit pattern widened (NaNs compared as NaN), and
    float32 values around every rounding boundary narrowed (ties to even,
    overflow to inf, subnormals, NaN kept quiet), at lengths with tails."""
    import ml_dtypes
    available(level)
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for fn, t in (("f16_to_f32", np.float16), ("bf16_to_f32", ml_dtypes.bfloat16)):
        got = _ext.engine_convert(level, fn, all16)
        want = all16.view(t).astype(np.float32)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), fn
        assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), fn
    rng = np.random.default_rng(52)
    bits = np.concatenate([
        rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
        # float32 values exactly halfway between neighbouring bf16 / f16 values, and next to them
        (all16.astype(np.uint32) << 16) + np.uint32(0x8000),
        (all16.astype(np.uint32) << 16) + np.uint32(0x7fff),
        # halfway between neighbouring float16 values (13 dropped bits), finite ones only
        (all16.view(np.float16).astype(np.float32).view(np.uint32)[np.isfinite(all16.view(np.float16))]
         + np.uint32(0x1000)),
    ])
    vals = bits.view(np.float32)
    for fn, t in (("f32_to_f16", np.float16), ("f32_to_bf16", ml_dtypes.bfloat16)):
        for n in (len(vals), 7, 9, 17):
            v = vals[:n]
            got = _ext.engine_convert(level, fn, v)
            with np.errstate(over="ignore", invalid="ignore"):
                want = v.astype(t)
            nan = np.isnan(v)
            assert np.all(np.isnan(got[nan].view(t).astype(np.float32))), fn
            assert np.array_equal(got[~nan], want[~nan].view(np.uint16)), (fn, n)


NARROW_FNS = [(f"{op}_{suf}", t) for op in ("softmax", "logsoftmax") for suf, t in (("f16", "float16"),
                                                                                    ("bf16", "bfloat16"))]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,t", NARROW_FNS)
def test_narrow_every_length(fn, t, level):
    """The 16-bit row functions (x - max, exp and sum rounded to the type)
    on every tail, against the function body in the type: within one ulp
    after the caller's final rounding."""
    from norm_testlib import NP_TYPE, assert_ulps, softmax_body
    available(level)
    rng = np.random.default_rng(53)
    for n in LENGTHS:
        x = rng.uniform(-30, 30, n).astype(NP_TYPE[t])
        y, _ = _ext.engine_f32(level, fn, x.astype(np.float32))
        assert_ulps(y.astype(NP_TYPE[t]), softmax_body(x, -1, 13, t, fn.startswith("log")), t, f"{fn} n={n}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,t", NARROW_FNS)
def test_narrow_every_exp_argument(fn, t, level):
    """One row holding 0 and every value of the type from the underflow of
    its exp up to 0, so x - max is each of them exactly: the exps near a
    midpoint between two values of the type (recomputed in float64) and,
    for bfloat16, the subnormal exps below FLT_MIN. Within one ulp of the
    function body; float16 differs from numpy's exp in 2 values, where
    numpy's float32 exp is not correctly rounded, so allow a few."""
    import ml_dtypes
    from norm_testlib import NP_TYPE, assert_ulps, softmax_body
    available(level)
    lo = {"float16": -18.0, "bfloat16": -95.0}[t]
    v = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(NP_TYPE[t]).astype(np.float32)
    v = v[np.isfinite(v) & (v <= 0) & (v >= lo)]
    x = np.concatenate([[0.0], v]).astype(np.float32)
    y, _ = _ext.engine_f32(level, fn, x)
    y = y.astype(NP_TYPE[t])
    ref = softmax_body(x.astype(NP_TYPE[t]), -1, 13, t, fn.startswith("log"))
    assert_ulps(y, ref, t, fn)
    assert int((y.astype(np.float64) != ref.astype(np.float64)).sum()) <= 4
    if t == "bfloat16" and fn == "softmax_bf16":
        # exps below FLT_MIN are bfloat16 subnormals, not 0 (the sum is 1 here)
        x = np.array([0.0, -87.5, -88.0, -90.0, -92.0, -92.5, -93.0, -100.0], np.float32)  # bfloat16 values
        y, _ = _ext.engine_f32(level, fn, x)
        want = np.exp(x.astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
        assert np.array_equal(y.astype(ml_dtypes.bfloat16).view(np.uint16), want.view(np.uint16)), y
        assert np.all(want[1:6].astype(np.float32) > 0) and np.all(want[6:].astype(np.float32) == 0)
