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

# tanh(x) = x + x^3 * P(x^2) on [0, 0.625], relative
x = cheb(1e-4, 0.625)
fit("tanh", x, np.tanh(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(5)],
    1 / np.tanh(x))

# erf(x) = x * P(x^2) on [0, 0.921875], relative
verf = np.vectorize(math.erf)
verfc = np.vectorize(math.erfc)
x = cheb(1e-4, 0.921875)
fit("erf", x, verf(x), 0 * x, [mono(k, pre=lambda x: x, arg=lambda x: x * x) for k in range(7)],
    1 / verf(x))

# log(erfc(x)) = -x^2 + P(x) on [0.921875, 4]: absolute error in the exponent
x = cheb(0.921875, 4.0)
fit("erfc", x, np.log(verfc(x)), -x * x, [mono(k) for k in range(10)], np.ones_like(x))

# the same on [0.921875, 5] for gelu (its negative side needs erfc past 4),
# in t = x - 2.9609375 to keep the monomial basis well conditioned
x = cheb(0.921875, 5.0)
fit("erfcg", x, np.log(verfc(x)), -x * x, [mono(k, arg=lambda x: x - 2.9609375) for k in range(10)],
    np.ones_like(x))

# sin(r) = r + r^3 * P(r^2), cos(r) = 1 - r^2/2 + r^4 * Q(r^2), |r| <= pi/4
x = cheb(1e-4, math.pi / 4 * 1.001)
fit("sin", x, np.sin(x), x, [mono(k, pre=lambda x: x**3, arg=lambda x: x * x) for k in range(4)],
    1 / np.sin(x))
x = cheb(0, math.pi / 4 * 1.001)
fit("cos", x, np.cos(x), 1 - x * x / 2, [mono(k, pre=lambda x: x**4, arg=lambda x: x * x) for k in range(4)],
    1 / np.cos(x))
