"""The summary and metadata of a captured program (``capture -- CMD``): phases, memory by kind, warnings.

Kept apart from :mod:`swaptrace.capture.command` (which runs the program) so the arithmetic can be
tested without root: everything here works on a finished run's numbers.

Phases: the **start-up** is from the program's start to its first ``swaptrace step N`` marker, the
**training** from that marker to its exit; a program without markers has one phase, ``run``. The
**slowdown** is the limited run's training time over the unlimited run's when both have markers (the
start-up, mostly imports and set-up, is not what swapping a model's tables slows down), else the ratio
of whole-run wall times; both are recorded.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from swaptrace.capture.contract import STAT_KEYS, Description, Recording
from swaptrace.capture.memwatch import phase_peaks, reading_after
from swaptrace.compare import summarize_requests

#: warn when the page cache charged to the limited group reaches this share of its limit
FILE_CACHE_WARN_SHARE = 0.05


def step_walls_us(marks: list[tuple[int, int]], t_end_ns: int) -> list[float]:
    """Wall time of each marked step in microseconds: from its marker to the next (the last: to ``t_end_ns``)."""
    times = [t for t, _ in marks] + [t_end_ns]
    return [(b - a) / 1e3 for a, b in zip(times, times[1:], strict=False)]


def run_record(run, sample_interval_s: float) -> dict[str, Any] | None:
    """One run's times, peaks by kind and phase, and counters (``kernel.limited`` / ``kernel.unlimited``)."""
    if run is None:
        return None
    first = run.marks[0][0] if run.marks else None
    stat = run.cgroup_stat
    return {
        "exit_status": run.returncode,
        "wall_s": (run.t_exit_ns - run.t_spawn_ns) / 1e9,
        "startup_s": None if first is None else (first - run.t_spawn_ns) / 1e9,
        "training_s": None if first is None else (run.t_exit_ns - first) / 1e9,
        "marks": len(run.marks),
        "step_numbers": [n for _, n in run.marks],
        "step_wall_us": step_walls_us(run.marks, run.t_exit_ns) if run.marks else None,
        "limit_bytes": run.limit_bytes,
        "peak_bytes": run.peak_bytes,
        "peak": phase_peaks(run.samples, first),
        "startup_end": reading_after(run.samples, first),
        "samples": len(run.samples),
        "sample_interval_s": sample_interval_s,
        "major_faults": stat.get("total_pgmajfault", stat.get("pgmajfault")),
        "oom_kills": run.oom_kills,
        **run.oom,
        "vmstat_delta": run.vmstat_delta,
        "cgroup_stat": {k: v for k, v in stat.items() if k in STAT_KEYS},
        "referenced": run.referenced,
        "rewarm": run.rewarm,
        "probe_errors": run.sampler_errors,
    }


def slowdowns(limited: dict[str, Any], free: dict[str, Any] | None) -> dict[str, float | None]:
    """``slowdown`` (training ratio when both runs have markers, else wall), ``slowdown_wall``, ``slowdown_training``."""
    if free is None:
        return {"slowdown": None, "slowdown_wall": None, "slowdown_training": None}
    wall = limited["wall_s"] / free["wall_s"] if free["wall_s"] > 0 else None
    training = None
    if limited["training_s"] is not None and free["training_s"]:
        training = limited["training_s"] / free["training_s"]
    return {"slowdown": training if training is not None else wall, "slowdown_wall": wall,
            "slowdown_training": training}


def page_cache_record(limited: dict[str, Any], free: dict[str, Any] | None, limit: int) -> dict[str, Any]:
    """How much page cache the limited group held (charged to it: reads it made of uncached files)."""
    peak_file = (limited["peak"]["run"] or {}).get("file")
    at_end = (limited["startup_end"] or {}).get("file")
    return {
        "limited_file_startup_end_bytes": at_end,
        "limited_file_peak_bytes": peak_file,
        "limited_file_peak_share_of_limit": None if peak_file is None or not limit else peak_file / limit,
        "unlimited_file_peak_bytes": None if free is None else (free["peak"]["run"] or {}).get("file"),
    }


def warnings_for(kernel: dict[str, Any]) -> list[str]:
    """Lines the command prints (and ``--json`` carries) about what may have skewed the capture."""
    out = []
    pc = kernel["page_cache"]
    share = pc["limited_file_peak_share_of_limit"]
    if share is not None and share >= FILE_CACHE_WARN_SHARE:
        out.append(f"the limited group was charged {pc['limited_file_peak_bytes'] / 2**20:.1f} MiB of page cache at "
                   f"its peak ({100 * share:.0f} % of the limit): files the program read that were not cached, so "
                   "they took room from its memory")
    for line in kernel["reclaim_agents"]["active"]:
        out.append(f"machine-wide reclaim is active: {line}")
    for tag in ("limited", "unlimited"):
        run = kernel.get(tag)
        if run and run["oom_kills"]:
            out.append(f"the OOM killer killed {run['oom_kills']} process(es) of the program in the {tag} run")
        if run and run["probe_errors"]:
            out.append(f"memory probe errors in the {tag} run: {'; '.join(run['probe_errors'])}")
    return out


def _phase_requests(stream, rows: np.ndarray, page_bytes: int) -> dict[str, Any]:
    return summarize_requests(stream.op[rows], stream.length[rows], page_bytes)


def stream_steps(stream, marks: list[tuple[int, int]], window_s: float) -> int:
    """Steps the stream covers: start-up plus marked steps (offset by one), or the time windows."""
    stored = int(stream.step.max()) + 1 if len(stream.step) else 0
    if marks:
        return max(stored, max(n for _, n in marks) + 2)
    return max(stored, 1, math.ceil(stream.duration_us / (window_s * 1e6)))


def describe_command(child, free, run, recording: Recording) -> Description:
    """The :class:`~swaptrace.capture.contract.Description` of a command capture (see the module docstring).

    ``child`` is the :class:`~swaptrace.capture.command.CommandChild` after its runs, ``free`` and
    ``run`` its unlimited (or None) and limited :class:`~swaptrace.capture.command.ProgramRun`.
    """
    stream, req = recording.stream, recording.requests
    limited = run_record(run, child.sample_interval_s)
    unlimited = run_record(free, child.sample_interval_s)
    marked = bool(run.marks)
    major = int(limited["major_faults"] or 0)
    summary = {"faults": major, **req, "pswpin": run.vmstat_delta.get("pswpin", 0),
               "pswpout": run.vmstat_delta.get("pswpout", 0), "major_faults": major,
               "startup": None, "training": None}
    if marked:
        summary["startup"] = _phase_requests(stream, stream.step == 0, child.page_bytes)
        summary["training"] = _phase_requests(stream, stream.step > 0, child.page_bytes)
    kernel = {
        "command": child.argv,
        "limit_bytes": child.limit,
        "limited": limited,
        "unlimited": unlimited,
        **slowdowns(limited, unlimited),
        "step_wall_us": limited["step_wall_us"],
        "loop_stat_delta": recording.loop_delta,
        "requests_missing_vs_device": recording.missing,
        "reclaim_agents": child.agents,
        "page_cache": page_cache_record(limited, unlimited, child.limit),
    }
    kernel["warnings"] = warnings_for(kernel)
    meta = {"trace": None, "command": child.argv, "step_offset": 1 if marked else 0,
            "startup_step": 0 if marked else None, "window_s": None if marked else child.window_s}
    params = {"memory_bytes": child.memory_bytes, "memory_fraction": child.memory_fraction, "window_s": child.window_s,
              "sample_interval_s": child.sample_interval_s}
    return Description(
        summary=summary, kernel=kernel, meta=meta, params=params,
        steps=stream_steps(stream, run.marks, child.window_s), first_step=0, memory_bytes=child.limit,
        baseline_bytes=int((free.peak_bytes or 0) if free is not None else 0), limit_bytes=child.limit,
        slowdown=kernel["slowdown"], major_faults=major,
    )
