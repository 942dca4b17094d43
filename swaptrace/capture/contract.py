"""What a capture session and its child agree on: the calls, what the child is given, what it returns.

:class:`~swaptrace.capture.session.CaptureSession` owns the machine (lock, leftovers, swap device,
cgroups, tracefs, undo, the stream's cross-check with the device, the file); what runs in the cgroups
is a *child* of one of two kinds, both :class:`CaptureChild`:

* :class:`~swaptrace.capture.replay.ReplayChild` replays an access trace (``capture TRACE``);
* :class:`~swaptrace.capture.command.CommandChild` runs any program (``capture -- CMD``).

The session gives the child a :class:`ChildContext` (names, folders, options, a way to register
undo steps) and, to describe its runs, a :class:`Recording` of the limited run; the child answers
with a :class:`Description`. A run record (``free``, ``run`` below) is the child's own type, which
the session only hands back to the child.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.capture.convert import ParsedTrace, StreamColumns
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.stalls import StallRecorder

#: swap beyond what the workload itself needs, in bytes: the child's own heap may be swapped too
SWAP_HEADROOM_BYTES = 256 << 20

#: memory.stat fields a run's description keeps in the metadata
STAT_KEYS = ("pgmajfault", "pgfault", "pgpgin", "pgpgout", "rss", "cache", "swap", "anon", "file", "unevictable",
             "swapcached", "active_anon", "inactive_anon", "active_file", "inactive_file", "mapped_file", "kernel",
             "pagetables")


@dataclass(frozen=True)
class ChildContext:
    """What the session gives its child once the work folder exists (fixed for the whole capture).

    Attributes
    ----------
    name : str
        The capture's name, ``swaptrace-capture-<pid>``: the start of the name of everything it
        creates, so that :mod:`swaptrace.capture.leftovers` finds what a killed capture left.
    workdir : Path
        The capture's work folder (removed at the end): the child's input and scratch files go here.
    raw_path : Path
        Where the limited run's raw ftrace text is written (``workdir/trace.txt``).
    options : CaptureOptions
        The capture's options (``timeout_s``, ``swap_bytes``, ``unlimited_run`` ... ).
    undo : callable
        ``undo(step)`` registers ``step()`` (no arguments) to run when the capture ends, however it
        ends, before the steps registered earlier; a failing step does not stop the others.
    stalls : StallRecorder, optional
        Each run calls its ``begin(tag, pids)``, ``root(pid)``, ``start()``, ``mark(step)`` at each
        step's end and ``end(step)`` (:mod:`swaptrace.capture.stalls`); None: nothing is measured.
    """

    name: str
    workdir: Path
    raw_path: Path
    options: CaptureOptions
    undo: Callable[[Callable[[], object]], None]
    stalls: StallRecorder | None = None


@dataclass(frozen=True)
class Recording:
    """The limited run as the session recorded it, for :meth:`CaptureChild.describe`.

    Attributes
    ----------
    parsed : ParsedTrace
        The raw trace's requests on the swap device and its markers.
    stream : StreamColumns
        The stream's columns (:meth:`CaptureChild.stream`).
    requests : dict
        :func:`swaptrace.compare.summarize_requests` of the stream (pages in and out, request counts).
    loop_delta : dict of str to int
        The loop device's counters over the run (:func:`swaptrace.capture.swapdev.parse_block_stat`:
        completed requests, 512-byte sectors, milliseconds).
    missing : int
        Requests the device completed that the trace lacks (negative: the trace has more).
    missing_events : tuple of str
        Extra tracepoints (:attr:`CaptureChild.extra_events`) this kernel does not have.
    """

    parsed: ParsedTrace
    stream: StreamColumns
    requests: dict[str, Any]
    loop_delta: dict[str, int]
    missing: int
    missing_events: tuple[str, ...]


@dataclass(frozen=True)
class Description:
    """What a kind of child adds to a capture's file and result (:meth:`CaptureChild.describe`).

    ``summary``, ``kernel``, ``meta`` and ``params`` are merged into the file's metadata (``meta`` at
    its top level); the rest are the result's numbers: ``steps`` and ``first_step`` of the stream,
    ``memory_bytes`` (the budget), ``baseline_bytes``, ``limit_bytes`` (bytes), ``slowdown`` (limited
    over unlimited time, None without the unlimited run), ``major_faults``.
    """

    summary: dict[str, Any]
    kernel: dict[str, Any]
    meta: dict[str, Any]
    params: dict[str, Any]
    steps: int
    first_step: int
    memory_bytes: int
    baseline_bytes: int
    limit_bytes: int
    slowdown: float | None
    major_faults: int


class CaptureChild(Protocol):
    """What runs in a capture's memory cgroups. The session calls, once each and in this order:

    1. ``check_inputs(options)`` before anything on the machine is changed: refuse bad inputs with a
       :class:`~swaptrace.errors.SwaptraceError`; :attr:`page_bytes` is known afterwards.
    2. ``warm_up()`` with the capture lock held, leftovers removed and no other swap active: anything
       the runs would otherwise pay for (compiling, probing the machine), done before the baseline.
    3. ``prepare(ctx)`` once the work folder exists: write the child's input files there.
    4. ``run_unlimited(ctx, group)`` only if ``options.unlimited_run``, before any swap exists: run in
       ``group`` without a limit; return the run's record (``free``).
    5. ``swap_bytes(ctx, free)``: the swap device's size in bytes (``free`` is None without step 4).
    6. ``run_limited(ctx, group, trace, start_tracing, free)``: run in ``group`` under the child's
       limit, calling ``start_tracing()`` just before the workload starts; step markers go to
       ``trace.marker_path()``. Return the run's record (``run``).
    7. ``stream(parsed, run)``: the raw trace's requests as the stream's columns, with steps.
    8. ``describe(ctx, free, run, recording)``: the child's part of the file's metadata and result.

    In steps 4 and 6 ``group`` is named but not yet created: the child creates it (and sets its
    limit), the session removes it. A failing program or replay raises
    (:class:`~swaptrace.errors.ConfigError`, :class:`~swaptrace.errors.ToolError`); the session then
    undoes everything.
    """

    #: tracepoints the limited run records besides the block requests (``"subsystem/event"``)
    extra_events: tuple[str, ...]
    #: the page size of the workload, in bytes (requests are summarized in these pages)
    page_bytes: int

    def check_inputs(self, options: CaptureOptions) -> None: ...

    def warm_up(self) -> None: ...

    def prepare(self, ctx: ChildContext) -> None: ...

    def run_unlimited(self, ctx: ChildContext, group: cg.MemoryCgroup) -> Any: ...

    def swap_bytes(self, ctx: ChildContext, free: Any) -> int: ...

    def run_limited(self, ctx: ChildContext, group: cg.MemoryCgroup, trace: tracing.BlockTrace,
                    start_tracing: Callable[[], None], free: Any) -> Any: ...

    def stream(self, parsed: ParsedTrace, run: Any) -> StreamColumns: ...

    def describe(self, ctx: ChildContext, free: Any, run: Any, recording: Recording) -> Description: ...
