"""A private tracefs instance recording ``block_rq_issue`` on one device.

Each capture makes its own instance (``instances/swaptrace-capture-<pid>``)
so it neither disturbs nor sees anyone else's tracing, sets the ``mono``
clock (comparable across CPUs, unlike ``local``), filters the event to the
swap device in the kernel, and streams ``trace_pipe`` into a file from a
thread so the ring buffer never fills. Overruns still possible under an
extreme burst are detected from ``per_cpu/cpuN/stats`` and ``[LOST n EVENTS]``
notes, never silently ignored. (docs/capture.md; kernel
Documentation/trace/ftrace.rst, "Instances".)
"""

from __future__ import annotations

import errno
import os
import re
import select
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from swaptrace.errors import PrivilegeError

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
EVENT = "events/block/block_rq_issue"
#: a marker line as ``trace_pipe`` prints it: ``... 221.540644: tracing_mark_write: swaptrace step 0``
_MARK_LINE = re.compile(rb"\s(\d+)\.(\d+): tracing_mark_write: (swaptrace [^\n]*)")
_MOUNTED_BY_US: set[Path] = set()  # tracefs mounts this process made (unmounted again on teardown)


def tracefs_root(mount: bool = True) -> Path:
    """The tracefs mount point, mounting it at /sys/kernel/tracing if needed."""
    for root in TRACEFS_CANDIDATES:
        if (root / "instances").is_dir():
            return root
    if mount:
        target = TRACEFS_CANDIDATES[0]
        res = subprocess.run(["mount", "-t", "tracefs", "nodev", str(target)], capture_output=True, text=True)
        if res.returncode == 0 and (target / "instances").is_dir():
            _MOUNTED_BY_US.add(target)
            return target
        raise PrivilegeError(f"tracefs is not available (mount -t tracefs failed: {res.stderr.strip() or res.returncode})")
    raise PrivilegeError("tracefs is not mounted at /sys/kernel/tracing")


def dev_t(major: int, minor: int) -> int:
    """Kernel-internal dev_t as the tracepoint's ``dev`` field stores it (MINORBITS = 20)."""
    return (major << 20) | minor


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


class BlockTrace:
    """Record ``block_rq_issue`` for one block device into ``out_path``.

    Parameters
    ----------
    name : str
        Instance name (``swaptrace-capture-<pid>``); also how leftovers are found.
    device : (major, minor) or None
        The block device to keep; None records no block requests, only the
        markers written to :meth:`marker_path` (a program's steps in a run
        without swap).
    out_path : Path
        Text file receiving the raw ``trace_pipe`` lines.
    buffer_kb : int
        Per-CPU ring-buffer size in KiB. An event takes about 70 bytes, so
        the default 32 MiB holds ~480k requests per CPU even if the reader
        stalls.
    on_marker : callable, optional
        Called from the reading thread as ``on_marker(t_ns, text)`` for each
        ``swaptrace ...`` marker line as it is read (``t_ns`` on the ``mono``
        trace clock, which is ``CLOCK_MONOTONIC``: comparable with
        :func:`time.monotonic_ns`). ``trace_pipe`` wakes its reader per event,
        so this comes well within the reader's 50 ms poll.
    """

    def __init__(self, name: str, device: tuple[int, int] | None, out_path: Path, buffer_kb: int = 32 * 1024,
                 extra_events: tuple[str, ...] = (), on_marker: Callable[[int, str], None] | None = None):
        self.root = tracefs_root()
        #: ``system/event`` names recorded besides the block requests (e.g. the reclaim tracepoints)
        self.extra_events = tuple(extra_events)
        #: those of them this kernel does not have (found by :meth:`setup`; not recorded)
        self.missing_events: list[str] = []
        self.dir = self.root / "instances" / name
        self.device = device
        self.out_path = Path(out_path)
        self.buffer_kb = int(buffer_kb)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.bytes_read = 0
        self.on_marker = on_marker
        self._carry = b""

    def setup(self) -> None:
        """Create the instance, set clock, buffer and filter (event still off)."""
        try:
            self.dir.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise PrivilegeError(f"cannot create tracefs instance {self.dir}: {exc.strerror}") from None
        _write(self.dir / "tracing_on", "0")
        _write(self.dir / "trace_clock", "mono")
        _write(self.dir / "buffer_size_kb", str(self.buffer_kb))
        if self.device is not None:
            _write(self.dir / EVENT / "filter", f"dev == {dev_t(*self.device)}")
        self.missing_events = [e for e in self.extra_events if not (self.dir / "events" / e / "enable").exists()]
        _write(self.dir / "trace", "")  # clear

    def _extra_knobs(self) -> list[Path]:
        return [self.dir / "events" / e / "enable" for e in self.extra_events if e not in self.missing_events]

    def _event_knobs(self) -> list[Path]:
        return ([self.dir / EVENT / "enable"] if self.device is not None else []) + self._extra_knobs()

    def _scan_markers(self, chunk: bytes) -> None:
        """Hand the complete marker lines of ``chunk`` to ``on_marker`` (a line may straddle two chunks)."""
        data = self._carry + chunk
        cut = data.rfind(b"\n") + 1
        self._carry = data[cut:][-4096:]
        if b"tracing_mark_write" not in data[:cut]:
            return
        for m in _MARK_LINE.finditer(data[:cut]):
            t_ns = int(m.group(1)) * 1_000_000_000 + int((m.group(2) + b"000000000")[:9])
            self.on_marker(t_ns, m.group(3).decode(errors="replace").strip())

    def marker_path(self) -> Path:
        """Where the child writes its ``swaptrace step N`` markers."""
        return self.dir / "trace_marker"

    def start(self) -> None:
        """Enable the events and start streaming ``trace_pipe`` to the file."""
        for knob in self._event_knobs():
            _write(knob, "1")
        _write(self.dir / "tracing_on", "1")
        self._thread = threading.Thread(target=self._pump, name="swaptrace-trace-pipe", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            fd = os.open(self.dir / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
            try:
                with open(self.out_path, "wb") as out:
                    idle_after_stop = 0
                    while True:
                        stopping = self._stop.is_set()
                        ready, _, _ = select.select([fd], [], [], 0.05)
                        got = 0
                        if ready or stopping:
                            try:
                                chunk = os.read(fd, 1 << 20)
                            except BlockingIOError:
                                chunk = b""
                            except OSError as exc:
                                if exc.errno != errno.EAGAIN:
                                    raise
                                chunk = b""
                            got = len(chunk)
                            if got:
                                out.write(chunk)
                                self.bytes_read += got
                                if self.on_marker is not None:
                                    self._scan_markers(chunk)
                        # after stop, a few empty reads in a row: a read can come back empty
                        # while a per-CPU page is still being handed over
                        idle_after_stop = idle_after_stop + 1 if stopping and got == 0 else 0
                        if idle_after_stop >= 5:
                            break
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001 - reported by stop(), raised there
            self._error = exc

    def stop(self) -> dict:
        """Turn tracing off, drain the pipe, and return buffer statistics.

        Returns
        -------
        dict
            ``overrun`` (events overwritten before being read) and
            ``dropped`` (events the buffer refused), summed over CPUs.
        """
        try:
            for knob in self._event_knobs():
                _write(knob, "0")
            _write(self.dir / "tracing_on", "0")
        except OSError:
            pass
        stats = self.stats()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._error is not None:
            raise self._error
        return stats

    def stats(self) -> dict:
        total = {"overrun": 0, "dropped": 0, "entries": 0}
        for stat in sorted((self.dir / "per_cpu").glob("cpu*/stats")):
            text = stat.read_text()
            for key, pattern in (("overrun", r"^overrun: (\d+)"), ("dropped", r"^dropped events: (\d+)"),
                                 ("entries", r"^entries: (\d+)")):
                m = re.search(pattern, text, re.M)
                if m:
                    total[key] += int(m.group(1))
        return total

    def teardown(self) -> None:
        """Disable the event and remove the instance (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        remove_instance(self.dir)
        if self.root in _MOUNTED_BY_US:  # leave the system as we found it (best effort: busy if others use it)
            res = subprocess.run(["umount", str(self.root)], capture_output=True)
            if res.returncode == 0:
                _MOUNTED_BY_US.discard(self.root)


def remove_instance(path: Path) -> None:
    """Disable everything in a tracefs instance and delete it."""
    if not path.exists():
        return
    # every event of the instance (block requests, reclaim tracepoints): the global switch, then tracing
    for knob in (path / EVENT / "enable", path / "events" / "enable", path / "tracing_on"):
        try:
            _write(knob, "0")
        except OSError:
            pass
    try:
        path.rmdir()
    except FileNotFoundError:
        pass


def list_instances(prefix: str) -> list[Path]:
    """Existing tracefs instances whose name starts with ``prefix``."""
    for root in TRACEFS_CANDIDATES:
        inst = root / "instances"
        if inst.is_dir():
            return sorted(p for p in inst.iterdir() if p.name.startswith(prefix))
    return []
