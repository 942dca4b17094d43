"""``emulate``: an access trace and a DRAM budget in, a Linux-like swap I/O stream out."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from swaptrace.core import bounds
from swaptrace.core.traceio import (
    TraceFile,
    TraceWriter,
    check_output_path,
    open_trace,
    trace_fingerprint,
)
from swaptrace.emulate.config import EmulatorConfig
from swaptrace.emulate.engine import Emulator, StepsOutOfOrder, kernel_batches, step_counts
from swaptrace.emulate.ensemble import (
    describe_members,
    ensemble_configs,
    member_budget_pages,
    nearest_member,
    run_members,
)
from swaptrace.emulate.kernel_profile import KernelProfile, load_profile
from swaptrace.errors import ConfigError

CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class EmulationResult:
    """What :func:`emulate` wrote and counted (``summary`` is the stream's metadata summary)."""

    path: Path
    summary: dict[str, Any]
    accesses: int = 0
    hits: int = 0
    faults: int = 0
    zero_fill: int = 0
    major_faults: int = 0
    pages_in: int = 0
    pages_out: int = 0
    readahead_issued: int = 0
    readahead_hit: int = 0
    evictions: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    memory_pages: int = 0
    params: dict[str, Any] = field(default_factory=dict)


def emulate(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    config: EmulatorConfig | None = None,
    *,
    profile: KernelProfile | str | None = None,
    ensemble: bool | None = False,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    workers: int | None = None,
    sensitivity: float | None = None,
    **options: Any,
) -> EmulationResult:
    """Replay an access trace against a DRAM budget; write the swap I/O stream.

    Parameters
    ----------
    trace : path-like
        A ``kind: access`` Parquet file (``swaptrace generate``).
    out : path-like
        The ``kind: swapio`` file to write (atomically; refused if it exists
        unless ``force``).
    config : EmulatorConfig, optional
        The run's parameters; default: :meth:`EmulatorConfig.resolve` of the
        trace's metadata with ``options`` (``memory_bytes`` or
        ``memory_fraction``, ``policy``, ``readahead`` ... ; docs/emulate.md).
    profile : KernelProfile or str, optional
        The kernel profile whose ``linux`` defaults and ensemble apply
        (default ``linux-6.x-cgroup1``).
    ensemble : bool or None
        False (default): one deterministic run. True: the profile's ensemble
        (one counting run per member) and the stream of the member nearest their
        mean pages in and out. None: the ensemble where it applies -- the profile
        has one, the writeback rule is ``device`` and no ``write_cost`` was given
        -- what ``swaptrace emulate`` and ``swaptrace run`` do by default.
    force : bool
        Overwrite ``out``.
    progress : callable, optional
        Called with the number of accesses processed since the last call
        (the members' pass and the writing pass share one bar of the trace's length).
    chunk_rows : int
        Accesses decoded per chunk.
    workers : int, optional
        Threads for the ensemble's members (default: the CPUs available).
    sensitivity : float, optional
        A fraction in (0, 1): also count the run written at ``1 -/+ sensitivity`` times its budget (one more
        pass); ``params["sensitivity"]`` holds their budgets, major faults, pages in and out (docs/emulate.md).

    Returns
    -------
    EmulationResult
        ``summary["memory_pages"]`` and the stream's ``memory_bytes`` are the
        budget of the run written; ``params["requested_memory_bytes"]`` the one asked for.
    """
    tf = open_trace(trace, kind="access")
    prof = profile if isinstance(profile, KernelProfile) else load_profile(profile)
    if config is None:
        config = EmulatorConfig.resolve(tf.meta, profile=prof, source=str(tf.path), **options)
    elif options:
        raise TypeError(f"emulate: give a config or options, not both ({', '.join(options)})")
    if sensitivity is not None and not 0 < sensitivity < 1:
        raise ConfigError(f"sensitivity: a fraction of the budget in (0, 1), got {sensitivity!r}")
    # a process trace's runtime states the device's speed (swaptrace.workload.process): a given write cost, as --write-cost
    given = options.get("write_cost") is not None or bool(config.runtime is not None and config.runtime.write_cost)
    members = _members(config, prof, ensemble, write_cost_given=given,
                       footprint_pages=int(tf.meta["footprint_pages"]))
    check_output_path(out, force)
    first_step = int(tf.meta.get("first_step", 0))
    nsteps = int(tf.meta.get("steps") or 0)
    # with the step count in the metadata the run counts each step's rows as it goes (no second pass over the
    # trace); a trace that turns out not to be in step order is run again with its counts taken first
    counts = None if nsteps > 0 else step_counts(tf, first_step, chunk_rows)
    run = dict(config=config, prof=prof, members=members, nsteps=nsteps or counts.size, first_step=first_step,
               out=out, force=force, chunk_rows=chunk_rows, workers=workers, sensitivity=sensitivity)
    try:
        passes = 1 + bool(members) + bool(sensitivity)
        return _run(tf, counts=counts, progress=_share(progress, passes), **run)
    except StepsOutOfOrder:
        return _run(tf, counts=step_counts(tf, first_step, chunk_rows), progress=None, **run)


def _run(tf: TraceFile, *, config: EmulatorConfig, prof: KernelProfile, members: list[EmulatorConfig], counts: Any,
         nsteps: int, first_step: int, out, force: bool, chunk_rows: int, workers: int | None,
         progress: Callable[[int], None] | None, sensitivity: float | None = None) -> EmulationResult:
    """One emulation of ``tf`` written to ``out`` (:func:`emulate`); ``counts`` as :class:`Emulator` takes them."""
    run_cfg, emu, skip, described = config, None, 0, None
    if members:
        run_cfg, emu, skip, described = _choose_member(tf, members, prof, counts, nsteps=nsteps, first_step=first_step,
                                                       chunk_rows=chunk_rows, workers=workers, progress=progress)
    if emu is None:
        emu = Emulator(run_cfg, int(tf.meta["footprint_pages"]), counts, nsteps=nsteps, first_step=first_step,
                       regions=tf.meta.get("regions"))
    params = {**run_cfg.describe(), "requested_memory_bytes": config.memory_bytes, "profile": prof.describe(),
              "ensemble": described}
    if sensitivity:
        params["sensitivity"] = _sensitivity(tf, run_cfg, sensitivity, nsteps=nsteps, first_step=first_step,
                                             chunk_rows=chunk_rows, workers=workers, progress=progress)
    path, summary, step_faults = _write_stream(tf, emu, out, params, force=force, progress=progress,
                                               chunk_rows=chunk_rows, skip=skip)
    keys = ("accesses hits faults zero_fill major_faults pages_in pages_out readahead_issued readahead_hit "
            "evictions bytes_read bytes_written").split()
    return EmulationResult(path=path, summary=summary, memory_pages=run_cfg.budget_pages, params=params,
                           **{k: summary[k] for k in keys})


def _choose_member(tf: TraceFile, members: list[EmulatorConfig], prof: KernelProfile, counts: Any, *, nsteps: int,
                   first_step: int, chunk_rows: int, workers: int | None, progress: Callable[[int], None] | None):
    """Run the members; ``(config, emulator or None, accesses it has taken, params.ensemble)`` of the one to write.

    The emulator is the shared prefix forked as the chosen member when the prefix issued no request (nothing to
    write for it), so the writing run starts where the members diverged; else None (run it from the start).
    """
    runs = run_members(tf, members, nsteps=nsteps, first_step=first_step, chunk_rows=chunk_rows, workers=workers,
                       progress=progress)
    chosen = nearest_member([(c.pages_in, c.pages_out) for c in runs.counters])
    described = describe_members(members, runs.counters, chosen, prof.ensemble)
    shared = runs.prefix.counters()
    if shared.read_requests + shared.write_requests == 0:
        return members[chosen], runs.prefix.fork(members[chosen], counts), runs.prefix_accesses, described
    return members[chosen], None, 0, described


def _members(cfg: EmulatorConfig, prof: KernelProfile, ensemble: bool | None, *, write_cost_given: bool,
             footprint_pages: int) -> list[EmulatorConfig]:
    """The ensemble's members, or none for a single run (see :func:`emulate`'s ``ensemble``)."""
    applies = cfg.writeback_completion == "device" and prof.ensemble is not None
    if ensemble is None:
        ensemble = applies and not write_cost_given
    elif ensemble and cfg.writeback_completion != "device":
        raise ConfigError(f"--ensemble varies the device's speed: it needs --writeback-completes device, "
                          f"not {cfg.writeback_completion}")
    elif ensemble and write_cost_given:
        raise ConfigError("--ensemble varies the write cost: leave out --write-cost (or give --no-ensemble)")
    elif ensemble and prof.ensemble is None:
        raise ConfigError(f"profile {prof.name} has no [ensemble]")
    return ensemble_configs(cfg, footprint_pages, prof.ensemble) if ensemble else []


def _write_stream(tf: TraceFile, emu: Emulator, out, params: dict[str, Any], *, force: bool,
                  progress: Callable[[int], None] | None, chunk_rows: int, skip: int = 0):
    """Run ``emu`` over the trace from access ``skip`` on, writing its rows; Parquet decoding and encoding run
    in one second thread while the (GIL-free) kernel goes on, one batch of each in flight."""
    meta = stream_metadata(tf, emu, params)
    with TraceWriter(out, "swapio", meta, force=force) as writer, ThreadPoolExecutor(1) as pool:
        pending = None
        for columns in kernel_batches(tf, chunk_rows, pool=pool):  # one thread decodes and encodes
            n = len(columns[0])
            if skip >= n:  # taken by the ensemble's shared prefix, which this run was forked from
                skip -= n
                if progress is not None:
                    progress(n)
                continue
            if skip:
                columns = tuple(v[skip:] for v in columns)
                if progress is not None:
                    progress(skip)
                skip = 0
            for rows in emu.feed(*columns, progress=progress):
                if pending is not None:
                    pending.result()
                pending = pool.submit(writer.write, **rows)
        if pending is not None:
            pending.result()
        rows = emu.finish()
        if rows is not None:
            writer.write(**rows)
        summary = emu.summary()
        writer.metadata["summary"] = summary
        writer.metadata["step_faults"] = step_faults = emu.step_faults()
    return writer.path, summary, step_faults


def stream_metadata(tf: TraceFile, emu: Emulator, params: dict[str, Any], *, source: str = "emulator",
                    device_bytes: int | None = None) -> dict[str, Any]:
    """A ``swapio`` stream's metadata for a run of ``emu`` on ``tf``: the one rule for ``emulate`` and ``designs``.

    Parameters
    ----------
    tf : TraceFile
        The access trace the run reads.
    emu : Emulator
        The run (its config, steps and first step).
    params : dict
        The run's parameters as recorded (``EmulatorConfig.describe`` and what the caller adds).
    source : str
        ``emulator`` for Linux's stream, ``design`` for a swap design's.
    device_bytes : int, optional
        The swap device's size in bytes (default: the emulator's swap slots).
    """
    cfg = emu.cfg
    return {
        "source": source,
        "page_bytes": cfg.page_bytes,
        "device_bytes": cfg.nslots * cfg.page_bytes if device_bytes is None else device_bytes,
        "memory_bytes": cfg.memory_bytes,
        "steps": emu.nsteps,
        "first_step": emu.first_step,
        "duration_us": float(emu.nsteps * cfg.step_us),
        "trace": str(tf.path),
        "trace_fingerprint": trace_fingerprint(tf.meta),  # so `time --trace` can tell another trace
        "params": params,
        **_threads(tf.meta),
    }


def _threads(trace_meta: dict[str, Any]) -> dict[str, Any]:
    """The threads a recorded program shares its steps over, passed on for the time model (else nothing)."""
    process = trace_meta.get("process")
    n = process.get("threads") if isinstance(process, dict) else None
    if not bounds.within("threads", n):
        return {}
    return {"threads": int(n), "threads_source": str(process.get("threads_source") or process.get("name") or "the trace")}


def _sensitivity(tf: TraceFile, cfg: EmulatorConfig, fraction: float, *, nsteps: int, first_step: int,
                 chunk_rows: int, workers: int | None, progress: Callable[[int], None] | None) -> dict[str, Any]:
    """The run of ``cfg`` counted at ``1 - fraction`` and ``1 + fraction`` times its budget (:func:`emulate`)."""
    footprint = int(tf.meta["footprint_pages"])
    configs = [replace(cfg, budget_pages=member_budget_pages(cfg.budget_pages, d, footprint))
               for d in (-fraction, fraction)]
    runs = run_members(tf, configs, nsteps=nsteps, first_step=first_step, chunk_rows=chunk_rows, workers=workers,
                       progress=progress)
    return {"fraction": fraction, "memory_bytes": [c.memory_bytes for c in configs],
            **{key: [getattr(c, key) for c in runs.counters] for key in ("major_faults", "pages_in", "pages_out")}}


def _share(progress: Callable[[int], None] | None, passes: int) -> Callable[[int], None] | None:
    """``progress`` for ``passes`` passes over the trace on one bar of the trace's length (whole accesses)."""
    if progress is None or passes == 1:
        return progress
    done = [0, 0]  # accesses over all passes, and what the bar was given

    def tick(n: int) -> None:
        done[0] += n
        due = done[0] // passes
        if due > done[1]:
            progress(due - done[1])
            done[1] = due

    return tick
