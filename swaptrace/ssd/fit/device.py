"""An SSD-model device fitted to what fio measured on a drive (``swaptrace ssd fit RUN_DIR -o my.toml``).

What each measurement of a ``fio run`` folder identifies (docs/ssd.md, "A device fitted to a drive"),
in the order the fit uses them -- each step keeps what the earlier ones found:

1. **Random reads at depth 1, by size** (``sweep_read_4k`` .. ``sweep_read_1m``). In the model a read
   of ``n`` map units that fit in one program unit occupies one die for ``tR`` and its channel for
   ``n`` unit transfers, then crosses the host link: latency ``tR + n u_c + u_h``. A larger read is
   striped over program units on consecutive dies, which overlap their ``tR`` and share the
   channels, so the latency grows by one program unit's transfer per ``channels`` program units.
   From the curve: **tR** (intercept), **channel rate** (slope), the **program unit** (where the
   slope first breaks), **channels** (how often it steps afterwards) and, when the largest reads
   run at the link's speed, the **host link** (latency = bytes / host rate). A grid over program
   units and channels with a least-squares line for each picks them.
2. **Random reads at depths 4 and 16** (``qd_read_SIZE_qdN``): **dies per channel**, the one
   parameter that decides how many small reads proceed at once. Searched over 1..64 with the model
   itself (the queueing of ``depth`` requests over the dies has no closed form worth trusting).
3. **Sequential 128 KiB writes** (``write_seq_128k``): die time per written unit
   ``tPROG / program unit + tERASE / units per block`` = dies x 4 KiB / bandwidth gives **tPROG**
   (``tERASE`` is a prior: the two are not separable from bandwidth alone); corrected with the model.
4. **Steady random 4 KiB writes** (``steady_randwrite``, the SNIA-style rounds of ``fio run
   --steady``; ``sweep_write_4k`` when there are none, flagged *not steady*): the **effective
   spare**, by bisection with the model itself (:func:`search_spare`): the simulated bandwidth falls
   monotonically as the spare shrinks, so no closed form of where the dies' time goes is needed (an
   earlier closed form -- die time per host unit, inverted through Desnoyers' greedy WAF -- missed by
   up to 4x when part of that time was not the dies'). The spare is found *given* the pages-per-block
   prior (the two are not separable from one bandwidth; the pair reproduces the write amplification).
   tPROG and the spare are then refined once more in turn (GC also touches the sequential pass).

What stays a prior (:data:`PRIORS`): map unit (4 KiB), planes (1: a multi-plane program unit is
indistinguishable from a bigger page), pages per block (128, fewer when the capacity simulated would
leave a die under :data:`MIN_BLOCKS_PER_DIE` blocks: one block per die is the spare's resolution),
tERASE (so tPROG absorbs the erase time per unit), the GC policy (greedy) and reserve, the write
buffer. The user capacity is the one fio used (``--size``): the spare inferred is the spare of that
capacity (on a drive used in part, the rest acts as spare once it has been trimmed).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.errors import ConfigError, GCStallError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.labjobs import STEADY_BS, TWIN_MAX_BYTES, LabJob, run_job, with_effective_spare

MAP_BYTES = 4096
#: parameters no measurement of a lab run identifies (a 970-class drive's, after NVMeVirt and MQSim)
PRIORS = {"map_bytes": MAP_BYTES, "planes": 1, "pages_per_block": 128, "erase_us": 2000.0, "gc_policy": "greedy",
          "gc_free_fraction": 0.0, "bg_gc_free_fraction": 0.0, "write_buffer_bytes": 64 << 20, "gc_copyback": True}
#: used when the run lacks the measurement that identifies them
FALLBACK = {"page_bytes": 16384, "channels": 8, "dies_per_channel": 2, "read_us": 50.0, "channel_mb_s": 800.0,
            "host_mb_s": 3500.0, "program_us_per_read_us": 5.0, "op": 0.07}
PAGE_CANDIDATES = (4096, 8192, 16384, 32768, 65536)
CHANNEL_CANDIDATES = (1, 2, 4, 8, 16, 32)
MAX_DIES_PER_CHANNEL = 64
#: channel rate written when the reads do not identify it (faster than any flash channel)
MAX_CHANNEL_MB_S = 20000.0
#: effective spare factors the random-write search brackets (OP 1 % to 100 %)
SPARE_RANGE = (0.01, 0.5)
#: the search stops when the model is this close to the measured bandwidth (relative) ...
SPARE_TOLERANCE = 0.01
#: ... or after this many halvings of log(spare) (50x range / 2^12: 0.1 % in spare)
SPARE_ITERATIONS = 12
#: a bisection that ends further than this factor from the measured bandwidth did not match it
MATCHED = 1.25
#: the pipeline's quick fit: read-search evaluations, spare search tolerance and halvings, one round
QUICK = {"read_evaluations": 24, "spare_tolerance": 0.03, "spare_iterations": 6}
#: reads below this fraction of the fastest one are taken as not held back by the host link
LINK_FREE = 0.8
#: fewest erase blocks per die the fitted device keeps where it is simulated: GC's spare then has a
#: resolution of 1/64 of a die (~1.6 %), not the 10-25 % of a die with 4-8 huge blocks
MIN_BLOCKS_PER_DIE = 64
#: most blocks per plane :func:`with_gc_room` adds to a die before it gives up
MAX_ROOM_BLOCKS = 64
#: engines with one request in flight whatever iodepth says (fio HOWTO, "ioengine")
SYNC_ENGINES = {"psync", "sync", "pvsync", "pvsync2", "vsync"}


@dataclass(frozen=True)
class Measurements:
    """The bandwidths (MB/s) of one lab run, keyed by :class:`LabJob`."""

    bw_mb_s: dict[LabJob, float]
    size_bytes: int
    steady: bool | None = None
    steady_source: str = ""
    source: str = ""

    def reads(self, depth: int) -> dict[int, float]:
        return {j.size_bytes: bw for j, bw in self.bw_mb_s.items() if j.kind == "read" and j.depth == depth}

    def of(self, kind: str) -> tuple[LabJob, float] | None:
        for j, bw in self.bw_mb_s.items():
            if j.kind == kind:
                return j, bw
        return None


@dataclass
class FitResult:
    """A fitted device and where each of its parameters came from."""

    config: SSDConfig
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    measurements: Measurements | None = None
    residuals: dict[str, float] = field(default_factory=dict)


_NAME = re.compile(r"^(sweep|qd)_read_(\d+)([km])(?:_qd(\d+))?$")


def _job_of(name: str, sweep_depth: int) -> LabJob | None:
    m = _NAME.match(name)
    if m:
        size = int(m.group(2)) << (10 if m.group(3) == "k" else 20)
        return LabJob("read", size, int(m.group(4)) if m.group(4) else sweep_depth)
    if name == "write_seq_128k":
        return LabJob("seq_write", 128 << 10, 1)
    if name in ("steady_randwrite", "sweep_write_4k"):
        return LabJob("steady_write", STEADY_BS, 32 if name == "steady_randwrite" else sweep_depth)
    return None


def measurements_from_rows(rows: list[dict], meta: dict) -> Measurements:
    """The lab measurements in ``fio-results`` rows (and their run metadata).

    Raises
    ------
    ConfigError
        The run has none of the jobs the fit needs.
    """
    run = meta.get("run") or {}
    engine = run.get("engine") or {"ioengine": "psync", "iodepth": 1}
    sweep_depth = 1 if engine.get("ioengine", "psync") in SYNC_ENGINES else int(engine.get("iodepth", 1))
    steady_info = ((run.get("preconditioning") or {}).get("steady") or {})
    bw: dict[LabJob, float] = {}
    steady, steady_source = None, ""
    for r in rows:
        job = _job_of(str(r["job"]), sweep_depth)
        if job is None or r["bw_bytes"] <= 0 or r["direction"] != ("read" if job.kind == "read" else "write"):
            continue
        if job.kind == "steady_write":
            if r["job"] == "sweep_write_4k" and any(j.kind == "steady_write" for j in bw):
                continue  # the steady rounds win over the sweep's short random writes
            verdict = steady_info.get(r["instance"]) or {}
            steady = bool(verdict.get("steady")) if r["job"] == "steady_randwrite" else False
            steady_source = r["instance"]
            bw = {j: v for j, v in bw.items() if j.kind != "steady_write"}
        bw[job] = float(r["bw_bytes"]) / 1e6
    if not bw:
        raise ConfigError("ssd fit: the run has none of the jobs the fit reads (sweep_read_*, qd_read_*, "
                          "write_seq_128k, steady_randwrite); run `swaptrace fio run` on a `fio jobs` folder")
    size = int(run.get("size_bytes") or 0)
    if size <= 0:
        raise ConfigError("ssd fit: the run does not record the bytes of the target it used (run.size_bytes)")
    return Measurements(bw, size, steady, steady_source, str(run.get("target", "")))


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
below :data:`LINK_FREE` of the fastest, with no link limit); the link is then the
    slowest that lets the fastest read reach its bandwidth (:func:`_slowest_link`). Last, each
    parameter in turn -- dies per channel, channels, program unit (discrete neighbours) and tR,
    channel rate, host link (multiplicative steps that shrink when nothing improves) -- moves while
    the RMS log error over the jobs falls, the largest error breaking ties. Returns the device and
    its largest |log| error.
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


def slowest_program(cfg: SSDConfig, job: LabJob, measured: float, lo: float, hi: float,
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


def sized(cfg: SSDConfig, user_bytes: int, effective_spare: float, *, exact: bool = True, **changes) -> SSDConfig:
    """``cfg`` with ``changes``, blocks for ``user_bytes`` of user capacity at ``effective_spare``.

    ``exact``: the user capacity is ``user_bytes`` to the map unit (the spare then moves by up to one
    row of blocks); otherwise the spare is kept exactly and the capacity is up to one row larger.
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


def fit_device(meas: Measurements, *, name: str = "fitted", say: Callable[[str], None] | None = None,
               quick: bool = False) -> FitResult:
    """Fit an :class:`SSDConfig` to a lab run's measurements (module docstring, steps 1-4).

    ``quick`` (the pipeline's demo budget, :data:`QUICK`): fewer read evaluations, one tPROG/spare round
    and a coarser spare search; the TOML says so.
    """
    say = say or (lambda _m: None)
    src: dict[str, str] = {k: "prior" for k in PRIORS}
    notes: list[str] = []
    fb = FALLBACK
    base = dict(PRIORS, name=name, page_bytes=fb["page_bytes"], channels=fb["channels"],
                dies_per_channel=fb["dies_per_channel"], read_us=fb["read_us"], channel_mb_s=fb["channel_mb_s"],
                host_mb_s=fb["host_mb_s"], program_us=fb["program_us_per_read_us"] * fb["read_us"],
                blocks_per_plane=256, spare_factor=fb["op"] / (1 + fb["op"]))
    for k in ("page_bytes", "channels", "dies_per_channel", "read_us", "channel_mb_s", "host_mb_s", "program_us",
              "spare_factor"):
        src[k] = "fallback (not measured)"
    qd1 = meas.reads(1)
    if len(qd1) >= 3:
        curve = fit_read_curve({s: s / bw for s, bw in qd1.items()}, meas.size_bytes // MAP_BYTES)
        for k in ("page_bytes", "channels", "read_us", "channel_mb_s"):
            base[k] = curve[k]
            src[k] = "random reads at depth 1 by size"
        if base["channel_mb_s"] > MAX_CHANNEL_MB_S:  # latency does not grow within a program unit: not identified
            base["channel_mb_s"] = MAX_CHANNEL_MB_S
            src["channel_mb_s"] = "not identified (reads within a program unit take the same time): a bound"
        if curve["host_mb_s"]:
            base["host_mb_s"], src["host_mb_s"] = curve["host_mb_s"], "the largest depth-1 reads (link-bound)"
        notes.append(f"depth-1 read curve: relative RMS error {curve['rms_error']:.3f}")
        say(f"read curve: tR {curve['read_us']:.1f} us, channel {curve['channel_mb_s']:.0f} MB/s, "
            f"program unit {curve['page_bytes'] >> 10} KiB, {curve['channels']} channels")
    if base["host_mb_s"] is None or src["host_mb_s"].startswith("fallback"):
        # not seen in the depth-1 curve: the link is at least as fast as the fastest transfer measured, and
        # starting there lets the search find a link that bounds only the deeper or larger reads
        base["host_mb_s"] = 1.02 * max(meas.bw_mb_s.values())
    cfg = SSDConfig(**{k: v for k, v in base.items() if k in {f.name for f in dataclasses.fields(SSDConfig)}})
    cfg = sized(cfg, meas.size_bytes, cfg.effective_spare_factor)
    reads = {j: bw for j, bw in meas.bw_mb_s.items() if j.kind == "read"}
    if reads:
        host_before = cfg.host_mb_s
        cfg, e = polish_reads(cfg, reads, meas.size_bytes,
                              max_evaluations=QUICK["read_evaluations"] if quick else 80)
        if cfg.host_mb_s != host_before:
            src["host_mb_s"] = "the fastest reads (refined with the model)"
        if any(j.depth > 1 for j in reads):
            src["dies_per_channel"] = "random reads at depth 4 and 16"
        notes.append(f"reads: largest |log error| {e:.3f} after refinement with the model")
        say(f"reads: {cfg.channels} channels x {cfg.dies_per_channel} dies, tR {cfg.read_us:.1f} us, "
            f"channel {cfg.channel_mb_s:.0f} MB/s, link {cfg.host_mb_s:.0f} MB/s (largest |log error| {e:.3f})")
    ppb = pages_per_block_for(cfg, meas.size_bytes)
    if ppb != cfg.pages_per_block:
        # a smaller block erases in proportionally less time: the erase cost per written unit is the prior's
        cfg = sized(cfg, meas.size_bytes, cfg.effective_spare_factor, pages_per_block=ppb,
                    erase_us=PRIORS["erase_us"] * ppb / PRIORS["pages_per_block"])
        src["pages_per_block"] = f"prior, reduced to keep {MIN_BLOCKS_PER_DIE} blocks per die where simulated"
        src["erase_us"] = "prior (2 ms per 128 pages), scaled with the block"
    for _ in range(1 if quick else 2):  # GC touches the sequential pass too: tPROG and spare again, each given the other
        last: list[str] = []
        cfg = _fit_program(cfg, meas, src, last, say)
        cfg = _fit_spare(cfg, meas, src, last, say, quick=quick)
    notes += last
    if quick:
        notes.append(f"quick fit (the pipeline's time budget): {QUICK}")
    cfg = same_stripe_phase(cfg, meas.size_bytes)
    writes = [j for j in meas.bw_mb_s if j.kind != "read"]
    cfg, _ = with_gc_room(cfg, lambda c: [run_job(c, j) for j in writes], notes, "the lab's write jobs")
    return FitResult(cfg, src, notes, meas)


def with_gc_room(cfg: SSDConfig, runs: Callable[[SSDConfig], Any], notes: list[str] | None = None,
                 what: str = "the workload") -> tuple[SSDConfig, Any]:
    """``cfg`` with the fewest extra blocks per die on which ``runs(cfg)`` completes, and what it returned.

    A device of few blocks per die (the model of a small fio file) can need more spare than the fit's
    random writes imply. Host writes are striped over the dies in turn while overwrites invalidate data
    wherever it lies, so the valid data each die holds drifts apart, by about the square root of the map
    units a die holds (a random walk): on a die of a few hundred units that is a block or more, and the
    fullest die's greedy GC finds only full blocks although the device as a whole has spare. On a real
    drive's millions of units per die the drift is a negligible fraction of the spare.

    One block per plane is added to every die at a time, the user capacity (and so its stripe phase)
    unchanged, until ``runs`` completes without a GC stall; ``notes`` gets a line saying how many were
    added. Raises :class:`~swaptrace.errors.GCStallError` if :data:`MAX_ROOM_BLOCKS` do not do.
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
    if added and notes is not None:
        notes.append(f"{what}: the model's GC stalled on a die with the fitted spare (few blocks per die: the "
                     f"dies' valid data drifts apart); {added} block(s) per plane added, effective OP "
                     f"{start.effective_op:.2%} -> {cfg.effective_op:.2%}")
    return cfg, out


def _fit_program(cfg, meas, src, notes, say) -> SSDConfig:
    """tPROG from sequential writes (step 3): closed form, then bisection with the model."""
    seq = meas.of("seq_write")
    if seq is None:
        return dataclasses.replace(cfg, program_us=FALLBACK["program_us_per_read_us"] * cfg.read_us)
    job, bw = seq
    tau = cfg.dies * cfg.map_bytes / bw
    guess = max(cfg.program_units * (tau - cfg.erase_us / cfg.units_per_block), 1.0)
    cfg = dataclasses.replace(cfg, program_us=guess)
    cfg = slowest_program(cfg, job, bw, guess / 4, guess * 4)
    src["program_us"] = "sequential 128 KiB writes (with tERASE a prior)"
    say(f"tPROG {cfg.program_us:.0f} us")
    if run_job(dataclasses.replace(cfg, program_us=cfg.program_us / 2), job)["bw_mb_s"] < 1.02 * bw:
        src["program_us"] += "; an UPPER BOUND: the link or channels bound the sequential writes"
        notes.append("sequential writes are bounded by the link or channels, not the dies: tPROG is an upper bound")
    return cfg


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


def _fit_spare(cfg, meas, src, notes, say, quick: bool = False) -> SSDConfig:
    """Effective spare from steady random 4 KiB writes (step 4): bisection with the model."""
    rnd = meas.of("steady_write")
    if rnd is None:
        return with_effective_spare(cfg, FALLBACK["op"] / (1 + FALLBACK["op"]))
    job, bw = rnd
    opts = {"rel": QUICK["spare_tolerance"], "iterations": QUICK["spare_iterations"]} if quick else {}
    cfg, how = search_spare(cfg, job, bw, meas.size_bytes, **opts)
    if how == "above" and "UPPER BOUND" in src.get("program_us", ""):
        # sequential writes bound tPROG only from above and the random writes need faster programs: the
        # slowest tPROG at which the model's random writes reach theirs (with the most spare), then the spare
        cfg = slowest_program(cfg, job, bw, cfg.program_us / 16, cfg.program_us)
        src["program_us"] = "steady random writes below the bound of the sequential ones (tERASE a prior)"
        cfg, how = search_spare(cfg, job, bw, meas.size_bytes, **opts)
    steady = "steady" if meas.steady else "NOT steady"
    src["spare_factor"] = (f"random 4 KiB writes ({meas.steady_source}, {steady}); bisection on the model's "
                           f"bandwidth with {cfg.pages_per_block} pages per block (prior)")
    notes.append(f"random writes: effective spare {cfg.effective_spare_factor:.4f} "
                 f"(OP {cfg.effective_op:.2%}) by bisection with the model")
    if how == "above":
        src["spare_factor"] += "; a LOWER BOUND: the writes are not GC-bound"
        notes.append("random writes are bounded by programs, channels or the link, not GC: the spare is a lower bound")
    elif how == "below":
        notes.append("random writes are slower than the model with the least spare GC can use: the spare is an "
                     "upper bound")
    if not meas.steady:
        notes.append("the random-write bandwidth was not measured in steady state: the spare is an upper bound")
    say(f"spare: effective OP {cfg.effective_op:.1%} ({steady}, {how})")
    return cfg


def predict(cfg: SSDConfig, jobs) -> dict[LabJob, float]:
    """Simulated bandwidth (MB/s) of each lab job on ``cfg``."""
    return {j: run_job(cfg, j)["bw_mb_s"] for j in jobs}


_FIELD_NOTES = {
    "channels": "channels", "dies_per_channel": "dies per channel", "page_bytes": "program unit (planes x page)",
    "read_us": "tR, us", "program_us": "tPROG, us", "channel_mb_s": "channel rate, MB/s",
    "host_mb_s": "host link, MB/s", "spare_factor": "physical spare factor (T-U)/T",
}


def render_toml(res: FitResult, run_dir: str | Path | None = None) -> str:
    """The fitted device as a TOML ``--device`` file, each parameter with where it came from."""
    cfg = res.config
    lines = [f"# SSD-model device fitted by `swaptrace ssd fit` to {run_dir or 'a fio run'}",
             f"# user capacity = the bytes fio used ({cfg.user_bytes}); effective OP {cfg.effective_op:.2%} "
             f"(physical {cfg.physical_op:.2%})"]
    if res.measurements is not None and res.measurements.steady is False:
        lines.append("# WARNING: random writes were not in steady state: the spare below is an upper bound")
    lines += [f"# {n}" for n in res.notes]
    lines.append("")
    for f in dataclasses.fields(SSDConfig):
        value = getattr(cfg, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = f'"{value}"'
        elif isinstance(value, float):
            text = repr(value)  # every digit: the device written is the device the fit simulated
        else:
            text = str(value)
        why = res.sources.get(f.name, "prior" if f.name in PRIORS else "")
        label = _FIELD_NOTES.get(f.name, "")
        comment = f"  # {label + ': ' if label else ''}{why}" if why or label else ""
        if f.name == "blocks_per_plane":
            comment = "  # sized for the capacity fio used"
        lines.append(f"{f.name} = {text}{comment}")
    return "\n".join(lines) + "\n"


def fit_run(run_dir: str | Path, *, name: str | None = None, say=None, quick: bool = False) -> FitResult:
    """:func:`fit_device` on the ``results.parquet`` of a ``fio run`` folder."""
    from swaptrace.fio import results as resmod

    d = Path(run_dir)
    if not d.is_dir() or not (d / resmod.RESULTS_NAME).is_file():
        raise ConfigError(f"{d}: not a `swaptrace fio run` results folder (no {resmod.RESULTS_NAME})")
    rows, meta = resmod.read_results(d)
    meas = measurements_from_rows(rows, meta)
    res = fit_device(meas, name=name or d.resolve().name, say=say, quick=quick)
    res.residuals = residuals(res.config, meas)
    return res


def residuals(cfg: SSDConfig, meas: Measurements) -> dict[str, float]:
    """The model's relative error on each lab job measured (simulated / measured - 1), by job name."""
    pred = predict(cfg, meas.bw_mb_s)
    return {j.name: pred[j] / meas.bw_mb_s[j] - 1.0 for j in meas.bw_mb_s}


def write_fit(run_dir: str | Path, out: str | Path, *, name: str | None = None, force: bool = False,
              say=None, quick: bool = False) -> FitResult:
    """Fit the device of ``run_dir`` and write it (atomically) as a TOML device file."""
    from swaptrace.core.traceio import check_output_path

    check_output_path(out, force)  # refused before minutes of fitting, not after
    res = fit_run(run_dir, name=name or Path(out).stem, say=say, quick=quick)
    save_fit(res, run_dir, out, force=force)
    return res


def save_fit(res: FitResult, run_dir: str | Path, out: str | Path, *, force: bool = False) -> None:
    """Write a fitted device (atomically) as a TOML device file."""
    from swaptrace.core.traceio import AtomicPath

    with AtomicPath(out, force=force) as ap:
        ap.tmp.write_text(render_toml(res, run_dir))
