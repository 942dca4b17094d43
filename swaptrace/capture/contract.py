"""What a capture session and its child agree on.

:class:`~swaptrace.capture.session.CaptureSession` owns the machine (lock, leftovers, swap device,
cgroups, tracefs, undo, the stream's cross-check with the device, the file); what runs in the cgroups
is a *child* of one of two kinds: :class:`~swaptrace.capture.replay.ReplayChild` replays an access
trace (``capture TRACE``), :class:`~swaptrace.capture.command.CommandChild` runs any program
(``capture -- CMD``). The child answers with a :class:`Description` of its runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: swap beyond what the workload itself needs, in bytes: the child's own heap may be swapped too
SWAP_HEADROOM_BYTES = 256 << 20

#: memory.stat fields a run's description keeps in the metadata
STAT_KEYS = ("pgmajfault", "pgfault", "pgpgin", "pgpgout", "rss", "cache", "swap", "anon", "file", "unevictable",
             "swapcached", "active_anon", "inactive_anon", "active_file", "inactive_file", "mapped_file", "kernel",
             "pagetables")


@dataclass(frozen=True)
class Description:
    """What a kind of child adds to a capture's file and result (``describe``).

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
