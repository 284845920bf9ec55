#!/usr/bin/env python3
"""Fits the coefficients of `tanh` and `sigmoid` in `src/math.rs` (needs numpy).

    python3 tools/fit_rational.py

tanh: `x·P(x²)/Q(x²)` with `Q(0) = 1`, of least max relative error on
`0 < x ≤ TANH_CLAMP`, by a linearised least-squares iteration
(Sanathanan–Koerner: `P - g·Q` weighted by `1/(g·Q_prev)`) reweighted toward
minimax (Lawson), in f64 at Chebyshev nodes, then rounded to f32.

sigmoid: `e^-r ≈ 1 + r·K(r)` on `|r| ≤ ln2/2` (the reduced argument of
`e^-x`), least max relative error by Lawson's iteration.

Each fit prints its error before f32 evaluation (in units of 2⁻²⁴ relative).
"""

import math

import numpy as np

TANH_CLAMP = 9.02


def f32(x):
    return float(np.float32(x))


def rational(v, y, n, m, iters=100):
    """`N/D` (degrees n, m in v; lowest degree first; D[0] = 1) of least max relative error."""
    vn = np.vander(v, n + 1, increasing=True)
    vm = np.vander(v, m + 1, increasing=True)
    u = np.ones(len(v)) / len(v)
    d_prev = np.ones(len(v))
    best = None
    for _ in range(iters):
        w = np.sqrt(u) / (np.abs(y) * np.abs(d_prev))
        a = np.hstack([vn, -(y[:, None] * vm[:, 1:])]) * w[:, None]
        c = np.linalg.lstsq(a, y * w, rcond=None)[0]
        num, den = c[: n + 1], np.concatenate([[1.0], c[n + 1 :]])
        d_prev = vm @ den
        e = np.abs((vn @ num) / d_prev - y) / np.abs(y)
        if best is None or e.max() < best[2]:
            best = (num, den, e.max())
        u = u * e
        u /= u.sum()
    return best


def polynomial(t, y, deg, iters=100):
    """Polynomial (lowest degree first) of least max relative error."""
    vt = np.vander(t, deg + 1, increasing=True)
    u = np.ones(len(t)) / len(t)
    best = None
    for _ in range(iters):
        w = np.sqrt(u) / np.abs(y)
        c = np.linalg.lstsq(vt * w[:, None], y * w, rcond=None)[0]
        e = np.abs(vt @ c - y) / np.abs(y)
        if best is None or e.max() < best[1]:
            best = (c, e.max())
        u = u * e
        u /= u.sum()
    return best


def chebyshev(lo, hi, n=4000):
    return np.cos(np.linspace(0, np.pi, n)) * (hi - lo) / 2 + (hi + lo) / 2


def tanh_fit(n=4, m=4):
    c = TANH_CLAMP
    x = chebyshev(0, c)
    x = x[x > 1e-6]
    v = (x / c) ** 2  # fit in v = s/c² (well conditioned), then scale to s
    num, den, e = rational(v, np.tanh(x) / x, n, m)
    p = [num[j] / c ** (2 * j) for j in range(n + 1)]
    q = [den[j] / c ** (2 * j) for j in range(m + 1)]
    return p, q, e


def exp_fit(deg=5):
    h = math.log(2) / 2 * 1.001
    r = chebyshev(-h, h)
    r = r[np.abs(r) > 1e-9]
    k, e = polynomial(r, np.expm1(-r) / r, deg)
    # relative error of 1 + r·K against e^-r
    e = np.max(np.abs(1 + r * np.polyval(k[::-1], r) - np.exp(-r)) / np.exp(-r))
    return list(k), e


def show(name, coefs):
    body = ", ".join(str(np.float32(x)) for x in coefs)
    print(f"const {name}: [f32; {len(coefs)}] = [{body}];")


if __name__ == "__main__":
    p, q, e = tanh_fit()
    print(f"// tanh: fit error {e / 2**-24:.3f} (2^-24 relative)")
    show("TANH_P", p[::-1])
    show("TANH_Q", q[::-1])
    k, e = exp_fit()
    print(f"// e^-r: fit error {e / 2**-24:.3f} (2^-24 relative)")
    show("EXP_NEG_K", k[::-1])
