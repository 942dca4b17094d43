"""Swap designs side by side: one trace and budget, each design's stream, the SSD model on each.

Designs (docs/designs.md):

``linux``
    Today's stream (``emulate --no-ensemble``).
``log``
    Aggregated, log-structured swap-out (:mod:`swaptrace.designs.log`): one
    sequential write per segment, segment cleaning, freed segments discarded.
``log-prefetch``
    ``log`` whose swap-ins read the faulting page's segment neighbours too (an aligned
    window of the segment, 32 KiB by default).
``zoned``
    The log on a zoned SSD (:mod:`swaptrace.ssd.zns`): segments are zones, written
    in ``write_bytes`` appends and reset when empty; the device does no GC.
``zoned@ftl``
    The ``zoned`` stream on the conventional SSD: the zone-sized segments without
    the zoned device (its GC does the rest).
``packed`` / ``packed+log``
    ``linux`` and ``log`` on a trace generated with hot rows packed together
    (``swaptrace generate --row-layout packed``), when one is given.

The thesis measured the two gains the log aims at with synthetic fio jobs:
128 KiB requests 1.75x faster than small ones, sequential writes 4.37x faster
than random ones (:data:`THESIS_GAINS`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import open_trace
from swaptrace.designs.log import LogConfig
from swaptrace.designs.run import DesignRun, run_designs
from swaptrace.emulate import EmulatorConfig, load_profile
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.zns import ZNSConfig, replay_zoned

#: the thesis's synthetic fio gains (docs/designs.md): request size and write order
THESIS_GAINS = {"128 KiB vs 4 KiB requests": 1.75, "sequential vs random writes": 4.37}

#: the table's columns, in order
COLUMNS = ("design", "pages_in", "pages_out", "read_requests", "write_requests", "mean_read_kib", "mean_write_kib",
           "host_write_amplification", "device_waf", "ssd_mb_s", "ssd_steady_mb_s", "device_s", "busy_ms_per_step",
           "step_time_ms", "slowdown", "write_request_gain", "device_time_gain", "prefetch_hit", "prefetch_wasted", "segments_cleaned",
           "fio_steps", "disk_s", "disk_time_gain")


#: the columns fio fills (:func:`add_disk`)
FIO_COLUMNS = ("fio_steps", "disk_s", "disk_time_gain")


@dataclass(frozen=True)
class DesignSet:
    """Which designs to run and their parameters."""

    log: LogConfig = field(default_factory=lambda: LogConfig(segment_bytes=1 << 20, discard=True))
    zones: ZNSConfig = field(default_factory=ZNSConfig)
    #: bytes per append to a zone (the zoned design's write requests)
    zone_write_bytes: int = 1 << 20
    prefetch: bool = True
    #: the part of a segment ``log-prefetch`` reads around a faulting page (None: all of it); 32 KiB is the
    #: window of Linux's readahead at vm.page-cluster 3
    prefetch_window_bytes: int | None = 32 << 10
    zoned: bool = True

    def logs(self) -> dict[str, LogConfig]:
        out = {"log": self.log}
        if self.prefetch:
            out["log-prefetch"] = replace(self.log, swapin="segment", prefetch_window_bytes=self.prefetch_window_bytes)
        if self.zoned:
            z = self.zones
            out["zoned"] = replace(self.log, segment_bytes=z.capacity_bytes, stride_bytes=z.zone_bytes,
                                   write_bytes=min(self.zone_write_bytes, z.capacity_bytes), discard=True)
        return out


@dataclass(frozen=True)
class DesignComparison:
    """What :func:`compare_designs` produced: the table's rows, each design's run and device summary."""

    rows: list[dict[str, Any]]
    runs: dict[str, DesignRun]
    devices: dict[str, dict[str, Any]]
    steps: int
    #: the conventional SSD the streams were replayed on (None: no device model)
    ssd: SSDConfig | None = None
    #: the given compute time per step of the predicted step times (``step_time_ms``, ``slowdown``: filled
    #: by :func:`swaptrace.timing.designs.with_step_times`, which prices each stream with the time model); 0: paging only
    step_compute_us: float = 0.0

    def table(self):
        import pyarrow as pa

        return pa.Table.from_pylist([{k: r.get(k) for k in COLUMNS} for r in self.rows])


def compare_designs(trace: str | os.PathLike, out_dir: str | os.PathLike, *,
                    ssd: SSDConfig | None,
                    designs: DesignSet = DesignSet(), packed_trace: str | os.PathLike | None = None,
                    verify: bool = False, force: bool = False, say: Callable[[str], None] | None = None,
                    progress: Callable[[int], None] | None = None, **options: Any) -> DesignComparison:
    """Run every design on ``trace`` (and ``packed_trace``) at one budget; replay each stream on the SSD model.

    Parameters
    ----------
    trace : path-like
        Access trace (``kind: access``).
    out_dir : path-like
        Folder for ``<design>.swapio.parquet``.
    ssd : SSDConfig or None
        The conventional SSD every non-zoned stream is replayed on, as the pipeline replays its
        stream (:func:`swaptrace.ssd.swapdrive.replay_on_swap_drive`: the swap area a partition at
        the drive's start, the rest holding its background in a sampled steady state); the zoned
        stream runs on a ZNS device with its flash and timings. None: no device model.
    designs : DesignSet
    packed_trace : path-like, optional
        The same model generated with ``--row-layout packed``.
    verify : bool
        Check the log's shadow map and invariants after every chunk.
    options
        ``EmulatorConfig.resolve`` options (``memory_bytes`` or ``memory_fraction``, ...).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = say or (lambda _msg: None)
    logs = designs.logs()
    runs = _run(trace, out, "", logs, verify=verify, force=force, progress=progress, options=options)
    if "zoned" in runs:  # the same stream on the conventional SSD: what the zone-sized segments do alone
        runs["zoned@ftl"] = runs["zoned"]
    if packed_trace is not None:
        say("packed rows: linux and log")
        runs.update(_run(packed_trace, out, "packed", {"log": designs.log}, verify=verify, force=force,
                         progress=progress, options=options))
    devices: dict[str, dict[str, Any]] = {}
    if ssd is not None:
        for name, run in runs.items():
            say(f"SSD model: {name}")
            devices[name] = _device(run, ssd, designs.zones if name == "zoned" else None)
    steps = int(open_trace(trace, kind="access").meta.get("steps") or 1)
    rows = [_row(name, run, devices.get(name), steps) for name, run in runs.items()]
    _gains(rows)
    return DesignComparison(rows, runs, devices, steps, ssd=ssd)


def _run(trace, out: Path, prefix: str, logs: dict[str, LogConfig], *, verify: bool, force: bool, progress,
         options: dict[str, Any]) -> dict[str, DesignRun]:
    meta = open_trace(trace, kind="access").meta
    cfg = EmulatorConfig.resolve(meta, profile=load_profile(None), source=str(trace), **options)

    def name(design: str) -> str:
        if not prefix:
            return design
        return prefix if design == "linux" else f"{prefix}+{design}"

    paths = {d: out / f"{name(d)}.swapio.parquet" for d in ("linux", *logs)}
    res = run_designs(trace, paths, cfg, logs, verify=verify, force=force, progress=progress)
    return {name(d): r for d, r in res.items()}


def _device(run: DesignRun, ssd: SSDConfig, zones: ZNSConfig | None) -> dict[str, Any]:
    if zones is not None:
        return replay_zoned(run.path, ssd, zones)
    from swaptrace.ssd.swapdrive import replay_on_swap_drive

    # the pipeline's drive state: a real drive's GC from the first write, so designs that write small random
    # requests pay for it as they would in service
    return dict(replay_on_swap_drive(run.path, ssd).summary)


def _row(name: str, run: DesignRun, dev: dict[str, Any] | None, steps: int) -> dict[str, Any]:
    s = run.summary
    hist = s["request_size_hist"]

    def mean_kib(op: str) -> float | None:
        h = {int(k): v for k, v in hist[op].items()}
        n = sum(h.values())
        return sum(k * v for k, v in h.items()) / n / 1024 if n else None

    row = {"design": name, "pages_in": s["pages_in"], "pages_out": s["pages_out"],
           "read_requests": s["requests"]["read"], "write_requests": s["requests"]["write"],
           "mean_read_kib": mean_kib("read"), "mean_write_kib": mean_kib("write"),
           "host_write_amplification": 1.0, "hist": hist}
    if run.log is not None:
        c = run.log
        row.update(host_write_amplification=c.host_write_amplification, prefetch_hit=c.prefetch_hit,
                   prefetch_wasted=c.prefetch_wasted, segments_cleaned=c.segments_cleaned)
    if dev:
        t = dev.get("simulated_time_us")
        steady = dev.get("steady_state") or {}
        row.update(device_waf=dev.get("waf"), ssd_mb_s=dev.get("throughput_mb_s"),
                   ssd_steady_mb_s=steady.get("bandwidth_mb_s") if steady else dev.get("throughput_mb_s"),
                   device_s=t / 1e6 if t else None, busy_ms_per_step=t / 1e3 / steps if t else None)
    return row


def _gains(rows: list[dict[str, Any]]) -> None:
    """Each design's gain over ``linux``: fewer write requests, less device time."""
    base = next((r for r in rows if r["design"] == "linux"), None)
    if base is None:
        return
    for r in rows:
        if r["write_requests"]:
            r["write_request_gain"] = base["write_requests"] / r["write_requests"]
        if r.get("device_s") and base.get("device_s"):
            r["device_time_gain"] = base["device_s"] / r["device_s"]


def add_disk(cmp: DesignComparison, disk: dict[str, dict[str, Any]]) -> None:
    """Put fio's measured replay times (:func:`swaptrace.designs.ondisk.replay_on_disk`) into the rows."""
    linux = disk.get("linux", {})
    # an incomplete replay stopped at the runtime cap: its time is a lower bound, no base for a gain
    base = linux.get("disk_s") if linux.get("complete") else None
    for r in cmp.rows:
        d = disk.get("zoned" if r["design"] == "zoned@ftl" else r["design"])  # the same stream
        if d is None:
            continue
        r.update(fio_steps=d["steps"], disk_s=d["disk_s"] if d["complete"] else None,
                 disk_s_runs=d.get("disk_s_runs"))
        if base and r["disk_s"]:
            r["disk_time_gain"] = base / r["disk_s"]


def markdown(cmp: DesignComparison, *, title: str = "Linux swap vs the fixes") -> str:
    """The table as Markdown, with the thesis's synthetic gains beside the measured ones."""
    fmt = {"pages_in": "{:,}", "pages_out": "{:,}", "read_requests": "{:,}", "write_requests": "{:,}",
           "mean_read_kib": "{:.1f}", "mean_write_kib": "{:.1f}", "host_write_amplification": "{:.2f}",
           "device_waf": "{:.2f}", "ssd_mb_s": "{:.0f}", "ssd_steady_mb_s": "{:.0f}", "device_s": "{:.1f}",
           "busy_ms_per_step": "{:.1f}", "step_time_ms": "{:.1f}", "slowdown": "{:.2f}x", "write_request_gain": "{:.1f}x", "device_time_gain": "{:.2f}x",
           "fio_steps": "{}", "disk_s": "{:.2f}", "disk_time_gain": "{:.2f}x"}
    measured = any(r.get("fio_steps") for r in cmp.rows)
    cols = [c for c in COLUMNS if (c in fmt or c == "design") and (measured or c not in FIO_COLUMNS)]
    lines = [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in cmp.rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("-" if v is None or (isinstance(v, float) and np.isnan(v)) else
                         (fmt[c].format(v) if c in fmt else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    if measured:
        lines += ["", "fio_steps, disk_s: fio replayed the requests of each design's first fio_steps steps as fast as "
                  "this machine's disk allows (same file target, size and runtime cap); disk_s is its runtime "
                  "(- if the runtime cap cut the replay short)."]
    if any(r.get("step_time_ms") is not None for r in cmp.rows):
        given = (f"with {cmp.step_compute_us:g} us of compute per step; slowdown: step time over that compute time"
                 if cmp.step_compute_us else "paging time alone (no compute time given, so no slowdown)")
        lines += ["", "step_time_ms: the time model's mean step time on the SSD model at each design's device WAF, "
                  f"{given}. busy_ms_per_step: the SSD model's busy time per step."]
    lines += ["", "The thesis's synthetic fio gains, for comparison: " +
              "; ".join(f"{k} {v:.2f}x" for k, v in THESIS_GAINS.items()) + "."]
    return "\n".join(lines) + "\n"
