"""Bounded Zipf: sampling, the scrambling bijection, and fitting an exponent.

Sampling is rejection-inversion (Hörmann & Derflinger, "Rejection-inversion
to generate variates from monotone discrete distributions", ACM TOMACS 6(3),
1996; the variant of Apache Commons RNG ``RejectionInversionZipfSampler``):
O(1) memory and O(1) expected time for any exponent ``s > 0``, including
``s = 1`` and ``s < 1`` (numpy's ``zipf`` is unbounded and needs ``s > 1``).
Rank ``k`` in ``[1, n]`` has probability ``k**-s / H(n, s)`` with
``H(n, s) = sum_{j=1..n} j**-s``.

Hot ranks are mapped to rows by the bijection ``row = (a (k-1) + b) mod n``
with ``gcd(a, n) = 1`` (so it is a permutation of ``[0, n)``), ``a`` and
``b`` derived from the seed and the table index -- FBGEMM permutes ranks for
the same reason: small ranks must not all be the lowest row ids
(FBGEMM's embedding benchmarks; docs/generate.md).
"""

from __future__ import annotations

import math

import numpy as np

from swaptrace.core.solve import bisect_decreasing
from swaptrace.errors import ConfigError
from swaptrace.kernels.generate.zipf import zipf_many, zipf_scramble_params, zipf_setup


def zipf_constants(n: int, s: float) -> tuple[float, float, float]:
    """``(hX1, hN, S)`` of the rejection-inversion sampler for ``n`` ranks, exponent ``s``."""
    return zipf_setup(float(n), float(s))


def zipf_ranks(n: int, s: float, size: int, seed: int = 0) -> np.ndarray:
    """``size`` bounded-Zipf ranks in ``[1, n]`` (int64), from the generator's own kernel."""
    if n < 1 or s <= 0:
        raise ConfigError(f"zipf: need n >= 1 and s > 0, got n={n}, s={s}")
    out = np.empty(size, dtype=np.int64)
    zipf_many(np.uint64(seed), np.int64(n), float(s), out)
    return out


def scramble_params(seed: int, table: int, n: int) -> tuple[int, int]:
    """``(a, b)`` of the rank-to-row bijection of table ``table`` (``gcd(a, n) == 1``)."""
    a, b = zipf_scramble_params(np.uint64(seed), np.uint64(table), np.int64(n))
    return int(a), int(b)


def scramble(ranks: np.ndarray, a: int, b: int, n: int) -> np.ndarray:
    """Rows of 1-based ``ranks`` under the bijection ``(a (k-1) + b) mod n``."""
    k = np.asarray(ranks, dtype=np.int64) - 1
    return (k * a + b) % n


def fit_exponent(ranks: np.ndarray, n: int, lo: float = 0.05, hi: float = 5.0, tol: float = 1e-7) -> float:
    """Maximum-likelihood exponent of a bounded Zipf over ``[1, n]`` from observed ranks.

    The log-likelihood per draw is ``-s * mean(ln k) - ln H(n, s)``; its
    derivative vanishes where the model's mean of ``ln k``,
    ``sum_k k**-s ln k / H(n, s)``, equals the sample mean. That mean falls
    monotonically in ``s``, so bisection finds the unique root (the MLE of a
    one-parameter exponential family; cf. Clauset, Shalizi & Newman, SIAM
    Review 51(4), 2009, for the unbounded discrete case).

    Parameters
    ----------
    ranks : array of int
        Observed ranks in ``[1, n]`` (not row ids: undo the scrambling first).
    n : int
        Number of ranks of the distribution (``n <= 10**7`` keeps this fast).
    """
    k = np.asarray(ranks)
    if k.size == 0 or k.min() < 1 or k.max() > n:
        raise ConfigError("fit_exponent: ranks must be non-empty and within [1, n]")
    target = float(np.mean(np.log(k.astype(np.float64))))
    log_k = np.log(np.arange(1, n + 1, dtype=np.float64))

    def model_mean(s: float) -> float:
        w = np.exp(-s * log_k)
        return float(np.dot(w, log_k) / w.sum())

    if not model_mean(hi) <= target <= model_mean(lo):
        raise ConfigError(f"fit_exponent: sample mean of ln k is outside the range of s in [{lo}, {hi}]")
    return bisect_decreasing(model_mean, target, lo, hi, tol=tol)


def top_share(n: int, s: float, fraction: float) -> float:
    """Share of draws that land on the top ``fraction`` of ``n`` ranks (exact sum; n <= 1e8)."""
    top = max(1, math.floor(n * fraction))
    w = np.arange(1, n + 1, dtype=np.float64) ** -s
    return float(w[:top].sum() / w.sum())
