"""Analytic write amplification of a page-mapped FTL under uniform and hot/cold writes.

All formulas are from P. Desnoyers, "Analytic Modeling of SSD Write
Performance", SYSTOR 2012 (docs/ssd.md). Notation: ``T`` physical and
``U`` user pages, ``alpha = T / U``, spare factor ``S_f = (T - U) / T``
(so ``alpha = 1 / (1 - S_f)``), ``Np`` pages per erase block. In this
package a "page" of the model is the FTL's map unit (4 KiB), so ``Np`` is
:attr:`SSDConfig.units_per_block`.

The principal branch of the Lambert W function is implemented here (Halley
iteration) so that the package needs no scipy.
"""

from __future__ import annotations

import math

_INV_E = math.exp(-1.0)


def lambert_w0(x: float) -> float:
    """Principal branch ``W0(x)`` of the Lambert W function, ``x >= -1/e``.

    Solves ``w * exp(w) = x`` with ``w >= -1`` by Halley's iteration from a
    branch-point series (near ``-1/e``) or a logarithmic guess (large ``x``);
    accurate to a few ulps.

    Raises
    ------
    ValueError
        If ``x < -1/e`` (no real solution) or ``x`` is not finite.
    """
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"lambert_w0: x must be finite, got {x}")
    if x < -_INV_E:
        if x > -_INV_E - 1e-15:  # rounding of -alpha*exp(-alpha) at alpha = 1
            return -1.0
        raise ValueError(f"lambert_w0: x = {x} < -1/e has no real solution")
    if x == 0.0:
        return 0.0
    if x == -_INV_E:
        return -1.0
    # Initial guess.
    if x < -0.25:
        p = math.sqrt(max(2.0 * (math.e * x + 1.0), 0.0))
        w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p**3
    elif x < 3.0:
        w = math.log1p(x)
    else:
        lx = math.log(x)
        w = lx - math.log(lx)
    for _ in range(64):
        ew = math.exp(w)
        f = w * ew - x
        wp1 = w + 1.0
        if wp1 == 0.0:
            break
        denom = ew * wp1 - (w + 2.0) * f / (2.0 * wp1)
        if denom == 0.0:
            break
        step = f / denom
        w_new = w - step
        if w_new < -1.0:  # stay on the principal branch
            w_new = (w - 1.0) / 2.0 if w > -1.0 else -1.0
        if abs(w_new - w) <= 1e-15 * (1.0 + abs(w_new)):
            w = w_new
            break
        w = w_new
    return w


def alpha_from_spare(spare_factor: float) -> float:
    """``alpha = T/U = 1 / (1 - S_f)``."""
    if not 0.0 < spare_factor < 1.0:
        raise ValueError(f"spare factor must be in (0, 1), got {spare_factor}")
    return 1.0 / (1.0 - spare_factor)


def alpha_from_op(op: float) -> float:
    """``alpha = T/U = 1 + OP``."""
    if not op > 0:
        raise ValueError(f"over-provisioning must be > 0, got {op}")
    return 1.0 + op


def wa_fifo(alpha: float) -> float:
    """FIFO (least-recently-written) GC under uniform random writes.

    Desnoyers 2012, Eq. 4: ``WA = alpha / (alpha + W0(-alpha * exp(-alpha)))``.

    Parameters
    ----------
    alpha : float
        ``T/U > 1``.
    """
    if not alpha > 1.0:
        raise ValueError(f"alpha = T/U must be > 1, got {alpha}")
    return alpha / (alpha + lambert_w0(-alpha * math.exp(-alpha)))


def wa_greedy(alpha: float, pages_per_block: int) -> float:
    """Greedy GC under uniform random writes, Desnoyers 2012, Eq. 12.

    ``k = 1 + 1 / (2 Np)`` and ``WA = WA_FIFO(k * alpha) / k``: greedy with
    blocks of ``Np`` pages behaves like FIFO with slightly more spare space,
    and converges to FIFO as ``Np`` grows.
    """
    if pages_per_block < 1:
        raise ValueError(f"pages per block must be >= 1, got {pages_per_block}")
    k = 1.0 + 1.0 / (2.0 * pages_per_block)
    return wa_fifo(k * alpha) / k


def wa_random(spare_factor: float) -> float:
    """Random victim selection under uniform random writes: ``WA = 1 / S_f``.

    A random closed block holds, on average, the device-wide fraction
    ``U / T = 1 - S_f`` of valid pages, so each erase frees ``S_f * Np`` pages
    and ``WA = Np / (S_f * Np)``.
    """
    if not 0.0 < spare_factor < 1.0:
        raise ValueError(f"spare factor must be in (0, 1), got {spare_factor}")
    return 1.0 / spare_factor


def wa_hot_cold(alpha: float, write_fraction: float, page_fraction: float) -> float:
    """FIFO GC with hot/cold data mixed in one write stream, Desnoyers 2012, Eq. 14.

    A fraction ``r = write_fraction`` of the writes goes uniformly to a
    fraction ``f = page_fraction`` of the user pages (e.g. 0.8 / 0.2). Solves
    ``A = 1 + r / (exp((r/f) alpha/A) - 1) + (1-r) / (exp(((1-r)/(1-f)) alpha/A) - 1)``
    for ``A`` by bisection.
    """
    r, f = float(write_fraction), float(page_fraction)
    if not (0.0 < r < 1.0 and 0.0 < f < 1.0):
        raise ValueError("hot/cold fractions must be in (0, 1)")
    if not alpha > 1.0:
        raise ValueError(f"alpha = T/U must be > 1, got {alpha}")

    def excess(a: float) -> float:
        x = alpha / a
        return 1.0 + r / math.expm1((r / f) * x) + (1.0 - r) / math.expm1(((1.0 - r) / (1.0 - f)) * x) - a

    lo, hi = 1.0, 2.0
    while excess(hi) > 0.0:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("wa_hot_cold: no solution")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


def predict_waf(policy: str, spare_factor: float, pages_per_block: int) -> float:
    """Analytic write amplification of ``policy`` under uniform random writes (Desnoyers 2012).

    Parameters
    ----------
    policy : str
        ``fifo`` (Eq. 4), ``greedy`` (Eq. 12) or ``random`` (``1 / S_f``); any other has no model here.
    spare_factor : float
        ``S_f = (T - U) / T``.
    pages_per_block : int
        ``Np``: the FTL's map units per erase block.

    Returns
    -------
    float
        Flash writes per host write (>= 1), ``nan`` for a policy with no model.
    """
    alpha = alpha_from_spare(spare_factor)
    if policy == "fifo":
        return wa_fifo(alpha)
    if policy == "greedy":
        return wa_greedy(alpha, pages_per_block)
    if policy == "random":
        return wa_random(spare_factor)
    return float("nan")


def predict_config(config) -> float:
    """Analytic WA of uniform random map-unit writes on ``config`` at its **effective** spare.

    The GC reserve holds no data, so the model's ``T`` is
    :attr:`~swaptrace.ssd.config.SSDConfig.effective_physical_units`, not the raw flash.
    """
    return predict_waf(config.gc_policy, config.effective_spare_factor, config.units_per_block)
