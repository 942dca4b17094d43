"""What the writes identify: steps 3 and 4 of the device fit (:mod:`swaptrace.ssd.fit.device`), and the
room GC needs on a device of few blocks per die.

3. **Sequential 128 KiB writes** (``write_seq_128k``): die time per written unit
   ``tPROG / program unit + tERASE / units per block`` = dies x 4 KiB / bandwidth gives **tPROG**
   (``tERASE`` is a prior: the two are not separable from bandwidth alone); corrected with the model
   (:func:`identify_program`).
4. **Steady random 4 KiB writes** (``steady_randwrite``, the SNIA-style rounds of ``fio run
   --steady``; ``sweep_write_4k`` when there are none, flagged *not steady*): the **effective
   spare**, by bisection with the model itself (:func:`search_spare`, :func:`identify_spare`): the
   simulated bandwidth falls monotonically as the spare shrinks, so no closed form of where the dies'
   time goes is needed (an earlier closed form -- die time per host unit, inverted through Desnoyers'
   greedy WAF -- missed by up to 4x when part of that time was not the dies'). The spare is found
   *given* the pages-per-block prior (the two are not separable from one bandwidth; the pair
   reproduces the write amplification).

:func:`with_gc_room` then adds blocks to every die until the lab's writes (or a stream's replay) run
without a GC stall on a device of few blocks per die.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from swaptrace.errors import ConfigError, GCStallError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.fit.measurements import Identified, Measurements
from swaptrace.ssd.fit.priors import FALLBACK, QUICK, sized
from swaptrace.ssd.labjobs import LabJob, run_job, with_effective_spare

#: effective spare factors the random-write search brackets (OP 1 % to 100 %)
SPARE_RANGE = (0.01, 0.5)
#: the search stops when the model is this close to the measured bandwidth (relative) ...
SPARE_TOLERANCE = 0.01
#: ... or after this many halvings of log(spare) (50x range / 2^12: 0.1 % in spare)
SPARE_ITERATIONS = 12
#: a bisection that ends further than this factor from the measured bandwidth did not match it
MATCHED = 1.25
#: most blocks per plane :func:`with_gc_room` adds to a die before it gives up
MAX_ROOM_BLOCKS = 64


def slowest_program(cfg: SSDConfig, job: LabJob, measured: float, lo: float, hi: float, *,
                    rel: float = 0.005, iterations: int = 24) -> SSDConfig:
    """The largest tPROG in ``[lo, hi]`` at which the simulated ``job`` still gives ``measured`` MB/s.

    Bandwidth never grows with tPROG. Where the dies bound the writes it falls with it and the
    bisection finds the crossing; where the channels or link bound them it is flat below some tPROG,
    which is then only an upper bound, and the largest value consistent with the measurement is the
    one that carries over to writes the dies do bound (GC).
    """
    a, b = lo, hi
    for _ in range(iterations):
        mid = math.sqrt(a * b)
        bw = run_job(dataclasses.replace(cfg, program_us=mid), job)["bw_mb_s"]
        a, b = (mid, b) if bw >= measured * (1.0 - rel) else (a, mid)
        if b / a < 1.002:
            break
    return dataclasses.replace(cfg, program_us=math.sqrt(a * b))


def identify_program(cfg: SSDConfig, meas: Measurements, *,
                     say: Callable[[str], None] | None = None) -> Identified:
    """Step 3: tPROG from the sequential writes -- closed form, then bisection with the model.

    Parameters
    ----------
    cfg : SSDConfig
        The device so far; not changed.
    meas : Measurements
        The lab run; its ``write_seq_128k`` bandwidth (MB/s) gives tPROG. Without it, tPROG is the
        fallback's :data:`~swaptrace.ssd.fit.priors.FALLBACK` multiple of tR.
    say : callable, optional
        Where a progress line goes.

    Returns
    -------
    Identified
        The device with its tPROG (us) and that tPROG's source; when halving tPROG would not make the
        model's sequential writes 2 % faster (the link or channels bound them), the source and a note say
        it is an upper bound.
    """
    say = say or (lambda _m: None)
    seq = meas.of("seq_write")
    if seq is None:
        return Identified(dataclasses.replace(cfg, program_us=FALLBACK["program_us_per_read_us"] * cfg.read_us))
    job, bw = seq
    tau = cfg.dies * cfg.map_bytes / bw
    guess = max(cfg.program_units * (tau - cfg.erase_us / cfg.units_per_block), 1.0)
    fitted = slowest_program(dataclasses.replace(cfg, program_us=guess), job, bw, guess / 4, guess * 4)
    source = "sequential 128 KiB writes (with tERASE a prior)"
    say(f"tPROG {fitted.program_us:.0f} us")
    bounded = run_job(dataclasses.replace(fitted, program_us=fitted.program_us / 2), job)["bw_mb_s"] < 1.02 * bw
    if not bounded:
        return Identified(fitted, {"program_us": source})
    source += "; an UPPER BOUND: the link or channels bound the sequential writes"
    return Identified(fitted, {"program_us": source},
                      ("sequential writes are bounded by the link or channels, not the dies: tPROG is an upper bound",))


def search_spare(cfg: SSDConfig, job: LabJob, measured: float, user_bytes: int, *, lo: float = SPARE_RANGE[0],
                 hi: float = SPARE_RANGE[1], rel: float = SPARE_TOLERANCE,
                 iterations: int = SPARE_ITERATIONS) -> tuple[SSDConfig, str]:
    """The effective spare at which the model's ``job`` (random writes) gives ``measured`` MB/s (step 4).

    Less spare means more valid data in each greedy victim, more relocation per host write and less
    bandwidth: the simulated bandwidth falls monotonically as the spare shrinks (Desnoyers 2012), so a
    bisection on ``log(spare)`` between ``lo`` and ``hi`` finds it, with no closed form for where the
    dies' time goes. A spare too small for GC to reclaim a block counts as zero bandwidth. Returns the
    device and how the search ended: ``"matched"``, ``"above"`` (the model at ``hi`` is still slower:
    the writes are bound by programs, channels or link, so the spare is only a lower bound) or
    ``"below"`` (the model at ``lo``, or at the least spare its GC runs with, is still faster).
    """
    def at(eff: float) -> tuple[SSDConfig | None, float]:
        try:  # the capacity fio used, whatever the spare: blocks are added, not user space taken away
            c = sized(cfg, user_bytes, eff, exact=False)
            return c, run_job(c, job)["bw_mb_s"]
        except ConfigError:  # GC cannot reclaim a block: no bandwidth at this spare
            return None, 0.0

    c_hi, bw_hi = at(hi)
    if c_hi is None or bw_hi <= measured * (1.0 + rel):
        return c_hi or sized(cfg, user_bytes, hi, exact=False), "above" if bw_hi < measured * (1.0 - rel) else "matched"
    c_lo, bw_lo = at(lo)
    if c_lo is not None and bw_lo >= measured * (1.0 - rel):
        return c_lo, "below" if bw_lo > measured * (1.0 + rel) else "matched"
    best = (abs(math.log(bw_hi / measured)), c_hi, bw_hi)
    a, b = lo, hi
    for _ in range(iterations):
        mid = math.sqrt(a * b)
        c, bw = at(mid)
        if c is not None and abs(math.log(bw / measured)) < best[0]:
            best = (abs(math.log(bw / measured)), c, bw)
        if best[0] < math.log1p(rel):
            break
        a, b = (mid, b) if bw < measured else (a, mid)
    if best[0] > math.log(MATCHED):  # the model's GC stalls below the spare where it is still faster
        return best[1], "below"
    return best[1], "matched"


def identify_spare(cfg: SSDConfig, meas: Measurements, *, program_source: str = "", quick: bool = False,
                   say: Callable[[str], None] | None = None) -> Identified:
    """Step 4: the effective spare from the steady random 4 KiB writes, by bisection with the model.

    Parameters
    ----------
    cfg : SSDConfig
        The device so far, tPROG included; not changed.
    meas : Measurements
        The lab run; its random-write bandwidth (MB/s) gives the spare (:func:`search_spare`). Without
        it, the spare is the fallback's (:data:`~swaptrace.ssd.fit.priors.FALLBACK` OP).
    program_source : str
        Where tPROG came from: when it is an UPPER BOUND and even the most spare leaves the model's random
        writes slower than measured, tPROG is lowered until they reach theirs and the spare searched again.
    quick : bool
        The pipeline's time budget: a coarser search (:data:`~swaptrace.ssd.fit.priors.QUICK`).
    say : callable, optional
        Where a progress line goes.

    Returns
    -------
    Identified
        The device with its spare; the spare's source (and tPROG's, when lowered) and notes saying how
        the search ended (a lower or upper bound, a bandwidth not measured in steady state).
    """
    say = say or (lambda _m: None)
    rnd = meas.of("steady_write")
    if rnd is None:
        return Identified(with_effective_spare(cfg, FALLBACK["op"] / (1 + FALLBACK["op"])))
    job, bw = rnd
    opts = {"rel": QUICK["spare_tolerance"], "iterations": QUICK["spare_iterations"]} if quick else {}
    cfg, how = search_spare(cfg, job, bw, meas.size_bytes, **opts)
    sources = {}
    if how == "above" and "UPPER BOUND" in program_source:
        # sequential writes bound tPROG only from above and the random writes need faster programs: the
        # slowest tPROG at which the model's random writes reach theirs (with the most spare), then the spare
        cfg = slowest_program(cfg, job, bw, cfg.program_us / 16, cfg.program_us)
        sources["program_us"] = "steady random writes below the bound of the sequential ones (tERASE a prior)"
        cfg, how = search_spare(cfg, job, bw, meas.size_bytes, **opts)
    steady = "steady" if meas.steady else "NOT steady"
    spare_source = (f"random 4 KiB writes ({meas.steady_source}, {steady}); bisection on the model's "
                    f"bandwidth with {cfg.pages_per_block} pages per block (prior)")
    notes = [f"random writes: effective spare {cfg.effective_spare_factor:.4f} "
             f"(OP {cfg.effective_op:.2%}) by bisection with the model"]
    if how == "above":
        spare_source += "; a LOWER BOUND: the writes are not GC-bound"
        notes.append("random writes are bounded by programs, channels or the link, not GC: the spare is a lower bound")
    elif how == "below":
        notes.append("random writes are slower than the model with the least spare GC can use: the spare is an "
                     "upper bound")
    if not meas.steady:
        notes.append("the random-write bandwidth was not measured in steady state: the spare is an upper bound")
    say(f"spare: effective OP {cfg.effective_op:.1%} ({steady}, {how})")
    return Identified(cfg, {**sources, "spare_factor": spare_source}, tuple(notes))


def with_gc_room(cfg: SSDConfig, runs: Callable[[SSDConfig], Any],
                 what: str = "the workload") -> tuple[SSDConfig, Any, str | None]:
    """``cfg`` with the fewest extra blocks per die on which ``runs(cfg)`` completes, and what it returned.

    A device of few blocks per die (the model of a small fio file) can need more spare than the fit's
    random writes imply. Host writes are striped over the dies in turn while overwrites invalidate data
    wherever it lies, so the valid data each die holds drifts apart, by about the square root of the map
    units a die holds (a random walk): on a die of a few hundred units that is a block or more, and the
    fullest die's greedy GC finds only full blocks although the device as a whole has spare. On a real
    drive's millions of units per die the drift is a negligible fraction of the spare.

    One block per plane is added to every die at a time, the user capacity (and so its stripe phase)
    unchanged, until ``runs`` completes without a GC stall.

    Returns
    -------
    tuple
        The device (``cfg`` itself when it needed nothing), what ``runs`` returned on it, and a note
        for the device TOML saying how many blocks were added and for ``what`` (``None``: none were).

    Raises
    ------
    GCStallError
        :data:`MAX_ROOM_BLOCKS` added blocks per plane do not do.
    """
    start, added = cfg, 0
    while True:
        try:
            out = runs(cfg)
            break
        except GCStallError:
            if added == MAX_ROOM_BLOCKS:
                raise
            bpp = cfg.blocks_per_plane + 1
            physical = cfg.physical_units * bpp // cfg.blocks_per_plane
            cfg = dataclasses.replace(cfg, blocks_per_plane=bpp, spare_factor=1.0 - (cfg.user_units + 0.5) / physical)
            added += 1
    if not added:
        return cfg, out, None
    return cfg, out, (f"{what}: the model's GC stalled on a die with the fitted spare (few blocks per die: the "
                      f"dies' valid data drifts apart); {added} block(s) per plane added, effective OP "
                      f"{start.effective_op:.2%} -> {cfg.effective_op:.2%}")
