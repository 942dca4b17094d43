"""A capture's marker file for tests, and a guard that turns a hang into a failure.

:func:`capture_marker` sets ``SWAPTRACE_MARKER`` to a marker file that passes :mod:`swaptrace.markers`' rule:
with root and tracefs, a real tracefs instance named as a capture of this process names its own; elsewhere a
plain file, with the rule's final checks (:func:`swaptrace.markers.open_marker`) replaced by a plain opener, so
the tests of *what* is written run everywhere (the rule itself is tested in tests/test_markers.py).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from swaptrace import markers

TRACEFS = Path("/sys/kernel/tracing")
_MARK = re.compile(r"tracing_mark_write: (swaptrace .*)$")


def reset_markers() -> None:
    """Close the marker descriptor :mod:`swaptrace.markers` caches and forget its state."""
    if markers._state["fd"] is not None:
        os.close(markers._state["fd"])
    markers._state.update(fd=None, path=None, next=0)


def tracefs_instances() -> Path | None:
    """The tracefs ``instances`` folder if this process may make an instance there (root, tracefs mounted)."""
    folder = TRACEFS / "instances"
    return folder if os.geteuid() == 0 and folder.is_dir() and os.access(folder, os.W_OK) else None


@contextmanager
def capture_marker(monkeypatch, tmp_path: Path, tag: str = "test") -> Iterator[Callable[[], list[str]]]:
    """``SWAPTRACE_MARKER`` naming a capture's marker file for the block; yields a reader of the lines written."""
    reset_markers()
    folder = tracefs_instances()
    if folder is not None:
        inst = folder / f"swaptrace-capture-{os.getpid()}-{tag}"
        inst.mkdir()
        monkeypatch.setenv(markers.MARKER_ENV, str(inst / "trace_marker"))

        def read() -> list[str]:
            lines = (inst / "trace").read_text().splitlines()
            return [m.group(1).strip() for m in map(_MARK.search, lines) if m]
        try:
            yield read
        finally:
            reset_markers()
            inst.rmdir()
        return
    plain = tmp_path / "marker"
    plain.write_text("")
    monkeypatch.setenv(markers.MARKER_ENV, str(plain))
    monkeypatch.setattr(markers, "open_marker", lambda path: os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC))
    try:
        yield lambda: plain.read_text().splitlines()
    finally:
        reset_markers()


class Hang(Exception):
    """The guarded block ran past its time."""


@contextmanager
def no_hang(seconds: int = 20) -> Iterator[None]:
    """Fail (raise :class:`Hang`) instead of waiting for ever: SIGALRM interrupts a blocking ``open`` of a FIFO."""
    def on_alarm(signum, frame):
        raise Hang(f"still running after {seconds} s: it hung")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
