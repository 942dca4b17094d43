"""The fit checked on devices whose parameters are known: simulate a lab run, fit it, predict it back.

For a known device the model runs the lab jobs of :data:`swaptrace.ssd.labjobs.LAB_JOBS` and writes
them as a ``fio run`` folder (``results.parquet`` in the ``fio-results`` format, the same metadata a
real run has), so :func:`swaptrace.ssd.fit.device.fit_run` reads it exactly as it reads a drive's. The fitted
device then runs the same jobs; the check is that every bandwidth comes back within
:data:`TOLERANCE`. The known devices are the shipped presets (reduced so they simulate in seconds,
:func:`preset_device`) and
devices drawn at random from :data:`HELD_OUT_RANGES` -- none of which the fit's priors or grids were
tuned on.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core import traceio
from swaptrace.errors import ConfigError
from swaptrace.fio import results as resmod
from swaptrace.ssd.config import DEVICES, SSDConfig, load_device
from swaptrace.ssd.labjobs import LAB_JOBS, TWIN_MAX_BYTES, run_job, with_effective_spare

#: relative bandwidth error allowed for every job of the round trip (the issue's criterion)
TOLERANCE = 0.10
#: ranges the held-out devices are drawn from (uniform; log-uniform for rates and times)
HELD_OUT_RANGES = {
    "channels": (1, 2, 4, 8), "dies_per_channel": (1, 2, 3, 4, 6, 8), "page_bytes": (4096, 8192, 16384, 32768),
    "pages_per_block": (32, 64, 128, 256), "read_us": (20.0, 100.0), "program_us": (150.0, 1500.0),
    "erase_us": (1000.0, 4000.0), "channel_mb_s": (200.0, 1200.0), "host_mb_s": (800.0, 4000.0),
    "op": (0.07, 0.40),
}


def held_out_device(seed: int, user_bytes: int = 128 << 20) -> SSDConfig:
    """One random device from :data:`HELD_OUT_RANGES` (seeded), ``user_bytes`` of user capacity."""
    rng = np.random.default_rng(seed)
    r = HELD_OUT_RANGES

    def loguni(key):
        lo, hi = r[key]
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))

    cfg = SSDConfig(
        name=f"held-out-{seed}", channels=int(rng.choice(r["channels"])),
        dies_per_channel=int(rng.choice(r["dies_per_channel"])), planes=1, blocks_per_plane=64,
        pages_per_block=int(rng.choice(r["pages_per_block"])), page_bytes=int(rng.choice(r["page_bytes"])),
        read_us=loguni("read_us"), program_us=loguni("program_us"), erase_us=loguni("erase_us"),
        channel_mb_s=loguni("channel_mb_s"), host_mb_s=loguni("host_mb_s"), spare_factor=0.2,
        gc_free_fraction=0.0, write_buffer_bytes=16 << 20,
    )
    op = float(rng.uniform(*r["op"]))
    row = cfg.dies * cfg.pages_per_block * cfg.page_bytes
    blocks = max(-(-int(user_bytes * (1 + op)) // row), 16)
    return with_effective_spare(cfg, op / (1 + op), blocks_per_plane=blocks)  # op is the effective over-provisioning


def preset_device(name: str, user_bytes: int = TWIN_MAX_BYTES, min_blocks_per_die: int = 64) -> SSDConfig:
    """A shipped preset reduced to ``user_bytes`` of user capacity, so its lab run simulates in seconds.

    Everything a lab run measures is kept -- channels, dies, planes, page, tR, tPROG, channel and link
    rates, spare factor, GC reserve, write buffer. At a few hundred MiB a preset's multi-MiB blocks
    would leave each die a handful of blocks (GC's spare then moves in steps of a tenth of a die), so
    pages per block are halved until a die holds ``min_blocks_per_die`` blocks, and tERASE with them
    (the erase cost per written unit is the preset's). Desnoyers' greedy WAF grows by a few per cent
    with the block size at a given spare (docs/ssd.md, Validation), the one effect this changes.
    A preset already that small is taken as it is.
    """
    cfg = DEVICES[name]
    if cfg.user_bytes <= user_bytes:
        return cfg
    ppb = cfg.pages_per_block
    while ppb > 4 and user_bytes / (cfg.dies * ppb * cfg.page_bytes) < min_blocks_per_die:  # a die: planes x bpp blocks
        ppb //= 2
    while True:
        try:
            return load_device(name, {"pages_per_block": ppb, "erase_us": cfg.erase_us * ppb / cfg.pages_per_block,
                                      "name": f"{name}-{user_bytes >> 20}MiB"}, capacity_bytes=user_bytes)
        except ConfigError:  # the spare is too few blocks for GC's reserve: smaller, more blocks
            if ppb <= 2:
                raise
            ppb //= 2


def lab_rows(cfg: SSDConfig, jobs=LAB_JOBS, seed: int = 0) -> tuple[list[dict], dict[str, Any]]:
    """``fio-results`` rows of the lab jobs simulated on ``cfg``, and the steady-state verdicts."""
    rows, steady = [], {}
    for job in jobs:
        out = run_job(cfg, job, seed=seed)
        direction = "read" if job.kind == "read" else "write"
        lat_us = job.depth / out["iops"] * 1e6
        rows.append({
            "instance": job.name, "job": job.name, "group": "steady" if job.kind == "steady_write" else "sweep",
            "kind": "steady" if job.kind == "steady_write" else "sweep", "direction": direction,
            "request_bytes": job.size_bytes, "pattern": "sequential" if job.kind == "seq_write" else "random",
            "io_bytes": 0, "ios": 0, "bw_bytes": out["bw_mb_s"] * 1e6, "iops": out["iops"],
            "clat_p50_us": lat_us, "clat_p99_us": math.nan, "clat_p999_us": math.nan, "runtime_ms": math.nan,
            "trace_duration_ms": math.nan, "expected_ios": math.nan,
        })
        if job.kind == "steady_write":
            steady[job.name] = {"steady": bool(out["steady"]), "source": "SSD model (simulated lab run)"}
    return rows, steady


def write_lab_run(cfg: SSDConfig, out_dir: str | os.PathLike, *, seed: int = 0) -> Path:
    """A ``fio run`` folder holding the simulated lab run of ``cfg`` (what ``ssd fit`` reads)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, steady = lab_rows(cfg, seed=seed)
    meta = {"page_bytes": cfg.map_bytes, "stream": None, "ratios": {},
            "run": {"target": f"SSD model: {cfg.name}", "target_is_device": False, "size_bytes": cfg.user_bytes,
                    "engine": {"ioengine": "psync", "iodepth": 1}, "fio": "none (simulated)",
                    "preconditioning": {"steady": steady}, "device": cfg.describe()}}
    with traceio.TraceWriter(out / resmod.RESULTS_NAME, "fio-results", meta, force=True) as w:
        w.write_table(resmod.rows_to_table(rows))
    return out


def round_trip(cfg: SSDConfig, work_dir: str | os.PathLike, *, seed: int = 0) -> dict[str, Any]:
    """Simulate ``cfg``'s lab run, fit it, and compare the fitted device's bandwidths with the known ones.

    Returns ``{"device", "fitted", "errors": {job: relative error}, "max_error", "ok", "known", "sources"}``.
    """
    from swaptrace.ssd.fit.device import fit_run

    run = write_lab_run(cfg, Path(work_dir) / cfg.name, seed=seed)
    res = fit_run(run, name=f"{cfg.name}-fitted")
    errors = res.residuals
    worst = max(abs(e) for e in errors.values())
    keys = ("channels", "dies_per_channel", "page_bytes", "read_us", "program_us", "channel_mb_s", "host_mb_s")
    return {"device": cfg.name, "known": {**{k: getattr(cfg, k) for k in keys}, "program_unit": cfg.program_units
                                          * cfg.map_bytes, "effective_op": cfg.effective_op},
            "fitted": {**{k: getattr(res.config, k) for k in keys}, "effective_op": res.config.effective_op},
            "errors": errors, "max_error": worst, "ok": worst <= TOLERANCE, "sources": res.sources,
            "spare_bound": " (lower bound)" if "LOWER BOUND" in res.sources.get("spare_factor", "") else ""}


def preset_names() -> list[str]:
    """Presets of :data:`swaptrace.ssd.config.DEVICES` the round trip runs on."""
    return list(DEVICES)
