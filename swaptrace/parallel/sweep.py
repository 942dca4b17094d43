"""Parameter sweeps on Dask: traces x DRAM budgets x policies x devices, one task per point.

A point is one emulation (:func:`swaptrace.emulate.emulate`) of one access
trace at one budget with one policy, whose swap stream is then replayed on
one SSD model (:func:`swaptrace.ssd.run.replay`, sized as the pipeline sizes
it). Points are independent, so each is a Dask task; a preset's trace is
generated once, by its own task, into ``<out>/_inputs/`` and the points that
use it wait for it.

The results are one Parquet dataset, the folder ``out``: one single-row file
``point-<key>.parquet`` per finished point, where ``key`` hashes the point's
parameters. Each is written to a hidden temporary name and renamed when
complete, so a point is either wholly there or absent; a rerun skips the
points whose file exists (resume after an interruption or a lost worker),
and pyarrow, DuckDB or Polars read the folder as one table (they skip the
``_`` and ``.`` names: ``_sweep.json``, ``_inputs/``, temporaries). Every
worker must see ``out`` and the traces at the same path (a shared
filesystem on a real cluster; docs/sweep.md).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from swaptrace.core.outputs import json_marker
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.traceio import AtomicPath, TraceWriter, check_output_folder, open_trace, register_kind
from swaptrace.parallel.cluster import connect, require_dask, single_threaded
from swaptrace.parallel.sweep_spec import (
    SweepPoint,
    SweepSpec,
)

SWEEP_POINT_SCHEMA = pa.schema([
    ("key", pa.string()), ("trace", pa.string()), ("preset", pa.string()), ("steps", pa.int64()),
    ("seed", pa.int64()), ("memory_bytes", pa.int64()), ("memory_fraction", pa.float64()),
    ("budget_pages", pa.int64()), ("policy", pa.string()), ("device", pa.string()), ("design", pa.string()),
    ("accesses", pa.int64()), ("faults", pa.int64()), ("pages_in", pa.int64()), ("pages_out", pa.int64()),
    ("read_requests", pa.int64()), ("write_requests", pa.int64()), ("bytes_read", pa.int64()),
    ("bytes_written", pa.int64()), ("waf", pa.float64()), ("throughput_mb_s", pa.float64()),
    ("read_mb_s", pa.float64()), ("write_mb_s", pa.float64()),
    # mean predicted step time (swaptrace.timing.model) at the point's given compute time per step
    ("step_compute_us", pa.float64()), ("step_time_us", pa.float64()),
    ("emulate_s", pa.float64()), ("ssd_s", pa.float64()), ("worker", pa.string()),
])
register_kind("sweep-point", SWEEP_POINT_SCHEMA)

SIDECAR = "_sweep.json"
INPUTS = "_inputs"



# --- the tasks (run on the workers) ----------------------------------------------------------------


def _generate_input(preset: str, steps: int | None, seed: int, path: str) -> str:
    """Generate a preset's trace for the sweep unless a finished one is already there."""
    from swaptrace.workload.generate import generate_trace

    if not Path(path).exists():
        with single_threaded():
            generate_trace(preset, path, steps=steps, seed=seed, force=True)
    return path


def point_step_time_us(stream: str | os.PathLike, cfg, step_compute_us: float) -> float:
    """Mean predicted step time (us) of a point's stream on its drive, from :mod:`swaptrace.timing.model`.

    The costs are given, not measured, so a point's row does not depend on the
    worker that ran it: every step computes ``step_compute_us`` (0: pure paging
    time), the kernel CPU costs are :class:`~swaptrace.timing.model.CpuCosts`'
    defaults, and the device is the SSD model's latency table
    (:func:`~swaptrace.timing.model.device_from_ssd`) of the drive the stream was replayed on.
    """
    from swaptrace.timing import model as timing

    req = timing.read_stream(stream)
    res = timing.simulate(req, timing.device_from_ssd(cfg), timing.given_compute(req.nsteps, step_compute_us),
                          timing.CpuCosts())
    return res.total_us / max(req.nsteps, 1)


def run_point(point: SweepPoint, trace: str, out_dir: str) -> dict[str, Any]:
    """Emulate ``point`` on ``trace``, replay its stream on the SSD model, write ``point-<key>.parquet``.

    The swap stream goes to a temporary folder on the worker and is deleted;
    the result file is written atomically into ``out_dir``. Returns the row.
    """
    from swaptrace.emulate import emulate
    from swaptrace.ssd.swapdrive import replay_on_swap_drive, swap_drive

    budget = {"memory_bytes": point.memory_bytes} if point.memory_bytes else {"memory_fraction": point.memory_fraction}
    with single_threaded(), tempfile.TemporaryDirectory(prefix="swaptrace-sweep-") as tmp:
        swapio = Path(tmp) / "swapio.parquet"
        t0 = time.perf_counter()
        res = emulate(trace, swapio, policy=point.policy, force=True, workers=1, **budget)
        t1 = time.perf_counter()
        cfg = swap_drive(point.device)
        replayed = replay_on_swap_drive(swapio, cfg)
        ssd = replayed.summary
        step_us = point_step_time_us(swapio, cfg, point.step_compute_us)
        t2 = time.perf_counter()
    requests = res.summary.get("requests", {})
    row = {**asdict(point), "key": point.key, "trace": trace, "budget_pages": res.memory_pages,
           # the budget asked for (the figure's x); budget_pages is the run written (an ensemble member's)
           "memory_bytes": int(res.params["requested_memory_bytes"]),
           "accesses": res.accesses, "faults": res.faults, "pages_in": res.pages_in, "pages_out": res.pages_out,
           "read_requests": int(requests.get("read", 0)), "write_requests": int(requests.get("write", 0)),
           "bytes_read": res.bytes_read, "bytes_written": res.bytes_written, "waf": ssd.get("waf"),  # None when nothing was written
           "throughput_mb_s": ssd.get("throughput_mb_s"), "read_mb_s": ssd.get("read_mb_s"),
           "write_mb_s": ssd.get("write_mb_s"), "step_time_us": step_us, "emulate_s": t1 - t0, "ssd_s": t2 - t1,
           "worker": f"{socket.gethostname()}:{os.getpid()}"}
    table = pa.Table.from_pylist([row], schema=SWEEP_POINT_SCHEMA)
    with TraceWriter(Path(out_dir) / f"point-{point.key}.parquet", "sweep-point",
                     {"point": asdict(point), "trace": trace}, force=True, row_group_rows=1) as writer:
        writer.write_table(table)
    return row


# --- the client side -------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """What :func:`run_sweep` did: the results folder and the points run, skipped and failed."""

    path: Path
    points: int
    ran: int
    skipped: int
    failed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


def finished_keys(out: str | os.PathLike) -> set[str]:
    """Keys of the points whose result file exists and reads back (written under a temporary name and renamed
    into place, so complete unless damaged since: a file cut short is not counted, and its point runs again)."""
    done = set()
    for p in Path(out).glob("point-*.parquet"):
        try:
            if pq.ParquetFile(p).metadata.num_rows == 1:
                done.add(p.name[len("point-"):-len(".parquet")])
        except Exception:  # noqa: BLE001 - pyarrow raises several types for a damaged file: rerun the point
            pass
    return done


def run_sweep(spec: SweepSpec, out: str | os.PathLike, *, workers: int | None = None, scheduler: str | None = None,
              progress: Callable[[int], Any] | None = None,
              on_start: Callable[[int], Any] | None = None) -> SweepResult:
    """Run every point of ``spec`` not yet in ``out`` as a Dask task; see the module docstring.

    Parameters
    ----------
    spec : SweepSpec
        The axes (checked here, before anything runs).
    out : path-like
        Results folder (created); on a path every worker sees.
    workers : int, optional
        Worker processes of a local cluster (default: one per CPU).
    scheduler : str, optional
        ``tcp://HOST:PORT`` of a running scheduler (or ``$DASK_SCHEDULER_ADDRESS``).
    progress : callable, optional
        Called with 1 as each point finishes (or fails).
    on_start : callable, optional
        Called with the number of points to run, before the first is submitted.

    Returns
    -------
    SweepResult
        Failed points are listed with their error's first line; the others are written.
    """
    require_dask()
    spec.check()
    out = Path(out)
    # a new or empty folder, or an earlier run of a sweep (its sidecar): a rerun resumes it
    out = check_output_folder(out, True, json_marker(SIDECAR, ("spec", "points")), f"sweep results ({SIDECAR})")
    out.mkdir(parents=True, exist_ok=True)
    points = spec.points()
    _write_sidecar(out, spec, points)
    done = finished_keys(out)
    todo = [p for p in points if p.key not in done]
    if on_start is not None:
        on_start(len(todo))
    started = time.perf_counter()
    failed: list[tuple[str, str]] = []
    with sigterm_as_interrupt():  # SIGTERM: the CLI's one-line exit, like Ctrl-C
        try:
            if todo:
                failed = _submit_all(todo, out, workers, scheduler, progress)
        finally:  # also on Ctrl-C or SIGTERM: the cluster is closed by now, so no temporary has a live writer
            _remove_stale_temporaries(out)
    return SweepResult(out, len(points), len(todo) - len(failed), len(points) - len(todo), failed,
                       time.perf_counter() - started)


#: how much longer a point of each policy takes than an ``lru`` point, measured on the RM presets
#: (docs/sweep.md: ``linux`` runs its ensemble, 5-11x)
POLICY_COST = {"linux": 8.0, "clock": 1.0, "lru": 1.0}


def cost_hint(point: SweepPoint, accesses: int) -> float:
    """A point's relative cost: accesses x the policy's factor x more for smaller budgets (more faults).

    Only the order matters: the longest points are submitted first, so the
    longest does not start last and stretch the sweep's wall time.
    """
    fraction = point.memory_fraction if point.memory_fraction is not None else 0.5
    return accesses * POLICY_COST.get(point.policy, 1.0) * (1.5 - min(fraction, 1.0))


def _accesses(point: SweepPoint, cache: dict) -> int:
    """The trace's accesses: its row count, or for a preset its lookups per step (batch x mean bag sizes) x steps."""
    from swaptrace.workload.spec import load_spec

    ident = point.trace or (point.preset, point.steps)
    if ident not in cache:
        if point.trace is not None:
            cache[ident] = open_trace(point.trace, "access").num_rows
        else:
            spec = load_spec(point.preset)
            lookups = spec.batch_size * sum(t.lookups.mean for t in spec.tables)
            cache[ident] = int(lookups * (point.steps or spec.default_steps))
    return cache[ident]


def _submit_all(todo: Sequence[SweepPoint], out: Path, workers: int | None, scheduler: str | None,
                progress: Callable[[int], Any] | None) -> list[tuple[str, str]]:
    failed: list[tuple[str, str]] = []
    with connect(workers, scheduler) as client:
        from distributed import as_completed

        inputs: dict[tuple[str, int | None, int], Any] = {}
        (out / INPUTS).mkdir(exist_ok=True)
        futures = {}
        sizes: dict = {}
        for p in sorted(todo, key=lambda p: -cost_hint(p, _accesses(p, sizes))):
            trace: Any = p.trace
            if trace is None:
                ident = (p.preset, p.steps, p.seed)
                if ident not in inputs:
                    inputs[ident] = client.submit(_generate_input, p.preset, p.steps, p.seed,
                                                  str((out / INPUTS / p.input_name()).resolve()),
                                                  key=f"input-{p.input_name()}", pure=False,
                                                  priority=len(todo) + 1)
                trace = inputs[ident]
            # priority: Dask runs the highest first among the ready tasks; the list is already longest first
            futures[client.submit(run_point, p, trace, str(out.resolve()), key=f"point-{p.key}", pure=False,
                                  priority=len(todo) - len(futures))] = p
        for fut in as_completed(futures):
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - one point's failure is reported; the others go on
                failed.append((futures[fut].key, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            fut.release()
            if progress is not None:
                progress(1)
    return failed


def _write_sidecar(out: Path, spec: SweepSpec, points: list[SweepPoint]) -> None:
    doc = {"spec": asdict(spec), "points": [{"key": p.key, **asdict(p)} for p in points]}
    with AtomicPath(out / SIDECAR) as ap:
        ap.tmp.write_text(json.dumps(doc, indent=1))


def _remove_stale_temporaries(out: Path) -> None:
    """Temporaries of point files and generated inputs whose writer died (a killed worker, an interrupted
    sweep); their points run again next time."""
    for p in [*out.glob(".point-*.partial"), *(out / INPUTS).glob(".*.partial")]:
        pid = p.name.split(".")[-3] if p.name.count(".") >= 3 else ""
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue  # another sweep's worker still writing it
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_results(out: str | os.PathLike) -> pa.Table:
    """All finished points of a results folder as one Arrow table, sorted by key (damaged files left out)."""
    done = finished_keys(out)
    files = sorted(p for p in Path(out).glob("point-*.parquet") if p.name[len("point-"):-len(".parquet")] in done)
    if not files:
        return SWEEP_POINT_SCHEMA.empty_table()
    table = pa.concat_tables([pq.read_table(f).cast(SWEEP_POINT_SCHEMA) for f in files])
    return table.sort_by("key")
