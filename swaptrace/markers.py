"""Step markers for a program captured by ``swaptrace capture -- CMD``.

A training loop calls :func:`mark_step` once at the start of every step. Under a capture, the environment
variable ``SWAPTRACE_MARKER`` names the capture's marker file, and each call writes one line to it::

    swaptrace step N

so the kernel's block requests can be attributed to steps, and what comes before the first mark is the
program's start-up. :func:`mark` writes another label (``swaptrace end`` when training is over). Outside a
capture the variable is unset and both calls do nothing. Any language can follow the same protocol: open the
file named by ``SWAPTRACE_MARKER`` for writing and write that line at the start of each step (one ``write``
per line).

Whose file it is
----------------
The variable is only a name, and a stale or mistaken one must not make a program write into a file of its
user's (``SWAPTRACE_MARKER=notes.txt``), block on a FIFO nobody reads, or write to a device. So these calls
write only to a marker file **a capture made for this program**, which they check from things only the capture
can have set up, before the first write and whenever the variable changes:

1. the value is an absolute path that is, links resolved,
   ``.../instances/swaptrace-capture-<PID>[-<run>]/trace_marker``: the
   ``trace_marker`` of a tracefs instance named as :mod:`swaptrace.capture.leftovers` names everything a capture
   creates, with the capturing process's ``PID``;
2. that ``PID`` is this process or one of its ancestors (``PPid:`` of ``/proc/PID/status``, followed up): the
   capture runs its program as its child, so a capture that is not this program's own (or one long gone) does
   not qualify;
3. the path is a regular file (``stat``, before it is opened: a FIFO, device, socket or folder is never
   opened), opened for writing with ``O_NONBLOCK`` (never created or truncated; a FIFO swapped in meanwhile
   fails with ``ENXIO`` instead of blocking), and the file opened is the one checked (same device and inode);
4. the opened file lies on a ``tracefs`` mount (its mount id from ``/proc/self/fdinfo`` looked up in
   ``/proc/self/mountinfo``): only root can create tracefs instances, and no user file is on tracefs.

A value that fails any of these is refused with a :class:`MarkerError` (a ``ValueError``) of one line naming the
variable and what failed; nothing is written. ``swaptrace train`` checks the variable before it allocates
anything (:func:`check_marker`), so ``train`` under a stray ``SWAPTRACE_MARKER`` ends in one line, exit code 2.
A program that leaves the capture's process tree (a daemon that double-forks) or runs in a PID namespace of its
own cannot be told from a stranger by rule 2, and is refused too.

What a mark may say
-------------------
``mark_step(n)`` takes an integer (``bool`` is refused, as are ``2.9`` and ``"3"``: ``TypeError``) in
``[0, MAX_STEP]``: the capture stores mark ``n`` as step ``n + 1`` in its ``uint32`` step column
(:func:`swaptrace.capture.convert.to_stream`), so ``MAX_STEP = 2**32 - 2``; it is also the last step
``swaptrace train --steps`` can reach. ``mark(text)`` takes a label of printable characters (no newline or
other control character: one label is one line), at most :data:`MAX_LABEL_BYTES` bytes in UTF-8, whose first word
is not one the capture reads as its own (``step``, ``start``): a forged ``mark("step 5")`` is refused; ``end`` is
allowed, and means training is over.

This module imports nothing heavy (nor anything else of swaptrace's), so importing it costs a training script
nothing.
"""

from __future__ import annotations

import errno
import operator
import os
import re
import stat
from pathlib import Path

#: the environment variable naming the marker file
MARKER_ENV = "SWAPTRACE_MARKER"
#: the largest step a mark may carry: it is stored as ``n + 1`` in a ``uint32`` column
MAX_STEP = (1 << 32) - 2
#: the longest label :func:`mark` writes, in UTF-8 bytes: far below the kernel's limit on one ``trace_marker``
#: write (1 KiB less the event's header on older kernels; longer writes are cut)
MAX_LABEL_BYTES = 256
#: first words of a marker line the capture reads as its own (``swaptrace.capture.convert``): not a label's
RESERVED_WORDS = ("step", "start")
#: what a capture's tracefs instance is called (:data:`swaptrace.capture.leftovers.PREFIX` + the capture's pid)
_INSTANCE = re.compile(r"swaptrace-capture-(?P<pid>[0-9]{1,10})(?:-[A-Za-z0-9_.-]*)?")
#: the furthest up the process tree the ancestor walk goes (deeper trees do not occur; this bounds a loop)
_MAX_DEPTH = 4096

_state: dict = {"fd": None, "path": None, "next": 0}


class MarkerError(ValueError):
    """``SWAPTRACE_MARKER`` is not a capture's marker file, or a mark's value is out of range: one line.

    A ``ValueError``, as a library call's bad argument is; ``swaptrace train`` turns it into a one-line
    :class:`~swaptrace.errors.ConfigError` (exit code 2). (This module imports nothing of swaptrace's, so
    ``import swaptrace`` stays light.)
    """


def _refuse(path: str, why: str) -> MarkerError:
    return MarkerError(f"{MARKER_ENV}={path!r} is not the marker file of a swaptrace capture running this program: "
                       f"{why}; marks go only to a capture's own file (unset {MARKER_ENV} outside "
                       "`swaptrace capture -- CMD`)")


def _parent(pid: int, proc: Path) -> int | None:
    try:
        text = (proc / str(pid) / "status").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("PPid:"):
            value = line.split()[1:]
            return int(value[0]) if value and value[0].isdigit() else None
    return None


def _is_ancestor(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` is this process or one of its ancestors."""
    here: int | None = os.getpid()
    for _ in range(_MAX_DEPTH):
        if here is None or here <= 0:
            return False
        if here == pid:
            return True
        here = _parent(here, proc)
    return False


def _fstype(fd: int, proc: Path = Path("/proc")) -> str | None:
    """The filesystem type of the mount an open descriptor's file lies on (None when /proc cannot tell)."""
    try:
        info = (proc / "self" / "fdinfo" / str(fd)).read_text()
        mounts = (proc / "self" / "mountinfo").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    mnt = next((line.split()[1] for line in info.splitlines() if line.startswith("mnt_id:")), None)
    for line in mounts.splitlines():
        left, sep, right = line.partition(" - ")
        if sep and left.split()[:1] == [mnt] and right.split():
            return right.split()[0]
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_marker(path: str) -> int:
    """A write descriptor of ``path`` if it is the marker file of a capture running this program (the rules of
    the module docstring, in order); else :class:`MarkerError`. Nothing is written."""
    p = Path(os.path.realpath(path))  # links resolved (readlink only: nothing is opened)
    instance = _INSTANCE.fullmatch(p.parent.name)
    if not os.path.isabs(path) or p.name != "trace_marker" or p.parent.parent.name != "instances" \
            or instance is None:
        raise _refuse(path, "it is not the trace_marker of a capture's tracefs instance "
                            "(/.../instances/swaptrace-capture-PID/trace_marker)")
    if not _is_ancestor(int(instance["pid"])):
        raise _refuse(path, f"the capture that made it (pid {instance['pid']}) is not this program or its ancestor")
    try:
        before = os.stat(p)
    except OSError as exc:
        raise _refuse(path, exc.strerror or str(exc)) from None
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(path, f"it is {_kind(before.st_mode)}")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        why = "a FIFO without a reader" if exc.errno == errno.ENXIO else (exc.strerror or str(exc))
        raise _refuse(path, why) from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise _refuse(path, "it changed between its check and its opening")
        fs = _fstype(fd)
        if fs != "tracefs":
            raise _refuse(path, f"it lies on {fs or 'an unknown filesystem'}, not on tracefs")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fd() -> int | None:
    """The marker file's descriptor (opened and checked once per value of the variable), or None outside a capture."""
    path = os.environ.get(MARKER_ENV)
    if not path:
        return None
    if _state["path"] != path:  # first call, or the variable changed (a test, a fork)
        if _state["fd"] is not None:
            os.close(_state["fd"])
            _state.update(fd=None, path=None)
        _state["fd"] = open_marker(path)
        _state["path"] = path
    return _state["fd"]


def check_marker() -> str | None:
    """The marker file's path if ``SWAPTRACE_MARKER`` names a capture's own (opened now), None if it is unset;
    :class:`MarkerError` otherwise. Call it before a long start-up, so a stray value is refused at once."""
    return _state["path"] if _fd() is not None else None


def _write(line: str) -> None:
    fd = _fd()
    if fd is None:
        return
    try:
        os.write(fd, line.encode())
    except OSError as exc:  # the capture removed its instance, or the descriptor went away
        raise MarkerError(f"{MARKER_ENV}={_state['path']!r}: cannot write a mark: {exc.strerror or exc}") from None


def _step_number(step) -> int:
    try:
        if isinstance(step, bool):
            raise TypeError
        n = operator.index(step)  # int and numpy's integers; not float, str, numpy's bool
    except TypeError:
        raise TypeError(f"mark_step: the step must be an integer, got {step!r} ({type(step).__name__})") from None
    if not 0 <= n <= MAX_STEP:
        raise MarkerError(f"mark_step: the step must be in [0, {MAX_STEP}] (stored as step + 1 in a uint32 column), "
                          f"got {n}")
    return n


def mark_step(step: int | None = None) -> None:
    """Mark the start of a training step (a no-op outside a capture).

    Parameters
    ----------
    step : int, optional
        The step's number, an integer in ``[0, MAX_STEP]``; by default one more than the last one marked
        (0 for the first call).

    Raises
    ------
    TypeError
        ``step`` is not an integer (``True``, ``2.9``, ``"3"``).
    MarkerError
        A ``ValueError``: ``step`` is out of range, or ``SWAPTRACE_MARKER`` is not a capture's marker file.
    """
    n = _step_number(_state["next"] if step is None else step)
    _write(f"swaptrace step {n}\n")
    _state["next"] = n + 1


def mark(text: str) -> None:
    """Write a marker line ``swaptrace TEXT`` (a no-op outside a capture); see the module docstring for a label.

    Raises
    ------
    TypeError
        ``text`` is not a string.
    MarkerError
        A ``ValueError``: the label is empty, has a control character, is too long, or starts with a word the
        capture reads as its own (``step``, ``start``); or ``SWAPTRACE_MARKER`` is not a capture's marker file.
    """
    if not isinstance(text, str):
        raise TypeError(f"mark: the label must be a string, got {text!r} ({type(text).__name__})")
    if not text.strip() or not text.isprintable():
        raise MarkerError(f"mark: the label must be one line of printable characters, got {text!r}")
    if len(text.encode()) > MAX_LABEL_BYTES:
        raise MarkerError(f"mark: the label is {len(text.encode())} bytes, more than {MAX_LABEL_BYTES}")
    if text.split()[0] in RESERVED_WORDS:
        raise MarkerError(f"mark: a label may not start with {text.split()[0]!r} (the capture's own marker; "
                          f"mark_step marks steps), got {text!r}")
    _write(f"swaptrace {text}\n")
