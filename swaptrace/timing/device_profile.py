"""A measured device profile from a ``fio run`` folder: mean latency by request size and queue depth.

``swaptrace fio profile RUN_DIR -o disk.toml`` reads the run's ``results.parquet`` and fio's own JSON
outputs (``raw/NAME.json``) and writes the mean latency of random reads and of random writes of each
fixed size at each queue depth -- the device table of the time model (:mod:`swaptrace.timing.model`),
which reads it back with :func:`swaptrace.timing.model.load_device_timing`.

Where the numbers come from: the request-size sweep (``sweep_{read,write}_SIZE``, the folder's engine,
depth 1 with ``psync``) and the profile jobs (``qd_{read,write}_SIZE_qdN``, ``libaio`` at depth N; see
:mod:`swaptrace.fio.jobs`). A cell's value is fio's mean total latency (``lat_ns.mean``: submission to
completion) of that job and direction; without it, ``depth / IOPS`` (Little's law). A size measured at
depth 1 but not at a deeper depth gets its depth-1 latency scaled by the depth's ratio at the nearest
size that was measured there (the disk's queueing is assumed to grow alike for nearby sizes).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.fio import results as resmod
from swaptrace.fio.busy import measured_job

#: engines that keep one request in flight whatever ``iodepth`` says (fio's HOWTO, "ioengine")
SYNC_ENGINES = {"psync", "sync", "pvsync", "pvsync2", "vsync"}


def _job_depth_and_latency(raw_json: Path, direction: str) -> tuple[int | None, float | None]:
    """Queue depth and mean latency (us) of ``direction`` in one fio JSON output, if it says."""
    if not raw_json.is_file():
        return None, None
    data = resmod.load_fio_json(raw_json)  # a damaged output is an error, not a cell quietly left out
    try:
        j = measured_job(data.get("jobs") or [])
        if j is None:
            return None, None
        opts = {**(data.get("global options") or {}), **(j.get("job options") or {})}
        depth = None
        if "iodepth" in opts or "ioengine" in opts:
            depth = 1 if opts.get("ioengine", "psync") in SYNC_ENGINES else int(opts.get("iodepth", 1))
        lat = ((j.get(direction) or {}).get("lat_ns") or {}).get("mean")
        lat_us = float(lat) / 1e3 if lat else None
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        raise TraceFileError(f"{raw_json}: fio's JSON output has values of the wrong type (iodepth, lat_ns); "
                             "run the job again") from None
    if (depth is not None and not 1 <= depth <= 65535) or (lat_us is not None and not 0 < lat_us < 3.6e9):
        raise TraceFileError(f"{raw_json}: fio's JSON output has an iodepth or mean latency out of range")
    return depth, lat_us


def measure_points(run_dir: str | os.PathLike) -> dict[tuple[str, int, int], float]:
    """``{(direction, request_bytes, depth): mean latency us}`` of a run's fixed-size random jobs.

    Raises
    ------
    ConfigError
        No results in the folder (not a ``fio run`` folder, or the run did not finish).
    """
    d = Path(run_dir)
    if not d.is_dir():
        raise ConfigError(f"{d}: not a folder; give a `swaptrace fio run` results folder")
    if not (d / resmod.RESULTS_NAME).is_file():
        raise ConfigError(f"{d}: no fio results ({resmod.RESULTS_NAME}); run `swaptrace fio run JOBS -o {d}` first")
    rows, _meta = resmod.read_results(d)
    points: dict[tuple[str, int, int], float] = {}
    for r in rows:
        size = int(r["request_bytes"])
        if r["kind"] != "sweep" or size <= 0 or r["pattern"] != "random" or r["ios"] <= 0 or r["iops"] <= 0:
            continue
        depth, lat = _job_depth_and_latency(d / "raw" / f"{r['instance']}.json", r["direction"])
        if depth is None:
            depth = 1 if r["group"] == "sweep" else None
        if depth is None:
            continue
        if lat is None:
            lat = depth / float(r["iops"]) * 1e6
        points[(str(r["direction"]), size, depth)] = lat
    return points


def build_profile(run_dir: str | os.PathLike, name: str | None = None, *, reads_from: str | os.PathLike | None = None):
    """The device profile (:class:`swaptrace.timing.model.DeviceTiming`) of a ``fio run`` folder.

    ``reads_from``: another run folder of the same jobs whose read table replaces this run's -- typically one
    measured with ``fio run --busy-cpus`` (:mod:`swaptrace.fio.busy`): a faulting thread waits for its read
    *and* for a CPU to finish it on, while the device's time for the writes in its backlog is the device's
    own. The profile records how many CPUs were kept busy for each table (``read_busy_cpus``,
    ``write_busy_cpus``).

    Raises
    ------
    ConfigError
        No results, no size measured at depth 1 for both reads and writes, or a ``reads_from`` run that
        measured other sizes or depths.
    """
    from swaptrace.timing.model import DeviceTiming

    d = Path(run_dir).resolve()
    points = measure_points(d)
    sizes = sorted({s for (op, s, q) in points if q == 1 and op == "read"}
                   & {s for (op, s, q) in points if q == 1 and op == "write"})
    if not sizes:
        raise ConfigError(f"{d}: the run has no random read and write jobs of fixed size at depth 1 "
                          "(the sweep_* jobs of `swaptrace fio jobs`)")
    depths = sorted({q for (_, s, q) in points if s in sizes})
    tables = {}
    for op in ("read", "write"):
        t = np.full((len(sizes), len(depths)), np.nan)
        for i, s in enumerate(sizes):
            for k, q in enumerate(depths):
                t[i, k] = points.get((op, s, q), np.nan)
        for k, q in enumerate(depths):  # fill a missing depth from the nearest size measured at it
            have = [i for i in range(len(sizes)) if np.isfinite(t[i, k])]
            for i in range(len(sizes)):
                if np.isfinite(t[i, k]):
                    continue
                if have:
                    near = min(have, key=lambda h, i=i: abs(np.log(sizes[h]) - np.log(sizes[i])))
                    t[i, k] = t[i, 0] * t[near, k] / t[near, 0]
                else:  # no size at this depth: no parallelism assumed
                    t[i, k] = t[i, 0] * q
        # a deeper queue never gives a request less latency than a shallower one (noise aside)
        t = np.maximum.accumulate(t, axis=1)
        tables[op] = tuple(tuple(float(v) for v in row) for row in t)
    run = resmod.read_results(d)[1].get("run") or {}
    notes = {"run_dir": str(d), "target": str(run.get("target", "")), "fio": str(run.get("fio", "")),
             "measured_points": len(points), "read_busy_cpus": _busy_cpus(run), "write_busy_cpus": _busy_cpus(run)}
    if reads_from is not None:
        other = build_profile(reads_from)
        if (other.sizes_bytes, other.depths) != (tuple(sizes), tuple(depths)):
            raise ConfigError(f"--reads-from {reads_from}: it measured sizes {list(other.sizes_bytes)} at depths "
                              f"{list(other.depths)}, {d} sizes {sizes} at depths {depths}; run the same jobs in both")
        tables["read"] = other.read_latency_us
        notes.update(reads_run_dir=other.notes["run_dir"], read_busy_cpus=other.notes["read_busy_cpus"])
    return DeviceTiming(
        name=name or d.name,
        source="fio",
        sizes_bytes=tuple(sizes),
        depths=tuple(depths),
        read_latency_us=tables["read"],
        write_latency_us=tables["write"],
        notes=notes,
    )


def _busy_cpus(run: dict) -> int:
    """How many CPUs a run kept busy beside its measurements (``fio run --busy-cpus``; 0 for none)."""
    return int((run.get("busy_cpus") or {}).get("count", 0))


def write_profile(run_dir: str | os.PathLike, out: str | os.PathLike, *, name: str | None = None,
                  force: bool = False, reads_from: str | os.PathLike | None = None):
    """Build the profile of ``run_dir`` (reads from ``reads_from`` if given) and write it as TOML to ``out``
    (atomically); returns the profile."""
    from swaptrace.core.traceio import AtomicPath

    prof = build_profile(run_dir, name, reads_from=reads_from)
    with AtomicPath(out, force=force) as ap:
        ap.tmp.write_text(prof.to_toml())
    return prof


def describe(prof) -> str:
    """A plain-text table of a profile (mean latency in us, one line per size)."""
    head = "size      " + "".join(f"{'R qd' + str(q):>10}" for q in prof.depths) + "".join(
        f"{'W qd' + str(q):>10}" for q in prof.depths)
    lines = [head]
    for i, s in enumerate(prof.sizes_bytes):
        label = f"{s >> 10}k" if s < 1 << 20 else f"{s >> 20}m"
        lines.append(f"{label:<10}" + "".join(f"{v:>10.1f}" for v in prof.read_latency_us[i])
                     + "".join(f"{v:>10.1f}" for v in prof.write_latency_us[i]))
    return "\n".join(lines)

