"""A real drive in the steady state of its background data, sampled directly (no hours of preconditioning).

The drive keeps its real size and geometry. Its logical space holds:

* the **swap partition**: ``swap_units`` map units from ``swap_offset_units``;
* the **background**: a fraction ``fill`` of the other logical units holds
  data (the first ones, as a file system fills from the start); a fraction
  ``overwritten`` of that data has been overwritten uniformly at random for
  long enough to be in steady state (the **pool**), the rest was written once,
  sequentially, and never since (**static** data);
* the swap area's prior content (``swap_prior``): ``"pool"`` (a swap area in
  use before, overwritten at random like the pool) or ``"trimmed"`` (discarded,
  holds nothing).

Steady state of uniform random overwrites (Desnoyers, SYSTOR 2012, section 4)
-----------------------------------------------------------------------------
A pool unit is overwritten by each pool write with probability ``1/R`` (``R``
pool units), so a unit last written ``a`` pool writes ago is still valid with
probability ``exp(-a/R)``; units of one block are (nearly) independent. With
FIFO (and, for blocks of many units, greedy, whose victim is then almost
always the oldest block) the data blocks of a die are written at even
intervals ``D`` of pool writes, so the ``k``-th youngest closed block holds
``Binomial(m_k, exp(-k D / R))`` pool units, ``m_k`` being its units not
taken by static data. ``D`` follows from conservation: the expected pool
units of the die's closed blocks equal its share of the pool,
``sum_k m_k exp(-k D / R_d) = R_d`` -- the discrete form of Desnoyers'
FIFO fixed point ``1/WA = 1 - exp(-alpha/WA)`` (Eq. 4).

Static data: greedy never collects a block full of valid units, so static
data stays in blocks of its own (full, oldest). FIFO collects every block in
turn, but copies a run of static blocks as one burst into new full blocks, so
static data stays in a run of full blocks that travels around the FIFO ring
(a periodic orbit: one burst of ``S`` copied units per cycle); the run is put
at a random place in the ring (its phase depends on the drive's history).
Copying static data costs no host writes, so the pool's blocks keep the age
structure above in both cases. Other victim policies get the greedy layout
(an approximation; they relax to their own steady state as the run goes on).

Each die keeps ``gc_min_free_blocks + 1`` erased blocks (or the background GC
reserve, if larger: a drive that has been idle) and no open block: the
moment after GC refilled the reserve. The binomial draws are
corrected to exactly ``R`` pool units by adding or removing units at random
(``O(sqrt R)`` changes).

:func:`explicit_precondition` writes the same background for real (static
and pool sequentially, then ``pool_writes`` pool capacities of random
overwrites); the tests check the sampled state against it on small drives.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from swaptrace.core.solve import bisect_decreasing
from swaptrace.errors import ConfigError
from swaptrace.kernels.ssd import ftl as K
from swaptrace.kernels.ssd import ftl_steady as KS
from swaptrace.ssd.choices import BACKGROUND, SWAP_PRIORS  # noqa: F401  (re-exported)
from swaptrace.ssd.config import SSDConfig


@dataclass(frozen=True)
class Background:
    """What the drive holds outside (and before) the swap partition.

    Attributes
    ----------
    fill : float
        Fraction of the logical units outside the swap partition that hold data, in [0, 1].
    overwritten : float
        Fraction of that data in the random-overwrite steady state (the rest is static), in [0, 1].
    swap_prior : str
        The swap partition's prior content: ``pool`` (overwritten at random, like the pool) or ``trimmed``.
    """

    fill: float = BACKGROUND["fill"]
    overwritten: float = BACKGROUND["overwritten"]
    swap_prior: str = BACKGROUND["swap_prior"]

    def __post_init__(self) -> None:
        if not 0.0 <= self.fill <= 1.0:
            raise ConfigError(f"background fill must be in [0, 1], got {self.fill!r}")
        if not 0.0 <= self.overwritten <= 1.0:
            raise ConfigError(f"background overwritten fraction must be in [0, 1], got {self.overwritten!r}")
        if self.swap_prior not in SWAP_PRIORS:
            raise ConfigError(f"swap prior content must be one of {', '.join(SWAP_PRIORS)}, got {self.swap_prior!r}")

    def describe(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Layout:
    """Logical units of the drive by role (sorted int32 arrays, except ``pool`` which is unordered)."""

    static: np.ndarray
    pool: np.ndarray
    swap_offset_units: int
    swap_units: int
    #: how many of the pool's units, at its end, are the swap partition's (``swap_prior`` ``pool``)
    pool_swap_units: int = 0

    def describe(self, map_bytes: int) -> dict[str, Any]:
        return {"swap_offset_bytes": self.swap_offset_units * map_bytes, "swap_bytes": self.swap_units * map_bytes,
                "static_bytes": int(len(self.static)) * map_bytes, "pool_bytes": int(len(self.pool)) * map_bytes}


def layout(config: SSDConfig, swap_offset_units: int, swap_units: int, background: Background) -> Layout:
    """Static and pool logical units of ``config`` with the swap partition and ``background``.

    Of the ``others`` logical units outside the swap partition, ``live = round(fill * others)``
    hold data: the first ``round((1 - overwritten) * live)`` of them (in logical order) are
    static, the next ones the pool, followed by the swap partition's units when ``swap_prior``
    is ``pool``.

    Raises
    ------
    ConfigError
        The swap partition does not fit on the drive.
    """
    u = config.user_units
    if swap_offset_units < 0 or swap_units < 0 or swap_offset_units + swap_units > u:
        raise ConfigError(f"--swap-offset + --swap-size: the swap partition ({swap_offset_units * config.map_bytes} + {swap_units * config.map_bytes}"
                          f" bytes) does not fit the drive's {config.user_bytes} user bytes")
    end = swap_offset_units + swap_units
    others = u - swap_units
    live = int(round(background.fill * others))
    n_static = int(round((1.0 - background.overwritten) * live))

    def first_outside(count: int, skip: int) -> np.ndarray:
        # the logical units number skip .. skip+count-1 outside the swap partition, in order (in place: on a
        # 512 GiB drive these are 10^8 units, and a concatenation of two ranges would copy them again)
        units = np.arange(skip, skip + count, dtype=np.int32)
        units[max(0, min(count, swap_offset_units - skip)):] += swap_units  # those at or past the partition
        return units

    static = first_outside(n_static, 0)
    pool_bg = first_outside(live - n_static, n_static)
    in_pool = swap_units if background.swap_prior == "pool" else 0
    if in_pool:
        pool = np.concatenate([pool_bg, np.arange(swap_offset_units, end, dtype=np.int32)])
    else:
        pool = pool_bg
    return Layout(static=static, pool=pool, swap_offset_units=swap_offset_units, swap_units=swap_units,
                  pool_swap_units=in_pool)


def _spacing(m: np.ndarray, pool_d: float) -> float:
    """``D`` with ``sum_k m_k exp(-k D / R_d) = R_d`` (bisection; ``m`` youngest first)."""
    k = np.arange(1, len(m) + 1, dtype=float)

    def held(d: float) -> float:
        return float(np.sum(m * np.exp(-k * d / pool_d)))

    lo, hi = 0.0, 1.0
    while held(hi) > pool_d:
        hi *= 2.0
    return bisect_decreasing(held, pool_d, lo, hi, iterations=100)


@dataclass(frozen=True)
class BlockPlan:
    """Per-block sampling plan of one device (die-major block numbers)."""

    n_static: np.ndarray  # int32, static units at the start of the block
    p_dyn: np.ndarray  # float64, probability that each other unit holds pool data
    closed_order: np.ndarray  # int32, data blocks oldest first
    close_seq: np.ndarray  # int64, their close times (host-write clock)
    free: np.ndarray  # int32, erased blocks (die order)
    clock: int  # the host-write clock "now"
    spacing: float  # D, pool writes per die between two closed blocks (nan without pool)


def plan(config: SSDConfig, static_units: int, pool_units: int, seed: int = 0) -> BlockPlan:
    """The steady-state block plan for ``static_units`` static and ``pool_units`` pool units (module docstring).

    The plan, die by die (``tests/naive_steady.py`` is written from this):

    * static and pool units are spread evenly over the dies, the first dies taking one more;
    * a die's lowest-numbered ``max(gc_min_free_blocks + 1, bg_gc_min_free_blocks)`` blocks are
      erased; the others hold data, numbered youngest first;
    * static data fills whole blocks at the oldest end (``s_d // units_per_block`` of them); its
      remainder is spread evenly over the other (pool) blocks, the youngest taking one more, at the
      start of each block;
    * the ``k``-th youngest pool block's other units hold pool data with probability
      ``exp(-k D / R_d)``, ``D`` solving the conservation equation of the module docstring;
    * close order, oldest first: the pool blocks oldest first, with the static run inserted after
      the ``a`` oldest of them -- ``a = 0`` (greedy: static data is the oldest) or, under FIFO,
      ``a`` drawn by ``numpy.random.default_rng(seed).integers(0, n_pool_blocks + 1)`` die by die
      (the ring's phase is unknown);
    * close times on the host-write clock (``dies`` host writes per pool write of a die): a block
      closed ``age = k D dies`` host writes before "now", the static run at the age of the pool
      block just before it in the close order (``(n_pool_blocks + 1) D dies`` when first);
      ``now = ceil(oldest age) + 1`` and a block's close time ``now - round(age)``.
    """
    nd, bpd, np_ = config.dies, config.blocks_per_die, config.units_per_block
    # after idle time background GC has refilled its (larger) reserve; without it, foreground GC's
    n_free = max(config.gc_min_free_blocks + 1, config.bg_gc_min_free_blocks)
    n_closed = bpd - n_free
    n_static = np.zeros(config.blocks, dtype=np.int32)
    p_dyn = np.zeros(config.blocks, dtype=np.float64)
    closed_order: list[np.ndarray] = []
    close_age: list[np.ndarray] = []
    free: list[np.ndarray] = []
    rng = np.random.default_rng(seed)
    spacing = float("nan")
    for d in range(nd):
        s_d = static_units // nd + (1 if d < static_units % nd else 0)
        r_d = pool_units // nd + (1 if d < pool_units % nd else 0)
        first = d * bpd
        free.append(np.arange(first, first + n_free, dtype=np.int32))
        blocks = np.arange(first + n_free, first + bpd, dtype=np.int32)  # youngest first
        full = min(s_d // np_, n_closed)
        rest = s_d - full * np_
        dyn = blocks[: n_closed - full]
        static_blocks = blocks[n_closed - full:]
        n_static[static_blocks] = np_
        if len(dyn):
            n_static[dyn] = rest // len(dyn) + (np.arange(len(dyn)) < rest % len(dyn))
        elif rest:
            raise ConfigError("the background does not fit the drive")
        m = (np_ - n_static[dyn]).astype(float)
        if r_d > m.sum():
            raise ConfigError(f"ssd {config.name}: the background ({static_units + pool_units} units) does not fit "
                              f"the {config.blocks - nd * n_free} data blocks")
        ages = np.zeros(len(dyn))
        if r_d > 0:
            spacing = _spacing(m, float(r_d))
            ages = np.arange(1, len(dyn) + 1) * spacing
            p_dyn[dyn] = np.exp(-ages / r_d)
        top = (ages[-1] if len(ages) else 0.0) + (spacing if r_d > 0 else 0.0)
        # close order: the pool's blocks oldest first; the static run oldest (greedy never collects it)
        # or, under FIFO, which copies it as one run each cycle, at a random place in the ring
        at = int(rng.integers(0, len(dyn) + 1)) if config.gc_policy == "fifo" else 0
        order = dyn[::-1]
        age_d = ages[::-1]
        closed_order.append(np.concatenate([order[:at], static_blocks[::-1], order[at:]]))
        s_age = age_d[at - 1] if at > 0 else top
        close_age.append(np.concatenate([age_d[:at], np.full(len(static_blocks), s_age), age_d[at:]]) * nd)
    age = np.concatenate(close_age)
    clock = int(math.ceil(age.max())) + 1 if len(age) else 0
    return BlockPlan(n_static=n_static, p_dyn=p_dyn, closed_order=np.concatenate(closed_order).astype(np.int32),
                     close_seq=(clock - np.round(age)).astype(np.int64), free=np.concatenate(free).astype(np.int32),
                     clock=clock, spacing=spacing)


def _rng_state(seed: int, offset: int = 0x632BE59BD9B4E019) -> np.ndarray:
    return np.array([(seed * 0x2545F4914F6CDD1D + offset) & ((1 << 64) - 1)], dtype=np.uint64)


#: the splitmix64 state offset of the pool's order (:func:`placed_pool`), apart from the units' draws
ORDER_OFFSET = 0x9E3779B97F4A7C15


def placed_pool(lay: Layout, seed: int) -> np.ndarray:
    """The pool's units in the order they take the drawn pool slots (slot order: die-major, block, unit).

    Only the swap partition's units need random places: the stream writes, trims and reads them and nothing
    else, so the background's pool units are exchangeable (GC moves units by slot, whatever their logical
    number) and take their slots in logical order, as static data does. The swap units (the pool's last
    ``lay.pool_swap_units``) take uniformly random slots in random order
    (:func:`swaptrace.kernels.ssd.ftl_steady.pool_order`, splitmix64 from state
    ``seed * 0x2545F4914F6CDD1D + ORDER_OFFSET`` mod 2^64). A full shuffle of the pool cost 2.7 s on a
    512 GiB drive; this costs one pass.
    """
    if not lay.pool_swap_units:
        return lay.pool
    return KS.pool_order(lay.pool, np.int64(lay.pool_swap_units), _rng_state(seed, ORDER_OFFSET))


def install(state: K.FTLState, config: SSDConfig, lay: Layout, seed: int = 0) -> dict[str, Any]:
    """Put a freshly made FTL state in the sampled steady state of ``lay``; returns what was done.

    ``state`` must be new (nothing written). Units outside the layout stay unmapped (trimmed).
    Random draws (``tests/naive_steady.py`` follows them): the units' draws and the
    correction to exactly ``R`` pool units use splitmix64 started at
    ``seed * 0x2545F4914F6CDD1D + 0x632BE59BD9B4E019`` (mod 2^64), in the order of
    :mod:`swaptrace.kernels.ssd.ftl_steady`; which pool unit sits in which drawn slot (block order)
    is :func:`placed_pool`'s order; static units go in order.
    """
    t0 = time.perf_counter()
    if int(state.sc[K.C_HOST_W]) or int((state.l2p >= 0).any()):
        raise ConfigError("steady-state sampling needs a new drive")
    pl = plan(config, len(lay.static), len(lay.pool), seed=seed)
    rng = _rng_state(seed)
    np_ = config.units_per_block
    drawn = KS.fill_slots(state.p2l, state.valid, np_, pl.n_static, pl.p_dyn, rng)
    dyn_blocks = np.flatnonzero((pl.n_static < np_) & (pl.p_dyn > 0)).astype(np.int32)
    if len(lay.pool) and not len(dyn_blocks):
        raise ConfigError("no block can hold the pool")
    KS.adjust_pool(state.p2l, state.valid, np_, dyn_blocks, np.int64(len(lay.pool) - drawn), rng)
    pool = placed_pool(lay, seed)
    n_s, n_p = KS.assign_lbas(state.p2l, state.l2p, lay.static, pool)
    if n_s != len(lay.static) or n_p != len(lay.pool):
        raise RuntimeError("steady-state install: unit counts do not match the plan")
    if KS.install_blocks(state, pl.closed_order, pl.close_seq, pl.free, np.int64(pl.clock)) != 0:
        raise RuntimeError("steady-state install: blocks not closed")
    return {"method": "sampled", "pool_units_drawn": int(drawn), "spacing_pool_writes_per_block": pl.spacing,
            "seconds": time.perf_counter() - t0}


def explicit_precondition(sim, lay: Layout, *, pool_writes: float = 8.0, seed: int = 0,
                          chunk_units: int = 1 << 22, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Write the background for real: static then pool units sequentially, then random pool overwrites.

    ``pool_writes`` pool capacities of uniform random single-unit overwrites
    (untimed). The reference the sampled state is checked against; slow on
    large drives (about ``(2 + pool_writes * WAF)`` device writes).
    """
    t0 = time.perf_counter()
    timing = sim.state.ip[K.P_TIMING]
    sim.state.ip[K.P_TIMING] = 0
    try:
        for part in (lay.static, np.sort(lay.pool)):
            for start in range(0, len(part), chunk_units):
                sim.write_units(part[start:start + chunk_units])
        left = int(pool_writes * len(lay.pool))
        rng = np.random.default_rng(seed)
        while left > 0 and len(lay.pool):
            n = min(left, chunk_units)
            sim.write_units(lay.pool[rng.integers(0, len(lay.pool), n)])
            left -= n
            if progress is not None:
                progress(n)
    finally:
        sim.state.ip[K.P_TIMING] = timing
    sim.reset_clocks()
    return {"method": "explicit", "pool_writes": pool_writes, "seconds": time.perf_counter() - t0}
