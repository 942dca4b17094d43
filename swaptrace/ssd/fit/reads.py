"""What the random reads identify: steps 1 and 2 of the device fit (:mod:`swaptrace.ssd.fit.device`).

1. **Random reads at depth 1, by size** (``sweep_read_4k`` .. ``sweep_read_1m``). In the model a read
   of ``n`` map units that fit in one program unit occupies one die for ``tR`` and its channel for
   ``n`` unit transfers, then crosses the host link: latency ``tR + n u_c + u_h``. A larger read is
   striped over program units on consecutive dies, which overlap their ``tR`` and share the
   channels, so the latency grows by one program unit's transfer per ``channels`` program units.
   From the curve: **tR** (intercept), **channel rate** (slope), the **program unit** (where the
   slope first breaks), **channels** (how often it steps afterwards) and, when the largest reads
   run at the link's speed, the **host link** (latency = bytes / host rate). A grid over program
   units and channels with a least-squares line for each picks them (:func:`identify_read_curve`).
2. **Random reads at depths 4 and 16** (``qd_read_SIZE_qdN``): **dies per channel**, the one
   parameter that decides how many small reads proceed at once. Searched over 1..64 with the model
   itself (the queueing of ``depth`` requests over the dies has no closed form worth trusting), then
   every read parameter refined with the model (:func:`identify_dies`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from swaptrace.errors import ConfigError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.fit.measurements import Identified, Measurements
from swaptrace.ssd.fit.priors import FALLBACK, MAP_BYTES, PRIORS, QUICK, sized
from swaptrace.ssd.labjobs import LabJob, run_job

PAGE_CANDIDATES = (4096, 8192, 16384, 32768, 65536)
CHANNEL_CANDIDATES = (1, 2, 4, 8, 16, 32)
MAX_DIES_PER_CHANNEL = 64
#: channel rate written when the reads do not identify it (faster than any flash channel)
MAX_CHANNEL_MB_S = 20000.0
#: reads below this fraction of the fastest one are taken as not held back by the host link
LINK_FREE = 0.8
#: the parameters a lab run can identify; each starts from its fallback (:data:`FALLBACK`) until one does
MEASURED_FIELDS = ("page_bytes", "channels", "dies_per_channel", "read_us", "channel_mb_s", "host_mb_s",
                   "program_us", "spare_factor")


def busiest_channel_units(n: int, pu: int, channels: int, phase: int) -> float:
    """Mean units the busiest channel transfers for a random read of ``n`` units (aligned to ``n``).

    After the sequential fill, map unit ``x`` sits at stripe position ``phase + x``: program unit
    ``(phase + x) // pu`` on channel ``((phase + x) // pu) % channels`` (``phase`` = the user capacity
    modulo one channel stripe, where the fill's second pass began). Averaged over every start the
    pattern can take.
    """
    period = pu * channels
    starts = np.arange(0, math.lcm(n, period), n, dtype=np.int64)
    pos = phase + starts[:, None] + np.arange(n, dtype=np.int64)[None, :]
    chan = (pos // pu) % channels
    counts = np.stack([(chan == c).sum(axis=1) for c in range(channels)], axis=1)
    return float(counts.max(axis=1).mean())


def fit_read_curve(lat_us: dict[int, float], user_units: int) -> dict[str, Any]:
    """tR, channel rate, program unit, channels and host link from depth-1 read latency by size (step 1).

    ``lat_us`` maps request bytes to mean latency in microseconds; ``user_units`` (4 KiB units) places
    the fill's second pass on the stripe. Returns the parameters and the relative RMS error of the
    chosen line.
    """
    sizes = np.array(sorted(lat_us), dtype=np.int64)
    lat = np.array([lat_us[s] for s in sizes])
    n = sizes // MAP_BYTES
    host_candidates = [0.0] + sorted({float(lat[i] / n[i]) for i in range(len(n))})
    best = None
    for pu_bytes in PAGE_CANDIDATES:
        pu = pu_bytes // MAP_BYTES
        for channels in CHANNEL_CANDIDATES:
            phase = user_units % (pu * channels)
            k = np.array([busiest_channel_units(int(x), pu, channels, phase) for x in n])
            # a read over more program units than channels may meet a die twice (another tR): the line
            # is then only a lower bound, so those sizes are not fitted, only checked from below
            spans = -(-(n + pu - 1) // pu)
            for u_h in host_candidates:
                free = lat > 1.02 * n * u_h  # points the host link does not bound
                fit = free & (spans <= channels)
                if fit.sum() < 2 or np.ptp(k[fit]) <= 0:
                    continue
                w = 1.0 / lat[fit]  # relative errors: small and large reads count alike
                design = np.stack([np.ones(fit.sum()), k[fit]], axis=1) * w[:, None]
                (a, b), *_ = np.linalg.lstsq(design, lat[fit] * w, rcond=None)
                if b <= 0 or a - u_h <= 0:
                    continue
                e = np.log(np.maximum(a + b * k, n * u_h)) - np.log(lat)
                e = np.where(free & ~fit, np.maximum(e, 0.0), e)
                err = float(np.sqrt(np.mean(e ** 2)))
                # near-ties go to more sizes fitted, then no link limit, then the smaller unit
                key = (round(err, 3), -int(fit.sum()), u_h > 0, pu_bytes, channels)
                if best is None or key < best[0]:
                    best = (key, dict(page_bytes=pu_bytes, channels=channels, read_us=float(a - u_h),
                                      channel_mb_s=MAP_BYTES / float(b),
                                      host_mb_s=MAP_BYTES / u_h if u_h > 0 else None, rms_error=err))
    if best is None:
        raise ConfigError("ssd fit: the depth-1 read latencies do not fit the model's read timing "
                          "(need at least two sizes whose latency grows with size)")
    return best[1]


def _read_error(cfg: SSDConfig, targets: dict[LabJob, float]) -> tuple[float, float]:
    """Largest and RMS absolute log ratio simulated / measured over the read jobs in ``targets``.

    The largest comes first: the round trip asks every job to come back within 10 %, so that is what
    the search lowers (the RMS breaks ties).
    """
    err = np.abs([math.log(run_job(cfg, j)["bw_mb_s"] / bw) for j, bw in targets.items()])
    return float(err.max()), float(np.sqrt(np.mean(np.square(err))))


def _neighbours(values: tuple, current) -> list:
    if current not in values:
        return []
    i = values.index(current)
    return [values[k] for k in (i - 1, i + 1) if 0 <= k < len(values)]


def _scan_dies(cfg: SSDConfig, targets: dict[LabJob, float], moved) -> SSDConfig:
    """Channels and dies per channel from all the reads (step 2), when some are deeper than 1.

    Depth-1 reads tell channels and program unit only from where their latency steps, which a few
    pairs can match alike; deeper reads tell how many dies serve a queue. For the curve's channel
    count and program unit and their neighbours, dies per channel are scanned upwards from 1 (the
    error falls until enough dies serve the deepest queue, then rises; a scan stops 4 past its best);
    the lowest RMS log error wins.
    """
    best, best_err = cfg, _read_error(cfg, targets)[::-1]
    pairs = [(ch, pb) for ch in [cfg.channels, *_neighbours(CHANNEL_CANDIDATES, cfg.channels)]
             for pb in [cfg.page_bytes, *_neighbours(PAGE_CANDIDATES, cfg.page_bytes)]]
    for ch, pb in pairs:
        here, top = None, 0  # this pair's best error and its dies per channel
        for dpc in range(1, MAX_DIES_PER_CHANNEL + 1):
            c = moved(cfg, {"channels": ch, "page_bytes": pb, "dies_per_channel": dpc})
            if c is None:
                continue
            e = _read_error(c, targets)[::-1]
            if here is None or e < here:
                here, top = e, dpc
            if e < best_err:
                best, best_err = c, e
            if dpc >= top + 4:
                break
    return best


def _slowest_link(cfg: SSDConfig, job: LabJob, measured: float, rel: float = 0.005) -> SSDConfig:
    """The slowest host link at which the model's ``job`` still reaches ``measured`` MB/s (bisection).

    Bandwidth never falls as the link gets faster; where the link bounds the fastest read this is the
    link, elsewhere the least link consistent with the measurement.
    """
    a, b = 0.5 * measured, max(4.0 * measured, cfg.host_mb_s)
    if run_job(dataclasses.replace(cfg, host_mb_s=b), job)["bw_mb_s"] < measured * (1.0 - rel):
        return cfg  # something else bounds it: leave the link as it was
    for _ in range(20):
        mid = math.sqrt(a * b)
        ok = run_job(dataclasses.replace(cfg, host_mb_s=mid), job)["bw_mb_s"] >= measured * (1.0 - rel)
        a, b = (a, mid) if ok else (mid, b)
        if b / a < 1.002:
            break
    return dataclasses.replace(cfg, host_mb_s=b)


def polish_reads(cfg: SSDConfig, targets: dict[LabJob, float], user_bytes: int,
                 max_evaluations: int = 80) -> tuple[SSDConfig, float]:
    """Search of the read parameters on the model itself (steps 1-2 refined).

    The closed forms of step 1 ignore a die met twice and the queueing of deeper reads. With reads
    deeper than 1, channels and dies per channel are scanned first (:func:`_scan_dies`, on the reads
    below :data:`LINK_FREE` of the fastest, with no link limit); the link is then the slowest that lets
    the fastest read reach its bandwidth (:func:`_slowest_link`). Last, each parameter in turn -- dies
    per channel, channels, program unit (discrete neighbours) and tR, channel rate, host link
    (multiplicative steps that shrink when nothing improves) -- moves while the RMS log error over the
    jobs falls, the largest error breaking ties. Returns the device and its largest |log| error.
    """
    eff = cfg.effective_spare_factor
    cache: dict[tuple, tuple[float, float]] = {}

    def score(c: SSDConfig) -> tuple[float, float]:
        key = (c.channels, c.dies_per_channel, c.page_bytes, round(c.read_us, 4), round(c.channel_mb_s, 3),
               round(c.host_mb_s, 3))
        if key not in cache:
            worst, rms = _read_error(c, targets)
            cache[key] = (rms, worst)
        return cache[key]

    def moved(c: SSDConfig, change: dict) -> SSDConfig | None:
        if not set(change) & {"channels", "dies_per_channel", "page_bytes"}:
            return dataclasses.replace(c, **change)
        try:
            return sized(c, user_bytes, eff, **change)
        except ConfigError:
            return None

    # the scan uses reads well below the fastest (no link holds them back) on a device with no link
    # limit, as the link is only found next, from the fastest read, and that needs the dies
    top = max(targets.values())
    slow = {j: bw for j, bw in targets.items() if bw < LINK_FREE * top}
    if any(j.depth > 1 for j in slow):
        free = _scan_dies(dataclasses.replace(cfg, host_mb_s=4.0 * top), slow, moved)
        cfg = dataclasses.replace(free, host_mb_s=cfg.host_mb_s)
    fastest = max(targets, key=targets.get)
    cfg = _slowest_link(cfg, fastest, targets[fastest])
    best, best_err = cfg, score(cfg)
    step = 1.25
    dpcs = tuple(range(1, MAX_DIES_PER_CHANNEL + 1))
    while len(cache) < max_evaluations and step > 1.01:
        moves = [{"dies_per_channel": v} for v in _neighbours(dpcs, best.dies_per_channel)]
        moves += [{"channels": v, "dies_per_channel": max(1, best.dies // v)}
                  for v in _neighbours(CHANNEL_CANDIDATES, best.channels)]
        moves += [{"page_bytes": v} for v in _neighbours(PAGE_CANDIDATES, best.page_bytes)]
        moves += [{k: getattr(best, k) * f} for k in ("read_us", "channel_mb_s", "host_mb_s") for f in (step, 1 / step)]
        improved = False
        for change in moves:
            c = moved(best, change)
            if c is not None and score(c) < (best_err[0] - 1e-4, best_err[1]):
                best, best_err, improved = c, score(c), True
        if not improved:
            step = math.sqrt(step)
    return best, best_err[1]


def identify_read_curve(meas: Measurements, *, name: str = "fitted",
                        say: Callable[[str], None] | None = None) -> Identified:
    """Step 1: the device the fit starts from -- priors, fallbacks, and what the depth-1 read curve identifies.

    Parameters
    ----------
    meas : Measurements
        The lab run; depth-1 reads of at least 3 sizes give the curve (:func:`fit_read_curve`): tR,
        channel rate, program unit, channels and, when the largest reads are link-bound, the host link.
    name : str
        The device's name.
    say : callable, optional
        Where a progress line goes.

    Returns
    -------
    Identified
        The device, sized to the capacity fio used at the fallback spare; the source of every parameter
        (``prior``, ``fallback (not measured)`` or the reads) and the curve's relative RMS error as a note.
        A link the curve does not show starts at 1.02 x the fastest bandwidth measured (MB/s), so the
        search of step 2 can find a link that bounds only the deeper or larger reads.
    """
    say = say or (lambda _m: None)
    sources = {k: "prior" for k in PRIORS} | {k: "fallback (not measured)" for k in MEASURED_FIELDS}
    fb = FALLBACK
    base = dict(PRIORS, name=name, page_bytes=fb["page_bytes"], channels=fb["channels"],
                dies_per_channel=fb["dies_per_channel"], read_us=fb["read_us"], channel_mb_s=fb["channel_mb_s"],
                host_mb_s=fb["host_mb_s"], program_us=fb["program_us_per_read_us"] * fb["read_us"],
                blocks_per_plane=256, spare_factor=fb["op"] / (1 + fb["op"]))
    notes = []
    qd1 = meas.reads(1)
    if len(qd1) >= 3:
        curve = fit_read_curve({s: s / bw for s, bw in qd1.items()}, meas.size_bytes // MAP_BYTES)
        for k in ("page_bytes", "channels", "read_us", "channel_mb_s"):
            base[k] = curve[k]
            sources[k] = "random reads at depth 1 by size"
        if base["channel_mb_s"] > MAX_CHANNEL_MB_S:  # latency does not grow within a program unit: not identified
            base["channel_mb_s"] = MAX_CHANNEL_MB_S
            sources["channel_mb_s"] = "not identified (reads within a program unit take the same time): a bound"
        if curve["host_mb_s"]:
            base["host_mb_s"], sources["host_mb_s"] = curve["host_mb_s"], "the largest depth-1 reads (link-bound)"
        notes.append(f"depth-1 read curve: relative RMS error {curve['rms_error']:.3f}")
        say(f"read curve: tR {curve['read_us']:.1f} us, channel {curve['channel_mb_s']:.0f} MB/s, "
            f"program unit {curve['page_bytes'] >> 10} KiB, {curve['channels']} channels")
    if base["host_mb_s"] is None or sources["host_mb_s"].startswith("fallback"):
        base["host_mb_s"] = 1.02 * max(meas.bw_mb_s.values())
    cfg = SSDConfig(**{k: v for k, v in base.items() if k in {f.name for f in dataclasses.fields(SSDConfig)}})
    return Identified(sized(cfg, meas.size_bytes, cfg.effective_spare_factor), sources, tuple(notes))


def identify_dies(cfg: SSDConfig, meas: Measurements, *, quick: bool = False,
                  say: Callable[[str], None] | None = None) -> Identified:
    """Step 2: dies per channel from the deeper reads, the host link, and every read parameter refined.

    Parameters
    ----------
    cfg : SSDConfig
        The device of step 1 (:func:`identify_read_curve`); not changed.
    meas : Measurements
        The lab run; all its reads are searched over with the model (:func:`polish_reads`).
    quick : bool
        The pipeline's time budget: :data:`~swaptrace.ssd.fit.priors.QUICK` read evaluations, not 80.
    say : callable, optional
        Where a progress line goes.

    Returns
    -------
    Identified
        The refined device (``cfg`` itself when the run has no reads), the sources of the link (when
        the search moved it) and of dies per channel (when reads deeper than 1 were measured), and the
        largest |log(simulated / measured)| over the reads as a note.
    """
    say = say or (lambda _m: None)
    reads = {j: bw for j, bw in meas.bw_mb_s.items() if j.kind == "read"}
    if not reads:
        return Identified(cfg)
    refined, e = polish_reads(cfg, reads, meas.size_bytes,
                              max_evaluations=QUICK["read_evaluations"] if quick else 80)
    sources = {}
    if refined.host_mb_s != cfg.host_mb_s:
        sources["host_mb_s"] = "the fastest reads (refined with the model)"
    if any(j.depth > 1 for j in reads):
        sources["dies_per_channel"] = "random reads at depth 4 and 16"
    say(f"reads: {refined.channels} channels x {refined.dies_per_channel} dies, tR {refined.read_us:.1f} us, "
        f"channel {refined.channel_mb_s:.0f} MB/s, link {refined.host_mb_s:.0f} MB/s (largest |log error| {e:.3f})")
    return Identified(refined, sources, (f"reads: largest |log error| {e:.3f} after refinement with the model",))
