"""Fit the float32 polynomial coefficients used by vmath_impl.h.

Near-minimax fits by Lawson's iteratively reweighted least squares in
float64, then coefficients rounded to float32 one at a time from the lowest
order up, refitting the remaining ones after each rounding so the rounding
error of a low-order coefficient is absorbed by the higher ones.

Run: python fit_coeffs.py   (prints C++ constants and the fit error)
"""
import math

import numpy as np


def lawson(A, y, w, iters=60):
    """min_c max_i |w_i (A c - y)_i| via Lawson's algorithm."""
    lam = np.full(len(y), 1.0 / len(y))
    Aw = A * w[:, None]
    yw = y * w
    c = None
    for _ in range(iters):
        s = np.sqrt(lam)
        c, *_ = np.linalg.lstsq(Aw * s[:, None], yw * s, rcond=None)
        e = np.abs(Aw @ c - yw)
        lam = lam * e
        lam /= lam.sum()
    return c


def fit(name, x, target, fixed, basis, weight):
    """target(x) ~= fixed(x) + sum_k c_k basis_k(x); error weighted by weight(x)."""
    A = np.stack([b(x) for b in basis], axis=1)
    y = target - fixed
    w = weight
    coeffs = []
    for k in range(len(basis)):
        c = lawson(A[:, k:], y, w)
        ck = float(np.float32(c[0]))
        coeffs.append(ck)
        y = y - ck * A[:, k]
    err = np.max(np.abs(y * w))
    print(f"// {name}: max weighted error {err:.3e} ({err / 2**-24:.3f} x 2^-24)")
    for i, ck in enumerate(coeffs):
        print(f"  {name}_c{i} = {np.float32(ck).item()!r:>16}  // {float(np.float32(ck)).hex()}")
    return coeffs


def cheb(a, b, n=20001):
    t = np.cos(np.linspace(0, math.pi, n))
    return np.sort(0.5 * (a + b) + 0.5 * (b - a) * t)


def mono(k, pre=lambda x: 1.0, arg=lambda x: x):
    return lambda x: pre(x) * arg(x) ** k


ln2 = math.log(2.0)

# exp(r) = 1 + r + r^2 * P(r), |r| <= ln2/2, relative error
x = cheb(-ln2 / 2 * 1.01, ln2 / 2 * 1.01)
fit("exp", x, np.exp(x), 1 + x, [mono(k, pre=lambda x: x * x) for k in range(5)], np.exp(-x))

# expm1(r) = r + r^2/2 + r^3 * P(r), relative error
x = cheb(-ln2 / 2 * 1.01, ln2 / 2 * 1.01)
x = x[np.abs(x) > 1e-6]
fit("expm1", x, np.expm1(x), x + x * x / 2, [mono(k, pre=lambda x: x**3) for k in range(5)],
    1 / np.abs(np.expm1(x)))

# log(1+f) = f - f^2/2 + f^3 * P(f), f in [sqrt(1/2)-1, sqrt(2)-1], relative
x = cheb(math.sqrt(0.5) - 1 - 1e-4, math.sqrt(2) - 1 + 1e-4)
x = x[np.abs(x) > 1e-6]
fit("log", x, np.log1p(x), x - x * x / 2, [mono(k, pre=lambda x: x**3) for k in range(8)],
    1 / np.abs(np.log1p(x)))

# sin(r) = r + r^3 * P(r^2), cos(r) = 1 - r^2/2 + r^4 * Q(r^2), |r| <= pi/4
x = cheb(1e-4, math.pi / 4 * 1.001)
fit("sin", x, np.sin(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(4)],
    1 / np.sin(x))
x = cheb(0, math.pi / 4 * 1.001)
fit("cos", x, np.cos(x), 1 - x * x / 2, [mono(k, pre=lambda x: x**4, arg=lambda x: x * x) for k in range(4)],
    1 / np.cos(x))

# tan(r) = r + r^3 * P(r^2), |r| <= pi/4, relative error (tan's own
# polynomial: sin/cos and a quotient measured 3.7 ulp)
x = cheb(1e-4, math.pi / 4 * 1.001)
fit("tan", x, np.tan(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(7)],
    1 / np.tan(x))

# asin(s) = s + s^3 * P(s^2), s in [0, 1/2] (above 1/2 the callers take
# s = sqrt((1 - |x|) / 2)), relative error
x = cheb(1e-4, 0.5 * 1.001)
fit("asin", x, np.arcsin(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(5)],
    1 / np.arcsin(x))

# atan(t) = t + t^3 * P(t^2), |t| <= 1/2 (the callers reduce |x| > 1/2 with
# (a - 1) / (a + 1) and -1 / a), relative error
x = cheb(1e-4, 0.5 * 1.001)
fit("atan", x, np.arctan(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(5)],
    1 / np.arctan(x))


def f32hex(v):
    if v == 0:
        return "0.0f"
    m, e = float(np.float32(v)).hex().split("p")
    m = m.rstrip("0").rstrip(".")
    return f"{m}p{e}f"


def pieces(name, func, width, deg, first_at_zero=False, last_hi=None):
    """16 pieces of `width` from 0, each func(a) ~ sum_j C_j (a - k width)^j
    (expanded at the piece's left end, so t = a - k width is exact) with
    relative weight; first_at_zero: C0 = 0 in piece 0 (relative accuracy
    near 0); last_hi: the last piece extends to there."""
    tabs, worst = [], 0.0
    for k in range(16):
        lo, hi = k * width, (k + 1) * width
        if k == 15 and last_hi is not None:
            hi = last_hi
        zero = first_at_zero and k == 0
        c = lo
        x = cheb(max(lo, 1e-6), hi * 1.0005 + 1e-4)
        A = np.stack([(x - np.float32(c)) ** j for j in range(1 if zero else 0, deg + 1)], axis=1)
        y = func(x)
        w = 1 / y
        cs = []
        for j in range(A.shape[1]):
            cj = float(np.float32(lawson(A[:, j:], y, w)[0]))
            cs.append(cj)
            y = y - cj * A[:, j]
        worst = max(worst, float(np.max(np.abs(y * w))))
        tabs.append((c, ([0.0] if zero else []) + cs))
    print(f"// {name}: max relative error {worst:.3e} ({worst / 2**-24:.3f} x 2^-24)")
    for j in range(deg + 1):
        print(f"  C{j} = {{{', '.join(f32hex(cs[j]) for _, cs in tabs)}}}")


# erf(a) on [0, 4): 16 pieces of 1/4, degree 5 (kErfPw)
verf = np.vectorize(math.erf)
pieces("erf_pw", verf, 0.25, 5, first_at_zero=True)

# GELU: R(a) = Phi(-a) exp(a^2/2) on [0, 8): 16 pieces of 1/2, degree 5 (kGeluPw)
pieces("gelu_r", np.vectorize(lambda a: 0.5 * math.erfc(a / math.sqrt(2)) * math.exp(a * a / 2)),
       0.5, 5)

# tanh(a) on [0, 9.1): 16 pieces of 1/2 (the last one 7.5..9.1), degree 7 (kTanhPw)
pieces("tanh_pw", np.tanh, 0.5, 7, first_at_zero=True, last_hi=9.1)


def rational(name, func, lo, hi, p, q, iters=40, points=20001):
    """func ~ P/Q on [lo, hi], deg P = p, deg Q = q, Q(0) = 1, in relative
    error: Loeb's linearization (P - func Q weighted by 1 / (func Q_prev))
    with Lawson's reweighting toward the minimax fit."""
    x = cheb(lo, hi, points)
    y = func(x)
    lam, qprev = np.full(len(x), 1.0 / len(x)), np.ones(len(x))
    for _ in range(iters):
        A = np.hstack([np.stack([x**j for j in range(p + 1)], 1), -np.stack([y * x**j for j in range(1, q + 1)], 1)])
        w = np.sqrt(lam) / (y * qprev)
        c, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
        num = sum(c[j] * x**j for j in range(p + 1))
        qprev = 1 + sum(c[p + j] * x**j for j in range(1, q + 1))
        e = np.abs(num / qprev - y) / y
        lam = lam * e
        lam /= lam.sum()
    print(f"// {name}: max relative error {e.max():.3e} ({e.max() / 2**-24:.3f} x 2^-24) before float32 rounding")
    print(f"  P = {{{', '.join(f32hex(v) for v in c[:p + 1])}}}")
    print(f"  Q = {{1.0f, {', '.join(f32hex(v) for v in c[p + 1:])}}}")


# GELU's R(a) on [0, 8] as one rational, degrees 4 / 5 (kGeluRP / kGeluRQ, the
# AVX2 form). The float32 constants in vmath_impl.h are these, then moved by
# at most 3 ulp each (a coordinate search on the float32 evaluation: its
# error over [0, 8] went from 4.9 to 4.4 x 2^-24).
rational("gelu_r_rational", np.vectorize(lambda a: 0.5 * math.erfc(a / math.sqrt(2)) * math.exp(a * a / 2)),
         0.0, 8.0, 4, 5)

# The same R(a) on [0, 14] (olc-contrib-microsoft's Gelu and BiasGelu,
# act_gelu_erf in cm_engine.inc, which keep the tail down to x = -13.2):
# 5.6e-9 relative before rounding. The float32 constants there are a set
# near this one (they differ in the low bits) with the same bound.
rational("gelu_r_rational_14", np.vectorize(lambda a: 0.5 * math.erfc(a / math.sqrt(2)) * math.exp(a * a / 2)),
         0.0, 14.0, 4, 5)

# erf(a) / a as a rational in u = a^2 on [0, 3.92^2], degrees 5 / 5
# (kErfRP / kErfRQ, the AVX2 form erf(a) = a P(u) / Q(u)): 3.1e-8 relative
# (0.31 x 2^-24) before rounding. The float32 constants in vmath_impl.h are
# these rounded, then P1, P2 and Q1 moved by one ulp each (a coordinate
# search on the float32 evaluation: max error 5.5 -> 5.2 ulp over a dense
# sample of [0, 3.92]).
rational("erf_over_a_rational",
         np.vectorize(lambda u: math.erf(math.sqrt(u)) / math.sqrt(u) if u > 0 else 2 / math.sqrt(math.pi)),
         0.0, 3.92**2, 5, 5, iters=60, points=40001)
