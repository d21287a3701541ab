#!/usr/bin/env python3
"""Prints the polynomial coefficients of docs/numerics.md, "Elementary functions" (strict mode), as C++
hex-float literals: near-minimax (Chebyshev) fits computed with mpmath at 300 bits, each coefficient
rounded to the nearest double, and the largest error of the rounded polynomial over 4001 points of its
interval. include/qopt/Numerics/ElementaryConstants.h holds the printed values for the compiler and the
C++ reference; a changed fit changes both (and every kernel that uses the functions).

    python3 test/reference/tools/elementary_coefficients.py      # about a minute
"""
import mpmath as mp

mp.mp.prec = 300


def exp_u(r):  # (exp(r) - 1 - r) / r^2 = sum_{n>=2} r^(n-2) / n!
    return mp.fsum(r ** (n - 2) / mp.factorial(n) for n in range(2, 60))


def log_p(z):  # (2 atanh(s) / s - 2) / z with z = s^2 = sum_{k>=1} 2 z^(k-1) / (2k+1)
    return mp.fsum(2 * z ** (k - 1) / (2 * k + 1) for k in range(1, 200))


def atan_q(z):  # (atan(t) / t - 1) / z with z = t^2 = sum_{k>=1} (-1)^k z^(k-1) / (2k+1)
    return mp.fsum((-1) ** k * z ** (k - 1) / (2 * k + 1) for k in range(1, 400))


FITS = [
    # name, function, interval, degree
    ("kExpU", exp_u, (mp.mpf("-0.35"), mp.mpf("0.35")), 10),
    ("kLogP", log_p, (mp.mpf(0), mp.mpf("0.0295")), 7),
    ("kAtanQ", atan_q, (mp.mpf(0), (mp.mpf(5) / 12) ** 2), 11),
]


def main():
    for name, f, (a, b), degree in FITS:
        coeffs, _ = mp.chebyfit(f, [a, b], degree + 1, error=True)
        doubles = [float(c) for c in reversed(coeffs)]  # lowest degree first
        worst = max(abs(mp.fsum(mp.mpf(c) * x ** j for j, c in enumerate(doubles)) - f(x))
                    for x in (a + (b - a) * mp.mpf(i) / 4000 for i in range(4001)))
        print(f"// {name}: degree {degree} on [{mp.nstr(a, 6)}, {mp.nstr(b, 6)}], "
              f"max abs error 2^{float(mp.log(worst, 2)):.2f}, lowest degree first")
        print(f"constexpr double {name}[] = {{")
        for c in doubles:
            print(f"    {c.hex()}, // {c!r}")
        print("};")


if __name__ == "__main__":
    main()
