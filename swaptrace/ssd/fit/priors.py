"""What no measurement of a lab run identifies: the fit's priors and fallbacks, and the device's blocks.

The priors (:data:`PRIORS`) are a 970-class drive's, after NVMeVirt and MQSim: map unit 4 KiB, one plane
(a multi-plane program unit is indistinguishable from a bigger page), 128 pages per block (fewer when the
capacity simulated would leave a die under :data:`MIN_BLOCKS_PER_DIE` blocks: one block per die is the
spare's resolution), tERASE 2 ms, greedy GC with the smallest reserve and a 64 MiB write buffer. The user
capacity is the one fio used (``--size``); :func:`sized` and :func:`same_stripe_phase` give the device the
blocks that hold it at a given spare.
"""

from __future__ import annotations

import dataclasses

from swaptrace.errors import ConfigError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.fit.measurements import Identified
from swaptrace.ssd.labjobs import TWIN_MAX_BYTES, with_effective_spare

MAP_BYTES = 4096
#: parameters no measurement of a lab run identifies (a 970-class drive's, after NVMeVirt and MQSim)
PRIORS = {"map_bytes": MAP_BYTES, "planes": 1, "pages_per_block": 128, "erase_us": 2000.0, "gc_policy": "greedy",
          "gc_free_fraction": 0.0, "bg_gc_free_fraction": 0.0, "write_buffer_bytes": 64 << 20, "gc_copyback": True}
#: used when the run lacks the measurement that identifies them
FALLBACK = {"page_bytes": 16384, "channels": 8, "dies_per_channel": 2, "read_us": 50.0, "channel_mb_s": 800.0,
            "host_mb_s": 3500.0, "program_us_per_read_us": 5.0, "op": 0.07}
#: the pipeline's quick fit: read-search evaluations, spare search tolerance and halvings, one round
QUICK = {"read_evaluations": 24, "spare_tolerance": 0.03, "spare_iterations": 6}
#: fewest erase blocks per die the fitted device keeps where it is simulated: GC's spare then has a
#: resolution of 1/64 of a die (~1.6 %), not the 10-25 % of a die with 4-8 huge blocks
MIN_BLOCKS_PER_DIE = 64


def sized(cfg: SSDConfig, user_bytes: int, effective_spare: float, *, exact: bool = True, **changes) -> SSDConfig:
    """``cfg`` with ``changes``, blocks for ``user_bytes`` of user capacity at ``effective_spare``.

    Parameters
    ----------
    cfg : SSDConfig
        The device; not changed.
    user_bytes : int
        User capacity wanted, bytes.
    effective_spare : float
        Effective spare factor (what GC sees, :func:`swaptrace.ssd.labjobs.with_effective_spare`).
    exact : bool
        The user capacity is ``user_bytes`` to the map unit (the spare then moves by up to one row of
        blocks); otherwise the spare is kept exactly and the capacity is up to one row larger.
    **changes
        Fields replaced before the blocks are counted.
    """
    c = dataclasses.replace(cfg, spare_factor=0.5, blocks_per_plane=max(cfg.blocks_per_plane, 64), **changes)
    for _ in range(3):
        blocks = max(8, -(-int(user_bytes / (1.0 - c.spare_factor)) //
                          (c.dies * c.planes * c.pages_per_block * c.page_bytes)))
        c = with_effective_spare(c, effective_spare, blocks_per_plane=blocks)
    if not exact:
        return c
    want = user_bytes // c.map_bytes
    if want < c.physical_units:  # exactly the capacity fio used (reads then stripe as they did on the drive)
        try:
            with_cap = dataclasses.replace(c, spare_factor=1.0 - (want + 0.5) / c.physical_units)
        except ConfigError:
            return c
        if with_cap.user_units == want:
            return with_cap
    return c


def pages_per_block_for(cfg: SSDConfig, user_bytes: int) -> int:
    """The pages-per-block prior, halved until a die holds :data:`MIN_BLOCKS_PER_DIE` blocks where simulated.

    Lab jobs run on at most :data:`~swaptrace.ssd.labjobs.TWIN_MAX_BYTES` of user capacity (a twin of a
    larger device keeps its pages per block), so that capacity decides how many blocks a die has.
    """
    ppb = int(PRIORS["pages_per_block"])
    die_bytes = min(user_bytes, TWIN_MAX_BYTES) / cfg.dies  # a die: planes x blocks_per_plane blocks
    while ppb > 8 and die_bytes / (ppb * cfg.page_bytes) < MIN_BLOCKS_PER_DIE:
        ppb //= 2
    return ppb


def size_blocks(cfg: SSDConfig, user_bytes: int) -> Identified:
    """``cfg`` with the pages-per-block prior of :func:`pages_per_block_for` (tERASE scaled with the block).

    A smaller block erases in proportionally less time, so the erase cost per written unit stays the
    prior's (2 ms per 128 pages). ``cfg`` is returned as it is when its blocks already fit.
    """
    ppb = pages_per_block_for(cfg, user_bytes)
    if ppb == cfg.pages_per_block:
        return Identified(cfg)
    smaller = sized(cfg, user_bytes, cfg.effective_spare_factor, pages_per_block=ppb,
                    erase_us=PRIORS["erase_us"] * ppb / PRIORS["pages_per_block"])
    return Identified(smaller, {
        "pages_per_block": f"prior, reduced to keep {MIN_BLOCKS_PER_DIE} blocks per die where simulated",
        "erase_us": "prior (2 ms per 128 pages), scaled with the block"})


def same_stripe_phase(cfg: SSDConfig, user_bytes: int) -> SSDConfig:
    """``cfg`` with at most one stripe fewer user units, so many that they equal ``user_bytes``'s modulo a stripe.

    Where the fill's second pass starts on the stripe (``program unit x dies``) decides whether a small
    read meets one die or two, so reads need the capacity fio used modulo a stripe; the spare moves by
    less than a stripe (under 0.2 % of a device of 512 stripes or more), the blocks not at all.
    """
    stripe = cfg.program_units * cfg.dies
    want = (user_bytes // cfg.map_bytes) % stripe
    units = cfg.user_units - (cfg.user_units - want) % stripe
    if units <= 0 or units == cfg.user_units:
        return cfg
    try:
        c = dataclasses.replace(cfg, spare_factor=1.0 - (units + 0.5) / cfg.physical_units)
    except ConfigError:
        return cfg
    return c if c.user_units == units else cfg
