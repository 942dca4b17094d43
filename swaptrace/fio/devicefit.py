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
   --precondition steady``; ``sweep_write_4k`` when there are none, flagged *not steady*): the die
   time per host unit at write amplification ``A`` is ``A tPROG / pu + (A / Np)(G tR + tERASE)``
   (``G`` program units read per victim), so the bandwidth gives ``A``, and Desnoyers' greedy-GC
   model (:func:`swaptrace.ssd.analytic.wa_greedy`) turns ``A`` into the **effective spare**. The
   physical spare adds the GC reserve back. Two corrections with the model close the gap between
   the closed form and the simulated FTL.

What stays a prior (:data:`PRIORS`): map unit (4 KiB), planes (1: a multi-plane program unit is
indistinguishable from a bigger page), pages per block, tERASE, the GC policy (greedy) and reserve,
the write buffer. The user capacity is the one fio used (``--size``): the spare inferred is the
spare of that capacity (on a drive used in part, the rest acts as spare once it has been trimmed).
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

from swaptrace.errors import ConfigError
from swaptrace.ssd import analytic
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.labjobs import STEADY_BS, LabJob, run_job, with_effective_spare

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


def _read_error(cfg: SSDConfig, targets: dict[LabJob, float]) -> float:
    """RMS of the log ratio simulated / measured over the read jobs in ``targets``."""
    err = [math.log(run_job(cfg, j)["bw_mb_s"] / bw) for j, bw in targets.items()]
    return float(np.sqrt(np.mean(np.square(err))))


def _neighbours(values: tuple, current) -> list:
    if current not in values:
        return []
    i = values.index(current)
    return [values[k] for k in (i - 1, i + 1) if 0 <= k < len(values)]


def polish_reads(cfg: SSDConfig, targets: dict[LabJob, float], user_bytes: int,
                 max_evaluations: int = 80) -> tuple[SSDConfig, float]:
    """Coordinate descent of the read parameters on the model itself (steps 1-2 refined).

    The closed forms of step 1 ignore a die met twice and the queueing of deeper reads; starting
    from them, each parameter in turn -- dies per channel, channels, program unit (discrete
    neighbours) and tR, channel rate, host link (multiplicative steps that shrink when nothing
    improves) -- moves while the simulated reads come closer to ``targets``. Returns the device and
    its RMS log error.
    """
    eff = cfg.effective_spare_factor
    cache: dict[tuple, float] = {}
    count = [0]

    def score(c: SSDConfig) -> float:
        key = (c.channels, c.dies_per_channel, c.page_bytes, round(c.read_us, 4), round(c.channel_mb_s, 3),
               round(c.host_mb_s, 3))
        if key not in cache:
            count[0] += 1
            cache[key] = _read_error(c, targets)
        return cache[key]

    def moved(c: SSDConfig, change: dict) -> SSDConfig | None:
        if not set(change) & {"channels", "dies_per_channel", "page_bytes"}:
            return dataclasses.replace(c, **change)
        try:
            return sized(c, user_bytes, eff, **change)
        except ConfigError:
            return None

    best, best_err = cfg, score(cfg)
    step = 1.25
    dpcs = tuple(range(1, MAX_DIES_PER_CHANNEL + 1))
    while count[0] < max_evaluations and step > 1.01:
        moves = [{"dies_per_channel": v} for v in _neighbours(dpcs, best.dies_per_channel)]
        moves += [{"channels": v, "dies_per_channel": max(1, best.dies // v)}
                  for v in _neighbours(CHANNEL_CANDIDATES, best.channels)]
        moves += [{"page_bytes": v} for v in _neighbours(PAGE_CANDIDATES, best.page_bytes)]
        moves += [{k: getattr(best, k) * f} for k in ("read_us", "channel_mb_s", "host_mb_s") for f in (step, 1 / step)]
        improved = False
        for change in moves:
            c = moved(best, change)
            if c is None:
                continue
            e = score(c)
            if e < best_err - 1e-4:
                best, best_err, improved = c, e, True
        if not improved:
            step = math.sqrt(step)
    return best, best_err


def _scale_to(cfg: SSDConfig, job: LabJob, measured: float, name: str, monotone: int, lo: float, hi: float,
              iterations: int = 24) -> SSDConfig:
    """Bisection on one timing field so the simulated ``job`` gives ``measured`` MB/s.

    ``monotone`` is +1 when bandwidth grows with the field, -1 when it falls.
    """
    a, b = lo, hi
    for _ in range(iterations):
        mid = math.sqrt(a * b)
        bw = run_job(dataclasses.replace(cfg, **{name: mid}), job)["bw_mb_s"]
        if (bw < measured) == (monotone > 0):
            a = mid
        else:
            b = mid
        if b / a < 1.002:
            break
    return dataclasses.replace(cfg, **{name: math.sqrt(a * b)})


def waf_from_random_writes(cfg: SSDConfig, bw_mb_s: float) -> float:
    """Write amplification whose die time per host unit gives ``bw_mb_s`` (step 4's closed form).

    Per host unit a die spends ``A tPROG / pu`` programming (host and GC data) and, per victim
    block (one every ``Np / A`` host units), ``G tR + tERASE``, with ``G = (Np / pu)(1 - A^-pu)``
    program units holding valid data (valid fraction ``1 - 1/A``, spread at random).
    """
    pu, np_ = cfg.program_units, cfg.units_per_block
    tau = cfg.dies * cfg.map_bytes / bw_mb_s  # µs per host unit per die

    def die_time(a: float) -> float:
        g = (np_ / pu) * (1.0 - a ** (-pu))
        return a * cfg.program_us / pu + (a / np_) * (g * cfg.read_us + cfg.erase_us)

    if die_time(1.0) >= tau:
        return 1.0
    lo, hi = 1.0, 2.0
    while die_time(hi) < tau and hi < 1e4:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if die_time(mid) < tau else (lo, mid)
    return 0.5 * (lo + hi)


def spare_from_waf(waf: float, units_per_block: int) -> float:
    """Effective spare factor at which greedy GC has write amplification ``waf`` (Desnoyers 2012, Eq. 12)."""
    if waf <= 1.0 + 1e-6:
        return 0.5
    lo, hi = 1.0 + 1e-9, 50.0  # alpha = T/U; WA falls as alpha grows
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if analytic.wa_greedy(mid, units_per_block) > waf else (lo, mid)
    return min(1.0 - 1.0 / (0.5 * (lo + hi)), 0.5)


def sized(cfg: SSDConfig, user_bytes: int, effective_spare: float, **changes) -> SSDConfig:
    """``cfg`` with ``changes``, blocks for ``user_bytes`` of user capacity (to the map unit) at ``effective_spare``."""
    c = dataclasses.replace(cfg, spare_factor=0.5, blocks_per_plane=max(cfg.blocks_per_plane, 64), **changes)
    for _ in range(3):
        blocks = max(8, -(-int(user_bytes / (1.0 - c.spare_factor)) //
                          (c.dies * c.planes * c.pages_per_block * c.page_bytes)))
        c = with_effective_spare(c, effective_spare, blocks_per_plane=blocks)
    want = user_bytes // c.map_bytes
    if want < c.physical_units:  # exactly the capacity fio used (reads then stripe as they did on the drive)
        try:
            with_cap = dataclasses.replace(c, spare_factor=1.0 - (want + 0.5) / c.physical_units)
        except ConfigError:
            return c
        if with_cap.user_units == want:
            return with_cap
    return c


def fit_device(meas: Measurements, *, name: str = "fitted", say: Callable[[str], None] | None = None) -> FitResult:
    """Fit an :class:`SSDConfig` to a lab run's measurements (module docstring, steps 1-4)."""
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
        # not link-bound in any read: the link is at least as fast as the fastest transfer measured
        base["host_mb_s"] = max(fb["host_mb_s"], 1.05 * max(meas.bw_mb_s.values()))
    cfg = SSDConfig(**{k: v for k, v in base.items() if k in {f.name for f in dataclasses.fields(SSDConfig)}})
    cfg = sized(cfg, min(meas.size_bytes, 1 << 30), cfg.effective_spare_factor)
    reads = {j: bw for j, bw in meas.bw_mb_s.items() if j.kind == "read"}
    if reads:
        host_before = cfg.host_mb_s
        cfg, e = polish_reads(cfg, reads, min(meas.size_bytes, 1 << 30))
        if cfg.host_mb_s != host_before:
            src["host_mb_s"] = "the fastest reads (refined with the model)"
        if any(j.depth > 1 for j in reads):
            src["dies_per_channel"] = "random reads at depth 4 and 16"
        notes.append(f"reads: RMS log error {e:.3f} after refinement with the model")
        say(f"reads: {cfg.channels} channels x {cfg.dies_per_channel} dies, tR {cfg.read_us:.1f} us, "
            f"channel {cfg.channel_mb_s:.0f} MB/s, link {cfg.host_mb_s:.0f} MB/s (RMS log error {e:.3f})")
    cfg = _fit_program(cfg, meas, src, notes, say)
    cfg = _fit_spare(cfg, meas, src, notes, say)
    cfg = sized(cfg, meas.size_bytes, cfg.effective_spare_factor)
    return FitResult(cfg, src, notes, meas)


def _fit_program(cfg, meas, src, notes, say) -> SSDConfig:
    """tPROG from sequential writes (step 3): closed form, then bisection with the model."""
    seq = meas.of("seq_write")
    if seq is None:
        return dataclasses.replace(cfg, program_us=FALLBACK["program_us_per_read_us"] * cfg.read_us)
    job, bw = seq
    tau = cfg.dies * cfg.map_bytes / bw
    guess = max(cfg.program_units * (tau - cfg.erase_us / cfg.units_per_block), 1.0)
    cfg = dataclasses.replace(cfg, program_us=guess)
    cfg = _scale_to(cfg, job, bw, "program_us", -1, guess / 4, guess * 4)
    src["program_us"] = "sequential 128 KiB writes (with tERASE a prior)"
    say(f"tPROG {cfg.program_us:.0f} us")
    if run_job(cfg, job)["bw_mb_s"] > 1.05 * bw:
        notes.append("sequential writes are bounded by the link or channels, not the dies: tPROG is an upper bound")
    return cfg


def _fit_spare(cfg, meas, src, notes, say) -> SSDConfig:
    """Effective spare from steady random 4 KiB writes (step 4): closed form, then corrected with the model."""
    rnd = meas.of("steady_write")
    if rnd is None:
        return with_effective_spare(cfg, FALLBACK["op"] / (1 + FALLBACK["op"]))
    job, bw = rnd
    waf = waf_from_random_writes(cfg, bw)
    target = waf
    for _ in range(3):  # the closed form misses a few per cent of the simulated FTL's die time: correct it
        eff = spare_from_waf(target, cfg.units_per_block)
        cfg = with_effective_spare(cfg, eff)
        sim = run_job(cfg, job)
        ratio = sim["bw_mb_s"] / bw
        if abs(ratio - 1.0) < 0.01:
            break
        target = max(1.0, target * ratio)
    steady = "steady" if meas.steady else "NOT steady"
    src["spare_factor"] = f"random 4 KiB writes ({meas.steady_source}, {steady}) via greedy-GC WAF"
    notes.append(f"random writes: WAF {waf:.2f} (closed form) -> effective spare {cfg.effective_spare_factor:.4f}")
    if not meas.steady:
        notes.append("the random-write bandwidth was not measured in steady state: the spare is an upper bound")
    say(f"spare: WAF {waf:.2f} -> effective OP {cfg.effective_op:.1%} ({steady})")
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
            text = repr(round(value, 6) if f.name != "spare_factor" else value)
        else:
            text = str(value)
        why = res.sources.get(f.name, "prior" if f.name in PRIORS else "")
        label = _FIELD_NOTES.get(f.name, "")
        comment = f"  # {label + ': ' if label else ''}{why}" if why or label else ""
        if f.name == "blocks_per_plane":
            comment = "  # sized for the capacity fio used"
        lines.append(f"{f.name} = {text}{comment}")
    return "\n".join(lines) + "\n"


def fit_run(run_dir: str | Path, *, name: str | None = None, say=None) -> FitResult:
    """:func:`fit_device` on the ``results.parquet`` of a ``fio run`` folder."""
    from swaptrace.fio import results as resmod

    d = Path(run_dir)
    if not d.is_dir() or not (d / resmod.RESULTS_NAME).is_file():
        raise ConfigError(f"{d}: not a `swaptrace fio run` results folder (no {resmod.RESULTS_NAME})")
    rows, meta = resmod.read_results(d)
    meas = measurements_from_rows(rows, meta)
    res = fit_device(meas, name=name or d.resolve().name, say=say)
    pred = predict(res.config, meas.bw_mb_s)
    res.residuals = {j.name: pred[j] / meas.bw_mb_s[j] - 1.0 for j in meas.bw_mb_s}
    return res


def write_fit(run_dir: str | Path, out: str | Path, *, name: str | None = None, force: bool = False,
              say=None) -> FitResult:
    """Fit the device of ``run_dir`` and write it (atomically) as a TOML device file."""
    from swaptrace.traceio import AtomicPath, check_output_path

    check_output_path(out, force)  # refused before minutes of fitting, not after
    res = fit_run(run_dir, name=name or Path(out).stem, say=say)
    with AtomicPath(out, force=force) as ap:
        ap.tmp.write_text(render_toml(res, run_dir))
    return res
