"""Scalar root finding: where a decreasing function of one variable crosses a target, by bisection."""

from __future__ import annotations

from collections.abc import Callable


def bisect_decreasing(f: Callable[[float], float], target: float, lo: float, hi: float, *,
                      iterations: int | None = None, tol: float | None = None) -> float:
    """The ``x`` in ``[lo, hi]`` where a decreasing ``f`` crosses ``target``, by bisection.

    Each step halves the bracket, keeping ``f(lo) > target >= f(hi)``; the midpoint of the last bracket is
    returned.

    Parameters
    ----------
    f : callable
        Decreasing in ``x`` on ``[lo, hi]``.
    target : float
        The value sought.
    lo, hi : float
        The bracket (the caller has checked that it holds the crossing).
    iterations : int, optional
        Halve exactly this many times (the bracket shrinks by ``2**iterations``).
    tol : float, optional
        Halve until the bracket is at most this wide. Give one of the two.
    """
    if (iterations is None) == (tol is None):
        raise ValueError("bisect_decreasing: give iterations or tol")
    done = 0
    while (hi - lo > tol) if tol is not None else done < iterations:
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
        done += 1
    return 0.5 * (lo + hi)
