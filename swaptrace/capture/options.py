"""The options both kinds of capture share (``capture TRACE`` and ``capture -- CMD``), in one frozen object."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CaptureOptions:
    """How a capture runs, whatever its child: the session's set-up and the budget the child is given.

    Parameters
    ----------
    memory_bytes : int, optional
        The memory limit's size, in bytes. A trace replay: the budget for the model's pages, on top of
        the child's own baseline after warm-up and the page tables of the footprint mapping. A program
        (``-- CMD``): the cgroup's whole limit, for its whole process tree.
    memory_fraction : float, optional
        Instead of ``memory_bytes``: a replay's budget as this fraction of the trace's footprint; a
        program's limit as this fraction of the unlimited run's peak usage.
    unlimited_run : bool
        Also run the child without a memory limit first, for the slowdown (and a program's peak).
    swap_bytes : int, optional
        Swap size in bytes; by default the child's own estimate (a replay: footprint + 256 MiB).
    rotational : bool
        Present the loop device as rotational (cluster readahead) instead of as an SSD (VMA
        readahead, the default).
    work_base : path, optional
        Folder for the swap file and scratch files (default /var/tmp; must not be tmpfs, whose pages
        would themselves be swapped).
    buffer_kb : int
        Per-CPU tracefs ring-buffer size in KiB.
    timeout_s : float, optional
        Give up on a run that takes longer, in seconds.
    raw_trace_out : path, optional
        Also keep the limited run's raw ftrace text here (for debugging and test data).
    force : bool
        Overwrite existing output files.
    progress : callable, optional
        Called with 1 after each step of the traced run (a replayed step, a program's step marker).
    wait_quiet : float, optional
        Before each run wait until the machine's 1-min load average is at most this (None: do not wait).
    quiet_timeout_s : float
        The longest such wait, in seconds; the run then starts anyway (the wait and the load are recorded).
    """

    memory_bytes: int | None = None
    memory_fraction: float | None = None
    unlimited_run: bool = True
    swap_bytes: int | None = None
    rotational: bool = False
    work_base: str | os.PathLike | None = None
    buffer_kb: int = 32 * 1024
    timeout_s: float | None = None
    raw_trace_out: str | os.PathLike | None = None
    force: bool = False
    progress: Callable[[int], Any] | None = None
    wait_quiet: float | None = None
    quiet_timeout_s: float = 600.0

    @classmethod
    def of(cls, options: CaptureOptions | None = None, **changes: Any) -> CaptureOptions:
        """``options`` (default: all defaults) with ``changes``, keyword arguments named as the fields.

        This lets :func:`~swaptrace.capture.session.capture` and
        :func:`~swaptrace.capture.command.capture_command` take the options as keywords too. A name
        that is not a field raises TypeError, as an unknown keyword argument does.
        """
        return dataclasses.replace(options if options is not None else cls(), **changes)
