"""SIGTERM as Ctrl-C: the one handler that long work installs so that undo code runs on ``kill``.

Python ends on an uncaught SIGTERM without running ``finally`` blocks or ``with`` exits, so a
killed capture would leave its swap device and cgroups, a killed fio run its partial results, a
killed writer its temporary file. Inside :func:`sigterm_as_interrupt` the signal raises
:class:`KeyboardInterrupt` instead, which every such undo path already handles like Ctrl-C (and
the CLI turns into its one-line exit).

Users: :class:`swaptrace.core.traceio.TraceWriter` (while a file is open),
``swaptrace.fio.runner`` (while fio runs), ``swaptrace.parallel.sweep`` (while a sweep runs) and
``swaptrace.capture.session`` (for the whole capture, SIGHUP too: a closed terminal).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def _raise_interrupt(signum, frame):  # signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt(*, hangup: bool = False) -> Iterator[bool]:
    """Within the block, SIGTERM (and SIGHUP if ``hangup``) raise :class:`KeyboardInterrupt`.

    Parameters
    ----------
    hangup : bool
        Also turn SIGHUP (the controlling terminal closed) into the interrupt.

    Yields
    ------
    bool
        Whether a handler was installed. Outside the main thread Python refuses signal handlers
        (``ValueError``), so nothing is installed there and nothing is restored; the block runs
        all the same.

    Notes
    -----
    On leaving the block, however it is left, each signal gets back the handler it had on entry,
    in reverse order of installation. A previous handler that was not installed from Python
    (``signal.signal`` returned None) cannot be put back and is left replaced.
    """
    sigs = (signal.SIGTERM, signal.SIGHUP) if hangup else (signal.SIGTERM,)
    previous: list[tuple[signal.Signals, object]] = []
    for sig in sigs:
        try:
            previous.append((sig, signal.signal(sig, _raise_interrupt)))
        except ValueError:  # not the main thread
            pass
    try:
        yield bool(previous)
    finally:
        for sig, handler in reversed(previous):
            if handler is not None:
                signal.signal(sig, handler)
