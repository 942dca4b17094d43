"""Capture an access trace: the replay child, what it prepares and what it records.

:class:`ReplayChild` is the :class:`~swaptrace.capture.contract.CaptureChild` of ``capture TRACE``
(:func:`swaptrace.capture.session.capture`). It writes the trace as raw codes the child process
(:mod:`swaptrace.capture.child`, run by :mod:`swaptrace.capture.replay_process`) replays with real
loads and stores. The child locks its own memory (interpreter, numba) after warm-up, so the limit
is its measured baseline plus the model's budget plus the page tables of the footprint mapping
(:func:`page_table_bytes`); steps are the trace's, marked by the child itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.capture.contract import STAT_KEYS, SWAP_HEADROOM_BYTES, ChildContext, Description, Recording
from swaptrace.capture.convert import ParsedTrace, StreamColumns, to_stream
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.reclaim import RECLAIM_EVENTS, reclaim_record
from swaptrace.capture.replay_process import RunResult, run_replay
from swaptrace.core.traceio import open_trace
from swaptrace.emulate.config import EmulatorConfig
from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.kernels.capture import replay as replay_kernel
from swaptrace.workload.spec import mlp_layers


class LimitedReplay(NamedTuple):
    """The limited run of a replay: the run, and the LRU list sizes at each step's end (pages)."""

    run: RunResult
    step_lists: dict[str, list[int]]


class ReplayChild:
    """The trace replayer: a child that replays an access trace with real loads and stores (see the module docstring).

    Parameters are those of :func:`swaptrace.capture.session.capture` (``memory_bytes``,
    ``memory_fraction`` and ``progress`` from its :class:`~swaptrace.capture.options.CaptureOptions`).
    """

    def __init__(self, trace, *, memory_bytes=None, memory_fraction=None, compute=None, lock_baseline=True,
                 trace_reclaim=False, progress=None):
        self.trace, self.memory_bytes, self.memory_fraction, self.compute = trace, memory_bytes, memory_fraction, compute
        self.lock_baseline, self.trace_reclaim, self.progress = lock_baseline, trace_reclaim, progress
        self.extra_events = RECLAIM_EVENTS if trace_reclaim else ()

    def check_inputs(self, options: CaptureOptions) -> None:  # the same methods as CommandChild
        """Open the trace and check its metadata; the budget in bytes and the compute option."""
        self.tf = open_trace(self.trace, kind="access")
        meta = self.tf.meta
        for key in ("footprint_pages", "page_bytes"):
            if key not in meta:
                raise TraceFileError(f"{self.tf.path}: access trace metadata lacks {key!r}")
        if self.tf.has_column("event"):  # the replaying child has no munmap/madvise to play them with
            raise ConfigError(f"{self.tf.path}: capture does not replay alloc and free events (column 'event') yet")
        self.page_bytes = int(meta["page_bytes"])
        if self.page_bytes % 4096:
            raise ConfigError(f"page_bytes {self.page_bytes} is not a multiple of 4096")
        self.footprint_bytes = int(meta.get("footprint_bytes", int(meta["footprint_pages"]) * self.page_bytes))
        self.memory_bytes = self._budget_bytes()
        if self.compute not in (None, "none", "mlp"):
            raise ConfigError(f"--compute must be 'mlp' or 'none', got {self.compute!r}")
        self.compute = None if self.compute == "none" else self.compute

    def _budget_bytes(self) -> int:
        """The model's budget in bytes: the emulator's rule (:meth:`EmulatorConfig.budget_pages_for`), so a
        capture and an emulation of the same options get the same whole pages."""
        pages = EmulatorConfig.budget_pages_for(self.footprint_bytes // self.page_bytes, self.page_bytes,
                                                memory_bytes=self.memory_bytes, memory_fraction=self.memory_fraction)
        return pages * self.page_bytes

    def warm_up(self) -> None:
        """Compile the replay kernel in this process."""
        # compile the child's replay kernel here: a child that compiles it carries the compiler's memory
        # into its measured baseline (3-14 MiB), which the model gets back as extra room once freed
        replay_kernel.warm_up()

    def prepare(self, ctx: ChildContext) -> None:
        """Write the trace's codes into the work folder; the child's configuration."""
        self.prep = _prepare_codes(self.tf, ctx.workdir)
        layers, batch = mlp_layers(self.tf.meta)
        self.base_config = {
            "parent_pid": os.getpid(), "page_bytes": self.page_bytes, "footprint_bytes": self.footprint_bytes,
            "compute": self.compute, "mlp_layers": layers, "batch_size": batch, "lock_baseline": self.lock_baseline,
            **{k: self.prep[k] for k in ("codes", "step_starts", "step_numbers")},
        }

    def swap_bytes(self, ctx: ChildContext, free: RunResult | None) -> int:
        """``options.swap_bytes``, else the footprint plus :data:`SWAP_HEADROOM_BYTES`."""
        return int(ctx.options.swap_bytes or self.footprint_bytes + SWAP_HEADROOM_BYTES)

    def run_unlimited(self, ctx: ChildContext, group: cg.MemoryCgroup) -> RunResult:
        """The replay without a limit: its step times are the slowdown's denominator."""
        return run_replay(self.base_config, ctx.workdir, "free", group, None, timeout_s=ctx.options.timeout_s,
                          stalls=ctx.stalls)

    def run_limited(self, ctx: ChildContext, group: cg.MemoryCgroup, trace: tracing.BlockTrace,
                    start_tracing: Callable[[], None], free: RunResult | None) -> LimitedReplay:
        """The traced replay under baseline + budget + page tables; also the LRU list sizes at each step's end."""
        page_bytes = self.page_bytes
        step_lists: dict[str, list[int]] = {"step": [], "active_anon_pages": [], "inactive_anon_pages": []}

        def on_step(line: str):
            if not line.startswith("STEP"):
                return
            # the LRU list sizes as the step ends (read while the child starts the next one): what the
            # emulator's per-step list sizes are compared with
            try:
                st = group.stat()
                step_lists["step"].append(int(line.split()[1]))
                step_lists["active_anon_pages"].append(int(st.get("active_anon", 0)) // page_bytes)
                step_lists["inactive_anon_pages"].append(int(st.get("inactive_anon", 0)) // page_bytes)
            except (OSError, ValueError, IndexError):
                pass
            if self.progress is not None:
                self.progress(1)

        self.overhead = page_table_bytes(self.footprint_bytes)
        run = run_replay({**self.base_config, "marker": str(trace.marker_path())}, ctx.workdir, "limited", group,
                         self.memory_bytes, on_go=start_tracing, on_step=on_step, timeout_s=ctx.options.timeout_s,
                         overhead_bytes=self.overhead, stalls=ctx.stalls)
        return LimitedReplay(run, step_lists)

    def stream(self, parsed: ParsedTrace, run: LimitedReplay) -> StreamColumns:
        """Requests by the trace's own steps (the child's markers), from its first step."""
        return to_stream(parsed, first_step=self.prep["first_step"])

    def _reclaim(self, ctx: ChildContext, recording: Recording) -> dict[str, Any] | None:
        if not self.trace_reclaim:
            return None
        first = self.prep["first_step"]
        return reclaim_record(ctx.raw_path, recording.parsed.markers, first, first + self.prep["steps"] - 1,
                              recording.missing_events)

    def describe(self, ctx: ChildContext, free: RunResult | None, run: LimitedReplay,
                 recording: Recording) -> Description:
        """The replay's summary, its runs' ``kernel`` record, and its parameters."""
        result = run.run
        child = result.child
        summary = {
            "accesses": self.prep["accesses"],
            "faults": int(child["major_faults"]),
            **recording.requests,
            "pswpin": result.vmstat_delta.get("pswpin", 0),
            "pswpout": result.vmstat_delta.get("pswpout", 0),
            "major_faults": int(child["major_faults"]),
        }
        slowdown = None
        if free is not None and free.child["total_us"] > 0:
            slowdown = child["total_us"] / free.child["total_us"]
        kernel = _run_record(run, free, recording, overhead=self.overhead, slowdown=slowdown,
                             reclaim=self._reclaim(ctx, recording))
        params = {"memory_bytes": self.memory_bytes, "memory_fraction": self.memory_fraction,
                  "compute": self.compute or "none", "lock_baseline": self.lock_baseline}
        return Description(
            summary=summary, kernel=kernel, meta={"trace": str(self.tf.path), "footprint_bytes": self.footprint_bytes},
            params=params, steps=self.prep["steps"], first_step=self.prep["first_step"],
            memory_bytes=self.memory_bytes, baseline_bytes=result.baseline_bytes, limit_bytes=int(result.limit_bytes or 0),
            slowdown=slowdown, major_faults=summary["major_faults"],
        )


def _run_record(limited: LimitedReplay, free: RunResult | None, recording: Recording, *, overhead: int,
                slowdown: float | None, reclaim: dict[str, Any] | None) -> dict[str, Any]:
    """The limited run's (and the unlimited run's) part of the ``kernel`` metadata, in the order it is written."""
    run = limited.run
    child = run.child
    return {
        "baseline_bytes": run.baseline_bytes,
        "baseline_rss_bytes": run.rss_bytes,
        "page_table_bytes": overhead,
        "limit_bytes": run.limit_bytes,
        "peak_bytes": run.peak_bytes,
        "warmup_s": run.warmup_s,
        "baseline_locked": run.locked,
        **run.oom,
        "vmstat_delta": run.vmstat_delta,
        "loop_stat_delta": recording.loop_delta,
        "requests_missing_vs_device": recording.missing,
        "cgroup_stat": {k: v for k, v in run.cgroup_stat.items() if k in STAT_KEYS},
        "baseline_stat": {k: v for k, v in run.baseline_stat.items() if k in STAT_KEYS},
        "usage_end_bytes": run.usage_end_bytes,
        "model_resident_end_bytes": child.get("model_resident_bytes"),
        "room_gain_bytes": room_gain_bytes(run.baseline_bytes, overhead, run.usage_end_bytes,
                                           child.get("model_resident_bytes")),
        "minor_faults": int(child["minor_faults"]),
        "step_lists": limited.step_lists,
        "reclaim": reclaim,
        "step_wall_us": child["step_wall_us"],
        "step_minor_faults": child.get("step_minor_faults"),
        "step_major_faults": child.get("step_major_faults"),
        "replay_us": child["replay_us"],
        "compute_us": child["compute_us"],
        "total_us": child["total_us"],
        "unlimited": None if free is None else {
            "step_wall_us": free.child["step_wall_us"], "replay_us": free.child["replay_us"],
            "compute_us": free.child["compute_us"], "total_us": free.child["total_us"],
            "major_faults": free.child["major_faults"], "baseline_bytes": free.baseline_bytes,
            "peak_bytes": free.peak_bytes,
        },
        "slowdown": slowdown,
    }


def _prepare_codes(trace, workdir: Path) -> dict[str, Any]:
    """Write the trace as raw int64 ``page << 1 | write`` and per-step offsets."""
    meta = trace.meta
    steps = int(meta.get("steps", 0))
    first = int(meta.get("first_step", 0))
    codes_path = workdir / "codes.i64"
    counts = np.zeros(max(steps, 1), dtype=np.int64)
    footprint_pages = int(meta["footprint_pages"])
    last_step = first
    with open(codes_path, "wb") as fh:
        for batch in trace.iter_batches(["step", "page", "write"]):
            step = batch["step"].astype(np.int64)
            if len(step) == 0:
                continue
            if step[0] < last_step or np.any(np.diff(step) < 0):
                raise TraceFileError(f"{trace.path}: steps are not in order; capture replays in file order")
            last_step = int(step[-1])
            page = batch["page"].astype(np.int64)
            if page.max(initial=0) >= footprint_pages:
                raise TraceFileError(f"{trace.path}: page {int(page.max())} outside the footprint ({footprint_pages} pages)")
            rel = step - first
            if rel.min() < 0:
                raise TraceFileError(f"{trace.path}: step {int(step.min())} before first_step {first}")
            if rel.max() >= len(counts):
                counts = np.concatenate([counts, np.zeros(int(rel.max()) + 1 - len(counts), dtype=np.int64)])
            counts += np.bincount(rel, minlength=len(counts))
            ((page << 1) | batch["write"].astype(np.int64)).tofile(fh)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    numbers = np.arange(first, first + len(counts), dtype=np.int64)
    np.save(workdir / "step_starts.npy", starts)
    np.save(workdir / "step_numbers.npy", numbers)
    return {
        "codes": str(codes_path),
        "step_starts": str(workdir / "step_starts.npy"),
        "step_numbers": str(workdir / "step_numbers.npy"),
        "steps": len(counts),
        "first_step": first,
        "accesses": int(starts[-1]),
    }


def page_table_bytes(footprint_bytes: int) -> int:
    """Memory the kernel charges for the page tables of a mapping of this size (x86-64, 4-level).

    One 4 KiB PTE page per 2 MiB of address space, one PMD page per 1 GiB,
    plus one PUD page; charged to the memory cgroup (``__GFP_ACCOUNT``) but no
    part of the model, so the capture adds it to the limit.
    """
    pte = -(-int(footprint_bytes) // (2 << 20))
    pmd = -(-int(footprint_bytes) // (1 << 30))
    return (pte + pmd + 1) * 4096


def room_gain_bytes(baseline_bytes: int, overhead_bytes: int, usage_end_bytes: int | None,
                    model_resident_bytes: int | None) -> int | None:
    """How much more memory the model had at the end of the run than its budget (negative: less).

    The limit is ``baseline + budget + overhead`` on the assumption that the rest of the process keeps
    holding ``baseline + overhead`` throughout. At the end, what the rest holds is the cgroup's usage less
    the model's own charged pages (:class:`swaptrace.capture.child.ResidencyProbe`). If the rest holds less
    -- memory the baseline counted was freed or reclaimed during the run: allocator caches returned late,
    page cache read at start-up -- the model had that much extra room, and the capture is of a larger
    budget than asked: a few hundred KiB shift a cyclic workload near its knee by whole percents.
    """
    if usage_end_bytes is None or model_resident_bytes is None:
        return None
    return int(baseline_bytes) + int(overhead_bytes) - (int(usage_end_bytes) - int(model_resident_bytes))
