"""float32 Pow: the vectorized general path and the exact paths for a
constant exponent (0, 1, 2, 3, 0.5, -1, -0.5), on every SIMD level, against
numpy in float64 (and onnx.reference on the special values), with exact
rational references where a float64 result could itself be misrounded.

Bounds (docs/binary.md, "Pow"): the general path is within 1 ulp (bit
distance) of the float64 result rounded to float32, and equal to it on
every special input (NaN, +-inf, +-0, negative bases, results that
overflow or vanish); the constant-exponent paths are correctly rounded and
agree with the general path wherever the general path is exact."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]
F32 = np.float32
INF, NAN = np.inf, np.nan

# Special bases and exponents: signed zeros, +-1, +-inf, NaN, subnormals,
# huge and tiny values, negative bases with integer and non-integer exponents.
SPECIAL_X = F32([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, INF, -INF, NAN, 1e-45, -1e-45, 1e-40,
                 -1e-40, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 1e-30, 1e30, 0.999999, 1.0000001,
                 -0.999999, 4097.0, -4097.0, 65536.0, 1e-3, -8.0])
SPECIAL_Y = F32([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, -1.5, 0.25, 1 / 3, INF, -INF, NAN,
                 1e-45, -1e-45, 127.0, 128.0, -149.0, -150.0, 200.0, -200.0, 16777216.0, 16777217.0 - 1,
                 33554430.0, 3e38, -3e38, 7.0, -7.0, 0.1, 10.5])

CONSTS = [(0.0, "one"), (-0.0, "one"), (1.0, "identity"), (2.0, "square"), (3.0, "cube"), (0.5, "sqrt"),
          (-1.0, "reciprocal"), (-0.5, "rsqrt")]


def pow_model(exp_init=None, exp_type=TensorProto.FLOAT):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]
    inits = []
    if exp_init is not None:
        inits = [numpy_helper.from_array(exp_init, "e")]
    else:
        inputs.append(helper.make_tensor_value_info("e", exp_type, None))
    node = helper.make_node("Pow", ["x", "e"], ["y"], name="pow")
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


def session(model, level):
    with olc_core.simd_cap(level):
        return olc_core.Session(model, threads=1, strict=True, record_usage=True)


def detail_of(entry):
    """'olc_elementwise::Pow[avx2,pow:square]' -> 'avx2,pow:square'."""
    assert entry.startswith("olc_elementwise::Pow["), entry
    return entry[len("olc_elementwise::Pow["):-1]


def run(model, level, feeds):
    s = session(model, level)
    with np.errstate(all="ignore"):
        y = s.run(None, feeds)[0]
    return y, detail_of(s.kernel_usage_details()[-1])


def ref64(x, y):
    """numpy's float64 pow (correctly rounded in practice) rounded to float32."""
    with np.errstate(all="ignore"):
        return np.power(x.astype(np.float64), y.astype(np.float64)).astype(F32)


def ulp(a, b):
    ai = a.view(np.int32).astype(np.int64)
    bi = b.view(np.int32).astype(np.int64)
    ai = np.where(ai < 0, -(ai & 0x7FFFFFFF), ai)
    bi = np.where(bi < 0, -(bi & 0x7FFFFFFF), bi)
    return np.abs(ai - bi)


def assert_same(out, ref, what):
    """Equal bit patterns, NaN equal to any NaN."""
    nan = np.isnan(ref)
    assert (np.isnan(out) == nan).all(), (what, np.flatnonzero(np.isnan(out) != nan)[:5])
    bad = np.flatnonzero(out[~nan].view(np.uint32) != ref[~nan].view(np.uint32))
    assert bad.size == 0, (what, out[~nan][bad[:5]], ref[~nan][bad[:5]])


def round_f32(q: Fraction) -> float:
    """The float32 nearest to the rational q (ties to even), as a Python float."""
    if q == 0:
        return 0.0
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126) - 23  # the quantum: 24 bits for normal results, 2^-149 below
    m = q / Fraction(2) ** e
    mi = m.numerator // m.denominator
    rest = m - mi
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and mi & 1):
        mi += 1
    v = math.ldexp(mi, e)
    return sign * (v if v <= float(np.finfo(F32).max) else math.inf)


def grid():
    xs, ys = np.meshgrid(SPECIAL_X, SPECIAL_Y)
    return xs.ravel().copy(), ys.ravel().copy()


@pytest.mark.parametrize("level", LEVELS)
def test_general_special_values(level):
    """Every pair of special base and exponent, as full tensors (the general
    path), equals numpy's float64 pow rounded to float32 bit for bit, and
    onnx.reference on NaN, infinities, zeros and their signs."""
    x, y = grid()
    out, detail = run(pow_model(), level, {"x": x, "e": y})
    assert detail == f"{level},pow:general"
    ref = ref64(x, y)
    assert_same(out, ref, "float64 reference")
    oref = ReferenceEvaluator(pow_model()).run(None, {"x": x, "e": y})[0]
    special = ~np.isfinite(oref) | (oref == 0)
    assert_same(out[special], oref[special], "onnx.reference")


@pytest.mark.parametrize("level", LEVELS)
def test_general_accuracy_and_tails(level):
    """Random bases over the whole float range (subnormals included), signs
    with integer exponents, results up to overflow and down to subnormals:
    within 1 ulp of the float64 result, exact where it is an integer below
    2^24; every length 1..40 (the tails) and a broadcast exponent."""
    rng = np.random.default_rng(11)
    n = 60_000
    x = np.exp(rng.uniform(-103, 88, n)).astype(F32)
    y = rng.uniform(-3, 3, n).astype(F32)
    neg = rng.random(n) < 0.3
    x[neg] = -x[neg]
    y[neg] = np.round(y[neg] * 3)
    x[:2000] = rng.integers(-60, 60, 2000)
    y[:2000] = rng.integers(-6, 9, 2000)
    # results near the float limits: x^y with y log2 x close to 128 and -149
    t = rng.uniform(-152, 129, 4000)
    yy = rng.uniform(0.5, 40, 4000)
    with np.errstate(over="ignore"):
        x[2000:6000] = np.exp2(t / yy).astype(F32)
    y[2000:6000] = yy.astype(F32)
    out, _ = run(pow_model(), level, {"x": x, "e": y})
    ref = ref64(x, y)
    fin = np.isfinite(ref) & (ref != 0)
    assert_same(out[~fin], ref[~fin], "non-finite and zero results")
    d = ulp(out[fin], ref[fin])
    assert d.max() <= 1, (x[fin][d.argmax()], y[fin][d.argmax()])
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), y.astype(np.float64))
    ints = fin & (exact == np.round(exact)) & (np.abs(exact) < 2 ** 24)
    assert ints.sum() > 500
    assert_same(out[ints], ref[ints], "integer results")
    for m in range(1, 41):
        o, _ = run(pow_model(), level, {"x": x[:m], "e": y[:m]})
        assert_same(o, out[:m], f"length {m}")
        ob, _ = run(pow_model(), level, {"x": x[:m], "e": y[:1].reshape(())})
        assert_same(ob, ref64(x[:m], np.full(m, y[0], F32)), f"scalar exponent, length {m}")


def const_inputs(rng):
    """Bases for the constant-exponent paths: the special values, random
    values of every magnitude and sign, and the tails."""
    with np.errstate(over="ignore"):
        r = (np.exp(rng.uniform(-104, 88.7, 20_000)) * rng.choice([-1, 1], 20_000)).astype(F32)
    return np.concatenate([SPECIAL_X, r, rng.integers(-5000, 5000, 3000).astype(F32)])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("c,want", CONSTS, ids=[repr(c) for c, _ in CONSTS])
def test_constant_exponent_paths(level, c, want):
    """An initializer exponent (scalar, and a tensor filled with the value),
    an int64 initializer and a one-element feed take the exact path (usage
    detail), give the correctly rounded result (against numpy float64 and,
    for x^3 and x^-0.5 where a double result could itself round twice,
    against exact rational arithmetic) and the general path's bits on every
    special input."""
    rng = np.random.default_rng(5)
    x = const_inputs(rng)
    general, _ = run(pow_model(), level, {"x": SPECIAL_X, "e": np.full(SPECIAL_X.size, c, F32)})
    variants = [(pow_model(np.array(c, F32)), {"x": x}),
                (pow_model(np.full(x.shape, c, F32)), {"x": x}),
                (pow_model(), {"x": x, "e": np.array([c], F32)})]
    if float(c).is_integer():
        variants.append((pow_model(np.array(int(c), np.int64)), {"x": x}))
        variants.append((pow_model(exp_type=TensorProto.INT32), {"x": x, "e": np.array(int(c), np.int32)}))
    ref = ref64(x, np.full(x.size, c, F32))
    for model, feeds in variants:
        out, detail = run(model, level, feeds)
        assert detail == f"{level},pow:{want}", detail
        assert out.shape == x.shape
        if want in ("cube", "rsqrt"):
            fin = np.isfinite(ref) & (ref != 0)
            assert_same(out[~fin], ref[~fin], "special results")
            assert ulp(out[fin], ref[fin]).max() <= 1
        else:
            assert_same(out, ref, want)
        assert_same(out[:SPECIAL_X.size], general, "general path on the special inputs")
    if want == "cube":
        out, _ = run(pow_model(np.array(c, F32)), level, {"x": x})
        sample = np.flatnonzero(np.isfinite(x))[::7]
        exact = np.array([math.copysign(round_f32(Fraction(float(v)) ** 3), v) for v in x[sample]], F32)
        assert_same(out[sample], exact, "exact cube")
    if want == "rsqrt":
        out, _ = run(pow_model(np.array(c, F32)), level, {"x": x})
        for v, r in zip(x[::5], out[::5]):
            if not (np.isfinite(v) and v > 0):
                continue
            # x^-1/2 lies strictly between the midpoints around r
            lo = (Fraction(float(r)) + Fraction(float(np.nextafter(r, F32(0))))) / 2
            hi = (Fraction(float(r)) + Fraction(float(np.nextafter(r, F32(INF))))) / 2
            xv = Fraction(float(v))
            assert xv * lo * lo < 1 < xv * hi * hi, (v, r)


def cube_bands():
    """Every float32 significand at the exponents that matter for x^3:
    [1, 2) (a normal cube's rounding depends on the significand alone) and
    each binade from 2^-51 to 2^-43 (cubes in or next to the subnormal
    range, where the rounding quantum is 2^-149 instead)."""
    significands = np.arange(2**23, dtype=np.uint32)
    for e in [0] + list(range(-51, -42)):
        yield e, (significands | np.uint32((e + 127) << 23)).view(F32)


def test_double_cube_never_rounds_twice_wrongly():
    """The x^3 path rounds the double x^2 * x to float. That is the
    correctly rounded cube unless the double product lies exactly on a
    float rounding boundary (a midpoint) that the exact cube is not on;
    every float32 whose double product is on a boundary has an exact one."""
    checked = 0
    for e, x in cube_bands():
        x64 = x.astype(np.float64)
        p = (x64 * x64) * x64
        if e == 0:  # normal results: a midpoint has low 29 significand bits 1 0...0
            on_boundary = (p.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)
        else:  # quantum 2^-149 below 2^-126 (power-of-two scaling is exact)
            v = p * 2.0**149
            on_boundary = (v - np.floor(v) == 0.5) & (p < 2.0**-126)
        for i in np.flatnonzero(on_boundary):
            assert Fraction(float(x[i])) ** 3 == Fraction(float(p[i])), float(x[i])
            checked += 1
    assert checked > 0  # the boundaries exist (exact ties such as 1.00390625^3); none misleads


@pytest.mark.parametrize("level", LEVELS)
def test_cube_matches_double_product_for_every_significand(level):
    """The kernel's x^3 on every significand band of cube_bands() (and the
    negated values) equals float32((x * x) * x) in float64, which the test
    above shows is the correctly rounded cube."""
    s = session(pow_model(np.array(3.0, F32)), level)
    for _, x in cube_bands():
        x = np.concatenate([x, -x[::97]])
        x64 = x.astype(np.float64)
        out = s.run(None, {"x": x})[0]
        assert_same(out, ((x64 * x64) * x64).astype(F32), "cube")
    assert detail_of(s.kernel_usage_details()[-1]) == f"{level},pow:cube"


@pytest.mark.parametrize("level", LEVELS)
def test_constant_paths_broadcast_and_in_place(level):
    """A constant exponent broadcast against the base ([N, 1] x^2 with a
    [1, 5] initializer of twos: a [N, 5] output), a scalar base with a
    constant tensor exponent, and a chain where the square runs in place."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((37, 1)).astype(F32)
    out, detail = run(pow_model(np.full((1, 5), 2.0, F32)), level, {"x": x})
    assert detail == f"{level},pow:square"
    assert_same(out, np.broadcast_to(x * x, (37, 5)).copy(), "broadcast")
    xs = np.array(-3.0, F32)
    out, detail = run(pow_model(np.full((3, 4), 3.0, F32)), level, {"x": xs})
    assert detail == f"{level},pow:cube"
    assert_same(out, np.full((3, 4), -27.0, F32), "scalar base")
    # Abs -> Pow(., 0.5) -> Pow(., 2): intermediates may be reused in place
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Pow", ["a", "h"], ["b"]),
             helper.make_node("Pow", ["b", "two"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(0.5, F32), "h"),
                               numpy_helper.from_array(np.array(2.0, F32), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    xv = rng.standard_normal(1031).astype(F32)
    with olc_core.simd_cap(level):
        s = olc_core.Session(model, threads=1, strict=True, record_usage=True, fusion=False)
    y = s.run(None, {"x": xv})[0]
    assert [detail_of(d) for d in s.kernel_usage_details()[-2:]] == [f"{level},pow:sqrt", f"{level},pow:square"]
    assert_same(y, (np.sqrt(np.abs(xv)) ** 2).astype(F32), "chain")


def test_other_exponents_stay_general():
    """Exponents near the special values, a one-element feed of another
    value and a constant tensor of mixed values take the general path."""
    x = np.linspace(0.1, 4, 100, dtype=F32)
    for c in (2.0000002, 1.9999999, 0.49999997, -1.0000001, 4.0, -2.0):
        _, detail = run(pow_model(np.array(c, F32)), LEVELS[-1], {"x": x})
        assert detail.endswith("pow:general"), (c, detail)
        _, detail = run(pow_model(), LEVELS[-1], {"x": x, "e": np.array([c], F32)})
        assert detail.endswith("pow:general"), (c, detail)
    mixed = np.full(x.shape, 2.0, F32)
    mixed[-1] = 3.0
    out, detail = run(pow_model(mixed), LEVELS[-1], {"x": x})
    assert detail.endswith("pow:general")
    assert ulp(out, ref64(x, mixed)).max() <= 1
