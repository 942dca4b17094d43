"""Orchestration of one capture: set up, run the child twice, record, undo.

Order (docs/capture.md, "What it does"), each set-up step registering its undo on a
:class:`contextlib.ExitStack`::

    the capture lock (/run/swaptrace-capture.lock; a second capture is refused)
    leftovers of dead captures removed
    refused if any other swap area is active (it would share the swap traffic)
    trace -> codes file (page << 1 | write, int64) in the work folder
    kernel.task_delayacct on (the old value noted)  -> task delays, PSI, load per run (.stalls)
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

The machine's side is :mod:`.host` (checks, facts, the lock) and :mod:`.leftovers`; the child's
is :mod:`.contract` (the calls), :mod:`.replay` (``capture TRACE``) and :mod:`.command`
(``capture -- CMD``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.capture import cgroup as cg
from swaptrace.capture import host, leftovers, taskstats, tracing
from swaptrace.capture.contract import CaptureChild, ChildContext, Recording
from swaptrace.capture.convert import parse_lines
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.replay import ReplayChild
from swaptrace.capture.stalls import StallRecorder
from swaptrace.capture.swapdev import SwapDevice
from swaptrace.compare import summarize_requests
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.traceio import OP_DISCARD, AtomicPath, TraceWriter, check_output_path
from swaptrace.errors import SwaptraceError, ToolError


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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


@dataclass(frozen=True)
class _Outset:
    """The machine as the capture found it: kernel facts, leftovers removed, load average (1 min)."""

    facts: dict[str, Any]
    removed: list[str]
    load_start: float


@dataclass(frozen=True)
class _Rig:
    """What the limited run is recorded with: the swap device, its cgroup, its tracefs instance."""

    swap: SwapDevice
    group: cg.MemoryCgroup
    trace: tracing.BlockTrace


class CaptureSession:
    """One capture: checks, then set-up steps each registering its undo on an :class:`contextlib.ExitStack`.

    Set up in this order, undone in reverse (on success, error, Ctrl-C and
    SIGTERM/SIGHUP, which are turned into KeyboardInterrupt): the capture
    lock, signal handlers, the work folder, the unlimited run's cgroup,
    the swap device (file, loop, swapon), the limited run's cgroup, the
    tracefs instance. An undo step that fails does not stop the others; its
    error is raised at the end (as :class:`~swaptrace.errors.ToolError`)
    unless another error is already on its way out.

    What runs in the cgroups is the ``child``, a :class:`~swaptrace.capture.contract.CaptureChild`
    of one of two kinds: :class:`~swaptrace.capture.replay.ReplayChild` (replays an access trace;
    :func:`capture`) and :class:`~swaptrace.capture.command.CommandChild` (runs any program;
    ``capture -- CMD``). How it starts, what it locks, what the limit is, how big the swap must be,
    how the trace turns into steps and what its runs record are the child's; the lock, leftovers,
    swap, cgroups, tracefs, clean-up, the stream's cross-check with the device and the file are
    this class's. The child gets a :class:`~swaptrace.capture.contract.ChildContext`, never the
    session.

    Parameters
    ----------
    child : CaptureChild
        What runs in the cgroups.
    out : path
        The ``swapio`` file to write (``source: kernel``).
    options : CaptureOptions, optional
        How the capture runs (the session reads all but the budget, which is the child's).
    """

    def __init__(self, child: CaptureChild, out: str | os.PathLike, options: CaptureOptions | None = None):
        self.child, self.out = child, out
        self.options = options if options is not None else CaptureOptions()
        self.work_base = Path(self.options.work_base or leftovers.DEFAULT_WORK_BASE)
        self.name = f"{leftovers.PREFIX}{os.getpid()}"
        self.workdir = self.work_base / self.name
        self._cleanup_errors: list[str] = []
        self.say = getattr(child, "say", None) or _to_stderr
        self.stalls: StallRecorder | None = None

    # ------------------------------------------------------------------ undo

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

    # ------------------------------------------------------------------ set-up steps, each with its undo

    def _make_workdir(self, stack: contextlib.ExitStack) -> ChildContext:
        """The work folder, and the context the child is given from now on."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        stack.callback(shutil.rmtree, self.workdir, ignore_errors=True)
        return ChildContext(name=self.name, workdir=self.workdir, raw_path=self.workdir / "trace.txt",
                            options=self.options, undo=functools.partial(self._undo, stack),
                            stalls=self._stall_recorder(stack))

    def _stall_recorder(self, stack: contextlib.ExitStack) -> StallRecorder:
        """Task delay accounting on for the capture (restored by an undo step, or by the next capture's
        leftovers pass if this one is killed), and the recorder of the runs' stalls."""
        restore = taskstats.enable_delayacct()
        self._undo(stack, restore)
        opts = self.options
        self.stalls = StallRecorder(wait_quiet=opts.wait_quiet, quiet_timeout_s=opts.quiet_timeout_s, say=self.say)
        stack.callback(self.stalls.close)
        return self.stalls

    def _run_unlimited(self, ctx: ChildContext):
        g = cg.MemoryCgroup(f"{self.name}-free")
        ctx.undo(g.remove)
        free = self.child.run_unlimited(ctx, g)
        g.remove()
        return free

    def _setup_rig(self, stack: contextlib.ExitStack, ctx: ChildContext, swap_bytes: int) -> _Rig:
        """Swap device (file, loop, swapon), the limited run's cgroup, the tracefs instance on the device."""
        swap = SwapDevice(self.workdir / f"{self.name}.swap", int(swap_bytes), rotational=self.options.rotational)
        self._undo(stack, swap.teardown)
        swap.setup()
        group = cg.MemoryCgroup(self.name)
        self._undo(stack, group.remove)
        rec = tracing.BlockTrace(self.name, swap.device, ctx.raw_path, buffer_kb=self.options.buffer_kb,
                                 extra_events=self.child.extra_events)
        self._undo(stack, rec.teardown)
        rec.setup()
        return _Rig(swap, group, rec)

    # ------------------------------------------------------------------ the capture

    def run(self) -> CaptureResult:
        """Check, set up, run (unlimited, then limited and traced), write the stream, undo."""
        out_path = check_output_path(self.out, self.options.force)
        self.child.check_inputs(self.options)
        host.check_machine(self.work_base)
        with contextlib.ExitStack() as stack:
            stack.push(self._raise_cleanup_errors)  # outermost: sees every undo step's outcome
            stack.callback(os.close, host.hold_capture_lock(host.LOCK_PATH))
            removed = leftovers.cleanup_leftovers(self.work_base)
            host.refuse_other_swap()
            # other work on the machine changes the kernel's timing (when writes complete, who runs reclaim)
            load_start = os.getloadavg()[0]
            self.child.warm_up()
            outset = _Outset(facts=host.kernel_facts(), removed=removed, load_start=load_start)
            stack.enter_context(sigterm_as_interrupt(hangup=True))  # a closed terminal (SIGHUP) too
            ctx = self._make_workdir(stack)
            self.child.prepare(ctx)
            free = self._run_unlimited(ctx) if self.options.unlimited_run else None
            rig = self._setup_rig(stack, ctx, self.child.swap_bytes(ctx, free))
            run, buffer_stats, loop_delta = self._run_limited(ctx, rig, free)
            recording = self._recording(ctx, rig, run, loop_delta)
            return self._write(out_path, ctx, outset=outset, free=free, run=run, recording=recording, rig=rig,
                               buffer_stats=buffer_stats)

    def _run_limited(self, ctx: ChildContext, rig: _Rig, free):
        """The traced run under the memory limit; returns the child's run, the ring-buffer stats, the loop's counters."""
        loop_before: dict[str, int] = {}

        def start_tracing():
            loop_before.update(rig.swap.stat())
            rig.trace.start()

        run = self.child.run_limited(ctx, rig.group, rig.trace, start_tracing, free)
        buffer_stats = rig.trace.stop()
        loop_after = rig.swap.stat()
        rig.group.remove()
        loop_delta = {k: loop_after[k] - loop_before.get(k, 0) for k in loop_after}
        return run, buffer_stats, loop_delta

    def _recording(self, ctx: ChildContext, rig: _Rig, run, loop_delta: dict[str, int]) -> Recording:
        """The raw trace parsed into the stream, cross-checked with the device's own counters."""
        with open(ctx.raw_path, errors="replace") as fh:
            parsed = parse_lines(fh, device=rig.swap.device)
        if self.options.raw_trace_out is not None:
            with AtomicPath(self.options.raw_trace_out, self.options.force) as ap:
                shutil.copyfile(ctx.raw_path, ap.tmp)
        stream = self.child.stream(parsed, run)
        # cross-check with the device's own counters: every request the loop device completed must be in the trace
        missing = (loop_delta["read_ios"] + loop_delta["write_ios"]) - int(np.count_nonzero(stream.op != OP_DISCARD))
        return Recording(parsed=parsed, stream=stream,
                         requests=summarize_requests(stream.op, stream.length, self.child.page_bytes),
                         loop_delta=loop_delta, missing=missing, missing_events=tuple(rig.trace.missing_events))

    def _write(self, out_path: Path, ctx: ChildContext, *, outset: _Outset, free, run, recording: Recording,
               rig: _Rig, buffer_stats: dict[str, int]) -> CaptureResult:
        """Write the ``swapio`` file with its metadata and return the result."""
        parsed, stream, req, opts = recording.parsed, recording.stream, recording.requests, self.options
        lost = int(buffer_stats["overrun"] + buffer_stats["dropped"] + parsed.lost_events) + max(0, recording.missing)
        d = self.child.describe(ctx, free, run, recording)
        kernel = {
            **outset.facts, **rig.swap.facts, "cgroup_version": rig.group.version, **d.kernel,
            "trace_buffer": {**buffer_stats, "buffer_kb": opts.buffer_kb, "bytes_read": rig.trace.bytes_read},
            "lost_events": lost,
            "malformed_lines": parsed.malformed,
            "requests_before_start": stream.before_start,
            "removed_leftovers": outset.removed,
            "loadavg_start": round(outset.load_start, 2),
            "loadavg_end": round(os.getloadavg()[0], 2),
            **(self.stalls.report() if self.stalls is not None else {}),
        }
        params = {**d.params, "unlimited_run": opts.unlimited_run, "swap_bytes": rig.swap.facts["device_bytes"],
                  "rotational": opts.rotational, "buffer_kb": opts.buffer_kb}
        metadata = {
            "source": "kernel", "page_bytes": self.child.page_bytes, "device_bytes": rig.swap.facts["device_bytes"],
            "memory_bytes": d.memory_bytes, "steps": d.steps, "first_step": d.first_step,
            "duration_us": stream.duration_us, **d.meta, "params": params, "summary": d.summary, "kernel": kernel,
        }
        with TraceWriter(out_path, "swapio", metadata, force=opts.force) as w:
            w.write(t_us=stream.t_us, step=stream.step, op=stream.op, offset=stream.offset,
                    length=stream.length, cause=stream.cause)
        return CaptureResult(
            path=out_path, summary=d.summary, pages_in=req["pages_in"], pages_out=req["pages_out"],
            pswpin=d.summary["pswpin"], pswpout=d.summary["pswpout"], major_faults=d.major_faults,
            memory_bytes=d.memory_bytes, baseline_bytes=d.baseline_bytes, limit_bytes=d.limit_bytes,
            slowdown=d.slowdown, lost_events=lost, malformed_lines=parsed.malformed, kernel=kernel,
            removed_leftovers=outset.removed,
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
