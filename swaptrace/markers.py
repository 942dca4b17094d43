"""Step markers for a program captured by ``swaptrace capture -- CMD``.

A training loop calls :func:`mark_step` once at the start of every step. Under
a capture, the environment variable ``SWAPTRACE_MARKER`` names a file (the
capture's tracefs ``trace_marker``), and each call writes one line to it::

    swaptrace step N

so the kernel's block requests can be attributed to steps, and what comes
before the first mark is the program's start-up. Outside a capture the
variable is unset and the call does nothing. Any language can follow the same
protocol: open the file named by ``SWAPTRACE_MARKER`` for writing and write
that line at the start of each step (one ``write`` per line).

This module imports nothing heavy, so importing it costs a training script
nothing.
"""

from __future__ import annotations

import os

#: the environment variable naming the marker file
MARKER_ENV = "SWAPTRACE_MARKER"

_state = {"fd": None, "path": None, "next": 0}


def _fd() -> int | None:
    path = os.environ.get(MARKER_ENV)
    if not path:
        return None
    if _state["path"] != path:  # first call, or the variable changed (a test, a fork)
        if _state["fd"] is not None:
            os.close(_state["fd"])
        _state["fd"] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        _state["path"] = path
    return _state["fd"]


def mark_step(step: int | None = None) -> None:
    """Mark the start of a training step (a no-op outside a capture).

    Parameters
    ----------
    step : int, optional
        The step's number; by default one more than the last one marked
        (0 for the first call).
    """
    fd = _fd()
    n = _state["next"] if step is None else int(step)
    _state["next"] = n + 1
    if fd is not None:
        os.write(fd, f"swaptrace step {n}\n".encode())


def mark(text: str) -> None:
    """Write a free-form marker line ``swaptrace TEXT`` (a no-op outside a capture)."""
    fd = _fd()
    if fd is not None:
        os.write(fd, f"swaptrace {text}\n".encode())
