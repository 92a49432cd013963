#!/usr/bin/python3
"""Coefficients of the runtime's float32 Erf (runtime/gemm/vecmath.go).

erf(x) = x·g(x²) with g(t) = erf(√t)/√t, for |x| < 4; beyond, erf(x) is
±1 to within 1.6e-8. g is fitted on t in [0, 16] by least squares at 4000
Chebyshev nodes, as a degree-16 polynomial in u = t/8 − 1 ∈ [−1, 1], and
printed in the monomial basis of u, highest degree first, for Horner's
rule. The script checks the maximum absolute error of the float64
evaluation against math.erf on a dense grid (about 1.3e-8, under half an
ulp of float32 near 1).
"""
import math

import numpy as np
from numpy.polynomial import chebyshev

LIMIT, DEGREE, NODES = 4.0, 16, 4000


def g(t):
    return 1.1283791670955126 if t == 0 else math.erf(math.sqrt(t)) / math.sqrt(t)


def main():
    k = np.arange(NODES)
    u = np.cos(np.pi * (k + 0.5) / NODES)
    t = (u + 1) * LIMIT * LIMIT / 2
    coef = chebyshev.cheb2poly(chebyshev.chebfit(u, [g(x) for x in t], DEGREE))[::-1]
    worst = 0.0
    for x in np.linspace(0, LIMIT, 400001):
        p = 0.0
        uu = x * x * 2 / (LIMIT * LIMIT) - 1
        for c in coef:
            p = p * uu + c
        worst = max(worst, abs(x * p - math.erf(x)))
    for c in coef:
        print(f"\t{float(c)!r},")
    print(f"// max |error| {worst:.3g}")


if __name__ == "__main__":
    main()
