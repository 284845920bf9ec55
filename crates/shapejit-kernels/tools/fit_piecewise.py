#!/usr/bin/env python3
"""Fits the piecewise polynomials of `src/math.rs` and prints them as Rust tables.

    python3 tools/fit_piecewise.py gelu|erf      (needs numpy)

A table has 16 pieces of `a >= 0`. Piece `i` holds the `a` whose `u` (`a·(a + k)`,
or `a` itself for k = 0) rounds to `i` at `u·inv_d`; it is a polynomial in
`t = a - mid[i]`, fitted on the piece widened by 1% on each side (a rounded `u`
may pick a neighbour) for least relative error: least squares reweighted toward
minimax (Lawson's iteration) in f64 at Chebyshev nodes, coefficients then rounded
to f32. The printed "approx ulp" is the fit's error before f32 evaluation.
"""

import math
import sys

import numpy as np


def f32(x):
    return float(np.float32(x))


def fit(f, lo, hi, deg, n=2000, iters=60):
    """Polynomial (highest degree first) of least max relative error on [lo, hi]."""
    t = np.cos(np.linspace(0, np.pi, n)) * (hi - lo) / 2 + (hi + lo) / 2
    y = np.array([f(v) for v in t])
    weight = 1 / np.abs(y)
    vander = np.vander(t, deg + 1)
    u = np.ones(n) / n
    best = None
    for _ in range(iters):
        w = np.sqrt(u) * weight
        c = np.linalg.lstsq(vander * w[:, None], y * w, rcond=None)[0]
        e = np.abs(vander @ c - y) * weight
        if best is None or e.max() < best[1]:
            best = (c, e.max())
        u = u * e
        u /= u.sum()
    return best


def gen(name, func, top, k, deg, slope_at_0=None, pieces=16):
    """`slope_at_0`: piece 0 is `a·Q(a)` (no constant term; Q(0) = slope_at_0)."""
    v = top * (top + k) if k else top
    inv_d = f32((pieces - 0.75) / v)

    def a_of(u):
        if u <= 0:
            return 0.0
        return (-k + math.sqrt(k * k + 4 * u)) / 2 if k else u

    rows, mids, errs = [], [], []
    for i in range(pieces):
        lo, hi = a_of((i - 0.5) / inv_d), min(a_of((i + 0.5) / inv_d), top)
        w = hi - lo
        lo, hi = max(0.0, lo - 0.01 * w), hi + 0.01 * w
        mid = f32((lo + hi) / 2) if i else 0.0
        if i == 0 and slope_at_0 is not None:
            c, e = fit(lambda t: func(t) / t if t > 0 else slope_at_0, lo, hi, deg - 1)
            c = list(c) + [0.0]
        else:
            c, e = fit(lambda t: func(mid + t), lo - mid, hi - mid, deg)
        rows.append([f32(x) for x in c])
        mids.append(mid)
        errs.append(e / 2**-24)
    print(f"// {name}: max {top} k {k} degree {deg}, approx ulp per piece:")
    print("// " + " ".join(f"{e:.2f}" for e in errs))
    print(f"const {name}_INV_D: f32 = {str(np.float32(inv_d))};")
    print("#[rustfmt::skip]")
    print(f"const {name}_MID: [f32; {pieces}] = [{', '.join(str(np.float32(m)) for m in mids)}];")
    print("#[rustfmt::skip]")
    print(f"const {name}: [[f32; {pieces}]; {deg + 1}] = [")
    for j in range(deg + 1):
        print("    [" + ", ".join(str(np.float32(r[j])) for r in rows) + "],")
    print("];")


def phi_neg(a):
    """Φ(-a), the normal distribution's lower tail."""
    return 0.5 * math.erfc(a / math.sqrt(2))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "gelu":
        gen("GELU_TAIL", phi_neg, 5.5, 3.0, 7)
    elif what == "erf":
        gen("ERF", math.erf, 3.9, 0.0, 6, slope_at_0=2 / math.sqrt(math.pi))
    else:
        sys.exit("usage: fit_piecewise.py gelu|erf")
