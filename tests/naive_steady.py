"""Slow reference for the sampled steady state (``swaptrace.ssd.steady``), written from its docstrings.

Nothing here calls the product: the layout (which logical units are static, pool
or swap), the block plan (erased blocks, static blocks, the spacing ``D`` of
Desnoyers' FIFO fixed point solved by Newton's method instead of the product's
bisection, the probabilities ``exp(-k D / R_d)``, the close order and close times)
and the random conventions (splitmix64 from the documented seed state, numpy's
``default_rng(seed)`` for the FIFO ring's phase, Floyd's sampling for the swap units' places) follow the
docstrings of :func:`swaptrace.ssd.steady.layout`, :func:`~swaptrace.ssd.steady.plan`
and :func:`~swaptrace.ssd.steady.install`. The unit-by-unit install is
``naive_ssd.naive_steady_install``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_MASK = (1 << 64) - 1


def naive_layout(user_units: int, swap_offset: int, swap_units: int, fill: float, overwritten: float,
                 swap_prior: str) -> tuple[list[int], list[int]]:
    """(static, pool) logical units, the pool before shuffling."""
    outside = [u for u in range(user_units) if not swap_offset <= u < swap_offset + swap_units]
    live = round(fill * len(outside))
    n_static = round((1.0 - overwritten) * live)
    static = outside[:n_static]
    pool = outside[n_static:live]
    if swap_prior == "pool":
        pool += list(range(swap_offset, swap_offset + swap_units))
    return static, pool


def spacing_newton(m: list[float], r: float) -> float:
    """``D >= 0`` with ``sum_k m_k exp(-k D / r) = r`` (``m`` youngest first, k from 1), by Newton's method.

    ``f(D) = sum m_k exp(-k D / r) - r`` is convex and decreasing, ``f(0) >= 0``: Newton's
    iterates from 0 rise monotonically to the root.
    """
    d = 0.0
    for _ in range(500):
        f = sum(mk * math.exp(-k * d / r) for k, mk in enumerate(m, start=1)) - r
        fp = -sum(mk * k / r * math.exp(-k * d / r) for k, mk in enumerate(m, start=1))
        if f <= 0.0 or fp == 0.0:
            return d
        step = f / -fp
        d += step
        if step <= 1e-17 * d:
            return d
    raise RuntimeError("Newton did not converge")


@dataclass
class NaivePlan:
    n_static: list[int]  # per block
    p_dyn: list[float]  # per block
    closed_order: list[int]  # oldest first
    close_time: dict[int, int]  # block -> close time on the host-write clock
    free: list[int]


def naive_plan(dies: int, blocks_per_die: int, units_per_block: int, n_free: int, fifo: bool, static_units: int,
               pool_units: int, seed: int) -> NaivePlan:
    nb = dies * blocks_per_die
    n_static, p_dyn = [0] * nb, [0.0] * nb
    order: list[int] = []
    ages: dict[int, float] = {}
    free: list[int] = []
    phase = np.random.default_rng(seed)
    for d in range(dies):
        s_d = static_units // dies + (d < static_units % dies)
        r_d = pool_units // dies + (d < pool_units % dies)
        first = d * blocks_per_die
        free += range(first, first + n_free)
        data = list(range(first + n_free, first + blocks_per_die))  # youngest first
        n_full = min(s_d // units_per_block, len(data))
        pool_blocks, static_blocks = data[:len(data) - n_full], data[len(data) - n_full:]
        for b in static_blocks:
            n_static[b] = units_per_block
        rest = s_d - n_full * units_per_block
        for i, b in enumerate(pool_blocks):  # the youngest take one more
            n_static[b] = rest // len(pool_blocks) + (i < rest % len(pool_blocks))
        m = [units_per_block - n_static[b] for b in pool_blocks]
        spacing = spacing_newton([float(x) for x in m], float(r_d)) if r_d else 0.0
        for k, b in enumerate(pool_blocks, start=1):
            if r_d:
                p_dyn[b] = math.exp(-k * spacing / r_d)
            ages[b] = k * spacing * dies
        a = int(phase.integers(0, len(pool_blocks) + 1)) if fifo else 0
        oldest_first = pool_blocks[::-1]
        static_age = ages[oldest_first[a - 1]] if a > 0 else (len(pool_blocks) + 1) * spacing * dies
        for b in static_blocks:
            ages[b] = static_age
        order += oldest_first[:a] + static_blocks[::-1] + oldest_first[a:]
    now = math.ceil(max((ages[b] for b in order), default=0.0)) + 1 if order else 0
    return NaivePlan(n_static, p_dyn, order, {b: now - round(ages[b]) for b in order}, free)


def seed_state(seed: int) -> int:
    """The splitmix64 state the install's unit draws start from (install's docstring)."""
    return (seed * 0x2545F4914F6CDD1D + 0x632BE59BD9B4E019) & _MASK


def _splitmix(state: int):
    """splitmix64 outputs from ``state`` (Steele, Lea and Flood, OOPSLA 2014)."""
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield z ^ (z >> 31)


def placed(pool: list[int], swap_units: int, seed: int) -> list[int]:
    """The pool in the order its units take the drawn slots: the last ``swap_units`` (the swap partition's)
    at places drawn by Floyd's sampling then shuffled (Fisher-Yates), the others in order in the rest.

    From ``placed_pool``'s docstring: splitmix64 from ``seed * 0x2545F4914F6CDD1D + 0x9E3779B97F4A7C15``.
    """
    if not swap_units:
        return list(pool)
    draws = _splitmix((seed * 0x2545F4914F6CDD1D + 0x9E3779B97F4A7C15) & _MASK)
    n = len(pool)
    chosen: list[int] = []
    for j in range(n - swap_units, n):
        t = next(draws) % (j + 1)
        chosen.append(j if t in chosen else t)
    for i in range(swap_units - 1, 0, -1):
        k = next(draws) % (i + 1)
        chosen[i], chosen[k] = chosen[k], chosen[i]
    out: list[int | None] = [None] * n
    for k, place in enumerate(chosen):
        out[place] = pool[n - swap_units + k]
    background = iter(pool[:n - swap_units])
    return [next(background) if u is None else u for u in out]
