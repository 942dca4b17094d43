"""Each design's stream replayed by fio on this machine's disk: the gain measured, not only modelled.

Every design's replay covers the same training work: the requests of the first
``K`` steps, ``K`` the most steps whose requests fit ``max_rows`` in every
stream. Each is replayed as fast as the disk allows (fio's ``replay_no_stall``
job, :mod:`swaptrace.fio.jobs`) on the same file target, with the same size and
runtime cap; the disk time of those ``K`` steps is the comparison.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import open_trace
from swaptrace.errors import ConfigError

JOB = "replay_no_stall"


def check_file_target(target: str | os.PathLike) -> None:
    """Refuse a block device: the designs' replays write over their target."""
    p = Path(target)
    if str(p).startswith("/dev/") or p.is_block_device():
        raise ConfigError(f"--fio-target {target}: swaptrace designs replays on a file target only (e.g. /tmp/swaptrace-fio.dat)")


def rows_per_step(stream: str | os.PathLike) -> tuple[int, np.ndarray]:
    """``(first_step, requests in each step)`` of a swapio stream."""
    tf = open_trace(stream, kind="swapio")
    first = int(tf.meta.get("first_step", 0))
    counts = np.zeros(int(tf.meta.get("steps") or 1), np.int64)
    for b in tf.iter_batches(["step"]):
        s = b["step"].astype(np.int64) - first
        counts += np.bincount(s, minlength=counts.size)[: counts.size]
    return first, counts


def common_steps(streams: dict[str, str | os.PathLike], max_rows: int) -> tuple[int, dict[str, int]]:
    """The most leading steps ``K`` whose requests fit ``max_rows`` in every stream, and each stream's rows in them."""
    cums = {name: np.cumsum(rows_per_step(p)[1]) for name, p in streams.items()}
    k = min(int(np.searchsorted(c, max_rows, side="right")) for c in cums.values())
    if k == 0:
        raise ConfigError(f"a stream issues more than {max_rows} requests in its first step; raise --fio-requests")
    return k, {name: int(c[k - 1]) for name, c in cums.items()}


def replay_on_disk(streams: dict[str, str | os.PathLike], out_dir: str | os.PathLike, *, target: str | os.PathLike,
                   size_bytes: int, runtime_s: int = 3, max_rows: int = 100_000, repeats: int = 1,
                   say: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    """Replay the first ``K`` steps of each design's stream with fio on ``target`` (a file, never a device).

    The designs take turns, ``repeats`` rounds (a shared disk drifts: interleaving spreads the drift over
    every design). Returns, by design: ``steps`` (K), ``requests``, ``disk_s`` (the median of fio's
    runtimes of the replay), ``disk_s_runs``, ``read_mb_s``, ``write_mb_s`` (of the median run) and
    ``complete`` (every request was replayed within the runtime cap in every run).
    """
    if repeats < 1:
        raise ConfigError(f"--fio-repeats must be at least 1, got {repeats}")
    from swaptrace.fio.jobs import build_jobs
    from swaptrace.fio.runner import run_jobs

    check_file_target(target)
    k, rows = common_steps(streams, max_rows)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in streams}
    for rnd in range(repeats):
        for name, stream in streams.items():
            jobs = Path(out_dir) / "fio" / name.replace("@", "-at-").replace("+", "-")
            say(f"fio: {name}, first {k} steps ({rows[name]:,} requests), run {rnd + 1} of {repeats}")
            if rnd == 0:
                build_jobs(stream, jobs, size_bytes=size_bytes, max_requests=rows[name], force=True)
            res = run_jobs(jobs, target, size_bytes=size_bytes, runtime_s=runtime_s, only=[JOB],
                           out_dir=jobs / f"run-{rnd + 1}", force=True, echo=say)
            runs[name].append(_measure([r for r in res.rows if r["job"] == JOB]))
    out: dict[str, dict[str, Any]] = {}
    for name, measured in runs.items():
        times = [m["disk_s"] for m in measured]
        median = sorted(measured, key=lambda m: m["disk_s"])[(len(measured) - 1) // 2]
        out[name] = {"steps": k, "requests": rows[name], **median, "disk_s": float(np.median(times)),
                     "disk_s_runs": times, "complete": all(m["complete"] for m in measured)}
    return out


def _measure(mine: list[dict[str, Any]]) -> dict[str, Any]:
    """One replay's runtime, bandwidths and whether fio issued every request."""
    ios = sum(int(r["ios"]) for r in mine)
    expected = sum(int(r["expected_ios"] or 0) for r in mine)
    by_dir = {r["direction"]: r for r in mine}
    return {"disk_s": max((float(r["runtime_ms"]) for r in mine), default=0.0) / 1e3,
            "read_mb_s": float(by_dir["read"]["bw_bytes"]) / 1e6 if "read" in by_dir else None,
            "write_mb_s": float(by_dir["write"]["bw_bytes"]) / 1e6 if "write" in by_dir else None,
            "complete": ios >= expected}
