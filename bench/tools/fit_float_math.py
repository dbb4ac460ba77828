#!/usr/bin/env python3
"""Derives the polynomial coefficients and split constants used by the float32
exp/sin/cos/sigmoid/tanh functors in src/backend/common/math.h.

Method: near-minimax fits of the relative error by Lawson's iteratively
reweighted least squares on Chebyshev nodes, with the target functions
evaluated in mpmath at 60 digits. The exp/sin/cos polynomials are evaluated in
double, so coefficients only need to be good to ~1e-12; the printed max relative
errors are those of the rounded (double) coefficients. tanh's are evaluated in
float and are rounded to float before their error is measured.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy mpmath
    /tmp/v/bin/python bench/tools/fit_float_math.py
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 60


def lawson(basis, target, weight, xs, iters=200):
    """Minimise max |weight(x) * (sum c_j basis_j(x) - target(x))| over xs."""
    A = np.array([[float(b(x)) for b in basis] for x in xs])
    t = np.array([float(target(x)) for x in xs])
    w0 = np.array([float(weight(x)) for x in xs])
    lw = np.ones(len(xs)) / len(xs)
    for _ in range(iters):
        s = np.sqrt(lw) * w0
        c, *_ = np.linalg.lstsq(A * s[:, None], t * s, rcond=None)
        e = np.abs((A @ c - t) * w0)
        lw = lw * e
        lw /= lw.sum()
    return c


def cheb(a, b, n):
    return [mp.mpf(a + b) / 2 + mp.mpf(b - a) / 2 * mp.cos(mp.pi * (2 * i + 1) / (2 * n)) for i in range(n)]


def max_rel(f, ref, a, b, n=20001):
    m = 0
    for i in range(n):
        x = mp.mpf(a) + (mp.mpf(b) - a) * i / (n - 1)
        r = ref(x)
        if r != 0:
            m = max(m, abs((f(x) - r) / r))
    return float(m)


def horner(cs, u):
    p = mp.mpf(0)
    for c in reversed(cs):
        p = p * u + mp.mpf(float(c))
    return p


# exp(r) = 1 + r + r^2 * E(r), |r| <= ln2/2, E of degree 5 (exp polynomial of degree 7).
h = float(mp.log(2) / 2) * 1.001
xs = [x for x in cheb(-h, h, 400) if x != 0]
E = lawson([lambda r, j=j: r**j for j in range(6)], lambda r: (mp.exp(r) - 1 - r) / r**2,
           lambda r: r**2 / mp.exp(r), xs)
print("exp   r^2..r^7:", [repr(float(c)) for c in E],
      "max rel err %.3g" % max_rel(lambda r: 1 + r + r * r * horner(E, r), mp.exp, -h, h))

# sin(r) = r + r^3 * S(r^2), cos(r) = 1 - r^2/2 + r^4 * C(r^2), |r| <= pi/4 (u = r^2).
q = float(mp.pi / 4) * 1.001
xs = [x for x in cheb(0, q, 400) if x != 0]
S = lawson([lambda r, j=j: r**(2 * j) for j in range(4)], lambda r: (mp.sin(r) - r) / r**3,
           lambda r: r**3 / mp.sin(r), xs)
C = lawson([lambda r, j=j: r**(2 * j) for j in range(4)], lambda r: (mp.cos(r) - 1 + r * r / 2) / r**4,
           lambda r: r**4 / mp.cos(r), xs)
print("sin   r^3..r^9:", [repr(float(c)) for c in S],
      "max rel err %.3g" % max_rel(lambda r: r + r**3 * horner(S, r * r), mp.sin, 1e-9, q))
print("cos  r^4..r^10:", [repr(float(c)) for c in C],
      "max rel err %.3g" % max_rel(lambda r: 1 - r * r / 2 + r**4 * horner(C, r * r), mp.cos, 0, q))


def split(v, bits, parts):
    """v = sum of parts doubles; all but the last have at most `bits` significant bits."""
    out = []
    rest = mp.mpf(v)
    for _ in range(parts - 1):
        e = mp.floor(mp.log(abs(rest), 2))
        scale = mp.mpf(2) ** (bits - 1 - e)
        hi = mp.floor(rest * scale + mp.mpf(1) / 2) / scale
        out.append(float(hi))
        assert mp.mpf(float(hi)) == hi
        rest -= hi
    out.append(float(rest))
    return out


print("pi/2 = C1 + C2 + C3 (C1, C2 23 bits: k * C1, k * C2 exact for |k| < 2^30):",
      [repr(c) for c in split(mp.pi / 2, 23, 3)])
print("2/pi:", repr(float(2 / mp.pi)), " log2(e):", repr(float(1 / mp.log(2))), " ln2:", repr(float(mp.log(2))))


# float tanh (tanh_f32), evaluated in float, so coefficients are rounded to float before the
# error is measured. Small |x|: tanh(a) = a + a^3 * T(a^2) on [0, 0.66]; larger: e^-2a through
# e^r - 1 = r + r^2 * E(r), |r| <= ln2/2, E of degree 4, with ln2 split so that k * hi is
# exact in float for |k| <= 27.
def f32(x):
    return float(np.float32(x))


c = 0.66
xs = [x for x in cheb(0, c * 1.001, 300) if x > 1e-3]
T = [f32(t) for t in lawson([lambda a, j=j: a**(2 * j) for j in range(6)], lambda a: (mp.tanh(a) - a) / a**3,
                            lambda a: a**3 / mp.tanh(a), xs)]
print("tanh  a^3..a^13 (float):", [repr(t) for t in T],
      "max rel err %.3g" % max_rel(lambda a: a + a**3 * horner(T, a * a), mp.tanh, 1e-3, c))
xs = [x for x in cheb(-h, h, 400) if x != 0]
Ef = [f32(e) for e in lawson([lambda r, j=j: r**j for j in range(5)], lambda r: (mp.exp(r) - 1 - r) / r**2,
                             lambda r: r**2 / mp.exp(r), xs)]
print("tanh's e^r - 1, r^2..r^6 (float):", [repr(e) for e in Ef],
      "max rel err of e^r %.3g" % max_rel(lambda r: 1 + r + r * r * horner(Ef, r), mp.exp, -h, h))
print("ln2 = hi + lo (hi 16 bits), float:", [repr(f32(v)) for v in split(mp.log(2), 16, 2)])


# sin and cos for the GPU's float32 (sincos_fma_core_f32), evaluated in float with fma:
# sin(r) = r + r^3 S(u), cos(r) = 1 - u/2 + u^2 C(u), u = r^2, |r| <= pi/4, S and C of degree 2
# rounded to float; pi/2 = P1 + P2 + P3, floats cut below it (each rounded toward zero) so all
# three are positive.
q = float(mp.pi / 4) * 1.001
xs = [x for x in cheb(0, q, 400) if x != 0]
Sf = [f32(s) for s in lawson([lambda r, j=j: r**(2 * j) for j in range(3)], lambda r: (mp.sin(r) - r) / r**3,
                             lambda r: r**3 / mp.sin(r), xs)]
Cf = [f32(c) for c in lawson([lambda r, j=j: r**(2 * j) for j in range(3)], lambda r: (mp.cos(r) - 1 + r * r / 2) / r**4,
                             lambda r: r**4 / mp.cos(r), xs)]
print("gpu sin r^3..r^7 (float):", [repr(s) for s in Sf],
      "max rel err %.3g" % max_rel(lambda r: r + r**3 * horner(Sf, r * r), mp.sin, 1e-9, q))
print("gpu cos r^4..r^8 (float):", [repr(c) for c in Cf],
      "max rel err %.3g" % max_rel(lambda r: 1 - r * r / 2 + r**4 * horner(Cf, r * r), mp.cos, 0, q))
down = lambda v: f32(v) if f32(v) <= v else float(np.nextafter(np.float32(v), np.float32(0)))
p1 = down(mp.pi / 2)
p2 = down(mp.pi / 2 - p1)
print("gpu pi/2 = P1 + P2 + P3 (floats):", [repr(p1), repr(p2), repr(f32(mp.pi / 2 - p1 - p2))])
