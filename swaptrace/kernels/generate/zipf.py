"""Counter-based random streams and the bounded Zipf sampler (numba).

Streams: SplitMix64 (Steele, Lea & Flood, OOPSLA 2014), seeded per
``(seed, step, table, lane)`` by chained finalizer hashes, so any step can be
drawn without drawing the steps before it. Zipf: rejection-inversion of
Hörmann & Derflinger (ACM TOMACS 6(3), 1996), in the form of Apache Commons
RNG ``RejectionInversionZipfSampler``; valid for every exponent ``s > 0``.
The pure-Python twin is ``tests/naive_generate.py``.
"""

from __future__ import annotations

import math

import numpy as np

from swaptrace.kernels.jit import jit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SCRAMBLE_TAG = np.uint64(0xA5A5A5A5A5A5A5A5)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@jit
def _mix64(z):
    """SplitMix64 finalizer (a bijection on uint64)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@jit
def _stream(seed, step, table, lane):
    """Initial state of the stream for (seed, step, table, lane); all uint64."""
    h = _mix64(seed + GOLDEN)
    h = _mix64(h ^ step)
    h = _mix64(h + table + GOLDEN)
    return _mix64(h + lane + GOLDEN)


@jit
def _next_u64(state):
    """SplitMix64 step: returns (output, new state)."""
    state = state + GOLDEN
    return _mix64(state), state


@jit
def _uniform(state):
    """A double in [0, 1) with 53 random bits: returns (u, new state)."""
    x, state = _next_u64(state)
    return np.float64(x >> _S11) * _INV53, state


@jit
def _helper1(x):
    """log1p(x) / x, continuous at 0."""
    if abs(x) > 1e-8:
        return math.log1p(x) / x
    return 1.0 - x * (0.5 - x * (0.3333333333333333 - 0.25 * x))


@jit
def _helper2(x):
    """expm1(x) / x, continuous at 0."""
    if abs(x) > 1e-8:
        return math.expm1(x) / x
    return 1.0 + x * 0.5 * (1.0 + x * 0.3333333333333333 * (1.0 + 0.25 * x))


@jit
def _h(x, s):
    """h(x) = x^-s, the unnormalised Zipf weight."""
    return math.exp(-s * math.log(x))


@jit
def _h_integral(x, s):
    """H(x) = (x^(1-s) - 1) / (1-s), ln x at s = 1."""
    log_x = math.log(x)
    return _helper2((1.0 - s) * log_x) * log_x


@jit
def _h_integral_inverse(x, s):
    """H^-1(x) = (1 + x(1-s))^(1/(1-s)), exp(x) at s = 1."""
    t = x * (1.0 - s)
    if t < -1.0:
        t = -1.0  # guards rounding just below the domain edge
    return math.exp(_helper1(t) * x)


@jit
def zipf_setup(n, s):
    """Constants of the sampler: (hX1, hN, S) for n ranks and exponent s."""
    h_x1 = _h_integral(1.5, s) - 1.0
    h_n = _h_integral(n + 0.5, s)
    big_s = 2.0 - _h_integral_inverse(_h_integral(2.5, s) - _h(2.0, s), s)
    return h_x1, h_n, big_s


@jit
def _zipf_draw(state, n, s, h_x1, h_n, big_s):
    """One bounded-Zipf rank in [1, n]: returns (rank, new state)."""
    while True:
        u01, state = _uniform(state)
        u = h_n + u01 * (h_x1 - h_n)  # in (hX1, hN]
        x = _h_integral_inverse(u, s)
        k = np.int64(x + 0.5)
        if k < 1:
            k = 1
        elif k > n:
            k = n
        if k - x <= big_s or u >= _h_integral(k + 0.5, s) - _h(np.float64(k), s):
            return k, state


@jit
def zipf_many(seed, n, s, out):
    """Fill ``out`` with ranks from the stream (seed, 0, 0, lane 0)."""
    h_x1, h_n, big_s = zipf_setup(n, s)
    state = _stream(np.uint64(seed), np.uint64(0), np.uint64(0), np.uint64(0))
    for i in range(out.shape[0]):
        out[i], state = _zipf_draw(state, n, s, h_x1, h_n, big_s)


@jit
def zipf_scramble_params(seed, table, n):
    """Multiplier a (gcd(a, n) = 1) and offset b of the bijection k -> (a k + b) mod n."""
    hs = _mix64(_mix64(seed + GOLDEN) ^ _SCRAMBLE_TAG)
    h1 = _mix64(hs + table * _U2 + _U1)
    h2 = _mix64(hs + table * _U2 + _U2)
    if n <= 1:
        return np.int64(1), np.int64(0)
    un = np.uint64(n)
    a = np.int64(h1 % (un - _U1)) + 1
    while _gcd(a, n) != 1:
        a += 1
        if a >= n:
            a = 1
    return a, np.int64(h2 % un)


@jit
def _gcd(a, b):
    """Greatest common divisor (Euclid)."""
    while b:
        a, b = b, a % b
    return a
