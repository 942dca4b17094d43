"""Orchestration of one capture: set up, run the child twice, record, undo.

Order (docs/capture.md, "What it does"), each set-up step a method of
:class:`CaptureSession` that registers its undo on a :class:`contextlib.ExitStack`::

    the capture lock (/run/swaptrace-capture.lock; a second capture is refused)
    leftovers of dead captures removed
    refused if any other swap area is active (it would share the swap traffic)
    trace -> codes file (page << 1 | write, int64) in the work folder
    unlimited run   (own cgroup, no limit)          -> per-step wall times
    swap file -> loop -> mkswap -> swapon
    tracefs instance, filter dev == loop
    limited run     (own cgroup, limit = baseline + budget, traced)
    undo in reverse: tracing, child, cgroups, swapoff, loop, files

Everything created is named ``swaptrace-capture-<pid>...`` with the pid of the
capturing process. Undo runs on success, error, Ctrl-C and SIGTERM (turned
into KeyboardInterrupt); if the capture is killed outright (SIGKILL), the
child dies with it (``PR_SET_PDEATHSIG``) and the next capture (or
:func:`~swaptrace.capture.leftovers.cleanup_leftovers`) finds the named
leftovers of the dead pid and removes them.

The machine's side is :mod:`.host` (checks, facts, the lock) and :mod:`.leftovers`; the child's is
:mod:`.replay` (``capture TRACE``) and :mod:`.command` (``capture -- CMD``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.capture import cgroup as cg
from swaptrace.capture import host, leftovers, tracing
from swaptrace.capture.convert import parse_lines
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.replay import ReplayChild
from swaptrace.capture.swapdev import SwapDevice
from swaptrace.compare import summarize_requests
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.traceio import OP_DISCARD, AtomicPath, TraceWriter, check_output_path
from swaptrace.errors import SwaptraceError, ToolError


@dataclass(frozen=True)
class CaptureResult:
    """Outcome of :func:`capture` (the summary is also in the file's metadata)."""

    path: Path
    summary: dict[str, Any]
    pages_in: int
    pages_out: int
    pswpin: int
    pswpout: int
    major_faults: int
    memory_bytes: int
    baseline_bytes: int
    limit_bytes: int
    slowdown: float | None
    lost_events: int
    malformed_lines: int
    kernel: dict[str, Any] = field(default_factory=dict)
    removed_leftovers: list[str] = field(default_factory=list)


class CaptureSession:
    """One capture: checks, then set-up steps each registering its undo on an :class:`contextlib.ExitStack`.

    Set up in this order, undone in reverse (on success, error, Ctrl-C and
    SIGTERM/SIGHUP, which are turned into KeyboardInterrupt): signal
    handlers, the capture lock, the work folder, the unlimited run's cgroup,
    the swap device (file, loop, swapon), the limited run's cgroup, the
    tracefs instance. An undo step that fails does not stop the others; its
    error is raised at the end (as :class:`~swaptrace.errors.ToolError`)
    unless another error is already on its way out.

    What runs in the cgroups is the ``child``, of one of two kinds with the same methods:
    :class:`~swaptrace.capture.replay.ReplayChild` (replays an access trace; :func:`capture`) and
    :class:`swaptrace.capture.command.CommandChild` (runs any program; ``capture -- CMD``). A child
    checks its own inputs (``check_inputs``), prepares its files (``warm_up``, ``prepare``), runs
    unlimited and limited (``run_unlimited``, ``run_limited``: how it starts, what it locks, what
    the limit is), says how big the swap must be (``swap_bytes``), turns the trace into steps
    (``stream``) and describes its runs (``describe``). The lock, leftovers, swap, cgroups, tracefs,
    clean-up, the stream's cross-check with the device and the file are this class's.

    Parameters
    ----------
    child : ReplayChild or CommandChild
        What runs in the cgroups.
    out : path
        The ``swapio`` file to write (``source: kernel``).
    options : CaptureOptions, optional
        How the capture runs (the session reads all but the budget, which is the child's).
    """

    def __init__(self, child, out: str | os.PathLike, options: CaptureOptions | None = None):
        self.child, self.out = child, out
        self.options = options if options is not None else CaptureOptions()
        self.work_base = Path(self.options.work_base or leftovers.DEFAULT_WORK_BASE)
        self.name = f"{leftovers.PREFIX}{os.getpid()}"
        self.workdir = self.work_base / self.name
        self._cleanup_errors: list[str] = []

    # ------------------------------------------------------------------ checks (nothing changed yet)

    def _check_machine(self) -> None:
        host.check_machine(self.work_base)

    # ------------------------------------------------------------------ set-up steps, each with its undo

    def _undo(self, stack: contextlib.ExitStack, step) -> None:
        """Register an undo step; a failure is recorded and the remaining steps still run."""
        def quietly():
            try:
                step()
            except (OSError, SwaptraceError) as exc:
                self._cleanup_errors.append(str(exc))
        stack.callback(quietly)

    def _raise_cleanup_errors(self, exc_type, exc, tb) -> bool:
        if self._cleanup_errors and exc_type is None:
            raise ToolError("capture finished but cleanup failed: " + "; ".join(self._cleanup_errors))
        return False

    def _lock(self, stack: contextlib.ExitStack) -> None:
        stack.callback(os.close, host.hold_capture_lock(host.LOCK_PATH))

    def _make_workdir(self, stack: contextlib.ExitStack) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        stack.callback(shutil.rmtree, self.workdir, ignore_errors=True)

    def _run_unlimited(self, stack: contextlib.ExitStack):
        g = cg.MemoryCgroup(f"{self.name}-free")
        self._undo(stack, g.remove)
        free = self.child.run_unlimited(self, stack, g)
        g.remove()
        return free

    def _setup_swap(self, stack: contextlib.ExitStack, size_bytes: int) -> SwapDevice:
        swap = SwapDevice(self.workdir / f"{self.name}.swap", int(size_bytes), rotational=self.options.rotational)
        self._undo(stack, swap.teardown)
        swap.setup()
        return swap

    def _setup_group(self, stack: contextlib.ExitStack) -> cg.MemoryCgroup:
        g = cg.MemoryCgroup(self.name)
        self._undo(stack, g.remove)
        return g

    def _setup_tracing(self, stack: contextlib.ExitStack, device) -> tracing.BlockTrace:
        self.raw_path = self.workdir / "trace.txt"
        rec = tracing.BlockTrace(self.name, device, self.raw_path, buffer_kb=self.options.buffer_kb,
                                 extra_events=self.child.extra_events)
        self._undo(stack, rec.teardown)
        rec.setup()
        return rec

    # ------------------------------------------------------------------ the capture

    def run(self) -> CaptureResult:
        """Check, set up, run (unlimited, then limited and traced), write the stream, undo."""
        self.out_path = check_output_path(self.out, self.options.force)
        self.child.check_inputs(self)
        self._check_machine()
        with contextlib.ExitStack() as stack:
            stack.push(self._raise_cleanup_errors)  # outermost: sees every undo step's outcome
            self._lock(stack)
            self.removed = leftovers.cleanup_leftovers(self.work_base)
            host.refuse_other_swap()
            # other work on the machine changes the kernel's timing (when writes complete, who runs reclaim)
            self.load_start = os.getloadavg()[0]
            self.child.warm_up()
            self.facts = host.kernel_facts()
            stack.enter_context(sigterm_as_interrupt(hangup=True))  # a closed terminal (SIGHUP) too
            self._make_workdir(stack)
            self.child.prepare(self)
            self.free = free = self._run_unlimited(stack) if self.options.unlimited_run else None
            swap = self._setup_swap(stack, self.child.swap_bytes(self, free))
            group = self._setup_group(stack)
            rec = self._setup_tracing(stack, swap.device)
            run, buffer_stats, loop_delta = self._run_limited(swap, group, rec)
            return self._record(free, run, swap, group, rec, buffer_stats, loop_delta)

    def _run_limited(self, swap: SwapDevice, g: cg.MemoryCgroup, rec: tracing.BlockTrace):
        """The traced run under the memory limit; returns the child's run, the ring-buffer stats, the loop's counters."""
        loop_before: dict[str, int] = {}

        def start_tracing():
            loop_before.update(swap.stat())
            rec.start()

        run = self.child.run_limited(self, g, rec, start_tracing, self.free)
        buffer_stats = rec.stop()
        loop_after = swap.stat()
        g.remove()
        loop_delta = {k: loop_after[k] - loop_before.get(k, 0) for k in loop_after}
        return run, buffer_stats, loop_delta

    def _record(self, free, run, swap: SwapDevice, g: cg.MemoryCgroup, rec: tracing.BlockTrace,
                buffer_stats, loop_delta) -> CaptureResult:
        """Write the ``swapio`` file with its metadata and return the result."""
        with open(self.raw_path, errors="replace") as fh:
            parsed = parse_lines(fh, device=swap.device)
        if self.options.raw_trace_out is not None:
            with AtomicPath(self.options.raw_trace_out, self.options.force) as ap:
                shutil.copyfile(self.raw_path, ap.tmp)
        stream = self.child.stream(parsed, run)
        # cross-check with the device's own counters: every request the loop device completed must be in the trace
        missing = (loop_delta["read_ios"] + loop_delta["write_ios"]) - int(np.count_nonzero(stream.op != OP_DISCARD))
        lost = int(buffer_stats["overrun"] + buffer_stats["dropped"] + parsed.lost_events) + max(0, missing)
        req = summarize_requests(stream.op, stream.length, self.child.page_bytes)
        d = self.child.describe(self, free, run, parsed, stream, req, loop_delta, missing, rec)
        kernel = {
            **self.facts, **swap.facts, "cgroup_version": g.version, **d.kernel,
            "trace_buffer": {**buffer_stats, "buffer_kb": self.options.buffer_kb, "bytes_read": rec.bytes_read},
            "lost_events": lost,
            "malformed_lines": parsed.malformed,
            "requests_before_start": stream.before_start,
            "removed_leftovers": self.removed,
            "loadavg_start": round(self.load_start, 2),
            "loadavg_end": round(os.getloadavg()[0], 2),
        }
        params = {**d.params, "unlimited_run": self.options.unlimited_run, "swap_bytes": swap.facts["device_bytes"],
                  "rotational": self.options.rotational, "buffer_kb": self.options.buffer_kb}
        metadata = {
            "source": "kernel", "page_bytes": self.child.page_bytes, "device_bytes": swap.facts["device_bytes"],
            "memory_bytes": d.memory_bytes, "steps": d.steps, "first_step": d.first_step,
            "duration_us": stream.duration_us, **d.meta, "params": params, "summary": d.summary, "kernel": kernel,
        }
        with TraceWriter(self.out_path, "swapio", metadata, force=self.options.force) as w:
            w.write(t_us=stream.t_us, step=stream.step, op=stream.op, offset=stream.offset,
                    length=stream.length, cause=stream.cause)
        return CaptureResult(
            path=self.out_path, summary=d.summary, pages_in=req["pages_in"], pages_out=req["pages_out"],
            pswpin=d.summary["pswpin"], pswpout=d.summary["pswpout"], major_faults=d.major_faults,
            memory_bytes=d.memory_bytes, baseline_bytes=d.baseline_bytes, limit_bytes=d.limit_bytes,
            slowdown=d.slowdown, lost_events=lost, malformed_lines=parsed.malformed, kernel=kernel,
            removed_leftovers=self.removed,
        )


def capture(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    options: CaptureOptions | None = None,
    *,
    compute: str | None = None,
    lock_baseline: bool = True,
    trace_reclaim: bool = False,
    **changes: Any,
) -> CaptureResult:
    """Replay an access trace under the real kernel and record its swap I/O.

    Parameters
    ----------
    trace : path
        An ``access`` trace (generate).
    out : path
        The ``swapio`` file to write (``source: kernel``).
    options : CaptureOptions, optional
        How the capture runs: the budget (``memory_bytes`` or ``memory_fraction``, exactly one; the
        cgroup limit is the child's own baseline after warm-up plus this budget plus the page tables
        of the footprint mapping, :func:`~swaptrace.capture.replay.page_table_bytes`, which the
        kernel charges to the cgroup but the emulator does not model), the unlimited run, swap size,
        work folder, ring buffer, timeout, raw trace copy, ``force`` and ``progress`` (called with 1
        after each replayed step of the traced run).
    compute : {None, "mlp"}
        Run the preset's dense MLP forward/backward (numpy) after each step.
    lock_baseline : bool
        Lock the child's own memory after warm-up (``mlockall``) so that the
        kernel cannot swap the interpreter out to make room for the model.
    trace_reclaim : bool
        Also record the vmscan and memcg tracepoints of the limited run
        (:mod:`swaptrace.capture.reclaim`) and store reclaim counters per
        step under ``kernel.reclaim``. Off by default: the extra events are
        not free, and the stream is the ground truth.
    **changes
        Fields of :class:`~swaptrace.capture.options.CaptureOptions` as keywords (``memory_bytes=64 << 20``),
        each replacing that field of ``options``.

    One capture runs at a time on a machine (a lock on :data:`~swaptrace.capture.host.LOCK_PATH`),
    and only while no other swap area is active: the kernel would spread
    the capture's swap traffic over it. See :class:`CaptureSession`.
    """
    options = CaptureOptions.of(options, **changes)
    child = ReplayChild(trace, memory_bytes=options.memory_bytes, memory_fraction=options.memory_fraction,
                        compute=compute, lock_baseline=lock_baseline, trace_reclaim=trace_reclaim,
                        progress=options.progress)
    return CaptureSession(child, out, options).run()
